/* SPDX-License-Identifier: PostgreSQL */
/*-------------------------------------------------------------------------
 *
 * dlock_stats.h
 *		The worker's side of dlock.stats (dlock_stats.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_STATS_H
#define DLOCK_STATS_H

#include "nodes/pg_list.h"
#include "dlock_lm.h"

extern void dlock_stats_worker_start(void);
extern void dlock_stats_withdrawals(DLockManager *lm, List *withdrawn);
extern void dlock_stats_batch(DLockManager *lm, int nfresh, bool wrote, int64 write_us,
							  TimestampTz batch_start);

#endif							/* DLOCK_STATS_H */
