/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * dlock_clock.h
 *		The lock manager's clocks: wall-clock microseconds for what outlives
 *		the server process (leases, kept places, timeouts in the picture),
 *		monotonic microseconds for the manager's own waits and pauses.
 *
 * Interface: now_us, mono_us, deadline_ts, pause_ms.
 */
#ifndef DLOCK_CLOCK_H
#define DLOCK_CLOCK_H

#include <time.h>

#include "dlock_lm.h"

/* Wall-clock microseconds: leases outlive the server process. */
static inline DLockTime
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (DLockTime) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static inline DLockTime
mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (DLockTime) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* The monotonic time us_from_now, for pthread_cond_timedwait (CLOCK_MONOTONIC conditions). */
static inline void
deadline_ts(struct timespec *ts, long long us_from_now)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += us_from_now / 1000000;
	ts->tv_nsec += (us_from_now % 1000000) * 1000;
	if (ts->tv_nsec >= 1000000000L)
	{
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

/* A pause of the manager thread between tries. */
static inline void
pause_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

#endif							/* DLOCK_CLOCK_H */
