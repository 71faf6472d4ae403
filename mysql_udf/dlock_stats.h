/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * dlock_stats.h
 *		The statistics behind dlock_stats() (dlock_stats.c).
 *
 * Interface: stats_publish_locked; mgr_stats, mgr_stats_reset (dlock_mgr.h).
 */
#ifndef DLOCK_STATS_H
#define DLOCK_STATS_H

#include "dlock_types.h"

/*
 * After a batch: the manager's counters and the picture's sizes become
 * what dlock_stats() shows (handoff.mu held).
 */
extern void stats_publish_locked(const DLmCounters *counted, const DLockManager *picture,
								 DLockTime now);

#endif							/* DLOCK_STATS_H */
