/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * dlock_types.h
 *		What every part of the MySQL/MariaDB plugin shares: the limits, the
 *		error numbers and access bits, and the types a call travels in from
 *		an SQL function to the lock manager and back (DlockCaller, DlockCall,
 *		DlockResult, DlockErr).
 *
 * Free of MySQL headers: the SQL functions (the server's headers), the
 * store (the client library's) and the manager (neither) all include it,
 * and the two header sets must never meet in one unit.
 *
 * Interface: dlock_set_err, shown, shown_len (dlock_errors.c); the settings
 * (dlock_plugin.c).
 */
#ifndef DLOCK_TYPES_H
#define DLOCK_TYPES_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dlock_lm.h"

/* Longest lock name in bytes (the width of the name columns). */
#define DLOCK_MAX_NAME_LEN 1024

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

/* What a caller may do (dlock_udf_server.c checks them with the server's ACL). */
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

/* The calling session, as far as the lock manager needs to know it. */
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
 * A name in a message (dlock_errors.c): control characters shown as '?',
 * cut with "..." to fit size; NUL-terminated, or of len bytes.
 */
extern const char *shown(const char *s, char *buf, size_t size);
extern const char *shown_len(const char *s, size_t len, char *buf, size_t size);

/*
 * Settings: the plugin's system variables (dlock_plugin.c), read by the
 * SQL functions at each call and by the manager at each batch.
 */
extern unsigned int dlock_queue_row_delay_ms;
extern unsigned int dlock_restart_grace_ms;
extern unsigned long long dlock_max_ttl_seconds;
extern unsigned long long dlock_default_ttl_seconds;	/* an owner key's lease without a ttl */

#endif							/* DLOCK_TYPES_H */
