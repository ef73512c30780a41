// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * heapbpf watch: a session that stays attached and writes a profile when
 * memory goes wrong, not on a clock. Its triggers: the kernel choosing a
 * target as an OOM victim (oom), the kernel telling of memory pressure on
 * its cgroup (pressure, once per cooldown: v1's vmpressure notification,
 * v2's PSI trigger and memory.events, each an event as it happens), its
 * sampled in-use estimate or its RSS rising a given amount above the level
 * of the last growth profile (growth, checked every second), and SIGUSR1
 * (demand). Each profile is an in-use profile as of that instant, named
 * after its trigger.
 *
 * Between triggers it measures where each target's RSS is (heap/rssmap.h),
 * round robin, then waits RSS_COST_FACTOR times what that cost in CPU: the
 * breakdowns take at most 1% of a core together. A profile carries its
 * target's last breakdown (window.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/errmsg.h"
#include "profile/summary.h"
#include "heap/residency.h"
#include "heap/rssmap.h"
#include "run/outputs.h"
#include "sampling/pressure.h"
#include "run/watch.h"
#include "run/window.h"

struct watched {
	struct target_run *tr;
	struct session *s;
	double inuse_mark; /* sampled in-use estimate at the last growth profile (0 at the start) */
	uint64_t rss_mark; /* RSS at the last RSS growth profile (or the start) */
	struct pressure *pressure; /* --on-pressure: its cgroup's notification, or NULL */
	int64_t pressure_at;	   /* CLOCK_MONOTONIC ns of the last pressure profile; 0: none */
	bool held_back;		   /* pressure seen since, within the cooldown (said once) */
	bool oom_written;
	struct pagemap *pm;	/* opened as it was added, before privileges dropped */
	struct rss_map *rss[2]; /* the last breakdown (tr->rss) and room for the next */
	bool rss_off;		/* none to be had (said once) */
	int64_t rss_cost;	/* the CPU time its last breakdown took (ns) */
	int64_t rss_cpu_mark;	/* the target's CPU time then (ns) */
};

/*
 * After breakdowns the next pass waits this many times their CPU time (1%
 * of a core), and a target's next waits until the target itself has used
 * RSS_SERVICE_FACTOR times what its last cost (0.5% of its CPU): an idle
 * service keeps its last one, which its unchanged heap still matches.
 */
#define RSS_COST_FACTOR	   100
#define RSS_SERVICE_FACTOR 200
/* The CPU time one tick's breakdowns take at most, whatever is due (20 ms). */
#define RSS_PASS_NS 20000000LL

struct watch {
	const struct run_opts *o;
	struct watched *w;
	size_t n, cap;
	int sfd;	   /* SIGUSR1 */
	int pfd;	   /* epoll: every target's pressure notification */
	int64_t rss_next;  /* CLOCK_MONOTONIC ns: no breakdown before */
	size_t rss_cursor; /* the target measured next, round robin */
};

/* Resident bytes of pid (/proc/PID/statm), 0 when gone. */
static uint64_t rss_of(pid_t pid)
{
	char path[64];
	unsigned long long size, resident;
	FILE *f;
	int n;

	snprintf(path, sizeof(path), "/proc/%d/statm", pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	n = fscanf(f, "%llu %llu", &size, &resident);
	fclose(f);
	return n == 2 ? resident * (uint64_t)sysconf(_SC_PAGESIZE) : 0;
}

/* One profile of target w now, for trigger; a failure is said and the watch goes on. */
static void write_now(struct watched *w, const char *trigger, const char *note)
{
	struct heap_data d = {
		.collector = w->s->collector,
		.symbolizer = w->s->symbolizer,
		.counters = &w->s->counters,
		.procs = w->s->procs,
		.nprocs = w->s->nprocs,
		.sum = w->s->sum,
	};
	char err[1024];
	int64_t now = hb_clock_ns(CLOCK_REALTIME);

	if (!w->tr->k)
		w->tr->start_ns = w->s->start_wall_ns;
	w->tr->trigger = trigger;
	snprintf(w->tr->trigger_note, sizeof(w->tr->trigger_note), "%s", note);
	hb_say("watch: pid %d: %s: %s", w->tr->pid, trigger, note);
	if (window_emit(w->tr, &d, now, err, sizeof(err))) {
		hb_error_clean(NULL, err, NULL);
		w->tr->outcome |= RUN_FAILED;
	}
	w->tr->trigger = NULL;
	w->tr->trigger_note[0] = '\0';
	outputs_window_done(w->tr->run);
}

static void check_growth(struct watch *wt, struct watched *w)
{
	const struct run_opts *o = wt->o;
	const struct collector_totals *t = collector__totals(w->s->collector);
	uint64_t rss = o->watch_rss_growth ? rss_of(w->tr->pid) : 0;
	char note[256], a[32], b[32], c[32];

	if (o->watch_growth && t->inuse_space >= w->inuse_mark + (double)o->watch_growth) {
		summary_bytes(a, sizeof(a), t->inuse_space);
		summary_bytes(b, sizeof(b), t->inuse_space - w->inuse_mark);
		summary_bytes(c, sizeof(c), w->inuse_mark);
		snprintf(note, sizeof(note),
			 "sampled in-use estimate %s, %s above %s at the last growth mark", a, b,
			 c);
		w->inuse_mark = t->inuse_space;
		write_now(w, "growth", note);
	}
	if (o->watch_rss_growth && rss && rss >= w->rss_mark + o->watch_rss_growth) {
		summary_bytes(a, sizeof(a), (double)rss);
		summary_bytes(b, sizeof(b), (double)(rss - w->rss_mark));
		summary_bytes(c, sizeof(c), (double)w->rss_mark);
		snprintf(note, sizeof(note), "RSS %s, %s above %s at the last growth mark", a, b,
			 c);
		w->rss_mark = rss;
		write_now(w, "growth", note);
	}
}

/* A pressure profile of w if its cgroup told of pressure: one per cooldown. */
static void check_pressure(struct watch *wt, struct watched *w, bool woken)
{
	int64_t now = hb_clock_ns(CLOCK_MONOTONIC);
	char note[4400];

	if (!w->pressure || !pressure__seen(w->pressure, woken, note, sizeof(note)))
		return;
	/* a storm: one profile per cooldown, the notifications read all along */
	if (w->pressure_at && now - w->pressure_at < (int64_t)(wt->o->watch_cooldown * 1e9)) {
		if (!w->held_back)
			hb_note("watch: pid %d: pressure again within the cooldown (%g s): no "
				"profile until it ends",
				w->tr->pid, wt->o->watch_cooldown);
		w->held_back = true;
		return;
	}
	w->held_back = false;
	w->pressure_at = now;
	write_now(w, "pressure", note);
}

static bool watching(const struct watched *w)
{
	return !w->s->failed && !w->s->exited && !w->s->unconfirmed;
}

/* w's breakdown now, in the room beside its last; a first failure is said and ends them. */
static void measure_rss(struct watched *w)
{
	struct rss_map *next = w->rss[w->tr->rss == w->rss[0] ? 1 : 0];
	char err[1024];

	if (!w->tr->t)
		return;
	if (!rssmap_read_with(w->tr->t, w->pm, next, err, sizeof(err))) {
		w->tr->rss = next;
		w->tr->rss_mono_ns = hb_clock_ns(CLOCK_MONOTONIC);
		return;
	}
	/* one that worked before: the process moved as it was read; the last one stands */
	if (w->tr->rss)
		return;
	hb_note("watch: pid %d: its profiles go without an RSS breakdown: %s", w->tr->pid, err);
	w->rss_off = true;
}

/* The CPU time pid's threads have used (/proc/PID/stat: utime + stime), ns; -1 when gone. */
static int64_t cpu_of(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long utime, stime;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	/* past the comm, which may hold anything: state is field 3, utime 14, stime 15 */
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime,
			 &stime) != 2)
		return -1;
	return (int64_t)((utime + stime) *
			 (1000000000ULL / (unsigned long long)sysconf(_SC_CLK_TCK)));
}

/* Whether w's target has used enough CPU since its last breakdown to pay for the next. */
static bool rss_due(const struct watched *w)
{
	int64_t cpu;

	if (!w->tr->rss)
		return true;
	cpu = cpu_of(w->tr->pid);
	return cpu >= 0 && cpu - w->rss_cpu_mark >= w->rss_cost * RSS_SERVICE_FACTOR;
}

/*
 * The next targets' breakdowns, when the budget allows: one pass at most,
 * RSS_PASS_NS of CPU at most at a time (the event loop waits meanwhile).
 */
static void refresh_rss(struct watch *wt)
{
	int64_t now = hb_clock_ns(CLOCK_MONOTONIC), cost = 0;
	size_t n = wt->n;

	if (now < wt->rss_next)
		return;
	for (size_t k = 0; k < n && cost < RSS_PASS_NS; k++) {
		size_t i = wt->rss_cursor++ % n;
		struct watched *w = &wt->w[i];
		int64_t cpu = hb_clock_ns(CLOCK_THREAD_CPUTIME_ID);

		if (w->rss_off || !watching(w) || !rss_due(w))
			continue;
		w->rss_cpu_mark = cpu_of(w->tr->pid);
		measure_rss(w);
		cpu = hb_clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu;
		w->rss_cost = cpu;
		cost += cpu;
		/* bench/run.py's watch_rss sums these */
		if (wt->o->verbose)
			hb_note("watch: pid %d: RSS breakdown measured in %.3f ms of CPU",
				w->tr->pid, (double)cpu / 1e6);
	}
	wt->rss_next = now + cost * RSS_COST_FACTOR;
}

void watch__tick(struct watch *wt)
{
	/* first: a trigger of this tick carries it */
	refresh_rss(wt);
	for (size_t i = 0; i < wt->n; i++) {
		struct watched *w = &wt->w[i];

		if (!watching(w))
			continue;
		check_growth(wt, w);
		pressure__tick(w->pressure);
	}
}

/* Every second, with the ring buffer drained: growth of each target. */
static int on_tick(struct session *s0, void *arg)
{
	(void)s0;
	watch__tick(arg);
	return 0;
}

/* A target's cgroup told of pressure, with the ring buffer drained: whose, and its profile. */
static int on_pressure(struct session *s0, void *arg)
{
	struct watch *wt = arg;
	struct epoll_event evs[16];

	(void)s0;
	/* what woke it: the kernel's word is read from each target's own fds */
	while (epoll_wait(wt->pfd, evs, 16, 0) == 16)
		;
	for (size_t i = 0; i < wt->n; i++) {
		struct watched *w = &wt->w[i];
		char note[4400];

		if (watching(w))
			check_pressure(wt, w, true);
		else if (w->pressure) /* read, so it wakes no more */
			pressure__seen(w->pressure, true, note, sizeof(note));
	}
	return 0;
}

/* What w holds for its breakdowns, freed; its target's profiles go without one from now. */
static void drop(struct watched *w)
{
	w->tr->rss = NULL;
	pressure__free(w->pressure);
	w->pressure = NULL;
	residency_pagemap_close(w->pm);
	free(w->rss[0]);
	free(w->rss[1]);
	w->pm = NULL;
	w->rss[0] = w->rss[1] = NULL;
}

static struct watched *watched_of(struct watch *wt, const struct session *s)
{
	for (size_t i = 0; i < wt->n; i++) {
		if (wt->w[i].s == s)
			return &wt->w[i];
	}
	return NULL;
}

static void oom_note(const struct heapbpf_oom_event *e, char *note, size_t len)
{
	if (!e->has_figures) {
		snprintf(note, len,
			 "chosen as the OOM killer's victim (this kernel's oom/mark_victim "
			 "record gives its pid alone, no memory figures)");
		return;
	}
	snprintf(note, len,
		 "chosen as the OOM killer's victim: total-vm %" PRIu64 " kB, anon-rss %" PRIu64
		 " kB, file-rss %" PRIu64 " kB, shmem-rss %" PRIu64 " kB, pgtables %" PRIu64
		 " kB, oom_score_adj %d",
		 (uint64_t)e->total_vm_kb, (uint64_t)e->anon_rss_kb, (uint64_t)e->file_rss_kb,
		 (uint64_t)e->shmem_rss_kb, (uint64_t)e->pgtables_kb, e->oom_score_adj);
}

/* The kernel chose a target as an OOM victim: its in-use profile now, before it is gone. */
static int on_oom(struct session *s, const struct heapbpf_oom_event *e, void *arg)
{
	struct watch *wt = arg;
	struct watched *w = watched_of(wt, s);
	char note[512];

	if (!w || w->oom_written)
		return 0;
	/* pressure the kernel told of before it chose the victim comes first */
	if (w->pressure)
		check_pressure(wt, w, false);
	oom_note(e, note, sizeof(note));
	w->oom_written = true;
	write_now(w, "oom", note);
	return 0;
}

/* SIGUSR1: one profile of every target now, without detaching. */
static int on_demand(struct session *s0, void *arg)
{
	struct watch *wt = arg;
	struct signalfd_siginfo si;

	(void)s0;
	while (read(wt->sfd, &si, sizeof(si)) == sizeof(si)) {
		for (size_t i = 0; i < wt->n; i++) {
			struct watched *w = &wt->w[i];

			if (watching(w))
				write_now(w, "demand", "asked for with SIGUSR1");
		}
	}
	return 0;
}

int watch__new(const struct run_opts *o, struct target_run **trs, struct session *ss, size_t n,
	       struct watch **out, char *err, size_t errlen)
{
	struct watch *wt = calloc(1, sizeof(*wt));
	sigset_t usr1;

	if (!wt)
		return hb_fail(err, errlen, -ENOMEM, "out of memory");
	wt->o = o;
	wt->sfd = -1;
	wt->pfd = epoll_create1(EPOLL_CLOEXEC);
	if (wt->pfd < 0) {
		int rc = -errno;

		free(wt);
		return hb_fail(err, errlen, rc, "cannot make an epoll: %s", strerror(-rc));
	}
	for (size_t i = 0; i < n; i++) {
		if (watch__add(wt, trs[i], &ss[i])) {
			watch__free(wt);
			return hb_fail(err, errlen, -ENOMEM, "out of memory");
		}
	}
	/* SIGUSR1 through the event loop: blocked, so it neither kills nor interrupts */
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	if (sigprocmask(SIG_BLOCK, &usr1, NULL) ||
	    (wt->sfd = signalfd(-1, &usr1, SFD_CLOEXEC | SFD_NONBLOCK)) < 0) {
		int rc = -errno;

		watch__free(wt);
		return hb_fail(err, errlen, rc, "cannot take SIGUSR1: %s", strerror(-rc));
	}
	*out = wt;
	return 0;
}

int watch__add(struct watch *wt, struct target_run *tr, struct session *s)
{
	char why[4400] = "";
	struct watched *w;

	if (wt->n == wt->cap) {
		size_t cap = wt->cap ? 2 * wt->cap : 16;

		w = realloc(wt->w, cap * sizeof(*w));
		if (!w)
			return -ENOMEM;
		wt->w = w;
		wt->cap = cap;
	}
	w = &wt->w[wt->n++];
	*w = (struct watched){ .tr = tr, .s = s };
	tr->rss = NULL;
	w->rss[0] = calloc(1, sizeof(*w->rss[0]));
	w->rss[1] = calloc(1, sizeof(*w->rss[1]));
	if (!w->rss[0] || !w->rss[1]) {
		drop(w);
		wt->n--;
		return -ENOMEM;
	}
	/* the page frames, which tell the zero page apart, are shown to this opener */
	if (residency_pagemap_open(tr->pid, &w->pm))
		w->rss_off = true;
	/* the marks growth and pressure are measured from: now, as sampling starts */
	w->rss_mark = rss_of(tr->pid);
	if (wt->o->watch_pressure &&
	    pressure__new(tr->pid, wt->pfd, &w->pressure, why, sizeof(why)))
		hb_warn("pid %d: no pressure trigger for it: %s", tr->pid, why);
	else if (w->pressure && why[0])
		hb_note("pid %d: %s", tr->pid, why);
	return 0;
}

void watch__remove(struct watch *wt, const struct session *s)
{
	struct watched *w = watched_of(wt, s);

	if (!w)
		return;
	drop(w);
	*w = wt->w[--wt->n];
}

void watch__session_opts(struct watch *wt, struct session_opts *so)
{
	so->oom = !wt->o->watch_no_oom;
	so->on_oom = on_oom;
	so->oom_arg = wt;
	so->interval = 1;
	so->on_interval = on_tick;
	so->interval_arg = wt;
	if (so->nwatch < SESSION_MAX_WATCH)
		so->watch[so->nwatch++] = (struct session_watch){ wt->sfd, on_demand, wt };
	if (wt->o->watch_pressure && so->nwatch < SESSION_MAX_WATCH)
		so->watch[so->nwatch++] = (struct session_watch){ wt->pfd, on_pressure, wt };
}

const char *watch__last_trigger(struct watch *wt, const struct session *s, char *note, size_t len)
{
	struct watched *w = watched_of(wt, s);

	note[0] = '\0';
	if (!w)
		return NULL;
	/* killed for memory, its OOM event drained only at the stop: its profile now */
	if (s->oom_victim && !w->oom_written) {
		oom_note(&s->oom, note, len);
		return "oom";
	}
	/* the OOM profile holds what there was; nothing came after it */
	if (w->oom_written)
		return "";
	if (s->reason == STOP_TARGET_EXIT || s->exited) {
		snprintf(note, len, "the process exited");
		return "exit";
	}
	snprintf(note, len, "the watch stopped");
	return "stop";
}

void watch__free(struct watch *wt)
{
	if (!wt)
		return;
	for (size_t i = 0; i < wt->n; i++)
		drop(&wt->w[i]);
	if (wt->sfd >= 0)
		close(wt->sfd);
	if (wt->pfd >= 0)
		close(wt->pfd);
	free(wt->w);
	free(wt);
}
