// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util/errmsg.h"
#include "run/fleet.h"
#include "run/outputs.h"
#include "run/live.h"
#include "util/output.h"
#include "sampling/privs.h"
#include "symbols/proc.h"
#include "export/pyroscope.h"
#include "export/snapshot.h"
#include "targets/targets.h"

/* A plain run always writes a file (unless it only records); fleet modes, top: only -o. */
static void default_output(const struct run *r, struct target_run *tr,
			   const struct jemalloc_target *t, char *buf, size_t len)
{
	const struct run_opts *o = r->opts;
	char what[96], comm[64] = "";

	if (tr->output || run_opts_fleet_output(o) || o->record || r->view)
		return;
	/* as a snapshot of it is named: heap-STAMP-PID-COMM */
	if (t)
		snprintf(comm, sizeof(comm), "%s", t->comm);
	else
		proc_comm(tr->pid, comm, sizeof(comm));
	snprintf(what, sizeof(what), "%d%s%s", tr->pid, comm[0] ? "-" : "", comm);
	sink_default_name(buf, len, what, o->format);
	tr->output = buf;
}

/* The files a run will write, checked before it profiles: a refusal then costs no window. */
static int check_outputs(const struct run *r, const struct target_run *trs, size_t n, char *err,
			 size_t errlen)
{
	const char *at_peak = r->opts->at_peak;
	int rc;

	if (r->opts->reset)
		return 0;
	for (size_t i = 0; i < n; i++) {
		rc = trs[i].output ? output_check_path(trs[i].output) : 0;
		if (rc)
			return hb_fail(err, errlen, rc, "cannot write %s: %s", trs[i].output,
				       output_strerror(rc));
	}
	rc = at_peak ? output_check_path(at_peak) : 0;
	return rc ? hb_fail(err, errlen, rc, "cannot write %s: %s", at_peak, output_strerror(rc))
		  : 0;
}

/*
 * Targets whose jemalloc has the same layout, in one session (one BPF
 * object and ring buffer); each target's outcome joins the run's. ts[i] is
 * pids[i]'s jemalloc, found already, or NULL; all are freed.
 */
static int run_group(struct run *r, const pid_t *pids, struct jemalloc_target **ts, size_t n,
		     char *err, size_t errlen)
{
	struct target_run *trs;
	char(*outbuf)[256];
	int rc = -ENOMEM;

	if (!n)
		return hb_fail(err, errlen, -ESRCH, "no target process");
	trs = calloc(n, sizeof(*trs));
	outbuf = calloc(n, sizeof(*outbuf));
	if (trs && outbuf) {
		for (size_t i = 0; i < n; i++) {
			trs[i] = (struct target_run){ .run = r,
						      .pid = pids[i],
						      .output = r->opts->output };
			default_output(r, &trs[i], ts[i], outbuf[i], sizeof(outbuf[i]));
		}
		rc = check_outputs(r, trs, n, err, errlen);
		if (rc) {
			for (size_t i = 0; i < n; i++)
				jemalloc_target__free(ts[i]);
		} else {
			rc = live_run_targets(trs, ts, n, err, errlen);
		}
		for (size_t i = 0; i < n; i++) {
			r->outcome |= trs[i].outcome;
			r->sampled |= trs[i].any_samples;
		}
	} else {
		for (size_t i = 0; i < n; i++)
			jemalloc_target__free(ts[i]);
		hb_fail(err, errlen, rc, "out of memory");
	}
	r->outcome |= rc ? RUN_FAILED : 0;
	free(trs);
	free(outbuf);
	return rc;
}

/* Several sessions (jemalloc of different layouts): one child process each; the parent forwards signals and joins outcomes. */
static void run_children(struct run *r, const pid_t *pids, struct jemalloc_target **ts,
			 const int *group, int ngroups, int n)
{
	pid_t kids[TARGETS_MAX];
	int running = 0;
	sigset_t set, old;

	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigprocmask(SIG_BLOCK, &set, &old);
	for (int g = 0; g < ngroups; g++) {
		kids[g] = fork();
		if (kids[g] == 0) {
			pid_t gp[TARGETS_MAX];
			struct jemalloc_target *gt[TARGETS_MAX];
			char err[2048] = "";
			size_t k = 0;

			for (int i = 0; i < n; i++) {
				if (group[i] == g) {
					gp[k] = pids[i];
					gt[k++] = ts[i];
				} else {
					jemalloc_target__free(ts[i]);
				}
			}
			r->outcome = 0;
			if (run_group(r, gp, gt, k, err, sizeof(err)))
				hb_error_clean(NULL, err, "failed");
			/* the child's outcome travels to the parent as its exit status */
			exit((int)r->outcome);
		}
		if (kids[g] < 0) {
			hb_error("cannot start a process for a session: %s", strerror(errno));
			r->outcome |= RUN_FAILED;
			continue;
		}
		running++;
	}
	for (int i = 0; i < n; i++)
		jemalloc_target__free(ts[i]);
	/* the parent only waits; SIGINT/SIGTERM/SIGHUP go to every child, which stops cleanly */
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	while (running > 0) {
		siginfo_t si;
		int st, sig = sigwaitinfo(&set, &si);

		if (sig < 0)
			continue;
		for (int g = 0; g < ngroups; g++) {
			if (kids[g] <= 0)
				continue;
			if (sig != SIGCHLD) {
				kill(kids[g], sig);
				continue;
			}
			if (waitpid(kids[g], &st, WNOHANG) != kids[g])
				continue;
			kids[g] = 0;
			running--;
			r->outcome |= WIFEXITED(st) ? (unsigned int)WEXITSTATUS(st) : RUN_FAILED;
		}
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
}

/*
 * The unit's processes by jemalloc layout: one session each (group[i]);
 * returns the number of sessions. Processes of one binary, or of different
 * binaries with the same jemalloc version, share one.
 */
static int group_by_layout(struct jemalloc_target *const *ts, int n, int *group)
{
	int ngroups = 0;

	for (int i = 0; i < n; i++) {
		group[i] = -1;
		for (int j = 0; j < i && group[i] < 0; j++) {
			if (ts[i] && ts[j] &&
			    !memcmp(&ts[j]->layout->bpf, &ts[i]->layout->bpf,
				    sizeof(ts[i]->layout->bpf)))
				group[i] = group[j];
		}
		if (group[i] < 0)
			group[i] = ngroups++;
	}
	return ngroups;
}

/*
 * Several targets, or children followed: a descriptor or two each (pidfd,
 * uprobes, guard, mapped files).
 */
static void raise_fd_limit(void)
{
	struct rlimit rl;

	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/* The targets: one session, or one per jemalloc layout in child processes. */
static void run_targets(struct run *r, const pid_t *pids, struct jemalloc_target **ts, int n)
{
	int group[TARGETS_MAX], ngroups;
	char err[2048] = "";

	if (n > 1 || r->opts->follow_forks)
		raise_fd_limit();
	r->name_targets = n > 1 || r->opts->children;
	ngroups = n > 1 ? group_by_layout(ts, n, group) : 1;
	if (ngroups > 1) {
		hb_note("%d jemalloc layouts among them: one session (and one process) each",
			ngroups);
		run_children(r, pids, ts, group, ngroups, n);
		return;
	}
	/* said here, not by main: what earlier runs spooled is still delivered */
	if (run_group(r, pids, ts, (size_t)n, err, sizeof(err)))
		hb_error_clean(NULL, err, "failed");
}

/* "unit NAME", "the --pid list" or "pid N with its children", for what is said about a run's targets. */
static const char *targets_name(const struct run *r, char *buf, size_t len)
{
	const struct run_opts *o = r->opts;

	if (r->unit_name[0])
		snprintf(buf, len, "unit %s", r->unit_name);
	else if (o->children && o->npids > 1)
		snprintf(buf, len, "the --pid list with their children");
	else if (o->children)
		snprintf(buf, len, "pid %d with its children", r->root);
	else
		snprintf(buf, len, "the --pid list");
	return buf;
}

/*
 * A unit's cgroup also holds helpers (a wrapper shell, a sidecar): the
 * processes without jemalloc are skipped (pids named by --pid are refused);
 * one whose jemalloc heapbpf cannot use (no prof:true, stripped without
 * debug info, a version it does not know) is refused with its reason, and
 * the others are profiled. --children: a descendant (pids[i], i >= named,
 * started at starts[i]) that cannot be profiled is skipped with its reason,
 * and so is a named process without jemalloc (a manager that only forks).
 * ts[i]: the jemalloc found in pids[i].
 */
static int jemalloc_only(struct run *r, pid_t *pids, struct jemalloc_target **ts, int n, int named,
			 const uint64_t *starts, char *err, size_t errlen)
{
	int kept = 0, refused = 0;
	char name[300];

	for (int i = 0; i < n; i++) {
		struct jemalloc_target *t = NULL;
		char why[2048], clean[HB_CLEAN_SIZE(sizeof(why))];
		int rc = jemalloc_target__find(pids[i], r->opts->layout, &t, why, sizeof(why));

		/* a descendant's pid taken by another process since the scan: not ours */
		if (!rc && i >= named && starts && proc_start_time(pids[i]) != starts[i]) {
			jemalloc_target__free(t);
			rc = hb_fail(why, sizeof(why), -ESRCH, "pid %d exited", pids[i]);
		}
		if (rc && (i >= named || (rc == JEMALLOC_ENOTFOUND && r->opts->children))) {
			hb_note("skipped: %s", hb_clean(clean, sizeof(clean), why));
			refused += rc != JEMALLOC_ENOTFOUND;
			continue;
		}
		if (rc == JEMALLOC_ENOTFOUND && r->unit_name[0]) {
			if (r->opts->verbose)
				hb_say("skipped: %s", hb_clean(clean, sizeof(clean), why));
			continue;
		}
		if (rc) {
			hb_error("refused: %s", hb_clean(clean, sizeof(clean), why));
			r->outcome |= RUN_FAILED;
			refused++;
			continue;
		}
		ts[kept] = t;
		pids[kept++] = pids[i];
	}
	if (!kept && refused)
		return hb_fail(err, errlen, -ENOENT, "no process of %s could be profiled",
			       targets_name(r, name, sizeof(name)));
	if (!kept)
		return hb_fail(err, errlen, -ESRCH, "no process of %s uses jemalloc",
			       targets_name(r, name, sizeof(name)));
	return kept;
}

/* Options that name one file, or one terminal, and so one process. */
static int one_process_only(const struct run *r, int n, char *err, size_t errlen)
{
	const char *what = run_opts_one_process(r->opts, r->view);
	char name[300];

	if (n > 1 && what)
		return hb_fail(err, errlen, -EINVAL, "%s has %d processes and %s",
			       targets_name(r, name, sizeof(name)), n, what);
	return 0;
}

/*
 * --children: the --pid list's or the pid file's processes, then the
 * descendants each has now; with none, the one process as without
 * --children (its jemalloc found, or refused, as usual).
 */
static int with_children(struct run *r, pid_t *pids, struct jemalloc_target **ts, char *err,
			 size_t errlen)
{
	const struct run_opts *o = r->opts;
	uint64_t starts[TARGETS_MAX] = { 0 };
	size_t n, named;
	int rc;

	if (o->pidfile) {
		rc = targets_from_pidfile(o->pidfile, &pids[0], err, errlen);
		if (rc)
			return rc;
		n = 1;
	} else {
		n = o->npids < TARGETS_MAX ? (size_t)o->npids : TARGETS_MAX;
		memcpy(pids, o->pids, n * sizeof(*pids));
	}
	r->root = pids[0];
	named = n;
	for (size_t i = 0; i < named; i++) {
		rc = targets_descendants(pids[i], pids, starts, TARGETS_MAX, &n);
		if (rc < 0)
			return hb_fail(err, errlen, rc, "cannot list the children of pid %d: %s",
				       pids[i], strerror(-rc));
	}
	if (n == named && named == 1)
		return 1;
	if (n == TARGETS_MAX)
		hb_warn("pid %d and its children are %zu processes or more; profiling the first "
			"%zu",
			pids[0], n, n);
	/* privileges first: without them every process would be refused for its own reason */
	rc = privs_check(err, errlen);
	if (rc)
		return rc;
	return jemalloc_only(r, pids, ts, (int)n, (int)named, starts, err, errlen);
}

/* The run's pids, at least one, with their jemalloc when found already; or a negative errno. */
static int resolve_targets(struct run *r, pid_t *pids, struct jemalloc_target **ts, char *err,
			   size_t errlen)
{
	const struct run_opts *o = r->opts;
	int n = 1, rc;

	ts[0] = NULL;
	if (o->unit) {
		targets_unit_name(o->unit, r->unit_name, sizeof(r->unit_name));
		n = targets_from_unit(o->unit, NULL, pids, TARGETS_MAX, err, errlen);
		if (n == TARGETS_MAX)
			hb_warn("unit %s has %d processes or more; profiling the first %d",
				r->unit_name, n, n);
		/* privileges first: without them every process would be refused for its own reason */
		rc = n > 1 ? privs_check(err, errlen) : 0;
		if (rc)
			return rc;
		if (n > 1)
			n = jemalloc_only(r, pids, ts, n, n, NULL, err, errlen);
	} else if (o->children) {
		n = with_children(r, pids, ts, err, errlen);
	} else if (o->npids > 1) {
		/* several pids: found now, so that one without a usable jemalloc is refused alone */
		n = o->npids < TARGETS_MAX ? o->npids : TARGETS_MAX;
		memcpy(pids, o->pids, (size_t)n * sizeof(*pids));
		rc = privs_check(err, errlen);
		if (rc)
			return rc;
		n = jemalloc_only(r, pids, ts, n, n, NULL, err, errlen);
	} else if (o->pidfile) {
		rc = targets_from_pidfile(o->pidfile, &pids[0], err, errlen);
		if (rc)
			return rc;
	} else {
		pids[0] = o->pid;
	}
	rc = n > 0 ? one_process_only(r, n, err, errlen) : 0;
	if (rc) {
		for (int i = 0; i < n; i++)
			jemalloc_target__free(ts[i]);
		return rc;
	}
	return n;
}

static void free_targets(struct jemalloc_target **ts, int n)
{
	for (int i = 0; i < n; i++)
		jemalloc_target__free(ts[i]);
}

/* A process and its start time: a pid reused by a new process is another process. */
struct seen {
	pid_t pid;
	uint64_t start;
};

/* The processes a watch of a unit or pid file has taken, each once (fleet_run's). */
#define SEEN_MAX 4096
struct seen_list {
	struct seen v[SEEN_MAX];
	size_t n;
};

static bool was_seen(const struct seen_list *l, pid_t pid)
{
	uint64_t start = proc_start_time(pid);

	for (size_t i = 0; i < l->n; i++) {
		if (l->v[i].pid == pid && l->v[i].start == start)
			return true;
	}
	return false;
}

static void mark_seen(struct seen_list *l, pid_t pid)
{
	if (l->n < SEEN_MAX)
		l->v[l->n++] = (struct seen){ pid, proc_start_time(pid) };
}

/*
 * heapbpf watch: the unit's or pid file's processes have exited; waits for
 * new ones (every WATCH_POLL_MS), each taken once. 0 when a signal or the
 * end of -d stops the watch first (the session's signals are blocked: they
 * wait here), else how many there are.
 */
#define WATCH_POLL_MS 250
static int next_targets(struct run *r, struct seen_list *seen, pid_t *pids,
			struct jemalloc_target **ts)
{
	const struct timespec poll = { .tv_nsec = WATCH_POLL_MS * 1000000L };
	char err[2048];
	sigset_t set;
	int n;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	hb_note("watch: %s has no process to watch; waiting for the next one",
		r->opts->unit ? r->unit_name : r->opts->pidfile);
	for (;;) {
		if (sigtimedwait(&set, NULL, &poll) > 0) {
			r->watch_stopped = true;
			return 0;
		}
		n = resolve_targets(r, pids, ts, err, sizeof(err));
		if (n <= 0)
			continue;
		for (int i = 0; i < n;) {
			if (was_seen(seen, pids[i]) || kill(pids[i], 0)) {
				jemalloc_target__free(ts[i]);
				pids[i] = pids[n - 1];
				ts[i] = ts[--n];
			} else {
				i++;
			}
		}
		for (int i = 0; i < n; i++)
			mark_seen(seen, pids[i]);
		if (n > 0) {
			hb_note("watch: pid %d appeared; watching it", pids[0]);
			return n;
		}
	}
}

int fleet_run(struct run *r, char *err, size_t errlen)
{
	const struct run_opts *o = r->opts;
	struct jemalloc_target *ts[TARGETS_MAX] = {};
	pid_t pids[TARGETS_MAX];
	char name[300];
	struct seen_list *seen = calloc(1, sizeof(*seen));
	int n, rc = 0;

	if (!seen)
		return hb_fail(err, errlen, -ENOMEM, "out of memory");
	n = resolve_targets(r, pids, ts, err, errlen);
	/* a watch of a unit or pid file may start before the service: it waits for it */
	if (n < 0 && o->watch && (o->unit || o->pidfile)) {
		char clean[HB_CLEAN_SIZE(1024)];

		hb_note("watch: %s", hb_clean(clean, sizeof(clean), err));
		err[0] = '\0';
		n = 0;
	}
	if (n < 0) {
		free(seen);
		return n;
	}
	for (int i = 0; i < n; i++)
		mark_seen(seen, pids[i]);
	if ((o->unit || o->npids > 1 || o->children) && n > 1)
		hb_note("%s: %d processes, one profile each", targets_name(r, name, sizeof(name)),
			n);
	rc = outputs_setup(r, err, errlen);
	if (rc) {
		/* nothing was touched yet: the targets found are only freed */
		free_targets(ts, n);
		free(seen);
		return rc;
	}
	if (n > 0)
		run_targets(r, pids, ts, n);
	/* heapbpf watch of a unit or pid file: its next process, after a restart */
	while (o->watch && (o->unit || o->pidfile) && !r->watch_stopped) {
		n = next_targets(r, seen, pids, ts);
		if (n <= 0)
			break;
		run_targets(r, pids, ts, n);
	}
	/*
	 * A watch that sampled one process of the unit or pid file has profiles to
	 * show: its newest process's quiet last moments are not "nothing sampled";
	 * nor is, with --children, a manager that only waits on the children that
	 * sampled.
	 */
	if ((o->watch || o->children) && r->sampled)
		r->outcome &= ~RUN_NO_SAMPLES;
	outputs_finish(r);
	free(seen);
	return 0;
}
