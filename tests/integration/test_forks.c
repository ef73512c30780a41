// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A fork never leaves a child sampling: every process forked from the target
 * while heapbpf had prof_active on (children and grandchildren) gets its copy
 * of the flag switched back, on every way out; a child that called exec has
 * a jemalloc of its own and is left alone. Flags are read from the processes'
 * memory at addresses found with nm, not with heapbpf's code.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include <bpf/bpf.h>
#include <linux/types.h>

#include "heapbpf.h"

#include "harness.h"
#include "oracle.h"

#define IDLE_CONF "prof:true,prof_active:false"

struct fk {
	struct svc s;
	const char *bin;
	uint64_t flag;
	char pid[16], out[PATH_MAX], err[PATH_MAX];
	pid_t hp;
	pid_t kids[2];
};

/* What a failed test would leave running: killed when the test ends, however it ends. */
static pid_t leftovers[8];

static void remember(pid_t pid)
{
	for (size_t i = 0; i < sizeof(leftovers) / sizeof(leftovers[0]); i++) {
		if (!leftovers[i]) {
			leftovers[i] = pid;
			return;
		}
	}
}

/* A remembered child that exited: its pid may be anyone's next. */
static void forget(pid_t pid)
{
	for (size_t i = 0; i < sizeof(leftovers) / sizeof(leftovers[0]); i++) {
		if (leftovers[i] == pid)
			leftovers[i] = 0;
	}
}

static void forks_fini(void)
{
	for (size_t i = 0; i < sizeof(leftovers) / sizeof(leftovers[0]); i++) {
		if (leftovers[i] > 0)
			kill(leftovers[i], SIGKILL);
	}
	hb_tmpdir_cleanup();
}

static uint8_t flag_of(pid_t pid, uint64_t addr)
{
	uint8_t b = 0xff;

	cr_assert_eq(hb_peek(pid, addr, &b, 1), 0, "cannot read pid %d", pid);
	return b;
}

static void start(struct fk *f, const char *duration)
{
	const char *args[] = { "--threads", "2", NULL };

	hb_require_bpf();
	memset(f, 0, sizeof(*f));
	f->bin = hb_path("examples/alloc-service-static");
	cr_assert_eq(svc_start(&f->s, f->bin, IDLE_CONF, args), 0);
	cr_assert_eq(hb_sym_addr(f->s.pid, f->bin, "je_prof_active_state", &f->flag), 0);
	snprintf(f->pid, sizeof(f->pid), "%d", f->s.pid);
	snprintf(f->out, sizeof(f->out), "%s/out.pb.gz", hb_tmpdir());
	snprintf(f->err, sizeof(f->err), "%s/heapbpf.err", hb_tmpdir());
	f->hp = hb_spawn((const char *[]){ hb_path("heapbpf"), "--pid", f->pid, "-d", duration,
					   "-o", f->out, NULL },
			 f->err);
	cr_assert_gt(f->hp, 0);
	cr_assert(hb_wait_switched(f->s.pid, f->flag, 1, f->hp),
		  "heapbpf did not switch prof_active on");
}

/* "fork" or "fork2" in the target; the child (and grandchild) pids, inheriting the flag on. */
static void fork_in_target(struct fk *f, const char *cmd)
{
	char reply[128];
	int n;

	cr_assert_eq(svc_cmd(&f->s, cmd, reply, sizeof(reply), 10000), 0);
	n = sscanf(reply, "forked %d %d", &f->kids[0], &f->kids[1]);
	cr_assert_geq(n, 1, "%s: %s", cmd, reply);
	for (int i = 0; i < n; i++)
		remember(f->kids[i]);
	for (int i = 0; i < n; i++)
		cr_assert_eq(flag_of(f->kids[i], f->flag), 1,
			     "the child did not inherit prof_active on: the test shows nothing");
}

static void end_kids(struct fk *f)
{
	for (int i = 0; i < 2; i++) {
		if (f->kids[i] > 0)
			kill(f->kids[i], SIGKILL);
	}
}

static char *stderr_of(struct fk *f)
{
	char *text;

	cr_assert_geq(hb_read_file(f->err, &text), 0);
	return text;
}

/* SIGINT to heapbpf: it exits 0, else the test fails with what it said. */
static void stop_heapbpf(struct fk *f)
{
	int rc;
	char *text;

	kill(f->hp, SIGINT);
	rc = hb_wait(f->hp, 30000);
	if (rc) {
		text = stderr_of(f);
		cr_assert_fail("heapbpf exited with %d:\n%s", rc, text);
	}
}

/*
 * Waits until heapbpf's state file for the target lists child: heapbpf has
 * handled its fork, and every fork before it (one ring buffer, in order).
 */
static void wait_listed(const struct fk *f, pid_t child)
{
	const char *dir = getenv("HEAPBPF_STATE_DIR");
	char state[PATH_MAX], line[64];

	snprintf(state, sizeof(state), "%s/%d.state", dir && *dir ? dir : "/run/heapbpf", f->s.pid);
	snprintf(line, sizeof(line), "\nchild=%d ", (int)child);
	cr_assert(hb_wait_text(state, line, 60000, f->hp), "heapbpf's state never listed pid %d",
		  (int)child);
}

TestSuite(forks, .fini = forks_fini, .timeout = 120);

Test(forks, child_forked_in_the_window_is_restored)
{
	struct fk f;
	char *text;

	start(&f, "0");
	fork_in_target(&f, "fork 60");
	stop_heapbpf(&f);
	cr_assert_eq(flag_of(f.s.pid, f.flag), 0);
	cr_assert_eq(flag_of(f.kids[0], f.flag), 0, "the child still samples");
	text = stderr_of(&f);
	cr_assert(strstr(text, "forked 1 process(es) while sampling was on: prof_active restored "
			       "in 1"),
		  "%s", text);
	free(text);
	cr_assert_gt(hb_read_file(f.out, &text), 0);
	free(text);
	end_kids(&f);
	cr_assert_eq(svc_stop(&f.s), 0);
}

/*
 * A child that exits leaves its pid free, and a process that gets it is none
 * of heapbpf's: here the child of another instance of the service, forked
 * (no exec) with sampling on of its own, at the same addresses (no ASLR, as a
 * non-PIE build always is). Its own child, forked while heapbpf runs, keeps
 * the flag its parent gave it. (Before heapbpf checked the parent's start
 * time, it took that fork for one in its target's tree, and switched the
 * grandchild's flag off.)
 */
/*
 * Serial (scripts/run-tests.sh): the kernel's last pid is the machine's, and
 * a test beside it that cleans up by pid could meet a reused one.
 */
TestSuite(forks_pidreuse, .fini = forks_fini, .timeout = 120);

Test(forks_pidreuse, process_under_a_freed_pid_is_left_alone)
{
	const char *args[] = { "--threads", "1", NULL };
	struct svc_opts no_aslr = { .malloc_conf = IDLE_CONF, .no_aslr = true };
	struct fk f = {};
	struct svc other;
	pid_t child, kids[2] = { 0 };
	char reply[128], want[128], *text;
	int tries, rc;

	hb_require_bpf();
	f.bin = hb_path("examples/alloc-service-static");
	cr_assert_eq(svc_start_opts(&f.s, f.bin, &no_aslr, args), 0);
	no_aslr.malloc_conf = "prof:true,prof_active:true";
	cr_assert_eq(hb_sym_addr(f.s.pid, f.bin, "je_prof_active_state", &f.flag), 0);
	snprintf(f.pid, sizeof(f.pid), "%d", f.s.pid);
	snprintf(f.out, sizeof(f.out), "%s/out.pb.gz", hb_tmpdir());
	snprintf(f.err, sizeof(f.err), "%s/heapbpf.err", hb_tmpdir());
	f.hp = hb_spawn((const char *[]){ hb_path("heapbpf"), "--pid", f.pid, "-d", "0", "-o",
					  f.out, NULL },
			f.err);
	cr_assert(hb_wait_switched(f.s.pid, f.flag, 1, f.hp), "heapbpf did not start");
	/*
	 * The target's child, heapbpf's to restore, exits after a second (the
	 * kernel reaps it). Another instance of the service is then started as
	 * that pid (clone3's set_tid) and forks a child of its own with sampling
	 * on. A fork elsewhere on the machine may take the freed pid first
	 * (another test's thousands of forks wrap pid_max): then the test forks
	 * a new child and tries again, and heapbpf's count says so.
	 */
	for (tries = 1;; tries++) {
		cr_assert_eq(svc_cmd(&f.s, "fork 1", reply, sizeof(reply), 10000), 0);
		cr_assert_eq(sscanf(reply, "forked %d", &child), 1, "%s", reply);
		remember(child);
		cr_assert(hb_wait_reaped(child, 60000), "the child %d was not reaped", child);
		forget(child);
		no_aslr.pid = child;
		rc = svc_start_opts(&other, f.bin, &no_aslr, args);
		if (!hb_freed_pid_taken(rc, tries))
			break;
	}
	kids[0] = other.pid;
	remember(kids[0]);
	cr_assert_eq(flag_of(other.pid, f.flag), 1, "not at the target's addresses: shows nothing");
	cr_assert_eq(svc_cmd(&other, "fork 60", reply, sizeof(reply), 10000), 0);
	cr_assert_eq(sscanf(reply, "forked %d", &kids[1]), 1, "%s", reply);
	remember(kids[1]);
	cr_assert_eq(flag_of(kids[1], f.flag), 1);
	/*
	 * a fork of the target's own after it: once heapbpf lists that child,
	 * it has handled the grandchild's fork before it; then it stops
	 */
	cr_assert_eq(svc_cmd(&f.s, "fork 60", reply, sizeof(reply), 10000), 0);
	cr_assert_eq(sscanf(reply, "forked %d", &child), 1, "%s", reply);
	remember(child);
	wait_listed(&f, child);
	stop_heapbpf(&f);
	cr_assert_eq(flag_of(f.s.pid, f.flag), 0);
	cr_assert_eq(flag_of(kids[1], f.flag), 1,
		     "heapbpf switched sampling off in pid %d, forked by a new process as pid %d",
		     kids[1], child);
	cr_assert_eq(flag_of(kids[0], f.flag), 1);
	text = stderr_of(&f);
	snprintf(want, sizeof(want),
		 "forked %d process(es) while sampling was on: prof_active restored in 1, %d had "
		 "exited",
		 tries + 1, tries);
	cr_assert(strstr(text, want), "%s", text);
	free(text);
	kill(kids[1], SIGKILL);
	cr_assert_eq(svc_stop(&other), 0);
	cr_assert_eq(svc_stop(&f.s), 0);
}

/*
 * Followed children that come and go, more of them than the process table
 * first holds: each exit is handled while forks in the same drain grow that
 * table (a pointer into it kept across the drain was a use-after-free, which
 * the sanitized pass sees), each said, and heapbpf ends cleanly.
 */
Test(forks, many_followed_children_come_and_go)
{
	const char *args[] = { "--threads", "1", NULL };
	char reply[128], line[96], *text;
	pid_t kids[120];
	struct fk f = {};

	hb_require_bpf();
	f.bin = hb_path("examples/alloc-service-static");
	cr_assert_eq(svc_start(&f.s, f.bin, IDLE_CONF, args), 0);
	cr_assert_eq(hb_sym_addr(f.s.pid, f.bin, "je_prof_active_state", &f.flag), 0);
	snprintf(f.pid, sizeof(f.pid), "%d", f.s.pid);
	snprintf(f.out, sizeof(f.out), "%s/out.pb.gz", hb_tmpdir());
	snprintf(f.err, sizeof(f.err), "%s/heapbpf.err", hb_tmpdir());
	f.hp = hb_spawn((const char *[]){ hb_path("heapbpf"), "--pid", f.pid, "-d", "0",
					  "--follow-forks", "-o", f.out, NULL },
			f.err);
	cr_assert(hb_wait_switched(f.s.pid, f.flag, 1, f.hp), "heapbpf did not start");
	/* each allocates for a second and exits: forks and exits interleave */
	for (size_t i = 0; i < sizeof(kids) / sizeof(kids[0]); i++) {
		cr_assert_eq(svc_cmd(&f.s, "fork 1", reply, sizeof(reply), 10000), 0);
		cr_assert_eq(sscanf(reply, "forked %d", &kids[i]), 1, "%s", reply);
		hb_sleep_ms(30);
	}
	/* each said by heapbpf: followed to its exit, or gone before it could be */
	for (size_t i = 0; i < sizeof(kids) / sizeof(kids[0]); i++) {
		char exited[96], missed[96];

		cr_assert(hb_wait_gone(kids[i], 60000), "pid %d did not exit", kids[i]);
		snprintf(exited, sizeof(exited), "followed pid %d exited", kids[i]);
		snprintf(missed, sizeof(missed), "cannot follow pid %d", kids[i]);
		for (int t = 0;
		     t < 1200 && !hb_file_has(f.err, exited) && !hb_file_has(f.err, missed); t++)
			hb_sleep_ms(50);
	}
	stop_heapbpf(&f);
	cr_assert_eq(flag_of(f.s.pid, f.flag), 0);
	text = stderr_of(&f);
	for (size_t i = 0; i < sizeof(kids) / sizeof(kids[0]); i++) {
		snprintf(line, sizeof(line), "followed pid %d exited", kids[i]);
		if (strstr(text, line))
			continue;
		/* gone before heapbpf attached to it */
		snprintf(line, sizeof(line), "cannot follow pid %d", kids[i]);
		cr_assert(strstr(text, line), "pid %d: neither followed to its exit nor said:\n%s",
			  kids[i], text);
	}
	free(text);
	cr_assert_eq(svc_stop(&f.s), 0);
}

Test(forks, grandchild_is_restored_too)
{
	struct fk f;
	char *text;

	start(&f, "3");
	fork_in_target(&f, "fork2 60");
	cr_assert_gt(f.kids[1], 0, "no grandchild");
	cr_assert_eq(hb_wait(f.hp, 30000), 0);
	cr_assert_eq(flag_of(f.s.pid, f.flag), 0);
	cr_assert_eq(flag_of(f.kids[0], f.flag), 0, "the child still samples");
	cr_assert_eq(flag_of(f.kids[1], f.flag), 0, "the grandchild still samples");
	text = stderr_of(&f);
	cr_assert(strstr(text, "forked 2 process(es)"), "%s", text);
	free(text);
	end_kids(&f);
	cr_assert_eq(svc_stop(&f.s), 0);
}

/*
 * How many processes heapbpf (pid hp) has in its BPF map of tracked
 * processes, read through the map's id in hp's fdinfo; -1 when not found.
 */
static int tracked_entries(pid_t hp)
{
	char path[64], line[128];
	__u32 key, next, *prev = NULL;
	int n = -1;

	for (int fd = 0; fd < 1024 && n < 0; fd++) {
		struct bpf_map_info info;
		__u32 len = sizeof(info);
		unsigned int id = 0;
		FILE *f;
		int mfd;

		snprintf(path, sizeof(path), "/proc/%d/fdinfo/%d", hp, fd);
		f = fopen(path, "re");
		if (!f)
			continue;
		while (fgets(line, sizeof(line), f))
			sscanf(line, "map_id: %u", &id);
		fclose(f);
		mfd = id ? bpf_map_get_fd_by_id(id) : -1;
		if (mfd < 0)
			continue;
		memset(&info, 0, sizeof(info));
		if (!bpf_obj_get_info_by_fd(mfd, &info, &len) && !strcmp(info.name, "tracked")) {
			for (n = 0; !bpf_map_get_next_key(mfd, prev, &next); n++) {
				key = next;
				prev = &key;
			}
		}
		close(mfd);
	}
	return n;
}

/*
 * A service that forks short-lived helpers all day: more children in one
 * session than the BPF map of tracked processes holds (HEAPBPF_MAX_TRACKED),
 * each seen alive, then gone. The ones gone leave heapbpf's tables, so a
 * grandchild forked after them all is still seen and restored, and no
 * child went untracked.
 */
Test(forks, children_that_come_and_go_leave_room, .timeout = 600)
{
	char reply[128], want[64];
	struct fk f;
	char *text;
	int n = 0, restored = 0, tracked;

	start(&f, "600");
	/*
	 * 5 s each, 1000 at once: alive when heapbpf reads the fork (it writes
	 * its state file at each one), as a helper doing work would be
	 */
	snprintf(want, sizeof(want), "forkmany %d 5000 1000", HEAPBPF_MAX_TRACKED + 2000);
	cr_assert_eq(svc_cmd(&f.s, want, reply, sizeof(reply), 540000), 0);
	cr_assert_eq(sscanf(reply, "forked %d", &n), 1, "%s", reply);
	cr_assert_eq(n, HEAPBPF_MAX_TRACKED + 2000);
	/*
	 * every one exited: those of the last two batches at most wait for the
	 * next sweep (before it, the map held one per child seen alive, less
	 * pids reused, 7300 to 8192 here)
	 */
	tracked = tracked_entries(f.hp);
	cr_assert_geq(tracked, 0, "heapbpf's map of tracked processes not found");
	cr_assert_lt(tracked, HEAPBPF_MAX_TRACKED / 2,
		     "%d processes still tracked after all of them exited", tracked);
	fork_in_target(&f, "fork2 60");
	cr_assert_gt(f.kids[1], 0, "no grandchild");
	stop_heapbpf(&f);
	cr_assert_eq(flag_of(f.s.pid, f.flag), 0);
	cr_assert_eq(flag_of(f.kids[0], f.flag), 0, "the child still samples");
	cr_assert_eq(flag_of(f.kids[1], f.flag), 0, "the grandchild still samples");
	text = stderr_of(&f);
	cr_assert_null(strstr(text, "were not tracked"), "%s", text);
	/*
	 * most seen alive (one gone before heapbpf read its fork is not counted;
	 * a loaded machine reads late): without the sweep the map would have
	 * held far more than the bound above
	 */
	snprintf(want, sizeof(want), "pid %d forked ", f.s.pid);
	cr_assert_not_null(strstr(text, want), "%s", text);
	cr_assert_eq(sscanf(strstr(text, want) + strlen(want),
			    "%d process(es) while sampling was "
			    "on: prof_active restored in %d",
			    &n, &restored),
		     2, "%s", text);
	cr_assert_gt(n, HEAPBPF_MAX_TRACKED * 3 / 4,
		     "only %d children seen alive: the test shows nothing", n);
	cr_assert_eq(restored, 2, "%s", text);
	fprintf(stderr, "children_that_come_and_go_leave_room: %d seen alive, %d still tracked\n",
		n, tracked);
	free(text);
	end_kids(&f);
	cr_assert_eq(svc_stop(&f.s), 0);
}

/* exec'ed program with sampling on by its own configuration: heapbpf must not touch it */
Test(forks, child_that_execs_is_left_alone)
{
	struct fk f;
	char cmd[PATH_MAX + 128], reply[128], exe[PATH_MAX], link[64];
	uint64_t flag2 = 0;
	ssize_t n = 0;
	char *text;

	start(&f, "0");
	snprintf(
		cmd, sizeof(cmd),
		"forkexec /usr/bin/env MALLOC_CONF=prof:true,prof_active:true %s --threads 1 -d 60",
		f.bin);
	cr_assert_eq(svc_cmd(&f.s, cmd, reply, sizeof(reply), 10000), 0);
	cr_assert_eq(sscanf(reply, "forked %d", &f.kids[0]), 1, "%s", reply);
	remember(f.kids[0]);
	/* env has exec'ed the service, and its jemalloc is up */
	snprintf(link, sizeof(link), "/proc/%d/exe", f.kids[0]);
	for (int i = 0; i < 100; i++) {
		char real[PATH_MAX];

		n = readlink(link, exe, sizeof(exe) - 1);
		if (n > 0 && realpath(f.bin, real) && strncmp(exe, real, n) == 0 &&
		    !hb_sym_addr(f.kids[0], f.bin, "je_prof_active_state", &flag2) &&
		    flag_of(f.kids[0], flag2) == 1)
			break;
		flag2 = 0;
		hb_sleep_ms(100);
	}
	cr_assert_neq(flag2, 0, "the exec'ed service did not come up with sampling on");
	stop_heapbpf(&f);
	cr_assert_eq(flag_of(f.s.pid, f.flag), 0);
	cr_assert_eq(flag_of(f.kids[0], flag2), 1, "heapbpf wrote into a process that exec'ed");
	text = stderr_of(&f);
	cr_assert(strstr(text, "restored in 0, 1 had exited or exec'ed"), "%s", text);
	free(text);
	end_kids(&f);
	cr_assert_eq(svc_stop(&f.s), 0);
}

Test(forks, target_exits_while_its_child_lives)
{
	struct fk f;
	char reply[64];
	int rc;

	start(&f, "0");
	fork_in_target(&f, "fork 60");
	cr_assert_eq(svc_cmd(&f.s, "quit", reply, sizeof(reply), 10000), 0);
	cr_assert_eq(svc_stop(&f.s), 0);
	rc = hb_wait(f.hp, 30000);
	/* it wrote what it had: 0, or 3 if nothing was sampled in so short a window */
	cr_assert(rc == 0 || rc == 3, "heapbpf exited %d", rc);
	cr_assert_eq(flag_of(f.kids[0], f.flag), 0, "the orphaned child still samples");
	end_kids(&f);
}

Test(forks, kill_9_then_reset_restores_parent_and_child)
{
	struct fk f;
	char err[4096];

	start(&f, "0");
	fork_in_target(&f, "fork 60");
	/* the state file lists the child as soon as heapbpf saw the fork */
	wait_listed(&f, f.kids[0]);
	kill(f.hp, SIGKILL);
	hb_wait(f.hp, 10000);
	cr_assert_eq(flag_of(f.s.pid, f.flag), 1, "kill -9 cannot have restored anything");
	cr_assert_eq(flag_of(f.kids[0], f.flag), 1);
	cr_assert_eq(hb_run((const char *[]){ "--reset", "--pid", f.pid, NULL }, err, sizeof(err),
			    30000),
		     0, "%s", err);
	cr_assert_eq(flag_of(f.s.pid, f.flag), 0);
	cr_assert_eq(flag_of(f.kids[0], f.flag), 0, "--reset left the child sampling");
	cr_assert(strstr(err, "restored prof_active in 1 process(es) forked from pid"), "%s", err);
	end_kids(&f);
	cr_assert_eq(svc_stop(&f.s), 0);
}

/* ---- Debian's redis-server: BGSAVE forks a child that lives while it writes ---- */

/* The first child process of parent found in /proc (0 when none yet). */
static pid_t child_of(pid_t parent)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	pid_t found = 0;

	cr_assert_not_null(d);
	while (!found && (de = readdir(d))) {
		char path[300], buf[512], *p;
		int ppid = 0;
		FILE *f;

		snprintf(path, sizeof(path), "/proc/%s/stat", de->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(buf, sizeof(buf), f) && (p = strrchr(buf, ')')) &&
		    sscanf(p + 2, "%*c %d", &ppid) == 1 && ppid == parent)
			found = atoi(de->d_name);
		fclose(f);
	}
	closedir(d);
	return found;
}

Test(forks, redis_bgsave_child_is_restored)
{
	const char *lib = hb_path("jemalloc/libjemalloc.so.2");
	char libdir[PATH_MAX], portarg[16], pid[16], out[PATH_MAX], errp[PATH_MAX], log[PATH_MAX];
	char reply[256] = "", *text;
	int port = 20000 + getpid() % 20000;
	uint64_t flag;
	pid_t redis, hp, child = 0;
	int rc;

	hb_require_bpf();
	cr_assert_eq(access("/usr/bin/redis-server", X_OK), 0,
		     "redis-server is missing: run make deps (scripts/install-deps.sh)");
	cr_assert_not_null(realpath(lib, libdir));
	*strrchr(libdir, '/') = '\0';
	snprintf(portarg, sizeof(portarg), "%d", port);
	snprintf(log, sizeof(log), "%s/redis.log", hb_tmpdir());
	setenv("LD_LIBRARY_PATH", libdir, 1);
	setenv("MALLOC_CONF", IDLE_CONF, 1);
	redis = hb_spawn((const char *[]){ "/usr/bin/redis-server", "--port", portarg, "--bind",
					   "127.0.0.1", "--save", "", "--appendonly", "no", "--dir",
					   hb_tmpdir(), NULL },
			 log);
	unsetenv("LD_LIBRARY_PATH");
	unsetenv("MALLOC_CONF");
	remember(redis);
	for (int i = 0; i < 100 && strcmp(reply, "PONG"); i++) {
		hb_sleep_ms(100);
		hb_redis_cli(port, "ping", reply, sizeof(reply));
	}
	cr_assert_str_eq(reply, "PONG", "redis-server did not start (see %s)", log);
	cr_assert_eq(hb_sym_addr(redis, lib, "je_prof_active_state", &flag), 0);
	/* 20000 keys written at 0.5 ms each: a BGSAVE child that lives about 10 s */
	cr_assert_eq(system(strcat(strcpy(out, "redis-benchmark -h 127.0.0.1 -t set -n 20000 "
					       "-r 100000 -d 64 -q >/dev/null -p "),
				   portarg)),
		     0);
	hb_redis_cli(port, "config set rdb-key-save-delay 500", reply, sizeof(reply));
	cr_assert_str_eq(reply, "OK");

	snprintf(pid, sizeof(pid), "%d", redis);
	snprintf(out, sizeof(out), "%s/redis.pb.gz", hb_tmpdir());
	snprintf(errp, sizeof(errp), "%s/heapbpf.err", hb_tmpdir());
	hp = hb_spawn((const char *[]){ hb_path("heapbpf"), "--pid", pid, "-d", "0", "-o", out,
					NULL },
		      errp);
	cr_assert(hb_wait_switched(redis, flag, 1, hp), "heapbpf did not switch sampling on");
	hb_redis_cli(port, "bgsave", reply, sizeof(reply));
	cr_assert(strstr(reply, "Background saving started"), "%s", reply);
	for (int i = 0; i < 100 && !child; i++) {
		child = child_of(redis);
		if (!child)
			hb_sleep_ms(50);
	}
	cr_assert_gt(child, 0, "no BGSAVE child appeared");
	remember(child);
	cr_assert_eq(flag_of(child, flag), 1, "the BGSAVE child did not inherit sampling on");
	hb_sleep_ms(300);
	kill(hp, SIGINT);
	rc = hb_wait(hp, 30000);
	cr_assert_gt(hb_read_file(errp, &text), 0);
	/* redis is idle while it saves: no sample (exit 3) is fine, anything else is not */
	cr_assert(rc == 0 || rc == 3, "heapbpf exited %d:\n%s", rc, text);
	cr_assert(strstr(text, "forked 1 process(es) while sampling was on"), "%s", text);
	/* still saving: its flag is off again; already done: said so */
	if (kill(child, 0) == 0 && strstr(text, "restored in 1"))
		cr_assert_eq(flag_of(child, flag), 0, "the BGSAVE child still samples");
	else
		cr_assert(strstr(text, "restored in 0, 1 had exited"), "%s", text);
	free(text);
	cr_assert_eq(flag_of(redis, flag), 0);
	kill(redis, SIGTERM);
	hb_wait(redis, 30000);
}

/* ---- --follow-forks: a pre-forked worker's samples under its own pid, exact ---- */

Test(forks, follow_forks_profiles_each_worker_exactly)
{
	char conf[128], cmd[PATH_MAX], reply[128], line[64], dump[PATH_MAX], *text;
	const char *env[] = { conf, NULL };
	const char *args[] = { "--threads", "1", NULL };
	struct fk f = {};
	uint64_t rounds;
	int64_t n;

	hb_require_bpf();
	f.bin = hb_path("examples/alloc-service-static");
	snprintf(conf, sizeof(conf), "MALLOC_CONF=%s", HB_ORACLE_CONF);
	cr_assert_eq(svc_start_env(&f.s, f.bin, NULL, env, args), 0);
	cr_assert_eq(hb_sym_addr(f.s.pid, f.bin, "je_prof_active_state", &f.flag), 0);
	snprintf(f.pid, sizeof(f.pid), "%d", f.s.pid);
	snprintf(f.out, sizeof(f.out), "%s/out.pb.gz", hb_tmpdir());
	snprintf(f.err, sizeof(f.err), "%s/heapbpf.err", hb_tmpdir());
	f.hp = hb_spawn((const char *[]){ hb_path("heapbpf"), "--pid", f.pid, "-d", "0", "--raw",
					  "--follow-forks", "-o", f.out, NULL },
			f.err);
	cr_assert(hb_wait_switched(f.s.pid, f.flag, 1, f.hp), "heapbpf did not start");
	/* two pre-forked workers, each waiting for SIGUSR1 before it allocates */
	for (int i = 0; i < 2; i++) {
		snprintf(cmd, sizeof(cmd), "forkw 60 %s", hb_tmpdir());
		cr_assert_eq(svc_cmd(&f.s, cmd, reply, sizeof(reply), 10000), 0);
		cr_assert_eq(sscanf(reply, "forked %d", &f.kids[i]), 1, "%s", reply);
		remember(f.kids[i]);
	}
	/* heapbpf has them under uprobes before they allocate: nothing of theirs is missed */
	for (int i = 0; i < 2; i++) {
		snprintf(line, sizeof(line), "following pid %d (forked from %d)", f.kids[i],
			 f.s.pid);
		for (int t = 0; t < 200 && !hb_file_has(f.err, line); t++)
			hb_sleep_ms(50);
		cr_assert(hb_file_has(f.err, line), "heapbpf does not follow pid %d", f.kids[i]);
		kill(f.kids[i], SIGUSR1);
	}
	/* 2500 rounds of 64 allocations each, what 2.5 s gave on a quiet machine, however slow */
	cr_assert_eq(hb_sym_addr(f.kids[0], f.bin, "forked_child_rounds", &rounds), 0);
	for (int i = 0; i < 2; i++) {
		uint64_t done = hb_wait_count(f.kids[i], rounds, 2500, 600000);

		cr_assert_geq(done, 2500, "worker %d did %llu rounds", f.kids[i],
			      (unsigned long long)done);
	}
	for (int i = 0; i < 2; i++) {
		kill(f.kids[i], SIGUSR2);
		snprintf(dump, sizeof(dump), "%s/child-%d.heap.done", hb_tmpdir(), f.kids[i]);
		cr_assert(hb_wait_file(dump, 120000), "worker %d wrote no dump", f.kids[i]);
	}
	stop_heapbpf(&f);
	cr_assert_eq(flag_of(f.kids[0], f.flag), 0);
	cr_assert_eq(flag_of(f.kids[1], f.flag), 0);
	for (int i = 0; i < 2; i++) {
		snprintf(dump, sizeof(dump), "%s/child-%d.heap", hb_tmpdir(), f.kids[i]);
		n = hb_oracle_compare_pid(f.out, f.kids[i], dump, "forked_child");
		if (n <= 50) {
			text = stderr_of(&f);
			cr_assert_fail("worker %d: only %ld samples compared; heapbpf said:\n%s",
				       f.kids[i], (long)n, text);
		}
	}
	/* the target's own samples are labelled too, and no worker's site is among them */
	cr_assert_gt(hb_read_file(f.err, &text), 0);
	cr_assert(strstr(text, "forked 2 process(es)"), "%s", text);
	free(text);
	end_kids(&f);
	cr_assert_eq(svc_stop(&f.s), 0);
}

/* ---- --follow-forks: the timeline, its span and its peak cover every followed process ---- */

/* "1.2 s", "640.3 ms" (summary_duration) after prefix in text: seconds, or -1. */
static double seconds_after(const char *text, const char *prefix)
{
	const char *s = strstr(text, prefix);
	char unit[4];
	double v;

	if (!s || sscanf(s + strlen(prefix), "%lf %3[a-z]", &v, unit) != 2)
		return -1;
	return !strcmp(unit, "s")    ? v
	       : !strcmp(unit, "ms") ? v / 1e3
	       : !strcmp(unit, "us") ? v / 1e6
				     : v / 1e9;
}

/* The text from prefix to the end of its line, into out. */
static void line_of(const char *text, const char *prefix, char *out, size_t len)
{
	const char *s = strstr(text, prefix);

	cr_assert(s, "no \"%s\" in:\n%s", prefix, text);
	snprintf(out, len, "%.*s", (int)strcspn(s, "\n"), s);
}

/*
 * Redis's BGSAVE as the report had it: the parent allocates next to
 * nothing, the followed child holds 64 MiB for half a second and frees it.
 * The summary's timeline, its peak and the page's chart are of both
 * processes: the child's peak is the peak, the sparkline's max is that peak,
 * and the span covers the child's half second (the target's own timeline,
 * all there was, said "max 0 B" over a few milliseconds and no peak).
 */
/* An idle parent whose workers stand still: what is in use beyond a few samples is a child's. */
static void paused_parent(struct fk *f)
{
	const char *args[] = { "--threads", "1", NULL };
	char reply[128];

	hb_require_bpf();
	f->bin = hb_path("examples/alloc-service-static");
	cr_assert_eq(svc_start(&f->s, f->bin, IDLE_CONF, args), 0);
	cr_assert_eq(hb_sym_addr(f->s.pid, f->bin, "je_prof_active_state", &f->flag), 0);
	cr_assert_eq(svc_cmd(&f->s, "pause", reply, sizeof(reply), 10000), 0);
	snprintf(f->pid, sizeof(f->pid), "%d", f->s.pid);
	snprintf(f->err, sizeof(f->err), "%s/heapbpf.err", hb_tmpdir());
}

/* A forkhold child of mib MiB, followed by heapbpf, holding them: its pid. */
static int held_child(struct fk *f, int mib)
{
	char reply[128], cmd[PATH_MAX], line[256], mark[PATH_MAX];
	int kid;

	snprintf(cmd, sizeof(cmd), "forkhold %d %s", mib, hb_tmpdir());
	cr_assert_eq(svc_cmd(&f->s, cmd, reply, sizeof(reply), 10000), 0);
	cr_assert_eq(sscanf(reply, "forked %d", &kid), 1, "%s", reply);
	remember(kid);
	snprintf(line, sizeof(line), "following pid %d (forked from %d)", kid, f->s.pid);
	cr_assert(hb_wait_text(f->err, line, 20000, f->hp), "heapbpf does not follow pid %d", kid);
	kill(kid, SIGUSR1);
	snprintf(mark, sizeof(mark), "%s/child-%d.held", hb_tmpdir(), kid);
	for (int t = 0; t < 400 && access(mark, F_OK); t++)
		hb_sleep_ms(50);
	cr_assert_eq(access(mark, F_OK), 0, "the child did not allocate");
	return kid;
}

Test(forks, follow_forks_timeline_and_peak_cover_the_child)
{
	char line[256], html[PATH_MAX], spark[512], peak[256], *text, *page;
	const char *title;
	struct fk f = {};
	double at_peak, span, est, own;

	paused_parent(&f);
	snprintf(html, sizeof(html), "%s/out.html", hb_tmpdir());
	f.hp = hb_spawn((const char *[]){ hb_path("heapbpf"), "--pid", f.pid, "-d", "0",
					  "--follow-forks", "-t", "alloc_space", "-o", html, NULL },
			f.err);
	cr_assert(hb_wait_switched(f.s.pid, f.flag, 1, f.hp), "heapbpf did not start");
	f.kids[0] = held_child(&f, 64);
	/* held at least this long: a lower bound of the span, whatever the machine's load */
	hb_sleep_ms(500);
	kill(f.kids[0], SIGUSR2);
	snprintf(line, sizeof(line), "followed pid %d exited", f.kids[0]);
	cr_assert(hb_wait_text(f.err, line, 20000, f.hp), "pid %d did not exit", f.kids[0]);
	forget(f.kids[0]);
	stop_heapbpf(&f);
	text = stderr_of(&f);

	line_of(text, "heapbpf: in use over ", spark, sizeof(spark));
	line_of(text, "heapbpf: peak in use ", peak, sizeof(peak));
	span = seconds_after(spark, "in use over ");
	at_peak = hb_bytes_after(peak, "peak in use ");
	cr_assert_geq(span, 0.5, "the timeline does not span the child's half second:\n%s", text);
	/* 64 blocks of 1 MiB, each sampled with probability 1 - e^-2 at 512 KiB: 48 to 80 MiB */
	cr_assert_geq(at_peak, 32.0 * (1 << 20), "the child's 64 MiB are not the peak:\n%s", text);
	/* one peak, said once: the sparkline has no figure of its own */
	cr_assert_null(strstr(spark, " max "), "%s", spark);
	/* the count's line: the estimate first, the sampled objects' own bytes as a part of it */
	line_of(text, " frees of objects sampled before attach; ", line, sizeof(line));
	cr_assert(strstr(line, " allocated (estimated), of which the sampled objects are "), "%s",
		  line);
	est = hb_bytes_after(line, "attach; ");
	own = hb_bytes_after(line, "the sampled objects are ");
	cr_assert_geq(est, at_peak, "%s", line);
	cr_assert_leq(own, est, "%s", line);
	free(text);

	/* the page's chart: the same span and the same peak */
	cr_assert_gt(hb_read_file(html, &page), 0);
	line_of(page, "<p id=\"hb-timeline-cap\">over ", line, sizeof(line));
	cr_assert_geq(seconds_after(line, "over "), 0.5, "%s", line);
	cr_assert_float_eq(hb_bytes_after(line, "at most "), at_peak, 0.06 * (1 << 20), "%s", line);
	/* -t alloc_space: the title's total is the summary's estimate */
	title = strstr(page, "<h1 id=\"hb-title\">");
	cr_assert(title, "the page has no title");
	cr_assert_float_eq(hb_bytes_after(title, "&middot; allocated "), est, 0.06 * est, "%.200s",
			   title);
	free(page);
	cr_assert_eq(svc_stop(&f.s), 0);
}

/*
 * Children that exit holding what they allocated (a BGSAVE child's _exit):
 * each one's in-use leaves the sum when it goes, so three children of 64
 * MiB one after another peak at one child's, not at the three's sum.
 */
Test(forks, follow_forks_sum_drops_a_child_that_exits_holding)
{
	char line[256], peak[256], *text;
	struct fk f = {};
	double at_peak;
	int kid;

	paused_parent(&f);
	f.hp = hb_spawn((const char *[]){ hb_path("heapbpf"), "--pid", f.pid, "-d", "0",
					  "--follow-forks", "-f", "folded", "-o",
					  hb_tmp("out.folded"), NULL },
			f.err);
	cr_assert(hb_wait_switched(f.s.pid, f.flag, 1, f.hp), "heapbpf did not start");
	for (int i = 0; i < 3; i++) {
		kid = held_child(&f, 64);
		/* gone with its 64 MiB still allocated */
		kill(kid, SIGKILL);
		snprintf(line, sizeof(line), "followed pid %d exited", kid);
		cr_assert(hb_wait_text(f.err, line, 20000, f.hp), "pid %d did not exit", kid);
		forget(kid);
	}
	stop_heapbpf(&f);
	text = stderr_of(&f);
	line_of(text, "heapbpf: peak in use ", peak, sizeof(peak));
	at_peak = hb_bytes_after(peak, "peak in use ");
	/*
	 * One child's 64 MiB, sampled in 1 MiB blocks at 512 KiB, is estimated
	 * at 45 to 94 MiB (six deviations); the three's sum would be 135 or more.
	 */
	cr_assert_geq(at_peak, 32.0 * (1 << 20), "no child's heap in the peak:\n%s", text);
	cr_assert_lt(at_peak, 110.0 * (1 << 20), "exited children stay in the sum:\n%s", text);
	free(text);
	cr_assert_eq(svc_stop(&f.s), 0);
}
