/* SPDX-License-Identifier: PostgreSQL */
/*
 * dlock.h
 *		The dlock command: what its parts share.
 *
 * Interface:
 *		Db, DbOps, DbStatus		one database connection, behind one of two
 *								backends (db_pg.c: libpq, db_my.c: libmariadb)
 *		cmd_run					dlock run (run.c)
 *		parse_duration, new_owner_key, now_mono, die_usage	(util.c)
 *
 * A Db is used by one thread at a time.
 */
#ifndef DLOCK_CLI_H
#define DLOCK_CLI_H

#include <stdbool.h>
#include <stddef.h>

/* Exit codes (sysexits.h where one fits); documented in docs/clients.md. */
#define EXIT_NOT_HELD		1	/* release: not held; leader: nobody leads */
#define EXIT_LEASE_LOST		70	/* the lease was lost while the command ran */
#define EXIT_OSERR			71	/* fork, pipes, signals failed */
#define EXIT_USAGE			64
#define EXIT_UNAVAILABLE	69	/* cannot connect, or a server error */
#define EXIT_NOT_ACQUIRED	75	/* not granted within --timeout */

typedef enum DbKind
{
	DB_PG,
	DB_MY
} DbKind;

typedef struct DbTarget
{
	DbKind		kind;
	const char *dsn;			/* libpq conninfo, or our key=value for MariaDB */
} DbTarget;

typedef enum DbStatus
{
	DB_OK,						/* answered with a value */
	DB_NULL,					/* answered SQL NULL (or false, 0): not granted,
								 * not held, nobody leads */
	DB_LOST,					/* DL001: the owner does not hold the lock */
	DB_CANCELED,				/* the statement was cancelled (statement_timeout,
								 * KILL QUERY) */
	DB_CONN,					/* the connection failed or broke */
	DB_ERROR					/* any other error of the server */
} DbStatus;

/*
 * Rows of dlock.locks, as text; NULL cells are NULL.  The columns, in
 * order: name, mode, granted (yes/no), implied (yes/no), position, owner,
 * pid or conn_id, token, permits, capacity, expires_at (UTC, "+00"), value.
 */
enum
{
	LS_NAME, LS_MODE, LS_GRANTED, LS_IMPLIED, LS_POSITION, LS_OWNER, LS_PID,
	LS_TOKEN, LS_PERMITS, LS_CAPACITY, LS_EXPIRES, LS_VALUE, LS_COLUMNS
};
typedef struct LsTable
{
	int			nrows;
	char	  **cells;			/* nrows * LS_COLUMNS */
} LsTable;

typedef struct Db Db;
struct RunOpts;

typedef struct DbOps
{
	/* timeout_s > 0 bounds connecting and each round trip (renewals) */
	Db		   *(*connect) (const DbTarget *t, int timeout_s, char *err, size_t errlen);
	void		(*close) (Db *db);
	const char *(*error) (Db *db);
	/*
	 * What to do about the last error, where the fix is known ("" if not);
	 * called right after the failing call (it may ask the server, leaving
	 * error() as it was).
	 */
	void		(*hint) (Db *db, char *buf, size_t len);
	/*
	 * one call of a wait for what o asks (a lock, permits of a semaphore,
	 * the lead of an election): at most timeout seconds, the place kept
	 * after it; try_acquire never waits (never queues)
	 */
	DbStatus	(*acquire) (Db *db, const struct RunOpts *o, double timeout,
							const char *owner, long long *token);
	DbStatus	(*try_acquire) (Db *db, const struct RunOpts *o,
								const char *owner, long long *token);
	DbStatus	(*renew) (Db *db, const char *name, double ttl, const char *owner);
	DbStatus	(*release) (Db *db, const char *name, const char *owner);
	/* everything of the key: grants, waiting calls and kept places */
	DbStatus	(*release_all) (Db *db, const char *owner);
	DbStatus	(*leader) (Db *db, const char *name, char **value);
	DbStatus	(*list) (Db *db, const char *prefix, LsTable *out);
	const char *pid_column;		/* header of the session column in ls */
} DbOps;

/* Every backend's Db starts with this. */
struct Db
{
	const DbOps *ops;
};

extern const DbOps db_pg_ops;
extern const DbOps db_my_ops;

static inline const DbOps *
db_ops_for(const DbTarget *t)
{
	return t->kind == DB_PG ? &db_pg_ops : &db_my_ops;
}

/* run.c */
typedef enum RunKind
{
	RUN_LOCK,					/* dlock run */
	RUN_SEMAPHORE,				/* dlock run --semaphore */
	RUN_CAMPAIGN				/* dlock campaign */
} RunKind;

typedef struct RunOpts
{
	DbTarget	target;
	RunKind		kind;
	const char *name;
	const char *mode;
	int			capacity;		/* RUN_SEMAPHORE */
	int			permits;
	const char *value;			/* RUN_CAMPAIGN: the leader's published value */
	double		ttl;
	double		timeout;		/* < 0: wait until granted */
	double		grace;
	char	  **argv;			/* the command */
} RunOpts;

extern int	cmd_run(const RunOpts *o);

/* util.c */
typedef struct DbFailure
{
	char		err[1024];
	char		hint[1024];
} DbFailure;

extern void db_failure(Db *db, DbFailure *f);
extern void report_failure(const DbFailure *f, const char *fmt,...)
			__attribute__((format(printf, 2, 3)));
extern void report_db(Db *db, const char *fmt,...) __attribute__((format(printf, 2, 3)));
extern bool parse_duration(const char *s, double *out);
extern bool new_owner_key(char out[33]);
extern double now_mono(void);
extern void warnx_(const char *fmt,...) __attribute__((format(printf, 1, 2)));

#endif							/* DLOCK_CLI_H */
