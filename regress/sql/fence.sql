-- SPDX-License-Identifier: PostgreSQL
-- dlock_check(name, token): fencing inside the caller's own transaction,
-- and dlock_holder(name).
SELECT dlock_acquire('fence/a') AS t \gset
SELECT dlock_check('fence/a', :t) AS current,
       dlock_check('fence/b', :t) AS other_name,
       dlock_check('fence/a', :t + 1) AS other_token;

-- the pattern: a write that happens only while the caller's grant is current
CREATE TEMP TABLE fenced (k int PRIMARY KEY, v text);
INSERT INTO fenced VALUES (1, 'before');
UPDATE fenced SET v = 'written under the lock' WHERE k = 1 AND dlock_check('fence/a', :t);
SELECT v FROM fenced;

-- released: false at once, also inside a REPEATABLE READ transaction whose
-- snapshot still shows the row (the check reads the latest state)
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT count(*) AS rows_in_snapshot FROM dlock.locks WHERE name = 'fence/a';
SELECT dlock_release('fence/a');
SELECT count(*) AS rows_still_in_snapshot FROM dlock.locks WHERE name = 'fence/a';
SELECT dlock_check('fence/a', :t) AS current_after_release;
UPDATE fenced SET v = 'too late' WHERE k = 1 AND dlock_check('fence/a', :t);
COMMIT;
SELECT v FROM fenced;

-- a lease: current while it runs, false once it ran out (before any reaping)
SELECT dlock_acquire('fence/lease', ttl => '30 s', owner => 'fence-owner') AS lt \gset
SELECT dlock_check('fence/lease', :lt) AS lease_current;
SELECT dlock_renew('fence/lease', '0.2 s', 'fence-owner') IS NOT NULL AS renewed_short;
SELECT pg_sleep(0.5);
SELECT dlock_check('fence/lease', :lt) AS lease_ran_out;
SELECT dlock_release('fence/lease', 'fence-owner') AS released_after_expiry;

-- a conversion gives a new token: the old one is no longer current
SELECT dlock_acquire('fence/c', 'PR') AS ct \gset
SELECT dlock_convert('fence/c', 'EX') AS ct2 \gset
SELECT dlock_check('fence/c', :ct) AS old_token, dlock_check('fence/c', :ct2) AS new_token;
SELECT dlock_release('fence/c');

-- bad input
SELECT dlock_check(NULL, 1);
SELECT dlock_check('fence/a', NULL);
SELECT dlock_check('', 1);
SELECT dlock_check('/a//b', 1);

-- dlock_holder: who holds a name, in token order; nothing when free
SELECT * FROM dlock_holder('fence/h');
SELECT dlock_acquire('fence/h', 'PR') > 0 AS shared_by_session,
       dlock_acquire('fence/h', 'PR', ttl => '1 h', owner => 'fence-k') > 0 AS shared_by_key;
SELECT mode, owner, pid = pg_backend_pid() AS mine, count, expires_at IS NOT NULL AS lease
  FROM dlock_holder('fence/h');
SELECT dlock_release('fence/h'), dlock_release('fence/h', 'fence-k');
SELECT count(*) AS holders_after_release FROM dlock_holder('fence/h');
DROP TABLE fenced;
