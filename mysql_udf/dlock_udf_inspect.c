/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * dlock_udf_inspect.c
 *		The SQL functions that look: at one name (dlock_holder, dlock_check,
 *		dlock_leader, dlock_leader_info, dlock_semaphore_available), at every lock the caller
 *		may see (dlock_locks, behind the view dlock.locks; dlock_sees, the
 *		filter of 1.0's view), at the statistics (dlock_stats) and at the
 *		plugin (dlock_info).
 *
 * Interface: the functions (exports.map).
 *
 * A look at the picture or the tables runs in the manager thread
 * (mgr_inspect), right after a commit, when the picture and the tables
 * agree; it reads nothing a caller's own query could filter first.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlock_access.h"
#include "dlock_sessions.h"
#include "dlock_store.h"
#include "dlock_udf.h"

#define DLOCK_VERSION "1.2"

/* ------------------------------------------------------------------------
 * Looking at the picture: dlock_holder, dlock_check, dlock_leader,
 * dlock_semaphore_available.  Each runs in the manager thread right after
 * a commit, when the picture and the tables agree.
 * ------------------------------------------------------------------------ */
typedef struct Look
{
	const DlockCaller *who;
	char		name[DLOCK_MAX_NAME_LEN + 1];
	long long	token;
	int			found;
	long long	number;
	char	   *text;			/* malloc'ed */
	size_t		text_len;
	int			oom;
} Look;

static void
look_append(Look *lk, const char *s, size_t n)
{
	char	   *t;

	if (lk->oom)
		return;
	t = realloc(lk->text, lk->text_len + n + 1);
	if (t == NULL)
	{
		lk->oom = 1;
		return;
	}
	lk->text = t;
	memcpy(lk->text + lk->text_len, s, n);
	lk->text_len += n;
	lk->text[lk->text_len] = '\0';
}

/*
 * A holder as the caller may see it: its own account's (and to
 * dlock_admin every) holder as its key or connection id; to dlock_monitor
 * another account's as its connection id or "(owner key)"; to anyone else
 * "(another account)".  A key guards release: nobody else sees it.
 * Returns the text (buf, or the key) and its length in *n.
 */
static const char *
holder_shown(const Look *lk, const DLmHolder *h, char *buf, size_t size, size_t *n)
{
	if ((lk->who->access & DLOCK_ACCESS_ADMIN) ||
		strcmp(accounts_name(h->role), lk->who->account) == 0)
	{
		/* the account's own (and an admin): the key, or the connection */
		if (h->owner->key)
		{
			*n = strlen(h->owner->key);
			return h->owner->key;
		}
		*n = (size_t) snprintf(buf, size, "%llu", session_conn_id(h->pid, h->backend_start));
	}
	else if (lk->who->access & DLOCK_ACCESS_MONITOR)
		*n = h->owner->key ? (size_t) snprintf(buf, size, "(owner key)") :
			(size_t) snprintf(buf, size, "%llu", session_conn_id(h->pid, h->backend_start));
	else
		*n = (size_t) snprintf(buf, size, "(another account)");
	return buf;
}

/* Holders in token order, as holder_shown shows them, joined by ", ". */
static void
look_holder(const DLockManager *m, void *arg)
{
	Look	   *lk = arg;
	DLmLock    *l = dlm_lookup(m, lk->name);

	if (l == NULL)
		return;
	for (DLmHolder *h = dlm_lock_holders(l); h; h = dlm_holder_next(h))
	{
		char		buf[64];
		const char *s;
		size_t		n;

		if (h->implied)
			continue;
		s = holder_shown(lk, h, buf, sizeof(buf), &n);
		if (lk->found)
			look_append(lk, ", ", 2);
		look_append(lk, s, n);
		lk->found = 1;
	}
}

static void
look_check(const DLockManager *m, void *arg)
{
	Look	   *lk = arg;
	DLmLock    *l = dlm_lookup(m, lk->name);

	if (l == NULL)
		return;
	for (DLmHolder *h = dlm_lock_holders(l); h; h = dlm_holder_next(h))
		if (h->token == lk->token && !h->implied)
			lk->found = 1;
}

/* The leader of an election: the holder with a value, not a kept place. */
static const DLmHolder *
leader_of(const DLockManager *m, const char *name)
{
	DLmLock    *l = dlm_lookup(m, name);

	if (l == NULL || !l->election)
		return NULL;
	for (DLmHolder *h = dlm_lock_holders(l); h; h = dlm_holder_next(h))
		if (dlm_holder_value(h) && dlm_holder_kept(h) < h->count)
			return h;
	return NULL;
}

static void
look_leader(const DLockManager *m, void *arg)
{
	Look	   *lk = arg;
	const DLmHolder *h = leader_of(m, lk->name);

	if (h == NULL)
		return;
	look_append(lk, dlm_holder_value(h), strlen(dlm_holder_value(h)));
	lk->found = 1;
}

/*
 * The leader as dlock_leader_info shows it: its value in text, its term
 * (token), since and expiry in number and expires, and how dlock_holder
 * shows it in holder.
 */
typedef struct LeaderLook
{
	Look		lk;
	char		holder[DLOCK_MAX_OWNER_LEN + 64];
	size_t		holder_len;
	long long	since;
	long long	expires;
} LeaderLook;

static void
look_leader_info(const DLockManager *m, void *arg)
{
	LeaderLook *ll = arg;
	const DLmHolder *h = leader_of(m, ll->lk.name);
	char		buf[64];
	const char *s;
	size_t		n;

	if (h == NULL)
		return;
	look_append(&ll->lk, dlm_holder_value(h), strlen(dlm_holder_value(h)));
	ll->lk.found = 1;
	ll->lk.token = h->token;
	ll->since = h->granted_at;
	ll->expires = h->expires_at;
	s = holder_shown(&ll->lk, h, buf, sizeof(buf), &n);
	if (n >= sizeof(ll->holder))
		n = sizeof(ll->holder) - 1;
	memcpy(ll->holder, s, n);
	ll->holder[n] = '\0';
	ll->holder_len = n;
}

static void
look_available(const DLockManager *m, void *arg)
{
	Look	   *lk = arg;
	DLmLock    *l = dlm_lookup(m, lk->name);

	if (l == NULL || l->capacity == 0)
		return;
	lk->found = 1;
	lk->number = l->capacity - l->permits_held;
}

/*
 * Set up a look at one name; 0 or raises.  The names outside the caller's
 * grants are refused as the functions that take locks refuse them.
 */
static int
look_begin(UDF_ARGS *args, const char *fn, Look *lk, DlockCaller *who,
		   char *error, char *is_null)
{
	DlockCall	call;

	memset(lk, 0, sizeof(*lk));
	call_init(&call, fn, 0, is_null, error);
	DlockErr	err;

	if (authorize(who, DLOCK_ACCESS_USER | DLOCK_ACCESS_MONITOR | DLOCK_ACCESS_ADMIN, fn,
				  error, is_null) != 0 ||
		get_name(args, 0, &call, error, is_null) != 0)
		return -1;
	/* a name the caller may not lock is not looked at either */
	if (mgr_namespace_check(fn, who, call.names, call.name_lens, 1, &err) != 0)
	{
		report_failure(&err, error, is_null);
		return -1;
	}
	memcpy(lk->name, call.names[0], call.name_lens[0]);
	lk->name[call.name_lens[0]] = '\0';
	lk->who = who;
	return 0;
}

static int
look_run(const char *fn, MgrInspectFn f, Look *lk, char *error, char *is_null)
{
	DlockErr	err = {0};

	if (mgr_inspect(fn, f, lk, &err) != 0)
	{
		free(lk->text);
		report_failure(&err, error, is_null);
		return -1;
	}
	if (lk->oom)
	{
		free(lk->text);
		fail(error, is_null, DLOCK_ER_UNKNOWN, "%s: out of memory%s", fn, "");
		return -1;
	}
	return 0;
}

DLOCK_UDF_SETUP(dlock_holder, 1, 1, "(name)", NULL, 65535)

char *
dlock_holder(UDF_INIT *initid, UDF_ARGS *args, char *result,
			 unsigned long *length, char *is_null, char *error)
{
	DlockCaller who;
	Look		lk;
	char	   *r;

	(void) result;
	if (look_begin(args, "dlock_holder", &lk, &who, error, is_null) != 0 ||
		look_run("dlock_holder", look_holder, &lk, error, is_null) != 0)
		return NULL;
	if (!lk.found)
	{
		*is_null = 1;
		return NULL;
	}
	r = set_string(initid, lk.text, lk.text_len, length, is_null, error);
	free(lk.text);
	return r;
}

DLOCK_UDF_SETUP(dlock_leader, 1, 1, "(name)", NULL, DLOCK_MAX_VALUE_LEN)

char *
dlock_leader(UDF_INIT *initid, UDF_ARGS *args, char *result,
			 unsigned long *length, char *is_null, char *error)
{
	DlockCaller who;
	Look		lk;
	char	   *r;

	(void) result;
	if (look_begin(args, "dlock_leader", &lk, &who, error, is_null) != 0 ||
		look_run("dlock_leader", look_leader, &lk, error, is_null) != 0)
		return NULL;
	if (!lk.found)
	{
		*is_null = 1;
		free(lk.text);
		return NULL;
	}
	r = set_string(initid, lk.text ? lk.text : "", lk.text_len, length, is_null, error);
	free(lk.text);
	return r;
}

static const int num_check[2] = {0, 1};

DLOCK_UDF_SETUP(dlock_check, 2, 2, "(name, token)", num_check, 0)

long long
dlock_check(UDF_INIT *initid, UDF_ARGS *args, char *is_null, char *error)
{
	DlockCaller who;
	Look		lk;

	(void) initid;
	if (look_begin(args, "dlock_check", &lk, &who, error, is_null) != 0)
		return 0;
	if (args->args[1] == NULL)
	{
		fail(error, is_null, DLOCK_ER_ARGS, "%s: token must not be NULL%s", "dlock_check", "");
		return 0;
	}
	lk.token = (long long) *(double *) args->args[1];
	if (look_run("dlock_check", look_check, &lk, error, is_null) != 0)
		return 0;
	return lk.found;
}

DLOCK_UDF_SETUP(dlock_semaphore_available, 1, 1, "(name)", NULL, 0)

long long
dlock_semaphore_available(UDF_INIT *initid, UDF_ARGS *args, char *is_null,
						  char *error)
{
	DlockCaller who;
	Look		lk;

	(void) initid;
	if (look_begin(args, "dlock_semaphore_available", &lk, &who, error, is_null) != 0 ||
		look_run("dlock_semaphore_available", look_available, &lk, error, is_null) != 0)
		return 0;
	if (!lk.found)
	{
		*is_null = 1;
		return 0;
	}
	return lk.number;
}

/* ------------------------------------------------------------------------
 * dlock_info() -> version
 * ------------------------------------------------------------------------ */
DLOCK_UDF_SETUP(dlock_info, 0, 0, "no arguments", NULL, 200)

char *
dlock_info(UDF_INIT *initid, UDF_ARGS *args, char *result,
		   unsigned long *length, char *is_null, char *error)
{
	char		buf[200];
	int			n;
	DlockCaller who;

	(void) args;
	(void) result;
	*is_null = 0;
	*error = 0;
	if (authorize(&who, DLOCK_ACCESS_USER | DLOCK_ACCESS_MONITOR | DLOCK_ACCESS_ADMIN,
				  "dlock_info", error, is_null) != 0)
		return NULL;
	n = snprintf(buf, sizeof(buf), "dlock %s (MariaDB UDF, server %s)",
				 DLOCK_VERSION, server_version_string());
	return set_string(initid, buf, (size_t) n, length, is_null, error);
}

/* ------------------------------------------------------------------------
 * dlock_locks() -> the rows of the view dlock.locks the caller may see, as
 * a JSON array (the view takes it apart with JSON_TABLE): its own
 * account's rows with their owner keys; every row without other accounts'
 * keys for dlock_monitor; everything for dlock_admin.  The rows are read
 * by the lock manager from its tables and filtered here, so no condition
 * of the caller's query ever sees a row it may not (a view over the
 * tables with the filter in its WHERE let a caller's condition - a
 * conversion that warns, a function with a side effect - run on every
 * row first).
 * ------------------------------------------------------------------------ */
typedef struct LocksRead
{
	const DlockCaller *who;
	char	   *buf;			/* the JSON array, malloc'ed */
	size_t		len;
	size_t		cap;
	int			oom;
	int			rows;
	int			rc;
	DlockErr	err;
} LocksRead;

static void
json_put(LocksRead *lr, const char *s, size_t n)
{
	if (lr->oom)
		return;
	if (lr->len + n + 1 > lr->cap)
	{
		size_t		cap = lr->cap ? lr->cap : 4096;
		char	   *b;

		while (cap < lr->len + n + 1)
			cap *= 2;
		b = realloc(lr->buf, cap);
		if (b == NULL)
		{
			lr->oom = 1;
			return;
		}
		lr->buf = b;
		lr->cap = cap;
	}
	memcpy(lr->buf + lr->len, s, n);
	lr->len += n;
	lr->buf[lr->len] = '\0';
}

/*
 * "key":"text" - bytes as utf8mb4 text: a byte that does not start a
 * valid UTF-8 character shows as '?', as CONVERT(... USING utf8mb4) does.
 */
static void
json_text(LocksRead *lr, const char *key, const char *s, size_t n)
{
	char		esc[8];

	/* a comma between members, none after the opening brace */
	if (lr->len > 0 && lr->buf[lr->len - 1] != '{')
		json_put(lr, ",", 1);
	json_put(lr, "\"", 1);
	json_put(lr, key, strlen(key));
	json_put(lr, "\":\"", 3);
	for (size_t i = 0; i < n;)
	{
		unsigned char c = (unsigned char) s[i];
		size_t		k = c < 0x80 ? 1 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;

		if (c == '"' || c == '\\')
		{
			esc[0] = '\\';
			esc[1] = (char) c;
			json_put(lr, esc, 2);
			i++;
		}
		else if (c < 0x20)
		{
			snprintf(esc, sizeof(esc), "\\u%04x", c);
			json_put(lr, esc, 6);
			i++;
		}
		else if (c < 0x80)
			json_put(lr, s + i++, 1);
		else if (i + k <= n && dlock_valid_utf8(s + i, k))
		{
			json_put(lr, s + i, k);
			i += k;
		}
		else
		{
			json_put(lr, "?", 1);
			i++;
		}
	}
	json_put(lr, "\"", 1);
}

static void
json_int(LocksRead *lr, const char *key, long long v)
{
	char		b[48];
	int			n = snprintf(b, sizeof(b), "%s\"%s\":%lld",
							 lr->len > 0 && lr->buf[lr->len - 1] != '{' ? "," : "", key, v);

	json_put(lr, b, (size_t) n);
}

static void
locks_row(void *arg, const StoreLockRow *r)
{
	static const char *const modes[DLOCK_NMODES] = {"NL", "CR", "CW", "shared", "PW", "exclusive"};
	static const char *const keys[SL_NINTS] = {
		NULL, "capacity", "granted", "position", "conn_id", "token", "count",
		"since_us", "expires_us", "timeout_us", "conversion", "implied", "permits"
	};
	LocksRead  *lr = arg;
	const DlockCaller *who = lr->who;
	int			sees;
	long long	mode = r->ints[SL_MODE];

	/* 2: the row and its owner key; 1: the row; 0: nothing */
	if (who->access & DLOCK_ACCESS_ADMIN)
		sees = 2;
	else if ((who->access & DLOCK_ACCESS_USER) && r->account_len == who->account_len &&
			 memcmp(r->account, who->account, who->account_len) == 0)
		sees = 2;
	else
		sees = (who->access & DLOCK_ACCESS_MONITOR) ? 1 : 0;
	if (sees == 0)
		return;
	if (lr->rows++ > 0)
		json_put(lr, ",", 1);
	json_put(lr, "{", 1);
	json_put(lr, "\"keyed\":", 8);
	json_put(lr, r->owner ? "1" : "0", 1);
	json_text(lr, "name", r->name, r->name_len);
	if (!r->nulls[SL_CAPACITY])
		json_text(lr, "mode", "semaphore", 9);
	else if (mode >= 0 && mode < DLOCK_NMODES)
		json_text(lr, "mode", modes[mode], strlen(modes[mode]));
	if (r->owner && sees == 2)
		json_text(lr, "owner", r->owner, r->owner_len);
	json_text(lr, "account", r->account, r->account_len);
	if (r->value)
		json_text(lr, "value", r->value, r->value_len);
	for (int k = SL_CAPACITY; k < SL_NINTS; k++)
		if (!r->nulls[k])
			json_int(lr, keys[k], r->ints[k]);
	json_put(lr, "}", 1);
}

static void
look_locks(const DLockManager *m, void *arg)
{
	LocksRead  *lr = arg;
	const DlockCaller *who = lr->who;
	bool		all = (who->access & (DLOCK_ACCESS_MONITOR | DLOCK_ACCESS_ADMIN)) != 0;

	(void) m;
	lr->rc = store_read_locks(all ? NULL : who->account, all ? 0 : who->account_len,
							  locks_row, lr, &lr->err);
}

DLOCK_UDF_SETUP(dlock_locks, 0, 0, "no arguments", NULL, 4294967295UL)

char *
dlock_locks(UDF_INIT *initid, UDF_ARGS *args, char *result,
			unsigned long *length, char *is_null, char *error)
{
	CallState  *cs = (CallState *) initid->ptr;
	DlockCaller who;
	LocksRead	lr;
	DlockErr	err = {0};

	(void) args;
	(void) result;
	*is_null = 0;
	*error = 0;
	if (authorize(&who, DLOCK_ACCESS_USER | DLOCK_ACCESS_MONITOR | DLOCK_ACCESS_ADMIN,
				  "dlock_locks", error, is_null) != 0)
		return NULL;
	memset(&lr, 0, sizeof(lr));
	lr.who = &who;
	json_put(&lr, "[", 1);
	if (mgr_inspect("dlock_locks", look_locks, &lr, &err) == 0 && lr.rc != 0)
		dlock_set_err(&err, DLOCK_ER_UNKNOWN, "dlock_locks: %s", lr.err.msg);
	if (err.code != 0)
	{
		free(lr.buf);
		report_failure(&err, error, is_null);
		return NULL;
	}
	json_put(&lr, "]", 1);
	if (lr.oom)
	{
		free(lr.buf);
		fail(error, is_null, DLOCK_ER_UNKNOWN, "%s: out of memory%s", "dlock_locks", "");
		return NULL;
	}
	/* the caller's buffer: freed with the call state */
	free(cs->buf);
	cs->buf = lr.buf;
	cs->cap = lr.cap;
	*length = (unsigned long) lr.len;
	return cs->buf;
}

/* ------------------------------------------------------------------------
 * dlock_sees(account) -> what the caller may see of a row of that account:
 * 2 the row and its owner key (its own account, or dlock_admin), 1 the row
 * without the key (dlock_monitor), 0 nothing.  The filter of the first
 * dlock.locks (the objects of 1.0 that an upgrade starts from name it);
 * install.sql drops the function.
 * ------------------------------------------------------------------------ */
my_bool
dlock_sees_init(UDF_INIT *initid, UDF_ARGS *args, char *message)
{
	int			r = init_common(initid, args, message, "dlock_sees", 1, 1,
								"(account)", NULL);

	initid->maybe_null = 0;
	return r;
}

void
dlock_sees_deinit(UDF_INIT *initid)
{
	deinit_common(initid);
}

long long
dlock_sees(UDF_INIT *initid, UDF_ARGS *args, char *is_null, char *error)
{
	DlockCaller who;

	(void) initid;
	*is_null = 0;
	*error = 0;
	caller(&who, DLOCK_ACCESS_USER | DLOCK_ACCESS_MONITOR);
	if (who.access & DLOCK_ACCESS_ADMIN)
		return 2;
	if (args->args[0] != NULL && args->lengths[0] == who.account_len &&
		memcmp(args->args[0], who.account, who.account_len) == 0 &&
		(who.access & DLOCK_ACCESS_USER))
		return 2;
	return (who.access & DLOCK_ACCESS_MONITOR) ? 1 : 0;
}

/* ------------------------------------------------------------------------
 * dlock_stats() -> the lock manager's statistics as one JSON object (the
 * view dlock.stats takes it apart): one snapshot, so the columns agree.
 * dlock_monitor and dlock_admin.
 * ------------------------------------------------------------------------ */
DLOCK_UDF_SETUP(dlock_stats, 0, 0, "no arguments", NULL, 4096)

/* "name":[le...] and "name_bucket":[cumulative counts...] */
static int
json_histogram(char *p, size_t room, const char *name, const int64_t *buckets)
{
	size_t		n = 0;
	long long	sum = 0;

	n += (size_t) snprintf(p + n, room - n, ",\"%s\":[", name);
	for (int b = 0; b < DLM_WAIT_BUCKETS && n < room; b++)
	{
		if (b < DLM_WAIT_BUCKETS - 1)
			n += (size_t) snprintf(p + n, room - n, "%s%g", b ? "," : "",
								   dlm_wait_bounds_us[b] / 1e6);
		else
			n += (size_t) snprintf(p + n, room - n, ",\"+Inf\"");
	}
	n += (size_t) snprintf(p + n, room - n, "],\"%s_bucket\":[", name);
	for (int b = 0; b < DLM_WAIT_BUCKETS && n < room; b++)
	{
		sum += buckets[b];
		n += (size_t) snprintf(p + n, room - n, "%s%lld", b ? "," : "", sum);
	}
	n += (size_t) snprintf(p + n, room - n, "]");
	return n < room ? (int) n : -1;
}

char *
dlock_stats(UDF_INIT *initid, UDF_ARGS *args, char *result,
			unsigned long *length, char *is_null, char *error)
{
	DlockCaller who;
	DLmCounters c;
	int64_t		holders,
				waiting,
				kept;
	long long	since;
	char		buf[4096];
	int			n,
				h;

	(void) args;
	(void) result;
	*is_null = 0;
	*error = 0;
	if (authorize(&who, DLOCK_ACCESS_MONITOR | DLOCK_ACCESS_ADMIN, "dlock_stats",
				  error, is_null) != 0)
		return NULL;
	mgr_stats(&c, &holders, &waiting, &kept, &since);
	n = snprintf(buf, sizeof(buf),
				 "{\"since_us\":%lld,\"requests\":%lld,\"grants\":%lld,\"grants_immediate\":%lld,"
				 "\"waits\":%lld,\"timeouts\":%lld,\"cancels\":%lld,\"kept\":%lld,"
				 "\"deadlocks\":%lld,\"refused\":%lld,\"errors\":%lld,\"lease_expiries\":%lld,"
				 "\"renewals\":%lld,\"releases\":%lld,\"conversions\":%lld,"
				 "\"session_cleanups\":%lld,\"holders\":%lld,\"waiters\":%lld,"
				 "\"kept_places\":%lld,\"batches\":%lld,\"commits\":%lld,"
				 "\"batch_requests\":%lld,\"commit_seconds\":%.6f,"
				 "\"wait_seconds_sum\":%.6f,\"wait_seconds_count\":%lld,"
				 "\"handoff_seconds_sum\":%.6f,\"handoff_seconds_count\":%lld",
				 since, (long long) c.core.requests, (long long) c.core.grants,
				 (long long) c.core.grants_immediate, (long long) c.core.waits,
				 (long long) c.timeouts, (long long) c.cancels, (long long) c.core.kept,
				 (long long) c.core.deadlocks, (long long) c.core.refused,
				 (long long) c.core.errors, (long long) c.core.expiries,
				 (long long) c.core.renewals, (long long) c.core.releases,
				 (long long) c.core.conversions, (long long) c.core.session_cleanups,
				 (long long) holders, (long long) waiting, (long long) kept,
				 (long long) c.batches, (long long) c.commits, (long long) c.batch_requests,
				 c.commit_us / 1e6, c.core.wait_us_sum / 1e6,
				 (long long) (c.core.grants - c.core.grants_immediate),
				 c.handoff_us_sum / 1e6, (long long) c.handoffs);
	if (n < 0 || (size_t) n >= sizeof(buf) ||
		(h = json_histogram(buf + n, sizeof(buf) - (size_t) n, "wait_seconds",
							c.core.wait_buckets)) < 0 ||
		(n += h, (h = json_histogram(buf + n, sizeof(buf) - (size_t) n, "handoff_seconds",
									 c.handoff_buckets)) < 0) ||
		(size_t) (n += h) + 2 > sizeof(buf))
	{
		*error = 1;
		return NULL;
	}
	buf[n++] = '}';
	buf[n] = '\0';
	return set_string(initid, buf, (size_t) n, length, is_null, error);
}


/* ------------------------------------------------------------------------
 * dlock_leader_info(name) -> the leader as one JSON object: value, term
 * (its token), holder (as dlock_holder shows it), since and expiry (UTC,
 * as dlock_renew answers; expiry null without a lease); NULL without a
 * leader
 * ------------------------------------------------------------------------ */
DLOCK_UDF_SETUP(dlock_leader_info, 1, 1, "(name)", NULL, 65535)

char *
dlock_leader_info(UDF_INIT *initid, UDF_ARGS *args, char *result,
				  unsigned long *length, char *is_null, char *error)
{
	static const char fn[] = "dlock_leader_info";
	DlockCaller who;
	LeaderLook	ll;
	LocksRead	lr;
	char		t[64];
	char	   *r;

	(void) result;
	if (look_begin(args, fn, &ll.lk, &who, error, is_null) != 0)
		return NULL;
	ll.holder[0] = '\0';
	ll.holder_len = 0;
	ll.since = ll.expires = 0;
	if (look_run(fn, look_leader_info, &ll.lk, error, is_null) != 0)
		return NULL;
	if (!ll.lk.found)
	{
		*is_null = 1;
		free(ll.lk.text);
		return NULL;
	}
	memset(&lr, 0, sizeof(lr));
	json_put(&lr, "{", 1);
	json_text(&lr, "value", ll.lk.text ? ll.lk.text : "", ll.lk.text_len);
	json_int(&lr, "term", ll.lk.token);
	json_text(&lr, "holder", ll.holder, ll.holder_len);
	json_text(&lr, "since", t, format_utc(ll.since, t, sizeof(t)));
	if (ll.expires != 0)
		json_text(&lr, "expiry", t, format_utc(ll.expires, t, sizeof(t)));
	else
		json_put(&lr, ",\"expiry\":null", 14);
	json_put(&lr, "}", 1);
	free(ll.lk.text);
	if (lr.oom)
	{
		free(lr.buf);
		fail(error, is_null, DLOCK_ER_UNKNOWN, "%s: out of memory%s", fn, "");
		return NULL;
	}
	r = set_string(initid, lr.buf, lr.len, length, is_null, error);
	free(lr.buf);
	return r;
}
