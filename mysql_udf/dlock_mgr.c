/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * dlock_mgr.c
 *		The lock manager thread of the MySQL/MariaDB plugin: started and
 *		stopped with the plugin, the single writer of the dlock tables.  Its
 *		loop, as PostgreSQL's worker's:
 *
 *		collect		take every new request, withdrawal, ended session and
 *					inspection from the hand-off (dlock_handoff.c)
 *		decide		hand them, and lease expiry, to the core lock manager
 *					(core/dlock_lm.h), which answers and lists what changed
 *		store		write the changed rows in one transaction
 *					(dlock_store.c), again on a new connection after a
 *					failure, and wait for a semi-synchronous replica's
 *					acknowledgement (dlock_semisync.c)
 *		publish		only then hand the answers to the calls and wake them
 *
 * Requests that arrive while a batch commits form the next batch, so
 * commits are grouped.  A batch that answers nobody (a waiter announced, a
 * session cleaned up) may leave its writes to the next batch's commit, for
 * at most DEFER_MS.  Without a picture (at the start, after a failed batch,
 * after dlock_reload()) the loop loads it first (dlock_load.c); every
 * second it also looks whether the sessions that hold or wait are still
 * connected (dlock_sessions.c: a server-internal session ends without the
 * disconnect notification).
 *
 * Interface: mgr_start, mgr_stop, mgr_reload (dlock_mgr.h).
 *
 * Locking: the manager never holds handoff.mu while it talks to the store
 * or decides; 'mgr' is the manager thread's alone, but thread_started,
 * under handoff.mu.  The picture, the account table and the quotas are the
 * manager thread's alone.
 */
#define _GNU_SOURCE
#include "dlock_mgr.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlock_access.h"
#include "dlock_clock.h"
#include "dlock_errors.h"
#include "dlock_handoff.h"
#include "dlock_load.h"
#include "dlock_semisync.h"
#include "dlock_sessions.h"
#include "dlock_stats.h"
#include "dlock_store.h"

/* A batch that answers nobody may wait this long for the next commit. */
#define DEFER_MS 5
#define MAX_DEFERRED 64
/* Leases expired per batch at most (the rest in the next batches). */
#define EXPIRE_PER_BATCH 2000
/* A batch that failed this often in a row answers its requests with the error. */
#define MAX_BATCH_FAILURES 3

static struct
{
	pthread_t	thread;
	bool		thread_started; /* handoff.mu */
	DLockManager *picture;		/* NULL: not loaded */
	int			batch_failures; /* batches failed in a row */
	int			deferred;		/* batches whose writes wait for the next commit */
	DLockTime	deferred_since;
	bool		reload_requested;	/* dlock_reload(): rebuild after this batch */
	/* statistics, published after each batch (dlock_stats.c) */
	DLmCounters counted;
	int			stats_fresh;	/* new requests since the last publish */
}			mgr;

static void *manager_main(void *arg);
static long long sleep_us(DLockTime now);
static bool work_due(DLockTime now);
static void execute(Slot *s, DLockTime now);
static bool batch_changed(void);
static int	batch_write(DlockErr *err);
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
static void *
manager_main(void *arg)
{
	DlockErr	err;

	(void) arg;
	for (;;)
	{
		Slot	   *fresh = NULL, *fresh_tail = NULL;
		Slot	   *withdrawn, *inspects;
		unsigned long long *gone = NULL;
		size_t		ngone = 0;
		DLockTime	now;
		int			expired;
		int			rows_due;
		bool		failed = false;
		bool		wrote = false;
		DLockTime	began;
		DLockTime	write_began;
		int64_t		write_us = 0;

		/* collect */
		pthread_mutex_lock(&handoff.mu.m);
		for (;;)
		{
			struct timespec ts;

			if (handoff.stopping)
				break;
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
			if (handoff.submit_head || handoff.withdraw_head || handoff.nended > 0 || handoff.inspect_head ||
				work_due(now) || sessions_due(mgr.picture))
				break;
			deadline_ts(&ts, sleep_us(now));
			pthread_cond_timedwait(&handoff.work_cond, &handoff.mu.m, &ts);
		}
		if (handoff.stopping)
		{
			pthread_mutex_unlock(&handoff.mu.m);
			break;
		}
		fresh = handoff.submit_head;
		fresh_tail = handoff.submit_tail;
		handoff.submit_head = handoff.submit_tail = NULL;
		for (Slot *s = fresh; s; s = s->next)
		{
			s->state = SLOT_ACCEPTED;
			mgr.stats_fresh++;
		}
		withdrawn = handoff.withdraw_head;
		handoff.withdraw_head = NULL;
		for (Slot *s = withdrawn; s; s = s->wnext)
			s->withdraw_listed = false;
		inspects = handoff.inspect_head;
		handoff.inspect_head = handoff.inspect_tail = NULL;
		for (Slot *s = inspects; s; s = s->next)
			s->state = SLOT_ACCEPTED;
		if (mgr.picture && handoff.nended > 0)
		{
			gone = malloc(handoff.nended * sizeof(*gone));
			if (gone)
			{
				memcpy(gone, handoff.ended, handoff.nended * sizeof(*gone));
				ngone = handoff.nended;
				handoff.nended = 0;
			}
		}
		pthread_mutex_unlock(&handoff.mu.m);
		(void) fresh_tail;

		if (mgr.picture == NULL)
		{
			int			rc = reload(&mgr.picture, &err);

			if (rc == -3)
			{
				refuse(&err, fresh, inspects);
				continue;
			}
			if (rc != 0)
			{
				load_failed(rc, &err, fresh, inspects);
				continue;
			}
			load_succeeded();
		}

		/* decide: withdrawals first, then ended sessions, leases, requests */
		now = now_us();
		if (sessions_due(mgr.picture) && sessions_check(mgr.picture, now) == 0 && fresh == NULL &&
			withdrawn == NULL && inspects == NULL && ngone == 0 && !work_due(now))
			continue;			/* nothing to do: no batch */
		{
			int			ids[NSLOTS];
			int			n = 0;

			for (Slot *s = withdrawn; s; s = s->wnext)
			{
				if (s->state != SLOT_ACCEPTED || s->pending)
					continue;
				/* a request not decided yet never runs */
				bool		is_fresh = false;

				for (Slot *f = fresh; f && !is_fresh; f = f->next)
					is_fresh = f == s;
				if (is_fresh)
				{
					/* a kept place is queued first, then kept (below) */
					if (s->call.keep_place)
					{
						s->keep_after = true;
						continue;
					}
					mark_pending(s);
					memset(&s->pres, 0, sizeof(s->pres));
					s->pres.status = DLOCK_STATUS_CANCELED;
					s->perr.code = 0;
					continue;
				}
				if (dlm_waiter_of(mgr.picture, s->index) != NULL)
				{
					ids[n++] = s->index;
					if (s->timeout_at != 0 && now >= s->timeout_at)
						mgr.counted.timeouts++;
					else
						mgr.counted.cancels++;	/* KILL, max_statement_time, a vanished client */
				}
			}
			if (n > 0)
				dlm_withdraw(mgr.picture, ids, n, now);
		}
		for (size_t i = 0; i < ngone; i++)
			dlm_session_end(mgr.picture, session_pid(gone[i]), session_start(gone[i]),
							DLM_NOBODY, now);
		free(gone);
		expired = dlm_expire(mgr.picture, now, EXPIRE_PER_BATCH);
		for (Slot *s = fresh; s; s = s->next)
			if (!s->pending)
				execute(s, now);
		for (Slot *s = fresh; s; s = s->next)
		{
			/* given up before it was decided, with keep_place: keep its place now */
			if (s->keep_after && !s->pending &&
				dlm_waiter_of(mgr.picture, s->index) != NULL)
				dlm_withdraw(mgr.picture, &s->index, 1, now);
			s->keep_after = false;
		}
		if (dlm_broken(mgr.picture))
		{
			dlock_set_err(&err, DLOCK_ER_UNKNOWN, "out of memory in the lock manager");
			failed = true;
		}
		rows_due = failed ? 0 : dlm_queue_rows_due(mgr.picture, now, false);

		/* store */
		if (!failed && batch_changed())
		{
			/* a batch that answers nobody may ride on the next commit */
			if (expired == 0 && rows_due == 0 && inspects == NULL &&
				mgr.deferred < MAX_DEFERRED && !answers_pending() &&
				(mgr.deferred == 0 || now - mgr.deferred_since < DEFER_MS * 1000))
			{
				if (mgr.deferred++ == 0)
					mgr.deferred_since = now;
				continue;
			}
			(void) dlm_queue_rows_due(mgr.picture, now, true);
			write_began = mono_us();
			if (batch_write(&err) != 0)
				failed = true;
			wrote = true;
			write_us = mono_us() - write_began;
		}
		if (failed)
		{
			/*
			 * Rebuild the picture from the tables; the calls this batch
			 * decided get the error, those still waiting are decided again -
			 * unless this keeps failing.
			 */
			mgr.batch_failures++;
			if (mgr.batch_failures <= 5 || mgr.batch_failures % 100 == 0)
				fprintf(stderr, "dlock: lock manager batch failed (%d in a row): %s\n",
						mgr.batch_failures, err.msg);
			store_rollback();
			store_close();
			picture_drop(&mgr.picture);
			mgr.deferred = 0;
			pthread_mutex_lock(&handoff.mu.m);
			resubmit_locked(mgr.batch_failures >= MAX_BATCH_FAILURES, err.msg);
			pthread_mutex_unlock(&handoff.mu.m);
			if (mgr.batch_failures >= MAX_BATCH_FAILURES)
				mgr.batch_failures = 0;
			pause_ms(RETRY_MIN_MS);
			continue;
		}
		began = mgr.deferred > 0 ? mgr.deferred_since : now;	/* hand-offs wait from here */
		mgr.deferred = 0;
		mgr.batch_failures = 0;
		dlm_settle(mgr.picture);

		/* publish, and look at the picture for the inspections */
		for (Slot *s = inspects; s; s = s->next)
			s->inspect_fn(mgr.picture, s->inspect_arg);
		pthread_mutex_lock(&handoff.mu.m);
		publish_locked();
		dlm_counters_batch(&mgr.counted, mgr.picture, mgr.stats_fresh, wrote, write_us, now_us() - began);
		mgr.stats_fresh = 0;
		stats_publish_locked(&mgr.counted, mgr.picture, now);
		for (Slot *s = inspects; s; s = s->next)
		{
			memset(&s->res, 0, sizeof(s->res));
			s->err.code = 0;
			s->state = SLOT_DONE;
			pthread_cond_signal(&s->cond.c);
		}
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
	store_close();
	picture_drop(&mgr.picture);
	return NULL;
}

/* When the loop must look again at the latest, µs from now. */
static long long
sleep_us(DLockTime now)
{
	long long	us = 1000000;
	DLockTime	t;

	t = dlm_next_expiry(mgr.picture);
	if (t != 0 && t - now < us)
		us = t - now;
	t = dlm_next_queue_row(mgr.picture);
	if (t != 0 && t - now < us)
		us = t - now;
	if (mgr.deferred > 0 && mgr.deferred_since + DEFER_MS * 1000 - now < us)
		us = mgr.deferred_since + DEFER_MS * 1000 - now;
	t = sessions_next_check() - mono_us();
	if (t < us)
		us = t;
	return us < 0 ? 0 : us;
}

static bool
work_due(DLockTime now)
{
	DLockTime	lease, row;

	if (mgr.picture == NULL)
		return false;
	lease = dlm_next_expiry(mgr.picture);
	row = dlm_next_queue_row(mgr.picture);
	return (lease != 0 && lease <= now) || (row != 0 && row <= now) ||
		(mgr.deferred > 0 && now - mgr.deferred_since >= DEFER_MS * 1000);
}

/* A request into the core. */
static void
execute(Slot *s, DLockTime now)
{
	DLmRequest	q;
	const Quota *quota;

	memset(&q, 0, sizeof(q));
	q.op = s->call.op;
	q.requester = s->index;
	q.owner_key = s->owner_z;
	q.pid = session_pid(s->conn_id);
	q.session_start = session_start(s->conn_id);
	q.mode = s->call.mode;
	q.names = s->names_z;
	q.nnames = s->call.nnames;
	q.ttl_us = s->call.ttl_us;
	q.max_ttl_us = (int64_t) dlock_max_ttl_seconds * 1000000;
	q.timeout_at = s->timeout_at;
	q.keep_place = s->call.keep_place;
	q.capacity = s->call.capacity;
	q.permits = s->call.permits;
	q.election = s->call.election;
	q.value = s->value_z;
	q.any_role = s->admin;
	q.role = accounts_intern(s->account, strlen(s->account));
	if (q.role == 0)
	{
		mark_pending(s);
		s->pres.status = DLOCK_STATUS_ERROR;
		dlock_set_err(&s->perr, DLOCK_ER_UNKNOWN, "%s: out of memory", s->call.fn);
		return;
	}
	/* the namespace was checked by the caller (mgr_namespace_check) */
	if (q.op == DLOCK_OP_ACQUIRE || q.op == DLOCK_OP_TRY ||
		q.op == DLOCK_OP_ACQUIRE_ALL)
	{
		quota = s->admin ? NULL : quota_of(s->account);
		if (quota)
		{
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
				return;
			}
			q.role_max_locks = quota->limits[0] > 0 ? quota->limits[0] : 0;
			q.owner_max_locks = quota->limits[1] > 0 ? quota->limits[1] : 0;
			q.role_max_bytes = quota->limits[2] > 0 ? quota->limits[2] : 0;
			q.owner_max_bytes = quota->limits[3] > 0 ? quota->limits[3] : 0;
		}
	}
	(void) dlm_request(mgr.picture, &q, now);
}

static bool
batch_changed(void)
{
	return dlm_touched_holders(mgr.picture) != NULL ||
		dlm_touched_waiters(mgr.picture) != NULL ||
		dlm_counter_dirty(mgr.picture, NULL);
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
batch_write(DlockErr *err)
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
			rc = store_write_batch(mgr.picture, err);
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
