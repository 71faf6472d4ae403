-- SPDX-License-Identifier: PostgreSQL
-- Rights: nothing is granted to PUBLIC; dlock_user locks, dlock_monitor
-- reads the view, dlock_admin does both and sees owner keys.  Each attack is
-- replayed as an ordinary role and must fail with 42501.

-- what a statement does when run as the current role: "ok" or its SQLSTATE
CREATE SCHEMA dlock_sec;
GRANT USAGE ON SCHEMA dlock_sec TO PUBLIC;
CREATE FUNCTION dlock_sec.outcome(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE q;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END $$;

-- nothing of dlock is granted to PUBLIC: functions, schema, tables, view
SELECT 'function ' || p.oid::regprocedure AS public_right
  FROM pg_proc p, aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
 WHERE (p.proname LIKE 'dlock%' OR p.pronamespace = 'dlock'::regnamespace)
   AND a.grantee = 0
UNION ALL
SELECT 'relation ' || c.oid::regclass
  FROM pg_class c, aclexplode(coalesce(c.relacl, acldefault('r', c.relowner))) a
 WHERE c.relnamespace = 'dlock'::regnamespace AND a.grantee = 0
UNION ALL
SELECT 'schema dlock'
  FROM pg_namespace n, aclexplode(coalesce(n.nspacl, acldefault('n', n.nspowner))) a
 WHERE n.nspname = 'dlock' AND a.grantee = 0;

-- the roles exist, cannot log in, and dlock_admin holds the other two
SELECT rolname, rolcanlogin, pg_has_role('dlock_admin', oid, 'MEMBER') AS in_admin
  FROM pg_roles WHERE rolname IN ('dlock_user', 'dlock_monitor', 'dlock_admin')
 ORDER BY rolname;

-- the worker's transactions run as dlock_worker: no login, no superuser,
-- no member of anything, rights on the lock manager's three tables only
SELECT rolcanlogin, rolsuper, rolcreaterole, rolbypassrls,
       (SELECT count(*) FROM pg_auth_members m WHERE m.member = r.oid) AS memberships
  FROM pg_roles r WHERE rolname = 'dlock_worker';
SELECT c.relname, string_agg(a.privilege_type, ',' ORDER BY a.privilege_type) AS rights
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace,
       aclexplode(c.relacl) a
 WHERE n.nspname = 'dlock' AND a.grantee = 'dlock_worker'::regrole
 GROUP BY c.relname ORDER BY c.relname;

CREATE ROLE dlock_sec_nobody;
CREATE ROLE dlock_sec_app IN ROLE dlock_user;
CREATE ROLE dlock_sec_watch IN ROLE dlock_monitor;
CREATE ROLE dlock_sec_stats IN ROLE dlock_user, pg_read_all_stats;
CREATE ROLE dlock_sec_admin IN ROLE dlock_admin;

-- a role with no dlock role: every function and the view refused
SET ROLE dlock_sec_nobody;
SELECT q, dlock_sec.outcome(q) FROM unnest(ARRAY[
    $$SELECT dlock_acquire('/app', 'EX', ttl => '1000 years', owner => 'squat')$$,
    $$SELECT dlock_acquire_all(ARRAY['sec/a'])$$,
    $$SELECT dlock_try_acquire('sec/a')$$,
    $$SELECT dlock_convert('sec/a', 'shared')$$,
    $$SELECT dlock_release('sec/a')$$,
    $$SELECT dlock_renew('sec/a', owner => 'k')$$,
    $$SELECT dlock_release_all('k')$$,
    $$SELECT dlock_new_owner()$$,
    $$SELECT dlock_manager_pid()$$,
    $$SELECT dlock_check('sec/a', 1)$$,
    $$SELECT count(*) FROM dlock_holder('sec/a')$$,
    $$SELECT count(*) FROM dlock.locks$$,
    $$SELECT count(*) FROM dlock.held$$,
    $$SELECT dlock.shown_owner('k')$$]) q;
RESET ROLE;
SELECT count(*) AS squatted FROM dlock.locks WHERE name = '/app';
-- the sender of genuine dlock_blocking notifications
SELECT dlock_manager_pid() = (SELECT pid FROM pg_stat_activity
                               WHERE backend_type = 'dlock lock manager') AS manager_pid;

-- dlock_monitor reads the view but takes nothing
SET ROLE dlock_sec_watch;
SELECT q, dlock_sec.outcome(q) FROM unnest(ARRAY[
    $$SELECT count(*) FROM dlock.locks$$,
    $$SELECT dlock_manager_pid()$$,
    $$SELECT dlock_acquire('sec/a')$$,
    $$SELECT count(*) FROM dlock.queue$$]) q;
RESET ROLE;

-- dlock_user: everything a lock user does works as before
SET ROLE dlock_sec_app;
SELECT dlock_new_owner() AS key \gset
SELECT dlock_acquire('sec/a') > 0 AS acquired,
       dlock_try_acquire('sec/b', 'shared') > 0 AS tried,
       dlock_convert('sec/b', 'exclusive') > 0 AS converted,
       array_length(dlock_acquire_all(ARRAY['sec/c', 'sec/d']), 1) AS all_of_them,
       dlock_acquire('sec/leased', ttl => '1 min', owner => :'key') > 0 AS leased,
       dlock_renew('sec/leased', '2 min', owner => :'key') > now() AS renewed;
-- a lease longer than dlock.max_ttl (one day by default) is refused, and
-- only a superuser may raise the limit; a long default_ttl is cut to it
SELECT dlock_sec.outcome($$SELECT dlock_acquire('sec/squat', ttl => '1000 years', owner => 'squat')$$) AS long_lease;
SELECT dlock_sec.outcome($$SET dlock.max_ttl = 0$$) AS raise_limit;
SET dlock.default_ttl = '20d';
SELECT dlock_acquire('sec/defaulted', owner => 'squat') > 0 AS defaulted;
SELECT expires_at <= now() + interval '1 day 1 min' AS cut_to_max_ttl
  FROM dlock.locks WHERE name = 'sec/defaulted';
RESET dlock.default_ttl;
SELECT dlock_release_all('squat');
SELECT name, mode, owner = :'key' AS own_key_shown, keyed, role
  FROM dlock.locks WHERE name LIKE 'sec/%' ORDER BY name;
SELECT dlock_release('sec/a') AS released, dlock_release_all() AS rest,
       dlock_release_all(:'key') AS leases;
RESET ROLE;

-- owner keys belong to the role that took them: another role that knows
-- the key can neither release, renew, convert nor take more with it, and
-- does not see the lock; dlock_admin may use any key
CREATE ROLE dlock_sec_evil IN ROLE dlock_user;
SET ROLE dlock_sec_app;
SELECT dlock_acquire('sec/job', ttl => '1 min', owner => 'job7') > 0 AS app_took;
SELECT owner, keyed, role FROM dlock.locks WHERE name = 'sec/job';
SET ROLE dlock_sec_evil;
SELECT count(*) AS evil_sees FROM dlock.locks WHERE name = 'sec/job';
SELECT q, dlock_sec.outcome(q) FROM unnest(ARRAY[
    $$SELECT dlock_release('sec/job', owner => 'job7')$$,
    $$SELECT dlock_renew('sec/job', '1 hour', owner => 'job7')$$,
    $$SELECT dlock_convert('sec/job', 'shared', owner => 'job7')$$,
    $$SELECT dlock_acquire('sec/job', ttl => '1 min', owner => 'job7')$$,
    $$SELECT dlock_try_acquire('sec/other', owner => 'job7')$$,
    $$SELECT dlock_acquire_all(ARRAY['sec/x', 'sec/y'], owner => 'job7')$$,
    $$SELECT dlock_release_all('job7')$$]) q;
SET ROLE dlock_sec_watch;
SELECT owner IS NULL AS monitor_sees_no_key, keyed, role FROM dlock.locks WHERE name = 'sec/job';
SET ROLE dlock_sec_app;
SELECT count, expires_at < now() + interval '2 min' AS lease_untouched
  FROM dlock.locks WHERE name = 'sec/job';
SET ROLE dlock_sec_admin;
SELECT dlock_renew('sec/job', '2 min', owner => 'job7') > now() AS admin_renewed,
       dlock_release('sec/job', owner => 'job7') AS admin_released;
-- a key that holds and waits for nothing belongs to nobody: the next role
-- to take a lock with it owns it
SET ROLE dlock_sec_evil;
SELECT dlock_try_acquire('sec/job', ttl => '1 min', owner => 'job7') > 0 AS free_key_taken;
SET ROLE dlock_sec_app;
SELECT dlock_sec.outcome($$SELECT dlock_release('sec/job', owner => 'job7')$$) AS app_now_refused;
SET ROLE dlock_sec_evil;
SELECT dlock_release_all('job7') AS evil_released;
RESET ROLE;

-- owner keys: shown only to their role and dlock_admin, not to members of
-- pg_read_all_stats, who do not even see other roles' locks
SELECT dlock_acquire('sec/secret', owner => 'the-key-of-app', ttl => '1 min') > 0 AS held;
SET ROLE dlock_sec_stats;
SELECT count(*) AS stats_sees FROM dlock.locks WHERE name = 'sec/secret';
SET ROLE dlock_sec_admin;
SELECT owner AS admin_sees_key FROM dlock.locks WHERE name = 'sec/secret';
SELECT dlock_release('sec/secret', owner => 'the-key-of-app') AS admin_may_lock;
RESET ROLE;

-- a role's rights end when its dlock role is revoked
REVOKE dlock_user FROM dlock_sec_app;
SET ROLE dlock_sec_app;
SELECT dlock_sec.outcome($$SELECT dlock_acquire('sec/a')$$) AS after_revoke;
RESET ROLE;

-- Namespaces: once a grant binds a role, it may lock only under its grants
CREATE ROLE dlock_sec_a IN ROLE dlock_user;
CREATE ROLE dlock_sec_other IN ROLE dlock_user;
CREATE ROLE dlock_sec_team;
SELECT dlock_grant('/tenant-a', 'dlock_sec_a') AS granted,
       dlock_grant('/tenant-a', 'dlock_sec_a') AS granted_again,
       dlock_grant('a-jobs/', 'dlock_sec_a') AS flat_granted;
SELECT role, prefix FROM dlock.grants ORDER BY role::text, prefix;

-- a path prefix covers that path and below, segment by segment; a flat
-- prefix covers the flat names starting with it; nothing else
SET ROLE dlock_sec_a;
SELECT q, dlock_sec.outcome(q) FROM unnest(ARRAY[
    $$SELECT dlock_try_acquire('/tenant-a')$$,
    $$SELECT dlock_acquire('/tenant-a/x/y', 'shared')$$,
    $$SELECT dlock_try_acquire('a-jobs/1', ttl => '1 min', owner => 'a-key')$$,
    $$SELECT dlock_try_acquire('/tenant-ab')$$,
    $$SELECT dlock_try_acquire('/tenant-b/x')$$,
    $$SELECT dlock_acquire('/app', 'EX', ttl => '1000 years', owner => 'squat')$$,
    $$SELECT dlock_try_acquire('a-jobs')$$,
    $$SELECT dlock_try_acquire('tenant-a')$$,
    $$SELECT dlock_acquire_all(ARRAY['/tenant-a/1', '/app'])$$,
    $$SELECT dlock_convert('/app', 'shared')$$,
    $$SELECT dlock_convert('/tenant-a', 'shared')$$]) q;
-- the intentions /tenant-a/x/y implies on / and /tenant-a were allowed, and
-- the refused acquire_all left nothing behind
SELECT name, mode, implied FROM dlock.locks
 WHERE name IN ('/', '/tenant-a', '/tenant-a/x', '/tenant-a/x/y', '/tenant-a/1', '/app', 'a-jobs/1')
 ORDER BY name, implied;
SELECT dlock_release_all() AS released, dlock_release_all('a-key') AS released_key;
RESET ROLE;

-- a role sees the locks under its grants, whoever holds them, and its own;
-- a role no grant binds sees only its own
SELECT dlock_acquire('/tenant-a/by-admin') > 0 AS inside, dlock_acquire('/elsewhere') > 0 AS outside;
SET ROLE dlock_sec_a;
SELECT name, role FROM dlock.locks
 WHERE NOT implied AND name IN ('/tenant-a/by-admin', '/elsewhere');
-- dlock_holder shows what the view shows; dlock_check outside the grants is refused
SELECT count(*) AS holders_inside FROM dlock_holder('/tenant-a/by-admin');
SELECT count(*) AS holders_outside FROM dlock_holder('/elsewhere');
SELECT dlock_sec.outcome($$SELECT dlock_check('/elsewhere', 1)$$) AS check_outside;
SET ROLE dlock_sec_other;
SELECT count(*) AS unbound_sees FROM dlock.locks WHERE name IN ('/tenant-a/by-admin', '/elsewhere');
SELECT count(*) AS unbound_holders FROM dlock_holder('/elsewhere');
RESET ROLE;
SELECT dlock_release('/tenant-a/by-admin'), dlock_release('/elsewhere');

-- a role no grant binds may lock any name; a superuser is never bound
SET ROLE dlock_sec_other;
SELECT dlock_sec.outcome($$SELECT dlock_try_acquire('/app')$$) AS unbound;
SELECT dlock_release_all();
RESET ROLE;
SELECT dlock_sec.outcome($$SELECT dlock_try_acquire('/app')$$) AS superuser;
SELECT dlock_release_all();

-- a group's grant binds its members, from the GRANT of membership on
SELECT dlock_grant('/team', 'dlock_sec_team');
GRANT dlock_sec_team TO dlock_sec_other;
SET ROLE dlock_sec_other;
SELECT dlock_sec.outcome($$SELECT dlock_try_acquire('/team/x')$$) AS team_name,
       dlock_sec.outcome($$SELECT dlock_try_acquire('/app')$$) AS outside;
SELECT dlock_release_all();
RESET ROLE;
REVOKE dlock_sec_team FROM dlock_sec_other;
SET ROLE dlock_sec_other;
SELECT dlock_sec.outcome($$SELECT dlock_try_acquire('/app')$$) AS after_membership_revoked;
SELECT dlock_release_all();
RESET ROLE;

-- a grant rolled back binds nobody; a row written directly binds at once
BEGIN;
SELECT dlock_grant('/only', 'dlock_sec_other');
ROLLBACK;
SET ROLE dlock_sec_other;
SELECT dlock_sec.outcome($$SELECT dlock_try_acquire('/app')$$) AS after_rollback;
SELECT dlock_release_all();
RESET ROLE;
INSERT INTO dlock.grants (role, prefix) VALUES ('dlock_sec_other', '/only');
SET ROLE dlock_sec_other;
SELECT dlock_sec.outcome($$SELECT dlock_try_acquire('/app')$$) AS after_insert;
RESET ROLE;
DELETE FROM dlock.grants WHERE role = 'dlock_sec_other'::regrole;

-- only dlock_admin grants; nobody else writes dlock.grants; dlock_monitor
-- reads it
SET ROLE dlock_sec_a;
SELECT q, dlock_sec.outcome(q) FROM unnest(ARRAY[
    $$SELECT dlock_grant('/app', 'dlock_sec_a')$$,
    $$SELECT dlock_revoke('/tenant-a', 'dlock_sec_a')$$,
    $$INSERT INTO dlock.grants (role, prefix) VALUES ('dlock_sec_a', '/')$$,
    $$SELECT count(*) FROM dlock.grants$$]) q;
SET ROLE dlock_sec_watch;
SELECT count(*) AS monitor_reads FROM dlock.grants;
SET ROLE dlock_sec_admin;
SELECT q, dlock_sec.outcome(q) FROM unnest(ARRAY[
    $$SELECT dlock_grant('', 'dlock_sec_a')$$,
    $$SELECT dlock_grant('/a/', 'dlock_sec_a')$$,
    $$SELECT dlock_grant('//a', 'dlock_sec_a')$$,
    $$SELECT dlock_grant(NULL, 'dlock_sec_a')$$,
    $$SELECT dlock_grant('/x', NULL)$$,
    $$SELECT dlock_grant('/x', 'no_such_role')$$]) q;
-- "/" covers every path and no flat name
SELECT dlock_grant('/', 'dlock_sec_other');
SET ROLE dlock_sec_other;
SELECT dlock_sec.outcome($$SELECT dlock_try_acquire('/any/path')$$) AS any_path,
       dlock_sec.outcome($$SELECT dlock_try_acquire('flat')$$) AS flat;
SELECT dlock_release_all();
SET ROLE dlock_sec_admin;
SELECT dlock_revoke('/', 'dlock_sec_other');
-- revoking the last grant unbinds the role
SELECT dlock_revoke('/tenant-a', 'dlock_sec_a') AS revoked,
       dlock_revoke('/tenant-a', 'dlock_sec_a') AS revoked_again,
       dlock_revoke('a-jobs/', 'dlock_sec_a') AS flat_revoked;
RESET ROLE;
SET ROLE dlock_sec_a;
SELECT dlock_sec.outcome($$SELECT dlock_try_acquire('/app')$$) AS unbound_again;
SELECT dlock_release_all();
RESET ROLE;
SELECT dlock_revoke('/team', 'dlock_sec_team');
SELECT count(*) AS grants_left FROM dlock.grants;

-- Quotas: named locks a role holds or waits for in all, and per owner
CREATE ROLE dlock_sec_q IN ROLE dlock_user;
SELECT dlock_set_quota('dlock_sec_q', 3, 2);
SELECT role, max_locks, max_locks_per_owner FROM dlock.quotas;
SET ROLE dlock_sec_q;
SELECT dlock_try_acquire('q/1', ttl => '1 min', owner => 'qk1') > 0 AS first,
       dlock_try_acquire('q/2', ttl => '1 min', owner => 'qk1') > 0 AS second;
SELECT q, dlock_sec.outcome(q) FROM unnest(ARRAY[
    $$SELECT dlock_try_acquire('q/3', ttl => '1 min', owner => 'qk1')$$,
    $$SELECT dlock_acquire('q/1', ttl => '1 min', owner => 'qk1')$$,
    $$SELECT dlock_try_acquire('q/3', ttl => '1 min', owner => 'qk2')$$,
    $$SELECT dlock_acquire('q/4')$$,
    $$SELECT dlock_acquire_all(ARRAY['q/5', 'q/6'])$$,
    $$SELECT dlock_set_quota('dlock_sec_q', 1000)$$]) q;
-- a lease flood stops at the quota, and a release frees a place
SELECT count(*) FILTER (WHERE dlock_sec.outcome(pg_catalog.format(
           'SELECT dlock_try_acquire(%L, ttl => %L, owner => %L)', 'flood/' || i, '1 min', 'f' || i)) = 'ok')
       AS flood_granted
  FROM generate_series(1, 100) i;
SELECT dlock_release_all('qk2') AS released;
SELECT dlock_sec.outcome($$SELECT dlock_try_acquire('q/4')$$) AS after_release;
SELECT dlock_release_all();
RESET ROLE;
SELECT dlock_sec.outcome(q) FROM unnest(ARRAY[
    $$SELECT dlock_set_quota('dlock_sec_q', 0)$$,
    $$SELECT dlock_set_quota('dlock_sec_q', 5, -1)$$,
    $$SELECT dlock_set_quota(NULL, 5)$$]) q;
-- no quota, no limit
SELECT dlock_set_quota('dlock_sec_q', NULL, NULL);
SELECT count(*) AS quotas_left FROM dlock.quotas;
SET ROLE dlock_sec_q;
SELECT count(*) FILTER (WHERE dlock_sec.outcome(pg_catalog.format(
           'SELECT dlock_try_acquire(%L, ttl => %L, owner => %L)', 'flood/' || i, '1 min', 'f' || i)) = 'ok')
       AS flood_granted
  FROM generate_series(1, 100) i;
SELECT sum(dlock_release_all('f' || i)) AS flood_released FROM generate_series(1, 100) i;
SELECT dlock_release_all('qk1');
RESET ROLE;
-- a quota of bytes: a lock counts its name's length and its owner key's
SELECT dlock_set_quota('dlock_sec_q', NULL, NULL, 20);
SET ROLE dlock_sec_q;
SELECT dlock_sec.outcome($$SELECT dlock_acquire('q/0123456789')$$) AS twelve_bytes,
       dlock_sec.outcome($$SELECT dlock_acquire('q/abcdefghij')$$) AS twelve_more,
       dlock_sec.outcome($$SELECT dlock_try_acquire('q/x', ttl => '1 min', owner => 'k1')$$) AS five,
       dlock_sec.outcome($$SELECT dlock_try_acquire('q/y', ttl => '1 min', owner => 'k1')$$) AS five_more;
SELECT dlock_release_all() AS released, dlock_release_all('k1') AS released_key;
RESET ROLE;
SELECT dlock_set_quota('dlock_sec_q', NULL, NULL, NULL, NULL);

-- A session's locks count under, and are shown with, the role in effect
-- for each call: a SECURITY DEFINER function takes its locks as its owner
-- (before, the session's first request fixed its role for every later one:
-- ta's own locks consumed tb's quota and showed to tb, ta's quota was
-- bypassed, and a superuser's helper called first lifted every quota)
CREATE ROLE dlock_sec_ta IN ROLE dlock_user;
CREATE ROLE dlock_sec_tb IN ROLE dlock_user;
SELECT dlock_grant('a/', 'dlock_sec_ta') AND dlock_grant('/b', 'dlock_sec_tb') AS granted;
SELECT dlock_set_quota('dlock_sec_ta', 3), dlock_set_quota('dlock_sec_tb', 2);
GRANT CREATE ON SCHEMA dlock_sec TO dlock_sec_tb;
SET ROLE dlock_sec_tb;
CREATE FUNCTION dlock_sec.tb_take(n text) RETURNS bigint LANGUAGE sql SECURITY DEFINER
    SET search_path = pg_catalog AS $$SELECT dlock_acquire('/b/' || n)$$;
RESET ROLE;
CREATE FUNCTION dlock_sec.su_peek() RETURNS bigint LANGUAGE sql SECURITY DEFINER
    SET search_path = pg_catalog AS $$SELECT dlock_acquire('su/peek')$$;
SELECT dlock_release_all() >= 0 AS fresh_start;
SET ROLE dlock_sec_ta;
SELECT dlock_sec.su_peek() > 0 AS superuser_helper_first,
       dlock_sec.tb_take('x') > 0 AS through_tb;
SELECT dlock_acquire('a/1') > 0 AS a1, dlock_acquire('a/2') > 0 AS a2,
       dlock_acquire('a/secret-merger-plan') > 0 AS a3;
SELECT dlock_sec.outcome($$SELECT dlock_acquire('a/4')$$) AS ta_over_quota;
SELECT name, role FROM dlock.locks WHERE NOT implied ORDER BY name;
SET ROLE dlock_sec_tb;
SELECT name, role FROM dlock.locks WHERE NOT implied ORDER BY name;
SELECT dlock_sec.tb_take('y') > 0 AS tb_second, dlock_sec.outcome($$SELECT dlock_sec.tb_take('z')$$) AS tb_third;
SELECT count(*) AS holders_of_ta_name FROM dlock_holder('a/1');
RESET ROLE;
-- the session releases its locks whichever role it has now
SET ROLE dlock_sec_ta;
SELECT dlock_release('/b/x') AS released_tb_lock, dlock_release_all() AS released_rest;
RESET ROLE;
SELECT count(*) AS left_behind FROM dlock.locks WHERE name IN ('su/peek', '/b/x', '/b/y', 'a/1', 'a/2', 'a/secret-merger-plan');
SELECT dlock_revoke('a/', 'dlock_sec_ta') AND dlock_revoke('/b', 'dlock_sec_tb') AS revoked;
SELECT dlock_set_quota('dlock_sec_ta', NULL, NULL, NULL, NULL), dlock_set_quota('dlock_sec_tb', NULL, NULL, NULL, NULL);
DROP FUNCTION dlock_sec.tb_take(text), dlock_sec.su_peek();
REVOKE CREATE ON SCHEMA dlock_sec FROM dlock_sec_tb;
DROP ROLE dlock_sec_ta, dlock_sec_tb;

-- The capability roles are no tenant: a bound tenant that becomes
-- dlock_user (every member may SET ROLE to it) escaped its namespace and
-- its quota; now every call made as dlock_user, dlock_monitor or
-- dlock_admin itself is refused
CREATE ROLE dlock_sec_m IN ROLE dlock_user;
SELECT dlock_grant('m-', 'dlock_sec_m') AS granted;
SELECT dlock_set_quota('dlock_sec_m', 10, 5);
SET ROLE dlock_sec_m;
SELECT dlock_sec.outcome($$SELECT dlock_acquire('b-victim', timeout => '1 s')$$) AS own_role;
SET ROLE dlock_user;
SELECT q, dlock_sec.outcome(q) FROM unnest(ARRAY[
    $$SELECT dlock_acquire('b-victim', ttl => '1 h', owner => 'k1')$$,
    $$SELECT dlock_acquire('m-1', ttl => '1 h', owner => 'k1')$$,
    $$SELECT dlock_try_acquire('b-v1')$$,
    $$SELECT dlock_release_all('k1')$$,
    $$SELECT dlock_notify_key('b-victim')$$]) q;
RESET ROLE;
SET ROLE dlock_sec_admin;
SET ROLE dlock_admin;
SELECT dlock_sec.outcome($$SELECT dlock_try_acquire('b-victim')$$) AS as_admin;
RESET ROLE;
SELECT count(*) AS taken_as_capability FROM dlock.locks WHERE name LIKE 'b-v%';

-- dlock.locks is a security_barrier view: a caller's function or cast runs
-- only on the rows it may see.  Before, a NOTICE-raising function saw every
-- name and leader value, and a cast's error showed another role's name.
CREATE FUNCTION dlock_sec.leak(t text) RETURNS boolean LANGUAGE plpgsql COST 0.0000001
    AS $$BEGIN RAISE NOTICE 'leak: %', t; RETURN true; END$$;
SET ROLE dlock_sec_a;
SELECT dlock_campaign('a-jobs/elect', '10.0.0.5:secret-token', owner => 'a-lead', ttl => '1 min') > 0 AS a_leads;
SELECT dlock_acquire('/tenant-a/secret-job') > 0 AS a_holds;
RESET ROLE;
SET ROLE dlock_sec_m;
SELECT dlock_try_acquire('m-own') > 0 AS m_holds;
SELECT count(*) AS seen FROM dlock.locks WHERE dlock_sec.leak(name);
SELECT count(*) AS seen FROM dlock.locks WHERE dlock_sec.leak(value);
SELECT count(*) AS seen FROM dlock.locks WHERE dlock_sec.leak(name || keyed::text || coalesce(value, ''));
SELECT count(*) AS seen FROM dlock.locks WHERE name::int = 0 AND name <> 'm-own';
SELECT count(*) AS seen
  FROM (SELECT name, row_number() OVER (ORDER BY token) AS n FROM dlock.locks) s
 WHERE dlock_sec.leak(name);
SELECT dlock_sec.outcome($$SELECT dlock_notify_key('/tenant-a/secret-job')$$) AS key_outside_grants,
       length(dlock_notify_key('m-own')) AS own_key_length;
SELECT dlock_release('m-own') AS released;
RESET ROLE;
SET ROLE dlock_sec_a;
SELECT dlock_release_all() AS released, dlock_release_all('a-lead') AS resigned;
RESET ROLE;
SELECT dlock_revoke('m-', 'dlock_sec_m') AS revoked;
SELECT dlock_set_quota('dlock_sec_m', NULL, NULL, NULL, NULL);

-- owner keys refuse every control character: C0, DEL and C1 (U+0085 was
-- accepted)
SELECT q, dlock_sec.outcome(q) FROM unnest(ARRAY[
    $$SELECT dlock_try_acquire('sec/c1', owner => E'k\u0085', ttl => '1 min')$$,
    $$SELECT dlock_try_acquire('sec/c1', owner => E'k\u0080', ttl => '1 min')$$,
    $$SELECT dlock_try_acquire('sec/c1', owner => E'k\u009f', ttl => '1 min')$$,
    $$SELECT dlock_try_acquire('sec/c1', owner => E'k\u007f', ttl => '1 min')$$,
    $$SELECT dlock_try_acquire('sec/c1', owner => E'k\u00a0', ttl => '1 min') > 0$$]) q;
SELECT dlock_release_all(E'k\u00a0') AS released;

DROP ROLE dlock_sec_nobody, dlock_sec_app, dlock_sec_watch, dlock_sec_stats, dlock_sec_admin, dlock_sec_m,
          dlock_sec_a, dlock_sec_other, dlock_sec_team, dlock_sec_evil, dlock_sec_q;
DROP SCHEMA dlock_sec CASCADE;
SELECT count(*) AS left_behind FROM dlock.locks WHERE name LIKE 'sec/%';
