/* SPDX-License-Identifier: PostgreSQL */
/*
 * test_check.h
 *		The check counter of core/'s test programs, one definition for all:
 *		CHECK(cond) counts a pass, or counts and reports a failure with its
 *		place.  A program may define first CHECK_CONTEXT (a statement that
 *		prints what it was doing) and CHECK_REPORT_LIMIT (failures reported
 *		at most).
 */
#ifndef TEST_CHECK_H
#define TEST_CHECK_H

#include <limits.h>
#include <stdio.h>

#ifndef CHECK_CONTEXT
#define CHECK_CONTEXT ((void) 0)
#endif
#ifndef CHECK_REPORT_LIMIT
#define CHECK_REPORT_LIMIT INT_MAX
#endif

static int	passed;
static int	failed;

#define CHECK(cond) \
	do { \
		if (cond) \
			passed++; \
		else if (++failed <= CHECK_REPORT_LIMIT) \
		{ \
			fprintf(stderr, "%s:%d: check failed", __FILE__, __LINE__); \
			CHECK_CONTEXT; \
			fprintf(stderr, ": %s\n", #cond); \
		} \
	} while (0)

#endif							/* TEST_CHECK_H */
