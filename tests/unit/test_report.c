// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* report_trim_count: how many leaf-side frames belong to jemalloc. */
#include <criterion/criterion.h>
#include <stdbool.h>

#include "profile/report.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

Test(report, trim_empty)
{
	static const bool v[1] = { true };

	cr_assert_eq(report_trim_count(v, 0), 0);
}

Test(report, trim_none_when_leaf_is_not_jemalloc)
{
	static const bool v[] = { false, false, false, false };
	static const bool w[] = { false, true, true, true };

	cr_assert_eq(report_trim_count(v, N(v)), 0);
	cr_assert_eq(report_trim_count(w, N(w)), 0);
}

Test(report, trim_leading_run)
{
	static const bool v[] = { true, true, true, false, false };

	cr_assert_eq(report_trim_count(v, N(v)), 3);
	/* only the first n entries are looked at */
	cr_assert_eq(report_trim_count(v, 2), 2);
	cr_assert_eq(report_trim_count(v, 4), 3);
}

Test(report, trim_stops_at_first_non_jemalloc)
{
	/* a jemalloc frame after the caller (a callback from jemalloc's caller) stays */
	static const bool v[] = { true, true, false, true, true, false };

	cr_assert_eq(report_trim_count(v, N(v)), 2);
}

Test(report, trim_all)
{
	static const bool v[] = { true, true, true, true, true };

	cr_assert_eq(report_trim_count(v, N(v)), N(v));
	cr_assert_eq(report_trim_count(v, 1), 1);
}
