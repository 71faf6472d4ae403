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
SELECT pg_temp.outcome($$SELECT dlock_acquire('err/c', ttl => '999 years')$$);

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
