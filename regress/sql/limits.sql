-- Limits that guard exclusion and leases: path depth, dlock.max_ttl over
-- every way a lease is made, and DISCARD ALL ending a session's locks.

-- report 'SQLSTATE: message' of a statement, or 'ok'
CREATE FUNCTION pg_temp.outcome(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE q;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END
$$;

-- Paths: at most 64 segments; a deeper one is refused, never truncated
-- (once, the worker kept 256 ancestors and dropped the rest: an exclusive
-- holder of a 300-deep path did not stop an exclusive lock on its ancestor)
SELECT dlock_acquire(repeat('/d', 65));
SELECT q, pg_temp.outcome(q) FROM (VALUES
    ($$SELECT dlock_acquire(repeat('/d', 300), 'EX', owner => 'a1')$$),
    ($$SELECT dlock_try_acquire(repeat('/d', 65))$$),
    ($$SELECT dlock_acquire_all(ARRAY['/x', repeat('/d', 65)])$$),
    ($$SELECT dlock_release(repeat('/d', 65))$$),
    ($$SELECT dlock_renew(repeat('/d', 65))$$),
    ($$SELECT dlock_convert(repeat('/d', 65), 'PR')$$)
) AS t(q);
-- a flat name may hold any number of slashes
SELECT dlock_acquire('x' || repeat('/d', 300)) > 0 AS flat_ok, dlock_release('x' || repeat('/d', 300));
-- the deepest path holds its ancestors' intentions all the way up
SELECT dlock_acquire(repeat('/d', 64), 'EX', ttl => '1 min', owner => 'a1') > 0 AS deepest;
SELECT count(*) AS intentions, bool_and(mode = 'CW') AS all_cw
  FROM dlock.locks WHERE implied AND name LIKE '/d%';
SELECT dlock_try_acquire(repeat('/d', n), 'EX', owner => 'b1') AS ancestor_refused
  FROM (VALUES (1), (2), (60), (63)) AS t(n);
SELECT dlock_release_all('a1');
SELECT count(*) AS left_behind FROM dlock.locks;

-- dlock.max_ttl bounds every lease: given, defaulted, renewed (the lease
-- starts when the worker decides, a little after now(): an unbounded one
-- would run for days, so "under an hour" tells them apart on any machine)
SET dlock.max_ttl = '60s';
SELECT pg_temp.outcome($$SELECT dlock_acquire('ttl/given', ttl => '61 s', owner => 'kt')$$);
SET dlock.default_ttl = '2d';
SELECT dlock_acquire('ttl/defaulted', owner => 'kt') > 0 AS defaulted;
SELECT expires_at < now() + interval '1 hour' AS within_max FROM dlock.locks WHERE name = 'ttl/defaulted';
SELECT dlock_renew('ttl/defaulted', owner => 'kt') < now() + interval '1 hour' AS renewed_within_max;
-- a lease taken before the limit was lowered renews within it
RESET dlock.max_ttl;
SELECT dlock_acquire('ttl/older', ttl => '1 day', owner => 'kt') > 0 AS older;
SET dlock.max_ttl = '60s';
SELECT dlock_renew('ttl/older', owner => 'kt') < now() + interval '1 hour' AS older_renewed_within_max;
-- re-entrant acquire with ttl: checked like any given ttl
SELECT pg_temp.outcome($$SELECT dlock_acquire('ttl/older', ttl => '2 min', owner => 'kt')$$);
SELECT dlock_release_all('kt');
RESET dlock.max_ttl;
RESET dlock.default_ttl;

-- DISCARD ALL (what poolers run between clients) ends the session's locks,
-- as it ends advisory locks; owner-keyed locks belong to their key and stay
SELECT dlock_acquire('discard/a') > 0, dlock_acquire('discard/a') > 0, dlock_acquire('/discard/b/c', 'PR') > 0;
SELECT dlock_acquire('discard/kept', ttl => '1 min', owner => 'kd') > 0 AS keyed;
SELECT count(*) AS before_discard FROM dlock.locks WHERE name LIKE '%discard%';
DISCARD ALL;
SELECT name, owner IS NOT NULL AS keyed FROM dlock.locks WHERE name LIKE '%discard%' ORDER BY name;
-- DISCARD in a transaction block fails, and ends nothing
SELECT dlock_acquire('discard/a') > 0;
BEGIN;
DISCARD ALL;
ROLLBACK;
SELECT count(*) AS still_held FROM dlock.locks WHERE name = 'discard/a';
-- other DISCARDs leave locks alone
DISCARD PLANS;
DISCARD TEMP;
SELECT count(*) AS still_held FROM dlock.locks WHERE name = 'discard/a';
SELECT dlock_release_all() AS released, dlock_release_all('kd') AS released_keyed;
