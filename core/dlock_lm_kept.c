/* SPDX-License-Identifier: PostgreSQL */
/*
 * dlock_lm_kept.c
 *		Kept places (core/README section 14): a request that keeps its place
 *		in line while no call waits for it, resumed by its owner's next call,
 *		released by name, run out after its ttl.
 *
 * Interface (dlock_lm_int.h):
 *		dlm_detach				a waiting request becomes a kept place (14.2)
 *		dlm_kept_place_of		the owner's place for these names (14.3)
 *		dlm_resume				a call takes its place back (14.3)
 *		dlm_kept_behind			a waiting call behind another request returns (14.8)
 *		dlm_release_kept		the owner's places naming a lock leave (14.5)
 *		dlm_kept_insert, dlm_kept_first	the list by kept_until (14.6)
 */
#include "dlock_lm_int.h"

#include <string.h>

/* Into the list of kept places, in order of kept_until (ties: as they come). */
void
dlm_kept_insert(DLockManager *m, DLmWaiter *first)
{
	DLmLink    *at = dlm_list_tail(&m->kept);

	/* places mostly come with one ttl: the search ends at the tail */
	while (at && DLM_CONTAINER(DLmWaiter, kept_link, at)->kept_until > first->kept_until)
		at = dlm_list_prev(&m->kept, at);
	dlm_list_insert_after(at ? at : &m->kept.head, &first->kept_link);
	m->nkept++;
}

/*
 * 14.2: the request stays in line with no call waiting, for its lease; its
 * rows (a young part's too) are written, durably: the answer promises it.
 */
void
dlm_detach(DLockManager *m, DLmWaiter *first, DLockTime now)
{
	DLockTime	until = now + (first->ttl_us > 0 ? first->ttl_us : 1);

	if (first->requester >= 0 && m->waiting[first->requester] == first)
		m->waiting[first->requester] = NULL;
	for (int i = 0; i < dlm_request_nparts(first); i++)
	{
		DLmWaiter  *w = dlm_request_part(first, i);

		w->requester = DLM_NOBODY;
		w->kept_until = until;
		if (w->young_link.next)
			dlm_list_delete(&w->young_link);
		w->p.dirty = true;
		dlm_touch_waiter(m, w);
	}
	m->durable = true;
	dlm_kept_insert(m, first);
}

/*
 * O's kept place with no call waiting whose named parts are exactly these
 * names (sorted) in this mode, or NULL (14.3).
 */
DLmWaiter *
dlm_kept_place_of(const DLockManager *m, const DLmOwner *o, const char *const *names,
			  int nnames, int mode, int32_t permits)
{
	(void) m;
	for (DLmLink *k = dlm_list_head(o->waiters); k; k = dlm_list_next(o->waiters, k))
	{
		DLmWaiter  *w = DLM_CONTAINER(DLmWaiter, owner_link, k);
		int			nnamed = w->group ? w->group->nnamed : 1;
		bool		same = true;

		if (w->kept_until == 0 || w->mode != mode || nnamed != nnames ||
			w->permits != permits || (w->group && w->group->parts[0] != w))
			continue;
		for (int i = 0; i < nnames && same; i++)
			same = strcmp(dlm_request_part(w, i)->lock->name, names[i]) == 0;
		if (same)
			return w;
	}
	return NULL;
}

/* 14.3: a call resumes its owner's kept place, with its own timeout and lease. */
void
dlm_resume(DLockManager *m, const DLmRequest *r, DLmWaiter *first)
{
	dlm_list_delete(&first->kept_link);
	m->nkept--;
	for (int i = 0; i < dlm_request_nparts(first); i++)
	{
		DLmWaiter  *w = dlm_request_part(first, i);

		w->requester = r->requester;
		w->kept_until = 0;
		w->pid = r->pid;
		w->backend_start = r->session_start;
		w->timeout_at = r->timeout_at;
		w->ttl_us = r->ttl_us;
		w->keep = r->keep_place;
		w->p.dirty = true;
		dlm_touch_waiter(m, w);
	}
	if (r->election)
	{
		/* 16.3: it campaigns with the value of the call that resumes it */
		char	   *copy = dlm_value_copy(m, r->value);

		if (copy == NULL)
		{
			m->broken = true;
			return;
		}
		dlm_value_free(m, first->value);
		first->value = copy;
	}
	m->waiting[r->requester] = first;
	if (!dlm_kept_behind(m, first))
		dlm_answer(m, r->requester, DLOCK_STATUS_QUEUED, first->ticket, 0, 0);
}

/*
 * 14.8: a keep_place request that is not first in line for one of its names
 * keeps its place at once (answered KEPT) instead of waiting: its call would
 * only sit on a pooled connection while others go first.  True if so.
 */
bool
dlm_kept_behind(DLockManager *m, DLmWaiter *first)
{
	int			nnamed = first->group ? first->group->nnamed : 1;
	int			requester = first->requester;

	if (!first->keep || requester < 0)
		return false;
	for (int i = 0; i < nnamed; i++)
	{
		DLmWaiter  *w = dlm_request_part(first, i);

		if (dlm_list_head(&w->lock->line->waiters) != &w->lock_link)
		{
			dlm_detach(m, first, m->now);
			dlm_answer(m, requester, DLOCK_STATUS_KEPT, first->ticket, first->kept_until, 0);
			return true;
		}
	}
	return false;
}

/*
 * 14.5: O's kept places with no call waiting that name L leave the line;
 * returns the ticket of the first, 0 if none.
 */
int64_t
dlm_release_kept(DLockManager *m, DLmOwner *o, const DLmLock *l)
{
	int64_t		ticket = 0;
	DLmLink    *k = dlm_list_head(o->waiters);

	while (k)
	{
		DLmWaiter  *w = DLM_CONTAINER(DLmWaiter, owner_link, k);
		DLmWaiter  *first = w->group ? w->group->parts[0] : w;
		bool		names_l = false;

		if (first->kept_until != 0)
			for (int i = 0; i < (first->group ? first->group->nnamed : 1) && !names_l; i++)
				names_l = dlm_request_part(first, i)->lock == l;
		if (!names_l)
		{
			k = dlm_list_next(o->waiters, k);
			continue;
		}
		if (ticket == 0)
			ticket = first->ticket;
		dlm_request_remove(m, first);
		k = dlm_list_head(o->waiters);	/* the parts left the list: again */
	}
	return ticket;
}

/* The soonest kept place, or NULL. */
DLmWaiter *
dlm_kept_first(const DLockManager *m)
{
	DLmLink    *k = dlm_list_head(&m->kept);

	return k ? DLM_CONTAINER(DLmWaiter, kept_link, k) : NULL;
}
