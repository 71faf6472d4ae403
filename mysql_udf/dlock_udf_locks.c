/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * dlock_udf_locks.c
 *		The SQL functions that take, convert and give back locks,
 *		semaphores and leadership: dlock_acquire, dlock_try_acquire,
 *		dlock_convert, dlock_acquire_all, dlock_release, dlock_renew,
 *		dlock_release_all, dlock_semaphore, dlock_try_semaphore,
 *		dlock_campaign, dlock_proclaim, dlock_new_owner.
 *
 * Interface: the functions (exports.map), dlock_statement_end (dlock_mgr.h).
 *
 * Each checks the caller's access and its arguments, hands the request to
 * the lock manager (mgr_call) and reports.  A grant the caller will never
 * see - made while its statement was being killed, or in a statement that
 * fails later - is given back (grant_call, dlock_statement_end).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "dlock_udf.h"

static void interrupted(const char *fn, char *error, char *is_null);
static void statement_forget(void);
static void statement_note(const DlockCaller *who, const DlockCall *call);

/*
 * Run a call that may grant.  A grant made while the statement was being
 * killed would never reach the caller (the server answers the statement
 * with an error): it is given back.  0 with res GRANTED, else -1 (the
 * error raised, or NULL for a timeout, a refusal or a kept place).
 */
static int
grant_call(const DlockCaller *who, DlockCall *call, DlockResult *res,
		   char *is_null, char *error)
{
	DlockErr	err = {0};

	if (mgr_call(who, call, res, &err) != 0)
	{
		report_failure(&err, error, is_null);
		return -1;
	}
	if (res->status == DLOCK_STATUS_GRANTED && !caller_killed(NULL) &&
		call->op != DLOCK_OP_CONVERT)
		statement_note(who, call);
	if (res->status == DLOCK_STATUS_GRANTED && caller_killed(NULL))
	{
		DlockCall	undo = *call;
		DlockResult r;

		undo.op = call->op == DLOCK_OP_CONVERT ? DLOCK_OP_NONE : DLOCK_OP_RELEASE;
		undo.timeout_us = -1;
		undo.keep_place = 0;
		undo.capacity = 0;
		undo.permits = 0;
		undo.election = 0;
		undo.value = NULL;
		/* a conversion stays (the lock was held before); a grant goes */
		if (undo.op == DLOCK_OP_RELEASE && mgr_call(who, &undo, &r, &err) != 0)
		{
			report_failure(&err, error, is_null);
			return -1;
		}
		res->status = DLOCK_STATUS_CANCELED;
	}
	if (res->status == DLOCK_STATUS_GRANTED)
		return 0;
	*is_null = 1;
	if (caller_killed(NULL))
		interrupted(call->fn, error, is_null);
	else if (res->status == DLOCK_STATUS_NOT_HELD)
	{
		char		nm[80];
		DlockErr	e = {DLOCK_ER_UNKNOWN, 0, ""};

		snprintf(e.msg, sizeof(e.msg), "%s: lock \"%s\" is not held by this %s [DL001]",
				 call->fn, shown_len(call->names[0], call->name_lens[0], nm, sizeof(nm)),
				 call->owner ? "owner" : "session");
		report_failure(&e, error, is_null);
	}
	return -1;
}

/* ------------------------------------------------------------------------
 * dlock_acquire(name, timeout [, ttl [, mode [, owner [, keep_place]]]])
 * dlock_try_acquire(name [, ttl [, mode [, owner]]])
 * ------------------------------------------------------------------------ */
static const int num_acquire[6] = {0, 1, 1, 0, 0, 1};
static const int num_try[4] = {0, 1, 0, 0};

DLOCK_UDF_SETUP(dlock_acquire, 2, 6, "(name, timeout [, ttl [, mode [, owner [, keep_place]]]])", num_acquire, 0)

DLOCK_UDF_SETUP(dlock_try_acquire, 1, 4, "(name [, ttl [, mode [, owner]]])", num_try, 0)

static long long
acquire_common(UDF_ARGS *args, int try_only, char *is_null, char *error)
{
	DlockCall	call;
	DlockCaller who;
	DlockResult res;
	unsigned int ttl_i = try_only ? 1 : 2;

	call_init(&call, try_only ? "dlock_try_acquire" : "dlock_acquire",
			  try_only ? DLOCK_OP_TRY : DLOCK_OP_ACQUIRE, is_null, error);
	if (authorize(&who, DLOCK_ACCESS_USER | DLOCK_ACCESS_ADMIN, call.fn, error, is_null) != 0 ||
		get_name(args, 0, &call, error, is_null) != 0)
		return 0;
	if (!try_only &&
		get_seconds(args, 1, "timeout", DLOCK_MAX_TIMEOUT_US, &call.timeout_us,
					&call, error, is_null) != 0)
		return 0;
	if (get_seconds(args, ttl_i, "ttl", max_ttl_us(), &call.ttl_us, &call,
					error, is_null) != 0 ||
		get_mode(args, ttl_i + 1, &call, error, is_null) != 0 ||
		get_owner(args, ttl_i + 2, &call, error, is_null) != 0)
		return 0;
	default_ttl(&call);
	call.keep_place = !try_only && get_flag(args, 5);
	if (grant_call(&who, &call, &res, is_null, error) != 0)
		return 0;
	return res.token;
}

long long
dlock_acquire(UDF_INIT *initid, UDF_ARGS *args, char *is_null, char *error)
{
	(void) initid;
	return acquire_common(args, 0, is_null, error);
}

long long
dlock_try_acquire(UDF_INIT *initid, UDF_ARGS *args, char *is_null, char *error)
{
	(void) initid;
	return acquire_common(args, 1, is_null, error);
}

/* ------------------------------------------------------------------------
 * dlock_convert(name, mode, timeout [, owner]) -> the lock's new token
 * ------------------------------------------------------------------------ */
static const int num_convert[4] = {0, 0, 1, 0};

DLOCK_UDF_SETUP(dlock_convert, 3, 4, "(name, mode, timeout [, owner])", num_convert, 0)

long long
dlock_convert(UDF_INIT *initid, UDF_ARGS *args, char *is_null, char *error)
{
	DlockCall	call;
	DlockCaller who;
	DlockResult res;

	(void) initid;
	call_init(&call, "dlock_convert", DLOCK_OP_CONVERT, is_null, error);
	if (authorize(&who, DLOCK_ACCESS_USER | DLOCK_ACCESS_ADMIN, call.fn, error, is_null) != 0 ||
		get_name(args, 0, &call, error, is_null) != 0 ||
		get_mode(args, 1, &call, error, is_null) != 0 ||
		get_seconds(args, 2, "timeout", DLOCK_MAX_TIMEOUT_US, &call.timeout_us,
					&call, error, is_null) != 0 ||
		get_owner(args, 3, &call, error, is_null) != 0)
		return 0;
	if (grant_call(&who, &call, &res, is_null, error) != 0)
		return 0;
	return res.token;
}

/* ------------------------------------------------------------------------
 * dlock_acquire_all(names_json, timeout [, ttl [, mode [, owner [, keep_place]]]])
 *		-> a JSON array of tokens, in the order of the names
 * ------------------------------------------------------------------------ */

static const int num_all[6] = {0, 1, 1, 0, 0, 1};

DLOCK_UDF_SETUP(dlock_acquire_all, 2, 6, "(names_json, timeout [, ttl [, mode [, owner [, keep_place]]]])", num_all, 65535)

char *
dlock_acquire_all(UDF_INIT *initid, UDF_ARGS *args, char *result,
				  unsigned long *length, char *is_null, char *error)
{
	DlockCall	call;
	DlockCaller who;
	DlockResult res;
	DLsName		refs[DLOCK_MAX_MULTI + 1];
	long long	by_pos[DLOCK_MAX_MULTI];
	char	   *decoded;
	char		out[DLOCK_MAX_MULTI * 24 + 4];
	size_t		o = 0;
	int			n;

	(void) result;
	call_init(&call, "dlock_acquire_all", DLOCK_OP_ACQUIRE_ALL, is_null, error);
	if (authorize(&who, DLOCK_ACCESS_USER | DLOCK_ACCESS_ADMIN, call.fn, error, is_null) != 0)
		return NULL;
	if (args->args[0] == NULL)
	{
		fail(error, is_null, DLOCK_ER_ARGS, "%s: names must not be NULL%s", call.fn, "");
		return NULL;
	}
	decoded = malloc(args->lengths[0] + 1);
	if (decoded == NULL)
	{
		fail(error, is_null, DLOCK_ER_UNKNOWN, "%s: out of memory%s", call.fn, "");
		return NULL;
	}
	n = parse_json_names(args->args[0], args->lengths[0], decoded, refs,
						 DLOCK_MAX_MULTI + 1);
	if (n <= 0 || n > DLOCK_MAX_MULTI)
	{
		fail(error, is_null, n > DLOCK_MAX_MULTI ? DLOCK_ER_TOO_LONG : DLOCK_ER_ARGS,
			 n > DLOCK_MAX_MULTI ? "%s: at most %s names at once" :
			 "%s: names must be a JSON array of 1 to %s strings, such as '[\"a\", \"b\"]'",
			 call.fn, "64");
		free(decoded);
		return NULL;
	}
	/* the lock manager's order; MariaDB refuses a name given twice */
	if (dls_sort_names(refs, n) < n)
	{
		fail(error, is_null, DLOCK_ER_ARGS, "%s: a name is given twice%s", call.fn, "");
		free(decoded);
		return NULL;
	}
	for (int i = 0; i < n; i++)
	{
		UDF_ARGS	one = *args;
		char	   *a0[1] = {(char *) refs[i].p};
		unsigned long l0[1] = {refs[i].len};

		one.args = a0;
		one.lengths = l0;
		one.arg_count = 1;
		if (get_name(&one, 0, &call, error, is_null) != 0)
		{
			free(decoded);
			return NULL;
		}
	}
	if (get_seconds(args, 1, "timeout", DLOCK_MAX_TIMEOUT_US, &call.timeout_us,
					&call, error, is_null) != 0 ||
		get_seconds(args, 2, "ttl", max_ttl_us(), &call.ttl_us, &call,
					error, is_null) != 0 ||
		get_mode(args, 3, &call, error, is_null) != 0 ||
		get_owner(args, 4, &call, error, is_null) != 0)
	{
		free(decoded);
		return NULL;
	}
	default_ttl(&call);
	call.keep_place = get_flag(args, 5);
	if (grant_call(&who, &call, &res, is_null, error) != 0)
	{
		free(decoded);
		return NULL;
	}
	free(decoded);
	for (int i = 0; i < n; i++)
		by_pos[refs[i].pos] = i < res.ntokens ? res.tokens[i] : res.token;
	out[o++] = '[';
	for (int i = 0; i < n; i++)
		o += (size_t) snprintf(out + o, sizeof(out) - o, "%s%lld", i ? ", " : "", by_pos[i]);
	out[o++] = ']';
	return set_string(initid, out, o, length, is_null, error);
}

/* ------------------------------------------------------------------------
 * dlock_release(name [, owner]) -> 1 released, 0 not held (warning)
 * ------------------------------------------------------------------------ */
DLOCK_UDF_SETUP(dlock_release, 1, 2, "(name [, owner])", NULL, 0)

long long
dlock_release(UDF_INIT *initid, UDF_ARGS *args, char *is_null, char *error)
{
	DlockCall	call;
	DlockCaller who;
	DlockResult res;
	DlockErr	err = {0};

	(void) initid;
	call_init(&call, "dlock_release", DLOCK_OP_RELEASE, is_null, error);
	if (authorize(&who, DLOCK_ACCESS_USER | DLOCK_ACCESS_ADMIN, call.fn, error, is_null) != 0 ||
		get_name(args, 0, &call, error, is_null) != 0 ||
		get_owner(args, 1, &call, error, is_null) != 0)
		return 0;
	if (mgr_call(&who, &call, &res, &err) != 0)
	{
		report_failure(&err, error, is_null);
		return 0;
	}
	if (res.status != DLOCK_STATUS_RELEASED)
	{
		char		nm[80];

		err.code = DLOCK_ER_UNKNOWN;
		err.warning = 1;
		snprintf(err.msg, sizeof(err.msg), "%s: lock \"%s\" is not held by this %s",
				 call.fn, shown_len(call.names[0], call.name_lens[0], nm, sizeof(nm)),
				 call.owner ? "owner" : "session");
		report(&err);
		return 0;
	}
	return 1;
}

/* ------------------------------------------------------------------------
 * dlock_renew(name [, ttl [, owner]]) -> new expiry (UTC); NULL ttl: the
 * lease's own; NULL result: a lock without a lease
 * ------------------------------------------------------------------------ */
static const int num_renew[3] = {0, 1, 0};

DLOCK_UDF_SETUP(dlock_renew, 1, 3, "(name [, ttl [, owner]])", num_renew, 26)

char *
dlock_renew(UDF_INIT *initid, UDF_ARGS *args, char *result,
			unsigned long *length, char *is_null, char *error)
{
	DlockCall	call;
	DlockCaller who;
	DlockResult res;
	DlockErr	err = {0};
	char		expiry[64];

	(void) result;
	call_init(&call, "dlock_renew", DLOCK_OP_RENEW, is_null, error);
	if (authorize(&who, DLOCK_ACCESS_USER | DLOCK_ACCESS_ADMIN, call.fn, error, is_null) != 0 ||
		get_name(args, 0, &call, error, is_null) != 0 ||
		get_seconds(args, 1, "ttl", max_ttl_us(), &call.ttl_us, &call,
					error, is_null) != 0 ||
		get_owner(args, 2, &call, error, is_null) != 0)
		return NULL;
	if (call.ttl_us < 0)
		call.ttl_us = 0;
	if (mgr_call(&who, &call, &res, &err) != 0)
	{
		report_failure(&err, error, is_null);
		return NULL;
	}
	if (res.status != DLOCK_STATUS_RENEWED)
	{
		char		nm[80];

		err.code = DLOCK_ER_UNKNOWN;
		snprintf(err.msg, sizeof(err.msg),
				 "%s: lock \"%s\" is not held by this %s: the lease was lost [DL001]",
				 call.fn, shown_len(call.names[0], call.name_lens[0], nm, sizeof(nm)),
				 call.owner ? "owner" : "session");
		report_failure(&err, error, is_null);
		return NULL;
	}
	if (res.expires_at_us == 0)
	{
		*is_null = 1;
		return NULL;
	}
	return set_string(initid, expiry, format_utc(res.expires_at_us, expiry, sizeof(expiry)),
					  length, is_null, error);
}

/* ------------------------------------------------------------------------
 * dlock_release_all([owner]) -> locks released + requests withdrawn
 * ------------------------------------------------------------------------ */
DLOCK_UDF_SETUP(dlock_release_all, 0, 1, "([owner])", NULL, 0)

long long
dlock_release_all(UDF_INIT *initid, UDF_ARGS *args, char *is_null, char *error)
{
	DlockCall	call;
	DlockCaller who;
	DlockResult res;
	DlockErr	err = {0};

	(void) initid;
	call_init(&call, "dlock_release_all", DLOCK_OP_RELEASE_ALL, is_null, error);
	if (authorize(&who, DLOCK_ACCESS_USER | DLOCK_ACCESS_ADMIN, call.fn, error, is_null) != 0 ||
		get_owner(args, 0, &call, error, is_null) != 0)
		return 0;
	if (mgr_call(&who, &call, &res, &err) != 0)
	{
		report_failure(&err, error, is_null);
		return 0;
	}
	return res.count;
}

/* ------------------------------------------------------------------------
 * dlock_semaphore(name, capacity, permits, timeout [, ttl [, owner [, keep_place]]])
 * dlock_try_semaphore(name, capacity, permits [, ttl [, owner]])
 * ------------------------------------------------------------------------ */
static const int num_sem[7] = {0, 1, 1, 1, 1, 0, 1};
static const int num_try_sem[5] = {0, 1, 1, 1, 0};

DLOCK_UDF_SETUP(dlock_semaphore, 4, 7, "(name, capacity, permits, timeout [, ttl [, owner [, keep_place]]])", num_sem, 0)

DLOCK_UDF_SETUP(dlock_try_semaphore, 3, 5, "(name, capacity, permits [, ttl [, owner]])", num_try_sem, 0)

static long long
semaphore_common(UDF_ARGS *args, int try_only, char *is_null, char *error)
{
	DlockCall	call;
	DlockCaller who;
	DlockResult res;
	unsigned int ttl_i = try_only ? 3 : 4;

	call_init(&call, try_only ? "dlock_try_semaphore" : "dlock_semaphore",
			  try_only ? DLOCK_OP_TRY : DLOCK_OP_ACQUIRE, is_null, error);
	call.mode = DLOCK_MODE_NL;
	if (authorize(&who, DLOCK_ACCESS_USER | DLOCK_ACCESS_ADMIN, call.fn, error, is_null) != 0 ||
		get_name(args, 0, &call, error, is_null) != 0 ||
		get_int(args, 1, "capacity", 1, 1000000000, &call.capacity, call.fn, error, is_null) != 0 ||
		get_int(args, 2, "permits", 1, call.capacity, &call.permits, call.fn, error, is_null) != 0)
		return 0;
	if (!try_only &&
		get_seconds(args, 3, "timeout", DLOCK_MAX_TIMEOUT_US, &call.timeout_us,
					&call, error, is_null) != 0)
		return 0;
	if (get_seconds(args, ttl_i, "ttl", max_ttl_us(), &call.ttl_us, &call,
					error, is_null) != 0 ||
		get_owner(args, ttl_i + 1, &call, error, is_null) != 0)
		return 0;
	default_ttl(&call);
	call.keep_place = !try_only && get_flag(args, 6);
	if (grant_call(&who, &call, &res, is_null, error) != 0)
		return 0;
	return res.token;
}

long long
dlock_semaphore(UDF_INIT *initid, UDF_ARGS *args, char *is_null, char *error)
{
	(void) initid;
	return semaphore_common(args, 0, is_null, error);
}

long long
dlock_try_semaphore(UDF_INIT *initid, UDF_ARGS *args, char *is_null, char *error)
{
	(void) initid;
	return semaphore_common(args, 1, is_null, error);
}

/* ------------------------------------------------------------------------
 * dlock_campaign(name, value, timeout [, ttl [, owner [, keep_place]]]) -> token
 * dlock_proclaim(name, value [, owner]) -> token; not the leader: DL001
 * ------------------------------------------------------------------------ */
static const int num_campaign[6] = {0, 0, 1, 1, 0, 1};

DLOCK_UDF_SETUP(dlock_campaign, 3, 6, "(name, value, timeout [, ttl [, owner [, keep_place]]])", num_campaign, 0)

long long
dlock_campaign(UDF_INIT *initid, UDF_ARGS *args, char *is_null, char *error)
{
	DlockCall	call;
	DlockCaller who;
	DlockResult res;

	(void) initid;
	call_init(&call, "dlock_campaign", DLOCK_OP_ACQUIRE, is_null, error);
	call.mode = DLOCK_MODE_EX;
	call.election = 1;
	if (authorize(&who, DLOCK_ACCESS_USER | DLOCK_ACCESS_ADMIN, call.fn, error, is_null) != 0 ||
		get_name(args, 0, &call, error, is_null) != 0 ||
		get_value(args, 1, &call, error, is_null) != 0 ||
		get_seconds(args, 2, "timeout", DLOCK_MAX_TIMEOUT_US, &call.timeout_us,
					&call, error, is_null) != 0 ||
		get_seconds(args, 3, "ttl", max_ttl_us(), &call.ttl_us, &call,
					error, is_null) != 0 ||
		get_owner(args, 4, &call, error, is_null) != 0)
		return 0;
	default_ttl(&call);
	call.keep_place = get_flag(args, 5);
	if (grant_call(&who, &call, &res, is_null, error) != 0)
		return 0;
	return res.token;
}

DLOCK_UDF_SETUP(dlock_proclaim, 2, 3, "(name, value [, owner])", NULL, 0)

long long
dlock_proclaim(UDF_INIT *initid, UDF_ARGS *args, char *is_null, char *error)
{
	DlockCall	call;
	DlockCaller who;
	DlockResult res;
	DlockErr	err = {0};

	(void) initid;
	call_init(&call, "dlock_proclaim", DLOCK_OP_PROCLAIM, is_null, error);
	call.mode = DLOCK_MODE_EX;
	if (authorize(&who, DLOCK_ACCESS_USER | DLOCK_ACCESS_ADMIN, call.fn, error, is_null) != 0 ||
		get_name(args, 0, &call, error, is_null) != 0 ||
		get_value(args, 1, &call, error, is_null) != 0 ||
		get_owner(args, 2, &call, error, is_null) != 0)
		return 0;
	if (mgr_call(&who, &call, &res, &err) != 0)
	{
		report_failure(&err, error, is_null);
		return 0;
	}
	if (res.status != DLOCK_STATUS_GRANTED && res.status != DLOCK_STATUS_RENEWED)
	{
		char		nm[80];

		err.code = DLOCK_ER_UNKNOWN;
		snprintf(err.msg, sizeof(err.msg),
				 "%s: this %s does not lead \"%s\" [DL001]", call.fn,
				 call.owner ? "owner" : "session",
				 shown_len(call.names[0], call.name_lens[0], nm, sizeof(nm)));
		report_failure(&err, error, is_null);
		return 0;
	}
	return res.token;
}

/* ------------------------------------------------------------------------
 * dlock_new_owner() -> a random 128-bit owner key in hex
 * ------------------------------------------------------------------------ */
DLOCK_UDF_SETUP(dlock_new_owner, 0, 0, "no arguments", NULL, 32)

char *
dlock_new_owner(UDF_INIT *initid, UDF_ARGS *args, char *result,
				unsigned long *length, char *is_null, char *error)
{
	unsigned char rnd[16];
	char		hex[33];
	size_t		got = 0;
	DlockCaller who;

	(void) args;
	(void) result;
	*is_null = 0;
	*error = 0;
	if (authorize(&who, DLOCK_ACCESS_USER | DLOCK_ACCESS_ADMIN, "dlock_new_owner", error,
				  is_null) != 0)
		return NULL;
	while (got < sizeof(rnd))
	{
		ssize_t		n = getrandom(rnd + got, sizeof(rnd) - got, 0);

		if (n <= 0)
		{
			DlockErr	e = {DLOCK_ER_UNKNOWN, 0, "dlock_new_owner: no randomness available"};

			report(&e);
			*error = 1;
			*is_null = 1;
			return NULL;
		}
		got += (size_t) n;
	}
	for (int i = 0; i < 16; i++)
		snprintf(hex + 2 * i, 3, "%02x", rnd[i]);
	return set_string(initid, hex, 32, length, is_null, error);
}

/* ------------------------------------------------------------------------
 * Grants of the running statement, and an interrupted call
 * ------------------------------------------------------------------------ */
/*
 * Grants made in the running statement, by this thread (a statement runs on
 * one thread from start to end): if the statement then fails - killed
 * after the function returned, or any later error - the client never
 * learns the token, so the plugin's statement-end hook gives them back
 * (dlock_statement_end).  A conversion is not undone (the lock was held
 * before it).
 */
typedef struct StatementGrant
{
	DlockCaller who;
	DlockCall	call;
	char	   *buf;			/* the names and the owner */
} StatementGrant;

static __thread struct
{
	unsigned long long conn_id; /* the connection the grants are of */
	StatementGrant *grants;
	int			n;
	int			cap;
}			stmt;

static void
statement_forget(void)
{
	for (int i = 0; i < stmt.n; i++)
		free(stmt.grants[i].buf);
	stmt.n = 0;
}

static void
statement_note(const DlockCaller *who, const DlockCall *call)
{
	StatementGrant *g;
	size_t		need = call->owner_len + 1;
	char	   *p;

	if (stmt.conn_id != who->conn_id)
	{
		statement_forget();		/* another connection's, never ended here */
		stmt.conn_id = who->conn_id;
	}
	if (stmt.n == stmt.cap)
	{
		int			cap = stmt.cap ? stmt.cap * 2 : 4;
		StatementGrant *n = realloc(stmt.grants, sizeof(StatementGrant) * (size_t) cap);

		if (n == NULL)
			return;
		stmt.grants = n;
		stmt.cap = cap;
	}
	for (int i = 0; i < call->nnames; i++)
		need += call->name_lens[i] + 1;
	g = &stmt.grants[stmt.n];
	g->buf = malloc(need);
	if (g->buf == NULL)
		return;
	g->who = *who;
	g->call = *call;
	p = g->buf;
	for (int i = 0; i < call->nnames; i++)
	{
		memcpy(p, call->names[i], call->name_lens[i]);
		g->call.names[i] = p;
		p += call->name_lens[i];
	}
	if (call->owner)
	{
		memcpy(p, call->owner, call->owner_len);
		g->call.owner = p;
	}
	stmt.n++;
}

/* Called by the plugin when a statement of this thread ended. */
void
dlock_statement_end(unsigned long long conn_id, int failed)
{
	if (stmt.n == 0)
		return;
	if (failed && conn_id == stmt.conn_id)
	{
		for (int i = 0; i < stmt.n; i++)
		{
			StatementGrant *g = &stmt.grants[i];
			DlockCall	undo;
			DlockResult r;
			DlockErr	e;

			memset(&undo, 0, sizeof(undo));
			undo.fn = g->call.fn;
			undo.op = DLOCK_OP_RELEASE;
			undo.timeout_us = -1;
			undo.owner = g->call.owner;
			undo.owner_len = g->call.owner_len;
			undo.nnames = g->call.nnames;
			for (int k = 0; k < g->call.nnames; k++)
			{
				undo.names[k] = g->call.names[k];
				undo.name_lens[k] = g->call.name_lens[k];
			}
			if (mgr_call(&g->who, &undo, &r, &e) != 0)
				fprintf(stderr, "dlock: cannot give back a grant of a failed statement: %s\n",
						e.msg);
		}
	}
	statement_forget();
}

static void
interrupted(const char *fn, char *error, char *is_null)
{
	DlockErr	e = {DLOCK_ER_INTERRUPTED, 0, ""};

	/* the server does not report a kill that a UDF survived */
	snprintf(e.msg, sizeof(e.msg),
			 "%s: query execution was interrupted; the request was withdrawn", fn);
	report(&e);
	*error = 1;
	*is_null = 1;
}
