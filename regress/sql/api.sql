-- SPDX-License-Identifier: PostgreSQL
-- The SQL API in one session: acquire, re-entrancy, release, try-acquire,
-- modes, leases and renew, release_all.  Tokens differ between runs, so
-- they are compared, never printed.

-- acquire returns a positive fencing token; acquiring again is re-entrant
SELECT dlock_acquire('api/a') AS t1 \gset
SELECT :t1 > 0 AS positive;
SELECT dlock_acquire('api/a') = :t1 AS same_token;
SELECT mode, granted, count, owner IS NULL AS session_owned, expires_at IS NULL AS no_lease
  FROM dlock.locks WHERE name = 'api/a';
SELECT dlock_release('api/a');
SELECT count FROM dlock.locks WHERE name = 'api/a';
SELECT dlock_release('api/a');
SELECT count(*) FROM dlock.locks WHERE name = 'api/a';
-- releasing what is not held: false with a warning
SELECT dlock_release('api/a');

-- a later grant of the same name has a larger token
SELECT dlock_acquire('api/a') > :t1 AS token_increased;
SELECT dlock_release('api/a');

-- try-acquire: token when free, re-entrant for the holder
SELECT dlock_try_acquire('api/try') AS t2 \gset
SELECT :t2 > 0 AS positive;
SELECT dlock_try_acquire('api/try') = :t2 AS same_token;
SELECT count FROM dlock.locks WHERE name = 'api/try';

-- modes are case-insensitive; exclusive covers shared, not the reverse
SELECT dlock_acquire('api/s', 'shared') > 0 AS shared_granted;
SELECT dlock_acquire('api/s', 'SHARED') > 0 AS shared_again;
SELECT dlock_acquire('api/s', 'exclusive');
SELECT dlock_try_acquire('api/s', 'Exclusive');
SELECT mode, count FROM dlock.locks WHERE name = 'api/s';
SELECT dlock_acquire('api/x', 'Exclusive') AS t3 \gset
SELECT dlock_acquire('api/x', 'shared') = :t3 AS covered_by_exclusive;
SELECT mode, count FROM dlock.locks WHERE name = 'api/x';

-- named arguments, a lease and its renewal
SELECT dlock_acquire('api/lease', timeout => '5 s', ttl => '30 s') > 0 AS granted;
SELECT l.expires_at BETWEEN clock_timestamp() + '29 s' AND clock_timestamp() + '30 s' AS expiry_30s,
       h.ttl = '30 s' AS ttl_kept
  FROM dlock.locks l JOIN dlock.held h USING (token) WHERE l.name = 'api/lease';
-- (renew called once, in a materialized CTE: BETWEEN would evaluate it twice;
-- bounds from the statement's start and from after the call: no stall breaks them)
WITH r AS MATERIALIZED (SELECT dlock_renew('api/lease', '60 s') AS e)
SELECT e BETWEEN statement_timestamp() + '60 s' AND clock_timestamp() + '60 s' AS renewed_60s FROM r;
WITH r AS MATERIALIZED (SELECT dlock_renew('api/lease') AS e)
SELECT e BETWEEN statement_timestamp() + '60 s' AND clock_timestamp() + '60 s' AS renewed_with_own_ttl FROM r;
SELECT expires_at > clock_timestamp() + '59 s' AS view_shows_expiry
  FROM dlock.locks WHERE name = 'api/lease';

-- a session lock without lease: renew answers NULL, renew with ttl adds one
SELECT dlock_acquire('api/nolease') > 0 AS granted;
SELECT dlock_renew('api/nolease') IS NULL AS no_lease;
SELECT dlock_renew('api/nolease', '1 hour') > clock_timestamp() + '59 min' AS lease_added;

-- a re-entrant acquire with a ttl renews the lease
SELECT dlock_acquire('api/nolease', ttl => '2 hours') > 0 AS granted;
SELECT count, expires_at > clock_timestamp() + '119 min' AS renewed
  FROM dlock.locks WHERE name = 'api/nolease';

-- the view is sorted by nobody: sort it here
SELECT name, mode, granted, count FROM dlock.locks WHERE name LIKE 'api/%' ORDER BY name;

-- release_all ends every lock of the session, whatever the counts
SELECT dlock_release_all();
SELECT count(*) FROM dlock.locks WHERE name LIKE 'api/%';
SELECT dlock_release_all();

-- names are text: any bytes of the encoding, up to the limit
SELECT dlock_acquire('заказ/42 ✓') > 0 AS unicode_name;
SELECT dlock_acquire(repeat('n', 1024)) > 0 AS name_at_limit;
SELECT length(name) FROM dlock.locks WHERE name LIKE 'nnn%';
SELECT dlock_release('заказ/42 ✓'), dlock_release(repeat('n', 1024));
SELECT count(*) FROM dlock.locks;

-- acquire_all whose owner holds one of the names in a weaker mode: DL003,
-- nothing taken (a found crash: the worker must not look at unset names)
SELECT dlock_acquire('api/held-cr', 'CR') > 0 AS cr;
SELECT dlock_acquire_all(ARRAY['api/held-cr', 'api/other'], 'PR');
SELECT count(*) FROM dlock.locks WHERE name = 'api/other';
SELECT dlock_release_all();
