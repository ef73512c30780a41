// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "errmsg.h"
#include "fleet.h"
#include "live.h"
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

/* One target; its outcome joins the run's. */
static int run_target(struct run *r, pid_t pid, char *err, size_t errlen)
{
	const struct cli *o = r->opts;
	struct target_run tr = { .run = r, .pid = pid, .output = o->output };
	char outbuf[256];
	int rc;

	/* a plain run always writes a file (unless it only records); fleet modes, top: only -o */
	if (!tr.output && !run_fleet_output(o) && !o->record && o->mode != MODE_TOP) {
		char stem[32];

		snprintf(stem, sizeof(stem), "heapbpf-%d", pid);
		sink_default_name(outbuf, sizeof(outbuf), stem, o->format);
		tr.output = outbuf;
	}
	rc = live_run(&tr, err, errlen);
	r->outcome |= tr.outcome | (rc ? RUN_FAILED : 0);
	return rc;
}

/* Several targets: one child process each; the parent forwards signals and joins outcomes. */
static void run_children(struct run *r, const pid_t *pids, int n)
{
	pid_t kids[TARGETS_MAX];
	int running = 0;
	sigset_t set, old;

	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigprocmask(SIG_BLOCK, &set, &old);
	for (int i = 0; i < n; i++) {
		kids[i] = fork();
		if (kids[i] == 0) {
			char err[1024] = "";

			r->outcome = 0;
			if (run_target(r, pids[i], err, sizeof(err)))
				fprintf(stderr, "heapbpf: %s\n", err[0] ? err : "failed");
			/* the child's outcome travels to the parent as its exit status */
			exit((int)r->outcome);
		}
		if (kids[i] < 0) {
			fprintf(stderr, "heapbpf: cannot start a process for pid %d: %s\n", pids[i],
				strerror(errno));
			r->outcome |= RUN_FAILED;
			continue;
		}
		running++;
	}
	/* the parent only waits; SIGINT/SIGTERM/SIGHUP go to every child, which stops cleanly */
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	while (running > 0) {
		siginfo_t si;
		int st, sig = sigwaitinfo(&set, &si);

		if (sig < 0)
			continue;
		for (int i = 0; i < n; i++) {
			if (kids[i] <= 0)
				continue;
			if (sig != SIGCHLD) {
				kill(kids[i], sig);
				continue;
			}
			if (waitpid(kids[i], &st, WNOHANG) != kids[i])
				continue;
			kids[i] = 0;
			running--;
			r->outcome |= WIFEXITED(st) ? (unsigned int)WEXITSTATUS(st) : RUN_FAILED;
		}
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
}

/*
 * A unit's cgroup also holds helpers (a wrapper shell, a sidecar): the
 * processes without jemalloc are skipped; one with jemalloc but without
 * prof:true is kept, so that its error is reported.
 */
static int jemalloc_only(const struct run *r, pid_t *pids, int n, char *err, size_t errlen)
{
	int kept = 0;

	for (int i = 0; i < n; i++) {
		struct jemalloc_target *t = NULL;
		char why[512];
		int rc = jemalloc_target__find(pids[i], r->opts->layout, &t, why, sizeof(why));

		jemalloc_target__free(t);
		if (rc == JEMALLOC_ENOTFOUND) {
			if (r->opts->verbose)
				fprintf(stderr, "heapbpf: skipped: %s\n", why);
			continue;
		}
		pids[kept++] = pids[i];
	}
	if (!kept)
		return hb_fail(err, errlen, -ESRCH, "no process of unit %s uses jemalloc",
			       r->unit_name);
	return kept;
}

/* The run's pids, at least one; or a negative errno with a message. */
static int resolve_targets(struct run *r, pid_t *pids, char *err, size_t errlen)
{
	const struct cli *o = r->opts;
	int n = 1, rc;

	if (o->unit) {
		targets_unit_name(o->unit, r->unit_name, sizeof(r->unit_name));
		n = targets_from_unit(o->unit, NULL, pids, TARGETS_MAX, err, errlen);
		if (n > 1)
			n = jemalloc_only(r, pids, n, err, errlen);
	} else if (o->pidfile) {
		rc = targets_from_pidfile(o->pidfile, &pids[0], err, errlen);
		if (rc)
			return rc;
	} else {
		pids[0] = o->pid;
	}
	if (n > 1 && o->output)
		return hb_fail(err, errlen, -EINVAL,
			       "unit %s has %d processes and --output names one file; use "
			       "--output-dir",
			       r->unit_name, n);
	return n;
}

int fleet_run(struct run *r, char *err, size_t errlen)
{
	const struct cli *o = r->opts;
	pid_t pids[TARGETS_MAX];
	int n, rc;

	n = resolve_targets(r, pids, err, errlen);
	if (n < 0)
		return n;
	if (o->unit && !o->quiet && n > 1)
		fprintf(stderr, "heapbpf: unit %s: %d processes, one profile each\n", r->unit_name,
			n);
	if (o->output_dir) {
		rc = snapshot_mkdir(o->output_dir);
		if (rc)
			return hb_fail(err, errlen, rc, "cannot create the output directory %s: %s",
				       o->output_dir, strerror(-rc));
	}
	if (o->pyroscope) {
		rc = pyro_setup(r, err, errlen);
		if (rc)
			return rc;
	}
	if (n == 1) {
		/* said here, not by main: what earlier runs spooled is still delivered */
		if (run_target(r, pids[0], err, errlen))
			fprintf(stderr, "heapbpf: %s\n", err[0] ? err : "failed");
		err[0] = '\0';
	} else {
		run_children(r, pids, n);
	}
	retention(r);
	if (r->pyro) {
		deliver(r);
		pyro__free(r->pyro);
		r->pyro = NULL;
	}
	return 0;
}
