/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * dlock_access.c
 *		Who may take which names, and how many: the accounts as the lock
 *		manager's roles, the namespace grants (dlock.grants) that bind an
 *		account and the roles granted to it, the quotas per account
 *		(dlock.quotas), and the administrators' changes to both.
 *
 * Interface: see dlock_access.h and dlock_mgr.h.
 *
 * Locking: the account table and the quotas are the manager thread's
 * alone.  The grants are read by the callers (mgr_namespace_check, in
 * their own threads) under cache.grants_lock; the manager loads a new list
 * aside and swaps it in.  A grant or quota change is written by the
 * manager thread (as an inspection), so the caches change between batches.
 */
#define _GNU_SOURCE
#include "dlock_access.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlock_errors.h"
#include "dlock_mgr.h"
#include "dlock_service.h"
#include "dlock_store.h"

/* ------------------------------------------------------------------------
 * Accounts: interned strings, the manager's roles
 * ------------------------------------------------------------------------ */
static struct
{
	char	  **names;			/* index id - 1 */
	uint32_t	n,
				cap;
}			accounts;

uint32_t
accounts_intern(const char *account, size_t len)
{
	/* few accounts use dlock: a linear look is cheaper than a hash */
	for (uint32_t i = 0; i < accounts.n; i++)
		if (strlen(accounts.names[i]) == len &&
			memcmp(accounts.names[i], account, len) == 0)
			return i + 1;
	if (accounts.n == accounts.cap)
	{
		uint32_t	cap = accounts.cap ? accounts.cap * 2 : 16;
		char	  **n = realloc(accounts.names, cap * sizeof(char *));

		if (n == NULL)
			return 0;
		accounts.names = n;
		accounts.cap = cap;
	}
	accounts.names[accounts.n] = strndup(account, len);
	if (accounts.names[accounts.n] == NULL)
		return 0;
	return ++accounts.n;
}

const char *
accounts_name(uint32_t id)
{
	return (id >= 1 && id <= accounts.n) ? accounts.names[id - 1] : "";
}

/* ------------------------------------------------------------------------
 * Namespaces and quotas (the manager's caches of dlock.grants, dlock.quotas)
 * ------------------------------------------------------------------------ */
typedef struct Grant
{
	char	   *grantee;		/* an account (user@host) or a role */
	char	   *prefix;
	size_t		plen;
	bool		is_role;
} Grant;

typedef struct GrantList
{
	Grant	   *g;
	size_t		n;
	size_t		cap;
} GrantList;

static struct
{
	pthread_rwlock_t grants_lock;
	GrantList	grants;			/* grants_lock; sorted by grantee */
	size_t		grants_any;		/* grants.n, read without the lock (atomic) */
	GrantList	loading;		/* the manager's: the next list */
	Quota	   *quotas;			/* the manager's */
	size_t		nquotas,
				quotas_cap;
}			cache = {.grants_lock = PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP};

static bool grant_applies(const DlockCaller *who, size_t i, signed char *memo);
static void cache_clear(void);
static void cache_grant(const char *g, size_t glen, const char *p, size_t plen);
static void cache_publish(void);
static void cache_quota(const char *a, size_t alen, const long long limits[4]);
static void grants_free(GrantList *l);

bool
mgr_capability_role(const char *name, size_t len)
{
	static const char *const roles[] = {"dlock_user", "dlock_monitor", "dlock_admin"};

	for (size_t i = 0; i < sizeof(roles) / sizeof(roles[0]); i++)
		if (len == strlen(roles[i]) && memcmp(name, roles[i], len) == 0)
			return true;
	return false;
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
		__atomic_load_n(&cache.grants_any, __ATOMIC_ACQUIRE) == 0)
		return 0;
	pthread_rwlock_rdlock(&cache.grants_lock);
	if (cache.grants.n == 0)
	{
		pthread_rwlock_unlock(&cache.grants_lock);
		return 0;
	}
	if (cache.grants.n > sizeof(memo_small) && (memo = malloc(cache.grants.n)) == NULL)
	{
		pthread_rwlock_unlock(&cache.grants_lock);
		dlock_set_err(err, DLOCK_ER_UNKNOWN, "%s: out of memory", fn);
		return -1;
	}
	memset(memo, -1, cache.grants.n);
	for (int n = 0; n < nnames && refused < 0; n++)
	{
		bool		covered = false;

		for (size_t i = 0; i < cache.grants.n && !covered; i++)
		{
			const Grant *g = &cache.grants.g[i];

			covered = dls_prefix_covers(g->prefix, g->plen, names[n], lens[n]) &&
				grant_applies(who, i, memo);
		}
		if (!covered)
			refused = n;
	}
	/* a name no binding grant covers: refused if any grant binds the caller */
	for (size_t i = 0; refused >= 0 && i < cache.grants.n && !bound; i++)
		bound = !cache.grants.g[i].is_role && grant_applies(who, i, memo);
	for (size_t i = 0; refused >= 0 && i < cache.grants.n && !bound; i++)
		bound = cache.grants.g[i].is_role && grant_applies(who, i, memo);
	pthread_rwlock_unlock(&cache.grants_lock);
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

/*
 * Whether grants.g[i] binds the caller: a grant to its account, or to a
 * role granted to it (asked of the server once per role and call: memo,
 * -1 not asked yet, for the grantee's whole run in the sorted list).
 * (grants_lock held)
 */
static bool
grant_applies(const DlockCaller *who, size_t i, signed char *memo)
{
	const Grant *g = &cache.grants.g[i];

	if (!g->is_role)
		return strcmp(g->grantee, who->account) == 0;
	if (memo[i] < 0)
	{
		signed char yes = who->role_granted != NULL &&
			who->role_granted(who, g->grantee);
		size_t		a = i,
					b = i;

		while (a > 0 && strcmp(cache.grants.g[a - 1].grantee, g->grantee) == 0)
			a--;
		while (b + 1 < cache.grants.n && strcmp(cache.grants.g[b + 1].grantee, g->grantee) == 0)
			b++;
		memset(memo + a, yes, b - a + 1);
	}
	return memo[i] > 0;
}

const Quota *
quota_of(const char *account)
{
	for (size_t i = 0; i < cache.nquotas; i++)
		if (strcmp(cache.quotas[i].account, account) == 0)
			return &cache.quotas[i];
	return NULL;
}

/* Read dlock.grants and dlock.quotas into the caches. */
int
caches_load(DlockErr *err)
{
	cache_clear();
	if (store_load_grants(cache_grant, cache_quota, err) != 0)
		return -1;
	cache_publish();
	return 0;
}

/* Start loading: the next grants and the quotas from nothing. */
static void
cache_clear(void)
{
	grants_free(&cache.loading);
	for (size_t i = 0; i < cache.nquotas; i++)
		free(cache.quotas[i].account);
	cache.nquotas = 0;
}

/* A row of dlock.grants into the next list (a capability role binds nobody). */
static void
cache_grant(const char *g, size_t glen, const char *p, size_t plen)
{
	Grant	   *e;

	if (mgr_capability_role(g, glen))
		return;
	if (cache.loading.n == cache.loading.cap)
	{
		size_t		cap = cache.loading.cap ? cache.loading.cap * 2 : 16;
		Grant	   *n = realloc(cache.loading.g, cap * sizeof(Grant));

		if (n == NULL)
			return;
		cache.loading.g = n;
		cache.loading.cap = cap;
	}
	e = &cache.loading.g[cache.loading.n];
	e->grantee = strndup(g, glen);
	e->prefix = strndup(p, plen);
	e->plen = plen;
	/* an account is user@host, as CURRENT_USER() shows it; a role has no @ */
	e->is_role = memchr(g, '@', glen) == NULL;
	if (e->grantee && e->prefix)
		cache.loading.n++;
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

	qsort(cache.loading.g, cache.loading.n, sizeof(Grant), cmp_grants);
	pthread_rwlock_wrlock(&cache.grants_lock);
	old = cache.grants;
	cache.grants = cache.loading;
	__atomic_store_n(&cache.grants_any, cache.grants.n, __ATOMIC_RELEASE);
	pthread_rwlock_unlock(&cache.grants_lock);
	cache.loading = old;
	grants_free(&cache.loading);
}

static void
cache_quota(const char *a, size_t alen, const long long limits[4])
{
	if (cache.nquotas == cache.quotas_cap)
	{
		size_t		cap = cache.quotas_cap ? cache.quotas_cap * 2 : 16;
		Quota	   *n = realloc(cache.quotas, cap * sizeof(Quota));

		if (n == NULL)
			return;
		cache.quotas = n;
		cache.quotas_cap = cap;
	}
	cache.quotas[cache.nquotas].account = strndup(a, alen);
	memcpy(cache.quotas[cache.nquotas].limits, limits, sizeof(cache.quotas[cache.nquotas].limits));
	if (cache.quotas[cache.nquotas].account)
		cache.nquotas++;
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

static int	admin_run(const char *fn, MgrInspectFn do_op, AdminOp *op, DlockErr *err);
static void do_grant(const DLockManager *m, void *arg);
static void do_quota(const DLockManager *m, void *arg);
static void reload_caches(void);

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

/*
 * The caches again, after a change was written; a failure is logged (the
 * grants stay as they were, the quotas are empty until the next load).
 */
static void
reload_caches(void)
{
	DlockErr	e;

	if (caches_load(&e) != 0)
		fprintf(stderr, "dlock: cannot read dlock.grants and dlock.quotas: %s\n", e.msg);
}
