-- SPDX-License-Identifier: PostgreSQL
-- sql/mysql/uninstall.sql
--
-- Removes dlock from a MariaDB server: the functions, the plugin (its lock
-- manager thread), the
-- `dlock` schema with every lock and request in it, the roles dlock_user,
-- dlock_monitor and dlock_admin, and the store account dlock_store.  The library file in
-- plugin_dir is left alone (`make -C mysql_udf uninstall` removes it).
--
--   mariadb -u root < sql/mysql/uninstall.sql

DROP EVENT IF EXISTS dlock.reaper;

DROP FUNCTION IF EXISTS dlock_acquire;
DROP FUNCTION IF EXISTS dlock_try_acquire;
DROP FUNCTION IF EXISTS dlock_acquire_all;
DROP FUNCTION IF EXISTS dlock_convert;
DROP FUNCTION IF EXISTS dlock_release;
DROP FUNCTION IF EXISTS dlock_renew;
DROP FUNCTION IF EXISTS dlock_release_all;
DROP FUNCTION IF EXISTS dlock_semaphore;
DROP FUNCTION IF EXISTS dlock_try_semaphore;
DROP FUNCTION IF EXISTS dlock_semaphore_available;
DROP FUNCTION IF EXISTS dlock_campaign;
DROP FUNCTION IF EXISTS dlock_proclaim;
DROP FUNCTION IF EXISTS dlock_leader;
DROP FUNCTION IF EXISTS dlock_leader_info;
DROP FUNCTION IF EXISTS dlock_check;
DROP FUNCTION IF EXISTS dlock_holder;
DROP FUNCTION IF EXISTS dlock_info;
DROP FUNCTION IF EXISTS dlock_new_owner;
DROP FUNCTION IF EXISTS dlock_reap;
DROP FUNCTION IF EXISTS dlock_sees;
DROP FUNCTION IF EXISTS dlock_locks;
DROP FUNCTION IF EXISTS dlock_grant;
DROP FUNCTION IF EXISTS dlock_revoke;
DROP FUNCTION IF EXISTS dlock_set_quota;
DROP FUNCTION IF EXISTS dlock_reload;
DROP FUNCTION IF EXISTS dlock_stats;
DROP FUNCTION IF EXISTS dlock_stats_reset;
DROP FUNCTION IF EXISTS dlock_force_release;
DROP FUNCTION IF EXISTS dlock_force_release_all;

-- the lock manager stops (its thread ends; waiting calls get an error),
-- unless the caller set @dlock_keep_plugin (a server that loads it at
-- start with plugin-load-add)
SET @dlock_found = (SELECT COUNT(*) FROM information_schema.PLUGINS
                   WHERE PLUGIN_NAME = 'dlock');
EXECUTE IMMEDIATE IF(@dlock_found > 0 AND @dlock_keep_plugin IS NULL,
                    'UNINSTALL SONAME ''dlock_udf''', 'DO 0');

DROP DATABASE IF EXISTS dlock;
DROP ROLE IF EXISTS dlock_user;
DROP ROLE IF EXISTS dlock_monitor;
DROP ROLE IF EXISTS dlock_admin;
DROP USER IF EXISTS 'dlock_store'@'localhost';
