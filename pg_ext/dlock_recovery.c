/* SPDX-License-Identifier: PostgreSQL */
/*
 * dlock_recovery.c
 *		Loading the lock manager's picture from the tables, at start and
 *		after a failed batch.
 *
 * Interface: see dlock_recovery.h.
 *
 * The tables are the durable truth: a batch that fails is rolled back and
 * the picture is rebuilt from them (they still hold the last committed
 * batch); the failed requests are then retried one per batch, and one that
 * fails alone gets the error as its answer (the service's policy,
 * core/README 18.6).  Tickets below the stored counter may have been
 * handed out: a new picture starts at the counter, so tokens never go
 * back, across restarts and crashes.
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "storage/proc.h"
#include "storage/spin.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "dlock_recovery.h"
#include "dlock_slots.h"
#include "dlock_store.h"

/* Tickets reserved per update of the stored counter. */
#define DLOCK_TICKET_RESERVE 10000

/* The picture's memory; everything goes at once when it is rebuilt. */
static MemoryContext picture_cxt;
static DLockManager *picture;	/* the one being built, for load_held_row */

/*
 * The picture's objects need no chunk header: the core gives the size of
 * what it frees (DLmAllocator), so each size up to PICTURE_CLASS_MAX,
 * rounded up to MAXALIGN, has its own list of free chunks, carved from
 * PICTURE_BLOCK-sized blocks of picture_cxt.  A held lease then costs what
 * the core asks for (core/README 11), not a power of two and a 16-byte
 * header per lock and owner (an AllocSet) nor a 16-byte header per holder
 * (a Slab).  A freed chunk waits for the next of its size, as in an
 * AllocSet's free lists; everything goes when picture_cxt is reset.
 * Larger allocations (the hashes' buckets, the lease heap) are
 * picture_cxt's own.
 */
#define PICTURE_CLASS_MAX 512
#define PICTURE_BLOCK (64 * 1024)

typedef struct PictureFree
{
	struct PictureFree *next;
} PictureFree;

static PictureFree *picture_free_list[PICTURE_CLASS_MAX / MAXIMUM_ALIGNOF + 1];
static char *picture_block_next;	/* the current block's unused part */
static char *picture_block_end;

static void *
picture_alloc(void *arg, size_t size)
{
	size_t		class = MAXALIGN(Max(size, 1)) / MAXIMUM_ALIGNOF;
	PictureFree *f;
	char	   *p;

	if (size > PICTURE_CLASS_MAX)
		return MemoryContextAllocExtended(picture_cxt, size, MCXT_ALLOC_HUGE);
	if ((f = picture_free_list[class]) != NULL)
	{
		picture_free_list[class] = f->next;
		return f;
	}
	if (picture_block_end - picture_block_next < (ptrdiff_t) (class * MAXIMUM_ALIGNOF))
	{
		/* the old block's tail (less than PICTURE_CLASS_MAX) stays unused */
		picture_block_next = MemoryContextAlloc(picture_cxt, PICTURE_BLOCK);
		picture_block_end = picture_block_next + PICTURE_BLOCK;
	}
	p = picture_block_next;
	picture_block_next += class * MAXIMUM_ALIGNOF;
	return p;
}

static void
picture_free(void *arg, void *ptr, size_t size)
{
	size_t		class = MAXALIGN(Max(size, 1)) / MAXIMUM_ALIGNOF;
	PictureFree *f = ptr;

	if (size > PICTURE_CLASS_MAX)
	{
		pfree(ptr);
		return;
	}
	f->next = picture_free_list[class];
	picture_free_list[class] = f;
}

/* A new, empty lock manager answering through the service; the old one's memory goes. */
static DLockManager *
picture_reset(DLockService *service)
{
	DLmConfig	cfg = {0};

	if (picture_cxt == NULL)
		picture_cxt = AllocSetContextCreate(TopMemoryContext, "dlock picture",
											ALLOCSET_DEFAULT_SIZES);
	picture = NULL;
	MemoryContextReset(picture_cxt);	/* the blocks go with it */
	memset(picture_free_list, 0, sizeof(picture_free_list));
	picture_block_next = picture_block_end = NULL;
	cfg.alloc.alloc = picture_alloc;
	cfg.alloc.free = picture_free;
	cfg.untracked = true;
	/* names come from users: a hash seed nobody can know */
	if (!pg_strong_random(cfg.seed, sizeof(cfg.seed)))
		elog(ERROR, "could not generate a random hash seed");
	cfg.nrequesters = dlock_shared->nslots;
	cfg.max_name_len = dlock_shared->max_name_len;
	cfg.ticket_reserve = DLOCK_TICKET_RESERVE;
	cfg.queue_row_delay_us = (int64) dlock_queue_row_delay_ms * 1000;
	cfg.max_objects = dlock_max_locks;
	cfg.max_parts = dlock_max_request_parts;
	dls_manager_config(service, &cfg);
	picture = dlm_create(&cfg);
	if (picture == NULL)
		elog(ERROR, "could not create the dlock lock manager");
	return picture;
}

static void
load_held_row(const DLmHolderRow *row)
{
	DLmError	err = dlm_load_holder(picture, row);

	if (err != DLM_OK)
		elog(ERROR, "cannot load the row of token " INT64_FORMAT " from dlock.held: %s",
			 row->token, dlm_error_message(err));
}

static DLmError
load_kept_rows(const DLmWaiterRow *rows, int n)
{
	return dlm_load_kept(picture, rows, n);
}

/* The service's DLsLoad.rows: the counter, the held and the kept rows. */
static int
load_rows(void *arg, DLockManager *lm, char *err, size_t errlen)
{
	dlock_store_check_version();
	dlock_store_set_logged(dlock_logged);
	dlm_set_counter(lm, dlock_store_load_counter());
	dlock_store_load_held(load_held_row);
	dlock_store_load_kept(load_kept_rows);
	return 0;
}

/* Whether a session that owns locks in the tables still runs. */
static bool
session_alive(void *arg, int32_t pid, int64_t session_start)
{
	for (int i = 0; i < dlock_shared->nslots; i++)
	{
		DLockSlot  *slot = dlock_slot(i);
		bool		alive;

		SpinLockAcquire(&slot->mutex);
		alive = slot->pid == pid && slot->session_start == session_start &&
			!slot->session_ended;
		SpinLockRelease(&slot->mutex);
		if (alive)
			return true;
	}
	return false;
}

/*
 * reload
 *		Rebuild the picture from the tables, in a transaction of its own
 *		(the service loads it, core/README 18.7: sessions that are gone lose
 *		their locks, leases get the restart grace after a server restart).
 *		Requests still waiting in slots, or being decided when the last
 *		batch failed, are submitted again: the next batch takes them in
 *		their old submission order, so they queue again in their old order,
 *		with new tickets.  Answers a predecessor committed and staged are
 *		staged for this worker to release, not decided again (the load's
 *		commit says what a synchronous standby must confirm first).
 *		Returns false if the extension is not installed in this database.
 */
bool
reload(DLockService *service)
{
	bool		fresh;
	int			resubmitted = 0;
	DLsLoad		load = {0};
	char		err[256];
	DLockManager *lm = picture_reset(service);

	MemoryContextSwitchTo(slots_batch_begin(false));
	dlock_store_begin();
	if (!dlock_store_installed())
	{
		(void) dlock_store_commit(true);
		MemoryContextSwitchTo(TopMemoryContext);
		return false;
	}

	SpinLockAcquire(&dlock_shared->mutex);
	fresh = dlock_shared->fresh;
	SpinLockRelease(&dlock_shared->mutex);

	/* requests in the slots */
	for (int i = 0; i < dlock_shared->nslots; i++)
	{
		DLockSlot  *slot = dlock_slot(i);

		SpinLockAcquire(&slot->mutex);
		if (slot->pid != 0 && !slot->session_ended &&
			slot->state == DLOCK_SLOT_ACCEPTED)
		{
			slot->state = DLOCK_SLOT_SUBMITTED;
			resubmitted++;
		}
		SpinLockRelease(&slot->mutex);
	}
	slots_scan_all();			/* the resubmitted are marked by nobody */

	load.rows = load_rows;
	load.session_alive = session_alive;
	/* leases that ran out while the server was down get a grace */
	if (fresh && dlock_restart_grace_ms > 0)
		load.grace_until = GetCurrentTimestamp() + (int64) dlock_restart_grace_ms * 1000;
	if (dls_load(service, lm, &load, err, sizeof(err)) != 0)
		elog(ERROR, "%s", err);
	slots_stage(lm);
	slots_adopt_staged();		/* a predecessor's answers: decided, not yet released */
	MemoryContextSwitchTo(TopMemoryContext);

	SpinLockAcquire(&dlock_shared->mutex);
	dlock_shared->fresh = false;
	SpinLockRelease(&dlock_shared->mutex);

	ereport(LOG,
			(errmsg("dlock lock manager ready in database \"%s\": %ld locks held, %d requests resubmitted",
					dlock_database, (long) dlm_nlocks(lm), resubmitted)));
	return true;
}

/*
 * recover
 *		After an error in a batch or a load: roll back (the service dropped
 *		the picture; the next pass rebuilds it from the tables).  A request
 *		that failed alone gets the error as its answer.
 */
void
recover(const char *message, int failed_slot)
{
	AbortCurrentTransaction();
	dlock_store_forget_plans();
	/* the outcomes listed were never handed out */
	slots_forget();
	MemoryContextSwitchTo(TopMemoryContext);
	picture = NULL;
	if (failed_slot >= 0)
		slots_fail_isolated(failed_slot, message);
}
