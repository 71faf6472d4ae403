/* SPDX-License-Identifier: PostgreSQL */
/*
 * test_util.c
 *		The random generator and the counting allocator of core/'s test
 *		programs (test_lm, fuzz_lm, test_model).
 *
 * Interface: see test_util.h.
 */
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* test_rand: splitmix64 (Steele, Lea and Flood), one state per sequence. */
uint64_t
test_rand(uint64_t *state)
{
	uint64_t	z = (*state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

int
test_rnd(uint64_t *state, int n)
{
	return (int) (test_rand(state) % (uint64_t) n);
}

/* The block's header: its size, aligned for anything. */
typedef union MemHdr
{
	size_t		size;
	long double ld;
	long long	ll;
	void	   *p;
} MemHdr;

/*
 * test_mem_alloc: a block counted in the TestMem 'arg', or NULL once
 * fail_after allocations were granted (each refusal counted).
 */
void *
test_mem_alloc(void *arg, size_t size)
{
	TestMem    *mm = arg;
	MemHdr	   *h;

	if (mm->fail_after >= 0 && mm->nalloc >= mm->fail_after)
	{
		mm->refused++;
		return NULL;
	}
	h = malloc(sizeof(MemHdr) + size);
	if (h == NULL)
	{
		fprintf(stderr, "out of real memory\n");
		abort();
	}
	mm->nalloc++;
	mm->live++;
	mm->live_bytes += (long) size;
	h->size = size;
	memset(h + 1, 0xa5, size);	/* the manager must not expect zeroes */
	return h + 1;
}

/* test_mem_free: the block back; a size other than its own is counted. */
void
test_mem_free(void *arg, void *ptr, size_t size)
{
	TestMem    *mm = arg;
	MemHdr	   *h;

	if (ptr == NULL)
	{
		mm->null_free++;
		return;
	}
	h = (MemHdr *) ptr - 1;
	if (h->size != size)
	{
		mm->bad_free++;
		if (mm->on_bad_free)
			mm->on_bad_free(mm->on_bad_free_arg, h->size, size);
	}
	mm->live--;
	mm->live_bytes -= (long) h->size;
	memset(h, 0x5a, sizeof(MemHdr) + h->size);
	free(h);
}
