/* sql/dlock--1.1.sql */
-- SPDX-License-Identifier: PostgreSQL

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION dlock" to load this file. \quit

/*
 * The lock manager is one background worker per cluster, connected to the
 * database named by dlock.database; its tables must live there.
 */
DO $check$
BEGIN
    IF pg_catalog.current_setting('dlock.database', true) IS NOT NULL
       AND pg_catalog.current_setting('dlock.database', true)
           OPERATOR(pg_catalog.<>) pg_catalog.current_database() THEN
        RAISE EXCEPTION 'dlock must be created in database "%"',
            pg_catalog.current_setting('dlock.database', true)
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Set dlock.database in postgresql.conf to the database that should hold the lock tables and restart.';
    END IF;
END
$check$;

/*
 * Rights go to three roles, never to PUBLIC: dlock_user takes and releases
 * locks, dlock_monitor reads the view, dlock_admin is both and sees owner
 * keys.  Roles are cluster-wide and outlive DROP EXTENSION (or belong to
 * another database's dlock), so an existing one is reused as it is.
 */
DO $roles$
DECLARE
    r text;
BEGIN
    FOREACH r IN ARRAY ARRAY['dlock_user', 'dlock_monitor', 'dlock_admin'] LOOP
        IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname OPERATOR(pg_catalog.=) r) THEN
            EXECUTE pg_catalog.format('CREATE ROLE %I NOLOGIN', r);
        END IF;
    END LOOP;
    FOREACH r IN ARRAY ARRAY['dlock_user', 'dlock_monitor'] LOOP
        IF NOT pg_catalog.pg_has_role('dlock_admin', r, 'MEMBER') THEN
            EXECUTE pg_catalog.format('GRANT %I TO dlock_admin', r);
        END IF;
    END LOOP;
    -- the worker's transactions run as dlock_worker: a role nobody can log
    -- in as, with rights on the lock manager's tables only
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles
                    WHERE rolname OPERATOR(pg_catalog.=) 'dlock_worker') THEN
        CREATE ROLE dlock_worker NOLOGIN;
    ELSIF EXISTS (SELECT FROM pg_catalog.pg_roles
                   WHERE rolname OPERATOR(pg_catalog.=) 'dlock_worker'
                     AND (rolcanlogin OR rolsuper)) THEN
        RAISE EXCEPTION 'role dlock_worker exists and can log in or is a superuser'
            USING ERRCODE = '42501',
                  HINT = 'dlock''s worker runs as dlock_worker: make it NOLOGIN NOSUPERUSER, or drop it';
    END IF;
END
$roles$;

CREATE SCHEMA dlock;
COMMENT ON SCHEMA dlock IS 'dlock lock manager state; written only by the dlock worker';

-- Holders: one row per (lock, owner).  The token is the grant's ticket.
CREATE TABLE dlock.held (
    token          bigint      NOT NULL PRIMARY KEY,
    name           text        NOT NULL,
    owner          text,                   -- NULL: owned by the session (pid, backend_start)
    pid            integer     NOT NULL,
    backend_start  timestamptz NOT NULL,
    mode           text        NOT NULL,
    count          integer     NOT NULL CHECK (count > 0),  -- implied: paths below
    granted_at     timestamptz NOT NULL,
    expires_at     timestamptz,            -- NULL: no lease
    ttl            interval,
    implied        boolean     NOT NULL DEFAULT false, -- an intention for a path below
    role           regrole     NOT NULL,               -- whose it is: the role that took the owner
    kept           integer     NOT NULL DEFAULT 0,     -- levels granted to a kept place, not yet collected
    capacity       integer,                -- a semaphore's (mode NL); NULL: a lock
    permits        integer,                -- the permits held of it
    value          text                    -- a leader's published value; NULL: not an election
);

-- Waiters: one row per queued request, FIFO by ticket.
CREATE TABLE dlock.queue (
    ticket         bigint      NOT NULL PRIMARY KEY,
    name           text        NOT NULL,
    owner          text,
    pid            integer     NOT NULL,
    backend_start  timestamptz NOT NULL,
    mode           text        NOT NULL,
    since          timestamptz NOT NULL,
    timeout_at     timestamptz,
    ttl            interval,
    conversion     boolean     NOT NULL DEFAULT false, -- a holder's up-conversion
    implied        boolean     NOT NULL DEFAULT false, -- an intention part of a path request
    role           regrole     NOT NULL,               -- whose it is: the role that took the owner
    keep           boolean     NOT NULL DEFAULT false, -- made with keep_place
    kept_until     timestamptz,            -- a kept place no call waits for: its lease end
    request        bigint      NOT NULL,               -- the ticket of the request's first part
    capacity       integer,                -- a semaphore's (mode NL); NULL: a lock
    permits        integer,                -- the permits asked for
    value          text                    -- a campaign's value; NULL: not a campaign
);

/*
 * An owner key is what guards release: shown only to the role that took it
 * (and the roles that have its privileges) and to dlock_admin; nobody else
 * sees the key or anything derived from it.
 */
CREATE FUNCTION dlock.shown_owner(key text, role regrole) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog
AS $$
    SELECT CASE
        WHEN key IS NULL THEN NULL
        WHEN pg_catalog.pg_has_role(current_user, role, 'USAGE') THEN key
        WHEN pg_catalog.pg_has_role(current_user, 'dlock_admin', 'USAGE') THEN key
        ELSE NULL
    END
$$;

-- Which rows of dlock.locks the current user sees (dlock_grants.c).
CREATE FUNCTION dlock.visible(name text, role regrole) RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_visible'
LANGUAGE C STABLE PARALLEL RESTRICTED;

-- Tickets below hi may have been handed out: a restarted worker starts at hi.
CREATE TABLE dlock.ticket_counter (
    hi             bigint      NOT NULL
);
INSERT INTO dlock.ticket_counter VALUES (1);

REVOKE ALL ON dlock.held, dlock.queue, dlock.ticket_counter FROM PUBLIC;
GRANT SELECT, INSERT, UPDATE, DELETE ON dlock.held, dlock.queue, dlock.ticket_counter
    TO dlock_worker;

/*
 * Namespaces: once a grant binds a role (directly or through a role whose
 * privileges it has), that role may lock only names under its grants.
 * Changed through dlock_grant() / dlock_revoke(); the trigger makes every
 * backend load the grants again once the change has committed.
 */
CREATE TABLE dlock.grants (
    role        regrole     NOT NULL,
    prefix      text        NOT NULL,   -- "/a/b": that path and below; "/": every path; "x/": flat names starting with it
    granted_at  timestamptz NOT NULL DEFAULT pg_catalog.now(),
    PRIMARY KEY (role, prefix)
);
COMMENT ON TABLE dlock.grants IS 'name prefixes each role may lock; a role with none may lock any name';
SELECT pg_catalog.pg_extension_config_dump('dlock.grants', '');

/*
 * Quotas: named locks a role's owners may hold or wait for in all, and one
 * owner of it, and their bytes (names and owner keys); NULL for no limit.
 * Set through dlock_set_quota().
 */
CREATE TABLE dlock.quotas (
    role                 regrole NOT NULL PRIMARY KEY,
    max_locks            bigint,
    max_locks_per_owner  bigint,
    max_bytes            bigint,
    max_bytes_per_owner  bigint
);
COMMENT ON TABLE dlock.quotas IS 'per-role lock quotas; a role without a row has none';
SELECT pg_catalog.pg_extension_config_dump('dlock.quotas', '');

CREATE FUNCTION dlock.grants_changed() RETURNS trigger
AS 'MODULE_PATHNAME', 'dlock_grants_changed'
LANGUAGE C;
CREATE TRIGGER grants_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON dlock.grants
    FOR EACH STATEMENT EXECUTE FUNCTION dlock.grants_changed();
CREATE TRIGGER quotas_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON dlock.quotas
    FOR EACH STATEMENT EXECUTE FUNCTION dlock.grants_changed();
REVOKE ALL ON dlock.grants, dlock.quotas FROM PUBLIC;

CREATE VIEW dlock.locks AS
SELECT h.name, CASE WHEN h.capacity IS NULL THEN h.mode ELSE 'semaphore' END AS mode,
       true AS granted, NULL::integer AS position,
       dlock.shown_owner(h.owner, h.role) AS owner, h.pid, h.backend_start, h.token, h.count,
       h.granted_at AS since, h.expires_at, NULL::timestamptz AS timeout_at,
       false AS conversion, h.implied, h.owner IS NOT NULL AS keyed, h.role,
       h.permits, h.capacity, h.value
  FROM dlock.held h
 WHERE dlock.visible(h.name, h.role)
UNION ALL
SELECT q.name, CASE WHEN q.capacity IS NULL THEN q.mode ELSE 'semaphore' END, false, q.position,
       dlock.shown_owner(q.owner, q.role),
       CASE WHEN q.kept_until IS NULL THEN q.pid END,
       CASE WHEN q.kept_until IS NULL THEN q.backend_start END, q.ticket, NULL::integer,
       q.since, q.kept_until, q.timeout_at, q.conversion, q.implied,
       q.owner IS NOT NULL, q.role, q.permits, q.capacity, q.value
  FROM (SELECT q.*,
               (pg_catalog.row_number() OVER (PARTITION BY q.name
                                              ORDER BY q.conversion DESC, q.ticket))::integer
                   AS position
          FROM dlock.queue q) q
 WHERE dlock.visible(q.name, q.role);

COMMENT ON VIEW dlock.locks IS 'dlock holders (granted) and waiters (queue position), joinable with pg_stat_activity on pid and backend_start; a kept place with no call waiting shows no pid and its lease end in expires_at';
REVOKE ALL ON SCHEMA dlock FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION dlock.shown_owner(text, regrole), dlock.visible(text, regrole),
    dlock.grants_changed() FROM PUBLIC;
GRANT USAGE ON SCHEMA dlock TO dlock_user, dlock_monitor, dlock_worker;
GRANT EXECUTE ON FUNCTION dlock.shown_owner(text, regrole), dlock.visible(text, regrole)
    TO dlock_user, dlock_monitor;
GRANT SELECT ON dlock.locks TO dlock_user, dlock_monitor;
GRANT SELECT ON dlock.grants, dlock.quotas TO dlock_monitor;

CREATE FUNCTION dlock_acquire(name text,
                              mode text DEFAULT 'exclusive',
                              timeout interval DEFAULT NULL,
                              ttl interval DEFAULT NULL,
                              owner text DEFAULT NULL,
                              keep_place boolean DEFAULT false)
RETURNS bigint
AS 'MODULE_PATHNAME', 'dlock_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION dlock_acquire(text, text, interval, interval, text, boolean) IS
    'wait in FIFO order for a named lock; returns its fencing token, or NULL when timeout passes (keep_place: the request stays in line for the owner''s next call)';

CREATE FUNCTION dlock_acquire_all(names text[],
                                  mode text DEFAULT 'exclusive',
                                  timeout interval DEFAULT NULL,
                                  ttl interval DEFAULT NULL,
                                  owner text DEFAULT NULL,
                                  keep_place boolean DEFAULT false)
RETURNS bigint[]
AS 'MODULE_PATHNAME', 'dlock_acquire_all'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION dlock_acquire_all(text[], text, interval, interval, text, boolean) IS
    'take several named locks all together or none, as one request; one token per name in input order, or NULL when timeout passes';

CREATE FUNCTION dlock_try_acquire(name text,
                                  mode text DEFAULT 'exclusive',
                                  ttl interval DEFAULT NULL,
                                  owner text DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'dlock_try_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION dlock_try_acquire(text, text, interval, text) IS
    'take a named lock only if that needs no wait and overtakes no one; fencing token or NULL';

CREATE FUNCTION dlock_convert(name text,
                              mode text,
                              timeout interval DEFAULT NULL,
                              owner text DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'dlock_convert'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION dlock_convert(text, text, interval, text) IS
    'change the mode of a held lock; an up-conversion waits ahead of new requests and gets a new token; NULL on timeout';

CREATE FUNCTION dlock_release(name text, owner text DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_release'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION dlock_release(text, text) IS
    'release one level of a held lock; false with a warning if not held';

CREATE FUNCTION dlock_renew(name text, ttl interval DEFAULT NULL, owner text DEFAULT NULL)
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'dlock_renew'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION dlock_renew(text, interval, text) IS
    'extend the lease of a held lock; returns the new expiry; error DL001 if no longer held';

CREATE FUNCTION dlock_release_all(owner text DEFAULT NULL)
RETURNS integer
AS 'MODULE_PATHNAME', 'dlock_release_all'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION dlock_release_all(text) IS
    'release every lock and withdraw every request of the session or owner key';

CREATE FUNCTION dlock_manager_pid()
RETURNS integer
AS 'MODULE_PATHNAME', 'dlock_manager_pid'
LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION dlock_manager_pid() IS
    'process id of the lock manager (NULL if none runs): the sender of genuine dlock_blocking notifications';

CREATE FUNCTION dlock_new_owner()
RETURNS text
AS 'MODULE_PATHNAME', 'dlock_new_owner'
LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION dlock_new_owner() IS
    'a random 128-bit owner key in hex, for locks that outlive a connection';

CREATE FUNCTION dlock_semaphore(name text,
                                capacity integer,
                                permits integer DEFAULT 1,
                                timeout interval DEFAULT NULL,
                                ttl interval DEFAULT NULL,
                                owner text DEFAULT NULL,
                                keep_place boolean DEFAULT false)
RETURNS bigint
AS 'MODULE_PATHNAME', 'dlock_semaphore'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION dlock_semaphore(text, integer, integer, interval, interval, text, boolean) IS
    'wait in strict FIFO order for permits of a counting semaphore of this capacity; fencing token, or NULL when timeout passes';

CREATE FUNCTION dlock_try_semaphore(name text,
                                    capacity integer,
                                    permits integer DEFAULT 1,
                                    ttl interval DEFAULT NULL,
                                    owner text DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'dlock_try_semaphore'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION dlock_try_semaphore(text, integer, integer, interval, text) IS
    'take permits of a counting semaphore only if they are free and nobody waits; fencing token or NULL';

-- Permits free now: the capacity less the permits held (leases that ran out
-- are free); NULL when nobody holds or waits (the name has no capacity then)
-- or the name is a lock.  As dlock.locks shows it to the caller.
CREATE FUNCTION dlock_semaphore_available(name text)
RETURNS integer
AS $available$
    SELECT (max(l.capacity) OPERATOR(pg_catalog.-)
            coalesce(sum(l.permits) FILTER (WHERE l.granted
                AND (l.expires_at IS NULL
                     OR l.expires_at OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp())), 0))::integer
      FROM dlock.locks l
     WHERE l.name OPERATOR(pg_catalog.=) $1 AND l.capacity IS NOT NULL
$available$
LANGUAGE sql STABLE PARALLEL RESTRICTED
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock_semaphore_available(text) IS
    'permits of a semaphore free now; NULL when nobody holds or waits for it';

CREATE FUNCTION dlock_campaign(name text,
                               value text,
                               timeout interval DEFAULT NULL,
                               ttl interval DEFAULT NULL,
                               owner text DEFAULT NULL,
                               keep_place boolean DEFAULT false)
RETURNS bigint
AS 'MODULE_PATHNAME', 'dlock_campaign'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION dlock_campaign(text, text, interval, interval, text, boolean) IS
    'wait in FIFO order to lead an election, publishing value; the token is the leader''s term, NULL when timeout passes';

CREATE FUNCTION dlock_proclaim(name text, value text, owner text DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'dlock_proclaim'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION dlock_proclaim(text, text, text) IS
    'the leader publishes a new value; returns its term; error DL001 when not the leader';

-- The leader of an election as dlock.locks shows it to the caller: no row
-- when nobody leads (or its lease ran out).
CREATE FUNCTION dlock_leader(name text)
RETURNS TABLE(value text, token bigint, owner text, pid integer, since timestamptz,
              expires_at timestamptz)
AS $leader$
    SELECT l.value, l.token, l.owner, l.pid, l.since, l.expires_at
      FROM dlock.locks l
     WHERE l.name OPERATOR(pg_catalog.=) $1 AND l.granted AND l.value IS NOT NULL
       AND (l.expires_at IS NULL
            OR l.expires_at OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp())
$leader$
LANGUAGE sql STABLE PARALLEL RESTRICTED
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock_leader(text) IS
    'who leads an election: value, term (token), owner key (shown as in dlock.locks), pid, since, lease end';

CREATE FUNCTION dlock_check(name text, token bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_check'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION dlock_check(text, bigint) IS
    'fencing in the caller''s transaction: true when token is a current grant of name (not released, lease not run out)';

-- Who holds a lock, as dlock.locks shows it to the caller (its own rows,
-- rows under its granted prefixes, every row for dlock_monitor; keys only
-- to their role and dlock_admin); leases that ran out are left out.
CREATE FUNCTION dlock_holder(name text)
RETURNS TABLE(mode text, owner text, pid integer, token bigint, count integer,
              expires_at timestamptz)
AS $holder$
    SELECT l.mode, l.owner, l.pid, l.token, l.count, l.expires_at
      FROM dlock.locks l
     WHERE l.name OPERATOR(pg_catalog.=) $1 AND l.granted
       AND (l.expires_at IS NULL
            OR l.expires_at OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp())
     ORDER BY l.token
$holder$
LANGUAGE sql STABLE PARALLEL RESTRICTED
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock_holder(text) IS
    'who holds a lock: mode, owner key (shown as in dlock.locks), pid, token, count, lease end';

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

-- Functions are executable by PUBLIC when created: only dlock_user may call these.
REVOKE EXECUTE ON FUNCTION
    dlock_acquire(text, text, interval, interval, text, boolean),
    dlock_acquire_all(text[], text, interval, interval, text, boolean),
    dlock_try_acquire(text, text, interval, text),
    dlock_convert(text, text, interval, text),
    dlock_release(text, text),
    dlock_renew(text, interval, text),
    dlock_release_all(text),
    dlock_new_owner(),
    dlock_manager_pid(),
    dlock_check(text, bigint),
    dlock_holder(text),
    dlock_semaphore(text, integer, integer, interval, interval, text, boolean),
    dlock_try_semaphore(text, integer, integer, interval, text),
    dlock_semaphore_available(text),
    dlock_campaign(text, text, interval, interval, text, boolean),
    dlock_proclaim(text, text, text),
    dlock_leader(text)
  FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
    dlock_acquire(text, text, interval, interval, text, boolean),
    dlock_acquire_all(text[], text, interval, interval, text, boolean),
    dlock_try_acquire(text, text, interval, text),
    dlock_convert(text, text, interval, text),
    dlock_release(text, text),
    dlock_renew(text, interval, text),
    dlock_release_all(text),
    dlock_new_owner(),
    dlock_manager_pid(),
    dlock_check(text, bigint),
    dlock_holder(text),
    dlock_semaphore(text, integer, integer, interval, interval, text, boolean),
    dlock_try_semaphore(text, integer, integer, interval, text),
    dlock_semaphore_available(text),
    dlock_campaign(text, text, interval, interval, text, boolean),
    dlock_proclaim(text, text, text),
    dlock_leader(text)
  TO dlock_user;
GRANT EXECUTE ON FUNCTION dlock_manager_pid(), dlock_holder(text), dlock_semaphore_available(text),
    dlock_leader(text)
    TO dlock_monitor;

-- Namespaces (dlock.grants); run as the extension's owner, for dlock_admin.
CREATE FUNCTION dlock_grant(prefix text, role regrole)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_grant'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock_grant(text, regrole) IS
    'let role lock the names under prefix; from its first grant on, only those; true if new';

CREATE FUNCTION dlock_revoke(prefix text, role regrole)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_revoke'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock_revoke(text, regrole) IS
    'take back a grant of dlock_grant; true if it was there';

REVOKE EXECUTE ON FUNCTION dlock_grant(text, regrole), dlock_revoke(text, regrole) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION dlock_grant(text, regrole), dlock_revoke(text, regrole) TO dlock_admin;

CREATE FUNCTION dlock_set_quota(role regrole, max_locks bigint,
                                max_locks_per_owner bigint DEFAULT NULL,
                                max_bytes bigint DEFAULT NULL,
                                max_bytes_per_owner bigint DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
BEGIN
    IF role IS NULL THEN
        RAISE EXCEPTION 'role must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF max_locks <= 0 OR max_locks_per_owner <= 0 OR max_bytes <= 0 OR max_bytes_per_owner <= 0 THEN
        RAISE EXCEPTION 'a quota must be positive'
            USING ERRCODE = 'invalid_parameter_value', HINT = 'NULL means no limit.';
    END IF;
    IF max_locks IS NULL AND max_locks_per_owner IS NULL AND max_bytes IS NULL
       AND max_bytes_per_owner IS NULL THEN
        DELETE FROM dlock.quotas q WHERE q.role OPERATOR(pg_catalog.=) role;
    ELSE
        INSERT INTO dlock.quotas AS q (role, max_locks, max_locks_per_owner, max_bytes,
                                       max_bytes_per_owner)
        VALUES (role, max_locks, max_locks_per_owner, max_bytes, max_bytes_per_owner)
        ON CONFLICT ON CONSTRAINT quotas_pkey
        DO UPDATE SET max_locks = EXCLUDED.max_locks,
                      max_locks_per_owner = EXCLUDED.max_locks_per_owner,
                      max_bytes = EXCLUDED.max_bytes,
                      max_bytes_per_owner = EXCLUDED.max_bytes_per_owner;
    END IF;
END
$$;
COMMENT ON FUNCTION dlock_set_quota(regrole, bigint, bigint, bigint, bigint) IS
    'at most max_locks named locks (max_bytes of names and keys) held or waited for by the role, max_locks_per_owner (max_bytes_per_owner) by one owner of it; NULL: no limit';
REVOKE EXECUTE ON FUNCTION dlock_set_quota(regrole, bigint, bigint, bigint, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION dlock_set_quota(regrole, bigint, bigint, bigint, bigint) TO dlock_admin;
