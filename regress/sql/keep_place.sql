-- SPDX-License-Identifier: PostgreSQL
-- keep_place: a request of an owner key that stays in line when its call
-- stops waiting, for the owner's next call (the multi-session behaviour is
-- in regress/scenarios/keep_place.scen).
SELECT dlock_acquire('kp/x', owner => 'kp-holder', ttl => '1 min') > 0 AS held;

-- the place is kept: NULL, and the view shows it waiting with no pid and
-- the end of its lease
SELECT dlock_acquire('kp/x', owner => 'kp-1', timeout => '10 ms', ttl => '1 min',
                     keep_place => true) IS NULL AS timed_out;
SELECT position, owner, pid IS NULL AS no_pid, backend_start IS NULL AS no_session,
       expires_at > now() + '50 s' AS lease_about_1_min
  FROM dlock.locks WHERE name = 'kp/x' AND NOT granted;
SELECT token AS ticket FROM dlock.locks WHERE name = 'kp/x' AND NOT granted \gset
SELECT count(*) AS rows_kept FROM dlock.queue WHERE owner = 'kp-1' AND keep AND kept_until IS NOT NULL;

-- the next call resumes it: the same ticket, not a new place
SELECT dlock_acquire('kp/x', owner => 'kp-1', timeout => '10 ms', ttl => '1 min',
                     keep_place => true) IS NULL AS timed_out_again;
SELECT token = :ticket AS same_ticket, count(*) OVER () AS waiting
  FROM dlock.locks WHERE name = 'kp/x' AND NOT granted;

-- another mode is another request; a call without keep_place resumes the
-- place too, and its timeout then takes it out of line
SELECT dlock_acquire('kp/x', 'shared', owner => 'kp-1', timeout => '10 ms') IS NULL AS other_mode;
SELECT count(*) AS waiting FROM dlock.locks WHERE name = 'kp/x' AND NOT granted;
SELECT dlock_acquire('kp/x', owner => 'kp-1', timeout => '10 ms') IS NULL AS plain_call;
SELECT count(*) AS waiting FROM dlock.locks WHERE name = 'kp/x' AND NOT granted;

-- granted while no call waits: held with one uncollected level, which the
-- owner's next call collects (the same token, count 1)
SELECT dlock_acquire('kp/x', owner => 'kp-2', timeout => '10 ms', ttl => '1 min',
                     keep_place => true) IS NULL AS kept;
SELECT dlock_release('kp/x', 'kp-holder');
SELECT owner, count, kept FROM dlock.held WHERE name = 'kp/x';
SELECT token AS granted_token FROM dlock.locks WHERE name = 'kp/x' AND granted \gset
SELECT dlock_acquire('kp/x', owner => 'kp-2', keep_place => true) = :granted_token AS collected;
SELECT owner, count, kept FROM dlock.held WHERE name = 'kp/x';
-- collected once: the call after it is re-entrant
SELECT dlock_acquire('kp/x', owner => 'kp-2') = :granted_token AS reentrant;
SELECT count FROM dlock.held WHERE name = 'kp/x';
SELECT dlock_release_all('kp-2');

-- several names: every part kept and resumed together, in place
SELECT dlock_acquire('kp/b', owner => 'kp-holder', ttl => '1 min') > 0 AS held;
SELECT dlock_acquire_all(ARRAY['kp/b', 'kp/a'], owner => 'kp-3', timeout => '10 ms',
                         ttl => '1 min', keep_place => true) IS NULL AS kept;
SELECT name, position, pid IS NULL AS no_pid FROM dlock.locks
 WHERE owner = 'kp-3' ORDER BY name;
SELECT min(token) AS first_ticket FROM dlock.locks WHERE owner = 'kp-3' \gset
SELECT dlock_acquire_all(ARRAY['kp/a', 'kp/b'], owner => 'kp-3', timeout => '10 ms',
                         ttl => '1 min', keep_place => true) IS NULL AS kept_again;
SELECT min(token) = :first_ticket AS same_place, count(*) AS parts
  FROM dlock.locks WHERE owner = 'kp-3';
SELECT dlock_release('kp/b', 'kp-holder');
SELECT array_length(dlock_acquire_all(ARRAY['kp/a', 'kp/b'], owner => 'kp-3',
                                      keep_place => true), 1) AS collected_both;
SELECT name, count, kept FROM dlock.held WHERE owner = 'kp-3' ORDER BY name;
SELECT dlock_release_all('kp-3');

-- release withdraws a kept place (true); then there is nothing to release
SELECT dlock_acquire('kp/x', owner => 'kp-holder', ttl => '1 min') > 0 AS held;
SELECT dlock_acquire('kp/x', owner => 'kp-4', timeout => '10 ms', keep_place => true) IS NULL AS kept;
SELECT dlock_release('kp/x', 'kp-4') AS withdrawn;
SELECT dlock_release('kp/x', 'kp-4') AS nothing_left;
SELECT count(*) AS kp4_rows FROM dlock.locks WHERE owner = 'kp-4';
SELECT dlock_release_all('kp-holder');

-- errors: only owner keys keep places
SELECT dlock_acquire('kp/x', timeout => '10 ms', keep_place => true);
SELECT dlock_acquire_all(ARRAY['kp/x'], timeout => '10 ms', keep_place => true);
-- NULL is false
SELECT dlock_acquire('kp/x', keep_place => NULL) > 0 AS session_lock;
SELECT dlock_release('kp/x');
SELECT count(*) AS left_behind FROM dlock.locks WHERE name LIKE 'kp/%';
