/* SPDX-License-Identifier: PostgreSQL */
/*
 * dlock_api.c
 *		The SQL functions: argument checks, handing the request to the lock
 *		manager through this backend's slot, and waiting for its answer.
 *
 * A backend never decides anything itself: it validates, submits, sleeps on
 * its latch and reports.  What keeps the tables faithful when a wait ends
 * early is the withdraw protocol (dlock.h): on timeout, cancel, termination
 * or any error while a request is pending, the backend asks the worker to
 * withdraw it and learns whether it had been granted first; a grant the
 * caller will never see is released again.  When the backend exits, the
 * worker is told through the slot and cleans up after the session.
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "common/int.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "port.h"
#include "storage/ipc.h"
#include "storage/proc.h"
#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "dlock.h"
#include "dlock_compat.h"
#include "dlock_service.h"

PG_FUNCTION_INFO_V1(dlock_acquire);
PG_FUNCTION_INFO_V1(dlock_try_acquire);
PG_FUNCTION_INFO_V1(dlock_acquire_all);
PG_FUNCTION_INFO_V1(dlock_semaphore);
PG_FUNCTION_INFO_V1(dlock_try_semaphore);
PG_FUNCTION_INFO_V1(dlock_campaign);
PG_FUNCTION_INFO_V1(dlock_proclaim);
PG_FUNCTION_INFO_V1(dlock_convert);
PG_FUNCTION_INFO_V1(dlock_release);
PG_FUNCTION_INFO_V1(dlock_renew);
PG_FUNCTION_INFO_V1(dlock_release_all);
PG_FUNCTION_INFO_V1(dlock_force_release);
PG_FUNCTION_INFO_V1(dlock_force_release_all);
PG_FUNCTION_INFO_V1(dlock_new_owner);
PG_FUNCTION_INFO_V1(dlock_manager_pid);

/*
 * Longest sleep of a waiting backend between looks at its slot.  The worker
 * sets our latch when it answers and interrupts set it too, so this is only
 * a safety net; it does not poll the tables.
 */
#define DLOCK_WORKER_CHECK_MS 1000

/*
 * How long a backend that stops waiting (timeout, cancel, an error) waits
 * for the worker's verdict on its withdrawal before it abandons the request
 * to the worker.  A working worker answers within one batch; this bounds
 * the call when the worker is stuck (an error loop, a commit waiting for a
 * synchronous standby that is gone).
 */
#define DLOCK_WITHDRAW_GRACE_MS 500

typedef struct DLockRequest
{
	DLockOp		op;
	int			mode;
	int64		ttl_us;
	TimestampTz timeout_at;
	const char *name;			/* acquire_all: the names, NUL-separated */
	int			name_len;
	int			nnames;			/* acquire_all: how many; else 1 */
	const char *owner;			/* NULL: the session */
	int			owner_len;
	bool		keep_place;		/* a wait that ends keeps its place (core 14) */
	int32		capacity;		/* a semaphore's (core 15); 0: a lock */
	int32		permits;
	bool		election;		/* a campaign (core 16) */
	const char *value;			/* a campaign's or proclaim's; NULL: none */
	int			value_len;
	bool		undo;			/* release a grant this session was not told of */
} DLockRequest;

typedef struct DLockReply
{
	DLockStatus status;
	int64		token;
	TimestampTz expires_at;
	int32		count;
	int64		tokens[DLOCK_MAX_MULTI];
	char		errmsg[DLOCK_ERRMSG_LEN];
} DLockReply;

static bool session_registered = false;

static bool wait_for_worker(TimestampTz timeout_at);
static void remember_grant(const struct DLockRequest *req);
static void give_back_due(DLockSlot *slot);

/* Grants rolled back, not yet released (see "Grants of the open transaction"). */
static List *undo_due = NIL;
static void grants_xact_callback(XactEvent event, void *arg);
static void grants_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
									SubTransactionId parentSubid, void *arg);
static void submit(DLockSlot *slot, const struct DLockRequest *req);
static void submit_undo(DLockSlot *slot, const struct DLockRequest *granted);

/*
 * Every SQL function calls this first: without the preloaded library there
 * is no shared memory, and nothing below may look at it.
 */
void
dlock_check_loaded(void)
{
	if (dlock_shared == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("dlock must be loaded via shared_preload_libraries"),
				 errhint("Add dlock to shared_preload_libraries in postgresql.conf and restart the server.")));
}

static bool
worker_running(void)
{
	int			pid;

	SpinLockAcquire(&dlock_shared->mutex);
	pid = dlock_shared->worker_pid;
	SpinLockRelease(&dlock_shared->mutex);
	return pid != 0;
}

/*
 * How long a call waits for a worker that is restarting (it comes back
 * after bgw_restart_time, 1 s) before it reports that none runs.
 */
#define DLOCK_WORKER_GRACE_MS 3000

static void error_no_worker(void);

/*
 * wait_for_worker
 *		Wait for a restarting worker.  Returns false if the request's own
 *		timeout (0: none) passed first; raises the error after the grace.
 */
static bool
wait_for_worker(TimestampTz timeout_at)
{
	TimestampTz give_up = GetCurrentTimestamp() +
		(int64) DLOCK_WORKER_GRACE_MS * 1000;

	while (!worker_running())
	{
		TimestampTz now = GetCurrentTimestamp();

		/* no worker runs during recovery: say so at once, not after a wait */
		if (RecoveryInProgress())
			ereport(ERROR,
					(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
					 errmsg("dlock does not run on a standby"),
					 errdetail("Only the primary grants locks; this server is in recovery."),
					 errhint("Connect to the primary, e.g. with target_session_attrs=read-write in a multi-host connection string.")));

		if (timeout_at != 0 && now >= timeout_at)
			return false;
		if (now >= give_up)
			error_no_worker();
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 50, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	return true;
}

static void
error_no_worker(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("dlock lock manager is not running"),
			 errhint("Check the server log for \"dlock lock manager\"; it runs in the database named by dlock.database.")));
}

/*
 * dlock_session_exit
 *		before_shmem_exit callback: tell the worker this session is gone, so
 *		it releases its locks and withdraws what it still waits for.  Never
 *		waits: the worker may be gone too, and a new one reads the flag.
 */
static void
dlock_session_exit(int code, Datum arg)
{
	DLockSlot  *slot = dlock_slot(dlock_my_procno());

	SpinLockAcquire(&slot->mutex);
	slot->session_ended = true;
	SpinLockRelease(&slot->mutex);
	dlock_wake_worker(dlock_my_procno());
}

/*
 * my_slot
 *		This backend's slot, registering the session on first use.  The slot
 *		may still carry the end of the previous session of this PGPROC until
 *		the worker has cleaned up after it.
 */
static DLockSlot *
my_slot(void)
{
	DLockSlot  *slot;

	if (MyProc == NULL || dlock_my_procno() >= dlock_shared->nslots)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("dlock functions cannot be called from this process")));
	slot = dlock_slot(dlock_my_procno());

	if (!session_registered)
	{
		for (;;)
		{
			bool		busy;

			SpinLockAcquire(&slot->mutex);
			busy = slot->pid != 0;
			if (!busy)
			{
				slot->pid = MyProcPid;
				slot->session_start = MyStartTimestamp;
				slot->session_ended = false;
				slot->state = DLOCK_SLOT_FREE;
				slot->cancel = false;
				slot->cancel_timeout = false;
			}
			SpinLockRelease(&slot->mutex);
			if (!busy)
				break;
			(void) wait_for_worker(0);
			dlock_wake_worker(dlock_my_procno());
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 10, PG_WAIT_EXTENSION);
			ResetLatch(MyLatch);
			CHECK_FOR_INTERRUPTS();
		}
		before_shmem_exit(dlock_session_exit, (Datum) 0);
		RegisterXactCallback(grants_xact_callback, NULL);
		RegisterSubXactCallback(grants_subxact_callback, NULL);
		session_registered = true;
	}
	return slot;
}

/* Copy the reply out and free the slot, if the worker has answered. */
static bool
take_reply(DLockSlot *slot, DLockReply *reply)
{
	bool		done;

	SpinLockAcquire(&slot->mutex);
	done = slot->state == DLOCK_SLOT_DONE;
	if (done)
	{
		reply->status = slot->status;
		reply->token = slot->token;
		reply->expires_at = slot->expires_at;
		reply->count = slot->count;
		memcpy(reply->tokens, slot->tokens, sizeof(reply->tokens));
		memcpy(reply->errmsg, slot->errmsg, DLOCK_ERRMSG_LEN);
		slot->state = DLOCK_SLOT_FREE;
	}
	SpinLockRelease(&slot->mutex);
	return done;
}

/*
 * abandon
 *		Leave the pending request to the worker: it frees the slot once the
 *		request is decided, but keeps a grant's answer for the session's
 *		next call to undo (await_free_slot).  Returns true instead if the
 *		answer had come after all (then it is in reply).
 */
static bool
abandon(DLockSlot *slot, DLockReply *reply)
{
	bool		pending;

	if (take_reply(slot, reply))
		return true;
	SpinLockAcquire(&slot->mutex);
	pending = slot->state == DLOCK_SLOT_SUBMITTED || slot->state == DLOCK_SLOT_ACCEPTED ||
		slot->state == DLOCK_SLOT_STAGED;
	if (pending)
	{
		/*
		 * A wait is withdrawn; a release or renewal is still carried out
		 * (the undo of a grant is one: withdrawn, it would leave the lock
		 * held by a session that was told otherwise).  A staged answer is
		 * decided already: a grant in it is undone by the next call.
		 */
		if ((dlock_op_grants(slot->op) || slot->op == DLOCK_OP_CONVERT) &&
			slot->state != DLOCK_SLOT_STAGED)
			slot->cancel = true;
		slot->abandoned = true;
	}
	SpinLockRelease(&slot->mutex);
	if (!pending)
		return take_reply(slot, reply);
	dlock_wake_worker(dlock_my_procno());
	return false;
}

/*
 * await_verdict
 *		Wait for the answer to a withdrawal without processing interrupts
 *		(an interrupt may be what brought us here), at most
 *		DLOCK_WITHDRAW_GRACE_MS.  If it does not come, or no worker runs,
 *		abandon the request and answer CANCELED: whatever the worker does,
 *		the call ends.
 */
static bool
await_verdict(DLockSlot *slot, DLockReply *reply)
{
	TimestampTz give_up = GetCurrentTimestamp() +
		(int64) DLOCK_WITHDRAW_GRACE_MS * 1000;

	while (!take_reply(slot, reply))
	{
		/*
		 * A worker publishes its answers before it clears its pid, so one
		 * that answered and then left is seen by abandon's last look.
		 */
		if (!worker_running() || GetCurrentTimestamp() >= give_up)
		{
			if (abandon(slot, reply))
				return true;
			reply->status = DLOCK_STATUS_CANCELED;
			return false;
		}
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 20, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
	return true;
}

/*
 * await_free_slot
 *		Before a new request: wait until the worker has finished a request
 *		this session abandoned.  One that was granted after all comes back
 *		as an answer with the abandoned mark: release it again first, as
 *		withdraw() would have (so the undo comes before anything we ask
 *		now).  Returns false if the new request's timeout passed first.
 */
static bool
await_free_slot(DLockSlot *slot, TimestampTz timeout_at)
{
	for (;;)
	{
		DLockSlotState state;
		bool		undo;
		DLockReply	stale;

		SpinLockAcquire(&slot->mutex);
		state = slot->state;
		undo = state == DLOCK_SLOT_DONE && slot->abandoned &&
			slot->status == DLOCK_STATUS_GRANTED && dlock_op_grants(slot->op);
		SpinLockRelease(&slot->mutex);
		if (state == DLOCK_SLOT_FREE)
			return true;		/* the usual case */
		if (undo)
		{
			/* the names and owner are still in the slot: copy them out */
			DLockRequest granted = {0};

			granted.name_len = slot->name_len;
			granted.name = memcpy(palloc(slot->name_len), dlock_slot_name(slot),
								  slot->name_len);
			granted.nnames = slot->nnames;
			if (slot->owner_len > 0)
			{
				granted.owner_len = slot->owner_len;
				granted.owner = memcpy(palloc(slot->owner_len),
									   dlock_slot_owner(slot), slot->owner_len);
			}
			(void) take_reply(slot, &stale);
			submit_undo(slot, &granted);
			continue;
		}
		if (state == DLOCK_SLOT_DONE)
		{
			(void) take_reply(slot, &stale);	/* an answer nobody waits for */
			return true;
		}
		if (!wait_for_worker(timeout_at))
			return false;
		if (timeout_at != 0 && GetCurrentTimestamp() >= timeout_at)
			return false;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 20, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

static void
submit(DLockSlot *slot, const DLockRequest *req)
{
	Oid			role = GetUserId();
	bool		any_role;
	DLockQuotas quotas = {0};

	/*
	 * Looked up before the spinlock.  An undo is of this session's own
	 * grant, whoever owns the key now, and needs no look-up: it may run
	 * while an error is being handled.
	 */
	any_role = req->undo || (req->owner && dlock_is_admin(role));
	if (dlock_op_grants(req->op) && !req->undo)
		dlock_quotas_of(role, &quotas);

	SpinLockAcquire(&slot->mutex);
	Assert(slot->state == DLOCK_SLOT_FREE);
	slot->op = req->op;
	slot->mode = req->mode;
	slot->ttl_us = req->ttl_us;
	slot->max_ttl_us = (int64) dlock_max_ttl_s * USECS_PER_SEC;
	slot->timeout_at = req->timeout_at;
	slot->keep_place = req->keep_place && !req->undo;
	/* an undo releases: what it releases is found by name */
	slot->capacity = req->undo ? 0 : req->capacity;
	slot->permits = req->undo ? 0 : req->permits;
	slot->election = req->election && !req->undo;
	slot->value_len = req->value && !req->undo ? req->value_len : -1;
	if (slot->value_len >= 0)
		memcpy(dlock_slot_value(slot), req->value, req->value_len);
	slot->name_len = req->name_len;
	slot->nnames = Max(req->nnames, 1);
	memcpy(dlock_slot_name(slot), req->name, req->name_len);
	slot->owner_len = req->owner ? req->owner_len : 0;
	if (req->owner)
		memcpy(dlock_slot_owner(slot), req->owner, req->owner_len);
	slot->role = role;
	slot->any_role = any_role;
	slot->quotas = quotas;
	slot->ticket = 0;
	slot->status = DLOCK_STATUS_NONE;
	slot->cancel = false;
	slot->cancel_timeout = false;
	slot->abandoned = false;
	slot->seq = pg_atomic_fetch_add_u64(&dlock_shared->next_seq, 1);
	slot->state = DLOCK_SLOT_SUBMITTED;
	SpinLockRelease(&slot->mutex);
	dlock_wake_worker(dlock_my_procno());
}

/* Release every name of a grant again, as one request. */
static void
submit_undo(DLockSlot *slot, const DLockRequest *granted)
{
	DLockRequest undo = *granted;

	undo.op = DLOCK_OP_RELEASE;
	undo.timeout_at = 0;
	undo.undo = true;
	submit(slot, &undo);
}

/*
 * withdraw
 *		Ask the worker to withdraw our pending request and wait for the
 *		verdict (bounded: see await_verdict; the grant of a request left to
 *		the worker is undone by our next call).  If it had been granted
 *		before the worker saw the request to withdraw, and the caller will
 *		not report it (undo_grant), release it again, so that no lock is
 *		left granted to nobody.  Every name of it goes in one release
 *		request: if no worker runs now, that request waits in the slot for
 *		the next one (a second request would overwrite it, and leave its
 *		names held).
 */
static void
withdraw(DLockSlot *slot, const DLockRequest *req, bool undo_grant,
		 DLockReply *reply)
{
	SpinLockAcquire(&slot->mutex);
	if (slot->state == DLOCK_SLOT_SUBMITTED || slot->state == DLOCK_SLOT_ACCEPTED)
	{
		slot->cancel = true;
		slot->cancel_timeout = !undo_grant;	/* (a timeout keeps a late grant) */
	}
	SpinLockRelease(&slot->mutex);
	dlock_wake_worker(dlock_my_procno());
	if (!await_verdict(slot, reply))
		return;

	if (undo_grant && reply->status == DLOCK_STATUS_GRANTED && dlock_op_grants(req->op))
	{
		DLockReply	ignored;

		submit_undo(slot, req);
		(void) await_verdict(slot, &ignored);
	}
}

/*
 * dlock_call
 *		Submit a request and wait for the worker's answer.  Returns with
 *		reply->status CANCELED if req->timeout_at passed first.
 */
static void
dlock_call(const DLockRequest *req, DLockReply *reply)
{
	DLockSlot  *slot;

	Assert(dlock_shared != NULL);	/* every entry point called dlock_check_loaded() */
	slot = my_slot();

	/* a request this session abandoned may still be pending */
	if (!await_free_slot(slot, req->timeout_at))
	{
		reply->status = DLOCK_STATUS_CANCELED;	/* timed out first */
		return;
	}
	/* and grants a rollback gave back, before anything asked now */
	if (undo_due != NIL)
	{
		give_back_due(slot);
		if (!await_free_slot(slot, req->timeout_at))
		{
			reply->status = DLOCK_STATUS_CANCELED;
			return;
		}
	}
	if (!wait_for_worker(req->timeout_at))
	{
		reply->status = DLOCK_STATUS_CANCELED;	/* timed out, never submitted */
		return;
	}
	submit(slot, req);

	PG_TRY();
	{
		for (;;)
		{
			long		wait_ms = DLOCK_WORKER_CHECK_MS;

			if (take_reply(slot, reply))
				break;
			if (req->timeout_at != 0)
			{
				TimestampTz now = GetCurrentTimestamp();

				if (now >= req->timeout_at)
				{
					/* a grant that beat the timeout is kept and reported */
					withdraw(slot, req, false, reply);
					break;
				}
				wait_ms = Min(wait_ms,
							  TimestampDifferenceMilliseconds(now, req->timeout_at) + 1);
			}
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 wait_ms, PG_WAIT_EXTENSION);
			ResetLatch(MyLatch);
			CHECK_FOR_INTERRUPTS();
		}
	}
	PG_CATCH();
	{
		DLockReply	ignored;

		HOLD_INTERRUPTS();
		withdraw(slot, req, true, &ignored);
		RESUME_INTERRUPTS();
		PG_RE_THROW();
	}
	PG_END_TRY();
	if (reply->status == DLOCK_STATUS_GRANTED && dlock_op_grants(req->op))
		remember_grant(req);
}

/* ---------------------------------------------------------------------
 * Grants of the open transaction
 *
 * A grant is given back when the (sub)transaction of the call that took it
 * rolls back: ROLLBACK, ROLLBACK TO SAVEPOINT, an error (a statement that
 * failed after the grant: its client never saw the token), an EXCEPTION
 * block that caught one.  Once the transaction commits, the lock is held
 * until it is released.  Releases, renewals and conversions are not undone.
 * The release is asked for at the rollback if the slot is free, else by the
 * session's next call before anything it asks; a session that ends gives
 * back its session locks anyway, and an owner key's grant then lasts until
 * its lease runs out.
 * --------------------------------------------------------------------- */

typedef struct XactGrant
{
	SubTransactionId subid;		/* the (sub)transaction whose call took it */
	DLockRequest req;			/* what to release: names and owner, copied */
} XactGrant;

static List *xact_grants = NIL;	/* TopMemoryContext */

static void
remember_grant(const DLockRequest *req)
{
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
	XactGrant  *g = palloc0(sizeof(XactGrant));

	g->subid = GetCurrentSubTransactionId();
	g->req.op = req->op;
	g->req.name = memcpy(palloc(req->name_len), req->name, req->name_len);
	g->req.name_len = req->name_len;
	g->req.nnames = req->nnames;
	if (req->owner)
	{
		g->req.owner = memcpy(palloc(req->owner_len), req->owner, req->owner_len);
		g->req.owner_len = req->owner_len;
	}
	xact_grants = lappend(xact_grants, g);
	MemoryContextSwitchTo(old);
}

static void
free_grant(XactGrant *g)
{
	pfree((char *) g->req.name);
	if (g->req.owner)
		pfree((char *) g->req.owner);
	pfree(g);
}

/*
 * give_back_due
 *		Release what rolled-back transactions took, newest first, while the
 *		slot is free; waits for each verdict (bounded: await_verdict).  What
 *		cannot be done now stays due for the next call.
 */
static void
give_back_due(DLockSlot *slot)
{
	while (undo_due != NIL && !proc_exit_inprogress && worker_running())
	{
		XactGrant  *g = llast(undo_due);
		DLockSlotState state;
		DLockReply	ignored;

		SpinLockAcquire(&slot->mutex);
		state = slot->state;
		SpinLockRelease(&slot->mutex);
		if (state != DLOCK_SLOT_FREE)
			return;
		submit_undo(slot, &g->req);
		undo_due = list_delete_last(undo_due);
		free_grant(g);
		if (!await_verdict(slot, &ignored))
			return;				/* left to the worker: it carries it out */
	}
}

/* Move the grants of subid (InvalidSubTransactionId: all) to undo_due. */
static void
roll_back_grants(SubTransactionId subid)
{
	ListCell   *lc;

	foreach(lc, xact_grants)
	{
		XactGrant  *g = lfirst(lc);

		if (subid == InvalidSubTransactionId || g->subid == subid)
		{
			MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

			undo_due = lappend(undo_due, g);
			MemoryContextSwitchTo(old);
			xact_grants = foreach_delete_current(xact_grants, lc);
		}
	}
	if (undo_due != NIL && session_registered)
		give_back_due(dlock_slot(dlock_my_procno()));
}

static void
grants_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_PREPARE:
			{
				ListCell   *lc;

				foreach(lc, xact_grants)
					free_grant(lfirst(lc));
				list_free(xact_grants);
				xact_grants = NIL;
			}
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			roll_back_grants(InvalidSubTransactionId);
			break;
		default:
			break;
	}
}

static void
grants_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
						SubTransactionId parentSubid, void *arg)
{
	ListCell   *lc;

	if (event == SUBXACT_EVENT_ABORT_SUB)
		roll_back_grants(mySubid);
	else if (event == SUBXACT_EVENT_COMMIT_SUB)
		foreach(lc, xact_grants)
		{
			XactGrant  *g = lfirst(lc);

			if (g->subid == mySubid)
				g->subid = parentSubid;
		}
}

/* Argument checks */

/* Raise the error for a bad lock name, if it is one. */
void
dlock_check_name_arg(const char *name, int len)
{
	switch (dlock_check_name(name, len, dlock_shared->max_name_len))
	{
		case DLOCK_CHECK_OK:
			break;
		case DLOCK_CHECK_EMPTY:
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("lock name must not be empty")));
			break;
		case DLOCK_CHECK_EMPTY_SEGMENT:
		case DLOCK_CHECK_TRAILING_SLASH:
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("malformed path \"%s\"", pnstrdup(name, len)),
					 errdetail("A name starting with \"/\" is a path; its segments must not be empty and it must not end in \"/\".")));
			break;
		case DLOCK_CHECK_TOO_DEEP:
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("path is too deep"),
					 errdetail("A path may have at most %d segments.",
							   DLOCK_MAX_PATH_DEPTH)));
			break;
		case DLOCK_CHECK_TOO_LONG:
		case DLOCK_CHECK_BAD_CHAR:
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("lock name is too long"),
					 errdetail("The name is %d bytes; the limit is %d bytes.",
							   len, dlock_shared->max_name_len),
					 errhint("Raise dlock.max_name_length (needs a restart).")));
			break;
	}
}

static text *
arg_name(FunctionCallInfo fcinfo, int argno, const char **name, int *len)
{
	text	   *t;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("lock name must not be null")));
	t = PG_GETARG_TEXT_PP(argno);
	*name = VARDATA_ANY(t);
	*len = VARSIZE_ANY_EXHDR(t);
	dlock_check_name_arg(*name, *len);
	return t;
}

static int
arg_mode(FunctionCallInfo fcinfo, int argno)
{
	text	   *t;
	int			mode;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("lock mode must not be null")));
	t = PG_GETARG_TEXT_PP(argno);
	mode = dlock_mode_parse(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));
	if (mode == DLOCK_MODE_INVALID)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown lock mode \"%s\"", text_to_cstring(t)),
				 errhint("Use one of NL, CR, CW, PR (or shared), PW, EX (or exclusive).")));
	return mode;
}

/* A positive interval in microseconds; 0 for NULL. */
static int64
arg_interval_us(FunctionCallInfo fcinfo, int argno, const char *what)
{
	Interval   *iv;
	int64		days;
	int64		us;

	if (PG_ARGISNULL(argno))
		return 0;
	iv = PG_GETARG_INTERVAL_P(argno);
	days = (int64) iv->month * DAYS_PER_MONTH + iv->day;
	if (pg_mul_s64_overflow(days, USECS_PER_DAY, &us) ||
		pg_add_s64_overflow(us, iv->time, &us))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s is out of range", what)));
	if (us <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be positive", what)));
	/* keep now + interval representable */
	if (us > (int64) 1000 * 365 * USECS_PER_DAY)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s is out of range", what),
				 errdetail("The limit is 1000 years.")));
	return us;
}

static int64
arg_ttl_us(FunctionCallInfo fcinfo, int argno)
{
	int64		us = arg_interval_us(fcinfo, argno, "ttl");

	if (us > 0 && dlock_max_ttl_s > 0 && us > (int64) dlock_max_ttl_s * USECS_PER_SEC)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("ttl exceeds dlock.max_ttl"),
				 errdetail("The limit is %d seconds.", dlock_max_ttl_s),
				 errhint("Ask an administrator to raise dlock.max_ttl.")));
	return us;
}

/* When a wait with the given timeout argument gives up; 0: never. */
static TimestampTz
arg_timeout_at(FunctionCallInfo fcinfo, int argno)
{
	int64		us = arg_interval_us(fcinfo, argno, "timeout");

	return us > 0 ? GetCurrentTimestamp() + us : 0;
}

static void
arg_owner(FunctionCallInfo fcinfo, int argno, const char **owner, int *len)
{
	text	   *t;

	*owner = NULL;
	*len = 0;
	if (PG_ARGISNULL(argno))
		return;
	t = PG_GETARG_TEXT_PP(argno);
	*owner = VARDATA_ANY(t);
	*len = VARSIZE_ANY_EXHDR(t);
	switch (dlock_check_owner(*owner, *len))
	{
		case DLOCK_CHECK_OK:
			break;
		case DLOCK_CHECK_EMPTY:
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("owner key must not be empty"),
					 errhint("Pass NULL to make the session the owner, or use dlock_new_owner().")));
			break;
		case DLOCK_CHECK_TOO_LONG:
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("owner key is too long"),
					 errdetail("The key is %d bytes; the limit is %d bytes.",
							   *len, DLOCK_MAX_OWNER_LEN)));
			break;
		case DLOCK_CHECK_BAD_CHAR:
		default:
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("owner key must not contain control characters")));
			break;
	}
}

static char *
name_for_message(const DLockRequest *req)
{
	return pnstrdup(req->name, req->name_len);
}

/* Report that the caller does not hold the named lock, at elevel. */
static void
report_not_held(const DLockRequest *req, int elevel, const char *detail, const char *hint)
{
	ereport(elevel,
			(errcode(ERRCODE_DLOCK_NOT_HELD),
			 errmsg("lock \"%s\" is not held by this %s",
					name_for_message(req), req->owner ? "owner" : "session"),
			 detail ? errdetail("%s", detail) : 0,
			 hint ? errhint("%s", hint) : 0));
}

/* The index-th of the NUL-separated names of an acquire_all request. */
static char *
nth_name(const DLockRequest *req, int64 index)
{
	const char *p = req->name;

	for (int64 i = 0; i < index && i < req->nnames - 1; i++)
		p += strlen(p) + 1;
	return pstrdup(p);
}

/* Turn the answers every function handles alike into errors. */
static void
report_common(const DLockRequest *req, const DLockReply *reply)
{
	switch (reply->status)
	{
		case DLOCK_STATUS_REVOKED:
			ereport(ERROR,
					(errcode(ERRCODE_DLOCK_NOT_HELD),
					 errmsg("lock \"%s\" was released by an administrator",
							name_for_message(req)),
					 errdetail("Reason: %s", reply->errmsg),
					 errhint("Stop the work it guarded; take the lock again to go on.")));
			break;
		case DLOCK_STATUS_ERROR:
			switch ((DLmError) reply->count)
			{
				case DLM_ERR_NOT_YOURS:
					ereport(ERROR,
							(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
							 errmsg("owner key is in use by another role"),
							 errdetail("An owner key that holds or waits for locks serves only the role that took them (and dlock_admin)."),
							 errhint("Take a key of your own with dlock_new_owner().")));
					break;
				case DLM_ERR_TOO_MANY_PARTS:
					ereport(ERROR,
							(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
							 errmsg("request has too many parts"),
							 errdetail("Each name counts its path depth; one request may ask for at most dlock.max_request_parts (%d).",
									   dlock_max_request_parts)));
					break;
				case DLM_ERR_NO_SPACE:
					ereport(ERROR,
							(errcode(ERRCODE_OUT_OF_MEMORY),
							 errmsg("out of lock space"),
							 errdetail("The lock manager keeps at most dlock.max_locks (%d) holders and waiting parts.",
									   dlock_max_locks),
							 errhint("Release locks, or raise dlock.max_locks (about 800 bytes of the worker's memory each).")));
					break;
				case DLM_ERR_IS_SEMAPHORE:
				case DLM_ERR_IS_LOCK:
				case DLM_ERR_IS_ELECTION:
					ereport(ERROR,
							(errcode(ERRCODE_WRONG_OBJECT_TYPE),
							 errmsg("\"%s\" is a %s, not a %s", name_for_message(req),
									reply->count == DLM_ERR_IS_SEMAPHORE ? "semaphore" :
									reply->count == DLM_ERR_IS_ELECTION ? "leader election" : "lock",
									req->capacity > 0 ? "semaphore" :
									req->election || req->op == DLOCK_OP_PROCLAIM ? "leader election" : "lock"),
							 errdetail("A name is a lock, a semaphore or a leader election while anyone holds or waits for it, never two of them."),
							 errhint("Use another name, or wait until nobody holds or waits for this one.")));
					break;
				case DLM_ERR_KEEP_PLACE:
					/* a session's request ends with its calls: nobody could come back for it */
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							 errmsg("keep_place needs an owner key"),
							 errdetail("A kept place waits for the owner's next call, which may come from another connection."),
							 errhint("Pass owner => dlock_new_owner() (kept for the next calls).")));
					break;
				case DLM_ERR_BAD_SEMAPHORE:
				case DLM_ERR_BAD_ELECTION:
					/* the arguments' ranges are checked here: what is left is a path */
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							 errmsg("%s name cannot be a path",
									reply->count == DLM_ERR_BAD_SEMAPHORE ? "a semaphore's" : "an election's"),
							 errdetail("Names starting with \"/\" are hierarchical locks.")));
					break;
				case DLM_ERR_CAPACITY:
					ereport(ERROR,
							(errcode(ERRCODE_DLOCK_CAPACITY),
							 errmsg("semaphore \"%s\" is in use with another capacity",
									name_for_message(req)),
							 errdetail("Its capacity is kept while anyone holds or waits for it; every caller must pass the same one."),
							 errhint("See the capacity column of dlock.locks.")));
					break;
				case DLM_ERR_HELD_ONCE:
					if (req->election)
						ereport(ERROR,
								(errcode(ERRCODE_DLOCK_MODE_HELD),
								 errmsg("this %s leads \"%s\" already",
										req->owner ? "owner" : "session", name_for_message(req)),
								 errhint("Publish a new value with dlock_proclaim().")));
					ereport(ERROR,
							(errcode(ERRCODE_DLOCK_MODE_HELD),
							 errmsg("semaphore \"%s\" is already held by this %s",
									name_for_message(req), req->owner ? "owner" : "session"),
							 errdetail("An owner holds one set of permits of a semaphore at a time."),
							 errhint("Release them first, or ask for more permits at once.")));
					break;
				case DLM_ERR_ROLE_QUOTA:
				case DLM_ERR_OWNER_QUOTA:
					ereport(ERROR,
							(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
							 errmsg("lock quota exceeded"),
							 errdetail("%s holds or waits for as many locks as its quota in dlock.quotas allows.",
									   reply->count == DLM_ERR_ROLE_QUOTA ?
									   "The role" : "The owner"),
							 errhint("Release locks, or ask a member of dlock_admin to raise the quota with dlock_set_quota().")));
					break;
				default:
					break;
			}
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("dlock lock manager failed: %s", reply->errmsg)));
			break;
		case DLOCK_STATUS_UNCONFIRMED:
			ereport(ERROR,
					(errcode(ERRCODE_T_R_STATEMENT_COMPLETION_UNKNOWN),
					 errmsg("no synchronous standby confirmed the lock manager's commit"),
					 errdetail("%s", reply->errmsg),
					 errhint("Call again: the lock manager now commits under the new setting.")));
			break;
		case DLOCK_STATUS_NOT_READY:
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("dlock lock manager is not ready: %s", reply->errmsg),
					 errhint("Run CREATE EXTENSION dlock in the database named by dlock.database.")));
			break;
		case DLOCK_STATUS_WITHDRAWN:
			ereport(ERROR,
					(errcode(ERRCODE_DLOCK_WITHDRAWN),
					 errmsg("request for lock \"%s\" was withdrawn", name_for_message(req)),
					 errdetail("dlock_release_all() was called for its owner key.")));
			break;
		case DLOCK_STATUS_DEADLOCK:
			ereport(ERROR,
					(errcode(ERRCODE_T_R_DEADLOCK_DETECTED),
					 errmsg("deadlock detected while waiting for lock \"%s\"",
							name_for_message(req)),
					 errdetail("%s", reply->errmsg),
					 errhint("Acquire locks in one order, or take them together with a timeout.")));
			break;
		case DLOCK_STATUS_MODE_HELD:
			ereport(ERROR,
					(errcode(ERRCODE_DLOCK_MODE_HELD),
					 errmsg("lock \"%s\" is already held by this owner in mode %s, which does not include %s",
							req->op == DLOCK_OP_ACQUIRE_ALL ? nth_name(req, reply->token) :
							name_for_message(req), dlock_mode_name(reply->count),
							dlock_mode_name(req->mode)),
					 errhint("Use dlock_convert() to change the mode of a held lock.")));
			break;
		default:
			break;
	}
}

/*
 * check_caller
 *		The first step of every function that takes, changes or releases
 *		locks.  A grant belongs to the session that asks: in a parallel
 *		worker (a caller marked PARALLEL SAFE) it would be the worker's and
 *		end with it, and so in autovacuum (an index expression).
 */
static void
check_caller(void)
{
	dlock_check_loaded();
	if (IsInParallelMode())
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TRANSACTION_STATE),
				 errmsg("dlock functions that take or release locks cannot run during a parallel operation"),
				 errdetail("A lock taken in a parallel worker would belong to the worker and end with it."),
				 errhint("Mark the function that calls it PARALLEL UNSAFE.")));
	if (MyBackendType != B_BACKEND && MyBackendType != B_BG_WORKER)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("dlock functions cannot be called from a %s process",
						GetBackendTypeDesc(MyBackendType))));
	dlock_check_role();
}

/*
 * Fill what the acquire functions share; name_arg -1: the caller sets the
 * names; mode_arg -1: a semaphore's (NL).
 */
static void
acquire_request(FunctionCallInfo fcinfo, DLockRequest *req, int name_arg, int mode_arg,
				int ttl_arg, int owner_arg, int keep_arg)
{
	if (name_arg >= 0)
	{
		arg_name(fcinfo, name_arg, &req->name, &req->name_len);
		dlock_check_namespace(req->name, req->name_len);
	}
	req->mode = mode_arg >= 0 ? arg_mode(fcinfo, mode_arg) : DLOCK_MODE_NL;
	req->ttl_us = arg_ttl_us(fcinfo, ttl_arg);
	arg_owner(fcinfo, owner_arg, &req->owner, &req->owner_len);
	/* a lock that outlives its session must end some day */
	if (req->owner && req->ttl_us == 0)
		req->ttl_us = dls_default_ttl((int64) dlock_default_ttl_ms * 1000,
									  (int64) dlock_max_ttl_s * USECS_PER_SEC);
	req->keep_place = keep_arg >= 0 && keep_arg < PG_NARGS() &&
		!PG_ARGISNULL(keep_arg) && PG_GETARG_BOOL(keep_arg);
	/* keep_place without an owner key: the lock manager refuses it (core 14.1) */
}

/*
 * Submit a request answered by one token and report it: the token; NULL when
 * its timeout passed (a kept place stays) or a try was refused; the common
 * errors raised.
 */
static Datum
token_or_null(FunctionCallInfo fcinfo, const DLockRequest *req, const char *what)
{
	DLockReply	reply;

	dlock_call(req, &reply);
	report_common(req, &reply);
	if (reply.status == DLOCK_STATUS_GRANTED)
		PG_RETURN_INT64(reply.token);
	if (reply.status == DLOCK_STATUS_CANCELED || reply.status == DLOCK_STATUS_KEPT ||
		reply.status == DLOCK_STATUS_REFUSED)
		PG_RETURN_NULL();
	elog(ERROR, "unexpected dlock answer %d to %s", (int) reply.status, what);
	PG_RETURN_NULL();
}

Datum
dlock_acquire(PG_FUNCTION_ARGS)
{
	DLockRequest req = {0};

	check_caller();
	req.op = DLOCK_OP_ACQUIRE;
	acquire_request(fcinfo, &req, 0, 1, 3, 4, 5);
	req.timeout_at = arg_timeout_at(fcinfo, 2);
	return token_or_null(fcinfo, &req, "acquire");
}

static int
name_bsearch_cmp(const void *a, const void *b)
{
	return dls_name_cmp(a, b);
}

/*
 * dlock_acquire_all
 *		All the names or none, as one request: the worker grants every part
 *		at once or queues them together, so callers that take their locks
 *		this way cannot deadlock among themselves.  Duplicates collapse into
 *		one lock.  Returns one token per input element, in input order.
 */
Datum
dlock_acquire_all(PG_FUNCTION_ARGS)
{
	DLockRequest req = {0};
	DLockReply	reply;
	ArrayType  *arr;
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	DLsName    *refs;
	DLsName    *sorted;
	int			nunique = 0;
	StringInfoData packed;
	Datum	   *out;

	check_caller();
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("lock names must not be null")));
	arr = PG_GETARG_ARRAYTYPE_P(0);
	if (ARR_NDIM(arr) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("lock names must be a one-dimensional array")));
	deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
	if (n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lock names must not be empty")));
	refs = palloc(sizeof(DLsName) * n);
	for (int i = 0; i < n; i++)
	{
		text	   *t;

		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("lock name must not be null")));
		t = DatumGetTextPP(elems[i]);
		refs[i].p = VARDATA_ANY(t);
		refs[i].len = VARSIZE_ANY_EXHDR(t);
		refs[i].pos = i;
		dlock_check_name_arg(refs[i].p, refs[i].len);
		dlock_check_namespace(refs[i].p, refs[i].len);
	}

	/* the lock manager's order (core/README 18.8), duplicates once */
	sorted = palloc(sizeof(DLsName) * n);
	memcpy(sorted, refs, sizeof(DLsName) * n);
	nunique = dls_sort_names(sorted, n);
	initStringInfo(&packed);
	for (int i = 0; i < nunique; i++)
	{
		appendBinaryStringInfo(&packed, sorted[i].p, sorted[i].len);
		appendStringInfoChar(&packed, '\0');
	}
	if (nunique > DLOCK_MAX_MULTI || packed.len > dlock_shared->names_size)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("too many lock names"),
				 errdetail("At most %d distinct names of %d bytes in all can be taken together.",
						   DLOCK_MAX_MULTI, dlock_shared->names_size)));

	req.op = DLOCK_OP_ACQUIRE_ALL;
	req.name = packed.data;
	req.name_len = packed.len;
	req.nnames = nunique;
	acquire_request(fcinfo, &req, -1, 1, 3, 4, 5);
	req.timeout_at = arg_timeout_at(fcinfo, 2);

	dlock_call(&req, &reply);
	report_common(&req, &reply);
	if (reply.status == DLOCK_STATUS_CANCELED || reply.status == DLOCK_STATUS_KEPT)
		PG_RETURN_NULL();		/* timed out: none held (its place kept) */
	if (reply.status != DLOCK_STATUS_GRANTED)
		elog(ERROR, "unexpected dlock answer %d to acquire_all", (int) reply.status);

	out = palloc(sizeof(Datum) * n);
	for (int i = 0; i < n; i++)
	{
		DLsName    *hit = bsearch(&refs[i], sorted, nunique, sizeof(DLsName), name_bsearch_cmp);

		out[i] = Int64GetDatum(reply.tokens[hit - sorted]);
	}
	PG_RETURN_ARRAYTYPE_P(construct_array(out, n, INT8OID, 8, true, TYPALIGN_DOUBLE));
}

Datum
dlock_try_acquire(PG_FUNCTION_ARGS)
{
	DLockRequest req = {0};

	check_caller();
	req.op = DLOCK_OP_TRY;
	acquire_request(fcinfo, &req, 0, 1, 2, 3, -1);
	return token_or_null(fcinfo, &req, "try-acquire");
}

/* A semaphore's capacity (capacity_arg) and permits (the next argument). */
static void
semaphore_args(FunctionCallInfo fcinfo, DLockRequest *req, int capacity_arg)
{
	if (PG_ARGISNULL(capacity_arg) || PG_ARGISNULL(capacity_arg + 1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("capacity and permits must not be null")));
	req->capacity = PG_GETARG_INT32(capacity_arg);
	req->permits = PG_GETARG_INT32(capacity_arg + 1);
	if (req->capacity <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("capacity must be positive")));
	if (req->permits <= 0 || req->permits > req->capacity)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("permits must be between 1 and the capacity (%d)", req->capacity)));
}

/*
 * A text argument of at most DLOCK_MAX_VALUE_LEN bytes (a leader's value,
 * an administrator's reason), never NULL: the messages name it.
 */
static void
arg_bounded_text(FunctionCallInfo fcinfo, int argno, DLockRequest *req,
				 const char *null_message, const char *null_hint,
				 const char *what, const char *noun)
{
	text	   *t;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s", null_message),
				 errhint("%s", null_hint)));
	t = PG_GETARG_TEXT_PP(argno);
	req->value = VARDATA_ANY(t);
	req->value_len = VARSIZE_ANY_EXHDR(t);
	if (req->value_len > DLOCK_MAX_VALUE_LEN)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("%s is too long", what),
				 errdetail("The %s is %d bytes; the limit is %d bytes.",
						   noun, req->value_len, DLOCK_MAX_VALUE_LEN)));
}

/* A leader's value (argument argno). */
static void
arg_value(FunctionCallInfo fcinfo, int argno, DLockRequest *req)
{
	arg_bounded_text(fcinfo, argno, req, "a leader's value must not be null",
					 "Publish where to reach the leader, or an empty string.",
					 "a leader's value", "value");
}

/*
 * dlock_campaign
 *		Wait in FIFO order to lead the election 'name' (an exclusive lock),
 *		publishing 'value'; the token is the leader's term (core/README 16).
 */
Datum
dlock_campaign(PG_FUNCTION_ARGS)
{
	DLockRequest req = {0};

	check_caller();
	req.op = DLOCK_OP_ACQUIRE;
	acquire_request(fcinfo, &req, 0, -1, 3, 4, 5);
	req.mode = DLOCK_MODE_EX;
	req.election = true;
	arg_value(fcinfo, 1, &req);
	req.timeout_at = arg_timeout_at(fcinfo, 2);
	return token_or_null(fcinfo, &req, "campaign");
}

/* dlock_proclaim: the leader publishes a new value; DL001 if not the leader. */
Datum
dlock_proclaim(PG_FUNCTION_ARGS)
{
	DLockRequest req = {0};
	DLockReply	reply;

	check_caller();
	req.op = DLOCK_OP_PROCLAIM;
	arg_name(fcinfo, 0, &req.name, &req.name_len);
	dlock_check_namespace(req.name, req.name_len);
	arg_value(fcinfo, 1, &req);
	arg_owner(fcinfo, 2, &req.owner, &req.owner_len);

	dlock_call(&req, &reply);
	report_common(&req, &reply);
	if (reply.status == DLOCK_STATUS_GRANTED)
		PG_RETURN_INT64(reply.token);
	if (reply.status == DLOCK_STATUS_NOT_HELD)
		ereport(ERROR,
				(errcode(ERRCODE_DLOCK_NOT_HELD),
				 errmsg("this %s does not lead \"%s\"", req.owner ? "owner" : "session",
						name_for_message(&req)),
				 errhint("Campaign with dlock_campaign() first; a lead ends with its lease or session.")));
	elog(ERROR, "unexpected dlock answer %d to proclaim", (int) reply.status);
	PG_RETURN_NULL();
}

/*
 * dlock_semaphore
 *		Wait in strict FIFO order for permits of a counting semaphore: at most
 *		capacity permits are held at once; the capacity is the server's
 *		while anyone holds or waits (core/README 15).
 */
Datum
dlock_semaphore(PG_FUNCTION_ARGS)
{
	DLockRequest req = {0};

	check_caller();
	req.op = DLOCK_OP_ACQUIRE;
	acquire_request(fcinfo, &req, 0, -1, 4, 5, 6);
	semaphore_args(fcinfo, &req, 1);
	req.timeout_at = arg_timeout_at(fcinfo, 3);
	return token_or_null(fcinfo, &req, "semaphore");
}

Datum
dlock_try_semaphore(PG_FUNCTION_ARGS)
{
	DLockRequest req = {0};

	check_caller();
	req.op = DLOCK_OP_TRY;
	acquire_request(fcinfo, &req, 0, -1, 3, 4, -1);
	semaphore_args(fcinfo, &req, 1);
	return token_or_null(fcinfo, &req, "try-semaphore");
}

Datum
dlock_convert(PG_FUNCTION_ARGS)
{
	DLockRequest req = {0};
	DLockReply	reply;

	check_caller();
	req.op = DLOCK_OP_CONVERT;
	arg_name(fcinfo, 0, &req.name, &req.name_len);
	dlock_check_namespace(req.name, req.name_len);
	req.mode = arg_mode(fcinfo, 1);
	req.timeout_at = arg_timeout_at(fcinfo, 2);
	arg_owner(fcinfo, 3, &req.owner, &req.owner_len);

	dlock_call(&req, &reply);
	report_common(&req, &reply);
	if (reply.status == DLOCK_STATUS_GRANTED)
		PG_RETURN_INT64(reply.token);
	if (reply.status == DLOCK_STATUS_CANCELED)
		PG_RETURN_NULL();		/* timed out: the old mode is kept */
	if (reply.status == DLOCK_STATUS_NOT_HELD)
		report_not_held(&req, ERROR, NULL,
						"Only a held lock can be converted; acquire it first.");
	elog(ERROR, "unexpected dlock answer %d to convert", (int) reply.status);
	PG_RETURN_NULL();
}

Datum
dlock_release(PG_FUNCTION_ARGS)
{
	DLockRequest req = {0};
	DLockReply	reply;

	check_caller();
	req.op = DLOCK_OP_RELEASE;
	arg_name(fcinfo, 0, &req.name, &req.name_len);
	arg_owner(fcinfo, 1, &req.owner, &req.owner_len);

	dlock_call(&req, &reply);
	report_common(&req, &reply);
	if (reply.status == DLOCK_STATUS_RELEASED)
		PG_RETURN_BOOL(true);
	if (reply.status == DLOCK_STATUS_NOT_HELD)
	{
		report_not_held(&req, WARNING, NULL, NULL);
		PG_RETURN_BOOL(false);
	}
	elog(ERROR, "unexpected dlock answer %d to release", (int) reply.status);
	PG_RETURN_NULL();
}

Datum
dlock_renew(PG_FUNCTION_ARGS)
{
	DLockRequest req = {0};
	DLockReply	reply;

	check_caller();
	req.op = DLOCK_OP_RENEW;
	arg_name(fcinfo, 0, &req.name, &req.name_len);
	req.ttl_us = arg_ttl_us(fcinfo, 1);
	arg_owner(fcinfo, 2, &req.owner, &req.owner_len);

	dlock_call(&req, &reply);
	report_common(&req, &reply);
	if (reply.status == DLOCK_STATUS_NOT_HELD)
		report_not_held(&req, ERROR, "Its lease may have expired, or it was released.",
						NULL);
	if (reply.status == DLOCK_STATUS_RENEWED)
	{
		if (reply.expires_at == 0)
			PG_RETURN_NULL();	/* a lock without a lease */
		PG_RETURN_TIMESTAMPTZ(reply.expires_at);
	}
	elog(ERROR, "unexpected dlock answer %d to renew", (int) reply.status);
	PG_RETURN_NULL();
}

Datum
dlock_release_all(PG_FUNCTION_ARGS)
{
	DLockRequest req = {0};
	DLockReply	reply;

	check_caller();
	req.op = DLOCK_OP_RELEASE_ALL;
	req.name = "";
	req.name_len = 0;
	arg_owner(fcinfo, 0, &req.owner, &req.owner_len);

	dlock_call(&req, &reply);
	report_common(&req, &reply);
	if (reply.status == DLOCK_STATUS_COUNT)
		PG_RETURN_INT32(reply.count);
	elog(ERROR, "unexpected dlock answer %d to release_all", (int) reply.status);
	PG_RETURN_NULL();
}

/* An administrator's reason (argument argno): required. */
static void
arg_reason(FunctionCallInfo fcinfo, int argno, DLockRequest *req)
{
	arg_bounded_text(fcinfo, argno, req, "a reason is required",
					 "Say why, e.g. reason => 'holder stuck since 02:00, ticket 1234': the holder is told, and the server log keeps it.",
					 "a reason", "reason");
}

/*
 * dlock_force_release(name, owner DEFAULT NULL, reason)
 *		dlock_admin: release every holder of 'name' (or the owner key's
 *		hold), whatever its count; the holders' next renew, release or
 *		convert fails with DL001 and the reason; NOTIFY dlock_revoked; the
 *		server log says who.  Returns how many holders it released.
 */
Datum
dlock_force_release(PG_FUNCTION_ARGS)
{
	DLockRequest req = {0};
	DLockReply	reply;

	check_caller();
	req.op = DLOCK_OP_FORCE_RELEASE;
	arg_name(fcinfo, 0, &req.name, &req.name_len);
	arg_owner(fcinfo, 1, &req.owner, &req.owner_len);
	arg_reason(fcinfo, 2, &req);

	dlock_call(&req, &reply);
	report_common(&req, &reply);
	if (reply.status != DLOCK_STATUS_COUNT)
		elog(ERROR, "unexpected dlock answer %d to force_release", (int) reply.status);
	/* who, what and why; never the key itself (a secret) */
	ereport(LOG,
			(errmsg("dlock: role \"%s\" (pid %d) force-released %d holder%s of lock \"%s\"%s",
					GetUserNameFromId(GetUserId(), false), MyProcPid, reply.count,
					reply.count == 1 ? "" : "s", name_for_message(&req),
					req.owner ? " (one owner key)" : ""),
			 errdetail("Reason: %.*s", req.value_len, req.value)));
	PG_RETURN_INT32(reply.count);
}

/*
 * dlock_force_release_all(owner, reason)
 *		dlock_admin: dlock_release_all of the owner key on its behalf; its
 *		next renew, release or convert of any name fails with DL001 and the
 *		reason.  Returns how many locks and requests it ended.
 */
Datum
dlock_force_release_all(PG_FUNCTION_ARGS)
{
	DLockRequest req = {0};
	DLockReply	reply;

	check_caller();
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("an owner key is required"),
				 errhint("A session's locks end with the session: pg_terminate_backend ends them all.")));
	req.op = DLOCK_OP_FORCE_RELEASE_ALL;
	req.name = "";
	req.name_len = 0;
	arg_owner(fcinfo, 0, &req.owner, &req.owner_len);
	arg_reason(fcinfo, 1, &req);

	dlock_call(&req, &reply);
	report_common(&req, &reply);
	if (reply.status != DLOCK_STATUS_COUNT)
		elog(ERROR, "unexpected dlock answer %d to force_release_all", (int) reply.status);
	ereport(LOG,
			(errmsg("dlock: role \"%s\" (pid %d) force-released everything of an owner key (%d locks and requests)",
					GetUserNameFromId(GetUserId(), false), MyProcPid, reply.count),
			 errdetail("Reason: %.*s", req.value_len, req.value)));
	PG_RETURN_INT32(reply.count);
}

/*
 * dlock_discard_session
 *		DISCARD ALL (dlock.c's utility hook): end what the session holds and
 *		waits for, as it ends advisory locks, so that the next client of a
 *		pooled connection inherits nothing.  A session that never called
 *		dlock has nothing to end.  An error (no worker) fails the DISCARD,
 *		and a pooler then closes the connection, which ends the locks too.
 */
void
dlock_discard_session(void)
{
	DLockRequest req = {0};
	DLockReply	reply;

	if (!session_registered || dlock_shared == NULL)
		return;
	req.op = DLOCK_OP_RELEASE_ALL;
	req.name = "";
	dlock_call(&req, &reply);
	report_common(&req, &reply);
}

Datum
dlock_new_owner(PG_FUNCTION_ARGS)
{
	uint8		key[16];
	char		hex[sizeof(key) * 2 + 1];

	if (!pg_strong_random(key, sizeof(key)))
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not generate a random owner key")));
	for (size_t i = 0; i < sizeof(key); i++)
		snprintf(hex + 2 * i, 3, "%02x", key[i]);
	PG_RETURN_TEXT_P(cstring_to_text(hex));
}

/*
 * dlock_manager_pid
 *		The lock manager's process id, NULL if none runs.  NOTIFY
 *		dlock_blocking can be sent by any role that may connect; the genuine
 *		ones come from this process (a listener compares the sender's pid).
 */
Datum
dlock_manager_pid(PG_FUNCTION_ARGS)
{
	int			pid;

	dlock_check_loaded();
	SpinLockAcquire(&dlock_shared->mutex);
	pid = dlock_shared->worker_pid;
	SpinLockRelease(&dlock_shared->mutex);
	if (pid == 0)
		PG_RETURN_NULL();
	PG_RETURN_INT32(pid);
}
