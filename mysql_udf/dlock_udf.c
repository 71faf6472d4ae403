/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * dlock_udf.c
 *		The SQL functions of the MySQL/MariaDB plugin (UDFs): argument
 *		checks, the caller's identity and kill state, and error reporting.
 *
 * Built against the server's UDF layout (mysql_com.h of libmariadbd-dev),
 * never the client library's, which differs.  The lock manager itself is
 * the thread of dlock_mgr.c, started by the plugin (dlock_plugin.c); a
 * call hands it a request (mgr_call) and sleeps until it is answered.
 *
 * Rules, as in MariaDB's sql/udf_example.c: no mutable globals except the
 * server hooks, resolved once under pthread_once; per-call state lives in
 * initid->ptr and is freed in the _deinit function; argument counts and
 * types are checked in _init (message prefixed with the function name);
 * argument values are read only at row time, where SQL NULL is
 * args->args[i] == NULL.
 *
 * The server hooks are symbols every mariadbd exports for plugins:
 * _current_thd, thd_get_thread_id and thd_kill_level tell who calls and
 * whether KILL [QUERY] hit it; thd_is_connected whether its client is
 * still there; my_printf_error raises a real SQL error or
 * warning at row time (a UDF's own *error flag only yields NULL);
 * mysqld_unix_port, mysqld_port and glob_hostname name this server.  They
 * are looked up with dlsym so a server lacking one gets a clear error from
 * CREATE FUNCTION's first call instead of a failed load.
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
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include <mysql.h>				/* the server's (-I .../server): UDF_INIT, UDF_ARGS */

#include "dlock_access.h"
#include "dlock_compat.h"
#include "dlock_core.h"
#include "dlock_mgr.h"
#include "dlock_sessions.h"
#include "dlock_store.h"

#define DLOCK_VERSION "1.2"

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
static current_thd_fn h_current_thd;
static thread_id_fn h_thread_id;
static kill_level_fn h_kill_level;
static is_connected_fn h_is_connected;	/* optional */
static enter_cond_fn h_enter_cond;	/* optional, with h_exit_cond */
static exit_cond_fn h_exit_cond;
static printf_error_fn h_printf_error;
static const char *h_server_version;
static routine_access_fn h_routine_access;
static default_definer_fn h_default_definer;
static is_acl_user_chars_fn h_is_acl_user_chars;	/* 10.11, or ... */
static is_acl_user_lex_fn h_is_acl_user_lex;	/* ... 11.x */
static role_granted_fn h_role_granted;
static const void *h_sp_handler_procedure;
static char hooks_missing[256];

static void
hooks_init(void)
{
	h_current_thd = (current_thd_fn) dlsym(RTLD_DEFAULT, "_current_thd");
	h_thread_id = (thread_id_fn) dlsym(RTLD_DEFAULT, "thd_get_thread_id");
	h_kill_level = (kill_level_fn) dlsym(RTLD_DEFAULT, "thd_kill_level");
	h_printf_error = (printf_error_fn) dlsym(RTLD_DEFAULT, "my_printf_error");
	h_is_connected = (is_connected_fn) dlsym(RTLD_DEFAULT, "thd_is_connected");
	h_server_version = (const char *) dlsym(RTLD_DEFAULT, "server_version");
	h_routine_access = (routine_access_fn) dlsym(RTLD_DEFAULT, SYM_ROUTINE_ACCESS);
	h_default_definer = (default_definer_fn) dlsym(RTLD_DEFAULT, SYM_DEFAULT_DEFINER);
	h_is_acl_user_chars = (is_acl_user_chars_fn) dlsym(RTLD_DEFAULT, SYM_IS_ACL_USER_CHARS);
	h_is_acl_user_lex = (is_acl_user_lex_fn) dlsym(RTLD_DEFAULT, SYM_IS_ACL_USER_LEX);
	h_role_granted = (role_granted_fn) dlsym(RTLD_DEFAULT, SYM_ROLE_GRANTED);
	h_sp_handler_procedure = dlsym(RTLD_DEFAULT, "sp_handler_procedure");
	h_enter_cond = (enter_cond_fn) dlsym(RTLD_DEFAULT, SYM_ENTER_COND);
	h_exit_cond = (exit_cond_fn) dlsym(RTLD_DEFAULT, SYM_EXIT_COND);
	if (!h_enter_cond || !h_exit_cond)
		h_enter_cond = NULL, h_exit_cond = NULL;

	if (!h_current_thd || !h_thread_id || !h_kill_level || !h_printf_error ||
		!h_routine_access || !h_default_definer ||
		(!h_is_acl_user_chars && !h_is_acl_user_lex) ||
		!h_role_granted || !h_sp_handler_procedure)
		snprintf(hooks_missing, sizeof(hooks_missing),
				 "this server (%s) does not export %s",
				 h_server_version ? h_server_version : "?",
				 !h_current_thd ? "_current_thd" :
				 !h_thread_id ? "thd_get_thread_id" :
				 !h_kill_level ? "thd_kill_level" :
				 !h_printf_error ? "my_printf_error" :
				 !h_routine_access ? "check_routine_access" :
				 !h_default_definer ? "get_default_definer" :
				 !h_is_acl_user_chars && !h_is_acl_user_lex ? "is_acl_user" :
				 !h_role_granted ? "check_role_is_granted" : "sp_handler_procedure");
}

/* is_acl_user in whichever form this server exports (dlock_compat.h) */
static _Bool
is_acl_user(const char *host, const char *user)
{
	ServerLexString h = {host, strlen(host)};
	ServerLexString u = {user, strlen(user)};

	if (h_is_acl_user_chars)
		return h_is_acl_user_chars(host, user);
	return h_is_acl_user_lex(&h, &u);
}

/* ------------------------------------------------------------------------
 * Per-call state and helpers
 * ------------------------------------------------------------------------ */
typedef struct CallState
{
	char	   *buf;			/* string results */
	size_t		cap;
} CallState;

static int
init_common(UDF_INIT *initid, UDF_ARGS *args, char *message, const char *fn,
			unsigned int min_args, unsigned int max_args, const char *usage,
			const int *numeric)
{
	CallState  *cs;
	DlockErr	err;

	pthread_once(&hooks_once, hooks_init);
	if (hooks_missing[0])
	{
		snprintf(message, MYSQL_ERRMSG_SIZE, "%s: %s", fn, hooks_missing);
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

static void deinit_common(UDF_INIT *initid);

/*
 * A function's _init (argument count and types, per-call state; max_length
 * of a string result when not 0) and _deinit, which the server calls around
 * its row-time function.
 */
#define DLOCK_UDF_SETUP(fn, min_args, max_args, usage, numeric, max_len) \
my_bool fn##_init(UDF_INIT *initid, UDF_ARGS *args, char *message); \
void fn##_deinit(UDF_INIT *initid); \
my_bool \
fn##_init(UDF_INIT *initid, UDF_ARGS *args, char *message) \
{ \
	my_bool		r = init_common(initid, args, message, #fn, min_args, max_args, \
								usage, numeric); \
	if (max_len) \
		initid->max_length = max_len; \
	return r; \
} \
void \
fn##_deinit(UDF_INIT *initid) \
{ \
	deinit_common(initid); \
}

static void
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
static void
report(const DlockErr *err)
{
	h_printf_error((unsigned int) err->code, "%s",
				   err->warning ? DLOCK_ME_WARNING : 0, err->msg);
}

/* A call the store refused: raise its error, and the result is NULL. */
static void
report_failure(const DlockErr *err, char *error, char *is_null)
{
	report(err);
	*error = 1;
	*is_null = 1;
}

static void
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
static int
caller_killed(void *arg)
{
	void	   *thd = h_current_thd();

	(void) arg;
	if (h_kill_level(thd) != 0)
		return 1;
	return h_is_connected != NULL && h_is_connected(thd) == 0;
}

/* The caller's wait, registered with the server: a KILL wakes it at once. */
static void
caller_wait_enter(MgrCond *cond, MgrMutex *mutex)
{
	h_enter_cond(h_current_thd(), cond, mutex, NULL, NULL, __func__, __FILE__, __LINE__);
}

static void
caller_wait_exit(void)
{
	h_exit_cond(h_current_thd(), NULL, __func__, __FILE__, __LINE__);
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

			return !h_routine_access(thd, SERVER_EXECUTE_ACL, &db, &name,
									 h_sp_handler_procedure, 1);
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
	h_default_definer(thd, &u, 0);
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
	return h_role_granted(user, at + 1, role);
}

/* Fills *who; access holds the bits of 'wanted' the caller has. */
static void
caller(DlockCaller *who, int wanted)
{
	void	   *thd = h_current_thd();

	who->conn_id = h_thread_id(thd);
	who->killed = caller_killed;
	who->killed_arg = NULL;
	who->wait_enter = h_enter_cond ? caller_wait_enter : NULL;
	who->wait_exit = h_exit_cond ? caller_wait_exit : NULL;
	who->access = caller_access(thd, wanted);
	who->role_granted = caller_role_granted;
	caller_account(thd, who);
}

/* The start of every function: a cleared call of fn, no result yet. */
static void
call_init(DlockCall *call, const char *fn, DLockOp op, char *is_null, char *error)
{
	memset(call, 0, sizeof(*call));
	call->fn = fn;
	call->op = op;
	call->timeout_us = -1;
	*is_null = 0;
	*error = 0;
}

/*
 * Fills *who and checks that the caller holds one of the access bits in
 * 'needed'; 0, or raises the access error (the result is then NULL).
 */
static int
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

#define DLOCK_STR(x) #x
#define DLOCK_XSTR(x) DLOCK_STR(x)

/* Validate the name argument; 0 or raises the error. */
static int
get_name(UDF_ARGS *args, unsigned int i, DlockCall *req, char *error,
		 char *is_null)
{
	const char *s = args->args[i];

	if (s == NULL)
	{
		fail(error, is_null, DLOCK_ER_ARGS, "%s: lock name must not be NULL%s",
			 req->fn, "");
		return -1;
	}
	switch (dlock_check_name(s, args->lengths[i], DLOCK_MAX_NAME_LEN))
	{
		case DLOCK_CHECK_OK:
			break;
		case DLOCK_CHECK_EMPTY:
			fail(error, is_null, DLOCK_ER_ARGS,
				 "%s: lock name must not be empty%s", req->fn, "");
			return -1;
		case DLOCK_CHECK_EMPTY_SEGMENT:
		case DLOCK_CHECK_TRAILING_SLASH:
			fail(error, is_null, DLOCK_ER_ARGS,
				 "%s: a name starting with '/' is a path and must not have an empty segment or a trailing '/'%s",
				 req->fn, "");
			return -1;
		case DLOCK_CHECK_TOO_DEEP:
			fail(error, is_null, DLOCK_ER_TOO_LONG,
				 "%s: a path may have at most %s segments", req->fn,
				 DLOCK_XSTR(DLOCK_MAX_PATH_DEPTH));
			return -1;
		case DLOCK_CHECK_TOO_LONG:
		case DLOCK_CHECK_BAD_CHAR:	/* names may hold any byte; never returned */
			fail(error, is_null, DLOCK_ER_TOO_LONG,
				 "%s: lock name is longer than %s bytes", req->fn, "1024");
			return -1;
	}
	if (memchr(s, '\0', args->lengths[i]) != NULL)
	{
		fail(error, is_null, DLOCK_ER_ARGS,
			 "%s: lock name must not contain a NUL byte%s", req->fn, "");
		return -1;
	}
	/* the view shows names as utf8mb4 text: other bytes would show as '?' */
	if (!dlock_valid_utf8(s, args->lengths[i]))
	{
		fail(error, is_null, DLOCK_ER_ARGS,
			 "%s: lock name must be valid UTF-8%s", req->fn, "");
		return -1;
	}
	req->names[req->nnames] = s;
	req->name_lens[req->nnames] = args->lengths[i];
	req->nnames++;
	return 0;
}

/* Owner argument (optional, NULL = session); 0 or raises the error. */
static int
get_owner(UDF_ARGS *args, unsigned int i, DlockCall *req, char *error,
		  char *is_null)
{
	const char *s;

	req->owner = NULL;
	req->owner_len = 0;
	if (i >= args->arg_count || args->args[i] == NULL)
		return 0;
	s = args->args[i];
	switch (dlock_check_owner(s, args->lengths[i]))
	{
		case DLOCK_CHECK_OK:
			break;
		case DLOCK_CHECK_EMPTY:
			fail(error, is_null, DLOCK_ER_ARGS,
				 "%s: owner key must not be empty%s", req->fn, "");
			return -1;
		case DLOCK_CHECK_TOO_LONG:
			fail(error, is_null, DLOCK_ER_TOO_LONG,
				 "%s: owner key is longer than %s bytes", req->fn, "255");
			return -1;
		default:
			fail(error, is_null, DLOCK_ER_ARGS,
				 "%s: owner key must not contain control characters%s",
				 req->fn, "");
			return -1;
	}
	req->owner = s;
	req->owner_len = args->lengths[i];
	return 0;
}

/* Seconds argument -> microseconds; NULL/absent -> -1; 0 or raises. */
static int
get_seconds(UDF_ARGS *args, unsigned int i, const char *what, long long max_us,
			long long *out, DlockCall *req, char *error, char *is_null)
{
	double		v;
	char		lim[32];

	*out = -1;
	if (i >= args->arg_count || args->args[i] == NULL)
		return 0;
	v = *(double *) args->args[i];
	if (!(v > 0) || isnan(v))
	{
		fail(error, is_null, DLOCK_ER_ARGS, "%s: %s must be positive", req->fn, what);
		return -1;
	}
	if (v * 1e6 > (double) max_us)
	{
		DlockErr	e;

		snprintf(lim, sizeof(lim), "%lld", max_us / 1000000LL);
		e.code = DLOCK_ER_ARGS;
		e.warning = 0;
		snprintf(e.msg, sizeof(e.msg), "%s: %s must not exceed %s seconds",
				 req->fn, what, lim);
		report(&e);
		*error = 1;
		*is_null = 1;
		return -1;
	}
	*out = (long long) llround(v * 1e6);
	if (*out < 1)
		*out = 1;
	return 0;
}

/* Mode argument (optional, default exclusive); 0 or raises. */
static int
get_mode(UDF_ARGS *args, unsigned int i, DlockCall *req, char *error,
		 char *is_null)
{
	char		shown[40];
	size_t		n;

	req->mode = DLOCK_MODE_EX;
	if (i >= args->arg_count)
		return 0;
	if (args->args[i] == NULL)
	{
		fail(error, is_null, DLOCK_ER_ARGS, "%s: mode must not be NULL%s",
			 req->fn, "");
		return -1;
	}
	req->mode = dlock_mode_parse(args->args[i], args->lengths[i]);
	if (req->mode == DLOCK_MODE_INVALID)
	{
		n = args->lengths[i] < sizeof(shown) - 1 ? args->lengths[i] : sizeof(shown) - 1;
		for (size_t k = 0; k < n; k++)
		{
			unsigned char c = (unsigned char) args->args[i][k];

			shown[k] = (c < 0x20 || c == 0x7f || c == '"') ? '?' : (char) c;
		}
		shown[n] = '\0';
		fail(error, is_null, DLOCK_ER_ARGS,
			 "%s: unknown lock mode \"%s\" (expected exclusive, shared, NL, CR, CW, PR, PW or EX)",
			 req->fn, shown);
		return -1;
	}
	return 0;
}

/* Owner-keyed locks always carry a lease. */
static void
default_ttl(DlockCall *req)
{
	if (req->owner && req->ttl_us < 0)
		req->ttl_us = DLOCK_DEFAULT_OWNER_TTL_US;
	if (req->ttl_us < 0)
		req->ttl_us = 0;		/* the core's "no lease" */
}

/* The longest lease a call may ask for (the setting dlock_max_ttl). */
static long long
max_ttl_us(void)
{
	return (long long) dlock_max_ttl_seconds * 1000000LL;
}

/* Printable, bounded copy of a name for messages. */
static const char *
shown_name(const char *name, size_t len, char *buf, size_t size)
{
	size_t		n = 0;

	for (size_t i = 0; i < len && n + 4 < size; i++)
	{
		unsigned char c = (unsigned char) name[i];

		buf[n++] = (c < 0x20 || c == 0x7f) ? '?' : (char) c;
	}
	if (n < len && n + 4 >= size)
	{
		buf[n++] = '.';
		buf[n++] = '.';
		buf[n++] = '.';
	}
	buf[n] = '\0';
	return buf;
}

static char *
set_string(UDF_INIT *initid, const char *s, size_t len, unsigned long *length,
		   char *is_null, char *error)
{
	CallState  *cs = (CallState *) initid->ptr;

	if (cs->cap < len + 1)
	{
		char	   *b = realloc(cs->buf, len + 1);

		if (b == NULL)
		{
			*is_null = 1;
			*error = 1;
			return NULL;
		}
		cs->buf = b;
		cs->cap = len + 1;
	}
	memcpy(cs->buf, s, len);
	cs->buf[len] = '\0';
	*length = (unsigned long) len;
	return cs->buf;
}

/* ------------------------------------------------------------------------
 * Handing calls to the lock manager
 * ------------------------------------------------------------------------ */

/* UTC text of a Unix time in µs, as DATETIME(6) shows it. */
static size_t
format_utc(long long us, char *buf, size_t size)
{
	time_t		secs = (time_t) (us / 1000000);
	struct tm	tm;
	size_t		n;

	gmtime_r(&secs, &tm);
	n = strftime(buf, size, "%Y-%m-%d %H:%M:%S", &tm);
	n += (size_t) snprintf(buf + n, size - n, ".%06lld", us % 1000000);
	return n;
}

static void
interrupted(const char *fn, char *error, char *is_null)
{
	DlockErr	e = {DLOCK_ER_INTERRUPTED, 0, ""};

	/* the server does not report a kill that a UDF survived */
	snprintf(e.msg, sizeof(e.msg),
			 "%s: query execution was interrupted; the request was withdrawn", fn);
	report(&e);
	*error = 1;
	*is_null = 1;
}

/*
 * Grants made in the running statement, by this thread (a statement runs on
 * one thread from start to end): if the statement then fails - killed
 * after the function returned, or any later error - the client never
 * learns the token, so the plugin's statement-end hook gives them back
 * (dlock_statement_end).  A conversion is not undone (the lock was held
 * before it).
 */
typedef struct StatementGrant
{
	DlockCaller who;
	DlockCall	call;
	char	   *buf;			/* the names and the owner */
} StatementGrant;

static __thread unsigned long long stmt_conn_id;
static __thread StatementGrant *stmt_grants;
static __thread int stmt_ngrants;
static __thread int stmt_cap;

static void
statement_forget(void)
{
	for (int i = 0; i < stmt_ngrants; i++)
		free(stmt_grants[i].buf);
	stmt_ngrants = 0;
}

static void
statement_note(const DlockCaller *who, const DlockCall *call)
{
	StatementGrant *g;
	size_t		need = call->owner_len + 1;
	char	   *p;

	if (stmt_conn_id != who->conn_id)
	{
		statement_forget();		/* another connection's, never ended here */
		stmt_conn_id = who->conn_id;
	}
	if (stmt_ngrants == stmt_cap)
	{
		int			cap = stmt_cap ? stmt_cap * 2 : 4;
		StatementGrant *n = realloc(stmt_grants, sizeof(StatementGrant) * (size_t) cap);

		if (n == NULL)
			return;
		stmt_grants = n;
		stmt_cap = cap;
	}
	for (int i = 0; i < call->nnames; i++)
		need += call->name_lens[i] + 1;
	g = &stmt_grants[stmt_ngrants];
	g->buf = malloc(need);
	if (g->buf == NULL)
		return;
	g->who = *who;
	g->call = *call;
	p = g->buf;
	for (int i = 0; i < call->nnames; i++)
	{
		memcpy(p, call->names[i], call->name_lens[i]);
		g->call.names[i] = p;
		p += call->name_lens[i];
	}
	if (call->owner)
	{
		memcpy(p, call->owner, call->owner_len);
		g->call.owner = p;
	}
	stmt_ngrants++;
}

/* Called by the plugin when a statement of this thread ended. */
void
dlock_statement_end(unsigned long long conn_id, int failed)
{
	if (stmt_ngrants == 0)
		return;
	if (failed && conn_id == stmt_conn_id)
	{
		for (int i = 0; i < stmt_ngrants; i++)
		{
			StatementGrant *g = &stmt_grants[i];
			DlockCall	undo;
			DlockResult r;
			DlockErr	e;

			memset(&undo, 0, sizeof(undo));
			undo.fn = g->call.fn;
			undo.op = DLOCK_OP_RELEASE;
			undo.timeout_us = -1;
			undo.owner = g->call.owner;
			undo.owner_len = g->call.owner_len;
			undo.nnames = g->call.nnames;
			for (int k = 0; k < g->call.nnames; k++)
			{
				undo.names[k] = g->call.names[k];
				undo.name_lens[k] = g->call.name_lens[k];
			}
			if (mgr_call(&g->who, &undo, &r, &e) != 0)
				fprintf(stderr, "dlock: cannot give back a grant of a failed statement: %s\n",
						e.msg);
		}
	}
	statement_forget();
}

/*
 * Run a call that may grant.  A grant made while the statement was being
 * killed would never reach the caller (the server answers the statement
 * with an error): it is given back.  0 with res GRANTED, else -1 (the
 * error raised, or NULL for a timeout, a refusal or a kept place).
 */
static int
grant_call(const DlockCaller *who, DlockCall *call, DlockResult *res,
		   char *is_null, char *error)
{
	DlockErr	err = {0};

	if (mgr_call(who, call, res, &err) != 0)
	{
		report_failure(&err, error, is_null);
		return -1;
	}
	if (res->status == DLOCK_STATUS_GRANTED && !caller_killed(NULL) &&
		call->op != DLOCK_OP_CONVERT)
		statement_note(who, call);
	if (res->status == DLOCK_STATUS_GRANTED && caller_killed(NULL))
	{
		DlockCall	undo = *call;
		DlockResult r;

		undo.op = call->op == DLOCK_OP_CONVERT ? DLOCK_OP_NONE : DLOCK_OP_RELEASE;
		undo.timeout_us = -1;
		undo.keep_place = 0;
		undo.capacity = 0;
		undo.permits = 0;
		undo.election = 0;
		undo.value = NULL;
		/* a conversion stays (the lock was held before); a grant goes */
		if (undo.op == DLOCK_OP_RELEASE && mgr_call(who, &undo, &r, &err) != 0)
		{
			report_failure(&err, error, is_null);
			return -1;
		}
		res->status = DLOCK_STATUS_CANCELED;
	}
	if (res->status == DLOCK_STATUS_GRANTED)
		return 0;
	*is_null = 1;
	if (caller_killed(NULL))
		interrupted(call->fn, error, is_null);
	else if (res->status == DLOCK_STATUS_NOT_HELD)
	{
		char		nm[80];
		DlockErr	e = {DLOCK_ER_UNKNOWN, 0, ""};

		snprintf(e.msg, sizeof(e.msg), "%s: lock \"%s\" is not held by this %s [DL001]",
				 call->fn, shown_name(call->names[0], call->name_lens[0], nm, sizeof(nm)),
				 call->owner ? "owner" : "session");
		report_failure(&e, error, is_null);
	}
	return -1;
}

/* Optional 0/1 argument; absent or NULL: 0. */
static int
get_flag(UDF_ARGS *args, unsigned int i)
{
	return i < args->arg_count && args->args[i] != NULL &&
		*(double *) args->args[i] != 0;
}

/* Whole number argument in [lo, hi]; 0 or raises. */
static int
get_int(UDF_ARGS *args, unsigned int i, const char *what, long long lo,
		long long hi, int *out, const char *fn, char *error, char *is_null)
{
	double		v;
	DlockErr	e = {DLOCK_ER_ARGS, 0, ""};

	if (i >= args->arg_count || args->args[i] == NULL)
		snprintf(e.msg, sizeof(e.msg), "%s: %s must not be NULL", fn, what);
	else
	{
		v = *(double *) args->args[i];
		if (v >= (double) lo && v <= (double) hi && v == (double) (long long) v)
		{
			*out = (int) v;
			return 0;
		}
		snprintf(e.msg, sizeof(e.msg), "%s: %s must be a whole number from %lld to %lld",
				 fn, what, lo, hi);
	}
	report(&e);
	*error = 1;
	*is_null = 1;
	return -1;
}

/* The value of a campaign or proclamation: 0..DLOCK_MAX_VALUE_LEN bytes, no NUL. */
static int
get_value(UDF_ARGS *args, unsigned int i, DlockCall *call, char *error,
		  char *is_null)
{
	const char *s = args->args[i];

	if (s == NULL)
	{
		fail(error, is_null, DLOCK_ER_ARGS, "%s: value must not be NULL%s", call->fn, "");
		return -1;
	}
	if (args->lengths[i] > DLOCK_MAX_VALUE_LEN)
	{
		fail(error, is_null, DLOCK_ER_TOO_LONG, "%s: value is longer than %s bytes",
			 call->fn, "1024");
		return -1;
	}
	if (memchr(s, '\0', args->lengths[i]) != NULL)
	{
		fail(error, is_null, DLOCK_ER_ARGS, "%s: value must not contain a NUL byte%s",
			 call->fn, "");
		return -1;
	}
	call->value = s;
	call->value_len = args->lengths[i];
	return 0;
}

/* ------------------------------------------------------------------------
 * dlock_acquire(name, timeout [, ttl [, mode [, owner [, keep_place]]]])
 * dlock_try_acquire(name [, ttl [, mode [, owner]]])
 * ------------------------------------------------------------------------ */
static const int num_acquire[6] = {0, 1, 1, 0, 0, 1};
static const int num_try[4] = {0, 1, 0, 0};

DLOCK_UDF_SETUP(dlock_acquire, 2, 6, "(name, timeout [, ttl [, mode [, owner [, keep_place]]]])", num_acquire, 0)

DLOCK_UDF_SETUP(dlock_try_acquire, 1, 4, "(name [, ttl [, mode [, owner]]])", num_try, 0)

static long long
acquire_common(UDF_ARGS *args, int try_only, char *is_null, char *error)
{
	DlockCall	call;
	DlockCaller who;
	DlockResult res;
	unsigned int ttl_i = try_only ? 1 : 2;

	call_init(&call, try_only ? "dlock_try_acquire" : "dlock_acquire",
			  try_only ? DLOCK_OP_TRY : DLOCK_OP_ACQUIRE, is_null, error);
	if (authorize(&who, DLOCK_ACCESS_USER | DLOCK_ACCESS_ADMIN, call.fn, error, is_null) != 0 ||
		get_name(args, 0, &call, error, is_null) != 0)
		return 0;
	if (!try_only &&
		get_seconds(args, 1, "timeout", DLOCK_MAX_TIMEOUT_US, &call.timeout_us,
					&call, error, is_null) != 0)
		return 0;
	if (get_seconds(args, ttl_i, "ttl", max_ttl_us(), &call.ttl_us, &call,
					error, is_null) != 0 ||
		get_mode(args, ttl_i + 1, &call, error, is_null) != 0 ||
		get_owner(args, ttl_i + 2, &call, error, is_null) != 0)
		return 0;
	default_ttl(&call);
	call.keep_place = !try_only && get_flag(args, 5);
	if (grant_call(&who, &call, &res, is_null, error) != 0)
		return 0;
	return res.token;
}

long long
dlock_acquire(UDF_INIT *initid, UDF_ARGS *args, char *is_null, char *error)
{
	(void) initid;
	return acquire_common(args, 0, is_null, error);
}

long long
dlock_try_acquire(UDF_INIT *initid, UDF_ARGS *args, char *is_null, char *error)
{
	(void) initid;
	return acquire_common(args, 1, is_null, error);
}

/* ------------------------------------------------------------------------
 * dlock_convert(name, mode, timeout [, owner]) -> the lock's new token
 * ------------------------------------------------------------------------ */
static const int num_convert[4] = {0, 0, 1, 0};

DLOCK_UDF_SETUP(dlock_convert, 3, 4, "(name, mode, timeout [, owner])", num_convert, 0)

long long
dlock_convert(UDF_INIT *initid, UDF_ARGS *args, char *is_null, char *error)
{
	DlockCall	call;
	DlockCaller who;
	DlockResult res;

	(void) initid;
	call_init(&call, "dlock_convert", DLOCK_OP_CONVERT, is_null, error);
	if (authorize(&who, DLOCK_ACCESS_USER | DLOCK_ACCESS_ADMIN, call.fn, error, is_null) != 0 ||
		get_name(args, 0, &call, error, is_null) != 0 ||
		get_mode(args, 1, &call, error, is_null) != 0 ||
		get_seconds(args, 2, "timeout", DLOCK_MAX_TIMEOUT_US, &call.timeout_us,
					&call, error, is_null) != 0 ||
		get_owner(args, 3, &call, error, is_null) != 0)
		return 0;
	if (grant_call(&who, &call, &res, is_null, error) != 0)
		return 0;
	return res.token;
}

/* ------------------------------------------------------------------------
 * dlock_acquire_all(names_json, timeout [, ttl [, mode [, owner [, keep_place]]]])
 *		-> a JSON array of tokens, in the order of the names
 * ------------------------------------------------------------------------ */
typedef struct NameRef
{
	const char *s;
	size_t		len;
	int			pos;			/* index in the caller's array */
} NameRef;

static int
cmp_names(const void *a, const void *b)
{
	const NameRef *x = a;
	const NameRef *y = b;
	size_t		n = x->len < y->len ? x->len : y->len;
	int			c = memcmp(x->s, y->s, n);

	/* strcmp order: a name sorts before its extensions */
	return c ? c : (x->len > y->len) - (x->len < y->len);
}

static void
put_utf8(char *out, size_t *o, unsigned long cp)
{
	if (cp < 0x80)
		out[(*o)++] = (char) cp;
	else if (cp < 0x800)
	{
		out[(*o)++] = (char) (0xc0 | (cp >> 6));
		out[(*o)++] = (char) (0x80 | (cp & 0x3f));
	}
	else if (cp < 0x10000)
	{
		out[(*o)++] = (char) (0xe0 | (cp >> 12));
		out[(*o)++] = (char) (0x80 | ((cp >> 6) & 0x3f));
		out[(*o)++] = (char) (0x80 | (cp & 0x3f));
	}
	else
	{
		out[(*o)++] = (char) (0xf0 | (cp >> 18));
		out[(*o)++] = (char) (0x80 | ((cp >> 12) & 0x3f));
		out[(*o)++] = (char) (0x80 | ((cp >> 6) & 0x3f));
		out[(*o)++] = (char) (0x80 | (cp & 0x3f));
	}
}

static int
hex4(const char *p, unsigned long *v)
{
	*v = 0;
	for (int i = 0; i < 4; i++)
	{
		char		c = p[i];

		*v <<= 4;
		if (c >= '0' && c <= '9')
			*v |= (unsigned long) (c - '0');
		else if (c >= 'a' && c <= 'f')
			*v |= (unsigned long) (c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			*v |= (unsigned long) (c - 'A' + 10);
		else
			return -1;
	}
	return 0;
}

/*
 * A JSON array of strings into decoded names in out (which has room for
 * len bytes: decoding never grows).  Returns how many, or -1 when it is
 * not such an array.
 */
static int
parse_json_names(const char *s, size_t len, char *out, NameRef *names, int max)
{
	size_t		i = 0;
	size_t		o = 0;
	int			n = 0;

#define SKIP_WS() while (i < len && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) i++
	SKIP_WS();
	if (i >= len || s[i++] != '[')
		return -1;
	SKIP_WS();
	if (i < len && s[i] == ']')
	{
		i++;
		SKIP_WS();
		return i == len ? 0 : -1;
	}
	for (;;)
	{
		size_t		start = o;

		SKIP_WS();
		if (i >= len || s[i++] != '"' || n >= max)
			return -1;
		while (i < len && s[i] != '"')
		{
			unsigned char c = (unsigned char) s[i++];

			if (c < 0x20)
				return -1;
			if (c != '\\')
			{
				out[o++] = (char) c;
				continue;
			}
			if (i >= len)
				return -1;
			c = (unsigned char) s[i++];
			switch (c)
			{
				case '"':
				case '\\':
				case '/':
					out[o++] = (char) c;
					break;
				case 'b':
					out[o++] = '\b';
					break;
				case 'f':
					out[o++] = '\f';
					break;
				case 'n':
					out[o++] = '\n';
					break;
				case 'r':
					out[o++] = '\r';
					break;
				case 't':
					out[o++] = '\t';
					break;
				case 'u':
					{
						unsigned long cp,
									lo;

						if (i + 4 > len || hex4(s + i, &cp) != 0)
							return -1;
						i += 4;
						if (cp >= 0xd800 && cp < 0xdc00)
						{
							if (i + 6 > len || s[i] != '\\' || s[i + 1] != 'u' ||
								hex4(s + i + 2, &lo) != 0 || lo < 0xdc00 || lo >= 0xe000)
								return -1;
							i += 6;
							cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
						}
						else if (cp >= 0xdc00 && cp < 0xe000)
							return -1;
						if (cp == 0)
							return -1;
						put_utf8(out, &o, cp);
					}
					break;
				default:
					return -1;
			}
		}
		if (i >= len)
			return -1;
		i++;					/* closing quote */
		names[n].s = out + start;
		names[n].len = o - start;
		names[n].pos = n;
		n++;
		SKIP_WS();
		if (i < len && s[i] == ',')
		{
			i++;
			continue;
		}
		if (i < len && s[i] == ']')
		{
			i++;
			SKIP_WS();
			return i == len ? n : -1;
		}
		return -1;
	}
#undef SKIP_WS
}

static const int num_all[6] = {0, 1, 1, 0, 0, 1};

DLOCK_UDF_SETUP(dlock_acquire_all, 2, 6, "(names_json, timeout [, ttl [, mode [, owner [, keep_place]]]])", num_all, 65535)

char *
dlock_acquire_all(UDF_INIT *initid, UDF_ARGS *args, char *result,
				  unsigned long *length, char *is_null, char *error)
{
	DlockCall	call;
	DlockCaller who;
	DlockResult res;
	NameRef		refs[DLOCK_MAX_MULTI + 1];
	long long	by_pos[DLOCK_MAX_MULTI];
	char	   *decoded;
	char		out[DLOCK_MAX_MULTI * 24 + 4];
	size_t		o = 0;
	int			n;

	(void) result;
	call_init(&call, "dlock_acquire_all", DLOCK_OP_ACQUIRE_ALL, is_null, error);
	if (authorize(&who, DLOCK_ACCESS_USER | DLOCK_ACCESS_ADMIN, call.fn, error, is_null) != 0)
		return NULL;
	if (args->args[0] == NULL)
	{
		fail(error, is_null, DLOCK_ER_ARGS, "%s: names must not be NULL%s", call.fn, "");
		return NULL;
	}
	decoded = malloc(args->lengths[0] + 1);
	if (decoded == NULL)
	{
		fail(error, is_null, DLOCK_ER_UNKNOWN, "%s: out of memory%s", call.fn, "");
		return NULL;
	}
	n = parse_json_names(args->args[0], args->lengths[0], decoded, refs,
						 DLOCK_MAX_MULTI + 1);
	if (n <= 0 || n > DLOCK_MAX_MULTI)
	{
		fail(error, is_null, n > DLOCK_MAX_MULTI ? DLOCK_ER_TOO_LONG : DLOCK_ER_ARGS,
			 n > DLOCK_MAX_MULTI ? "%s: at most %s names at once" :
			 "%s: names must be a JSON array of 1 to %s strings, such as '[\"a\", \"b\"]'",
			 call.fn, "64");
		free(decoded);
		return NULL;
	}
	qsort(refs, (size_t) n, sizeof(NameRef), cmp_names);
	for (int i = 0; i < n; i++)
	{
		UDF_ARGS	one = *args;
		char	   *a0[1] = {(char *) refs[i].s};
		unsigned long l0[1] = {refs[i].len};

		if (i > 0 && cmp_names(&refs[i - 1], &refs[i]) == 0)
		{
			fail(error, is_null, DLOCK_ER_ARGS, "%s: a name is given twice%s", call.fn, "");
			free(decoded);
			return NULL;
		}
		one.args = a0;
		one.lengths = l0;
		one.arg_count = 1;
		if (get_name(&one, 0, &call, error, is_null) != 0)
		{
			free(decoded);
			return NULL;
		}
	}
	if (get_seconds(args, 1, "timeout", DLOCK_MAX_TIMEOUT_US, &call.timeout_us,
					&call, error, is_null) != 0 ||
		get_seconds(args, 2, "ttl", max_ttl_us(), &call.ttl_us, &call,
					error, is_null) != 0 ||
		get_mode(args, 3, &call, error, is_null) != 0 ||
		get_owner(args, 4, &call, error, is_null) != 0)
	{
		free(decoded);
		return NULL;
	}
	default_ttl(&call);
	call.keep_place = get_flag(args, 5);
	if (grant_call(&who, &call, &res, is_null, error) != 0)
	{
		free(decoded);
		return NULL;
	}
	free(decoded);
	for (int i = 0; i < n; i++)
		by_pos[refs[i].pos] = i < res.ntokens ? res.tokens[i] : res.token;
	out[o++] = '[';
	for (int i = 0; i < n; i++)
		o += (size_t) snprintf(out + o, sizeof(out) - o, "%s%lld", i ? ", " : "", by_pos[i]);
	out[o++] = ']';
	return set_string(initid, out, o, length, is_null, error);
}

/* ------------------------------------------------------------------------
 * dlock_release(name [, owner]) -> 1 released, 0 not held (warning)
 * ------------------------------------------------------------------------ */
DLOCK_UDF_SETUP(dlock_release, 1, 2, "(name [, owner])", NULL, 0)

long long
dlock_release(UDF_INIT *initid, UDF_ARGS *args, char *is_null, char *error)
{
	DlockCall	call;
	DlockCaller who;
	DlockResult res;
	DlockErr	err = {0};

	(void) initid;
	call_init(&call, "dlock_release", DLOCK_OP_RELEASE, is_null, error);
	if (authorize(&who, DLOCK_ACCESS_USER | DLOCK_ACCESS_ADMIN, call.fn, error, is_null) != 0 ||
		get_name(args, 0, &call, error, is_null) != 0 ||
		get_owner(args, 1, &call, error, is_null) != 0)
		return 0;
	if (mgr_call(&who, &call, &res, &err) != 0)
	{
		report_failure(&err, error, is_null);
		return 0;
	}
	if (res.status != DLOCK_STATUS_RELEASED)
	{
		char		nm[80];

		err.code = DLOCK_ER_UNKNOWN;
		err.warning = 1;
		snprintf(err.msg, sizeof(err.msg), "%s: lock \"%s\" is not held by this %s",
				 call.fn, shown_name(call.names[0], call.name_lens[0], nm, sizeof(nm)),
				 call.owner ? "owner" : "session");
		report(&err);
		return 0;
	}
	return 1;
}

/* ------------------------------------------------------------------------
 * dlock_renew(name [, ttl [, owner]]) -> new expiry (UTC); NULL ttl: the
 * lease's own; NULL result: a lock without a lease
 * ------------------------------------------------------------------------ */
static const int num_renew[3] = {0, 1, 0};

DLOCK_UDF_SETUP(dlock_renew, 1, 3, "(name [, ttl [, owner]])", num_renew, 26)

char *
dlock_renew(UDF_INIT *initid, UDF_ARGS *args, char *result,
			unsigned long *length, char *is_null, char *error)
{
	DlockCall	call;
	DlockCaller who;
	DlockResult res;
	DlockErr	err = {0};
	char		expiry[64];

	(void) result;
	call_init(&call, "dlock_renew", DLOCK_OP_RENEW, is_null, error);
	if (authorize(&who, DLOCK_ACCESS_USER | DLOCK_ACCESS_ADMIN, call.fn, error, is_null) != 0 ||
		get_name(args, 0, &call, error, is_null) != 0 ||
		get_seconds(args, 1, "ttl", max_ttl_us(), &call.ttl_us, &call,
					error, is_null) != 0 ||
		get_owner(args, 2, &call, error, is_null) != 0)
		return NULL;
	if (call.ttl_us < 0)
		call.ttl_us = 0;
	if (mgr_call(&who, &call, &res, &err) != 0)
	{
		report_failure(&err, error, is_null);
		return NULL;
	}
	if (res.status != DLOCK_STATUS_RENEWED)
	{
		char		nm[80];

		err.code = DLOCK_ER_UNKNOWN;
		snprintf(err.msg, sizeof(err.msg),
				 "%s: lock \"%s\" is not held by this %s: the lease was lost [DL001]",
				 call.fn, shown_name(call.names[0], call.name_lens[0], nm, sizeof(nm)),
				 call.owner ? "owner" : "session");
		report_failure(&err, error, is_null);
		return NULL;
	}
	if (res.expires_at_us == 0)
	{
		*is_null = 1;
		return NULL;
	}
	return set_string(initid, expiry, format_utc(res.expires_at_us, expiry, sizeof(expiry)),
					  length, is_null, error);
}

/* ------------------------------------------------------------------------
 * dlock_release_all([owner]) -> locks released + requests withdrawn
 * ------------------------------------------------------------------------ */
DLOCK_UDF_SETUP(dlock_release_all, 0, 1, "([owner])", NULL, 0)

long long
dlock_release_all(UDF_INIT *initid, UDF_ARGS *args, char *is_null, char *error)
{
	DlockCall	call;
	DlockCaller who;
	DlockResult res;
	DlockErr	err = {0};

	(void) initid;
	call_init(&call, "dlock_release_all", DLOCK_OP_RELEASE_ALL, is_null, error);
	if (authorize(&who, DLOCK_ACCESS_USER | DLOCK_ACCESS_ADMIN, call.fn, error, is_null) != 0 ||
		get_owner(args, 0, &call, error, is_null) != 0)
		return 0;
	if (mgr_call(&who, &call, &res, &err) != 0)
	{
		report_failure(&err, error, is_null);
		return 0;
	}
	return res.count;
}

/* ------------------------------------------------------------------------
 * dlock_semaphore(name, capacity, permits, timeout [, ttl [, owner [, keep_place]]])
 * dlock_try_semaphore(name, capacity, permits [, ttl [, owner]])
 * ------------------------------------------------------------------------ */
static const int num_sem[7] = {0, 1, 1, 1, 1, 0, 1};
static const int num_try_sem[5] = {0, 1, 1, 1, 0};

DLOCK_UDF_SETUP(dlock_semaphore, 4, 7, "(name, capacity, permits, timeout [, ttl [, owner [, keep_place]]])", num_sem, 0)

DLOCK_UDF_SETUP(dlock_try_semaphore, 3, 5, "(name, capacity, permits [, ttl [, owner]])", num_try_sem, 0)

static long long
semaphore_common(UDF_ARGS *args, int try_only, char *is_null, char *error)
{
	DlockCall	call;
	DlockCaller who;
	DlockResult res;
	unsigned int ttl_i = try_only ? 3 : 4;

	call_init(&call, try_only ? "dlock_try_semaphore" : "dlock_semaphore",
			  try_only ? DLOCK_OP_TRY : DLOCK_OP_ACQUIRE, is_null, error);
	call.mode = DLOCK_MODE_NL;
	if (authorize(&who, DLOCK_ACCESS_USER | DLOCK_ACCESS_ADMIN, call.fn, error, is_null) != 0 ||
		get_name(args, 0, &call, error, is_null) != 0 ||
		get_int(args, 1, "capacity", 1, 1000000000, &call.capacity, call.fn, error, is_null) != 0 ||
		get_int(args, 2, "permits", 1, call.capacity, &call.permits, call.fn, error, is_null) != 0)
		return 0;
	if (!try_only &&
		get_seconds(args, 3, "timeout", DLOCK_MAX_TIMEOUT_US, &call.timeout_us,
					&call, error, is_null) != 0)
		return 0;
	if (get_seconds(args, ttl_i, "ttl", max_ttl_us(), &call.ttl_us, &call,
					error, is_null) != 0 ||
		get_owner(args, ttl_i + 1, &call, error, is_null) != 0)
		return 0;
	default_ttl(&call);
	call.keep_place = !try_only && get_flag(args, 6);
	if (grant_call(&who, &call, &res, is_null, error) != 0)
		return 0;
	return res.token;
}

long long
dlock_semaphore(UDF_INIT *initid, UDF_ARGS *args, char *is_null, char *error)
{
	(void) initid;
	return semaphore_common(args, 0, is_null, error);
}

long long
dlock_try_semaphore(UDF_INIT *initid, UDF_ARGS *args, char *is_null, char *error)
{
	(void) initid;
	return semaphore_common(args, 1, is_null, error);
}

/* ------------------------------------------------------------------------
 * dlock_campaign(name, value, timeout [, ttl [, owner [, keep_place]]]) -> token
 * dlock_proclaim(name, value [, owner]) -> token; not the leader: DL001
 * ------------------------------------------------------------------------ */
static const int num_campaign[6] = {0, 0, 1, 1, 0, 1};

DLOCK_UDF_SETUP(dlock_campaign, 3, 6, "(name, value, timeout [, ttl [, owner [, keep_place]]])", num_campaign, 0)

long long
dlock_campaign(UDF_INIT *initid, UDF_ARGS *args, char *is_null, char *error)
{
	DlockCall	call;
	DlockCaller who;
	DlockResult res;

	(void) initid;
	call_init(&call, "dlock_campaign", DLOCK_OP_ACQUIRE, is_null, error);
	call.mode = DLOCK_MODE_EX;
	call.election = 1;
	if (authorize(&who, DLOCK_ACCESS_USER | DLOCK_ACCESS_ADMIN, call.fn, error, is_null) != 0 ||
		get_name(args, 0, &call, error, is_null) != 0 ||
		get_value(args, 1, &call, error, is_null) != 0 ||
		get_seconds(args, 2, "timeout", DLOCK_MAX_TIMEOUT_US, &call.timeout_us,
					&call, error, is_null) != 0 ||
		get_seconds(args, 3, "ttl", max_ttl_us(), &call.ttl_us, &call,
					error, is_null) != 0 ||
		get_owner(args, 4, &call, error, is_null) != 0)
		return 0;
	default_ttl(&call);
	call.keep_place = get_flag(args, 5);
	if (grant_call(&who, &call, &res, is_null, error) != 0)
		return 0;
	return res.token;
}

DLOCK_UDF_SETUP(dlock_proclaim, 2, 3, "(name, value [, owner])", NULL, 0)

long long
dlock_proclaim(UDF_INIT *initid, UDF_ARGS *args, char *is_null, char *error)
{
	DlockCall	call;
	DlockCaller who;
	DlockResult res;
	DlockErr	err = {0};

	(void) initid;
	call_init(&call, "dlock_proclaim", DLOCK_OP_PROCLAIM, is_null, error);
	call.mode = DLOCK_MODE_EX;
	if (authorize(&who, DLOCK_ACCESS_USER | DLOCK_ACCESS_ADMIN, call.fn, error, is_null) != 0 ||
		get_name(args, 0, &call, error, is_null) != 0 ||
		get_value(args, 1, &call, error, is_null) != 0 ||
		get_owner(args, 2, &call, error, is_null) != 0)
		return 0;
	if (mgr_call(&who, &call, &res, &err) != 0)
	{
		report_failure(&err, error, is_null);
		return 0;
	}
	if (res.status != DLOCK_STATUS_GRANTED && res.status != DLOCK_STATUS_RENEWED)
	{
		char		nm[80];

		err.code = DLOCK_ER_UNKNOWN;
		snprintf(err.msg, sizeof(err.msg),
				 "%s: this %s does not lead \"%s\" [DL001]", call.fn,
				 call.owner ? "owner" : "session",
				 shown_name(call.names[0], call.name_lens[0], nm, sizeof(nm)));
		report_failure(&err, error, is_null);
		return 0;
	}
	return res.token;
}

/* ------------------------------------------------------------------------
 * Looking at the picture: dlock_holder, dlock_check, dlock_leader,
 * dlock_semaphore_available.  Each runs in the manager thread right after
 * a commit, when the picture and the tables agree.
 * ------------------------------------------------------------------------ */
typedef struct Look
{
	const DlockCaller *who;
	char		name[DLOCK_MAX_NAME_LEN + 1];
	long long	token;
	int			found;
	long long	number;
	char	   *text;			/* malloc'ed */
	size_t		text_len;
	int			oom;
} Look;

static void
look_append(Look *lk, const char *s, size_t n)
{
	char	   *t;

	if (lk->oom)
		return;
	t = realloc(lk->text, lk->text_len + n + 1);
	if (t == NULL)
	{
		lk->oom = 1;
		return;
	}
	lk->text = t;
	memcpy(lk->text + lk->text_len, s, n);
	lk->text_len += n;
	lk->text[lk->text_len] = '\0';
}

/*
 * Holders in token order: the caller's own account's (and to dlock_admin
 * every) holders as keys or connection ids; to dlock_monitor other
 * accounts' as connection ids and "(owner key)"; to anyone else as
 * "(another account)".  A key guards release: nobody else sees it.
 */
static void
look_holder(const DLockManager *m, void *arg)
{
	Look	   *lk = arg;
	DLmLock    *l = dlm_lookup(m, lk->name);

	if (l == NULL)
		return;
	for (DLmHolder *h = dlm_lock_holders(l); h; h = dlm_holder_next(h))
	{
		char		buf[64];
		const char *s = buf;
		size_t		n;

		if (h->implied)
			continue;
		if ((lk->who->access & DLOCK_ACCESS_ADMIN) ||
			strcmp(accounts_name(h->role), lk->who->account) == 0)
		{
			/* the account's own (and an admin): the key, or the connection */
			if (h->owner->key)
			{
				s = h->owner->key;
				n = strlen(s);
			}
			else
				n = (size_t) snprintf(buf, sizeof(buf), "%llu",
									  session_conn_id(h->pid, h->backend_start));
		}
		else if (lk->who->access & DLOCK_ACCESS_MONITOR)
			n = h->owner->key ? (size_t) snprintf(buf, sizeof(buf), "(owner key)") :
				(size_t) snprintf(buf, sizeof(buf), "%llu",
								  session_conn_id(h->pid, h->backend_start));
		else
			n = (size_t) snprintf(buf, sizeof(buf), "(another account)");
		if (lk->found)
			look_append(lk, ", ", 2);
		look_append(lk, s, n);
		lk->found = 1;
	}
}

static void
look_check(const DLockManager *m, void *arg)
{
	Look	   *lk = arg;
	DLmLock    *l = dlm_lookup(m, lk->name);

	if (l == NULL)
		return;
	for (DLmHolder *h = dlm_lock_holders(l); h; h = dlm_holder_next(h))
		if (h->token == lk->token && !h->implied)
			lk->found = 1;
}

static void
look_leader(const DLockManager *m, void *arg)
{
	Look	   *lk = arg;
	DLmLock    *l = dlm_lookup(m, lk->name);

	if (l == NULL || !l->election)
		return;
	for (DLmHolder *h = dlm_lock_holders(l); h; h = dlm_holder_next(h))
		if (h->value && h->kept < h->count)
		{
			look_append(lk, h->value, strlen(h->value));
			lk->found = 1;
			break;
		}
}

static void
look_available(const DLockManager *m, void *arg)
{
	Look	   *lk = arg;
	DLmLock    *l = dlm_lookup(m, lk->name);

	if (l == NULL || l->capacity == 0)
		return;
	lk->found = 1;
	lk->number = l->capacity - l->permits_held;
}

/*
 * Set up a look at one name; 0 or raises.  The names outside the caller's
 * grants are refused as the functions that take locks refuse them.
 */
static int
look_begin(UDF_ARGS *args, const char *fn, Look *lk, DlockCaller *who,
		   char *error, char *is_null)
{
	DlockCall	call;

	memset(lk, 0, sizeof(*lk));
	call_init(&call, fn, 0, is_null, error);
	DlockErr	err;

	if (authorize(who, DLOCK_ACCESS_USER | DLOCK_ACCESS_MONITOR | DLOCK_ACCESS_ADMIN, fn,
				  error, is_null) != 0 ||
		get_name(args, 0, &call, error, is_null) != 0)
		return -1;
	/* a name the caller may not lock is not looked at either */
	if (mgr_namespace_check(fn, who, call.names, call.name_lens, 1, &err) != 0)
	{
		report_failure(&err, error, is_null);
		return -1;
	}
	memcpy(lk->name, call.names[0], call.name_lens[0]);
	lk->name[call.name_lens[0]] = '\0';
	lk->who = who;
	return 0;
}

static int
look_run(const char *fn, MgrInspectFn f, Look *lk, char *error, char *is_null)
{
	DlockErr	err = {0};

	if (mgr_inspect(fn, f, lk, &err) != 0)
	{
		free(lk->text);
		report_failure(&err, error, is_null);
		return -1;
	}
	if (lk->oom)
	{
		free(lk->text);
		fail(error, is_null, DLOCK_ER_UNKNOWN, "%s: out of memory%s", fn, "");
		return -1;
	}
	return 0;
}

DLOCK_UDF_SETUP(dlock_holder, 1, 1, "(name)", NULL, 65535)

char *
dlock_holder(UDF_INIT *initid, UDF_ARGS *args, char *result,
			 unsigned long *length, char *is_null, char *error)
{
	DlockCaller who;
	Look		lk;
	char	   *r;

	(void) result;
	if (look_begin(args, "dlock_holder", &lk, &who, error, is_null) != 0 ||
		look_run("dlock_holder", look_holder, &lk, error, is_null) != 0)
		return NULL;
	if (!lk.found)
	{
		*is_null = 1;
		return NULL;
	}
	r = set_string(initid, lk.text, lk.text_len, length, is_null, error);
	free(lk.text);
	return r;
}

DLOCK_UDF_SETUP(dlock_leader, 1, 1, "(name)", NULL, DLOCK_MAX_VALUE_LEN)

char *
dlock_leader(UDF_INIT *initid, UDF_ARGS *args, char *result,
			 unsigned long *length, char *is_null, char *error)
{
	DlockCaller who;
	Look		lk;
	char	   *r;

	(void) result;
	if (look_begin(args, "dlock_leader", &lk, &who, error, is_null) != 0 ||
		look_run("dlock_leader", look_leader, &lk, error, is_null) != 0)
		return NULL;
	if (!lk.found)
	{
		*is_null = 1;
		free(lk.text);
		return NULL;
	}
	r = set_string(initid, lk.text ? lk.text : "", lk.text_len, length, is_null, error);
	free(lk.text);
	return r;
}

static const int num_check[2] = {0, 1};

DLOCK_UDF_SETUP(dlock_check, 2, 2, "(name, token)", num_check, 0)

long long
dlock_check(UDF_INIT *initid, UDF_ARGS *args, char *is_null, char *error)
{
	DlockCaller who;
	Look		lk;

	(void) initid;
	if (look_begin(args, "dlock_check", &lk, &who, error, is_null) != 0)
		return 0;
	if (args->args[1] == NULL)
	{
		fail(error, is_null, DLOCK_ER_ARGS, "%s: token must not be NULL%s", "dlock_check", "");
		return 0;
	}
	lk.token = (long long) *(double *) args->args[1];
	if (look_run("dlock_check", look_check, &lk, error, is_null) != 0)
		return 0;
	return lk.found;
}

DLOCK_UDF_SETUP(dlock_semaphore_available, 1, 1, "(name)", NULL, 0)

long long
dlock_semaphore_available(UDF_INIT *initid, UDF_ARGS *args, char *is_null,
						  char *error)
{
	DlockCaller who;
	Look		lk;

	(void) initid;
	if (look_begin(args, "dlock_semaphore_available", &lk, &who, error, is_null) != 0 ||
		look_run("dlock_semaphore_available", look_available, &lk, error, is_null) != 0)
		return 0;
	if (!lk.found)
	{
		*is_null = 1;
		return 0;
	}
	return lk.number;
}

/* ------------------------------------------------------------------------
 * dlock_info() -> version
 * ------------------------------------------------------------------------ */
DLOCK_UDF_SETUP(dlock_info, 0, 0, "no arguments", NULL, 200)

char *
dlock_info(UDF_INIT *initid, UDF_ARGS *args, char *result,
		   unsigned long *length, char *is_null, char *error)
{
	char		buf[200];
	int			n;
	DlockCaller who;

	(void) args;
	(void) result;
	*is_null = 0;
	*error = 0;
	if (authorize(&who, DLOCK_ACCESS_USER | DLOCK_ACCESS_MONITOR | DLOCK_ACCESS_ADMIN,
				  "dlock_info", error, is_null) != 0)
		return NULL;
	n = snprintf(buf, sizeof(buf), "dlock %s (MariaDB UDF, server %s)",
				 DLOCK_VERSION, h_server_version ? h_server_version : "?");
	return set_string(initid, buf, (size_t) n, length, is_null, error);
}

/* ------------------------------------------------------------------------
 * dlock_new_owner() -> a random 128-bit owner key in hex
 * ------------------------------------------------------------------------ */
DLOCK_UDF_SETUP(dlock_new_owner, 0, 0, "no arguments", NULL, 32)

char *
dlock_new_owner(UDF_INIT *initid, UDF_ARGS *args, char *result,
				unsigned long *length, char *is_null, char *error)
{
	unsigned char rnd[16];
	char		hex[33];
	size_t		got = 0;
	DlockCaller who;

	(void) args;
	(void) result;
	*is_null = 0;
	*error = 0;
	if (authorize(&who, DLOCK_ACCESS_USER | DLOCK_ACCESS_ADMIN, "dlock_new_owner", error,
				  is_null) != 0)
		return NULL;
	while (got < sizeof(rnd))
	{
		ssize_t		n = getrandom(rnd + got, sizeof(rnd) - got, 0);

		if (n <= 0)
		{
			DlockErr	e = {DLOCK_ER_UNKNOWN, 0, "dlock_new_owner: no randomness available"};

			report(&e);
			*error = 1;
			*is_null = 1;
			return NULL;
		}
		got += (size_t) n;
	}
	for (int i = 0; i < 16; i++)
		snprintf(hex + 2 * i, 3, "%02x", rnd[i]);
	return set_string(initid, hex, 32, length, is_null, error);
}

/* ------------------------------------------------------------------------
 * dlock_grant(prefix, grantee) / dlock_revoke(prefix, grantee) -> 1 when
 * dlock.grants changed, 0 when the grant was already there / not there.
 * grantee: an account as CURRENT_USER() shows it (user@host) or a role.
 * ------------------------------------------------------------------------ */
/*
 * Whether g names an existing account - user@host as CURRENT_USER() shows
 * it, split at the last @ - or, unless accounts_only, a role (no @).
 */
static int
grantee_exists(const char *g, size_t glen, int accounts_only)
{
	char		user[DLOCK_MAX_ACCOUNT_LEN + 1];
	char		host[DLOCK_MAX_ACCOUNT_LEN + 1];
	const char *at;

	if (g == NULL || glen == 0 || glen > DLOCK_MAX_ACCOUNT_LEN)
		return 0;
	at = memrchr(g, '@', glen);
	if (at == NULL && accounts_only)
		return 0;
	if (at != NULL && at + 1 == g + glen)
		return 0;				/* an empty host would name a role */
	snprintf(user, sizeof(user), "%.*s", (int) (at ? (size_t) (at - g) : glen), g);
	snprintf(host, sizeof(host), "%.*s",
			 at ? (int) (glen - (size_t) (at - g) - 1) : 0, at ? at + 1 : "");
	return is_acl_user(host, user);
}

static my_bool
grant_init(UDF_INIT *initid, UDF_ARGS *args, char *message, const char *fn)
{
	return init_common(initid, args, message, fn, 2, 2, "(prefix, grantee)",
					   NULL);
}

static long long
grant_common(UDF_ARGS *args, int revoke, char *is_null, char *error)
{
	const char *fn = revoke ? "dlock_revoke" : "dlock_grant";
	DlockCaller who;
	DlockCall	req = {0};
	DlockErr	err = {0};
	const char *g = args->args[1];
	size_t		glen = args->lengths[1];
	int			changed = 0;

	*is_null = 0;
	*error = 0;
	req.fn = fn;
	if (authorize(&who, DLOCK_ACCESS_ADMIN, fn, error, is_null) != 0)
		return 0;
	/* a prefix is a name, or "/" for every path */
	if (!(args->args[0] && args->lengths[0] == 1 && args->args[0][0] == '/') &&
		get_name(args, 0, &req, error, is_null) != 0)
		return 0;
	if (g == NULL || glen == 0 || glen > DLOCK_MAX_ACCOUNT_LEN)
	{
		fail(error, is_null, DLOCK_ER_ARGS,
			 "%s: grantee must be an account (user@host) or a role%s", fn, "");
		return 0;
	}
	if (!revoke && mgr_capability_role(g, glen))
	{
		char		role[16];

		snprintf(role, sizeof(role), "%.*s", (int) glen, g);
		fail(error, is_null, DLOCK_ER_ARGS,
			 "%s: %s grants rights and is no tenant: bind the tenant's own "
			 "account or role", fn, role);
		return 0;
	}
	/* a revoke may name a grantee dropped since */
	if (!revoke && !grantee_exists(g, glen, 0))
	{
		char		shown[64];
		size_t		n = glen < sizeof(shown) - 1 ? glen : sizeof(shown) - 1;

		for (size_t k = 0; k < n; k++)
			shown[k] = ((unsigned char) g[k] < 0x20 || g[k] == '"') ? '?' : g[k];
		shown[n] = '\0';
		fail(error, is_null, DLOCK_ER_ARGS,
			 "%s: no account or role named \"%s\" (an account is written "
			 "user@host, as CURRENT_USER() shows it)", fn, shown);
		return 0;
	}
	if (mgr_grant(fn, g, glen, args->args[0], args->lengths[0], revoke,
				  &changed, &err) != 0)
	{
		report_failure(&err, error, is_null);
		return 0;
	}
	return changed;
}

my_bool
dlock_grant_init(UDF_INIT *initid, UDF_ARGS *args, char *message)
{
	return grant_init(initid, args, message, "dlock_grant");
}

void
dlock_grant_deinit(UDF_INIT *initid)
{
	deinit_common(initid);
}

long long
dlock_grant(UDF_INIT *initid, UDF_ARGS *args, char *is_null, char *error)
{
	(void) initid;
	return grant_common(args, 0, is_null, error);
}

my_bool
dlock_revoke_init(UDF_INIT *initid, UDF_ARGS *args, char *message)
{
	return grant_init(initid, args, message, "dlock_revoke");
}

void
dlock_revoke_deinit(UDF_INIT *initid)
{
	deinit_common(initid);
}

long long
dlock_revoke(UDF_INIT *initid, UDF_ARGS *args, char *is_null, char *error)
{
	(void) initid;
	return grant_common(args, 1, is_null, error);
}

/* ------------------------------------------------------------------------
 * dlock_set_quota(account, max_locks [, max_locks_per_owner [, max_bytes
 * [, max_bytes_per_owner]]]) -> 1; NULL: no limit, all NULL: no quota.
 * ------------------------------------------------------------------------ */
static const int num_quota[5] = {0, 1, 1, 1, 1};

DLOCK_UDF_SETUP(dlock_set_quota, 2, 5, "(account, max_locks [, per_owner [, max_bytes [, bytes_per_owner]]])", num_quota, 0)

long long
dlock_set_quota(UDF_INIT *initid, UDF_ARGS *args, char *is_null, char *error)
{
	static const char *const what[4] = {"max_locks", "max_locks_per_owner",
	"max_bytes", "max_bytes_per_owner"};
	DlockCaller who;
	DlockErr	err = {0};
	long long	limits[4] = {-1, -1, -1, -1};
	const char *g = args->args[0];
	size_t		glen = args->lengths[0];

	(void) initid;
	*is_null = 0;
	*error = 0;
	if (authorize(&who, DLOCK_ACCESS_ADMIN, "dlock_set_quota", error, is_null) != 0)
		return 0;
	for (unsigned int i = 1; i < args->arg_count; i++)
	{
		double		v;

		if (args->args[i] == NULL)
			continue;
		v = *(double *) args->args[i];
		if (!(v >= 0) || v != (double) (long long) v || v > 1e15)
		{
			fail(error, is_null, DLOCK_ER_ARGS,
				 "%s: %s must be a whole number from 0 on, or NULL",
				 "dlock_set_quota", what[i - 1]);
			return 0;
		}
		limits[i - 1] = (long long) v;
	}
	/* quotas are per account */
	if (!grantee_exists(g, glen, 1))
	{
		fail(error, is_null, DLOCK_ER_ARGS,
			 "%s: no such account (write it user@host, as CURRENT_USER() shows it)%s",
			 "dlock_set_quota", "");
		return 0;
	}
	if (mgr_set_quota("dlock_set_quota", g, glen, limits, &err) != 0)
	{
		report_failure(&err, error, is_null);
		return 0;
	}
	return 1;
}

/* ------------------------------------------------------------------------
 * dlock_locks() -> the rows of the view dlock.locks the caller may see, as
 * a JSON array (the view takes it apart with JSON_TABLE): its own
 * account's rows with their owner keys; every row without other accounts'
 * keys for dlock_monitor; everything for dlock_admin.  The rows are read
 * by the lock manager from its tables and filtered here, so no condition
 * of the caller's query ever sees a row it may not (a view over the
 * tables with the filter in its WHERE let a caller's condition - a
 * conversion that warns, a function with a side effect - run on every
 * row first).
 * ------------------------------------------------------------------------ */
typedef struct LocksRead
{
	const DlockCaller *who;
	char	   *buf;			/* the JSON array, malloc'ed */
	size_t		len;
	size_t		cap;
	int			oom;
	int			rows;
	int			rc;
	DlockErr	err;
} LocksRead;

static void
json_put(LocksRead *lr, const char *s, size_t n)
{
	if (lr->oom)
		return;
	if (lr->len + n + 1 > lr->cap)
	{
		size_t		cap = lr->cap ? lr->cap : 4096;
		char	   *b;

		while (cap < lr->len + n + 1)
			cap *= 2;
		b = realloc(lr->buf, cap);
		if (b == NULL)
		{
			lr->oom = 1;
			return;
		}
		lr->buf = b;
		lr->cap = cap;
	}
	memcpy(lr->buf + lr->len, s, n);
	lr->len += n;
	lr->buf[lr->len] = '\0';
}

/*
 * "key":"text" - bytes as utf8mb4 text: a byte that does not start a
 * valid UTF-8 character shows as '?', as CONVERT(... USING utf8mb4) does.
 */
static void
json_text(LocksRead *lr, const char *key, const char *s, size_t n)
{
	char		esc[8];

	json_put(lr, ",\"", 2);
	json_put(lr, key, strlen(key));
	json_put(lr, "\":\"", 3);
	for (size_t i = 0; i < n;)
	{
		unsigned char c = (unsigned char) s[i];
		size_t		k = c < 0x80 ? 1 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;

		if (c == '"' || c == '\\')
		{
			esc[0] = '\\';
			esc[1] = (char) c;
			json_put(lr, esc, 2);
			i++;
		}
		else if (c < 0x20)
		{
			snprintf(esc, sizeof(esc), "\\u%04x", c);
			json_put(lr, esc, 6);
			i++;
		}
		else if (c < 0x80)
			json_put(lr, s + i++, 1);
		else if (i + k <= n && dlock_valid_utf8(s + i, k))
		{
			json_put(lr, s + i, k);
			i += k;
		}
		else
		{
			json_put(lr, "?", 1);
			i++;
		}
	}
	json_put(lr, "\"", 1);
}

static void
json_int(LocksRead *lr, const char *key, long long v)
{
	char		b[48];
	int			n = snprintf(b, sizeof(b), ",\"%s\":%lld", key, v);

	json_put(lr, b, (size_t) n);
}

static void
locks_row(void *arg, const StoreLockRow *r)
{
	static const char *const modes[DLOCK_NMODES] = {"NL", "CR", "CW", "shared", "PW", "exclusive"};
	static const char *const keys[SL_NINTS] = {
		NULL, "capacity", "granted", "position", "conn_id", "token", "count",
		"since_us", "expires_us", "timeout_us", "conversion", "implied", "permits"
	};
	LocksRead  *lr = arg;
	const DlockCaller *who = lr->who;
	int			sees;
	long long	mode = r->ints[SL_MODE];

	/* 2: the row and its owner key; 1: the row; 0: nothing */
	if (who->access & DLOCK_ACCESS_ADMIN)
		sees = 2;
	else if ((who->access & DLOCK_ACCESS_USER) && r->account_len == who->account_len &&
			 memcmp(r->account, who->account, who->account_len) == 0)
		sees = 2;
	else
		sees = (who->access & DLOCK_ACCESS_MONITOR) ? 1 : 0;
	if (sees == 0)
		return;
	if (lr->rows++ > 0)
		json_put(lr, ",", 1);
	json_put(lr, "{", 1);
	json_put(lr, "\"keyed\":", 8);
	json_put(lr, r->owner ? "1" : "0", 1);
	json_text(lr, "name", r->name, r->name_len);
	if (!r->nulls[SL_CAPACITY])
		json_text(lr, "mode", "semaphore", 9);
	else if (mode >= 0 && mode < DLOCK_NMODES)
		json_text(lr, "mode", modes[mode], strlen(modes[mode]));
	if (r->owner && sees == 2)
		json_text(lr, "owner", r->owner, r->owner_len);
	json_text(lr, "account", r->account, r->account_len);
	if (r->value)
		json_text(lr, "value", r->value, r->value_len);
	for (int k = SL_CAPACITY; k < SL_NINTS; k++)
		if (!r->nulls[k])
			json_int(lr, keys[k], r->ints[k]);
	json_put(lr, "}", 1);
}

static void
look_locks(const DLockManager *m, void *arg)
{
	LocksRead  *lr = arg;
	const DlockCaller *who = lr->who;
	bool		all = (who->access & (DLOCK_ACCESS_MONITOR | DLOCK_ACCESS_ADMIN)) != 0;

	(void) m;
	lr->rc = store_read_locks(all ? NULL : who->account, all ? 0 : who->account_len,
							  locks_row, lr, &lr->err);
}

DLOCK_UDF_SETUP(dlock_locks, 0, 0, "no arguments", NULL, 4294967295UL)

char *
dlock_locks(UDF_INIT *initid, UDF_ARGS *args, char *result,
			unsigned long *length, char *is_null, char *error)
{
	CallState  *cs = (CallState *) initid->ptr;
	DlockCaller who;
	LocksRead	lr;
	DlockErr	err = {0};

	(void) args;
	(void) result;
	*is_null = 0;
	*error = 0;
	if (authorize(&who, DLOCK_ACCESS_USER | DLOCK_ACCESS_MONITOR | DLOCK_ACCESS_ADMIN,
				  "dlock_locks", error, is_null) != 0)
		return NULL;
	memset(&lr, 0, sizeof(lr));
	lr.who = &who;
	json_put(&lr, "[", 1);
	if (mgr_inspect("dlock_locks", look_locks, &lr, &err) == 0 && lr.rc != 0)
		dlock_set_err(&err, DLOCK_ER_UNKNOWN, "dlock_locks: %s", lr.err.msg);
	if (err.code != 0)
	{
		free(lr.buf);
		report_failure(&err, error, is_null);
		return NULL;
	}
	json_put(&lr, "]", 1);
	if (lr.oom)
	{
		free(lr.buf);
		fail(error, is_null, DLOCK_ER_UNKNOWN, "%s: out of memory%s", "dlock_locks", "");
		return NULL;
	}
	/* the caller's buffer: freed with the call state */
	free(cs->buf);
	cs->buf = lr.buf;
	cs->cap = lr.cap;
	*length = (unsigned long) lr.len;
	return cs->buf;
}

/* ------------------------------------------------------------------------
 * dlock_sees(account) -> what the caller may see of a row of that account:
 * 2 the row and its owner key (its own account, or dlock_admin), 1 the row
 * without the key (dlock_monitor), 0 nothing.  The filter of the first
 * dlock.locks (the objects of 1.0 that an upgrade starts from name it);
 * install.sql drops the function.
 * ------------------------------------------------------------------------ */
my_bool
dlock_sees_init(UDF_INIT *initid, UDF_ARGS *args, char *message)
{
	int			r = init_common(initid, args, message, "dlock_sees", 1, 1,
								"(account)", NULL);

	initid->maybe_null = 0;
	return r;
}

void
dlock_sees_deinit(UDF_INIT *initid)
{
	deinit_common(initid);
}

long long
dlock_sees(UDF_INIT *initid, UDF_ARGS *args, char *is_null, char *error)
{
	DlockCaller who;

	(void) initid;
	*is_null = 0;
	*error = 0;
	caller(&who, DLOCK_ACCESS_USER | DLOCK_ACCESS_MONITOR);
	if (who.access & DLOCK_ACCESS_ADMIN)
		return 2;
	if (args->args[0] != NULL && args->lengths[0] == who.account_len &&
		memcmp(args->args[0], who.account, who.account_len) == 0 &&
		(who.access & DLOCK_ACCESS_USER))
		return 2;
	return (who.access & DLOCK_ACCESS_MONITOR) ? 1 : 0;
}

/* ------------------------------------------------------------------------
 * dlock_reload() -> 1: the lock manager reads the dlock tables again (after
 * install.sql replaced them, or a restore); dlock_admin only
 * ------------------------------------------------------------------------ */
DLOCK_UDF_SETUP(dlock_reload, 0, 0, "no arguments", NULL, 0)

long long
dlock_reload(UDF_INIT *initid, UDF_ARGS *args, char *is_null, char *error)
{
	DlockCaller who;
	DlockErr	err = {0};

	(void) initid;
	(void) args;
	*is_null = 0;
	*error = 0;
	if (authorize(&who, DLOCK_ACCESS_ADMIN, "dlock_reload", error, is_null) != 0)
		return 0;
	if (mgr_reload("dlock_reload", &err) != 0)
	{
		report_failure(&err, error, is_null);
		return 0;
	}
	return 1;
}

/* ------------------------------------------------------------------------
 * dlock_stats() -> the lock manager's statistics as one JSON object (the
 * view dlock.stats takes it apart): one snapshot, so the columns agree.
 * dlock_monitor and dlock_admin.
 * ------------------------------------------------------------------------ */
DLOCK_UDF_SETUP(dlock_stats, 0, 0, "no arguments", NULL, 4096)

/* "name":[le...] and "name_bucket":[cumulative counts...] */
static int
json_histogram(char *p, size_t room, const char *name, const int64_t *buckets)
{
	size_t		n = 0;
	long long	sum = 0;

	n += (size_t) snprintf(p + n, room - n, ",\"%s\":[", name);
	for (int b = 0; b < DLM_WAIT_BUCKETS && n < room; b++)
	{
		if (b < DLM_WAIT_BUCKETS - 1)
			n += (size_t) snprintf(p + n, room - n, "%s%g", b ? "," : "",
								   dlm_wait_bounds_us[b] / 1e6);
		else
			n += (size_t) snprintf(p + n, room - n, ",\"+Inf\"");
	}
	n += (size_t) snprintf(p + n, room - n, "],\"%s_bucket\":[", name);
	for (int b = 0; b < DLM_WAIT_BUCKETS && n < room; b++)
	{
		sum += buckets[b];
		n += (size_t) snprintf(p + n, room - n, "%s%lld", b ? "," : "", sum);
	}
	n += (size_t) snprintf(p + n, room - n, "]");
	return n < room ? (int) n : -1;
}

char *
dlock_stats(UDF_INIT *initid, UDF_ARGS *args, char *result,
			unsigned long *length, char *is_null, char *error)
{
	DlockCaller who;
	DLmCounters c;
	int64_t		holders,
				waiting,
				kept;
	long long	since;
	char		buf[4096];
	int			n,
				h;

	(void) args;
	(void) result;
	*is_null = 0;
	*error = 0;
	if (authorize(&who, DLOCK_ACCESS_MONITOR | DLOCK_ACCESS_ADMIN, "dlock_stats",
				  error, is_null) != 0)
		return NULL;
	mgr_stats(&c, &holders, &waiting, &kept, &since);
	n = snprintf(buf, sizeof(buf),
				 "{\"since_us\":%lld,\"requests\":%lld,\"grants\":%lld,\"grants_immediate\":%lld,"
				 "\"waits\":%lld,\"timeouts\":%lld,\"cancels\":%lld,\"kept\":%lld,"
				 "\"deadlocks\":%lld,\"refused\":%lld,\"errors\":%lld,\"lease_expiries\":%lld,"
				 "\"renewals\":%lld,\"releases\":%lld,\"conversions\":%lld,"
				 "\"session_cleanups\":%lld,\"holders\":%lld,\"waiters\":%lld,"
				 "\"kept_places\":%lld,\"batches\":%lld,\"commits\":%lld,"
				 "\"batch_requests\":%lld,\"commit_seconds\":%.6f,"
				 "\"wait_seconds_sum\":%.6f,\"wait_seconds_count\":%lld,"
				 "\"handoff_seconds_sum\":%.6f,\"handoff_seconds_count\":%lld",
				 since, (long long) c.core.requests, (long long) c.core.grants,
				 (long long) c.core.grants_immediate, (long long) c.core.waits,
				 (long long) c.timeouts, (long long) c.cancels, (long long) c.core.kept,
				 (long long) c.core.deadlocks, (long long) c.core.refused,
				 (long long) c.core.errors, (long long) c.core.expiries,
				 (long long) c.core.renewals, (long long) c.core.releases,
				 (long long) c.core.conversions, (long long) c.core.session_cleanups,
				 (long long) holders, (long long) waiting, (long long) kept,
				 (long long) c.batches, (long long) c.commits, (long long) c.batch_requests,
				 c.commit_us / 1e6, c.core.wait_us_sum / 1e6,
				 (long long) (c.core.grants - c.core.grants_immediate),
				 c.handoff_us_sum / 1e6, (long long) c.handoffs);
	if (n < 0 || (size_t) n >= sizeof(buf) ||
		(h = json_histogram(buf + n, sizeof(buf) - (size_t) n, "wait_seconds",
							c.core.wait_buckets)) < 0 ||
		(n += h, (h = json_histogram(buf + n, sizeof(buf) - (size_t) n, "handoff_seconds",
									 c.handoff_buckets)) < 0) ||
		(size_t) (n += h) + 2 > sizeof(buf))
	{
		*error = 1;
		return NULL;
	}
	buf[n++] = '}';
	buf[n] = '\0';
	return set_string(initid, buf, (size_t) n, length, is_null, error);
}

/* ------------------------------------------------------------------------
 * dlock_stats_reset() -> 1: dlock.stats counts from zero again; dlock_admin
 * ------------------------------------------------------------------------ */
DLOCK_UDF_SETUP(dlock_stats_reset, 0, 0, "no arguments", NULL, 0)

long long
dlock_stats_reset(UDF_INIT *initid, UDF_ARGS *args, char *is_null, char *error)
{
	DlockCaller who;

	(void) initid;
	(void) args;
	*is_null = 0;
	*error = 0;
	if (authorize(&who, DLOCK_ACCESS_ADMIN, "dlock_stats_reset", error, is_null) != 0)
		return 0;
	mgr_stats_reset();
	return 1;
}
