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
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/errmsg.h"
#include "profile/summary.h"
#include "heap/residency.h"
#include "heap/rssmap.h"
#include "run/outputs.h"
#include "run/watch.h"
#include "run/window.h"

/* How a target's memory cgroup tells of pressure. */
enum cg_kind {
	CG_NONE,
	CG_V2, /* a PSI trigger on memory.pressure, and memory.events' high and oom */
	CG_V1, /* vmpressure: memory.pressure_level through cgroup.event_control */
};

/*
 * v2: pressure is tasks of the cgroup stalled on memory for PSI_STALL_US of
 * PSI_WINDOW_US (10%), the kernel's own trigger; v1: vmpressure's medium
 * level or worse (reclaim scans pages it cannot free: 60% or more of them).
 */
#define PSI_STALL_US  100000
#define PSI_WINDOW_US 1000000
struct watched {
	struct target_run *tr;
	struct session *s;
	double inuse_mark; /* sampled in-use estimate at the last growth profile (0 at the start) */
	uint64_t rss_mark; /* RSS at the last RSS growth profile (or the start) */
	enum cg_kind cg;
	char cg_dir[4096];   /* v1: the nearest cgroup with a limit (or the root); v2: its own */
	int cg_fd;	     /* v1: the eventfd vmpressure signals; v2: the PSI trigger */
	int cg_events;	     /* v2: memory.events, which the kernel marks changed */
	uint64_t cg_last[2]; /* v2: memory.events' high and oom at the last look */
	uint64_t stall_last; /* v2: memory.pressure's "some" total (us) at the last tick */
	int64_t pressure_at; /* CLOCK_MONOTONIC ns of the last pressure profile; 0: none */
	bool held_back;	     /* pressure seen since, within the cooldown (said once) */
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
	const struct cli *o;
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

/* The first number after key in file dir/name, or -1 (unreadable, none). */
static int64_t cg_read(const char *dir, const char *name, const char *key)
{
	char path[4200], line[512];
	size_t k = strlen(key);
	int64_t v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (v < 0 && fgets(line, sizeof(line), f)) {
		unsigned long long x;

		if (!strncmp(line, key, k) && sscanf(line + k, "%llu", &x) == 1)
			v = (int64_t)x;
	}
	fclose(f);
	return v;
}

/*
 * v1: where vmpressure tells of the reclaim that squeezes dir: the nearest
 * cgroup from dir up with a limit, whose reclaim the kernel reports there
 * and above (the root for a machine's own reclaim).
 */
static void v1_limit_holder(char *dir)
{
	size_t root = strlen("/sys/fs/cgroup/memory");

	for (;;) {
		int64_t limit = cg_read(dir, "memory.limit_in_bytes", "");
		char *slash = strrchr(dir, '/');

		/* no limit reads as about 2^63 */
		if ((limit > 0 && limit < (INT64_C(1) << 62)) || strlen(dir) <= root || !slash)
			return;
		*slash = '\0';
	}
}

/* The memory cgroup of pid, from /proc/PID/cgroup: v1's "N:memory:/path", or v2's "0::/path". */
static enum cg_kind find_cgroup(pid_t pid, char *dir, size_t len)
{
	char path[64], line[4096];
	enum cg_kind kind = CG_NONE;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/cgroup", pid);
	f = fopen(path, "re");
	if (!f)
		return CG_NONE;
	while (fgets(line, sizeof(line), f)) {
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		const char *ctrl, *cg;
		bool v1;
		int k;

		if (!c2)
			continue;
		line[strcspn(line, "\n")] = '\0';
		*c2 = '\0';
		ctrl = c1 + 1;
		cg = c2 + 1;
		if (strcmp(ctrl, "memory") != 0 && (ctrl[0] || line[0] != '0'))
			continue;
		v1 = ctrl[0] != '\0';
		k = snprintf(dir, len, "%s%s", v1 ? "/sys/fs/cgroup/memory" : "/sys/fs/cgroup",
			     strcmp(cg, "/") ? cg : "");
		if (k < 0 || (size_t)k >= len ||
		    cg_read(dir, v1 ? "memory.limit_in_bytes" : "memory.current", "") < 0)
			continue;
		kind = v1 ? CG_V1 : CG_V2;
		/* v1's memory line wins over a v2 line of a hybrid machine */
		if (v1)
			break;
	}
	fclose(f);
	if (kind == CG_V1)
		v1_limit_holder(dir);
	return kind;
}

/* v1: an eventfd vmpressure signals at medium or worse, from dir and the cgroups below it. */
static int arm_v1(struct watched *w)
{
	char path[4200], line[64];
	int efd, level, ctl = -1, rc = 0, n;

	efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (efd < 0)
		return -errno;
	snprintf(path, sizeof(path), "%s/memory.pressure_level", w->cg_dir);
	level = open(path, O_RDONLY | O_CLOEXEC);
	snprintf(path, sizeof(path), "%s/cgroup.event_control", w->cg_dir);
	if (level >= 0)
		ctl = open(path, O_WRONLY | O_CLOEXEC);
	n = snprintf(line, sizeof(line), "%d %d medium,hierarchy", efd, level);
	if (level < 0 || ctl < 0 || write(ctl, line, (size_t)n) != n)
		rc = -errno;
	if (level >= 0)
		close(level);
	if (ctl >= 0)
		close(ctl);
	if (rc) {
		close(efd);
		return rc;
	}
	/* closing efd ends the registration */
	w->cg_fd = efd;
	return 0;
}

/* v2: memory.events' high and oom counters, read through the fd the kernel marks. */
static bool v2_events(struct watched *w, uint64_t v[2])
{
	char buf[1024], *line, *save = NULL;
	ssize_t n = pread(w->cg_events, buf, sizeof(buf) - 1, 0);

	v[0] = v[1] = 0;
	if (n <= 0)
		return false;
	buf[n] = '\0';
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		unsigned long long x;

		if (sscanf(line, "high %llu", &x) == 1)
			v[0] = x;
		else if (!strncmp(line, "oom ", 4) && sscanf(line + 4, "%llu", &x) == 1)
			v[1] = x;
	}
	return true;
}

/* v2: memory.pressure's "some" stall total in microseconds, or 0. */
static uint64_t v2_stall(const struct watched *w)
{
	char path[4200], line[256];
	unsigned long long total = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/memory.pressure", w->cg_dir);
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		const char *t = strstr(line, "total=");

		if (!strncmp(line, "some ", 5) && t && sscanf(t + 6, "%llu", &total) == 1)
			break;
	}
	fclose(f);
	return total;
}

/* v2: a PSI trigger on the cgroup's memory stalls, and memory.events' changes. */
static int arm_v2(struct watched *w)
{
	char path[4200], trig[64];
	int n;

	snprintf(path, sizeof(path), "%s/memory.pressure", w->cg_dir);
	w->cg_fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (w->cg_fd < 0)
		return -errno;
	/* the kernel reads the trigger up to its terminating NUL */
	n = snprintf(trig, sizeof(trig), "some %d %d", PSI_STALL_US, PSI_WINDOW_US) + 1;
	if (write(w->cg_fd, trig, (size_t)n) != n)
		return -errno;
	snprintf(path, sizeof(path), "%s/memory.events", w->cg_dir);
	w->cg_events = open(path, O_RDONLY | O_CLOEXEC);
	if (w->cg_events < 0 || !v2_events(w, w->cg_last))
		return w->cg_events < 0 ? -errno : -EIO;
	w->stall_last = v2_stall(w);
	return 0;
}

/* Where and how w's cgroup tells of pressure, in wt's epoll; false when it cannot. */
static bool arm_pressure(struct watch *wt, struct watched *w, char *err, size_t errlen)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int rc;

	w->cg = find_cgroup(w->tr->pid, w->cg_dir, sizeof(w->cg_dir));
	if (w->cg == CG_NONE) {
		snprintf(err, errlen, "it is in no memory cgroup heapbpf can read");
		return false;
	}
	rc = w->cg == CG_V1 ? arm_v1(w) : arm_v2(w);
	if (rc) {
		snprintf(err, errlen, "%s/%s: %s", w->cg_dir,
			 w->cg == CG_V1 ? "cgroup.event_control" : "memory.pressure",
			 strerror(-rc));
		return false;
	}
	if (w->cg == CG_V2)
		ev.events = EPOLLPRI;
	rc = epoll_ctl(wt->pfd, EPOLL_CTL_ADD, w->cg_fd, &ev);
	if (!rc && w->cg == CG_V2)
		rc = epoll_ctl(wt->pfd, EPOLL_CTL_ADD, w->cg_events, &ev);
	if (rc) {
		snprintf(err, errlen, "epoll: %s", strerror(errno));
		return false;
	}
	return true;
}

/* w's pressure notification's fds, closed: the kernel drops the registration with them. */
static void disarm_pressure(struct watched *w)
{
	if (w->cg_fd >= 0)
		close(w->cg_fd);
	if (w->cg_events >= 0)
		close(w->cg_events);
	w->cg_fd = w->cg_events = -1;
	w->cg = CG_NONE;
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
	const struct cli *o = wt->o;
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

/*
 * What the kernel told of w's cgroup since the last look, into note; false
 * when nothing. v1: vmpressure signalled (its eventfd, read to clear). v2:
 * memory.events' high or oom grew, or the PSI trigger woke the watch and
 * the cgroup stalled since the last tick (the trigger's own wake does not
 * say whose it was: a poll through an epoll consumes it).
 */
static bool pressure_seen(struct watched *w, bool woken, char *note, size_t len)
{
	uint64_t v[2], n, stall;

	if (w->cg == CG_V1) {
		if (read(w->cg_fd, &n, sizeof(n)) != sizeof(n))
			return false;
		snprintf(note, len,
			 "%s: the kernel's memory pressure notification (medium or critical: "
			 "reclaim frees few of the pages it scans), %" PRIu64 " since the last",
			 w->cg_dir, n);
		return true;
	}
	if (w->cg != CG_V2 || !v2_events(w, v))
		return false;
	stall = v2_stall(w);
	if (v[0] > w->cg_last[0] || v[1] > w->cg_last[1]) {
		snprintf(note, len, "%s/memory.events: high +%" PRIu64 ", oom +%" PRIu64, w->cg_dir,
			 v[0] - w->cg_last[0], v[1] - w->cg_last[1]);
	} else if (woken && stall > w->stall_last) {
		snprintf(note, len,
			 "%s/memory.pressure: its tasks stalled on memory for %d ms of %d ms or "
			 "more (%.1f ms since the last second)",
			 w->cg_dir, PSI_STALL_US / 1000, PSI_WINDOW_US / 1000,
			 (double)(stall - w->stall_last) / 1e3);
	} else {
		memcpy(w->cg_last, v, sizeof(v));
		return false;
	}
	memcpy(w->cg_last, v, sizeof(v));
	w->stall_last = stall;
	return true;
}

/* A pressure profile of w if its cgroup told of pressure: one per cooldown. */
static void check_pressure(struct watch *wt, struct watched *w, bool woken)
{
	int64_t now = hb_clock_ns(CLOCK_MONOTONIC);
	char note[4400];

	if (!pressure_seen(w, woken, note, sizeof(note)))
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
		w->tr->rss_ns = hb_clock_ns(CLOCK_REALTIME);
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
		/* v2: the stall a PSI trigger's wake is measured against */
		if (w->cg == CG_V2)
			w->stall_last = v2_stall(w);
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
		else if (w->cg != CG_NONE)
			pressure_seen(w, true, note, sizeof(note)); /* read, so it wakes no more */
	}
	return 0;
}

/* What w holds for its breakdowns, freed; its target's profiles go without one from now. */
static void drop(struct watched *w)
{
	w->tr->rss = NULL;
	disarm_pressure(w);
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
		snprintf(note, len, "chosen as the OOM killer's victim");
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
	if (w->cg != CG_NONE)
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

int watch__new(const struct cli *o, struct target_run **trs, struct session *ss, size_t n,
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
	char why[4400];
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
	*w = (struct watched){ .tr = tr, .s = s, .cg_fd = -1, .cg_events = -1 };
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
	if (wt->o->watch_pressure && !arm_pressure(wt, w, why, sizeof(why))) {
		disarm_pressure(w);
		hb_warn("pid %d: no pressure trigger for it: %s", tr->pid, why);
	}
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
