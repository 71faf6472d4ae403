/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * dlock_store.c
 *		The lock manager thread's lock store: the dlock tables, written
 *		through one loopback libmariadb connection to the server the plugin
 *		runs in, by the manager thread only.
 *
 * A batch is a few set-based statements in one transaction: the changed
 * holder rows and waiter rows each go as multi-row INSERT ... ON DUPLICATE
 * KEY UPDATE statements and DELETE ... WHERE key IN (...), in chunks of 64,
 * 32, ... 1 rows (one prepared statement per chunk size, kept).  Every
 * value is a bound parameter: no user value is ever part of a statement's
 * text.  (JSON_TABLE would need one statement per kind, but cost three
 * times as much per statement.)
 *
 * The store account ('dlock_store'@'localhost', scripts/mysql_install.sh)
 * has only SELECT, INSERT, UPDATE and DELETE on dlock and PROCESS; its
 * password is in the credentials file, which must be the server user's
 * alone.
 */
#define _GNU_SOURCE
#include "dlock_store.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <mysql.h>
#include <errmsg.h>

#include "dlock_access.h"
#include "dlock_semisync.h"
#include "dlock_sessions.h"

#ifndef DLOCK_CNF
#define DLOCK_CNF "/etc/mysql/dlock.cnf"
#endif

enum
{
	Q_COUNTER_SAVE,
	Q_COUNTER_LOAD,
	Q_HELD_LOAD,
	Q_KEPT_LOAD,
	Q_QUEUE_CLEAN,
	Q_KEPT_CLEAN,
	Q_ALIVE,
	Q_GRANTS_LOAD,
	Q_QUOTAS_LOAD,
	Q_GRANT_ADD,
	Q_GRANT_DEL,
	Q_QUOTA_SET,
	Q_QUOTA_DEL,
	Q_INSTALLED,
	Q_PROBE_HELD,
	Q_PROBE_QUEUE,
	Q_CAPACITY,
	Q_SESSION_SWAP,
	Q_LIVE_SWAP,
	Q_KEYED_SWAP,
	Q_ROLE,
	Q_COUNTER_BUMP,
	Q_LOCKS_ALL,
	Q_LOCKS_OF,
	NQ
};

#define HELD_COLS \
	"token, name, owner, conn_id, session_start, mode, `count`, granted_us, " \
	"expires_us, ttl_us, implied, account, kept, capacity, permits, value"
/*
 * The rows of the view dlock.locks, before anyone's visibility: holders,
 * then waiting parts with their 1-based place in the queue of their name
 * (conversions first, then by ticket; counted over every waiting part).
 */
#define LOCKS_READ \
	"SELECT name, owner, account, value, mode, capacity, 1 AS granted, " \
	"NULL AS position, conn_id, token, `count`, granted_us AS since_us, " \
	"expires_us, NULL AS timeout_us, 0 AS conversion, implied, permits " \
	"FROM dlock.held " \
	"UNION ALL " \
	"SELECT name, owner, account, value, mode, capacity, 0, " \
	"ROW_NUMBER() OVER (PARTITION BY name ORDER BY conversion DESC, ticket), " \
	"IF(kept_until_us IS NULL, conn_id, NULL), ticket, NULL, since_us, kept_until_us, " \
	"timeout_us, conversion, implied, permits FROM dlock.queue"
#define LOCKS_TYPES "ssssiiiiiiiiiiiii"
#define QUEUE_COLS \
	"ticket, name, owner, conn_id, session_start, mode, since_us, timeout_us, " \
	"ttl_us, conversion, implied, account, keep, kept_until_us, request, " \
	"capacity, permits, value"

static const char *const Q[NQ] = {
	[Q_COUNTER_SAVE] =
	"INSERT INTO dlock.counter (id, hi) VALUES (1, ?) "
	"ON DUPLICATE KEY UPDATE hi = GREATEST(hi, VALUES(hi))",
	[Q_COUNTER_LOAD] =
	"SELECT hi FROM dlock.counter WHERE id = 1",
	[Q_HELD_LOAD] =
	"SELECT " HELD_COLS " FROM dlock.held_keyed UNION ALL "
	"SELECT " HELD_COLS " FROM dlock.held_session ORDER BY token",
	[Q_KEPT_LOAD] =
	"SELECT " QUEUE_COLS " FROM dlock.queue_kept WHERE keep ORDER BY request, ticket",
	[Q_QUEUE_CLEAN] =
	"DELETE FROM dlock.queue_live",
	[Q_KEPT_CLEAN] =
	"DELETE FROM dlock.queue_kept WHERE NOT keep",
	[Q_ALIVE] =
	"SELECT ID FROM information_schema.PROCESSLIST",
	[Q_GRANTS_LOAD] =
	"SELECT grantee, prefix FROM dlock.grants",
	[Q_QUOTAS_LOAD] =
	"SELECT grantee, IFNULL(max_locks, -1), IFNULL(max_locks_per_owner, -1), "
	"IFNULL(max_bytes, -1), IFNULL(max_bytes_per_owner, -1) FROM dlock.quotas",
	[Q_GRANT_ADD] =
	"INSERT IGNORE INTO dlock.grants (grantee, prefix) VALUES (?, ?)",
	[Q_GRANT_DEL] =
	"DELETE FROM dlock.grants WHERE grantee = ? AND prefix = ?",
	[Q_QUOTA_SET] =
	"REPLACE INTO dlock.quotas (grantee, max_locks, max_locks_per_owner, "
	"max_bytes, max_bytes_per_owner) VALUES (?, NULLIF(?, -1), NULLIF(?, -1), "
	"NULLIF(?, -1), NULLIF(?, -1))",
	[Q_QUOTA_DEL] =
	"DELETE FROM dlock.quotas WHERE grantee = ?",
	[Q_INSTALLED] =
	"SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'dlock' "
	"AND ((TABLE_NAME IN ('held_keyed', 'held_session') AND COLUMN_NAME = 'session_start') "
	"OR (TABLE_NAME IN ('queue_kept', 'queue_live') AND COLUMN_NAME = 'kept_until_us') "
	"OR (TABLE_NAME = 'counter' AND COLUMN_NAME = 'hi'))",
	[Q_CAPACITY] =
	"SELECT IFNULL(MIN(MAX_DATA_LENGTH DIV GREATEST(AVG_ROW_LENGTH, 1)), 0) "
	"FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'dlock' "
	"AND TABLE_NAME IN ('held_session', 'queue_live')",
	[Q_SESSION_SWAP] =
	"UPDATE dlock.held_session SET token = ?, name = ?, owner = ?, conn_id = ?, "
	"session_start = ?, mode = ?, `count` = ?, granted_us = ?, expires_us = ?, "
	"ttl_us = ?, implied = ?, account = ?, kept = ?, capacity = ?, permits = ?, "
	"value = ? WHERE token = ?",
	[Q_KEYED_SWAP] =
	"UPDATE dlock.held_keyed SET token = ?, name = ?, owner = ?, conn_id = ?, "
	"session_start = ?, mode = ?, `count` = ?, granted_us = ?, expires_us = ?, "
	"ttl_us = ?, implied = ?, account = ?, kept = ?, capacity = ?, permits = ?, "
	"value = ? WHERE token = ?",
	[Q_LIVE_SWAP] =
	"UPDATE dlock.queue_live SET ticket = ?, name = ?, owner = ?, conn_id = ?, "
	"session_start = ?, mode = ?, since_us = ?, timeout_us = ?, ttl_us = ?, "
	"conversion = ?, implied = ?, account = ?, keep = ?, kept_until_us = ?, "
	"request = ?, capacity = ?, permits = ?, value = ? WHERE ticket = ?",
	[Q_PROBE_HELD] =
	"SELECT `count`, IFNULL(expires_us, 0), kept, mode FROM dlock.held_keyed WHERE token = ?",
	[Q_PROBE_QUEUE] =
	"SELECT IFNULL(kept_until_us, 0), keep FROM dlock.queue_kept WHERE ticket = ?",
	/*
	 * Whether this server may serve (store_role): read-only (a replica, or
	 * a demoted primary), a Galera node, or a replica's threads running.
	 * From information_schema rather than @@wsrep_on, which a server built
	 * without Galera does not know; any read_only value but OFF counts.
	 */
	[Q_ROLE] =
	"SELECT IFNULL(MAX(VARIABLE_NAME = 'READ_ONLY' AND VARIABLE_VALUE <> 'OFF'), 0), "
	"IFNULL(MAX(VARIABLE_NAME = 'WSREP_ON' AND VARIABLE_VALUE <> 'OFF'), 0), "
	"(SELECT COUNT(*) FROM information_schema.PROCESSLIST "
	"WHERE COMMAND IN ('Slave_IO', 'Slave_SQL', 'Slave_worker')) "
	"FROM information_schema.GLOBAL_VARIABLES "
	"WHERE VARIABLE_NAME IN ('READ_ONLY', 'WSREP_ON')",
	/* a change the semi-synchronous replica must acknowledge (store_sync) */
	[Q_COUNTER_BUMP] =
	"UPDATE dlock.counter SET hi = hi + 1 WHERE id = 1",
	[Q_LOCKS_ALL] = LOCKS_READ,
	[Q_LOCKS_OF] = "SELECT * FROM (" LOCKS_READ ") l WHERE account = ?",
};

static MYSQL *conn;
static MYSQL_STMT *stmts[NQ];
static unsigned long long conn_id;
static bool patient;			/* conn waits for answers without a read timeout */
static char self_socket[512];
static unsigned int self_port;


void
store_set_server(const char *socket, unsigned int port)
{
	snprintf(self_socket, sizeof(self_socket), "%s", socket ? socket : "");
	self_port = port;
}

/* ------------------------------------------------------------------------
 * The connection
 * ------------------------------------------------------------------------ */
static const char *
cnf_path(void)
{
	const char *p = getenv("DLOCK_CNF");

	return (p && p[0]) ? p : DLOCK_CNF;
}

/*
 * The credentials file holds the store account's password: it must exist,
 * belong to the server's user and be readable by nobody else.
 */
static int
check_cnf(const char *path, DlockErr *err)
{
	struct stat st;

	if (stat(path, &st) != 0)
	{
		dlock_set_err(err, DLOCK_ER_UNKNOWN,
				"no lock store account: %s: %s (scripts/mysql_install.sh "
				"creates it)", path, strerror(errno));
		return -1;
	}
	if (st.st_uid != geteuid() || (st.st_mode & 077) != 0)
	{
		dlock_set_err(err, DLOCK_ER_UNKNOWN,
				"%s holds a password: it must belong to the server's user "
				"(uid %u) with mode 0600 or 0400 (it is uid %u, mode %04o)",
				path, (unsigned) geteuid(), (unsigned) st.st_uid,
				(unsigned) (st.st_mode & 07777));
		return -1;
	}
	return 0;
}

static void rows_close(void);

void
store_close(void)
{
	rows_close();
	for (int i = 0; i < NQ; i++)
		if (stmts[i])
		{
			mysql_stmt_close(stmts[i]);
			stmts[i] = NULL;
		}
	if (conn)
		mysql_close(conn);
	conn = NULL;
	conn_id = 0;
}

unsigned long long
store_conn_id(void)
{
	return conn_id;
}

int
store_open(DlockErr *err)
{
	static const char *const setup[] = {
		"SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
		"SET SESSION autocommit = 1, innodb_lock_wait_timeout = 1, "
		"lock_wait_timeout = 2, time_zone = '+00:00', max_statement_time = 0, "
		/* the MEMORY tables' size limit, when this connection opens them first */
		"max_heap_table_size = 1073741824, "
		"sql_mode = 'STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION'",
	};
	const char *cnf = cnf_path();
	unsigned int timeout = 5;
	/*
	 * A statement that hangs is given up after 30 s - except on a
	 * semi-synchronous primary, where a statement waits for the replica's
	 * acknowledgement as long as the replica is away, and giving it up
	 * would only write the batch again behind the first, still pending.
	 */
	bool		semisync = semisync_enabled();
	unsigned int rw_timeout = semisync ? 0 : 30;

	store_close();
	if (check_cnf(cnf, err) != 0)
		return -2;
	conn = mysql_init(NULL);
	if (conn == NULL)
	{
		dlock_set_err(err, DLOCK_ER_UNKNOWN, "out of memory");
		return -1;
	}
	/* this very server over its socket; the [dlock] group may say otherwise */
	if (self_socket[0])
		mysql_optionsv(conn, MARIADB_OPT_UNIXSOCKET, self_socket);
	if (self_port)
		mysql_optionsv(conn, MARIADB_OPT_PORT, &self_port);
	mysql_optionsv(conn, MYSQL_OPT_CONNECT_TIMEOUT, &timeout);
	mysql_optionsv(conn, MYSQL_OPT_READ_TIMEOUT, &rw_timeout);
	mysql_optionsv(conn, MYSQL_OPT_WRITE_TIMEOUT, &rw_timeout);
	mysql_optionsv(conn, MYSQL_SET_CHARSET_NAME, "utf8mb4");
	mysql_optionsv(conn, MYSQL_READ_DEFAULT_FILE, cnf);
	mysql_optionsv(conn, MYSQL_READ_DEFAULT_GROUP, "dlock");
	if (mysql_real_connect(conn, NULL, NULL, NULL, "dlock", 0, NULL, 0) == NULL)
	{
		/* libmariadb's message names host/socket and user, never secrets */
		dlock_set_err(err, DLOCK_ER_UNKNOWN, "cannot connect to the lock store: %s",
				mysql_error(conn));
		store_close();
		return -1;
	}
	for (size_t i = 0; i < sizeof(setup) / sizeof(setup[0]); i++)
		if (mysql_real_query(conn, setup[i], strlen(setup[i])) != 0)
		{
			dlock_set_err(err, DLOCK_ER_UNKNOWN,
					"cannot set up the lock store connection: %s", mysql_error(conn));
			store_close();
			return -1;
		}
	conn_id = mysql_thread_id(conn);
	patient = semisync;
	return 0;
}

bool
store_patient(void)
{
	return patient;
}

/* ------------------------------------------------------------------------
 * Statements
 * ------------------------------------------------------------------------ */
static MYSQL_STMT *
stmt(int q, DlockErr *err)
{
	if (stmts[q])
		return stmts[q];
	stmts[q] = mysql_stmt_init(conn);
	if (stmts[q] == NULL)
	{
		dlock_set_err(err, DLOCK_ER_UNKNOWN, "lock store: %s", mysql_error(conn));
		return NULL;
	}
	if (mysql_stmt_prepare(stmts[q], Q[q], strlen(Q[q])) != 0)
	{
		dlock_set_err(err, DLOCK_ER_UNKNOWN, "lock store: %s", mysql_stmt_error(stmts[q]));
		mysql_stmt_close(stmts[q]);
		stmts[q] = NULL;
		return NULL;
	}
	return stmts[q];
}

static unsigned int last_errno;	/* of the last statement that failed */

static int
stmt_fail(MYSQL_STMT *st, DlockErr *err)
{
	last_errno = mysql_stmt_errno(st);
	dlock_set_err(err, DLOCK_ER_UNKNOWN, "lock store: %s", mysql_stmt_error(st));
	mysql_stmt_reset(st);
	return -1;
}

/* Parameters: strings (bytes) and integers. */
typedef struct Param
{
	bool		is_int;
	bool		is_null;
	long long	i;
	const char *s;
	unsigned long len;
} Param;

/* Bind and execute; b has room for np. */
static int
execute_bound(MYSQL_STMT *st, Param *p, int np, MYSQL_BIND *b,
			  unsigned long long *affected, DlockErr *err)
{
	memset(b, 0, sizeof(MYSQL_BIND) * (size_t) np);
	for (int i = 0; i < np; i++)
	{
		if (p[i].is_null)
			b[i].buffer_type = MYSQL_TYPE_NULL;
		else if (p[i].is_int)
		{
			b[i].buffer_type = MYSQL_TYPE_LONGLONG;
			b[i].buffer = &p[i].i;
		}
		else
		{
			b[i].buffer_type = MYSQL_TYPE_BLOB;
			b[i].buffer = (void *) (p[i].s ? p[i].s : "");
			b[i].buffer_length = p[i].len;
			b[i].length = &p[i].len;
		}
	}
	if ((np > 0 && mysql_stmt_bind_param(st, b) != 0) || mysql_stmt_execute(st) != 0)
		return stmt_fail(st, err);
	if (affected)
		*affected = (unsigned long long) mysql_stmt_affected_rows(st);
	return 0;
}

static int
run(int q, Param *p, int np, unsigned long long *affected, DlockErr *err)
{
	MYSQL_STMT *st = stmt(q, err);
	MYSQL_BIND	b[8];

	if (st == NULL)
		return -1;
	return execute_bound(st, p, np, b, affected, err);
}

/* Result columns of the loading queries. */
#define MAXCOL 18
#define STRCAP 2050
typedef struct Cols
{
	MYSQL_BIND	b[MAXCOL];
	long long	i[MAXCOL];
	char		s[MAXCOL][STRCAP];
	unsigned long len[MAXCOL];
	my_bool		null[MAXCOL];
} Cols;

/* Run a query whose columns are 'types' ('i' integer, 's' bytes). */
static MYSQL_STMT *
query(int q, Param *p, int np, Cols *c, const char *types, DlockErr *err)
{
	MYSQL_STMT *st;

	if (run(q, p, np, NULL, err) != 0)
		return NULL;
	st = stmts[q];
	memset(c->b, 0, sizeof(c->b));
	for (int k = 0; types[k]; k++)
	{
		c->b[k].is_null = &c->null[k];
		c->b[k].length = &c->len[k];
		if (types[k] == 'i')
		{
			c->b[k].buffer_type = MYSQL_TYPE_LONGLONG;
			c->b[k].buffer = &c->i[k];
		}
		else
		{
			c->b[k].buffer_type = MYSQL_TYPE_BLOB;
			c->b[k].buffer = c->s[k];
			c->b[k].buffer_length = STRCAP - 1;
		}
	}
	if (mysql_stmt_bind_result(st, c->b) != 0 || mysql_stmt_store_result(st) != 0)
	{
		stmt_fail(st, err);
		return NULL;
	}
	return st;
}

/* Next row: 1, 0 at the end, -1 on error.  Strings are NUL-terminated. */
static int
fetch(MYSQL_STMT *st, Cols *c, const char *types, DlockErr *err)
{
	int			f = mysql_stmt_fetch(st);

	if (f == MYSQL_NO_DATA)
	{
		mysql_stmt_free_result(st);
		return 0;
	}
	if (f != 0)
	{
		if (f == MYSQL_DATA_TRUNCATED)
			dlock_set_err(err, DLOCK_ER_UNKNOWN, "lock store: a value is longer than %d bytes", STRCAP - 1);
		else
			dlock_set_err(err, DLOCK_ER_UNKNOWN, "lock store: %s", mysql_stmt_error(st));
		mysql_stmt_free_result(st);
		mysql_stmt_reset(st);
		return -1;
	}
	for (int k = 0; types[k]; k++)
		if (types[k] == 's')
			c->s[k][c->null[k] ? 0 : c->len[k]] = '\0';
	return 1;
}

/*
 * Tickets whose rows are in dlock.queue_kept: a kept place resumed by a
 * call without keep_place moves to dlock.queue_live, so where a waiter's
 * row is cannot be told from the waiter alone.  Open addressing; 0 empty,
 * -1 deleted (tickets are positive).
 */
static long long *kept_set;
static size_t kept_cap, kept_used;

static size_t
kept_slot(long long t)
{
	return (size_t) ((unsigned long long) t * 0x9E3779B97F4A7C15ULL >> 17) & (kept_cap - 1);
}

static bool
kept_has(long long t)
{
	if (kept_cap == 0)
		return false;
	for (size_t i = kept_slot(t);; i = (i + 1) & (kept_cap - 1))
	{
		if (kept_set[i] == t)
			return true;
		if (kept_set[i] == 0)
			return false;
	}
}

static void
kept_del(long long t)
{
	if (kept_cap == 0)
		return;
	for (size_t i = kept_slot(t);; i = (i + 1) & (kept_cap - 1))
	{
		if (kept_set[i] == t)
		{
			kept_set[i] = -1;
			return;
		}
		if (kept_set[i] == 0)
			return;
	}
}

static bool
kept_add(long long t)
{
	if (kept_has(t))
		return true;
	if ((kept_used + 1) * 2 > kept_cap)
	{
		size_t		ncap = kept_cap ? kept_cap * 2 : 64;
		long long  *old = kept_set;
		size_t		ocap = kept_cap;

		kept_set = calloc(ncap, sizeof(long long));
		if (kept_set == NULL)
		{
			kept_set = old;
			return false;
		}
		kept_cap = ncap;
		kept_used = 0;
		for (size_t i = 0; i < ocap; i++)
			if (old[i] > 0)
			{
				size_t		j = kept_slot(old[i]);

				while (kept_set[j] != 0)
					j = (j + 1) & (kept_cap - 1);
				kept_set[j] = old[i];
				kept_used++;
			}
		free(old);
	}
	{
		size_t		i = kept_slot(t);

		while (kept_set[i] > 0)
			i = (i + 1) & (kept_cap - 1);
		if (kept_set[i] == 0)
			kept_used++;
		kept_set[i] = t;
	}
	return true;
}

static void
kept_clear(void)
{
	if (kept_set)
		memset(kept_set, 0, kept_cap * sizeof(long long));
	kept_used = 0;
}

/* ------------------------------------------------------------------------
 * Installed, loading
 * ------------------------------------------------------------------------ */
int
store_installed(int *installed, DlockErr *err)
{
	Cols		c;
	MYSQL_STMT *st = query(Q_INSTALLED, NULL, 0, &c, "i", err);
	int			f;

	if (st == NULL)
		return -1;
	*installed = 0;
	while ((f = fetch(st, &c, "i", err)) == 1)
		*installed = c.i[0] == 5;
	return f;
}

/*
 * Whether this server may be the lock service.  A Galera node may not: every
 * node would run its own lock manager over the same replicated tables, and
 * two of them can grant one lock (README, Galera).  A read-only server or
 * one whose replication threads run may not either: it is a replica (or a
 * demoted primary) whose dlock tables the primary writes, and a grant of
 * its own would diverge from the primary's.  Asked before the tables are
 * touched: on a replica, the first open of a MEMORY table after a restart
 * writes a TRUNCATE of it into the replica's own binary log.
 */
int
store_role(DlockErr *err)
{
	Cols		c;
	MYSQL_STMT *st = query(Q_ROLE, NULL, 0, &c, "iii", err);
	long long	read_only = 0,
				wsrep = 0,
				replicating = 0;
	int			f;

	if (st == NULL)
		return -1;
	while ((f = fetch(st, &c, "iii", err)) == 1)
	{
		read_only = c.i[0];
		wsrep = c.i[1];
		replicating = c.i[2];
	}
	if (f < 0)
		return -1;
	/* a read-only transaction: end it, so the next look sees a change */
	if (mysql_commit(conn) != 0)
	{
		dlock_set_err(err, DLOCK_ER_UNKNOWN, "lock store: %s", mysql_error(conn));
		return -1;
	}
	if (wsrep)
	{
		dlock_set_err(err, DLOCK_ER_UNKNOWN,
				"dlock does not run on a Galera cluster (wsrep_on = ON): every "
				"node would run its own lock manager and two nodes could grant "
				"one lock; run dlock on one server, or on a primary with a "
				"semi-synchronous replica (README: High availability)");
		return 1;
	}
	if (read_only || replicating)
	{
		dlock_set_err(err, DLOCK_ER_READ_ONLY,
				"this server is a replica (%s): dlock serves on the primary "
				"only; connect there, or promote this server (STOP SLAVE, "
				"RESET SLAVE ALL, SET GLOBAL read_only = OFF) and it takes over",
				read_only ? "read_only = ON" : "its replication threads run");
		return 1;
	}
	return 0;
}

/*
 * One change the semi-synchronous replica must acknowledge before the
 * statement returns (the ticket counter moves up by one: a ticket number
 * is skipped, never reused).  0, or -1 with err.
 */
int
store_sync(DlockErr *err)
{
	if (conn == NULL)
	{
		dlock_set_err(err, DLOCK_ER_UNKNOWN, "lock store: not connected");
		return -1;
	}
	return run(Q_COUNTER_BUMP, NULL, 0, NULL, err);
}

unsigned int
store_last_errno(void)
{
	return last_errno;
}

static int
load_counter(DLockManager *m, DlockErr *err)
{
	Cols		c;
	MYSQL_STMT *st = query(Q_COUNTER_LOAD, NULL, 0, &c, "i", err);
	int64_t		hi = 1;
	int			f;

	if (st == NULL)
		return -1;
	while ((f = fetch(st, &c, "i", err)) == 1)
		hi = c.null[0] ? 1 : c.i[0];
	if (f < 0)
		return -1;
	dlm_set_counter(m, hi);
	return 0;
}

/* Session rows the load refused, deleted by the next batch's phase 1. */
static long long stray[64];
static int	nstray;

static bool
stray_add(long long token)
{
	if (nstray == (int) (sizeof(stray) / sizeof(stray[0])))
		return false;
	stray[nstray++] = token;
	return true;
}

static int
load_held(DLockManager *m, DlockErr *err)
{
	static Cols c;				/* the manager thread's only */
	const char *types = "issiiiiiiiisiiis";
	MYSQL_STMT *st = query(Q_HELD_LOAD, NULL, 0, &c, types, err);
	int			f;

	if (st == NULL)
		return -1;
	while ((f = fetch(st, &c, types, err)) == 1)
	{
		DLmHolderRow r;
		DLmError	e;

		memset(&r, 0, sizeof(r));
		r.token = c.i[0];
		r.name = c.s[1];
		r.owner_key = c.null[2] ? NULL : c.s[2];
		r.pid = session_pid((unsigned long long) c.i[3]);
		r.backend_start = c.i[4];
		r.mode = (int) c.i[5];
		r.count = (int32_t) c.i[6];
		r.granted_at = c.i[7];
		r.expires_at = c.null[8] ? 0 : c.i[8];
		r.ttl_us = c.null[9] ? 0 : c.i[9];
		r.implied = c.i[10] != 0;
		r.role = accounts_intern(c.s[11], c.len[11]);
		r.kept = (int32_t) c.i[12];
		r.capacity = c.null[13] ? 0 : (int32_t) c.i[13];
		r.permits = c.null[14] ? 0 : (int32_t) c.i[14];
		r.value = c.null[15] ? NULL : c.s[15];
		e = dlm_load_holder(m, &r);
		if (e != DLM_OK && e != DLM_ERR_NO_MEMORY && r.owner_key == NULL &&
			stray_add(r.token))
		{
			/*
			 * A session's row the picture cannot take (a second row of the
			 * same holder): it dies with the server anyway, so it goes,
			 * rather than a manager that refuses every call until then.
			 */
			fprintf(stderr, "dlock: lock manager drops the row of token %lld from "
					"dlock.held_session: %s\n", (long long) r.token,
					dlm_error_message(e));
			continue;
		}
		if (e != DLM_OK)
		{
			dlock_set_err(err, DLOCK_ER_UNKNOWN,
					"cannot load the row of token %lld from dlock.held: %s",
					(long long) r.token, dlm_error_message(e));
			mysql_stmt_free_result(st);
			return -1;
		}
	}
	return f;
}

/* Kept places, one request (all its parts) at a time. */
static int
load_kept(DLockManager *m, DLockTime now, DlockErr *err)
{
	static Cols c;
	const char *types = "issiiiiiiiisiiiiis";
	MYSQL_STMT *st = query(Q_KEPT_LOAD, NULL, 0, &c, types, err);
	DLmWaiterRow *rows = NULL;
	char	   *strs = NULL;
	int			n = 0;
	long long	request = -1;
	int			f;
	int			rc = 0;

	if (st == NULL)
		return -1;
	kept_clear();
	rows = calloc(DLOCK_MAX_MULTI * (DLOCK_MAX_PATH_DEPTH + 1), sizeof(DLmWaiterRow));
	strs = malloc((size_t) DLOCK_MAX_MULTI * (DLOCK_MAX_PATH_DEPTH + 1) * 3 * STRCAP);
	if (rows == NULL || strs == NULL)
	{
		dlock_set_err(err, DLOCK_ER_UNKNOWN, "out of memory");
		mysql_stmt_free_result(st);
		free(rows);
		free(strs);
		return -1;
	}
	for (;;)
	{
		f = fetch(st, &c, types, err);
		if (f < 0)
		{
			rc = -1;
			break;
		}
		if (n > 0 && (f == 0 || c.i[14] != request ||
					  n == DLOCK_MAX_MULTI * (DLOCK_MAX_PATH_DEPTH + 1)))
		{
			DLmError	e = dlm_load_kept(m, rows, n);

			if (e != DLM_OK)
			{
				dlock_set_err(err, DLOCK_ER_UNKNOWN,
						"cannot load the kept place of request %lld from dlock.queue: %s",
						request, dlm_error_message(e));
				if (f == 1)
					mysql_stmt_free_result(st);
				rc = -1;
				break;
			}
			n = 0;
		}
		if (f == 0)
			break;
		{
			DLmWaiterRow *r = &rows[n];
			char	   *sp = strs + (size_t) n * 3 * STRCAP;

			memset(r, 0, sizeof(*r));
			memcpy(sp, c.s[1], c.len[1] + 1);
			r->name = sp;
			memcpy(sp + STRCAP, c.s[2], c.null[2] ? 1 : c.len[2] + 1);
			r->owner_key = sp + STRCAP;
			r->pid = session_pid((unsigned long long) c.i[3]);
			r->backend_start = c.i[4];
			r->mode = (int) c.i[5];
			r->since = c.i[6];
			r->ttl_us = c.null[8] ? 0 : c.i[8];
			r->implied = c.i[10] != 0;
			r->role = accounts_intern(c.s[11], c.len[11]);
			/* a place whose call was waiting: kept a lease from now */
			r->kept_until = c.null[13] ? now + r->ttl_us : c.i[13];
			r->ticket = c.i[0];
			r->capacity = c.null[15] ? 0 : (int32_t) c.i[15];
			r->permits = c.null[16] ? 0 : (int32_t) c.i[16];
			if (!c.null[17])
			{
				memcpy(sp + 2 * STRCAP, c.s[17], c.len[17] + 1);
				r->value = sp + 2 * STRCAP;
			}
			request = c.i[14];
			if (!kept_add(r->ticket))
			{
				dlock_set_err(err, DLOCK_ER_UNKNOWN, "out of memory");
				mysql_stmt_free_result(st);
				rc = -1;
				break;
			}
			n++;
		}
	}
	free(rows);
	free(strs);
	return rc;
}

/* The connection ids alive now, appended to *alive (malloc'ed, unsorted). */
int
store_alive(unsigned long long **alive, size_t *nalive, DlockErr *err)
{
	Cols		c;
	MYSQL_STMT *st = query(Q_ALIVE, NULL, 0, &c, "i", err);
	size_t		cap = *nalive;
	int			f;

	if (st == NULL)
		return -1;
	while ((f = fetch(st, &c, "i", err)) == 1)
	{
		if (*nalive == cap)
		{
			size_t		ncap = cap ? cap * 2 : 256;
			unsigned long long *a = realloc(*alive, ncap * sizeof(*a));

			if (a == NULL)
			{
				dlock_set_err(err, DLOCK_ER_UNKNOWN, "out of memory");
				mysql_stmt_free_result(st);
				return -1;
			}
			*alive = a;
			cap = ncap;
		}
		(*alive)[(*nalive)++] = (unsigned long long) c.i[0];
	}
	return f;
}

/* Rows the MEMORY tables can take (their size limit), or 0 if unknown. */
static long long
memory_capacity(DlockErr *err)
{
	Cols		c;
	MYSQL_STMT *st = query(Q_CAPACITY, NULL, 0, &c, "i", err);
	long long	rows = 0;

	if (st == NULL)
		return 0;
	while (fetch(st, &c, "i", err) == 1)
		rows = c.null[0] ? 0 : c.i[0];
	return rows;
}

int
store_load(StoreLoad *load, DlockErr *err)
{
	load->capacity = memory_capacity(err);
	nstray = 0;
	if (load_counter(load->m, err) != 0 ||
		load_held(load->m, err) != 0 ||
		load_kept(load->m, load->now, err) != 0 ||
		run(Q_QUEUE_CLEAN, NULL, 0, NULL, err) != 0 ||
		run(Q_KEPT_CLEAN, NULL, 0, NULL, err) != 0 ||
		store_alive(&load->alive, &load->nalive, err) != 0)
		return -1;
	return 0;
}

int
store_load_grants(StoreGrantFn grant_fn, StoreQuotaFn quota_fn, DlockErr *err)
{
	static Cols c;
	MYSQL_STMT *st = query(Q_GRANTS_LOAD, NULL, 0, &c, "ss", err);
	int			f;

	if (st == NULL)
		return -1;
	while ((f = fetch(st, &c, "ss", err)) == 1)
		grant_fn(c.s[0], c.len[0], c.s[1], c.len[1]);
	if (f < 0)
		return -1;
	st = query(Q_QUOTAS_LOAD, NULL, 0, &c, "siiii", err);
	if (st == NULL)
		return -1;
	while ((f = fetch(st, &c, "siiii", err)) == 1)
	{
		long long	limits[4] = {c.i[1], c.i[2], c.i[3], c.i[4]};

		quota_fn(c.s[0], c.len[0], limits);
	}
	if (f < 0)
		return -1;
	/* a read-only transaction: end it, so the next reads see new rows */
	if (mysql_commit(conn) != 0)
	{
		dlock_set_err(err, DLOCK_ER_UNKNOWN, "lock store: %s", mysql_error(conn));
		return -1;
	}
	return 0;
}

/*
 * The rows of dlock.locks, every account's or one account's, to fn - read
 * on the store connection (the manager thread's), so that what the view
 * shows comes from the plugin, never from a query of the caller's.
 */
int
store_read_locks(const char *account, size_t alen, StoreLockRowFn fn, void *arg,
				 DlockErr *err)
{
	static Cols c;
	Param		p = {.s = account, .len = (unsigned long) alen};
	MYSQL_STMT *st;
	int			f;

	if (conn == NULL && store_open(err) != 0)
		return -1;
	st = account ? query(Q_LOCKS_OF, &p, 1, &c, LOCKS_TYPES, err) :
		query(Q_LOCKS_ALL, NULL, 0, &c, LOCKS_TYPES, err);
	if (st == NULL)
	{
		store_close();			/* the next batch opens a new one */
		return -1;
	}
	while ((f = fetch(st, &c, LOCKS_TYPES, err)) == 1)
	{
		StoreLockRow r;

		memset(&r, 0, sizeof(r));
		r.name = c.s[0];
		r.name_len = c.len[0];
		r.owner = c.null[1] ? NULL : c.s[1];
		r.owner_len = c.null[1] ? 0 : c.len[1];
		r.account = c.s[2];
		r.account_len = c.len[2];
		r.value = c.null[3] ? NULL : c.s[3];
		r.value_len = c.null[3] ? 0 : c.len[3];
		for (int k = 4; k < 17; k++)
		{
			r.ints[k - 4] = c.i[k];
			r.nulls[k - 4] = c.null[k];
		}
		fn(arg, &r);
	}
	if (f < 0)
	{
		store_close();
		return -1;
	}
	return 0;
}

/* ------------------------------------------------------------------------
 * Writing a batch
 * ------------------------------------------------------------------------ */
/* Rows of one kind, collected for a batch: NCOL parameters each. */
/*
 * A batch is written in three phases, so that a reader of dlock.held never
 * sees a leaving holder beside the one that follows it (whichever tables
 * they are in):
 *	1. MEMORY rows that leave: session holders that are gone, waiting rows
 *	2. the durable part (InnoDB), committed
 *	3. MEMORY rows that arrive or change (and the old row of a session
 *	   holder whose token changed: after, so a failure in 2 loses no lock)
 * Phase 1 and 3 are upserts and deletes by key: after a lost connection
 * they are simply written again.
 */
enum
{
	/* 1 */
	R_SESSION_GONE,				/* dlock.held_session: session holders */
	R_SESSION_WEAKER,			/* ... that now conflict with less */
	R_LIVE_GONE,				/* dlock.queue_live: waiting calls */
	/* 2 */
	R_KEYED_DELETE,				/* dlock.held_keyed: owner-keyed holders */
	R_KEYED_UPSERT,
	R_KEPT_DELETE,				/* dlock.queue_kept: kept places */
	R_KEPT_UPSERT,
	/* 3 */
	R_SESSION_MOVED,
	R_SESSION_UPSERT,
	R_LIVE_UPSERT,
	NR
};

#define R_FIRST_DURABLE R_KEYED_DELETE
#define R_FIRST_AFTER R_SESSION_MOVED

#define HELD_NCOL 16
#define QUEUE_NCOL 18
#define MAX_CHUNK 64
#define NCHUNK 7				/* 1, 2, 4, ... 64 rows */

static const int row_ncol[NR] = {
	[R_SESSION_GONE] = 1, [R_SESSION_WEAKER] = HELD_NCOL, [R_LIVE_GONE] = 1,
	[R_KEYED_DELETE] = 1, [R_KEYED_UPSERT] = HELD_NCOL,
	[R_KEPT_DELETE] = 1, [R_KEPT_UPSERT] = QUEUE_NCOL,
	[R_SESSION_MOVED] = 1, [R_SESSION_UPSERT] = HELD_NCOL, [R_LIVE_UPSERT] = QUEUE_NCOL,
};

#define HELD_TAIL \
	" ON DUPLICATE KEY UPDATE name = VALUES(name), owner = VALUES(owner), " \
	"conn_id = VALUES(conn_id), session_start = VALUES(session_start), " \
	"mode = VALUES(mode), `count` = VALUES(`count`), granted_us = VALUES(granted_us), " \
	"expires_us = VALUES(expires_us), ttl_us = VALUES(ttl_us), " \
	"implied = VALUES(implied), account = VALUES(account), kept = VALUES(kept), " \
	"capacity = VALUES(capacity), permits = VALUES(permits), value = VALUES(value)"
#define QUEUE_TAIL \
	" ON DUPLICATE KEY UPDATE name = VALUES(name), owner = VALUES(owner), " \
	"conn_id = VALUES(conn_id), session_start = VALUES(session_start), " \
	"mode = VALUES(mode), since_us = VALUES(since_us), timeout_us = VALUES(timeout_us), " \
	"ttl_us = VALUES(ttl_us), conversion = VALUES(conversion), " \
	"implied = VALUES(implied), account = VALUES(account), keep = VALUES(keep), " \
	"kept_until_us = VALUES(kept_until_us), request = VALUES(request), " \
	"capacity = VALUES(capacity), permits = VALUES(permits), value = VALUES(value)"

static const char *const row_head[NR] = {
	[R_KEYED_DELETE] = "DELETE FROM dlock.held_keyed WHERE token IN ",
	[R_KEYED_UPSERT] = "INSERT INTO dlock.held_keyed (" HELD_COLS ") VALUES ",
	[R_KEPT_DELETE] = "DELETE FROM dlock.queue_kept WHERE ticket IN ",
	[R_KEPT_UPSERT] = "INSERT INTO dlock.queue_kept (" QUEUE_COLS ") VALUES ",
	[R_SESSION_GONE] = "DELETE FROM dlock.held_session WHERE token IN ",
	[R_SESSION_WEAKER] = "INSERT INTO dlock.held_session (" HELD_COLS ") VALUES ",
	[R_LIVE_GONE] = "DELETE FROM dlock.queue_live WHERE ticket IN ",
	[R_SESSION_MOVED] = "DELETE FROM dlock.held_session WHERE token IN ",
	[R_SESSION_UPSERT] = "INSERT INTO dlock.held_session (" HELD_COLS ") VALUES ",
	[R_LIVE_UPSERT] = "INSERT INTO dlock.queue_live (" QUEUE_COLS ") VALUES ",
};

static const char *const row_tail[NR] = {
	[R_KEYED_DELETE] = "",
	[R_KEYED_UPSERT] = HELD_TAIL,
	[R_KEPT_DELETE] = "",
	[R_KEPT_UPSERT] = QUEUE_TAIL,
	[R_SESSION_GONE] = "",
	[R_SESSION_WEAKER] = HELD_TAIL,
	[R_LIVE_GONE] = "",
	[R_SESSION_MOVED] = "",
	[R_SESSION_UPSERT] = HELD_TAIL,
	[R_LIVE_UPSERT] = QUEUE_TAIL,
};

static MYSQL_STMT *row_stmts[NR][NCHUNK];

typedef struct Rows
{
	Param	   *p;
	int			n;				/* rows */
	int			cap;			/* rows */
	bool		oom;
} Rows;

static Rows rows[NR];
static bool in_transaction;		/* a batch's BEGIN was sent */

/*
 * A batch whose outcome is unknown - its connection lost during the COMMIT
 * or during its one autocommit statement - may have been applied.  One of
 * its changes, chosen before it ran, tells: the batch is one transaction,
 * so that change is there exactly when all of them are.
 */
typedef enum ProbeKind
{
	PROBE_NONE,
	PROBE_HELD_PRESENT,			/* key, with count, expires, kept, mode */
	PROBE_HELD_ABSENT,
	PROBE_QUEUE_PRESENT,		/* key, with kept_until (in expires), keep (in kept) */
	PROBE_QUEUE_ABSENT,
	PROBE_COUNTER				/* hi in key */
} ProbeKind;

typedef struct Probe
{
	ProbeKind	kind;
	long long	key;
	long long	count;
	long long	expires;
	long long	kept;
	long long	mode;
} Probe;

static Probe probe;

/* The most telling change of the batch: a new or a deleted row first. */
static void kept_note(void);
static bool kept_noted;			/* this batch's kept rows are in kept_set */

static void
probe_choose(DLockManager *m)
{
	Probe		update = {PROBE_NONE, 0, 0, 0, 0, 0};
	int64_t		hi;

	probe.kind = PROBE_NONE;
	for (DLmHolder *h = dlm_touched_holders(m); h; h = h->touched_next)
	{
		if (h->owner->key == NULL)
			continue;			/* not in the durable part */
		if (h->p.dead && h->p.stored)
		{
			probe = (Probe) {PROBE_HELD_ABSENT, h->stored_token, 0, 0, 0, 0};
			return;
		}
		if (!h->p.dead && (!h->p.stored || h->stored_token != h->token))
		{
			probe = (Probe) {PROBE_HELD_PRESENT, h->token, h->count, h->expires_at,
			h->kept, h->mode};
			return;
		}
		if (!h->p.dead && h->p.dirty && update.kind == PROBE_NONE)
			update = (Probe) {PROBE_HELD_PRESENT, h->token, h->count, h->expires_at,
			h->kept, h->mode};
	}
	for (DLmWaiter *w = dlm_touched_waiters(m); w; w = w->touched_next)
	{
		bool		in_kept = w->p.stored && kept_has(w->ticket);
		bool		to_kept = !w->p.dead && w->keep && (!w->p.stored || w->p.dirty);

		if (in_kept && (w->p.dead || (w->p.dirty && !w->keep)))
		{
			probe = (Probe) {PROBE_QUEUE_ABSENT, w->ticket, 0, 0, 0, 0};
			return;
		}
		if (to_kept && !in_kept)
		{
			probe = (Probe) {PROBE_QUEUE_PRESENT, w->ticket, 0, w->kept_until, w->keep, 0};
			return;
		}
		if (to_kept && update.kind == PROBE_NONE)
			update = (Probe) {PROBE_QUEUE_PRESENT, w->ticket, 0, w->kept_until, w->keep, 0};
	}
	if (update.kind != PROBE_NONE)
		probe = update;
	else if (dlm_counter_dirty(m, &hi))
		probe = (Probe) {PROBE_COUNTER, hi, 0, 0, 0, 0};
}

/* Whether an error leaves the outcome of a statement that would commit unknown. */
static bool
outcome_unknown(unsigned int no)
{
	return no == CR_SERVER_LOST || no == CR_SERVER_GONE_ERROR ||
		no == 1317 /* ER_QUERY_INTERRUPTED */ || no == 1927 /* ER_CONNECTION_KILLED */ ||
		no == 1053 /* ER_SERVER_SHUTDOWN */;
}
static MYSQL_BIND *row_binds;	/* MAX_CHUNK * QUEUE_NCOL */

static void
rows_close(void)
{
	for (int k = 0; k < NR; k++)
		for (int c = 0; c < NCHUNK; c++)
			if (row_stmts[k][c])
			{
				mysql_stmt_close(row_stmts[k][c]);
				row_stmts[k][c] = NULL;
			}
}

/* The next row's parameters (cleared), or NULL when out of memory. */
static Param *
row_add(int kind)
{
	Rows	   *r = &rows[kind];
	Param	   *p;

	if (r->oom)
		return NULL;
	if (r->n == r->cap)
	{
		int			cap = r->cap ? r->cap * 2 : 64;
		Param	   *np = realloc(r->p, sizeof(Param) * (size_t) cap * (size_t) row_ncol[kind]);

		if (np == NULL)
		{
			r->oom = true;
			return NULL;
		}
		r->p = np;
		r->cap = cap;
	}
	p = r->p + (size_t) r->n++ * (size_t) row_ncol[kind];
	memset(p, 0, sizeof(Param) * (size_t) row_ncol[kind]);
	return p;
}

static void
p_int(Param *p, long long v)
{
	p->is_int = true;
	p->i = v;
}

static void
p_int_or_null(Param *p, long long v)
{
	if (v)
		p_int(p, v);
	else
		p->is_null = true;
}

static void
p_str(Param *p, const char *s)
{
	if (s == NULL)
		p->is_null = true;
	else
	{
		p->s = s;
		p->len = (unsigned long) strlen(s);
	}
}

/* The prepared statement for 2^c rows of a kind. */
static MYSQL_STMT *
row_stmt(int kind, int c, DlockErr *err)
{
	int			n = 1 << c;
	int			ncol = row_ncol[kind];
	size_t		len;
	char	   *sql;
	char	   *o;
	MYSQL_STMT *st;

	if (row_stmts[kind][c])
		return row_stmts[kind][c];
	len = strlen(row_head[kind]) + strlen(row_tail[kind]) + (size_t) n * (size_t) (2 * ncol + 3) + 4;
	sql = malloc(len);
	if (sql == NULL)
	{
		dlock_set_err(err, DLOCK_ER_UNKNOWN, "out of memory");
		return NULL;
	}
	o = stpcpy(sql, row_head[kind]);
	if (ncol == 1)
		*o++ = '(';
	for (int r = 0; r < n; r++)
	{
		if (r > 0)
			*o++ = ',';
		if (ncol > 1)
			*o++ = '(';
		for (int k = 0; k < ncol; k++)
		{
			if (k > 0)
				*o++ = ',';
			*o++ = '?';
		}
		if (ncol > 1)
			*o++ = ')';
	}
	if (ncol == 1)
		*o++ = ')';
	strcpy(o, row_tail[kind]);
	st = mysql_stmt_init(conn);
	if (st == NULL || mysql_stmt_prepare(st, sql, strlen(sql)) != 0)
	{
		dlock_set_err(err, DLOCK_ER_UNKNOWN, "lock store: %s",
				st ? mysql_stmt_error(st) : mysql_error(conn));
		if (st)
			mysql_stmt_close(st);
		free(sql);
		return NULL;
	}
	free(sql);
	row_stmts[kind][c] = st;
	return st;
}

/* Write the collected rows of a kind: chunks of 64, then 32, 16, ... 1. */
static int
rows_flush(int kind, DlockErr *err)
{
	Rows	   *r = &rows[kind];
	int			done = 0;

	if (r->oom)
	{
		dlock_set_err(err, DLOCK_ER_UNKNOWN, "out of memory");
		return -1;
	}
	if (row_binds == NULL)
	{
		row_binds = malloc(sizeof(MYSQL_BIND) * MAX_CHUNK * QUEUE_NCOL);
		if (row_binds == NULL)
		{
			dlock_set_err(err, DLOCK_ER_UNKNOWN, "out of memory");
			return -1;
		}
	}
	while (done < r->n)
	{
		int			c = NCHUNK - 1;
		MYSQL_STMT *st;

		while ((1 << c) > r->n - done)
			c--;
		st = row_stmt(kind, c, err);
		if (st == NULL ||
			execute_bound(st, r->p + (size_t) done * (size_t) row_ncol[kind],
						  (1 << c) * row_ncol[kind], row_binds, NULL, err) != 0)
			return -1;
		done += 1 << c;
	}
	return 0;
}

static void
held_row(int kind, const DLmHolder *h)
{
	Param	   *p = row_add(kind);

	if (p == NULL)
		return;
	p_int(&p[0], h->token);
	p_str(&p[1], h->lock->name);
	p_str(&p[2], h->owner->key);
	p_int(&p[3], (long long) session_conn_id(h->pid, h->backend_start));
	p_int(&p[4], h->backend_start);
	p_int(&p[5], h->mode);
	p_int(&p[6], h->count);
	p_int(&p[7], h->granted_at);
	p_int_or_null(&p[8], h->expires_at);
	p_int_or_null(&p[9], h->ttl_us);
	p_int(&p[10], h->implied);
	p_str(&p[11], accounts_name(h->role));
	p_int(&p[12], h->kept);
	if (h->lock->capacity)
	{
		p_int(&p[13], h->lock->capacity);
		p_int(&p[14], h->permits);
	}
	else
		p[13].is_null = p[14].is_null = true;
	p_str(&p[15], h->value);
}

static void
queue_row(int kind, const DLmWaiter *w)
{
	Param	   *p = row_add(kind);

	if (p == NULL)
		return;
	p_int(&p[0], w->ticket);
	p_str(&p[1], w->lock->name);
	p_str(&p[2], w->owner->key);
	p_int(&p[3], (long long) session_conn_id(w->pid, w->backend_start));
	p_int(&p[4], w->backend_start);
	p_int(&p[5], w->mode);
	p_int(&p[6], w->since);
	p_int_or_null(&p[7], w->timeout_at);
	p_int_or_null(&p[8], w->ttl_us);
	p_int(&p[9], w->holder != NULL);
	p_int(&p[10], w->implied);
	p_str(&p[11], accounts_name(w->role));
	p_int(&p[12], w->keep);
	p_int_or_null(&p[13], w->kept_until);
	p_int(&p[14], w->request);
	if (w->lock->capacity)
	{
		p_int(&p[15], w->lock->capacity);
		p_int(&p[16], w->permits);
	}
	else
		p[15].is_null = p[16].is_null = true;
	p_str(&p[17], w->value);
}

static void
key_row(int kind, long long key)
{
	Param	   *p = row_add(kind);

	if (p)
		p_int(p, key);
}

/*
 * A session holder's row updated in place to a mode that conflicts with no
 * more than before and no more permits (a down-conversion, a release of
 * levels or permits) goes with the leaving rows, before the durable part:
 * an owner key granted beside it in the same batch must not show up next
 * to the row's old mode (the torture run saw an EX row beside a new PR).
 */
static bool
session_row_weaker(const DLmHolder *h)
{
	return h->p.stored && h->stored_token == h->token &&
		(dlock_mode_conflicts(h->mode) & ~dlock_mode_conflicts(h->stored_mode)) == 0 &&
		h->permits <= h->stored_permits;
}

/*
 * One row leaving a MEMORY table and a new one arriving there, with nothing
 * durable in the batch (a hand-off from one session to the next, a
 * granted waiter's queue row and a new one): one UPDATE turns the leaving
 * row into the new one - the leaving holder is never shown beside the
 * next, and a round trip is saved.  When the leaving row is not there (the
 * batch is written again after a lost connection) the rows stay for the
 * usual delete and upsert.
 */
static int
row_swap(int q, int gone, int upsert, int new_row, DlockErr *err)
{
	int			ncol = row_ncol[upsert];
	Rows	   *u = &rows[upsert];
	Param		p[QUEUE_NCOL + 1];
	MYSQL_BIND	b[QUEUE_NCOL + 1];
	MYSQL_STMT *st = stmt(q, err);
	unsigned long long affected = 0;

	if (st == NULL)
		return -1;
	memcpy(p, u->p + (size_t) new_row * (size_t) ncol, sizeof(Param) * (size_t) ncol);
	p[ncol] = rows[gone].p[0];
	if (execute_bound(st, p, ncol + 1, b, &affected, err) != 0)
		return -1;
	if (affected == 1)
	{
		rows[gone].n = 0;
		/* the last row to be upserted takes the swapped one's place */
		if (new_row != --u->n)
			memcpy(u->p + (size_t) new_row * (size_t) ncol,
				   u->p + (size_t) u->n * (size_t) ncol, sizeof(Param) * (size_t) ncol);
	}
	return 0;
}

/* Whether a swap of one of n new rows saves statements (chunks of 2^k rows). */
static bool
swap_pays(int gone, int upsert, int new_row)
{
	int			n = rows[upsert].n;

	return new_row >= 0 && rows[gone].n == 1 && !rows[gone].oom && !rows[upsert].oom &&
		__builtin_popcount((unsigned) n - 1) <= __builtin_popcount((unsigned) n);
}

int
store_write_batch(DLockManager *m, DlockErr *err)
{
	int64_t		hi;
	int			new_session_row = -1;	/* a new row among the upserts */
	int			new_live_row = -1;
	int			new_keyed_row = -1;

	last_errno = 0;
	if (conn == NULL)
	{
		dlock_set_err(err, DLOCK_ER_UNKNOWN, "lock store: not connected");
		return -1;
	}
	for (int k = 0; k < NR; k++)
	{
		rows[k].n = 0;
		rows[k].oom = false;
	}
	kept_noted = false;
	for (int i = 0; i < nstray; i++)
		key_row(R_SESSION_GONE, stray[i]);
	for (DLmHolder *h = dlm_touched_holders(m); h; h = h->touched_next)
	{
		bool		keyed = h->owner->key != NULL;

		if (h->p.dead)
		{
			if (h->p.stored)
				key_row(keyed ? R_KEYED_DELETE : R_SESSION_GONE, h->stored_token);
		}
		else if (!h->p.stored || h->p.dirty)
		{
			/* a new token (a conversion): the row moves to its new key */
			if (h->p.stored && h->stored_token != h->token)
				key_row(keyed ? R_KEYED_DELETE : R_SESSION_MOVED, h->stored_token);
			held_row(keyed ? R_KEYED_UPSERT :
					 session_row_weaker(h) ? R_SESSION_WEAKER : R_SESSION_UPSERT, h);
			if (!keyed && !h->p.stored && new_session_row < 0 && !rows[R_SESSION_UPSERT].oom)
				new_session_row = rows[R_SESSION_UPSERT].n - 1;
			if (keyed && !h->p.stored && new_keyed_row < 0 && !rows[R_KEYED_UPSERT].oom)
				new_keyed_row = rows[R_KEYED_UPSERT].n - 1;
		}
	}
	for (DLmWaiter *w = dlm_touched_waiters(m); w; w = w->touched_next)
	{
		bool		in_kept = w->p.stored && kept_has(w->ticket);

		if (w->p.dead)
		{
			if (w->p.stored)
				key_row(in_kept ? R_KEPT_DELETE : R_LIVE_GONE, w->ticket);
		}
		else if (!w->p.stored || w->p.dirty)
		{
			/* a kept place is durable; a waiting call's row is not */
			if (in_kept && !w->keep)
				key_row(R_KEPT_DELETE, w->ticket);
			if (!in_kept && w->p.stored && w->keep)
				key_row(R_LIVE_GONE, w->ticket);
			queue_row(w->keep ? R_KEPT_UPSERT : R_LIVE_UPSERT, w);
			if (!w->keep && !w->p.stored && new_live_row < 0 && !rows[R_LIVE_UPSERT].oom)
				new_live_row = rows[R_LIVE_UPSERT].n - 1;
		}
	}
	/*
	 * Phase 2, the durable part: one statement commits on its own
	 * (autocommit: one round trip), more run in a transaction.  One owner
	 * key's row leaving and another's arriving is one UPDATE (a batch of a
	 * release and a grant then needs no BEGIN and COMMIT round trips).
	 */
	{
		bool		keyed_swap = swap_pays(R_KEYED_DELETE, R_KEYED_UPSERT, new_keyed_row);
		int			nstatements = dlm_counter_dirty(m, NULL) ? 1 : 0;

		for (int k = R_FIRST_DURABLE; k < R_FIRST_AFTER; k++)
			nstatements += __builtin_popcount((unsigned) rows[k].n);
		if (keyed_swap)			/* the UPDATE stands for the delete and one upsert */
			nstatements += __builtin_popcount((unsigned) rows[R_KEYED_UPSERT].n - 1) -
				__builtin_popcount((unsigned) rows[R_KEYED_UPSERT].n);
		/* phase 1: a failure here changed nothing durable */
		if (nstatements == 0 &&
			((swap_pays(R_SESSION_GONE, R_SESSION_UPSERT, new_session_row) &&
			  row_swap(Q_SESSION_SWAP, R_SESSION_GONE, R_SESSION_UPSERT,
					   new_session_row, err) != 0) ||
			 (swap_pays(R_LIVE_GONE, R_LIVE_UPSERT, new_live_row) &&
			  row_swap(Q_LIVE_SWAP, R_LIVE_GONE, R_LIVE_UPSERT, new_live_row, err) != 0)))
			return -1;
		for (int k = 0; k < R_FIRST_DURABLE; k++)
			if (rows_flush(k, err) != 0)
				return -1;
		nstray = 0;
		if (nstatements > 0)
		{
			probe_choose(m);
			in_transaction = nstatements > 1;
			if (in_transaction && mysql_real_query(conn, "BEGIN", 5) != 0)
			{
				dlock_set_err(err, DLOCK_ER_UNKNOWN, "lock store: %s", mysql_error(conn));
				in_transaction = false;
				return -1;
			}
			last_errno = 0;
			/* a swap that finds no leaving row leaves both rows to the loop */
			if (keyed_swap &&
				row_swap(Q_KEYED_SWAP, R_KEYED_DELETE, R_KEYED_UPSERT, new_keyed_row, err) != 0)
				return !in_transaction && outcome_unknown(last_errno) ? -2 : -1;
			for (int k = R_FIRST_DURABLE; k < R_FIRST_AFTER; k++)
				if (rows_flush(k, err) != 0)
					return !in_transaction && outcome_unknown(last_errno) ? -2 : -1;
			if (dlm_counter_dirty(m, &hi))
			{
				Param		p = {.is_int = true, .i = hi};

				if (run(Q_COUNTER_SAVE, &p, 1, NULL, err) != 0)
					return !in_transaction && outcome_unknown(last_errno) ? -2 : -1;
			}
			if (in_transaction && mysql_commit(conn) != 0)
			{
				dlock_set_err(err, DLOCK_ER_UNKNOWN, "lock store: commit: %s", mysql_error(conn));
				in_transaction = false;
				return -2;
			}
			in_transaction = false;
		}
	}
	/* phase 3: the rows that live as long as the server, no flush */
	return store_finish_batch(err) == 0 ? 0 : -3;
}

/* The kept-place tickets follow the durable part just committed (once). */
static void
kept_note(void)
{
	Rows	   *d = &rows[R_KEPT_DELETE];
	Rows	   *u = &rows[R_KEPT_UPSERT];

	if (kept_noted)
		return;
	kept_noted = true;
	for (int i = 0; i < d->n; i++)
		kept_del(d->p[i].i);
	for (int i = 0; i < u->n; i++)
		(void) kept_add(u->p[(size_t) i * QUEUE_NCOL].i);
}

/*
 * The MEMORY tables' part of the batch.  Every statement is an upsert or a
 * delete by key, so after a lost connection the part is simply written
 * again (the durable part is committed by then and is not repeated).
 */
int
store_finish_batch(DlockErr *err)
{
	last_errno = 0;
	kept_note();
	for (int k = R_FIRST_AFTER; k < NR; k++)
		if (rows_flush(k, err) != 0)
			return -1;
	return 0;
}

int
store_batch_applied(DlockErr *err)
{
	Cols		c;
	Param		p = {.is_int = true, .i = probe.key};
	MYSQL_STMT *st;
	int			found = 0;
	int			f;
	bool		match = false;

	switch (probe.kind)
	{
		case PROBE_NONE:
			return 0;
		case PROBE_COUNTER:
			st = query(Q_COUNTER_LOAD, NULL, 0, &c, "i", err);
			if (st == NULL)
				return -1;
			while ((f = fetch(st, &c, "i", err)) == 1)
				match = c.i[0] >= probe.key;
			return f < 0 ? -1 : match;
		case PROBE_HELD_PRESENT:
		case PROBE_HELD_ABSENT:
			st = query(Q_PROBE_HELD, &p, 1, &c, "iiii", err);
			if (st == NULL)
				return -1;
			while ((f = fetch(st, &c, "iiii", err)) == 1)
			{
				found = 1;
				match = c.i[0] == probe.count && c.i[1] == probe.expires &&
					c.i[2] == probe.kept && c.i[3] == probe.mode;
			}
			if (f < 0)
				return -1;
			return probe.kind == PROBE_HELD_ABSENT ? !found : match;
		case PROBE_QUEUE_PRESENT:
		case PROBE_QUEUE_ABSENT:
			st = query(Q_PROBE_QUEUE, &p, 1, &c, "ii", err);
			if (st == NULL)
				return -1;
			while ((f = fetch(st, &c, "ii", err)) == 1)
			{
				found = 1;
				match = c.i[0] == probe.expires && (c.i[1] != 0) == (probe.kept != 0);
			}
			if (f < 0)
				return -1;
			return probe.kind == PROBE_QUEUE_ABSENT ? !found : match;
	}
	return -1;
}

int
store_rollback(void)
{
	bool		was = in_transaction;

	in_transaction = false;
	return conn && was ? mysql_rollback(conn) : 0;
}

/* ------------------------------------------------------------------------
 * Administration
 * ------------------------------------------------------------------------ */
int
store_grant(const char *grantee, size_t glen, const char *prefix, size_t plen,
			int revoke, int *changed, DlockErr *err)
{
	Param		p[2] = {
		{.s = grantee, .len = (unsigned long) glen},
		{.s = prefix, .len = (unsigned long) plen},
	};
	unsigned long long affected = 0;

	if (conn == NULL)
	{
		dlock_set_err(err, DLOCK_ER_UNKNOWN, "lock store: not connected");
		return -1;
	}
	if (run(revoke ? Q_GRANT_DEL : Q_GRANT_ADD, p, 2, &affected, err) != 0 ||
		mysql_commit(conn) != 0)
	{
		if (err->code == 0)
			dlock_set_err(err, DLOCK_ER_UNKNOWN, "lock store: %s", mysql_error(conn));
		store_rollback();
		return -1;
	}
	*changed = affected > 0;
	return 0;
}

int
store_set_quota(const char *grantee, size_t glen, const long long limits[4],
				DlockErr *err)
{
	Param		p[5] = {{.s = grantee, .len = (unsigned long) glen}};
	bool		none = true;

	if (conn == NULL)
	{
		dlock_set_err(err, DLOCK_ER_UNKNOWN, "lock store: not connected");
		return -1;
	}
	for (int i = 0; i < 4; i++)
	{
		p[i + 1].is_int = true;
		p[i + 1].i = limits[i] < 0 ? -1 : limits[i];
		none = none && limits[i] < 0;
	}
	if (run(none ? Q_QUOTA_DEL : Q_QUOTA_SET, p, none ? 1 : 5, NULL, err) != 0 ||
		mysql_commit(conn) != 0)
	{
		if (err->code == 0)
			dlock_set_err(err, DLOCK_ER_UNKNOWN, "lock store: %s", mysql_error(conn));
		store_rollback();
		return -1;
	}
	return 0;
}
