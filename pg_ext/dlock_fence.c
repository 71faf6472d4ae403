/* SPDX-License-Identifier: PostgreSQL */
/*
 * dlock_fence.c
 *		dlock_check(name, token): fencing inside the caller's own
 *		transaction.  True when token is a current grant of name - its row
 *		in dlock.held exists (not released) and its lease, if any, has not
 *		run out at this moment.
 *
 * The row is looked up by primary key under the latest snapshot, not the
 * caller's: in a REPEATABLE READ transaction the transaction's snapshot
 * would still show a grant released since it began.  A grant is in
 * dlock.held, committed, before it is answered, and a release is committed
 * before it returns, so the latest snapshot is the lock manager's word.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/skey.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/relcache.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "dlock.h"
#include "dlock_compat.h"

PG_FUNCTION_INFO_V1(dlock_check);

Datum
dlock_check(PG_FUNCTION_ARGS)
{
	text	   *name;
	const char *p;
	int			len;
	int64		token;
	Oid			relid;
	Relation	rel;
	Oid			pk;
	AttrNumber	name_att;
	AttrNumber	expires_att;
	Snapshot	snapshot;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;
	bool		current = false;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("lock name and token must not be null")));
	name = PG_GETARG_TEXT_PP(0);
	p = VARDATA_ANY(name);
	len = VARSIZE_ANY_EXHDR(name);
	token = PG_GETARG_INT64(1);
	dlock_check_name_arg(p, len);
	dlock_check_namespace(p, len);

	relid = get_relname_relid("held", get_namespace_oid("dlock", false));
	if (!OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("dlock.held does not exist")));
	name_att = get_attnum(relid, "name");
	expires_att = get_attnum(relid, "expires_at");
	rel = table_open(relid, AccessShareLock);
	pk = dlock_primary_key_index(rel);
	if (!OidIsValid(pk) || name_att == InvalidAttrNumber ||
		expires_att == InvalidAttrNumber)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("dlock.held does not have the shape dlock created")));

	snapshot = RegisterSnapshot(GetLatestSnapshot());
	ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_INT8EQ, Int64GetDatum(token));
	scan = systable_beginscan(rel, pk, true, snapshot, 1, &key);
	tup = systable_getnext(scan);
	if (HeapTupleIsValid(tup))
	{
		TupleDesc	desc = RelationGetDescr(rel);
		bool		isnull;
		Datum		d = heap_getattr(tup, name_att, desc, &isnull);

		if (!isnull)
		{
			text	   *held = DatumGetTextPP(d);

			current = (int) VARSIZE_ANY_EXHDR(held) == len &&
				memcmp(VARDATA_ANY(held), p, len) == 0;
		}
		d = heap_getattr(tup, expires_att, desc, &isnull);
		if (current && !isnull &&
			DatumGetTimestampTz(d) <= GetCurrentTimestamp())
			current = false;
	}
	systable_endscan(scan);
	UnregisterSnapshot(snapshot);
	table_close(rel, AccessShareLock);
	PG_RETURN_BOOL(current);
}
