/* SPDX-License-Identifier: PostgreSQL */
/*
 * dlock.c
 *		Module set-up of the dlock extension: GUCs, shared memory and the
 *		registration of the lock-manager worker.
 *
 * The shared area holds the worker's identity (under DLockShared.mutex) and
 * the request slots (each under its own spinlock); see dlock.h.
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "tcop/utility.h"
#include "utils/guc.h"

#include "dlock.h"

PG_MODULE_MAGIC;

DLockShared *dlock_shared = NULL;
pg_atomic_uint64 *dlock_pending = NULL;

char	   *dlock_database = NULL;
int			dlock_default_ttl_ms = 60 * 1000;
int			dlock_max_ttl_s = 0;
int			dlock_reap_interval_ms = 1000;
int			dlock_queue_row_delay_ms = 5;
int			dlock_max_locks = 2000000;
int			dlock_max_request_parts = 1024;
int			dlock_max_name_length = 1024;
int			dlock_restart_grace_ms = 5000;
bool		dlock_synchronous_commit = true;
bool		dlock_logged = true;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static ProcessUtility_hook_type prev_process_utility_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

void		_PG_init(void);
static void dlock_shmem_request(void);
static void dlock_shmem_startup(void);
static void dlock_process_utility(PlannedStmt *pstmt, const char *queryString,
								  bool readOnlyTree, ProcessUtilityContext context,
								  ParamListInfo params, QueryEnvironment *queryEnv,
								  DestReceiver *dest, QueryCompletion *qc);

/* Room for one name with its NUL, or for the names of dlock_acquire_all. */
static int
dlock_names_size(void)
{
	return Max(dlock_max_name_length + 1, DLOCK_MULTI_BYTES);
}

static Size
dlock_slot_size(void)
{
	return MAXALIGN(offsetof(DLockSlot, data) + dlock_names_size() +
					DLOCK_MAX_OWNER_LEN + DLOCK_MAX_VALUE_LEN);
}

static Size
dlock_shmem_size(void)
{
	return add_size(offsetof(DLockShared, slots),
					mul_size(MaxBackends, dlock_slot_size()));
}

/* A bit per slot: one word per 64 slots. */
static Size
dlock_pending_size(void)
{
	return mul_size((MaxBackends + 63) / 64, sizeof(pg_atomic_uint64));
}

void
_PG_init(void)
{
	BackgroundWorker worker;

	if (IsBinaryUpgrade)
		return;

	DefineCustomIntVariable("dlock.default_ttl",
							"Lease of owner-keyed locks acquired without a ttl.",
							NULL,
							&dlock_default_ttl_ms,
							60 * 1000, 1, INT_MAX,
							PGC_USERSET, GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("dlock.max_ttl",
							"Largest accepted lease; 0 means no limit.",
							"Finite by default: a lease outlives its session and its role's interest in it.",
							&dlock_max_ttl_s,
							24 * 60 * 60, 0, INT_MAX,
							PGC_SUSET, GUC_UNIT_S,
							NULL, NULL, NULL);

	if (!process_shared_preload_libraries_in_progress)
		return;

	DefineCustomStringVariable("dlock.database",
							   "Database holding the dlock tables, where the lock manager runs.",
							   NULL,
							   &dlock_database,
							   "postgres",
							   PGC_POSTMASTER, 0,
							   NULL, NULL, NULL);

	DefineCustomIntVariable("dlock.max_name_length",
							"Longest lock name in bytes.",
							NULL,
							&dlock_max_name_length,
							1024, 64, 8192,
							PGC_POSTMASTER, GUC_UNIT_BYTE,
							NULL, NULL, NULL);

	DefineCustomBoolVariable("dlock.logged",
							 "Whether the lock tables are WAL-logged (off: UNLOGGED, lost on crash).",
							 NULL,
							 &dlock_logged,
							 true,
							 PGC_POSTMASTER, 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("dlock.reap_interval",
							"Longest time the lock manager sleeps between expiry and liveness checks.",
							NULL,
							&dlock_reap_interval_ms,
							1000, 10, 3600 * 1000,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("dlock.max_locks",
							"Holders and waiting parts the lock manager keeps in all; beyond it requests fail with \"out of lock space\".",
							"Bounds the worker's memory (about 800 bytes each); 0 means no limit.",
							&dlock_max_locks,
							2000000, 0, INT_MAX,
							PGC_SIGHUP, 0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("dlock.max_request_parts",
							"Parts one request may ask for: each name counts its path depth.",
							"0 means no limit (at most 64 names of 64 segments).",
							&dlock_max_request_parts,
							1024, 0, INT_MAX,
							PGC_SIGHUP, 0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("dlock.queue_row_delay",
							"How long a request waits before its row is written to dlock.queue; shorter waits are never written.",
							NULL,
							&dlock_queue_row_delay_ms,
							5, 0, 60 * 1000,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("dlock.restart_grace",
							"After a server restart, leases expiring sooner are extended to this long after start.",
							NULL,
							&dlock_restart_grace_ms,
							5000, 0, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomBoolVariable("dlock.synchronous_commit",
							 "Whether grants that outlive a crash wait for the WAL flush.",
							 "Owner-keyed grants and renewals, and advances of the token counter. Session locks never wait: they die with any crash.",
							 &dlock_synchronous_commit,
							 true,
							 PGC_SIGHUP, 0,
							 NULL, NULL, NULL);

	MarkGUCPrefixReserved("dlock");

	prev_process_utility_hook = ProcessUtility_hook;
	ProcessUtility_hook = dlock_process_utility;
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = dlock_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = dlock_shmem_startup;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	/* only a primary writes the tables; a promoted standby starts it anew */
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = 1;
	strlcpy(worker.bgw_library_name, "dlock", BGW_MAXLEN);
	strlcpy(worker.bgw_function_name, "dlock_worker_main", BGW_MAXLEN);
	strlcpy(worker.bgw_name, "dlock lock manager", BGW_MAXLEN);
	strlcpy(worker.bgw_type, "dlock lock manager", BGW_MAXLEN);
	RegisterBackgroundWorker(&worker);
}

static void
dlock_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(add_size(dlock_shmem_size(), dlock_pending_size()));
}

static void
dlock_shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	dlock_shared = ShmemInitStruct("dlock", dlock_shmem_size(), &found);
	if (!found)
	{
		memset(dlock_shared, 0, dlock_shmem_size());
		SpinLockInit(&dlock_shared->mutex);
		dlock_shared->worker_pid = 0;
		dlock_shared->worker_latch = NULL;
		dlock_shared->fresh = true;
		pg_atomic_init_u64(&dlock_shared->next_seq, 1);
		pg_atomic_init_u64(&dlock_shared->grants_generation, 1);
		dlock_shared->nslots = MaxBackends;
		dlock_shared->slot_size = dlock_slot_size();
		dlock_shared->max_name_len = dlock_max_name_length;
		dlock_shared->names_size = dlock_names_size();
		for (int i = 0; i < dlock_shared->nslots; i++)
			SpinLockInit(&dlock_slot(i)->mutex);
		if (!pg_strong_random(dlock_shared->notify_secret,
							  sizeof(dlock_shared->notify_secret)))
			ereport(FATAL,
					(errmsg("could not generate the dlock notify secret")));
	}
	dlock_pending = ShmemInitStruct("dlock pending slots", dlock_pending_size(), &found);
	if (!found)
		for (int i = 0; i < (MaxBackends + 63) / 64; i++)
			pg_atomic_init_u64(&dlock_pending[i], 0);
	LWLockRelease(AddinShmemInitLock);
}

/*
 * dlock_wake_worker
 *		Mark the slot as changed, so that the worker looks at it (it looks
 *		only at marked slots), and set the worker's latch; the latch is a
 *		no-op if no worker runs (a new one looks at every slot when it
 *		starts).  The slot's change is made, under its spinlock, before.
 */
void
dlock_wake_worker(int slotno)
{
	Latch	   *latch;

	pg_atomic_fetch_or_u64(&dlock_pending[slotno / 64], UINT64CONST(1) << (slotno % 64));

	SpinLockAcquire(&dlock_shared->mutex);
	latch = dlock_shared->worker_latch;
	SpinLockRelease(&dlock_shared->mutex);
	if (latch)
		SetLatch(latch);
}

/*
 * DISCARD ALL resets a session for its next client (poolers run it between
 * clients) and releases advisory locks: it ends the session's dlock locks
 * and requests too, once it has succeeded.
 */
static void
dlock_process_utility(PlannedStmt *pstmt, const char *queryString,
					  bool readOnlyTree, ProcessUtilityContext context,
					  ParamListInfo params, QueryEnvironment *queryEnv,
					  DestReceiver *dest, QueryCompletion *qc)
{
	Node	   *stmt = pstmt->utilityStmt;
	bool		discard_all = IsA(stmt, DiscardStmt) &&
		((DiscardStmt *) stmt)->target == DISCARD_ALL;

	if (prev_process_utility_hook)
		prev_process_utility_hook(pstmt, queryString, readOnlyTree, context,
								  params, queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context,
								params, queryEnv, dest, qc);
	if (discard_all)
		dlock_discard_session();
}
