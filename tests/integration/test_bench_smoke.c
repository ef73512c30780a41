// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The benchmark suite works: `bench/run.py --smoke` runs every benchmark of
 * `make bench` once at tiny size and writes its results file, and
 * `bench/report.py` writes the report from that file alone, twice the same.
 * Nothing here looks at a time; the report must hold every section and table,
 * a verdict for every target, and the trap count the benchmarks read from
 * heapbpf's counters.
 */
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "harness.h"

TestSuite(bench, .fini = hb_tmpdir_cleanup, .timeout = 300);

/* Runs one of the bench scripts; fails the test with its output unless it exits with 0. */
static void run_script(const char *const *argv, const char *log, int timeout_ms)
{
	int rc = hb_wait(hb_spawn(argv, log), timeout_ms);
	char *text;

	if (rc != 0 && hb_read_file(log, &text) >= 0)
		cr_assert_fail("%s exited with %d:\n%s", argv[1], rc, text);
	cr_assert_eq(rc, 0, "%s exited with %d", argv[1], rc);
}

static int count(const char *text, const char *what)
{
	int n = 0;

	for (const char *p = strstr(text, what); p; p = strstr(p + 1, what))
		n++;
	return n;
}

Test(bench, smoke_report_is_well_formed)
{
	static const char *const sections[] = {
		"## 1. Idle cost",
		"## 2. Cost while profiling, per sample",
		"## 3. Against the alternatives: redis",
		"## 4. How cost grows",
		"### Sampling rate",
		"### Threads",
		"### Stack depth",
		"## 5. Collector",
		"## 6. heapbpf's own footprint",
		"## 7. Recordings",
		"## 9. Real services: heapbpf's share of the cost",
		"## Targets",
	};
	char res[PATH_MAX], out[PATH_MAX], again[PATH_MAX], log[PATH_MAX];
	char *text, *text2, *line, *save;
	const char *build = hb_build_dir();
	const char *py = "/usr/bin/python3";
	const char *run[] = { py, "bench/run.py", "--smoke", "--build", build, "--json", res, NULL };
	const char *report[] = { py, "bench/report.py", res, "--out", out, NULL };
	const char *report2[] = { py, "bench/report.py", res, "--out", again, NULL };
	int rows = 0;

	hb_require_bpf();
	snprintf(res, sizeof(res), "%s/results.json", hb_tmpdir());
	snprintf(out, sizeof(out), "%s/BENCHMARKS.md", hb_tmpdir());
	snprintf(again, sizeof(again), "%s/BENCHMARKS-again.md", hb_tmpdir());
	snprintf(log, sizeof(log), "%s/bench.log", hb_tmpdir());
	run_script(run, log, 240000);
	run_script(report, log, 30000);
	cr_assert_gt(hb_read_file(out, &text), 0, "no report written");
	/* reporting needs nothing but the results file: a second report is the same */
	run_script(report2, log, 30000);
	cr_assert_gt(hb_read_file(again, &text2), 0, "no second report written");
	cr_expect_str_eq(text2, text, "two reports from one results file differ");
	free(text2);

	for (size_t i = 0; i < sizeof(sections) / sizeof(sections[0]); i++)
		cr_expect(strstr(text, sections[i]), "the report lacks \"%s\"", sections[i]);
	/* one verdict per target of the summary table, and one under each section */
	cr_expect_geq(count(text, "**met**") + count(text, "**not met**"), 16,
		      "targets without a verdict");
	/* the machine is described and the command to reproduce is given */
	cr_expect(strstr(text, "| kernel |"));
	cr_expect(strstr(text, "make bench"));
	/* the benchmarks saw exactly one uprobe hit per sample on the allocation path */
	cr_expect(strstr(text, "| uprobe hits per sample (BPF counters, allocation path) | 1.000"),
		  "hits per sample is not 1.000");
	/* every table row has as many cells as its header */
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (line[0] == '|')
			rows++;
		cr_expect(!strstr(line, "nan") && !strstr(line, "NaN"), "NaN in: %s", line);
	}
	cr_expect_gt(rows, 40, "only %d table rows", rows);
	free(text);
}

/*
 * The knob bench/bpfstats.py turns (bench_skip: parts of the programs left
 * out) is in the benchmarks' build of the BPF object only, its name in
 * that object's BTF; heapbpf's own object has none, and heapbpf says it
 * ignores HEAPBPF_BENCH_PARTS and profiles whole: a run asked to leave
 * everything out still gets its samples.
 */
Test(bench, the_knob_is_in_the_benchmarks_build_only)
{
	const char *errpath = hb_tmp("whole.err");
	char pid[16];
	struct svc s;
	uint64_t flag;
	pid_t hp;

	cr_assert(hb_file_has(hb_path("bench/heapbpf.bpf.o"), "bench_skip"));
	cr_assert_eq(access(hb_path("heapbpf.bpf.o"), R_OK), 0);
	cr_assert_not(hb_file_has(hb_path("heapbpf.bpf.o"), "bench_skip"));
	hb_require_bpf();
	cr_assert_eq(svc_start(&s, hb_path("examples/alloc-service-static"),
			       "prof:true,prof_active:false", NULL),
		     0);
	snprintf(pid, sizeof(pid), "%d", s.pid);
	setenv("HEAPBPF_BENCH_PARTS", "0x20", 1);
	hp = hb_spawn((const char *[]){ hb_path("heapbpf"), "--pid", pid, "-o",
					hb_tmp("whole.pb.gz"), NULL },
		      errpath);
	unsetenv("HEAPBPF_BENCH_PARTS");
	cr_assert(hb_wait_text(errpath, "sampling every", 60000, hp), "%s", hb_file_text(errpath));
	/* its flag on (the line may come first), then 340 sampling periods */
	cr_assert_eq(hb_sym_addr(s.pid, hb_path("examples/alloc-service-static"),
				 "je_prof_active_state", &flag),
		     0);
	cr_assert(hb_wait_byte(s.pid, flag, 1, 60000, hp), "%s", hb_file_text(errpath));
	/* 2000 allocations more: 340 sampling periods at the example's mix */
	svc_allocs_more(&s, 2000);
	kill(hp, SIGTERM);
	cr_assert_eq(hb_wait(hp, 60000), 0, "%s", hb_file_text(errpath));
	cr_assert(strstr(hb_file_text(errpath), "HEAPBPF_BENCH_PARTS is ignored"), "%s",
		  hb_file_text(errpath));
	/* exit 0, not 3: samples came, the programs were whole */
	cr_assert_eq(svc_stop(&s), 0);
}
