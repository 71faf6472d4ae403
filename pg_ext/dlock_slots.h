/* SPDX-License-Identifier: PostgreSQL */
/*
 * dlock_slots.h
 *		The worker's side of the slot protocol (dlock_slots.c): taking
 *		requests, withdrawals and session ends from the slots, keeping each
 *		slot's answer until its batch commits, and publishing it.
 *
 * Interface: slots_init, slots_batch_begin, slots_collect, slots_scan_all,
 * slots_end_session, slots_unconfirmed, slots_answers_ready, slots_stage,
 * slots_release_staged, slots_adopt_staged, slots_forget,
 * slots_fail_isolated, slots_refuse_all, slots_work_pending, dlock_on_answer.
 */
#ifndef DLOCK_SLOTS_H
#define DLOCK_SLOTS_H

#include "nodes/pg_list.h"
#include "utils/palloc.h"

#include "dlock.h"
#include "dlock_service.h"

/*
 * A request as taken from its slot: as the service takes it (ds.q.requester
 * is the slot's number), and what the worker needs besides.
 */
typedef struct Request
{
	DLsRequest	ds;
	uint64		seq;			/* submission order */
	bool		withdraw_timeout;	/* withdrawn because its timeout passed */
	/* for a session that ended: where its last request stood */
	DLockSlotState state;
	DLockStatus status;
	bool		abandoned;
} Request;

extern void slots_init(void);
/* The batch's memory context; a deferred batch keeps its outcomes. */
extern MemoryContext slots_batch_begin(bool keep);
extern void slots_collect(List **ended, List **withdrawn, List **fresh, bool one_fresh);
extern List *slots_unconfirmed(void);
/* The next collect looks at every slot, marked or not. */
extern void slots_scan_all(void);
extern void slots_end_session(int slotno);
extern bool slots_answers_ready(void);
extern void slots_stage(DLockManager *lm);
extern void slots_release_staged(void);
extern void slots_adopt_staged(void);
extern void slots_forget(void);
extern void slots_fail_isolated(int slotno, const char *message);
extern void slots_refuse_all(DLockStatus status, const char *why);
extern bool slots_work_pending(void);
/* The lock manager's answer callback (DLmConfig.answer). */
extern void dlock_on_answer(void *arg, int slotno, const DLmAnswer *a);

#endif							/* DLOCK_SLOTS_H */
