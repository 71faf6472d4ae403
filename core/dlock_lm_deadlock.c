/* SPDX-License-Identifier: PostgreSQL */
/*
 * dlock_lm_deadlock.c
 *		Deadlocks (core/README section 7): a breadth-first search of the
 *		waits-for graph from a new wait back to its owner.  Only the search:
 *		the cycle comes back as data (m->cycle); dlm_queued (dlock_lm_grant.c)
 *		takes the request out of line and answers DEADLOCK with it.
 *
 * Interface (dlock_lm_int.h):
 *		dlm_deadlock_cycle		does a new wait close a cycle, and which
 */
#include "dlock_lm_int.h"

#include <string.h>

typedef struct Search
{
	DLockManager *m;
	DLmOwner   *target;			/* the owner of the new wait */
	DLmOwner   *from;			/* the owner whose wait is being followed */
	DLmWaiter  *via;
	DLmOwner   *head,
			   *tail;			/* the queue */
	DLmOwner   *found_from;		/* set when an edge reaches the target */
	DLmWaiter  *found_via;
	int32_t		found_pid;
	bool		found_held;
} Search;

/* One edge: s->from, waiting with s->via, waits for b. */
static bool
edge(Search *s, DLmOwner *b, int32_t pid, bool held)
{
	if (b == s->target)
	{
		s->found_from = s->from;
		s->found_via = s->via;
		s->found_pid = pid;
		s->found_held = held;
		return true;
	}
	if (b->visited == s->m->search)
		return false;
	b->visited = s->m->search;
	b->bfs_parent = s->from;
	b->bfs_via = s->via;
	b->bfs_pid = pid;
	b->bfs_held = held;
	b->bfs_next = NULL;
	if (s->tail)
		s->tail->bfs_next = b;
	else
		s->head = b;
	s->tail = b;
	return false;
}

/* The edges of one waiting part; true as soon as one reaches the target. */
static bool
edges_of(Search *s, DLmWaiter *w)
{
	DLmLock    *l = w->lock;
	DLockModeMask conflicts = dlock_mode_conflicts(w->mode);

	if (w->holder == NULL && dlm_own_covers(s->m, l, w->owner, w->mode))
		return false;			/* waits for nobody */
	s->via = w;
	for (DLmLink *k = dlm_list_head(&l->holders); k; k = dlm_list_next(&l->holders, k))
	{
		DLmHolder  *h = DLM_CONTAINER(DLmHolder, lock_link, k);

		if (h->owner != w->owner && (conflicts & DLOCK_MODE_BIT(h->mode)) &&
			edge(s, h->owner, h->pid, true))
			return true;
	}
	for (DLmLink *k = dlm_list_head(&l->converts); k; k = dlm_list_next(&l->converts, k))
	{
		DLmWaiter  *x = DLM_CONTAINER(DLmWaiter, lock_link, k);

		if (x == w)
			return false;		/* a conversion waits for those before it only */
		if (x->owner != w->owner && (conflicts & DLOCK_MODE_BIT(x->mode)) &&
			edge(s, x->owner, x->pid, false))
			return true;
	}
	for (DLmLink *k = dlm_list_head(&l->waiters); k; k = dlm_list_next(&l->waiters, k))
	{
		DLmWaiter  *x = DLM_CONTAINER(DLmWaiter, lock_link, k);

		if (x == w)
			break;
		if (x->owner != w->owner && (conflicts & DLOCK_MODE_BIT(x->mode)) &&
			edge(s, x->owner, x->pid, false))
			return true;
	}
	return false;
}

static void
cycle_step(DLmCycleStep *st, const DLmOwner *waiter, const DLmWaiter *via,
		   const DLmOwner *blocker, int32_t blocker_pid, bool held)
{
	st->waiter_keyed = waiter->key != NULL;
	st->waiter_pid = waiter->key ? via->pid : waiter->pid;
	st->lock = via->lock->name;
	st->held = held;
	st->blocker_keyed = blocker->key != NULL;
	st->blocker_pid = blocker->key ? blocker_pid : blocker->pid;
}

/*
 * Does the new wait w close a cycle?  Then the cycle, the new wait first,
 * is in m->cycle and its length returned; else 0 (also when out of memory:
 * the manager is broken then).
 */
int
dlm_deadlock_cycle(DLockManager *m, DLmWaiter *w)
{
	DLmOwner   *o = w->owner;
	Search		s;
	int			n;
	DLmOwner   *x;

	/* nobody waits for an owner that holds nothing and waits only here */
	if (dlm_list_empty(&o->holders) &&
		dlm_list_head(&o->waiters) == &w->owner_link &&
		dlm_list_next(&o->waiters, &w->owner_link) == NULL)
		return 0;

	memset(&s, 0, sizeof(s));
	s.m = m;
	s.target = o;
	m->search++;
	o->visited = m->search;
	s.from = o;
	if (!edges_of(&s, w))
	{
		while (s.head && s.found_from == NULL)
		{
			DLmOwner   *b = s.head;

			s.head = b->bfs_next;
			if (s.head == NULL)
				s.tail = NULL;
			s.from = b;
			for (DLmLink *k = dlm_list_head(&b->waiters); k; k = dlm_list_next(&b->waiters, k))
				if (edges_of(&s, DLM_CONTAINER(DLmWaiter, owner_link, k)))
					break;
		}
		if (s.found_from == NULL)
			return 0;
	}

	/* the path: target -> ... -> found_from, then the closing edge */
	n = 1;
	for (x = s.found_from; x != o; x = x->bfs_parent)
		n++;
	if (n > m->cycle_cap)
	{
		DLmCycleStep *c = dlm_mem_alloc(m, sizeof(DLmCycleStep) * n);

		if (c == NULL)
			return 0;
		if (m->cycle)
			dlm_mem_free(m, m->cycle, sizeof(DLmCycleStep) * m->cycle_cap);
		m->cycle = c;
		m->cycle_cap = n;
	}
	{
		int			i = n - 1;

		cycle_step(&m->cycle[i], s.found_from, s.found_via, o, s.found_pid, s.found_held);
		for (x = s.found_from; x != o; x = x->bfs_parent)
			cycle_step(&m->cycle[--i], x->bfs_parent, x->bfs_via, x, x->bfs_pid, x->bfs_held);
	}
	return n;
}
