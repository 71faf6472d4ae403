-- SPDX-License-Identifier: PostgreSQL
-- The six DLM modes: all 36 pairs of the compatibility matrix, each asserted
-- by letting one owner key hold a mode and another try the second mode.

CREATE FUNCTION pg_temp.compatible(held text, requested text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    got bigint;
BEGIN
    PERFORM dlock_acquire('modes/matrix', held, owner => 'holder', ttl => '1 min');
    got := dlock_try_acquire('modes/matrix', requested, owner => 'requester', ttl => '1 min');
    PERFORM dlock_release_all('holder');
    PERFORM dlock_release_all('requester');
    RETURN CASE WHEN got IS NULL THEN 'n' ELSE 'y' END;
END
$$;

-- rows: held; columns: requested.  Expected (standard DLM matrix):
--      NL CR CW PR PW EX
--  NL   y  y  y  y  y  y
--  CR   y  y  y  y  y  n
--  CW   y  y  y  n  n  n
--  PR   y  y  n  y  n  n
--  PW   y  y  n  n  n  n
--  EX   y  n  n  n  n  n
SELECT m AS held,
       pg_temp.compatible(m, 'NL') AS "NL", pg_temp.compatible(m, 'CR') AS "CR",
       pg_temp.compatible(m, 'CW') AS "CW", pg_temp.compatible(m, 'PR') AS "PR",
       pg_temp.compatible(m, 'PW') AS "PW", pg_temp.compatible(m, 'EX') AS "EX"
  FROM unnest(ARRAY['NL', 'CR', 'CW', 'PR', 'PW', 'EX']) WITH ORDINALITY AS t(m, i)
 ORDER BY i;

-- names are case-insensitive; shared = PR and exclusive = EX
SELECT dlock_acquire('modes/alias', 'pr', owner => 'a', ttl => '1 min') > 0 AS pr;
SELECT dlock_try_acquire('modes/alias', 'Shared', owner => 'b', ttl => '1 min') > 0 AS shared_with_pr;
SELECT dlock_try_acquire('modes/alias', 'exclusive', owner => 'c', ttl => '1 min') IS NULL AS exclusive_refused;
SELECT owner, mode FROM dlock.locks WHERE name = 'modes/alias' ORDER BY owner;
SELECT dlock_release_all('a') + dlock_release_all('b') AS released;

-- re-entrant acquire in a mode the held one covers
SELECT dlock_acquire('modes/cover', 'PW') > 0 AS pw;
SELECT dlock_acquire('modes/cover', 'CR') > 0 AS cr_covered;
SELECT dlock_acquire('modes/cover', 'PR') > 0 AS pr_covered;
SELECT mode, count FROM dlock.locks WHERE name = 'modes/cover';
SELECT dlock_acquire('modes/cover', 'EX');
SELECT dlock_release_all();
SELECT dlock_acquire('modes/cw', 'CW') > 0 AS cw;
SELECT dlock_acquire('modes/cw', 'PR');
SELECT dlock_release_all();
