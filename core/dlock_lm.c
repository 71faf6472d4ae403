/* SPDX-License-Identifier: PostgreSQL */
/*
 * dlock_lm.c
 *		The lock manager: the picture of owners, locks, holders and waiters,
 *		and the rules of core/README (the numbers in comments are its
 *		sections).
 *
 * Interface: see dlock_lm.h.  Order of this file: memory, the picture's
 * objects, the batch's bookkeeping, answers, the rules (take, release,
 * convert, queue, the grant pass, deadlocks), the events, loading, looking.
 *
 * Memory: every allocation goes through the caller's allocator with a small
 * header that keeps it on one list, so dlm_destroy frees everything even
 * when a failed allocation left the picture half-changed (the manager is
 * then broken: it answers DLM_ERR_NO_MEMORY until destroyed).  Objects
 * that leave the picture stay allocated until dlm_settle: the store still
 * has to delete their rows.
 */
#include "dlock_lm_int.h"

#include <string.h>

typedef struct DLmChunk
{
	DLmLink		link;
	size_t		size;
} DLmChunk;

/* Parts of one request at most: every name and each ancestor's intention. */
#define MAX_PARTS (DLOCK_MAX_MULTI * DLOCK_MAX_PATH_DEPTH)

struct DLockManager
{
	DLmConfig	cfg;
	DLmAllocator mem;			/* the caller's, through the chunk list */
	DLmList		chunks;
	bool		broken;

	DLmHash		locks;			/* DLmLock.hash_node, by name */
	DLmHash		owners;			/* DLmOwner.hash_node, by identity */
	DLmHash		pairs;			/* DLmHolder.pair_node, by (lock, owner) */
	DLmHash		roles;			/* RoleUse.node, by role; kept once made */
	int64_t		nwaiters;		/* waiting parts (with pairs.count: the objects) */
	DLmHeap		leases;
	DLmWaiter **waiting;		/* per requester: its request's first part */
	DLmList		young;			/* DLmWaiter.young_link: no row yet, by since */
	int64_t		nkept;			/* on the kept list */
	DLmList		kept;			/* DLmWaiter.kept_link: kept places no call
								 * waits for, by kept_until (14) */

	int64_t		next_ticket;
	int64_t		ticket_hi;		/* tickets below it are covered by the store */
	bool		counter_dirty;
	bool		durable;

	/* the batch, since the last dlm_settle */
	DLmHolder  *touched_h,
			   *touched_h_tail;
	DLmWaiter  *touched_w,
			   *touched_w_tail;
	DLmLock    *empty_locks;	/* maybe left with nothing */
	DLmOwner   *empty_owners;
	DLmLock    *notify,
			   *notify_tail;
	DLmLock    *leaders,
			   *leaders_tail;	/* elections whose leader changed (16) */

	/* the event */
	DLmLock    *scan,
			   *scan_tail;		/* locks to pass over again (6) */
	DLmOwner   *recheck,
			   *recheck_tail;	/* owners whose cover grew (6.2) */
	uint64_t	search;			/* deadlock searches so far */
	DLmCycleStep *cycle;
	int			cycle_cap;
	int64_t		tokens[DLOCK_MAX_MULTI];
	DLmLock   **part_locks;		/* MAX_PARTS: a request's intention parts */
	int		   *part_modes;

	/* statistics: the answers pass through count_answer on their way */
	DLmStats	stats;
	DLmAnswerFn answer_fn;		/* the caller's */
	void	   *answer_arg;
	struct Ask
	{
		uint8_t		op;			/* the requester's last request */
		bool		queued;		/* answered QUEUED, not yet ended */
		DLockTime	queued_at;
	}		   *asks;			/* per requester */
	DLockTime	now;			/* the current event's */
};

/* ---------------------------------------------------------------------
 * Memory
 * --------------------------------------------------------------------- */

static void *
mem_alloc(void *arg, size_t size)
{
	DLockManager *m = arg;
	DLmChunk   *c;

	if (m->cfg.untracked)
	{
		void	   *p = m->cfg.alloc.alloc(m->cfg.alloc.arg, size);

		if (p == NULL)
			m->broken = true;
		return p;
	}
	if (size > SIZE_MAX - sizeof(DLmChunk) ||
		(c = m->cfg.alloc.alloc(m->cfg.alloc.arg, sizeof(DLmChunk) + size)) == NULL)
	{
		m->broken = true;
		return NULL;
	}
	c->size = size;
	dlm_list_push_tail(&m->chunks, &c->link);
	return c + 1;
}

static void
mem_free(void *arg, void *ptr, size_t size)
{
	DLockManager *m = arg;
	DLmChunk   *c = (DLmChunk *) ptr - 1;

	if (m->cfg.untracked)
	{
		m->cfg.alloc.free(m->cfg.alloc.arg, ptr, size);
		return;
	}
	dlm_list_delete(&c->link);
	m->cfg.alloc.free(m->cfg.alloc.arg, c, sizeof(DLmChunk) + c->size);
}

static void *
alloc0(DLockManager *m, size_t size)
{
	void	   *p = mem_alloc(m, size);

	if (p)
		memset(p, 0, size);
	return p;
}

const char *
dlm_error_message(DLmError err)
{
	switch (err)
	{
		case DLM_OK:
			return "no error";
		case DLM_ERR_BAD_REQUEST:
			return "invalid request";
		case DLM_ERR_BAD_NAME:
			return "invalid lock name";
		case DLM_ERR_BAD_OWNER:
			return "invalid owner key";
		case DLM_ERR_NOT_SORTED:
			return "lock names of a request on several locks must be sorted and distinct";
		case DLM_ERR_CONVERSION_WAITING:
			return "a conversion of this lock by this owner is already waiting";
		case DLM_ERR_NO_MEMORY:
			return "out of memory in the lock manager";
		case DLM_ERR_NOT_YOURS:
			return "owner key is in use by another role";
		case DLM_ERR_TOO_MANY_PARTS:
			return "request has too many parts";
		case DLM_ERR_NO_SPACE:
			return "out of lock space";
		case DLM_ERR_OWNER_QUOTA:
			return "owner's lock quota exceeded";
		case DLM_ERR_ROLE_QUOTA:
			return "role's lock quota exceeded";
		case DLM_ERR_KEEP_PLACE:
			return "keep_place needs an owner key and a lease, and a request that may wait";
		case DLM_ERR_BAD_SEMAPHORE:
			return "a semaphore needs a capacity above 0, 1 to capacity permits and one name that is not a path";
		case DLM_ERR_IS_SEMAPHORE:
			return "the name is a semaphore";
		case DLM_ERR_IS_LOCK:
			return "the name is a lock";
		case DLM_ERR_CAPACITY:
			return "the semaphore is in use with another capacity";
		case DLM_ERR_HELD_ONCE:
			return "the owner holds it already (a semaphore's permits, an election's lead)";
		case DLM_ERR_IS_ELECTION:
			return "the name is a leader election";
		case DLM_ERR_BAD_ELECTION:
			return "a campaign needs one name that is not a path, mode EX and a value of at most 1024 bytes";
	}
	return "unknown error";
}

/* ---------------------------------------------------------------------
 * The picture's objects
 * --------------------------------------------------------------------- */

static size_t
bounded_len(const char *s, size_t max)
{
	size_t		n = 0;

	while (n <= max && s[n] != '\0')
		n++;
	return n;
}

static uint64_t
owner_hash(const DLockManager *m, const char *key, int32_t pid, int64_t start)
{
	if (key)
		return dlm_siphash(m->cfg.seed, key, strlen(key));
	else
	{
		unsigned char buf[12];

		memcpy(buf, &pid, 4);
		memcpy(buf + 4, &start, 8);
		return dlm_siphash(m->cfg.seed, buf, sizeof(buf)) ^ 1;
	}
}

/* An owner key names an owner alone; a session is its pid and start. */
static DLmOwner *
owner_find(const DLockManager *m, const char *key, int32_t pid, int64_t start)
{
	uint64_t	hash = owner_hash(m, key, pid, start);

	for (DLmHashNode *n = dlm_hash_chain(&m->owners, hash); n; n = n->next)
	{
		DLmOwner   *o = DLM_CONTAINER(DLmOwner, hash_node, n);

		if (n->hash != hash)
			continue;
		if (key ? (o->key && strcmp(o->key, key) == 0) :
			(!o->key && o->pid == pid && o->session_start == start))
			return o;
	}
	return NULL;
}

static void
note_empty_owner(DLockManager *m, DLmOwner *o)
{
	if (!o->maybe_empty)
	{
		o->maybe_empty = true;
		o->empty_next = m->empty_owners;
		m->empty_owners = o;
	}
}

static void
note_empty_lock(DLockManager *m, DLmLock *l)
{
	if (!l->maybe_empty)
	{
		l->maybe_empty = true;
		l->empty_next = m->empty_locks;
		m->empty_locks = l;
	}
}

/* ---------------------------------------------------------------------
 * Quotas (13): named locks per owner and per role
 * --------------------------------------------------------------------- */

typedef struct RoleUse
{
	DLmHashNode node;
	uint32_t	role;
	int64_t		nnamed;
	int64_t		nbytes;
} RoleUse;

static RoleUse *
role_find(const DLockManager *m, uint32_t role)
{
	uint64_t	hash = dlm_siphash(m->cfg.seed, &role, sizeof(role));

	for (DLmHashNode *n = dlm_hash_chain(&m->roles, hash); n; n = n->next)
	{
		RoleUse    *u = DLM_CONTAINER(RoleUse, node, n);

		if (n->hash == hash && u->role == role)
			return u;
	}
	return NULL;
}

/* What a named holder or waiting part of O on L counts for (13). */
static int64_t
named_bytes(const DLmLock *l, const DLmOwner *o)
{
	return (int64_t) l->name_len + (o->key ? (int64_t) strlen(o->key) : 0);
}

/*
 * A named holder or waiting part of O on L came (+1) or went (-1); it
 * counts for its role (12: its owner's for a key, its request's for a
 * session).
 */
static void
count_named(DLockManager *m, DLmOwner *o, const DLmLock *l, uint32_t role, int delta)
{
	RoleUse    *u = role_find(m, role);
	int64_t		bytes = delta * named_bytes(l, o);

	o->nnamed += delta;
	o->nbytes += bytes;
	if (u == NULL && delta > 0)
	{
		u = alloc0(m, sizeof(RoleUse));
		if (u == NULL)
			return;				/* broken: the picture is loaded again */
		u->role = role;
		u->node.hash = dlm_siphash(m->cfg.seed, &u->role, sizeof(u->role));
		dlm_hash_insert(&m->roles, &m->mem, &u->node);
	}
	if (u)
	{
		u->nnamed += delta;
		u->nbytes += bytes;
	}
}

/* An owner with nothing held or waited for belongs to nobody yet (12). */
static bool
owner_in_use(const DLmOwner *o)
{
	return !dlm_list_empty(&o->holders) || !dlm_list_empty(&o->waiters);
}

/*
 * The role r's holders and waiting parts of O count for and are shown
 * under (12): an owner key's own, a session's the request's (one session
 * may ask as several roles: a SECURITY DEFINER function's owner, say).
 */
static uint32_t
request_role(const DLmOwner *o, const DLmRequest *r)
{
	return o->key ? o->role : r->role;
}

static DLmOwner *
owner_get(DLockManager *m, const char *key, int32_t pid, int64_t start)
{
	DLmOwner   *o = owner_find(m, key, pid, start);
	size_t		len = key ? strlen(key) : 0;

	if (o)
		return o;
	o = alloc0(m, sizeof(DLmOwner) + (key ? len + 1 : 0));
	if (o == NULL)
		return NULL;
	if (key)
	{
		char	   *copy = (char *) (o + 1);

		memcpy(copy, key, len + 1);
		o->key = copy;
	}
	else
	{
		o->pid = pid;
		o->session_start = start;
	}
	dlm_list_init(&o->holders);
	dlm_list_init(&o->waiters);
	o->hash_node.hash = owner_hash(m, key, pid, start);
	dlm_hash_insert(&m->owners, &m->mem, &o->hash_node);
	note_empty_owner(m, o);
	return o;
}

static DLmLock *
lock_find(const DLockManager *m, const char *name, size_t len)
{
	uint64_t	hash = dlm_siphash(m->cfg.seed, name, len);

	for (DLmHashNode *n = dlm_hash_chain(&m->locks, hash); n; n = n->next)
	{
		DLmLock    *l = DLM_CONTAINER(DLmLock, hash_node, n);

		if (n->hash == hash && l->name_len == len && memcmp(l->name, name, len) == 0)
			return l;
	}
	return NULL;
}

/* The lock of a name (the first len bytes of it), created if new. */
static DLmLock *
lock_get(DLockManager *m, const char *name, size_t len)
{
	DLmLock    *l = lock_find(m, name, len);
	char	   *copy;

	if (l)
		return l;
	l = alloc0(m, sizeof(DLmLock) + len + 1);
	if (l == NULL)
		return NULL;
	copy = (char *) (l + 1);
	memcpy(copy, name, len);
	copy[len] = '\0';
	l->name = copy;
	l->name_len = len;
	dlm_list_init(&l->holders);
	dlm_list_init(&l->converts);
	dlm_list_init(&l->waiters);
	l->hash_node.hash = dlm_siphash(m->cfg.seed, name, len);
	dlm_hash_insert(&m->locks, &m->mem, &l->hash_node);
	note_empty_lock(m, l);
	return l;
}

/* A lock held or waited for: its kind and a semaphore's capacity stand (15). */
static bool
lock_in_use(const DLmLock *l)
{
	return !dlm_list_empty(&l->holders) || !dlm_list_empty(&l->converts) ||
		!dlm_list_empty(&l->waiters);
}

/*
 * Whether permits more fit a semaphore (15.3).  In 64 bits: capacity and
 * permits go up to INT32_MAX each, and their sum past it wrapped around.
 */
static bool
permits_fit(const DLmLock *l, int32_t permits)
{
	return (int64_t) l->permits_held + permits <= l->capacity;
}

static uint64_t
pair_hash(const DLmLock *l, const DLmOwner *o)
{
	/* addresses are not chosen by users: a multiplicative mix will do */
	uint64_t	x = (uint64_t) (uintptr_t) l * UINT64_C(0x9e3779b97f4a7c15) ^
		(uint64_t) (uintptr_t) o * UINT64_C(0xc2b2ae3d27d4eb4f);

	return x ^ (x >> 29);
}

#define HOLDER_OF(node) DLM_CONTAINER(DLmHolder, pair_node, node)

/* O's named holder of L, or NULL. */
static DLmHolder *
named_holder(const DLockManager *m, const DLmLock *l, const DLmOwner *o)
{
	uint64_t	hash = pair_hash(l, o);

	for (DLmHashNode *n = dlm_hash_chain(&m->pairs, hash); n; n = n->next)
	{
		DLmHolder  *h = HOLDER_OF(n);

		if (h->lock == l && h->owner == o && !h->implied)
			return h;
	}
	return NULL;
}

/* O's implied holder of L in this intention mode, or NULL. */
static DLmHolder *
implied_holder(const DLockManager *m, const DLmLock *l, const DLmOwner *o, int mode)
{
	uint64_t	hash = pair_hash(l, o);

	for (DLmHashNode *n = dlm_hash_chain(&m->pairs, hash); n; n = n->next)
	{
		DLmHolder  *h = HOLDER_OF(n);

		if (h->lock == l && h->owner == o && h->implied && h->mode == mode)
			return h;
	}
	return NULL;
}

/* covered_by_own (1): some holder of O on L covers the mode. */
static bool
own_covers(const DLockManager *m, const DLmLock *l, const DLmOwner *o, int mode)
{
	uint64_t	hash = pair_hash(l, o);

	for (DLmHashNode *n = dlm_hash_chain(&m->pairs, hash); n; n = n->next)
	{
		DLmHolder  *h = HOLDER_OF(n);

		if (h->lock == l && h->owner == o && dlock_mode_covers(h->mode, mode))
			return true;
	}
	return false;
}

/* others_held (1): counted per lock, less O's own few holders. */
static DLockModeMask
others_held(const DLockManager *m, const DLmLock *l, const DLmOwner *o)
{
	int32_t		own[DLOCK_NMODES] = {0};
	DLockModeMask mask = 0;
	uint64_t	hash = pair_hash(l, o);

	for (DLmHashNode *n = dlm_hash_chain(&m->pairs, hash); n; n = n->next)
	{
		DLmHolder  *h = HOLDER_OF(n);

		if (h->lock == l && h->owner == o)
			own[h->mode]++;
	}
	for (int i = 0; i < DLOCK_NMODES; i++)
		if (l->nheld[i] > own[i])
			mask |= DLOCK_MODE_BIT(i);
	return mask;
}

static DLockModeMask
queued_modes(const DLmLock *l)
{
	DLockModeMask mask = 0;

	for (int i = 0; i < DLOCK_NMODES; i++)
		if (l->nwaiting[i] > 0 || l->nconverting[i] > 0)
			mask |= DLOCK_MODE_BIT(i);
	return mask;
}

static bool
compatible(int mode, DLockModeMask others)
{
	return (dlock_mode_conflicts(mode) & others) == 0;
}

static bool
grantable_now(const DLockManager *m, const DLmLock *l, const DLmOwner *o, int mode)
{
	return compatible(mode, others_held(m, l, o)) && compatible(mode, queued_modes(l));
}

/* ---------------------------------------------------------------------
 * The batch's bookkeeping (9)
 * --------------------------------------------------------------------- */

static void
touch_holder(DLockManager *m, DLmHolder *h)
{
	if (h->p.listed)
		return;
	h->p.listed = true;
	h->touched_next = NULL;
	if (m->touched_h_tail)
		m->touched_h_tail->touched_next = h;
	else
		m->touched_h = h;
	m->touched_h_tail = h;
}

static void
touch_waiter(DLockManager *m, DLmWaiter *w)
{
	if (w->p.listed)
		return;
	w->p.listed = true;
	w->touched_next = NULL;
	if (m->touched_w_tail)
		m->touched_w_tail->touched_next = w;
	else
		m->touched_w = w;
	m->touched_w_tail = w;
}

/* A leader's or a campaign's value (16), in the manager's memory. */
static char *
value_copy(DLockManager *m, const char *value)
{
	size_t		len = strlen(value);
	char	   *copy = alloc0(m, len + 1);

	if (copy)
		memcpy(copy, value, len);
	return copy;
}

static void
value_free(DLockManager *m, char *value)
{
	if (value)
		mem_free(m, value, strlen(value) + 1);
}

/* An election's leader or its value changed (16): announce it, once. */
static void
leader_changed(DLockManager *m, DLmLock *l)
{
	if (!l->election || l->leader_listed)
		return;
	l->leader_listed = true;
	l->leader_next = NULL;
	if (m->leaders_tail)
		m->leaders_tail->leader_next = l;
	else
		m->leaders = l;
	m->leaders_tail = l;
}

/* The row must be updated; what an owner key holds must survive a crash. */
static void
holder_changed(DLockManager *m, DLmHolder *h)
{
	h->p.dirty = true;
	if (h->owner->key)
		m->durable = true;
	touch_holder(m, h);
}

static int64_t
take_ticket(DLockManager *m)
{
	int64_t		t = m->next_ticket++;

	if (m->next_ticket > m->ticket_hi)
	{
		m->ticket_hi = m->next_ticket + m->cfg.ticket_reserve;
		m->counter_dirty = true;
	}
	return t;
}

/* Put L on the scan list (6), once. */
static void
scan_later(DLockManager *m, DLmLock *l)
{
	if (l->scan_listed)
		return;
	l->scan_listed = true;
	l->scan_next = NULL;
	if (m->scan_tail)
		m->scan_tail->scan_next = l;
	else
		m->scan = l;
	m->scan_tail = l;
}

/*
 * O got a new holder or a stronger mode: a part of its waiting groups that
 * its own holders now cover passes (6), but no pass over that part's lock
 * may come; look at its groups again (6.2), once.
 */
static void
recheck_later(DLockManager *m, DLmOwner *o)
{
	if (o->recheck_listed || dlm_list_empty(&o->waiters))
		return;
	o->recheck_listed = true;
	o->recheck_next = NULL;
	if (m->recheck_tail)
		m->recheck_tail->recheck_next = o;
	else
		m->recheck = o;
	m->recheck_tail = o;
}

/* ---------------------------------------------------------------------
 * Answers
 * --------------------------------------------------------------------- */

const int64_t dlm_wait_bounds_us[DLM_WAIT_BUCKETS - 1] = {
	1000, 5000, 10000, 50000, 100000, 500000, 1000000, 5000000, 10000000, 60000000
};

/* The histogram bucket of a wait or hand-off of 'us' microseconds. */
static int
wait_bucket(int64_t us)
{
	int			b = 0;

	while (b < DLM_WAIT_BUCKETS - 1 && us > dlm_wait_bounds_us[b])
		b++;
	return b;
}

/* Every answer passes here: the statistics, then the caller's callback. */
static void
count_answer(void *arg, int requester, const DLmAnswer *a)
{
	DLockManager *m = arg;
	DLmStats   *st = &m->stats;
	struct Ask *k;
	bool		was_queued;

	if (requester < 0 || requester >= m->cfg.nrequesters)
	{
		m->answer_fn(m->answer_arg, requester, a);
		return;
	}
	k = &m->asks[requester];
	was_queued = k->queued;

	switch (a->status)
	{
		case DLOCK_STATUS_QUEUED:
			if (!was_queued)
			{
				k->queued = true;
				k->queued_at = m->now;
				st->waits++;
			}
			break;
		case DLOCK_STATUS_GRANTED:
			st->grants++;
			if (k->op == DLOCK_OP_CONVERT)
				st->conversions++;
			if (was_queued)
			{
				int64_t		us = m->now > k->queued_at ? m->now - k->queued_at : 0;

				st->wait_buckets[wait_bucket(us)]++;
				st->wait_us_sum += us;
			}
			else
				st->grants_immediate++;
			break;
		case DLOCK_STATUS_CANCELED:
		case DLOCK_STATUS_WITHDRAWN:
			if (was_queued)
				st->withdrawn++;
			break;
		case DLOCK_STATUS_KEPT:
			if (was_queued)
				st->kept++;
			break;
		case DLOCK_STATUS_DEADLOCK:
			st->deadlocks++;
			break;
		case DLOCK_STATUS_REFUSED:
			st->refused++;
			break;
		case DLOCK_STATUS_ERROR:
			st->errors++;
			break;
		case DLOCK_STATUS_RELEASED:
			st->releases++;
			break;
		case DLOCK_STATUS_RENEWED:
			st->renewals++;
			break;
		default:
			break;
	}
	if (a->status != DLOCK_STATUS_QUEUED)
		k->queued = false;
	m->answer_fn(m->answer_arg, requester, a);
}

const DLmStats *
dlm_stats(const DLockManager *m)
{
	return &m->stats;
}

void
dlm_stats_reset(DLockManager *m)
{
	memset(&m->stats, 0, sizeof(m->stats));
}

void
dlm_counters_batch(DLmCounters *c, const DLockManager *m, int nfresh, bool wrote,
				   int64_t write_us, int64_t handoff_us)
{
	const int64_t *cur = (const int64_t *) &m->stats;
	const int64_t *prev = (const int64_t *) &c->last;
	int64_t    *sum = (int64_t *) &c->core;
	int			n = (int) (sizeof(DLmStats) / sizeof(int64_t));
	bool		fresh_manager = false;
	int64_t		handoffs;

	for (int i = 0; i < n; i++)
		if (cur[i] < prev[i])
			fresh_manager = true;	/* a new manager counts from zero */
	for (int i = 0; i < n; i++)
		sum[i] += cur[i] - (fresh_manager ? 0 : prev[i]);
	handoffs = (m->stats.grants - m->stats.grants_immediate) -
		(fresh_manager ? 0 : c->last.grants - c->last.grants_immediate);
	c->last = m->stats;
	c->batches++;
	c->batch_requests += nfresh;
	if (wrote)
	{
		c->commits++;
		c->commit_us += write_us;
	}
	if (handoffs > 0)
	{
		if (handoff_us < 0)
			handoff_us = 0;
		c->handoffs += handoffs;
		c->handoff_us_sum += handoffs * handoff_us;
		c->handoff_buckets[wait_bucket(handoff_us)] += handoffs;
	}
}

void
dlm_sizes(const DLockManager *m, int64_t *holders, int64_t *waiting, int64_t *kept)
{
	*holders = (int64_t) m->pairs.count;
	*waiting = m->nwaiters;
	*kept = m->nkept;
}

static void
answer(DLockManager *m, int requester, DLockStatus status, int64_t token,
	   DLockTime expires_at, int32_t count)
{
	DLmAnswer	a;

	if (requester < 0)
		return;
	memset(&a, 0, sizeof(a));
	a.status = status;
	a.token = token;
	a.expires_at = expires_at;
	a.count = count;
	m->cfg.answer(m->cfg.answer_arg, requester, &a);
}

static void
answer_error(DLockManager *m, int requester, DLmError err)
{
	DLmAnswer	a;

	if (requester < 0)
		return;
	memset(&a, 0, sizeof(a));
	a.status = DLOCK_STATUS_ERROR;
	a.error = err;
	m->cfg.answer(m->cfg.answer_arg, requester, &a);
}

static void
answer_granted(DLockManager *m, int requester, const DLmHolder *h)
{
	answer(m, requester, DLOCK_STATUS_GRANTED, h->token, h->expires_at, h->count);
}

static void
answer_tokens(DLockManager *m, int requester, int n)
{
	DLmAnswer	a;

	if (requester < 0)
		return;
	memset(&a, 0, sizeof(a));
	a.status = DLOCK_STATUS_GRANTED;
	a.token = m->tokens[0];
	a.count = n;
	a.ntokens = n;
	a.tokens = m->tokens;
	m->cfg.answer(m->cfg.answer_arg, requester, &a);
}

/* ---------------------------------------------------------------------
 * Holders and waiters
 * --------------------------------------------------------------------- */

static DLmHolder *
holder_add(DLockManager *m, DLmLock *l, DLmOwner *o, int mode, bool implied,
		   int64_t token, int32_t pid, int64_t backend_start, uint32_t role, DLockTime now)
{
	DLmHolder  *h = alloc0(m, sizeof(DLmHolder));

	if (h == NULL)
		return NULL;
	h->lock = l;
	h->owner = o;
	h->mode = mode;
	h->implied = implied;
	h->count = 1;
	h->token = token;
	h->stored_token = token;
	h->stored_mode = mode;
	h->pid = pid;
	h->backend_start = backend_start;
	h->role = role;
	h->granted_at = now;
	h->expiry_pos = -1;
	dlm_list_push_tail(&l->holders, &h->lock_link);
	dlm_list_push_tail(&o->holders, &h->owner_link);
	h->pair_node.hash = pair_hash(l, o);
	dlm_hash_insert(&m->pairs, &m->mem, &h->pair_node);
	if (!implied)
		count_named(m, o, l, role, 1);
	l->nheld[mode]++;
	l->announced = false;		/* a new holder has not been told (8) */
	leader_changed(m, l);
	holder_changed(m, h);
	recheck_later(m, o);
	return h;
}

static void
holder_set_lease(DLockManager *m, DLmHolder *h, int64_t ttl_us, DLockTime now)
{
	dlm_heap_remove(&m->leases, h);
	h->ttl_us = ttl_us;
	h->expires_at = ttl_us > 0 ? now + ttl_us : 0;
	if (h->expires_at != 0 && !dlm_heap_add(&m->leases, &m->mem, h))
		m->broken = true;
	holder_changed(m, h);
}


static void
waiter_remove(DLockManager *m, DLmWaiter *w)
{
	dlm_list_delete(&w->lock_link);
	dlm_list_delete(&w->owner_link);
	m->nwaiters--;
	if (!w->implied && !w->holder)
		count_named(m, w->owner, w->lock, w->role, -1);
	if (w->holder)
	{
		w->lock->nconverting[w->mode]--;
		w->holder->conversion = NULL;
	}
	else
		w->lock->nwaiting[w->mode]--;
	if (w->requester >= 0 && m->waiting[w->requester] == w)
		m->waiting[w->requester] = NULL;
	w->group = NULL;
	if (w->young_link.next)
		dlm_list_delete(&w->young_link);	/* never stored: no row to delete */
	if (w->kept_link.next)
	{
		dlm_list_delete(&w->kept_link);
		m->nkept--;
	}
	w->p.dead = true;
	touch_waiter(m, w);
	note_empty_lock(m, w->lock);
	note_empty_owner(m, w->owner);
}

/* Take a request out of line with all its parts; their locks are scanned. */
static void
request_remove(DLockManager *m, DLmWaiter *w)
{
	DLmGroup   *g = w->group;

	if (g == NULL)
	{
		scan_later(m, w->lock);
		waiter_remove(m, w);
		return;
	}
	for (int i = 0; i < g->nparts; i++)
	{
		scan_later(m, g->parts[i]->lock);
		waiter_remove(m, g->parts[i]);
	}
	mem_free(m, g, sizeof(DLmGroup) + sizeof(DLmWaiter *) * g->capacity);
}

static void
holder_remove(DLockManager *m, DLmHolder *h)
{
	/* a conversion still waiting ends with the lock it would convert (4.1) */
	if (h->conversion)
	{
		DLmWaiter  *c = h->conversion;

		answer(m, c->requester, DLOCK_STATUS_NOT_HELD, 0, 0, 0);
		request_remove(m, c);
	}
	dlm_list_delete(&h->lock_link);
	dlm_list_delete(&h->owner_link);
	dlm_hash_remove(&m->pairs, &h->pair_node);
	if (!h->implied)
		count_named(m, h->owner, h->lock, h->role, -1);
	h->lock->nheld[h->mode]--;
	h->lock->permits_held -= h->permits;
	leader_changed(m, h->lock);
	dlm_heap_remove(&m->leases, h);
	h->p.dead = true;
	touch_holder(m, h);
	note_empty_lock(m, h->lock);
	note_empty_owner(m, h->owner);
}

/* Proper ancestors of a path, as lengths of its prefixes, shortest first. */
static int
ancestors(const char *name, size_t *lens)
{
	int			n = dlock_path_ancestor_lengths(name, strlen(name), lens,
											   DLOCK_MAX_PATH_DEPTH);

	/* names are checked on the way in: deeper ones never get here */
	return n < DLOCK_MAX_PATH_DEPTH ? n : DLOCK_MAX_PATH_DEPTH - 1;
}

/* One more count of O's intention on A (3.5). */
static void
implied_add(DLockManager *m, DLmLock *a, DLmOwner *o, int mode, int32_t pid,
			int64_t backend_start, uint32_t role, DLockTime now)
{
	DLmHolder  *h = implied_holder(m, a, o, mode);

	if (h)
	{
		h->count++;
		h->p.dirty = true;
		touch_holder(m, h);
	}
	else
		(void) holder_add(m, a, o, mode, true, take_ticket(m), pid, backend_start, role, now);
}

/* One count less of O's intention on A; the holder goes at zero (4.1). */
static void
implied_drop(DLockManager *m, DLmLock *a, DLmOwner *o, int mode)
{
	DLmHolder  *h = implied_holder(m, a, o, mode);

	if (h == NULL)
		return;
	if (--h->count > 0)
	{
		h->p.dirty = true;
		touch_holder(m, h);
	}
	else
		holder_remove(m, h);
	scan_later(m, a);
}

/* ---------------------------------------------------------------------
 * The rules
 * --------------------------------------------------------------------- */

static void grant_pass(DLockManager *m, DLmLock *l, DLockTime now);

/*
 * Take a name (3.5): a level more, or a new holder with its intentions.
 * A call of the owner (collect) first collects a level granted to its kept
 * place (14.4); a grant to a kept place no call waits for (uncollected)
 * marks its level.
 */
static DLmHolder *
take_name(DLockManager *m, DLmLock *l, DLmOwner *o, int mode, int64_t ttl_us,
		  int32_t pid, int64_t backend_start, uint32_t role, DLockTime now, bool collect,
		  bool uncollected)
{
	DLmHolder  *h = named_holder(m, l, o);
	int			intention = dlock_intention_mode(mode);

	if (h)
	{
		if (collect && h->kept > 0)
			h->kept--;
		else
			h->count++;
		if (uncollected)
			h->kept++;
		if (ttl_us > 0)
			holder_set_lease(m, h, ttl_us, now);
		holder_changed(m, h);
		return h;
	}
	h = holder_add(m, l, o, mode, false, take_ticket(m), pid, backend_start, role, now);
	if (h == NULL)
		return NULL;
	h->kept = uncollected ? 1 : 0;
	if (ttl_us > 0)
		holder_set_lease(m, h, ttl_us, now);
	if (intention != DLOCK_MODE_INVALID)
	{
		size_t		lens[DLOCK_MAX_PATH_DEPTH];
		int			n = ancestors(l->name, lens);

		for (int i = 0; i < n && !m->broken; i++)
		{
			DLmLock    *a = lock_get(m, l->name, lens[i]);

			if (a)
				implied_add(m, a, o, intention, pid, backend_start, role, now);
		}
	}
	return h;
}

/* The last release of a named holder (4.1), then the grant pass on its lock. */
static void
release_last(DLockManager *m, DLmHolder *h, DLockTime now)
{
	DLmLock    *l = h->lock;
	DLmOwner   *o = h->owner;
	int			intention = dlock_intention_mode(h->mode);
	size_t		lens[DLOCK_MAX_PATH_DEPTH];
	int			n = intention == DLOCK_MODE_INVALID ? 0 : ancestors(l->name, lens);

	holder_remove(m, h);
	for (int i = 0; i < n; i++)
	{
		DLmLock    *a = lock_find(m, l->name, lens[i]);

		if (a)
			implied_drop(m, a, o, intention);
	}
	grant_pass(m, l, now);
}

/* The mode changes; up is a new grant with a new token (5.2, 5.3). */
static void
convert_holder(DLockManager *m, DLmHolder *h, int mode)
{
	bool		up = !dlock_mode_covers(h->mode, mode);

	h->lock->nheld[h->mode]--;
	h->mode = mode;
	h->lock->nheld[mode]++;
	if (up)
	{
		bool		leased = h->expiry_pos >= 0;

		/* the token orders the lease heap */
		dlm_heap_remove(&m->leases, h);
		h->token = take_ticket(m);
		if (leased && !dlm_heap_add(&m->leases, &m->mem, h))
			m->broken = true;
		/* a new grant: holders stay in grant (token) order */
		dlm_list_delete(&h->lock_link);
		dlm_list_push_tail(&h->lock->holders, &h->lock_link);
		dlm_list_delete(&h->owner_link);
		dlm_list_push_tail(&h->owner->holders, &h->owner_link);
		recheck_later(m, h->owner);
	}
	holder_changed(m, h);
}

/* Convert at once, moving the intentions on the ancestors (5.4). */
static void
convert_now(DLockManager *m, DLmHolder *h, int mode, DLockTime now)
{
	int			from = dlock_intention_mode(h->mode);
	int			to = dlock_intention_mode(mode);

	if (from != to)
	{
		size_t		lens[DLOCK_MAX_PATH_DEPTH];
		int			n = ancestors(h->lock->name, lens);

		for (int i = 0; i < n && !m->broken; i++)
		{
			DLmLock    *a = lock_get(m, h->lock->name, lens[i]);

			if (a == NULL)
				break;
			if (to != DLOCK_MODE_INVALID)
				implied_add(m, a, h->owner, to, h->pid, h->backend_start, h->role, now);
			if (from != DLOCK_MODE_INVALID)
				implied_drop(m, a, h->owner, from);
		}
	}
	convert_holder(m, h, mode);
}

/* Announce L (8) if the part starts waiting behind another owner's holder. */
static void
announce(DLockManager *m, DLmLock *l, const DLmOwner *o, int mode)
{
	/* a semaphore's waiter waits for its holders, whatever the modes (15) */
	if (l->announced ||
		(l->capacity > 0 ? dlm_list_empty(&l->holders) : compatible(mode, others_held(m, l, o))))
		return;
	l->announced = true;
	if (l->notify_listed)
		return;
	l->notify_listed = true;
	l->notify_next = NULL;
	if (m->notify_tail)
		m->notify_tail->notify_next = l;
	else
		m->notify = l;
	m->notify_tail = l;
}

/* A part joins the line with the next ticket (3.4, 5.3). */
static DLmWaiter *
enqueue(DLockManager *m, const DLmRequest *r, DLmOwner *o, DLmLock *l,
		DLmHolder *converting, int mode, bool implied, DLockTime now)
{
	DLmWaiter  *w = alloc0(m, sizeof(DLmWaiter));

	if (w == NULL)
		return NULL;
	w->lock = l;
	w->owner = o;
	w->holder = converting;
	w->implied = implied;
	w->mode = mode;
	w->ticket = take_ticket(m);
	w->requester = r->requester;
	w->pid = r->pid;
	w->backend_start = r->session_start;
	w->role = converting ? converting->role : request_role(o, r);
	w->since = now;
	w->timeout_at = r->timeout_at;
	w->ttl_us = r->ttl_us;
	w->request = w->ticket;		/* a group's parts: set to its first's */
	w->keep = r->keep_place;
	w->permits = r->capacity > 0 ? r->permits : 0;
	if (r->election && (w->value = value_copy(m, r->value)) == NULL)
		m->broken = true;		/* the picture is loaded again */
	if (converting)
	{
		dlm_list_push_tail(&l->converts, &w->lock_link);
		l->nconverting[mode]++;
		converting->conversion = w;
	}
	else
	{
		dlm_list_push_tail(&l->waiters, &w->lock_link);
		l->nwaiting[mode]++;
	}
	dlm_list_push_tail(&o->waiters, &w->owner_link);
	m->nwaiters++;
	if (!implied && !converting)
		count_named(m, o, l, w->role, 1);
	if (m->cfg.queue_row_delay_us > 0)
		dlm_list_push_tail(&m->young, &w->young_link);	/* a row when due (9) */
	else
		touch_waiter(m, w);
	announce(m, l, o, mode);
	return w;
}

static DLmGroup *
group_new(DLockManager *m, int nparts)
{
	DLmGroup   *g = alloc0(m, sizeof(DLmGroup) + sizeof(DLmWaiter *) * nparts);

	if (g)
	{
		g->parts = (DLmWaiter **) (g + 1);
		g->capacity = nparts;
	}
	return g;
}

/* Is a part of a group grantable, looking at its own lock only (6)? */
static bool
part_grantable(const DLockManager *m, const DLmWaiter *x)
{
	DLockModeMask ahead = 0;
	const DLmLock *l = x->lock;

	if (x->holder)
	{
		for (DLmLink *k = dlm_list_head(&l->converts); k; k = dlm_list_next(&l->converts, k))
		{
			const DLmWaiter *y = DLM_CONTAINER(DLmWaiter, lock_link, k);

			if (y == x)
				break;
			ahead |= DLOCK_MODE_BIT(y->mode);
		}
		return compatible(x->mode, ahead) && compatible(x->mode, others_held(m, l, x->owner));
	}
	if (own_covers(m, l, x->owner, x->mode))
		return true;
	for (int i = 0; i < DLOCK_NMODES; i++)
		if (l->nconverting[i] > 0)
			ahead |= DLOCK_MODE_BIT(i);
	for (DLmLink *k = dlm_list_head(&l->waiters); k; k = dlm_list_next(&l->waiters, k))
	{
		const DLmWaiter *y = DLM_CONTAINER(DLmWaiter, lock_link, k);

		if (y == x)
			break;
		if (y->group == NULL || y->group != x->group)
			ahead |= DLOCK_MODE_BIT(y->mode);
	}
	return compatible(x->mode, ahead) && compatible(x->mode, others_held(m, l, x->owner));
}

static bool
group_grantable(const DLockManager *m, const DLmGroup *g, const DLmWaiter *checked)
{
	for (int i = 0; i < g->nparts; i++)
		if (g->parts[i] != checked && !part_grantable(m, g->parts[i]))
			return false;
	return true;
}

/* Grant every part of a group at once (6.1). */
static void
grant_group(DLockManager *m, DLmGroup *g, DLockTime now)
{
	DLmWaiter  *first = g->parts[0];
	DLmHolder  *last = NULL;
	int			requester = first->requester;

	/* the owner may have got a name meanwhile, in a weaker mode */
	for (int i = 0; i < g->nnamed; i++)
	{
		DLmWaiter  *e = g->parts[i];
		DLmHolder  *own = e->holder ? NULL : named_holder(m, e->lock, e->owner);

		if (own && !dlock_mode_covers(own->mode, e->mode))
		{
			DLmAnswer	a;

			memset(&a, 0, sizeof(a));
			a.status = DLOCK_STATUS_MODE_HELD;
			a.name_index = i;
			a.count = own->mode;
			if (requester >= 0)
				m->cfg.answer(m->cfg.answer_arg, requester, &a);
			request_remove(m, first);
			return;
		}
	}
	for (int i = 0; i < g->nnamed && !m->broken; i++)
	{
		DLmWaiter  *e = g->parts[i];

		if (e->holder)
		{
			last = e->holder;
			convert_now(m, last, e->mode, now);
		}
		else
			last = take_name(m, e->lock, e->owner, e->mode, e->ttl_us,
							 e->pid, e->backend_start, e->role, now, false,
							 e->kept_until != 0);
		if (last == NULL)
			return;
		m->tokens[i] = last->token;
	}
	if (m->broken)
		return;
	if (g->nnamed == 1)
		answer_granted(m, requester, last);
	else
		answer_tokens(m, requester, g->nnamed);
	request_remove(m, first);
}

/* ---------------------------------------------------------------------
 * Counting semaphores (15)
 * --------------------------------------------------------------------- */

/* 15.3: O takes permits of semaphore L (a new holder: O holds none). */
static DLmHolder *
semaphore_take(DLockManager *m, DLmLock *l, DLmOwner *o, int32_t permits, int64_t ttl_us,
			   int32_t pid, int64_t backend_start, uint32_t role, DLockTime now,
			   bool uncollected)
{
	DLmHolder  *h = take_name(m, l, o, DLOCK_MODE_NL, ttl_us, pid, backend_start, role, now,
							  false, uncollected);

	if (h)
	{
		h->permits = permits;
		l->permits_held += permits;
	}
	return h;
}

/*
 * 15.4: the grant pass of a semaphore: waiters in ticket order while their
 * permits fit; the first that does not fit stops it (strict FIFO: a large
 * request at the head is not overtaken by smaller ones behind it).
 */
static void
semaphore_pass(DLockManager *m, DLmLock *l, DLockTime now)
{
	DLmLink    *k;

	while ((k = dlm_list_head(&l->waiters)) != NULL && !m->broken)
	{
		DLmWaiter  *w = DLM_CONTAINER(DLmWaiter, lock_link, k);
		int			requester = w->requester;
		DLmHolder  *h;

		if (!permits_fit(l, w->permits))
			break;
		if (named_holder(m, l, w->owner) != NULL)
		{
			/* the owner got permits meanwhile, with another request */
			waiter_remove(m, w);
			answer_error(m, requester, DLM_ERR_HELD_ONCE);
			continue;
		}
		h = semaphore_take(m, l, w->owner, w->permits, w->ttl_us, w->pid,
						   w->backend_start, w->role, now, w->kept_until != 0);
		waiter_remove(m, w);
		if (h)
			answer_granted(m, requester, h);
	}
}

/* Could any waiter of these remaining modes pass what is ahead? */
static bool
any_may_pass(const int32_t *left, DLockModeMask ahead)
{
	for (int i = 0; i < DLOCK_NMODES; i++)
		if (left[i] > 0 && compatible(i, ahead))
			return true;
	return false;
}

/*
 * The grant pass on L (6): conversions first, then waiters in ticket order,
 * each compatible with the holders of other owners and with what is still
 * ahead of it.  Stops when a group is granted (L is scanned again then),
 * and as soon as nobody left could pass.
 */
static void
grant_pass(DLockManager *m, DLmLock *l, DLockTime now)
{
	DLockModeMask ahead = 0;
	int32_t		left[DLOCK_NMODES];
	DLmLink    *k,
			   *next;

	if (l->capacity > 0)
	{
		semaphore_pass(m, l, now);
		return;
	}

	for (k = dlm_list_head(&l->converts); k && !m->broken; k = next)
	{
		DLmWaiter  *c = DLM_CONTAINER(DLmWaiter, lock_link, k);

		next = dlm_list_next(&l->converts, k);
		if (!compatible(c->mode, ahead) ||
			!compatible(c->mode, others_held(m, l, c->owner)))
			ahead |= DLOCK_MODE_BIT(c->mode);
		else if (c->group)
		{
			if (group_grantable(m, c->group, c))
			{
				grant_group(m, c->group, now);
				return;
			}
			ahead |= DLOCK_MODE_BIT(c->mode);
		}
		else
		{
			DLmHolder  *h = c->holder;
			int			requester = c->requester;

			waiter_remove(m, c);
			convert_now(m, h, c->mode, now);
			answer_granted(m, requester, h);
			/* its old mode may have held back a conversion before it (6) */
			if (ahead)
				scan_later(m, l);
		}
	}

	memcpy(left, l->nwaiting, sizeof(left));
	for (k = dlm_list_head(&l->waiters); k && !m->broken; k = next)
	{
		DLmWaiter  *w = DLM_CONTAINER(DLmWaiter, lock_link, k);
		DLmHolder  *own;

		if (!any_may_pass(left, ahead))
			break;
		next = dlm_list_next(&l->waiters, k);
		left[w->mode]--;
		if (!compatible(w->mode, ahead) ||
			!compatible(w->mode, others_held(m, l, w->owner)))
		{
			ahead |= DLOCK_MODE_BIT(w->mode);
			continue;
		}
		if (w->group)
		{
			if (group_grantable(m, w->group, w))
			{
				grant_group(m, w->group, now);
				return;
			}
			ahead |= DLOCK_MODE_BIT(w->mode);
			continue;
		}
		/* the owner may have got it meanwhile, with another request */
		own = named_holder(m, l, w->owner);
		if (own && l->election)
		{
			/* 16.3: an election is led once */
			int			requester = w->requester;

			waiter_remove(m, w);
			answer_error(m, requester, DLM_ERR_HELD_ONCE);
		}
		else if (own && !dlock_mode_covers(own->mode, w->mode))
		{
			answer(m, w->requester, DLOCK_STATUS_MODE_HELD, 0, 0, own->mode);
			waiter_remove(m, w);
		}
		else
		{
			int			requester = w->requester;
			DLmHolder  *h = take_name(m, l, w->owner, w->mode, w->ttl_us,
									  w->pid, w->backend_start, w->role, now, false,
									  w->kept_until != 0);

			if (h && l->election)
			{
				/* 16.3: the new leader publishes its campaign's value */
				h->value = w->value;
				w->value = NULL;
			}
			waiter_remove(m, w);
			if (h)
				answer_granted(m, requester, h);
		}
	}
}

/*
 * Grant O's waiting groups whose every part passes (6.2), in the order O
 * queued them; after each grant look again from the first.
 */
static void
recheck_owner(DLockManager *m, DLmOwner *o, DLockTime now)
{
	DLmLink    *k = dlm_list_head(&o->waiters);

	while (k && !m->broken)
	{
		DLmWaiter  *w = DLM_CONTAINER(DLmWaiter, owner_link, k);

		if (w->group && w->group->parts[0] == w && group_grantable(m, w->group, NULL))
		{
			grant_group(m, w->group, now);
			k = dlm_list_head(&o->waiters);
		}
		else
			k = dlm_list_next(&o->waiters, k);
	}
}

/*
 * Drain the scan list, then the recheck list (6, 6.2), until both are
 * empty: at the end of every event.
 */
static void
drain(DLockManager *m, DLockTime now)
{
	while ((m->scan || m->recheck) && !m->broken)
	{
		if (m->scan)
		{
			DLmLock    *l = m->scan;

			m->scan = l->scan_next;
			if (m->scan == NULL)
				m->scan_tail = NULL;
			l->scan_listed = false;
			grant_pass(m, l, now);
		}
		else
		{
			DLmOwner   *o = m->recheck;

			m->recheck = o->recheck_next;
			if (m->recheck == NULL)
				m->recheck_tail = NULL;
			o->recheck_listed = false;
			recheck_owner(m, o, now);
		}
	}
}

/* ---------------------------------------------------------------------
 * Deadlocks (7): a breadth-first search of the waits-for graph from a new
 * wait back to its owner.
 * --------------------------------------------------------------------- */

typedef struct Search
{
	DLockManager *m;
	DLmOwner   *target;			/* the owner of the new wait */
	DLmOwner   *from;			/* the owner whose wait is being followed */
	DLmWaiter  *via;
	DLmOwner   *head,
			   *tail;			/* the queue */
	DLmOwner   *found_from;		/* set when an edge reaches the target */
	DLmWaiter  *found_via;
	int32_t		found_pid;
	bool		found_held;
} Search;

/* One edge: s->from, waiting with s->via, waits for b. */
static bool
edge(Search *s, DLmOwner *b, int32_t pid, bool held)
{
	if (b == s->target)
	{
		s->found_from = s->from;
		s->found_via = s->via;
		s->found_pid = pid;
		s->found_held = held;
		return true;
	}
	if (b->visited == s->m->search)
		return false;
	b->visited = s->m->search;
	b->bfs_parent = s->from;
	b->bfs_via = s->via;
	b->bfs_pid = pid;
	b->bfs_held = held;
	b->bfs_next = NULL;
	if (s->tail)
		s->tail->bfs_next = b;
	else
		s->head = b;
	s->tail = b;
	return false;
}

/* The edges of one waiting part; true as soon as one reaches the target. */
static bool
edges_of(Search *s, DLmWaiter *w)
{
	DLmLock    *l = w->lock;
	DLockModeMask conflicts = dlock_mode_conflicts(w->mode);

	if (w->holder == NULL && own_covers(s->m, l, w->owner, w->mode))
		return false;			/* waits for nobody */
	s->via = w;
	for (DLmLink *k = dlm_list_head(&l->holders); k; k = dlm_list_next(&l->holders, k))
	{
		DLmHolder  *h = DLM_CONTAINER(DLmHolder, lock_link, k);

		if (h->owner != w->owner && (conflicts & DLOCK_MODE_BIT(h->mode)) &&
			edge(s, h->owner, h->pid, true))
			return true;
	}
	for (DLmLink *k = dlm_list_head(&l->converts); k; k = dlm_list_next(&l->converts, k))
	{
		DLmWaiter  *x = DLM_CONTAINER(DLmWaiter, lock_link, k);

		if (x == w)
			return false;		/* a conversion waits for those before it only */
		if (x->owner != w->owner && (conflicts & DLOCK_MODE_BIT(x->mode)) &&
			edge(s, x->owner, x->pid, false))
			return true;
	}
	for (DLmLink *k = dlm_list_head(&l->waiters); k; k = dlm_list_next(&l->waiters, k))
	{
		DLmWaiter  *x = DLM_CONTAINER(DLmWaiter, lock_link, k);

		if (x == w)
			break;
		if (x->owner != w->owner && (conflicts & DLOCK_MODE_BIT(x->mode)) &&
			edge(s, x->owner, x->pid, false))
			return true;
	}
	return false;
}

static void
cycle_step(DLmCycleStep *st, const DLmOwner *waiter, const DLmWaiter *via,
		   const DLmOwner *blocker, int32_t blocker_pid, bool held)
{
	st->waiter_keyed = waiter->key != NULL;
	st->waiter_pid = waiter->key ? via->pid : waiter->pid;
	st->lock = via->lock->name;
	st->held = held;
	st->blocker_keyed = blocker->key != NULL;
	st->blocker_pid = blocker->key ? blocker_pid : blocker->pid;
}

/*
 * Does the new wait w close a cycle?  Then the cycle, the new wait first,
 * is in m->cycle and its length returned; else 0 (also when out of memory:
 * the manager is broken then).
 */
static int
deadlock_cycle(DLockManager *m, DLmWaiter *w)
{
	DLmOwner   *o = w->owner;
	Search		s;
	int			n;
	DLmOwner   *x;

	/* nobody waits for an owner that holds nothing and waits only here */
	if (dlm_list_empty(&o->holders) &&
		dlm_list_head(&o->waiters) == &w->owner_link &&
		dlm_list_next(&o->waiters, &w->owner_link) == NULL)
		return 0;

	memset(&s, 0, sizeof(s));
	s.m = m;
	s.target = o;
	m->search++;
	o->visited = m->search;
	s.from = o;
	if (!edges_of(&s, w))
	{
		while (s.head && s.found_from == NULL)
		{
			DLmOwner   *b = s.head;

			s.head = b->bfs_next;
			if (s.head == NULL)
				s.tail = NULL;
			s.from = b;
			for (DLmLink *k = dlm_list_head(&b->waiters); k; k = dlm_list_next(&b->waiters, k))
				if (edges_of(&s, DLM_CONTAINER(DLmWaiter, owner_link, k)))
					break;
		}
		if (s.found_from == NULL)
			return 0;
	}

	/* the path: target -> ... -> found_from, then the closing edge */
	n = 1;
	for (x = s.found_from; x != o; x = x->bfs_parent)
		n++;
	if (n > m->cycle_cap)
	{
		DLmCycleStep *c = mem_alloc(m, sizeof(DLmCycleStep) * n);

		if (c == NULL)
			return 0;
		if (m->cycle)
			mem_free(m, m->cycle, sizeof(DLmCycleStep) * m->cycle_cap);
		m->cycle = c;
		m->cycle_cap = n;
	}
	{
		int			i = n - 1;

		cycle_step(&m->cycle[i], s.found_from, s.found_via, o, s.found_pid, s.found_held);
		for (x = s.found_from; x != o; x = x->bfs_parent)
			cycle_step(&m->cycle[--i], x->bfs_parent, x->bfs_via, x, x->bfs_pid, x->bfs_held);
	}
	return n;
}

/* After a request queued: refuse it if a part closes a cycle (7). */
static bool
refuse_deadlock(DLockManager *m, DLmWaiter *first)
{
	DLmGroup   *g = first->group;
	int			nparts = g ? g->nparts : 1;

	for (int i = 0; i < nparts; i++)
	{
		int			n = deadlock_cycle(m, g ? g->parts[i] : first);

		if (m->broken)
			return true;
		if (n > 0)
		{
			DLmAnswer	a;
			int			requester = first->requester;

			request_remove(m, first);
			memset(&a, 0, sizeof(a));
			a.status = DLOCK_STATUS_DEADLOCK;
			a.ncycle = n;
			a.cycle = m->cycle;
			if (requester >= 0)
				m->cfg.answer(m->cfg.answer_arg, requester, &a);
			return true;
		}
	}
	return false;
}

/* The request waits: its first part answers for it. */
static void
queued(DLockManager *m, DLmWaiter *first)
{
	if (first->requester >= 0)
		m->waiting[first->requester] = first;
	if (!refuse_deadlock(m, first))
		answer(m, first->requester, DLOCK_STATUS_QUEUED, first->ticket, 0, 0);
}

/* ---------------------------------------------------------------------
 * Kept places (14)
 * --------------------------------------------------------------------- */

static int
request_nparts(const DLmWaiter *first)
{
	return first->group ? first->group->nparts : 1;
}

static DLmWaiter *
request_part(const DLmWaiter *first, int i)
{
	return first->group ? first->group->parts[i] : (DLmWaiter *) first;
}

/* Into the list of kept places, in order of kept_until (ties: as they come). */
static void
kept_insert(DLockManager *m, DLmWaiter *first)
{
	DLmLink    *at = dlm_list_tail(&m->kept);

	/* places mostly come with one ttl: the search ends at the tail */
	while (at && DLM_CONTAINER(DLmWaiter, kept_link, at)->kept_until > first->kept_until)
		at = dlm_list_prev(&m->kept, at);
	dlm_list_insert_after(at ? at : &m->kept.head, &first->kept_link);
	m->nkept++;
}

/*
 * 14.2: the request stays in line with no call waiting, for its lease; its
 * rows (a young part's too) are written, durably: the answer promises it.
 */
static void
detach(DLockManager *m, DLmWaiter *first, DLockTime now)
{
	DLockTime	until = now + (first->ttl_us > 0 ? first->ttl_us : 1);

	if (first->requester >= 0 && m->waiting[first->requester] == first)
		m->waiting[first->requester] = NULL;
	for (int i = 0; i < request_nparts(first); i++)
	{
		DLmWaiter  *w = request_part(first, i);

		w->requester = DLM_NOBODY;
		w->kept_until = until;
		if (w->young_link.next)
			dlm_list_delete(&w->young_link);
		w->p.dirty = true;
		touch_waiter(m, w);
	}
	m->durable = true;
	kept_insert(m, first);
}

/*
 * O's kept place with no call waiting whose named parts are exactly these
 * names (sorted) in this mode, or NULL (14.3).
 */
static DLmWaiter *
kept_place_of(const DLockManager *m, const DLmOwner *o, const char *const *names,
			  int nnames, int mode, int32_t permits)
{
	(void) m;
	for (DLmLink *k = dlm_list_head(&o->waiters); k; k = dlm_list_next(&o->waiters, k))
	{
		DLmWaiter  *w = DLM_CONTAINER(DLmWaiter, owner_link, k);
		int			nnamed = w->group ? w->group->nnamed : 1;
		bool		same = true;

		if (w->kept_until == 0 || w->mode != mode || nnamed != nnames ||
			w->permits != permits || (w->group && w->group->parts[0] != w))
			continue;
		for (int i = 0; i < nnames && same; i++)
			same = strcmp(request_part(w, i)->lock->name, names[i]) == 0;
		if (same)
			return w;
	}
	return NULL;
}

/* 14.3: a call resumes its owner's kept place, with its own timeout and lease. */
static void
resume(DLockManager *m, const DLmRequest *r, DLmWaiter *first)
{
	dlm_list_delete(&first->kept_link);
	m->nkept--;
	for (int i = 0; i < request_nparts(first); i++)
	{
		DLmWaiter  *w = request_part(first, i);

		w->requester = r->requester;
		w->kept_until = 0;
		w->pid = r->pid;
		w->backend_start = r->session_start;
		w->timeout_at = r->timeout_at;
		w->ttl_us = r->ttl_us;
		w->keep = r->keep_place;
		w->p.dirty = true;
		touch_waiter(m, w);
	}
	if (r->election)
	{
		/* 16.3: it campaigns with the value of the call that resumes it */
		char	   *copy = value_copy(m, r->value);

		if (copy == NULL)
		{
			m->broken = true;
			return;
		}
		value_free(m, first->value);
		first->value = copy;
	}
	m->waiting[r->requester] = first;
	answer(m, r->requester, DLOCK_STATUS_QUEUED, first->ticket, 0, 0);
}

/*
 * 14.5: O's kept places with no call waiting that name L leave the line;
 * returns the ticket of the first, 0 if none.
 */
static int64_t
release_kept(DLockManager *m, DLmOwner *o, const DLmLock *l)
{
	int64_t		ticket = 0;
	DLmLink    *k = dlm_list_head(&o->waiters);

	while (k)
	{
		DLmWaiter  *w = DLM_CONTAINER(DLmWaiter, owner_link, k);
		DLmWaiter  *first = w->group ? w->group->parts[0] : w;
		bool		names_l = false;

		if (first->kept_until != 0)
			for (int i = 0; i < (first->group ? first->group->nnamed : 1) && !names_l; i++)
				names_l = request_part(first, i)->lock == l;
		if (!names_l)
		{
			k = dlm_list_next(&o->waiters, k);
			continue;
		}
		if (ticket == 0)
			ticket = first->ticket;
		request_remove(m, first);
		k = dlm_list_head(&o->waiters);	/* the parts left the list: again */
	}
	return ticket;
}

/* The soonest kept place, or NULL. */
static DLmWaiter *
kept_first(const DLockManager *m)
{
	DLmLink    *k = dlm_list_head(&m->kept);

	return k ? DLM_CONTAINER(DLmWaiter, kept_link, k) : NULL;
}

/* ---------------------------------------------------------------------
 * Requests
 * --------------------------------------------------------------------- */

/* A leader's value replaced (16.3, 16.4): its row is written, durably. */
static void
set_value(DLockManager *m, DLmHolder *h, const char *value)
{
	char	   *copy;

	if (h->value && strcmp(h->value, value) == 0)
		return;
	if ((copy = value_copy(m, value)) == NULL)
	{
		m->broken = true;
		return;
	}
	value_free(m, h->value);
	h->value = copy;
	leader_changed(m, h->lock);
	holder_changed(m, h);
}

/*
 * 15.3, 16.3: permits of a semaphore, or the lead of an election: held once
 * per owner, granted at once only when nobody waits (its kind checked, 15.2)
 */
static void
do_held_once(DLockManager *m, const DLmRequest *r, DLmOwner *o, DLockTime now)
{
	DLmLock    *l = lock_get(m, r->names[0], strlen(r->names[0]));
	bool		semaphore = r->capacity > 0;
	DLmHolder  *own;

	if (l == NULL)
		return;
	if (!lock_in_use(l))
	{
		/* kept while anyone holds or waits */
		l->capacity = r->capacity;
		l->election = r->election;
	}
	own = named_holder(m, l, o);
	if (own && own->kept > 0)
	{
		/* 14.4: what its kept place got, collected (a campaign: with this value) */
		(void) take_name(m, l, o, own->mode, r->ttl_us, r->pid, r->session_start, request_role(o, r), now,
						 true, false);
		if (r->election)
			set_value(m, own, r->value);
		answer_granted(m, r->requester, own);
	}
	else if (own)
		answer_error(m, r->requester, DLM_ERR_HELD_ONCE);
	else if (dlm_list_empty(&l->waiters) &&
			 (semaphore ? permits_fit(l, r->permits) :
			  dlm_list_empty(&l->holders)))
	{
		DLmHolder  *h = semaphore ?
			semaphore_take(m, l, o, r->permits, r->ttl_us, r->pid, r->session_start, request_role(o, r), now, false) :
			take_name(m, l, o, DLOCK_MODE_EX, r->ttl_us, r->pid, r->session_start, request_role(o, r), now,
					  false, false);

		if (h && r->election)
			set_value(m, h, r->value);
		if (h)
			answer_granted(m, r->requester, h);
	}
	else if (r->op == DLOCK_OP_TRY)
		answer(m, r->requester, DLOCK_STATUS_REFUSED, 0, 0, 0);
	else
	{
		DLmWaiter  *w = enqueue(m, r, o, l, NULL, semaphore ? DLOCK_MODE_NL : DLOCK_MODE_EX,
								false, now);

		if (w)
			queued(m, w);
	}
}

/* 16.4: the leader's new value */
static void
do_proclaim(DLockManager *m, const DLmRequest *r, DLmOwner *o)
{
	DLmLock    *l = lock_find(m, r->names[0], strlen(r->names[0]));
	DLmHolder  *h = l && o ? named_holder(m, l, o) : NULL;

	if (h == NULL)
		answer(m, r->requester, DLOCK_STATUS_NOT_HELD, 0, 0, 0);
	else if (!l->election)
		answer_error(m, r->requester, l->capacity > 0 ? DLM_ERR_IS_SEMAPHORE : DLM_ERR_IS_LOCK);
	else
	{
		set_value(m, h, r->value);
		answer_granted(m, r->requester, h);
	}
}

/* 3: acquire, try, acquire_all */
static void
do_acquire(DLockManager *m, const DLmRequest *r, DLmOwner *o, DLockTime now)
{
	int			intention = dlock_intention_mode(r->mode);
	DLmLock    *locks[DLOCK_MAX_MULTI];
	int			nparts = 0;		/* intention parts */
	bool		now_ok = true;

	for (int i = 0; i < r->nnames; i++)
	{
		DLmHolder  *own;

		locks[i] = lock_get(m, r->names[i], strlen(r->names[i]));
		if (locks[i] == NULL)
			return;
		if (!lock_in_use(locks[i]))
		{
			locks[i]->capacity = 0; /* a lock now (15.2) */
			locks[i]->election = false;
		}
		own = named_holder(m, locks[i], o);
		if (own && !dlock_mode_covers(own->mode, r->mode))
		{
			DLmAnswer	a;

			memset(&a, 0, sizeof(a));
			a.status = DLOCK_STATUS_MODE_HELD;
			a.name_index = i;
			a.count = own->mode;
			if (r->requester >= 0)
				m->cfg.answer(m->cfg.answer_arg, r->requester, &a);
			return;
		}
		/* a name held (re-entrant) or covered by an own intention waits for nobody */
		if (own == NULL)
			now_ok = now_ok && (own_covers(m, locks[i], o, r->mode) ||
								grantable_now(m, locks[i], o, r->mode));
		/*
		 * Intention parts for every name, held ones too: if the holder goes
		 * before the request is granted, its intentions must be checked
		 * like anyone's (a part covered by its own intentions passes).
		 */
		if (intention != DLOCK_MODE_INVALID)
		{
			size_t		lens[DLOCK_MAX_PATH_DEPTH];
			int			n = ancestors(r->names[i], lens);

			for (int j = 0; j < n; j++)
			{
				DLmLock    *a = lock_get(m, r->names[i], lens[j]);

				if (a == NULL)
					return;
				m->part_locks[nparts] = a;
				m->part_modes[nparts++] = intention;
				now_ok = now_ok && (own_covers(m, a, o, intention) ||
									grantable_now(m, a, o, intention));
			}
		}
	}

	if (now_ok)
	{
		DLmHolder  *h = NULL;

		for (int i = 0; i < r->nnames; i++)
		{
			h = take_name(m, locks[i], o, r->mode, r->ttl_us, r->pid, r->session_start, request_role(o, r), now,
						  true, false);
			if (h == NULL || m->broken)
				return;
			m->tokens[i] = h->token;
		}
		if (r->op == DLOCK_OP_ACQUIRE_ALL)
			answer_tokens(m, r->requester, r->nnames);
		else
			answer_granted(m, r->requester, h);
	}
	else if (r->op == DLOCK_OP_TRY)
		answer(m, r->requester, DLOCK_STATUS_REFUSED, 0, 0, 0);
	else if (r->nnames == 1 && nparts == 0)
	{
		DLmWaiter  *w = enqueue(m, r, o, locks[0], NULL, r->mode, false, now);

		if (w)
			queued(m, w);
	}
	else
	{
		DLmGroup   *g = group_new(m, r->nnames + nparts);

		if (g == NULL)
			return;
		g->nnamed = r->nnames;
		for (int i = 0; i < r->nnames + nparts; i++)
		{
			bool		named = i < r->nnames;
			DLmWaiter  *w = enqueue(m, r, o, named ? locks[i] : m->part_locks[i - r->nnames],
								   NULL, named ? r->mode : m->part_modes[i - r->nnames],
								   !named, now);

			if (w == NULL)
				return;
			w->group = g;
			w->request = g->parts[0] ? g->parts[0]->ticket : w->ticket;
			g->parts[g->nparts++] = w;
		}
		queued(m, g->parts[0]);
	}
}

/* 4.1 */
static void
do_release(DLockManager *m, const DLmRequest *r, DLmOwner *o, DLockTime now)
{
	for (int i = 0; i < r->nnames && !m->broken; i++)
	{
		DLmLock    *l = o ? lock_find(m, r->names[i], strlen(r->names[i])) : NULL;
		int64_t		kept = l ? release_kept(m, o, l) : 0;
		DLmHolder  *h = l ? named_holder(m, l, o) : NULL;

		if (h == NULL && kept != 0)
			answer(m, r->requester, DLOCK_STATUS_RELEASED, kept, 0, 0);
		else if (h == NULL)
			answer(m, r->requester, DLOCK_STATUS_NOT_HELD, 0, 0, 0);
		else if (h->count > 1)
		{
			h->count--;
			h->p.dirty = true;
			touch_holder(m, h);
			answer(m, r->requester, DLOCK_STATUS_RELEASED, h->token, 0, h->count);
		}
		else
		{
			answer(m, r->requester, DLOCK_STATUS_RELEASED, h->token, 0, 0);
			release_last(m, h, now);
		}
	}
}

/* 4.2 */
static void
do_renew(DLockManager *m, const DLmRequest *r, DLmOwner *o, DLockTime now)
{
	DLmLock    *l = o ? lock_find(m, r->names[0], strlen(r->names[0])) : NULL;
	DLmHolder  *h = l ? named_holder(m, l, o) : NULL;
	int64_t		ttl_us;

	if (h == NULL)
	{
		answer(m, r->requester, DLOCK_STATUS_NOT_HELD, 0, 0, 0);
		return;
	}
	ttl_us = r->ttl_us > 0 ? r->ttl_us : h->ttl_us;
	/* a lease taken before the limit was lowered renews within it */
	if (r->max_ttl_us > 0 && ttl_us > r->max_ttl_us)
		ttl_us = r->max_ttl_us;
	if (ttl_us > 0)
		holder_set_lease(m, h, ttl_us, now);
	answer(m, r->requester, DLOCK_STATUS_RENEWED, h->token, h->expires_at, h->count);
}

/* 5 */
static void
do_convert(DLockManager *m, const DLmRequest *r, DLmOwner *o, DLockTime now)
{
	DLmLock    *l = o ? lock_find(m, r->names[0], strlen(r->names[0])) : NULL;
	DLmHolder  *h = l ? named_holder(m, l, o) : NULL;
	int			to = dlock_intention_mode(r->mode);
	int			n = 0;
	bool		now_ok;

	if (h == NULL)
	{
		answer(m, r->requester, DLOCK_STATUS_NOT_HELD, 0, 0, 0);
		return;
	}
	if (l->capacity > 0 || l->election)
	{
		/* 15.2, 16.2 */
		answer_error(m, r->requester, l->election ? DLM_ERR_IS_ELECTION : DLM_ERR_IS_SEMAPHORE);
		return;
	}
	if (h->conversion)
	{
		answer_error(m, r->requester, DLM_ERR_CONVERSION_WAITING);
		return;
	}
	if (dlock_mode_covers(h->mode, r->mode))
	{
		/* weaker intentions are always compatible with the ones held */
		convert_now(m, h, r->mode, now);
		answer_granted(m, r->requester, h);
		grant_pass(m, l, now);
		return;
	}

	/*
	 * Up: when the intention changes, every ancestor is a part (one its
	 * owner covers now passes, but the cover may go before the grant).
	 */
	if (to != DLOCK_MODE_INVALID && to != dlock_intention_mode(h->mode))
	{
		size_t		lens[DLOCK_MAX_PATH_DEPTH];
		int			na = ancestors(l->name, lens);

		for (int i = 0; i < na; i++)
		{
			DLmLock    *a = lock_get(m, l->name, lens[i]);

			if (a == NULL)
				return;
			m->part_locks[n] = a;
			m->part_modes[n++] = to;
		}
	}
	{
		DLockModeMask converting = 0;

		for (int i = 0; i < DLOCK_NMODES; i++)
			if (l->nconverting[i] > 0)
				converting |= DLOCK_MODE_BIT(i);
		/* as if queued at the tail of the conversions and passed over (6) */
		now_ok = compatible(r->mode, others_held(m, l, o)) && compatible(r->mode, converting);
	}
	for (int i = 0; i < n; i++)
		now_ok = now_ok && (own_covers(m, m->part_locks[i], o, to) ||
							grantable_now(m, m->part_locks[i], o, to));
	if (now_ok)
	{
		convert_now(m, h, r->mode, now);
		answer_granted(m, r->requester, h);
		/* between incomparable modes (CW to PR) the old mode's conflicts go */
		grant_pass(m, l, now);
		return;
	}
	{
		DLmWaiter  *c = enqueue(m, r, o, l, h, r->mode, false, now);
		DLmGroup   *g;

		if (c == NULL)
			return;
		if (n > 0)
		{
			if ((g = group_new(m, n + 1)) == NULL)
				return;
			g->nnamed = 1;
			g->parts[g->nparts++] = c;
			c->group = g;
			for (int i = 0; i < n; i++)
			{
				DLmWaiter  *x = enqueue(m, r, o, m->part_locks[i], NULL, to, true, now);

				if (x == NULL)
					return;
				x->group = g;
				x->request = c->ticket;
				g->parts[g->nparts++] = x;
			}
		}
		queued(m, c);
	}
}

/*
 * End everything an owner holds and waits for (4.3): its waiters leave the
 * line (told WITHDRAWN unless they are 'except'), then its holders go;
 * every lock touched is scanned.  Returns how many named holders and
 * non-implied waiters ended.
 */
static int
end_owner(DLockManager *m, DLmOwner *o, int except)
{
	int			n = 0;

	while (!dlm_list_empty(&o->waiters) && !m->broken)
	{
		DLmWaiter  *w = DLM_CONTAINER(DLmWaiter, owner_link, dlm_list_head(&o->waiters));
		DLmGroup   *g = w->group;

		if (g)
		{
			for (int i = 0; i < g->nparts; i++)
				n += !g->parts[i]->implied;
		}
		else
			n += !w->implied;
		if (w->requester != except)
			answer(m, w->requester, DLOCK_STATUS_WITHDRAWN, 0, 0, 0);
		request_remove(m, w);
	}
	while (!dlm_list_empty(&o->holders) && !m->broken)
	{
		DLmHolder  *h = DLM_CONTAINER(DLmHolder, owner_link, dlm_list_head(&o->holders));

		n += !h->implied;
		scan_later(m, h->lock);
		holder_remove(m, h);
	}
	note_empty_owner(m, o);
	return n;
}

static DLmError
check_request(const DLockManager *m, const DLmRequest *r)
{
	bool		needs_mode = r->op == DLOCK_OP_ACQUIRE || r->op == DLOCK_OP_TRY ||
		r->op == DLOCK_OP_ACQUIRE_ALL || r->op == DLOCK_OP_CONVERT;
	int			max_names = (r->op == DLOCK_OP_ACQUIRE_ALL || r->op == DLOCK_OP_RELEASE) ?
		DLOCK_MAX_MULTI : 1;

	if (r->op < DLOCK_OP_ACQUIRE || r->op > DLOCK_OP_PROCLAIM)
		return DLM_ERR_BAD_REQUEST;
	/* nobody to answer, or to withdraw it: only what never waits */
	if (r->requester == DLM_NOBODY ?
		!(r->op == DLOCK_OP_RELEASE || r->op == DLOCK_OP_RELEASE_ALL ||
		  r->op == DLOCK_OP_RENEW || r->op == DLOCK_OP_TRY || r->op == DLOCK_OP_PROCLAIM) :
		(r->requester < 0 || r->requester >= m->cfg.nrequesters ||
		 m->waiting[r->requester] != NULL))
		return DLM_ERR_BAD_REQUEST;
	if (needs_mode && (r->mode < 0 || r->mode >= DLOCK_NMODES))
		return DLM_ERR_BAD_REQUEST;
	if (r->ttl_us < 0 || r->max_ttl_us < 0)
		return DLM_ERR_BAD_REQUEST;
	/* 16.1 */
	if ((r->election || r->op == DLOCK_OP_PROCLAIM) &&
		(r->value == NULL || bounded_len(r->value, DLOCK_MAX_VALUE_LEN) > DLOCK_MAX_VALUE_LEN ||
		 r->nnames != 1 || r->names == NULL || r->names[0] == NULL ||
		 (r->election && (r->capacity != 0 || r->mode != DLOCK_MODE_EX || r->names[0][0] == '/' ||
						  !(r->op == DLOCK_OP_ACQUIRE || r->op == DLOCK_OP_TRY)))))
		return DLM_ERR_BAD_ELECTION;
	if (r->capacity != 0 &&
		(r->capacity < 0 || r->permits < 1 || r->permits > r->capacity ||
		 !(r->op == DLOCK_OP_ACQUIRE || r->op == DLOCK_OP_TRY) || r->nnames != 1 ||
		 r->names == NULL || r->names[0] == NULL || r->names[0][0] == '/'))
		return DLM_ERR_BAD_SEMAPHORE;
	if (r->keep_place && (r->op == DLOCK_OP_TRY ||
						  ((r->op == DLOCK_OP_ACQUIRE || r->op == DLOCK_OP_ACQUIRE_ALL) &&
						   (r->owner_key == NULL || r->ttl_us <= 0))))
		return DLM_ERR_KEEP_PLACE;
	if (r->owner_key)
	{
		size_t		len = bounded_len(r->owner_key, DLOCK_MAX_OWNER_LEN);

		if (dlock_check_owner(r->owner_key, len) != DLOCK_CHECK_OK)
			return DLM_ERR_BAD_OWNER;
	}
	if (r->op == DLOCK_OP_RELEASE_ALL)
		return DLM_OK;
	if (r->nnames < 1 || r->nnames > max_names || r->names == NULL)
		return DLM_ERR_BAD_REQUEST;
	for (int i = 0; i < r->nnames; i++)
	{
		size_t		len;

		if (r->names[i] == NULL)
			return DLM_ERR_BAD_NAME;
		len = bounded_len(r->names[i], m->cfg.max_name_len);
		if (dlock_check_name(r->names[i], len, m->cfg.max_name_len) != DLOCK_CHECK_OK)
			return DLM_ERR_BAD_NAME;
		if (r->op == DLOCK_OP_ACQUIRE_ALL && i > 0 && strcmp(r->names[i - 1], r->names[i]) >= 0)
			return DLM_ERR_NOT_SORTED;
	}
	return DLM_OK;
}

/* A name's parts: itself and, for a path, its ancestors (13). */
static int64_t
name_parts(const char *name)
{
	int64_t		n = 0;

	if (name[0] != '/')
		return 1;
	for (const char *p = name; *p; p++)
		n += *p == '/';
	return n;
}

/*
 * 13: an acquire, try or acquire_all within the limits: its parts, the
 * objects in all, and the named locks it adds (names its owner does not
 * hold yet) against the owner's and the role's quotas.
 */
static DLmError
check_limits(const DLockManager *m, const DLmRequest *r)
{
	int64_t		parts = 0;
	int64_t		fresh = 0;
	int64_t		fresh_bytes = 0;
	size_t		key_len = r->owner_key ? strlen(r->owner_key) : 0;
	uint32_t	role;
	DLmOwner   *o;

	for (int i = 0; i < r->nnames; i++)
		parts += name_parts(r->names[i]);
	if (m->cfg.max_parts > 0 && parts > m->cfg.max_parts)
		return DLM_ERR_TOO_MANY_PARTS;
	if (m->cfg.max_objects > 0 &&
		(int64_t) m->pairs.count + m->nwaiters + parts > m->cfg.max_objects)
		return DLM_ERR_NO_SPACE;
	if (r->role_max_locks <= 0 && r->owner_max_locks <= 0 &&
		r->role_max_bytes <= 0 && r->owner_max_bytes <= 0)
		return DLM_OK;
	o = owner_find(m, r->owner_key, r->pid, r->session_start);
	for (int i = 0; i < r->nnames; i++)
	{
		size_t		len = strlen(r->names[i]);
		DLmLock    *l = o ? lock_find(m, r->names[i], len) : NULL;

		if (l == NULL || named_holder(m, l, o) == NULL)
		{
			fresh++;
			fresh_bytes += (int64_t) (len + key_len);
		}
	}
	if (fresh == 0)
		return DLM_OK;
	if ((r->owner_max_locks > 0 && (o ? o->nnamed : 0) + fresh > r->owner_max_locks) ||
		(r->owner_max_bytes > 0 && (o ? o->nbytes : 0) + fresh_bytes > r->owner_max_bytes))
		return DLM_ERR_OWNER_QUOTA;
	role = o && o->key && owner_in_use(o) ? o->role : r->role;
	if ((r->role_max_locks > 0 && dlm_role_locks(m, role) + fresh > r->role_max_locks) ||
		(r->role_max_bytes > 0 && dlm_role_bytes(m, role) + fresh_bytes > r->role_max_bytes))
		return DLM_ERR_ROLE_QUOTA;
	return DLM_OK;
}

/* ---------------------------------------------------------------------
 * Events (2)
 * --------------------------------------------------------------------- */

static void
after_event(DLockManager *m, int requester, DLockTime now)
{
	drain(m, now);
	if (m->broken)
		answer_error(m, requester, DLM_ERR_NO_MEMORY);
}

DLmError
dlm_request(DLockManager *m, const DLmRequest *r, DLockTime now)
{
	DLmError	err;
	DLmOwner   *o;

	if (r == NULL)
		return DLM_ERR_BAD_REQUEST;
	m->now = now;
	m->stats.requests++;
	if (r->requester >= 0 && r->requester < m->cfg.nrequesters)
	{
		m->asks[r->requester].op = (uint8_t) r->op;
		m->asks[r->requester].queued = false;
	}
	if ((err = check_request(m, r)) != DLM_OK)
	{
		if (r->requester >= 0 && r->requester < m->cfg.nrequesters)
			answer_error(m, r->requester, err);
		return err;
	}
	if (r->owner_key && !r->any_role)
	{
		o = owner_find(m, r->owner_key, 0, 0);
		if (o && owner_in_use(o) && o->role != r->role)
		{
			answer_error(m, r->requester, DLM_ERR_NOT_YOURS);
			return DLM_ERR_NOT_YOURS;
		}
	}
	/* 15.2: a name in use is a lock or a semaphore of one capacity */
	if (r->op == DLOCK_OP_ACQUIRE || r->op == DLOCK_OP_TRY || r->op == DLOCK_OP_ACQUIRE_ALL)
	{
		for (int i = 0; i < r->nnames; i++)
		{
			DLmLock    *l = lock_find(m, r->names[i], strlen(r->names[i]));

			err = DLM_OK;
			if (l == NULL || !lock_in_use(l))
				continue;
			if (l->election && !r->election)
				err = DLM_ERR_IS_ELECTION;
			else if (l->capacity > 0 && r->capacity == 0)
				err = DLM_ERR_IS_SEMAPHORE;
			else if (l->capacity == 0 && !l->election && (r->capacity > 0 || r->election))
				err = DLM_ERR_IS_LOCK;
			else if (r->capacity != l->capacity)
				err = DLM_ERR_CAPACITY;
			if (err != DLM_OK)
			{
				answer_error(m, r->requester, err);
				return err;
			}
		}
	}
	/* 14.3: a kept place resumed adds nothing a limit counts */
	if ((r->op == DLOCK_OP_ACQUIRE || r->op == DLOCK_OP_ACQUIRE_ALL) && r->owner_key &&
		!m->broken && (o = owner_find(m, r->owner_key, 0, 0)) != NULL)
	{
		/* a semaphore's place: its permits (15); the kind was checked above */
		DLmWaiter  *place = kept_place_of(m, o, r->names, r->nnames,
										  r->capacity > 0 ? DLOCK_MODE_NL : r->mode,
										  r->capacity > 0 ? r->permits : 0);

		if (place)
		{
			resume(m, r, place);
			after_event(m, r->requester, now);
			return m->broken ? DLM_ERR_NO_MEMORY : DLM_OK;
		}
	}
	if ((r->op == DLOCK_OP_ACQUIRE || r->op == DLOCK_OP_TRY || r->op == DLOCK_OP_ACQUIRE_ALL) &&
		(err = check_limits(m, r)) != DLM_OK)
	{
		answer_error(m, r->requester, err);
		return err;
	}
	if (m->broken)
	{
		answer_error(m, r->requester, DLM_ERR_NO_MEMORY);
		return DLM_ERR_NO_MEMORY;
	}
	if (r->op == DLOCK_OP_ACQUIRE || r->op == DLOCK_OP_TRY || r->op == DLOCK_OP_ACQUIRE_ALL)
	{
		o = owner_get(m, r->owner_key, r->pid, r->session_start);
		if (o && !owner_in_use(o))
			o->role = r->role;	/* taken by the role that fills it */
	}
	else
		o = owner_find(m, r->owner_key, r->pid, r->session_start);
	if (!m->broken)
	{
		switch (r->op)
		{
			case DLOCK_OP_ACQUIRE:
			case DLOCK_OP_TRY:
			case DLOCK_OP_ACQUIRE_ALL:
				if (r->capacity > 0 || r->election)
					do_held_once(m, r, o, now);
				else
					do_acquire(m, r, o, now);
				break;
			case DLOCK_OP_PROCLAIM:
				do_proclaim(m, r, o);
				break;
			case DLOCK_OP_RELEASE:
				do_release(m, r, o, now);
				break;
			case DLOCK_OP_RENEW:
				do_renew(m, r, o, now);
				break;
			case DLOCK_OP_CONVERT:
				do_convert(m, r, o, now);
				break;
			case DLOCK_OP_RELEASE_ALL:
				answer(m, r->requester, DLOCK_STATUS_COUNT, 0, 0,
					   o ? end_owner(m, o, r->requester) : 0);
				break;
			default:
				break;
		}
	}
	after_event(m, r->requester, now);
	return m->broken ? DLM_ERR_NO_MEMORY : DLM_OK;
}

void
dlm_withdraw(DLockManager *m, const int *requesters, int n, DLockTime now)
{
	if (m->broken || requesters == NULL)
		return;
	m->now = now;
	for (int i = 0; i < n; i++)
	{
		int			q = requesters[i];

		if (q < 0 || q >= m->cfg.nrequesters)
			continue;
		if (m->waiting[q] && m->waiting[q]->keep)
		{
			DLmWaiter  *first = m->waiting[q];

			detach(m, first, now);
			answer(m, q, DLOCK_STATUS_KEPT, first->ticket, first->kept_until, 0);
			continue;
		}
		if (m->waiting[q])
			request_remove(m, m->waiting[q]);
		answer(m, q, DLOCK_STATUS_CANCELED, 0, 0, 0);
	}
	drain(m, now);
}

void
dlm_session_end(DLockManager *m, int32_t pid, int64_t session_start, int requester,
				DLockTime now)
{
	DLmOwner   *o;

	if (m->broken)
		return;
	m->now = now;
	if (requester >= 0 && requester < m->cfg.nrequesters)
		m->asks[requester].queued = false;	/* a wait ends with the session */
	if (requester >= 0 && requester < m->cfg.nrequesters && m->waiting[requester])
	{
		if (m->waiting[requester]->keep)
			detach(m, m->waiting[requester], now);	/* 14.2 */
		else
			request_remove(m, m->waiting[requester]);
	}
	o = owner_find(m, NULL, pid, session_start);
	if (o || (requester >= 0 && requester < m->cfg.nrequesters && m->waiting[requester]))
		m->stats.session_cleanups++;
	if (o)
		(void) end_owner(m, o, requester);
	drain(m, now);
}

int
dlm_expire(DLockManager *m, DLockTime now, int max)
{
	int			n = 0;

	m->now = now;
	while (n < max && !m->broken)
	{
		DLmHolder  *h = dlm_heap_first(&m->leases);
		DLmWaiter  *w = kept_first(m);

		/* leases and kept places, soonest first; a lease first on a tie */
		if (h && h->expires_at <= now && (w == NULL || h->expires_at <= w->kept_until))
		{
			release_last(m, h, now);
			m->stats.expiries++;
		}
		else if (w && w->kept_until <= now)
			request_remove(m, w);	/* 14.6 */
		else
			break;
		n++;
	}
	drain(m, now);
	return n;
}

DLockTime
dlm_next_expiry(const DLockManager *m)
{
	DLmHolder  *h = dlm_heap_first(&m->leases);
	DLmWaiter  *w = kept_first(m);

	if (h && w)
		return h->expires_at < w->kept_until ? h->expires_at : w->kept_until;
	return h ? h->expires_at : w ? w->kept_until : 0;
}

/* The young list is in order of since: the due ones are at its head. */
int
dlm_queue_rows_due(DLockManager *m, DLockTime now, bool stored_anyway)
{
	int64_t		wait = stored_anyway ? m->cfg.queue_row_delay_us / 2 :
		m->cfg.queue_row_delay_us;
	DLmLink    *x;
	int			n = 0;

	while ((x = dlm_list_head(&m->young)) != NULL)
	{
		DLmWaiter  *w = DLM_CONTAINER(DLmWaiter, young_link, x);

		if (w->since + wait > now)
			break;
		dlm_list_delete(x);
		touch_waiter(m, w);
		n++;
	}
	return n;
}

DLockTime
dlm_next_queue_row(const DLockManager *m)
{
	DLmLink    *x = dlm_list_head(&m->young);

	return x ? DLM_CONTAINER(DLmWaiter, young_link, x)->since +
		m->cfg.queue_row_delay_us : 0;
}

/* A shorter delay makes the waiters it passed due at the next call. */
void
dlm_set_queue_row_delay(DLockManager *m, int64_t us)
{
	m->cfg.queue_row_delay_us = us < 0 ? 0 : us;
}

void
dlm_set_limits(DLockManager *m, int64_t max_objects, int max_parts)
{
	m->cfg.max_objects = max_objects < 0 ? 0 : max_objects;
	m->cfg.max_parts = max_parts < 0 ? 0 : max_parts;
}

int64_t
dlm_role_locks(const DLockManager *m, uint32_t role)
{
	const RoleUse *u = role_find(m, role);

	return u ? u->nnamed : 0;
}

int64_t
dlm_role_bytes(const DLockManager *m, uint32_t role)
{
	const RoleUse *u = role_find(m, role);

	return u ? u->nbytes : 0;
}

/* ---------------------------------------------------------------------
 * The batch's output (9)
 * --------------------------------------------------------------------- */

DLmHolder *
dlm_touched_holders(const DLockManager *m)
{
	return m->touched_h;
}

DLmWaiter *
dlm_touched_waiters(const DLockManager *m)
{
	return m->touched_w;
}

bool
dlm_counter_dirty(const DLockManager *m, int64_t *hi)
{
	if (hi)
		*hi = m->ticket_hi;
	return m->counter_dirty;
}

bool
dlm_batch_durable(const DLockManager *m)
{
	return m->durable;
}

DLmLock *
dlm_notified_locks(const DLockManager *m)
{
	return m->notify;
}

DLmLock *
dlm_leader_changes(const DLockManager *m)
{
	return m->leaders;
}

void
dlm_settle(DLockManager *m)
{
	DLmHolder  *h,
			   *hn;
	DLmWaiter  *w,
			   *wn;
	DLmLock    *l,
			   *ln;
	DLmOwner   *o,
			   *on;

	if (m->broken)
		return;
	for (h = m->touched_h; h; h = hn)
	{
		hn = h->touched_next;
		if (h->p.dead)
		{
			value_free(m, h->value);
			mem_free(m, h, sizeof(DLmHolder));
		}
		else
		{
			h->p.stored = true;
			h->p.dirty = false;
			h->p.listed = false;
			h->stored_token = h->token;
			h->stored_mode = h->mode;
			h->stored_permits = h->permits;
			h->touched_next = NULL;
		}
	}
	m->touched_h = m->touched_h_tail = NULL;
	for (w = m->touched_w; w; w = wn)
	{
		wn = w->touched_next;
		if (w->p.dead)
		{
			value_free(m, w->value);
			mem_free(m, w, sizeof(DLmWaiter));
		}
		else
		{
			w->p.stored = true;
			w->p.dirty = false;
			w->p.listed = false;
			w->touched_next = NULL;
		}
	}
	m->touched_w = m->touched_w_tail = NULL;
	for (l = m->notify; l; l = ln)
	{
		ln = l->notify_next;
		l->notify_listed = false;
		l->notify_next = NULL;
	}
	m->notify = m->notify_tail = NULL;
	for (l = m->leaders; l; l = ln)
	{
		ln = l->leader_next;
		l->leader_listed = false;
		l->leader_next = NULL;
	}
	m->leaders = m->leaders_tail = NULL;
	for (l = m->empty_locks; l; l = ln)
	{
		ln = l->empty_next;
		l->maybe_empty = false;
		if (dlm_list_empty(&l->holders) && dlm_list_empty(&l->converts) &&
			dlm_list_empty(&l->waiters) && !l->scan_listed)
		{
			dlm_hash_remove(&m->locks, &l->hash_node);
			mem_free(m, l, sizeof(DLmLock) + l->name_len + 1);
		}
	}
	m->empty_locks = NULL;
	for (o = m->empty_owners; o; o = on)
	{
		on = o->empty_next;
		o->maybe_empty = false;
		if (dlm_list_empty(&o->holders) && dlm_list_empty(&o->waiters))
		{
			dlm_hash_remove(&m->owners, &o->hash_node);
			mem_free(m, o, sizeof(DLmOwner) + (o->key ? strlen(o->key) + 1 : 0));
		}
	}
	m->empty_owners = NULL;
	m->counter_dirty = false;
	m->durable = false;
}

/* ---------------------------------------------------------------------
 * Creating and loading
 * --------------------------------------------------------------------- */

DLockManager *
dlm_create(const DLmConfig *config)
{
	DLockManager *m;

	if (config == NULL || config->alloc.alloc == NULL || config->alloc.free == NULL ||
		config->answer == NULL || config->nrequesters < 0 || config->max_name_len == 0 ||
		config->ticket_reserve < 1 || config->queue_row_delay_us < 0 ||
		config->max_objects < 0 || config->max_parts < 0)
		return NULL;
	m = config->alloc.alloc(config->alloc.arg, sizeof(DLockManager));
	if (m == NULL)
		return NULL;
	memset(m, 0, sizeof(DLockManager));
	m->cfg = *config;
	m->answer_fn = config->answer;
	m->answer_arg = config->answer_arg;
	m->cfg.answer = count_answer;
	m->cfg.answer_arg = m;
	m->mem.alloc = mem_alloc;
	m->mem.free = mem_free;
	m->mem.arg = m;
	dlm_list_init(&m->chunks);
	dlm_list_init(&m->young);
	dlm_list_init(&m->kept);
	m->next_ticket = m->ticket_hi = 1;
	if (!dlm_hash_init(&m->locks, &m->mem, 1024) ||
		!dlm_hash_init(&m->owners, &m->mem, 256) ||
		!dlm_hash_init(&m->pairs, &m->mem, 1024) ||
		!dlm_hash_init(&m->roles, &m->mem, 16) ||
		(m->waiting = alloc0(m, sizeof(DLmWaiter *) * (config->nrequesters + 1))) == NULL ||
		(m->asks = alloc0(m, sizeof(struct Ask) * (config->nrequesters + 1))) == NULL ||
		(m->part_locks = alloc0(m, sizeof(DLmLock *) * MAX_PARTS)) == NULL ||
		(m->part_modes = alloc0(m, sizeof(int) * MAX_PARTS)) == NULL)
	{
		dlm_destroy(m);
		return NULL;
	}
	return m;
}

void
dlm_destroy(DLockManager *m)
{
	if (m == NULL)
		return;
	if (m->cfg.untracked)
		return;					/* the caller frees its memory at once */
	while (!dlm_list_empty(&m->chunks))
	{
		DLmChunk   *c = DLM_CONTAINER(DLmChunk, link, dlm_list_head(&m->chunks));

		dlm_list_delete(&c->link);
		m->cfg.alloc.free(m->cfg.alloc.arg, c, sizeof(DLmChunk) + c->size);
	}
	m->cfg.alloc.free(m->cfg.alloc.arg, m, sizeof(DLockManager));
}

void
dlm_set_counter(DLockManager *m, int64_t hi)
{
	m->next_ticket = m->ticket_hi = hi;
	m->counter_dirty = false;
}

DLmError
dlm_load_holder(DLockManager *m, const DLmHolderRow *row)
{
	DLmOwner   *o;
	DLmLock    *l;
	DLmHolder  *h;
	size_t		len;

	if (m->broken)
		return DLM_ERR_NO_MEMORY;
	if (row == NULL || row->name == NULL || row->mode < 0 || row->mode >= DLOCK_NMODES ||
		row->count < 1 || row->ttl_us < 0 || row->kept < 0 || row->kept > row->count)
		return DLM_ERR_BAD_REQUEST;
	/* a leader (16): a named EX holder of a flat name, one level */
	if (row->value != NULL &&
		(row->mode != DLOCK_MODE_EX || row->implied || row->count != 1 || row->capacity != 0 ||
		 row->name[0] == '/' || bounded_len(row->value, DLOCK_MAX_VALUE_LEN) > DLOCK_MAX_VALUE_LEN))
		return DLM_ERR_BAD_ELECTION;
	/* a semaphore's holder: NL, one level, 1 .. capacity permits, a flat name */
	if (row->capacity != 0 &&
		(row->capacity < 0 || row->permits < 1 || row->permits > row->capacity ||
		 row->mode != DLOCK_MODE_NL || row->implied || row->count != 1 || row->name[0] == '/'))
		return DLM_ERR_BAD_SEMAPHORE;
	/* a name stored before the limit was lowered still loads */
	len = strlen(row->name);
	if (dlock_check_name(row->name, len, len) != DLOCK_CHECK_OK)
		return DLM_ERR_BAD_NAME;
	if (row->owner_key &&
		dlock_check_owner(row->owner_key, bounded_len(row->owner_key, DLOCK_MAX_OWNER_LEN)) != DLOCK_CHECK_OK)
		return DLM_ERR_BAD_OWNER;
	o = owner_get(m, row->owner_key, row->owner_key ? 0 : row->pid,
				  row->owner_key ? 0 : row->backend_start);
	if (o && !owner_in_use(o))
		o->role = row->role;
	l = o ? lock_get(m, row->name, len) : NULL;
	if (l == NULL)
		return DLM_ERR_NO_MEMORY;
	if (row->implied ? implied_holder(m, l, o, row->mode) != NULL : named_holder(m, l, o) != NULL)
		return DLM_ERR_BAD_REQUEST;
	if (lock_in_use(l) ? (l->capacity != row->capacity || l->election != (row->value != NULL)) : false)
		return DLM_ERR_CAPACITY;
	if (row->capacity > 0 && (int64_t) l->permits_held + row->permits > row->capacity)
		return DLM_ERR_CAPACITY;
	l->capacity = row->capacity;
	l->election = row->value != NULL;
	h = holder_add(m, l, o, row->mode, row->implied, row->token, row->pid,
				   row->backend_start, o->key ? o->role : row->role, row->granted_at);
	if (h == NULL)
		return DLM_ERR_NO_MEMORY;
	if (row->value && (h->value = value_copy(m, row->value)) == NULL)
		return DLM_ERR_NO_MEMORY;
	h->permits = row->capacity > 0 ? row->permits : 0;
	l->permits_held += h->permits;
	h->count = row->count;
	h->kept = row->kept > 0 && !row->implied ? row->kept : 0;
	h->ttl_us = row->ttl_us;
	h->expires_at = row->expires_at;
	if (h->expires_at != 0 && !dlm_heap_add(&m->leases, &m->mem, h))
		return DLM_ERR_NO_MEMORY;
	/* as stored: nothing to write */
	h->p.stored = true;
	h->p.dirty = false;
	h->stored_permits = h->permits;
	if (row->token >= m->next_ticket)
	{
		/* tokens stay unique even if the stored counter was behind */
		m->next_ticket = row->token;
		(void) take_ticket(m);
	}
	return DLM_OK;
}

DLmError
dlm_load_kept(DLockManager *m, const DLmWaiterRow *rows, int n)
{
	DLmOwner   *o;
	DLmGroup   *g = NULL;
	DLmWaiter  *first = NULL;
	DLmRequest	r;
	int			nnamed = 0;

	if (m->broken)
		return DLM_ERR_NO_MEMORY;
	if (rows == NULL || n < 1 || n > MAX_PARTS)
		return DLM_ERR_BAD_REQUEST;
	for (int i = 0; i < n; i++)
	{
		const DLmWaiterRow *row = &rows[i];
		size_t		len;

		if (row->name == NULL || row->owner_key == NULL || row->mode < 0 ||
			row->mode >= DLOCK_NMODES || row->ttl_us <= 0 || row->kept_until <= 0 ||
			(i > 0 && (row->ticket <= rows[i - 1].ticket ||
					   strcmp(row->owner_key, rows[0].owner_key) != 0 ||
					   (row->implied ? false : rows[i - 1].implied))))
			return DLM_ERR_BAD_REQUEST;
		len = strlen(row->name);
		if (dlock_check_name(row->name, len, len) != DLOCK_CHECK_OK)
			return DLM_ERR_BAD_NAME;
		if (dlock_check_owner(row->owner_key,
							  bounded_len(row->owner_key, DLOCK_MAX_OWNER_LEN)) != DLOCK_CHECK_OK)
			return DLM_ERR_BAD_OWNER;
		nnamed += !row->implied;
		if (row->capacity != 0 &&
			(n != 1 || row->capacity < 0 || row->permits < 1 || row->permits > row->capacity ||
			 row->mode != DLOCK_MODE_NL || row->implied || row->name[0] == '/'))
			return DLM_ERR_BAD_SEMAPHORE;
		if (row->value != NULL &&
			(n != 1 || row->mode != DLOCK_MODE_EX || row->implied || row->capacity != 0 ||
			 row->name[0] == '/' || bounded_len(row->value, DLOCK_MAX_VALUE_LEN) > DLOCK_MAX_VALUE_LEN))
			return DLM_ERR_BAD_ELECTION;
		{
			DLmLock    *l = lock_find(m, row->name, len);

			if (l && lock_in_use(l) &&
				(l->capacity != row->capacity || l->election != (row->value != NULL)))
				return DLM_ERR_CAPACITY;
		}
	}
	if (nnamed < 1 || nnamed > DLOCK_MAX_MULTI || rows[0].implied)
		return DLM_ERR_BAD_REQUEST;
	o = owner_get(m, rows[0].owner_key, 0, 0);
	if (o == NULL)
		return DLM_ERR_NO_MEMORY;
	if (!owner_in_use(o))
		o->role = rows[0].role;
	if (n > 1 && (g = group_new(m, n)) == NULL)
		return DLM_ERR_NO_MEMORY;
	if (g)
		g->nnamed = nnamed;
	memset(&r, 0, sizeof(r));
	r.requester = DLM_NOBODY;
	r.owner_key = rows[0].owner_key;
	r.keep_place = true;
	for (int i = 0; i < n; i++)
	{
		const DLmWaiterRow *row = &rows[i];
		DLmLock    *l = lock_get(m, row->name, strlen(row->name));
		DLmWaiter  *w;

		if (l == NULL)
			return DLM_ERR_NO_MEMORY;
		r.pid = row->pid;
		r.session_start = row->backend_start;
		r.ttl_us = row->ttl_us;
		r.capacity = row->capacity;
		r.permits = row->permits;
		r.election = row->value != NULL;
		r.value = row->value;
		if (!lock_in_use(l))
		{
			l->capacity = row->capacity;
			l->election = row->value != NULL;
		}
		/* its own ticket, not the counter's */
		if (row->ticket >= m->next_ticket)
		{
			m->next_ticket = row->ticket;
			(void) take_ticket(m);
		}
		w = enqueue(m, &r, o, l, NULL, row->mode, row->implied, row->since);
		if (w == NULL)
			return DLM_ERR_NO_MEMORY;
		w->ticket = row->ticket;
		w->since = row->since;
		w->kept_until = row->kept_until;
		/* as stored: nothing to write */
		if (w->young_link.next)
			dlm_list_delete(&w->young_link);
		w->p.stored = true;
		w->p.dirty = false;
		if (g)
		{
			w->group = g;
			g->parts[g->nparts++] = w;
		}
		if (first == NULL)
			first = w;
		w->request = first->ticket;
	}
	kept_insert(m, first);
	return DLM_OK;
}

void
dlm_load_done(DLockManager *m, DLockTime now)
{
	size_t		bucket = 0;

	if (m->broken)
		return;
	for (DLmHashNode *x = dlm_hash_next(&m->locks, &bucket, NULL); x;
		 x = dlm_hash_next(&m->locks, &bucket, x))
	{
		DLmLock    *l = DLM_CONTAINER(DLmLock, hash_node, x);

		if (!dlm_list_empty(&l->waiters) || !dlm_list_empty(&l->converts))
			scan_later(m, l);
	}
	drain(m, now);
}

int
dlm_drop_sessions(DLockManager *m, DLmSessionAliveFn alive, void *arg)
{
	size_t		bucket = 0;
	int			n = 0;

	if (m->broken)
		return 0;
	for (DLmHashNode *x = dlm_hash_next(&m->owners, &bucket, NULL); x;
		 x = dlm_hash_next(&m->owners, &bucket, x))
	{
		DLmOwner   *o = DLM_CONTAINER(DLmOwner, hash_node, x);

		if (o->key != NULL || alive(arg, o->pid, o->session_start))
			continue;
		while (!dlm_list_empty(&o->holders))
		{
			holder_remove(m, DLM_CONTAINER(DLmHolder, owner_link, dlm_list_head(&o->holders)));
			n++;
		}
	}
	return n;
}

int
dlm_extend_leases(DLockManager *m, DLockTime until)
{
	int			n = 0;

	for (int32_t i = 0; i < m->leases.count; i++)
	{
		DLmHolder  *h = m->leases.items[i].holder;

		if (h->expires_at < until)
		{
			h->expires_at = until;
			holder_changed(m, h);
			n++;
		}
	}
	dlm_heap_rebuild(&m->leases);
	/* the list stays in order: the soonest all become 'until' */
	for (DLmLink *k = dlm_list_head(&m->kept); k; k = dlm_list_next(&m->kept, k))
	{
		DLmWaiter  *first = DLM_CONTAINER(DLmWaiter, kept_link, k);

		if (first->kept_until >= until)
			break;
		for (int i = 0; i < request_nparts(first); i++)
		{
			DLmWaiter  *w = request_part(first, i);

			w->kept_until = until;
			w->p.dirty = true;
			touch_waiter(m, w);
		}
		m->durable = true;
		n++;
	}
	return n;
}

/* ---------------------------------------------------------------------
 * Looking
 * --------------------------------------------------------------------- */

DLmLock *
dlm_lookup(const DLockManager *m, const char *name)
{
	return name ? lock_find(m, name, strlen(name)) : NULL;
}

DLmWaiter *
dlm_waiter_of(const DLockManager *m, int requester)
{
	if (requester < 0 || requester >= m->cfg.nrequesters)
		return NULL;
	return m->waiting[requester];
}

size_t
dlm_nlocks(const DLockManager *m)
{
	return m->locks.count;
}

bool
dlm_broken(const DLockManager *m)
{
	return m->broken;
}

DLmHolder *
dlm_lock_holders(const DLmLock *l)
{
	DLmLink    *k = dlm_list_head(&l->holders);

	return k ? DLM_CONTAINER(DLmHolder, lock_link, k) : NULL;
}

DLmHolder *
dlm_holder_next(const DLmHolder *h)
{
	DLmLink    *k = dlm_list_next(&h->lock->holders, &h->lock_link);

	return k ? DLM_CONTAINER(DLmHolder, lock_link, k) : NULL;
}

DLmWaiter *
dlm_lock_queue(const DLmLock *l)
{
	DLmLink    *k = dlm_list_head(&l->converts);

	if (k == NULL)
		k = dlm_list_head(&l->waiters);
	return k ? DLM_CONTAINER(DLmWaiter, lock_link, k) : NULL;
}

DLmWaiter *
dlm_waiter_next(const DLmWaiter *w)
{
	const DLmLock *l = w->lock;
	DLmLink    *k;

	if (w->holder)
	{
		k = dlm_list_next(&l->converts, &w->lock_link);
		if (k == NULL)
			k = dlm_list_head(&l->waiters);
	}
	else
		k = dlm_list_next(&l->waiters, &w->lock_link);
	return k ? DLM_CONTAINER(DLmWaiter, lock_link, k) : NULL;
}
