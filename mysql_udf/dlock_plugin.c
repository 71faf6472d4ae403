/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * dlock_plugin.c
 *		The server plugin in dlock_udf.so (INSTALL SONAME 'dlock_udf'): an
 *		audit plugin whose init starts the lock manager thread and whose
 *		deinit stops it, and whose connection events end a session's locks
 *		and requests the moment the connection ends - quit, vanished client,
 *		KILL, wait_timeout alike.  Its system variables are the settings.
 *
 * The SQL functions (CREATE FUNCTION ... SONAME 'dlock_udf.so') live in
 * the same library: the server opens it once for both (dlopen hands back
 * the same handle), so they share the manager.
 */
#define MYSQL_DYNAMIC_PLUGIN
/* first: the server's mutex and condition types, to check MgrMutex and MgrCond */
#include <my_global.h>
#include <my_pthread.h>

#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>

#include <mysql/plugin.h>
#include <mysql/plugin_audit.h>

#include "dlock_mgr.h"
#include "dlock_store.h"

/* The settings (dlock_types.h), read by the SQL functions and the manager. */
unsigned int dlock_queue_row_delay_ms = 5;
unsigned int dlock_restart_grace_ms = 5000;
unsigned long long dlock_max_ttl_seconds = 86400;
unsigned long long dlock_default_ttl_seconds = 60;

_Static_assert(sizeof(MgrMutex) == sizeof(mysql_mutex_t) &&
			   offsetof(MgrMutex, psi) == offsetof(mysql_mutex_t, m_psi) &&
			   sizeof(MgrCond) == sizeof(mysql_cond_t) &&
			   offsetof(MgrCond, psi) == offsetof(mysql_cond_t, m_psi),
			   "MgrMutex/MgrCond must be laid out as mysql_mutex_t/mysql_cond_t");

static int
dlock_plugin_init(void *p)
{
	DlockErr	err;
	char	  **sock = (char **) dlsym(RTLD_DEFAULT, "mysqld_unix_port");
	unsigned int *port = (unsigned int *) dlsym(RTLD_DEFAULT, "mysqld_port");

	(void) p;
	store_set_server(sock && *sock ? *sock : NULL, port ? *port : 0);
	if (mgr_start(&err) != 0)
	{
		fprintf(stderr, "dlock: %s\n", err.msg);
		return 1;
	}
	return 0;
}

static int
dlock_plugin_deinit(void *p)
{
	(void) p;
	mgr_stop();
	return 0;
}

/*
 * A connection ended: its session locks go, its requests are withdrawn.  A
 * statement ended: if it failed, the grants it made are given back (its
 * client never saw their tokens).
 */
static void
dlock_notify(MYSQL_THD thd, unsigned int event_class, const void *event)
{
	(void) thd;
	if (event_class == MYSQL_AUDIT_CONNECTION_CLASS)
	{
		const struct mysql_event_connection *ev = event;

		if (ev->event_subclass == MYSQL_AUDIT_CONNECTION_DISCONNECT)
			mgr_session_end(ev->thread_id);
	}
	else if (event_class == MYSQL_AUDIT_GENERAL_CLASS)
	{
		const struct mysql_event_general *ev = event;

		if (ev->event_subclass == MYSQL_AUDIT_GENERAL_STATUS)
			dlock_statement_end(ev->general_thread_id, ev->general_error_code != 0);
	}
}

static struct st_mysql_audit dlock_audit = {
	MYSQL_AUDIT_INTERFACE_VERSION,
	NULL,
	dlock_notify,
	{MYSQL_AUDIT_CONNECTION_CLASSMASK | MYSQL_AUDIT_GENERAL_CLASSMASK}
};

static MYSQL_SYSVAR_UINT(queue_row_delay, dlock_queue_row_delay_ms,
						 PLUGIN_VAR_RQCMDARG,
						 "Milliseconds a waiter waits before its row is written to dlock.queue",
						 NULL, NULL, 5, 0, 60000, 0);
static MYSQL_SYSVAR_UINT(restart_grace, dlock_restart_grace_ms,
						 PLUGIN_VAR_RQCMDARG,
						 "Milliseconds leases that ran out while the server was down run on after a start",
						 NULL, NULL, 5000, 0, 3600000, 0);
static MYSQL_SYSVAR_ULONGLONG(max_ttl, dlock_max_ttl_seconds,
							  PLUGIN_VAR_RQCMDARG,
							  "Longest lease in seconds a call may ask for",
							  NULL, NULL, 86400, 1, 366ULL * 86400, 0);

static MYSQL_SYSVAR_ULONGLONG(default_ttl, dlock_default_ttl_seconds,
							  PLUGIN_VAR_RQCMDARG,
							  "Lease in seconds of an owner key's lock taken without a ttl "
							  "(at most dlock_max_ttl)",
							  NULL, NULL, 60, 1, 366ULL * 86400, 0);

static struct st_mysql_sys_var *dlock_sysvars[] = {
	MYSQL_SYSVAR(queue_row_delay),
	MYSQL_SYSVAR(restart_grace),
	MYSQL_SYSVAR(max_ttl),
	MYSQL_SYSVAR(default_ttl),
	NULL
};

maria_declare_plugin(dlock)
{
	MYSQL_AUDIT_PLUGIN,
	&dlock_audit,
	"dlock",
	"dlock",
	"Fair, leased, named locks: the lock manager and its session ends",
	PLUGIN_LICENSE_GPL,
	dlock_plugin_init,
	dlock_plugin_deinit,
	0x0100,
	NULL,
	dlock_sysvars,
	"1.0",
	MariaDB_PLUGIN_MATURITY_GAMMA
}
maria_declare_plugin_end;
