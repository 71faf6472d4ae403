/* SPDX-License-Identifier: PostgreSQL */
/*
 * dlock_worker.c
 *		The dlock lock manager process: one background worker per cluster,
 *		the single writer of the lock tables.  It reads as its loop:
 *
 *		collect		take every new request, withdrawal and session end from
 *					the slots (dlock.h)
 *		batch		hand them to the service (core/dlock_service.h), which
 *					decides them with the lock manager in its order and
 *					calls back:
 *		  commit	write the changed rows (dlock_store.c) in one
 *					transaction, flushed when the service asks
 *		  publish	hand the answers to the slots, and release them to the
 *					backends once a synchronous standby (if one is named)
 *					has confirmed the commit
 *
 * Requests that arrive while a batch commits form the next batch, so
 * commits are grouped.  Deferral, the expiry limit, force release and the
 * retry policy are the service's (core/README 18).  Loading the picture
 * and recovering from a failed batch are in dlock_recovery.c.
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
#include "dlock_slots.h"
#include "dlock_stats.h"
#include "dlock_store.h"

static void run_batch(void);
static int	store_commit(void *arg, DLockManager *lm, const DLsCommit *c,
						 char *err, size_t errlen);
static void store_publish(void *arg, DLockManager *lm);
static DLockTime store_now(void *arg);
static void undo_grant(const Request *r, TimestampTz now);
static void publish_confirmed(XLogRecPtr upto, TimestampTz now);
static bool await_standby(XLogRecPtr upto);
static void give_back(TimestampTz now);
static long sleep_ms(void);
static void reload_config(void);
static void force_settings(void);
static void keep_freed_memory(void);
static void worker_exit(int code, Datum arg);

/* The service and, once loaded, its picture (dlock_recovery.c loads it). */
static DLockService *dlock_service;

/* What a synchronous standby must confirm before the batch's answers go out. */
static XLogRecPtr commit_upto = InvalidXLogRecPtr;

/* When the worker last looked for the extension, while not ready. */
static TimestampTz last_install_check = 0;

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
	{
		DLsConfig	cfg = {0};
		DLmCounters carried;

		dlock_stats_worker_start(&carried);
		cfg.store.commit = store_commit;
		cfg.store.publish = store_publish;
		cfg.store.now = store_now;
		cfg.answer = dlock_on_answer;
		cfg.counters = &carried;
		dlock_service = dls_create(&cfg);
		if (dlock_service == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("out of memory")));
	}

	before_shmem_exit(worker_exit, (Datum) 0);
	SpinLockAcquire(&dlock_shared->mutex);
	dlock_shared->worker_pid = MyProcPid;
	dlock_shared->worker_latch = MyLatch;
	SpinLockRelease(&dlock_shared->mutex);

	for (;;)
	{
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
			reload_config();

		PG_TRY();
		{
			if (dls_manager(dlock_service) == NULL)
			{
				TimestampTz now = GetCurrentTimestamp();

				/* look for the extension when asked, or once an interval */
				if (slots_work_pending() ||
					TimestampDifferenceExceeds(last_install_check, now,
											   dlock_reap_interval_ms))
				{
					last_install_check = now;
					if (reload(dlock_service))
						publish_confirmed(commit_upto, GetCurrentTimestamp());
					else
						slots_refuse_all(DLOCK_STATUS_NOT_READY,
								   psprintf("extension \"dlock\" is not installed in database \"%s\"",
											dlock_database));
				}
			}
			if (dls_manager(dlock_service))
				run_batch();
		}
		PG_CATCH();
		{
			ErrorData  *edata;
			bool		loading = dls_manager(dlock_service) == NULL;
			DLsFailure	f;

			HOLD_INTERRUPTS();
			MemoryContextSwitchTo(TopMemoryContext);
			edata = CopyErrorData();
			FlushErrorState();
			/* the picture is rebuilt from the tables at the next pass */
			dls_fail(dlock_service, &f);
			if (f.log)
				ereport(LOG,
						(errmsg("dlock lock manager: %s failed (%d in a row): %s",
								loading ? "loading the lock tables" : "batch",
								f.failures, edata->message),
						 errdetail("The lock tables are rolled back to the last committed batch and reloaded; the next attempt is in %ld ms.",
								   f.pause_ms),
						 f.failures >= 5 ?
						 errhint("Requests fail with this error while it persists.  Check the dlock tables and the settings made with ALTER DATABASE or ALTER ROLE for database \"%s\".",
								 dlock_database) : 0));
			recover(edata->message, f.failed_requester);
			/* a picture that cannot be loaded serves nobody: say why at once */
			if (loading)
				slots_refuse_all(DLOCK_STATUS_ERROR, edata->message);
			FreeErrorData(edata);
			RESUME_INTERRUPTS();
			(void) WaitLatch(MyLatch, WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, f.pause_ms,
							 PG_WAIT_EXTENSION);
			continue;
		}
		PG_END_TRY();

		if (dls_manager(dlock_service))
		{
			int			failures = dls_recovered(dlock_service);

			if (failures > 5)
				ereport(LOG,
						(errmsg("dlock lock manager: working again after %d failed attempts",
								failures)));
		}

		/*
		 * Every submission sets our latch, so sleep unless work was left on
		 * purpose: isolation mode takes one request per batch.
		 */
		if (!dls_isolating(dlock_service) &&
			!dls_work_due(dlock_service, GetCurrentTimestamp()))
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 sleep_ms(), PG_WAIT_EXTENSION);
	}
}

/*
 * run_batch
 *		One pass: collect, then the service decides, commits (store_commit)
 *		and publishes (store_publish).
 */
static void
run_batch(void)
{
	List	   *ended = NIL;
	List	   *withdrawn = NIL;
	List	   *fresh = NIL;
	ListCell   *lc;
	DLsBatch	b = {0};
	DLsWithdrawal *w;
	DLsSessionEnd *e;
	DLsRequest **f;
	char		err[256];
	DLsOutcome	outcome;

	MemoryContextSwitchTo(slots_batch_begin(dls_deferred(dlock_service) > 0));
	slots_collect(&ended, &withdrawn, &fresh, dls_isolating(dlock_service));

	b.withdrawn = w = palloc(sizeof(DLsWithdrawal) * (list_length(withdrawn) + 1));
	foreach(lc, withdrawn)
	{
		Request    *r = lfirst(lc);

		w[b.nwithdrawn].requester = r->ds.q.requester;
		w[b.nwithdrawn++].timed_out = r->withdraw_timeout;
	}
	b.ended = e = palloc(sizeof(DLsSessionEnd) * (list_length(ended) + 1));
	foreach(lc, ended)
	{
		Request    *last = lfirst(lc);
		DLsSessionEnd *one = &e[b.nended++];
		bool		uncollected = (last->state == DLOCK_SLOT_DONE || last->state == DLOCK_SLOT_STAGED) &&
			last->status == DLOCK_STATUS_GRANTED && dlock_op_grants(last->ds.q.op);
		bool		undo_pending = last->abandoned && last->ds.q.op == DLOCK_OP_RELEASE &&
			(last->state == DLOCK_SLOT_SUBMITTED || last->state == DLOCK_SLOT_ACCEPTED);

		one->pid = last->ds.q.pid;
		one->session_start = last->ds.q.session_start;
		one->requester = last->ds.q.requester;
		/* owner-keyed: the session's own locks go with it anyway */
		one->uncollected = (uncollected || undo_pending) && last->ds.q.owner_key ?
			&last->ds.q : NULL;
	}
	b.fresh = f = palloc(sizeof(DLsRequest *) * (list_length(fresh) + 1));
	foreach(lc, fresh)
		f[b.nfresh++] = &((Request *) lfirst(lc))->ds;
	/* an ended session's slot is freed at the publish: not deferred */
	b.no_defer = ended != NIL;

	/* the slots end with the batch's publish (forgotten if it fails) */
	foreach(lc, ended)
		slots_end_session(((Request *) lfirst(lc))->ds.q.requester);
	outcome = dls_batch(dlock_service, &b, err, sizeof(err));
	if (outcome == DLS_FAILED)
		elog(ERROR, "%s", err);
	if (outcome == DLS_DONE)
	{
		dlock_stats_publish(dls_counters(dlock_service), dls_manager(dlock_service));
		pgstat_report_stat(false);
	}
	MemoryContextSwitchTo(TopMemoryContext);
}

/* Release again what r was granted, whoever owns its key now. */
static void
undo_grant(const Request *r, TimestampTz now)
{
	DLmRequest	undo;

	dls_undo_of(&r->ds.q, &undo);
	(void) dlm_request(dls_manager(dlock_service), &undo, now);
}


/* ---------------------------------------------------------------------
 * Store, commit, publish: the service's callbacks
 * --------------------------------------------------------------------- */

/*
 * The batch's rows in one transaction.  Tokens must never go back: the
 * counter is flushed whatever the GUC.  With a synchronous standby every
 * batch waits for it, session grants too: an isolated old primary must not
 * answer a grant that the promoted standby grants again.  A load's
 * transaction is open already (it read the rows); its commit must confirm
 * also what a predecessor committed but never answered.  Errors are raised
 * (the main loop's PG_CATCH fails the batch).
 */
static int
store_commit(void *arg, DLockManager *lm, const DLsCommit *c, char *err, size_t errlen)
{
	XLogRecPtr	loaded_upto = InvalidXLogRecPtr;
	XLogRecPtr	upto;

	if (c->load)
		loaded_upto = GetXLogInsertRecPtr();	/* everything committed when the picture was read */
	else
		dlock_store_begin();
	dlock_store_batch(lm);
	for (int i = 0; i < c->nrevoked; i++)
		dlock_notify("dlock_revoked", c->revoked[i]);
	upto = dlock_store_commit(c->counter ||
							  (dlock_synchronous_commit &&
							   (c->durable || dlock_store_standby_waits())));
	commit_upto = c->load && !dlock_store_standby_waits() ? InvalidXLogRecPtr :
		Max(upto, loaded_upto);
	return 0;
}

/*
 * The answers are staged now and released once a synchronous standby has
 * the commit: a worker that ends meanwhile leaves them to its successor,
 * which never decides them again.
 */
static void
store_publish(void *arg, DLockManager *lm)
{
	slots_stage(lm);
	publish_confirmed(commit_upto, GetCurrentTimestamp());
	commit_upto = InvalidXLogRecPtr;	/* a batch that commits nothing confirms nothing */
}

static DLockTime
store_now(void *arg)
{
	return GetCurrentTimestamp();
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
		DLockManager *lm = dls_manager(dlock_service);

		give_back(now);
		dlock_store_begin();
		dlock_store_batch(lm);
		upto = dlock_store_commit(true);
		dlm_settle(lm);
		slots_stage(lm);
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
	TimestampTz began = 0;

	while (!dlock_store_confirmed(upto))
	{
		if (ProcDiePending)
			CHECK_FOR_INTERRUPTS();	/* exits: nothing of the batch answered */
		QueryCancelPending = false;
		if (ConfigReloadPending)
			reload_config();
		if (!dlock_store_standby_waits())
			return false;
		/* a standby's ordinary lag is no news: a wait of a second is */
		if (began == 0)
			began = GetCurrentTimestamp();
		else if (!logged && TimestampDifferenceExceeds(began, GetCurrentTimestamp(), 1000))
		{
			ereport(LOG,
					(errmsg("dlock lock manager: no answer goes out until the synchronous standby confirms the last commit")));
			logged = true;
		}
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

/*
 * Milliseconds until the soonest lease runs out or waiter is due for its
 * row, capped by the interval.
 */
static long
sleep_ms(void)
{
	long		ms = dlock_reap_interval_ms;
	DLockTime	wake = dls_next_wake(dlock_service);

	if (wake != 0)
		ms = Min(ms, TimestampDifferenceMilliseconds(GetCurrentTimestamp(), wake) + 1);
	return Max(ms, 0);
}


static void
reload_config(void)
{
	ConfigReloadPending = false;
	ProcessConfigFile(PGC_SIGHUP);
	if (dls_manager(dlock_service))
	{
		dlm_set_queue_row_delay(dls_manager(dlock_service), (int64) dlock_queue_row_delay_ms * 1000);
		dlm_set_limits(dls_manager(dlock_service), dlock_max_locks, dlock_max_request_parts);
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

