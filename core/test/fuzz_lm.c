/* SPDX-License-Identifier: PostgreSQL */
/*
 * fuzz_lm.c
 *		The lock manager's interface fed bad input, interleaved with valid
 *		requests: unknown ops, modes -5..10, requesters out of range or
 *		busy, NULL names, name counts 0/65/negative, names empty, too long,
 *		malformed paths, too deep, acquire_all lists unsorted or with
 *		duplicates, bad owner keys, negative ttls, withdraw lists with bad
 *		requesters, session ends of unknown sessions, bad holder rows.
 *
 * Every bad request must be answered ERROR with its DLmError (to nobody
 * when the requester cannot be answered) and change nothing: the picture
 * of every name the fuzzer uses, the batch, the counter and every
 * requester's waiter are compared before and after.  After every valid
 * event the invariants of core/README section 10 that can be seen from
 * outside are checked.  dlm_destroy must give every allocation back.
 *
 * Usage: test/fuzz_lm [calls [seed]]   (default 200000 calls)
 */
#define _POSIX_C_SOURCE 200809L

#include "dlock_lm.h"

#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK_CONTEXT fprintf(stderr, " (call %ld, %s)", call, what)
#define CHECK_REPORT_LIMIT 50
#include "test_check.h"
#include "test_util.h"

static long call;				/* the current call */
static const char *what = "";	/* what it was */

/* ------------------------------------------------------ memory, random */

static TestMem mem = TEST_MEM_INIT;
static uint64_t rng_state;

static uint64_t
rng(void)
{
	return test_rand(&rng_state);
}

static int
rnd(int n)
{
	return test_rnd(&rng_state, n);
}

/* ---------------------------------------------------------------- setup */

#define NREQ 16
#define MAX_NAME 200

/* Every name a valid request uses, sorted by strcmp. */
static const char *const uni[] = {
	"/a", "/a/b", "/a/b/c", "/a/c", "/b", "/b/d", "w", "x", "y", "z"
};
#define NUNI ((int) (sizeof(uni) / sizeof(uni[0])))
static const char *const keys[] = {NULL, NULL, "K1", "K2"};

static DLockManager *M;
static DLockTime NOW = 1000;
static int64_t sess_start[NREQ];
static int64_t cur_hi = 1;

/* answers of the current call */
static int	ev_answers;
static int	ev_to[64];
static DLmAnswer ev_ans[64];
static long stray;				/* answers to requesters out of range */
static long nstatus[DLOCK_STATUS_QUEUED + 1];	/* answers of valid calls */
static long nkind[16];			/* bad requests by fault */

static void
on_answer(void *arg, int rq, const DLmAnswer *a)
{
	(void) arg;
	if (a->status >= 0 && a->status <= DLOCK_STATUS_QUEUED)
		nstatus[a->status]++;
	if (ev_answers < 64)
	{
		ev_to[ev_answers] = rq;
		ev_ans[ev_answers] = *a;
		ev_ans[ev_answers].tokens = NULL;
		ev_ans[ev_answers].cycle = NULL;
	}
	ev_answers++;
	if (rq < 0 || rq >= NREQ)
		stray++;
	if (a->status == DLOCK_STATUS_DEADLOCK)
	{
		CHECK(a->ncycle >= 2 || (a->ncycle >= 1 && a->cycle != NULL));
		for (int i = 0; a->cycle && i < a->ncycle; i++)
			CHECK(a->cycle[i].lock != NULL);
	}
	if (a->status == DLOCK_STATUS_GRANTED && a->ntokens > 0)
	{
		CHECK(a->ntokens <= DLOCK_MAX_MULTI && a->tokens != NULL);
		for (int i = 0; a->tokens && i < a->ntokens && i < DLOCK_MAX_MULTI; i++)
			CHECK(a->tokens[i] > 0);
	}
}

/* The answers to rq in this call; the last one in *last. */
static int
answers_to(int rq, DLmAnswer *last)
{
	int			n = 0;

	for (int i = 0; i < ev_answers && i < 64; i++)
		if (ev_to[i] == rq)
		{
			n++;
			if (last)
				*last = ev_ans[i];
		}
	return n;
}

/* ------------------------------------------------------------- snapshot */

static char *snap;
static size_t snaplen,
			snapcap;

static void
sappend(const char *fmt,...)
	__attribute__((format(printf, 1, 2)));

static void
sappend(const char *fmt,...)
{
	va_list		ap;
	int			n;

	for (;;)
	{
		va_start(ap, fmt);
		n = vsnprintf(snap + snaplen, snapcap - snaplen, fmt, ap);
		va_end(ap);
		if (n >= 0 && (size_t) n < snapcap - snaplen)
			break;
		snapcap = snapcap * 2 + (size_t) n + 4096;
		snap = realloc(snap, snapcap);
		if (snap == NULL)
			abort();
	}
	snaplen += (size_t) n;
}

static void
sowner(const DLmOwner *o)
{
	if (o->key)
		sappend(" k=%s", o->key);
	else
		sappend(" s=%d/%" PRId64, (int) o->pid, o->session_start);
}

static void
sp(const DLmPersist *p)
{
	sappend(" p%d%d%d%d", p->stored, p->dirty, p->dead, p->listed);
}

/* Everything a bad request must leave as it was. */
static char *
snapshot(size_t *len)
{
	int64_t		hi = 0;
	bool		dirty;

	snaplen = 0;
	for (int i = 0; i < NUNI; i++)
	{
		DLmLock    *L = dlm_lookup(M, uni[i]);

		if (L == NULL)
			continue;
		sappend("L %s", L->name);
		for (int m = 0; m < DLOCK_NMODES; m++)
			sappend(" %d/%d/%d", (int) L->nheld[m], (int) L->line->nwaiting[m], (int) L->line->nconverting[m]);
		sappend("\n");
		for (DLmHolder *h = dlm_lock_holders(L); h; h = dlm_holder_next(h))
		{
			sappend(" H");
			sowner(h->owner);
			sappend(" m%d i%d c%d t%" PRId64 " st%" PRId64 " pid%d bs%" PRId64 " g%" PRId64
					" e%" PRId64 " ttl%" PRId64,
					h->mode, h->implied, (int) h->count, h->token, h->stored_token,
					(int) h->pid, h->backend_start, h->granted_at, h->expires_at, h->ttl_us);
			sp(&h->p);
			sappend("\n");
		}
		for (DLmWaiter *w = dlm_lock_queue(L); w; w = dlm_waiter_next(w))
		{
			sappend(" W");
			sowner(w->owner);
			sappend(" m%d i%d t%" PRId64 " r%d pid%d bs%" PRId64 " s%" PRId64 " to%" PRId64
					" ttl%" PRId64 " conv%" PRId64,
					w->mode, w->implied, w->ticket, w->requester, (int) w->pid,
					w->backend_start, w->since, w->timeout_at, w->ttl_us,
					w->holder ? w->holder->token : (int64_t) -1);
			sp(&w->p);
			sappend("\n");
		}
	}
	for (int r = 0; r < NREQ; r++)
	{
		DLmWaiter  *w = dlm_waiter_of(M, r);

		if (w)
			sappend("R %d %s %" PRId64 "\n", r, w->lock->name, w->ticket);
	}
	DLmHolder  *h;

	for (size_t h_i = 0; (h = dlm_touched_holder(M, h_i)) != NULL; h_i++)
	{
		sappend("TH %s %" PRId64, h->lock->name, h->token);
		sp(&h->p);
		sappend("\n");
	}
	DLmWaiter  *w;

	for (size_t wi = 0; (w = dlm_touched_waiter(M, wi)) != NULL; wi++)
	{
		sappend("TW %s %" PRId64, w->lock->name, w->ticket);
		sp(&w->p);
		sappend("\n");
	}
	DLmLock    *L;

	for (size_t L_i = 0; (L = dlm_notified_lock(M, L_i)) != NULL; L_i++)
		sappend("N %s\n", L->name);
	dirty = dlm_counter_dirty(M, &hi);
	sappend("C %d %" PRId64 " D %d X %" PRId64 " n %zu b %d\n", dirty, dirty ? hi : 0,
			dlm_batch_durable(M), dlm_next_expiry(M), dlm_nlocks(M), dlm_broken(M));
	*len = snaplen;
	return snap;
}

static char *before;
static size_t beforelen;

static void
take_before(void)
{
	size_t		n;
	char	   *s = snapshot(&n);

	free(before);
	before = malloc(n + 1);
	memcpy(before, s, n);
	before[n] = '\0';
	beforelen = n;
}

static void
check_unchanged(void)
{
	size_t		n;
	char	   *s = snapshot(&n);
	bool		same = n == beforelen && memcmp(s, before, n) == 0;

	CHECK(same);
	if (!same && failed <= 50)
		fprintf(stderr, "--- before\n%.*s--- after\n%.*s", (int) beforelen, before, (int) n, s);
}

/* ----------------------------------------------------------- invariants */

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

static void
check_inv(void)
{
	DLockTime	soonest = 0;
	size_t		present = 0;
	int64_t		hi;

	if (dlm_counter_dirty(M, &hi))
	{
		CHECK(hi >= cur_hi);
		cur_hi = hi;
	}
	for (int i = 0; i < NUNI; i++)
	{
		DLmLock    *L = dlm_lookup(M, uni[i]);
		int			nh[DLOCK_NMODES] = {0},
					nw[DLOCK_NMODES] = {0},
					nc[DLOCK_NMODES] = {0};
		int64_t		last_conv = 0,
					last_wait = 0;
		bool		in_waiters = false;

		if (L == NULL)
			continue;
		present++;
		for (DLmHolder *h = dlm_lock_holders(L); h; h = dlm_holder_next(h))
		{
			CHECK(h->lock == L && h->mode >= 0 && h->mode < DLOCK_NMODES && h->count >= 1);
			if (h->mode < 0 || h->mode >= DLOCK_NMODES)
				continue;
			nh[h->mode]++;
			CHECK(h->token > 0 && h->token < cur_hi);
			if (h->expires_at != 0 && (soonest == 0 || h->expires_at < soonest))
				soonest = h->expires_at;
			for (DLmHolder *g = dlm_holder_next(h); g; g = dlm_holder_next(g))
				CHECK(g->owner == h->owner || !conflict(g->mode, h->mode));
			if (h->implied)
			{
				int			want = 0;

				CHECK(h->expires_at == 0);
				for (int j = 0; j < NUNI; j++)
				{
					DLmLock    *D = dlm_lookup(M, uni[j]);

					if (D == NULL || !is_ancestor(uni[i], uni[j]))
						continue;
					for (DLmHolder *g = dlm_lock_holders(D); g; g = dlm_holder_next(g))
						if (!g->implied && g->owner == h->owner &&
							dlock_intention_mode(g->mode) == h->mode)
							want++;
				}
				CHECK(h->count == want);
			}
		}
		for (int m = 0; m < DLOCK_NMODES; m++)
			CHECK(L->nheld[m] == nh[m]);
		for (DLmWaiter *w = dlm_lock_queue(L); w; w = dlm_waiter_next(w))
		{
			CHECK(w->lock == L && w->mode >= 0 && w->mode < DLOCK_NMODES);
			if (w->mode < 0 || w->mode >= DLOCK_NMODES)
				continue;
			CHECK(w->ticket > 0 && w->ticket < cur_hi);
			CHECK(w->requester >= 0 && w->requester < NREQ);
			if (w->holder)
			{
				CHECK(!in_waiters);
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
			CHECK(L->line->nwaiting[m] == nw[m] && L->line->nconverting[m] == nc[m]);
	}
	CHECK(dlm_next_expiry(M) == soonest);
	CHECK(dlm_nlocks(M) >= present);
	CHECK(!dlm_broken(M));
}

/* ------------------------------------------------------------- requests */

static bool
busy(int r)
{
	return dlm_waiter_of(M, r) != NULL;
}

static int
idle_requester(void)
{
	for (int tries = 0; tries < 4 * NREQ; tries++)
	{
		int			r = rnd(NREQ);

		if (!busy(r))
			return r;
	}
	return -1;
}

static const char *
uname(void)
{
	return uni[rnd(NUNI)];
}

/* A valid request of idle requester r (names points to room for 4). */
static void
valid_request(DLmRequest *q, int r, const char **names)
{
	static const DLockOp ops[] = {
		DLOCK_OP_ACQUIRE, DLOCK_OP_ACQUIRE, DLOCK_OP_ACQUIRE, DLOCK_OP_TRY,
		DLOCK_OP_RELEASE, DLOCK_OP_RELEASE, DLOCK_OP_RENEW, DLOCK_OP_CONVERT,
		DLOCK_OP_CONVERT, DLOCK_OP_RELEASE_ALL, DLOCK_OP_ACQUIRE_ALL, DLOCK_OP_ACQUIRE_ALL
	};

	memset(q, 0, sizeof(*q));
	q->op = ops[rnd((int) (sizeof(ops) / sizeof(ops[0])))];
	q->requester = r;
	q->owner_key = keys[rnd(4)];
	q->pid = 100 + r;
	q->session_start = sess_start[r];
	q->mode = rnd(DLOCK_NMODES);
	q->names = names;
	q->nnames = 1;
	names[0] = uname();
	q->ttl_us = rnd(3) == 0 ? 1 + rnd(300) : 0;
	q->max_ttl_us = q->op == DLOCK_OP_RENEW && rnd(2) ? 1 + rnd(200) : 0;
	q->timeout_at = rnd(4) == 0 ? NOW + rnd(1000) : 0;
	if (q->op == DLOCK_OP_ACQUIRE_ALL)
	{
		int			k = 0;

		for (int i = rnd(NUNI); i < NUNI && k < 4; i += 1 + rnd(3))
			names[k++] = uni[i];
		q->nnames = k;
	}
	else if (q->op == DLOCK_OP_RELEASE_ALL)
	{
		q->names = NULL;
		q->nnames = 0;
	}
	if ((q->op == DLOCK_OP_RELEASE || q->op == DLOCK_OP_RENEW) && rnd(10) == 0)
		q->requester = DLM_NOBODY;
}

static void
begin(const char *w)
{
	call++;
	what = w;
	ev_answers = 0;
}

static void
after_valid(void)
{
	check_inv();
	if (rnd(5) != 0)
		dlm_settle(M);
}

static void
do_valid_request(void)
{
	DLmRequest	q;
	const char *names[4];
	int			r = idle_requester();
	DLmError	err;
	DLmAnswer	last;
	int			n;

	if (r < 0)
		return;
	valid_request(&q, r, names);
	begin("valid request");
	err = dlm_request(M, &q, NOW);
	CHECK(err == DLM_OK);
	if (q.requester >= 0)
	{
		n = answers_to(r, &last);
		CHECK(n >= 1);
		if (n >= 1 && last.status == DLOCK_STATUS_ERROR)
			CHECK(last.error == DLM_ERR_CONVERSION_WAITING);
		if (n >= 1 && (last.status == DLOCK_STATUS_GRANTED || last.status == DLOCK_STATUS_QUEUED))
			CHECK(last.token > 0);
	}
	else
		CHECK(answers_to(DLM_NOBODY, NULL) == 0);
	CHECK(stray == 0);
	after_valid();
}

/* ---------------------------------------------------------------- bad */

#define E(x) (1u << (x))
#define ANY_ERROR (E(DLM_ERR_BAD_REQUEST) | E(DLM_ERR_BAD_NAME) | E(DLM_ERR_BAD_OWNER) | \
				   E(DLM_ERR_NOT_SORTED) | E(DLM_ERR_CONVERSION_WAITING))

static char longname[2 * MAX_NAME + 2];
static char deepname[2 * (DLOCK_MAX_PATH_DEPTH + 1) + 1];
static char longkey[1001];
static char many[DLOCK_MAX_MULTI + 1][16];

static const char *
bad_name(void)
{
	static const char *const fixed[] = {
		"", "/", "/a/", "//a", "/a//b", "/a/b/", "//", "/x///y"
	};
	int			k = rnd(11);

	if (k < 8)
		return fixed[k];
	if (k == 8)
		return deepname;		/* 65 segments */
	/* too long: MAX_NAME + 1 .. 2 * MAX_NAME bytes */
	{
		int			len = MAX_NAME + 1 + rnd(MAX_NAME);

		memset(longname, 'n', (size_t) len);
		longname[len] = '\0';
		if (k == 10)
			longname[0] = '/';
		return longname;
	}
}

static const char *
bad_key(void)
{
	static const char *const fixed[] = {"", "a\001b", "\x7f", "tab\there", "nl\n", "\x1b[0m"};
	int			k = rnd(8);

	if (k < 6)
		return fixed[k];
	memset(longkey, 'k', sizeof(longkey) - 1);
	longkey[k == 6 ? DLOCK_MAX_OWNER_LEN + 1 : (int) sizeof(longkey) - 1] = '\0';
	return longkey;
}

static bool
op_has_mode(int op)
{
	return op == DLOCK_OP_ACQUIRE || op == DLOCK_OP_TRY ||
		op == DLOCK_OP_ACQUIRE_ALL || op == DLOCK_OP_CONVERT;
}

/*
 * One bad request: a valid one with one fault.  *allowed: the errors it
 * may be answered with; *answerable: false when nobody can be answered.
 */
static bool
make_bad(DLmRequest *q, const char **names, unsigned *allowed, bool *answerable,
		 const char **kind)
{
	int			r = idle_requester();
	int			fault = rnd(14);

	nkind[fault]++;

	if (r < 0)
		return false;			/* everybody waits: one fault at a time */
	valid_request(q, r, names);
	q->requester = r;
	if (q->op == DLOCK_OP_RELEASE_ALL && fault != 0 && fault != 2 && fault != 3 && fault != 10)
	{
		/* the fault needs names: make it a release of one */
		q->op = DLOCK_OP_RELEASE;
		q->names = names;
		q->nnames = 1;
		names[0] = uname();
	}
	*answerable = true;
	switch (fault)
	{
		case 0:
			{
				static const int badops[] = {0, 9, 10, 100, -1, INT_MAX, INT_MIN};

				q->op = (DLockOp) (rnd(8) < 7 ? badops[rnd(7)] : (int) rng());
				if (q->op >= DLOCK_OP_ACQUIRE && q->op <= DLOCK_OP_PROCLAIM)
					q->op = DLOCK_OP_NONE;
				*allowed = E(DLM_ERR_BAD_REQUEST);
				*kind = "unknown op";
				return true;
			}
		case 1:
			if (!op_has_mode(q->op))
				q->op = DLOCK_OP_ACQUIRE;
			q->mode = rnd(2) ? -1 - rnd(5) : DLOCK_NMODES + rnd(5);
			if (rnd(20) == 0)
				q->mode = rnd(2) ? INT_MAX : INT_MIN;
			*allowed = E(DLM_ERR_BAD_REQUEST);
			*kind = "bad mode";
			return true;
		case 2:
			{
				int			k = rnd(5);

				q->requester = k == 0 ? NREQ + rnd(100) : k == 1 ? -2 - rnd(100) :
					k == 2 ? INT_MAX : k == 3 ? INT_MIN : NREQ;
				*allowed = E(DLM_ERR_BAD_REQUEST);
				*answerable = false;
				*kind = "requester out of range";
				return true;
			}
		case 3:
			/* a requester whose request waits asks something else */
			for (int i = 0; i < NREQ; i++)
			{
				int			b = (i + rnd(NREQ)) % NREQ;

				if (busy(b))
				{
					q->requester = b;
					q->pid = 100 + b;
					q->session_start = sess_start[b];
					*allowed = E(DLM_ERR_BAD_REQUEST);
					*kind = "busy requester";
					return true;
				}
			}
			return false;
		case 4:
			/* nobody to answer or withdraw a request that may wait */
			q->op = rnd(3) == 0 ? DLOCK_OP_CONVERT : rnd(2) ? DLOCK_OP_ACQUIRE : DLOCK_OP_ACQUIRE_ALL;
			q->requester = DLM_NOBODY;
			*allowed = E(DLM_ERR_BAD_REQUEST);
			*answerable = false;
			*kind = "waiting request of nobody";
			return true;
		case 5:
			if (q->op == DLOCK_OP_RELEASE_ALL)
				q->op = DLOCK_OP_ACQUIRE;
			q->names = NULL;
			q->nnames = 1 + rnd(3);
			*allowed = E(DLM_ERR_BAD_REQUEST) | E(DLM_ERR_BAD_NAME);
			*kind = "names NULL";
			return true;
		case 6:
			if (q->op == DLOCK_OP_RELEASE_ALL)
				q->op = DLOCK_OP_RELEASE;
			names[rnd(q->nnames)] = NULL;
			*allowed = E(DLM_ERR_BAD_REQUEST) | E(DLM_ERR_BAD_NAME);
			*kind = "a NULL name";
			return true;
		case 7:
			if (q->op == DLOCK_OP_RELEASE_ALL)
				q->op = DLOCK_OP_RENEW;
			{
				int			k = rnd(4);

				if (k == 0)
					q->nnames = 0;
				else if (k == 1)
					q->nnames = -1 - rnd(100);
				else if (k == 2)
					q->nnames = INT_MIN;
				else
				{
					/* 65 distinct sorted names: too many for any op */
					for (int i = 0; i <= DLOCK_MAX_MULTI; i++)
						names[i] = many[i];
					q->nnames = DLOCK_MAX_MULTI + 1;
				}
			}
			*allowed = E(DLM_ERR_BAD_REQUEST);
			*kind = "bad name count";
			return true;
		case 8:
			if (q->op == DLOCK_OP_RELEASE_ALL)
				q->op = DLOCK_OP_TRY;
			names[0] = bad_name();
			if ((q->op == DLOCK_OP_ACQUIRE_ALL || q->op == DLOCK_OP_RELEASE) && rnd(2))
			{
				names[1] = "x";	/* sorted after every bad name */
				q->nnames = 2;
			}
			else
				q->nnames = 1;
			*allowed = E(DLM_ERR_BAD_NAME);
			*kind = "bad name";
			return true;
		case 9:
			q->op = DLOCK_OP_ACQUIRE_ALL;
			q->mode = rnd(DLOCK_NMODES);
			{
				int			k = rnd(4);

				if (k == 0)
				{
					names[0] = "x";
					names[1] = "w";
				}
				else if (k == 1)
				{
					names[0] = names[1] = uname();
				}
				else if (k == 2)
				{
					names[0] = "/a/b";
					names[1] = "/a";
				}
				else
				{
					names[0] = "/a";
					names[1] = "y";
					names[2] = "x";
				}
				q->nnames = k == 3 ? 3 : 2;
			}
			*allowed = E(DLM_ERR_NOT_SORTED);
			*kind = "acquire_all not sorted";
			return true;
		case 10:
			q->owner_key = bad_key();
			*allowed = E(DLM_ERR_BAD_OWNER);
			*kind = "bad owner key";
			return true;
		case 11:
			{
				static const DLockOp ttlops[] = {
					DLOCK_OP_ACQUIRE, DLOCK_OP_TRY, DLOCK_OP_ACQUIRE_ALL, DLOCK_OP_RENEW
				};

				if (q->op != DLOCK_OP_ACQUIRE_ALL)
				{
					q->op = ttlops[rnd(4)];
					if (q->op == DLOCK_OP_ACQUIRE_ALL)
						q->op = DLOCK_OP_ACQUIRE;
				}
				q->ttl_us = rnd(4) == 0 ? INT64_MIN : -1 - rnd(1000000);
			}
			*allowed = ANY_ERROR;
			*kind = "negative ttl";
			return true;
		case 12:
			q->op = DLOCK_OP_RENEW;
			q->max_ttl_us = -1 - rnd(1000);
			*allowed = ANY_ERROR;
			*kind = "negative max_ttl";
			return true;
		case 13:
			{
				/* several names where one is taken */
				static const DLockOp one[] = {
					DLOCK_OP_ACQUIRE, DLOCK_OP_TRY, DLOCK_OP_RENEW, DLOCK_OP_CONVERT
				};

				q->op = one[rnd(4)];
				names[0] = "w";
				names[1] = "x";
				q->nnames = 2;
			}
			*allowed = E(DLM_ERR_BAD_REQUEST);
			*kind = "several names for a one-name op";
			return true;
		default:
			return false;
	}
}

static void
do_bad_request(void)
{
	DLmRequest	q;
	const char *names[DLOCK_MAX_MULTI + 1];
	unsigned	allowed = 0;
	bool		answerable = true;
	const char *kind = "";
	DLmError	err;
	DLmAnswer	last;
	long		stray0 = stray;

	if (!make_bad(&q, names, &allowed, &answerable, &kind))
		return;
	take_before();
	begin(kind);
	err = dlm_request(M, &q, NOW);
	CHECK(err != DLM_OK && err <= DLM_ERR_NO_MEMORY && (allowed & E(err)));
	if (answerable)
	{
		CHECK(ev_answers == 1);
		CHECK(answers_to(q.requester, &last) == 1);
		if (answers_to(q.requester, &last) == 1)
		{
			CHECK(last.status == DLOCK_STATUS_ERROR);
			CHECK(last.error == err);
			if (!(allowed & E(last.error)) && failed <= 50)
				fprintf(stderr, "  %s: error %d\n", kind, (int) last.error);
		}
	}
	else
	{
		/* nobody, or the number it gave, with the error */
		CHECK(ev_answers <= 1);
		if (ev_answers == 1)
			CHECK(ev_ans[0].status == DLOCK_STATUS_ERROR && ev_to[0] == q.requester);
		stray = stray0;
	}
	check_unchanged();
}

/* A NULL request. */
static void
do_null_request(void)
{
	take_before();
	begin("NULL request");
	CHECK(dlm_request(M, NULL, NOW) != DLM_OK);
	CHECK(ev_answers == 0);
	check_unchanged();
}

/* Withdraw lists with bad requesters (and good ones). */
static void
do_withdraw(void)
{
	int			list[8];
	int			n = rnd(6);
	int			nvalid = 0;
	bool		null_list = rnd(30) == 0;

	for (int i = 0; i < n; i++)
	{
		int			k = rnd(6);

		if (k < 2)
		{
			list[i] = rnd(NREQ);
			/* each requester once: a second CANCELED is no matter, but keep it plain */
			for (int j = 0; j < i; j++)
				if (list[j] == list[i])
					list[i] = -7;
			if (list[i] >= 0)
				nvalid++;
		}
		else
			list[i] = k == 2 ? -1 - rnd(5) : k == 3 ? NREQ + rnd(5) : k == 4 ? INT_MAX : INT_MIN;
	}
	if (null_list)
		nvalid = 0;
	if (nvalid == 0)
		take_before();
	begin(null_list ? "withdraw NULL list" : "withdraw");
	dlm_withdraw(M, null_list ? NULL : list, null_list ? n : (rnd(20) == 0 ? -n : n), NOW);
	if (nvalid == 0)
	{
		CHECK(ev_answers == 0);
		check_unchanged();
	}
	else
	{
		for (int i = 0; i < n; i++)
			if (list[i] >= 0 && list[i] < NREQ && answers_to(list[i], NULL) > 0)
			{
				DLmAnswer	last;

				/* CANCELED, never granted on the way */
				(void) answers_to(list[i], &last);
				CHECK(last.status == DLOCK_STATUS_CANCELED);
				CHECK(!busy(list[i]));
			}
		CHECK(stray == 0);
		after_valid();
	}
}

/* Session ends: unknown sessions change nothing; real ones end. */
static void
do_session_end(void)
{
	if (rnd(2))
	{
		int32_t		pid = rnd(2) ? 5000 + rnd(1000) : 100 + rnd(NREQ);
		int64_t		start = rnd(2) ? (int64_t) rng() : 12345;
		int			k = rnd(4);
		int			rq = k == 0 ? DLM_NOBODY : k == 1 ? NREQ + rnd(10) : k == 2 ? INT_MIN : idle_requester();

		if (rq >= 0 && rq < NREQ && busy(rq))
			rq = DLM_NOBODY;
		if (pid >= 100 && pid < 100 + NREQ && start == sess_start[pid - 100])
			start++;
		take_before();
		begin("session end of an unknown session");
		dlm_session_end(M, pid, start, rq, NOW);
		CHECK(ev_answers == 0);
		check_unchanged();
	}
	else
	{
		int			r = rnd(NREQ);

		begin("session end");
		dlm_session_end(M, 100 + r, sess_start[r], r, NOW);
		CHECK(answers_to(r, NULL) == 0);
		CHECK(!busy(r));
		sess_start[r] += 1000;
		after_valid();
	}
}

static void
do_expire(void)
{
	int			max = rnd(9) - 3;
	int			n;

	if (rnd(3) == 0 && dlm_next_expiry(M) > NOW)
		NOW = dlm_next_expiry(M);
	begin("expire");
	n = dlm_expire(M, NOW, max);
	CHECK(n >= 0 && n <= (max > 0 ? max : 0));
	CHECK(stray == 0);
	after_valid();
}

/* Bad holder rows into a fresh manager: refused, nothing loaded. */
static void
fuzz_load(DLmConfig *cfg, int rows)
{
	DLockManager *m = dlm_create(cfg);
	DLmHolderRow r;

	CHECK(m != NULL);
	if (m == NULL)
		return;
	dlm_set_counter(m, 1000);
	for (int i = 0; i < rows; i++)
	{
		const char *names[1];
		int			fault = rnd(4);
		DLmError	err;

		memset(&r, 0, sizeof(r));
		r.name = uname();
		r.owner_key = keys[rnd(4)];
		r.pid = 100 + rnd(NREQ);
		r.backend_start = 7;
		r.mode = rnd(DLOCK_NMODES);
		r.count = 1;
		r.token = 1 + rnd(999);
		names[0] = r.name;
		if (fault == 0)
		{
			r.name = rnd(4) ? bad_name() : NULL;
			/* too long is not bad here: a stored name loads whatever the limit now */
			if (r.name && dlock_check_name(r.name, strlen(r.name), strlen(r.name)) == DLOCK_CHECK_OK)
				r.name = NULL;
		}
		else if (fault == 1)
			r.owner_key = bad_key();
		else if (fault == 2)
			r.mode = rnd(2) ? -1 - rnd(5) : DLOCK_NMODES + rnd(5);
		else
			r.implied = true, r.mode = rnd(2) ? -1 : DLOCK_NMODES;
		call++;
		what = "bad holder row";
		err = dlm_load_holder(m, &r);
		CHECK(err != DLM_OK);
		CHECK(dlm_nlocks(m) == 0);
		CHECK(dlm_lookup(m, names[0]) == NULL);
		CHECK(!dlm_broken(m));
	}
	dlm_destroy(m);
}

int
main(int argc, char **argv)
{
	long		calls = argc > 1 ? atol(argv[1]) : 200000;
	uint64_t	seed = argc > 2 ? strtoull(argv[2], NULL, 0) : 20240601;
	DLmConfig	cfg;
	long		nbad = 0,
				nvalid = 0;

	rng_state = seed;
	for (int i = 0; i <= DLOCK_MAX_MULTI; i++)
		snprintf(many[i], sizeof(many[i]), "m%03d", i);
	for (int i = 0; i <= DLOCK_MAX_PATH_DEPTH; i++)
		memcpy(deepname + 2 * i, "/d", 2);
	deepname[2 * (DLOCK_MAX_PATH_DEPTH + 1)] = '\0';
	for (int r = 0; r < NREQ; r++)
		sess_start[r] = 1000000 + r;

	memset(&cfg, 0, sizeof(cfg));
	cfg.alloc.alloc = test_mem_alloc;
	cfg.alloc.free = test_mem_free;
	cfg.alloc.arg = &mem;
	cfg.seed[0] = seed * 31 + 1;
	cfg.seed[1] = seed ^ 0x5555;
	cfg.nrequesters = NREQ;
	cfg.max_name_len = MAX_NAME;
	cfg.ticket_reserve = 50;
	cfg.answer = on_answer;

	/* a configuration the manager cannot work with is refused */
	{
		DLmConfig	bad;

		what = "bad configuration";
		CHECK(dlm_create(NULL) == NULL);
		bad = cfg, bad.alloc.alloc = NULL;
		CHECK(dlm_create(&bad) == NULL);
		bad = cfg, bad.answer = NULL;
		CHECK(dlm_create(&bad) == NULL);
		bad = cfg, bad.nrequesters = -1;
		CHECK(dlm_create(&bad) == NULL);
		bad = cfg, bad.max_name_len = 0;
		CHECK(dlm_create(&bad) == NULL);
		bad = cfg, bad.ticket_reserve = 0;
		CHECK(dlm_create(&bad) == NULL);
		bad = cfg, bad.queue_row_delay_us = -1;
		CHECK(dlm_create(&bad) == NULL);
		bad = cfg, bad.max_objects = -1;
		CHECK(dlm_create(&bad) == NULL);
		bad = cfg, bad.max_parts = -1;
		CHECK(dlm_create(&bad) == NULL);
		CHECK(mem.live == 0);
	}

	fuzz_load(&cfg, 2000);
	CHECK(mem.live == 0);

	M = dlm_create(&cfg);
	CHECK(M != NULL);
	if (M == NULL)
		return 1;
	dlm_set_counter(M, 1);
	while (call < calls)
	{
		int			k = rnd(100);

		NOW += rnd(20);
		if (k < 45)
		{
			do_bad_request();
			nbad++;
		}
		else if (k < 46)
			do_null_request();
		else if (k < 80)
		{
			do_valid_request();
			nvalid++;
		}
		else if (k < 88)
			do_withdraw();
		else if (k < 94)
			do_session_end();
		else
			do_expire();
	}
	dlm_destroy(M);
	CHECK(mem.live == 0);
	CHECK(mem.bad_free == 0);
	free(before);
	free(snap);
	printf("fuzz-lm: %ld calls (%ld bad requests, %ld valid), seed %" PRIu64 "\n",
		   call, nbad, nvalid, seed);
	printf("fuzz-lm: answers by status (all calls):");
	for (int i = 1; i <= DLOCK_STATUS_QUEUED; i++)
		printf(" %d:%ld", i, nstatus[i]);
	printf("\nfuzz-lm: bad requests by fault:");
	for (int i = 0; i < 14; i++)
		printf(" %ld", nkind[i]);
	printf("\nfuzz-lm checks: %d passed, %d failed\n", passed, failed);
	/* the run is one test in make check's count */
	printf("fuzz-lm: %d passed, %d failed\n", failed == 0, failed != 0);
	return failed == 0 ? 0 : 1;
}
