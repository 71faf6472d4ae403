# SPDX-License-Identifier: PostgreSQL
"""The MariaDB connection and statement helpers of the Python test scripts
(MySQLdb is imported at first use: a script may install it first)."""


def _flags(found_rows):
    # FOUND_ROWS: an UPDATE answers the rows it matched, not the ones it changed
    from MySQLdb.constants import CLIENT
    return CLIENT.FOUND_ROWS if found_rows else 0


def connect(sock, timeout=10, found_rows=False):
    """root over the server's unix socket, autocommit."""
    import MySQLdb
    c = MySQLdb.connect(unix_socket=sock, user="root", connect_timeout=timeout,
                        client_flag=_flags(found_rows))
    c.autocommit(True)
    return c


def connect_tcp(ns, host, port, timeout=10, found_rows=False):
    """dlock_test (scripts/mysql_ha.sh --netns) over TCP from network namespace
    ns (None: this thread's): the connection stays in that namespace."""
    import contextlib
    import MySQLdb
    from netnslib import netns
    with netns(ns) if ns else contextlib.nullcontext():
        c = MySQLdb.connect(host=host, port=port, user="dlock_test", passwd="dlock_test",
                            connect_timeout=timeout, client_flag=_flags(found_rows))
    c.autocommit(True)
    return c


def q(c, sql, args=None):
    """Run one statement; its rows as a list, or None if it returns none."""
    cur = c.cursor()
    try:
        cur.execute(sql, args)
        return list(cur.fetchall()) if cur.description else None
    finally:
        cur.close()
