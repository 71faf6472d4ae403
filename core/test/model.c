/* SPDX-License-Identifier: PostgreSQL */
/*
 * model.c
 *		The reference model of the lock manager (core/README sections 1-9),
 *		as plainly as possible: growable arrays of owners, locks, holders,
 *		waiters and requests, every question answered by a linear scan, no
 *		hashing, no lists, no counts kept per lock.  Written from the README
 *		alone; it shares no code with the lock manager (dlock_lm*.c).
 *
 * Where the README allows more than one reading, ModelOptions picks one
 * (model.h); the section numbers below are the README's.
 */
#include "model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct MOwner
{
	char	   *key;			/* NULL: a session */
	int32_t		pid;
	int64_t		start;
	uint32_t	role;			/* the role that filled it last (12) */
} MOwner;

typedef struct MLock
{
	char	   *name;
	int32_t		capacity;		/* a semaphore's while in use (15); 0: a lock */
	bool		election;		/* a leader election's while in use (16) */
	int64_t		was_token;		/* its leader before the event (0: none) ... */
	char		was_value[DLOCK_MAX_VALUE_LEN + 1]; /* ... and its value */
	bool		announced;		/* announced since its last new holder (8) */
	int			nanc;
	int			anc[DLOCK_MAX_PATH_DEPTH];	/* proper ancestors, shortest first */
} MLock;

typedef struct MHolder
{
	bool		live;
	int			lock;
	int			owner;
	int			mode;
	bool		implied;
	int32_t		count;
	int64_t		token;
	DLockTime	expires_at;
	int64_t		ttl;
	DLockTime	granted_at;
	int32_t		pid;			/* the session that acquired it */
	int64_t		start;
	uint32_t	role;			/* counted and shown under (12) */
	int32_t		kept;			/* levels granted to kept places, uncollected (14) */
	int32_t		permits;		/* a semaphore's (15) */
	bool		has_value;		/* a leader (16) ... */
	char		value[DLOCK_MAX_VALUE_LEN + 1]; /* ... and its value */
} MHolder;

typedef struct MWaiter
{
	bool		live;
	int			lock;
	int			owner;
	int			mode;
	bool		implied;
	int			holder;			/* a conversion: of this holder; else -1 */
	int64_t		ticket;
	int			req;			/* its request */
} MWaiter;

/* A queued request: one plain waiter or a group of parts. */
typedef struct MReq
{
	bool		live;
	int			requester;
	DLockOp		op;
	bool		plain;
	int			owner;
	int32_t		pid;
	int64_t		start;
	uint32_t	role;			/* its parts count under (12) */
	int64_t		ttl;
	bool		keep;			/* made (or resumed) with keep_place (14) */
	int32_t		permits;		/* a semaphore request's (15); 0: a lock's */
	bool		election;		/* a campaign (16) ... */
	char		value[DLOCK_MAX_VALUE_LEN + 1]; /* ... and its value */
	DLockTime	kept_until;		/* a kept place no call waits for: its end; else 0 */
	int64_t		kept_seq;		/* when it was kept: ties of kept_until */
	int			nparts;
	int			nnamed;			/* the named parts come first */
	int			parts[DLOCK_MAX_MULTI * (DLOCK_MAX_PATH_DEPTH + 1)];
} MReq;

struct Model
{
	ModelOptions opt;
	int			nrequesters;
	size_t		max_name_len;
	int64_t		max_objects;	/* 13 */
	int			max_parts;
	int64_t		ticket;			/* the next ticket */
	DLockTime	now;
	int64_t		kept_seq;		/* places kept so far (14) */

	MOwner	   *owners;
	int			nowners,
				cowners;
	MLock	   *locks;
	int			nlocks,
				clocks;
	MHolder    *holders;
	int			nholders,
				cholders;
	MWaiter    *waiters;
	int			nwaiters,
				cwaiters;
	MReq	  **reqs;
	int			nreqs,
				creqs;

	int		   *scan;			/* the scan list (6), a FIFO */
	int			nscan,
				cscan;
	bool	   *in_scan;		/* per lock */
	int			cin_scan;

	int		   *recheck;		/* the recheck list (6.2), a FIFO of owners */
	int			nrecheck,
				crecheck;
	bool	   *in_recheck;		/* per owner */
	int			cin_recheck;

	ModelAnswer *answers;
	int			nanswers,
				canswers;
	const char **notified;
	int			nnotified,
				cnotified;

	ModelEdge  *edges;
	int			nedges,
				cedges;
	int			dl_owner;
	const char *dl_lock;

	/* 18: the service */
	ModelAnswer *bans;			/* the batches' answers since the last commit */
	int			nbans,
				cbans;
	struct MRevoked *revoked;	/* oldest first */
	int			nrevoked,
				crevoked;
	char	  **rnames;			/* force-released names since the last commit */
	int			nrnames,
				crnames;
};

static void *
xrealloc(void *p, size_t n)
{
	p = realloc(p, n);
	if (p == NULL)
	{
		fprintf(stderr, "model: out of memory\n");
		abort();
	}
	return p;
}

static char *
xstrndup(const char *s, size_t n)
{
	char	   *d = xrealloc(NULL, n + 1);

	memcpy(d, s, n);
	d[n] = '\0';
	return d;
}

#define GROW(arr, n, cap) \
	do { \
		if ((n) >= (cap)) \
		{ \
			(cap) = (cap) ? 2 * (cap) : 16; \
			(arr) = xrealloc((arr), (size_t) (cap) * sizeof(*(arr))); \
		} \
	} while (0)

static void
model_bug(const char *what)
{
	fprintf(stderr, "model: internal error: %s\n", what);
	abort();
}

/* 18.5: an administrator's release, remembered */
typedef struct MRevoked
{
	char	   *key;			/* NULL: a session's */
	int32_t		pid;
	int64_t		start;
	char	   *name;			/* NULL: every name of the key */
	char		reason[64];
	DLockTime	at;
	bool		forgotten;		/* by a grant not committed yet */
} MRevoked;

static void
revoked_free(MRevoked *v)
{
	free(v->key);
	free(v->name);
}

void
model_default_options(ModelOptions *opt)
{
	memset(opt, 0, sizeof(*opt));
	/* 1: a group is "a request on several locks"; "/p" has one */
	opt->lone_root_path_group = false;
	/* 8: "a new holder"; an up-conversion keeps its holder */
	opt->upconvert_resets_announced = false;
	/* 9: "a lease is (expires_at, ttl)": renew and a re-entrant take
	 * with a ttl set both */
	opt->renew_sets_ttl = true;
	opt->reentrant_sets_ttl = true;
}

Model *
model_create(int nrequesters, int64_t first_ticket, size_t max_name_len,
			 const ModelOptions *opt)
{
	Model	   *m = xrealloc(NULL, sizeof(Model));

	memset(m, 0, sizeof(*m));
	if (opt)
		m->opt = *opt;
	else
		model_default_options(&m->opt);
	m->nrequesters = nrequesters;
	m->max_name_len = max_name_len;
	m->ticket = first_ticket;
	m->dl_owner = -1;
	return m;
}

void
model_destroy(Model *m)
{
	if (m == NULL)
		return;
	for (int i = 0; i < m->nowners; i++)
		free(m->owners[i].key);
	for (int i = 0; i < m->nlocks; i++)
		free(m->locks[i].name);
	for (int i = 0; i < m->nreqs; i++)
		free(m->reqs[i]);
	free(m->owners);
	free(m->locks);
	free(m->holders);
	free(m->waiters);
	free(m->reqs);
	free(m->scan);
	free(m->in_scan);
	free(m->recheck);
	free(m->in_recheck);
	free(m->answers);
	free(m->notified);
	free(m->edges);
	for (int i = 0; i < m->nrevoked; i++)
		revoked_free(&m->revoked[i]);
	free(m->revoked);
	for (int i = 0; i < m->nrnames; i++)
		free(m->rnames[i]);
	free(m->rnames);
	free(m->bans);
	free(m);
}

/* ---------------------------------------------------------------- */
/* Modes */

static bool
compatible(int mode, DLockModeMask set)
{
	return (dlock_mode_conflicts(mode) & set) == 0;
}

static bool
conflict(int a, int b)
{
	return (dlock_mode_conflicts(a) & DLOCK_MODE_BIT(b)) != 0;
}

/* ---------------------------------------------------------------- */
/* Objects, found by linear scans */

static int
lock_find(const Model *m, const char *name)
{
	for (int i = 0; i < m->nlocks; i++)
		if (strcmp(m->locks[i].name, name) == 0)
			return i;
	return -1;
}

static int
lock_get(Model *m, const char *name)
{
	int			i = lock_find(m, name);
	size_t		len = strlen(name);
	size_t		lens[DLOCK_MAX_PATH_DEPTH];
	int			anc[DLOCK_MAX_PATH_DEPTH];
	int			nanc;

	if (i >= 0)
		return i;
	nanc = dlock_path_ancestor_lengths(name, len, lens, DLOCK_MAX_PATH_DEPTH);
	if (nanc > DLOCK_MAX_PATH_DEPTH)
		model_bug("path too deep");
	for (int k = 0; k < nanc; k++)
	{
		char	   *a = xstrndup(name, lens[k]);

		anc[k] = lock_get(m, a);
		free(a);
	}
	GROW(m->locks, m->nlocks, m->clocks);
	i = m->nlocks++;
	memset(&m->locks[i], 0, sizeof(MLock));
	m->locks[i].name = xstrndup(name, len);
	m->locks[i].nanc = nanc;
	memcpy(m->locks[i].anc, anc, sizeof(int) * (size_t) nanc);
	if (m->cin_scan < m->clocks)
	{
		m->in_scan = xrealloc(m->in_scan, sizeof(bool) * (size_t) m->clocks);
		for (int k = m->cin_scan; k < m->clocks; k++)
			m->in_scan[k] = false;
		m->cin_scan = m->clocks;
	}
	return i;
}

static int
owner_find(const Model *m, const char *key, int32_t pid, int64_t start)
{
	for (int i = 0; i < m->nowners; i++)
	{
		const MOwner *o = &m->owners[i];

		if (key != NULL ? (o->key != NULL && strcmp(o->key, key) == 0)
			: (o->key == NULL && o->pid == pid && o->start == start))
			return i;
	}
	return -1;
}

static int
owner_get(Model *m, const char *key, int32_t pid, int64_t start)
{
	int			i = owner_find(m, key, pid, start);

	if (i >= 0)
		return i;
	GROW(m->owners, m->nowners, m->cowners);
	i = m->nowners++;
	m->owners[i].key = key ? xstrndup(key, strlen(key)) : NULL;
	m->owners[i].pid = key ? 0 : pid;
	m->owners[i].start = key ? 0 : start;
	if (m->cin_recheck < m->cowners)
	{
		m->in_recheck = xrealloc(m->in_recheck, sizeof(bool) * (size_t) m->cowners);
		for (int k = m->cin_recheck; k < m->cowners; k++)
			m->in_recheck[k] = false;
		m->cin_recheck = m->cowners;
	}
	return i;
}

/* 13: what a named lock of an owner counts for: its name's and key's bytes */
static int64_t
lock_bytes(const Model *m, int lock, int owner)
{
	const char *key = m->owners[owner].key;

	return (int64_t) strlen(m->locks[lock].name) + (key ? (int64_t) strlen(key) : 0);
}

/*
 * 13: named locks held or waited for by an owner, or by a role's owners;
 * with bytes, their bytes instead
 */
static int64_t
named_count(const Model *m, int owner, bool by_role, uint32_t role, bool bytes)
{
	int64_t		n = 0;

	for (int i = 0; i < m->nholders; i++)
	{
		const MHolder *h = &m->holders[i];

		if (h->live && !h->implied &&
			(by_role ? h->role == role : h->owner == owner))
			n += bytes ? lock_bytes(m, h->lock, h->owner) : 1;
	}
	for (int i = 0; i < m->nwaiters; i++)
	{
		const MWaiter *w = &m->waiters[i];

		if (w->live && !w->implied && w->holder < 0 &&
			(by_role ? m->reqs[w->req]->role == role : w->owner == owner))
			n += bytes ? lock_bytes(m, w->lock, w->owner) : 1;
	}
	return n;
}

/* 12: an owner that holds or waits for something is its role's */
static bool
owner_in_use(const Model *m, int owner)
{
	for (int i = 0; i < m->nholders; i++)
		if (m->holders[i].live && m->holders[i].owner == owner)
			return true;
	for (int i = 0; i < m->nwaiters; i++)
		if (m->waiters[i].live && m->waiters[i].owner == owner)
			return true;
	return false;
}

/*
 * 12: the role an owner's new holders and waiting parts count under: an
 * owner key's own, a session's the asking request's
 */
static uint32_t
req_role(const Model *m, int owner, const DLmRequest *r)
{
	return m->owners[owner].key ? m->owners[owner].role : r->role;
}

static int
named_holder(const Model *m, int lock, int owner)
{
	for (int i = 0; i < m->nholders; i++)
	{
		const MHolder *h = &m->holders[i];

		if (h->live && !h->implied && h->lock == lock && h->owner == owner)
			return i;
	}
	return -1;
}

static int
implied_holder(const Model *m, int lock, int owner, int mode)
{
	for (int i = 0; i < m->nholders; i++)
	{
		const MHolder *h = &m->holders[i];

		if (h->live && h->implied && h->lock == lock && h->owner == owner &&
			h->mode == mode)
			return i;
	}
	return -1;
}

static int
new_holder(Model *m)
{
	for (int i = 0; i < m->nholders; i++)
		if (!m->holders[i].live)
			return i;
	GROW(m->holders, m->nholders, m->cholders);
	return m->nholders++;
}

static void
set_value(Model *m, int h, const char *value)
{
	m->holders[h].has_value = true;
	strcpy(m->holders[h].value, value);
}

/* The leader of lock (16): its live holder with a value, or -1. */
static int
leader_of(const Model *m, int lock)
{
	for (int i = 0; i < m->nholders; i++)
		if (m->holders[i].live && m->holders[i].lock == lock && m->holders[i].has_value)
			return i;
	return -1;
}

static int
new_waiter(Model *m)
{
	for (int i = 0; i < m->nwaiters; i++)
		if (!m->waiters[i].live)
			return i;
	GROW(m->waiters, m->nwaiters, m->cwaiters);
	return m->nwaiters++;
}

static int
new_req(Model *m)
{
	int			i;

	for (i = 0; i < m->nreqs; i++)
		if (!m->reqs[i]->live)
			break;
	if (i == m->nreqs)
	{
		GROW(m->reqs, m->nreqs, m->creqs);
		m->reqs[m->nreqs++] = xrealloc(NULL, sizeof(MReq));
	}
	memset(m->reqs[i], 0, offsetof(MReq, parts));
	m->reqs[i]->live = true;
	return i;
}

static int
waiting_req(const Model *m, int requester)
{
	if (requester < 0)
		return -1;
	for (int i = 0; i < m->nreqs; i++)
		if (m->reqs[i]->live && m->reqs[i]->requester == requester)
			return i;
	return -1;
}

/* The modes of L's holders of owners other than O. */
static DLockModeMask
others_held(const Model *m, int lock, int owner)
{
	DLockModeMask s = 0;

	for (int i = 0; i < m->nholders; i++)
	{
		const MHolder *h = &m->holders[i];

		if (h->live && h->lock == lock && h->owner != owner)
			s |= DLOCK_MODE_BIT(h->mode);
	}
	return s;
}

/* The modes of all of L's waiters and conversions. */
static DLockModeMask
queued_modes(const Model *m, int lock)
{
	DLockModeMask s = 0;

	for (int i = 0; i < m->nwaiters; i++)
	{
		const MWaiter *w = &m->waiters[i];

		if (w->live && w->lock == lock)
			s |= DLOCK_MODE_BIT(w->mode);
	}
	return s;
}

static bool
grantable_now(const Model *m, int lock, int owner, int mode)
{
	return compatible(mode, others_held(m, lock, owner)) &&
		compatible(mode, queued_modes(m, lock));
}

static bool
covered_by_own(const Model *m, int lock, int owner, int mode)
{
	for (int i = 0; i < m->nholders; i++)
	{
		const MHolder *h = &m->holders[i];

		if (h->live && h->lock == lock && h->owner == owner &&
			dlock_mode_covers(h->mode, mode))
			return true;
	}
	return false;
}

static int
conversion_of(const Model *m, int holder)
{
	for (int i = 0; i < m->nwaiters; i++)
		if (m->waiters[i].live && m->waiters[i].holder == holder)
			return i;
	return -1;
}

/* Sort indices by a 64-bit key (insertion sort: the lists are short). */
static void
sort_by(int *idx, int64_t *key, int n)
{
	for (int i = 1; i < n; i++)
	{
		int			x = idx[i];
		int64_t		k = key[i];
		int			j = i - 1;

		while (j >= 0 && key[j] > k)
		{
			idx[j + 1] = idx[j];
			key[j + 1] = key[j];
			j--;
		}
		idx[j + 1] = x;
		key[j + 1] = k;
	}
}

/*
 * The conversions (conv) or the waiters (!conv) of a lock in ticket order.
 * The caller's buffer must have room for every waiter.
 */
static int
line_of(const Model *m, int lock, bool conv, int *out)
{
	int64_t    *key = xrealloc(NULL, sizeof(int64_t) * (size_t) (m->nwaiters + 1));
	int			n = 0;

	for (int i = 0; i < m->nwaiters; i++)
	{
		const MWaiter *w = &m->waiters[i];

		if (w->live && w->lock == lock && (w->holder >= 0) == conv)
		{
			out[n] = i;
			key[n] = w->ticket;
			n++;
		}
	}
	sort_by(out, key, n);
	free(key);
	return n;
}

/* ---------------------------------------------------------------- */
/* Answers, announcements, the scan list */

static ModelAnswer *
answer(Model *m, int requester, DLockStatus status)
{
	ModelAnswer *a;

	if (requester < 0)
	{
		static ModelAnswer sink;

		memset(&sink, 0, sizeof(sink));
		return &sink;
	}
	GROW(m->answers, m->nanswers, m->canswers);
	a = &m->answers[m->nanswers++];
	memset(a, 0, sizeof(*a));
	a->requester = requester;
	a->status = status;
	return a;
}

static void
answer_holder(Model *m, int requester, int h)
{
	ModelAnswer *a = answer(m, requester, DLOCK_STATUS_GRANTED);

	a->token = m->holders[h].token;
	a->expires_at = m->holders[h].expires_at;
	a->count = m->holders[h].count;
}

/*
 * GRANTED for names taken in order (holders hs[0..n-1]).  3.3: the last
 * name's token, expiry and count; acquire_all: every token, with token =
 * the first, count = the number of names, no expiry.  6.1, after queueing:
 * one name: its token, expiry and count; several (acquire_all): every
 * token, as 3.3.
 */
static void
answer_granted(Model *m, int requester, DLockOp op, const int *hs, int n,
			   bool queued)
{
	ModelAnswer *a = answer(m, requester, DLOCK_STATUS_GRANTED);
	const MHolder *last = &m->holders[hs[n - 1]];

	if (op == DLOCK_OP_ACQUIRE_ALL && (!queued || n > 1))
	{
		a->token = m->holders[hs[0]].token;
		a->expires_at = 0;
		a->count = n;
		a->ntokens = n;
		for (int i = 0; i < n; i++)
			a->tokens[i] = m->holders[hs[i]].token;
		return;
	}
	a->token = last->token;
	a->expires_at = last->expires_at;
	a->count = last->count;
}

static void
announce(Model *m, int lock)
{
	if (m->locks[lock].announced)
		return;
	m->locks[lock].announced = true;
	for (int i = 0; i < m->nnotified; i++)
		if (strcmp(m->notified[i], m->locks[lock].name) == 0)
			return;
	GROW(m->notified, m->nnotified, m->cnotified);
	m->notified[m->nnotified++] = m->locks[lock].name;
}

static void
scan_push(Model *m, int lock)
{
	if (m->in_scan[lock])
		return;
	m->in_scan[lock] = true;
	GROW(m->scan, m->nscan, m->cscan);
	m->scan[m->nscan++] = lock;
}

static int
scan_pop(Model *m)
{
	int			lock;

	if (m->nscan == 0)
		return -1;
	lock = m->scan[0];
	memmove(m->scan, m->scan + 1, sizeof(int) * (size_t) (m->nscan - 1));
	m->nscan--;
	m->in_scan[lock] = false;
	return lock;
}

/* Has owner any waiting part (a plain waiter or conversion, or a group's)? */
static bool
owner_waits(const Model *m, int owner)
{
	for (int i = 0; i < m->nwaiters; i++)
		if (m->waiters[i].live && m->waiters[i].owner == owner)
			return true;
	return false;
}

/*
 * 6.2: owner got a new holder (named or implied) or an up-conversion; if
 * it has waiting parts it goes on the recheck list, at most once.
 */
static void
recheck_push(Model *m, int owner)
{
	if (m->in_recheck[owner] || !owner_waits(m, owner))
		return;
	m->in_recheck[owner] = true;
	GROW(m->recheck, m->nrecheck, m->crecheck);
	m->recheck[m->nrecheck++] = owner;
}

static int
recheck_pop(Model *m)
{
	int			owner;

	if (m->nrecheck == 0)
		return -1;
	owner = m->recheck[0];
	memmove(m->recheck, m->recheck + 1, sizeof(int) * (size_t) (m->nrecheck - 1));
	m->nrecheck--;
	m->in_recheck[owner] = false;	/* cleared when taken off */
	return owner;
}

/* ---------------------------------------------------------------- */
/* Taking and dropping (3.5, 4.1, 5.4) */

static void
add_intention(Model *m, int lock, int owner, int imode, int32_t pid, int64_t start,
			  uint32_t role)
{
	int			h;

	if (imode < 0)
		return;
	h = implied_holder(m, lock, owner, imode);
	if (h >= 0)
	{
		m->holders[h].count++;
		return;
	}
	h = new_holder(m);
	memset(&m->holders[h], 0, sizeof(MHolder));
	m->holders[h].live = true;
	m->holders[h].lock = lock;
	m->holders[h].owner = owner;
	m->holders[h].mode = imode;
	m->holders[h].implied = true;
	m->holders[h].count = 1;
	m->holders[h].token = m->ticket++;
	m->holders[h].granted_at = m->now;
	m->holders[h].pid = pid;
	m->holders[h].start = start;
	m->holders[h].role = role;
	m->locks[lock].announced = false;	/* a new holder */
	recheck_push(m, owner);		/* 6.2 */
}

static void
drop_intention(Model *m, int lock, int owner, int imode)
{
	int			h;

	if (imode < 0)
		return;
	h = implied_holder(m, lock, owner, imode);
	if (h < 0)
		model_bug("an implied holder to drop is missing");
	if (--m->holders[h].count == 0)
		m->holders[h].live = false;
	scan_push(m, lock);
}

/* 3.5 Take lock in mode for owner; returns the named holder. */
static int
take(Model *m, int lock, int owner, int mode, int64_t ttl, int32_t pid, int64_t start,
	 uint32_t role, bool collect, bool uncollected)
{
	int			h = named_holder(m, lock, owner);
	int			imode = dlock_intention_mode(mode);

	if (h >= 0)
	{
		/* 14.4: a call collects a level granted to its kept place */
		if (collect && m->holders[h].kept > 0)
			m->holders[h].kept--;
		else
			m->holders[h].count++;
		if (uncollected)
			m->holders[h].kept++;
		if (ttl > 0)
		{
			m->holders[h].expires_at = m->now + ttl;
			if (m->opt.reentrant_sets_ttl)
				m->holders[h].ttl = ttl;
		}
		return h;
	}
	h = new_holder(m);
	memset(&m->holders[h], 0, sizeof(MHolder));
	m->holders[h].live = true;
	m->holders[h].lock = lock;
	m->holders[h].owner = owner;
	m->holders[h].mode = mode;
	m->holders[h].count = 1;
	m->holders[h].token = m->ticket++;
	m->holders[h].expires_at = ttl > 0 ? m->now + ttl : 0;
	m->holders[h].ttl = ttl > 0 ? ttl : 0;
	m->holders[h].granted_at = m->now;
	m->holders[h].pid = pid;
	m->holders[h].start = start;
	m->holders[h].role = role;
	m->holders[h].kept = uncollected ? 1 : 0;
	m->locks[lock].announced = false;
	recheck_push(m, owner);		/* 6.2: a new named holder */
	for (int k = 0; k < m->locks[lock].nanc; k++)
		add_intention(m, m->locks[lock].anc[k], owner, imode, pid, start, role);
	return h;
}

/*
 * 5.4 and the mode change: convert holder h to mode.  Intentions move only
 * when the intention changes; their tickets come before an up-conversion's
 * new token, and the up-converted holder goes to the end of its lock's and
 * its owner's holders (1: grant order is token order, which is how the
 * model orders them).
 */
static void
convert_holder(Model *m, int h, int mode)
{
	int			lock = m->holders[h].lock;
	int			owner = m->holders[h].owner;
	int			oldi = dlock_intention_mode(m->holders[h].mode);
	int			newi = dlock_intention_mode(mode);
	bool		up = !dlock_mode_covers(m->holders[h].mode, mode);

	if (oldi != newi)
		for (int k = 0; k < m->locks[lock].nanc; k++)
		{
			int			a = m->locks[lock].anc[k];

			add_intention(m, a, owner, newi, m->holders[h].pid, m->holders[h].start,
						  m->holders[h].role);
			drop_intention(m, a, owner, oldi);
		}
	m->holders[h].mode = mode;
	if (up)
	{
		m->holders[h].token = m->ticket++;
		recheck_push(m, owner);	/* 6.2: an up-conversion */
	}
	if (up && m->opt.upconvert_resets_announced)
		m->locks[lock].announced = false;
}

/* A request leaves the line with all its parts. */
static void
req_leave(Model *m, int r, bool scan)
{
	MReq	   *R = m->reqs[r];

	for (int i = 0; i < R->nparts; i++)
	{
		MWaiter    *w = &m->waiters[R->parts[i]];

		if (!w->live)
			continue;
		w->live = false;
		if (scan)
			scan_push(m, w->lock);
	}
	R->live = false;
}

/* ---------------------------------------------------------------- */
/* 6. The grant pass */

/* Is part p (of a group) grantable by the rule of 6? */
static bool
part_grantable(const Model *m, int p)
{
	const MWaiter *P = &m->waiters[p];

	if (P->holder >= 0)
	{
		/* a conversion: the conversions before it and others_held */
		for (int i = 0; i < m->nwaiters; i++)
		{
			const MWaiter *c = &m->waiters[i];

			if (c->live && c->lock == P->lock && c->holder >= 0 &&
				c->ticket < P->ticket && conflict(P->mode, c->mode))
				return false;
		}
		return compatible(P->mode, others_held(m, P->lock, P->owner));
	}
	if (covered_by_own(m, P->lock, P->owner, P->mode))
		return true;
	if (!compatible(P->mode, others_held(m, P->lock, P->owner)))
		return false;
	for (int i = 0; i < m->nwaiters; i++)
	{
		const MWaiter *w = &m->waiters[i];

		if (!w->live || w->lock != P->lock || i == p)
			continue;
		if (w->holder >= 0)
		{
			/* every conversion of its lock */
			if (conflict(P->mode, w->mode))
				return false;
		}
		else if (w->ticket < P->ticket && w->req != P->req &&
				 conflict(P->mode, w->mode))
			return false;		/* a waiter before it, not of its group */
	}
	return true;
}

static bool
others_grantable(const Model *m, int w)
{
	const MReq *R = m->reqs[m->waiters[w].req];

	for (int i = 0; i < R->nparts; i++)
		if (R->parts[i] != w && !part_grantable(m, R->parts[i]))
			return false;
	return true;
}

/* 6.1 Grant a group. */
static void
grant_group(Model *m, int r)
{
	MReq	   *R = m->reqs[r];
	int			hs[DLOCK_MAX_MULTI];

	for (int i = 0; i < R->nnamed; i++)
	{
		MWaiter    *w = &m->waiters[R->parts[i]];
		int			h = named_holder(m, w->lock, R->owner);

		if (w->holder < 0 && h >= 0 &&
			!dlock_mode_covers(m->holders[h].mode, w->mode))
		{
			ModelAnswer *a = answer(m, R->requester, DLOCK_STATUS_MODE_HELD);

			a->name_index = i;
			a->count = m->holders[h].mode;
			req_leave(m, r, true);
			return;
		}
	}
	for (int i = 0; i < R->nnamed; i++)
	{
		MWaiter    *w = &m->waiters[R->parts[i]];

		if (w->holder >= 0)
		{
			convert_holder(m, w->holder, w->mode);
			hs[i] = w->holder;
		}
		else
			hs[i] = take(m, w->lock, R->owner, w->mode, R->ttl, R->pid, R->start, R->role,
						 false, R->kept_until != 0);
	}
	answer_granted(m, R->requester, R->op, hs, R->nnamed, true);
	req_leave(m, r, true);
}

static void semaphore_pass(Model *m, int lock);

static void
grant_pass(Model *m, int lock)
{
	int		   *line;
	int			n;
	DLockModeMask ahead = 0;

	if (m->locks[lock].capacity > 0)
	{
		semaphore_pass(m, lock);
		return;
	}
	line = xrealloc(NULL, sizeof(int) * (size_t) (m->nwaiters + 1));

	n = line_of(m, lock, true, line);
	for (int i = 0; i < n; i++)
	{
		int			w = line[i];
		MWaiter    *W = &m->waiters[w];
		int			r = W->req;

		if (!W->live)
			continue;
		if (compatible(W->mode, ahead) &&
			compatible(W->mode, others_held(m, lock, W->owner)))
		{
			if (m->reqs[r]->plain)
			{
				int			h = W->holder;

				req_leave(m, r, false);
				convert_holder(m, h, W->mode);
				answer_holder(m, m->reqs[r]->requester, h);
				/* its old mode may have held back one before it */
				if (ahead)
					scan_push(m, lock);
				continue;
			}
			if (others_grantable(m, w))
			{
				grant_group(m, r);
				free(line);
				return;
			}
		}
		ahead |= DLOCK_MODE_BIT(W->mode);
	}

	n = line_of(m, lock, false, line);
	for (int i = 0; i < n; i++)
	{
		int			w = line[i];
		MWaiter    *W = &m->waiters[w];
		int			r = W->req;

		if (!W->live)
			continue;
		if (compatible(W->mode, ahead) &&
			compatible(W->mode, others_held(m, lock, W->owner)))
		{
			MReq	   *R = m->reqs[r];

			if (R->plain)
			{
				int			h = named_holder(m, lock, W->owner);
				int			mode = W->mode;

				req_leave(m, r, false);
				if (h >= 0 && m->locks[lock].election)
				{
					/* 16.3: led once */
					answer(m, R->requester, DLOCK_STATUS_ERROR)->error = DLM_ERR_HELD_ONCE;
					continue;
				}
				if (h >= 0 && !dlock_mode_covers(m->holders[h].mode, mode))
				{
					ModelAnswer *a = answer(m, R->requester, DLOCK_STATUS_MODE_HELD);

					a->name_index = 0;
					a->count = m->holders[h].mode;
					/* it left the line: nothing added to ahead */
					continue;
				}
				h = take(m, lock, R->owner, mode, R->ttl, R->pid, R->start, R->role,
						 false, R->kept_until != 0);
				if (R->election)
					set_value(m, h, R->value);
				answer_granted(m, R->requester, R->op, &h, 1, true);
				continue;
			}
			if (others_grantable(m, w))
			{
				grant_group(m, r);
				free(line);
				return;
			}
		}
		ahead |= DLOCK_MODE_BIT(W->mode);
	}
	free(line);
}

/*
 * 6.2 Recheck owner: its waiting groups in the order queued (by the ticket
 * of each one's first part); the first whose every part is grantable (the
 * part test of 6) is granted (6.1), and the look starts again from the
 * first; until none is.
 */
static void
recheck_owner(Model *m, int owner)
{
	for (;;)
	{
		int			best;
		int64_t		after = -1;	/* the first part's ticket of the last looked at */

		for (;;)
		{
			/* the next group of owner in the order queued */
			best = -1;
			for (int r = 0; r < m->nreqs; r++)
			{
				const MReq *R = m->reqs[r];
				int64_t		t;

				if (!R->live || R->plain || R->owner != owner)
					continue;
				t = m->waiters[R->parts[0]].ticket;
				if (t > after &&
					(best < 0 || t < m->waiters[m->reqs[best]->parts[0]].ticket))
					best = r;
			}
			if (best < 0)
				return;			/* none is grantable */
			{
				const MReq *R = m->reqs[best];
				bool		all = true;

				for (int i = 0; i < R->nparts && all; i++)
					if (!part_grantable(m, R->parts[i]))
						all = false;
				if (all)
					break;
				after = m->waiters[R->parts[0]].ticket;
			}
		}
		grant_group(m, best);
		/* and look again from the first */
	}
}

/*
 * End of every event: while the scan list has a lock, pass over the first;
 * when it is empty, recheck the first owner of the recheck list (6.2);
 * until both are empty.
 */
static void
drain(Model *m)
{
	for (;;)
	{
		int			lock = scan_pop(m);
		int			owner;

		if (lock >= 0)
		{
			grant_pass(m, lock);
			continue;
		}
		owner = recheck_pop(m);
		if (owner < 0)
			break;
		recheck_owner(m, owner);
	}
}

/* ---------------------------------------------------------------- */
/* 7. Deadlocks */

typedef struct Blocker
{
	int			owner;
	bool		held;
	int32_t		pid;
	bool		keyed;
} Blocker;

static int32_t
owner_pid(const Model *m, int owner, int32_t keyed_pid)
{
	return m->owners[owner].key ? keyed_pid : m->owners[owner].pid;
}

/* Whom part p waits for (section 7); returns how many (into out, if given). */
static int
blockers_of(const Model *m, int p, Blocker *out, int max)
{
	const MWaiter *P = &m->waiters[p];
	bool		conv = P->holder >= 0;
	int			n = 0;

	if (!conv && covered_by_own(m, P->lock, P->owner, P->mode))
		return 0;
	for (int i = 0; i < m->nholders; i++)
	{
		const MHolder *h = &m->holders[i];

		if (h->live && h->lock == P->lock && h->owner != P->owner &&
			conflict(P->mode, h->mode))
		{
			if (n < max)
			{
				out[n].owner = h->owner;
				out[n].held = true;
				out[n].keyed = m->owners[h->owner].key != NULL;
				out[n].pid = owner_pid(m, h->owner, h->pid);
			}
			n++;
		}
	}
	for (int i = 0; i < m->nwaiters; i++)
	{
		const MWaiter *w = &m->waiters[i];

		if (!w->live || w->lock != P->lock || w->owner == P->owner ||
			!conflict(P->mode, w->mode))
			continue;
		if (w->holder >= 0 ? (!conv || w->ticket < P->ticket)
			: (!conv && w->ticket < P->ticket))
		{
			if (n < max)
			{
				out[n].owner = w->owner;
				out[n].held = false;
				out[n].keyed = m->owners[w->owner].key != NULL;
				out[n].pid = owner_pid(m, w->owner, m->reqs[w->req]->pid);
			}
			n++;
		}
	}
	return n;
}

#define MAX_BLOCKERS 4096

/* Does owner 'from' wait, through the owners' waiting parts, for 'to'? */
static bool
reaches(const Model *m, int from, int to)
{
	bool	   *seen = xrealloc(NULL, (size_t) m->nowners + 1);
	int		   *queue = xrealloc(NULL, sizeof(int) * ((size_t) m->nowners + 1));
	Blocker    *bl = xrealloc(NULL, sizeof(Blocker) * MAX_BLOCKERS);
	int			head = 0,
				tail = 0;
	bool		found = false;

	memset(seen, 0, (size_t) m->nowners + 1);
	seen[from] = true;
	queue[tail++] = from;
	while (head < tail && !found)
	{
		int			x = queue[head++];

		if (x == to)
		{
			found = true;
			break;
		}
		for (int i = 0; i < m->nwaiters && !found; i++)
		{
			int			nb;

			if (!m->waiters[i].live || m->waiters[i].owner != x)
				continue;
			nb = blockers_of(m, i, bl, MAX_BLOCKERS);
			if (nb > MAX_BLOCKERS)
				model_bug("too many blockers");
			for (int k = 0; k < nb; k++)
				if (!seen[bl[k].owner])
				{
					seen[bl[k].owner] = true;
					queue[tail++] = bl[k].owner;
				}
		}
	}
	free(seen);
	free(queue);
	free(bl);
	return found;
}

static void
snapshot_edges(Model *m, int r)
{
	Blocker    *bl = xrealloc(NULL, sizeof(Blocker) * MAX_BLOCKERS);

	m->nedges = 0;
	for (int i = 0; i < m->nwaiters; i++)
	{
		const MWaiter *w = &m->waiters[i];
		int			nb;

		if (!w->live)
			continue;
		nb = blockers_of(m, i, bl, MAX_BLOCKERS);
		for (int k = 0; k < nb; k++)
		{
			ModelEdge  *e;

			GROW(m->edges, m->nedges, m->cedges);
			e = &m->edges[m->nedges++];
			e->waiter_owner = w->owner;
			e->waiter_keyed = m->owners[w->owner].key != NULL;
			e->waiter_pid = owner_pid(m, w->owner, m->reqs[w->req]->pid);
			e->waiter_new = w->req == r;
			e->lock = m->locks[w->lock].name;
			e->held = bl[k].held;
			e->blocker_owner = bl[k].owner;
			e->blocker_keyed = bl[k].keyed;
			e->blocker_pid = bl[k].pid;
		}
	}
	free(bl);
}

/* After request r queued: true if it closed a cycle (then it is withdrawn). */
static bool
deadlock_check(Model *m, int r)
{
	MReq	   *R = m->reqs[r];
	Blocker    *bl = xrealloc(NULL, sizeof(Blocker) * MAX_BLOCKERS);
	int			first = -1;

	for (int i = 0; i < R->nparts && first < 0; i++)
	{
		int			nb = blockers_of(m, R->parts[i], bl, MAX_BLOCKERS);

		for (int k = 0; k < nb && first < 0; k++)
			if (reaches(m, bl[k].owner, R->owner))
				first = i;
	}
	free(bl);
	if (first < 0)
		return false;
	snapshot_edges(m, r);
	m->dl_owner = R->owner;
	m->dl_lock = m->locks[m->waiters[R->parts[first]].lock].name;
	req_leave(m, r, true);
	answer(m, R->requester, DLOCK_STATUS_DEADLOCK);
	return true;
}

static bool kept_behind(Model *m, int q, ModelAnswer *a);

/*
 * Request r has queued: answer, announce (8), check for a deadlock (7), keep
 * its place at once if it is behind another request (14.8).
 */
static void
queued(Model *m, int r)
{
	MReq	   *R = m->reqs[r];
	int			before = m->nanswers;
	ModelAnswer *a = answer(m, R->requester, DLOCK_STATUS_QUEUED);

	a->token = m->waiters[R->parts[0]].ticket;
	for (int i = 0; i < R->nparts; i++)
	{
		const MWaiter *w = &m->waiters[R->parts[i]];

		for (int k = 0; k < m->nholders; k++)
		{
			const MHolder *h = &m->holders[k];

			if (h->live && h->lock == w->lock && h->owner != w->owner &&
				conflict(w->mode, h->mode))
			{
				announce(m, w->lock);
				break;
			}
		}
	}
	if (deadlock_check(m, r) && R->requester >= 0)
	{
		/* only the DEADLOCK answer: drop the QUEUED one */
		memmove(&m->answers[before], &m->answers[before + 1],
				sizeof(ModelAnswer) * (size_t) (m->nanswers - before - 1));
		m->nanswers--;
	}
	else if (R->requester >= 0)
		kept_behind(m, r, &m->answers[before]);
}

static int
add_part(Model *m, int r, int lock, int mode, bool implied, int holder)
{
	MReq	   *R = m->reqs[r];
	int			w = new_waiter(m);
	MWaiter    *W = &m->waiters[w];

	W->live = true;
	W->lock = lock;
	W->owner = R->owner;
	W->mode = mode;
	W->implied = implied;
	W->holder = holder;
	W->ticket = m->ticket++;
	W->req = r;
	if (R->nparts >= (int) (sizeof(R->parts) / sizeof(R->parts[0])))
		model_bug("too many parts");
	R->parts[R->nparts++] = w;
	return w;
}

/* ---------------------------------------------------------------- */
/* Requests */

static DLmError
validate(const Model *m, const DLmRequest *r)
{
	bool		names_needed;

	if (r->op < DLOCK_OP_ACQUIRE || r->op > DLOCK_OP_PROCLAIM)
		return DLM_ERR_BAD_REQUEST;
	if (r->requester != DLM_NOBODY &&
		(r->requester < 0 || r->requester >= m->nrequesters))
		return DLM_ERR_BAD_REQUEST;
	if ((r->op == DLOCK_OP_ACQUIRE || r->op == DLOCK_OP_TRY ||
		 r->op == DLOCK_OP_ACQUIRE_ALL || r->op == DLOCK_OP_CONVERT) &&
		(r->mode < 0 || r->mode >= DLOCK_NMODES))
		return DLM_ERR_BAD_REQUEST;
	names_needed = r->op != DLOCK_OP_RELEASE_ALL;
	if (names_needed &&
		(r->names == NULL || r->nnames < 1 || r->nnames > DLOCK_MAX_MULTI))
		return DLM_ERR_BAD_REQUEST;
	if (r->ttl_us < 0 || r->max_ttl_us < 0)
		return DLM_ERR_BAD_REQUEST;
	/* 16.1 */
	if ((r->election || r->op == DLOCK_OP_PROCLAIM) &&
		(r->value == NULL || strlen(r->value) > DLOCK_MAX_VALUE_LEN || r->nnames != 1 ||
		 r->names == NULL || r->names[0] == NULL ||
		 (r->election && (r->capacity != 0 || r->mode != DLOCK_MODE_EX || r->names[0][0] == '/' ||
						  !(r->op == DLOCK_OP_ACQUIRE || r->op == DLOCK_OP_TRY)))))
		return DLM_ERR_BAD_ELECTION;
	/* 15.1 */
	if (r->capacity != 0 &&
		(r->capacity < 0 || r->permits < 1 || r->permits > r->capacity ||
		 !(r->op == DLOCK_OP_ACQUIRE || r->op == DLOCK_OP_TRY) || r->nnames != 1 ||
		 r->names == NULL || r->names[0] == NULL || r->names[0][0] == '/'))
		return DLM_ERR_BAD_SEMAPHORE;
	/* 14.1 */
	if (r->keep_place &&
		(r->op == DLOCK_OP_TRY ||
		 ((r->op == DLOCK_OP_ACQUIRE || r->op == DLOCK_OP_ACQUIRE_ALL) &&
		  (r->owner_key == NULL || r->ttl_us <= 0))))
		return DLM_ERR_KEEP_PLACE;
	if (names_needed)
		for (int i = 0; i < r->nnames; i++)
			if (r->names[i] == NULL ||
				dlock_check_name(r->names[i], strlen(r->names[i]),
								 m->max_name_len) != DLOCK_CHECK_OK)
				return DLM_ERR_BAD_NAME;
	if (r->owner_key != NULL &&
		dlock_check_owner(r->owner_key, strlen(r->owner_key)) != DLOCK_CHECK_OK)
		return DLM_ERR_BAD_OWNER;
	if (r->op == DLOCK_OP_ACQUIRE_ALL)
		for (int i = 1; i < r->nnames; i++)
			if (strcmp(r->names[i - 1], r->names[i]) >= 0)
				return DLM_ERR_NOT_SORTED;
	return DLM_OK;
}

/* ---------------------------------------------------------------- */
/* 15. Counting semaphores */

/* A lock held or waited for (15.2); lock_empty: neither (the store frees it). */
static bool
lock_in_use(const Model *m, int lock)
{
	for (int i = 0; i < m->nholders; i++)
		if (m->holders[i].live && m->holders[i].lock == lock)
			return true;
	for (int i = 0; i < m->nwaiters; i++)
		if (m->waiters[i].live && m->waiters[i].lock == lock)
			return true;
	return false;
}

static bool
lock_empty(const Model *m, int lock)
{
	return !lock_in_use(m, lock);
}

static int64_t
permits_held(const Model *m, int lock)
{
	int64_t		n = 0;

	for (int i = 0; i < m->nholders; i++)
		if (m->holders[i].live && m->holders[i].lock == lock)
			n += m->holders[i].permits;
	return n;
}

/* A new holder of permits (O holds none of this semaphore): 3.5 in mode NL. */
static int
semaphore_take(Model *m, int lock, int owner, int32_t permits, int64_t ttl, int32_t pid,
			   int64_t start, uint32_t role, bool uncollected)
{
	int			h = take(m, lock, owner, DLOCK_MODE_NL, ttl, pid, start, role, false,
					 uncollected);

	m->holders[h].permits = permits;
	return h;
}

/* 15.3 */
static void
do_semaphore(Model *m, const DLmRequest *r, int owner)
{
	int			lock = lock_get(m, r->names[0]);
	int			h;
	bool		waiters = false;

	if (!lock_in_use(m, lock))
	{
		m->locks[lock].capacity = r->capacity;
		m->locks[lock].election = false;
	}
	h = named_holder(m, lock, owner);
	if (h >= 0 && m->holders[h].kept > 0)
	{
		m->holders[h].kept--;
		if (r->ttl_us > 0)
		{
			m->holders[h].expires_at = m->now + r->ttl_us;
			m->holders[h].ttl = r->ttl_us;
		}
		answer_holder(m, r->requester, h);
		return;
	}
	if (h >= 0)
	{
		answer(m, r->requester, DLOCK_STATUS_ERROR)->error = DLM_ERR_HELD_ONCE;
		return;
	}
	for (int i = 0; i < m->nwaiters; i++)
		if (m->waiters[i].live && m->waiters[i].lock == lock)
			waiters = true;
	if (!waiters && permits_held(m, lock) + r->permits <= m->locks[lock].capacity)
	{
		h = semaphore_take(m, lock, owner, r->permits, r->ttl_us, r->pid, r->session_start,
						   req_role(m, owner, r), false);
		answer_holder(m, r->requester, h);
		return;
	}
	if (r->op == DLOCK_OP_TRY)
	{
		answer(m, r->requester, DLOCK_STATUS_REFUSED);
		return;
	}
	{
		int			q = new_req(m);
		ModelAnswer *a;
		bool		held = false;

		m->reqs[q]->requester = r->requester;
		m->reqs[q]->op = r->op;
		m->reqs[q]->owner = owner;
		m->reqs[q]->pid = r->pid;
		m->reqs[q]->start = r->session_start;
		m->reqs[q]->role = req_role(m, owner, r);
		m->reqs[q]->ttl = r->ttl_us;
		m->reqs[q]->keep = r->keep_place;
		m->reqs[q]->permits = r->permits;
		m->reqs[q]->plain = true;
		m->reqs[q]->nnamed = 1;
		add_part(m, q, lock, DLOCK_MODE_NL, false, -1);
		/* 8: announced when it waits behind holders */
		for (int i = 0; i < m->nholders; i++)
			held = held || (m->holders[i].live && m->holders[i].lock == lock);
		if (held)
			announce(m, lock);
		a = answer(m, r->requester, DLOCK_STATUS_QUEUED);
		a->token = m->waiters[m->reqs[q]->parts[0]].ticket;
		kept_behind(m, q, a);
	}
}

/* 15.4: waiters in ticket order while their permits fit. */
static void
semaphore_pass(Model *m, int lock)
{
	for (;;)
	{
		int			first = -1;
		MReq	   *R;
		int			h;

		for (int i = 0; i < m->nwaiters; i++)
			if (m->waiters[i].live && m->waiters[i].lock == lock &&
				(first < 0 || m->waiters[i].ticket < m->waiters[first].ticket))
				first = i;
		if (first < 0)
			return;
		R = m->reqs[m->waiters[first].req];
		if (permits_held(m, lock) + R->permits > m->locks[lock].capacity)
			return;
		req_leave(m, m->waiters[first].req, false);
		if (named_holder(m, lock, R->owner) >= 0)
		{
			answer(m, R->requester, DLOCK_STATUS_ERROR)->error = DLM_ERR_HELD_ONCE;
			continue;
		}
		h = semaphore_take(m, lock, R->owner, R->permits, R->ttl, R->pid, R->start, R->role,
						   R->kept_until != 0);
		answer_holder(m, R->requester, h);
	}
}

/* ---------------------------------------------------------------- */
/* 16. Leader election */


/* 16.3 */
static void
do_campaign(Model *m, const DLmRequest *r, int owner)
{
	int			lock = lock_get(m, r->names[0]);
	int			h;
	bool		busy = false;

	if (!lock_in_use(m, lock))
	{
		m->locks[lock].election = true;
		m->locks[lock].capacity = 0;
	}
	h = named_holder(m, lock, owner);
	if (h >= 0 && m->holders[h].kept > 0)
	{
		m->holders[h].kept--;
		if (r->ttl_us > 0)
		{
			m->holders[h].expires_at = m->now + r->ttl_us;
			m->holders[h].ttl = r->ttl_us;
		}
		set_value(m, h, r->value);
		answer_holder(m, r->requester, h);
		return;
	}
	if (h >= 0)
	{
		answer(m, r->requester, DLOCK_STATUS_ERROR)->error = DLM_ERR_HELD_ONCE;
		return;
	}
	busy = lock_in_use(m, lock);
	if (!busy)
	{
		h = take(m, lock, owner, DLOCK_MODE_EX, r->ttl_us, r->pid, r->session_start,
				 req_role(m, owner, r), false, false);
		set_value(m, h, r->value);
		answer_holder(m, r->requester, h);
		return;
	}
	if (r->op == DLOCK_OP_TRY)
	{
		answer(m, r->requester, DLOCK_STATUS_REFUSED);
		return;
	}
	{
		int			q = new_req(m);

		m->reqs[q]->requester = r->requester;
		m->reqs[q]->op = r->op;
		m->reqs[q]->owner = owner;
		m->reqs[q]->pid = r->pid;
		m->reqs[q]->start = r->session_start;
		m->reqs[q]->role = req_role(m, owner, r);
		m->reqs[q]->ttl = r->ttl_us;
		m->reqs[q]->keep = r->keep_place;
		m->reqs[q]->election = true;
		strcpy(m->reqs[q]->value, r->value);
		m->reqs[q]->plain = true;
		m->reqs[q]->nnamed = 1;
		add_part(m, q, lock, DLOCK_MODE_EX, false, -1);
		queued(m, q);
	}
}

/* 16.4 */
static void
do_proclaim(Model *m, const DLmRequest *r, int owner)
{
	int			lock = lock_find(m, r->names[0]);
	int			h = lock >= 0 && owner >= 0 ? named_holder(m, lock, owner) : -1;

	if (h < 0)
		answer(m, r->requester, DLOCK_STATUS_NOT_HELD);
	else if (!m->locks[lock].election)
		answer(m, r->requester, DLOCK_STATUS_ERROR)->error =
			m->locks[lock].capacity > 0 ? DLM_ERR_IS_SEMAPHORE : DLM_ERR_IS_LOCK;
	else
	{
		set_value(m, h, r->value);
		answer_holder(m, r->requester, h);
	}
}

/* 3. acquire, try, acquire_all */
static void
do_acquire(Model *m, const DLmRequest *r, int owner)
{
	int			locks[DLOCK_MAX_MULTI];
	int			hs[DLOCK_MAX_MULTI];
	int			imode = dlock_intention_mode(r->mode);
	bool		grantable = true;
	int			q;

	for (int i = 0; i < r->nnames; i++)
	{
		locks[i] = lock_get(m, r->names[i]);
		if (!lock_in_use(m, locks[i]))
		{
			m->locks[locks[i]].capacity = 0;	/* 15.2: a lock now */
			m->locks[locks[i]].election = false;
		}
	}

	/* 3.1 */
	for (int i = 0; i < r->nnames; i++)
	{
		int			h = named_holder(m, locks[i], owner);

		if (h >= 0 && !dlock_mode_covers(m->holders[h].mode, r->mode))
		{
			ModelAnswer *a = answer(m, r->requester, DLOCK_STATUS_MODE_HELD);

			a->name_index = i;
			a->count = m->holders[h].mode;
			return;
		}
	}

	/*
	 * 3.2: a name O does not hold yet is covered by its own holders or
	 * grantable now (one it holds is re-entrant); every proper ancestor of
	 * every path name, held ones too, likewise for intention(M).
	 */
	for (int i = 0; i < r->nnames && grantable; i++)
	{
		const MLock *L = &m->locks[locks[i]];

		if (named_holder(m, locks[i], owner) < 0 &&
			!covered_by_own(m, locks[i], owner, r->mode) &&
			!grantable_now(m, locks[i], owner, r->mode))
			grantable = false;
		if (imode >= 0)
			for (int k = 0; k < L->nanc; k++)
				if (!covered_by_own(m, L->anc[k], owner, imode) &&
					!grantable_now(m, L->anc[k], owner, imode))
					grantable = false;
	}

	/* 3.3 */
	if (grantable)
	{
		for (int i = 0; i < r->nnames; i++)
			hs[i] = take(m, locks[i], owner, r->mode, r->ttl_us, r->pid,
						 r->session_start, req_role(m, owner, r), true, false);
		answer_granted(m, r->requester, r->op, hs, r->nnames, false);
		return;
	}

	/* 3.4 */
	if (r->op == DLOCK_OP_TRY)
	{
		answer(m, r->requester, DLOCK_STATUS_REFUSED);
		return;
	}
	q = new_req(m);
	m->reqs[q]->requester = r->requester;
	m->reqs[q]->op = r->op;
	m->reqs[q]->owner = owner;
	m->reqs[q]->pid = r->pid;
	m->reqs[q]->start = r->session_start;
	m->reqs[q]->role = req_role(m, owner, r);
	m->reqs[q]->ttl = r->ttl_us;
	m->reqs[q]->keep = r->keep_place;
	m->reqs[q]->kept_until = 0;
	m->reqs[q]->plain = false;
	/*
	 * 3.4: a single flat name O does not hold is one waiter; anything else
	 * a group: a waiter per name (held ones too), then an implied waiter
	 * per (ancestor, intention) of every path name (held ones too), in name
	 * order, shortest ancestor first, duplicates kept.
	 */
	if (r->nnames == 1 && named_holder(m, locks[0], owner) < 0)
	{
		if (!dlock_name_is_path(r->names[0], strlen(r->names[0])))
			m->reqs[q]->plain = true;
		else if (m->locks[locks[0]].nanc == 0)
			m->reqs[q]->plain = !m->opt.lone_root_path_group;
	}
	for (int i = 0; i < r->nnames; i++)
		add_part(m, q, locks[i], r->mode, false, -1);
	m->reqs[q]->nnamed = r->nnames;
	if (imode >= 0)
		for (int i = 0; i < r->nnames; i++)
		{
			const MLock *L = &m->locks[locks[i]];

			for (int k = 0; k < L->nanc; k++)
				add_part(m, q, L->anc[k], imode, true, -1);
		}
	queued(m, q);
}

/* 4.1 The last release of holder h (also an expired lease's). */
static void
last_release(Model *m, int h)
{
	int			lock = m->holders[h].lock;
	int			owner = m->holders[h].owner;
	int			imode = dlock_intention_mode(m->holders[h].mode);
	int			c = conversion_of(m, h);

	m->holders[h].live = false;
	if (c >= 0)
	{
		int			r = m->waiters[c].req;

		answer(m, m->reqs[r]->requester, DLOCK_STATUS_NOT_HELD);
		req_leave(m, r, true);	/* 2: its parts' locks on the scan list */
	}
	for (int k = 0; k < m->locks[lock].nanc; k++)
		drop_intention(m, m->locks[lock].anc[k], owner, imode);
	grant_pass(m, lock);
}

/* ---------------------------------------------------------------- */
/* 14. Kept places */

static int64_t
req_ticket(const Model *m, int q)
{
	return m->waiters[m->reqs[q]->parts[0]].ticket;
}

/* 14.2: the request stays in line, no call waiting, until now + ttl. */
static void
keep(Model *m, int q)
{
	MReq	   *R = m->reqs[q];

	R->requester = DLM_NOBODY;
	R->kept_until = m->now + (R->ttl > 0 ? R->ttl : 1);
	R->kept_seq = m->kept_seq++;
}

/*
 * 14.8: a keep_place request with a call waiting that has another request
 * ahead of it in the line of one of its names keeps its place at once: its
 * QUEUED answer a becomes KEPT.
 */
static bool
kept_behind(Model *m, int q, ModelAnswer *a)
{
	MReq	   *R = m->reqs[q];

	if (!R->keep || R->requester < 0)
		return false;
	for (int i = 0; i < R->nnamed; i++)
	{
		const MWaiter *w = &m->waiters[R->parts[i]];

		for (int k = 0; k < m->nwaiters; k++)
		{
			const MWaiter *o = &m->waiters[k];

			if (o->live && o->lock == w->lock && o->holder < 0 && o->ticket < w->ticket)
			{
				keep(m, q);
				a->status = DLOCK_STATUS_KEPT;
				a->token = req_ticket(m, q);
				a->expires_at = R->kept_until;
				return true;
			}
		}
	}
	return false;
}

/* 14.3: owner's kept place on exactly these names in mode (earliest). */
static int
kept_place(const Model *m, int owner, const DLmRequest *r)
{
	int			best = -1;

	for (int q = 0; q < m->nreqs; q++)
	{
		const MReq *R = m->reqs[q];
		bool		same;

		if (!R->live || R->owner != owner || R->kept_until == 0 ||
			R->nnamed != r->nnames ||
			m->waiters[R->parts[0]].mode != (r->capacity > 0 ? DLOCK_MODE_NL : r->mode) ||
			R->permits != (r->capacity > 0 ? r->permits : 0))
			continue;
		same = true;
		for (int i = 0; i < r->nnames && same; i++)
			same = strcmp(m->locks[m->waiters[R->parts[i]].lock].name, r->names[i]) == 0;
		if (same && (best < 0 || req_ticket(m, q) < req_ticket(m, best)))
			best = q;
	}
	return best;
}

/* 14.5: owner's kept places naming lock leave the line; the first's ticket. */
static int64_t
release_kept(Model *m, int owner, int lock)
{
	int64_t		first = 0;

	for (;;)
	{
		int			best = -1;

		for (int q = 0; q < m->nreqs; q++)
		{
			const MReq *R = m->reqs[q];
			bool		names = false;

			if (!R->live || R->owner != owner || R->kept_until == 0)
				continue;
			for (int i = 0; i < R->nnamed; i++)
				names = names || m->waiters[R->parts[i]].lock == lock;
			if (names && (best < 0 || req_ticket(m, q) < req_ticket(m, best)))
				best = q;
		}
		if (best < 0)
			return first;
		if (first == 0)
			first = req_ticket(m, best);
		req_leave(m, best, true);
	}
}

static void
do_release(Model *m, const DLmRequest *r, int owner)
{
	for (int i = 0; i < r->nnames; i++)
	{
		int			lock = lock_get(m, r->names[i]);
		int64_t		kept = release_kept(m, owner, lock);
		int			h = named_holder(m, lock, owner);
		ModelAnswer *a;

		if (h < 0 && kept != 0)
		{
			a = answer(m, r->requester, DLOCK_STATUS_RELEASED);
			a->token = kept;
			continue;
		}
		if (h < 0)
		{
			answer(m, r->requester, DLOCK_STATUS_NOT_HELD);
			continue;
		}
		a = answer(m, r->requester, DLOCK_STATUS_RELEASED);
		a->token = m->holders[h].token;
		if (m->holders[h].count > 1)
		{
			a->count = --m->holders[h].count;
			continue;
		}
		a->count = 0;
		last_release(m, h);
	}
}

static void
do_renew(Model *m, const DLmRequest *r, int owner)
{
	int			lock = lock_get(m, r->names[0]);
	int			h = named_holder(m, lock, owner);
	int64_t		ttl;
	ModelAnswer *a;

	if (h < 0)
	{
		answer(m, r->requester, DLOCK_STATUS_NOT_HELD);
		return;
	}
	ttl = r->ttl_us > 0 ? r->ttl_us : m->holders[h].ttl;
	if (r->max_ttl_us > 0 && ttl > r->max_ttl_us)
		ttl = r->max_ttl_us;
	if (ttl > 0)
	{
		m->holders[h].expires_at = m->now + ttl;
		if (m->opt.renew_sets_ttl)
			m->holders[h].ttl = ttl;
	}
	a = answer(m, r->requester, DLOCK_STATUS_RENEWED);
	a->token = m->holders[h].token;
	a->expires_at = m->holders[h].expires_at;
	a->count = m->holders[h].count;
}

/* 4.3 Everything of owner ends; returns COUNT. */
static int
end_all(Model *m, int owner, int requester)
{
	int		   *idx;
	int64_t    *key;
	int			n = 0,
				count = 0,
				cap = (m->nwaiters > m->nholders ? m->nwaiters : m->nholders) + 1;

	if (owner < 0)
		return 0;
	idx = xrealloc(NULL, sizeof(int) * (size_t) cap);
	key = xrealloc(NULL, sizeof(int64_t) * (size_t) cap);

	/* waiters, as queued */
	for (int i = 0; i < m->nwaiters; i++)
		if (m->waiters[i].live && m->waiters[i].owner == owner)
		{
			idx[n] = i;
			key[n] = m->waiters[i].ticket;
			n++;
		}
	sort_by(idx, key, n);
	for (int i = 0; i < n; i++)
	{
		MWaiter    *w = &m->waiters[idx[i]];
		MReq	   *R = m->reqs[w->req];

		if (R->live)
		{
			/* its first part to leave: the request is answered */
			R->live = false;
			if (R->requester != requester)
				answer(m, R->requester, DLOCK_STATUS_WITHDRAWN);
		}
		w->live = false;
		scan_push(m, w->lock);
		if (!w->implied)
			count++;
	}

	/* then holders, as granted */
	n = 0;
	for (int i = 0; i < m->nholders; i++)
		if (m->holders[i].live && m->holders[i].owner == owner)
		{
			idx[n] = i;
			key[n] = m->holders[i].token;	/* grant order (1) */
			n++;
		}
	sort_by(idx, key, n);
	for (int i = 0; i < n; i++)
	{
		MHolder    *h = &m->holders[idx[i]];

		h->live = false;
		scan_push(m, h->lock);
		if (!h->implied)
			count++;
	}
	free(idx);
	free(key);
	return count;
}

/* 5. convert */
static void
do_convert(Model *m, const DLmRequest *r, int owner)
{
	int			lock = lock_get(m, r->names[0]);
	int			h = named_holder(m, lock, owner);
	int			imode = dlock_intention_mode(r->mode);
	int			needed[DLOCK_MAX_PATH_DEPTH];
	int			nneeded = 0;
	bool		grantable;
	int			q;

	/* 5.1 */
	if (h < 0)
	{
		answer(m, r->requester, DLOCK_STATUS_NOT_HELD);
		return;
	}
	if (m->locks[lock].capacity > 0 || m->locks[lock].election)
	{
		answer(m, r->requester, DLOCK_STATUS_ERROR)->error =
			m->locks[lock].election ? DLM_ERR_IS_ELECTION : DLM_ERR_IS_SEMAPHORE;
		return;
	}
	if (conversion_of(m, h) >= 0)
	{
		answer(m, r->requester, DLOCK_STATUS_ERROR)->error = DLM_ERR_CONVERSION_WAITING;
		return;
	}

	/* 5.2 */
	if (dlock_mode_covers(m->holders[h].mode, r->mode))
	{
		convert_holder(m, h, r->mode);
		answer_holder(m, r->requester, h);
		grant_pass(m, lock);	/* "then the grant pass on L" */
		return;
	}

	/*
	 * 5.3: when the intention changes, every ancestor is needed (one O's
	 * own holders cover passes the now-test, but is a part all the same).
	 */
	if (imode >= 0 && imode != dlock_intention_mode(m->holders[h].mode))
		for (int k = 0; k < m->locks[lock].nanc; k++)
			needed[nneeded++] = m->locks[lock].anc[k];
	/*
	 * compatible with others_held and with the modes of L's conversions
	 * (as if queued at their tail and passed over, 6)
	 */
	grantable = compatible(r->mode, others_held(m, lock, owner));
	for (int i = 0; i < m->nwaiters; i++)
		if (m->waiters[i].live && m->waiters[i].lock == lock &&
			m->waiters[i].holder >= 0 && conflict(r->mode, m->waiters[i].mode))
			grantable = false;
	for (int k = 0; k < nneeded; k++)
		if (!covered_by_own(m, needed[k], owner, imode) &&
			!grantable_now(m, needed[k], owner, imode))
			grantable = false;
	if (grantable)
	{
		convert_holder(m, h, r->mode);
		answer_holder(m, r->requester, h);
		grant_pass(m, lock);	/* the old mode's conflicts may go */
		return;
	}
	q = new_req(m);
	m->reqs[q]->requester = r->requester;
	m->reqs[q]->op = r->op;
	m->reqs[q]->owner = owner;
	m->reqs[q]->pid = r->pid;
	m->reqs[q]->start = r->session_start;
	m->reqs[q]->role = req_role(m, owner, r);
	m->reqs[q]->ttl = r->ttl_us;
	m->reqs[q]->plain = nneeded == 0;
	add_part(m, q, lock, r->mode, false, h);
	m->reqs[q]->nnamed = 1;
	for (int k = 0; k < nneeded; k++)
		add_part(m, q, needed[k], imode, true, -1);
	queued(m, q);
}

static void
begin_event(Model *m, DLockTime now)
{
	m->now = now;
	m->nanswers = 0;
	/* 16: what the event changes of the leaders is seen against this */
	for (int i = 0; i < m->nlocks; i++)
	{
		int			h = leader_of(m, i);

		m->locks[i].was_token = h >= 0 ? m->holders[h].token : 0;
		strcpy(m->locks[i].was_value, h >= 0 ? m->holders[h].value : "");
	}
}


void
model_set_limits(Model *m, int64_t max_objects, int max_parts)
{
	m->max_objects = max_objects;
	m->max_parts = max_parts;
}

/*
 * 13: parts (each name its path depth), objects in all (holders and
 * waiting parts), then the named locks the request adds against the
 * owner's and the role's quotas.
 */
static DLmError
limits(const Model *m, const DLmRequest *r)
{
	int64_t		parts = 0;
	int64_t		objects = 0;
	int64_t		fresh = 0;
	int64_t		fresh_bytes = 0;
	int64_t		key_len = r->owner_key ? (int64_t) strlen(r->owner_key) : 0;
	uint32_t	role;
	int			o;

	for (int i = 0; i < r->nnames; i++)
	{
		const char *p = r->names[i];

		if (p[0] != '/')
			parts++;
		else
			for (; *p; p++)
				parts += *p == '/';
	}
	if (m->max_parts > 0 && parts > m->max_parts)
		return DLM_ERR_TOO_MANY_PARTS;
	for (int i = 0; i < m->nholders; i++)
		objects += m->holders[i].live;
	for (int i = 0; i < m->nwaiters; i++)
		objects += m->waiters[i].live;
	if (m->max_objects > 0 && objects + parts > m->max_objects)
		return DLM_ERR_NO_SPACE;
	if (r->role_max_locks <= 0 && r->owner_max_locks <= 0 &&
		r->role_max_bytes <= 0 && r->owner_max_bytes <= 0)
		return DLM_OK;
	o = owner_find(m, r->owner_key, r->pid, r->session_start);
	for (int i = 0; i < r->nnames; i++)
	{
		int			l = o >= 0 ? lock_find(m, r->names[i]) : -1;

		if (l < 0 || named_holder(m, l, o) < 0)
		{
			fresh++;
			fresh_bytes += (int64_t) strlen(r->names[i]) + key_len;
		}
	}
	if (fresh == 0)
		return DLM_OK;
	if ((r->owner_max_locks > 0 &&
		 (o >= 0 ? named_count(m, o, false, 0, false) : 0) + fresh > r->owner_max_locks) ||
		(r->owner_max_bytes > 0 &&
		 (o >= 0 ? named_count(m, o, false, 0, true) : 0) + fresh_bytes > r->owner_max_bytes))
		return DLM_ERR_OWNER_QUOTA;
	role = o >= 0 && m->owners[o].key && owner_in_use(m, o) ? m->owners[o].role : r->role;
	if ((r->role_max_locks > 0 &&
		 named_count(m, -1, true, role, false) + fresh > r->role_max_locks) ||
		(r->role_max_bytes > 0 &&
		 named_count(m, -1, true, role, true) + fresh_bytes > r->role_max_bytes))
		return DLM_ERR_ROLE_QUOTA;
	return DLM_OK;
}

void
model_request(Model *m, const DLmRequest *r, DLockTime now)
{
	DLmError	err;
	int			owner;

	begin_event(m, now);
	err = validate(m, r);
	if (err != DLM_OK)
	{
		int			requester = r->requester;

		if (requester != DLM_NOBODY &&
			(requester < 0 || requester >= m->nrequesters))
			requester = DLM_NOBODY;
		answer(m, requester, DLOCK_STATUS_ERROR)->error = err;
		return;
	}
	if (r->owner_key && !r->any_role)
	{
		int			k = owner_find(m, r->owner_key, 0, 0);

		if (k >= 0 && owner_in_use(m, k) && m->owners[k].role != r->role)
		{
			answer(m, r->requester, DLOCK_STATUS_ERROR)->error = DLM_ERR_NOT_YOURS;
			return;
		}
	}
	/* 15.2: a name in use keeps its kind and capacity */
	if (r->op == DLOCK_OP_ACQUIRE || r->op == DLOCK_OP_TRY || r->op == DLOCK_OP_ACQUIRE_ALL)
		for (int i = 0; i < r->nnames; i++)
		{
			int			lock = lock_find(m, r->names[i]);
			DLmError	e = DLM_OK;

			if (lock < 0 || !lock_in_use(m, lock))
				continue;
			if (m->locks[lock].election && !r->election)
				e = DLM_ERR_IS_ELECTION;
			else if (m->locks[lock].capacity > 0 && r->capacity == 0)
				e = DLM_ERR_IS_SEMAPHORE;
			else if (m->locks[lock].capacity == 0 && !m->locks[lock].election &&
					 (r->capacity > 0 || r->election))
				e = DLM_ERR_IS_LOCK;
			else if (r->capacity != m->locks[lock].capacity)
				e = DLM_ERR_CAPACITY;
			if (e != DLM_OK)
			{
				answer(m, r->requester, DLOCK_STATUS_ERROR)->error = e;
				return;
			}
		}
	/* 14.3: the owner's call resumes its kept place */
	if ((r->op == DLOCK_OP_ACQUIRE || r->op == DLOCK_OP_ACQUIRE_ALL) && r->owner_key)
	{
		int			k = owner_find(m, r->owner_key, 0, 0);
		int			q = k >= 0 ? kept_place(m, k, r) : -1;

		if (q >= 0)
		{
			MReq	   *R = m->reqs[q];

			R->requester = r->requester;
			R->kept_until = 0;
			R->pid = r->pid;
			R->start = r->session_start;
			R->ttl = r->ttl_us;
			R->keep = r->keep_place;
			R->op = r->op;
			ModelAnswer *a;

			if (r->election)
				strcpy(R->value, r->value);
			a = answer(m, r->requester, DLOCK_STATUS_QUEUED);
			a->token = req_ticket(m, q);
			kept_behind(m, q, a);
			drain(m);
			return;
		}
	}
	if (r->op == DLOCK_OP_ACQUIRE || r->op == DLOCK_OP_TRY || r->op == DLOCK_OP_ACQUIRE_ALL)
	{
		DLmError	lim = limits(m, r);

		if (lim != DLM_OK)
		{
			answer(m, r->requester, DLOCK_STATUS_ERROR)->error = lim;
			return;
		}
	}
	if (r->op == DLOCK_OP_RELEASE_ALL)
	{
		int			o = owner_find(m, r->owner_key, r->pid, r->session_start);
		int			n = end_all(m, o, r->requester);

		answer(m, r->requester, DLOCK_STATUS_COUNT)->count = n;
		drain(m);
		return;
	}
	owner = owner_get(m, r->owner_key, r->pid, r->session_start);
	if ((r->op == DLOCK_OP_ACQUIRE || r->op == DLOCK_OP_TRY || r->op == DLOCK_OP_ACQUIRE_ALL) &&
		!owner_in_use(m, owner))
		m->owners[owner].role = r->role;
	switch (r->op)
	{
		case DLOCK_OP_ACQUIRE:
		case DLOCK_OP_TRY:
		case DLOCK_OP_ACQUIRE_ALL:
			if (r->capacity > 0)
				do_semaphore(m, r, owner);
			else if (r->election)
				do_campaign(m, r, owner);
			else
				do_acquire(m, r, owner);
			break;
		case DLOCK_OP_PROCLAIM:
			do_proclaim(m, r, owner);
			break;
		case DLOCK_OP_RELEASE:
			do_release(m, r, owner);
			break;
		case DLOCK_OP_RENEW:
			do_renew(m, r, owner);
			break;
		case DLOCK_OP_CONVERT:
			do_convert(m, r, owner);
			break;
		default:
			break;
	}
	drain(m);
}

void
model_withdraw(Model *m, const int *requesters, int n, DLockTime now)
{
	begin_event(m, now);
	for (int i = 0; i < n; i++)
	{
		int			r;

		if (requesters[i] < 0 || requesters[i] >= m->nrequesters)
			continue;
		r = waiting_req(m, requesters[i]);
		if (r >= 0 && m->reqs[r]->keep)
		{
			ModelAnswer *a;

			keep(m, r);
			a = answer(m, requesters[i], DLOCK_STATUS_KEPT);
			a->token = req_ticket(m, r);
			a->expires_at = m->reqs[r]->kept_until;
			continue;
		}
		if (r >= 0)
			req_leave(m, r, true);
		answer(m, requesters[i], DLOCK_STATUS_CANCELED);
	}
	drain(m);
}

void
model_session_end(Model *m, int32_t pid, int64_t session_start, int requester,
				  DLockTime now)
{
	int			r = waiting_req(m, requester);

	begin_event(m, now);
	if (r >= 0 && m->reqs[r]->keep)
		keep(m, r);
	else if (r >= 0)
		req_leave(m, r, true);
	end_all(m, owner_find(m, NULL, pid, session_start), requester);
	drain(m);
}

int
model_expire(Model *m, DLockTime now, int max)
{
	int			n = 0;

	begin_event(m, now);
	while (n < max)
	{
		int			best = -1,
					place = -1;

		for (int i = 0; i < m->nholders; i++)
		{
			const MHolder *h = &m->holders[i];

			if (!h->live || h->implied || h->expires_at == 0 || h->expires_at > now)
				continue;
			if (best < 0 || h->expires_at < m->holders[best].expires_at ||
				(h->expires_at == m->holders[best].expires_at &&
				 h->token < m->holders[best].token))
				best = i;
		}
		/* 14.6: kept places too, by (kept_until, when kept); a lease first on a tie */
		for (int q = 0; q < m->nreqs; q++)
		{
			const MReq *R = m->reqs[q];

			if (!R->live || R->kept_until == 0 || R->kept_until > now)
				continue;
			if (place < 0 || R->kept_until < m->reqs[place]->kept_until ||
				(R->kept_until == m->reqs[place]->kept_until &&
				 R->kept_seq < m->reqs[place]->kept_seq))
				place = q;
		}
		if (best >= 0 && (place < 0 || m->holders[best].expires_at <= m->reqs[place]->kept_until))
			last_release(m, best);
		else if (place >= 0)
			req_leave(m, place, true);
		else
			break;
		n++;
	}
	drain(m);
	return n;
}

/* ---------------------------------------------------------------- */
/* Looking */

const ModelAnswer *
model_answers(const Model *m, int *n)
{
	*n = m->nanswers;
	return m->answers;
}

const char *const *
model_notified(const Model *m, int *n)
{
	*n = m->nnotified;
	return m->notified;
}

void
model_settle(Model *m)
{
	m->nnotified = 0;
	for (int i = 0; i < m->nlocks; i++)
		if (lock_empty(m, i))
			m->locks[i].announced = false;	/* the lock is freed */
}

int64_t
model_next_ticket(const Model *m)
{
	return m->ticket;
}

bool
model_waiting(const Model *m, int requester)
{
	return waiting_req(m, requester) >= 0;
}

size_t
model_nlocks(const Model *m)
{
	size_t		n = 0;

	for (int i = 0; i < m->nlocks; i++)
		if (!lock_empty(m, i))
			n++;
	return n;
}

int
model_leader_changes(const Model *m, const char **out, int max)
{
	int			n = 0;

	for (int i = 0; i < m->nlocks && n < max; i++)
	{
		int			h = leader_of(m, i);
		int64_t		token = h >= 0 ? m->holders[h].token : 0;

		if (token != m->locks[i].was_token ||
			(h >= 0 && strcmp(m->holders[h].value, m->locks[i].was_value) != 0))
			out[n++] = m->locks[i].name;
	}
	return n;
}

int32_t
model_capacity(const Model *m, const char *name)
{
	int			lock = lock_find(m, name);

	return lock >= 0 && lock_in_use(m, lock) ? m->locks[lock].capacity : 0;
}

DLockTime
model_next_expiry(const Model *m)
{
	DLockTime	t = 0;

	for (int i = 0; i < m->nholders; i++)
		if (m->holders[i].live && m->holders[i].expires_at != 0 &&
			(t == 0 || m->holders[i].expires_at < t))
			t = m->holders[i].expires_at;
	for (int q = 0; q < m->nreqs; q++)
		if (m->reqs[q]->live && m->reqs[q]->kept_until != 0 &&
			(t == 0 || m->reqs[q]->kept_until < t))
			t = m->reqs[q]->kept_until;
	return t;
}

int
model_holders(const Model *m, const char *name, ModelHolderView *out, int max)
{
	int			lock = lock_find(m, name);
	int		   *idx;
	int64_t    *key;
	int			n = 0;

	if (lock < 0)
		return 0;
	idx = xrealloc(NULL, sizeof(int) * ((size_t) m->nholders + 1));
	key = xrealloc(NULL, sizeof(int64_t) * ((size_t) m->nholders + 1));
	for (int i = 0; i < m->nholders; i++)
		if (m->holders[i].live && m->holders[i].lock == lock)
		{
			idx[n] = i;
			key[n] = m->holders[i].token;
			n++;
		}
	sort_by(idx, key, n);
	for (int i = 0; i < n && i < max; i++)
	{
		const MHolder *h = &m->holders[idx[i]];
		const MOwner *o = &m->owners[h->owner];

		out[i].key = o->key;
		out[i].pid = o->pid;
		out[i].session_start = o->start;
		out[i].mode = h->mode;
		out[i].implied = h->implied;
		out[i].count = h->count;
		out[i].token = h->token;
		out[i].expires_at = h->expires_at;
		out[i].ttl_us = h->ttl;
		out[i].holder_pid = h->pid;
		out[i].role = h->role;
		out[i].kept = h->kept;
		out[i].permits = h->permits;
		out[i].value = h->has_value ? h->value : NULL;
	}
	free(idx);
	free(key);
	return n;
}

int
model_line(const Model *m, const char *name, ModelWaiterView *out, int max)
{
	int			lock = lock_find(m, name);
	int		   *idx;
	int			n = 0;

	if (lock < 0)
		return 0;
	idx = xrealloc(NULL, sizeof(int) * ((size_t) m->nwaiters + 1));
	for (int pass = 0; pass < 2; pass++)
	{
		int			k = line_of(m, lock, pass == 0, idx);

		for (int i = 0; i < k; i++, n++)
			if (n < max)
			{
				const MWaiter *w = &m->waiters[idx[i]];
				const MOwner *o = &m->owners[w->owner];

				out[n].key = o->key;
				out[n].pid = o->pid;
				out[n].session_start = o->start;
				out[n].mode = w->mode;
				out[n].implied = w->implied;
				out[n].conversion = w->holder >= 0;
				out[n].ticket = w->ticket;
				out[n].requester = m->reqs[w->req]->requester;
				out[n].kept_until = m->reqs[w->req]->kept_until;
				out[n].permits = m->reqs[w->req]->permits;
			}
	}
	free(idx);
	return n;
}

int
model_deadlock_edges(const Model *m, const ModelEdge **edges,
					 int *requesting_owner, const char **first_lock)
{
	*edges = m->edges;
	*requesting_owner = m->dl_owner;
	*first_lock = m->dl_lock;
	return m->nedges;
}

const char *
model_check(const Model *m)
{
	static char buf[256];

	for (int i = 0; i < m->nwaiters; i++)
	{
		const MWaiter *w = &m->waiters[i];

		if (!w->live)
			continue;
		if (!m->reqs[w->req]->live)
			return "a waiter of a request that left";
		if (w->holder >= 0 &&
			(!m->holders[w->holder].live || m->holders[w->holder].lock != w->lock ||
			 m->holders[w->holder].owner != w->owner || m->holders[w->holder].implied))
			return "a conversion of a holder that is not there";
		if (w->ticket >= m->ticket)
			return "a ticket not below the counter";
	}
	for (int i = 0; i < m->nreqs; i++)
	{
		const MReq *R = m->reqs[i];

		if (!R->live)
			continue;
		for (int k = 0; k < R->nparts; k++)
			if (!m->waiters[R->parts[k]].live)
				return "a waiting request lost a part";
		for (int j = 0; j < m->nreqs; j++)
			if (j != i && m->reqs[j]->live && R->requester >= 0 &&
				m->reqs[j]->requester == R->requester)
				return "a requester waits twice";
	}
	for (int i = 0; i < m->nholders; i++)
	{
		const MHolder *h = &m->holders[i];

		if (!h->live)
			continue;
		if (h->token >= m->ticket)
			return "a token not below the counter";
		if (h->count < 1)
			return "a holder with no count";
		for (int j = 0; j < m->nholders; j++)
		{
			const MHolder *g = &m->holders[j];

			if (j == i || !g->live || g->lock != h->lock)
				continue;
			if (g->owner == h->owner && g->implied == h->implied &&
				(!h->implied || g->mode == h->mode))
			{
				snprintf(buf, sizeof(buf), "two holders of one kind on %s",
						 m->locks[h->lock].name);
				return buf;
			}
		}
	}
	return NULL;
}

/* ---------------------------------------------------------------- */
/* 18. The service: batches, force release and revocations, reloads */

/* 18.5, from the README: an hour, at most 1024 (the oldest go first) */
#define REVOKED_KEEP_US ((DLockTime) 3600 * 1000000)
#define REVOKED_MAX 1024

static char *
xstrdup_or_null(const char *s)
{
	return s ? xstrndup(s, strlen(s)) : NULL;
}

static void
revoked_remove(Model *m, int i)
{
	revoked_free(&m->revoked[i]);
	memmove(&m->revoked[i], &m->revoked[i + 1], sizeof(MRevoked) * (size_t) (m->nrevoked - i - 1));
	m->nrevoked--;
}

/* Those older than the hour are no more. */
static void
revoked_expire(Model *m, DLockTime now)
{
	for (int i = m->nrevoked - 1; i >= 0; i--)
		if (now - m->revoked[i].at > REVOKED_KEEP_US)
			revoked_remove(m, i);
}

static void
revoked_add(Model *m, const char *key, int32_t pid, int64_t start, const char *name,
			const char *reason, DLockTime now)
{
	MRevoked   *v;

	revoked_expire(m, now);
	if (m->nrevoked == REVOKED_MAX)
		revoked_remove(m, 0);
	GROW(m->revoked, m->nrevoked, m->crevoked);
	v = &m->revoked[m->nrevoked++];
	memset(v, 0, sizeof(*v));
	v->key = xstrdup_or_null(key);
	v->pid = key ? 0 : pid;
	v->start = key ? 0 : start;
	v->name = xstrdup_or_null(name);
	snprintf(v->reason, sizeof(v->reason), "%s", reason ? reason : "");
	v->at = now;
}

static bool
revoked_owner(const MRevoked *v, const DLmRequest *r)
{
	if (v->key || r->owner_key)
		return v->key && r->owner_key && strcmp(v->key, r->owner_key) == 0;
	return v->pid == r->pid && v->start == r->session_start;
}

/* The model's answers of the last event join the batch's; r: the request it was */
static void
collect(Model *m, const DLmRequest *r, DLockTime now)
{
	for (int i = 0; i < m->nanswers; i++)
	{
		ModelAnswer a = m->answers[i];

		if (r && a.requester == r->requester && r->nnames > 0 && r->names[0][0] != '\0')
		{
			/* 18.5: NOT_HELD of a remembered (owner, name) is REVOKED, the newest reason */
			if (a.status == DLOCK_STATUS_NOT_HELD &&
				(r->op == DLOCK_OP_RENEW || r->op == DLOCK_OP_RELEASE ||
				 r->op == DLOCK_OP_CONVERT || r->op == DLOCK_OP_PROCLAIM))
			{
				revoked_expire(m, now);
				for (int k = m->nrevoked - 1; k >= 0; k--)
				{
					const MRevoked *v = &m->revoked[k];

					if (!v->forgotten && revoked_owner(v, r) &&
						(v->name == NULL || strcmp(v->name, r->names[0]) == 0))
					{
						a.status = DLOCK_STATUS_REVOKED;
						snprintf(a.reason, sizeof(a.reason), "%s", v->reason);
						break;
					}
				}
			}
			/* a grant forgets the owner's revocations of its names (at the commit) */
			else if (a.status == DLOCK_STATUS_GRANTED)
				for (int k = 0; k < m->nrevoked; k++)
				{
					MRevoked   *v = &m->revoked[k];
					bool		named = v->name == NULL;

					for (int j = 0; j < r->nnames && !named; j++)
						named = strcmp(v->name, r->names[j]) == 0;
					if (named && revoked_owner(v, r))
						v->forgotten = true;
				}
		}
		GROW(m->bans, m->nbans, m->cbans);
		m->bans[m->nbans++] = a;
	}
	m->nanswers = 0;
}

static void
revoked_name(Model *m, const char *name)
{
	for (int i = 0; i < m->nrnames; i++)
		if (strcmp(m->rnames[i], name) == 0)
			return;
	GROW(m->rnames, m->nrnames, m->crnames);
	m->rnames[m->nrnames++] = xstrndup(name, strlen(name));
}

/* 18.5 FORCE_RELEASE: every named holder of the name (the key's), every level */
static void
force_release(Model *m, const DLmRequest *r, DLockTime now)
{
	int			lock = lock_find(m, r->names[0]);
	int			victims[256];
	int64_t		tokens[256];
	int			nv = 0;
	int			n = 0;

	/* in grant order (1): releasing one may grant another's conversion first */
	for (int i = 0; lock >= 0 && i < m->nholders && nv < 256; i++)
	{
		const MHolder *h = &m->holders[i];
		const char *key = m->owners[h->owner].key;

		if (h->live && h->lock == lock && !h->implied &&
			(r->owner_key == NULL || (key && strcmp(key, r->owner_key) == 0)))
		{
			tokens[nv] = h->token;
			victims[nv++] = h->owner;
		}
	}
	sort_by(victims, tokens, nv);
	for (int i = 0; i < nv; i++)
	{
		const MOwner *o = &m->owners[victims[i]];
		DLmRequest	q;

		memset(&q, 0, sizeof(q));
		q.op = DLOCK_OP_RELEASE;
		q.requester = DLM_NOBODY;
		q.owner_key = o->key;
		q.pid = o->key ? r->pid : o->pid;
		q.session_start = o->key ? r->session_start : o->start;
		q.names = r->names;
		q.nnames = 1;
		q.role = r->role;
		q.any_role = true;
		while (named_holder(m, lock, victims[i]) >= 0)
		{
			model_request(m, &q, now);
			collect(m, NULL, now);
		}
		revoked_add(m, o->key, o->pid, o->start, r->names[0], r->value, now);
		n++;
	}
	if (n > 0)
		revoked_name(m, r->names[0]);
	answer(m, r->requester, DLOCK_STATUS_COUNT)->count = n;
	collect(m, NULL, now);
}

/* 18.5 FORCE_RELEASE_ALL: release_all of the key on its behalf */
static void
force_release_all(Model *m, const DLmRequest *r, DLockTime now)
{
	int			o = owner_find(m, r->owner_key, 0, 0);
	DLmRequest	q = *r;

	for (int i = 0; o >= 0 && i < m->nholders; i++)
		if (m->holders[i].live && m->holders[i].owner == o && !m->holders[i].implied)
			revoked_name(m, m->locks[m->holders[i].lock].name);
	q.op = DLOCK_OP_RELEASE_ALL;
	q.any_role = true;
	q.value = NULL;
	model_request(m, &q, now);
	collect(m, NULL, now);
	revoked_add(m, r->owner_key, 0, 0, NULL, r->value, now);
}

int
model_batch(Model *m, const ModelBatch *b, DLockTime now, int expire_max)
{
	int			expired;

	/* (a) withdrawals, all at once */
	if (b->nwithdrawn > 0)
	{
		model_withdraw(m, b->withdrawn, b->nwithdrawn, now);
		collect(m, NULL, now);
	}
	/* (b) ended sessions */
	for (int i = 0; i < b->nended; i++)
	{
		model_session_end(m, b->ended[i].pid, b->ended[i].session_start,
						  b->ended[i].requester, now);
		collect(m, NULL, now);
	}
	/* (c) leases run out, at most the limit */
	expired = model_expire(m, now, expire_max);
	collect(m, NULL, now);
	/* (d) the new requests in submission order */
	for (int i = 0; i < b->nfresh; i++)
	{
		const DLmRequest *r = &b->fresh[i];

		if (r->op == DLOCK_OP_FORCE_RELEASE && r->nnames == 1)
			force_release(m, r, now);
		else if (r->op == DLOCK_OP_FORCE_RELEASE_ALL && r->owner_key)
			force_release_all(m, r, now);
		else
		{
			model_request(m, r, now);
			collect(m, r, now);
		}
	}
	return expired;
}

const ModelAnswer *
model_batch_answers(const Model *m, int *n)
{
	*n = m->nbans;
	return m->bans;
}

int
model_revoked_names(const Model *m, const char **out, int max)
{
	for (int i = 0; i < m->nrnames && i < max; i++)
		out[i] = m->rnames[i];
	return m->nrnames;
}

int
model_nrevoked(const Model *m)
{
	return m->nrevoked;
}

void
model_commit(Model *m)
{
	for (int i = m->nrevoked - 1; i >= 0; i--)
		if (m->revoked[i].forgotten)
			revoked_remove(m, i);
	for (int i = 0; i < m->nrnames; i++)
		free(m->rnames[i]);
	m->nrnames = 0;
	m->nbans = 0;
	model_settle(m);
}

#define COPY_ARRAY(dst, src, n, cap) \
	do { \
		(dst) = (cap) > 0 ? xrealloc(NULL, sizeof(*(src)) * (size_t) (cap)) : NULL; \
		if ((n) > 0) \
			memcpy((dst), (src), sizeof(*(src)) * (size_t) (n)); \
	} while (0)

Model *
model_copy(const Model *m)
{
	Model	   *c = xrealloc(NULL, sizeof(Model));

	*c = *m;
	COPY_ARRAY(c->owners, m->owners, m->nowners, m->cowners);
	for (int i = 0; i < c->nowners; i++)
		c->owners[i].key = xstrdup_or_null(m->owners[i].key);
	COPY_ARRAY(c->locks, m->locks, m->nlocks, m->clocks);
	for (int i = 0; i < c->nlocks; i++)
		c->locks[i].name = xstrdup_or_null(m->locks[i].name);
	COPY_ARRAY(c->holders, m->holders, m->nholders, m->cholders);
	COPY_ARRAY(c->waiters, m->waiters, m->nwaiters, m->cwaiters);
	COPY_ARRAY(c->reqs, m->reqs, m->nreqs, m->creqs);
	for (int i = 0; i < c->nreqs; i++)
	{
		c->reqs[i] = xrealloc(NULL, sizeof(MReq));
		*c->reqs[i] = *m->reqs[i];
	}
	COPY_ARRAY(c->scan, m->scan, m->nscan, m->cscan);
	COPY_ARRAY(c->in_scan, m->in_scan, m->cin_scan, m->cin_scan);
	COPY_ARRAY(c->recheck, m->recheck, m->nrecheck, m->crecheck);
	COPY_ARRAY(c->in_recheck, m->in_recheck, m->cin_recheck, m->cin_recheck);
	COPY_ARRAY(c->answers, m->answers, m->nanswers, m->canswers);
	COPY_ARRAY(c->bans, m->bans, m->nbans, m->cbans);
	/* these point into the original's names: a copy starts without them */
	c->notified = NULL;
	c->nnotified = c->cnotified = 0;
	c->edges = NULL;
	c->nedges = c->cedges = 0;
	c->dl_lock = NULL;
	COPY_ARRAY(c->revoked, m->revoked, m->nrevoked, m->crevoked);
	for (int i = 0; i < c->nrevoked; i++)
	{
		c->revoked[i].key = xstrdup_or_null(m->revoked[i].key);
		c->revoked[i].name = xstrdup_or_null(m->revoked[i].name);
	}
	COPY_ARRAY(c->rnames, m->rnames, m->nrnames, m->crnames);
	for (int i = 0; i < c->nrnames; i++)
		c->rnames[i] = xstrdup_or_null(m->rnames[i]);
	return c;
}

void
model_reload(Model *m, int64_t counter,
			 bool (*alive) (void *arg, int32_t pid, int64_t start), void *arg,
			 DLockTime grace_until, DLockTime now, bool restart)
{
	if (restart)
	{
		/* a new service remembers nothing */
		for (int i = 0; i < m->nrevoked; i++)
			revoked_free(&m->revoked[i]);
		m->nrevoked = 0;
	}
	/* the store keeps holders and kept places: a waiting call is gone */
	for (int q = 0; q < m->nreqs; q++)
	{
		MReq	   *R = m->reqs[q];

		if (!R->live)
			continue;
		if (R->kept_until != 0)
		{
			R->requester = DLM_NOBODY;
			continue;
		}
		for (int k = 0; k < R->nparts; k++)
			m->waiters[R->parts[k]].live = false;
		R->live = false;
	}
	/* sessions that ended while nobody was looking */
	for (int i = 0; i < m->nholders; i++)
	{
		MHolder    *h = &m->holders[i];
		const MOwner *o = &m->owners[h->owner];

		if (h->live && o->key == NULL && alive && !alive(arg, o->pid, o->start))
			h->live = false;
	}
	/* the restart's grace */
	if (grace_until != 0)
	{
		for (int i = 0; i < m->nholders; i++)
			if (m->holders[i].live && m->holders[i].expires_at != 0 &&
				m->holders[i].expires_at < grace_until)
				m->holders[i].expires_at = grace_until;
		for (int q = 0; q < m->nreqs; q++)
			if (m->reqs[q]->live && m->reqs[q]->kept_until != 0 &&
				m->reqs[q]->kept_until < grace_until)
				m->reqs[q]->kept_until = grace_until;
	}
	m->ticket = counter;
	for (int i = 0; i < m->nlocks; i++)
	{
		m->locks[i].announced = false;
		m->in_scan[i] = false;
	}
	for (int i = 0; i < m->cin_recheck; i++)
		m->in_recheck[i] = false;
	m->nscan = m->nrecheck = 0;
	m->nnotified = 0;
	m->nbans = 0;
	for (int i = 0; i < m->nrnames; i++)
		free(m->rnames[i]);
	m->nrnames = 0;
	/* 14.7: a pass over every lock with a line */
	begin_event(m, now);
	for (int i = 0; i < m->nwaiters; i++)
		if (m->waiters[i].live)
			scan_push(m, m->waiters[i].lock);
	drain(m);
	m->nanswers = 0;
	model_settle(m);
}
