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

#include "errmsg.h"
#include "fleet.h"
#include "live.h"
#include "privs.h"
#include "pyroscope.h"
#include "snapshot.h"
#include "targets.h"

/*
 * Where profiles wait for Pyroscope: --spool-dir; else beside --output-dir's
 * snapshots; else heapbpf's state directory (systemd's $STATE_DIRECTORY, its
 * first entry, or /var/lib/heapbpf), the default one made 0700: profiles hold
 * a process's function names and addresses.
 */
static int spool_dir(const struct cli *o, char *dir, size_t len)
{
	const char *state = getenv("STATE_DIRECTORY");
	int n;

	if (o->spool_dir || o->output_dir) {
		snprintf(dir, len, "%s%s", o->spool_dir ?: o->output_dir,
			 o->spool_dir ? "" : "/spool");
		return snapshot_mkdir(dir);
	}
	n = state && state[0] ? (int)strcspn(state, ":") : 0;
	if (n)
		snprintf(dir, len, "%.*s", n, state);
	else
		snprintf(dir, len, "/var/lib/heapbpf");
	if (mkdir(dir, 0700) && errno != EEXIST)
		return -errno;
	n = (int)strlen(dir);
	if (snprintf(dir + n, len - n, "/spool") >= (int)(len - n))
		return -ENAMETOOLONG;
	if (mkdir(dir, 0700) && errno != EEXIST)
		return -errno;
	return 0;
}

/* Everything about --pyroscope that can be wrong, said before profiling starts. */
static int pyro_setup(struct run *r, char *err, size_t errlen)
{
	const struct cli *o = r->opts;
	struct pyro_opts po = {
		.url = o->pyroscope,
		.spool_dir = r->spool_dir,
		.spool_keep = o->spool_keep ? o->spool_keep : 1000,
		.spool_max_bytes = o->spool_max_bytes ? o->spool_max_bytes : 256ULL << 20,
		.timeout = o->pyro_timeout,
		.retries = o->pyro_retries,
		.multipart = o->pyro_multipart,
		.ingest = o->pyro_ingest,
		.ca_file = o->pyro_ca,
		.verbose = o->verbose,
	};
	int rc;

	r->naming = (struct pyro_naming){
		.service_name = o->service_name,
		.unit = o->unit,
		.labels = o->labels,
		.nlabels = o->nlabels,
	};
	rc = pyro_naming_check(&r->naming, err, errlen);
	if (rc)
		return rc;
	rc = spool_dir(o, r->spool_dir, sizeof(r->spool_dir));
	if (rc)
		return hb_fail(err, errlen, rc, "cannot create the spool directory %s: %s",
			       r->spool_dir, strerror(-rc));
	return pyro__new(&po, &r->pyro, err, errlen);
}

static void retention(const struct run *r)
{
	const struct cli *o = r->opts;
	struct retain_result rr;
	char err[512];

	if (!o->output_dir || (!o->keep && !o->max_bytes))
		return;
	if (snapshot_prune(o->output_dir, o->keep, o->max_bytes, &rr, err, sizeof(err))) {
		fprintf(stderr, "heapbpf: retention: %s\n", err);
		return;
	}
	if (rr.deleted_files && o->verbose)
		fprintf(stderr, "heapbpf: deleted %zu old snapshot file(s) (%" PRIu64 " bytes)\n",
			rr.deleted_files, rr.deleted_bytes);
	if (rr.newest_over)
		fprintf(stderr,
			"heapbpf: warning: the newest snapshot alone is larger than --max-bytes; "
			"it is kept\n");
}

void fleet_window_done(struct run *r)
{
	struct pyro_flush_result fr;

	retention(r);
	if (r->pyro)
		pyro__flush(r->pyro, false, 0, &fr);
}

/* The last delivery: waits for another heapbpf delivering the same spool, retries as set. */
static void deliver(struct run *r)
{
	struct pyro_flush_result fr;

	pyro__flush(r->pyro, true, -1, &fr);
	if (fr.rejected || fr.auth_failed)
		r->outcome |= RUN_FAILED;
	else if (fr.pending || fr.busy)
		r->outcome |= RUN_NOT_SENT;
	if (!r->opts->quiet && fr.sent)
		fprintf(stderr, "heapbpf: pyroscope: delivered %zu profile(s)\n", fr.sent);
}

/* A plain run always writes a file (unless it only records); fleet modes, top: only -o. */
static void default_output(const struct run *r, struct target_run *tr, char *buf, size_t len)
{
	const struct cli *o = r->opts;
	char stem[32];

	if (tr->output || run_fleet_output(o) || o->record || o->mode == MODE_TOP)
		return;
	snprintf(stem, sizeof(stem), "heapbpf-%d", tr->pid);
	sink_default_name(buf, len, stem, o->format);
	tr->output = buf;
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
			default_output(r, &trs[i], outbuf[i], sizeof(outbuf[i]));
		}
		rc = live_run_targets(trs, ts, n, err, errlen);
		for (size_t i = 0; i < n; i++)
			r->outcome |= trs[i].outcome;
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
			char err[1024] = "";
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
				fprintf(stderr, "heapbpf: %s\n", err[0] ? err : "failed");
			/* the child's outcome travels to the parent as its exit status */
			exit((int)r->outcome);
		}
		if (kids[g] < 0) {
			fprintf(stderr, "heapbpf: cannot start a process for a session: %s\n",
				strerror(errno));
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
	char err[1024] = "";

	if (n > 1 || r->opts->follow_forks)
		raise_fd_limit();
	ngroups = n > 1 ? group_by_layout(ts, n, group) : 1;
	if (ngroups > 1) {
		if (!r->opts->quiet)
			fprintf(stderr,
				"heapbpf: %d jemalloc layouts among them: one session (and one "
				"process) each\n",
				ngroups);
		run_children(r, pids, ts, group, ngroups, n);
		return;
	}
	/* said here, not by main: what earlier runs spooled is still delivered */
	if (run_group(r, pids, ts, (size_t)n, err, sizeof(err)))
		fprintf(stderr, "heapbpf: %s\n", err[0] ? err : "failed");
}

/* "unit NAME" or "the --pid list", for what is said about a run's targets. */
static const char *targets_name(const struct run *r, char *buf, size_t len)
{
	if (!r->unit_name[0])
		return "the --pid list";
	snprintf(buf, len, "unit %s", r->unit_name);
	return buf;
}

/*
 * A unit's cgroup also holds helpers (a wrapper shell, a sidecar): the
 * processes without jemalloc are skipped (pids named by --pid are refused);
 * one whose jemalloc heapbpf cannot use (no prof:true, stripped without
 * debug info, a version it does not know) is refused with its reason, and
 * the others are profiled. ts[i]: the jemalloc found in pids[i].
 */
static int jemalloc_only(struct run *r, pid_t *pids, struct jemalloc_target **ts, int n, char *err,
			 size_t errlen)
{
	int kept = 0, refused = 0;
	char name[300];

	for (int i = 0; i < n; i++) {
		struct jemalloc_target *t = NULL;
		char why[512];
		int rc = jemalloc_target__find(pids[i], r->opts->layout, &t, why, sizeof(why));

		if (rc == JEMALLOC_ENOTFOUND && r->unit_name[0]) {
			if (r->opts->verbose)
				fprintf(stderr, "heapbpf: skipped: %s\n", why);
			continue;
		}
		if (rc) {
			fprintf(stderr, "heapbpf: refused: %s\n", why);
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
	const struct cli *o = r->opts;
	char name[300];
	const char *what = o->output		 ? "--output names one file; use --output-dir"
			   : o->record		 ? "--record names one file"
			   : o->at_peak		 ? "--at-peak names one file"
			   : o->mode == MODE_TOP ? "heapbpf top shows one process"
						 : NULL;

	if (n > 1 && what)
		return hb_fail(err, errlen, -EINVAL, "%s has %d processes and %s",
			       targets_name(r, name, sizeof(name)), n, what);
	return 0;
}

/* The run's pids, at least one, with their jemalloc when found already; or a negative errno. */
static int resolve_targets(struct run *r, pid_t *pids, struct jemalloc_target **ts, char *err,
			   size_t errlen)
{
	const struct cli *o = r->opts;
	int n = 1, rc;

	ts[0] = NULL;
	if (o->unit) {
		targets_unit_name(o->unit, r->unit_name, sizeof(r->unit_name));
		n = targets_from_unit(o->unit, NULL, pids, TARGETS_MAX, err, errlen);
		if (n == TARGETS_MAX)
			fprintf(stderr,
				"heapbpf: warning: unit %s has %d processes or more; profiling the "
				"first %d\n",
				r->unit_name, n, n);
		/* privileges first: without them every process would be refused for its own reason */
		rc = n > 1 ? privs_check(err, errlen) : 0;
		if (rc)
			return rc;
		if (n > 1)
			n = jemalloc_only(r, pids, ts, n, err, errlen);
	} else if (o->npids > 1) {
		/* several pids: found now, so that one without a usable jemalloc is refused alone */
		n = o->npids < TARGETS_MAX ? o->npids : TARGETS_MAX;
		memcpy(pids, o->pids, (size_t)n * sizeof(*pids));
		rc = privs_check(err, errlen);
		if (rc)
			return rc;
		n = jemalloc_only(r, pids, ts, n, err, errlen);
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

int fleet_run(struct run *r, char *err, size_t errlen)
{
	const struct cli *o = r->opts;
	struct jemalloc_target *ts[TARGETS_MAX] = {};
	pid_t pids[TARGETS_MAX];
	char name[300];
	int n, rc = 0;

	n = resolve_targets(r, pids, ts, err, errlen);
	if (n < 0)
		return n;
	if ((o->unit || o->npids > 1) && !o->quiet && n > 1)
		fprintf(stderr, "heapbpf: %s: %d processes, one profile each\n",
			targets_name(r, name, sizeof(name)), n);
	if (o->output_dir) {
		rc = snapshot_mkdir(o->output_dir);
		if (rc)
			hb_fail(err, errlen, rc, "cannot create the output directory %s: %s",
				o->output_dir, strerror(-rc));
	}
	if (!rc && o->pyroscope)
		rc = pyro_setup(r, err, errlen);
	if (rc) {
		/* nothing was touched yet: the targets found are only freed */
		free_targets(ts, n);
		return rc;
	}
	run_targets(r, pids, ts, n);
	retention(r);
	if (r->pyro) {
		deliver(r);
		pyro__free(r->pyro);
		r->pyro = NULL;
	}
	return 0;
}
