/* SPDX-License-Identifier: PostgreSQL */
/*
 * test_model.c
 *		Random event sequences through the lock manager (dlock_lm*.c) and the
 *		reference model (model.c), compared after every event: the answers
 *		each requester got (the fields its status defines), every name's
 *		holders and line, the locks announced, the names left in the picture
 *		after dlm_settle, the next expiry, who waits; the invariants of
 *		core/README section 10 are checked on the core's picture, deadlock
 *		cycles against the model's waits-for graph, and memory after
 *		dlm_destroy.  A mismatch is shrunk (delta debugging, each try in a
 *		child process) and printed as C code that compiles as it is.
 *
 *		Then the service (core/README 18.9): random batches through
 *		dlock_service.c over the fake store and through model_batch,
 *		compared after every batch; a mismatch prints its seed and batch.
 *
 *		test/test_model [options] [events] [seed]	default 100000 events, seed 1
 *		  -b n		service batches (default events / 2; also DLOCK_MODEL_BATCHES)
 *		  -S seed	that service sequence alone (no lock manager sequences)
 *		  -m		the model alone, its invariants checked (no core)
 *		  -F		no child process per sequence (for a debugger; no
 *					shrinking)
 *		  -q		print less
 *		  -O name=0|1	a reading of the README (model.h; "-O list")
 *		  -K spec	broken invariants the model's picture shares (the
 *					README's own: a grantable request left waiting, two
 *					owners holding conflicting modes) do not fail
 *
 * Sequences are 200-2000 events over the names a, b, c, /p, /p/q, /p/q/r,
 * /p/s, the owner keys k1 and k2 and up to four sessions (requester i is
 * session i; sessions end and come back with a new start).  One sequence
 * in four runs with a fresh hash seed.  The last line is
 * "model: N passed, M failed" (sequences, the service's included).
 */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE				/* MAP_ANONYMOUS */

#include "dlock_lm.h"
#include "model.h"
#include "test_util.h"

#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---------------------------------------------------------------- */
/* The world: names, owner keys, sessions */

static const char *const NAMES[] = {"a", "b", "c", "/p", "/p/q", "/p/q/r", "/p/s"};
#define NNAMES ((int) (sizeof(NAMES) / sizeof(NAMES[0])))
static const char *const KEYS[] = {"k1", "k2"};
#define NKEYS 2
#define NREQ 4					/* requesters: one per session */
#define MAX_NAME_LEN 64
#define TICKET_RESERVE 16
#define FIRST_TICKET 1
#define MAXPER 64				/* holders or waiters of one name */
#define MIRROR_MAX 2048			/* rows of the store mirror */
#define UNIT 1000				/* microseconds: the clock's step */

/* Bad input, one defect per request. */
static const char *const BAD_NAMES[] = {"", "/", "/p/", "//x", "/p//q"};
/* A leader's values (16): short ones, the longest allowed, one too long. */
static char VALUE_MAX[DLOCK_MAX_VALUE_LEN + 1];
static char VALUE_OVER[DLOCK_MAX_VALUE_LEN + 2];
static const char *const VALUES[] = {"v1", "v2", "", "host:5432", VALUE_MAX, "v1", "v2", VALUE_OVER};
#define NVALUES ((int) (sizeof(VALUES) / sizeof(VALUES[0])))
static const char *const BAD_KEYS[] = {"", "k\001"};

/*
 * The core's queue_row_delay_us for the sequence being run: a waiter's row
 * is stored once it has waited this long (0 in two sequences of three).
 */
static int64_t queue_row_delay = 0;

/* 13: the limits of the sequence being run (none in four sequences of five) */
static int64_t max_objects = 0;
static int	max_parts = 0;

static bool is_ancestor[16][16];	/* [a][d]: NAMES[a] is a proper ancestor of NAMES[d] */

/* ---------------------------------------------------------------- */
/* Events */

typedef enum EvKind
{
	EV_REQUEST,
	EV_WITHDRAW,
	EV_SESSION_END,
	EV_EXPIRE
} EvKind;

typedef struct Event
{
	EvKind		kind;
	DLockTime	now;
	/* request; session end (pid, start, requester) */
	DLockOp		op;
	int			requester;
	const char *key;			/* a static string or NULL */
	int32_t		pid;
	int64_t		start;
	int			mode;
	int			nnames;
	const char *names[4];
	int64_t		ttl;
	int64_t		max_ttl;
	uint32_t	role;			/* 12: who asks, and ... */
	bool		any_role;		/* ... whether it may act for any role */
	int64_t		role_max;		/* 13: its quotas */
	int64_t		owner_max;
	int64_t		role_max_bytes;
	int64_t		owner_max_bytes;
	bool		keep;			/* keep_place (14) */
	int32_t		capacity;		/* a semaphore request (15) */
	int32_t		permits;
	bool		election;		/* a campaign (16) */
	const char *value;			/* a campaign's or a proclaim's, static */
	/* withdraw */
	int			nreqs;
	int			reqs[NREQ];
	/* expire */
	int			max;
} Event;

/* ---------------------------------------------------------------- */
/* Options */

static bool model_only;
static bool no_fork;
static bool quiet;
static bool skip_spec;			/* -K spec */
static ModelOptions mopt;

/* Coverage, shared with the children that run the sequences. */
typedef struct Stats
{
	long		status[16];		/* the model's answers by status */
	long		expired;		/* leases released by expire */
	long		announced;
	long		group_grants;	/* answers with several tokens */
	long		deadlock_steps;
	long		events_run;		/* events fed to both (or skipped in none) */
	long		keep_requests;	/* requests with keep_place (14) */
	long		semaphore_requests;	/* requests for permits (15) */
	long		leader_changes; /* leaders or values that changed (16) */
	long		spec_waiting;	/* -K spec: grantable requests left waiting */
	long		spec_conflicts; /* -K spec: conflicting holders */
} Stats;

static Stats *stats;

static const struct
{
	const char *name;
	size_t		off;
}			option_names[] = {
#define OPT(f) {#f, offsetof(ModelOptions, f)}
	OPT(lone_root_path_group),
	OPT(upconvert_resets_announced),
	OPT(renew_sets_ttl),
	OPT(reentrant_sets_ttl),
#undef OPT
};

/* ---------------------------------------------------------------- */
/* The run: a core and a model fed the same events */

typedef struct CoreStep
{
	bool		waiter_keyed;
	int32_t		waiter_pid;
	char		lock[MAX_NAME_LEN + 1];
	bool		held;
	bool		blocker_keyed;
	int32_t		blocker_pid;
} CoreStep;

typedef struct CoreAnswer
{
	int			requester;
	DLmAnswer	a;				/* pointers cleared */
	int64_t		tokens[DLOCK_MAX_MULTI];
	int			ncycle;
	int			cycle_off;		/* into Run.steps */
} CoreAnswer;

typedef struct Run
{
	DLockManager *core;
	Model	   *model;
	CoreAnswer *ans;
	int			nans,
				cans;
	CoreStep   *steps;
	int			nsteps,
				csteps;
	int			nobody_answers;
	TestMem		mem;			/* the core's allocations */
	int64_t		stored_hi;
	/* the store as the adapter would keep it from the touched lists */
	int64_t		rows_h[MIRROR_MAX];	/* stored tokens of holders */
	int			nrows_h;
	int64_t		rows_w[MIRROR_MAX];	/* tickets of stored waiters */
	int			nrows_w;
	int64_t		kept_w[MIRROR_MAX];	/* tickets of waiters that were kept places */
	int			nkept_w;
	bool		mirror_overflow;
	int64_t		max_token[16];	/* per name: the largest token seen */
	int64_t		prev_tokens[16][MAXPER];
	int			nprev[16];
	char		diff[8192];
	int			category;		/* of the first mismatch */
	bool		born_grantable[NREQ];	/* grantable (6) when it queued */
	long		events;
	long		by_status[16];	/* this run's answers, for dlm_stats */
	long		expired;		/* leases and kept places run out */
} Run;

enum
{
	CAT_NONE = 0,
	CAT_ANSWER,
	CAT_NOTIFY,
	CAT_PICTURE,
	CAT_INVARIANT,
	CAT_COUNTER,
	CAT_MEMORY,
	CAT_CRASH,
	CAT_MODEL,
	CAT_SPEC,
	CAT_STORE
};

static const char *const category_names[] = {
	"none", "answers", "announcements", "picture", "invariant", "counter",
	"memory", "crash", "model", "README (spec)", "store rows"
};

static void
fail(Run *run, int category, const char *fmt,...)
{
	va_list		ap;
	size_t		len = strlen(run->diff);

	if (run->category == CAT_NONE)
		run->category = category;
	if (len + 200 >= sizeof(run->diff))
		return;
	va_start(ap, fmt);
	vsnprintf(run->diff + len, sizeof(run->diff) - len, fmt, ap);
	va_end(ap);
	len = strlen(run->diff);
	if (len + 1 < sizeof(run->diff))
	{
		run->diff[len] = '\n';
		run->diff[len + 1] = '\0';
	}
}

/* A free of the wrong size (test_util.c) is a mismatch of its own. */
static void
on_bad_free(void *arg, size_t allocated, size_t given)
{
	fail((Run *) arg, CAT_MEMORY, "free of %zu bytes given size %zu", allocated, given);
}

static void
on_answer(void *arg, int requester, const DLmAnswer *answer)
{
	Run		   *run = arg;
	CoreAnswer *c;

	if (requester < 0 || requester >= NREQ)
	{
		run->nobody_answers++;
		return;
	}
	if (run->nans >= run->cans)
	{
		run->cans = run->cans ? run->cans * 2 : 16;
		run->ans = realloc(run->ans, sizeof(CoreAnswer) * (size_t) run->cans);
	}
	c = &run->ans[run->nans++];
	memset(c, 0, sizeof(*c));
	c->requester = requester;
	c->a = *answer;
	c->a.tokens = NULL;
	c->a.cycle = NULL;
	if (answer->ntokens > 0 && answer->tokens != NULL)
		memcpy(c->tokens, answer->tokens,
			   sizeof(int64_t) * (size_t) (answer->ntokens > DLOCK_MAX_MULTI ?
										   DLOCK_MAX_MULTI : answer->ntokens));
	c->ncycle = answer->ncycle;
	c->cycle_off = run->nsteps;
	for (int i = 0; i < answer->ncycle && answer->cycle != NULL; i++)
	{
		CoreStep   *s;

		if (run->nsteps >= run->csteps)
		{
			run->csteps = run->csteps ? run->csteps * 2 : 16;
			run->steps = realloc(run->steps, sizeof(CoreStep) * (size_t) run->csteps);
		}
		s = &run->steps[run->nsteps++];
		s->waiter_keyed = answer->cycle[i].waiter_keyed;
		s->waiter_pid = answer->cycle[i].waiter_pid;
		snprintf(s->lock, sizeof(s->lock), "%s",
				 answer->cycle[i].lock ? answer->cycle[i].lock : "(null)");
		s->held = answer->cycle[i].held;
		s->blocker_keyed = answer->cycle[i].blocker_keyed;
		s->blocker_pid = answer->cycle[i].blocker_pid;
	}
}

static void
run_init(Run *run, const uint64_t hash_seed[2])
{
	memset(run, 0, sizeof(*run));
	run->stored_hi = FIRST_TICKET;
	if (!model_only)
	{
		DLmConfig	cfg;

		memset(&cfg, 0, sizeof(cfg));
		run->mem = (TestMem) TEST_MEM_INIT;
		run->mem.on_bad_free = on_bad_free;
		run->mem.on_bad_free_arg = run;
		cfg.alloc.alloc = test_mem_alloc;
		cfg.alloc.free = test_mem_free;
		cfg.alloc.arg = &run->mem;
		cfg.seed[0] = hash_seed[0];
		cfg.seed[1] = hash_seed[1];
		cfg.nrequesters = NREQ;
		cfg.max_name_len = MAX_NAME_LEN;
		cfg.ticket_reserve = TICKET_RESERVE;
		cfg.queue_row_delay_us = queue_row_delay;
		cfg.max_objects = max_objects;
		cfg.max_parts = max_parts;
		cfg.answer = on_answer;
		cfg.answer_arg = run;
		run->core = dlm_create(&cfg);
		if (run->core == NULL)
		{
			fprintf(stderr, "test_model: dlm_create failed\n");
			exit(2);
		}
		dlm_set_counter(run->core, FIRST_TICKET);
	}
	run->model = model_create(NREQ, FIRST_TICKET, MAX_NAME_LEN, &mopt);
	model_set_limits(run->model, max_objects, max_parts);
}

/* The manager's statistics agree with the answers it gave (the model's, which match). */
static void
check_stats(Run *run)
{
	const DLmStats *st = dlm_stats(run->core);
	const long *n = run->by_status;
	int64_t		waited = 0;

	for (int b = 0; b < DLM_WAIT_BUCKETS; b++)
		waited += st->wait_buckets[b];
	if (st->grants != n[DLOCK_STATUS_GRANTED] || st->deadlocks != n[DLOCK_STATUS_DEADLOCK] ||
		st->refused != n[DLOCK_STATUS_REFUSED] || st->errors != n[DLOCK_STATUS_ERROR] ||
		st->releases != n[DLOCK_STATUS_RELEASED] || st->renewals != n[DLOCK_STATUS_RENEWED] ||
		st->waits > n[DLOCK_STATUS_QUEUED] || st->expiries > run->expired ||
		st->withdrawn > n[DLOCK_STATUS_CANCELED] + n[DLOCK_STATUS_WITHDRAWN] ||
		st->kept > n[DLOCK_STATUS_KEPT] || st->grants_immediate > st->grants ||
		waited != st->grants - st->grants_immediate || waited > st->waits ||
		st->conversions > st->grants)
		fail(run, CAT_COUNTER, "dlm_stats disagree with the answers: grants %lld/%ld "
			 "(immediate %lld, waited %lld), deadlocks %lld/%ld, refused %lld/%ld, errors %lld/%ld, "
			 "releases %lld/%ld, renewals %lld/%ld, waits %lld <= %ld, expiries %lld <= %ld",
			 (long long) st->grants, n[DLOCK_STATUS_GRANTED], (long long) st->grants_immediate,
			 (long long) waited, (long long) st->deadlocks, n[DLOCK_STATUS_DEADLOCK],
			 (long long) st->refused, n[DLOCK_STATUS_REFUSED], (long long) st->errors,
			 n[DLOCK_STATUS_ERROR], (long long) st->releases, n[DLOCK_STATUS_RELEASED],
			 (long long) st->renewals, n[DLOCK_STATUS_RENEWED], (long long) st->waits,
			 n[DLOCK_STATUS_QUEUED], (long long) st->expiries, run->expired);
}

static void
run_done(Run *run)
{
	if (run->core)
	{
		check_stats(run);
		dlm_destroy(run->core);
		if (run->mem.live_bytes != 0 || run->mem.live != 0)
			fail(run, CAT_MEMORY, "after dlm_destroy: %ld bytes in %ld blocks not freed",
				 run->mem.live_bytes, run->mem.live);
	}
	model_destroy(run->model);
	free(run->ans);
	free(run->steps);
	run->core = NULL;
	run->model = NULL;
	run->ans = NULL;
	run->steps = NULL;
}

/* ---------------------------------------------------------------- */
/* Pictures: one name's holders and line, from the core or the model */

typedef struct PHolder
{
	const char *key;
	int32_t		pid;
	int64_t		start;
	int			mode;
	bool		implied;
	int32_t		count;
	int64_t		token;
	DLockTime	expires_at;
	uint32_t	role;
	int32_t		kept;
	int32_t		permits;
	const char *value;
} PHolder;

typedef struct PWaiter
{
	const char *key;
	int32_t		pid;
	int64_t		start;
	int			mode;
	bool		implied;
	bool		conv;
	int64_t		ticket;
	int			requester;
	DLockTime	kept_until;
	int32_t		permits;
} PWaiter;

typedef struct Pic
{
	bool		present[16];
	int32_t		capacity[16];	/* a semaphore's (15); 0: a lock */
	int			nh[16];
	PHolder		h[16][MAXPER];
	int			nw[16];
	PWaiter		w[16][MAXPER];
	bool		overflow;
} Pic;

static bool
same_owner(const char *k1, int32_t p1, int64_t s1, const char *k2, int32_t p2, int64_t s2)
{
	if (k1 != NULL || k2 != NULL)
		return k1 != NULL && k2 != NULL && strcmp(k1, k2) == 0;
	return p1 == p2 && s1 == s2;
}

static int
cmp_owner(const char *k1, int32_t p1, int64_t s1, const char *k2, int32_t p2, int64_t s2)
{
	if (k1 != NULL && k2 != NULL)
		return strcmp(k1, k2);
	if (k1 != NULL)
		return -1;
	if (k2 != NULL)
		return 1;
	if (p1 != p2)
		return p1 < p2 ? -1 : 1;
	if (s1 != s2)
		return s1 < s2 ? -1 : 1;
	return 0;
}

static int
cmp_pholder(const void *a, const void *b)
{
	const PHolder *x = a,
			   *y = b;
	int			c = cmp_owner(x->key, x->pid, x->start, y->key, y->pid, y->start);

	if (c != 0)
		return c;
	if (x->implied != y->implied)
		return x->implied ? 1 : -1;
	return x->mode - y->mode;
}

static void
pic_clear(Pic *p)
{
	memset(p->present, 0, sizeof(p->present));
	memset(p->capacity, 0, sizeof(p->capacity));
	memset(p->nh, 0, sizeof(p->nh));
	memset(p->nw, 0, sizeof(p->nw));
	p->overflow = false;
}

static void
pic_from_model(const Model *m, Pic *p)
{
	ModelHolderView hv[MAXPER];
	ModelWaiterView wv[MAXPER];

	pic_clear(p);
	for (int n = 0; n < NNAMES; n++)
	{
		int			nh = model_holders(m, NAMES[n], hv, MAXPER);
		int			nw = model_line(m, NAMES[n], wv, MAXPER);

		if (nh > MAXPER || nw > MAXPER)
		{
			p->overflow = true;
			nh = nh > MAXPER ? MAXPER : nh;
			nw = nw > MAXPER ? MAXPER : nw;
		}
		p->present[n] = nh + nw > 0;
		p->capacity[n] = model_capacity(m, NAMES[n]);
		p->nh[n] = nh;
		p->nw[n] = nw;
		for (int i = 0; i < nh; i++)
		{
			PHolder    *h = &p->h[n][i];

			h->key = hv[i].key;
			h->pid = hv[i].key ? 0 : hv[i].pid;
			h->start = hv[i].key ? 0 : hv[i].session_start;
			h->mode = hv[i].mode;
			h->implied = hv[i].implied;
			h->count = hv[i].count;
			h->token = hv[i].token;
			h->expires_at = hv[i].expires_at;
			h->role = hv[i].role;
			h->kept = hv[i].kept;
			h->permits = hv[i].permits;
			h->value = hv[i].value;
		}
		for (int i = 0; i < nw; i++)
		{
			PWaiter    *w = &p->w[n][i];

			w->key = wv[i].key;
			w->pid = wv[i].key ? 0 : wv[i].pid;
			w->start = wv[i].key ? 0 : wv[i].session_start;
			w->mode = wv[i].mode;
			w->implied = wv[i].implied;
			w->conv = wv[i].conversion;
			w->ticket = wv[i].ticket;
			w->requester = wv[i].requester;
			w->kept_until = wv[i].kept_until;
			w->permits = wv[i].permits;
		}
	}
}

static void
pic_from_core(const DLockManager *m, Pic *p)
{
	pic_clear(p);
	for (int n = 0; n < NNAMES; n++)
	{
		DLmLock    *lk = dlm_lookup(m, NAMES[n]);

		if (lk == NULL)
			continue;
		p->present[n] = true;
		p->capacity[n] = lk->capacity;
		for (DLmHolder *h = dlm_lock_holders(lk); h != NULL; h = dlm_holder_next(h))
		{
			PHolder    *x;

			if (p->nh[n] >= MAXPER)
			{
				p->overflow = true;
				break;
			}
			x = &p->h[n][p->nh[n]++];
			x->key = h->owner->key;
			x->pid = h->owner->key ? 0 : h->owner->pid;
			x->start = h->owner->key ? 0 : h->owner->session_start;
			x->mode = h->mode;
			x->implied = h->implied;
			x->count = h->count;
			x->token = h->token;
			x->expires_at = h->expires_at;
			x->role = h->role;
			x->kept = dlm_holder_kept(h);
			x->permits = dlm_holder_permits(h);
			x->value = dlm_holder_value(h);
		}
		for (DLmWaiter *w = dlm_lock_queue(lk); w != NULL; w = dlm_waiter_next(w))
		{
			PWaiter    *x;

			if (p->nw[n] >= MAXPER)
			{
				p->overflow = true;
				break;
			}
			x = &p->w[n][p->nw[n]++];
			x->key = w->owner->key;
			x->pid = w->owner->key ? 0 : w->owner->pid;
			x->start = w->owner->key ? 0 : w->owner->session_start;
			x->mode = w->mode;
			x->implied = w->implied;
			x->conv = w->holder != NULL;
			x->ticket = w->ticket;
			x->requester = w->requester;
			x->kept_until = w->kept_until;
			x->permits = w->permits;
		}
	}
}

static const char *
owner_str(const char *key, int32_t pid, int64_t start)
{
	static char buf[4][64];
	static int	k;

	k = (k + 1) % 4;
	if (key)
		snprintf(buf[k], sizeof(buf[k]), "key %s", key);
	else
		snprintf(buf[k], sizeof(buf[k]), "session %d/%" PRId64, (int) pid, start);
	return buf[k];
}

static void
describe_name(Run *run, const char *who, const Pic *p, int n)
{
	fail(run, CAT_NONE, "    %s %s: %s", who, NAMES[n], p->present[n] ? "present" : "absent");
	for (int i = 0; i < p->nh[n]; i++)
	{
		const PHolder *h = &p->h[n][i];

		fail(run, CAT_NONE, "      holder %s %s%s count %d token %" PRId64 " expires %" PRId64
			 " role %u kept %d permits %d value %.20s",
			 owner_str(h->key, h->pid, h->start), dlock_mode_name(h->mode),
			 h->implied ? " implied" : "", (int) h->count, h->token, h->expires_at,
			 (unsigned) h->role, (int) h->kept, (int) h->permits, h->value ? h->value : "(none)");
	}
	for (int i = 0; i < p->nw[n]; i++)
	{
		const PWaiter *w = &p->w[n][i];

		fail(run, CAT_NONE, "      %s %s %s%s ticket %" PRId64 " requester %d kept_until %" PRId64
			 " permits %d",
			 w->conv ? "conversion" : "waiter", owner_str(w->key, w->pid, w->start),
			 dlock_mode_name(w->mode), w->implied ? " implied" : "", w->ticket,
			 w->requester, w->kept_until, (int) w->permits);
	}
}

static void
compare_pics(Run *run, const Pic *core, const Pic *model)
{
	for (int n = 0; n < NNAMES; n++)
	{
		PHolder		ch[MAXPER],
					mh[MAXPER];
		bool		same = core->present[n] == model->present[n] &&
			core->nh[n] == model->nh[n] && core->nw[n] == model->nw[n];

		if (same)
		{
			memcpy(ch, core->h[n], sizeof(PHolder) * (size_t) core->nh[n]);
			memcpy(mh, model->h[n], sizeof(PHolder) * (size_t) model->nh[n]);
			qsort(ch, (size_t) core->nh[n], sizeof(PHolder), cmp_pholder);
			qsort(mh, (size_t) model->nh[n], sizeof(PHolder), cmp_pholder);
			for (int i = 0; i < core->nh[n] && same; i++)
				same = cmp_pholder(&ch[i], &mh[i]) == 0 &&
					ch[i].count == mh[i].count && ch[i].token == mh[i].token &&
					ch[i].expires_at == mh[i].expires_at && ch[i].kept == mh[i].kept &&
					ch[i].role == mh[i].role &&
					ch[i].permits == mh[i].permits &&
					(ch[i].value == NULL ? mh[i].value == NULL :
					 mh[i].value != NULL && strcmp(ch[i].value, mh[i].value) == 0);
			for (int i = 0; i < core->nw[n] && same; i++)
			{
				const PWaiter *a = &core->w[n][i],
						   *b = &model->w[n][i];

				same = same_owner(a->key, a->pid, a->start, b->key, b->pid, b->start) &&
					a->mode == b->mode && a->implied == b->implied &&
					a->conv == b->conv && a->ticket == b->ticket &&
					a->requester == b->requester && a->kept_until == b->kept_until &&
					a->permits == b->permits;
			}
		}
		if (!same)
		{
			fail(run, CAT_PICTURE, "  %s differs:", NAMES[n]);
			describe_name(run, "core ", core, n);
			describe_name(run, "model", model, n);
		}
	}
}

/* ---------------------------------------------------------------- */
/* Invariants of section 10 on a picture */

static DLockModeMask
pic_others_held(const Pic *p, int n, const char *key, int32_t pid, int64_t start)
{
	DLockModeMask s = 0;

	for (int i = 0; i < p->nh[n]; i++)
		if (!same_owner(p->h[n][i].key, p->h[n][i].pid, p->h[n][i].start, key, pid, start))
			s |= DLOCK_MODE_BIT(p->h[n][i].mode);
	return s;
}

static bool
pic_covered_by_own(const Pic *p, int n, const char *key, int32_t pid, int64_t start, int mode)
{
	for (int i = 0; i < p->nh[n]; i++)
		if (same_owner(p->h[n][i].key, p->h[n][i].pid, p->h[n][i].start, key, pid, start) &&
			dlock_mode_covers(p->h[n][i].mode, mode))
			return true;
	return false;
}

static bool
compat(int mode, DLockModeMask set)
{
	return (dlock_mode_conflicts(mode) & set) == 0;
}

/* The part rule of 6 for part i of name n's line. */
static bool
pic_part_grantable(const Pic *p, int n, int i)
{
	const PWaiter *x = &p->w[n][i];

	if (x->conv)
	{
		for (int j = 0; j < i; j++)
			if (p->w[n][j].conv && !compat(x->mode, DLOCK_MODE_BIT(p->w[n][j].mode)))
				return false;
		return compat(x->mode, pic_others_held(p, n, x->key, x->pid, x->start));
	}
	if (pic_covered_by_own(p, n, x->key, x->pid, x->start, x->mode))
		return true;
	if (!compat(x->mode, pic_others_held(p, n, x->key, x->pid, x->start)))
		return false;
	for (int j = 0; j < p->nw[n]; j++)
	{
		const PWaiter *y = &p->w[n][j];

		if (y->conv ? true : (j < i && y->requester != x->requester))
			if (!compat(x->mode, DLOCK_MODE_BIT(y->mode)))
				return false;
	}
	return true;
}

/*
 * Requesters whose waiting request is grantable by the rule of 6 (bit per
 * requester).
 */
static unsigned
pic_grantable(const Pic *p)
{
	unsigned	mask = 0;

	for (int n = 0; n < NNAMES; n++)
	{
		DLockModeMask ahead = 0;

		if (p->capacity[n] > 0)
		{
			/* 15.4: the head, if its permits fit */
			int64_t		held = 0;

			for (int i = 0; i < p->nh[n]; i++)
				held += p->h[n][i].permits;
			if (p->nw[n] > 0 && held + p->w[n][0].permits <= p->capacity[n] &&
				p->w[n][0].requester >= 0 && p->w[n][0].requester < NREQ)
				mask |= 1u << p->w[n][0].requester;
			continue;
		}
		for (int i = 0; i < p->nw[n]; i++)
		{
			const PWaiter *w = &p->w[n][i];

			if (compat(w->mode, ahead) &&
				compat(w->mode, pic_others_held(p, n, w->key, w->pid, w->start)))
			{
				bool		all = true;

				for (int d = 0; d < NNAMES; d++)
					for (int j = 0; j < p->nw[d]; j++)
						if (p->w[d][j].requester == w->requester &&
							!(d == n && j == i) && !pic_part_grantable(p, d, j))
							all = false;
				if (all && w->requester >= 0 && w->requester < NREQ)
					mask |= 1u << w->requester;
			}
			ahead |= DLOCK_MODE_BIT(w->mode);
		}
	}
	return mask;
}

static bool
pic_conflict(const Pic *p, int n, const PHolder *a, const PHolder *b)
{
	bool		ina = false,
				inb = false;

	for (int i = 0; i < p->nh[n]; i++)
	{
		if (cmp_pholder(&p->h[n][i], a) == 0)
			ina = true;
		if (cmp_pholder(&p->h[n][i], b) == 0)
			inb = true;
	}
	return ina && inb;
}

/*
 * The invariants of section 10 on picture p (but the one on what is left
 * waiting: check_grantable).  A broken invariant the model's picture
 * shares is the README's doing (category spec).
 */
static void
check_pic(Run *run, const Pic *p, const char *who, int64_t counter_bound,
		  const Pic *model)
{
	if (p->overflow)
		fail(run, CAT_INVARIANT, "%s: more than %d holders or waiters on a name", who, MAXPER);
	for (int n = 0; n < NNAMES; n++)
	{
		if (p->present[n] && p->nh[n] + p->nw[n] == 0)
			fail(run, CAT_INVARIANT, "%s: %s left with no holder and no waiter", who, NAMES[n]);
		/* no two holders of different owners conflict */
		for (int i = 0; i < p->nh[n]; i++)
			for (int j = i + 1; j < p->nh[n]; j++)
			{
				const PHolder *a = &p->h[n][i],
						   *b = &p->h[n][j];

				if (!same_owner(a->key, a->pid, a->start, b->key, b->pid, b->start) &&
					!compat(a->mode, DLOCK_MODE_BIT(b->mode)))
				{
					bool		spec = model != NULL && pic_conflict(model, n, a, b);

					if (spec && skip_spec)
						stats->spec_conflicts++;
					else
						fail(run, spec ? CAT_SPEC : CAT_INVARIANT, "  %s: %s held %s by %s and %s by %s%s",
							 who, NAMES[n], dlock_mode_name(a->mode), owner_str(a->key, a->pid, a->start),
							 dlock_mode_name(b->mode), owner_str(b->key, b->pid, b->start),
							 spec ? " (the model's too: README)" : "");
				}
			}
		/* tokens grow in grant order, tickets in line order, below the counter */
		for (int i = 0; i < p->nh[n]; i++)
		{
			if (i > 0 && p->h[n][i].token <= p->h[n][i - 1].token)
				fail(run, CAT_INVARIANT, "%s: %s holders' tokens not growing", who, NAMES[n]);
			if (p->h[n][i].token >= counter_bound)
				fail(run, CAT_INVARIANT, "%s: %s token %" PRId64 " not below %" PRId64,
					 who, NAMES[n], p->h[n][i].token, counter_bound);
			if (p->h[n][i].count < 1)
				fail(run, CAT_INVARIANT, "%s: %s holder with count %d", who, NAMES[n],
					 (int) p->h[n][i].count);
		}
		for (int i = 0; i < p->nw[n]; i++)
		{
			const PWaiter *w = &p->w[n][i];

			if (i > 0 && w->conv && !p->w[n][i - 1].conv)
				fail(run, CAT_INVARIANT, "%s: %s a conversion after a waiter", who, NAMES[n]);
			if (i > 0 && w->conv == p->w[n][i - 1].conv && w->ticket <= p->w[n][i - 1].ticket)
				fail(run, CAT_INVARIANT, "%s: %s tickets not growing in line", who, NAMES[n]);
			if (w->ticket >= counter_bound)
				fail(run, CAT_INVARIANT, "%s: %s ticket %" PRId64 " not below %" PRId64,
					 who, NAMES[n], w->ticket, counter_bound);
			if (w->conv)
			{
				bool		found = false;

				for (int k = 0; k < p->nh[n]; k++)
					if (!p->h[n][k].implied &&
						same_owner(p->h[n][k].key, p->h[n][k].pid, p->h[n][k].start,
								   w->key, w->pid, w->start))
						found = true;
				if (!found)
					fail(run, CAT_INVARIANT, "%s: %s conversion of a holder not there", who, NAMES[n]);
			}
		}
		/* an implied holder's count: its owner's named holders below */
		for (int i = 0; i < p->nh[n]; i++)
		{
			const PHolder *h = &p->h[n][i];
			int			want = 0;

			if (!h->implied)
			{
				for (int j = 0; j < i; j++)
					if (!p->h[n][j].implied &&
						same_owner(p->h[n][j].key, p->h[n][j].pid, p->h[n][j].start,
								   h->key, h->pid, h->start))
						fail(run, CAT_INVARIANT, "%s: %s two named holders of one owner",
							 who, NAMES[n]);
				continue;
			}
			for (int d = 0; d < NNAMES; d++)
				if (is_ancestor[n][d])
					for (int j = 0; j < p->nh[d]; j++)
					{
						const PHolder *g = &p->h[d][j];

						if (!g->implied && same_owner(g->key, g->pid, g->start, h->key, h->pid, h->start) &&
							dlock_intention_mode(g->mode) == h->mode)
							want++;
					}
			if (h->count != want)
				fail(run, CAT_INVARIANT, "%s: %s implied %s of %s has count %d, %d named below",
					 who, NAMES[n], dlock_mode_name(h->mode), owner_str(h->key, h->pid, h->start),
					 (int) h->count, want);
		}
	}
	/* a requester's parts all belong to one owner */
	for (int r = 0; r < NREQ; r++)
	{
		const PWaiter *first = NULL;

		for (int d = 0; d < NNAMES; d++)
			for (int j = 0; j < p->nw[d]; j++)
				if (p->w[d][j].requester == r)
				{
					const PWaiter *w = &p->w[d][j];

					if (first == NULL)
						first = w;
					else if (!same_owner(first->key, first->pid, first->start,
										 w->key, w->pid, w->start))
						fail(run, CAT_INVARIANT, "%s: requester %d waits for two owners", who, r);
				}
	}
}

/*
 * Nothing grantable by the rule of 6 is left waiting (section 10).  A
 * waiter the model leaves waiting too, in the same picture, is the
 * README's doing (category spec), not the core's.
 */
static void
check_grantable(Run *run, const Pic *core, const Pic *model)
{
	unsigned	cg = pic_grantable(core);
	unsigned	mg = model ? pic_grantable(model) : cg;

	for (int r = 0; r < NREQ; r++)
	{
		if (!(cg & (1u << r)))
			continue;
		if (mg & (1u << r))
		{
			if (skip_spec)
				stats->spec_waiting++;
			else
				fail(run, CAT_SPEC, "  %s: requester %d's request is grantable by the rule of 6 "
					 "but waits (the model's too: README)%s", model ? "core" : "model", r,
					 run->born_grantable[r] ? "; it was grantable when it queued" : "");
		}
		else
			fail(run, CAT_INVARIANT, "  core: requester %d's request is grantable by the rule of 6 "
				 "but waits (not in the model)", r);
	}
}

/* ---------------------------------------------------------------- */
/* Answers */

static const char *
status_name(DLockStatus s)
{
	static const char *const names[] = {
		"NONE", "GRANTED", "REFUSED", "RELEASED", "NOT_HELD", "RENEWED", "COUNT",
		"CANCELED", "WITHDRAWN", "MODE_HELD", "DEADLOCK", "NOT_READY", "ERROR", "QUEUED",
		"KEPT", "REVOKED"
	};

	if ((int) s < 0 || (int) s >= (int) (sizeof(names) / sizeof(names[0])))
		return "?";
	return names[s];
}

static void
describe_answer(char *buf, size_t len, DLockStatus status, int64_t token,
				DLockTime expires_at, int32_t count, int name_index, int ntokens,
				const int64_t *tokens, DLmError error, int ncycle)
{
	size_t		o = 0;

	o += (size_t) snprintf(buf + o, len - o, "%s", status_name(status));
	switch (status)
	{
		case DLOCK_STATUS_GRANTED:
		case DLOCK_STATUS_RENEWED:
			o += (size_t) snprintf(buf + o, len - o, " token %" PRId64 " expires %" PRId64 " count %d",
								   token, expires_at, (int) count);
			break;
		case DLOCK_STATUS_RELEASED:
			o += (size_t) snprintf(buf + o, len - o, " token %" PRId64 " count %d", token, (int) count);
			break;
		case DLOCK_STATUS_COUNT:
			o += (size_t) snprintf(buf + o, len - o, " %d", (int) count);
			break;
		case DLOCK_STATUS_MODE_HELD:
			o += (size_t) snprintf(buf + o, len - o, " name %d mode %s", name_index,
								   dlock_mode_name(count));
			break;
		case DLOCK_STATUS_QUEUED:
			o += (size_t) snprintf(buf + o, len - o, " ticket %" PRId64, token);
			break;
		case DLOCK_STATUS_KEPT:
			o += (size_t) snprintf(buf + o, len - o, " ticket %" PRId64 " until %" PRId64,
								   token, expires_at);
			break;
		case DLOCK_STATUS_ERROR:
			o += (size_t) snprintf(buf + o, len - o, " %s", dlm_error_message(error));
			break;
		case DLOCK_STATUS_DEADLOCK:
			o += (size_t) snprintf(buf + o, len - o, " cycle of %d", ncycle);
			break;
		default:
			break;
	}
	if (ntokens > 0 && o < len)
	{
		o += (size_t) snprintf(buf + o, len - o, " tokens");
		for (int i = 0; i < ntokens && i < DLOCK_MAX_MULTI && o < len; i++)
			o += (size_t) snprintf(buf + o, len - o, " %" PRId64, tokens[i]);
	}
}

/* The fields the status defines (dlock_lm.h) agree. */
static bool
answers_agree(const CoreAnswer *c, const ModelAnswer *m)
{
	const DLmAnswer *a = &c->a;

	if (a->status != m->status)
		return false;
	switch (m->status)
	{
		case DLOCK_STATUS_GRANTED:
			if (a->ntokens != m->ntokens)
				return false;
			for (int i = 0; i < m->ntokens; i++)
				if (c->tokens[i] != m->tokens[i])
					return false;
			/* acquire_all (3.3): token = the first, count = the number
			 * of names, expiry 0: compared as for any grant */
			/* FALLTHROUGH */
		case DLOCK_STATUS_RENEWED:
			return a->token == m->token && a->expires_at == m->expires_at &&
				a->count == m->count;
		case DLOCK_STATUS_RELEASED:
			return a->token == m->token && a->count == m->count;
		case DLOCK_STATUS_COUNT:
			return a->count == m->count;
		case DLOCK_STATUS_MODE_HELD:
			return a->name_index == m->name_index && a->count == m->count;
		case DLOCK_STATUS_QUEUED:
			return a->token == m->token;
		case DLOCK_STATUS_KEPT:
			return a->token == m->token && a->expires_at == m->expires_at;
		case DLOCK_STATUS_ERROR:
			return a->error == m->error;
		default:
			return true;
	}
}

static bool
step_matches(const ModelEdge *e, const CoreStep *s)
{
	return e->waiter_keyed == s->waiter_keyed &&
		e->waiter_pid == s->waiter_pid &&
		strcmp(e->lock, s->lock) == 0 && e->held == s->held &&
		e->blocker_keyed == s->blocker_keyed &&
		e->blocker_pid == s->blocker_pid;
}

/* Can steps[i..] be walked from owner 'cur' back to owner 'target'? */
static bool
cycle_walk(const ModelEdge *edges, int nedges, const CoreStep *steps, int nsteps,
		   int i, int cur, int target)
{
	if (i == nsteps)
		return cur == target;
	for (int k = 0; k < nedges; k++)
	{
		const ModelEdge *e = &edges[k];

		if (e->waiter_owner != cur || (i == 0 && !e->waiter_new) ||
			!step_matches(e, &steps[i]))
			continue;
		if (cycle_walk(edges, nedges, steps, nsteps, i + 1, e->blocker_owner, target))
			return true;
	}
	return false;
}

static void
check_cycle(Run *run, const CoreAnswer *c)
{
	const ModelEdge *edges;
	int			owner;
	const char *first_lock;
	int			nedges = model_deadlock_edges(run->model, &edges, &owner, &first_lock);
	const CoreStep *steps = &run->steps[c->cycle_off];

	if (c->ncycle < 1)
	{
		fail(run, CAT_ANSWER, "  requester %d: DEADLOCK with an empty cycle", c->requester);
		return;
	}
	if (first_lock != NULL && strcmp(steps[0].lock, first_lock) != 0)
		fail(run, CAT_ANSWER, "  requester %d: the cycle starts at %s, the model's first part with a cycle is on %s",
			 c->requester, steps[0].lock, first_lock);
	if (!cycle_walk(edges, nedges, steps, c->ncycle, 0, owner, owner))
	{
		fail(run, CAT_ANSWER, "  requester %d: the core's cycle is not one in the model's waits-for graph:",
			 c->requester);
		for (int i = 0; i < c->ncycle; i++)
			fail(run, CAT_NONE, "    %s %d waits for %s (%s) of %s %d",
				 steps[i].waiter_keyed ? "keyed" : "session", (int) steps[i].waiter_pid,
				 steps[i].lock, steps[i].held ? "held" : "queued",
				 steps[i].blocker_keyed ? "keyed" : "session", (int) steps[i].blocker_pid);
		fail(run, CAT_NONE, "    model edges:");
		for (int k = 0; k < nedges; k++)
			fail(run, CAT_NONE, "      owner#%d %s %d%s waits for %s (%s) of owner#%d %s %d",
				 edges[k].waiter_owner, edges[k].waiter_keyed ? "keyed" : "session",
				 (int) edges[k].waiter_pid, edges[k].waiter_new ? " (new)" : "", edges[k].lock,
				 edges[k].held ? "held" : "queued", edges[k].blocker_owner,
				 edges[k].blocker_keyed ? "keyed" : "session", (int) edges[k].blocker_pid);
	}
}

static void
compare_answers(Run *run)
{
	int			nm;
	const ModelAnswer *ma = model_answers(run->model, &nm);

	for (int r = 0; r < NREQ; r++)
	{
		int			ci = 0,
					mi = 0;

		for (;;)
		{
			char		cb[600],
						mb[600];
			const CoreAnswer *c;
			const ModelAnswer *m;

			while (ci < run->nans && run->ans[ci].requester != r)
				ci++;
			while (mi < nm && ma[mi].requester != r)
				mi++;
			if (ci == run->nans && mi == nm)
				break;
			c = ci < run->nans ? &run->ans[ci] : NULL;
			m = mi < nm ? &ma[mi] : NULL;
			if (c)
				describe_answer(cb, sizeof(cb), c->a.status, c->a.token, c->a.expires_at,
								c->a.count, c->a.name_index, c->a.ntokens, c->tokens,
								c->a.error, c->ncycle);
			else
				snprintf(cb, sizeof(cb), "(nothing)");
			if (m)
				describe_answer(mb, sizeof(mb), m->status, m->token, m->expires_at, m->count,
								m->name_index, m->ntokens, m->tokens, m->error, 0);
			else
				snprintf(mb, sizeof(mb), "(nothing)");
			if (c == NULL || m == NULL || !answers_agree(c, m))
				fail(run, CAT_ANSWER, "  requester %d: core %s, model %s", r, cb, mb);
			else if (m->status == DLOCK_STATUS_DEADLOCK)
			{
				check_cycle(run, c);
				stats->deadlock_steps += c->ncycle;
			}
			if (c)
				ci++;
			if (m)
				mi++;
		}
	}
}

/* ---------------------------------------------------------------- */
/* One event through both */

static void
to_request(const Event *e, DLmRequest *r)
{
	memset(r, 0, sizeof(*r));
	r->op = e->op;
	r->requester = e->requester;
	r->owner_key = e->key;
	r->pid = e->pid;
	r->session_start = e->start;
	r->mode = e->mode;
	r->names = e->names;
	r->nnames = e->nnames;
	r->ttl_us = e->ttl;
	r->max_ttl_us = e->max_ttl;
	r->timeout_at = 0;
	r->role = e->role;
	r->any_role = e->any_role;
	r->role_max_locks = e->role_max;
	r->owner_max_locks = e->owner_max;
	r->role_max_bytes = e->role_max_bytes;
	r->owner_max_bytes = e->owner_max_bytes;
	r->keep_place = e->keep;
	r->capacity = e->capacity;
	r->permits = e->permits;
	r->election = e->election;
	r->value = e->value;
}

/* Can the event run now?  (A requester with a waiting request asks nothing.) */
static bool
event_applies(const Run *run, const Event *e)
{
	if (e->kind == EV_REQUEST && e->requester >= 0 && e->requester < NREQ &&
		model_waiting(run->model, e->requester))
		return false;
	return true;
}

static void
check_tokens_grow(Run *run, const Pic *p)
{
	for (int n = 0; n < NNAMES; n++)
	{
		int64_t		maxt = run->max_token[n];

		for (int i = 0; i < p->nh[n]; i++)
		{
			int64_t		t = p->h[n][i].token;
			bool		old = false;

			for (int k = 0; k < run->nprev[n]; k++)
				if (run->prev_tokens[n][k] == t)
					old = true;
			if (!old && t <= run->max_token[n])
				fail(run, CAT_INVARIANT, "  %s: new token %" PRId64 " not above %" PRId64,
					 NAMES[n], t, run->max_token[n]);
			if (t > maxt)
				maxt = t;
		}
		run->max_token[n] = maxt;
		run->nprev[n] = p->nh[n];
		for (int i = 0; i < p->nh[n]; i++)
			run->prev_tokens[n][i] = p->h[n][i].token;
	}
}

static int
mirror_find(const int64_t *rows, int n, int64_t key)
{
	for (int i = 0; i < n; i++)
		if (rows[i] == key)
			return i;
	return -1;
}

/* Add or remove a row as the adapter would; a row that is not where the
 * flags say is a failure (a duplicate insert, a delete of nothing). */
static void
mirror_row(Run *run, int64_t *rows, int *n, int64_t old, int64_t key,
		   const char *what)
{
	int			i = old ? mirror_find(rows, *n, old) : -1;

	if (old && i < 0)
		fail(run, CAT_STORE, "  %s row %" PRId64 " to change or delete is not stored",
			 what, old);
	if (key && mirror_find(rows, *n, key) >= 0 && key != old)
		fail(run, CAT_STORE, "  %s row %" PRId64 " inserted twice", what, key);
	if (i >= 0)
		rows[i] = rows[--*n];
	if (key)
	{
		if (*n >= MIRROR_MAX)
			run->mirror_overflow = true;
		else
			rows[(*n)++] = key;
	}
}

/* The batch's touched holders and waiters, written to the mirror. */
static void
mirror_apply(Run *run)
{
	DLmHolder  *h;

	for (size_t h_i = 0; (h = dlm_touched_holder(run->core, h_i)) != NULL; h_i++)
	{
		if (h->p.dead)
		{
			if (h->p.stored)
				mirror_row(run, run->rows_h, &run->nrows_h, h->stored_token, 0, "holder");
		}
		else if (!h->p.stored)
			mirror_row(run, run->rows_h, &run->nrows_h, 0, h->token, "holder");
		else if (h->p.dirty)
			mirror_row(run, run->rows_h, &run->nrows_h, h->stored_token, h->token, "holder");
	}
	DLmWaiter  *w;

	for (size_t wi = 0; (w = dlm_touched_waiter(run->core, wi)) != NULL; wi++)
	{
		if (w->p.dead)
		{
			if (w->p.stored)
				mirror_row(run, run->rows_w, &run->nrows_w, w->ticket, 0, "waiter");
		}
		else if (!w->p.stored)
			mirror_row(run, run->rows_w, &run->nrows_w, 0, w->ticket, "waiter");
		else if (w->p.dirty)
			mirror_row(run, run->rows_w, &run->nrows_w, w->ticket, w->ticket, "waiter");
	}
}

/*
 * After dlm_settle the store holds a row per holder, a row per waiter that
 * has waited queue_row_delay_us or more, none for one that has waited less
 * than half of it, and nothing else (README 9).
 */
static void
mirror_check(Run *run, DLockTime now)
{
	int			nh = 0,
				nw = 0;

	if (run->mirror_overflow)
		return;
	for (int n = 0; n < NNAMES; n++)
	{
		DLmLock    *lk = dlm_lookup(run->core, NAMES[n]);

		if (lk == NULL)
			continue;
		for (DLmHolder *h = dlm_lock_holders(lk); h; h = dlm_holder_next(h))
		{
			nh++;
			if (mirror_find(run->rows_h, run->nrows_h, h->token) < 0)
				fail(run, CAT_STORE, "  %s: holder with token %" PRId64 " has no row",
					 NAMES[n], h->token);
		}
		for (DLmWaiter *w = dlm_lock_queue(lk); w; w = dlm_waiter_next(w))
		{
			bool		due = w->since + queue_row_delay <= now;
			bool		young = w->since + queue_row_delay / 2 > now;
			bool		stored = mirror_find(run->rows_w, run->nrows_w, w->ticket) >= 0;

			nw += stored;
			/*
			 * a kept place has its row at once (14.2), and keeps it once
			 * resumed, also by a call without keep_place
			 */
			if (w->kept_until != 0)
			{
				due = true;
				if (mirror_find(run->kept_w, run->nkept_w, w->ticket) < 0)
				{
					if (run->nkept_w < MIRROR_MAX)
						run->kept_w[run->nkept_w++] = w->ticket;
					else
						run->mirror_overflow = true;
				}
			}
			if (w->keep || mirror_find(run->kept_w, run->nkept_w, w->ticket) >= 0)
				young = false;
			if ((due && !stored) || (young && stored))
				fail(run, CAT_STORE, "  %s: waiter %" PRId64 " since %" PRId64 " at %" PRId64
					 " %s a row", NAMES[n], w->ticket, w->since, now,
					 stored ? "has" : "has no");
		}
	}
	if (nh != run->nrows_h)
		fail(run, CAT_STORE, "  %d holder rows stored for %d holders", run->nrows_h, nh);
	if (nw != run->nrows_w)
		fail(run, CAT_STORE, "  %d waiter rows stored, %d of them for waiters", run->nrows_w, nw);
}

/*
 * Feed event e to the core and the model and compare.  Returns false if
 * they disagree (run->diff says how).
 */
static bool
run_event(Run *run, const Event *e)
{
	int			ce = 0,
				me = 0;
	static Pic	cp,
				mp;

	run->nans = 0;
	run->nsteps = 0;
	run->events++;
	switch (e->kind)
	{
		case EV_REQUEST:
			{
				DLmRequest	r;

				to_request(e, &r);
				stats->keep_requests += e->keep;
				stats->semaphore_requests += e->capacity != 0;
				if (run->core)
					dlm_request(run->core, &r, e->now);
				model_request(run->model, &r, e->now);
				break;
			}
		case EV_WITHDRAW:
			if (run->core)
				dlm_withdraw(run->core, e->reqs, e->nreqs, e->now);
			model_withdraw(run->model, e->reqs, e->nreqs, e->now);
			break;
		case EV_SESSION_END:
			if (run->core)
				dlm_session_end(run->core, e->pid, e->start, e->requester, e->now);
			model_session_end(run->model, e->pid, e->start, e->requester, e->now);
			break;
		case EV_EXPIRE:
			if (run->core)
				ce = dlm_expire(run->core, e->now, e->max);
			me = model_expire(run->model, e->now, e->max);
			break;
	}

	{
		int			nm;
		const ModelAnswer *ma = model_answers(run->model, &nm);

		for (int i = 0; i < nm; i++)
		{
			if ((int) ma[i].status >= 0 && (int) ma[i].status < 16)
			{
				stats->status[ma[i].status]++;
				run->by_status[ma[i].status]++;
			}
			if (ma[i].ntokens > 1)
				stats->group_grants++;
		}
		stats->expired += me;
		run->expired += me;
		model_notified(run->model, &nm);
		stats->announced += nm;
	}
	{
		const char *err = model_check(run->model);

		if (err)
			fail(run, CAT_MODEL, "  model: %s", err);
	}

	if (run->core)
	{
		int			nn;
		const char *const *mn = model_notified(run->model, &nn);
		int64_t		hi;
		int			ncore = 0;

		if (dlm_broken(run->core))
			fail(run, CAT_INVARIANT, "  the core says it is broken");
		if (ce != me)
			fail(run, CAT_ANSWER, "  expire: core released %d, model %d", ce, me);
		compare_answers(run);

		/* announcements: the same set of names */
		DLmLock    *l;

		for (size_t l_i = 0; (l = dlm_notified_lock(run->core, l_i)) != NULL; l_i++)
		{
			bool		found = false;

			ncore++;
			for (int i = 0; i < nn; i++)
				if (strcmp(mn[i], l->name) == 0)
					found = true;
			if (!found)
				fail(run, CAT_NOTIFY, "  the core announced %s, the model did not", l->name);
			if (ncore > 100)
				break;
		}
		for (int i = 0; i < nn; i++)
		{
			bool		found = false;

			DLmLock    *l;

			for (size_t l_i = 0; (l = dlm_notified_lock(run->core, l_i)) != NULL; l_i++)
				if (strcmp(mn[i], l->name) == 0)
					found = true;
			if (!found)
				fail(run, CAT_NOTIFY, "  the model announced %s, the core did not", mn[i]);
		}
		if (ncore != nn && run->category != CAT_NOTIFY)
			fail(run, CAT_NOTIFY, "  the core announced %d locks, the model %d", ncore, nn);

		/* 16: leader changes, the same set of names */
		{
			const char *ml[16];
			int			nml = model_leader_changes(run->model, ml, 16);
			int			ncl = 0;

			DLmLock    *l;

			for (size_t l_i = 0; (l = dlm_leader_change(run->core, l_i)) != NULL && ncl <= 100;
				 l_i++)
			{
				bool		found = false;

				ncl++;
				for (int i = 0; i < nml; i++)
					found = found || strcmp(ml[i], l->name) == 0;
				if (!found)
					fail(run, CAT_NOTIFY, "  the core changed the leader of %s, the model did not", l->name);
			}
			if (ncl != nml && run->category != CAT_NOTIFY)
				fail(run, CAT_NOTIFY, "  leader changes: the core %d, the model %d", ncl, nml);
			stats->leader_changes += nml;
		}

		/* the counter: every ticket handed out is below the stored block */
		if (dlm_counter_dirty(run->core, &hi))
		{
			if (hi < run->stored_hi)
				fail(run, CAT_COUNTER, "  the stored counter went back from %" PRId64 " to %" PRId64,
					 run->stored_hi, hi);
			run->stored_hi = hi;
		}
		if (model_next_ticket(run->model) > run->stored_hi)
			fail(run, CAT_COUNTER, "  tickets up to %" PRId64 " handed out, the stored block is %" PRId64,
				 model_next_ticket(run->model) - 1, run->stored_hi);
		/* as the worker: the half-due ride along with a batch stored anyway */
		(void) dlm_queue_rows_due(run->core, e->now, false);
		if (dlm_touched_holder(run->core, 0) || dlm_touched_waiter(run->core, 0) ||
			dlm_counter_dirty(run->core, NULL))
			(void) dlm_queue_rows_due(run->core, e->now, true);
		mirror_apply(run);
		dlm_settle(run->core);
		mirror_check(run, e->now);
	}
	model_settle(run->model);

	pic_from_model(run->model, &mp);
	{
		/* requests that queued in this event, grantable at once by 6 */
		int			nm;
		const ModelAnswer *ma = model_answers(run->model, &nm);
		unsigned	g = pic_grantable(&mp);

		for (int r = 0; r < NREQ; r++)
			if (!model_waiting(run->model, r))
				run->born_grantable[r] = false;
		for (int i = 0; i < nm; i++)
			if (ma[i].status == DLOCK_STATUS_QUEUED && ma[i].requester >= 0 &&
				ma[i].requester < NREQ && model_waiting(run->model, ma[i].requester) &&
				(g & (1u << ma[i].requester)))
				run->born_grantable[ma[i].requester] = true;
	}
	if (run->core)
	{
		pic_from_core(run->core, &cp);
		compare_pics(run, &cp, &mp);
		check_pic(run, &cp, "core", run->stored_hi, &mp);
		check_grantable(run, &cp, &mp);
		check_tokens_grow(run, &cp);
		if (dlm_nlocks(run->core) != model_nlocks(run->model))
			fail(run, CAT_PICTURE, "  the core has %zu locks, the model %zu",
				 dlm_nlocks(run->core), model_nlocks(run->model));
		if (dlm_next_expiry(run->core) != model_next_expiry(run->model))
			fail(run, CAT_PICTURE, "  next expiry: core %" PRId64 ", model %" PRId64,
				 dlm_next_expiry(run->core), model_next_expiry(run->model));
		for (int r = 0; r < NREQ; r++)
		{
			DLmWaiter  *w = dlm_waiter_of(run->core, r);

			if ((w != NULL) != model_waiting(run->model, r))
				fail(run, CAT_PICTURE, "  requester %d: waits in the core: %s, in the model: %s",
					 r, w ? "yes" : "no", model_waiting(run->model, r) ? "yes" : "no");
			else if (w != NULL && w->requester != r)
				fail(run, CAT_PICTURE, "  dlm_waiter_of(%d) is requester %d's", r, w->requester);
		}
	}
	else
	{
		check_pic(run, &mp, "model", model_next_ticket(run->model), &mp);
		check_grantable(run, &mp, NULL);
		check_tokens_grow(run, &mp);
	}
	return run->category == CAT_NONE;
}

/* ---------------------------------------------------------------- */
/* Generating events */

typedef struct Gen
{
	uint64_t	rng;
	DLockTime	now;
	int32_t		pid[NREQ];
	int64_t		start[NREQ];
	int			nnames;			/* this sequence's names: NAMES[0..] by pick[] */
	int			pick[16];
	int			key_pct;		/* how often an owner key owns */
	int			ttl_pct;		/* how often a lease */
	int			nsessions;
	int32_t		next_pid;
	int			keep_pct;		/* how often a keyed acquire keeps its place */
	int			sem_pct;		/* how often an acquire or try is a semaphore's */
	int32_t		big_capacity;	/* "c"'s capacity at the top of the range; 0: none */
	int			elect_pct;		/* how often an acquire or try is a campaign */
	Event		kept[4];		/* recent keep_place requests: to resume */
	int			nkept;
} Gen;

static void
gen_init(Gen *g, uint64_t seed)
{
	g->rng = seed;
	g->now = 1000 * UNIT;
	g->nsessions = 2 + test_rnd(&g->rng, NREQ - 1);
	g->next_pid = 100;
	for (int i = 0; i < NREQ; i++)
	{
		g->pid[i] = g->next_pid++;
		g->start[i] = 1 + test_rnd(&g->rng, 3);
	}
	/* some sequences crowd a few names, others spread over all */
	g->nnames = test_rnd(&g->rng, 3) == 0 ? 3 + test_rnd(&g->rng, NNAMES - 2) : NNAMES;
	for (int i = 0; i < NNAMES; i++)
		g->pick[i] = i;
	for (int i = NNAMES - 1; i > 0; i--)
	{
		int			j = test_rnd(&g->rng, i + 1),
					t = g->pick[i];

		g->pick[i] = g->pick[j];
		g->pick[j] = t;
	}
	g->key_pct = (int[]) {0, 20, 40, 70}[test_rnd(&g->rng, 4)];
	g->ttl_pct = (int[]) {0, 30, 60}[test_rnd(&g->rng, 3)];
	g->keep_pct = (int[]) {0, 30, 70}[test_rnd(&g->rng, 3)];
	g->sem_pct = (int[]) {0, 0, 30, 80}[test_rnd(&g->rng, 4)];
	g->big_capacity = (int32_t[]) {0, 0, 1 << 30, INT32_MAX}[test_rnd(&g->rng, 4)];
	g->elect_pct = (int[]) {0, 0, 30, 80}[test_rnd(&g->rng, 4)];
	g->nkept = 0;
}

static const char *
gen_name(Gen *g)
{
	return NAMES[g->pick[test_rnd(&g->rng, g->nnames)]];
}

static int
gen_mode(Gen *g)
{
	static const int modes[] = {
		DLOCK_MODE_NL, DLOCK_MODE_CR, DLOCK_MODE_CR, DLOCK_MODE_CW, DLOCK_MODE_CW,
		DLOCK_MODE_PR, DLOCK_MODE_PR, DLOCK_MODE_PR, DLOCK_MODE_PW, DLOCK_MODE_PW,
		DLOCK_MODE_EX, DLOCK_MODE_EX, DLOCK_MODE_EX, DLOCK_MODE_EX
	};

	return modes[test_rnd(&g->rng, (int) (sizeof(modes) / sizeof(modes[0])))];
}

/* Names the owner holds (named), per the model. */
static int
held_names(const Model *m, const char *key, int32_t pid, int64_t start, const char **out)
{
	ModelHolderView hv[MAXPER];
	int			n = 0;

	for (int i = 0; i < NNAMES; i++)
	{
		int			k = model_holders(m, NAMES[i], hv, MAXPER);

		for (int j = 0; j < k && j < MAXPER; j++)
			if (!hv[j].implied &&
				same_owner(hv[j].key, hv[j].key ? 0 : hv[j].pid, hv[j].key ? 0 : hv[j].session_start,
						   key, key ? 0 : pid, key ? 0 : start))
				out[n++] = NAMES[i];
	}
	return n;
}

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *) a, *(const char *const *) b);
}

static void
gen_event(Gen *g, const Model *m, Event *e)
{
	int			free_req[NREQ],
				nfree = 0,
				waiting[NREQ],
				nwaiting = 0;
	int			w;

	memset(e, 0, sizeof(*e));
	g->now += UNIT * test_rnd(&g->rng, 4);
	e->now = g->now;
	for (int i = 0; i < g->nsessions; i++)
	{
		if (model_waiting(m, i))
			waiting[nwaiting++] = i;
		else
			free_req[nfree++] = i;
	}

	w = test_rnd(&g->rng, 100);
	if (nfree == 0 && w < 80)
		w = 80 + test_rnd(&g->rng, 20);
	if (w >= 80)
	{
		if (w < 88 && nwaiting > 0)
		{
			/* withdraw one or two, mostly waiting ones */
			e->kind = EV_WITHDRAW;
			e->nreqs = 1 + test_rnd(&g->rng, 2);
			e->reqs[0] = waiting[test_rnd(&g->rng, nwaiting)];
			if (e->nreqs == 2)
			{
				/* another, sometimes the same one twice */
				e->reqs[1] = test_rnd(&g->rng, g->nsessions);
				if (e->reqs[1] == e->reqs[0] && test_rnd(&g->rng, 4) != 0)
					e->nreqs = 1;
			}
			return;
		}
		if (w < 90)
		{
			int			r = test_rnd(&g->rng, g->nsessions);

			e->kind = EV_SESSION_END;
			/* sometimes no requester: its waiting request stays in line */
			e->requester = test_rnd(&g->rng, 8) == 0 ? DLM_NOBODY : r;
			e->pid = g->pid[r];
			e->start = g->start[r];
			/* the requester's next session: same process id or a new one */
			if (test_rnd(&g->rng, 2))
				g->pid[r] = g->next_pid++;
			g->start[r] += 1 + test_rnd(&g->rng, 3);
			return;
		}
		e->kind = EV_EXPIRE;
		e->max = test_rnd(&g->rng, 3) == 0 ? 1 + test_rnd(&g->rng, 2) : 1000;
		return;
	}

	/* a request */
	{
		int			r = free_req[test_rnd(&g->rng, nfree)];
		const char *held[16];
		int			nheld;

		e->kind = EV_REQUEST;
		e->requester = r;
		e->pid = g->pid[r];
		e->start = g->start[r];
		e->key = test_rnd(&g->rng, 100) < g->key_pct ? KEYS[test_rnd(&g->rng, NKEYS)] : NULL;
		/* mostly one role, so keys stay shared; sometimes another, or any */
		e->role = test_rnd(&g->rng, 4) == 0 ? 2 + (uint32_t) (r % 2) : 1;
		e->any_role = test_rnd(&g->rng, 16) == 0;
		/* quotas: mostly none, sometimes tight */
		e->role_max = test_rnd(&g->rng, 6) == 0 ? 1 + (int64_t) test_rnd(&g->rng, 6) : 0;
		e->owner_max = test_rnd(&g->rng, 6) == 0 ? 1 + (int64_t) test_rnd(&g->rng, 3) : 0;
		e->role_max_bytes = test_rnd(&g->rng, 8) == 0 ? 4 + (int64_t) test_rnd(&g->rng, 40) : 0;
		e->owner_max_bytes = test_rnd(&g->rng, 8) == 0 ? 4 + (int64_t) test_rnd(&g->rng, 20) : 0;
		e->mode = gen_mode(g);
		e->ttl = test_rnd(&g->rng, 100) < g->ttl_pct ? UNIT * (1 + test_rnd(&g->rng, 8)) : 0;
		nheld = held_names(m, e->key, e->pid, e->start, held);
		e->nnames = 1;
		if (w < 24 && g->nkept > 0 && test_rnd(&g->rng, 3) == 0)
		{
			/* 14.3: an owner comes back for its kept place (or its grant) */
			const Event *k = &g->kept[test_rnd(&g->rng, g->nkept)];

			e->op = k->op;
			e->key = k->key;
			e->mode = k->mode;
			e->capacity = k->capacity;
			e->permits = k->permits;
			e->election = k->election;
			e->value = k->election ? VALUES[test_rnd(&g->rng, NVALUES)] : NULL;
			e->nnames = k->nnames;
			memcpy(e->names, k->names, sizeof(e->names));
			e->role = k->role;
			e->keep = test_rnd(&g->rng, 4) != 0;
			if (e->keep && e->ttl == 0)
				e->ttl = UNIT * (1 + test_rnd(&g->rng, 8));
		}
		else if (w < 24)
		{
			e->op = DLOCK_OP_ACQUIRE;
			e->names[0] = nheld > 0 && test_rnd(&g->rng, 5) == 0 ? held[test_rnd(&g->rng, nheld)] : gen_name(g);
		}
		else if (w < 32)
		{
			e->op = DLOCK_OP_TRY;
			e->names[0] = gen_name(g);
		}
		else if (w < 41)
		{
			e->op = DLOCK_OP_ACQUIRE_ALL;
			e->nnames = 1 + test_rnd(&g->rng, 3);
			for (int i = 0; i < e->nnames; i++)
			{
				e->names[i] = gen_name(g);
				for (int j = 0; j < i; j++)
					if (e->names[j] == e->names[i])
					{
						i--;
						break;
					}
				if (g->nnames < 3 && i >= g->nnames - 1)
				{
					e->nnames = i + 1;
					break;
				}
			}
			qsort(e->names, (size_t) e->nnames, sizeof(e->names[0]), cmp_str);
		}
		else if (w < 53)
		{
			e->op = DLOCK_OP_CONVERT;
			e->names[0] = nheld > 0 && test_rnd(&g->rng, 10) < 8 ? held[test_rnd(&g->rng, nheld)] : gen_name(g);
		}
		else if (w < 70)
		{
			e->op = DLOCK_OP_RELEASE;
			e->mode = 0;
			e->ttl = 0;
			e->names[0] = nheld > 0 && test_rnd(&g->rng, 10) < 8 ? held[test_rnd(&g->rng, nheld)] : gen_name(g);
			if (nheld >= 2 && test_rnd(&g->rng, 20) == 0)
			{
				/* an undo of an acquire_all grant: nobody is answered */
				e->requester = DLM_NOBODY;
				e->nnames = 2;
				e->names[0] = held[0];
				e->names[1] = held[1 + test_rnd(&g->rng, nheld - 1)];
			}
		}
		else if (w < 75)
		{
			e->op = DLOCK_OP_RENEW;
			e->mode = 0;
			e->names[0] = nheld > 0 && test_rnd(&g->rng, 10) < 8 ? held[test_rnd(&g->rng, nheld)] : gen_name(g);
			e->ttl = test_rnd(&g->rng, 2) ? UNIT * (1 + test_rnd(&g->rng, 8)) : 0;
			e->max_ttl = test_rnd(&g->rng, 3) == 0 ? UNIT * (1 + test_rnd(&g->rng, 4)) : 0;
		}
		else if (w < 78)
		{
			e->op = DLOCK_OP_RELEASE_ALL;
			e->mode = 0;
			e->ttl = 0;
			e->nnames = 0;
			if (test_rnd(&g->rng, 8) == 0)
				e->requester = DLM_NOBODY;
		}
		else
		{
			/* bad input: one defect */
			e->op = DLOCK_OP_ACQUIRE;
			e->names[0] = gen_name(g);
			switch (test_rnd(&g->rng, 8))
			{
				case 0:
					e->mode = test_rnd(&g->rng, 2) ? DLOCK_NMODES : -1;
					break;
				case 1:
					e->names[0] = BAD_NAMES[test_rnd(&g->rng, (int) (sizeof(BAD_NAMES) / sizeof(BAD_NAMES[0])))];
					break;
				case 2:
					e->key = BAD_KEYS[test_rnd(&g->rng, 2)];
					break;
				case 3:
					e->op = DLOCK_OP_ACQUIRE_ALL;
					e->nnames = 2;
					e->names[0] = "b";
					e->names[1] = test_rnd(&g->rng, 2) ? "a" : "b";
					break;
				case 4:
					e->ttl = -UNIT;
					break;
				case 5:
					e->nnames = 0;
					break;
				case 6:
					/* 14.1: keep_place without a key, or on a try */
					e->keep = true;
					e->ttl = UNIT;
					if (test_rnd(&g->rng, 2))
						e->op = DLOCK_OP_TRY;
					else
						e->key = NULL;
					if (e->op == DLOCK_OP_TRY && e->key == NULL && test_rnd(&g->rng, 2))
						e->key = KEYS[0];
					break;
				default:
					e->op = (DLockOp) (test_rnd(&g->rng, 2) ? 0 : 99);
					break;
			}
		}
		if (w < 32 && e->capacity == 0 && (e->op == DLOCK_OP_ACQUIRE || e->op == DLOCK_OP_TRY) &&
			e->names[0][0] != '/' && test_rnd(&g->rng, 100) < g->sem_pct)
		{
			/* 15: permits of a semaphore; mostly its name's own capacity */
			e->capacity = test_rnd(&g->rng, 8) == 0 ? 1 + test_rnd(&g->rng, 4) : 2 + (e->names[0][0] - 'a') % 2;
			e->permits = 1 + test_rnd(&g->rng, e->capacity);
			if (g->big_capacity != 0 && e->names[0][0] == 'c' && test_rnd(&g->rng, 8) != 0)
			{
				/* 15.3: permits whose sums pass INT32_MAX */
				int32_t		c = g->big_capacity;

				e->capacity = c;
				e->permits = (int32_t[]) {1, c / 2, c / 2 + 1, c - 1, c}[test_rnd(&g->rng, 5)];
			}
			e->mode = DLOCK_MODE_NL;
			if (test_rnd(&g->rng, 40) == 0)	/* bad: more than it has, or none */
				e->permits = e->capacity < INT32_MAX ? e->capacity + 1 : 0;
		}
		if (w < 32 && e->capacity == 0 && (e->op == DLOCK_OP_ACQUIRE || e->op == DLOCK_OP_TRY) &&
			e->names[0][0] != '/' && test_rnd(&g->rng, 100) < g->elect_pct)
		{
			/* 16: a campaign for the lead */
			e->election = true;
			e->mode = DLOCK_MODE_EX;
			e->value = VALUES[test_rnd(&g->rng, NVALUES)];
			if (test_rnd(&g->rng, 40) == 0)
				e->mode = DLOCK_MODE_PR;	/* bad: a campaign is EX */
		}
		else if (w >= 70 && w < 75 && test_rnd(&g->rng, 3) == 0)
		{
			/* 16.4: a new value, by the leader mostly */
			e->op = DLOCK_OP_PROCLAIM;
			e->mode = 0;
			e->ttl = 0;
			e->max_ttl = 0;
			e->value = VALUES[test_rnd(&g->rng, NVALUES)];
		}
		if (w < 41 && !e->keep && (e->op == DLOCK_OP_ACQUIRE || e->op == DLOCK_OP_ACQUIRE_ALL) &&
			e->key && test_rnd(&g->rng, 100) < g->keep_pct)
		{
			/* 14: keep the place; mostly with the lease it needs */
			e->keep = true;
			if (e->ttl == 0 && test_rnd(&g->rng, 10) != 0)
				e->ttl = UNIT * (1 + test_rnd(&g->rng, 8));
			if (g->nkept < 4)
				g->kept[g->nkept++] = *e;
			else
				g->kept[test_rnd(&g->rng, 4)] = *e;
		}
	}
}

/* ---------------------------------------------------------------- */
/* Sequences, shrinking, printing */

static const uint64_t FIXED_HASH_SEED[2] = {0x0123456789abcdefULL, 0xfedcba9876543210ULL};

/* Run events; returns the index of the first event that mismatched, or -1. */
static int
replay(const Event *ev, int n, const uint64_t hash_seed[2], Run *run, bool *applied)
{
	int			bad = -1;

	run_init(run, hash_seed);
	for (int i = 0; i < n; i++)
	{
		bool		ok = event_applies(run, &ev[i]);

		if (applied)
			applied[i] = ok;
		if (!ok)
			continue;
		if (!run_event(run, &ev[i]))
		{
			bad = i;
			break;
		}
	}
	run_done(run);
	if (bad < 0 && run->category != CAT_NONE)
		bad = n - 1;			/* found at the end (memory) */
	return bad;
}

static void
on_alarm(int sig)
{
	(void) sig;
	_exit(10 + CAT_CRASH);
}

/* Does the sequence still fail with the same category?  In a child. */
static bool
still_fails(const Event *ev, int n, const uint64_t hash_seed[2], int category)
{
	pid_t		pid;
	int			status;

	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0)
	{
		perror("fork");
		exit(2);
	}
	if (pid == 0)
	{
		Run		   *run = calloc(1, sizeof(Run));
		int			bad;

		signal(SIGALRM, on_alarm);
		alarm(30);
		/* crashes of the core: no core dumps, no messages */
		if (!freopen("/dev/null", "w", stderr))
			_exit(2);
		bad = replay(ev, n, hash_seed, run, NULL);
		_exit(bad < 0 ? 0 : 10 + run->category);
	}
	if (waitpid(pid, &status, 0) < 0)
		return false;
	if (WIFSIGNALED(status))
		return category == CAT_CRASH;
	return WIFEXITED(status) && WEXITSTATUS(status) == 10 + category;
}

static const char *
op_name(DLockOp op)
{
	switch (op)
	{
		case DLOCK_OP_ACQUIRE:
			return "DLOCK_OP_ACQUIRE";
		case DLOCK_OP_TRY:
			return "DLOCK_OP_TRY";
		case DLOCK_OP_RELEASE:
			return "DLOCK_OP_RELEASE";
		case DLOCK_OP_RENEW:
			return "DLOCK_OP_RENEW";
		case DLOCK_OP_RELEASE_ALL:
			return "DLOCK_OP_RELEASE_ALL";
		case DLOCK_OP_CONVERT:
			return "DLOCK_OP_CONVERT";
		case DLOCK_OP_ACQUIRE_ALL:
			return "DLOCK_OP_ACQUIRE_ALL";
		case DLOCK_OP_PROCLAIM:
			return "DLOCK_OP_PROCLAIM";
		default:
			return NULL;
	}
}

static const char *
mode_c(int mode)
{
	static const char *const names[] = {
		"DLOCK_MODE_NL", "DLOCK_MODE_CR", "DLOCK_MODE_CW",
		"DLOCK_MODE_PR", "DLOCK_MODE_PW", "DLOCK_MODE_EX"
	};
	static char buf[16];

	if (mode >= 0 && mode < DLOCK_NMODES)
		return names[mode];
	snprintf(buf, sizeof(buf), "%d", mode);
	return buf;
}

static void
print_c_string(const char *s)
{
	putchar('"');
	for (; *s; s++)
	{
		if (*s == '"' || *s == '\\')
			printf("\\%c", *s);
		else if ((unsigned char) *s < 0x20 || *s == 0x7f)
			printf("\\%03o", (unsigned char) *s);
		else
			putchar(*s);
	}
	putchar('"');
}

static void
print_event_c(const Event *e)
{
	switch (e->kind)
	{
		case EV_REQUEST:
			{
				const char *op = op_name(e->op);

				printf("\t{\n");
				if (e->nnames > 0)
				{
					printf("\t\tstatic const char *const n[] = {");
					for (int i = 0; i < e->nnames; i++)
					{
						if (i)
							printf(", ");
						print_c_string(e->names[i]);
					}
					printf("};\n");
				}
				printf("\t\tDLmRequest r = {.op = ");
				if (op)
					printf("%s", op);
				else
					printf("(DLockOp) %d", (int) e->op);
				printf(", .requester = %s", e->requester == DLM_NOBODY ? "DLM_NOBODY" : "");
				if (e->requester != DLM_NOBODY)
					printf("%d", e->requester);
				printf(",\n\t\t\t.owner_key = ");
				if (e->key)
					print_c_string(e->key);
				else
					printf("NULL");
				printf(", .pid = %d, .session_start = %" PRId64 ",\n", (int) e->pid, e->start);
				printf("\t\t\t.mode = %s, .names = %s, .nnames = %d", mode_c(e->mode),
					   e->nnames > 0 ? "n" : "NULL", e->nnames);
				if (e->keep)
					printf(", .keep_place = true");
				if (e->capacity)
					printf(", .capacity = %d, .permits = %d", (int) e->capacity, (int) e->permits);
				if (e->election)
					printf(", .election = true");
				if (e->value)
				{
					printf(", .value = ");
					if (strlen(e->value) > 40)
						printf("/* %zu bytes */ \"...\"", strlen(e->value));
					else
						print_c_string(e->value);
				}
				if (e->ttl)
					printf(", .ttl_us = %" PRId64, e->ttl);
				if (e->max_ttl)
					printf(", .max_ttl_us = %" PRId64, e->max_ttl);
				if (e->role)
					printf(", .role = %u", (unsigned) e->role);
				if (e->any_role)
					printf(", .any_role = true");
				if (e->role_max)
					printf(", .role_max_locks = %" PRId64, e->role_max);
				if (e->owner_max)
					printf(", .owner_max_locks = %" PRId64, e->owner_max);
				if (e->role_max_bytes)
					printf(", .role_max_bytes = %" PRId64, e->role_max_bytes);
				if (e->owner_max_bytes)
					printf(", .owner_max_bytes = %" PRId64, e->owner_max_bytes);
				printf("};\n\n\t\tdlm_request(m, &r, %" PRId64 ");\n\t}\n", e->now);
				break;
			}
		case EV_WITHDRAW:
			printf("\t{\n\t\tstatic const int w[] = {");
			for (int i = 0; i < e->nreqs; i++)
				printf("%s%d", i ? ", " : "", e->reqs[i]);
			printf("};\n\n\t\tdlm_withdraw(m, w, %d, %" PRId64 ");\n\t}\n", e->nreqs, e->now);
			break;
		case EV_SESSION_END:
			printf("\tdlm_session_end(m, %d, %" PRId64 ", %d, %" PRId64 ");\n",
				   (int) e->pid, e->start, e->requester, e->now);
			break;
		case EV_EXPIRE:
			printf("\tdlm_expire(m, %" PRId64 ", %d);\n", e->now, e->max);
			break;
	}
	printf("\tdlm_settle(m);\n");
}

static void
print_options(void)
{
	printf("/* model readings:");
	for (size_t i = 0; i < sizeof(option_names) / sizeof(option_names[0]); i++)
		printf(" %s=%d", option_names[i].name,
			   (int) *(bool *) ((char *) &mopt + option_names[i].off));
	printf(" */\n");
}

/*
 * Shrink a failing sequence (ddmin over chunks of events), then print it
 * as C code with what differed.
 */
static void
shrink_and_print(Event *ev, int n, const uint64_t hash_seed[2], int category,
				 uint64_t seq_seed)
{
	Event	   *cand = malloc(sizeof(Event) * (size_t) (n > 0 ? n : 1));
	int			chunk = n / 2;
	int			tries = 0;
	bool	   *applied;
	Run		   *run;
	int			bad;

	if (chunk < 1)
		chunk = 1;
	while (chunk >= 1 && tries < 20000)
	{
		bool		progress = false;

		for (int start = 0; start < n && tries < 20000;)
		{
			int			k = 0;

			for (int i = 0; i < n; i++)
				if (i < start || i >= start + chunk)
					cand[k++] = ev[i];
			tries++;
			if (k > 0 && still_fails(cand, k, hash_seed, category))
			{
				memcpy(ev, cand, sizeof(Event) * (size_t) k);
				n = k;
				progress = true;
			}
			else
				start += chunk;
		}
		if (!progress)
			chunk /= 2;
	}
	free(cand);

	printf("\n/* test_model: sequence seed %" PRIu64 ", hash seed {0x%" PRIx64 ", 0x%" PRIx64
		   "}: %s mismatch, %d events after shrinking (%d tries) */\n",
		   seq_seed, hash_seed[0], hash_seed[1], category_names[category], n, tries);
	print_options();

	applied = malloc(sizeof(bool) * (size_t) (n > 0 ? n : 1));
	run = calloc(1, sizeof(Run));
	if (category == CAT_CRASH)
	{
		for (int i = 0; i < n; i++)
			applied[i] = true;
		bad = n - 1;
	}
	else
		bad = replay(ev, n, hash_seed, run, applied);
	printf("#ifndef MODEL_CASE_MANAGER\n#define MODEL_CASE_MANAGER\n"
		   "static void *\nmodel_case_alloc(void *arg, size_t size)\n{\n\t(void) arg;\n\treturn malloc(size);\n}\n\n"
		   "static void\nmodel_case_free(void *arg, void *ptr, size_t size)\n{\n\t(void) arg;\n\t(void) size;\n\tfree(ptr);\n}\n\n"
		   "static void\nmodel_case_answer(void *arg, int requester, const DLmAnswer *a)\n{\n"
		   "\t(void) arg;\n\tprintf(\"requester %%d: status %%d token %%lld expires %%lld count %%d\\n\",\n"
		   "\t\t   requester, (int) a->status, (long long) a->token, (long long) a->expires_at, (int) a->count);\n}\n\n"
		   "static DLockManager *\nmodel_case_manager(void)\n{\n\tDLmConfig\tcfg = {\n"
		   "\t\t.alloc = {model_case_alloc, model_case_free, NULL},\n"
		   "\t\t.seed = {0x%" PRIx64 "ULL, 0x%" PRIx64 "ULL},\n"
		   "\t\t.nrequesters = %d, .max_name_len = %d, .ticket_reserve = %d,\n"
		   "\t\t.queue_row_delay_us = %" PRId64 ", .max_objects = %" PRId64 ", .max_parts = %d,\n"
		   "\t\t.answer = model_case_answer\n\t};\n"
		   "\tDLockManager *m = dlm_create(&cfg);\n\n\tdlm_set_counter(m, %d);\n\treturn m;\n}\n#endif\n\n",
		   hash_seed[0], hash_seed[1], NREQ, MAX_NAME_LEN, TICKET_RESERVE,
		   queue_row_delay, max_objects, max_parts, FIRST_TICKET);
	printf("static void\ntest_model_case_%" PRIu64 "(void)\n{\n", seq_seed);
	printf("\tDLockManager *m = model_case_manager();\n\n");
	for (int i = 0; i < n; i++)
	{
		if (!applied[i])
			continue;
		if (i == bad)
			printf("\t/* the events above agree; this one does not: */\n");
		print_event_c(&ev[i]);
	}
	printf("\t/*\n");
	if (category == CAT_CRASH)
		printf("\t * the core crashed (or hung) in this sequence\n");
	else
	{
		char	   *line = run->diff;

		while (*line)
		{
			char	   *nl = strchr(line, '\n');

			if (nl)
				*nl = '\0';
			printf("\t * %s\n", line);
			if (!nl)
				break;
			line = nl + 1;
		}
	}
	printf("\t */\n\tdlm_destroy(m);\n}\n\n");
	fflush(stdout);
	free(applied);
	free(run);
}

/*
 * One sequence of len events from seq_seed.  Returns 0 if the core and the
 * model agreed, else the category of the mismatch (already printed).
 */
static int
run_sequence(uint64_t seq_seed, int len, const uint64_t hash_seed[2], bool print)
{
	Event	   *ev = malloc(sizeof(Event) * (size_t) len);
	Run		   *run = calloc(1, sizeof(Run));
	Gen			g;
	int			bad = -1;
	int			category;

	gen_init(&g, seq_seed);
	run_init(run, hash_seed);
	for (int i = 0; i < len; i++)
	{
		gen_event(&g, run->model, &ev[i]);
		if (!event_applies(run, &ev[i]))
			continue;
		if (!run_event(run, &ev[i]))
		{
			bad = i;
			break;
		}
	}
	run_done(run);
	stats->events_run += run->events;
	if (bad < 0 && run->category != CAT_NONE)
		bad = len - 1;
	category = run->category;
	if (bad >= 0)
	{
		if (print)
		{
			if (!quiet)
				printf("sequence %" PRIu64 ": %s mismatch at event %d:\n%s", seq_seed,
					   category_names[category], bad, run->diff);
			if (!no_fork)
				shrink_and_print(ev, bad + 1, hash_seed, category, seq_seed);
		}
	}
	free(ev);
	free(run);
	return bad >= 0 ? category : 0;
}

/* ---------------------------------------------------------------- */
/*
 * 18. The service: random batches through the real service (dlock_service.c)
 * over the fake store (fake_store.c), whose commits fail when told to, and
 * through the model's batch (model_batch), compared after every batch: the
 * published answers (REVOKED with its reason), every name's holders and
 * line, the expiry limit (18.4: at most the limit reaped, the soonest
 * first, all that are due when the limit did not cut, the limit moving only
 * after a batch it cut short and by at most a factor of two), what a failed
 * batch left (nothing), and the picture after a reload (18.7) against the
 * model's committed picture loaded again.  A mismatch prints the sequence's
 * seed and the batch ("-S seed" runs that sequence again).
 */

#include "fake_store.h"

#define BURST_MAX 150			/* sessions of a mass expiry: pids 5000.. */
#define SVC_REASONS 4

typedef struct Svc
{
	uint64_t	rng;
	DLockService *s;
	DLockManager *lm;
	Model	   *m;
	Model	   *committed;		/* the model as last committed */
	Run			run;			/* the diff and its category */
	int32_t		pid[NREQ];
	int64_t		start[NREQ];
	bool		dead_burst;		/* at this restart: the burst sessions are gone */
	bool		dead[NREQ];
	int			burst_pct;
	int			fail_pct;
	int			reload_pct;
	int			force_pct;
	int			key_pct;
	int			batch;
} Svc;

/* Coverage of the service sequences (shared with their children). */
typedef struct SvcStats
{
	long		batches;
	long		deferred;
	long		idle;
	long		failed;
	long		reloads;
	long		restarts;
	long		revoked;		/* REVOKED answers compared */
	long		forced;			/* force releases */
	long		cut;			/* batches the expiry limit cut short */
	long		expired;
	int			max_limit;
} SvcStats;

static SvcStats *sstats;

static bool
svc_alive(void *arg, int32_t pid, int64_t start)
{
	const Svc  *v = arg;

	if (pid >= 5000)
		return !v->dead_burst;
	for (int r = 0; r < NREQ; r++)
		if (v->pid[r] == pid && v->start[r] == start)
			return !v->dead[r];
	return true;				/* a session of the past: ended, holds nothing */
}

static bool
svc_load(Svc *v, DLockTime grace)
{
	DLmConfig	cfg;
	char		err[200];

	memset(&cfg, 0, sizeof(cfg));
	if (v->lm && !fs_drop(v->lm))
		fail(&v->run, CAT_MEMORY, "  a picture freed with %ld blocks not given back", fs.mem.live);
	v->lm = NULL;
	cfg.nrequesters = NREQ;
	cfg.max_name_len = MAX_NAME_LEN;
	cfg.ticket_reserve = TICKET_RESERVE;
	cfg.seed[0] = test_rand(&v->rng);
	cfg.seed[1] = test_rand(&v->rng);
	v->lm = fs_load(v->s, &cfg, svc_alive, v, grace, err, sizeof(err));
	if (v->lm == NULL)
		fail(&v->run, CAT_STORE, "  the load failed: %s", err);
	return v->lm != NULL;
}

/* The core's picture (the service's manager) against the model's. */
static void
svc_compare_pictures(Svc *v)
{
	static Pic	cp,
				mp;

	pic_from_model(v->m, &mp);
	pic_from_core(v->lm, &cp);
	/* a batch not committed yet (deferred) still has the locks it emptied: freed at dlm_settle */
	for (int n = 0; n < NNAMES; n++)
		cp.present[n] = cp.nh[n] + cp.nw[n] > 0;
	compare_pics(&v->run, &cp, &mp);
	check_pic(&v->run, &cp, "core", INT64_MAX, &mp);
	check_grantable(&v->run, &cp, &mp);
	if (dlm_next_expiry(v->lm) != model_next_expiry(v->m))
		fail(&v->run, CAT_PICTURE, "  next expiry: core %" PRId64 ", model %" PRId64,
			 dlm_next_expiry(v->lm), model_next_expiry(v->m));
	for (int r = 0; r < NREQ; r++)
		if ((dlm_waiter_of(v->lm, r) != NULL) != model_waiting(v->m, r))
			fail(&v->run, CAT_PICTURE, "  requester %d: waits in the core: %s, in the model: %s",
				 r, dlm_waiter_of(v->lm, r) ? "yes" : "no", model_waiting(v->m, r) ? "yes" : "no");
}

/* The answers published by the batch against the model's since the last commit. */
static void
svc_compare_answers(Svc *v, bool committed)
{
	int			nm;
	const ModelAnswer *ma = model_batch_answers(v->m, &nm);

	for (int r = 0; r < NREQ; r++)
	{
		const ModelAnswer *m = NULL;
		const FsAnswer *p = fs.published[r].any ? &fs.published[r] : NULL;
		char		cb[600],
					mb[600];

		for (int i = 0; i < nm; i++)
			if (ma[i].requester == r && ma[i].status != DLOCK_STATUS_QUEUED)
				m = &ma[i];
		if (p == NULL && m == NULL)
			continue;
		if (p)
			describe_answer(cb, sizeof(cb), p->a.status, p->a.token, p->a.expires_at,
							p->a.count, p->a.name_index, p->a.ntokens, p->tokens, p->a.error, 0);
		else
			snprintf(cb, sizeof(cb), "(nothing)");
		if (m)
			describe_answer(mb, sizeof(mb), m->status, m->token, m->expires_at, m->count,
							m->name_index, m->ntokens, m->tokens, m->error, 0);
		else
			snprintf(mb, sizeof(mb), "(nothing)");
		if (p && m)
		{
			CoreAnswer	c;

			memset(&c, 0, sizeof(c));
			c.requester = r;
			c.a = p->a;
			memcpy(c.tokens, p->tokens, sizeof(c.tokens));
			if (m->status == DLOCK_STATUS_REVOKED)
			{
				sstats->revoked++;
				if (p->a.status == DLOCK_STATUS_REVOKED && strcmp(p->reason, m->reason) != 0)
					fail(&v->run, CAT_ANSWER, "  requester %d: REVOKED with reason \"%s\", the model's \"%s\"",
						 r, p->reason, m->reason);
			}
			if (answers_agree(&c, m) && m->status != DLOCK_STATUS_DEADLOCK)
				continue;
			if (m->status == DLOCK_STATUS_DEADLOCK && p->a.status == m->status)
				continue;		/* the cycle: checked by the lock manager's sequences */
		}
		fail(&v->run, CAT_ANSWER, "  requester %d: published %s, model %s", r, cb, mb);
	}
	/* the names force-released are announced at the commit */
	if (committed)
	{
		const char *mn[16];
		int			n = model_revoked_names(v->m, mn, 16);
		bool		same = n <= 16;

		/* as a set: a name released twice in a batch may be announced twice (one NOTIFY) */
		for (int i = 0; i < n && i < 16 && same; i++)
		{
			same = false;
			for (int k = 0; k < fs.nlast_revoked; k++)
				same |= strcmp(fs.last_revoked[k], mn[i]) == 0;
		}
		for (int k = 0; k < fs.nlast_revoked && same; k++)
		{
			same = false;
			for (int i = 0; i < n && i < 16; i++)
				same |= strcmp(fs.last_revoked[k], mn[i]) == 0;
		}
		if (!same)
		{
			fail(&v->run, CAT_NOTIFY, "  the commit announced other force-released names than the model");
			for (int k = 0; k < fs.nlast_revoked; k++)
				fail(&v->run, CAT_NONE, "    announced %s", fs.last_revoked[k]);
			for (int k = 0; k < n && k < 16; k++)
				fail(&v->run, CAT_NONE, "    model %s", mn[k]);
		}
	}
	for (int r = 0; r < FS_NREQ; r++)
		fs.published[r].any = false;
}

/* The picture is thrown away and loaded again from the store; the model likewise from its committed copy. */
static void
svc_reload(Svc *v, bool restart)
{
	DLockTime	grace = 0;
	DLockTime	now;

	for (int r = 0; r < FS_NREQ; r++)
		fs.pending[r].any = false;
	/* tokens never go back: the stored counter is past every ticket a committed batch handed out */
	if (fs.store_hi < model_next_ticket(v->committed))
		fail(&v->run, CAT_COUNTER, "  the stored counter %" PRId64 " is below the committed picture's next ticket %" PRId64,
			 fs.store_hi, model_next_ticket(v->committed));
	model_destroy(v->m);
	v->m = model_copy(v->committed);
	memset(v->dead, 0, sizeof(v->dead));
	v->dead_burst = false;
	if (restart)
	{
		DLsConfig	c;
		DLmCounters counted;

		/* a new server: a new service (the statistics carried on), sessions gone, a grace */
		v->dead_burst = test_rnd(&v->rng, 2) == 0;
		for (int r = 0; r < NREQ; r++)
			v->dead[r] = test_rnd(&v->rng, 3) == 0;
		if (test_rnd(&v->rng, 2))
			grace = fs.clk + UNIT * (1 + test_rnd(&v->rng, 6));
		fs_service_config(&c);
		counted = *dls_counters(v->s);	/* the old service goes first */
		c.counters = &counted;
		if (v->lm && !fs_drop(v->lm))
			fail(&v->run, CAT_MEMORY, "  a picture freed with %ld blocks not given back", fs.mem.live);
		v->lm = NULL;
		dls_destroy(v->s);
		v->s = dls_create(&c);
		sstats->restarts++;
	}
	sstats->reloads++;
	fs.fail_commits = 0;
	now = fs.clk;				/* dls_load reads the clock before its commit */
	if (!svc_load(v, grace))
		return;
	model_reload(v->m, fs.store_hi, svc_alive, v, grace, now, restart);
	/* a session gone comes back as a new one */
	for (int r = 0; r < NREQ; r++)
		if (v->dead[r])
			v->start[r] += 1 + test_rnd(&v->rng, 3);
	memset(v->dead, 0, sizeof(v->dead));
	v->dead_burst = false;
	svc_compare_pictures(v);
	if (restart && dls_expire_limit(v->s) != DLS_EXPIRE_MIN)
		fail(&v->run, CAT_PICTURE, "  a new service's expiry limit is %d", dls_expire_limit(v->s));
	model_destroy(v->committed);
	v->committed = model_copy(v->m);
}

static const char *const SVC_NAMES[] = {"a", "b", "c", "/p", "/p/q"};
static const char *const SVC_REASON[SVC_REASONS] = {"maintenance", "stuck", "", "r4"};
static char burst_names[BURST_MAX][2];

/* One request of a free requester r into q (names: storage for its names). */
static void
svc_request(Svc *v, int r, DLmRequest *q, const char **names)
{
	int			w = test_rnd(&v->rng, 100);
	const char *key = test_rnd(&v->rng, 100) < v->key_pct ? KEYS[test_rnd(&v->rng, NKEYS)] : NULL;

	memset(q, 0, sizeof(*q));
	q->requester = r;
	q->owner_key = key;
	q->pid = v->pid[r];
	q->session_start = v->start[r];
	q->role = 1;
	q->names = names;
	q->nnames = 1;
	names[0] = SVC_NAMES[test_rnd(&v->rng, 5)];
	q->mode = (int[]) {DLOCK_MODE_CR, DLOCK_MODE_PR, DLOCK_MODE_PW, DLOCK_MODE_EX, DLOCK_MODE_EX}[test_rnd(&v->rng, 5)];
	q->ttl_us = test_rnd(&v->rng, 3) ? UNIT * (1 + test_rnd(&v->rng, 8)) : 0;
	if (w < 25)
		q->op = DLOCK_OP_ACQUIRE;
	else if (w < 35)
		q->op = DLOCK_OP_TRY;
	else if (w < 45)
		q->op = DLOCK_OP_CONVERT;
	else if (w < 62)
	{
		q->op = DLOCK_OP_RELEASE;
		q->ttl_us = 0;
	}
	else if (w < 75)
		q->op = DLOCK_OP_RENEW;
	else if (w < 78)
	{
		q->op = DLOCK_OP_RELEASE_ALL;
		q->nnames = 0;
		q->ttl_us = 0;
	}
	else if (w < 78 + v->force_pct)
	{
		/* 18.5: an administrator's release, of every holder or one key's; or all of a key */
		q->any_role = true;
		q->value = SVC_REASON[test_rnd(&v->rng, SVC_REASONS)];
		q->ttl_us = 0;
		if (test_rnd(&v->rng, 4) == 0)
		{
			q->op = DLOCK_OP_FORCE_RELEASE_ALL;
			q->owner_key = KEYS[test_rnd(&v->rng, NKEYS)];
			q->nnames = 0;
		}
		else
		{
			q->op = DLOCK_OP_FORCE_RELEASE;
			q->owner_key = test_rnd(&v->rng, 2) ? KEYS[test_rnd(&v->rng, NKEYS)] : NULL;
		}
		sstats->forced++;
	}
	else
		q->op = DLOCK_OP_ACQUIRE;
}

static const char *
op_word(DLockOp op)
{
	const char *n = op_name(op);

	return op == DLOCK_OP_FORCE_RELEASE ? "FORCE_RELEASE" :
		op == DLOCK_OP_FORCE_RELEASE_ALL ? "FORCE_RELEASE_ALL" : n ? n + 9 : "?";
}

/* What the batch that disagreed held, for the report. */
static void
svc_describe_batch(Svc *v, DLsOutcome o, DLockTime now, int limit, const DLsWithdrawal *w, int nw,
				   const DLsSessionEnd *e, int ne, const DLmRequest *q, int nq)
{
	static const char *const outcome[] = {"IDLE", "DEFERRED", "DONE", "FAILED"};
	int			burst = 0;

	fail(&v->run, CAT_NONE, "  the batch: %s at %" PRId64 ", expiry limit %d", outcome[o], now, limit);
	for (int i = 0; i < nw; i++)
		fail(&v->run, CAT_NONE, "    withdraw requester %d", w[i].requester);
	for (int i = 0; i < ne; i++)
		fail(&v->run, CAT_NONE, "    session %d/%" PRId64 " ends (requester %d)",
			 (int) e[i].pid, e[i].session_start, e[i].requester);
	for (int i = 0; i < nq; i++)
	{
		if (q[i].requester == DLM_NOBODY && q[i].pid >= 5000)
		{
			burst++;
			continue;
		}
		fail(&v->run, CAT_NONE, "    requester %d: %s %s %s by %s ttl %" PRId64 "%s%s",
			 q[i].requester, op_word(q[i].op), q[i].nnames ? q[i].names[0] : "-",
			 dlock_mode_name(q[i].mode), owner_str(q[i].owner_key, q[i].pid, q[i].session_start),
			 q[i].ttl_us, q[i].value ? " reason " : "", q[i].value ? q[i].value : "");
	}
	if (burst)
		fail(&v->run, CAT_NONE, "    and %d TRY PR by sessions 5000.. (nobody answered)", burst);
}

/* One batch, through both; false once they disagree. */
static bool
svc_batch(Svc *v)
{
	static DLmRequest q[NREQ + BURST_MAX];
	static const char *names[NREQ + BURST_MAX][1];
	DLsRequest	sq[NREQ + BURST_MAX];
	DLsRequest *fresh[NREQ + BURST_MAX];
	DLsWithdrawal sw[NREQ];
	int			mw[NREQ];
	DLsSessionEnd se[1];
	ModelSessionEnd me[1];
	DLsBatch	b;
	ModelBatch	mb;
	int			nw = 0,
				ne = 0,
				nq = 0;
	bool		busy[NREQ] = {false};
	bool		injected = false;
	int			limit = dls_expire_limit(v->s);
	int			published_before = fs.publishes;
	int			commits_before = fs.commits;
	int			expired = 0;
	DLockTime	now;
	DLsOutcome	o;
	char		err[200];

	v->batch++;
	fs.clk += UNIT * test_rnd(&v->rng, 4);
	if (test_rnd(&v->rng, 50) == 0)
		fs.clk += UNIT * 10;	/* a pause: leases run out */
	/* (a) waiting requests given up; a request given up before it was decided */
	for (int r = 0; r < NREQ; r++)
		if ((model_waiting(v->m, r) && test_rnd(&v->rng, 10) == 0) ||
			(!model_waiting(v->m, r) && test_rnd(&v->rng, 60) == 0))
		{
			sw[nw] = (DLsWithdrawal) {r, test_rnd(&v->rng, 2) == 0};
			mw[nw++] = r;
			busy[r] = true;
		}
	/* (b) a session ends (its requester's wait with it, mostly) */
	if (test_rnd(&v->rng, 40) == 0)
	{
		int			r = test_rnd(&v->rng, NREQ);
		int			who = busy[r] || test_rnd(&v->rng, 8) == 0 ? DLM_NOBODY : r;

		se[0] = (DLsSessionEnd) {v->pid[r], v->start[r], who, NULL};
		me[0] = (ModelSessionEnd) {v->pid[r], v->start[r], who};
		ne = 1;
		busy[r] = true;
		v->start[r] += 1 + test_rnd(&v->rng, 3);
	}
	/* (d) new requests; after a failure, one per batch */
	for (int r = 0; r < NREQ; r++)
	{
		if (busy[r] || model_waiting(v->m, r) || test_rnd(&v->rng, 2))
			continue;
		if (dls_isolating(v->s) && nq > 0)
			break;
		svc_request(v, r, &q[nq], names[nq]);
		nq++;
	}
	if (!dls_isolating(v->s) && test_rnd(&v->rng, 100) < v->burst_pct)
	{
		/* a crowd of short leases, nobody waiting for the answers: a mass expiry to come */
		int			n = 20 + test_rnd(&v->rng, BURST_MAX - 20);
		int64_t		ttl = UNIT * (1 + test_rnd(&v->rng, 5));

		for (int i = 0; i < n; i++)
		{
			DLmRequest *x = &q[nq];

			memset(x, 0, sizeof(*x));
			x->op = DLOCK_OP_TRY;
			x->requester = DLM_NOBODY;
			x->pid = 5000 + i;
			x->session_start = 1;
			x->mode = DLOCK_MODE_PR;
			names[nq][0] = burst_names[i];
			x->names = names[nq];
			x->nnames = 1;
			x->ttl_us = ttl;
			x->role = 1;
			nq++;
		}
	}
	for (int i = 0; i < nq; i++)
	{
		memset(&sq[i], 0, sizeof(sq[i]));
		sq[i].q = q[i];
		fresh[i] = &sq[i];
	}
	if (test_rnd(&v->rng, 100) < v->fail_pct)
	{
		fs.fail_commits = 1;
		injected = true;
	}
	memset(&b, 0, sizeof(b));
	b.withdrawn = sw;
	b.nwithdrawn = nw;
	b.ended = se;
	b.nended = ne;
	b.fresh = fresh;
	b.nfresh = nq;
	now = fs.clk;				/* the service reads the clock first */
	o = dls_batch(v->s, &b, err, sizeof(err));
	sstats->batches++;
	if (o == DLS_IDLE)
	{
		sstats->idle++;
		fs.fail_commits = 0;
		if (nw + ne + nq > 0)
			fail(&v->run, CAT_ANSWER, "  a batch with work was idle");
		if (model_next_expiry(v->m) != 0 && model_next_expiry(v->m) <= now)
			fail(&v->run, CAT_PICTURE, "  idle with a lease due at %" PRId64 " (now %" PRId64 ")",
				 model_next_expiry(v->m), now);
		return v->run.category == CAT_NONE;
	}
	memset(&mb, 0, sizeof(mb));
	mb.withdrawn = mw;
	mb.nwithdrawn = nw;
	mb.ended = me;
	mb.nended = ne;
	mb.fresh = q;
	mb.nfresh = nq;
	expired = model_batch(v->m, &mb, now, limit);
	sstats->expired += expired;
	sstats->cut += expired == limit;
	if (limit > sstats->max_limit)
		sstats->max_limit = limit;
	/* 18.4: every lease due is gone unless the limit cut the batch short */
	if (expired < limit && dlm_next_expiry(v->lm) != 0 && dlm_next_expiry(v->lm) <= now)
		fail(&v->run, CAT_PICTURE, "  a lease due at %" PRId64 " left at %" PRId64 " (%d expired, limit %d)",
			 dlm_next_expiry(v->lm), now, expired, limit);
	if (o == DLS_DONE)
	{
		int			nl = dls_expire_limit(v->s);

		if (expired < limit ? nl != limit :
			nl < (limit / 2 > DLS_EXPIRE_MIN ? limit / 2 : DLS_EXPIRE_MIN) ||
			nl > (limit * 2 < DLS_EXPIRE_MAX ? limit * 2 : DLS_EXPIRE_MAX))
			fail(&v->run, CAT_PICTURE, "  the expiry limit went from %d to %d after %d expired",
				 limit, nl, expired);
	}
	else if (dls_expire_limit(v->s) != limit)
		fail(&v->run, CAT_PICTURE, "  the expiry limit moved in a batch not done");
	if (o == DLS_FAILED)
	{
		DLsFailure	f;

		sstats->failed++;
		if (!injected || fs.fail_commits != 0)
			fail(&v->run, CAT_STORE, "  the batch failed: %s", err);
		if (fs.publishes != published_before)
			fail(&v->run, CAT_ANSWER, "  a failed batch published");
		dls_fail(v->s, &f);
		if (v->run.category == CAT_NONE)
			svc_reload(v, false);
		return v->run.category == CAT_NONE;
	}
	fs.fail_commits = 0;
	svc_compare_pictures(v);
	if (o == DLS_DEFERRED)
	{
		int			nm;
		const ModelAnswer *ma = model_batch_answers(v->m, &nm);

		sstats->deferred++;
		if (expired > 0)
			fail(&v->run, CAT_STORE, "  a batch that expired %d leases was deferred", expired);
		for (int i = 0; i < nm; i++)
			if (ma[i].status != DLOCK_STATUS_QUEUED)
				fail(&v->run, CAT_STORE, "  a batch that answered requester %d was deferred", ma[i].requester);
	}
	else
	{
		svc_compare_answers(v, fs.commits != commits_before);
		model_commit(v->m);
		model_destroy(v->committed);
		v->committed = model_copy(v->m);
	}
	if (v->run.category == CAT_NONE && test_rnd(&v->rng, 100) < v->reload_pct)
		svc_reload(v, test_rnd(&v->rng, 2) == 0);
	if (v->run.category != CAT_NONE)
		svc_describe_batch(v, o, now, limit, sw, nw, se, ne, q, nq);
	return v->run.category == CAT_NONE;
}

/* One service sequence; 0 if the service and the model agreed, else the category (printed). */
static int
svc_sequence(uint64_t seed)
{
	Svc		   *v = calloc(1, sizeof(Svc));
	DLsConfig	c;
	int			len;
	int			category;

	v->rng = seed;
	len = 200 + test_rnd(&v->rng, 801);
	for (int r = 0; r < NREQ; r++)
	{
		v->pid[r] = 100 + r;
		v->start[r] = 1;
	}
	v->burst_pct = (int[]) {0, 2, 5}[test_rnd(&v->rng, 3)];
	v->fail_pct = (int[]) {0, 3, 8}[test_rnd(&v->rng, 3)];
	v->reload_pct = (int[]) {0, 1, 3}[test_rnd(&v->rng, 3)];
	v->force_pct = (int[]) {4, 8, 15}[test_rnd(&v->rng, 3)];
	v->key_pct = (int[]) {30, 60, 90}[test_rnd(&v->rng, 3)];
	fs_reset();
	fs.store_hi = FIRST_TICKET;
	fs.commit_cost_per_row = (DLockTime[]) {0, 10, 100, 400}[test_rnd(&v->rng, 4)];
	fs_service_config(&c);
	v->s = dls_create(&c);
	v->m = model_create(NREQ, 0, MAX_NAME_LEN, &mopt);
	v->committed = model_copy(v->m);
	if (svc_load(v, 0))
	{
		model_reload(v->m, fs.store_hi, NULL, NULL, 0, fs.clk, false);
		model_destroy(v->committed);
		v->committed = model_copy(v->m);
		for (int i = 0; i < len; i++)
			if (!svc_batch(v))
			{
				printf("service sequence %" PRIu64 ": %s mismatch at batch %d (rerun: test/test_model -S %" PRIu64 "):\n%s",
					   seed, category_names[v->run.category], v->batch, seed, v->run.diff);
				break;
			}
	}
	if (v->lm && !fs_drop(v->lm) && v->run.category == CAT_NONE)
		fail(&v->run, CAT_MEMORY, "  a picture freed with %ld blocks not given back", fs.mem.live);
	dls_destroy(v->s);
	model_destroy(v->m);
	model_destroy(v->committed);
	category = v->run.category;
	free(v);
	return category;
}

/* Service sequences until 'batches' batches ran (each in a child: a crash is a failure). */
static void
svc_run(long batches, uint64_t seed, bool one, int *passed, int *failed)
{
	uint64_t	rng = seed ^ 0x5e41ce5e41ce5eULL;
	long		done = 0;

	for (int i = 0; i < BURST_MAX; i++)
	{
		/* the crowd spreads over a, b and c: at most BURST_MAX / 3 + 1 holders each */
		burst_names[i][0] = (char) ('a' + i % 3);
		burst_names[i][1] = '\0';
	}
	while (one || done < batches)
	{
		uint64_t	s = one ? seed : test_rand(&rng);
		uint64_t	x = s;
		int			len = 200 + test_rnd(&x, 801);
		int			result;
		pid_t		pid;
		int			status;

		fflush(stdout);
		pid = no_fork ? 0 : fork();
		if (pid < 0)
		{
			perror("fork");
			exit(2);
		}
		if (pid == 0)
		{
			result = svc_sequence(s);
			if (no_fork)
				goto counted;
			fflush(stdout);
			_exit(result == 0 ? 0 : 10 + result);
		}
		waitpid(pid, &status, 0);
		if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
			result = 0;
		else if (WIFEXITED(status) && WEXITSTATUS(status) >= 10)
			result = WEXITSTATUS(status) - 10;
		else
		{
			result = CAT_CRASH;
			printf("service sequence %" PRIu64 ": crashed (rerun: test/test_model -S %" PRIu64 ")\n", s, s);
		}
counted:
		if (result == 0)
			(*passed)++;
		else
			(*failed)++;
		done += len;
		if (one)
			break;
	}
}

int
main(int argc, char **argv)
{
	long		total = 100000;
	long		svc_batches = -1;	/* -b; default: total / 10 */
	bool		svc_one = false;	/* -S seed: that service sequence alone */
	uint64_t	svc_seed = 0;
	uint64_t	seed = 1;
	uint64_t	rng;
	long		events = 0;
	int			passed = 0,
				failed = 0,
				printed = 0,
				reseeded = 0;
	int			argi = 1;

	memset(VALUE_MAX, 'x', DLOCK_MAX_VALUE_LEN);
	memset(VALUE_OVER, 'y', DLOCK_MAX_VALUE_LEN + 1);
	int			by_kind[16] = {0};
	struct timespec t0,
				t1;

	model_default_options(&mopt);
	stats = mmap(NULL, sizeof(Stats), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (stats == MAP_FAILED)
	{
		perror("mmap");
		return 2;
	}
	memset(stats, 0, sizeof(*stats));
	sstats = mmap(NULL, sizeof(SvcStats), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sstats == MAP_FAILED)
	{
		perror("mmap");
		return 2;
	}
	memset(sstats, 0, sizeof(*sstats));
	for (int a = 0; a < NNAMES; a++)
		for (int d = 0; d < NNAMES; d++)
		{
			size_t		la = strlen(NAMES[a]);

			is_ancestor[a][d] = NAMES[a][0] == '/' && strlen(NAMES[d]) > la &&
				strncmp(NAMES[a], NAMES[d], la) == 0 && NAMES[d][la] == '/';
		}

	while (argi < argc && argv[argi][0] == '-' && argv[argi][1] != '\0' &&
		   !(argv[argi][1] >= '0' && argv[argi][1] <= '9'))
	{
		const char *o = argv[argi++];

		if (strcmp(o, "-m") == 0)
			model_only = true;
		else if (strcmp(o, "-F") == 0)
			no_fork = true;
		else if (strcmp(o, "-q") == 0)
			quiet = true;
		else if (strcmp(o, "-b") == 0 && argi < argc)
			svc_batches = atol(argv[argi++]);
		else if (strcmp(o, "-S") == 0 && argi < argc)
		{
			svc_one = true;
			svc_seed = strtoull(argv[argi++], NULL, 0);
		}
		else if (strcmp(o, "-K") == 0 && argi < argc &&
				 strcmp(argv[argi], "spec") == 0)
		{
			skip_spec = true;
			argi++;
		}
		else if (strcmp(o, "-O") == 0 && argi < argc)
		{
			const char *spec = argv[argi++];
			const char *eq = strchr(spec, '=');
			bool		found = false;

			for (size_t i = 0; i < sizeof(option_names) / sizeof(option_names[0]); i++)
				if (eq && strncmp(spec, option_names[i].name, (size_t) (eq - spec)) == 0 &&
					option_names[i].name[eq - spec] == '\0')
				{
					*(bool *) ((char *) &mopt + option_names[i].off) = atoi(eq + 1) != 0;
					found = true;
				}
			if (!found)
			{
				fprintf(stderr, "readings (-O name=0|1):\n");
				for (size_t i = 0; i < sizeof(option_names) / sizeof(option_names[0]); i++)
					fprintf(stderr, "  %s (default %d)\n", option_names[i].name,
							(int) *(bool *) ((char *) &mopt + option_names[i].off));
				return 2;
			}
		}
		else
		{
			fprintf(stderr, "usage: %s [-m] [-F] [-q] [-K spec] [-O reading=0|1] [-b batches] [-S seed] [events] [seed]\n", argv[0]);
			return 2;
		}
	}
	if (argi < argc)
		total = atol(argv[argi++]);
	if (argi < argc)
		seed = strtoull(argv[argi++], NULL, 0);
	rng = seed;
	if (svc_batches < 0)
		svc_batches = getenv("DLOCK_MODEL_BATCHES") ? atol(getenv("DLOCK_MODEL_BATCHES")) : total / 2;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (svc_one)
		total = 0;
	while (events < total)
	{
		uint64_t	seq_seed = test_rand(&rng);
		int			len = 200 + test_rnd(&rng, 1801);
		uint64_t	hash_seed[2] = {FIXED_HASH_SEED[0], FIXED_HASH_SEED[1]};
		int			result;
		bool		print = printed < 3;

		if (len > total - events)
			len = (int) (total - events);
		queue_row_delay = (passed + failed) % 3 == 2 ? UNIT * (1 + (int64_t) (seq_seed % 6)) : 0;
		max_objects = (passed + failed) % 5 == 4 ? 4 + (int64_t) (seq_seed % 20) : 0;
		max_parts = (passed + failed) % 5 == 4 ? 1 + (int) (seq_seed % 5) : 0;
		/* one sequence in four also runs with a fresh hash seed */
		if ((passed + failed) % 4 == 3)
		{
			hash_seed[0] = test_rand(&rng);
			hash_seed[1] = test_rand(&rng);
			reseeded++;
		}
		if (no_fork || model_only)
			result = run_sequence(seq_seed, len, hash_seed, print);
		else
		{
			pid_t		pid;
			int			status;

			fflush(stdout);
			pid = fork();
			if (pid < 0)
			{
				perror("fork");
				return 2;
			}
			if (pid == 0)
			{
				int			r = run_sequence(seq_seed, len, hash_seed, print);

				fflush(stdout);
				_exit(r == 0 ? 0 : 10 + r);
			}
			waitpid(pid, &status, 0);
			if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
				result = 0;
			else if (WIFEXITED(status) && WEXITSTATUS(status) >= 10)
				result = WEXITSTATUS(status) - 10;
			else
			{
				/* the core crashed: shrink here (regenerating the events) */
				result = CAT_CRASH;
				printf("sequence %" PRIu64 ": the core crashed (%s)\n", seq_seed,
					   WIFSIGNALED(status) ? strsignal(WTERMSIG(status)) : "exit");
				if (print)
				{
					Event	   *ev = malloc(sizeof(Event) * (size_t) len);
					Model	   *mm = model_create(NREQ, FIRST_TICKET, MAX_NAME_LEN, &mopt);

					model_set_limits(mm, max_objects, max_parts);
					Gen			g;

					/* the events, from the model alone */
					gen_init(&g, seq_seed);
					for (int i = 0; i < len; i++)
					{
						Run			r0;

						memset(&r0, 0, sizeof(r0));
						r0.model = mm;
						gen_event(&g, mm, &ev[i]);
						if (!event_applies(&r0, &ev[i]))
							continue;
						switch (ev[i].kind)
						{
							case EV_REQUEST:
								{
									DLmRequest	rq;

									to_request(&ev[i], &rq);
									model_request(mm, &rq, ev[i].now);
									break;
								}
							case EV_WITHDRAW:
								model_withdraw(mm, ev[i].reqs, ev[i].nreqs, ev[i].now);
								break;
							case EV_SESSION_END:
								model_session_end(mm, ev[i].pid, ev[i].start, ev[i].requester, ev[i].now);
								break;
							case EV_EXPIRE:
								model_expire(mm, ev[i].now, ev[i].max);
								break;
						}
						model_settle(mm);
					}
					model_destroy(mm);
					shrink_and_print(ev, len, hash_seed, CAT_CRASH, seq_seed);
					free(ev);
				}
			}
		}
		if (result == 0)
			passed++;
		else
		{
			if (result > 0 && result < 16)
				by_kind[result]++;
			failed++;
			if (print)
				printed++;
		}
		events += len;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (!model_only)
	{
		struct timespec s0,
					s1;
		int			sp = 0,
					sf = 0;

		clock_gettime(CLOCK_MONOTONIC, &s0);
		svc_run(svc_batches, svc_one ? svc_seed : seed, svc_one, &sp, &sf);
		clock_gettime(CLOCK_MONOTONIC, &s1);
		printf("model: the service (18): %ld batches in %d sequences (%d failed), %.2f s: "
			   "%ld deferred, %ld idle, %ld failed commits, %ld reloads (%ld restarts), "
			   "%ld leases expired (%ld batches cut short by the limit, which reached %d), "
			   "%ld force releases, %ld REVOKED answers\n",
			   sstats->batches, sp + sf, sf,
			   (double) (s1.tv_sec - s0.tv_sec) + (double) (s1.tv_nsec - s0.tv_nsec) / 1e9,
			   sstats->deferred, sstats->idle, sstats->failed, sstats->reloads, sstats->restarts,
			   sstats->expired, sstats->cut, sstats->max_limit, sstats->forced, sstats->revoked);
		passed += sp;
		failed += sf;
	}
	printf("model: %ld events run (%ld generated) in %d sequences (%d with a fresh hash seed), %.2f s%s\n",
		   stats->events_run, events, passed + failed, reseeded,
		   (double) (t1.tv_sec - t0.tv_sec) + (double) (t1.tv_nsec - t0.tv_nsec) / 1e9,
		   model_only ? ", the model alone" : "");
	if (!quiet)
	{
		printf("model: answers:");
		for (int i = 1; i <= DLOCK_STATUS_KEPT; i++)
			if (stats->status[i])
				printf(" %s %ld", status_name((DLockStatus) i), stats->status[i]);
		printf("; acquire_all grants of several names %ld, leases expired %ld, announced %ld,"
			   " deadlock cycle steps checked %ld, requests keeping their place %ld,"
			   " semaphore requests %ld, leader changes %ld\n",
			   stats->group_grants, stats->expired,
			   stats->announced, stats->deadlock_steps, stats->keep_requests,
			   stats->semaphore_requests, stats->leader_changes);
		if (skip_spec)
			printf("model: README findings let pass (-K spec): %ld grantable requests left waiting,"
				   " %ld conflicting holder pairs\n", stats->spec_waiting, stats->spec_conflicts);
	}
	if (failed > 0)
	{
		printf("model: failed sequences by the first mismatch:");
		for (int i = 1; i < 16; i++)
			if (by_kind[i])
				printf(" %s %d", category_names[i], by_kind[i]);
		printf("\n");
	}
	printf("model: %d passed, %d failed\n", passed, failed);
	return failed == 0 ? 0 : 1;
}
