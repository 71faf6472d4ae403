-- sql/mysql/install.sql
--
-- Installs dlock into a MariaDB (10.11) server: the lock-store schema
-- `dlock`, the UDFs from dlock_udf.so (which must already be in the
-- server's plugin_dir: `make -C mysql_udf install`), the roles dlock_user,
-- dlock_monitor and dlock_admin, and the reaper event.  Re-running it is
-- safe: functions are dropped and re-created, tables and their rows (held
-- locks, the ticket counter) are kept.
--
-- Run it through scripts/mysql_install.sh, which then creates the plugin's
-- least-privilege store account and its credentials file; without that
-- account every call fails with "no lock store account".
--
-- Needs: CREATE/DROP FUNCTION rights (INSERT/DELETE on mysql.func), CREATE
-- on `dlock`, CREATE USER (the roles), EVENT, and event_scheduler=ON in
-- the server's configuration (set here for the running server too) so
-- leases and the locks of disconnected sessions are reaped.

CREATE DATABASE IF NOT EXISTS dlock CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;

-- One row per lock name: the row every decision about the name locks
-- first, so decisions on one name are serialised.
CREATE TABLE IF NOT EXISTS dlock.names (
    name          VARBINARY(1024)  NOT NULL PRIMARY KEY,
    version       BIGINT UNSIGNED  NOT NULL DEFAULT 0
) ENGINE=InnoDB;

-- Waiters: one row per queued request.  The ticket (from dlock.tickets) is
-- the FIFO order and, once granted, the fencing token.  (Installs before
-- 1.1 made it AUTO_INCREMENT; the column is then simply given values.)
CREATE TABLE IF NOT EXISTS dlock.queue (
    ticket        BIGINT UNSIGNED  NOT NULL PRIMARY KEY,
    name          VARBINARY(1024)  NOT NULL,
    holder        VARBINARY(1024)  NOT NULL,   -- 'k:'account'owner or 's:'server/incarnation/conn
    account       VARBINARY(640)   NOT NULL DEFAULT '', -- CURRENT_USER() of the caller
    owner         VARBINARY(255)   NULL,       -- NULL: owned by the session
    server        VARCHAR(160)     NOT NULL,   -- host:port of the server the caller is on
    incarnation   VARCHAR(64)      NOT NULL,   -- that server process
    conn_id       BIGINT UNSIGNED  NOT NULL,   -- CONNECTION_ID() of the caller
    mode          TINYINT UNSIGNED NOT NULL,   -- 3 shared, 5 exclusive
    ttl_us        BIGINT           NULL,       -- lease once granted
    since         TIMESTAMP(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    timeout_at    TIMESTAMP(6)     NULL,
    req           BIGINT           NULL,       -- the call that queued it
    KEY queue_name (name, ticket),
    KEY queue_holder (holder)
) ENGINE=InnoDB;

-- Holders (the main rows): one row per (name, holder), clustered by that
-- key: a name's holders are read together, and a hold that is taken and
-- released again and again reuses its row's place (keyed by the ever new
-- token, the index would pile up deleted entries of the same name and
-- holder until purge, and every lookup would walk them).
CREATE TABLE IF NOT EXISTS dlock.held (
    token         BIGINT UNSIGNED  NOT NULL,
    name          VARBINARY(1024)  NOT NULL,
    holder        VARBINARY(1024)  NOT NULL,
    account       VARBINARY(640)   NOT NULL DEFAULT '',
    owner         VARBINARY(255)   NULL,
    server        VARCHAR(160)     NOT NULL,
    incarnation   VARCHAR(64)      NOT NULL,
    conn_id       BIGINT UNSIGNED  NOT NULL,
    mode          TINYINT UNSIGNED NOT NULL,
    `count`       INT UNSIGNED     NOT NULL,
    granted_at    TIMESTAMP(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    expires_at    TIMESTAMP(6)     NULL,
    ttl_us        BIGINT           NULL,
    req           BIGINT           NULL,       -- the last call that granted or changed it
    PRIMARY KEY (name, holder),
    UNIQUE KEY held_token (token),
    KEY held_holder (holder),
    KEY held_expires (expires_at)
) ENGINE=InnoDB;

-- Installs before 1.1 keyed dlock.held by token: re-key it (rows are kept).
SET @dlock_sql = IF((SELECT COUNT(*) FROM information_schema.STATISTICS
                      WHERE TABLE_SCHEMA = 'dlock' AND TABLE_NAME = 'held'
                        AND INDEX_NAME = 'PRIMARY' AND COLUMN_NAME = 'token') > 0,
    'ALTER TABLE dlock.held DROP PRIMARY KEY, ADD PRIMARY KEY (name, holder), '
    'ADD UNIQUE KEY held_token (token), DROP KEY held_name_holder',
    'DO 0');
PREPARE dlock_stmt FROM @dlock_sql;
EXECUTE dlock_stmt;
DEALLOCATE PREPARE dlock_stmt;

-- A step's request id (req) lets the plugin repeat a step whose connection
-- was lost without doing it twice: the repeat finds the request's mark.
ALTER TABLE dlock.queue ADD COLUMN IF NOT EXISTS req BIGINT NULL;
ALTER TABLE dlock.held ADD COLUMN IF NOT EXISTS req BIGINT NULL;

-- Each row names the account that made the request, and an owner key is
-- scoped to its account (the holder is 'k:' + the account's length, ':',
-- the account and the key): installs before 1.2 had neither.  Their keyed
-- rows pass to the account that runs this upgrade.
ALTER TABLE dlock.queue ADD COLUMN IF NOT EXISTS
    account VARBINARY(640) NOT NULL DEFAULT '' AFTER holder,
    MODIFY holder VARBINARY(1024) NOT NULL;
ALTER TABLE dlock.held ADD COLUMN IF NOT EXISTS
    account VARBINARY(640) NOT NULL DEFAULT '' AFTER holder,
    MODIFY holder VARBINARY(1024) NOT NULL;
ALTER TABLE dlock.queue ADD KEY IF NOT EXISTS queue_account (account);
ALTER TABLE dlock.held ADD KEY IF NOT EXISTS held_account (account);
UPDATE dlock.held
   SET account = CURRENT_USER(),
       holder = CONCAT('k:', LENGTH(CURRENT_USER()), ':', CURRENT_USER(), owner)
 WHERE account = '' AND owner IS NOT NULL AND holder = CONCAT('k:', owner);
UPDATE dlock.queue
   SET account = CURRENT_USER(),
       holder = CONCAT('k:', LENGTH(CURRENT_USER()), ':', CURRENT_USER(), owner)
 WHERE account = '' AND owner IS NOT NULL AND holder = CONCAT('k:', owner);

-- Release-all steps that ended something, by request id, for a minute: a
-- repeat of one after a lost connection answers the same count.
CREATE TABLE IF NOT EXISTS dlock.done (
    req           BIGINT           NOT NULL PRIMARY KEY,
    `count`       INT              NOT NULL,
    done_at       TIMESTAMP(6)     NOT NULL,
    KEY done_at (done_at)
) ENGINE=InnoDB;

-- Namespaces: once a grant names an account (user@host as CURRENT_USER()
-- shows it) or its active role, that caller may lock only the names under
-- its prefixes.  A path prefix ('/a', or '/' for every path) covers the
-- path and the paths below it, segment by segment; a flat prefix covers
-- the flat names that start with it, byte by byte.  Changed through
-- dlock_grant() / dlock_revoke(); checked by step_acquire.
CREATE TABLE IF NOT EXISTS dlock.grants (
    grantee       VARBINARY(640)   NOT NULL,
    prefix        VARBINARY(1024)  NOT NULL,
    granted_at    TIMESTAMP(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    PRIMARY KEY (grantee, prefix)
) ENGINE=InnoDB;

-- Quotas, per account (not through roles; dlock_admin has none): at most
-- max_locks named locks held (live) or waited for in all, max_locks_per_owner
-- per owner key or session, and as many bytes (each lock: its name's length
-- plus its owner key's).  NULL: no limit.  Set with dlock_set_quota();
-- checked by step_acquire with the account's row locked, so concurrent
-- requests of one account cannot pass it together.
CREATE TABLE IF NOT EXISTS dlock.quotas (
    grantee             VARBINARY(640) NOT NULL PRIMARY KEY,
    max_locks           BIGINT NULL,
    max_locks_per_owner BIGINT NULL,
    max_bytes           BIGINT NULL,
    max_bytes_per_owner BIGINT NULL
) ENGINE=InnoDB;

-- Tickets: one counter for every request of every name, so the tickets of
-- a name grow in the order its requests are decided (they are taken while
-- the name's row is locked).  A crash loses the cached block and the next
-- values come after it: a token once handed out is never handed out again
-- nor undercut (the block reservation is in the redo log before any grant
-- that used it).  An older install's tokens are carried over: the counter
-- starts above every ticket and token already used.
CREATE SEQUENCE IF NOT EXISTS dlock.tickets START WITH 1 CACHE 1000 NOCYCLE ENGINE=InnoDB;
SET @dlock_next = 1 + GREATEST(
    IFNULL((SELECT MAX(token) FROM dlock.held), 0),
    IFNULL((SELECT MAX(ticket) FROM dlock.queue), 0),
    IFNULL((SELECT AUTO_INCREMENT - 1 FROM information_schema.TABLES
             WHERE TABLE_SCHEMA = 'dlock' AND TABLE_NAME = 'queue'), 0));
-- SETVAL takes literals only; it never moves a sequence backwards
SET @dlock_sql = CONCAT('SELECT SETVAL(dlock.tickets, ', @dlock_next, ', 0) INTO @dlock_ignored');
PREPARE dlock_stmt FROM @dlock_sql;
EXECUTE dlock_stmt;
DEALLOCATE PREPARE dlock_stmt;


-- The functions (dlock_udf.so).
DROP FUNCTION IF EXISTS dlock_acquire;
DROP FUNCTION IF EXISTS dlock_try_acquire;
DROP FUNCTION IF EXISTS dlock_release;
DROP FUNCTION IF EXISTS dlock_renew;
DROP FUNCTION IF EXISTS dlock_release_all;
DROP FUNCTION IF EXISTS dlock_holder;
DROP FUNCTION IF EXISTS dlock_info;
DROP FUNCTION IF EXISTS dlock_new_owner;
DROP FUNCTION IF EXISTS dlock_reap;
DROP FUNCTION IF EXISTS dlock_sees;
DROP FUNCTION IF EXISTS dlock_grant;
DROP FUNCTION IF EXISTS dlock_revoke;
DROP FUNCTION IF EXISTS dlock_set_quota;

CREATE FUNCTION dlock_acquire     RETURNS INTEGER SONAME 'dlock_udf.so';
CREATE FUNCTION dlock_try_acquire RETURNS INTEGER SONAME 'dlock_udf.so';
CREATE FUNCTION dlock_release     RETURNS INTEGER SONAME 'dlock_udf.so';
CREATE FUNCTION dlock_renew       RETURNS STRING  SONAME 'dlock_udf.so';
CREATE FUNCTION dlock_release_all RETURNS INTEGER SONAME 'dlock_udf.so';
CREATE FUNCTION dlock_holder      RETURNS STRING  SONAME 'dlock_udf.so';
CREATE FUNCTION dlock_info        RETURNS STRING  SONAME 'dlock_udf.so';
CREATE FUNCTION dlock_new_owner   RETURNS STRING  SONAME 'dlock_udf.so';
CREATE FUNCTION dlock_reap        RETURNS INTEGER SONAME 'dlock_udf.so';
CREATE FUNCTION dlock_sees        RETURNS INTEGER SONAME 'dlock_udf.so';
CREATE FUNCTION dlock_grant       RETURNS INTEGER SONAME 'dlock_udf.so';
CREATE FUNCTION dlock_revoke      RETURNS INTEGER SONAME 'dlock_udf.so';
CREATE FUNCTION dlock_set_quota   RETURNS INTEGER SONAME 'dlock_udf.so';

-- Who may call dlock: UDFs need no privilege in MariaDB, so each function
-- checks EXECUTE on one of these procedures in the caller's security
-- context (dlock_udf.c).  They do nothing when called.  The roles below
-- hold them; GRANT EXECUTE ON PROCEDURE dlock.user_access TO an account
-- works as well.
CREATE OR REPLACE PROCEDURE dlock.user_access() SQL SECURITY INVOKER
    COMMENT 'dlock: take, renew and release locks' BEGIN END;
CREATE OR REPLACE PROCEDURE dlock.monitor_access() SQL SECURITY INVOKER
    COMMENT 'dlock: see every lock in dlock.locks, owner keys hidden' BEGIN END;
CREATE OR REPLACE PROCEDURE dlock.admin_access() SQL SECURITY INVOKER
    COMMENT 'dlock: everything, every owner key shown' BEGIN END;

-- Holders and waiters the caller may see, waiters with their 1-based place
-- in the queue of their name (counted over every waiter).  dlock_sees()
-- decides in the caller's security context: its own account's rows with
-- their keys, every row without keys for dlock_monitor, everything for
-- dlock_admin.  conn_id joins information_schema.PROCESSLIST.ID.
CREATE OR REPLACE SQL SECURITY DEFINER VIEW dlock.locks AS
SELECT v.name, v.mode, v.granted, v.position,
       IF(v.sees = 2, v.owner, NULL) AS owner,
       v.owner IS NOT NULL AS keyed,
       v.account, v.conn_id, v.token, v.`count`, v.since, v.expires_at,
       v.timeout_at
  FROM (SELECT CONVERT(h.name USING utf8mb4)         AS name,
               ELT(h.mode + 1, 'NL', 'CR', 'CW', 'shared', 'PW', 'exclusive') AS mode,
               TRUE                                  AS granted,
               CAST(NULL AS UNSIGNED)                AS position,
               CONVERT(h.owner USING utf8mb4)        AS owner,
               CONVERT(h.account USING utf8mb4)      AS account,
               h.conn_id                             AS conn_id,
               h.token                               AS token,
               h.`count`                             AS `count`,
               h.granted_at                          AS since,
               h.expires_at                          AS expires_at,
               CAST(NULL AS DATETIME(6))             AS timeout_at,
               dlock_sees(h.account)                 AS sees
          FROM dlock.held h
        UNION ALL
        SELECT CONVERT(q.name USING utf8mb4),
               ELT(q.mode + 1, 'NL', 'CR', 'CW', 'shared', 'PW', 'exclusive'),
               FALSE,
               ROW_NUMBER() OVER (PARTITION BY q.name ORDER BY q.ticket),
               CONVERT(q.owner USING utf8mb4),
               CONVERT(q.account USING utf8mb4),
               q.conn_id,
               q.ticket,
               NULL,
               q.since,
               NULL,
               q.timeout_at,
               dlock_sees(q.account)
          FROM dlock.queue q) v
 WHERE v.sees > 0;

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
GRANT EXECUTE ON PROCEDURE dlock.user_access TO dlock_admin;
GRANT EXECUTE ON PROCEDURE dlock.monitor_access TO dlock_admin;
GRANT EXECUTE ON PROCEDURE dlock.admin_access TO dlock_admin;
GRANT SELECT ON dlock.locks TO dlock_admin;
GRANT SELECT ON dlock.grants TO dlock_admin;
GRANT SELECT ON dlock.quotas TO dlock_admin;

-- ------------------------------------------------------------------------
-- The algorithm.  Each step_* procedure is one step of one call of the
-- plugin (dlock_udf.so): one transaction in one CALL, so a step costs one
-- round trip on the plugin's connection.  A step first locks the name's
-- row in dlock.names (a locking read; the row is created on first use),
-- which serialises every decision about that name - across connections,
-- servers sharing this store, and the reaper - and ends with one row:
--   state   1 granted / released / found, 2 waiting, 3 refused (try),
--           4 held in a weaker mode (DL003), 5 withdrawn, 0 not held
--   token, ticket, head (first in the queue), next_expiry_us (until the
--   earliest live lease of the name ends), count, granted ('ticket:token,'
--   for every request the step granted), withdrawn ('ticket,' for every
--   request it took out of the queue), expiry (renew: new expiry, UTC).
-- The plugin wakes its local waiters from granted and withdrawn.  p_req
-- identifies the call; when the plugin repeats a step after losing its
-- connection (p_retry = 1), the step recognises what the lost attempt
-- did - held.req and queue.req carry the mark - and does not do it twice.
-- Modes
-- are numbers (3 shared, 5 exclusive; core/dlock_core.h) and the
-- compatibility matrix comes from the plugin (core/, shared with
-- PostgreSQL), packed: conflicts(m) = (p_conflicts >> 6m) & 63 and
-- covers(h, w) = (p_covers >> (6h + w)) & 1.  A lease is live while
-- expires_at is NULL or after the step's time.  Only the plugin's store
-- account calls these (SQL SECURITY INVOKER: its own rights).
-- ------------------------------------------------------------------------
DELIMITER //

-- Grant, in ticket order, every queued request of the name that is
-- compatible with the live holders and with every request queued before
-- it (granted or not, each request's mode joins the mask); expired leases
-- of the name go first.  Runs inside the caller's transaction, with the
-- name locked.
CREATE OR REPLACE PROCEDURE dlock.advance(
    IN p_name VARBINARY(1024), IN p_conflicts BIGINT UNSIGNED,
    IN p_now TIMESTAMP(6), INOUT p_granted TEXT, OUT p_next_expiry_us BIGINT)
    SQL SECURITY INVOKER MODIFIES SQL DATA
BEGIN
    DECLARE v_ticket, v_token BIGINT UNSIGNED;
    DECLARE v_mode, v_mask INT UNSIGNED DEFAULT 0;
    DECLARE v_holder VARBINARY(1024);
    DECLARE v_expired, v_rows INT DEFAULT 0;
    DECLARE v_done INT DEFAULT 0;
    DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;

    SELECT IFNULL(BIT_OR(IF(expires_at <= p_now, 0, 1 << mode)), 0),
           IFNULL(SUM(expires_at <= p_now), 0),
           GREATEST(0, TIMESTAMPDIFF(MICROSECOND, p_now,
                                     MIN(IF(expires_at > p_now, expires_at, NULL))))
      INTO v_mask, v_expired, p_next_expiry_us
      FROM dlock.held WHERE name = p_name;
    IF v_expired > 0 THEN
        DELETE FROM dlock.held WHERE name = p_name AND expires_at <= p_now;
    END IF;
    SELECT ticket, mode, holder INTO v_ticket, v_mode, v_holder
      FROM dlock.queue WHERE name = p_name ORDER BY ticket LIMIT 1;
    WHILE v_done = 0 DO
        IF ((p_conflicts >> (v_mode * 6)) & 63) & v_mask = 0 THEN
            INSERT INTO dlock.held (token, name, holder, account, owner,
                   server, incarnation, conn_id, mode, `count`, granted_at,
                   expires_at, ttl_us, req)
            SELECT q.ticket, q.name, q.holder, q.account, q.owner, q.server,
                   q.incarnation, q.conn_id, q.mode, 1, p_now,
                   p_now + INTERVAL q.ttl_us MICROSECOND, q.ttl_us, q.req
              FROM dlock.queue q WHERE q.ticket = v_ticket
            ON DUPLICATE KEY UPDATE `count` = dlock.held.`count` + 1,
                                    req = q.req;
            SET v_rows = ROW_COUNT();
            SET v_token = v_ticket;
            IF v_rows <> 1 THEN
                -- the same owner key already held it: one more level
                SET v_token = (SELECT token FROM dlock.held FORCE INDEX (PRIMARY)
                                WHERE name = p_name AND holder = v_holder);
            END IF;
            DELETE FROM dlock.queue WHERE ticket = v_ticket;
            SET p_granted = CONCAT(p_granted, v_ticket, ':', v_token, ',');
        END IF;
        SET v_mask = v_mask | (1 << v_mode);
        -- with an exclusive request held or waiting nothing behind it can
        -- pass (CR conflicts only with EX, and NL never waits).  No other
        -- stop: a compatible request left queued would be passed by a
        -- newcomer granted at once, with a larger token than its own
        IF v_mask & (1 << 5) THEN
            SET v_done = 1;
        ELSE
            SELECT ticket, mode, holder INTO v_ticket, v_mode, v_holder
              FROM dlock.queue WHERE name = p_name AND ticket > v_ticket
             ORDER BY ticket LIMIT 1;
        END IF;
    END WHILE;
END//

-- Acquire: re-enter a live hold, grant at once when compatible with the
-- live holders and with everyone queued (nobody is overtaken), refuse
-- (try), or queue with a new ticket.
CREATE OR REPLACE PROCEDURE dlock.step_acquire(
    IN p_name VARBINARY(1024), IN p_holder VARBINARY(1024),
    IN p_account VARBINARY(640), IN p_role VARBINARY(640), IN p_bound TINYINT,
    IN p_owner VARBINARY(255), IN p_server VARCHAR(160),
    IN p_incarnation VARCHAR(64), IN p_conn BIGINT UNSIGNED,
    IN p_mode TINYINT UNSIGNED, IN p_ttl_us BIGINT, IN p_timeout_us BIGINT,
    IN p_try TINYINT, IN p_conflicts BIGINT UNSIGNED, IN p_covers BIGINT UNSIGNED,
    IN p_req BIGINT, IN p_retry TINYINT)
    SQL SECURITY INVOKER MODIFIES SQL DATA
step: BEGIN
    DECLARE v_now TIMESTAMP(6);
    DECLARE v_live, v_qmask INT UNSIGNED DEFAULT 0;
    DECLARE v_expired INT DEFAULT 0;
    DECLARE v_mine, v_token, v_ticket, v_version BIGINT UNSIGNED;
    DECLARE v_mine_req BIGINT;
    DECLARE v_mine_mode INT;
    DECLARE v_next BIGINT;
    DECLARE v_state, v_head TINYINT DEFAULT 0;
    DECLARE v_granted TEXT DEFAULT '';
    DECLARE v_max, v_max_owner, v_max_bytes, v_max_owner_bytes BIGINT;
    DECLARE v_n, v_bytes, v_n_owner, v_bytes_owner, v_len BIGINT;
    DECLARE v_quota VARCHAR(64);
    DECLARE v_bound, v_covered, v_has_quota BOOLEAN DEFAULT FALSE;

    -- a caller bound by grants (not dlock_admin) may take only names
    -- under them: state 6, before anything is written; one statement also
    -- tells whether the account has a quota (checked below)
    IF p_bound THEN
        SELECT EXISTS (SELECT 1 FROM dlock.grants
                        WHERE grantee IN (p_account, p_role)),
               EXISTS (SELECT 1 FROM dlock.grants g
                        WHERE g.grantee IN (p_account, p_role)
                          AND IF(LEFT(p_name, 1) = '/',
                                 LEFT(g.prefix, 1) = '/'
                                 AND (g.prefix = '/' OR g.prefix = p_name
                                      OR LEFT(p_name, LENGTH(g.prefix) + 1) = CONCAT(g.prefix, '/')),
                                 LEFT(g.prefix, 1) <> '/'
                                 AND LEFT(p_name, LENGTH(g.prefix)) = g.prefix)),
               EXISTS (SELECT 1 FROM dlock.quotas WHERE grantee = p_account)
          INTO v_bound, v_covered, v_has_quota;
        IF v_bound AND NOT v_covered THEN
            SELECT 6, NULL, NULL, 0, NULL, 0, '', '', NULL;
            LEAVE step;
        END IF;
    END IF;
    START TRANSACTION;
    SET v_version = (SELECT version FROM dlock.names WHERE name = p_name FOR UPDATE);
    IF v_version IS NULL THEN
        INSERT INTO dlock.names (name) VALUES (p_name)
            ON DUPLICATE KEY UPDATE version = version + 1;
    END IF;
    SET v_now = NOW(6);
    SELECT IFNULL(BIT_OR(IF(expires_at <= v_now, 0, 1 << mode)), 0),
           IFNULL(SUM(expires_at <= v_now), 0),
           MAX(IF(holder = p_holder AND (expires_at IS NULL OR expires_at > v_now),
                  token, NULL)),
           MAX(IF(holder = p_holder AND (expires_at IS NULL OR expires_at > v_now),
                  mode, NULL)),
           MAX(IF(holder = p_holder, req, NULL)),
           GREATEST(0, TIMESTAMPDIFF(MICROSECOND, v_now,
                                     MIN(IF(expires_at > v_now, expires_at, NULL)))),
           (SELECT IFNULL(BIT_OR(1 << q.mode), 0) FROM dlock.queue q
             WHERE q.name = p_name)
      INTO v_live, v_expired, v_mine, v_mine_mode, v_mine_req, v_next, v_qmask
      FROM dlock.held FORCE INDEX (PRIMARY) WHERE name = p_name;
    IF p_retry THEN
        -- the lost attempt granted or re-entered (here or, queued, since)
        IF v_mine IS NOT NULL AND v_mine_req = p_req THEN
            COMMIT;
            SELECT 1, v_mine, NULL, 0, v_next, 0, '', '', NULL;
            LEAVE step;
        END IF;
        -- the lost attempt queued the request
        SET v_ticket = (SELECT ticket FROM dlock.queue
                         WHERE name = p_name AND req = p_req);
        IF v_ticket IS NOT NULL THEN
            COMMIT;
            SELECT 2, NULL, v_ticket,
                   v_ticket = (SELECT MIN(ticket) FROM dlock.queue WHERE name = p_name),
                   v_next, 0, '', '', NULL;
            LEAVE step;
        END IF;
    END IF;
    IF v_expired > 0 THEN
        IF v_qmask <> 0 THEN
            -- leases ran out with requests waiting: those come first
            CALL dlock.advance(p_name, p_conflicts, v_now, v_granted, v_next);
            SELECT IFNULL(BIT_OR(1 << mode), 0),
                   (SELECT IFNULL(BIT_OR(1 << q.mode), 0) FROM dlock.queue q
                     WHERE q.name = p_name)
              INTO v_live, v_qmask
              FROM dlock.held WHERE name = p_name;
        ELSE
            DELETE FROM dlock.held WHERE name = p_name AND expires_at <= v_now;
        END IF;
    END IF;
    -- a new lock of an account with a quota: count what it holds and
    -- waits for (its quota row locked: one such decision at a time)
    IF v_mine IS NULL AND v_has_quota THEN
        SELECT max_locks, max_locks_per_owner, max_bytes, max_bytes_per_owner
          INTO v_max, v_max_owner, v_max_bytes, v_max_owner_bytes
          FROM dlock.quotas WHERE grantee = p_account FOR UPDATE;
        -- the account's locks and, among them or not, the owner's: one pass
        SELECT IFNULL(SUM(account = p_account), 0),
               IFNULL(SUM(IF(account = p_account, len, 0)), 0),
               IFNULL(SUM(holder = p_holder), 0),
               IFNULL(SUM(IF(holder = p_holder, len, 0)), 0)
          INTO v_n, v_bytes, v_n_owner, v_bytes_owner
          FROM (SELECT account, holder, LENGTH(name) + IFNULL(LENGTH(owner), 0) AS len
                  FROM dlock.held
                 WHERE (account = p_account OR holder = p_holder)
                   AND (expires_at IS NULL OR expires_at > v_now)
                UNION ALL
                SELECT account, holder, LENGTH(name) + IFNULL(LENGTH(owner), 0)
                  FROM dlock.queue
                 WHERE account = p_account OR holder = p_holder) r;
        SET v_len = LENGTH(p_name) + IFNULL(LENGTH(p_owner), 0);
        SET v_quota = CASE
            WHEN v_n + 1 > v_max THEN CONCAT('max_locks ', v_max)
            WHEN v_bytes + v_len > v_max_bytes THEN CONCAT('max_bytes ', v_max_bytes)
            WHEN v_n_owner + 1 > v_max_owner THEN CONCAT('max_locks_per_owner ', v_max_owner)
            WHEN v_bytes_owner + v_len > v_max_owner_bytes
                THEN CONCAT('max_bytes_per_owner ', v_max_owner_bytes)
        END;
        IF v_quota IS NOT NULL THEN
            ROLLBACK;
            SELECT 7, NULL, NULL, 0, NULL, 0, '', '', v_quota;
            LEAVE step;
        END IF;
    END IF;
    IF v_mine IS NOT NULL THEN
        IF (p_covers >> (v_mine_mode * 6 + p_mode)) & 1 = 0 THEN
            SET v_state = 4;
        ELSE
            UPDATE dlock.held SET `count` = `count` + 1, req = p_req
             WHERE token = v_mine;
            SET v_state = 1, v_token = v_mine;
        END IF;
    ELSEIF ((p_conflicts >> (p_mode * 6)) & 63) & (v_live | v_qmask) = 0 THEN
        SET v_token = NEXTVAL(dlock.tickets);
        INSERT INTO dlock.held (token, name, holder, account, owner, server,
               incarnation, conn_id, mode, `count`, granted_at, expires_at,
               ttl_us, req)
        VALUES (v_token, p_name, p_holder, p_account, p_owner, p_server,
                p_incarnation,
                p_conn, p_mode, 1, v_now, v_now + INTERVAL p_ttl_us MICROSECOND,
                p_ttl_us, p_req);
        SET v_state = 1;
    ELSEIF p_try THEN
        SET v_state = 3;
    ELSE
        SET v_ticket = NEXTVAL(dlock.tickets);
        INSERT INTO dlock.queue (ticket, name, holder, account, owner, server,
               incarnation, conn_id, mode, ttl_us, since, timeout_at, req)
        VALUES (v_ticket, p_name, p_holder, p_account, p_owner, p_server,
                p_incarnation,
                p_conn, p_mode, p_ttl_us, v_now,
                v_now + INTERVAL p_timeout_us MICROSECOND, p_req);
        SET v_state = 2, v_head = (v_qmask = 0);
    END IF;
    -- a step that changed nothing commits without a log write
    COMMIT;
    SELECT v_state, v_token, v_ticket, v_head, v_next, 0, v_granted, '', NULL;
END//

-- Release one level of the caller's live hold; at zero the lock is free
-- and goes to the next in line.
CREATE OR REPLACE PROCEDURE dlock.step_release(
    IN p_name VARBINARY(1024), IN p_holder VARBINARY(1024),
    IN p_conflicts BIGINT UNSIGNED, IN p_req BIGINT, IN p_retry TINYINT)
    SQL SECURITY INVOKER MODIFIES SQL DATA
BEGIN
    DECLARE v_now TIMESTAMP(6);
    DECLARE v_version, v_token BIGINT UNSIGNED;
    DECLARE v_req BIGINT;
    DECLARE v_state TINYINT DEFAULT 0;
    DECLARE v_next BIGINT;
    DECLARE v_granted TEXT DEFAULT '';

    START TRANSACTION;
    SET v_version = (SELECT version FROM dlock.names WHERE name = p_name FOR UPDATE);
    IF v_version IS NULL THEN
        INSERT INTO dlock.names (name) VALUES (p_name)
            ON DUPLICATE KEY UPDATE version = version + 1;
    END IF;
    SET v_now = NOW(6);
    -- by the unique key, then by primary key: a DELETE with these
    -- conditions costs the optimizer more than the two statements
    SELECT MAX(token), MAX(req) INTO v_token, v_req
      FROM dlock.held FORCE INDEX (PRIMARY)
     WHERE name = p_name AND holder = p_holder
       AND (expires_at IS NULL OR expires_at > v_now);
    IF p_retry AND (v_token IS NULL OR v_req = p_req) THEN
        -- the lost attempt released it (or it was not held: cannot tell)
        SET v_state = 1;
    ELSEIF v_token IS NOT NULL THEN
        SET v_state = 1;
        DELETE FROM dlock.held WHERE token = v_token AND `count` = 1;
        IF ROW_COUNT() = 1 THEN
            IF EXISTS (SELECT 1 FROM dlock.queue WHERE name = p_name) THEN
                CALL dlock.advance(p_name, p_conflicts, v_now, v_granted, v_next);
            END IF;
        ELSE
            UPDATE dlock.held SET `count` = `count` - 1, req = p_req
             WHERE token = v_token;
        END IF;
    END IF;
    COMMIT;
    SELECT v_state, NULL, NULL, 0, NULL, 0, v_granted, '', NULL;
END//

-- A waiter's look at its request: grant what can be granted, then say what
-- became of the ticket.  With p_withdraw the request leaves the queue; a
-- grant found instead is kept (timeout: the caller gets it) or, with
-- p_kill, given back (the caller will never see it).
CREATE OR REPLACE PROCEDURE dlock.step_status(
    IN p_name VARBINARY(1024), IN p_holder VARBINARY(1024),
    IN p_ticket BIGINT UNSIGNED, IN p_withdraw TINYINT, IN p_kill TINYINT,
    IN p_conflicts BIGINT UNSIGNED, IN p_req BIGINT, IN p_retry TINYINT)
    SQL SECURITY INVOKER MODIFIES SQL DATA
BEGIN
    DECLARE v_now TIMESTAMP(6);
    DECLARE v_version, v_token, v_first BIGINT UNSIGNED;
    DECLARE v_state TINYINT DEFAULT 5;
    DECLARE v_head, v_left TINYINT DEFAULT 0;
    DECLARE v_next BIGINT;
    DECLARE v_granted TEXT DEFAULT '';
    DECLARE v_withdrawn TEXT DEFAULT '';
    DECLARE v_in_queue INT DEFAULT 0;

    START TRANSACTION;
    SET v_version = (SELECT version FROM dlock.names WHERE name = p_name FOR UPDATE);
    IF v_version IS NULL THEN
        INSERT INTO dlock.names (name) VALUES (p_name)
            ON DUPLICATE KEY UPDATE version = version + 1;
    END IF;
    SET v_now = NOW(6);
    IF p_withdraw THEN
        DELETE FROM dlock.queue WHERE ticket = p_ticket;
        IF ROW_COUNT() = 1 THEN
            -- our leaving may let requests behind us through
            SET v_left = 1, v_withdrawn = CONCAT(p_ticket, ',');
            CALL dlock.advance(p_name, p_conflicts, v_now, v_granted, v_next);
        END IF;
    ELSE
        CALL dlock.advance(p_name, p_conflicts, v_now, v_granted, v_next);
        SELECT MIN(ticket), IFNULL(SUM(ticket = p_ticket), 0)
          INTO v_first, v_in_queue
          FROM dlock.queue WHERE name = p_name;
        IF v_in_queue > 0 THEN
            SET v_state = 2, v_head = (v_first = p_ticket);
        END IF;
    END IF;
    IF v_state = 5 AND v_left = 0 THEN
        -- not in the queue: granted earlier (maybe merged into a hold of
        -- the same owner key), or withdrawn by someone else
        SET v_token = (SELECT token FROM dlock.held WHERE token = p_ticket);
        IF v_token IS NULL THEN
            SET v_token = (SELECT token FROM dlock.held FORCE INDEX (PRIMARY)
                            WHERE name = p_name AND holder = p_holder);
        END IF;
        IF v_token IS NOT NULL THEN
            SET v_state = 1;
            IF p_withdraw AND p_kill THEN
                -- unless the lost attempt already gave it back
                IF NOT (p_retry AND (SELECT req FROM dlock.held WHERE token = v_token) <=> p_req) THEN
                    UPDATE dlock.held SET `count` = `count` - 1, req = p_req
                     WHERE token = v_token AND `count` > 1;
                    IF ROW_COUNT() = 0 THEN
                        DELETE FROM dlock.held WHERE token = v_token;
                        CALL dlock.advance(p_name, p_conflicts, v_now, v_granted, v_next);
                    END IF;
                END IF;
                SET v_state = 5;
            END IF;
        END IF;
    END IF;
    COMMIT;
    SELECT v_state, v_token, p_ticket, v_head, v_next, 0, v_granted, v_withdrawn, NULL;
END//

-- Renew the caller's live lease to now + p_ttl_us (NULL: its own TTL).
CREATE OR REPLACE PROCEDURE dlock.step_renew(
    IN p_name VARBINARY(1024), IN p_holder VARBINARY(1024), IN p_ttl_us BIGINT)
    SQL SECURITY INVOKER MODIFIES SQL DATA
BEGIN
    DECLARE v_now TIMESTAMP(6);
    DECLARE v_version, v_token BIGINT UNSIGNED;
    DECLARE v_expiry VARCHAR(32);

    START TRANSACTION;
    SET v_version = (SELECT version FROM dlock.names WHERE name = p_name FOR UPDATE);
    IF v_version IS NULL THEN
        INSERT INTO dlock.names (name) VALUES (p_name)
            ON DUPLICATE KEY UPDATE version = version + 1;
    END IF;
    SET v_now = NOW(6);
    SET v_token = (SELECT token FROM dlock.held FORCE INDEX (PRIMARY)
                    WHERE name = p_name AND holder = p_holder
                      AND (expires_at IS NULL OR expires_at > v_now));
    IF v_token IS NOT NULL THEN
        UPDATE dlock.held SET ttl_us = COALESCE(p_ttl_us, ttl_us),
               expires_at = v_now + INTERVAL COALESCE(p_ttl_us, ttl_us) MICROSECOND
         WHERE token = v_token;
        SET v_expiry = (SELECT DATE_FORMAT(expires_at, '%Y-%m-%d %H:%i:%s.%f')
                          FROM dlock.held WHERE token = v_token);
    END IF;
    COMMIT;
    SELECT v_token IS NOT NULL, v_token, NULL, 0, NULL, 0, '', '', v_expiry;
END//

-- Release every live hold and withdraw every request of the holder on one
-- name; count = how many.  What it ended is kept in dlock.done, so a repeat
-- after a lost connection answers the same count.
CREATE OR REPLACE PROCEDURE dlock.step_release_all(
    IN p_name VARBINARY(1024), IN p_holder VARBINARY(1024),
    IN p_conflicts BIGINT UNSIGNED, IN p_req BIGINT, IN p_retry TINYINT)
    SQL SECURITY INVOKER MODIFIES SQL DATA
step: BEGIN
    DECLARE v_now TIMESTAMP(6);
    DECLARE v_version, v_token BIGINT UNSIGNED;
    DECLARE v_held, v_queued INT DEFAULT 0;
    DECLARE v_next BIGINT;
    DECLARE v_granted TEXT DEFAULT '';
    DECLARE v_withdrawn TEXT;

    START TRANSACTION;
    SET v_version = (SELECT version FROM dlock.names WHERE name = p_name FOR UPDATE);
    IF p_retry THEN
        SET v_held = (SELECT `count` FROM dlock.done WHERE req = p_req);
        IF v_held IS NOT NULL THEN
            COMMIT;
            SELECT 1, NULL, NULL, 0, NULL, v_held, '', '', NULL;
            LEAVE step;
        END IF;
        SET v_held = 0;
    END IF;
    IF v_version IS NULL THEN
        INSERT INTO dlock.names (name) VALUES (p_name)
            ON DUPLICATE KEY UPDATE version = version + 1;
    END IF;
    SET v_now = NOW(6);
    SET v_token = (SELECT token FROM dlock.held FORCE INDEX (PRIMARY)
                    WHERE name = p_name AND holder = p_holder
                      AND (expires_at IS NULL OR expires_at > v_now));
    IF v_token IS NOT NULL THEN
        DELETE FROM dlock.held WHERE token = v_token;
        SET v_held = 1;
    END IF;
    SELECT GROUP_CONCAT(ticket, ',' SEPARATOR ''), COUNT(*)
      INTO v_withdrawn, v_queued
      FROM dlock.queue WHERE name = p_name AND holder = p_holder;
    IF v_held + v_queued > 0 THEN
        DELETE FROM dlock.queue WHERE name = p_name AND holder = p_holder;
        CALL dlock.advance(p_name, p_conflicts, v_now, v_granted, v_next);
        INSERT INTO dlock.done VALUES (p_req, v_held + v_queued, v_now);
    END IF;
    COMMIT;
    SELECT 1, NULL, NULL, 0, NULL, v_held + v_queued, v_granted,
           IFNULL(v_withdrawn, ''), NULL;
END//

-- Undo what a failed acquire call may have left: its queue rows (a lost
-- attempt's too) and a grant or re-entry it made (one level), found by the
-- call's request id; then hand on.  count = rows changed.
CREATE OR REPLACE PROCEDURE dlock.step_cancel(
    IN p_name VARBINARY(1024), IN p_holder VARBINARY(1024), IN p_req BIGINT,
    IN p_conflicts BIGINT UNSIGNED)
    SQL SECURITY INVOKER MODIFIES SQL DATA
BEGIN
    DECLARE v_now TIMESTAMP(6);
    DECLARE v_version, v_token BIGINT UNSIGNED;
    DECLARE v_count, v_queued INT DEFAULT 0;
    DECLARE v_next BIGINT;
    DECLARE v_granted TEXT DEFAULT '';
    DECLARE v_withdrawn TEXT;

    START TRANSACTION;
    SET v_version = (SELECT version FROM dlock.names WHERE name = p_name FOR UPDATE);
    SET v_now = NOW(6);
    SELECT GROUP_CONCAT(ticket, ',' SEPARATOR ''), COUNT(*)
      INTO v_withdrawn, v_queued
      FROM dlock.queue WHERE name = p_name AND req = p_req;
    IF v_queued > 0 THEN
        DELETE FROM dlock.queue WHERE name = p_name AND req = p_req;
    END IF;
    SELECT MAX(token), MAX(`count`) INTO v_token, v_count
      FROM dlock.held FORCE INDEX (PRIMARY)
     WHERE name = p_name AND holder = p_holder AND req = p_req;
    IF v_token IS NOT NULL THEN
        IF v_count > 1 THEN
            UPDATE dlock.held SET `count` = `count` - 1, req = NULL
             WHERE token = v_token;
        ELSE
            DELETE FROM dlock.held WHERE token = v_token;
        END IF;
    END IF;
    IF v_queued > 0 OR v_token IS NOT NULL THEN
        CALL dlock.advance(p_name, p_conflicts, v_now, v_granted, v_next);
    END IF;
    COMMIT;
    SELECT 1, NULL, NULL, 0, NULL, v_queued + (v_token IS NOT NULL), v_granted,
           IFNULL(v_withdrawn, ''), NULL;
END//

-- The reaper's step on one name: expire its leases and, by p_kind, end a
-- dead session's hold (1, p_id = token) or withdraw its request (2,
-- p_id = ticket); then hand on.  count = rows ended.
CREATE OR REPLACE PROCEDURE dlock.step_reap(
    IN p_name VARBINARY(1024), IN p_kind TINYINT, IN p_id BIGINT UNSIGNED,
    IN p_conflicts BIGINT UNSIGNED)
    SQL SECURITY INVOKER MODIFIES SQL DATA
BEGIN
    DECLARE v_now TIMESTAMP(6);
    DECLARE v_version BIGINT UNSIGNED;
    DECLARE v_count INT DEFAULT 0;
    DECLARE v_next BIGINT;
    DECLARE v_granted TEXT DEFAULT '';
    DECLARE v_withdrawn TEXT DEFAULT '';

    START TRANSACTION;
    SET v_version = (SELECT version FROM dlock.names WHERE name = p_name FOR UPDATE);
    IF v_version IS NULL THEN
        INSERT INTO dlock.names (name) VALUES (p_name)
            ON DUPLICATE KEY UPDATE version = version + 1;
    END IF;
    SET v_now = NOW(6);
    DELETE FROM dlock.held WHERE name = p_name AND expires_at <= v_now;
    SET v_count = ROW_COUNT();
    IF p_kind = 1 THEN
        DELETE FROM dlock.held WHERE token = p_id AND name = p_name;
        SET v_count = v_count + ROW_COUNT();
    ELSEIF p_kind = 2 THEN
        DELETE FROM dlock.queue WHERE ticket = p_id AND name = p_name;
        IF ROW_COUNT() = 1 THEN
            SET v_count = v_count + 1, v_withdrawn = CONCAT(p_id, ',');
        END IF;
    END IF;
    CALL dlock.advance(p_name, p_conflicts, v_now, v_granted, v_next);
    COMMIT;
    SELECT 1, NULL, NULL, 0, NULL, v_count, v_granted, v_withdrawn, NULL;
END//

-- The reaper's cleanup: names rows without holders or waiters are only
-- mutexes; drop up to p_limit of them.  Each is locked first (skipping
-- rows a step holds), then found idle, then deleted: the same order as a
-- step's, so the two never deadlock.  Also forgets release-all results
-- older than a minute.
CREATE OR REPLACE PROCEDURE dlock.step_forget_idle(IN p_limit INT)
    SQL SECURITY INVOKER MODIFIES SQL DATA
BEGIN
    DECLARE v_name VARBINARY(1024) DEFAULT '';
    DECLARE v_version BIGINT UNSIGNED;
    DECLARE v_count, v_seen INT DEFAULT 0;
    DECLARE v_done INT DEFAULT 0;
    DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;

    START TRANSACTION;
    scan: LOOP
        SELECT n.name INTO v_name FROM dlock.names n
         WHERE n.name > v_name
           AND NOT EXISTS (SELECT 1 FROM dlock.held h WHERE h.name = n.name)
           AND NOT EXISTS (SELECT 1 FROM dlock.queue q WHERE q.name = n.name)
         ORDER BY n.name LIMIT 1;
        IF v_done OR v_seen >= p_limit THEN
            LEAVE scan;
        END IF;
        SET v_seen = v_seen + 1;
        SET v_version = (SELECT version FROM dlock.names WHERE name = v_name
                            FOR UPDATE SKIP LOCKED);
        IF v_version IS NOT NULL
           AND NOT EXISTS (SELECT 1 FROM dlock.held WHERE name = v_name)
           AND NOT EXISTS (SELECT 1 FROM dlock.queue WHERE name = v_name) THEN
            DELETE FROM dlock.names WHERE name = v_name;
            SET v_count = v_count + 1;
        END IF;
        IF v_seen % 25 = 0 THEN
            -- do not keep many names locked at once
            COMMIT;
            START TRANSACTION;
        END IF;
    END LOOP;
    COMMIT;
    DELETE FROM dlock.done WHERE done_at < NOW(6) - INTERVAL 1 MINUTE;
    SELECT 1, NULL, NULL, 0, NULL, v_count, '', '', NULL;
END//

-- dlock_set_quota: all limits NULL removes the account's row.
CREATE OR REPLACE PROCEDURE dlock.step_set_quota(
    IN p_grantee VARBINARY(640), IN p_max BIGINT, IN p_max_owner BIGINT,
    IN p_max_bytes BIGINT, IN p_max_owner_bytes BIGINT)
    SQL SECURITY INVOKER MODIFIES SQL DATA
BEGIN
    IF COALESCE(p_max, p_max_owner, p_max_bytes, p_max_owner_bytes) IS NULL THEN
        DELETE FROM dlock.quotas WHERE grantee = p_grantee;
    ELSE
        INSERT INTO dlock.quotas VALUES (p_grantee, p_max, p_max_owner,
                                         p_max_bytes, p_max_owner_bytes)
            ON DUPLICATE KEY UPDATE max_locks = p_max,
                max_locks_per_owner = p_max_owner, max_bytes = p_max_bytes,
                max_bytes_per_owner = p_max_owner_bytes;
    END IF;
    SELECT 1;
END//

-- dlock_grant / dlock_revoke: count = 1 when the grant was added or taken
-- back, 0 when it was already there / not there.
CREATE OR REPLACE PROCEDURE dlock.step_grant(
    IN p_grantee VARBINARY(640), IN p_prefix VARBINARY(1024), IN p_revoke TINYINT)
    SQL SECURITY INVOKER MODIFIES SQL DATA
BEGIN
    IF p_revoke THEN
        DELETE FROM dlock.grants WHERE grantee = p_grantee AND prefix = p_prefix;
    ELSE
        INSERT IGNORE INTO dlock.grants (grantee, prefix) VALUES (p_grantee, p_prefix);
    END IF;
    SELECT ROW_COUNT();
END//

DELIMITER ;



-- The reaper: expires leases, releases the locks and withdraws the
-- requests of sessions that are gone (also after a server restart).
CREATE OR REPLACE EVENT dlock.reaper
    ON SCHEDULE EVERY 1 SECOND
    ON COMPLETION PRESERVE
    COMMENT 'dlock: expire leases, clean up after disconnected sessions'
    DO DO dlock_reap();

SET GLOBAL event_scheduler = ON;
