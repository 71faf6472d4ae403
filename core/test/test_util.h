/* SPDX-License-Identifier: PostgreSQL */
/*
 * test_util.h
 *		What core/'s test programs share besides the check counter
 *		(test_check.h): one random generator and one counting allocator.
 *
 * Interface:
 *		test_rand, test_rnd		splitmix64 over a caller's state: the next
 *								64 bits, or a number in 0 .. n-1
 *		TestMem, TEST_MEM_INIT	an allocator's counts and its failure point
 *		test_mem_alloc, test_mem_free
 *								a DLmAllocator's functions (arg: a TestMem)
 *
 * The allocator keeps each block's size in a header and checks it when the
 * block is freed; it fills a new block with 0xa5 (the lock manager must
 * not expect zeroes) and a freed one with 0x5a (nor read what it freed).
 * A real malloc failure aborts the test: it is not a finding.
 */
#ifndef TEST_UTIL_H
#define TEST_UTIL_H

#include <stddef.h>
#include <stdint.h>

extern uint64_t test_rand(uint64_t *state);
extern int	test_rnd(uint64_t *state, int n);

typedef struct TestMem
{
	long		live;			/* allocations not given back */
	long		live_bytes;		/* their bytes */
	long		nalloc;			/* allocations granted */
	long		fail_after;		/* refuse from this many on; -1: never */
	long		refused;
	long		bad_free;		/* freed with another size than allocated */
	long		null_free;
	/* told of a bad free, if set */
	void		(*on_bad_free) (void *arg, size_t allocated, size_t given);
	void	   *on_bad_free_arg;
} TestMem;

#define TEST_MEM_INIT {0, 0, 0, -1, 0, 0, 0, NULL, NULL}

extern void *test_mem_alloc(void *arg, size_t size);
extern void test_mem_free(void *arg, void *ptr, size_t size);

#endif							/* TEST_UTIL_H */
