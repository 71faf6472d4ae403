/* SPDX-License-Identifier: PostgreSQL */
/*
 * main.c
 *		The dlock command: arguments, the connection target, and the short
 *		commands (ls, release, leader).  dlock run is in run.c.
 *
 * Options may come before or after the lock name; for run, everything
 * after "--" is the command, untouched.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "dlock.h"

#define DEFAULT_TTL		30.0
#define DEFAULT_GRACE	10.0

static const char usage_text[] =
"usage: dlock run [CONNECTION] [--ttl 30s] [--timeout DURATION] [--grace 10s]\n"
"                 [--mode MODE | --semaphore CAPACITY[:PERMITS]] NAME -- COMMAND [ARG...]\n"
"       dlock campaign [CONNECTION] [--ttl 30s] [--timeout DURATION] [--grace 10s]\n"
"                 NAME VALUE -- COMMAND [ARG...]\n"
"       dlock ls [CONNECTION] [--json] [NAME-PREFIX]\n"
"       dlock release [CONNECTION] NAME --owner KEY\n"
"       dlock leader [CONNECTION] NAME\n"
"       dlock --version | --help\n"
"CONNECTION: --dsn DSN (PostgreSQL: libpq string or URI) | --mysql DSN (MariaDB:\n"
"            key=value words: host port socket user password database option_file)\n"
"MODE: exclusive (default), shared, NL, CR, CW, PR, PW, EX.\n"
"DURATION: 30s, 500ms, 2m, 1h or seconds (1.5).\n";

/* --help: the usage, then what a user needs without the man page */
static const char help_text[] =
"\n"
"run/campaign run COMMAND in a process group of its own while the lock (the\n"
"permits, the lead) is held, renewing its lease every ttl/3; on losing it the\n"
"group gets SIGTERM, then SIGKILL after --grace. SIGINT, SIGTERM, SIGHUP to dlock\n"
"go to the group (SIGKILL after --grace). Only the fencing token protects the\n"
"resource from a paused dlock: pass $DLOCK_TOKEN on (dlock_check).\n"
"\n"
"Environment of COMMAND:\n"
"  DLOCK_TOKEN   the fencing token of the grant (run) or the leader's term (campaign)\n"
"  DLOCK_NAME    NAME\n"
"  DLOCK_OWNER   the owner key (32 hex digits) the lock is held under\n"
"Environment read, first found wins after --dsn/--mysql:\n"
"  DLOCK_DSN     libpq connection string (PostgreSQL)\n"
"  DLOCK_MYSQL   MariaDB key=value DSN\n"
"  DATABASE_URL  postgres:// or postgresql:// URL (PostgreSQL),\n"
"                mysql:// or mariadb:// URL (MariaDB)\n"
"  PGHOST, PGPORT, PGUSER, PGDATABASE, PGPASSWORD, PGSERVICE, ... (libpq defaults)\n"
"\n"
"Exit status:\n"
"  0     success; run/campaign: the command's own status (128+N: killed by signal N;\n"
"        126/127: could not be run / not found)\n"
"  1     release: the key did not hold the lock; leader: nobody leads\n"
"  64    usage error (nothing was locked)\n"
"  69    cannot connect, or the server answered an error\n"
"  70    the lease (permits, lead) was lost while the command ran\n"
"  71    an operating-system failure (fork, signals, threads)\n"
"  75    not acquired within --timeout (the command did not run)\n"
"  129, 130, 143  SIGHUP, SIGINT, SIGTERM while waiting (the command did not run)\n"
"See dlock(1).\n";

typedef struct Args
{
	const char *cmd;
	const char *dsn;
	const char *mysql;
	const char *ttl,
			   *timeout,
			   *mode,
			   *grace,
			   *owner,
			   *semaphore;
	bool		json;
	const char *pos[3];
	int			npos;
	char	  **rest;			/* after "--" */
} Args;

static int
usage_error(const char *fmt, const char *arg)
{
	fprintf(stderr, "dlock: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n%s", usage_text);
	return EXIT_USAGE;
}

/*
 * parse_args
 *		Options as "--opt value" or "--opt=value", anywhere before "--".
 *		'allowed' lists the options of the command, as "|ttl|mode|".
 *		Returns 0, or the exit code of a usage error (already reported).
 */
static int
parse_args(int argc, char **argv, const char *allowed, int maxpos, Args *a)
{
	for (int i = 2; i < argc; i++)
	{
		char	   *arg = argv[i];
		char		opt[32];
		const char *val;
		const char **slot;
		char	   *eq;
		char		probe[40];

		if (strcmp(arg, "--") == 0)
		{
			a->rest = argv + i + 1;
			return 0;
		}
		if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0)
		{
			fputs(usage_text, stdout);
			fputs(help_text, stdout);
			exit(0);
		}
		if (arg[0] != '-' || arg[1] == '\0')
		{
			if (a->npos >= maxpos)
				return usage_error("unexpected argument \"%s\"", arg);
			a->pos[a->npos++] = arg;
			continue;
		}
		if (arg[1] != '-')
			return usage_error("unknown option \"%s\"", arg);
		snprintf(opt, sizeof(opt), "%s", arg + 2);
		eq = strchr(opt, '=');
		if (eq)
			*eq = '\0';
		snprintf(probe, sizeof(probe), "|%s|", opt);
		if (opt[0] == '\0' || strstr(allowed, probe) == NULL)
			return usage_error("unknown option \"%s\"", arg);
		if (strcmp(opt, "json") == 0)
		{
			/* a flag: no value */
			if (eq)
				return usage_error("option \"%s\" takes no value", arg);
			a->json = true;
			continue;
		}
		if (strchr(arg, '='))
			val = strchr(arg, '=') + 1;
		else if (i + 1 < argc)
			val = argv[++i];
		else
			return usage_error("option \"%s\" needs a value", arg);

		if (strcmp(opt, "dsn") == 0)
			slot = &a->dsn;
		else if (strcmp(opt, "mysql") == 0)
			slot = &a->mysql;
		else if (strcmp(opt, "ttl") == 0)
			slot = &a->ttl;
		else if (strcmp(opt, "timeout") == 0)
			slot = &a->timeout;
		else if (strcmp(opt, "mode") == 0)
			slot = &a->mode;
		else if (strcmp(opt, "grace") == 0)
			slot = &a->grace;
		else if (strcmp(opt, "semaphore") == 0)
			slot = &a->semaphore;
		else
			slot = &a->owner;
		*slot = val;
	}
	return 0;
}

static int
hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/*
 * add_word
 *		Appends " key='value'" to a MariaDB DSN, the value percent-decoded
 *		from url[0..len) and quoted for parse_dsn (\' and \\).
 */
static void
add_word(char *out, size_t outlen, const char *key, const char *v, size_t len)
{
	size_t		n = strlen(out);

	n += snprintf(out + n, n < outlen ? outlen - n : 0, "%s%s='", n ? " " : "", key);
	for (size_t i = 0; i < len && n + 3 < outlen; i++)
	{
		char		c = v[i];

		if (c == '%' && i + 2 < len && hexval(v[i + 1]) >= 0 && hexval(v[i + 2]) >= 0)
		{
			c = (char) (hexval(v[i + 1]) * 16 + hexval(v[i + 2]));
			i += 2;
		}
		if (c == '\'' || c == '\\')
			out[n++] = '\\';
		out[n++] = c;
	}
	if (n + 1 < outlen)
		out[n++] = '\'';
	out[n < outlen ? n : outlen - 1] = '\0';
}

/*
 * mysql_url_dsn
 *		mysql://[user[:password]@][host][:port][/database][?key=value&...]
 *		(mariadb:// too) as our key=value DSN; the query's keys are the
 *		DSN's (socket, option_file, connect_timeout).  False if malformed.
 */
static bool
mysql_url_dsn(const char *url, char *out, size_t outlen)
{
	const char *p = strstr(url, "://") + 3;
	const char *end = p + strcspn(p, "/?");
	const char *at = NULL;
	const char *host;
	const char *colon;

	out[0] = '\0';
	for (const char *q = p; q < end; q++)
		if (*q == '@')
			at = q;
	if (at)
	{
		colon = memchr(p, ':', at - p);
		add_word(out, outlen, "user", p, (colon ? colon : at) - p);
		if (colon)
			add_word(out, outlen, "password", colon + 1, at - colon - 1);
		host = at + 1;
	}
	else
		host = p;
	if (*host == '[')
	{
		/* [::1]:3306 */
		const char *rb = memchr(host, ']', end - host);

		if (rb == NULL)
			return false;
		add_word(out, outlen, "host", host + 1, rb - host - 1);
		colon = rb + 1 < end && rb[1] == ':' ? rb + 1 : NULL;
	}
	else
	{
		colon = memchr(host, ':', end - host);
		if ((colon ? colon : end) > host)
			add_word(out, outlen, "host", host, (colon ? colon : end) - host);
	}
	if (colon)
	{
		if (colon + 1 == end || strspn(colon + 1, "0123456789") != (size_t) (end - colon - 1))
			return false;
		add_word(out, outlen, "port", colon + 1, end - colon - 1);
	}
	p = end;
	if (*p == '/')
	{
		size_t		len = strcspn(p + 1, "?");

		if (len > 0)
			add_word(out, outlen, "database", p + 1, len);
		p += 1 + len;
	}
	if (*p == '?')
	{
		p++;
		while (*p)
		{
			size_t		len = strcspn(p, "&");
			const char *eq = memchr(p, '=', len);
			char		key[32];

			if (eq == NULL || (size_t) (eq - p) >= sizeof(key))
				return false;
			memcpy(key, p, eq - p);
			key[eq - p] = '\0';
			add_word(out, outlen, key, eq + 1, len - (eq - p) - 1);
			p += len;
			if (*p == '&')
				p++;
		}
	}
	return true;
}

/*
 * pick_target
 *		--dsn or --mysql; else DLOCK_DSN or DLOCK_MYSQL; else DATABASE_URL
 *		(its scheme picks the server); else libpq's own defaults (PGHOST and
 *		the rest).
 */
static int
pick_target(const Args *a, DbTarget *t)
{
	const char *envpg = getenv("DLOCK_DSN");
	const char *envmy = getenv("DLOCK_MYSQL");
	const char *url = getenv("DATABASE_URL");
	static char urldsn[4096];

	if (a->dsn && a->mysql)
		return usage_error("%s", "give --dsn or --mysql, not both");
	if (a->dsn || a->mysql)
	{
		t->kind = a->dsn ? DB_PG : DB_MY;
		t->dsn = a->dsn ? a->dsn : a->mysql;
		return 0;
	}
	if (envpg && envmy)
		return usage_error("%s", "both DLOCK_DSN and DLOCK_MYSQL are set; pass --dsn or --mysql");
	if (envpg || envmy)
	{
		t->kind = envmy ? DB_MY : DB_PG;
		t->dsn = envmy ? envmy : envpg;
		return 0;
	}
	if (url && url[0])
	{
		if (strncmp(url, "postgres://", 11) == 0 || strncmp(url, "postgresql://", 13) == 0)
		{
			/* libpq takes the URI as it is */
			t->kind = DB_PG;
			t->dsn = url;
			return 0;
		}
		if (strncmp(url, "mysql://", 8) == 0 || strncmp(url, "mariadb://", 10) == 0)
		{
			if (!mysql_url_dsn(url, urldsn, sizeof(urldsn)))
				return usage_error("%s", "DATABASE_URL: a malformed mysql:// URL");
			t->kind = DB_MY;
			t->dsn = urldsn;
			return 0;
		}
		return usage_error("%s", "DATABASE_URL is neither a postgres(ql):// nor a mysql:// or mariadb:// URL; pass --dsn or --mysql");
	}
	t->kind = DB_PG;
	t->dsn = "";
	return 0;
}

static bool
valid_mode(const char *m)
{
	static const char *const modes[] = {
		"exclusive", "shared", "NL", "CR", "CW", "PR", "PW", "EX", NULL
	};

	for (int i = 0; modes[i]; i++)
		if (strcasecmp(m, modes[i]) == 0)
			return true;
	return false;
}

/* 'what' names the lock (or the prefix of ls) */
static Db *
connect_or_report(const DbTarget *t, const char *what)
{
	char		err[1024];
	Db		   *db = db_ops_for(t)->connect(t, 0, err, sizeof(err));

	if (db == NULL)
		fprintf(stderr, "dlock: %s: cannot connect: %s\n", what, err);
	return db;
}

/*
 * parse_semaphore
 *		"CAPACITY[:PERMITS]", 1 <= PERMITS <= CAPACITY (the server's range
 *		too; checked here so nothing is locked for a typo).
 */
static bool
parse_semaphore(const char *s, int *capacity, int *permits)
{
	char	   *end;
	long		c,
				p = 1;

	if (*s < '0' || *s > '9')
		return false;
	c = strtol(s, &end, 10);
	if (*end == ':')
	{
		if (end[1] < '0' || end[1] > '9')
			return false;
		p = strtol(end + 1, &end, 10);
	}
	if (*end != '\0' || c < 1 || c > 1000000000 || p < 1 || p > c)
		return false;
	*capacity = (int) c;
	*permits = (int) p;
	return true;
}

/*
 * run_main
 *		dlock run (kind RUN_LOCK, or RUN_SEMAPHORE with --semaphore) and
 *		dlock campaign (RUN_CAMPAIGN: NAME VALUE).
 */
static int
run_main(int argc, char **argv, bool campaign)
{
	Args		a = {0};
	RunOpts		o = {0};
	const char *cmd = campaign ? "campaign" : "run";
	int			nargs = campaign ? 2 : 1;
	int			rc;

	/* room for one more word: the command of one who forgot "--" */
	if ((rc = parse_args(argc, argv, campaign ? "|dsn|mysql|ttl|timeout|grace|" :
						 "|dsn|mysql|ttl|timeout|mode|grace|semaphore|",
						 nargs + 1, &a)) != 0)
		return rc;
	if (a.npos == 0)
		return usage_error("%s: missing NAME", cmd);
	if (campaign && a.npos == 1)
		return usage_error("%s", "campaign: missing VALUE (what the leader publishes)");
	if (a.rest == NULL)
		return usage_error("%s: missing \"--\" before the command", cmd);
	if (a.npos > nargs)
		return usage_error("unexpected argument \"%s\" before \"--\"", a.pos[nargs]);
	if (a.rest[0] == NULL)
		return usage_error("%s: missing command after \"--\"", cmd);
	if (a.pos[0][0] == '\0')
		return usage_error("%s: the name is empty", cmd);
	o.kind = campaign ? RUN_CAMPAIGN : a.semaphore ? RUN_SEMAPHORE : RUN_LOCK;
	o.name = a.pos[0];
	o.value = campaign ? a.pos[1] : NULL;
	o.ttl = DEFAULT_TTL;
	o.timeout = -1;
	o.grace = DEFAULT_GRACE;
	o.mode = a.mode ? a.mode : "exclusive";
	if (a.ttl && (!parse_duration(a.ttl, &o.ttl) || o.ttl <= 0))
		return usage_error("invalid --ttl \"%s\" (a positive duration: 30s, 500ms, 2m, 1h, 1.5)", a.ttl);
	if (a.timeout && !parse_duration(a.timeout, &o.timeout))
		return usage_error("invalid --timeout \"%s\" (a duration: 0, 30s, 500ms, 2m, 1h, 1.5)", a.timeout);
	if (a.grace && !parse_duration(a.grace, &o.grace))
		return usage_error("invalid --grace \"%s\" (a duration: 10s, 500ms, 2m, 1h, 1.5)", a.grace);
	if (!valid_mode(o.mode))
		return usage_error("invalid --mode \"%s\"", o.mode);
	if (a.semaphore && a.mode)
		return usage_error("%s", "give --mode or --semaphore, not both");
	if (a.semaphore && !parse_semaphore(a.semaphore, &o.capacity, &o.permits))
		return usage_error("invalid --semaphore \"%s\" (CAPACITY or CAPACITY:PERMITS, 1 <= PERMITS <= CAPACITY)",
						   a.semaphore);
	if ((rc = pick_target(&a, &o.target)) != 0)
		return rc;
	o.argv = a.rest;
	return cmd_run(&o);
}

/*
 * print_table
 *		The rows for a reader: a semaphore's permits as held/capacity, an
 *		intention row of a path lock marked in "implied", an election's
 *		value last (it may be long).
 */
static void
print_table(const char *pidcol, const LsTable *t)
{
	enum
	{
		NCOL = 11
	};
	static const int src[NCOL] = {
		LS_NAME, LS_MODE, LS_GRANTED, LS_IMPLIED, LS_POSITION, LS_OWNER, LS_PID,
		LS_TOKEN, LS_PERMITS, LS_EXPIRES, LS_VALUE
	};
	const char *head[NCOL] = {
		"name", "mode", "granted", "implied", "position", "owner", pidcol,
		"token", "permits", "expires_at", "value"
	};
	char	  **cell = calloc((size_t) (t->nrows + 1) * NCOL, sizeof(char *));
	size_t		w[NCOL];

	for (int j = 0; j < NCOL; j++)
		cell[j] = strdup(head[j]);
	for (int i = 0; i < t->nrows; i++)
		for (int j = 0; j < NCOL; j++)
		{
			char	  **row = t->cells + (size_t) i * LS_COLUMNS;
			const char *c = row[src[j]];
			char		buf[64];

			if (src[j] == LS_IMPLIED)
				c = c && strcmp(c, "yes") == 0 ? "implied" : "";
			else if (src[j] == LS_PERMITS && c && row[LS_CAPACITY])
			{
				snprintf(buf, sizeof(buf), "%s/%s", c, row[LS_CAPACITY]);
				c = buf;
			}
			cell[(i + 1) * NCOL + j] = strdup(c ? c : "");
		}
	for (int j = 0; j < NCOL; j++)
	{
		w[j] = 0;
		for (int i = 0; i <= t->nrows; i++)
			if (strlen(cell[i * NCOL + j]) > w[j])
				w[j] = strlen(cell[i * NCOL + j]);
	}
	for (int i = 0; i <= t->nrows; i++)
	{
		char		line[8192];
		size_t		n = 0;

		for (int j = 0; j < NCOL && n < sizeof(line); j++)
			n += snprintf(line + n, sizeof(line) - n, "%-*s%s",
						  j == NCOL - 1 ? 0 : (int) w[j], cell[i * NCOL + j],
						  j == NCOL - 1 ? "" : "  ");
		/* no trailing blanks where the value is empty */
		n = strlen(line);
		while (n > 0 && line[n - 1] == ' ')
			line[--n] = '\0';
		printf("%s\n", line);
	}
	for (int i = 0; i < (t->nrows + 1) * NCOL; i++)
		free(cell[i]);
	free(cell);
}

static void
json_string(const char *s)
{
	putchar('"');
	for (const unsigned char *p = (const unsigned char *) s; *p; p++)
	{
		if (*p == '"' || *p == '\\')
			printf("\\%c", *p);
		else if (*p < 0x20)
			printf("\\u%04x", *p);
		else
			putchar(*p);
	}
	putchar('"');
}

/*
 * print_json
 *		One array of objects, every key on every row (null where the view
 *		has NULL), numbers as numbers, booleans as booleans.
 */
static void
print_json(const char *pidcol, const LsTable *t)
{
	static const struct
	{
		int			col;
		const char *key;
		char		type;		/* s string, n number, b boolean */
	}			keys[] = {
		{LS_NAME, "name", 's'}, {LS_MODE, "mode", 's'}, {LS_GRANTED, "granted", 'b'},
		{LS_IMPLIED, "implied", 'b'}, {LS_POSITION, "position", 'n'},
		{LS_OWNER, "owner", 's'}, {LS_PID, NULL, 'n'}, {LS_TOKEN, "token", 'n'},
		{LS_PERMITS, "permits", 'n'}, {LS_CAPACITY, "capacity", 'n'},
		{LS_EXPIRES, "expires_at", 's'}, {LS_VALUE, "value", 's'}
	};

	putchar('[');
	for (int i = 0; i < t->nrows; i++)
	{
		printf("%s{", i ? ",\n " : "");
		for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
		{
			const char *c = t->cells[(size_t) i * LS_COLUMNS + keys[k].col];

			printf("%s\"%s\": ", k ? ", " : "", keys[k].key ? keys[k].key : pidcol);
			if (c == NULL)
				fputs("null", stdout);
			else if (keys[k].type == 'b')
				fputs(strcmp(c, "yes") == 0 ? "true" : "false", stdout);
			else if (keys[k].type == 'n')
				fputs(c, stdout);
			else
				json_string(c);
		}
		putchar('}');
	}
	puts("]");
}

static int
ls_main(int argc, char **argv)
{
	Args		a = {0};
	DbTarget	t;
	LsTable		tab = {0};
	Db		   *db;
	DbStatus	st;
	int			rc;

	if ((rc = parse_args(argc, argv, "|dsn|mysql|json|", 1, &a)) != 0)
		return rc;
	if (a.rest)
		return usage_error("%s", "ls: unexpected \"--\"");
	if ((rc = pick_target(&a, &t)) != 0)
		return rc;
	if ((db = connect_or_report(&t, "ls")) == NULL)
		return EXIT_UNAVAILABLE;
	st = db->ops->list(db, a.npos ? a.pos[0] : NULL, &tab);
	if (st != DB_OK)
	{
		report_db(db, "ls");
		db->ops->close(db);
		return EXIT_UNAVAILABLE;
	}
	if (a.json)
		print_json(db->ops->pid_column, &tab);
	else
		print_table(db->ops->pid_column, &tab);
	db->ops->close(db);
	return 0;
}

static int
release_main(int argc, char **argv)
{
	Args		a = {0};
	DbTarget	t;
	Db		   *db;
	DbStatus	st;
	char		what[1100];
	int			rc;

	if ((rc = parse_args(argc, argv, "|dsn|mysql|owner|", 1, &a)) != 0)
		return rc;
	if (a.npos == 0 || a.pos[0][0] == '\0')
		return usage_error("%s", "release: missing lock NAME");
	if (a.owner == NULL || a.owner[0] == '\0')
		return usage_error("%s", "release: missing --owner KEY");
	if (a.rest)
		return usage_error("%s", "release: unexpected \"--\"");
	if ((rc = pick_target(&a, &t)) != 0)
		return rc;
	snprintf(what, sizeof(what), "release \"%s\"", a.pos[0]);
	if ((db = connect_or_report(&t, what)) == NULL)
		return EXIT_UNAVAILABLE;
	st = db->ops->release(db, a.pos[0], a.owner);
	if (st == DB_OK)
		rc = 0;
	else if (st == DB_NULL)
	{
		fprintf(stderr, "dlock: warning: lock \"%s\" is not held by this owner\n", a.pos[0]);
		rc = EXIT_NOT_HELD;
	}
	else
	{
		report_db(db, "release \"%s\"", a.pos[0]);
		rc = EXIT_UNAVAILABLE;
	}
	db->ops->close(db);
	return rc;
}

static int
leader_main(int argc, char **argv)
{
	Args		a = {0};
	DbTarget	t;
	Db		   *db;
	DbStatus	st;
	char	   *value = NULL;
	char		what[1100];
	int			rc;

	if ((rc = parse_args(argc, argv, "|dsn|mysql|", 1, &a)) != 0)
		return rc;
	if (a.npos == 0 || a.pos[0][0] == '\0')
		return usage_error("%s", "leader: missing election NAME");
	if (a.rest)
		return usage_error("%s", "leader: unexpected \"--\"");
	if ((rc = pick_target(&a, &t)) != 0)
		return rc;
	snprintf(what, sizeof(what), "leader \"%s\"", a.pos[0]);
	if ((db = connect_or_report(&t, what)) == NULL)
		return EXIT_UNAVAILABLE;
	st = db->ops->leader(db, a.pos[0], &value);
	if (st == DB_OK)
	{
		printf("%s\n", value);
		rc = 0;
	}
	else if (st == DB_NULL)
	{
		fprintf(stderr, "dlock: nobody leads \"%s\"\n", a.pos[0]);
		rc = EXIT_NOT_HELD;
	}
	else
	{
		report_db(db, "leader \"%s\"", a.pos[0]);
		rc = EXIT_UNAVAILABLE;
	}
	free(value);
	db->ops->close(db);
	return rc;
}

int
main(int argc, char **argv)
{
	const char *cmd = argc > 1 ? argv[1] : NULL;

	/* lines of concurrent runs must not be cut into pieces */
	setvbuf(stderr, NULL, _IOLBF, 0);
	if (cmd == NULL)
		return usage_error("%s", "missing command");
	if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "help") == 0)
	{
		fputs(usage_text, stdout);
		fputs(help_text, stdout);
		return 0;
	}
	if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0 || strcmp(cmd, "version") == 0)
	{
		printf("dlock %s\n", DLOCK_VERSION);
		return 0;
	}
	if (strcmp(cmd, "run") == 0)
		return run_main(argc, argv, false);
	if (strcmp(cmd, "campaign") == 0)
		return run_main(argc, argv, true);
	if (strcmp(cmd, "ls") == 0)
		return ls_main(argc, argv);
	if (strcmp(cmd, "release") == 0)
		return release_main(argc, argv);
	if (strcmp(cmd, "leader") == 0)
		return leader_main(argc, argv);
	return usage_error("unknown command \"%s\"", cmd);
}
