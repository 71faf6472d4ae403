/*
 * dlock_lm_int.h
 *		The lock manager's containers, private to core/ (dlock_lm_hash.c).
 *
 * Interface:
 *		dlm_siphash					SipHash-1-3 of bytes under a 128-bit seed
 *		dlm_hash_init/free/insert/remove/first/next/grow
 *									chained hash of DLmHashNode, caller compares
 *		dlm_heap_*					leases in a binary heap by (expires_at, token)
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

/* Leases by (expires_at, token), soonest first; holders know their index. */
typedef struct DLmHeap
{
	DLmHolder **items;
	int32_t		count;
	int32_t		capacity;
} DLmHeap;

extern void dlm_heap_free(DLmHeap *heap, const DLmAllocator *a);
extern bool dlm_heap_add(DLmHeap *heap, const DLmAllocator *a, DLmHolder *h);
extern void dlm_heap_remove(DLmHeap *heap, DLmHolder *h);
extern void dlm_heap_rebuild(DLmHeap *heap);

static inline DLmHolder *
dlm_heap_first(const DLmHeap *heap)
{
	return heap->count > 0 ? heap->items[0] : NULL;
}

#endif							/* DLOCK_LM_INT_H */
