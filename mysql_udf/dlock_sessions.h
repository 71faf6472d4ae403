/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * dlock_sessions.h
 *		Sessions in the lock manager (dlock_sessions.c): a connection's
 *		identity in the picture, and the sessions that end without the
 *		server telling the plugin.
 *
 * Interface: session_pid, session_start, session_conn_id,
 * session_of_this_run, session_run_start, new_run_base, cmp_conn_ids,
 * sessions_due, sessions_check, sessions_next_check.
 */
#ifndef DLOCK_SESSIONS_H
#define DLOCK_SESSIONS_H

#include "dlock_types.h"

/* A session's identity in the picture, and back. */
extern int32_t session_pid(unsigned long long conn_id);
extern int64_t session_start(unsigned long long conn_id);
extern unsigned long long session_conn_id(int32_t pid, int64_t session_start);
/* Whether a session's start belongs to this server run. */
extern bool session_of_this_run(int64_t start);
/* The start of this run's sessions whose connection id fits in 31 bits. */
extern int64_t session_run_start(void);
/* A fresh random run: the session rows of before are no session of it; 0, or -1. */
extern int	new_run_base(void);

/* qsort/bsearch order of connection ids (unsigned long long). */
extern int	cmp_conn_ids(const void *a, const void *b);

/* Whether it is time to look at the sessions (a picture is loaded). */
extern bool sessions_due(const DLockManager *picture);
/* The sessions that hold or wait but are gone, appended to *gone; how many. */
extern int	sessions_check(DLockManager *picture, unsigned long long **gone, size_t *ngone);
/* When the next look is due (monotonic µs). */
extern DLockTime sessions_next_check(void);

#endif							/* DLOCK_SESSIONS_H */
