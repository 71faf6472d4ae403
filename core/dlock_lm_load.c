/* SPDX-License-Identifier: PostgreSQL */
/*
 * dlock_lm_load.c
 *		The manager's life: its memory, creating and destroying it, and
 *		loading the picture from the store's rows (core/README 9, 14.7,
 *		15.5, 16.6).
 *
 * Interface (dlock_lm_int.h):
 *		dlm_mem_alloc, dlm_mem_free, dlm_alloc0	the manager's allocator
 * Interface (dlock_lm.h): dlm_create, dlm_destroy, dlm_set_counter,
 * dlm_load_holder, dlm_load_kept, dlm_load_done, dlm_drop_sessions,
 * dlm_extend_leases.
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

/* ---------------------------------------------------------------------
 * Memory
 * --------------------------------------------------------------------- */

typedef struct DLmChunk
{
	DLmLink		link;
	size_t		size;
} DLmChunk;

void *
dlm_mem_alloc(void *arg, size_t size)
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

void
dlm_mem_free(void *arg, void *ptr, size_t size)
{
	DLockManager *m = arg;
	DLmChunk   *c = (DLmChunk *) ptr - 1;

	if (m->cfg.untracked)
	{
		m->cfg.alloc.free(m->cfg.alloc.arg, ptr, size);
		return;
	}
	dlm_list_delete(&c->link);

	/*
	 * The size the manager gives, not the chunk's: an allocator without
	 * chunk headers (the PostgreSQL worker's) relies on it, and the tests'
	 * allocator checks it against what was asked for.
	 */
	m->cfg.alloc.free(m->cfg.alloc.arg, c, sizeof(DLmChunk) + size);
}

void *
dlm_alloc0(DLockManager *m, size_t size)
{
	void	   *p = dlm_mem_alloc(m, size);

	if (p)
		memset(p, 0, size);
	return p;
}

/*
 * dlm_vec_grow makes room for one more item: by moving the items not yet
 * done to the front when they fill at most half of it (a list drained while
 * it fills, as the scan list, stays as long as its longest stretch), else
 * by doubling.  Either way each push costs O(1) amortized.
 */
bool
dlm_vec_grow(DLockManager *m, DLmVec *v)
{
	size_t		cap = v->cap ? v->cap * 2 : 64;
	void	  **items;

	if (v->head > 0 && v->head >= v->cap / 2)
	{
		memmove(v->items, v->items + v->head, sizeof(void *) * (v->count - v->head));
		v->count -= v->head;
		v->head = 0;
		return true;
	}
	if ((items = dlm_mem_alloc(m, sizeof(void *) * cap)) == NULL)
		return false;
	if (v->count > 0)
		memcpy(items, v->items, sizeof(void *) * v->count);
	if (v->items)
		dlm_mem_free(m, v->items, sizeof(void *) * v->cap);
	v->items = items;
	v->cap = cap;
	return true;
}

/*
 * dlm_vec_done empties V once all its items are done; an array grown past
 * a small size by a large batch is given back rather than kept for good.
 */
void
dlm_vec_done(DLockManager *m, DLmVec *v)
{
	if (v->head != v->count)
		return;
	v->head = v->count = 0;
	if (v->cap > 1024)
	{
		dlm_mem_free(m, v->items, sizeof(void *) * v->cap);
		v->items = NULL;
		v->cap = 0;
	}
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
	m->cfg.answer = dlm_count_answer;
	m->cfg.answer_arg = m;
	m->mem.alloc = dlm_mem_alloc;
	m->mem.free = dlm_mem_free;
	m->mem.arg = m;
	dlm_list_init(&m->chunks);
	dlm_list_init(&m->young);
	dlm_list_init(&m->kept);
	m->next_ticket = m->ticket_hi = 1;
	if (!dlm_picture_init(m) ||
		(m->waiting = dlm_alloc0(m, sizeof(DLmWaiter *) * (config->nrequesters + 1))) == NULL ||
		(m->asks = dlm_alloc0(m, sizeof(struct DLmAsk) * (config->nrequesters + 1))) == NULL ||
		(m->part_locks = dlm_alloc0(m, sizeof(DLmLock *) * DLM_MAX_PARTS)) == NULL ||
		(m->part_modes = dlm_alloc0(m, sizeof(int) * DLM_MAX_PARTS)) == NULL)
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
	DLmHolderExtra *x = NULL;
	size_t		len;

	if (m->broken)
		return DLM_ERR_NO_MEMORY;
	if (row == NULL || row->name == NULL || row->mode < 0 || row->mode >= DLOCK_NMODES ||
		row->count < 1 || row->ttl_us < 0 || row->kept < 0 || row->kept > row->count)
		return DLM_ERR_BAD_REQUEST;
	/* a leader (16): a named EX holder of a flat name, one level */
	if (row->value != NULL &&
		(row->mode != DLOCK_MODE_EX || row->implied || row->count != 1 || row->capacity != 0 ||
		 row->name[0] == '/' || dlm_bounded_len(row->value, DLOCK_MAX_VALUE_LEN) > DLOCK_MAX_VALUE_LEN))
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
		dlock_check_owner(row->owner_key, dlm_bounded_len(row->owner_key, DLOCK_MAX_OWNER_LEN)) != DLOCK_CHECK_OK)
		return DLM_ERR_BAD_OWNER;
	o = dlm_owner_get(m, row->owner_key, row->owner_key ? 0 : row->pid,
				  row->owner_key ? 0 : row->backend_start);
	if (o && !dlm_owner_in_use(o))
		o->role = row->role;
	l = o ? dlm_lock_get(m, row->name, len) : NULL;
	if (l == NULL)
		return DLM_ERR_NO_MEMORY;
	if (row->implied ? dlm_implied_holder(m, l, o, row->mode) != NULL : dlm_named_holder(m, l, o) != NULL)
		return DLM_ERR_BAD_REQUEST;
	if (dlm_lock_in_use(l) ? (l->capacity != row->capacity || l->election != (row->value != NULL)) : false)
		return DLM_ERR_CAPACITY;
	if (row->capacity > 0 && (int64_t) l->permits_held + row->permits > row->capacity)
		return DLM_ERR_CAPACITY;
	l->capacity = row->capacity;
	l->election = row->value != NULL;
	h = dlm_holder_add(m, l, o, row->mode, row->implied, row->token, row->pid,
				   row->backend_start, o->key ? o->role : row->role, row->granted_at);
	if (h == NULL)
		return DLM_ERR_NO_MEMORY;
	if ((row->value || (row->capacity > 0 && row->permits != 0) ||
		 (row->kept > 0 && !row->implied)) && (x = dlm_holder_extra(m, h)) == NULL)
		return DLM_ERR_NO_MEMORY;
	if (row->value && (x->value = dlm_value_copy(m, row->value)) == NULL)
		return DLM_ERR_NO_MEMORY;
	if (row->capacity > 0 && row->permits != 0)
		x->permits = x->stored_permits = row->permits;	/* as stored */
	l->permits_held += dlm_holder_permits(h);
	h->count = row->count;
	if (row->kept > 0 && !row->implied)
		x->kept = row->kept;
	h->ttl_us = row->ttl_us;
	h->expires_at = row->expires_at;
	if (h->expires_at != 0 && !dlm_heap_add(&m->leases, &m->mem, h))
		return DLM_ERR_NO_MEMORY;
	/* as stored: nothing to write */
	h->p.stored = true;
	h->p.dirty = false;
	if (row->token >= m->next_ticket)
	{
		/* tokens stay unique even if the stored counter was behind */
		m->next_ticket = row->token;
		(void) dlm_take_ticket(m);
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
	if (rows == NULL || n < 1 || n > DLM_MAX_PARTS)
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
							  dlm_bounded_len(row->owner_key, DLOCK_MAX_OWNER_LEN)) != DLOCK_CHECK_OK)
			return DLM_ERR_BAD_OWNER;
		nnamed += !row->implied;
		if (row->capacity != 0 &&
			(n != 1 || row->capacity < 0 || row->permits < 1 || row->permits > row->capacity ||
			 row->mode != DLOCK_MODE_NL || row->implied || row->name[0] == '/'))
			return DLM_ERR_BAD_SEMAPHORE;
		if (row->value != NULL &&
			(n != 1 || row->mode != DLOCK_MODE_EX || row->implied || row->capacity != 0 ||
			 row->name[0] == '/' || dlm_bounded_len(row->value, DLOCK_MAX_VALUE_LEN) > DLOCK_MAX_VALUE_LEN))
			return DLM_ERR_BAD_ELECTION;
		{
			DLmLock    *l = dlm_lock_find(m, row->name, len);

			if (l && dlm_lock_in_use(l) &&
				(l->capacity != row->capacity || l->election != (row->value != NULL)))
				return DLM_ERR_CAPACITY;
		}
	}
	if (nnamed < 1 || nnamed > DLOCK_MAX_MULTI || rows[0].implied)
		return DLM_ERR_BAD_REQUEST;
	o = dlm_owner_get(m, rows[0].owner_key, 0, 0);
	if (o == NULL)
		return DLM_ERR_NO_MEMORY;
	if (!dlm_owner_in_use(o))
		o->role = rows[0].role;
	if (n > 1 && (g = dlm_group_new(m, n)) == NULL)
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
		DLmLock    *l = dlm_lock_get(m, row->name, strlen(row->name));
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
		if (!dlm_lock_in_use(l))
		{
			l->capacity = row->capacity;
			l->election = row->value != NULL;
		}
		/* its own ticket, not the counter's */
		if (row->ticket >= m->next_ticket)
		{
			m->next_ticket = row->ticket;
			(void) dlm_take_ticket(m);
		}
		w = dlm_enqueue(m, &r, o, l, NULL, row->mode, row->implied, row->since);
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
	dlm_kept_insert(m, first);
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

		if (!dlm_list_empty(&l->line->waiters) || !dlm_list_empty(&l->line->converts))
			dlm_scan_later(m, l);
	}
	dlm_drain(m, now);
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
			dlm_holder_remove(m, DLM_CONTAINER(DLmHolder, owner_link, dlm_list_head(&o->holders)));
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
			dlm_holder_changed(m, h);
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
		for (int i = 0; i < dlm_request_nparts(first); i++)
		{
			DLmWaiter  *w = dlm_request_part(first, i);

			w->kept_until = until;
			w->p.dirty = true;
			dlm_touch_waiter(m, w);
		}
		m->durable = true;
		n++;
	}
	return n;
}
