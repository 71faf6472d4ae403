/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * dlock_store_batch.c
 *		Writing a batch of the lock manager's decisions to the dlock tables,
 *		and telling afterwards whether a batch whose commit went unanswered
 *		was applied.
 *
 * Interface: store_write_batch, store_finish_batch, store_batch_applied,
 * store_rollback (dlock_store.h); kept_clear, kept_add, stray_reset,
 * stray_add, rows_close (dlock_store_int.h).
 *
 * A batch is a few set-based statements: the changed holder rows and
 * waiter rows each go as multi-row INSERT ... ON DUPLICATE KEY UPDATE
 * statements and DELETE ... WHERE key IN (...), in chunks of 64, 32, ... 1
 * rows (a few InnoDB rows leaving: a DELETE each, see rows_flush); the
 * durable rows (InnoDB) in one transaction.  With a binary log
 * they go over the store's connection (one prepared statement per chunk
 * size, kept, every value a bound parameter), where a semi-synchronous
 * replica acknowledges them.  On a server without one every row goes over
 * the local connection instead (dlock_store_local.c: a statement there runs
 * in this thread, no wake-up of a server thread - a flushed commit costs
 * only its flush - but is not binlogged).  That
 * connection takes text only: the same statements are prepared there once
 * (PREPARE) and run with EXECUTE ... USING, each value written as a decimal
 * integer or a hex literal X'...' (text_value), so nothing of a name, key
 * or value is ever part of a statement's text as it is - and the statement
 * is not parsed again, which costs more than the socket saves.  (JSON_TABLE
 * would need one statement per kind, but cost three times as much per
 * statement.)
 *
 * A batch is written in three phases, so that a reader of dlock.held never
 * sees a leaving holder beside the one that follows it (whichever tables
 * they are in):
 *	1. MEMORY rows that leave: session holders that are gone, waiting rows
 *	2. the durable part (InnoDB), committed
 *	3. MEMORY rows that arrive or change (and the old row of a session
 *	   holder whose token changed: after, so a failure in 2 loses no lock)
 * Phase 1 and 3 are upserts and deletes by key: after a lost connection
 * they are simply written again.
 *
 * Everything here is the manager thread's alone.
 */
#define _GNU_SOURCE
#include "dlock_store_int.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <errmsg.h>

#include "dlock_access.h"
#include "dlock_sessions.h"
#include "dlock_store_local.h"

/* The kinds of rows a batch writes, by phase. */
enum
{
	/* 1 */
	R_SESSION_GONE,				/* dlock.held_session: session holders */
	R_SESSION_WEAKER,			/* ... that now conflict with less */
	R_LIVE_GONE,				/* dlock.queue_live: waiting calls */
	/* 2 */
	R_KEYED_DELETE,				/* dlock.held_keyed: owner-keyed holders */
	R_KEYED_UPSERT,
	R_KEPT_DELETE,				/* dlock.queue_kept: kept places */
	R_KEPT_UPSERT,
	/* 3 */
	R_SESSION_MOVED,
	R_SESSION_UPSERT,
	R_LIVE_UPSERT,
	NR
};

#define R_FIRST_DURABLE R_KEYED_DELETE
#define R_FIRST_AFTER R_SESSION_MOVED

#define HELD_NCOL 16
#define QUEUE_NCOL 18
#define MAX_CHUNK 64
#define NCHUNK 7				/* 1, 2, 4, ... 64 rows */

static const int row_ncol[NR] = {
	[R_SESSION_GONE] = 1, [R_SESSION_WEAKER] = HELD_NCOL, [R_LIVE_GONE] = 1,
	[R_KEYED_DELETE] = 1, [R_KEYED_UPSERT] = HELD_NCOL,
	[R_KEPT_DELETE] = 1, [R_KEPT_UPSERT] = QUEUE_NCOL,
	[R_SESSION_MOVED] = 1, [R_SESSION_UPSERT] = HELD_NCOL, [R_LIVE_UPSERT] = QUEUE_NCOL,
};

#define HELD_TAIL \
	" ON DUPLICATE KEY UPDATE name = VALUES(name), owner = VALUES(owner), " \
	"conn_id = VALUES(conn_id), session_start = VALUES(session_start), " \
	"mode = VALUES(mode), `count` = VALUES(`count`), granted_us = VALUES(granted_us), " \
	"expires_us = VALUES(expires_us), ttl_us = VALUES(ttl_us), " \
	"implied = VALUES(implied), account = VALUES(account), kept = VALUES(kept), " \
	"capacity = VALUES(capacity), permits = VALUES(permits), value = VALUES(value)"
#define QUEUE_TAIL \
	" ON DUPLICATE KEY UPDATE name = VALUES(name), owner = VALUES(owner), " \
	"conn_id = VALUES(conn_id), session_start = VALUES(session_start), " \
	"mode = VALUES(mode), since_us = VALUES(since_us), timeout_us = VALUES(timeout_us), " \
	"ttl_us = VALUES(ttl_us), conversion = VALUES(conversion), " \
	"implied = VALUES(implied), account = VALUES(account), keep = VALUES(keep), " \
	"kept_until_us = VALUES(kept_until_us), request = VALUES(request), " \
	"capacity = VALUES(capacity), permits = VALUES(permits), value = VALUES(value)"

static const char *const row_head[NR] = {
	[R_KEYED_DELETE] = "DELETE FROM dlock.held_keyed WHERE token IN ",
	[R_KEYED_UPSERT] = "INSERT INTO dlock.held_keyed (" HELD_COLS ") VALUES ",
	[R_KEPT_DELETE] = "DELETE FROM dlock.queue_kept WHERE ticket IN ",
	[R_KEPT_UPSERT] = "INSERT INTO dlock.queue_kept (" QUEUE_COLS ") VALUES ",
	[R_SESSION_GONE] = "DELETE FROM dlock.held_session WHERE token IN ",
	[R_SESSION_WEAKER] = "INSERT INTO dlock.held_session (" HELD_COLS ") VALUES ",
	[R_LIVE_GONE] = "DELETE FROM dlock.queue_live WHERE ticket IN ",
	[R_SESSION_MOVED] = "DELETE FROM dlock.held_session WHERE token IN ",
	[R_SESSION_UPSERT] = "INSERT INTO dlock.held_session (" HELD_COLS ") VALUES ",
	[R_LIVE_UPSERT] = "INSERT INTO dlock.queue_live (" QUEUE_COLS ") VALUES ",
};

static const char *const row_tail[NR] = {
	[R_KEYED_DELETE] = "",
	[R_KEYED_UPSERT] = HELD_TAIL,
	[R_KEPT_DELETE] = "",
	[R_KEPT_UPSERT] = QUEUE_TAIL,
	[R_SESSION_GONE] = "",
	[R_SESSION_WEAKER] = HELD_TAIL,
	[R_LIVE_GONE] = "",
	[R_SESSION_MOVED] = "",
	[R_SESSION_UPSERT] = HELD_TAIL,
	[R_LIVE_UPSERT] = QUEUE_TAIL,
};

typedef struct Rows
{
	Param	   *p;
	int			n;				/* rows */
	int			cap;			/* rows */
	bool		oom;
} Rows;

/*
 * A batch whose outcome is unknown - its connection lost during the COMMIT
 * or during its one autocommit statement - may have been applied.  One of
 * its changes, chosen before it ran, tells: the batch is one transaction,
 * so that change is there exactly when all of them are.
 */
typedef enum ProbeKind
{
	PROBE_NONE,
	PROBE_HELD_PRESENT,			/* key, with count, expires, kept, mode */
	PROBE_HELD_ABSENT,
	PROBE_QUEUE_PRESENT,		/* key, with kept_until (in expires), keep (in kept) */
	PROBE_QUEUE_ABSENT,
	PROBE_COUNTER				/* hi in key */
} ProbeKind;

typedef struct Probe
{
	ProbeKind	kind;
	long long	key;
	long long	count;
	long long	expires;
	long long	kept;
	long long	mode;
} Probe;

static struct
{
	Rows		rows[NR];		/* of this batch, by kind */
	MYSQL_STMT *stmts[NR][NCHUNK];	/* by kind and chunk size */
	MYSQL_BIND *binds;			/* MAX_CHUNK * QUEUE_NCOL */
	bool		in_transaction; /* a batch's BEGIN was sent */
	Probe		probe;			/* tells whether the batch was applied */
	bool		kept_noted;		/* this batch's kept rows are in the kept set */
	long long	stray[64];		/* session rows the load refused */
	int			nstray;
	char	   *text;			/* a local statement being rendered */
	size_t		text_len,
				text_cap;
	bool		text_oom;
}			batch;

/*
 * Tickets whose rows are in dlock.queue_kept: a kept place resumed by a
 * call without keep_place moves to dlock.queue_live, so where a waiter's
 * row is cannot be told from the waiter alone.  Open addressing; 0 empty,
 * -1 deleted (tickets are positive).
 */
static struct
{
	long long  *set;
	size_t		cap,
				used;
}			kept;

static bool kept_has(long long t);
static void kept_del(long long t);
static void kept_note(void);
static void probe_choose(DLockManager *m);
static bool outcome_unknown(unsigned int no);
static bool session_row_weaker(const DLmHolder *h);
static bool swap_pays(int gone, int upsert, int new_row);
static int	row_swap(int q, int gone, int upsert, int new_row, DlockErr *err);
static int	batch_run(int q, Param *p, int np, unsigned long long *affected, DlockErr *err);
static int	batch_execute(int kind, int c, Param *p, int np, MYSQL_BIND *b,
						  unsigned long long *affected, DlockErr *err);
static int	batch_control(const char *what, DlockErr *err);
static void held_row(int kind, const DLmHolder *h);
static void queue_row(int kind, const DLmWaiter *w);
static void key_row(int kind, long long key);
static Param *row_add(int kind);
static int	rows_flush(int kind, DlockErr *err);
static MYSQL_STMT *row_stmt(int kind, int c, DlockErr *err);
static void p_int(Param *p, long long v);
static void p_int_or_null(Param *p, long long v);
static void p_str(Param *p, const char *s);
static void text_add(const char *s, size_t n);
static void text_value(const Param *p);
static int	local_run(unsigned long long *affected, DlockErr *err);
static bool local_refused(DlockErr *err);
static int	rows_after(DlockErr *err);
static int	local_prepare(const char *name, int slot, int kind, int q, DlockErr *err);
static int	local_execute(const char *name, const Param *p, int np,
						  unsigned long long *affected, DlockErr *err);
static char *row_sql(int kind, int c, DlockErr *err);
static size_t kept_slot(long long t);

/* Write the batch decided on the picture m (dlock_store.h: what it returns). */
int
store_write_batch(DLockManager *m, DlockErr *err)
{
	int64_t		hi;
	int			new_session_row = -1;	/* a new row among the upserts */
	int			new_live_row = -1;
	int			new_keyed_row = -1;
	DLmHolder  *h;
	DLmWaiter  *w;

	store.last_errno = 0;
	if (store.conn == NULL)
	{
		dlock_set_err(err, DLOCK_ER_UNKNOWN, "lock store: not connected");
		return -1;
	}
	if (store.local_rows)
		local_renew();			/* between batches: no transaction open */
	for (int k = 0; k < NR; k++)
	{
		batch.rows[k].n = 0;
		batch.rows[k].oom = false;
	}
	batch.kept_noted = false;
	for (int i = 0; i < batch.nstray; i++)
		key_row(R_SESSION_GONE, batch.stray[i]);

	for (size_t h_i = 0; (h = dlm_touched_holder(m, h_i)) != NULL; h_i++)
	{
		bool		keyed = h->owner->key != NULL;

		if (h->p.dead)
		{
			if (h->p.stored)
				key_row(keyed ? R_KEYED_DELETE : R_SESSION_GONE, h->stored_token);
		}
		else if (!h->p.stored || h->p.dirty)
		{
			/* a new token (a conversion): the row moves to its new key */
			if (h->p.stored && h->stored_token != h->token)
				key_row(keyed ? R_KEYED_DELETE : R_SESSION_MOVED, h->stored_token);
			held_row(keyed ? R_KEYED_UPSERT :
					 session_row_weaker(h) ? R_SESSION_WEAKER : R_SESSION_UPSERT, h);
			if (!keyed && !h->p.stored && new_session_row < 0 && !batch.rows[R_SESSION_UPSERT].oom)
				new_session_row = batch.rows[R_SESSION_UPSERT].n - 1;
			if (keyed && !h->p.stored && new_keyed_row < 0 && !batch.rows[R_KEYED_UPSERT].oom)
				new_keyed_row = batch.rows[R_KEYED_UPSERT].n - 1;
		}
	}
	for (size_t w_i = 0; (w = dlm_touched_waiter(m, w_i)) != NULL; w_i++)
	{
		bool		in_kept = w->p.stored && kept_has(w->ticket);

		if (w->p.dead)
		{
			if (w->p.stored)
				key_row(in_kept ? R_KEPT_DELETE : R_LIVE_GONE, w->ticket);
		}
		else if (!w->p.stored || w->p.dirty)
		{
			/* a kept place is durable; a waiting call's row is not */
			if (in_kept && !w->keep)
				key_row(R_KEPT_DELETE, w->ticket);
			if (!in_kept && w->p.stored && w->keep)
				key_row(R_LIVE_GONE, w->ticket);
			queue_row(w->keep ? R_KEPT_UPSERT : R_LIVE_UPSERT, w);
			if (!w->keep && !w->p.stored && new_live_row < 0 && !batch.rows[R_LIVE_UPSERT].oom)
				new_live_row = batch.rows[R_LIVE_UPSERT].n - 1;
		}
	}
	/*
	 * Phase 2, the durable part: one statement commits on its own
	 * (autocommit: one round trip), more run in a transaction.  One owner
	 * key's row leaving and another's arriving is one UPDATE (a batch of a
	 * release and a grant then needs no BEGIN and COMMIT round trips).
	 */
	{
		bool		keyed_swap = swap_pays(R_KEYED_DELETE, R_KEYED_UPSERT, new_keyed_row);
		int			nstatements = dlm_counter_dirty(m, NULL) ? 1 : 0;

		for (int k = R_FIRST_DURABLE; k < R_FIRST_AFTER; k++)
			nstatements += __builtin_popcount((unsigned) batch.rows[k].n);
		if (keyed_swap)			/* the UPDATE stands for the delete and one upsert */
			nstatements += __builtin_popcount((unsigned) batch.rows[R_KEYED_UPSERT].n - 1) -
				__builtin_popcount((unsigned) batch.rows[R_KEYED_UPSERT].n);
		/* phase 1: a failure here changed nothing durable */
		if (local_refused(err))
			return -1;
		if (nstatements == 0 &&
			((swap_pays(R_SESSION_GONE, R_SESSION_UPSERT, new_session_row) &&
			  row_swap(Q_SESSION_SWAP, R_SESSION_GONE, R_SESSION_UPSERT,
					   new_session_row, err) != 0) ||
			 (swap_pays(R_LIVE_GONE, R_LIVE_UPSERT, new_live_row) &&
			  row_swap(Q_LIVE_SWAP, R_LIVE_GONE, R_LIVE_UPSERT, new_live_row, err) != 0)))
			return -1;
		for (int k = 0; k < R_FIRST_DURABLE; k++)
			if (rows_flush(k, err) != 0)
				return -1;
		batch.nstray = 0;
		if (nstatements > 0)
		{
			probe_choose(m);
			batch.in_transaction = nstatements > 1;
			if (batch.in_transaction && batch_control("BEGIN", err) != 0)
			{
				batch.in_transaction = false;
				return -1;
			}
			store.last_errno = 0;
			/* a swap that finds no leaving row leaves both rows to the loop */
			if (keyed_swap &&
				row_swap(Q_KEYED_SWAP, R_KEYED_DELETE, R_KEYED_UPSERT, new_keyed_row, err) != 0)
				return !batch.in_transaction && outcome_unknown(store.last_errno) ? -2 : -1;
			for (int k = R_FIRST_DURABLE; k < R_FIRST_AFTER; k++)
				if (rows_flush(k, err) != 0)
					return !batch.in_transaction && outcome_unknown(store.last_errno) ? -2 : -1;
			if (dlm_counter_dirty(m, &hi))
			{
				Param		p = {.is_int = true, .i = hi};

				if (batch_run(Q_COUNTER_SAVE, &p, 1, NULL, err) != 0)
					return !batch.in_transaction && outcome_unknown(store.last_errno) ? -2 : -1;
			}
			if (batch.in_transaction && batch_control("COMMIT", err) != 0)
			{
				batch.in_transaction = false;
				return -2;		/* applied or not: asked on a new connection */
			}
			batch.in_transaction = false;
		}
	}
	/* phase 3: the rows that live as long as the server, no flush */
	return rows_after(err) == 0 ? 0 : -3;
}

/*
 * The MEMORY tables' part of the batch.  Every statement is an upsert or a
 * delete by key, so after a lost connection the part is simply written
 * again (the durable part is committed by then and is not repeated).
 */
int
store_finish_batch(DlockErr *err)
{
	store.last_errno = 0;
	return local_refused(err) ? -1 : rows_after(err);
}

/* Phase 3, read_only looked at already. */
static int
rows_after(DlockErr *err)
{
	kept_note();
	for (int k = R_FIRST_AFTER; k < NR; k++)
		if (rows_flush(k, err) != 0)
			return -1;
	return 0;
}

/*
 * The local connection is not held back by read_only, so before it writes
 * a batch's rows the server's read_only is looked at, and the batch fails
 * as the store connection's statements would (ER_OPTION_PREVENTS_STATEMENT).
 * (A statement running when read_only is set finishes first, on either
 * connection; without a binary log there is no replica to be demoted for.)
 */
static bool
local_refused(DlockErr *err)
{
	int			ro;

	if (!store.local_rows)
		return false;
	ro = local_read_only(err->msg, sizeof(err->msg));
	if (ro == 0)
		return false;
	if (ro > 0)
	{
		store.last_errno = DLOCK_ER_READ_ONLY;
		dlock_set_err(err, DLOCK_ER_UNKNOWN, "lock store: the server is read-only (read_only = ON)");
	}
	else
		dlock_set_err(err, DLOCK_ER_UNKNOWN, "lock store: %.400s", err->msg);
	return true;
}

int
store_batch_applied(DlockErr *err)
{
	Cols		c;
	Param		p = {.is_int = true, .i = batch.probe.key};
	MYSQL_STMT *st;
	int			found = 0;
	int			f;
	bool		match = false;

	switch (batch.probe.kind)
	{
		case PROBE_NONE:
			return 0;
		case PROBE_COUNTER:
			st = query(Q_COUNTER_LOAD, NULL, 0, &c, "i", err);
			if (st == NULL)
				return -1;
			while ((f = fetch(st, &c, "i", err)) == 1)
				match = c.i[0] >= batch.probe.key;
			return f < 0 ? -1 : match;
		case PROBE_HELD_PRESENT:
		case PROBE_HELD_ABSENT:
			st = query(Q_PROBE_HELD, &p, 1, &c, "iiii", err);
			if (st == NULL)
				return -1;
			while ((f = fetch(st, &c, "iiii", err)) == 1)
			{
				found = 1;
				match = c.i[0] == batch.probe.count && c.i[1] == batch.probe.expires &&
					c.i[2] == batch.probe.kept && c.i[3] == batch.probe.mode;
			}
			if (f < 0)
				return -1;
			return batch.probe.kind == PROBE_HELD_ABSENT ? !found : match;
		case PROBE_QUEUE_PRESENT:
		case PROBE_QUEUE_ABSENT:
			st = query(Q_PROBE_QUEUE, &p, 1, &c, "ii", err);
			if (st == NULL)
				return -1;
			while ((f = fetch(st, &c, "ii", err)) == 1)
			{
				found = 1;
				match = c.i[0] == batch.probe.expires && (c.i[1] != 0) == (batch.probe.kept != 0);
			}
			if (f < 0)
				return -1;
			return batch.probe.kind == PROBE_QUEUE_ABSENT ? !found : match;
	}
	return -1;
}

int
store_rollback(void)
{
	bool		was = batch.in_transaction;
	DlockErr	err;

	batch.in_transaction = false;
	if (!was)
		return 0;
	if (store.local_rows)
		return batch_control("ROLLBACK", &err);
	return store.conn ? mysql_rollback(store.conn) : 0;
}

/* BEGIN, COMMIT or ROLLBACK of the batch's transaction, on its connection. */
static int
batch_control(const char *what, DlockErr *err)
{
	if (store.local_rows)
	{
		batch.text_len = 0;
		text_add(what, strlen(what));
		return local_run(NULL, err);
	}
	if (mysql_real_query(store.conn, what, (unsigned long) strlen(what)) != 0)
	{
		store.last_errno = mysql_errno(store.conn);
		dlock_set_err(err, DLOCK_ER_UNKNOWN, "lock store: %s: %s", what, mysql_error(store.conn));
		return -1;
	}
	return 0;
}

/* The most telling change of the batch: a new or a deleted row first. */
static void
probe_choose(DLockManager *m)
{
	Probe		update = {PROBE_NONE, 0, 0, 0, 0, 0};
	int64_t		hi;
	DLmHolder  *h;
	DLmWaiter  *w;

	batch.probe.kind = PROBE_NONE;

	for (size_t h_i = 0; (h = dlm_touched_holder(m, h_i)) != NULL; h_i++)
	{
		if (h->owner->key == NULL)
			continue;			/* not in the durable part */
		if (h->p.dead && h->p.stored)
		{
			batch.probe = (Probe) {PROBE_HELD_ABSENT, h->stored_token, 0, 0, 0, 0};
			return;
		}
		if (!h->p.dead && (!h->p.stored || h->stored_token != h->token))
		{
			batch.probe = (Probe) {PROBE_HELD_PRESENT, h->token, h->count, h->expires_at,
			dlm_holder_kept(h), h->mode};
			return;
		}
		if (!h->p.dead && h->p.dirty && update.kind == PROBE_NONE)
			update = (Probe) {PROBE_HELD_PRESENT, h->token, h->count, h->expires_at,
			dlm_holder_kept(h), h->mode};
	}
	for (size_t w_i = 0; (w = dlm_touched_waiter(m, w_i)) != NULL; w_i++)
	{
		bool		in_kept = w->p.stored && kept_has(w->ticket);
		bool		to_kept = !w->p.dead && w->keep && (!w->p.stored || w->p.dirty);

		if (in_kept && (w->p.dead || (w->p.dirty && !w->keep)))
		{
			batch.probe = (Probe) {PROBE_QUEUE_ABSENT, w->ticket, 0, 0, 0, 0};
			return;
		}
		if (to_kept && !in_kept)
		{
			batch.probe = (Probe) {PROBE_QUEUE_PRESENT, w->ticket, 0, w->kept_until, w->keep, 0};
			return;
		}
		if (to_kept && update.kind == PROBE_NONE)
			update = (Probe) {PROBE_QUEUE_PRESENT, w->ticket, 0, w->kept_until, w->keep, 0};
	}
	if (update.kind != PROBE_NONE)
		batch.probe = update;
	else if (dlm_counter_dirty(m, &hi))
		batch.probe = (Probe) {PROBE_COUNTER, hi, 0, 0, 0, 0};
}

/* Whether an error leaves the outcome of a statement that would commit unknown. */
static bool
outcome_unknown(unsigned int no)
{
	return connection_lost(no) ||
		no == 1317 /* ER_QUERY_INTERRUPTED */ || no == 1053 /* ER_SERVER_SHUTDOWN */;
}

/* The kept-place tickets follow the durable part just committed (once). */
static void
kept_note(void)
{
	Rows	   *d = &batch.rows[R_KEPT_DELETE];
	Rows	   *u = &batch.rows[R_KEPT_UPSERT];

	if (batch.kept_noted)
		return;
	batch.kept_noted = true;
	for (int i = 0; i < d->n; i++)
		kept_del(d->p[i].i);
	for (int i = 0; i < u->n; i++)
		(void) kept_add(u->p[(size_t) i * QUEUE_NCOL].i);
}

/*
 * A session holder's row updated in place to a mode that conflicts with no
 * more than before and no more permits (a down-conversion, a release of
 * levels or permits) goes with the leaving rows, before the durable part:
 * an owner key granted beside it in the same batch must not show up next
 * to the row's old mode (the torture run saw an EX row beside a new PR).
 */
static bool
session_row_weaker(const DLmHolder *h)
{
	return h->p.stored && h->stored_token == h->token &&
		(dlock_mode_conflicts(h->mode) & ~dlock_mode_conflicts(h->stored_mode)) == 0 &&
		dlm_holder_permits(h) <= dlm_holder_stored_permits(h);
}

/* Whether a swap of one of n new rows saves statements (chunks of 2^k rows). */
static bool
swap_pays(int gone, int upsert, int new_row)
{
	int			n = batch.rows[upsert].n;

	return new_row >= 0 && batch.rows[gone].n == 1 && !batch.rows[gone].oom && !batch.rows[upsert].oom &&
		__builtin_popcount((unsigned) n - 1) <= __builtin_popcount((unsigned) n);
}

/* Statement q of dlock_store.c with np values, on the batch's connection. */
static int
batch_run(int q, Param *p, int np, unsigned long long *affected, DlockErr *err)
{
	MYSQL_BIND	b[QUEUE_NCOL + 1];

	return batch_execute(-1, q, p, np, b, affected, err);
}

/*
 * Run a batch statement - Q[c] when kind < 0, else the one for 2^c rows of
 * a kind - with np values: over the local connection (prepared there once),
 * or as the store connection's prepared statement bound with b.
 */
static int
batch_execute(int kind, int c, Param *p, int np, MYSQL_BIND *b,
			  unsigned long long *affected, DlockErr *err)
{
	MYSQL_STMT *st;

	if (store.local_rows)
	{
		char		name[32];

		if (kind < 0)
			snprintf(name, sizeof(name), "dlock_q%d", c);
		else
			snprintf(name, sizeof(name), "dlock_r%d_%d", kind, c);
		return local_prepare(name, kind < 0 ? NR * NCHUNK + c : kind * NCHUNK + c, kind, c, err) != 0 ||
			local_execute(name, p, np, affected, err) != 0 ? -1 : 0;
	}
	st = kind < 0 ? stmt(c, err) : row_stmt(kind, c, err);
	return st == NULL || execute_bound(st, p, np, b, affected, err) != 0 ? -1 : 0;
}

/*
 * One row leaving a MEMORY table and a new one arriving there, with nothing
 * durable in the batch (a hand-off from one session to the next, a
 * granted waiter's queue row and a new one): one UPDATE turns the leaving
 * row into the new one - the leaving holder is never shown beside the
 * next, and a round trip is saved.  When the leaving row is not there (the
 * batch is written again after a lost connection) the rows stay for the
 * usual delete and upsert.
 */
static int
row_swap(int q, int gone, int upsert, int new_row, DlockErr *err)
{
	int			ncol = row_ncol[upsert];
	Rows	   *u = &batch.rows[upsert];
	Param		p[QUEUE_NCOL + 1];
	unsigned long long affected = 0;

	memcpy(p, u->p + (size_t) new_row * (size_t) ncol, sizeof(Param) * (size_t) ncol);
	p[ncol] = batch.rows[gone].p[0];
	if (batch_run(q, p, ncol + 1, &affected, err) != 0)
		return -1;
	if (affected == 1)
	{
		batch.rows[gone].n = 0;
		/* the last row to be upserted takes the swapped one's place */
		if (new_row != --u->n)
			memcpy(u->p + (size_t) new_row * (size_t) ncol,
				   u->p + (size_t) u->n * (size_t) ncol, sizeof(Param) * (size_t) ncol);
	}
	return 0;
}

static void
held_row(int kind, const DLmHolder *h)
{
	Param	   *p = row_add(kind);

	if (p == NULL)
		return;
	p_int(&p[0], h->token);
	p_str(&p[1], h->lock->name);
	p_str(&p[2], h->owner->key);
	p_int(&p[3], (long long) session_conn_id(h->pid, h->backend_start));
	p_int(&p[4], h->backend_start);
	p_int(&p[5], h->mode);
	p_int(&p[6], h->count);
	p_int(&p[7], h->granted_at);
	p_int_or_null(&p[8], h->expires_at);
	p_int_or_null(&p[9], h->ttl_us);
	p_int(&p[10], h->implied);
	p_str(&p[11], accounts_name(h->role));
	p_int(&p[12], dlm_holder_kept(h));
	if (h->lock->capacity)
	{
		p_int(&p[13], h->lock->capacity);
		p_int(&p[14], dlm_holder_permits(h));
	}
	else
		p[13].is_null = p[14].is_null = true;
	p_str(&p[15], dlm_holder_value(h));
}

static void
queue_row(int kind, const DLmWaiter *w)
{
	Param	   *p = row_add(kind);

	if (p == NULL)
		return;
	p_int(&p[0], w->ticket);
	p_str(&p[1], w->lock->name);
	p_str(&p[2], w->owner->key);
	p_int(&p[3], (long long) session_conn_id(w->pid, w->backend_start));
	p_int(&p[4], w->backend_start);
	p_int(&p[5], w->mode);
	p_int(&p[6], w->since);
	p_int_or_null(&p[7], w->timeout_at);
	p_int_or_null(&p[8], w->ttl_us);
	p_int(&p[9], w->holder != NULL);
	p_int(&p[10], w->implied);
	p_str(&p[11], accounts_name(w->role));
	p_int(&p[12], w->keep);
	p_int_or_null(&p[13], w->kept_until);
	p_int(&p[14], w->request);
	if (w->lock->capacity)
	{
		p_int(&p[15], w->lock->capacity);
		p_int(&p[16], w->permits);
	}
	else
		p[15].is_null = p[16].is_null = true;
	p_str(&p[17], w->value);
}

static void
key_row(int kind, long long key)
{
	Param	   *p = row_add(kind);

	if (p)
		p_int(p, key);
}

/* The next row's parameters (cleared), or NULL when out of memory. */
static Param *
row_add(int kind)
{
	Rows	   *r = &batch.rows[kind];
	Param	   *p;

	if (r->oom)
		return NULL;
	if (r->n == r->cap)
	{
		int			cap = r->cap ? r->cap * 2 : 64;
		Param	   *np = realloc(r->p, sizeof(Param) * (size_t) cap * (size_t) row_ncol[kind]);

		if (np == NULL)
		{
			r->oom = true;
			return NULL;
		}
		r->p = np;
		r->cap = cap;
	}
	p = r->p + (size_t) r->n++ * (size_t) row_ncol[kind];
	memset(p, 0, sizeof(Param) * (size_t) row_ncol[kind]);
	return p;
}

static void
p_int(Param *p, long long v)
{
	p->is_int = true;
	p->i = v;
}

static void
p_int_or_null(Param *p, long long v)
{
	if (v)
		p_int(p, v);
	else
		p->is_null = true;
}

static void
p_str(Param *p, const char *s)
{
	if (s == NULL)
		p->is_null = true;
	else
	{
		p->s = s;
		p->len = (unsigned long) strlen(s);
	}
}

/*
 * A few InnoDB rows leave one DELETE each (a primary-key lookup): InnoDB
 * estimates a table of few live rows at about one, and for that the
 * optimizer reads a DELETE ... IN (...) of several keys as a full scan -
 * through every delete-marked row purge has not reached yet, looking up
 * each one's transaction.  Under owner-keyed load that scan was 15% of
 * mariadbd's time (bench/results/2026-11-28-vm-mysql-keyed-delete.md).
 * More rows (an expiry) still go in chunks, where one plan serves many.
 */
#define DELETE_BY_KEY_UPTO 16

/* Write the collected rows of a kind: chunks of 64, then 32, 16, ... 1. */
static int
rows_flush(int kind, DlockErr *err)
{
	Rows	   *r = &batch.rows[kind];
	int			done = 0;
	bool		by_key = (kind == R_KEYED_DELETE || kind == R_KEPT_DELETE) &&
		r->n <= DELETE_BY_KEY_UPTO;

	if (r->oom)
	{
		dlock_set_err(err, DLOCK_ER_UNKNOWN, "out of memory");
		return -1;
	}
	if (!store.local_rows && batch.binds == NULL)
	{
		batch.binds = malloc(sizeof(MYSQL_BIND) * MAX_CHUNK * QUEUE_NCOL);
		if (batch.binds == NULL)
		{
			dlock_set_err(err, DLOCK_ER_UNKNOWN, "out of memory");
			return -1;
		}
	}
	while (done < r->n)
	{
		int			c = by_key ? 0 : NCHUNK - 1;

		while ((1 << c) > r->n - done)
			c--;
		if (batch_execute(kind, c, r->p + (size_t) done * (size_t) row_ncol[kind],
						  (1 << c) * row_ncol[kind], batch.binds, NULL, err) != 0)
			return -1;
		done += 1 << c;
	}
	return 0;
}

/* The statement for 2^c rows of a kind, with a ? for each value (malloc'ed). */
static char *
row_sql(int kind, int c, DlockErr *err)
{
	int			n = 1 << c;
	int			ncol = row_ncol[kind];
	size_t		len;
	char	   *sql;
	char	   *o;

	len = strlen(row_head[kind]) + strlen(row_tail[kind]) + (size_t) n * (size_t) (2 * ncol + 3) + 4;
	sql = malloc(len);
	if (sql == NULL)
	{
		dlock_set_err(err, DLOCK_ER_UNKNOWN, "out of memory");
		return NULL;
	}
	o = stpcpy(sql, row_head[kind]);
	if (ncol == 1)
		*o++ = '(';
	for (int r = 0; r < n; r++)
	{
		if (r > 0)
			*o++ = ',';
		if (ncol > 1)
			*o++ = '(';
		for (int k = 0; k < ncol; k++)
		{
			if (k > 0)
				*o++ = ',';
			*o++ = '?';
		}
		if (ncol > 1)
			*o++ = ')';
	}
	if (ncol == 1)
		*o++ = ')';
	strcpy(o, row_tail[kind]);
	return sql;
}

/* The prepared statement for 2^c rows of a kind. */
static MYSQL_STMT *
row_stmt(int kind, int c, DlockErr *err)
{
	char	   *sql;
	MYSQL_STMT *st;

	if (batch.stmts[kind][c])
		return batch.stmts[kind][c];
	sql = row_sql(kind, c, err);
	if (sql == NULL)
		return NULL;
	st = mysql_stmt_init(store.conn);
	if (st == NULL || mysql_stmt_prepare(st, sql, strlen(sql)) != 0)
	{
		dlock_set_err(err, DLOCK_ER_UNKNOWN, "lock store: %s",
				st ? mysql_stmt_error(st) : mysql_error(store.conn));
		if (st)
			mysql_stmt_close(st);
		free(sql);
		return NULL;
	}
	free(sql);
	batch.stmts[kind][c] = st;
	return st;
}

/* ------------------------------------------------------------------------
 * Statements over the local connection, written as text
 * ------------------------------------------------------------------------ */
static void
text_add(const char *s, size_t n)
{
	if (batch.text_oom || n == 0)
		return;
	if (batch.text_len + n + 1 > batch.text_cap)
	{
		size_t		cap = batch.text_cap ? batch.text_cap : 16384;
		char	   *t;

		while (batch.text_len + n + 1 > cap)
			cap *= 2;
		t = realloc(batch.text, cap);
		if (t == NULL)
		{
			batch.text_oom = true;
			return;
		}
		batch.text = t;
		batch.text_cap = cap;
	}
	memcpy(batch.text + batch.text_len, s, n);
	batch.text_len += n;
	batch.text[batch.text_len] = '\0';
}

/* A value as SQL: NULL, a decimal integer, or a string as hex digits. */
static void
text_value(const Param *p)
{
	static const char hex[] = "0123456789ABCDEF";
	char		buf[2 * 64 + 3];
	size_t		n = 0;

	if (p->is_null)
		text_add("NULL", 4);
	else if (p->is_int)
		text_add(buf, (size_t) snprintf(buf, sizeof(buf), "%lld", p->i));
	else if (p->len == 0)
		text_add("''", 2);
	else
	{
		text_add("X'", 2);
		for (unsigned long i = 0; i < p->len; i++)
		{
			buf[n++] = hex[(unsigned char) p->s[i] >> 4];
			buf[n++] = hex[(unsigned char) p->s[i] & 15];
			if (n == sizeof(buf) - 3)
			{
				text_add(buf, n);
				n = 0;
			}
		}
		text_add(buf, n);
		text_add("'", 1);
	}
}

/*
 * PREPARE name once per local connection: the statement for 2^q rows of a
 * kind, or Q[q] when kind < 0; slot numbers them all.
 */
static int
local_prepare(const char *name, int slot, int kind, int q, DlockErr *err)
{
	static bool prepared[NR * NCHUNK + NQ];
	static unsigned int opened;		/* local_opened() when prepared[] was right */
	char	   *sql;
	int			rc;

	if (opened != local_opened())
	{
		memset(prepared, 0, sizeof(prepared));
		opened = local_opened();
	}
	if (prepared[slot])
		return 0;
	sql = kind >= 0 ? row_sql(kind, q, err) : strdup(Q[q]);
	if (sql == NULL)
	{
		dlock_set_err(err, DLOCK_ER_UNKNOWN, "out of memory");
		return -1;
	}
	/* the statements hold no quote: their text goes in quotes as it is */
	batch.text_len = 0;
	text_add("PREPARE ", 8);
	text_add(name, strlen(name));
	text_add(" FROM '", 7);
	text_add(sql, strlen(sql));
	text_add("'", 1);
	free(sql);
	rc = local_run(NULL, err);
	if (opened != local_opened())	/* opened by this very statement */
	{
		memset(prepared, 0, sizeof(prepared));
		opened = local_opened();
	}
	prepared[slot] = rc == 0;
	return rc;
}

/* EXECUTE name USING the np values. */
static int
local_execute(const char *name, const Param *p, int np, unsigned long long *affected,
			  DlockErr *err)
{
	batch.text_len = 0;
	text_add("EXECUTE ", 8);
	text_add(name, strlen(name));
	text_add(" USING ", 7);
	for (int i = 0; i < np; i++)
	{
		text_add(",", i > 0);
		text_value(&p[i]);
	}
	return local_run(affected, err);
}

static int
local_run(unsigned long long *affected, DlockErr *err)
{
	char		msg[400];
	unsigned int errnum;

	if (batch.text_oom)
	{
		batch.text_oom = false;
		dlock_set_err(err, DLOCK_ER_UNKNOWN, "out of memory");
		return -1;
	}
	if (local_query(batch.text, batch.text_len, affected, &errnum, msg, sizeof(msg)) != 0)
	{
		store.last_errno = errnum;
		dlock_set_err(err, DLOCK_ER_UNKNOWN, "lock store: %s", msg);
		return -1;
	}
	return 0;
}

/* The batch's statements go with the connection (store_close). */
void
rows_close(void)
{
	for (int k = 0; k < NR; k++)
		for (int c = 0; c < NCHUNK; c++)
			if (batch.stmts[k][c])
			{
				mysql_stmt_close(batch.stmts[k][c]);
				batch.stmts[k][c] = NULL;
			}
}

/* ------------------------------------------------------------------------
 * The kept set, and the stray rows of the load
 * ------------------------------------------------------------------------ */
/* The load starts from an empty kept set (dlock_store.c: load_kept). */
void
kept_clear(void)
{
	if (kept.set)
		memset(kept.set, 0, kept.cap * sizeof(long long));
	kept.used = 0;
}

bool
kept_add(long long t)
{
	if (kept_has(t))
		return true;
	if ((kept.used + 1) * 2 > kept.cap)
	{
		size_t		ncap = kept.cap ? kept.cap * 2 : 64;
		long long  *old = kept.set;
		size_t		ocap = kept.cap;

		kept.set = calloc(ncap, sizeof(long long));
		if (kept.set == NULL)
		{
			kept.set = old;
			return false;
		}
		kept.cap = ncap;
		kept.used = 0;
		for (size_t i = 0; i < ocap; i++)
			if (old[i] > 0)
			{
				size_t		j = kept_slot(old[i]);

				while (kept.set[j] != 0)
					j = (j + 1) & (kept.cap - 1);
				kept.set[j] = old[i];
				kept.used++;
			}
		free(old);
	}
	{
		size_t		i = kept_slot(t);

		while (kept.set[i] > 0)
			i = (i + 1) & (kept.cap - 1);
		if (kept.set[i] == 0)
			kept.used++;
		kept.set[i] = t;
	}
	return true;
}

static size_t
kept_slot(long long t)
{
	return (size_t) ((unsigned long long) t * 0x9E3779B97F4A7C15ULL >> 17) & (kept.cap - 1);
}

static bool
kept_has(long long t)
{
	if (kept.cap == 0)
		return false;
	for (size_t i = kept_slot(t);; i = (i + 1) & (kept.cap - 1))
	{
		if (kept.set[i] == t)
			return true;
		if (kept.set[i] == 0)
			return false;
	}
}

static void
kept_del(long long t)
{
	if (kept.cap == 0)
		return;
	for (size_t i = kept_slot(t);; i = (i + 1) & (kept.cap - 1))
	{
		if (kept.set[i] == t)
		{
			kept.set[i] = -1;
			return;
		}
		if (kept.set[i] == 0)
			return;
	}
}

/* Session rows the load refused, deleted by the next batch's phase 1. */
void
stray_reset(void)
{
	batch.nstray = 0;
}

bool
stray_add(long long token)
{
	if (batch.nstray == (int) (sizeof(batch.stray) / sizeof(batch.stray[0])))
		return false;
	batch.stray[batch.nstray++] = token;
	return true;
}
