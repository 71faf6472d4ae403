/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * dlock_store_int.h
 *		What the store's two files share (dlock_store.c: the connection,
 *		the statements, loading and reading; dlock_store_batch.c: writing a
 *		batch), with the client library's headers: never included elsewhere.
 *
 * Interface: the connection 'store'; the statements Q_* and the helpers
 * stmt, stmt_fail, execute_bound, run, query, fetch; from the batch's side,
 * kept_clear, kept_add, stray_reset, stray_add, rows_close.
 *
 * Everything here is the manager thread's alone.
 */
#ifndef DLOCK_STORE_INT_H
#define DLOCK_STORE_INT_H

#include <mysql.h>

#include "dlock_store.h"

/* The statements prepared once per connection and kept (dlock_store.c: Q). */
enum
{
	Q_COUNTER_SAVE,
	Q_COUNTER_LOAD,
	Q_HELD_LOAD,
	Q_KEPT_LOAD,
	Q_QUEUE_CLEAN,
	Q_KEPT_CLEAN,
	Q_ALIVE,
	Q_CONN_ALIVE,
	Q_GRANTS_LOAD,
	Q_QUOTAS_LOAD,
	Q_GRANT_ADD,
	Q_GRANT_DEL,
	Q_QUOTA_SET,
	Q_QUOTA_DEL,
	Q_INSTALLED,
	Q_PROBE_HELD,
	Q_PROBE_QUEUE,
	Q_CAPACITY,
	Q_SESSION_SWAP,
	Q_LIVE_SWAP,
	Q_KEYED_SWAP,
	Q_ROLE,
	Q_COUNTER_BUMP,
	Q_LOCKS_ALL,
	Q_LOCKS_OF,
	NQ
};

/* The columns of dlock.held_keyed and held_session, of queue_kept and queue_live. */
#define HELD_COLS \
	"token, name, owner, conn_id, session_start, mode, `count`, granted_us, " \
	"expires_us, ttl_us, implied, account, kept, capacity, permits, value"
#define QUEUE_COLS \
	"ticket, name, owner, conn_id, session_start, mode, since_us, timeout_us, " \
	"ttl_us, conversion, implied, account, keep, kept_until_us, request, " \
	"capacity, permits, value"

/* The connection (dlock_store.c). */
typedef struct StoreConn
{
	MYSQL	   *conn;
	MYSQL_STMT *stmts[NQ];
	unsigned long long conn_id;
	bool		fenced;			/* conn may write: no older one's thread runs */
	unsigned long long unended; /* a connection that may have written, closed
								 * and perhaps not ended yet (store_open) */
	bool		patient;		/* conn waits for answers without a read timeout */
	bool		local_rows;		/* no binary log: a batch's rows go over the local connection */
	char		self_socket[512];
	unsigned int self_port;
	unsigned int last_errno;	/* of the last statement that failed */
} StoreConn;

extern StoreConn store;

/* Parameters: strings (bytes) and integers. */
typedef struct Param
{
	bool		is_int;
	bool		is_null;
	long long	i;
	const char *s;
	unsigned long len;
} Param;

/* Result columns of the loading queries. */
#define MAXCOL 18
#define STRCAP 2050
typedef struct Cols
{
	MYSQL_BIND	b[MAXCOL];
	long long	i[MAXCOL];
	char		s[MAXCOL][STRCAP];
	unsigned long len[MAXCOL];
	my_bool		null[MAXCOL];
} Cols;

/* The statements' texts, by Q_ (dlock_store.c). */
extern const char *const Q[NQ];

/* Whether an error says the connection is gone (killed, or the server went away). */
extern bool connection_lost(unsigned int no);
/* The prepared statement q, prepared now if it is not yet; NULL with err. */
extern MYSQL_STMT *stmt(int q, DlockErr *err);
/* A statement failed: its error into err and store.last_errno; -1. */
extern int	stmt_fail(MYSQL_STMT *st, DlockErr *err);
/* Bind and execute; b has room for np. */
extern int	execute_bound(MYSQL_STMT *st, Param *p, int np, MYSQL_BIND *b,
						  unsigned long long *affected, DlockErr *err);
/* Run statement q with np parameters (at most 8). */
extern int	run(int q, Param *p, int np, unsigned long long *affected, DlockErr *err);
/* Run a query whose columns are 'types' ('i' integer, 's' bytes). */
extern MYSQL_STMT *query(int q, Param *p, int np, Cols *c, const char *types,
						 DlockErr *err);
/* Next row: 1, 0 at the end, -1 on error.  Strings are NUL-terminated. */
extern int	fetch(MYSQL_STMT *st, Cols *c, const char *types, DlockErr *err);

/* dlock_store_batch.c: the tickets of kept places, for the load. */
extern void kept_clear(void);
extern bool kept_add(long long t);
/* dlock_store_batch.c: session rows the load refused, deleted by the next batch. */
extern void stray_reset(void);
extern bool stray_add(long long token);
/* dlock_store_batch.c: the batch's statements closed with the connection. */
extern void rows_close(void);

#endif							/* DLOCK_STORE_INT_H */
