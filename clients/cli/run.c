/* SPDX-License-Identifier: PostgreSQL */
/*
 * run.c
 *		dlock run: take a lock, run a command under it, keep the lease alive
 *		while the command runs, stop the command when the lease is lost.
 *
 * Threads: while the command runs, the main thread never waits on the
 * database.  It sleeps in poll() on a signalfd (SIGCHLD and the signals it
 * forwards) and an eventfd, with a timeout that is the next local
 * deadline.  Blocking
 * statements run in other threads: the wait in an acquirer thread (so a
 * signal is seen while it waits), the renewals in a renewer thread with its own
 * connection (so a slow renewal never delays reaping the command, and a
 * hung one never keeps the command alive past the lease), and the final
 * release in a thread of its own, waited for at most a ttl.
 *
 * The lease as we see it ends at the monotonic time just before the last
 * successful acquire or renewal was sent, plus the ttl, less a margin (10%
 * of it, at most 1 s): the server's lease ends later than that, whatever
 * the delays.  Loss is a renewal answered DL001 or that deadline passing
 * without a successful renewal; either way the command gets SIGTERM, then
 * SIGKILL after the grace period, and dlock exits with EXIT_LEASE_LOST.
 *
 * The job: the command runs in a process group of its own, and every signal
 * goes to that whole group, so helpers it started in the background stop
 * with it.  dlock is the job's subreaper: orphaned processes of the job are
 * reparented to it and reaped here.  The lock is released only once the
 * group is empty; members left when the command exits get SIGTERM, then
 * SIGKILL after the grace period, first.  When dlock runs in the
 * foreground of a terminal, the terminal is handed to the job's group (as
 * a shell does) and taken back at the end, so the job can read it and a
 * Ctrl-C reaches it; a job stopped (Ctrl-Z) is continued at once: a
 * suspended holder would keep the lock renewed with nobody working.
 *
 * Locking: 'mu' protects the fields of Shared below it; the renewer waits
 * on 'cv' for its next renewal or for stop.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dlock.h"

/* Between tries of a failed renewal (doubling). */
#define RETRY_MIN_S		0.1
#define RETRY_MAX_S		1.0
/*
 * The longest single call of a wait: the wait is a loop of such calls
 * that keep the request's place in line between them, so a connection
 * through a pooler (pgbouncer in transaction mode) is busy for one short
 * call at a time, and a signal ends the wait within one call.
 */
#define WAIT_CALL_S		0.5
/*
 * The pause after a call that returned at once, behind another request:
 * doubling from the first, at most the second (which bounds how long a
 * grant made between two calls waits for its collecting call).
 */
#define WAIT_PAUSE_MIN_S 0.01
#define WAIT_PAUSE_MAX_S 0.1
/* How long to wait for the renewer to finish before exiting anyway. */
#define JOIN_WAIT_S		2
/* How long a job's group may take to go after SIGKILL (D state, NFS). */
#define KILL_WAIT_S		5.0
/* How often an emptying group is looked at (its members are not our children). */
#define GROUP_POLL_S	0.05

typedef struct Shared
{
	const RunOpts *o;
	const char *owner;
	double		period;			/* between renewals: ttl/3 */
	double		margin;
	int			lost_fd;		/* eventfd: renewer -> main, lease lost */

	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool		stop;			/* main -> renewer: the command has ended */
	double		last_sent;		/* send time of the last good renewal */
	double		deadline;		/* last_sent + ttl - margin */
} Shared;

typedef struct AcqJob
{
	const RunOpts *o;
	Db		   *db;
	const char *owner;
	int			done_fd;
	atomic_bool stop;			/* main -> acquirer: a signal came, give up */
	double		sent;			/* the lease counts from here */
	DbStatus	st;
	DbFailure	fail;			/* the wait's error, before the clean-up's */
	long long	token;
} AcqJob;

typedef struct RelJob
{
	const RunOpts *o;
	Db		   *db;				/* NULL after a failed reconnect */
	const char *owner;
	int			done_fd;
	DbStatus	st;
	char		err[1024];
} RelJob;

static void *acquire_main(void *arg);
static void *release_main(void *arg);
static void *renew_main(void *arg);
static bool group_gone(pid_t pgid);
static void reap(pid_t child, int *status, bool *reaped, bool *stopped);
static int	wait_ms(double seconds);
static void notify(int fd);

/*
 * cmd_run
 *		The whole of dlock run; returns the exit code.
 */
int
cmd_run(const RunOpts *o)
{
	const DbOps *ops = db_ops_for(&o->target);
	char		owner[33];
	char		err[1024];
	char		tokbuf[32];
	sigset_t	mask,
				oldmask;
	int			sigfd,
				donefd,
				lostfd;
	Db		   *db;
	AcqJob		job;
	pthread_t	acq,
				renewer;
	int			got_signal = 0;
	pid_t		child;
	int			status = 0;
	Shared		sh;
	enum
	{
		NOT_LOST, LOST_SERVER, LOST_DEADLINE
	}			lost = NOT_LOST;
	bool		killed = false;
	bool		stopping = false;	/* SIGTERM sent to the group */
	bool		reaped = false;
	bool		tty;
	bool		renewer_started;
	double		kill_at = 0;
	int			rc;

	if (!new_owner_key(owner))
	{
		warnx_("cannot read random bytes for an owner key: %s", strerror(errno));
		return EXIT_OSERR;
	}

	/*
	 * Block the signals we handle in every thread to come; they are read
	 * from the signalfd.  The command gets the old mask back.
	 */
	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGHUP);
	signal(SIGPIPE, SIG_IGN);
	if (sigprocmask(SIG_BLOCK, &mask, &oldmask) != 0 ||
		(sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK)) < 0 ||
		(donefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0 ||
		(lostfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0)
	{
		warnx_("cannot set up signal handling: %s", strerror(errno));
		return EXIT_OSERR;
	}
	{
		/* to take the terminal back from the job's group at the end */
		sigset_t	ttou;

		sigemptyset(&ttou);
		sigaddset(&ttou, SIGTTOU);
		sigprocmask(SIG_BLOCK, &ttou, NULL);
	}

	db = ops->connect(&o->target, 0, err, sizeof(err));
	if (db == NULL)
	{
		warnx_("lock \"%s\": cannot connect: %s", o->name, err);
		return EXIT_UNAVAILABLE;
	}

	/* wait in a thread, so that a signal is seen while it waits */
	memset(&job, 0, sizeof(job));
	job.o = o;
	job.db = db;
	job.owner = owner;
	job.done_fd = donefd;
	if (pthread_create(&acq, NULL, acquire_main, &job) != 0)
	{
		warnx_("cannot start a thread");
		return EXIT_OSERR;
	}
	for (;;)
	{
		struct pollfd pfd[2] = {{sigfd, POLLIN, 0}, {donefd, POLLIN, 0}};
		struct signalfd_siginfo si;

		if (poll(pfd, 2, -1) < 0 && errno != EINTR)
			break;
		if (pfd[1].revents & POLLIN)
			break;
		while (read(sigfd, &si, sizeof(si)) == sizeof(si))
			if (si.ssi_signo != SIGCHLD)
			{
				/* the acquirer ends after its call and withdraws the request */
				got_signal = si.ssi_signo;
				atomic_store(&job.stop, true);
			}
	}
	pthread_join(acq, NULL);

	if (job.st == DB_OK && got_signal)
	{
		/* granted as we were told to stop: give it back */
		ops->release_all(db, owner);
	}
	if (got_signal)
	{
		warnx_("interrupted while waiting for lock \"%s\"", o->name);
		return 128 + got_signal;
	}
	switch (job.st)
	{
		case DB_OK:
			break;
		case DB_NULL:
			if (o->timeout == 0)
				warnx_("lock \"%s\" is busy", o->name);
			else
				warnx_("lock \"%s\" not acquired within %gs", o->name, o->timeout);
			ops->close(db);
			return EXIT_NOT_ACQUIRED;
		default:
			report_failure(&job.fail, "acquire \"%s\"", o->name);
			ops->close(db);
			return EXIT_UNAVAILABLE;
	}

	/*
	 * A wait may have lasted longer than the lease: its deadline would
	 * count from the send.  Renew now, so the deadline counts from a send
	 * just past the grant.
	 */
	if (now_mono() - job.sent > o->ttl / 10)
	{
		double		sent = now_mono();
		DbStatus	st = ops->renew(db, o->name, o->ttl, owner);

		if (st != DB_OK)
		{
			report_db(db, "renew \"%s\"", o->name);
			if (st != DB_LOST)
				ops->release(db, o->name, owner);
			ops->close(db);
			return st == DB_LOST ? EXIT_LEASE_LOST : EXIT_UNAVAILABLE;
		}
		job.sent = sent;
	}

	/* a signal that came while the grant was on its way: do not start */
	{
		struct signalfd_siginfo si;

		while (read(sigfd, &si, sizeof(si)) == sizeof(si))
			if (si.ssi_signo != SIGCHLD)
				got_signal = si.ssi_signo;
		if (got_signal)
		{
			ops->release(db, o->name, owner);
			ops->close(db);
			return 128 + got_signal;
		}
	}

	snprintf(tokbuf, sizeof(tokbuf), "%lld", job.token);
	if (setenv("DLOCK_TOKEN", tokbuf, 1) != 0 ||
		setenv("DLOCK_NAME", o->name, 1) != 0 ||
		setenv("DLOCK_OWNER", owner, 1) != 0)
	{
		warnx_("cannot set the environment: %s", strerror(errno));
		ops->release(db, o->name, owner);
		return EXIT_OSERR;
	}

	/*
	 * The job's orphans come to us (so they are reaped, and the group
	 * empties); the terminal goes to the job if it is ours now.
	 */
	(void) prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
	tty = isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) == getpgrp();

	/* no other thread runs now: fork is safe */
	fflush(NULL);
	child = fork();
	if (child < 0)
	{
		warnx_("cannot fork: %s", strerror(errno));
		ops->release(db, o->name, owner);
		return EXIT_OSERR;
	}
	if (child == 0)
	{
		int			e;

		/* both sides set the group (and the terminal): whichever runs first */
		setpgid(0, 0);
		if (tty)
			tcsetpgrp(STDIN_FILENO, getpid());	/* SIGTTOU is blocked here */
		sigprocmask(SIG_SETMASK, &oldmask, NULL);
		signal(SIGPIPE, SIG_DFL);
		execvp(o->argv[0], o->argv);
		e = errno;
		fprintf(stderr, "dlock: cannot run %s: %s\n", o->argv[0], strerror(e));
		/* as shells do: 127 not found, 126 found but not runnable */
		_exit(e == ENOENT ? 127 : 126);
	}
	/* the group's id is the child's pid: valid while anyone is in it */
	setpgid(child, child);
	if (tty)
		tcsetpgrp(STDIN_FILENO, child);

	memset(&sh, 0, sizeof(sh));
	sh.o = o;
	sh.owner = owner;
	sh.period = o->ttl / 3;
	sh.margin = fmin(o->ttl * 0.1, 1.0);
	sh.lost_fd = lostfd;
	sh.last_sent = job.sent;
	sh.deadline = job.sent + o->ttl - sh.margin;
	{
		pthread_condattr_t ca;

		pthread_mutex_init(&sh.mu, NULL);
		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&sh.cv, &ca);
		pthread_condattr_destroy(&ca);
	}
	renewer_started = pthread_create(&renewer, NULL, renew_main, &sh) == 0;
	if (!renewer_started)
	{
		/* without renewals the deadline below still stops the command */
		warnx_("cannot start the renewal thread");
	}

	/*
	 * The loop: reap the command, pass signals on to its group, watch the
	 * lease; once the command is gone, wait for the rest of its group.
	 * Stopping the job is SIGTERM to the group, SIGKILL --grace later.
	 */
	for (;;)
	{
		struct pollfd pfd[2] = {{sigfd, POLLIN, 0}, {lostfd, POLLIN, 0}};
		struct signalfd_siginfo si;
		double		now = now_mono();
		double		deadline;
		double		wait = -1;
		bool		stopped = false;

		pthread_mutex_lock(&sh.mu);
		deadline = sh.deadline;
		pthread_mutex_unlock(&sh.mu);
		if (lost == NOT_LOST && now >= deadline)
		{
			lost = LOST_DEADLINE;
			warnx_("lease of lock \"%s\" lost: no renewal succeeded in time; stopping the command",
				   o->name);
			kill(-child, SIGTERM);
			if (!stopping)
				kill_at = now + o->grace;
			stopping = true;
		}
		if (stopping && !killed && now >= kill_at)
		{
			kill(-child, SIGKILL);
			killed = true;
		}
		if (reaped)
		{
			if (group_gone(child))
				break;
			if (!stopping)
			{
				/* helpers left running must not go on without the lock */
				warnx_("lock \"%s\": the command exited, processes of its group remain; stopping them",
					   o->name);
				kill(-child, SIGTERM);
				kill(-child, SIGCONT);
				stopping = true;
				kill_at = now + o->grace;
			}
			if (killed && now >= kill_at + KILL_WAIT_S)
			{
				warnx_("lock \"%s\": processes of the command's group outlived SIGKILL by %gs",
					   o->name, KILL_WAIT_S);
				break;
			}
			wait = GROUP_POLL_S;
		}
		if (lost == NOT_LOST && (wait < 0 || deadline - now < wait))
			wait = fmax(deadline - now, 0);
		if (stopping && !killed && (wait < 0 || kill_at - now < wait))
			wait = fmax(kill_at - now, 0);

		if (poll(pfd, 2, wait < 0 ? -1 : wait_ms(wait)) < 0 && errno != EINTR)
		{
			warnx_("poll: %s", strerror(errno));
			kill(-child, SIGKILL);
			killed = stopping = true;
		}
		while (read(sigfd, &si, sizeof(si)) == sizeof(si))
		{
			if (si.ssi_signo == SIGCHLD)
				reap(child, &status, &reaped, &stopped);
			else
			{
				/* the job decides; if it is still there --grace later, SIGKILL */
				kill(-child, si.ssi_signo);
				kill(-child, SIGCONT);
				if (!stopping)
					kill_at = now_mono() + o->grace;
				stopping = true;
			}
		}
		if (stopped && tty)
		{
			warnx_("lock \"%s\": the command was stopped; continuing it (it holds the lock)",
				   o->name);
			kill(-child, SIGCONT);
		}
		if (pfd[1].revents & POLLIN)
		{
			uint64_t	v;

			if (read(lostfd, &v, sizeof(v)) == sizeof(v) && lost == NOT_LOST)
			{
				lost = LOST_SERVER;
				warnx_("lease of lock \"%s\" lost: %s; stopping the command",
					   o->name, "the server says it is no longer held");
				kill(-child, SIGTERM);
				kill(-child, SIGCONT);
				if (!stopping)
					kill_at = now_mono() + o->grace;
				stopping = true;
			}
		}
	}
	if (tty)
		tcsetpgrp(STDIN_FILENO, getpgrp());	/* SIGTTOU is blocked */

	pthread_mutex_lock(&sh.mu);
	sh.stop = true;
	pthread_cond_signal(&sh.cv);
	pthread_mutex_unlock(&sh.mu);

	if (WIFEXITED(status))
		rc = WEXITSTATUS(status);
	else if (WIFSIGNALED(status))
		rc = 128 + WTERMSIG(status);
	else
		rc = EXIT_OSERR;

	if (lost != NOT_LOST)
		rc = EXIT_LEASE_LOST;
	else
	{
		/*
		 * Release in a thread, bounded by the ttl: past it the lease has
		 * run out anyway, and a hung server must not keep us.
		 */
		RelJob		rj;
		pthread_t	rel;
		struct pollfd pfd = {donefd, POLLIN, 0};
		uint64_t	v;

		memset(&rj, 0, sizeof(rj));
		rj.o = o;
		rj.db = db;
		rj.owner = owner;
		rj.done_fd = donefd;
		rj.st = DB_CONN;
		if (read(donefd, &v, sizeof(v)) < 0)
		{
			/* the acquirer's word was read already: nothing to clear */
		}
		if (pthread_create(&rel, NULL, release_main, &rj) != 0)
			release_main(&rj);
		else if (poll(&pfd, 1, wait_ms(o->ttl)) > 0)
			pthread_join(rel, NULL);
		else
		{
			warnx_("release \"%s\": no answer within %gs; it is freed when its lease runs out",
				   o->name, o->ttl);
			return rc;
		}
		db = rj.db;
		if (rj.st == DB_NULL)
		{
			/* nobody stopped the command, yet it did not hold the lock to the end */
			warnx_("lock \"%s\" was no longer held when the command ended (lease lost)",
				   o->name);
			rc = EXIT_LEASE_LOST;
		}
		else if (rj.st != DB_OK)
			warnx_("release \"%s\": %s; it is freed when its lease runs out",
				   o->name, rj.err);
	}
	if (db)
		ops->close(db);

	/* after a loss the renewer may hang on a dead link: do not wait for it */
	if (renewer_started && lost == NOT_LOST)
	{
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += JOIN_WAIT_S;
		/* a renewal hung on a dead link must not keep us */
		pthread_timedjoin_np(renewer, NULL, &ts);
	}
	return rc;
}

/*
 * nap_until_stop
 *		Sleep about s seconds (not past end when the wait has a timeout), in
 *		short steps that notice a stop.
 */
static void
nap_until_stop(AcqJob *j, double s, double end)
{
	double		until = now_mono() + s;

	if (j->o->timeout > 0 && until > end)
		until = end;
	while (!atomic_load(&j->stop) && now_mono() < until)
	{
		double		left = until - now_mono();
		struct timespec ts;

		if (left > 0.01)
			left = 0.01;
		ts.tv_sec = 0;
		ts.tv_nsec = (long) (left * 1e9);
		nanosleep(&ts, NULL);
	}
}

/*
 * acquire_main
 *		The acquirer thread: one dlock_acquire (or dlock_try_acquire for
 *		--timeout 0), then a word on done_fd.
 */
static void *
acquire_main(void *arg)
{
	AcqJob	   *j = arg;
	const DbOps *ops = j->db->ops;
	double		end = now_mono() + j->o->timeout;
	double		prev = 0;
	double		pause = 0;

	if (j->o->timeout == 0)
	{
		j->sent = now_mono();
		j->st = ops->try_acquire(j->db, j->o, j->owner, &j->token);
		if (j->st != DB_OK && j->st != DB_NULL)
			db_failure(j->db, &j->fail);
		notify(j->done_fd);
		return NULL;
	}
	for (;;)
	{
		double		sent = now_mono();
		double		call = WAIT_CALL_S;

		if (atomic_load(&j->stop))
		{
			j->st = DB_CANCELED;
			break;
		}
		if (j->o->timeout > 0)
		{
			if (end - sent < 0.01)
			{
				j->st = DB_NULL;	/* timed out */
				break;
			}
			if (end - sent < call)
				call = end - sent;
		}
		j->st = ops->acquire(j->db, j->o, call, j->owner, &j->token);
		if (j->st != DB_NULL)
		{
			/*
			 * A place granted between two calls started its lease after the
			 * earlier call was sent: count from there.
			 */
			j->sent = prev > 0 ? prev : sent;
			break;
		}
		prev = sent;

		/*
		 * A call behind another request returns at once, its place kept (the
		 * server waits only for the first in line): pause before the next,
		 * longer while it stays behind.
		 */
		if (now_mono() - sent < call / 2)
		{
			pause = pause > 0 ? pause * 2 : WAIT_PAUSE_MIN_S;
			if (pause > WAIT_PAUSE_MAX_S)
				pause = WAIT_PAUSE_MAX_S;
			nap_until_stop(j, pause * (0.5 + 0.5 * (double) random() / RAND_MAX), end);
		}
		else
			pause = 0;
	}

	/*
	 * Whatever ended the wait but a grant: no kept place may stay in line.
	 * The key is ours alone, so dlock_release_all takes everything of it.
	 */
	if (j->st != DB_OK && j->st != DB_NULL && j->st != DB_CANCELED)
		db_failure(j->db, &j->fail);
	if (j->st != DB_OK)
		(void) ops->release_all(j->db, j->owner);
	notify(j->done_fd);
	return NULL;
}

/*
 * release_main
 *		The final release: on the acquiring connection, once more on a new
 *		one if that broke (an idle connection may have been closed).
 */
static void *
release_main(void *arg)
{
	RelJob	   *j = arg;
	const DbOps *ops = db_ops_for(&j->o->target);

	j->st = ops->release(j->db, j->o->name, j->owner);
	if (j->st == DB_CONN)
	{
		ops->close(j->db);
		j->db = ops->connect(&j->o->target, 0, j->err, sizeof(j->err));
		j->st = j->db ? ops->release(j->db, j->o->name, j->owner) : DB_CONN;
	}
	if (j->db && j->st != DB_OK && j->st != DB_NULL)
		snprintf(j->err, sizeof(j->err), "%s", ops->error(j->db));
	notify(j->done_fd);
	return NULL;
}

/*
 * renew_main
 *		The renewer thread: every ttl/3 renews the lease on a connection of
 *		its own (made again when it breaks), retrying a failure with growing
 *		pauses until the local deadline.  Reports DL001 on lost_fd; a
 *		deadline that passes is the main thread's to see.
 */
static void *
renew_main(void *arg)
{
	Shared	   *sh = arg;
	const RunOpts *o = sh->o;
	const DbOps *ops = db_ops_for(&o->target);
	Db		   *db = NULL;
	double		next = sh->last_sent + sh->period;
	double		pause = RETRY_MIN_S;
	int			io_timeout = (int) ceil(sh->period);
	bool		failing = false;

	if (io_timeout < 1)
		io_timeout = 1;
	pthread_mutex_lock(&sh->mu);
	for (;;)
	{
		double		sent = 0;
		DbStatus	st;
		char		err[1024];

		while (!sh->stop && now_mono() < next)
		{
			struct timespec ts;
			double		t = next;

			ts.tv_sec = (time_t) t;
			ts.tv_nsec = (long) ((t - (double) ts.tv_sec) * 1e9);
			pthread_cond_timedwait(&sh->cv, &sh->mu, &ts);
		}
		if (sh->stop)
			break;
		pthread_mutex_unlock(&sh->mu);

		if (db == NULL)
			db = ops->connect(&o->target, io_timeout, err, sizeof(err));
		if (db == NULL)
			st = DB_CONN;
		else
		{
			sent = now_mono();
			st = ops->renew(db, o->name, o->ttl, sh->owner);
			snprintf(err, sizeof(err), "%s", ops->error(db));
			if (st == DB_CONN)
			{
				ops->close(db);
				db = NULL;
			}
		}

		pthread_mutex_lock(&sh->mu);
		if (sh->stop)
			break;
		if (st == DB_OK)
		{
			sh->last_sent = sent;
			sh->deadline = sent + o->ttl - sh->margin;
			next = sent + sh->period;
			pause = RETRY_MIN_S;
			if (failing)
				warnx_("renew \"%s\": succeeded again", o->name);
			failing = false;
			continue;
		}
		if (st == DB_LOST)
		{
			notify(sh->lost_fd);
			break;
		}
		/* connection lost or a server error: try again until the deadline */
		warnx_("renew \"%s\": %s", o->name, err);
		failing = true;
		if (now_mono() >= sh->deadline)
			break;
		next = now_mono() + pause;
		pause = fmin(pause * 2, fmin(RETRY_MAX_S, sh->period));
	}
	pthread_mutex_unlock(&sh->mu);
	if (db)
		ops->close(db);
	return NULL;
}

/*
 * group_gone
 *		No process is left in the job's group (zombies count until reaped:
 *		ours are reaped in reap(), the subreaper's).
 */
static bool
group_gone(pid_t pgid)
{
	return kill(-pgid, 0) != 0 && errno == ESRCH;
}

/*
 * reap
 *		Every child that changed state: the command (its status kept, or
 *		*stopped when Ctrl-Z stopped it), and the job's orphans,
 *		which are ours as their subreaper.
 */
static void
reap(pid_t child, int *status, bool *reaped, bool *stopped)
{
	for (;;)
	{
		int			st;
		pid_t		p = waitpid(-1, &st, WNOHANG | WUNTRACED);

		if (p <= 0)
			return;
		if (p == child && WIFSTOPPED(st))
		{
			/* Ctrl-Z only: a SIGTTIN continued would stop again at once */
			if (WSTOPSIG(st) == SIGTSTP)
				*stopped = true;
		}
		else if (p == child)
		{
			*status = st;
			*reaped = true;
		}
	}
}

/* wait_ms: seconds to a poll() timeout, rounded up so we never wake early. */
static int
wait_ms(double seconds)
{
	if (seconds <= 0)
		return 0;
	if (seconds > 86400)
		return 86400 * 1000;
	return (int) ceil(seconds * 1000) + 1;
}

static void
notify(int fd)
{
	uint64_t	one = 1;

	if (write(fd, &one, sizeof(one)) < 0)
	{
		/* an eventfd write fails only on overflow: the word is there */
	}
}
