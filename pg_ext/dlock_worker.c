/*
 * dlock_worker.c
 *		The dlock lock manager process: one background worker per cluster,
 *		the single writer of the lock tables.  It reads as its loop:
 *
 *		collect		take every new request, withdrawal and session end from
 *					the slots (dlock.h)
 *		decide		hand them, and lease expiry, to the lock manager
 *					(core/dlock_lm.h), which answers and lists what changed
 *		store		write the changes as a few set-based statements
 *					(dlock_store.c) in one transaction
 *		commit		flushed when a grant of an owner key or the ticket
 *					counter needs it
 *		publish		only then hand the answers to the slots and wake the
 *					backends
 *
 * Requests that arrive while a batch commits form the next batch, so
 * commits are grouped.  A batch that answers nobody may leave its writes
 * to the next batch's commit (DLOCK_DEFER_MS).  Loading the picture and
 * recovering from a failed batch are in dlock_recovery.c.
 */
#include "postgres.h"

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

#include "dlock_store.h"
#include "dlock_worker.h"

/*
 * Leases expired per batch at most: a mass expiry is spread over several
 * batches so that requests arriving meanwhile are not held up behind it.
 */
#define DLOCK_EXPIRE_PER_BATCH 2000

/*
 * A batch that answers nobody (it only queued new waiters, say) leaves its
 * writes to a later batch's commit, for at most DLOCK_DEFER_MS: under
 * contention the next release comes sooner, so a hand-off costs one commit,
 * not two.  The tables show such changes a few milliseconds late, and never
 * an answer before its commit.
 */
#define DLOCK_DEFER_MS 5
#define DLOCK_MAX_DEFERRED 64

static void run_batch(void);
static void copy_request(DLockSlot *slot, int slotno, Request *r);
static int	request_seq_cmp(const ListCell *a, const ListCell *b);
static void decide(List *ended, List *withdrawn, List *fresh, TimestampTz now);
static void session_gone(Request *last, TimestampTz now);
static void execute(Request *r, TimestampTz now);
static bool batch_changed(void);
static bool may_defer(TimestampTz now);
static bool answers_ready(void);
static bool lease_due(TimestampTz now);
static long sleep_ms(void);
static bool work_pending(void);
static void reload_config(void);
static void force_settings(void);
static void worker_exit(int code, Datum arg);

DLockManager *lock_manager;		/* the picture (dlock_recovery.c builds it) */
MemoryContext batch_cxt;
bool		worker_ready = false;

/* After an error: take new requests one at a time to isolate a bad one. */
bool		isolate = false;
int			isolated_slot = -1; /* the one taken in this batch, or -1 */

int			deferred_batches = 0;
static TimestampTz deferred_since;

/* Per slot: what to publish after the commit */
static Outcome *outcomes;
static List *outcome_slots;

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

	batch_cxt = AllocSetContextCreate(TopMemoryContext, "dlock batch",
									  ALLOCSET_DEFAULT_SIZES);
	outcomes = MemoryContextAllocZero(TopMemoryContext,
									  sizeof(Outcome) * dlock_shared->nslots);

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
			if (!worker_ready)
			{
				TimestampTz now = GetCurrentTimestamp();

				/* look for the extension when asked, or once an interval */
				if (work_pending() ||
					TimestampDifferenceExceeds(last_install_check, now,
											   dlock_reap_interval_ms))
				{
					last_install_check = now;
					worker_ready = reload();
					if (!worker_ready)
						refuse_all(DLOCK_STATUS_NOT_READY,
								   psprintf("extension \"dlock\" is not installed in database \"%s\"",
											dlock_database));
				}
			}
			if (worker_ready)
				run_batch();
			else
				isolate = false;
		}
		PG_CATCH();
		{
			ErrorData  *edata;
			bool		loading = !worker_ready;
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
			recover(edata->message);
			/* a picture that cannot be loaded serves nobody: say why at once */
			if (loading)
				refuse_all(DLOCK_STATUS_ERROR, edata->message);
			FreeErrorData(edata);
			RESUME_INTERRUPTS();
			(void) WaitLatch(MyLatch, WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, pause_ms,
							 PG_WAIT_EXTENSION);
			continue;
		}
		PG_END_TRY();

		if (failures > 0 && worker_ready)
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
		if (!isolate && !(worker_ready && lease_due(GetCurrentTimestamp())))
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

	isolated_slot = -1;
	batch_begin();
	MemoryContextSwitchTo(batch_cxt);
	collect(&ended, &withdrawn, &fresh);
	/*
	 * The batch's clock, read after its requests are taken: a grant or
	 * renewal must not date from before its request arrived (a lease would
	 * end sooner than ttl after the client asked).
	 */
	now = GetCurrentTimestamp();
	if (ended == NIL && withdrawn == NIL && fresh == NIL && !lease_due(now) &&
		deferred_batches == 0)
	{
		MemoryContextSwitchTo(TopMemoryContext);
		return;
	}
	if (isolate && fresh != NIL)
		isolated_slot = ((Request *) linitial(fresh))->slotno;

	decide(ended, withdrawn, fresh, now);

	if (batch_changed())
	{
		if (may_defer(now))
		{
			if (deferred_batches++ == 0)
				deferred_since = now;
			MemoryContextSwitchTo(TopMemoryContext);
			return;
		}
		xact_begin();
		store_batch();
		/* tokens must never go back: the counter is flushed whatever the GUC */
		xact_commit(dlm_counter_dirty(lock_manager, NULL) ||
					(dlm_batch_durable(lock_manager) && dlock_synchronous_commit));
		MemoryContextSwitchTo(batch_cxt);
	}
	deferred_batches = 0;
	settle();
	publish();
	MemoryContextSwitchTo(TopMemoryContext);
	pgstat_report_stat(false);
}

void
batch_begin(void)
{
	if (deferred_batches > 0)
		return;					/* keep gathering the deferred writes */
	MemoryContextReset(batch_cxt);
	outcome_slots = NIL;
}

/*
 * collect
 *		Take from the slots what this batch handles: session ends,
 *		withdrawals and new requests (in submission order).  New requests
 *		are marked ACCEPTED.  In isolation mode only the earliest new request
 *		is taken; the others stay submitted for later batches.
 */
void
collect(List **ended, List **withdrawn, List **fresh)
{
	for (int i = 0; i < dlock_shared->nslots; i++)
	{
		DLockSlot  *slot = dlock_slot(i);
		Request    *r;

		SpinLockAcquire(&slot->mutex);
		if (slot->pid == 0)
		{
			SpinLockRelease(&slot->mutex);
			continue;
		}
		if (slot->session_ended)
		{
			r = palloc(sizeof(Request));
			copy_request(slot, i, r);
			r->state = slot->state;
			r->status = slot->status;
			r->abandoned = slot->abandoned;
			SpinLockRelease(&slot->mutex);
			*ended = lappend(*ended, r);
		}
		else if (slot->cancel &&
				 (slot->state == DLOCK_SLOT_SUBMITTED || slot->state == DLOCK_SLOT_ACCEPTED))
		{
			slot->state = DLOCK_SLOT_ACCEPTED;
			r = palloc(sizeof(Request));
			copy_request(slot, i, r);
			SpinLockRelease(&slot->mutex);
			*withdrawn = lappend(*withdrawn, r);
		}
		else if (slot->state == DLOCK_SLOT_SUBMITTED)
		{
			slot->state = DLOCK_SLOT_ACCEPTED;
			r = palloc(sizeof(Request));
			copy_request(slot, i, r);
			SpinLockRelease(&slot->mutex);
			*fresh = lappend(*fresh, r);
		}
		else
			SpinLockRelease(&slot->mutex);
	}
	list_sort(*fresh, request_seq_cmp);

	if (isolate && list_length(*fresh) > 1)
	{
		ListCell   *lc;

		for_each_from(lc, *fresh, 1)
		{
			Request    *r = lfirst(lc);
			DLockSlot  *slot = dlock_slot(r->slotno);

			SpinLockAcquire(&slot->mutex);
			if (slot->state == DLOCK_SLOT_ACCEPTED)
				slot->state = DLOCK_SLOT_SUBMITTED;
			SpinLockRelease(&slot->mutex);
		}
		*fresh = list_truncate(*fresh, 1);
	}
}

/* Copy a slot's request; caller holds the slot's mutex. */
static void
copy_request(DLockSlot *slot, int slotno, Request *r)
{
	r->slotno = slotno;
	r->seq = slot->seq;
	r->op = slot->op;
	r->mode = slot->mode;
	r->ttl_us = slot->ttl_us;
	r->max_ttl_us = slot->max_ttl_us;
	r->timeout_at = slot->timeout_at;
	r->pid = slot->pid;
	r->session_start = slot->session_start;
	/* several names, NUL-separated: acquire_all, or a release undoing one */
	r->nnames = slot->nnames;
	r->names = palloc(sizeof(char *) * r->nnames);
	if (r->nnames > 1)
	{
		const char *p = dlock_slot_name(slot);

		for (int i = 0; i < r->nnames; i++)
		{
			r->names[i] = pstrdup(p);
			p += strlen(p) + 1;
		}
	}
	else
		r->names[0] = pnstrdup(dlock_slot_name(slot), slot->name_len);
	r->owner = slot->owner_len > 0 ?
		pnstrdup(dlock_slot_owner(slot), slot->owner_len) : NULL;
}

static int
request_seq_cmp(const ListCell *a, const ListCell *b)
{
	const Request *ra = lfirst(a);
	const Request *rb = lfirst(b);

	if (ra->seq < rb->seq)
		return -1;
	return ra->seq > rb->seq ? 1 : 0;
}

/*
 * decide
 *		Hand the batch to the lock manager.  Withdrawals first: nothing below
 *		may grant a request its backend has given up on (a request withdrawn
 *		before it was decided never ran).  Then ended sessions, due leases,
 *		and the new requests in submission order.
 */
static void
decide(List *ended, List *withdrawn, List *fresh, TimestampTz now)
{
	ListCell   *lc;

	if (withdrawn != NIL)
	{
		int		   *slots = palloc(sizeof(int) * list_length(withdrawn));
		int			n = 0;

		foreach(lc, withdrawn)
			slots[n++] = ((Request *) lfirst(lc))->slotno;
		dlm_withdraw(lock_manager, slots, n, now);
	}
	foreach(lc, ended)
		session_gone(lfirst(lc), now);
	(void) dlm_expire(lock_manager, now, DLOCK_EXPIRE_PER_BATCH);
	foreach(lc, fresh)
		execute(lfirst(lc), now);
	if (dlm_broken(lock_manager))
		elog(ERROR, "out of memory in the dlock lock manager");
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
	bool		uncollected = last->state == DLOCK_SLOT_DONE &&
		last->status == DLOCK_STATUS_GRANTED && dlock_op_grants(last->op);
	bool		undo_pending = last->abandoned && last->op == DLOCK_OP_RELEASE &&
		(last->state == DLOCK_SLOT_SUBMITTED || last->state == DLOCK_SLOT_ACCEPTED);

	if ((uncollected || undo_pending) && last->owner != NULL)
	{
		DLmRequest	undo = {0};

		undo.op = DLOCK_OP_RELEASE;
		undo.requester = DLM_NOBODY;
		undo.owner_key = last->owner;
		undo.pid = last->pid;
		undo.session_start = last->session_start;
		undo.names = (const char *const *) last->names;
		undo.nnames = last->nnames;
		(void) dlm_request(lock_manager, &undo, now);
	}
	dlm_session_end(lock_manager, last->pid, last->session_start, last->slotno, now);
	outcome_of(last->slotno)->end_session = true;
}

static void
execute(Request *r, TimestampTz now)
{
	DLmRequest	q = {0};

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
	/* an error is answered to the request (on_answer) */
	(void) dlm_request(lock_manager, &q, now);
}

/* ---------------------------------------------------------------------
 * Answers: the lock manager's, kept per slot until the batch commits
 * --------------------------------------------------------------------- */

Outcome *
outcome_of(int slotno)
{
	Outcome    *o = &outcomes[slotno];

	if (!o->listed)
	{
		MemoryContext old = MemoryContextSwitchTo(batch_cxt);

		memset(o, 0, sizeof(Outcome));
		o->listed = true;
		outcome_slots = lappend_int(outcome_slots, slotno);
		MemoryContextSwitchTo(old);
	}
	return o;
}

/* recover(): the outcomes listed were never handed out */
void
forget_outcomes(void)
{
	for (int i = 0; i < dlock_shared->nslots; i++)
		outcomes[i].listed = false;
}

static void
answer(int slotno, DLockStatus status, int64 token, TimestampTz expires_at,
	   int32 count)
{
	Outcome    *o = outcome_of(slotno);

	o->answered = true;
	o->queued = false;
	o->status = status;
	o->token = token;
	o->expires_at = expires_at;
	o->count = count;
}

/*
 * Copy a message into a slot-sized buffer, cut on a character boundary: a
 * cut inside a multibyte character would make the client's conversion fail
 * (22021 instead of the error it reports) and leave a lone byte in the log.
 */
void
copy_message(char *dst, const char *msg)
{
	int			len = strlen(msg);

	if (len >= DLOCK_ERRMSG_LEN)
		len = pg_mbcliplen(msg, len, DLOCK_ERRMSG_LEN - 1);
	memcpy(dst, msg, len);
	dst[len] = '\0';
}

void
answer_error(int slotno, DLockStatus status, const char *msg)
{
	Outcome    *o = outcome_of(slotno);

	answer(slotno, status, 0, 0, 0);
	copy_message(o->errmsg, msg);
}

/* An owner in a deadlock's DETAIL: keys are secrets, so no key. */
static void
describe_owner(StringInfo buf, bool keyed, int pid)
{
	if (keyed)
		appendStringInfo(buf, "an owner key (pid %d)", pid);
	else
		appendStringInfo(buf, "session %d", pid);
}

/* The cycle in wait order, one sentence per edge. */
static char *
describe_cycle(const DLmAnswer *a)
{
	StringInfoData buf;

	initStringInfo(&buf);
	for (int i = 0; i < a->ncycle; i++)
	{
		const DLmCycleStep *st = &a->cycle[i];
		int			start;

		if (buf.len > 0)
			appendStringInfoChar(&buf, ' ');
		start = buf.len;
		describe_owner(&buf, st->waiter_keyed, st->waiter_pid);
		appendStringInfo(&buf, " waits for \"%s\" %s ", st->lock,
						 st->held ? "held by" : "queued earlier by");
		describe_owner(&buf, st->blocker_keyed, st->blocker_pid);
		appendStringInfoChar(&buf, '.');
		buf.data[start] = pg_toupper((unsigned char) buf.data[start]);
	}
	return buf.data;
}

/* The lock manager's answer callback (DLmConfig.answer). */
void
dlock_on_answer(void *arg, int slotno, const DLmAnswer *a)
{
	Outcome    *o;

	switch (a->status)
	{
		case DLOCK_STATUS_QUEUED:
			outcome_of(slotno)->queued = true;	/* its ticket is published */
			break;
		case DLOCK_STATUS_DEADLOCK:
			answer_error(slotno, DLOCK_STATUS_DEADLOCK, describe_cycle(a));
			break;
		case DLOCK_STATUS_ERROR:
			answer_error(slotno, DLOCK_STATUS_ERROR, dlm_error_message(a->error));
			break;
		case DLOCK_STATUS_MODE_HELD:
			/* which name (in token) and its held mode (in count) */
			answer(slotno, a->status, a->name_index, 0, a->count);
			break;
		default:
			answer(slotno, a->status, a->token, a->expires_at, a->count);
			o = outcome_of(slotno);
			if (a->ntokens > 0)
				memcpy(o->tokens, a->tokens, sizeof(int64) * a->ntokens);
			else
				o->tokens[0] = a->token;	/* acquire_all of one name */
			break;
	}
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

/* Whether the batch has an answer or a freed slot to publish. */
static bool
answers_ready(void)
{
	ListCell   *lc;

	foreach(lc, outcome_slots)
	{
		Outcome    *o = &outcomes[lfirst_int(lc)];

		if (o->answered || o->end_session)
			return true;
	}
	return false;
}

/* Whether this batch's writes may wait for a later batch's commit. */
static bool
may_defer(TimestampTz now)
{
	if (isolate || deferred_batches >= DLOCK_MAX_DEFERRED || answers_ready())
		return false;
	return deferred_batches == 0 ||
		!TimestampDifferenceExceeds(deferred_since, now, DLOCK_DEFER_MS);
}

void
xact_begin(void)
{
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	PushActiveSnapshot(GetTransactionSnapshot());
}

/*
 * xact_commit
 *		Commit; with flush false, without waiting for the WAL flush (or a
 *		synchronous standby).  With flush true the server's own
 *		synchronous_commit applies if it is at least "on" (remote_apply on
 *		an HA primary included).
 */
void
xact_commit(bool flush)
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
store_batch(void)
{
	int64		hi;
	List	   *names = NIL;

	if (dlm_counter_dirty(lock_manager, &hi))
		dlock_store_save_counter(hi);
	if (dlm_touched_holders(lock_manager) || dlm_touched_waiters(lock_manager))
		dlock_store_write(dlm_touched_holders(lock_manager),
						  dlm_touched_waiters(lock_manager));
	/* NOTIFY payloads are shorter than 8000 bytes */
	for (DLmLock *l = dlm_notified_locks(lock_manager); l; l = l->notify_next)
		if (strlen(l->name) < 8000)
			names = lappend(names, (char *) l->name);
	if (names != NIL)
		dlock_store_notify(names);
}

/* After commit: the rows now match; the lock manager frees what left. */
void
settle(void)
{
	dlm_settle(lock_manager);
}

/*
 * publish
 *		After commit: hand every outcome to its slot and wake its backend.
 */
void
publish(void)
{
	ListCell   *lc;

	foreach(lc, outcome_slots)
	{
		int			slotno = lfirst_int(lc);
		Outcome    *o = &outcomes[slotno];
		DLockSlot  *slot = dlock_slot(slotno);
		PGPROC	   *proc = &ProcGlobal->allProcs[slotno];
		bool		wake = false;
		DLmWaiter  *w;

		SpinLockAcquire(&slot->mutex);
		if (o->end_session)
		{
			slot->pid = 0;
			slot->session_ended = false;
			slot->state = DLOCK_SLOT_FREE;
			slot->cancel = false;
		}
		else if (o->answered && slot->abandoned &&
				 !(o->status == DLOCK_STATUS_GRANTED && dlock_op_grants(slot->op)))
		{
			/* nobody waits for this answer, and nothing needs undoing */
			slot->state = DLOCK_SLOT_FREE;
			slot->cancel = false;
			slot->abandoned = false;
			wake = true;		/* its next call may wait for the slot */
		}
		else if (o->answered)
		{
			slot->status = o->status;
			slot->token = o->token;
			slot->expires_at = o->expires_at;
			slot->count = o->count;
			memcpy(slot->tokens, o->tokens, sizeof(o->tokens));
			memcpy(slot->errmsg, o->errmsg, DLOCK_ERRMSG_LEN);
			slot->state = DLOCK_SLOT_DONE;
			wake = true;
		}
		else if (o->queued && (w = dlm_waiter_of(lock_manager, slotno)) != NULL)
			slot->ticket = w->ticket;
		SpinLockRelease(&slot->mutex);
		if (wake)
			SetLatch(&proc->procLatch);
		o->listed = false;
	}
}

/*
 * Answer what cannot be served while the picture cannot be loaded (the
 * extension is not installed, or loading fails).
 */
void
refuse_all(DLockStatus status, const char *why)
{
	List	   *ended = NIL;
	List	   *withdrawn = NIL;
	List	   *fresh = NIL;
	ListCell   *lc;

	batch_begin();
	MemoryContextSwitchTo(batch_cxt);
	collect(&ended, &withdrawn, &fresh);
	foreach(lc, ended)
		outcome_of(((Request *) lfirst(lc))->slotno)->end_session = true;
	foreach(lc, withdrawn)
		answer(((Request *) lfirst(lc))->slotno, DLOCK_STATUS_CANCELED, 0, 0, 0);
	foreach(lc, fresh)
		answer_error(((Request *) lfirst(lc))->slotno, status, why);
	publish();
	MemoryContextSwitchTo(TopMemoryContext);
}

static bool
lease_due(TimestampTz now)
{
	TimestampTz next = dlm_next_expiry(lock_manager);

	return next != 0 && next <= now;
}

/* Milliseconds until the soonest lease runs out, capped by the interval. */
static long
sleep_ms(void)
{
	long		ms = dlock_reap_interval_ms;
	TimestampTz next = worker_ready ? dlm_next_expiry(lock_manager) : 0;

	if (next != 0)
		ms = Min(ms, TimestampDifferenceMilliseconds(GetCurrentTimestamp(), next) + 1);
	if (deferred_batches > 0)
		ms = Min(ms, TimestampDifferenceMilliseconds(GetCurrentTimestamp(),
													 deferred_since + DLOCK_DEFER_MS * 1000) + 1);
	return Max(ms, 0);
}

static bool
work_pending(void)
{
	for (int i = 0; i < dlock_shared->nslots; i++)
	{
		DLockSlot  *slot = dlock_slot(i);
		bool		pending;

		SpinLockAcquire(&slot->mutex);
		pending = slot->pid != 0 &&
			(slot->session_ended || slot->state == DLOCK_SLOT_SUBMITTED ||
			 (slot->cancel && slot->state == DLOCK_SLOT_ACCEPTED));
		SpinLockRelease(&slot->mutex);
		if (pending)
			return true;
	}
	return false;
}

static void
reload_config(void)
{
	ConfigReloadPending = false;
	ProcessConfigFile(PGC_SIGHUP);
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
 * synchronous_commit is decided per commit (xact_commit).
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
		{"force_parallel_mode", "off"},
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

static void
worker_exit(int code, Datum arg)
{
	SpinLockAcquire(&dlock_shared->mutex);
	dlock_shared->worker_pid = 0;
	dlock_shared->worker_latch = NULL;
	SpinLockRelease(&dlock_shared->mutex);
}

