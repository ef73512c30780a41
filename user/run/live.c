// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/errmsg.h"
#include "sampling/guard.h"
#include "run/outputs.h"
#include "run/live.h"
#include "util/output.h"
#include "profile/summary.h"
#include "sampling/privs.h"
#include "collect/recording.h"
#include "run/served.h"
#include "sampling/session.h"
#include "run/top.h"
#include "run/watch.h"
#include "run/window.h"

static struct heap_data session_data(struct session *s)
{
	return (struct heap_data){
		.collector = s->collector,
		.symbolizer = s->symbolizer,
		.counters = &s->counters,
		.procs = s->procs,
		.nprocs = s->nprocs,
		.sum = s->sum,
	};
}

/* The targets of one session and their collections, for the --interval windows. */
struct live_set {
	struct target_run **tr;
	struct session *s;
	size_t n;
	struct watch *watch; /* heapbpf watch: its triggers, or NULL */
	int usr1;	     /* --interval's SIGUSR1 (a signalfd), or -1 */
	bool status_shown;   /* a status line is on the terminal: a newline ends it */
};

/* The status line on a terminal, each second; at the end, its newline. */
static void on_status(void *arg, double elapsed, const struct collector_stats *all,
		      const struct heapbpf_counters *bc)
{
	struct live_set *ls = arg;

	if (!all) {
		if (ls->status_shown)
			fputc('\n', stderr);
		ls->status_shown = false;
		return;
	}
	ls->status_shown = true;
	summary_status_line(stderr, elapsed, all, bc);
}

/* Where a target's window ends: now, or when it exited. */
static int64_t window_end(const struct session *s, int64_t now)
{
	return s->exited ? s->start_wall_ns + s->duration_ns : now;
}

/* --interval: a window ends while sampling goes on, for every target at once. */
static int on_window(struct session *s0, void *arg)
{
	struct live_set *ls = arg;
	int64_t now = hb_clock_ns(CLOCK_REALTIME);
	char err[1024];

	(void)s0;
	for (size_t i = 0; i < ls->n; i++) {
		struct target_run *tr = ls->tr[i];
		struct session *s = &ls->s[i];
		struct heap_data d = session_data(s);
		int64_t end = window_end(s, now);

		if (!tr->k)
			tr->start_ns = s->start_wall_ns;
		/* failed at the start; or exited, and its last window is written */
		if (s->failed || (s->exited && tr->k && tr->start_ns >= end))
			continue;
		/* a full disk must not end the daemon: the next window tries again */
		if (window_emit(tr, &d, end, err, sizeof(err))) {
			hb_error_clean(NULL, err, NULL);
			tr->outcome |= RUN_FAILED;
		}
	}
	outputs_window_done(ls->tr[0]->run);
	return 0;
}

/* heapbpf top's view of t, as the command line asks for it. */
static void top_opts_of(const struct target_run *tr, const struct jemalloc_target *t,
			struct top_opts *to)
{
	const struct run_opts *o = tr->run->opts;

	*to = (struct top_opts){
		.pid = tr->pid,
		.t = t,
		.raw = o->raw,
		.ui = { .sort = o->top_sort, .by = o->top_by },
		.wrappers = o->wrappers,
		.nwrappers = o->nwrappers,
	};
}

/* The first status line: which process, which jemalloc, how often it samples. */
static void say_target(const struct target_run *tr, const struct jemalloc_target *t, bool timed)
{
	char comm[HB_CLEAN_SIZE(sizeof(t->comm))], version[HB_CLEAN_SIZE(sizeof(t->version))];
	char path[HB_CLEAN_SIZE(PATH_MAX)];

	hb_note("pid %d (%s): jemalloc %s in %s, sampling every %llu bytes on average%s", tr->pid,
		hb_clean(comm, sizeof(comm), t->comm),
		hb_clean(version, sizeof(version), t->version),
		hb_clean(path, sizeof(path), t->path), 1ULL << t->lg_prof_sample,
		timed ? "" : "; Ctrl-C to stop");
}

/* Privileges, jemalloc, the guard, and what a killed run left behind; *done: --reset is over. */
static int prepare(struct target_run *tr, struct jemalloc_target **t, struct guard **g, bool *done,
		   size_t n, char *err, size_t errlen)
{
	const struct run_opts *o = tr->run->opts;
	char path[HB_CLEAN_SIZE(256)];
	struct guard_recovery rec;
	int rc;

	*done = false;
	/* found already when a unit's processes were sorted by jemalloc */
	rc = *t ? 0 : jemalloc_target__find(tr->pid, o->layout, t, err, errlen);
	/* one heapbpf per target; and undo what a killed one left behind */
	rc = rc ?: guard__acquire(*t, g, err, errlen);
	/* held by another run: a one-shot run's window comes from it (served.h) */
	if (rc == -EBUSY && served_can(tr->run, n)) {
		struct top_opts to;

		*done = true;
		if (!tr->run->view)
			return served_window(tr, *t, err, errlen);
		top_opts_of(tr, *t, &to);
		return served_top(tr, *t, &to, err, errlen);
	}
	rc = rc ?: guard__recover(*g, *t, &rec, err, errlen);
	if (rc)
		return rc;
	if (rec.parent)
		hb_say("restored prof_active in pid %d, left on by a heapbpf run that was killed",
		       tr->pid);
	if (rec.children)
		hb_say("restored prof_active in %zu process(es) forked from pid %d while a "
		       "killed heapbpf run had it on",
		       rec.children, tr->pid);
	if (o->reset) {
		if (!rec.parent && !rec.children)
			hb_note("pid %d: nothing to reset", tr->pid);
		*done = true;
		return 0;
	}
	tr->t = *t;
	snprintf(tr->source, sizeof(tr->source), "pid %d (%s), jemalloc %s in %s", tr->pid,
		 (*t)->comm, (*t)->version, hb_clean(path, sizeof(path), (*t)->path));
	say_target(tr, *t, o->duration > 0);
	return 0;
}

/* Ends --record's file; the first error of the session's writes or of the end wins. */
static int finish_recording(const struct run_opts *o, struct recorder *rec, struct session *s,
			    int rc, char *err, size_t errlen)
{
	uint64_t raw = 0, file = 0;
	int r2, r3;

	r2 = recording__end(rec);
	recording__sizes(rec, &raw, &file);
	r3 = recording__close(rec);
	if (!r2)
		r2 = r3;
	/* a layout that did not fit its first samples (selfcheck.h): nothing it read is kept */
	if (rc == -EPROTO)
		unlink(o->record);
	if (rc)
		return rc;
	if (s->record_err || r2)
		return hb_fail(err, errlen, s->record_err ?: r2,
			       "cannot write the recording %s: %s", o->record,
			       strerror(-(s->record_err ?: r2)));
	hb_note("recorded %llu samples and %llu frees to %s (%llu bytes, %llu uncompressed)",
		(unsigned long long)collector__stats(s->collector)->allocs,
		(unsigned long long)collector__stats(s->collector)->frees, o->record,
		(unsigned long long)file, (unsigned long long)raw);
	return 0;
}

/* --interval's SIGUSR1: the windows end now, and the next ones begin. */
static int on_usr1(struct session *s0, void *arg)
{
	struct live_set *ls = arg;
	struct signalfd_siginfo si;
	bool asked = false;

	while (read(ls->usr1, &si, sizeof(si)) == sizeof(si))
		asked = true;
	return asked ? on_window(s0, ls) : 0;
}

static int collect(struct live_set *ls, const struct jemalloc_target *const *ts,
		   struct guard *const *gs, char *err, size_t errlen)
{
	struct target_run *tr = ls->tr[0];
	const struct run_opts *o = tr->run->opts;
	struct recorder *rec = NULL;
	struct top *top = NULL;
	struct session_opts so = {
		.duration = o->duration,
		.ringbuf_bytes = o->ringbuf_bytes,
		.on_status = !o->quiet && isatty(STDERR_FILENO) ? on_status : NULL,
		.status_arg = ls,
		.guard = gs[0],
		.follow_forks = o->follow_forks,
		.keep_privs = o->watch && (o->unit || o->pidfile),
		.verbose = o->verbose,
		.temporary_ns = o->temporary_ns,
		/* other runs ask this one for a window of its targets (serve.h) */
		.serve = tr->run->serve,
	};
	int rc;

	if (o->record) {
		rc = recording__open(o->record, &rec);
		if (rc)
			return hb_fail(err, errlen, rc, "cannot create the recording %s: %s",
				       o->record, output_strerror(rc));
		so.recorder = rec;
	}
	if (o->interval) {
		so.interval = o->interval;
		so.on_interval = on_window;
		so.interval_arg = ls;
	}
	/* heapbpf watch takes SIGUSR1 itself; an --interval run writes its windows now */
	if (o->interval && !o->watch) {
		sigset_t usr1;

		sigemptyset(&usr1);
		sigaddset(&usr1, SIGUSR1);
		ls->usr1 = signalfd(-1, &usr1, SFD_CLOEXEC | SFD_NONBLOCK);
		if (ls->usr1 < 0)
			return hb_fail(err, errlen, -errno, "cannot take SIGUSR1: %s",
				       strerror(errno));
		so.watch[so.nwatch++] = (struct session_watch){ ls->usr1, on_usr1, ls };
	}
	if (o->watch) {
		rc = watch__new(o, ls->tr, ls->s, ls->n, &ls->watch, err, errlen);
		if (rc)
			return rc;
		watch__session_opts(ls->watch, &so);
	}
	if (tr->run->view) {
		struct top_opts to;

		top_opts_of(tr, tr->t, &to);
		rc = top__new(&to, &top, err, errlen);
		if (rc)
			return rc;
		top__session_opts(top, &so);
	}
	rc = session_run_many(ts, gs, ls->n, &so, ls->s, err, errlen);
	/* the terminal as it was, before anything more is said */
	top__free(top);
	if (rec)
		rc = finish_recording(o, rec, ls->s, rc, err, errlen);
	return rc;
}

/* Children forked during the window: said always (a failure is a failure of the run). */
static void report_forks(struct target_run *tr, const struct session *s)
{
	const struct forks_result *f = &s->fork_result;

	tr->forks = *f;
	if (s->fork_state_err)
		hb_warn("the state file under %s could not list every forked "
			"child; a kill -9 of this run would not have restored them",
			guard_dir());
	if (f->failed) {
		hb_error("pid %d: prof_active could not be switched back off in %zu "
			 "process(es) forked from it; they keep sampling until they exit",
			 tr->pid, f->failed);
		tr->outcome |= RUN_FAILED;
	}
	if (f->forked)
		hb_note("pid %d forked %zu process(es) while sampling was on: prof_active "
			"restored in %zu, %zu had exited or exec'ed",
			tr->pid, f->forked, f->restored, f->gone);
}

/* A target's last window, from what its session collected; with several, a failure is its own. */
static int finish_target(struct target_run *tr, struct session *s, size_t n, struct watch *wt,
			 char *err, size_t errlen)
{
	struct heap_data d = session_data(s);
	int rc;

	report_forks(tr, s);
	if (s->failed) {
		tr->outcome |= RUN_FAILED;
		return 0;
	}
	if (wt) {
		tr->trigger =
			watch__last_trigger(wt, s, tr->trigger_note, sizeof(tr->trigger_note));
		/* its OOM profile was its last: the process is gone */
		if (tr->trigger && !tr->trigger[0]) {
			tr->trigger = NULL;
			collector__end(d.collector);
			return 0;
		}
	}
	if (n == 1 && s->reason == STOP_TARGET_EXIT)
		hb_note("pid %d exited%s", tr->pid,
			tr->run->view && !tr->output ? "" : "; writing what was collected");
	if (!tr->k)
		tr->start_ns = s->start_wall_ns;
	rc = window_last(tr, &d, s->start_wall_ns + s->duration_ns, err, errlen);
	if (rc && n > 1) {
		hb_error_clean(NULL, err, NULL);
		tr->outcome |= RUN_FAILED;
		return 0;
	}
	return rc;
}

/* Each target's preparation; those ready are listed in ls (the others said, with several). */
static int prepare_all(struct target_run *trs, struct jemalloc_target **ts, struct guard **gs,
		       size_t n, struct live_set *ls, char *err, size_t errlen)
{
	for (size_t i = 0; i < n; i++) {
		bool done;
		int rc = prepare(&trs[i], &ts[i], &gs[i], &done, n, err, errlen);

		if (rc && n == 1)
			return rc;
		if (rc) {
			hb_error_clean(NULL, err, NULL);
			trs[i].outcome |= RUN_FAILED;
			continue;
		}
		if (!done)
			ls->tr[ls->n++] = &trs[i];
	}
	return 0;
}

int live_run_targets(struct target_run *trs, struct jemalloc_target **ts, size_t n, char *err,
		     size_t errlen)
{
	struct guard **gs = calloc(n, sizeof(*gs)), **ags = calloc(n, sizeof(*ags));
	const struct jemalloc_target **ats = calloc(n, sizeof(*ats));
	struct live_set ls = { .tr = calloc(n, sizeof(*ls.tr)), .usr1 = -1 };
	int rc, rc2 = 0, r2;

	ls.s = calloc(n, sizeof(*ls.s));
	if (!gs || !ags || !ats || !ls.tr || !ls.s) {
		rc = hb_fail(err, errlen, -ENOMEM, "out of memory");
		goto out;
	}
	/* privileges and kernel features first: say exactly what is missing */
	rc = privs_check(err, errlen);
	rc = rc ?: prepare_all(trs, ts, gs, n, &ls, err, errlen);
	if (rc || !ls.n) {
		if (!rc && n > 1 && !trs[0].run->opts->reset)
			rc = hb_fail(err, errlen, -ESRCH,
				     "none of the %zu processes could be profiled", n);
		goto out;
	}
	for (size_t j = 0; j < ls.n; j++) {
		size_t i = (size_t)(ls.tr[j] - trs);

		ats[j] = ts[i];
		ags[j] = gs[i];
	}
	rc = collect(&ls, ats, ags, err, errlen);
	/* heapbpf watch goes on with the next process of a unit or pid file, unless told to stop */
	if (ls.n && (rc || ls.s[0].reason != STOP_TARGET_EXIT))
		trs[0].run->watch_stopped = true;
	for (size_t j = 0; j < ls.n; j++) {
		/* a failed session writes nothing; a target's own failure is said (one: returned) */
		if (rc)
			report_forks(ls.tr[j], &ls.s[j]);
		else if ((r2 = finish_target(ls.tr[j], &ls.s[j], ls.n, ls.watch, err, errlen)))
			rc2 = r2;
	}
	rc = rc ?: rc2;
out:
	watch__free(ls.watch);
	if (ls.usr1 >= 0)
		close(ls.usr1);
	/* the first one last: its pool holds objects the others' symbolizers share */
	for (size_t j = ls.n; ls.s && j-- > 0;)
		session_cleanup(&ls.s[j]);
	for (size_t i = 0; i < n; i++) {
		guard__release(gs ? gs[i] : NULL);
		jemalloc_target__free(ts[i]);
		ts[i] = NULL;
		trs[i].t = NULL;
	}
	free(gs);
	free(ags);
	free(ats);
	free(ls.tr);
	free(ls.s);
	return rc;
}

int live_run(struct target_run *tr, char *err, size_t errlen)
{
	struct jemalloc_target *t = NULL;

	return live_run_targets(tr, &t, 1, err, errlen);
}
