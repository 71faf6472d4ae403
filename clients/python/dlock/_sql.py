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
        if op == "notify_key":
            return "SELECT dlock_notify_key(%s)", (a["name"],)
        return common_sql(op, a)

    @staticmethod
    def _code(exc):
        return getattr(exc, "sqlstate", None) or getattr(exc, "pgcode", None)

    def is_lost(self, exc):
        return self._code(exc) == LOST_SQLSTATE

    def diagnose(self, exc):
        """(kind, SQLSTATE, hint) of a driver's error: kind "permission",
        "missing" or None."""
        code, text = self._code(exc), str(exc)
        if code == "42501" and "permission denied for function" in text:
            return ("permission", code,
                    "this role lacks dlock_user: GRANT dlock_user TO <this role> "
                    "(nothing of dlock is granted to PUBLIC)")
        if code == "42883" and "dlock_" in text:
            return ("missing", code,
                    "dlock's functions are not in this database: connect to the database "
                    "named by the server's dlock.database setting (SHOW dlock.database), "
                    "where CREATE EXTENSION dlock was run, or run CREATE EXTENSION dlock "
                    "there if it is missing")
        return None, code, None

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

    def diagnose(self, exc):
        """(kind, errno, hint) of a driver's error, as Postgres.diagnose."""
        errno, text = self._errno(exc), str(exc)
        if errno == 1370 and "dlock_user" in text:
            return ("permission", errno,
                    "this account lacks the role dlock_user: GRANT dlock_user TO "
                    "'app'@'%'; SET DEFAULT ROLE dlock_user FOR 'app'@'%'")
        if errno == 1305 and "dlock_" in text:
            return ("missing", errno,
                    "the dlock plugin is not installed on this server: run "
                    "scripts/mysql_install.sh (docs/mariadb.md, Installing)")
        return None, errno, None

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


_DRIVER_MODULES = ("psycopg", "MySQLdb", "pymysql", "_mysql")


def is_driver_error(exc):
    """An error raised by one of the database drivers (psycopg_pool's too)."""
    return type(exc).__module__.startswith(_DRIVER_MODULES)


def diagnose(exc):
    """(kind, code, hint) of a driver's error, by the driver it came from."""
    mod = type(exc).__module__
    if mod.startswith("psycopg"):
        return POSTGRES.diagnose(exc)
    if mod.startswith(("MySQLdb", "pymysql", "_mysql")):
        return MYSQL.diagnose(exc)
    return None, None, None


def direct_to_server(conn):
    """Whether a PostgreSQL connection reaches the server itself, not a
    pooler: the port it connected to is the server's own `port` setting
    (pgbouncer listens on another).  LISTEN is kept only then."""
    cur = conn.cursor()
    try:
        cur.execute("SELECT current_setting('port')")
        server_port = cur.fetchone()[0]
    finally:
        cur.close()
    return str(conn.info.port) == str(server_port)


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
