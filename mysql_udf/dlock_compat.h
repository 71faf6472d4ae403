/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * dlock_compat.h
 *		The MariaDB server interfaces the plugin resolves at run time (C++
 *		symbols of mariadbd, by their mangled names, and the layouts they
 *		take), with what changed between the supported versions (10.11 and
 *		11.8) behind one name each.  The plugin's logic has no version test.
 *
 * A server that exports none of a symbol's forms gets a clear refusal
 * naming the symbol and the server's version (dlock_udf_server.c,
 * hooks_init).
 */
#ifndef DLOCK_COMPAT_H
#define DLOCK_COMPAT_H

#include <stddef.h>

/* the server's LEX_CSTRING and the start of its LEX_USER (user, host) */
typedef struct ServerLexString
{
	const char *str;
	size_t		length;
} ServerLexString;
typedef struct ServerLexUser
{
	ServerLexString user;
	ServerLexString host;
	void	   *rest[16];		/* room for the fields we never read */
} ServerLexUser;

#define SYM_ENTER_COND \
	"_Z14thd_enter_condP3THDP13st_mysql_condP14st_mysql_mutexPK17PSI_stage_info_v1PS5_PKcSA_i"
#define SYM_EXIT_COND "_Z13thd_exit_condP3THDPK17PSI_stage_info_v1PKcS5_i"
#define SYM_ROUTINE_ACCESS \
	"_Z20check_routine_accessP3THD11privilege_tPK25st_mysql_const_lex_stringS4_PK10Sp_handlerb"
#define SYM_DEFAULT_DEFINER "_Z19get_default_definerP3THDP8LEX_USERb"
#define SYM_ROLE_GRANTED "_Z21check_role_is_grantedPKcS0_S0_"

/*
 * is_acl_user: whether an account (or, with an empty host, a role)
 * exists.  10.11: is_acl_user(const char *host, const char *user); 11.x:
 * is_acl_user(const LEX_CSTRING &host, const LEX_CSTRING &user).
 */
#define SYM_IS_ACL_USER_CHARS "_Z11is_acl_userPKcS0_"
#define SYM_IS_ACL_USER_LEX "_Z11is_acl_userRK25st_mysql_const_lex_stringS1_"
typedef _Bool (*is_acl_user_chars_fn) (const char *host, const char *user);
typedef _Bool (*is_acl_user_lex_fn) (const ServerLexString *host, const ServerLexString *user);

#define SERVER_EXECUTE_ACL (1ULL << 18)	/* privilege.h, 10.11 and 11.8 */

#endif							/* DLOCK_COMPAT_H */
