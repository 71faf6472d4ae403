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

static const char *release_script =
	"if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

typedef struct Client
{
	pthread_t	thread;
	redisContext *c;
	int			id;
	long		count;
	long		failed;
	double	   *waits;
	long		nwaits;
	long		cap;
} Client;

static int	shared_key;
static double hold_ms;
static volatile int running = 1;
static volatile int started = 0;

static double
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000.0 + ts.tv_nsec / 1e6;
}

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
		if (cl->nwaits == cl->cap)
		{
			cl->cap = cl->cap ? cl->cap * 2 : 4096;
			cl->waits = realloc(cl->waits, sizeof(double) * cl->cap);
		}
		cl->waits[cl->nwaits++] = now_ms() - t0;
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

static int
cmp(const void *a, const void *b)
{
	double		x = *(const double *) a,
				y = *(const double *) b;

	return (x > y) - (x < y);
}

int
main(int argc, char **argv)
{
	int			n;
	double		seconds,
				sum = 0,
				sumsq = 0,
			   *all;
	long		total = 0,
				failed = 0,
				nw = 0;
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
	for (int i = 0; i < n; i++)
	{
		pthread_join(cs[i].thread, NULL);
		total += cs[i].count;
		failed += cs[i].failed;
		sum += cs[i].count;
		sumsq += (double) cs[i].count * cs[i].count;
		nw += cs[i].nwaits;
	}
	all = malloc(sizeof(double) * (nw ? nw : 1));
	nw = 0;
	for (int i = 0; i < n; i++)
	{
		memcpy(all + nw, cs[i].waits, sizeof(double) * cs[i].nwaits);
		nw += cs[i].nwaits;
		redisFree(cs[i].c);
	}
	qsort(all, nw, sizeof(double), cmp);
	printf("%.0f %.4f %.2f %.2f %.2f %ld\n", total / seconds,
		   sumsq > 0 ? sum * sum / (n * sumsq) : 0.0,
		   nw ? all[nw / 2] : 0.0, nw ? all[(long) (nw * 0.99)] : 0.0,
		   nw ? all[nw - 1] : 0.0, failed);
	return 0;
}
