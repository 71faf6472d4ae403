/* SPDX-License-Identifier: PostgreSQL */
/*
 * dlock_slots.c
 *		The worker's side of the slot protocol (dlock.h): what a batch takes
 *		from the slots, the answers it keeps per slot until its commit, and
 *		their publication afterwards.
 *
 * Interface: see dlock_slots.h.
 *
 * An answer reaches a slot only in slots_stage, after the batch that
 * decided it has committed, and its backend only in slots_release_staged,
 * once a synchronous standby has confirmed that commit: a backend never
 * learns of a grant the tables, or a promoted standby, could still lose.
 */
#include "postgres.h"

#include "mb/pg_wchar.h"
#include "port/pg_bitutils.h"
#include "miscadmin.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/spin.h"
#include "utils/memutils.h"

#include "dlock_slots.h"

/* What to tell a slot once the batch has committed. */
typedef struct Outcome
{
	bool		listed;
	bool		answered;
	bool		queued;			/* waits: publish its ticket */
	bool		end_session;	/* session cleaned up: free the slot */
	DLockStatus status;
	int64		token;
	TimestampTz expires_at;
	int32		count;
	int64		tokens[DLOCK_MAX_MULTI];
	char		errmsg[DLOCK_ERRMSG_LEN];
} Outcome;

static MemoryContext batch_cxt;
static Outcome *outcomes;		/* per slot */
static List *outcome_slots;		/* the slots with an outcome, this batch */
static List *staged = NIL;		/* slots answered STAGED, not yet released */

/*
 * Look at every slot at the next collect, not only the marked ones: at the
 * start, after a reload (requests were resubmitted) and after isolation
 * (requests were left submitted).
 */
static bool scan_all = true;

static Outcome *outcome_of(int slotno);
static void collect_slot(int i, List **ended, List **withdrawn, List **fresh);
static void copy_message(char *dst, const char *msg);
static void copy_request(DLockSlot *slot, int slotno, Request *r);
static int	request_seq_cmp(const ListCell *a, const ListCell *b);

void
slots_init(void)
{
	batch_cxt = AllocSetContextCreate(TopMemoryContext, "dlock batch",
									  ALLOCSET_DEFAULT_SIZES);
	outcomes = MemoryContextAllocZero(TopMemoryContext,
									  sizeof(Outcome) * dlock_shared->nslots);
}

void
slots_scan_all(void)
{
	scan_all = true;
}

void
slots_end_session(int slotno)
{
	outcome_of(slotno)->end_session = true;
}

/*
 * After a failed batch, the request that was taken alone: its answer is
 * the error (also for a backend that gave up waiting: the slot is freed).
 */
void
slots_fail_isolated(int slotno, const char *message)
{
	DLockSlot  *slot = dlock_slot(slotno);

	SpinLockAcquire(&slot->mutex);
	if (slot->state == DLOCK_SLOT_ACCEPTED)
	{
		slot->status = DLOCK_STATUS_ERROR;
		slot->count = DLM_OK;	/* not the lock manager's refusal */
		copy_message(slot->errmsg, message);
		slot->state = slot->abandoned ? DLOCK_SLOT_FREE : DLOCK_SLOT_DONE;
		slot->abandoned = false;
	}
	SpinLockRelease(&slot->mutex);
	SetLatch(&ProcGlobal->allProcs[slotno].procLatch);
}

/* ---------------------------------------------------------------------
 * Answers: the lock manager's, kept per slot until the batch commits
 * --------------------------------------------------------------------- */

static Outcome *
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

/*
 * After a failed batch: the outcomes listed were never handed out; what
 * was staged is released after the reload (slots_adopt_staged).
 */
void
slots_forget(void)
{
	for (int i = 0; i < dlock_shared->nslots; i++)
		outcomes[i].listed = false;
	list_free(staged);
	staged = NIL;
}

static void
answer_slot(int slotno, DLockStatus status, int64 token, TimestampTz expires_at,
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
static void
copy_message(char *dst, const char *msg)
{
	int			len = strlen(msg);

	if (len >= DLOCK_ERRMSG_LEN)
		len = pg_mbcliplen(msg, len, DLOCK_ERRMSG_LEN - 1);
	memcpy(dst, msg, len);
	dst[len] = '\0';
}

static void
answer_error(int slotno, DLockStatus status, const char *msg)
{
	Outcome    *o = outcome_of(slotno);

	answer_slot(slotno, status, 0, 0, 0);
	copy_message(o->errmsg, msg);
}

/* An owner in a deadlock's DETAIL: keys are secrets, so no key. */
static void
owner_words(char *buf, size_t size, bool keyed, int32 pid, void *arg)
{
	if (keyed)
		snprintf(buf, size, "an owner key (pid %d)", (int) pid);
	else
		snprintf(buf, size, "session %d", (int) pid);
}

static void
name_words(char *buf, size_t size, const char *name, void *arg)
{
	strlcpy(buf, name, size);
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
			{
				/* cut to the message by copy_message, on a character boundary */
				char		cycle[DLOCK_ERRMSG_LEN * 4];

				dls_describe_cycle(cycle, sizeof(cycle), a, owner_words, name_words, NULL);
				answer_error(slotno, DLOCK_STATUS_DEADLOCK, cycle);
			}
			break;
		case DLOCK_STATUS_REVOKED:
			/* an administrator released what the request found not held */
			answer_error(slotno, DLOCK_STATUS_REVOKED, a->reason ? a->reason : "");
			break;
		case DLOCK_STATUS_ERROR:
			answer_error(slotno, DLOCK_STATUS_ERROR, dlm_error_message(a->error));
			outcome_of(slotno)->count = a->error;	/* which refusal */
			break;
		case DLOCK_STATUS_MODE_HELD:
			/* which name (in token) and its held mode (in count) */
			answer_slot(slotno, a->status, a->name_index, 0, a->count);
			break;
		default:
			answer_slot(slotno, a->status, a->token, a->expires_at, a->count);
			o = outcome_of(slotno);
			if (a->ntokens > 0)
				memcpy(o->tokens, a->tokens, sizeof(int64) * a->ntokens);
			else
				o->tokens[0] = a->token;	/* acquire_all of one name */
			break;
	}
}

/*
 * slots_unconfirmed
 *		The staged answers' commit will never be confirmed by a synchronous
 *		standby (dlock_worker.c, give_back): every grant and renewal among
 *		them is answered UNCONFIRMED instead.  Returns the requests whose
 *		grants are to be released again, as their slots hold them.
 */
List *
slots_unconfirmed(void)
{
	List	   *grants = NIL;
	ListCell   *lc;

	foreach(lc, staged)
	{
		int			slotno = lfirst_int(lc);
		DLockSlot  *slot = dlock_slot(slotno);
		Request    *r = palloc(sizeof(Request));
		bool		undo;

		SpinLockAcquire(&slot->mutex);
		if (slot->state != DLOCK_SLOT_STAGED ||
			(slot->status != DLOCK_STATUS_GRANTED && slot->status != DLOCK_STATUS_RENEWED))
		{
			SpinLockRelease(&slot->mutex);
			pfree(r);
			continue;
		}
		copy_request(slot, slotno, r);
		undo = slot->status == DLOCK_STATUS_GRANTED && dlock_op_grants(r->ds.q.op);
		slot->status = DLOCK_STATUS_UNCONFIRMED;
		copy_message(slot->errmsg, undo ?
					 "synchronous_standby_names stopped naming a standby while the lock manager's commit waited for one; the grant was released again." :
					 "synchronous_standby_names stopped naming a standby while the lock manager's commit waited for one; the change may not have reached the standby.");
		SpinLockRelease(&slot->mutex);
		if (undo)
			grants = lappend(grants, r);
	}
	return grants;
}

/* Whether the batch has an answer or a freed slot to publish. */
bool
slots_answers_ready(void)
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

MemoryContext
slots_batch_begin(bool keep)
{
	if (keep)
		return batch_cxt;		/* a deferred batch goes on gathering */
	MemoryContextReset(batch_cxt);
	outcome_slots = NIL;
	return batch_cxt;
}

/*
 * collect
 *		Take from the slots what this batch handles: session ends,
 *		withdrawals and new requests (in submission order).  New requests
 *		are marked ACCEPTED.  In isolation mode only the earliest new request
 *		is taken; the others stay submitted for later batches.  Only slots
 *		their backends marked since the last collect are looked at
 *		(dlock_wake_worker), unless slots_scan_all asked for all.
 */
void
slots_collect(List **ended, List **withdrawn, List **fresh, bool one_fresh)
{
	for (int w = 0; w * 64 < dlock_shared->nslots; w++)
	{
		/* take the marks first: a change after this marks its slot again */
		uint64		marked = pg_atomic_exchange_u64(&dlock_pending[w], 0);

		if (scan_all)
			marked = ~UINT64CONST(0);
		for (; marked != 0; marked &= marked - 1)
			collect_slot(w * 64 + pg_rightmost_one_pos64(marked), ended, withdrawn, fresh);
	}
	/* requests isolation leaves submitted are marked by nobody */
	scan_all = one_fresh;
	list_sort(*fresh, request_seq_cmp);

	if (one_fresh && list_length(*fresh) > 1)
	{
		ListCell   *lc;

		for_each_from(lc, *fresh, 1)
		{
			Request    *r = lfirst(lc);
			DLockSlot  *slot = dlock_slot(r->ds.q.requester);

			SpinLockAcquire(&slot->mutex);
			if (slot->state == DLOCK_SLOT_ACCEPTED)
				slot->state = DLOCK_SLOT_SUBMITTED;
			SpinLockRelease(&slot->mutex);
		}
		*fresh = list_truncate(*fresh, 1);
	}
}

/* A slot's session end, withdrawal or new request, if it has one. */
static void
collect_slot(int i, List **ended, List **withdrawn, List **fresh)
{
	DLockSlot  *slot;
	Request    *r;

	if (i >= dlock_shared->nslots)
		return;					/* the last word's bits past the slots */
	slot = dlock_slot(i);
	SpinLockAcquire(&slot->mutex);
	if (slot->pid == 0)
		SpinLockRelease(&slot->mutex);
	else if (slot->session_ended)
	{
		r = palloc(sizeof(Request));
		copy_request(slot, i, r);
		r->state = slot->state;
		r->status = slot->status;
		r->abandoned = slot->abandoned;
		SpinLockRelease(&slot->mutex);
		*ended = lappend(*ended, r);
	}
	else if (slot->cancel && slot->keep_place && slot->state == DLOCK_SLOT_SUBMITTED)
	{
		/*
		 * Its timeout passed before the lock manager saw it: a kept place is
		 * still owed (core 14), so it runs and is withdrawn right after.
		 */
		slot->state = DLOCK_SLOT_ACCEPTED;
		r = palloc(sizeof(Request));
		copy_request(slot, i, r);
		SpinLockRelease(&slot->mutex);
		r->ds.withdraw_after = true;
		*fresh = lappend(*fresh, r);
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

/*
 * Copy a slot's request as the service takes it; caller holds the slot's
 * mutex.
 */
static void
copy_request(DLockSlot *slot, int slotno, Request *r)
{
	DLmRequest *q = &r->ds.q;
	char	  **names;

	memset(r, 0, sizeof(Request));
	r->seq = slot->seq;
	r->withdraw_timeout = slot->cancel_timeout;
	q->op = slot->op;
	q->requester = slotno;
	q->mode = slot->mode;
	q->ttl_us = slot->ttl_us;
	q->max_ttl_us = slot->max_ttl_us;
	q->timeout_at = slot->timeout_at;
	q->keep_place = slot->keep_place;
	q->capacity = slot->capacity;
	q->permits = slot->permits;
	q->election = slot->election;
	q->value = slot->value_len >= 0 ?
		pnstrdup(dlock_slot_value(slot), slot->value_len) : NULL;
	q->pid = slot->pid;
	q->session_start = slot->session_start;
	q->role = slot->role;
	q->any_role = slot->any_role;
	q->role_max_locks = slot->quotas.max_locks;
	q->owner_max_locks = slot->quotas.max_locks_per_owner;
	q->role_max_bytes = slot->quotas.max_bytes;
	q->owner_max_bytes = slot->quotas.max_bytes_per_owner;
	/* several names, NUL-separated: acquire_all, or a release undoing one */
	q->nnames = slot->nnames;
	names = palloc(sizeof(char *) * q->nnames);
	if (q->nnames > 1)
	{
		const char *p = dlock_slot_name(slot);

		for (int i = 0; i < q->nnames; i++)
		{
			names[i] = pstrdup(p);
			p += strlen(p) + 1;
		}
	}
	else
		names[0] = pnstrdup(dlock_slot_name(slot), slot->name_len);
	q->names = (const char *const *) names;
	q->owner_key = slot->owner_len > 0 ?
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
 * slots_stage
 *		After commit: hand every outcome to its slot.  An answer is STAGED:
 *		its backend takes it only once slots_release_staged makes it DONE
 *		(after a synchronous standby confirmed the commit).  What exposes
 *		no answer takes effect now: a session's end frees its slot, an
 *		abandoned request that granted nothing frees it, a waiter's ticket
 *		is published.
 */
void
slots_stage(DLockManager *lm)
{
	ListCell   *lc;
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

	foreach(lc, outcome_slots)
	{
		int			slotno = lfirst_int(lc);
		Outcome    *o = &outcomes[slotno];
		DLockSlot  *slot = dlock_slot(slotno);
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
			slot->state = DLOCK_SLOT_STAGED;
			staged = lappend_int(staged, slotno);
		}
		else if (o->queued && lm && (w = dlm_waiter_of(lm, slotno)) != NULL)
			slot->ticket = w->ticket;
		SpinLockRelease(&slot->mutex);
		if (wake)
			SetLatch(&ProcGlobal->allProcs[slotno].procLatch);
		o->listed = false;
	}
	outcome_slots = NIL;
	MemoryContextSwitchTo(old);
}

/* A STAGED slot's answer becomes its backend's (caller holds its mutex). */
static void
release_staged(DLockSlot *slot)
{
	if (slot->abandoned &&
		!(slot->status == DLOCK_STATUS_GRANTED && dlock_op_grants(slot->op)))
	{
		/* given up on meanwhile, and nothing needs undoing */
		slot->state = DLOCK_SLOT_FREE;
		slot->cancel = false;
		slot->abandoned = false;
	}
	else
		slot->state = DLOCK_SLOT_DONE;
}

/* The answers slots_stage staged: their backends take them now. */
void
slots_release_staged(void)
{
	ListCell   *lc;

	foreach(lc, staged)
	{
		int			slotno = lfirst_int(lc);
		DLockSlot  *slot = dlock_slot(slotno);

		SpinLockAcquire(&slot->mutex);
		if (slot->state == DLOCK_SLOT_STAGED)
			release_staged(slot);
		SpinLockRelease(&slot->mutex);
		SetLatch(&ProcGlobal->allProcs[slotno].procLatch);
	}
	list_free(staged);
	staged = NIL;
}

/*
 * At a load: the answers a predecessor staged and could not release (it
 * ended before a synchronous standby confirmed them) are this worker's to
 * release, with its own load's (slots_release_staged).
 */
void
slots_adopt_staged(void)
{
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

	for (int i = 0; i < dlock_shared->nslots; i++)
	{
		DLockSlot  *slot = dlock_slot(i);
		bool		left;

		SpinLockAcquire(&slot->mutex);
		left = slot->pid != 0 && slot->state == DLOCK_SLOT_STAGED;
		SpinLockRelease(&slot->mutex);
		if (left && !list_member_int(staged, i))
			staged = lappend_int(staged, i);
	}
	MemoryContextSwitchTo(old);
}

/*
 * Answer what cannot be served while the picture cannot be loaded (the
 * extension is not installed, or loading fails).
 */
void
slots_refuse_all(DLockStatus status, const char *why)
{
	List	   *ended = NIL;
	List	   *withdrawn = NIL;
	List	   *fresh = NIL;
	ListCell   *lc;

	MemoryContextSwitchTo(slots_batch_begin(false));
	slots_collect(&ended, &withdrawn, &fresh, false);
	foreach(lc, ended)
		outcome_of(((Request *) lfirst(lc))->ds.q.requester)->end_session = true;
	foreach(lc, withdrawn)
		answer_slot(((Request *) lfirst(lc))->ds.q.requester, DLOCK_STATUS_CANCELED, 0, 0, 0);
	foreach(lc, fresh)
		answer_error(((Request *) lfirst(lc))->ds.q.requester, status, why);
	slots_stage(NULL);
	slots_release_staged();
	MemoryContextSwitchTo(TopMemoryContext);
}

bool
slots_work_pending(void)
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
