/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * dlock_store_local.h
 *		The lock store's second way into the server: a local connection
 *		(the server's SQL service), whose statements run in the calling
 *		thread - no socket, no server thread to wake and wait for.  A batch
 *		writes its rows this way on a server without a binary log
 *		(dlock_store_batch.c).
 *
 * Free of MySQL headers, as dlock_store.h.  The batch's thread calls these
 * (the manager thread, or a caller's running a batch: dlock_mgr.c), between
 * the manager thread's local_thread_begin and local_thread_end; only the
 * manager thread opens the connection.
 */
#ifndef DLOCK_STORE_LOCAL_H
#define DLOCK_STORE_LOCAL_H

#include <stddef.h>

/* The session of both ways into the store (dlock_store.c, dlock_store_local.c). */
#define STORE_SESSION_SETUP \
	"SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED", \
	"SET SESSION autocommit = 1, innodb_lock_wait_timeout = 1, " \
	"lock_wait_timeout = 2, time_zone = '+00:00', max_statement_time = 0, " \
	/* the MEMORY tables' size limit, when this connection opens them first */ \
	"max_heap_table_size = 1073741824, " \
	"sql_mode = 'STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION'"

/* The server's per-thread state for the manager thread; 0, or -1 with msg. */
extern int	local_thread_begin(char *msg, size_t msglen);
/* Close the connection and end the thread's state. */
extern void local_thread_end(void);

/*
 * Run one statement (opening the connection first if need be): 0 with the
 * rows it changed in *affected, or -1 with the server's error number in
 * *errnum (0 if there is none) and its message in msg.
 */
extern int	local_query(const char *q, size_t len, unsigned long long *affected,
						unsigned int *errnum, char *msg, size_t msglen);

/*
 * Whether the connection is open and not due to be renewed, 1 or 0: only
 * the manager thread opens it, so only then may another thread run a batch.
 */
extern int	local_ready(void);

/*
 * In the manager thread between batches: close the connection if it ran
 * enough statements (the service frees a session's memory only then).
 */
extern void local_renew(void);

/* How many connections were opened: a new one has none of the old one's prepared statements. */
extern unsigned int local_opened(void);

/* Whether the server is read-only now: 1, 0, or -1 with msg. */
extern int	local_read_only(char *msg, size_t msglen);

#endif							/* DLOCK_STORE_LOCAL_H */
