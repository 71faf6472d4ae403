/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * dlock_store.c
 *		The lock manager thread's lock store: the dlock tables, reached
 *		through one loopback libmariadb connection to the server the plugin
 *		runs in, by the manager thread only.  This file holds the connection
 *		and its statements, loading the picture, reading dlock.locks and the
 *		administrators' writes; writing a batch is dlock_store_batch.c's.
 *
 * Interface: see dlock_store.h.
 *
 * Every value is a bound parameter: no user value is ever part of a
 * statement's text.  Statements are prepared once per connection and kept.
 *
 * The store account ('dlock_store'@'localhost', scripts/mysql_install.sh)
 * has only SELECT, INSERT, UPDATE and DELETE on dlock and PROCESS; its
 * password is in the credentials file, which must be the server user's
 * alone.
 */
#define _GNU_SOURCE
#include "dlock_store_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <errmsg.h>

#include "dlock_access.h"
#include "dlock_clock.h"
#include "dlock_load.h"
#include "dlock_semisync.h"
#include "dlock_sessions.h"
#include "dlock_store_local.h"

#ifndef DLOCK_CNF
#define DLOCK_CNF "/etc/mysql/dlock.cnf"
#endif

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

const char *const Q[NQ] = {
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
	[Q_CONN_ALIVE] =
	"SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?",
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

StoreConn	store;

void
store_set_server(const char *socket, unsigned int port)
{
	snprintf(store.self_socket, sizeof(store.self_socket), "%s", socket ? socket : "");
	store.self_port = port;
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
static int	unended_wait(DlockErr *err);
static int	binlog_off(bool *off, DlockErr *err);

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

void
store_close(void)
{
	rows_close();
	for (int i = 0; i < NQ; i++)
		if (store.stmts[i])
		{
			mysql_stmt_close(store.stmts[i]);
			store.stmts[i] = NULL;
		}
	if (store.conn)
		mysql_close(store.conn);
	if (store.fenced)
		store.unended = store.conn_id;
	store.conn = NULL;
	store.conn_id = 0;
	store.fenced = false;
}

unsigned long long
store_conn_id(void)
{
	return store.conn_id;
}

bool
store_local_ready(void)
{
	return store.local_rows && store.conn != NULL && local_ready();
}

int
store_open(DlockErr *err)
{
	static const char *const setup[] = {STORE_SESSION_SETUP};
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
	store.conn = mysql_init(NULL);
	if (store.conn == NULL)
	{
		dlock_set_err(err, DLOCK_ER_UNKNOWN, "out of memory");
		return -1;
	}
	/* this very server over its socket; the [dlock] group may say otherwise */
	if (store.self_socket[0])
		mysql_optionsv(store.conn, MARIADB_OPT_UNIXSOCKET, store.self_socket);
	if (store.self_port)
		mysql_optionsv(store.conn, MARIADB_OPT_PORT, &store.self_port);
	mysql_optionsv(store.conn, MYSQL_OPT_CONNECT_TIMEOUT, &timeout);
	mysql_optionsv(store.conn, MYSQL_OPT_READ_TIMEOUT, &rw_timeout);
	mysql_optionsv(store.conn, MYSQL_OPT_WRITE_TIMEOUT, &rw_timeout);
	mysql_optionsv(store.conn, MYSQL_SET_CHARSET_NAME, "utf8mb4");
	mysql_optionsv(store.conn, MYSQL_READ_DEFAULT_FILE, cnf);
	mysql_optionsv(store.conn, MYSQL_READ_DEFAULT_GROUP, "dlock");
	if (mysql_real_connect(store.conn, NULL, NULL, NULL, "dlock", 0, NULL, 0) == NULL)
	{
		/* libmariadb's message names host/socket and user, never secrets */
		dlock_set_err(err, DLOCK_ER_UNKNOWN, "cannot connect to the lock store: %s",
				mysql_error(store.conn));
		store_close();
		return -1;
	}
	for (size_t i = 0; i < sizeof(setup) / sizeof(setup[0]); i++)
		if (mysql_real_query(store.conn, setup[i], strlen(setup[i])) != 0)
		{
			dlock_set_err(err, DLOCK_ER_UNKNOWN,
					"cannot set up the lock store connection: %s", mysql_error(store.conn));
			store_close();
			return -1;
		}
	store.conn_id = mysql_thread_id(store.conn);
	store.patient = semisync;
	if (binlog_off(&store.local_rows, err) != 0)
	{
		store_close();
		return -1;
	}
	if (store.unended != 0 && unended_wait(err) != 0)
	{
		store_close();
		return -1;
	}
	store.fenced = true;
	return 0;
}

/*
 * Whether the server writes no binary log (log_bin cannot change while it
 * runs).  Only then do a batch's rows go over the local connection: its
 * statements are not binlogged, so a replica would not get them, and a
 * semi-synchronous primary would answer a grant without its replica's
 * acknowledgement - the isolated primary's double grant.
 */
static int
binlog_off(bool *off, DlockErr *err)
{
	static const char q[] = "SELECT @@global.log_bin";
	MYSQL_RES  *res;
	MYSQL_ROW	row;

	if (mysql_real_query(store.conn, q, sizeof(q) - 1) != 0 ||
		(res = mysql_store_result(store.conn)) == NULL)
	{
		dlock_set_err(err, DLOCK_ER_UNKNOWN, "cannot set up the lock store connection: %s",
				mysql_error(store.conn));
		return -1;
	}
	row = mysql_fetch_row(res);
	*off = row != NULL && row[0] != NULL && strcmp(row[0], "0") == 0;
	mysql_free_result(res);
	return 0;
}

/*
 * A statement sent on a connection the manager gave up (killed, timed out,
 * lost) can still run in that connection's server thread afterwards - after
 * the batch was written again on a new connection, answered, and a later
 * batch deleted the row - and bring the row back: a session lock the
 * picture does not know, that nobody can release (the torture run saw one).
 * So a new connection writes nothing until the old one's thread has ended:
 * it is killed (harmless when it is already going) and looked for in the
 * processlist until gone.  Connection ids are not reused within a server
 * run, and this plugin's state does not outlive one.
 */
static int
unended_wait(DlockErr *err)
{
	char		kill[64];
	DLockTime	until = mono_us() + LOAD_WAIT_US;
	long		pause_us = 200;

	snprintf(kill, sizeof(kill), "KILL CONNECTION %llu", store.unended);
	/* 1094: unknown thread id - it has ended */
	if (mysql_real_query(store.conn, kill, strlen(kill)) != 0 &&
		mysql_errno(store.conn) != 1094)
	{
		dlock_set_err(err, DLOCK_ER_UNKNOWN, "lock store: cannot end the connection "
				 "given up (%llu): %s", store.unended, mysql_error(store.conn));
		return -1;
	}
	for (;;)
	{
		Cols		c;
		Param		p = {.is_int = true, .i = (long long) store.unended};
		MYSQL_STMT *st = query(Q_CONN_ALIVE, &p, 1, &c, "i", err);
		long long	alive = 1;
		int			f;

		if (st == NULL)
			return -1;
		while ((f = fetch(st, &c, "i", err)) == 1)
			alive = c.i[0];
		if (f < 0)
			return -1;
		if (alive == 0)
		{
			store.unended = 0;
			return 0;
		}
		if (mono_us() >= until)
		{
			dlock_set_err(err, DLOCK_ER_UNKNOWN, "lock store: the connection given up "
					 "(%llu) has not ended", store.unended);
			return -1;
		}
		usleep((useconds_t) pause_us);
		if (pause_us < 50000)
			pause_us *= 2;
	}
}

bool
store_patient(void)
{
	return store.patient;
}

/* ------------------------------------------------------------------------
 * Statements
 * ------------------------------------------------------------------------ */
MYSQL_STMT *
stmt(int q, DlockErr *err)
{
	if (store.stmts[q])
		return store.stmts[q];
	store.stmts[q] = mysql_stmt_init(store.conn);
	if (store.stmts[q] == NULL)
	{
		dlock_set_err(err, DLOCK_ER_UNKNOWN, "lock store: %s", mysql_error(store.conn));
		return NULL;
	}
	if (mysql_stmt_prepare(store.stmts[q], Q[q], strlen(Q[q])) != 0)
	{
		store.last_errno = mysql_stmt_errno(store.stmts[q]);
		dlock_set_err(err, DLOCK_ER_UNKNOWN, "lock store: %s", mysql_stmt_error(store.stmts[q]));
		mysql_stmt_close(store.stmts[q]);
		store.stmts[q] = NULL;
		return NULL;
	}
	return store.stmts[q];
}

int
stmt_fail(MYSQL_STMT *st, DlockErr *err)
{
	store.last_errno = mysql_stmt_errno(st);
	dlock_set_err(err, DLOCK_ER_UNKNOWN, "lock store: %s", mysql_stmt_error(st));
	mysql_stmt_reset(st);
	return -1;
}

/* Bind and execute; b has room for np. */
int
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

/* Run statement q with np parameters (at most 8). */
int
run(int q, Param *p, int np, unsigned long long *affected, DlockErr *err)
{
	MYSQL_STMT *st = stmt(q, err);
	MYSQL_BIND	b[8];

	if (st == NULL)
		return -1;
	return execute_bound(st, p, np, b, affected, err);
}

/* Run a query whose columns are 'types' ('i' integer, 's' bytes). */
MYSQL_STMT *
query(int q, Param *p, int np, Cols *c, const char *types, DlockErr *err)
{
	MYSQL_STMT *st;

	if (run(q, p, np, NULL, err) != 0)
		return NULL;
	st = store.stmts[q];
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
int
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
 * two of them can grant one lock (docs/mariadb.md, Galera).  A read-only server or
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
	if (mysql_commit(store.conn) != 0)
	{
		dlock_set_err(err, DLOCK_ER_UNKNOWN, "lock store: %s", mysql_error(store.conn));
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
	if (store.conn == NULL)
	{
		dlock_set_err(err, DLOCK_ER_UNKNOWN, "lock store: not connected");
		return -1;
	}
	return run(Q_COUNTER_BUMP, NULL, 0, NULL, err);
}

unsigned int
store_last_errno(void)
{
	return store.last_errno;
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
	stray_reset();
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
	if (mysql_commit(store.conn) != 0)
	{
		dlock_set_err(err, DLOCK_ER_UNKNOWN, "lock store: %s", mysql_error(store.conn));
		return -1;
	}
	return 0;
}

bool
connection_lost(unsigned int no)
{
	return no == CR_SERVER_LOST || no == CR_SERVER_GONE_ERROR ||
		no == 1927 /* ER_CONNECTION_KILLED */ ;
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

	/*
	 * Twice at most: a batch of session rows alone never touches this
	 * connection, so it may have been lost (killed) since it was last used.
	 */
	for (int tries = 0;; tries++)
	{
		if (store.conn == NULL && store_open(err) != 0)
			return -1;
		st = account ? query(Q_LOCKS_OF, &p, 1, &c, LOCKS_TYPES, err) :
			query(Q_LOCKS_ALL, NULL, 0, &c, LOCKS_TYPES, err);
		if (st != NULL)
			break;
		store_close();			/* the next use opens a new one */
		if (tries > 0 || !connection_lost(store.last_errno))
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

	if (store.conn == NULL)
	{
		dlock_set_err(err, DLOCK_ER_UNKNOWN, "lock store: not connected");
		return -1;
	}
	if (run(revoke ? Q_GRANT_DEL : Q_GRANT_ADD, p, 2, &affected, err) != 0 ||
		mysql_commit(store.conn) != 0)
	{
		if (err->code == 0)
			dlock_set_err(err, DLOCK_ER_UNKNOWN, "lock store: %s", mysql_error(store.conn));
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

	if (store.conn == NULL)
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
		mysql_commit(store.conn) != 0)
	{
		if (err->code == 0)
			dlock_set_err(err, DLOCK_ER_UNKNOWN, "lock store: %s", mysql_error(store.conn));
		store_rollback();
		return -1;
	}
	return 0;
}
