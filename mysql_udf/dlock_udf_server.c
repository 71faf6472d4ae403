/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * dlock_udf_server.c
 *		The server's side of an SQL function's call: the server's hooks,
 *		the per-call state, raising errors, the caller's identity and kill
 *		state, and what the caller may do.
 *
 * Interface: see dlock_udf.h (dlock_udf_server.c).
 *
 * The server hooks are symbols every mariadbd exports for plugins:
 * _current_thd, thd_get_thread_id and thd_kill_level tell who calls and
 * whether KILL [QUERY] hit it; thd_is_connected whether its client is
 * still there; my_printf_error raises a real SQL error or
 * warning at row time (a UDF's own *error flag only yields NULL);
 * server_version names it.  (mysqld_unix_port and mysqld_port, where the
 * store connects, are dlock_plugin.c's.)  They are looked up with dlsym so a server lacking one gets a clear error from
 * CREATE FUNCTION's first call instead of a failed load.  They are
 * resolved once, under pthread_once, and never change after.
 *
 * Who may call: UDFs need no privilege in MariaDB, so every call checks
 * one with the server's own access-control functions (C++ symbols of
 * mariadbd, by their mangled names): EXECUTE on a marker procedure of
 * schema dlock (dlock.user_access, monitor_access, admin_access; the roles
 * dlock_user, dlock_monitor and dlock_admin hold them), through
 * check_routine_access in the caller's current security context - active
 * role, SQL SECURITY DEFINER routines, global and schema grants alike - and
 * the caller's account (CURRENT_USER()) through get_default_definer.  The
 * namespace rule asks check_role_is_granted whether a role whose grants
 * matter is granted to the account (directly or through roles, active or
 * not).  dlock_locks() hands the view dlock.locks only the rows the caller
 * may see.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlock_compat.h"
#include "dlock_udf.h"

/* my_sys.h flag: push a warning instead of raising an error */
#define DLOCK_ME_WARNING 2048

typedef void *(*current_thd_fn) (void);
typedef unsigned long (*thread_id_fn) (const void *thd);
typedef int (*kill_level_fn) (const void *thd);
typedef unsigned char (*is_connected_fn) (void *thd);
typedef void (*printf_error_fn) (unsigned int err, const char *fmt,
								 unsigned long flags,...);


/* check_routine_access(THD*, privilege_t, const LEX_CSTRING *db,
 * const LEX_CSTRING *name, const Sp_handler *, bool no_errors): true when
 * denied */
typedef _Bool (*routine_access_fn) (void *thd, unsigned long long want,
									const ServerLexString *db,
									const ServerLexString *name,
									const void *sp_handler, _Bool no_errors);
/* get_default_definer(THD*, LEX_USER*, bool role): CURRENT_USER() */
typedef void (*default_definer_fn) (void *thd, ServerLexUser *out, _Bool role);
/* check_role_is_granted(const char *user, const char *host, const char *role):
 * the role is granted to the account user@host, directly or through roles */
typedef _Bool (*role_granted_fn) (const char *user, const char *host, const char *role);

/* thd_enter_cond(THD*, mysql_cond_t*, mysql_mutex_t*, const PSI_stage_info*,
 * PSI_stage_info *old, func, file, line): a KILL of the thread broadcasts the
 * condition; thd_exit_cond(THD*, const PSI_stage_info*, func, file, line)
 * unlocks the mutex and ends that */
typedef void (*enter_cond_fn) (void *thd, void *cond, void *mutex,
							   const void *stage, void *old_stage,
							   const char *func, const char *file, int line);
typedef void (*exit_cond_fn) (void *thd, const void *stage,
							  const char *func, const char *file, int line);


static pthread_once_t hooks_once = PTHREAD_ONCE_INIT;
static struct
{
	current_thd_fn current_thd;
	thread_id_fn thread_id;
	kill_level_fn kill_level;
	is_connected_fn is_connected;	/* optional */
	enter_cond_fn enter_cond;	/* optional, with exit_cond */
	exit_cond_fn exit_cond;
	printf_error_fn printf_error;
	const char *server_version;
	routine_access_fn routine_access;
	default_definer_fn default_definer;
	is_acl_user_chars_fn is_acl_user_chars; /* 10.11, or ... */
	is_acl_user_lex_fn is_acl_user_lex; /* ... 11.x */
	role_granted_fn role_granted;
	const void *sp_handler_procedure;
	char		missing[256];	/* "": every hook there */
}			hooks;

static void
hooks_init(void)
{
	hooks.current_thd = (current_thd_fn) dlsym(RTLD_DEFAULT, "_current_thd");
	hooks.thread_id = (thread_id_fn) dlsym(RTLD_DEFAULT, "thd_get_thread_id");
	hooks.kill_level = (kill_level_fn) dlsym(RTLD_DEFAULT, "thd_kill_level");
	hooks.printf_error = (printf_error_fn) dlsym(RTLD_DEFAULT, "my_printf_error");
	hooks.is_connected = (is_connected_fn) dlsym(RTLD_DEFAULT, "thd_is_connected");
	hooks.server_version = (const char *) dlsym(RTLD_DEFAULT, "server_version");
	hooks.routine_access = (routine_access_fn) dlsym(RTLD_DEFAULT, SYM_ROUTINE_ACCESS);
	hooks.default_definer = (default_definer_fn) dlsym(RTLD_DEFAULT, SYM_DEFAULT_DEFINER);
	hooks.is_acl_user_chars = (is_acl_user_chars_fn) dlsym(RTLD_DEFAULT, SYM_IS_ACL_USER_CHARS);
	hooks.is_acl_user_lex = (is_acl_user_lex_fn) dlsym(RTLD_DEFAULT, SYM_IS_ACL_USER_LEX);
	hooks.role_granted = (role_granted_fn) dlsym(RTLD_DEFAULT, SYM_ROLE_GRANTED);
	hooks.sp_handler_procedure = dlsym(RTLD_DEFAULT, "sp_handler_procedure");
	hooks.enter_cond = (enter_cond_fn) dlsym(RTLD_DEFAULT, SYM_ENTER_COND);
	hooks.exit_cond = (exit_cond_fn) dlsym(RTLD_DEFAULT, SYM_EXIT_COND);
	if (!hooks.enter_cond || !hooks.exit_cond)
		hooks.enter_cond = NULL, hooks.exit_cond = NULL;

	if (!hooks.current_thd || !hooks.thread_id || !hooks.kill_level || !hooks.printf_error ||
		!hooks.routine_access || !hooks.default_definer ||
		(!hooks.is_acl_user_chars && !hooks.is_acl_user_lex) ||
		!hooks.role_granted || !hooks.sp_handler_procedure)
		snprintf(hooks.missing, sizeof(hooks.missing),
				 "this server (%s) does not export %s",
				 hooks.server_version ? hooks.server_version : "?",
				 !hooks.current_thd ? "_current_thd" :
				 !hooks.thread_id ? "thd_get_thread_id" :
				 !hooks.kill_level ? "thd_kill_level" :
				 !hooks.printf_error ? "my_printf_error" :
				 !hooks.routine_access ? "check_routine_access" :
				 !hooks.default_definer ? "get_default_definer" :
				 !hooks.is_acl_user_chars && !hooks.is_acl_user_lex ? "is_acl_user" :
				 !hooks.role_granted ? "check_role_is_granted" : "sp_handler_procedure");
}

/* is_acl_user in whichever form this server exports (dlock_compat.h) */
_Bool
is_acl_user(const char *host, const char *user)
{
	ServerLexString h = {host, strlen(host)};
	ServerLexString u = {user, strlen(user)};

	if (hooks.is_acl_user_chars)
		return hooks.is_acl_user_chars(host, user);
	return hooks.is_acl_user_lex(&h, &u);
}

/* The server's version string, or "?". */
const char *
server_version_string(void)
{
	return hooks.server_version ? hooks.server_version : "?";
}

/* ------------------------------------------------------------------------
 * Per-call state and raising errors
 * ------------------------------------------------------------------------ */
int
init_common(UDF_INIT *initid, UDF_ARGS *args, char *message, const char *fn,
			unsigned int min_args, unsigned int max_args, const char *usage,
			const int *numeric)
{
	CallState  *cs;
	DlockErr	err;

	pthread_once(&hooks_once, hooks_init);
	if (hooks.missing[0])
	{
		snprintf(message, MYSQL_ERRMSG_SIZE, "%s: %s", fn, hooks.missing);
		return 1;
	}
	if (args->arg_count < min_args || args->arg_count > max_args)
	{
		/* the server shows only 80 characters of this message */
		snprintf(message, MYSQL_ERRMSG_SIZE, "%s: expected %s", fn, usage);
		return 1;
	}
	for (unsigned int i = 0; i < args->arg_count; i++)
		args->arg_type[i] = (numeric && numeric[i]) ? REAL_RESULT : STRING_RESULT;
	if (mgr_check_running(fn, &err) != 0)
	{
		snprintf(message, MYSQL_ERRMSG_SIZE, "%s", err.msg);
		return 1;
	}
	cs = calloc(1, sizeof(CallState));
	if (cs == NULL)
	{
		snprintf(message, MYSQL_ERRMSG_SIZE, "%s: out of memory", fn);
		return 1;
	}
	initid->ptr = (char *) cs;
	initid->maybe_null = 1;
	initid->const_item = 0;
	return 0;
}

void
deinit_common(UDF_INIT *initid)
{
	CallState  *cs = (CallState *) initid->ptr;

	if (cs)
	{
		free(cs->buf);
		free(cs);
		initid->ptr = NULL;
	}
}

/* Raise an SQL error (or warning) in the calling statement. */
void
report(const DlockErr *err)
{
	hooks.printf_error((unsigned int) err->code, "%s",
					   err->warning ? DLOCK_ME_WARNING : 0, err->msg);
}

/* A call the store refused: raise its error, and the result is NULL. */
void
report_failure(const DlockErr *err, char *error, char *is_null)
{
	report(err);
	*error = 1;
	*is_null = 1;
}

/* Raise the error fmt (with fn and what) with code; the result is NULL. */
void
fail(char *error, char *is_null, int code, const char *fmt, const char *fn,
	 const char *what)
{
	DlockErr	e;

	e.code = code;
	e.warning = 0;
	snprintf(e.msg, sizeof(e.msg), fmt, fn, what);
	report(&e);
	*error = 1;
	*is_null = 1;
}

/*
 * caller_killed
 *		True once KILL QUERY / KILL hit the calling statement, or its client
 *		went away (the server itself notices that only after we return).
 */
int
caller_killed(void *arg)
{
	void	   *thd = hooks.current_thd();

	(void) arg;
	if (hooks.kill_level(thd) != 0)
		return 1;
	return hooks.is_connected != NULL && hooks.is_connected(thd) == 0;
}

/* The caller's wait, registered with the server: a KILL wakes it at once. */
static void
caller_wait_enter(MgrCond *cond, MgrMutex *mutex)
{
	hooks.enter_cond(hooks.current_thd(), cond, mutex, NULL, NULL, __func__, __FILE__,
					 __LINE__);
}

static void
caller_wait_exit(void)
{
	hooks.exit_cond(hooks.current_thd(), NULL, __func__, __FILE__, __LINE__);
}

/* ------------------------------------------------------------------------
 * Access: who calls, and what it may do
 * ------------------------------------------------------------------------ */
static const struct
{
	int			bit;
	const char *routine;		/* EXECUTE on dlock.<routine> grants it */
	const char *role;
}			access_levels[] = {
	{DLOCK_ACCESS_USER, "user_access", "dlock_user"},
	{DLOCK_ACCESS_MONITOR, "monitor_access", "dlock_monitor"},
	{DLOCK_ACCESS_ADMIN, "admin_access", "dlock_admin"},
};

/* Whether the caller's current security context holds one access bit. */
static int
has_access(void *thd, int bit)
{
	for (size_t i = 0; i < sizeof(access_levels) / sizeof(access_levels[0]); i++)
		if (access_levels[i].bit == bit)
		{
			ServerLexString db = {"dlock", 5};
			ServerLexString name = {access_levels[i].routine,
			strlen(access_levels[i].routine)};

			return !hooks.routine_access(thd, SERVER_EXECUTE_ACL, &db, &name,
										 hooks.sp_handler_procedure, 1);
		}
	return 0;
}

/*
 * The access bits of 'wanted' the caller holds; dlock_admin implies all of
 * them and is looked at first (one ACL look-up for an administrator).
 */
static int
caller_access(void *thd, int wanted)
{
	int			bits = 0;

	if (has_access(thd, DLOCK_ACCESS_ADMIN))
		return DLOCK_ACCESS_ADMIN | DLOCK_ACCESS_USER | DLOCK_ACCESS_MONITOR;
	if ((wanted & DLOCK_ACCESS_USER) && has_access(thd, DLOCK_ACCESS_USER))
		bits |= DLOCK_ACCESS_USER;
	if ((wanted & DLOCK_ACCESS_MONITOR) && has_access(thd, DLOCK_ACCESS_MONITOR))
		bits |= DLOCK_ACCESS_MONITOR;
	return bits;
}

/* The caller's account as CURRENT_USER() shows it, user@host. */
static void
caller_account(void *thd, DlockCaller *who)
{
	ServerLexUser u;
	int			n;

	memset(&u, 0, sizeof(u));
	hooks.default_definer(thd, &u, 0);
	n = snprintf(who->account, sizeof(who->account), "%.*s@%.*s",
				 (int) (u.user.str ? u.user.length : 0),
				 u.user.str ? u.user.str : "",
				 (int) (u.host.str ? u.host.length : 0),
				 u.host.str ? u.host.str : "");
	if (n < 0)
		n = 0;
	who->account_len = (size_t) n < sizeof(who->account) ?
		(size_t) n : sizeof(who->account) - 1;
}

/*
 * Whether a role is granted to the caller's account, directly or through
 * other roles, active or not (the server's ACL, as SET ROLE sees it).
 * The namespace rule asks it: a role the account could make active binds
 * it whatever role is active now.
 */
static bool
caller_role_granted(const DlockCaller *who, const char *role)
{
	char		user[DLOCK_MAX_ACCOUNT_LEN + 1];
	const char *at = memrchr(who->account, '@', who->account_len);

	if (at == NULL)
		return false;
	snprintf(user, sizeof(user), "%.*s", (int) (at - who->account), who->account);
	return hooks.role_granted(user, at + 1, role);
}

/* Fills *who; access holds the bits of 'wanted' the caller has. */
void
caller(DlockCaller *who, int wanted)
{
	void	   *thd = hooks.current_thd();

	who->conn_id = hooks.thread_id(thd);
	who->killed = caller_killed;
	who->killed_arg = NULL;
	who->wait_enter = hooks.enter_cond ? caller_wait_enter : NULL;
	who->wait_exit = hooks.exit_cond ? caller_wait_exit : NULL;
	who->access = caller_access(thd, wanted);
	who->role_granted = caller_role_granted;
	caller_account(thd, who);
}

/*
 * Fills *who and checks that the caller holds one of the access bits in
 * 'needed'; 0, or raises the access error (the result is then NULL).
 */
int
authorize(DlockCaller *who, int needed, const char *fn, char *error,
		  char *is_null)
{
	DlockErr	e;
	const char *role = "dlock_user";
	const char *routine = "user_access";

	caller(who, needed);
	if (who->access & needed)
		return 0;
	for (size_t i = 0; i < sizeof(access_levels) / sizeof(access_levels[0]); i++)
		if (needed & access_levels[i].bit)
		{
			role = access_levels[i].role;
			routine = access_levels[i].routine;
			break;
		}
	e.code = DLOCK_ER_ACCESS;
	e.warning = 0;
	snprintf(e.msg, sizeof(e.msg),
			 "%s: access denied for %.200s: needs the role %s "
			 "(EXECUTE ON PROCEDURE dlock.%s)", fn, who->account, role, routine);
	report(&e);
	*error = 1;
	*is_null = 1;
	return -1;
}

