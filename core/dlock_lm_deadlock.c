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
 *
 * The search's state lives here, not in the owners (most owners never
 * wait: a word or five each for a million leases is memory held for
 * nothing): the owners reached, in the order reached (the queue itself),
 * and an index from owner to its place, both kept for the next search (and
 * freed with the manager's other memory).
 */
#include "dlock_lm_int.h"

#include <string.h>

/* An owner the search reached, and how. */
typedef struct DLmReached
{
	DLmOwner   *owner;
	int32_t		parent;			/* reached from this one (index) ... */
	int32_t		pid;			/* ... for this process's holder or request ... */
	DLmWaiter  *via;			/* ... waiting with this part ... */
	bool		held;			/* ... which holds (else queued earlier) */
} DLmReached;

/* The index: open addressing by owner; a slot of an older search is free. */
typedef struct DLmReachedSlot
{
	uint64_t	search;
	int32_t		at;				/* in reached[] */
} DLmReachedSlot;

struct DLmDeadlockSearch
{
	DLmReached *reached;
	int32_t		nreached;
	int32_t		reached_cap;
	DLmReachedSlot *slots;
	size_t		nslots;			/* a power of two, at least twice nreached */
};

typedef struct Search
{
	DLockManager *m;
	struct DLmDeadlockSearch *d;
	DLmOwner   *target;			/* the owner of the new wait: reached[0] */
	int32_t		from;			/* the owner whose wait is being followed */
	DLmWaiter  *via;
	int32_t		head;			/* the queue: reached[head .. nreached) */
	bool		out_of_memory;
	int32_t		found_from;		/* set (>= 0) when an edge reaches the target */
	DLmWaiter  *found_via;
	int32_t		found_pid;
	bool		found_held;
} Search;

static size_t
slot_of(const DLmOwner *o, size_t nslots)
{
	uint64_t	x = (uint64_t) (uintptr_t) o * UINT64_C(0x9e3779b97f4a7c15);

	return (x ^ (x >> 32)) & (nslots - 1);
}

/* The slot of o in this search, or the free slot where it would go. */
static DLmReachedSlot *
find_slot(const struct DLmDeadlockSearch *d, uint64_t search, const DLmOwner *o)
{
	size_t		i = slot_of(o, d->nslots);

	while (d->slots[i].search == search && d->reached[d->slots[i].at].owner != o)
		i = (i + 1) & (d->nslots - 1);
	return &d->slots[i];
}

/* Room for one owner more; false if out of memory (the manager is broken). */
static bool
reserve(DLockManager *m, struct DLmDeadlockSearch *d)
{
	if (d->nreached == d->reached_cap)
	{
		int32_t		cap = d->reached_cap ? d->reached_cap * 2 : 64;
		DLmReached *r = dlm_mem_alloc(m, sizeof(DLmReached) * cap);

		if (r == NULL)
			return false;
		if (d->reached)
		{
			memcpy(r, d->reached, sizeof(DLmReached) * d->nreached);
			dlm_mem_free(m, d->reached, sizeof(DLmReached) * d->reached_cap);
		}
		d->reached = r;
		d->reached_cap = cap;
	}
	if ((size_t) (d->nreached + 1) * 2 > d->nslots)
	{
		size_t		n = d->nslots ? d->nslots * 2 : 128;
		DLmReachedSlot *s = dlm_alloc0(m, sizeof(DLmReachedSlot) * n);

		if (s == NULL)
			return false;
		if (d->slots)
			dlm_mem_free(m, d->slots, sizeof(DLmReachedSlot) * d->nslots);
		d->slots = s;
		d->nslots = n;
		for (int32_t i = 0; i < d->nreached; i++)
		{
			DLmReachedSlot *x = find_slot(d, m->search, d->reached[i].owner);

			x->search = m->search;
			x->at = i;
		}
	}
	return true;
}

/* o is reached: appended to the queue. */
static bool
reach(DLockManager *m, struct DLmDeadlockSearch *d, DLmOwner *o, int32_t parent,
	  DLmWaiter *via, int32_t pid, bool held)
{
	DLmReachedSlot *slot;
	DLmReached *r;

	if (!reserve(m, d))
		return false;
	slot = find_slot(d, m->search, o);
	slot->search = m->search;
	slot->at = d->nreached;
	r = &d->reached[d->nreached++];
	r->owner = o;
	r->parent = parent;
	r->via = via;
	r->pid = pid;
	r->held = held;
	return true;
}

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
	if (find_slot(s->d, s->m->search, b)->search == s->m->search)
		return false;
	if (!reach(s->m, s->d, b, s->from, s->via, pid, held))
	{
		s->out_of_memory = true;
		return true;			/* stop: no cycle found */
	}
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
	for (DLmLink *k = dlm_list_head(&l->line->converts); k; k = dlm_list_next(&l->line->converts, k))
	{
		DLmWaiter  *x = DLM_CONTAINER(DLmWaiter, lock_link, k);

		if (x == w)
			return false;		/* a conversion waits for those before it only */
		if (x->owner != w->owner && (conflicts & DLOCK_MODE_BIT(x->mode)) &&
			edge(s, x->owner, x->pid, false))
			return true;
	}
	for (DLmLink *k = dlm_list_head(&l->line->waiters); k; k = dlm_list_next(&l->line->waiters, k))
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
	struct DLmDeadlockSearch *d;
	int			n;
	int32_t		x;

	/* nobody waits for an owner that holds nothing and waits only here */
	if (dlm_list_empty(&o->holders) &&
		dlm_list_head(o->waiters) == &w->owner_link &&
		dlm_list_next(o->waiters, &w->owner_link) == NULL)
		return 0;

	if (m->deadlock == NULL &&
		(m->deadlock = dlm_alloc0(m, sizeof(struct DLmDeadlockSearch))) == NULL)
		return 0;
	d = m->deadlock;
	memset(&s, 0, sizeof(s));
	s.m = m;
	s.d = d;
	s.target = o;
	s.found_from = -1;
	m->search++;
	d->nreached = 0;
	if (!reach(m, d, o, -1, NULL, 0, false))
		return 0;
	s.from = 0;
	s.head = 1;
	if (!edges_of(&s, w))
	{
		while (s.head < d->nreached && s.found_from < 0 && !s.out_of_memory)
		{
			DLmOwner   *b = d->reached[s.head].owner;

			s.from = s.head++;
			for (DLmLink *k = dlm_list_head(b->waiters); k; k = dlm_list_next(b->waiters, k))
				if (edges_of(&s, DLM_CONTAINER(DLmWaiter, owner_link, k)))
					break;
		}
	}
	if (s.found_from < 0)
		return 0;

	/* the path: target -> ... -> found_from, then the closing edge */
	n = 1;
	for (x = s.found_from; x != 0; x = d->reached[x].parent)
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

		cycle_step(&m->cycle[i], d->reached[s.found_from].owner, s.found_via, o,
				   s.found_pid, s.found_held);
		for (x = s.found_from; x != 0; x = d->reached[x].parent)
		{
			const DLmReached *r = &d->reached[x];

			cycle_step(&m->cycle[--i], d->reached[r->parent].owner, r->via, r->owner,
					   r->pid, r->held);
		}
	}
	return n;
}
