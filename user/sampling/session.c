// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stddef.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "util/clock.h"
#include "util/hooks.h"
#include "util/errmsg.h"
#include "sampling/forks.h"
#include "sampling/guard.h"
#include "util/hashmap.h"
#include "sampling/oom.h"
#include "sampling/privs.h"
#include "sampling/probes.h"
#include "collect/recording.h"
#include "sampling/selfcheck.h"
#include "sampling/loop.h"
#include "sampling/serve.h"
#include "sampling/session.h"
#include "sampling/toggle.h"
#include "sampling/vclock.h"
#include "util/version.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

void session_stop_signals(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGINT);
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGHUP);
}

int session_block_signals(void)
{
	sigset_t set;

	session_stop_signals(&set);
	/*
	 * SIGUSR1 ("write now") never kills a run: the modes where it means
	 * something read it through a signalfd of theirs (watch, the agent,
	 * --interval), the others leave it pending, ignored
	 */
	sigaddset(&set, SIGUSR1);
	signal(SIGPIPE, SIG_IGN);
	return sigprocmask(SIG_BLOCK, &set, NULL) ? -errno : 0;
}

/*
 * Of one target: the session's error; of several: said, and that target left
 * out; of a node session: that target's error, returned to session_add.
 */
__attribute__((format(printf, 4, 5))) static int member_fail(struct loop *l, struct member *m,
							     int rc, const char *fmt, ...)
{
	char msg[1024], clean[HB_CLEAN_SIZE(sizeof(msg))];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (l->node)
		m->s->failed = rc;
	if (l->n == 1 || l->node)
		return hb_fail(l->err, l->errlen, rc, "%s", msg);
	hb_error("%s; profiling the other targets", hb_clean(clean, sizeof(clean), msg));
	m->s->failed = rc;
	return 0;
}

/* The state file a later run restores from, should this one be killed -9. */
static int save_state(void *arg, uint64_t addr, uint8_t orig)
{
	return guard__save(arg, addr, orig, NULL) ? -EROFS : 0;
}

static int record_header(struct session *s, const struct jemalloc_target *t)
{
	return loop_record_header_to(s->recorder, s->symbolizer, t);
}

static void record_start(struct session *s, int64_t t0, uint64_t attach_coarse)
{
	struct recorder *r = s->recorder;
	int err = 0;

	err = err ?: loop_record_meta_u64(r, "attach_coarse_ns", attach_coarse);
	err = err ?: loop_record_meta_u64(r, "start_mono_ns", (uint64_t)t0);
	err = err ?: loop_record_meta_u64(r, "start_wall_ns", (uint64_t)s->start_wall_ns);
	if (err && !s->record_err)
		s->record_err = err;
}

static void record_stop(struct session *s, int64_t stop_mono, uint64_t attach_coarse)
{
	struct rec_stop st = {
		.stop_mono_ns = (uint64_t)stop_mono,
		.attach_coarse_ns = attach_coarse,
		.duration_ns = (uint64_t)s->duration_ns,
		.alloc_hits = s->counters.alloc_hits,
		.free_hits = s->counters.free_hits,
		.alloc_drops = s->counters.alloc_drops,
		.free_drops = s->counters.free_drops,
		.read_faults = s->counters.read_faults,
		.reason = s->reason,
	};
	int err = recording__stop(s->recorder, &st);

	if (err && !s->record_err)
		s->record_err = err;
}

/*
 * A target exited: with one, the session ends; with several, its collection
 * stops at this instant (its flag went with it: nothing is ever written to a
 * new process under its pid) and the others go on, until the last one exits.
 */
static int member_exit(struct loop *l, struct member *m)
{
	struct pollfd pf = { .fd = m->pfd, .events = POLLIN };
	int64_t now = hb_clock_ns(CLOCK_MONOTONIC);
	char comm[HB_CLEAN_SIZE(sizeof(m->t->comm))];
	int rc;

	/* a node session's slot taken by another target since this event was read */
	if (l->node && poll(&pf, 1, 0) <= 0)
		return 0;
	epoll_ctl(l->ep, EPOLL_CTL_DEL, m->pfd, NULL);
	/* one refused at the start (member_fail) was never counted among those running */
	if (!m->running)
		return 0;
	m->running = false;
	l->running--;
	/* what it sampled until it exited is in the ring buffer: its collector takes it all */
	loop_consume(l->rb);
	taps_end(l, m, STOP_TARGET_EXIT);
	/* killed for memory: its OOM profile first (heapbpf watch) */
	rc = events_run_oom(l);
	if (rc)
		return rc;
	if (loop_single(l)) {
		l->s->reason = STOP_TARGET_EXIT;
		return 1;
	}
	m->tg.changed = false;
	/* a new process under its pid is not ours */
	loop_untrack(l, m->t->pid);
	m->s->exited = true;
	/* a node session's target joined after the start: its own span */
	m->s->duration_ns = l->node ? hb_clock_ns(CLOCK_REALTIME) - m->s->start_wall_ns
				    : now - l->t0;
	collector__set_stop_time(m->s->collector, (uint64_t)now);
	hb_note("pid %d (%s) exited; its profile holds what was collected until then; "
		"%zu other target(s) go on",
		m->t->pid, hb_clean(comm, sizeof(comm), m->t->comm), l->running);
	if (l->running || l->node)
		return 0;
	l->s->reason = STOP_TARGET_EXIT;
	return 1;
}

/* The counts of every target so far, for the status line. */
static void status_line(const struct loop *l)
{
	struct collector_stats all = {};
	struct heapbpf_counters bc;

	for (size_t i = 0; i < l->n; i++) {
		const struct collector_stats *c;

		if (l->m[i].gone || !l->m[i].s->collector)
			continue;
		c = collector__stats(l->m[i].s->collector);
		all.allocs += c->allocs;
		all.frees += c->frees;
		all.alloc_bytes += c->alloc_bytes;
	}
	loop_all_counters(l, &bc);
	l->o->on_status(l->o->status_arg, (hb_clock_ns(CLOCK_MONOTONIC) - l->t0) / 1e9, &all, &bc);
}

/* A timer's tick; its expirations are not needed (EAGAIN only: the timer was readable). */
static bool ticked(int fd)
{
	uint64_t ticks;

	return read(fd, &ticks, sizeof(ticks)) > 0;
}

/* One ready event; 1 when the session ends, 0 to go on, or a negative errno. */
static int on_ready(struct loop *l, uint32_t tag)
{
	const struct session_opts *o = l->o;
	struct session *s = l->s;
	struct signalfd_siginfo si;
	int err;

	if (tag >= EV_PROC && tag - EV_PROC < l->nprocs)
		return events_followed_exit(l, tag - EV_PROC, true);
	if (tag >= EV_MEMBER && tag - EV_MEMBER < l->n)
		return member_exit(l, &l->m[tag - EV_MEMBER]);
	if (tag == EV_SERVE)
		return taps_start(l);
	if (tag >= EV_TAP && tag - EV_TAP < 2 * MAX_TAPS)
		return taps_ready(l, tag - EV_TAP);
	if (tag >= EV_WATCH && tag - EV_WATCH < o->nwatch) {
		/* what was sampled up to now is in the collectors first (heapbpf watch's demand) */
		err = loop_consume(l->rb);
		if (err)
			return err;
		loop_read_counters(l);
		return loop_asked(
			s, o->watch[tag - EV_WATCH].on_ready(s, o->watch[tag - EV_WATCH].arg));
	}
	switch (tag) {
	case EV_RING:
		return loop_consume(l->rb);
	case EV_SIGNAL:
		if (read(l->sfd, &si, sizeof(si)) == sizeof(si))
			s->stop_signal = (int)si.ssi_signo;
		s->reason = STOP_SIGNAL;
		return 1;
	case EV_DEADLINE:
		s->reason = STOP_DURATION;
		return 1;
	case EV_LATE:
		if (!ticked(l->lfd))
			return 0;
		if (l->node)
			return late_node_check(l);
		err = late_active_check(l);
		if (err > 0) {
			probes__detach_activity(l->p);
			epoll_ctl(l->ep, EPOLL_CTL_DEL, l->lfd, NULL);
		}
		return err < 0 ? err : 0;
	case EV_INTERVAL:
		/* a window ends: everything sampled so far is in the collectors */
		if (!ticked(l->ifd))
			return 0;
		/*
		 * -d a multiple of --interval: the two timers expire together, but
		 * on a loaded machine (each on its own CPU) the deadline's wake-up
		 * can come after the tick's; the last window is the deadline's,
		 * not a window and then a sliver of the time it took to write it
		 */
		if (l->deadline && hb_clock_ns(CLOCK_MONOTONIC) >= l->deadline) {
			s->reason = STOP_DURATION;
			return 1;
		}
		err = ring_buffer__consume(l->rb);
		if (err < 0)
			return err;
		loop_read_counters(l);
		return o->on_interval ? loop_asked(s, o->on_interval(s, o->interval_arg)) : 0;
	case EV_TICK:
		if (ticked(l->tfd))
			status_line(l);
		return 0;
	}
	return 0;
}

/*
 * Children neither followed nor a target (their flag restored at the end,
 * their own forks seen while they live) are nothing more to the session
 * once they exited or exec'ed, but they stayed in its tables to the end:
 * in the BPF map of tracked pids (HEAPBPF_MAX_TRACKED: past it a child's
 * own fork went unseen and its flag was left on), the pid table and the
 * fork list, which the state file rewrites at each fork. A sweep each time
 * as many children joined as were left after the last one keeps them to
 * those alive, at a cost per fork that does not grow.
 *
 * One found gone is dropped at the next sweep, not this one: its last
 * fork's record was committed before it exited, but the ring buffer is
 * read in order, and a record another CPU has reserved and not yet
 * committed stops the drain before it. Dropped now, that fork would come
 * with an unknown parent, and the child it made would be let go with its
 * flag on. By the next sweep, every record reserved before this one is
 * long read.
 */
static int sweep_children(struct loop *l)
{
	size_t left = 0;
	int err;

	l->sweep_due = false;
	l->children = 0;
	for (size_t i = 0; i < l->nprocs; i++) {
		struct proc *p = &l->procs[i];

		if (p->gone || p->c || p->pfd >= 0)
			continue;
		if (p->start && !proc_gone(p->pid, p->start))
			left++;
		else
			p->dead++;
	}
	/*
	 * What they committed before they exited (their own forks) is taken
	 * first. The drain may drop one (its exec) and give its slot to a new
	 * child (add_proc clears the mark): only those still marked go, once
	 * two sweeps found them gone.
	 */
	err = loop_consume(l->rb);
	for (size_t i = 0; i < l->nprocs; i++) {
		struct proc *p = &l->procs[i];

		if (p->dead < 2)
			continue;
		p->dead = 0;
		if (!p->gone)
			loop_drop_proc(l, p);
	}
	for (size_t i = 0; i < l->n; i++) {
		if (!l->m[i].gone)
			forks__prune(&l->m[i].s->forks);
	}
	l->sweep_at = left > SWEEP_MIN ? left : SWEEP_MIN;
	return err;
}

/* Waits for the end of the session; returns 0 or negative errno (ring buffer callback error). */
int session_wait(struct loop *l)
{
	struct epoll_event evs[16];

	for (;;) {
		int n;

		/* the children the last events brought, listed before heapbpf waits */
		events_save_states(l);
		n = epoll_wait(l->ep, evs, 16, PROBES_POLL_MS);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		/* n == 0: records below the wake-up threshold: consume them on time */
		if (n == 0) {
			int err = loop_consume(l->rb);

			if (err)
				return err;
		}
		for (int i = 0; i < n; i++) {
			int rc = on_ready(l, evs[i].data.u32);

			if (rc)
				return rc < 0 ? rc : 0;
		}
		/* a target chosen as an OOM victim: its events are in, its callback now */
		n = events_run_oom(l);
		if (n)
			return n < 0 ? n : 0;
		if (l->sweep_due && (n = sweep_children(l)))
			return n;
	}
}

/* A target's collector, symbolizer and pidfd; a target that is gone already is left out. */
int session_open_member(struct loop *l, struct member *m)
{
	struct session *s = m->s;
	const struct jemalloc_target *t = m->t;
	int rc;

	rc = collector__new(1ULL << t->lg_prof_sample, &s->collector);
	rc = rc ?: (l->o->follow_forks ? procsum__new(&s->sum) : 0);
	rc = rc ?: symbolizer__new(t->pid, &s->symbolizer);
	if (!rc && l->s->pool)
		symbolizer__share(s->symbolizer, l->s->pool);
	if (rc)
		return member_fail(l, m, rc, "cannot set up the collector of pid %d: %s", t->pid,
				   strerror(-rc));
	if (l->o->temporary_ns)
		collector__set_temporary_threshold(s->collector, l->o->temporary_ns);
	rc = loop_add_proc(l, t->pid, (uint32_t)(m - l->m), s->collector, proc_start_time(t->pid));
	if (rc)
		return hb_fail(l->err, l->errlen, rc, "out of memory");
	m->pfd = (int)syscall(SYS_pidfd_open, t->pid, 0);
	if (m->pfd < 0)
		return member_fail(l, m, -errno, "pid %d: %s: %s", t->pid,
				   errno == ESRCH ? "the target process exited"
						  : "cannot set up the event loop",
				   strerror(errno));
	rc = loop_add_fd(l->ep, m->pfd, EV_MEMBER + (uint32_t)(m - l->m));
	return rc ? hb_fail(l->err, l->errlen, rc, "cannot set up the event loop: %s",
			    strerror(-rc))
		  : 0;
}

/* Probes loaded, collectors, symbolizers and recording header ready, the event loop set up. */
int session_open_loop(struct loop *l)
{
	const struct session_opts *o = l->o;
	struct session *s = l->s;
	struct heapbpf_oom_offsets oom_off;
	uint32_t fork_off;
	sigset_t set;
	int rc;

	/* a BPF object built for another architecture would read the wrong registers */
	rc = probes__check_arch(l->err, l->errlen);
	rc = rc ?: forks_child_pid_offset(&fork_off, l->err, l->errlen);
	if (rc)
		return rc;
	l->fork_off = fork_off;
	/*
	 * Several targets, or children followed: the uprobes once per object file,
	 * the pids in a BPF map (a child joins without uprobes of its own, whose
	 * detach at the end would cost a kernel grace period each).
	 */
	if (o->oom) {
		rc = oom_victim_offsets(&oom_off, l->err, l->errlen);
		if (rc)
			return rc;
		l->oom_off = oom_off;
	}
	rc = probes__load(&l->lt->layout->bpf, o->ringbuf_bytes, fork_off, o->oom ? &oom_off : NULL,
			  !loop_single(l) || o->follow_forks, &l->p);
	if (rc)
		return hb_fail(l->err, l->errlen, rc,
			       "cannot load the BPF program (heapbpf needs root, and a kernel with "
			       "BPF ring buffers; run with -v for libbpf's reasons): %s",
			       strerror(-rc));
	l->ep = epoll_create1(EPOLL_CLOEXEC);
	session_stop_signals(&set);
	l->sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	if (l->ep < 0 || l->sfd < 0)
		return hb_fail(l->err, l->errlen, -errno, "cannot set up the event loop: %s",
			       strerror(errno));
	for (size_t i = 0; i < l->n; i++) {
		rc = session_open_member(l, &l->m[i]);
		if (rc)
			return rc;
	}
	s->recorder = o->recorder;
	rc = s->recorder ? record_header(s, l->m[0].t) : 0;
	if (rc)
		return hb_fail(l->err, l->errlen, rc, "cannot write the recording: %s",
			       strerror(-rc));
	rc = probes__ring_buffer(l->p, events_on_event, l, &l->rb);
	if (rc)
		return hb_fail(l->err, l->errlen, rc, "cannot open the BPF ring buffer: %s",
			       strerror(-rc));
	rc = loop_add_fd(l->ep, ring_buffer__epoll_fd(l->rb), EV_RING);
	rc = rc ?: loop_add_fd(l->ep, l->sfd, EV_SIGNAL);
	for (size_t i = 0; !rc && i < o->nwatch; i++)
		rc = loop_add_fd(l->ep, o->watch[i].fd, EV_WATCH + (uint32_t)i);
	if (rc)
		return hb_fail(l->err, l->errlen, rc, "cannot set up the event loop: %s",
			       strerror(-rc));
	/* other runs ask this one for their windows of its targets (serve.h): not vital */
	l->sv = o->serve;
	if (l->sv && (rc = loop_add_fd(l->ep, serve__fd(l->sv), EV_SERVE))) {
		hb_warn("other heapbpf runs cannot ask this one for a window of its targets: %s",
			strerror(-rc));
		l->sv = NULL;
	}
	return 0;
}

/* Why the flag could not be switched on, in words. */
static const char *toggle_error(int rc)
{
	return rc == -EFAULT   ? "the flag's address is not in jemalloc's writable data"
	       : rc == -EILSEQ ? "the flag does not hold a boolean (wrong layout?)"
	       : rc == -ESRCH  ? "the process exited"
	       : rc == -ESTALE ? "the process exec'd since it was found, or its pid is another "
				 "process's now"
			       : strerror(-rc);
}

/* One target: its probes attached first, then its prof_active on: no sample is missed. */
int session_start_member(struct loop *l, struct member *m)
{
	const struct jemalloc_target *t = m->t;
	int rc;

	collector__set_attach_time(m->s->collector, l->attach_coarse);
	m->clock_ahead_ns = vclock_monotonic_offset(t->pid);
	rc = t->needs_selfcheck ? selfcheck__new(t, l->attach_coarse, &m->sc) : 0;
	m->s->unconfirmed = t->needs_selfcheck;
	if (rc)
		return hb_fail(l->err, l->errlen, rc, "out of memory");
	/* a node session's target has an activity probe of its own (late_check_begin) */
	rc = probes__attach(loop_probes_of(l, m), t, !l->node, &m->file);
	if (rc)
		return member_fail(l, m, rc, "cannot attach uprobes to jemalloc in pid %d: %s",
				   t->pid, strerror(-rc));
	rc = l->node ? late_check_begin(l, m) : 0;
	if (rc)
		return member_fail(
			l, m, rc,
			"cannot attach the late-activation check's uprobe to jemalloc in "
			"pid %d: %s",
			t->pid, strerror(-rc));
	rc = toggle__on(&m->tg, t, m->guard ? save_state : NULL, m->guard);
	if (rc == -EROFS)
		return member_fail(l, m, rc,
				   "cannot write heapbpf's state file under %s, so prof_active "
				   "was not switched on in pid %d",
				   guard_dir(), t->pid);
	if (rc)
		return member_fail(l, m, rc,
				   "cannot switch jemalloc's prof_active on in pid %d: %s", t->pid,
				   toggle_error(rc));
	m->s->was_active = !m->tg.changed;
	m->ours = m->tg.changed;
	m->running = true;
	l->running++;
	return 0;
}

int session_start_sampling(struct loop *l)
{
	const struct session_opts *o = l->o;
	int64_t wall;
	int rc;

	/* objects sampled before this instant are not ours (jemalloc's clock, 5.3) */
	l->attach_coarse = hb_clock_ns(CLOCK_MONOTONIC_COARSE);
	for (size_t i = 0; i < l->n; i++) {
		rc = l->m[i].s->failed ? 0 : session_start_member(l, &l->m[i]);
		if (rc)
			return rc;
	}
	if (!l->running && !l->node)
		return hb_fail(l->err, l->errlen, -ESRCH,
			       "none of the %zu target processes could be profiled", l->n);
	/*
	 * Loaded and attached: from here on heapbpf needs ptrace and file access
	 * only; --follow-forks attaches to each new child, and a watch of a unit
	 * or pid file to its next process: they keep what that takes.
	 */
	rc = o->follow_forks || o->keep_privs ? 0 : privs_drop_after_attach();
	if (rc)
		return hb_fail(l->err, l->errlen, rc,
			       "cannot drop capabilities after attaching: %s", strerror(-rc));
	wall = hb_clock_ns(CLOCK_REALTIME);
	for (size_t i = 0; i < l->n; i++)
		l->m[i].s->start_wall_ns = wall;
	l->t0 = hb_clock_ns(CLOCK_MONOTONIC);
	if (l->s->recorder)
		record_start(l->s, l->t0, l->attach_coarse);
	return 0;
}

/* A timer on the loop; *fd stays -1 when first_s is 0. */
static int add_timer(struct loop *l, int *fd, double first_s, double interval_s, uint32_t tag)
{
	if (first_s <= 0)
		return 0;
	*fd = loop_make_timer(first_s, interval_s);
	return *fd < 0 ? *fd : loop_add_fd(l->ep, *fd, tag);
}

int session_add_timers(struct loop *l)
{
	const struct session_opts *o = l->o;
	int rc;

	/* taken before the timer is set: it expires no earlier than this */
	if (o->duration > 0)
		l->deadline = hb_clock_ns(CLOCK_MONOTONIC) + (int64_t)(o->duration * 1e9);
	rc = add_timer(l, &l->dfd, o->duration, 0, EV_DEADLINE);
	/* the status line is a nicety: without its timer the session goes on */
	if (o->on_status)
		add_timer(l, &l->tfd, 1, 1, EV_TICK);
	rc = rc
		     ?: add_timer(l, &l->ifd, o->on_interval ? o->interval : 0, o->interval,
				  EV_INTERVAL);
	rc = rc
		     ?: add_timer(l, &l->lfd, !l->node && l->lt->activity_off ? LATE_CHECK_S : 0,
				  LATE_CHECK_S, EV_LATE);
	/* a node session's: disarmed until a target's check begins (late_check_begin) */
	if (!rc && l->node) {
		l->lfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
		rc = l->lfd < 0 ? -errno : loop_add_fd(l->ep, l->lfd, EV_LATE);
	}
	return rc ? hb_fail(l->err, l->errlen, rc, "cannot set up the timer: %s", strerror(-rc))
		  : 0;
}

/* Every target's flag back to what it was; 1 when one was switched on (a drain is due). */
static int restore_flags(struct loop *l, int *rc)
{
	int on = 0;

	for (size_t i = 0; i < l->n; i++) {
		struct member *m = &l->m[i];
		int r2, r3;

		if (m->gone)
			continue;
		r2 = loop_restore_flag(m);
		m->restore_rc = r2;
		on |= m->tg.addr != 0;
		if (!r2 || r2 == -ESRCH || (loop_single(l) && *rc))
			continue;
		r3 = member_fail(l, m, r2,
				 "cannot switch jemalloc's prof_active back off in pid %d: %s",
				 m->t->pid, strerror(-r2));
		if (!*rc)
			*rc = r3;
	}
	return on;
}

/* Children forked while a flag was on get it back off; a guard whose flags are all back forgets. */
static void restore_children(struct loop *l)
{
	/* a child left on has its state listed, for --reset */
	events_save_states(l);
	for (size_t i = 0; i < l->n; i++) {
		struct member *m = &l->m[i];
		struct session *s = m->s;

		if (!m->ours || m->gone)
			continue;
		forks__restore(&s->forks, m->tg.addr, m->tg.orig, m->t->path, &s->fork_result);
		/* only a restored flag may forget its state: else the next run restores it */
		if ((!m->restore_rc || m->restore_rc == -ESRCH) && !s->fork_result.failed &&
		    m->guard)
			guard__clear(m->guard);
	}
}

/* The session's reason, counters and times on every target's collection. */
static void share_results(struct loop *l, int64_t stop_mono)
{
	loop_read_counters(l);
	for (size_t i = 0; i < l->n; i++) {
		struct session *s = l->m[i].s;

		if (l->m[i].gone)
			continue;
		s->reason = l->s->reason;
		s->stop_signal = l->s->stop_signal;
		if (l->t0 && !s->exited)
			s->duration_ns = stop_mono - l->t0;
	}
}

/* The first target's layout that did not fit its samples: why, else NULL. */
static const char *unfit_why(const struct loop *l)
{
	for (size_t i = 0; i < l->n; i++) {
		if (!l->m[i].gone && l->m[i].sc && selfcheck__why(l->m[i].sc))
			return selfcheck__why(l->m[i].sc);
	}
	return NULL;
}

static void *free_probes(void *p)
{
	probes__free(p);
	return NULL;
}

/*
 * The probes detached and freed on a thread of their own: each uprobe's
 * detach waits for the kernel's grace periods (about 70 ms each here),
 * which writing the profiles need not wait for; session_cleanup joins it.
 * Sampling is off and drained by then: what the probes still see (frees
 * after the stop) changes no total.
 */
static void release_probes(struct session *s, struct probes *p)
{
	if (p && !pthread_create(&s->detacher, NULL, free_probes, p)) {
		s->detaching = true;
		return;
	}
	probes__free(p);
}

/* Every path: sampling off first, then drain what is in flight, then close; detach meanwhile. */
int session_stop_loop(struct loop *l, int rc)
{
	struct session *s = l->s;
	int64_t stop_mono = hb_clock_ns(CLOCK_MONOTONIC);
	int fds[] = { l->ep, l->sfd, l->dfd, l->tfd, l->ifd, l->lfd };
	int on;

	for (size_t i = 0; i < l->nprocs; i++) {
		if (!l->procs[i].gone && l->procs[i].c && !collector__stop_time(l->procs[i].c))
			collector__set_stop_time(l->procs[i].c, (uint64_t)stop_mono);
	}
	/* in the stream where the collector learns it, so a replay matches this run */
	if (s->recorder && l->t0 && !s->record_err)
		s->record_err =
			loop_record_meta_u64(s->recorder, "stop_mono_ns", (uint64_t)stop_mono);
	on = restore_flags(l, &rc);
	/* the drain also brings the forks that copied a flag just before it went off */
	if (l->rb) {
		if (on)
			ring_buffer__poll(l->rb, DRAIN_MS);
		ring_buffer__consume(l->rb);
		probes__close_ring_buffer(l->p);
		l->rb = NULL;
	}
	/* the windows asked for end with the run, what it sampled in them */
	taps_end(l, NULL, s->reason);
	l->sv = NULL;
	restore_children(l);
	if (l->p)
		share_results(l, hb_clock_ns(CLOCK_MONOTONIC));
	if (s->recorder && l->t0)
		record_stop(s, stop_mono, l->attach_coarse);
	if (l->o->on_status && l->t0)
		l->o->on_status(l->o->status_arg, (hb_clock_ns(CLOCK_MONOTONIC) - l->t0) / 1e9,
				NULL, NULL);
	if (l->o->verbose && l->p)
		probes__print_run_time(l->p, stderr);
	for (size_t i = 0; i < l->n; i++) {
		if (!l->m[i].gone && l->m[i].late)
			late_done(l, &l->m[i]);
	}
	for (size_t i = 0; i < l->nmore; i++) {
		if (l->o->verbose)
			probes__print_run_time(l->more[i], stderr);
		probes__free(l->more[i]);
	}
	free(l->more);
	release_probes(s, l->p);
	for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++) {
		if (fds[i] >= 0)
			close(fds[i]);
	}
	for (size_t i = 0; i < l->n; i++) {
		if (l->m[i].pfd >= 0)
			close(l->m[i].pfd);
		selfcheck__free(l->m[i].sc);
	}
	for (size_t i = 0; i < l->nprocs; i++) {
		if (l->procs[i].pfd >= 0)
			close(l->procs[i].pfd);
	}
	hashmap__clear(&l->by_pid);
	free(l->procs);
	free(l->m);
	return rc;
}

int session_run_many(const struct jemalloc_target *const *t, struct guard *const *guards, size_t n,
		     const struct session_opts *o, struct session *s, char *err, size_t errlen)
{
	struct loop l;
	int rc;

	loop_init(&l, o, s, err, errlen);
	l.n = n;
	l.lt = n ? t[0] : NULL;
	if (!n || (n > 1 && o->recorder))
		return hb_fail(err, errlen, -EINVAL, "a recording holds one target process");
	memset(s, 0, n * sizeof(*s));
	l.m = calloc(n, sizeof(*l.m));
	if (!l.m)
		return hb_fail(err, errlen, -ENOMEM, "out of memory");
	/* the targets' symbolizers parse each object of one build-id once */
	if (n > 1 && symbolizer_pool__new(&s->pool)) {
		free(l.m);
		return hb_fail(err, errlen, -ENOMEM, "out of memory");
	}
	/* their last profiles come one after the other, each releasing its symbolizer */
	if (s->pool)
		symbolizer_pool__keep_idle(s->pool);
	for (size_t i = 0; i < n; i++) {
		s[i].reason = STOP_ERROR;
		l.m[i] = (struct member){ .s = &s[i], .t = t[i], .guard = guards[i], .pfd = -1 };
	}
	rc = session_open_loop(&l);
	rc = rc ?: session_start_sampling(&l);
	rc = rc ?: session_add_timers(&l);
	if (!rc) {
		rc = session_wait(&l);
		const char *unfit = unfit_why(&l), *nobt = events_nobt_why(&l);

		if (rc == -ENODATA && s->late_active_bytes)
			late_active_error(s, t[0], err, errlen);
		else if (nobt && rc)
			hb_fail(err, errlen, rc, "%s", nobt);
		else if (unfit)
			hb_fail(err, errlen, rc, "%s", unfit);
		else if (rc)
			hb_fail(err, errlen, rc, "collecting events failed: %s", strerror(-rc));
	}
	return session_stop_loop(&l, rc);
}

int session_run(const struct jemalloc_target *t, const struct session_opts *o, struct session *s,
		char *err, size_t errlen)
{
	return session_run_many(&t, &o->guard, 1, o, s, err, errlen);
}

void session_cleanup(struct session *s)
{
	if (s->detaching)
		pthread_join(s->detacher, NULL);
	s->detaching = false;
	collector__free(s->collector);
	procsum__free(s->sum);
	s->sum = NULL;
	symbolizer__free(s->symbolizer);
	/* the first target's: after the others' symbolizers (live.c frees it last) */
	symbolizer_pool__free(s->pool);
	s->pool = NULL;
	forks__free(&s->forks);
	for (size_t i = 0; i < s->nprocs; i++)
		collector__free(s->procs[i].c);
	free(s->procs);
	s->procs = NULL;
	s->nprocs = 0;
	s->collector = NULL;
	s->symbolizer = NULL;
}
