/*
 * dlock_store.h
 *		The lock manager of the MySQL/MariaDB plugin: the algorithm over the
 *		lock-store tables, the connection pool that reaches them and the
 *		in-process registry of waiting calls.
 *
 * Deliberately free of MySQL headers on both sides: dlock_udf.c includes
 * the server's UDF layout (mysql_com.h from the server), dlock_store.c the
 * client library (mysql.h), and the two must never meet in one unit.
 */
#ifndef DLOCK_STORE_H
#define DLOCK_STORE_H

#include <stddef.h>

/* Longest lock name in bytes (the width of the name columns). */
#define DLOCK_MAX_NAME_LEN 1024

/* Lease given to owner-keyed locks acquired without a TTL. */
#define DLOCK_DEFAULT_OWNER_TTL_US (60LL * 1000000LL)

/*
 * Longest accepted TTL: one day unless DLOCK_MAX_TTL_SECONDS in the server's
 * environment says otherwise (up to the ceiling; TIMESTAMP columns end in
 * 2038).  Longest timeout: the ceiling.
 */
#define DLOCK_DEFAULT_MAX_TTL_US (86400LL * 1000000LL)
#define DLOCK_CEILING_US (366LL * 86400LL * 1000000LL)
#define DLOCK_MAX_TIMEOUT_US DLOCK_CEILING_US

/* How often a waiting call looks at the tables for changes made elsewhere. */
#define DLOCK_RECHECK_MS 1000

/* How often a waiting call looks whether its statement was killed. */
#define DLOCK_KILL_CHECK_MS 100

/* Error numbers reported to the client (MySQL errno values). */
#define DLOCK_ER_UNKNOWN 1105		/* ER_UNKNOWN_ERROR, HY000 */
#define DLOCK_ER_ARGS 1210			/* ER_WRONG_ARGUMENTS, HY000 */
#define DLOCK_ER_TOO_LONG 1406		/* ER_DATA_TOO_LONG, 22001 */
#define DLOCK_ER_LOCK_WAIT 1205		/* ER_LOCK_WAIT_TIMEOUT, HY000 */
#define DLOCK_ER_INTERRUPTED 1317	/* ER_QUERY_INTERRUPTED, 70100 */
#define DLOCK_ER_ACCESS 1370		/* ER_PROCACCESS_DENIED_ERROR, 42000 */
#define DLOCK_ER_QUOTA 1226			/* ER_USER_LIMIT_REACHED, 42000 */

/* What a caller may do (dlock_udf.c checks them with the server's ACL). */
#define DLOCK_ACCESS_USER 1		/* take, renew and release locks */
#define DLOCK_ACCESS_MONITOR 2	/* see every lock, owner keys hidden */
#define DLOCK_ACCESS_ADMIN 4	/* everything: every key shown, the reaper */

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
typedef struct DlockCaller
{
	unsigned long long conn_id;	/* CONNECTION_ID() of the caller */
	int			(*killed) (void *arg);	/* nonzero once KILL QUERY/KILL hit it */
	void	   *killed_arg;
	int			access;			/* DLOCK_ACCESS_* bits */
	char		account[DLOCK_MAX_ACCOUNT_LEN + 1];	/* CURRENT_USER() */
	size_t		account_len;
	char		role[DLOCK_MAX_ACCOUNT_LEN + 1];	/* CURRENT_ROLE(), or "" */
	size_t		role_len;
} DlockCaller;

/* One request, already validated by the UDF layer. */
typedef struct DlockReq
{
	const char *fn;				/* SQL function name, for messages */
	const char *name;
	size_t		name_len;
	const char *owner;			/* NULL: owned by the calling session */
	size_t		owner_len;
	int			mode;			/* a DLockMode */
	long long	ttl_us;			/* < 0: none */
	long long	timeout_us;		/* < 0: wait until granted or killed */
} DlockReq;

/*
 * Process-wide set-up; returns 0 or fills err.  Safe to call from any
 * thread any number of times (pthread_once inside).  'self_socket' and
 * 'self_port' describe the server we run in (the default lock store),
 * 'server_id' names this server in the tables.
 */
extern int	dls_init(const char *self_socket, unsigned int self_port,
					 const char *server_id, DlockErr *err);

/*
 * dlock_admin may act with any account's owner key: when the caller is one
 * and req has a key that an account's rows use, who->account becomes that
 * account (the call acts for it).  A key no account uses stays the
 * caller's; one used by several accounts is an error.  0 or -1.
 */
extern int	dls_act_as_key_owner(DlockCaller *who, const DlockReq *req,
								 DlockErr *err);

/* Acquire; *token = fencing token, or 0 when not granted (timeout/try). */
extern int	dls_acquire(const DlockCaller *who, const DlockReq *req,
						int try_only, long long *token, DlockErr *err);

/* Give back a grant the caller will never learn of (its statement killed). */
extern int	dls_give_back(const DlockCaller *who, const DlockReq *req,
						  long long token, DlockErr *err);

/* Release one level; *released = 1 or 0 (with a warning in err). */
extern int	dls_release(const DlockCaller *who, const DlockReq *req,
						int *released, DlockErr *err);

/* Renew a lease; writes the new expiry (UTC text) or "" for no lease. */
extern int	dls_renew(const DlockCaller *who, const DlockReq *req,
					  char *expiry, size_t expiry_size, int *no_lease,
					  DlockErr *err);

/* Release every lock and withdraw every request of the owner/session. */
extern int	dls_release_all(const DlockCaller *who, const DlockReq *req,
							long long *count, DlockErr *err);

/*
 * Who holds a lock: connection ids of session holders, and owner keys,
 * joined by ", " in token order.  A key guards release, so it is shown
 * only to the connection that took the lock; anyone else sees "(owner
 * key)".  *out is malloc'ed (caller frees), NULL when the lock is free.
 */
extern int	dls_holder(const DlockCaller *who, const DlockReq *req, char **out,
					   size_t *out_len, DlockErr *err);

/*
 * Add (revoke = 0) or take back a namespace grant of dlock.grants;
 * *changed = 1 when the table changed.
 */
extern int	dls_grant(const char *fn, const char *grantee, size_t grantee_len,
					  const char *prefix, size_t prefix_len, int revoke,
					  int *changed, DlockErr *err);

/* Set an account's quota (limits: max_locks, max_locks_per_owner,
 * max_bytes, max_bytes_per_owner; < 0 none); all none removes it. */
extern int	dls_set_quota(const char *fn, const char *grantee,
						  size_t grantee_len, const long long limits[4],
						  DlockErr *err);

/* Expire leases and clean up after dead sessions; *count = rows ended. */
extern int	dls_reap(const DlockCaller *who, long long *count, DlockErr *err);

/* Close the pooled connections (library unload). */
extern void dls_shutdown(void);

#endif							/* DLOCK_STORE_H */
