/* SPDX-License-Identifier: PostgreSQL */
/*
 * db_pg.c
 *		The PostgreSQL backend of the dlock command (libpq).
 *
 * Every statement goes through PQexecParams with the user's values as
 * parameters.  Durations are passed as seconds and turned into intervals
 * by make_interval on the server.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>

#include <libpq-fe.h>

#include "dlock.h"

typedef struct PgDb
{
	Db			base;
	PGconn	   *conn;
	char		err[1024];
	char		state[6];		/* SQLSTATE of err, "" if none */
} PgDb;

static void
pg_quiet(void *arg, const char *message)
{
	/* the command prints its own words for what a WARNING would say */
	(void) arg;
	(void) message;
}

static void
set_err(PgDb *d, const char *msg)
{
	size_t		n;

	snprintf(d->err, sizeof(d->err), "%s", msg ? msg : "unknown error");
	d->state[0] = '\0';
	/* libpq's later lines guess at causes; the first says what happened */
	n = strcspn(d->err, "\n");
	d->err[n] = '\0';
	while (n > 0 && (d->err[n - 1] == '\n' || d->err[n - 1] == ' '))
		d->err[--n] = '\0';
}

static Db *
pg_connect(const DbTarget *t, int timeout_s, char *err, size_t errlen)
{
	const char *keys[8];
	const char *vals[8];
	char		ct[16],
				tut[16];
	int			n = 0;
	PgDb	   *d;

	/* dbname first: its expansion is overridden by what follows */
	keys[n] = "dbname";
	vals[n++] = t->dsn ? t->dsn : "";
	keys[n] = "fallback_application_name";
	vals[n++] = "dlock";
	if (timeout_s > 0)
	{
		/* a renewal must not hang on a dead link past its deadline */
		snprintf(ct, sizeof(ct), "%d", timeout_s < 2 ? 2 : timeout_s);
		snprintf(tut, sizeof(tut), "%d", timeout_s * 1000);
		keys[n] = "connect_timeout";
		vals[n++] = ct;
		keys[n] = "tcp_user_timeout";
		vals[n++] = tut;
	}
	keys[n] = NULL;
	vals[n] = NULL;

	d = calloc(1, sizeof(*d));
	if (d == NULL)
	{
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	d->base.ops = &db_pg_ops;
	d->conn = PQconnectdbParams(keys, vals, 1);
	if (d->conn == NULL || PQstatus(d->conn) != CONNECTION_OK)
	{
		set_err(d, d->conn ? PQerrorMessage(d->conn) : "out of memory");
		snprintf(err, errlen, "%s", d->err);
		PQfinish(d->conn);
		free(d);
		return NULL;
	}
	PQsetNoticeProcessor(d->conn, pg_quiet, NULL);
	/* the command must not inherit the connection */
	if (PQsocket(d->conn) >= 0)
		fcntl(PQsocket(d->conn), F_SETFD, FD_CLOEXEC);
	return &d->base;
}

static void
pg_close(Db *db)
{
	PgDb	   *d = (PgDb *) db;

	if (d == NULL)
		return;
	PQfinish(d->conn);
	free(d);
}

static const char *
pg_error(Db *db)
{
	return ((PgDb *) db)->err;
}

/*
 * pg_hint
 *		Missing rights: the role to grant.  A missing function or relation:
 *		the extension is not in this database (it lives in the one
 *		dlock.database names), is older than this command, or the library
 *		is not loaded at all.  Asks the server with statements of its own,
 *		so err stays the failed call's.
 */
static void
pg_hint(Db *db, char *buf, size_t len)
{
	PgDb	   *d = (PgDb *) db;
	const char *here = PQdb(d->conn);
	PGresult   *r;

	buf[0] = '\0';
	if (strcmp(d->state, "42501") == 0)
		snprintf(buf, len, "the role needs dlock_user: GRANT dlock_user TO \"%s\"",
				 PQuser(d->conn));
	else if (strcmp(d->state, "42883") == 0 || strcmp(d->state, "42P01") == 0 ||
			 strcmp(d->state, "3F000") == 0)
	{
		r = PQexec(d->conn,
				   "SELECT current_setting('dlock.database', true),"
				   " (SELECT extversion FROM pg_extension WHERE extname = 'dlock')");
		if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1)
			snprintf(buf, len, "is the dlock extension installed in database \"%s\"?", here);
		else if (!PQgetisnull(r, 0, 1) && strcmp(PQgetvalue(r, 0, 1), DLOCK_VERSION) == 0)
			;					/* installed, and this version: no known fix */
		else if (!PQgetisnull(r, 0, 1))
			snprintf(buf, len, "the dlock extension in database \"%s\" is version %s;"
					 " this command needs %s: ALTER EXTENSION dlock UPDATE",
					 here, PQgetvalue(r, 0, 1), DLOCK_VERSION);
		else if (PQgetisnull(r, 0, 0) || PQgetvalue(r, 0, 0)[0] == '\0')
			snprintf(buf, len, "dlock is not loaded by this server: it needs"
					 " shared_preload_libraries = 'dlock', then CREATE EXTENSION dlock"
					 " in the database named by dlock.database");
		else if (strcmp(PQgetvalue(r, 0, 0), here) != 0)
			snprintf(buf, len, "the dlock extension is not installed in database \"%s\";"
					 " it lives in the database named by dlock.database (SHOW dlock.database"
					 " on the server): \"%s\" (connect with dbname=%s)",
					 here, PQgetvalue(r, 0, 0), PQgetvalue(r, 0, 0));
		else
			snprintf(buf, len, "the dlock extension is not installed in database \"%s\","
					 " the one dlock.database names: CREATE EXTENSION dlock", here);
		PQclear(r);
	}
}

/*
 * pg_exec
 *		Runs one statement that returns at most one row; classifies the
 *		outcome.  On DB_OK *res holds the result (the caller clears it).
 */
static DbStatus
pg_exec(PgDb *d, const char *sql, int nparams, const char *const *params,
		PGresult **res)
{
	PGresult   *r;
	const char *state;

	*res = NULL;
	r = PQexecParams(d->conn, sql, nparams, NULL, params, NULL, NULL, 0);
	if (r != NULL && (PQresultStatus(r) == PGRES_TUPLES_OK ||
					  PQresultStatus(r) == PGRES_COMMAND_OK))
	{
		*res = r;
		return DB_OK;
	}
	if (r == NULL || PQstatus(d->conn) == CONNECTION_BAD)
	{
		set_err(d, PQerrorMessage(d->conn));
		PQclear(r);
		return DB_CONN;
	}
	state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
	set_err(d, PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY) ?
			PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY) :
			PQresultErrorMessage(r));
	if (state)
		snprintf(d->state, sizeof(d->state), "%s", state);
	PQclear(r);
	if (state && strcmp(state, "DL001") == 0)
		return DB_LOST;
	if (state && strcmp(state, "57014") == 0)
		return DB_CANCELED;
	/* admin shutdown, crash shutdown, cannot connect now: try again later */
	if (state && (strncmp(state, "08", 2) == 0 || strcmp(state, "57P01") == 0 ||
				  strcmp(state, "57P02") == 0 || strcmp(state, "57P03") == 0))
		return DB_CONN;
	return DB_ERROR;
}

static void
fmt_secs(char *buf, size_t len, double s)
{
	snprintf(buf, len, "%.6f", s);
}

static DbStatus
token_result(PgDb *d, const char *sql, int n, const char *const *p,
			 long long *token)
{
	PGresult   *r;
	DbStatus	st = pg_exec(d, sql, n, p, &r);

	if (st != DB_OK)
		return st;
	if (PQntuples(r) != 1 || PQgetisnull(r, 0, 0))
		st = DB_NULL;
	else
		*token = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
	PQclear(r);
	return st;
}

/*
 * pg_acquire
 *		One call of a wait (keep_place: the place stays in line between
 *		calls): dlock_acquire, dlock_semaphore or dlock_campaign.
 */
static DbStatus
pg_acquire(Db *db, const RunOpts *o, double timeout, const char *owner,
		   long long *token)
{
	char		tbuf[32],
				lbuf[32],
				cbuf[16],
				pbuf[16];
	const char *p[6];

	fmt_secs(tbuf, sizeof(tbuf), timeout);
	fmt_secs(lbuf, sizeof(lbuf), o->ttl);
	p[0] = o->name;
	p[1] = tbuf;
	p[2] = lbuf;
	p[3] = owner;
	if (o->kind == RUN_SEMAPHORE)
	{
		snprintf(cbuf, sizeof(cbuf), "%d", o->capacity);
		snprintf(pbuf, sizeof(pbuf), "%d", o->permits);
		p[4] = cbuf;
		p[5] = pbuf;
		return token_result((PgDb *) db,
							"SELECT dlock_semaphore($1, $5::integer, $6::integer,"
							" timeout => make_interval(secs => $2::float8),"
							" ttl => make_interval(secs => $3::float8), owner => $4,"
							" keep_place => true)",
							6, p, token);
	}
	p[4] = o->kind == RUN_CAMPAIGN ? o->value : o->mode;
	return token_result((PgDb *) db, o->kind == RUN_CAMPAIGN ?
						"SELECT dlock_campaign($1, $5,"
						" timeout => make_interval(secs => $2::float8),"
						" ttl => make_interval(secs => $3::float8), owner => $4,"
						" keep_place => true)" :
						"SELECT dlock_acquire($1, mode => $5,"
						" timeout => make_interval(secs => $2::float8),"
						" ttl => make_interval(secs => $3::float8), owner => $4,"
						" keep_place => true)",
						5, p, token);
}

/*
 * pg_try_acquire
 *		Never waits.  An election has no try: a campaign of 1 ms that keeps
 *		no place.
 */
static DbStatus
pg_try_acquire(Db *db, const RunOpts *o, const char *owner, long long *token)
{
	char		lbuf[32],
				cbuf[16],
				pbuf[16];
	const char *p[5];

	fmt_secs(lbuf, sizeof(lbuf), o->ttl);
	p[0] = o->name;
	p[1] = lbuf;
	p[2] = owner;
	if (o->kind == RUN_SEMAPHORE)
	{
		snprintf(cbuf, sizeof(cbuf), "%d", o->capacity);
		snprintf(pbuf, sizeof(pbuf), "%d", o->permits);
		p[3] = cbuf;
		p[4] = pbuf;
		return token_result((PgDb *) db,
							"SELECT dlock_try_semaphore($1, $4::integer, $5::integer,"
							" ttl => make_interval(secs => $2::float8), owner => $3)",
							5, p, token);
	}
	p[3] = o->kind == RUN_CAMPAIGN ? o->value : o->mode;
	return token_result((PgDb *) db, o->kind == RUN_CAMPAIGN ?
						"SELECT dlock_campaign($1, $4, timeout => '1 ms',"
						" ttl => make_interval(secs => $2::float8), owner => $3)" :
						"SELECT dlock_try_acquire($1, mode => $4,"
						" ttl => make_interval(secs => $2::float8), owner => $3)",
						4, p, token);
}

static DbStatus
pg_renew(Db *db, const char *name, double ttl, const char *owner)
{
	char		lbuf[32];
	const char *p[3];
	PGresult   *r;
	DbStatus	st;

	fmt_secs(lbuf, sizeof(lbuf), ttl);
	p[0] = name;
	p[1] = lbuf;
	p[2] = owner;
	st = pg_exec((PgDb *) db,
				 "SELECT dlock_renew($1, ttl => make_interval(secs => $2::float8),"
				 " owner => $3)", 3, p, &r);
	PQclear(r);
	return st;
}

static DbStatus
pg_release(Db *db, const char *name, const char *owner)
{
	const char *p[2] = {name, owner};
	PGresult   *r;
	DbStatus	st;

	st = pg_exec((PgDb *) db, "SELECT dlock_release($1, owner => $2)", 2, p, &r);
	if (st != DB_OK)
		return st;
	if (PQntuples(r) != 1 || PQgetisnull(r, 0, 0) ||
		strcmp(PQgetvalue(r, 0, 0), "t") != 0)
		st = DB_NULL;
	PQclear(r);
	return st;
}

static DbStatus
pg_release_all(Db *db, const char *owner)
{
	const char *p[1] = {owner};
	PGresult   *r;
	DbStatus	st;

	st = pg_exec((PgDb *) db, "SELECT dlock_release_all(owner => $1)", 1, p, &r);
	if (st == DB_OK)
		PQclear(r);
	return st;
}

static DbStatus
pg_leader(Db *db, const char *name, char **value)
{
	const char *p[1] = {name};
	PGresult   *r;
	DbStatus	st;

	st = pg_exec((PgDb *) db, "SELECT value, token FROM dlock_leader($1)", 1, p, &r);
	if (st != DB_OK)
		return st;
	if (PQntuples(r) < 1)
		st = DB_NULL;
	else
		*value = strdup(PQgetisnull(r, 0, 0) ? "" : PQgetvalue(r, 0, 0));
	PQclear(r);
	return st;
}

static DbStatus
pg_list(Db *db, const char *prefix, LsTable *out)
{
	const char *p[1] = {prefix};
	PGresult   *r;
	DbStatus	st;
	int			n;

	st = pg_exec((PgDb *) db,
				 "SELECT name, mode,"
				 " CASE WHEN granted THEN 'yes' ELSE 'no' END,"
				 " CASE WHEN implied THEN 'yes' ELSE 'no' END,"
				 " position, owner, pid, token, permits, capacity,"
				 " to_char(expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US') || '+00',"
				 " value"
				 " FROM dlock.locks"
				 " WHERE $1::text IS NULL OR starts_with(name, $1)"
				 " ORDER BY name, granted DESC, position, token",
				 1, p, &r);
	if (st != DB_OK)
		return st;
	n = PQntuples(r);
	out->nrows = n;
	out->cells = calloc((size_t) n * LS_COLUMNS + 1, sizeof(char *));
	for (int i = 0; i < n; i++)
		for (int j = 0; j < LS_COLUMNS; j++)
			out->cells[i * LS_COLUMNS + j] =
				PQgetisnull(r, i, j) ? NULL : strdup(PQgetvalue(r, i, j));
	PQclear(r);
	return DB_OK;
}

const DbOps db_pg_ops = {
	.connect = pg_connect,
	.close = pg_close,
	.error = pg_error,
	.hint = pg_hint,
	.acquire = pg_acquire,
	.try_acquire = pg_try_acquire,
	.renew = pg_renew,
	.release = pg_release,
	.release_all = pg_release_all,
	.leader = pg_leader,
	.list = pg_list,
	.pid_column = "pid",
};
