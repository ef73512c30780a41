// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "errmsg.h"
#include "fleet.h"
#include "guard.h"
#include "live.h"
#include "privs.h"
#include "recording.h"
#include "session.h"
#include "top.h"
#include "window.h"

static int64_t wall_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static struct heap_data session_data(struct session *s)
{
	return (struct heap_data){
		.collector = s->collector,
		.symbolizer = s->symbolizer,
		.counters = &s->counters,
		.procs = s->procs,
		.nprocs = s->nprocs,
	};
}

/* --interval: a window ends while sampling goes on. */
static int on_window(struct session *s, void *arg)
{
	struct target_run *tr = arg;
	struct heap_data d = session_data(s);
	char err[1024];

	if (!tr->k)
		tr->start_ns = s->start_wall_ns;
	/* a full disk must not end the daemon: the next window tries again */
	if (window_emit(tr, &d, wall_ns(), err, sizeof(err))) {
		fprintf(stderr, "heapbpf: %s\n", err);
		tr->outcome |= RUN_FAILED;
	}
	fleet_window_done(tr->run);
	return 0;
}

/* Privileges, jemalloc, the guard, and what a killed run left behind; *done: --reset is over. */
static int prepare(struct target_run *tr, struct jemalloc_target **t, struct guard **g, bool *done,
		   char *err, size_t errlen)
{
	const struct cli *o = tr->run->opts;
	struct guard_recovery rec;
	int rc;

	*done = false;
	/* privileges and kernel features first: say exactly what is missing */
	rc = privs_check(err, errlen);
	rc = rc ?: jemalloc_target__find(tr->pid, o->layout, t, err, errlen);
	/* one heapbpf per target; and undo what a killed one left behind */
	rc = rc ?: guard__acquire(*t, g, err, errlen);
	rc = rc ?: guard__recover(*g, *t, &rec, err, errlen);
	if (rc)
		return rc;
	if (rec.parent)
		fprintf(stderr,
			"heapbpf: restored prof_active in pid %d, left on by a heapbpf run that was "
			"killed\n",
			tr->pid);
	if (rec.children)
		fprintf(stderr,
			"heapbpf: restored prof_active in %zu process(es) forked from pid %d while a "
			"killed heapbpf run had it on\n",
			rec.children, tr->pid);
	if (o->reset) {
		if (!rec.parent && !rec.children && !o->quiet)
			fprintf(stderr, "heapbpf: pid %d: nothing to reset\n", tr->pid);
		*done = true;
		return 0;
	}
	tr->t = *t;
	snprintf(tr->source, sizeof(tr->source), "pid %d (%s), jemalloc %s in %s", tr->pid,
		 (*t)->comm, (*t)->version, (*t)->path);
	if (!o->quiet)
		fprintf(stderr,
			"heapbpf: pid %d (%s): jemalloc %s in %s, sampling every %llu bytes on "
			"average%s\n",
			tr->pid, (*t)->comm, (*t)->version, (*t)->path,
			1ULL << (*t)->lg_prof_sample, o->duration > 0 ? "" : "; Ctrl-C to stop");
	return 0;
}

/* Ends --record's file; the first error of the session's writes or of the end wins. */
static int finish_recording(const struct cli *o, struct recorder *rec, struct session *s, int rc,
			    char *err, size_t errlen)
{
	uint64_t raw = 0, file = 0;
	int r2, r3;

	r2 = recorder__end(rec);
	recorder__sizes(rec, &raw, &file);
	r3 = recorder__close(rec);
	if (!r2)
		r2 = r3;
	if (rc)
		return rc;
	if (s->record_err || r2)
		return hb_fail(err, errlen, s->record_err ?: r2,
			       "cannot write the recording %s: %s", o->record,
			       strerror(-(s->record_err ?: r2)));
	if (!o->quiet)
		fprintf(stderr,
			"heapbpf: recorded %llu samples and %llu frees to %s (%llu bytes, %llu "
			"uncompressed)\n",
			(unsigned long long)collector__stats(s->collector)->allocs,
			(unsigned long long)collector__stats(s->collector)->frees, o->record,
			(unsigned long long)file, (unsigned long long)raw);
	return 0;
}

static int collect(struct target_run *tr, struct guard *g, struct session *s, char *err,
		   size_t errlen)
{
	const struct cli *o = tr->run->opts;
	struct recorder *rec = NULL;
	struct top *top = NULL;
	struct session_opts so = {
		.duration = o->duration,
		.ringbuf_bytes = o->ringbuf_bytes,
		.status_line = !o->quiet && isatty(STDERR_FILENO),
		.guard = g,
		.follow_forks = o->follow_forks,
		.quiet = o->quiet,
		.verbose = o->verbose,
		.temporary_ns = o->temporary_ns,
	};
	int rc;

	if (o->record) {
		rc = recorder__open(o->record, &rec);
		if (rc)
			return hb_fail(err, errlen, rc, "cannot create the recording %s: %s",
				       o->record, strerror(-rc));
		so.recorder = rec;
	}
	if (o->interval) {
		so.interval = o->interval;
		so.on_interval = on_window;
		so.interval_arg = tr;
	}
	if (o->mode == MODE_TOP) {
		struct top_opts to = {
			.pid = tr->pid,
			.t = tr->t,
			.raw = o->raw,
			.ui = { .sort = o->top_sort, .by = o->top_by },
		};

		rc = top__new(&to, &top, err, errlen);
		if (rc)
			return rc;
		top__session_opts(top, &so);
	}
	rc = session_run(tr->t, &so, s, err, errlen);
	/* the terminal as it was, before anything more is said */
	top__free(top);
	if (rec)
		rc = finish_recording(o, rec, s, rc, err, errlen);
	return rc;
}

/* Children forked during the window: said always (a failure is a failure of the run). */
static void report_forks(struct target_run *tr, const struct session *s)
{
	const struct forks_result *f = &s->fork_result;

	tr->forks = *f;
	if (s->fork_state_err)
		fprintf(stderr,
			"heapbpf: warning: the state file under %s could not list every forked "
			"child; a kill -9 of this run would not have restored them\n",
			guard_dir());
	if (f->failed) {
		fprintf(stderr,
			"heapbpf: pid %d: prof_active could not be switched back off in %zu "
			"process(es) forked from it; they keep sampling until they exit\n",
			tr->pid, f->failed);
		tr->outcome |= RUN_FAILED;
	}
	if (f->forked && !tr->run->opts->quiet)
		fprintf(stderr,
			"heapbpf: pid %d forked %zu process(es) while sampling was on: prof_active "
			"restored in %zu, %zu had exited or exec'ed\n",
			tr->pid, f->forked, f->restored, f->gone);
}

int live_run(struct target_run *tr, char *err, size_t errlen)
{
	struct jemalloc_target *t = NULL;
	struct guard *g = NULL;
	struct session s = {};
	struct heap_data d;
	bool done;
	int rc;

	rc = prepare(tr, &t, &g, &done, err, errlen);
	if (rc || done)
		goto out;
	rc = collect(tr, g, &s, err, errlen);
	report_forks(tr, &s);
	if (rc)
		goto out;
	if (s.reason == STOP_TARGET_EXIT && !tr->run->opts->quiet)
		fprintf(stderr, "heapbpf: pid %d exited%s\n", tr->pid,
			tr->run->opts->mode == MODE_TOP && !tr->output
				? ""
				: "; writing what was collected");
	if (!tr->k)
		tr->start_ns = s.start_wall_ns;
	d = session_data(&s);
	rc = window_last(tr, &d, s.start_wall_ns + s.duration_ns, err, errlen);
out:
	session_cleanup(&s);
	guard__release(g);
	jemalloc_target__free(t);
	tr->t = NULL;
	return rc;
}
