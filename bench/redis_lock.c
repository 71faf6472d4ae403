/* SPDX-License-Identifier: PostgreSQL */
/*
 * redis_lock.c — the Redis anchor: SET key token NX PX + compare-and-delete
 * (the single-instance Redlock recipe), N clients, T seconds, one hiredis
 * connection per thread.
 *
 *   redis_lock PORT own|one CLIENTS SECONDS HOLD_MS
 *
 * own: each client its own key (uncontended pairs).  one: one shared key,
 * spinning on failed SETs (no FIFO: that is the point of the comparison).
 * Prints: pairs_per_s jain wait_p50_ms wait_p99_ms wait_max_ms failed_sets
 */
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_stats.h"

static const char *release_script =
	"if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

typedef struct Client
{
	pthread_t	thread;
	redisContext *c;
	int			id;
	long		count;
	long		failed;
	WaitLog		waits;
} Client;

static int	shared_key;
static double hold_ms;
static volatile int running = 1;
static volatile int started = 0;

static void *
client_main(void *arg)
{
	Client	   *cl = arg;
	char		key[64];
	char		token[64];
	long		seq = 0;

	snprintf(key, sizeof(key), shared_key ? "bench:one" : "bench:c%d", cl->id);
	while (!started)
		usleep(1000);
	while (running)
	{
		double		t0 = now_ms();
		redisReply *r;

		snprintf(token, sizeof(token), "%d-%ld", cl->id, seq++);
		for (;;)
		{
			r = redisCommand(cl->c, "SET %s %s NX PX 10000", key, token);
			if (r == NULL)
				exit(1);
			if (r->type == REDIS_REPLY_STATUS)
			{
				freeReplyObject(r);
				break;
			}
			freeReplyObject(r);
			cl->failed++;
			if (!running)
				return NULL;
		}
		waitlog_add(&cl->waits, now_ms() - t0);
		if (hold_ms > 0)
			usleep((useconds_t) (hold_ms * 1000));
		r = redisCommand(cl->c, "EVAL %s 1 %s %s", release_script, key, token);
		if (r == NULL)
			exit(1);
		freeReplyObject(r);
		cl->count++;
	}
	return NULL;
}

int
main(int argc, char **argv)
{
	int			n;
	double		seconds;
	long		failed = 0,
			   *counts;
	WaitLog    *logs;
	Client	   *cs;

	if (argc != 6)
	{
		fprintf(stderr, "usage: redis_lock PORT own|one CLIENTS SECONDS HOLD_MS\n");
		return 2;
	}
	shared_key = strcmp(argv[2], "one") == 0;
	n = atoi(argv[3]);
	seconds = atof(argv[4]);
	hold_ms = atof(argv[5]);
	cs = calloc(n, sizeof(Client));
	for (int i = 0; i < n; i++)
	{
		cs[i].id = i;
		cs[i].c = redisConnect("127.0.0.1", atoi(argv[1]));
		if (cs[i].c == NULL || cs[i].c->err)
		{
			fprintf(stderr, "redis connect failed\n");
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
		failed += cs[i].failed;
		redisFree(cs[i].c);
	}
	print_summary(counts, logs, n, seconds);
	printf(" %ld\n", failed);
	return 0;
}
