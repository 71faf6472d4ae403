/* SPDX-License-Identifier: PostgreSQL */
/*
 * fake_store.h
 *		An in-memory store behind the service (dlock_service.h) for the core's
 *		tests: the adapter's callbacks (commit, publish, the clock, answers,
 *		loading the rows) over arrays, with commits that fail when told to.
 *		test_service.c and test_model.c's service comparison share it.
 *
 * Interface:
 *		fs, fs_reset			the one store of a test program, emptied
 *		fs_service_config		a DLsConfig whose callbacks are the store's
 *		fs_load					a new picture from the committed rows
 *								(dls_load); fs_drop frees one
 *		fs_row_find				a row by token
 *
 * Only holder rows are stored (the fake adapter keeps no waiter rows): a
 * reload brings back the holders and the ticket counter.  An answer is
 * pending until the service publishes it; then it is in fs.published.
 */
#ifndef FAKE_STORE_H
#define FAKE_STORE_H

#include "dlock_service.h"
#include "test_util.h"

#define FS_NREQ 200				/* requesters whose answers are kept */
#define FS_MAXROWS 4096

typedef struct FsRow
{
	char		name[64];
	char		key[64];
	bool		keyed;
	DLmHolderRow r;
} FsRow;

typedef struct FsAnswer
{
	bool		any;
	DLmAnswer	a;				/* reason and tokens point into this */
	char		reason[64];
	int64_t		tokens[DLOCK_MAX_MULTI];
} FsAnswer;

typedef struct FakeStore
{
	FsRow		store[FS_MAXROWS];	/* committed */
	int			nstore;
	int64_t		store_hi;		/* the committed ticket counter */
	FsRow		staged[FS_MAXROWS];	/* a commit in the making */
	int			nstaged;

	DLockTime	clk;			/* the clock the service reads */
	int			fail_commits;	/* the next commits to fail */
	DLockTime	commit_cost_per_row;	/* a commit moves the clock */
	int			commits;
	int			flushed;
	int			loads;
	int			publishes;
	char		last_revoked[16][64];	/* names announced by the last commit */
	int			nlast_revoked;

	FsAnswer	pending[FS_NREQ];	/* answered, not published yet */
	FsAnswer	published[FS_NREQ];
	bool		committed_since_answer;
	int			early_publish;	/* answers published before their commit */

	TestMem		mem;			/* the pictures' memory */
} FakeStore;

extern FakeStore fs;

extern void fs_reset(void);
extern void fs_service_config(DLsConfig *c);
extern int	fs_row_find(const FsRow *rows, int n, int64_t token);

/*
 * A new picture for s from the committed rows: cfg (answers routed through
 * s, the allocator fs.mem), sessions alive asks alive (NULL: all), a
 * restart's grace.  NULL and err if the load failed (the manager freed).
 */
extern DLockManager *fs_load(DLockService *s, DLmConfig *cfg, DLmSessionAliveFn alive,
							 void *arg, DLockTime grace_until, char *err, size_t errlen);
/* Frees a picture; every byte must come back (false if not). */
extern bool fs_drop(DLockManager *lm);

#endif							/* FAKE_STORE_H */
