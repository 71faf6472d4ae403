/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * dlock_load.c
 *		Loading the lock manager's picture from the tables: after the server
 *		started, after a failed batch, after dlock_reload(), after a
 *		promotion.  The tables are the durable truth: the picture is rebuilt
 *		from them (they hold the last committed batch), its session rows
 *		checked against the connections alive now, and the leases that ran
 *		out while the server was down given the restart grace.
 *
 * Interface: see dlock_load.h.
 *
 * While the picture cannot be loaded the manager retries with growing
 * pauses; calls wait up to LOAD_WAIT_US while the store may come (the
 * server starting), else get the error.  A server that may not serve (a
 * replica, a Galera node) answers every call with why, and is asked again
 * every ROLE_RECHECK_MS and at each call.
 *
 * The state is the manager thread's alone, but not_ready, which is written
 * under handoff.mu.
 */
#define _GNU_SOURCE
#include "dlock_load.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "dlock_access.h"
#include "dlock_clock.h"
#include "dlock_sessions.h"
#include "dlock_store.h"

/* Tickets reserved per update of the stored counter. */
#define TICKET_RESERVE 10000
/* A server that may not serve (a replica, a Galera node) is asked again this often. */
#define ROLE_RECHECK_MS 1000

static struct
{
	bool		first_load;		/* no picture loaded yet in this run */
	int			failures;		/* loads failed in a row */
	DLockTime	retry_at;		/* monotonic: when to try loading again */
	int			last_load_rc;	/* of the last failed load: -1, -2, -3 */
	bool		refusing;		/* this server may not serve: a replica, a Galera node */
	char		refusal[sizeof(((DlockErr *) 0)->msg)];	/* ... why, as logged */
	char		not_ready[sizeof(((DlockErr *) 0)->msg)];	/* why the manager does not serve ("": it does) */
}			loader = {.first_load = true};

static DLockManager *picture_new(DLockService *service);
static void *lm_alloc(void *arg, size_t size);
static void lm_free(void *arg, void *ptr, size_t size);
static int	load_rows(void *arg, DLockManager *lm, char *err, size_t errlen);
static bool session_alive(void *arg, int32_t pid, int64_t start);

/* What the service's load callbacks share. */
typedef struct LoadArg
{
	StoreLoad	store;
	DlockErr	err;
} LoadArg;

/*
 * Build the picture from the tables: after the server started, and after
 * a failed batch.  The store connection is (re)opened; the service loads
 * the rows (core/README 18.7: sessions gone dropped, the restart grace on
 * the first load of a run, committed).  0, or with err -1 (the store
 * cannot be reached: worth waiting), -2 (not set up) or -3 (this server
 * may not serve).
 */
int
reload(DLockService *service, DLockManager **picturep, DlockErr *err)
{
	DLockManager *picture;
	LoadArg		arg;
	DLsLoad		load;
	int			installed = 0;
	int			rc;

	picture_drop(picturep);
	if (store_conn_id() == 0 && (rc = store_open(err)) != 0)
		return rc;
	/* a replica or a Galera node does not serve (asked before any table is opened) */
	rc = store_role(err);
	if (rc != 0)
		return rc < 0 ? -1 : -3;
	if (loader.refusing)
	{
		/*
		 * Promoted: a connection of its own, whose read timeout fits a
		 * semi-synchronous primary (store_open).
		 */
		store_close();
		if ((rc = store_open(err)) != 0)
			return rc;
	}
	if (store_installed(&installed, err) != 0)
		return -1;
	if (!installed)
	{
		dlock_set_err(err, DLOCK_ER_UNKNOWN,
				"the dlock tables are not installed (run sql/mysql/install.sql)");
		return -2;
	}
	if (caches_load(err) != 0)
		return -1;
	picture = picture_new(service);
	if (picture == NULL)
	{
		dlock_set_err(err, DLOCK_ER_UNKNOWN, "out of memory in the lock manager");
		return -1;
	}
	memset(&arg, 0, sizeof(arg));
	memset(&load, 0, sizeof(load));
	load.arg = &arg;
	load.rows = load_rows;
	load.session_alive = session_alive;
	/* leases that ran out while the server was down get a grace */
	if (loader.first_load && dlock_restart_grace_ms > 0)
		load.grace_until = now_us() + (DLockTime) dlock_restart_grace_ms * 1000;
	rc = dls_load(service, picture, &load, err->msg, sizeof(err->msg));
	free(arg.store.alive);
	if (rc != 0)
	{
		/* the rows' own error keeps its code */
		if (arg.err.code != 0)
			*err = arg.err;
		else
			err->code = DLOCK_ER_UNKNOWN;
		err->warning = 0;
		store_rollback();
		dlm_destroy(picture);
		return -1;
	}
	*picturep = picture;
	loader.first_load = false;
	pthread_mutex_lock(&handoff.mu.m);
	handoff.nended = 0;			/* the load saw them gone */
	pthread_mutex_unlock(&handoff.mu.m);
	fprintf(stderr, "dlock: lock manager ready: %zu locks held\n",
			dlm_nlocks(picture));
	return 0;
}

/*
 * The service's DLsLoad.rows: the counter, the held and kept rows, and the
 * connections alive now (for session_alive).
 */
static int
load_rows(void *a, DLockManager *lm, char *err, size_t errlen)
{
	LoadArg    *arg = a;

	arg->store.m = lm;
	arg->store.now = now_us();
	if (store_load(&arg->store, &arg->err) != 0)
	{
		snprintf(err, errlen, "%s", arg->err.msg);
		return -1;
	}
	qsort(arg->store.alive, arg->store.nalive, sizeof(unsigned long long), cmp_conn_ids);
	/*
	 * Holders and waiting parts stay within what the MEMORY tables can take
	 * (max_heap_table_size): a request past it is refused ("out of lock
	 * space"), not a batch that fails on a full table.
	 */
	if (arg->store.capacity > 0)
		dlm_set_limits(lm, arg->store.capacity - arg->store.capacity / 10, 0);
	return 0;
}

void
picture_drop(DLockManager **picturep)
{
	if (*picturep)
		dlm_destroy(*picturep);
	*picturep = NULL;
}

/* A new, empty picture; answers go to on_answer through the service. */
static DLockManager *
picture_new(DLockService *service)
{
	DLmConfig	cfg;

	memset(&cfg, 0, sizeof(cfg));
	cfg.alloc.alloc = lm_alloc;
	cfg.alloc.free = lm_free;
	/* names come from users: a hash seed nobody can know */
	if (getrandom(cfg.seed, sizeof(cfg.seed), 0) != (ssize_t) sizeof(cfg.seed))
		return NULL;
	cfg.nrequesters = NSLOTS;
	cfg.max_name_len = DLOCK_MAX_NAME_LEN;
	cfg.ticket_reserve = TICKET_RESERVE;
	cfg.queue_row_delay_us = (int64_t) dlock_queue_row_delay_ms * 1000;
	dls_manager_config(service, &cfg);
	return dlm_create(&cfg);
}

static void *
lm_alloc(void *arg, size_t size)
{
	(void) arg;
	return malloc(size);
}

static void
lm_free(void *arg, void *ptr, size_t size)
{
	(void) arg;
	(void) size;
	free(ptr);
}

/* Whether a session with rows is still connected (dlm_drop_sessions). */
static bool
session_alive(void *arg, int32_t pid, int64_t start)
{
	StoreLoad  *load = &((LoadArg *) arg)->store;
	unsigned long long id;
	bool		gone;

	if (!session_of_this_run(start))
		return false;
	id = session_conn_id(pid, start);
	if (bsearch(&id, load->alive, load->nalive, sizeof(id), cmp_conn_ids) == NULL)
		return false;
	/* an end reported while no picture was loaded */
	pthread_mutex_lock(&handoff.mu.m);
	gone = false;
	for (size_t i = 0; i < handoff.nended && !gone; i++)
		gone = handoff.ended[i] == id;
	pthread_mutex_unlock(&handoff.mu.m);
	return !gone;
}

bool
load_due(bool calls_waiting, long long *wait_us)
{
	/* not loaded: load at once, or after the pause of a failure */
	if (loader.failures == 0 || mono_us() >= loader.retry_at)
		return true;
	/*
	 * not installed: a call may come right after the install;
	 * refused: a call may come right after a promotion
	 */
	if ((loader.last_load_rc == -2 || loader.last_load_rc == -3) && calls_waiting)
		return true;
	*wait_us = loader.retry_at - mono_us();
	return false;
}

void
load_failed(int rc, const DlockErr *err, const DLsFailure *f, Slot *fresh, Slot *inspects)
{
	DLockTime	mono = mono_us();
	Slot	   *keep = NULL,
			   *keep_tail = NULL;

	loader.last_load_rc = rc;
	loader.failures = f->failures;
	loader.retry_at = mono + (DLockTime) f->pause_ms * 1000;
	if (f->log)
		fprintf(stderr, "dlock: lock manager cannot load the lock "
				"tables (%d in a row): %s\n", f->failures, err->msg);
	store_close();
	pthread_mutex_lock(&handoff.mu.m);
	snprintf(loader.not_ready, sizeof(loader.not_ready), "%s", err->msg);
	/* while the store may come (a start), calls wait a while */
	for (Slot *s = fresh, *nx; s; s = nx)
	{
		nx = s->next;
		if (rc == -1 && !s->withdraw && mono - s->submitted_at < LOAD_WAIT_US)
		{
			s->state = SLOT_SUBMITTED;
			s->next = NULL;
			if (keep_tail)
				keep_tail->next = s;
			else
				keep = s;
			keep_tail = s;
		}
		else
			answer_error_locked(s, DLOCK_ER_UNKNOWN, loader.not_ready);
	}
	if (keep)
	{
		keep_tail->next = handoff.submit_head;
		if (handoff.submit_head == NULL)
			handoff.submit_tail = keep_tail;
		handoff.submit_head = keep;
	}
	for (Slot *s = inspects; s; s = s->next)
		answer_error_locked(s, DLOCK_ER_UNKNOWN, loader.not_ready);
	pthread_mutex_unlock(&handoff.mu.m);
}

void
load_succeeded(void)
{
	loader.failures = 0;
	loader.last_load_rc = 0;
	if (loader.refusing)
	{
		fprintf(stderr, "dlock: lock manager serves: this server is no "
				"longer a replica\n");
		loader.refusing = false;
		loader.refusal[0] = '\0';
	}
	pthread_mutex_lock(&handoff.mu.m);
	loader.not_ready[0] = '\0';
	pthread_mutex_unlock(&handoff.mu.m);
}

/*
 * This server may not serve (store_role says why): every call is answered
 * with that at once, and the server is asked again at the next call and
 * every ROLE_RECHECK_MS - a promotion takes effect without a restart.  The
 * store connection stays open for that.  Becoming a replica (or a Galera
 * node) ends the sessions' locks, as a restart does: a new run makes every
 * session row of before belong to no session of this run, and the load
 * after a promotion drops them and gives the leases the restart grace
 * (their holders could not renew them during the failover).
 */
void
refuse(const DlockErr *why, Slot *fresh, Slot *inspects)
{
	if (!loader.refusing || strcmp(loader.refusal, why->msg) != 0)
		fprintf(stderr, "dlock: lock manager does not serve: %s\n", why->msg);
	snprintf(loader.refusal, sizeof(loader.refusal), "%s", why->msg);
	if (!loader.refusing)
	{
		loader.refusing = true;
		loader.first_load = true;
		(void) new_run_base();
	}
	loader.last_load_rc = -3;
	loader.failures = 1;		/* the collect loop waits for retry_at */
	loader.retry_at = mono_us() + (DLockTime) ROLE_RECHECK_MS * 1000;
	pthread_mutex_lock(&handoff.mu.m);
	snprintf(loader.not_ready, sizeof(loader.not_ready), "%s", why->msg);
	handoff.nended = 0;			/* no session of this run holds anything here */
	for (Slot *s = fresh, *nx; s; s = nx)
	{
		nx = s->next;
		answer_error_locked(s, why->code, why->msg);
	}
	for (Slot *s = inspects; s; s = s->next)
		answer_error_locked(s, why->code, why->msg);
	pthread_mutex_unlock(&handoff.mu.m);
}

void
load_starting_locked(void)
{
	snprintf(loader.not_ready, sizeof(loader.not_ready), "the lock manager is starting");
}
