/* SPDX-License-Identifier: PostgreSQL */
/*
 * asan_preload.c
 *		Preloaded after libasan into an uninstrumented postgres, so that the
 *		AddressSanitizer runtime (needed by an instrumented dlock.so) starts
 *		safely.
 *
 * With libasan in LD_PRELOAD its constructor runs last, after those of the
 * libraries postgres links; libgpg-error's constructor calls
 * bindtextdomain(), whose malloc then initialises ASan inside glibc's
 * gettext lock, and ASan's start-up (a failing dlsym, whose message is
 * translated) takes that lock again: postgres hangs before main().  This
 * bindtextdomain() initialises ASan first, outside the lock, then calls
 * glibc's.  Used by regress/torture/sanitize.sh only.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>

extern void __asan_init(void) __attribute__((weak));

char	   *bindtextdomain(const char *domainname, const char *dirname);

char *
bindtextdomain(const char *domainname, const char *dirname)
{
	static char *(*real) (const char *, const char *) = NULL;

	if (__asan_init)
		__asan_init();
	if (real == NULL)
		real = (char *(*) (const char *, const char *)) dlsym(RTLD_NEXT, "bindtextdomain");
	return real(domainname, dirname);
}
