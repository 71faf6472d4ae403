/* sql/dlock--1.0--1.1.sql */
-- SPDX-License-Identifier: PostgreSQL

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION dlock UPDATE TO '1.1'" to load this file. \quit

-- 1.1: the statistics (dlock.stats, dlock_stats(), dlock_stats_reset()) and
-- the administrators' force release.  Nothing else changed: the tables,
-- their rows and the lock manager's picture stay as they are, so an update
-- keeps every holder, lease, waiter and kept place.

-- Statistics (README: Monitoring): counted by the lock manager, since the
-- server's start or the last dlock_stats_reset().
CREATE FUNCTION dlock_stats(
    OUT since timestamptz,
    OUT requests bigint,
    OUT grants bigint,
    OUT grants_immediate bigint,
    OUT waits bigint,
    OUT timeouts bigint,
    OUT cancels bigint,
    OUT kept bigint,
    OUT deadlocks bigint,
    OUT refused bigint,
    OUT errors bigint,
    OUT lease_expiries bigint,
    OUT renewals bigint,
    OUT releases bigint,
    OUT conversions bigint,
    OUT session_cleanups bigint,
    OUT holders bigint,
    OUT waiters bigint,
    OUT kept_places bigint,
    OUT batches bigint,
    OUT commits bigint,
    OUT mean_batch_size double precision,
    OUT commit_seconds double precision,
    OUT wait_seconds double precision[],
    OUT wait_seconds_bucket bigint[],
    OUT wait_seconds_sum double precision,
    OUT wait_seconds_count bigint,
    OUT handoff_seconds double precision[],
    OUT handoff_seconds_bucket bigint[],
    OUT handoff_seconds_sum double precision,
    OUT handoff_seconds_count bigint)
RETURNS record
AS 'MODULE_PATHNAME', 'dlock_stats'
LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION dlock_stats() IS
    'the lock manager''s counters since the start or the last dlock_stats_reset(), the holders and waiters now, wait and hand-off histograms';

CREATE VIEW dlock.stats AS SELECT * FROM pg_catalog.dlock_stats();
COMMENT ON VIEW dlock.stats IS
    'the lock manager''s counters and histograms (one row), as dlock_stats() returns them';

CREATE FUNCTION dlock_stats_reset()
RETURNS void
AS 'MODULE_PATHNAME', 'dlock_stats_reset'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION dlock_stats_reset() IS
    'dlock.stats counts from zero again (dlock_admin)';

REVOKE ALL ON dlock.stats FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION dlock_stats(), dlock_stats_reset() FROM PUBLIC;
GRANT SELECT ON dlock.stats TO dlock_monitor;
GRANT EXECUTE ON FUNCTION dlock_stats() TO dlock_monitor;
GRANT EXECUTE ON FUNCTION dlock_stats_reset() TO dlock_admin;

-- Administration (README: Administration): dlock_admin breaks a stuck lock.
CREATE FUNCTION dlock_force_release(name text, owner text DEFAULT NULL, reason text DEFAULT NULL)
RETURNS integer
AS 'MODULE_PATHNAME', 'dlock_force_release'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION dlock_force_release(text, text, text) IS
    'dlock_admin: release every holder of a lock (or the owner key''s hold); the holder''s next renew or release fails with DL001 and the reason (required); NOTIFY dlock_revoked';

CREATE FUNCTION dlock_force_release_all(owner text, reason text)
RETURNS integer
AS 'MODULE_PATHNAME', 'dlock_force_release_all'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION dlock_force_release_all(text, text) IS
    'dlock_admin: end every lock, request and kept place of an owner key; its next renew or release fails with DL001 and the reason';

REVOKE EXECUTE ON FUNCTION dlock_force_release(text, text, text),
    dlock_force_release_all(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION dlock_force_release(text, text, text),
    dlock_force_release_all(text, text) TO dlock_admin;
