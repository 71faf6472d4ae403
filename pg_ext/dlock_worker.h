/*
 * dlock_worker.h
 *		What the worker's files share (dlock_worker.c: the loop and the
 *		slots; dlock_recovery.c: loading the picture and recovering from a
 *		failed batch).  Private to the worker process.
 */
#ifndef DLOCK_WORKER_H
#define DLOCK_WORKER_H

#include "nodes/pg_list.h"
#include "utils/palloc.h"

#include "dlock.h"

/* Tickets reserved per update of the stored counter. */
#define DLOCK_TICKET_RESERVE 10000

/* A request as taken from its slot. */
typedef struct Request
{
	int			slotno;
	uint64		seq;
	DLockOp		op;
	int			mode;
	int64		ttl_us;
	int64		max_ttl_us;		/* the caller's dlock.max_ttl; 0: none */
	TimestampTz timeout_at;
	int			pid;
	TimestampTz session_start;
	char	  **names;			/* acquire_all: all, sorted */
	int			nnames;
	char	   *owner;			/* NULL: the session */
	/* for a session that ended: where its last request stood */
	DLockSlotState state;
	DLockStatus status;
	bool		abandoned;
} Request;

/* What to tell a slot once the batch has committed. */
typedef struct Outcome
{
	bool		listed;
	bool		answered;
	bool		queued;			/* waits: publish its ticket */
	bool		end_session;	/* session cleaned up: free the slot */
	DLockStatus status;
	int64		token;
	TimestampTz expires_at;
	int32		count;
	int64		tokens[DLOCK_MAX_MULTI];
	char		errmsg[DLOCK_ERRMSG_LEN];
} Outcome;

/* dlock_worker.c */
extern DLockManager *lock_manager;
extern MemoryContext batch_cxt;
extern bool worker_ready;
extern int	isolated_slot;
extern bool isolate;
extern int	deferred_batches;

extern void batch_begin(void);
extern void collect(List **ended, List **withdrawn, List **fresh);
extern Outcome *outcome_of(int slotno);
extern void answer_error(int slotno, DLockStatus status, const char *msg);
extern void copy_message(char *dst, const char *msg);
extern void xact_begin(void);
extern void xact_commit(bool flush);
extern void store_batch(void);
extern void settle(void);
extern void publish(void);
extern void forget_outcomes(void);
extern void dlock_on_answer(void *arg, int slotno, const DLmAnswer *a);

/* dlock_recovery.c */
extern bool reload(void);
extern void recover(const char *message);
extern void refuse_all(DLockStatus status, const char *why);

#endif							/* DLOCK_WORKER_H */
