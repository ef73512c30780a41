// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * heapbpf agent's budget: at most --max-targets processes sampled at once,
 * rotated when more match, and heapbpf's own RSS and CPU held to their
 * caps by letting the largest target go. Each runs on the node session's
 * tick (run/agent.c).
 */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/errmsg.h"
#include "collect/collector.h"
#include "sampling/guard.h"
#include "sampling/runs.h"
#include "run/agent_types.h"
#include "run/budget.h"

/* heapbpf's CPU share is measured over this many seconds. */
#define CPU_SPAN_S 10.0

/* heapbpf's own resident bytes. */
static uint64_t self_rss(void)
{
	unsigned long long size = 0, resident = 0;
	FILE *f = fopen("/proc/self/statm", "re");

	if (f) {
		if (fscanf(f, "%llu %llu", &size, &resident) != 2)
			resident = 0;
		fclose(f);
	}
	return resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* heapbpf's user and system time so far, in clock ticks; 0 when unreadable. */
static uint64_t self_cpu_ns(void)
{
	struct timespec ts;

	/* every thread's time, to the nanosecond (/proc's ticks are 10 ms) */
	if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts))
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/*
 * heapbpf's CPU share of one core over the last CPU_SPAN_S to now (the
 * caller's clock, the one its step waits are counted on), in percent; -1
 * until measured.
 */
static double cpu_share(struct agent *a, int64_t now)
{
	uint64_t cpu = self_cpu_ns();
	double pct;

	/* unreadable (0): not measured now, the last reading kept */
	if (!cpu || cpu < a->cpu_ns)
		return -1;
	if (!a->cpu_at || now - a->cpu_at < (int64_t)(CPU_SPAN_S * 1e9)) {
		if (!a->cpu_at) {
			a->cpu_at = now;
			a->cpu_ns = cpu;
		}
		return -1;
	}
	pct = 100.0 * (double)(cpu - a->cpu_ns) / (double)(now - a->cpu_at);
	a->cpu_at = now;
	a->cpu_ns = cpu;
	return pct;
}

/*
 * The CPU span starts again after a step: the next is judged on what
 * heapbpf costs without the target let go, not on the cost of letting it go.
 */
static void cpu_restart(struct agent *a)
{
	a->cpu_ns = self_cpu_ns();
	a->cpu_at = a->cpu_ns ? hb_clock_ns(CLOCK_MONOTONIC) : 0;
}

/* The sampled target holding most in use: what a cap lets go first. */
static struct agent_target *largest(const struct agent *a)
{
	struct agent_target *best = NULL;
	double most = -1;

	for (size_t i = 0; i < a->nprocs; i++) {
		struct agent_target *at = a->procs[i]->on;
		double v = at ? collector__totals(at->s.collector)->inuse_space : 0;

		if (at && v > most) {
			most = v;
			best = at;
		}
	}
	return best;
}

/*
 * Over --max-rss or --max-cpu: the target holding most is to be let go, and
 * one fewer sampled at once from then on; then CPU_SPAN_S for the figures
 * to follow before the next. Down to one target, the cap is said once and
 * that one stays: an agent that samples nothing serves nobody.
 */
struct agent_target *budget_over_cap(struct agent *a, char *what, size_t len)
{
	int64_t now = hb_clock_ns(CLOCK_MONOTONIC);
	uint64_t rss = self_rss();
	double cpu = cpu_share(a, now);
	struct agent_target *at;
	unsigned int cap; /* its bit in cap_said: 1 the RSS cap, 2 the CPU cap */

	if (rss > a->o->max_rss) {
		cap = 1;
		snprintf(what, len, "heapbpf's RSS of %llu MiB is over --max-rss %llu MiB",
			 (unsigned long long)(rss >> 20),
			 (unsigned long long)(a->o->max_rss >> 20));
	} else if (cpu > a->o->max_cpu) {
		cap = 2;
		snprintf(what, len, "heapbpf's CPU of %.2f%% is over --max-cpu %g%%", cpu,
			 a->o->max_cpu);
	} else {
		return NULL;
	}
	/* nothing sampled: heapbpf's floor, nothing to let go */
	if (!a->active || now < a->shed_at + (int64_t)(CPU_SPAN_S * 1e9))
		return NULL;
	a->shed_at = now;
	if (a->active == 1) {
		a->budget = 1;
		if (!(a->cap_said & cap))
			hb_warn("agent: %s with one process sampled; it stays sampled", what);
		a->cap_said |= cap;
		return NULL;
	}
	at = largest(a);
	/* one fewer than are sampled now: the one let go is not taken back at once */
	if (at)
		a->budget = a->active - 1;
	return at;
}

void budget_cap_done(struct agent *a)
{
	cpu_restart(a);
}

/* How many processes wait their turn. */
static size_t waiting(const struct agent *a)
{
	size_t n = 0;

	for (size_t i = 0; i < a->nprocs; i++)
		n += a->procs[i]->pid && !a->procs[i]->on;
	return n;
}

struct agent_target *budget_oldest(const struct agent *a)
{
	struct agent_target *best = NULL;

	for (size_t i = 0; i < a->nprocs; i++) {
		struct agent_proc *p = a->procs[i];

		if (p->on && (!best || p->active_since < best->p->active_since))
			best = p->on;
	}
	return best;
}

size_t budget_rotation_due(struct agent *a)
{
	int64_t now = hb_clock_ns(CLOCK_MONOTONIC);
	size_t out = waiting(a);

	if (now < a->next_rotate)
		return 0;
	a->next_rotate = now + (int64_t)(a->o->rotate * 1e9);
	if (!out || a->active < a->budget)
		return 0;
	return out > a->active ? a->active : out;
}

/*
 * Whether another heapbpf (a one-shot run, top, watch, a snapshot timer's)
 * holds p now: it waits, said once, and is taken at the first tick after
 * it is released, said too.
 */
static bool held(struct agent_proc *p)
{
	struct runs_entry e;
	pid_t h = runs_lock_holder(guard_dir(), p->pid);

	/* held by a run that has not said its pid yet (-1): said at the next tick */
	if (h > 0 && h != getpid() && !p->held_by) {
		p->held_by = h;
		if (runs_holder_of(guard_dir(), p->pid, &e))
			snprintf(e.mode, sizeof(e.mode), "run");
		hb_note("agent: pid %d (%s) is held by heapbpf %s, pid %d: taken once it is "
			"released",
			p->pid, p->comm, e.mode, h);
	} else if (!h && p->held_by) {
		hb_note("agent: pid %d (%s) released by heapbpf pid %d: taken", p->pid, p->comm,
			p->held_by);
		p->held_by = 0;
	}
	return h && h != getpid();
}

/* The waiting process whose turn it is: never sampled first, then the longest idle. */
static struct agent_proc *next_in(const struct agent *a)
{
	struct agent_proc *best = NULL;

	for (size_t i = 0; i < a->nprocs; i++) {
		struct agent_proc *p = a->procs[i];

		if (!p->pid || p->on || held(p))
			continue;
		if (!best || p->idle_since < best->idle_since)
			best = p;
	}
	return best;
}

struct agent_proc *budget_next_in(const struct agent *a)
{
	return a->active < a->budget ? next_in(a) : NULL;
}
