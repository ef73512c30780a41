// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * heapbpf report CORE against real cores of the example service (gdb's
 * gcore, and one the kernel writes): the service runs with sampling on and
 * accumulating, its workers parked; the bytes of jemalloc's globals in the
 * core equal the stopped process's memory; the live heap read from the core
 * equals heapbpf --live-heap of the same stopped process stack for stack,
 * and jemalloc's own prof.dump; a core without jemalloc, a truncated core and
 * a wrong --exe are refused in one sentence with nothing written.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "heap/coreheap.h"
#include "harness.h"
#include "oracle.h"
#include "symbols/proc.h"
#include "jemalloc/target.h"

/* prof.dump's raw counts (5.3.0), sampling on from the start, accumulated totals kept */
#define CORE_CONF "prof:true,prof_active:true,prof_accum:true,prof_unbias:false,lg_prof_sample:14"

static void fini(void)
{
	hb_tmpdir_cleanup();
}

TestSuite(core, .fini = fini, .timeout = 240);

/* A jemalloc build to read cores of: the service, the variable its jemalloc reads, the setting. */
struct core_case {
	const char *bin;
	const char *conf_env; /* NULL: MALLOC_CONF */
	const char *conf;     /* NULL: CORE_CONF */
};

/* The service with its workers parked after a second of work: its heap no longer changes. */
static void start_parked_as(struct svc *s, const struct core_case *k)
{
	const char *args[] = { "--threads", "2", "--rate", "0", NULL };
	char reply[64], conf[256];
	const char *env[] = { conf, NULL };

	snprintf(conf, sizeof(conf), "%s=%s", k->conf_env ? k->conf_env : "MALLOC_CONF",
		 k->conf ? k->conf : CORE_CONF);
	cr_assert_eq(svc_start_env(s, k->bin, NULL, env, args), 0, "cannot start %s", k->bin);
	hb_sleep_ms(1500);
	cr_assert_eq(svc_cmd(s, "pause", reply, sizeof(reply), 10000), 0);
	cr_assert_str_eq(reply, "paused");
}

static void start_parked(struct svc *s, const char *bin)
{
	const struct core_case k = { .bin = bin };

	start_parked_as(s, &k);
}

/* gdb's gcore of pid into DIR/core.PID; returns the path (static). */
static const char *gcore(pid_t pid)
{
	static char path[PATH_MAX + 32];
	char prefix[PATH_MAX], pidstr[16], errpath[PATH_MAX + 16];
	struct stat st;
	int rc;

	snprintf(prefix, sizeof(prefix), "%s/core", hb_tmpdir());
	snprintf(pidstr, sizeof(pidstr), "%d", pid);
	snprintf(path, sizeof(path), "%s.%d", prefix, pid);
	snprintf(errpath, sizeof(errpath), "%s/gcore.out", hb_tmpdir());
	const char *argv[] = { "/usr/bin/gcore", "-o", prefix, pidstr, NULL };
	rc = hb_wait(hb_spawn(argv, errpath), 120000);
	cr_assert_eq(rc, 0, "gcore exited with %d (see %s; is gdb installed?)", rc, errpath);
	cr_assert_eq(stat(path, &st), 0, "gcore wrote no %s", path);
	return path;
}

/* heapbpf ARGS..., its stderr in errbuf; the exit code. */
static int heapbpf(char *errbuf, size_t len, const char *const *args)
{
	return hb_run(args, errbuf, len, 120000);
}

/* Lines sorted, for comparing folded stacks whatever their order. */
static char *sorted_lines(const char *path)
{
	char cmd[2 * PATH_MAX + 64], *out = NULL;
	char sorted[PATH_MAX + 16];

	snprintf(sorted, sizeof(sorted), "%s.sorted", path);
	snprintf(cmd, sizeof(cmd), "LC_ALL=C sort %s > %s", path, sorted);
	cr_assert_eq(system(cmd), 0);
	cr_assert_geq(hb_read_file(sorted, &out), 0, "cannot read %s", sorted);
	return out;
}

static void assert_one_sentence_error(int rc, const char *err, const char *want)
{
	cr_assert_eq(rc, 1, "exit %d: %s", rc, err);
	cr_assert(strstr(err, want), "wanted \"%s\" in: %s", want, err);
	cr_assert_eq(strncmp(err, "heapbpf: ", 9), 0, "%s", err);
	cr_assert(strchr(err, '\n') == err + strlen(err) - 1, "more than one line: %s", err);
}

static bool exists(const char *path)
{
	return access(path, F_OK) == 0;
}

/* The bytes of jemalloc's globals (and the table they lead to) in the core equal the process's. */
Test(core, memory_equals_the_stopped_process)
{
	struct jemalloc_target *t;
	struct core_file *cf;
	struct svc s;
	char err[1024] = "";
	uint64_t bt2gctx, addrs[4];
	uint8_t live[64], dumped[64];
	const char *path;

	hb_require_bpf();
	start_parked(&s, hb_own_example("alloc-service-static"));
	cr_assert_eq(jemalloc_target__find(s.pid, NULL, &t, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(jemalloc_target__global(t, "bt2gctx", false, &bt2gctx), 0);
	kill(s.pid, SIGSTOP);
	path = gcore(s.pid);
	cr_assert_eq(memsrc_core__open(path, &cf, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(cf->pid, s.pid);
	cr_assert_geq(cf->threads, 3, "main, control and 2 workers: %u", cf->threads);
	addrs[0] = t->opt_prof_addr;
	addrs[1] = t->lg_prof_sample_addr;
	addrs[2] = t->active_addr;
	addrs[3] = bt2gctx;
	for (int i = 0; i < 4; i++) {
		cr_assert_eq(proc_mem_read(s.pid, addrs[i], live, sizeof(live)), 0);
		cr_assert_eq(memsrc_core__read(cf, addrs[i], dumped, sizeof(dumped)), 0,
			     "global %d at 0x%" PRIx64 " is not in the core", i, addrs[i]);
		cr_assert_eq(memcmp(live, dumped, sizeof(live)), 0, "global %d differs", i);
	}
	/* the table's buckets: ckh_t's tab pointer is its last field but one (5.3.0: @40) */
	uint64_t tab;
	memcpy(&tab, live + 40, 8);
	cr_assert_eq(proc_mem_read(s.pid, tab, live, sizeof(live)), 0, "tab 0x%" PRIx64, tab);
	cr_assert_eq(memsrc_core__read(cf, tab, dumped, sizeof(dumped)), 0);
	cr_assert_eq(memcmp(live, dumped, sizeof(live)), 0, "the table's first buckets differ");
	/*
	 * Code is not dumped by gcore: not in the image, not read as zeros. The
	 * service runs from a copy of its own: gdb dumps a whole private file
	 * mapping once one page of it is anonymous, and a test beside this one
	 * with uprobes on the example's file (a session of several targets, the
	 * agent) makes one in every process that maps it (seen in CI).
	 */
	cr_assert_not(memsrc_core__mapped(cf, t->alloc_addr, 1));
	cr_assert_not(memsrc_core__mapped(cf, t->free_addr, 1));
	memsrc_core__free(cf);
	jemalloc_target__free(t);
	kill(s.pid, SIGCONT);
	cr_assert_eq(svc_stop(&s), 0);
}

/* The snapshot from the core equals the live one stack for stack, and jemalloc's prof.dump. */
static void snapshot_equals_live_and_dump(const struct core_case *k)
{
	char live[PATH_MAX], fromcore[PATH_MAX], pprof[PATH_MAX], dump[PATH_MAX];
	char err[4096], pid[16], reply[128], cmd[PATH_MAX + 8];
	char *a, *b;
	const char *core;
	int64_t total;
	struct svc s;
	int rc;

	hb_require_bpf();
	snprintf(live, sizeof(live), "%s/live.folded", hb_tmpdir());
	snprintf(fromcore, sizeof(fromcore), "%s/core.folded", hb_tmpdir());
	snprintf(pprof, sizeof(pprof), "%s/core.pb.gz", hb_tmpdir());
	snprintf(dump, sizeof(dump), "%s/jemalloc.heap", hb_tmpdir());
	start_parked_as(&s, k);
	snprintf(pid, sizeof(pid), "%d", s.pid);
	kill(s.pid, SIGSTOP);
	const char *live_args[] = { "--pid",  pid,  "--live-heap", "--raw", "-f",
				    "folded", "-o", live,	   NULL };
	rc = heapbpf(err, sizeof(err), live_args);
	cr_assert_eq(rc, 0, "--live-heap exited with %d: %s", rc, err);
	core = gcore(s.pid);
	const char *core_args[] = { "report", core, "--raw", "-f", "folded", "-o", fromcore, NULL };
	rc = heapbpf(err, sizeof(err), core_args);
	cr_assert_eq(rc, 0, "report of the core exited with %d: %s", rc, err);
	cr_assert(strstr(err, "at the time of the dump"), "%s", err);
	const char *pprof_args[] = { "report", core, "--core", "--raw", "-o", pprof, NULL };
	rc = heapbpf(err, sizeof(err), pprof_args);
	cr_assert_eq(rc, 0, "report of the core (pprof) exited with %d: %s", rc, err);
	a = sorted_lines(live);
	b = sorted_lines(fromcore);
	cr_assert_gt(strlen(a), 0, "an empty live heap proves nothing");
	cr_assert_str_eq(a, b, "the core's live heap differs from the process's");
	free(a);
	free(b);
	/* jemalloc's own account of the same heap */
	kill(s.pid, SIGCONT);
	snprintf(cmd, sizeof(cmd), "dump %s", dump);
	cr_assert_eq(svc_cmd(&s, cmd, reply, sizeof(reply), 20000), 0);
	cr_assert_str_eq(reply, "dumped");
	total = hb_oracle_compare_all(pprof, s.pid, dump, NULL);
	cr_assert_gt(total, 50, "only %" PRId64 " samples compared", total);
	cr_assert_eq(svc_stop(&s), 0);
}

Test(core, static_snapshot_equals_live_and_dump)
{
	const struct core_case k = { .bin = hb_path("examples/alloc-service-static") };

	snapshot_equals_live_and_dump(&k);
}

Test(core, shared_snapshot_equals_live_and_dump)
{
	const struct core_case k = { .bin = hb_path("examples/alloc-service-shared") };

	snapshot_equals_live_and_dump(&k);
}

/* The jemalloc builds of tests/fixtures: HEAPBPF_FIXTURES (set by make), else <build>/fixtures. */
static const char *fixture(const char *rel)
{
	char bin[PATH_MAX];

	snprintf(bin, sizeof(bin), "bin/%s", rel);
	return hb_fixture_built(bin);
}

TestSuite(core_versions, .fini = fini, .timeout = 240);

/* 5.2.1 (with upstream's late-activation fix; it has no prof_unbias and dumps raw counts) */
Test(core_versions, je521_static)
{
	const struct core_case k = {
		.bin = fixture("je521fix-static"),
		.conf = "prof:true,prof_active:true,prof_accum:true,lg_prof_sample:14",
	};

	snapshot_equals_live_and_dump(&k);
}

/* tikv's names (_rjem_je_, _RJEM_MALLOC_CONF), shared */
Test(core_versions, rjem530_shared)
{
	const struct core_case k = { .bin = fixture("rjem530-shared"),
				     .conf_env = "_RJEM_MALLOC_CONF" };

	snapshot_equals_live_and_dump(&k);
}

/* 5.3.1 from Debian unstable's source package: static, tikv's names shared, debug */
Test(core_versions, je531_static)
{
	const struct core_case k = { .bin = fixture("je531-static") };

	snapshot_equals_live_and_dump(&k);
}

Test(core_versions, rjem531_shared)
{
	const struct core_case k = { .bin = fixture("rjem531-shared"),
				     .conf_env = "_RJEM_MALLOC_CONF" };

	snapshot_equals_live_and_dump(&k);
}

Test(core_versions, debug531_static)
{
	const struct core_case k = { .bin = fixture("debug531-static") };

	snapshot_equals_live_and_dump(&k);
}

/* a --enable-debug build: its layout shifted, found from DWARF as in a live process */
Test(core_versions, debug530_static)
{
	const struct core_case k = { .bin = fixture("debug530-static") };

	snapshot_equals_live_and_dump(&k);
}

/* A process that wrote a title over its command line, as Redis does: named by its executable. */
Test(core, named_after_the_executable_not_the_title)
{
	char err[4096], out[PATH_MAX], reply[128], want[128], path[64], *cmdline;
	struct core_file *cf;
	const char *core;
	struct svc s;
	pid_t pid;
	int rc;

	hb_require_bpf();
	snprintf(out, sizeof(out), "%s/titled.folded", hb_tmpdir());
	start_parked(&s, hb_path("examples/alloc-service-shared"));
	pid = s.pid;
	cr_assert_eq(svc_cmd(&s, "retitle renamed-title *:7", reply, sizeof(reply), 10000), 0);
	cr_assert_str_eq(reply, "retitled");
	snprintf(path, sizeof(path), "/proc/%d/cmdline", s.pid);
	cr_assert_gt(hb_read_file(path, &cmdline), 0);
	cr_assert_str_eq(cmdline, "renamed-title *:7", "the title did not take: %s", cmdline);
	free(cmdline);
	kill(s.pid, SIGSTOP);
	core = gcore(s.pid);
	kill(s.pid, SIGCONT);
	cr_assert_eq(svc_stop(&s), 0);
	/* gcore takes pr_fname from the command line: the name must not come from there */
	cr_assert_eq(memsrc_core__open(core, &cf, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(cf->comm, "alloc-service-s",
			 "named \"%s\", not the kernel's 15 bytes of the name", cf->comm);
	memsrc_core__free(cf);
	const char *args[] = { "report", core, "-f", "folded", "-o", out, NULL };
	rc = heapbpf(err, sizeof(err), args);
	cr_assert_eq(rc, 0, "exit %d: %s", rc, err);
	snprintf(want, sizeof(want), "live heap of pid %d (alloc-service-s) at the time", pid);
	cr_assert(strstr(err, want), "wanted \"%s\" in: %s", want, err);
	cr_assert_null(strstr(err, "renamed-title"), "%s", err);
}

Test(core, process_without_jemalloc)
{
	char err[2048], pidstr[16], out[PATH_MAX];
	const char *argv[] = { "/bin/sleep", "120", NULL };
	const char *core;
	pid_t pid;
	int rc;

	hb_require_bpf();
	snprintf(out, sizeof(out), "%s/out.pb.gz", hb_tmpdir());
	pid = hb_spawn(argv, "/dev/null");
	cr_assert_gt(pid, 0);
	hb_sleep_ms(200);
	snprintf(pidstr, sizeof(pidstr), "%d", pid);
	core = gcore(pid);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	const char *args[] = { "report", core, "-o", out, NULL };
	rc = heapbpf(err, sizeof(err), args);
	assert_one_sentence_error(rc, err, "does not use jemalloc");
	cr_assert_not(exists(out), "a file was written");
}

Test(core, truncated_core)
{
	char err[2048], out[PATH_MAX], cut[PATH_MAX + 8], cmd[3 * PATH_MAX];
	const char *core;
	struct stat st;
	struct svc s;
	int rc;

	hb_require_bpf();
	snprintf(out, sizeof(out), "%s/out.folded", hb_tmpdir());
	start_parked(&s, hb_path("examples/alloc-service-static"));
	core = gcore(s.pid);
	cr_assert_eq(svc_stop(&s), 0);
	cr_assert_eq(stat(core, &st), 0);
	snprintf(cut, sizeof(cut), "%s.cut", core);
	snprintf(cmd, sizeof(cmd), "head -c %lld %s > %s", (long long)st.st_size / 2, core, cut);
	cr_assert_eq(system(cmd), 0);
	const char *args[] = { "report", cut, "-f", "folded", "-o", out, NULL };
	rc = heapbpf(err, sizeof(err), args);
	assert_one_sentence_error(rc, err, "is truncated");
	cr_assert_not(exists(out), "a file was written");
	/* cut inside the headers: still recognized as a core, still refused */
	snprintf(cmd, sizeof(cmd), "head -c 100 %s > %s", core, cut);
	cr_assert_eq(system(cmd), 0);
	const char *args2[] = { "report", cut, "--core", "-o", out, NULL };
	rc = heapbpf(err, sizeof(err), args2);
	assert_one_sentence_error(rc, err, "not a usable core file");
	cr_assert_not(exists(out), "a file was written");
}

Test(core, wrong_exe)
{
	char err[2048], out[PATH_MAX];
	const char *core;
	struct svc s;
	int rc;

	hb_require_bpf();
	snprintf(out, sizeof(out), "%s/out.pb.gz", hb_tmpdir());
	start_parked(&s, hb_path("examples/alloc-service-static"));
	core = gcore(s.pid);
	cr_assert_eq(svc_stop(&s), 0);
	const char *args[] = { "report", core, "--exe", "/bin/true", "-o", out, NULL };
	rc = heapbpf(err, sizeof(err), args);
	assert_one_sentence_error(rc, err, "is not the executable of core file");
	cr_assert_not(exists(out), "a file was written");
	/* the right one, under another name, is accepted */
	char copy[PATH_MAX + 8], cmd[3 * PATH_MAX];
	snprintf(copy, sizeof(copy), "%s/renamed-service", hb_tmpdir());
	snprintf(cmd, sizeof(cmd), "cp %s %s", hb_path("examples/alloc-service-static"), copy);
	cr_assert_eq(system(cmd), 0);
	const char *ok[] = { "report", core, "--exe", copy, "--raw", "-o", out, NULL };
	rc = heapbpf(err, sizeof(err), ok);
	cr_assert_eq(rc, 0, "exit %d: %s", rc, err);
	cr_assert(exists(out));
}

/* The kernel's core_pattern as it was, restored whatever happens. */
static char saved_pattern[256];

static void restore_pattern(void)
{
	FILE *f;

	if (!saved_pattern[0])
		return;
	f = fopen("/proc/sys/kernel/core_pattern", "w");
	if (f) {
		fputs(saved_pattern, f);
		fclose(f);
	}
	saved_pattern[0] = '\0';
}

static void set_pattern(const char *pattern)
{
	FILE *f = fopen("/proc/sys/kernel/core_pattern", "r");

	cr_assert(f, "cannot read core_pattern: %s", strerror(errno));
	cr_assert(fgets(saved_pattern, sizeof(saved_pattern), f));
	fclose(f);
	f = fopen("/proc/sys/kernel/core_pattern", "w");
	cr_assert(f, "cannot set core_pattern: %s", strerror(errno));
	fputs(pattern, f);
	cr_assert_eq(fclose(f), 0, "cannot set core_pattern to %s", pattern);
}

static void kernel_fini(void)
{
	restore_pattern();
	hb_tmpdir_cleanup();
}

/* A core the kernel writes (SIGQUIT) reads as the live heap did just before. */
Test(core, kernel_written_core, .fini = kernel_fini)
{
	char live[PATH_MAX], fromcore[PATH_MAX], pattern[PATH_MAX], core[PATH_MAX];
	char err[4096], pid[16], *a, *b;
	struct rlimit rl = { RLIM_INFINITY, RLIM_INFINITY };
	struct svc s;
	int rc, st, lock;

	hb_require_bpf();
	snprintf(live, sizeof(live), "%s/live.folded", hb_tmpdir());
	snprintf(fromcore, sizeof(fromcore), "%s/kcore.folded", hb_tmpdir());
	snprintf(pattern, sizeof(pattern), "%s/kcore.%%p", hb_tmpdir());
	/* inherited by the service: it may dump without limit */
	cr_assert_eq(setrlimit(RLIMIT_CORE, &rl), 0);
	start_parked(&s, hb_path("examples/alloc-service-static"));
	snprintf(pid, sizeof(pid), "%d", s.pid);
	snprintf(core, sizeof(core), "%s/kcore.%d", hb_tmpdir(), s.pid);
	const char *live_args[] = { "--pid",  pid,  "--live-heap", "--raw", "-f",
				    "folded", "-o", live,	   NULL };
	rc = heapbpf(err, sizeof(err), live_args);
	cr_assert_eq(rc, 0, "--live-heap exited with %d: %s", rc, err);
	/*
	 * The pattern is global: set only for the instant of the dump, and
	 * never by two such tests at once (the plain and the sanitized pass).
	 */
	lock = open("/tmp/heapbpf-test-core-pattern.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	cr_assert_geq(lock, 0);
	cr_assert_eq(flock(lock, LOCK_EX), 0);
	set_pattern(pattern);
	kill(s.pid, SIGQUIT);
	rc = waitpid(s.pid, &st, 0);
	restore_pattern();
	close(lock);
	cr_assert_eq(rc, s.pid);
	cr_assert(WIFSIGNALED(st) && WCOREDUMP(st), "no core dumped (status 0x%x)", st);
	cr_assert(exists(core), "the kernel wrote no %s", core);
	const char *args[] = { "report", core, "--raw", "-f", "folded", "-o", fromcore, NULL };
	rc = heapbpf(err, sizeof(err), args);
	cr_assert_eq(rc, 0, "report of the kernel's core exited with %d: %s", rc, err);
	a = sorted_lines(live);
	b = sorted_lines(fromcore);
	cr_assert_gt(strlen(a), 0);
	cr_assert_str_eq(a, b, "the kernel core's live heap differs from the process's");
	free(a);
	free(b);
}

/* The binaries moved away after the dump: found under --binary-path (by name), not guessed. */
Test(core, binaries_found_under_binary_path)
{
	char run[PATH_MAX], syms[PATH_MAX], bin[PATH_MAX + 16], moved[PATH_MAX + 16];
	char cmd[5 * PATH_MAX], err[4096], out[PATH_MAX], *text = NULL;
	const char *core;
	struct svc s;
	int rc;

	hb_require_bpf();
	snprintf(run, sizeof(run), "%s/run", hb_tmpdir());
	snprintf(syms, sizeof(syms), "%s/syms", hb_tmpdir());
	snprintf(bin, sizeof(bin), "%s/service", run);
	snprintf(moved, sizeof(moved), "%s/service", syms);
	snprintf(out, sizeof(out), "%s/out.folded", hb_tmpdir());
	snprintf(cmd, sizeof(cmd), "mkdir -p %s %s && cp %s %s", run, syms,
		 hb_path("examples/alloc-service-static"), bin);
	cr_assert_eq(system(cmd), 0);
	start_parked(&s, bin);
	core = gcore(s.pid);
	cr_assert_eq(svc_stop(&s), 0);
	cr_assert_eq(rename(bin, moved), 0);
	const char *args[] = { "report", core, "-f", "folded", "-o", out, NULL };
	rc = heapbpf(err, sizeof(err), args);
	assert_one_sentence_error(rc, err, "is not on this machine");
	cr_assert(strstr(err, bin), "%s", err);
	cr_assert_not(exists(out), "a file was written");
	const char *found[] = { "report", core, "--binary-path", syms, "-f", "folded", "-o",
				out,	  NULL };
	rc = heapbpf(err, sizeof(err), found);
	cr_assert_eq(rc, 0, "exit %d: %s", rc, err);
	cr_assert_geq(hb_read_file(out, &text), 0);
	/* symbolized from the moved binary: the sites by name */
	cr_assert(strstr(text, "worker_main;run_one;"), "%s", text);
	free(text);
}
