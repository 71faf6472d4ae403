/* SPDX-License-Identifier: PostgreSQL */
/*
 * dlock_core.h
 *		Database-independent parts of dlock: lock modes, their compatibility
 *		and strength, and validation of lock names and owner keys.
 *
 * Plain C without database headers, compiled into both the PostgreSQL
 * extension and the MySQL/MariaDB plugin, so both enforce the same rules.
 */
#ifndef DLOCK_CORE_H
#define DLOCK_CORE_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

/* The six classic DLM modes, weakest first. */
typedef enum DLockMode
{
	DLOCK_MODE_NL = 0,			/* null: no access, holds a place */
	DLOCK_MODE_CR,				/* concurrent read */
	DLOCK_MODE_CW,				/* concurrent write */
	DLOCK_MODE_PR,				/* protected read ("shared") */
	DLOCK_MODE_PW,				/* protected write */
	DLOCK_MODE_EX,				/* exclusive */
	DLOCK_NMODES
} DLockMode;

#define DLOCK_MODE_INVALID (-1)

/* A set of modes as a bit mask: bit m stands for mode m. */
typedef uint32_t DLockModeMask;

#define DLOCK_MODE_BIT(m) ((DLockModeMask) 1 << (m))

/* Modes that conflict with the given one. */
extern DLockModeMask dlock_mode_conflicts(int mode);

/* True if holding 'held' already grants everything 'wanted' would. */
extern bool dlock_mode_covers(int held, int wanted);

/*
 * dlock_mode_parse
 *		Mode from its name (case-insensitive, not NUL-terminated);
 *		DLOCK_MODE_INVALID if unknown.  Accepts the six DLM names NL, CR,
 *		CW, PR, PW, EX and the aliases "shared" (PR) and "exclusive" (EX).
 */
extern int	dlock_mode_parse(const char *name, size_t len);

/* Canonical name of a mode, as shown in views. */
extern const char *dlock_mode_name(int mode);

/* Result of validating a name or an owner key. */
typedef enum DLockCheck
{
	DLOCK_CHECK_OK = 0,
	DLOCK_CHECK_EMPTY,
	DLOCK_CHECK_TOO_LONG,
	DLOCK_CHECK_BAD_CHAR,
	DLOCK_CHECK_EMPTY_SEGMENT,	/* a path with "//" or a lone "/" */
	DLOCK_CHECK_TRAILING_SLASH,	/* a path ending in "/" */
	DLOCK_CHECK_TOO_DEEP		/* a path of more than DLOCK_MAX_PATH_DEPTH segments */
} DLockCheck;

/*
 * Deepest path: "/a/b/c" has 3 segments.  A path lock takes one intention
 * per proper ancestor, so the depth bounds the work and memory of one
 * request; a deeper path is refused, never truncated (a dropped ancestor
 * would let two exclusive holders into one subtree).
 */
#define DLOCK_MAX_PATH_DEPTH 64

/*
 * Hierarchical names: a name starting with '/' is a path.  Locking a path in
 * a mode takes the intention mode on each proper ancestor: CR under CR and
 * PR, CW under CW, PW and EX, nothing under NL.
 */
extern bool dlock_name_is_path(const char *name, size_t len);
extern int	dlock_intention_mode(int mode);	/* DLOCK_MODE_INVALID: none */

/*
 * dlock_path_ancestor_lengths
 *		Lengths of the proper ancestors of a path, shortest first ("/a/b/c":
 *		2, 4); returns how many (at most max_out are stored; a name that
 *		passed dlock_check_name has fewer than DLOCK_MAX_PATH_DEPTH).
 */
extern int	dlock_path_ancestor_lengths(const char *name, size_t len,
										size_t *out, int max_out);

/* Longest owner key in bytes. */
#define DLOCK_MAX_OWNER_LEN 255

extern DLockCheck dlock_check_name(const char *name, size_t len, size_t max_len);
/* No control characters: C0, DEL and C1 (as UTF-8). */
extern DLockCheck dlock_check_owner(const char *owner, size_t len);
extern bool dlock_valid_utf8(const char *s, size_t len);

#endif							/* DLOCK_CORE_H */
