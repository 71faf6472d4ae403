/* SPDX-License-Identifier: PostgreSQL */
/*
 * dlock_lm_sem.c
 *		Counting semaphores (core/README section 15) and leader elections
 *		(16): the two kinds of name an owner holds once -- a set of permits,
 *		or the lead and its value.
 *
 * Interface (dlock_lm_int.h):
 *		dlm_semaphore_pass		a semaphore's grant pass, strict FIFO (15.4)
 *		dlm_do_held_once		acquire or try of permits, or a campaign
 *								(15.3, 16.3)
 *		dlm_do_proclaim			the leader's new value (16.4)
 */
#include "dlock_lm_int.h"

#include <string.h>

/* ---------------------------------------------------------------------
 * Counting semaphores (15)
 * --------------------------------------------------------------------- */

/* 15.3: O takes permits of semaphore L (a new holder: O holds none). */
static DLmHolder *
semaphore_take(DLockManager *m, DLmLock *l, DLmOwner *o, int32_t permits, int64_t ttl_us,
			   int32_t pid, int64_t backend_start, uint32_t role, DLockTime now,
			   bool uncollected)
{
	DLmHolder  *h = dlm_take_name(m, l, o, DLOCK_MODE_NL, ttl_us, pid, backend_start, role, now,
							  false, uncollected);
	DLmHolderExtra *x;

	if (h && permits != 0 && (x = dlm_holder_extra(m, h)) != NULL)
	{
		x->permits = permits;
		l->permits_held += permits;
	}
	return h;
}

/*
 * 15.4: the grant pass of a semaphore: waiters in ticket order while their
 * permits fit; the first that does not fit stops it (strict FIFO: a large
 * request at the head is not overtaken by smaller ones behind it).
 */
void
dlm_semaphore_pass(DLockManager *m, DLmLock *l, DLockTime now)
{
	DLmLink    *k;

	while ((k = dlm_list_head(&l->line->waiters)) != NULL && !m->broken)
	{
		DLmWaiter  *w = DLM_CONTAINER(DLmWaiter, lock_link, k);
		int			requester = w->requester;
		DLmHolder  *h;

		if (!dlm_permits_fit(l, w->permits))
			break;
		if (dlm_named_holder(m, l, w->owner) != NULL)
		{
			/* the owner got permits meanwhile, with another request */
			dlm_waiter_remove(m, w);
			dlm_answer_error(m, requester, DLM_ERR_HELD_ONCE);
			continue;
		}
		h = semaphore_take(m, l, w->owner, w->permits, w->ttl_us, w->pid,
						   w->backend_start, w->role, now, w->kept_until != 0);
		dlm_waiter_remove(m, w);
		if (h)
			dlm_answer_granted(m, requester, h);
	}
}

/* ---------------------------------------------------------------------
 * Held once: permits and the lead (15.3, 16.3, 16.4)
 * --------------------------------------------------------------------- */

/* A leader's value replaced (16.3, 16.4): its row is written, durably. */
static void
set_value(DLockManager *m, DLmHolder *h, const char *value)
{
	char	   *copy;
	DLmHolderExtra *x;

	if (dlm_holder_value(h) && strcmp(dlm_holder_value(h), value) == 0)
		return;
	if ((x = dlm_holder_extra(m, h)) == NULL || (copy = dlm_value_copy(m, value)) == NULL)
	{
		m->broken = true;
		return;
	}
	dlm_value_free(m, x->value);
	x->value = copy;
	dlm_leader_changed(m, h->lock);
	dlm_holder_changed(m, h);
}

/*
 * 15.3, 16.3: permits of a semaphore, or the lead of an election: held once
 * per owner, granted at once only when nobody waits (its kind checked, 15.2)
 */
void
dlm_do_held_once(DLockManager *m, const DLmRequest *r, DLmOwner *o, DLockTime now)
{
	DLmLock    *l = dlm_lock_get(m, r->names[0], strlen(r->names[0]));
	bool		semaphore = r->capacity > 0;
	DLmHolder  *own;

	if (l == NULL)
		return;
	if (!dlm_lock_in_use(l))
	{
		/* kept while anyone holds or waits */
		l->capacity = r->capacity;
		l->election = r->election;
	}
	own = dlm_named_holder(m, l, o);
	if (own && dlm_holder_kept(own) > 0)
	{
		/* 14.4: what its kept place got, collected (a campaign: with this value) */
		(void) dlm_take_name(m, l, o, own->mode, r->ttl_us, r->pid, r->session_start, dlm_request_role(o, r), now,
						 true, false);
		if (r->election)
			set_value(m, own, r->value);
		dlm_answer_granted(m, r->requester, own);
	}
	else if (own)
		dlm_answer_error(m, r->requester, DLM_ERR_HELD_ONCE);
	else if (dlm_list_empty(&l->line->waiters) &&
			 (semaphore ? dlm_permits_fit(l, r->permits) :
			  dlm_list_empty(&l->holders)))
	{
		DLmHolder  *h = semaphore ?
			semaphore_take(m, l, o, r->permits, r->ttl_us, r->pid, r->session_start, dlm_request_role(o, r), now, false) :
			dlm_take_name(m, l, o, DLOCK_MODE_EX, r->ttl_us, r->pid, r->session_start, dlm_request_role(o, r), now,
					  false, false);

		if (h && r->election)
			set_value(m, h, r->value);
		if (h)
			dlm_answer_granted(m, r->requester, h);
	}
	else if (r->op == DLOCK_OP_TRY)
		dlm_answer(m, r->requester, DLOCK_STATUS_REFUSED, 0, 0, 0);
	else
	{
		DLmWaiter  *w = dlm_enqueue(m, r, o, l, NULL, semaphore ? DLOCK_MODE_NL : DLOCK_MODE_EX,
								false, now);

		if (w)
			dlm_queued(m, w);
	}
}

/* 16.4: the leader's new value */
void
dlm_do_proclaim(DLockManager *m, const DLmRequest *r, DLmOwner *o)
{
	DLmLock    *l = dlm_lock_find(m, r->names[0], strlen(r->names[0]));
	DLmHolder  *h = l && o ? dlm_named_holder(m, l, o) : NULL;

	if (h == NULL)
		dlm_answer(m, r->requester, DLOCK_STATUS_NOT_HELD, 0, 0, 0);
	else if (!l->election)
		dlm_answer_error(m, r->requester, l->capacity > 0 ? DLM_ERR_IS_SEMAPHORE : DLM_ERR_IS_LOCK);
	else
	{
		set_value(m, h, r->value);
		dlm_answer_granted(m, r->requester, h);
	}
}
