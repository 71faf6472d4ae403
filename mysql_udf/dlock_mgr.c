/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * dlock_mgr.c
 *		The lock manager thread of the MySQL/MariaDB plugin and the hand-over
 *		of requests to it.  Its loop, as PostgreSQL's worker's:
 *
 *		collect		take every new request, withdrawal and ended session
 *		decide		hand them, and lease expiry, to the core lock manager
 *					(core/dlock_lm.h), which answers and lists what changed
 *		store		write the changed rows in one transaction (dlock_store.c)
 *		publish		only after the commit, hand the answers to the calls and
 *					wake them
 *
 * Requests that arrive while a batch commits form the next batch, so
 * commits are grouped.  A batch that answers nobody (a waiter announced, a
 * session cleaned up) may leave its writes to the next batch's commit, for
 * at most DEFER_MS.
 *
 * Locking: 'mu' protects the slots' state and the queues of submitted
 * requests, withdrawals, ended sessions and inspections; 'grants_lock' the
 * namespace grants, which callers check in their own threads
 * (mgr_namespace_check).  The manager never holds mu while it talks to the
 * store or decides.  Every call has a slot (its requester
 * number in the core) from submission to answer; the caller sleeps on the
 * slot's condition variable, registered with the server so that a KILL
 * wakes it at once, and looks every CLIENT_POLL_MS whether its client went
 * away (the server notices that only after the statement).
 * The picture, the account table and the quotas are the manager thread's
 * alone.  Every second it also looks whether the sessions that hold or
 * wait are still connected (sessions_check): a server-internal session
 * ends without the disconnect notification.
 */
#define _GNU_SOURCE
#include "dlock_mgr.h"
#include "dlock_store.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

/* Calls in flight at once (requesters of the core). */
#define NSLOTS 4096
/* How often a waiting call looks whether its client went away. */
#define CLIENT_POLL_MS 50
/* A batch that answers nobody may wait this long for the next commit. */
#define DEFER_MS 5
#define MAX_DEFERRED 64
/* Tickets reserved per update of the stored counter. */
#define TICKET_RESERVE 10000
/* Leases expired per batch at most (the rest in the next batches). */
#define EXPIRE_PER_BATCH 2000
/* After a failed batch or load: pause, doubling up to the maximum. */
#define RETRY_MIN_MS 10
#define RETRY_MAX_MS 2000
/* While the store cannot be reached (the server starting), calls wait this long. */
#define LOAD_WAIT_US (10LL * 1000000)
/* A batch that failed this often in a row answers its requests with the error. */
#define MAX_BATCH_FAILURES 3
/*
 * How often the manager looks whether the sessions that hold or wait are
 * still there (those that end without a disconnect notification).
 */
#define SESSION_CHECK_MS 1000
/* A server that may not serve (a replica, a Galera node) is asked again this often. */
#define ROLE_RECHECK_MS 1000
/* Waiting for the semi-synchronous replica: pauses between looks, doubling. */
#define SYNC_PAUSE_MIN_MS 10
#define SYNC_PAUSE_MAX_MS 1000

unsigned int dlock_queue_row_delay_ms = 5;
unsigned int dlock_restart_grace_ms = 5000;
unsigned long long dlock_max_ttl_seconds = 86400;

typedef enum SlotState
{
	SLOT_FREE = 0,
	SLOT_SUBMITTED,				/* in the submit queue */
	SLOT_ACCEPTED,				/* taken by the manager, not yet answered */
	SLOT_DONE					/* answered: res/err are the caller's */
} SlotState;

typedef struct Slot
{
	int			index;
	SlotState	state;
	bool		withdraw;		/* the caller gave up (timeout, kill) */
	bool		withdraw_listed;
	unsigned long long seq;		/* submission order */
	/* the request, written by the caller before submission */
	DlockCall	call;
	const char *names_z[DLOCK_MAX_MULTI];
	const char *owner_z;
	const char *value_z;
	char	   *buf;
	size_t		buf_cap;
	unsigned long long conn_id;
	char		account[DLOCK_MAX_ACCOUNT_LEN + 1];
	bool		admin;
	DLockTime	timeout_at;
	DLockTime	submitted_at;
	/* an inspection instead of a request */
	MgrInspectFn inspect_fn;
	void	   *inspect_arg;
	/* the manager's: the answer of this batch, published after commit */
	bool		keep_after;		/* given up before decided, with keep_place */
	bool		pending;
	DlockResult pres;
	DlockErr	perr;
	/* the caller's once DONE */
	DlockResult res;
	DlockErr	err;
	MgrCond		cond;
	struct Slot *next;			/* free list, submit queue */
	struct Slot *wnext;			/* withdraw list */
} Slot;

static MgrMutex mu = {PTHREAD_MUTEX_INITIALIZER, NULL};
static pthread_cond_t work_cond;
static pthread_condattr_t cond_attr;
static Slot *slots;
static Slot *free_slots;
static Slot *submit_head, *submit_tail;
static Slot *withdraw_head;
static Slot *inspect_head, *inspect_tail;
static unsigned long long *ended;
static size_t nended, ended_cap;
static unsigned long long next_seq = 1;
static bool stopping = false;
static bool running = false;
static bool thread_started = false;
static pthread_t thread;
static char not_ready[sizeof(((DlockErr *) 0)->msg)];		/* why the manager does not serve ("": it does) */

/* The manager thread's own */
static DLockManager *picture;
static bool first_load = true;
static int	failures = 0;		/* loads failed in a row */
static int	batch_failures = 0; /* batches failed in a row */
static DLockTime retry_at;		/* monotonic: when to try loading again */
static int	last_load_rc;		/* of the last failed load: -1, -2 */
static bool reload_requested;	/* dlock_reload(): rebuild after this batch */
static int	deferred = 0;
static DLockTime deferred_since;
static DLockTime next_session_check;	/* monotonic: when to look at the sessions */
static bool refusing;			/* this server may not serve: a replica, a Galera node */
static char refusal[sizeof(((DlockErr *) 0)->msg)];	/* ... why, as logged */

/*
 * The server's semi-synchronous replication as a primary, read from its own
 * globals (mariadbd exports them, as it does the symbols dlock_udf.c uses):
 * whether commits wait for a replica's acknowledgement
 * (rpl_semi_sync_master_enabled), and how many commits that should have
 * waited did not get it (Rpl_semi_sync_master_no_tx: the wait timed out, a
 * KILL QUERY or KILL hit the waiting connection - after which the statement
 * succeeds all the same -, semi-sync had fallen back to asynchronous, or no
 * replica was there with rpl_semi_sync_master_wait_no_slave OFF).  Both
 * are updated by the committing thread itself, before its statement
 * returns (Rpl_semi_sync_master_status is not: it is refreshed only by
 * SHOW STATUS).  NULL when the server has none of them.
 */
static const volatile char *ss_enabled;
static const volatile unsigned long *ss_no_tx;

/*
 * Statistics (dlock_stat, the view dlock.stats): the manager thread counts
 * into 'counted'; after each batch it publishes a copy under mu, where the
 * functions read it.  A reset keeps a baseline (stats_base): it takes
 * effect at once, and the published counters only grow.
 */
static DLmCounters counted;
static int	stats_fresh;		/* new requests since the last publish */
static DLmCounters stats_now;	/* mu */
static DLmCounters stats_base;	/* mu */
static DLockTime stats_since;	/* mu: the load or the last reset, Unix µs */
static int64_t stats_holders,
			stats_waiting,
			stats_kept;			/* mu */
static unsigned long long run_base;	/* this server run, in session_start */

/* ------------------------------------------------------------------------
 * Small helpers
 * ------------------------------------------------------------------------ */
void
dlock_set_err(DlockErr *err, int code, const char *fmt,...)
{
	va_list		ap;

	err->code = code;
	err->warning = 0;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
}

/* Wall-clock microseconds: leases outlive the server process. */
static DLockTime
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (DLockTime) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static DLockTime
mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (DLockTime) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void
deadline_ts(struct timespec *ts, long long us_from_now)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += us_from_now / 1000000;
	ts->tv_nsec += (us_from_now % 1000000) * 1000;
	if (ts->tv_nsec >= 1000000000L)
	{
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

/* Printable, bounded copy of a name for messages. */
static const char *
shown(const char *s, char *buf, size_t size)
{
	size_t		n = 0;

	for (; *s && n + 4 < size; s++)
		buf[n++] = ((unsigned char) *s < 0x20 || *s == 0x7f) ? '?' : *s;
	if (*s)
	{
		buf[n++] = '.';
		buf[n++] = '.';
		buf[n++] = '.';
	}
	buf[n] = '\0';
	return buf;
}

/*
 * Sessions: a connection id and this server run.  The core keys a session
 * by a 32-bit pid and a 64-bit start; a connection id is 64 bits, so its
 * high bits go into the start, beside the run's random base: the rows of
 * an earlier run never match a session of this one.
 */
int32_t
session_pid(unsigned long long conn_id)
{
	return (int32_t) (conn_id & 0x7fffffffULL);
}

int64_t
session_start(unsigned long long conn_id)
{
	return (int64_t) (run_base | (conn_id >> 31));
}

unsigned long long
session_conn_id(int32_t pid, int64_t start)
{
	return (((unsigned long long) start & 0xffffffffULL) << 31) |
		(unsigned long long) (uint32_t) pid;
}

static bool
session_of_this_run(int64_t start)
{
	return ((unsigned long long) start & ~0xffffffffULL) == run_base;
}

/* A fresh random run: the session rows of before are no session of it. */
static int
new_run_base(void)
{
	unsigned long long r = 0;

	if (getrandom(&r, sizeof(r), 0) != (ssize_t) sizeof(r))
		return -1;
	/* a positive start whose low 32 bits carry the connection id's high bits */
	run_base = (r & 0x3fffffff00000000ULL) | 0x100000000ULL;
	return 0;
}

/* Whether this server is a semi-synchronous primary (its commits wait for a replica). */
int
mgr_semisync_enabled(void)
{
	return ss_enabled != NULL && ss_no_tx != NULL && *ss_enabled;
}

/* ------------------------------------------------------------------------
 * Accounts: interned strings, the manager's roles
 * ------------------------------------------------------------------------ */
static char **account_names;	/* index id - 1 */
static uint32_t naccounts, accounts_cap;

uint32_t
accounts_intern(const char *account, size_t len)
{
	/* few accounts use dlock: a linear look is cheaper than a hash */
	for (uint32_t i = 0; i < naccounts; i++)
		if (strlen(account_names[i]) == len &&
			memcmp(account_names[i], account, len) == 0)
			return i + 1;
	if (naccounts == accounts_cap)
	{
		uint32_t	cap = accounts_cap ? accounts_cap * 2 : 16;
		char	  **n = realloc(account_names, cap * sizeof(char *));

		if (n == NULL)
			return 0;
		account_names = n;
		accounts_cap = cap;
	}
	account_names[naccounts] = strndup(account, len);
	if (account_names[naccounts] == NULL)
		return 0;
	return ++naccounts;
}

const char *
accounts_name(uint32_t id)
{
	return (id >= 1 && id <= naccounts) ? account_names[id - 1] : "";
}

/* ------------------------------------------------------------------------
 * Namespaces and quotas (the manager's caches of dlock.grants, dlock.quotas)
 *
 * The grants are read by the callers (mgr_namespace_check, in their own
 * threads) under grants_lock; the manager loads a new list aside and swaps
 * it in.  The quotas are the manager thread's alone.
 * ------------------------------------------------------------------------ */
typedef struct Grant
{
	char	   *grantee;		/* an account (user@host) or a role */
	char	   *prefix;
	size_t		plen;
	bool		is_role;
} Grant;

typedef struct Quota
{
	char	   *account;
	long long	limits[4];
} Quota;

typedef struct GrantList
{
	Grant	   *g;
	size_t		n;
	size_t		cap;
} GrantList;

static pthread_rwlock_t grants_lock = PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;
static GrantList grants;		/* grants_lock; sorted by grantee */
static size_t grants_any;		/* grants.n, read without the lock (atomic) */
static GrantList loading;		/* the manager's: the next list */
static Quota *quotas;
static size_t nquotas, quotas_cap;

bool
mgr_capability_role(const char *name, size_t len)
{
	static const char *const roles[] = {"dlock_user", "dlock_monitor", "dlock_admin"};

	for (size_t i = 0; i < sizeof(roles) / sizeof(roles[0]); i++)
		if (len == strlen(roles[i]) && memcmp(name, roles[i], len) == 0)
			return true;
	return false;
}

static void
grants_free(GrantList *l)
{
	for (size_t i = 0; i < l->n; i++)
	{
		free(l->g[i].grantee);
		free(l->g[i].prefix);
	}
	l->n = 0;
}

/* Start loading: the next grants and the quotas from nothing. */
static void
cache_clear(void)
{
	grants_free(&loading);
	for (size_t i = 0; i < nquotas; i++)
		free(quotas[i].account);
	nquotas = 0;
}

/* A row of dlock.grants into the next list (a capability role binds nobody). */
static void
cache_grant(const char *g, size_t glen, const char *p, size_t plen)
{
	Grant	   *e;

	if (mgr_capability_role(g, glen))
		return;
	if (loading.n == loading.cap)
	{
		size_t		cap = loading.cap ? loading.cap * 2 : 16;
		Grant	   *n = realloc(loading.g, cap * sizeof(Grant));

		if (n == NULL)
			return;
		loading.g = n;
		loading.cap = cap;
	}
	e = &loading.g[loading.n];
	e->grantee = strndup(g, glen);
	e->prefix = strndup(p, plen);
	e->plen = plen;
	/* an account is user@host, as CURRENT_USER() shows it; a role has no @ */
	e->is_role = memchr(g, '@', glen) == NULL;
	if (e->grantee && e->prefix)
		loading.n++;
	else
	{
		free(e->grantee);
		free(e->prefix);
	}
}

static int
cmp_grants(const void *a, const void *b)
{
	return strcmp(((const Grant *) a)->grantee, ((const Grant *) b)->grantee);
}

/* The loaded list becomes the grants (the old one is freed at the next load). */
static void
cache_publish(void)
{
	GrantList	old;

	qsort(loading.g, loading.n, sizeof(Grant), cmp_grants);
	pthread_rwlock_wrlock(&grants_lock);
	old = grants;
	grants = loading;
	__atomic_store_n(&grants_any, grants.n, __ATOMIC_RELEASE);
	pthread_rwlock_unlock(&grants_lock);
	loading = old;
	grants_free(&loading);
}

static void
cache_quota(const char *a, size_t alen, const long long limits[4])
{
	if (nquotas == quotas_cap)
	{
		size_t		cap = quotas_cap ? quotas_cap * 2 : 16;
		Quota	   *n = realloc(quotas, cap * sizeof(Quota));

		if (n == NULL)
			return;
		quotas = n;
		quotas_cap = cap;
	}
	quotas[nquotas].account = strndup(a, alen);
	memcpy(quotas[nquotas].limits, limits, sizeof(quotas[nquotas].limits));
	if (quotas[nquotas].account)
		nquotas++;
}

/*
 * Whether a name falls under a prefix: a path prefix ("/a", or "/" for
 * every path) covers the path and the paths below it, segment by segment;
 * a flat prefix the flat names that start with it, byte by byte.
 */
static bool
prefix_covers(const Grant *g, const char *name, size_t len)
{
	if (name[0] == '/')
		return g->prefix[0] == '/' &&
			(g->plen == 1 ||
			 (len >= g->plen && memcmp(name, g->prefix, g->plen) == 0 &&
			  (len == g->plen || name[g->plen] == '/')));
	return g->prefix[0] != '/' && len >= g->plen &&
		memcmp(name, g->prefix, g->plen) == 0;
}

/*
 * Whether grants.g[i] binds the caller: a grant to its account, or to a
 * role granted to it (asked of the server once per role and call: memo,
 * -1 not asked yet, for the grantee's whole run in the sorted list).
 * (grants_lock held)
 */
static bool
grant_applies(const DlockCaller *who, size_t i, signed char *memo)
{
	const Grant *g = &grants.g[i];

	if (!g->is_role)
		return strcmp(g->grantee, who->account) == 0;
	if (memo[i] < 0)
	{
		signed char yes = who->role_granted != NULL &&
			who->role_granted(who, g->grantee);
		size_t		a = i,
					b = i;

		while (a > 0 && strcmp(grants.g[a - 1].grantee, g->grantee) == 0)
			a--;
		while (b + 1 < grants.n && strcmp(grants.g[b + 1].grantee, g->grantee) == 0)
			b++;
		memset(memo + a, yes, b - a + 1);
	}
	return memo[i] > 0;
}

/* Printable, bounded copy of a name of len bytes for messages. */
static const char *
shown_len(const char *s, size_t len, char *buf, size_t size)
{
	size_t		n = 0,
				i = 0;

	for (; i < len && n + 4 < size; i++)
		buf[n++] = ((unsigned char) s[i] < 0x20 || s[i] == 0x7f) ? '?' : s[i];
	if (i < len)
	{
		buf[n++] = '.';
		buf[n++] = '.';
		buf[n++] = '.';
	}
	buf[n] = '\0';
	return buf;
}

/*
 * A caller bound by grants - to its account, or to any role granted to
 * its account, directly or through other roles, whichever role it has
 * active - may take and look at only the names under them; dlock_admin is
 * never bound.  The union of the bindings: a name is allowed when a grant
 * that binds the caller covers it.  Roles are asked about only for the
 * grants that cover a name, and, when one is refused, until one binds.
 */
int
mgr_namespace_check(const char *fn, const DlockCaller *who,
					const char *const *names, const size_t *lens, int nnames,
					DlockErr *err)
{
	signed char memo_small[64];
	signed char *memo = memo_small;
	int			refused = -1;
	bool		bound = false;
	char		nm[80];

	/*
	 * No grant, no binding: nothing shared is touched (a grant published
	 * meanwhile is a change concurrent with this call, which may come
	 * first).
	 */
	if ((who->access & DLOCK_ACCESS_ADMIN) ||
		__atomic_load_n(&grants_any, __ATOMIC_ACQUIRE) == 0)
		return 0;
	pthread_rwlock_rdlock(&grants_lock);
	if (grants.n == 0)
	{
		pthread_rwlock_unlock(&grants_lock);
		return 0;
	}
	if (grants.n > sizeof(memo_small) && (memo = malloc(grants.n)) == NULL)
	{
		pthread_rwlock_unlock(&grants_lock);
		dlock_set_err(err, DLOCK_ER_UNKNOWN, "%s: out of memory", fn);
		return -1;
	}
	memset(memo, -1, grants.n);
	for (int n = 0; n < nnames && refused < 0; n++)
	{
		bool		covered = false;

		for (size_t i = 0; i < grants.n && !covered; i++)
			covered = prefix_covers(&grants.g[i], names[n], lens[n]) &&
				grant_applies(who, i, memo);
		if (!covered)
			refused = n;
	}
	/* a name no binding grant covers: refused if any grant binds the caller */
	for (size_t i = 0; refused >= 0 && i < grants.n && !bound; i++)
		bound = !grants.g[i].is_role && grant_applies(who, i, memo);
	for (size_t i = 0; refused >= 0 && i < grants.n && !bound; i++)
		bound = grants.g[i].is_role && grant_applies(who, i, memo);
	pthread_rwlock_unlock(&grants_lock);
	if (memo != memo_small)
		free(memo);
	if (refused < 0 || !bound)
		return 0;
	dlock_set_err(err, DLOCK_ER_ACCESS,
			"%s: permission denied for lock \"%s\": outside the prefixes "
			"granted to %.200s and its roles [42501]", fn,
			shown_len(names[refused], lens[refused], nm, sizeof(nm)), who->account);
	return -1;
}

static const Quota *
quota_of(const char *account)
{
	for (size_t i = 0; i < nquotas; i++)
		if (strcmp(quotas[i].account, account) == 0)
			return &quotas[i];
	return NULL;
}

/* ------------------------------------------------------------------------
 * Answers
 * ------------------------------------------------------------------------ */
static void
describe_owner(char *buf, size_t size, size_t *len, bool keyed, int32_t pid,
			   int64_t start)
{
	int			n;

	if (*len >= size)
		return;
	if (keyed)
		n = snprintf(buf + *len, size - *len, "an owner key (connection %llu)",
					 session_conn_id(pid, start));
	else
		n = snprintf(buf + *len, size - *len, "connection %llu",
					 session_conn_id(pid, start));
	if (n > 0)
		*len += (size_t) n;
}

/* The deadlock cycle in wait order, one sentence per edge. */
static void
describe_cycle(const Slot *s, const DLmAnswer *a, DlockErr *err)
{
	char		buf[sizeof(err->msg)];
	size_t		len = 0;
	char		nm[80];
	int			n;

	for (int i = 0; i < a->ncycle && len < sizeof(buf); i++)
	{
		const DLmCycleStep *st = &a->cycle[i];

		size_t		start = len;

		/* the cycle's processes are sessions of this run */
		describe_owner(buf, sizeof(buf), &len, st->waiter_keyed, st->waiter_pid,
					   (int64_t) run_base);
		if (start < len && buf[start] >= 'a' && buf[start] <= 'z')
			buf[start] = (char) (buf[start] - 'a' + 'A');
		if (len < sizeof(buf))
		{
			n = snprintf(buf + len, sizeof(buf) - len, " waits for \"%s\" %s ",
						 shown(st->lock, nm, sizeof(nm)),
						 st->held ? "held by" : "queued earlier by");
			if (n > 0)
				len += (size_t) n;
		}
		describe_owner(buf, sizeof(buf), &len, st->blocker_keyed, st->blocker_pid,
					   (int64_t) run_base);
		if (len + 2 < sizeof(buf))
		{
			buf[len++] = '.';
			buf[len++] = ' ';
		}
	}
	if (len > 0 && len <= sizeof(buf))
		buf[len - 1] = '\0';
	else
		buf[sizeof(buf) - 1] = '\0';
	dlock_set_err(err, DLOCK_ER_DEADLOCK,
			"%s: deadlock detected while waiting for lock \"%s\" [40001]: %s",
			s->call.fn, shown(s->names_z[0], nm, sizeof(nm)), buf);
}

static void
describe_error(const Slot *s, DLmError e, DlockErr *err)
{
	const char *fn = s->call.fn;
	char		nm[80];

	shown(s->names_z[0] ? s->names_z[0] : "", nm, sizeof(nm));
	switch (e)
	{
		case DLM_ERR_NOT_YOURS:
			dlock_set_err(err, DLOCK_ER_ACCESS,
					"%s: owner key is in use by another account (an owner key "
					"that holds or waits for locks serves only the account "
					"that took them, and dlock_admin; take your own with "
					"dlock_new_owner())", fn);
			break;
		case DLM_ERR_TOO_MANY_PARTS:
			dlock_set_err(err, DLOCK_ER_TOO_LONG,
					"%s: request has too many parts (each name counts its "
					"path depth)", fn);
			break;
		case DLM_ERR_NO_SPACE:
			dlock_set_err(err, DLOCK_ER_QUOTA, "%s: out of lock space", fn);
			break;
		case DLM_ERR_ROLE_QUOTA:
		case DLM_ERR_OWNER_QUOTA:
			{
				const Quota *q = quota_of(s->account);
				int			k = e == DLM_ERR_ROLE_QUOTA ? 0 : 1;
				static const char *const what[4] = {"max_locks",
				"max_locks_per_owner", "max_bytes", "max_bytes_per_owner"};

				/* the count limit when it is set and reached, else the bytes */
				if (q && q->limits[k] >= 0 && q->limits[k + 2] >= 0 && picture &&
					k == 0 && dlm_role_locks(picture, accounts_intern(s->account, strlen(s->account))) < q->limits[0])
					k += 2;
				else if (q && q->limits[k] < 0)
					k += 2;
				dlock_set_err(err, DLOCK_ER_QUOTA,
						"%s: lock quota exceeded for %.200s (%s %lld) [53400]", fn,
						s->account, what[k], q ? q->limits[k] : 0LL);
			}
			break;
		case DLM_ERR_IS_SEMAPHORE:
		case DLM_ERR_IS_LOCK:
		case DLM_ERR_IS_ELECTION:
			dlock_set_err(err, DLOCK_ER_ARGS,
					"%s: \"%s\" is a %s, not a %s (a name is a lock, a "
					"semaphore or a leader election while anyone holds or "
					"waits for it)", fn, nm,
					e == DLM_ERR_IS_SEMAPHORE ? "semaphore" :
					e == DLM_ERR_IS_ELECTION ? "leader election" : "lock",
					s->call.capacity > 0 ? "semaphore" :
					(s->call.election || s->call.op == DLOCK_OP_PROCLAIM) ?
					"leader election" : "lock");
			break;
		case DLM_ERR_CAPACITY:
			dlock_set_err(err, DLOCK_ER_UNKNOWN,
					"%s: semaphore \"%s\" is in use with another capacity [DL004]",
					fn, nm);
			break;
		case DLM_ERR_HELD_ONCE:
			if (s->call.election)
				dlock_set_err(err, DLOCK_ER_UNKNOWN,
						"%s: this %s leads \"%s\" already; publish a new value "
						"with dlock_proclaim() [DL003]", fn,
						s->call.owner ? "owner" : "session", nm);
			else
				dlock_set_err(err, DLOCK_ER_UNKNOWN,
						"%s: semaphore \"%s\" is already held by this %s [DL003]",
						fn, nm, s->call.owner ? "owner" : "session");
			break;
		case DLM_ERR_CONVERSION_WAITING:
			dlock_set_err(err, DLOCK_ER_ARGS,
					"%s: a conversion of \"%s\" by this owner is already waiting",
					fn, nm);
			break;
		case DLM_ERR_KEEP_PLACE:
			dlock_set_err(err, DLOCK_ER_ARGS,
					"%s: keep_place needs an owner key and a lease", fn);
			break;
		default:
			dlock_set_err(err, DLOCK_ER_UNKNOWN, "%s: lock manager: %s", fn,
					dlm_error_message(e));
			break;
	}
}

/*
 * The slots with an answer of this batch (the manager thread's alone), so
 * that publishing looks at those, not at every slot: a walk over all
 * NSLOTS slots, 5 KB apart, was the manager's largest cost per hand-off.
 */
static int	pending_list[NSLOTS];
static int	npending;
static bool pending_overflow;	/* the list missed some: look at every slot */

static void
mark_pending(Slot *s)
{
	if (s->pending)
		return;
	s->pending = true;
	if (npending < NSLOTS)
		pending_list[npending++] = s->index;
	else
		pending_overflow = true;
}

/* The core's answer callback: kept with the slot until the commit. */
static void
on_answer(void *arg, int requester, const DLmAnswer *a)
{
	Slot	   *s;

	(void) arg;
	if (requester < 0 || requester >= NSLOTS)
		return;
	s = &slots[requester];
	if (a->status == DLOCK_STATUS_QUEUED)
		return;
	mark_pending(s);
	memset(&s->pres, 0, sizeof(s->pres));
	s->perr.code = 0;
	s->perr.warning = 0;
	s->perr.msg[0] = '\0';
	s->pres.status = a->status;
	s->pres.token = a->token;
	s->pres.expires_at_us = a->expires_at;
	s->pres.count = a->count;
	switch (a->status)
	{
		case DLOCK_STATUS_GRANTED:
			s->pres.ntokens = a->ntokens;
			for (int i = 0; i < a->ntokens && i < DLOCK_MAX_MULTI; i++)
				s->pres.tokens[i] = a->tokens[i];
			break;
		case DLOCK_STATUS_DEADLOCK:
			describe_cycle(s, a, &s->perr);
			break;
		case DLOCK_STATUS_ERROR:
			describe_error(s, a->error, &s->perr);
			break;
		case DLOCK_STATUS_MODE_HELD:
			{
				char		nm[80];
				int			i = a->name_index;

				if (i < 0 || i >= s->call.nnames)
					i = 0;
				dlock_set_err(&s->perr, DLOCK_ER_UNKNOWN,
						"%s: lock \"%s\" is already held by this %s in mode %s, "
						"which does not include %s; use dlock_convert() [DL003]",
						s->call.fn, shown(s->names_z[i], nm, sizeof(nm)),
						s->call.owner ? "owner" : "session",
						dlock_mode_name(a->count), dlock_mode_name(s->call.mode));
			}
			break;
		case DLOCK_STATUS_WITHDRAWN:
			{
				char		nm[80];

				dlock_set_err(&s->perr, DLOCK_ER_INTERRUPTED,
						"%s: request for lock \"%s\" was withdrawn: "
						"dlock_release_all() was called for its owner key [DL002]",
						s->call.fn, shown(s->names_z[0], nm, sizeof(nm)));
			}
			break;
		default:
			break;
	}
}

/* ------------------------------------------------------------------------
 * The picture
 * ------------------------------------------------------------------------ */
static void *
lm_alloc(void *arg, size_t size)
{
	(void) arg;
	return malloc(size);
}

static void
lm_free(void *arg, void *ptr, size_t size)
{
	(void) arg;
	(void) size;
	free(ptr);
}

static void
picture_drop(void)
{
	if (picture)
		dlm_destroy(picture);
	picture = NULL;
}

static DLockManager *
picture_new(void)
{
	DLmConfig	cfg;

	memset(&cfg, 0, sizeof(cfg));
	cfg.alloc.alloc = lm_alloc;
	cfg.alloc.free = lm_free;
	/* names come from users: a hash seed nobody can know */
	if (getrandom(cfg.seed, sizeof(cfg.seed), 0) != (ssize_t) sizeof(cfg.seed))
		return NULL;
	cfg.nrequesters = NSLOTS;
	cfg.max_name_len = DLOCK_MAX_NAME_LEN;
	cfg.ticket_reserve = TICKET_RESERVE;
	cfg.queue_row_delay_us = (int64_t) dlock_queue_row_delay_ms * 1000;
	cfg.answer = on_answer;
	return dlm_create(&cfg);
}

static int
cmp_ull(const void *a, const void *b)
{
	unsigned long long x = *(const unsigned long long *) a;
	unsigned long long y = *(const unsigned long long *) b;

	return x < y ? -1 : x > y;
}

/* Whether a session with rows is still connected (dlm_drop_sessions). */
static bool
session_alive(void *arg, int32_t pid, int64_t start)
{
	StoreLoad  *load = arg;
	unsigned long long id;
	bool		gone;

	if (!session_of_this_run(start))
		return false;
	id = session_conn_id(pid, start);
	if (bsearch(&id, load->alive, load->nalive, sizeof(id), cmp_ull) == NULL)
		return false;
	/* an end reported while no picture was loaded */
	pthread_mutex_lock(&mu.m);
	gone = false;
	for (size_t i = 0; i < nended && !gone; i++)
		gone = ended[i] == id;
	pthread_mutex_unlock(&mu.m);
	return !gone;
}

/*
 * Build the picture from the tables: after the server started, and after
 * a failed batch.  The store connection is (re)opened.  0, or with err -1
 * (the store cannot be reached: worth waiting) or -2 (not set up).
 */
static int
reload(DlockErr *err)
{
	StoreLoad	load;
	int			installed = 0;
	int			rc;

	picture_drop();
	if (store_conn_id() == 0 && (rc = store_open(err)) != 0)
		return rc;
	/* a replica or a Galera node does not serve (asked before any table is opened) */
	rc = store_role(err);
	if (rc != 0)
		return rc < 0 ? -1 : -3;
	if (refusing)
	{
		/*
		 * Promoted: a connection of its own, whose read timeout fits a
		 * semi-synchronous primary (store_open).
		 */
		store_close();
		if ((rc = store_open(err)) != 0)
			return rc;
	}
	if (store_installed(&installed, err) != 0)
		return -1;
	if (!installed)
	{
		dlock_set_err(err, DLOCK_ER_UNKNOWN,
				"the dlock tables are not installed (run sql/mysql/install.sql)");
		return -2;
	}
	cache_clear();
	if (store_load_grants(cache_grant, cache_quota, err) != 0)
		return -1;
	cache_publish();
	picture = picture_new();
	if (picture == NULL)
	{
		dlock_set_err(err, DLOCK_ER_UNKNOWN, "out of memory in the lock manager");
		return -1;
	}
	memset(&load, 0, sizeof(load));
	load.m = picture;
	load.now = now_us();
	if (store_load(&load, err) != 0)
	{
		free(load.alive);
		store_rollback();
		picture_drop();
		return -1;
	}
	qsort(load.alive, load.nalive, sizeof(unsigned long long), cmp_ull);
	/*
	 * Holders and waiting parts stay within what the MEMORY tables can take
	 * (max_heap_table_size): a request past it is refused ("out of lock
	 * space"), not a batch that fails on a full table.
	 */
	if (load.capacity > 0)
		dlm_set_limits(picture, load.capacity - load.capacity / 10, 0);
	(void) dlm_drop_sessions(picture, session_alive, &load);
	free(load.alive);
	/* leases that ran out while the server was down get a grace */
	if (first_load && dlock_restart_grace_ms > 0)
		(void) dlm_extend_leases(picture, load.now + (DLockTime) dlock_restart_grace_ms * 1000);
	dlm_load_done(picture, load.now);
	if (dlm_broken(picture) || store_write_batch(picture, err) != 0)
	{
		if (dlm_broken(picture))
			dlock_set_err(err, DLOCK_ER_UNKNOWN, "out of memory in the lock manager");
		store_rollback();
		picture_drop();
		return -1;
	}
	dlm_settle(picture);
	first_load = false;
	pthread_mutex_lock(&mu.m);
	nended = 0;					/* the load saw them gone */
	pthread_mutex_unlock(&mu.m);
	fprintf(stderr, "dlock: lock manager ready: %zu locks held\n",
			dlm_nlocks(picture));
	return 0;
}

/* ------------------------------------------------------------------------
 * Sessions that end unannounced
 *
 * A client connection's end reaches the manager from the server's audit
 * notification (mgr_session_end).  A server-internal session that can call
 * the functions - an event of the event scheduler, a replication applier -
 * ends without one.  So every SESSION_CHECK_MS, while sessions hold or
 * wait for something, the manager lists them from the picture and asks the
 * server which connection ids are alive (one look at
 * information_schema.PROCESSLIST, where the store account, which has
 * PROCESS, sees every client connection and every server-internal session);
 * those missing end as a disconnect ends them.  The picture does not
 * change between the listing and the look (the manager thread alone
 * changes it), and connection ids are not reused within a server run: a
 * session missing from the look has ended.  Nothing of this is on a
 * call's path.
 * ------------------------------------------------------------------------ */
typedef struct SessionList
{
	unsigned long long *ids;
	size_t		n;
	size_t		cap;
	bool		oom;
} SessionList;

/* dlm_drop_sessions' callback, which lists the session owners and drops none. */
static bool
session_listed(void *arg, int32_t pid, int64_t start)
{
	SessionList *l = arg;

	if (!session_of_this_run(start) || l->oom)
		return true;
	if (l->n == l->cap)
	{
		size_t		cap = l->cap ? l->cap * 2 : 64;
		unsigned long long *n = realloc(l->ids, cap * sizeof(*n));

		if (n == NULL)
		{
			l->oom = true;
			return true;
		}
		l->ids = n;
		l->cap = cap;
	}
	l->ids[l->n++] = session_conn_id(pid, start);
	return true;
}

/* Whether it is time to look at the sessions. */
static bool
sessions_due(void)
{
	return picture != NULL && mono_us() >= next_session_check;
}

/* End the sessions that hold or wait but are gone; how many. */
static int
sessions_check(DLockTime now)
{
	SessionList l = {0};
	unsigned long long *alive = NULL;
	size_t		nalive = 0;
	int64_t		holders,
				waiting,
				kept;
	int			n = 0;
	DlockErr	e;

	next_session_check = mono_us() + (DLockTime) SESSION_CHECK_MS * 1000;
	dlm_sizes(picture, &holders, &waiting, &kept);
	if (holders == 0 && waiting == 0)
		return 0;
	(void) dlm_drop_sessions(picture, session_listed, &l);
	if (l.n > 0 && !l.oom)
	{
		if ((store_conn_id() == 0 && store_open(&e) != 0) ||
			store_alive(&alive, &nalive, &e) != 0)
			store_close();		/* looked at again next time; a batch reconnects */
		else
		{
			qsort(alive, nalive, sizeof(*alive), cmp_ull);
			for (size_t i = 0; i < l.n; i++)
				if (bsearch(&l.ids[i], alive, nalive, sizeof(*alive), cmp_ull) == NULL)
				{
					dlm_session_end(picture, session_pid(l.ids[i]),
									session_start(l.ids[i]), DLM_NOBODY, now);
					n++;
				}
		}
	}
	free(alive);
	free(l.ids);
	return n;
}

/* ------------------------------------------------------------------------
 * The manager's loop
 * ------------------------------------------------------------------------ */

/* A request into the core. */
static void
execute(Slot *s, DLockTime now)
{
	DLmRequest	q;
	const Quota *quota;

	memset(&q, 0, sizeof(q));
	q.op = s->call.op;
	q.requester = s->index;
	q.owner_key = s->owner_z;
	q.pid = session_pid(s->conn_id);
	q.session_start = session_start(s->conn_id);
	q.mode = s->call.mode;
	q.names = s->names_z;
	q.nnames = s->call.nnames;
	q.ttl_us = s->call.ttl_us;
	q.max_ttl_us = (int64_t) dlock_max_ttl_seconds * 1000000;
	q.timeout_at = s->timeout_at;
	q.keep_place = s->call.keep_place;
	q.capacity = s->call.capacity;
	q.permits = s->call.permits;
	q.election = s->call.election;
	q.value = s->value_z;
	q.any_role = s->admin;
	q.role = accounts_intern(s->account, strlen(s->account));
	if (q.role == 0)
	{
		mark_pending(s);
		s->pres.status = DLOCK_STATUS_ERROR;
		dlock_set_err(&s->perr, DLOCK_ER_UNKNOWN, "%s: out of memory", s->call.fn);
		return;
	}
	/* the namespace was checked by the caller (mgr_namespace_check) */
	if (q.op == DLOCK_OP_ACQUIRE || q.op == DLOCK_OP_TRY ||
		q.op == DLOCK_OP_ACQUIRE_ALL)
	{
		quota = s->admin ? NULL : quota_of(s->account);
		if (quota)
		{
			/* < 0: no limit (NULL); the core's 0 is no limit, so a limit of 0 is refused here */
			if (quota->limits[0] == 0 || quota->limits[1] == 0 ||
				quota->limits[2] == 0 || quota->limits[3] == 0)
			{
				mark_pending(s);
				memset(&s->pres, 0, sizeof(s->pres));
				s->pres.status = DLOCK_STATUS_ERROR;
				describe_error(s, quota->limits[0] == 0 || quota->limits[2] == 0 ?
							   DLM_ERR_ROLE_QUOTA : DLM_ERR_OWNER_QUOTA, &s->perr);
				return;
			}
			q.role_max_locks = quota->limits[0] > 0 ? quota->limits[0] : 0;
			q.owner_max_locks = quota->limits[1] > 0 ? quota->limits[1] : 0;
			q.role_max_bytes = quota->limits[2] > 0 ? quota->limits[2] : 0;
			q.owner_max_bytes = quota->limits[3] > 0 ? quota->limits[3] : 0;
		}
	}
	(void) dlm_request(picture, &q, now);
}

static bool
batch_changed(void)
{
	return dlm_touched_holders(picture) != NULL ||
		dlm_touched_waiters(picture) != NULL ||
		dlm_counter_dirty(picture, NULL);
}

static bool
answers_pending(void)
{
	for (int i = 0; i < npending; i++)
		if (slots[pending_list[i]].pending)
			return true;
	return pending_overflow;
}

/* Hand the slots' answers to their callers (mu held). */
static void
publish_locked(void)
{
	int			n = pending_overflow ? NSLOTS : npending;

	for (int i = 0; i < n; i++)
	{
		Slot	   *s = &slots[pending_overflow ? i : pending_list[i]];

		if (!s->pending)
			continue;
		s->pending = false;
		if (s->state != SLOT_ACCEPTED)
			continue;
		s->res = s->pres;
		s->err = s->perr;
		s->state = SLOT_DONE;
		pthread_cond_signal(&s->cond.c);
	}
	npending = 0;
	pending_overflow = false;
}

static void
answer_error_locked(Slot *s, int code, const char *msg)
{
	memset(&s->res, 0, sizeof(s->res));
	s->res.status = DLOCK_STATUS_ERROR;
	dlock_set_err(&s->err, code, "%s: %s", s->inspect_fn ? "dlock" : s->call.fn, msg);
	s->pending = false;
	s->state = SLOT_DONE;
	pthread_cond_signal(&s->cond.c);
}

/* When the loop must look again at the latest, µs from now. */
static long long
sleep_us(DLockTime now)
{
	long long	us = 1000000;
	DLockTime	t;

	t = dlm_next_expiry(picture);
	if (t != 0 && t - now < us)
		us = t - now;
	t = dlm_next_queue_row(picture);
	if (t != 0 && t - now < us)
		us = t - now;
	if (deferred > 0 && deferred_since + DEFER_MS * 1000 - now < us)
		us = deferred_since + DEFER_MS * 1000 - now;
	t = next_session_check - mono_us();
	if (t < us)
		us = t;
	return us < 0 ? 0 : us;
}

static bool
work_due(DLockTime now)
{
	DLockTime	lease, row;

	if (picture == NULL)
		return false;
	lease = dlm_next_expiry(picture);
	row = dlm_next_queue_row(picture);
	return (lease != 0 && lease <= now) || (row != 0 && row <= now) ||
		(deferred > 0 && now - deferred_since >= DEFER_MS * 1000);
}

/*
 * The picture is gone (a batch that could not be written, a reload): every
 * call still waiting is submitted again in its old order, to be decided on
 * the new picture - or, when 'fail', answered with msg.  A call decided in
 * the batch that was not written (pending) is answered with msg: part of
 * the batch may be in the tables, and deciding it again could do it twice.
 * Inspections are answered with msg.  (mu held)
 */
static void
resubmit_locked(bool fail, const char *msg)
{
	for (int i = 0; i < NSLOTS; i++)
	{
		Slot	   *s = &slots[i];
		bool		decided = s->pending;

		s->pending = false;
		if (s->state != SLOT_ACCEPTED)
			continue;
		if (fail || decided || s->inspect_fn)
			answer_error_locked(s, DLOCK_ER_UNKNOWN, msg);
		else
		{
			/* submitted again, in their old order */
			s->state = SLOT_SUBMITTED;
		}
	}
	npending = 0;				/* every pending flag is cleared above */
	pending_overflow = false;
	{
		/* rebuild the submit queue in submission order */
		Slot	   *order[NSLOTS];
		int			n = 0;

		for (Slot *s = submit_head; s; s = s->next)
			s->state = SLOT_ACCEPTED;	/* re-marked below */
		/* requests only: a queued inspection stays in its own queue */
		for (int i = 0; i < NSLOTS; i++)
			if ((slots[i].state == SLOT_SUBMITTED || slots[i].state == SLOT_ACCEPTED) &&
				!slots[i].inspect_fn)
				order[n++] = &slots[i];
		for (int a = 1; a < n; a++)
			for (int b = a; b > 0 && order[b - 1]->seq > order[b]->seq; b--)
			{
				Slot	   *t = order[b];

				order[b] = order[b - 1];
				order[b - 1] = t;
			}
		submit_head = submit_tail = NULL;
		for (int i = 0; i < n; i++)
		{
			order[i]->state = SLOT_SUBMITTED;
			order[i]->next = NULL;
			if (submit_tail)
				submit_tail->next = order[i];
			else
				submit_head = order[i];
			submit_tail = order[i];
			if (order[i]->withdraw && !order[i]->withdraw_listed)
			{
				order[i]->withdraw_listed = true;
				order[i]->wnext = withdraw_head;
				withdraw_head = order[i];
			}
		}
	}
}

/* A pause of the manager thread between tries. */
static void
pause_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

/*
 * Ask the store something on a fresh connection, again and again with
 * growing pauses for up to LOAD_WAIT_US: ask returns >= 0 for an answer,
 * < 0 to try again.  The answer, or -1 with err (logged as 'what').
 */
static int
store_retry(int (*ask) (DlockErr *err), const char *what, DlockErr *err)
{
	DLockTime	until = mono_us() + LOAD_WAIT_US;
	long		pause = RETRY_MIN_MS;

	for (;;)
	{
		DlockErr	e;
		int			r = -1;

		store_close();
		if (store_open(&e) == 0)
			r = ask(&e);
		if (r >= 0)
			return r;
		if (mono_us() >= until || stopping)
		{
			fprintf(stderr, "dlock: lock manager cannot %s: %s\n", what, e.msg);
			*err = e;
			return -1;
		}
		pause_ms(pause);
		if (pause < 500)
			pause *= 2;
	}
}

/*
 * After a batch whose connection was lost at its commit: whether its
 * durable part was applied (1) or not (0); -1 if the store could not be
 * asked.  The connection store_retry opened stays open.
 */
static int
batch_outcome(DlockErr *err)
{
	return store_retry(store_batch_applied, "tell whether a batch was applied", err);
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
static int
semisync_confirm(unsigned long no_tx, DlockErr *err)
{
	DLockTime	began = 0;
	long		pause = SYNC_PAUSE_MIN_MS;
	bool		need = mgr_semisync_enabled() && *ss_no_tx != no_tx;

	while (need && mgr_semisync_enabled())
	{
		unsigned long before = *ss_no_tx;

		if (began == 0)
		{
			began = mono_us();
			fprintf(stderr, "dlock: lock manager waits for the semi-synchronous "
					"replica to acknowledge a batch (a commit went without its "
					"acknowledgement); no answer goes out before\n");
		}
		if (stopping)
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
		else if (*ss_no_tx == before)
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

/*
 * Write the batch decided on the picture, again on a new connection after
 * a failure (a KILL of the store connection, a restart of InnoDB's
 * recovery), for up to LOAD_WAIT_US.  Writing again is safe: phases 1 and
 * 3 are deletes and upserts by key, and the durable phase 2 is written
 * again only when it surely did not commit - so a batch's decisions are
 * never taken twice (deciding its calls again on a picture rebuilt from
 * half-written tables answered a release "not held" and granted a lock a
 * second time to its holder).  0, or -1 with err when the store keeps
 * failing: part of the batch may be in the tables.
 */
static int
batch_write(DlockErr *err)
{
	DLockTime	until = mono_us() + LOAD_WAIT_US;
	long		pause = RETRY_MIN_MS;
	bool		durable_in = false;
	int			tries = 0;
	unsigned long no_tx = mgr_semisync_enabled() ? *ss_no_tx : 0;

	/* semi-sync turned on or off since the connection was made: a new one (store_open) */
	if (store_conn_id() != 0 && store_patient() != mgr_semisync_enabled())
		store_close();
	for (;;)
	{
		int			rc;

		if (store_conn_id() == 0 && store_open(err) != 0)
			rc = -1;
		else if (durable_in)
			rc = store_finish_batch(err) == 0 ? 0 : -1;
		else
			rc = store_write_batch(picture, err);
		if (rc == 0)
		{
			if (tries > 0)
				fprintf(stderr, "dlock: lock manager wrote a batch after %d failed "
						"tries\n", tries);
			return semisync_confirm(no_tx, err);
		}
		if (rc == -2)
		{
			/* the commit's answer was lost: applied or not? */
			int			applied = batch_outcome(err);

			if (applied < 0)
				return -1;
			durable_in = applied == 1;
			tries++;
			continue;
		}
		if (rc == -3)
			durable_in = true;
		/* read_only now (a demotion): no use writing again */
		if (store_last_errno() == DLOCK_ER_READ_ONLY)
		{
			store_rollback();
			return -1;
		}
		if (tries++ == 0)
			fprintf(stderr, "dlock: lock manager writes a batch again: %s\n", err->msg);
		store_rollback();
		store_close();
		if (mono_us() >= until || stopping)
			return -1;
		pause_ms(pause);
		if (pause < 500)
			pause *= 2;
	}
}

/*
 * This server may not serve (store_role says why): every call is answered
 * with that at once, and the server is asked again at the next call and
 * every ROLE_RECHECK_MS - a promotion takes effect without a restart.  The
 * store connection stays open for that.  Becoming a replica (or a Galera
 * node) ends the sessions' locks, as a restart does: a new run makes every
 * session row of before belong to no session of this run, and the load
 * after a promotion drops them and gives the leases the restart grace
 * (their holders could not renew them during the failover).
 */
static void
refuse(const DlockErr *why, Slot *fresh, Slot *inspects)
{
	if (!refusing || strcmp(refusal, why->msg) != 0)
		fprintf(stderr, "dlock: lock manager does not serve: %s\n", why->msg);
	snprintf(refusal, sizeof(refusal), "%s", why->msg);
	if (!refusing)
	{
		refusing = true;
		first_load = true;
		(void) new_run_base();
	}
	last_load_rc = -3;
	failures = 1;				/* the collect loop waits for retry_at */
	retry_at = mono_us() + (DLockTime) ROLE_RECHECK_MS * 1000;
	pthread_mutex_lock(&mu.m);
	snprintf(not_ready, sizeof(not_ready), "%s", why->msg);
	nended = 0;					/* no session of this run holds anything here */
	for (Slot *s = fresh, *nx; s; s = nx)
	{
		nx = s->next;
		answer_error_locked(s, why->code, why->msg);
	}
	for (Slot *s = inspects; s; s = s->next)
		answer_error_locked(s, why->code, why->msg);
	pthread_mutex_unlock(&mu.m);
}

static void *
manager_main(void *arg)
{
	DlockErr	err;

	(void) arg;
	for (;;)
	{
		Slot	   *fresh = NULL, *fresh_tail = NULL;
		Slot	   *withdrawn, *inspects;
		unsigned long long *gone = NULL;
		size_t		ngone = 0;
		DLockTime	now;
		int			expired;
		int			rows_due;
		bool		failed = false;
		bool		wrote = false;
		DLockTime	began;
		DLockTime	write_began;
		int64_t		write_us = 0;

		/* collect */
		pthread_mutex_lock(&mu.m);
		for (;;)
		{
			struct timespec ts;

			if (stopping)
				break;
			now = now_us();
			if (picture == NULL)
			{
				/* not loaded: load at once, or after the pause of a failure */
				if (failures == 0 || mono_us() >= retry_at)
					break;
				/*
				 * not installed: a call may come right after the install;
				 * refused: a call may come right after a promotion
				 */
				if ((last_load_rc == -2 || last_load_rc == -3) &&
					(submit_head || inspect_head))
					break;
				deadline_ts(&ts, retry_at - mono_us());
				pthread_cond_timedwait(&work_cond, &mu.m, &ts);
				continue;
			}
			if (submit_head || withdraw_head || nended > 0 || inspect_head ||
				work_due(now) || sessions_due())
				break;
			deadline_ts(&ts, sleep_us(now));
			pthread_cond_timedwait(&work_cond, &mu.m, &ts);
		}
		if (stopping)
		{
			pthread_mutex_unlock(&mu.m);
			break;
		}
		fresh = submit_head;
		fresh_tail = submit_tail;
		submit_head = submit_tail = NULL;
		for (Slot *s = fresh; s; s = s->next)
		{
			s->state = SLOT_ACCEPTED;
			stats_fresh++;
		}
		withdrawn = withdraw_head;
		withdraw_head = NULL;
		for (Slot *s = withdrawn; s; s = s->wnext)
			s->withdraw_listed = false;
		inspects = inspect_head;
		inspect_head = inspect_tail = NULL;
		for (Slot *s = inspects; s; s = s->next)
			s->state = SLOT_ACCEPTED;
		if (picture && nended > 0)
		{
			gone = malloc(nended * sizeof(*gone));
			if (gone)
			{
				memcpy(gone, ended, nended * sizeof(*gone));
				ngone = nended;
				nended = 0;
			}
		}
		pthread_mutex_unlock(&mu.m);
		(void) fresh_tail;

		if (picture == NULL)
		{
			int			rc = reload(&err);

			if (rc == -3)
			{
				refuse(&err, fresh, inspects);
				continue;
			}
			if (rc != 0)
			{
				DLockTime	mono = mono_us();

				last_load_rc = rc;
				Slot	   *keep = NULL, *keep_tail = NULL;

				failures++;
				{
					long long	ms = (long long) RETRY_MIN_MS << (failures < 8 ? failures : 8);

					retry_at = mono_us() + (ms < RETRY_MAX_MS ? ms : RETRY_MAX_MS) * 1000;
				}
				if (failures <= 5 || failures % 100 == 0)
					fprintf(stderr, "dlock: lock manager cannot load the lock "
							"tables (%d in a row): %s\n", failures, err.msg);
				store_close();
				pthread_mutex_lock(&mu.m);
				snprintf(not_ready, sizeof(not_ready), "%s", err.msg);
				/* while the store may come (a start), calls wait a while */
				for (Slot *s = fresh, *nx; s; s = nx)
				{
					nx = s->next;
					if (rc == -1 && !s->withdraw && mono - s->submitted_at < LOAD_WAIT_US)
					{
						s->state = SLOT_SUBMITTED;
						s->next = NULL;
						if (keep_tail)
							keep_tail->next = s;
						else
							keep = s;
						keep_tail = s;
					}
					else
						answer_error_locked(s, DLOCK_ER_UNKNOWN, not_ready);
				}
				if (keep)
				{
					keep_tail->next = submit_head;
					if (submit_head == NULL)
						submit_tail = keep_tail;
					submit_head = keep;
				}
				for (Slot *s = inspects; s; s = s->next)
					answer_error_locked(s, DLOCK_ER_UNKNOWN, not_ready);
				pthread_mutex_unlock(&mu.m);
				continue;
			}
			failures = 0;
			if (refusing)
			{
				fprintf(stderr, "dlock: lock manager serves: this server is no "
						"longer a replica\n");
				refusing = false;
				refusal[0] = '\0';
			}
			pthread_mutex_lock(&mu.m);
			not_ready[0] = '\0';
			pthread_mutex_unlock(&mu.m);
		}

		/* decide: withdrawals first, then ended sessions, leases, requests */
		now = now_us();
		if (sessions_due() && sessions_check(now) == 0 && fresh == NULL &&
			withdrawn == NULL && inspects == NULL && ngone == 0 && !work_due(now))
			continue;			/* nothing to do: no batch */
		{
			int			ids[NSLOTS];
			int			n = 0;

			for (Slot *s = withdrawn; s; s = s->wnext)
			{
				if (s->state != SLOT_ACCEPTED || s->pending)
					continue;
				/* a request not decided yet never runs */
				bool		is_fresh = false;

				for (Slot *f = fresh; f && !is_fresh; f = f->next)
					is_fresh = f == s;
				if (is_fresh)
				{
					/* a kept place is queued first, then kept (below) */
					if (s->call.keep_place)
					{
						s->keep_after = true;
						continue;
					}
					mark_pending(s);
					memset(&s->pres, 0, sizeof(s->pres));
					s->pres.status = DLOCK_STATUS_CANCELED;
					s->perr.code = 0;
					continue;
				}
				if (dlm_waiter_of(picture, s->index) != NULL)
				{
					ids[n++] = s->index;
					if (s->timeout_at != 0 && now >= s->timeout_at)
						counted.timeouts++;
					else
						counted.cancels++;	/* KILL, max_statement_time, a vanished client */
				}
			}
			if (n > 0)
				dlm_withdraw(picture, ids, n, now);
		}
		for (size_t i = 0; i < ngone; i++)
			dlm_session_end(picture, session_pid(gone[i]), session_start(gone[i]),
							DLM_NOBODY, now);
		free(gone);
		expired = dlm_expire(picture, now, EXPIRE_PER_BATCH);
		for (Slot *s = fresh; s; s = s->next)
			if (!s->pending)
				execute(s, now);
		for (Slot *s = fresh; s; s = s->next)
		{
			/* given up before it was decided, with keep_place: keep its place now */
			if (s->keep_after && !s->pending &&
				dlm_waiter_of(picture, s->index) != NULL)
				dlm_withdraw(picture, &s->index, 1, now);
			s->keep_after = false;
		}
		if (dlm_broken(picture))
		{
			dlock_set_err(&err, DLOCK_ER_UNKNOWN, "out of memory in the lock manager");
			failed = true;
		}
		rows_due = failed ? 0 : dlm_queue_rows_due(picture, now, false);

		/* store */
		if (!failed && batch_changed())
		{
			/* a batch that answers nobody may ride on the next commit */
			if (expired == 0 && rows_due == 0 && inspects == NULL &&
				deferred < MAX_DEFERRED && !answers_pending() &&
				(deferred == 0 || now - deferred_since < DEFER_MS * 1000))
			{
				if (deferred++ == 0)
					deferred_since = now;
				continue;
			}
			(void) dlm_queue_rows_due(picture, now, true);
			write_began = mono_us();
			if (batch_write(&err) != 0)
				failed = true;
			wrote = true;
			write_us = mono_us() - write_began;
		}
		if (failed)
		{
			/*
			 * Rebuild the picture from the tables; the calls this batch
			 * decided get the error, those still waiting are decided again -
			 * unless this keeps failing.
			 */
			batch_failures++;
			if (batch_failures <= 5 || batch_failures % 100 == 0)
				fprintf(stderr, "dlock: lock manager batch failed (%d in a row): %s\n",
						batch_failures, err.msg);
			store_rollback();
			store_close();
			picture_drop();
			deferred = 0;
			pthread_mutex_lock(&mu.m);
			resubmit_locked(batch_failures >= MAX_BATCH_FAILURES, err.msg);
			pthread_mutex_unlock(&mu.m);
			if (batch_failures >= MAX_BATCH_FAILURES)
				batch_failures = 0;
			pause_ms(RETRY_MIN_MS);
			continue;
		}
		began = deferred > 0 ? deferred_since : now;	/* hand-offs wait from here */
		deferred = 0;
		batch_failures = 0;
		dlm_settle(picture);

		/* publish, and look at the picture for the inspections */
		for (Slot *s = inspects; s; s = s->next)
			s->inspect_fn(picture, s->inspect_arg);
		pthread_mutex_lock(&mu.m);
		publish_locked();
		dlm_counters_batch(&counted, picture, stats_fresh, wrote, write_us, now_us() - began);
		stats_fresh = 0;
		stats_now = counted;
		if (stats_since == 0)
			stats_since = now;
		dlm_sizes(picture, &stats_holders, &stats_waiting, &stats_kept);
		for (Slot *s = inspects; s; s = s->next)
		{
			memset(&s->res, 0, sizeof(s->res));
			s->err.code = 0;
			s->state = SLOT_DONE;
			pthread_cond_signal(&s->cond.c);
		}
		if (reload_requested)
		{
			/* the tables were replaced (a re-install, a restore): read them again */
			reload_requested = false;
			picture_drop();
			store_close();
			resubmit_locked(false, "");
		}
		pthread_mutex_unlock(&mu.m);
	}
	store_close();
	picture_drop();
	return NULL;
}

/* ------------------------------------------------------------------------
 * Start and stop (the plugin's init and deinit)
 * ------------------------------------------------------------------------ */
int
mgr_start(DlockErr *err)
{
	pthread_mutex_lock(&mu.m);
	if (thread_started)
	{
		pthread_mutex_unlock(&mu.m);
		return 0;
	}
	pthread_condattr_init(&cond_attr);
	pthread_condattr_setclock(&cond_attr, CLOCK_MONOTONIC);
	pthread_cond_init(&work_cond, &cond_attr);
	/* my_bool and ulong in MariaDB 10.11's semisync_master.cc */
	ss_enabled = dlsym(RTLD_DEFAULT, "rpl_semi_sync_master_enabled");
	ss_no_tx = dlsym(RTLD_DEFAULT, "rpl_semi_sync_master_no_transactions");
	if (ss_enabled == NULL || ss_no_tx == NULL)
		fprintf(stderr, "dlock: this server does not export its semi-synchronous "
				"replication state: answers on a semi-synchronous primary are not "
				"held back until the replica acknowledged them\n");
	slots = calloc(NSLOTS, sizeof(Slot));
	if (slots == NULL || new_run_base() != 0)
	{
		free(slots);
		slots = NULL;
		pthread_mutex_unlock(&mu.m);
		dlock_set_err(err, DLOCK_ER_UNKNOWN, "dlock: cannot set up the lock manager");
		return -1;
	}
	for (int i = NSLOTS - 1; i >= 0; i--)
	{
		slots[i].index = i;
		pthread_cond_init(&slots[i].cond.c, &cond_attr);
		slots[i].next = free_slots;
		free_slots = &slots[i];
	}
	snprintf(not_ready, sizeof(not_ready), "the lock manager is starting");
	stopping = false;
	if (pthread_create(&thread, NULL, manager_main, NULL) != 0)
	{
		pthread_mutex_unlock(&mu.m);
		dlock_set_err(err, DLOCK_ER_UNKNOWN, "dlock: cannot start the lock manager thread");
		return -1;
	}
	/* shown by top -H, perf and the server's threads in a core dump */
	(void) pthread_setname_np(thread, "dlock_manager");
	thread_started = true;
	running = true;
	pthread_mutex_unlock(&mu.m);
	return 0;
}

void
mgr_stop(void)
{
	pthread_mutex_lock(&mu.m);
	if (!thread_started)
	{
		pthread_mutex_unlock(&mu.m);
		return;
	}
	stopping = true;
	running = false;
	pthread_cond_signal(&work_cond);
	pthread_mutex_unlock(&mu.m);
	pthread_join(thread, NULL);
	pthread_mutex_lock(&mu.m);
	thread_started = false;
	/* calls still waiting (none after a clean shutdown) get an error */
	for (int i = 0; i < NSLOTS; i++)
		if (slots[i].state == SLOT_SUBMITTED || slots[i].state == SLOT_ACCEPTED)
			answer_error_locked(&slots[i], DLOCK_ER_UNKNOWN, "the lock manager stopped");
	submit_head = submit_tail = NULL;
	inspect_head = inspect_tail = NULL;
	withdraw_head = NULL;
	pthread_mutex_unlock(&mu.m);
}

int
mgr_check_running(const char *fn, DlockErr *err)
{
	int			ok;

	pthread_mutex_lock(&mu.m);
	ok = running;
	pthread_mutex_unlock(&mu.m);
	if (!ok)
		dlock_set_err(err, DLOCK_ER_UNKNOWN,
				"%s: the dlock plugin is not loaded (INSTALL SONAME 'dlock_udf', "
				"or plugin-load-add = dlock_udf.so in the server's configuration)", fn);
	return ok ? 0 : -1;
}

/* ------------------------------------------------------------------------
 * The callers' side
 * ------------------------------------------------------------------------ */
static Slot *
slot_get(const char *fn, DlockErr *err)
{
	Slot	   *s;

	pthread_mutex_lock(&mu.m);
	if (!running)
	{
		pthread_mutex_unlock(&mu.m);
		mgr_check_running(fn, err);
		return NULL;
	}
	s = free_slots;
	if (s)
	{
		free_slots = s->next;
		s->next = NULL;
		s->state = SLOT_FREE;
		s->withdraw = false;
		s->pending = false;
		s->inspect_fn = NULL;
	}
	pthread_mutex_unlock(&mu.m);
	if (s == NULL)
		dlock_set_err(err, DLOCK_ER_UNKNOWN,
				"%s: more than %d dlock calls at once", fn, NSLOTS);
	return s;
}

static void
slot_put_locked(Slot *s)
{
	/* answered before the manager took its withdrawal: unlist it */
	if (s->withdraw_listed)
	{
		for (Slot **p = &withdraw_head; *p; p = &(*p)->wnext)
			if (*p == s)
			{
				*p = s->wnext;
				break;
			}
		s->withdraw_listed = false;
	}
	s->state = SLOT_FREE;
	s->next = free_slots;
	free_slots = s;
}

/* NUL-terminated copies of the names, owner and value in the slot. */
static int
slot_copy(Slot *s, const DlockCall *call, DlockErr *err)
{
	size_t		need = 0;
	char	   *p;

	for (int i = 0; i < call->nnames; i++)
		need += call->name_lens[i] + 1;
	need += (call->owner ? call->owner_len : 0) + 1;
	need += (call->value ? call->value_len : 0) + 1;
	if (s->buf_cap < need)
	{
		char	   *b = realloc(s->buf, need);

		if (b == NULL)
		{
			dlock_set_err(err, DLOCK_ER_UNKNOWN, "%s: out of memory", call->fn);
			return -1;
		}
		s->buf = b;
		s->buf_cap = need;
	}
	s->call = *call;
	p = s->buf;
	for (int i = 0; i < call->nnames; i++)
	{
		memcpy(p, call->names[i], call->name_lens[i]);
		p[call->name_lens[i]] = '\0';
		s->names_z[i] = p;
		s->call.names[i] = p;
		p += call->name_lens[i] + 1;
	}
	s->owner_z = NULL;
	if (call->owner)
	{
		memcpy(p, call->owner, call->owner_len);
		p[call->owner_len] = '\0';
		s->owner_z = p;
		s->call.owner = p;
		p += call->owner_len + 1;
	}
	s->value_z = NULL;
	if (call->value)
	{
		memcpy(p, call->value, call->value_len);
		p[call->value_len] = '\0';
		s->value_z = p;
		s->call.value = p;
	}
	return 0;
}

/*
 * The statistics since the start or the last reset: counters and sizes
 * (dlock_stat); reset: the counters count from zero again.
 */
void
mgr_stats(DLmCounters *out, int64_t *holders, int64_t *waiting, int64_t *kept,
		  long long *since_us)
{
	int64_t    *o = (int64_t *) out;
	const int64_t *b = (const int64_t *) &stats_base;

	pthread_mutex_lock(&mu.m);
	*out = stats_now;
	*holders = stats_holders;
	*waiting = stats_waiting;
	*kept = stats_kept;
	*since_us = stats_since;
	pthread_mutex_unlock(&mu.m);
	for (size_t i = 0; i < sizeof(DLmCounters) / sizeof(int64_t); i++)
		o[i] -= b[i];
}

void
mgr_stats_reset(void)
{
	pthread_mutex_lock(&mu.m);
	stats_base = stats_now;
	stats_since = now_us();
	pthread_mutex_unlock(&mu.m);
}

static void
submit_locked(Slot *s)
{
	s->seq = next_seq++;
	s->submitted_at = mono_us();
	s->state = SLOT_SUBMITTED;
	s->next = NULL;
	if (submit_tail)
		submit_tail->next = s;
	else
		submit_head = s;
	submit_tail = s;
	pthread_cond_signal(&work_cond);
}

static void
withdraw_locked(Slot *s)
{
	if (s->withdraw)
		return;
	s->withdraw = true;
	if (!s->withdraw_listed)
	{
		s->withdraw_listed = true;
		s->wnext = withdraw_head;
		withdraw_head = s;
	}
	pthread_cond_signal(&work_cond);
}

int
mgr_call(const DlockCaller *who, const DlockCall *call, DlockResult *res,
		 DlockErr *err)
{
	Slot	   *s;
	/* only a call that may wait can be given up (timeout, kill) */
	bool		may_wait = call->op == DLOCK_OP_ACQUIRE ||
		call->op == DLOCK_OP_ACQUIRE_ALL || call->op == DLOCK_OP_CONVERT;
	long long	deadline = 0;
	struct timespec start;
	bool		registered;
	int			rc = 0;

	/* names outside the caller's namespace never reach the lock manager */
	if ((call->op == DLOCK_OP_ACQUIRE || call->op == DLOCK_OP_TRY ||
		 call->op == DLOCK_OP_ACQUIRE_ALL) &&
		mgr_namespace_check(call->fn, who, call->names, call->name_lens,
							call->nnames, err) != 0)
		return -1;
	if ((s = slot_get(call->fn, err)) == NULL)
		return -1;
	if (slot_copy(s, call, err) != 0)
	{
		pthread_mutex_lock(&mu.m);
		slot_put_locked(s);
		pthread_mutex_unlock(&mu.m);
		return -1;
	}
	s->conn_id = who->conn_id;
	snprintf(s->account, sizeof(s->account), "%.*s", (int) who->account_len, who->account);
	s->admin = (who->access & DLOCK_ACCESS_ADMIN) != 0;
	s->timeout_at = 0;
	clock_gettime(CLOCK_MONOTONIC, &start);
	if (call->timeout_us >= 0)
	{
		deadline = (long long) start.tv_sec * 1000000 + start.tv_nsec / 1000 +
			call->timeout_us;
		s->timeout_at = now_us() + call->timeout_us;
	}

	pthread_mutex_lock(&mu.m);
	submit_locked(s);
	registered = may_wait && who->wait_enter != NULL && who->wait_exit != NULL;
	if (registered)
		who->wait_enter(&s->cond, &mu);
	while (s->state != SLOT_DONE)
	{
		struct timespec ts;
		struct timespec nowts;
		long long	now_mono;
		long long	wait_us = CLIENT_POLL_MS * 1000;

		if (!may_wait)
		{
			pthread_cond_wait(&s->cond.c, &mu.m);
			continue;
		}
		if (!s->withdraw)
		{
			clock_gettime(CLOCK_MONOTONIC, &nowts);
			now_mono = (long long) nowts.tv_sec * 1000000 + nowts.tv_nsec / 1000;
			if (call->timeout_us >= 0 && now_mono >= deadline)
				withdraw_locked(s);
			else
			{
				pthread_mutex_unlock(&mu.m);
				if (who->killed(who->killed_arg))
				{
					pthread_mutex_lock(&mu.m);
					withdraw_locked(s);
					continue;
				}
				pthread_mutex_lock(&mu.m);
				if (s->state == SLOT_DONE)
					break;
				if (call->timeout_us >= 0 && deadline - now_mono < wait_us)
					wait_us = deadline - now_mono;
			}
		}
		deadline_ts(&ts, wait_us > 0 ? wait_us : 1);
		pthread_cond_timedwait(&s->cond.c, &mu.m, &ts);
	}
	if (registered)
	{
		who->wait_exit();		/* unlocks mu, as the server's exit_cond does */
		pthread_mutex_lock(&mu.m);
	}
	*res = s->res;
	if (s->res.status == DLOCK_STATUS_ERROR ||
		s->res.status == DLOCK_STATUS_DEADLOCK ||
		s->res.status == DLOCK_STATUS_MODE_HELD ||
		s->res.status == DLOCK_STATUS_WITHDRAWN ||
		s->res.status == DLOCK_STATUS_NOT_READY)
	{
		*err = s->err;
		if (err->code == 0)
			dlock_set_err(err, DLOCK_ER_UNKNOWN, "%s: lock manager failed", call->fn);
		rc = -1;
	}
	slot_put_locked(s);
	pthread_mutex_unlock(&mu.m);
	return rc;
}

int
mgr_inspect(const char *fn_name, MgrInspectFn fn, void *arg, DlockErr *err)
{
	Slot	   *s = slot_get(fn_name, err);
	int			rc = 0;

	if (s == NULL)
		return -1;
	pthread_mutex_lock(&mu.m);
	s->inspect_fn = fn;
	s->inspect_arg = arg;
	s->call.fn = fn_name;
	s->state = SLOT_SUBMITTED;
	s->next = NULL;
	if (inspect_tail)
		inspect_tail->next = s;
	else
		inspect_head = s;
	inspect_tail = s;
	pthread_cond_signal(&work_cond);
	while (s->state != SLOT_DONE)
		pthread_cond_wait(&s->cond.c, &mu.m);
	if (s->res.status == DLOCK_STATUS_ERROR)
	{
		*err = s->err;
		rc = -1;
	}
	s->inspect_fn = NULL;
	slot_put_locked(s);
	pthread_mutex_unlock(&mu.m);
	return rc;
}

void
mgr_session_end(unsigned long long conn_id)
{
	pthread_mutex_lock(&mu.m);
	if (!running)
	{
		pthread_mutex_unlock(&mu.m);
		return;
	}
	if (nended == ended_cap)
	{
		size_t		cap = ended_cap ? ended_cap * 2 : 64;
		unsigned long long *n = realloc(ended, cap * sizeof(*n));

		if (n == NULL)
		{
			/* the next load drops sessions that are gone anyway */
			pthread_mutex_unlock(&mu.m);
			return;
		}
		ended = n;
		ended_cap = cap;
	}
	ended[nended++] = conn_id;
	pthread_cond_signal(&work_cond);
	pthread_mutex_unlock(&mu.m);
}

/* ------------------------------------------------------------------------
 * Grants and quotas: written by the manager thread (an inspection), so
 * that the cache changes between batches.
 * ------------------------------------------------------------------------ */
typedef struct AdminOp
{
	const char *grantee;
	size_t		glen;
	const char *prefix;
	size_t		plen;
	int			revoke;
	const long long *limits;
	int			changed;
	DlockErr	err;
	int			rc;
} AdminOp;

static void
reload_caches(void)
{
	DlockErr	e;

	cache_clear();
	if (store_load_grants(cache_grant, cache_quota, &e) != 0)
		fprintf(stderr, "dlock: cannot read dlock.grants and dlock.quotas: %s\n", e.msg);
	else
		cache_publish();
}

static void
do_grant(const DLockManager *m, void *arg)
{
	AdminOp    *op = arg;

	(void) m;
	op->rc = store_grant(op->grantee, op->glen, op->prefix, op->plen,
						 op->revoke, &op->changed, &op->err);
	reload_caches();
}

static void
do_quota(const DLockManager *m, void *arg)
{
	AdminOp    *op = arg;

	(void) m;
	op->rc = store_set_quota(op->grantee, op->glen, op->limits, &op->err);
	reload_caches();
}

static void
do_reload(const DLockManager *m, void *arg)
{
	(void) m;
	(void) arg;
	reload_requested = true;
}

int
mgr_reload(const char *fn, DlockErr *err)
{
	return mgr_inspect(fn, do_reload, NULL, err);
}

/* Run a grant or quota change in the manager thread; 0, or -1 with err. */
static int
admin_run(const char *fn, MgrInspectFn do_op, AdminOp *op, DlockErr *err)
{
	if (mgr_inspect(fn, do_op, op, err) != 0)
		return -1;
	if (op->rc != 0)
	{
		dlock_set_err(err, op->err.code ? op->err.code : DLOCK_ER_UNKNOWN, "%s: %s", fn, op->err.msg);
		return -1;
	}
	return 0;
}

int
mgr_grant(const char *fn, const char *grantee, size_t glen, const char *prefix,
		  size_t plen, int revoke, int *changed, DlockErr *err)
{
	AdminOp		op;

	memset(&op, 0, sizeof(op));
	op.grantee = grantee;
	op.glen = glen;
	op.prefix = prefix;
	op.plen = plen;
	op.revoke = revoke;
	if (admin_run(fn, do_grant, &op, err) != 0)
		return -1;
	*changed = op.changed;
	return 0;
}

int
mgr_set_quota(const char *fn, const char *grantee, size_t glen,
			  const long long limits[4], DlockErr *err)
{
	AdminOp		op;

	memset(&op, 0, sizeof(op));
	op.grantee = grantee;
	op.glen = glen;
	op.limits = limits;
	return admin_run(fn, do_quota, &op, err);
}
