-- SPDX-License-Identifier: PostgreSQL
-- Bad input: a clear error with a proper SQLSTATE, and nothing disturbed.

-- report 'SQLSTATE: message' of a statement, or 'ok'
CREATE FUNCTION pg_temp.outcome(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE q;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END
$$;

-- a lock held across all the errors below
SELECT dlock_acquire('err/held') AS held \gset

-- the messages with their details and hints
SELECT dlock_acquire(NULL);
SELECT dlock_acquire('');
SELECT dlock_acquire(repeat('x', 1025));
SELECT dlock_acquire('err/a', 'bogus');
SELECT dlock_acquire('err/a', ttl => '-1 s');
SELECT dlock_acquire('err/a', owner => '');
SELECT dlock_renew('err/not-held');

SELECT q, pg_temp.outcome(q) FROM (VALUES
    ($$SELECT dlock_acquire(NULL)$$),
    ($$SELECT dlock_acquire('')$$),
    ($$SELECT dlock_acquire(repeat('x', 1025))$$),
    ($$SELECT dlock_acquire('err/a', NULL)$$),
    ($$SELECT dlock_acquire('err/a', 'bogus')$$),
    ($$SELECT dlock_acquire('err/a', 'exclusivex')$$),
    ($$SELECT dlock_acquire('err/a', ttl => '0 s')$$),
    ($$SELECT dlock_acquire('err/a', ttl => '-1 s')$$),
    ($$SELECT dlock_acquire('err/a', ttl => '1 day -25 hours')$$),
    ($$SELECT dlock_acquire('err/a', ttl => '2000 years')$$),
    ($$SELECT dlock_acquire('err/a', timeout => '0')$$),
    ($$SELECT dlock_acquire('err/a', timeout => '-5 s')$$),
    ($$SELECT dlock_acquire('err/a', owner => '')$$),
    ($$SELECT dlock_acquire('err/a', owner => E'tab\there')$$),
    ($$SELECT dlock_acquire('err/a', owner => repeat('k', 256))$$),
    ($$SELECT dlock_try_acquire(NULL)$$),
    ($$SELECT dlock_try_acquire('err/a', 'nope')$$),
    ($$SELECT dlock_try_acquire('err/a', ttl => '0 s')$$),
    ($$SELECT dlock_release(NULL)$$),
    ($$SELECT dlock_release('')$$),
    ($$SELECT dlock_release('err/a', owner => '')$$),
    ($$SELECT dlock_renew(NULL)$$),
    ($$SELECT dlock_renew('err/not-held')$$),
    ($$SELECT dlock_renew('err/not-held', owner => 'someone')$$),
    ($$SELECT dlock_renew('err/held', ttl => '-1 s')$$),
    ($$SELECT dlock_release_all('')$$),
    ($$SELECT dlock_acquire('err/held', 'exclusive')$$)
) AS t(q);

-- the limits still admit what is within them
SELECT pg_temp.outcome($$SELECT dlock_acquire('err/b', owner => repeat('k', 255), ttl => '1 min')$$);
SELECT pg_temp.outcome($$SELECT dlock_acquire('err/c', ttl => '1 day')$$);
-- dlock.max_ttl is one day unless a superuser raises it (0: no limit)
SHOW dlock.max_ttl;
SELECT pg_temp.outcome($$SELECT dlock_acquire('err/e', ttl => '1 day 1 s')$$);
SET dlock.max_ttl = 0;
SELECT pg_temp.outcome($$SELECT dlock_acquire('err/e', ttl => '999 years')$$);
RESET dlock.max_ttl;

-- dlock.max_ttl caps leases
SET dlock.max_ttl = '1min';
SELECT dlock_acquire('err/a', ttl => '2 min');
SELECT pg_temp.outcome($$SELECT dlock_acquire('err/d', ttl => '1 min')$$);
RESET dlock.max_ttl;

-- nothing was disturbed: the held lock is intact, no stray rows
SELECT name, token = :held AS same_token, count
  FROM dlock.locks WHERE name LIKE 'err/%' AND owner IS NULL ORDER BY name;
SELECT count(*) AS waiters FROM dlock.locks WHERE NOT granted;
SELECT dlock_release_all(repeat('k', 255));
SELECT dlock_release_all();
SELECT count(*) FROM dlock.locks WHERE name LIKE 'err/%';

-- malformed paths
SELECT dlock_acquire('/a//b');
SELECT dlock_acquire('/a/b/');
SELECT dlock_try_acquire('/');
SELECT dlock_acquire('a//b/') > 0 AS flat_names_are_free_form;
SELECT dlock_release('a//b/');
SELECT pg_temp.outcome($$SELECT dlock_acquire('/a//b')$$) AS empty_segment,
       pg_temp.outcome($$SELECT dlock_renew('/x/')$$) AS trailing_slash;

-- Limits that guard exclusion and leases: path depth, dlock.max_ttl over
-- every way a lease is made, and DISCARD ALL ending a session's locks.

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

-- a lock taken in a parallel worker would belong to the worker's session
-- and end with it: every function that takes or releases locks refuses to
-- run during a parallel operation (a caller that lies: PARALLEL SAFE)
CREATE FUNCTION public.err_par_acquire(n text) RETURNS bigint LANGUAGE plpgsql PARALLEL SAFE
    AS $$BEGIN RETURN dlock_acquire(n); END$$;
CREATE FUNCTION public.err_par_release(n text) RETURNS boolean LANGUAGE plpgsql PARALLEL SAFE
    AS $$BEGIN RETURN dlock_release(n); END$$;
CREATE ROLE dlock_err_par IN ROLE dlock_user;
SELECT set_config(CASE WHEN current_setting('server_version_num')::int >= 160000
                       THEN 'debug_parallel_query' ELSE 'force_parallel_mode' END,
                  'on', false) AS parallel;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SELECT pg_temp.outcome($$SELECT public.err_par_acquire('err/par')$$) AS superuser;
SET ROLE dlock_err_par;
SELECT pg_temp.outcome($$SELECT public.err_par_acquire('err/par')$$) AS dlock_user;
RESET ROLE;
SELECT dlock_acquire('err/par') > 0 AS outside_parallel;
SELECT pg_temp.outcome($$SELECT public.err_par_release('err/par')$$) AS release;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
SELECT set_config(CASE WHEN current_setting('server_version_num')::int >= 160000
                       THEN 'debug_parallel_query' ELSE 'force_parallel_mode' END,
                  'off', false) AS parallel;
SELECT public.err_par_release('err/par') AS released;
SELECT count(*) AS left_behind FROM dlock.locks WHERE name = 'err/par';
DROP FUNCTION public.err_par_acquire(text), public.err_par_release(text);
DROP ROLE dlock_err_par;

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
