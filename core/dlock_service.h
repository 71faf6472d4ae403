/* SPDX-License-Identifier: PostgreSQL */
/*
 * dlock_service.h
 *		The lock service around the lock manager, once for both databases:
 *		what a batch does in which order, when its rows are written or left
 *		to the next commit, how many leases one batch reaps, loading the
 *		picture, force release with remembered revocations, the statistics,
 *		and the rules both adapters word alike (namespace prefixes, default
 *		leases, deadlock cycles, acquire_all's names).  No database header;
 *		the specification is core/README, "The service".
 *
 * An adapter collects a batch (DLsBatch) and hands it to dls_batch, which
 * decides it with the lock manager and calls the adapter back (DLsStore)
 * to write and commit the rows, then to publish the answers; never the
 * other way round.  The adapter owns the picture's memory and its I/O:
 *
 *		dls_create, dls_destroy		a service; answers go to the adapter's
 *									callback, through the service
 *		dls_manager_config			the lock manager's DLmConfig, completed
 *		dls_load					a new picture from the store's rows
 *		dls_batch					one batch: decide, write, commit, publish
 *		dls_fail					a batch or load failed: what now
 *		dls_work_due, dls_next_wake	when the next batch is due by itself
 *		dls_manager, dls_counters	looking at it
 *		dls_prefix_covers, dls_default_ttl, dls_describe_cycle,
 *		dls_sort_names				the shared rules
 */
#ifndef DLOCK_SERVICE_H
#define DLOCK_SERVICE_H

#include "dlock_lm.h"

/* A mass expiry is spread over batches of about this much work each. */
#define DLS_EXPIRY_BUDGET_US 10000
#define DLS_EXPIRE_MIN 64
#define DLS_EXPIRE_MAX 100000

/*
 * A batch that answers nobody may leave its writes to a later batch's
 * commit, for at most DLS_DEFER_US and DLS_MAX_DEFERRED batches.
 */
#define DLS_DEFER_US 5000
#define DLS_MAX_DEFERRED 64

/* Revocations are remembered this long, at most this many (the oldest go). */
#define DLS_REVOKED_KEEP_US ((int64_t) 3600 * 1000000)
#define DLS_REVOKED_MAX 1024

/* After a failure the next attempt waits, doubling from min to max. */
#define DLS_RETRY_MIN_MS 10
#define DLS_RETRY_MAX_MS 5000

typedef struct DLockService DLockService;

/* What a batch's commit must do (DLsStore.commit). */
typedef struct DLsCommit
{
	/* the ticket counter moved: flushed whatever the settings (tokens never go back) */
	bool		counter;
	/* an owner key's grant or lease changed (dlm_batch_durable): flushed unless configured not to */
	bool		durable;
	/* names an administrator released: announced at the commit (dlock_revoked) */
	const char *const *revoked;
	int			nrevoked;
	/*
	 * the first commit of a new picture (dls_load): it may hold what a
	 * predecessor committed but never answered
	 */
	bool		load;
} DLsCommit;

/*
 * The adapter's I/O.  commit and load_rows return 0, or -1 with a message
 * in err.  An adapter whose errors unwind the stack (PostgreSQL's ereport)
 * may leave commit or load_rows that way: the batch then failed, and the
 * adapter calls dls_fail before the next one.
 */
typedef struct DLsStore
{
	void	   *arg;
	/* write what the batch changed (dlm_touched_*, the counter) and commit */
	int			(*commit) (void *arg, DLockManager *lm, const DLsCommit *c,
						   char *err, size_t errlen);
	/* the batch is committed: hand its answers out */
	void		(*publish) (void *arg, DLockManager *lm);
	/* the clock, microseconds */
	DLockTime	(*now) (void *arg);
} DLsStore;

typedef struct DLsConfig
{
	DLsStore	store;
	/* the adapter's answers (the service sees them first) */
	DLmAnswerFn answer;
	void	   *answer_arg;
	/* statistics a predecessor counted, carried on; NULL: from zero */
	const DLmCounters *counters;
} DLsConfig;

/* A request as the service takes it. */
typedef struct DLsRequest
{
	/*
	 * As the lock manager takes it.  DLOCK_OP_FORCE_RELEASE(_ALL) are the
	 * service's: owner_key the holders' key (NULL: every holder of
	 * names[0]), value the reason.
	 */
	DLmRequest	q;
	/* given up with keep_place before it was decided: decided, then withdrawn */
	bool		withdraw_after;
} DLsRequest;

/*
 * A request its caller gave up: waiting (withdrawn), or not decided yet
 * (answered CANCELED, never run).  Never one already answered otherwise.
 */
typedef struct DLsWithdrawal
{
	int			requester;
	bool		timed_out;		/* by its timeout (else a cancel): statistics */
} DLsWithdrawal;

/* A session that ended. */
typedef struct DLsSessionEnd
{
	int32_t		pid;
	int64_t		session_start;
	int			requester;		/* its request to end; DLM_NOBODY: none */
	/* a grant of an owner key it never collected: released again first */
	const DLmRequest *uncollected;
} DLsSessionEnd;

/* One batch, as collected; decided in this order (core/README). */
typedef struct DLsBatch
{
	const DLsWithdrawal *withdrawn;
	int			nwithdrawn;
	const DLsSessionEnd *ended;
	int			nended;
	DLsRequest *const *fresh;	/* in submission order */
	int			nfresh;
	/*
	 * the adapter needs this batch committed and published now, even with
	 * nothing else in it (a look at the picture waits, or answers it gave)
	 */
	bool		no_defer;
} DLsBatch;

typedef enum DLsOutcome
{
	DLS_IDLE,					/* nothing to do: no batch */
	DLS_DEFERRED,				/* decided; written by a later batch's commit */
	DLS_DONE,					/* decided, committed if it changed anything, published */
	DLS_FAILED					/* err says why; call dls_fail */
} DLsOutcome;

/* Loading a new picture (dls_load). */
typedef struct DLsLoad
{
	void	   *arg;
	/* the counter (dlm_set_counter), the held and kept rows into lm */
	int			(*rows) (void *arg, DLockManager *lm, char *err, size_t errlen);
	/* whether a session with rows still runs; gone ones lose their locks */
	DLmSessionAliveFn session_alive;
	/* a server restart: leases that ran out while it was down run until then; 0: none */
	DLockTime	grace_until;
} DLsLoad;

/* What to do after a failure (dls_fail). */
typedef struct DLsFailure
{
	int			failures;		/* in a row, this one included */
	long		pause_ms;		/* before the next attempt */
	bool		log;			/* worth a log line (every one of a short run, then one a minute) */
	/*
	 * The request that failed alone, to answer with the error; DLM_NOBODY:
	 * the next batches take one new request each until one fails alone.
	 */
	int			failed_requester;
} DLsFailure;

extern DLockService *dls_create(const DLsConfig *config);
extern void dls_destroy(DLockService *s);

/* Routes the lock manager's answers through the service: call before dlm_create. */
extern void dls_manager_config(DLockService *s, DLmConfig *cfg);

/*
 * The release that gives back what grant was granted (all its names), on
 * its owner's behalf whoever asks (answered to nobody).
 */
extern void dls_undo_of(const DLmRequest *grant, DLmRequest *undo);
/* Batches decided whose writes wait for a later commit (18.3). */
extern int	dls_deferred(const DLockService *s);

/*
 * A new picture lm (created with dls_manager_config, empty) from the
 * store: its rows, sessions gone dropped, the grace applied, what it lets
 * through granted, and the result committed (flushed).  The old picture is
 * the adapter's to free.  0, or -1 with err.
 */
extern int	dls_load(DLockService *s, DLockManager *lm, const DLsLoad *load,
					 char *err, size_t errlen);

/* One batch (see DLsOutcome); the time is read after the batch was collected. */
extern DLsOutcome dls_batch(DLockService *s, const DLsBatch *b, char *err, size_t errlen);

/*
 * A batch or a load failed: the picture is gone (load a new one; the
 * adapter frees its memory and rolls back), the answers of the failed
 * batch were never published.
 */
extern void dls_fail(DLockService *s, DLsFailure *out);
/* A batch after failures went through: the next failure starts a new run. */
extern int	dls_recovered(DLockService *s);

/* New requests one per batch (after a failure, to find the one that fails). */
extern bool dls_isolating(const DLockService *s);

/* A lease ran out, a waiter is due for its row or a deferral for its commit. */
extern bool dls_work_due(const DLockService *s, DLockTime now);
/* When that will be; 0: nothing is due by itself. */
extern DLockTime dls_next_wake(const DLockService *s);

/* The picture; NULL until one is loaded (or after a failure). */
extern DLockManager *dls_manager(const DLockService *s);
extern const DLmCounters *dls_counters(const DLockService *s);
extern void dls_counters_reset(DLockService *s);
/* Leases the next batch may expire (learnt from the batches the limit cut short). */
extern int	dls_expire_limit(const DLockService *s);

/*
 * Whether a namespace prefix covers a name: a path prefix ("/a", or "/"
 * for every path) covers the path and the paths below it, segment by
 * segment; a flat prefix the flat names that start with it, byte by byte.
 */
extern bool dls_prefix_covers(const char *prefix, size_t plen,
							  const char *name, size_t len);

/*
 * An owner key's lease when the call gives none (a lock that outlives its
 * session must end some day): the configured default, within the
 * configured maximum (0: no maximum).
 */
extern int64_t dls_default_ttl(int64_t default_us, int64_t max_us);

/*
 * A deadlock's cycle in wait order, one sentence per edge, into buf (cut
 * at size, bytewise: the adapter clips its message on a character).  owner
 * words a participant ("session 42", "an owner key (pid 42)": never the
 * key), name a lock's name as the database shows names; each writes a
 * NUL-terminated string into the room it is given.
 */
typedef void (*DLsOwnerWords) (char *buf, size_t size, bool keyed, int32_t pid, void *arg);
typedef void (*DLsNameWords) (char *buf, size_t size, const char *name, void *arg);
extern void dls_describe_cycle(char *buf, size_t size, const DLmAnswer *a,
							   DLsOwnerWords owner, DLsNameWords name, void *arg);

/* A name of a call on several names, and where the call gave it. */
typedef struct DLsName
{
	const char *p;
	size_t		len;
	int			pos;
} DLsName;

/*
 * acquire_all's names in the order the lock manager takes them: bytewise,
 * a name before its extensions, each once.  Sorts in place; returns how
 * many distinct names lead the array.
 */
extern int	dls_sort_names(DLsName *names, int n);
extern int	dls_name_cmp(const DLsName *a, const DLsName *b);

#endif							/* DLOCK_SERVICE_H */
