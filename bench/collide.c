/* SPDX-License-Identifier: PostgreSQL */
/*
 * bench/collide.c — names whose hash under PostgreSQL's own unkeyed string
 * hash (hash_bytes, what dynahash uses for strings) agrees in its low BITS
 * bits: they would all fall in one bucket of a table of up to 2^BITS
 * buckets.  Usage: collide COUNT BITS PREFIX; one name per line.
 */
#include "postgres_fe.h"

#include "common/hashfn.h"

int
main(int argc, char **argv)
{
	long		want;
	int			bits;
	const char *prefix;
	uint32		mask;
	uint32		target = 0;
	long		found = 0;
	char		buf[128];

	if (argc != 4)
	{
		fprintf(stderr, "usage: collide COUNT BITS PREFIX\n");
		return 2;
	}
	want = atol(argv[1]);
	bits = atoi(argv[2]);
	prefix = argv[3];
	mask = bits >= 32 ? 0xFFFFFFFFu : ((uint32) 1 << bits) - 1;
	for (unsigned long i = 0; found < want; i++)
	{
		int			len = snprintf(buf, sizeof(buf), "%s%lx", prefix, i);
		uint32		h = hash_bytes((const unsigned char *) buf, len);

		if (i == 0)
			target = h & mask;
		if ((h & mask) == target)
		{
			puts(buf);
			found++;
		}
	}
	return 0;
}
