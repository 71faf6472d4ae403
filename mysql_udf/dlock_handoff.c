/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * dlock_handoff.c
 *		The hand-off of calls between a caller's thread and the manager
 *		thread: every call has a slot (its requester number in the core)
 *		from submission to answer.  The caller copies its request into the
 *		slot, queues it and sleeps on the slot's condition variable; the
 *		manager takes the queue, decides, and after the batch committed
 *		hands the answer over and wakes the caller.
 *
 * Interface: dlock_handoff.h (the manager's side), dlock_mgr.h (the
 * callers' side: mgr_call, mgr_inspect, mgr_session_end,
 * mgr_check_running).
 *
 * Locking: handoff.mu guards the slots' state and the queues of submitted
 * requests, withdrawals, ended sessions and inspections (dlock_handoff.h
 * says which slot fields the manager keeps to itself until it publishes).
 * A waiting caller's condition variable is registered with the server, so
 * that a KILL wakes it at once, and the caller looks every CLIENT_POLL_MS
 * whether its client went away (the server notices that only after the
 * statement).  A caller that gives up (timeout, kill) lists its slot for
 * withdrawal; the manager then answers it CANCELED (or KEPT), or with what
 * it had decided first.
 */
#define _GNU_SOURCE
#include "dlock_handoff.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dlock_clock.h"
#include "dlock_errors.h"

/* How often a waiting call looks whether its client went away. */
#define CLIENT_POLL_MS 50

Handoff		handoff = {.mu = {PTHREAD_MUTEX_INITIALIZER, NULL}, .next_seq = 1};

/*
 * The slots with an answer of this batch (the manager thread's alone), so
 * that publishing looks at those, not at every slot: a walk over all
 * NSLOTS slots, 5 KB apart, was the manager's largest cost per hand-off.
 */
static struct
{
	int			list[NSLOTS];
	int			n;
	bool		overflow;		/* the list missed some: look at every slot */
}			pending;

static Slot *slot_get(const char *fn, DlockErr *err);
static int	slot_copy(Slot *s, const DlockCall *call, DlockErr *err);
static void submit_locked(Slot *s);
static void withdraw_locked(Slot *s);
static void slot_put_locked(Slot *s);

/* ------------------------------------------------------------------------
 * The callers' side
 * ------------------------------------------------------------------------ */
int
mgr_check_running(const char *fn, DlockErr *err)
{
	int			ok;

	pthread_mutex_lock(&handoff.mu.m);
	ok = handoff.running;
	pthread_mutex_unlock(&handoff.mu.m);
	if (!ok)
		dlock_set_err(err, DLOCK_ER_UNKNOWN,
				"%s: the dlock plugin is not loaded (INSTALL SONAME 'dlock_udf', "
				"or plugin-load-add = dlock_udf.so in the server's configuration)", fn);
	return ok ? 0 : -1;
}

int
mgr_call(const DlockCaller *who, const DlockCall *call, DlockResult *res,
		 DlockErr *err)
{
	Slot	   *s;
	/* only a call that may wait can be given up (timeout, kill) */
	bool		may_wait = call->op == DLOCK_OP_ACQUIRE ||
		call->op == DLOCK_OP_ACQUIRE_ALL || call->op == DLOCK_OP_CONVERT;
	long long	deadline = 0;
	struct timespec start;
	bool		registered;
	int			rc = 0;

	/* names outside the caller's namespace never reach the lock manager */
	if ((call->op == DLOCK_OP_ACQUIRE || call->op == DLOCK_OP_TRY ||
		 call->op == DLOCK_OP_ACQUIRE_ALL) &&
		mgr_namespace_check(call->fn, who, call->names, call->name_lens,
							call->nnames, err) != 0)
		return -1;
	if ((s = slot_get(call->fn, err)) == NULL)
		return -1;
	if (slot_copy(s, call, err) != 0)
	{
		pthread_mutex_lock(&handoff.mu.m);
		slot_put_locked(s);
		pthread_mutex_unlock(&handoff.mu.m);
		return -1;
	}
	s->conn_id = who->conn_id;
	snprintf(s->account, sizeof(s->account), "%.*s", (int) who->account_len, who->account);
	s->ds.q.any_role = (who->access & DLOCK_ACCESS_ADMIN) != 0;
	clock_gettime(CLOCK_MONOTONIC, &start);
	if (call->timeout_us >= 0)
	{
		deadline = (long long) start.tv_sec * 1000000 + start.tv_nsec / 1000 +
			call->timeout_us;
		s->ds.q.timeout_at = now_us() + call->timeout_us;
	}

	pthread_mutex_lock(&handoff.mu.m);
	submit_locked(s);
	batch_now_locked();
	registered = may_wait && who->wait_enter != NULL && who->wait_exit != NULL;
	if (registered)
		who->wait_enter(&s->cond, &handoff.mu);
	while (s->state != SLOT_DONE)
	{
		struct timespec ts;
		struct timespec nowts;
		long long	now_mono;
		long long	wait_us = CLIENT_POLL_MS * 1000;

		if (!may_wait)
		{
			pthread_cond_wait(&s->cond.c, &handoff.mu.m);
			continue;
		}
		if (!s->withdraw)
		{
			clock_gettime(CLOCK_MONOTONIC, &nowts);
			now_mono = (long long) nowts.tv_sec * 1000000 + nowts.tv_nsec / 1000;
			if (call->timeout_us >= 0 && now_mono >= deadline)
				withdraw_locked(s);
			else
			{
				pthread_mutex_unlock(&handoff.mu.m);
				if (who->killed(who->killed_arg))
				{
					pthread_mutex_lock(&handoff.mu.m);
					withdraw_locked(s);
					continue;
				}
				pthread_mutex_lock(&handoff.mu.m);
				if (s->state == SLOT_DONE)
					break;
				if (call->timeout_us >= 0 && deadline - now_mono < wait_us)
					wait_us = deadline - now_mono;
			}
		}
		deadline_ts(&ts, wait_us > 0 ? wait_us : 1);
		pthread_cond_timedwait(&s->cond.c, &handoff.mu.m, &ts);
	}
	if (registered)
	{
		who->wait_exit();		/* unlocks mu, as the server's exit_cond does */
		pthread_mutex_lock(&handoff.mu.m);
	}
	*res = s->res;
	if (s->res.status == DLOCK_STATUS_ERROR ||
		s->res.status == DLOCK_STATUS_DEADLOCK ||
		s->res.status == DLOCK_STATUS_MODE_HELD ||
		s->res.status == DLOCK_STATUS_WITHDRAWN ||
		s->res.status == DLOCK_STATUS_REVOKED ||
		s->res.status == DLOCK_STATUS_NOT_READY)
	{
		*err = s->err;
		if (err->code == 0)
			dlock_set_err(err, DLOCK_ER_UNKNOWN, "%s: lock manager failed", call->fn);
		rc = -1;
	}
	slot_put_locked(s);
	pthread_mutex_unlock(&handoff.mu.m);
	return rc;
}

int
mgr_inspect(const char *fn_name, MgrInspectFn fn, void *arg, DlockErr *err)
{
	Slot	   *s = slot_get(fn_name, err);
	int			rc = 0;

	if (s == NULL)
		return -1;
	pthread_mutex_lock(&handoff.mu.m);
	s->inspect_fn = fn;
	s->inspect_arg = arg;
	s->call.fn = fn_name;
	s->state = SLOT_SUBMITTED;
	s->next = NULL;
	if (handoff.inspect_tail)
		handoff.inspect_tail->next = s;
	else
		handoff.inspect_head = s;
	handoff.inspect_tail = s;
	pthread_cond_signal(&handoff.work_cond);
	while (s->state != SLOT_DONE)
		pthread_cond_wait(&s->cond.c, &handoff.mu.m);
	if (s->res.status == DLOCK_STATUS_ERROR)
	{
		*err = s->err;
		rc = -1;
	}
	s->inspect_fn = NULL;
	slot_put_locked(s);
	pthread_mutex_unlock(&handoff.mu.m);
	return rc;
}

/* A session ended (the audit plugin): queued for the manager. */
void
mgr_session_end(unsigned long long conn_id)
{
	pthread_mutex_lock(&handoff.mu.m);
	if (!handoff.running)
	{
		pthread_mutex_unlock(&handoff.mu.m);
		return;
	}
	if (handoff.nended == handoff.ended_cap)
	{
		size_t		cap = handoff.ended_cap ? handoff.ended_cap * 2 : 64;
		unsigned long long *n = realloc(handoff.ended, cap * sizeof(*n));

		if (n == NULL)
		{
			/* the next load drops sessions that are gone anyway */
			pthread_mutex_unlock(&handoff.mu.m);
			return;
		}
		handoff.ended = n;
		handoff.ended_cap = cap;
	}
	handoff.ended[handoff.nended++] = conn_id;
	pthread_cond_signal(&handoff.work_cond);
	pthread_mutex_unlock(&handoff.mu.m);
}

static Slot *
slot_get(const char *fn, DlockErr *err)
{
	Slot	   *s;

	pthread_mutex_lock(&handoff.mu.m);
	if (!handoff.running)
	{
		pthread_mutex_unlock(&handoff.mu.m);
		mgr_check_running(fn, err);
		return NULL;
	}
	s = handoff.free_slots;
	if (s)
	{
		handoff.free_slots = s->next;
		s->next = NULL;
		s->state = SLOT_FREE;
		s->withdraw = false;
		s->pending = false;
		s->inspect_fn = NULL;
	}
	pthread_mutex_unlock(&handoff.mu.m);
	if (s == NULL)
		dlock_set_err(err, DLOCK_ER_UNKNOWN,
				"%s: more than %d dlock calls at once", fn, NSLOTS);
	return s;
}

/*
 * NUL-terminated copies of the names, owner and value in the slot, and the
 * request as the service takes it (the manager adds the session, the role
 * and the quotas when it collects it).
 */
static int
slot_copy(Slot *s, const DlockCall *call, DlockErr *err)
{
	size_t		need = 0;
	char	   *p;

	for (int i = 0; i < call->nnames; i++)
		need += call->name_lens[i] + 1;
	need += (call->owner ? call->owner_len : 0) + 1;
	need += (call->value ? call->value_len : 0) + 1;
	if (s->buf_cap < need)
	{
		char	   *b = realloc(s->buf, need);

		if (b == NULL)
		{
			dlock_set_err(err, DLOCK_ER_UNKNOWN, "%s: out of memory", call->fn);
			return -1;
		}
		s->buf = b;
		s->buf_cap = need;
	}
	s->call = *call;
	memset(&s->ds, 0, sizeof(s->ds));
	s->ds.q.op = call->op;
	s->ds.q.requester = s->index;
	s->ds.q.mode = call->mode;
	s->ds.q.names = s->names_z;
	s->ds.q.nnames = call->nnames;
	s->ds.q.ttl_us = call->ttl_us;
	s->ds.q.keep_place = call->keep_place;
	s->ds.q.capacity = call->capacity;
	s->ds.q.permits = call->permits;
	s->ds.q.election = call->election;
	p = s->buf;
	/* a call without names (release_all) must not show an earlier call's
	 * name from a buffer realloc may have moved */
	s->names_z[0] = NULL;
	for (int i = 0; i < call->nnames; i++)
	{
		memcpy(p, call->names[i], call->name_lens[i]);
		p[call->name_lens[i]] = '\0';
		s->names_z[i] = p;
		s->call.names[i] = p;
		p += call->name_lens[i] + 1;
	}
	if (call->owner)
	{
		memcpy(p, call->owner, call->owner_len);
		p[call->owner_len] = '\0';
		s->ds.q.owner_key = p;
		s->call.owner = p;
		p += call->owner_len + 1;
	}
	if (call->value)
	{
		memcpy(p, call->value, call->value_len);
		p[call->value_len] = '\0';
		s->ds.q.value = p;
		s->call.value = p;
	}
	return 0;
}

static void
submit_locked(Slot *s)
{
	s->seq = handoff.next_seq++;
	s->submitted_at = mono_us();
	s->state = SLOT_SUBMITTED;
	s->next = NULL;
	if (handoff.submit_tail)
		handoff.submit_tail->next = s;
	else
		handoff.submit_head = s;
	handoff.submit_tail = s;
}

static void
withdraw_locked(Slot *s)
{
	if (s->withdraw)
		return;
	s->withdraw = true;
	if (!s->withdraw_listed)
	{
		s->withdraw_listed = true;
		s->wnext = handoff.withdraw_head;
		handoff.withdraw_head = s;
	}
	pthread_cond_signal(&handoff.work_cond);
}

static void
slot_put_locked(Slot *s)
{
	/* answered before the manager took its withdrawal: unlist it */
	if (s->withdraw_listed)
	{
		for (Slot **p = &handoff.withdraw_head; *p; p = &(*p)->wnext)
			if (*p == s)
			{
				*p = s->wnext;
				break;
			}
		s->withdraw_listed = false;
	}
	s->state = SLOT_FREE;
	s->next = handoff.free_slots;
	handoff.free_slots = s;
}

/* ------------------------------------------------------------------------
 * The manager's side
 * ------------------------------------------------------------------------ */

/*
 * Set up the conditions (on the monotonic clock) and the free list of
 * slots; 0, or -1 when out of memory.  (mu held)
 */
int
handoff_init(void)
{
	pthread_condattr_init(&handoff.cond_attr);
	pthread_condattr_setclock(&handoff.cond_attr, CLOCK_MONOTONIC);
	pthread_cond_init(&handoff.work_cond, &handoff.cond_attr);
	handoff.slots = calloc(NSLOTS, sizeof(Slot));
	if (handoff.slots == NULL)
		return -1;
	for (int i = NSLOTS - 1; i >= 0; i--)
	{
		handoff.slots[i].index = i;
		pthread_cond_init(&handoff.slots[i].cond.c, &handoff.cond_attr);
		handoff.slots[i].next = handoff.free_slots;
		handoff.free_slots = &handoff.slots[i];
	}
	return 0;
}

/*
 * The service's answer callback: kept with the slot until the commit.
 * arg: where the manager keeps its service (the wording of a quota refusal
 * counts the account's locks in its picture).
 */
void
on_answer(void *arg, int requester, const DLmAnswer *a)
{
	Slot	   *s;

	if (requester < 0 || requester >= NSLOTS)
		return;
	s = &handoff.slots[requester];
	if (a->status == DLOCK_STATUS_QUEUED)
		return;
	mark_pending(s);
	memset(&s->pres, 0, sizeof(s->pres));
	s->perr.code = 0;
	s->perr.warning = 0;
	s->perr.msg[0] = '\0';
	s->pres.status = a->status;
	s->pres.token = a->token;
	s->pres.expires_at_us = a->expires_at;
	s->pres.count = a->count;
	switch (a->status)
	{
		case DLOCK_STATUS_GRANTED:
			s->pres.ntokens = a->ntokens;
			for (int i = 0; i < a->ntokens && i < DLOCK_MAX_MULTI; i++)
				s->pres.tokens[i] = a->tokens[i];
			break;
		case DLOCK_STATUS_DEADLOCK:
			describe_cycle(s, a, &s->perr);
			break;
		case DLOCK_STATUS_ERROR:
			describe_error(s, a->error, dls_manager(*(DLockService *const *) arg), &s->perr);
			break;
		case DLOCK_STATUS_MODE_HELD:
			describe_mode_held(s, a, &s->perr);
			break;
		case DLOCK_STATUS_WITHDRAWN:
			describe_withdrawn(s, &s->perr);
			break;
		case DLOCK_STATUS_REVOKED:
			describe_revoked(s, a->reason, &s->perr);
			break;
		default:
			break;
	}
}

/* A slot has an answer of this batch, published after the commit. */
void
mark_pending(Slot *s)
{
	if (s->pending)
		return;
	s->pending = true;
	if (pending.n < NSLOTS)
		pending.list[pending.n++] = s->index;
	else
		pending.overflow = true;
}

/* Whether the batch answers anyone. */
bool
answers_pending(void)
{
	for (int i = 0; i < pending.n; i++)
		if (handoff.slots[pending.list[i]].pending)
			return true;
	return pending.overflow;
}

/* Hand the slots' answers to their callers (mu held). */
void
publish_locked(void)
{
	int			n = pending.overflow ? NSLOTS : pending.n;

	for (int i = 0; i < n; i++)
	{
		Slot	   *s = &handoff.slots[pending.overflow ? i : pending.list[i]];

		if (!s->pending)
			continue;
		s->pending = false;
		if (s->state != SLOT_ACCEPTED)
			continue;
		s->res = s->pres;
		s->err = s->perr;
		s->state = SLOT_DONE;
		pthread_cond_signal(&s->cond.c);
	}
	pending.n = 0;
	pending.overflow = false;
}

/* Answer a call or inspection with an error at once (mu held). */
void
answer_error_locked(Slot *s, int code, const char *msg)
{
	memset(&s->res, 0, sizeof(s->res));
	s->res.status = DLOCK_STATUS_ERROR;
	dlock_set_err(&s->err, code, "%s: %s", s->inspect_fn ? "dlock" : s->call.fn, msg);
	s->pending = false;
	s->state = SLOT_DONE;
	pthread_cond_signal(&s->cond.c);
}

/*
 * The picture is gone (a batch that could not be written, a reload): every
 * call still waiting is submitted again in its old order, to be decided on
 * the new picture - or, when 'fail', answered with msg.  A call decided in
 * the batch that was not written (pending) is answered with msg: part of
 * the batch may be in the tables, and deciding it again could do it twice.
 * Inspections are answered with msg.  (mu held)
 */
void
resubmit_locked(bool fail, const char *msg)
{
	for (int i = 0; i < NSLOTS; i++)
	{
		Slot	   *s = &handoff.slots[i];
		bool		decided = s->pending;

		s->pending = false;
		if (s->state != SLOT_ACCEPTED)
			continue;
		if (fail || decided || s->inspect_fn)
			answer_error_locked(s, DLOCK_ER_UNKNOWN, msg);
		else
		{
			/* submitted again, in their old order */
			s->state = SLOT_SUBMITTED;
		}
	}
	pending.n = 0;				/* every pending flag is cleared above */
	pending.overflow = false;
	{
		/* rebuild the submit queue in submission order */
		Slot	   *order[NSLOTS];
		int			n = 0;

		for (Slot *s = handoff.submit_head; s; s = s->next)
			s->state = SLOT_ACCEPTED;	/* re-marked below */
		/* requests only: a queued inspection stays in its own queue */
		for (int i = 0; i < NSLOTS; i++)
			if ((handoff.slots[i].state == SLOT_SUBMITTED || handoff.slots[i].state == SLOT_ACCEPTED) &&
				!handoff.slots[i].inspect_fn)
				order[n++] = &handoff.slots[i];
		for (int a = 1; a < n; a++)
			for (int b = a; b > 0 && order[b - 1]->seq > order[b]->seq; b--)
			{
				Slot	   *t = order[b];

				order[b] = order[b - 1];
				order[b - 1] = t;
			}
		handoff.submit_head = handoff.submit_tail = NULL;
		for (int i = 0; i < n; i++)
		{
			order[i]->state = SLOT_SUBMITTED;
			order[i]->next = NULL;
			if (handoff.submit_tail)
				handoff.submit_tail->next = order[i];
			else
				handoff.submit_head = order[i];
			handoff.submit_tail = order[i];
			if (order[i]->withdraw && !order[i]->withdraw_listed)
			{
				order[i]->withdraw_listed = true;
				order[i]->wnext = handoff.withdraw_head;
				handoff.withdraw_head = order[i];
			}
		}
	}
}

/* The manager thread ended: calls still waiting (none after a clean shutdown) get an error.  (mu held) */
void
handoff_stop_locked(void)
{
	for (int i = 0; i < NSLOTS; i++)
		if (handoff.slots[i].state == SLOT_SUBMITTED || handoff.slots[i].state == SLOT_ACCEPTED)
			answer_error_locked(&handoff.slots[i], DLOCK_ER_UNKNOWN, "the lock manager stopped");
	handoff.submit_head = handoff.submit_tail = NULL;
	handoff.inspect_head = handoff.inspect_tail = NULL;
	handoff.withdraw_head = NULL;
}
