/* SPDX-License-Identifier: PostgreSQL */
/*-------------------------------------------------------------------------
 *
 * dlock_admin.h
 *		The worker's side of the administrators' force release
 *		(dlock_admin.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_ADMIN_H
#define DLOCK_ADMIN_H

#include "dlock_lm.h"
#include "dlock_slots.h"

/* A force release carried out (true), or not one (false: run it as usual). */
extern bool dlock_admin_execute(DLockManager *lm, Request *r, TimestampTz now);
/* After the lock manager answered r: tell a revoked owner why. */
extern void dlock_admin_answered(Request *r, TimestampTz now);
/* In the batch's transaction: NOTIFY dlock_revoked for what was released. */
extern void dlock_admin_notify(void);

#endif							/* DLOCK_ADMIN_H */
