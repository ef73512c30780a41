// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * heapbpf watch against the example service: an OOM kill in a memory
 * cgroup of the test's own (only the example in it, removed pass or fail),
 * pressure as the kernel reports it (a working set the cgroup cannot hold,
 * a fast fill before its OOM kill; page-cache reclaim is none) with a
 * cooldown, growth in steps, and SIGUSR1 against jemalloc's own dump. Each
 * profile is named after its trigger and says so in its comments.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "harness.h"
#include "oracle.h"
#include "profile/pprof.h"
#include "standin.h"

#define IDLE_CONF   "prof:true,prof_active:false"
#define PUSH_SERVER "tests/pyroscope/pyroscope_push_server.py"

static char cg[PATH_MAX];
static pid_t server, watcher;
static struct svc svc;

static void watch_fini(void)
{
	if (watcher > 0)
		kill(watcher, SIGKILL);
	if (svc.pid > 0)
		kill(svc.pid, SIGKILL);
	hb_cgroup_drain(cg);
	if (server > 0)
		hb_standin_kill(&server);
	hb_tmpdir_cleanup();
}

TestSuite(watch, .fini = watch_fini, .timeout = 240);

/* ---- the test's memory cgroup (v1 here; v2 where that is what the machine has) ---- */

static bool cgroup_v1(void)
{
	struct stat st;

	return stat("/sys/fs/cgroup/memory/memory.limit_in_bytes", &st) == 0;
}

static void cg_write(const char *file, const char *value)
{
	char path[PATH_MAX + 64];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", cg, file);
	f = fopen(path, "we");
	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	fputs(value, f);
	cr_assert_eq(fclose(f), 0, "%s = %s: %s", path, value, strerror(errno));
}

/* A child memory cgroup of the test's with a hard limit of mib MiB, the example alone in it. */
static void cg_enter(pid_t pid, unsigned int mib)
{
	char v[32];

	snprintf(cg, sizeof(cg), "%s/heapbpf-test-%d",
		 cgroup_v1() ? "/sys/fs/cgroup/memory" : "/sys/fs/cgroup", (int)getpid());
	cr_assert_eq(mkdir(cg, 0755), 0, "mkdir %s: %s", cg, strerror(errno));
	snprintf(v, sizeof(v), "%u", mib << 20);
	cg_write(cgroup_v1() ? "memory.limit_in_bytes" : "memory.max", v);
	snprintf(v, sizeof(v), "%d", (int)pid);
	cg_write("cgroup.procs", v);
}

/* ---- heapbpf watch ---- */

static uint64_t flag;

static void start_service(const char *conf)
{
	const char *bin = hb_path("examples/alloc-service-static");
	const char *args[] = { "--threads", "1", NULL };

	hb_require_bpf();
	cr_assert_eq(svc_start(&svc, bin, conf, args), 0);
	cr_assert_eq(hb_sym_addr(svc.pid, bin, "je_prof_active_state", &flag), 0);
}

/* heapbpf watch's stderr (into one file per test), "" before it said anything. */
static const char *err_path(void)
{
	static char path[PATH_MAX];

	if (!path[0])
		snprintf(path, sizeof(path), "%s", hb_tmp("watch.err"));
	return path;
}

/* heapbpf watch --pid (the service) --output-dir out, plus args; once it samples. */
static void start_watch(const char *out, const char *const *more)
{
	const char *argv[32];
	char pid[16];
	int n = 0;

	snprintf(pid, sizeof(pid), "%d", svc.pid);
	argv[n++] = hb_path("heapbpf");
	argv[n++] = "watch";
	argv[n++] = "--pid";
	argv[n++] = pid;
	argv[n++] = "--output-dir";
	argv[n++] = out;
	for (; more && *more && n < 30; more++)
		argv[n++] = *more;
	argv[n] = NULL;
	watcher = hb_spawn(argv, err_path());
	cr_assert(hb_wait_switched(svc.pid, flag, 1, watcher), "heapbpf did not start sampling");
}

static char *watch_err(void)
{
	char *text = NULL;

	if (hb_read_file(err_path(), &text) < 0)
		text = strdup("");
	cr_assert_not_null(text);
	return text;
}

/* Waits (bounded) until out holds want files ending in suffix; their names. */
static int wait_files(const char *out, const char *suffix, int want, char names[][256])
{
	int n = 0;

	for (int i = 0; i < 1200 && (n = hb_count_files(out, suffix, names, 16)) < want; i++)
		hb_sleep_ms(100);
	return n;
}

/* Waits (bounded) until heapbpf's stderr holds what. */
static void wait_said(const char *what)
{
	char *text = NULL;
	bool found = false;

	for (int i = 0; i < 1200 && !found; i++) {
		free(text);
		text = watch_err();
		found = strstr(text, what) != NULL;
		if (!found)
			hb_sleep_ms(100);
	}
	cr_assert(found, "heapbpf never said \"%s\":\n%s", what, text);
	free(text);
}

static Perftools__Profiles__Profile *load(const char *dir, const char *name)
{
	Perftools__Profiles__Profile *p = NULL;
	char path[PATH_MAX + 256], *buf = NULL;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	n = hb_read_file(path, &buf);
	cr_assert_gt(n, 0, "%s", path);
	cr_assert_eq(pprof_decode((uint8_t *)buf, n, &p), 0, "%s", path);
	free(buf);
	return p;
}

static bool has_comment(const Perftools__Profiles__Profile *p, const char *what)
{
	for (size_t i = 0; i < p->n_comment; i++) {
		if (strstr(p->string_table[p->comment[i]], what))
			return true;
	}
	return false;
}

static size_t value_index(const Perftools__Profiles__Profile *p, const char *type)
{
	for (size_t i = 0; i < p->n_sample_type; i++) {
		if (!strcmp(p->string_table[p->sample_type[i]->type], type))
			return i;
	}
	cr_assert_fail("no sample type %s", type);
	return 0;
}

/* The function that called malloc: the outermost line of the leaf location. */
static const char *leaf_of(const Perftools__Profiles__Profile *p,
			   const Perftools__Profiles__Sample *s)
{
	const Perftools__Profiles__Location *l = p->location[s->location_id[0] - 1];

	return p->string_table[p->function[l->line[l->n_line - 1]->function_id - 1]->name];
}

/* The in-use bytes of the stacks whose leaf is fn, and of all stacks. */
static void inuse_of(const Perftools__Profiles__Profile *p, const char *fn, int64_t *site,
		     int64_t *all)
{
	size_t v = value_index(p, "inuse_space");

	*site = *all = 0;
	for (size_t i = 0; i < p->n_sample; i++) {
		*all += p->sample[i]->value[v];
		if (p->sample[i]->n_location_id && !strcmp(leaf_of(p, p->sample[i]), fn))
			*site += p->sample[i]->value[v];
	}
}

/*
 * The service paused, then filled with more than its cgroup holds: the
 * kernel kills it while it fills, and heapbpf watch ends by itself, with 0.
 * heapbpf's stderr (malloc'ed).
 */
static char *fill_until_killed(void)
{
	char reply[128], *err;
	int rc;

	cr_assert_eq(svc_cmd(&svc, "pause", reply, sizeof(reply), 10000), 0);
	svc_cmd(&svc, "fill 400", reply, sizeof(reply), 60000);
	rc = hb_wait(watcher, 120000);
	watcher = 0;
	err = watch_err();
	cr_assert_eq(rc, 0, "heapbpf exited %d:\n%s", rc, err);
	cr_assert_eq(hb_wait(svc.pid, 10000), 128 + SIGKILL, "the example was not killed");
	svc.pid = 0;
	return err;
}

/*
 * A leak at a known site (fill_buffers) in a 128 MiB cgroup until the kernel
 * kills the example: the oom profile is on disk, and at the Pyroscope
 * stand-in, after the process is gone, and the site holds most of it.
 */
Test(watch, oom_kill_profile_names_the_leak)
{
	const char *out = hb_tmp("out"), *spool = hb_tmp("spool");
	const char *cmd[] = { "/usr/bin/python3", PUSH_SERVER, NULL };
	char names[16][256], url[64], lines[4][8192];
	Perftools__Profiles__Profile *p;
	int64_t site, all;
	char *err;
	int port;

	start_service(IDLE_CONF);
	server = hb_standin_start(cmd, 0, NULL, NULL, &port);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", port);
	cg_enter(svc.pid, 128);
	start_watch(out, (const char *[]){ "--pyroscope", url, "--spool-dir", spool,
					   "--pyroscope-retries", "1", NULL });
	err = fill_until_killed();
	cr_assert(strstr(err, "oom: chosen as the OOM killer's victim"), "%s", err);
	free(err);
	/* one profile, the oom one: nothing after it */
	cr_assert_eq(hb_count_files(out, ".pb.gz", names, 16), 1);
	cr_assert(strstr(names[0], "-oom.pb.gz"), "%s", names[0]);
	p = load(out, names[0]);
	cr_assert(has_comment(p, "heapbpf: trigger: oom: chosen as the OOM killer's victim"));
	/* the victim's figures where the kernel's record has them, else it says so */
	if (hb_file_has("/sys/kernel/tracing/events/oom/mark_victim/format", "anon_rss") ||
	    hb_file_has("/sys/kernel/debug/tracing/events/oom/mark_victim/format", "anon_rss"))
		cr_assert(has_comment(p, "anon-rss"));
	else
		cr_assert(has_comment(p, "record gives its pid alone, no memory figures"));
	inuse_of(p, "fill_buffers", &site, &all);
	cr_assert_geq(site * 10, all * 8, "fill_buffers holds %ld of %ld bytes in use", (long)site,
		      (long)all);
	perftools__profiles__profile__free_unpacked(p, NULL);
	/* delivered, labelled with its trigger */
	cr_assert_eq(hb_standin_log(&lines[0][0], sizeof(lines[0]), 4), 1);
	cr_assert(strstr(lines[0], "oom"), "%s", lines[0]);
	cr_assert_eq(hb_count_files(spool, ".spool", names, 16), 0);
}

/*
 * A working set of mapped file pages larger than the cgroup's room (thrash:
 * reclaim frees few of the pages it scans, which the kernel reports as
 * pressure) again and again: one pressure profile, then heapbpf says it
 * sees more within the cooldown and writes none.
 */
Test(watch, pressure_gives_one_profile_per_cooldown)
{
	const char *out = hb_tmp("out");
	char names[16][256], reply[128];
	int n;

	start_service(IDLE_CONF);
	cg_enter(svc.pid, 96);
	start_watch(out, (const char *[]){ "--on-pressure", "--cooldown", "3600", NULL });
	cr_assert_eq(svc_cmd(&svc, "thrash 128 2", reply, sizeof(reply), 120000), 0);
	cr_assert_eq(wait_files(out, "-pressure.pb.gz", 1, names), 1);
	/* a second storm, seen and held back */
	cr_assert_eq(svc_cmd(&svc, "thrash 128 2", reply, sizeof(reply), 120000), 0);
	wait_said("within the cooldown");
	kill(watcher, SIGINT);
	cr_assert_eq(hb_wait(watcher, 60000), 0);
	watcher = 0;
	n = hb_count_files(out, "-pressure.pb.gz", names, 16);
	cr_assert_eq(n, 1, "%d pressure profiles", n);
	cr_assert_eq(svc_stop(&svc), 0);
	svc.pid = 0;
}

/*
 * Pressure again once the cooldown is over gives the next profile: a
 * cooldown of 1 s, then a second storm started 2 s after the first profile
 * was written (the cooldown is over whatever the machine's load).
 */
Test(watch, pressure_after_the_cooldown_gives_the_next_profile)
{
	const char *out = hb_tmp("out");
	char names[16][256], reply[128];

	start_service(IDLE_CONF);
	cg_enter(svc.pid, 96);
	start_watch(out, (const char *[]){ "--on-pressure", "--cooldown", "1", NULL });
	cr_assert_eq(svc_cmd(&svc, "thrash 128 2", reply, sizeof(reply), 120000), 0);
	cr_assert_geq(wait_files(out, "-pressure.pb.gz", 1, names), 1);
	hb_sleep_ms(2000);
	cr_assert_eq(svc_cmd(&svc, "thrash 128 2", reply, sizeof(reply), 120000), 0);
	if (wait_files(out, "-pressure.pb.gz", 2, names) < 2) {
		char *err = watch_err();

		cr_assert_fail("no second pressure profile after the cooldown:\n%s", err);
	}
	kill(watcher, SIGINT);
	cr_assert_eq(hb_wait(watcher, 60000), 0);
	watcher = 0;
	cr_assert_eq(svc_stop(&svc), 0);
	svc.pid = 0;
}

/* v1: an eventfd the kernel signals at vmpressure's level or worse, in the test's cgroup. */
static int vmpressure_listen(const char *level)
{
	char path[PATH_MAX + 64], line[64];
	int efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC), lfd, cfd, n;

	cr_assert_geq(efd, 0);
	snprintf(path, sizeof(path), "%s/memory.pressure_level", cg);
	lfd = open(path, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(lfd, 0, "%s: %s", path, strerror(errno));
	snprintf(path, sizeof(path), "%s/cgroup.event_control", cg);
	cfd = open(path, O_WRONLY | O_CLOEXEC);
	cr_assert_geq(cfd, 0, "%s: %s", path, strerror(errno));
	n = snprintf(line, sizeof(line), "%d %d %s,hierarchy", efd, lfd, level);
	cr_assert_eq(write(cfd, line, (size_t)n), n, "%s: %s", line, strerror(errno));
	close(lfd);
	close(cfd);
	return efd;
}

static uint64_t signalled(int efd)
{
	uint64_t v = 0;

	return read(efd, &v, sizeof(v)) == sizeof(v) ? v : 0;
}

/* cat path > /dev/null in the test's cgroup, waited for. */
static void cat_in_cgroup(const char *path)
{
	pid_t pid = fork();

	cr_assert_geq(pid, 0);
	if (pid == 0) {
		char procs[PATH_MAX + 64], me[16];
		int fd, null = open("/dev/null", O_WRONLY);

		snprintf(procs, sizeof(procs), "%s/cgroup.procs", cg);
		snprintf(me, sizeof(me), "%d", (int)getpid());
		fd = open(procs, O_WRONLY);
		if (fd < 0 || write(fd, me, strlen(me)) < 0 || null < 0 || dup2(null, 1) < 0)
			_exit(126);
		execl("/bin/cat", "cat", path, path, (char *)NULL);
		_exit(127);
	}
	cr_assert_eq(hb_wait(pid, 120000), 0, "cat %s in %s failed", path, cg);
}

/*
 * The issue a user met: a cat of a 300 MiB file in the service's 96 MiB
 * cgroup reclaims page cache over and over, which is no pressure. The
 * kernel's own word, asked for beside heapbpf: reclaim happened (vmpressure
 * low) but never found it hard (no medium); heapbpf wrote no pressure
 * profile, though a demand profile after the reads shows it was listening.
 */
Test(watch, page_cache_reclaim_is_no_pressure)
{
	const char *out = hb_tmp("out"), *file = hb_tmp("big");
	static char block[1 << 20];
	char names[16][256];
	int low = -1, medium = -1, fd, n;

	/* the file, written and dropped from the cache outside the cgroup */
	fd = open(file, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	cr_assert_geq(fd, 0);
	memset(block, 0x5a, sizeof(block));
	for (int i = 0; i < 300; i++)
		cr_assert_eq(write(fd, block, sizeof(block)), (ssize_t)sizeof(block));
	cr_assert_eq(fdatasync(fd), 0);
	cr_assert_eq(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
	close(fd);
	start_service(IDLE_CONF);
	cg_enter(svc.pid, 96);
	if (cgroup_v1()) {
		low = vmpressure_listen("low");
		medium = vmpressure_listen("medium");
	}
	start_watch(out, (const char *[]){ "--on-pressure", "--cooldown", "1", NULL });
	for (int i = 0; i < 3; i++)
		cat_in_cgroup(file);
	kill(watcher, SIGUSR1);
	cr_assert_eq(wait_files(out, "-demand.pb.gz", 1, names), 1);
	kill(watcher, SIGINT);
	cr_assert_eq(hb_wait(watcher, 60000), 0);
	watcher = 0;
	if (cgroup_v1()) {
		cr_assert_gt(signalled(low), 0,
			     "no reclaim in the cgroup: the test proves nothing");
		cr_assert_eq(signalled(medium), 0,
			     "the kernel itself reported medium pressure for page-cache reads");
		close(low);
		close(medium);
	}
	n = hb_count_files(out, "-pressure.pb.gz", names, 16);
	if (n) {
		char *err = watch_err();

		cr_assert_fail("%d pressure profiles of page-cache reclaim:\n%s", n, err);
	}
	cr_assert_eq(svc_stop(&svc), 0);
	svc.pid = 0;
}

/*
 * A fill of 400 MiB in a 128 MiB cgroup, in well under a second: the
 * kernel reports the pressure before it kills, and heapbpf writes the
 * pressure profile before the oom one.
 */
Test(watch, a_fast_fill_gives_pressure_before_the_oom)
{
	const char *out = hb_tmp("out");
	char names[16][256], *err, *pressure, *oom;

	start_service(IDLE_CONF);
	cg_enter(svc.pid, 128);
	start_watch(out, (const char *[]){ "--on-pressure", NULL });
	err = fill_until_killed();
	pressure = strstr(err, ": pressure: ");
	oom = strstr(err, ": oom: chosen as the OOM killer's victim");
	cr_assert(pressure && oom && pressure < oom, "no pressure profile before the oom one:\n%s",
		  err);
	free(err);
	cr_assert_eq(hb_count_files(out, "-pressure.pb.gz", names, 16), 1);
	cr_assert_eq(hb_count_files(out, "-oom.pb.gz", names, 16), 1);
}

/*
 * The service paused, heapbpf watch with option 32M, then two steps of what
 * cmd adds, each waited for as a growth profile; the stop; the growth
 * profiles then (their names in names).
 */
static int growth_in_two_steps(const char *out, const char *option, const char *cmd,
			       char names[][256])
{
	char reply[128];

	cr_assert_eq(svc_cmd(&svc, "pause", reply, sizeof(reply), 10000), 0);
	start_watch(out, (const char *[]){ option, "32M", NULL });
	for (int step = 1; step <= 2; step++) {
		cr_assert_eq(svc_cmd(&svc, cmd, reply, sizeof(reply), 30000), 0);
		cr_assert_eq(wait_files(out, "-growth.pb.gz", step, names), step);
	}
	kill(watcher, SIGINT);
	cr_assert_eq(hb_wait(watcher, 60000), 0);
	watcher = 0;
	return hb_count_files(out, "-growth.pb.gz", names, 16);
}

/*
 * The in-use estimate in steps of 40 MiB with --on-growth 32M: a profile
 * per step, and heapbpf diff of the two names the growing site.
 *
 * Sampled every 128 KiB, each 1 MiB block with p = 1 - e^-8: a step is
 * estimated under 32 MiB only if 9 of its 40 blocks go unsampled (1e-23 a
 * run), and the two steps never reach the 96 MiB a third profile needs
 * (80.03 MiB at most), at whatever point of a step the once-a-second check
 * sets its mark. At jemalloc's 512 KiB, steps of 48 MiB missed the mark on
 * 27 samples or fewer (6e-7 a run), and their 96 blocks, estimated at 96
 * MiB or more about half the time, could give a third profile when both
 * checks fell inside a step, near its mark.
 */
Test(watch, growth_in_steps_gives_one_profile_each)
{
	const char *out = hb_tmp("out");
	char names[16][256], a[PATH_MAX + 256], b[PATH_MAX + 256], err[16384];

	start_service("prof:true,prof_active:false,lg_prof_sample:17");
	/*
	 * paused before the watch: the workers' own live buffers, sampled in the
	 * seconds before a pause, could reach the 32 MiB mark by themselves on a
	 * slow machine and give a growth profile ahead of the steps; paused
	 * between them, nothing more grows
	 */
	cr_assert_eq(growth_in_two_steps(out, "--on-growth", "hold 40", names), 2);
	/* the names sort by time */
	snprintf(a, sizeof(a), "%s/%s", out, strcmp(names[0], names[1]) < 0 ? names[0] : names[1]);
	snprintf(b, sizeof(b), "%s/%s", out, strcmp(names[0], names[1]) < 0 ? names[1] : names[0]);
	cr_assert_eq(hb_run((const char *[]){ "diff", a, b, "-o", hb_tmp("d.pb.gz"), NULL }, err,
			    sizeof(err), 60000),
		     0, "%s", err);
	cr_assert(strstr(err, "held_buffers"), "%s", err);
	cr_assert_eq(svc_stop(&svc), 0);
	svc.pid = 0;
}

/*
 * The process's RSS in steps of 40 MiB (fill: every byte touched) with
 * --on-rss-growth 32M, the service paused between them: a growth profile
 * per step, each said with the RSS it saw.
 */
Test(watch, rss_growth_in_steps_gives_one_profile_each)
{
	const char *out = hb_tmp("out");
	char names[16][256], *text;
	int n;

	start_service(IDLE_CONF);
	n = growth_in_two_steps(out, "--on-rss-growth", "fill 40", names);
	text = watch_err();
	cr_assert_eq(n, 2, "%d growth profiles:\n%s", n, text);
	cr_assert(strstr(text, "growth: RSS "), "%s", text);
	free(text);
	cr_assert_eq(svc_stop(&svc), 0);
	svc.pid = 0;
}

/* SIGUSR1 while attached: one profile now, exactly jemalloc's own counts. */
Test(watch, sigusr1_profile_matches_jemalloc_dump)
{
	const char *out = hb_tmp("out"), *dump = hb_tmp("je.heap");
	char names[16][256], reply[PATH_MAX + 64], cmd[PATH_MAX + 16], path[PATH_MAX + 256];

	start_service(HB_ORACLE_CONF);
	start_watch(out, (const char *[]){ "--raw", NULL });
	hb_sleep_ms(1000);
	/* no malloc, no free from here on */
	cr_assert_eq(svc_cmd(&svc, "pause", reply, sizeof(reply), 10000), 0);
	kill(watcher, SIGUSR1);
	cr_assert_eq(wait_files(out, "-demand.pb.gz", 1, names), 1);
	cr_assert_eq(kill(watcher, 0), 0, "heapbpf detached");
	cr_assert_eq(hb_wait_byte(svc.pid, flag, 1, 1000, watcher), true, "prof_active went off");
	snprintf(cmd, sizeof(cmd), "dump %s", dump);
	cr_assert_eq(svc_cmd(&svc, cmd, reply, sizeof(reply), 30000), 0);
	cr_assert(strncmp(reply, "dumped", 6) == 0, "%s", reply);
	snprintf(path, sizeof(path), "%s/%s", out, names[0]);
	cr_assert_gt(hb_oracle_compare_all(path, svc.pid, dump, NULL), 0);
	kill(watcher, SIGINT);
	cr_assert_eq(hb_wait(watcher, 60000), 0);
	watcher = 0;
	cr_assert_eq(hb_wait_byte(svc.pid, flag, 0, 10000, 0), true, "prof_active left on");
	cr_assert_eq(svc_stop(&svc), 0);
	svc.pid = 0;
}

/* The sum of sample type type's values in the pprof file at path; the comment "heapbpf: N samples". */
static int64_t pprof_total(const char *path, const char *type, uint64_t *samples)
{
	Perftools__Profiles__Profile *p;
	int64_t sum = 0;
	size_t k = SIZE_MAX;
	char *buf;
	ssize_t n = hb_read_file(path, &buf);

	cr_assert_gt(n, 0, "%s", path);
	cr_assert_eq(pprof_decode((uint8_t *)buf, n, &p), 0, "%s", path);
	free(buf);
	for (size_t i = 0; i < p->n_sample_type; i++) {
		if (!strcmp(p->string_table[p->sample_type[i]->type], type))
			k = i;
	}
	cr_assert_neq(k, SIZE_MAX, "no %s in %s", type, path);
	for (size_t i = 0; i < p->n_sample; i++)
		sum += p->sample[i]->value[k];
	*samples = UINT64_MAX;
	for (size_t i = 0; i < p->n_comment; i++) {
		unsigned long long c;

		if (sscanf(p->string_table[p->comment[i]], "heapbpf: %llu samples, ", &c) == 1)
			*samples = c;
	}
	cr_assert_neq(*samples, UINT64_MAX, "no \"heapbpf: N samples\" comment in %s", path);
	perftools__profiles__profile__free_unpacked(p, NULL);
	return sum;
}

/* Whether a comment of the pprof file at path holds text. */
static bool file_has_comment(const char *path, const char *text)
{
	Perftools__Profiles__Profile *p;
	char *buf;
	ssize_t n = hb_read_file(path, &buf);
	bool found;

	cr_assert_gt(n, 0, "%s", path);
	cr_assert_eq(pprof_decode((uint8_t *)buf, n, &p), 0, "%s", path);
	free(buf);
	found = has_comment(p, text);
	perftools__profiles__profile__free_unpacked(p, NULL);
	return found;
}

/*
 * Each profile's figures are its own window's: the stop profile after a
 * SIGUSR1 one holds what was allocated since (--raw: one count per sample),
 * and its summary line and its comment count the same samples, not the
 * run's so far (they did: "13837 samples" beside a window of 3318).
 */
Test(watch, each_profiles_figures_are_its_windows)
{
	const char *out = hb_tmp("out");
	char names[16][256], path[PATH_MAX + 256], *text;
	unsigned long long said[2] = { 0, 0 };
	uint64_t before, commented;
	const char *at;
	int64_t held;
	int k = 0;

	start_service("prof:true,prof_active:false,lg_prof_sample:14");
	start_watch(out, (const char *[]){ "--raw", NULL });
	/* both windows sample: the service allocates on (16 KiB of it is a sample) */
	before = svc_allocs(&svc);
	for (int i = 0; i < 600 && svc_allocs(&svc) < before + 20000; i++)
		hb_sleep_ms(100);
	kill(watcher, SIGUSR1);
	cr_assert_eq(wait_files(out, "-demand.pb.gz", 1, names), 1);
	before = svc_allocs(&svc);
	for (int i = 0; i < 600 && svc_allocs(&svc) < before + 20000; i++)
		hb_sleep_ms(100);
	kill(watcher, SIGINT);
	cr_assert_eq(hb_wait(watcher, 60000), 0);
	watcher = 0;
	cr_assert_eq(wait_files(out, "-stop.pb.gz", 1, names), 1);
	text = watch_err();
	for (at = text; (at = strstr(at, "heapbpf: ")) && k < 2; at++) {
		if (sscanf(at, "heapbpf: %llu samples, ", &said[k]) == 1)
			k++;
	}
	cr_assert_eq(k, 2, "not two summaries:\n%s", text);
	cr_assert_gt(said[0], 0, "%s", text);
	cr_assert_gt(said[1], 0, "%s", text);
	snprintf(path, sizeof(path), "%s/%s", out, names[0]);
	held = pprof_total(path, "alloc_objects", &commented);
	cr_assert_eq((uint64_t)held, said[1],
		     "the stop profile holds %lld samples, its summary says %llu:\n%s",
		     (long long)held, said[1], text);
	cr_assert_eq(commented, said[1], "its comment says %llu samples",
		     (unsigned long long)commented);
	/* and it says so: allocated in its window, in use since sampling started */
	cr_assert(file_has_comment(path, "heapbpf: scope: alloc_* are what was allocated in this "
					 "window, from "),
		  "%s has no scope comment", path);
	cr_assert(strstr(text, "allocated: in this window ("), "%s", text);
	cr_assert(strstr(strstr(text, "allocated: in this window ("),
			 "; in use: of everything sampled since sampling started at "),
		  "%s", text);
	/* the first, of the window since attach, needs none */
	cr_assert_eq(wait_files(out, "-demand.pb.gz", 1, names), 1);
	snprintf(path, sizeof(path), "%s/%s", out, names[0]);
	cr_assert_not(file_has_comment(path, "heapbpf: scope: "), "%s", path);
	free(text);
	cr_assert_eq(svc_stop(&svc), 0);
	svc.pid = 0;
}

static void write_pidfile(const char *path, pid_t pid)
{
	FILE *f = fopen(path, "we");

	cr_assert_not_null(f);
	fprintf(f, "%d\n", (int)pid);
	cr_assert_eq(fclose(f), 0);
}

/*
 * The process a pid file names is killed and started again under a new
 * pid: its exit profile is written, the watch goes on with the new one
 * (SIGUSR1 then profiles it), and neither is left with prof_active on.
 */
Test(watch, restart_under_a_new_pid_is_watched)
{
	const char *out = hb_tmp("out"), *pidfile = hb_tmp("svc.pid");
	const char *bin = hb_path("examples/alloc-service-static");
	const char *idle_args[] = { "--threads", "0", NULL };
	char names[16][256], want[32], reply[64];
	struct svc second;
	uint64_t flag2;
	int n, rc;

	start_service(IDLE_CONF);
	write_pidfile(pidfile, svc.pid);
	{
		const char *argv[] = { hb_path("heapbpf"), "watch", "--pidfile", pidfile,
				       "--output-dir",	   out,	    NULL };

		watcher = hb_spawn(argv, err_path());
	}
	cr_assert(hb_wait_switched(svc.pid, flag, 1, watcher), "heapbpf did not start sampling");
	/* 64 MiB allocated while sampling is on: the first process is sampled, however slow the run */
	cr_assert_eq(svc_cmd(&svc, "hold 64", reply, sizeof(reply), 20000), 0);
	cr_assert_str_eq(reply, "held 64");
	/* the service dies, its manager starts it again under a new pid */
	kill(svc.pid, SIGKILL);
	cr_assert_eq(hb_wait(svc.pid, 10000), 128 + SIGKILL);
	svc.pid = 0;
	cr_assert_eq(wait_files(out, "-exit.pb.gz", 1, names), 1);
	/*
	 * The new process allocates nothing (no workers): whether it is sampled
	 * before the stop does not depend on the machine's load, and a watch whose
	 * earlier process was sampled still exits 0 (it exited 3 when the newest
	 * process had no samples yet)
	 */
	cr_assert_eq(svc_start(&second, bin, IDLE_CONF, idle_args), 0);
	cr_assert_eq(hb_sym_addr(second.pid, bin, "je_prof_active_state", &flag2), 0);
	write_pidfile(pidfile, second.pid);
	cr_assert(hb_wait_switched(second.pid, flag2, 1, watcher),
		  "heapbpf did not watch the new process");
	kill(watcher, SIGUSR1);
	cr_assert_eq(wait_files(out, "-demand.pb.gz", 1, names), 1);
	snprintf(want, sizeof(want), "-%d-", second.pid);
	cr_assert(strstr(names[0], want), "%s is not of pid %d", names[0], second.pid);
	kill(watcher, SIGINT);
	rc = hb_wait(watcher, 60000);
	watcher = 0;
	cr_assert_eq(rc, 0, "heapbpf exited %d", rc);
	cr_assert(hb_wait_byte(second.pid, flag2, 0, 10000, 0), "prof_active left on");
	n = hb_count_files(out, "-stop.pb.gz", names, 16);
	cr_assert_eq(n, 1);
	cr_assert_eq(svc_stop(&second), 0);
}

/* Started before the service (no pid file yet): it waits, then watches what the file names. */
Test(watch, started_before_the_service_waits_for_it)
{
	const char *out = hb_tmp("out"), *pidfile = hb_tmp("svc.pid");
	const char *argv[] = { hb_path("heapbpf"), "watch", "--pidfile", pidfile,
			       "--output-dir",	   out,	    NULL };
	int rc;

	watcher = hb_spawn(argv, err_path());
	wait_said("waiting for the next one");
	start_service(IDLE_CONF);
	write_pidfile(pidfile, svc.pid);
	cr_assert(hb_wait_switched(svc.pid, flag, 1, watcher), "heapbpf did not start sampling");
	kill(watcher, SIGINT);
	rc = hb_wait(watcher, 60000);
	watcher = 0;
	/* 3: stopped at once, its stop profile may hold no sample */
	cr_assert(rc == 0 || rc == 3, "heapbpf exited %d", rc);
	cr_assert(hb_wait_byte(svc.pid, flag, 0, 10000, 0), "prof_active left on");
	cr_assert_eq(svc_stop(&svc), 0);
	svc.pid = 0;
}

/*
 * The profiles heapbpf's "wrote PATH[, NAME...]" lines name, in the order
 * said; their number. The names after the path (a trigger's RSS breakdown
 * beside its profile, when one was measured in time) are files of the same
 * directory: asserted to be there.
 */
static int wrote_lines(const char *text, char names[][PATH_MAX], int max)
{
	int n = 0;

	for (const char *at = strstr(text, "heapbpf: wrote "); at;
	     at = strstr(at + 1, "heapbpf: wrote ")) {
		const char *path = at + strlen("heapbpf: wrote ");
		size_t first = strcspn(path, ",\n");
		char dir[PATH_MAX], other[PATH_MAX + NAME_MAX + 2];
		struct stat st;

		if (names && n < max) {
			snprintf(names[n], PATH_MAX, "%.*s", (int)first, path);
			snprintf(dir, sizeof(dir), "%s", names[n]);
			*(strrchr(dir, '/') ?: dir) = 0;
			/* each further ", NAME" */
			for (const char *q = path + first; *q == ',';
			     q += 2 + strcspn(q + 2, ",\n")) {
				size_t len = strcspn(q + 2, ",\n");

				snprintf(other, sizeof(other), "%s/%.*s", dir,
					 (int)(len < NAME_MAX ? len : NAME_MAX), q + 2);
				cr_assert_eq(stat(other, &st), 0, "heapbpf said it wrote %s: %s",
					     other, strerror(errno));
			}
		}
		n++;
	}
	return n;
}

/*
 * Five SIGUSR1, each sent as soon as the profile before it was said: the
 * profiles of one second share their stamp, and each must still be a file
 * of its own (three files for five "wrote" lines before: a profile of the
 * same second was renamed over the one before it). Every line names a file
 * that is there, no two the same. Sent once the first RSS breakdown is
 * measured, so that each line also names the breakdown written beside its
 * profile (on a loaded machine the breakdown had sometimes come first, and
 * a test reading the line as one path failed).
 */
Test(watch, profiles_of_one_second_each_get_a_file)
{
	const char *out = hb_tmp("out");
	char names[16][256], said[8][PATH_MAX], *text = NULL;
	struct stat st;
	int n, lines = 0;

	start_service(IDLE_CONF);
	start_watch(out, (const char *[]){ "-v", NULL });
	for (int w = 0; w < hb_guard_ms(30000); w += 10) {
		free(text);
		text = watch_err();
		if (strstr(text, "RSS breakdown measured"))
			break;
		hb_sleep_ms(10);
	}
	cr_assert(strstr(text, "RSS breakdown measured"), "no RSS breakdown:\n%s", text);
	for (int i = 0; i < 5; i++) {
		cr_assert_eq(kill(watcher, SIGUSR1), 0);
		/* one at a time: signals sent together may merge into one */
		for (int w = 0; w < 30000 && lines <= i; w++) {
			free(text);
			text = watch_err();
			lines = wrote_lines(text, NULL, 0);
			if (lines <= i)
				hb_sleep_ms(1);
		}
		cr_assert_gt(lines, i, "SIGUSR1 %d wrote nothing:\n%s", i + 1, text);
	}
	free(text);
	kill(watcher, SIGINT);
	cr_assert_eq(hb_wait(watcher, 60000), 0);
	watcher = 0;
	text = watch_err();
	lines = wrote_lines(text, said, 8);
	n = hb_count_files(out, ".pb.gz", names, 16);
	cr_assert_eq(lines, 6, "five demand profiles and the stop profile:\n%s", text);
	cr_assert_eq(n, lines, "%d files for %d \"wrote\" lines:\n%s", n, lines, text);
	cr_assert_eq(hb_count_files(out, "-demand.pb.gz", NULL, 0), 5, "%s", text);
	cr_assert_eq(hb_count_files(out, "-stop.pb.gz", NULL, 0), 1, "%s", text);
	cr_assert_eq(hb_count_files(out, "-demand.rss.json", NULL, 0), 5, "%s", text);
	for (int i = 0; i < lines; i++) {
		cr_assert_eq(stat(said[i], &st), 0, "heapbpf said it wrote %s: %s", said[i],
			     strerror(errno));
		for (int j = 0; j < i; j++)
			cr_assert_str_neq(said[i], said[j], "written twice: %s", said[i]);
	}
	free(text);
	cr_assert(hb_wait_byte(svc.pid, flag, 0, 10000, 0), "prof_active left on");
	cr_assert_eq(svc_stop(&svc), 0);
	svc.pid = 0;
}
