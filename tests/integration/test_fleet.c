// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Fleet use, end to end: --unit through a real cgroup, the shipped systemd
 * unit's exact ExecStart= (with its capability bounding set applied through
 * setpriv, and its system call filter checked against what heapbpf really
 * calls under strace), systemd-analyze verify, --interval windows, and the
 * Pyroscope exporter against tests/pyroscope/pyroscope_rules_server.py -
 * a local stand-in that enforces Pyroscope's documented ingest rules, not
 * Pyroscope itself.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "harness.h"
#include "standin.h"
#include "profile/pprof.h"

#define UNIT_DIR      "examples/systemd"
#define UNIT_FILE     UNIT_DIR "/heapbpf-snapshot@.service"
#define TIMER_FILE    UNIT_DIR "/heapbpf-snapshot@.timer"
#define UNIT_BINARY   "/usr/local/bin/heapbpf"
#define PYRO_SERVER   "tests/pyroscope/pyroscope_rules_server.py"
#define SECRET_TOKEN  "tok-9f1c2b7e5a"
#define SECRET_PASSWD "pw-c0ffee5ec7e7"

static char cg_dir[PATH_MAX + 512], cg_mount[PATH_MAX], cg_slice[PATH_MAX + 32];
static bool cg_slice_made;
static pid_t server_pid;

static void fleet_fini(void)
{
	hb_standin_kill(&server_pid);
	hb_cgroup_drain(cg_dir);
	if (cg_slice_made)
		rmdir(cg_slice);
	if (cg_mount[0])
		umount2(cg_mount, MNT_DETACH);
	hb_tmpdir_cleanup();
}

TestSuite(fleet, .fini = fleet_fini, .timeout = 180);

/* ---- cgroups: a unit as systemd would lay it out ---- */

/* The cgroup2 mount (hybrid or unified), or a fresh one when none is mounted. */
static const char *cgroup2_root(void)
{
	static char root[PATH_MAX];
	char line[4096];
	FILE *f = fopen("/proc/self/mountinfo", "re");

	cr_assert_not_null(f);
	while (!root[0] && fgets(line, sizeof(line), f)) {
		char mnt[PATH_MAX], fstype[64];
		char *sep = strstr(line, " - ");

		if (sep && sscanf(line, "%*s %*s %*s %*s %4095s", mnt) == 1 &&
		    sscanf(sep + 3, "%63s", fstype) == 1 && strcmp(fstype, "cgroup2") == 0)
			snprintf(root, sizeof(root), "%s", mnt);
	}
	fclose(f);
	if (!root[0]) {
		snprintf(cg_mount, sizeof(cg_mount), "%s", hb_tmp("cgroup2"));
		cr_assert_eq(mkdir(cg_mount, 0755), 0);
		cr_assert_eq(mount("none", cg_mount, "cgroup2", 0, NULL), 0,
			     "no cgroup2 mounted and cannot mount one: %s", strerror(errno));
		snprintf(root, sizeof(root), "%s", cg_mount);
	}
	return root;
}

/* Creates ROOT/system.slice/NAME.service and moves the pids into it. */
static void make_unit_cgroup(const char *name, const pid_t *pids, int n)
{
	char procs[sizeof(cg_dir) + 16];

	snprintf(cg_slice, sizeof(cg_slice), "%s/system.slice", cgroup2_root());
	if (mkdir(cg_slice, 0755) == 0)
		cg_slice_made = true;
	snprintf(cg_dir, sizeof(cg_dir), "%s/%s.service", cg_slice, name);
	cr_assert(mkdir(cg_dir, 0755) == 0 || errno == EEXIST, "mkdir %s: %s", cg_dir,
		  strerror(errno));
	snprintf(procs, sizeof(procs), "%s/cgroup.procs", cg_dir);
	for (int i = 0; i < n; i++) {
		FILE *f = fopen(procs, "we");

		cr_assert_not_null(f, "%s: %s", procs, strerror(errno));
		fprintf(f, "%d\n", pids[i]);
		cr_assert_eq(fclose(f), 0, "cannot move pid %d into %s", pids[i], cg_dir);
	}
}

/* ---- files ---- */

static bool file_contains(const char *path, const char *needle)
{
	char *text = NULL;
	ssize_t n = hb_read_file(path, &text);
	bool hit = n > 0 && memmem(text, n, needle, strlen(needle));

	free(text);
	return hit;
}

/* ---- running things ---- */

/* Runs argv (absolute argv[0]) with output into errbuf; returns the exit code. */
static int run(const char *const *argv, char *errbuf, size_t errlen, int timeout_ms)
{
	char path[PATH_MAX], *text = NULL;
	pid_t pid;
	int rc;

	snprintf(path, sizeof(path), "%s/run.out", hb_tmpdir());
	pid = hb_spawn(argv, path);
	cr_assert_gt(pid, 0);
	rc = hb_wait(pid, timeout_ms);
	errbuf[0] = '\0';
	if (hb_read_file(path, &text) >= 0) {
		snprintf(errbuf, errlen, "%s", text);
		free(text);
	}
	return rc;
}

/* ---- --unit ---- */

Test(fleet, unit_profiles_every_process_of_its_cgroup)
{
	struct svc a, b;
	char unit[64], err[16384], names[8][256], pa[16], pb[16];
	const char *out = hb_tmp("snap");
	const char *helper[] = { "/bin/sleep", "60", NULL };
	pid_t pids[3];

	hb_require_bpf();
	hb_start_idle_service(&a, "2", NULL, 0);
	hb_start_idle_service(&b, "1", NULL, 0);
	pids[0] = a.pid;
	pids[1] = b.pid;
	/* a helper without jemalloc (a wrapper shell, a sidecar) is skipped, not an error */
	pids[2] = hb_spawn(helper, NULL);
	snprintf(unit, sizeof(unit), "hbfleet-%d", getpid());
	make_unit_cgroup(unit, pids, 3);
	{
		const char *args[] = { "--unit", unit, "-d", "1", "--output-dir", out, NULL };

		cr_assert_eq(hb_run(args, err, sizeof(err), 60000), 0, "%s", err);
	}
	cr_assert_eq(hb_count_files(out, ".pb.gz", names, 8), 2, "%s", err);
	snprintf(pa, sizeof(pa), "-%d-", a.pid);
	snprintf(pb, sizeof(pb), "-%d-", b.pid);
	/* one profile each, labelled with pid and comm */
	cr_assert((strstr(names[0], pa) && strstr(names[1], pb)) ||
		  (strstr(names[0], pb) && strstr(names[1], pa)));
	cr_assert(strstr(names[0], "alloc-service-s"), "%s", names[0]);
	cr_assert(strstr(err, "2 processes"), "%s", err);
	kill(pids[2], SIGKILL);
	hb_wait(pids[2], 5000);
	cr_assert_eq(svc_stop(&a), 0);
	cr_assert_eq(svc_stop(&b), 0);
	/* a unit that is not running is an error, not "no samples" */
	{
		const char *args[] = { "--unit", "hbfleet-no-such-unit", "-d",
				       "1",	 "--output-dir",	 out,
				       NULL };

		cr_assert_eq(hb_run(args, err, sizeof(err), 30000), 1, "%s", err);
		cr_assert(strstr(err, "hbfleet-no-such-unit.service"), "%s", err);
	}
}

/*
 * A process forked by a unit's process during the window joins the unit's
 * cgroup with sampling on: its flag goes back off with its parent's, and
 * --follow-forks profiles it under its own pid in the parent's snapshot.
 */
Test(fleet, unit_child_forked_in_the_window_is_restored_and_followed)
{
	struct svc a;
	char unit[64], reply[64], errpath[PATH_MAX], names[4][256], path[PATH_MAX + 256];
	const char *out = hb_tmp("snapf");
	uint64_t flag;
	uint8_t b = 0xff;
	pid_t hp, child = 0;
	char *text;
	int rc;

	hb_require_bpf();
	hb_start_idle_service(&a, "1", NULL, 0);
	snprintf(unit, sizeof(unit), "hbfork-%d", getpid());
	make_unit_cgroup(unit, &a.pid, 1);
	cr_assert_eq(hb_sym_addr(a.pid, hb_path("examples/alloc-service-static"),
				 "je_prof_active_state", &flag),
		     0);
	snprintf(errpath, sizeof(errpath), "%s/unitfork.err", hb_tmpdir());
	hp = hb_spawn((const char *[]){ hb_path("heapbpf"), "--unit", unit, "-d", "0",
					"--follow-forks", "--output-dir", out, "-f", "folded", "-t",
					"alloc_space", NULL },
		      errpath);
	cr_assert(hb_wait_byte(a.pid, flag, 1, 20000, hp), "heapbpf did not start");
	cr_assert_eq(svc_cmd(&a, "fork 30", reply, sizeof(reply), 10000), 0);
	cr_assert_eq(sscanf(reply, "forked %d", &child), 1, "%s", reply);
	cr_assert_eq(hb_peek(child, flag, &b, 1), 0);
	cr_assert_eq(b, 1, "the child did not inherit sampling on");
	/*
	 * followed once heapbpf said so (its attach, slow on a loaded machine,
	 * came after the fork): from then on the child's allocations are its.
	 * The child frees what it allocates: its allocations, not its in-use, show it
	 */
	snprintf(reply, sizeof(reply), "following pid %d (forked from %d)", child, a.pid);
	cr_assert(hb_wait_text(errpath, reply, 60000, hp), "heapbpf never said \"%s\"", reply);
	hb_sleep_ms(3000);
	kill(hp, SIGTERM);
	rc = hb_wait(hp, 30000);
	cr_assert_geq(hb_read_file(errpath, &text), 0);
	cr_assert_eq(rc, 0, "%s", text);
	cr_assert(strstr(text, "following pid"), "%s", text);
	free(text);
	cr_assert_eq(hb_peek(child, flag, &b, 1), 0);
	cr_assert_eq(b, 0, "the unit's forked child still samples");
	cr_assert_eq(hb_peek(a.pid, flag, &b, 1), 0);
	cr_assert_eq(b, 0);
	/* one snapshot, the parent's, whose folded stacks have a root per process */
	cr_assert_eq(hb_count_files(out, ".folded", names, 4), 1);
	snprintf(path, sizeof(path), "%s/%s", out, names[0]);
	snprintf(reply, sizeof(reply), "pid %d;", child);
	cr_assert(file_contains(path, reply), "no stack of the child in %s", path);
	snprintf(reply, sizeof(reply), "pid %d;", a.pid);
	cr_assert(file_contains(path, reply), "no stack of the parent in %s", path);
	kill(child, SIGKILL);
	cr_assert_eq(svc_stop(&a), 0);
}

Test(fleet, pidfile)
{
	struct svc a;
	char err[8192], pf[PATH_MAX];
	const char *out = hb_tmp("snap");
	FILE *f;

	hb_require_bpf();
	hb_start_idle_service(&a, "1", NULL, 0);
	snprintf(pf, sizeof(pf), "%s", hb_tmp("svc.pid"));
	f = fopen(pf, "we");
	fprintf(f, "%d\n", a.pid);
	fclose(f);
	chmod(pf, 0644);
	{
		const char *args[] = { "--pidfile", pf,	  "-d",	    "1", "--output-dir",
				       out,	    "-f", "folded", NULL };

		cr_assert_eq(hb_run(args, err, sizeof(err), 60000), 0, "%s", err);
	}
	cr_assert_eq(hb_count_files(out, ".folded", NULL, 0), 1);
	/* a pid file anyone may write could point root anywhere */
	chmod(pf, 0666);
	{
		const char *args[] = { "--pidfile", pf, "-d", "1", "--output-dir", out, NULL };

		cr_assert_eq(hb_run(args, err, sizeof(err), 30000), 1, "%s", err);
		cr_assert(strstr(err, "written by others"), "%s", err);
	}
	cr_assert_eq(svc_stop(&a), 0);
}

/* A timer alerts on real errors only: an idle window is exit 3, with its snapshot written. */
Test(fleet, idle_window_exits_3_and_still_writes)
{
	char pid[16], err[8192], reply[256];
	const char *out = hb_tmp("snap");
	struct svc a;

	hb_require_bpf();
	hb_start_idle_service(&a, "1", NULL, 0);
	cr_assert_eq(svc_cmd(&a, "pause", reply, sizeof(reply), 10000), 0);
	snprintf(pid, sizeof(pid), "%d", a.pid);
	{
		const char *args[] = { "--pid", pid, "-d", "1", "--output-dir", out, NULL };

		cr_assert_eq(hb_run(args, err, sizeof(err), 60000), 3, "%s", err);
	}
	cr_assert_eq(hb_count_files(out, ".pb.gz", NULL, 0), 1);
	cr_assert(strstr(err, "no allocation was sampled"), "%s", err);
	cr_assert_eq(svc_stop(&a), 0);
}

/* ---- the shipped systemd unit ---- */

/* The value of the first "Key=" line of a unit file (static buffer). */
static const char *unit_key(const char *path, const char *key, int nth)
{
	static char val[4096];
	char line[4096];
	size_t kl = strlen(key);
	FILE *f = fopen(path, "re");
	int seen = 0;

	cr_assert_not_null(f, "%s", path);
	val[0] = '\0';
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, key, kl) == 0 && line[kl] == '=' && seen++ == nth) {
			snprintf(val, sizeof(val), "%s", line + kl + 1);
			val[strcspn(val, "\n")] = '\0';
			break;
		}
	}
	fclose(f);
	return val[0] ? val : NULL;
}

struct env {
	char names[32][64], values[32][256];
	int n;
};

static void env_set(struct env *e, const char *name, const char *value)
{
	int i;

	for (i = 0; i < e->n && strcmp(e->names[i], name); i++)
		;
	if (i == e->n)
		e->n++;
	snprintf(e->names[i], sizeof(e->names[i]), "%s", name);
	snprintf(e->values[i], sizeof(e->values[i]), "%s", value);
}

static const char *env_get(const struct env *e, const char *name)
{
	for (int i = 0; i < e->n; i++) {
		if (strcmp(e->names[i], name) == 0)
			return e->values[i];
	}
	return "";
}

/* Replaces %i, %S and ${VAR} in word (systemd's specifiers and variable expansion). */
static void expand_word(const char *w, const struct env *e, const char *inst, const char *state,
			char *out, size_t len)
{
	size_t o = 0;

	while (*w && o + 1 < len) {
		if (w[0] == '%' && w[1] == 'i') {
			o += snprintf(out + o, len - o, "%s", inst);
			w += 2;
		} else if (w[0] == '%' && w[1] == 'S') {
			o += snprintf(out + o, len - o, "%s", state);
			w += 2;
		} else if (w[0] == '$' && w[1] == '{' && strchr(w, '}')) {
			char name[64];
			const char *end = strchr(w, '}');

			snprintf(name, sizeof(name), "%.*s", (int)(end - w - 2), w + 2);
			o += snprintf(out + o, len - o, "%s", env_get(e, name));
			w = end + 1;
		} else {
			out[o++] = *w++;
		}
	}
	out[o < len ? o : len - 1] = '\0';
}

/*
 * argv of the unit's ExecStart= as systemd would run it for instance inst:
 * the unit's Environment=, then overrides (as an EnvironmentFile= would
 * give them), specifiers expanded, "$VAR" split into words. The one change:
 * /usr/local/bin/heapbpf is the binary just built.
 */
static int unit_argv(const char *inst, const char *state, const char *const *overrides,
		     char words[][512], const char **argv, int max)
{
	char exec[4096], *save, *w;
	struct env e = { .n = 0 };
	const char *v;
	int n = 0;

	for (int k = 0; (v = unit_key(UNIT_FILE, "Environment", k)); k++) {
		char copy[4096], *s2, *a;

		snprintf(copy, sizeof(copy), "%s", v);
		for (a = strtok_r(copy, " ", &s2); a; a = strtok_r(NULL, " ", &s2)) {
			char *eq = strchr(a, '=');

			*eq = '\0';
			env_set(&e, a, eq + 1);
		}
	}
	for (; overrides && *overrides; overrides++) {
		char copy[512], *eq;

		snprintf(copy, sizeof(copy), "%s", *overrides);
		eq = strchr(copy, '=');
		*eq = '\0';
		env_set(&e, copy, eq + 1);
	}
	v = unit_key(UNIT_FILE, "ExecStart", 0);
	cr_assert_not_null(v);
	snprintf(exec, sizeof(exec), "%s", v);
	for (w = strtok_r(exec, " ", &save); w && n < max - 1; w = strtok_r(NULL, " ", &save)) {
		if (w[0] == '$' && w[1] != '{') {
			/* $VAR: split into words, none when empty */
			char copy[256], *s3, *x;

			snprintf(copy, sizeof(copy), "%s", env_get(&e, w + 1));
			for (x = strtok_r(copy, " ", &s3); x && n < max - 1;
			     x = strtok_r(NULL, " ", &s3)) {
				snprintf(words[n], 512, "%s", x);
				argv[n] = words[n];
				n++;
			}
			continue;
		}
		expand_word(w, &e, inst, state, words[n], 512);
		if (n == 0) {
			cr_assert_str_eq(words[0], UNIT_BINARY);
			snprintf(words[0], 512, "%s", hb_path("heapbpf"));
		}
		argv[n] = words[n];
		n++;
	}
	argv[n] = NULL;
	return n;
}

/* "CAP_BPF CAP_PERFMON" -> "-all,+bpf,+perfmon" for setpriv --bounding-set */
static void setpriv_caps(char *out, size_t len)
{
	char copy[1024], *save, *c;
	const char *v = unit_key(UNIT_FILE, "CapabilityBoundingSet", 0);
	size_t o;

	cr_assert_not_null(v);
	snprintf(copy, sizeof(copy), "%s", v);
	o = snprintf(out, len, "-all");
	for (c = strtok_r(copy, " ", &save); c; c = strtok_r(NULL, " ", &save)) {
		cr_assert_eq(strncmp(c, "CAP_", 4), 0, "%s", c);
		o += snprintf(out + o, len - o, ",+");
		for (c += 4; *c && o + 1 < len; c++)
			out[o++] = (char)tolower((unsigned char)*c);
		out[o] = '\0';
	}
}

/* The unit's ExecStart under setpriv with the unit's capability bounding set and no_new_privs. */
static int run_unit(const char *inst, const char *state, const char *const *overrides,
		    const char *strace_out, char *err, size_t errlen)
{
	static char words[64][512];
	const char *argv[80], *uargv[64];
	char caps[512];
	int n = 0, un;

	un = unit_argv(inst, state, overrides, words, uargv, 64);
	setpriv_caps(caps, sizeof(caps));
	if (strace_out) {
		/* LeakSanitizer cannot run under ptrace (the sanitized pass): leaks are checked elsewhere */
		setenv("ASAN_OPTIONS", "detect_leaks=0", 1);
		argv[n++] = "/usr/bin/strace";
		argv[n++] = "-f";
		argv[n++] = "-qq";
		argv[n++] = "-o";
		argv[n++] = strace_out;
	}
	argv[n++] = "/usr/bin/setpriv";
	argv[n++] = "--bounding-set";
	argv[n++] = caps;
	argv[n++] = "--inh-caps=-all";
	argv[n++] = "--no-new-privs";
	argv[n++] = "--";
	for (int i = 0; i < un; i++)
		argv[n++] = uargv[i];
	argv[n] = NULL;
	return run(argv, err, errlen, 120000);
}

Test(fleet, systemd_unit_execstart_snapshots_with_retention)
{
	const char *overrides[] = { "HEAPBPF_DURATION=1", "HEAPBPF_KEEP=2", NULL };
	char unit[64], state[PATH_MAX], dir[PATH_MAX + 80], err[16384], names[16][256];
	char stamps[4][32];
	struct svc a;
	int rc;

	hb_require_bpf();
	hb_start_idle_service(&a, "2", NULL, 0);
	snprintf(unit, sizeof(unit), "hbunit-%d", getpid());
	make_unit_cgroup(unit, &a.pid, 1);
	snprintf(state, sizeof(state), "%s", hb_tmp("var-lib"));
	snprintf(dir, sizeof(dir), "%s/heapbpf/%s", state, unit);
	for (int r = 0; r < 4; r++) {
		rc = run_unit(unit, state, overrides, NULL, err, sizeof(err));
		/* SuccessExitStatus=3: an idle window is not a failure */
		cr_assert(rc == 0 || rc == 3, "run %d: exit %d: %s", r, rc, err);
		cr_assert_eq(hb_count_files(dir, ".pb.gz", names, 16), r < 2 ? r + 1 : 2,
			     "run %d: %s", r, err);
		snprintf(stamps[r], sizeof(stamps[r]), "%.16s", names[r < 2 ? r : 1] + 5);
		/* one snapshot a second at most: the stamp is the window's second */
		hb_sleep_ms(1100);
	}
	/* --keep 2 (HEAPBPF_KEEP): the newest two runs remain, both formats of each */
	cr_assert_eq(hb_count_files(dir, ".pb.gz", names, 16), 2);
	cr_assert(strstr(names[0], stamps[2]) && strstr(names[1], stamps[3]), "%s %s / %s %s",
		  names[0], names[1], stamps[2], stamps[3]);
	cr_assert_eq(hb_count_files(dir, ".folded.zst", NULL, 0), 2);
	cr_assert_eq(hb_count_files(dir, ".tmp", NULL, 0), 0);
	cr_assert_eq(svc_stop(&a), 0);
}

/* The system calls of a filter group, nested groups expanded (systemd-analyze lists them as @x). */
static void add_group(const char *group, char allowed[][40], int *n, int max, int depth)
{
	char cmd[256], line[512];
	FILE *f;

	cr_assert_lt(depth, 8);
	snprintf(cmd, sizeof(cmd), "systemd-analyze syscall-filter %s 2>/dev/null", group);
	f = popen(cmd, "r");
	cr_assert_not_null(f);
	while (fgets(line, sizeof(line), f)) {
		char name[40];

		/* members are indented; comments start with '#' */
		if (strncmp(line, "    ", 4) || sscanf(line + 4, "%39[@a-z0-9_-]", name) != 1)
			continue;
		if (name[0] == '@')
			add_group(name, allowed, n, max, depth + 1);
		else if (*n < max)
			snprintf(allowed[(*n)++], 40, "%s", name);
	}
	pclose(f);
}

/* Every system call heapbpf makes under the unit is allowed by its SystemCallFilter=. */
Test(fleet, systemd_unit_syscall_filter_allows_what_heapbpf_calls)
{
	const char *overrides[] = { "HEAPBPF_DURATION=1", NULL };
	char unit[64], state[PATH_MAX], err[16384], line[512];
	static char allowed[8192][40];
	const char *filter = unit_key(UNIT_FILE, "SystemCallFilter", 0);
	const char *trace = hb_tmp("strace.out");
	int nallowed = 0, rc, checked = 0;
	char copy[1024], *save, *g;
	struct svc a;
	FILE *f;

	hb_require_bpf();
	cr_assert_not_null(filter);
	snprintf(copy, sizeof(copy), "%s", filter);
	for (g = strtok_r(copy, " ", &save); g; g = strtok_r(NULL, " ", &save)) {
		if (g[0] == '@')
			add_group(g, allowed, &nallowed, 8192, 0);
		else
			snprintf(allowed[nallowed++], 40, "%s", g);
	}
	cr_assert_gt(nallowed, 100, "systemd-analyze syscall-filter listed nothing");
	hb_start_idle_service(&a, "2", NULL, 0);
	snprintf(unit, sizeof(unit), "hbsys-%d", getpid());
	make_unit_cgroup(unit, &a.pid, 1);
	snprintf(state, sizeof(state), "%s", hb_tmp("var-lib"));
	rc = run_unit(unit, state, overrides, trace, err, sizeof(err));
	cr_assert(rc == 0 || rc == 3, "exit %d: %s", rc, err);
	cr_assert_eq(svc_stop(&a), 0);
	/* strace -o: "PID name(args) = ..." for every call of heapbpf (after setpriv's execve) */
	f = fopen(trace, "re");
	cr_assert_not_null(f);
	while (fgets(line, sizeof(line), f)) {
		char name[64];
		bool ok = false;

		if (sscanf(line, "%*d %63[a-z0-9_](", name) != 1)
			continue;
		for (int i = 0; i < nallowed && !ok; i++)
			ok = strcmp(allowed[i], name) == 0;
		cr_assert(ok, "heapbpf called %s, which SystemCallFilter=%s does not allow", name,
			  filter);
		checked++;
	}
	fclose(f);
	cr_assert_gt(checked, 100);
}

Test(fleet, systemd_analyze_verify_passes)
{
	char svc[PATH_MAX], timer[PATH_MAX], cmd[4 * PATH_MAX], out[8192];
	const char *argv[] = { "/bin/sh", "-c", cmd, NULL };
	int rc;

	/*
	 * verify checks that ExecStart='s binary exists: a copy of the unit with
	 * /usr/local/bin/heapbpf replaced by the binary just built is verified,
	 * under an instance name, with the timer beside it. Nothing else changes.
	 */
	snprintf(svc, sizeof(svc), "%s", hb_tmp("heapbpf-snapshot@verifytest.service"));
	snprintf(timer, sizeof(timer), "%s", hb_tmp("heapbpf-snapshot@verifytest.timer"));
	snprintf(cmd, sizeof(cmd),
		 "sed 's#%s#'\"$(realpath %s)\"'#' %s > '%s' && cp %s '%s' && cd '%s' && "
		 "systemd-analyze verify --man=no ./heapbpf-snapshot@verifytest.service "
		 "./heapbpf-snapshot@verifytest.timer",
		 UNIT_BINARY, hb_path("heapbpf"), UNIT_FILE, svc, TIMER_FILE, timer, hb_tmpdir());
	rc = run(argv, out, sizeof(out), 60000);
	cr_assert_eq(rc, 0, "systemd-analyze verify failed: %s", out);
	/* no warnings either (unknown keys only warn) */
	cr_assert_str_empty(out, "systemd-analyze verify said: %s", out);
}

/* ---- --interval ---- */

static int64_t sample_sum(const char *path, const char *type)
{
	Perftools__Profiles__Profile *p;
	char *data = NULL;
	ssize_t n = hb_read_file(path, &data);
	int64_t sum = 0;
	size_t k;

	cr_assert_gt(n, 0, "%s", path);
	cr_assert_eq(pprof_decode((uint8_t *)data, n, &p), 0, "%s", path);
	for (k = 0; k < p->n_sample_type; k++) {
		if (strcmp(p->string_table[p->sample_type[k]->type], type) == 0)
			break;
	}
	cr_assert_lt(k, p->n_sample_type);
	for (size_t i = 0; i < p->n_sample; i++)
		sum += p->sample[i]->value[k];
	perftools__profiles__profile__free_unpacked(p, NULL);
	free(data);
	return sum;
}

/* Waits until dir holds at least want files ending in suffix (or heapbpf h has ended); their count. */
static int wait_windows(const char *dir, const char *suffix, int want, pid_t h)
{
	int n = 0;

	for (int t = 0; t < 2400; t++) {
		n = hb_count_files(dir, suffix, NULL, 0);
		if (n >= want || (kill(h, 0) && errno == ESRCH))
			break;
		hb_sleep_ms(50);
	}
	return n;
}

/*
 * Windows of a second, until stopped: the service allocates through the first
 * two, then is paused; a window that began after the pause holds no
 * allocation (a delta: a running total would not be 0) and its in-use is the
 * state carried over. Each window's line names every file written. No wall-clock
 * race: the test waits for the files, not for seconds.
 */
Test(fleet, interval_windows_carry_deltas_and_restore_the_flag)
{
	char pid[16], err[16384], names[16][256], path[PATH_MAX * 2], reply[256];
	const char *out = hb_tmp("windows");
	uint64_t flag;
	uint8_t b = 1;
	struct svc a;
	pid_t h;
	int n, paused_at, rc;

	hb_require_bpf();
	hb_start_idle_service(&a, "2", pid, sizeof(pid));
	{
		const char *argv[] = {
			hb_path("heapbpf"), "--pid", pid,  "--interval", "1",  "-d",	 "0",
			"--output-dir",	    out,     "-f", "pprof",	 "-f", "folded", NULL
		};

		h = hb_spawn(argv, hb_tmp("heapbpf.out"));
	}
	cr_assert_geq(wait_windows(out, ".pb.gz", 2, h), 2, "heapbpf wrote no two windows");
	cr_assert_eq(svc_cmd(&a, "pause", reply, sizeof(reply), 10000), 0);
	/*
	 * A window's file comes after its end (built then, slowly on a loaded
	 * machine): at the pause the window that had ended last may have had no
	 * file yet, and the one after it had begun. So the window counted now
	 * and the next may both hold allocations from before the pause; the one
	 * after those began after it.
	 */
	paused_at = hb_count_files(out, ".pb.gz", NULL, 0);
	cr_assert_geq(wait_windows(out, ".pb.gz", paused_at + 3, h), paused_at + 3);
	kill(h, SIGINT);
	rc = hb_wait(h, 60000);
	{
		char *text = NULL;

		hb_read_file(hb_tmp("heapbpf.out"), &text);
		snprintf(err, sizeof(err), "%s", text ? text : "");
		free(text);
	}
	cr_assert_eq(rc, 0, "%s", err);
	n = hb_count_files(out, ".pb.gz", names, 16);
	cr_assert_geq(n, paused_at + 3, "%d windows: %s", n, err);
	snprintf(path, sizeof(path), "%s/%s", out, names[0]);
	cr_assert_gt(sample_sum(path, "alloc_objects"), 0);
	snprintf(path, sizeof(path), "%s/%s", out, names[paused_at + 2]);
	cr_assert_eq(sample_sum(path, "alloc_objects"), 0, "%s holds allocations",
		     names[paused_at + 2]);
	cr_assert_eq(sample_sum(path, "alloc_space"), 0);
	/* in use is the state at the window's end, carried over from the windows before */
	cr_assert_gt(sample_sum(path, "inuse_space"), 0);
	/* each window's line names both of its files */
	{
		char folded[256];

		snprintf(folded, sizeof(folded), "%s", names[0]);
		*strstr(folded, ".pb.gz") = '\0';
		strcat(folded, ".folded");
		cr_assert(strstr(err, names[0]) && strstr(err, folded),
			  "the window's line does not name %s and %s:\n%s", names[0], folded, err);
	}
	cr_assert_eq(svc_cmd(&a, "resume", reply, sizeof(reply), 10000), 0);
	/* prof_active went back off when the run ended */
	cr_assert_eq(hb_sym_addr(a.pid, hb_path("examples/alloc-service-static"),
				 "je_prof_active_state", &flag),
		     0);
	cr_assert_eq(hb_peek(a.pid, flag, &b, 1), 0);
	cr_assert_eq(b, 0);
	cr_assert_eq(svc_stop(&a), 0);
}

/* ---- Pyroscope ---- */

static int server_port;
static const char *server_scheme = "http";

/* Starts the rules server (port 0: any), or a wrapper of it; env "NAME=value" entries are its expectations. */
static void start_server_with(const char *wrapper, int port, const char *extra,
			      const char *const *env)
{
	const char *python[] = { "/usr/bin/python3", PYRO_SERVER, NULL };
	const char *wrapped[] = { wrapper, NULL };
	const char *more[] = { extra, NULL };

	server_pid = hb_standin_start(wrapper ? wrapped : python, port, more, env, &server_port);
}

static void start_server(int port, const char *extra, const char *const *env)
{
	start_server_with(NULL, port, extra, env);
}

static void stop_server(void)
{
	hb_standin_stop(&server_pid);
}

/* Accepted profiles so far: lines of the server's log. */
static int accepted(char lines[][4096], int max)
{
	return hb_standin_log(&lines[0][0], 4096, max);
}

static void push(const char *pid, const char *spool, const char *extra1, const char *extra2,
		 int want, char *err, size_t errlen)
{
	hb_standin_deliver(server_scheme, server_port, pid, spool, extra1, extra2, want, err,
			   errlen);
}

Test(fleet, pyroscope_accepts_raw_and_multipart_with_tenant_and_basic_auth)
{
	const char *expect[] = { "PYRO_EXPECT_TENANT=team-a", "PYRO_EXPECT_USER=12345",
				 "PYRO_EXPECT_PASSWORD=" SECRET_PASSWD, NULL };
	char pid[16], err[65536], lines[8][4096], want[64];
	const char *spool = hb_tmp("spool");
	struct svc a;

	hb_require_bpf();
	start_server(0, NULL, expect);
	hb_start_idle_service(&a, "2", pid, sizeof(pid));
	mkdir(spool, 0700);
	setenv("HEAPBPF_PYROSCOPE_TENANT", "team-a", 1);
	setenv("HEAPBPF_PYROSCOPE_USER", "12345", 1);
	setenv("HEAPBPF_PYROSCOPE_PASSWORD", SECRET_PASSWD, 1);
	push(pid, spool, "--label", "env=test", 0, err, sizeof(err));
	push(pid, spool, "--pyroscope-multipart", "--service-name=checkout", 0, err, sizeof(err));
	cr_assert_eq(accepted(lines, 8), 2, "%s", err);
	cr_assert_eq(hb_count_files(spool, ".spool", NULL, 0), 0);
	/* raw body with format=pprof, service name from comm, default and extra labels */
	cr_assert(strstr(lines[0], "\"format\": \"pprof\""), "%s", lines[0]);
	cr_assert(strstr(lines[0], "\"service_name\": \"alloc-service-s\""), "%s", lines[0]);
	snprintf(want, sizeof(want), "\"pid\": \"%s\"", pid);
	cr_assert(strstr(lines[0], want), "%s", lines[0]);
	cr_assert(strstr(lines[0], "\"hostname\": "), "%s", lines[0]);
	cr_assert(strstr(lines[0], "\"comm\": \"alloc-service-s\""), "%s", lines[0]);
	cr_assert(strstr(lines[0], "\"env\": \"test\""), "%s", lines[0]);
	cr_assert(strstr(lines[0], "\"tenant\": \"team-a\""), "%s", lines[0]);
	/* the memory sample types Pyroscope recognizes, with allocations in the window */
	cr_assert(strstr(lines[0], "\"sample_types\": [\"alloc_objects/count\", "
				   "\"alloc_space/bytes\", \"inuse_objects/count\", "
				   "\"inuse_space/bytes\"]"),
		  "%s", lines[0]);
	cr_assert(strstr(lines[0], "large_buffers"), "%s", lines[0]);
	cr_assert_null(strstr(lines[0], "\"alloc_space\": 0,"), "%s", lines[0]);
	/* multipart without format, --service-name */
	cr_assert(strstr(lines[1], "\"format\": \"multipart\""), "%s", lines[1]);
	cr_assert(strstr(lines[1], "\"service_name\": \"checkout\""), "%s", lines[1]);
	cr_assert_eq(svc_stop(&a), 0);
}

/* --pyroscope URL alone: a default spool, systemd's state directory when set, made 0700 */
Test(fleet, pyroscope_alone_spools_in_the_state_directory)
{
	char pid[16], err[65536], lines[4][4096], url[64], spool[PATH_MAX + 16];
	const char *state = hb_tmp("state");
	struct stat st;
	struct svc a;
	int rc;

	hb_require_bpf();
	start_server(0, NULL, NULL);
	hb_start_idle_service(&a, "2", pid, sizeof(pid));
	snprintf(url, sizeof(url), "%s://127.0.0.1:%d", server_scheme, server_port);
	snprintf(spool, sizeof(spool), "%s/spool", state);
	setenv("STATE_DIRECTORY", state, 1);
	rc = hb_run((const char *[]){ "--pid", pid, "-d", "1", "--pyroscope", url, NULL }, err,
		    sizeof(err), 90000);
	unsetenv("STATE_DIRECTORY");
	cr_assert_eq(rc, 0, "%s", err);
	cr_assert_eq(accepted(lines, 4), 1, "%s", err);
	cr_assert_eq(stat(state, &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0700, "%s is %o", state, st.st_mode & 0777);
	cr_assert_eq(stat(spool, &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0700, "%s is %o", spool, st.st_mode & 0777);
	/* delivered: nothing waits */
	cr_assert_eq(hb_count_files(spool, ".spool", NULL, 0), 0);
	cr_assert_eq(svc_stop(&a), 0);
}

static void assert_distinct(char lines[][4096], int n)
{
	for (int i = 0; i < n; i++) {
		char *hi = strstr(lines[i], "\"sha256\"");

		cr_assert_not_null(hi);
		for (int j = 0; j < i; j++)
			cr_assert(strcmp(hi, strstr(lines[j], "\"sha256\"")) != 0,
				  "profile %d was delivered twice", j);
	}
}

Test(fleet, pyroscope_spool_keeps_profiles_through_503_and_outage)
{
	char pid[16], err[65536], lines[16][4096];
	const char *spool = hb_tmp("spool");
	struct svc a;
	int port;

	hb_require_bpf();
	hb_start_idle_service(&a, "2", pid, sizeof(pid));
	mkdir(spool, 0700);
	/* up, but every answer a 503: retried, then kept */
	start_server(0, "--fail-all", NULL);
	port = server_port;
	push(pid, spool, NULL, NULL, 5, err, sizeof(err));
	cr_assert(strstr(err, "HTTP 503"), "%s", err);
	cr_assert(strstr(err, "will retry"), "%s", err);
	cr_assert_eq(hb_count_files(spool, ".spool", NULL, 0), 1);
	/* down: connection refused, kept as well */
	stop_server();
	push(pid, spool, NULL, NULL, 5, err, sizeof(err));
	cr_assert_eq(hb_count_files(spool, ".spool", NULL, 0), 2);
	cr_assert_eq(accepted(lines, 16), 0);
	/* back, and the first answer a 503 again: the retry delivers all three, oldest first */
	start_server(port, "--fail-first=1", NULL);
	push(pid, spool, NULL, NULL, 0, err, sizeof(err));
	cr_assert_eq(hb_count_files(spool, ".spool", NULL, 0), 0, "%s", err);
	cr_assert_eq(accepted(lines, 16), 3, "%s", err);
	assert_distinct(lines, 3);
	{
		long f0 = atol(strstr(lines[0], "\"from\": ") + 8);
		long f2 = atol(strstr(lines[2], "\"from\": ") + 8);

		cr_assert_lt(f0, f2, "not delivered oldest first");
	}
	/* a further run sends its own profile only: nothing twice */
	push(pid, spool, NULL, NULL, 0, err, sizeof(err));
	cr_assert_eq(accepted(lines, 16), 4);
	assert_distinct(lines, 4);
	cr_assert_eq(svc_stop(&a), 0);
}

Test(fleet, pyroscope_refused_profile_leaves_the_spool)
{
	struct hb_profile p = { .period = 524288 };
	char pid[16], err[65536], lines[4][4096], path[PATH_MAX], *hdr = NULL;
	const char *spool = hb_tmp("spool");
	uint8_t *buf = NULL;
	size_t len = 0;
	int hlen;
	struct svc a;
	FILE *f;

	hb_require_bpf();
	hb_start_idle_service(&a, "1", pid, sizeof(pid));
	mkdir(spool, 0700);
	/* a spooled profile from two hours ago: Pyroscope rejects profiles older than 1 h */
	p.time_nanos = (int64_t)(time(NULL) - 7200) * 1000000000LL;
	cr_assert_eq(pprof_encode(&p, &buf, &len), 0);
	hlen = asprintf(&hdr, "HBSPOOL1\nname=old{pid=1}\nfrom=%ld\nuntil=%ld\n\n",
			(long)time(NULL) - 7200, (long)time(NULL) - 7190);
	snprintf(path, sizeof(path), "%s/20000101T000000Z-000000000-1.spool", spool);
	f = fopen(path, "we");
	fwrite(hdr, 1, hlen, f);
	fwrite(buf, 1, len, f);
	fclose(f);
	/* as heapbpf writes its spool files: it reads back no other */
	cr_assert_eq(chmod(path, 0600), 0);
	free(hdr);
	free(buf);
	start_server(0, NULL, NULL);
	/* the old one is refused for good and deleted; this run's profile goes through */
	push(pid, spool, NULL, NULL, 1, err, sizeof(err));
	cr_assert(strstr(err, "too old"), "%s", err);
	cr_assert(strstr(err, "refused"), "%s", err);
	cr_assert_eq(hb_count_files(spool, ".spool", NULL, 0), 0);
	cr_assert_eq(accepted(lines, 4), 1);
	cr_assert_eq(svc_stop(&a), 0);
}

Test(fleet, pyroscope_secrets_stay_out_of_argv_logs_and_messages)
{
	const char *expect[] = { "PYRO_EXPECT_TENANT=team-b", "PYRO_EXPECT_TOKEN=" SECRET_TOKEN,
				 NULL };
	char pid[16], err[65536], lines[4][4096], url[128], cmdline[4096], tokfile[PATH_MAX];
	char names[4][256];
	const char *spool = hb_tmp("spool");
	struct svc a;
	FILE *f;

	hb_require_bpf();
	start_server(0, NULL, expect);
	hb_start_idle_service(&a, "1", pid, sizeof(pid));
	mkdir(spool, 0700);
	/* from a file, as a systemd credential would give it */
	snprintf(tokfile, sizeof(tokfile), "%s", hb_tmp("token"));
	f = fopen(tokfile, "we");
	fprintf(f, "%s\n", SECRET_TOKEN);
	fclose(f);
	chmod(tokfile, 0400);
	setenv("HEAPBPF_PYROSCOPE_TENANT", "team-b", 1);
	setenv("HEAPBPF_PYROSCOPE_TOKEN_FILE", tokfile, 1);
	{
		/* while it runs, its command line holds no secret */
		const char *argv[] = {
			hb_path("heapbpf"), "--pid", pid,  "-d", "2", "--pyroscope", url,
			"--spool-dir",	    spool,   "-v", NULL
		};
		char path[64];
		ssize_t n;
		pid_t h;
		int fd;

		snprintf(url, sizeof(url), "http://127.0.0.1:%d/", server_port);
		h = hb_spawn(argv, hb_tmp("run1.out"));
		hb_sleep_ms(500);
		snprintf(path, sizeof(path), "/proc/%d/cmdline", h);
		fd = open(path, O_RDONLY);
		cr_assert_geq(fd, 0);
		n = read(fd, cmdline, sizeof(cmdline) - 1);
		close(fd);
		cr_assert_gt(n, 0);
		for (ssize_t i = 0; i < n; i++)
			cmdline[i] = cmdline[i] ? cmdline[i] : ' ';
		cmdline[n] = '\0';
		cr_assert_null(strstr(cmdline, SECRET_TOKEN), "%s", cmdline);
		cr_assert_eq(hb_wait(h, 60000), 0);
	}
	cr_assert_eq(accepted(lines, 4), 1);
	cr_assert(!file_contains(hb_tmp("run1.out"), SECRET_TOKEN));
	/* a wrong token (verbose, refused with 401): messages name the variables, not the value */
	unsetenv("HEAPBPF_PYROSCOPE_TOKEN_FILE");
	setenv("HEAPBPF_PYROSCOPE_TOKEN", SECRET_TOKEN "-wrong", 1);
	push(pid, spool, NULL, NULL, 1, err, sizeof(err));
	cr_assert(strstr(err, "HTTP 401"), "%s", err);
	cr_assert(strstr(err, "HEAPBPF_PYROSCOPE_TOKEN"), "%s", err);
	cr_assert_null(strstr(err, SECRET_TOKEN), "%s", err);
	/* the refused profile waits in the spool, without the credentials */
	cr_assert_eq(hb_count_files(spool, ".spool", names, 4), 1);
	{
		char path[PATH_MAX * 2];

		snprintf(path, sizeof(path), "%s/%s", spool, names[0]);
		cr_assert(!file_contains(path, SECRET_TOKEN));
		cr_assert(!file_contains(path, "team-b"));
	}
	/* credentials in the URL are refused, without repeating them */
	unsetenv("HEAPBPF_PYROSCOPE_TOKEN");
	{
		const char *args[] = { "--pid",	      pid,
				       "-d",	      "1",
				       "--pyroscope", "https://u:" SECRET_PASSWD "@127.0.0.1:1",
				       "--spool-dir", spool,
				       NULL };

		cr_assert_eq(hb_run(args, err, sizeof(err), 30000), 1, "%s", err);
		cr_assert(strstr(err, "must not carry credentials"), "%s", err);
		cr_assert_null(strstr(err, SECRET_PASSWD), "%s", err);
	}
	/* and a token would not travel over plain http to another host */
	setenv("HEAPBPF_PYROSCOPE_TOKEN", SECRET_TOKEN, 1);
	{
		const char *args[] = { "--pid",	      pid,
				       "-d",	      "1",
				       "--pyroscope", "http://pyroscope.invalid:4040",
				       "--spool-dir", spool,
				       NULL };

		cr_assert_eq(hb_run(args, err, sizeof(err), 30000), 1, "%s", err);
		cr_assert(strstr(err, "https://"), "%s", err);
		cr_assert_null(strstr(err, SECRET_TOKEN), "%s", err);
	}
	cr_assert_eq(svc_stop(&a), 0);
}

/* TLS through libcurl with the certificate checked: an unknown CA is refused, --pyroscope-ca works. */
Test(fleet, pyroscope_tls_verifies_the_certificate)
{
	char pid[16], err[65536], lines[4][4096], cmd[4 * PATH_MAX];
	const char *cert = hb_tmp("cert.pem"), *key = hb_tmp("key.pem"), *spool = hb_tmp("spool");
	struct svc a;

	hb_require_bpf();
	snprintf(cmd, sizeof(cmd),
		 "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 "
		 "-addext subjectAltName=IP:127.0.0.1 -keyout '%s' -out '%s' 2>/dev/null",
		 key, cert);
	cr_assert_eq(system(cmd), 0, "openssl could not make a certificate");
	{
		/* the server with --tls-cert and --tls-key, through a small wrapper script */
		char wrapper[PATH_MAX];
		FILE *f;

		snprintf(wrapper, sizeof(wrapper), "%s", hb_tmp("tls-server.sh"));
		f = fopen(wrapper, "we");
		fprintf(f,
			"#!/bin/sh\nexec /usr/bin/python3 %s --tls-cert '%s' --tls-key '%s' \"$@\"\n",
			PYRO_SERVER, cert, key);
		fclose(f);
		chmod(wrapper, 0755);
		start_server_with(wrapper, 0, NULL, NULL);
	}
	server_scheme = "https";
	hb_start_idle_service(&a, "1", pid, sizeof(pid));
	mkdir(spool, 0700);
	/* a certificate no known CA signed: not sent, kept */
	push(pid, spool, NULL, NULL, 5, err, sizeof(err));
	cr_assert(strstr(err, "certificate") || strstr(err, "SSL"), "%s", err);
	cr_assert_eq(accepted(lines, 4), 0);
	/* with its CA: both go */
	{
		char ca[PATH_MAX + 32];

		snprintf(ca, sizeof(ca), "--pyroscope-ca=%s", cert);
		push(pid, spool, ca, NULL, 0, err, sizeof(err));
	}
	cr_assert_eq(accepted(lines, 4), 2, "%s", err);
	cr_assert_eq(svc_stop(&a), 0);
}

/* --interval with Pyroscope: one profile per window, windows back to back, allocations as deltas. */
Test(fleet, pyroscope_interval_windows)
{
	char pid[16], lines[8][4096];
	const char *spool = hb_tmp("spool");
	long from[8], until[8];
	struct svc a;
	int n;

	hb_require_bpf();
	start_server(0, NULL, NULL);
	hb_start_idle_service(&a, "2", pid, sizeof(pid));
	hb_standin_paused_windows(&a, pid, server_port, spool);
	n = accepted(lines, 8);
	if (n != 3) {
		char *out = NULL;

		hb_read_file(hb_tmp("heapbpf.out"), &out);
		cr_assert_fail("%d profiles:\n%s\n%s\n%s\n%s\nheapbpf said:\n%s", n, lines[0],
			       n > 1 ? lines[1] : "", n > 2 ? lines[2] : "", n > 3 ? lines[3] : "",
			       out ? out : "(nothing)");
	}
	for (int i = 0; i < n; i++) {
		from[i] = atol(strstr(lines[i], "\"from\": ") + 8);
		until[i] = atol(strstr(lines[i], "\"until\": ") + 9);
		cr_assert_geq(until[i] - from[i], 2, "%s", lines[i]);
		/*
		 * from is rounded down and until up to whole seconds: a 2 s window
		 * spans 3 of them, one that ran a little long (2.05 s from x.99)
		 * spans 4, and one whose tick the loop handled a second or more
		 * late (busy writing and pushing the window before, on a loaded
		 * machine) 5. A missed tick shows as a count of profiles other
		 * than 3 in the 6 s (above), not here
		 */
		cr_assert_leq(until[i] - from[i], 5, "%s", lines[i]);
		if (i)
			cr_assert_leq(from[i], until[i - 1], "windows %d and %d leave a gap", i - 1,
				      i);
	}
	cr_assert_gt(atol(strstr(lines[0], "\"alloc_objects\": ") + 17), 0, "%s", lines[0]);
	/* deltas: nothing allocated in the third window; in use carried over */
	cr_assert(strstr(lines[2], "\"alloc_objects\": 0,"), "%s", lines[2]);
	cr_assert_null(strstr(lines[2], "\"inuse_space\": 0}"), "%s", lines[2]);
	cr_assert_eq(hb_count_files(spool, ".spool", NULL, 0), 0);
	cr_assert_eq(svc_stop(&a), 0);
}

/* Never fill a disk: while the server stays away, the spool keeps only the newest profiles. */
Test(fleet, pyroscope_spool_is_bounded)
{
	char pid[16], err[65536], names[4][256];
	const char *spool = hb_tmp("spool");
	struct svc a;

	hb_require_bpf();
	/* a port nothing listens on: start the server, note its port, stop it */
	start_server(0, NULL, NULL);
	stop_server();
	hb_start_idle_service(&a, "1", pid, sizeof(pid));
	mkdir(spool, 0700);
	for (int r = 0; r < 3; r++)
		push(pid, spool, "--spool-keep", "2", 5, err, sizeof(err));
	cr_assert(strstr(err, "deleted the 1 oldest undelivered"), "%s", err);
	cr_assert_eq(hb_count_files(spool, ".spool", names, 4), 2);
	cr_assert_eq(svc_stop(&a), 0);
}

/* How many times text occurs in the file at path. */
static int occurrences(const char *path, const char *text)
{
	const char *all = hb_file_text(path);
	int n = 0;

	for (const char *p = strstr(all, text); p; p = strstr(p + 1, text))
		n++;
	return n;
}

/*
 * --interval windows to a Pyroscope that is down: the backlog is said once
 * as it starts ("tried again after each window", not "the next run"), not
 * at every window; when the server comes back the spool drains, and that
 * is said once too.
 */
Test(fleet, pyroscope_windows_say_the_backlog_and_its_drain_once)
{
	const char *spool = hb_tmp("spool"), *errpath = hb_tmp("windows.err");
	char pid[16], url[64];
	struct svc a;
	int port = hb_free_port();
	pid_t hp;

	hb_require_bpf();
	hb_start_idle_service(&a, "2", pid, sizeof(pid));
	mkdir(spool, 0700);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", port);
	hp = hb_spawn((const char *[]){ hb_path("heapbpf"), "--pid", pid, "--interval", "1",
					"--pyroscope", url, "--spool-dir", spool,
					"--pyroscope-retries", "0", NULL },
		      errpath);
	cr_assert(hb_wait_text(errpath, "delivery is tried again after each window", 60000, hp),
		  "%s", hb_file_text(errpath));
	/* two windows more, still down: said no more */
	for (int waited = 0; hb_count_files(spool, ".spool", NULL, 0) < 3; waited += 50) {
		cr_assert_lt(waited, 60000, "%s", hb_file_text(errpath));
		hb_sleep_ms(50);
	}
	start_server(port, NULL, NULL);
	cr_assert(hb_wait_text(errpath, "the spool has drained", 60000, hp), "%s",
		  hb_file_text(errpath));
	kill(hp, SIGTERM);
	cr_assert_eq(hb_wait(hp, 60000), 0, "%s", hb_file_text(errpath));
	cr_assert_eq(occurrences(errpath, "tried again after each window"), 1, "%s",
		     hb_file_text(errpath));
	cr_assert_eq(occurrences(errpath, "the spool has drained"), 1, "%s", hb_file_text(errpath));
	cr_assert_eq(occurrences(errpath, "for the next run"), 0, "%s", hb_file_text(errpath));
	cr_assert_eq(hb_count_files(spool, ".spool", NULL, 0), 0);
	cr_assert_eq(svc_stop(&a), 0);
}
