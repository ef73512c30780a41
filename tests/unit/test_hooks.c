// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The test and benchmark hooks (util/hooks.h): named once, unset and empty alike. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "util/hooks.h"

Test(hooks, each_has_its_name_and_empty_is_unset)
{
	for (int h = 0; h < HB_HOOK_COUNT; h++) {
		const char *name = hb_hook_name(h);

		cr_assert_not_null(name, "hook %d has no name", h);
		cr_assert_eq(strncmp(name, "HEAPBPF_", 8), 0, "%s", name);
		unsetenv(name);
		cr_assert_null(hb_hook(h), "%s unset", name);
		setenv(name, "", 1);
		cr_assert_null(hb_hook(h), "%s empty", name);
		setenv(name, "x", 1);
		cr_assert_str_eq(hb_hook(h), "x");
		unsetenv(name);
	}
	cr_assert_str_eq(hb_hook_name(HB_HOOK_STATE_DIR), "HEAPBPF_STATE_DIR");
}
