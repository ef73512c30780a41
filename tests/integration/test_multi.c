// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * One session for many targets (issue 17): every process of a unit is
 * profiled by one heapbpf process (no child heapbpf), each against its own
 * jemalloc dump; a target killed mid-run ends nothing else; a process whose
 * jemalloc heapbpf cannot use is refused with its reason while the others
 * are profiled. The unit is a real cgroup laid out as systemd lays it out
 * (as in test_fleet.c), the targets real example processes.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "harness.h"
#include "oracle.h"

#define IDLE_CONF "prof:true,prof_active:false"
#define CG2	  "/sys/fs/cgroup/unified"

static char cg_dir[PATH_MAX];
static bool cg_slice_made;
static pid_t spawned[8];
static int nspawned;

static void multi_fini(void)
{
	for (int i = 0; i < nspawned; i++) {
		if (spawned[i] <= 0)
			continue;
		kill(spawned[i], SIGKILL);
		hb_wait(spawned[i], 5000);
	}
	nspawned = 0;
	/* what a failed test left in the unit */
	hb_cgroup_drain(cg_dir);
	if (cg_slice_made && !rmdir(CG2 "/system.slice"))
		cg_slice_made = false;
	hb_tmpdir_cleanup();
}

TestSuite(multi, .fini = multi_fini, .timeout = 180);

/* The unit's cgroup, ROOT/system.slice/NAME.service, holding pids. */
static void make_unit(const char *name, const pid_t *pids, int n)
{
	char procs[PATH_MAX + 16];
	struct stat st;

	cr_assert_eq(stat(CG2 "/cgroup.procs", &st), 0, "no cgroup2 hierarchy at " CG2);
	if (mkdir(CG2 "/system.slice", 0755) == 0)
		cg_slice_made = true;
	else
		cr_assert_eq(errno, EEXIST, "mkdir " CG2 "/system.slice: %s", strerror(errno));
	snprintf(cg_dir, sizeof(cg_dir), CG2 "/system.slice/%s.service", name);
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

/* Processes whose parent is ppid (from /proc/PID/stat). */
static int children_of(pid_t ppid)
{
	struct dirent *de;
	DIR *d = opendir("/proc");
	int n = 0;

	cr_assert_not_null(d);
	while ((de = readdir(d))) {
		char path[300], buf[1024], *p;
		int parent = 0;
		FILE *f;

		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/stat", de->d_name);
		f = fopen(path, "re");
		if (!f)
			continue;
		if (fgets(buf, sizeof(buf), f) && (p = strrchr(buf, ')')) &&
		    sscanf(p + 2, "%*c %d", &parent) == 1 && parent == ppid)
			n++;
		fclose(f);
	}
	closedir(d);
	return n;
}

/* The snapshot of pid in dir ("...-PID-comm.EXT"), or "" when there is none. */
static const char *snapshot_of(const char *dir, pid_t pid, const char *ext, char *out, size_t len)
{
	char needle[32];
	struct dirent *de;
	DIR *d = opendir(dir);

	out[0] = '\0';
	if (!d)
		return out;
	snprintf(needle, sizeof(needle), "-%d-", pid);
	while ((de = readdir(d))) {
		size_t l = strlen(de->d_name), el = strlen(ext);

		if (strstr(de->d_name, needle) && l > el && !strcmp(de->d_name + l - el, ext))
			snprintf(out, len, "%s/%s", dir, de->d_name);
	}
	closedir(d);
	return out;
}

/* Waits until path holds needle (heapbpf said it), for at most 20 s. */
static void wait_for_line(const char *path, const char *needle)
{
	cr_assert(hb_wait_text(path, needle, 120000, 0), "heapbpf never said \"%s\"", needle);
}

static void start(struct svc *s, const char *bin, const char *conf, const char *const *env)
{
	const char *args[] = { "--threads", "1", "--rate", "0", NULL };

	cr_assert_eq(svc_start_env(s, bin, conf, env, args), 0, "cannot start %s", bin);
}

/*
 * A static and a shared-library target (two objects, one jemalloc layout),
 * and a third killed mid-run: one heapbpf process, each survivor's profile
 * equal to its own jemalloc dump, the killed one's collection written and
 * its state gone, exit 0.
 */
Test(multi, unit_in_one_process_each_exact_and_one_killed_mid_run)
{
	char conf[128], unit[64], errpath[PATH_MAX], out[PATH_MAX], cmd[3 * PATH_MAX];
	char reply[128], line[128], snap[PATH_MAX + 256], dump[2][PATH_MAX + 64];
	const char *env[] = { conf, NULL };
	const char *objs[2] = { hb_path("examples/alloc-service-static"),
				hb_path("jemalloc/libjemalloc.so.2") };
	struct svc a, b, k;
	struct svc *keep[2] = { &a, &b };
	pid_t pids[3], hp;
	uint64_t flag[3];
	uint8_t v;
	int rc;

	hb_require_bpf();
	snprintf(conf, sizeof(conf), "MALLOC_CONF=%s", HB_ORACLE_CONF);
	start(&a, hb_path("examples/alloc-service-static"), NULL, env);
	start(&b, hb_path("examples/alloc-service-shared"), NULL, env);
	start(&k, hb_path("examples/alloc-service-static"), IDLE_CONF, NULL);
	pids[0] = a.pid;
	pids[1] = b.pid;
	pids[2] = k.pid;
	cr_assert_eq(hb_sym_addr(a.pid, objs[0], "je_prof_active_state", &flag[0]), 0);
	cr_assert_eq(hb_sym_addr(b.pid, objs[1], "je_prof_active_state", &flag[1]), 0);
	cr_assert_eq(hb_sym_addr(k.pid, objs[0], "je_prof_active_state", &flag[2]), 0);
	snprintf(unit, sizeof(unit), "hbmulti-%d", getpid());
	make_unit(unit, pids, 3);
	snprintf(out, sizeof(out), "%s/snap", hb_tmpdir());
	snprintf(errpath, sizeof(errpath), "%s/heapbpf.err", hb_tmpdir());
	hp = hb_spawn((const char *[]){ hb_path("heapbpf"), "--unit", unit, "-d", "0", "--raw",
					"--output-dir", out, NULL },
		      errpath);
	for (int i = 0; i < 3; i++)
		cr_assert(hb_wait_byte(pids[i], flag[i], 1, 20000, hp), "heapbpf did not start");
	/* one heapbpf process for the three, no child heapbpf */
	cr_assert_eq(children_of(hp), 0, "heapbpf runs child processes");
	hb_sleep_ms(1500);
	kill(k.pid, SIGKILL);
	cr_assert_eq(hb_wait(k.pid, 10000), 128 + SIGKILL);
	snprintf(line, sizeof(line), "pid %d (alloc-service-s) exited", k.pid);
	wait_for_line(errpath, line);
	/* the others go on: still sampling, still one process */
	for (int i = 0; i < 2; i++)
		cr_assert(hb_wait_byte(pids[i], flag[i], 1, 1000, hp));
	cr_assert_eq(children_of(hp), 0);
	hb_sleep_ms(1500);
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(svc_cmd(keep[i], "pause", reply, sizeof(reply), 10000), 0);
		cr_assert_str_eq(reply, "paused");
	}
	kill(hp, SIGINT);
	rc = hb_wait(hp, 60000);
	cr_assert_eq(rc, 0, "heapbpf exited with %d (see %s)", rc, errpath);
	cr_assert(hb_file_has(errpath, "3 processes"));
	for (int i = 0; i < 2; i++) {
		int64_t n;

		cr_assert_eq(hb_peek(pids[i], flag[i], &v, 1), 0);
		cr_assert_eq(v, 0, "prof_active left on in pid %d", pids[i]);
		snprintf(dump[i], sizeof(dump[i]), "%s/je-%d.heap", hb_tmpdir(), pids[i]);
		snprintf(cmd, sizeof(cmd), "dump %s", dump[i]);
		cr_assert_eq(svc_cmd(keep[i], cmd, reply, sizeof(reply), 20000), 0);
		cr_assert_str_eq(reply, "dumped");
		cr_assert(snapshot_of(out, pids[i], ".pb.gz", snap, sizeof(snap))[0],
			  "no snapshot of pid %d", pids[i]);
		n = hb_oracle_compare_pid(snap, pids[i], dump[i], NULL);
		cr_assert_gt(n, 200, "pid %d: only %" PRId64 " samples compared", pids[i], n);
	}
	/* the killed one: what was collected until it died is written; no state is left */
	cr_assert(snapshot_of(out, k.pid, ".pb.gz", snap, sizeof(snap))[0],
		  "no snapshot of the killed pid %d", k.pid);
	snprintf(snap, sizeof(snap), "/run/heapbpf/%d.state", k.pid);
	cr_assert_neq(access(snap, F_OK), 0, "%s is left", snap);
	nspawned = 0;
	cr_assert_eq(svc_stop(&a), 0);
	cr_assert_eq(svc_stop(&b), 0);
}

/* A stripped copy of the example's shared jemalloc with no debug info anywhere: dir/libjemalloc.so.2. */
static void stripped_jemalloc(const char *dir)
{
	char cmd[3 * PATH_MAX];

	snprintf(cmd, sizeof(cmd),
		 "mkdir -p '%s' && strip --strip-all -o '%s/libjemalloc.so.2' '%s'", dir, dir,
		 hb_path("jemalloc/libjemalloc.so.2"));
	cr_assert_eq(system(cmd), 0, "%s", cmd);
}

/*
 * A process whose jemalloc heapbpf cannot use (stripped, its debug info
 * nowhere) is refused with its reason; the others are profiled in the same
 * run, and the run says it failed (exit 1).
 */
Test(multi, unusable_jemalloc_is_refused_and_the_others_profiled)
{
	char unit[64], lib[PATH_MAX], ld[PATH_MAX + 32], out[PATH_MAX], err[16384];
	char snap[PATH_MAX + 256], want[128];
	const char *env[] = { ld, NULL };
	const char *helper[] = { "/bin/sleep", "60", NULL };
	struct svc a, c, s;
	pid_t pids[4];

	hb_require_bpf();
	snprintf(lib, sizeof(lib), "%s/lib", hb_tmpdir());
	stripped_jemalloc(lib);
	snprintf(ld, sizeof(ld), "LD_LIBRARY_PATH=%s", lib);
	start(&a, hb_path("examples/alloc-service-static"), IDLE_CONF, NULL);
	start(&c, hb_path("examples/alloc-service-static"), IDLE_CONF, NULL);
	start(&s, hb_path("examples/alloc-service-shared"), IDLE_CONF, env);
	pids[0] = a.pid;
	pids[1] = c.pid;
	pids[2] = s.pid;
	/* a helper without jemalloc is skipped, as before */
	pids[3] = spawned[nspawned++] = hb_spawn(helper, NULL);
	snprintf(unit, sizeof(unit), "hbmultiref-%d", getpid());
	make_unit(unit, pids, 4);
	snprintf(out, sizeof(out), "%s/snap", hb_tmpdir());
	{
		const char *args[] = { "--unit", unit, "-d", "2", "--output-dir", out, NULL };

		cr_assert_eq(hb_run(args, err, sizeof(err), 90000), 1, "%s", err);
	}
	snprintf(want, sizeof(want), "refused: jemalloc in pid %d", s.pid);
	cr_assert(strstr(err, want), "%s", err);
	cr_assert(strstr(err, "stripped"), "%s", err);
	cr_assert(strstr(err, "2 processes"), "%s", err);
	cr_assert(snapshot_of(out, a.pid, ".pb.gz", snap, sizeof(snap))[0], "%s", err);
	cr_assert(snapshot_of(out, c.pid, ".pb.gz", snap, sizeof(snap))[0], "%s", err);
	cr_assert_eq(snapshot_of(out, s.pid, ".pb.gz", snap, sizeof(snap))[0], '\0', "%s", err);
	cr_assert_eq(svc_stop(&a), 0);
	cr_assert_eq(svc_stop(&c), 0);
	cr_assert_eq(svc_stop(&s), 0);
}

/*
 * heapbpf killed -9 while it samples a unit of three: each target's flag is
 * left on, with its own state file; the next run over the unit restores
 * every one of them, says so, and profiles them.
 */
Test(multi, kill_9_of_a_unit_run_is_recovered_by_the_next_run)
{
	char unit[64], errpath[PATH_MAX], out[PATH_MAX], err[16384], want[160];
	char state[PATH_MAX];
	struct svc s[3];
	pid_t pids[3], hp;
	uint64_t flag[3];
	uint8_t v;

	hb_require_bpf();
	for (int i = 0; i < 3; i++) {
		start(&s[i], hb_path("examples/alloc-service-static"), IDLE_CONF, NULL);
		pids[i] = s[i].pid;
		cr_assert_eq(hb_sym_addr(pids[i], hb_path("examples/alloc-service-static"),
					 "je_prof_active_state", &flag[i]),
			     0);
	}
	snprintf(unit, sizeof(unit), "hbmultik9-%d", getpid());
	make_unit(unit, pids, 3);
	snprintf(out, sizeof(out), "%s/snap", hb_tmpdir());
	snprintf(errpath, sizeof(errpath), "%s/heapbpf.err", hb_tmpdir());
	hp = hb_spawn((const char *[]){ hb_path("heapbpf"), "--unit", unit, "-d", "0",
					"--output-dir", out, NULL },
		      errpath);
	for (int i = 0; i < 3; i++)
		cr_assert(hb_wait_byte(pids[i], flag[i], 1, 20000, hp), "heapbpf did not start");
	kill(hp, SIGKILL);
	cr_assert_eq(hb_wait(hp, 10000), 128 + SIGKILL);
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(hb_peek(pids[i], flag[i], &v, 1), 0);
		cr_assert_eq(v, 1, "pid %d: the flag went off without a restore", pids[i]);
		snprintf(state, sizeof(state), "/run/heapbpf/%d.state", pids[i]);
		cr_assert_eq(access(state, F_OK), 0, "no state file for pid %d", pids[i]);
	}
	{
		const char *args[] = { "--unit", unit, "-d", "1", "--output-dir", out, NULL };

		cr_assert_eq(hb_run(args, err, sizeof(err), 90000), 0, "%s", err);
	}
	for (int i = 0; i < 3; i++) {
		snprintf(want, sizeof(want), "restored prof_active in pid %d, left on by a heapbpf",
			 pids[i]);
		cr_assert(strstr(err, want), "%s", err);
		cr_assert_eq(hb_peek(pids[i], flag[i], &v, 1), 0);
		cr_assert_eq(v, 0, "prof_active left on in pid %d", pids[i]);
		snprintf(state, sizeof(state), "/run/heapbpf/%d.state", pids[i]);
		cr_assert_neq(access(state, F_OK), 0, "%s is left", state);
		cr_assert_eq(svc_stop(&s[i]), 0);
	}
}

/*
 * --follow-forks in a unit of two (one session, uprobes per object file): a
 * child forked by one target is followed under its own pid in its parent's
 * profile, not in the other target's, and its flag goes back off.
 */
Test(multi, follow_forks_in_a_unit_of_two)
{
	char unit[64], errpath[PATH_MAX], out[PATH_MAX], reply[64], snap[PATH_MAX + 256];
	char root[32];
	struct svc a, b;
	pid_t pids[2], hp, child = 0;
	uint64_t flag[2];
	uint8_t v;
	int rc;

	hb_require_bpf();
	start(&a, hb_path("examples/alloc-service-static"), IDLE_CONF, NULL);
	start(&b, hb_path("examples/alloc-service-static"), IDLE_CONF, NULL);
	pids[0] = a.pid;
	pids[1] = b.pid;
	for (int i = 0; i < 2; i++)
		cr_assert_eq(hb_sym_addr(pids[i], hb_path("examples/alloc-service-static"),
					 "je_prof_active_state", &flag[i]),
			     0);
	snprintf(unit, sizeof(unit), "hbmultiff-%d", getpid());
	make_unit(unit, pids, 2);
	snprintf(out, sizeof(out), "%s/snap", hb_tmpdir());
	snprintf(errpath, sizeof(errpath), "%s/heapbpf.err", hb_tmpdir());
	hp = hb_spawn((const char *[]){ hb_path("heapbpf"), "--unit", unit, "-d", "0",
					"--follow-forks", "--output-dir", out, "-f", "folded", "-t",
					"alloc_space", NULL },
		      errpath);
	for (int i = 0; i < 2; i++)
		cr_assert(hb_wait_byte(pids[i], flag[i], 1, 20000, hp), "heapbpf did not start");
	cr_assert_eq(svc_cmd(&a, "fork 30", reply, sizeof(reply), 10000), 0);
	cr_assert_eq(sscanf(reply, "forked %d", &child), 1, "%s", reply);
	spawned[nspawned++] = child;
	snprintf(root, sizeof(root), "following pid %d (forked from %d)", child, a.pid);
	wait_for_line(errpath, root);
	/* the child frees what it allocates: its allocations, not its in-use, show it */
	hb_sleep_ms(3000);
	kill(hp, SIGTERM);
	rc = hb_wait(hp, 60000);
	cr_assert_eq(rc, 0, "heapbpf exited with %d (see %s)", rc, errpath);
	cr_assert_eq(hb_peek(child, flag[0], &v, 1), 0);
	cr_assert_eq(v, 0, "the forked child still samples");
	snprintf(root, sizeof(root), "pid %d;", child);
	cr_assert(snapshot_of(out, a.pid, ".folded", snap, sizeof(snap))[0]);
	cr_assert(hb_file_has(snap, root), "no stack of the child in %s", snap);
	cr_assert(snapshot_of(out, b.pid, ".folded", snap, sizeof(snap))[0]);
	cr_assert_not(hb_file_has(snap, root), "the child's stacks in the other target's %s", snap);
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(hb_peek(pids[i], flag[i], &v, 1), 0);
		cr_assert_eq(v, 0);
	}
	cr_assert_eq(svc_stop(&a), 0);
	cr_assert_eq(svc_stop(&b), 0);
}

/*
 * A followed child that exits leaves the session at once: its pid leaves the
 * maps that admit a process's samples (in a session of several targets the
 * uprobes serve every process mapping the object), so a process that gets
 * that pid next, here a child forked by another instance of the service with
 * sampling on, adds nothing to the child's profile, which stays equal to the
 * child's own jemalloc dump.
 */
/*
 * Serial (scripts/run-tests.sh): the kernel's last pid is the machine's, and
 * a test beside it that cleans up by pid could meet a reused one.
 */
TestSuite(multi_pidreuse, .fini = multi_fini, .timeout = 180);

Test(multi_pidreuse, followed_child_exit_frees_its_pid)
{
	char conf[128], other_conf[128], errpath[PATH_MAX], out[PATH_MAX], dump[PATH_MAX + 32];
	char reply[128], line[128], list[64], snap[PATH_MAX + 256], cmd[PATH_MAX + 16];
	const char *env[] = { conf, NULL }, *other_env[] = { other_conf, NULL };
	const char *args[] = { "--threads", "1", "--rate", "0", NULL };
	const char *bin = hb_path("examples/alloc-service-static");
	struct svc a, b, other;
	pid_t hp, child, impostor = 0;
	uint64_t flag, rounds = 0, done;
	uint8_t v;
	int kid;
	int64_t n;
	int rc, tries;

	hb_require_bpf();
	snprintf(conf, sizeof(conf), "MALLOC_CONF=%s", HB_ORACLE_CONF);
	snprintf(other_conf, sizeof(other_conf), "MALLOC_CONF=prof:true,prof_active:true");
	/* a and the other instance at the same addresses: its samples read as the child's */
	cr_assert_eq(svc_start_opts(&a, bin, &(struct svc_opts){ .env = env, .no_aslr = true },
				    args),
		     0);
	start(&b, bin, IDLE_CONF, NULL);
	snprintf(list, sizeof(list), "%d,%d", a.pid, b.pid);
	snprintf(out, sizeof(out), "%s/snap", hb_tmpdir());
	snprintf(errpath, sizeof(errpath), "%s/heapbpf.err", hb_tmpdir());
	hp = hb_spawn((const char *[]){ hb_path("heapbpf"), "--pid", list, "-d", "0", "--raw",
					"--follow-forks", "--output-dir", out, NULL },
		      errpath);
	spawned[nspawned++] = hp;
	cr_assert_eq(hb_sym_addr(a.pid, bin, "je_prof_active_state", &flag), 0);
	cr_assert(hb_wait_byte(a.pid, flag, 1, 20000, hp), "heapbpf did not start");
	/*
	 * A child of a's that allocates from SIGUSR1 to SIGUSR2, dumps, and exits
	 * after 4 s. Once heapbpf says it heard of the exit, another instance of
	 * the service is started as that pid (clone3's set_tid). A fork elsewhere
	 * on the machine may take the freed pid first (another test's thousands
	 * of forks wrap pid_max): then a new child goes through the same.
	 */
	for (tries = 1;; tries++) {
		snprintf(cmd, sizeof(cmd), "forkw 4 %s", hb_tmpdir());
		cr_assert_eq(svc_cmd(&a, cmd, reply, sizeof(reply), 10000), 0);
		cr_assert_eq(sscanf(reply, "forked %d", &child), 1, "%s", reply);
		kid = nspawned;
		spawned[nspawned++] = child;
		snprintf(line, sizeof(line), "following pid %d (forked from %d)", child, a.pid);
		wait_for_line(errpath, line);
		kill(child, SIGUSR1);
		/* 2000 rounds of 64 allocations, what 2 s gave on a quiet machine, however slow */
		if (!rounds)
			cr_assert_eq(hb_sym_addr(child, bin, "forked_child_rounds", &rounds), 0);
		done = hb_wait_count(child, rounds, 2000, 600000);
		cr_assert_geq(done, 2000, "the child did %llu rounds", (unsigned long long)done);
		kill(child, SIGUSR2);
		snprintf(dump, sizeof(dump), "%s/child-%d.heap.done", hb_tmpdir(), child);
		cr_assert(hb_wait_file(dump, 120000), "the child wrote no dump");
		cr_assert(hb_wait_reaped(child, 60000), "the child %d was not reaped", child);
		spawned[kid] = 0; /* its pid may be anyone's next */
		snprintf(line, sizeof(line), "followed pid %d exited", child);
		wait_for_line(errpath, line);
		rc = svc_start_opts(
			&other, bin,
			&(struct svc_opts){ .env = other_env, .no_aslr = true, .pid = child },
			args);
		if (!hb_freed_pid_taken(rc, tries))
			break;
	}
	impostor = other.pid;
	spawned[nspawned++] = impostor;
	/* at a's addresses, sampling: its samples would read as the child's */
	cr_assert_eq(hb_peek(impostor, flag, &v, 1), 0);
	cr_assert_eq(v, 1, "the impostor does not sample at a's flag address: shows nothing");
	/* it samples under that pid for a while, through the same uprobes */
	hb_sleep_ms(1500);
	kill(hp, SIGTERM);
	rc = hb_wait(hp, 60000);
	cr_assert_eq(rc, 0, "heapbpf exited with %d (see %s)", rc, errpath);
	cr_assert(snapshot_of(out, a.pid, ".pb.gz", snap, sizeof(snap))[0]);
	snprintf(dump, sizeof(dump), "%s/child-%d.heap", hb_tmpdir(), child);
	n = hb_oracle_compare_child(snap, child, a.pid, dump, "forked_child");
	cr_assert_gt(n, 50, "only %ld samples of the child compared", (long)n);
	snprintf(line, sizeof(line), "followed pid %d exited", child);
	cr_assert(hb_file_has(errpath, line), "heapbpf did not say \"%s\"", line);
	cr_assert_eq(svc_stop(&other), 0);
	cr_assert_eq(svc_stop(&a), 0);
	cr_assert_eq(svc_stop(&b), 0);
}

/*
 * --pid N,N,N: one session for the list; a named pid
 * without jemalloc is refused with its reason (not skipped, as a unit's
 * helper is), the others profiled, exit 1; -o refuses a list (exit 2).
 */
Test(multi, pid_list_is_one_session_and_refuses_what_it_cannot_profile)
{
	char list[64], out[PATH_MAX], err[16384], snap[PATH_MAX + 256], want[96];
	const char *helper[] = { "/bin/sleep", "60", NULL };
	struct svc a, b;
	pid_t s;

	hb_require_bpf();
	start(&a, hb_path("examples/alloc-service-static"), IDLE_CONF, NULL);
	start(&b, hb_path("examples/alloc-service-static"), IDLE_CONF, NULL);
	s = spawned[nspawned++] = hb_spawn(helper, NULL);
	snprintf(list, sizeof(list), "%d,%d,%d", a.pid, s, b.pid);
	snprintf(out, sizeof(out), "%s/snap", hb_tmpdir());
	{
		const char *args[] = { "--pid", list, "-d", "1", "--output-dir", out, NULL };

		cr_assert_eq(hb_run(args, err, sizeof(err), 90000), 1, "%s", err);
	}
	snprintf(want, sizeof(want), "refused: pid %d (sleep) does not use jemalloc", s);
	cr_assert(strstr(err, want), "%s", err);
	cr_assert(strstr(err, "the --pid list: 2 processes"), "%s", err);
	cr_assert(snapshot_of(out, a.pid, ".pb.gz", snap, sizeof(snap))[0], "%s", err);
	cr_assert(snapshot_of(out, b.pid, ".pb.gz", snap, sizeof(snap))[0], "%s", err);
	snprintf(list, sizeof(list), "%d,%d", a.pid, b.pid);
	{
		const char *args[] = { "--pid", list, "-d", "1", "-o", out, NULL };

		/* a usage error, known from the command line alone */
		cr_assert_eq(hb_run(args, err, sizeof(err), 30000), 2, "%s", err);
		cr_assert(strstr(err, "names one file"), "%s", err);
	}
	cr_assert_eq(svc_stop(&a), 0);
	cr_assert_eq(svc_stop(&b), 0);
}

/*
 * A target refused at the start (its flag holds no boolean) that exits later
 * does not end the session: the other one goes on sampling until stopped,
 * is written, and its flag goes back off; exit 1 for the refusal.
 */
Test(multi, refused_target_exiting_leaves_the_others_sampling)
{
	char list[64], out[PATH_MAX], errpath[PATH_MAX], snap[PATH_MAX + 256], mem[64];
	const char *obj = hb_path("examples/alloc-service-static");
	uint64_t flag[2];
	uint8_t two = 2, v;
	struct svc a, c;
	pid_t hp;
	int st, fd;

	hb_require_bpf();
	start(&a, obj, IDLE_CONF, NULL);
	start(&c, obj, IDLE_CONF, NULL);
	cr_assert_eq(hb_sym_addr(a.pid, obj, "je_prof_active_state", &flag[0]), 0);
	cr_assert_eq(hb_sym_addr(c.pid, obj, "je_prof_active_state", &flag[1]), 0);
	snprintf(mem, sizeof(mem), "/proc/%d/mem", c.pid);
	fd = open(mem, O_WRONLY);
	cr_assert_geq(fd, 0);
	cr_assert_eq(pwrite(fd, &two, 1, (off_t)flag[1]), 1);
	close(fd);
	snprintf(list, sizeof(list), "%d,%d", a.pid, c.pid);
	snprintf(out, sizeof(out), "%s/snap", hb_tmpdir());
	snprintf(errpath, sizeof(errpath), "%s/heapbpf.err", hb_tmpdir());
	hp = hb_spawn((const char *[]){ hb_path("heapbpf"), "--pid", list, "-d", "0", "-f",
					"folded", "--output-dir", out, NULL },
		      errpath);
	cr_assert(hb_wait_byte(a.pid, flag[0], 1, 20000, hp), "heapbpf did not start");
	wait_for_line(errpath, "profiling the other targets");
	kill(c.pid, SIGKILL);
	cr_assert_eq(hb_wait(c.pid, 10000), 128 + SIGKILL);
	/* the refused one's exit is seen at once; the session must still be on after it */
	hb_sleep_ms(1500);
	cr_assert_eq(waitpid(hp, &st, WNOHANG), 0,
		     "heapbpf stopped when the refused target exited");
	cr_assert(hb_wait_byte(a.pid, flag[0], 1, 1000, hp), "sampling stopped in pid %d", a.pid);
	kill(hp, SIGINT);
	cr_assert_eq(hb_wait(hp, 60000), 1, "see %s", errpath);
	cr_assert_eq(hb_peek(a.pid, flag[0], &v, 1), 0);
	cr_assert_eq(v, 0, "prof_active left on in pid %d", a.pid);
	cr_assert(snapshot_of(out, a.pid, ".folded", snap, sizeof(snap))[0], "no snapshot of %d",
		  a.pid);
	cr_assert_eq(svc_stop(&a), 0);
}

/*
 * With several targets the uprobes sit on the object file, so every process
 * running it traps into the programs: one that is not a target, sampling
 * at full speed, must be dropped by BPF's pid filter, not reach user space.
 * The targets are paused: the BPF side's own count of allocation hits stays
 * near zero while the outsider samples thousands of times.
 */
Test(multi, process_outside_the_targets_is_filtered_in_bpf)
{
	char list[64], out[PATH_MAX], reply[128];
	static char err[1 << 20]; /* -v: libbpf says much before heapbpf does */
	const char *obj = hb_path("examples/alloc-service-static");
	struct svc a, b, c;
	uint64_t before, hits = 0;
	int rc, lines = 0;

	hb_require_bpf();
	start(&a, obj, IDLE_CONF, NULL);
	start(&b, obj, IDLE_CONF, NULL);
	cr_assert_eq(svc_cmd(&a, "pause", reply, sizeof(reply), 10000), 0);
	cr_assert_eq(svc_cmd(&b, "pause", reply, sizeof(reply), 10000), 0);
	start(&c, obj, "prof:true,prof_active:true", NULL);
	before = svc_allocs(&c);
	snprintf(list, sizeof(list), "%d,%d", a.pid, b.pid);
	snprintf(out, sizeof(out), "%s/snap", hb_tmpdir());
	{
		const char *args[] = { "--pid", list,	  "-d",		  "2", "-v",
				       "-f",	"folded", "--output-dir", out, NULL };

		rc = hb_run(args, err, sizeof(err), 90000);
	}
	/* the outsider allocated all along: at R = 512 KiB, thousands of samples */
	cr_assert_gt(svc_allocs(&c) - before, 100000, "the outsider did not run");
	/* the paused targets sampled nothing: exit 3 */
	cr_assert_eq(rc, 3, "exit %d: %s", rc, err);
	for (const char *at = err; (at = strstr(at, "uprobe hits: ")); at++, lines++)
		hits += strtoull(at + strlen("uprobe hits: "), NULL, 10);
	cr_assert_gt(lines, 0, "no count of uprobe hits: %s", err);
	cr_assert_lt(hits, 10, "%" PRIu64 " allocation hits reached the ring buffer: %s", hits,
		     err);
	cr_assert_eq(svc_stop(&c), 0);
	cr_assert_eq(svc_stop(&a), 0);
	cr_assert_eq(svc_stop(&b), 0);
}

/*
 * A unit whose processes carry two jemalloc layouts (Debian's release
 * build and a --enable-debug one, whose prof_info_t differs): a session,
 * and a heapbpf process, per layout; every process profiled, every flag
 * back off. In the versions suite: it needs the jemalloc fixtures.
 */
Test(versions, unit_of_two_jemalloc_layouts_runs_a_session_each, .fini = multi_fini)
{
	const char *dir = getenv("HEAPBPF_FIXTURES");
	char debug_bin[PATH_MAX], unit[64], errpath[PATH_MAX], out[PATH_MAX], snap[PATH_MAX + 256];
	const char *bins[3];
	struct svc s[3];
	pid_t pids[3], hp;
	uint64_t flag[3];
	uint8_t v;
	int rc;

	hb_require_bpf();
	snprintf(debug_bin, sizeof(debug_bin), "%s/bin/debug530-static",
		 dir && dir[0] ? dir : hb_path("fixtures"));
	cr_assert_eq(access(debug_bin, X_OK), 0, "fixture %s is missing: make test builds it",
		     debug_bin);
	bins[0] = bins[1] = hb_path("examples/alloc-service-static");
	bins[2] = debug_bin;
	for (int i = 0; i < 3; i++) {
		start(&s[i], bins[i], IDLE_CONF, NULL);
		pids[i] = s[i].pid;
		cr_assert_eq(hb_sym_addr(pids[i], bins[i], "je_prof_active_state", &flag[i]), 0);
	}
	snprintf(unit, sizeof(unit), "hbmultilay-%d", getpid());
	make_unit(unit, pids, 3);
	snprintf(out, sizeof(out), "%s/snap", hb_tmpdir());
	snprintf(errpath, sizeof(errpath), "%s/heapbpf.err", hb_tmpdir());
	hp = hb_spawn((const char *[]){ hb_path("heapbpf"), "--unit", unit, "-d", "0",
					"--output-dir", out, NULL },
		      errpath);
	for (int i = 0; i < 3; i++)
		cr_assert(hb_wait_byte(pids[i], flag[i], 1, 20000, hp), "heapbpf did not start");
	/* one heapbpf per layout, under the one that was started */
	cr_assert_eq(children_of(hp), 2);
	cr_assert(hb_file_has(errpath, "2 jemalloc layouts among them"));
	hb_sleep_ms(1000);
	kill(hp, SIGINT);
	rc = hb_wait(hp, 60000);
	cr_assert_eq(rc, 0, "heapbpf exited with %d (see %s)", rc, errpath);
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(hb_peek(pids[i], flag[i], &v, 1), 0);
		cr_assert_eq(v, 0, "prof_active left on in pid %d", pids[i]);
		cr_assert(snapshot_of(out, pids[i], ".pb.gz", snap, sizeof(snap))[0],
			  "no snapshot of pid %d", pids[i]);
		cr_assert_eq(svc_stop(&s[i]), 0);
	}
}

/* An idle service: no worker thread, nothing allocated until a command says so. */
static void start_idle(struct svc *s)
{
	const char *args[] = { "--threads", "0", NULL };

	cr_assert_eq(svc_start(s, hb_path("examples/alloc-service-static"), IDLE_CONF, args), 0);
}

/* Waits until the file at path exists (a forked child's marker), or fails. */
static void wait_for_file(const char *path)
{
	for (int t = 0; t < 2400 && access(path, F_OK); t++)
		hb_sleep_ms(50);
	cr_assert_eq(access(path, F_OK), 0, "%s never appeared", path);
}

/*
 * --children (issue 25): the pid file names a manager that allocates
 * nothing, whose child, forked before heapbpf starts, holds the heap. Without
 * --children nothing is sampled: exit 3, and the hint names the child. With
 * it, the child is a target of its own: its summary lines name it, its
 * profile holds its allocations, its flag goes back off, and the run, which
 * sampled, exits 0.
 */
Test(multi, children_of_the_pidfile_process_are_profiled_with_children)
{
	char pidfile[PATH_MAX], errpath[PATH_MAX], out[PATH_MAX], reply[128], cmd[PATH_MAX + 32];
	char want[160], snap[PATH_MAX + 256], marker[PATH_MAX + 32], err[16384];
	const char *bin = hb_path("examples/alloc-service-static");
	struct svc m;
	pid_t child, hp;
	uint64_t flag;
	uint8_t v;
	FILE *f;
	int rc, kid;

	hb_require_bpf();
	start_idle(&m);
	/* a child that waits for SIGUSR1, then holds 16 MiB in 1 MiB blocks */
	snprintf(cmd, sizeof(cmd), "forkhold 16 %s", hb_tmpdir());
	cr_assert_eq(svc_cmd(&m, cmd, reply, sizeof(reply), 10000), 0);
	cr_assert_eq(sscanf(reply, "forked %d", &child), 1, "%s", reply);
	kid = nspawned;
	spawned[nspawned++] = child;
	snprintf(pidfile, sizeof(pidfile), "%s/manager.pid", hb_tmpdir());
	f = fopen(pidfile, "we");
	cr_assert_not_null(f);
	fprintf(f, "%d\n", m.pid);
	cr_assert_eq(fclose(f), 0);
	chmod(pidfile, 0644);
	snprintf(out, sizeof(out), "%s/snap", hb_tmpdir());
	{
		const char *args[] = { "--pidfile", pidfile, "-d", "1", "--output-dir", out, NULL };

		cr_assert_eq(hb_run(args, err, sizeof(err), 90000), 3, "%s", err);
	}
	snprintf(want, sizeof(want), "pid %d has children (%d); --children profiles them too",
		 m.pid, child);
	cr_assert(strstr(err, want), "%s", err);

	cr_assert_eq(hb_sym_addr(child, bin, "je_prof_active_state", &flag), 0);
	snprintf(errpath, sizeof(errpath), "%s/heapbpf.err", hb_tmpdir());
	hp = hb_spawn((const char *[]){ hb_path("heapbpf"), "--pidfile", pidfile, "--children",
					"-d", "0", "-f", "folded", "--output-dir", out, NULL },
		      errpath);
	spawned[nspawned++] = hp;
	cr_assert(hb_wait_byte(child, flag, 1, 20000, hp), "heapbpf did not start in the child");
	kill(child, SIGUSR1);
	snprintf(marker, sizeof(marker), "%s/child-%d.held", hb_tmpdir(), child);
	wait_for_file(marker);
	kill(hp, SIGINT);
	rc = hb_wait(hp, 60000);
	spawned[nspawned - 1] = 0;
	cr_assert_eq(rc, 0, "heapbpf exited with %d (see %s)", rc, errpath);
	snprintf(want, sizeof(want), "pid %d with its children: 2 processes", m.pid);
	cr_assert(hb_file_has(errpath, want), "see %s", errpath);
	snprintf(want, sizeof(want), "heapbpf: pid %d (alloc-service-s): 0 samples, ", m.pid);
	cr_assert(hb_file_has(errpath, want), "see %s", errpath);
	snprintf(want, sizeof(want), "heapbpf: pid %d (alloc-service-s): top sites by", child);
	cr_assert(hb_file_has(errpath, want), "see %s", errpath);
	cr_assert_not(hb_file_has(errpath, "--children profiles them too"), "see %s", errpath);
	cr_assert(snapshot_of(out, child, ".folded", snap, sizeof(snap))[0], "no snapshot of %d",
		  child);
	cr_assert(hb_file_has(snap, "child_held_buffers"), "the child's heap is not in %s", snap);
	cr_assert_eq(hb_peek(child, flag, &v, 1), 0);
	cr_assert_eq(v, 0, "prof_active left on in the child %d", child);
	/* the child frees and exits */
	kill(child, SIGUSR2);
	snprintf(marker, sizeof(marker), "%s/child-%d.freed", hb_tmpdir(), child);
	wait_for_file(marker);
	spawned[kid] = 0;
	cr_assert_eq(svc_stop(&m), 0);
}

/* The line of text that starts with prefix (after a newline), or NULL. */
static const char *line_starting(const char *text, const char *prefix)
{
	char want[256];

	snprintf(want, sizeof(want), "\n%s", prefix);
	return strstr(text, want);
}

/*
 * Several targets (--pid A,B): every line of each target's summary names
 * its pid and comm, so that "N samples" and the sparklines say whose they
 * are; no summary line goes without.
 */
Test(multi, pid_list_summary_lines_name_their_pid)
{
	static const char *const words[] = { "top sites by in-use bytes", "in use over ",
					     "allocated per second", "peak in use ", "wrote " };
	char list[64], out[PATH_MAX], errpath[PATH_MAX], want[192];
	const char *obj = hb_path("examples/alloc-service-static");
	unsigned long long n;
	char *text = NULL;
	struct svc s[2];
	uint64_t flag[2], before[2];
	pid_t hp;
	int rc;

	hb_require_bpf();
	for (int i = 0; i < 2; i++) {
		start(&s[i], obj, IDLE_CONF, NULL);
		cr_assert_eq(hb_sym_addr(s[i].pid, obj, "je_prof_active_state", &flag[i]), 0);
	}
	snprintf(list, sizeof(list), "%d,%d", s[0].pid, s[1].pid);
	snprintf(out, sizeof(out), "%s/snap", hb_tmpdir());
	snprintf(errpath, sizeof(errpath), "%s/heapbpf.err", hb_tmpdir());
	hp = hb_spawn((const char *[]){ hb_path("heapbpf"), "--pid", list, "-d", "0",
					"--output-dir", out, NULL },
		      errpath);
	spawned[nspawned++] = hp;
	for (int i = 0; i < 2; i++) {
		cr_assert(hb_wait_byte(s[i].pid, flag[i], 1, 20000, hp), "heapbpf did not start");
		before[i] = svc_allocs(&s[i]);
	}
	/* with sampling on, each allocates enough for many samples and checkpoints */
	for (int i = 0; i < 2; i++) {
		for (int t = 0; t < 2400 && svc_allocs(&s[i]) - before[i] < 1000000; t++)
			hb_sleep_ms(50);
		cr_assert_geq(svc_allocs(&s[i]) - before[i], 1000000, "pid %d did not run",
			      s[i].pid);
	}
	kill(hp, SIGINT);
	rc = hb_wait(hp, 60000);
	spawned[nspawned - 1] = 0;
	cr_assert_eq(rc, 0, "heapbpf exited with %d (see %s)", rc, errpath);
	cr_assert_gt(hb_read_file(errpath, &text), 0);
	for (int i = 0; i < 2; i++) {
		const char *at = text;

		snprintf(want, sizeof(want), "heapbpf: pid %d (alloc-service-s): ", s[i].pid);
		n = 0;
		while ((at = line_starting(at, want)) &&
		       sscanf(at + 1 + strlen(want), "%llu samples, ", &n) != 1)
			at++;
		cr_assert(at && n > 0, "no line \"%sN samples, ...\" in:\n%s", want, text);
		for (size_t k = 0; k < sizeof(words) / sizeof(words[0]); k++) {
			snprintf(want, sizeof(want), "heapbpf: pid %d (alloc-service-s): %s",
				 s[i].pid, words[k]);
			cr_assert(line_starting(text, want), "no line \"%s\" in:\n%s", want, text);
		}
	}
	/* no summary line that does not say whose it is */
	for (const char *at = text; (at = strstr(at, "heapbpf: ")); at++) {
		cr_assert_neq(sscanf(at, "heapbpf: %llu samples, ", &n), 1, "%s", text);
		for (size_t k = 0; k < sizeof(words) / sizeof(words[0]); k++)
			cr_assert_neq(strncmp(at + 9, words[k], strlen(words[k])), 0, "%s", text);
	}
	free(text);
	for (int i = 0; i < 2; i++)
		cr_assert_eq(svc_stop(&s[i]), 0);
}
