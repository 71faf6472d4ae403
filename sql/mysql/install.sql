-- sql/mysql/install.sql
--
-- Installs dlock into a MariaDB (10.11) server: the lock-store schema
-- `dlock`, the UDFs from dlock_udf.so (which must already be in the
-- server's plugin_dir: `make -C mysql_udf install`) and the reaper event.
-- Re-running it is safe: functions are dropped and re-created, tables and
-- their rows (held locks, the ticket counter) are kept.
--
--   mariadb -u root < sql/mysql/install.sql
--
-- Needs: CREATE/DROP FUNCTION rights (INSERT/DELETE on mysql.func), CREATE
-- on `dlock`, EVENT, and event_scheduler=ON in the server's configuration
-- (set here for the running server too) so leases and the locks of
-- disconnected sessions are reaped.

CREATE DATABASE IF NOT EXISTS dlock CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;

-- One row per lock name: the row every decision about the name locks
-- first, so decisions on one name are serialised.
CREATE TABLE IF NOT EXISTS dlock.names (
    name          VARBINARY(1024)  NOT NULL PRIMARY KEY,
    version       BIGINT UNSIGNED  NOT NULL DEFAULT 0
) ENGINE=InnoDB;

-- Waiters: one row per queued request.  The AUTO_INCREMENT ticket is the
-- FIFO order and, once granted, the fencing token (InnoDB persists the
-- counter, so tokens never go back, not even after a crash).
CREATE TABLE IF NOT EXISTS dlock.queue (
    ticket        BIGINT UNSIGNED  NOT NULL AUTO_INCREMENT PRIMARY KEY,
    name          VARBINARY(1024)  NOT NULL,
    holder        VARBINARY(320)   NOT NULL,   -- 'k:'owner or 's:'server/incarnation/conn
    owner         VARBINARY(255)   NULL,       -- NULL: owned by the session
    server        VARCHAR(160)     NOT NULL,   -- host:port of the server the caller is on
    incarnation   VARCHAR(64)      NOT NULL,   -- that server process
    conn_id       BIGINT UNSIGNED  NOT NULL,   -- CONNECTION_ID() of the caller
    mode          TINYINT UNSIGNED NOT NULL,   -- 3 shared, 5 exclusive
    ttl_us        BIGINT           NULL,       -- lease once granted
    since         TIMESTAMP(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    timeout_at    TIMESTAMP(6)     NULL,
    KEY queue_name (name, ticket),
    KEY queue_holder (holder)
) ENGINE=InnoDB;

-- Holders (the main rows): one row per (name, holder).
CREATE TABLE IF NOT EXISTS dlock.held (
    token         BIGINT UNSIGNED  NOT NULL PRIMARY KEY,
    name          VARBINARY(1024)  NOT NULL,
    holder        VARBINARY(320)   NOT NULL,
    owner         VARBINARY(255)   NULL,
    server        VARCHAR(160)     NOT NULL,
    incarnation   VARCHAR(64)      NOT NULL,
    conn_id       BIGINT UNSIGNED  NOT NULL,
    mode          TINYINT UNSIGNED NOT NULL,
    `count`       INT UNSIGNED     NOT NULL,
    granted_at    TIMESTAMP(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    expires_at    TIMESTAMP(6)     NULL,
    ttl_us        BIGINT           NULL,
    UNIQUE KEY held_name_holder (name, holder),
    KEY held_holder (holder),
    KEY held_expires (expires_at)
) ENGINE=InnoDB;

-- Holders and waiters, waiters with their 1-based place in the queue of
-- their name.  conn_id joins information_schema.PROCESSLIST.ID.
CREATE OR REPLACE SQL SECURITY DEFINER VIEW dlock.locks AS
SELECT CONVERT(h.name USING utf8mb4)                AS name,
       ELT(h.mode + 1, 'NL', 'CR', 'CW', 'shared', 'PW', 'exclusive') AS mode,
       TRUE                                         AS granted,
       CAST(NULL AS UNSIGNED)                       AS position,
       CONVERT(h.owner USING utf8mb4)               AS owner,
       h.conn_id                                    AS conn_id,
       h.token                                      AS token,
       h.`count`                                    AS `count`,
       h.granted_at                                 AS since,
       h.expires_at                                 AS expires_at,
       CAST(NULL AS DATETIME(6))                    AS timeout_at
  FROM dlock.held h
UNION ALL
SELECT CONVERT(q.name USING utf8mb4),
       ELT(q.mode + 1, 'NL', 'CR', 'CW', 'shared', 'PW', 'exclusive'),
       FALSE,
       ROW_NUMBER() OVER (PARTITION BY q.name ORDER BY q.ticket),
       CONVERT(q.owner USING utf8mb4),
       q.conn_id,
       q.ticket,
       NULL,
       q.since,
       NULL,
       q.timeout_at
  FROM dlock.queue q;

DROP FUNCTION IF EXISTS dlock_acquire;
DROP FUNCTION IF EXISTS dlock_try_acquire;
DROP FUNCTION IF EXISTS dlock_release;
DROP FUNCTION IF EXISTS dlock_renew;
DROP FUNCTION IF EXISTS dlock_release_all;
DROP FUNCTION IF EXISTS dlock_holder;
DROP FUNCTION IF EXISTS dlock_info;
DROP FUNCTION IF EXISTS dlock_new_owner;
DROP FUNCTION IF EXISTS dlock_reap;

CREATE FUNCTION dlock_acquire     RETURNS INTEGER SONAME 'dlock_udf.so';
CREATE FUNCTION dlock_try_acquire RETURNS INTEGER SONAME 'dlock_udf.so';
CREATE FUNCTION dlock_release     RETURNS INTEGER SONAME 'dlock_udf.so';
CREATE FUNCTION dlock_renew       RETURNS STRING  SONAME 'dlock_udf.so';
CREATE FUNCTION dlock_release_all RETURNS INTEGER SONAME 'dlock_udf.so';
CREATE FUNCTION dlock_holder      RETURNS STRING  SONAME 'dlock_udf.so';
CREATE FUNCTION dlock_info        RETURNS STRING  SONAME 'dlock_udf.so';
CREATE FUNCTION dlock_new_owner   RETURNS STRING  SONAME 'dlock_udf.so';
CREATE FUNCTION dlock_reap        RETURNS INTEGER SONAME 'dlock_udf.so';

-- The reaper: expires leases, releases the locks and withdraws the
-- requests of sessions that are gone (also after a server restart).
CREATE OR REPLACE EVENT dlock.reaper
    ON SCHEDULE EVERY 1 SECOND
    ON COMPLETION PRESERVE
    COMMENT 'dlock: expire leases, clean up after disconnected sessions'
    DO DO dlock_reap();

SET GLOBAL event_scheduler = ON;
