/* SPDX-License-Identifier: PostgreSQL */
/*
 * dlock_grants.c
 *		Namespaces: the names a role may lock, from dlock.grants.  Checked in
 *		the backend, before a request reaches the lock manager.
 *
 * A role bound by no grant (directly or through a role whose privileges it
 * has) may lock any name; once one binds it, only names under its grants.
 * Superusers are never bound.  A path prefix ("/a/b") covers that path and
 * the paths below it, segment by segment ("/" covers every path); a flat
 * prefix covers the flat names that start with it, byte by byte.
 *
 * Each backend keeps the prefixes that bind its current user and loads them
 * again when dlock.grants changed (a trigger marks the transaction, which
 * bumps a shared generation once it has committed), when the user changed
 * (SET ROLE, SECURITY DEFINER) or when role memberships changed (syscache
 * callbacks).  With no change the check costs one atomic read.
 */
#include "postgres.h"

#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "dlock.h"
#include "dlock_service.h"

PG_FUNCTION_INFO_V1(dlock_grant);
PG_FUNCTION_INFO_V1(dlock_revoke);
PG_FUNCTION_INFO_V1(dlock_grants_changed);
PG_FUNCTION_INFO_V1(dlock_visible);

typedef struct Prefix
{
	char	   *p;
	int			len;
} Prefix;

static MemoryContext grants_cxt = NULL;
static bool cache_valid = false;
static Oid	cache_user = InvalidOid;
static uint64 cache_generation = 0;
static Prefix *cache_prefixes = NULL;
static int	cache_n = 0;			/* 0: the user is bound by no grant */
static DLockQuotas cache_quotas;	/* the user's (dlock.quotas); 0: none */
static bool cache_capability;	/* the user is dlock_user, _monitor or _admin itself */

static bool has_role_named(Oid user, const char *role);

static bool bump_at_commit = false;
static bool callbacks_registered = false;

static Oid	cache_grants_relid = InvalidOid;	/* what the cache was read from */
static Oid	cache_quotas_relid = InvalidOid;

static void
forget_grants(Datum arg, int cacheid, uint32 hashvalue)
{
	cache_valid = false;
}

/* The tables dropped (DROP EXTENSION) or changed shape: read them again. */
static void
forget_grants_rel(Datum arg, Oid relid)
{
	if (!OidIsValid(relid) || relid == cache_grants_relid || relid == cache_quotas_relid)
		cache_valid = false;
}

static void
grants_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			/* after ProcArrayEndTransaction: a reload now sees the change */
			if (bump_at_commit)
				pg_atomic_fetch_add_u64(&dlock_shared->grants_generation, 1);
			bump_at_commit = false;
			break;
		case XACT_EVENT_PRE_PREPARE:
			if (bump_at_commit)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot PREPARE a transaction that changed dlock.grants")));
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			bump_at_commit = false;
			break;
		default:
			break;
	}
}

static void
register_callbacks(void)
{
	if (callbacks_registered)
		return;
	grants_cxt = AllocSetContextCreate(TopMemoryContext, "dlock grants",
									   ALLOCSET_SMALL_SIZES);
	RegisterXactCallback(grants_xact_callback, NULL);
	CacheRegisterSyscacheCallback(AUTHMEMROLEMEM, forget_grants, (Datum) 0);
	CacheRegisterSyscacheCallback(AUTHOID, forget_grants, (Datum) 0);
	CacheRegisterRelcacheCallback(forget_grants_rel, (Datum) 0);
	callbacks_registered = true;
}

/* dlock.<table>, or InvalidOid while the extension is being dropped */
static Oid
dlock_relid(const char *table)
{
	Oid			nsp = get_namespace_oid("dlock", true);

	return OidIsValid(nsp) ? get_relname_relid(table, nsp) : InvalidOid;
}

/* The user's row of dlock.quotas (its own role's only, not inherited). */
static void
load_quotas(Oid user, Snapshot snapshot)
{
	Oid			relid = dlock_relid("quotas");
	Relation	rel;
	TupleDesc	desc;
	TableScanDesc scan;
	TupleTableSlot *slot;

	memset(&cache_quotas, 0, sizeof(cache_quotas));
	if (!OidIsValid(relid))
		return;
	rel = table_open(relid, AccessShareLock);
	desc = RelationGetDescr(rel);
	if (desc->natts < 5 || TupleDescAttr(desc, 0)->atttypid != REGROLEOID ||
		TupleDescAttr(desc, 1)->atttypid != INT8OID || TupleDescAttr(desc, 2)->atttypid != INT8OID ||
		TupleDescAttr(desc, 3)->atttypid != INT8OID || TupleDescAttr(desc, 4)->atttypid != INT8OID)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("dlock.quotas does not have the shape dlock created"),
				 errhint("Its first columns must be role regrole and four bigint quotas.")));
	scan = table_beginscan(rel, snapshot, 0, NULL);
	slot = table_slot_create(rel, NULL);
	while (table_scan_getnextslot(scan, ForwardScanDirection, slot))
	{
		bool		isnull;
		Datum		role = slot_getattr(slot, 1, &isnull);

		int64	   *fields[4] = {&cache_quotas.max_locks, &cache_quotas.max_locks_per_owner,
			&cache_quotas.max_bytes, &cache_quotas.max_bytes_per_owner};

		if (isnull || DatumGetObjectId(role) != user)
			continue;
		for (int c = 0; c < 4; c++)
		{
			Datum		v = slot_getattr(slot, c + 2, &isnull);

			*fields[c] = isnull ? 0 : DatumGetInt64(v);
		}
	}
	ExecDropSingleTupleTableSlot(slot);
	table_endscan(scan);
	table_close(rel, AccessShareLock);
}

/*
 * The prefixes that bind the user, read under the latest snapshot: a
 * REPEATABLE READ transaction's own snapshot could miss a grant committed
 * before the generation this cache will carry.
 */
static void
load_grants(Oid user, uint64 generation)
{
	Oid			relid;
	int			cap = 8;

	register_callbacks();
	MemoryContextReset(grants_cxt);
	cache_prefixes = MemoryContextAlloc(grants_cxt, sizeof(Prefix) * cap);
	cache_n = 0;

	relid = dlock_relid("grants");
	cache_grants_relid = relid;
	cache_quotas_relid = dlock_relid("quotas");
	memset(&cache_quotas, 0, sizeof(cache_quotas));
	cache_capability = !superuser_arg(user) &&
		(user == get_role_oid("dlock_user", true) ||
		 user == get_role_oid("dlock_monitor", true) ||
		 user == get_role_oid("dlock_admin", true));
	if (!superuser_arg(user) && OidIsValid(relid))
	{
		Relation	rel = table_open(relid, AccessShareLock);
		TupleDesc	desc = RelationGetDescr(rel);
		Snapshot	snapshot;
		TableScanDesc scan;
		TupleTableSlot *slot;

		if (desc->natts < 2 ||
			TupleDescAttr(desc, 0)->atttypid != REGROLEOID ||
			TupleDescAttr(desc, 1)->atttypid != TEXTOID)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("dlock.grants does not have the shape dlock created"),
					 errhint("Its first columns must be role regrole, prefix text.")));
		snapshot = RegisterSnapshot(GetLatestSnapshot());
		scan = table_beginscan(rel, snapshot, 0, NULL);
		slot = table_slot_create(rel, NULL);
		while (table_scan_getnextslot(scan, ForwardScanDirection, slot))
		{
			bool		role_null;
			bool		prefix_null;
			Datum		role = slot_getattr(slot, 1, &role_null);
			Datum		prefix = slot_getattr(slot, 2, &prefix_null);
			text	   *t;

			if (role_null || prefix_null ||
				!has_privs_of_role(user, DatumGetObjectId(role)))
				continue;
			if (cache_n == cap)
			{
				cap *= 2;
				cache_prefixes = repalloc(cache_prefixes, sizeof(Prefix) * cap);
			}
			t = DatumGetTextPP(prefix);
			cache_prefixes[cache_n].len = VARSIZE_ANY_EXHDR(t);
			cache_prefixes[cache_n].p = MemoryContextAlloc(grants_cxt,
														   cache_prefixes[cache_n].len + 1);
			memcpy(cache_prefixes[cache_n].p, VARDATA_ANY(t), cache_prefixes[cache_n].len);
			cache_prefixes[cache_n].p[cache_prefixes[cache_n].len] = '\0';
			cache_n++;
		}
		ExecDropSingleTupleTableSlot(slot);
		table_endscan(scan);
		table_close(rel, AccessShareLock);
		load_quotas(user, snapshot);
		UnregisterSnapshot(snapshot);
	}
	cache_user = user;
	cache_generation = generation;
	cache_valid = true;
}

/*
 * dlock_check_namespace
 *		Raise 42501 unless the current user may lock the name.  Intentions a
 *		path implies on its ancestors are not names the caller asked for:
 *		they are not checked.
 */
static void
refresh(Oid user)
{
	uint64		generation = pg_atomic_read_u64(&dlock_shared->grants_generation);

	if (!cache_valid || cache_user != user || cache_generation != generation)
		load_grants(user, generation);
}

/* Whether the user's grants cover the name; -1 if no grant binds the user. */
static int
granted(Oid user, const char *name, int len)
{
	refresh(user);
	if (cache_n == 0)
		return -1;
	for (int i = 0; i < cache_n; i++)
		if (dls_prefix_covers(cache_prefixes[i].p, cache_prefixes[i].len, name, len))
			return 1;
	return 0;
}

void
dlock_check_namespace(const char *name, int len)
{
	Oid			user = GetUserId();

	if (granted(user, name, len) != 0)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("permission denied for lock \"%s\"", pnstrdup(name, len)),
			 errdetail("Role \"%s\" may lock only names under its dlock grants (dlock.grants).",
					   GetUserNameFromId(user, false)),
			 errhint("A member of dlock_admin can grant a prefix with dlock_grant().")));
}

/*
 * dlock_check_role
 *		Raise 42501 if the current user is one of the capability roles
 *		themselves.  Every member of dlock_user may SET ROLE dlock_user, a
 *		role no grant binds and no quota limits: calls made as it would
 *		escape the member's namespaces and quotas, and its owner keys would
 *		be every member's.  Any other role a tenant can become is one its
 *		administrator made it a member of, with that role's grants.
 */
void
dlock_check_role(void)
{
	Oid			user = GetUserId();

	refresh(user);
	if (cache_capability)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("role \"%s\" cannot take or release locks", GetUserNameFromId(user, false)),
				 errdetail("dlock_user, dlock_monitor and dlock_admin grant rights; they are no tenant of their own."),
				 errhint("Call as your own role (RESET ROLE).")));
}

/* The user's quotas from dlock.quotas (superusers have none); 0: no limit. */
void
dlock_quotas_of(Oid user, DLockQuotas *quotas)
{
	refresh(user);
	*quotas = cache_quotas;
}

/*
 * dlock_is_admin
 *		Whether the user has dlock_admin's privileges (superusers have): it
 *		may then use another role's owner key.
 */
bool
dlock_is_admin(Oid user)
{
	return has_role_named(user, "dlock_admin");
}

static bool
has_role_named(Oid user, const char *role)
{
	Oid			r = get_role_oid(role, true);

	return superuser_arg(user) || (OidIsValid(r) && has_privs_of_role(user, r));
}

/*
 * dlock.visible(name, role)
 *		Whether the current user sees a row of dlock.locks taken by role:
 *		its own (a role whose privileges it has), every row for dlock_monitor
 *		and dlock_admin, and rows under the prefixes granted to it.
 */
Datum
dlock_visible(PG_FUNCTION_ARGS)
{
	Oid			user = GetUserId();
	text	   *name;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		PG_RETURN_BOOL(false);
	name = PG_GETARG_TEXT_PP(0);
	if (has_privs_of_role(user, PG_GETARG_OID(1)) || has_role_named(user, "dlock_monitor"))
		PG_RETURN_BOOL(true);
	PG_RETURN_BOOL(granted(user, VARDATA_ANY(name), VARSIZE_ANY_EXHDR(name)) == 1);
}

/* trigger on dlock.grants: whoever changes it, backends load it again */
Datum
dlock_grants_changed(PG_FUNCTION_ARGS)
{
	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("dlock.grants_changed() must be called as a trigger")));
	register_callbacks();
	bump_at_commit = true;
	return PointerGetDatum(NULL);
}

static void
grant_args(FunctionCallInfo fcinfo, text **prefix, Oid *role)
{
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("prefix and role must not be null")));
	*prefix = PG_GETARG_TEXT_PP(0);
	*role = PG_GETARG_OID(1);
}

/* Run one fixed, schema-qualified statement on dlock.grants; rows changed. */
static uint64
change_grants(const char *sql, text *prefix, Oid role)
{
	Oid			types[2] = {REGROLEOID, TEXTOID};
	Datum		values[2] = {ObjectIdGetDatum(role), PointerGetDatum(prefix)};
	uint64		n;

	SPI_connect();
	if (SPI_execute_with_args(sql, 2, types, values, NULL, false, 0) < 0)
		elog(ERROR, "could not change dlock.grants");
	n = SPI_processed;
	SPI_finish();
	return n;
}

/*
 * dlock_grant(prefix, role)
 *		Let role (and the roles that have its privileges) lock the names under
 *		prefix; from its first grant on, only those.  True if it is new.
 */
Datum
dlock_grant(PG_FUNCTION_ARGS)
{
	text	   *prefix;
	Oid			role;
	const char *p;
	int			len;

	grant_args(fcinfo, &prefix, &role);
	p = VARDATA_ANY(prefix);
	len = VARSIZE_ANY_EXHDR(prefix);
	/* a prefix is a name, or "/" for every path */
	if (!(len == 1 && p[0] == '/'))
		dlock_check_name_arg(p, len);
	if (!OidIsValid(role) || !SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(role)))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("role with OID %u does not exist", role)));
	PG_RETURN_BOOL(change_grants("INSERT INTO dlock.grants (role, prefix) VALUES ($1, $2) "
								 "ON CONFLICT DO NOTHING", prefix, role) == 1);
}

/* dlock_revoke(prefix, role): take one grant back.  True if it was there. */
Datum
dlock_revoke(PG_FUNCTION_ARGS)
{
	text	   *prefix;
	Oid			role;

	grant_args(fcinfo, &prefix, &role);
	PG_RETURN_BOOL(change_grants("DELETE FROM dlock.grants "
								 "WHERE role OPERATOR(pg_catalog.=) $1 "
								 "AND prefix OPERATOR(pg_catalog.=) $2", prefix, role) > 0);
}
