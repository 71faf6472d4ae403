/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * dlock_sessions.c
 *		Sessions in the lock manager: a connection's identity in the
 *		picture, and the sessions that end without the server telling the
 *		plugin.
 *
 * Interface: see dlock_sessions.h.
 *
 * The state is the manager thread's alone, except the run's base, which is
 * set at the plugin's start and when this server becomes a replica (the
 * manager thread, dlock_load.c: refuse) and read by the wording of a
 * deadlock (the manager thread too).
 */
#define _GNU_SOURCE
#include "dlock_sessions.h"

#include <stdlib.h>
#include <sys/random.h>

#include "dlock_clock.h"
#include "dlock_store.h"

/*
 * How often the manager looks whether the sessions that hold or wait are
 * still there (those that end without a disconnect notification).
 */
#define SESSION_CHECK_MS 1000

static struct
{
	unsigned long long run_base;	/* this server run, in session_start */
	DLockTime	next_check;		/* monotonic: when to look at the sessions */
}			sessions;

/*
 * Sessions: a connection id and this server run.  The core keys a session
 * by a 32-bit pid and a 64-bit start; a connection id is 64 bits, so its
 * high bits go into the start, beside the run's random base: the rows of
 * an earlier run never match a session of this one.
 */
int32_t
session_pid(unsigned long long conn_id)
{
	return (int32_t) (conn_id & 0x7fffffffULL);
}

int64_t
session_start(unsigned long long conn_id)
{
	return (int64_t) (sessions.run_base | (conn_id >> 31));
}

unsigned long long
session_conn_id(int32_t pid, int64_t start)
{
	return (((unsigned long long) start & 0xffffffffULL) << 31) |
		(unsigned long long) (uint32_t) pid;
}

bool
session_of_this_run(int64_t start)
{
	return ((unsigned long long) start & ~0xffffffffULL) == sessions.run_base;
}

/* A fresh random run: the session rows of before are no session of it. */
int
new_run_base(void)
{
	unsigned long long r = 0;

	if (getrandom(&r, sizeof(r), 0) != (ssize_t) sizeof(r))
		return -1;
	/* a positive start whose low 32 bits carry the connection id's high bits */
	sessions.run_base = (r & 0x3fffffff00000000ULL) | 0x100000000ULL;
	return 0;
}

/* The start of this run's sessions whose connection id fits in 31 bits. */
int64_t
session_run_start(void)
{
	return (int64_t) sessions.run_base;
}

/* qsort/bsearch order of connection ids. */
int
cmp_conn_ids(const void *a, const void *b)
{
	unsigned long long x = *(const unsigned long long *) a;
	unsigned long long y = *(const unsigned long long *) b;

	return x < y ? -1 : x > y;
}

/* ------------------------------------------------------------------------
 * Sessions that end unannounced
 *
 * A client connection's end reaches the manager from the server's audit
 * notification (mgr_session_end).  A server-internal session that can call
 * the functions - an event of the event scheduler, a replication applier -
 * ends without one.  So every SESSION_CHECK_MS, while sessions hold or
 * wait for something, the manager lists them from the picture and asks the
 * server which connection ids are alive (one look at
 * information_schema.PROCESSLIST, where the store account, which has
 * PROCESS, sees every client connection and every server-internal session);
 * those missing end as a disconnect ends them.  The picture does not
 * change between the listing and the look (the manager thread alone
 * changes it), and connection ids are not reused within a server run: a
 * session missing from the look has ended.  Nothing of this is on a
 * call's path.
 * ------------------------------------------------------------------------ */
typedef struct SessionList
{
	unsigned long long *ids;
	size_t		n;
	size_t		cap;
	bool		oom;
} SessionList;

/* dlm_drop_sessions' callback, which lists the session owners and drops none. */
static bool
session_listed(void *arg, int32_t pid, int64_t start)
{
	SessionList *l = arg;

	if (!session_of_this_run(start) || l->oom)
		return true;
	if (l->n == l->cap)
	{
		size_t		cap = l->cap ? l->cap * 2 : 64;
		unsigned long long *n = realloc(l->ids, cap * sizeof(*n));

		if (n == NULL)
		{
			l->oom = true;
			return true;
		}
		l->ids = n;
		l->cap = cap;
	}
	l->ids[l->n++] = session_conn_id(pid, start);
	return true;
}

/* Whether it is time to look at the sessions. */
bool
sessions_due(const DLockManager *picture)
{
	return picture != NULL && mono_us() >= sessions.next_check;
}

/*
 * The sessions that hold or wait but are gone, appended to *gone
 * (malloc'ed, *ngone of them): the batch ends them.  How many were added.
 */
int
sessions_check(DLockManager *picture, unsigned long long **gone, size_t *ngone)
{
	SessionList l = {0};
	unsigned long long *alive = NULL;
	size_t		nalive = 0;
	int64_t		holders,
				waiting,
				kept;
	int			n = 0;
	DlockErr	e;

	sessions.next_check = mono_us() + (DLockTime) SESSION_CHECK_MS * 1000;
	dlm_sizes(picture, &holders, &waiting, &kept);
	if (holders == 0 && waiting == 0)
		return 0;
	(void) dlm_drop_sessions(picture, session_listed, &l);
	if (l.n > 0 && !l.oom)
	{
		if ((store_conn_id() == 0 && store_open(&e) != 0) ||
			store_alive(&alive, &nalive, &e) != 0)
			store_close();		/* looked at again next time; a batch reconnects */
		else
		{
			unsigned long long *g = realloc(*gone, (*ngone + l.n) * sizeof(*g));

			if (g != NULL)
			{
				*gone = g;
				qsort(alive, nalive, sizeof(*alive), cmp_conn_ids);
				for (size_t i = 0; i < l.n; i++)
					if (bsearch(&l.ids[i], alive, nalive, sizeof(*alive), cmp_conn_ids) == NULL)
					{
						g[(*ngone)++] = l.ids[i];
						n++;
					}
			}
		}
	}
	free(alive);
	free(l.ids);
	return n;
}

/* When the next look is due (monotonic µs). */
DLockTime
sessions_next_check(void)
{
	return sessions.next_check;
}
