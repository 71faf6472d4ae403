/* SPDX-License-Identifier: PostgreSQL */
/*
 * test_lm.c
 *		Unit tests of the lock manager through its public interface
 *		(dlock_lm.h): one or more per rule of docs/postgresql.md's
 *		Semantics and of core/README sections 3-9, a crowd of 40,000 shared
 *		holders (timed, not asserted), determinism over two hash seeds and an
 *		allocator that fails after K allocations.
 *
 * Every test makes its own manager with a counting allocator and checks
 * that dlm_destroy gives every allocation back.  After every event the
 * invariants of core/README section 10 that can be seen from outside are
 * checked over the names the test uses.
 *
 * Usage: test/test_lm [--quick]   (--quick: without the crowd)
 */
#define _POSIX_C_SOURCE 200809L

#include "dlock_lm.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "test_check.h"
#include "test_util.h"

/* The same, showing both sides. */
#define CHECK_EQ(a, b) \
	do { \
		long long a_ = (long long) (a); \
		long long b_ = (long long) (b); \
		if (a_ == b_) \
			passed++; \
		else \
		{ \
			failed++; \
			fprintf(stderr, "%s:%d: check failed: %s == %s (%lld != %lld)\n", \
					__FILE__, __LINE__, #a, #b, a_, b_); \
		} \
	} while (0)

#define NL DLOCK_MODE_NL
#define CR DLOCK_MODE_CR
#define CW DLOCK_MODE_CW
#define PR DLOCK_MODE_PR
#define PW DLOCK_MODE_PW
#define EX DLOCK_MODE_EX

/* Client c is requester c and the session (PID(c), START(c)). */
#define PID(c) ((int32_t) (100 + (c)))
#define START(c) ((int64_t) 1000000 + (c))

/* ---------------------------------------------------------------- memory */

static TestMem mem = TEST_MEM_INIT;

/* --------------------------------------------------------------- answers */

typedef struct Rec
{
	DLockStatus status;
	int64_t		token;
	DLockTime	expires_at;
	int32_t		count;
	int			name_index;
	int			ntokens;
	int			ncycle;
	DLmError	error;
	int64_t		ev;				/* the event of the last answer */
	int			nev;			/* answers in that event */
	long		total;
	int64_t    *tokens;			/* DLOCK_MAX_MULTI, when needed */
	DLmCycleStep *cycle;		/* lock names copied */
	int			cycle_cap;
} Rec;

static Rec *recs;
static int	nrecs;
static int64_t serial;			/* the current event */
static long stray;				/* answers to a requester out of range */
static int	ev_nomem;			/* ERROR NO_MEMORY answers in this event */
static int	ev_answers;			/* answers in this event */

/* the determinism test's record of everything */
static char *logbuf;
static size_t loglen,
			logcap;
static bool logging;

static void
logf_(const char *fmt,...)
	__attribute__((format(printf, 1, 2)));

static void
logf_(const char *fmt,...)
{
	va_list		ap;
	int			n;

	if (!logging)
		return;
	for (;;)
	{
		va_start(ap, fmt);
		n = vsnprintf(logbuf + loglen, logcap - loglen, fmt, ap);
		va_end(ap);
		if (n >= 0 && (size_t) n < logcap - loglen)
			break;
		logcap = logcap * 2 + (size_t) n + 1024;
		logbuf = realloc(logbuf, logcap);
		if (logbuf == NULL)
			abort();
	}
	loglen += (size_t) n;
}

static void
free_rec(Rec *r)
{
	free(r->tokens);
	if (r->cycle)
		for (int i = 0; i < r->ncycle; i++)
			free((char *) r->cycle[i].lock);
	free(r->cycle);
	memset(r, 0, sizeof(*r));
}

static void
on_answer(void *arg, int rq, const DLmAnswer *a)
{
	Rec		   *r;

	(void) arg;
	ev_answers++;
	if (a->status == DLOCK_STATUS_ERROR && a->error == DLM_ERR_NO_MEMORY)
		ev_nomem++;
	logf_("A %d st=%d tok=%" PRId64 " exp=%" PRId64 " cnt=%d idx=%d err=%d",
		  rq, (int) a->status, a->token, a->expires_at, (int) a->count,
		  a->name_index, (int) a->error);
	if (a->status == DLOCK_STATUS_GRANTED && a->ntokens > 0 && a->tokens)
		for (int i = 0; i < a->ntokens && i < DLOCK_MAX_MULTI; i++)
			logf_(" t%" PRId64, a->tokens[i]);
	if (a->status == DLOCK_STATUS_DEADLOCK && a->cycle)
		for (int i = 0; i < a->ncycle; i++)
			logf_(" [%d %d %s %d %d %d]", a->cycle[i].waiter_keyed,
				  a->cycle[i].waiter_pid, a->cycle[i].lock ? a->cycle[i].lock : "?",
				  a->cycle[i].held, a->cycle[i].blocker_keyed, a->cycle[i].blocker_pid);
	logf_("\n");

	if (rq < 0 || rq >= nrecs)
	{
		stray++;
		return;
	}
	r = &recs[rq];
	if (r->ev != serial)
	{
		r->ev = serial;
		r->nev = 0;
	}
	r->nev++;
	r->total++;
	r->status = a->status;
	r->token = a->token;
	r->expires_at = a->expires_at;
	r->count = a->count;
	r->name_index = a->name_index;
	r->error = a->error;
	r->ntokens = 0;
	if (a->status == DLOCK_STATUS_GRANTED && a->ntokens > 0)
	{
		CHECK(a->ntokens <= DLOCK_MAX_MULTI);
		CHECK(a->tokens != NULL);
		if (a->tokens && a->ntokens <= DLOCK_MAX_MULTI)
		{
			if (r->tokens == NULL)
				r->tokens = malloc(sizeof(int64_t) * DLOCK_MAX_MULTI);
			memcpy(r->tokens, a->tokens, sizeof(int64_t) * a->ntokens);
			r->ntokens = a->ntokens;
		}
	}
	if (r->cycle)
		for (int i = 0; i < r->ncycle; i++)
			free((char *) r->cycle[i].lock);
	r->ncycle = 0;
	if (a->status == DLOCK_STATUS_DEADLOCK)
	{
		CHECK(a->ncycle > 0 && a->cycle != NULL);
		if (a->ncycle > 0 && a->cycle)
		{
			if (r->cycle_cap < a->ncycle)
			{
				r->cycle = realloc(r->cycle, sizeof(DLmCycleStep) * a->ncycle);
				r->cycle_cap = a->ncycle;
			}
			for (int i = 0; i < a->ncycle; i++)
			{
				r->cycle[i] = a->cycle[i];
				r->cycle[i].lock = strdup(a->cycle[i].lock ? a->cycle[i].lock : "(null)");
			}
			r->ncycle = a->ncycle;
		}
	}
}

static const char *
status_name(int s)
{
	static const char *const names[] = {
		"NONE", "GRANTED", "REFUSED", "RELEASED", "NOT_HELD", "RENEWED",
		"COUNT", "CANCELED", "WITHDRAWN", "MODE_HELD", "DEADLOCK",
		"NOT_READY", "ERROR", "QUEUED", "KEPT"
	};

	if (s < 0 || s >= (int) (sizeof(names) / sizeof(names[0])))
		return "?";
	return names[s];
}

/* The last answer of client c has status s (and c was answered in this event). */
#define CHECK_ST(c, s) \
	do { \
		if (recs[c].ev == serial && recs[c].status == DLOCK_STATUS_##s) \
			passed++; \
		else \
		{ \
			failed++; \
			fprintf(stderr, "%s:%d: check failed: client %d answered %s, got %s%s\n", \
					__FILE__, __LINE__, (c), #s, status_name(recs[c].status), \
					recs[c].ev == serial ? "" : " (not in this event)"); \
		} \
	} while (0)

/* Client c got no answer in the last event. */
#define ANSWERED(c) (recs[c].ev == serial)

/* --------------------------------------------------------------- manager */

static DLockManager *M;
static DLockTime NOW;
static uint64_t seed0 = 0x0123456789abcdefULL,
			seed1 = 0xfedcba9876543210ULL;
static bool autosettle = true;
static int64_t cur_hi;			/* the stored ticket block */
static const char *const *U;	/* the names the test uses */
static int	nU;
static size_t max_name_len = 1024;
static DLockTime req_timeout;	/* the next request's timeout_at */
static uint32_t req_role;		/* every request's role (12) ... */
static bool req_any_role;		/* ... and whether it may act for any role */
static int64_t req_role_max;	/* every request's quotas (13) */
static int64_t req_owner_max;
static int64_t req_role_max_bytes;
static int64_t req_owner_max_bytes;
static bool req_keep;			/* the next request's keep_place (14) */
static int32_t req_capacity;	/* the next request's semaphore (15) */
static int32_t req_permits;
static const char *req_value;	/* the next request's campaign value (16) */

static DLmConfig
config(int nreq, int64_t reserve)
{
	DLmConfig	c;

	memset(&c, 0, sizeof(c));
	c.alloc.alloc = test_mem_alloc;
	c.alloc.free = test_mem_free;
	c.alloc.arg = &mem;
	c.seed[0] = seed0;
	c.seed[1] = seed1;
	c.nrequesters = nreq;
	c.max_name_len = max_name_len;
	c.ticket_reserve = reserve;
	c.answer = on_answer;
	c.answer_arg = NULL;
	return c;
}

static void
setup_recs(int nreq)
{
	nrecs = nreq;
	recs = calloc((size_t) nreq, sizeof(Rec));
	if (recs == NULL)
		abort();
}

/* A manager for nreq requesters whose counter starts at 'counter'. */
static void
setup(int nreq, int64_t reserve, int64_t counter)
{
	DLmConfig	c;

	memset(&mem, 0, sizeof(mem));
	mem.fail_after = -1;
	setup_recs(nreq);
	c = config(nreq, reserve);
	M = dlm_create(&c);
	CHECK(M != NULL);
	if (M == NULL)
	{
		fprintf(stderr, "test_lm: dlm_create failed\n");
		exit(1);
	}
	dlm_set_counter(M, counter);
	cur_hi = counter;
	NOW = 1;
	autosettle = true;
	U = NULL;
	nU = 0;
	stray = 0;
}

static void
teardown(void)
{
	CHECK(!dlm_broken(M));
	dlm_destroy(M);
	M = NULL;
	CHECK_EQ(mem.live, 0);
	CHECK_EQ(mem.bad_free, 0);
	CHECK_EQ(stray, 0);
	for (int i = 0; i < nrecs; i++)
		free_rec(&recs[i]);
	free(recs);
	recs = NULL;
	nrecs = 0;
}

static void
use(const char *const *names, int n)
{
	U = names;
	nU = n;
}

/* ---------------------------------------------------------------- lookup */

static bool
owner_is(const DLmOwner *o, const char *key, int c)
{
	if (key)
		return o->key != NULL && strcmp(o->key, key) == 0;
	return o->key == NULL && o->pid == PID(c) && o->session_start == START(c);
}

static DLmHolder *
find_h(const char *name, const char *key, int c, bool implied, int mode)
{
	DLmLock    *L = dlm_lookup(M, name);

	if (L == NULL)
		return NULL;
	for (DLmHolder *h = dlm_lock_holders(L); h; h = dlm_holder_next(h))
		if (owner_is(h->owner, key, c) && h->implied == implied &&
			(mode < 0 || h->mode == mode))
			return h;
	return NULL;
}

/* O's named holder of name; O's implied holder of name in mode */
#define NH(name, key, c) find_h((name), (key), (c), false, -1)
#define IH(name, key, c, mode) find_h((name), (key), (c), true, (mode))

/* A queue entry of O on name: conv 1 conversions, 0 others, -1 any. */
static DLmWaiter *
find_w(const char *name, const char *key, int c, bool implied, int conv)
{
	DLmLock    *L = dlm_lookup(M, name);

	if (L == NULL)
		return NULL;
	for (DLmWaiter *w = dlm_lock_queue(L); w; w = dlm_waiter_next(w))
		if (owner_is(w->owner, key, c) && w->implied == implied &&
			(conv < 0 || (w->holder != NULL) == (conv == 1)))
			return w;
	return NULL;
}

static int
nholders(const char *name)
{
	DLmLock    *L = dlm_lookup(M, name);
	int			n = 0;

	if (L)
		for (DLmHolder *h = dlm_lock_holders(L); h; h = dlm_holder_next(h))
			n++;
	return n;
}

static int
nqueue(const char *name)
{
	DLmLock    *L = dlm_lookup(M, name);
	int			n = 0;

	if (L)
		for (DLmWaiter *w = dlm_lock_queue(L); w; w = dlm_waiter_next(w))
			n++;
	return n;
}

static int
count_touched_holders(void)
{
	int			n = 0;

	DLmHolder  *h;

	for (size_t h_i = 0; (h = dlm_touched_holder(M, h_i)) != NULL; h_i++)
		n++;
	return n;
}

static int
count_touched_waiters(void)
{
	int			n = 0;

	while (dlm_touched_waiter(M, (size_t) n) != NULL)
		n++;
	return n;
}

static int
count_notified(const char *name)
{
	int			n = 0;

	DLmLock    *L;

	for (size_t L_i = 0; (L = dlm_notified_lock(M, L_i)) != NULL; L_i++)
		if (name == NULL || strcmp(L->name, name) == 0)
			n++;
	return n;
}

/* ------------------------------------------------------------ invariants */

static bool
is_ancestor(const char *a, const char *b)
{
	size_t		la = strlen(a);

	return a[0] == '/' && strncmp(a, b, la) == 0 && b[la] == '/';
}

static bool
conflict(int a, int b)
{
	return (dlock_mode_conflicts(a) & DLOCK_MODE_BIT(b)) != 0;
}

/* core/README section 10, over the names of the test. */
static void
check_inv(void)
{
	DLockTime	soonest = 0;

	for (int i = 0; i < nU; i++)
	{
		DLmLock    *L = dlm_lookup(M, U[i]);
		int			nh[DLOCK_NMODES] = {0},
					nw[DLOCK_NMODES] = {0},
					nc[DLOCK_NMODES] = {0};
		int64_t		last_conv = 0,
					last_wait = 0;
		bool		in_waiters = false;

		if (L == NULL)
			continue;
		CHECK(strcmp(L->name, U[i]) == 0);
		for (DLmHolder *h = dlm_lock_holders(L); h; h = dlm_holder_next(h))
		{
			CHECK(h->lock == L);
			CHECK(h->mode >= 0 && h->mode < DLOCK_NMODES);
			if (h->mode < 0 || h->mode >= DLOCK_NMODES)
				continue;
			nh[h->mode]++;
			CHECK(h->count >= 1);
			CHECK(h->token < cur_hi);
			CHECK(!h->p.dead);
			if (h->expires_at != 0 && (soonest == 0 || h->expires_at < soonest))
				soonest = h->expires_at;
			for (DLmHolder *g = dlm_holder_next(h); g; g = dlm_holder_next(g))
				if (g->owner != h->owner && conflict(g->mode, h->mode))
				{
					CHECK(!"conflicting holders");
					fprintf(stderr, "  on %s: modes %d and %d\n", U[i], h->mode, g->mode);
				}
			if (h->implied)
			{
				int			want = 0;

				CHECK(h->expires_at == 0);
				for (int j = 0; j < nU; j++)
				{
					if (!is_ancestor(U[i], U[j]))
						continue;
					for (DLmHolder *g = dlm_lookup(M, U[j]) ? dlm_lock_holders(dlm_lookup(M, U[j])) : NULL;
						 g; g = dlm_holder_next(g))
						if (!g->implied && g->owner == h->owner &&
							dlock_intention_mode(g->mode) == h->mode)
							want++;
				}
				CHECK_EQ(h->count, want);
			}
			else if (U[i][0] == '/' && dlock_intention_mode(h->mode) >= 0)
			{
				/* every ancestor has the owner's intention */
				for (int j = 0; j < nU; j++)
				{
					bool		found = false;

					if (!is_ancestor(U[j], U[i]))
						continue;
					if (dlm_lookup(M, U[j]))
						for (DLmHolder *g = dlm_lock_holders(dlm_lookup(M, U[j])); g; g = dlm_holder_next(g))
							if (g->implied && g->owner == h->owner &&
								g->mode == dlock_intention_mode(h->mode))
								found = true;
					CHECK(found);
				}
			}
		}
		for (int m = 0; m < DLOCK_NMODES; m++)
			CHECK_EQ(L->nheld[m], nh[m]);
		/* 15: a semaphore's permits held are its holders', within capacity */
		{
			int32_t		permits = 0;

			for (DLmHolder *h = dlm_lock_holders(L); h; h = dlm_holder_next(h))
				permits += dlm_holder_permits(h);
			CHECK_EQ(L->permits_held, permits);
			CHECK(L->capacity == 0 ? permits == 0 : permits <= L->capacity);
		}
		for (DLmWaiter *w = dlm_lock_queue(L); w; w = dlm_waiter_next(w))
		{
			CHECK(w->lock == L);
			CHECK(w->ticket < cur_hi);
			CHECK(!w->p.dead);
			/* a kept place no call waits for: none answers for it (14) */
			CHECK(w->kept_until == 0 || (w->keep && w->requester == DLM_NOBODY));
			if (w->kept_until != 0 && (soonest == 0 || w->kept_until < soonest))
				soonest = w->kept_until;
			if (w->mode < 0 || w->mode >= DLOCK_NMODES)
			{
				CHECK(!"waiter mode");
				continue;
			}
			if (w->holder)
			{
				CHECK(!in_waiters); /* conversions first */
				CHECK(w->ticket > last_conv);
				last_conv = w->ticket;
				nc[w->mode]++;
			}
			else
			{
				in_waiters = true;
				CHECK(w->ticket > last_wait);
				last_wait = w->ticket;
				nw[w->mode]++;
			}
		}
		for (int m = 0; m < DLOCK_NMODES; m++)
		{
			CHECK_EQ(L->line->nwaiting[m], nw[m]);
			CHECK_EQ(L->line->nconverting[m], nc[m]);
		}
	}
	if (nU > 0)
		CHECK_EQ(dlm_next_expiry(M), soonest);
}

/* After every event: the counter block, the invariants, the store. */
static void
after_event(void)
{
	int64_t		hi = 0;

	if (dlm_counter_dirty(M, &hi))
	{
		CHECK(hi >= cur_hi);	/* a batch may span unsettled events */
		cur_hi = hi;
	}
	if (nU > 0)
		check_inv();
	if (autosettle)
		dlm_settle(M);
}

static void
begin_event(void)
{
	serial++;
	ev_nomem = 0;
	ev_answers = 0;
}

/* -------------------------------------------------------------- requests */

static void
submit(DLockOp op, int requester, int session, const char *key, int mode,
	   const char *const *names, int n, int64_t ttl, int64_t max_ttl)
{
	DLmRequest	r;

	memset(&r, 0, sizeof(r));
	r.op = op;
	r.requester = requester;
	r.owner_key = key;
	r.pid = PID(session);
	r.session_start = START(session);
	r.mode = mode;
	r.names = names;
	r.nnames = n;
	r.ttl_us = ttl;
	r.max_ttl_us = max_ttl;
	r.timeout_at = req_timeout;
	req_timeout = 0;
	r.role = req_role;
	r.any_role = req_any_role;
	r.role_max_locks = req_role_max;
	r.owner_max_locks = req_owner_max;
	r.role_max_bytes = req_role_max_bytes;
	r.owner_max_bytes = req_owner_max_bytes;
	r.keep_place = req_keep;
	req_keep = false;
	r.capacity = req_capacity;
	r.permits = req_permits;
	req_capacity = req_permits = 0;
	r.election = req_value != NULL && op != DLOCK_OP_PROCLAIM;
	r.value = req_value;
	req_value = NULL;
	begin_event();
	dlm_request(M, &r, NOW);
	after_event();
}

static void
acq(int c, const char *key, const char *name, int mode, int64_t ttl)
{
	const char *names[1] = {name};

	submit(DLOCK_OP_ACQUIRE, c, c, key, mode, names, 1, ttl, 0);
}

/* permits of a semaphore (15): acquire, or try */
static void
sem(int c, const char *key, const char *name, int32_t capacity, int32_t permits, int64_t ttl)
{
	req_capacity = capacity;
	req_permits = permits;
	acq(c, key, name, DLOCK_MODE_NL, ttl);
}

static void try_acq(int c, const char *key, const char *name, int mode, int64_t ttl);

static void
try_sem(int c, const char *key, const char *name, int32_t capacity, int32_t permits)
{
	req_capacity = capacity;
	req_permits = permits;
	try_acq(c, key, name, DLOCK_MODE_NL, 0);
}

/* a campaign (16) and a leader's new value */
static void
campaign(int c, const char *key, const char *name, const char *value, int64_t ttl)
{
	req_value = value;
	acq(c, key, name, DLOCK_MODE_EX, ttl);
}

static void
proclaim(int c, const char *key, const char *name, const char *value)
{
	const char *names[1] = {name};

	req_value = value;
	submit(DLOCK_OP_PROCLAIM, c, c, key, 0, names, 1, 0, 0);
}

/* The names whose leader changed in the last batch, as "a,b," */
static const char *
leader_changes(void)
{
	static char buf[256];
	size_t		n = 0;

	buf[0] = '\0';
	DLmLock    *l;

	for (size_t l_i = 0; (l = dlm_leader_change(M, l_i)) != NULL && n + strlen(l->name) + 2 < sizeof(buf);
		 l_i++)
		n += (size_t) snprintf(buf + n, sizeof(buf) - n, "%s,", l->name);
	return buf;
}

/* acquire with keep_place (14) */
static void
acq_keep(int c, const char *key, const char *name, int mode, int64_t ttl)
{
	req_keep = true;
	acq(c, key, name, mode, ttl);
}

static void
try_acq(int c, const char *key, const char *name, int mode, int64_t ttl)
{
	const char *names[1] = {name};

	submit(DLOCK_OP_TRY, c, c, key, mode, names, 1, ttl, 0);
}

static void
rel(int c, const char *key, const char *name)
{
	const char *names[1] = {name};

	submit(DLOCK_OP_RELEASE, c, c, key, 0, names, 1, 0, 0);
}

static void
renew(int c, const char *key, const char *name, int64_t ttl, int64_t max_ttl)
{
	const char *names[1] = {name};

	submit(DLOCK_OP_RENEW, c, c, key, 0, names, 1, ttl, max_ttl);
}

static void
conv(int c, const char *key, const char *name, int mode)
{
	const char *names[1] = {name};

	submit(DLOCK_OP_CONVERT, c, c, key, mode, names, 1, 0, 0);
}

static void
relall(int c, const char *key)
{
	submit(DLOCK_OP_RELEASE_ALL, c, c, key, 0, NULL, 0, 0, 0);
}

static void
acqall(int c, const char *key, const char *const *names, int n, int mode, int64_t ttl)
{
	submit(DLOCK_OP_ACQUIRE_ALL, c, c, key, mode, names, n, ttl, 0);
}

static void
withdraw(const int *list, int n)
{
	begin_event();
	dlm_withdraw(M, list, n, NOW);
	after_event();
}

static void
session_end(int c, int requester)
{
	begin_event();
	dlm_session_end(M, PID(c), START(c), requester, NOW);
	after_event();
}

static int
expire(int max)
{
	int			n;

	begin_event();
	n = dlm_expire(M, NOW, max);
	after_event();
	return n;
}

static void
settle(void)
{
	dlm_settle(M);
}

/* ----------------------------------------------------------------- tests */

/* A grant, its holder's fields, release, the lock freed; owner keys. */
static void
test_basic(void)
{
	static const char *const u[] = {"x", "y"};
	int64_t		t1;
	DLmHolder  *h;
	DLmLock    *L;

	setup(8, 1000000, 1);
	use(u, 2);
	NOW = 10;
	acq(0, NULL, "x", EX, 0);
	CHECK_ST(0, GRANTED);
	CHECK_EQ(recs[0].nev, 1);
	CHECK_EQ(recs[0].count, 1);
	CHECK_EQ(recs[0].expires_at, 0);
	t1 = recs[0].token;
	CHECK_EQ(t1, 1);			/* tickets from the counter's value on */
	L = dlm_lookup(M, "x");
	CHECK(L != NULL);
	if (L)
	{
		CHECK(strcmp(L->name, "x") == 0);
		CHECK_EQ(L->nheld[EX], 1);
	}
	h = NH("x", NULL, 0);
	CHECK(h != NULL);
	if (h)
	{
		CHECK_EQ(h->mode, EX);
		CHECK_EQ(h->count, 1);
		CHECK_EQ(h->token, t1);
		CHECK(!h->implied);
		CHECK(h->owner->key == NULL);
		CHECK_EQ(h->owner->pid, PID(0));
		CHECK_EQ(h->owner->session_start, START(0));
		CHECK_EQ(h->pid, PID(0));
		CHECK_EQ(h->backend_start, START(0));
		CHECK_EQ(h->granted_at, 10);
		CHECK_EQ(h->expires_at, 0);
		CHECK_EQ(h->ttl_us, 0);
	}
	CHECK_EQ(dlm_nlocks(M), 1);
	CHECK(dlm_waiter_of(M, 0) == NULL);

	NOW = 20;
	rel(0, NULL, "x");
	CHECK_ST(0, RELEASED);
	CHECK_EQ(recs[0].token, t1);
	CHECK_EQ(recs[0].count, 0);
	CHECK(dlm_lookup(M, "x") == NULL);
	CHECK_EQ(dlm_nlocks(M), 0);

	acq(0, NULL, "x", EX, 0);
	CHECK_ST(0, GRANTED);
	CHECK(recs[0].token > t1);

	/* an owner key owns: another session releases it, a session does not */
	acq(1, "K", "y", EX, 0);
	CHECK_ST(1, GRANTED);
	h = NH("y", "K", 0);
	CHECK(h != NULL);
	if (h)
	{
		CHECK(h->owner->key != NULL && strcmp(h->owner->key, "K") == 0);
		CHECK_EQ(h->pid, PID(1));	/* the session that acquired */
		CHECK_EQ(h->backend_start, START(1));
	}
	rel(2, NULL, "y");
	CHECK_ST(2, NOT_HELD);
	rel(1, NULL, "y");
	CHECK_ST(1, NOT_HELD);
	CHECK(NH("y", "K", 0) != NULL);
	rel(2, "K", "y");
	CHECK_ST(2, RELEASED);
	CHECK(dlm_lookup(M, "y") == NULL);
	teardown();
}

/*
 * 6: two holders converting up at once.  When the one behind is granted, it
 * gives up the mode that held the one before it back: that one is granted
 * in the same event, not left waiting for a pass that never comes (found
 * by the reference model's invariants in a 10M-event run).
 */
static void
test_conversion_frees_earlier(void)
{
	static const char *const u[] = {"c"};

	setup(8, 1000000, 1);
	use(u, 1);
	NOW = 10;
	acq(0, "A", "c", NL, 0);
	CHECK_ST(0, GRANTED);
	acq(1, NULL, "c", CW, 0);
	CHECK_ST(1, GRANTED);
	acq(2, NULL, "c", CW, 1000);
	CHECK_ST(2, GRANTED);
	conv(0, "A", "c", PR);			/* behind the CW of 1 and 2 */
	CHECK_ST(0, QUEUED);
	conv(1, NULL, "c", PR);			/* behind the CW of 2 */
	CHECK_ST(1, QUEUED);
	NOW = 2000;
	expire(10);						/* 2's lease: 1 converts, then 0 can */
	CHECK_ST(1, GRANTED);
	CHECK_ST(0, GRANTED);
	CHECK(NH("c", "A", 0) != NULL && NH("c", "A", 0)->mode == PR);
	teardown();
}

/* c's last answer is an ERROR with this DLmError */
#define CHECK_REFUSED_WITH(c, e) \
	do { \
		CHECK_ST(c, ERROR); \
		CHECK_EQ(recs[c].error, e); \
	} while (0)

/*
 * 12: an owner key in use belongs to the role that filled it: another
 * role's every kind of request with it is refused and changes nothing;
 * any_role may act; an emptied key goes to the next role; loading gives
 * the row's role.
 */
static void
test_owner_role(void)
{
	static const char *const u[] = {"x", "y", "z"};
	DLmHolder  *h;
	DLmHolderRow row;

	setup(8, 1000000, 1);
	use(u, 3);
	NOW = 10;
	req_role = 1;
	acq(0, "K", "x", EX, 1000000);
	CHECK_ST(0, GRANTED);
	h = NH("x", "K", 0);
	CHECK(h != NULL && h->owner->role == 1);

	req_role = 2;
	rel(1, "K", "x");
	CHECK_REFUSED_WITH(1, DLM_ERR_NOT_YOURS);
	renew(1, "K", "x", 5000000, 0);
	CHECK_REFUSED_WITH(1, DLM_ERR_NOT_YOURS);
	conv(1, "K", "x", PR);
	CHECK_REFUSED_WITH(1, DLM_ERR_NOT_YOURS);
	acq(1, "K", "y", EX, 1000000);
	CHECK_REFUSED_WITH(1, DLM_ERR_NOT_YOURS);
	CHECK(dlm_lookup(M, "y") == NULL);
	try_acq(1, "K", "x", EX, 1000000);
	CHECK_REFUSED_WITH(1, DLM_ERR_NOT_YOURS);
	relall(1, "K");
	CHECK_REFUSED_WITH(1, DLM_ERR_NOT_YOURS);
	h = NH("x", "K", 0);
	CHECK(h != NULL && h->count == 1 && h->mode == EX && h->expires_at == 10 + 1000000);
	CHECK(dlm_touched_holder(M, 0) == NULL);

	/* an administrator acts with it; the owner keeps its role */
	req_any_role = true;
	renew(1, "K", "x", 5000000, 0);
	CHECK_ST(1, RENEWED);
	acq(1, "K", "y", EX, 1000000);
	CHECK_ST(1, GRANTED);
	h = NH("y", "K", 0);
	CHECK(h != NULL && h->owner->role == 1);
	req_any_role = false;
	req_role = 1;
	relall(0, "K");
	CHECK_ST(0, COUNT);
	CHECK_EQ(recs[0].count, 2);

	/* emptied, the key is anybody's: role 2 fills it and role 1 is refused */
	req_role = 2;
	acq(1, "K", "x", EX, 1000000);
	CHECK_ST(1, GRANTED);
	h = NH("x", "K", 0);
	CHECK(h != NULL && h->owner->role == 2);
	req_role = 1;
	rel(0, "K", "x");
	CHECK_REFUSED_WITH(0, DLM_ERR_NOT_YOURS);

	/* a waiting request alone puts a key in use */
	acq(2, NULL, "z", EX, 0);
	CHECK_ST(2, GRANTED);
	acq(3, "W", "z", EX, 1000000);
	CHECK_ST(3, QUEUED);
	req_role = 2;
	relall(4, "W");
	CHECK_REFUSED_WITH(4, DLM_ERR_NOT_YOURS);
	CHECK(dlm_waiter_of(M, 3) != NULL);
	/* a session's own requests are never refused for its role */
	rel(2, NULL, "z");
	CHECK_ST(2, RELEASED);
	CHECK_ST(3, GRANTED);
	req_role = 1;
	relall(3, "W");
	req_role = 2;
	relall(1, "K");
	CHECK_ST(1, COUNT);
	teardown();

	/* loading: the owner gets its first row's role */
	setup(8, 100, 1);
	dlm_set_counter(M, 5000);
	cur_hi = 5000;
	row = (DLmHolderRow) {.name = "x", .owner_key = "L", .pid = 50, .backend_start = 500,
		.mode = EX, .count = 1, .token = 4000, .granted_at = 10, .expires_at = 10000,
	.ttl_us = 5000, .role = 7};
	CHECK_EQ(dlm_load_holder(M, &row), DLM_OK);
	dlm_settle(M);
	NOW = 20;
	req_role = 8;
	rel(0, "L", "x");
	CHECK_REFUSED_WITH(0, DLM_ERR_NOT_YOURS);
	req_role = 7;
	rel(0, "L", "x");
	CHECK_ST(0, RELEASED);
	req_role = 0;
	teardown();

	/*
	 * A session asks as several roles (a SECURITY DEFINER function's
	 * owner): each holder and waiting part counts under, and is shown
	 * with, the role of the request that took it, also when a waiter is
	 * granted later and on a load.  The session releases what it holds
	 * whatever role it has now.
	 */
	setup(8, 1000000, 1);
	use(u, 3);
	req_role = 1;
	acq(0, NULL, "x", EX, 0);
	CHECK_ST(0, GRANTED);
	req_role = 2;
	acq(0, NULL, "y", EX, 0);
	CHECK_ST(0, GRANTED);
	CHECK(NH("x", NULL, 0)->role == 1 && NH("y", NULL, 0)->role == 2);
	CHECK_EQ(dlm_role_locks(M, 1), 1);
	CHECK_EQ(dlm_role_locks(M, 2), 1);
	/* role 2's quota of 1 is full; role 1's of 2 is not, same session */
	req_role_max = 1;
	acq(0, NULL, "z", EX, 0);
	CHECK_REFUSED_WITH(0, DLM_ERR_ROLE_QUOTA);
	req_role = 1;
	req_role_max = 2;
	acq(1, NULL, "y", EX, 0);	/* another session waits for y, as role 1 */
	CHECK_ST(1, QUEUED);
	CHECK_EQ(dlm_role_locks(M, 1), 2);
	req_role_max = 0;
	rel(0, NULL, "y");			/* released by the session as role 1 */
	CHECK_ST(0, RELEASED);
	CHECK_ST(1, GRANTED);
	CHECK(NH("y", NULL, 1)->role == 1);
	CHECK_EQ(dlm_role_locks(M, 2), 0);
	CHECK_EQ(dlm_role_locks(M, 1), 2);
	relall(0, NULL);
	relall(1, NULL);
	teardown();
	setup(8, 100, 1);
	dlm_set_counter(M, 5000);
	cur_hi = 5000;
	row = (DLmHolderRow) {.name = "x", .pid = 50, .backend_start = 500,
		.mode = EX, .count = 1, .token = 4000, .granted_at = 10, .role = 3};
	CHECK_EQ(dlm_load_holder(M, &row), DLM_OK);
	row.name = "y";
	row.token = 4001;
	row.role = 4;
	CHECK_EQ(dlm_load_holder(M, &row), DLM_OK);
	CHECK_EQ(dlm_role_locks(M, 3), 1);
	CHECK_EQ(dlm_role_locks(M, 4), 1);
	req_role = 0;
	teardown();
}

/*
 * 13: limits.  Parts count path depth; the objects in all bound every new
 * request; quotas count named locks (held or waited for) of the owner and
 * of the role's owners, a re-entrant take adds none, a conversion none,
 * and what is released frees its place.
 */
static void
test_limits(void)
{
	static const char *const u[] = {"a", "b", "c", "d", "/p/q/r", "/p"};
	const char *const two[] = {"a", "b"};

	setup(8, 1000000, 1);
	use(u, 6);
	NOW = 10;

	/* parts: /p/q/r is three */
	dlm_set_limits(M, 0, 2);
	acq(0, NULL, "/p/q/r", EX, 0);
	CHECK_REFUSED_WITH(0, DLM_ERR_TOO_MANY_PARTS);
	CHECK(dlm_lookup(M, "/p") == NULL);
	dlm_set_limits(M, 0, 3);
	acq(0, NULL, "/p/q/r", EX, 0);
	CHECK_ST(0, GRANTED);
	rel(0, NULL, "/p/q/r");

	/* objects: a request that could pass the cap is refused whole */
	dlm_set_limits(M, 3, 0);
	acq(0, NULL, "a", EX, 0);
	CHECK_ST(0, GRANTED);
	acq(1, NULL, "a", EX, 0);
	CHECK_ST(1, QUEUED);
	acq(2, NULL, "/p/q/r", EX, 0);
	CHECK_REFUSED_WITH(2, DLM_ERR_NO_SPACE);
	acq(2, NULL, "b", EX, 0);
	CHECK_ST(2, GRANTED);
	try_acq(3, NULL, "c", EX, 0);
	CHECK_REFUSED_WITH(3, DLM_ERR_NO_SPACE);
	rel(2, NULL, "b");
	try_acq(3, NULL, "c", EX, 0);
	CHECK_ST(3, GRANTED);
	relall(0, NULL);
	CHECK_ST(1, GRANTED);			/* the hand-on adds nothing */
	relall(1, NULL);
	relall(3, NULL);
	dlm_set_limits(M, 0, 0);

	/* quotas: an owner's and a role's named locks, held or waited for */
	req_role = 5;
	req_owner_max = 2;
	acq(0, "K", "a", EX, 1000000);
	CHECK_ST(0, GRANTED);
	acq(0, "K", "b", EX, 1000000);
	CHECK_ST(0, GRANTED);
	acq(0, "K", "c", EX, 1000000);
	CHECK_REFUSED_WITH(0, DLM_ERR_OWNER_QUOTA);
	acq(0, "K", "a", EX, 1000000);	/* re-entrant: nothing new */
	CHECK_ST(0, GRANTED);
	conv(0, "K", "b", PR);
	CHECK_ST(0, GRANTED);
	submit(DLOCK_OP_ACQUIRE_ALL, 0, 0, "K", PR, two, 2, 1000000, 0);
	CHECK_ST(0, GRANTED);			/* both held already */
	req_owner_max = 0;
	req_role_max = 3;
	acq(1, "L", "c", EX, 1000000);	/* another owner of role 5: 2 + 1 */
	CHECK_ST(1, GRANTED);
	CHECK_EQ(dlm_role_locks(M, 5), 3);
	acq(2, "M", "d", EX, 1000000);
	CHECK_REFUSED_WITH(2, DLM_ERR_ROLE_QUOTA);
	req_role = 6;					/* another role has its own count */
	acq(2, "M", "d", EX, 1000000);
	CHECK_ST(2, GRANTED);
	acq(3, "N", "d", EX, 1000000);	/* a waiter counts */
	CHECK_ST(3, QUEUED);
	CHECK_EQ(dlm_role_locks(M, 6), 2);
	req_role = 5;
	relall(0, "K");
	CHECK_EQ(dlm_role_locks(M, 5), 1);
	acq(2, "M2", "a", EX, 1000000);	/* the release freed a place */
	CHECK_ST(2, GRANTED);
	req_role_max = 0;
	teardown();

	/* bytes: a named lock counts its name's length and its owner key's */
	setup(8, 1000000, 1);
	use(u, 6);
	NOW = 10;
	req_role = 7;
	req_owner_max_bytes = 5;
	acq(0, "KK", "a", EX, 1000000);	/* 1 + 2 */
	CHECK_ST(0, GRANTED);
	acq(0, "KK", "b", EX, 1000000);	/* 3 + 3 > 5 */
	CHECK_REFUSED_WITH(0, DLM_ERR_OWNER_QUOTA);
	acq(0, "KK", "a", EX, 1000000);	/* re-entrant: nothing new */
	CHECK_ST(0, GRANTED);
	CHECK_EQ(dlm_lookup(M, "a") != NULL ? NH("a", "KK", 0)->owner->nbytes : -1, 3);
	req_owner_max_bytes = 0;
	req_role_max_bytes = 8;
	acq(1, "K2", "b", EX, 1000000);
	CHECK_ST(1, GRANTED);
	CHECK_EQ(dlm_role_bytes(M, 7), 6);
	acq(2, "K3", "c", EX, 1000000);	/* 6 + 3 > 8 */
	CHECK_REFUSED_WITH(2, DLM_ERR_ROLE_QUOTA);
	acq(2, NULL, "c", EX, 0);		/* a session's: the name alone, 7 */
	CHECK_ST(2, GRANTED);
	rel(0, "KK", "a");
	rel(0, "KK", "a");
	CHECK_EQ(dlm_role_bytes(M, 7), 4);
	req_role_max_bytes = 0;
	req_role = 0;
	teardown();
}

/* Strict FIFO by ticket: a compatible request behind an incompatible waiter waits. */
static void
test_fifo(void)
{
	static const char *const u[] = {"x", "y"};
	int64_t		t0,
				q1,
				q2;
	DLmWaiter  *w;

	setup(8, 1000000, 1);
	use(u, 2);
	acq(0, NULL, "x", PR, 0);
	CHECK_ST(0, GRANTED);
	t0 = recs[0].token;
	req_timeout = 777;
	acq(1, NULL, "x", EX, 0);
	CHECK_ST(1, QUEUED);
	q1 = recs[1].token;
	CHECK(q1 > t0);
	acq(2, NULL, "x", PR, 0);
	CHECK_ST(2, QUEUED);		/* compatible with the holder, not with the queue */
	q2 = recs[2].token;
	CHECK(q2 > q1);
	CHECK(!ANSWERED(1));
	w = dlm_waiter_of(M, 1);
	CHECK(w != NULL);
	if (w)
	{
		CHECK(strcmp(w->lock->name, "x") == 0);
		CHECK_EQ(w->mode, EX);
		CHECK_EQ(w->ticket, q1);
		CHECK_EQ(w->requester, 1);
		CHECK(!w->implied);
		CHECK(w->holder == NULL);
		CHECK_EQ(w->pid, PID(1));
		CHECK_EQ(w->timeout_at, 777);
		CHECK(w->owner->key == NULL && w->owner->pid == PID(1));
	}
	{
		DLmLock    *L = dlm_lookup(M, "x");
		DLmWaiter  *a = L ? dlm_lock_queue(L) : NULL;
		DLmWaiter  *b = a ? dlm_waiter_next(a) : NULL;

		CHECK(a != NULL && a->ticket == q1);
		CHECK(b != NULL && b->ticket == q2);
		CHECK(b != NULL && dlm_waiter_next(b) == NULL);
		if (L)
		{
			CHECK_EQ(L->line->nwaiting[EX], 1);
			CHECK_EQ(L->line->nwaiting[PR], 1);
		}
	}

	rel(0, NULL, "x");
	CHECK_ST(0, RELEASED);
	CHECK_ST(1, GRANTED);
	CHECK(recs[1].token > q2);	/* a fresh ticket at grant */
	CHECK(!ANSWERED(2));
	CHECK(dlm_waiter_of(M, 1) == NULL);
	rel(1, NULL, "x");
	CHECK_ST(2, GRANTED);
	rel(2, NULL, "x");

	/* a held lock is re-entrant: it waits for nobody */
	acq(4, NULL, "y", PR, 0);
	acq(5, NULL, "y", EX, 0);
	CHECK_ST(5, QUEUED);
	acq(4, NULL, "y", PR, 0);
	CHECK_ST(4, GRANTED);
	CHECK_EQ(recs[4].count, 2);
	rel(4, NULL, "y");
	CHECK(!ANSWERED(5));
	rel(4, NULL, "y");
	CHECK_ST(5, GRANTED);
	teardown();
}

/* Every compatible run at the head of the queue is granted together. */
static void
test_shared_run(void)
{
	static const char *const u[] = {"x"};
	int64_t		q[6];

	setup(8, 1000000, 1);
	use(u, 1);
	acq(0, NULL, "x", EX, 0);
	acq(1, NULL, "x", PR, 0);
	acq(2, NULL, "x", PR, 0);
	acq(3, NULL, "x", CR, 0);
	acq(4, NULL, "x", EX, 0);
	acq(5, NULL, "x", PR, 0);
	for (int c = 1; c <= 5; c++)
		q[c] = recs[c].token;
	rel(0, NULL, "x");
	CHECK_ST(1, GRANTED);
	CHECK_ST(2, GRANTED);
	CHECK_ST(3, GRANTED);
	CHECK(!ANSWERED(4));
	CHECK(!ANSWERED(5));
	CHECK(recs[1].token > q[5]);
	CHECK(recs[2].token > recs[1].token);	/* granted in ticket order */
	CHECK(recs[3].token > recs[2].token);
	CHECK_EQ(nholders("x"), 3);
	CHECK_EQ(nqueue("x"), 2);
	rel(1, NULL, "x");
	rel(2, NULL, "x");
	CHECK(!ANSWERED(4));
	rel(3, NULL, "x");
	CHECK_ST(4, GRANTED);
	CHECK(!ANSWERED(5));
	rel(4, NULL, "x");
	CHECK_ST(5, GRANTED);
	rel(5, NULL, "x");
	CHECK(dlm_lookup(M, "x") == NULL);
	teardown();
}

/* Try-acquire: granted now or refused, never queued. */
static void
test_try(void)
{
	static const char *const u[] = {"x", "z", "/a", "/a/b"};

	setup(8, 1000000, 1);
	use(u, 4);
	acq(0, NULL, "x", PR, 0);
	try_acq(1, NULL, "x", PR, 0);
	CHECK_ST(1, GRANTED);
	acq(2, NULL, "x", EX, 0);
	CHECK_ST(2, QUEUED);
	autosettle = false;
	settle();
	try_acq(3, NULL, "x", PR, 0);
	CHECK_ST(3, REFUSED);
	CHECK_EQ(recs[3].nev, 1);
	CHECK(dlm_waiter_of(M, 3) == NULL);
	CHECK_EQ(nqueue("x"), 1);
	CHECK_EQ(count_touched_waiters(), 0);
	CHECK_EQ(count_touched_holders(), 0);
	CHECK_EQ(count_notified(NULL), 0);
	autosettle = true;
	try_acq(3, NULL, "x", CR, 0);
	CHECK_ST(3, REFUSED);		/* CR conflicts with the queued EX */
	try_acq(3, NULL, "x", NL, 0);
	CHECK_ST(3, GRANTED);		/* NL conflicts with nothing */
	try_acq(0, NULL, "x", PR, 0);
	CHECK_ST(0, GRANTED);		/* re-entrant */
	CHECK_EQ(recs[0].count, 2);
	try_acq(4, NULL, "z", EX, 0);
	CHECK_ST(4, GRANTED);
	try_acq(5, NULL, "z", EX, 0);
	CHECK_ST(5, REFUSED);
	/* a path refused for its ancestor: nothing left behind */
	acq(6, NULL, "/a", EX, 0);
	try_acq(7, NULL, "/a/b", CR, 0);
	CHECK_ST(7, REFUSED);
	CHECK(dlm_lookup(M, "/a/b") == NULL);
	CHECK_EQ(nqueue("/a"), 0);
	CHECK(dlm_waiter_of(M, 7) == NULL);
	teardown();
}

/* Re-entrancy: the same token, a count, released level by level. */
static void
test_reentrant(void)
{
	static const char *const u[] = {"x", "y", "/p", "/p/q"};
	int64_t		t;
	DLmHolder  *h;

	setup(8, 1000000, 1);
	use(u, 4);
	acq(0, NULL, "x", EX, 0);
	t = recs[0].token;
	acq(0, NULL, "x", EX, 0);
	CHECK_ST(0, GRANTED);
	CHECK_EQ(recs[0].token, t);
	CHECK_EQ(recs[0].count, 2);
	acq(0, NULL, "x", PR, 0);	/* a weaker mode: re-entrant too */
	CHECK_ST(0, GRANTED);
	CHECK_EQ(recs[0].token, t);
	CHECK_EQ(recs[0].count, 3);
	try_acq(0, NULL, "x", CR, 0);
	CHECK_ST(0, GRANTED);
	CHECK_EQ(recs[0].count, 4);
	h = NH("x", NULL, 0);
	CHECK(h && h->count == 4 && h->mode == EX && h->token == t);
	CHECK_EQ(nholders("x"), 1);
	for (int left = 3; left >= 0; left--)
	{
		rel(0, NULL, "x");
		CHECK_ST(0, RELEASED);
		CHECK_EQ(recs[0].token, t);
		CHECK_EQ(recs[0].count, left);
	}
	CHECK(dlm_lookup(M, "x") == NULL);
	rel(0, NULL, "x");
	CHECK_ST(0, NOT_HELD);

	/* waiting requests do not hold back a re-entrant one */
	acq(0, NULL, "y", PR, 0);
	acq(1, NULL, "y", EX, 0);
	acq(0, NULL, "y", CR, 0);
	CHECK_ST(0, GRANTED);
	CHECK_EQ(recs[0].count, 2);

	/* a path: the leaf counts, its intentions do not grow */
	acq(2, NULL, "/p/q", EX, 0);
	acq(2, NULL, "/p/q", EX, 0);
	CHECK_ST(2, GRANTED);
	CHECK_EQ(recs[2].count, 2);
	h = IH("/p", NULL, 2, CW);
	CHECK(h && h->count == 1);
	rel(2, NULL, "/p/q");
	h = IH("/p", NULL, 2, CW);
	CHECK(h && h->count == 1);
	rel(2, NULL, "/p/q");
	CHECK(dlm_lookup(M, "/p") == NULL);
	CHECK(dlm_lookup(M, "/p/q") == NULL);
	teardown();
}

/* A re-entrant acquire with a ttl sets the lease to now + ttl. */
static void
test_reentrant_lease(void)
{
	static const char *const u[] = {"x", "y"};
	DLmHolder  *h;

	setup(8, 1000000, 1);
	use(u, 2);
	NOW = 1000;
	acq(0, NULL, "x", EX, 500);
	CHECK_ST(0, GRANTED);
	CHECK_EQ(recs[0].expires_at, 1500);
	h = NH("x", NULL, 0);
	CHECK(h && h->expires_at == 1500 && h->ttl_us == 500);
	CHECK_EQ(dlm_next_expiry(M), 1500);
	NOW = 1200;
	acq(0, NULL, "x", EX, 2000);
	CHECK_ST(0, GRANTED);
	CHECK_EQ(recs[0].count, 2);
	CHECK_EQ(recs[0].expires_at, 3200);
	CHECK_EQ(dlm_next_expiry(M), 3200);
	NOW = 1300;
	acq(0, NULL, "x", EX, 0);	/* no ttl: the lease stays */
	CHECK_EQ(recs[0].count, 3);
	CHECK_EQ(recs[0].expires_at, 3200);
	h = NH("x", NULL, 0);
	CHECK(h && h->expires_at == 3200);

	/* a lock without lease gets one */
	acq(1, NULL, "y", EX, 0);
	CHECK_EQ(recs[1].expires_at, 0);
	acq(1, NULL, "y", EX, 100);
	CHECK_EQ(recs[1].expires_at, 1400);
	CHECK_EQ(dlm_next_expiry(M), 1400);
	teardown();
}

/* A stronger mode than the held one: MODE_HELD, nothing changes. */
static void
test_mode_held(void)
{
	static const char *const u[] = {"a", "x", "y", "z"};
	static const char *const ax[] = {"a", "x"};
	DLmHolder  *h;

	setup(8, 1000000, 1);
	use(u, 4);
	acq(0, NULL, "x", PR, 0);
	acq(0, NULL, "x", EX, 0);
	CHECK_ST(0, MODE_HELD);
	CHECK_EQ(recs[0].count, PR);
	CHECK_EQ(recs[0].name_index, 0);
	h = NH("x", NULL, 0);
	CHECK(h && h->mode == PR && h->count == 1);
	CHECK(dlm_waiter_of(M, 0) == NULL);
	acq(0, NULL, "x", PW, 0);
	CHECK_ST(0, MODE_HELD);
	try_acq(0, NULL, "x", EX, 0);
	CHECK_ST(0, MODE_HELD);
	acq(0, NULL, "x", CW, 0);	/* PR does not include CW */
	CHECK_ST(0, MODE_HELD);
	acq(0, NULL, "x", CR, 0);
	CHECK_ST(0, GRANTED);
	CHECK_EQ(recs[0].count, 2);

	acq(1, NULL, "y", CW, 0);
	acq(1, NULL, "y", PR, 0);
	CHECK_ST(1, MODE_HELD);
	CHECK_EQ(recs[1].count, CW);
	acq(2, NULL, "z", PW, 0);
	acq(2, NULL, "z", CW, 0);
	CHECK_ST(2, GRANTED);
	acq(2, NULL, "z", PR, 0);
	CHECK_ST(2, GRANTED);
	CHECK_EQ(recs[2].count, 3);

	/* acquire_all: the index of the name, nothing taken */
	acqall(0, NULL, ax, 2, EX, 0);
	CHECK_ST(0, MODE_HELD);
	CHECK_EQ(recs[0].name_index, 1);
	CHECK_EQ(recs[0].count, PR);
	CHECK(dlm_lookup(M, "a") == NULL);
	h = NH("x", NULL, 0);
	CHECK(h && h->count == 2);
	teardown();
}

/*
 * The grant pass (6): a plain waiter whose owner meanwhile got the lock in
 * a mode that covers it takes it re-entrantly; one that does not: MODE_HELD.
 */
static void
test_mode_held_in_pass(void)
{
	static const char *const u[] = {"x", "y"};
	DLmHolder  *h;

	setup(8, 1000000, 1);
	use(u, 2);
	acq(0, NULL, "x", EX, 0);
	acq(3, "K", "x", PR, 0);
	CHECK_ST(3, QUEUED);
	acq(4, "K", "x", CR, 0);
	CHECK_ST(4, QUEUED);
	rel(0, NULL, "x");
	CHECK_ST(3, GRANTED);
	CHECK_ST(4, GRANTED);
	CHECK_EQ(recs[4].token, recs[3].token);
	CHECK_EQ(recs[4].count, 2);
	h = NH("x", "K", 0);
	CHECK(h && h->count == 2 && h->mode == PR);

	acq(0, NULL, "y", EX, 0);
	acq(3, "K", "y", PR, 0);
	acq(4, "K", "y", EX, 0);
	CHECK_ST(4, QUEUED);
	rel(0, NULL, "y");
	CHECK_ST(3, GRANTED);
	CHECK_ST(4, MODE_HELD);
	CHECK_EQ(recs[4].count, PR);
	CHECK(dlm_waiter_of(M, 4) == NULL);
	CHECK_EQ(nqueue("y"), 0);
	h = NH("y", "K", 0);
	CHECK(h && h->count == 1 && h->mode == PR);
	teardown();
}

/* Conversions: down at once keeping the token, up with a new larger one. */
static void
test_convert(void)
{
	static const char *const u[] = {"x", "y"};
	int64_t		t0,
				t1,
				q2,
				t1b;
	DLmHolder  *h;
	DLmWaiter  *w;

	setup(8, 1000000, 1);
	use(u, 2);
	acq(0, NULL, "x", PR, 0);
	t0 = recs[0].token;
	acq(1, NULL, "x", PR, 0);
	t1 = recs[1].token;
	acq(2, NULL, "x", EX, 0);
	CHECK_ST(2, QUEUED);
	q2 = recs[2].token;

	conv(0, NULL, "x", CR);		/* down: at once, same token */
	CHECK_ST(0, GRANTED);
	CHECK_EQ(recs[0].token, t0);
	h = NH("x", NULL, 0);
	CHECK(h && h->mode == CR && h->token == t0);
	CHECK(!ANSWERED(2));

	conv(1, NULL, "x", EX);		/* up, behind the CR of 0 */
	CHECK_ST(1, QUEUED);
	CHECK(recs[1].token > q2);
	w = dlm_waiter_of(M, 1);
	CHECK(w != NULL);
	if (w)
	{
		CHECK(w->holder != NULL);
		CHECK_EQ(w->mode, EX);
		CHECK(w->holder == NH("x", NULL, 1));
	}
	h = NH("x", NULL, 1);
	CHECK(h && h->mode == PR && h->token == t1);	/* the old mode is kept */
	w = find_w("x", NULL, 1, false, 1);
	CHECK(w != NULL && dlm_lock_queue(dlm_lookup(M, "x")) == w);	/* ahead of the queue */
	{
		DLmLock    *L = dlm_lookup(M, "x");

		CHECK(L && L->line->nconverting[EX] == 1 && L->line->nwaiting[EX] == 1);
	}

	rel(0, NULL, "x");
	CHECK_ST(1, GRANTED);		/* ahead of 2, queued earlier */
	t1b = recs[1].token;
	CHECK(t1b > t1);
	CHECK(t1b > q2);
	CHECK(!ANSWERED(2));
	h = NH("x", NULL, 1);
	CHECK(h && h->mode == EX && h->token == t1b);

	conv(1, NULL, "x", PR);		/* down keeps the new token; 2 still waits */
	CHECK_ST(1, GRANTED);
	CHECK_EQ(recs[1].token, t1b);
	CHECK(!ANSWERED(2));
	rel(1, NULL, "x");
	CHECK_ST(2, GRANTED);
	CHECK(recs[2].token > t1b);

	/* up at once when others hold nothing conflicting, waiters or not */
	acq(3, NULL, "y", PR, 0);
	acq(3, NULL, "y", PR, 0);
	t0 = recs[3].token;
	acq(4, NULL, "y", EX, 0);
	q2 = recs[4].token;
	conv(3, NULL, "y", EX);
	CHECK_ST(3, GRANTED);
	CHECK(recs[3].token > t0);
	CHECK(recs[3].token > q2);
	CHECK(!ANSWERED(4));
	h = NH("y", NULL, 3);
	CHECK(h && h->mode == EX && h->count == 2);		/* the count stays */
	t0 = recs[3].token;
	conv(3, NULL, "y", EX);		/* the same mode: at once, same token */
	CHECK_ST(3, GRANTED);
	CHECK_EQ(recs[3].token, t0);
	conv(3, NULL, "y", NL);
	CHECK_ST(3, GRANTED);
	CHECK_ST(4, GRANTED);		/* the grant pass after a down-conversion */
	teardown();
}

/*
 * README 1 and 10: holders are kept in grant order and their tokens grow in
 * that order; an up-conversion is a grant with a fresh token, so the
 * converted holder must come after the holders granted before it.
 */
static void
test_holder_order(void)
{
	static const char *const u[] = {"x"};
	int64_t		last = 0;
	int			n = 0;
	DLmLock    *L;

	setup(8, 1000000, 1);
	use(u, 1);
	acq(0, NULL, "x", PR, 0);
	acq(1, NULL, "x", CR, 0);
	conv(0, NULL, "x", PW);		/* PW beside CR: at once, a new token */
	CHECK_ST(0, GRANTED);
	CHECK(recs[0].token > recs[1].token);
	L = dlm_lookup(M, "x");
	for (DLmHolder *h = L ? dlm_lock_holders(L) : NULL; h; h = dlm_holder_next(h))
	{
		CHECK(h->token > last);
		last = h->token;
		n++;
	}
	CHECK_EQ(n, 2);
	teardown();
}

/* Conversions are served before waiters queued earlier. */
static void
test_convert_before_waiters(void)
{
	static const char *const u[] = {"x"};
	int64_t		q2,
				q3;

	setup(8, 1000000, 1);
	use(u, 1);
	acq(0, NULL, "x", PR, 0);
	acq(1, NULL, "x", PR, 0);
	acq(2, NULL, "x", EX, 0);
	q2 = recs[2].token;
	acq(3, NULL, "x", PR, 0);
	CHECK_ST(3, QUEUED);
	q3 = recs[3].token;
	conv(0, NULL, "x", EX);
	CHECK_ST(0, QUEUED);
	CHECK(recs[0].token > q3);
	rel(1, NULL, "x");
	CHECK_ST(0, GRANTED);
	CHECK(recs[0].token > q2 && recs[0].token > q3);
	CHECK(!ANSWERED(2));
	CHECK(!ANSWERED(3));
	rel(0, NULL, "x");
	CHECK_ST(2, GRANTED);
	CHECK(!ANSWERED(3));
	rel(2, NULL, "x");
	CHECK_ST(3, GRANTED);
	teardown();
}

/* Convert: NOT_HELD, a conversion already waiting, a holder released while converting. */
static void
test_convert_errors(void)
{
	static const char *const u[] = {"x", "y", "/a", "/a/b"};
	DLmHolder  *h;

	setup(8, 1000000, 1);
	use(u, 4);
	conv(0, NULL, "x", EX);
	CHECK_ST(0, NOT_HELD);
	acq(0, NULL, "/a/b", EX, 0);
	conv(0, NULL, "/a", EX);	/* an implied holder is not a named one */
	CHECK_ST(0, NOT_HELD);
	acq(1, NULL, "x", PR, 0);
	conv(0, NULL, "x", EX);		/* held by another owner */
	CHECK_ST(0, NOT_HELD);

	acq(2, "K", "x", PR, 0);
	conv(2, "K", "x", EX);
	CHECK_ST(2, QUEUED);
	conv(3, "K", "x", PW);
	CHECK_ST(3, ERROR);
	CHECK_EQ(recs[3].error, DLM_ERR_CONVERSION_WAITING);
	conv(3, "K", "x", CR);		/* a down-conversion too */
	CHECK_ST(3, ERROR);
	CHECK_EQ(recs[3].error, DLM_ERR_CONVERSION_WAITING);
	h = NH("x", "K", 0);
	CHECK(h && h->mode == PR);
	CHECK_EQ(nqueue("x"), 1);
	rel(1, NULL, "x");
	CHECK_ST(2, GRANTED);

	/* the last release of a converting holder: the conversion NOT_HELD */
	acq(4, "K2", "y", PR, 0);
	acq(5, NULL, "y", PR, 0);
	conv(4, "K2", "y", EX);
	CHECK_ST(4, QUEUED);
	rel(6, "K2", "y");
	CHECK_ST(6, RELEASED);
	CHECK_EQ(recs[6].count, 0);
	CHECK_ST(4, NOT_HELD);
	CHECK(dlm_waiter_of(M, 4) == NULL);
	CHECK_EQ(nqueue("y"), 0);
	CHECK_EQ(nholders("y"), 1);
	teardown();
}

/* Two holders that both convert up: the second gets DEADLOCK (a 2-step cycle). */
static void
test_convert_deadlock(void)
{
	static const char *const u[] = {"x"};
	DLmHolder  *h;

	setup(8, 1000000, 1);
	use(u, 1);
	acq(0, NULL, "x", PR, 0);
	acq(1, NULL, "x", PR, 0);
	conv(0, NULL, "x", EX);
	CHECK_ST(0, QUEUED);
	conv(1, NULL, "x", EX);
	CHECK_ST(1, DEADLOCK);
	CHECK(!ANSWERED(0));
	CHECK_EQ(recs[1].ncycle, 2);
	if (recs[1].ncycle == 2)
	{
		DLmCycleStep *s = recs[1].cycle;

		CHECK(!s[0].waiter_keyed && s[0].waiter_pid == PID(1));
		CHECK(strcmp(s[0].lock, "x") == 0);
		CHECK(!s[0].blocker_keyed && s[0].blocker_pid == PID(0));
		CHECK(!s[1].waiter_keyed && s[1].waiter_pid == PID(0));
		CHECK(strcmp(s[1].lock, "x") == 0);
		CHECK(s[1].held);
		CHECK(!s[1].blocker_keyed && s[1].blocker_pid == PID(1));
	}
	h = NH("x", NULL, 1);
	CHECK(h && h->mode == PR);
	CHECK(dlm_waiter_of(M, 1) == NULL);
	CHECK(dlm_waiter_of(M, 0) != NULL);
	rel(1, NULL, "x");
	CHECK_ST(0, GRANTED);
	h = NH("x", NULL, 0);
	CHECK(h && h->mode == EX);
	teardown();
}

/* Paths: EX on /a blocks everything under /a; groups granted together. */
static void
test_path_ex_subtree(void)
{
	static const char *const u[] = {"/a", "/a/b", "/a/b/c", "/a/c", "/a/c/d", "/b"};
	DLmWaiter  *w,
			   *wi;
	DLmHolder  *h;

	setup(8, 1000000, 1);
	use(u, 6);
	acq(0, NULL, "/a", EX, 0);
	acq(1, NULL, "/a/b", PR, 0);
	CHECK_ST(1, QUEUED);
	w = find_w("/a/b", NULL, 1, false, 0);
	wi = find_w("/a", NULL, 1, true, 0);
	CHECK(w != NULL && wi != NULL);
	if (w && wi)
	{
		CHECK_EQ(w->mode, PR);
		CHECK_EQ(wi->mode, CR);
		CHECK_EQ(recs[1].token, w->ticket);		/* the first part's ticket */
		CHECK(wi->ticket > w->ticket);
		CHECK(wi->implied && !w->implied);
	}
	CHECK(dlm_waiter_of(M, 1) != NULL);
	CHECK(NH("/a/b", NULL, 1) == NULL);
	try_acq(2, NULL, "/a/c/d", CW, 0);
	CHECK_ST(2, REFUSED);
	acq(3, NULL, "/a/c", EX, 0);
	CHECK_ST(3, QUEUED);
	acq(4, NULL, "/b", EX, 0);
	CHECK_ST(4, GRANTED);
	acq(5, NULL, "/a/b/c", CR, 0);
	CHECK_ST(5, QUEUED);

	rel(0, NULL, "/a");
	CHECK_ST(1, GRANTED);
	CHECK_ST(3, GRANTED);
	CHECK_ST(5, GRANTED);
	h = IH("/a", NULL, 1, CR);
	CHECK(h && h->count == 1 && h->expires_at == 0);
	h = IH("/a", NULL, 3, CW);
	CHECK(h && h->count == 1);
	h = IH("/a", NULL, 5, CR);
	CHECK(h && h->count == 1);
	h = IH("/a/b", NULL, 5, CR);
	CHECK(h && h->count == 1);
	h = NH("/a/b", NULL, 1);
	CHECK(h && h->mode == PR);
	CHECK_EQ(nqueue("/a"), 0);

	acq(6, NULL, "/a", EX, 0);
	CHECK_ST(6, QUEUED);
	rel(1, NULL, "/a/b");
	rel(3, NULL, "/a/c");
	CHECK(!ANSWERED(6));
	rel(5, NULL, "/a/b/c");
	CHECK_ST(6, GRANTED);
	CHECK(dlm_lookup(M, "/a/b") == NULL);
	teardown();
}

/* A reader of /a/b blocks a writer of /a but not one of /a/c. */
static void
test_path_readers(void)
{
	static const char *const u[] = {"/a", "/a/b", "/a/c", "/a/d"};

	setup(8, 1000000, 1);
	use(u, 4);
	acq(0, NULL, "/a/b", PR, 0);
	acq(1, NULL, "/a/c", EX, 0);
	CHECK_ST(1, GRANTED);
	acq(2, NULL, "/a", EX, 0);
	CHECK_ST(2, QUEUED);
	acq(3, NULL, "/a/d", EX, 0);	/* its CW on /a queues behind that EX */
	CHECK_ST(3, QUEUED);
	rel(0, NULL, "/a/b");
	CHECK(!ANSWERED(2));
	rel(1, NULL, "/a/c");
	CHECK_ST(2, GRANTED);
	CHECK(!ANSWERED(3));
	rel(2, NULL, "/a");
	CHECK_ST(3, GRANTED);
	acq(4, NULL, "/a", PR, 0);	/* PR beside a CW intention: no */
	CHECK_ST(4, QUEUED);
	rel(3, NULL, "/a/d");
	CHECK_ST(4, GRANTED);
	acq(5, NULL, "/a/b", PR, 0);	/* CR beside PR */
	CHECK_ST(5, GRANTED);
	teardown();
}

/* Intentions counted per owner and mode, released with the leaf. */
static void
test_path_intentions(void)
{
	static const char *const u[] = {
		"/a", "/a/b", "/a/b/c", "/a/c", "/a/d", "/a/e", "/n", "/n/m", "/z", "/z/y", "/z/w"
	};
	DLmHolder  *h;
	DLmLock    *L;

	setup(8, 1000000, 1);
	use(u, 11);
	acq(0, NULL, "/a/b", EX, 0);
	acq(0, NULL, "/a/c", EX, 0);
	acq(0, NULL, "/a/b/c", EX, 0);	/* its own EX on /a/b covers CW */
	CHECK_ST(0, GRANTED);
	acq(0, NULL, "/a/d", PR, 0);
	h = IH("/a", NULL, 0, CW);
	CHECK(h && h->count == 3 && h->implied);
	h = IH("/a", NULL, 0, CR);
	CHECK(h && h->count == 1);
	h = IH("/a/b", NULL, 0, CW);
	CHECK(h && h->count == 1);
	CHECK(NH("/a", NULL, 0) == NULL);
	L = dlm_lookup(M, "/a");
	CHECK(L && L->nheld[CW] == 1 && L->nheld[CR] == 1);
	acq(1, NULL, "/a/e", EX, 0);
	CHECK_ST(1, GRANTED);
	CHECK_EQ(nholders("/a"), 3);

	rel(0, NULL, "/a/b/c");
	h = IH("/a", NULL, 0, CW);
	CHECK(h && h->count == 2);
	CHECK(IH("/a/b", NULL, 0, CW) == NULL);
	CHECK(NH("/a/b", NULL, 0) != NULL);
	rel(0, NULL, "/a/b");
	h = IH("/a", NULL, 0, CW);
	CHECK(h && h->count == 1);
	rel(0, NULL, "/a/c");
	CHECK(IH("/a", NULL, 0, CW) == NULL);
	CHECK(IH("/a", NULL, 0, CR) != NULL);
	rel(0, NULL, "/a/d");
	CHECK(IH("/a", NULL, 0, -1) == NULL);
	CHECK_EQ(nholders("/a"), 1);

	/* NL takes no intention */
	acq(2, NULL, "/n/m", NL, 0);
	CHECK_ST(2, GRANTED);
	CHECK(dlm_lookup(M, "/n") == NULL);

	/* an ancestor held by the owner: covered, the intention is taken too */
	acq(3, NULL, "/z", EX, 0);
	acq(3, NULL, "/z/y", EX, 0);
	CHECK_ST(3, GRANTED);
	h = IH("/z", NULL, 3, CW);
	CHECK(h && h->count == 1);
	acq(4, NULL, "/z/w", CR, 0);
	CHECK_ST(4, QUEUED);
	rel(3, NULL, "/z");
	CHECK_ST(4, GRANTED);		/* CR beside 3's CW intention left on /z */
	teardown();
}

/* Convert of a path moves its intentions; up waits for them as one group. */
static void
test_path_convert(void)
{
	static const char *const u[] = {"/a", "/a/b"};
	int64_t		t0;
	DLmHolder  *h;
	DLmWaiter  *w;

	setup(8, 1000000, 1);
	use(u, 2);
	acq(0, NULL, "/a/b", PR, 0);
	t0 = recs[0].token;
	acq(1, NULL, "/a", PR, 0);
	CHECK_ST(1, GRANTED);
	conv(0, NULL, "/a/b", EX);
	CHECK_ST(0, QUEUED);
	w = find_w("/a/b", NULL, 0, false, 1);
	CHECK(w && w->mode == EX);
	w = find_w("/a", NULL, 0, true, 0);
	CHECK(w && w->mode == CW);
	h = NH("/a/b", NULL, 0);
	CHECK(h && h->mode == PR && h->token == t0);	/* waits for /a too */
	acq(2, NULL, "/a/b", PR, 0);
	CHECK_ST(2, QUEUED);		/* behind the conversion */

	rel(1, NULL, "/a");
	CHECK_ST(0, GRANTED);
	CHECK(recs[0].token > t0);
	h = NH("/a/b", NULL, 0);
	CHECK(h && h->mode == EX && h->token == recs[0].token);
	h = IH("/a", NULL, 0, CW);
	CHECK(h && h->count == 1);
	CHECK(IH("/a", NULL, 0, CR) == NULL);
	CHECK(!ANSWERED(2));

	t0 = recs[0].token;
	conv(0, NULL, "/a/b", PR);	/* down: at once, intentions back to CR */
	CHECK_ST(0, GRANTED);
	CHECK_EQ(recs[0].token, t0);
	h = IH("/a", NULL, 0, CR);
	CHECK(h && h->count == 1);
	CHECK(IH("/a", NULL, 0, CW) == NULL);
	CHECK_ST(2, GRANTED);

	/* up at once when nothing is in the way */
	rel(2, NULL, "/a/b");
	conv(0, NULL, "/a/b", PW);
	CHECK_ST(0, GRANTED);
	CHECK(recs[0].token > t0);
	CHECK(IH("/a", NULL, 0, CW) != NULL);
	CHECK(IH("/a", NULL, 0, CR) == NULL);
	conv(0, NULL, "/a/b", NL);	/* down to NL: no intention left */
	CHECK_ST(0, GRANTED);
	CHECK(IH("/a", NULL, 0, -1) == NULL);
	teardown();
}

/* acquire_all: all or none, granted together or queued together. */
static void
test_acquire_all(void)
{
	static const char *const u[] = {
		"a", "b", "c", "k", "m", "n", "p", "q", "r", "s", "t", "/d", "/d/e", "/d/f", "/g", "/g/h"
	};
	static const char *const abc[] = {"a", "b", "c"};
	static const char *const pq[] = {"p", "q"};
	static const char *const pr[] = {"p", "r"};
	static const char *const def[] = {"/d/e", "/d/f"};
	static const char *const ghk[] = {"/g/h", "k"};
	static const char *const ba[] = {"b", "a"};
	static const char *const aa[] = {"a", "a"};
	char		many[DLOCK_MAX_MULTI + 1][16];
	const char *manyp[DLOCK_MAX_MULTI + 1];
	DLmHolder  *h;
	int64_t		tp;

	setup(16, 1000000, 1);
	use(u, 16);
	acq(1, NULL, "b", EX, 0);
	acqall(0, NULL, abc, 3, EX, 0);
	CHECK_ST(0, QUEUED);
	CHECK(NH("a", NULL, 0) == NULL);	/* none held while waiting */
	CHECK(find_w("a", NULL, 0, false, 0) != NULL);
	CHECK(find_w("c", NULL, 0, false, 0) != NULL);
	acq(2, NULL, "a", EX, 0);
	CHECK_ST(2, QUEUED);		/* behind the group's part on a */
	try_acq(3, NULL, "c", PR, 0);
	CHECK_ST(3, REFUSED);
	rel(1, NULL, "b");
	CHECK_ST(0, GRANTED);
	CHECK_EQ(recs[0].ntokens, 3);
	if (recs[0].ntokens == 3)
	{
		CHECK(recs[0].tokens[0] < recs[0].tokens[1]);
		CHECK(recs[0].tokens[1] < recs[0].tokens[2]);
		for (int i = 0; i < 3; i++)
		{
			h = NH(abc[i], NULL, 0);
			CHECK(h && h->token == recs[0].tokens[i]);
		}
	}
	CHECK(!ANSWERED(2));
	/* an undo of the whole grant: several names, nobody answered */
	submit(DLOCK_OP_RELEASE, DLM_NOBODY, 0, NULL, 0, abc, 3, 0, 0);
	CHECK(NH("a", NULL, 0) == NULL && NH("b", NULL, 0) == NULL && NH("c", NULL, 0) == NULL);
	CHECK(!ANSWERED(0));
	CHECK_ST(2, GRANTED);

	/* all free: at once */
	acqall(4, NULL, pq, 2, PR, 0);
	CHECK_ST(4, GRANTED);
	CHECK_EQ(recs[4].ntokens, 2);
	tp = recs[4].ntokens == 2 ? recs[4].tokens[0] : -1;
	/* re-entrant on one of them */
	acqall(4, NULL, pr, 2, PR, 0);
	CHECK_ST(4, GRANTED);
	CHECK_EQ(recs[4].ntokens, 2);
	if (recs[4].ntokens == 2)
		CHECK_EQ(recs[4].tokens[0], tp);
	h = NH("p", NULL, 4);
	CHECK(h && h->count == 2);

	/* paths: intentions counted per name */
	acqall(5, NULL, def, 2, EX, 0);
	CHECK_ST(5, GRANTED);
	h = IH("/d", NULL, 5, CW);
	CHECK(h && h->count == 2);
	submit(DLOCK_OP_RELEASE, 5, 5, NULL, 0, def, 2, 0, 0);
	CHECK_ST(5, RELEASED);
	CHECK(dlm_lookup(M, "/d") == NULL);

	/* a part waiting for an ancestor holds back a free name */
	acq(6, NULL, "/g", EX, 0);
	acqall(7, NULL, ghk, 2, EX, 0);
	CHECK_ST(7, QUEUED);
	CHECK(NH("k", NULL, 7) == NULL);
	CHECK(find_w("k", NULL, 7, false, 0) != NULL);
	CHECK(find_w("/g", NULL, 7, true, 0) != NULL);
	rel(6, NULL, "/g");
	CHECK_ST(7, GRANTED);
	CHECK_EQ(recs[7].ntokens, 2);
	CHECK(NH("k", NULL, 7) != NULL && NH("/g/h", NULL, 7) != NULL);

	/* bad lists */
	acqall(8, NULL, ba, 2, EX, 0);
	CHECK_ST(8, ERROR);
	CHECK_EQ(recs[8].error, DLM_ERR_NOT_SORTED);
	acqall(8, NULL, aa, 2, EX, 0);
	CHECK_ST(8, ERROR);
	CHECK_EQ(recs[8].error, DLM_ERR_NOT_SORTED);
	CHECK(dlm_lookup(M, "a") == NULL || NH("a", NULL, 8) == NULL);
	for (int i = 0; i <= DLOCK_MAX_MULTI; i++)
	{
		snprintf(many[i], sizeof(many[i]), "m%03d", i);
		manyp[i] = many[i];
	}
	acqall(8, NULL, manyp, DLOCK_MAX_MULTI + 1, EX, 0);
	CHECK_ST(8, ERROR);
	CHECK_EQ(recs[8].error, DLM_ERR_BAD_REQUEST);
	CHECK(dlm_lookup(M, "m000") == NULL);
	acqall(8, NULL, manyp, DLOCK_MAX_MULTI, EX, 0);
	CHECK_ST(8, GRANTED);
	CHECK_EQ(recs[8].ntokens, DLOCK_MAX_MULTI);
	CHECK_EQ(dlm_nlocks(M) >= DLOCK_MAX_MULTI, 1);
	relall(8, NULL);
	CHECK_ST(8, COUNT);
	CHECK_EQ(recs[8].count, DLOCK_MAX_MULTI);
	CHECK(dlm_lookup(M, "m000") == NULL);

	/* a held name in a waiting group: re-entrant when the group is granted */
	{
		static const char *const st[] = {"s", "t"};

		acq(11, NULL, "s", EX, 0);
		acq(12, NULL, "t", EX, 0);
		acqall(11, NULL, st, 2, EX, 0);
		CHECK_ST(11, QUEUED);
		CHECK(find_w("s", NULL, 11, false, 0) != NULL);	/* held ones wait too */
		acq(12, NULL, "s", EX, 0);	/* 12 waits for 11, 11 for 12 */
		CHECK_ST(12, DEADLOCK);
		CHECK_EQ(recs[12].ncycle, 2);
		acq(13, NULL, "s", PR, 0);
		CHECK_ST(13, QUEUED);
		rel(12, NULL, "t");
		CHECK_ST(11, GRANTED);
		CHECK(!ANSWERED(13));
		h = NH("s", NULL, 11);
		CHECK(h && h->count == 2);
		CHECK(recs[11].ntokens == 2 && h && recs[11].tokens[0] == h->token);
		relall(11, NULL);
		CHECK_ST(11, COUNT);
		CHECK_EQ(recs[11].count, 2);
		CHECK_ST(13, GRANTED);
		relall(13, NULL);
	}

	/* two acquire_all over the same names: the second just waits */
	{
		static const char *const mn[] = {"m", "n"};

		acqall(9, NULL, mn, 2, EX, 0);
		acqall(10, NULL, mn, 2, EX, 0);
		CHECK_ST(10, QUEUED);
		relall(9, NULL);
		CHECK_ST(10, GRANTED);
	}
	teardown();
}

/* A cycle of three owners: the closing request gets DEADLOCK with the cycle. */
static void
test_deadlock3(void)
{
	static const char *const u[] = {"a", "b", "c"};

	setup(8, 1000000, 1);
	use(u, 3);
	acq(0, NULL, "a", EX, 0);
	acq(1, NULL, "b", EX, 0);
	acq(2, NULL, "c", EX, 0);
	acq(0, NULL, "b", EX, 0);
	CHECK_ST(0, QUEUED);
	acq(1, NULL, "c", EX, 0);
	CHECK_ST(1, QUEUED);
	acq(2, NULL, "a", EX, 0);
	CHECK_ST(2, DEADLOCK);
	CHECK_EQ(recs[2].nev, 1);
	CHECK(!ANSWERED(0) && !ANSWERED(1));
	CHECK_EQ(recs[2].ncycle, 3);
	if (recs[2].ncycle == 3)
	{
		DLmCycleStep *s = recs[2].cycle;

		CHECK(s[0].waiter_pid == PID(2) && strcmp(s[0].lock, "a") == 0 &&
			  s[0].held && s[0].blocker_pid == PID(0));
		CHECK(s[1].waiter_pid == PID(0) && strcmp(s[1].lock, "b") == 0 &&
			  s[1].held && s[1].blocker_pid == PID(1));
		CHECK(s[2].waiter_pid == PID(1) && strcmp(s[2].lock, "c") == 0 &&
			  s[2].held && s[2].blocker_pid == PID(2));
		for (int i = 0; i < 3; i++)
			CHECK(!s[i].waiter_keyed && !s[i].blocker_keyed);
	}
	CHECK(dlm_waiter_of(M, 2) == NULL);
	CHECK_EQ(nqueue("a"), 0);
	CHECK(NH("c", NULL, 2) != NULL);
	CHECK(dlm_waiter_of(M, 0) != NULL && dlm_waiter_of(M, 1) != NULL);
	rel(2, NULL, "c");
	CHECK_ST(1, GRANTED);
	relall(1, NULL);
	CHECK_ST(0, GRANTED);

	/* waiting behind a holder that waits for nobody is no deadlock */
	acq(3, NULL, "a", EX, 0);
	CHECK_ST(3, QUEUED);
	teardown();
}

/* A cycle through a conflicting request queued earlier, of an owner key. */
static void
test_deadlock_queued_keyed(void)
{
	static const char *const u[] = {"a", "b"};

	setup(12, 1000000, 1);
	use(u, 2);
	acq(9, NULL, "a", PR, 0);
	acq(1, NULL, "b", EX, 0);
	acq(0, "K", "a", EX, 0);	/* K waits for 9 */
	CHECK_ST(0, QUEUED);
	acq(3, "K", "b", EX, 0);	/* K waits for 1 too */
	CHECK_ST(3, QUEUED);
	acq(1, NULL, "a", PR, 0);	/* 1 waits for K queued before it: a cycle */
	CHECK_ST(1, DEADLOCK);
	CHECK_EQ(recs[1].ncycle, 2);
	if (recs[1].ncycle == 2)
	{
		DLmCycleStep *s = recs[1].cycle;

		CHECK(!s[0].waiter_keyed && s[0].waiter_pid == PID(1));
		CHECK(strcmp(s[0].lock, "a") == 0 && !s[0].held);
		CHECK(s[0].blocker_keyed && s[0].blocker_pid == PID(0));
		CHECK(s[1].waiter_keyed && s[1].waiter_pid == PID(3));
		CHECK(strcmp(s[1].lock, "b") == 0 && s[1].held);
		CHECK(!s[1].blocker_keyed && s[1].blocker_pid == PID(1));
	}
	CHECK(find_w("a", NULL, 1, false, -1) == NULL);
	CHECK(dlm_waiter_of(M, 0) != NULL && dlm_waiter_of(M, 3) != NULL);
	rel(9, NULL, "a");
	CHECK_ST(0, GRANTED);		/* K's EX on a; K still waits for b */
	CHECK(dlm_waiter_of(M, 3) != NULL);
	teardown();
}

/* Release of a lock not held: NOT_HELD. */
static void
test_release_not_held(void)
{
	static const char *const u[] = {"x", "y", "/a", "/a/b"};

	setup(8, 1000000, 1);
	use(u, 4);
	rel(0, NULL, "x");
	CHECK_ST(0, NOT_HELD);
	acq(1, NULL, "x", EX, 0);
	rel(0, NULL, "x");
	CHECK_ST(0, NOT_HELD);
	CHECK(NH("x", NULL, 1) != NULL);
	acq(2, "K", "y", EX, 0);
	rel(3, NULL, "y");
	CHECK_ST(3, NOT_HELD);
	rel(3, "K2", "y");
	CHECK_ST(3, NOT_HELD);
	rel(2, NULL, "y");
	CHECK_ST(2, NOT_HELD);
	CHECK(NH("y", "K", 0) != NULL);
	acq(0, NULL, "/a/b", EX, 0);
	rel(0, NULL, "/a");			/* an intention is not released by name */
	CHECK_ST(0, NOT_HELD);
	CHECK(IH("/a", NULL, 0, CW) != NULL);
	acq(4, "KW", "x", EX, 0);	/* waiting is not holding */
	CHECK_ST(4, QUEUED);
	rel(5, "KW", "x");
	CHECK_ST(5, NOT_HELD);
	CHECK(dlm_waiter_of(M, 4) != NULL);
	/* a requester whose request waits asks nothing else (BAD_REQUEST) */
	rel(4, "KW", "x");
	CHECK_ST(4, ERROR);
	CHECK_EQ(recs[4].error, DLM_ERR_BAD_REQUEST);
	CHECK(dlm_waiter_of(M, 4) != NULL);
	teardown();
}

/* Renew: the given ttl, else the holder's own, clamped to max_ttl. */
static void
test_renew(void)
{
	static const char *const u[] = {"x", "y", "z"};
	int64_t		t;

	setup(8, 1000000, 1);
	use(u, 3);
	NOW = 1000;
	acq(0, "K", "x", EX, 500);
	CHECK_EQ(recs[0].expires_at, 1500);
	t = recs[0].token;
	NOW = 1200;
	renew(1, "K", "x", 0, 0);
	CHECK_ST(1, RENEWED);
	CHECK_EQ(recs[1].token, t);
	CHECK_EQ(recs[1].expires_at, 1700);
	CHECK_EQ(recs[1].count, 1);
	CHECK_EQ(dlm_next_expiry(M), 1700);
	renew(1, "K", "x", 0, 100);
	CHECK_ST(1, RENEWED);
	CHECK_EQ(recs[1].expires_at, 1300);
	renew(1, "K", "x", 5000, 300);
	CHECK_EQ(recs[1].expires_at, 1500);
	renew(1, "K", "x", 1000, 0);
	CHECK_EQ(recs[1].expires_at, 2200);
	CHECK_EQ(dlm_next_expiry(M), 2200);
	CHECK(NH("x", "K", 0) && NH("x", "K", 0)->expires_at == 2200);

	/* a session lock without lease */
	acq(2, NULL, "y", EX, 0);
	acq(2, NULL, "y", EX, 0);
	renew(2, NULL, "y", 0, 0);
	CHECK_ST(2, RENEWED);
	CHECK_EQ(recs[2].expires_at, 0);
	CHECK_EQ(recs[2].count, 2);
	renew(2, NULL, "y", 50, 0);
	CHECK_ST(2, RENEWED);
	CHECK_EQ(recs[2].expires_at, 1250);
	CHECK_EQ(dlm_next_expiry(M), 1250);

	renew(3, NULL, "z", 10, 0);
	CHECK_ST(3, NOT_HELD);
	renew(3, NULL, "y", 10, 0);
	CHECK_ST(3, NOT_HELD);
	NOW = 3000;
	CHECK_EQ(expire(100), 2);
	renew(1, "K", "x", 0, 0);
	CHECK_ST(1, NOT_HELD);
	teardown();
}

/* release_all: COUNT, its waiters WITHDRAWN, what it freed handed on. */
static void
test_release_all(void)
{
	static const char *const u[] = {"a", "b", "c", "d", "e", "/p", "/p/q", "/p/r"};

	setup(12, 1000000, 1);
	use(u, 8);
	acq(0, "K", "a", EX, 0);
	for (int i = 0; i < 3; i++)
		acq(0, "K", "b", EX, 0);
	acq(0, "K", "/p/q", EX, 0);
	acq(5, NULL, "c", EX, 0);
	acq(1, "K", "c", EX, 0);
	CHECK_ST(1, QUEUED);
	acq(6, NULL, "a", EX, 0);
	acq(7, NULL, "/p", PR, 0);
	CHECK_ST(7, QUEUED);
	relall(2, "K");
	CHECK_ST(2, COUNT);
	CHECK_EQ(recs[2].count, 4);
	CHECK_EQ(recs[2].nev, 1);
	CHECK_ST(1, WITHDRAWN);
	CHECK_ST(6, GRANTED);
	CHECK_ST(7, GRANTED);
	CHECK(dlm_lookup(M, "b") == NULL);
	CHECK(dlm_lookup(M, "/p/q") == NULL);
	CHECK(NH("c", NULL, 5) != NULL);
	CHECK(dlm_waiter_of(M, 1) == NULL);

	/* a session's release_all leaves the keyed locks it took */
	acq(8, NULL, "d", EX, 0);
	acq(8, "K2", "e", EX, 0);
	relall(8, NULL);
	CHECK_ST(8, COUNT);
	CHECK_EQ(recs[8].count, 1);
	CHECK(NH("e", "K2", 0) != NULL);
	relall(8, NULL);
	CHECK_ST(8, COUNT);
	CHECK_EQ(recs[8].count, 0);

	/*
	 * a waiting acquire_all: each name is a waiter (README 4.3 counts
	 * non-implied waiters; docs/postgresql.md says "locks and requests")
	 */
	{
		static const char *const de[] = {"d", "e"};

		acq(8, NULL, "d", EX, 0);
		acqall(11, "K4", de, 2, EX, 0);
		CHECK_ST(11, QUEUED);
		relall(10, "K4");
		CHECK_ST(10, COUNT);
		CHECK_EQ(recs[10].count, 2);
		CHECK_ST(11, WITHDRAWN);
		relall(8, NULL);
	}

	/* a path request waiting: one (its intention is not counted) */
	acq(9, "K3", "/p/r", EX, 0);
	CHECK_ST(9, QUEUED);
	relall(10, "K3");
	CHECK_ST(10, COUNT);
	CHECK_EQ(recs[10].count, 1);
	CHECK_ST(9, WITHDRAWN);
	CHECK(dlm_waiter_of(M, 9) == NULL);
	CHECK_EQ(nqueue("/p"), 0);
	teardown();
}

/* withdraw: CANCELED, the hand-on after the whole list. */
static void
test_withdraw(void)
{
	static const char *const u[] = {"x", "a2", "b2"};
	static const char *const ab[] = {"a2", "b2"};
	int			l12[] = {1, 2},
				l1[] = {1},
				l3[] = {3},
				l4[] = {4},
				l5[] = {5},
				l0[] = {0};
	DLmHolder  *h;
	int64_t		t0;

	setup(8, 1000000, 1);
	use(u, 3);
	acq(0, NULL, "x", PR, 0);
	acq(1, NULL, "x", EX, 0);
	acq(2, NULL, "x", PR, 0);
	acq(3, NULL, "x", EX, 0);
	withdraw(l12, 2);
	CHECK_ST(1, CANCELED);
	CHECK_ST(2, CANCELED);
	CHECK_EQ(recs[2].nev, 1);	/* never granted on the way */
	CHECK(NH("x", NULL, 2) == NULL);
	CHECK_EQ(nholders("x"), 1);
	CHECK(!ANSWERED(3));
	CHECK(dlm_waiter_of(M, 3) != NULL);
	withdraw(l3, 1);
	CHECK_ST(3, CANCELED);
	CHECK_EQ(nqueue("x"), 0);

	/* hand-on */
	acq(1, NULL, "x", EX, 0);
	acq(2, NULL, "x", PR, 0);
	withdraw(l1, 1);
	CHECK_ST(1, CANCELED);
	CHECK_ST(2, GRANTED);

	/* nothing waited: CANCELED all the same */
	withdraw(l4, 1);
	CHECK_ST(4, CANCELED);
	withdraw(NULL, 0);

	/* a group */
	acq(6, NULL, "b2", EX, 0);
	acqall(5, NULL, ab, 2, EX, 0);
	CHECK_ST(5, QUEUED);
	withdraw(l5, 1);
	CHECK_ST(5, CANCELED);
	CHECK(dlm_lookup(M, "a2") == NULL);
	CHECK_EQ(nqueue("b2"), 0);

	/* a conversion: the old mode stays */
	t0 = NH("x", NULL, 0) ? NH("x", NULL, 0)->token : -1;
	conv(0, NULL, "x", EX);
	CHECK_ST(0, QUEUED);
	withdraw(l0, 1);
	CHECK_ST(0, CANCELED);
	h = NH("x", NULL, 0);
	CHECK(h && h->mode == PR && h->token == t0);
	CHECK_EQ(nqueue("x"), 0);
	teardown();
}

/* Session end: its waiter and its locks go, without answers; keyed ones stay. */
static void
test_session_end(void)
{
	static const char *const u[] = {"a", "b", "k", "w", "z"};

	setup(8, 1000000, 1);
	use(u, 5);
	acq(0, NULL, "a", EX, 0);
	acq(0, NULL, "b", PR, 0);
	acq(0, "K", "k", EX, 0);
	acq(1, NULL, "w", EX, 0);
	acq(0, NULL, "w", EX, 0);
	CHECK_ST(0, QUEUED);
	acq(2, NULL, "a", EX, 0);
	acq(3, NULL, "b", EX, 0);
	session_end(0, 0);
	CHECK(!ANSWERED(0));
	CHECK_ST(2, GRANTED);
	CHECK_ST(3, GRANTED);
	CHECK(NH("k", "K", 0) != NULL);
	CHECK(dlm_waiter_of(M, 0) == NULL);
	CHECK_EQ(nqueue("w"), 0);

	/* the requester's keyed waiter goes too; the key's lock stays */
	acq(4, "K", "w", PR, 0);
	CHECK_ST(4, QUEUED);
	session_end(4, 4);
	CHECK(!ANSWERED(4));
	CHECK(dlm_waiter_of(M, 4) == NULL);
	CHECK_EQ(nqueue("w"), 0);
	CHECK(NH("k", "K", 0) != NULL);

	/* unknown sessions: nothing */
	acq(5, NULL, "z", EX, 0);
	begin_event();
	dlm_session_end(M, 9999, 1, DLM_NOBODY, NOW);
	after_event();
	begin_event();
	dlm_session_end(M, PID(5), START(5) + 1, DLM_NOBODY, NOW);	/* a pid reused */
	after_event();
	CHECK(NH("z", NULL, 5) != NULL);
	CHECK(!ANSWERED(5));
	teardown();
}

/* 14: kept places -- detach, resume in place, collect, lose to the lease. */
static void
test_keep_place(void)
{
	static const char *const u[] = {"x", "a", "b", "/p", "/p/q"};
	static const char *const ab[] = {"a", "b"};
	int			l1[] = {1},
				l2[] = {2},
				l3[] = {3},
				l6[] = {6};
	int64_t		t1,
				t2,
				tok;
	DLmWaiter  *w;
	DLmHolder  *h;

	setup(12, 1000000, 1);
	use(u, 5);

	/* 14.1: an owner key and a lease; never on a try */
	acq_keep(1, NULL, "x", EX, 100);
	CHECK_ST(1, ERROR);
	CHECK_EQ(recs[1].error, DLM_ERR_KEEP_PLACE);
	acq_keep(1, "B", "x", EX, 0);
	CHECK_ST(1, ERROR);
	req_keep = true;
	try_acq(1, "B", "x", EX, 100);
	CHECK_ST(1, ERROR);
	CHECK(dlm_lookup(M, "x") == NULL);

	/* 14.2: a withdrawal keeps the place, durably, with its lease */
	acq(0, "A", "x", EX, 1000);
	CHECK_ST(0, GRANTED);
	acq_keep(1, "B", "x", EX, 100);
	CHECK_ST(1, QUEUED);
	t1 = recs[1].token;
	acq(2, "C", "x", EX, 100);	/* a call that waits behind B's */
	CHECK_ST(2, QUEUED);
	t2 = recs[2].token;
	autosettle = false;
	NOW = 10;
	withdraw(l1, 1);
	CHECK_ST(1, KEPT);
	CHECK_EQ(recs[1].token, t1);
	CHECK_EQ(recs[1].expires_at, 110);
	CHECK(dlm_batch_durable(M));
	CHECK_EQ(count_touched_waiters(), 1);
	CHECK(dlm_touched_waiter(M, 0) && dlm_touched_waiter(M, 0)->p.dirty);
	settle();
	autosettle = true;
	CHECK(dlm_waiter_of(M, 1) == NULL);
	CHECK_EQ(nqueue("x"), 2);
	w = find_w("x", "B", 0, false, 0);
	CHECK(w && w->ticket == t1 && w->kept_until == 110 && w->requester == DLM_NOBODY);
	CHECK_EQ(dlm_next_expiry(M), 110);

	/* 14.3: the owner's next call, from any session, resumes it in place */
	acq_keep(3, "B", "x", EX, 200);
	CHECK_ST(3, QUEUED);
	CHECK_EQ(recs[3].token, t1);
	CHECK_EQ(nqueue("x"), 2);
	CHECK(dlm_waiter_of(M, 3) == w);
	CHECK(w->kept_until == 0 && w->pid == PID(3) && w->ttl_us == 200);
	CHECK_EQ(dlm_next_expiry(M), 1000 + 1);
	withdraw(l3, 1);
	CHECK_ST(3, KEPT);
	CHECK_EQ(recs[3].expires_at, 210);

	/* 14.4: granted with no call waiting: held, one level uncollected */
	NOW = 20;
	rel(0, "A", "x");
	CHECK_ST(0, RELEASED);
	CHECK(!ANSWERED(1) && !ANSWERED(3));
	h = NH("x", "B", 0);
	CHECK(h && h->count == 1 && dlm_holder_kept(h) == 1 && h->expires_at == 220);
	CHECK(!ANSWERED(2));
	tok = h ? h->token : -1;
	NOW = 30;
	acq_keep(4, "B", "x", EX, 200);
	CHECK_ST(4, GRANTED);
	CHECK_EQ(recs[4].token, tok);
	CHECK_EQ(recs[4].count, 1);
	CHECK(h->count == 1 && dlm_holder_kept(h) == 0 && h->expires_at == 230);
	/* collected once: the next call is re-entrant */
	acq(4, "B", "x", EX, 200);
	CHECK_EQ(recs[4].count, 2);
	rel(4, "B", "x");
	rel(4, "B", "x");
	CHECK_ST(4, RELEASED);
	CHECK_ST(2, GRANTED);		/* C's call still waits: answered */
	CHECK_EQ(recs[2].token > t2, 1);

	/* 14.6: a place nobody comes back for ends with its lease */
	acq_keep(6, "E", "x", EX, 50);
	CHECK_ST(6, QUEUED);
	NOW = 40;
	withdraw(l6, 1);
	CHECK_ST(6, KEPT);
	CHECK_EQ(dlm_next_expiry(M), 90);
	NOW = 89;
	CHECK_EQ(expire(10), 0);
	NOW = 90;
	CHECK_EQ(expire(10), 1);
	CHECK_EQ(nqueue("x"), 0);
	CHECK(NH("x", "C", 0) != NULL);

	/* session end of a waiting call: the place is kept, nobody answered */
	acq_keep(7, "F", "x", EX, 100);
	CHECK_ST(7, QUEUED);
	session_end(7, 7);
	CHECK(!ANSWERED(7));
	w = find_w("x", "F", 0, false, 0);
	CHECK(w && w->kept_until == 190);

	/* 14.5: release withdraws a kept place; release_all too */
	rel(8, "F", "x");
	CHECK_ST(8, RELEASED);
	CHECK_EQ(nqueue("x"), 0);
	acq_keep(7, "F", "x", EX, 100);
	withdraw((int[]) {7}, 1);
	relall(8, "F");
	CHECK_ST(8, COUNT);
	CHECK_EQ(recs[8].count, 1);
	CHECK_EQ(nqueue("x"), 0);
	rel(8, "F", "x");
	CHECK_ST(8, NOT_HELD);

	/*
	 * 14.8: a call behind another request keeps its place at once; three
	 * owners' places resumed in reverse are granted in their order
	 */
	acq_keep(1, "K1", "x", EX, 1000);
	CHECK_ST(1, QUEUED);
	t1 = recs[1].token;
	acq_keep(2, "K2", "x", EX, 1000);
	CHECK_ST(2, KEPT);
	CHECK(recs[2].token > t1 && recs[2].expires_at == NOW + 1000);
	CHECK(dlm_waiter_of(M, 2) == NULL);
	acq_keep(3, "K3", "x", EX, 1000);
	CHECK_ST(3, KEPT);
	withdraw((int[]) {1}, 1);
	CHECK_ST(1, KEPT);
	CHECK_EQ(nqueue("x"), 3);
	acq_keep(9, "K3", "x", EX, 1000);
	CHECK_ST(9, KEPT);			/* resumed behind K1 and K2: kept again */
	acq_keep(10, "K2", "x", EX, 1000);
	CHECK_ST(10, KEPT);
	acq_keep(11, "K1", "x", EX, 1000);
	CHECK_ST(11, QUEUED);		/* first in line: its call waits */
	CHECK_EQ(recs[11].token, t1);
	rel(2, "C", "x");
	CHECK_ST(11, GRANTED);
	rel(11, "K1", "x");
	h = NH("x", "K2", 0);
	CHECK(h && dlm_holder_kept(h) == 1);	/* granted with no call waiting */
	acq_keep(10, "K2", "x", EX, 1000);
	CHECK_ST(10, GRANTED);		/* collected */
	acq_keep(9, "K3", "x", EX, 1000);
	CHECK_ST(9, QUEUED);		/* first in line now: waits */
	rel(10, "K2", "x");
	CHECK_ST(9, GRANTED);
	rel(9, "K3", "x");
	CHECK_EQ(nholders("x"), 0);

	/* 14.8 on several names: first on one, behind on the other: kept */
	acq(0, "A", "a", EX, 1000);
	acq(0, "A", "b", EX, 1000);
	acq(5, "W", "b", EX, 1000);
	CHECK_ST(5, QUEUED);
	req_keep = true;
	acqall(1, "B", ab, 2, EX, 100);
	CHECK_ST(1, KEPT);
	session_end(5, 5);
	req_keep = true;
	acqall(1, "B", ab, 2, EX, 100);
	CHECK_ST(1, QUEUED);		/* resumed, first on both: waits */
	withdraw(l1, 1);
	CHECK_ST(1, KEPT);
	rel(8, "B", "a");			/* release withdraws the place */
	CHECK_EQ(nqueue("a") + nqueue("b"), 0);
	relall(0, "A");

	/* a request on several names and a path: every part kept, resumed whole */
	acq(0, "A", "b", EX, 1000);
	acq(0, "A", "/p", EX, 1000);
	req_keep = true;
	acqall(1, "B", ab, 2, EX, 100);
	CHECK_ST(1, QUEUED);
	acq_keep(2, "B", "/p/q", EX, 100);
	CHECK_ST(2, QUEUED);
	withdraw((int[]) {1, 2}, 2);
	CHECK_ST(1, KEPT);
	CHECK_ST(2, KEPT);
	CHECK_EQ(nqueue("a") + nqueue("b") + nqueue("/p") + nqueue("/p/q"), 4);
	req_keep = true;
	acqall(3, "B", ab, 2, EX, 100);
	CHECK_ST(3, QUEUED);
	CHECK_EQ(recs[3].token, recs[1].token);
	rel(0, "A", "b");
	CHECK_ST(3, GRANTED);
	CHECK_EQ(recs[3].ntokens, 2);
	rel(0, "A", "/p");
	h = NH("/p/q", "B", 0);
	CHECK(h && dlm_holder_kept(h) == 1 && IH("/p", "B", 0, CW) != NULL);
	acq(4, "B", "/p/q", EX, 100);
	CHECK_ST(4, GRANTED);
	CHECK(dlm_holder_kept(h) == 0 && h->count == 1);
	relall(4, "B");
	CHECK_EQ(recs[4].count, 3);

	/* a restart's grace reaches kept places too */
	acq(0, "A", "x", EX, 0);
	acq_keep(1, "B", "x", EX, 10);
	withdraw(l1, 1);
	w = find_w("x", "B", 0, false, 0);
	CHECK_EQ(dlm_extend_leases(M, NOW + 500), 1);
	CHECK(w && w->kept_until == NOW + 500);
	CHECK_EQ(dlm_next_expiry(M), NOW + 500);
	relall(0, "A");
	CHECK(NH("x", "B", 0) && dlm_holder_kept(NH("x", "B", 0)) == 1);
	(void) l2;
	teardown();
}

/*
 * 15.3 at the top of the range: capacities and permits up to INT32_MAX,
 * whose sums pass it (they wrapped around and granted past capacity), on
 * a request, a waiter's turn and a load.
 */
static void
test_semaphore_max(void)
{
	static const char *const u[] = {"m", "h"};
	DLmHolderRow r;
	DLmLock    *L;

	setup(10, 1000000, 1);
	use(u, 2);
	try_sem(0, "kA", "m", INT32_MAX, INT32_MAX);
	CHECK_ST(0, GRANTED);
	try_sem(1, "kB", "m", INT32_MAX, 1);
	CHECK_ST(1, REFUSED);
	sem(1, "kB", "m", INT32_MAX, 1, 0);
	CHECK_ST(1, QUEUED);
	sem(2, "kC", "m", INT32_MAX, INT32_MAX, 0);
	CHECK_ST(2, QUEUED);
	L = dlm_lookup(M, "m");
	CHECK(L && L->permits_held == INT32_MAX);
	rel(0, "kA", "m");
	CHECK_ST(1, GRANTED);
	CHECK(!ANSWERED(2));		/* 1 held: INT32_MAX more do not fit */
	CHECK_EQ(L->permits_held, 1);
	rel(1, "kB", "m");
	CHECK_ST(2, GRANTED);
	CHECK_EQ(L->permits_held, INT32_MAX);
	rel(2, "kC", "m");

	try_sem(3, "kD", "h", 1 << 30, 1 << 30);
	CHECK_ST(3, GRANTED);
	try_sem(4, "kE", "h", 1 << 30, 1 << 30);
	CHECK_ST(4, REFUSED);
	rel(3, "kD", "h");
	teardown();

	/* a load: rows whose permits pass the capacity together are refused */
	setup(8, 100, 1);
	dlm_set_counter(M, 5000);
	cur_hi = 5000;
	use(u, 1);
	memset(&r, 0, sizeof(r));
	r.name = "m";
	r.owner_key = "L1";
	r.mode = DLOCK_MODE_NL;
	r.count = 1;
	r.token = 4000;
	r.expires_at = 100000;
	r.ttl_us = 1000;
	r.capacity = INT32_MAX;
	r.permits = INT32_MAX;
	CHECK_EQ(dlm_load_holder(M, &r), DLM_OK);
	r.owner_key = "L2";
	r.token = 4001;
	r.permits = 1;
	CHECK_EQ(dlm_load_holder(M, &r), DLM_ERR_CAPACITY);
	CHECK_EQ(dlm_lookup(M, "m")->permits_held, INT32_MAX);
	teardown();
}

/* 15: counting semaphores -- capacity, strict FIFO, kinds, leases, kept places. */
static void
test_semaphore(void)
{
	static const char *const u[] = {"s", "l", "/p"};
	static const char *const sl[] = {"l", "s"};
	int			l5[] = {5};
	DLmLock    *L;
	DLmHolder  *h;
	int64_t		t1;

	setup(10, 1000000, 1);
	use(u, 3);

	/* 15.1: validation */
	sem(0, NULL, "s", -1, 1, 0);
	CHECK_ST(0, ERROR);
	CHECK_EQ(recs[0].error, DLM_ERR_BAD_SEMAPHORE);
	sem(0, NULL, "s", 3, 0, 0);
	CHECK_EQ(recs[0].error, DLM_ERR_BAD_SEMAPHORE);
	sem(0, NULL, "s", 3, 4, 0);
	CHECK_EQ(recs[0].error, DLM_ERR_BAD_SEMAPHORE);
	sem(0, NULL, "/p", 3, 1, 0);
	CHECK_EQ(recs[0].error, DLM_ERR_BAD_SEMAPHORE);
	req_capacity = 3;
	req_permits = 1;
	acqall(0, NULL, sl, 2, EX, 0);
	CHECK_EQ(recs[0].error, DLM_ERR_BAD_SEMAPHORE);
	CHECK(dlm_lookup(M, "s") == NULL);

	/* 15.3: at most capacity permits held; a try never queues */
	sem(0, NULL, "s", 3, 1, 0);
	CHECK_ST(0, GRANTED);
	t1 = recs[0].token;
	sem(1, NULL, "s", 3, 2, 0);
	CHECK_ST(1, GRANTED);
	CHECK(recs[1].token > t1);
	L = dlm_lookup(M, "s");
	CHECK(L && L->capacity == 3 && L->permits_held == 3);
	try_sem(2, NULL, "s", 3, 1);
	CHECK_ST(2, REFUSED);
	sem(2, NULL, "s", 3, 1, 0);
	CHECK_ST(2, QUEUED);
	rel(0, NULL, "s");
	CHECK_ST(0, RELEASED);
	CHECK_ST(2, GRANTED);
	CHECK_EQ(L->permits_held, 3);

	/* 15.4: strict FIFO: 3 permits at the head are not overtaken by 1 */
	sem(3, NULL, "s", 3, 3, 0);
	CHECK_ST(3, QUEUED);
	sem(4, NULL, "s", 3, 1, 0);
	CHECK_ST(4, QUEUED);
	rel(2, NULL, "s");
	CHECK(!ANSWERED(3) && !ANSWERED(4));	/* 2 free: not for 3, not past it */
	try_sem(5, NULL, "s", 3, 1);
	CHECK_ST(5, REFUSED);
	rel(1, NULL, "s");
	CHECK_ST(3, GRANTED);
	CHECK(!ANSWERED(4));
	rel(3, NULL, "s");
	CHECK_ST(4, GRANTED);

	/* 15.2: kinds and capacity */
	sem(5, NULL, "s", 4, 1, 0);
	CHECK_ST(5, ERROR);
	CHECK_EQ(recs[5].error, DLM_ERR_CAPACITY);
	acq(5, NULL, "s", EX, 0);
	CHECK_EQ(recs[5].error, DLM_ERR_IS_SEMAPHORE);
	try_acq(5, NULL, "s", PR, 0);
	CHECK_EQ(recs[5].error, DLM_ERR_IS_SEMAPHORE);
	acqall(5, NULL, sl, 2, EX, 0);
	CHECK_EQ(recs[5].error, DLM_ERR_IS_SEMAPHORE);
	CHECK(dlm_lookup(M, "l") == NULL || nholders("l") == 0);
	acq(5, NULL, "l", EX, 0);
	CHECK_ST(5, GRANTED);
	sem(6, NULL, "l", 3, 1, 0);
	CHECK_EQ(recs[6].error, DLM_ERR_IS_LOCK);
	conv(4, NULL, "s", EX);
	CHECK_EQ(recs[4].error, DLM_ERR_IS_SEMAPHORE);
	sem(4, NULL, "s", 3, 1, 0);
	CHECK_EQ(recs[4].error, DLM_ERR_HELD_ONCE);
	CHECK_EQ(L->permits_held, 1);
	rel(4, NULL, "s");
	rel(5, NULL, "l");
	settle();
	/* nobody holds or waits: the name is free for another kind or capacity */
	acq(5, NULL, "s", EX, 0);
	CHECK_ST(5, GRANTED);
	rel(5, NULL, "s");
	sem(5, NULL, "s", 5, 5, 0);
	CHECK_ST(5, GRANTED);
	CHECK(dlm_lookup(M, "s")->capacity == 5);
	rel(5, NULL, "s");

	/* leases give permits back; session end and release_all too */
	sem(0, "K0", "s", 2, 2, 10);
	CHECK_ST(0, GRANTED);
	sem(1, NULL, "s", 2, 1, 0);
	CHECK_ST(1, QUEUED);
	sem(2, NULL, "s", 2, 1, 0);
	CHECK_ST(2, QUEUED);
	NOW += 10;
	CHECK_EQ(expire(10), 1);
	CHECK_ST(1, GRANTED);
	CHECK_ST(2, GRANTED);
	session_end(1, DLM_NOBODY);
	relall(2, NULL);
	CHECK_EQ(recs[2].count, 1);
	CHECK_EQ(nholders("s"), 0);

	/* 14 with 15: a kept place keeps its permits; collected once */
	sem(0, NULL, "s", 2, 2, 0);
	req_keep = true;
	sem(5, "K5", "s", 2, 1, 100);
	CHECK_ST(5, QUEUED);
	withdraw(l5, 1);
	CHECK_ST(5, KEPT);
	/* another number of permits is another request */
	req_keep = true;
	sem(6, "K5", "s", 2, 2, 100);
	CHECK_ST(6, KEPT);			/* behind the first: kept at once (14.8) */
	CHECK_EQ(nqueue("s"), 2);
	rel(6, "K5", "s");
	CHECK_ST(6, RELEASED);
	CHECK_EQ(nqueue("s"), 0);
	req_keep = true;
	sem(5, "K5", "s", 2, 1, 100);
	withdraw(l5, 1);
	rel(0, NULL, "s");
	h = NH("s", "K5", 0);
	CHECK(h && dlm_holder_kept(h) == 1 && dlm_holder_permits(h) == 1);
	req_keep = true;
	sem(7, "K5", "s", 2, 1, 100);
	CHECK_ST(7, GRANTED);
	CHECK(dlm_holder_kept(h) == 0 && h->count == 1);
	sem(7, "K5", "s", 2, 1, 100);
	CHECK_EQ(recs[7].error, DLM_ERR_HELD_ONCE);
	relall(7, "K5");
	teardown();
}

/* 16: leader election -- one leader, its value, FIFO successors, kinds. */
static void
test_election(void)
{
	static const char *const u[] = {"e", "l", "s", "/e"};
	static const char *const two[] = {"e", "l"};
	char		big[DLOCK_MAX_VALUE_LEN + 2];
	DLmHolder  *h;
	DLmHolderRow row;

	setup(10, 1000000, 1);
	use(u, 4);
	memset(big, 'v', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';

	/* 16.1 */
	campaign(0, NULL, "/e", "x", 0);
	CHECK_EQ(recs[0].error, DLM_ERR_BAD_ELECTION);
	campaign(0, NULL, "e", big, 0);
	CHECK_EQ(recs[0].error, DLM_ERR_BAD_ELECTION);
	big[DLOCK_MAX_VALUE_LEN] = '\0';	/* 1024 bytes: fine */
	req_value = "x";
	acq(0, NULL, "e", PR, 0);
	CHECK_EQ(recs[0].error, DLM_ERR_BAD_ELECTION);
	req_value = "x";
	acqall(0, NULL, two, 2, EX, 0);
	CHECK_EQ(recs[0].error, DLM_ERR_BAD_ELECTION);
	proclaim(0, NULL, "e", NULL);
	CHECK_EQ(recs[0].error, DLM_ERR_BAD_ELECTION);
	CHECK(dlm_lookup(M, "e") == NULL);

	/* 16.3: the first leads, with its value; the others wait in order */
	autosettle = false;
	campaign(0, "A", "e", "a:1", 100);
	CHECK_ST(0, GRANTED);
	CHECK(strcmp(leader_changes(), "e,") == 0);
	CHECK(dlm_batch_durable(M));
	settle();
	h = NH("e", "A", 0);
	CHECK(h && dlm_holder_value(h) && strcmp(dlm_holder_value(h), "a:1") == 0 && h->mode == EX);
	campaign(1, "B", "e", "b:1", 100);
	CHECK_ST(1, QUEUED);
	campaign(2, "C", "e", big, 100);
	CHECK_ST(2, QUEUED);
	CHECK(strcmp(leader_changes(), "") == 0);
	settle();

	/* 16.4: the leader proclaims; nobody else may */
	proclaim(0, "A", "e", "a:2");
	CHECK_ST(0, GRANTED);
	CHECK(strcmp(dlm_holder_value(h), "a:2") == 0);
	CHECK(strcmp(leader_changes(), "e,") == 0);
	CHECK(h->p.dirty);
	settle();
	proclaim(0, "A", "e", "a:2");	/* the same value: no change */
	CHECK_ST(0, GRANTED);
	CHECK(strcmp(leader_changes(), "") == 0);
	proclaim(3, "B", "e", "b:2");
	CHECK_ST(3, NOT_HELD);
	autosettle = true;

	/* 16.2: kinds */
	acq(3, NULL, "e", EX, 0);
	CHECK_EQ(recs[3].error, DLM_ERR_IS_ELECTION);
	sem(3, NULL, "e", 2, 1, 0);
	CHECK_EQ(recs[3].error, DLM_ERR_IS_ELECTION);
	acq(3, NULL, "l", EX, 0);
	campaign(4, NULL, "l", "x", 0);
	CHECK_EQ(recs[4].error, DLM_ERR_IS_LOCK);
	proclaim(3, NULL, "l", "x");
	CHECK_EQ(recs[3].error, DLM_ERR_IS_LOCK);
	sem(4, NULL, "s", 2, 1, 0);
	campaign(5, NULL, "s", "x", 0);
	CHECK_EQ(recs[5].error, DLM_ERR_IS_SEMAPHORE);
	conv(0, "A", "e", PR);
	CHECK_EQ(recs[0].error, DLM_ERR_IS_ELECTION);
	campaign(0, "A", "e", "again", 100);
	CHECK_EQ(recs[0].error, DLM_ERR_HELD_ONCE);
	rel(3, NULL, "l");
	rel(4, NULL, "s");

	/* resigning hands the lead on in order, with the successor's value */
	autosettle = false;
	rel(0, "A", "e");
	CHECK_ST(1, GRANTED);
	CHECK(strcmp(leader_changes(), "e,") == 0);
	settle();
	autosettle = true;
	h = NH("e", "B", 0);
	CHECK(h && strcmp(dlm_holder_value(h), "b:1") == 0);
	/* a lease that runs out ends the lead */
	NOW += 100;
	CHECK_EQ(expire(10), 1);
	CHECK_ST(2, GRANTED);
	h = NH("e", "C", 0);
	CHECK(h && strlen(dlm_holder_value(h)) == DLOCK_MAX_VALUE_LEN);

	/* 14 with 16: a kept campaign resumed with a new value */
	req_keep = true;
	campaign(5, "D", "e", "d:1", 100);
	CHECK_ST(5, QUEUED);
	withdraw((int[]) {5}, 1);
	CHECK_ST(5, KEPT);
	req_keep = true;
	campaign(6, "D", "e", "d:2", 100);
	CHECK_ST(6, QUEUED);
	relall(2, "C");
	CHECK_ST(6, GRANTED);
	h = NH("e", "D", 0);
	CHECK(h && strcmp(dlm_holder_value(h), "d:2") == 0);
	session_end(6, DLM_NOBODY);
	CHECK(NH("e", "D", 0) != NULL);	/* keyed: the lead outlives the session */
	relall(6, "D");
	CHECK(dlm_lookup(M, "e") == NULL || nholders("e") == 0);

	/* 16.5: loading a leader */
	memset(&row, 0, sizeof(row));
	row.name = "e";
	row.owner_key = "L";
	row.mode = EX;
	row.count = 1;
	row.token = 900;
	row.value = "l:1";
	CHECK_EQ(dlm_load_holder(M, &row), DLM_OK);
	CHECK(NH("e", "L", 0) && strcmp(dlm_holder_value(NH("e", "L", 0)), "l:1") == 0);
	campaign(7, NULL, "e", "x", 0);
	CHECK_ST(7, QUEUED);
	acq(8, NULL, "e", EX, 0);
	CHECK_EQ(recs[8].error, DLM_ERR_IS_ELECTION);
	relall(8, "L");
	CHECK_ST(7, GRANTED);
	relall(7, NULL);
	row.mode = PR;
	CHECK_EQ(dlm_load_holder(M, &row), DLM_ERR_BAD_ELECTION);
	teardown();
}

/* 14.7: kept places come back from the store in their order. */
static void
test_load_kept(void)
{
	static const char *const u[] = {"x", "/p", "/p/q"};
	DLmHolderRow r;
	DLmWaiterRow k[2];

	setup(8, 100, 1);
	dlm_set_counter(M, 5000);
	cur_hi = 5000;
	use(u, 3);
	memset(&r, 0, sizeof(r));
	r.name = "x";
	r.owner_key = "H";
	r.mode = EX;
	r.count = 1;
	r.token = 4000;
	r.expires_at = 100000;
	r.ttl_us = 1000;
	r.kept = 1;
	CHECK_EQ(dlm_load_holder(M, &r), DLM_OK);
	CHECK(NH("x", "H", 0) && dlm_holder_kept(NH("x", "H", 0)) == 1);
	r.kept = 2;
	r.name = "y";
	CHECK_EQ(dlm_load_holder(M, &r), DLM_ERR_BAD_REQUEST);	/* more than held */

	memset(k, 0, sizeof(k));
	k[0].name = "x";
	k[0].owner_key = "K2";
	k[0].mode = EX;
	k[0].ticket = 4010;
	k[0].kept_until = 500;
	k[0].ttl_us = 100;
	CHECK_EQ(dlm_load_kept(M, k, 1), DLM_OK);
	k[0].owner_key = "K1";
	k[0].ticket = 4005;			/* out of order: refused */
	CHECK_EQ(dlm_load_kept(M, k, 0), DLM_ERR_BAD_REQUEST);
	k[0].owner_key = NULL;
	CHECK_EQ(dlm_load_kept(M, k, 1), DLM_ERR_BAD_REQUEST);
	k[0].owner_key = "K3";
	k[0].name = "/p/q";
	k[0].ticket = 4020;
	k[0].kept_until = 400;
	k[1] = k[0];
	k[1].name = "/p";
	k[1].mode = CW;
	k[1].implied = true;
	k[1].ticket = 4021;
	CHECK_EQ(dlm_load_kept(M, k, 2), DLM_OK);
	CHECK_EQ(dlm_next_expiry(M), 400);
	begin_event();
	dlm_load_done(M, 10);
	after_event();
	/* the path is free: granted with nobody to answer, uncollected */
	CHECK(NH("/p/q", "K3", 0) && dlm_holder_kept(NH("/p/q", "K3", 0)) == 1);
	CHECK_EQ(nqueue("x"), 1);
	CHECK_EQ(ev_answers, 0);
	/* tickets go on after the loaded ones */
	acq_keep(1, "K2", "x", EX, 100);
	CHECK_ST(1, QUEUED);
	CHECK_EQ(recs[1].token, 4010);
	acq(2, "Z", "x", EX, 100);
	CHECK_ST(2, QUEUED);
	CHECK(recs[2].token > 4021);
	relall(0, "H");
	CHECK_ST(1, GRANTED);
	relall(1, "K2");
	CHECK_ST(2, GRANTED);
	relall(2, "Z");
	relall(2, "K3");
	teardown();
}

/* Leases: (expires_at, token) order, max, dlm_next_expiry. */
static void
test_expire(void)
{
	static const char *const u[] = {"x", "y", "z", "w", "/e", "/e/f", "v", "u", "s", "t"};

	setup(12, 1000000, 1);
	use(u, 10);
	NOW = 0;
	acq(0, NULL, "x", EX, 100);
	acq(1, NULL, "y", EX, 50);
	acq(2, NULL, "z", EX, 100);
	acq(3, NULL, "w", EX, 0);
	acq(4, "K", "/e/f", EX, 70);
	CHECK_EQ(dlm_next_expiry(M), 50);
	acq(5, NULL, "x", EX, 0);
	acq(6, NULL, "z", EX, 0);
	NOW = 49;
	CHECK_EQ(expire(10), 0);
	NOW = 50;
	CHECK_EQ(expire(10), 1);
	CHECK(dlm_lookup(M, "y") == NULL);
	CHECK(!ANSWERED(1));
	CHECK_EQ(dlm_next_expiry(M), 70);
	NOW = 80;
	CHECK_EQ(expire(10), 1);
	CHECK(dlm_lookup(M, "/e") == NULL);
	CHECK_EQ(dlm_next_expiry(M), 100);
	NOW = 100;
	CHECK_EQ(expire(1), 1);		/* a tie: the smaller token first */
	CHECK_ST(5, GRANTED);
	CHECK(!ANSWERED(6));
	CHECK(!ANSWERED(0));
	CHECK(NH("z", NULL, 2) != NULL);
	CHECK_EQ(dlm_next_expiry(M), 100);
	CHECK_EQ(expire(1), 1);
	CHECK_ST(6, GRANTED);
	CHECK_EQ(dlm_next_expiry(M), 0);
	CHECK_EQ(expire(10), 0);
	CHECK(NH("w", NULL, 3) != NULL);

	/* all levels at once */
	acq(7, NULL, "v", EX, 10);
	acq(7, NULL, "v", EX, 10);
	acq(7, NULL, "v", EX, 0);
	NOW = 200;
	CHECK_EQ(expire(10), 1);
	CHECK(dlm_lookup(M, "v") == NULL);

	/* a waiting conversion of an expired holder: NOT_HELD */
	acq(0, NULL, "u", PR, 10);
	acq(1, NULL, "u", PR, 0);
	conv(0, NULL, "u", EX);
	CHECK_ST(0, QUEUED);
	NOW = 210;
	CHECK_EQ(expire(10), 1);
	CHECK_ST(0, NOT_HELD);
	CHECK_EQ(nholders("u"), 1);
	CHECK_EQ(nqueue("u"), 0);

	/* sooner first, whatever the tokens */
	NOW = 300;
	acq(8, NULL, "s", EX, 100);
	acq(9, NULL, "t", EX, 90);
	NOW = 400;
	CHECK_EQ(expire(1), 1);
	CHECK(dlm_lookup(M, "t") == NULL);
	CHECK(NH("s", NULL, 8) != NULL);
	CHECK_EQ(expire(0), 0);
	CHECK(NH("s", NULL, 8) != NULL);
	teardown();
}

/* Announcements: once per lock until it gets a new holder. */
static void
test_announce(void)
{
	static const char *const u[] = {"x", "y", "u", "/a", "/a/b"};

	setup(12, 1000000, 1);
	use(u, 5);
	autosettle = false;
	acq(0, NULL, "x", EX, 0);
	CHECK_EQ(count_notified(NULL), 0);
	settle();
	acq(1, NULL, "x", EX, 0);
	CHECK_EQ(count_notified(NULL), 1);
	CHECK_EQ(count_notified("x"), 1);
	settle();
	CHECK_EQ(count_notified(NULL), 0);
	acq(2, NULL, "x", EX, 0);
	CHECK_EQ(count_notified(NULL), 0);	/* announced already */
	settle();
	rel(0, NULL, "x");
	CHECK_ST(1, GRANTED);		/* a new holder */
	settle();
	acq(3, NULL, "x", PR, 0);
	CHECK_EQ(count_notified("x"), 1);
	settle();

	/* the waiting part behind a conflicting holder announces, not the leaf */
	acq(4, NULL, "/a", EX, 0);
	settle();
	acq(5, NULL, "/a/b", PR, 0);
	CHECK_ST(5, QUEUED);
	CHECK_EQ(count_notified("/a"), 1);
	CHECK_EQ(count_notified("/a/b"), 0);
	settle();

	/* try-acquire refused: nothing */
	acq(6, NULL, "y", EX, 0);
	settle();
	try_acq(7, NULL, "y", EX, 0);
	CHECK_ST(7, REFUSED);
	CHECK_EQ(count_notified(NULL), 0);
	settle();

	/* an up-conversion waiting announces */
	acq(8, NULL, "u", PR, 0);
	acq(9, NULL, "u", PR, 0);
	settle();
	conv(8, NULL, "u", EX);
	CHECK_ST(8, QUEUED);
	CHECK_EQ(count_notified("u"), 1);
	settle();
	teardown();
}

/* The batch: touched holders and waiters with their store flags. */
static void
test_batch(void)
{
	static const char *const u[] = {"x", "y", "/a", "/a/b", "/a/c", "z"};
	DLmHolder  *h;
	DLmWaiter  *w;
	int64_t		told;

	setup(8, 1000000, 1);
	use(u, 6);
	autosettle = false;
	acq(0, NULL, "x", EX, 0);
	h = dlm_touched_holder(M, 0);
	CHECK(h != NULL && dlm_touched_holder(M, 1) == NULL);
	if (h)
	{
		CHECK(strcmp(h->lock->name, "x") == 0);
		CHECK(!h->p.stored && !h->p.dead && h->p.listed);
	}
	CHECK(dlm_touched_waiter(M, 0) == NULL);
	settle();
	CHECK(dlm_touched_holder(M, 0) == NULL);
	h = NH("x", NULL, 0);
	CHECK(h && h->p.stored && !h->p.dirty && !h->p.listed && !h->p.dead);

	acq(0, NULL, "x", EX, 0);	/* count 2: an update */
	h = dlm_touched_holder(M, 0);
	CHECK(h != NULL && h == NH("x", NULL, 0) && dlm_touched_holder(M, 1) == NULL);
	if (h)
		CHECK(h->p.stored && h->p.dirty && !h->p.dead && h->p.listed);
	settle();
	CHECK(NH("x", NULL, 0) && !NH("x", NULL, 0)->p.dirty);

	acq(1, NULL, "x", EX, 5000);
	CHECK_ST(1, QUEUED);
	CHECK(dlm_touched_holder(M, 0) == NULL);
	w = dlm_touched_waiter(M, 0);
	CHECK(w != NULL && dlm_touched_waiter(M, 1) == NULL);
	if (w)
	{
		CHECK(!w->p.stored && !w->p.dead && w->p.listed);
		CHECK(strcmp(w->lock->name, "x") == 0);
		CHECK_EQ(w->requester, 1);
		CHECK_EQ(w->mode, EX);
		CHECK_EQ(w->since, NOW);
		CHECK_EQ(w->ttl_us, 5000);
	}
	settle();
	w = dlm_waiter_of(M, 1);
	CHECK(w && w->p.stored && !w->p.listed);
	rel(0, NULL, "x");
	CHECK(dlm_touched_waiter(M, 0) == NULL);
	CHECK_EQ(count_touched_holders(), 1);	/* count 1 left */
	settle();
	rel(0, NULL, "x");
	CHECK_ST(1, GRANTED);
	{
		int			dead = 0,
					fresh = 0;

		for (size_t h_i = 0; (h = dlm_touched_holder(M, h_i)) != NULL; h_i++)
		{
			CHECK(h->p.listed);
			if (h->p.dead)
			{
				dead++;
				CHECK(h->p.stored);
			}
			else if (!h->p.stored)
				fresh++;
		}
		CHECK_EQ(dead, 1);
		CHECK_EQ(fresh, 1);
		w = dlm_touched_waiter(M, 0);
		CHECK(w && w->p.dead && w->p.stored && dlm_touched_waiter(M, 1) == NULL);
	}
	settle();
	CHECK_EQ(nholders("x"), 1);

	/* born and dead in one batch */
	acq(2, NULL, "y", EX, 0);
	rel(2, NULL, "y");
	h = dlm_touched_holder(M, 0);
	CHECK(h && h->p.dead && !h->p.stored && dlm_touched_holder(M, 1) == NULL);
	settle();
	CHECK(dlm_lookup(M, "y") == NULL);

	/* implied holders are rows too */
	acq(3, NULL, "/a/b", EX, 0);
	CHECK_EQ(count_touched_holders(), 2);
	settle();
	acq(3, NULL, "/a/c", EX, 0);
	CHECK_EQ(count_touched_holders(), 2);
	h = IH("/a", NULL, 3, CW);
	CHECK(h && h->p.listed && h->p.dirty && h->p.stored && h->count == 2);
	settle();

	/* an up-conversion: the row stored under the old token */
	acq(4, NULL, "z", PR, 0);
	settle();
	told = NH("z", NULL, 4) ? NH("z", NULL, 4)->token : -1;
	conv(4, NULL, "z", EX);
	h = NH("z", NULL, 4);
	CHECK(h && h->p.dirty && h->p.listed && h->token > told && h->stored_token == told);
	settle();
	h = NH("z", NULL, 4);
	CHECK(h && !h->p.dirty && h->stored_token == h->token);

	/* renew: dirty */
	renew(4, NULL, "z", 100, 0);
	h = NH("z", NULL, 4);
	CHECK(h && h->p.dirty && h->p.listed);
	settle();
	NOW += 1000;
	CHECK_EQ(expire(5), 1);
	h = dlm_touched_holder(M, 0);
	CHECK(h && h->p.dead && h->p.stored);
	settle();
	teardown();
}

/* Waiters get rows only once they have waited queue_row_delay_us (9). */
static void
test_queue_row_delay(void)
{
	static const char *const u[] = {"x", "/p", "/p/q"};
	DLmWaiter  *w;
	DLockTime	since2;
	int			gone[1] = {3};

	setup(8, 1000000, 1);
	use(u, 3);
	dlm_set_queue_row_delay(M, 5000);
	autosettle = false;
	acq(0, NULL, "x", EX, 0);
	settle();
	CHECK_EQ(dlm_next_queue_row(M), 0);

	/* a wait shorter than the delay never reaches the store */
	acq(1, NULL, "x", EX, 0);
	CHECK_ST(1, QUEUED);
	CHECK(dlm_touched_waiter(M, 0) == NULL);
	CHECK_EQ(dlm_next_queue_row(M), NOW + 5000);
	settle();
	NOW += 4999;
	CHECK_EQ(dlm_queue_rows_due(M, NOW, false), 0);
	rel(0, NULL, "x");
	CHECK_ST(1, GRANTED);
	w = dlm_touched_waiter(M, 0);
	CHECK(w && w->p.dead && !w->p.stored && dlm_touched_waiter(M, 1) == NULL);
	CHECK_EQ(dlm_next_queue_row(M), 0);
	settle();

	/* longer waits get their rows when due, oldest first */
	acq(2, NULL, "x", EX, 0);
	since2 = NOW;
	NOW += 1000;
	acq(3, NULL, "x", PR, 0);
	settle();
	CHECK_EQ(dlm_next_queue_row(M), since2 + 5000);
	NOW = since2 + 5000;
	CHECK_EQ(dlm_queue_rows_due(M, NOW, false), 1);
	w = dlm_touched_waiter(M, 0);
	CHECK(w && w->requester == 2 && !w->p.stored && !w->p.dead && dlm_touched_waiter(M, 1) == NULL);
	settle();
	CHECK(dlm_waiter_of(M, 2) && dlm_waiter_of(M, 2)->p.stored);
	CHECK(dlm_waiter_of(M, 3) && !dlm_waiter_of(M, 3)->p.stored);
	CHECK_EQ(dlm_next_queue_row(M), since2 + 6000);

	/* withdrawn while young: nothing to write, nothing left due */
	withdraw(gone, 1);
	CHECK_ST(3, CANCELED);
	w = dlm_touched_waiter(M, 0);
	CHECK(w && w->p.dead && !w->p.stored && dlm_touched_waiter(M, 1) == NULL);
	CHECK_EQ(dlm_next_queue_row(M), 0);
	settle();

	/* a stored waiter granted: its row is deleted */
	rel(1, NULL, "x");
	CHECK_ST(2, GRANTED);
	w = dlm_touched_waiter(M, 0);
	CHECK(w && w->p.dead && w->p.stored && dlm_touched_waiter(M, 1) == NULL);
	settle();

	/* a path request's parts are due together; a delay of 0 makes all due */
	acq(4, NULL, "/p", EX, 0);
	acq(5, NULL, "/p/q", EX, 0);
	CHECK_ST(5, QUEUED);
	CHECK(dlm_touched_waiter(M, 0) == NULL);
	settle();
	dlm_set_queue_row_delay(M, 0);
	CHECK_EQ(dlm_next_queue_row(M), NOW);
	CHECK_EQ(dlm_queue_rows_due(M, NOW, false), 2);
	CHECK_EQ(count_touched_waiters(), 2);
	settle();
	CHECK_EQ(dlm_next_queue_row(M), 0);
	/* and a delay of 0 writes new waiters in their own batch */
	acq(6, NULL, "x", EX, 0);
	CHECK_EQ(count_touched_waiters(), 1);
	settle();

	/* from half the delay on, a row rides along with a batch stored anyway */
	dlm_set_queue_row_delay(M, 4000);
	acq(7, NULL, "x", EX, 0);
	CHECK_ST(7, QUEUED);
	NOW += 1999;
	CHECK_EQ(dlm_queue_rows_due(M, NOW, true), 0);
	NOW += 1;
	CHECK_EQ(dlm_queue_rows_due(M, NOW, false), 0);
	CHECK_EQ(dlm_queue_rows_due(M, NOW, true), 1);
	w = dlm_touched_waiter(M, 0);
	CHECK(w && w->requester == 7 && !w->p.stored && !w->p.dead);
	settle();
	teardown();
}

/* The ticket counter: stored in blocks, dirty when a batch passes the block. */
static void
test_counter(void)
{
	static const char *const u[] = {"c0"};
	int64_t		hi = 0,
				last,
				blockhi;
	char		name[32];
	const char *many[30];
	char		mbuf[30][16];
	DLockManager *save;

	setup(8, 10, 1000);
	autosettle = false;
	use(u, 1);
	CHECK(!dlm_counter_dirty(M, &hi));
	acq(0, NULL, "c0", EX, 0);
	CHECK_EQ(recs[0].token, 1000);
	CHECK(dlm_counter_dirty(M, &hi));
	CHECK(hi > 1000);
	CHECK_EQ(hi, 1000 + 1 + 10);	/* the next ticket + ticket_reserve */
	/* README 9: the counter is flushed on its own (dlm_counter_dirty); a
	 * session's grant does not make the batch durable */
	CHECK(!dlm_batch_durable(M));
	settle();
	CHECK(!dlm_counter_dirty(M, &hi));
	blockhi = cur_hi;
	last = 1000;
	use(NULL, 0);
	for (int i = 1; i < 40; i++)
	{
		snprintf(name, sizeof(name), "n%d", i);
		acq(0, NULL, name, EX, 0);
		CHECK_EQ(recs[0].token, last + 1);
		last = recs[0].token;
		if (last < blockhi)
			CHECK(!dlm_counter_dirty(M, &hi));
		else
		{
			CHECK(dlm_counter_dirty(M, &hi));
			CHECK(hi > last);
			CHECK_EQ(hi, last + 1 + 10);
			blockhi = hi;
		}
		settle();
	}
	/* many tickets in one batch: the block covers them all */
	for (int i = 0; i < 30; i++)
	{
		snprintf(mbuf[i], sizeof(mbuf[i]), "q%02d", i);
		many[i] = mbuf[i];
	}
	acqall(1, NULL, many, 30, EX, 0);
	CHECK_ST(1, GRANTED);
	CHECK(dlm_counter_dirty(M, &hi));
	CHECK(recs[1].ntokens == 30 && hi > recs[1].tokens[29]);
	settle();

	/* a restarted manager starts at the stored value */
	save = M;
	{
		DLmConfig	c = config(8, 10);

		M = dlm_create(&c);
		CHECK(M != NULL);
		if (M)
		{
			dlm_set_counter(M, hi);
			acq(2, NULL, "r", EX, 0);
			CHECK_ST(2, GRANTED);
			CHECK_EQ(recs[2].token, hi);
			CHECK(recs[2].token > recs[1].tokens[29]);
			dlm_destroy(M);
		}
	}
	M = save;
	teardown();
}

/* dlm_batch_durable: owner-key grants and changes, not sessions' nor releases. */
static void
test_durable(void)
{
	static const char *const u[] = {"a", "b", "c"};

	setup(8, 1000000, 1);
	use(u, 3);
	autosettle = false;
	acq(0, NULL, "a", EX, 0);
	settle();					/* the first block is stored */
	acq(1, NULL, "b", EX, 0);
	CHECK(!dlm_batch_durable(M));
	settle();
	acq(2, "K", "c", EX, 1000);
	CHECK(dlm_batch_durable(M));
	settle();
	CHECK(!dlm_batch_durable(M));
	acq(2, "K", "c", EX, 0);	/* a count increment */
	CHECK(dlm_batch_durable(M));
	settle();
	renew(3, "K", "c", 0, 0);
	CHECK(dlm_batch_durable(M));
	settle();
	rel(3, "K", "c");			/* a release: not durable */
	CHECK_ST(3, RELEASED);
	CHECK_EQ(recs[3].count, 1);
	CHECK(!dlm_batch_durable(M));
	settle();
	rel(3, "K", "c");
	CHECK_EQ(recs[3].count, 0);
	CHECK(!dlm_batch_durable(M));
	settle();
	acq(4, "K2", "a", EX, 0);	/* a keyed waiter: queue only */
	CHECK_ST(4, QUEUED);
	CHECK(!dlm_batch_durable(M));
	settle();
	rel(0, NULL, "a");			/* hands on to a key */
	CHECK_ST(4, GRANTED);
	CHECK(dlm_batch_durable(M));
	settle();
	acq(5, NULL, "a", EX, 0);
	settle();
	rel(4, "K2", "a");			/* hands on to a session */
	CHECK_ST(5, GRANTED);
	CHECK(!dlm_batch_durable(M));
	settle();
	acq(6, "K", "c", PR, 0);
	CHECK(dlm_batch_durable(M));
	acq(7, NULL, "c", PR, 0);
	settle();
	conv(6, "K", "c", EX);		/* a keyed conversion waiting: queue only */
	CHECK(!dlm_batch_durable(M));
	settle();
	rel(7, NULL, "c");			/* the keyed conversion granted */
	CHECK_ST(6, GRANTED);
	CHECK(dlm_batch_durable(M));
	settle();
	conv(6, "K", "c", PR);		/* down: changed */
	CHECK(dlm_batch_durable(M));
	settle();
	teardown();
}

/* dlm_settle frees empty locks. */
static void
test_settle(void)
{
	static const char *const u[] = {"a", "b", "c"};
	int			l1[] = {1};

	setup(8, 1000000, 1);
	use(u, 3);
	autosettle = false;
	acq(0, NULL, "a", EX, 0);
	acq(0, NULL, "b", EX, 0);
	acq(0, NULL, "c", EX, 0);
	acq(1, NULL, "c", EX, 0);
	settle();
	CHECK_EQ(dlm_nlocks(M), 3);
	rel(0, NULL, "a");
	rel(0, NULL, "b");
	settle();
	CHECK(dlm_lookup(M, "a") == NULL);
	CHECK(dlm_lookup(M, "b") == NULL);
	CHECK_EQ(dlm_nlocks(M), 1);
	rel(0, NULL, "c");
	CHECK_ST(1, GRANTED);
	settle();
	CHECK_EQ(dlm_nlocks(M), 1);
	acq(0, NULL, "a", EX, 0);
	acq(2, NULL, "a", EX, 0);
	settle();
	rel(0, NULL, "a");			/* hands on: a stays */
	settle();
	CHECK_EQ(dlm_nlocks(M), 2);
	acq(0, NULL, "a", EX, 0);	/* waits */
	settle();
	withdraw(l1, 1);			/* 1 waits for nothing */
	rel(2, NULL, "a");
	rel(0, NULL, "a");
	settle();
	relall(1, NULL);
	settle();
	CHECK_EQ(dlm_nlocks(M), 0);
	CHECK(dlm_lookup(M, "a") == NULL && dlm_lookup(M, "c") == NULL);
	teardown();
}

/* Loading: the counter, holders as stored, dead sessions, extended leases. */
static bool
alive_but_2(void *arg, int32_t pid, int64_t start)
{
	int		   *calls = arg;

	(*calls)++;
	return !(pid == PID(2) && start == START(2));
}

static void
test_load(void)
{
	static const char *const u[] = {"x", "/a", "/a/b", "y", "z"};
	DLmHolderRow r;
	DLmHolder  *h;
	int64_t		hi;
	int			calls = 0;
	size_t		nl;

	setup(8, 100, 1);
	dlm_set_counter(M, 5000);
	cur_hi = 5000;
	autosettle = false;

	memset(&r, 0, sizeof(r));
	r.name = "x";
	r.owner_key = "K";
	r.pid = 50;
	r.backend_start = 500;
	r.mode = EX;
	r.count = 2;
	r.token = 4000;
	r.granted_at = 10;
	r.expires_at = 10000;
	r.ttl_us = 5000;
	CHECK_EQ(dlm_load_holder(M, &r), DLM_OK);
	memset(&r, 0, sizeof(r));
	r.name = "/a/b";
	r.pid = PID(1);
	r.backend_start = START(1);
	r.mode = PR;
	r.count = 1;
	r.token = 4001;
	CHECK_EQ(dlm_load_holder(M, &r), DLM_OK);
	r.name = "/a";
	r.mode = CR;
	r.implied = true;
	r.token = 4002;
	CHECK_EQ(dlm_load_holder(M, &r), DLM_OK);
	memset(&r, 0, sizeof(r));
	r.name = "y";
	r.pid = PID(2);
	r.backend_start = START(2);
	r.mode = EX;
	r.count = 1;
	r.token = 4003;
	CHECK_EQ(dlm_load_holder(M, &r), DLM_OK);
	memset(&r, 0, sizeof(r));
	r.name = "z";
	r.owner_key = "K2";
	r.pid = 51;
	r.backend_start = 501;
	r.mode = PW;
	r.count = 1;
	r.token = 4004;
	r.expires_at = 300;
	r.ttl_us = 100;
	CHECK_EQ(dlm_load_holder(M, &r), DLM_OK);
	use(u, 5);
	check_inv();
	CHECK_EQ(dlm_nlocks(M), 5);
	for (size_t h_i = 0; (h = dlm_touched_holder(M, h_i)) != NULL; h_i++)
		CHECK(h->p.stored && !h->p.dirty && !h->p.dead);
	CHECK(!dlm_counter_dirty(M, &hi));
	h = NH("x", "K", 0);
	CHECK(h && h->count == 2 && h->token == 4000 && h->expires_at == 10000 &&
		  h->pid == 50 && h->granted_at == 10 && h->p.stored && h->stored_token == 4000);
	h = IH("/a", NULL, 1, CR);
	CHECK(h && h->count == 1 && h->token == 4002);
	CHECK_EQ(dlm_next_expiry(M), 300);

	/* bad rows change nothing */
	nl = dlm_nlocks(M);
	memset(&r, 0, sizeof(r));
	r.name = "bad";
	r.pid = 1;
	r.mode = 9;
	r.count = 1;
	r.token = 10;
	CHECK(dlm_load_holder(M, &r) != DLM_OK);
	r.mode = EX;
	r.name = "";
	CHECK_EQ(dlm_load_holder(M, &r), DLM_ERR_BAD_NAME);
	r.name = "/a//b";
	CHECK_EQ(dlm_load_holder(M, &r), DLM_ERR_BAD_NAME);
	r.name = "bad";
	r.owner_key = "";
	CHECK_EQ(dlm_load_holder(M, &r), DLM_ERR_BAD_OWNER);
	r.owner_key = "a\001b";
	CHECK_EQ(dlm_load_holder(M, &r), DLM_ERR_BAD_OWNER);
	CHECK_EQ(dlm_nlocks(M), nl);
	CHECK(dlm_lookup(M, "bad") == NULL);

	/* a restart's grace */
	CHECK_EQ(dlm_extend_leases(M, 1000), 1);
	CHECK_EQ(dlm_next_expiry(M), 1000);
	h = NH("z", "K2", 0);
	CHECK(h && h->expires_at == 1000);
	h = NH("x", "K", 0);
	CHECK(h && h->expires_at == 10000);

	/* sessions that are gone */
	CHECK(dlm_drop_sessions(M, alive_but_2, &calls) >= 1);
	CHECK(calls >= 1);
	settle();
	CHECK(dlm_lookup(M, "y") == NULL);
	CHECK(NH("/a/b", NULL, 1) != NULL);
	CHECK(NH("x", "K", 0) != NULL);
	CHECK(NH("z", "K2", 0) != NULL);
	settle();

	/* and on from there */
	NOW = 20;
	acq(0, "K", "x", EX, 0);
	CHECK_ST(0, GRANTED);
	CHECK_EQ(recs[0].token, 4000);
	CHECK_EQ(recs[0].count, 3);
	acq(3, NULL, "x", EX, 0);
	CHECK_ST(3, QUEUED);
	CHECK(recs[3].token >= 5000);
	settle();
	rel(1, NULL, "/a/b");
	CHECK_ST(1, RELEASED);
	CHECK_EQ(recs[1].token, 4001);
	CHECK(dlm_lookup(M, "/a") == NULL || IH("/a", NULL, 1, -1) == NULL);
	settle();
	for (int i = 0; i < 3; i++)
		rel(0, "K", "x");
	CHECK_ST(3, GRANTED);
	CHECK(recs[3].token > 5000);
	settle();
	NOW = 1000;
	CHECK_EQ(expire(10), 1);
	settle();
	CHECK(dlm_lookup(M, "z") == NULL);
	teardown();
}

/* Bad requests: ERROR with the error, nothing else. */
static void
test_validation(void)
{
	static const char *const u[] = {"x"};
	const char *one[1];
	char		longname[2000];

	setup(8, 1000000, 1);
	use(u, 1);
	acq(0, NULL, "x", EX, 0);
	submit(DLOCK_OP_NONE, 1, 1, NULL, EX, u, 1, 0, 0);
	CHECK_ST(1, ERROR);
	CHECK_EQ(recs[1].error, DLM_ERR_BAD_REQUEST);
	submit((DLockOp) 99, 1, 1, NULL, EX, u, 1, 0, 0);
	CHECK_ST(1, ERROR);
	CHECK_EQ(recs[1].error, DLM_ERR_BAD_REQUEST);
	submit(DLOCK_OP_ACQUIRE, 1, 1, NULL, -1, u, 1, 0, 0);
	CHECK_ST(1, ERROR);
	CHECK_EQ(recs[1].error, DLM_ERR_BAD_REQUEST);
	submit(DLOCK_OP_CONVERT, 0, 0, NULL, DLOCK_NMODES, u, 1, 0, 0);
	CHECK_ST(0, ERROR);
	CHECK_EQ(recs[0].error, DLM_ERR_BAD_REQUEST);
	submit(DLOCK_OP_ACQUIRE, 1, 1, NULL, EX, u, 0, 0, 0);
	CHECK_ST(1, ERROR);
	CHECK_EQ(recs[1].error, DLM_ERR_BAD_REQUEST);
	submit(DLOCK_OP_ACQUIRE, 1, 1, NULL, EX, NULL, 1, 0, 0);
	CHECK_ST(1, ERROR);
	one[0] = "";
	submit(DLOCK_OP_ACQUIRE, 1, 1, NULL, EX, one, 1, 0, 0);
	CHECK_ST(1, ERROR);
	CHECK_EQ(recs[1].error, DLM_ERR_BAD_NAME);
	one[0] = "/a/";
	submit(DLOCK_OP_TRY, 1, 1, NULL, EX, one, 1, 0, 0);
	CHECK_ST(1, ERROR);
	CHECK_EQ(recs[1].error, DLM_ERR_BAD_NAME);
	memset(longname, 'n', sizeof(longname));
	longname[max_name_len + 1] = '\0';
	one[0] = longname;
	submit(DLOCK_OP_ACQUIRE, 1, 1, NULL, EX, one, 1, 0, 0);
	CHECK_ST(1, ERROR);
	CHECK_EQ(recs[1].error, DLM_ERR_BAD_NAME);
	longname[max_name_len] = '\0';	/* exactly the longest */
	submit(DLOCK_OP_TRY, 1, 1, NULL, EX, one, 1, 0, 0);
	CHECK_ST(1, GRANTED);
	submit(DLOCK_OP_RELEASE, 1, 1, NULL, 0, one, 1, 0, 0);
	CHECK_ST(1, RELEASED);
	submit(DLOCK_OP_ACQUIRE, 1, 1, "", EX, u, 1, 0, 0);
	CHECK_ST(1, ERROR);
	CHECK_EQ(recs[1].error, DLM_ERR_BAD_OWNER);
	submit(DLOCK_OP_RELEASE_ALL, 1, 1, "a\tb", 0, NULL, 0, 0, 0);
	CHECK_ST(1, ERROR);
	CHECK_EQ(recs[1].error, DLM_ERR_BAD_OWNER);
	submit(DLOCK_OP_ACQUIRE, 1, 1, NULL, EX, u, 1, -1, 0);
	CHECK_ST(1, ERROR);
	submit(DLOCK_OP_RENEW, 0, 0, NULL, 0, u, 1, -5, 0);
	CHECK_ST(0, ERROR);
	CHECK_EQ(nqueue("x"), 0);
	CHECK(NH("x", NULL, 0) != NULL && NH("x", NULL, 0)->count == 1);
	/* a requester out of range: nothing changes (answered or not) */
	submit(DLOCK_OP_ACQUIRE, 8, 1, NULL, EX, u, 1, 0, 0);
	submit(DLOCK_OP_ACQUIRE, -2, 1, NULL, EX, u, 1, 0, 0);
	CHECK_EQ(nqueue("x"), 0);
	stray = 0;
	for (int e = DLM_OK; e <= DLM_ERR_NO_MEMORY + 1; e++)
		CHECK(dlm_error_message((DLmError) e) != NULL &&
			  dlm_error_message((DLmError) e)[0] != '\0');
	teardown();
}

/* ------------------------------------------------ the scripted workload */

static uint64_t rng_state;

static int
rnd(int n)
{
	return test_rnd(&rng_state, n);
}

#define WL_NREQ 12

/* sorted by strcmp ('/' < 'a'): acquire_all takes them in this order */
static const char *const wl_names[] = {
	"/p", "/p/q", "/p/q/r", "/p/s", "/t/u", "a", "b", "c", "d"
};
#define WL_NNAMES ((int) (sizeof(wl_names) / sizeof(wl_names[0])))
static const char *const wl_keys[] = {NULL, NULL, NULL, "K1", "K2"};

static int64_t wl_start[WL_NREQ];

static void
log_batch(void)
{
	int64_t		hi = 0;

	if (!logging)
		return;
	DLmHolder  *h;

	for (size_t h_i = 0; (h = dlm_touched_holder(M, h_i)) != NULL; h_i++)
		logf_("H %s %s %d %" PRId64 " %d %d %d %" PRId64 " %" PRId64 " %" PRId64 " %d%d%d\n",
			  h->lock->name, h->owner->key ? h->owner->key : "-", (int) h->owner->pid,
			  h->owner->session_start, h->mode, h->implied, (int) h->count, h->token,
			  h->stored_token, h->expires_at, h->p.stored, h->p.dirty, h->p.dead);
	DLmWaiter  *w;

	for (size_t wi = 0; (w = dlm_touched_waiter(M, wi)) != NULL; wi++)
		logf_("W %s %s %d %d %d %" PRId64 " %d %d%d\n",
			  w->lock->name, w->owner->key ? w->owner->key : "-", (int) w->owner->pid,
			  w->mode, w->implied, w->ticket, w->requester, w->p.stored, w->p.dead);
	DLmLock    *L;

	for (size_t L_i = 0; (L = dlm_notified_lock(M, L_i)) != NULL; L_i++)
		logf_("N %s\n", L->name);
	if (dlm_counter_dirty(M, &hi))
		logf_("C %" PRId64 "\n", hi);
	logf_("D %d E %" PRId64 " L %zu\n", dlm_batch_durable(M), dlm_next_expiry(M),
		  dlm_nlocks(M));
}

/*
 * 'steps' events from the seed: requests of requesters that wait for
 * nothing, withdrawals, session ends, expiry; settled after most events.
 * oom: stop 20 events after the manager broke.
 */
static bool wl_fail_checked;

static void
wl_after(bool was_request, int requester)
{
	if (mem.refused > 0)
	{
		/* from the failed allocation on: broken, every request NO_MEMORY */
		wl_fail_checked = true;
		CHECK(dlm_broken(M));
		if (was_request && requester >= 0)
			CHECK(ev_nomem > 0);
	}
	else if (mem.refused == 0)
	{
		CHECK(!dlm_broken(M));
		CHECK_EQ(ev_nomem, 0);
	}
}

static void
workload(uint64_t seed, int steps, bool oom)
{
	DLockTime	now = 100;
	int			after_broken = 0;

	rng_state = seed;
	for (int c = 0; c < WL_NREQ; c++)
		wl_start[c] = START(c);
	wl_fail_checked = false;
	for (int step = 0; step < steps; step++)
	{
		int			kind = rnd(100);
		int			c = rnd(WL_NREQ);
		DLmRequest	r;
		const char *names[4];
		bool		was_request = false;

		if (oom && mem.refused > 0 && ++after_broken > 20)
			break;
		now += rnd(30);
		memset(&r, 0, sizeof(r));
		r.requester = c;
		r.pid = PID(c);
		r.session_start = wl_start[c];
		r.owner_key = wl_keys[rnd(5)];
		r.mode = rnd(DLOCK_NMODES);
		r.names = names;
		r.nnames = 1;
		names[0] = wl_names[rnd(WL_NNAMES)];
		r.ttl_us = rnd(3) == 0 ? 50 + rnd(200) : 0;
		r.timeout_at = rnd(4) == 0 ? now + 1000 : 0;
		begin_event();
		logf_("# %d\n", step);
		if (kind < 75 && dlm_waiter_of(M, c) == NULL)
		{
			was_request = true;
			if (kind < 30)
				r.op = DLOCK_OP_ACQUIRE;
			else if (kind < 37)
				r.op = DLOCK_OP_TRY;
			else if (kind < 52)
			{
				r.op = DLOCK_OP_RELEASE;
				if (rnd(8) == 0)
					r.requester = DLM_NOBODY;
			}
			else if (kind < 57)
			{
				r.op = DLOCK_OP_RENEW;
				r.max_ttl_us = rnd(2) ? 100 : 0;
			}
			else if (kind < 64)
				r.op = DLOCK_OP_CONVERT;
			else if (kind < 67)
			{
				r.op = DLOCK_OP_RELEASE_ALL;
				r.names = NULL;
				r.nnames = 0;
			}
			else
			{
				/* acquire_all of 1-3 sorted distinct names */
				int			n = 1 + rnd(3),
							k = 0;
				int			start = rnd(WL_NNAMES);

				r.op = DLOCK_OP_ACQUIRE_ALL;
				for (int i = start; i < WL_NNAMES && k < n; i += 1 + rnd(2))
					names[k++] = wl_names[i];
				/* wl_names is sorted by strcmp */
				r.nnames = k;
			}
			dlm_request(M, &r, now);
		}
		else if (kind < 82)
		{
			int			list[3];
			int			n = 1 + rnd(3);

			for (int i = 0; i < n; i++)
				list[i] = rnd(WL_NREQ);
			if (n >= 2 && list[1] == list[0])
				n = 1;
			if (n == 3 && (list[2] == list[0] || list[2] == list[1]))
				n = 2;
			logf_("withdraw %d\n", n);
			dlm_withdraw(M, list, n, now);
		}
		else if (kind < 86)
		{
			logf_("end %d\n", c);
			dlm_session_end(M, PID(c), wl_start[c], c, now);
			wl_start[c] += 1000;
		}
		else
		{
			int			n = dlm_expire(M, now, 1 + rnd(3));

			logf_("expired %d\n", n);
		}
		if (oom)
			wl_after(was_request, r.requester);
		else
		{
			int64_t		hi;

			if (dlm_counter_dirty(M, &hi))
			{
				CHECK(hi >= cur_hi);
				cur_hi = hi;
			}
			if (nU > 0)
				check_inv();
		}
		log_batch();
		if (rnd(5) != 0)
			dlm_settle(M);
	}
}

/* The same events with two hash seeds: identical answers and changes. */
static void
test_determinism(void)
{
	char	   *first = NULL;
	size_t		firstlen = 0;
	uint64_t	s0 = seed0,
				s1 = seed1;

	logging = true;
	for (int run = 0; run < 2; run++)
	{
		if (run == 1)
		{
			seed0 = 0xdeadbeefcafef00dULL;
			seed1 = 0x0badc0de12345678ULL;
		}
		loglen = 0;
		setup(WL_NREQ, 25, 1);
		use(wl_names, WL_NNAMES);
		workload(42, 4000, false);
		teardown();
		if (run == 0)
		{
			first = malloc(loglen + 1);
			memcpy(first, logbuf, loglen);
			firstlen = loglen;
		}
	}
	logging = false;
	seed0 = s0;
	seed1 = s1;
	CHECK(firstlen > 10000);
	CHECK_EQ(firstlen, loglen);
	CHECK(firstlen == loglen && memcmp(first, logbuf, loglen) == 0);
	if (firstlen != loglen || memcmp(first, logbuf, loglen) != 0)
	{
		size_t		i = 0,
					ls = 0;

		while (i < firstlen && i < loglen && first[i] == logbuf[i])
		{
			if (first[i] == '\n')
				ls = i + 1;
			i++;
		}
		fprintf(stderr, "determinism: first difference at byte %zu:\n  seed A: %.120s\n  seed B: %.120s\n",
				i, first + ls, logbuf + ls);
	}
	free(first);
}

/* An allocator that fails after K allocations: no crash, broken, all freed. */
static void
test_oom_seed(uint64_t seed, int steps)
{
	long		total;
	long		k,
				kmax,
				created = 0;
	DLmConfig	c;

	/* how many allocations the workload makes */
	memset(&mem, 0, sizeof(mem));
	mem.fail_after = -1;
	setup_recs(WL_NREQ);
	c = config(WL_NREQ, 7);
	M = dlm_create(&c);
	CHECK(M != NULL);
	dlm_set_counter(M, 1);
	workload(seed, steps, true);
	total = mem.nalloc;
	dlm_destroy(M);
	CHECK_EQ(mem.live, 0);
	for (int i = 0; i < nrecs; i++)
		free_rec(&recs[i]);
	free(recs);

	kmax = total + 5 < 3000 ? total + 5 : 3000;
	for (k = 0; k <= kmax; k++)
	{
		memset(&mem, 0, sizeof(mem));
		mem.fail_after = k;
		setup_recs(WL_NREQ);
		c = config(WL_NREQ, 7);
		M = dlm_create(&c);
		if (M == NULL)
			CHECK(mem.refused > 0 && mem.live == 0);
		else
		{
			created++;
			begin_event();
			dlm_set_counter(M, 1);
			if (mem.refused)
				CHECK(dlm_broken(M));
			workload(seed, steps, true);
			if (k < total)
				CHECK(mem.refused > 0);
			if (mem.refused > 0)
				CHECK(dlm_broken(M));
			dlm_destroy(M);
			CHECK_EQ(mem.live, 0);
			CHECK_EQ(mem.bad_free, 0);
		}
		for (int i = 0; i < nrecs; i++)
			free_rec(&recs[i]);
		free(recs);
	}
	M = NULL;
	nrecs = 0;
	recs = NULL;
	printf("oom: seed %" PRIu64 ", %d events, %ld allocations: failed after each of 0..%ld (%ld managers created)\n",
		   seed, steps, total, kmax, created);
}

static void
test_oom(void)
{
	test_oom_seed(7, 1500);
	test_oom_seed(8, 1500);
	test_oom_seed(9, 600);
}

/* ----------------------------------------------------------------- crowd */

static double
seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

#ifndef CROWD
#define CROWD 40000
#endif

/* 40,000 shared holders on one name, an exclusive waiter, releases. */
static void
test_crowd(void)
{
	double		t0,
				t_acq,
				t_rel,
				t_hand;
	int			ex = CROWD,
				late = CROWD + 1;
	bool		ok = true;
	DLmLock    *L;

	setup(CROWD + 2, 1000000, 1);
	t0 = seconds();
	for (int c = 0; c < CROWD; c++)
	{
		acq(c, NULL, "crowd", PR, 0);
		if (recs[c].status != DLOCK_STATUS_GRANTED || recs[c].ev != serial)
			ok = false;
	}
	t_acq = seconds() - t0;
	CHECK(ok);
	L = dlm_lookup(M, "crowd");
	CHECK(L && L->nheld[PR] == CROWD);
	acq(ex, NULL, "crowd", EX, 0);
	CHECK_ST(ex, QUEUED);
	acq(late, NULL, "crowd", PR, 0);
	CHECK_ST(late, QUEUED);		/* no barging past the exclusive waiter */
	t0 = seconds();
	ok = true;
	for (int c = 0; c < CROWD; c++)
	{
		rel(c, NULL, "crowd");
		if (recs[c].status != DLOCK_STATUS_RELEASED || recs[c].ev != serial)
			ok = false;
		if (c < CROWD - 1 && recs[ex].ev == serial)
			ok = false;
	}
	t_rel = seconds() - t0;
	CHECK(ok);
	CHECK_ST(ex, GRANTED);
	CHECK(recs[late].ev != serial);
	CHECK_EQ(nholders("crowd"), 1);

	/* a crowd waiting behind the exclusive holder, handed on at once */
	for (int c = 0; c < CROWD; c++)
	{
		acq(c, NULL, "crowd", PR, 0);
		if (recs[c].status != DLOCK_STATUS_QUEUED)
			ok = false;
	}
	CHECK(ok);
	t0 = seconds();
	rel(ex, NULL, "crowd");
	t_hand = seconds() - t0;
	CHECK_ST(late, GRANTED);
	ok = true;
	for (int c = 0; c < CROWD; c++)
		if (recs[c].status != DLOCK_STATUS_GRANTED || recs[c].ev != serial)
			ok = false;
	CHECK(ok);
	L = dlm_lookup(M, "crowd");
	CHECK(L && L->nheld[PR] == CROWD + 1);
	CHECK_EQ(nqueue("crowd"), 0);
	/* the tokens grow in grant order */
	ok = true;
	for (int c = 1; c < CROWD; c++)
		if (recs[c].token <= recs[c - 1].token)
			ok = false;
	CHECK(ok);
	CHECK(recs[0].token > recs[late].token);

	/* release_all of each, one by one */
	t0 = seconds();
	for (int c = 0; c < CROWD; c++)
		relall(c, NULL);
	relall(late, NULL);
	CHECK(dlm_lookup(M, "crowd") == NULL);
	printf("crowd of %d: acquire %.2f us, release %.2f us per operation; "
		   "hand-on to %d waiters %.2f ms; release_all %.2f us\n",
		   CROWD, t_acq * 1e6 / CROWD, t_rel * 1e6 / CROWD, CROWD + 1,
		   t_hand * 1e3, (seconds() - t0) * 1e6 / CROWD);
	teardown();
}


/*
 * Sequences the reference model found (core/README 3.2, 3.4, 5.3 as they
 * once read): each ended with two owners holding conflicting modes, or a
 * grantable waiter left waiting.
 */
static void
test_found_by_model(void)
{
	static const char *const u[] = {"/p", "/p/q", "/p/q/r", "/p/s", "/p/z", "b"};
	static const char *const three[] = {"/p/q/r", "/p/s", "b"};
	static const char *const two[] = {"/p", "/p/q"};
	static const char *const one[] = {"b"};

	/* A: a name held when an acquire_all queued loses its holder (lease) */
	setup(8, 1000000, 1);
	use(u, 6);
	acq(0, NULL, "/p/q/r", PR, 100);
	try_acq(1, NULL, "/p/s", EX, 0);
	CHECK_ST(1, GRANTED);
	acqall(0, NULL, three, 3, CR, 0);
	CHECK_ST(0, QUEUED);
	NOW += 1000;
	CHECK_EQ(expire(10), 1);
	acq(2, NULL, "/p/q", EX, 0);	/* behind the group's intention on /p/q */
	CHECK_ST(2, QUEUED);
	rel(1, NULL, "/p/s");
	CHECK_ST(0, GRANTED);
	CHECK(NH("/p/q", NULL, 2) == NULL);
	teardown();

	/* B: a conversion whose own cover on the ancestor goes while it waits */
	setup(8, 1000000, 1);
	use(u, 6);
	acq(0, "k1", "/p/q", PR, 0);
	acq(0, "k1", "/p/z", EX, 0);	/* CW on /p covers the conversion's */
	acq(1, "k2", "/p/q", PR, 0);
	conv(0, "k1", "/p/q", EX);
	CHECK_ST(0, QUEUED);
	rel(2, "k1", "/p/z");			/* the cover goes */
	/* behind the conversion's CW on /p, which waits for k2's /p/q: a cycle */
	acq(1, "k2", "/p", PR, 0);
	CHECK_ST(1, DEADLOCK);
	rel(3, "k2", "/p/q");
	CHECK_ST(0, GRANTED);
	CHECK(NH("/p", "k2", 0) == NULL);
	teardown();

	/* C: names covered by the owner's own intentions are granted at once */
	setup(8, 1000000, 1);
	use(u, 6);
	try_acq(0, NULL, "/p/q/r", CR, 0);
	acq(1, NULL, "/p/q", EX, 0);
	CHECK_ST(1, QUEUED);
	acqall(0, NULL, two, 2, CR, 0);
	CHECK_ST(0, GRANTED);
	teardown();

	/* D: an up-conversion at once between incomparable modes hands on */
	setup(8, 1000000, 1);
	use(u, 6);
	acqall(0, NULL, one, 1, CW, 0);
	acq(1, "k2", "b", PR, 0);
	CHECK_ST(1, QUEUED);
	conv(0, NULL, "b", PR);
	CHECK_ST(0, GRANTED);
	CHECK_ST(1, GRANTED);
	teardown();
}

/*
 * More sequences the reference model found (core/README 5.3 and 6 as they
 * once read): each left a grantable request waiting.
 */
static void
test_found_by_model2(void)
{
	static const char *const u[] = {"/p", "/p/q", "/p/q/r", "/p/s", "b"};

	/*
	 * A (5.3): an up-conversion compatible with the holders of other
	 * owners and with every waiting conversion is granted at once; it
	 * waited only because a conversion waited.  Its grant pass then hands
	 * on to the conversion it had blocked.
	 */
	setup(8, 1000000, 1);
	use(u, 5);
	acq(0, "k1", "b", CR, 0);
	CHECK_ST(0, GRANTED);
	acq(1, "k2", "b", CW, 0);
	CHECK_ST(1, GRANTED);
	conv(0, "k1", "b", PR);			/* behind k2's CW */
	CHECK_ST(0, QUEUED);
	conv(1, "k2", "b", PR);			/* PR goes with k1's CR and its PR */
	CHECK_ST(1, GRANTED);
	CHECK_ST(0, GRANTED);			/* k2's CW is gone */
	CHECK(NH("b", "k1", 0) != NULL && NH("b", "k1", 0)->mode == PR);
	CHECK(NH("b", "k2", 0) != NULL && NH("b", "k2", 0)->mode == PR);
	teardown();

	/*
	 * B (6.2): an up-conversion makes the owner's own holder cover a part
	 * of its waiting group on a lock no pass would reach (the pass over
	 * /p stops at k1's PR ahead of the part); the recheck list grants it.
	 */
	setup(8, 1000000, 1);
	use(u, 5);
	acq(2, NULL, "/p/s", EX, 0);	/* CW on /p */
	CHECK_ST(2, GRANTED);
	acq(1, "k2", "/p", CR, 0);
	CHECK_ST(1, GRANTED);
	acq(0, "k1", "/p", PR, 0);		/* behind the session's CW */
	CHECK_ST(0, QUEUED);
	acq(1, "k2", "/p/q/r", EX, 0);	/* its CW on /p behind k1's PR */
	CHECK_ST(1, QUEUED);
	conv(3, "k2", "/p", CW);		/* CW goes with the session's CW */
	CHECK_ST(3, GRANTED);
	CHECK_ST(1, GRANTED);			/* every part of the group passes now */
	CHECK(NH("/p/q/r", "k2", 0) != NULL);
	CHECK(!ANSWERED(0));			/* k1's PR still waits */
	teardown();
}

/* A test passes when every check in it does; the summary counts tests. */
static int	tests_passed;
static int	tests_failed;

#define RUN(test) \
	do { \
		int			failed_before = failed; \
		test(); \
		if (failed == failed_before) \
			tests_passed++; \
		else \
		{ \
			tests_failed++; \
			fprintf(stderr, "FAIL %s\n", #test); \
		} \
	} while (0)

/* 17: the statistics count a scripted run exactly. */
static void
test_stats(void)
{
	static const char *const u[] = {"s", "t", "d", "u"};
	const DLmStats *st;
	int64_t		holders,
				waiting,
				kept;

	setup(8, 1000000, 1);
	use(u, 4);
	NOW = 1000;
	acq(0, NULL, "s", EX, 0);	/* immediate */
	acq(1, NULL, "s", EX, 0);	/* waits 3 ms */
	acq(2, NULL, "s", EX, 0);	/* waits, withdrawn */
	try_acq(3, NULL, "s", EX, 0);	/* refused */
	acq(4, "K", "t", PR, 1000);	/* a lease: renewed, converted, expires */
	dlm_sizes(M, &holders, &waiting, &kept);
	CHECK_EQ(holders, 2);
	CHECK_EQ(waiting, 2);
	CHECK_EQ(kept, 0);
	NOW = 4000;
	rel(0, NULL, "s");			/* grants 1 after 3 ms */
	CHECK_ST(1, GRANTED);
	withdraw((int[]) {2}, 1);
	CHECK_ST(2, CANCELED);
	renew(4, "K", "t", 1000, 0);
	CHECK_ST(4, RENEWED);
	conv(4, "K", "t", EX);
	CHECK_ST(4, GRANTED);
	acq_keep(5, "Q", "s", EX, 100000);	/* waits, then kept */
	withdraw((int[]) {5}, 1);
	CHECK_ST(5, KEPT);
	dlm_sizes(M, &holders, &waiting, &kept);
	CHECK_EQ(kept, 1);
	NOW = 10000;
	expire(10);					/* t's lease */
	session_end(1, 1);			/* held s */
	st = dlm_stats(M);
	CHECK_EQ(st->grants, 4);	/* 0, 4 (acquire), 1 (waited), 4 (conversion) */
	CHECK_EQ(st->grants_immediate, 3);
	CHECK_EQ(st->waits, 3);
	CHECK_EQ(st->withdrawn, 1);
	CHECK_EQ(st->kept, 1);
	CHECK_EQ(st->refused, 1);
	CHECK_EQ(st->releases, 1);
	CHECK_EQ(st->renewals, 1);
	CHECK_EQ(st->conversions, 1);
	CHECK_EQ(st->expiries, 1);
	CHECK_EQ(st->session_cleanups, 1);
	CHECK_EQ(st->deadlocks, 0);
	CHECK_EQ(st->wait_us_sum, 3000);
	CHECK_EQ(st->wait_buckets[1], 1);	/* 3 ms: up to 5 ms */
	CHECK_EQ(st->requests, 9);
	{
		DLmCounters c;

		memset(&c, 0, sizeof(c));
		dlm_counters_batch(&c, M, 3, true, 100, 2000);
		CHECK_EQ(c.core.grants, 4);
		CHECK_EQ(c.handoffs, 1);	/* the one waited grant */
		CHECK_EQ(c.handoff_buckets[1], 1);	/* 2 ms */
		CHECK_EQ(c.commits, 1);
		CHECK_EQ(c.commit_us, 100);
		CHECK_EQ(c.batch_requests, 3);
		dlm_counters_batch(&c, M, 0, false, 0, 0);
		CHECK_EQ(c.core.grants, 4);	/* nothing new */
		CHECK_EQ(c.handoffs, 1);
		dlm_stats_reset(M);		/* as a new manager after a reload */
		CHECK_EQ(dlm_stats(M)->grants, 0);
		CHECK_EQ(dlm_stats(M)->wait_buckets[1], 0);
		acq(6, NULL, "u", EX, 0);
		dlm_counters_batch(&c, M, 1, true, 50, 0);
		CHECK_EQ(c.core.grants, 5);	/* carried on from the old manager */
		CHECK_EQ(c.batches, 3);
	}
	{
		/* the adapters' ops never reach the rules: refused */
		DLmRequest	q;

		memset(&q, 0, sizeof(q));
		q.op = DLOCK_OP_FORCE_RELEASE;
		q.requester = DLM_NOBODY;
		q.pid = PID(7);
		q.session_start = START(7);
		q.names = u;
		q.nnames = 1;
		CHECK(dlm_request(M, &q, NOW) != DLM_OK);
		q.op = DLOCK_OP_FORCE_RELEASE_ALL;
		CHECK(dlm_request(M, &q, NOW) != DLM_OK);
	}
	teardown();
}

int
main(int argc, char **argv)
{
	bool		quick = argc > 1 && strcmp(argv[1], "--quick") == 0;

	(void) argv;
	RUN(test_basic);
	RUN(test_stats);
	RUN(test_fifo);
	RUN(test_owner_role);
	RUN(test_conversion_frees_earlier);
	RUN(test_limits);
	RUN(test_shared_run);
	RUN(test_try);
	RUN(test_reentrant);
	RUN(test_reentrant_lease);
	RUN(test_mode_held);
	RUN(test_mode_held_in_pass);
	RUN(test_convert);
	RUN(test_convert_before_waiters);
	RUN(test_holder_order);
	RUN(test_convert_errors);
	RUN(test_convert_deadlock);
	RUN(test_path_ex_subtree);
	RUN(test_path_readers);
	RUN(test_path_intentions);
	RUN(test_path_convert);
	RUN(test_acquire_all);
	RUN(test_deadlock3);
	RUN(test_deadlock_queued_keyed);
	RUN(test_release_not_held);
	RUN(test_renew);
	RUN(test_release_all);
	RUN(test_withdraw);
	RUN(test_session_end);
	RUN(test_keep_place);
	RUN(test_load_kept);
	RUN(test_semaphore);
	RUN(test_semaphore_max);
	RUN(test_election);
	RUN(test_expire);
	RUN(test_announce);
	RUN(test_batch);
	RUN(test_queue_row_delay);
	RUN(test_counter);
	RUN(test_durable);
	RUN(test_settle);
	RUN(test_load);
	RUN(test_validation);
	RUN(test_determinism);
	RUN(test_found_by_model);
	RUN(test_found_by_model2);
	RUN(test_oom);
	if (!quick)
		test_crowd();
	free(logbuf);
	printf("lm checks: %d passed, %d failed\n", passed, failed);
	printf("lm: %d passed, %d failed\n", tests_passed, tests_failed);
	return failed == 0 ? 0 : 1;
}
