/*
 * dlock_store.c
 *		The lock manager of the MySQL/MariaDB plugin: the queue-then-main-row
 *		algorithm over InnoDB tables in the `dlock` schema, reached through a
 *		pool of libmariadb connections, and the registry of waiting calls.
 *
 * Tables (sql/mysql/install.sql): dlock.queue holds one row per waiting
 * request, its AUTO_INCREMENT ticket is the FIFO order and, once granted,
 * the fencing token; dlock.held holds one row per (name, holder), the main
 * rows; dlock.names has one row per name and serialises every decision
 * about that name: each step below is one short transaction on a pooled
 * connection that starts by locking that row (INSERT ... ON DUPLICATE KEY
 * UPDATE), so concurrent calls - in this server, in other servers sharing
 * the store, and the reaper - see and change a name one at a time.
 *
 * Locking rules inside this process:
 *	- pool_mutex protects the idle connection list.  A connection is used by
 *	  one thread at a time, between conn_get() and conn_put(), and never
 *	  while a call waits: a waiting call holds no connection.
 *	- reg_mutex protects the waiter registry and every Waiter's state.  It is
 *	  never held while talking to the store.  A thread that committed grants
 *	  or withdrawals marks the affected waiters under reg_mutex and signals
 *	  their condition variables (notify()); a waiter whose ticket was not yet
 *	  known when that happened is "poked" and looks at the tables itself.
 *	- Nothing here reads user values into SQL text: every statement is a
 *	  prepared statement with bound parameters.
 */
#define _GNU_SOURCE
#include "dlock_store.h"
#include "dlock_core.h"

#include <errno.h>
#include <pthread.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mysql.h>
#include <errmsg.h>

#ifndef DLOCK_CNF
#define DLOCK_CNF "/etc/mysql/dlock.cnf"
#endif

#define MAX_IDLE_CONNS 8
#define IDLE_PING_SECONDS 30
#define MAX_DEADLOCK_RETRIES 20
#define QUEUE_SCAN_LIMIT 256

/* ------------------------------------------------------------------------
 * Statements.  Every one takes only bound parameters.
 * ------------------------------------------------------------------------ */
enum
{
	Q_LOCK_NAME,
	Q_EXPIRE_NAME,
	Q_HELD_BY,
	Q_REENTER,
	Q_HELD_SUMMARY,
	Q_QUEUE_MASK,
	Q_ENQUEUE,
	Q_QUEUE_SCAN,
	Q_GRANT_INS,
	Q_GRANT_DEL,
	Q_TOKEN_OF_HOLDER,
	Q_IN_QUEUE,
	Q_HEAD_OF_QUEUE,
	Q_HELD_TOKEN,
	Q_REL_DEC,
	Q_REL_DEL,
	Q_REL_TOKEN_DEC,
	Q_REL_TOKEN_DEL,
	Q_WITHDRAW,
	Q_WITHDRAW_STRAY,
	Q_RENEW,
	Q_EXPIRY_OF,
	Q_NAMES_OF_HOLDER,
	Q_DEL_HELD_OF_HOLDER,
	Q_TICKETS_OF_HOLDER,
	Q_DEL_QUEUE_OF_HOLDER,
	Q_HOLDER,
	Q_EXPIRED_NAMES,
	Q_DEAD_HELD,
	Q_DEAD_QUEUE,
	Q_DEL_HELD_TOKEN,
	Q_DEL_IDLE_NAMES,
	NQ
};

static const char *const Q[NQ] = {
	[Q_LOCK_NAME] =
	"INSERT INTO dlock.names (name) VALUES (?) "
	"ON DUPLICATE KEY UPDATE version = version + 1",
	[Q_EXPIRE_NAME] =
	"DELETE FROM dlock.held WHERE name = ? AND expires_at <= NOW(6)",
	[Q_HELD_BY] =
	"SELECT token, mode FROM dlock.held WHERE name = ? AND holder = ?",
	[Q_REENTER] =
	"UPDATE dlock.held SET `count` = `count` + 1 WHERE token = ?",
	[Q_HELD_SUMMARY] =
	"SELECT BIT_OR(1 << mode), "
	"GREATEST(0, TIMESTAMPDIFF(MICROSECOND, NOW(6), MIN(expires_at))) "
	"FROM dlock.held WHERE name = ?",
	[Q_QUEUE_MASK] =
	"SELECT BIT_OR(1 << mode) FROM dlock.queue WHERE name = ?",
	[Q_ENQUEUE] =
	"INSERT INTO dlock.queue (name, holder, owner, server, incarnation, "
	"conn_id, mode, ttl_us, since, timeout_at) "
	"VALUES (?, ?, ?, ?, ?, ?, ?, ?, NOW(6), "
	"NOW(6) + INTERVAL ? MICROSECOND)",
	[Q_QUEUE_SCAN] =
	"SELECT ticket, mode, holder FROM dlock.queue WHERE name = ? "
	"ORDER BY ticket LIMIT 256",
	[Q_GRANT_INS] =
	"INSERT INTO dlock.held (token, name, holder, owner, server, incarnation, "
	"conn_id, mode, `count`, granted_at, expires_at, ttl_us) "
	"SELECT q.ticket, q.name, q.holder, q.owner, q.server, q.incarnation, "
	"q.conn_id, q.mode, 1, NOW(6), NOW(6) + INTERVAL q.ttl_us MICROSECOND, "
	"q.ttl_us FROM dlock.queue q WHERE q.ticket = ? "
	"ON DUPLICATE KEY UPDATE `count` = dlock.held.`count` + 1",
	[Q_GRANT_DEL] =
	"DELETE FROM dlock.queue WHERE ticket = ?",
	[Q_TOKEN_OF_HOLDER] =
	"SELECT token FROM dlock.held WHERE name = ? AND holder = ?",
	[Q_IN_QUEUE] =
	"SELECT 1 FROM dlock.queue WHERE ticket = ?",
	[Q_HEAD_OF_QUEUE] =
	"SELECT MIN(ticket) FROM dlock.queue WHERE name = ?",
	[Q_HELD_TOKEN] =
	"SELECT token FROM dlock.held WHERE token = ?",
	[Q_REL_DEC] =
	"UPDATE dlock.held SET `count` = `count` - 1 "
	"WHERE name = ? AND holder = ? AND `count` > 1",
	[Q_REL_DEL] =
	"DELETE FROM dlock.held WHERE name = ? AND holder = ?",
	[Q_REL_TOKEN_DEC] =
	"UPDATE dlock.held SET `count` = `count` - 1 "
	"WHERE token = ? AND `count` > 1",
	[Q_REL_TOKEN_DEL] =
	"DELETE FROM dlock.held WHERE token = ?",
	[Q_WITHDRAW] =
	"DELETE FROM dlock.queue WHERE ticket = ?",
	[Q_WITHDRAW_STRAY] =
	"DELETE FROM dlock.queue WHERE name = ? AND holder = ? AND server = ? "
	"AND incarnation = ? AND conn_id = ?",
	[Q_RENEW] =
	"UPDATE dlock.held SET ttl_us = COALESCE(?, ttl_us), "
	"expires_at = NOW(6) + INTERVAL COALESCE(?, ttl_us) MICROSECOND "
	"WHERE name = ? AND holder = ?",
	[Q_EXPIRY_OF] =
	"SELECT DATE_FORMAT(expires_at, '%Y-%m-%d %H:%i:%s.%f') "
	"FROM dlock.held WHERE name = ? AND holder = ?",
	[Q_NAMES_OF_HOLDER] =
	"SELECT name FROM dlock.held WHERE holder = ? "
	"UNION SELECT name FROM dlock.queue WHERE holder = ?",
	[Q_DEL_HELD_OF_HOLDER] =
	"DELETE FROM dlock.held WHERE name = ? AND holder = ?",
	[Q_TICKETS_OF_HOLDER] =
	"SELECT ticket FROM dlock.queue WHERE name = ? AND holder = ?",
	[Q_DEL_QUEUE_OF_HOLDER] =
	"DELETE FROM dlock.queue WHERE name = ? AND holder = ?",
	[Q_HOLDER] =
	"SELECT GROUP_CONCAT(IFNULL(owner, conn_id) ORDER BY token "
	"SEPARATOR ', ') FROM dlock.held "
	"WHERE name = ? AND (expires_at IS NULL OR expires_at > NOW(6))",
	[Q_EXPIRED_NAMES] =
	"SELECT DISTINCT name FROM dlock.held WHERE expires_at <= NOW(6) "
	"LIMIT 1000",
	[Q_DEAD_HELD] =
	"SELECT token, name FROM dlock.held WHERE owner IS NULL AND server = ? "
	"AND (incarnation <> ? OR (granted_at < NOW(6) AND conn_id NOT IN "
	"(SELECT ID FROM information_schema.PROCESSLIST))) LIMIT 1000",
	[Q_DEAD_QUEUE] =
	"SELECT ticket, name FROM dlock.queue WHERE server = ? "
	"AND (incarnation <> ? OR (since < NOW(6) AND conn_id NOT IN "
	"(SELECT ID FROM information_schema.PROCESSLIST))) LIMIT 1000",
	[Q_DEL_HELD_TOKEN] =
	"DELETE FROM dlock.held WHERE token = ?",
	[Q_DEL_IDLE_NAMES] =
	"DELETE FROM dlock.names WHERE NOT EXISTS "
	"(SELECT 1 FROM dlock.held h WHERE h.name = dlock.names.name) "
	"AND NOT EXISTS (SELECT 1 FROM dlock.queue q WHERE q.name = dlock.names.name) "
	"LIMIT 1000",
};

/* ------------------------------------------------------------------------
 * Process-wide configuration, set once.
 * ------------------------------------------------------------------------ */
static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static int	init_failed = 0;
static char init_errmsg[256];

static char self_socket[512];
static unsigned int self_port;
static char server_id[160];		/* host:port of this server */
static char incarnation[64];	/* this server process: pid.start_ticks */
static char os_user[128];

static pthread_mutex_t pool_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t reg_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_condattr_t cond_attr;

/* ------------------------------------------------------------------------
 * Errors
 * ------------------------------------------------------------------------ */
static void
set_err(DlockErr *err, int code, const char *fmt,...)
{
	va_list		ap;

	err->code = code;
	err->warning = 0;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
}

/* Printable, bounded copy of a lock name for messages. */
static const char *
show_name(const char *name, size_t len, char *buf, size_t size)
{
	size_t		n = 0;

	for (size_t i = 0; i < len && n + 4 < size; i++)
	{
		unsigned char c = (unsigned char) name[i];

		buf[n++] = (c < 0x20 || c == 0x7f) ? '?' : (char) c;
	}
	if (len > 0 && n + 4 >= size)
	{
		buf[n++] = '.';
		buf[n++] = '.';
		buf[n++] = '.';
	}
	buf[n] = '\0';
	return buf;
}

/* ------------------------------------------------------------------------
 * Clock
 * ------------------------------------------------------------------------ */
static long long
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long) ts.tv_sec * 1000000LL + ts.tv_nsec / 1000;
}

/* ------------------------------------------------------------------------
 * Connections
 * ------------------------------------------------------------------------ */
typedef struct Conn
{
	MYSQL	   *my;
	MYSQL_STMT *st[NQ];
	long long	idle_since;
	struct Conn *next;
} Conn;

static Conn *idle_conns = NULL;
static int	n_idle = 0;

static void
conn_close(Conn *c)
{
	if (c == NULL)
		return;
	for (int i = 0; i < NQ; i++)
		if (c->st[i])
			mysql_stmt_close(c->st[i]);
	if (c->my)
		mysql_close(c->my);
	free(c);
}

static int
conn_open(Conn **out, const char *fn, DlockErr *err)
{
	static const char *const setup[] = {
		"SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
		"SET SESSION autocommit = 1, innodb_lock_wait_timeout = 2, "
		"lock_wait_timeout = 2, time_zone = '+00:00', "
		"group_concat_max_len = 4194304, max_statement_time = 0, "
		"sql_mode = 'STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION'",
	};
	Conn	   *c = calloc(1, sizeof(Conn));
	unsigned int timeout = 5;
	unsigned int rw_timeout = 30;

	*out = NULL;
	if (c == NULL)
	{
		set_err(err, DLOCK_ER_UNKNOWN, "%s: out of memory", fn);
		return -1;
	}
	c->my = mysql_init(NULL);
	if (c->my == NULL)
	{
		free(c);
		set_err(err, DLOCK_ER_UNKNOWN, "%s: out of memory", fn);
		return -1;
	}
	/* Defaults: this very server over its socket, as the server's OS user. */
	mysql_optionsv(c->my, MARIADB_OPT_UNIXSOCKET, self_socket);
	if (self_port)
		mysql_optionsv(c->my, MARIADB_OPT_PORT, &self_port);
	mysql_optionsv(c->my, MARIADB_OPT_USER, os_user);
	mysql_optionsv(c->my, MARIADB_OPT_PASSWORD, "");
	mysql_optionsv(c->my, MYSQL_OPT_CONNECT_TIMEOUT, &timeout);
	mysql_optionsv(c->my, MYSQL_OPT_READ_TIMEOUT, &rw_timeout);
	mysql_optionsv(c->my, MYSQL_OPT_WRITE_TIMEOUT, &rw_timeout);
	mysql_optionsv(c->my, MYSQL_SET_CHARSET_NAME, "utf8mb4");
	/* The [dlock] group of the option file overrides any of the above. */
	if (access(DLOCK_CNF, R_OK) == 0)
	{
		mysql_optionsv(c->my, MYSQL_READ_DEFAULT_FILE, DLOCK_CNF);
		mysql_optionsv(c->my, MYSQL_READ_DEFAULT_GROUP, "dlock");
	}
	if (mysql_real_connect(c->my, NULL, NULL, NULL, NULL, 0, NULL,
						   CLIENT_FOUND_ROWS) == NULL)
	{
		/* libmariadb's message names host/socket and user, never secrets */
		set_err(err, DLOCK_ER_UNKNOWN,
				"%s: cannot connect to the lock store: %s", fn,
				mysql_error(c->my));
		conn_close(c);
		return -1;
	}
	for (size_t i = 0; i < sizeof(setup) / sizeof(setup[0]); i++)
	{
		if (mysql_real_query(c->my, setup[i], strlen(setup[i])) != 0)
		{
			set_err(err, DLOCK_ER_UNKNOWN,
					"%s: cannot set up the lock store connection: %s", fn,
					mysql_error(c->my));
			conn_close(c);
			return -1;
		}
	}
	*out = c;
	return 0;
}

/* conn_get: an idle pooled connection, or a new one. */
static Conn *
conn_get(const char *fn, DlockErr *err)
{
	Conn	   *c;

	mysql_thread_init();
	for (;;)
	{
		pthread_mutex_lock(&pool_mutex);
		c = idle_conns;
		if (c)
		{
			idle_conns = c->next;
			n_idle--;
		}
		pthread_mutex_unlock(&pool_mutex);
		if (c == NULL)
			break;
		/* a connection idle for long may have been closed by wait_timeout */
		if (now_us() - c->idle_since < IDLE_PING_SECONDS * 1000000LL ||
			mysql_ping(c->my) == 0)
			return c;
		conn_close(c);
	}
	if (conn_open(&c, fn, err) != 0)
		return NULL;
	return c;
}

/* conn_put: back to the pool, or closed when broken or the pool is full. */
static void
conn_put(Conn *c, int broken)
{
	if (c == NULL)
		return;
	if (!broken)
	{
		pthread_mutex_lock(&pool_mutex);
		if (n_idle < MAX_IDLE_CONNS)
		{
			c->idle_since = now_us();
			c->next = idle_conns;
			idle_conns = c;
			n_idle++;
			c = NULL;
		}
		pthread_mutex_unlock(&pool_mutex);
	}
	conn_close(c);
}

void
dls_shutdown(void)
{
	Conn	   *c;

	pthread_mutex_lock(&pool_mutex);
	c = idle_conns;
	idle_conns = NULL;
	n_idle = 0;
	pthread_mutex_unlock(&pool_mutex);
	while (c)
	{
		Conn	   *next = c->next;

		conn_close(c);
		c = next;
	}
}

/* ------------------------------------------------------------------------
 * Running statements
 * ------------------------------------------------------------------------ */
enum
{
	PT_NULL, PT_INT, PT_STR
};

typedef struct P
{
	int			t;
	long long	i;
	const char *s;
	size_t		len;
} P;

#define PI(v) ((P) {PT_INT, (long long) (v), NULL, 0})
#define PS(p, l) ((P) {PT_STR, 0, (p), (l)})
#define PN ((P) {PT_NULL, 0, NULL, 0})
#define PIN(v) ((v) < 0 ? PN : PI(v))	/* int or NULL when negative */

#define MAXP 12
#define MAXCOL 4
#define COLBUF 128

typedef struct Row
{
	int			ncol;
	char	   *v[MAXCOL];		/* NUL-terminated */
	unsigned long len[MAXCOL];
	my_bool		null[MAXCOL];
} Row;

typedef int (*RowCb) (void *arg, const Row *row);

/* The failing statement's error, kept for classification. */
typedef struct QErr
{
	unsigned int no;
} QErr;

static long long
row_int(const Row *r, int i, long long dflt)
{
	if (i >= r->ncol || r->null[i])
		return dflt;
	return strtoll(r->v[i], NULL, 10);
}

/*
 * q_run
 *		Execute prepared statement qid with params; call cb for each result
 *		row.  Returns 0, or -1 with err set (and qe->no the server's errno).
 */
static int
q_run(Conn *c, int qid, const P *p, int np, RowCb cb, void *arg,
	  unsigned long long *affected, unsigned long long *last_id,
	  const char *fn, DlockErr *err, QErr *qe)
{
	MYSQL_STMT *st = c->st[qid];
	MYSQL_BIND	b[MAXP];
	long long	ival[MAXP];
	unsigned long slen[MAXP];
	MYSQL_RES  *meta = NULL;
	int			rc = -1;

	qe->no = 0;
	if (st == NULL)
	{
		st = mysql_stmt_init(c->my);
		if (st == NULL)
		{
			qe->no = mysql_errno(c->my);
			set_err(err, DLOCK_ER_UNKNOWN, "%s: lock store: %s", fn,
					mysql_error(c->my));
			return -1;
		}
		if (mysql_stmt_prepare(st, Q[qid], strlen(Q[qid])) != 0)
		{
			qe->no = mysql_stmt_errno(st);
			set_err(err, DLOCK_ER_UNKNOWN, "%s: lock store: %s", fn,
					mysql_stmt_error(st));
			mysql_stmt_close(st);
			return -1;
		}
		c->st[qid] = st;
	}

	memset(b, 0, sizeof(b));
	for (int i = 0; i < np && i < MAXP; i++)
	{
		switch (p[i].t)
		{
			case PT_NULL:
				b[i].buffer_type = MYSQL_TYPE_NULL;
				break;
			case PT_INT:
				ival[i] = p[i].i;
				b[i].buffer_type = MYSQL_TYPE_LONGLONG;
				b[i].buffer = &ival[i];
				break;
			default:
				slen[i] = (unsigned long) p[i].len;
				b[i].buffer_type = MYSQL_TYPE_BLOB;
				b[i].buffer = (void *) (p[i].s ? p[i].s : "");
				b[i].buffer_length = slen[i];
				b[i].length = &slen[i];
				break;
		}
	}
	if (mysql_stmt_bind_param(st, b) != 0 || mysql_stmt_execute(st) != 0)
		goto fail;
	if (affected)
		*affected = (unsigned long long) mysql_stmt_affected_rows(st);
	if (last_id)
		*last_id = (unsigned long long) mysql_stmt_insert_id(st);

	meta = mysql_stmt_result_metadata(st);
	if (meta != NULL)
	{
		MYSQL_BIND	rb[MAXCOL];
		char		buf[MAXCOL][COLBUF];
		Row			row;
		int			ncol = (int) mysql_num_fields(meta);
		int			f;

		if (ncol > MAXCOL)
			ncol = MAXCOL;
		memset(rb, 0, sizeof(rb));
		memset(&row, 0, sizeof(row));
		row.ncol = ncol;
		for (int i = 0; i < ncol; i++)
		{
			rb[i].buffer_type = MYSQL_TYPE_STRING;
			rb[i].buffer = buf[i];
			rb[i].buffer_length = COLBUF - 1;
			rb[i].length = &row.len[i];
			rb[i].is_null = &row.null[i];
		}
		if (mysql_stmt_bind_result(st, rb) != 0)
			goto fail;
		while ((f = mysql_stmt_fetch(st)) == 0 || f == MYSQL_DATA_TRUNCATED)
		{
			char	   *big[MAXCOL] = {NULL};
			int			stop = 0;

			for (int i = 0; i < ncol; i++)
			{
				row.v[i] = buf[i];
				if (row.null[i])
				{
					buf[i][0] = '\0';
					continue;
				}
				if (row.len[i] >= COLBUF - 1)
				{
					MYSQL_BIND	one;

					big[i] = malloc(row.len[i] + 1);
					if (big[i] == NULL)
					{
						stop = 1;
						break;
					}
					memset(&one, 0, sizeof(one));
					one.buffer_type = MYSQL_TYPE_STRING;
					one.buffer = big[i];
					one.buffer_length = row.len[i] + 1;
					if (mysql_stmt_fetch_column(st, &one, (unsigned int) i, 0) != 0)
					{
						stop = 1;
						break;
					}
					big[i][row.len[i]] = '\0';
					row.v[i] = big[i];
				}
				else
					buf[i][row.len[i]] = '\0';
			}
			if (!stop && cb)
				stop = cb(arg, &row);
			for (int i = 0; i < ncol; i++)
				free(big[i]);
			if (stop)
				break;
		}
		if (f == 1)
			goto fail;
		mysql_stmt_free_result(st);
		mysql_free_result(meta);
		meta = NULL;
	}
	rc = 0;
	return rc;

fail:
	qe->no = mysql_stmt_errno(st);
	if (qe->no == 1205)
		set_err(err, DLOCK_ER_LOCK_WAIT,
				"%s: the lock store is busy: a transaction holds row locks "
				"on the dlock tables (innodb_lock_wait_timeout of the "
				"plugin's connection passed)", fn);
	else
		set_err(err, DLOCK_ER_UNKNOWN, "%s: lock store: %s", fn,
				mysql_stmt_error(st));
	if (meta)
	{
		mysql_stmt_free_result(st);
		mysql_free_result(meta);
	}
	mysql_stmt_reset(st);
	return -1;
}

static int
q_plain(Conn *c, const char *sql, const char *fn, DlockErr *err, QErr *qe)
{
	qe->no = 0;
	if (mysql_real_query(c->my, sql, strlen(sql)) != 0)
	{
		qe->no = mysql_errno(c->my);
		set_err(err, DLOCK_ER_UNKNOWN, "%s: lock store: %s", fn,
				mysql_error(c->my));
		return -1;
	}
	return 0;
}

/* Callbacks collecting the first row's columns as integers. */
typedef struct IntRow
{
	int			found;
	long long	v[MAXCOL];
	int			null[MAXCOL];
} IntRow;

static int
cb_int_row(void *arg, const Row *r)
{
	IntRow	   *ir = arg;

	ir->found = 1;
	for (int i = 0; i < r->ncol; i++)
	{
		ir->null[i] = r->null[i];
		ir->v[i] = row_int(r, i, 0);
	}
	return 1;
}

/* Callback collecting the first row's first column as a malloc'ed string. */
typedef struct StrRow
{
	int			found;
	int			isnull;
	char	   *s;
	size_t		len;
} StrRow;

static int
cb_str_row(void *arg, const Row *r)
{
	StrRow	   *sr = arg;

	sr->found = 1;
	sr->isnull = r->null[0];
	if (!r->null[0])
	{
		sr->s = malloc(r->len[0] + 1);
		if (sr->s)
		{
			memcpy(sr->s, r->v[0], r->len[0]);
			sr->s[r->len[0]] = '\0';
			sr->len = r->len[0];
		}
	}
	return 1;
}

/* A growable list of (id, name) pairs, used by scans. */
typedef struct Item
{
	unsigned long long id;
	int			mode;
	char	   *name;			/* may be NULL */
	size_t		name_len;
	char	   *holder;
	size_t		holder_len;
} Item;

typedef struct List
{
	Item	   *items;
	int			n;
	int			cap;
	int			oom;
} List;

static Item *
lst_push(List *l)
{
	if (l->n == l->cap)
	{
		int			cap = l->cap ? l->cap * 2 : 16;
		Item	   *it = realloc(l->items, sizeof(Item) * cap);

		if (it == NULL)
		{
			l->oom = 1;
			return NULL;
		}
		l->items = it;
		l->cap = cap;
	}
	memset(&l->items[l->n], 0, sizeof(Item));
	return &l->items[l->n++];
}

static void
lst_free(List *l)
{
	for (int i = 0; i < l->n; i++)
	{
		free(l->items[i].name);
		free(l->items[i].holder);
	}
	free(l->items);
	memset(l, 0, sizeof(*l));
}

static char *
dup_bytes(const char *s, size_t len)
{
	char	   *d = malloc(len + 1);

	if (d)
	{
		memcpy(d, s, len);
		d[len] = '\0';
	}
	return d;
}

/* rows (id) */
static int
cb_ids(void *arg, const Row *r)
{
	List	   *l = arg;
	Item	   *it = lst_push(l);

	if (it == NULL)
		return 1;
	it->id = (unsigned long long) row_int(r, 0, 0);
	return 0;
}

/* rows (name) */
static int
cb_names(void *arg, const Row *r)
{
	List	   *l = arg;
	Item	   *it = lst_push(l);

	if (it == NULL)
		return 1;
	it->name = dup_bytes(r->v[0], r->len[0]);
	it->name_len = r->len[0];
	if (it->name == NULL)
		l->oom = 1;
	return l->oom;
}

/* rows (id, name) */
static int
cb_id_names(void *arg, const Row *r)
{
	List	   *l = arg;
	Item	   *it = lst_push(l);

	if (it == NULL)
		return 1;
	it->id = (unsigned long long) row_int(r, 0, 0);
	it->name = dup_bytes(r->v[1], r->len[1]);
	it->name_len = r->len[1];
	if (it->name == NULL)
		l->oom = 1;
	return l->oom;
}

/* rows (ticket, mode, holder) */
static int
cb_queue(void *arg, const Row *r)
{
	List	   *l = arg;
	Item	   *it = lst_push(l);

	if (it == NULL)
		return 1;
	it->id = (unsigned long long) row_int(r, 0, 0);
	it->mode = (int) row_int(r, 1, DLOCK_MODE_EX);
	it->holder = dup_bytes(r->v[2], r->len[2]);
	it->holder_len = r->len[2];
	if (it->holder == NULL)
		l->oom = 1;
	return l->oom;
}

/* ------------------------------------------------------------------------
 * Waiter registry
 * ------------------------------------------------------------------------ */
enum
{
	W_WAITING, W_GRANTED, W_WITHDRAWN
};

typedef struct Waiter
{
	struct Waiter *next;
	struct Waiter *prev;
	const char *name;
	size_t		name_len;
	unsigned long long ticket;	/* 0 until the enqueue committed */
	int			state;
	int			poked;
	long long	token;
	pthread_cond_t cond;
} Waiter;

static Waiter *reg_head = NULL;

static void
reg_add(Waiter *w)
{
	pthread_mutex_lock(&reg_mutex);
	w->prev = NULL;
	w->next = reg_head;
	if (reg_head)
		reg_head->prev = w;
	reg_head = w;
	pthread_mutex_unlock(&reg_mutex);
}

static void
reg_remove(Waiter *w)
{
	pthread_mutex_lock(&reg_mutex);
	if (w->prev)
		w->prev->next = w->next;
	else
		reg_head = w->next;
	if (w->next)
		w->next->prev = w->prev;
	pthread_mutex_unlock(&reg_mutex);
}

/* Outcome of one transaction on a name: whom it granted or withdrew. */
typedef struct Outcome
{
	List		granted;		/* id = ticket, mode = unused, holder */
	long long  *tokens;			/* parallel to granted */
	List		withdrawn;		/* id = ticket */
} Outcome;

static void
outcome_free(Outcome *o)
{
	lst_free(&o->granted);
	lst_free(&o->withdrawn);
	free(o->tokens);
	memset(o, 0, sizeof(*o));
}

/*
 * notify
 *		After a commit: mark local waiters whose tickets were granted or
 *		withdrawn and wake them; poke waiters of the same name whose ticket
 *		is not known yet.  Only waiters of this name are touched.
 */
static void
notify(const char *name, size_t name_len, const Outcome *o)
{
	if (o->granted.n == 0 && o->withdrawn.n == 0)
		return;
	pthread_mutex_lock(&reg_mutex);
	for (Waiter *w = reg_head; w; w = w->next)
	{
		int			hit = 0;

		if (w->name_len != name_len || memcmp(w->name, name, name_len) != 0)
			continue;
		if (w->ticket == 0)
		{
			w->poked = 1;
			hit = 1;
		}
		for (int i = 0; !hit && i < o->granted.n; i++)
			if (o->granted.items[i].id == w->ticket)
			{
				w->state = W_GRANTED;
				w->token = o->tokens ? o->tokens[i] : (long long) w->ticket;
				hit = 1;
			}
		for (int i = 0; !hit && i < o->withdrawn.n; i++)
			if (o->withdrawn.items[i].id == w->ticket)
			{
				w->state = W_WITHDRAWN;
				hit = 1;
			}
		if (hit)
			pthread_cond_signal(&w->cond);
	}
	pthread_mutex_unlock(&reg_mutex);
}

/* ------------------------------------------------------------------------
 * The algorithm.  Each function below runs inside a transaction whose
 * first statement locked the name's row in dlock.names.
 * ------------------------------------------------------------------------ */
typedef struct Tx
{
	Conn	   *c;
	const char *fn;
	DlockErr   *err;
	QErr		qe;
} Tx;

#define RUN(tx, qid, cb, arg, aff, lid, ...) \
	q_run((tx)->c, (qid), (P[]) {__VA_ARGS__}, \
		  (int) (sizeof((P[]) {__VA_ARGS__}) / sizeof(P)), \
		  (cb), (arg), (aff), (lid), (tx)->fn, (tx)->err, &(tx)->qe)

static int
tx_begin_name(Tx *tx, const char *name, size_t len)
{
	if (q_plain(tx->c, "START TRANSACTION", tx->fn, tx->err, &tx->qe) != 0)
		return -1;
	if (RUN(tx, Q_LOCK_NAME, NULL, NULL, NULL, NULL, PS(name, len)) != 0)
		return -1;
	/* leases that ran out are gone before anything is decided */
	return RUN(tx, Q_EXPIRE_NAME, NULL, NULL, NULL, NULL, PS(name, len));
}

static int
tx_commit(Tx *tx)
{
	if (mysql_commit(tx->c->my) != 0)
	{
		tx->qe.no = mysql_errno(tx->c->my);
		set_err(tx->err, DLOCK_ER_UNKNOWN, "%s: lock store: %s", tx->fn,
				mysql_error(tx->c->my));
		return -1;
	}
	return 0;
}

static void
tx_rollback(Tx *tx)
{
	(void) mysql_rollback(tx->c->my);
}

/*
 * advance
 *		Grant, in ticket order, every queued request of the name that is
 *		compatible with all holders and with every request queued before
 *		it.  Appends the grants to o.  *next_expiry_us (if not NULL) gets
 *		the time until the earliest lease of the name ends, -1 if none.
 */
static int
advance(Tx *tx, const char *name, size_t len, Outcome *o,
		long long *next_expiry_us)
{
	IntRow		sum = {0};
	List		q = {0};
	DLockModeMask held, blocked = 0;
	int			rc = -1;

	if (RUN(tx, Q_HELD_SUMMARY, cb_int_row, &sum, NULL, NULL, PS(name, len)) != 0)
		return -1;
	held = sum.null[0] ? 0 : (DLockModeMask) sum.v[0];
	if (next_expiry_us)
		*next_expiry_us = sum.null[1] ? -1 : sum.v[1];

	if (RUN(tx, Q_QUEUE_SCAN, cb_queue, &q, NULL, NULL, PS(name, len)) != 0)
		goto done;
	if (q.oom)
		goto oom;
	for (int i = 0; i < q.n; i++)
	{
		Item	   *it = &q.items[i];
		unsigned long long aff = 0;
		long long	token = (long long) it->id;
		Item	   *g;
		long long  *tk;

		if (dlock_mode_conflicts(it->mode) & (held | blocked))
		{
			blocked |= DLOCK_MODE_BIT(it->mode);
			/* nothing behind an exclusive request can pass it */
			if (it->mode == DLOCK_MODE_EX)
				break;
			continue;
		}
		if (RUN(tx, Q_GRANT_INS, NULL, NULL, &aff, NULL, PI(it->id)) != 0 ||
			RUN(tx, Q_GRANT_DEL, NULL, NULL, NULL, NULL, PI(it->id)) != 0)
			goto done;
		if (aff != 1)
		{
			/* the holder already held it (same owner key): one more level */
			IntRow		t = {0};

			if (RUN(tx, Q_TOKEN_OF_HOLDER, cb_int_row, &t, NULL, NULL,
					PS(name, len), PS(it->holder, it->holder_len)) != 0)
				goto done;
			if (t.found)
				token = t.v[0];
		}
		held |= DLOCK_MODE_BIT(it->mode);
		g = lst_push(&o->granted);
		tk = realloc(o->tokens, sizeof(long long) * (o->granted.cap ? o->granted.cap : 1));
		if (g == NULL || tk == NULL)
		{
			if (tk)
				o->tokens = tk;
			goto oom;
		}
		o->tokens = tk;
		g->id = it->id;
		o->tokens[o->granted.n - 1] = token;
	}
	rc = 0;
	goto done;
oom:
	set_err(tx->err, DLOCK_ER_UNKNOWN, "%s: out of memory", tx->fn);
done:
	lst_free(&q);
	return rc;
}

/* Result of the acquire transaction. */
enum
{
	ACQ_GRANTED, ACQ_QUEUED, ACQ_REFUSED
};

typedef struct AcqCtx
{
	const DlockReq *req;
	const DlockCaller *who;
	const char *holder;
	size_t		holder_len;
	int			try_only;
	/* out */
	int			result;
	long long	token;
	unsigned long long ticket;
	int			stronger;		/* error: re-acquire in a stronger mode */
} AcqCtx;

static int
tx_acquire(Tx *tx, AcqCtx *a, Outcome *o)
{
	const DlockReq *r = a->req;
	IntRow		mine = {0};
	unsigned long long ticket = 0;

	if (tx_begin_name(tx, r->name, r->name_len) != 0)
		return -1;

	/* re-entrant: the holder already holds this name */
	if (RUN(tx, Q_HELD_BY, cb_int_row, &mine, NULL, NULL,
			PS(r->name, r->name_len), PS(a->holder, a->holder_len)) != 0)
		return -1;
	if (mine.found)
	{
		if (!dlock_mode_covers((int) mine.v[1], r->mode))
		{
			a->stronger = 1;
			return 0;
		}
		if (RUN(tx, Q_REENTER, NULL, NULL, NULL, NULL, PI(mine.v[0])) != 0)
			return -1;
		a->result = ACQ_GRANTED;
		a->token = mine.v[0];
		return 0;
	}

	if (a->try_only)
	{
		IntRow		sum = {0};
		IntRow		qm = {0};
		DLockModeMask busy;

		if (RUN(tx, Q_HELD_SUMMARY, cb_int_row, &sum, NULL, NULL,
				PS(r->name, r->name_len)) != 0 ||
			RUN(tx, Q_QUEUE_MASK, cb_int_row, &qm, NULL, NULL,
				PS(r->name, r->name_len)) != 0)
			return -1;
		busy = (sum.null[0] ? 0 : (DLockModeMask) sum.v[0]) |
			(qm.null[0] ? 0 : (DLockModeMask) qm.v[0]);
		if (dlock_mode_conflicts(r->mode) & busy)
		{
			a->result = ACQ_REFUSED;
			return 0;
		}
	}

	if (RUN(tx, Q_ENQUEUE, NULL, NULL, NULL, &ticket,
			PS(r->name, r->name_len), PS(a->holder, a->holder_len),
			r->owner ? PS(r->owner, r->owner_len) : PN,
			PS(server_id, strlen(server_id)),
			PS(incarnation, strlen(incarnation)),
			PI(a->who->conn_id), PI(r->mode), PIN(r->ttl_us),
			PIN(r->timeout_us)) != 0)
		return -1;
	a->ticket = ticket;
	if (advance(tx, r->name, r->name_len, o, NULL) != 0)
		return -1;
	a->result = ACQ_QUEUED;
	for (int i = 0; i < o->granted.n; i++)
		if (o->granted.items[i].id == ticket)
		{
			a->result = ACQ_GRANTED;
			a->token = o->tokens[i];
		}
	if (a->try_only && a->result != ACQ_GRANTED)
	{
		/* cannot happen (checked above); leave nothing behind */
		a->result = ACQ_REFUSED;
		return RUN(tx, Q_WITHDRAW, NULL, NULL, NULL, NULL, PI(ticket));
	}
	return 0;
}

/* ------------------------------------------------------------------------
 * Driver: run a transaction on a name with retries on deadlocks.
 * ------------------------------------------------------------------------ */
typedef int (*TxFn) (Tx *tx, void *arg, Outcome *o);

static int
is_retryable(unsigned int no)
{
	/* deadlock; Galera certification failures also report 1213 */
	return no == 1213;
}

static int
is_conn_error(unsigned int no)
{
	return no == CR_SERVER_GONE_ERROR || no == CR_SERVER_LOST ||
		no == CR_CONNECTION_ERROR || no == CR_CONN_HOST_ERROR;
}

/*
 * run_tx
 *		Run fn as one transaction on the name, commit, wake local waiters.
 *		fn sets *arg's results; they are valid only when this returns 0.
 *		fn returning 1 means "roll back, no error".
 */
static int
run_tx(const char *fn, const char *name, size_t len, TxFn f, void *arg,
	   Outcome *out_copy, DlockErr *err)
{
	for (int attempt = 0;; attempt++)
	{
		Tx			tx = {0};
		Outcome		o = {0};
		int			r;

		tx.fn = fn;
		tx.err = err;
		tx.c = conn_get(fn, err);
		if (tx.c == NULL)
			return -1;
		r = f(&tx, arg, &o);
		if (r == 0)
			r = tx_commit(&tx);
		else if (r == 1)
		{
			tx_rollback(&tx);
			conn_put(tx.c, 0);
			outcome_free(&o);
			return 0;
		}
		if (r != 0)
		{
			int			broken = is_conn_error(tx.qe.no);

			if (!broken)
				tx_rollback(&tx);
			conn_put(tx.c, broken);
			outcome_free(&o);
			if (is_retryable(tx.qe.no) && attempt < MAX_DEADLOCK_RETRIES)
			{
				usleep(1000 * (attempt + 1));
				continue;
			}
			return -1;
		}
		conn_put(tx.c, 0);
		notify(name, len, &o);
		if (out_copy)
			*out_copy = o;
		else
			outcome_free(&o);
		return 0;
	}
}

static int
txfn_acquire(Tx *tx, void *arg, Outcome *o)
{
	AcqCtx	   *a = arg;
	int			r = tx_acquire(tx, a, o);

	if (r != 0)
		return r;
	if (a->stronger || a->result == ACQ_REFUSED)
		return 1;				/* roll back: nothing changes */
	return 0;
}

/* The holder key: "k:" + owner key, or "s:" + server/incarnation/conn. */
static size_t
make_holder(const DlockCaller *who, const DlockReq *req, char *buf, size_t size)
{
	int			n;

	if (req->owner)
	{
		buf[0] = 'k';
		buf[1] = ':';
		memcpy(buf + 2, req->owner, req->owner_len);
		return req->owner_len + 2;
	}
	n = snprintf(buf, size, "s:%s/%s/%llu", server_id, incarnation,
				 who->conn_id);
	return (size_t) n;
}

#define HOLDER_BUF (DLOCK_MAX_OWNER_LEN + 2 + 1)

/* What the waiter learns from a look at the tables. */
typedef struct StatusCtx
{
	const char *name;
	size_t		name_len;
	const char *holder;
	size_t		holder_len;
	unsigned long long ticket;
	int			kill;			/* withdraw: release a grant we find */
	int			withdraw;		/* 1: withdraw, 0: just look */
	/* out */
	int			state;			/* W_* */
	long long	token;
	int			head;			/* first in the queue of its name */
	long long	next_expiry_us;
} StatusCtx;

/*
 * txfn_status
 *		A waiter's look at the tables: expire, grant what can be granted,
 *		then find out what became of its ticket.  With withdraw set, the
 *		request is taken out of the queue; a grant found instead is kept
 *		(timeout: the caller gets it) or released again (kill).
 */
static int
txfn_status(Tx *tx, void *arg, Outcome *o)
{
	StatusCtx  *s = arg;
	IntRow		inq = {0};
	IntRow		held = {0};

	if (tx_begin_name(tx, s->name, s->name_len) != 0)
		return -1;
	if (s->withdraw)
	{
		unsigned long long aff = 0;

		if (RUN(tx, Q_WITHDRAW, NULL, NULL, &aff, NULL, PI(s->ticket)) != 0)
			return -1;
		if (aff == 1)
		{
			s->state = W_WITHDRAWN;
			/* our leaving may let requests behind us through */
			return advance(tx, s->name, s->name_len, o, NULL);
		}
	}
	else
	{
		if (advance(tx, s->name, s->name_len, o, &s->next_expiry_us) != 0)
			return -1;
		for (int i = 0; i < o->granted.n; i++)
			if (o->granted.items[i].id == s->ticket)
			{
				s->state = W_GRANTED;
				s->token = o->tokens[i];
				return 0;
			}
		if (RUN(tx, Q_IN_QUEUE, cb_int_row, &inq, NULL, NULL, PI(s->ticket)) != 0)
			return -1;
		if (inq.found)
		{
			IntRow		head = {0};

			if (RUN(tx, Q_HEAD_OF_QUEUE, cb_int_row, &head, NULL, NULL,
					PS(s->name, s->name_len)) != 0)
				return -1;
			s->state = W_WAITING;
			s->head = head.found && !head.null[0] &&
				(unsigned long long) head.v[0] == s->ticket;
			return 0;
		}
	}

	/* not in the queue: granted earlier, or withdrawn by someone else */
	if (RUN(tx, Q_HELD_TOKEN, cb_int_row, &held, NULL, NULL, PI(s->ticket)) != 0)
		return -1;
	if (!held.found)
	{
		/* merged into an existing hold of the same owner key? */
		if (RUN(tx, Q_TOKEN_OF_HOLDER, cb_int_row, &held, NULL, NULL,
				PS(s->name, s->name_len), PS(s->holder, s->holder_len)) != 0)
			return -1;
	}
	if (!held.found)
	{
		s->state = W_WITHDRAWN;
		return 0;
	}
	s->state = W_GRANTED;
	s->token = held.v[0];
	if (s->withdraw && s->kill)
	{
		unsigned long long aff = 0;

		/* the caller will never see this grant: give it back */
		if (RUN(tx, Q_REL_TOKEN_DEC, NULL, NULL, &aff, NULL, PI(s->token)) != 0)
			return -1;
		if (aff == 0 &&
			(RUN(tx, Q_REL_TOKEN_DEL, NULL, NULL, NULL, NULL, PI(s->token)) != 0 ||
			 advance(tx, s->name, s->name_len, o, NULL) != 0))
			return -1;
		s->state = W_WITHDRAWN;
	}
	return 0;
}

/* Best effort after an error: no queue row of this call may stay behind. */
static void
withdraw_stray(const DlockCaller *who, const DlockReq *req,
			   const char *holder, size_t holder_len)
{
	DlockErr	e2;
	Conn	   *c = conn_get(req->fn, &e2);
	Tx			tx = {0};

	if (c == NULL)
		return;
	tx.c = c;
	tx.fn = req->fn;
	tx.err = &e2;
	if (RUN(&tx, Q_WITHDRAW_STRAY, NULL, NULL, NULL, NULL,
			PS(req->name, req->name_len), PS(holder, holder_len),
			PS(server_id, strlen(server_id)),
			PS(incarnation, strlen(incarnation)), PI(who->conn_id)) != 0)
	{
		conn_put(c, is_conn_error(tx.qe.no));
		return;
	}
	conn_put(c, 0);
}

int
dls_acquire(const DlockCaller *who, const DlockReq *req, int try_only,
			long long *token, DlockErr *err)
{
	char		holder[HOLDER_BUF + 200];
	AcqCtx		a = {0};
	Waiter		w;
	long long	start = now_us();
	long long	deadline = req->timeout_us < 0 ? -1 : start + req->timeout_us;
	long long	next_recheck;
	long long	expiry_at = -1;
	int			head = 0;
	int			rc = -1;
	char		nb[80];

	*token = 0;
	a.req = req;
	a.who = who;
	a.holder = holder;
	a.holder_len = make_holder(who, req, holder, sizeof(holder));
	a.try_only = try_only;

	memset(&w, 0, sizeof(w));
	w.name = req->name;
	w.name_len = req->name_len;
	w.state = W_WAITING;
	pthread_cond_init(&w.cond, &cond_attr);
	if (!try_only)
		reg_add(&w);

	if (run_tx(req->fn, req->name, req->name_len, txfn_acquire, &a, NULL, err) != 0)
	{
		if (!try_only)
			withdraw_stray(who, req, holder, a.holder_len);
		goto out;
	}
	if (a.stronger)
	{
		set_err(err, DLOCK_ER_UNKNOWN,
				"%s: lock \"%s\" is already held in a weaker mode; "
				"release it before asking for exclusive [DL003]", req->fn,
				show_name(req->name, req->name_len, nb, sizeof(nb)));
		goto out;
	}
	if (a.result == ACQ_GRANTED || a.result == ACQ_REFUSED)
	{
		*token = a.result == ACQ_GRANTED ? a.token : 0;
		rc = 0;
		goto out;
	}

	/* Queued: wait for a wake-up, a timeout, a kill or the re-check. */
	pthread_mutex_lock(&reg_mutex);
	w.ticket = a.ticket;
	pthread_mutex_unlock(&reg_mutex);
	next_recheck = now_us() + DLOCK_RECHECK_MS * 1000LL;
	/* a grant may have been committed before our ticket was known */
	int			look = 1;

	for (;;)
	{
		int			state;
		long long	now;
		StatusCtx	s = {0};

		pthread_mutex_lock(&reg_mutex);
		if (w.poked)
		{
			w.poked = 0;
			look = 1;
		}
		if (w.state == W_WAITING && !look)
		{
			long long	until = now_us() + DLOCK_KILL_CHECK_MS * 1000LL;
			struct timespec ts;

			if (deadline >= 0 && deadline < until)
				until = deadline;
			if (next_recheck < until)
				until = next_recheck;
			if (head && expiry_at >= 0 && expiry_at < until)
				until = expiry_at;
			ts.tv_sec = until / 1000000LL;
			ts.tv_nsec = (until % 1000000LL) * 1000;
			pthread_cond_timedwait(&w.cond, &reg_mutex, &ts);
		}
		state = w.state;
		pthread_mutex_unlock(&reg_mutex);

		if (state == W_GRANTED)
		{
			*token = w.token;
			rc = 0;
			break;
		}
		now = now_us();
		s.name = req->name;
		s.name_len = req->name_len;
		s.holder = holder;
		s.holder_len = a.holder_len;
		s.ticket = a.ticket;

		if (state == W_WITHDRAWN)
		{
			/* someone took the request out of the queue; confirm */
			s.withdraw = 0;
		}
		else if (who->killed && who->killed(who->killed_arg))
		{
			s.withdraw = 1;
			s.kill = 1;
		}
		else if (deadline >= 0 && now >= deadline)
			s.withdraw = 1;
		else if (look || now >= next_recheck ||
				 (head && expiry_at >= 0 && now >= expiry_at))
			s.withdraw = 0;
		else
			continue;

		look = 0;
		if (run_tx(req->fn, req->name, req->name_len, txfn_status, &s, NULL, err) != 0)
		{
			withdraw_stray(who, req, holder, a.holder_len);
			break;
		}
		if (s.state == W_GRANTED)
		{
			*token = s.token;
			rc = 0;
			break;
		}
		if (s.state == W_WITHDRAWN)
		{
			if (s.withdraw)
			{
				/* timeout: NULL; kill: the server reports the kill */
				rc = 0;
				break;
			}
			set_err(err, DLOCK_ER_UNKNOWN,
					"%s: the request for lock \"%s\" was withdrawn by "
					"dlock_release_all() of its owner or by the reaper [DL002]",
					req->fn, show_name(req->name, req->name_len, nb, sizeof(nb)));
			break;
		}
		/* still waiting */
		head = s.head;
		expiry_at = s.next_expiry_us >= 0 ? now_us() + s.next_expiry_us : -1;
		next_recheck = now_us() + DLOCK_RECHECK_MS * 1000LL;
	}

	/*
	 * Killed just as the grant arrived: the server will answer with an
	 * error, so the caller never learns the token; give the grant back.
	 */
	if (rc == 0 && *token != 0 && who->killed && who->killed(who->killed_arg))
	{
		StatusCtx	s = {0};

		s.name = req->name;
		s.name_len = req->name_len;
		s.holder = holder;
		s.holder_len = a.holder_len;
		s.ticket = (unsigned long long) *token;
		s.withdraw = 1;
		s.kill = 1;
		if (run_tx(req->fn, req->name, req->name_len, txfn_status, &s, NULL, err) != 0)
			rc = -1;
		*token = 0;
	}

out:
	if (!try_only)
		reg_remove(&w);
	pthread_cond_destroy(&w.cond);
	return rc;
}

/* ------------------------------------------------------------------------
 * Release, renew, release_all, holder
 * ------------------------------------------------------------------------ */
typedef struct RelCtx
{
	const DlockReq *req;
	const char *holder;
	size_t		holder_len;
	int			released;
} RelCtx;

static int
txfn_release(Tx *tx, void *arg, Outcome *o)
{
	RelCtx	   *r = arg;
	const DlockReq *q = r->req;
	unsigned long long aff = 0;

	if (tx_begin_name(tx, q->name, q->name_len) != 0)
		return -1;
	if (RUN(tx, Q_REL_DEC, NULL, NULL, &aff, NULL,
			PS(q->name, q->name_len), PS(r->holder, r->holder_len)) != 0)
		return -1;
	if (aff == 1)
	{
		r->released = 1;
		return 0;
	}
	if (RUN(tx, Q_REL_DEL, NULL, NULL, &aff, NULL,
			PS(q->name, q->name_len), PS(r->holder, r->holder_len)) != 0)
		return -1;
	if (aff == 0)
		return 0;				/* commit anyway: expiries happened */
	r->released = 1;
	return advance(tx, q->name, q->name_len, o, NULL);
}

int
dls_release(const DlockCaller *who, const DlockReq *req, int *released,
			DlockErr *err)
{
	char		holder[HOLDER_BUF + 200];
	RelCtx		r = {0};
	char		nb[80];

	r.req = req;
	r.holder = holder;
	r.holder_len = make_holder(who, req, holder, sizeof(holder));
	if (run_tx(req->fn, req->name, req->name_len, txfn_release, &r, NULL, err) != 0)
		return -1;
	*released = r.released;
	if (!r.released)
	{
		set_err(err, DLOCK_ER_UNKNOWN,
				"%s: lock \"%s\" is not held by this %s", req->fn,
				show_name(req->name, req->name_len, nb, sizeof(nb)),
				req->owner ? "owner" : "session");
		err->warning = 1;
	}
	return 0;
}

typedef struct RenewCtx
{
	const DlockReq *req;
	const char *holder;
	size_t		holder_len;
	int			found;
	StrRow		exp;
} RenewCtx;

static int
txfn_renew(Tx *tx, void *arg, Outcome *o)
{
	RenewCtx   *r = arg;
	const DlockReq *q = r->req;
	unsigned long long aff = 0;

	(void) o;
	if (tx_begin_name(tx, q->name, q->name_len) != 0)
		return -1;
	if (RUN(tx, Q_RENEW, NULL, NULL, &aff, NULL, PIN(q->ttl_us), PIN(q->ttl_us),
			PS(q->name, q->name_len), PS(r->holder, r->holder_len)) != 0)
		return -1;
	if (aff == 0)
		return 0;
	r->found = 1;
	free(r->exp.s);
	memset(&r->exp, 0, sizeof(r->exp));
	return RUN(tx, Q_EXPIRY_OF, cb_str_row, &r->exp, NULL, NULL,
			   PS(q->name, q->name_len), PS(r->holder, r->holder_len));
}

int
dls_renew(const DlockCaller *who, const DlockReq *req, char *expiry,
		  size_t expiry_size, int *no_lease, DlockErr *err)
{
	char		holder[HOLDER_BUF + 200];
	RenewCtx	r = {0};
	char		nb[80];
	int			rc = -1;

	r.req = req;
	r.holder = holder;
	r.holder_len = make_holder(who, req, holder, sizeof(holder));
	if (run_tx(req->fn, req->name, req->name_len, txfn_renew, &r, NULL, err) != 0)
		goto out;
	if (!r.found)
	{
		set_err(err, DLOCK_ER_UNKNOWN,
				"%s: lock \"%s\" is not held by this %s: the lease was lost "
				"[DL001]", req->fn,
				show_name(req->name, req->name_len, nb, sizeof(nb)),
				req->owner ? "owner" : "session");
		goto out;
	}
	*no_lease = r.exp.isnull || r.exp.s == NULL;
	if (!*no_lease)
		snprintf(expiry, expiry_size, "%s", r.exp.s);
	rc = 0;
out:
	free(r.exp.s);
	return rc;
}

typedef struct RelAllCtx
{
	const char *name;
	size_t		name_len;
	const char *holder;
	size_t		holder_len;
	long long	count;
} RelAllCtx;

static int
txfn_release_all_name(Tx *tx, void *arg, Outcome *o)
{
	RelAllCtx  *r = arg;
	unsigned long long held = 0,
				queued = 0;

	if (tx_begin_name(tx, r->name, r->name_len) != 0)
		return -1;
	if (RUN(tx, Q_DEL_HELD_OF_HOLDER, NULL, NULL, &held, NULL,
			PS(r->name, r->name_len), PS(r->holder, r->holder_len)) != 0 ||
		RUN(tx, Q_TICKETS_OF_HOLDER, cb_ids, &o->withdrawn, NULL, NULL,
			PS(r->name, r->name_len), PS(r->holder, r->holder_len)) != 0 ||
		RUN(tx, Q_DEL_QUEUE_OF_HOLDER, NULL, NULL, &queued, NULL,
			PS(r->name, r->name_len), PS(r->holder, r->holder_len)) != 0)
		return -1;
	r->count = (long long) (held + queued);
	if (held + queued == 0)
		return 0;
	return advance(tx, r->name, r->name_len, o, NULL);
}

/* Run a scan statement on a pooled connection, outside any transaction. */
static int
scan(const char *fn, int qid, const P *p, int np, RowCb cb, void *arg,
	 DlockErr *err)
{
	Conn	   *c = conn_get(fn, err);
	QErr		qe;
	int			r;

	if (c == NULL)
		return -1;
	r = q_run(c, qid, p, np, cb, arg, NULL, NULL, fn, err, &qe);
	conn_put(c, r != 0 && is_conn_error(qe.no));
	return r;
}

int
dls_release_all(const DlockCaller *who, const DlockReq *req, long long *count,
				DlockErr *err)
{
	char		holder[HOLDER_BUF + 200];
	size_t		hlen = make_holder(who, req, holder, sizeof(holder));
	List		names = {0};
	P			p[2] = {PS(holder, hlen), PS(holder, hlen)};
	int			rc = -1;

	*count = 0;
	if (scan(req->fn, Q_NAMES_OF_HOLDER, p, 2, cb_names, &names, err) != 0)
		goto out;
	if (names.oom)
	{
		set_err(err, DLOCK_ER_UNKNOWN, "%s: out of memory", req->fn);
		goto out;
	}
	for (int i = 0; i < names.n; i++)
	{
		RelAllCtx	r = {0};

		r.name = names.items[i].name;
		r.name_len = names.items[i].name_len;
		r.holder = holder;
		r.holder_len = hlen;
		if (run_tx(req->fn, r.name, r.name_len, txfn_release_all_name, &r,
				   NULL, err) != 0)
			goto out;
		*count += r.count;
	}
	rc = 0;
out:
	lst_free(&names);
	return rc;
}

int
dls_holder(const DlockReq *req, char **out, size_t *out_len, DlockErr *err)
{
	StrRow		sr = {0};
	P			p[1] = {PS(req->name, req->name_len)};

	*out = NULL;
	*out_len = 0;
	if (scan(req->fn, Q_HOLDER, p, 1, cb_str_row, &sr, err) != 0)
	{
		free(sr.s);
		return -1;
	}
	if (sr.found && !sr.isnull)
	{
		if (sr.s == NULL)
		{
			set_err(err, DLOCK_ER_UNKNOWN, "%s: out of memory", req->fn);
			return -1;
		}
		*out = sr.s;
		*out_len = sr.len;
	}
	return 0;
}

/* ------------------------------------------------------------------------
 * Reaper
 * ------------------------------------------------------------------------ */
typedef struct ReapCtx
{
	const char *name;
	size_t		name_len;
	List	   *held;			/* tokens to end on this name */
	List	   *queued;			/* tickets to withdraw on this name */
	long long	count;
} ReapCtx;

static int
txfn_reap_name(Tx *tx, void *arg, Outcome *o)
{
	ReapCtx    *r = arg;
	unsigned long long aff;

	/* tx_begin_name expires the leases of the name */
	if (tx_begin_name(tx, r->name, r->name_len) != 0)
		return -1;
	r->count = (long long) mysql_stmt_affected_rows(tx->c->st[Q_EXPIRE_NAME]);
	for (int i = 0; r->held && i < r->held->n; i++)
	{
		Item	   *it = &r->held->items[i];

		if (it->name_len != r->name_len || memcmp(it->name, r->name, r->name_len))
			continue;
		aff = 0;
		if (RUN(tx, Q_DEL_HELD_TOKEN, NULL, NULL, &aff, NULL, PI(it->id)) != 0)
			return -1;
		r->count += (long long) aff;
	}
	for (int i = 0; r->queued && i < r->queued->n; i++)
	{
		Item	   *it = &r->queued->items[i];
		Item	   *wd;

		if (it->name_len != r->name_len || memcmp(it->name, r->name, r->name_len))
			continue;
		aff = 0;
		if (RUN(tx, Q_WITHDRAW, NULL, NULL, &aff, NULL, PI(it->id)) != 0)
			return -1;
		r->count += (long long) aff;
		if (aff && (wd = lst_push(&o->withdrawn)) != NULL)
			wd->id = it->id;
	}
	return advance(tx, r->name, r->name_len, o, NULL);
}

static int
reap_names(const char *fn, List *names, List *held, List *queued,
		   long long *count, DlockErr *err)
{
	for (int i = 0; i < names->n; i++)
	{
		ReapCtx		r = {0};
		int			dup = 0;

		for (int j = 0; j < i && !dup; j++)
			dup = names->items[j].name_len == names->items[i].name_len &&
				memcmp(names->items[j].name, names->items[i].name,
					   names->items[i].name_len) == 0;
		if (dup)
			continue;
		r.name = names->items[i].name;
		r.name_len = names->items[i].name_len;
		r.held = held;
		r.queued = queued;
		if (run_tx(fn, r.name, r.name_len, txfn_reap_name, &r, NULL, err) != 0)
			return -1;
		*count += r.count;
	}
	return 0;
}

int
dls_reap(const DlockCaller *who, long long *count, DlockErr *err)
{
	const char *fn = "dlock_reap";
	List		expired = {0},
				dead_held = {0},
				dead_queue = {0};
	P			p[2] = {PS(server_id, strlen(server_id)),
	PS(incarnation, strlen(incarnation))};
	int			rc = -1;
	Conn	   *c;
	QErr		qe;

	(void) who;
	*count = 0;
	if (scan(fn, Q_EXPIRED_NAMES, NULL, 0, cb_names, &expired, err) != 0 ||
		scan(fn, Q_DEAD_HELD, p, 2, cb_id_names, &dead_held, err) != 0 ||
		scan(fn, Q_DEAD_QUEUE, p, 2, cb_id_names, &dead_queue, err) != 0)
		goto out;
	if (expired.oom || dead_held.oom || dead_queue.oom)
	{
		set_err(err, DLOCK_ER_UNKNOWN, "%s: out of memory", fn);
		goto out;
	}
	if (reap_names(fn, &expired, NULL, NULL, count, err) != 0 ||
		reap_names(fn, &dead_held, &dead_held, NULL, count, err) != 0 ||
		reap_names(fn, &dead_queue, NULL, &dead_queue, count, err) != 0)
		goto out;

	/* names rows without holders or waiters are only mutexes: drop them */
	c = conn_get(fn, err);
	if (c == NULL)
		goto out;
	if (q_run(c, Q_DEL_IDLE_NAMES, NULL, 0, NULL, NULL, NULL, NULL, fn, err, &qe) != 0)
	{
		conn_put(c, is_conn_error(qe.no));
		goto out;
	}
	conn_put(c, 0);
	rc = 0;
out:
	lst_free(&expired);
	lst_free(&dead_held);
	lst_free(&dead_queue);
	return rc;
}

/* ------------------------------------------------------------------------
 * Set-up
 * ------------------------------------------------------------------------ */
static void
init_incarnation(void)
{
	/* field 22 of /proc/self/stat: start time in clock ticks since boot */
	unsigned long long start = 0;
	char		boot[40] = "";
	FILE	   *f = fopen("/proc/self/stat", "r");

	if (f)
	{
		char		line[1024];

		if (fgets(line, sizeof(line), f))
		{
			char	   *p = strrchr(line, ')');
			int			field = 2;

			while (p && *p && field < 22)
			{
				p = strchr(p + 1, ' ');
				if (p)
					field++;
			}
			if (p)
				start = strtoull(p + 1, NULL, 10);
		}
		fclose(f);
	}
	f = fopen("/proc/sys/kernel/random/boot_id", "r");
	if (f)
	{
		if (fgets(boot, 9, f) == NULL)
			boot[0] = '\0';
		fclose(f);
	}
	snprintf(incarnation, sizeof(incarnation), "%s.%ld.%llu", boot,
			 (long) getpid(), start);
}

static void
init_once_fn(void)
{
	struct passwd pw,
			   *res = NULL;
	char		buf[1024];

	if (mysql_library_init(0, NULL, NULL) != 0)
	{
		init_failed = 1;
		snprintf(init_errmsg, sizeof(init_errmsg),
				 "cannot initialise the client library");
		return;
	}
	pthread_condattr_init(&cond_attr);
	pthread_condattr_setclock(&cond_attr, CLOCK_MONOTONIC);
	init_incarnation();
	if (getpwuid_r(geteuid(), &pw, buf, sizeof(buf), &res) == 0 && res)
		snprintf(os_user, sizeof(os_user), "%s", pw.pw_name);
	else
		snprintf(os_user, sizeof(os_user), "mysql");
}

int
dls_init(const char *socket, unsigned int port, const char *sid, DlockErr *err)
{
	static pthread_mutex_t set_mutex = PTHREAD_MUTEX_INITIALIZER;

	pthread_once(&init_once, init_once_fn);
	if (init_failed)
	{
		set_err(err, DLOCK_ER_UNKNOWN, "dlock: %s", init_errmsg);
		return -1;
	}
	pthread_mutex_lock(&set_mutex);
	if (server_id[0] == '\0')
	{
		snprintf(self_socket, sizeof(self_socket), "%s",
				 socket ? socket : "/run/mysqld/mysqld.sock");
		self_port = port;
		snprintf(server_id, sizeof(server_id), "%s", sid);
	}
	pthread_mutex_unlock(&set_mutex);
	return 0;
}
