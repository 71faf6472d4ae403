/* SPDX-License-Identifier: PostgreSQL */
/*
 * dlock_lm_answer.c
 *		Answers and the statistics counted from them (core/README 17): every
 *		answer goes through dlm_count_answer on its way to the caller's
 *		callback, so each one counts once, whichever rule made it.
 *
 * Interface (dlock_lm_int.h):
 *		dlm_answer, dlm_answer_error, dlm_answer_granted, dlm_answer_tokens
 *								an answer to a requester (none to DLM_NOBODY)
 *		dlm_count_answer		the manager's own answer callback (dlm_create)
 * Interface (dlock_lm.h): dlm_error_message, dlm_stats, dlm_stats_reset,
 * dlm_counters_batch, dlm_sizes, dlm_wait_bounds_us.
 */
#include "dlock_lm_int.h"

#include <string.h>

/* ---------------------------------------------------------------------
 * Answers
 * --------------------------------------------------------------------- */

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

void
dlm_answer(DLockManager *m, int requester, DLockStatus status, int64_t token,
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

void
dlm_answer_error(DLockManager *m, int requester, DLmError err)
{
	DLmAnswer	a;

	if (requester < 0)
		return;
	memset(&a, 0, sizeof(a));
	a.status = DLOCK_STATUS_ERROR;
	a.error = err;
	m->cfg.answer(m->cfg.answer_arg, requester, &a);
}

void
dlm_answer_granted(DLockManager *m, int requester, const DLmHolder *h)
{
	dlm_answer(m, requester, DLOCK_STATUS_GRANTED, h->token, h->expires_at, h->count);
}

void
dlm_answer_tokens(DLockManager *m, int requester, int n)
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
 * Statistics (17)
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
void
dlm_count_answer(void *arg, int requester, const DLmAnswer *a)
{
	DLockManager *m = arg;
	DLmStats   *st = &m->stats;
	struct DLmAsk *k;
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
