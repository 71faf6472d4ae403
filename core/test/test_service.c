/* SPDX-License-Identifier: PostgreSQL */
/*
 * test_service.c
 *		The service (dlock_service.c) over an in-memory fake store whose
 *		commits fail when told to: the batch's order, deferral, the expiry
 *		limit, publish after commit, loading after a failure, isolation of
 *		a failing request, force release and revocations, and the shared
 *		rules.  A random run with injected commit failures checks after
 *		every batch that no answer went out before its commit, that the
 *		reloaded picture equals the store, and that tokens never go back.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "fake_store.h"
#include "test_check.h"

#define NREQ FS_NREQ
#define EX DLOCK_MODE_EX
#define SEC ((DLockTime) 1000000)

static DLockService *S;
static DLockManager *LM;

static void
drop_picture(void)
{
	CHECK(fs_drop(LM));
	LM = NULL;
}

static int
load(void)
{
	DLmConfig	cfg = {0};
	char		err[200];

	drop_picture();
	cfg.nrequesters = NREQ;
	cfg.max_name_len = 63;
	cfg.ticket_reserve = 100;
	cfg.queue_row_delay_us = 50000;
	LM = fs_load(S, &cfg, NULL, NULL, 0, err, sizeof(err));
	if (LM == NULL)
	{
		fprintf(stderr, "load failed: %s\n", err);
		return -1;
	}
	return 0;
}

static void
setup(void)
{
	DLsConfig	c;

	dls_destroy(S);
	drop_picture();
	fs_reset();
	fs_service_config(&c);
	S = dls_create(&c);
	CHECK(S != NULL);
	CHECK(load() == 0);
}

/* ------------------------------------------------------------ requests */

static DLsRequest reqs[NREQ];
static DLsRequest *fresh[NREQ];
static int	nfresh;
static const char *names_of[NREQ][1];

static DLsRequest *
req(DLockOp op, int requester, int session, const char *key, const char *name,
	int64_t ttl)
{
	DLsRequest *r = &reqs[requester];

	memset(r, 0, sizeof(*r));
	names_of[requester][0] = name;
	r->q.op = op;
	r->q.requester = requester;
	r->q.owner_key = key;
	r->q.pid = 100 + session;
	r->q.session_start = 7;
	r->q.mode = EX;
	r->q.names = names_of[requester];
	r->q.nnames = 1;
	r->q.ttl_us = ttl;
	r->q.role = 10;
	fresh[nfresh++] = r;
	return r;
}

static DLsOutcome
batch_with(const DLsWithdrawal *w, int nw, const DLsSessionEnd *e, int ne)
{
	DLsBatch	b = {0};
	char		err[200];
	DLsOutcome	o;

	b.withdrawn = w;
	b.nwithdrawn = nw;
	b.ended = e;
	b.nended = ne;
	b.fresh = fresh;
	b.nfresh = nfresh;
	o = dls_batch(S, &b, err, sizeof(err));
	nfresh = 0;
	return o;
}

static DLsOutcome
batch(void)
{
	return batch_with(NULL, 0, NULL, 0);
}

static DLockStatus
status_of(int requester)
{
	return fs.published[requester].any ? fs.published[requester].a.status : DLOCK_STATUS_NONE;
}

static void
forget(int requester)
{
	fs.published[requester].any = false;
}

/* --------------------------------------------------------------- tests */

/* A grant is published after its commit; an idle batch does nothing. */
static void
test_publish_after_commit(void)
{
	setup();
	CHECK(batch() == DLS_IDLE);
	/* nothing in it, but the adapter needs it published (an inspection) */
	{
		DLsBatch	b = {0};
		char		err[100];
		int			before = fs.publishes;

		b.no_defer = true;
		CHECK(dls_batch(S, &b, err, sizeof(err)) == DLS_DONE);
		CHECK(fs.publishes == before + 1);
	}
	req(DLOCK_OP_ACQUIRE, 0, 0, NULL, "x", 0);
	CHECK(batch() == DLS_DONE);
	CHECK(status_of(0) == DLOCK_STATUS_GRANTED);
	CHECK(fs.nstore == 1 && fs.store[0].r.token == fs.published[0].a.token);
	CHECK(fs.early_publish == 0);
	/* a failed commit publishes nothing */
	fs.fail_commits = 1;
	req(DLOCK_OP_ACQUIRE, 1, 1, NULL, "y", 0);
	CHECK(batch() == DLS_FAILED);
	CHECK(status_of(1) == DLOCK_STATUS_NONE);
	CHECK(fs.early_publish == 0);
}

/*
 * A batch that answers nobody (a waiter queued) leaves its writes to the
 * next batch's commit, for at most DLS_DEFER_US; the next answer carries
 * them.
 */
static void
test_deferral(void)
{
	int			before;
	DLsOutcome	o;

	setup();
	req(DLOCK_OP_ACQUIRE, 0, 0, NULL, "x", 0);
	CHECK(batch() == DLS_DONE);
	before = fs.commits;
	req(DLOCK_OP_ACQUIRE, 1, 1, NULL, "x", 0);	/* queues: no answer */
	o = batch();
	CHECK(o == DLS_DEFERRED);
	CHECK(fs.commits == before);
	CHECK(dls_next_wake(S) == fs.clk + DLS_DEFER_US);
	CHECK(!dls_work_due(S, fs.clk + DLS_DEFER_US - 1));
	CHECK(dls_work_due(S, fs.clk + DLS_DEFER_US));
	/* the release answers: one commit for both */
	req(DLOCK_OP_RELEASE, 0, 0, NULL, "x", 0);
	CHECK(batch() == DLS_DONE);
	CHECK(fs.commits == before + 1);
	CHECK(status_of(0) == DLOCK_STATUS_RELEASED);
	CHECK(status_of(1) == DLOCK_STATUS_GRANTED);
	/* a deferral ends by itself once its time is up; an empty pass before is no batch */
	req(DLOCK_OP_ACQUIRE, 2, 2, NULL, "x", 0);
	CHECK(batch() == DLS_DEFERRED);
	CHECK(dls_deferred(S) == 1);
	CHECK(batch() == DLS_IDLE);
	CHECK(dls_deferred(S) == 1);
	fs.clk += DLS_DEFER_US;
	CHECK(batch() == DLS_DONE);
	CHECK(fs.commits == before + 2);
	/* no_defer: committed at once */
	req(DLOCK_OP_ACQUIRE, 4, 4, NULL, "nd", 0);
	CHECK(batch() == DLS_DONE);
	CHECK(fs.commits == before + 3);
	req(DLOCK_OP_ACQUIRE, 3, 3, NULL, "nd", 0);
	{
		DLsBatch	b = {0};
		char		err[100];

		b.fresh = fresh;
		b.nfresh = nfresh;
		b.no_defer = true;
		CHECK(dls_batch(S, &b, err, sizeof(err)) == DLS_DONE);
		nfresh = 0;
	}
	CHECK(fs.commits == before + 4);
	/* at most DLS_MAX_DEFERRED in a row: each new waiter is announced, nobody answered */
	{
		static char lk[DLS_MAX_DEFERRED + 1][16];
		DLsOutcome	o = DLS_DONE;
		int			n = 0;

		for (int i = 0; i <= DLS_MAX_DEFERRED; i++)
		{
			snprintf(lk[i], sizeof(lk[i]), "L%d", i);
			req(DLOCK_OP_ACQUIRE, 10, 10, NULL, lk[i], 0);
			CHECK(batch() == DLS_DONE);
		}
		before = fs.commits;
		for (int i = 0; i <= DLS_MAX_DEFERRED; i++)
		{
			req(DLOCK_OP_ACQUIRE, 100 + i, 100 + i, NULL, lk[i], 0);
			o = batch();
			if (o != DLS_DEFERRED)
				break;
			n++;
		}
		CHECK(n == DLS_MAX_DEFERRED);
		CHECK(o == DLS_DONE && fs.commits == before + 1);
	}
}

/* Withdrawals go first; a withdraw_after keeps the request's place. */
static void
test_order(void)
{
	DLsWithdrawal w = {1, true};
	DLsSessionEnd e = {100 + 0, 7, DLM_NOBODY, NULL};

	setup();
	req(DLOCK_OP_ACQUIRE, 0, 0, NULL, "x", 0);
	CHECK(batch() == DLS_DONE);
	req(DLOCK_OP_ACQUIRE, 1, 1, NULL, "x", 0);
	(void) batch();
	/* a request given up before it was decided: CANCELED, never run */
	{
		DLsWithdrawal w5 = {5, false};

		req(DLOCK_OP_ACQUIRE, 5, 5, NULL, "fresh", 0);
		nfresh = 0;				/* collected as a withdrawal only */
		CHECK(batch_with(&w5, 1, NULL, 0) == DLS_DONE);
		CHECK(status_of(5) == DLOCK_STATUS_CANCELED);
		CHECK(dlm_lookup(LM, "fresh") == NULL);
		CHECK(dls_counters(S)->cancels == 0);
	}
	/* waiter 1 withdrawn and session 0 ended in one batch: 1 is not granted */
	CHECK(batch_with(&w, 1, &e, 1) == DLS_DONE);
	CHECK(dlm_lookup(LM, "x") == NULL);
	CHECK(dls_counters(S)->timeouts == 1);
	CHECK(fs.nstore == 0);
	/* keep_place given up before it was decided: queued, then kept */
	req(DLOCK_OP_ACQUIRE, 0, 0, NULL, "x", 0);
	CHECK(batch() == DLS_DONE);
	{
		DLsRequest *r = req(DLOCK_OP_ACQUIRE, 2, 2, "k2", "x", 10 * SEC);

		r->q.keep_place = true;
		r->withdraw_after = true;
	}
	CHECK(batch() == DLS_DONE);
	CHECK(status_of(2) == DLOCK_STATUS_KEPT);
	/*
	 * Withdrawals all at once: PR held, EX waits, PR waits behind it; both
	 * withdrawn in one batch, the second is not granted on the way.
	 */
	{
		DLsWithdrawal two[2] = {{21, false}, {22, false}};

		req(DLOCK_OP_ACQUIRE, 20, 20, NULL, "w", 0)->q.mode = DLOCK_MODE_PR;
		CHECK(batch() == DLS_DONE);
		req(DLOCK_OP_ACQUIRE, 21, 21, NULL, "w", 0);
		(void) batch();
		req(DLOCK_OP_ACQUIRE, 22, 22, NULL, "w", 0)->q.mode = DLOCK_MODE_PR;
		(void) batch();
		CHECK(status_of(22) == DLOCK_STATUS_NONE);
		CHECK(batch_with(two, 2, NULL, 0) == DLS_DONE);
		CHECK(status_of(21) == DLOCK_STATUS_CANCELED);
		CHECK(status_of(22) == DLOCK_STATUS_CANCELED);
		CHECK(dls_counters(S)->cancels == 2);
		CHECK(dlm_lookup(LM, "w") && dlm_lookup(LM, "w")->nheld[DLOCK_MODE_PR] == 1);
	}
}

/* A mass expiry is spread over batches by the learnt limit. */
static void
test_expiry_limit(void)
{
	static char keys[50][16];
	static char names[3000][16];
	int			batches = 0;
	int			last_limit;

	setup();
	for (int i = 0; i < 3000; i++)
	{
		snprintf(names[i], sizeof(names[i]), "n%d", i);
		snprintf(keys[i % 50], sizeof(keys[i % 50]), "k%d", i % 50);
		/* requester 0 for all: each answered and published by its batch */
		req(DLOCK_OP_ACQUIRE, 0, 0, keys[i % 50], names[i], SEC);
		CHECK(batch() == DLS_DONE);
	}
	CHECK(fs.nstore == 3000);
	CHECK(dls_expire_limit(S) == DLS_EXPIRE_MIN);
	fs.clk += 2 * SEC;
	fs.commit_cost_per_row = 10;	/* 64 rows: 640 us, far below the budget */
	CHECK(dls_work_due(S, fs.clk));
	last_limit = dls_expire_limit(S);
	while (fs.nstore > 0 && batches < 1000)
	{
		int			before = fs.nstore;

		CHECK(batch() == DLS_DONE);
		CHECK(before - fs.nstore <= last_limit);
		CHECK(dls_expire_limit(S) <= last_limit * 2 && dls_expire_limit(S) >= DLS_EXPIRE_MIN);
		last_limit = dls_expire_limit(S);
		batches++;
	}
	CHECK(fs.nstore == 0);
	CHECK(batches > 1 && batches < 20);
	CHECK(last_limit > DLS_EXPIRE_MIN);
	/* a slow store brings it down again */
	fs.commit_cost_per_row = 1000;
	for (int i = 0; i < 2000; i++)
	{
		req(DLOCK_OP_ACQUIRE, 0, 0, "k", names[i], 10 * SEC);
		(void) batch();
	}
	fs.clk += 11 * SEC;
	{
		int			high = dls_expire_limit(S);

		(void) batch();
		CHECK(dls_expire_limit(S) < high);
		CHECK(dls_expire_limit(S) >= high / 2);
	}
}

/* An administrator's release: counted, remembered, forgotten by a new grant. */
static void
test_force_release(void)
{
	DLsRequest *r;

	setup();
	req(DLOCK_OP_ACQUIRE, 0, 0, "k1", "x", 10 * SEC);
	req(DLOCK_OP_ACQUIRE, 1, 1, NULL, "y", 0);
	CHECK(batch() == DLS_DONE);
	r = req(DLOCK_OP_FORCE_RELEASE, 5, 5, NULL, "x", 0);
	r->q.value = "maintenance";
	r->q.any_role = true;
	CHECK(batch() == DLS_DONE);
	CHECK(status_of(5) == DLOCK_STATUS_COUNT && fs.published[5].a.count == 1);
	CHECK(fs.nlast_revoked == 1 && strcmp(fs.last_revoked[0], "x") == 0);
	CHECK(fs.nstore == 1);
	req(DLOCK_OP_RENEW, 0, 0, "k1", "x", 10 * SEC);
	CHECK(batch() == DLS_DONE);
	CHECK(status_of(0) == DLOCK_STATUS_REVOKED);
	CHECK(strcmp(fs.published[0].reason, "maintenance") == 0);
	/* a session's lock, by no owner: every holder */
	r = req(DLOCK_OP_FORCE_RELEASE, 5, 5, NULL, "y", 0);
	r->q.value = "y gone";
	CHECK(batch() == DLS_DONE);
	CHECK(fs.published[5].a.count == 1);
	req(DLOCK_OP_RELEASE, 1, 1, NULL, "y", 0);
	CHECK(batch() == DLS_DONE);
	CHECK(status_of(1) == DLOCK_STATUS_REVOKED && strcmp(fs.published[1].reason, "y gone") == 0);
	/* a new grant forgets it */
	req(DLOCK_OP_ACQUIRE, 0, 0, "k1", "x", 10 * SEC);
	CHECK(batch() == DLS_DONE);
	CHECK(status_of(0) == DLOCK_STATUS_GRANTED);
	req(DLOCK_OP_RELEASE, 0, 0, "k1", "x", 0);
	CHECK(batch() == DLS_DONE);
	req(DLOCK_OP_RENEW, 0, 0, "k1", "x", 10 * SEC);
	CHECK(batch() == DLS_DONE);
	CHECK(status_of(0) == DLOCK_STATUS_NOT_HELD);
	/* force_release_all: every lock of the key */
	req(DLOCK_OP_ACQUIRE, 0, 0, "k1", "a", 10 * SEC);
	req(DLOCK_OP_ACQUIRE, 1, 0, "k1", "b", 10 * SEC);
	CHECK(batch() == DLS_DONE);
	r = req(DLOCK_OP_FORCE_RELEASE_ALL, 5, 5, "k1", "", 0);
	r->q.nnames = 0;
	r->q.value = "all of k1";
	CHECK(batch() == DLS_DONE);
	CHECK(status_of(5) == DLOCK_STATUS_COUNT && fs.published[5].a.count == 2);
	CHECK(fs.nlast_revoked == 2);
	req(DLOCK_OP_RENEW, 1, 0, "k1", "b", 10 * SEC);
	CHECK(batch() == DLS_DONE);
	CHECK(status_of(1) == DLOCK_STATUS_REVOKED && strcmp(fs.published[1].reason, "all of k1") == 0);
	/* a force release whose batch failed never happened */
	req(DLOCK_OP_ACQUIRE, 0, 0, "k2", "z", 10 * SEC);
	CHECK(batch() == DLS_DONE);
	r = req(DLOCK_OP_FORCE_RELEASE, 5, 5, NULL, "z", 0);
	r->q.value = "lost";
	fs.fail_commits = 1;
	CHECK(batch() == DLS_FAILED);
	{
		DLsFailure	f;

		dls_fail(S, &f);
		CHECK(f.failures == 1 && f.failed_requester == DLM_NOBODY);
	}
	CHECK(load() == 0);
	req(DLOCK_OP_RENEW, 0, 0, "k2", "z", 10 * SEC);
	CHECK(batch() == DLS_DONE);
	CHECK(status_of(0) == DLOCK_STATUS_RENEWED);
	req(DLOCK_OP_RELEASE, 0, 0, "k2", "z", 0);
	CHECK(batch() == DLS_DONE);
	req(DLOCK_OP_RENEW, 0, 0, "k2", "z", 10 * SEC);
	CHECK(batch() == DLS_DONE);
	CHECK(status_of(0) == DLOCK_STATUS_NOT_HELD);
}

/* After a failure: new requests one per batch until one fails alone. */
static void
test_isolation(void)
{
	DLsFailure	f;

	setup();
	req(DLOCK_OP_ACQUIRE, 0, 0, NULL, "a", 0);
	req(DLOCK_OP_ACQUIRE, 1, 1, NULL, "b", 0);
	fs.fail_commits = 1;
	CHECK(batch() == DLS_FAILED);
	dls_fail(S, &f);
	CHECK(f.failures == 1 && f.failed_requester == DLM_NOBODY && f.log);
	CHECK(f.pause_ms == DLS_RETRY_MIN_MS);
	CHECK(dls_isolating(S));
	CHECK(dls_manager(S) == NULL);
	CHECK(load() == 0);
	req(DLOCK_OP_ACQUIRE, 0, 0, NULL, "a", 0);
	CHECK(batch() == DLS_DONE);	/* went through alone */
	CHECK(!dls_isolating(S));
	CHECK(dls_recovered(S) == 1);
	CHECK(dls_recovered(S) == 0);
	/* two failures in a row: the second, alone, is the culprit */
	req(DLOCK_OP_ACQUIRE, 1, 1, NULL, "b", 0);
	req(DLOCK_OP_ACQUIRE, 2, 2, NULL, "c", 0);
	fs.fail_commits = 1;
	CHECK(batch() == DLS_FAILED);
	dls_fail(S, &f);
	CHECK(load() == 0);
	req(DLOCK_OP_ACQUIRE, 1, 1, NULL, "b", 0);
	fs.fail_commits = 1;
	CHECK(batch() == DLS_FAILED);
	dls_fail(S, &f);
	CHECK(f.failures == 2 && f.failed_requester == 1 && f.pause_ms == 2 * DLS_RETRY_MIN_MS);
	CHECK(!dls_isolating(S));
	/* the pause doubles up to its maximum */
	for (int i = 0; i < 30; i++)
		dls_fail(S, &f);
	CHECK(f.pause_ms == DLS_RETRY_MAX_MS);
	CHECK(f.log == false);
	CHECK(load() == 0);
}

/*
 * Random requests with random commit failures: after every batch nothing
 * went out before its commit, after every failure the reloaded picture
 * holds exactly the store's rows, and no token goes back.
 */
static void
test_random(void)
{
	static const char *const nm[] = {"a", "b", "c", "d"};
	static const char *const keys[] = {NULL, "k1", "k2", "k3"};
	uint64_t	seed = 88172645463325252ULL;
	uint64_t	x = 0;
	int64_t		max_token = 0;
	int			failures = 0;

	setup();
	for (int step = 0; step < 20000; step++)
	{
		DLsWithdrawal w[4];
		int			nw = 0;
		DLsOutcome	o;

		for (int i = 0; i < 4; i++)
		{
			int			requester;
			DLockOp		op;

			x = test_rand(&seed);
			if (x % 3 != 0 || (dls_isolating(S) && nfresh > 0))
				continue;
			requester = (int) ((x >> 8) % 16);
			if (dlm_waiter_of(LM, requester) != NULL)
			{
				if ((x >> 20) % 4 == 0 && nw < 4)
					w[nw++] = (DLsWithdrawal) {requester, false};
				continue;
			}
			op = (x >> 12) % 3 == 0 ? DLOCK_OP_RELEASE :
				(x >> 12) % 3 == 1 ? DLOCK_OP_ACQUIRE : DLOCK_OP_TRY;
			{
				bool		dup = false;

				for (int k = 0; k < nfresh; k++)
					dup |= fresh[k]->q.requester == requester;
				if (dup)
					continue;
			}
			req(op, requester, requester, keys[(x >> 16) % 4], nm[(x >> 24) % 4],
				(x >> 28) % 2 ? SEC / 2 : 0);
		}
		if ((x >> 32) % 17 == 0)
			fs.fail_commits = 1;
		o = batch_with(w, nw, NULL, 0);
		CHECK(o != DLS_FAILED || fs.fail_commits == 0);
		if (o == DLS_FAILED)
		{
			DLsFailure	f;

			failures++;
			dls_fail(S, &f);
			for (int i = 0; i < NREQ; i++)
				fs.pending[i].any = false;
			if (load() != 0)
			{
				CHECK(false);
				return;
			}
			/* the picture equals the store */
			{
				int			holders = 0;

				for (int i = 0; i < 4; i++)
				{
					DLmLock    *l = dlm_lookup(LM, nm[i]);

					for (DLmHolder *h = l ? dlm_lock_holders(l) : NULL; h; h = dlm_holder_next(h))
					{
						holders++;
						CHECK(fs_row_find(fs.store, fs.nstore, h->token) >= 0);
					}
				}
				CHECK(holders == fs.nstore);
			}
		}
		for (int i = 0; i < NREQ; i++)
			if (fs.published[i].any && fs.published[i].a.status == DLOCK_STATUS_GRANTED)
			{
				if (fs.published[i].a.token <= max_token &&
					fs_row_find(fs.store, fs.nstore, fs.published[i].a.token) < 0)
					CHECK(false);	/* a new grant's token must be new */
				if (fs.published[i].a.token > max_token)
					max_token = fs.published[i].a.token;
				forget(i);
			}
		fs.clk += (DLockTime) ((x >> 40) % 200000);
	}
	CHECK(failures > 100);
	CHECK(fs.early_publish == 0);
}

/*
 * Revocations against a plain model: owners (a key each) try, release and
 * renew four names while an administrator force-releases names and keys,
 * one request per batch, commits failing at random (the picture reloaded),
 * the clock jumping past the memory's hour now and then.  Every answer is
 * compared with the model: REVOKED with the newest reason exactly when
 * the owner no longer holds a name it was released from, within the hour,
 * since its last grant of it; the counts of force releases; a failed
 * batch's revocations forgotten.
 */
typedef struct MRevoked
{
	int			owner;			/* requester; -1 unused */
	int			name;			/* -1: every name */
	char		reason[16];
	DLockTime	at;
} MRevoked;

static void
test_random_revocations(void)
{
	static const char *const nm[] = {"a", "b", "c", "d"};
	static char keys[8][16];
	static MRevoked mr[4096];
	int			nmr = 0;
	uint64_t	seed = 7;
	int			revoked_seen = 0,
				failures = 0;

	setup();
	for (int i = 0; i < 8; i++)
		snprintf(keys[i], sizeof(keys[i]), "k%d", i);
	for (int step = 0; step < 30000 && nmr < 4000; step++)
	{
		uint64_t	x = test_rand(&seed);
		int			r = (int) (x % 8);
		int			n = (int) ((x >> 8) % 4);
		int			kind = (int) ((x >> 16) % 10);
		bool		held = false;
		int			expect_count = 0;
		int			added = 0;
		char		reason[16];
		DLsRequest *q;
		DLsOutcome	o;

		{
			DLmLock    *l = dlm_lookup(LM, nm[n]);

			for (DLmHolder *h = l ? dlm_lock_holders(l) : NULL; h; h = dlm_holder_next(h))
				held |= h->owner->key && strcmp(h->owner->key, keys[r]) == 0;
		}
		snprintf(reason, sizeof(reason), "r%d", step);
		if (kind < 3)
			q = req(DLOCK_OP_TRY, r, r, keys[r], nm[n], 0);
		else if (kind < 5)
			q = req(DLOCK_OP_RELEASE, r, r, keys[r], nm[n], 0);
		else if (kind < 7)
			q = req(DLOCK_OP_RENEW, r, r, keys[r], nm[n], 0);
		else if (kind < 9)
		{
			/* every holder of the name, or one key's */
			bool		one = (x >> 24) % 2;
			DLmLock    *l = dlm_lookup(LM, nm[n]);

			q = req(DLOCK_OP_FORCE_RELEASE, 9, 9, one ? keys[r] : NULL, nm[n], 0);
			for (DLmHolder *h = l ? dlm_lock_holders(l) : NULL; h; h = dlm_holder_next(h))
				if (!h->implied && (!one || strcmp(h->owner->key, keys[r]) == 0))
				{
					mr[nmr++] = (MRevoked) {h->owner->key[1] - '0', n, "", fs.clk};
					snprintf(mr[nmr - 1].reason, sizeof(mr[0].reason), "%s", reason);
					expect_count++;
					added++;
				}
		}
		else
		{
			q = req(DLOCK_OP_FORCE_RELEASE_ALL, 9, 9, keys[r], "", 0);
			q->q.nnames = 0;
			for (int k = 0; k < 4; k++)
			{
				DLmLock    *l = dlm_lookup(LM, nm[k]);

				for (DLmHolder *h = l ? dlm_lock_holders(l) : NULL; h; h = dlm_holder_next(h))
					expect_count += strcmp(h->owner->key, keys[r]) == 0;
			}
			mr[nmr++] = (MRevoked) {r, -1, "", fs.clk};
			snprintf(mr[nmr - 1].reason, sizeof(mr[0].reason), "%s", reason);
			added++;
		}
		q->q.value = kind >= 7 ? reason : NULL;
		q->q.any_role = kind >= 7;
		if ((x >> 32) % 23 == 0)
			fs.fail_commits = 1;
		o = batch();
		if (o == DLS_FAILED)
		{
			DLsFailure	f;

			failures++;
			nmr -= added;		/* the batch's revocations never happened, */
			dls_fail(S, &f);	/* nor did what its grants forgot */
			memset(fs.pending, 0, sizeof(fs.pending));
			if (load() != 0)
			{
				CHECK(false);
				return;
			}
			/* a request that failed alone is the adapter's to answer */
			continue;
		}
		fs.fail_commits = 0;
		if (kind >= 7)
			CHECK(status_of(9) == DLOCK_STATUS_COUNT && fs.published[9].a.count == expect_count);
		else if (kind < 3)
		{
			CHECK(status_of(r) == DLOCK_STATUS_GRANTED || status_of(r) == DLOCK_STATUS_REFUSED);
			if (status_of(r) == DLOCK_STATUS_GRANTED)
				for (int i = 0; i < nmr; i++)
					if (mr[i].owner == r && (mr[i].name == -1 || mr[i].name == n))
						mr[i].owner = -1;	/* a new grant forgets */
		}
		else
		{
			int			newest = -1;

			for (int i = 0; i < nmr; i++)
				if (mr[i].owner == r && (mr[i].name == -1 || mr[i].name == n) &&
					fs.clk - mr[i].at <= DLS_REVOKED_KEEP_US)
					newest = i;
			if (held)
				CHECK(status_of(r) == (kind < 5 ? DLOCK_STATUS_RELEASED : DLOCK_STATUS_RENEWED));
			else if (newest >= 0)
			{
				CHECK(status_of(r) == DLOCK_STATUS_REVOKED &&
					  strcmp(fs.published[r].reason, mr[newest].reason) == 0);
				revoked_seen++;
			}
			else
				CHECK(status_of(r) == DLOCK_STATUS_NOT_HELD);
		}
		forget(r);
		forget(9);
		fs.clk += (x >> 40) % 50 == 0 ? 20 * 60 * SEC : 1000;
	}
	CHECK(revoked_seen > 500);
	CHECK(failures > 100);
}

/* The rules both adapters word alike. */
static void
owner_words(char *buf, size_t size, bool keyed, int32_t pid, void *arg)
{
	(void) arg;
	if (keyed)
		snprintf(buf, size, "an owner key (pid %d)", (int) pid);
	else
		snprintf(buf, size, "session %d", (int) pid);
}

static void
name_words(char *buf, size_t size, const char *name, void *arg)
{
	(void) arg;
	snprintf(buf, size, "%s", name);
}

static void
test_rules(void)
{
	DLmCycleStep steps[2] = {
		{false, 11, "a", true, true, 12},
		{true, 12, "b", false, false, 11},
	};
	DLmAnswer	a = {0};
	char		buf[300];
	char		small[20];
	DLsName		names[5] = {{"b", 1, 0}, {"a/c", 3, 1}, {"a", 1, 2}, {"b", 1, 3}, {"ab", 2, 4}};

	CHECK(dls_prefix_covers("/", 1, "/a/b", 4));
	CHECK(dls_prefix_covers("/a", 2, "/a", 2));
	CHECK(dls_prefix_covers("/a", 2, "/a/b", 4));
	CHECK(!dls_prefix_covers("/a", 2, "/ab", 3));
	CHECK(!dls_prefix_covers("/", 1, "a", 1));
	CHECK(dls_prefix_covers("m-", 2, "m-1", 3));
	CHECK(!dls_prefix_covers("m-", 2, "m", 1));
	CHECK(!dls_prefix_covers("m-", 2, "/m-", 3));
	CHECK(dls_prefix_covers("", 0, "x", 1));
	CHECK(!dls_prefix_covers("", 0, "/x", 2));

	CHECK(dls_default_ttl(60 * SEC, 0) == 60 * SEC);
	CHECK(dls_default_ttl(60 * SEC, 30 * SEC) == 30 * SEC);
	CHECK(dls_default_ttl(20 * SEC, 30 * SEC) == 20 * SEC);

	a.ncycle = 2;
	a.cycle = steps;
	dls_describe_cycle(buf, sizeof(buf), &a, owner_words, name_words, NULL);
	CHECK(strcmp(buf, "Session 11 waits for \"a\" held by an owner key (pid 12). "
				  "An owner key (pid 12) waits for \"b\" queued earlier by session 11.") == 0);
	dls_describe_cycle(small, sizeof(small), &a, owner_words, name_words, NULL);
	CHECK(strlen(small) == sizeof(small) - 1 && strncmp(small, "Session 11 waits fo", 19) == 0);

	CHECK(dls_sort_names(names, 5) == 4);
	CHECK(strncmp(names[0].p, "a", names[0].len) == 0 && names[0].len == 1 && names[0].pos == 2);
	CHECK(names[1].len == 3 && names[2].len == 2 && names[3].len == 1 && names[3].p[0] == 'b');
}

/* One test: passes if it added no failed check. */
static int	tests_passed,
			tests_failed;

static void
run(void (*test) (void))
{
	int			before = failed;

	test();
	if (failed == before)
		tests_passed++;
	else
		tests_failed++;
}

int
main(void)
{
	run(test_publish_after_commit);
	run(test_deferral);
	run(test_order);
	run(test_expiry_limit);
	run(test_force_release);
	run(test_isolation);
	run(test_random);
	run(test_random_revocations);
	run(test_rules);
	dls_destroy(S);
	drop_picture();
	printf("service checks: %d passed, %d failed\n", passed, failed);
	printf("service: %d passed, %d failed\n", tests_passed, tests_failed);
	return failed == 0 ? 0 : 1;
}
