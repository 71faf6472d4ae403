/* SPDX-License-Identifier: PostgreSQL */
/*-------------------------------------------------------------------------
 *
 * dlock_admin.c
 *		The worker's side of dlock_force_release and dlock_force_release_all
 *		(docs/operations.md: Administration): an administrator's release of another
 *		owner's locks, carried out with RELEASE / RELEASE_ALL requests on the
 *		holders' behalf, remembered with its reason so that the holder's
 *		next renew, release or convert of it is told why (DL001), and
 *		announced with NOTIFY dlock_revoked after the commit.
 *
 * The revocations are kept for an hour, at most REVOKED_MAX of them (the
 * oldest go first); a new grant of the name to the same owner forgets it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "nodes/pg_list.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "dlock.h"
#include "dlock_admin.h"
#include "dlock_slots.h"

#define REVOKED_MAX 1024
#define REVOKED_KEEP_US ((int64) 3600 * 1000000)

typedef struct Revoked
{
	char	   *key;			/* the owner key; NULL: a session */
	int			pid;			/* a session's identity */
	TimestampTz session_start;
	char	   *name;			/* NULL: every name of the key */
	char	   *reason;
	TimestampTz at;
} Revoked;

static Revoked revoked[REVOKED_MAX];
static int	nrevoked;			/* the newest is at nrevoked - 1 */
static List *notify_names;		/* TopMemoryContext: for this batch's commit */

static void
revoked_free(Revoked *v)
{
	if (v->key)
		pfree(v->key);
	if (v->name)
		pfree(v->name);
	pfree(v->reason);
}

static void
revoked_remove(int i)
{
	revoked_free(&revoked[i]);
	memmove(&revoked[i], &revoked[i + 1], sizeof(Revoked) * (nrevoked - i - 1));
	nrevoked--;
}

static void
revoked_add(const char *key, int pid, TimestampTz start, const char *name,
			const char *reason, TimestampTz now)
{
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
	Revoked    *v;

	if (nrevoked == REVOKED_MAX)
		revoked_remove(0);
	v = &revoked[nrevoked++];
	v->key = key ? pstrdup(key) : NULL;
	v->pid = pid;
	v->session_start = start;
	v->name = name ? pstrdup(name) : NULL;
	v->reason = pstrdup(reason);
	v->at = now;
	MemoryContextSwitchTo(old);
}

static bool
same_owner(const Revoked *v, const Request *r)
{
	if (v->key || r->owner)
		return v->key && r->owner && strcmp(v->key, r->owner) == 0;
	return v->pid == r->pid && v->session_start == r->session_start;
}

/* The newest revocation of r's owner and name, after dropping old ones. */
static int
revoked_find(const Request *r, TimestampTz now)
{
	while (nrevoked > 0 && now - revoked[0].at > REVOKED_KEEP_US)
		revoked_remove(0);
	for (int i = nrevoked - 1; i >= 0; i--)
		if (same_owner(&revoked[i], r) &&
			(revoked[i].name == NULL || strcmp(revoked[i].name, r->names[0]) == 0))
			return i;
	return -1;
}

static void
notify_later(const char *name)
{
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

	notify_names = lappend(notify_names, pstrdup(name));
	MemoryContextSwitchTo(old);
}

typedef struct Victim
{
	char	   *key;
	int			pid;
	int64		session_start;
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
force_release(DLockManager *lm, Request *r, TimestampTz now)
{
	const char *name = r->names[0];
	DLmLock    *lock = dlm_lookup(lm, name);
	List	   *victims = NIL;
	ListCell   *lc;
	int			n = 0;

	for (DLmHolder *h = lock ? dlm_lock_holders(lock) : NULL; h; h = dlm_holder_next(h))
	{
		Victim	   *v;

		if (h->implied || (r->owner && (h->owner->key == NULL ||
										strcmp(h->owner->key, r->owner) != 0)))
			continue;
		v = palloc0(sizeof(Victim));
		v->key = h->owner->key ? pstrdup(h->owner->key) : NULL;
		v->pid = h->owner->pid;
		v->session_start = h->owner->session_start;
		victims = lappend(victims, v);
	}
	foreach(lc, victims)
	{
		Victim	   *v = lfirst(lc);
		DLmRequest	q = {0};
		const char *names[1] = {name};

		q.op = DLOCK_OP_RELEASE;
		q.requester = DLM_NOBODY;
		q.owner_key = v->key;
		q.pid = v->key ? r->pid : v->pid;
		q.session_start = v->key ? r->session_start : v->session_start;
		q.names = names;
		q.nnames = 1;
		q.role = r->role;
		q.any_role = true;
		/* every level, whatever the re-entrant count (bounded: a count is int32) */
		for (int i = 0; i < 100000 && still_holds(lm, name, v); i++)
			(void) dlm_request(lm, &q, now);
		revoked_add(v->key, v->pid, v->session_start, name, r->value, now);
		n++;
	}
	if (n > 0)
		notify_later(name);
	slots_answer_count(r->slotno, n);
}

/*
 * dlock_force_release_all(owner, reason): dlock_release_all of the key on
 * its behalf (its holds, waits and kept places; answered with the count).
 */
static void
force_release_all(DLockManager *lm, Request *r, TimestampTz now)
{
	DLmRequest	q = {0};

	q.op = DLOCK_OP_RELEASE_ALL;
	q.requester = r->slotno;
	q.owner_key = r->owner;
	q.pid = r->pid;
	q.session_start = r->session_start;
	q.names = (const char *const *) r->names;
	q.nnames = r->nnames;
	q.role = r->role;
	q.any_role = true;
	(void) dlm_request(lm, &q, now);
	for (DLmHolder *h = dlm_touched_holders(lm); h; h = h->touched_next)
		if (h->p.dead && !h->implied && h->owner->key && strcmp(h->owner->key, r->owner) == 0)
			notify_later(h->lock->name);
	revoked_add(r->owner, 0, 0, NULL, r->value, now);
}

bool
dlock_admin_execute(DLockManager *lm, Request *r, TimestampTz now)
{
	if (r->op == DLOCK_OP_FORCE_RELEASE)
		force_release(lm, r, now);
	else if (r->op == DLOCK_OP_FORCE_RELEASE_ALL)
		force_release_all(lm, r, now);
	else
		return false;
	return true;
}

/*
 * After the lock manager answered r: a "not held" of a revoked lock
 * becomes REVOKED with the reason; a new grant forgets the revocation.
 */
void
dlock_admin_answered(Request *r, TimestampTz now)
{
	DLockStatus st;
	int			i;

	if (nrevoked == 0 || r->nnames < 1 || r->names[0][0] == '\0')
		return;
	st = slots_answer_status(r->slotno);
	if (st == DLOCK_STATUS_NOT_HELD &&
		(r->op == DLOCK_OP_RENEW || r->op == DLOCK_OP_RELEASE || r->op == DLOCK_OP_CONVERT ||
		 r->op == DLOCK_OP_PROCLAIM) &&
		(i = revoked_find(r, now)) >= 0)
		slots_answer_revoked(r->slotno, revoked[i].reason);
	else if (st == DLOCK_STATUS_GRANTED)
	{
		for (i = nrevoked - 1; i >= 0; i--)
		{
			bool		named = revoked[i].name == NULL;

			for (int k = 0; k < r->nnames && !named; k++)
				named = strcmp(revoked[i].name, r->names[k]) == 0;
			if (named && same_owner(&revoked[i], r))
				revoked_remove(i);
		}
	}
}

/* Inside the batch's transaction: NOTIFY dlock_revoked, delivered at commit. */
void
dlock_admin_notify(void)
{
	ListCell   *lc;

	foreach(lc, notify_names)
		dlock_notify("dlock_revoked", lfirst(lc));
	list_free_deep(notify_names);
	notify_names = NIL;
}
