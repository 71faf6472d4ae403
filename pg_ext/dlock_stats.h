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

extern void dlock_stats_worker_start(DLmCounters *carried);
extern void dlock_stats_publish(const DLmCounters *counted, DLockManager *lm);

#endif							/* DLOCK_STATS_H */
