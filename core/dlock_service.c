/* SPDX-License-Identifier: PostgreSQL */
/*
 * dlock_service.c
 *		The lock service's batch process around the lock manager, for both
 *		databases (dlock_service.h; core/README, "The service").
 *
 * A batch reads as the README's list:
 *
 *		decide		withdrawals first (nothing below may grant a request its
 *					caller gave up), ended sessions, due leases (at most
 *					the learnt expiry limit), the new requests in submission
 *					order, then the withdrawals that came before their
 *					request was decided
 *		defer		a batch that answers nobody and has no row due may
 *					leave its writes to a later batch's commit
 *		commit		the adapter writes the rows and commits, flushed when a
 *					grant of an owner key or the ticket counter needs it
 *		publish		only then the answers go out
 */
#include <stdlib.h>
#include <string.h>

#include "dlock_service.h"

typedef struct Revoked
{
	char	   *key;			/* the owner key; NULL: a session */
	int32_t		pid;			/* a session's identity */
	int64_t		session_start;
	char	   *name;			/* NULL: every name of the key */
	char	   *reason;
	DLockTime	at;
	bool		forgotten;		/* by a grant of a batch not committed yet */
} Revoked;

struct DLockService
{
	DLsConfig	cfg;
	DLockManager *lm;			/* NULL: none loaded */

	/* the batch being decided */
	DLockTime	now;
	const DLsRequest *current;	/* the request being executed */
	int			answered;		/* answers to requesters (not QUEUED) */
	int			nfresh;			/* new requests since the last publish */
	char	  **notify;			/* names force-released, for the commit */
	int			nnotify;
	int			notify_cap;
	int			revoked_added;	/* revocations this batch added (undone if it fails) */
	int			revoked_forgotten;	/* marked forgotten since the last commit */

	/* across batches */
	int			deferred;		/* batches whose writes wait for a commit */
	DLockTime	deferred_since;
	int			expire_limit;
	Revoked		revoked[DLS_REVOKED_MAX];
	int			nrevoked;		/* the newest at nrevoked - 1 */

	/* failures */
	int			failures;
	DLockTime	last_logged;
	bool		isolate;		/* new requests one per batch */
	int			isolated;		/* the one taken alone in this batch */

	DLmCounters counted;
};

static void service_answer(void *arg, int requester, const DLmAnswer *a);

DLockService *
dls_create(const DLsConfig *config)
{
	DLockService *s = calloc(1, sizeof(DLockService));

	if (s == NULL)
		return NULL;
	s->cfg = *config;
	s->expire_limit = DLS_EXPIRE_MIN;
	s->isolated = DLM_NOBODY;
	if (config->counters)
		s->counted = *config->counters;
	memset(&s->counted.last, 0, sizeof(s->counted.last));	/* a new manager */
	return s;
}

static void
revoked_free(Revoked *v)
{
	free(v->key);
	free(v->name);
	free(v->reason);
}

static void
notify_clear(DLockService *s)
{
	for (int i = 0; i < s->nnotify; i++)
		free(s->notify[i]);
	s->nnotify = 0;
}

void
dls_destroy(DLockService *s)
{
	if (s == NULL)
		return;
	for (int i = 0; i < s->nrevoked; i++)
		revoked_free(&s->revoked[i]);
	notify_clear(s);
	free(s->notify);
	free(s);
}

void
dls_manager_config(DLockService *s, DLmConfig *cfg)
{
	cfg->answer = service_answer;
	cfg->answer_arg = s;
}

DLockManager *
dls_manager(const DLockService *s)
{
	return s->lm;
}

const DLmCounters *
dls_counters(const DLockService *s)
{
	return &s->counted;
}

void
dls_counters_reset(DLockService *s)
{
	DLmStats	last = s->counted.last;

	memset(&s->counted, 0, sizeof(s->counted));
	s->counted.last = last;
}

int
dls_expire_limit(const DLockService *s)
{
	return s->expire_limit;
}

bool
dls_isolating(const DLockService *s)
{
	return s->isolate;
}

static DLockTime
clock_now(const DLockService *s)
{
	return s->cfg.store.now(s->cfg.store.arg);
}

static char *
copy_str(const char *p)
{
	size_t		n;
	char	   *c;

	if (p == NULL)
		return NULL;
	n = strlen(p) + 1;
	c = malloc(n);
	if (c)
		memcpy(c, p, n);
	return c;
}

/* ---------------------------------------------------------------------
 * Revocations: an administrator's release remembered with its reason
 * --------------------------------------------------------------------- */

static void
revoked_remove(DLockService *s, int i)
{
	/* one this batch added: fewer to undo if it fails */
	if (i >= s->nrevoked - s->revoked_added)
		s->revoked_added--;
	revoked_free(&s->revoked[i]);
	memmove(&s->revoked[i], &s->revoked[i + 1], sizeof(Revoked) * (s->nrevoked - i - 1));
	s->nrevoked--;
}

static void
revoked_add(DLockService *s, const char *key, int32_t pid, int64_t start,
			const char *name, const char *reason)
{
	Revoked		v = {0};

	v.key = copy_str(key);
	v.name = copy_str(name);
	v.reason = copy_str(reason ? reason : "");
	if ((key && !v.key) || (name && !v.name) || !v.reason)
	{
		revoked_free(&v);		/* out of memory: the holder just hears "not held" */
		return;
	}
	v.pid = pid;
	v.session_start = start;
	v.at = s->now;
	if (s->nrevoked == DLS_REVOKED_MAX)
		revoked_remove(s, 0);
	s->revoked[s->nrevoked++] = v;
	s->revoked_added++;
}

static bool
same_owner(const Revoked *v, const DLmRequest *q)
{
	if (v->key || q->owner_key)
		return v->key && q->owner_key && strcmp(v->key, q->owner_key) == 0;
	return v->pid == q->pid && v->session_start == q->session_start;
}

/* The newest revocation of q's owner and first name, after dropping old ones. */
static int
revoked_find(DLockService *s, const DLmRequest *q)
{
	while (s->nrevoked > 0 && s->now - s->revoked[0].at > DLS_REVOKED_KEEP_US)
		revoked_remove(s, 0);
	for (int i = s->nrevoked - 1; i >= 0; i--)
		if (!s->revoked[i].forgotten && same_owner(&s->revoked[i], q) &&
			(s->revoked[i].name == NULL || strcmp(s->revoked[i].name, q->names[0]) == 0))
			return i;
	return -1;
}

/*
 * A new grant to the owner forgets its revocations of the names, once its
 * batch is committed (revoked_settle); a batch that fails forgets nothing.
 */
static void
revoked_forget(DLockService *s, const DLmRequest *q)
{
	for (int i = s->nrevoked - 1; i >= 0; i--)
	{
		bool		named = s->revoked[i].name == NULL;

		for (int k = 0; k < q->nnames && !named; k++)
			named = strcmp(s->revoked[i].name, q->names[k]) == 0;
		if (named && same_owner(&s->revoked[i], q) && !s->revoked[i].forgotten)
		{
			s->revoked[i].forgotten = true;
			s->revoked_forgotten++;
		}
	}
}

/* The batch is committed: what its grants forgot goes. */
static void
revoked_settle(DLockService *s)
{
	if (s->revoked_forgotten == 0)
		return;					/* the usual batch: no walk over the memory */
	s->revoked_forgotten = 0;
	for (int i = s->nrevoked - 1; i >= 0; i--)
		if (s->revoked[i].forgotten)
			revoked_remove(s, i);
}

static void
notify_later(DLockService *s, const char *name)
{
	if (s->nnotify == s->notify_cap)
	{
		int			cap = s->notify_cap ? s->notify_cap * 2 : 16;
		char	  **n = realloc(s->notify, sizeof(char *) * cap);

		if (n == NULL)
			return;				/* an announcement less; the release stands */
		s->notify = n;
		s->notify_cap = cap;
	}
	if ((s->notify[s->nnotify] = copy_str(name)) != NULL)
		s->nnotify++;
}

/*
 * The lock manager's answers pass here first: a "not held" of a lock an
 * administrator released becomes REVOKED with the reason, and a new grant
 * forgets the revocation.
 */
static void
service_answer(void *arg, int requester, const DLmAnswer *a)
{
	DLockService *s = arg;
	const DLsRequest *r = s->current;

	if (requester < 0)
		return;
	if (a->status != DLOCK_STATUS_QUEUED)
		s->answered++;
	if (r && requester == r->q.requester && s->nrevoked > 0 &&
		r->q.nnames > 0 && r->q.names[0][0] != '\0')
	{
		DLockOp		op = r->q.op;
		int			i;

		if (a->status == DLOCK_STATUS_NOT_HELD &&
			(op == DLOCK_OP_RENEW || op == DLOCK_OP_RELEASE ||
			 op == DLOCK_OP_CONVERT || op == DLOCK_OP_PROCLAIM) &&
			(i = revoked_find(s, &r->q)) >= 0)
		{
			DLmAnswer	v = *a;

			v.status = DLOCK_STATUS_REVOKED;
			v.reason = s->revoked[i].reason;
			s->cfg.answer(s->cfg.answer_arg, requester, &v);
			return;
		}
		if (a->status == DLOCK_STATUS_GRANTED)
			revoked_forget(s, &r->q);
	}
	s->cfg.answer(s->cfg.answer_arg, requester, a);
}

/* ---------------------------------------------------------------------
 * Force release: an administrator's release of another owner's locks
 * --------------------------------------------------------------------- */

typedef struct Victim
{
	char	   *key;
	int32_t		pid;
	int64_t		session_start;
} Victim;

/* Whether (lock, owner) still has a named holder. */
static bool
still_holds(DLockManager *lm, const char *name, const Victim *v)
{
	DLmLock    *lock = dlm_lookup(lm, name);

	for (DLmHolder *h = lock ? dlm_lock_holders(lock) : NULL; h; h = dlm_holder_next(h))
		if (!h->implied &&
			(v->key ? h->owner->key && strcmp(h->owner->key, v->key) == 0 :
			 h->owner->key == NULL && h->owner->pid == v->pid &&
			 h->owner->session_start == v->session_start))
			return true;
	return false;
}

/*
 * dlock_force_release(name, owner, reason): every named holder of the lock
 * (or the owner key's) released, all its levels; answered with how many.
 */
static void
force_release(DLockService *s, const DLsRequest *r)
{
	const char *name = r->q.names[0];
	DLmLock    *lock = dlm_lookup(s->lm, name);
	Victim	   *victims = NULL;
	int			nvictims = 0;
	int			n = 0;
	DLmAnswer	a = {0};

	for (DLmHolder *h = lock ? dlm_lock_holders(lock) : NULL; h; h = dlm_holder_next(h))
		if (!h->implied && (r->q.owner_key == NULL ||
							(h->owner->key && strcmp(h->owner->key, r->q.owner_key) == 0)))
			nvictims++;
	if (nvictims > 0 && (victims = calloc(nvictims, sizeof(Victim))) == NULL)
		nvictims = 0;			/* out of memory: nothing released, answered 0 */
	nvictims = 0;
	for (DLmHolder *h = lock && victims ? dlm_lock_holders(lock) : NULL; h; h = dlm_holder_next(h))
	{
		Victim	   *v = &victims[nvictims];

		if (h->implied || (r->q.owner_key && (h->owner->key == NULL ||
											  strcmp(h->owner->key, r->q.owner_key) != 0)))
			continue;
		/* the holder's key: the holders change below, so a copy */
		v->key = copy_str(h->owner->key);
		v->pid = h->owner->pid;
		v->session_start = h->owner->session_start;
		if (h->owner->key && v->key == NULL)
			continue;
		nvictims++;
	}
	for (int k = 0; k < nvictims; k++)
	{
		Victim	   *v = &victims[k];
		DLmRequest	q = {0};
		const char *names[1] = {name};

		q.op = DLOCK_OP_RELEASE;
		q.requester = DLM_NOBODY;
		q.owner_key = v->key;
		q.pid = v->key ? r->q.pid : v->pid;
		q.session_start = v->key ? r->q.session_start : v->session_start;
		q.names = names;
		q.nnames = 1;
		q.role = r->q.role;
		q.any_role = true;
		/* every level, whatever the re-entrant count (bounded: a count is int32) */
		for (int i = 0; i < 100000 && still_holds(s->lm, name, v); i++)
			(void) dlm_request(s->lm, &q, s->now);
		revoked_add(s, v->key, v->pid, v->session_start, name, r->q.value);
		n++;
	}
	for (int k = 0; k < nvictims; k++)
		free(victims[k].key);
	free(victims);
	if (n > 0)
		notify_later(s, name);
	a.status = DLOCK_STATUS_COUNT;
	a.count = n;
	if (r->q.requester >= 0)
	{
		s->answered++;
		s->cfg.answer(s->cfg.answer_arg, r->q.requester, &a);
	}
}

/*
 * dlock_force_release_all(owner, reason): dlock_release_all of the key on
 * its behalf (its holds, waits and kept places; answered with the count).
 */
static void
force_release_all(DLockService *s, const DLsRequest *r)
{
	DLmRequest	q = r->q;
	const DLmHolder **gone = NULL;
	int			ngone = 0;
	DLmHolder  *h;

	/*
	 * The key's holders already gone since the last commit (a lease run
	 * out, its own release) are not this release's to announce: only the
	 * names it takes from the key are.
	 */
	for (int pass = 0; pass < 2; pass++)
	{
		ngone = 0;
		for (size_t h_i = 0; (h = dlm_touched_holder(s->lm, h_i)) != NULL; h_i++)
			if (h->p.dead && !h->implied && h->owner->key &&
				strcmp(h->owner->key, r->q.owner_key) == 0)
			{
				if (gone)
					gone[ngone] = h;
				ngone++;
			}
		if (pass == 1 || ngone == 0 || (gone = malloc(sizeof(*gone) * ngone)) == NULL)
			break;
	}
	q.op = DLOCK_OP_RELEASE_ALL;
	q.any_role = true;
	q.value = NULL;
	(void) dlm_request(s->lm, &q, s->now);
	for (size_t h_i = 0; (h = dlm_touched_holder(s->lm, h_i)) != NULL; h_i++)
		if (h->p.dead && !h->implied && h->owner->key &&
			strcmp(h->owner->key, r->q.owner_key) == 0)
		{
			bool		before = false;

			for (int i = 0; i < ngone && gone && !before; i++)
				before = gone[i] == h;
			if (!before)
				notify_later(s, h->lock->name);
		}
	free(gone);
	revoked_add(s, r->q.owner_key, 0, 0, NULL, r->q.value);
}

/* ---------------------------------------------------------------------
 * The batch
 * --------------------------------------------------------------------- */

void
dls_undo_of(const DLmRequest *grant, DLmRequest *undo)
{
	memset(undo, 0, sizeof(*undo));
	undo->op = DLOCK_OP_RELEASE;
	undo->requester = DLM_NOBODY;
	undo->owner_key = grant->owner_key;
	undo->pid = grant->pid;
	undo->session_start = grant->session_start;
	undo->any_role = true;
	undo->names = grant->names;
	undo->nnames = grant->nnames;
}

int
dls_deferred(const DLockService *s)
{
	return s->deferred;
}

static void
execute(DLockService *s, const DLsRequest *r)
{
	s->current = r;
	if (r->q.op == DLOCK_OP_FORCE_RELEASE && r->q.nnames == 1)
		force_release(s, r);
	else if (r->q.op == DLOCK_OP_FORCE_RELEASE_ALL && r->q.owner_key)
		force_release_all(s, r);
	else
		(void) dlm_request(s->lm, &r->q, s->now);	/* an error is answered */
	s->current = NULL;
}

/*
 * Decides the batch in its order; returns how many leases it expired, -1
 * if out of memory before it began.
 */
static int
decide(DLockService *s, const DLsBatch *b)
{
	DLockManager *lm = s->lm;
	int			expired;

	s->nfresh += b->nfresh;
	if (b->nwithdrawn > 0)
	{
		int		   *ids = malloc(sizeof(int) * b->nwithdrawn);
		int			n = 0;

		if (ids == NULL)
			return -1;
		for (int i = 0; i < b->nwithdrawn; i++)
		{
			/* a wait given up counts; a request not decided yet is just CANCELED */
			if (dlm_waiter_of(lm, b->withdrawn[i].requester) != NULL)
			{
				if (b->withdrawn[i].timed_out)
					s->counted.timeouts++;
				else
					s->counted.cancels++;
			}
			ids[n++] = b->withdrawn[i].requester;
		}
		/* all at once: none of them is granted on the way */
		if (n > 0)
			dlm_withdraw(lm, ids, n, s->now);
		free(ids);
	}
	for (int i = 0; i < b->nended; i++)
	{
		const DLsSessionEnd *e = &b->ended[i];

		if (e->uncollected)
		{
			DLmRequest	undo;

			dls_undo_of(e->uncollected, &undo);
			(void) dlm_request(lm, &undo, s->now);
		}
		dlm_session_end(lm, e->pid, e->session_start, e->requester, s->now);
	}
	expired = dlm_expire(lm, s->now, s->expire_limit);
	for (int i = 0; i < b->nfresh; i++)
		execute(s, b->fresh[i]);
	for (int i = 0; i < b->nfresh; i++)
	{
		const DLsRequest *r = b->fresh[i];

		/* still waiting: its place is kept (a grant or an error stays its answer) */
		if (r->withdraw_after && dlm_waiter_of(lm, r->q.requester) != NULL)
			dlm_withdraw(lm, &r->q.requester, 1, s->now);
	}
	return expired;
}

static bool
batch_changed(const DLockManager *lm)
{
	return dlm_touched_holder(lm, 0) != NULL ||
		dlm_touched_waiter(lm, 0) != NULL ||
		dlm_counter_dirty(lm, NULL) ||
		dlm_notified_lock(lm, 0) != NULL;
}

/* Whether this batch's writes may wait for a later batch's commit. */
static bool
may_defer(const DLockService *s, const DLsBatch *b)
{
	if (s->isolate || b->no_defer || s->answered > 0 || s->nnotify > 0 ||
		s->deferred >= DLS_MAX_DEFERRED)
		return false;
	return s->deferred == 0 || s->now - s->deferred_since < DLS_DEFER_US;
}

/*
 * After a batch that the expiry limit cut short: scale the limit to what
 * fits the budget by this batch's time, by at most a factor of two either
 * way (one slow batch, a checkpoint say, must not collapse it).
 */
static void
adapt_expire_limit(DLockService *s, int expired, DLockTime began)
{
	double		took_us;
	double		scale;
	double		limit;

	if (expired < s->expire_limit)
		return;
	took_us = (double) (clock_now(s) - began);
	if (took_us < 10)
		took_us = 10;
	scale = DLS_EXPIRY_BUDGET_US / took_us;
	scale = scale < 0.5 ? 0.5 : scale > 2.0 ? 2.0 : scale;
	limit = s->expire_limit * scale;
	s->expire_limit = limit < DLS_EXPIRE_MIN ? DLS_EXPIRE_MIN :
		limit > DLS_EXPIRE_MAX ? DLS_EXPIRE_MAX : (int) limit;
}

static void
set_err(char *err, size_t errlen, const char *msg)
{
	if (errlen > 0)
	{
		strncpy(err, msg, errlen - 1);
		err[errlen - 1] = '\0';
	}
}

DLsOutcome
dls_batch(DLockService *s, const DLsBatch *b, char *err, size_t errlen)
{
	DLockManager *lm = s->lm;
	int			expired;
	int			rows_due;
	bool		wrote = false;
	int64_t		write_us = 0;
	DLockTime	began;

	if (lm == NULL)
	{
		set_err(err, errlen, "the lock manager has no picture loaded");
		return DLS_FAILED;
	}
	/* read after the batch was collected: a lease must not date from before its request */
	s->now = clock_now(s);
	/*
	 * A deferral pending is work only once its time is up (dls_work_due);
	 * a batch the adapter needs published (no_defer) always is.
	 */
	if (b->nwithdrawn == 0 && b->nended == 0 && b->nfresh == 0 &&
		!b->no_defer && !dls_work_due(s, s->now))
		return DLS_IDLE;
	s->answered = 0;
	s->revoked_added = 0;
	s->isolated = s->isolate && b->nfresh > 0 ? b->fresh[0]->q.requester : DLM_NOBODY;

	expired = decide(s, b);
	if (expired < 0 || dlm_broken(lm))
	{
		set_err(err, errlen, "out of memory in the dlock lock manager");
		return DLS_FAILED;
	}
	rows_due = dlm_queue_rows_due(lm, s->now, false);
	if (batch_changed(lm))
	{
		DLsCommit	c = {0};
		DLockTime	write_began;

		/*
		 * Rows already due must not wait longer, and deferring an expiry's
		 * rows would only pile them onto one batch.
		 */
		if (expired == 0 && rows_due == 0 && may_defer(s, b))
		{
			if (s->deferred++ == 0)
				s->deferred_since = s->now;
			return DLS_DEFERRED;
		}
		/* rows soon due ride along with this commit rather than need one */
		(void) dlm_queue_rows_due(lm, s->now, true);
		c.counter = dlm_counter_dirty(lm, NULL);
		c.durable = dlm_batch_durable(lm);
		c.revoked = (const char *const *) s->notify;
		c.nrevoked = s->nnotify;
		write_began = clock_now(s);
		if (s->cfg.store.commit(s->cfg.store.arg, lm, &c, err, errlen) != 0)
			return DLS_FAILED;
		notify_clear(s);
		write_us = clock_now(s) - write_began;
		wrote = true;
	}
	began = s->deferred > 0 ? s->deferred_since : s->now;	/* hand-offs wait from here */
	s->deferred = 0;
	dlm_settle(lm);				/* the rows match: what left the picture goes */
	revoked_settle(s);
	s->cfg.store.publish(s->cfg.store.arg, lm);
	dlm_counters_batch(&s->counted, lm, s->nfresh, wrote, write_us, clock_now(s) - began);
	s->nfresh = 0;
	adapt_expire_limit(s, expired, s->now);
	if (s->isolate && s->isolated >= 0)
		s->isolate = false;		/* the request taken alone went through */
	s->isolated = DLM_NOBODY;
	return DLS_DONE;
}

void
dls_fail(DLockService *s, DLsFailure *out)
{
	DLockTime	now = clock_now(s);
	int			shift;

	s->lm = NULL;
	s->deferred = 0;
	s->current = NULL;
	notify_clear(s);
	/* the failed batch's revocations and forgettings never happened */
	while (s->revoked_added > 0 && s->nrevoked > 0)
	{
		revoked_free(&s->revoked[--s->nrevoked]);
		s->revoked_added--;
	}
	s->revoked_added = 0;
	for (int i = 0; i < s->nrevoked && s->revoked_forgotten > 0; i++)
		s->revoked[i].forgotten = false;
	s->revoked_forgotten = 0;
	s->failures++;
	shift = s->failures - 1 < 20 ? s->failures - 1 : 20;
	out->failures = s->failures;
	out->pause_ms = (long) DLS_RETRY_MIN_MS << shift;
	if (out->pause_ms > DLS_RETRY_MAX_MS)
		out->pause_ms = DLS_RETRY_MAX_MS;
	/* every failure of a short run; then one line a minute */
	out->log = s->failures <= 5 || now - s->last_logged >= (DLockTime) 60 * 1000000;
	if (out->log)
		s->last_logged = now;
	out->failed_requester = s->isolated;
	/* a request that failed alone gets the error; else find it, one per batch */
	s->isolate = s->isolated < 0;
	s->isolated = DLM_NOBODY;
}

int
dls_recovered(DLockService *s)
{
	int			n = s->failures;

	s->failures = 0;
	return n;
}

/* ---------------------------------------------------------------------
 * Loading
 * --------------------------------------------------------------------- */

int
dls_load(DLockService *s, DLockManager *lm, const DLsLoad *load,
		 char *err, size_t errlen)
{
	DLsCommit	c = {0};

	s->lm = NULL;
	s->deferred = 0;
	s->now = clock_now(s);
	s->answered = 0;
	s->revoked_added = 0;
	if (load->rows(load->arg, lm, err, errlen) != 0)
		return -1;
	/* sessions that ended while nobody was looking */
	(void) dlm_drop_sessions(lm, load->session_alive, load->arg);
	/* leases that ran out while the server was down get a grace */
	if (load->grace_until != 0)
		(void) dlm_extend_leases(lm, load->grace_until);
	/* kept places the picture now lets through (a dropped session's lock) */
	dlm_load_done(lm, s->now);
	if (dlm_broken(lm))
	{
		set_err(err, errlen, "out of memory in the dlock lock manager");
		return -1;
	}
	c.counter = true;
	c.durable = true;
	c.load = true;
	if (s->cfg.store.commit(s->cfg.store.arg, lm, &c, err, errlen) != 0)
		return -1;
	dlm_settle(lm);
	memset(&s->counted.last, 0, sizeof(s->counted.last));	/* a new manager counts from zero */
	s->lm = lm;
	return 0;
}

/* ---------------------------------------------------------------------
 * When work is due by itself
 * --------------------------------------------------------------------- */

DLockTime
dls_next_wake(const DLockService *s)
{
	DLockTime	t = 0;
	DLockTime	c[3];

	if (s->lm == NULL)
		return 0;
	c[0] = dlm_next_expiry(s->lm);
	c[1] = dlm_next_queue_row(s->lm);
	c[2] = s->deferred > 0 ? s->deferred_since + DLS_DEFER_US : 0;
	for (int i = 0; i < 3; i++)
		if (c[i] != 0 && (t == 0 || c[i] < t))
			t = c[i];
	return t;
}

bool
dls_work_due(const DLockService *s, DLockTime now)
{
	DLockTime	t = dls_next_wake(s);

	return t != 0 && t <= now;
}

/* ---------------------------------------------------------------------
 * The rules both adapters word alike
 * --------------------------------------------------------------------- */

bool
dls_prefix_covers(const char *prefix, size_t plen, const char *name, size_t len)
{
	if (len > 0 && name[0] == '/')
		return plen > 0 && prefix[0] == '/' &&
			(plen == 1 ||
			 (len >= plen && memcmp(name, prefix, plen) == 0 &&
			  (len == plen || name[plen] == '/')));
	return (plen == 0 || prefix[0] != '/') && len >= plen &&
		memcmp(name, prefix, plen) == 0;
}

int64_t
dls_default_ttl(int64_t default_us, int64_t max_us)
{
	return max_us > 0 && default_us > max_us ? max_us : default_us;
}

static void
append(char *buf, size_t size, size_t *len, const char *s)
{
	size_t		n = strlen(s);

	if (*len + 1 >= size)
		return;
	if (n > size - 1 - *len)
		n = size - 1 - *len;
	memcpy(buf + *len, s, n);
	*len += n;
	buf[*len] = '\0';
}

void
dls_describe_cycle(char *buf, size_t size, const DLmAnswer *a,
				   DLsOwnerWords owner, DLsNameWords name, void *arg)
{
	size_t		len = 0;

	if (size == 0)
		return;
	buf[0] = '\0';
	/* the adapter words each part in place: names may be long */
#define WORDS(call) \
	do { if (len + 1 < size) { call; len += strlen(buf + len); } } while (0)
	for (int i = 0; i < a->ncycle; i++)
	{
		const DLmCycleStep *st = &a->cycle[i];
		size_t		start;

		if (len > 0)
			append(buf, size, &len, " ");
		start = len;
		WORDS(owner(buf + len, size - len, st->waiter_keyed, st->waiter_pid, arg));
		if (start < len && buf[start] >= 'a' && buf[start] <= 'z')
			buf[start] = (char) (buf[start] - 'a' + 'A');
		append(buf, size, &len, " waits for \"");
		WORDS(name(buf + len, size - len, st->lock, arg));
		append(buf, size, &len, st->held ? "\" held by " : "\" queued earlier by ");
		WORDS(owner(buf + len, size - len, st->blocker_keyed, st->blocker_pid, arg));
		append(buf, size, &len, ".");
	}
#undef WORDS
}

int
dls_name_cmp(const DLsName *x, const DLsName *y)
{
	size_t		n = x->len < y->len ? x->len : y->len;
	int			c = n > 0 ? memcmp(x->p, y->p, n) : 0;

	/* strcmp order: a name sorts before its extensions */
	return c ? c : (x->len > y->len) - (x->len < y->len);
}

static int
name_qsort_cmp(const void *a, const void *b)
{
	return dls_name_cmp(a, b);
}

int
dls_sort_names(DLsName *names, int n)
{
	int			distinct = 0;

	qsort(names, (size_t) n, sizeof(DLsName), name_qsort_cmp);
	for (int i = 0; i < n; i++)
	{
		if (distinct > 0 && dls_name_cmp(&names[distinct - 1], &names[i]) == 0)
			continue;
		names[distinct++] = names[i];
	}
	return distinct;
}
