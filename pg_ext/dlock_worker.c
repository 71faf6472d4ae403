/* SPDX-License-Identifier: PostgreSQL */
/*
 * dlock_worker.c
 *		The dlock lock manager process: one background worker per cluster,
 *		the single writer of the lock tables.  It reads as its loop:
 *
 *		collect		take every new request, withdrawal and session end from
 *					the slots (dlock.h)
 *		decide		hand them, and lease expiry, to the lock manager
 *					(core/dlock_lm.h), which answers and lists what changed
 *		store		write the changed rows (dlock_store.c) in one
 *					transaction
 *		commit		flushed when a grant of an owner key or the ticket
 *					counter needs it
 *		publish		only then hand the answers to the slots, and release
 *					them to the backends once a synchronous standby (if
 *					one is named) has confirmed the commit
 *
 * Requests that arrive while a batch commits form the next batch, so
 * commits are grouped.  A batch that answers nobody may leave its writes
 * to the next batch's commit (DLOCK_DEFER_MS).  Loading the picture and
 * recovering from a failed batch are in dlock_recovery.c.
 *
 * Interface: dlock_worker_main (dlock.h).
 */
#include "postgres.h"

#include <malloc.h>

#include "access/xact.h"
#include "executor/spi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/pmsignal.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "dlock_compat.h"
#include "dlock_recovery.h"
#include "dlock_admin.h"
#include "dlock_slots.h"
#include "dlock_stats.h"
#include "dlock_store.h"

/*
 * A mass expiry is spread over batches of about DLOCK_EXPIRY_BUDGET_MS of
 * work each (deciding, deleting the rows, freeing them), so that a request
 * arriving meanwhile waits behind one such batch, not behind the whole
 * expiry.  How many leases fit is learnt from the batches that the limit
 * cut short (a row's cost varies with the machine and the table's state).
 */
#define DLOCK_EXPIRY_BUDGET_MS 10
#define DLOCK_EXPIRE_MIN 64
#define DLOCK_EXPIRE_MAX 100000

/*
 * A new waiter's row is written only once it has waited
 * dlock.queue_row_delay (core/README 9): under contention most waits are
 * shorter, and their rows would be written and deleted for nothing.  A
 * batch that answers nobody (one that announced a waiter, or cleaned up
 * after a session) leaves its writes to a later batch's commit, for at most
 * DLOCK_DEFER_MS: under contention the next release comes sooner, so a
 * hand-off costs one commit, not two.  The tables show such changes a few
 * milliseconds late, and never an answer before its commit.
 */
#define DLOCK_DEFER_MS 5
#define DLOCK_MAX_DEFERRED 64

static void run_batch(void);
static int	decide(List *ended, List *withdrawn, List *fresh, TimestampTz now);
static void session_gone(Request *last, TimestampTz now);
static void undo_grant(const Request *r, TimestampTz now);
static void publish_confirmed(XLogRecPtr upto, TimestampTz now);
static bool await_standby(XLogRecPtr upto);
static void give_back(TimestampTz now);
static void execute(Request *r, TimestampTz now);
static bool batch_changed(void);
static bool may_defer(TimestampTz now);
static bool work_due(TimestampTz now);
static void adapt_expire_limit(int expired, TimestampTz began);
static long sleep_ms(void);
static void reload_config(void);
static void force_settings(void);
static void keep_freed_memory(void);
static void worker_exit(int code, Datum arg);

/* The picture (dlock_recovery.c loads it); NULL until it is loaded. */
static DLockManager *lock_manager;

/* After an error: take new requests one at a time to isolate a bad one. */
static bool isolate = false;
static int	isolated_slot = -1; /* the one taken in this batch, or -1 */

static int	deferred_batches = 0;
static int	stats_fresh = 0;		/* new requests since the last publish */
static TimestampTz deferred_since;

/* Leases the next batch may expire (learnt: adapt_expire_limit). */
static int	expire_limit = DLOCK_EXPIRE_MIN;

/*
 * After a failed batch the worker pauses before it tries again, longer
 * after each failure in a row, so that a failure that persists (a table
 * altered, a disk full) neither spins nor floods the log.
 */
#define DLOCK_RETRY_MIN_MS 10
#define DLOCK_RETRY_MAX_MS 5000

/* When the worker last looked for the extension, while not ready. */
static TimestampTz last_install_check = 0;

/* Failed batches in a row, and when the last was logged. */
static int	failures = 0;
static TimestampTz last_failure_logged = 0;

void
dlock_worker_main(Datum main_arg)
{

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	BackgroundWorkerInitializeConnection(dlock_database, NULL, 0);
	pgstat_report_appname("dlock lock manager");

	force_settings();
	keep_freed_memory();

	slots_init();
	dlock_stats_worker_start();

	before_shmem_exit(worker_exit, (Datum) 0);
	SpinLockAcquire(&dlock_shared->mutex);
	dlock_shared->worker_pid = MyProcPid;
	dlock_shared->worker_latch = MyLatch;
	SpinLockRelease(&dlock_shared->mutex);

	for (;;)
	{
		isolated_slot = -1;
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
			reload_config();

		PG_TRY();
		{
			if (lock_manager == NULL)
			{
				TimestampTz now = GetCurrentTimestamp();
				XLogRecPtr	confirm_upto;

				/* look for the extension when asked, or once an interval */
				if (slots_work_pending() ||
					TimestampDifferenceExceeds(last_install_check, now,
											   dlock_reap_interval_ms))
				{
					last_install_check = now;
					lock_manager = reload(&confirm_upto);
					if (lock_manager)
						publish_confirmed(confirm_upto, GetCurrentTimestamp());
					if (lock_manager == NULL)
						slots_refuse_all(DLOCK_STATUS_NOT_READY,
								   psprintf("extension \"dlock\" is not installed in database \"%s\"",
											dlock_database));
				}
			}
			if (lock_manager)
				run_batch();
			else
				isolate = false;
		}
		PG_CATCH();
		{
			ErrorData  *edata;
			bool		loading = lock_manager == NULL;
			long		pause_ms;

			HOLD_INTERRUPTS();
			MemoryContextSwitchTo(TopMemoryContext);
			edata = CopyErrorData();
			FlushErrorState();
			failures++;
			pause_ms = Min((long) DLOCK_RETRY_MIN_MS << Min(failures - 1, 20),
						   DLOCK_RETRY_MAX_MS);
			/* every failure of a short run; then one line a minute */
			if (failures <= 5 ||
				TimestampDifferenceExceeds(last_failure_logged, GetCurrentTimestamp(),
										   60 * 1000))
			{
				ereport(LOG,
						(errmsg("dlock lock manager: %s failed (%d in a row): %s",
								loading ? "loading the lock tables" : "batch",
								failures, edata->message),
						 errdetail("The lock tables are rolled back to the last committed batch and reloaded; the next attempt is in %ld ms.",
								   pause_ms),
						 failures >= 5 ?
						 errhint("Requests fail with this error while it persists.  Check the dlock tables and the settings made with ALTER DATABASE or ALTER ROLE for database \"%s\".",
								 dlock_database) : 0));
				last_failure_logged = GetCurrentTimestamp();
			}
			/* the picture is rebuilt from the tables at the next pass */
			lock_manager = NULL;
			deferred_batches = 0;
			isolate = recover(edata->message, isolated_slot);
			/* a picture that cannot be loaded serves nobody: say why at once */
			if (loading)
				slots_refuse_all(DLOCK_STATUS_ERROR, edata->message);
			FreeErrorData(edata);
			RESUME_INTERRUPTS();
			(void) WaitLatch(MyLatch, WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, pause_ms,
							 PG_WAIT_EXTENSION);
			continue;
		}
		PG_END_TRY();

		if (failures > 0 && lock_manager)
		{
			if (failures > 5)
				ereport(LOG,
						(errmsg("dlock lock manager: working again after %d failed attempts",
								failures)));
			failures = 0;
		}

		if (isolate && isolated_slot >= 0)
			isolate = false;	/* the isolated request went through */

		/*
		 * Every submission sets our latch, so sleep unless work was left on
		 * purpose: isolation mode takes one request per batch.
		 */
		if (!isolate && !(lock_manager && work_due(GetCurrentTimestamp())))
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 sleep_ms(), PG_WAIT_EXTENSION);
	}
}

/*
 * run_batch
 *		One pass: collect, decide, store, commit, publish.  In isolation
 *		mode, notes the slot of the single request taken.
 */
static void
run_batch(void)
{
	List	   *ended = NIL;
	List	   *withdrawn = NIL;
	List	   *fresh = NIL;
	TimestampTz now;
	int			expired;
	int			rows_due;
	MemoryContext batch_cxt;
	bool		wrote = false;
	TimestampTz write_began;
	int64		write_us = 0;
	TimestampTz began;
	XLogRecPtr	upto = InvalidXLogRecPtr;

	isolated_slot = -1;
	batch_cxt = slots_batch_begin(deferred_batches > 0);
	MemoryContextSwitchTo(batch_cxt);
	slots_collect(&ended, &withdrawn, &fresh, isolate);
	/*
	 * The batch's clock, read after its requests are taken: a grant or
	 * renewal must not date from before its request arrived (a lease would
	 * end sooner than ttl after the client asked).
	 */
	now = GetCurrentTimestamp();
	if (ended == NIL && withdrawn == NIL && fresh == NIL && !work_due(now) &&
		deferred_batches == 0)
	{
		MemoryContextSwitchTo(TopMemoryContext);
		return;
	}
	if (isolate && fresh != NIL)
		isolated_slot = ((Request *) linitial(fresh))->slotno;

	expired = decide(ended, withdrawn, fresh, now);
	rows_due = dlm_queue_rows_due(lock_manager, now, false);

	if (batch_changed())
	{
		/*
		 * Rows already due must not wait longer, and deferring an expiry's
		 * rows would only pile them onto one batch.
		 */
		if (expired == 0 && rows_due == 0 && may_defer(now))
		{
			if (deferred_batches++ == 0)
				deferred_since = now;
			MemoryContextSwitchTo(TopMemoryContext);
			return;
		}
		/* rows soon due ride along with this commit rather than need one */
		(void) dlm_queue_rows_due(lock_manager, now, true);
		write_began = GetCurrentTimestamp();
		dlock_store_begin();
		dlock_store_batch(lock_manager);
		dlock_admin_notify();
		/*
		 * Tokens must never go back: the counter is flushed whatever the
		 * GUC.  With a synchronous standby every batch waits for it, session
		 * grants too: an isolated old primary must not answer a grant that
		 * the promoted standby grants again.
		 */
		upto = dlock_store_commit(dlm_counter_dirty(lock_manager, NULL) ||
								  (dlock_synchronous_commit &&
								   (dlm_batch_durable(lock_manager) ||
									dlock_store_standby_waits())));
		write_us = GetCurrentTimestamp() - write_began;
		wrote = true;
		MemoryContextSwitchTo(batch_cxt);
	}
	began = deferred_batches > 0 ? deferred_since : now;	/* hand-offs wait from here */
	deferred_batches = 0;
	dlm_settle(lock_manager);	/* the rows match: what left the picture goes */
	/*
	 * The answers are staged now and released once a synchronous standby
	 * has the commit: a worker that ends meanwhile leaves them to its
	 * successor, which never decides them again.
	 */
	slots_stage(lock_manager);
	publish_confirmed(upto, now);
	dlock_stats_batch(lock_manager, stats_fresh, wrote, write_us, began);
	stats_fresh = 0;
	adapt_expire_limit(expired, now);
	MemoryContextSwitchTo(TopMemoryContext);
	pgstat_report_stat(false);
}


/*
 * decide
 *		Hand the batch to the lock manager.  Withdrawals first: nothing below
 *		may grant a request its backend has given up on (a request withdrawn
 *		before it was decided never ran).  Then ended sessions, due leases,
 *		and the new requests in submission order.  Returns how many leases
 *		it expired.
 */
static int
decide(List *ended, List *withdrawn, List *fresh, TimestampTz now)
{
	ListCell   *lc;
	int			expired;

	stats_fresh += list_length(fresh);
	if (withdrawn != NIL)
	{
		int		   *slots = palloc(sizeof(int) * list_length(withdrawn));
		int			n = 0;

		dlock_stats_withdrawals(lock_manager, withdrawn);
		foreach(lc, withdrawn)
			slots[n++] = ((Request *) lfirst(lc))->slotno;
		dlm_withdraw(lock_manager, slots, n, now);
	}
	foreach(lc, ended)
		session_gone(lfirst(lc), now);
	expired = dlm_expire(lock_manager, now, expire_limit);
	foreach(lc, fresh)
		execute(lfirst(lc), now);
	foreach(lc, fresh)
	{
		Request    *r = lfirst(lc);

		/* still waiting: kept (a grant or an error stays its answer) */
		if (r->withdraw_after && dlm_waiter_of(lock_manager, r->slotno) != NULL)
			dlm_withdraw(lock_manager, &r->slotno, 1, now);
	}
	if (dlm_broken(lock_manager))
		elog(ERROR, "out of memory in the dlock lock manager");
	return expired;
}

/*
 * session_gone
 *		Clean up after an exited session: a grant it never collected or an
 *		undo of one still pending (owner-keyed: the session's own locks go
 *		anyway), its waiting request, and every lock the session owns.
 */
static void
session_gone(Request *last, TimestampTz now)
{
	bool		uncollected = (last->state == DLOCK_SLOT_DONE || last->state == DLOCK_SLOT_STAGED) &&
		last->status == DLOCK_STATUS_GRANTED && dlock_op_grants(last->op);
	bool		undo_pending = last->abandoned && last->op == DLOCK_OP_RELEASE &&
		(last->state == DLOCK_SLOT_SUBMITTED || last->state == DLOCK_SLOT_ACCEPTED);

	if ((uncollected || undo_pending) && last->owner != NULL)
		undo_grant(last, now);
	dlm_session_end(lock_manager, last->pid, last->session_start, last->slotno, now);
	slots_end_session(last->slotno);
}

/* Release again what r was granted, whoever owns its key now. */
static void
undo_grant(const Request *r, TimestampTz now)
{
	DLmRequest	undo = {0};

	undo.op = DLOCK_OP_RELEASE;
	undo.requester = DLM_NOBODY;
	undo.owner_key = r->owner;
	undo.pid = r->pid;
	undo.session_start = r->session_start;
	undo.any_role = true;
	undo.names = (const char *const *) r->names;
	undo.nnames = r->nnames;
	(void) dlm_request(lock_manager, &undo, now);
}

static void
execute(Request *r, TimestampTz now)
{
	DLmRequest	q = {0};

	if (dlock_admin_execute(lock_manager, r, now))
		return;

	q.op = r->op;
	q.requester = r->slotno;
	q.owner_key = r->owner;
	q.pid = r->pid;
	q.session_start = r->session_start;
	q.mode = r->mode;
	q.names = (const char *const *) r->names;
	q.nnames = r->nnames;
	q.ttl_us = r->ttl_us;
	q.max_ttl_us = r->max_ttl_us;
	q.timeout_at = r->timeout_at;
	q.keep_place = r->keep_place;
	q.capacity = r->capacity;
	q.permits = r->permits;
	q.election = r->election;
	q.value = r->value;
	q.role = r->role;
	q.any_role = r->any_role;
	q.role_max_locks = r->quotas.max_locks;
	q.owner_max_locks = r->quotas.max_locks_per_owner;
	q.role_max_bytes = r->quotas.max_bytes;
	q.owner_max_bytes = r->quotas.max_bytes_per_owner;
	/* an error is answered to the request (on_answer) */
	(void) dlm_request(lock_manager, &q, now);
	dlock_admin_answered(r, now);
}


/* ---------------------------------------------------------------------
 * Store, commit, publish
 * --------------------------------------------------------------------- */

static bool
batch_changed(void)
{
	return dlm_touched_holders(lock_manager) != NULL ||
		dlm_touched_waiters(lock_manager) != NULL ||
		dlm_counter_dirty(lock_manager, NULL) ||
		dlm_notified_locks(lock_manager) != NULL;
}


/*
 * publish_confirmed
 *		Release the staged answers once a synchronous standby (if the
 *		settings name one) has confirmed upto.  If the setting stops naming
 *		one first, the staged grants are given back and the releases
 *		committed under the new setting.
 */
static void
publish_confirmed(XLogRecPtr upto, TimestampTz now)
{
	while (!await_standby(upto))
	{
		give_back(now);
		dlock_store_begin();
		dlock_store_batch(lock_manager);
		upto = dlock_store_commit(true);
		dlm_settle(lock_manager);
		slots_stage(lock_manager);
	}
	slots_release_staged();
}

/*
 * await_standby
 *		Until a synchronous standby has confirmed the commit that upto ends
 *		(dlock_store_commit).  PostgreSQL ends a commit's wait for the
 *		standby early and returns from the commit as if it had been
 *		confirmed: at a cancel, a terminate, a shutdown, or when the setting
 *		stops naming a standby.  An isolated primary would then answer
 *		grants that a promoted standby never received.  So the wait goes on
 *		here: a cancel does not end it, a terminate or a shutdown ends the
 *		worker with nothing answered (the staged answers are its
 *		successor's to release, after its own wait).
 *		Returns false if the settings stopped naming a synchronous standby
 *		first: the batch can never be confirmed.
 */
static bool
await_standby(XLogRecPtr upto)
{
	bool		logged = false;

	while (!dlock_store_confirmed(upto))
	{
		if (ProcDiePending)
			CHECK_FOR_INTERRUPTS();	/* exits: nothing of the batch answered */
		QueryCancelPending = false;
		if (ConfigReloadPending)
			reload_config();
		if (!dlock_store_standby_waits())
			return false;
		if (!logged)
			ereport(LOG,
					(errmsg("dlock lock manager: no answer goes out until the synchronous standby confirms the last commit")));
		logged = true;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 10, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
	return true;
}

/*
 * give_back
 *		The batch's commit waited for a synchronous standby, and the setting
 *		stopped naming one before it confirmed: nothing the batch decided
 *		may be answered as if a standby had it.  Its grants are released
 *		again and their callers told so; renewals and conversions are
 *		reported unconfirmed.  The caller writes the releases.
 */
static void
give_back(TimestampTz now)
{
	ListCell   *lc;
	List	   *grants = slots_unconfirmed();

	ereport(LOG,
			(errmsg("dlock lock manager: synchronous_standby_names was cleared while a commit waited for the standby; %d grants of it are released again",
					list_length(grants))));
	foreach(lc, grants)
		undo_grant(lfirst(lc), now);
}

/* Whether this batch's writes may wait for a later batch's commit. */
static bool
may_defer(TimestampTz now)
{
	if (isolate || deferred_batches >= DLOCK_MAX_DEFERRED || slots_answers_ready())
		return false;
	return deferred_batches == 0 ||
		!TimestampDifferenceExceeds(deferred_since, now, DLOCK_DEFER_MS);
}


/*
 * After a batch that the expiry limit cut short: scale the limit to what
 * fits the budget by this batch's time, by at most a factor of two either
 * way (one slow batch, a checkpoint say, must not collapse it).
 */
static void
adapt_expire_limit(int expired, TimestampTz began)
{
	double		took_ms;
	double		scale;

	if (expired < expire_limit)
		return;
	took_ms = Max((GetCurrentTimestamp() - began) / 1000.0, 0.01);
	scale = Min(Max(DLOCK_EXPIRY_BUDGET_MS / took_ms, 0.5), 2.0);
	expire_limit = Min(Max((int) (expire_limit * scale), DLOCK_EXPIRE_MIN),
					   DLOCK_EXPIRE_MAX);
}

/* A lease has run out, or a waiter is due for its row. */
static bool
work_due(TimestampTz now)
{
	TimestampTz lease = dlm_next_expiry(lock_manager);
	TimestampTz row = dlm_next_queue_row(lock_manager);

	return (lease != 0 && lease <= now) || (row != 0 && row <= now);
}

/*
 * Milliseconds until the soonest lease runs out or waiter is due for its
 * row, capped by the interval.
 */
static long
sleep_ms(void)
{
	long		ms = dlock_reap_interval_ms;
	TimestampTz lease = lock_manager ? dlm_next_expiry(lock_manager) : 0;
	TimestampTz row = lock_manager ? dlm_next_queue_row(lock_manager) : 0;

	if (lease != 0)
		ms = Min(ms, TimestampDifferenceMilliseconds(GetCurrentTimestamp(), lease) + 1);
	if (row != 0)
		ms = Min(ms, TimestampDifferenceMilliseconds(GetCurrentTimestamp(), row) + 1);
	if (deferred_batches > 0)
		ms = Min(ms, TimestampDifferenceMilliseconds(GetCurrentTimestamp(),
													 deferred_since + DLOCK_DEFER_MS * 1000) + 1);
	return Max(ms, 0);
}


static void
reload_config(void)
{
	ConfigReloadPending = false;
	ProcessConfigFile(PGC_SIGHUP);
	if (lock_manager)
	{
		dlm_set_queue_row_delay(lock_manager, (int64) dlock_queue_row_delay_ms * 1000);
		dlm_set_limits(lock_manager, dlock_max_locks, dlock_max_request_parts);
	}
}

/*
 * The worker's own settings, over whatever ALTER DATABASE, ALTER ROLE or the
 * configuration file set for the session it connects as (a session value
 * wins over all of those, and over later reloads).  It must write, and
 * never give up a statement or a transaction half way: an inherited
 * read-only default or a timeout would fail every batch.  Everything it
 * runs is schema-qualified; search_path is fixed all the same.
 *
 * Every statement of a batch touches a few rows by key.  The tables churn
 * and their statistics lag, so keep the planner off sequential scans and
 * hash joins, and off replanning each statement for its parameters.  No
 * JIT: a disabled node's cost (the one-row counter table can only be scanned
 * sequentially) passes every jit_*_above_cost, and compiling a statement
 * took 10-15 ms of a batch that runs it in microseconds.
 *
 * synchronous_commit is decided per commit (dlock_store_commit).
 */
static void
force_settings(void)
{
	static const char *const settings[][2] = {
		{"search_path", "pg_catalog, pg_temp"},
		{"default_transaction_read_only", "off"},
		{"default_transaction_isolation", "read committed"},
		{"default_transaction_deferrable", "off"},
		{"statement_timeout", "0"},
		{"lock_timeout", "0"},
		{"idle_in_transaction_session_timeout", "0"},
		{"idle_session_timeout", "0"},
		{"session_replication_role", "origin"},
		{"transform_null_equals", "off"},
		{"exit_on_error", "off"},
		{"max_parallel_workers_per_gather", "0"},
		{DLOCK_FORCE_PARALLEL_GUC, "off"},
		{"jit", "off"},
		{"enable_seqscan", "off"},
		{"enable_hashjoin", "off"},
		{"enable_mergejoin", "off"},
		{"enable_indexscan", "on"},
		{"enable_indexonlyscan", "on"},
		{"enable_bitmapscan", "on"},
		{"enable_nestloop", "on"},
		{"plan_cache_mode", "force_generic_plan"},
	};

	for (size_t i = 0; i < lengthof(settings); i++)
		SetConfigOption(settings[i][0], settings[i][1], PGC_SUSET, PGC_S_SESSION);
}

/*
 * Each batch's statements take a few hundred kilobytes and give them back
 * at its end; glibc then returned the heap's top to the kernel (brk, with a
 * TLB flush on every core) and faulted it in again at the next batch: a
 * fifth of the worker's time under a contended hand-off.  Keep it instead.
 */
static void
keep_freed_memory(void)
{
#ifdef M_TRIM_THRESHOLD
	(void) mallopt(M_TRIM_THRESHOLD, 64 * 1024 * 1024);
	(void) mallopt(M_TOP_PAD, 4 * 1024 * 1024);
#endif
}

static void
worker_exit(int code, Datum arg)
{
	SpinLockAcquire(&dlock_shared->mutex);
	dlock_shared->worker_pid = 0;
	dlock_shared->worker_latch = NULL;
	SpinLockRelease(&dlock_shared->mutex);
}

