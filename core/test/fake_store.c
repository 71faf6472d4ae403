/* SPDX-License-Identifier: PostgreSQL */
/*
 * fake_store.c
 *		The in-memory store behind the service for the core's tests
 *		(fake_store.h).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_store.h"

FakeStore	fs;

void
fs_reset(void)
{
	static bool started;
	/* the memory's counts run on: a picture may outlive a reset */
	TestMem		mem = started ? fs.mem : (TestMem) TEST_MEM_INIT;

	started = true;
	memset(&fs, 0, sizeof(fs));
	fs.mem = mem;
	fs.clk = (DLockTime) 1000 * 1000000;
}

int
fs_row_find(const FsRow *rows, int n, int64_t token)
{
	for (int i = 0; i < n; i++)
		if (rows[i].r.token == token)
			return i;
	return -1;
}

static void
row_set(FsRow *row, const DLmHolder *h)
{
	memset(row, 0, sizeof(*row));
	snprintf(row->name, sizeof(row->name), "%s", h->lock->name);
	row->keyed = h->owner->key != NULL;
	if (row->keyed)
		snprintf(row->key, sizeof(row->key), "%s", h->owner->key);
	row->r.pid = h->owner->pid;
	row->r.backend_start = h->owner->session_start;
	row->r.mode = h->mode;
	row->r.implied = h->implied;
	row->r.count = h->count;
	row->r.token = h->token;
	row->r.granted_at = h->granted_at;
	row->r.expires_at = h->expires_at;
	row->r.ttl_us = h->ttl_us;
	row->r.role = h->role;
	row->r.kept = dlm_holder_kept(h);
	row->r.permits = dlm_holder_permits(h);
	row->r.capacity = h->lock->capacity;
}

/* The touched holders staged over the committed rows; the stage kept unless told to fail. */
static int
fake_commit(void *arg, DLockManager *lm, const DLsCommit *c, char *err, size_t errlen)
{
	int64_t		hi = 0;
	int			nrows = 0;

	(void) arg;
	memcpy(fs.staged, fs.store, sizeof(FsRow) * fs.nstore);
	fs.nstaged = fs.nstore;
	DLmHolder  *h;

	for (size_t h_i = 0; (h = dlm_touched_holder(lm, h_i)) != NULL; h_i++)
	{
		int			i = h->p.stored ? fs_row_find(fs.staged, fs.nstaged, h->stored_token) : -1;

		nrows++;
		if (h->p.stored && i < 0)
		{
			snprintf(err, errlen, "row %" PRId64 " to change is not stored", h->stored_token);
			return -1;
		}
		if (h->p.dead)
		{
			if (i >= 0)
				fs.staged[i] = fs.staged[--fs.nstaged];
		}
		else if (i >= 0)
			row_set(&fs.staged[i], h);
		else if (fs.nstaged < FS_MAXROWS)
			row_set(&fs.staged[fs.nstaged++], h);
	}
	fs.clk += fs.commit_cost_per_row * nrows;
	fs.nlast_revoked = 0;
	for (int i = 0; i < c->nrevoked && i < 16; i++)
		snprintf(fs.last_revoked[fs.nlast_revoked++], sizeof(fs.last_revoked[0]), "%s", c->revoked[i]);
	if (fs.fail_commits > 0)
	{
		fs.fail_commits--;
		snprintf(err, errlen, "injected commit failure");
		return -1;
	}
	memcpy(fs.store, fs.staged, sizeof(FsRow) * fs.nstaged);
	fs.nstore = fs.nstaged;
	if (dlm_counter_dirty(lm, &hi))
		fs.store_hi = hi;
	fs.commits++;
	fs.flushed += c->counter || c->durable;
	fs.committed_since_answer = true;
	return 0;
}

static bool
changes_rows(DLockStatus st)
{
	return st == DLOCK_STATUS_GRANTED || st == DLOCK_STATUS_RELEASED ||
		st == DLOCK_STATUS_RENEWED;
}

/* No answer that changed rows goes out before a commit after it. */
static void
fake_publish(void *arg, DLockManager *lm)
{
	(void) arg;
	fs.publishes++;
	if (dlm_touched_holder(lm, 0) != NULL)
		fs.early_publish++;		/* published before the picture settled */
	for (int i = 0; i < FS_NREQ; i++)
		if (fs.pending[i].any)
		{
			if (changes_rows(fs.pending[i].a.status) && !fs.committed_since_answer)
				fs.early_publish++;
			fs.published[i] = fs.pending[i];
			fs.published[i].a.reason = fs.published[i].reason;
			fs.published[i].a.tokens = fs.published[i].tokens;
			fs.pending[i].any = false;
		}
}

static DLockTime
fake_now(void *arg)
{
	(void) arg;
	return fs.clk;
}

static void
fake_answer(void *arg, int requester, const DLmAnswer *a)
{
	FsAnswer   *p;

	(void) arg;
	if (requester < 0 || requester >= FS_NREQ || a->status == DLOCK_STATUS_QUEUED)
		return;
	p = &fs.pending[requester];
	p->any = true;
	if (changes_rows(a->status))
		fs.committed_since_answer = false;
	p->a = *a;
	p->reason[0] = '\0';
	if (a->status == DLOCK_STATUS_REVOKED && a->reason)
		snprintf(p->reason, sizeof(p->reason), "%s", a->reason);
	p->a.reason = p->reason;
	p->a.cycle = NULL;
	for (int i = 0; i < a->ntokens && i < DLOCK_MAX_MULTI; i++)
		p->tokens[i] = a->tokens[i];
	p->a.tokens = p->tokens;
}

void
fs_service_config(DLsConfig *c)
{
	memset(c, 0, sizeof(*c));
	c->store.commit = fake_commit;
	c->store.publish = fake_publish;
	c->store.now = fake_now;
	c->answer = fake_answer;
}

static int
by_token(const void *a, const void *b)
{
	const FsRow *x = *(const FsRow *const *) a;
	const FsRow *y = *(const FsRow *const *) b;

	return (x->r.token > y->r.token) - (x->r.token < y->r.token);
}

/*
 * The rows in token order, as MariaDB's adapter reads them: the lock
 * manager keeps a lock's holders in the order they are loaded, and grant
 * order is token order (README 1).
 */
static int
load_rows(void *arg, DLockManager *lm, char *err, size_t errlen)
{
	static const FsRow *sorted[FS_MAXROWS];

	(void) arg;
	dlm_set_counter(lm, fs.store_hi);
	for (int i = 0; i < fs.nstore; i++)
		sorted[i] = &fs.store[i];
	qsort(sorted, (size_t) fs.nstore, sizeof(sorted[0]), by_token);
	for (int i = 0; i < fs.nstore; i++)
	{
		DLmHolderRow r = sorted[i]->r;
		DLmError	e;

		r.name = sorted[i]->name;
		r.owner_key = sorted[i]->keyed ? sorted[i]->key : NULL;
		if ((e = dlm_load_holder(lm, &r)) != DLM_OK)
		{
			snprintf(err, errlen, "row %" PRId64 ": %s", r.token, dlm_error_message(e));
			return -1;
		}
	}
	return 0;
}

static bool
all_alive(void *arg, int32_t pid, int64_t start)
{
	(void) arg;
	(void) pid;
	(void) start;
	return true;
}

bool
fs_drop(DLockManager *lm)
{
	if (lm == NULL)
		return true;
	dlm_destroy(lm);
	return fs.mem.live == 0 && fs.mem.bad_free == 0;
}

DLockManager *
fs_load(DLockService *s, DLmConfig *cfg, DLmSessionAliveFn alive, void *arg,
		DLockTime grace_until, char *err, size_t errlen)
{
	DLsLoad		l = {0};
	DLockManager *lm;

	cfg->alloc.alloc = test_mem_alloc;
	cfg->alloc.free = test_mem_free;
	cfg->alloc.arg = &fs.mem;
	dls_manager_config(s, cfg);
	lm = dlm_create(cfg);
	if (lm == NULL)
	{
		snprintf(err, errlen, "dlm_create failed");
		return NULL;
	}
	l.rows = load_rows;
	l.session_alive = alive ? alive : all_alive;
	l.arg = arg;
	l.grace_until = grace_until;
	fs.loads++;
	if (dls_load(s, lm, &l, err, errlen) != 0)
	{
		dlm_destroy(lm);
		return NULL;
	}
	return lm;
}
