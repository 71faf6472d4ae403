/* SPDX-License-Identifier: PostgreSQL */
/*
 * dlock_lm_int.h
 *		The lock manager's insides, private to core/: its containers, its
 *		state (struct DLockManager) and what its files share.  The public
 *		interface is dlock_lm.h; core/README says what each file holds.
 *
 * Interface:
 *		dlm_siphash					SipHash-1-3 of bytes under a 128-bit seed
 *		dlm_hash_init/free/insert/remove/first/next/grow
 *									chained hash of DLmHashNode, caller compares
 *		dlm_heap_*					leases in a 4-ary heap by (expires_at, token)
 *									(those three: dlock_lm_hash.c)
 *		struct DLockManager			the manager's state, one struct
 *		dlm_compatible, dlm_owner_in_use, dlm_lock_in_use, dlm_permits_fit,
 *		dlm_request_role, dlm_request_nparts, dlm_request_part
 *									small predicates, inline
 *		the functions of dlock_lm_picture.c, _batch.c, _answer.c, _grant.c,
 *		_deadlock.c, _sem.c, _kept.c, _load.c, each group under its file's
 *		name below
 *
 * Locking: none here.  A manager is its adapter's alone, called from one
 * thread (the PostgreSQL worker, the MariaDB plugin's lock-manager thread);
 * every function that takes a DLockManager runs inside one event, or
 * dlm_settle, or loading.
 */
#ifndef DLOCK_LM_INT_H
#define DLOCK_LM_INT_H

#include "dlock_lm.h"

#include <string.h>

/*
 * Nothing declared here is seen outside the library that links core/ (the
 * PostgreSQL extension, the MariaDB plugin): the calls between the files
 * stay direct, as they were inside one file, and the library exports
 * dlock_lm.h's interface only.
 */
#if defined(__GNUC__)
#pragma GCC visibility push(hidden)
#endif

extern uint64_t dlm_siphash(const uint64_t seed[2], const void *data, size_t len);

/*
 * A chained hash: nodes sit inside the objects; lookups walk a bucket and
 * the caller compares.  Buckets double when there are more nodes than
 * buckets; a failed growth only leaves chains longer.
 */
typedef uint64_t (*DLmHashFn) (const void *arg, const DLmHashNode *n);

typedef struct DLmHash
{
	DLmHashNode **buckets;
	size_t		nbuckets;		/* a power of two */
	size_t		count;
	DLmHashFn	hash_of;		/* a node's hash, computed again */
	const void *hash_arg;
} DLmHash;

extern bool dlm_hash_init(DLmHash *h, const DLmAllocator *a, size_t nbuckets,
						  DLmHashFn hash_of, const void *hash_arg);
extern void dlm_hash_free(DLmHash *h, const DLmAllocator *a);
extern void dlm_hash_insert(DLmHash *h, const DLmAllocator *a, DLmHashNode *n, uint64_t hash);
extern void dlm_hash_remove(DLmHash *h, DLmHashNode *n);

/* First node of the chain that may hold 'hash' (then follow ->next). */
static inline DLmHashNode *
dlm_hash_chain(const DLmHash *h, uint64_t hash)
{
	return h->buckets[hash & (h->nbuckets - 1)];
}

/* Every node, bucket by bucket: *bucket starts at 0. */
extern DLmHashNode *dlm_hash_next(const DLmHash *h, size_t *bucket, DLmHashNode *n);

/*
 * Leases by (expires_at, token), soonest first, in a 4-ary heap whose items
 * carry their key: a comparison reads the array, not the holders (a
 * million leases do not fit in the caches), and the tree is half as deep
 * as a binary one.  Holders know their index (expiry_pos).
 */
typedef struct DLmHeapItem
{
	DLockTime	expires_at;
	int64_t		token;
	DLmHolder  *holder;
} DLmHeapItem;

typedef struct DLmHeap
{
	DLmHeapItem *items;
	int32_t		count;
	int32_t		capacity;
} DLmHeap;

extern void dlm_heap_free(DLmHeap *heap, const DLmAllocator *a);
extern bool dlm_heap_add(DLmHeap *heap, const DLmAllocator *a, DLmHolder *h);
extern void dlm_heap_remove(DLmHeap *heap, DLmHolder *h);
/* After the holders' expiries changed in place: their keys again, reordered. */
extern void dlm_heap_rebuild(DLmHeap *heap);

static inline DLmHolder *
dlm_heap_first(const DLmHeap *heap)
{
	return heap->count > 0 ? heap->items[0].holder : NULL;
}

/*
 * A list the manager keeps of objects to look at later (the batch's and
 * the event's: locks and owners maybe left empty, locks to announce, to
 * pass over again, ...): an array of pointers, first in first out from
 * 'head', rather than a link in every lock and owner (a million of them,
 * core/README 11).  Grows by doubling; a failed growth marks the manager
 * broken, as any failed allocation (dlock_lm_load.c).
 */
typedef struct DLmVec
{
	void	  **items;
	size_t		head;			/* items before it are done */
	size_t		count;
	size_t		cap;
} DLmVec;

extern bool dlm_vec_grow(DLockManager *m, DLmVec *v);
extern void dlm_vec_done(DLockManager *m, DLmVec *v);

static inline void
dlm_vec_push(DLockManager *m, DLmVec *v, void *p)
{
	if (v->count < v->cap || dlm_vec_grow(m, v))
		v->items[v->count++] = p;
}

/* The next item first in, or NULL when all are done. */
static inline void *
dlm_vec_pop(DLmVec *v)
{
	if (v->head == v->count)
		return NULL;
	return v->items[v->head++];
}

/* Parts of one request at most: every name and each ancestor's intention. */
#define DLM_MAX_PARTS (DLOCK_MAX_MULTI * DLOCK_MAX_PATH_DEPTH)

/* The manager's state: everything of one lock manager, nothing global. */
struct DLockManager
{
	DLmConfig	cfg;
	DLmAllocator mem;			/* the caller's, through the chunk list */
	DLmList		chunks;
	bool		broken;

	DLmHash		locks;			/* DLmLock.hash_node, by name */
	DLmHash		owners;			/* DLmOwner.hash_node, by identity */
	DLmHash		pairs;			/* DLmHolder.pair_node, by (lock, owner) */
	DLmHash		roles;			/* RoleUse.node, by role; kept once made */
	int64_t		nwaiters;		/* waiting parts (with pairs.count: the objects) */
	DLmHeap		leases;
	DLmWaiter **waiting;		/* per requester: its request's first part */
	DLmList		young;			/* DLmWaiter.young_link: no row yet, by since */
	int64_t		nkept;			/* on the kept list */
	DLmList		kept;			/* DLmWaiter.kept_link: kept places no call
								 * waits for, by kept_until (14) */

	int64_t		next_ticket;
	int64_t		ticket_hi;		/* tickets below it are covered by the store */
	bool		counter_dirty;
	bool		durable;

	/* the batch, since the last dlm_settle */
	DLmVec		touched_h;		/* DLmHolder: rows to write */
	DLmVec		touched_w;
	DLmVec		empty_locks;	/* DLmLock: maybe left with nothing */
	DLmVec		empty_owners;	/* DLmOwner */
	DLmVec		notify;			/* DLmLock: announced (8) */
	DLmVec		leaders;		/* DLmLock: elections whose leader changed (16) */

	/* the event */
	DLmVec		scan;			/* DLmLock: to pass over again (6) */
	DLmVec		recheck;		/* DLmOwner: whose cover grew (6.2) */
	uint64_t	search;			/* deadlock searches so far */
	struct DLmDeadlockSearch *deadlock; /* the search's memory (dlock_lm_deadlock.c) */
	DLmCycleStep *cycle;
	int			cycle_cap;
	int64_t		tokens[DLOCK_MAX_MULTI];
	DLmLock   **part_locks;		/* DLM_MAX_PARTS: a request's intention parts */
	int		   *part_modes;

	/* statistics: the answers pass through dlm_count_answer on their way */
	DLmStats	stats;
	DLmAnswerFn answer_fn;		/* the caller's */
	void	   *answer_arg;
	struct DLmAsk
	{
		uint8_t		op;			/* the requester's last request */
		bool		queued;		/* answered QUEUED, not yet ended */
		DLockTime	queued_at;
	}		   *asks;			/* per requester */
	DLockTime	now;			/* the current event's */
};

/* A lock's allocation: the struct and its name. */
static inline size_t
dlm_lock_size(size_t name_len)
{
	return offsetof(DLmLock, name) + name_len + 1;
}

/* An owner's allocation: the struct and a key's bytes (NULL: a session). */
static inline size_t
dlm_owner_size(const char *key)
{
	return offsetof(DLmOwner, key_bytes) + (key ? strlen(key) + 1 : 0);
}

/*
 * The line of locks nobody waits for yet, and the waiters of owners that
 * never waited (dlock_lm_picture.c): never written.
 */
extern const DLmLine dlm_no_line;
extern const DLmList dlm_no_waiters;

/* compatible (1): the mode conflicts with none of the others. */
static inline bool
dlm_compatible(int mode, DLockModeMask others)
{
	return (dlock_mode_conflicts(mode) & others) == 0;
}

/* An owner with nothing held or waited for belongs to nobody yet (12). */
static inline bool
dlm_owner_in_use(const DLmOwner *o)
{
	return !dlm_list_empty(&o->holders) || !dlm_list_empty(o->waiters);
}

/* A lock held or waited for: its kind and a semaphore's capacity stand (15). */
static inline bool
dlm_lock_in_use(const DLmLock *l)
{
	return !dlm_list_empty(&l->holders) || !dlm_list_empty(&l->line->converts) ||
		!dlm_list_empty(&l->line->waiters);
}

/*
 * Whether permits more fit a semaphore (15.3).  In 64 bits: capacity and
 * permits go up to INT32_MAX each, and their sum past it wrapped around.
 */
static inline bool
dlm_permits_fit(const DLmLock *l, int32_t permits)
{
	return (int64_t) l->permits_held + permits <= l->capacity;
}

/*
 * The role r's holders and waiting parts of O count for and are shown
 * under (12): an owner key's own, a session's the request's (one session
 * may ask as several roles: a SECURITY DEFINER function's owner, say).
 */
static inline uint32_t
dlm_request_role(const DLmOwner *o, const DLmRequest *r)
{
	return o->key ? o->role : r->role;
}

/*
 * H's pending up-conversion, or NULL: found in its lock's conversions (few,
 * and none on most locks) rather than kept in every holder.
 */
static inline DLmWaiter *
dlm_conversion_of(const DLmHolder *h)
{
	const DLmList *c = &h->lock->line->converts;

	for (DLmLink *k = dlm_list_head(c); k; k = dlm_list_next(c, k))
	{
		DLmWaiter  *w = DLM_CONTAINER(DLmWaiter, lock_link, k);

		if (w->holder == h)
			return w;
	}
	return NULL;
}

/* A waiting request's parts: its group's, or its first part alone. */
static inline int
dlm_request_nparts(const DLmWaiter *first)
{
	return first->group ? first->group->nparts : 1;
}

static inline DLmWaiter *
dlm_request_part(const DLmWaiter *first, int i)
{
	return first->group ? first->group->parts[i] : (DLmWaiter *) first;
}

/* dlock_lm_picture.c: owners, locks, the holders of a lock, holders and waiters */
extern bool dlm_picture_init(DLockManager *m);
extern size_t dlm_bounded_len(const char *s, size_t max);
extern DLmOwner *dlm_owner_find(const DLockManager *m, const char *key, int32_t pid,
								int64_t start);
extern DLmOwner *dlm_owner_get(DLockManager *m, const char *key, int32_t pid, int64_t start);
extern void dlm_note_empty_owner(DLockManager *m, DLmOwner *o);
extern DLmLock *dlm_lock_find(const DLockManager *m, const char *name, size_t len);
extern DLmLock *dlm_lock_get(DLockManager *m, const char *name, size_t len);
extern bool dlm_line_make(DLockManager *m, DLmLock *l);
extern bool dlm_owner_waiters_make(DLockManager *m, DLmOwner *o);
extern DLmHolderExtra *dlm_holder_extra(DLockManager *m, DLmHolder *h);
extern void dlm_count_named(DLockManager *m, DLmOwner *o, const DLmLock *l, uint32_t role,
							int delta);
extern DLmHolder *dlm_named_holder(const DLockManager *m, const DLmLock *l, const DLmOwner *o);
extern DLmHolder *dlm_implied_holder(const DLockManager *m, const DLmLock *l,
									 const DLmOwner *o, int mode);
extern bool dlm_own_covers(const DLockManager *m, const DLmLock *l, const DLmOwner *o,
						   int mode);
extern DLockModeMask dlm_others_held(const DLockManager *m, const DLmLock *l,
									 const DLmOwner *o);
extern bool dlm_grantable_now(const DLockManager *m, const DLmLock *l, const DLmOwner *o,
							  int mode);
extern DLmHolder *dlm_holder_add(DLockManager *m, DLmLock *l, DLmOwner *o, int mode,
								 bool implied, int64_t token, int32_t pid,
								 int64_t backend_start, uint32_t role, DLockTime now);
extern void dlm_holder_set_lease(DLockManager *m, DLmHolder *h, int64_t ttl_us, DLockTime now);
extern void dlm_holder_remove(DLockManager *m, DLmHolder *h);
extern void dlm_waiter_remove(DLockManager *m, DLmWaiter *w);
extern void dlm_request_remove(DLockManager *m, DLmWaiter *w);
extern int	dlm_ancestors(const char *name, size_t *lens);
extern void dlm_implied_add(DLockManager *m, DLmLock *a, DLmOwner *o, int mode, int32_t pid,
							int64_t backend_start, uint32_t role, DLockTime now);
extern void dlm_implied_drop(DLockManager *m, DLmLock *a, DLmOwner *o, int mode);

/* dlock_lm_batch.c: the batch's rows and lists (9) */
extern void dlm_touch_holder(DLockManager *m, DLmHolder *h);
extern void dlm_touch_waiter(DLockManager *m, DLmWaiter *w);
extern void dlm_holder_changed(DLockManager *m, DLmHolder *h);
extern int64_t dlm_take_ticket(DLockManager *m);
extern void dlm_leader_changed(DLockManager *m, DLmLock *l);
extern char *dlm_value_copy(DLockManager *m, const char *value);
extern void dlm_value_free(DLockManager *m, char *value);

/* dlock_lm_answer.c: answers, counted on their way (17) */
extern void dlm_answer(DLockManager *m, int requester, DLockStatus status, int64_t token,
					   DLockTime expires_at, int32_t count);
extern void dlm_answer_error(DLockManager *m, int requester, DLmError err);
extern void dlm_answer_granted(DLockManager *m, int requester, const DLmHolder *h);
extern void dlm_answer_tokens(DLockManager *m, int requester, int n);
extern void dlm_count_answer(void *arg, int requester, const DLmAnswer *a);

/* dlock_lm_grant.c: take, release, convert, queue, the grant pass (3-6, 8) */
extern DLmHolder *dlm_take_name(DLockManager *m, DLmLock *l, DLmOwner *o, int mode,
								int64_t ttl_us, int32_t pid, int64_t backend_start,
								uint32_t role, DLockTime now, bool collect,
								bool uncollected);
extern void dlm_release_last(DLockManager *m, DLmHolder *h, DLockTime now);
extern void dlm_convert_now(DLockManager *m, DLmHolder *h, int mode, DLockTime now);
extern DLmWaiter *dlm_enqueue(DLockManager *m, const DLmRequest *r, DLmOwner *o, DLmLock *l,
							  DLmHolder *converting, int mode, bool implied, DLockTime now);
extern DLmGroup *dlm_group_new(DLockManager *m, int nparts);
extern void dlm_queued(DLockManager *m, DLmWaiter *first);
extern void dlm_grant_pass(DLockManager *m, DLmLock *l, DLockTime now);
extern void dlm_scan_later(DLockManager *m, DLmLock *l);
extern void dlm_recheck_later(DLockManager *m, DLmOwner *o);
extern void dlm_drain(DLockManager *m, DLockTime now);

/* dlock_lm_deadlock.c: the waits-for graph (7) */
extern int	dlm_deadlock_cycle(DLockManager *m, DLmWaiter *w);

/* dlock_lm_sem.c: semaphores (15) and elections (16) */
extern void dlm_semaphore_pass(DLockManager *m, DLmLock *l, DLockTime now);
extern void dlm_do_held_once(DLockManager *m, const DLmRequest *r, DLmOwner *o, DLockTime now);
extern void dlm_do_proclaim(DLockManager *m, const DLmRequest *r, DLmOwner *o);

/* dlock_lm_kept.c: kept places (14) */
extern void dlm_detach(DLockManager *m, DLmWaiter *first, DLockTime now);
extern DLmWaiter *dlm_kept_place_of(const DLockManager *m, const DLmOwner *o,
									const char *const *names, int nnames, int mode,
									int32_t permits);
extern void dlm_resume(DLockManager *m, const DLmRequest *r, DLmWaiter *first);
extern bool dlm_kept_behind(DLockManager *m, DLmWaiter *first);
extern int64_t dlm_release_kept(DLockManager *m, DLmOwner *o, const DLmLock *l);
extern void dlm_kept_insert(DLockManager *m, DLmWaiter *first);
extern DLmWaiter *dlm_kept_first(const DLockManager *m);

/* dlock_lm_load.c: the manager's memory (and its creation and loading) */
extern void *dlm_mem_alloc(void *arg, size_t size);
extern void dlm_mem_free(void *arg, void *ptr, size_t size);
extern void *dlm_alloc0(DLockManager *m, size_t size);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#endif							/* DLOCK_LM_INT_H */
