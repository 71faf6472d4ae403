-- SPDX-License-Identifier: PostgreSQL
-- Counting semaphores: dlock_semaphore, dlock_try_semaphore,
-- dlock_semaphore_available, and every error (the waits are in
-- regress/scenarios/semaphore.scen).  Owner keys stand for several owners.
SELECT dlock_semaphore('sem/a', 3, owner => 'sem-1') > 0 AS one;
SELECT dlock_semaphore('sem/a', 3, 2, owner => 'sem-2') > 0 AS two;
SELECT dlock_semaphore_available('sem/a') AS available;
SELECT dlock_try_semaphore('sem/a', 3, 1, owner => 'sem-3') IS NULL AS full;
SELECT name, mode, granted, owner, permits, capacity, count
  FROM dlock.locks WHERE name = 'sem/a' ORDER BY token;
SELECT mode, owner, count FROM dlock_holder('sem/a') ORDER BY token;

-- strict FIFO: 3 permits wanted at the head (a kept place), 1 free: a
-- request for 1 does not overtake it, a try neither
SELECT dlock_release('sem/a', 'sem-1');
SELECT dlock_semaphore('sem/a', 3, 3, timeout => '10 ms', owner => 'sem-4',
                       keep_place => true) IS NULL AS waits;
SELECT dlock_try_semaphore('sem/a', 3, 1, owner => 'sem-5') IS NULL AS not_overtaken;
SELECT dlock_semaphore_available('sem/a') AS available;
SELECT dlock_release('sem/a', 'sem-2');
-- granted to the kept place, collected by its owner's next call
SELECT owner, permits, kept FROM dlock.held WHERE name = 'sem/a';
SELECT dlock_semaphore('sem/a', 3, 3, owner => 'sem-4', keep_place => true) > 0 AS collected;
SELECT dlock_semaphore_available('sem/a') AS available;
-- fencing works for semaphore tokens too
SELECT dlock_check('sem/a', (SELECT token FROM dlock.locks WHERE owner = 'sem-4')) AS current;
SELECT dlock_release('sem/a', 'sem-4');
SELECT dlock_semaphore_available('sem/a') IS NULL AS unused;

-- the capacity is the server's while in use; a different one is refused
SELECT dlock_semaphore('sem/b', 2) > 0 AS held;
SELECT dlock_semaphore('sem/b', 3, owner => 'sem-6');
SELECT dlock_try_semaphore('sem/b', 1, owner => 'sem-6');
SELECT dlock_release('sem/b');
SELECT dlock_semaphore('sem/b', 3, owner => 'sem-6') > 0 AS new_capacity_when_unused;
SELECT capacity FROM dlock.locks WHERE name = 'sem/b';
SELECT dlock_release('sem/b', 'sem-6');

-- a name is a lock or a semaphore, never both
SELECT dlock_acquire('sem/c') > 0 AS lock_held;
SELECT dlock_semaphore('sem/c', 2);
SELECT dlock_try_semaphore('sem/c', 2);
SELECT dlock_release('sem/c');
SELECT dlock_semaphore('sem/c', 2) > 0 AS semaphore_held;
SELECT dlock_acquire('sem/c', timeout => '10 ms');
SELECT dlock_try_acquire('sem/c');
SELECT dlock_acquire_all(ARRAY['sem/c', 'sem/d']);
SELECT dlock_convert('sem/c', 'exclusive');
-- one set of permits per owner
SELECT dlock_semaphore('sem/c', 2);
SELECT dlock_renew('sem/c', '1 min') IS NOT NULL AS renewed;
SELECT dlock_release('sem/c');

-- capacities at the top of the range: permits whose sum passes 2^31 - 1
SELECT dlock_try_semaphore('sem/max', 2147483647, 2147483647, owner => 'kA', ttl => '1 min') > 0 AS all_taken;
SELECT dlock_try_semaphore('sem/max', 2147483647, 1, owner => 'kB', ttl => '1 min') AS one_more;
SELECT sum(permits) AS held, dlock_semaphore_available('sem/max') AS available
  FROM dlock.locks WHERE name = 'sem/max' AND granted;
SELECT dlock_try_semaphore('sem/h', 1073741824, 1073741824, owner => 'kC', ttl => '1 min') > 0 AS first_half,
       dlock_try_semaphore('sem/h', 1073741824, 1073741824, owner => 'kD', ttl => '1 min') AS second_half;
SELECT dlock_release('sem/max', owner => 'kA'), dlock_release('sem/h', owner => 'kC');

-- bad input
SELECT dlock_semaphore('sem/e', 0);
SELECT dlock_semaphore('sem/e', -1);
SELECT dlock_semaphore('sem/e', 2, 0);
SELECT dlock_semaphore('sem/e', 2, 3);
SELECT dlock_semaphore('sem/e', NULL);
SELECT dlock_semaphore('sem/e', 2, NULL);
SELECT dlock_semaphore('/sem/e', 2);
SELECT dlock_semaphore('', 2);
SELECT dlock_semaphore(NULL, 2);
SELECT dlock_semaphore('sem/e', 2, keep_place => true);
SELECT dlock_try_semaphore('sem/e', 2, 5);
SELECT dlock_semaphore('sem/e', 2, ttl => '-1 s');
SELECT count(*) AS left_behind FROM dlock.locks WHERE name LIKE 'sem/%';
