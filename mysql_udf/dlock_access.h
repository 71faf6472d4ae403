/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * dlock_access.h
 *		Who may take which names, and how many (dlock_access.c): the
 *		accounts as the lock manager's roles, the namespace grants
 *		(dlock.grants) and the quotas (dlock.quotas).
 *
 * Interface: accounts_intern, accounts_name, quota_of, caches_load; the
 * callers' side in dlock_mgr.h (mgr_namespace_check, mgr_capability_role,
 * mgr_grant, mgr_set_quota).
 */
#ifndef DLOCK_ACCESS_H
#define DLOCK_ACCESS_H

#include "dlock_types.h"

/*
 * Accounts (user@host as CURRENT_USER() shows it) are the manager's roles
 * (DLmRequest.role): interned once, by the manager thread only.  0 is
 * never an account's id.
 */
extern uint32_t accounts_intern(const char *account, size_t len);
extern const char *accounts_name(uint32_t id);

/* An account's quota from dlock.quotas; a limit < 0: none (NULL). */
typedef struct Quota
{
	char	   *account;
	long long	limits[4];		/* max_locks, per owner, max_bytes, per owner */
} Quota;

/* The account's quota, or NULL (the manager thread's). */
extern const Quota *quota_of(const char *account);

/*
 * Read dlock.grants and dlock.quotas into the caches (the manager thread,
 * on the store connection); 0, or -1 with err (the caches unchanged but
 * the quotas, which are then empty).
 */
extern int	caches_load(DlockErr *err);

#endif							/* DLOCK_ACCESS_H */
