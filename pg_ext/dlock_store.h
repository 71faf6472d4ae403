/*
 * dlock_store.h
 *		The lock manager's tables (dlock_store.c): the worker loads the
 *		picture from them at start and writes each batch's changes to them.
 *
 * Interface: dlock_store_installed, dlock_store_set_logged,
 * dlock_store_load_counter, dlock_store_save_counter,
 * dlock_store_clear_queue, dlock_store_load_held, dlock_store_write,
 * dlock_store_notify, dlock_store_forget_plans.
 *
 * Every function runs in the worker's transaction, between SPI_connect and
 * SPI_finish.
 */
#ifndef DLOCK_STORE_H
#define DLOCK_STORE_H

#include "nodes/pg_list.h"

#include "dlock_lm.h"

extern bool dlock_store_installed(void);
extern void dlock_store_set_logged(bool logged);
extern int64 dlock_store_load_counter(void);
extern void dlock_store_save_counter(int64 hi);
extern void dlock_store_clear_queue(void);
/* Calls cb for every row of dlock.held. */
typedef void (*dlock_held_row_cb) (const DLmHolderRow *row);
extern void dlock_store_load_held(dlock_held_row_cb cb);
/* The touched holders and waiters of a batch (linked by touched_next). */
extern void dlock_store_write(DLmHolder *holders, DLmWaiter *waiters);
extern void dlock_store_notify(List *names);
extern void dlock_store_forget_plans(void);

#endif							/* DLOCK_STORE_H */
