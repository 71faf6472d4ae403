/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * dlock_store_local.c
 *		A local connection to the server the plugin runs in (the SQL
 *		service, mysql_real_connect_local): its statements run in the
 *		calling thread itself (the manager's, or a caller's running a
 *		batch), in a THD of its own that the service makes current for
 *		the statement.  A statement over the store's socket connection
 *		costs two thread wake-ups (~60 us on a loaded 2-core machine,
 *		~9 us this way).  Its statements are not written to the binary
 *		log, so it is used only on a server that writes none
 *		(dlock_store.c: binlog_off).
 *
 * The service takes text statements only, no prepared ones: the callers
 * prepare theirs with PREPARE and run them with EXECUTE ... USING, every
 * value a decimal integer or a hex literal (X'...': only hex digits), so
 * nothing of a name, key or value reaches the text as it is
 * (dlock_store_batch.c: text_value).  The connection has no account and all
 * privileges; it runs only the fixed statements of dlock_store_batch.c (a
 * batch's rows and its transaction).  Since read_only does not hold it
 * back, the batch asks local_read_only before writing (dlock_store_batch.c:
 * local_refused).
 *
 * The server's headers only (the client library's stay in dlock_store.c).
 */
#define MYSQL_DYNAMIC_PLUGIN
#include <my_global.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <mysql/plugin.h>
#include <mysql/service_sql.h>

#include "dlock_store_local.h"

/*
 * The service's pointer, set by the server when it loads the library (it
 * looks the symbol up by name, exports.map keeps it visible).  Its initial
 * value is the interface version the server checks: VERSION_sql_service of
 * service_versions.h, which Debian does not install - 0x0102 in MariaDB
 * 10.11 and 11.8 (the value libmysqlservices.a of each holds).
 */
struct sql_service_st *sql_service = (struct sql_service_st *) 0x0102;

/*
 * The service keeps what a statement allocated in its session (THD) until
 * the connection closes - about 3 KB per statement, 90 MB a second under a
 * busy hand-off - so the connection is closed and opened again after this
 * many statements, between batches (local_renew).
 */
#define LOCAL_RENEW_AFTER 1000

static MYSQL *local;
static unsigned int statements;	/* run on this connection */
static pthread_t manager_thread;	/* the one that opens it */
static my_bool (*thread_end) (void);
static const my_bool *server_read_only;
static unsigned int opened;

int
local_thread_begin(char *msg, size_t msglen)
{
	/* mysys' per-thread state, which a THD needs; no service offers it */
	my_bool		(*thread_init) (void) = (my_bool (*)(void)) dlsym(RTLD_DEFAULT, "my_thread_init");

	thread_end = (my_bool (*)(void)) dlsym(RTLD_DEFAULT, "my_thread_end");
	server_read_only = (const my_bool *) dlsym(RTLD_DEFAULT, "opt_readonly");
	if (thread_init == NULL || thread_end == NULL || thread_init())
	{
		snprintf(msg, msglen, "cannot set up the lock manager thread for local statements");
		thread_end = NULL;
		return -1;
	}
	manager_thread = pthread_self();
	return 0;
}

void
local_thread_end(void)
{
	if (local)
		mysql_close(local);
	local = NULL;
	if (thread_end)
		thread_end();
	thread_end = NULL;
}

static int
local_open(char *msg, size_t msglen)
{
	static const char *const setup[] = {STORE_SESSION_SETUP};

	if (local)
		return 0;
	/*
	 * Opened in a thread with a THD of its own (a caller's running a batch),
	 * the service would run the statements in that THD, in its transaction
	 */
	if (!pthread_equal(pthread_self(), manager_thread))
	{
		snprintf(msg, msglen, "the local connection is opened by the lock manager thread only");
		return -1;
	}
	opened++;
	statements = 0;
	local = mysql_init(NULL);
	if (local == NULL)
	{
		snprintf(msg, msglen, "out of memory");
		return -1;
	}
	if (mysql_real_connect_local(local) == NULL)
		goto failed;
	for (size_t i = 0; i < sizeof(setup) / sizeof(setup[0]); i++)
		if (mysql_real_query(local, setup[i], (unsigned long) strlen(setup[i])) != 0)
			goto failed;
	return 0;
failed:
	snprintf(msg, msglen, "cannot open a local connection: %s", mysql_error(local));
	mysql_close(local);
	local = NULL;
	return -1;
}

int
local_ready(void)
{
	return local != NULL && statements < LOCAL_RENEW_AFTER;
}

void
local_renew(void)
{
	if (local != NULL && statements >= LOCAL_RENEW_AFTER &&
		pthread_equal(pthread_self(), manager_thread))
	{
		mysql_close(local);
		local = NULL;			/* the next statement opens it */
	}
}

unsigned int
local_opened(void)
{
	return opened;
}

int
local_query(const char *q, size_t len, unsigned long long *affected,
			unsigned int *errnum, char *msg, size_t msglen)
{
	*errnum = 0;
	if (local_open(msg, msglen) != 0)
		return -1;
	statements++;
	if (mysql_real_query(local, q, (unsigned long) len) != 0)
	{
		*errnum = mysql_errno(local);
		snprintf(msg, msglen, "%s", mysql_error(local));
		return -1;
	}
	if (affected)
		*affected = (unsigned long long) mysql_affected_rows(local);
	return 0;
}

/*
 * The server's read_only itself (mysqld.cc's opt_readonly, a my_bool in
 * 10.11 and 11.8, which SET GLOBAL read_only sets once the writes running
 * have finished): asking with SELECT @@global.read_only costs a statement's
 * parse in every batch, measured to take the whole of what the local
 * connection saves.  The SELECT is what is left if the symbol is missing.
 */
int
local_read_only(char *msg, size_t msglen)
{
	static const char q[] = "SELECT @@global.read_only";
	MYSQL_RES  *res;
	MYSQL_ROW	row;
	int			ro = -1;

	if (server_read_only)
		return __atomic_load_n(server_read_only, __ATOMIC_ACQUIRE) != 0;
	if (local_open(msg, msglen) != 0)
		return -1;
	if (mysql_real_query(local, q, sizeof(q) - 1) != 0 ||
		(res = mysql_store_result(local)) == NULL)
	{
		snprintf(msg, msglen, "%s", mysql_error(local));
		return -1;
	}
	if ((row = mysql_fetch_row(res)) != NULL && row[0] != NULL)
		ro = strcmp(row[0], "0") != 0 && strcmp(row[0], "OFF") != 0;
	else
		snprintf(msg, msglen, "cannot read read_only");
	mysql_free_result(res);
	return ro;
}
