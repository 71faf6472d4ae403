/*
 * dlock_store.c
 *		The lock manager of the MySQL/MariaDB plugin: calls of the algorithm's
 *		steps in the lock store, the pool of libmariadb connections that
 *		reaches it, and the registry of waiting calls.
 *
 * The algorithm itself - the queue-then-main-row steps over the InnoDB
 * tables of the `dlock` schema - is a set of stored procedures
 * (dlock.step_*, sql/mysql/install.sql): each step is one transaction in
 * one CALL, so it costs one round trip on a pooled connection.  Every step
 * first locks the name's row in dlock.names, so concurrent calls - in this
 * server, in other servers sharing the store, and the reaper - see and
 * change a name one at a time.  The mode compatibility matrix is passed to
 * the procedures from core/ (dlock_core.c), the one place it is defined.
 *
 * Locking rules inside this process:
 *	- pool_mutex protects the idle connection list.  A connection is used by
 *	  one thread at a time, between conn_get() and conn_put(), and never
 *	  while a call waits: a waiting call holds no connection.
 *	- reg_mutex protects the waiter registry and every Waiter's state.  It is
 *	  never held while talking to the store.  A thread whose step granted or
 *	  withdrew requests (the step's result lists them) marks the affected
 *	  waiters under reg_mutex and signals their condition variables
 *	  (notify()); a waiter whose ticket was not yet known when that happened
 *	  is "poked" and looks at the tables itself.
 *	- Nothing here reads user values into SQL text: every statement is a
 *	  prepared statement with bound parameters.
 */
#define _GNU_SOURCE
#include "dlock_store.h"
#include "dlock_core.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <mysql.h>
#include <errmsg.h>

#ifndef DLOCK_CNF
#define DLOCK_CNF "/etc/mysql/dlock.cnf"
#endif

/*
 * Store connections this server opens at most (a step holds one for a
 * round trip; waiting calls hold none); all of them may idle in the pool.
 * DLOCK_MAX_STORE_CONNS in the server's environment changes it.
 */
#define DEFAULT_MAX_STORE_CONNS 64
static int	max_store_conns = DEFAULT_MAX_STORE_CONNS;
/* a step waits this long for a store connection another step returns */
#define CONN_WAIT_SECONDS 10
#define IDLE_PING_SECONDS 30
#define MAX_DEADLOCK_RETRIES 20
/* a step whose connection was lost is repeated on a new one this often */
#define MAX_LOST_RETRIES 3

/* ------------------------------------------------------------------------
 * Statements.  Every one takes only bound parameters.
 * ------------------------------------------------------------------------ */
enum
{
	Q_ACQUIRE,
	Q_RELEASE,
	Q_STATUS,
	Q_RENEW,
	Q_RELEASE_ALL,
	Q_CANCEL,
	Q_REAP,
	Q_NAMES_OF_HOLDER,
	Q_HOLDER,
	Q_EXPIRED_NAMES,
	Q_DEAD_HELD,
	Q_DEAD_QUEUE,
	Q_MY_QUEUE,
	Q_FORGET_IDLE,
	Q_GRANT,
	Q_SET_QUOTA,
	Q_KEY_ACCOUNTS,
	NQ
};

static const char *const Q[NQ] = {
	[Q_ACQUIRE] =
	"CALL dlock.step_acquire(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
	[Q_RELEASE] =
	"CALL dlock.step_release(?, ?, ?, ?, ?)",
	[Q_STATUS] =
	"CALL dlock.step_status(?, ?, ?, ?, ?, ?, ?, ?)",
	[Q_RENEW] =
	"CALL dlock.step_renew(?, ?, ?)",
	[Q_RELEASE_ALL] =
	"CALL dlock.step_release_all(?, ?, ?, ?, ?)",
	[Q_CANCEL] =
	"CALL dlock.step_cancel(?, ?, ?, ?)",
	[Q_REAP] =
	"CALL dlock.step_reap(?, ?, ?, ?)",
	[Q_NAMES_OF_HOLDER] =
	"SELECT name FROM dlock.held WHERE holder = ? "
	"UNION SELECT name FROM dlock.queue WHERE holder = ?",
	[Q_HOLDER] =
	"SELECT GROUP_CONCAT(CASE WHEN account = ? OR ? THEN IFNULL(owner, conn_id) "
	"WHEN ? THEN IF(owner IS NULL, conn_id, '(owner key)') "
	"ELSE '(another account)' END ORDER BY token SEPARATOR ', ') "
	"FROM dlock.held "
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
	[Q_MY_QUEUE] =
	"SELECT ticket, name FROM dlock.queue WHERE server = ? AND incarnation = ? "
	"AND since < NOW(6) - INTERVAL 5 SECOND LIMIT 1000",
	[Q_FORGET_IDLE] =
	"CALL dlock.step_forget_idle(1000)",
	[Q_GRANT] =
	"CALL dlock.step_grant(?, ?, ?)",
	[Q_SET_QUOTA] =
	"CALL dlock.step_set_quota(?, ?, ?, ?, ?)",
	/* no index on owner: administrators' calls only */
	[Q_KEY_ACCOUNTS] =
	"SELECT account FROM dlock.held WHERE owner = ? "
	"AND (expires_at IS NULL OR expires_at > NOW(6)) "
	"UNION SELECT account FROM dlock.queue WHERE owner = ? LIMIT 2",
};


/*
 * Steps whose last two parameters are (p_req, p_retry): the request id of
 * the call and whether this is a repeat after a lost connection.  Only
 * these change state in a way a blind repeat would do twice (or count
 * wrong); the others (renew, reaper steps, scans) can simply run again.
 */
static const bool has_req[NQ] = {
	[Q_ACQUIRE] = true, [Q_RELEASE] = true, [Q_STATUS] = true,
	[Q_RELEASE_ALL] = true,
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

static pthread_mutex_t pool_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pool_cond;	/* CLOCK_MONOTONIC, set up in init_once_fn */
static int	n_open = 0;			/* store connections open or being opened */
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

/*
 * The credentials file: $DLOCK_CNF in the server's environment, else the
 * built-in path.  It holds the store account's password, so it must exist,
 * belong to the server's user and be readable by nobody else.
 */
static const char *
cnf_path(void)
{
	const char *p = getenv("DLOCK_CNF");

	return (p && p[0]) ? p : DLOCK_CNF;
}

static int
check_cnf(const char *path, const char *fn, DlockErr *err)
{
	struct stat st;

	if (stat(path, &st) != 0)
	{
		set_err(err, DLOCK_ER_UNKNOWN,
				"%s: no lock store account: %s: %s (scripts/mysql_install.sh "
				"creates it)", fn, path, strerror(errno));
		return -1;
	}
	if (st.st_uid != geteuid() || (st.st_mode & 077) != 0)
	{
		set_err(err, DLOCK_ER_UNKNOWN,
				"%s: %s holds a password: it must belong to the server's "
				"user (uid %u) with mode 0600 or 0400 (it is uid %u, mode %04o)",
				fn, path, (unsigned) geteuid(), (unsigned) st.st_uid,
				(unsigned) (st.st_mode & 07777));
		return -1;
	}
	return 0;
}

static int
conn_open(Conn **out, const char *fn, DlockErr *err)
{
	const char *cnf = cnf_path();
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
	/* Defaults: this very server over its socket. */
	mysql_optionsv(c->my, MARIADB_OPT_UNIXSOCKET, self_socket);
	if (self_port)
		mysql_optionsv(c->my, MARIADB_OPT_PORT, &self_port);
	mysql_optionsv(c->my, MYSQL_OPT_CONNECT_TIMEOUT, &timeout);
	mysql_optionsv(c->my, MYSQL_OPT_READ_TIMEOUT, &rw_timeout);
	mysql_optionsv(c->my, MYSQL_OPT_WRITE_TIMEOUT, &rw_timeout);
	mysql_optionsv(c->my, MYSQL_SET_CHARSET_NAME, "utf8mb4");
	/* The store account and any other setting: the [dlock] group. */
	if (check_cnf(cnf, fn, err) != 0)
	{
		conn_close(c);
		return -1;
	}
	mysql_optionsv(c->my, MYSQL_READ_DEFAULT_FILE, cnf);
	mysql_optionsv(c->my, MYSQL_READ_DEFAULT_GROUP, "dlock");
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

/*
 * conn_get: an idle pooled connection, or a new one.  fresh: always a new
 * one - after a lost connection, the other idle ones may have been killed
 * too.
 */
static Conn *
conn_get(const char *fn, int fresh, DlockErr *err)
{
	Conn	   *c;
	struct timespec until;

	mysql_thread_init();
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += CONN_WAIT_SECONDS;
	pthread_mutex_lock(&pool_mutex);
	for (;;)
	{
		c = fresh ? NULL : idle_conns;
		if (c)
		{
			idle_conns = c->next;
			n_idle--;
			pthread_mutex_unlock(&pool_mutex);
			/* one idle for long may have been closed by wait_timeout */
			if (now_us() - c->idle_since < IDLE_PING_SECONDS * 1000000LL ||
				mysql_ping(c->my) == 0)
				return c;
			conn_close(c);
			pthread_mutex_lock(&pool_mutex);
			n_open--;
			continue;
		}
		if (n_open < max_store_conns)
			break;
		if (fresh && idle_conns)
		{
			/* make room: an idle one may have been killed too */
			c = idle_conns;
			idle_conns = c->next;
			n_idle--;
			n_open--;
			pthread_mutex_unlock(&pool_mutex);
			conn_close(c);
			pthread_mutex_lock(&pool_mutex);
			continue;
		}
		if (pthread_cond_timedwait(&pool_cond, &pool_mutex, &until) == ETIMEDOUT)
		{
			pthread_mutex_unlock(&pool_mutex);
			set_err(err, DLOCK_ER_UNKNOWN,
					"%s: all %d lock store connections stayed busy for %d s",
					fn, max_store_conns, CONN_WAIT_SECONDS);
			return NULL;
		}
	}
	n_open++;
	pthread_mutex_unlock(&pool_mutex);
	if (conn_open(&c, fn, err) != 0)
	{
		pthread_mutex_lock(&pool_mutex);
		n_open--;
		pthread_cond_signal(&pool_cond);
		pthread_mutex_unlock(&pool_mutex);
		return NULL;
	}
	return c;
}

/* conn_put: back to the pool, or closed when broken or the pool is full. */
static void
conn_put(Conn *c, int broken)
{
	if (c == NULL)
		return;
	pthread_mutex_lock(&pool_mutex);
	if (!broken && n_idle < max_store_conns)
	{
		c->idle_since = now_us();
		c->next = idle_conns;
		idle_conns = c;
		n_idle++;
		c = NULL;
	}
	else
		n_open--;
	pthread_cond_signal(&pool_cond);
	pthread_mutex_unlock(&pool_mutex);
	conn_close(c);
}

void
dls_shutdown(void)
{
	Conn	   *c;

	pthread_mutex_lock(&pool_mutex);
	c = idle_conns;
	idle_conns = NULL;
	n_open -= n_idle;
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

#define MAXP 20
#define MAXCOL 9
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
	/* a CALL ends with a status result after its rows; an error there too */
	{
		int			nr;

		while ((nr = mysql_stmt_next_result(st)) == 0)
			mysql_stmt_free_result(st);
		if (nr > 0)
			goto fail;
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
	int			poked;			/* look at the tables: news were lost */
	long long	token;
	pthread_cond_t cond;
	/* decisions on the name made while the ticket was not known yet */
	int			npending;
	struct
	{
		unsigned long long ticket;
		long long	token;		/* 0: withdrawn */
	}			pending[16];
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


/* ------------------------------------------------------------------------
 * Steps: one CALL of a dlock.step_* procedure, one transaction.
 * ------------------------------------------------------------------------ */

/* The state a step reports (the procedures' first column). */
enum
{
	ST_NONE = 0,				/* not held */
	ST_GRANTED = 1,				/* granted, released, found */
	ST_WAITING = 2,
	ST_REFUSED = 3,				/* try-acquire: not now */
	ST_STRONGER = 4,			/* held in a weaker mode (DL003) */
	ST_WITHDRAWN = 5,
	ST_OUTSIDE_GRANTS = 6,		/* the name is outside the caller's grants */
	ST_QUOTA = 7				/* over the account's quota (expiry: which) */
};

/* A step's result row. */
typedef struct Step
{
	int			found;
	int			state;
	long long	token;			/* 0: none */
	unsigned long long ticket;	/* 0: none */
	int			head;			/* first in its name's queue */
	long long	next_expiry_us; /* -1: no lease on the name */
	long long	count;
	char	   *granted;		/* "ticket:token," per grant */
	char	   *withdrawn;		/* "ticket," per withdrawn request */
	char	   *expiry;			/* NULL: none */
	int			oom;
} Step;

static void
step_free(Step *s)
{
	free(s->granted);
	free(s->withdrawn);
	free(s->expiry);
	memset(s, 0, sizeof(*s));
}

static char *
col_dup(const Row *r, int i, int *oom)
{
	char	   *d;

	if (i >= r->ncol || r->null[i])
		return NULL;
	d = dup_bytes(r->v[i], r->len[i]);
	if (d == NULL)
		*oom = 1;
	return d;
}

static int
cb_step(void *arg, const Row *r)
{
	Step	   *s = arg;

	s->found = 1;
	s->state = (int) row_int(r, 0, ST_NONE);
	s->token = row_int(r, 1, 0);
	s->ticket = (unsigned long long) row_int(r, 2, 0);
	s->head = (int) row_int(r, 3, 0);
	s->next_expiry_us = row_int(r, 4, -1);
	s->count = row_int(r, 5, 0);
	s->granted = col_dup(r, 6, &s->oom);
	s->withdrawn = col_dup(r, 7, &s->oom);
	s->expiry = col_dup(r, 8, &s->oom);
	return 1;
}

/*
 * next_entry
 *		Walk a step's list, "t:tok,t:tok," (granted) or "t,t," (withdrawn,
 *		*token = 0); returns 0 at its end.
 */
static int
next_entry(const char **p, unsigned long long *ticket, long long *token)
{
	char	   *end;

	if (*p == NULL || **p == '\0')
		return 0;
	*ticket = strtoull(*p, &end, 10);
	if (end == *p)
		return 0;
	*token = 0;
	if (*end == ':')
		*token = strtoll(end + 1, &end, 10);
	*p = (*end == ',') ? end + 1 : end;
	return 1;
}

/*
 * notify
 *		After a step committed: mark local waiters whose tickets it granted
 *		or withdrew and wake them.  A waiter of the same name whose ticket is
 *		not known yet (its own step is still running) keeps the decisions in
 *		its pending list and checks them once it learns its ticket; only if
 *		that list overflows does it look at the tables.
 */
static void
notify(const char *name, size_t name_len, const Step *s)
{
	if (!(s->granted && s->granted[0]) && !(s->withdrawn && s->withdrawn[0]))
		return;
	pthread_mutex_lock(&reg_mutex);
	for (Waiter *w = reg_head; w; w = w->next)
	{
		int			hit = 0;

		if (w->name_len != name_len || memcmp(w->name, name, name_len) != 0)
			continue;
		for (int list = 0; list < 2; list++)
		{
			const char *p = list == 0 ? s->granted : s->withdrawn;
			unsigned long long t;
			long long	tok;

			while (next_entry(&p, &t, &tok))
			{
				if (w->ticket == 0)
				{
					if (w->npending < (int) (sizeof(w->pending) / sizeof(w->pending[0])))
					{
						w->pending[w->npending].ticket = t;
						w->pending[w->npending].token = list == 0 ? tok : 0;
						w->npending++;
					}
					else if (!w->poked)
					{
						w->poked = 1;
						hit = 1;
					}
				}
				else if (t == w->ticket && w->state == W_WAITING)
				{
					w->state = list == 0 ? W_GRANTED : W_WITHDRAWN;
					w->token = tok;
					hit = 1;
				}
			}
		}
		if (hit)
			pthread_cond_signal(&w->cond);
	}
	pthread_mutex_unlock(&reg_mutex);
}

static int
is_retryable(unsigned int no)
{
	/* deadlock; Galera certification failures also report 1213 */
	return no == 1213;
}

/* The connection is unusable: closed, lost, killed, or its server stopping. */
static int
is_conn_error(unsigned int no)
{
	return no == CR_SERVER_GONE_ERROR || no == CR_SERVER_LOST ||
		no == CR_CONNECTION_ERROR || no == CR_CONN_HOST_ERROR ||
		no == CR_SERVER_LOST_EXTENDED ||
		no == 1927 ||			/* ER_CONNECTION_KILLED: KILL of the connection */
		no == 1053;				/* ER_SERVER_SHUTDOWN */
}

/*
 * is_lost: the statement may or may not have run to its end - the
 * connection went away, or KILL QUERY (1317) hit the plugin's own
 * connection.  Repeating it is safe for the steps marked in has_req and
 * for the idempotent rest.
 */
static int
is_lost(unsigned int no)
{
	return is_conn_error(no) || no == 1317;
}

/* A request id for one call: random, so two calls never share one. */
static long long
new_req(void)
{
	unsigned long long r = 0;

	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t) sizeof(r))
	{
		static unsigned long long counter;

		r = ((unsigned long long) now_us() << 16) ^
			__atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED) ^ (unsigned long long) getpid();
	}
	return (long long) (r >> 1);
}

/* The mode matrix for the procedures, packed from core/ once. */
static long long packed_conflicts;
static long long packed_covers;

static void
pack_matrix(void)
{
	for (int m = 0; m < DLOCK_NMODES; m++)
	{
		packed_conflicts |= (long long) (dlock_mode_conflicts(m) & 63) << (6 * m);
		for (int w = 0; w < DLOCK_NMODES; w++)
			if (dlock_mode_covers(m, w))
				packed_covers |= 1LL << (6 * m + w);
	}
}

/*
 * run_step
 *		CALL step qid with params on a pooled connection, retrying
 *		deadlocks, and repeating it on a new connection when the connection
 *		was lost (a pooled connection killed while idle, or one killed during
 *		the step: the step may have committed, and p_retry tells it to look
 *		for what its lost attempt did).  On success wake the local waiters it
 *		decided and return 0 with *out filled (caller frees it: step_free).
 */
static int
run_step(const char *fn, const char *name, size_t len, int qid, P *p,
		 int np, Step *out, DlockErr *err)
{
	int			lost = 0;

	for (int attempt = 0;; attempt++)
	{
		Conn	   *c = conn_get(fn, lost > 0, err);
		QErr		qe;
		int			r;

		memset(out, 0, sizeof(*out));
		if (c == NULL)
			return -1;
		if (has_req[qid])
			p[np - 1] = PI(lost > 0);
		r = q_run(c, qid, p, np, cb_step, out, NULL, NULL, fn, err, &qe);
		if (r == 0 && (out->oom || !out->found))
		{
			set_err(err, DLOCK_ER_UNKNOWN, out->oom ? "%s: out of memory" :
					"%s: lock store: the step returned no result", fn);
			r = -1;
		}
		if (r != 0)
		{
			int			broken = is_conn_error(qe.no);

			/* an error inside the procedure may leave its transaction open */
			if (!broken)
				(void) mysql_rollback(c->my);
			conn_put(c, broken);
			step_free(out);
			if (is_retryable(qe.no) && attempt < MAX_DEADLOCK_RETRIES)
			{
				usleep(1000 * (attempt + 1));
				continue;
			}
			if (is_lost(qe.no) && lost < MAX_LOST_RETRIES)
			{
				lost++;
				continue;
			}
			return -1;
		}
		conn_put(c, 0);
		notify(name, len, out);
		return 0;
	}
}

#define STEP(fn, name, len, qid, out, err, ...) \
	run_step((fn), (name), (len), (qid), (P[]) {__VA_ARGS__}, \
			 (int) (sizeof((P[]) {__VA_ARGS__}) / sizeof(P)), (out), (err))

/*
 * The holder key: "k:" + the account's length, ':', the account and the
 * owner key - a key serves only the account that uses it: the same key
 * from another account names another holder -, or "s:" +
 * server/incarnation/conn.
 */
static size_t
make_holder(const DlockCaller *who, const DlockReq *req, char *buf, size_t size)
{
	int			n;

	if (req->owner)
	{
		n = snprintf(buf, size, "k:%zu:%.*s", who->account_len,
					 (int) who->account_len, who->account);
		memcpy(buf + n, req->owner, req->owner_len);
		return (size_t) n + req->owner_len;
	}
	n = snprintf(buf, size, "s:%s/%s/%llu", server_id, incarnation,
				 who->conn_id);
	return (size_t) n;
}

#define HOLDER_BUF (DLOCK_MAX_OWNER_LEN + DLOCK_MAX_ACCOUNT_LEN + 16 + 200)

/*
 * status
 *		A waiter's look at its ticket (withdraw: take it out of the queue,
 *		kill: give back a grant found instead).
 */
static int
status(const DlockReq *req, const char *holder, size_t hlen,
	   unsigned long long ticket, int withdraw, int kill, Step *s,
	   DlockErr *err)
{
	return STEP(req->fn, req->name, req->name_len, Q_STATUS, s, err,
				PS(req->name, req->name_len), PS(holder, hlen), PI(ticket),
				PI(withdraw), PI(kill), PI(packed_conflicts), PI(new_req()),
				PI(0));
}

/*
 * cancel
 *		Best effort after a failed call: no queue row of the call may stay
 *		behind (a lost attempt's neither), nor a grant it made, found by the
 *		call's request id.  What this misses the reaper withdraws (queue rows
 *		of this server without a waiting call).
 */
static void
cancel(const DlockReq *req, const char *holder, size_t hlen, long long rq)
{
	DlockErr	e2;
	Step		s;

	if (STEP(req->fn, req->name, req->name_len, Q_CANCEL, &s, &e2,
			 PS(req->name, req->name_len), PS(holder, hlen), PI(rq),
			 PI(packed_conflicts)) == 0)
		step_free(&s);
}

int
dls_acquire(const DlockCaller *who, const DlockReq *req, int try_only,
			long long *token, DlockErr *err)
{
	char		holder[HOLDER_BUF];
	size_t		hlen = make_holder(who, req, holder, sizeof(holder));
	Step		a;
	Waiter		w;
	long long	rq = new_req();
	long long	start = now_us();
	long long	deadline = req->timeout_us < 0 ? -1 : start + req->timeout_us;
	long long	next_recheck;
	long long	expiry_at = -1;
	int			head;
	int			rc = -1;
	int			look = 0;
	char		nb[80];

	*token = 0;
	memset(&w, 0, sizeof(w));
	w.name = req->name;
	w.name_len = req->name_len;
	w.state = W_WAITING;
	pthread_cond_init(&w.cond, &cond_attr);
	if (!try_only)
		reg_add(&w);

	if (STEP(req->fn, req->name, req->name_len, Q_ACQUIRE, &a, err,
			 PS(req->name, req->name_len), PS(holder, hlen),
			 PS(who->account, who->account_len),
			 PS(who->role, who->role_len),
			 PI((who->access & DLOCK_ACCESS_ADMIN) == 0),
			 req->owner ? PS(req->owner, req->owner_len) : PN,
			 PS(server_id, strlen(server_id)),
			 PS(incarnation, strlen(incarnation)),
			 PI(who->conn_id), PI(req->mode), PIN(req->ttl_us),
			 PIN(req->timeout_us), PI(try_only), PI(packed_conflicts),
			 PI(packed_covers), PI(rq), PI(0)) != 0)
	{
		cancel(req, holder, hlen, rq);
		goto out;
	}
	if (a.state == ST_OUTSIDE_GRANTS)
	{
		set_err(err, DLOCK_ER_ACCESS,
				"%s: permission denied for lock \"%s\": outside the prefixes "
				"granted to %.200s%s%.100s [42501]", req->fn,
				show_name(req->name, req->name_len, nb, sizeof(nb)),
				who->account, who->role_len ? " and its role " : "",
				who->role);
		goto out;
	}
	if (a.state == ST_QUOTA)
	{
		set_err(err, DLOCK_ER_QUOTA,
				"%s: lock quota exceeded for %.200s (%s) [53400]", req->fn,
				who->account, a.expiry ? a.expiry : "?");
		goto out;
	}
	if (a.state == ST_STRONGER)
	{
		set_err(err, DLOCK_ER_UNKNOWN,
				"%s: lock \"%s\" is already held in a weaker mode; "
				"release it before asking for %s [DL003]", req->fn,
				show_name(req->name, req->name_len, nb, sizeof(nb)),
				req->mode == DLOCK_MODE_EX ? "exclusive" : "shared");
		goto out;
	}
	if (a.state != ST_WAITING)
	{
		*token = a.state == ST_GRANTED ? a.token : 0;
		rc = 0;
		goto out;
	}

	/*
	 * Queued: wait for a wake-up, a timeout, a kill or the re-check.  Steps
	 * that decided about our ticket before we knew it left it pending.
	 */
	pthread_mutex_lock(&reg_mutex);
	w.ticket = a.ticket;
	for (int i = 0; i < w.npending; i++)
		if (w.pending[i].ticket == w.ticket)
		{
			w.state = w.pending[i].token ? W_GRANTED : W_WITHDRAWN;
			w.token = w.pending[i].token;
		}
	w.npending = 0;
	pthread_mutex_unlock(&reg_mutex);
	head = a.head;
	if (head && a.next_expiry_us >= 0)
		expiry_at = now_us() + a.next_expiry_us;
	next_recheck = now_us() + DLOCK_RECHECK_MS * 1000LL;

	for (;;)
	{
		int			state;
		long long	now;
		int			withdraw = 0,
					kill = 0;
		Step		s;

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
		if (state == W_WITHDRAWN)
			withdraw = 0;		/* someone took the request out; confirm */
		else if (who->killed && who->killed(who->killed_arg))
			withdraw = kill = 1;
		else if (deadline >= 0 && now >= deadline)
			withdraw = 1;
		else if (!(look || now >= next_recheck ||
				   (head && expiry_at >= 0 && now >= expiry_at)))
			continue;

		look = 0;
		if (status(req, holder, hlen, a.ticket, withdraw, kill, &s, err) != 0)
		{
			cancel(req, holder, hlen, rq);
			break;
		}
		if (s.state == ST_GRANTED)
		{
			*token = s.token;
			rc = 0;
			step_free(&s);
			break;
		}
		if (s.state == ST_WITHDRAWN)
		{
			step_free(&s);
			if (withdraw)
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
		step_free(&s);
	}

out:
	step_free(&a);
	if (!try_only)
		reg_remove(&w);
	pthread_cond_destroy(&w.cond);
	return rc;
}

/*
 * dls_give_back
 *		Undo one grant of token that the caller will never learn of (its
 *		statement was killed as the grant arrived): one level of a re-entrant
 *		hold, or the whole grant, handed on to the next in line.
 */
int
dls_give_back(const DlockCaller *who, const DlockReq *req, long long token,
			  DlockErr *err)
{
	char		holder[HOLDER_BUF];
	size_t		hlen = make_holder(who, req, holder, sizeof(holder));
	Step		s;

	if (status(req, holder, hlen, (unsigned long long) token, 1, 1, &s, err) != 0)
		return -1;
	step_free(&s);
	return 0;
}

/* ------------------------------------------------------------------------
 * Release, renew, release_all, holder
 * ------------------------------------------------------------------------ */
int
dls_release(const DlockCaller *who, const DlockReq *req, int *released,
			DlockErr *err)
{
	char		holder[HOLDER_BUF];
	size_t		hlen = make_holder(who, req, holder, sizeof(holder));
	Step		s;
	char		nb[80];

	if (STEP(req->fn, req->name, req->name_len, Q_RELEASE, &s, err,
			 PS(req->name, req->name_len), PS(holder, hlen),
			 PI(packed_conflicts), PI(new_req()), PI(0)) != 0)
		return -1;
	*released = s.state == ST_GRANTED;
	step_free(&s);
	if (!*released)
	{
		set_err(err, DLOCK_ER_UNKNOWN,
				"%s: lock \"%s\" is not held by this %s", req->fn,
				show_name(req->name, req->name_len, nb, sizeof(nb)),
				req->owner ? "owner" : "session");
		err->warning = 1;
	}
	return 0;
}

int
dls_renew(const DlockCaller *who, const DlockReq *req, char *expiry,
		  size_t expiry_size, int *no_lease, DlockErr *err)
{
	char		holder[HOLDER_BUF];
	size_t		hlen = make_holder(who, req, holder, sizeof(holder));
	Step		s;
	char		nb[80];
	int			rc = -1;

	if (STEP(req->fn, req->name, req->name_len, Q_RENEW, &s, err,
			 PS(req->name, req->name_len), PS(holder, hlen),
			 PIN(req->ttl_us)) != 0)
		return -1;
	if (s.state != ST_GRANTED)
	{
		set_err(err, DLOCK_ER_UNKNOWN,
				"%s: lock \"%s\" is not held by this %s: the lease was lost "
				"[DL001]", req->fn,
				show_name(req->name, req->name_len, nb, sizeof(nb)),
				req->owner ? "owner" : "session");
		goto out;
	}
	*no_lease = s.expiry == NULL;
	if (!*no_lease)
		snprintf(expiry, expiry_size, "%s", s.expiry);
	rc = 0;
out:
	step_free(&s);
	return rc;
}

/* Run a scan statement on a pooled connection, outside any transaction. */
static int
scan(const char *fn, int qid, const P *p, int np, RowCb cb, void *arg,
	 DlockErr *err)
{
	for (int lost = 0;; lost++)
	{
		Conn	   *c = conn_get(fn, lost > 0, err);
		QErr		qe;
		int			r;

		if (c == NULL)
			return -1;
		r = q_run(c, qid, p, np, cb, arg, NULL, NULL, fn, err, &qe);
		conn_put(c, r != 0 && is_conn_error(qe.no));
		/* a read: repeat it on a new connection if this one was lost */
		if (r != 0 && is_lost(qe.no) && lost < MAX_LOST_RETRIES)
			continue;
		return r;
	}
}

int
dls_act_as_key_owner(DlockCaller *who, const DlockReq *req, DlockErr *err)
{
	List		accounts = {0};
	P			p[2] = {PS(req->owner, req->owner_len),
	PS(req->owner, req->owner_len)};
	int			rc = -1;

	if (req->owner == NULL || !(who->access & DLOCK_ACCESS_ADMIN))
		return 0;
	if (scan(req->fn, Q_KEY_ACCOUNTS, p, 2, cb_names, &accounts, err) != 0)
		goto out;
	if (accounts.oom)
	{
		set_err(err, DLOCK_ER_UNKNOWN, "%s: out of memory", req->fn);
		goto out;
	}
	if (accounts.n > 1)
	{
		set_err(err, DLOCK_ER_UNKNOWN,
				"%s: the owner key is used by more than one account; "
				"dlock_admin cannot tell whose to act for", req->fn);
		goto out;
	}
	if (accounts.n == 1 && accounts.items[0].name_len < sizeof(who->account))
	{
		memcpy(who->account, accounts.items[0].name, accounts.items[0].name_len);
		who->account[accounts.items[0].name_len] = '\0';
		who->account_len = accounts.items[0].name_len;
	}
	rc = 0;
out:
	lst_free(&accounts);
	return rc;
}

int
dls_release_all(const DlockCaller *who, const DlockReq *req, long long *count,
				DlockErr *err)
{
	char		holder[HOLDER_BUF];
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
		Item	   *it = &names.items[i];
		Step		s;

		if (STEP(req->fn, it->name, it->name_len, Q_RELEASE_ALL, &s, err,
				 PS(it->name, it->name_len), PS(holder, hlen),
				 PI(packed_conflicts), PI(new_req()), PI(0)) != 0)
			goto out;
		*count += s.count;
		step_free(&s);
	}
	rc = 0;
out:
	lst_free(&names);
	return rc;
}

int
dls_holder(const DlockCaller *who, const DlockReq *req, char **out,
		   size_t *out_len, DlockErr *err)
{
	StrRow		sr = {0};
	P			p[4] = {PS(who->account, who->account_len),
		PI((who->access & DLOCK_ACCESS_ADMIN) != 0),
		PI((who->access & DLOCK_ACCESS_MONITOR) != 0),
	PS(req->name, req->name_len)};

	*out = NULL;
	*out_len = 0;
	if (scan(req->fn, Q_HOLDER, p, 4, cb_str_row, &sr, err) != 0)
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

int
dls_grant(const char *fn, const char *grantee, size_t grantee_len,
		  const char *prefix, size_t prefix_len, int revoke, int *changed,
		  DlockErr *err)
{
	StrRow		sr = {0};
	P			p[3] = {PS(grantee, grantee_len), PS(prefix, prefix_len),
	PI(revoke)};

	*changed = 0;
	if (scan(fn, Q_GRANT, p, 3, cb_str_row, &sr, err) != 0)
	{
		free(sr.s);
		return -1;
	}
	if (sr.found && !sr.isnull && sr.s)
		*changed = atoi(sr.s) > 0;
	free(sr.s);
	return 0;
}

int
dls_set_quota(const char *fn, const char *grantee, size_t grantee_len,
			  const long long limits[4], DlockErr *err)
{
	StrRow		sr = {0};
	P			p[5] = {PS(grantee, grantee_len), PIN(limits[0]),
		PIN(limits[1]), PIN(limits[2]), PIN(limits[3])};
	int			r = scan(fn, Q_SET_QUOTA, p, 5, cb_str_row, &sr, err);

	free(sr.s);
	return r;
}

/* ------------------------------------------------------------------------
 * Reaper
 * ------------------------------------------------------------------------ */
enum
{
	REAP_EXPIRE = 0, REAP_HOLD = 1, REAP_REQUEST = 2
};

/* One reaper step per item: expire the name's leases, end kind's item. */
static int
reap_items(const char *fn, const List *items, int kind, long long *count,
		   DlockErr *err)
{
	for (int i = 0; i < items->n; i++)
	{
		const Item *it = &items->items[i];
		Step		s;

		if (STEP(fn, it->name, it->name_len, Q_REAP, &s, err,
				 PS(it->name, it->name_len), PI(kind), PI(it->id),
				 PI(packed_conflicts)) != 0)
			return -1;
		*count += s.count;
		step_free(&s);
	}
	return 0;
}

int
dls_reap(const DlockCaller *who, long long *count, DlockErr *err)
{
	const char *fn = "dlock_reap";
	List		expired = {0},
				dead_held = {0},
				dead_queue = {0},
				mine = {0},
				stray = {0};
	P			p[2] = {PS(server_id, strlen(server_id)),
	PS(incarnation, strlen(incarnation))};
	int			rc = -1;

	(void) who;
	*count = 0;
	if (scan(fn, Q_EXPIRED_NAMES, NULL, 0, cb_names, &expired, err) != 0 ||
		scan(fn, Q_DEAD_HELD, p, 2, cb_id_names, &dead_held, err) != 0 ||
		scan(fn, Q_DEAD_QUEUE, p, 2, cb_id_names, &dead_queue, err) != 0 ||
		scan(fn, Q_MY_QUEUE, p, 2, cb_id_names, &mine, err) != 0)
		goto out;

	/*
	 * Requests queued through this server whose call no longer waits here
	 * (it failed before it could withdraw them, or a lost attempt's
	 * duplicate): nobody would ever take their grant.
	 */
	pthread_mutex_lock(&reg_mutex);
	for (int i = 0; i < mine.n; i++)
	{
		int			waited = 0;
		Item	   *it;

		for (Waiter *w = reg_head; w && !waited; w = w->next)
			waited = w->ticket == mine.items[i].id;
		if (!waited && (it = lst_push(&stray)) != NULL)
		{
			it->id = mine.items[i].id;
			it->name = mine.items[i].name;
			it->name_len = mine.items[i].name_len;
			mine.items[i].name = NULL;
		}
	}
	pthread_mutex_unlock(&reg_mutex);

	if (expired.oom || dead_held.oom || dead_queue.oom || mine.oom || stray.oom)
	{
		set_err(err, DLOCK_ER_UNKNOWN, "%s: out of memory", fn);
		goto out;
	}
	if (reap_items(fn, &expired, REAP_EXPIRE, count, err) != 0 ||
		reap_items(fn, &dead_held, REAP_HOLD, count, err) != 0 ||
		reap_items(fn, &dead_queue, REAP_REQUEST, count, err) != 0 ||
		reap_items(fn, &stray, REAP_REQUEST, count, err) != 0)
		goto out;

	/* names rows without holders or waiters are only mutexes: drop them */
	{
		Step		s;

		if (run_step(fn, "", 0, Q_FORGET_IDLE, NULL, 0, &s, err) != 0)
			goto out;
		step_free(&s);
	}
	rc = 0;
out:
	lst_free(&expired);
	lst_free(&dead_held);
	lst_free(&dead_queue);
	lst_free(&mine);
	lst_free(&stray);
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
	if (mysql_library_init(0, NULL, NULL) != 0)
	{
		init_failed = 1;
		snprintf(init_errmsg, sizeof(init_errmsg),
				 "cannot initialise the client library");
		return;
	}
	pack_matrix();
	pthread_condattr_init(&cond_attr);
	pthread_condattr_setclock(&cond_attr, CLOCK_MONOTONIC);
	pthread_cond_init(&pool_cond, &cond_attr);
	init_incarnation();
	if (getenv("DLOCK_MAX_STORE_CONNS"))
	{
		long		n = strtol(getenv("DLOCK_MAX_STORE_CONNS"), NULL, 10);

		if (n >= 1 && n <= 10000)
			max_store_conns = (int) n;
	}
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
