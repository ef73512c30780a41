// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * heapbpf agent: the node's jemalloc processes, found as they appear and
 * watched in one node session. Everything happens on the session's tick
 * (once a second, the ring buffer drained): the processes discovery names
 * are checked against the rules and for a usable jemalloc, exited targets
 * get their last profile, windows are written, the watch's triggers run,
 * heapbpf's own RSS and CPU are held to their caps and, when more
 * processes match than --max-targets, the budget rotates.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/hooks.h"
#include "run/agent.h"
#include "run/agent_types.h"
#include "run/budget.h"
#include "run/reset.h"
#include "targets/discover.h"
#include "util/errmsg.h"
#include "run/outputs.h"
#include "sampling/guard.h"
#include "sampling/runs.h"
#include "sampling/privs.h"
#include "symbols/proc.h"
#include "targets/selection.h"
#include "sampling/session.h"
#include "export/snapshot.h"
#include "run/watch.h"
#include "run/window.h"
#include "targets/workload.h"

/* Processes named by discovery checked per tick, at most (the rest wait for the next). */
#define DUE_PER_TICK 64
/* A process this young without jemalloc, or with profiling off, is checked again later. */
#define YOUNG_NOJE_S   3.0
#define YOUNG_NOPROF_S 15.0
/* A process this young the rules do not take yet is checked again later. */
#define YOUNG_UNSELECTED_S 5.0
/*
 * A jemalloc found longer ago than this is found again before its flag is
 * written: the process may have exec'ed since, unheard.
 */
#define FRESH_S 1.0

static struct heap_data data_of(struct session *s)
{
	return (struct heap_data){
		.collector = s->collector,
		.symbolizer = s->symbolizer,
		.counters = &s->counters,
	};
}

/* The process's comm and its executable's file name ("" when unreadable). */
static void names_of(pid_t pid, char *comm, size_t clen, char *exe, size_t elen)
{
	char path[64], buf[PATH_MAX];
	const char *slash;
	ssize_t n;
	FILE *f;

	comm[0] = exe[0] = '\0';
	snprintf(path, sizeof(path), "/proc/%d/comm", pid);
	f = fopen(path, "re");
	if (f) {
		if (fgets(comm, (int)clen, f))
			comm[strcspn(comm, "\n")] = '\0';
		fclose(f);
	}
	snprintf(path, sizeof(path), "/proc/%d/exe", pid);
	n = readlink(path, buf, sizeof(buf) - 1);
	if (n <= 0)
		return;
	buf[n] = '\0';
	slash = strrchr(buf, '/') ? strrchr(buf, '/') + 1 : buf;
	n = (ssize_t)strnlen(slash, elen - 1);
	memcpy(exe, slash, (size_t)n);
	exe[n] = '\0';
}

/* The first --select rule w satisfies (none given: an empty one), unless an --exclude does. */
static const struct select_rule *selected(const struct agent *a, const struct workload *w,
					  const char *comm, const char *exe)
{
	static const struct select_rule all;

	for (size_t i = 0; i < a->o->nexclude; i++) {
		if (selection_rule_match(&a->exc[i], w, comm, exe))
			return NULL;
	}
	if (!a->o->nselect)
		return &all;
	for (size_t i = 0; i < a->o->nselect; i++) {
		if (selection_rule_match(&a->sel[i], w, comm, exe))
			return &a->sel[i];
	}
	return NULL;
}

/* Its service_name and labels as Alloy would give them, the user's --label after them. */
static void name_proc(const struct agent *a, struct agent_proc *p, const struct workload *w,
		      const struct select_rule *rule)
{
	struct pyro_label wl[PYRO_MAX_LABELS];
	/* room for the defaults (hostname, pid, comm), the user's labels and trigger= */
	size_t room = PYRO_MAX_LABELS - 4 - (size_t)a->o->nlabels, n, k = 0;

	if (rule->service_name[0])
		snprintf(p->svc, sizeof(p->svc), "%s", rule->service_name);
	else
		workload_service_name(w, p->comm, p->svc, sizeof(p->svc));
	n = workload_labels(w, wl, room);
	for (size_t i = 0; i < n; i++) {
		char v[256];

		pyro_labels_sanitize(wl[i].value, false, v, sizeof(v));
		snprintf(p->kv[k], sizeof(p->kv[k]), "%s=%s", wl[i].key, v);
		p->labels[k] = p->kv[k];
		k++;
	}
	for (int i = 0; i < a->o->nlabels; i++)
		p->labels[k++] = a->o->labels[i];
	p->naming = (struct pyro_naming){ .service_name = p->svc,
					  .labels = p->labels,
					  .nlabels = (int)k };
}

static int add_proc(struct agent *a, struct agent_proc *p)
{
	if (a->nprocs == a->cap) {
		size_t cap = a->cap ? 2 * a->cap : 64;
		struct agent_proc **v = realloc(a->procs, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		a->procs = v;
		a->cap = cap;
	}
	a->procs[a->nprocs++] = p;
	return 0;
}

static struct agent_proc *proc_of(const struct agent *a, pid_t pid)
{
	for (size_t i = 0; i < a->nprocs; i++) {
		if (a->procs[i]->pid == pid)
			return a->procs[i];
	}
	return NULL;
}

/* What pid runs, with t its jemalloc. */
static void image_of(pid_t pid, const struct jemalloc_target *t, struct image_id *id)
{
	const char *b = elfobj__build_id(t->elf);
	char path[64];
	struct stat st;

	memset(id, 0, sizeof(*id));
	snprintf(path, sizeof(path), "/proc/%d/exe", pid);
	if (!stat(path, &st)) {
		id->exe_dev = st.st_dev;
		id->exe_ino = st.st_ino;
	}
	snprintf(id->je_path, sizeof(id->je_path), "%s", t->path ? t->path : "");
	snprintf(id->build_id, sizeof(id->build_id), "%s", b ? b : "");
	for (size_t i = 0; t->path && t->maps && i < t->maps->n; i++) {
		const struct proc_map *m = &t->maps->v[i];

		if (m->path && !strcmp(m->path, t->path)) {
			id->je_dev = makedev(m->dev_major, m->dev_minor);
			id->je_ino = m->inode;
			break;
		}
	}
}

static bool same_image(const struct image_id *x, const struct image_id *y)
{
	return x->exe_dev == y->exe_dev && x->exe_ino == y->exe_ino && x->je_dev == y->je_dev &&
	       x->je_ino == y->je_ino && !strcmp(x->je_path, y->je_path) &&
	       !strcmp(x->build_id, y->build_id);
}

/* Its jemalloc, judged: usable, not yet (a young process), or never (said why). */
static enum discover_verdict judge_jemalloc(struct agent *a, pid_t pid, double age,
					    struct jemalloc_target **t)
{
	char why[2048], clean[HB_CLEAN_SIZE(sizeof(why))];
	int rc = jemalloc_target__find(pid, a->o->layout, t, why, sizeof(why));

	if (rc == JEMALLOC_ENOTFOUND || rc == -ESRCH)
		return rc != -ESRCH && age < YOUNG_NOJE_S ? DISCOVER_LATER : DISCOVER_NEVER;
	if (rc == -ENOTSUP && age < YOUNG_NOPROF_S)
		return DISCOVER_LATER;
	if (!rc)
		return DISCOVER_TAKEN;
	jemalloc_target__free(*t);
	*t = NULL;
	hb_note("agent: skipped: %s", hb_clean(clean, sizeof(clean), why));
	return DISCOVER_NEVER;
}

static void retire(struct agent *a, struct agent_target *at, const char *trigger, const char *note);

/*
 * A process discovery named (age: seconds since its exec, or its start):
 * the rules, its jemalloc; a new waiting proc when it fits.
 */
static enum discover_verdict consider(struct agent *a, pid_t pid, uint64_t start, double age)
{
	struct agent_proc *old = proc_of(a, pid), *p;
	const struct select_rule *rule;
	struct jemalloc_target *t = NULL;
	enum discover_verdict v;
	struct workload w;
	char comm[32], exe[256], svc[HB_CLEAN_SIZE(sizeof(old->svc))];

	/*
	 * named again: it exec'ed (its jemalloc is a new one), or its pid is
	 * another process's now and the one sampled is gone
	 */
	if (old && old->on)
		retire(a, old->on, "exit",
		       old->start == start ? "the process exec'ed" : "the process exited");
	if (old) {
		jemalloc_target__free(old->t);
		old->t = NULL;
		old->pid = 0; /* pruned at the next tick */
	}
	names_of(pid, comm, sizeof(comm), exe, sizeof(exe));
	if (workload_of(pid, a->o->test_root, &w))
		return DISCOVER_NEVER;
	rule = selected(a, &w, comm, exe);
	/* a young process may not be in its cgroup yet (moved there after its exec) */
	if (!rule)
		return age < YOUNG_UNSELECTED_S ? DISCOVER_LATER : DISCOVER_NEVER;
	v = judge_jemalloc(a, pid, age, &t);
	if (v != DISCOVER_TAKEN)
		return v;
	p = calloc(1, sizeof(*p));
	if (!p || add_proc(a, p)) {
		free(p);
		jemalloc_target__free(t);
		return DISCOVER_NEVER;
	}
	p->pid = pid;
	p->start = start;
	p->t = t;
	p->found_at = hb_clock_ns(CLOCK_MONOTONIC);
	image_of(pid, t, &p->image);
	snprintf(p->comm, sizeof(p->comm), "%s", t->comm);
	name_proc(a, p, &w, rule);
	hb_note("agent: pid %d (%s): jemalloc %s with prof:true, service_name %s", pid, p->comm,
		t->version, hb_clean(svc, sizeof(svc), p->svc));
	return DISCOVER_TAKEN;
}

/* The processes discovery names now, judged. */
static void discover_now(struct agent *a)
{
	struct discover_due due[DUE_PER_TICK];
	size_t n = discover__due(a->d, due, DUE_PER_TICK);

	for (size_t i = 0; i < n; i++)
		discover__verdict(a->d, due[i].pid, due[i].start,
				  consider(a, due[i].pid, due[i].start, due[i].age));
}

/*
 * Its guard taken and what a killed run left restored; else why not: -EBUSY
 * when another heapbpf holds it.
 */
static int guard_target(struct agent_target *at, char *err, size_t errlen)
{
	struct guard_recovery rec;
	int rc = guard__acquire(at->t, &at->g, err, errlen);

	rc = rc ?: guard__recover(at->g, at->t, &rec, err, errlen);
	if (rc)
		return rc;
	if (rec.parent || rec.children)
		hb_say("restored prof_active in pid %d (and %zu process(es) it forked), left on "
		       "by a heapbpf run that was killed",
		       at->t->pid, rec.children);
	return 0;
}

static void free_target(struct agent_target *at)
{
	session_cleanup(&at->s);
	guard__release(at->g);
	jemalloc_target__free(at->t);
	free(at);
}

/*
 * at leaves the node session: its flag and its forked children's back off;
 * a restore that failed is said, with what to run. False on a failure.
 */
static bool leave_node(struct agent *a, struct agent_target *at)
{
	const struct forks_result *f = &at->s.fork_result;
	int rc = session_remove(&a->node, &at->s);

	if (rc)
		hb_error("cannot switch prof_active back off in pid %d: %s; run heapbpf --reset",
			 at->p->pid, strerror(-rc));
	if (f->failed)
		hb_error("cannot switch prof_active back off in %zu process(es) forked from pid "
			 "%d; run heapbpf --reset",
			 f->failed, at->p->pid);
	return !rc && !f->failed;
}

/* t is the jemalloc p had when it was found, in the same executable. */
static bool image_is(const struct agent_proc *p, const struct jemalloc_target *t)
{
	struct image_id now;

	image_of(p->pid, t, &now);
	return same_image(&p->image, &now);
}

/* p joins the node session: its flag on, its windows and triggers from now. */
static int admit(struct agent *a, struct agent_proc *p)
{
	char path[HB_CLEAN_SIZE(256)], svc[HB_CLEAN_SIZE(sizeof(p->svc))];
	struct agent_target *at = calloc(1, sizeof(*at));
	char err[2048];
	int rc;

	if (!at)
		return -ENOMEM;
	at->p = p;
	at->t = p->t;
	p->t = NULL;
	/* found a while ago (it waited for the budget): found again, it may have exec'ed */
	if (at->t && hb_clock_ns(CLOCK_MONOTONIC) - p->found_at > (int64_t)(FRESH_S * 1e9)) {
		jemalloc_target__free(at->t);
		at->t = NULL;
	}
	rc = at->t ? 0 : jemalloc_target__find(p->pid, a->o->layout, &at->t, err, sizeof(err));
	if (proc_start_time(p->pid) != p->start) {
		rc = rc ?: hb_fail(err, sizeof(err), -ESRCH, "pid %d exited", p->pid);
	} else if (rc || !image_is(p, at->t)) {
		/* another image (an exec unheard), or none: judged again as a new process */
		hb_note("agent: pid %d (%s): %s: checked again as a new process", p->pid, p->comm,
			rc ? "its jemalloc is not found again" : "it exec'ed since it was found");
		discover__again(a->d, p->pid);
		free_target(at);
		return -ESTALE;
	}
	rc = rc ?: guard_target(at, err, sizeof(err));
	at->tr =
		(struct target_run){ .run = a->r, .pid = p->pid, .t = at->t, .naming = &p->naming };
	rc = rc ?: session_add(&a->node, at->t, at->g, &at->s, err, sizeof(err));
	if (!rc && (rc = watch__add(a->wt, &at->tr, &at->s))) {
		/* in the loop already: out of it (its flag back off) before it is freed */
		leave_node(a, at);
		rc = hb_fail(err, sizeof(err), rc, "cannot watch pid %d's triggers: %s", p->pid,
			     strerror(-rc));
	}
	if (rc) {
		hb_error_clean(NULL, err, NULL);
		free_target(at);
		return rc;
	}
	snprintf(at->tr.source, sizeof(at->tr.source), "pid %d (%s), jemalloc %s in %s", p->pid,
		 at->t->comm, at->t->version, hb_clean(path, sizeof(path), at->t->path));
	at->tr.start_ns = at->s.start_wall_ns;
	at->next_window = at->s.start_wall_ns + (int64_t)(a->o->interval * 1e9);
	p->on = at;
	p->active_since = hb_clock_ns(CLOCK_MONOTONIC);
	a->active++;
	hb_note("agent: sampling pid %d (%s) as service_name %s", p->pid, p->comm,
		hb_clean(svc, sizeof(svc), p->svc));
	return 0;
}

/*
 * at's last profile (trigger NULL: a plain window; "" the OOM profile was
 * its last), and it leaves: its flag back off, freed; its proc waits.
 */
static void retire(struct agent *a, struct agent_target *at, const char *trigger, const char *note)
{
	struct heap_data d = data_of(&at->s);
	int64_t end;
	char err[1024];

	if (a->running && !leave_node(a, at))
		at->tr.outcome |= RUN_FAILED;
	end = at->s.exited ? at->s.start_wall_ns + at->s.duration_ns : hb_clock_ns(CLOCK_REALTIME);
	at->tr.trigger = trigger && trigger[0] ? trigger : NULL;
	snprintf(at->tr.trigger_note, sizeof(at->tr.trigger_note), "%s", note ? note : "");
	/* no profile of a layout its first samples did not confirm yet */
	if ((!trigger || trigger[0]) && !at->s.unconfirmed &&
	    window_last(&at->tr, &d, end, err, sizeof(err))) {
		hb_error_clean(NULL, err, NULL);
		at->tr.outcome |= RUN_FAILED;
	}
	/* a service's quiet spell is no failure of the agent's */
	a->r->outcome |= at->tr.outcome & ~RUN_NO_SAMPLES;
	watch__remove(a->wt, &at->s);
	at->p->on = NULL;
	at->p->idle_since = hb_clock_ns(CLOCK_MONOTONIC);
	a->active--;
	free_target(at);
}

/* Its window, if it ended; true when one was written. */
static bool window_due(struct agent *a, struct agent_target *at, int64_t now)
{
	struct heap_data d = data_of(&at->s);
	char err[1024];
	int rc;

	/*
	 * its layout is not confirmed yet, or its jemalloc may never sample
	 * (5.2.1's late activation): the window goes on until that is settled
	 */
	if (now < at->next_window || at->s.unconfirmed || at->s.late_open)
		return false;
	rc = window_emit(&at->tr, &d, now, err, sizeof(err));
	if (rc)
		hb_error_clean(NULL, err, NULL);
	/* most samples unreadable: not its jemalloc's data; let go (targets_now) */
	if (rc == -EBADMSG) {
		at->s.failed = rc;
		return false;
	}
	if (rc)
		at->tr.outcome |= RUN_FAILED;
	while (at->next_window <= now)
		at->next_window += (int64_t)(a->o->interval * 1e9);
	return true;
}

/* Exited targets' last profiles, ended windows; processes gone while waiting forgotten. */
static void targets_now(struct agent *a)
{
	int64_t now = hb_clock_ns(CLOCK_REALTIME);
	char note[512];
	bool wrote = false;

	for (size_t i = 0; i < a->nprocs;) {
		struct agent_proc *p = a->procs[i];
		struct agent_target *at = p->on;

		/* its window, which fails for one whose samples are not its jemalloc's */
		if (at && !at->s.failed && !at->s.exited)
			wrote |= window_due(a, at, now);
		/* failed in the session or its window (said there): its flag back off, no profile */
		if (at && at->s.failed) {
			bool unread = at->s.failed == -EBADMSG;

			retire(a, at, "", NULL);
			/* said once its flag is back off */
			if (unread)
				hb_note("agent: pid %d let go: its samples are not its jemalloc's",
					p->pid);
			p->pid = 0;
		} else if (at && at->s.exited) {
			const char *trig = watch__last_trigger(a->wt, &at->s, note, sizeof(note));

			retire(a, at, trig ? trig : "exit", note);
			p->pid = 0; /* gone: forgotten below */
			wrote = true;
		}
		if (!p->on && (!p->pid || proc_start_time(p->pid) != p->start)) {
			jemalloc_target__free(p->t);
			free(p);
			a->procs[i] = a->procs[--a->nprocs];
			continue;
		}
		i++;
	}
	if (wrote)
		outputs_window_done(a->r);
}

/* Over a cap: the target holding most let go (run/budget.c chooses it). */
static void hold_caps(struct agent *a)
{
	struct agent_target *at;
	char what[128];
	pid_t pid;

	at = budget_over_cap(a, what, sizeof(what));
	if (!at)
		return;
	pid = at->p->pid;
	retire(a, at, NULL, NULL);
	/* what its collector held goes back to the system, not to malloc's free lists */
	malloc_trim(0);
	budget_cap_done(a);
	/* said once done: its flag is off and its last window written when this is read */
	hb_warn("agent: %s: pid %d let go (its last window written), %zu sampled at once from "
		"now on",
		what, pid, a->budget);
}

/* More processes match than the budget: those sampled longest make room for those waiting. */
static void rotate(struct agent *a)
{
	size_t out = budget_rotation_due(a), n = 0;
	char pids[512] = "";

	if (!out)
		return;
	for (; n < out; n++) {
		struct agent_target *at = budget_oldest(a);
		size_t len = strlen(pids);

		if (!at)
			break;
		snprintf(pids + len, sizeof(pids) - len, "%s%d", n ? "," : "", at->p->pid);
		retire(a, at, NULL, NULL);
	}
	hb_say("agent: rotation: %zu processes match, %zu sampled at once: pid %s out, the %zu "
	       "waiting longest in",
	       a->nprocs, a->budget, pids, n);
	malloc_trim(0);
}

/* Waiting processes into the budget while it has room. */
static void fill(struct agent *a)
{
	struct agent_proc *p;

	while ((p = budget_next_in(a))) {
		int rc = admit(a, p);

		/* cannot be sampled: forgotten at the next tick; held by another run: it waits */
		if (rc && rc != -EBUSY)
			p->pid = 0;
	}
}

/*
 * For the CPU cap's test only (HEAPBPF_TEST_AGENT_CPU_MS): that many ms of
 * this thread's CPU spent, on the clock the cap reads, so that heapbpf's
 * share is known to be over a small cap however little work a busy machine
 * lets the test give it.
 */
static void spend_test_cpu(void)
{
	const char *ms = hb_hook(HB_HOOK_AGENT_CPU);
	int64_t until;

	if (!ms)
		return;
	until = hb_clock_ns(CLOCK_THREAD_CPUTIME_ID) + (int64_t)strtoul(ms, NULL, 10) * 1000000;
	while (hb_clock_ns(CLOCK_THREAD_CPUTIME_ID) < until)
		;
}

/* The node session's tick: everything the agent does, once a second. */
static int on_tick(struct session *node, void *arg)
{
	struct agent *a = arg;

	(void)node;
	discover_now(a);
	targets_now(a);
	watch__tick(a->wt);
	spend_test_cpu();
	hold_caps(a);
	rotate(a);
	fill(a);
	return 0;
}

static int on_connector(struct session *node, void *arg)
{
	struct agent *a = arg;

	(void)node;
	discover__read(a->d);
	return 0;
}

/*
 * The node's layout: a process's whose layout its version string or DWARF
 * confirms, else one only a self-check will (which may then not fit);
 * 0 once chosen, -ESRCH while no process fits.
 */
static int choose_layout(struct agent *a)
{
	struct agent_proc *pick = NULL;
	char err[2048];

	for (size_t i = 0; i < a->nprocs; i++) {
		struct agent_proc *p = a->procs[i];

		if (p->pid && p->t &&
		    (!pick || (pick->t->needs_selfcheck && !p->t->needs_selfcheck)))
			pick = p;
	}
	if (!pick || jemalloc_target__find(pick->pid, a->o->layout, &a->layout_t, err, sizeof(err)))
		return -ESRCH;
	return 0;
}

/*
 * Before the node session: the first process that fits, whose jemalloc
 * layout the BPF object is loaded with. 1 when a signal (or -d) came first.
 */
static int first_target(struct agent *a)
{
	const struct timespec poll = { .tv_nsec = 250 * 1000000L };
	int64_t until = a->o->duration > 0
				? hb_clock_ns(CLOCK_MONOTONIC) + (int64_t)(a->o->duration * 1e9)
				: 0;
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	for (;;) {
		if (discover__has_connector(a->d))
			discover__read(a->d);
		discover_now(a);
		if (!choose_layout(a))
			return 0;
		if (sigtimedwait(&set, NULL, &poll) > 0 ||
		    (until && hb_clock_ns(CLOCK_MONOTONIC) > until))
			return 1;
	}
}

/* The rules as typed, parsed: a wrong one refused before anything runs. */
static int parse_rules(struct agent *a, char *err, size_t errlen)
{
	const struct run_opts *o = a->o;
	int rc = 0;

	for (size_t i = 0; !rc && i < o->nselect; i++)
		rc = selection_rule_parse(o->select_rules[i], false, &a->sel[i], err, errlen);
	for (size_t i = 0; !rc && i < o->nexclude; i++)
		rc = selection_rule_parse(o->exclude_rules[i], true, &a->exc[i], err, errlen);
	return rc;
}

/* The node session, until a signal or -d; the agent's work runs on its tick. */
static int run_node(struct agent *a, char *err, size_t errlen)
{
	const struct run_opts *o = a->o;
	struct session_opts so = {
		.duration = o->duration,
		.ringbuf_bytes = o->ringbuf_bytes,
		.keep_privs = true,
		.verbose = o->verbose,
		.temporary_ns = o->temporary_ns,
		/* other runs ask the agent for a window of a process it samples (serve.h) */
		.serve = a->r->serve,
	};
	int rc;

	watch__session_opts(a->wt, &so);
	so.interval = 1;
	so.on_interval = on_tick;
	so.interval_arg = a;
	if (discover__has_connector(a->d) && so.nwatch < SESSION_MAX_WATCH) {
		so.watch[so.nwatch].fd = discover__fd(a->d);
		so.watch[so.nwatch].on_ready = on_connector;
		so.watch[so.nwatch].arg = a;
		so.nwatch++;
	}
	a->running = true;
	rc = session_run_node(a->layout_t, &so, &a->node, err, errlen);
	a->running = false;
	return rc;
}

/* After the session: every sampled target's last profile ("stop"), everything freed. */
static void finish(struct agent *a)
{
	char note[512];

	for (size_t i = 0; i < a->nprocs; i++) {
		struct agent_target *at = a->procs[i]->on;
		const char *trig;

		if (!at)
			continue;
		trig = watch__last_trigger(a->wt, &at->s, note, sizeof(note));
		retire(a, at, trig ? trig : "stop", note);
	}
	for (size_t i = 0; i < a->nprocs; i++) {
		jemalloc_target__free(a->procs[i]->t);
		free(a->procs[i]);
	}
	free(a->procs);
	/* after every target's: its pool holds objects their symbolizers shared */
	session_cleanup(&a->node);
	jemalloc_target__free(a->layout_t);
	watch__free(a->wt);
	discover__free(a->d);
}

/*
 * In a cgroup namespace of its own (a pod on cgroup v2), other processes'
 * cgroups read as relative paths: made the host's again from its own cgroup,
 * so that cgroup= rules and units match as on the host.
 */
static void host_cgroups(void)
{
	char base[4096];
	int rc = workload_host_cgroup_base(base, sizeof(base));

	if (!rc) {
		workload_set_cgroup_base(base);
		hb_note("agent: in a cgroup namespace of its own, whose root is the host's %s: "
			"other processes' cgroups are read from there",
			base);
	} else if (rc < 0) {
		hb_warn("agent: its own cgroup was not found in the host's hierarchy (mount the "
			"host's /sys/fs/cgroup): in a cgroup namespace of its own, cgroup= rules "
			"would see other processes' cgroups as paths relative to it");
	}
}

/* Whether stderr is the journal (systemd's JOURNAL_STREAM names its device and inode). */
static bool stderr_is_journal(void)
{
	const char *js = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;

	return js && sscanf(js, "%llu:%llu", &dev, &ino) == 2 && !fstat(STDERR_FILENO, &st) &&
	       st.st_dev == (dev_t)dev && st.st_ino == (ino_t)ino;
}

int agent_run(struct run *r, char *err, size_t errlen)
{
	struct agent a = { .r = r, .o = r->opts, .budget = r->opts->max_targets };
	int rc;

	if (r->opts->reset)
		return reset_all(r, err, errlen);
	/* a log read later: each line says when, unless a terminal or the journal shows it */
	hb_set_timestamps(!isatty(STDERR_FILENO) && !stderr_is_journal());
	r->name_targets = true;
	/* --keep and --max-bytes of each process's profiles, counted apart */
	r->prune_per_process = true;
	/* each process's windows count from when it joined */
	r->own_windows = true;
	rc = parse_rules(&a, err, errlen);
	rc = rc ?: privs_check(err, errlen);
	rc = rc ?: outputs_setup(r, err, errlen);
	rc = rc ?: discover__new(30, &a.d, err, errlen);
	rc = rc ?: watch__new(a.o, NULL, NULL, 0, &a.wt, err, errlen);
	if (rc) {
		finish(&a);
		return rc;
	}
	if (!discover__has_connector(a.d))
		hb_warn("agent: the kernel's process connector cannot be read here (it needs "
			"CAP_NET_ADMIN and the host's network namespace): new processes are found "
			"by a scan of /proc every 2 s");
	host_cgroups();
	if (!a.o->nselect)
		hb_warn("agent: no --select: every process on this host whose jemalloc has "
			"profiling built in is sampled, %lu at once; --select names the services "
			"(docs/agent.md)",
			a.o->max_targets);
	hb_note("agent: watching the node's jemalloc processes, %lu at once", a.o->max_targets);
	if (!first_target(&a))
		rc = run_node(&a, err, errlen);
	finish(&a);
	outputs_finish(r);
	return rc;
}
