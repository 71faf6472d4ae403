/*
 * dlock_udf.c
 *		The SQL functions of the MySQL/MariaDB plugin (UDFs): argument
 *		checks, the caller's identity and kill state, and error reporting.
 *
 * Built against the server's UDF layout (mysql_com.h of libmariadbd-dev),
 * never the client library's, which differs.  The lock manager itself is
 * in dlock_store.c and shares no header with this file but dlock_store.h.
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
 * the caller's account (CURRENT_USER()) through get_default_definer.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <mysql.h>				/* the server's (-I .../server): UDF_INIT, UDF_ARGS */

#include "dlock_core.h"
#include "dlock_store.h"

#define DLOCK_VERSION "1.0"

/* my_sys.h flag: push a warning instead of raising an error */
#define DLOCK_ME_WARNING 2048

typedef void *(*current_thd_fn) (void);
typedef unsigned long (*thread_id_fn) (const void *thd);
typedef int (*kill_level_fn) (const void *thd);
typedef unsigned char (*is_connected_fn) (void *thd);
typedef void (*printf_error_fn) (unsigned int err, const char *fmt,
								 unsigned long flags,...);

/* the server's LEX_CSTRING and the start of its LEX_USER (user, host) */
typedef struct ServerLexString
{
	const char *str;
	size_t		length;
} ServerLexString;
typedef struct ServerLexUser
{
	ServerLexString user;
	ServerLexString host;
	void	   *rest[16];		/* room for the fields we never read */
} ServerLexUser;

/* check_routine_access(THD*, privilege_t, const LEX_CSTRING *db,
 * const LEX_CSTRING *name, const Sp_handler *, bool no_errors): true when
 * denied */
typedef _Bool (*routine_access_fn) (void *thd, unsigned long long want,
									const ServerLexString *db,
									const ServerLexString *name,
									const void *sp_handler, _Bool no_errors);
/* get_default_definer(THD*, LEX_USER*, bool role): CURRENT_USER() */
typedef void (*default_definer_fn) (void *thd, ServerLexUser *out, _Bool role);
/* is_acl_user(const char *host, const char *user): the account exists, or
 * with an empty host the role */
typedef _Bool (*is_acl_user_fn) (const char *host, const char *user);

#define SYM_ROUTINE_ACCESS \
	"_Z20check_routine_accessP3THD11privilege_tPK25st_mysql_const_lex_stringS4_PK10Sp_handlerb"
#define SYM_DEFAULT_DEFINER "_Z19get_default_definerP3THDP8LEX_USERb"
#define SYM_IS_ACL_USER "_Z11is_acl_userPKcS0_"
#define SERVER_EXECUTE_ACL (1ULL << 18)	/* privilege.h */

static pthread_once_t hooks_once = PTHREAD_ONCE_INIT;
static current_thd_fn h_current_thd;
static thread_id_fn h_thread_id;
static kill_level_fn h_kill_level;
static is_connected_fn h_is_connected;	/* optional */
static printf_error_fn h_printf_error;
static const char *h_server_version;
static routine_access_fn h_routine_access;
static default_definer_fn h_default_definer;
static is_acl_user_fn h_is_acl_user;
static const void *h_sp_handler_procedure;
static char hooks_missing[128];
static long long max_ttl_us = DLOCK_DEFAULT_MAX_TTL_US;
static char self_id[160];
static const char *self_socket;
static unsigned int self_port;

static void
hooks_init(void)
{
	char	  **sock;
	unsigned int *port;
	const char *host;

	h_current_thd = (current_thd_fn) dlsym(RTLD_DEFAULT, "_current_thd");
	h_thread_id = (thread_id_fn) dlsym(RTLD_DEFAULT, "thd_get_thread_id");
	h_kill_level = (kill_level_fn) dlsym(RTLD_DEFAULT, "thd_kill_level");
	h_printf_error = (printf_error_fn) dlsym(RTLD_DEFAULT, "my_printf_error");
	h_is_connected = (is_connected_fn) dlsym(RTLD_DEFAULT, "thd_is_connected");
	h_server_version = (const char *) dlsym(RTLD_DEFAULT, "server_version");
	h_routine_access = (routine_access_fn) dlsym(RTLD_DEFAULT, SYM_ROUTINE_ACCESS);
	h_default_definer = (default_definer_fn) dlsym(RTLD_DEFAULT, SYM_DEFAULT_DEFINER);
	h_is_acl_user = (is_acl_user_fn) dlsym(RTLD_DEFAULT, SYM_IS_ACL_USER);
	h_sp_handler_procedure = dlsym(RTLD_DEFAULT, "sp_handler_procedure");
	sock = (char **) dlsym(RTLD_DEFAULT, "mysqld_unix_port");
	port = (unsigned int *) dlsym(RTLD_DEFAULT, "mysqld_port");
	host = (const char *) dlsym(RTLD_DEFAULT, "glob_hostname");

	if (!h_current_thd || !h_thread_id || !h_kill_level || !h_printf_error ||
		!h_routine_access || !h_default_definer || !h_is_acl_user ||
		!h_sp_handler_procedure)
		snprintf(hooks_missing, sizeof(hooks_missing),
				 "this server does not export %s",
				 !h_current_thd ? "_current_thd" :
				 !h_thread_id ? "thd_get_thread_id" :
				 !h_kill_level ? "thd_kill_level" :
				 !h_printf_error ? "my_printf_error" :
				 !h_routine_access ? "check_routine_access" :
				 !h_default_definer ? "get_default_definer" :
				 !h_is_acl_user ? "is_acl_user" : "sp_handler_procedure");
	if (getenv("DLOCK_MAX_TTL_SECONDS"))
	{
		double		v = strtod(getenv("DLOCK_MAX_TTL_SECONDS"), NULL);

		if (v >= 1 && v * 1e6 <= (double) DLOCK_CEILING_US)
			max_ttl_us = (long long) (v * 1e6);
	}
	self_socket = (sock && *sock) ? *sock : NULL;
	self_port = port ? *port : 0;
	snprintf(self_id, sizeof(self_id), "%s:%u",
			 (host && host[0]) ? host : "localhost", self_port);
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
	if (dls_init(self_socket, self_port, self_id, &err) != 0)
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

/*
 * The caller's account as CURRENT_USER() shows it, user@host, and its
 * active role as CURRENT_ROLE() does ("" when none).
 */
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

	memset(&u, 0, sizeof(u));
	h_default_definer(thd, &u, 1);
	n = snprintf(who->role, sizeof(who->role), "%.*s",
				 (int) (u.user.str ? u.user.length : 0),
				 u.user.str ? u.user.str : "");
	if (n < 0)
		n = 0;
	who->role_len = (size_t) n < sizeof(who->role) ?
		(size_t) n : sizeof(who->role) - 1;
}

/* Fills *who; access holds the bits of 'wanted' the caller has. */
static void
caller(DlockCaller *who, int wanted)
{
	void	   *thd = h_current_thd();

	who->conn_id = h_thread_id(thd);
	who->killed = caller_killed;
	who->killed_arg = NULL;
	who->access = caller_access(thd, wanted);
	caller_account(thd, who);
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
get_name(UDF_ARGS *args, unsigned int i, DlockReq *req, char *error,
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
	req->name = s;
	req->name_len = args->lengths[i];
	return 0;
}

/* Owner argument (optional, NULL = session); 0 or raises the error. */
static int
get_owner(UDF_ARGS *args, unsigned int i, DlockReq *req, char *error,
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
			long long *out, DlockReq *req, char *error, char *is_null)
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
get_mode(UDF_ARGS *args, unsigned int i, DlockReq *req, char *error,
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
	/* the stored procedures know shared and exclusive only */
	if (req->mode != DLOCK_MODE_PR && req->mode != DLOCK_MODE_EX)
	{
		n = args->lengths[i] < sizeof(shown) - 1 ? args->lengths[i] : sizeof(shown) - 1;
		for (size_t k = 0; k < n; k++)
		{
			unsigned char c = (unsigned char) args->args[i][k];

			shown[k] = (c < 0x20 || c == 0x7f || c == '"') ? '?' : (char) c;
		}
		shown[n] = '\0';
		fail(error, is_null, DLOCK_ER_ARGS,
			 "%s: unknown lock mode \"%s\" (expected exclusive or shared; the other DLM modes are PostgreSQL's only)",
			 req->fn, shown);
		return -1;
	}
	return 0;
}

/* Owner-keyed locks always carry a lease. */
static void
default_ttl(DlockReq *req)
{
	if (req->owner && req->ttl_us < 0)
		req->ttl_us = DLOCK_DEFAULT_OWNER_TTL_US;
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
 * dlock_acquire(name, timeout_seconds [, ttl_seconds [, mode [, owner]]])
 * ------------------------------------------------------------------------ */
static const int num_acquire[5] = {0, 1, 1, 0, 0};

my_bool
dlock_acquire_init(UDF_INIT *initid, UDF_ARGS *args, char *message)
{
	return init_common(initid, args, message, "dlock_acquire", 2, 5,
					   "(name, timeout [, ttl [, mode [, owner]]])", num_acquire);
}

void
dlock_acquire_deinit(UDF_INIT *initid)
{
	deinit_common(initid);
}

static long long
acquire_common(UDF_ARGS *args, int try_only, char *is_null, char *error)
{
	DlockReq	req = {0};
	DlockCaller who;
	DlockErr	err = {0};
	long long	token = 0;
	unsigned int ttl_i = try_only ? 1 : 2;

	req.fn = try_only ? "dlock_try_acquire" : "dlock_acquire";
	*is_null = 0;
	*error = 0;
	if (authorize(&who, DLOCK_ACCESS_USER | DLOCK_ACCESS_ADMIN, req.fn, error, is_null) != 0 ||
		get_name(args, 0, &req, error, is_null) != 0)
		return 0;
	req.timeout_us = -1;
	if (!try_only &&
		get_seconds(args, 1, "timeout", DLOCK_MAX_TIMEOUT_US, &req.timeout_us,
					&req, error, is_null) != 0)
		return 0;
	if (get_seconds(args, ttl_i, "ttl", max_ttl_us, &req.ttl_us, &req,
					error, is_null) != 0 ||
		get_mode(args, ttl_i + 1, &req, error, is_null) != 0 ||
		get_owner(args, ttl_i + 2, &req, error, is_null) != 0)
		return 0;
	default_ttl(&req);
	if (dls_act_as_key_owner(&who, &req, &err) != 0 ||
		dls_acquire(&who, &req, try_only, &token, &err) != 0)
	{
		report_failure(&err, error, is_null);
		return 0;
	}

	/*
	 * Killed while the grant was made: the server answers the statement
	 * with an error, so the caller would never learn the token - give the
	 * grant back, as late as possible.  (A kill that lands after this check
	 * can still cost the caller a grant it does not see: see the README.)
	 */
	if (token != 0 && caller_killed(NULL))
	{
		if (dls_give_back(&who, &req, token, &err) != 0)
		{
			report_failure(&err, error, is_null);
			return 0;
		}
		token = 0;
	}
	if (token == 0)
	{
		*is_null = 1;
		if (caller_killed(NULL))
		{
			/* the server does not report a kill that a UDF survived */
			DlockErr	e = {DLOCK_ER_INTERRUPTED, 0, ""};

			snprintf(e.msg, sizeof(e.msg),
					 "%s: query execution was interrupted; the request was "
					 "withdrawn", req.fn);
			report(&e);
			*error = 1;
		}
		return 0;
	}
	return token;
}

long long
dlock_acquire(UDF_INIT *initid, UDF_ARGS *args, char *is_null, char *error)
{
	(void) initid;
	return acquire_common(args, 0, is_null, error);
}

/* ------------------------------------------------------------------------
 * dlock_try_acquire(name [, ttl_seconds [, mode [, owner]]])
 * ------------------------------------------------------------------------ */
static const int num_try[4] = {0, 1, 0, 0};

my_bool
dlock_try_acquire_init(UDF_INIT *initid, UDF_ARGS *args, char *message)
{
	return init_common(initid, args, message, "dlock_try_acquire", 1, 4,
					   "(name [, ttl [, mode [, owner]]])", num_try);
}

void
dlock_try_acquire_deinit(UDF_INIT *initid)
{
	deinit_common(initid);
}

long long
dlock_try_acquire(UDF_INIT *initid, UDF_ARGS *args, char *is_null, char *error)
{
	(void) initid;
	return acquire_common(args, 1, is_null, error);
}

/* ------------------------------------------------------------------------
 * dlock_release(name [, owner]) -> 1 released, 0 not held (warning)
 * ------------------------------------------------------------------------ */
my_bool
dlock_release_init(UDF_INIT *initid, UDF_ARGS *args, char *message)
{
	return init_common(initid, args, message, "dlock_release", 1, 2,
					   "(name [, owner])", NULL);
}

void
dlock_release_deinit(UDF_INIT *initid)
{
	deinit_common(initid);
}

long long
dlock_release(UDF_INIT *initid, UDF_ARGS *args, char *is_null, char *error)
{
	DlockReq	req = {0};
	DlockCaller who;
	DlockErr	err = {0};
	int			released = 0;

	(void) initid;
	req.fn = "dlock_release";
	*is_null = 0;
	*error = 0;
	if (authorize(&who, DLOCK_ACCESS_USER | DLOCK_ACCESS_ADMIN, req.fn, error, is_null) != 0 ||
		get_name(args, 0, &req, error, is_null) != 0 ||
		get_owner(args, 1, &req, error, is_null) != 0)
		return 0;
	if (dls_act_as_key_owner(&who, &req, &err) != 0 ||
		dls_release(&who, &req, &released, &err) != 0)
	{
		report_failure(&err, error, is_null);
		return 0;
	}
	if (err.code && err.warning)
		report(&err);
	return released;
}

/* ------------------------------------------------------------------------
 * dlock_renew(name, ttl_seconds [, owner]) -> new expiry (UTC)
 * ------------------------------------------------------------------------ */
static const int num_renew[3] = {0, 1, 0};

my_bool
dlock_renew_init(UDF_INIT *initid, UDF_ARGS *args, char *message)
{
	int			r = init_common(initid, args, message, "dlock_renew", 2, 3,
								"(name, ttl [, owner])",
								num_renew);

	initid->max_length = 26;
	return r;
}

void
dlock_renew_deinit(UDF_INIT *initid)
{
	deinit_common(initid);
}

char *
dlock_renew(UDF_INIT *initid, UDF_ARGS *args, char *result,
			unsigned long *length, char *is_null, char *error)
{
	DlockReq	req = {0};
	DlockCaller who;
	DlockErr	err = {0};
	char		expiry[64];
	int			no_lease = 0;

	(void) result;
	req.fn = "dlock_renew";
	*is_null = 0;
	*error = 0;
	if (authorize(&who, DLOCK_ACCESS_USER | DLOCK_ACCESS_ADMIN, req.fn, error, is_null) != 0 ||
		get_name(args, 0, &req, error, is_null) != 0 ||
		get_seconds(args, 1, "ttl", max_ttl_us, &req.ttl_us, &req,
					error, is_null) != 0 ||
		get_owner(args, 2, &req, error, is_null) != 0)
		return NULL;
	if (dls_act_as_key_owner(&who, &req, &err) != 0 ||
		dls_renew(&who, &req, expiry, sizeof(expiry), &no_lease, &err) != 0)
	{
		report_failure(&err, error, is_null);
		return NULL;
	}
	if (no_lease)
	{
		*is_null = 1;
		return NULL;
	}
	return set_string(initid, expiry, strlen(expiry), length, is_null, error);
}

/* ------------------------------------------------------------------------
 * dlock_release_all([owner]) -> locks released + requests withdrawn
 * ------------------------------------------------------------------------ */
my_bool
dlock_release_all_init(UDF_INIT *initid, UDF_ARGS *args, char *message)
{
	return init_common(initid, args, message, "dlock_release_all", 0, 1,
					   "([owner])", NULL);
}

void
dlock_release_all_deinit(UDF_INIT *initid)
{
	deinit_common(initid);
}

long long
dlock_release_all(UDF_INIT *initid, UDF_ARGS *args, char *is_null, char *error)
{
	DlockReq	req = {0};
	DlockCaller who;
	DlockErr	err = {0};
	long long	count = 0;

	(void) initid;
	req.fn = "dlock_release_all";
	*is_null = 0;
	*error = 0;
	if (authorize(&who, DLOCK_ACCESS_USER | DLOCK_ACCESS_ADMIN, req.fn, error, is_null) != 0 ||
		get_owner(args, 0, &req, error, is_null) != 0)
		return 0;
	if (dls_act_as_key_owner(&who, &req, &err) != 0 ||
		dls_release_all(&who, &req, &count, &err) != 0)
	{
		report_failure(&err, error, is_null);
		return 0;
	}
	return count;
}

/* ------------------------------------------------------------------------
 * dlock_holder(name) -> owner keys / connection ids, NULL when free
 * ------------------------------------------------------------------------ */
my_bool
dlock_holder_init(UDF_INIT *initid, UDF_ARGS *args, char *message)
{
	int			r = init_common(initid, args, message, "dlock_holder", 1, 1,
								"(name)", NULL);

	initid->max_length = 65535;
	return r;
}

void
dlock_holder_deinit(UDF_INIT *initid)
{
	deinit_common(initid);
}

char *
dlock_holder(UDF_INIT *initid, UDF_ARGS *args, char *result,
			 unsigned long *length, char *is_null, char *error)
{
	DlockReq	req = {0};
	DlockErr	err = {0};
	DlockCaller who;
	char	   *out = NULL;
	size_t		len = 0;
	char	   *r;

	(void) result;
	req.fn = "dlock_holder";
	*is_null = 0;
	*error = 0;
	if (authorize(&who, DLOCK_ACCESS_USER | DLOCK_ACCESS_MONITOR | DLOCK_ACCESS_ADMIN, req.fn,
				  error, is_null) != 0 ||
		get_name(args, 0, &req, error, is_null) != 0)
		return NULL;
	if (dls_holder(&who, &req, &out, &len, &err) != 0)
	{
		report_failure(&err, error, is_null);
		return NULL;
	}
	if (out == NULL)
	{
		*is_null = 1;
		return NULL;
	}
	r = set_string(initid, out, len, length, is_null, error);
	free(out);
	return r;
}

/* ------------------------------------------------------------------------
 * dlock_info() -> version
 * ------------------------------------------------------------------------ */
my_bool
dlock_info_init(UDF_INIT *initid, UDF_ARGS *args, char *message)
{
	int			r = init_common(initid, args, message, "dlock_info", 0, 0,
								"no arguments", NULL);

	initid->max_length = 200;
	return r;
}

void
dlock_info_deinit(UDF_INIT *initid)
{
	deinit_common(initid);
}

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
my_bool
dlock_new_owner_init(UDF_INIT *initid, UDF_ARGS *args, char *message)
{
	int			r = init_common(initid, args, message, "dlock_new_owner", 0, 0,
								"no arguments", NULL);

	initid->max_length = 32;
	return r;
}

void
dlock_new_owner_deinit(UDF_INIT *initid)
{
	deinit_common(initid);
}

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
	return h_is_acl_user(host, user);
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
	DlockReq	req = {0};
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
	if (dls_grant(fn, g, glen, args->args[0], args->lengths[0], revoke,
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

my_bool
dlock_set_quota_init(UDF_INIT *initid, UDF_ARGS *args, char *message)
{
	return init_common(initid, args, message, "dlock_set_quota", 2, 5,
					   "(account, max_locks [, per_owner [, max_bytes [, bytes_per_owner]]])",
					   num_quota);
}

void
dlock_set_quota_deinit(UDF_INIT *initid)
{
	deinit_common(initid);
}

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
	if (dls_set_quota("dlock_set_quota", g, glen, limits, &err) != 0)
	{
		report_failure(&err, error, is_null);
		return 0;
	}
	return 1;
}

/* ------------------------------------------------------------------------
 * dlock_sees(account) -> what the caller may see of a row of that account:
 * 2 the row and its owner key (its own account, or dlock_admin), 1 the row
 * without the key (dlock_monitor), 0 nothing.  The filter of the view
 * dlock.locks, evaluated in the caller's security context.
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
 * dlock_reap() -> rows ended; called every second by the dlock.reaper event
 * ------------------------------------------------------------------------ */
my_bool
dlock_reap_init(UDF_INIT *initid, UDF_ARGS *args, char *message)
{
	return init_common(initid, args, message, "dlock_reap", 0, 0,
					   "no arguments", NULL);
}

void
dlock_reap_deinit(UDF_INIT *initid)
{
	deinit_common(initid);
}

long long
dlock_reap(UDF_INIT *initid, UDF_ARGS *args, char *is_null, char *error)
{
	DlockCaller who;
	DlockErr	err = {0};
	long long	count = 0;

	(void) initid;
	(void) args;
	*is_null = 0;
	*error = 0;
	if (authorize(&who, DLOCK_ACCESS_ADMIN, "dlock_reap", error, is_null) != 0)
		return 0;
	if (dls_reap(&who, &count, &err) != 0)
	{
		report_failure(&err, error, is_null);
		return 0;
	}
	return count;
}

/* Library unload (last DROP FUNCTION, server shutdown): close the pool. */
__attribute__((destructor))
static void
dlock_udf_unload(void)
{
	dls_shutdown();
}
