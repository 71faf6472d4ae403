/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * dlock_load.h
 *		Loading the lock manager's picture from the tables, and what the
 *		manager does while it cannot (dlock_load.c): retry, or refuse
 *		because this server may not serve.
 *
 * Interface: reload, picture_drop, load_due, load_failed, load_succeeded,
 * refuse, load_starting_locked; the pacing of the manager's retries.
 */
#ifndef DLOCK_LOAD_H
#define DLOCK_LOAD_H

#include "dlock_handoff.h"

/* The store's own retries (a write again, a question again): the first pause. */
#define RETRY_MIN_MS 10
/* While the store cannot be reached (the server starting), calls wait this long. */
#define LOAD_WAIT_US (10LL * 1000000)

/*
 * Build the picture from the tables into *picturep (the manager's, dropped
 * first).  0, or with err -1 (the store cannot be reached: worth waiting),
 * -2 (not set up) or -3 (this server may not serve: refuse).
 */
extern int	reload(DLockService *service, DLockManager **picturep, DlockErr *err);
/* Drop the picture (*picturep becomes NULL). */
extern void picture_drop(DLockManager **picturep);

/*
 * No picture: whether to try loading now; if not, *wait_us is how long the
 * manager may sleep.  calls_waiting: requests or inspections are queued
 * (handoff.mu held).
 */
extern bool load_due(bool calls_waiting, long long *wait_us);
/*
 * A load failed with rc (reload); f: the service's pause and log (dls_fail).
 * The calls taken wait or get the error.
 */
extern void load_failed(int rc, const DlockErr *err, const DLsFailure *f,
						Slot *fresh, Slot *inspects);
/* A load succeeded: the manager serves. */
extern void load_succeeded(void);
/* This server may not serve (reload returned -3): the calls taken get why. */
extern void refuse(const DlockErr *why, Slot *fresh, Slot *inspects);
/* The plugin's init: why calls wait until the first load (handoff.mu held). */
extern void load_starting_locked(void);

#endif							/* DLOCK_LOAD_H */
