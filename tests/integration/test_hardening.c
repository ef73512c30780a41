// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Misuse and faults: a second heapbpf on the same pid, kill -9 (the flag is
 * restored by --reset or by the next run), capabilities after attaching,
 * missing privileges or kernel features, a full disk, a ring buffer that
 * overflows, a target that exits while heapbpf attaches. Each time: a clear
 * message, the right exit code, no partial file, the target as it was.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "harness.h"
#include "profile/pprof.h"

#pragma GCC diagnostic ignored "-Wformat-truncation"

#define IDLE_CONF "prof:true,prof_active:false"

TestSuite(hardening, .fini = hb_tmpdir_cleanup, .timeout = 120);

struct tgt {
	struct svc s;
	char pid[16];
	uint64_t flag;
};

static void start(struct tgt *t, const char *conf, const char *const *args)
{
	const char *bin = hb_path("examples/alloc-service-static");

	hb_require_bpf();
	cr_assert_eq(svc_start(&t->s, bin, conf, args), 0);
	cr_assert_eq(hb_sym_addr(t->s.pid, bin, "je_prof_active_state", &t->flag), 0);
	snprintf(t->pid, sizeof(t->pid), "%d", t->s.pid);
}

static uint8_t flag(struct tgt *t)
{
	uint8_t b = 0xff;

	cr_assert_eq(hb_peek(t->s.pid, t->flag, &b, 1), 0);
	return b;
}

/* heapbpf -d 0 in the background, once it has switched sampling on. */
static pid_t background(struct tgt *t, const char *errpath)
{
	char out[PATH_MAX];
	pid_t hp;

	snprintf(out, sizeof(out), "%s/bg.pb.gz", hb_tmpdir());
	hp = hb_spawn((const char *[]){ hb_path("heapbpf"), "--pid", t->pid, "-d", "0", "-o", out,
					NULL },
		      errpath);
	cr_assert(hb_wait_switched(t->s.pid, t->flag, 1, hp), "heapbpf did not start sampling");
	return hp;
}

static bool state_file_exists(pid_t pid)
{
	char path[128];
	struct stat st;

	snprintf(path, sizeof(path), "/run/heapbpf/%d.state", pid);
	return stat(path, &st) == 0;
}

static void one_line(const char *err, const char *want)
{
	cr_assert(strstr(err, want), "expected \"%s\" in: %s", want, err);
	cr_assert_eq(strncmp(err, "heapbpf: ", 9), 0, "%s", err);
}

Test(hardening, second_instance_is_refused)
{
	char errpath[PATH_MAX], err[4096];
	struct tgt t;
	pid_t hp;

	start(&t, IDLE_CONF, NULL);
	snprintf(errpath, sizeof(errpath), "%s/first.err", hb_tmpdir());
	hp = background(&t, errpath);
	/* a run that samples for itself (a recording: no holder serves one) */
	cr_assert_eq(hb_run((const char *[]){ "--pid", t.pid, "-d", "1", "--record",
					      hb_tmp("second.hbr"), NULL },
			    err, sizeof(err), 30000),
		     1, "%s", err);
	one_line(err, "another heapbpf");
	cr_assert(strstr(err, "is already profiling pid"), "%s", err);
	/* the first one is unharmed and still in charge */
	cr_assert_eq(flag(&t), 1);
	kill(hp, SIGINT);
	cr_assert_eq(hb_wait(hp, 30000), 0);
	cr_assert_eq(flag(&t), 0);
	cr_assert_eq(svc_stop(&t.s), 0);
}

/*
 * Lock files go with the run that held them, and one a dead run left (no one
 * holds it) goes with the next run; one a live run holds stays. (Before, each
 * pid ever profiled left its N.lock: 2096 in /run/heapbpf after a day of tests.)
 */
Test(hardening, lock_files_are_removed)
{
	char dir[PATH_MAX], stale[PATH_MAX + 16], held[PATH_MAX + 16], mine[PATH_MAX + 32];
	char err[4096];
	struct stat st;
	struct tgt t;
	int fd;

	snprintf(dir, sizeof(dir), "%s", hb_tmp("state"));
	cr_assert_eq(mkdir(dir, 0700), 0);
	snprintf(stale, sizeof(stale), "%s/999999.lock", dir);
	snprintf(held, sizeof(held), "%s/999998.lock", dir);
	fd = open(stale, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	cr_assert_geq(fd, 0);
	close(fd);
	fd = open(held, O_CREAT | O_RDWR | O_CLOEXEC, 0600);
	cr_assert_geq(fd, 0);
	cr_assert_eq(flock(fd, LOCK_EX | LOCK_NB), 0);

	start(&t, IDLE_CONF, NULL);
	snprintf(mine, sizeof(mine), "%s/%s.lock", dir, t.pid);
	setenv("HEAPBPF_STATE_DIR", dir, 1);
	cr_assert_eq(hb_run((const char *[]){ "--pid", t.pid, "-d", "1", "-q", "-o",
					      hb_tmp("l.pb.gz"), NULL },
			    err, sizeof(err), 60000),
		     0, "%s", err);
	unsetenv("HEAPBPF_STATE_DIR");
	cr_assert_neq(stat(mine, &st), 0, "the run's own lock file is left");
	cr_assert_neq(stat(stale, &st), 0, "a lock file no one held is left");
	cr_assert_eq(stat(held, &st), 0, "a held lock file was removed");
	close(fd);
	cr_assert_eq(flag(&t), 0);
	cr_assert_eq(svc_stop(&t.s), 0);
}

/* kill -9 leaves the flag on and a state file; returns with both checked. */
static void kill9(struct tgt *t)
{
	char errpath[PATH_MAX];
	pid_t hp;

	snprintf(errpath, sizeof(errpath), "%s/killed.err", hb_tmpdir());
	hp = background(t, errpath);
	kill(hp, SIGKILL);
	cr_assert_eq(hb_wait(hp, 10000), 128 + SIGKILL);
	cr_assert_eq(flag(t), 1, "the flag should still be on after kill -9");
	cr_assert(state_file_exists(t->s.pid), "no state file under /run/heapbpf");
}

Test(hardening, reset_after_kill9)
{
	char err[4096];
	struct tgt t;

	start(&t, IDLE_CONF, NULL);
	kill9(&t);
	cr_assert_eq(hb_run((const char *[]){ "--reset", "--pid", t.pid, NULL }, err, sizeof(err),
			    30000),
		     0, "%s", err);
	one_line(err, "restored prof_active");
	cr_assert_eq(flag(&t), 0);
	cr_assert(!state_file_exists(t.s.pid));
	/* nothing left: a second reset says so and changes nothing */
	cr_assert_eq(hb_run((const char *[]){ "--reset", "--pid", t.pid, NULL }, err, sizeof(err),
			    30000),
		     0, "%s", err);
	one_line(err, "nothing to reset");
	cr_assert_eq(flag(&t), 0);
	cr_assert_eq(svc_stop(&t.s), 0);
}

Test(hardening, next_run_restores_after_kill9)
{
	char err[4096], out[PATH_MAX];
	struct tgt t;

	start(&t, IDLE_CONF, NULL);
	kill9(&t);
	snprintf(out, sizeof(out), "%s/next.pb.gz", hb_tmpdir());
	cr_assert_eq(hb_run((const char *[]){ "--pid", t.pid, "-d", "1", "-o", out, NULL }, err,
			    sizeof(err), 30000),
		     0, "%s", err);
	cr_assert(strstr(err, "restored prof_active"), "%s", err);
	cr_assert_eq(flag(&t), 0);
	cr_assert(!state_file_exists(t.s.pid));
	cr_assert_eq(svc_stop(&t.s), 0);
}

Test(hardening, capabilities_dropped_after_attach)
{
	char errpath[PATH_MAX], status[64], *text, *line;
	unsigned long long eff = ~0ULL;
	struct tgt t;
	pid_t hp;

	start(&t, IDLE_CONF, NULL);
	snprintf(errpath, sizeof(errpath), "%s/caps.err", hb_tmpdir());
	hp = background(&t, errpath);
	/* the drop follows the flag write by microseconds */
	hb_sleep_ms(200);
	snprintf(status, sizeof(status), "/proc/%d/status", hp);
	cr_assert_gt(hb_read_file(status, &text), 0);
	line = strstr(text, "CapEff:");
	cr_assert_not_null(line);
	eff = strtoull(line + 7, NULL, 16);
	free(text);
	/* CAP_DAC_OVERRIDE (1), CAP_DAC_READ_SEARCH (2), CAP_SYS_PTRACE (19): nothing else */
	cr_assert_eq(eff, (1ULL << 1) | (1ULL << 2) | (1ULL << 19), "CapEff %#llx", eff);
	kill(hp, SIGTERM);
	cr_assert_eq(hb_wait(hp, 30000), 0);
	cr_assert_eq(flag(&t), 0, "the flag must be restored with the reduced capabilities");
	cr_assert_eq(svc_stop(&t.s), 0);
}

/* heapbpf run under setpriv with capabilities removed from its bounding set. */
static void without(const char *caps, const char *want)
{
	char err[4096], out[PATH_MAX], drop[128], errpath[PATH_MAX], *text;
	struct tgt t;
	struct stat st;
	pid_t p;
	int rc;

	start(&t, IDLE_CONF, NULL);
	snprintf(out, sizeof(out), "%s/nocaps.pb.gz", hb_tmpdir());
	snprintf(errpath, sizeof(errpath), "%s/nocaps.err", hb_tmpdir());
	snprintf(drop, sizeof(drop), "--bounding-set=%s", caps);
	p = hb_spawn((const char *[]){ "/usr/bin/setpriv", drop, "--", hb_path("heapbpf"), "--pid",
				       t.pid, "-d", "1", "-o", out, NULL },
		     errpath);
	rc = hb_wait(p, 30000);
	cr_assert_geq(hb_read_file(errpath, &text), 0);
	snprintf(err, sizeof(err), "%s", text);
	free(text);
	cr_assert_eq(rc, 1, "%s", err);
	one_line(err, want);
	cr_assert_neq(stat(out, &st), 0);
	cr_assert_eq(flag(&t), 0);
	cr_assert_eq(svc_stop(&t.s), 0);
}

Test(hardening, missing_cap_bpf)
{
	without("-bpf,-sys_admin", "lacks CAP_BPF");
}

/* CAP_BPF and CAP_PERFMON are not enough for uprobe perf events: heapbpf says so first */
Test(hardening, missing_cap_sys_admin)
{
	without("-sys_admin", "lacks CAP_SYS_ADMIN");
}

Test(hardening, missing_cap_sys_ptrace)
{
	without("-sys_ptrace", "lacks CAP_SYS_PTRACE");
}

/* HEAPBPF_SYSFS points heapbpf's feature checks at a fake /sys. */
static void kernel_without(const char *keep, const char *want)
{
	char err[4096], sys[PATH_MAX], cmd[2 * PATH_MAX];
	struct tgt t;

	start(&t, IDLE_CONF, NULL);
	snprintf(sys, sizeof(sys), "%s/sys", hb_tmpdir());
	snprintf(cmd, sizeof(cmd), "mkdir -p '%s' %s", sys, keep);
	cr_assert_eq(system(cmd), 0);
	setenv("HEAPBPF_SYSFS", sys, 1);
	cr_assert_eq(hb_run((const char *[]){ "--pid", t.pid, "-d", "1", NULL }, err, sizeof(err),
			    30000),
		     1, "%s", err);
	unsetenv("HEAPBPF_SYSFS");
	one_line(err, want);
	cr_assert_eq(flag(&t), 0);
	cr_assert_eq(svc_stop(&t.s), 0);
}

/* No CO-RE: a kernel without BTF (a /sys with only the uprobe PMU) is profiled all the same. */
Test(hardening, kernel_without_btf_profiles)
{
	char err[4096], sys[PATH_MAX], cmd[2 * PATH_MAX], out[PATH_MAX];
	struct stat st;
	struct tgt t;
	int rc;

	start(&t, IDLE_CONF, NULL);
	snprintf(sys, sizeof(sys), "%s/sys", hb_tmpdir());
	snprintf(cmd, sizeof(cmd), "mkdir -p '%s/bus/event_source/devices/uprobe'", sys);
	cr_assert_eq(system(cmd), 0);
	snprintf(out, sizeof(out), "%s/nobtf.pb.gz", hb_tmpdir());
	setenv("HEAPBPF_SYSFS", sys, 1);
	rc = hb_run((const char *[]){ "--pid", t.pid, "-d", "1", "-o", out, NULL }, err,
		    sizeof(err), 30000);
	unsetenv("HEAPBPF_SYSFS");
	cr_assert(rc == 0 || rc == 3, "exit %d: %s", rc, err);
	cr_assert_eq(stat(out, &st), 0, "%s", err);
	cr_assert_eq(flag(&t), 0);
	cr_assert_eq(svc_stop(&t.s), 0);
}

Test(hardening, kernel_without_uprobes)
{
	kernel_without("", "has no uprobes");
}

Test(hardening, disk_full_leaves_no_partial_file)
{
	char dir[PATH_MAX], out[PATH_MAX], cmd[2 * PATH_MAX], err[4096], *ls;
	struct tgt t;

	start(&t, IDLE_CONF, NULL);
	snprintf(dir, sizeof(dir), "%s/full", hb_tmpdir());
	cr_assert_eq(mkdir(dir, 0755), 0);
	/* a 64 KiB file system, filled up but for a few hundred bytes */
	cr_assert_eq(mount("heapbpf-full", dir, "tmpfs", 0, "size=64k"), 0, "%s", strerror(errno));
	snprintf(cmd, sizeof(cmd), "dd if=/dev/zero of='%s/filler' bs=1k count=63 2>/dev/null",
		 dir);
	cr_assert_eq(system(cmd), 0);
	snprintf(out, sizeof(out), "%s/heap.pb.gz", dir);
	cr_assert_eq(hb_run((const char *[]){ "--pid", t.pid, "-d", "2", "-o", out, NULL }, err,
			    sizeof(err), 30000),
		     1, "%s", err);
	one_line(err, "No space left on device");
	snprintf(cmd, sizeof(cmd), "ls -A '%s' > '%s/ls.txt'", dir, hb_tmpdir());
	cr_assert_eq(system(cmd), 0);
	snprintf(cmd, sizeof(cmd), "%s/ls.txt", hb_tmpdir());
	cr_assert_geq(hb_read_file(cmd, &ls), 0);
	cr_assert_str_eq(ls, "filler\n", "left behind: %s", ls);
	free(ls);
	cr_assert_eq(umount(dir), 0);
	cr_assert_eq(flag(&t), 0);
	cr_assert_eq(svc_stop(&t.s), 0);
}

Test(hardening, ring_buffer_overflow_is_reported)
{
	char err[8192], out[PATH_MAX], *gz;
	const char *args[] = { "--threads", "4", "--rate", "0", NULL };
	Perftools__Profiles__Profile *p;
	bool noted = false;
	struct tgt t;
	ssize_t len;

	/* one sample per 1 KiB allocated, into a 16 KiB ring buffer: more than it holds */
	start(&t, "prof:true,prof_active:false,lg_prof_sample:10", args);
	snprintf(out, sizeof(out), "%s/drops.pb.gz", hb_tmpdir());
	cr_assert_eq(hb_run((const char *[]){ "--pid", t.pid, "-d", "2", "--ringbuf-size", "16k",
					      "-o", out, NULL },
			    err, sizeof(err), 60000),
		     4, "exit status must say events were dropped: %s", err);
	cr_assert(strstr(err, "were dropped"), "%s", err);
	len = hb_read_file(out, &gz);
	cr_assert_gt(len, 0);
	cr_assert_eq(pprof_decode((uint8_t *)gz, len, &p), 0);
	for (size_t i = 0; i < p->n_comment; i++)
		noted |= strstr(p->string_table[p->comment[i]], "dropped") != NULL;
	cr_assert(noted, "the profile does not say that events were dropped");
	perftools__profiles__profile__free_unpacked(p, NULL);
	free(gz);
	cr_assert_eq(flag(&t), 0);
	cr_assert_eq(svc_stop(&t.s), 0);
}

Test(hardening, target_exiting_during_attach)
{
	char out[PATH_MAX];

	hb_require_bpf();
	snprintf(out, sizeof(out), "%s/race.pb.gz", hb_tmpdir());
	/* the target dies at a different point of heapbpf's start-up each round */
	for (int round = 0; round < 8; round++) {
		struct tgt t;
		pid_t hp;
		int rc;

		start(&t, IDLE_CONF, NULL);
		hp = hb_spawn((const char *[]){ hb_path("heapbpf"), "--pid", t.pid, "-d", "2", "-o",
						out, NULL },
			      NULL);
		hb_sleep_ms(round * 15);
		kill(t.s.pid, SIGKILL);
		rc = hb_wait(hp, 30000);
		svc_stop(&t.s);
		/* a clean outcome either way: an error, or a profile of what was seen */
		cr_assert(rc == 0 || rc == 1 || rc == 3, "round %d: exit %d", round, rc);
	}
}
