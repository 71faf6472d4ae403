/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * dlock_mgr.h
 *		The lock manager of the MySQL/MariaDB plugin as the SQL functions and
 *		the plugin see it: one thread inside mariadbd runs the lock service
 *		(core/dlock_service.h) around the core lock manager
 *		(core/dlock_lm.h), the single writer of the dlock tables;
 *		the SQL functions hand it requests and sleep until it answers, which
 *		it does only after the batch that decided them has committed.
 *
 * Interface, by the file that holds it:
 *		dlock_mgr.c			mgr_start, mgr_stop, mgr_reload
 *		dlock_handoff.c		mgr_check_running, mgr_call, mgr_inspect,
 *							mgr_session_end
 *		dlock_access.c		mgr_namespace_check, mgr_capability_role,
 *							mgr_grant, mgr_set_quota
 *		dlock_stats.c		mgr_stats, mgr_stats_reset
 *		dlock_udf_locks.c	dlock_statement_end
 *
 * Free of MySQL headers (dlock_types.h).
 */
#ifndef DLOCK_MGR_H
#define DLOCK_MGR_H

#include "dlock_types.h"

/* The manager thread: started and stopped with the plugin. */
extern int	mgr_start(DlockErr *err);
extern void mgr_stop(void);

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
 * Grants it made that its client will never see are given back.
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
