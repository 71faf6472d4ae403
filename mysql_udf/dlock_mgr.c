/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * dlock_mgr.c
 *		The lock manager thread of the MySQL/MariaDB plugin: started and
 *		stopped with the plugin, the single writer of the dlock tables.  Its
 *		loop, as PostgreSQL's worker's:
 *
 *		collect		take every new request, withdrawal, ended session and
 *					inspection from the hand-off (dlock_handoff.c)
 *		batch		hand them to the service (core/dlock_service.h), which
 *					decides them with the lock manager in its order and
 *					calls back:
 *		  commit	write the changed rows in one transaction
 *					(dlock_store.c), again on a new connection after a
 *					failure, and wait for a semi-synchronous replica's
 *					acknowledgement (dlock_semisync.c)
 *		  publish	run the inspections, hand the answers to the calls and
 *					wake them
 *
 * Requests that arrive while a batch commits form the next batch, so
 * commits are grouped.  Deferral, the expiry limit, the statistics and the
 * retry policy after a failure are the service's (core/README 18).
 * Without a picture (at the start, after a failed batch, after
 * dlock_reload()) the loop loads it first (dlock_load.c, through
 * dls_load); every second it also looks whether the sessions that hold or
 * wait are still connected (dlock_sessions.c: a server-internal session
 * ends without the disconnect notification).
 *
 * Interface: mgr_start, mgr_stop, mgr_reload (dlock_mgr.h).
 *
 * A caller's thread may run a batch itself while the manager sleeps
 * (batch_now_locked): the manager then waits for it (handoff.batch_taken).
 *
 * Locking: the manager never holds handoff.mu while it talks to the store
 * or decides; 'mgr' is the batch's thread's alone - the manager's, or a
 * caller's while handoff.batch_taken - but thread_started, under
 * handoff.mu ('carried' passes from one manager thread to the next of this
 * server run, which starts after the first ended).  So are the picture,
 * the account table, the quotas and the store's connections.
 */
#define _GNU_SOURCE
#include "dlock_mgr.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlock_access.h"
#include "dlock_clock.h"
#include "dlock_errors.h"
#include "dlock_handoff.h"
#include "dlock_load.h"
#include "dlock_store_local.h"
#include "dlock_semisync.h"
#include "dlock_sessions.h"
#include "dlock_stats.h"
#include "dlock_store.h"

static struct
{
	pthread_t	thread;
	bool		thread_started; /* handoff.mu */
	DLockService *service;
	DLockManager *picture;		/* the service's picture, ours to free; NULL: not loaded */
	bool		reload_requested;	/* dlock_reload(): rebuild after this batch */
	/* statistics counted by earlier manager threads of this server run */
	DLmCounters carried;
	/* the batch being decided */
	Slot	   *inspects;		/* run right after its commit */
	bool		in_batch[NSLOTS];	/* a new request of it */
	Slot	   *taken[NSLOTS];	/* its withdrawals as collected */
	DLsWithdrawal withdrawn[NSLOTS];
	DLsRequest *fresh[NSLOTS];
}			mgr;

/* What one pass took from the hand-off. */
typedef struct Collected
{
	Slot	   *fresh;			/* in submission order (->next) */
	Slot	  **withdrawn;		/* given up (mgr.taken) */
	int			nwithdrawn;
	Slot	   *inspects;		/* ->next */
	unsigned long long *gone;	/* connections ended (malloc'ed) */
	size_t		ngone;
} Collected;

static void *manager_main(void *arg);
static bool collect(Collected *c);
static void take_locked(Collected *c);
static bool work_waiting_locked(void);
static bool stack_room(void);
static bool load(Collected *c);
static void run_batch(Collected *c);
static void settings_apply(void);
static int	withdrawals(const Collected *c, DLockTime now);
static bool prepare(Slot *s);
static void batch_failed(const char *msg);
static long long sleep_us(DLockTime now);
static void requeue_locked(Slot *list);
static int	store_commit(void *arg, DLockManager *lm, const DLsCommit *c,
						 char *err, size_t errlen);
static void store_publish(void *arg, DLockManager *lm);
static DLockTime store_now(void *arg);
static int	batch_write(DLockManager *picture, DlockErr *err);
static int	store_retry(int (*ask) (DlockErr *err), const char *what, DlockErr *err);
static int	batch_outcome(DlockErr *err);
static void do_reload(const DLockManager *m, void *arg);

/* ------------------------------------------------------------------------
 * Start and stop (the plugin's init and deinit)
 * ------------------------------------------------------------------------ */
int
mgr_start(DlockErr *err)
{
	pthread_mutex_lock(&handoff.mu.m);
	if (mgr.thread_started)
	{
		pthread_mutex_unlock(&handoff.mu.m);
		return 0;
	}
	semisync_init();
	if (new_run_base() != 0 || handoff_init() != 0)
	{
		pthread_mutex_unlock(&handoff.mu.m);
		dlock_set_err(err, DLOCK_ER_UNKNOWN, "dlock: cannot set up the lock manager");
		return -1;
	}
	load_starting_locked();
	handoff.stopping = false;
	if (pthread_create(&mgr.thread, NULL, manager_main, NULL) != 0)
	{
		pthread_mutex_unlock(&handoff.mu.m);
		dlock_set_err(err, DLOCK_ER_UNKNOWN, "dlock: cannot start the lock manager thread");
		return -1;
	}
	/* shown by top -H, perf and the server's threads in a core dump */
	(void) pthread_setname_np(mgr.thread, "dlock_manager");
	mgr.thread_started = true;
	handoff.running = true;
	pthread_mutex_unlock(&handoff.mu.m);
	return 0;
}

void
mgr_stop(void)
{
	pthread_mutex_lock(&handoff.mu.m);
	if (!mgr.thread_started)
	{
		pthread_mutex_unlock(&handoff.mu.m);
		return;
	}
	handoff.stopping = true;
	handoff.running = false;
	pthread_cond_signal(&handoff.work_cond);
	pthread_mutex_unlock(&handoff.mu.m);
	pthread_join(mgr.thread, NULL);
	pthread_mutex_lock(&handoff.mu.m);
	mgr.thread_started = false;
	handoff_stop_locked();
	pthread_mutex_unlock(&handoff.mu.m);
}

/* ------------------------------------------------------------------------
 * The manager's loop
 * ------------------------------------------------------------------------ */
/* The manager cannot start: say why, and the calls waiting get an error. */
static void *
manager_fails(const char *why)
{
	fprintf(stderr, "dlock: lock manager: %s\n", why);
	pthread_mutex_lock(&handoff.mu.m);
	handoff.running = false;
	handoff_stop_locked();
	pthread_mutex_unlock(&handoff.mu.m);
	return NULL;
}

static void *
manager_main(void *arg)
{
	DLsConfig	cfg;
	char		msg[200];

	(void) arg;
	if (local_thread_begin(msg, sizeof(msg)) != 0)
		return manager_fails(msg);
	memset(&cfg, 0, sizeof(cfg));
	cfg.store.commit = store_commit;
	cfg.store.publish = store_publish;
	cfg.store.now = store_now;
	cfg.answer = on_answer;
	cfg.answer_arg = &mgr.service;
	cfg.counters = &mgr.carried;
	mgr.service = dls_create(&cfg);
	if (mgr.service == NULL)
	{
		local_thread_end();
		return manager_fails("out of memory");
	}
	for (;;)
	{
		Collected	c;

		if (!collect(&c))
			break;				/* stopping */
		if (mgr.picture == NULL && !load(&c))
			continue;
		run_batch(&c);
	}
	store_close();
	local_thread_end();
	picture_drop(&mgr.picture);
	pthread_mutex_lock(&handoff.mu.m);
	if (mgr.service)
		mgr.carried = *dls_counters(mgr.service);
	pthread_mutex_unlock(&handoff.mu.m);
	dls_destroy(mgr.service);
	mgr.service = NULL;
	return NULL;
}

/*
 * Wait for work and take it from the hand-off: every new request,
 * withdrawal, inspection and (with a picture) ended session.  False when
 * the manager is to stop.
 */
static bool
collect(Collected *c)
{
	pthread_mutex_lock(&handoff.mu.m);
	for (;;)
	{
		struct timespec ts;
		DLockTime	now;
		long long	us;

		if (handoff.batch_taken)
		{
			/* a caller runs a batch (batch_now_locked): the picture is its until it ends */
			handoff.manager_waits = true;
			pthread_cond_wait(&handoff.work_cond, &handoff.mu.m);
			handoff.manager_waits = false;
			continue;
		}
		if (handoff.stopping || mgr.service == NULL)
		{
			pthread_mutex_unlock(&handoff.mu.m);
			return false;
		}
		now = now_us();
		if (mgr.picture == NULL)
		{
			long long	wait_us;

			/* not loaded: load now, or after the pause of a failure */
			if (load_due(handoff.submit_head || handoff.inspect_head, &wait_us))
				break;
			deadline_ts(&ts, wait_us);
			pthread_cond_timedwait(&handoff.work_cond, &handoff.mu.m, &ts);
			continue;
		}
		settings_apply();
		if (work_waiting_locked() || dls_work_due(mgr.service, now) || sessions_due(mgr.picture))
			break;
		us = sleep_us(now);
		deadline_ts(&ts, us);
		handoff.manager_wakes_at = now + us;
		handoff.idle = !dls_isolating(mgr.service) && store_local_ready();
		pthread_cond_timedwait(&handoff.work_cond, &handoff.mu.m, &ts);
		handoff.idle = false;
	}
	take_locked(c);
	pthread_mutex_unlock(&handoff.mu.m);
	return true;
}

/*
 * The settings the picture keeps that SET GLOBAL may change: applied at
 * every wake-up of the manager (at least once a second), before it asks
 * whether work is due, so a shorter dlock_queue_row_delay makes the
 * waiters it passed due within a second.  (mu held, no caller running a
 * batch: the picture is the manager's.)
 */
static void
settings_apply(void)
{
	if (mgr.picture)
		dlm_set_queue_row_delay(mgr.picture, (int64_t) dlock_queue_row_delay_ms * 1000);
}

/* Whether calls, withdrawals, ended sessions or inspections wait (mu held). */
static bool
work_waiting_locked(void)
{
	return handoff.submit_head || handoff.withdraw_head || handoff.nended > 0 ||
		handoff.inspect_head;
}

/* Take the work from the hand-off into c (mu held). */
static void
take_locked(Collected *c)
{
	Slot	   *listed;

	memset(c, 0, sizeof(*c));
	c->fresh = handoff.submit_head;
	handoff.submit_head = handoff.submit_tail = NULL;
	for (Slot *s = c->fresh; s; s = s->next)
		s->state = SLOT_ACCEPTED;
	/* an array: a slot answered and reused meanwhile may be listed anew */
	listed = handoff.withdraw_head;
	handoff.withdraw_head = NULL;
	c->withdrawn = mgr.taken;
	for (Slot *s = listed; s && c->nwithdrawn < NSLOTS; s = s->wnext)
	{
		s->withdraw_listed = false;
		c->withdrawn[c->nwithdrawn++] = s;
	}
	c->inspects = handoff.inspect_head;
	handoff.inspect_head = handoff.inspect_tail = NULL;
	for (Slot *s = c->inspects; s; s = s->next)
		s->state = SLOT_ACCEPTED;
	if (mgr.picture && handoff.nended > 0)
	{
		c->gone = malloc(handoff.nended * sizeof(*c->gone));
		if (c->gone)
		{
			memcpy(c->gone, handoff.ended, handoff.nended * sizeof(*c->gone));
			c->ngone = handoff.nended;
			handoff.nended = 0;
		}
	}
}

/*
 * A call was submitted (mu held).  Waking the manager thread and being
 * woken by it costs two thread switches per call, most of a hand-off's
 * time on a small machine; so when the manager sleeps with nothing to do
 * and the batch's rows go over the local connection (no binary log: no
 * socket, no replica to wait for), the caller's thread runs the batch
 * itself, the manager's code on the manager's picture and connections,
 * while the manager waits (batch_taken).  Calls that arrive meanwhile wake
 * the manager as before, so batches under load are still grouped.  A
 * thread whose stack is short (the server's thread_stack) leaves the batch
 * to the manager.
 */
void
batch_now_locked(void)
{
	Collected	c;
	DLockTime	wake;
	bool		lost;
	bool		ready;

	if (!handoff.idle || handoff.batch_taken || handoff.stopping || !stack_room())
	{
		pthread_cond_signal(&handoff.work_cond);
		return;
	}
	handoff.batch_taken = true;
	take_locked(&c);
	pthread_mutex_unlock(&handoff.mu.m);
	run_batch(&c);
	lost = mgr.picture == NULL;
	wake = lost ? 0 : dls_next_wake(mgr.service);
	ready = store_local_ready();
	pthread_mutex_lock(&handoff.mu.m);
	handoff.batch_taken = false;
	if (!ready)
		handoff.idle = false;	/* the local connection is due to be renewed: the manager's */
	/* the manager looks again if there is work, or a deadline before its own */
	if (handoff.manager_waits || lost || work_waiting_locked() ||
		(wake != 0 && wake < handoff.manager_wakes_at))
		pthread_cond_signal(&handoff.work_cond);
}

/* A batch's stack: our frames and the server's for a local statement, with room to spare. */
#define BATCH_STACK (128 * 1024)

/* Whether this thread's stack has room for a batch. */
static bool
stack_room(void)
{
	static __thread char *low;	/* the lowest address of this thread's stack */
	char		here;

	if (low == NULL)
	{
		pthread_attr_t a;
		void	   *addr;
		size_t		size;

		if (pthread_getattr_np(pthread_self(), &a) != 0)
			return false;
		if (pthread_attr_getstack(&a, &addr, &size) == 0)
			low = addr;
		pthread_attr_destroy(&a);
		if (low == NULL)
			return false;
	}
	return (uintptr_t) &here - (uintptr_t) low > BATCH_STACK;
}

/*
 * No picture: load it (dlock_load.c).  False if it could not be loaded:
 * the calls taken then wait for the next try or got the error.
 */
static bool
load(Collected *c)
{
	DlockErr	err;
	DLsFailure	f;
	int			rc = reload(mgr.service, &mgr.picture, &err);

	if (rc == -3)
	{
		refuse(&err, c->fresh, c->inspects);
		return false;
	}
	if (rc != 0)
	{
		/* the service paces the tries and says which are worth a log line */
		dls_fail(mgr.service, &f);
		load_failed(rc, &err, &f, c->fresh, c->inspects);
		return false;
	}
	load_succeeded();
	return true;
}

/*
 * One batch: the collected slots as the service takes them, then the
 * service decides, commits (store_commit) and publishes (store_publish).
 * A withdrawal of a request not decided yet goes to the service, which
 * answers it CANCELED, unless it asked to keep its place: then it runs and
 * is withdrawn right after (withdraw_after).  While the service isolates
 * (after a failure) the batch takes one new request.
 */
static void
run_batch(Collected *c)
{
	DLsBatch	b;
	DLsSessionEnd *ended = NULL;
	bool		answered = false;
	char		err[sizeof(((DlockErr *) 0)->msg)];
	DLsOutcome	outcome;
	DLockTime	now = now_us();

	memset(&b, 0, sizeof(b));
	if (dls_isolating(mgr.service) && c->fresh && c->fresh->next)
	{
		pthread_mutex_lock(&handoff.mu.m);
		requeue_locked(c->fresh->next);
		c->fresh->next = NULL;
		pthread_mutex_unlock(&handoff.mu.m);
	}
	for (Slot *s = c->fresh; s; s = s->next)
		mgr.in_batch[s->index] = true;

	/* withdrawals, all at once */
	b.nwithdrawn = withdrawals(c, now);
	b.withdrawn = mgr.withdrawn;

	/* ended sessions: those the server told of, and those found gone */
	if (sessions_due(mgr.picture))
		(void) sessions_check(mgr.picture, &c->gone, &c->ngone);
	if (c->ngone > 0 && (ended = calloc(c->ngone, sizeof(*ended))) != NULL)
	{
		for (size_t i = 0; i < c->ngone; i++)
		{
			ended[i].pid = session_pid(c->gone[i]);
			ended[i].session_start = session_start(c->gone[i]);
			ended[i].requester = DLM_NOBODY;
		}
		b.ended = ended;
		b.nended = (int) c->ngone;
	}

	/* the new requests in submission order; some the adapter answers itself */
	b.fresh = mgr.fresh;
	for (Slot *s = c->fresh; s; s = s->next)
	{
		if (!mgr.in_batch[s->index])
			continue;
		mgr.in_batch[s->index] = false;
		if (prepare(s))
			mgr.fresh[b.nfresh++] = &s->ds;
		else
			answered = true;
	}
	/* an inspection waits for the commit; so do answers given here */
	b.no_defer = c->inspects != NULL || answered;
	mgr.inspects = c->inspects;

	outcome = dls_batch(mgr.service, &b, err, sizeof(err));
	free(ended);
	free(c->gone);
	if (outcome == DLS_FAILED)
	{
		batch_failed(err);
		mgr.inspects = NULL;
		return;
	}
	mgr.inspects = NULL;
	{
		int			failures = dls_recovered(mgr.service);

		if (failures > 5)
			fprintf(stderr, "dlock: lock manager works again after %d failed attempts\n",
					failures);
	}
	pthread_mutex_lock(&handoff.mu.m);
	if (outcome == DLS_DONE)
		stats_publish_locked(dls_counters(mgr.service), mgr.picture, now_us());
	if (mgr.reload_requested)
	{
		/* the tables were replaced (a re-install, a restore): read them again */
		mgr.reload_requested = false;
		picture_drop(&mgr.picture);
		store_close();
		resubmit_locked(false, "");
	}
	pthread_mutex_unlock(&handoff.mu.m);
}

/*
 * The batch's withdrawals into mgr.withdrawn; how many.  A new request of
 * this batch given up with keep_place runs and is withdrawn right after
 * (withdraw_after); one left queued by isolation is listed again.
 */
static int
withdrawals(const Collected *c, DLockTime now)
{
	int			n = 0;
	bool		relist = false;

	for (int i = 0; i < c->nwithdrawn; i++)
	{
		Slot	   *s = c->withdrawn[i];
		DLsWithdrawal *w;

		if (s->state == SLOT_SUBMITTED)
			relist = true;		/* left for a later batch (isolation): below */
		if (s->state != SLOT_ACCEPTED || s->inspect_fn)
			continue;			/* answered meanwhile, or not in this batch */
		if (mgr.in_batch[s->index] && s->call.keep_place)
		{
			s->ds.withdraw_after = true;	/* a kept place is queued first, then kept */
			continue;
		}
		mgr.in_batch[s->index] = false;	/* never runs */
		w = &mgr.withdrawn[n++];
		w->requester = s->index;
		w->timed_out = s->ds.q.timeout_at != 0 && now >= s->ds.q.timeout_at;
	}
	if (!relist)
		return n;
	/* the requests isolation left queued keep their callers' withdrawals */
	pthread_mutex_lock(&handoff.mu.m);
	for (int i = 0; i < c->nwithdrawn; i++)
	{
		Slot	   *s = c->withdrawn[i];

		if (s->state == SLOT_SUBMITTED && s->withdraw && !s->withdraw_listed)
		{
			s->withdraw_listed = true;
			s->wnext = handoff.withdraw_head;
			handoff.withdraw_head = s;
		}
	}
	pthread_mutex_unlock(&handoff.mu.m);
	return n;
}

/*
 * A new request as the service takes it: the caller's session, its
 * account's role and quotas.  False if the adapter answered it already
 * (out of memory for the account's name, a quota of 0).
 */
static bool
prepare(Slot *s)
{
	DLmRequest *q = &s->ds.q;
	const Quota *quota;

	q->pid = session_pid(s->conn_id);
	q->session_start = session_start(s->conn_id);
	q->max_ttl_us = (int64_t) dlock_max_ttl_seconds * 1000000;
	q->role = accounts_intern(s->account, strlen(s->account));
	if (q->role == 0)
	{
		mark_pending(s);
		memset(&s->pres, 0, sizeof(s->pres));
		s->pres.status = DLOCK_STATUS_ERROR;
		dlock_set_err(&s->perr, DLOCK_ER_UNKNOWN, "%s: out of memory", s->call.fn);
		return false;
	}
	q->role_max_locks = q->owner_max_locks = 0;
	q->role_max_bytes = q->owner_max_bytes = 0;
	/* the namespace was checked by the caller (mgr_namespace_check) */
	if (q->op != DLOCK_OP_ACQUIRE && q->op != DLOCK_OP_TRY &&
		q->op != DLOCK_OP_ACQUIRE_ALL)
		return true;
	quota = q->any_role ? NULL : quota_of(s->account);
	if (quota == NULL)
		return true;
	/* < 0: no limit (NULL); the core's 0 is no limit, so a limit of 0 is refused here */
	if (quota->limits[0] == 0 || quota->limits[1] == 0 ||
		quota->limits[2] == 0 || quota->limits[3] == 0)
	{
		mark_pending(s);
		memset(&s->pres, 0, sizeof(s->pres));
		s->pres.status = DLOCK_STATUS_ERROR;
		describe_error(s, quota->limits[0] == 0 || quota->limits[2] == 0 ?
					   DLM_ERR_ROLE_QUOTA : DLM_ERR_OWNER_QUOTA, mgr.picture,
					   &s->perr);
		return false;
	}
	q->role_max_locks = quota->limits[0] > 0 ? quota->limits[0] : 0;
	q->owner_max_locks = quota->limits[1] > 0 ? quota->limits[1] : 0;
	q->role_max_bytes = quota->limits[2] > 0 ? quota->limits[2] : 0;
	q->owner_max_bytes = quota->limits[3] > 0 ? quota->limits[3] : 0;
	return true;
}

/*
 * The batch failed (dls_fail: the pause, whether to log, the request that
 * failed alone): the picture is rebuilt from the tables.  The calls this
 * batch decided get the error (part of the batch may be in the tables, and
 * deciding them again could do it twice), so does the request that failed
 * alone; those still waiting are decided again.
 */
static void
batch_failed(const char *msg)
{
	DLsFailure	f;

	dls_fail(mgr.service, &f);
	if (f.log)
		fprintf(stderr, "dlock: lock manager batch failed (%d in a row): %s\n",
				f.failures, msg);
	store_rollback();
	store_close();
	picture_drop(&mgr.picture);
	pthread_mutex_lock(&handoff.mu.m);
	if (f.failed_requester >= 0 && f.failed_requester < NSLOTS &&
		handoff.slots[f.failed_requester].state == SLOT_ACCEPTED)
		answer_error_locked(&handoff.slots[f.failed_requester], DLOCK_ER_UNKNOWN, msg);
	resubmit_locked(false, msg);
	pthread_mutex_unlock(&handoff.mu.m);
	pause_ms(f.pause_ms);
}

/* When the loop must look again at the latest, µs from now. */
static long long
sleep_us(DLockTime now)
{
	long long	us = 1000000;
	DLockTime	t = dls_next_wake(mgr.service);

	if (t != 0 && t - now < us)
		us = t - now;
	t = sessions_next_check() - mono_us();
	if (t < us)
		us = t;
	return us < 0 ? 0 : us;
}

/*
 * New requests a batch that isolates leaves for later: back to the front
 * of the submit queue, in their order (run_batch lists their withdrawals
 * again).  (mu held)
 */
static void
requeue_locked(Slot *list)
{
	Slot	   *tail = NULL;

	for (Slot *s = list; s; s = s->next)
	{
		s->state = SLOT_SUBMITTED;
		tail = s;
	}
	if (tail == NULL)
		return;
	tail->next = handoff.submit_head;
	if (handoff.submit_head == NULL)
		handoff.submit_tail = tail;
	handoff.submit_head = list;
}

/* ------------------------------------------------------------------------
 * The service's callbacks: commit, publish, the clock
 * ------------------------------------------------------------------------ */

/*
 * The batch's rows (batch_write, with the semi-synchronous confirmation);
 * a load's first commit writes once (a failure reloads anyway).  Names an
 * administrator released have nobody to be announced to here.
 */
static int
store_commit(void *arg, DLockManager *lm, const DLsCommit *c, char *err, size_t errlen)
{
	DlockErr	e;
	int			rc;

	(void) arg;
	e.msg[0] = '\0';
	rc = c->load ? store_write_batch(lm, &e) : batch_write(lm, &e);
	if (rc == 0)
		return 0;
	snprintf(err, errlen, "%s", e.msg);
	return -1;
}

/* The batch committed: look at the picture for the inspections, then answer. */
static void
store_publish(void *arg, DLockManager *lm)
{
	(void) arg;
	for (Slot *s = mgr.inspects; s; s = s->next)
		s->inspect_fn(lm, s->inspect_arg);
	pthread_mutex_lock(&handoff.mu.m);
	publish_locked();
	for (Slot *s = mgr.inspects; s; s = s->next)
	{
		memset(&s->res, 0, sizeof(s->res));
		s->err.code = 0;
		s->state = SLOT_DONE;
		pthread_cond_signal(&s->cond.c);
	}
	pthread_mutex_unlock(&handoff.mu.m);
	mgr.inspects = NULL;
}

static DLockTime
store_now(void *arg)
{
	(void) arg;
	return now_us();
}

/*
 * Write the batch decided on the picture, again on a new connection after
 * a failure (a KILL of the store connection, a restart of InnoDB's
 * recovery), for up to LOAD_WAIT_US.  Writing again is safe: phases 1 and
 * 3 are deletes and upserts by key, and the durable phase 2 is written
 * again only when it surely did not commit - so a batch's decisions are
 * never taken twice (deciding its calls again on a picture rebuilt from
 * half-written tables answered a release "not held" and granted a lock a
 * second time to its holder).  0, or -1 with err when the store keeps
 * failing: part of the batch may be in the tables.
 */
static int
batch_write(DLockManager *picture, DlockErr *err)
{
	DLockTime	until = mono_us() + LOAD_WAIT_US;
	long		pause = RETRY_MIN_MS;
	bool		durable_in = false;
	int			tries = 0;
	unsigned long no_tx = semisync_enabled() ? semisync_no_tx() : 0;

	/* semi-sync turned on or off since the connection was made: a new one (store_open) */
	if (store_conn_id() != 0 && store_patient() != semisync_enabled())
		store_close();
	for (;;)
	{
		int			rc;

		if (store_conn_id() == 0 && store_open(err) != 0)
			rc = -1;
		else if (durable_in)
			rc = store_finish_batch(err) == 0 ? 0 : -1;
		else
			rc = store_write_batch(picture, err);
		if (rc == 0)
		{
			if (tries > 0)
				fprintf(stderr, "dlock: lock manager wrote a batch after %d failed "
						"tries\n", tries);
			return semisync_confirm(no_tx, err);
		}
		if (rc == -2)
		{
			/* the commit's answer was lost: applied or not? */
			int			applied = batch_outcome(err);

			if (applied < 0)
				return -1;
			durable_in = applied == 1;
			tries++;
			continue;
		}
		if (rc == -3)
			durable_in = true;
		/* read_only now (a demotion): no use writing again */
		if (store_last_errno() == DLOCK_ER_READ_ONLY)
		{
			store_rollback();
			return -1;
		}
		if (tries++ == 0)
			fprintf(stderr, "dlock: lock manager writes a batch again: %s\n", err->msg);
		store_rollback();
		store_close();
		if (mono_us() >= until || handoff.stopping)
			return -1;
		pause_ms(pause);
		if (pause < 500)
			pause *= 2;
	}
}

/*
 * Ask the store something on a fresh connection, again and again with
 * growing pauses for up to LOAD_WAIT_US: ask returns >= 0 for an answer,
 * < 0 to try again.  The answer, or -1 with err (logged as 'what').
 */
static int
store_retry(int (*ask) (DlockErr *err), const char *what, DlockErr *err)
{
	DLockTime	until = mono_us() + LOAD_WAIT_US;
	long		pause = RETRY_MIN_MS;

	for (;;)
	{
		DlockErr	e;
		int			r = -1;

		store_close();
		if (store_open(&e) == 0)
			r = ask(&e);
		if (r >= 0)
			return r;
		if (mono_us() >= until || handoff.stopping)
		{
			fprintf(stderr, "dlock: lock manager cannot %s: %s\n", what, e.msg);
			*err = e;
			return -1;
		}
		pause_ms(pause);
		if (pause < 500)
			pause *= 2;
	}
}

/*
 * After a batch whose connection was lost at its commit: whether its
 * durable part was applied (1) or not (0); -1 if the store could not be
 * asked.  The connection store_retry opened stays open.
 */
static int
batch_outcome(DlockErr *err)
{
	return store_retry(store_batch_applied, "tell whether a batch was applied", err);
}

/* ------------------------------------------------------------------------
 * dlock_reload(): the tables were replaced (a re-install, a restore)
 * ------------------------------------------------------------------------ */
int
mgr_reload(const char *fn, DlockErr *err)
{
	return mgr_inspect(fn, do_reload, NULL, err);
}

/* An inspection: the picture is dropped after this batch and loaded again. */
static void
do_reload(const DLockManager *m, void *arg)
{
	(void) m;
	(void) arg;
	mgr.reload_requested = true;
}
