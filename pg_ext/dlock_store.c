/* SPDX-License-Identifier: PostgreSQL */
/*
 * dlock_store.c
 *		The lock manager's tables: loading them at start and writing each
 *		batch's changes, row by row through the table access method (see
 *		"Direct writes") or, when a table has triggers, as one set-based
 *		statement per kind of change.
 *
 * Every function runs inside the worker's transaction, between SPI_connect
 * and SPI_finish.  Statements are prepared once and kept; values travel
 * only as parameters (arrays unnested in the statement), never in the text.
 * Names are schema-qualified and operators spelled OPERATOR(pg_catalog.x),
 * and the worker runs with search_path = pg_catalog.
 *
 * The worker connects as the bootstrap superuser (a background worker of
 * PostgreSQL 15 can only connect as a role that may log in), but each of
 * its transactions runs as the role dlock_worker (NOLOGIN; SELECT, INSERT,
 * UPDATE and DELETE on these three tables and nothing else): triggers on
 * the tables and every statement here run with its rights.  Only switching
 * a table between logged and unlogged, which needs its owner, steps back.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "utils/acl.h"
#include "commands/extension.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "replication/syncrep.h"
#include "replication/walsender.h"
#include "replication/walsender_private.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/pmsignal.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "dlock.h"
#include "dlock_compat.h"
#include "dlock_store.h"

typedef enum StorePlan
{
	PLAN_HELD_INSERT,
	PLAN_HELD_UPDATE,
	PLAN_HELD_DELETE,
	PLAN_HELD_REPLACE,
	PLAN_QUEUE_INSERT,
	PLAN_QUEUE_DELETE,
	PLAN_QUEUE_REPLACE,
	PLAN_COUNTER,
	NUM_PLANS
} StorePlan;

static const char *const plan_sql[NUM_PLANS] = {
	[PLAN_HELD_INSERT] =
	"INSERT INTO dlock.held (token, name, owner, pid, backend_start, mode, count,"
	" granted_at, expires_at, ttl, implied, role, kept, capacity, permits, value)"
	" SELECT * FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.int8[]),"
	" pg_catalog.unnest($2::pg_catalog.text[]), pg_catalog.unnest($3::pg_catalog.text[]),"
	" pg_catalog.unnest($4::pg_catalog.int4[]), pg_catalog.unnest($5::pg_catalog.timestamptz[]),"
	" pg_catalog.unnest($6::pg_catalog.text[]), pg_catalog.unnest($7::pg_catalog.int4[]),"
	" pg_catalog.unnest($8::pg_catalog.timestamptz[]), pg_catalog.unnest($9::pg_catalog.timestamptz[]),"
	" pg_catalog.unnest($10::pg_catalog.interval[]), pg_catalog.unnest($11::pg_catalog.bool[]),"
	" pg_catalog.unnest($12::pg_catalog.regrole[]), pg_catalog.unnest($13::pg_catalog.int4[]),"
	" pg_catalog.unnest($14::pg_catalog.int4[]), pg_catalog.unnest($15::pg_catalog.int4[]),"
	" pg_catalog.unnest($16::pg_catalog.text[]))",
	[PLAN_HELD_UPDATE] =
	"UPDATE dlock.held h SET count = u.count, expires_at = u.expires_at, ttl = u.ttl,"
	" token = u.token, mode = u.mode, kept = u.kept, value = u.value"
	" FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.int8[]), pg_catalog.unnest($2::pg_catalog.int4[]),"
	" pg_catalog.unnest($3::pg_catalog.timestamptz[]), pg_catalog.unnest($4::pg_catalog.interval[]),"
	" pg_catalog.unnest($5::pg_catalog.int8[]), pg_catalog.unnest($6::pg_catalog.text[]),"
	" pg_catalog.unnest($7::pg_catalog.int4[]), pg_catalog.unnest($8::pg_catalog.text[]))"
	" AS u(old_token, count, expires_at, ttl, token, mode, kept, value)"
	" WHERE h.token OPERATOR(pg_catalog.=) u.old_token",
	[PLAN_HELD_DELETE] =
	"DELETE FROM dlock.held WHERE token OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.int8[])",
	/* a dead row takes a new one's values: one statement, not two */
	[PLAN_HELD_REPLACE] =
	"UPDATE dlock.held h SET token = u.token, name = u.name, owner = u.owner, pid = u.pid,"
	" backend_start = u.backend_start, mode = u.mode, count = u.count,"
	" granted_at = u.granted_at, expires_at = u.expires_at, ttl = u.ttl, implied = u.implied,"
	" role = u.role, kept = u.kept, capacity = u.capacity, permits = u.permits, value = u.value"
	" FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.int8[]),"
	" pg_catalog.unnest($2::pg_catalog.int8[]),"
	" pg_catalog.unnest($3::pg_catalog.text[]), pg_catalog.unnest($4::pg_catalog.text[]),"
	" pg_catalog.unnest($5::pg_catalog.int4[]), pg_catalog.unnest($6::pg_catalog.timestamptz[]),"
	" pg_catalog.unnest($7::pg_catalog.text[]), pg_catalog.unnest($8::pg_catalog.int4[]),"
	" pg_catalog.unnest($9::pg_catalog.timestamptz[]), pg_catalog.unnest($10::pg_catalog.timestamptz[]),"
	" pg_catalog.unnest($11::pg_catalog.interval[]), pg_catalog.unnest($12::pg_catalog.bool[]),"
	" pg_catalog.unnest($13::pg_catalog.regrole[]), pg_catalog.unnest($14::pg_catalog.int4[]),"
	" pg_catalog.unnest($15::pg_catalog.int4[]), pg_catalog.unnest($16::pg_catalog.int4[]),"
	" pg_catalog.unnest($17::pg_catalog.text[]))"
	" AS u(old_token, token, name, owner, pid, backend_start, mode, count, granted_at,"
	" expires_at, ttl, implied, role, kept, capacity, permits, value)"
	" WHERE h.token OPERATOR(pg_catalog.=) u.old_token",
	[PLAN_QUEUE_INSERT] =
	"INSERT INTO dlock.queue (ticket, name, owner, pid, backend_start, mode, since,"
	" timeout_at, ttl, conversion, implied, role, keep, kept_until, request, capacity, permits,"
	" value)"
	" SELECT * FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.int8[]),"
	" pg_catalog.unnest($2::pg_catalog.text[]), pg_catalog.unnest($3::pg_catalog.text[]),"
	" pg_catalog.unnest($4::pg_catalog.int4[]), pg_catalog.unnest($5::pg_catalog.timestamptz[]),"
	" pg_catalog.unnest($6::pg_catalog.text[]), pg_catalog.unnest($7::pg_catalog.timestamptz[]),"
	" pg_catalog.unnest($8::pg_catalog.timestamptz[]), pg_catalog.unnest($9::pg_catalog.interval[]),"
	" pg_catalog.unnest($10::pg_catalog.bool[]), pg_catalog.unnest($11::pg_catalog.bool[]),"
	" pg_catalog.unnest($12::pg_catalog.regrole[]), pg_catalog.unnest($13::pg_catalog.bool[]),"
	" pg_catalog.unnest($14::pg_catalog.timestamptz[]), pg_catalog.unnest($15::pg_catalog.int8[]),"
	" pg_catalog.unnest($16::pg_catalog.int4[]), pg_catalog.unnest($17::pg_catalog.int4[]),"
	" pg_catalog.unnest($18::pg_catalog.text[]))",
	[PLAN_QUEUE_DELETE] =
	"DELETE FROM dlock.queue WHERE ticket OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.int8[])",
	[PLAN_QUEUE_REPLACE] =
	"UPDATE dlock.queue q SET ticket = u.ticket, name = u.name, owner = u.owner, pid = u.pid,"
	" backend_start = u.backend_start, mode = u.mode, since = u.since,"
	" timeout_at = u.timeout_at, ttl = u.ttl, conversion = u.conversion, implied = u.implied,"
	" role = u.role, keep = u.keep, kept_until = u.kept_until, request = u.request,"
	" capacity = u.capacity, permits = u.permits, value = u.value"
	" FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.int8[]),"
	" pg_catalog.unnest($2::pg_catalog.int8[]),"
	" pg_catalog.unnest($3::pg_catalog.text[]), pg_catalog.unnest($4::pg_catalog.text[]),"
	" pg_catalog.unnest($5::pg_catalog.int4[]), pg_catalog.unnest($6::pg_catalog.timestamptz[]),"
	" pg_catalog.unnest($7::pg_catalog.text[]), pg_catalog.unnest($8::pg_catalog.timestamptz[]),"
	" pg_catalog.unnest($9::pg_catalog.timestamptz[]), pg_catalog.unnest($10::pg_catalog.interval[]),"
	" pg_catalog.unnest($11::pg_catalog.bool[]), pg_catalog.unnest($12::pg_catalog.bool[]),"
	" pg_catalog.unnest($13::pg_catalog.regrole[]), pg_catalog.unnest($14::pg_catalog.bool[]),"
	" pg_catalog.unnest($15::pg_catalog.timestamptz[]), pg_catalog.unnest($16::pg_catalog.int8[]),"
	" pg_catalog.unnest($17::pg_catalog.int4[]), pg_catalog.unnest($18::pg_catalog.int4[]),"
	" pg_catalog.unnest($19::pg_catalog.text[]))"
	" AS u(old_ticket, ticket, name, owner, pid, backend_start, mode, since, timeout_at,"
	" ttl, conversion, implied, role, keep, kept_until, request, capacity, permits, value)"
	" WHERE q.ticket OPERATOR(pg_catalog.=) u.old_ticket",
	[PLAN_COUNTER] =
	"UPDATE dlock.ticket_counter SET hi = $1",
};

static SPIPlanPtr plans[NUM_PLANS];

/* A column of values being gathered for one array parameter. */
/* Parameters of a statement at most: a row's columns and its old key. */
#define STORE_MAX_PARAMS 24

typedef struct Column
{
	Oid			type;
	Datum	   *values;
	bool	   *nulls;
	int			n;
} Column;

static void write_rows(StorePlan delete, StorePlan replace, StorePlan insert,
					   Column *gone, Column *fresh, int ncols);

static void
column_init(Column *c, Oid type, int capacity)
{
	c->type = type;
	c->values = palloc(sizeof(Datum) * Max(capacity, 1));
	c->nulls = palloc(sizeof(bool) * Max(capacity, 1));
	c->n = 0;
}

static void
column_add(Column *c, Datum value, bool isnull)
{
	c->values[c->n] = value;
	c->nulls[c->n] = isnull;
	c->n++;
}

/* Values from..to-1 of a column, not copied. */
static Column
column_slice(const Column *c, int from, int to)
{
	Column		slice = *c;

	slice.values = c->values + from;
	slice.nulls = c->nulls + from;
	slice.n = to - from;
	return slice;
}

static Datum
column_array(Column *c)
{
	int16		typlen;
	bool		typbyval;
	char		typalign;
	int			dims[1] = {c->n};
	int			lbs[1] = {1};

	get_typlenbyvalalign(c->type, &typlen, &typbyval, &typalign);
	return PointerGetDatum(construct_md_array(c->values, c->nulls, 1, dims, lbs,
											  c->type, typlen, typbyval, typalign));
}

static Datum
interval_datum(int64 us)
{
	Interval   *iv = palloc0(sizeof(Interval));

	iv->time = us;
	return IntervalPGetDatum(iv);
}

static int64
interval_us(Datum d)
{
	Interval   *iv = DatumGetIntervalP(d);

	return iv->time + ((int64) iv->month * DAYS_PER_MONTH + iv->day) * USECS_PER_DAY;
}

static int
mode_from_name(const char *name)
{
	for (int m = 0; m < DLOCK_NMODES; m++)
		if (strcmp(dlock_mode_name(m), name) == 0)
			return m;
	elog(ERROR, "unknown mode \"%s\" in dlock.held", name);
	return DLOCK_MODE_INVALID;
}

static SPIPlanPtr
get_plan(StorePlan which, int nargs, Oid *argtypes)
{
	if (plans[which] == NULL)
	{
		SPIPlanPtr	plan = SPI_prepare(plan_sql[which], nargs, argtypes);

		if (plan == NULL)
			elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
		if (SPI_keepplan(plan) != 0)
			elog(ERROR, "SPI_keepplan failed");
		plans[which] = plan;
	}
	return plans[which];
}

/* Run a kept plan with one array parameter per column. */
static void
run_plan(StorePlan which, Column *cols, int ncols, int expected_rows)
{
	Oid			argtypes[STORE_MAX_PARAMS];
	Datum		args[STORE_MAX_PARAMS];
	int			ret;

	if (ncols > STORE_MAX_PARAMS)
		elog(ERROR, "dlock store statement with %d parameters", ncols);
	for (int i = 0; i < ncols; i++)
	{
		argtypes[i] = get_array_type(cols[i].type);
		args[i] = column_array(&cols[i]);
	}
	ret = SPI_execute_plan(get_plan(which, ncols, argtypes), args, NULL, false, 0);
	if (ret < 0)
		elog(ERROR, "dlock store statement failed: %s", SPI_result_code_string(ret));
	if (SPI_processed != (uint64) expected_rows)
		elog(ERROR, "dlock store statement changed " UINT64_FORMAT " rows, expected %d",
			 SPI_processed, expected_rows);
}

void
dlock_store_forget_plans(void)
{
	for (int i = 0; i < NUM_PLANS; i++)
	{
		if (plans[i])
			SPI_freeplan(plans[i]);
		plans[i] = NULL;
	}
}

/* True if the extension and its tables exist in this database. */
bool
dlock_store_installed(void)
{
	Oid			nsp;

	if (!OidIsValid(get_extension_oid("dlock", true)))
		return false;
	nsp = get_namespace_oid("dlock", true);
	return OidIsValid(nsp) &&
		OidIsValid(get_relname_relid("held", nsp)) &&
		OidIsValid(get_relname_relid("queue", nsp)) &&
		OidIsValid(get_relname_relid("ticket_counter", nsp));
}

/* The worker's own user while a transaction runs as dlock_worker. */
static Oid	connected_user = InvalidOid;
static int	connected_sec_context = 0;

/* Run the open transaction as dlock_worker (when the role exists). */
static void
become_worker_role(void)
{
	Oid			role = get_role_oid("dlock_worker", true);

	GetUserIdAndSecContext(&connected_user, &connected_sec_context);
	if (OidIsValid(role))
		SetUserIdAndSecContext(role,
							   connected_sec_context | SECURITY_LOCAL_USERID_CHANGE);
}

/* Back to the connected user (an abort restores it by itself). */
static void
leave_worker_role(void)
{
	SetUserIdAndSecContext(connected_user, connected_sec_context);
}

/*
 * Make the tables' persistence match dlock.logged.  The ticket counter
 * stays logged either way: a crash empties unlogged tables, and tokens must
 * not start again from 1 (nor the worker find no counter and never load).
 */
void
dlock_store_set_logged(bool logged)
{
	static const char *const tables[] = {"held", "queue", "ticket_counter"};
	Oid			nsp = get_namespace_oid("dlock", false);
	bool		changed = false;

	for (size_t i = 0; i < lengthof(tables); i++)
	{
		Oid			relid = get_relname_relid(tables[i], nsp);
		bool		keep_logged = logged || strcmp(tables[i], "ticket_counter") == 0;
		char		want = keep_logged ? RELPERSISTENCE_PERMANENT : RELPERSISTENCE_UNLOGGED;
		StringInfoData sql;

		if (get_rel_persistence(relid) == want)
			continue;
		/* table names are our own constants, not input */
		initStringInfo(&sql);
		appendStringInfo(&sql, "ALTER TABLE dlock.%s SET %s", tables[i],
						 keep_logged ? "LOGGED" : "UNLOGGED");
		/* only the tables' owner may: the connected superuser */
		leave_worker_role();
		if (SPI_execute(sql.data, false, 0) != SPI_OK_UTILITY)
			elog(ERROR, "could not change the persistence of dlock.%s", tables[i]);
		become_worker_role();
		ereport(LOG,
				(errmsg("dlock: table dlock.%s is now %s", tables[i],
						keep_logged ? "logged" : "unlogged")));
		changed = true;
	}

	/*
	 * The change rewrote the tables, their rows now carry this command's
	 * id: read them with a snapshot taken after it (the one taken when the
	 * transaction began sees them empty).
	 */
	if (changed)
	{
		CommandCounterIncrement();
		PopActiveSnapshot();
		PushActiveSnapshot(GetTransactionSnapshot());
	}
}

int64
dlock_store_load_counter(void)
{
	bool		isnull;
	Datum		d;

	if (SPI_execute("SELECT hi FROM dlock.ticket_counter", true, 0) != SPI_OK_SELECT ||
		SPI_processed != 1)
		elog(ERROR, "dlock.ticket_counter must hold exactly one row");
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	if (isnull)
		elog(ERROR, "dlock.ticket_counter.hi is null");
	return DatumGetInt64(d);
}

/*
 * The versions of the SQL objects (sql/dlock--*.sql, dlock.control) this
 * library can run against, oldest first; the last is the library's own.
 */
static const char *const dlock_sql_versions[] = {"1.0", "1.1", "1.2"};

/*
 * Refuse SQL objects of a version this library does not know: their tables
 * may not be what it reads and writes.  An update script of the extension
 * (ALTER EXTENSION dlock UPDATE) or the library of that version fixes it.
 */
void
dlock_store_check_version(void)
{
	char	   *v;

	if (SPI_execute("SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'dlock'",
					true, 0) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "the dlock extension is not installed");
	v = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	for (size_t i = 0; i < lengthof(dlock_sql_versions); i++)
		if (v && strcmp(v, dlock_sql_versions[i]) == 0)
			return;
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("the dlock library (%s) does not know the SQL objects of version %s: "
					"run ALTER EXTENSION dlock UPDATE, or install the library of that version",
					dlock_sql_versions[lengthof(dlock_sql_versions) - 1], v ? v : "?")));
}

void
dlock_store_save_counter(int64 hi)
{
	Oid			argtypes[1] = {INT8OID};
	Datum		args[1] = {Int64GetDatum(hi)};

	if (SPI_execute_plan(get_plan(PLAN_COUNTER, 1, argtypes), args, NULL,
						 false, 0) != SPI_OK_UPDATE || SPI_processed != 1)
		elog(ERROR, "could not update dlock.ticket_counter");
}

/*
 * Waiters live in memory and the table mirrors them: their calls submit
 * them again.  Only kept places (core 14) come back from the table: a place
 * whose call was waiting is kept from now for its ttl (the call, if it
 * still waits, resumes it); each request's rows go to cb together, in
 * ticket order.  A request that does not load is dropped with a warning:
 * a place lost costs its owner its turn, never the lock manager its start.
 */
void
dlock_store_load_kept(dlock_kept_cb cb)
{
	SPIPlanPtr	plan;
	Portal		portal;
	List	   *bad = NIL;
	DLmWaiterRow *rows = NULL;
	int			n = 0,
				cap = 0;
	int64		request = 0;
	ListCell   *lc;

	if (SPI_execute("DELETE FROM dlock.queue WHERE NOT keep OR owner IS NULL OR ttl IS NULL",
					false, 0) != SPI_OK_DELETE ||
		SPI_execute("UPDATE dlock.queue SET kept_until ="
					" pg_catalog.statement_timestamp() OPERATOR(pg_catalog.+) ttl"
					" WHERE kept_until IS NULL", false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not prepare dlock.queue");
	plan = SPI_prepare("SELECT request, ticket, name, owner, pid, backend_start, mode, since,"
					   " kept_until, ttl, implied, role, capacity, permits, value FROM dlock.queue"
					   " WHERE owner IS NOT NULL AND ttl IS NOT NULL AND kept_until IS NOT NULL"
					   " ORDER BY request, ticket",
					   0, NULL);
	if (plan == NULL)
		elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
	/* not read-only: it must see the two statements above */
	portal = SPI_cursor_open(NULL, plan, NULL, NULL, false);
	for (;;)
	{
		bool		done;

		SPI_cursor_fetch(portal, true, 1000);
		done = SPI_processed == 0;
		for (uint64 i = 0; i <= SPI_processed; i++)
		{
			HeapTuple	tup;
			bool		isnull[15];
			Datum		v[15];
			DLmWaiterRow *row;

			if (i == SPI_processed)
			{
				if (!done)
					break;
				v[0] = 0;		/* the end: load the last request */
			}
			else
			{
				tup = SPI_tuptable->vals[i];
				for (int c = 0; c < 15; c++)
					v[c] = SPI_getbinval(tup, SPI_tuptable->tupdesc, c + 1, &isnull[c]);
			}
			if (n > 0 && (i == SPI_processed || DatumGetInt64(v[0]) != request))
			{
				DLmError	err = cb(rows, n);

				if (err != DLM_OK)
				{
					ereport(WARNING,
							(errmsg("dlock: kept place of ticket " INT64_FORMAT " in dlock.queue dropped: %s",
									request, dlm_error_message(err))));
					bad = lappend(bad, memcpy(palloc(sizeof(int64)), &request, sizeof(int64)));
				}
				n = 0;
			}
			if (i == SPI_processed)
				break;
			request = DatumGetInt64(v[0]);
			if (n == cap)
			{
				cap = cap ? cap * 2 : 8;
				rows = rows ? repalloc(rows, sizeof(DLmWaiterRow) * cap) :
					palloc(sizeof(DLmWaiterRow) * cap);
			}
			row = &rows[n++];
			memset(row, 0, sizeof(*row));
			row->ticket = DatumGetInt64(v[1]);
			row->name = TextDatumGetCString(v[2]);
			row->owner_key = TextDatumGetCString(v[3]);
			row->pid = DatumGetInt32(v[4]);
			row->backend_start = DatumGetTimestampTz(v[5]);
			row->mode = mode_from_name(TextDatumGetCString(v[6]));
			row->since = DatumGetTimestampTz(v[7]);
			row->kept_until = DatumGetTimestampTz(v[8]);
			row->ttl_us = interval_us(v[9]);
			row->implied = DatumGetBool(v[10]);
			row->role = isnull[11] ? InvalidOid : DatumGetObjectId(v[11]);
			row->capacity = isnull[12] ? 0 : DatumGetInt32(v[12]);
			row->permits = isnull[13] ? 0 : DatumGetInt32(v[13]);
			row->value = isnull[14] ? NULL : TextDatumGetCString(v[14]);
		}
		if (done)
			break;
		/* the rows of the request being gathered are copies: keep them */
		SPI_freetuptable(SPI_tuptable);
	}
	SPI_cursor_close(portal);
	SPI_freeplan(plan);
	foreach(lc, bad)
	{
		Oid			type = INT8OID;
		Datum		arg = Int64GetDatum(*(int64 *) lfirst(lc));

		if (SPI_execute_with_args("DELETE FROM dlock.queue WHERE request OPERATOR(pg_catalog.=) $1",
								  1, &type, &arg, NULL, false, 0) != SPI_OK_DELETE)
			elog(ERROR, "could not delete a kept place from dlock.queue");
	}
}

void
dlock_store_load_held(dlock_held_row_cb cb)
{
	Portal		portal;
	SPIPlanPtr	plan;

	plan = SPI_prepare("SELECT token, name, owner, pid, backend_start, mode, count,"
					   " granted_at, expires_at, ttl, implied, role, kept, capacity, permits, value"
					   " FROM dlock.held ORDER BY token", 0, NULL);	/* grant order (core 1) */
	if (plan == NULL)
		elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
	portal = SPI_cursor_open(NULL, plan, NULL, NULL, true);
	for (;;)
	{
		SPI_cursor_fetch(portal, true, 10000);
		if (SPI_processed == 0)
			break;
		for (uint64 i = 0; i < SPI_processed; i++)
		{
			HeapTuple	tup = SPI_tuptable->vals[i];
			TupleDesc	desc = SPI_tuptable->tupdesc;
			bool		isnull[16];
			Datum		v[16];
			char	   *name;
			char	   *owner;
			char	   *mode;
			DLmHolderRow row;

			for (int c = 0; c < 16; c++)
				v[c] = SPI_getbinval(tup, desc, c + 1, &isnull[c]);
			name = TextDatumGetCString(v[1]);
			owner = isnull[2] ? NULL : TextDatumGetCString(v[2]);
			mode = TextDatumGetCString(v[5]);
			row.name = name;
			row.owner_key = owner;
			row.pid = DatumGetInt32(v[3]);
			row.backend_start = DatumGetTimestampTz(v[4]);
			row.mode = mode_from_name(mode);
			row.count = DatumGetInt32(v[6]);
			row.token = DatumGetInt64(v[0]);
			row.granted_at = DatumGetTimestampTz(v[7]);
			row.expires_at = isnull[8] ? 0 : DatumGetTimestampTz(v[8]);
			row.ttl_us = isnull[9] ? 0 : interval_us(v[9]);
			row.implied = DatumGetBool(v[10]);
			row.role = isnull[11] ? InvalidOid : DatumGetObjectId(v[11]);
			row.kept = DatumGetInt32(v[12]);
			row.capacity = isnull[13] ? 0 : DatumGetInt32(v[13]);
			row.permits = isnull[14] ? 0 : DatumGetInt32(v[14]);
			row.value = isnull[15] ? NULL : TextDatumGetCString(v[15]);
			cb(&row);
			pfree(name);
			pfree(mode);
			if (owner)
				pfree(owner);
		}
		SPI_freetuptable(SPI_tuptable);
	}
	SPI_cursor_close(portal);
	SPI_freeplan(plan);
}

static Datum
text_datum(const char *s)
{
	return PointerGetDatum(cstring_to_text(s));
}

/* The columns of dlock.held and dlock.queue, in the order of their DDL. */
static const Oid held_types[] = {
	INT8OID,					/* token */
	TEXTOID,					/* name */
	TEXTOID,					/* owner */
	INT4OID,					/* pid */
	TIMESTAMPTZOID,				/* backend_start */
	TEXTOID,					/* mode */
	INT4OID,					/* count */
	TIMESTAMPTZOID,				/* granted_at */
	TIMESTAMPTZOID,				/* expires_at */
	INTERVALOID,				/* ttl */
	BOOLOID,					/* implied */
	REGROLEOID,					/* role */
	INT4OID,					/* kept */
	INT4OID,					/* capacity */
	INT4OID,					/* permits */
	TEXTOID,					/* value */
};
static const Oid queue_types[] = {
	INT8OID,					/* ticket */
	TEXTOID,					/* name */
	TEXTOID,					/* owner */
	INT4OID,					/* pid */
	TIMESTAMPTZOID,				/* backend_start */
	TEXTOID,					/* mode */
	TIMESTAMPTZOID,				/* since */
	TIMESTAMPTZOID,				/* timeout_at */
	INTERVALOID,				/* ttl */
	BOOLOID,					/* conversion */
	BOOLOID,					/* implied */
	REGROLEOID,					/* role */
	BOOLOID,					/* keep */
	TIMESTAMPTZOID,				/* kept_until */
	INT8OID,					/* request */
	INT4OID,					/* capacity */
	INT4OID,					/* permits */
	TEXTOID,					/* value */
};

/* ---------------------------------------------------------------------
 * Direct writes
 *
 * A hand-off changes a row or two, and a statement's plan lookup, executor
 * start-up and shutdown cost several times the row work (the largest item
 * of the worker under contention).  So rows go straight through the table
 * and index access methods, as logical replication's apply does
 * (execReplication.c): a row is found by its key in the primary key,
 * changed by simple_table_tuple_*, and every index of the table is
 * maintained by ExecInsertIndexTuples.  This holds while the table has the
 * shape of our DDL and no trigger; otherwise the batch goes through the
 * statements above, so that a trigger someone added still fires.  The
 * CHECK on count is not evaluated here: the lock manager never makes a
 * holder with a count below 1 (core/README, invariants).
 * --------------------------------------------------------------------- */

typedef struct DirectTable
{
	Relation	rel;
	ResultRelInfo rri;			/* its open indexes */
	Relation	key_index;		/* the primary key, on column 1 */
	Snapshot	snapshot;
	IndexScanDesc scan;
	TupleTableSlot *found;		/* the row found by key */
	TupleTableSlot *row;		/* the row to write */
	EState	   *estate;
} DirectTable;

/*
 * Open dlock.<relname> for direct writes, or return false (nothing left
 * open) when its shape or triggers ask for statements.
 */
static bool
direct_open(DirectTable *t, EState *estate, const char *relname,
			const Oid *types, int ncols)
{
	Oid			relid = get_relname_relid(relname, get_namespace_oid("dlock", false));
	TupleDesc	desc;
	Oid			key_oid;
	bool		ok;

	t->rel = table_open(relid, RowExclusiveLock);
	desc = RelationGetDescr(t->rel);
	ok = t->rel->rd_rel->relkind == RELKIND_RELATION &&
		t->rel->trigdesc == NULL &&
		desc->natts == ncols &&
		!(desc->constr && desc->constr->has_generated_stored);
	for (int i = 0; ok && i < ncols; i++)
		ok = !TupleDescAttr(desc, i)->attisdropped &&
			TupleDescAttr(desc, i)->atttypid == types[i];
	key_oid = ok ? dlock_primary_key_index(t->rel) : InvalidOid;
	if (!OidIsValid(key_oid))
	{
		table_close(t->rel, NoLock);
		return false;
	}
	/* the same errors as UPDATE and DELETE if published without identity */
	CheckCmdReplicaIdentity(t->rel, CMD_UPDATE);
	CheckCmdReplicaIdentity(t->rel, CMD_DELETE);

	InitResultRelInfo(&t->rri, t->rel, 0, NULL, 0);
	ExecOpenIndices(&t->rri, false);
	t->key_index = NULL;
	for (int i = 0; i < t->rri.ri_NumIndices; i++)
	{
		Relation	index = t->rri.ri_IndexRelationDescs[i];

		if (RelationGetRelid(index) == key_oid &&
			index->rd_index->indnkeyatts == 1 &&
			index->rd_index->indkey.values[0] == 1)
			t->key_index = index;
	}
	if (t->key_index == NULL)
	{
		ExecCloseIndices(&t->rri);
		table_close(t->rel, NoLock);
		return false;
	}

	/* see what earlier statements of this transaction did */
	CommandCounterIncrement();
	t->snapshot = RegisterSnapshot(GetLatestSnapshot());
	t->scan = dlock_index_beginscan(t->rel, t->key_index, t->snapshot, 1, 0);
	t->found = table_slot_create(t->rel, NULL);
	t->row = MakeSingleTupleTableSlot(desc, &TTSOpsVirtual);
	t->estate = estate;
	return true;
}

static void
direct_close(DirectTable *t)
{
	index_endscan(t->scan);
	ExecDropSingleTupleTableSlot(t->found);
	ExecDropSingleTupleTableSlot(t->row);
	UnregisterSnapshot(t->snapshot);
	ExecCloseIndices(&t->rri);
	table_close(t->rel, NoLock);
	/* later statements of this transaction see these rows */
	CommandCounterIncrement();
}

/* Find the row keyed key into t->found. */
static void
direct_find(DirectTable *t, int64 key)
{
	ScanKeyData skey;

	ScanKeyInit(&skey, 1, BTEqualStrategyNumber, F_INT8EQ, Int64GetDatum(key));
	index_rescan(t->scan, &skey, 1, NULL, 0);
	if (!index_getnext_slot(t->scan, ForwardScanDirection, t->found))
		elog(ERROR, "dlock store: no row " INT64_FORMAT " in %s",
			 key, RelationGetRelationName(t->rel));
}

/* Put row i of the columns into t->row. */
static void
direct_fill(DirectTable *t, const Column *cols, int i)
{
	int			natts = t->row->tts_tupleDescriptor->natts;

	ExecClearTuple(t->row);
	for (int c = 0; c < natts; c++)
	{
		t->row->tts_values[c] = cols[c].values[i];
		t->row->tts_isnull[c] = cols[c].nulls[i];
	}
	ExecStoreVirtualTuple(t->row);
}

/* Write t->row: in place of t->found if replace, else as a new row. */
static void
direct_store(DirectTable *t, bool replace)
{
	DLockIndexUpdate update_indexes = DLOCK_INDEX_ALL;
	List	   *recheck;

	if (replace)
		update_indexes = dlock_tuple_update(t->rel, &t->found->tts_tid, t->row,
											t->snapshot);
	else
		simple_table_tuple_insert(t->rel, t->row);
	if (update_indexes != DLOCK_INDEX_NONE && t->rri.ri_NumIndices > 0)
	{
		recheck = dlock_insert_index_tuples(&t->rri, t->row, t->estate, replace,
											update_indexes);
		list_free(recheck);
	}
	ResetPerTupleExprContext(t->estate);
}

/*
 * As write_rows (below), directly: the rows keyed in gone[0] deleted, the
 * rows in fresh inserted, as many as pair up as one update each.
 */
static void
direct_write_rows(DirectTable *t, const Column *gone, const Column *fresh)
{
	int			npairs = Min(gone[0].n, fresh[0].n);

	for (int i = 0; i < gone[0].n; i++)
	{
		direct_find(t, DatumGetInt64(gone[0].values[i]));
		if (i < npairs)
		{
			direct_fill(t, fresh, i);
			direct_store(t, true);
		}
		else
			simple_table_tuple_delete(t->rel, &t->found->tts_tid, t->snapshot);
	}
	for (int i = npairs; i < fresh[0].n; i++)
	{
		direct_fill(t, fresh, i);
		direct_store(t, false);
	}
}

/*
 * Row i of hu (old_token, count, expires_at, ttl, token, mode: see
 * PLAN_HELD_UPDATE) applied to its dlock.held row.
 */
static void
direct_update_held(DirectTable *t, const Column *hu, int i)
{
	static const int held_column[] = {-1, 6, 8, 9, 0, 5, 12, 15};
	int			natts = t->row->tts_tupleDescriptor->natts;

	direct_find(t, DatumGetInt64(hu[0].values[i]));
	slot_getallattrs(t->found);
	ExecClearTuple(t->row);
	memcpy(t->row->tts_values, t->found->tts_values, natts * sizeof(Datum));
	memcpy(t->row->tts_isnull, t->found->tts_isnull, natts * sizeof(bool));
	for (int c = 1; c < (int) lengthof(held_column); c++)
	{
		t->row->tts_values[held_column[c]] = hu[c].values[i];
		t->row->tts_isnull[held_column[c]] = hu[c].nulls[i];
	}
	ExecStoreVirtualTuple(t->row);
	direct_store(t, true);
}

/* A waiter's row, appended to the columns q (dlock.queue's, in order). */
static void
queue_row(Column *q, const DLmWaiter *w)
{
	column_add(&q[0], Int64GetDatum(w->ticket), false);
	column_add(&q[1], text_datum(w->lock->name), false);
	column_add(&q[2], w->owner->key ? text_datum(w->owner->key) : (Datum) 0,
			   w->owner->key == NULL);
	column_add(&q[3], Int32GetDatum(w->pid), false);
	column_add(&q[4], TimestampTzGetDatum(w->backend_start), false);
	column_add(&q[5], text_datum(dlock_mode_name(w->mode)), false);
	column_add(&q[6], TimestampTzGetDatum(w->since), false);
	column_add(&q[7], TimestampTzGetDatum(w->timeout_at), w->timeout_at == 0);
	column_add(&q[8], interval_datum(w->ttl_us), w->ttl_us == 0);
	column_add(&q[9], BoolGetDatum(w->holder != NULL), false);
	column_add(&q[10], BoolGetDatum(w->implied), false);
	column_add(&q[11], ObjectIdGetDatum(w->role), false);
	column_add(&q[12], BoolGetDatum(w->keep), false);
	column_add(&q[13], TimestampTzGetDatum(w->kept_until), w->kept_until == 0);
	column_add(&q[14], Int64GetDatum(w->request), false);
	column_add(&q[15], Int32GetDatum(w->lock->capacity), w->lock->capacity == 0);
	column_add(&q[16], Int32GetDatum(w->permits), w->lock->capacity == 0);
	column_add(&q[17], w->value ? text_datum(w->value) : (Datum) 0, w->value == NULL);
}

/*
 * dlock_store_write
 *		Write the batch's changes: for each touched holder or waiter, insert
 *		the row of a new live one, delete the row of a dead stored one, and
 *		update a stored live one that changed.  Objects born and dead within
 *		the batch never reach the table.
 */
static void
dlock_store_write(DLockManager *lm)
{
	DLmHolder  *h;
	int			nh = 0;
	int			nw = 0;
	Column		hi[lengthof(held_types)];
	Column		hu[8];
	Column		hd[1];
	Column		qi[lengthof(queue_types)];
	Column		qu[lengthof(queue_types)];
	Column		qk[1];
	Column		qd[1];
	EState	   *estate;
	DirectTable table;

	while (dlm_touched_holder(lm, nh) != NULL)
		nh++;
	while (dlm_touched_waiter(lm, nw) != NULL)
		nw++;
	for (int c = 0; c < (int) lengthof(hi); c++)
		column_init(&hi[c], held_types[c], nh);
	column_init(&hu[0], INT8OID, nh);
	column_init(&hu[1], INT4OID, nh);
	column_init(&hu[2], TIMESTAMPTZOID, nh);
	column_init(&hu[3], INTERVALOID, nh);
	column_init(&hu[4], INT8OID, nh);
	column_init(&hu[5], TEXTOID, nh);
	column_init(&hu[6], INT4OID, nh);
	column_init(&hu[7], TEXTOID, nh);
	column_init(&hd[0], INT8OID, nh);

	for (int i = 0; (h = dlm_touched_holder(lm, i)) != NULL; i++)
	{
		const char *value = dlm_holder_value(h);

		if (h->p.dead)
		{
			if (h->p.stored)
				column_add(&hd[0], Int64GetDatum(h->stored_token), false);
		}
		else if (!h->p.stored)
		{
			column_add(&hi[0], Int64GetDatum(h->token), false);
			column_add(&hi[1], text_datum(h->lock->name), false);
			column_add(&hi[2], h->owner->key ? text_datum(h->owner->key) : (Datum) 0,
					   h->owner->key == NULL);
			column_add(&hi[3], Int32GetDatum(h->pid), false);
			column_add(&hi[4], TimestampTzGetDatum(h->backend_start), false);
			column_add(&hi[5], text_datum(dlock_mode_name(h->mode)), false);
			column_add(&hi[6], Int32GetDatum(h->count), false);
			column_add(&hi[7], TimestampTzGetDatum(h->granted_at), false);
			column_add(&hi[8], TimestampTzGetDatum(h->expires_at), h->expires_at == 0);
			column_add(&hi[9], interval_datum(h->ttl_us), h->ttl_us == 0);
			column_add(&hi[10], BoolGetDatum(h->implied), false);
			column_add(&hi[11], ObjectIdGetDatum(h->role), false);
			column_add(&hi[12], Int32GetDatum(dlm_holder_kept(h)), false);
			column_add(&hi[13], Int32GetDatum(h->lock->capacity), h->lock->capacity == 0);
			column_add(&hi[14], Int32GetDatum(dlm_holder_permits(h)), h->lock->capacity == 0);
			column_add(&hi[15], value ? text_datum(value) : (Datum) 0, value == NULL);
		}
		else if (h->p.dirty)
		{
			column_add(&hu[0], Int64GetDatum(h->stored_token), false);
			column_add(&hu[1], Int32GetDatum(h->count), false);
			column_add(&hu[2], TimestampTzGetDatum(h->expires_at), h->expires_at == 0);
			column_add(&hu[3], interval_datum(h->ttl_us), h->ttl_us == 0);
			column_add(&hu[4], Int64GetDatum(h->token), false);
			column_add(&hu[5], text_datum(dlock_mode_name(h->mode)), false);
			column_add(&hu[6], Int32GetDatum(dlm_holder_kept(h)), false);
			column_add(&hu[7], value ? text_datum(value) : (Datum) 0, value == NULL);
		}
	}

	for (int c = 0; c < (int) lengthof(qi); c++)
		column_init(&qi[c], queue_types[c], nw);
	column_init(&qd[0], INT8OID, nw);

	for (int c = 0; c < (int) lengthof(qu); c++)
		column_init(&qu[c], queue_types[c], nw);
	column_init(&qk[0], INT8OID, nw);
	for (size_t wi = 0; wi < (size_t) nw; wi++)
	{
		DLmWaiter  *w = dlm_touched_waiter(lm, wi);

		if (w->p.dead)
		{
			if (w->p.stored)
				column_add(&qd[0], Int64GetDatum(w->ticket), false);
		}
		else if (!w->p.stored)
			queue_row(qi, w);
		else if (w->p.dirty)
		{
			/* a kept place detached or resumed: its row, under its own key */
			column_add(&qk[0], Int64GetDatum(w->ticket), false);
			queue_row(qu, w);
		}
	}

	estate = CreateExecutorState();
	if (hu[0].n + hd[0].n + hi[0].n > 0)
	{
		if (direct_open(&table, estate, "held", held_types, lengthof(held_types)))
		{
			for (int i = 0; i < hu[0].n; i++)
				direct_update_held(&table, hu, i);
			direct_write_rows(&table, hd, hi);
			direct_close(&table);
		}
		else
		{
			if (hu[0].n > 0)
				run_plan(PLAN_HELD_UPDATE, hu, lengthof(hu), hu[0].n);
			write_rows(PLAN_HELD_DELETE, PLAN_HELD_REPLACE, PLAN_HELD_INSERT, hd, hi, lengthof(hi));
		}
	}
	if (qd[0].n + qi[0].n + qk[0].n > 0)
	{
		if (direct_open(&table, estate, "queue", queue_types, lengthof(queue_types)))
		{
			for (int i = 0; i < qk[0].n; i++)
			{
				direct_find(&table, DatumGetInt64(qk[0].values[i]));
				direct_fill(&table, qu, i);
				direct_store(&table, true);
			}
			direct_write_rows(&table, qd, qi);
			direct_close(&table);
		}
		else
		{
			if (qk[0].n > 0)
				write_rows(PLAN_QUEUE_DELETE, PLAN_QUEUE_REPLACE, PLAN_QUEUE_INSERT, qk, qu,
						   lengthof(qu));
			write_rows(PLAN_QUEUE_DELETE, PLAN_QUEUE_REPLACE, PLAN_QUEUE_INSERT, qd, qi, lengthof(qi));
		}
	}
	FreeExecutorState(estate);
}

/*
 * Delete the rows keyed in gone[0] and insert the rows in fresh[0..ncols-1]:
 * as many as pair up become one UPDATE each (under contention a release and
 * the next grant, a grant and a new waiter), the rest are deleted or
 * inserted.  Keys are never reused, so no order among them matters.
 */
static void
write_rows(StorePlan delete, StorePlan replace, StorePlan insert,
		   Column *gone, Column *fresh, int ncols)
{
	int			npairs = Min(gone[0].n, fresh[0].n);
	Column		cols[STORE_MAX_PARAMS];

	if (ncols + 1 > STORE_MAX_PARAMS)
		elog(ERROR, "dlock store statement with %d parameters", ncols + 1);
	if (npairs > 0)
	{
		cols[0] = column_slice(&gone[0], 0, npairs);
		for (int i = 0; i < ncols; i++)
			cols[i + 1] = column_slice(&fresh[i], 0, npairs);
		run_plan(replace, cols, ncols + 1, npairs);
	}
	if (gone[0].n > npairs)
	{
		cols[0] = column_slice(&gone[0], npairs, gone[0].n);
		run_plan(delete, cols, 1, cols[0].n);
	}
	if (fresh[0].n > npairs)
	{
		for (int i = 0; i < ncols; i++)
			cols[i] = column_slice(&fresh[i], npairs, fresh[0].n);
		run_plan(insert, cols, ncols, cols[0].n);
	}
}

/* ---------------------------------------------------------------------
 * The worker's transactions
 * --------------------------------------------------------------------- */

void
dlock_store_begin(void)
{
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	become_worker_role();
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	PushActiveSnapshot(GetTransactionSnapshot());
}

/*
 * dlock_store_standby_waits
 *		Whether a synchronous commit here waits for a synchronous standby.
 *		Our own copy of the setting: the worker reloads it before each batch
 *		(the walsenders' shared flag is not a stable interface).
 */
bool
dlock_store_standby_waits(void)
{
	return max_wal_senders > 0 &&
		SyncRepStandbyNames != NULL && SyncRepStandbyNames[0] != '\0';
}

/* The walsenders' position the last durable commit waits for. */
static int	confirm_mode = SYNC_REP_WAIT_FLUSH;

/*
 * dlock_store_commit
 *		Commit; with flush false, without waiting for the WAL flush (or a
 *		synchronous standby).  With flush true the server's own
 *		synchronous_commit applies if it is at least "on" (remote_apply on
 *		an HA primary included).
 *
 *		Returns what a synchronous standby must confirm before the batch
 *		may be answered: the commit's end, or this process's last commit's
 *		when this one wrote nothing (its answers rest on that one).  The
 *		caller checks it: PostgreSQL ends a commit's wait for the standby
 *		early (a cancel, a terminate, a shutdown, the setting cleared) and
 *		returns as if it had been confirmed.
 */
XLogRecPtr
dlock_store_commit(bool flush)
{
	bool		standby = flush && dlock_store_standby_waits();

	/*
	 * Durable means at least "on", whatever ALTER DATABASE/ROLE or the
	 * server's configuration says: a weaker setting inherited there would
	 * hand out a token twice after a crash.  A stronger one (remote_apply)
	 * is kept.
	 */
	if (!flush)
		(void) set_config_option("synchronous_commit", "off",
								 PGC_SUSET, PGC_S_SESSION, GUC_ACTION_LOCAL,
								 true, 0, false);
	else if (synchronous_commit < SYNCHRONOUS_COMMIT_REMOTE_FLUSH)
		(void) set_config_option("synchronous_commit", "on",
								 PGC_SUSET, PGC_S_SESSION, GUC_ACTION_LOCAL,
								 true, 0, false);
	confirm_mode = synchronous_commit >= SYNCHRONOUS_COMMIT_REMOTE_APPLY ?
		SYNC_REP_WAIT_APPLY : SYNC_REP_WAIT_FLUSH;
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	leave_worker_role();

	/*
	 * A commit waiting for a synchronous standby stops waiting when the
	 * postmaster dies, and ends as if the standby had confirmed it: a
	 * promoted standby may then never hold what this batch granted.  Answer
	 * nobody; the waiting backends die with the postmaster.
	 */
	if (!PostmasterIsAlive())
		proc_exit(1);
	return standby ? XactLastCommitEnd : InvalidXLogRecPtr;
}

/*
 * dlock_store_confirmed
 *		Whether the synchronous standbys have confirmed WAL up to upto, at
 *		the level the last durable commit waited for: what the walsenders
 *		have released, read under the lock that guards it.
 */
bool
dlock_store_confirmed(XLogRecPtr upto)
{
	XLogRecPtr	released;

	if (XLogRecPtrIsInvalid(upto))
		return true;
	LWLockAcquire(SyncRepLock, LW_SHARED);
	released = WalSndCtl->lsn[confirm_mode];
	LWLockRelease(SyncRepLock);
	return released >= upto;
}

/* Write the batch's changes in the open transaction. */
void
dlock_store_batch(DLockManager *lm)
{
	int64		hi;
	DLmLock    *l;

	if (dlm_counter_dirty(lm, &hi))
		dlock_store_save_counter(hi);
	if (dlm_touched_holder(lm, 0) || dlm_touched_waiter(lm, 0))
		dlock_store_write(lm);

	/*
	 * NOTIFY dlock_blocking with each lock's notify key (delivered at
	 * commit), so that holders who LISTEN learn someone waits behind them.
	 */
	for (size_t i = 0; (l = dlm_notified_lock(lm, i)) != NULL; i++)
		dlock_notify("dlock_blocking", l->name);
	/* NOTIFY dlock_leader: an election's leader or its value changed */
	for (size_t i = 0; (l = dlm_leader_change(lm, i)) != NULL; i++)
		dlock_notify("dlock_leader", l->name);
}
