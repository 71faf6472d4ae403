/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * dlock_semisync.c
 *		The server's semi-synchronous replication as a primary, read from its
 *		own globals (mariadbd exports them, as it does the symbols the SQL
 *		functions use): whether commits wait for a replica's acknowledgement
 *		(rpl_semi_sync_master_enabled), and how many commits that should have
 *		waited did not get it (Rpl_semi_sync_master_no_tx: the wait timed
 *		out, a KILL QUERY or KILL hit the waiting connection - after which
 *		the statement succeeds all the same -, semi-sync had fallen back to
 *		asynchronous, or no replica was there with
 *		rpl_semi_sync_master_wait_no_slave OFF).  Both are updated by the
 *		committing thread itself, before its statement returns
 *		(Rpl_semi_sync_master_status is not: it is refreshed only by SHOW
 *		STATUS).
 *
 * Interface: see dlock_semisync.h.
 *
 * The pointers are set once at the plugin's init, before the manager
 * thread starts; the values they point to are the server's.
 */
#define _GNU_SOURCE
#include "dlock_semisync.h"

#include <dlfcn.h>
#include <stdio.h>

#include "dlock_clock.h"
#include "dlock_handoff.h"
#include "dlock_store.h"

/* Waiting for the semi-synchronous replica: pauses between looks, doubling. */
#define SYNC_PAUSE_MIN_MS 10
#define SYNC_PAUSE_MAX_MS 1000

/* NULL when the server has none of them. */
static struct
{
	const volatile char *enabled;
	const volatile unsigned long *no_tx;
}			ss;

void
semisync_init(void)
{
	/* my_bool and ulong in MariaDB 10.11's semisync_master.cc */
	ss.enabled = dlsym(RTLD_DEFAULT, "rpl_semi_sync_master_enabled");
	ss.no_tx = dlsym(RTLD_DEFAULT, "rpl_semi_sync_master_no_transactions");
	if (ss.enabled == NULL || ss.no_tx == NULL)
		fprintf(stderr, "dlock: this server does not export its semi-synchronous "
				"replication state: answers on a semi-synchronous primary are not "
				"held back until the replica acknowledged them\n");
}

bool
semisync_enabled(void)
{
	return ss.enabled != NULL && ss.no_tx != NULL && *ss.enabled;
}

unsigned long
semisync_no_tx(void)
{
	return *ss.no_tx;
}

/*
 * On a semi-synchronous primary no answer goes out before the replica has
 * acknowledged the batch: an isolated primary must never acknowledge a
 * grant that the replica promoted in its place does not know of - a lease,
 * a session's lock (the replica skips those rows, but the ack proves the
 * primary was not alone when it granted), a ticket block.  Every statement
 * of a batch waits for the acknowledgement in the server, MEMORY tables'
 * too - unless MariaDB ends the wait early: after
 * rpl_semi_sync_master_timeout (and then it stops waiting at all until a
 * replica has caught up), without a replica when
 * rpl_semi_sync_master_wait_no_slave is OFF, or when a KILL QUERY or KILL
 * hits the waiting connection; the statement then succeeds as if
 * acknowledged.  Each such commit counts in Rpl_semi_sync_master_no_tx.
 * So when that count moved during the batch (whichever connection's commit
 * it was), the manager writes one more change (store_sync) until one
 * commits with the count still: the replica acknowledges binary log
 * positions in order, so that covers the whole batch.  Meanwhile calls
 * wait, past their timeouts; an unacknowledged change is written again
 * with growing pauses, which also gives a replica that caught up an event
 * to acknowledge (semi-sync comes back on with one).  0, or -1 with err:
 * the server stops, or this server became read-only.
 */
int
semisync_confirm(unsigned long no_tx, DlockErr *err)
{
	DLockTime	began = 0;
	long		pause = SYNC_PAUSE_MIN_MS;
	bool		need = semisync_enabled() && *ss.no_tx != no_tx;

	while (need && semisync_enabled())
	{
		unsigned long before = *ss.no_tx;

		if (began == 0)
		{
			began = mono_us();
			fprintf(stderr, "dlock: lock manager waits for the semi-synchronous "
					"replica to acknowledge a batch (a commit went without its "
					"acknowledgement); no answer goes out before\n");
		}
		if (handoff.stopping)
		{
			dlock_set_err(err, DLOCK_ER_UNKNOWN, "the server stops before the "
					"semi-synchronous replica acknowledged the batch");
			return -1;
		}
		if ((store_conn_id() == 0 && store_open(err) != 0) || store_sync(err) != 0)
		{
			if (store_last_errno() == DLOCK_ER_READ_ONLY)
				return -1;
			store_close();
		}
		else if (*ss.no_tx == before)
		{
			need = false;
			continue;
		}
		pause_ms(pause);
		if (pause < SYNC_PAUSE_MAX_MS)
			pause *= 2;
	}
	if (began != 0)
		fprintf(stderr, "dlock: lock manager: the replica acknowledged the batch "
				"after %.1f s\n", (double) (mono_us() - began) / 1e6);
	return 0;
}
