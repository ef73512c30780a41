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
