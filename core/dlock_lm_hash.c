/* SPDX-License-Identifier: PostgreSQL */
/*
 * dlock_lm_hash.c
 *		The lock manager's containers (core/README section 11): SipHash-1-3,
 *		chained hash tables, the lease heap.
 *
 * Interface: see dlock_lm_int.h.
 */
#include "dlock_lm_int.h"

#include <string.h>

/* ---------------------------------------------------------------------
 * SipHash-1-3 (Aumasson and Bernstein): names come from users, so a hash
 * an attacker cannot aim at, under a seed chosen at each start.
 * --------------------------------------------------------------------- */

#define ROTL(x, b) (uint64_t) (((x) << (b)) | ((x) >> (64 - (b))))

#define SIPROUND \
	do { \
		v0 += v1; v1 = ROTL(v1, 13); v1 ^= v0; v0 = ROTL(v0, 32); \
		v2 += v3; v3 = ROTL(v3, 16); v3 ^= v2; \
		v0 += v3; v3 = ROTL(v3, 21); v3 ^= v0; \
		v2 += v1; v1 = ROTL(v1, 17); v1 ^= v2; v2 = ROTL(v2, 32); \
	} while (0)

static uint64_t
load_le64(const unsigned char *p)
{
	uint64_t	v = 0;

	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

uint64_t
dlm_siphash(const uint64_t seed[2], const void *data, size_t len)
{
	const unsigned char *p = data;
	uint64_t	v0 = seed[0] ^ UINT64_C(0x736f6d6570736575);
	uint64_t	v1 = seed[1] ^ UINT64_C(0x646f72616e646f6d);
	uint64_t	v2 = seed[0] ^ UINT64_C(0x6c7967656e657261);
	uint64_t	v3 = seed[1] ^ UINT64_C(0x7465646279746573);
	uint64_t	b = ((uint64_t) len) << 56;
	size_t		whole = len & ~(size_t) 7;
	unsigned char tail[8] = {0};

	for (size_t i = 0; i < whole; i += 8)
	{
		uint64_t	m = load_le64(p + i);

		v3 ^= m;
		SIPROUND;
		v0 ^= m;
	}
	memcpy(tail, p + whole, len - whole);
	b |= load_le64(tail);
	v3 ^= b;
	SIPROUND;
	v0 ^= b;
	v2 ^= 0xff;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	return v0 ^ v1 ^ v2 ^ v3;
}

/* ---------------------------------------------------------------------
 * Chained hash tables
 * --------------------------------------------------------------------- */

bool
dlm_hash_init(DLmHash *h, const DLmAllocator *a, size_t nbuckets, DLmHashFn hash_of,
			  const void *hash_arg)
{
	h->hash_of = hash_of;
	h->hash_arg = hash_arg;
	h->buckets = a->alloc(a->arg, nbuckets * sizeof(DLmHashNode *));
	if (h->buckets == NULL)
		return false;
	memset(h->buckets, 0, nbuckets * sizeof(DLmHashNode *));
	h->nbuckets = nbuckets;
	h->count = 0;
	return true;
}

void
dlm_hash_free(DLmHash *h, const DLmAllocator *a)
{
	if (h->buckets)
		a->free(a->arg, h->buckets, h->nbuckets * sizeof(DLmHashNode *));
	h->buckets = NULL;
	h->nbuckets = h->count = 0;
}

/*
 * Double the buckets.  All at once: a million names rehash in tens of
 * milliseconds, once (their hashes computed again); a failed allocation
 * keeps the old buckets.
 */
static void
hash_grow(DLmHash *h, const DLmAllocator *a)
{
	size_t		n = h->nbuckets * 2;
	DLmHashNode **b = a->alloc(a->arg, n * sizeof(DLmHashNode *));

	if (b == NULL)
		return;
	memset(b, 0, n * sizeof(DLmHashNode *));
	for (size_t i = 0; i < h->nbuckets; i++)
	{
		DLmHashNode *x = h->buckets[i];

		while (x)
		{
			DLmHashNode *next = x->next;
			size_t		j = h->hash_of(h->hash_arg, x) & (n - 1);

			x->next = b[j];
			b[j] = x;
			x = next;
		}
	}
	a->free(a->arg, h->buckets, h->nbuckets * sizeof(DLmHashNode *));
	h->buckets = b;
	h->nbuckets = n;
}

void
dlm_hash_insert(DLmHash *h, const DLmAllocator *a, DLmHashNode *n, uint64_t hash)
{
	size_t		i;

	if (h->count >= h->nbuckets)
		hash_grow(h, a);
	i = hash & (h->nbuckets - 1);
	n->next = h->buckets[i];
	h->buckets[i] = n;
	h->count++;
}

void
dlm_hash_remove(DLmHash *h, DLmHashNode *n)
{
	DLmHashNode **p = &h->buckets[h->hash_of(h->hash_arg, n) & (h->nbuckets - 1)];

	while (*p && *p != n)
		p = &(*p)->next;
	if (*p)
	{
		*p = n->next;
		h->count--;
	}
	n->next = NULL;
}

DLmHashNode *
dlm_hash_next(const DLmHash *h, size_t *bucket, DLmHashNode *n)
{
	if (n && n->next)
		return n->next;
	if (n)
		(*bucket)++;
	for (; *bucket < h->nbuckets; (*bucket)++)
		if (h->buckets[*bucket])
			return h->buckets[*bucket];
	return NULL;
}

/* ---------------------------------------------------------------------
 * The lease heap: insert, remove anywhere and the soonest are O(log n) at
 * worst (a pairing heap's first removal after a million inserts is O(n):
 * a stall just when mass expiry starts).
 * --------------------------------------------------------------------- */

#define ARITY 4

static bool
sooner(const DLmHeapItem *a, const DLmHeapItem *b)
{
	if (a->expires_at != b->expires_at)
		return a->expires_at < b->expires_at;
	return a->token < b->token;
}

static void
heap_set(DLmHeap *heap, int32_t i, DLmHeapItem item)
{
	heap->items[i] = item;
	item.holder->expiry_pos = i;
}

static void
sift_up(DLmHeap *heap, int32_t i)
{
	DLmHeapItem item = heap->items[i];

	while (i > 0)
	{
		int32_t		parent = (i - 1) / ARITY;

		if (!sooner(&item, &heap->items[parent]))
			break;
		heap_set(heap, i, heap->items[parent]);
		i = parent;
	}
	heap_set(heap, i, item);
}

static void
sift_down(DLmHeap *heap, int32_t i)
{
	DLmHeapItem item = heap->items[i];

	for (;;)
	{
		int32_t		first = ARITY * i + 1;
		int32_t		best = first;

		if (first >= heap->count)
			break;
		for (int32_t c = first + 1; c < first + ARITY && c < heap->count; c++)
			if (sooner(&heap->items[c], &heap->items[best]))
				best = c;
		if (!sooner(&heap->items[best], &item))
			break;
		heap_set(heap, i, heap->items[best]);
		i = best;
	}
	heap_set(heap, i, item);
}

void
dlm_heap_free(DLmHeap *heap, const DLmAllocator *a)
{
	if (heap->items)
		a->free(a->arg, heap->items, (size_t) heap->capacity * sizeof(DLmHeapItem));
	heap->items = NULL;
	heap->count = heap->capacity = 0;
}

bool
dlm_heap_add(DLmHeap *heap, const DLmAllocator *a, DLmHolder *h)
{
	if (heap->count == heap->capacity)
	{
		int32_t		cap = heap->capacity ? heap->capacity * 2 : 64;
		DLmHeapItem *items;

		if (cap < 0 || (size_t) cap > SIZE_MAX / sizeof(DLmHeapItem))
			return false;
		items = a->alloc(a->arg, (size_t) cap * sizeof(DLmHeapItem));
		if (items == NULL)
			return false;
		if (heap->count > 0)
			memcpy(items, heap->items, (size_t) heap->count * sizeof(DLmHeapItem));
		if (heap->items)
			a->free(a->arg, heap->items, (size_t) heap->capacity * sizeof(DLmHeapItem));
		heap->items = items;
		heap->capacity = cap;
	}
	heap->items[heap->count].expires_at = h->expires_at;
	heap->items[heap->count].token = h->token;
	heap->items[heap->count].holder = h;
	sift_up(heap, heap->count++);
	return true;
}

void
dlm_heap_remove(DLmHeap *heap, DLmHolder *h)
{
	int32_t		i = h->expiry_pos;
	DLmHeapItem last;

	if (i < 0 || i >= heap->count || heap->items[i].holder != h)
		return;
	h->expiry_pos = -1;
	last = heap->items[--heap->count];
	if (i == heap->count)
		return;
	heap_set(heap, i, last);
	if (i > 0 && sooner(&last, &heap->items[(i - 1) / ARITY]))
		sift_up(heap, i);
	else
		sift_down(heap, i);
}

void
dlm_heap_rebuild(DLmHeap *heap)
{
	for (int32_t i = 0; i < heap->count; i++)
	{
		heap->items[i].expires_at = heap->items[i].holder->expires_at;
		heap->items[i].token = heap->items[i].holder->token;
	}
	for (int32_t i = (heap->count - 2) / ARITY; i >= 0 && heap->count > 1; i--)
		sift_down(heap, i);
}
