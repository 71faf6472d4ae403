/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * dlock_handoff.h
 *		The hand-off between a caller's thread and the manager thread
 *		(dlock_handoff.c): the slots, the queues of submitted requests,
 *		withdrawals, inspections and ended sessions, and the mutex and
 *		condition variables they are handed over with.
 *
 * Interface: the state 'handoff'; handoff_init, handoff_stop_locked (start
 * and stop); the manager's side: on_answer, mark_pending, answers_pending,
 * publish_locked, answer_error_locked, resubmit_locked.  The callers' side
 * is in dlock_mgr.h (mgr_call, mgr_inspect, mgr_session_end,
 * mgr_check_running).
 *
 * Locking: handoff.mu guards every field of 'handoff' and a slot's state,
 * withdraw flags, queue links and res/err.  A slot's request (call, names,
 * account ...) is written by its caller before submission and read by the
 * manager after; pres/perr/pending are the manager thread's
 * alone until publish_locked hands them over under mu.  The manager never
 * holds mu while it talks to the store or decides.
 */
#ifndef DLOCK_HANDOFF_H
#define DLOCK_HANDOFF_H

#include "dlock_mgr.h"
#include "dlock_service.h"

/* Calls in flight at once (requesters of the core). */
#define NSLOTS 4096

typedef enum SlotState
{
	SLOT_FREE = 0,
	SLOT_SUBMITTED,				/* in the submit queue */
	SLOT_ACCEPTED,				/* taken by the manager, not yet answered */
	SLOT_DONE					/* answered: res/err are the caller's */
} SlotState;

typedef struct Slot
{
	int			index;
	SlotState	state;
	bool		withdraw;		/* the caller gave up (timeout, kill) */
	bool		withdraw_listed;
	unsigned long long seq;		/* submission order */
	/* the request, written by the caller before submission */
	DlockCall	call;			/* as the SQL function made it (for messages) */
	/*
	 * As the service takes it: filled with the call (slot_copy); the
	 * session, the account's role and quotas when the manager collects it
	 */
	DLsRequest	ds;
	const char *names_z[DLOCK_MAX_MULTI];	/* ds.q.names */
	char	   *buf;
	size_t		buf_cap;
	unsigned long long conn_id;
	char		account[DLOCK_MAX_ACCOUNT_LEN + 1];
	DLockTime	submitted_at;
	/* an inspection instead of a request */
	MgrInspectFn inspect_fn;
	void	   *inspect_arg;
	/* the manager's: the answer of this batch, published after commit */
	bool		pending;
	DlockResult pres;
	DlockErr	perr;
	/* the caller's once DONE */
	DlockResult res;
	DlockErr	err;
	MgrCond		cond;
	struct Slot *next;			/* free list, submit queue */
	struct Slot *wnext;			/* withdraw list */
} Slot;

/* What the callers and the manager share; every field under mu. */
typedef struct Handoff
{
	MgrMutex	mu;
	pthread_cond_t work_cond;	/* the manager's: work arrived */
	pthread_condattr_t cond_attr;	/* CLOCK_MONOTONIC, for every condition */
	Slot	   *slots;			/* NSLOTS, indexed by requester number */
	Slot	   *free_slots;
	Slot	   *submit_head,
			   *submit_tail;
	Slot	   *withdraw_head;
	Slot	   *inspect_head,
			   *inspect_tail;
	unsigned long long *ended;	/* sessions ended, not yet taken */
	size_t		nended,
				ended_cap;
	unsigned long long next_seq;
	bool		stopping;		/* the manager thread is asked to end (its retry
								 * loops also read it without mu) */
	bool		running;		/* calls are taken */
	/* a caller's thread running a batch itself (dlock_mgr.c: batch_now_locked) */
	bool		batch_taken;	/* a caller runs a batch now */
	bool		idle;			/* the manager sleeps with nothing to do, and a
								 * caller may run a batch itself */
	bool		manager_waits;	/* the manager waits for that batch's end */
	DLockTime	manager_wakes_at;	/* when the sleeping manager looks again */
} Handoff;

extern Handoff handoff;

/*
 * Set up the conditions and the slots (the plugin's init, mu held); 0, or
 * -1 when out of memory.
 */
extern int	handoff_init(void);
/* The manager ended: calls still waiting get an error (mu held). */
extern void handoff_stop_locked(void);

/*
 * A call was submitted (mu held): wake the manager thread - or, when it
 * sleeps with nothing to do, run the batch in this thread (mu released
 * meanwhile; dlock_mgr.c).
 */
extern void batch_now_locked(void);

/* The service's answer callback (DLsConfig.answer); arg: where the manager keeps its service. */
extern void on_answer(void *arg, int requester, const DLmAnswer *a);
/* A slot has an answer of this batch, published after the commit. */
extern void mark_pending(Slot *s);
/* Whether the batch answers anyone. */
extern bool answers_pending(void);
/* Hand the slots' answers to their callers (mu held). */
extern void publish_locked(void);
/* Answer a call or inspection with an error at once (mu held). */
extern void answer_error_locked(Slot *s, int code, const char *msg);
/*
 * The picture is gone: the calls still waiting are submitted again in
 * their old order, or, when 'fail', answered with msg (mu held).
 */
extern void resubmit_locked(bool fail, const char *msg);

#endif							/* DLOCK_HANDOFF_H */
