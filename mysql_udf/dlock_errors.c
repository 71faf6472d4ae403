/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * dlock_errors.c
 *		The wording of the lock manager's answers: the core answers with
 *		codes and data (core/dlock_lm.h: a deadlock's cycle as a list of
 *		steps, an error number), and the messages the caller sees are made
 *		here, in the manager thread, before the batch commits.  Every
 *		message starts with the SQL function's name; a name in a message is
 *		bounded and has its control characters shown as '?'.
 *
 * Interface: see dlock_errors.h.
 */
#define _GNU_SOURCE
#include "dlock_errors.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "dlock_access.h"
#include "dlock_sessions.h"

/* Room for a name in a message: longer ones are cut with "...". */
#define SHOWN_MAX 80

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

/* A name in a message, NUL-terminated (shown_len). */
const char *
shown(const char *s, char *buf, size_t size)
{
	return shown_len(s, strlen(s), buf, size);
}

/*
 * A name of len bytes in a message: bounded, with its control characters
 * shown as '?'; the SQL functions' argument errors and the manager's
 * answers alike.
 */
const char *
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
 * An owner in a cycle's sentence (dls_describe_cycle): a connection, or an
 * owner key and its connection; the cycle's processes are sessions of this
 * run.
 */
static void
cycle_owner(char *buf, size_t size, bool keyed, int32_t pid, void *arg)
{
	(void) arg;
	snprintf(buf, size, keyed ? "an owner key (connection %llu)" : "connection %llu",
			 session_conn_id(pid, session_run_start()));
}

/* A lock's name in a cycle's sentence, as every message shows names. */
static void
cycle_name(char *buf, size_t size, const char *name, void *arg)
{
	(void) arg;
	shown(name, buf, size < SHOWN_MAX ? size : SHOWN_MAX);
}

/* The deadlock cycle in wait order, one sentence per edge (core's wording). */
void
describe_cycle(const Slot *s, const DLmAnswer *a, DlockErr *err)
{
	char		buf[sizeof(err->msg)];
	char		nm[SHOWN_MAX];

	dls_describe_cycle(buf, sizeof(buf), a, cycle_owner, cycle_name, NULL);
	dlock_set_err(err, DLOCK_ER_DEADLOCK,
			"%s: deadlock detected while waiting for lock \"%s\" [40001]: %s",
			s->call.fn, shown(s->names_z[0], nm, sizeof(nm)), buf);
}

/* A core error, worded for the call. */
void
describe_error(const Slot *s, DLmError e, const DLockManager *picture,
			   DlockErr *err)
{
	const char *fn = s->call.fn;
	char		nm[SHOWN_MAX];

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

/* The name is held already in a mode that does not include the one asked for. */
void
describe_mode_held(const Slot *s, const DLmAnswer *a, DlockErr *err)
{
	char		nm[SHOWN_MAX];
	int			i = a->name_index;

	if (i < 0 || i >= s->call.nnames)
		i = 0;
	dlock_set_err(err, DLOCK_ER_UNKNOWN,
			"%s: lock \"%s\" is already held by this %s in mode %s, "
			"which does not include %s; use dlock_convert() [DL003]",
			s->call.fn, shown(s->names_z[i], nm, sizeof(nm)),
			s->call.owner ? "owner" : "session",
			dlock_mode_name(a->count), dlock_mode_name(s->call.mode));
}

/* A waiting request ended by dlock_release_all() of its owner key. */
void
describe_withdrawn(const Slot *s, DlockErr *err)
{
	char		nm[SHOWN_MAX];

	dlock_set_err(err, DLOCK_ER_INTERRUPTED,
			"%s: request for lock \"%s\" was withdrawn: "
			"dlock_release_all() was called for its owner key [DL002]",
			s->call.fn, shown(s->names_z[0], nm, sizeof(nm)));
}

/* A lock an administrator released (dlock_force_release): its holder hears why. */
void
describe_revoked(const Slot *s, const char *reason, DlockErr *err)
{
	char		nm[SHOWN_MAX];
	char		why[sizeof(err->msg)];

	dlock_set_err(err, DLOCK_ER_UNKNOWN,
			"%s: lock \"%s\" was released by an administrator [DL001]; reason: %s",
			s->call.fn, shown(s->names_z[0], nm, sizeof(nm)),
			shown(reason ? reason : "", why, sizeof(why)));
}
