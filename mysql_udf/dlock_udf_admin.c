/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * dlock_udf_admin.c
 *		The administrators' SQL functions (dlock_admin): namespace grants
 *		(dlock_grant, dlock_revoke), quotas (dlock_set_quota), reading the
 *		tables again (dlock_reload), resetting the statistics
 *		(dlock_stats_reset) and breaking stuck locks (dlock_force_release,
 *		dlock_force_release_all).
 *
 * Interface: the functions (exports.map).
 *
 * A grant or quota is written by the lock manager thread (mgr_grant,
 * mgr_set_quota), so its caches change between batches.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "dlock_udf.h"

/* ------------------------------------------------------------------------
 * dlock_grant(prefix, grantee) / dlock_revoke(prefix, grantee) -> 1 when
 * dlock.grants changed, 0 when the grant was already there / not there.
 * grantee: an account as CURRENT_USER() shows it (user@host) or a role.
 * ------------------------------------------------------------------------ */
/*
 * Whether g names an existing account - user@host as CURRENT_USER() shows
 * it, split at the last @ - or, unless accounts_only, a role (no @).
 */
static int
grantee_exists(const char *g, size_t glen, int accounts_only)
{
	char		user[DLOCK_MAX_ACCOUNT_LEN + 1];
	char		host[DLOCK_MAX_ACCOUNT_LEN + 1];
	const char *at;

	if (g == NULL || glen == 0 || glen > DLOCK_MAX_ACCOUNT_LEN)
		return 0;
	at = memrchr(g, '@', glen);
	if (at == NULL && accounts_only)
		return 0;
	if (at != NULL && at + 1 == g + glen)
		return 0;				/* an empty host would name a role */
	snprintf(user, sizeof(user), "%.*s", (int) (at ? (size_t) (at - g) : glen), g);
	snprintf(host, sizeof(host), "%.*s",
			 at ? (int) (glen - (size_t) (at - g) - 1) : 0, at ? at + 1 : "");
	return is_acl_user(host, user);
}

static my_bool
grant_init(UDF_INIT *initid, UDF_ARGS *args, char *message, const char *fn)
{
	return init_common(initid, args, message, fn, 2, 2, "(prefix, grantee)",
					   NULL);
}

static long long
grant_common(UDF_ARGS *args, int revoke, char *is_null, char *error)
{
	const char *fn = revoke ? "dlock_revoke" : "dlock_grant";
	DlockCaller who;
	DlockCall	req = {0};
	DlockErr	err = {0};
	const char *g = args->args[1];
	size_t		glen = args->lengths[1];
	int			changed = 0;

	*is_null = 0;
	*error = 0;
	req.fn = fn;
	if (authorize(&who, DLOCK_ACCESS_ADMIN, fn, error, is_null) != 0)
		return 0;
	/* a prefix is a name, or "/" for every path */
	if (!(args->args[0] && args->lengths[0] == 1 && args->args[0][0] == '/') &&
		get_name(args, 0, &req, error, is_null) != 0)
		return 0;
	if (g == NULL || glen == 0 || glen > DLOCK_MAX_ACCOUNT_LEN)
	{
		fail(error, is_null, DLOCK_ER_ARGS,
			 "%s: grantee must be an account (user@host) or a role%s", fn, "");
		return 0;
	}
	if (!revoke && mgr_capability_role(g, glen))
	{
		char		role[16];

		snprintf(role, sizeof(role), "%.*s", (int) glen, g);
		fail(error, is_null, DLOCK_ER_ARGS,
			 "%s: %s grants rights and is no tenant: bind the tenant's own "
			 "account or role", fn, role);
		return 0;
	}
	/* a revoke may name a grantee dropped since */
	if (!revoke && !grantee_exists(g, glen, 0))
	{
		char		shown[64];
		size_t		n = glen < sizeof(shown) - 1 ? glen : sizeof(shown) - 1;

		for (size_t k = 0; k < n; k++)
			shown[k] = ((unsigned char) g[k] < 0x20 || g[k] == '"') ? '?' : g[k];
		shown[n] = '\0';
		fail(error, is_null, DLOCK_ER_ARGS,
			 "%s: no account or role named \"%s\" (an account is written "
			 "user@host, as CURRENT_USER() shows it)", fn, shown);
		return 0;
	}
	if (mgr_grant(fn, g, glen, args->args[0], args->lengths[0], revoke,
				  &changed, &err) != 0)
	{
		report_failure(&err, error, is_null);
		return 0;
	}
	return changed;
}

my_bool
dlock_grant_init(UDF_INIT *initid, UDF_ARGS *args, char *message)
{
	return grant_init(initid, args, message, "dlock_grant");
}

void
dlock_grant_deinit(UDF_INIT *initid)
{
	deinit_common(initid);
}

long long
dlock_grant(UDF_INIT *initid, UDF_ARGS *args, char *is_null, char *error)
{
	(void) initid;
	return grant_common(args, 0, is_null, error);
}

my_bool
dlock_revoke_init(UDF_INIT *initid, UDF_ARGS *args, char *message)
{
	return grant_init(initid, args, message, "dlock_revoke");
}

void
dlock_revoke_deinit(UDF_INIT *initid)
{
	deinit_common(initid);
}

long long
dlock_revoke(UDF_INIT *initid, UDF_ARGS *args, char *is_null, char *error)
{
	(void) initid;
	return grant_common(args, 1, is_null, error);
}

/* ------------------------------------------------------------------------
 * dlock_set_quota(account, max_locks [, max_locks_per_owner [, max_bytes
 * [, max_bytes_per_owner]]]) -> 1; NULL: no limit, all NULL: no quota.
 * ------------------------------------------------------------------------ */
static const int num_quota[5] = {0, 1, 1, 1, 1};

DLOCK_UDF_SETUP(dlock_set_quota, 2, 5, "(account, max_locks [, per_owner [, max_bytes [, bytes_per_owner]]])", num_quota, 0)

long long
dlock_set_quota(UDF_INIT *initid, UDF_ARGS *args, char *is_null, char *error)
{
	static const char *const what[4] = {"max_locks", "max_locks_per_owner",
	"max_bytes", "max_bytes_per_owner"};
	DlockCaller who;
	DlockErr	err = {0};
	long long	limits[4] = {-1, -1, -1, -1};
	const char *g = args->args[0];
	size_t		glen = args->lengths[0];

	(void) initid;
	*is_null = 0;
	*error = 0;
	if (authorize(&who, DLOCK_ACCESS_ADMIN, "dlock_set_quota", error, is_null) != 0)
		return 0;
	for (unsigned int i = 1; i < args->arg_count; i++)
	{
		double		v;

		if (args->args[i] == NULL)
			continue;
		v = *(double *) args->args[i];
		if (!(v >= 0) || v != (double) (long long) v || v > 1e15)
		{
			fail(error, is_null, DLOCK_ER_ARGS,
				 "%s: %s must be a whole number from 0 on, or NULL",
				 "dlock_set_quota", what[i - 1]);
			return 0;
		}
		limits[i - 1] = (long long) v;
	}
	/* quotas are per account */
	if (!grantee_exists(g, glen, 1))
	{
		fail(error, is_null, DLOCK_ER_ARGS,
			 "%s: no such account (write it user@host, as CURRENT_USER() shows it)%s",
			 "dlock_set_quota", "");
		return 0;
	}
	if (mgr_set_quota("dlock_set_quota", g, glen, limits, &err) != 0)
	{
		report_failure(&err, error, is_null);
		return 0;
	}
	return 1;
}

/* ------------------------------------------------------------------------
 * dlock_reload() -> 1: the lock manager reads the dlock tables again (after
 * install.sql replaced them, or a restore); dlock_admin only
 * ------------------------------------------------------------------------ */
DLOCK_UDF_SETUP(dlock_reload, 0, 0, "no arguments", NULL, 0)

long long
dlock_reload(UDF_INIT *initid, UDF_ARGS *args, char *is_null, char *error)
{
	DlockCaller who;
	DlockErr	err = {0};

	(void) initid;
	(void) args;
	*is_null = 0;
	*error = 0;
	if (authorize(&who, DLOCK_ACCESS_ADMIN, "dlock_reload", error, is_null) != 0)
		return 0;
	if (mgr_reload("dlock_reload", &err) != 0)
	{
		report_failure(&err, error, is_null);
		return 0;
	}
	return 1;
}

/* ------------------------------------------------------------------------
 * dlock_stats_reset() -> 1: dlock.stats counts from zero again; dlock_admin
 * ------------------------------------------------------------------------ */
DLOCK_UDF_SETUP(dlock_stats_reset, 0, 0, "no arguments", NULL, 0)

long long
dlock_stats_reset(UDF_INIT *initid, UDF_ARGS *args, char *is_null, char *error)
{
	DlockCaller who;

	(void) initid;
	(void) args;
	*is_null = 0;
	*error = 0;
	if (authorize(&who, DLOCK_ACCESS_ADMIN, "dlock_stats_reset", error, is_null) != 0)
		return 0;
	mgr_stats_reset();
	return 1;
}

/* ------------------------------------------------------------------------
 * dlock_force_release(name, owner, reason) -> holders released
 * dlock_force_release_all(owner, reason) -> locks and requests ended
 * dlock_admin only: a stuck lock broken by its owner's leave (core/README
 * 18.5); the holder's next renew, release, convert or proclaim of it fails
 * with DL001 and the reason.  The server's error log says who, what and
 * why; never the key itself (a secret).
 * ------------------------------------------------------------------------ */
DLOCK_UDF_SETUP(dlock_force_release, 3, 3, "(name, owner, reason)", NULL, 0)

DLOCK_UDF_SETUP(dlock_force_release_all, 2, 2, "(owner, reason)", NULL, 0)

/* The reason (argument i): required, at most DLOCK_MAX_VALUE_LEN bytes. */
static int
get_reason(UDF_ARGS *args, unsigned int i, DlockCall *call, char *error, char *is_null)
{
	if (args->args[i] == NULL || args->lengths[i] == 0)
	{
		fail(error, is_null, DLOCK_ER_ARGS,
			 "%s: a reason is required (say why, e.g. 'holder stuck since "
			 "02:00, ticket 1234': the holder is told, and the server log "
			 "keeps it)%s", call->fn, "");
		return -1;
	}
	if (args->lengths[i] > DLOCK_MAX_VALUE_LEN)
	{
		fail(error, is_null, DLOCK_ER_TOO_LONG, "%s: reason is longer than %s bytes",
			 call->fn, "1024");
		return -1;
	}
	if (memchr(args->args[i], '\0', args->lengths[i]) != NULL)
	{
		fail(error, is_null, DLOCK_ER_ARGS, "%s: reason must not contain a NUL byte%s",
			 call->fn, "");
		return -1;
	}
	call->value = args->args[i];
	call->value_len = args->lengths[i];
	return 0;
}

/* Hand the force release to the lock manager and log it; the count, or -1. */
static long long
force_common(const DlockCaller *who, DlockCall *call, char *is_null, char *error)
{
	DlockResult res;
	DlockErr	err = {0};
	char		nm[80];
	char		why[DLOCK_MAX_VALUE_LEN + 4];

	if (mgr_call(who, call, &res, &err) != 0)
	{
		report_failure(&err, error, is_null);
		return -1;
	}
	if (res.status != DLOCK_STATUS_COUNT)
	{
		dlock_set_err(&err, DLOCK_ER_UNKNOWN, "%s: unexpected answer %d of the lock manager",
					  call->fn, (int) res.status);
		report_failure(&err, error, is_null);
		return -1;
	}
	shown_len(call->value, call->value_len, why, sizeof(why));
	if (call->op == DLOCK_OP_FORCE_RELEASE)
		fprintf(stderr, "dlock: account %.*s (connection %llu) force-released %d "
				"holder%s of lock \"%s\"%s; reason: %s\n",
				(int) who->account_len, who->account, who->conn_id, res.count,
				res.count == 1 ? "" : "s",
				shown_len(call->names[0], call->name_lens[0], nm, sizeof(nm)),
				call->owner ? " (one owner key)" : "", why);
	else
		fprintf(stderr, "dlock: account %.*s (connection %llu) force-released "
				"everything of an owner key (%d locks and requests); reason: %s\n",
				(int) who->account_len, who->account, who->conn_id, res.count, why);
	return res.count;
}

long long
dlock_force_release(UDF_INIT *initid, UDF_ARGS *args, char *is_null, char *error)
{
	DlockCall	call;
	DlockCaller who;
	long long	n;

	(void) initid;
	call_init(&call, "dlock_force_release", DLOCK_OP_FORCE_RELEASE, is_null, error);
	if (authorize(&who, DLOCK_ACCESS_ADMIN, call.fn, error, is_null) != 0 ||
		get_name(args, 0, &call, error, is_null) != 0 ||
		get_owner(args, 1, &call, error, is_null) != 0 ||
		get_reason(args, 2, &call, error, is_null) != 0)
		return 0;
	n = force_common(&who, &call, is_null, error);
	return n < 0 ? 0 : n;
}

long long
dlock_force_release_all(UDF_INIT *initid, UDF_ARGS *args, char *is_null, char *error)
{
	DlockCall	call;
	DlockCaller who;
	long long	n;

	(void) initid;
	call_init(&call, "dlock_force_release_all", DLOCK_OP_FORCE_RELEASE_ALL, is_null, error);
	if (authorize(&who, DLOCK_ACCESS_ADMIN, call.fn, error, is_null) != 0)
		return 0;
	if (args->args[0] == NULL)
	{
		fail(error, is_null, DLOCK_ER_ARGS,
			 "%s: an owner key is required (a connection's locks end with the "
			 "connection: KILL ends them all)%s", call.fn, "");
		return 0;
	}
	if (get_owner(args, 0, &call, error, is_null) != 0 ||
		get_reason(args, 1, &call, error, is_null) != 0)
		return 0;
	n = force_common(&who, &call, is_null, error);
	return n < 0 ? 0 : n;
}
