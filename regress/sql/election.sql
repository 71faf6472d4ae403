-- SPDX-License-Identifier: PostgreSQL
-- Leader election: dlock_campaign, dlock_proclaim, dlock_leader and every
-- error (the failover by lease expiry with NOTIFY is in
-- regress/scenarios/leader.scen).  Owner keys stand for several nodes.
SELECT dlock_campaign('el/svc', 'node-a:5432', owner => 'el-a', ttl => '1 min') AS term \gset
SELECT value, token = :term AS is_term, owner, pid = pg_backend_pid() AS pid_ok,
       expires_at > now() AS leased FROM dlock_leader('el/svc');
-- the next campaign waits its turn (a kept place here)
SELECT dlock_campaign('el/svc', 'node-b:5432', timeout => '10 ms', owner => 'el-b',
                      ttl => '1 min', keep_place => true) IS NULL AS waits;
SELECT name, mode, granted, owner, value FROM dlock.locks WHERE name = 'el/svc' ORDER BY token;
-- the leader changes its value; its term stays
SELECT dlock_proclaim('el/svc', 'node-a:6543', 'el-a') = :term AS same_term;
SELECT value FROM dlock_leader('el/svc');
SELECT dlock_proclaim('el/svc', 'node-a:6543', 'el-a') = :term AS same_value_again;
-- only the leader proclaims
SELECT dlock_proclaim('el/svc', 'node-b:1', 'el-b');
SELECT dlock_proclaim('el/svc', 'x');
SELECT dlock_proclaim('el/none', 'x', 'el-a');
-- resigning hands the lead on with the successor's own value, a later term
SELECT dlock_release('el/svc', 'el-a');
SELECT value, owner, token > :term AS later_term FROM dlock_leader('el/svc');
SELECT dlock_check('el/svc', :term) AS old_term_current;
SELECT dlock_campaign('el/svc', 'node-b:7000', owner => 'el-b', keep_place => true) > :term AS collected;
SELECT value FROM dlock_leader('el/svc');
SELECT dlock_campaign('el/svc', 'again', owner => 'el-b');
SELECT dlock_renew('el/svc', '30 s', 'el-b') IS NOT NULL AS renewed;
-- a name is a lock, a semaphore or an election, never two of them
SELECT dlock_acquire('el/svc', timeout => '10 ms');
SELECT dlock_try_acquire('el/svc');
SELECT dlock_semaphore('el/svc', 2);
SELECT dlock_convert('el/svc', 'shared', owner => 'el-b');
SELECT dlock_acquire('el/lock') > 0 AS lock_held;
SELECT dlock_campaign('el/lock', 'x', timeout => '10 ms');
SELECT dlock_proclaim('el/lock', 'x');
SELECT dlock_release('el/lock');
SELECT dlock_release_all('el-b');
SELECT count(*) AS leaders FROM dlock_leader('el/svc');
-- a session's lead ends with the session (here: released)
SELECT dlock_campaign('el/sess', '') > 0 AS session_leads;
SELECT value = '' AS empty_value, owner IS NULL AS session_owned FROM dlock_leader('el/sess');
SELECT dlock_release('el/sess');
-- bad input
SELECT dlock_campaign('el/svc', NULL);
SELECT dlock_campaign('el/svc', repeat('x', 1025));
SELECT dlock_campaign('el/svc', repeat('x', 1024), timeout => '10 ms') > 0 AS longest_value;
SELECT dlock_release('el/svc');
SELECT dlock_campaign('/el/svc', 'x');
SELECT dlock_campaign('', 'x');
SELECT dlock_campaign('el/svc', 'x', keep_place => true);
SELECT dlock_proclaim('el/svc', NULL);
SELECT dlock_proclaim('el/svc', repeat('x', 1025));
SELECT dlock_leader(NULL);
SELECT count(*) AS left_behind FROM dlock.locks WHERE name LIKE 'el/%';
