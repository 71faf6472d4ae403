/* SPDX-License-Identifier: PostgreSQL */
/*
 * dlock_lm_grant.c
 *		Granting and waiting (core/README sections 3.4-3.5, 4.1, 5, 6, 8):
 *		a name taken with its intentions, the last release, conversions,
 *		a request joining the line, the grant pass over a lock, and the
 *		scan and recheck lists every event drains.
 *
 * Interface (dlock_lm_int.h):
 *		dlm_take_name			a level more, or a new holder and its intentions
 *		dlm_release_last		a named holder's last level, then the grant pass
 *		dlm_convert_now			a mode changed, the intentions moved (5.4)
 *		dlm_enqueue, dlm_group_new	a part joins the line; a group of parts
 *		dlm_queued				the request waits, unless it closes a cycle (7)
 *		dlm_grant_pass			the grant pass on one lock (6)
 *		dlm_scan_later, dlm_recheck_later, dlm_drain	the lists of the event
 *
 * The deadlock search is dlock_lm_deadlock.c's; a semaphore's grant pass is
 * dlock_lm_sem.c's.
 */
#include "dlock_lm_int.h"

#include <string.h>

/* ---------------------------------------------------------------------
 * The lists of the event (6, 6.2)
 * --------------------------------------------------------------------- */

/* Put L on the scan list (6), once. */
void
dlm_scan_later(DLockManager *m, DLmLock *l)
{
	if (l->scan_listed)
		return;
	l->scan_listed = true;
	dlm_vec_push(m, &m->scan, l);
}

/*
 * O got a new holder or a stronger mode: a part of its waiting groups that
 * its own holders now cover passes (6), but no pass over that part's lock
 * may come; look at its groups again (6.2), once.
 */
void
dlm_recheck_later(DLockManager *m, DLmOwner *o)
{
	if (o->recheck_listed || dlm_list_empty(o->waiters))
		return;
	o->recheck_listed = true;
	dlm_vec_push(m, &m->recheck, o);
}

/* ---------------------------------------------------------------------
 * Taking, releasing, converting, queueing
 * --------------------------------------------------------------------- */

/*
 * Take a name (3.5): a level more, or a new holder with its intentions.
 * A call of the owner (collect) first collects a level granted to its kept
 * place (14.4); a grant to a kept place no call waits for (uncollected)
 * marks its level.
 */
DLmHolder *
dlm_take_name(DLockManager *m, DLmLock *l, DLmOwner *o, int mode, int64_t ttl_us,
		  int32_t pid, int64_t backend_start, uint32_t role, DLockTime now, bool collect,
		  bool uncollected)
{
	DLmHolder  *h = dlm_named_holder(m, l, o);
	int			intention = dlock_intention_mode(mode);
	DLmHolderExtra *x;

	if (h)
	{
		if (collect && dlm_holder_kept(h) > 0)
			h->extra->kept--;
		else
			h->count++;
		if (uncollected && (x = dlm_holder_extra(m, h)) != NULL)
			x->kept++;
		if (ttl_us > 0)
			dlm_holder_set_lease(m, h, ttl_us, now);
		dlm_holder_changed(m, h);
		return h;
	}
	h = dlm_holder_add(m, l, o, mode, false, dlm_take_ticket(m), pid, backend_start, role, now);
	if (h == NULL)
		return NULL;
	if (uncollected && (x = dlm_holder_extra(m, h)) != NULL)
		x->kept = 1;
	if (ttl_us > 0)
		dlm_holder_set_lease(m, h, ttl_us, now);
	if (intention != DLOCK_MODE_INVALID)
	{
		size_t		lens[DLOCK_MAX_PATH_DEPTH];
		int			n = dlm_ancestors(l->name, lens);

		for (int i = 0; i < n && !m->broken; i++)
		{
			DLmLock    *a = dlm_lock_get(m, l->name, lens[i]);

			if (a)
				dlm_implied_add(m, a, o, intention, pid, backend_start, role, now);
		}
	}
	return h;
}

/* The last release of a named holder (4.1), then the grant pass on its lock. */
void
dlm_release_last(DLockManager *m, DLmHolder *h, DLockTime now)
{
	DLmLock    *l = h->lock;
	DLmOwner   *o = h->owner;
	int			intention = dlock_intention_mode(h->mode);
	size_t		lens[DLOCK_MAX_PATH_DEPTH];
	int			n = intention == DLOCK_MODE_INVALID ? 0 : dlm_ancestors(l->name, lens);

	dlm_holder_remove(m, h);
	for (int i = 0; i < n; i++)
	{
		DLmLock    *a = dlm_lock_find(m, l->name, lens[i]);

		if (a)
			dlm_implied_drop(m, a, o, intention);
	}
	dlm_grant_pass(m, l, now);
}

/* The mode changes; up is a new grant with a new token (5.2, 5.3). */
static void
convert_holder(DLockManager *m, DLmHolder *h, int mode)
{
	bool		up = !dlock_mode_covers(h->mode, mode);

	h->lock->nheld[h->mode]--;
	h->mode = mode;
	h->lock->nheld[mode]++;
	if (up)
	{
		bool		leased = h->expiry_pos >= 0;

		/* the token orders the lease heap */
		dlm_heap_remove(&m->leases, h);
		h->token = dlm_take_ticket(m);
		if (leased && !dlm_heap_add(&m->leases, &m->mem, h))
			m->broken = true;
		/* a new grant: holders stay in grant (token) order */
		dlm_list_delete(&h->lock_link);
		dlm_list_push_tail(&h->lock->holders, &h->lock_link);
		dlm_list_delete(&h->owner_link);
		dlm_list_push_tail(&h->owner->holders, &h->owner_link);
		dlm_recheck_later(m, h->owner);
	}
	dlm_holder_changed(m, h);
}

/* Convert at once, moving the intentions on the dlm_ancestors (5.4). */
void
dlm_convert_now(DLockManager *m, DLmHolder *h, int mode, DLockTime now)
{
	int			from = dlock_intention_mode(h->mode);
	int			to = dlock_intention_mode(mode);

	if (from != to)
	{
		size_t		lens[DLOCK_MAX_PATH_DEPTH];
		int			n = dlm_ancestors(h->lock->name, lens);

		for (int i = 0; i < n && !m->broken; i++)
		{
			DLmLock    *a = dlm_lock_get(m, h->lock->name, lens[i]);

			if (a == NULL)
				break;
			if (to != DLOCK_MODE_INVALID)
				dlm_implied_add(m, a, h->owner, to, h->pid, h->backend_start, h->role, now);
			if (from != DLOCK_MODE_INVALID)
				dlm_implied_drop(m, a, h->owner, from);
		}
	}
	convert_holder(m, h, mode);
}

/* Announce L (8) if the part starts waiting behind another owner's holder. */
static void
announce(DLockManager *m, DLmLock *l, const DLmOwner *o, int mode)
{
	/* a semaphore's waiter waits for its holders, whatever the modes (15) */
	if (l->announced ||
		(l->capacity > 0 ? dlm_list_empty(&l->holders) : dlm_compatible(mode, dlm_others_held(m, l, o))))
		return;
	l->announced = true;
	if (l->notify_listed)
		return;
	l->notify_listed = true;
	dlm_vec_push(m, &m->notify, l);
}

/* A part joins the line with the next ticket (3.4, 5.3). */
DLmWaiter *
dlm_enqueue(DLockManager *m, const DLmRequest *r, DLmOwner *o, DLmLock *l,
		DLmHolder *converting, int mode, bool implied, DLockTime now)
{
	DLmWaiter  *w;

	if (!dlm_line_make(m, l) || !dlm_owner_waiters_make(m, o) ||
		(w = dlm_alloc0(m, sizeof(DLmWaiter))) == NULL)
		return NULL;
	w->lock = l;
	w->owner = o;
	w->holder = converting;
	w->implied = implied;
	w->mode = mode;
	w->ticket = dlm_take_ticket(m);
	w->requester = r->requester;
	w->pid = r->pid;
	w->backend_start = r->session_start;
	w->role = converting ? converting->role : dlm_request_role(o, r);
	w->since = now;
	w->timeout_at = r->timeout_at;
	w->ttl_us = r->ttl_us;
	w->request = w->ticket;		/* a group's parts: set to its first's */
	w->keep = r->keep_place;
	w->permits = r->capacity > 0 ? r->permits : 0;
	if (r->election && (w->value = dlm_value_copy(m, r->value)) == NULL)
		m->broken = true;		/* the picture is loaded again */
	if (converting)
	{
		dlm_list_push_tail(&l->line->converts, &w->lock_link);
		l->line->nconverting[mode]++;
	}
	else
	{
		dlm_list_push_tail(&l->line->waiters, &w->lock_link);
		l->line->nwaiting[mode]++;
	}
	dlm_list_push_tail(o->waiters, &w->owner_link);
	m->nwaiters++;
	if (!implied && !converting)
		dlm_count_named(m, o, l, w->role, 1);
	if (m->cfg.queue_row_delay_us > 0)
		dlm_list_push_tail(&m->young, &w->young_link);	/* a row when due (9) */
	else
		dlm_touch_waiter(m, w);
	announce(m, l, o, mode);
	return w;
}

DLmGroup *
dlm_group_new(DLockManager *m, int nparts)
{
	DLmGroup   *g = dlm_alloc0(m, sizeof(DLmGroup) + sizeof(DLmWaiter *) * nparts);

	if (g)
	{
		g->parts = (DLmWaiter **) (g + 1);
		g->capacity = nparts;
	}
	return g;
}

/* ---------------------------------------------------------------------
 * The grant pass (6)
 * --------------------------------------------------------------------- */

/* Is a part of a group grantable, looking at its own lock only (6)? */
static bool
part_grantable(const DLockManager *m, const DLmWaiter *x)
{
	DLockModeMask ahead = 0;
	const DLmLock *l = x->lock;

	if (x->holder)
	{
		for (DLmLink *k = dlm_list_head(&l->line->converts); k; k = dlm_list_next(&l->line->converts, k))
		{
			const DLmWaiter *y = DLM_CONTAINER(DLmWaiter, lock_link, k);

			if (y == x)
				break;
			ahead |= DLOCK_MODE_BIT(y->mode);
		}
		return dlm_compatible(x->mode, ahead) && dlm_compatible(x->mode, dlm_others_held(m, l, x->owner));
	}
	if (dlm_own_covers(m, l, x->owner, x->mode))
		return true;
	for (int i = 0; i < DLOCK_NMODES; i++)
		if (l->line->nconverting[i] > 0)
			ahead |= DLOCK_MODE_BIT(i);
	for (DLmLink *k = dlm_list_head(&l->line->waiters); k; k = dlm_list_next(&l->line->waiters, k))
	{
		const DLmWaiter *y = DLM_CONTAINER(DLmWaiter, lock_link, k);

		if (y == x)
			break;
		if (y->group == NULL || y->group != x->group)
			ahead |= DLOCK_MODE_BIT(y->mode);
	}
	return dlm_compatible(x->mode, ahead) && dlm_compatible(x->mode, dlm_others_held(m, l, x->owner));
}

static bool
group_grantable(const DLockManager *m, const DLmGroup *g, const DLmWaiter *checked)
{
	for (int i = 0; i < g->nparts; i++)
		if (g->parts[i] != checked && !part_grantable(m, g->parts[i]))
			return false;
	return true;
}

/* Grant every part of a group at once (6.1). */
static void
grant_group(DLockManager *m, DLmGroup *g, DLockTime now)
{
	DLmWaiter  *first = g->parts[0];
	DLmHolder  *last = NULL;
	int			requester = first->requester;

	/* the owner may have got a name meanwhile, in a weaker mode */
	for (int i = 0; i < g->nnamed; i++)
	{
		DLmWaiter  *e = g->parts[i];
		DLmHolder  *own = e->holder ? NULL : dlm_named_holder(m, e->lock, e->owner);

		if (own && !dlock_mode_covers(own->mode, e->mode))
		{
			DLmAnswer	a;

			memset(&a, 0, sizeof(a));
			a.status = DLOCK_STATUS_MODE_HELD;
			a.name_index = i;
			a.count = own->mode;
			if (requester >= 0)
				m->cfg.answer(m->cfg.answer_arg, requester, &a);
			dlm_request_remove(m, first);
			return;
		}
	}
	for (int i = 0; i < g->nnamed && !m->broken; i++)
	{
		DLmWaiter  *e = g->parts[i];

		if (e->holder)
		{
			last = e->holder;
			dlm_convert_now(m, last, e->mode, now);
		}
		else
			last = dlm_take_name(m, e->lock, e->owner, e->mode, e->ttl_us,
							 e->pid, e->backend_start, e->role, now, false,
							 e->kept_until != 0);
		if (last == NULL)
			return;
		m->tokens[i] = last->token;
	}
	if (m->broken)
		return;
	if (g->nnamed == 1)
		dlm_answer_granted(m, requester, last);
	else
		dlm_answer_tokens(m, requester, g->nnamed);
	dlm_request_remove(m, first);
}

/* Could any waiter of these remaining modes pass what is ahead? */
static bool
any_may_pass(const int32_t *left, DLockModeMask ahead)
{
	for (int i = 0; i < DLOCK_NMODES; i++)
		if (left[i] > 0 && dlm_compatible(i, ahead))
			return true;
	return false;
}

/*
 * The grant pass on L (6): conversions first, then waiters in ticket order,
 * each compatible with the holders of other owners and with what is still
 * ahead of it.  Stops when a group is granted (L is scanned again then),
 * and as soon as nobody left could pass.
 */
void
dlm_grant_pass(DLockManager *m, DLmLock *l, DLockTime now)
{
	DLockModeMask ahead = 0;
	int32_t		left[DLOCK_NMODES];
	DLmLink    *k,
			   *next;

	if (l->capacity > 0)
	{
		dlm_semaphore_pass(m, l, now);
		return;
	}

	for (k = dlm_list_head(&l->line->converts); k && !m->broken; k = next)
	{
		DLmWaiter  *c = DLM_CONTAINER(DLmWaiter, lock_link, k);

		next = dlm_list_next(&l->line->converts, k);
		if (!dlm_compatible(c->mode, ahead) ||
			!dlm_compatible(c->mode, dlm_others_held(m, l, c->owner)))
			ahead |= DLOCK_MODE_BIT(c->mode);
		else if (c->group)
		{
			if (group_grantable(m, c->group, c))
			{
				grant_group(m, c->group, now);
				return;
			}
			ahead |= DLOCK_MODE_BIT(c->mode);
		}
		else
		{
			DLmHolder  *h = c->holder;
			int			requester = c->requester;

			dlm_waiter_remove(m, c);
			dlm_convert_now(m, h, c->mode, now);
			dlm_answer_granted(m, requester, h);
			/* its old mode may have held back a conversion before it (6) */
			if (ahead)
				dlm_scan_later(m, l);
		}
	}

	memcpy(left, l->line->nwaiting, sizeof(left));
	for (k = dlm_list_head(&l->line->waiters); k && !m->broken; k = next)
	{
		DLmWaiter  *w = DLM_CONTAINER(DLmWaiter, lock_link, k);
		DLmHolder  *own;

		if (!any_may_pass(left, ahead))
			break;
		next = dlm_list_next(&l->line->waiters, k);
		left[w->mode]--;
		if (!dlm_compatible(w->mode, ahead) ||
			!dlm_compatible(w->mode, dlm_others_held(m, l, w->owner)))
		{
			ahead |= DLOCK_MODE_BIT(w->mode);
			continue;
		}
		if (w->group)
		{
			if (group_grantable(m, w->group, w))
			{
				grant_group(m, w->group, now);
				return;
			}
			ahead |= DLOCK_MODE_BIT(w->mode);
			continue;
		}
		/* the owner may have got it meanwhile, with another request */
		own = dlm_named_holder(m, l, w->owner);
		if (own && l->election)
		{
			/* 16.3: an election is led once */
			int			requester = w->requester;

			dlm_waiter_remove(m, w);
			dlm_answer_error(m, requester, DLM_ERR_HELD_ONCE);
		}
		else if (own && !dlock_mode_covers(own->mode, w->mode))
		{
			dlm_answer(m, w->requester, DLOCK_STATUS_MODE_HELD, 0, 0, own->mode);
			dlm_waiter_remove(m, w);
		}
		else
		{
			int			requester = w->requester;
			DLmHolder  *h = dlm_take_name(m, l, w->owner, w->mode, w->ttl_us,
									  w->pid, w->backend_start, w->role, now, false,
									  w->kept_until != 0);
			DLmHolderExtra *x;

			if (h && l->election && (x = dlm_holder_extra(m, h)) != NULL)
			{
				/* 16.3: the new leader publishes its campaign's value */
				x->value = w->value;
				w->value = NULL;
			}
			dlm_waiter_remove(m, w);
			if (h)
				dlm_answer_granted(m, requester, h);
		}
	}
}

/*
 * Grant O's waiting groups whose every part passes (6.2), in the order O
 * queued them; after each grant look again from the first.
 */
static void
recheck_owner(DLockManager *m, DLmOwner *o, DLockTime now)
{
	DLmLink    *k = dlm_list_head(o->waiters);

	while (k && !m->broken)
	{
		DLmWaiter  *w = DLM_CONTAINER(DLmWaiter, owner_link, k);

		if (w->group && w->group->parts[0] == w && group_grantable(m, w->group, NULL))
		{
			grant_group(m, w->group, now);
			k = dlm_list_head(o->waiters);
		}
		else
			k = dlm_list_next(o->waiters, k);
	}
}

/*
 * Drain the scan list, then the recheck list (6, 6.2), until both are
 * empty: at the end of every event.
 */
void
dlm_drain(DLockManager *m, DLockTime now)
{
	while (!m->broken)
	{
		DLmLock    *l;
		DLmOwner   *o;

		if ((l = dlm_vec_pop(&m->scan)) != NULL)
		{
			l->scan_listed = false;
			dlm_grant_pass(m, l, now);
		}
		else if ((o = dlm_vec_pop(&m->recheck)) != NULL)
		{
			o->recheck_listed = false;
			recheck_owner(m, o, now);
		}
		else
			break;
	}
	dlm_vec_done(m, &m->scan);
	dlm_vec_done(m, &m->recheck);
}

/* ---------------------------------------------------------------------
 * Waiting (3.4, 7)
 * --------------------------------------------------------------------- */

/* After a request queued: refuse it if a part closes a cycle (7). */
static bool
refuse_deadlock(DLockManager *m, DLmWaiter *first)
{
	DLmGroup   *g = first->group;
	int			nparts = g ? g->nparts : 1;

	for (int i = 0; i < nparts; i++)
	{
		int			n = dlm_deadlock_cycle(m, g ? g->parts[i] : first);

		if (m->broken)
			return true;
		if (n > 0)
		{
			DLmAnswer	a;
			int			requester = first->requester;

			dlm_request_remove(m, first);
			memset(&a, 0, sizeof(a));
			a.status = DLOCK_STATUS_DEADLOCK;
			a.ncycle = n;
			a.cycle = m->cycle;
			if (requester >= 0)
				m->cfg.answer(m->cfg.answer_arg, requester, &a);
			return true;
		}
	}
	return false;
}

/* The request waits: its first part answers for it. */
void
dlm_queued(DLockManager *m, DLmWaiter *first)
{
	if (first->requester >= 0)
		m->waiting[first->requester] = first;
	if (!refuse_deadlock(m, first) && !dlm_kept_behind(m, first))
		dlm_answer(m, first->requester, DLOCK_STATUS_QUEUED, first->ticket, 0, 0);
}
