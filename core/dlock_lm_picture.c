/* SPDX-License-Identifier: PostgreSQL */
/*
 * dlock_lm_picture.c
 *		The lock manager's picture (core/README section 1): owners and
 *		locks found and made, the named locks each owner and role counts
 *		for (13), the holders of a lock and the modes they hold, holders and
 *		waiters added and removed, and the adapters' read-only walk.
 *
 * Interface (dlock_lm_int.h):
 *		dlm_owner_find, dlm_owner_get, dlm_lock_find, dlm_lock_get,
 *		dlm_line_make, dlm_owner_waiters_make, dlm_holder_extra,
 *		dlm_note_empty_owner
 *								owners and locks
 *		dlm_count_named			a named holder or waiting part came or went (13)
 *		dlm_named_holder, dlm_implied_holder, dlm_own_covers,
 *		dlm_others_held, dlm_grantable_now	a lock's holders (1)
 *		dlm_holder_add, dlm_holder_set_lease, dlm_holder_remove,
 *		dlm_waiter_remove, dlm_request_remove, dlm_ancestors,
 *		dlm_implied_add, dlm_implied_drop	holders and waiters
 *		dlm_bounded_len			a string's length, looked at up to a bound
 *		dlm_picture_init		the hash tables of owners, locks, holders, roles
 * Interface (dlock_lm.h): dlm_role_locks, dlm_role_bytes; dlm_lookup,
 * dlm_waiter_of, dlm_nlocks, dlm_broken, dlm_lock_holders, dlm_holder_next,
 * dlm_lock_queue, dlm_waiter_next.
 *
 * Objects that leave the picture are only marked dead (and put on the
 * batch's lists): dlm_settle frees them once the store has their rows.
 */
#include "dlock_lm_int.h"

#include <string.h>

/* ---------------------------------------------------------------------
 * Owners and locks
 * --------------------------------------------------------------------- */

size_t
dlm_bounded_len(const char *s, size_t max)
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
DLmOwner *
dlm_owner_find(const DLockManager *m, const char *key, int32_t pid, int64_t start)
{
	uint64_t	hash = owner_hash(m, key, pid, start);

	for (DLmHashNode *n = dlm_hash_chain(&m->owners, hash); n; n = n->next)
	{
		DLmOwner   *o = DLM_CONTAINER(DLmOwner, hash_node, n);

		if (key ? (o->key && strcmp(o->key, key) == 0) :
			(!o->key && o->pid == pid && o->session_start == start))
			return o;
	}
	return NULL;
}

void
dlm_note_empty_owner(DLockManager *m, DLmOwner *o)
{
	if (!o->maybe_empty)
	{
		o->maybe_empty = true;
		dlm_vec_push(m, &m->empty_owners, o);
	}
}

static void
note_empty_lock(DLockManager *m, DLmLock *l)
{
	if (!l->maybe_empty)
	{
		l->maybe_empty = true;
		dlm_vec_push(m, &m->empty_locks, l);
	}
}

DLmOwner *
dlm_owner_get(DLockManager *m, const char *key, int32_t pid, int64_t start)
{
	DLmOwner   *o = dlm_owner_find(m, key, pid, start);

	if (o)
		return o;
	o = dlm_alloc0(m, dlm_owner_size(key));
	if (o == NULL)
		return NULL;
	if (key)
	{
		memcpy(o->key_bytes, key, strlen(key) + 1);
		o->key = o->key_bytes;
	}
	else
	{
		o->pid = pid;
		o->session_start = start;
	}
	dlm_list_init(&o->holders);
	o->waiters = (DLmList *) &dlm_no_waiters;
	dlm_hash_insert(&m->owners, &m->mem, &o->hash_node, owner_hash(m, key, pid, start));
	dlm_note_empty_owner(m, o);
	return o;
}

DLmLock *
dlm_lock_find(const DLockManager *m, const char *name, size_t len)
{
	uint64_t	hash = dlm_siphash(m->cfg.seed, name, len);

	for (DLmHashNode *n = dlm_hash_chain(&m->locks, hash); n; n = n->next)
	{
		DLmLock    *l = DLM_CONTAINER(DLmLock, hash_node, n);

		if (l->name_len == len && memcmp(l->name, name, len) == 0)
			return l;
	}
	return NULL;
}

/* The lock of a name (the first len bytes of it), created if new. */
DLmLock *
dlm_lock_get(DLockManager *m, const char *name, size_t len)
{
	DLmLock    *l = dlm_lock_find(m, name, len);

	if (l)
		return l;
	l = dlm_alloc0(m, dlm_lock_size(len));
	if (l == NULL)
		return NULL;
	memcpy(l->name, name, len);
	l->name[len] = '\0';
	l->name_len = len;
	dlm_list_init(&l->holders);
	l->line = (DLmLine *) &dlm_no_line;
	dlm_hash_insert(&m->locks, &m->mem, &l->hash_node, dlm_siphash(m->cfg.seed, name, len));
	note_empty_lock(m, l);
	return l;
}

const DLmLine dlm_no_line = {
	{{(DLmLink *) &dlm_no_line.converts.head, (DLmLink *) &dlm_no_line.converts.head}},
	{{(DLmLink *) &dlm_no_line.waiters.head, (DLmLink *) &dlm_no_line.waiters.head}},
	{0}, {0}
};

/* L's own line, for a first waiter; false if out of memory (broken). */
bool
dlm_line_make(DLockManager *m, DLmLock *l)
{
	DLmLine    *q;

	if (l->line != &dlm_no_line)
		return true;
	q = dlm_alloc0(m, sizeof(DLmLine));
	if (q == NULL)
		return false;
	dlm_list_init(&q->converts);
	dlm_list_init(&q->waiters);
	l->line = q;
	return true;
}

const DLmList dlm_no_waiters = {
	{(DLmLink *) &dlm_no_waiters.head, (DLmLink *) &dlm_no_waiters.head}
};

/*
 * O's own list of waiting parts, for its first: most owners never wait (a
 * held lease is an owner with one holder), and an owner's list is kept
 * until the owner goes, as a lock's line; false if out of memory (broken).
 */
/*
 * H's rarely used fields, made on first use (a kept level, permits, a
 * value: core/README 11); NULL if out of memory (broken).
 */
DLmHolderExtra *
dlm_holder_extra(DLockManager *m, DLmHolder *h)
{
	if (h->extra == NULL)
		h->extra = dlm_alloc0(m, sizeof(DLmHolderExtra));
	return h->extra;
}

bool
dlm_owner_waiters_make(DLockManager *m, DLmOwner *o)
{
	DLmList    *q;

	if (o->waiters != &dlm_no_waiters)
		return true;
	if ((q = dlm_alloc0(m, sizeof(DLmList))) == NULL)
		return false;
	dlm_list_init(q);
	o->waiters = q;
	return true;
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

		if (u->role == role)
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
void
dlm_count_named(DLockManager *m, DLmOwner *o, const DLmLock *l, uint32_t role, int delta)
{
	RoleUse    *u = role_find(m, role);
	int64_t		bytes = delta * named_bytes(l, o);

	o->nnamed += delta;
	o->nbytes += bytes;
	if (u == NULL && delta > 0)
	{
		u = dlm_alloc0(m, sizeof(RoleUse));
		if (u == NULL)
			return;				/* broken: the picture is loaded again */
		u->role = role;
		dlm_hash_insert(&m->roles, &m->mem, &u->node,
						dlm_siphash(m->cfg.seed, &u->role, sizeof(u->role)));
	}
	if (u)
	{
		u->nnamed += delta;
		u->nbytes += bytes;
	}
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
 * The holders of a lock (1): by (lock, owner), and the modes held
 * --------------------------------------------------------------------- */

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
DLmHolder *
dlm_named_holder(const DLockManager *m, const DLmLock *l, const DLmOwner *o)
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
DLmHolder *
dlm_implied_holder(const DLockManager *m, const DLmLock *l, const DLmOwner *o, int mode)
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
bool
dlm_own_covers(const DLockManager *m, const DLmLock *l, const DLmOwner *o, int mode)
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

/* dlm_others_held (1): counted per lock, less O's own few holders. */
DLockModeMask
dlm_others_held(const DLockManager *m, const DLmLock *l, const DLmOwner *o)
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
		if (l->line->nwaiting[i] > 0 || l->line->nconverting[i] > 0)
			mask |= DLOCK_MODE_BIT(i);
	return mask;
}

bool
dlm_grantable_now(const DLockManager *m, const DLmLock *l, const DLmOwner *o, int mode)
{
	return dlm_compatible(mode, dlm_others_held(m, l, o)) && dlm_compatible(mode, queued_modes(l));
}

/* ---------------------------------------------------------------------
 * Holders and waiters
 * --------------------------------------------------------------------- */

DLmHolder *
dlm_holder_add(DLockManager *m, DLmLock *l, DLmOwner *o, int mode, bool implied,
		   int64_t token, int32_t pid, int64_t backend_start, uint32_t role, DLockTime now)
{
	DLmHolder  *h = dlm_alloc0(m, sizeof(DLmHolder));

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
	dlm_hash_insert(&m->pairs, &m->mem, &h->pair_node, pair_hash(l, o));
	if (!implied)
		dlm_count_named(m, o, l, role, 1);
	l->nheld[mode]++;
	l->announced = false;		/* a new holder has not been told (8) */
	dlm_leader_changed(m, l);
	dlm_holder_changed(m, h);
	dlm_recheck_later(m, o);
	return h;
}

void
dlm_holder_set_lease(DLockManager *m, DLmHolder *h, int64_t ttl_us, DLockTime now)
{
	dlm_heap_remove(&m->leases, h);
	h->ttl_us = ttl_us;
	h->expires_at = ttl_us > 0 ? now + ttl_us : 0;
	if (h->expires_at != 0 && !dlm_heap_add(&m->leases, &m->mem, h))
		m->broken = true;
	dlm_holder_changed(m, h);
}

void
dlm_waiter_remove(DLockManager *m, DLmWaiter *w)
{
	dlm_list_delete(&w->lock_link);
	dlm_list_delete(&w->owner_link);
	m->nwaiters--;
	if (!w->implied && !w->holder)
		dlm_count_named(m, w->owner, w->lock, w->role, -1);
	if (w->holder)
		w->lock->line->nconverting[w->mode]--;
	else
		w->lock->line->nwaiting[w->mode]--;
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
	dlm_touch_waiter(m, w);
	note_empty_lock(m, w->lock);
	dlm_note_empty_owner(m, w->owner);
}

/* Take a request out of line with all its parts; their locks are scanned. */
void
dlm_request_remove(DLockManager *m, DLmWaiter *w)
{
	DLmGroup   *g = w->group;

	if (g == NULL)
	{
		dlm_scan_later(m, w->lock);
		dlm_waiter_remove(m, w);
		return;
	}
	for (int i = 0; i < g->nparts; i++)
	{
		dlm_scan_later(m, g->parts[i]->lock);
		dlm_waiter_remove(m, g->parts[i]);
	}
	dlm_mem_free(m, g, sizeof(DLmGroup) + sizeof(DLmWaiter *) * g->capacity);
}

void
dlm_holder_remove(DLockManager *m, DLmHolder *h)
{
	DLmWaiter  *c = dlm_conversion_of(h);

	/* a conversion still waiting ends with the lock it would convert (4.1) */
	if (c)
	{
		dlm_answer(m, c->requester, DLOCK_STATUS_NOT_HELD, 0, 0, 0);
		dlm_request_remove(m, c);
	}
	dlm_list_delete(&h->lock_link);
	dlm_list_delete(&h->owner_link);
	dlm_hash_remove(&m->pairs, &h->pair_node);
	if (!h->implied)
		dlm_count_named(m, h->owner, h->lock, h->role, -1);
	h->lock->nheld[h->mode]--;
	h->lock->permits_held -= dlm_holder_permits(h);
	dlm_leader_changed(m, h->lock);
	dlm_heap_remove(&m->leases, h);
	h->p.dead = true;
	dlm_touch_holder(m, h);
	note_empty_lock(m, h->lock);
	dlm_note_empty_owner(m, h->owner);
}

/* Proper ancestors of a path, as lengths of its prefixes, shortest first. */
int
dlm_ancestors(const char *name, size_t *lens)
{
	int			n = dlock_path_ancestor_lengths(name, strlen(name), lens,
											   DLOCK_MAX_PATH_DEPTH);

	/* names are checked on the way in: deeper ones never get here */
	return n < DLOCK_MAX_PATH_DEPTH ? n : DLOCK_MAX_PATH_DEPTH - 1;
}

/* One more count of O's intention on A (3.5). */
void
dlm_implied_add(DLockManager *m, DLmLock *a, DLmOwner *o, int mode, int32_t pid,
			int64_t backend_start, uint32_t role, DLockTime now)
{
	DLmHolder  *h = dlm_implied_holder(m, a, o, mode);

	if (h)
	{
		h->count++;
		h->p.dirty = true;
		dlm_touch_holder(m, h);
	}
	else
		(void) dlm_holder_add(m, a, o, mode, true, dlm_take_ticket(m), pid, backend_start, role, now);
}

/* One count less of O's intention on A; the holder goes at zero (4.1). */
void
dlm_implied_drop(DLockManager *m, DLmLock *a, DLmOwner *o, int mode)
{
	DLmHolder  *h = dlm_implied_holder(m, a, o, mode);

	if (h == NULL)
		return;
	if (--h->count > 0)
	{
		h->p.dirty = true;
		dlm_touch_holder(m, h);
	}
	else
		dlm_holder_remove(m, h);
	dlm_scan_later(m, a);
}

/* ---------------------------------------------------------------------
 * Looking
 * --------------------------------------------------------------------- */

DLmLock *
dlm_lookup(const DLockManager *m, const char *name)
{
	return name ? dlm_lock_find(m, name, strlen(name)) : NULL;
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
	DLmLink    *k = dlm_list_head(&l->line->converts);

	if (k == NULL)
		k = dlm_list_head(&l->line->waiters);
	return k ? DLM_CONTAINER(DLmWaiter, lock_link, k) : NULL;
}

DLmWaiter *
dlm_waiter_next(const DLmWaiter *w)
{
	const DLmLock *l = w->lock;
	DLmLink    *k;

	if (w->holder)
	{
		k = dlm_list_next(&l->line->converts, &w->lock_link);
		if (k == NULL)
			k = dlm_list_head(&l->line->waiters);
	}
	else
		k = dlm_list_next(&l->line->waiters, &w->lock_link);
	return k ? DLM_CONTAINER(DLmWaiter, lock_link, k) : NULL;
}

/* ---------------------------------------------------------------------
 * The picture's hash tables: each node's hash computed again from its
 * object when a table grows or removes it (none is kept in the node)
 * --------------------------------------------------------------------- */

static uint64_t
lock_hash_of(const void *arg, const DLmHashNode *n)
{
	const DLmLock *l = DLM_CONTAINER(DLmLock, hash_node, n);

	return dlm_siphash(((const DLockManager *) arg)->cfg.seed, l->name, l->name_len);
}

static uint64_t
owner_hash_of(const void *arg, const DLmHashNode *n)
{
	const DLmOwner *o = DLM_CONTAINER(DLmOwner, hash_node, n);

	return owner_hash(arg, o->key, o->pid, o->session_start);
}

static uint64_t
pair_hash_of(const void *arg, const DLmHashNode *n)
{
	const DLmHolder *h = HOLDER_OF(n);

	(void) arg;
	return pair_hash(h->lock, h->owner);
}

static uint64_t
role_hash_of(const void *arg, const DLmHashNode *n)
{
	const RoleUse *u = DLM_CONTAINER(RoleUse, node, n);

	return dlm_siphash(((const DLockManager *) arg)->cfg.seed, &u->role, sizeof(u->role));
}

/* The four tables of a new manager; false if out of memory. */
bool
dlm_picture_init(DLockManager *m)
{
	return dlm_hash_init(&m->locks, &m->mem, 1024, lock_hash_of, m) &&
		dlm_hash_init(&m->owners, &m->mem, 256, owner_hash_of, m) &&
		dlm_hash_init(&m->pairs, &m->mem, 1024, pair_hash_of, m) &&
		dlm_hash_init(&m->roles, &m->mem, 16, role_hash_of, m);
}
