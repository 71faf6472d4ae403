/* SPDX-License-Identifier: PostgreSQL */
/*-------------------------------------------------------------------------
 *
 * dlock_stats.c
 *		The statistics behind the view dlock.stats: counted by the worker's
 *		service (the lock manager's own counters and the batches, commits,
 *		withdrawals and hand-offs, core/README 17 and 18), published to
 *		shared memory after each batch, read and reset by any backend.
 *
 * A reset does not touch the worker: it keeps a copy of the counters as
 * they are, and the view shows what came since.  So a reset takes effect
 * at once and the counters only ever grow in shared memory.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "nodes/pg_list.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/float.h"
#include "utils/timestamp.h"

#include "dlock.h"
#include "dlock_slots.h"
#include "dlock_stats.h"

PG_FUNCTION_INFO_V1(dlock_stats);
PG_FUNCTION_INFO_V1(dlock_stats_reset);

#define NCOUNTERS ((int) (sizeof(DLmCounters) / sizeof(int64)))
StaticAssertDecl(sizeof(DLmCounters) % sizeof(int64) == 0,
				 "DLmCounters must be int64 fields only");

/*
 * A new worker goes on from what the one before it published: its service
 * counts on from *carried.
 */
void
dlock_stats_worker_start(DLmCounters *carried)
{
	TimestampTz start = GetCurrentTimestamp();

	SpinLockAcquire(&dlock_shared->stats.mutex);
	*carried = dlock_shared->stats.now;
	if (dlock_shared->stats.since == 0)
		dlock_shared->stats.since = start;
	SpinLockRelease(&dlock_shared->stats.mutex);
}

/* After a batch was published: the service's counters and the sizes, for the view. */
void
dlock_stats_publish(const DLmCounters *counted, DLockManager *lm)
{
	int64		holders,
				waiting,
				kept;

	dlm_sizes(lm, &holders, &waiting, &kept);
	SpinLockAcquire(&dlock_shared->stats.mutex);
	dlock_shared->stats.now = *counted;
	dlock_shared->stats.holders = holders;
	dlock_shared->stats.waiting = waiting;
	dlock_shared->stats.kept = kept;
	SpinLockRelease(&dlock_shared->stats.mutex);
}

/* ---------------------------------------------------------------- SQL */

/* le bounds in seconds, then the cumulative counts up to each (the last: all) */
static void
histogram(const int64 *buckets, Datum *bounds, Datum *counts)
{
	int64		sum = 0;

	for (int b = 0; b < DLM_WAIT_BUCKETS; b++)
	{
		sum += buckets[b];
		counts[b] = Int64GetDatum(sum);
		bounds[b] = Float8GetDatum(b < DLM_WAIT_BUCKETS - 1 ?
								   dlm_wait_bounds_us[b] / 1e6 : get_float8_infinity());
	}
}

static Datum
float8_array(Datum *d)
{
	return PointerGetDatum(construct_array(d, DLM_WAIT_BUCKETS, FLOAT8OID, 8,
										   FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
}

static Datum
int8_array(Datum *d)
{
	return PointerGetDatum(construct_array(d, DLM_WAIT_BUCKETS, INT8OID, 8,
										   FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
}

/*
 * dlock_stats()
 *		One row: the counters since the start or the last reset, the
 *		picture's sizes now, the histograms as Prometheus wants them.
 */
Datum
dlock_stats(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	DLmCounters now,
				base;
	TimestampTz since;
	int64		holders,
				waiting,
				kept;
	int64	   *c;
	Datum		values[40];
	bool		nulls[40] = {0};
	Datum		bounds[DLM_WAIT_BUCKETS],
				counts[DLM_WAIT_BUCKETS];
	int64		waited;
	int			i = 0;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "dlock_stats must return a row");
	dlock_check_loaded();
	SpinLockAcquire(&dlock_shared->stats.mutex);
	now = dlock_shared->stats.now;
	base = dlock_shared->stats.base;
	since = dlock_shared->stats.since;
	holders = dlock_shared->stats.holders;
	waiting = dlock_shared->stats.waiting;
	kept = dlock_shared->stats.kept;
	SpinLockRelease(&dlock_shared->stats.mutex);

	c = (int64 *) &now;
	for (int k = 0; k < NCOUNTERS; k++)
		c[k] -= ((int64 *) &base)[k];
	waited = now.core.grants - now.core.grants_immediate;

	values[i] = TimestampTzGetDatum(since);
	nulls[i++] = since == 0;
	values[i++] = Int64GetDatum(now.core.requests);
	values[i++] = Int64GetDatum(now.core.grants);
	values[i++] = Int64GetDatum(now.core.grants_immediate);
	values[i++] = Int64GetDatum(now.core.waits);
	values[i++] = Int64GetDatum(now.timeouts);
	values[i++] = Int64GetDatum(now.cancels);
	values[i++] = Int64GetDatum(now.core.kept);
	values[i++] = Int64GetDatum(now.core.deadlocks);
	values[i++] = Int64GetDatum(now.core.refused);
	values[i++] = Int64GetDatum(now.core.errors);
	values[i++] = Int64GetDatum(now.core.expiries);
	values[i++] = Int64GetDatum(now.core.renewals);
	values[i++] = Int64GetDatum(now.core.releases);
	values[i++] = Int64GetDatum(now.core.conversions);
	values[i++] = Int64GetDatum(now.core.session_cleanups);
	values[i++] = Int64GetDatum(holders);
	values[i++] = Int64GetDatum(waiting);
	values[i++] = Int64GetDatum(kept);
	values[i++] = Int64GetDatum(now.batches);
	values[i++] = Int64GetDatum(now.commits);
	values[i] = Float8GetDatum(now.batches > 0 ? (double) now.batch_requests / now.batches : 0);
	nulls[i++] = now.batches == 0;
	values[i++] = Float8GetDatum(now.commit_us / 1e6);
	histogram(now.core.wait_buckets, bounds, counts);
	values[i++] = float8_array(bounds);
	values[i++] = int8_array(counts);
	values[i++] = Float8GetDatum(now.core.wait_us_sum / 1e6);
	values[i++] = Int64GetDatum(waited);
	histogram(now.handoff_buckets, bounds, counts);
	values[i++] = float8_array(bounds);
	values[i++] = int8_array(counts);
	values[i++] = Float8GetDatum(now.handoff_us_sum / 1e6);
	values[i++] = Int64GetDatum(now.handoffs);
	Assert(i == tupdesc->natts);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/* dlock_stats_reset(): the counters start again from zero (sizes are not counters). */
Datum
dlock_stats_reset(PG_FUNCTION_ARGS)
{
	TimestampTz at;

	dlock_check_loaded();
	at = GetCurrentTimestamp();
	SpinLockAcquire(&dlock_shared->stats.mutex);
	dlock_shared->stats.base = dlock_shared->stats.now;
	dlock_shared->stats.since = at;
	SpinLockRelease(&dlock_shared->stats.mutex);
	PG_RETURN_VOID();
}
