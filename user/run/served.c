// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "collect/recording.h"
#include "util/clock.h"
#include "run/opts.h"
#include "util/errmsg.h"
#include "sampling/guard.h"
#include "collect/replay.h"
#include "sampling/runs.h"
#include "sampling/serve.h"
#include "sampling/session.h"
#include "run/served.h"
#include "run/top.h"
#include "run/window.h"

bool served_can(const struct run *r, size_t ntargets)
{
	const struct run_opts *o = r->opts;

	return r->servable && !o->watch && !o->interval && !o->reset && !o->record &&
	       !o->follow_forks && !o->children && !o->live_heap && ntargets == 1;
}

/* The stop signals (blocked since main's start) as a descriptor: they end the window early. */
static int stop_signals(void)
{
	sigset_t set;

	session_stop_signals(&set);
	return signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
}

/* What was replayed made into tr's outputs, as heapbpf report makes them. */
static int write_replayed(struct target_run *tr, struct replay *rp, char *err, size_t errlen)
{
	const struct jemalloc_target *t = tr->t;
	struct heap_data d = {
		.collector = rp->collector,
		.symbolizer = rp->symbolizer,
		.counters = &rp->counters,
	};
	int rc;

	tr->t = &rp->ident;
	tr->start_ns = rp->start_wall_ns;
	rc = window_last(tr, &d, rp->start_wall_ns + rp->duration_ns, err, errlen);
	tr->t = t;
	return rc;
}

/* The recording in fd made into tr's outputs. */
static int write_window(struct target_run *tr, int fd, char *err, size_t errlen)
{
	const struct run_opts *o = tr->run->opts;
	struct replay_opts ro = { .to = -1, .temporary_ns = o->temporary_ns };
	struct replay *rp;
	char path[64];
	int rc;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	rc = replay__load(path, &ro, &rp, err, errlen);
	if (rc)
		return rc;
	rc = write_replayed(tr, rp, err, errlen);
	replay__free(rp);
	return rc;
}

/* The run that holds tr's process, said with what this run has from it (what). */
static pid_t say_holder(const struct target_run *tr, const struct jemalloc_target *t,
			const char *what, char *err, size_t errlen)
{
	const struct run_opts *o = tr->run->opts;
	pid_t holder = runs_lock_holder(guard_dir(), tr->pid);
	char comm[HB_CLEAN_SIZE(sizeof(t->comm))], version[HB_CLEAN_SIZE(sizeof(t->version))];
	char path[HB_CLEAN_SIZE(256)];
	struct runs_entry e;

	if (holder <= 0)
		return hb_fail(err, errlen, -EAGAIN,
			       "pid %d was held by another heapbpf, which %s; run again", tr->pid,
			       holder ? "is still taking it" : "let it go meanwhile");
	if (runs_holder_of(guard_dir(), tr->pid, &e))
		snprintf(e.mode, sizeof(e.mode), "run");
	hb_note("pid %d (%s): jemalloc %s in %s, sampling every %llu bytes on average, by heapbpf "
		"%s (pid %d), which holds it: %s comes from it%s",
		tr->pid, hb_clean(comm, sizeof(comm), t->comm),
		hb_clean(version, sizeof(version), t->version),
		hb_clean(path, sizeof(path), t->path), 1ULL << t->lg_prof_sample, e.mode, holder,
		what, o->duration > 0 || tr->run->view ? "" : "; Ctrl-C to stop");
	return holder;
}

/* A file for the recording and the stop signals as a descriptor; 0 or negative errno. */
static int open_fds(int *fd, int *sfd, char *err, size_t errlen)
{
	int rc;

	*fd = memfd_create("heapbpf-window", MFD_CLOEXEC);
	*sfd = stop_signals();
	if (*fd >= 0 && *sfd >= 0)
		return 0;
	rc = -errno;
	if (*fd >= 0)
		close(*fd);
	if (*sfd >= 0)
		close(*sfd);
	return hb_fail(err, errlen, rc, "cannot ask for the window: %s", strerror(-rc));
}

int served_window(struct target_run *tr, const struct jemalloc_target *t, char *err, size_t errlen)
{
	const struct run_opts *o = tr->run->opts;
	pid_t holder = say_holder(tr, t, "this run's window", err, errlen);
	int rc, fd, sfd;

	if (holder < 0)
		return holder;
	rc = open_fds(&fd, &sfd, err, errlen);
	if (rc)
		return rc;
	rc = serve_ask(guard_dir(), holder, tr->pid, (uint64_t)(o->duration * 1e9), fd, sfd, err,
		       errlen);
	close(sfd);
	tr->t = t;
	rc = rc ?: write_window(tr, fd, err, errlen);
	close(fd);
	return rc;
}

/* ---- heapbpf top, served ---- */

/* A served top: the window read as it grows, and the view's side (top.h). */
struct served_top {
	int fd; /* the recording, the holder's to write */
	struct replay_opts ro;
	struct replay_feed *feed; /* NULL until the holder has written its header */
	struct session s;	  /* what top reads: the feed's, no session of our own */
	struct session_opts so;	  /* top's interval and watches */
};

/*
 * What the holder wrote since the last second into the feed, the file's
 * pages read freed (a view that runs for hours holds no more than a second
 * of it), and the session top reads pointed at it. 1 when there is
 * something to show, 0 before the holder's header, or negative errno.
 */
static int feed_step(struct served_top *st, bool last, char *err, size_t errlen)
{
	struct replay *rp;
	struct stat sb;
	char path[64];
	off_t off;
	int rc;

	if (!st->feed) {
		if (fstat(st->fd, &sb))
			return hb_fail(err, errlen, -errno, "cannot read the window: %s",
				       strerror(errno));
		if (sb.st_size < RECORDING_HEADER_LEN && !last)
			return 0;
		snprintf(path, sizeof(path), "/proc/self/fd/%d", st->fd);
		rc = replay_feed__open(path, &st->ro, &st->feed, err, errlen);
		if (rc)
			return rc;
	}
	rc = replay_feed__read(st->feed, last, err, errlen);
	if (rc)
		return rc;
	off = (off_t)(replay_feed__file_offset(st->feed) & ~(uint64_t)4095);
	if (off > 0)
		fallocate(st->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, off);
	rp = replay_feed__replay(st->feed);
	if (!rp->collector)
		return 0;
	st->s.collector = rp->collector;
	st->s.symbolizer = rp->symbolizer;
	st->s.counters = rp->counters;
	st->s.start_wall_ns = rp->start_wall_ns;
	return 1;
}

/* One of the view's descriptors: 1 the view ends (q, the terminal gone), or negative errno. */
static int top_event(struct served_top *st, int fd, char *err, size_t errlen)
{
	uint64_t n;
	int rc;

	for (size_t i = 0; i < st->so.nwatch; i++) {
		if (st->so.watch[i].fd == fd)
			return st->so.watch[i].on_ready(&st->s, st->so.watch[i].arg);
	}
	/* the second's timer */
	if (read(fd, &n, sizeof(n)) != sizeof(n))
		return 0;
	rc = feed_step(st, false, err, errlen);
	if (rc <= 0)
		return rc;
	return st->so.on_interval(&st->s, st->so.interval_arg);
}

/*
 * The view until it ends: q, a stop signal, the terminal gone, -d's
 * seconds passed (1), the holder done with the window (conn readable: the
 * process exited, or the holder stopped; 2), or an error.
 */
static int top_loop(struct served_top *st, int conn, int sfd, double duration, char *err,
		    size_t errlen)
{
	struct itimerspec its = { .it_value.tv_sec = 1, .it_interval.tv_sec = 1 };
	struct pollfd pf[3 + SESSION_MAX_WATCH];
	int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK), rc = 0;
	int64_t end =
		duration > 0 ? (hb_clock_ns(CLOCK_MONOTONIC) / 1000000) + (int64_t)(duration * 1000)
			     : 0;
	size_t n = 3;

	if (tfd < 0 || timerfd_settime(tfd, 0, &its, NULL)) {
		rc = hb_fail(err, errlen, -errno, "cannot time the view: %s", strerror(errno));
		if (tfd >= 0)
			close(tfd);
		return rc;
	}
	pf[0] = (struct pollfd){ .fd = conn, .events = POLLIN };
	pf[1] = (struct pollfd){ .fd = sfd, .events = POLLIN };
	pf[2] = (struct pollfd){ .fd = tfd, .events = POLLIN };
	for (size_t i = 0; i < st->so.nwatch; i++)
		pf[n++] = (struct pollfd){ .fd = st->so.watch[i].fd, .events = POLLIN };
	while (!rc) {
		int64_t left = end ? end - (hb_clock_ns(CLOCK_MONOTONIC) / 1000000) : -1;
		int ready;

		if (end && left <= 0) {
			rc = 1;
			break;
		}
		ready = poll(pf, n, left > INT32_MAX ? INT32_MAX : (int)left);
		if (ready < 0) {
			if (errno == EINTR)
				continue;
			rc = hb_fail(err, errlen, -errno, "poll: %s", strerror(errno));
			break;
		}
		if (pf[0].revents)
			rc = 2;
		else if (pf[1].revents)
			rc = 1;
		for (size_t i = 2; !rc && i < n; i++) {
			if (pf[i].revents)
				rc = top_event(st, pf[i].fd, err, errlen);
		}
	}
	close(tfd);
	return rc;
}

/* Why the holder ended a view, as its recording's end says. */
static void say_end(const struct target_run *tr, pid_t holder, const struct replay *rp)
{
	if (rp->stopped && rp->reason == STOP_TARGET_EXIT)
		hb_note("pid %d exited", tr->pid);
	else
		hb_note("heapbpf pid %d, which held pid %d, let it go: so does this view", holder,
			tr->pid);
}

int served_top(struct target_run *tr, const struct jemalloc_target *t, const struct top_opts *to,
	       char *err, size_t errlen)
{
	const struct run_opts *o = tr->run->opts;
	struct served_top st = {
		.ro = { .to = -1, .temporary_ns = o->temporary_ns },
	};
	pid_t holder = say_holder(tr, t, "top's view", err, errlen);
	struct top *top = NULL;
	int rc, conn, sfd, why;

	if (holder < 0)
		return holder;
	rc = open_fds(&st.fd, &sfd, err, errlen);
	if (rc)
		return rc;
	conn = serve_send(guard_dir(), holder, tr->pid, 0, st.fd, err, errlen);
	if (conn < 0) {
		close(st.fd);
		close(sfd);
		return conn;
	}
	rc = top__new(to, &top, err, errlen);
	if (!rc) {
		top__session_opts(top, &st.so);
		rc = top_loop(&st, conn, sfd, o->duration, err, errlen);
	}
	/* the terminal as it was, before anything more is said */
	top__free(top);
	close(sfd);
	why = rc;
	/* the holder ends the window once this end is shut, and says how it went */
	shutdown(conn, SHUT_WR);
	rc = serve_answer(conn, holder, rc < 0 ? NULL : err, errlen);
	rc = why < 0 ? why : rc;
	if (!rc) {
		int fr = feed_step(&st, true, err, errlen);

		rc = fr < 0 ? fr : 0;
	}
	/* the holder ended it: the process exited, or the holder's run did */
	if (!rc && why == 2)
		say_end(tr, holder, replay_feed__replay(st.feed));
	tr->t = t;
	if (!rc)
		rc = write_replayed(tr, replay_feed__replay(st.feed), err, errlen);
	replay_feed__free(st.feed);
	close(st.fd);
	return rc;
}
