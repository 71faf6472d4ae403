/* sql/dlock--1.1--1.2.sql */
-- SPDX-License-Identifier: PostgreSQL

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION dlock UPDATE TO '1.2'" to load this file. \quit

-- 1.2: security.  The tables, their rows and the lock manager's picture
-- stay as they are, so an update keeps every holder, lease, waiter and
-- kept place.

-- dlock.locks: its visibility filter runs before any condition of the
-- caller's (a function or a cast there saw every other role's rows)
CREATE OR REPLACE VIEW dlock.locks WITH (security_barrier) AS
SELECT l.*
  FROM (SELECT h.name, CASE WHEN h.capacity IS NULL THEN h.mode ELSE 'semaphore' END AS mode,
               true AS granted, NULL::integer AS position,
               dlock.shown_owner(h.owner, h.role) AS owner, h.pid, h.backend_start, h.token,
               h.count, h.granted_at AS since, h.expires_at, NULL::timestamptz AS timeout_at,
               false AS conversion, h.implied, h.owner IS NOT NULL AS keyed, h.role,
               h.permits, h.capacity, h.value
          FROM dlock.held h
        UNION ALL
        SELECT q.name, CASE WHEN q.capacity IS NULL THEN q.mode ELSE 'semaphore' END, false,
               q.position, dlock.shown_owner(q.owner, q.role),
               CASE WHEN q.kept_until IS NULL THEN q.pid END,
               CASE WHEN q.kept_until IS NULL THEN q.backend_start END, q.ticket, NULL::integer,
               q.since, q.kept_until, q.timeout_at, q.conversion, q.implied,
               q.owner IS NOT NULL, q.role, q.permits, q.capacity, q.value
          FROM (SELECT q.*,
                       (pg_catalog.row_number() OVER (PARTITION BY q.name
                                                      ORDER BY q.conversion DESC, q.ticket))::integer
                           AS position
                  FROM dlock.queue q) q) l
 WHERE dlock.visible(l.name, l.role);

-- the lock manager's notifications carry a key instead of the lock's name:
-- a listener learns the key of the names it may lock
CREATE FUNCTION dlock_notify_key(name text)
RETURNS text
AS 'MODULE_PATHNAME', 'dlock_notify_key'
LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION dlock_notify_key(text) IS
    'the payload that names this lock in NOTIFY dlock_blocking, dlock_leader and dlock_revoked (for names under the caller''s grants)';
REVOKE EXECUTE ON FUNCTION dlock_notify_key(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION dlock_notify_key(text) TO dlock_user, dlock_monitor;
