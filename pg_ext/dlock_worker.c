/*
 * dlock_worker.c
 *		The dlock lock manager: one background worker per cluster that owns
 *		the queue-then-main-row algorithm and is the single writer of its
 *		tables.
 *
 * Each pass of the main loop is a batch: take every submitted request,
 * session end and withdrawal from the slots, expire due leases, decide all
 * of it against the in-memory picture (dlock_state.h), write the changes as
 * a few set-based statements in one transaction, commit, and only then
 * publish the answers and set the backends' latches.  Requests that arrive
 * while a batch commits form the next batch, so commits are grouped.
 *
 * Ordering: every request gets a ticket from one counter, its place in the
 * queue.  A request is granted only when compatible with every holder
 * (other than its own owner) and every request queued before it.  The
 * fencing token is a fresh ticket taken when the lock is granted, not the
 * queue ticket: up-conversions are served ahead of the queue, so a waiter
 * can be granted after a conversion that got a larger ticket than its own,
 * and tokens must grow in grant order.  Tickets below the stored counter
 * 'hi' may have been handed out; a new worker starts at hi, so tokens
 * never go backwards, across restarts and crashes.
 *
 * Errors: a batch that fails is rolled back and the picture is rebuilt from
 * the tables (which still hold the last committed batch); the failed
 * requests are then retried one per batch, and one that fails alone gets
 * the error as its answer.
 */
#include "postgres.h"

#include "access/xact.h"
#include "common/hashfn.h"
#include "executor/spi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/pmsignal.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "dlock_state.h"

/* Tickets reserved per update of the stored counter. */
#define DLOCK_TICKET_RESERVE 10000

/* String-keyed hash of pointers, for locks by name and owners by key. */
typedef struct StrMapEntry
{
	const char *key;
	uint32		hash;
	char		status;
	void	   *value;
} StrMapEntry;

#define SH_PREFIX strmap
#define SH_ELEMENT_TYPE StrMapEntry
#define SH_KEY_TYPE const char *
#define SH_KEY key
#define SH_HASH_KEY(tb, k) hash_bytes((const unsigned char *) (k), strlen(k))
#define SH_EQUAL(tb, a, b) (strcmp(a, b) == 0)
#define SH_SCOPE static inline
#define SH_STORE_HASH
#define SH_GET_HASH(tb, a) ((a)->hash)
#define SH_DECLARE
#define SH_DEFINE
#include "lib/simplehash.h"

/* A request as taken from its slot. */
typedef struct Request
{
	int			slotno;
	uint64		seq;
	DLockOp		op;
	int			mode;
	int64		ttl_us;
	int64		max_ttl_us;		/* the caller's dlock.max_ttl; 0: none */
	TimestampTz timeout_at;
	int			pid;
	TimestampTz session_start;
	char	   *name;
	char	   *owner;			/* NULL: the session */
	char	  **names;			/* all names (acquire_all), names[0] == name */
	int			nnames;
	/* for a session that ended: where its last request stood */
	DLockSlotState state;
	DLockStatus status;
	bool		abandoned;
} Request;

/* What to tell a slot once the batch has committed. */
typedef struct Outcome
{
	bool		listed;
	bool		answered;
	bool		queued;			/* waits: publish its ticket */
	bool		end_session;	/* session cleaned up: free the slot */
	DLockStatus status;
	int64		token;
	TimestampTz expires_at;
	int32		count;
	int64		tokens[DLOCK_MAX_MULTI];
	char		errmsg[DLOCK_ERRMSG_LEN];
} Outcome;

/* The picture */
static MemoryContext state_cxt;
static strmap_hash *locks_map;
static strmap_hash *owners_map;
static RBTree *expiry_tree;		/* leases by expiry: ExpiryEntry */
static DWaiter **slot_waiter;	/* per slot: the request it waits with */
static int64 next_ticket;
static int64 ticket_hi;			/* tickets below it are covered by the table */
static bool ticket_hi_dirty;

/*
 * Whether the batch must be flushed before its answers go out.  What an
 * owner key holds outlives a crash, so its grants, count increments and
 * lease extensions must be flushed once acknowledged (unless
 * dlock.synchronous_commit is off); counter updates always are
 * (ticket_hi_dirty: tokens never go back).  A session's locks die with any crash
 * (every backend is restarted, sessions included), so their grants need no
 * flush; nor do releases and queue changes: losing them in a crash only
 * keeps a lock held longer (until its lease runs out), never lets two hold
 * it.  The next durable commit, or the WAL writer, flushes them.
 */
static bool batch_durable;

/* Note a change to h that must survive a crash, if any of h can. */
#define holder_changed_durably(h) \
	do { if ((h)->owner->key != NULL) batch_durable = true; } while (0)
static bool ready = false;

/* The batch */
static MemoryContext batch_cxt;
static List *touched_holders;
static List *touched_waiters;
static List *maybe_empty_locks;
static List *maybe_empty_owners;
static List *notify_names;		/* locks whose holders are to be told */
static Outcome *outcomes;
static List *outcome_slots;

/*
 * A batch that answers nobody (it only queued new waiters, say) leaves its
 * writes to a later batch's commit, for at most DLOCK_DEFER_MS: under
 * contention the next release comes sooner, so a hand-off costs one commit,
 * not two.  The tables show such changes a few milliseconds late, and never
 * an answer before its commit.
 */
#define DLOCK_DEFER_MS 5
#define DLOCK_MAX_DEFERRED 64
static int	deferred_batches = 0;
static TimestampTz deferred_since;

/* After an error: take new requests one at a time to isolate a bad one. */
static bool isolate = false;
static int	isolated_slot = -1;	/* the one taken in this batch, or -1 */

static void worker_exit(int code, Datum arg);

/* ---------------------------------------------------------------------
 * The picture: owners, locks, holders, waiters
 * --------------------------------------------------------------------- */

/*
 * Leases by expiry, soonest first, in a red-black tree: every operation is
 * O(log n) at worst.  (A pairing heap's first removals after a million
 * inserts walk all of them: a 100 ms stall just when mass expiry starts.)
 */
typedef struct ExpiryEntry
{
	RBTNode		rbt;
	TimestampTz expires_at;
	DHolder    *holder;			/* tie-break: holders expiring together */
} ExpiryEntry;

static int
expiry_cmp(const RBTNode *a, const RBTNode *b, void *arg)
{
	const ExpiryEntry *ea = (const ExpiryEntry *) a;
	const ExpiryEntry *eb = (const ExpiryEntry *) b;

	if (ea->expires_at != eb->expires_at)
		return ea->expires_at < eb->expires_at ? -1 : 1;
	if (ea->holder != eb->holder)
		return ea->holder < eb->holder ? -1 : 1;
	return 0;
}

/*
 * The picture's fixed-size objects come from slabs: a million leases cost a
 * third less memory than in power-of-two chunks.
 */
static MemoryContext holder_slab;
static MemoryContext lock_slab;
static MemoryContext owner_slab;
static MemoryContext expiry_slab;

static RBTNode *
expiry_alloc(void *arg)
{
	return MemoryContextAlloc(expiry_slab, sizeof(ExpiryEntry));
}

static void
expiry_free(RBTNode *node, void *arg)
{
	pfree(node);
}

/* h's lease runs out at h->expires_at: note it (h must not be noted yet). */
static void
expiry_add(DHolder *h)
{
	ExpiryEntry key;
	bool		isnew;

	key.expires_at = h->expires_at;
	key.holder = h;
	rbt_insert(expiry_tree, &key.rbt, &isnew);
	Assert(isnew);
	h->in_expiry = true;
}

/* Forget h's lease; call before h->expires_at changes. */
static void
expiry_remove(DHolder *h)
{
	ExpiryEntry key;
	RBTNode    *node;

	if (!h->in_expiry)
		return;
	key.expires_at = h->expires_at;
	key.holder = h;
	node = rbt_find(expiry_tree, &key.rbt);
	Assert(node != NULL);
	if (node)
		rbt_delete(expiry_tree, node);
	h->in_expiry = false;
}

/* The holder whose lease runs out first, or NULL. */
static DHolder *
expiry_first(void)
{
	ExpiryEntry *e = (ExpiryEntry *) rbt_leftmost(expiry_tree);

	return e ? e->holder : NULL;
}

static void
picture_reset(void)
{
	MemoryContext old;

	MemoryContextReset(state_cxt);	/* the slabs go with it */
	holder_slab = SlabContextCreate(state_cxt, "dlock holders",
									SLAB_DEFAULT_BLOCK_SIZE, sizeof(DHolder));
	lock_slab = SlabContextCreate(state_cxt, "dlock locks",
								  SLAB_DEFAULT_BLOCK_SIZE, sizeof(DLock));
	owner_slab = SlabContextCreate(state_cxt, "dlock owners",
								   SLAB_DEFAULT_BLOCK_SIZE, sizeof(DOwner));
	expiry_slab = SlabContextCreate(state_cxt, "dlock lease expiries",
									SLAB_DEFAULT_BLOCK_SIZE, sizeof(ExpiryEntry));
	old = MemoryContextSwitchTo(state_cxt);
	locks_map = strmap_create(state_cxt, 1024, NULL);
	owners_map = strmap_create(state_cxt, 256, NULL);
	expiry_tree = rbt_create(sizeof(ExpiryEntry), expiry_cmp, NULL,
							 expiry_alloc, expiry_free, NULL);
	MemoryContextSwitchTo(old);
	memset(slot_waiter, 0, sizeof(DWaiter *) * dlock_shared->nslots);
}

static char *
owner_hkey(const char *key, int pid, TimestampTz session_start)
{
	if (key)
		return psprintf("k%s", key);
	return psprintf("s%d.%lld", pid, (long long) session_start);
}

static DOwner *
owner_find(const char *key, int pid, TimestampTz session_start)
{
	char	   *hkey = owner_hkey(key, pid, session_start);
	StrMapEntry *e = strmap_lookup(owners_map, hkey);

	pfree(hkey);
	return e ? e->value : NULL;
}

static DOwner *
owner_get(const char *key, int pid, TimestampTz session_start)
{
	MemoryContext old = MemoryContextSwitchTo(state_cxt);
	char	   *hkey = owner_hkey(key, pid, session_start);
	bool		found;
	StrMapEntry *e = strmap_insert(owners_map, hkey, &found);
	DOwner	   *o;

	if (found)
	{
		pfree(hkey);
		MemoryContextSwitchTo(old);
		return e->value;
	}
	o = MemoryContextAllocZero(owner_slab, sizeof(DOwner));
	o->hkey = hkey;
	o->key = key ? pstrdup(key) : NULL;
	o->pid = pid;
	o->session_start = session_start;
	dlist_init(&o->holders);
	dlist_init(&o->waiters);
	e->value = o;
	MemoryContextSwitchTo(old);
	return o;
}

static DLock *
lock_find(const char *name)
{
	StrMapEntry *e = strmap_lookup(locks_map, name);

	return e ? e->value : NULL;
}

static DLock *
lock_get(const char *name)
{
	MemoryContext old;
	StrMapEntry *e;
	bool		found;
	DLock	   *l;
	char	   *copy;

	e = strmap_lookup(locks_map, name);
	if (e)
		return e->value;
	old = MemoryContextSwitchTo(state_cxt);
	copy = pstrdup(name);
	e = strmap_insert(locks_map, copy, &found);
	l = MemoryContextAllocZero(lock_slab, sizeof(DLock));
	l->name = copy;
	dlist_init(&l->holders);
	dlist_init(&l->converts);
	dlist_init(&l->waiters);
	e->value = l;
	MemoryContextSwitchTo(old);
	return l;
}

static void
note_maybe_empty(DLock *lock, DOwner *owner)
{
	MemoryContext old = MemoryContextSwitchTo(batch_cxt);

	if (lock && !lock->maybe_empty)
	{
		lock->maybe_empty = true;
		maybe_empty_locks = lappend(maybe_empty_locks, lock);
	}
	if (owner && !owner->maybe_empty)
	{
		owner->maybe_empty = true;
		maybe_empty_owners = lappend(maybe_empty_owners, owner);
	}
	MemoryContextSwitchTo(old);
}

/* List an object among the batch's changes, once. */
static void
touch(DPersist *p, List **list, void *obj)
{
	if (!p->listed)
	{
		MemoryContext old = MemoryContextSwitchTo(batch_cxt);

		p->listed = true;
		*list = lappend(*list, obj);
		MemoryContextSwitchTo(old);
	}
}

#define touch_holder(h) touch(&(h)->p, &touched_holders, (h))
#define touch_waiter(w) touch(&(w)->p, &touched_waiters, (w))

static void
holder_set_lease(DHolder *h, int64 ttl_us, TimestampTz now)
{
	expiry_remove(h);
	h->ttl_us = ttl_us;
	h->expires_at = ttl_us > 0 ? now + ttl_us : 0;
	holder_changed_durably(h);
	if (h->expires_at != 0)
		expiry_add(h);
}

static DHolder *
holder_add(DLock *lock, DOwner *owner, int mode, int64 token, int32 count,
		   int pid, TimestampTz backend_start, TimestampTz granted_at)
{
	DHolder    *h = MemoryContextAllocZero(holder_slab, sizeof(DHolder));

	h->lock = lock;
	h->owner = owner;
	h->mode = mode;
	h->count = count;
	h->token = token;
	h->stored_token = token;
	h->pid = pid;
	h->backend_start = backend_start;
	h->granted_at = granted_at;
	dlist_push_tail(&lock->holders, &h->lock_node);
	dlist_push_tail(&owner->holders, &h->owner_node);
	lock->nheld[mode]++;
	holder_changed_durably(h);
	return h;
}

static void waiter_remove(DWaiter *w);
static void answer(int slotno, DLockStatus status, int64 token,
				   TimestampTz expires_at, int32 count);

static void
holder_remove(DHolder *h)
{
	/* a conversion still pending ends with the lock it would convert */
	if (h->conversion)
	{
		answer(h->conversion->slotno, DLOCK_STATUS_NOT_HELD, 0, 0, 0);
		waiter_remove(h->conversion);
	}
	dlist_delete(&h->lock_node);
	dlist_delete(&h->owner_node);
	h->lock->nheld[h->mode]--;
	expiry_remove(h);
	h->p.dead = true;
	touch_holder(h);
	note_maybe_empty(h->lock, h->owner);
}

static DHolder *
holder_of(DLock *lock, DOwner *owner)
{
	dlist_iter	it;

	dlist_foreach(it, &lock->holders)
	{
		DHolder    *h = dlist_container(DHolder, lock_node, it.cur);

		if (h->owner == owner && !h->implied)
			return h;
	}
	return NULL;
}

/* The owner's intention entry of the given mode on the lock, if any. */
static DHolder *
implied_of(DLock *lock, DOwner *owner, int mode)
{
	dlist_iter	it;

	dlist_foreach(it, &lock->holders)
	{
		DHolder    *h = dlist_container(DHolder, lock_node, it.cur);

		if (h->owner == owner && h->implied && h->mode == mode)
			return h;
	}
	return NULL;
}

static void
waiter_remove(DWaiter *w)
{
	dlist_delete(&w->lock_node);
	dlist_delete(&w->owner_node);
	if (w->holder)
	{
		w->lock->nconverting[w->mode]--;
		w->holder->conversion = NULL;
	}
	else
		w->lock->nwaiting[w->mode]--;
	if (slot_waiter[w->slotno] == w)
		slot_waiter[w->slotno] = NULL;
	w->p.dead = true;
	touch_waiter(w);
	note_maybe_empty(w->lock, w->owner);
}

/* Modes held on the lock by owners other than 'owner' (all entries). */
static DLockModeMask
others_held(DLock *lock, DOwner *owner)
{
	DLockModeMask m = 0;
	dlist_iter	it;

	dlist_foreach(it, &lock->holders)
	{
		DHolder    *h = dlist_container(DHolder, lock_node, it.cur);

		if (h->owner != owner)
			m |= DLOCK_MODE_BIT(h->mode);
	}
	return m;
}

static DLockModeMask
waiting_modes(DLock *lock)
{
	DLockModeMask m = 0;

	for (int i = 0; i < DLOCK_NMODES; i++)
		if (lock->nwaiting[i] > 0 || lock->nconverting[i] > 0)
			m |= DLOCK_MODE_BIT(i);
	return m;
}

static bool
compatible(int mode, DLockModeMask others)
{
	return (dlock_mode_conflicts(mode) & others) == 0;
}

static int64
take_ticket(void)
{
	int64		t = next_ticket++;

	if (next_ticket > ticket_hi)
	{
		ticket_hi = next_ticket + DLOCK_TICKET_RESERVE;
		ticket_hi_dirty = true;
	}
	return t;
}

/* ---------------------------------------------------------------------
 * Outcomes
 * --------------------------------------------------------------------- */

static Outcome *
outcome_of(int slotno)
{
	Outcome    *o = &outcomes[slotno];

	if (!o->listed)
	{
		MemoryContext old = MemoryContextSwitchTo(batch_cxt);

		memset(o, 0, sizeof(Outcome));
		o->listed = true;
		outcome_slots = lappend_int(outcome_slots, slotno);
		MemoryContextSwitchTo(old);
	}
	return o;
}

static void
answer(int slotno, DLockStatus status, int64 token, TimestampTz expires_at,
	   int32 count)
{
	Outcome    *o = outcome_of(slotno);

	o->answered = true;
	o->queued = false;
	o->status = status;
	o->token = token;
	o->expires_at = expires_at;
	o->count = count;
}

static void
answer_tokens(int slotno, const int64 *tokens, int n)
{
	Outcome    *o = outcome_of(slotno);

	answer(slotno, DLOCK_STATUS_GRANTED, tokens[0], 0, n);
	memcpy(o->tokens, tokens, sizeof(int64) * n);
}

/*
 * Copy a message into a slot-sized buffer, cut on a character boundary: a
 * cut inside a multibyte character would make the client's conversion fail
 * (22021 instead of the error it reports) and leave a lone byte in the log.
 */
static void
copy_message(char *dst, const char *msg)
{
	int			len = strlen(msg);

	if (len >= DLOCK_ERRMSG_LEN)
		len = pg_mbcliplen(msg, len, DLOCK_ERRMSG_LEN - 1);
	memcpy(dst, msg, len);
	dst[len] = '\0';
}

static void
answer_error(int slotno, DLockStatus status, const char *msg)
{
	Outcome    *o = outcome_of(slotno);

	answer(slotno, status, 0, 0, 0);
	copy_message(o->errmsg, msg);
}

/* ---------------------------------------------------------------------
 * The algorithm
 * --------------------------------------------------------------------- */

/*
 * convert_holder
 *		Give the holder a new mode.  Going up is a new grant: it gets a new
 *		token, so a former reader cannot come back as a writer with a token
 *		older than another reader's.
 */
static void
convert_holder(DHolder *h, int mode)
{
	bool		up = !dlock_mode_covers(h->mode, mode);

	h->lock->nheld[h->mode]--;
	h->mode = mode;
	h->lock->nheld[mode]++;
	if (up)
		h->token = take_ticket();
	holder_changed_durably(h);
	h->p.dirty = true;
	touch_holder(h);
}

/* ---------------------------------------------------------------------
 * Paths: a lock on /a/b/c takes intention locks on /a and /a/b
 * --------------------------------------------------------------------- */

#define DLOCK_MAX_DEPTH DLOCK_MAX_PATH_DEPTH

/*
 * Ancestors of a path name, shortest first, as lock names (palloc'd).  The
 * backend refused deeper paths (dlock_check_name); one that got here anyway
 * is an error, never a truncation: a dropped ancestor is a lost intention.
 */
static int
path_ancestors(const char *name, char **out)
{
	size_t		lens[DLOCK_MAX_DEPTH];
	int			n = dlock_path_ancestor_lengths(name, strlen(name), lens, DLOCK_MAX_DEPTH);

	if (n >= DLOCK_MAX_DEPTH)
		elog(ERROR, "path has %d ancestors, more than the limit of %d", n,
			 DLOCK_MAX_DEPTH - 1);
	for (int i = 0; i < n; i++)
		out[i] = pnstrdup(name, lens[i]);
	return n;
}

/* Take one more intention of the owner on the lock. */
static void
implied_add(DLock *lock, DOwner *owner, int mode, int pid,
			TimestampTz backend_start, TimestampTz now)
{
	DHolder    *h = implied_of(lock, owner, mode);

	if (h)
	{
		h->count++;
		h->p.dirty = true;
	}
	else
	{
		h = holder_add(lock, owner, mode, take_ticket(), 1, pid, backend_start, now);
		h->implied = true;
	}
	touch_holder(h);
}

static List *scan_locks;		/* locks to run grant_waiters on, this batch */

static void
scan_later(DLock *lock)
{
	MemoryContext old = MemoryContextSwitchTo(batch_cxt);

	scan_locks = lappend(scan_locks, lock);
	MemoryContextSwitchTo(old);
}

/* Drop one intention of the owner; the entry goes at zero. */
static void
implied_drop(DLock *lock, DOwner *owner, int mode)
{
	DHolder    *h = implied_of(lock, owner, mode);

	if (h == NULL)
		return;
	if (--h->count > 0)
	{
		h->p.dirty = true;
		touch_holder(h);
	}
	else
		holder_remove(h);
	scan_later(lock);
}

/* Does the owner hold the lock already in a mode that includes this one? */
static bool
covered_by_own(DLock *lock, DOwner *owner, int mode)
{
	dlist_iter	it;

	dlist_foreach(it, &lock->holders)
	{
		DHolder    *h = dlist_container(DHolder, lock_node, it.cur);

		if (h->owner == owner && dlock_mode_covers(h->mode, mode))
			return true;
	}
	return false;
}

/*
 * Could this part be granted now, looking at its own lock only?  A part
 * its owner already holds (re-entrant) adds no conflict and need not wait
 * for anyone; other parts queue as any request does.
 */
static bool
part_grantable(DWaiter *x)
{
	DLockModeMask ahead = 0;
	dlist_iter	it;

	if (x->holder)
	{
		/* a conversion: the other holders and the conversions before it */
		dlist_foreach(it, &x->lock->converts)
		{
			DWaiter    *y = dlist_container(DWaiter, lock_node, it.cur);

			if (y == x)
				break;
			ahead |= DLOCK_MODE_BIT(y->mode);
		}
		return compatible(x->mode, ahead) &&
			compatible(x->mode, others_held(x->lock, x->owner));
	}
	if (covered_by_own(x->lock, x->owner, x->mode))
		return true;

	dlist_foreach(it, &x->lock->converts)
		ahead |= DLOCK_MODE_BIT(dlist_container(DWaiter, lock_node, it.cur)->mode);
	dlist_foreach(it, &x->lock->waiters)
	{
		DWaiter    *y = dlist_container(DWaiter, lock_node, it.cur);

		if (y == x)
			break;
		if (y->group == NULL || y->group != x->group)
			ahead |= DLOCK_MODE_BIT(y->mode);
	}
	return compatible(x->mode, ahead) &&
		compatible(x->mode, others_held(x->lock, x->owner));
}

static bool
group_grantable(DGroup *g, DWaiter *checked)
{
	ListCell   *lc;

	foreach(lc, g->parts)
	{
		DWaiter    *x = lfirst(lc);

		if (x != checked && !part_grantable(x))
			return false;
	}
	return true;
}

static void grant_waiters(DLock *lock, TimestampTz now);

/*
 * take_name
 *		Grant the owner one named lock of a request: one more level of a lock
 *		it holds, or a new holder with an intention on each ancestor.  A new
 *		holder's token is a fresh ticket, so tokens grow in grant order.
 */
static DHolder *
take_name(DLock *lock, DOwner *owner, int mode, int64 ttl_us,
		  int pid, TimestampTz backend_start, TimestampTz now)
{
	DHolder    *h = holder_of(lock, owner);
	int			intention = dlock_intention_mode(mode);

	if (h)
	{
		h->count++;
		if (ttl_us > 0)
			holder_set_lease(h, ttl_us, now);
		h->p.dirty = true;
		holder_changed_durably(h);
	}
	else
	{
		char	   *anc[DLOCK_MAX_DEPTH];
		int			n = intention == DLOCK_MODE_INVALID ? 0 : path_ancestors(lock->name, anc);

		h = holder_add(lock, owner, mode, take_ticket(), 1, pid, backend_start, now);
		holder_set_lease(h, ttl_us, now);
		for (int i = 0; i < n; i++)
			implied_add(lock_get(anc[i]), owner, intention, pid, backend_start, now);
	}
	touch_holder(h);
	return h;
}

static void convert_now(DHolder *h, int mode, TimestampTz now);

/*
 * grant_group
 *		Grant every part of a request on several locks at once: each named
 *		lock with its intentions.  The other locks it touched are looked at
 *		again afterwards.
 */
static void
grant_group(DGroup *g, TimestampTz now)
{
	DWaiter    *first = linitial(g->named);
	int64		tokens[DLOCK_MAX_MULTI];
	DHolder    *last = NULL;
	int			i = 0;
	ListCell   *lc;

	foreach(lc, g->named)
	{
		DWaiter    *e = lfirst(lc);

		if (e->holder)
		{
			last = e->holder;
			convert_now(last, e->mode, now);
		}
		else
			last = take_name(e->lock, e->owner, e->mode, e->ttl_us,
							 e->pid, e->backend_start, now);
		tokens[i++] = last->token;
	}
	if (g->nnamed == 1)
		answer(first->slotno, DLOCK_STATUS_GRANTED, last->token, last->expires_at,
			   last->count);
	else
		answer_tokens(first->slotno, tokens, g->nnamed);
	foreach(lc, g->parts)
	{
		DWaiter    *x = lfirst(lc);

		scan_later(x->lock);
		x->group = NULL;
		waiter_remove(x);
	}
}

/*
 * release_explicit
 *		Free a named lock the owner no longer holds at all, with the
 *		intentions it held on the ancestors of a path, and hand them on.
 */
static void
release_explicit(DHolder *h, TimestampTz now)
{
	DLock	   *lock = h->lock;
	DOwner	   *owner = h->owner;
	int			intention = dlock_intention_mode(h->mode);
	char	   *anc[DLOCK_MAX_DEPTH];
	int			n = path_ancestors(lock->name, anc);

	holder_remove(h);
	for (int i = 0; i < n && intention != DLOCK_MODE_INVALID; i++)
	{
		DLock	   *a = lock_find(anc[i]);

		if (a)
			implied_drop(a, owner, intention);
	}
	grant_waiters(lock, now);
}

/*
 * grant_waiters
 *		Grant pending conversions first, in order, each compatible with the
 *		other holders and the conversions before it; then, in ticket order,
 *		every waiter compatible with the holders, with the conversions still
 *		pending, and with every request still queued before it.
 */
static void
grant_waiters(DLock *lock, TimestampTz now)
{
	DLockModeMask ahead = 0;
	dlist_mutable_iter it;

	dlist_foreach_modify(it, &lock->converts)
	{
		DWaiter    *c = dlist_container(DWaiter, lock_node, it.cur);
		DHolder    *h = c->holder;

		if (compatible(c->mode, ahead) && compatible(c->mode, others_held(lock, h->owner)))
		{
			if (c->group)
			{
				if (group_grantable(c->group, c))
					grant_group(c->group, now);
				else
					ahead |= DLOCK_MODE_BIT(c->mode);
				continue;
			}
			convert_now(h, c->mode, now);
			answer(c->slotno, DLOCK_STATUS_GRANTED, h->token, h->expires_at, h->count);
			waiter_remove(c);
		}
		else
			ahead |= DLOCK_MODE_BIT(c->mode);
	}

	dlist_foreach_modify(it, &lock->waiters)
	{
		DWaiter    *w = dlist_container(DWaiter, lock_node, it.cur);
		DHolder    *own;

		if (compatible(w->mode, ahead) &&
			compatible(w->mode, others_held(lock, w->owner)))
		{
			if (w->group)
			{
				/* a path request: only together with its other parts */
				if (group_grantable(w->group, w))
					grant_group(w->group, now);
				else
					ahead |= DLOCK_MODE_BIT(w->mode);
				continue;
			}
			/* the owner may have got it meanwhile, from another connection */
			own = holder_of(lock, w->owner);
			if (own && !dlock_mode_covers(own->mode, w->mode))
				answer(w->slotno, DLOCK_STATUS_MODE_HELD, 0, 0, own->mode);
			else
			{
				DHolder    *h = take_name(lock, w->owner, w->mode, w->ttl_us,
										  w->pid, w->backend_start, now);

				answer(w->slotno, DLOCK_STATUS_GRANTED, h->token, h->expires_at, h->count);
			}
			waiter_remove(w);
		}
		else
			ahead |= DLOCK_MODE_BIT(w->mode);
	}
}

/*
 * end_owner
 *		Release everything the owner holds and withdraw everything it waits
 *		for; withdrawn waiters other than 'except_slot' are told so.  The
 *		freed locks are handed on only afterwards, so nothing is granted to
 *		this owner again.  Returns how many holders and waiters it ended.
 */
static int
end_owner(DOwner *owner, int except_slot, TimestampTz now)
{
	List	   *locks = NIL;
	ListCell   *lc;
	int			n = 0;
	MemoryContext old = MemoryContextSwitchTo(batch_cxt);

	while (!dlist_is_empty(&owner->waiters))
	{
		DWaiter    *w = dlist_head_element(DWaiter, owner_node, &owner->waiters);

		if (w->slotno != except_slot)
			answer(w->slotno, DLOCK_STATUS_WITHDRAWN, 0, 0, 0);
		locks = lappend(locks, w->lock);
		if (!w->implied)
			n++;
		w->group = NULL;
		waiter_remove(w);
	}
	while (!dlist_is_empty(&owner->holders))
	{
		DHolder    *h = dlist_head_element(DHolder, owner_node, &owner->holders);

		locks = lappend(locks, h->lock);
		if (!h->implied)
			n++;
		holder_remove(h);
	}
	MemoryContextSwitchTo(old);
	foreach(lc, locks)
		grant_waiters(lfirst(lc), now);
	note_maybe_empty(NULL, owner);
	return n;
}

static void
withdraw_waiter(DWaiter *w, TimestampTz now)
{
	DLock	   *lock = w->lock;

	if (w->group)
	{
		DGroup	   *g = w->group;
		ListCell   *lc;

		foreach(lc, g->parts)
		{
			DWaiter    *x = lfirst(lc);

			x->group = NULL;
			waiter_remove(x);
			scan_later(x->lock);
		}
		return;
	}
	waiter_remove(w);
	/*
	 * Hand the lock on only after every withdrawal of the batch: granting
	 * now could grant a waiter whose own withdrawal comes later in the
	 * batch, which would then answer "cancelled" to a granted request.
	 */
	scan_later(lock);
}

/*
 * notify_holders
 *		Tell conflicting holders, once each until the lock changes hands,
 *		that a request waits behind them (NOTIFY dlock_blocking, name).
 */
static void
notify_holders(DLock *lock, DOwner *owner, int mode)
{
	dlist_iter	it;
	bool		wanted = false;

	dlist_foreach(it, &lock->holders)
	{
		DHolder    *h = dlist_container(DHolder, lock_node, it.cur);

		if (h->owner != owner && !h->notified &&
			!compatible(mode, DLOCK_MODE_BIT(h->mode)))
		{
			h->notified = true;
			wanted = true;
		}
	}
	/* NOTIFY payloads are shorter than 8000 bytes */
	if (wanted && strlen(lock->name) < 8000 &&
		!list_member_ptr(notify_names, lock->name))
	{
		MemoryContext old = MemoryContextSwitchTo(batch_cxt);

		notify_names = lappend(notify_names, pstrdup(lock->name));
		MemoryContextSwitchTo(old);
	}
}

/*
 * enqueue
 *		Queue the request with a new ticket: at the tail of the lock's queue,
 *		or, for a conversion of 'holder', at the tail of its conversions.
 */
static DWaiter *
enqueue(Request *r, DOwner *owner, DLock *lock, DHolder *holder, int mode,
		TimestampTz now)
{
	DWaiter    *w = MemoryContextAllocZero(state_cxt, sizeof(DWaiter));

	w->lock = lock;
	w->owner = owner;
	w->holder = holder;
	w->mode = mode;
	w->ticket = take_ticket();
	w->slotno = r->slotno;
	w->pid = r->pid;
	w->backend_start = r->session_start;
	w->since = now;
	w->timeout_at = r->timeout_at;
	w->ttl_us = r->ttl_us;
	if (holder)
	{
		dlist_push_tail(&lock->converts, &w->lock_node);
		lock->nconverting[w->mode]++;
		holder->conversion = w;
	}
	else
	{
		dlist_push_tail(&lock->waiters, &w->lock_node);
		lock->nwaiting[w->mode]++;
	}
	dlist_push_tail(&owner->waiters, &w->owner_node);
	slot_waiter[r->slotno] = w;
	touch_waiter(w);
	outcome_of(r->slotno)->queued = true;
	notify_holders(lock, owner, w->mode);
	return w;
}

/* ---------------------------------------------------------------------
 * Deadlock detection
 *
 * Owners form a wait-for graph: a waiting request waits for the owners of
 * conflicting holders of its lock and of conflicting requests queued before
 * it.  Grants and releases never add an edge between owners (a request
 * granted ahead of a waiter turns an edge to a queued request into an edge
 * to a holder of the same owner), so a cycle can only be closed by a new
 * wait, and looking from every new wait finds every deadlock, once.
 * --------------------------------------------------------------------- */

static uint64 deadlock_search = 0;

/* Describe an owner for the cycle's DETAIL; keys are secrets: no key. */
static void
describe_owner(StringInfo buf, DOwner *o, int pid)
{
	if (o->key)
		appendStringInfo(buf, "an owner key (pid %d)", pid);
	else
		appendStringInfo(buf, "session %d", o->pid);
}

/*
 * Call fn for every owner the waiter waits for, with the holder or request
 * that makes it wait; stops and returns true as soon as fn does.
 */
typedef bool (*blocker_fn) (DOwner *blocker, int pid, bool holds, void *arg);

static bool covered_by_own(DLock *lock, DOwner *owner, int mode);

/*
 * Call fn for the conflicting requests of other owners queued in 'queue'
 * before w (all of them if w is not in it; *reached tells whether it was).
 */
static bool
queue_blocks(dlist_head *queue, DWaiter *w, blocker_fn fn, void *arg, bool *reached)
{
	dlist_iter	it;

	*reached = false;
	dlist_foreach(it, queue)
	{
		DWaiter    *x = dlist_container(DWaiter, lock_node, it.cur);

		if (x == w)
		{
			*reached = true;
			return false;
		}
		if (x->owner != w->owner &&
			!compatible(w->mode, DLOCK_MODE_BIT(x->mode)) &&
			fn(x->owner, x->pid, false, arg))
			return true;
	}
	return false;
}

static bool
for_each_blocker(DWaiter *w, blocker_fn fn, void *arg)
{
	dlist_iter	it;
	bool		reached;

	/* a part the owner holds already waits for nobody */
	if (w->holder == NULL && covered_by_own(w->lock, w->owner, w->mode))
		return false;

	dlist_foreach(it, &w->lock->holders)
	{
		DHolder    *h = dlist_container(DHolder, lock_node, it.cur);

		if (h->owner != w->owner &&
			!compatible(w->mode, DLOCK_MODE_BIT(h->mode)) &&
			fn(h->owner, h->pid, true, arg))
			return true;
	}
	/* conversions come before every waiter, and in their own order */
	if (queue_blocks(&w->lock->converts, w, fn, arg, &reached))
		return true;
	return !reached && queue_blocks(&w->lock->waiters, w, fn, arg, &reached);
}

typedef struct CycleSearch
{
	DOwner	   *target;			/* the owner of the new wait */
	DWaiter    *via;			/* the wait being followed */
	List	   *steps;			/* text of each edge, last edge first */
} CycleSearch;

static bool reaches_target(DOwner *o, int pid, bool holds, void *arg);

/* Does some wait of 'from' lead back to the target? */
static bool
owner_reaches(DOwner *from, CycleSearch *cs)
{
	dlist_iter	it;

	check_stack_depth();
	if (from->visited == deadlock_search)
		return false;
	from->visited = deadlock_search;
	dlist_foreach(it, &from->waiters)
	{
		DWaiter    *x = dlist_container(DWaiter, owner_node, it.cur);
		DWaiter    *saved = cs->via;

		cs->via = x;
		if (for_each_blocker(x, reaches_target, cs))
			return true;
		cs->via = saved;
	}
	return false;
}

static bool
reaches_target(DOwner *o, int pid, bool holds, void *arg)
{
	CycleSearch *cs = arg;
	DWaiter    *w = cs->via;

	if (o == cs->target || owner_reaches(o, cs))
	{
		StringInfoData buf;

		initStringInfo(&buf);
		describe_owner(&buf, w->owner, w->pid);
		appendStringInfo(&buf, " waits for \"%s\" %s ", w->lock->name,
						 holds ? "held by" : "queued earlier by");
		describe_owner(&buf, o, pid);
		appendStringInfoChar(&buf, '.');
		buf.data[0] = pg_toupper((unsigned char) buf.data[0]);
		cs->steps = lcons(buf.data, cs->steps);
		return true;
	}
	return false;
}

/*
 * deadlock_cycle
 *		If the new waiter closes a cycle, describe it (in wait order, the new
 *		waiter first); else NULL.
 */
static char *
deadlock_cycle(DWaiter *w)
{
	CycleSearch cs = {w->owner, w, NIL};
	StringInfoData buf;
	ListCell   *lc;

	/*
	 * Nobody can wait for an owner that holds nothing and waits only here
	 * (later waiters of this lock do not exist yet): the usual case, cheap.
	 */
	if (dlist_is_empty(&w->owner->holders) &&
		dlist_head_node(&w->owner->waiters) == &w->owner_node &&
		dlist_tail_node(&w->owner->waiters) == &w->owner_node)
		return NULL;

	deadlock_search++;
	w->owner->visited = deadlock_search;
	if (!for_each_blocker(w, reaches_target, &cs))
		return NULL;
	initStringInfo(&buf);
	foreach(lc, cs.steps)
	{
		if (buf.len > 0)
			appendStringInfoChar(&buf, ' ');
		appendStringInfoString(&buf, lfirst(lc));
	}
	return buf.data;
}

/* Would the owner's request in this mode be granted now on this lock? */
static bool
grantable_now(DLock *lock, DOwner *owner, int mode)
{
	return compatible(mode, others_held(lock, owner)) &&
		compatible(mode, waiting_modes(lock));
}

/* Fail a just queued request (with all its parts) if it closes a cycle. */
static void
check_deadlock(DWaiter *w, int slotno, TimestampTz now)
{
	List	   *parts = w->group ? list_copy(w->group->parts) : list_make1(w);
	ListCell   *lc;

	foreach(lc, parts)
	{
		char	   *cycle = deadlock_cycle(lfirst(lc));

		if (cycle)
		{
			withdraw_waiter(w, now);
			answer_error(slotno, DLOCK_STATUS_DEADLOCK, cycle);
			return;
		}
	}
}

/*
 * do_acquire
 *		Grant now, refuse (try-acquire), or queue.  A request may name
 *		several locks (dlock_acquire_all), and a path also needs the
 *		intention mode on each ancestor: all the parts are granted together,
 *		or queued together as one request, each in its lock's FIFO order.
 */
static void
do_acquire(Request *r, TimestampTz now)
{
	DOwner	   *owner = owner_get(r->owner, r->pid, r->session_start);
	int			intention = dlock_intention_mode(r->mode);
	DLock	  **locks = palloc0(sizeof(DLock *) * r->nnames);	/* NULL: not looked up */
	List	   *parts_locks = NIL;	/* (lock, mode) of every intention part */
	List	   *parts_modes = NIL;
	bool		now_ok = true;
	ListCell   *lc,
			   *lc2;

	for (int i = 0; i < r->nnames; i++)
	{
		DHolder    *own;

		locks[i] = lock_get(r->names[i]);
		own = holder_of(locks[i], owner);
		if (own && !dlock_mode_covers(own->mode, r->mode))
		{
			/* which name (in token) and its held mode (in count) */
			answer(r->slotno, DLOCK_STATUS_MODE_HELD, i, 0, own->mode);
			goto done;
		}
		if (own)
			continue;			/* re-entrant: its intentions are there */
		now_ok = now_ok && grantable_now(locks[i], owner, r->mode);
		if (intention != DLOCK_MODE_INVALID)
		{
			char	   *anc[DLOCK_MAX_DEPTH];
			int			n = path_ancestors(r->names[i], anc);

			for (int j = 0; j < n; j++)
			{
				DLock	   *a = lock_get(anc[j]);

				parts_locks = lappend(parts_locks, a);
				parts_modes = lappend_int(parts_modes, intention);
				now_ok = now_ok && (covered_by_own(a, owner, intention) ||
									grantable_now(a, owner, intention));
			}
		}
	}

	if (now_ok)
	{
		int64		tokens[DLOCK_MAX_MULTI];
		DHolder    *h = NULL;

		for (int i = 0; i < r->nnames; i++)
		{
			h = take_name(locks[i], owner, r->mode, r->ttl_us,
						  r->pid, r->session_start, now);
			tokens[i] = h->token;
		}
		if (r->op == DLOCK_OP_ACQUIRE_ALL)
			answer_tokens(r->slotno, tokens, r->nnames);
		else
			answer(r->slotno, DLOCK_STATUS_GRANTED, h->token, h->expires_at, h->count);
	}
	else if (r->op == DLOCK_OP_TRY)
		answer(r->slotno, DLOCK_STATUS_REFUSED, 0, 0, 0);
	else if (r->nnames == 1 && parts_locks == NIL)
	{
		/* one flat name: a plain waiter */
		check_deadlock(enqueue(r, owner, locks[0], NULL, r->mode, now), r->slotno, now);
	}
	else
	{
		MemoryContext old = MemoryContextSwitchTo(state_cxt);
		DGroup	   *g = palloc0(sizeof(DGroup));
		DWaiter    *first = NULL;

		MemoryContextSwitchTo(old);
		for (int i = 0; i < r->nnames; i++)
		{
			DWaiter    *w = enqueue(r, owner, locks[i], NULL, r->mode, now);

			w->group = g;
			old = MemoryContextSwitchTo(state_cxt);
			g->named = lappend(g->named, w);
			g->parts = lappend(g->parts, w);
			MemoryContextSwitchTo(old);
			if (first == NULL)
				first = w;
		}
		g->nnamed = r->nnames;
		forboth(lc, parts_locks, lc2, parts_modes)
		{
			DWaiter    *x = enqueue(r, owner, lfirst(lc), NULL, lfirst_int(lc2), now);

			x->implied = true;
			x->group = g;
			old = MemoryContextSwitchTo(state_cxt);
			g->parts = lappend(g->parts, x);
			MemoryContextSwitchTo(old);
		}
		slot_waiter[r->slotno] = first;
		check_deadlock(first, r->slotno, now);
	}
done:
	foreach(lc, parts_locks)
		note_maybe_empty(lfirst(lc), NULL);
	for (int i = 0; i < r->nnames; i++)
		note_maybe_empty(locks[i], NULL);
	note_maybe_empty(NULL, owner);
}

static DHolder *
find_holder(Request *r)
{
	DOwner	   *owner = owner_find(r->owner, r->pid, r->session_start);
	DLock	   *lock = lock_find(r->name);

	if (owner == NULL || lock == NULL)
		return NULL;
	return holder_of(lock, owner);
}

/*
 * do_release
 *		One level of the named lock.  Several names come only from a backend
 *		undoing a grant of dlock_acquire_all it could not report (dlock_api.c,
 *		withdraw); the answer is then about the last one.
 */
static void
do_release(Request *r, TimestampTz now)
{
	for (int i = 0; i < r->nnames; i++)
	{
		DHolder    *h;

		r->name = r->names[i];
		h = find_holder(r);
		if (h == NULL)
			answer(r->slotno, DLOCK_STATUS_NOT_HELD, 0, 0, 0);
		else if (--h->count > 0)
		{
			h->p.dirty = true;
			touch_holder(h);
			answer(r->slotno, DLOCK_STATUS_RELEASED, h->token, 0, h->count);
		}
		else
		{
			answer(r->slotno, DLOCK_STATUS_RELEASED, h->token, 0, 0);
			release_explicit(h, now);
		}
	}
}

static void
do_renew(Request *r, TimestampTz now)
{
	DHolder    *h = find_holder(r);
	int64		ttl_us;

	if (h == NULL)
	{
		answer(r->slotno, DLOCK_STATUS_NOT_HELD, 0, 0, 0);
		return;
	}
	ttl_us = r->ttl_us > 0 ? r->ttl_us : h->ttl_us;
	/* a lease taken before dlock.max_ttl was lowered renews within it */
	if (r->max_ttl_us > 0)
		ttl_us = Min(ttl_us, r->max_ttl_us);
	if (ttl_us > 0)
	{
		holder_set_lease(h, ttl_us, now);
		h->p.dirty = true;
		touch_holder(h);
	}
	answer(r->slotno, DLOCK_STATUS_RENEWED, h->token, h->expires_at, h->count);
}

/*
 * do_convert
 *		Change the mode of a held lock.  Down (or to a mode the held one
 *		includes) is immediate and may let waiters in.  Up waits, ahead of
 *		every new request, until compatible with the other holders and the
 *		conversions queued before it; the holder keeps its old mode meanwhile.
 */
static void drain_scans(TimestampTz now);

/*
 * convert_now
 *		Give a held lock its new mode at once, moving the intentions on the
 *		ancestors of a path from the old mode's to the new mode's.
 */
static void
convert_now(DHolder *h, int mode, TimestampTz now)
{
	int			from = dlock_intention_mode(h->mode);
	int			to = dlock_intention_mode(mode);

	if (from != to)
	{
		char	   *anc[DLOCK_MAX_DEPTH];
		int			n = path_ancestors(h->lock->name, anc);

		for (int i = 0; i < n; i++)
		{
			DLock	   *a = lock_get(anc[i]);

			if (to != DLOCK_MODE_INVALID)
				implied_add(a, h->owner, to, h->pid, h->backend_start, now);
			if (from != DLOCK_MODE_INVALID)
				implied_drop(a, h->owner, from);
		}
	}
	convert_holder(h, mode);
}

/*
 * do_convert
 *		Change the mode of a held lock.  Down (or to a mode the held one
 *		includes) is immediate and may let waiters in.  Up waits, ahead of
 *		every new request, until compatible with the other holders and the
 *		conversions queued before it; the holder keeps its old mode meanwhile.
 *		A path whose new mode needs a stronger intention on its ancestors
 *		also queues for those, and the whole conversion is granted together.
 */
static void
do_convert(Request *r, TimestampTz now)
{
	DHolder    *h = find_holder(r);
	DLock	   *lock;
	int			to;
	char	   *anc[DLOCK_MAX_DEPTH];
	DLock	   *anc_lock[DLOCK_MAX_DEPTH];
	int			n = 0;
	bool		now_ok;

	if (h == NULL)
	{
		answer(r->slotno, DLOCK_STATUS_NOT_HELD, 0, 0, 0);
		return;
	}
	lock = h->lock;
	if (h->conversion)
	{
		answer_error(r->slotno, DLOCK_STATUS_ERROR,
					 "a conversion of this lock by this owner is already waiting");
		return;
	}
	if (dlock_mode_covers(h->mode, r->mode))
	{
		/* weaker intentions are always compatible with the ones held */
		convert_now(h, r->mode, now);
		answer(r->slotno, DLOCK_STATUS_GRANTED, h->token, h->expires_at, h->count);
		grant_waiters(lock, now);
		drain_scans(now);
		return;
	}

	/* up: the lock, and the ancestors whose intention must grow */
	to = dlock_intention_mode(r->mode);
	if (to != DLOCK_MODE_INVALID)
	{
		int			na = path_ancestors(lock->name, anc);

		for (int i = 0; i < na; i++)
		{
			DLock	   *a = lock_get(anc[i]);

			if (!covered_by_own(a, h->owner, to))
				anc_lock[n++] = a;
		}
	}
	now_ok = compatible(r->mode, others_held(lock, h->owner)) &&
		dlist_is_empty(&lock->converts);
	for (int i = 0; i < n; i++)
		now_ok = now_ok && grantable_now(anc_lock[i], h->owner, to);
	if (now_ok)
	{
		convert_now(h, r->mode, now);
		answer(r->slotno, DLOCK_STATUS_GRANTED, h->token, h->expires_at, h->count);
		drain_scans(now);
		return;
	}
	{
		DWaiter    *c = enqueue(r, h->owner, lock, h, r->mode, now);

		if (n > 0)
		{
			MemoryContext old = MemoryContextSwitchTo(state_cxt);
			DGroup	   *g = palloc0(sizeof(DGroup));

			g->named = list_make1(c);
			g->parts = list_make1(c);
			g->nnamed = 1;
			c->group = g;
			MemoryContextSwitchTo(old);
			for (int i = 0; i < n; i++)
			{
				DWaiter    *x = enqueue(r, h->owner, anc_lock[i], NULL, to, now);

				x->implied = true;
				x->group = g;
				old = MemoryContextSwitchTo(state_cxt);
				g->parts = lappend(g->parts, x);
				MemoryContextSwitchTo(old);
			}
			slot_waiter[r->slotno] = c;
		}
		check_deadlock(c, r->slotno, now);
	}
}

static void
do_release_all(Request *r, TimestampTz now)
{
	DOwner	   *owner = owner_find(r->owner, r->pid, r->session_start);
	int			n = owner ? end_owner(owner, r->slotno, now) : 0;

	answer(r->slotno, DLOCK_STATUS_COUNT, 0, 0, n);
}

/* Look again at the locks a grant or withdrawal of a path request touched. */
static void
drain_scans(TimestampTz now)
{
	while (scan_locks != NIL)
	{
		DLock	   *lock = linitial(scan_locks);

		scan_locks = list_delete_first(scan_locks);
		grant_waiters(lock, now);
	}
}

static void
execute(Request *r, TimestampTz now)
{
	switch (r->op)
	{
		case DLOCK_OP_ACQUIRE:
		case DLOCK_OP_TRY:
		case DLOCK_OP_ACQUIRE_ALL:
			do_acquire(r, now);
			break;
		case DLOCK_OP_RELEASE:
			do_release(r, now);
			break;
		case DLOCK_OP_RENEW:
			do_renew(r, now);
			break;
		case DLOCK_OP_RELEASE_ALL:
			do_release_all(r, now);
			break;
		case DLOCK_OP_CONVERT:
			do_convert(r, now);
			break;
		default:
			answer_error(r->slotno, DLOCK_STATUS_ERROR, "unknown request");
			break;
	}
	drain_scans(now);
}

/*
 * Leases expired per batch at most: a mass expiry is spread over several
 * batches so that requests arriving meanwhile are not held up behind it.
 */
#define DLOCK_EXPIRE_PER_BATCH 2000

static bool
lease_due(TimestampTz now)
{
	DHolder    *first = expiry_first();

	return first != NULL && first->expires_at <= now;
}

/* Release leases that have run out, up to the per-batch cap. */
static void
expire_leases(TimestampTz now)
{
	for (int n = 0; n < DLOCK_EXPIRE_PER_BATCH && lease_due(now); n++)
		release_explicit(expiry_first(), now);
}

/* ---------------------------------------------------------------------
 * Slots
 * --------------------------------------------------------------------- */

/* Copy a slot's request; caller holds the slot's mutex. */
static void
copy_request(DLockSlot *slot, int slotno, Request *r)
{
	r->slotno = slotno;
	r->seq = slot->seq;
	r->op = slot->op;
	r->mode = slot->mode;
	r->ttl_us = slot->ttl_us;
	r->max_ttl_us = slot->max_ttl_us;
	r->timeout_at = slot->timeout_at;
	r->pid = slot->pid;
	r->session_start = slot->session_start;
	/* several names, NUL-separated: acquire_all, or a release undoing one */
	r->nnames = slot->nnames;
	r->names = palloc(sizeof(char *) * r->nnames);
	if (r->nnames > 1)
	{
		const char *p = dlock_slot_name(slot);

		for (int i = 0; i < r->nnames; i++)
		{
			r->names[i] = pstrdup(p);
			p += strlen(p) + 1;
		}
	}
	else
		r->names[0] = pnstrdup(dlock_slot_name(slot), slot->name_len);
	r->name = r->names[0];
	r->owner = slot->owner_len > 0 ?
		pnstrdup(dlock_slot_owner(slot), slot->owner_len) : NULL;
}

static int
request_seq_cmp(const ListCell *a, const ListCell *b)
{
	const Request *ra = lfirst(a);
	const Request *rb = lfirst(b);

	if (ra->seq < rb->seq)
		return -1;
	return ra->seq > rb->seq ? 1 : 0;
}

/*
 * session_gone
 *		Clean up after an exited session: its waiting request, a grant it
 *		never collected or an undo of one still pending (owner-keyed: the
 *		session's own locks go anyway), and every lock the session owns.
 */
static void
session_gone(Request *last, TimestampTz now)
{
	DWaiter    *w = slot_waiter[last->slotno];
	DOwner	   *owner;
	bool		uncollected = last->state == DLOCK_SLOT_DONE &&
		last->status == DLOCK_STATUS_GRANTED && dlock_op_grants(last->op);
	bool		undo_pending = last->abandoned && last->op == DLOCK_OP_RELEASE &&
		(last->state == DLOCK_SLOT_SUBMITTED || last->state == DLOCK_SLOT_ACCEPTED);

	if (w)
		withdraw_waiter(w, now);
	if ((uncollected || undo_pending) && last->owner != NULL)
	{
		for (int i = 0; i < last->nnames; i++)
		{
			DHolder    *h;

			last->name = last->names[i];
			h = find_holder(last);
			if (h && --h->count > 0)
			{
				h->p.dirty = true;
				touch_holder(h);
			}
			else if (h)
				release_explicit(h, now);
		}
	}
	owner = owner_find(NULL, last->pid, last->session_start);
	if (owner)
		end_owner(owner, last->slotno, now);
	outcome_of(last->slotno)->end_session = true;
}

/*
 * collect
 *		Take from the slots what this batch handles: session ends,
 *		withdrawals and new requests (in submission order).  New requests
 *		are marked ACCEPTED.  In isolation mode only the earliest new request
 *		is taken; the others stay submitted for later batches.
 */
static void
collect(List **ended, List **withdrawn, List **fresh)
{
	for (int i = 0; i < dlock_shared->nslots; i++)
	{
		DLockSlot  *slot = dlock_slot(i);
		Request    *r;

		SpinLockAcquire(&slot->mutex);
		if (slot->pid == 0)
		{
			SpinLockRelease(&slot->mutex);
			continue;
		}
		if (slot->session_ended)
		{
			r = palloc(sizeof(Request));
			copy_request(slot, i, r);
			r->state = slot->state;
			r->status = slot->status;
			r->abandoned = slot->abandoned;
			SpinLockRelease(&slot->mutex);
			*ended = lappend(*ended, r);
		}
		else if (slot->cancel &&
				 (slot->state == DLOCK_SLOT_SUBMITTED || slot->state == DLOCK_SLOT_ACCEPTED))
		{
			slot->state = DLOCK_SLOT_ACCEPTED;
			r = palloc(sizeof(Request));
			copy_request(slot, i, r);
			SpinLockRelease(&slot->mutex);
			*withdrawn = lappend(*withdrawn, r);
		}
		else if (slot->state == DLOCK_SLOT_SUBMITTED)
		{
			slot->state = DLOCK_SLOT_ACCEPTED;
			r = palloc(sizeof(Request));
			copy_request(slot, i, r);
			SpinLockRelease(&slot->mutex);
			*fresh = lappend(*fresh, r);
		}
		else
			SpinLockRelease(&slot->mutex);
	}
	list_sort(*fresh, request_seq_cmp);

	if (isolate && list_length(*fresh) > 1)
	{
		ListCell   *lc;

		for_each_from(lc, *fresh, 1)
		{
			Request    *r = lfirst(lc);
			DLockSlot  *slot = dlock_slot(r->slotno);

			SpinLockAcquire(&slot->mutex);
			if (slot->state == DLOCK_SLOT_ACCEPTED)
				slot->state = DLOCK_SLOT_SUBMITTED;
			SpinLockRelease(&slot->mutex);
		}
		*fresh = list_truncate(*fresh, 1);
	}
}

/* Whether the batch has an answer or a freed slot to publish. */
static bool
answers_ready(void)
{
	ListCell   *lc;

	foreach(lc, outcome_slots)
	{
		Outcome    *o = &outcomes[lfirst_int(lc)];

		if (o->answered || o->end_session)
			return true;
	}
	return false;
}

/* Whether this batch's writes may wait for a later batch's commit. */
static bool
may_defer(TimestampTz now)
{
	if (isolate || deferred_batches >= DLOCK_MAX_DEFERRED || answers_ready())
		return false;
	return deferred_batches == 0 ||
		!TimestampDifferenceExceeds(deferred_since, now, DLOCK_DEFER_MS);
}

/*
 * publish
 *		After commit: hand every outcome to its slot and wake its backend.
 */
static void
publish(void)
{
	ListCell   *lc;

	foreach(lc, outcome_slots)
	{
		int			slotno = lfirst_int(lc);
		Outcome    *o = &outcomes[slotno];
		DLockSlot  *slot = dlock_slot(slotno);
		PGPROC	   *proc = &ProcGlobal->allProcs[slotno];
		bool		wake = false;

		SpinLockAcquire(&slot->mutex);
		if (o->end_session)
		{
			slot->pid = 0;
			slot->session_ended = false;
			slot->state = DLOCK_SLOT_FREE;
			slot->cancel = false;
		}
		else if (o->answered && slot->abandoned &&
				 !(o->status == DLOCK_STATUS_GRANTED && dlock_op_grants(slot->op)))
		{
			/* nobody waits for this answer, and nothing needs undoing */
			slot->state = DLOCK_SLOT_FREE;
			slot->cancel = false;
			slot->abandoned = false;
			wake = true;		/* its next call may wait for the slot */
		}
		else if (o->answered)
		{
			slot->status = o->status;
			slot->token = o->token;
			slot->expires_at = o->expires_at;
			slot->count = o->count;
			memcpy(slot->tokens, o->tokens, sizeof(o->tokens));
			memcpy(slot->errmsg, o->errmsg, DLOCK_ERRMSG_LEN);
			slot->state = DLOCK_SLOT_DONE;
			wake = true;
		}
		else if (o->queued && slot_waiter[slotno] != NULL)
			slot->ticket = slot_waiter[slotno]->ticket;
		SpinLockRelease(&slot->mutex);
		if (wake)
			SetLatch(&proc->procLatch);
		o->listed = false;
	}
}

/* After commit: the rows now match; free what left the picture. */
static void
settle(void)
{
	ListCell   *lc;

	foreach(lc, touched_holders)
	{
		DHolder    *h = lfirst(lc);

		if (h->p.dead)
			pfree(h);
		else
		{
			h->p.stored = true;
			h->p.dirty = false;
			h->p.listed = false;
			h->stored_token = h->token;
		}
	}
	foreach(lc, touched_waiters)
	{
		DWaiter    *w = lfirst(lc);

		if (w->p.dead)
			pfree(w);
		else
		{
			w->p.stored = true;
			w->p.listed = false;
		}
	}
	foreach(lc, maybe_empty_locks)
	{
		DLock	   *l = lfirst(lc);

		l->maybe_empty = false;
		if (dlist_is_empty(&l->holders) && dlist_is_empty(&l->waiters))
		{
			strmap_delete(locks_map, l->name);
			pfree(l->name);
			pfree(l);
		}
	}
	foreach(lc, maybe_empty_owners)
	{
		DOwner	   *o = lfirst(lc);

		o->maybe_empty = false;
		if (dlist_is_empty(&o->holders) && dlist_is_empty(&o->waiters))
		{
			strmap_delete(owners_map, o->hkey);
			pfree(o->hkey);
			if (o->key)
				pfree(o->key);
			pfree(o);
		}
	}
}

static void
batch_begin(void)
{
	scan_locks = NIL;
	if (deferred_batches > 0)
		return;					/* keep gathering the deferred writes */
	MemoryContextReset(batch_cxt);
	touched_holders = NIL;
	touched_waiters = NIL;
	maybe_empty_locks = NIL;
	maybe_empty_owners = NIL;
	outcome_slots = NIL;
	notify_names = NIL;
	ticket_hi_dirty = false;
	batch_durable = false;
}

static void
xact_begin(void)
{
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	PushActiveSnapshot(GetTransactionSnapshot());
}

/*
 * xact_commit
 *		Commit; with flush false, without waiting for the WAL flush (or a
 *		synchronous standby).  With flush true the server's own
 *		synchronous_commit applies if it is at least "on" (remote_apply on
 *		an HA primary included).
 */
static void
xact_commit(bool flush)
{
	/*
	 * Durable means at least "on", whatever ALTER DATABASE/ROLE or the
	 * server's configuration says: a weaker setting inherited there would
	 * hand out a token twice after a crash.  A stronger one (remote_apply)
	 * is kept.
	 */
	if (!flush)
		(void) set_config_option("synchronous_commit", "off",
								 PGC_SUSET, PGC_S_SESSION, GUC_ACTION_LOCAL,
								 true, 0, false);
	else if (synchronous_commit < SYNCHRONOUS_COMMIT_REMOTE_FLUSH)
		(void) set_config_option("synchronous_commit", "on",
								 PGC_SUSET, PGC_S_SESSION, GUC_ACTION_LOCAL,
								 true, 0, false);
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();

	/*
	 * A commit waiting for a synchronous standby stops waiting when the
	 * postmaster dies, and ends as if the standby had confirmed it: a
	 * promoted standby may then never hold what this batch granted.  Answer
	 * nobody; the waiting backends die with the postmaster.
	 */
	if (!PostmasterIsAlive())
		proc_exit(1);
}

/* Write the batch's changes in the open transaction. */
static void
store_batch(void)
{
	if (ticket_hi_dirty)
		dlock_store_save_counter(ticket_hi);
	if (touched_holders != NIL || touched_waiters != NIL)
		dlock_store_write(touched_holders, touched_waiters);
	if (notify_names != NIL)
		dlock_store_notify(notify_names);
}

/* ---------------------------------------------------------------------
 * Loading
 * --------------------------------------------------------------------- */

static void
load_held_row(const char *name, const char *owner_key, int pid,
			  TimestampTz backend_start, int mode, int32 count, int64 token,
			  TimestampTz granted_at, TimestampTz expires_at, int64 ttl_us,
			  bool implied)
{
	DOwner	   *owner = owner_get(owner_key, pid, owner_key ? 0 : backend_start);
	DLock	   *lock = lock_get(name);
	DHolder    *h = holder_add(lock, owner, mode, token, count, pid,
							   backend_start, granted_at);

	h->ttl_us = ttl_us;
	h->expires_at = expires_at;
	h->implied = implied;
	if (expires_at != 0)
		expiry_add(h);
	h->p.stored = true;
}

static bool
session_alive(DOwner *o)
{
	for (int i = 0; i < dlock_shared->nslots; i++)
	{
		DLockSlot  *slot = dlock_slot(i);
		bool		alive;

		SpinLockAcquire(&slot->mutex);
		alive = slot->pid == o->pid && slot->session_start == o->session_start &&
			!slot->session_ended;
		SpinLockRelease(&slot->mutex);
		if (alive)
			return true;
	}
	return false;
}

/*
 * reload
 *		Rebuild the picture from the tables, in a transaction of its own:
 *		drop the locks of sessions that are gone, and give leases the
 *		restart grace after a server restart.  Requests still waiting in
 *		slots, or being decided when the last batch failed, are submitted
 *		again: the next batch takes them in their old submission order, so
 *		they queue again in their old order, with new tickets.  Returns
 *		false if the extension is not installed in this database.
 */
static bool
reload(void)
{
	TimestampTz now;
	bool		fresh;
	int			resubmitted = 0;
	strmap_iterator it;
	StrMapEntry *e;

	picture_reset();
	batch_begin();
	xact_begin();
	if (!dlock_store_installed())
	{
		xact_commit(true);
		return false;
	}
	now = GetCurrentTimestamp();
	dlock_store_set_logged(dlock_logged);
	ticket_hi = dlock_store_load_counter();
	next_ticket = ticket_hi;
	dlock_store_clear_queue();
	dlock_store_load_held(load_held_row);

	SpinLockAcquire(&dlock_shared->mutex);
	fresh = dlock_shared->fresh;
	SpinLockRelease(&dlock_shared->mutex);

	/* sessions that ended while no worker was looking */
	strmap_start_iterate(owners_map, &it);
	while ((e = strmap_iterate(owners_map, &it)) != NULL)
	{
		DOwner	   *o = e->value;

		if (o->key == NULL && !session_alive(o))
		{
			dlist_mutable_iter hit;

			dlist_foreach_modify(hit, &o->holders)
				holder_remove(dlist_container(DHolder, owner_node, hit.cur));
		}
	}

	/* leases that ran out while the server was down get a grace */
	if (fresh && dlock_restart_grace_ms > 0)
	{
		TimestampTz until = now + (int64) dlock_restart_grace_ms * 1000;

		strmap_start_iterate(owners_map, &it);
		while ((e = strmap_iterate(owners_map, &it)) != NULL)
		{
			DOwner	   *o = e->value;
			dlist_iter	hit;

			dlist_foreach(hit, &o->holders)
			{
				DHolder    *h = dlist_container(DHolder, owner_node, hit.cur);

				if (h->expires_at != 0 && h->expires_at < until && !h->p.dead)
				{
					expiry_remove(h);
					h->expires_at = until;
					expiry_add(h);
					h->p.dirty = true;
					touch_holder(h);
				}
			}
		}
	}

	/* requests in the slots */
	for (int i = 0; i < dlock_shared->nslots; i++)
	{
		DLockSlot  *slot = dlock_slot(i);

		SpinLockAcquire(&slot->mutex);
		if (slot->pid != 0 && !slot->session_ended &&
			slot->state == DLOCK_SLOT_ACCEPTED)
		{
			slot->state = DLOCK_SLOT_SUBMITTED;
			resubmitted++;
		}
		SpinLockRelease(&slot->mutex);
	}

	store_batch();
	xact_commit(true);
	settle();
	publish();

	SpinLockAcquire(&dlock_shared->mutex);
	dlock_shared->fresh = false;
	SpinLockRelease(&dlock_shared->mutex);

	ereport(LOG,
			(errmsg("dlock lock manager ready in database \"%s\": %ld locks held, %d requests resubmitted",
					dlock_database, (long) locks_map->members, resubmitted)));
	return true;
}

/* ---------------------------------------------------------------------
 * The main loop
 * --------------------------------------------------------------------- */

/*
 * Answer what cannot be served while the picture cannot be loaded (the
 * extension is not installed, or loading fails).
 */
static void
refuse_all(DLockStatus status, const char *why)
{
	List	   *ended = NIL;
	List	   *withdrawn = NIL;
	List	   *fresh = NIL;
	ListCell   *lc;

	batch_begin();
	MemoryContextSwitchTo(batch_cxt);
	collect(&ended, &withdrawn, &fresh);
	foreach(lc, ended)
		outcome_of(((Request *) lfirst(lc))->slotno)->end_session = true;
	foreach(lc, withdrawn)
		answer(((Request *) lfirst(lc))->slotno, DLOCK_STATUS_CANCELED, 0, 0, 0);
	foreach(lc, fresh)
		answer_error(((Request *) lfirst(lc))->slotno, status, why);
	publish();
	MemoryContextSwitchTo(TopMemoryContext);
}

static bool
work_pending(void)
{
	for (int i = 0; i < dlock_shared->nslots; i++)
	{
		DLockSlot  *slot = dlock_slot(i);
		bool		pending;

		SpinLockAcquire(&slot->mutex);
		pending = slot->pid != 0 &&
			(slot->session_ended || slot->state == DLOCK_SLOT_SUBMITTED ||
			 (slot->cancel && slot->state == DLOCK_SLOT_ACCEPTED));
		SpinLockRelease(&slot->mutex);
		if (pending)
			return true;
	}
	return false;
}

/*
 * run_batch
 *		One pass: collect, decide, store, commit, publish.  In isolation
 *		mode, notes the slot of the single request taken.
 */
static void
run_batch(void)
{
	List	   *ended = NIL;
	List	   *withdrawn = NIL;
	List	   *fresh = NIL;
	ListCell   *lc;
	TimestampTz now;

	isolated_slot = -1;
	batch_begin();
	MemoryContextSwitchTo(batch_cxt);
	collect(&ended, &withdrawn, &fresh);
	/*
	 * The batch's clock, read after its requests are taken: a grant or
	 * renewal must not date from before its request arrived (a lease would
	 * end sooner than ttl after the client asked).
	 */
	now = GetCurrentTimestamp();
	if (ended == NIL && withdrawn == NIL && fresh == NIL && !lease_due(now) &&
		deferred_batches == 0)
	{
		MemoryContextSwitchTo(TopMemoryContext);
		return;
	}
	if (isolate && fresh != NIL)
		isolated_slot = ((Request *) linitial(fresh))->slotno;

	/*
	 * Withdrawals first: nothing below may grant a request its backend has
	 * given up on.  A request withdrawn before it was decided never ran.
	 */
	foreach(lc, withdrawn)
	{
		Request    *r = lfirst(lc);
		DWaiter    *w = slot_waiter[r->slotno];

		if (w)
			withdraw_waiter(w, now);
		answer(r->slotno, DLOCK_STATUS_CANCELED, 0, 0, 0);
	}

	foreach(lc, ended)
	{
		Request    *r = lfirst(lc);

		session_gone(r, now);
	}
	expire_leases(now);
	drain_scans(now);
	foreach(lc, fresh)
		execute(lfirst(lc), now);
	drain_scans(now);

	if (touched_holders != NIL || touched_waiters != NIL || ticket_hi_dirty ||
		notify_names != NIL)
	{
		if (may_defer(now))
		{
			if (deferred_batches++ == 0)
				deferred_since = now;
			MemoryContextSwitchTo(TopMemoryContext);
			return;
		}
		xact_begin();
		store_batch();
		/* tokens must never go back: the counter is flushed whatever the GUC */
		xact_commit(ticket_hi_dirty || (batch_durable && dlock_synchronous_commit));
		MemoryContextSwitchTo(batch_cxt);
	}
	deferred_batches = 0;
	settle();
	publish();
	MemoryContextSwitchTo(TopMemoryContext);
	pgstat_report_stat(false);
}

static void
reload_config(void)
{
	ConfigReloadPending = false;
	ProcessConfigFile(PGC_SIGHUP);
}

/* Milliseconds until the soonest lease runs out, capped by the interval. */
static long
sleep_ms(void)
{
	long		ms = dlock_reap_interval_ms;

	if (ready && expiry_first() != NULL)
	{
		TimestampTz next = expiry_first()->expires_at;
		long		until = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), next) + 1;

		ms = Min(ms, until);
	}
	if (deferred_batches > 0)
		ms = Min(ms, TimestampDifferenceMilliseconds(GetCurrentTimestamp(),
													 deferred_since + DLOCK_DEFER_MS * 1000) + 1);
	return Max(ms, 0);
}

/*
 * recover
 *		After an error in a batch: roll back, rebuild the picture from the
 *		tables, and take the next requests one at a time.  A request that
 *		failed alone gets the error as its answer.
 */
static void
recover(const char *message)
{
	AbortCurrentTransaction();
	dlock_store_forget_plans();
	deferred_batches = 0;		/* the picture is rebuilt from the tables */
	/* publish() unlists the outcomes it hands out; these never were */
	for (int i = 0; i < dlock_shared->nslots; i++)
		outcomes[i].listed = false;
	MemoryContextSwitchTo(TopMemoryContext);
	ready = false;

	if (isolated_slot >= 0)
	{
		DLockSlot  *slot = dlock_slot(isolated_slot);

		SpinLockAcquire(&slot->mutex);
		if (slot->state == DLOCK_SLOT_ACCEPTED)
		{
			slot->status = DLOCK_STATUS_ERROR;
			copy_message(slot->errmsg, message);
			slot->state = slot->abandoned ? DLOCK_SLOT_FREE : DLOCK_SLOT_DONE;
			slot->abandoned = false;
		}
		SpinLockRelease(&slot->mutex);
		SetLatch(&ProcGlobal->allProcs[isolated_slot].procLatch);
		isolate = false;
	}
	else
		isolate = true;
}

static void
worker_exit(int code, Datum arg)
{
	SpinLockAcquire(&dlock_shared->mutex);
	dlock_shared->worker_pid = 0;
	dlock_shared->worker_latch = NULL;
	SpinLockRelease(&dlock_shared->mutex);
}

/*
 * The worker's own settings, over whatever ALTER DATABASE, ALTER ROLE or the
 * configuration file set for the session it connects as (a session value
 * wins over all of those, and over later reloads).  It must write, and
 * never give up a statement or a transaction half way: an inherited
 * read-only default or a timeout would fail every batch.  Everything it
 * runs is schema-qualified; search_path is fixed all the same.
 *
 * Every statement of a batch touches a few rows by key.  The tables churn
 * and their statistics lag, so keep the planner off sequential scans and
 * hash joins, and off replanning each statement for its parameters.  No
 * JIT: a disabled node's cost (the one-row counter table can only be scanned
 * sequentially) passes every jit_*_above_cost, and compiling a statement
 * took 10-15 ms of a batch that runs it in microseconds.
 *
 * synchronous_commit is decided per commit (xact_commit).
 */
static void
force_settings(void)
{
	static const char *const settings[][2] = {
		{"search_path", "pg_catalog, pg_temp"},
		{"default_transaction_read_only", "off"},
		{"default_transaction_isolation", "read committed"},
		{"default_transaction_deferrable", "off"},
		{"statement_timeout", "0"},
		{"lock_timeout", "0"},
		{"idle_in_transaction_session_timeout", "0"},
		{"idle_session_timeout", "0"},
		{"session_replication_role", "origin"},
		{"transform_null_equals", "off"},
		{"exit_on_error", "off"},
		{"max_parallel_workers_per_gather", "0"},
		{"force_parallel_mode", "off"},
		{"jit", "off"},
		{"enable_seqscan", "off"},
		{"enable_hashjoin", "off"},
		{"enable_mergejoin", "off"},
		{"enable_indexscan", "on"},
		{"enable_indexonlyscan", "on"},
		{"enable_bitmapscan", "on"},
		{"enable_nestloop", "on"},
		{"plan_cache_mode", "force_generic_plan"},
	};

	for (size_t i = 0; i < lengthof(settings); i++)
		SetConfigOption(settings[i][0], settings[i][1], PGC_SUSET, PGC_S_SESSION);
}

/*
 * After a failed batch the worker pauses before it tries again, longer
 * after each failure in a row, so that a failure that persists (a table
 * altered, a disk full) neither spins nor floods the log.
 */
#define DLOCK_RETRY_MIN_MS 10
#define DLOCK_RETRY_MAX_MS 5000

/* When the worker last looked for the extension, while not ready. */
static TimestampTz last_install_check = 0;

/* Failed batches in a row, and when the last was logged. */
static int	failures = 0;
static TimestampTz last_failure_logged = 0;

void
dlock_worker_main(Datum main_arg)
{

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	BackgroundWorkerInitializeConnection(dlock_database, NULL, 0);
	pgstat_report_appname("dlock lock manager");

	force_settings();

	state_cxt = AllocSetContextCreate(TopMemoryContext, "dlock picture",
									  ALLOCSET_DEFAULT_SIZES);
	batch_cxt = AllocSetContextCreate(TopMemoryContext, "dlock batch",
									  ALLOCSET_DEFAULT_SIZES);
	slot_waiter = MemoryContextAllocZero(TopMemoryContext,
										 sizeof(DWaiter *) * dlock_shared->nslots);
	outcomes = MemoryContextAllocZero(TopMemoryContext,
									  sizeof(Outcome) * dlock_shared->nslots);

	before_shmem_exit(worker_exit, (Datum) 0);
	SpinLockAcquire(&dlock_shared->mutex);
	dlock_shared->worker_pid = MyProcPid;
	dlock_shared->worker_latch = MyLatch;
	SpinLockRelease(&dlock_shared->mutex);

	for (;;)
	{
		isolated_slot = -1;
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
			reload_config();

		PG_TRY();
		{
			if (!ready)
			{
				TimestampTz now = GetCurrentTimestamp();

				/* look for the extension when asked, or once an interval */
				if (work_pending() ||
					TimestampDifferenceExceeds(last_install_check, now,
											   dlock_reap_interval_ms))
				{
					last_install_check = now;
					ready = reload();
					if (!ready)
						refuse_all(DLOCK_STATUS_NOT_READY,
								   psprintf("extension \"dlock\" is not installed in database \"%s\"",
											dlock_database));
				}
			}
			if (ready)
				run_batch();
			else
				isolate = false;
		}
		PG_CATCH();
		{
			ErrorData  *edata;
			bool		loading = !ready;
			long		pause_ms;

			HOLD_INTERRUPTS();
			MemoryContextSwitchTo(TopMemoryContext);
			edata = CopyErrorData();
			FlushErrorState();
			failures++;
			pause_ms = Min((long) DLOCK_RETRY_MIN_MS << Min(failures - 1, 20),
						   DLOCK_RETRY_MAX_MS);
			/* every failure of a short run; then one line a minute */
			if (failures <= 5 ||
				TimestampDifferenceExceeds(last_failure_logged, GetCurrentTimestamp(),
										   60 * 1000))
			{
				ereport(LOG,
						(errmsg("dlock lock manager: %s failed (%d in a row): %s",
								loading ? "loading the lock tables" : "batch",
								failures, edata->message),
						 errdetail("The lock tables are rolled back to the last committed batch and reloaded; the next attempt is in %ld ms.",
								   pause_ms),
						 failures >= 5 ?
						 errhint("Requests fail with this error while it persists.  Check the dlock tables and the settings made with ALTER DATABASE or ALTER ROLE for database \"%s\".",
								 dlock_database) : 0));
				last_failure_logged = GetCurrentTimestamp();
			}
			recover(edata->message);
			/* a picture that cannot be loaded serves nobody: say why at once */
			if (loading)
				refuse_all(DLOCK_STATUS_ERROR, edata->message);
			FreeErrorData(edata);
			RESUME_INTERRUPTS();
			(void) WaitLatch(MyLatch, WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, pause_ms,
							 PG_WAIT_EXTENSION);
			continue;
		}
		PG_END_TRY();

		if (failures > 0 && ready)
		{
			if (failures > 5)
				ereport(LOG,
						(errmsg("dlock lock manager: working again after %d failed attempts",
								failures)));
			failures = 0;
		}

		if (isolate && isolated_slot >= 0)
			isolate = false;	/* the isolated request went through */

		/*
		 * Every submission sets our latch, so sleep unless work was left on
		 * purpose: isolation mode takes one request per batch.
		 */
		if (!isolate && !(ready && lease_due(GetCurrentTimestamp())))
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 sleep_ms(), PG_WAIT_EXTENSION);
	}
}
