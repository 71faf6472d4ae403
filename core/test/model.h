/* SPDX-License-Identifier: PostgreSQL */
/*
 * model.h
 *		The reference model of the lock manager: core/README sections 1-9
 *		written as plainly as possible over arrays, with linear scans
 *		everywhere.  It shares no code with dlock_lm*.c (it uses only
 *		dlock_core.h's modes, names and paths, and dlock_lm.h's types), and
 *		test_model.c feeds it the events it feeds the core and compares the
 *		two after every event.
 *
 * Interface:
 *		model_create, model_destroy
 *		model_request, model_withdraw, model_session_end, model_expire
 *										events, as dlm_request and friends
 *		model_answers, model_notified, model_settle
 *										what the last event said and announced
 *		model_nholders, model_holder, model_nwaiters, model_waiter, ...
 *										looking at the picture
 *		model_deadlock_edges			the waits-for edges when the last
 *										DEADLOCK was found (to check a cycle)
 *
 * and the service around the rules (core/README 18), as plainly:
 *		model_batch						one batch in the order of 18.1, force
 *										release and revocations (18.5)
 *		model_batch_answers, model_commit
 *										what the batches said; committed
 *		model_copy, model_reload		the committed picture kept, and a
 *										new picture loaded from it (18.7)
 */
#ifndef DLOCK_MODEL_H
#define DLOCK_MODEL_H

#include "dlock_lm.h"

/*
 * Readings of core/README where its words really allow more than one.
 * The defaults are the readings the README's other sections (and the
 * invariants of section 10) support; test_model.c reports them ("-O list").
 * Everything the README settles is not an option.
 */
typedef struct ModelOptions
{
	/*
	 * 3.4 vs 1: a single path with no ancestor ("/p") O does not hold
	 * queues as a group of one part.  3.4 ("a single flat name ... becomes
	 * one waiter; anything else becomes a group") says group; section 1
	 * ("a request on several locks ... is a group") says one waiter.
	 */
	bool		lone_root_path_group;
	/*
	 * 8: "unless announced since L last got a new holder": an up-conversion
	 * (a new token, 1: "a new grant") counts as a new holder.
	 */
	bool		upconvert_resets_announced;
	/*
	 * 4.2 "the lease becomes now + ttl" and 9 "a lease is (expires_at,
	 * ttl)": renew stores the (clamped) ttl as the lease's own.
	 */
	bool		renew_sets_ttl;
	/* 3.5: a re-entrant take with ttl > 0 stores ttl as the lease's own */
	bool		reentrant_sets_ttl;
} ModelOptions;

extern void model_default_options(ModelOptions *opt);

/* One answer, as DLmAnswer but owning its tokens. */
typedef struct ModelAnswer
{
	int			requester;
	DLockStatus status;
	int64_t		token;
	DLockTime	expires_at;
	int32_t		count;
	int			name_index;
	int			ntokens;
	int64_t		tokens[DLOCK_MAX_MULTI];
	DLmError	error;
	char		reason[64];		/* REVOKED (18.5) */
} ModelAnswer;

/* A holder or waiter as the test compares them. */
typedef struct ModelHolderView
{
	const char *key;			/* owner key or NULL */
	int32_t		pid;			/* a session's */
	int64_t		session_start;
	int			mode;
	bool		implied;
	int32_t		count;
	int64_t		token;
	DLockTime	expires_at;
	int64_t		ttl_us;
	int32_t		holder_pid;		/* the session that acquired it */
	uint32_t	role;			/* counted and shown under (12) */
	int32_t		kept;			/* uncollected levels (14) */
	int32_t		permits;		/* a semaphore's (15) */
	const char *value;			/* a leader's (16); NULL otherwise */
} ModelHolderView;

typedef struct ModelWaiterView
{
	const char *key;
	int32_t		pid;
	int64_t		session_start;
	int			mode;
	bool		implied;
	bool		conversion;
	int64_t		ticket;
	int			requester;
	DLockTime	kept_until;		/* a kept place no call waits for (14) */
	int32_t		permits;		/* a semaphore request's (15) */
} ModelWaiterView;

/* One waits-for edge (section 7) at the moment of a deadlock check. */
typedef struct ModelEdge
{
	int			waiter_owner;	/* model owner ids: compare with == */
	bool		waiter_keyed;
	int32_t		waiter_pid;		/* keyed: the session that asked */
	bool		waiter_new;		/* a part of the request being checked */
	const char *lock;
	bool		held;
	int			blocker_owner;
	bool		blocker_keyed;
	int32_t		blocker_pid;	/* keyed: the holder's or waiter's session */
} ModelEdge;

typedef struct Model Model;

extern Model *model_create(int nrequesters, int64_t first_ticket,
						   size_t max_name_len, const ModelOptions *opt);
extern void model_destroy(Model *m);
/* 13: the limits, as DLmConfig's max_objects and max_parts (0: none). */
extern void model_set_limits(Model *m, int64_t max_objects, int max_parts);

/* Events (each clears the answers and announcements of the one before). */
extern void model_request(Model *m, const DLmRequest *r, DLockTime now);
extern void model_withdraw(Model *m, const int *requesters, int n, DLockTime now);
extern void model_session_end(Model *m, int32_t pid, int64_t session_start,
							  int requester, DLockTime now);
extern int	model_expire(Model *m, DLockTime now, int max);

/* What the last event said. */
extern const ModelAnswer *model_answers(const Model *m, int *n);
/* Names announced by the last event (section 8), in announcement order. */
extern const char *const *model_notified(const Model *m, int *n);
/* The store matches: forget announcements, drop empty locks. */
extern void model_settle(Model *m);

/* Looking. */
extern int64_t model_next_ticket(const Model *m);
extern bool model_waiting(const Model *m, int requester);
extern size_t model_nlocks(const Model *m);	/* names with a holder or waiter */
extern DLockTime model_next_expiry(const Model *m);
/* Names whose leader or its value the last event changed (16), lock order. */
extern int	model_leader_changes(const Model *m, const char **out, int max);
/* A semaphore's capacity while it is in use (15); 0: a lock or unused. */
extern int32_t model_capacity(const Model *m, const char *name);
/* Holders of a name, sorted by token; returns how many (at most max). */
extern int	model_holders(const Model *m, const char *name,
						  ModelHolderView *out, int max);
/* The line of a name: conversions, then waiters, each in ticket order. */
extern int	model_line(const Model *m, const char *name,
					   ModelWaiterView *out, int max);

/* The waits-for edges of the last DEADLOCK found, and the requesting owner
 * and the lock of its first part with a cycle. */
extern int	model_deadlock_edges(const Model *m, const ModelEdge **edges,
								 int *requesting_owner, const char **first_lock);

/* Invariants of section 10 on the model's own picture; NULL if they hold,
 * else a description (static buffer). */
extern const char *model_check(const Model *m);

/* ---------------------------------------------------------------- */
/* 18. The service: batches, revocations, reloads */

typedef struct ModelSessionEnd
{
	int32_t		pid;
	int64_t		session_start;
	int			requester;		/* its waiting request; DLM_NOBODY: none */
} ModelSessionEnd;

/* A batch as collected (18.1); requests may be DLOCK_OP_FORCE_RELEASE(_ALL). */
typedef struct ModelBatch
{
	const int  *withdrawn;		/* requesters */
	int			nwithdrawn;
	const ModelSessionEnd *ended;
	int			nended;
	const DLmRequest *fresh;	/* in submission order */
	int			nfresh;
} ModelBatch;

/*
 * Decides a batch at now, expiring at most expire_max leases (the limit of
 * 18.4, which the caller learns from the service: it depends on time
 * taken); returns how many leases and places ran out.  Its answers join
 * model_batch_answers (non-QUEUED ones also say the batch answered).
 */
extern int	model_batch(Model *m, const ModelBatch *b, DLockTime now, int expire_max);
/* Answers of the batches since the last model_commit, in order. */
extern const ModelAnswer *model_batch_answers(const Model *m, int *n);
/* Names force-released since the last model_commit (announced at it). */
extern int	model_revoked_names(const Model *m, const char **out, int max);
/* The batches are committed (18.2, 18.5): settle, forget, start again. */
extern void model_commit(Model *m);
/* A deep copy (the picture as committed, to go back to). */
extern Model *model_copy(const Model *m);

/*
 * 18.7: the picture loaded again from what m holds (a copy of the committed
 * one): waiting requests gone but kept places, sessions alive() says are
 * gone dropped, leases and places running out before grace_until (0: none)
 * extended to it, tickets from counter on, what the picture lets through
 * granted.  restart: a new service (the revocations are forgotten).
 */
extern void model_reload(Model *m, int64_t counter,
						 bool (*alive) (void *arg, int32_t pid, int64_t start), void *arg,
						 DLockTime grace_until, DLockTime now, bool restart);
/* Revocations remembered now (18.5), for a report. */
extern int	model_nrevoked(const Model *m);

#endif							/* DLOCK_MODEL_H */
