/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * dlock_udf.h
 *		What the SQL functions of the MySQL/MariaDB plugin (UDFs) share:
 *		their set-up, the server's side of a call (who calls, what it may
 *		do, raising errors) and the checks of their arguments.
 *
 * The SQL functions are built against the server's UDF layout (mysql_com.h
 * of libmariadbd-dev), never the client library's, which differs; this
 * header includes it.  The lock manager itself is the thread of
 * dlock_mgr.c, started by the plugin (dlock_plugin.c); a call hands it a
 * request (mgr_call) and sleeps until it is answered.
 *
 *		dlock_udf_server.c	the server's hooks, per-call state, raising
 *							errors, the caller and its access
 *		dlock_udf_args.c	argument checks and results
 *		dlock_udf_locks.c	the functions that take, convert and give back
 *							locks, semaphores and leadership
 *		dlock_udf_inspect.c	the functions that look: at a name, at every
 *							lock (dlock.locks), at the statistics
 *		dlock_udf_admin.c	namespaces, quotas, reload, statistics reset
 *
 * Rules, as in MariaDB's sql/udf_example.c: no mutable globals except the
 * server hooks, resolved once under pthread_once, and the grants of the
 * running statement, per thread; per-call state lives in initid->ptr and
 * is freed in the _deinit function; argument counts and types are checked
 * in _init (message prefixed with the function name); argument values are
 * read only at row time, where SQL NULL is args->args[i] == NULL.
 */
#ifndef DLOCK_UDF_H
#define DLOCK_UDF_H

#include <mysql.h>				/* the server's (-I .../server): UDF_INIT, UDF_ARGS */

#include "dlock_mgr.h"
#include "dlock_service.h"

/* ------------------------------------------------------------------------
 * dlock_udf_server.c
 * ------------------------------------------------------------------------ */

/* Per-call state (initid->ptr). */
typedef struct CallState
{
	char	   *buf;			/* string results */
	size_t		cap;
} CallState;

/*
 * A function's _init: the server's hooks, the argument count (message:
 * "fn: expected usage"), the arguments' types (numeric[i]: REAL_RESULT),
 * the manager running, the per-call state; 0, or 1 with message.
 */
extern int	init_common(UDF_INIT *initid, UDF_ARGS *args, char *message, const char *fn,
						unsigned int min_args, unsigned int max_args, const char *usage,
						const int *numeric);
/* A function's _deinit: the per-call state freed. */
extern void deinit_common(UDF_INIT *initid);

/*
 * A function's _init (argument count and types, per-call state; max_length
 * of a string result when not 0) and _deinit, which the server calls around
 * its row-time function.
 */
#define DLOCK_UDF_SETUP(fn, min_args, max_args, usage, numeric, max_len) \
my_bool fn##_init(UDF_INIT *initid, UDF_ARGS *args, char *message); \
void fn##_deinit(UDF_INIT *initid); \
my_bool \
fn##_init(UDF_INIT *initid, UDF_ARGS *args, char *message) \
{ \
	my_bool		r = init_common(initid, args, message, #fn, min_args, max_args, \
								usage, numeric); \
	if (max_len) \
		initid->max_length = max_len; \
	return r; \
} \
void \
fn##_deinit(UDF_INIT *initid) \
{ \
	deinit_common(initid); \
}

/* Raise an SQL error (or warning) in the calling statement. */
extern void report(const DlockErr *err);
/* A call the store refused: raise its error, and the result is NULL. */
extern void report_failure(const DlockErr *err, char *error, char *is_null);
/* Raise the error fmt (with fn and what) with code; the result is NULL. */
extern void fail(char *error, char *is_null, int code, const char *fmt, const char *fn,
				 const char *what);

/* Fills *who; access holds the bits of 'wanted' the caller has. */
extern void caller(DlockCaller *who, int wanted);
/* Whether KILL QUERY / KILL hit the calling statement, or its client went away. */
extern int	caller_killed(void *arg);
/*
 * Fills *who and checks that the caller holds one of the access bits in
 * 'needed'; 0, or raises the access error (the result is then NULL).
 */
extern int	authorize(DlockCaller *who, int needed, const char *fn, char *error,
					  char *is_null);
/* Whether an account (or, with an empty host, a role) exists. */
extern _Bool is_acl_user(const char *host, const char *user);
/* The server's version string, or "?". */
extern const char *server_version_string(void);

/* ------------------------------------------------------------------------
 * dlock_udf_args.c
 * ------------------------------------------------------------------------ */

/* The start of every function: a cleared call of fn, no result yet. */
extern void call_init(DlockCall *call, const char *fn, DLockOp op, char *is_null,
					  char *error);

/*
 * The argument checks: each reads argument i at row time and stores it
 * in the call (or *out); 0, or raises the error (the result is then NULL).
 */
extern int	get_name(UDF_ARGS *args, unsigned int i, DlockCall *req, char *error,
					 char *is_null);
extern int	get_owner(UDF_ARGS *args, unsigned int i, DlockCall *req, char *error,
					  char *is_null);
extern int	get_seconds(UDF_ARGS *args, unsigned int i, const char *what, long long max_us,
						long long *out, DlockCall *req, char *error, char *is_null);
extern int	get_mode(UDF_ARGS *args, unsigned int i, DlockCall *req, char *error,
					 char *is_null);
extern int	get_int(UDF_ARGS *args, unsigned int i, const char *what, long long lo,
					long long hi, int *out, const char *fn, char *error, char *is_null);
extern int	get_value(UDF_ARGS *args, unsigned int i, DlockCall *call, char *error,
					  char *is_null);
/* Optional 0/1 argument; absent or NULL: 0. */
extern int	get_flag(UDF_ARGS *args, unsigned int i);

/* Owner-keyed locks always carry a lease. */
extern void default_ttl(DlockCall *req);
/* The longest lease a call may ask for (the setting dlock_max_ttl). */
extern long long max_ttl_us(void);

/*
 * A JSON array of strings into decoded names in out (which has room for
 * len bytes: decoding never grows), each with its place in the array
 * (pos).  Returns how many, or -1 when it is not such an array.  Their
 * order is core's (dls_sort_names).
 */
extern int	parse_json_names(const char *s, size_t len, char *out, DLsName *names, int max);

/* A string result in the per-call state. */
extern char *set_string(UDF_INIT *initid, const char *s, size_t len, unsigned long *length,
						char *is_null, char *error);
/* UTC text of a Unix time in µs, as DATETIME(6) shows it. */
extern size_t format_utc(long long us, char *buf, size_t size);

#endif							/* DLOCK_UDF_H */
