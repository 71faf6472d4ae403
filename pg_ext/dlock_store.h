/* SPDX-License-Identifier: PostgreSQL */
/*
 * dlock_store.h
 *		The lock manager's tables (dlock_store.c): the worker loads the
 *		picture from them at start and writes each batch's changes to them.
 *
 * Interface: dlock_store_begin, dlock_store_commit (the worker's
 * transactions), dlock_store_confirmed, dlock_store_standby_waits, dlock_store_installed, dlock_store_set_logged,
 * dlock_store_load_counter, dlock_store_save_counter,
 * dlock_store_load_kept, dlock_store_load_held, dlock_store_batch,
 * dlock_store_forget_plans.
 *
 * Every function but the first four runs in the worker's transaction,
 * between dlock_store_begin and dlock_store_commit.
 */
#ifndef DLOCK_STORE_H
#define DLOCK_STORE_H

#include "access/xlogdefs.h"
#include "nodes/pg_list.h"

#include "dlock_lm.h"

extern bool dlock_store_installed(void);
extern void dlock_store_check_version(void);
extern void dlock_store_set_logged(bool logged);
extern int64 dlock_store_load_counter(void);
extern void dlock_store_save_counter(int64 hi);
/* Calls cb with the rows of each kept place (core 14) in dlock.queue. */
typedef DLmError (*dlock_kept_cb) (const DLmWaiterRow *rows, int n);
extern void dlock_store_load_kept(dlock_kept_cb cb);
/* Calls cb for every row of dlock.held. */
typedef void (*dlock_held_row_cb) (const DLmHolderRow *row);
extern void dlock_store_load_held(dlock_held_row_cb cb);
/* What the lock manager changed since its last dlm_settle: rows, counter, NOTIFY. */
extern void dlock_store_batch(DLockManager *lm);
extern void dlock_store_begin(void);
/*
 * flush: wait for the WAL flush (and a synchronous standby).  Returns the
 * WAL position a synchronous standby must confirm before the batch is
 * answered (dlock_store_confirmed); InvalidXLogRecPtr: none.
 */
extern XLogRecPtr dlock_store_commit(bool flush);
extern bool dlock_store_confirmed(XLogRecPtr upto);
extern bool dlock_store_standby_waits(void);
extern void dlock_store_forget_plans(void);

#endif							/* DLOCK_STORE_H */
