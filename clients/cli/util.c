/* SPDX-License-Identifier: PostgreSQL */
/*
 * util.c
 *		Small helpers of the dlock command: durations, owner keys, the
 *		monotonic clock, messages.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "dlock.h"

/*
 * parse_duration
 *		"30s", "500ms", "2m", "1h" or plain seconds ("1.5") into seconds.
 *		Negative, empty, non-finite or absurd (over 366 days, the largest
 *		timeout either server takes) values are refused.
 */
bool
parse_duration(const char *s, double *out)
{
	char	   *end;
	double		v;
	double		unit = 1;

	if (s == NULL || *s == '\0' || *s == '-' || *s == '+' ||
		*s == ' ' || *s == '\t')
		return false;
	errno = 0;
	v = strtod(s, &end);
	if (errno != 0 || end == s || !isfinite(v) || v < 0)
		return false;
	if (strcmp(end, "") == 0 || strcmp(end, "s") == 0)
		unit = 1;
	else if (strcmp(end, "ms") == 0)
		unit = 0.001;
	else if (strcmp(end, "m") == 0)
		unit = 60;
	else if (strcmp(end, "h") == 0)
		unit = 3600;
	else
		return false;
	v *= unit;
	if (v > 366.0 * 86400)
		return false;
	*out = v;
	return true;
}

/*
 * new_owner_key
 *		128 random bits as 32 hex digits.  The key is all that guards
 *		release, so it comes from the kernel's generator, never from a seed
 *		anyone could guess.
 */
bool
new_owner_key(char out[33])
{
	unsigned char buf[16];
	size_t		got = 0;

	while (got < sizeof(buf))
	{
		ssize_t		n = getrandom(buf + got, sizeof(buf) - got, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		got += n;
	}
	if (got < sizeof(buf))
	{
		/* a kernel without getrandom(2) */
		int			fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);

		got = 0;
		while (fd >= 0 && got < sizeof(buf))
		{
			ssize_t		n = read(fd, buf + got, sizeof(buf) - got);

			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				break;
			got += n;
		}
		if (fd >= 0)
			close(fd);
		if (got < sizeof(buf))
			return false;
	}
	for (int i = 0; i < 16; i++)
		snprintf(out + 2 * i, 3, "%02x", buf[i]);
	return true;
}

double
now_mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* warnx_ prints "dlock: <message>" on stderr. */
void
warnx_(const char *fmt,...)
{
	char		buf[2048];
	va_list		ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	/* one write, so lines of concurrent invocations do not interleave */
	fprintf(stderr, "dlock: %s\n", buf);
}

/*
 * db_failure
 *		The last error of db and its hint, copied (before another statement
 *		on db can replace them: the first error of a call is the one told).
 */
void
db_failure(Db *db, DbFailure *f)
{
	snprintf(f->err, sizeof(f->err), "%s", db->ops->error(db));
	db->ops->hint(db, f->hint, sizeof(f->hint));
}

/* report_failure prints "dlock: <what>: <error>" and "dlock: hint: ..." */
void
report_failure(const DbFailure *f, const char *fmt,...)
{
	char		what[1024];
	va_list		ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	warnx_("%s: %s", what, f->err);
	if (f->hint[0])
		warnx_("hint: %s", f->hint);
}

/* report_db prints the last error of db (and its hint) for <what> */
void
report_db(Db *db, const char *fmt,...)
{
	char		what[1024];
	DbFailure	f;
	va_list		ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	db_failure(db, &f);
	report_failure(&f, "%s", what);
}
