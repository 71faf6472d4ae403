-- SPDX-License-Identifier: PostgreSQL
-- Owner keys: locks that belong to a key, not to the session, always with
-- a lease; the view and its join with pg_stat_activity.

SELECT dlock_new_owner() AS key \gset
SELECT length(:'key') AS key_length, :'key' ~ '^[0-9a-f]{32}$' AS hex,
       dlock_new_owner() <> dlock_new_owner() AS random;

-- an owner-keyed lock gets dlock.default_ttl when no ttl is given
SET dlock.default_ttl = '10s';
SELECT dlock_acquire('own/a', owner => :'key') AS t1 \gset
SELECT owner = :'key' AS keyed, expires_at BETWEEN clock_timestamp() + '9 s'
                                           AND clock_timestamp() + '10 s' AS default_ttl
  FROM dlock.locks WHERE name = 'own/a';
RESET dlock.default_ttl;

-- the session does not hold it; the key does, re-entrantly
SELECT dlock_release('own/a');
SELECT dlock_try_acquire('own/a') IS NULL AS session_refused;
SELECT dlock_acquire('own/a', owner => :'key') = :t1 AS same_token;
SELECT dlock_renew('own/a', '1 hour', owner => :'key') > clock_timestamp() + '59 min' AS renewed;
SELECT dlock_release('own/a', owner => :'key');
SELECT count FROM dlock.locks WHERE name = 'own/a';

-- two keys are two owners
SELECT dlock_try_acquire('own/a', owner => 'other-key') IS NULL AS other_key_refused;
SELECT dlock_try_acquire('own/a', 'shared', owner => 'other-key') IS NULL AS shared_refused_too;

-- the view joins pg_stat_activity on pid and backend_start
SELECT dlock_acquire('own/s') > 0 AS session_lock;
SELECT l.name, l.owner IS NOT NULL AS keyed, a.pid = pg_backend_pid() AS this_backend
  FROM dlock.locks l
  JOIN pg_stat_activity a ON a.pid = l.pid AND a.backend_start = l.backend_start
 WHERE l.name LIKE 'own/%' ORDER BY l.name;

-- release_all with the key ends only the key's locks
SELECT dlock_release_all(:'key');
SELECT name FROM dlock.locks WHERE name LIKE 'own/%' ORDER BY name;
SELECT dlock_release_all(:'key');
SELECT dlock_release_all();

-- owner keys guard release: dlock_monitor sees the lock but not its key,
-- nor anything derived from it
SELECT dlock_acquire('own/secret', owner => 'the-secret-key', ttl => '1 min') > 0 AS held;
CREATE ROLE dlock_test_reader IN ROLE dlock_monitor;
SET ROLE dlock_test_reader;
SELECT owner IS NULL AS key_hidden, keyed, role
  FROM dlock.locks WHERE name = 'own/secret';
RESET ROLE;
SELECT owner FROM dlock.locks WHERE name = 'own/secret';
DROP ROLE dlock_test_reader;
SELECT dlock_release_all('the-secret-key');
