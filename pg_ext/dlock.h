/* SPDX-License-Identifier: PostgreSQL */
/*
 * dlock.h
 *		Shared declarations of the dlock PostgreSQL extension.
 *
 * Backends hand requests to the dlock worker through one request slot per
 * PGPROC (indexed by pgprocno) in shared memory.  A backend has at most one
 * request outstanding, so its slot is a one-place mailbox:
 *
 *	FREE --backend--> SUBMITTED --worker--> ACCEPTED --worker--> STAGED
 *	STAGED --worker--> DONE --backend--> FREE
 *
 * A STAGED answer is committed but not yet confirmed by a synchronous
 * standby; the backend does not take it.  A worker that ends then leaves
 * it to its successor, which makes it DONE once a standby has everything
 * it loaded: a request decided and committed is never decided again.
 *
 * A backend whose wait must end while the worker does not answer (it is
 * stuck in an error loop, or its commit waits for a synchronous standby
 * that is gone) marks the request abandoned and leaves.  The worker frees
 * the slot of an abandoned request once it is decided, except for a grant:
 * that answer stays (DONE, still marked abandoned), and the backend's next
 * call releases it again before anything else (session end does the same).
 * The backend's next call waits until the slot is FREE or DONE.
 *
 * Every field of a slot is read and written under the slot's spinlock, by
 * copying: nobody works on a slot in place.  The worker publishes a result
 * only after the transaction that made it durable has committed, then sets
 * the backend's latch.  A backend that wants its pending request withdrawn
 * (cancel, timeout) sets 'cancel' and waits for DONE: the result then says
 * whether it was withdrawn or decided first.
 */
#ifndef DLOCK_H
#define DLOCK_H

#include "access/xlogdefs.h"
#include "datatype/timestamp.h"
#include "port/atomics.h"
#include "storage/latch.h"
#include "storage/spin.h"

#include "dlock_core.h"
#include "dlock_lm.h"			/* requests and answers: DLockOp, DLockStatus */

/* SQLSTATEs of our own (class DL). */
#define ERRCODE_DLOCK_NOT_HELD		MAKE_SQLSTATE('D','L','0','0','1')
#define ERRCODE_DLOCK_WITHDRAWN		MAKE_SQLSTATE('D','L','0','0','2')
#define ERRCODE_DLOCK_MODE_HELD		MAKE_SQLSTATE('D','L','0','0','3')
#define ERRCODE_DLOCK_CAPACITY		MAKE_SQLSTATE('D','L','0','0','4')

/* dlock_acquire_all: at most DLOCK_MAX_MULTI names, in at least this many bytes */
#define DLOCK_MULTI_BYTES 8192

/* A role's quotas (dlock.quotas, core rule 13); 0: no limit. */
typedef struct DLockQuotas
{
	int64		max_locks;		/* named locks of all its owners */
	int64		max_locks_per_owner;
	int64		max_bytes;		/* their names' and keys' bytes */
	int64		max_bytes_per_owner;
} DLockQuotas;

typedef enum DLockSlotState
{
	DLOCK_SLOT_FREE = 0,
	DLOCK_SLOT_SUBMITTED,
	DLOCK_SLOT_ACCEPTED,
	DLOCK_SLOT_STAGED,
	DLOCK_SLOT_DONE
} DLockSlotState;

#define DLOCK_ERRMSG_LEN 1024

typedef struct DLockSlot
{
	slock_t		mutex;

	/* the session using this slot; pid 0 when none */
	int			pid;
	TimestampTz session_start;
	bool		session_ended;	/* backend exited: worker cleans up, frees */

	DLockSlotState state;
	bool		cancel;			/* backend asks to withdraw the request */
	bool		cancel_timeout; /* ... because its timeout passed */
	bool		abandoned;		/* backend stopped waiting for the answer
								 * (see above) */
	uint64		seq;			/* submission order, for FIFO among a batch */

	/* request */
	DLockOp		op;
	int			mode;
	int64		ttl_us;			/* 0: no lease */
	int64		max_ttl_us;		/* dlock.max_ttl of the caller; 0: none */
	TimestampTz timeout_at;		/* 0: wait forever */
	bool		keep_place;		/* a withdrawal keeps the place (core 14) */
	int32		capacity;		/* a semaphore request (core 15); 0: a lock */
	int32		permits;
	bool		election;		/* a campaign (core 16) */
	int			value_len;		/* a campaign's or proclaim's value; -1: none */
	int			name_len;		/* bytes of all names, each NUL-terminated */
	int			nnames;			/* names, sorted and distinct */
	int			owner_len;		/* 0: the session is the owner */
	Oid			role;			/* the user that asked (GetUserId) */
	bool		any_role;		/* a dlock_admin: may use another role's key */
	DLockQuotas quotas;			/* its role's (dlock.quotas); 0: none */

	/* set by the worker once the request waits in the queue (committed) */
	int64		ticket;

	/* result */
	DLockStatus status;
	int64		token;
	TimestampTz expires_at;		/* 0: none */
	int32		count;
	int64		tokens[DLOCK_MAX_MULTI];	/* acquire_all: per name */
	char		errmsg[DLOCK_ERRMSG_LEN];

	/*
	 * names (names_size bytes), owner key (DLOCK_MAX_OWNER_LEN), a leader's
	 * value (DLOCK_MAX_VALUE_LEN)
	 */
	char		data[FLEXIBLE_ARRAY_MEMBER];
} DLockSlot;

/* The statistics behind dlock.stats (dlock_stats.c). */
typedef struct DLockStatsShared
{
	slock_t		mutex;
	DLmCounters now;			/* since the server started: the worker's */
	DLmCounters base;			/* as at the last dlock_stats_reset() */
	TimestampTz since;			/* the start or the last reset */
	int64		holders;		/* in the picture after the last batch */
	int64		waiting;
	int64		kept;
} DLockStatsShared;

typedef struct DLockShared
{
	slock_t		mutex;			/* protects the worker fields below */
	int			worker_pid;		/* 0: no worker running */
	Latch	   *worker_latch;
	bool		fresh;			/* shared memory new since the last start */

	pg_atomic_uint64 next_seq;
	pg_atomic_uint64 grants_generation;	/* bumped when dlock.grants changed */

	int			nslots;
	Size		slot_size;
	int			max_name_len;	/* as at postmaster start */
	int			names_size;		/* bytes for the names in a slot */
	DLockStatsShared stats;
	uint8		notify_secret[32];	/* keys the notifications' payloads */
	char		slots[FLEXIBLE_ARRAY_MEMBER];
} DLockShared;

extern DLockShared *dlock_shared;
/* Every SQL function's first step: 55000 unless the library was preloaded. */
extern void dlock_check_loaded(void);
/* Slots changed since the worker last looked: bit slotno % 64 of word
 * slotno / 64 (dlock_wake_worker sets it, slots_collect clears it). */
extern pg_atomic_uint64 *dlock_pending;

/* GUCs */
extern char *dlock_database;
extern int	dlock_default_ttl_ms;
extern int	dlock_max_ttl_s;
extern int	dlock_reap_interval_ms;
extern int	dlock_queue_row_delay_ms;
extern int	dlock_max_locks;
extern int	dlock_max_request_parts;
extern int	dlock_max_name_length;
extern int	dlock_restart_grace_ms;
extern bool dlock_synchronous_commit;
extern bool dlock_logged;

static inline DLockSlot *
dlock_slot(int slotno)
{
	return (DLockSlot *) (dlock_shared->slots +
						  (Size) slotno * dlock_shared->slot_size);
}

static inline char *
dlock_slot_name(DLockSlot *slot)
{
	return slot->data;
}

static inline char *
dlock_slot_owner(DLockSlot *slot)
{
	return slot->data + dlock_shared->names_size;
}

static inline char *
dlock_slot_value(DLockSlot *slot)
{
	return slot->data + dlock_shared->names_size + DLOCK_MAX_OWNER_LEN;
}

/* Mark a slot changed and wake the worker, if one runs. */
extern void dlock_wake_worker(int slotno);

/* Whether the op takes locks: a grant its caller never saw must be undone. */
static inline bool
dlock_op_grants(DLockOp op)
{
	return op == DLOCK_OP_ACQUIRE || op == DLOCK_OP_TRY || op == DLOCK_OP_ACQUIRE_ALL;
}

/* dlock_api.c */
extern void dlock_discard_session(void);
extern void dlock_check_name_arg(const char *name, int len);

/* dlock_notify.c */
extern void dlock_notify(const char *channel, const char *name);

/* dlock_grants.c */
extern void dlock_check_namespace(const char *name, int len);
extern void dlock_check_role(void);
extern bool dlock_is_admin(Oid user);
extern void dlock_quotas_of(Oid user, DLockQuotas *quotas);

/* dlock_worker.c */
extern PGDLLEXPORT void dlock_worker_main(Datum main_arg);

#endif							/* DLOCK_H */
