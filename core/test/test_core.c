/* SPDX-License-Identifier: PostgreSQL */
/*
 * test_core.c
 *		Unit tests of the database-independent core: the full 6x6
 *		compatibility matrix, mode strength, parsing and validation.
 */
#include "dlock_core.h"

#include <stdio.h>
#include <string.h>

#include "test_check.h"

static bool
compatible(int a, int b)
{
	return (dlock_mode_conflicts(a) & DLOCK_MODE_BIT(b)) == 0;
}

int
main(void)
{
	/* The standard DLM matrix, written out independently of the code. */
	static const char *const matrix[DLOCK_NMODES] = {
		"yyyyyy",				/* NL */
		"yyyyyn",				/* CR */
		"yyynnn",				/* CW */
		"yynynn",				/* PR */
		"yynnnn",				/* PW */
		"ynnnnn",				/* EX */
	};

	for (int a = 0; a < DLOCK_NMODES; a++)
		for (int b = 0; b < DLOCK_NMODES; b++)
		{
			CHECK(compatible(a, b) == (matrix[a][b] == 'y'));
			CHECK(compatible(a, b) == compatible(b, a));
		}

	/* Strength: a mode covers itself; EX covers all; CW and PR are apart. */
	for (int m = 0; m < DLOCK_NMODES; m++)
	{
		CHECK(dlock_mode_covers(m, m));
		CHECK(dlock_mode_covers(DLOCK_MODE_EX, m));
		CHECK(dlock_mode_covers(m, DLOCK_MODE_NL));
	}
	CHECK(!dlock_mode_covers(DLOCK_MODE_PR, DLOCK_MODE_EX));
	CHECK(!dlock_mode_covers(DLOCK_MODE_PR, DLOCK_MODE_CW));
	CHECK(!dlock_mode_covers(DLOCK_MODE_CW, DLOCK_MODE_PR));
	CHECK(dlock_mode_covers(DLOCK_MODE_PW, DLOCK_MODE_PR));
	CHECK(!dlock_mode_covers(DLOCK_MODE_EX, 17));

	/* A stronger mode never conflicts with less than a weaker one does. */
	for (int a = 0; a < DLOCK_NMODES; a++)
		for (int b = 0; b < DLOCK_NMODES; b++)
			if (dlock_mode_covers(a, b))
				CHECK((dlock_mode_conflicts(a) & dlock_mode_conflicts(b)) ==
					  dlock_mode_conflicts(b));

	CHECK(dlock_mode_parse("exclusive", 9) == DLOCK_MODE_EX);
	CHECK(dlock_mode_parse("EXCLUSIVE", 9) == DLOCK_MODE_EX);
	CHECK(dlock_mode_parse("Shared", 6) == DLOCK_MODE_PR);
	CHECK(dlock_mode_parse("share", 5) == DLOCK_MODE_INVALID);
	CHECK(dlock_mode_parse("nl", 2) == DLOCK_MODE_NL);
	CHECK(dlock_mode_parse("Cr", 2) == DLOCK_MODE_CR);
	CHECK(dlock_mode_parse("CW", 2) == DLOCK_MODE_CW);
	CHECK(dlock_mode_parse("pr", 2) == DLOCK_MODE_PR);
	CHECK(dlock_mode_parse("PW", 2) == DLOCK_MODE_PW);
	CHECK(dlock_mode_parse("ex", 2) == DLOCK_MODE_EX);
	CHECK(dlock_mode_parse("EXC", 3) == DLOCK_MODE_INVALID);
	for (int m = 0; m < DLOCK_NMODES; m++)
	{
		const char *n = dlock_mode_name(m);

		CHECK(dlock_mode_parse(n, strlen(n)) == m);
	}
	CHECK(dlock_mode_parse("sharedx", 7) == DLOCK_MODE_INVALID);
	CHECK(dlock_mode_parse("", 0) == DLOCK_MODE_INVALID);
	CHECK(strcmp(dlock_mode_name(DLOCK_MODE_EX), "exclusive") == 0);
	CHECK(strcmp(dlock_mode_name(DLOCK_MODE_PR), "shared") == 0);
	CHECK(strcmp(dlock_mode_name(-1), "invalid") == 0);

	CHECK(dlock_check_name("a", 1, 1024) == DLOCK_CHECK_OK);
	CHECK(dlock_check_name("", 0, 1024) == DLOCK_CHECK_EMPTY);
	CHECK(dlock_check_name("abc", 3, 2) == DLOCK_CHECK_TOO_LONG);
	CHECK(dlock_check_owner("worker-1", 8) == DLOCK_CHECK_OK);
	CHECK(dlock_check_owner("", 0) == DLOCK_CHECK_EMPTY);
	CHECK(dlock_check_owner("a\tb", 3) == DLOCK_CHECK_BAD_CHAR);
	CHECK(dlock_check_owner("a\x7f", 2) == DLOCK_CHECK_BAD_CHAR);
	/* C1 control characters as UTF-8: U+0085 (NEL), U+0080, U+009F */
	CHECK(dlock_check_owner("a\xc2\x85" "b", 4) == DLOCK_CHECK_BAD_CHAR);
	CHECK(dlock_check_owner("\xc2\x80", 2) == DLOCK_CHECK_BAD_CHAR);
	CHECK(dlock_check_owner("\xc2\x9f", 2) == DLOCK_CHECK_BAD_CHAR);
	CHECK(dlock_check_owner("\xc2\xa0", 2) == DLOCK_CHECK_OK);	/* U+00A0 */
	CHECK(dlock_check_owner("\xc3\xa9t\xc3\xa9", 5) == DLOCK_CHECK_OK);

	/* well-formed UTF-8 */
	CHECK(dlock_valid_utf8("plain/name", 10));
	CHECK(dlock_valid_utf8("\xc3\xa9\xe2\x82\xac\xf0\x9f\x94\x92", 9));	/* e-acute, euro, a lock */
	CHECK(!dlock_valid_utf8("\xff\xfe", 2));
	CHECK(!dlock_valid_utf8("\xc0\xaf\xff\xfe", 4));	/* overlong "/" */
	CHECK(!dlock_valid_utf8("\xe0\x80\xaf", 3));		/* overlong */
	CHECK(!dlock_valid_utf8("\xed\xa0\x80", 3));		/* a surrogate */
	CHECK(!dlock_valid_utf8("\xf4\x90\x80\x80", 4));	/* past U+10FFFF */
	CHECK(!dlock_valid_utf8("a\xc3", 2));				/* cut short */
	CHECK(!dlock_valid_utf8("\xc3(", 2));
	{
		char		big[DLOCK_MAX_OWNER_LEN + 2];

		memset(big, 'k', sizeof(big));
		CHECK(dlock_check_owner(big, DLOCK_MAX_OWNER_LEN) == DLOCK_CHECK_OK);
		CHECK(dlock_check_owner(big, DLOCK_MAX_OWNER_LEN + 1) == DLOCK_CHECK_TOO_LONG);
	}

	/* paths */
	CHECK(dlock_check_name("/a/b", 4, 1024) == DLOCK_CHECK_OK);
	CHECK(dlock_check_name("a//b", 4, 1024) == DLOCK_CHECK_OK);	/* flat: anything */
	CHECK(dlock_check_name("/", 1, 1024) == DLOCK_CHECK_EMPTY_SEGMENT);
	CHECK(dlock_check_name("/a//b", 5, 1024) == DLOCK_CHECK_EMPTY_SEGMENT);
	CHECK(dlock_check_name("//a", 3, 1024) == DLOCK_CHECK_EMPTY_SEGMENT);
	CHECK(dlock_check_name("/a/", 3, 1024) == DLOCK_CHECK_TRAILING_SLASH);
	{
		/* "/d" repeated: exactly the deepest path passes, one more is refused */
		char		deep[2 * (DLOCK_MAX_PATH_DEPTH + 1) + 1];

		for (int i = 0; i <= DLOCK_MAX_PATH_DEPTH; i++)
			memcpy(deep + 2 * i, "/d", 2);
		CHECK(dlock_check_name(deep, 2 * DLOCK_MAX_PATH_DEPTH, 8192) == DLOCK_CHECK_OK);
		CHECK(dlock_check_name(deep, 2 * (DLOCK_MAX_PATH_DEPTH + 1), 8192) == DLOCK_CHECK_TOO_DEEP);
		/* a flat name may hold any number of slashes */
		deep[0] = 'x';
		CHECK(dlock_check_name(deep, 2 * (DLOCK_MAX_PATH_DEPTH + 1), 8192) == DLOCK_CHECK_OK);
	}
	CHECK(dlock_name_is_path("/x", 2) && !dlock_name_is_path("x/", 2));
	{
		size_t		lens[4];

		CHECK(dlock_path_ancestor_lengths("/a/b/c", 6, lens, 4) == 2);
		CHECK(lens[0] == 2 && lens[1] == 4);
		CHECK(dlock_path_ancestor_lengths("/abc", 4, lens, 4) == 0);
		CHECK(dlock_path_ancestor_lengths("a/b", 3, lens, 4) == 0);
		CHECK(dlock_path_ancestor_lengths("/a/b/c/d", 8, lens, 1) == 3);
	}
	CHECK(dlock_intention_mode(DLOCK_MODE_PR) == DLOCK_MODE_CR);
	CHECK(dlock_intention_mode(DLOCK_MODE_CR) == DLOCK_MODE_CR);
	CHECK(dlock_intention_mode(DLOCK_MODE_CW) == DLOCK_MODE_CW);
	CHECK(dlock_intention_mode(DLOCK_MODE_PW) == DLOCK_MODE_CW);
	CHECK(dlock_intention_mode(DLOCK_MODE_EX) == DLOCK_MODE_CW);
	CHECK(dlock_intention_mode(DLOCK_MODE_NL) == DLOCK_MODE_INVALID);
	/* an intention never conflicts with the same intention */
	CHECK(!(dlock_mode_conflicts(DLOCK_MODE_CW) & DLOCK_MODE_BIT(DLOCK_MODE_CW)));

	printf("core: %d passed, %d failed\n", passed, failed);
	return failed == 0 ? 0 : 1;
}
