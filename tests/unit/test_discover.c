// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The agent's discovery: how old a process it names is (from its exec when
 * one was heard of, for a process that forked long ago may exec now).
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <time.h>

#include "discover.h"

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The entry for pid among those due, or NULL. */
static const struct discover_due *due_of(const struct discover_due *v, size_t n, pid_t pid)
{
	for (size_t i = 0; i < n; i++) {
		if (v[i].pid == pid)
			return &v[i];
	}
	return NULL;
}

Test(discover, a_heard_exec_is_young_though_the_process_is_old)
{
	const size_t cap = 1 << 16;
	struct discover_due *v = calloc(cap, sizeof(*v));
	struct discover *d = NULL;
	const struct discover_due *init;
	char err[256];
	double before, after;
	size_t n;

	cr_assert_not_null(v);
	cr_assert_eq(discover__new(30, &d, err, sizeof(err)), 0, "%s", err);
	/* pid 1 started before this test: only an exec heard of now makes it this young */
	before = mono_s();
	discover__again(d, 1);
	n = discover__due(d, v, cap);
	after = mono_s();
	init = due_of(v, n, 1);
	cr_assert_not_null(init, "pid 1 was not named");
	cr_assert_gt(init->start, 0);
	cr_assert(init->age >= 0 && init->age <= after - before, "age %.3f s, %.3f s elapsed",
		  init->age, after - before);
	discover__free(d);
	free(v);
}

Test(discover, a_process_found_by_the_scan_is_as_old_as_it_runs)
{
	const size_t cap = 1 << 16;
	struct discover_due *v = calloc(cap, sizeof(*v));
	struct discover *d = NULL;
	const struct discover_due *init = NULL;
	char err[256];
	double before;
	size_t n;

	cr_assert_not_null(v);
	cr_assert_eq(discover__new(30, &d, err, sizeof(err)), 0, "%s", err);
	before = mono_s();
	/* the scan's finds are due from the call after it */
	for (int i = 0; i < 2 && !init; i++) {
		n = discover__due(d, v, cap);
		init = due_of(v, n, 1);
	}
	cr_assert_not_null(init, "pid 1 was not named by the scan");
	/* older than this test's run: it started before the scan */
	cr_assert(init->age > mono_s() - before, "age %.3f s", init->age);
	discover__free(d);
	free(v);
}
