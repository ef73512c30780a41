// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fleet.h"
#include "folded.h"
#include "output.h"
#include "pprof.h"
#include "pyroscope.h"
#include "report.h"
#include "snapshot.h"
#include "summary.h"
#include "targets.h"

_Static_assert(SNAP_PPROF == 1u << FMT_PPROF && SNAP_FOLDED == 1u << FMT_FOLDED,
	       "cli formats are snapshot formats");

/* The last window of --interval is written only when it is at least this long. */
#define MIN_LAST_WINDOW_NS 100000000LL

static struct cli *o;
static struct pyro *pyro;
static time_t run_start; /* snapshot stamps: window k starts at run_start + k * interval */
static char spool_dir[PATH_MAX];
static char unit_name[256];

/* The windows of this process's target (one target per process). */
static struct {
	unsigned int k;
	int64_t start_ns; /* wall clock */
	struct collector_stats prev;
	struct heapbpf_counters prev_bc;
	int worst;
	bool any_samples;
} win;

static int64_t wall_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Failure beats "not delivered" beats drops beats "no samples" beats success. */
static int rank(int code)
{
	switch (code) {
	case EXIT_OK:
		return 0;
	case EXIT_NO_SAMPLES:
		return 1;
	case EXIT_DROPS:
		return 2;
	case EXIT_NOT_SENT:
		return 3;
	default:
		return 4;
	}
}

static int worse(int a, int b)
{
	return rank(a) >= rank(b) ? a : b;
}

bool fleet_owns_output(void)
{
	return o && (o->output_dir || o->interval || o->pyroscope);
}

/* ---- Pyroscope name and labels ---- */

static int user_label(int i, char *key, size_t klen, const char **value)
{
	const char *eq = strchr(o->labels[i], '=');

	snprintf(key, klen, "%.*s", (int)(eq - o->labels[i]), o->labels[i]);
	*value = eq + 1;
	return 0;
}

static int pyro_name(pid_t pid, const char *comm, char *buf, size_t len)
{
	char host[256] = "", hostv[256], pidv[16], commv[64], svc[256];
	char keys[CLI_MAX_LABELS][128];
	struct pyro_label l[PYRO_MAX_LABELS];
	size_t n = 0;

	gethostname(host, sizeof(host) - 1);
	pyro_sanitize(host, false, hostv, sizeof(hostv));
	snprintf(pidv, sizeof(pidv), "%d", (int)pid);
	pyro_sanitize(comm, false, commv, sizeof(commv));
	l[n++] = (struct pyro_label){ "hostname", hostv };
	l[n++] = (struct pyro_label){ "pid", pidv };
	l[n++] = (struct pyro_label){ "comm", commv };
	for (int i = 0; i < o->nlabels; i++) {
		const char *v;
		size_t j;

		user_label(i, keys[i], sizeof(keys[i]), &v);
		for (j = 0; j < n && strcmp(l[j].key, keys[i]) != 0; j++)
			;
		if (j == n && n < PYRO_MAX_LABELS)
			l[n++] = (struct pyro_label){ keys[i], v };
		else if (j < n)
			l[j].value = v;
	}
	/* an empty value drops the label */
	for (size_t j = 0; j < n;) {
		if (!*l[j].value)
			l[j] = l[--n];
		else
			j++;
	}
	if (o->service_name) {
		snprintf(svc, sizeof(svc), "%s", o->service_name);
	} else if (unit_name[0]) {
		char *dot = strrchr(unit_name, '.');

		pyro_sanitize(unit_name, true, svc, sizeof(svc));
		if (dot && strcmp(dot, ".service") == 0)
			svc[dot - unit_name] = '\0';
	} else {
		pyro_sanitize(comm, true, svc, sizeof(svc));
	}
	return pyro_build_name(buf, len, svc, l, n);
}

/* Everything about --pyroscope that can be wrong, said before profiling starts. */
static int pyro_setup(char *err, size_t errlen)
{
	struct pyro_opts po = {
		.url = o->pyroscope,
		.spool_dir = spool_dir,
		.spool_keep = o->spool_keep ? o->spool_keep : 1000,
		.spool_max_bytes = o->spool_max_bytes ? o->spool_max_bytes : 256ULL << 20,
		.timeout = o->pyro_timeout,
		.retries = o->pyro_retries,
		.multipart = o->pyro_multipart,
		.ca_file = o->pyro_ca,
		.verbose = o->verbose,
	};
	char name[2048];
	int rc;

	if (o->service_name && !pyro_valid_service(o->service_name)) {
		snprintf(err, errlen,
			 "--service-name \"%s\" is not a Pyroscope service name (letters, digits, "
			 "_ . / -)",
			 o->service_name);
		return -EINVAL;
	}
	for (int i = 0; i < o->nlabels; i++) {
		char key[128];
		const char *v;

		user_label(i, key, sizeof(key), &v);
		if (!pyro_valid_label_key(key) || strcmp(key, "service_name") == 0) {
			snprintf(err, errlen,
				 "--label \"%s\": a label name is letters, digits and _, does not "
				 "start with __, and is not service_name (see --service-name)",
				 o->labels[i]);
			return -EINVAL;
		}
		if (*v && !pyro_valid_label_value(v)) {
			snprintf(err, errlen,
				 "--label \"%s\": a value is printable, without spaces, quotes or "
				 ", { } =",
				 o->labels[i]);
			return -EINVAL;
		}
	}
	if (pyro_name(1, "x", name, sizeof(name))) {
		snprintf(err, errlen, "the Pyroscope labels make too long a name");
		return -EINVAL;
	}
	if (o->spool_dir)
		snprintf(spool_dir, sizeof(spool_dir), "%s", o->spool_dir);
	else
		snprintf(spool_dir, sizeof(spool_dir), "%s/spool", o->output_dir);
	rc = snapshot_mkdir(spool_dir);
	if (rc) {
		snprintf(err, errlen, "cannot create the spool directory %s: %s", spool_dir,
			 strerror(-rc));
		return rc;
	}
	return pyro__new(&po, &pyro, err, errlen);
}

/* ---- windows ---- */

static int write_single(const struct hb_profile *p, const char *path)
{
	uint8_t *buf = NULL;
	size_t len = 0;
	int rc;

	if (o->format == FMT_FOLDED) {
		FILE *m = open_memstream((char **)&buf, &len);

		if (!m)
			return -ENOMEM;
		rc = folded_write(p, o->sample_type, m);
		if (fclose(m) && !rc)
			rc = -ENOMEM;
	} else {
		rc = pprof_encode(p, &buf, &len);
	}
	if (!rc)
		rc = output_write_buffer(path, buf, len);
	free(buf);
	return rc;
}

static int spool_profile(const struct hb_profile *p, const struct jemalloc_target *t,
			 int64_t start_ns, int64_t end_ns, char *err, size_t errlen)
{
	uint8_t *buf = NULL;
	size_t len = 0;
	char name[2048];
	int rc;

	rc = pyro_name(t->pid, t->comm, name, sizeof(name));
	if (rc) {
		snprintf(err, errlen, "cannot name the profile for Pyroscope");
		return rc;
	}
	rc = pprof_encode(p, &buf, &len);
	if (rc) {
		snprintf(err, errlen, "cannot encode the profile: %s", strerror(-rc));
		return rc;
	}
	/* whole seconds that cover the window */
	rc = pyro__spool(pyro, name, start_ns / 1000000000LL, (end_ns + 999999999LL) / 1000000000LL,
			 buf, len, err, errlen);
	free(buf);
	return rc;
}

static int emit_window(struct session *s, const struct jemalloc_target *t, int64_t end_ns,
		       const char *out, char *err, size_t errlen)
{
	const struct collector_stats *st = collector__stats(s->collector);
	struct report_opts ro = {
		.raw = o->raw,
		.time_nanos = win.start_ns,
		.duration_nanos = end_ns - win.start_ns,
	};
	struct hb_profile *prof = NULL;
	char stamp[SNAPSHOT_STAMP_LEN + 1], where[PATH_MAX + 64] = "";
	uint64_t allocs = st->allocs - win.prev.allocs;
	uint64_t drops = s->counters.alloc_drops + s->counters.free_drops -
			 win.prev_bc.alloc_drops - win.prev_bc.free_drops;
	int rc, code = EXIT_OK;

	rc = report__build(s->collector, s->symbolizer, t, &ro, &prof);
	if (rc) {
		snprintf(err, errlen, "cannot build the profile: %s", strerror(-rc));
		return -1;
	}
	snapshot_stamp(run_start + (time_t)(win.k * o->interval), stamp);
	if (o->output_dir) {
		struct snapshot_opts so = {
			.dir = o->output_dir,
			.formats = o->formats,
			.folded = o->sample_type,
			.zstd = o->zstd,
			.stamp = stamp,
			.pid = t->pid,
			.comm = t->comm,
		};
		char name[NAME_MAX + 1];

		rc = snapshot_write(&so, prof, err, errlen);
		if (rc)
			goto fail;
		snapshot_name(name, sizeof(name), stamp, t->pid, t->comm,
			      o->formats & SNAP_PPROF ? "pb.gz"
			      : o->zstd		      ? "folded.zst"
						      : "folded");
		snprintf(where, sizeof(where), "%s/%s", o->output_dir, name);
	} else if (o->output) {
		rc = write_single(prof, out);
		if (rc) {
			snprintf(err, errlen, "cannot write %s: %s", out, strerror(-rc));
			goto fail;
		}
		snprintf(where, sizeof(where), "%s", out);
	}
	if (pyro) {
		rc = spool_profile(prof, t, win.start_ns, end_ns, err, errlen);
		if (rc)
			goto fail;
	}
	if (!o->quiet && !o->interval) {
		summary_print(stderr, prof, st, &s->counters, where[0] ? where : NULL);
	} else if (!o->quiet) {
		fprintf(stderr,
			"heapbpf: pid %d (%s): window %u (%.0f s): %" PRIu64 " samples%s%s%s\n",
			t->pid, t->comm, win.k + 1, (end_ns - win.start_ns) / 1e9, allocs,
			where[0] ? ", wrote " : "", where, pyro ? ", spooled for Pyroscope" : "");
	}
	if (allocs)
		win.any_samples = true;
	if (drops) {
		fprintf(stderr,
			"heapbpf: pid %d: %" PRIu64 " events were dropped in this window (ring "
			"buffer full); raise --ringbuf-size\n",
			t->pid, drops);
		code = EXIT_DROPS;
	}
	hb_profile__free(prof);
	win.k++;
	win.prev = *st;
	win.prev_bc = s->counters;
	win.start_ns = end_ns;
	/* the next window's allocations start from zero; what is in use carries over */
	collector__reset_alloc(s->collector);
	return code;
fail:
	hb_profile__free(prof);
	return -1;
}

static void retention(void)
{
	struct retain_result r;
	char err[512];

	if (!o->output_dir || (!o->keep && !o->max_bytes))
		return;
	if (snapshot_retain(o->output_dir, RETAIN_SNAPSHOTS, o->keep, o->max_bytes, &r, err,
			    sizeof(err))) {
		fprintf(stderr, "heapbpf: retention: %s\n", err);
		return;
	}
	if (r.deleted_files && o->verbose)
		fprintf(stderr, "heapbpf: deleted %zu old snapshot file(s) (%" PRIu64 " bytes)\n",
			r.deleted_files, r.deleted_bytes);
	if (r.newest_over)
		fprintf(stderr,
			"heapbpf: warning: the newest snapshot alone is larger than --max-bytes; "
			"it is kept\n");
}

static int on_window(struct session *s, void *arg)
{
	const struct jemalloc_target *t = arg;
	struct pyro_flush_result fr;
	char err[1024];
	int code;

	if (!win.k)
		win.start_ns = s->start_wall_ns;
	code = emit_window(s, t, wall_ns(), NULL, err, sizeof(err));
	if (code < 0) {
		/* a full disk must not end the daemon: the next window tries again */
		fprintf(stderr, "heapbpf: %s\n", err);
		code = EXIT_FAIL;
	}
	win.worst = worse(win.worst, code);
	retention();
	if (pyro)
		pyro__flush(pyro, false, 0, &fr);
	return 0;
}

void fleet_session_opts(struct session_opts *so, const struct jemalloc_target *t)
{
	memset(&win, 0, sizeof(win));
	if (!o || !o->interval)
		return;
	so->interval = o->interval;
	so->on_interval = on_window;
	so->interval_arg = (void *)t;
}

int fleet_last_window(struct session *s, const struct jemalloc_target *t, const char *out,
		      char *err, size_t errlen)
{
	int64_t end = s->start_wall_ns + s->duration_ns;
	int code = EXIT_OK;

	if (!win.k)
		win.start_ns = s->start_wall_ns;
	/* an --interval run stopped right after a window: nothing worth a file */
	if (!win.k || end - win.start_ns >= MIN_LAST_WINDOW_NS) {
		code = emit_window(s, t, end, out, err, errlen);
		if (code < 0)
			return -1;
	}
	code = worse(win.worst, code);
	if (!win.any_samples) {
		fprintf(stderr,
			"heapbpf: pid %d: no allocation was sampled: the process allocated "
			"less than jemalloc's sampling interval, or sampling did not start\n",
			t->pid);
		code = worse(code, EXIT_NO_SAMPLES);
	}
	return code;
}

/* ---- targets ---- */

static int run_children(const pid_t *pids, int n, int (*live_pid)(pid_t, char *, size_t))
{
	pid_t kids[TARGETS_MAX];
	int running = 0, code = EXIT_OK, sig;
	sigset_t set, old;

	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigprocmask(SIG_BLOCK, &set, &old);
	for (int i = 0; i < n; i++) {
		pid_t k = fork();

		if (k == 0) {
			char err[1024] = "";
			int rc = live_pid(pids[i], err, sizeof(err));

			if (rc < 0) {
				fprintf(stderr, "heapbpf: %s\n", err[0] ? err : "failed");
				rc = EXIT_FAIL;
			}
			exit(rc);
		}
		if (k < 0) {
			fprintf(stderr, "heapbpf: cannot start a process for pid %d: %s\n", pids[i],
				strerror(errno));
			code = EXIT_FAIL;
			kids[i] = 0;
			continue;
		}
		kids[i] = k;
		running++;
	}
	/* the parent only waits; SIGINT/SIGTERM/SIGHUP go to every child, which stops cleanly */
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	while (running > 0) {
		siginfo_t si;
		int st;

		sig = sigwaitinfo(&set, &si);
		if (sig < 0)
			continue;
		if (sig != SIGCHLD) {
			for (int i = 0; i < n; i++) {
				if (kids[i] > 0)
					kill(kids[i], sig);
			}
			continue;
		}
		for (int i = 0; i < n; i++) {
			if (kids[i] <= 0 || waitpid(kids[i], &st, WNOHANG) != kids[i])
				continue;
			kids[i] = 0;
			running--;
			code = worse(code, WIFEXITED(st) ? WEXITSTATUS(st) : EXIT_FAIL);
		}
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
	return code;
}

/*
 * A unit's cgroup also holds helpers (a wrapper shell, a sidecar): the
 * processes without jemalloc are skipped; one with jemalloc but without
 * prof:true is kept, so that its error is reported.
 */
static int jemalloc_only(pid_t *pids, int n, char *err, size_t errlen)
{
	int kept = 0;

	for (int i = 0; i < n; i++) {
		struct jemalloc_target *t = NULL;
		char why[512];
		int rc = jemalloc_target__find(pids[i], o->layout, &t, why, sizeof(why));

		jemalloc_target__free(t);
		if (rc == -ENOENT && strstr(why, "does not use jemalloc")) {
			if (o->verbose)
				fprintf(stderr, "heapbpf: skipped: %s\n", why);
			continue;
		}
		pids[kept++] = pids[i];
	}
	if (!kept) {
		snprintf(err, errlen, "no process of unit %s uses jemalloc", unit_name);
		return -1;
	}
	return kept;
}

int fleet_run(struct cli *opts, int (*live_pid)(pid_t pid, char *err, size_t errlen), char *err,
	      size_t errlen)
{
	pid_t pids[TARGETS_MAX];
	int n = 1, rc, code;

	o = opts;
	run_start = time(NULL);
	if (o->unit) {
		targets_unit_name(o->unit, unit_name, sizeof(unit_name));
		n = targets_from_unit(o->unit, NULL, pids, TARGETS_MAX, err, errlen);
		if (n < 0)
			return -1;
	} else if (o->pidfile) {
		if (targets_from_pidfile(o->pidfile, &pids[0], err, errlen))
			return -1;
	} else {
		pids[0] = o->pid;
	}
	if (o->unit && n > 1)
		n = jemalloc_only(pids, n, err, errlen);
	if (n < 0)
		return -1;
	if (n > 1 && o->output) {
		snprintf(err, errlen,
			 "unit %s has %d processes and --output names one file; use --output-dir",
			 unit_name, n);
		return -1;
	}
	if (o->unit && !o->quiet && n > 1)
		fprintf(stderr, "heapbpf: unit %s: %d processes, one profile each\n", unit_name, n);
	if (o->output_dir) {
		rc = snapshot_mkdir(o->output_dir);
		if (rc) {
			snprintf(err, errlen, "cannot create the output directory %s: %s",
				 o->output_dir, strerror(-rc));
			return -1;
		}
	}
	if (o->pyroscope && pyro_setup(err, errlen))
		return -1;
	if (n == 1) {
		code = live_pid(pids[0], err, errlen);
		if (code < 0) {
			/* the message is main's to print; still deliver what earlier runs left */
			fprintf(stderr, "heapbpf: %s\n", err);
			err[0] = '\0';
			code = EXIT_FAIL;
		}
	} else {
		code = run_children(pids, n, live_pid);
	}
	retention();
	if (pyro) {
		struct pyro_flush_result fr;

		pyro__flush(pyro, true, -1, &fr);
		if (fr.rejected || fr.auth_failed)
			code = worse(code, EXIT_FAIL);
		else if (fr.pending || fr.busy)
			code = worse(code, EXIT_NOT_SENT);
		if (!o->quiet && fr.sent)
			fprintf(stderr, "heapbpf: pyroscope: delivered %zu profile(s)\n", fr.sent);
		pyro__free(pyro);
		pyro = NULL;
	}
	return code;
}
