/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * dlock_udf_args.c
 *		The SQL functions' arguments and results: each argument checked at
 *		row time (NULL, range, the name and owner key rules of
 *		core/dlock_core.h, a JSON array of names) and stored in the call,
 *		or the error raised that names the function and the argument; a
 *		string result kept in the per-call state.
 *
 * Interface: see dlock_udf.h (dlock_udf_args.c).
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dlock_core.h"
#include "dlock_udf.h"

#define DLOCK_STR(x) #x
#define DLOCK_XSTR(x) DLOCK_STR(x)

static void put_utf8(char *out, size_t *o, unsigned long cp);
static int	hex4(const char *p, unsigned long *v);

/* The start of every function: a cleared call of fn, no result yet. */
void
call_init(DlockCall *call, const char *fn, DLockOp op, char *is_null, char *error)
{
	memset(call, 0, sizeof(*call));
	call->fn = fn;
	call->op = op;
	call->timeout_us = -1;
	*is_null = 0;
	*error = 0;
}

/* Validate the name argument; 0 or raises the error. */
int
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
int
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
int
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
int
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
void
default_ttl(DlockCall *req)
{
	/* the setting dlock_default_ttl, within dlock_max_ttl (core's rule) */
	if (req->owner && req->ttl_us < 0)
		req->ttl_us = dls_default_ttl((int64_t) dlock_default_ttl_seconds * 1000000,
									  max_ttl_us());
	if (req->ttl_us < 0)
		req->ttl_us = 0;		/* the core's "no lease" */
}

/* The longest lease a call may ask for (the setting dlock_max_ttl). */
long long
max_ttl_us(void)
{
	return (long long) dlock_max_ttl_seconds * 1000000LL;
}

/* Optional 0/1 argument; absent or NULL: 0. */
int
get_flag(UDF_ARGS *args, unsigned int i)
{
	return i < args->arg_count && args->args[i] != NULL &&
		*(double *) args->args[i] != 0;
}

/* Whole number argument in [lo, hi]; 0 or raises. */
int
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
int
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
int
parse_json_names(const char *s, size_t len, char *out, DLsName *names, int max)
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
		names[n].p = out + start;
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

/* A string result in the per-call state. */
char *
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

/* UTC text of a Unix time in µs, as DATETIME(6) shows it. */
size_t
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
