/* SPDX-License-Identifier: PostgreSQL */
/*
 * db_my.c
 *		The MariaDB / MySQL backend of the dlock command (libmariadb).
 *
 * Every statement with a user's value is a prepared statement
 * (mysql_stmt_*) with bound parameters.
 *
 * The DSN is key=value words as in libpq (a value in single quotes may hold
 * spaces; \' and \\ inside them): host, port, user, password, database
 * (or dbname), socket, option_file (read its [client] group),
 * connect_timeout.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>

#include <mysql.h>
#include <errmsg.h>

#include "dlock.h"

typedef struct MyDb
{
	Db			base;
	MYSQL	   *conn;
	DbTarget	target;
	char	   *dsn;			/* copy for target.dsn */
	char		err[1024];
	unsigned int errnum;		/* of err */
} MyDb;

typedef struct MyDsn
{
	char	   *host,
			   *user,
			   *password,
			   *database,
			   *socket,
			   *option_file;
	unsigned int port;
	unsigned int connect_timeout;
} MyDsn;

static void
free_dsn(MyDsn *m)
{
	free(m->host);
	free(m->user);
	free(m->password);
	free(m->database);
	free(m->socket);
	free(m->option_file);
}

/*
 * parse_dsn
 *		"host=h port=3306 user=app password='a b'" into *m; false with a
 *		message in err for a word that is not key=value or an unknown key.
 */
static bool
parse_dsn(const char *s, MyDsn *m, char *err, size_t errlen)
{
	memset(m, 0, sizeof(*m));
	while (s && *s)
	{
		char		key[32];
		size_t		klen = 0;
		char	   *val;
		size_t		vlen = 0;
		char	  **slot = NULL;

		while (*s == ' ' || *s == '\t' || *s == '\n')
			s++;
		if (*s == '\0')
			break;
		while (*s && *s != '=' && *s != ' ' && *s != '\t' && klen < sizeof(key) - 1)
			key[klen++] = *s++;
		key[klen] = '\0';
		while (*s == ' ' || *s == '\t')
			s++;
		if (*s != '=')
		{
			snprintf(err, errlen, "invalid MariaDB DSN: missing \"=\" after \"%s\"", key);
			goto fail;
		}
		s++;
		while (*s == ' ' || *s == '\t')
			s++;
		val = malloc(strlen(s) + 1);
		if (val == NULL)
		{
			snprintf(err, errlen, "out of memory");
			goto fail;
		}
		if (*s == '\'')
		{
			s++;
			while (*s && *s != '\'')
			{
				if (*s == '\\' && s[1])
					s++;
				val[vlen++] = *s++;
			}
			if (*s != '\'')
			{
				free(val);
				snprintf(err, errlen, "invalid MariaDB DSN: unterminated quote after \"%s=\"", key);
				goto fail;
			}
			s++;
		}
		else
		{
			while (*s && *s != ' ' && *s != '\t' && *s != '\n')
			{
				if (*s == '\\' && s[1])
					s++;
				val[vlen++] = *s++;
			}
		}
		val[vlen] = '\0';

		if (strcmp(key, "host") == 0)
			slot = &m->host;
		else if (strcmp(key, "user") == 0)
			slot = &m->user;
		else if (strcmp(key, "password") == 0)
			slot = &m->password;
		else if (strcmp(key, "database") == 0 || strcmp(key, "dbname") == 0)
			slot = &m->database;
		else if (strcmp(key, "socket") == 0)
			slot = &m->socket;
		else if (strcmp(key, "option_file") == 0)
			slot = &m->option_file;
		else if (strcmp(key, "port") == 0 || strcmp(key, "connect_timeout") == 0)
		{
			char	   *end;
			long		v = strtol(val, &end, 10);

			if (*val == '\0' || *end != '\0' || v < 0 || v > 65535)
			{
				snprintf(err, errlen, "invalid MariaDB DSN: bad %s \"%s\"", key, val);
				free(val);
				goto fail;
			}
			if (key[0] == 'p')
				m->port = (unsigned int) v;
			else
				m->connect_timeout = (unsigned int) v;
			free(val);
			continue;
		}
		else
		{
			snprintf(err, errlen, "invalid MariaDB DSN: unknown key \"%s\"", key);
			free(val);
			goto fail;
		}
		free(*slot);
		*slot = val;
	}
	return true;

fail:
	free_dsn(m);
	return false;
}

static void
set_err(MyDb *d, unsigned int no, const char *msg)
{
	snprintf(d->err, sizeof(d->err), "%s (%u)", msg, no);
	d->errnum = no;
}

/*
 * my_hint
 *		Missing rights: the role to grant (to the account as CURRENT_USER()
 *		names it).  A missing function, table or schema: the plugin is not
 *		installed on this server.
 */
static void
my_hint(Db *db, char *buf, size_t len)
{
	MyDb	   *d = (MyDb *) db;

	buf[0] = '\0';
	if (d->errnum == 1370 || d->errnum == 1142 || d->errnum == 1143)
	{
		char		acct[300] = "";
		MYSQL_RES  *res;
		MYSQL_ROW	row;
		char	   *at;

		if (mysql_query(d->conn, "SELECT CURRENT_USER()") == 0 &&
			(res = mysql_store_result(d->conn)) != NULL)
		{
			if ((row = mysql_fetch_row(res)) != NULL && row[0])
				snprintf(acct, sizeof(acct), "%s", row[0]);
			mysql_free_result(res);
		}
		if ((at = strrchr(acct, '@')) != NULL)
		{
			*at = '\0';
			snprintf(buf, len, "the account needs the role dlock_user: GRANT dlock_user TO"
					 " '%s'@'%s'; SET DEFAULT ROLE dlock_user FOR '%s'@'%s'",
					 acct, at + 1, acct, at + 1);
		}
		else
			snprintf(buf, len, "the account needs the role dlock_user: GRANT dlock_user"
					 " TO the account; SET DEFAULT ROLE dlock_user FOR it");
	}
	else if (d->errnum == 1305 || d->errnum == 1146 || d->errnum == 1049 ||
			 d->errnum == 1123)
		snprintf(buf, len, "the dlock plugin is not installed on this server (or not loaded):"
				 " install it with sql/mysql/install.sql (dlock-mysql-install from the"
				 " mariadb-plugin-dlock package)");
}

static MYSQL *
my_open(const DbTarget *t, int timeout_s, char *err, size_t errlen)
{
	MyDsn		m;
	MYSQL	   *c;

	if (!parse_dsn(t->dsn, &m, err, errlen))
		return NULL;
	c = mysql_init(NULL);
	if (c == NULL)
	{
		snprintf(err, errlen, "out of memory");
		free_dsn(&m);
		return NULL;
	}
	if (m.option_file)
	{
		mysql_optionsv(c, MYSQL_READ_DEFAULT_FILE, m.option_file);
		mysql_optionsv(c, MYSQL_READ_DEFAULT_GROUP, "client");
	}
	mysql_optionsv(c, MYSQL_SET_CHARSET_NAME, "utf8mb4");
	if (m.connect_timeout > 0)
		mysql_optionsv(c, MYSQL_OPT_CONNECT_TIMEOUT, &m.connect_timeout);
	if (timeout_s > 0)
	{
		/* a renewal must not hang on a dead link past its deadline */
		unsigned int to = (unsigned int) timeout_s;

		mysql_optionsv(c, MYSQL_OPT_CONNECT_TIMEOUT, &to);
		mysql_optionsv(c, MYSQL_OPT_READ_TIMEOUT, &to);
		mysql_optionsv(c, MYSQL_OPT_WRITE_TIMEOUT, &to);
	}
	if (mysql_real_connect(c, m.host, m.user, m.password, m.database, m.port,
						   m.socket, 0) == NULL)
	{
		snprintf(err, errlen, "%s (%u)", mysql_error(c), mysql_errno(c));
		mysql_close(c);
		c = NULL;
	}
	else if (mysql_get_socket(c) >= 0)
		fcntl(mysql_get_socket(c), F_SETFD, FD_CLOEXEC);	/* not for the command */
	free_dsn(&m);
	return c;
}

static Db *
my_connect(const DbTarget *t, int timeout_s, char *err, size_t errlen)
{
	MyDb	   *d = calloc(1, sizeof(*d));

	if (d == NULL || (d->dsn = strdup(t->dsn ? t->dsn : "")) == NULL)
	{
		free(d);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	d->base.ops = &db_my_ops;
	d->target.kind = DB_MY;
	d->target.dsn = d->dsn;
	d->conn = my_open(t, timeout_s, err, errlen);
	if (d->conn == NULL)
	{
		free(d->dsn);
		free(d);
		return NULL;
	}
	return &d->base;
}

static void
my_close(Db *db)
{
	MyDb	   *d = (MyDb *) db;

	if (d == NULL)
		return;
	mysql_close(d->conn);
	free(d->dsn);
	free(d);
}

static const char *
my_error(Db *db)
{
	return ((MyDb *) db)->err;
}

static DbStatus
classify(MyDb *d, unsigned int no, const char *msg)
{
	size_t		len = strlen(msg);

	set_err(d, no, msg);
	if (no == 1105 && len >= 7 && strcmp(msg + len - 7, "[DL001]") == 0)
		return DB_LOST;
	if (no == 1317)				/* ER_QUERY_INTERRUPTED */
		return DB_CANCELED;
	/* client errors (CR_*), server shutting down, connection killed */
	if ((no >= 2000 && no < 3000) || no == 1053 || no == 1927 || no == 4031)
		return DB_CONN;
	return DB_ERROR;
}

/*
 * my_stmt
 *		Prepares, binds and executes one statement and fetches its one row
 *		into 'result' (when given).  DB_NULL when there was no row.
 */
static DbStatus
my_stmt(MyDb *d, const char *sql, MYSQL_BIND *params, MYSQL_BIND *result)
{
	MYSQL_STMT *st = mysql_stmt_init(d->conn);
	DbStatus	rc = DB_OK;
	int			f;

	if (st == NULL)
		return classify(d, mysql_errno(d->conn), mysql_error(d->conn));
	if (mysql_stmt_prepare(st, sql, strlen(sql)) != 0 ||
		(params && mysql_stmt_bind_param(st, params) != 0) ||
		mysql_stmt_execute(st) != 0 ||
		(result && mysql_stmt_bind_result(st, result) != 0))
	{
		rc = classify(d, mysql_stmt_errno(st), mysql_stmt_error(st));
		mysql_stmt_close(st);
		return rc;
	}
	if (result)
	{
		f = mysql_stmt_fetch(st);
		if (f == MYSQL_NO_DATA)
			rc = DB_NULL;
		else if (f == 1)
		{
			/* an error raised at row time (the UDFs') may be the connection's */
			if (mysql_stmt_errno(st) != 0)
				rc = classify(d, mysql_stmt_errno(st), mysql_stmt_error(st));
			else
				rc = classify(d, mysql_errno(d->conn), mysql_error(d->conn));
		}
		/* MYSQL_DATA_TRUNCATED: a value longer than our buffer; cut */
	}
	mysql_stmt_free_result(st);
	mysql_stmt_close(st);
	return rc;
}

static void
bind_str(MYSQL_BIND *b, const char *s)
{
	memset(b, 0, sizeof(*b));
	if (s == NULL)
	{
		b->buffer_type = MYSQL_TYPE_NULL;
		return;
	}
	b->buffer_type = MYSQL_TYPE_STRING;
	b->buffer = (void *) s;
	b->buffer_length = strlen(s);
}

static void
bind_double(MYSQL_BIND *b, double *v)
{
	memset(b, 0, sizeof(*b));
	if (v == NULL)
	{
		b->buffer_type = MYSQL_TYPE_NULL;
		return;
	}
	b->buffer_type = MYSQL_TYPE_DOUBLE;
	b->buffer = v;
}

static void
bind_ll_result(MYSQL_BIND *b, long long *v, my_bool *is_null)
{
	memset(b, 0, sizeof(*b));
	b->buffer_type = MYSQL_TYPE_LONGLONG;
	b->buffer = v;
	b->is_null = is_null;
}

static DbStatus
token_stmt(MyDb *d, const char *sql, MYSQL_BIND *p, long long *token)
{
	MYSQL_BIND	r;
	long long	v = 0;
	my_bool		isnull = 0;
	DbStatus	st;

	bind_ll_result(&r, &v, &isnull);
	st = my_stmt(d, sql, p, &r);
	if (st == DB_OK && isnull)
		st = DB_NULL;
	if (st == DB_OK)
		*token = v;
	return st;
}

static void
bind_ll(MYSQL_BIND *b, long long *v)
{
	memset(b, 0, sizeof(*b));
	b->buffer_type = MYSQL_TYPE_LONGLONG;
	b->buffer = v;
}

/*
 * my_acquire
 *		One call of a wait, its place kept (keep_place 1): dlock_acquire,
 *		dlock_semaphore or dlock_campaign.
 */
static DbStatus
my_acquire(Db *db, const RunOpts *o, double timeout, const char *owner,
		   long long *token)
{
	MYSQL_BIND	p[6];
	double		ttl = o->ttl;
	long long	cap = o->capacity,
				permits = o->permits;

	bind_str(&p[0], o->name);
	if (o->kind == RUN_SEMAPHORE)
	{
		bind_ll(&p[1], &cap);
		bind_ll(&p[2], &permits);
		bind_double(&p[3], &timeout);
		bind_double(&p[4], &ttl);
		bind_str(&p[5], owner);
		return token_stmt((MyDb *) db, "SELECT dlock_semaphore(?, ?, ?, ?, ?, ?, 1)", p, token);
	}
	if (o->kind == RUN_CAMPAIGN)
	{
		bind_str(&p[1], o->value);
		bind_double(&p[2], &timeout);
		bind_double(&p[3], &ttl);
		bind_str(&p[4], owner);
		return token_stmt((MyDb *) db, "SELECT dlock_campaign(?, ?, ?, ?, ?, 1)", p, token);
	}
	bind_double(&p[1], &timeout);
	bind_double(&p[2], &ttl);
	bind_str(&p[3], o->mode);
	bind_str(&p[4], owner);
	return token_stmt((MyDb *) db, "SELECT dlock_acquire(?, ?, ?, ?, ?, 1)", p, token);
}

/*
 * my_try_acquire
 *		Never waits.  An election has no try: a campaign of 1 ms that keeps
 *		no place.
 */
static DbStatus
my_try_acquire(Db *db, const RunOpts *o, const char *owner, long long *token)
{
	MYSQL_BIND	p[5];
	double		ttl = o->ttl;
	double		ms = 0.001;
	long long	cap = o->capacity,
				permits = o->permits;

	bind_str(&p[0], o->name);
	if (o->kind == RUN_SEMAPHORE)
	{
		bind_ll(&p[1], &cap);
		bind_ll(&p[2], &permits);
		bind_double(&p[3], &ttl);
		bind_str(&p[4], owner);
		return token_stmt((MyDb *) db, "SELECT dlock_try_semaphore(?, ?, ?, ?, ?)", p, token);
	}
	if (o->kind == RUN_CAMPAIGN)
	{
		bind_str(&p[1], o->value);
		bind_double(&p[2], &ms);
		bind_double(&p[3], &ttl);
		bind_str(&p[4], owner);
		return token_stmt((MyDb *) db, "SELECT dlock_campaign(?, ?, ?, ?, ?)", p, token);
	}
	bind_double(&p[1], &ttl);
	bind_str(&p[2], o->mode);
	bind_str(&p[3], owner);
	return token_stmt((MyDb *) db, "SELECT dlock_try_acquire(?, ?, ?, ?)", p, token);
}

static DbStatus
my_renew(Db *db, const char *name, double ttl, const char *owner)
{
	MYSQL_BIND	p[3],
				r;
	char		buf[64];
	unsigned long len = 0;
	my_bool		isnull = 0;

	bind_str(&p[0], name);
	bind_double(&p[1], &ttl);
	bind_str(&p[2], owner);
	memset(&r, 0, sizeof(r));
	r.buffer_type = MYSQL_TYPE_STRING;
	r.buffer = buf;
	r.buffer_length = sizeof(buf);
	r.length = &len;
	r.is_null = &isnull;
	return my_stmt((MyDb *) db, "SELECT dlock_renew(?, ?, ?)", p, &r);
}

static DbStatus
my_release(Db *db, const char *name, const char *owner)
{
	MYSQL_BIND	p[2];
	long long	v = 0;
	DbStatus	st;

	bind_str(&p[0], name);
	bind_str(&p[1], owner);
	st = token_stmt((MyDb *) db, "SELECT dlock_release(?, ?)", p, &v);
	if (st == DB_OK && v != 1)
		st = DB_NULL;
	return st;
}

static DbStatus
my_release_all(Db *db, const char *owner)
{
	MYSQL_BIND	p[1];
	long long	v = 0;

	bind_str(&p[0], owner);
	return token_stmt((MyDb *) db, "SELECT dlock_release_all(?)", p, &v);
}

static DbStatus
my_leader(Db *db, const char *name, char **value)
{
	MYSQL_BIND	p[1],
				r;
	char		buf[4096];
	unsigned long len = 0;
	my_bool		isnull = 0;
	DbStatus	st;

	bind_str(&p[0], name);
	memset(&r, 0, sizeof(r));
	r.buffer_type = MYSQL_TYPE_STRING;
	r.buffer = buf;
	r.buffer_length = sizeof(buf) - 1;
	r.length = &len;
	r.is_null = &isnull;
	st = my_stmt((MyDb *) db, "SELECT dlock_leader(?)", p, &r);
	if (st == DB_OK && isnull)
		st = DB_NULL;
	if (st == DB_OK)
	{
		if (len > sizeof(buf) - 1)
			len = sizeof(buf) - 1;
		buf[len] = '\0';
		*value = strdup(buf);
	}
	return st;
}

/*
 * my_list
 *		dlock.locks as text.  The prefix is compared here, byte for byte: in
 *		SQL the view's collation would fold case and pad spaces.  No user
 *		value goes into the statement.
 */
static DbStatus
my_list(Db *db, const char *prefix, LsTable *out)
{
	MyDb	   *d = (MyDb *) db;
	MYSQL_RES  *res;
	MYSQL_ROW	row;
	size_t		plen = prefix ? strlen(prefix) : 0;
	int			cap = 16;

	/* times as PostgreSQL's: UTC, with the zone; the connection is ours */
	if (mysql_query(d->conn, "SET time_zone = '+00:00'") != 0 ||
		mysql_query(d->conn,
					"SELECT name, mode, IF(granted, 'yes', 'no'), IF(implied, 'yes', 'no'),"
					" position, owner, conn_id, token, permits, capacity,"
					" CONCAT(DATE_FORMAT(expires_at, '%Y-%m-%d %H:%i:%s.%f'), '+00'), value"
					" FROM dlock.locks"
					" ORDER BY name, granted DESC, position, token") != 0 ||
		(res = mysql_store_result(d->conn)) == NULL)
		return classify(d, mysql_errno(d->conn), mysql_error(d->conn));
	out->nrows = 0;
	out->cells = calloc((size_t) cap * LS_COLUMNS, sizeof(char *));
	while ((row = mysql_fetch_row(res)) != NULL)
	{
		unsigned long *lens = mysql_fetch_lengths(res);

		if (plen && (row[0] == NULL || lens[0] < plen ||
					 memcmp(row[0], prefix, plen) != 0))
			continue;
		if (out->nrows == cap)
		{
			cap *= 2;
			out->cells = realloc(out->cells, (size_t) cap * LS_COLUMNS * sizeof(char *));
		}
		for (int j = 0; j < LS_COLUMNS; j++)
			out->cells[out->nrows * LS_COLUMNS + j] = row[j] ? strdup(row[j]) : NULL;
		out->nrows++;
	}
	mysql_free_result(res);
	return DB_OK;
}

const DbOps db_my_ops = {
	.connect = my_connect,
	.close = my_close,
	.error = my_error,
	.hint = my_hint,
	.acquire = my_acquire,
	.try_acquire = my_try_acquire,
	.renew = my_renew,
	.release = my_release,
	.release_all = my_release_all,
	.leader = my_leader,
	.list = my_list,
	.pid_column = "conn_id",
};
