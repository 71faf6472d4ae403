/* SPDX-License-Identifier: PostgreSQL */
/*
 * bench_stats.h — what the lock drivers (handoff.c, redis_lock.c) measure
 * alike: a monotonic clock, per-client wait logs, and the summary line
 * "rate jain wait_p50_ms wait_p99_ms wait_max_ms".
 */
#ifndef BENCH_STATS_H
#define BENCH_STATS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct WaitLog
{
	double	   *ms;
	long		n;
	long		cap;
} WaitLog;

static double
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000.0 + ts.tv_nsec / 1e6;
}

static void
waitlog_add(WaitLog *w, double ms)
{
	if (w->n == w->cap)
	{
		w->cap = w->cap ? w->cap * 2 : 4096;
		w->ms = realloc(w->ms, sizeof(double) * w->cap);
	}
	w->ms[w->n++] = ms;
}

static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a,
				y = *(const double *) b;

	return (x > y) - (x < y);
}

/* Print the summary (no newline) over n clients' counts and wait logs. */
static void
print_summary(const long *counts, const WaitLog *logs, int n, double seconds)
{
	double		sum = 0,
				sumsq = 0,
			   *all;
	long		nw = 0;

	for (int i = 0; i < n; i++)
	{
		sum += counts[i];
		sumsq += (double) counts[i] * counts[i];
		nw += logs[i].n;
	}
	all = malloc(sizeof(double) * (nw ? nw : 1));
	nw = 0;
	for (int i = 0; i < n; i++)
	{
		memcpy(all + nw, logs[i].ms, sizeof(double) * logs[i].n);
		nw += logs[i].n;
	}
	qsort(all, nw, sizeof(double), cmp_double);
	printf("%.0f %.4f %.2f %.2f %.2f", sum / seconds,
		   sumsq > 0 ? sum * sum / (n * sumsq) : 0.0,
		   nw ? all[nw / 2] : 0.0, nw ? all[(long) (nw * 0.99)] : 0.0,
		   nw ? all[nw - 1] : 0.0);
	free(all);
}

#endif							/* BENCH_STATS_H */
