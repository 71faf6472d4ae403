-- SPDX-License-Identifier: PostgreSQL
-- A grant is given back when the (sub)transaction of the call that took it
-- rolls back, whatever rolls it back; once it commits, the lock is held
-- until released.  Releases are not undone.

-- ROLLBACK gives back; COMMIT keeps
BEGIN;
SELECT dlock_acquire('tx/rollback') > 0 AS granted;
SELECT count(*) AS held_inside FROM dlock.locks WHERE name = 'tx/rollback';
ROLLBACK;
SELECT count(*) AS held_after_rollback FROM dlock.locks WHERE name = 'tx/rollback';
BEGIN;
SELECT dlock_acquire('tx/commit') > 0 AS granted;
COMMIT;
SELECT count(*) AS held_after_commit FROM dlock.locks WHERE name = 'tx/commit';
SELECT dlock_release('tx/commit') AS released;

-- ROLLBACK TO SAVEPOINT gives back what was taken after the savepoint
BEGIN;
SELECT dlock_acquire('tx/before') > 0 AS before_savepoint;
SAVEPOINT s;
SELECT dlock_acquire('tx/after') > 0 AS after_savepoint;
SELECT dlock_acquire('tx/before') > 0 AS again_after_savepoint;
ROLLBACK TO SAVEPOINT s;
SELECT name, count FROM dlock.locks WHERE name LIKE 'tx/%' ORDER BY name;
SAVEPOINT t;
SELECT dlock_acquire('tx/released-savepoint') > 0 AS in_released_savepoint;
RELEASE SAVEPOINT t;
COMMIT;
SELECT name, count FROM dlock.locks WHERE name LIKE 'tx/%' ORDER BY name;
SELECT dlock_release_all() AS released;

-- a re-entrant take gives back its level only
SELECT dlock_acquire('tx/re') > 0 AS first;
BEGIN;
SELECT dlock_acquire('tx/re') > 0 AS second;
ROLLBACK;
SELECT count FROM dlock.locks WHERE name = 'tx/re';
SELECT dlock_release('tx/re') AS released;

-- an EXCEPTION block that catches a later error gives back what it took
DO $$
BEGIN
    BEGIN
        PERFORM dlock_acquire('tx/block');
        PERFORM 1 / 0;
    EXCEPTION WHEN division_by_zero THEN
        RAISE NOTICE 'caught';
    END;
    PERFORM dlock_acquire('tx/outside-block');
END
$$;
SELECT name FROM dlock.locks WHERE name LIKE 'tx/%' ORDER BY name;
SELECT dlock_release('tx/outside-block') AS released;

-- a statement that fails after the grant: the client never saw the token
SELECT dlock_acquire('tx/stmt'), 1 / 0;
SELECT count(*) AS held_after_failed_statement FROM dlock.locks WHERE name = 'tx/stmt';

-- a failed multi-row INSERT whose trigger took locks
CREATE TABLE public.tx_rows (n integer);
CREATE FUNCTION public.tx_take() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM dlock_acquire('tx/row/' || NEW.n);
    PERFORM 1 / NEW.n;
    RETURN NEW;
END
$$;
CREATE TRIGGER tx_take BEFORE INSERT ON public.tx_rows
    FOR EACH ROW EXECUTE FUNCTION public.tx_take();
INSERT INTO public.tx_rows VALUES (1), (2), (0);
SELECT count(*) AS held_after_failed_insert FROM dlock.locks WHERE name LIKE 'tx/row/%';
INSERT INTO public.tx_rows VALUES (3);
SELECT name FROM dlock.locks WHERE name LIKE 'tx/row/%';
SELECT dlock_release('tx/row/3') AS released;
DROP TABLE public.tx_rows;
DROP FUNCTION public.tx_take();

-- an owner key's grant too; a release in a rolled-back transaction stays
BEGIN;
SELECT dlock_acquire('tx/key', ttl => '1 min', owner => 'tx-key') > 0 AS granted;
ROLLBACK;
SELECT count(*) AS key_held_after_rollback FROM dlock.locks WHERE name = 'tx/key';
SELECT dlock_acquire('tx/rel') > 0 AS granted;
BEGIN;
SELECT dlock_release('tx/rel') AS released;
ROLLBACK;
SELECT count(*) AS held_after_rolled_back_release FROM dlock.locks WHERE name = 'tx/rel';
SELECT count(*) AS left_behind FROM dlock.locks WHERE name LIKE 'tx/%';
