/* SPDX-License-Identifier: PostgreSQL */
/*
 * dlock_lm_int.h
 *		The lock manager's containers, private to core/ (dlock_lm_hash.c).
 *
 * Interface:
 *		dlm_siphash					SipHash-1-3 of bytes under a 128-bit seed
 *		dlm_hash_init/free/insert/remove/first/next/grow
 *									chained hash of DLmHashNode, caller compares
 *		dlm_heap_*					leases in a 4-ary heap by (expires_at, token)
 */
#ifndef DLOCK_LM_INT_H
#define DLOCK_LM_INT_H

#include "dlock_lm.h"

extern uint64_t dlm_siphash(const uint64_t seed[2], const void *data, size_t len);

/*
 * A chained hash: nodes sit inside the objects; lookups walk a bucket and
 * the caller compares.  Buckets double when there are more nodes than
 * buckets; a failed growth only leaves chains longer.
 */
typedef struct DLmHash
{
	DLmHashNode **buckets;
	size_t		nbuckets;		/* a power of two */
	size_t		count;
} DLmHash;

extern bool dlm_hash_init(DLmHash *h, const DLmAllocator *a, size_t nbuckets);
extern void dlm_hash_free(DLmHash *h, const DLmAllocator *a);
extern void dlm_hash_insert(DLmHash *h, const DLmAllocator *a, DLmHashNode *n);
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

#endif							/* DLOCK_LM_INT_H */
