-- SPDX-License-Identifier: PostgreSQL
-- Administration: dlock_force_release and dlock_force_release_all break a
-- stuck lock; the holder's next renew or release fails with DL001 and the
-- reason; a new grant forgets it; dlock_admin only; a reason is required.
SET client_min_messages = warning;
-- an owner key's lease
SELECT dlock_acquire('fr/k', ttl => '60 s', owner => 'fr-key') > 0 AS held;
SELECT dlock_force_release('fr/k', 'fr-key', 'stuck holder, ticket 7') AS released;
SELECT count(*) AS rows_left FROM dlock.locks WHERE name = 'fr/k';
SELECT dlock_renew('fr/k', owner => 'fr-key');
SELECT dlock_release('fr/k', 'fr-key');
SELECT dlock_convert('fr/k', 'shared', owner => 'fr-key');
-- a session's lock, taken twice: every level goes
SELECT dlock_acquire('fr/s') > 0 AS held, dlock_acquire('fr/s') > 0 AS again;
SELECT dlock_force_release('fr/s', reason => 'maintenance') AS released;
SELECT dlock_release('fr/s');
-- a new grant forgets the revocation: a release not held is a warning again
SELECT dlock_acquire('fr/s') > 0 AS held;
SELECT dlock_release('fr/s') AS released;
SELECT dlock_release('fr/s') AS not_held;
-- every holder of a shared lock, or only one owner key's
SELECT dlock_acquire('fr/sh', 'shared', ttl => '60 s', owner => 'fr-a') > 0 AS a,
       dlock_acquire('fr/sh', 'shared', ttl => '60 s', owner => 'fr-b') > 0 AS b,
       dlock_acquire('fr/sh', 'shared') > 0 AS session;
SELECT dlock_force_release('fr/sh', 'fr-a', 'only a') AS released;
SELECT owner FROM dlock.locks WHERE name = 'fr/sh' ORDER BY owner NULLS FIRST;
SELECT dlock_force_release('fr/sh', reason => 'everyone') AS released;
SELECT count(*) AS rows_left FROM dlock.locks WHERE name = 'fr/sh';
-- a path: its intentions go with it
SELECT dlock_acquire('/fr/dir/file', ttl => '60 s', owner => 'fr-p') > 0 AS held;
SELECT dlock_force_release('/fr/dir/file', reason => 'path') AS released;
SELECT count(*) AS rows_left FROM dlock.locks WHERE name LIKE '/fr%';
-- nothing held: 0
SELECT dlock_force_release('fr/none', reason => 'nothing') AS released;
-- everything of an owner key
SELECT dlock_acquire('fr/a1', ttl => '60 s', owner => 'fr-key2') > 0 AS a1,
       dlock_acquire('fr/a2', ttl => '60 s', owner => 'fr-key2') > 0 AS a2;
SELECT dlock_force_release_all('fr-key2', 'rotating keys') AS ended;
SELECT dlock_renew('fr/a2', owner => 'fr-key2');
SELECT count(*) AS rows_left FROM dlock.locks WHERE owner = 'fr-key2';
-- bad input
SELECT dlock_force_release('fr/k', 'fr-key');
SELECT dlock_force_release('fr/k', reason => NULL);
SELECT dlock_force_release_all(NULL, 'why');
SELECT dlock_force_release_all('fr-key2', NULL);
SELECT dlock_force_release('', reason => 'empty');
SELECT dlock_force_release('fr/k', reason => repeat('x', 1025));
-- only dlock_admin
CREATE ROLE fr_app;
GRANT dlock_user TO fr_app;
SET ROLE fr_app;
SELECT dlock_force_release('fr/k', reason => 'not mine');
SELECT dlock_force_release_all('fr-key', 'not mine');
RESET ROLE;
DROP ROLE fr_app;
SELECT count(*) AS rows_left FROM dlock.locks WHERE name LIKE 'fr/%';
-- the SQLSTATEs
CREATE FUNCTION pg_temp.sqlstate_of(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE q;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE;
END
$$;
SELECT dlock_acquire('fr/c', ttl => '60 s', owner => 'fr-c') > 0 AS held;
SELECT dlock_force_release('fr/c', 'fr-c', 'codes') AS released;
SELECT pg_temp.sqlstate_of($$SELECT dlock_renew('fr/c', owner => 'fr-c')$$) AS renew,
       pg_temp.sqlstate_of($$SELECT dlock_release('fr/c', 'fr-c')$$) AS release,
       pg_temp.sqlstate_of($$SELECT dlock_force_release('fr/c', 'fr-c')$$) AS no_reason,
       pg_temp.sqlstate_of($$SELECT dlock_force_release('fr/c', reason => repeat('x', 1025))$$) AS long_reason,
       pg_temp.sqlstate_of($$SELECT dlock_force_release('fr/c', 'bad' || chr(1) || 'key', 'x')$$) AS bad_key;
