/* SPDX-License-Identifier: PostgreSQL */
/*-------------------------------------------------------------------------
 * dlock_notify.c
 *		The lock manager's notifications (NOTIFY dlock_blocking,
 *		dlock_leader, dlock_revoked) and the key that names a lock in them.
 *
 * Any role that may connect can LISTEN on any channel, so a payload must
 * tell nobody more than dlock.locks would.  It carries no name but the
 * lock's notify key: 32 hex digits of HMAC-SHA256 over the name with a
 * secret drawn at the server's start.  A listener learns the key of a
 * name from dlock_notify_key(name), which answers only for names the
 * caller may lock (its grants); for any other lock a payload is noise.
 *
 * Interface: dlock_notify (the worker, in its batch's transaction),
 * dlock_notify_key (SQL).
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/async.h"
#include "common/hmac.h"
#include "common/sha2.h"
#include "fmgr.h"
#include "utils/builtins.h"

#include "dlock.h"
#include "dlock_compat.h"

PG_FUNCTION_INFO_V1(dlock_notify_key);

#define DLOCK_NOTIFY_KEY_BYTES 16

/* The key of a name, as 32 hex digits and a NUL. */
static void
notify_key(const char *name, size_t len, char *hex)
{
	pg_hmac_ctx *ctx = pg_hmac_create(PG_SHA256);
	uint8		digest[PG_SHA256_DIGEST_LENGTH];

	if (ctx == NULL ||
		pg_hmac_init(ctx, dlock_shared->notify_secret, sizeof(dlock_shared->notify_secret)) < 0 ||
		pg_hmac_update(ctx, (const uint8 *) name, len) < 0 ||
		pg_hmac_final(ctx, digest, sizeof(digest)) < 0)
	{
		pg_hmac_free(ctx);
		elog(ERROR, "could not compute a dlock notify key");
	}
	pg_hmac_free(ctx);
	for (int i = 0; i < DLOCK_NOTIFY_KEY_BYTES; i++)
		snprintf(hex + 2 * i, 3, "%02x", digest[i]);
}

/* NOTIFY channel with the key of the lock's name (delivered at commit). */
void
dlock_notify(const char *channel, const char *name)
{
	char		key[2 * DLOCK_NOTIFY_KEY_BYTES + 1];

	notify_key(name, strlen(name), key);
	Async_Notify(channel, key);
}

/*
 * dlock_notify_key(name)
 *		The payload that names this lock in the lock manager's
 *		notifications; 42501 for a name outside the caller's grants (or
 *		called as a capability role: dlock_check_role).
 */
Datum
dlock_notify_key(PG_FUNCTION_ARGS)
{
	text	   *name;
	char		key[2 * DLOCK_NOTIFY_KEY_BYTES + 1];

	dlock_check_loaded();
	dlock_check_role();
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("lock name must not be NULL")));
	name = PG_GETARG_TEXT_PP(0);
	dlock_check_name_arg(VARDATA_ANY(name), VARSIZE_ANY_EXHDR(name));
	dlock_check_namespace(VARDATA_ANY(name), VARSIZE_ANY_EXHDR(name));
	notify_key(VARDATA_ANY(name), VARSIZE_ANY_EXHDR(name), key);
	PG_RETURN_TEXT_P(cstring_to_text(key));
}
