/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * dlock_semisync.h
 *		The server's semi-synchronous replication as a primary
 *		(dlock_semisync.c): whether its commits wait for a replica, and
 *		holding a batch's answers until the replica has acknowledged it.
 *
 * Interface: semisync_init, semisync_enabled, semisync_no_tx,
 * semisync_confirm.
 */
#ifndef DLOCK_SEMISYNC_H
#define DLOCK_SEMISYNC_H

#include "dlock_types.h"

/* Find the server's globals (the plugin's init). */
extern void semisync_init(void);
/* Whether this server is a semi-synchronous primary (its commits wait for a replica). */
extern bool semisync_enabled(void);
/* Commits that went without the replica's acknowledgement so far (semisync_enabled only). */
extern unsigned long semisync_no_tx(void);
/*
 * After a batch written while semisync_no_tx() was no_tx: wait until the
 * replica has acknowledged it; 0, or -1 with err (the server stops, or
 * this server became read-only).
 */
extern int	semisync_confirm(unsigned long no_tx, DlockErr *err);

#endif							/* DLOCK_SEMISYNC_H */
