// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The jemalloc layout table against the facts in DESIGN.md. */
#include <criterion/criterion.h>
#include <string.h>

#include "layout.h"

#define V530 "5.3.0-0-g54eaed1d8b56b1aa528be3bdd1877e59c56fa90c"

Test(layout, find_530)
{
	const struct jemalloc_layout *l = jemalloc_layout_find(V530);
	const struct heapbpf_layout *b;

	cr_assert_not_null(l);
	cr_assert_str_eq(l->name, "5.3.0");
	cr_assert_str_eq(l->active_sym, "prof_active_state");
	cr_assert_eq(strncmp(V530, l->version_prefix, strlen(l->version_prefix)), 0);
	b = &l->bpf;
	/* prof_malloc_sample_object(tsd, ptr, size, usize, tctx) */
	cr_assert_eq(b->alloc_ptr_arg, 1);
	cr_assert_eq(b->alloc_size_arg, 2);
	cr_assert_eq(b->alloc_usize_arg, 3);
	cr_assert_eq(b->alloc_tctx_arg, 4);
	/* prof_free_sampled_object(tsd, usize, prof_info_t *info): no ptr, no tctx */
	cr_assert_eq(b->free_ptr_arg, HEAPBPF_ARG_NONE);
	cr_assert_eq(b->free_usize_arg, 1);
	cr_assert_eq(b->free_info_arg, 2);
	cr_assert_eq(b->free_tctx_arg, HEAPBPF_ARG_NONE);
	/* tctx->gctx @96, gctx->bt @104, prof_bt_t { vec @0, len @8 } */
	cr_assert_eq(b->tctx_gctx_off, 96);
	cr_assert_eq(b->gctx_bt_off, 104);
	cr_assert_eq(b->bt_vec_off, 0);
	cr_assert_eq(b->bt_len_off, 8);
	/* prof_info_t { alloc_time @0, alloc_tctx @8, alloc_size @16 } */
	cr_assert_eq(b->info_time_off, 0);
	cr_assert_eq(b->info_tctx_off, 8);
	cr_assert_eq(b->info_size_off, 16);
	cr_assert_eq(b->info_has_time, 1);
}

Test(layout, find_other_530_builds)
{
	const struct jemalloc_layout *l = jemalloc_layout_find(V530);

	/* another commit of 5.3.0 (a distribution patch level) is still 5.3.0 */
	cr_assert_eq(jemalloc_layout_find("5.3.0-3-g0123456789abcdef0123456789abcdef01234567"), l);
}

Test(layout, unknown_versions)
{
	cr_assert_null(jemalloc_layout_find("9.9.9-0-g54eaed1d8b56b1aa528be3bdd1877e59c56fa90c"));
	cr_assert_null(jemalloc_layout_find("5.2.1-0-gea6b3e973b477b8061e0076bb257dbd7f3faa756"));
	cr_assert_null(jemalloc_layout_find("5.3.10-0-g54eaed1d8b56b1aa528be3bdd1877e59c56fa90c"));
	cr_assert_null(jemalloc_layout_find("5.3.0"));
	cr_assert_null(jemalloc_layout_find("15.3.0-0-g54eaed1d8b56b1aa528be3bdd1877e59c56fa90c"));
	cr_assert_null(jemalloc_layout_find(""));
}

Test(layout, by_name)
{
	const struct jemalloc_layout *l = jemalloc_layout_by_name("5.3.0");

	cr_assert_not_null(l);
	cr_assert_eq(l, jemalloc_layout_find(V530));
	cr_assert_null(
		jemalloc_layout_by_name("5.3.0-0-g54eaed1d8b56b1aa528be3bdd1877e59c56fa90c"));
	cr_assert_null(jemalloc_layout_by_name("5.3"));
	cr_assert_null(jemalloc_layout_by_name("9.9.9"));
	cr_assert_null(jemalloc_layout_by_name(""));
	cr_assert_not_null(strstr(jemalloc_layout_names(), "5.3.0"));
}
