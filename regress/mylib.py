"""The MariaDB connection and statement helpers of the Python test scripts
(MySQLdb is imported at first use: a script may install it first)."""


def connect(sock, timeout=10):
    """root over the server's unix socket, autocommit."""
    import MySQLdb
    c = MySQLdb.connect(unix_socket=sock, user="root", connect_timeout=timeout)
    c.autocommit(True)
    return c


def connect_tcp(ns, host, port, timeout=10):
    """dlock_test (scripts/mysql_ha.sh --netns) over TCP from network namespace
    ns: the connection stays in that namespace."""
    import MySQLdb
    from netnslib import netns
    with netns(ns):
        c = MySQLdb.connect(host=host, port=port, user="dlock_test", passwd="dlock_test",
                            connect_timeout=timeout)
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
