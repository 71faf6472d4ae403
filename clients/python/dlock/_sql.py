# SPDX-License-Identifier: PostgreSQL
"""The statements and errors of each database, in one place.

Every statement takes its values as parameters (the drivers' %s
placeholders); nothing of a caller's input is ever put into SQL text.
"""

LOST_SQLSTATE = "DL001"


def common_sql(op, a):
    """The calls written alike on both databases (positional arguments)."""
    if op == "release":
        return "SELECT dlock_release(%s, %s)", (a["name"], a["owner"])
    if op == "release_all":
        return "SELECT dlock_release_all(%s)", (a["owner"],)
    if op == "proclaim":
        return "SELECT dlock_proclaim(%s, %s, %s)", (a["name"], a["value"], a["owner"])
    raise ValueError(op)


class Postgres:
    """dlock's functions in pg_catalog, with named arguments."""

    name = "postgresql"

    def sql(self, op, a):
        iv = "make_interval(secs => %s)"  # strict: NULL seconds give NULL
        if op == "acquire":
            return ("SELECT dlock_acquire(%s, mode => %s, timeout => " + iv +
                    ", ttl => " + iv + ", owner => %s, keep_place => %s)",
                    (a["name"], a["mode"], a["timeout"], a["ttl"], a["owner"], a["keep_place"]))
        if op == "try_acquire":
            return ("SELECT dlock_try_acquire(%s, mode => %s, ttl => " + iv + ", owner => %s)",
                    (a["name"], a["mode"], a["ttl"], a["owner"]))
        if op == "semaphore":
            return ("SELECT dlock_semaphore(%s, %s, %s, timeout => " + iv + ", ttl => " + iv +
                    ", owner => %s, keep_place => %s)",
                    (a["name"], a["capacity"], a["permits"], a["timeout"], a["ttl"], a["owner"],
                     a["keep_place"]))
        if op == "try_semaphore":
            return ("SELECT dlock_try_semaphore(%s, %s, %s, ttl => " + iv + ", owner => %s)",
                    (a["name"], a["capacity"], a["permits"], a["ttl"], a["owner"]))
        if op == "campaign":
            return ("SELECT dlock_campaign(%s, %s, timeout => " + iv + ", ttl => " + iv +
                    ", owner => %s, keep_place => %s)",
                    (a["name"], a["value"], a["timeout"], a["ttl"], a["owner"], a["keep_place"]))
        if op == "renew":
            return ("SELECT dlock_renew(%s, " + iv + ", %s)", (a["name"], a["ttl"], a["owner"]))
        if op == "leader":
            return "SELECT value, token FROM dlock_leader(%s)", (a["name"],)
        return common_sql(op, a)

    def is_lost(self, exc):
        code = getattr(exc, "sqlstate", None) or getattr(exc, "pgcode", None)
        return code == LOST_SQLSTATE

    def is_server_error(self, exc):
        """An error the server answered (the connection is still good)."""
        return bool(getattr(exc, "sqlstate", None) or getattr(exc, "pgcode", None))


class MySQL:
    """dlock's UDFs on MariaDB/MySQL, with positional arguments."""

    name = "mysql"

    def sql(self, op, a):
        if op == "acquire":
            return ("SELECT dlock_acquire(%s, %s, %s, %s, %s, %s)",
                    (a["name"], a["timeout"], a["ttl"], a["mode"], a["owner"], int(a["keep_place"])))
        if op == "try_acquire":
            return ("SELECT dlock_try_acquire(%s, %s, %s, %s)",
                    (a["name"], a["ttl"], a["mode"], a["owner"]))
        if op == "semaphore":
            return ("SELECT dlock_semaphore(%s, %s, %s, %s, %s, %s, %s)",
                    (a["name"], a["capacity"], a["permits"], a["timeout"], a["ttl"], a["owner"],
                     int(a["keep_place"])))
        if op == "try_semaphore":
            return ("SELECT dlock_try_semaphore(%s, %s, %s, %s, %s)",
                    (a["name"], a["capacity"], a["permits"], a["ttl"], a["owner"]))
        if op == "campaign":
            return ("SELECT dlock_campaign(%s, %s, %s, %s, %s, %s)",
                    (a["name"], a["value"], a["timeout"], a["ttl"], a["owner"], int(a["keep_place"])))
        if op == "renew":
            return "SELECT dlock_renew(%s, %s, %s)", (a["name"], a["ttl"], a["owner"])
        if op == "leader":
            return "SELECT dlock_leader(%s), NULL", (a["name"],)
        return common_sql(op, a)

    @staticmethod
    def _errno(exc):
        args = getattr(exc, "args", ())
        return args[0] if args and isinstance(args[0], int) else None

    def is_lost(self, exc):
        args = getattr(exc, "args", ())
        return self._errno(exc) == 1105 and len(args) > 1 and "[" + LOST_SQLSTATE + "]" in str(args[1])

    def is_server_error(self, exc):
        # client-side errors (lost connection, cannot connect) are 2000-2999
        e = self._errno(exc)
        return e is not None and 1000 <= e < 2000


POSTGRES = Postgres()
MYSQL = MySQL()


def dialect_of(conn):
    """The database behind a connection object, from its driver."""
    mod = type(conn).__module__
    if mod.startswith("psycopg"):  # psycopg (3) and psycopg2
        return POSTGRES
    if mod.startswith(("MySQLdb", "pymysql")):
        return MYSQL
    raise TypeError("dlock: unknown connection type %s.%s (psycopg, psycopg2, MySQLdb "
                    "and PyMySQL are known)" % (mod, type(conn).__name__))


def thread_safe(conn):
    """Whether the driver serializes use of one connection from threads."""
    return dialect_of(conn) is POSTGRES


def is_broken(conn):
    """A connection that must not be used again."""
    closed = getattr(conn, "closed", None)
    if closed is not None:
        return bool(closed)  # psycopg: bool, psycopg2: int
    is_open = getattr(conn, "open", None)  # MySQLdb, PyMySQL
    return is_open is not None and not is_open


def idle(conn):
    """Outside a transaction: a call here must be committed by us."""
    if getattr(conn, "autocommit", False) is True:
        return False
    info = getattr(conn, "info", None)
    status = getattr(info, "transaction_status", None)
    if status is not None:  # psycopg 3: TransactionStatus.IDLE == 0
        return int(status) == 0
    get = getattr(conn, "get_transaction_status", None)
    if get is not None:  # psycopg2: TRANSACTION_STATUS_IDLE == 0
        return get() == 0
    return False  # MySQL connections here are the client's own, in autocommit
