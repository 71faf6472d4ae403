/* SPDX-License-Identifier: PostgreSQL */
/*
 * dlock_recovery.h
 *		Loading the lock manager's picture from the tables (dlock_recovery.c).
 *
 * Interface: reload, recover.
 */
#ifndef DLOCK_RECOVERY_H
#define DLOCK_RECOVERY_H

#include "access/xlogdefs.h"

#include "dlock.h"

/* A lock manager loaded from the tables; NULL if dlock is not installed. */
extern DLockManager *reload(XLogRecPtr *confirm_upto);

/*
 * After a failed batch: roll back and fail the request taken alone, if
 * any.  Returns whether the next batches take one request at a time.
 */
extern bool recover(const char *message, int isolated_slot);

#endif							/* DLOCK_RECOVERY_H */
