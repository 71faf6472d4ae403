/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * dlock_mgr.h
 *		The lock manager of the MySQL/MariaDB plugin: one thread inside
 *		mariadbd runs the core lock manager (core/dlock_lm.h), the single
 *		writer of the dlock tables; the SQL functions hand it requests and
 *		sleep until it answers, which it does only after the batch that
 *		decided them has committed.
 *
 * Free of MySQL headers: dlock_udf.c (the server's headers) and
 * dlock_store.c (the client library's) both include it, and the two
 * header sets must never meet in one unit.
 */
#ifndef DLOCK_MGR_H
#define DLOCK_MGR_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dlock_lm.h"

/* Longest lock name in bytes (the width of the name columns). */
#define DLOCK_MAX_NAME_LEN 1024

/* Lease given to owner-keyed locks acquired without a TTL. */
#define DLOCK_DEFAULT_OWNER_TTL_US (60LL * 1000000LL)

/* Longest timeout; the longest TTL is the setting dlock_max_ttl. */
#define DLOCK_CEILING_US (366LL * 86400LL * 1000000LL)
#define DLOCK_MAX_TIMEOUT_US DLOCK_CEILING_US

/* Error numbers reported to the client (MySQL errno values). */
#define DLOCK_ER_UNKNOWN 1105		/* ER_UNKNOWN_ERROR, HY000 */
#define DLOCK_ER_ARGS 1210			/* ER_WRONG_ARGUMENTS, HY000 */
#define DLOCK_ER_TOO_LONG 1406		/* ER_DATA_TOO_LONG, 22001 */
#define DLOCK_ER_LOCK_WAIT 1205		/* ER_LOCK_WAIT_TIMEOUT, HY000 */
#define DLOCK_ER_DEADLOCK 1213		/* ER_LOCK_DEADLOCK, 40001 */
#define DLOCK_ER_INTERRUPTED 1317	/* ER_QUERY_INTERRUPTED, 70100 */
#define DLOCK_ER_ACCESS 1370		/* ER_PROCACCESS_DENIED_ERROR, 42000 */
#define DLOCK_ER_QUOTA 1226			/* ER_USER_LIMIT_REACHED, 42000 */
#define DLOCK_ER_READ_ONLY 1290		/* ER_OPTION_PREVENTS_STATEMENT, HY000 */

/* What a caller may do (dlock_udf.c checks them with the server's ACL). */
#define DLOCK_ACCESS_USER 1		/* take, renew and release locks */
#define DLOCK_ACCESS_MONITOR 2	/* see every lock, owner keys hidden */
#define DLOCK_ACCESS_ADMIN 4	/* everything: every key shown and usable */

/* Longest account name, user@host as CURRENT_USER() shows it. */
#define DLOCK_MAX_ACCOUNT_LEN 640

/* Outcome of a call; msg is already prefixed with the function name. */
typedef struct DlockErr
{
	int			code;			/* 0: no error */
	int			warning;		/* code/msg is a warning, not an error */
	char		msg[512];
} DlockErr;

/* The calling session, as far as the lock manager needs to know it. */
/*
 * The manager's mutex and a slot's condition variable, laid out as the
 * server's uninstrumented mysql_mutex_t and mysql_cond_t: a caller
 * registers its wait with the server (thd_enter_cond), whose KILL then
 * locks the mutex and broadcasts the condition.
 */
typedef struct MgrMutex
{
	pthread_mutex_t m;
	void	   *psi;			/* always NULL: not instrumented */
} MgrMutex;
typedef struct MgrCond
{
	pthread_cond_t c;
	void	   *psi;
} MgrCond;

typedef struct DlockCaller DlockCaller;
struct DlockCaller
{
	unsigned long long conn_id; /* CONNECTION_ID() of the caller */
	int			(*killed) (void *arg);	/* nonzero once KILL QUERY/KILL hit it */
	void	   *killed_arg;
	/* register the wait (mutex held) / end it (unlocks the mutex); NULL: not available */
	void		(*wait_enter) (MgrCond *cond, MgrMutex *mutex);
	void		(*wait_exit) (void);
	int			access;			/* DLOCK_ACCESS_* bits */
	char		account[DLOCK_MAX_ACCOUNT_LEN + 1]; /* CURRENT_USER() */
	size_t		account_len;
	/* whether a role is granted to the account, directly or through roles */
	bool		(*role_granted) (const DlockCaller *who, const char *role);
};

/* One request of a lock function, already validated by the UDF layer. */
typedef struct DlockCall
{
	const char *fn;				/* SQL function name, for messages */
	DLockOp		op;
	const char *names[DLOCK_MAX_MULTI]; /* acquire_all: sorted, distinct */
	size_t		name_lens[DLOCK_MAX_MULTI];
	int			nnames;
	const char *owner;			/* NULL: owned by the calling session */
	size_t		owner_len;
	int			mode;
	long long	ttl_us;			/* 0: none (renew: the lease's own) */
	long long	timeout_us;		/* < 0: wait until answered or killed */
	int			keep_place;
	int			capacity;		/* a semaphore's; 0: a lock */
	int			permits;
	int			election;		/* a campaign */
	const char *value;			/* a campaign's or a proclamation's */
	size_t		value_len;
} DlockCall;

/* The answer to a call that succeeded. */
typedef struct DlockResult
{
	DLockStatus status;
	long long	token;
	long long	expires_at_us;	/* Unix time, µs; 0: no lease */
	int			count;
	int			ntokens;		/* acquire_all: a token per name, in name order */
	long long	tokens[DLOCK_MAX_MULTI];
} DlockResult;

/* Fill err (code, message from fmt, not a warning). */
extern void dlock_set_err(DlockErr *err, int code, const char *fmt,...)
			__attribute__((format(printf, 3, 4)));

/*
 * Settings (system variables of the plugin, dlock_udf.c), read by the
 * manager at each batch.
 */
extern unsigned int dlock_queue_row_delay_ms;
extern unsigned int dlock_restart_grace_ms;
extern unsigned long long dlock_max_ttl_seconds;

/* The manager thread: started and stopped with the plugin. */
extern int	mgr_start(DlockErr *err);
extern void mgr_stop(void);

/* Whether this server is a semi-synchronous primary (its commits wait for a replica). */
extern int	mgr_semisync_enabled(void);

/* Whether the manager serves; fills err with why not (prefixed by fn). */
extern int	mgr_check_running(const char *fn, DlockErr *err);

/*
 * Submit a call and wait for its answer (after its batch committed).  A
 * timeout or a kill withdraws the request: the answer is then CANCELED
 * (or KEPT), or what was decided first.  0, or -1 with err.
 */
extern int	mgr_call(const DlockCaller *who, const DlockCall *call,
					 DlockResult *res, DlockErr *err);

/*
 * Run fn on the picture in the manager thread, right after a batch
 * committed (the picture then matches the tables), and wait for it.
 */
typedef void (*MgrInspectFn) (const DLockManager *m, void *arg);
extern int	mgr_inspect(const char *fn_name, MgrInspectFn fn, void *arg,
						DlockErr *err);

/*
 * A statement of this thread ended (audit plugin); failed: with an error.
 * Grants it made that its client will never see are given back
 * (dlock_udf.c).
 */
extern void dlock_statement_end(unsigned long long conn_id, int failed);

/* A session ended (audit plugin): its locks go, its requests withdrawn. */
extern void mgr_session_end(unsigned long long conn_id);
/* Statistics since the start or the last reset (dlock_stat). */
extern void mgr_stats(DLmCounters *out, int64_t *holders, int64_t *waiting, int64_t *kept,
					  long long *since_us);
extern void mgr_stats_reset(void);

/* Read the tables again after this batch (they were replaced). */
extern int	mgr_reload(const char *fn, DlockErr *err);

/*
 * Namespaces: whether the caller may lock (or look at) these names; 0, or
 * -1 with err (1370 ... [42501]) naming the first name refused.  An account
 * is bound by the grants to itself and to every role granted to it,
 * whichever role is active; dlock_admin is never bound.  Runs in the
 * caller's thread.
 */
extern int	mgr_namespace_check(const char *fn, const DlockCaller *who,
								const char *const *names, const size_t *lens,
								int nnames, DlockErr *err);

/* dlock_user, dlock_monitor, dlock_admin: rights, never a tenant (no grantee). */
extern bool mgr_capability_role(const char *name, size_t len);

/* Namespace grants and quotas: written, and the manager's caches updated. */
extern int	mgr_grant(const char *fn, const char *grantee, size_t glen,
					  const char *prefix, size_t plen, int revoke,
					  int *changed, DlockErr *err);
extern int	mgr_set_quota(const char *fn, const char *grantee, size_t glen,
						  const long long limits[4], DlockErr *err);

#endif							/* DLOCK_MGR_H */
