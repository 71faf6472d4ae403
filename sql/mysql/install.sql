-- SPDX-License-Identifier: PostgreSQL
-- sql/mysql/install.sql
--
-- Installs dlock into a MariaDB (10.11) server: the lock-store schema
-- `dlock`, the plugin (INSTALL SONAME 'dlock_udf': the lock manager thread
-- and its session-end hook), the SQL functions from the same library
-- (which must already be in the server's plugin_dir: `make -C mysql_udf
-- install`), and the roles dlock_user, dlock_monitor and dlock_admin.
-- Re-running it is safe: functions are dropped and re-created, tables and
-- their rows (held locks, the ticket counter) are kept; an install of the
-- older design (stored procedures and a reaper event) is converted, its
-- owner-keyed leases and its token order kept.
--
-- Run it through scripts/mysql_install.sh, which first creates the lock
-- manager's least-privilege store account and its credentials file.
--
-- Needs: CREATE/DROP FUNCTION rights (INSERT/DELETE on mysql.func),
-- INSERT on mysql.plugin (INSTALL SONAME), CREATE on `dlock`, CREATE USER
-- (the roles).

CREATE DATABASE IF NOT EXISTS dlock CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;

-- ------------------------------------------------------------------------
-- The older design (before the in-server lock manager): its tables are
-- renamed away, its live owner-keyed leases and its ticket counter carried
-- over below, its procedures and event dropped.
-- ------------------------------------------------------------------------
DROP EVENT IF EXISTS dlock.reaper;
SET @dlock_old = (SELECT COUNT(*) FROM information_schema.COLUMNS
                   WHERE TABLE_SCHEMA = 'dlock' AND TABLE_NAME = 'held'
                     AND COLUMN_NAME = 'holder');
EXECUTE IMMEDIATE IF(@dlock_old > 0,
    'RENAME TABLE dlock.held TO dlock.old_held, dlock.queue TO dlock.old_queue',
    'DO 0');

-- The first layout of this design kept every row in InnoDB tables named
-- held and queue (now views): they become the durable tables, and their
-- session rows move to the MEMORY tables below.
SET @dlock_first = (SELECT COUNT(*) FROM information_schema.TABLES
                     WHERE TABLE_SCHEMA = 'dlock' AND TABLE_NAME = 'held'
                       AND TABLE_TYPE = 'BASE TABLE');
EXECUTE IMMEDIATE IF(@dlock_first > 0,
    'RENAME TABLE dlock.held TO dlock.held_keyed, dlock.queue TO dlock.queue_kept',
    'DO 0');

-- ------------------------------------------------------------------------
-- The lock store.  Only the lock manager's store account writes it; times
-- are Unix microseconds (UTC), strings are bytes.  A session is its
-- connection id (conn_id) in one server run (session_start); an owner key's
-- rows name the account that took it.
--
-- What a crash must keep - owner-keyed holders (leases), kept places, the
-- ticket counter - is in InnoDB tables, committed and flushed before any
-- answer that depends on it.  What ends with the server anyway - session
-- holders and the rows of waiting calls - is in MEMORY tables of the same
-- columns: written (visible) before the answer, never flushed, empty after
-- a restart.  The views dlock.held and dlock.queue show both halves.
-- ------------------------------------------------------------------------

-- MEMORY tables take their size limit from this when created (~3 KB a row)
SET SESSION max_heap_table_size = 4294967296;

-- Holders (the main rows): one row per holder of a lock, and per intention
-- an ancestor path holds for a lock below it (implied).
CREATE TABLE IF NOT EXISTS dlock.held_keyed (
    token         BIGINT           NOT NULL PRIMARY KEY,   -- the fencing token
    name          VARBINARY(1024)  NOT NULL,
    owner         VARBINARY(255)   NULL,       -- the owner key (NULL in held_session)
    conn_id       BIGINT UNSIGNED  NOT NULL,   -- the session that took it
    session_start BIGINT           NOT NULL,   -- that session's server run
    mode          TINYINT UNSIGNED NOT NULL,   -- 0 NL, 1 CR, 2 CW, 3 PR (shared), 4 PW, 5 EX (exclusive)
    `count`       INT              NOT NULL,   -- re-entrant levels
    granted_us    BIGINT           NOT NULL,
    expires_us    BIGINT           NULL,       -- NULL: no lease
    ttl_us        BIGINT           NULL,
    implied       BOOLEAN          NOT NULL DEFAULT FALSE,
    account       VARBINARY(640)   NOT NULL,   -- CURRENT_USER() that took it
    kept          INT              NOT NULL DEFAULT 0, -- levels granted to a kept place, uncollected
    capacity      INT              NULL,       -- a semaphore's; NULL: a lock
    permits       INT              NULL,       -- the permits held of it
    value         VARBINARY(1024)  NULL        -- a leader's value; NULL: not an election
) ENGINE=InnoDB;
CREATE TABLE IF NOT EXISTS dlock.held_session LIKE dlock.held_keyed;
SET @dlock_found = (SELECT ENGINE FROM information_schema.TABLES
                   WHERE TABLE_SCHEMA = 'dlock' AND TABLE_NAME = 'held_session');
EXECUTE IMMEDIATE IF(@dlock_found <> 'MEMORY',
                    'ALTER TABLE dlock.held_session ENGINE=MEMORY', 'DO 0');

-- Waiters: one row per part of a request that has waited longer than
-- dlock_queue_row_delay (a shorter wait never reaches the table); kept
-- places in queue_kept, waiting calls in queue_live.
CREATE TABLE IF NOT EXISTS dlock.queue_kept (
    ticket        BIGINT           NOT NULL PRIMARY KEY,   -- FIFO order; the token once granted
    name          VARBINARY(1024)  NOT NULL,
    owner         VARBINARY(255)   NULL,
    conn_id       BIGINT UNSIGNED  NOT NULL,
    session_start BIGINT           NOT NULL,
    mode          TINYINT UNSIGNED NOT NULL,
    since_us      BIGINT           NOT NULL,
    timeout_us    BIGINT           NULL,
    ttl_us        BIGINT           NULL,
    conversion    BOOLEAN          NOT NULL DEFAULT FALSE, -- a holder's up-conversion
    implied       BOOLEAN          NOT NULL DEFAULT FALSE, -- an intention part of a path request
    account       VARBINARY(640)   NOT NULL,
    keep          BOOLEAN          NOT NULL DEFAULT FALSE, -- made with keep_place
    kept_until_us BIGINT           NULL,       -- a kept place no call waits for: its lease end
    request       BIGINT           NOT NULL,   -- the ticket of the request's first part
    capacity      INT              NULL,
    permits       INT              NULL,
    value         VARBINARY(1024)  NULL
) ENGINE=InnoDB;
CREATE TABLE IF NOT EXISTS dlock.queue_live LIKE dlock.queue_kept;
SET @dlock_found = (SELECT ENGINE FROM information_schema.TABLES
                   WHERE TABLE_SCHEMA = 'dlock' AND TABLE_NAME = 'queue_live');
EXECUTE IMMEDIATE IF(@dlock_found <> 'MEMORY',
                    'ALTER TABLE dlock.queue_live ENGINE=MEMORY', 'DO 0');

-- the first layout's session rows and waiting rows move
EXECUTE IMMEDIATE IF(@dlock_first > 0,
    'INSERT IGNORE INTO dlock.held_session SELECT * FROM dlock.held_keyed WHERE owner IS NULL',
    'DO 0');
DELETE FROM dlock.held_keyed WHERE owner IS NULL;
DELETE FROM dlock.queue_kept WHERE NOT keep;

CREATE OR REPLACE SQL SECURITY INVOKER VIEW dlock.held AS
SELECT * FROM dlock.held_keyed UNION ALL SELECT * FROM dlock.held_session;
CREATE OR REPLACE SQL SECURITY INVOKER VIEW dlock.queue AS
SELECT * FROM dlock.queue_kept UNION ALL SELECT * FROM dlock.queue_live;

-- Tickets: the manager reserves blocks ahead of use, so a token once
-- handed out is never handed out again nor undercut, across crashes.
CREATE TABLE IF NOT EXISTS dlock.counter (
    id            TINYINT          NOT NULL PRIMARY KEY,
    hi            BIGINT           NOT NULL
) ENGINE=InnoDB;

-- Namespaces: once a grant names an account (user@host as CURRENT_USER()
-- shows it) or a role granted to it (directly or through other roles,
-- active or not), that account may lock only the names under the prefixes
-- of those grants.  dlock_user, dlock_monitor and dlock_admin are no
-- tenant: a row naming one of them binds nobody.  A path prefix ('/a', or '/' for every path) covers the
-- path and the paths below it, segment by segment; a flat prefix covers
-- the flat names that start with it, byte by byte.  Changed through
-- dlock_grant() / dlock_revoke().
CREATE TABLE IF NOT EXISTS dlock.grants (
    grantee       VARBINARY(640)   NOT NULL,
    prefix        VARBINARY(1024)  NOT NULL,
    granted_at    TIMESTAMP(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    PRIMARY KEY (grantee, prefix)
) ENGINE=InnoDB;

-- Quotas, per account (dlock_admin has none): at most max_locks named
-- locks held or waited for in all, max_locks_per_owner per owner key or
-- session, and as many bytes (each lock: its name's length plus its owner
-- key's).  NULL: no limit.  Set with dlock_set_quota().
CREATE TABLE IF NOT EXISTS dlock.quotas (
    grantee             VARBINARY(640) NOT NULL PRIMARY KEY,
    max_locks           BIGINT NULL,
    max_locks_per_owner BIGINT NULL,
    max_bytes           BIGINT NULL,
    max_bytes_per_owner BIGINT NULL
) ENGINE=InnoDB;

-- The older design's leases and tokens: its live owner-keyed leases become
-- holders (their sessions' locks do not survive the change of library),
-- and the counter starts above every ticket and token it used.
-- (Installs before accounts were recorded pass their keys to the account
-- that runs this.)
SET @dlock_account = IF((SELECT COUNT(*) FROM information_schema.COLUMNS
                          WHERE TABLE_SCHEMA = 'dlock' AND TABLE_NAME = 'old_held'
                            AND COLUMN_NAME = 'account') > 0,
                        'IF(account = '''', CURRENT_USER(), account)', 'CURRENT_USER()');
EXECUTE IMMEDIATE IF(@dlock_old > 0, CONCAT(
    'INSERT IGNORE INTO dlock.held_keyed (token, name, owner, conn_id, session_start, mode,
         `count`, granted_us, expires_us, ttl_us, account)
     SELECT token, name, owner, conn_id, 0, mode, `count`,
            FLOOR(UNIX_TIMESTAMP(granted_at) * 1000000),
            FLOOR(UNIX_TIMESTAMP(expires_at) * 1000000), ttl_us, ', @dlock_account, '
       FROM dlock.old_held
      WHERE owner IS NOT NULL AND (expires_at IS NULL OR expires_at > NOW(6))'),
    'DO 0');
SET @dlock_seq = (SELECT COUNT(*) FROM information_schema.TABLES
                   WHERE TABLE_SCHEMA = 'dlock' AND TABLE_NAME = 'tickets');
EXECUTE IMMEDIATE IF(@dlock_old > 0, CONCAT(
    'INSERT INTO dlock.counter (id, hi)
     SELECT 1, 1 + GREATEST(IFNULL((SELECT MAX(token) FROM dlock.old_held), 0),
                            IFNULL((SELECT MAX(ticket) FROM dlock.old_queue), 0),
                            IFNULL((SELECT AUTO_INCREMENT - 1 FROM information_schema.TABLES
                                     WHERE TABLE_SCHEMA = ''dlock'' AND TABLE_NAME = ''old_queue''), 0),
                            ', IF(@dlock_seq > 0, 'IFNULL((SELECT NEXTVAL(dlock.tickets)), 0)', '0'), ')
     ON DUPLICATE KEY UPDATE hi = GREATEST(hi, VALUES(hi))'),
    'DO 0');
INSERT IGNORE INTO dlock.counter (id, hi) VALUES (1, 1);
DROP TABLE IF EXISTS dlock.old_held, dlock.old_queue, dlock.names, dlock.done;
DROP SEQUENCE IF EXISTS dlock.tickets;
DROP PROCEDURE IF EXISTS dlock.step_acquire;
DROP PROCEDURE IF EXISTS dlock.step_release;
DROP PROCEDURE IF EXISTS dlock.step_status;
DROP PROCEDURE IF EXISTS dlock.step_renew;
DROP PROCEDURE IF EXISTS dlock.step_release_all;
DROP PROCEDURE IF EXISTS dlock.step_cancel;
DROP PROCEDURE IF EXISTS dlock.step_reap;
DROP PROCEDURE IF EXISTS dlock.step_forget_idle;
DROP PROCEDURE IF EXISTS dlock.step_grant;
DROP PROCEDURE IF EXISTS dlock.step_set_quota;
DROP PROCEDURE IF EXISTS dlock.grant_queued;
DROP FUNCTION IF EXISTS dlock_reap;

-- ------------------------------------------------------------------------
-- The plugin: the lock manager starts now and at every server start.
-- ------------------------------------------------------------------------
SET @dlock_found = (SELECT COUNT(*) FROM information_schema.PLUGINS
                   WHERE PLUGIN_NAME = 'dlock');
EXECUTE IMMEDIATE IF(@dlock_found = 0,
                    'INSTALL SONAME ''dlock_udf''', 'DO 0');

-- The functions (dlock_udf.so); OR REPLACE: a re-install takes the new library.
CREATE OR REPLACE FUNCTION dlock_acquire             RETURNS INTEGER SONAME 'dlock_udf.so';
CREATE OR REPLACE FUNCTION dlock_try_acquire         RETURNS INTEGER SONAME 'dlock_udf.so';
CREATE OR REPLACE FUNCTION dlock_acquire_all         RETURNS STRING  SONAME 'dlock_udf.so';
CREATE OR REPLACE FUNCTION dlock_convert             RETURNS INTEGER SONAME 'dlock_udf.so';
CREATE OR REPLACE FUNCTION dlock_release             RETURNS INTEGER SONAME 'dlock_udf.so';
CREATE OR REPLACE FUNCTION dlock_renew               RETURNS STRING  SONAME 'dlock_udf.so';
CREATE OR REPLACE FUNCTION dlock_release_all         RETURNS INTEGER SONAME 'dlock_udf.so';
CREATE OR REPLACE FUNCTION dlock_semaphore           RETURNS INTEGER SONAME 'dlock_udf.so';
CREATE OR REPLACE FUNCTION dlock_try_semaphore       RETURNS INTEGER SONAME 'dlock_udf.so';
CREATE OR REPLACE FUNCTION dlock_semaphore_available RETURNS INTEGER SONAME 'dlock_udf.so';
CREATE OR REPLACE FUNCTION dlock_campaign            RETURNS INTEGER SONAME 'dlock_udf.so';
CREATE OR REPLACE FUNCTION dlock_proclaim            RETURNS INTEGER SONAME 'dlock_udf.so';
CREATE OR REPLACE FUNCTION dlock_leader              RETURNS STRING  SONAME 'dlock_udf.so';
CREATE OR REPLACE FUNCTION dlock_leader_info         RETURNS STRING  SONAME 'dlock_udf.so';
CREATE OR REPLACE FUNCTION dlock_check               RETURNS INTEGER SONAME 'dlock_udf.so';
CREATE OR REPLACE FUNCTION dlock_holder              RETURNS STRING  SONAME 'dlock_udf.so';
CREATE OR REPLACE FUNCTION dlock_info                RETURNS STRING  SONAME 'dlock_udf.so';
CREATE OR REPLACE FUNCTION dlock_new_owner           RETURNS STRING  SONAME 'dlock_udf.so';
CREATE OR REPLACE FUNCTION dlock_locks               RETURNS STRING  SONAME 'dlock_udf.so';
-- the filter of the first dlock.locks, which dlock_locks() replaced
DROP FUNCTION IF EXISTS dlock_sees;
CREATE OR REPLACE FUNCTION dlock_grant               RETURNS INTEGER SONAME 'dlock_udf.so';
CREATE OR REPLACE FUNCTION dlock_revoke              RETURNS INTEGER SONAME 'dlock_udf.so';
CREATE OR REPLACE FUNCTION dlock_set_quota           RETURNS INTEGER SONAME 'dlock_udf.so';
CREATE OR REPLACE FUNCTION dlock_reload              RETURNS INTEGER SONAME 'dlock_udf.so';
CREATE OR REPLACE FUNCTION dlock_stats               RETURNS STRING  SONAME 'dlock_udf.so';
CREATE OR REPLACE FUNCTION dlock_stats_reset         RETURNS INTEGER SONAME 'dlock_udf.so';
CREATE OR REPLACE FUNCTION dlock_force_release       RETURNS INTEGER SONAME 'dlock_udf.so';
CREATE OR REPLACE FUNCTION dlock_force_release_all   RETURNS INTEGER SONAME 'dlock_udf.so';

-- The lock manager's statistics (docs/operations.md: Monitoring), one row taken apart
-- from one snapshot; dlock_stats() itself lets only dlock_monitor and
-- dlock_admin see them (the view runs in the caller's security context).
CREATE OR REPLACE SQL SECURITY INVOKER VIEW dlock.stats AS
SELECT FROM_UNIXTIME(JSON_VALUE(j, '$.since_us') / 1000000)       AS since,
       CAST(JSON_VALUE(j, '$.requests') AS INTEGER)               AS requests,
       CAST(JSON_VALUE(j, '$.grants') AS INTEGER)                 AS grants,
       CAST(JSON_VALUE(j, '$.grants_immediate') AS INTEGER)       AS grants_immediate,
       CAST(JSON_VALUE(j, '$.waits') AS INTEGER)                  AS waits,
       CAST(JSON_VALUE(j, '$.timeouts') AS INTEGER)               AS timeouts,
       CAST(JSON_VALUE(j, '$.cancels') AS INTEGER)                AS cancels,
       CAST(JSON_VALUE(j, '$.kept') AS INTEGER)                   AS kept,
       CAST(JSON_VALUE(j, '$.deadlocks') AS INTEGER)              AS deadlocks,
       CAST(JSON_VALUE(j, '$.refused') AS INTEGER)                AS refused,
       CAST(JSON_VALUE(j, '$.errors') AS INTEGER)                 AS errors,
       CAST(JSON_VALUE(j, '$.lease_expiries') AS INTEGER)         AS lease_expiries,
       CAST(JSON_VALUE(j, '$.renewals') AS INTEGER)               AS renewals,
       CAST(JSON_VALUE(j, '$.releases') AS INTEGER)               AS releases,
       CAST(JSON_VALUE(j, '$.conversions') AS INTEGER)            AS conversions,
       CAST(JSON_VALUE(j, '$.session_cleanups') AS INTEGER)       AS session_cleanups,
       CAST(JSON_VALUE(j, '$.holders') AS INTEGER)                AS holders,
       CAST(JSON_VALUE(j, '$.waiters') AS INTEGER)                AS waiters,
       CAST(JSON_VALUE(j, '$.kept_places') AS INTEGER)            AS kept_places,
       CAST(JSON_VALUE(j, '$.batches') AS INTEGER)                AS batches,
       CAST(JSON_VALUE(j, '$.commits') AS INTEGER)                AS commits,
       JSON_VALUE(j, '$.batch_requests') / NULLIF(JSON_VALUE(j, '$.batches'), 0)
                                                                  AS mean_batch_size,
       CAST(JSON_VALUE(j, '$.commit_seconds') AS DOUBLE)          AS commit_seconds,
       JSON_QUERY(j, '$.wait_seconds')                            AS wait_seconds,
       JSON_QUERY(j, '$.wait_seconds_bucket')                     AS wait_seconds_bucket,
       CAST(JSON_VALUE(j, '$.wait_seconds_sum') AS DOUBLE)        AS wait_seconds_sum,
       CAST(JSON_VALUE(j, '$.wait_seconds_count') AS INTEGER)     AS wait_seconds_count,
       JSON_QUERY(j, '$.handoff_seconds')                         AS handoff_seconds,
       JSON_QUERY(j, '$.handoff_seconds_bucket')                  AS handoff_seconds_bucket,
       CAST(JSON_VALUE(j, '$.handoff_seconds_sum') AS DOUBLE)     AS handoff_seconds_sum,
       CAST(JSON_VALUE(j, '$.handoff_seconds_count') AS INTEGER)  AS handoff_seconds_count
  FROM (SELECT dlock_stats() AS j) AS snapshot;

-- Who may call dlock: UDFs need no privilege in MariaDB, so each function
-- checks EXECUTE on one of these procedures in the caller's security
-- context (mysql_udf/dlock_udf_server.c).  They do nothing when called.
-- The roles below hold them; GRANT EXECUTE ON PROCEDURE dlock.user_access
-- TO an account works as well.
DELIMITER //
CREATE OR REPLACE PROCEDURE dlock.user_access() SQL SECURITY INVOKER
    COMMENT 'dlock: take, renew and release locks' BEGIN END//
CREATE OR REPLACE PROCEDURE dlock.monitor_access() SQL SECURITY INVOKER
    COMMENT 'dlock: see every lock in dlock.locks, owner keys hidden' BEGIN END//
CREATE OR REPLACE PROCEDURE dlock.admin_access() SQL SECURITY INVOKER
    COMMENT 'dlock: everything, every owner key shown' BEGIN END//
DELIMITER ;

-- Holders and waiters the caller may see, waiters with their 1-based place
-- in the queue of their name (counted over every waiting part; a wait too
-- short to have a row is not shown): its own account's rows with their
-- keys, every row without other accounts' keys for dlock_monitor,
-- everything for dlock_admin.  dlock_locks() makes the rows: the lock
-- manager reads dlock.held and dlock.queue, and the plugin leaves out what
-- the caller may not see before any condition of the caller's query runs
-- (a view over the tables with the filter in its WHERE let a caller's
-- condition - a conversion that warns, a function with a side effect -
-- see every row).  conn_id joins information_schema.PROCESSLIST.ID (NULL
-- for a kept place no call waits for); times in the session's time zone.
CREATE OR REPLACE SQL SECURITY INVOKER VIEW dlock.locks AS
SELECT l.name, l.mode, l.granted, l.position, l.owner, l.keyed, l.account,
       l.conn_id, l.token, l.`count`,
       FROM_UNIXTIME(l.since_us * 0.000001)   AS since,
       FROM_UNIXTIME(l.expires_us * 0.000001) AS expires_at,
       FROM_UNIXTIME(l.timeout_us * 0.000001) AS timeout_at,
       l.conversion, l.implied, l.permits, l.capacity, l.value
  FROM JSON_TABLE(dlock_locks(), '$[*]' COLUMNS (
         name       VARCHAR(1024) CHARACTER SET utf8mb4 PATH '$.name',
         mode       VARCHAR(9) CHARACTER SET utf8mb4    PATH '$.mode',
         granted    INT                                 PATH '$.granted',
         position   BIGINT UNSIGNED                     PATH '$.position',
         owner      VARCHAR(255) CHARACTER SET utf8mb4  PATH '$.owner',
         keyed      INT                                 PATH '$.keyed',
         account    VARCHAR(640) CHARACTER SET utf8mb4  PATH '$.account',
         conn_id    BIGINT UNSIGNED                     PATH '$.conn_id',
         token      BIGINT                              PATH '$.token',
         `count`    INT                                 PATH '$.count',
         since_us   BIGINT                              PATH '$.since_us',
         expires_us BIGINT                              PATH '$.expires_us',
         timeout_us BIGINT                              PATH '$.timeout_us',
         conversion INT                                 PATH '$.conversion',
         implied    INT                                 PATH '$.implied',
         permits    INT                                 PATH '$.permits',
         capacity   INT                                 PATH '$.capacity',
         value      VARCHAR(1024) CHARACTER SET utf8mb4 PATH '$.value')) AS l;

-- The roles.  An account gets one with GRANT dlock_user TO 'app'@'%' and
-- SET DEFAULT ROLE dlock_user FOR 'app'@'%' (MariaDB activates one role at
-- a time: an account that needs two gets a role of its own granted both).
CREATE ROLE IF NOT EXISTS dlock_user;
CREATE ROLE IF NOT EXISTS dlock_monitor;
CREATE ROLE IF NOT EXISTS dlock_admin;
GRANT EXECUTE ON PROCEDURE dlock.user_access TO dlock_user;
GRANT SELECT ON dlock.locks TO dlock_user;
GRANT EXECUTE ON PROCEDURE dlock.monitor_access TO dlock_monitor;
GRANT SELECT ON dlock.locks TO dlock_monitor;
GRANT SELECT ON dlock.grants TO dlock_monitor;
GRANT SELECT ON dlock.quotas TO dlock_monitor;
GRANT SELECT ON dlock.stats TO dlock_monitor;
GRANT EXECUTE ON PROCEDURE dlock.user_access TO dlock_admin;
GRANT EXECUTE ON PROCEDURE dlock.monitor_access TO dlock_admin;
GRANT EXECUTE ON PROCEDURE dlock.admin_access TO dlock_admin;
GRANT SELECT ON dlock.locks TO dlock_admin;
GRANT SELECT ON dlock.grants TO dlock_admin;
GRANT SELECT ON dlock.quotas TO dlock_admin;
GRANT SELECT ON dlock.stats TO dlock_admin;

-- A lock manager that was running (a re-install) reads the tables again.
DO dlock_reload();
