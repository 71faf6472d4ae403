/* SPDX-License-Identifier: PostgreSQL */
/*
 * mem_lm.c
 *		What a held lease costs the lock manager in memory: N owner-keyed
 *		leases, each on its own name with its own owner key (one lock, one
 *		holder and one owner each, as in bench section 4), acquired and
 *		settled one by one.  Prints per lease the bytes the manager asked
 *		for, what malloc gave (malloc_usable_size) and glibc's in-use delta
 *		(mallinfo2 uordblks: the real figure, headers and rounding included,
 *		the hash tables and the lease heap too).
 *
 * Usage: test/mem_lm [N] (default 200000).  Not part of make check: a
 * measurement, not a test (make -C core mem).
 */
#include "dlock_lm.h"

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct Counts
{
	long long	requested;		/* bytes asked for, live */
	long long	usable;			/* malloc_usable_size of them, live */
	long long	nlive;			/* allocations live */
} Counts;

static void *
count_alloc(void *arg, size_t size)
{
	Counts	   *c = arg;
	void	   *p = malloc(size);

	if (p)
	{
		c->requested += size;
		c->usable += malloc_usable_size(p);
		c->nlive++;
	}
	return p;
}

static void
count_free(void *arg, void *ptr, size_t size)
{
	Counts	   *c = arg;

	c->requested -= size;
	c->usable -= malloc_usable_size(ptr);
	c->nlive--;
	free(ptr);
}

/* glibc's bytes in use: small chunks and those mmapped on their own */
static size_t
in_use(void)
{
	struct mallinfo2 mi = mallinfo2();

	return mi.uordblks + mi.hblkhd;
}

static void
ignore_answer(void *arg, int requester, const DLmAnswer *a)
{
	(void) arg;
	(void) requester;
	if (a->status != DLOCK_STATUS_GRANTED)
	{
		fprintf(stderr, "mem_lm: answer %d, not granted\n", a->status);
		exit(1);
	}
}

int
main(int argc, char **argv)
{
	long		n = argc > 1 ? atol(argv[1]) : 200000;
	Counts		c = {0, 0, 0};
	DLmConfig	cfg = {0};
	DLockManager *m;
	Counts		c0;
	size_t		in_use0;
	double		per;

	/* as the PostgreSQL worker: freed at once by the caller, no chunk list */
	cfg.alloc.alloc = count_alloc;
	cfg.alloc.free = count_free;
	cfg.alloc.arg = &c;
	cfg.untracked = true;
	cfg.seed[0] = 1;
	cfg.seed[1] = 2;
	cfg.nrequesters = 1;
	cfg.max_name_len = 200;
	cfg.ticket_reserve = 1000;
	cfg.answer = ignore_answer;
	m = dlm_create(&cfg);
	if (m == NULL || n < 1)
		return 1;
	c0 = c;
	in_use0 = in_use();
	for (long i = 1; i <= n; i++)
	{
		char		name[32],
					key[32];
		const char *names[1] = {name};
		DLmRequest	r = {0};

		/* bench section 4's names and keys */
		snprintf(name, sizeof(name), "scale/%ld", i);
		snprintf(key, sizeof(key), "scale-%ld", i);
		r.op = DLOCK_OP_ACQUIRE;
		r.requester = 0;
		r.owner_key = key;
		r.pid = 1000;
		r.session_start = 1;
		r.mode = DLOCK_MODE_EX;
		r.names = names;
		r.nnames = 1;
		r.ttl_us = INT64_C(3600000000);
		if (dlm_request(m, &r, i) != DLM_OK)
			return 1;
		dlm_settle(m);
	}
	per = 1.0 / n;
	printf("leases %ld: per lease %.1f B requested, %.1f B malloc usable, "
		   "%.2f allocations, %.1f B in use (mallinfo2: uordblks + hblkhd)\n",
		   n, (c.requested - c0.requested) * per, (c.usable - c0.usable) * per,
		   (c.nlive - c0.nlive) * per, (double) (in_use() - in_use0) * per);
	printf("sizeof DLmLock %zu, DLmOwner %zu, DLmHolder %zu, DLmWaiter %zu\n",
		   sizeof(struct DLmLock), sizeof(struct DLmOwner), sizeof(struct DLmHolder),
		   sizeof(struct DLmWaiter));
	dlm_destroy(m);
	return 0;
}
