/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * dlock_store.h
 *		The lock manager thread's lock store: the dlock tables in the server
 *		the plugin runs in, reached through one loopback libmariadb
 *		connection that only the manager thread uses (and, for the MEMORY
 *		tables' rows on a server without a binary log, a local connection:
 *		dlock_store_local.h).
 *
 * Free of MySQL headers: the manager's files include this, dlock_store.c
 * adds the client library's.  The store is the durable truth; the manager's
 * picture (core/dlock_lm.h) is rebuilt from it after a restart or a failed
 * batch.
 */
#ifndef DLOCK_STORE_H
#define DLOCK_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dlock_types.h"

/* The server's own socket and port: where the store connection goes. */
extern void store_set_server(const char *socket, unsigned int port);

/* Connect (and set up the session); 0, or with err -1 (may pass), -2 (a set-up error). */
extern int	store_open(DlockErr *err);
extern void store_close(void);
/* Whether the connection was made for a semi-synchronous primary (no read timeout). */
extern bool store_patient(void);
/* CONNECTION_ID() of the store connection; 0 when closed. */
extern unsigned long long store_conn_id(void);
/*
 * Whether a batch's rows go over the local connection, open (no binary
 * log): a caller's thread may then write a batch (dlock_mgr.c).
 */
extern bool store_local_ready(void);
/* Whether the dlock tables exist (install.sql ran). */
extern int	store_installed(int *installed, DlockErr *err);

/*
 * Whether this server may be the lock service: 0 yes; 1 no, with err
 * saying why (a Galera node, a replica); -1 the store could not be asked.
 */
extern int	store_role(DlockErr *err);

/* A change the semi-synchronous replica must acknowledge; 0, or -1 with err. */
extern int	store_sync(DlockErr *err);

/* The server's error number of the last statement that failed (0: none since the batch began). */
extern unsigned int store_last_errno(void);

/*
 * Loading, in one transaction the caller ends: the counter, every holder
 * row, the kept places (a place whose call was waiting is kept until
 * now + its ttl), and the connection ids alive now (for session rows).
 * Waiting rows that are not kept places are deleted: their calls are gone.
 */
typedef struct StoreLoad
{
	DLockManager *m;
	DLockTime	now;
	unsigned long long *alive;	/* malloc'ed, sorted */
	size_t		nalive;
	long long	capacity;		/* rows a MEMORY table can take; 0: unknown */
} StoreLoad;
extern int	store_load(StoreLoad *load, DlockErr *err);

/*
 * The connection ids alive now (information_schema.PROCESSLIST as the
 * store account, which has PROCESS, sees it: every client connection and
 * every server-internal session - event, replication applier), appended
 * to *alive (malloc'ed, unsorted).  0, or -1 with err.
 */
extern int	store_alive(unsigned long long **alive, size_t *nalive, DlockErr *err);

/*
 * One batch: the durable rows (owner-keyed holders, kept places) and the
 * counter in InnoDB, committed; then the rows that live as long as the
 * server (session holders, waiting calls) in MEMORY tables.  0; -1 not
 * applied; -2 unknown (the connection lost at the commit): reconnect and
 * ask store_batch_applied (1 applied, 0 not, -1 cannot tell), then
 * store_finish_batch; -3 the durable part committed, the rest not: reconnect
 * and store_finish_batch (it may run again: upserts and deletes by key).
 */
extern int	store_write_batch(DLockManager *m, DlockErr *err);
extern int	store_batch_applied(DlockErr *err);
extern int	store_finish_batch(DlockErr *err);
extern int	store_rollback(void);

/* Administration, each in a transaction of its own. */
extern int	store_grant(const char *grantee, size_t glen, const char *prefix,
						size_t plen, int revoke, int *changed, DlockErr *err);
extern int	store_set_quota(const char *grantee, size_t glen,
							const long long limits[4], DlockErr *err);

/* The namespace grants and quotas, row by row, to the caches. */
typedef void (*StoreGrantFn) (const char *grantee, size_t glen,
							  const char *prefix, size_t plen);
typedef void (*StoreQuotaFn) (const char *account, size_t alen,
							  const long long limits[4]);
extern int	store_load_grants(StoreGrantFn grant_fn, StoreQuotaFn quota_fn,
							  DlockErr *err);

/*
 * One row of dlock.locks as the store has it: strings are bytes (not
 * NUL-terminated beyond len), the integers in the order of StoreLockCol,
 * each with its NULL flag.
 */
typedef enum StoreLockCol
{
	SL_MODE,
	SL_CAPACITY,				/* NULL: a lock */
	SL_GRANTED,
	SL_POSITION,				/* waiters */
	SL_CONN_ID,					/* NULL: a kept place no call waits for */
	SL_TOKEN,					/* holders: the token; waiters: the ticket */
	SL_COUNT,					/* holders */
	SL_SINCE_US,
	SL_EXPIRES_US,				/* a lease's end, a kept place's end */
	SL_TIMEOUT_US,				/* waiters */
	SL_CONVERSION,
	SL_IMPLIED,
	SL_PERMITS,					/* semaphores */
	SL_NINTS
} StoreLockCol;

typedef struct StoreLockRow
{
	const char *name;
	size_t		name_len;
	const char *owner;			/* NULL: a session's */
	size_t		owner_len;
	const char *account;
	size_t		account_len;
	const char *value;			/* NULL: none */
	size_t		value_len;
	long long	ints[SL_NINTS];
	bool		nulls[SL_NINTS];
} StoreLockRow;

typedef void (*StoreLockRowFn) (void *arg, const StoreLockRow *row);

/*
 * The rows of dlock.locks before anyone's visibility: every account's
 * (account NULL) or one account's; positions count every waiting part.
 * Manager thread only (an inspection).  0, or -1 with err.
 */
extern int	store_read_locks(const char *account, size_t alen, StoreLockRowFn fn,
							 void *arg, DlockErr *err);

#endif							/* DLOCK_STORE_H */
