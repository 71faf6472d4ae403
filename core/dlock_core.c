/* SPDX-License-Identifier: PostgreSQL */
/*
 * dlock_core.c
 *		Lock modes and input validation shared by both databases.
 *
 * The compatibility matrix is the standard one of the VMS-style DLMs:
 *
 *		    NL CR CW PR PW EX
 *		NL   y  y  y  y  y  y
 *		CR   y  y  y  y  y  n
 *		CW   y  y  y  n  n  n
 *		PR   y  y  n  y  n  n
 *		PW   y  y  n  n  n  n
 *		EX   y  n  n  n  n  n
 */
#include "dlock_core.h"

#include <strings.h>

#define B(m) DLOCK_MODE_BIT(DLOCK_MODE_##m)

static const DLockModeMask conflicts[DLOCK_NMODES] = {
	[DLOCK_MODE_NL] = 0,
	[DLOCK_MODE_CR] = B(EX),
	[DLOCK_MODE_CW] = B(PR) | B(PW) | B(EX),
	[DLOCK_MODE_PR] = B(CW) | B(PW) | B(EX),
	[DLOCK_MODE_PW] = B(CW) | B(PR) | B(PW) | B(EX),
	[DLOCK_MODE_EX] = B(CR) | B(CW) | B(PR) | B(PW) | B(EX),
};

/* Modes each mode includes: NL < CR < {CW, PR} < PW < EX. */
static const DLockModeMask covers[DLOCK_NMODES] = {
	[DLOCK_MODE_NL] = B(NL),
	[DLOCK_MODE_CR] = B(NL) | B(CR),
	[DLOCK_MODE_CW] = B(NL) | B(CR) | B(CW),
	[DLOCK_MODE_PR] = B(NL) | B(CR) | B(PR),
	[DLOCK_MODE_PW] = B(NL) | B(CR) | B(CW) | B(PR) | B(PW),
	[DLOCK_MODE_EX] = B(NL) | B(CR) | B(CW) | B(PR) | B(PW) | B(EX),
};

/* PR and EX keep the names most users know them by. */
static const char *const mode_names[DLOCK_NMODES] = {
	"NL", "CR", "CW", "shared", "PW", "exclusive"
};

DLockModeMask
dlock_mode_conflicts(int mode)
{
	if (mode < 0 || mode >= DLOCK_NMODES)
		return ~(DLockModeMask) 0;
	return conflicts[mode];
}

bool
dlock_mode_covers(int held, int wanted)
{
	if (held < 0 || held >= DLOCK_NMODES || wanted < 0 || wanted >= DLOCK_NMODES)
		return false;
	return (covers[held] & DLOCK_MODE_BIT(wanted)) != 0;
}

int
dlock_mode_parse(const char *name, size_t len)
{
	static const struct
	{
		const char *name;
		int			mode;
	}			names[] = {
		{"exclusive", DLOCK_MODE_EX},
		{"shared", DLOCK_MODE_PR},
		{"NL", DLOCK_MODE_NL},
		{"CR", DLOCK_MODE_CR},
		{"CW", DLOCK_MODE_CW},
		{"PR", DLOCK_MODE_PR},
		{"PW", DLOCK_MODE_PW},
		{"EX", DLOCK_MODE_EX},
	};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
	{
		size_t		n = 0;

		while (names[i].name[n] != '\0')
			n++;
		if (n == len && strncasecmp(name, names[i].name, len) == 0)
			return names[i].mode;
	}
	return DLOCK_MODE_INVALID;
}

const char *
dlock_mode_name(int mode)
{
	if (mode < 0 || mode >= DLOCK_NMODES)
		return "invalid";
	return mode_names[mode];
}

DLockCheck
dlock_check_name(const char *name, size_t len, size_t max_len)
{
	if (len == 0)
		return DLOCK_CHECK_EMPTY;
	if (len > max_len)
		return DLOCK_CHECK_TOO_LONG;
	if (dlock_name_is_path(name, len))
	{
		int			depth = 1;

		if (name[len - 1] == '/')
			return len == 1 ? DLOCK_CHECK_EMPTY_SEGMENT : DLOCK_CHECK_TRAILING_SLASH;
		for (size_t i = 1; i < len; i++)
			if (name[i] == '/')
			{
				if (name[i - 1] == '/')
					return DLOCK_CHECK_EMPTY_SEGMENT;
				depth++;
			}
		if (depth > DLOCK_MAX_PATH_DEPTH)
			return DLOCK_CHECK_TOO_DEEP;
	}
	return DLOCK_CHECK_OK;
}

bool
dlock_name_is_path(const char *name, size_t len)
{
	return len > 0 && name[0] == '/';
}

int
dlock_intention_mode(int mode)
{
	switch (mode)
	{
		case DLOCK_MODE_CR:
		case DLOCK_MODE_PR:
			return DLOCK_MODE_CR;
		case DLOCK_MODE_CW:
		case DLOCK_MODE_PW:
		case DLOCK_MODE_EX:
			return DLOCK_MODE_CW;
		default:
			return DLOCK_MODE_INVALID;
	}
}

int
dlock_path_ancestor_lengths(const char *name, size_t len, size_t *out, int max_out)
{
	int			n = 0;

	if (!dlock_name_is_path(name, len))
		return 0;
	for (size_t i = 1; i < len; i++)
		if (name[i] == '/')
		{
			if (n < max_out)
				out[n] = i;
			n++;
		}
	return n;
}

/* Owner keys are printable: they show up in views and logs. */
DLockCheck
dlock_check_owner(const char *owner, size_t len)
{
	if (len == 0)
		return DLOCK_CHECK_EMPTY;
	if (len > DLOCK_MAX_OWNER_LEN)
		return DLOCK_CHECK_TOO_LONG;
	for (size_t i = 0; i < len; i++)
	{
		unsigned char c = (unsigned char) owner[i];

		/* C0, DEL, and C1 as UTF-8 encodes it (U+0080..U+009F: C2 80..9F) */
		if (c < 0x20 || c == 0x7f ||
			(c == 0xc2 && i + 1 < len && (unsigned char) owner[i + 1] <= 0x9f &&
			 (unsigned char) owner[i + 1] >= 0x80))
			return DLOCK_CHECK_BAD_CHAR;
	}
	return DLOCK_CHECK_OK;
}

/*
 * dlock_valid_utf8
 *		Whether s is well-formed UTF-8: no overlong forms, no surrogates,
 *		nothing past U+10FFFF.  An adapter whose server does not guarantee
 *		its text's encoding refuses names that are not (two different byte
 *		strings would show as the same "????").
 */
bool
dlock_valid_utf8(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *) s;
	size_t		i = 0;

	while (i < len)
	{
		unsigned char c = p[i];
		size_t		n;
		uint32_t	cp;
		uint32_t	min;

		if (c < 0x80)
		{
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf)
			n = 1, cp = c & 0x1f, min = 0x80;
		else if (c >= 0xe0 && c <= 0xef)
			n = 2, cp = c & 0x0f, min = 0x800;
		else if (c >= 0xf0 && c <= 0xf4)
			n = 3, cp = c & 0x07, min = 0x10000;
		else
			return false;
		if (len - i <= n)
			return false;
		for (size_t k = 1; k <= n; k++)
		{
			if ((p[i + k] & 0xc0) != 0x80)
				return false;
			cp = (cp << 6) | (p[i + k] & 0x3f);
		}
		if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		i += n + 1;
	}
	return true;
}
