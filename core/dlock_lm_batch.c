/* SPDX-License-Identifier: PostgreSQL */
/*
 * dlock_lm_batch.c
 *		The batch (core/README section 9): what the events since the last
 *		dlm_settle leave for the adapter to store and announce -- the rows
 *		of the holders and waiters they touched, the ticket counter, the
 *		locks announced (8), the elections whose leader changed (16) -- and
 *		dlm_settle, which frees what left the picture.
 *
 * Interface (dlock_lm_int.h):
 *		dlm_touch_holder, dlm_touch_waiter	a row to write (once per batch)
 *		dlm_holder_changed		a holder's row to update; durable for a key
 *		dlm_take_ticket			the next ticket, a new block when passed
 *		dlm_leader_changed		an election's leader or value changed
 *		dlm_value_copy, dlm_value_free	a leader's or a campaign's value
 * Interface (dlock_lm.h): dlm_touched_holder, dlm_touched_waiter,
 * dlm_counter_dirty, dlm_batch_durable, dlm_notified_lock,
 * dlm_leader_change, dlm_settle.
 */
#include "dlock_lm_int.h"

#include <string.h>

/* ---------------------------------------------------------------------
 * The batch's bookkeeping (9)
 * --------------------------------------------------------------------- */

void
dlm_touch_holder(DLockManager *m, DLmHolder *h)
{
	if (h->p.listed)
		return;
	h->p.listed = true;
	dlm_vec_push(m, &m->touched_h, h);
}

void
dlm_touch_waiter(DLockManager *m, DLmWaiter *w)
{
	if (w->p.listed)
		return;
	w->p.listed = true;
	dlm_vec_push(m, &m->touched_w, w);
}

/* A leader's or a campaign's value (16), in the manager's memory. */
char *
dlm_value_copy(DLockManager *m, const char *value)
{
	size_t		len = strlen(value);
	char	   *copy = dlm_alloc0(m, len + 1);

	if (copy)
		memcpy(copy, value, len);
	return copy;
}

void
dlm_value_free(DLockManager *m, char *value)
{
	if (value)
		dlm_mem_free(m, value, strlen(value) + 1);
}

/* An election's leader or its value changed (16): announce it, once. */
void
dlm_leader_changed(DLockManager *m, DLmLock *l)
{
	if (!l->election || l->leader_listed)
		return;
	l->leader_listed = true;
	dlm_vec_push(m, &m->leaders, l);
}

/* The row must be updated; what an owner key holds must survive a crash. */
void
dlm_holder_changed(DLockManager *m, DLmHolder *h)
{
	h->p.dirty = true;
	if (h->owner->key)
		m->durable = true;
	dlm_touch_holder(m, h);
}

int64_t
dlm_take_ticket(DLockManager *m)
{
	int64_t		t = m->next_ticket++;

	if (m->next_ticket > m->ticket_hi)
	{
		m->ticket_hi = m->next_ticket + m->cfg.ticket_reserve;
		m->counter_dirty = true;
	}
	return t;
}

/* ---------------------------------------------------------------------
 * The batch's output (9)
 * --------------------------------------------------------------------- */

DLmHolder *
dlm_touched_holder(const DLockManager *m, size_t i)
{
	return i < m->touched_h.count ? m->touched_h.items[i] : NULL;
}

DLmWaiter *
dlm_touched_waiter(const DLockManager *m, size_t i)
{
	return i < m->touched_w.count ? m->touched_w.items[i] : NULL;
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
dlm_notified_lock(const DLockManager *m, size_t i)
{
	return i < m->notify.count ? m->notify.items[i] : NULL;
}

DLmLock *
dlm_leader_change(const DLockManager *m, size_t i)
{
	return i < m->leaders.count ? m->leaders.items[i] : NULL;
}

void
dlm_settle(DLockManager *m)
{
	DLmHolder  *h;
	DLmWaiter  *w;
	DLmLock    *l;
	DLmOwner   *o;

	if (m->broken)
		return;
	while ((h = dlm_vec_pop(&m->touched_h)) != NULL)
	{
		if (h->p.dead)
		{
			if (h->extra)
			{
				dlm_value_free(m, h->extra->value);
				dlm_mem_free(m, h->extra, sizeof(DLmHolderExtra));
			}
			dlm_mem_free(m, h, sizeof(DLmHolder));
		}
		else
		{
			h->p.stored = true;
			h->p.dirty = false;
			h->p.listed = false;
			h->stored_token = h->token;
			h->stored_mode = h->mode;
			if (h->extra)
				h->extra->stored_permits = h->extra->permits;
		}
	}
	dlm_vec_done(m, &m->touched_h);
	while ((w = dlm_vec_pop(&m->touched_w)) != NULL)
	{
		if (w->p.dead)
		{
			dlm_value_free(m, w->value);
			dlm_mem_free(m, w, sizeof(DLmWaiter));
		}
		else
		{
			w->p.stored = true;
			w->p.dirty = false;
			w->p.listed = false;
		}
	}
	dlm_vec_done(m, &m->touched_w);
	while ((l = dlm_vec_pop(&m->notify)) != NULL)
		l->notify_listed = false;
	dlm_vec_done(m, &m->notify);
	while ((l = dlm_vec_pop(&m->leaders)) != NULL)
		l->leader_listed = false;
	dlm_vec_done(m, &m->leaders);
	while ((l = dlm_vec_pop(&m->empty_locks)) != NULL)
	{
		l->maybe_empty = false;
		if (!dlm_lock_in_use(l) && !l->scan_listed)
		{
			dlm_hash_remove(&m->locks, &l->hash_node);
			if (l->line != &dlm_no_line)
				dlm_mem_free(m, l->line, sizeof(DLmLine));
			dlm_mem_free(m, l, dlm_lock_size(l->name_len));
		}
	}
	dlm_vec_done(m, &m->empty_locks);
	while ((o = dlm_vec_pop(&m->empty_owners)) != NULL)
	{
		o->maybe_empty = false;
		if (dlm_list_empty(&o->holders) && dlm_list_empty(o->waiters))
		{
			dlm_hash_remove(&m->owners, &o->hash_node);
			if (o->waiters != &dlm_no_waiters)
				dlm_mem_free(m, o->waiters, sizeof(DLmList));
			dlm_mem_free(m, o, dlm_owner_size(o->key));
		}
	}
	dlm_vec_done(m, &m->empty_owners);
	m->counter_dirty = false;
	m->durable = false;
}
