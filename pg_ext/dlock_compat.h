/* SPDX-License-Identifier: PostgreSQL */
/*-------------------------------------------------------------------------
 * dlock_compat.h
 *		The PostgreSQL server APIs that changed between the supported
 *		versions (15 to 18), each behind one name; the logic has no version
 *		#if of its own.  16 goes through the same guards as 17 and 18.
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_COMPAT_H
#define DLOCK_COMPAT_H

#include "access/genam.h"
#include "access/tableam.h"
#include "executor/executor.h"
#include "storage/proc.h"
#include "utils/rel.h"
#include "utils/relcache.h"
#if PG_VERSION_NUM >= 160000
#include "varatt.h"				/* 16: the varlena macros left postgres.h */
#endif

/* This backend's PGPROC number (17: no PGPROC.pgprocno). */
static inline int
dlock_my_procno(void)
{
#if PG_VERSION_NUM >= 170000
	return GetNumberFromPGProc(MyProc);
#else
	return MyProc->pgprocno;
#endif
}

/* The setting that forces parallel plans (16: renamed). */
#if PG_VERSION_NUM >= 160000
#define DLOCK_FORCE_PARALLEL_GUC "debug_parallel_query"
#else
#define DLOCK_FORCE_PARALLEL_GUC "force_parallel_mode"
#endif

/* A table's primary key index (18: whether a deferrable one will do). */
static inline Oid
dlock_primary_key_index(Relation rel)
{
#if PG_VERSION_NUM >= 180000
	return RelationGetPrimaryKeyIndex(rel, false);
#else
	return RelationGetPrimaryKeyIndex(rel);
#endif
}

/* index_beginscan without instrumentation (18: its argument). */
static inline IndexScanDesc
dlock_index_beginscan(Relation heap, Relation index, Snapshot snapshot,
					  int nkeys, int norderbys)
{
#if PG_VERSION_NUM >= 180000
	return index_beginscan(heap, index, snapshot, NULL, nkeys, norderbys);
#else
	return index_beginscan(heap, index, snapshot, nkeys, norderbys);
#endif
}

/* Which index entries an updated row needs (16: summarizing ones alone). */
typedef enum DLockIndexUpdate
{
	DLOCK_INDEX_NONE,
	DLOCK_INDEX_ALL,
	DLOCK_INDEX_SUMMARIZING
} DLockIndexUpdate;

static inline DLockIndexUpdate
dlock_tuple_update(Relation rel, ItemPointer otid, TupleTableSlot *slot, Snapshot snapshot)
{
#if PG_VERSION_NUM >= 160000
	TU_UpdateIndexes update;

	simple_table_tuple_update(rel, otid, slot, snapshot, &update);
	return update == TU_None ? DLOCK_INDEX_NONE :
		update == TU_Summarizing ? DLOCK_INDEX_SUMMARIZING : DLOCK_INDEX_ALL;
#else
	bool		update;

	simple_table_tuple_update(rel, otid, slot, snapshot, &update);
	return update ? DLOCK_INDEX_ALL : DLOCK_INDEX_NONE;
#endif
}

/* ExecInsertIndexTuples without conflict checks (16: onlySummarizing). */
static inline List *
dlock_insert_index_tuples(ResultRelInfo *rri, TupleTableSlot *slot, EState *estate,
						  bool update, DLockIndexUpdate which)
{
#if PG_VERSION_NUM >= 160000
	return ExecInsertIndexTuples(rri, slot, estate, update, false, NULL, NIL,
								 which == DLOCK_INDEX_SUMMARIZING);
#else
	return ExecInsertIndexTuples(rri, slot, estate, update, false, NULL, NIL);
#endif
}

#endif							/* DLOCK_COMPAT_H */
