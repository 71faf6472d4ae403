/*
 * dlock_store.c
 *		The lock manager's tables: loading them at start and writing each
 *		batch's changes as one set-based statement per kind of change.
 *
 * Every function runs inside the worker's transaction, between SPI_connect
 * and SPI_finish.  Statements are prepared once and kept; values travel
 * only as parameters (arrays unnested in the statement), never in the text.
 * Names are schema-qualified and operators spelled OPERATOR(pg_catalog.x),
 * and the worker runs with search_path = pg_catalog.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/pmsignal.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

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
	PLAN_NOTIFY,
	PLAN_COUNTER,
	/* the same for one row, with a parameter per value (one_row_plan) */
	PLAN_HELD_INSERT_ONE,
	PLAN_HELD_UPDATE_ONE,
	PLAN_HELD_DELETE_ONE,
	PLAN_HELD_REPLACE_ONE,
	PLAN_QUEUE_INSERT_ONE,
	PLAN_QUEUE_DELETE_ONE,
	PLAN_QUEUE_REPLACE_ONE,
	NUM_PLANS
} StorePlan;

/*
 * A hand-off writes a row or two per table: arrays unnested through a
 * function scan cost more than the row (a third of the worker's time under
 * contention), so one row goes through a plan of its own.
 */
static const StorePlan one_row_plan[] = {
	[PLAN_HELD_INSERT] = PLAN_HELD_INSERT_ONE,
	[PLAN_HELD_UPDATE] = PLAN_HELD_UPDATE_ONE,
	[PLAN_HELD_DELETE] = PLAN_HELD_DELETE_ONE,
	[PLAN_HELD_REPLACE] = PLAN_HELD_REPLACE_ONE,
	[PLAN_QUEUE_INSERT] = PLAN_QUEUE_INSERT_ONE,
	[PLAN_QUEUE_DELETE] = PLAN_QUEUE_DELETE_ONE,
	[PLAN_QUEUE_REPLACE] = PLAN_QUEUE_REPLACE_ONE,
	[PLAN_NOTIFY] = PLAN_NOTIFY,	/* none: the same plan */
	[PLAN_COUNTER] = PLAN_COUNTER,	/* none */
};

static const char *const plan_sql[NUM_PLANS] = {
	[PLAN_HELD_INSERT] =
	"INSERT INTO dlock.held (token, name, owner, pid, backend_start, mode, count,"
	" granted_at, expires_at, ttl, implied)"
	" SELECT * FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.int8[]),"
	" pg_catalog.unnest($2::pg_catalog.text[]), pg_catalog.unnest($3::pg_catalog.text[]),"
	" pg_catalog.unnest($4::pg_catalog.int4[]), pg_catalog.unnest($5::pg_catalog.timestamptz[]),"
	" pg_catalog.unnest($6::pg_catalog.text[]), pg_catalog.unnest($7::pg_catalog.int4[]),"
	" pg_catalog.unnest($8::pg_catalog.timestamptz[]), pg_catalog.unnest($9::pg_catalog.timestamptz[]),"
	" pg_catalog.unnest($10::pg_catalog.interval[]), pg_catalog.unnest($11::pg_catalog.bool[]))",
	[PLAN_HELD_UPDATE] =
	"UPDATE dlock.held h SET count = u.count, expires_at = u.expires_at, ttl = u.ttl,"
	" token = u.token, mode = u.mode"
	" FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.int8[]), pg_catalog.unnest($2::pg_catalog.int4[]),"
	" pg_catalog.unnest($3::pg_catalog.timestamptz[]), pg_catalog.unnest($4::pg_catalog.interval[]),"
	" pg_catalog.unnest($5::pg_catalog.int8[]), pg_catalog.unnest($6::pg_catalog.text[]))"
	" AS u(old_token, count, expires_at, ttl, token, mode)"
	" WHERE h.token OPERATOR(pg_catalog.=) u.old_token",
	[PLAN_HELD_DELETE] =
	"DELETE FROM dlock.held WHERE token OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.int8[])",
	/* a dead row takes a new one's values: one statement, not two */
	[PLAN_HELD_REPLACE] =
	"UPDATE dlock.held h SET token = u.token, name = u.name, owner = u.owner, pid = u.pid,"
	" backend_start = u.backend_start, mode = u.mode, count = u.count,"
	" granted_at = u.granted_at, expires_at = u.expires_at, ttl = u.ttl, implied = u.implied"
	" FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.int8[]),"
	" pg_catalog.unnest($2::pg_catalog.int8[]),"
	" pg_catalog.unnest($3::pg_catalog.text[]), pg_catalog.unnest($4::pg_catalog.text[]),"
	" pg_catalog.unnest($5::pg_catalog.int4[]), pg_catalog.unnest($6::pg_catalog.timestamptz[]),"
	" pg_catalog.unnest($7::pg_catalog.text[]), pg_catalog.unnest($8::pg_catalog.int4[]),"
	" pg_catalog.unnest($9::pg_catalog.timestamptz[]), pg_catalog.unnest($10::pg_catalog.timestamptz[]),"
	" pg_catalog.unnest($11::pg_catalog.interval[]), pg_catalog.unnest($12::pg_catalog.bool[]))"
	" AS u(old_token, token, name, owner, pid, backend_start, mode, count, granted_at,"
	" expires_at, ttl, implied)"
	" WHERE h.token OPERATOR(pg_catalog.=) u.old_token",
	[PLAN_QUEUE_INSERT] =
	"INSERT INTO dlock.queue (ticket, name, owner, pid, backend_start, mode, since,"
	" timeout_at, ttl, conversion, implied)"
	" SELECT * FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.int8[]),"
	" pg_catalog.unnest($2::pg_catalog.text[]), pg_catalog.unnest($3::pg_catalog.text[]),"
	" pg_catalog.unnest($4::pg_catalog.int4[]), pg_catalog.unnest($5::pg_catalog.timestamptz[]),"
	" pg_catalog.unnest($6::pg_catalog.text[]), pg_catalog.unnest($7::pg_catalog.timestamptz[]),"
	" pg_catalog.unnest($8::pg_catalog.timestamptz[]), pg_catalog.unnest($9::pg_catalog.interval[]),"
	" pg_catalog.unnest($10::pg_catalog.bool[]), pg_catalog.unnest($11::pg_catalog.bool[]))",
	[PLAN_QUEUE_DELETE] =
	"DELETE FROM dlock.queue WHERE ticket OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.int8[])",
	[PLAN_QUEUE_REPLACE] =
	"UPDATE dlock.queue q SET ticket = u.ticket, name = u.name, owner = u.owner, pid = u.pid,"
	" backend_start = u.backend_start, mode = u.mode, since = u.since,"
	" timeout_at = u.timeout_at, ttl = u.ttl, conversion = u.conversion, implied = u.implied"
	" FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.int8[]),"
	" pg_catalog.unnest($2::pg_catalog.int8[]),"
	" pg_catalog.unnest($3::pg_catalog.text[]), pg_catalog.unnest($4::pg_catalog.text[]),"
	" pg_catalog.unnest($5::pg_catalog.int4[]), pg_catalog.unnest($6::pg_catalog.timestamptz[]),"
	" pg_catalog.unnest($7::pg_catalog.text[]), pg_catalog.unnest($8::pg_catalog.timestamptz[]),"
	" pg_catalog.unnest($9::pg_catalog.timestamptz[]), pg_catalog.unnest($10::pg_catalog.interval[]),"
	" pg_catalog.unnest($11::pg_catalog.bool[]), pg_catalog.unnest($12::pg_catalog.bool[]))"
	" AS u(old_ticket, ticket, name, owner, pid, backend_start, mode, since, timeout_at,"
	" ttl, conversion, implied)"
	" WHERE q.ticket OPERATOR(pg_catalog.=) u.old_ticket",
	[PLAN_NOTIFY] =
	"SELECT pg_catalog.pg_notify('dlock_blocking', n)"
	" FROM pg_catalog.unnest($1::pg_catalog.text[]) AS n",
	[PLAN_COUNTER] =
	"UPDATE dlock.ticket_counter SET hi = $1",
	[PLAN_HELD_INSERT_ONE] =
	"INSERT INTO dlock.held (token, name, owner, pid, backend_start, mode, count,"
	" granted_at, expires_at, ttl, implied)"
	" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
	[PLAN_HELD_UPDATE_ONE] =
	"UPDATE dlock.held SET count = $2, expires_at = $3, ttl = $4, token = $5, mode = $6"
	" WHERE token OPERATOR(pg_catalog.=) $1",
	[PLAN_HELD_DELETE_ONE] =
	"DELETE FROM dlock.held WHERE token OPERATOR(pg_catalog.=) $1",
	[PLAN_HELD_REPLACE_ONE] =
	"UPDATE dlock.held SET token = $2, name = $3, owner = $4, pid = $5,"
	" backend_start = $6, mode = $7, count = $8, granted_at = $9, expires_at = $10,"
	" ttl = $11, implied = $12"
	" WHERE token OPERATOR(pg_catalog.=) $1",
	[PLAN_QUEUE_INSERT_ONE] =
	"INSERT INTO dlock.queue (ticket, name, owner, pid, backend_start, mode, since,"
	" timeout_at, ttl, conversion, implied)"
	" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
	[PLAN_QUEUE_DELETE_ONE] =
	"DELETE FROM dlock.queue WHERE ticket OPERATOR(pg_catalog.=) $1",
	[PLAN_QUEUE_REPLACE_ONE] =
	"UPDATE dlock.queue SET ticket = $2, name = $3, owner = $4, pid = $5,"
	" backend_start = $6, mode = $7, since = $8, timeout_at = $9, ttl = $10,"
	" conversion = $11, implied = $12"
	" WHERE ticket OPERATOR(pg_catalog.=) $1",
};

static SPIPlanPtr plans[NUM_PLANS];

/* A column of values being gathered for one array parameter. */
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

/*
 * Run a kept plan with one array parameter per column, or for one row its
 * one-row plan with the values themselves.
 */
static void
run_plan(StorePlan which, Column *cols, int ncols, int expected_rows)
{
	Oid			argtypes[16];
	Datum		args[16];
	char		nulls[17];
	int			ret;
	bool		one;

	StaticAssertStmt(lengthof(one_row_plan) == PLAN_COUNTER + 1,
					 "every plan with arrays has its entry in one_row_plan");
	Assert(which < lengthof(one_row_plan) && ncols <= 16);
	one = expected_rows == 1 && one_row_plan[which] != which;
	for (int i = 0; i < ncols; i++)
	{
		if (one)
		{
			argtypes[i] = cols[i].type;
			args[i] = cols[i].values[0];
			nulls[i] = cols[i].nulls[0] ? 'n' : ' ';
		}
		else
		{
			argtypes[i] = get_array_type(cols[i].type);
			args[i] = column_array(&cols[i]);
			nulls[i] = ' ';
		}
	}
	nulls[ncols] = '\0';
	if (one)
		which = one_row_plan[which];
	ret = SPI_execute_plan(get_plan(which, ncols, argtypes), args, nulls, false, 0);
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

/* Make the tables' persistence match dlock.logged. */
void
dlock_store_set_logged(bool logged)
{
	static const char *const tables[] = {"held", "queue", "ticket_counter"};
	Oid			nsp = get_namespace_oid("dlock", false);

	for (size_t i = 0; i < lengthof(tables); i++)
	{
		Oid			relid = get_relname_relid(tables[i], nsp);
		char		want = logged ? RELPERSISTENCE_PERMANENT : RELPERSISTENCE_UNLOGGED;
		StringInfoData sql;

		if (get_rel_persistence(relid) == want)
			continue;
		/* table names are our own constants, not input */
		initStringInfo(&sql);
		appendStringInfo(&sql, "ALTER TABLE dlock.%s SET %s", tables[i],
						 logged ? "LOGGED" : "UNLOGGED");
		if (SPI_execute(sql.data, false, 0) != SPI_OK_UTILITY)
			elog(ERROR, "could not change the persistence of dlock.%s", tables[i]);
		ereport(LOG,
				(errmsg("dlock: table dlock.%s is now %s", tables[i],
						logged ? "logged" : "unlogged")));
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

void
dlock_store_save_counter(int64 hi)
{
	Oid			argtypes[1] = {INT8OID};
	Datum		args[1] = {Int64GetDatum(hi)};

	if (SPI_execute_plan(get_plan(PLAN_COUNTER, 1, argtypes), args, NULL,
						 false, 0) != SPI_OK_UPDATE || SPI_processed != 1)
		elog(ERROR, "could not update dlock.ticket_counter");
}

/* Waiters live in memory and the table mirrors them: start from empty. */
void
dlock_store_clear_queue(void)
{
	if (SPI_execute("DELETE FROM dlock.queue", false, 0) != SPI_OK_DELETE)
		elog(ERROR, "could not clear dlock.queue");
}

void
dlock_store_load_held(dlock_held_row_cb cb)
{
	Portal		portal;
	SPIPlanPtr	plan;

	plan = SPI_prepare("SELECT token, name, owner, pid, backend_start, mode, count,"
					   " granted_at, expires_at, ttl, implied FROM dlock.held", 0, NULL);
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
			bool		isnull[11];
			Datum		v[11];
			char	   *name;
			char	   *owner;
			char	   *mode;
			DLmHolderRow row;

			for (int c = 0; c < 11; c++)
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

/*
 * dlock_store_write
 *		Write the batch's changes: for each touched holder or waiter, insert
 *		the row of a new live one, delete the row of a dead stored one, and
 *		update a stored live one that changed.  Objects born and dead within
 *		the batch never reach the table.
 */
static void
dlock_store_write(DLmHolder *holders, DLmWaiter *waiters)
{
	int			nh = 0;
	int			nw = 0;
	Column		hi[11];
	Column		hu[6];
	Column		hd[1];
	Column		qi[11];
	Column		qd[1];

	for (DLmHolder *h = holders; h; h = h->touched_next)
		nh++;
	for (DLmWaiter *w = waiters; w; w = w->touched_next)
		nw++;
	column_init(&hi[0], INT8OID, nh);
	column_init(&hi[1], TEXTOID, nh);
	column_init(&hi[2], TEXTOID, nh);
	column_init(&hi[3], INT4OID, nh);
	column_init(&hi[4], TIMESTAMPTZOID, nh);
	column_init(&hi[5], TEXTOID, nh);
	column_init(&hi[6], INT4OID, nh);
	column_init(&hi[7], TIMESTAMPTZOID, nh);
	column_init(&hi[8], TIMESTAMPTZOID, nh);
	column_init(&hi[9], INTERVALOID, nh);
	column_init(&hi[10], BOOLOID, nh);
	column_init(&hu[0], INT8OID, nh);
	column_init(&hu[1], INT4OID, nh);
	column_init(&hu[2], TIMESTAMPTZOID, nh);
	column_init(&hu[3], INTERVALOID, nh);
	column_init(&hu[4], INT8OID, nh);
	column_init(&hu[5], TEXTOID, nh);
	column_init(&hd[0], INT8OID, nh);

	for (DLmHolder *h = holders; h; h = h->touched_next)
	{
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
		}
		else if (h->p.dirty)
		{
			column_add(&hu[0], Int64GetDatum(h->stored_token), false);
			column_add(&hu[1], Int32GetDatum(h->count), false);
			column_add(&hu[2], TimestampTzGetDatum(h->expires_at), h->expires_at == 0);
			column_add(&hu[3], interval_datum(h->ttl_us), h->ttl_us == 0);
			column_add(&hu[4], Int64GetDatum(h->token), false);
			column_add(&hu[5], text_datum(dlock_mode_name(h->mode)), false);
		}
	}

	column_init(&qi[0], INT8OID, nw);
	column_init(&qi[1], TEXTOID, nw);
	column_init(&qi[2], TEXTOID, nw);
	column_init(&qi[3], INT4OID, nw);
	column_init(&qi[4], TIMESTAMPTZOID, nw);
	column_init(&qi[5], TEXTOID, nw);
	column_init(&qi[6], TIMESTAMPTZOID, nw);
	column_init(&qi[7], TIMESTAMPTZOID, nw);
	column_init(&qi[8], INTERVALOID, nw);
	column_init(&qi[9], BOOLOID, nw);
	column_init(&qi[10], BOOLOID, nw);
	column_init(&qd[0], INT8OID, nw);

	for (DLmWaiter *w = waiters; w; w = w->touched_next)
	{
		if (w->p.dead)
		{
			if (w->p.stored)
				column_add(&qd[0], Int64GetDatum(w->ticket), false);
		}
		else if (!w->p.stored)
		{
			column_add(&qi[0], Int64GetDatum(w->ticket), false);
			column_add(&qi[1], text_datum(w->lock->name), false);
			column_add(&qi[2], w->owner->key ? text_datum(w->owner->key) : (Datum) 0,
					   w->owner->key == NULL);
			column_add(&qi[3], Int32GetDatum(w->pid), false);
			column_add(&qi[4], TimestampTzGetDatum(w->backend_start), false);
			column_add(&qi[5], text_datum(dlock_mode_name(w->mode)), false);
			column_add(&qi[6], TimestampTzGetDatum(w->since), false);
			column_add(&qi[7], TimestampTzGetDatum(w->timeout_at), w->timeout_at == 0);
			column_add(&qi[8], interval_datum(w->ttl_us), w->ttl_us == 0);
			column_add(&qi[9], BoolGetDatum(w->holder != NULL), false);
			column_add(&qi[10], BoolGetDatum(w->implied), false);
		}
	}

	if (hu[0].n > 0)
		run_plan(PLAN_HELD_UPDATE, hu, 6, hu[0].n);
	write_rows(PLAN_HELD_DELETE, PLAN_HELD_REPLACE, PLAN_HELD_INSERT, hd, hi, 11);
	write_rows(PLAN_QUEUE_DELETE, PLAN_QUEUE_REPLACE, PLAN_QUEUE_INSERT, qd, qi, 11);
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
	Column		cols[16];

	Assert(ncols + 1 <= lengthof(cols));
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

/*
 * dlock_store_notify
 *		NOTIFY dlock_blocking with each lock name (delivered at commit), so
 *		that holders who LISTEN learn someone waits behind them.
 */
static void
dlock_store_notify(List *names)
{
	Column		n[1];
	ListCell   *lc;

	column_init(&n[0], TEXTOID, list_length(names));
	foreach(lc, names)
		column_add(&n[0], text_datum(lfirst(lc)), false);
	run_plan(PLAN_NOTIFY, n, 1, n[0].n);
}

/* ---------------------------------------------------------------------
 * The worker's transactions
 * --------------------------------------------------------------------- */

void
dlock_store_begin(void)
{
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	PushActiveSnapshot(GetTransactionSnapshot());
}

/*
 * dlock_store_commit
 *		Commit; with flush false, without waiting for the WAL flush (or a
 *		synchronous standby).  With flush true the server's own
 *		synchronous_commit applies if it is at least "on" (remote_apply on
 *		an HA primary included).
 */
void
dlock_store_commit(bool flush)
{
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
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();

	/*
	 * A commit waiting for a synchronous standby stops waiting when the
	 * postmaster dies, and ends as if the standby had confirmed it: a
	 * promoted standby may then never hold what this batch granted.  Answer
	 * nobody; the waiting backends die with the postmaster.
	 */
	if (!PostmasterIsAlive())
		proc_exit(1);
}

/* Write the batch's changes in the open transaction. */
void
dlock_store_batch(DLockManager *lm)
{
	int64		hi;
	List	   *names = NIL;

	if (dlm_counter_dirty(lm, &hi))
		dlock_store_save_counter(hi);
	if (dlm_touched_holders(lm) || dlm_touched_waiters(lm))
		dlock_store_write(dlm_touched_holders(lm), dlm_touched_waiters(lm));
	/* NOTIFY payloads are shorter than 8000 bytes */
	for (DLmLock *l = dlm_notified_locks(lm); l; l = l->notify_next)
		if (strlen(l->name) < 8000)
			names = lappend(names, (char *) l->name);
	if (names != NIL)
		dlock_store_notify(names);
}
