/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * dlock_stats.c
 *		The statistics behind dlock_stats() and the view dlock.stats: the
 *		manager thread counts (dlock_mgr.c) and, after each batch, publishes
 *		a copy here, where the SQL functions read it.  A reset keeps a
 *		baseline: it takes effect at once, and the published counters only
 *		grow.
 *
 * Interface: see dlock_stats.h and dlock_mgr.h.
 *
 * Locking: every field under handoff.mu.
 */
#include "dlock_stats.h"

#include "dlock_clock.h"
#include "dlock_handoff.h"

static struct
{
	DLmCounters now;			/* as published after the last batch */
	DLmCounters base;			/* as they were at the last reset */
	DLockTime	since;			/* the load or the last reset, Unix µs */
	int64_t		holders,
				waiting,
				kept;
}			stats;

void
stats_publish_locked(const DLmCounters *counted, const DLockManager *picture,
					 DLockTime now)
{
	stats.now = *counted;
	if (stats.since == 0)
		stats.since = now;
	dlm_sizes(picture, &stats.holders, &stats.waiting, &stats.kept);
}

/*
 * The statistics since the start or the last reset: counters and sizes
 * (dlock_stat); reset: the counters count from zero again.
 */
void
mgr_stats(DLmCounters *out, int64_t *holders, int64_t *waiting, int64_t *kept,
		  long long *since_us)
{
	int64_t    *o = (int64_t *) out;
	DLmCounters base;
	const int64_t *b = (const int64_t *) &base;

	pthread_mutex_lock(&handoff.mu.m);
	*out = stats.now;
	base = stats.base;			/* with the counters: a reset may run meanwhile */
	*holders = stats.holders;
	*waiting = stats.waiting;
	*kept = stats.kept;
	*since_us = stats.since;
	pthread_mutex_unlock(&handoff.mu.m);
	for (size_t i = 0; i < sizeof(DLmCounters) / sizeof(int64_t); i++)
		o[i] -= b[i];
}

void
mgr_stats_reset(void)
{
	pthread_mutex_lock(&handoff.mu.m);
	stats.base = stats.now;
	stats.since = now_us();
	pthread_mutex_unlock(&handoff.mu.m);
}
