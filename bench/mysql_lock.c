/* SPDX-License-Identifier: PostgreSQL */
/*
 * mysql_lock.c — the MariaDB lock driver: one client tool for dlock's UDF
 * and its MariaDB anchors, N clients (one thread and one libmariadb
 * connection each, prepared statements) for T seconds.
 *
 *   mysql_lock SOCKET KIND own|one CLIENTS SECONDS HOLD_MS
 *
 * KIND:
 *   dlock    SELECT dlock_acquire(name, NULL) / SELECT dlock_release(name)
 *   dlockkey the same with an owner key of the client and a 30 s lease:
 *            dlock_acquire(name, NULL, 30, 'exclusive', key) /
 *            dlock_release(name, key) (committed durably before answered)
 *   getlock  SELECT GET_LOCK(name, 3600) / SELECT RELEASE_LOCK(name)
 *   table    a hand-rolled InnoDB lock table: INSERT IGNORE INTO
 *            dlock_bench.locks (name, owner) / DELETE ... WHERE name AND
 *            owner, autocommit; a refused INSERT is retried at once (no
 *            FIFO, no waking: that is the point of the comparison) and
 *            counted as a failed attempt
 *   select1  SELECT 1 twice (the round-trip ceiling)
 * own: each client its own name (uncontended pairs).  one: one shared name
 * (contended hand-off), held HOLD_MS between acquire and release.
 *
 * Prints: pairs_per_s jain wait_p50_ms wait_p99_ms wait_max_ms failed
 * (wait = time spent in the acquire, retries included).
 */
#include <mysql.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_stats.h"

typedef struct Client
{
	pthread_t	thread;
	int			id;
	MYSQL	   *my;
	long		count;
	long		failed;
	WaitLog		waits;
} Client;

static const char *sock;
static const char *kind;
static int	shared_name;
static double hold_ms;
static volatile int running = 1;
static volatile int started = 0;

static void
die(const char *what, const char *msg)
{
	fprintf(stderr, "mysql_lock: %s: %s\n", what, msg);
	exit(1);
}

static MYSQL_STMT *
prepare(MYSQL *my, const char *sql)
{
	MYSQL_STMT *st = mysql_stmt_init(my);

	if (st == NULL || mysql_stmt_prepare(st, sql, strlen(sql)) != 0)
		die(sql, st ? mysql_stmt_error(st) : mysql_error(my));
	return st;
}

/*
 * exec: run st with the name (and owner) bound; returns the first column
 * of the first row as an integer (-1 for NULL, 0 without rows) or, for
 * statements without a result, the number of affected rows.  A deadlock
 * or lock wait timeout returns -2 (the lock table's statements retry).
 */
static long long
exec(MYSQL_STMT *st, const char *name, const char *owner, const char *sql)
{
	MYSQL_BIND	p[2],
				r[1];
	unsigned long nlen = strlen(name),
				olen = owner ? strlen(owner) : 0;
	long long	v = 0;
	my_bool		isnull = 0;
	MYSQL_RES  *meta;

	memset(p, 0, sizeof(p));
	p[0].buffer_type = MYSQL_TYPE_STRING;
	p[0].buffer = (void *) name;
	p[0].buffer_length = nlen;
	p[0].length = &nlen;
	if (owner)
	{
		p[1].buffer_type = MYSQL_TYPE_STRING;
		p[1].buffer = (void *) owner;
		p[1].buffer_length = olen;
		p[1].length = &olen;
	}
	if (mysql_stmt_param_count(st) > 0 && mysql_stmt_bind_param(st, p) != 0)
		die(sql, mysql_stmt_error(st));
	if (mysql_stmt_execute(st) != 0)
	{
		unsigned int no = mysql_stmt_errno(st);

		if (no == 1213 || no == 1205)
			return -2;
		die(sql, mysql_stmt_error(st));
	}
	meta = mysql_stmt_result_metadata(st);
	if (meta == NULL)
		return (long long) mysql_stmt_affected_rows(st);
	memset(r, 0, sizeof(r));
	r[0].buffer_type = MYSQL_TYPE_LONGLONG;
	r[0].buffer = &v;
	r[0].is_null = &isnull;
	if (mysql_stmt_bind_result(st, r) != 0)
		die(sql, mysql_stmt_error(st));
	if (mysql_stmt_fetch(st) == 1)
		die(sql, mysql_stmt_error(st));
	mysql_stmt_free_result(st);
	mysql_free_result(meta);
	return isnull ? -1 : v;
}

static void *
client_main(void *arg)
{
	Client	   *c = arg;
	const char *acq_sql,
			   *rel_sql;
	MYSQL_STMT *acq,
			   *rel;
	char		name[64],
				owner[32];
	int			is_table = strcmp(kind, "table") == 0;
	int			is_select = strcmp(kind, "select1") == 0;
	int			is_keyed = strcmp(kind, "dlockkey") == 0;

	mysql_thread_init();
	if (strcmp(kind, "dlock") == 0)
	{
		acq_sql = "SELECT dlock_acquire(?, NULL)";
		rel_sql = "SELECT dlock_release(?)";
	}
	else if (is_keyed)
	{
		acq_sql = "SELECT dlock_acquire(?, NULL, 30, 'exclusive', ?)";
		rel_sql = "SELECT dlock_release(?, ?)";
	}
	else if (strcmp(kind, "getlock") == 0)
	{
		acq_sql = "SELECT GET_LOCK(?, 3600)";
		rel_sql = "SELECT RELEASE_LOCK(?)";
	}
	else if (is_table)
	{
		acq_sql = "INSERT IGNORE INTO dlock_bench.locks (name, owner) VALUES (?, ?)";
		rel_sql = "DELETE FROM dlock_bench.locks WHERE name = ? AND owner = ?";
	}
	else
		acq_sql = rel_sql = "SELECT 1";
	acq = prepare(c->my, acq_sql);
	rel = prepare(c->my, rel_sql);
	snprintf(name, sizeof(name), shared_name ? "bench/one" : "bench/c%d", c->id);
	snprintf(owner, sizeof(owner), "client-%d-%d", c->id, (int) getpid());

	while (!started)
		usleep(1000);
	while (running)
	{
		double		t0 = now_ms();
		long long	v;

		for (;;)
		{
			v = exec(acq, name, is_table || is_keyed ? owner : NULL, acq_sql);
			if (!is_table || v == 1)
				break;
			c->failed++;		/* the row is there: someone holds it */
			if (!running)
				goto out;
		}
		if (!is_select && !is_table && v <= 0)
			die(acq_sql, "not granted");
		waitlog_add(&c->waits, now_ms() - t0);
		if (hold_ms > 0)
			usleep((useconds_t) (hold_ms * 1000));
		while ((v = exec(rel, name, is_table || is_keyed ? owner : NULL, rel_sql)) == -2)
			;					/* a deadlock rolled the DELETE back: again */
		if (!is_select && v != 1)
			die(rel_sql, "not released");
		c->count++;
	}
out:
	mysql_stmt_close(acq);
	mysql_stmt_close(rel);
	mysql_thread_end();
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
	long		failed = 0;
	const char *user;

	if (argc != 7)
	{
		fprintf(stderr, "usage: mysql_lock SOCKET dlock|getlock|table|select1 own|one CLIENTS SECONDS HOLD_MS\n");
		return 2;
	}
	sock = argv[1];
	kind = argv[2];
	shared_name = strcmp(argv[3], "one") == 0;
	n = atoi(argv[4]);
	seconds = atof(argv[5]);
	hold_ms = atof(argv[6]);
	if (mysql_library_init(0, NULL, NULL) != 0)
		die("mysql_library_init", "failed");
	cs = calloc(n, sizeof(Client));
	/* BENCH_MY_USER: an account other than root (no password, the socket) */
	user = getenv("BENCH_MY_USER") ? getenv("BENCH_MY_USER") : "root";
	for (int i = 0; i < n; i++)
	{
		cs[i].id = i;
		cs[i].my = mysql_init(NULL);
		if (mysql_real_connect(cs[i].my, NULL, user, NULL, NULL, 0, sock, 0) == NULL)
			die("connect", mysql_error(cs[i].my));
	}
	if (strcmp(kind, "table") == 0 &&
		(mysql_query(cs[0].my, "CREATE DATABASE IF NOT EXISTS dlock_bench") != 0 ||
		 mysql_query(cs[0].my, "CREATE TABLE IF NOT EXISTS dlock_bench.locks ("
					 "name VARBINARY(1024) NOT NULL PRIMARY KEY, "
					 "owner VARBINARY(255) NOT NULL) ENGINE=InnoDB") != 0 ||
		 mysql_query(cs[0].my, "DELETE FROM dlock_bench.locks") != 0))
		die("create dlock_bench.locks", mysql_error(cs[0].my));
	for (int i = 0; i < n; i++)
		pthread_create(&cs[i].thread, NULL, client_main, &cs[i]);
	usleep(200000);				/* every client has prepared its statements */
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
		mysql_close(cs[i].my);
	}
	print_summary(counts, logs, n, seconds);
	printf(" %ld\n", failed);
	return 0;
}
