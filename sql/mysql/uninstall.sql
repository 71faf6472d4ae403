-- sql/mysql/uninstall.sql
--
-- Removes dlock from a MariaDB server: the reaper event, the UDFs and the
-- `dlock` schema with every lock and request in it.  The library file in
-- plugin_dir is left alone (`make -C mysql_udf uninstall` removes it).
--
--   mariadb -u root < sql/mysql/uninstall.sql

DROP EVENT IF EXISTS dlock.reaper;

DROP FUNCTION IF EXISTS dlock_acquire;
DROP FUNCTION IF EXISTS dlock_try_acquire;
DROP FUNCTION IF EXISTS dlock_release;
DROP FUNCTION IF EXISTS dlock_renew;
DROP FUNCTION IF EXISTS dlock_release_all;
DROP FUNCTION IF EXISTS dlock_holder;
DROP FUNCTION IF EXISTS dlock_info;
DROP FUNCTION IF EXISTS dlock_new_owner;
DROP FUNCTION IF EXISTS dlock_reap;

DROP DATABASE IF EXISTS dlock;
