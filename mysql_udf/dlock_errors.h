/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * dlock_errors.h
 *		The wording of the lock manager's answers (dlock_errors.c): the core
 *		answers with codes and data (a deadlock's cycle, an error number),
 *		and these turn them into the messages the caller sees.
 *
 * Interface: dlock_set_err, shown, shown_len (dlock_types.h),
 * describe_cycle, describe_error, describe_mode_held, describe_withdrawn,
 * describe_revoked.
 */
#ifndef DLOCK_ERRORS_H
#define DLOCK_ERRORS_H

#include "dlock_handoff.h"

/* The deadlock cycle in wait order, one sentence per edge. */
extern void describe_cycle(const Slot *s, const DLmAnswer *a, DlockErr *err);
/* A core error; picture: for the count of the account's locks in a quota refusal. */
extern void describe_error(const Slot *s, DLmError e, const DLockManager *picture,
						   DlockErr *err);
/* The name is held already in a mode that does not include the one asked for. */
extern void describe_mode_held(const Slot *s, const DLmAnswer *a, DlockErr *err);
/* A waiting request ended by dlock_release_all() of its owner key. */
extern void describe_withdrawn(const Slot *s, DlockErr *err);
/* A lock an administrator released, with the reason (REVOKED). */
extern void describe_revoked(const Slot *s, const char *reason, DlockErr *err);

#endif							/* DLOCK_ERRORS_H */
