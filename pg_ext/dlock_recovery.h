/* SPDX-License-Identifier: PostgreSQL */
/*
 * dlock_recovery.h
 *		Loading the lock manager's picture from the tables (dlock_recovery.c).
 *
 * Interface: reload, recover.
 */
#ifndef DLOCK_RECOVERY_H
#define DLOCK_RECOVERY_H

#include "dlock.h"
#include "dlock_service.h"

/* The service's picture loaded from the tables; false if dlock is not installed. */
extern bool reload(DLockService *service);

/*
 * After a failed batch or load (dls_fail said which request failed
 * alone, if any): roll back and answer that request with the error.
 */
extern void recover(const char *message, int failed_slot);

#endif							/* DLOCK_RECOVERY_H */
