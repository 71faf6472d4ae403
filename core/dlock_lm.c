/* SPDX-License-Identifier: PostgreSQL */
/*
 * dlock_lm.c
 *		The lock manager's entry points: the events of core/README section 2
 *		and the requests they carry (sections 3-5, 12, 13), checked and
 *		decided in the order the README gives.
 *
 * Interface (dlock_lm.h):
 *		dlm_request				validation, the owner's role (12), the names'
 *								kinds (15.2), a kept place resumed (14.3),
 *								the limits (13), then the request itself
 *		dlm_withdraw			waiting requests canceled, or kept (14.2)
 *		dlm_session_end			a session's waiting request and locks end
 *		dlm_expire				leases and kept places run out (14.6)
 *		dlm_next_expiry			when dlm_expire has something to do
 *		dlm_queue_rows_due, dlm_next_queue_row, dlm_set_queue_row_delay
 *								waiters' rows when they are due (9)
 *		dlm_set_limits			the limits of section 13
 *
 * The rest of the manager is split by concern over dlock_lm_int.h (the
 * manager's state and the functions the files share; core/README lists
 * the files).  Every event runs to completion here: its answers, then the
 * grant pass over what it freed (dlm_drain, dlock_lm_grant.c), before it
 * returns.
 */
#include "dlock_lm_int.h"

#include <string.h>

/* ---------------------------------------------------------------------
 * Requests
 * --------------------------------------------------------------------- */

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

		locks[i] = dlm_lock_get(m, r->names[i], strlen(r->names[i]));
		if (locks[i] == NULL)
			return;
		if (!dlm_lock_in_use(locks[i]))
		{
			locks[i]->capacity = 0; /* a lock now (15.2) */
			locks[i]->election = false;
		}
		own = dlm_named_holder(m, locks[i], o);
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
			now_ok = now_ok && (dlm_own_covers(m, locks[i], o, r->mode) ||
								dlm_grantable_now(m, locks[i], o, r->mode));
		/*
		 * Intention parts for every name, held ones too: if the holder goes
		 * before the request is granted, its intentions must be checked
		 * like anyone's (a part covered by its own intentions passes).
		 */
		if (intention != DLOCK_MODE_INVALID)
		{
			size_t		lens[DLOCK_MAX_PATH_DEPTH];
			int			n = dlm_ancestors(r->names[i], lens);

			for (int j = 0; j < n; j++)
			{
				DLmLock    *a = dlm_lock_get(m, r->names[i], lens[j]);

				if (a == NULL)
					return;
				m->part_locks[nparts] = a;
				m->part_modes[nparts++] = intention;
				now_ok = now_ok && (dlm_own_covers(m, a, o, intention) ||
									dlm_grantable_now(m, a, o, intention));
			}
		}
	}

	if (now_ok)
	{
		DLmHolder  *h = NULL;

		for (int i = 0; i < r->nnames; i++)
		{
			h = dlm_take_name(m, locks[i], o, r->mode, r->ttl_us, r->pid, r->session_start, dlm_request_role(o, r), now,
						  true, false);
			if (h == NULL || m->broken)
				return;
			m->tokens[i] = h->token;
		}
		if (r->op == DLOCK_OP_ACQUIRE_ALL)
			dlm_answer_tokens(m, r->requester, r->nnames);
		else
			dlm_answer_granted(m, r->requester, h);
	}
	else if (r->op == DLOCK_OP_TRY)
		dlm_answer(m, r->requester, DLOCK_STATUS_REFUSED, 0, 0, 0);
	else if (r->nnames == 1 && nparts == 0)
	{
		DLmWaiter  *w = dlm_enqueue(m, r, o, locks[0], NULL, r->mode, false, now);

		if (w)
			dlm_queued(m, w);
	}
	else
	{
		DLmGroup   *g = dlm_group_new(m, r->nnames + nparts);

		if (g == NULL)
			return;
		g->nnamed = r->nnames;
		for (int i = 0; i < r->nnames + nparts; i++)
		{
			bool		named = i < r->nnames;
			DLmWaiter  *w = dlm_enqueue(m, r, o, named ? locks[i] : m->part_locks[i - r->nnames],
								   NULL, named ? r->mode : m->part_modes[i - r->nnames],
								   !named, now);

			if (w == NULL)
				return;
			w->group = g;
			w->request = g->parts[0] ? g->parts[0]->ticket : w->ticket;
			g->parts[g->nparts++] = w;
		}
		dlm_queued(m, g->parts[0]);
	}
}

/* 4.1 */
static void
do_release(DLockManager *m, const DLmRequest *r, DLmOwner *o, DLockTime now)
{
	for (int i = 0; i < r->nnames && !m->broken; i++)
	{
		DLmLock    *l = o ? dlm_lock_find(m, r->names[i], strlen(r->names[i])) : NULL;
		int64_t		kept = l ? dlm_release_kept(m, o, l) : 0;
		DLmHolder  *h = l ? dlm_named_holder(m, l, o) : NULL;

		if (h == NULL && kept != 0)
			dlm_answer(m, r->requester, DLOCK_STATUS_RELEASED, kept, 0, 0);
		else if (h == NULL)
			dlm_answer(m, r->requester, DLOCK_STATUS_NOT_HELD, 0, 0, 0);
		else if (h->count > 1)
		{
			h->count--;
			h->p.dirty = true;
			dlm_touch_holder(m, h);
			dlm_answer(m, r->requester, DLOCK_STATUS_RELEASED, h->token, 0, h->count);
		}
		else
		{
			dlm_answer(m, r->requester, DLOCK_STATUS_RELEASED, h->token, 0, 0);
			dlm_release_last(m, h, now);
		}
	}
}

/* 4.2 */
static void
do_renew(DLockManager *m, const DLmRequest *r, DLmOwner *o, DLockTime now)
{
	DLmLock    *l = o ? dlm_lock_find(m, r->names[0], strlen(r->names[0])) : NULL;
	DLmHolder  *h = l ? dlm_named_holder(m, l, o) : NULL;
	int64_t		ttl_us;

	if (h == NULL)
	{
		dlm_answer(m, r->requester, DLOCK_STATUS_NOT_HELD, 0, 0, 0);
		return;
	}
	ttl_us = r->ttl_us > 0 ? r->ttl_us : h->ttl_us;
	/* a lease taken before the limit was lowered renews within it */
	if (r->max_ttl_us > 0 && ttl_us > r->max_ttl_us)
		ttl_us = r->max_ttl_us;
	if (ttl_us > 0)
		dlm_holder_set_lease(m, h, ttl_us, now);
	dlm_answer(m, r->requester, DLOCK_STATUS_RENEWED, h->token, h->expires_at, h->count);
}

/* 5 */
static void
do_convert(DLockManager *m, const DLmRequest *r, DLmOwner *o, DLockTime now)
{
	DLmLock    *l = o ? dlm_lock_find(m, r->names[0], strlen(r->names[0])) : NULL;
	DLmHolder  *h = l ? dlm_named_holder(m, l, o) : NULL;
	int			to = dlock_intention_mode(r->mode);
	int			n = 0;
	bool		now_ok;

	if (h == NULL)
	{
		dlm_answer(m, r->requester, DLOCK_STATUS_NOT_HELD, 0, 0, 0);
		return;
	}
	if (l->capacity > 0 || l->election)
	{
		/* 15.2, 16.2 */
		dlm_answer_error(m, r->requester, l->election ? DLM_ERR_IS_ELECTION : DLM_ERR_IS_SEMAPHORE);
		return;
	}
	if (dlm_conversion_of(h))
	{
		dlm_answer_error(m, r->requester, DLM_ERR_CONVERSION_WAITING);
		return;
	}
	if (dlock_mode_covers(h->mode, r->mode))
	{
		/* weaker intentions are always compatible with the ones held */
		dlm_convert_now(m, h, r->mode, now);
		dlm_answer_granted(m, r->requester, h);
		dlm_grant_pass(m, l, now);
		return;
	}

	/*
	 * Up: when the intention changes, every ancestor is a part (one its
	 * owner covers now passes, but the cover may go before the grant).
	 */
	if (to != DLOCK_MODE_INVALID && to != dlock_intention_mode(h->mode))
	{
		size_t		lens[DLOCK_MAX_PATH_DEPTH];
		int			na = dlm_ancestors(l->name, lens);

		for (int i = 0; i < na; i++)
		{
			DLmLock    *a = dlm_lock_get(m, l->name, lens[i]);

			if (a == NULL)
				return;
			m->part_locks[n] = a;
			m->part_modes[n++] = to;
		}
	}
	{
		DLockModeMask converting = 0;

		for (int i = 0; i < DLOCK_NMODES; i++)
			if (l->line->nconverting[i] > 0)
				converting |= DLOCK_MODE_BIT(i);
		/* as if queued at the tail of the conversions and passed over (6) */
		now_ok = dlm_compatible(r->mode, dlm_others_held(m, l, o)) && dlm_compatible(r->mode, converting);
	}
	for (int i = 0; i < n; i++)
		now_ok = now_ok && (dlm_own_covers(m, m->part_locks[i], o, to) ||
							dlm_grantable_now(m, m->part_locks[i], o, to));
	if (now_ok)
	{
		dlm_convert_now(m, h, r->mode, now);
		dlm_answer_granted(m, r->requester, h);
		/* between incomparable modes (CW to PR) the old mode's conflicts go */
		dlm_grant_pass(m, l, now);
		return;
	}
	{
		DLmWaiter  *c = dlm_enqueue(m, r, o, l, h, r->mode, false, now);
		DLmGroup   *g;

		if (c == NULL)
			return;
		if (n > 0)
		{
			if ((g = dlm_group_new(m, n + 1)) == NULL)
				return;
			g->nnamed = 1;
			g->parts[g->nparts++] = c;
			c->group = g;
			for (int i = 0; i < n; i++)
			{
				DLmWaiter  *x = dlm_enqueue(m, r, o, m->part_locks[i], NULL, to, true, now);

				if (x == NULL)
					return;
				x->group = g;
				x->request = c->ticket;
				g->parts[g->nparts++] = x;
			}
		}
		dlm_queued(m, c);
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

	while (!dlm_list_empty(o->waiters) && !m->broken)
	{
		DLmWaiter  *w = DLM_CONTAINER(DLmWaiter, owner_link, dlm_list_head(o->waiters));
		DLmGroup   *g = w->group;

		if (g)
		{
			for (int i = 0; i < g->nparts; i++)
				n += !g->parts[i]->implied;
		}
		else
			n += !w->implied;
		if (w->requester != except)
			dlm_answer(m, w->requester, DLOCK_STATUS_WITHDRAWN, 0, 0, 0);
		dlm_request_remove(m, w);
	}
	while (!dlm_list_empty(&o->holders) && !m->broken)
	{
		DLmHolder  *h = DLM_CONTAINER(DLmHolder, owner_link, dlm_list_head(&o->holders));

		n += !h->implied;
		dlm_scan_later(m, h->lock);
		dlm_holder_remove(m, h);
	}
	dlm_note_empty_owner(m, o);
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
		(r->value == NULL || dlm_bounded_len(r->value, DLOCK_MAX_VALUE_LEN) > DLOCK_MAX_VALUE_LEN ||
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
		size_t		len = dlm_bounded_len(r->owner_key, DLOCK_MAX_OWNER_LEN);

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
		len = dlm_bounded_len(r->names[i], m->cfg.max_name_len);
		if (dlock_check_name(r->names[i], len, m->cfg.max_name_len) != DLOCK_CHECK_OK)
			return DLM_ERR_BAD_NAME;
		if (r->op == DLOCK_OP_ACQUIRE_ALL && i > 0 && strcmp(r->names[i - 1], r->names[i]) >= 0)
			return DLM_ERR_NOT_SORTED;
	}
	return DLM_OK;
}

/* A name's parts: itself and, for a path, its dlm_ancestors (13). */
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
	o = dlm_owner_find(m, r->owner_key, r->pid, r->session_start);
	for (int i = 0; i < r->nnames; i++)
	{
		size_t		len = strlen(r->names[i]);
		DLmLock    *l = o ? dlm_lock_find(m, r->names[i], len) : NULL;

		if (l == NULL || dlm_named_holder(m, l, o) == NULL)
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
	role = o && o->key && dlm_owner_in_use(o) ? o->role : r->role;
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
	dlm_drain(m, now);
	if (m->broken)
		dlm_answer_error(m, requester, DLM_ERR_NO_MEMORY);
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
			dlm_answer_error(m, r->requester, err);
		return err;
	}
	if (r->owner_key && !r->any_role)
	{
		o = dlm_owner_find(m, r->owner_key, 0, 0);
		if (o && dlm_owner_in_use(o) && o->role != r->role)
		{
			dlm_answer_error(m, r->requester, DLM_ERR_NOT_YOURS);
			return DLM_ERR_NOT_YOURS;
		}
	}
	/* 15.2: a name in use is a lock or a semaphore of one capacity */
	if (r->op == DLOCK_OP_ACQUIRE || r->op == DLOCK_OP_TRY || r->op == DLOCK_OP_ACQUIRE_ALL)
	{
		for (int i = 0; i < r->nnames; i++)
		{
			DLmLock    *l = dlm_lock_find(m, r->names[i], strlen(r->names[i]));

			err = DLM_OK;
			if (l == NULL || !dlm_lock_in_use(l))
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
				dlm_answer_error(m, r->requester, err);
				return err;
			}
		}
	}
	/* 14.3: a kept place resumed adds nothing a limit counts */
	if ((r->op == DLOCK_OP_ACQUIRE || r->op == DLOCK_OP_ACQUIRE_ALL) && r->owner_key &&
		!m->broken && (o = dlm_owner_find(m, r->owner_key, 0, 0)) != NULL)
	{
		/* a semaphore's place: its permits (15); the kind was checked above */
		DLmWaiter  *place = dlm_kept_place_of(m, o, r->names, r->nnames,
										  r->capacity > 0 ? DLOCK_MODE_NL : r->mode,
										  r->capacity > 0 ? r->permits : 0);

		if (place)
		{
			dlm_resume(m, r, place);
			after_event(m, r->requester, now);
			return m->broken ? DLM_ERR_NO_MEMORY : DLM_OK;
		}
	}
	if ((r->op == DLOCK_OP_ACQUIRE || r->op == DLOCK_OP_TRY || r->op == DLOCK_OP_ACQUIRE_ALL) &&
		(err = check_limits(m, r)) != DLM_OK)
	{
		dlm_answer_error(m, r->requester, err);
		return err;
	}
	if (m->broken)
	{
		dlm_answer_error(m, r->requester, DLM_ERR_NO_MEMORY);
		return DLM_ERR_NO_MEMORY;
	}
	if (r->op == DLOCK_OP_ACQUIRE || r->op == DLOCK_OP_TRY || r->op == DLOCK_OP_ACQUIRE_ALL)
	{
		o = dlm_owner_get(m, r->owner_key, r->pid, r->session_start);
		if (o && !dlm_owner_in_use(o))
			o->role = r->role;	/* taken by the role that fills it */
	}
	else
		o = dlm_owner_find(m, r->owner_key, r->pid, r->session_start);
	if (!m->broken)
	{
		switch (r->op)
		{
			case DLOCK_OP_ACQUIRE:
			case DLOCK_OP_TRY:
			case DLOCK_OP_ACQUIRE_ALL:
				if (r->capacity > 0 || r->election)
					dlm_do_held_once(m, r, o, now);
				else
					do_acquire(m, r, o, now);
				break;
			case DLOCK_OP_PROCLAIM:
				dlm_do_proclaim(m, r, o);
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
				dlm_answer(m, r->requester, DLOCK_STATUS_COUNT, 0, 0,
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

			dlm_detach(m, first, now);
			dlm_answer(m, q, DLOCK_STATUS_KEPT, first->ticket, first->kept_until, 0);
			continue;
		}
		if (m->waiting[q])
			dlm_request_remove(m, m->waiting[q]);
		dlm_answer(m, q, DLOCK_STATUS_CANCELED, 0, 0, 0);
	}
	dlm_drain(m, now);
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
			dlm_detach(m, m->waiting[requester], now);	/* 14.2 */
		else
			dlm_request_remove(m, m->waiting[requester]);
	}
	o = dlm_owner_find(m, NULL, pid, session_start);
	if (o || (requester >= 0 && requester < m->cfg.nrequesters && m->waiting[requester]))
		m->stats.session_cleanups++;
	if (o)
		(void) end_owner(m, o, requester);
	dlm_drain(m, now);
}

int
dlm_expire(DLockManager *m, DLockTime now, int max)
{
	int			n = 0;

	m->now = now;
	while (n < max && !m->broken)
	{
		DLmHolder  *h = dlm_heap_first(&m->leases);
		DLmWaiter  *w = dlm_kept_first(m);

		/* leases and kept places, soonest first; a lease first on a tie */
		if (h && h->expires_at <= now && (w == NULL || h->expires_at <= w->kept_until))
		{
			dlm_release_last(m, h, now);
			m->stats.expiries++;
		}
		else if (w && w->kept_until <= now)
			dlm_request_remove(m, w);	/* 14.6 */
		else
			break;
		n++;
	}
	dlm_drain(m, now);
	return n;
}

DLockTime
dlm_next_expiry(const DLockManager *m)
{
	DLmHolder  *h = dlm_heap_first(&m->leases);
	DLmWaiter  *w = dlm_kept_first(m);

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
		dlm_touch_waiter(m, w);
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
