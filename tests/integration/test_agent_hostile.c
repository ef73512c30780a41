// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * heapbpf agent beside processes that feed it garbage (issue 30: the agent
 * survives any process it meets). Each is a small program built here that
 * looks like jemalloc 5.3.0 to heapbpf (the sampling functions, the globals,
 * a version string in its read-only data) but holds garbage where
 * jemalloc's structures are, or whose DWARF lies about them. Beside them
 * in the test's cgroup, a real example service: the agent must refuse or
 * let go of each impostor with its reason, leave nothing switched on in
 * it, keep running, and go on profiling the service.
 */
#include <errno.h>
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

#define SERVICE	  "examples/alloc-service-static"
#define IDLE_CONF "prof:true,prof_active:false"
#define WAIT_MS	  60000

static char cg_parent[PATH_MAX]; /* the test's own parent cgroup; "" when none */
static char cg_name[64];	 /* its path as /proc/PID/cgroup shows it */
static pid_t agent_pid;
static pid_t impostors[5];

static void hostile_fini(void)
{
	if (agent_pid > 0) {
		kill(agent_pid, SIGKILL);
		hb_wait(agent_pid, 5000);
		agent_pid = 0;
	}
	for (size_t i = 0; i < sizeof(impostors) / sizeof(impostors[0]); i++) {
		if (impostors[i] > 0) {
			kill(impostors[i], SIGKILL);
			hb_wait(impostors[i], 5000);
			impostors[i] = 0;
		}
	}
	hb_cgroup_drain(cg_parent);
	hb_tmpdir_cleanup();
}

TestSuite(agent_hostile, .fini = hostile_fini, .timeout = 240);

/* pid moved into the test's own cgroup (made on first use). */
static void place(pid_t pid)
{
	char root[512], procs[PATH_MAX + 16];
	FILE *f;

	if (!cg_parent[0]) {
		hb_cgroup_root(root, sizeof(root));
		snprintf(cg_name, sizeof(cg_name), "/hbhostile-%d", getpid());
		snprintf(cg_parent, sizeof(cg_parent), "%s%s", root, cg_name);
		cr_assert(mkdir(cg_parent, 0755) == 0 || errno == EEXIST, "mkdir %s: %s", cg_parent,
			  strerror(errno));
	}
	snprintf(procs, sizeof(procs), "%s/cgroup.procs", cg_parent);
	f = fopen(procs, "we");
	cr_assert_not_null(f, "%s: %s", procs, strerror(errno));
	fprintf(f, "%d\n", pid);
	cr_assert_eq(fclose(f), 0, "cannot move pid %d into %s", pid, cg_parent);
}

/* The agent's stderr so far (a static copy: for messages). */
static const char *agent_err(void)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/agent.err", hb_tmpdir());
	return hb_file_text(path);
}

/*
 * A process heapbpf takes for jemalloc 5.3.0: its sampling functions (named
 * by the private namespace je_, with 5.3.0's parameters) and the globals
 * heapbpf reads and writes, a version string in .rodata. Once its
 * prof_active_state is on it calls both functions every millisecond with
 * pointers into garbage whose every word points back into the garbage
 * (aligned, and far enough from its end for a whole backtrace), so that
 * each read heapbpf makes through them succeeds and means nothing.
 * -DSANE_FIRST=N: its first N calls pass what 5.3.0 passes (a tctx, its
 * gctx and a backtrace of three frames in its code, a prof_info_t), so
 * that a self-check confirms the layout before the garbage comes.
 * -DLIE: src/prof.c's DWARF puts prof_tctx_t.gctx at 88 (5.3.0: 96).
 * -DRO_FLAG: the flag lives in read-only memory.
 * -DUNREADABLE (with SANE_FIRST): after the sane calls, its tctx and
 * prof_info point into the null page, so that no read through them succeeds.
 */
static const char impostor_src[] =
	"#include <stdbool.h>\n"
	"#include <stddef.h>\n"
	"#include <stdint.h>\n"
	"#include <stdio.h>\n"
	"#include <time.h>\n"
	"#include <unistd.h>\n"
	"#ifndef SANE_FIRST\n"
	"#define SANE_FIRST 0\n"
	"#endif\n"
	"const char je_version[] = VERSION;\n"
	"char je_opt_prof_prefix[4097];\n"
	"bool je_opt_prof = true;\n"
	"size_t je_lg_prof_sample = 19;\n"
	"#ifdef RO_FLAG\n"
	"const bool je_prof_active_state = false;\n"
	"#else\n"
	"bool je_prof_active_state;\n"
	"#endif\n"
	"#define N 8192\n"
	"/* padded: a backtrace read from a slot near the end stays in the array */\n"
	"static uint64_t garbage[N + 1024];\n"
	"static uint64_t tctx[32], gctx[32], frames[4], info[4], obj[8];\n"
	"#ifdef UNREADABLE\n"
	"#define GARBAGE(i) ((void *)16)\n"
	"#else\n"
	"#define GARBAGE(i) ((void *)&garbage[(i) % N])\n"
	"#endif\n"
	"#ifdef LIE\n"
	"struct prof_tctx_s { void *tdata; char pad[80]; void *gctx; };\n"
	"#else\n"
	"struct prof_tctx_s;\n"
	"#endif\n"
	"__attribute__((noinline, used)) void je_prof_malloc_sample_object(void *tsd,\n"
	"	const void *ptr, size_t size, size_t usize, struct prof_tctx_s *tctx)\n"
	"{\n"
	"	__asm__ volatile(\"\" : : \"r\"(tsd), \"r\"(ptr), \"r\"(size), \"r\"(usize),\n"
	"			 \"r\"(tctx) : \"memory\");\n"
	"}\n"
	"__attribute__((noinline, used)) void je_prof_free_sampled_object(void *tsd,\n"
	"	size_t usize, void *prof_info)\n"
	"{\n"
	"	__asm__ volatile(\"\" : : \"r\"(tsd), \"r\"(usize), \"r\"(prof_info) : \"memory\");\n"
	"}\n"
	"int main(void)\n"
	"{\n"
	"	uint64_t calls = 0;\n"
	"	for (size_t i = 0; i < N + 1024; i++)\n"
	"		garbage[i] = (uint64_t)(uintptr_t)&garbage[(i * 7919 + 13) % N + i % 5];\n"
	"	/* 5.3.0: tctx->gctx @96, gctx->bt @104 {vec, len}, prof_info_t {time, tctx, size} */\n"
	"	tctx[96 / 8] = (uintptr_t)gctx;\n"
	"	gctx[104 / 8] = (uintptr_t)frames;\n"
	"	gctx[112 / 8] = 3;\n"
	"	for (int i = 0; i < 3; i++)\n"
	"		frames[i] = (uintptr_t)main + 8 * (i + 1);\n"
	"	info[1] = (uintptr_t)tctx;\n"
	"	info[2] = 64;\n"
	"	printf(\"ready %s\\n\", je_version);\n"
	"	fflush(stdout);\n"
	"	for (uint64_t k = 0;; k++) {\n"
	"		if (!*(volatile const bool *)&je_prof_active_state) {\n"
	"		} else if (calls++ < SANE_FIRST) {\n"
	"			struct timespec ts;\n"
	"			clock_gettime(CLOCK_MONOTONIC, &ts);\n"
	"			info[0] = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;\n"
	"			je_prof_malloc_sample_object(garbage, obj, 64, 64,\n"
	"				(struct prof_tctx_s *)tctx);\n"
	"			je_prof_free_sampled_object(garbage, 64, info);\n"
	"		} else {\n"
	"			je_prof_malloc_sample_object(garbage, &garbage[k % N], 64, 64,\n"
	"				(struct prof_tctx_s *)GARBAGE(k * 31));\n"
	"			je_prof_free_sampled_object(garbage, 64, GARBAGE(k * 17));\n"
	"		}\n"
	"		usleep(1000);\n"
	"	}\n"
	"}\n";

#define RELEASE_530 "5.3.0-0-g54eaed1d8b56b1aa528be3bdd1877e59c56fa90c"

/* The impostor built as name with cflags, started in the test's cgroup; its path in path. */
static pid_t start_impostor(const char *name, const char *cflags, char *path, size_t len)
{
	char dir[1024], out[PATH_MAX + 16];
	FILE *f;
	pid_t pid;

	/* jemalloc's DWARF is read from the compile unit of src/prof.c */
	snprintf(dir, sizeof(dir), "%s/%s", hb_tmpdir(), name);
	hb_sh("mkdir -p '%s/src'", dir);
	snprintf(path, len, "%s/src/prof.c", dir);
	f = fopen(path, "we");
	cr_assert_not_null(f);
	cr_assert_eq(fwrite(impostor_src, 1, sizeof(impostor_src) - 1, f),
		     sizeof(impostor_src) - 1);
	cr_assert_eq(fclose(f), 0);
	hb_sh("cd '%s' && cc -O1 %s src/prof.c -o '%s'", dir, cflags, name);
	snprintf(path, len, "%s/%s", dir, name);
	snprintf(out, sizeof(out), "%s.out", path);
	pid = hb_spawn((const char *[]){ path, NULL }, out);
	cr_assert_gt(pid, 0);
	cr_assert(hb_wait_text(out, "ready", 10000, pid), "%s did not start", name);
	place(pid);
	return pid;
}

/* The impostor's prof_active_state byte now. */
static int flag_of(pid_t pid, const char *path)
{
	uint64_t addr;
	uint8_t b = 0xff;

	cr_assert_eq(hb_sym_addr(pid, path, "je_prof_active_state", &addr), 0);
	cr_assert_eq(hb_peek(pid, addr, &b, 1), 0);
	return b;
}

/* Whether one line of the agent's stderr holds text and names pid ("pid N", N whole). */
static bool said_of(pid_t pid, const char *text)
{
	char mark[32], *copy = hb_xstrdup(agent_err()), *save = NULL;
	bool found = false;

	snprintf(mark, sizeof(mark), "pid %d", pid);
	for (char *l = strtok_r(copy, "\n", &save); l && !found; l = strtok_r(NULL, "\n", &save)) {
		const char *m = strstr(l, mark);

		found = strstr(l, text) && m && (m[strlen(mark)] < '0' || m[strlen(mark)] > '9');
	}
	free(copy);
	return found;
}

/* Waits (a guard against a hang, not a measure) until the agent said text of pid. */
static void wait_said_of(const char *what, pid_t pid, const char *text)
{
	for (int waited = 0; waited < WAIT_MS && !said_of(pid, text); waited += 200) {
		cr_assert_eq(waitpid(agent_pid, NULL, WNOHANG), 0, "the agent exited: %s",
			     agent_err());
		hb_sleep_ms(200);
	}
	cr_assert(said_of(pid, text), "the agent never said \"%s\" of %s (pid %d): %s", text, what,
		  pid, agent_err());
}

/* The profiles of pid in dir so far. */
static int windows_of(const char *dir, pid_t pid)
{
	static char names[512][256];
	int n = hb_count_files(dir, ".pb.gz", names, 512), have = 0;
	char mark[32];

	snprintf(mark, sizeof(mark), "-%d-", pid);
	for (int i = 0; i < n && i < 512; i++)
		have += strstr(names[i], mark) != NULL;
	return have;
}

/* Whether one of the service's window profiles in dir names every one of sites. */
static bool windows_name(const char *dir, pid_t pid, const char *const *sites)
{
	static char names[512][256];
	int n = hb_count_files(dir, ".pb.gz", names, 512);
	char mark[32], folded[PATH_MAX], file[PATH_MAX * 2], err[4096];

	snprintf(mark, sizeof(mark), "-%d-", pid);
	for (int i = 0; i < n && i < 512; i++) {
		char *text = NULL;
		bool all = true;

		if (!strstr(names[i], mark))
			continue;
		snprintf(file, sizeof(file), "%s/%.255s", dir, names[i]);
		snprintf(folded, sizeof(folded), "%s/w.folded", hb_tmpdir());
		if (hb_run((const char *[]){ "report", file, "-f", "folded", "-t", "alloc_space",
					     "-o", folded, NULL },
			   err, sizeof(err), 30000) != 0 ||
		    hb_read_file(folded, &text) < 0)
			continue;
		for (const char *const *s = sites; *s; s++)
			all = all && strstr(text, *s);
		free(text);
		if (all)
			return true;
	}
	return false;
}

Test(agent_hostile, impostors_let_go_and_the_service_profiled)
{
	const char *sites[] = { "large_buffers", "churn_small", NULL };
	const char *args[] = { "--threads", "1", "--rate", "5000", NULL };
	char garbage[PATH_MAX], lying[PATH_MAX], rdonly[PATH_MAX], turncoat[PATH_MAX];
	char unreadable[PATH_MAX];
	char out[PATH_MAX], sel[128];
	char state[PATH_MAX];
	struct svc s;
	bool profiled = false;
	int b = 1, let_go;

	hb_require_bpf();
	/* garbage behind the pointers, a version only its first samples can confirm */
	impostors[0] = start_impostor("garbage", "-g0 -DVERSION='\"5.3.0-0-g0\"'", garbage,
				      sizeof(garbage));
	/* 5.3.0's release string, and DWARF that contradicts its layout */
	impostors[1] = start_impostor("lying", "-g -DLIE -DVERSION='\"" RELEASE_530 "\"'", lying,
				      sizeof(lying));
	/* 5.3.0's release string, its flag where no one can write */
	impostors[2] = start_impostor("rdonly", "-g0 -DRO_FLAG -DVERSION='\"" RELEASE_530 "\"'",
				      rdonly, sizeof(rdonly));
	/* sane until a self-check confirmed its layout, garbage from then on */
	impostors[3] = start_impostor("turncoat", "-g0 -DSANE_FIRST=64 -DVERSION='\"5.3.0-0-g0\"'",
				      turncoat, sizeof(turncoat));
	/* sane until confirmed, then nothing behind its pointers can be read */
	impostors[4] = start_impostor("unreadable",
				      "-g0 -DSANE_FIRST=64 -DUNREADABLE -DVERSION='\"5.3.0-0-g0\"'",
				      unreadable, sizeof(unreadable));
	cr_assert_eq(svc_start(&s, hb_path(SERVICE), IDLE_CONF, args), 0);
	place(s.pid);

	snprintf(sel, sizeof(sel), "cgroup=%s", cg_name);
	snprintf(out, sizeof(out), "%s/out", hb_tmpdir());
	snprintf(state, sizeof(state), "%s/state", hb_tmpdir());
	setenv("HEAPBPF_STATE_DIR", state, 1);
	mkdir(state, 0700);
	agent_pid = hb_spawn((const char *[]){ hb_path("heapbpf"), "agent", "--output-dir", out,
					       "--interval", "1", "--select", sel, NULL },
			     hb_tmp("agent.err"));
	cr_assert_gt(agent_pid, 0);

	/* each impostor refused or let go, with its reason */
	wait_said_of("the impostor with garbage", impostors[0],
		     "does not fit heapbpf's 5.3.0 layout");
	wait_said_of("the impostor whose DWARF lies", impostors[1],
		     "prof_tctx_t.gctx is at 88 in its debug info, the 5.3.0 layout says 96");
	wait_said_of("the impostor with a read-only flag", impostors[2],
		     "the flag's address is not in jemalloc's writable data");
	/* the turncoat is confirmed, then sampled on while it sends garbage */
	wait_said_of("the turncoat", impostors[3], "its first 16 samples and 4 frees fit");
	/* the flag of the one that was sampled back off at the agent's next tick */
	for (int waited = 0; waited < WAIT_MS && b; waited += 200) {
		b = flag_of(impostors[0], garbage);
		hb_sleep_ms(200);
	}
	cr_assert_eq(b, 0, "prof_active left on in the impostor with garbage: %s", agent_err());
	cr_assert_eq(flag_of(impostors[1], lying), 0, "prof_active switched on in the liar");
	cr_assert_eq(flag_of(impostors[2], rdonly), 0);

	/* the service is profiled all along: a window of it names its sites */
	for (int waited = 0; waited < WAIT_MS && !profiled; waited += 500) {
		cr_assert_eq(waitpid(agent_pid, NULL, WNOHANG), 0, "the agent exited: %s",
			     agent_err());
		profiled = windows_name(out, s.pid, sites);
		if (!profiled)
			hb_sleep_ms(500);
	}
	cr_assert(profiled, "no window of the service names large_buffers and churn_small: %s",
		  agent_err());
	/* and the turncoat's garbage, window after window */
	for (int waited = 0; waited < WAIT_MS && windows_of(out, impostors[3]) < 3; waited += 200)
		hb_sleep_ms(200);
	cr_assert_geq(windows_of(out, impostors[3]), 3, "%s", agent_err());
	/*
	 * the unreadable one confirmed too, then let go once most of its samples
	 * could not be read, with its reason and no profile of them
	 */
	wait_said_of("the unreadable", impostors[4], "its first 16 samples and 4 frees fit");
	wait_said_of("the unreadable", impostors[4], "samples could not read jemalloc's memory");
	wait_said_of("the unreadable", impostors[4], "let go: its samples are not its jemalloc's");
	cr_assert_eq(flag_of(impostors[4], unreadable), 0, "prof_active left on in the unreadable");
	let_go = windows_of(out, impostors[4]);
	cr_assert_eq(waitpid(agent_pid, NULL, WNOHANG), 0, "the agent exited: %s", agent_err());
	for (size_t i = 0; i < sizeof(impostors) / sizeof(impostors[0]); i++)
		cr_assert_eq(waitpid(impostors[i], NULL, WNOHANG), 0, "impostor %zu exited", i);

	kill(agent_pid, SIGTERM);
	cr_assert_eq(hb_wait(agent_pid, 60000), 0, "%s", agent_err());
	agent_pid = 0;
	cr_assert_eq(flag_of(impostors[0], garbage), 0);
	cr_assert_eq(flag_of(impostors[1], lying), 0);
	cr_assert_eq(flag_of(impostors[3], turncoat), 0, "prof_active left on in the turncoat");
	/* nothing of the unreadable one written once it was let go, its stop included */
	cr_assert_eq(windows_of(out, impostors[4]), let_go, "%s", agent_err());
	cr_assert_eq(svc_stop(&s), 0);
}
