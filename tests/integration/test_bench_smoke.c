// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The benchmark suite works: `bench/run.py --smoke` runs every benchmark of
 * `make bench` once at tiny size and writes its report. Nothing here looks at
 * a time; the report must hold every section and table, a verdict for every
 * target, and the trap count the benchmarks read from heapbpf's counters.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "harness.h"

TestSuite(bench, .fini = hb_tmpdir_cleanup, .timeout = 300);

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
		"## Targets",
	};
	char out[PATH_MAX], log[PATH_MAX], *text, *line, *save;
	const char *argv[] = { "/usr/bin/python3", "bench/run.py", "--smoke", "--build",
			       hb_build_dir(), "--out", out, NULL };
	int rc, rows = 0;

	hb_require_bpf();
	snprintf(out, sizeof(out), "%s/BENCHMARKS.md", hb_tmpdir());
	snprintf(log, sizeof(log), "%s/bench.log", hb_tmpdir());
	rc = hb_wait(hb_spawn(argv, log), 240000);
	if (rc != 0 && hb_read_file(log, &text) >= 0)
		cr_assert_fail("bench/run.py --smoke exited with %d:\n%s", rc, text);
	cr_assert_eq(rc, 0, "bench/run.py --smoke exited with %d", rc);
	cr_assert_gt(hb_read_file(out, &text), 0, "no report written");

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
