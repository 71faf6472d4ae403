/* SPDX-License-Identifier: PostgreSQL */
/*
 * dlock_lm.h
 *		The dlock lock manager: the picture of owners, locks, holders and
 *		waiters and the rules that decide every request.  Plain C, no
 *		database header; the specification is core/README.
 *
 * Interface:
 *		dlm_create, dlm_destroy			a manager, memory from the caller
 *		dlm_set_counter, dlm_load_holder, dlm_load_kept, dlm_drop_sessions,
 *		dlm_extend_leases, dlm_load_done	rebuild the picture from the store
 *		dlm_request, dlm_withdraw, dlm_session_end, dlm_expire
 *										events, each with the current time
 *		dlm_next_expiry					when the next lease runs out
 *		dlm_queue_rows_due, dlm_next_queue_row, dlm_set_queue_row_delay
 *										waiters' rows only after a delay
 *		dlm_touched_holder, dlm_touched_waiter, dlm_counter_dirty,
 *		dlm_batch_durable, dlm_notified_lock, dlm_leader_change
 *										what to persist, flush and announce
 *		dlm_settle						the store matches: free what left
 *		dlm_lookup, dlm_waiter_of, dlm_nlocks, dlm_broken
 *										looking at the picture
 *
 * Answers go to a callback, one or more per requester and event (a request
 * can be queued and granted in one batch: the last answer counts).  The
 * caller must not publish an answer before the batch's changes are stored
 * (and flushed when dlm_batch_durable or dlm_counter_dirty says so).
 *
 * The manager is deterministic: the same events with the same times give
 * the same answers, tokens and changes, whatever the hash seed.
 */
#ifndef DLOCK_LM_H
#define DLOCK_LM_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#include "dlock_core.h"
#include "dlock_list.h"

/* Microseconds on the caller's clock; 0 means "never" where a time is optional. */
typedef int64_t DLockTime;

/* Requests, as both databases submit them. */
typedef enum DLockOp
{
	DLOCK_OP_NONE = 0,
	DLOCK_OP_ACQUIRE,			/* wait in the queue if needed */
	DLOCK_OP_TRY,				/* grant now or refuse */
	DLOCK_OP_RELEASE,			/* one level; several names only to undo an
								 * acquire_all grant nobody collected */
	DLOCK_OP_RENEW,
	DLOCK_OP_RELEASE_ALL,
	DLOCK_OP_CONVERT,			/* change the mode of a held lock */
	DLOCK_OP_ACQUIRE_ALL,		/* several names, all or none */
	DLOCK_OP_PROCLAIM,			/* a leader's new value (16) */
	/*
	 * (adapters) an administrator's release of another owner's locks: the
	 * adapter carries it out with RELEASE / RELEASE_ALL requests on the
	 * holders' behalf; the lock manager refuses these ops itself
	 */
	DLOCK_OP_FORCE_RELEASE,
	DLOCK_OP_FORCE_RELEASE_ALL
} DLockOp;

/* Answers: one list for both databases, each words them its own way. */
typedef enum DLockStatus
{
	DLOCK_STATUS_NONE = 0,
	DLOCK_STATUS_GRANTED,		/* token, expires_at, count */
	DLOCK_STATUS_REFUSED,		/* try-acquire could not be granted now */
	DLOCK_STATUS_RELEASED,		/* token, count: levels left */
	DLOCK_STATUS_NOT_HELD,		/* release, renew or convert of a lock not held */
	DLOCK_STATUS_RENEWED,		/* token, expires_at, count */
	DLOCK_STATUS_COUNT,			/* release_all: count */
	DLOCK_STATUS_CANCELED,		/* withdrawn at the requester's request */
	DLOCK_STATUS_WITHDRAWN,		/* withdrawn by release_all of its owner */
	DLOCK_STATUS_MODE_HELD,		/* held already in a weaker mode: name_index, count */
	DLOCK_STATUS_DEADLOCK,		/* waiting would close a cycle: cycle */
	DLOCK_STATUS_NOT_READY,		/* (adapters) the lock manager cannot serve */
	DLOCK_STATUS_ERROR,			/* error: a DLmError */
	DLOCK_STATUS_QUEUED,		/* waits: token is its ticket */
	DLOCK_STATUS_KEPT,			/* withdrawn with keep_place: its place is
								 * kept (token: its ticket, expires_at: the
								 * place's lease) (14) */
	DLOCK_STATUS_REVOKED,		/* (adapters) NOT_HELD because an administrator
								 * released it; the adapter tells the reason */
	DLOCK_STATUS_UNCONFIRMED	/* (adapters) no synchronous standby confirmed
								 * the commit that decided it: a grant is
								 * released again; the adapter tells which */
} DLockStatus;

/* Requests on several names (acquire_all) name at most this many. */
#define DLOCK_MAX_MULTI 64

typedef enum DLmError
{
	DLM_OK = 0,
	DLM_ERR_BAD_REQUEST,		/* unknown op or mode, bad requester, bad name count */
	DLM_ERR_BAD_NAME,			/* a name dlock_check_name refuses */
	DLM_ERR_BAD_OWNER,			/* an owner key dlock_check_owner refuses */
	DLM_ERR_NOT_SORTED,			/* acquire_all names not sorted and distinct */
	DLM_ERR_CONVERSION_WAITING, /* a conversion of this lock by this owner waits */
	DLM_ERR_NO_MEMORY,			/* the allocator failed: the manager is broken */
	DLM_ERR_NOT_YOURS,			/* the owner key holds or waits for another role */
	DLM_ERR_TOO_MANY_PARTS,		/* a request's parts over max_parts (13) */
	DLM_ERR_NO_SPACE,			/* holders and waiters would pass max_objects (13) */
	DLM_ERR_OWNER_QUOTA,		/* the owner's locks would pass its quota (13) */
	DLM_ERR_ROLE_QUOTA,			/* the role's locks would pass its quota (13) */
	DLM_ERR_KEEP_PLACE,			/* keep_place without an owner key and a
								 * lease, or on a try (14) */
	DLM_ERR_BAD_SEMAPHORE,		/* capacity or permits out of range, or a
								 * semaphore request that is not one flat
								 * name (15) */
	DLM_ERR_IS_SEMAPHORE,		/* the name is a semaphore: not for this request (15) */
	DLM_ERR_IS_LOCK,			/* the name is a lock: not for this request (15) */
	DLM_ERR_CAPACITY,			/* the semaphore is in use with another capacity (15) */
	DLM_ERR_HELD_ONCE,			/* the owner holds it already: a semaphore's
								 * permits, an election's lead (15, 16) */
	DLM_ERR_IS_ELECTION,		/* the name is a leader election (16) */
	DLM_ERR_BAD_ELECTION		/* a campaign that is not one flat name in EX
								 * with a value of at most DLOCK_MAX_VALUE_LEN (16) */
} DLmError;

/* A leader's value (16), bytes. */
#define DLOCK_MAX_VALUE_LEN 1024

extern const char *dlm_error_message(DLmError err);

/* Memory: every byte the manager uses comes from here. */
typedef struct DLmAllocator
{
	void	   *(*alloc) (void *arg, size_t size);	/* NULL: out of memory */
	void		(*free) (void *arg, void *ptr, size_t size);
	void	   *arg;
} DLmAllocator;

typedef struct DLmLock DLmLock;
typedef struct DLmOwner DLmOwner;

/*
 * A node of the manager's chained hash tables (dlock_lm_hash.c).  No hash
 * kept: a table asks its own function when it grows or removes (a word
 * per object saved, core/README 11).
 */
typedef struct DLmHashNode
{
	struct DLmHashNode *next;
} DLmHashNode;
typedef struct DLmHolder DLmHolder;
typedef struct DLmWaiter DLmWaiter;

/* One edge of a deadlock cycle: the waiter's owner waits for the blocker's. */
typedef struct DLmCycleStep
{
	bool		waiter_keyed;	/* an owner key (secret: not given) or a session */
	int32_t		waiter_pid;		/* keyed: the process that asked; else the session */
	const char *lock;			/* the lock it waits for */
	bool		held;			/* the blocker holds it (else queued earlier) */
	bool		blocker_keyed;
	int32_t		blocker_pid;
} DLmCycleStep;

typedef struct DLmAnswer
{
	DLockStatus status;
	int64_t		token;			/* GRANTED, RELEASED, RENEWED; QUEUED: ticket */
	DLockTime	expires_at;		/* GRANTED, RENEWED: 0 for no lease */
	int32_t		count;			/* GRANTED, RENEWED: level; RELEASED: levels
								 * left; COUNT: how many; MODE_HELD: held mode */
	int			name_index;		/* MODE_HELD: which name */
	int			ntokens;		/* GRANTED acquire_all: a token per name */
	const int64_t *tokens;
	int			ncycle;			/* DEADLOCK: the cycle, the new wait first */
	const DLmCycleStep *cycle;
	DLmError	error;			/* ERROR */
	const char *reason;			/* REVOKED (the service): the administrator's reason */
} DLmAnswer;

/* The answer is the caller's to copy; its pointers live for the call. */
typedef void (*DLmAnswerFn) (void *arg, int requester, const DLmAnswer *answer);

/* No answer wanted (an undo, a clean-up). */
#define DLM_NOBODY (-1)

typedef struct DLmConfig
{
	DLmAllocator alloc;
	uint64_t	seed[2];		/* hash seed: fresh at each start */
	int			nrequesters;	/* requesters are 0 .. nrequesters - 1 */
	size_t		max_name_len;	/* longest name, bytes */
	int64_t		ticket_reserve; /* tickets reserved per counter update */
	/*
	 * A waiter's row is written only once it has waited this long (9): a
	 * shorter wait never reaches the store.  0: in the batch it queues in.
	 */
	int64_t		queue_row_delay_us;
	DLmAnswerFn answer;
	void	   *answer_arg;
	/*
	 * The caller frees all the manager's memory at once (a memory context
	 * reset) and never calls dlm_destroy: no per-allocation bookkeeping.
	 */
	bool		untracked;
	/*
	 * Limits (13), 0 for none: holders and waiting parts in all, which
	 * bounds the manager's memory; the parts one request may ask for (each
	 * name counts its path depth).
	 */
	int64_t		max_objects;
	int			max_parts;
} DLmConfig;

typedef struct DLmRequest
{
	DLockOp		op;
	int			requester;		/* who is answered; DLM_NOBODY: nobody */
	const char *owner_key;		/* NULL: the session below owns the lock */
	int32_t		pid;			/* the session that asks */
	int64_t		session_start;
	int			mode;			/* acquire, try, acquire_all, convert */
	const char *const *names;	/* acquire_all: sorted, distinct */
	int			nnames;
	int64_t		ttl_us;			/* lease; 0: none (renew: the lease's own) */
	int64_t		max_ttl_us;		/* renew: clamp; 0: none */
	DLockTime	timeout_at;		/* kept with a waiter; the caller withdraws */
	/*
	 * The role that asks (the adapter's user id).  An owner key that holds
	 * or waits for something belongs to the role that made it (12): another
	 * role's request with it is refused, unless any_role (an administrator).
	 */
	uint32_t	role;
	bool		any_role;
	/*
	 * Quotas of the asker (13), 0 for none: named locks held or waited for
	 * by all the owners of the role, and by this owner; and their bytes
	 * (each the name's length plus the owner key's).
	 */
	int64_t		role_max_locks;
	int64_t		owner_max_locks;
	int64_t		role_max_bytes;
	int64_t		owner_max_bytes;
	/*
	 * acquire, acquire_all (14): a withdrawal keeps the request in line
	 * under a lease of ttl_us, for the owner's next call to resume.
	 */
	bool		keep_place;
	/*
	 * acquire, try (15): capacity > 0 asks for 'permits' (1 .. capacity) of
	 * the counting semaphore 'names[0]'; 0: a lock (mode applies).
	 */
	int32_t		capacity;
	int32_t		permits;
	/*
	 * acquire, try (16): a campaign for the lead of the election names[0]
	 * (mode EX), publishing 'value'; proclaim: the leader's new value.
	 */
	bool		election;
	const char *value;
} DLmRequest;

/* Where a holder or waiter stands against the store (one byte). */
typedef struct DLmPersist
{
	bool		stored:1;		/* a row for it is in the store */
	bool		dirty:1;		/* the row needs an update */
	bool		dead:1;			/* gone from the picture: delete the row */
	bool		listed:1;		/* among the touched */
} DLmPersist;

/*
 * The picture's objects.  The caller reads the public fields (to store
 * rows, to show them); the links are the manager's.  Owners, locks and
 * holders order their fields so that nothing pads: a held lease is one of
 * each, and there may be a million (core/README 11).
 */
struct DLmOwner
{
	const char *key;			/* owner key; NULL: a session */
	int64_t		session_start;
	int64_t		nnamed;			/* named locks it holds or waits for (13) */
	int64_t		nbytes;			/* their bytes: name and key lengths (13) */
	int32_t		pid;			/* a session: its process */
	uint32_t	role;			/* a key's: the role whose request filled it (12) */
	/* private */
	DLmHashNode hash_node;
	DLmList		holders;		/* DLmHolder.owner_link */
	DLmList    *waiters;		/* DLmWaiter.owner_link; until its first,
								 * dlm_no_waiters (empty, read-only) */
	/* on the manager's lists (dlock_lm_int.h DLmVec) */
	bool		maybe_empty:1;
	bool		recheck_listed:1;	/* its waiting groups to look at again (6.2) */
	char		key_bytes[];	/* a key's: 'key' points here */
};

/*
 * A lock's line (private): made for its first waiter and kept until the
 * lock goes; most locks never have one (a held lease is a lock with one
 * holder), and share dlm_no_line, empty and read-only, meanwhile.
 */
typedef struct DLmLine
{
	DLmList		converts;		/* DLmWaiter.lock_link: served first */
	DLmList		waiters;		/* DLmWaiter.lock_link, ticket order */
	int32_t		nwaiting[DLOCK_NMODES];
	int32_t		nconverting[DLOCK_NMODES];
} DLmLine;

/* Fields ordered so that nothing pads: a million leases, a million locks. */
struct DLmLock
{
	int32_t		capacity;		/* a semaphore's (15); 0: a lock */
	int32_t		permits_held;	/* a semaphore's permits held */
	int32_t		nheld[DLOCK_NMODES];
	/* private */
	DLmHashNode hash_node;
	DLmList		holders;		/* DLmHolder.lock_link, grant order */
	DLmLine    *line;			/* its waiters and conversions */
	uint32_t	name_len;
	bool		announced:1;	/* notified since its last new holder */
	/* on the manager's lists (dlock_lm_int.h DLmVec) */
	bool		maybe_empty:1;
	bool		notify_listed:1;
	bool		scan_listed:1;
	bool		leader_listed:1;
	/* public */
	bool		election:1;		/* a leader election's (16) */
	char		name[];			/* the name's bytes follow, with a '\0' */
};

/*
 * What only some holders need (a kept level, a semaphore's permits, a
 * leader's value): made on first use and kept until the holder goes;
 * read through dlm_holder_value, _kept, _permits, _stored_permits.
 */
typedef struct DLmHolderExtra
{
	char	   *value;			/* a leader's (16); NULL otherwise */
	/* levels granted to kept places with no call waiting, uncollected (14) */
	int32_t		kept;
	int32_t		permits;		/* of a semaphore (15); 0 for a lock */
	int32_t		stored_permits; /* the stored row's permits (with stored_mode) */
} DLmHolderExtra;

struct DLmHolder
{
	DLmLock    *lock;
	DLmOwner   *owner;
	int64_t		token;
	int64_t		stored_token;	/* the token its stored row has */
	int64_t		backend_start;
	DLockTime	granted_at;
	DLockTime	expires_at;		/* 0: no lease */
	int64_t		ttl_us;			/* 0: no lease */
	DLmHolderExtra *extra;		/* NULL: no value, kept 0, permits 0 */
	int32_t		count;
	int32_t		pid;			/* the session that acquired it */
	uint32_t	role;			/* counted and shown under (12): an owner
								 * key's role, or the role of the session's
								 * request that took it */
	int8_t		stored_mode;	/* the stored row's mode (and permits): whether
								 * an update weakens the row (a store's order) */
	int8_t		mode;
	bool		implied;		/* an intention held for locks below */
	DLmPersist	p;
	/* private */
	int32_t		expiry_pos;		/* index in the lease heap; -1: none */
	DLmLink		lock_link;
	DLmLink		owner_link;
	DLmHashNode pair_node;		/* in the hash by (lock, owner) */
};

/* A leader's value (16); NULL otherwise. */
static inline const char *
dlm_holder_value(const DLmHolder *h)
{
	return h->extra ? h->extra->value : NULL;
}

/* Levels granted to kept places with no call waiting, uncollected (14). */
static inline int32_t
dlm_holder_kept(const DLmHolder *h)
{
	return h->extra ? h->extra->kept : 0;
}

/* A semaphore holder's permits (15); 0 for a lock. */
static inline int32_t
dlm_holder_permits(const DLmHolder *h)
{
	return h->extra ? h->extra->permits : 0;
}

/* The stored row's permits. */
static inline int32_t
dlm_holder_stored_permits(const DLmHolder *h)
{
	return h->extra ? h->extra->stored_permits : 0;
}

/* The parts of one request that must be granted together. */
typedef struct DLmGroup
{
	DLmWaiter **parts;			/* the named parts first, in name order */
	int			nparts;
	int			nnamed;
	int			capacity;
} DLmGroup;

struct DLmWaiter
{
	DLmLock    *lock;
	DLmOwner   *owner;
	DLmHolder  *holder;			/* a conversion: of this holder */
	bool		implied;		/* an intention part of a path request */
	int			mode;			/* wanted, or the conversion's target */
	int64_t		ticket;
	int			requester;
	int32_t		pid;
	int64_t		backend_start;
	uint32_t	role;			/* as a holder's */
	DLockTime	since;
	DLockTime	timeout_at;
	int64_t		ttl_us;
	int64_t		request;		/* the ticket of the request's first part */
	int32_t		permits;		/* of a semaphore (15); 0 for a lock */
	char	   *value;			/* a campaign's (16); NULL otherwise */
	bool		keep;			/* made with keep_place (14) */
	DLockTime	kept_until;		/* a kept place no call waits for: its lease
								 * end (every part); 0: a call waits */
	DLmPersist	p;
	/* private */
	DLmLink		lock_link;
	DLmLink		owner_link;
	DLmLink		kept_link;		/* first part of a kept place: by kept_until */
	DLmGroup   *group;			/* a request on several locks */
	DLmLink		young_link;		/* not yet due for a row; else unlinked */
};

typedef struct DLockManager DLockManager;

/*
 * Statistics (counted from the answers and the events, since the start or
 * the last dlm_stats_reset).  A wait is a request answered QUEUED; it ends
 * granted, withdrawn, kept, refused by a deadlock or by an error.  The
 * wait-time histogram counts the granted waits by their length, bucket i
 * for waits up to dlm_wait_bounds_us[i] (the last: longer ones).
 */
#define DLM_WAIT_BUCKETS 11
extern const int64_t dlm_wait_bounds_us[DLM_WAIT_BUCKETS - 1];

typedef struct DLmStats
{
	int64_t		requests;		/* every dlm_request */
	int64_t		grants;			/* requests answered GRANTED */
	int64_t		grants_immediate;	/* ... without queueing first */
	int64_t		waits;			/* requests that queued */
	int64_t		withdrawn;		/* waits given up (the requester's withdrawal,
								 * another connection's release_all) */
	int64_t		kept;			/* waits that ended keeping their place */
	int64_t		deadlocks;
	int64_t		refused;		/* try-requests not granted */
	int64_t		errors;			/* requests answered with an error */
	int64_t		releases;		/* release calls that released */
	int64_t		renewals;
	int64_t		conversions;	/* conversions granted */
	int64_t		expiries;		/* leases that ran out */
	int64_t		session_cleanups;	/* ended sessions that held or waited */
	int64_t		wait_us_sum;	/* the granted waits' time */
	int64_t		wait_buckets[DLM_WAIT_BUCKETS];
} DLmStats;

extern const DLmStats *dlm_stats(const DLockManager *m);
extern void dlm_stats_reset(DLockManager *m);

/*
 * What a database's adapter counts around the lock manager, for its
 * statistics view: the manager's own, carried across managers (a reload
 * makes a new one, starting from zero), and the adapter's batches.  Every
 * field an int64_t, so that copies add and subtract as arrays.
 */
typedef struct DLmCounters
{
	DLmStats	core;
	int64_t		timeouts;		/* waits given up by their timeout */
	int64_t		cancels;		/* ... by a cancel, kill or the session's end */
	int64_t		batches;
	int64_t		batch_requests; /* new requests in them */
	int64_t		commits;
	int64_t		commit_us;		/* time in writing and committing batches */
	int64_t		handoffs;		/* waiting requests granted */
	int64_t		handoff_us_sum; /* from their batch's start to the answer */
	int64_t		handoff_buckets[DLM_WAIT_BUCKETS];
	DLmStats	last;			/* the manager's as at the last batch */
} DLmCounters;

/*
 * After a batch was answered: its requests, whether it wrote (and how long
 * that took), and its hand-offs, each handoff_us from the batch's start.
 */
extern void dlm_counters_batch(DLmCounters *c, const DLockManager *m, int nfresh,
							   bool wrote, int64_t write_us, int64_t handoff_us);
/* Holders, waiting parts and kept places in the picture now. */
extern void dlm_sizes(const DLockManager *m, int64_t *holders, int64_t *waiting,
					  int64_t *kept);

/* NULL if the allocator failed. */
extern DLockManager *dlm_create(const DLmConfig *config);
/*
 * Frees everything, also after DLM_ERR_NO_MEMORY left the picture
 * half-done (unless config.untracked: then the caller frees).
 */
extern void dlm_destroy(DLockManager *m);

/* Loading: tickets from hi on (below it may have been handed out). */
extern void dlm_set_counter(DLockManager *m, int64_t hi);

typedef struct DLmHolderRow
{
	const char *name;
	const char *owner_key;		/* NULL: a session's */
	int32_t		pid;
	int64_t		backend_start;
	int			mode;
	bool		implied;
	int32_t		count;
	int64_t		token;
	DLockTime	granted_at;
	DLockTime	expires_at;
	int64_t		ttl_us;
	uint32_t	role;			/* its owner's role (the first row loaded says) */
	int32_t		kept;			/* levels granted to kept places, uncollected (14) */
	int32_t		capacity;		/* a semaphore's holder (15): its capacity ... */
	int32_t		permits;		/* ... and permits; 0, 0: a lock's */
	const char *value;			/* a leader's (16): an election's; NULL: not */
} DLmHolderRow;

/* A stored holder row into the picture (as stored: nothing to write). */
extern DLmError dlm_load_holder(DLockManager *m, const DLmHolderRow *row);

/*
 * A kept place (14) as stored: one row per part, in ticket order (the named
 * parts first, as queued).  Loaded with no call waiting; the adapter gives
 * kept_until (a place whose call was waiting at the crash: now + ttl).
 */
typedef struct DLmWaiterRow
{
	const char *name;
	const char *owner_key;		/* required: only owner keys keep places */
	int32_t		pid;
	int64_t		backend_start;
	int			mode;
	bool		implied;
	int64_t		ticket;
	DLockTime	since;
	DLockTime	kept_until;
	int64_t		ttl_us;
	uint32_t	role;
	int32_t		capacity;		/* a semaphore's request (15); 0: a lock's */
	int32_t		permits;
	const char *value;			/* a campaign's (16); NULL: not one */
} DLmWaiterRow;

/* One kept request (all its parts) into the picture, before any event. */
extern DLmError dlm_load_kept(DLockManager *m, const DLmWaiterRow *rows, int n);
/* After loading: what the loaded picture allows is granted (no answers). */
extern void dlm_load_done(DLockManager *m, DLockTime now);

/* Remove the holders of sessions 'alive' says are gone (rows deleted at store). */
typedef bool (*DLmSessionAliveFn) (void *arg, int32_t pid, int64_t session_start);
extern int	dlm_drop_sessions(DLockManager *m, DLmSessionAliveFn alive, void *arg);

/* Leases and kept places running out before 'until' run until then (a restart's grace). */
extern int	dlm_extend_leases(DLockManager *m, DLockTime until);

/* Events.  Each hands on what it frees before it returns. */
extern DLmError dlm_request(DLockManager *m, const DLmRequest *r, DLockTime now);
/* Withdraw the requests of these requesters (all first, then hand on). */
extern void dlm_withdraw(DLockManager *m, const int *requesters, int n, DLockTime now);
/* A session ended: its waiting request (if requester >= 0) and its locks. */
extern void dlm_session_end(DLockManager *m, int32_t pid, int64_t session_start,
							int requester, DLockTime now);
/* Release leases and end kept places that ran out by now, at most max; returns how many. */
extern int	dlm_expire(DLockManager *m, DLockTime now, int max);
/*
 * Waiters that by now have waited queue_row_delay_us join the batch's rows,
 * or half of it if the batch is stored anyway (a row then rides along with
 * a commit that happens regardless); returns how many.
 */
extern int	dlm_queue_rows_due(DLockManager *m, DLockTime now, bool stored_anyway);
/* When the next waiter is due for a row; 0: none is waiting for one. */
extern DLockTime dlm_next_queue_row(const DLockManager *m);
extern void dlm_set_queue_row_delay(DLockManager *m, int64_t us);
/* New limits (a reload): max_objects and max_parts as in DLmConfig. */
extern void dlm_set_limits(DLockManager *m, int64_t max_objects, int max_parts);
/* Named locks held or waited for by the owners of a role, and their bytes (13). */
extern int64_t dlm_role_locks(const DLockManager *m, uint32_t role);
extern int64_t dlm_role_bytes(const DLockManager *m, uint32_t role);
/* When the soonest lease or kept place runs out; 0: none. */
extern DLockTime dlm_next_expiry(const DLockManager *m);

/* The batch: what changed since the last dlm_settle. */
/* The i-th holder touched (its row to write), from 0; NULL past the last. */
extern DLmHolder *dlm_touched_holder(const DLockManager *m, size_t i);
extern DLmWaiter *dlm_touched_waiter(const DLockManager *m, size_t i);
extern bool dlm_counter_dirty(const DLockManager *m, int64_t *hi);
extern bool dlm_batch_durable(const DLockManager *m);
/* The i-th lock announced (8) in the batch, from 0; NULL past the last. */
extern DLmLock *dlm_notified_lock(const DLockManager *m, size_t i);
/*
 * The i-th election whose leader or its value changed (16) in the batch,
 * from 0; NULL past the last (adapter: NOTIFY dlock_leader).
 */
extern DLmLock *dlm_leader_change(const DLockManager *m, size_t i);
/* The store has the changes: rows match, dead objects and empty locks go. */
extern void dlm_settle(DLockManager *m);

/* Looking */
extern DLmLock *dlm_lookup(const DLockManager *m, const char *name);
extern DLmWaiter *dlm_waiter_of(const DLockManager *m, int requester);
extern size_t dlm_nlocks(const DLockManager *m);
extern bool dlm_broken(const DLockManager *m);

/* Iteration over a lock's holders and queue (conversions, then waiters). */
extern DLmHolder *dlm_lock_holders(const DLmLock *lock);
extern DLmHolder *dlm_holder_next(const DLmHolder *h);
extern DLmWaiter *dlm_lock_queue(const DLmLock *lock);
extern DLmWaiter *dlm_waiter_next(const DLmWaiter *w);

#endif							/* DLOCK_LM_H */
