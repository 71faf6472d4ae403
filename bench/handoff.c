/* SPDX-License-Identifier: PostgreSQL */
/*
 * handoff.c — contended hand-off driver: N clients loop acquire -> hold ->
 * release on one lock for T seconds, each on its own libpq connection (one
 * thread each).  Prints one line of figures:
 *
 *   handoffs_per_s jain wait_p50_ms wait_p99_ms wait_max_ms
 *
 * Usage: handoff CONNINFO KIND CLIENTS SECONDS HOLD_MS
 *   KIND: dlock | advisory — all clients on one lock;
 *         dlock-own — each client its own name (uncontended acquire latency)
 * Wait time is measured around the acquire call with CLOCK_MONOTONIC.
 */
#include <libpq-fe.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_stats.h"

typedef struct Client
{
	pthread_t	thread;
	PGconn	   *conn;
	int			id;
	long		count;
	WaitLog		waits;
} Client;

static const char *kind;
static double hold_ms;
static volatile int running = 1;
static volatile int started = 0;

static void
run(PGconn *conn, const char *sql)
{
	PGresult   *r = PQexec(conn, sql);

	if (PQresultStatus(r) != PGRES_TUPLES_OK && PQresultStatus(r) != PGRES_COMMAND_OK)
	{
		fprintf(stderr, "%s: %s", sql, PQerrorMessage(conn));
		exit(1);
	}
	PQclear(r);
}

static void *
client_main(void *arg)
{
	Client	   *c = arg;
	char		acq[64];
	char		rel[64];

	if (strcmp(kind, "advisory") == 0)
	{
		strcpy(acq, "SELECT pg_advisory_lock(1)");
		strcpy(rel, "SELECT pg_advisory_unlock(1)");
	}
	else
	{
		char		name[32];

		if (strcmp(kind, "dlock-own") == 0)
			snprintf(name, sizeof(name), "bench/own/%d", c->id);
		else
			strcpy(name, "bench/one");
		snprintf(acq, sizeof(acq), "SELECT dlock_acquire('%s')", name);
		snprintf(rel, sizeof(rel), "SELECT dlock_release('%s')", name);
	}

	while (!started)
		usleep(1000);
	while (running)
	{
		double		t0 = now_ms();

		run(c->conn, acq);
		waitlog_add(&c->waits, now_ms() - t0);
		if (hold_ms > 0)
			usleep((useconds_t) (hold_ms * 1000));
		run(c->conn, rel);
		c->count++;
	}
	return NULL;
}

int
main(int argc, char **argv)
{
	int			n;
	double		seconds;
	Client	   *cs;
	long	   *counts;
	WaitLog    *logs;

	if (argc != 6)
	{
		fprintf(stderr, "usage: handoff CONNINFO dlock|dlock-own|advisory CLIENTS SECONDS HOLD_MS\n");
		return 2;
	}
	kind = argv[2];
	n = atoi(argv[3]);
	seconds = atof(argv[4]);
	hold_ms = atof(argv[5]);
	cs = calloc(n, sizeof(Client));
	for (int i = 0; i < n; i++)
	{
		cs[i].id = i;
		cs[i].conn = PQconnectdb(argv[1]);
		if (PQstatus(cs[i].conn) != CONNECTION_OK)
		{
			fprintf(stderr, "connect: %s", PQerrorMessage(cs[i].conn));
			return 1;
		}
		pthread_create(&cs[i].thread, NULL, client_main, &cs[i]);
	}
	started = 1;
	usleep((useconds_t) (seconds * 1e6));
	running = 0;
	counts = calloc(n, sizeof(long));
	logs = calloc(n, sizeof(WaitLog));
	for (int i = 0; i < n; i++)
	{
		pthread_join(cs[i].thread, NULL);
		counts[i] = cs[i].count;
		logs[i] = cs[i].waits;
		PQfinish(cs[i].conn);
	}
	print_summary(counts, logs, n, seconds);
	printf("\n");
	return 0;
}
