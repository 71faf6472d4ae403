/*
 * dlock_state.h
 *		The lock manager's in-memory picture of holders and waiters, private
 *		to the dlock worker process.
 *
 * The worker decides every request against this picture, then writes what
 * changed to the tables in one transaction per batch (dlock_store.c).  The
 * tables are the durable truth the picture is rebuilt from at start and
 * after an error; between batches both say the same.
 *
 * Objects that leave the picture during a batch are marked dead and freed
 * only after the batch is stored, because the store still needs them.
 */
#ifndef DLOCK_STATE_H
#define DLOCK_STATE_H

#include "lib/ilist.h"
#include "lib/rbtree.h"
#include "nodes/pg_list.h"

#include "dlock.h"

typedef struct DLock DLock;
typedef struct DOwner DOwner;

/* What must be written for an object at the end of the batch. */
typedef struct DPersist
{
	bool		stored;			/* a row for it is in the table */
	bool		dirty;			/* the row needs an update */
	bool		dead;			/* gone from the picture */
	bool		listed;			/* in the batch's list of touched objects */
} DPersist;

struct DOwner
{
	char	   *hkey;			/* "k" + key, or "s" + pid + start */
	char	   *key;			/* owner key; NULL for a session */
	int			pid;			/* session owners: the session */
	TimestampTz session_start;
	dlist_head	holders;		/* DHolder.owner_node */
	dlist_head	waiters;		/* DWaiter.owner_node */
	uint64		visited;		/* deadlock search that last passed here */
	bool		maybe_empty;	/* listed to be freed if left empty */
};

struct DLock
{
	char	   *name;
	dlist_head	holders;		/* DHolder.lock_node */
	dlist_head	converts;		/* conversions (DWaiter.lock_node): served first */
	dlist_head	waiters;		/* DWaiter.lock_node, ticket order */
	int			nheld[DLOCK_NMODES];
	int			nconverting[DLOCK_NMODES];
	int			nwaiting[DLOCK_NMODES];
	bool		maybe_empty;	/* listed to be freed if left empty */
};

typedef struct DWaiter DWaiter;

/* The parts of one request that must be granted together. */
typedef struct DGroup
{
	List	   *named;			/* the named locks' parts, in name order */
	List	   *parts;			/* every part: named ones and intentions */
	int			nnamed;
} DGroup;

typedef struct DHolder
{
	dlist_node	lock_node;
	dlist_node	owner_node;
	DLock	   *lock;
	DOwner	   *owner;
	int			mode;
	int32		count;
	int64		token;
	int64		stored_token;	/* the token its row is stored under */
	DWaiter    *conversion;		/* its pending up-conversion, if any */
	bool		notified;		/* told that someone waits behind it */
	bool		implied;		/* an intention held for locks below it */
	int			pid;			/* the backend that acquired it */
	TimestampTz backend_start;
	TimestampTz granted_at;
	TimestampTz expires_at;		/* 0: no lease */
	int64		ttl_us;			/* 0: no lease */
	bool		in_expiry;		/* in the worker's tree of leases */
	DPersist	p;
} DHolder;

struct DWaiter
{
	dlist_node	lock_node;
	dlist_node	owner_node;
	DLock	   *lock;
	DOwner	   *owner;
	DHolder    *holder;			/* a conversion: the holder converting */
	DGroup	   *group;			/* a part of a request on several locks */
	bool		implied;		/* an intention part of a path request */
	int			mode;			/* requested, or target of the conversion */
	int64		ticket;
	int			slotno;			/* the waiting backend's slot */
	int			pid;
	TimestampTz backend_start;
	TimestampTz since;
	TimestampTz timeout_at;
	int64		ttl_us;
	DPersist	p;
};

/* dlock_store.c: the tables, through SPI inside the caller's transaction */
extern bool dlock_store_installed(void);
extern void dlock_store_set_logged(bool logged);
extern int64 dlock_store_load_counter(void);
extern void dlock_store_save_counter(int64 hi);
extern void dlock_store_clear_queue(void);
typedef void (*dlock_held_row_cb) (const char *name, const char *owner,
								   int pid, TimestampTz backend_start,
								   int mode, int32 count, int64 token,
								   TimestampTz granted_at, TimestampTz expires_at,
								   int64 ttl_us, bool implied);
extern void dlock_store_load_held(dlock_held_row_cb cb);
extern void dlock_store_write(List *holders, List *waiters);
extern void dlock_store_notify(List *names);
extern void dlock_store_forget_plans(void);

#endif							/* DLOCK_STATE_H */
