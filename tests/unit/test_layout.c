// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The jemalloc layout table against the facts in docs/jemalloc.md, and its
 * check against what an object's DWARF describes.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "jemalloc/layout.h"
#include "jemalloc/layout_dwarf.h"
#include "jedwarf.h"

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

#define V521 "5.2.1-0-gea6b3e973b477b8061e0076bb257dbd7f3faa756"
#define V531 "5.3.1-0-g81034ce1f1373e37dc865038e1bc8eeecf559ce8"

Test(layout, find_521)
{
	const struct jemalloc_layout *l = jemalloc_layout_find(V521);
	const struct heapbpf_layout *b;

	cr_assert_not_null(l);
	cr_assert_str_eq(l->name, "5.2.1");
	cr_assert_str_eq(l->active_sym, "prof_active");
	cr_assert(l->late_active_bug);
	cr_assert_str_eq(l->activity_fn, "malloc_default");
	cr_assert_eq(l->debug_info_shift, 0);
	b = &l->bpf;
	/* prof_malloc_sample_object(tsdn, ptr, usize, tctx) */
	cr_assert_eq(b->alloc_ptr_arg, 1);
	cr_assert_eq(b->alloc_size_arg, HEAPBPF_ARG_NONE);
	cr_assert_eq(b->alloc_usize_arg, 2);
	cr_assert_eq(b->alloc_tctx_arg, 3);
	/* prof_free_sampled_object(tsd, ptr, usize, tctx): no prof_info_t */
	cr_assert_eq(b->free_ptr_arg, 1);
	cr_assert_eq(b->free_usize_arg, 2);
	cr_assert_eq(b->free_info_arg, HEAPBPF_ARG_NONE);
	cr_assert_eq(b->free_tctx_arg, 3);
	cr_assert_eq(b->info_has_time, 0);
	/* tctx->gctx @56, gctx->bt @72 */
	cr_assert_eq(b->tctx_gctx_off, 56);
	cr_assert_eq(b->gctx_bt_off, 72);
	cr_assert_eq(b->bt_vec_off, 0);
	cr_assert_eq(b->bt_len_off, 8);
}

Test(layout, find_531)
{
	const struct jemalloc_layout *l = jemalloc_layout_find(V531);
	const struct jemalloc_layout *l530 = jemalloc_layout_find(V530);

	cr_assert_not_null(l);
	cr_assert_str_eq(l->name, "5.3.1");
	cr_assert_str_eq(l->active_sym, "prof_active_state");
	cr_assert_not(l->late_active_bug);
	/* prof_free_sampled_object(tsd, ptr, usize, info): the pointer is back */
	cr_assert_eq(l->bpf.free_ptr_arg, 1);
	cr_assert_eq(l->bpf.free_usize_arg, 2);
	cr_assert_eq(l->bpf.free_info_arg, 3);
	cr_assert_eq(l->bpf.free_tctx_arg, HEAPBPF_ARG_NONE);
	/* the structs of 5.3.0 */
	cr_assert_eq(l->bpf.tctx_gctx_off, l530->bpf.tctx_gctx_off);
	cr_assert_eq(l->bpf.gctx_bt_off, l530->bpf.gctx_bt_off);
	cr_assert_eq(l->bpf.info_tctx_off, l530->bpf.info_tctx_off);
	cr_assert_eq(l->bpf.info_size_off, l530->bpf.info_size_off);
	cr_assert_eq(memcmp(&l->bpf, &l530->bpf, 4), 0, "same allocation probe arguments");
}

Test(layout, debug_build)
{
	struct jemalloc_layout d;

	/* 5.3: nstime_t {ns; magic} is 16 bytes, prof_info_t {alloc_time @0, alloc_tctx @16, alloc_size @24} */
	jemalloc_layout_debug(jemalloc_layout_by_name("5.3.0"), &d);
	cr_assert_str_eq(d.name, "5.3.0");
	cr_assert_eq(d.bpf.info_time_off, 0);
	cr_assert_eq(d.bpf.info_tctx_off, 16);
	cr_assert_eq(d.bpf.info_size_off, 24);
	cr_assert_eq(d.bpf.tctx_gctx_off, 96);
	cr_assert_eq(d.bpf.gctx_bt_off, 104);
	jemalloc_layout_debug(jemalloc_layout_by_name("5.3.1"), &d);
	cr_assert_eq(d.bpf.info_tctx_off, 16);
	cr_assert_eq(d.bpf.info_size_off, 24);
	/* 5.2.1: nstime_t has no magic, and no prof_info_t is read */
	jemalloc_layout_debug(jemalloc_layout_by_name("5.2.1"), &d);
	cr_assert_eq(memcmp(&d.bpf, &jemalloc_layout_by_name("5.2.1")->bpf, sizeof(d.bpf)), 0);
}

static struct jemalloc_dwarf dwarf_530(void)
{
	struct jemalloc_dwarf d = hb_dwarf_530();

	memset(&d.heap, 0xff, sizeof(d.heap)); /* the heap tables not described: -1 */
	return d;
}

Test(layout, check_against_dwarf)
{
	const struct jemalloc_layout *l = jemalloc_layout_by_name("5.3.0");
	struct jemalloc_dwarf d = dwarf_530();
	char why[256];

	cr_assert_eq(layout_dwarf_check(l, &d, why, sizeof(why)), 0, "%s", why);

	/* one offset off: an error naming the field, both values and the layout */
	d.gctx_bt = 112;
	cr_assert_eq(layout_dwarf_check(l, &d, why, sizeof(why)), -EPROTO);
	cr_assert_str_eq(why,
			 "prof_gctx_t.bt is at 112 in its debug info, the 5.3.0 layout says 104");

	/* a parameter moved */
	d = dwarf_530();
	d.free_ptr = 1;
	d.free_usize = 2;
	d.free_info = 3;
	cr_assert_eq(layout_dwarf_check(l, &d, why, sizeof(why)), -EPROTO);
	cr_assert(strstr(why, "parameter ptr of prof_free_sampled_object"), "%s", why);
	cr_assert_eq(layout_dwarf_check(jemalloc_layout_by_name("5.3.1"), &d, why, sizeof(why)), 0,
		     "%s", why);

	/* what DWARF does not describe cannot be checked: no error */
	d = dwarf_530();
	d.tctx_gctx = d.gctx_bt = d.info_tctx = -1;
	d.have_alloc_fn = d.have_free_fn = false;
	d.alloc_ptr = 7;
	cr_assert_eq(layout_dwarf_check(l, &d, why, sizeof(why)), 0, "%s", why);

	/* prof_info_t is not checked for 5.2.1, which never reads it */
	d = dwarf_530();
	d.tctx_gctx = 56;
	d.gctx_bt = 72;
	d.alloc_size = -1;
	d.alloc_usize = 2;
	d.alloc_tctx = 3;
	d.free_ptr = 1;
	d.free_usize = 2;
	d.free_info = -1;
	d.free_tctx = 3;
	cr_assert_eq(layout_dwarf_check(jemalloc_layout_by_name("5.2.1"), &d, why, sizeof(why)), 0,
		     "%s", why);
}

Test(layout, unknown_versions)
{
	cr_assert_null(jemalloc_layout_find("9.9.9-0-g54eaed1d8b56b1aa528be3bdd1877e59c56fa90c"));
	cr_assert_null(jemalloc_layout_find("5.2.0-0-gb0b3e49a54ec29e32636f4577d9d5a896d67fd20"));
	cr_assert_null(jemalloc_layout_find("5.4.0-0-g0000000000000000000000000000000000000000"));
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
	cr_assert_str_eq(jemalloc_layout_names(), "5.2.1, 5.3.0, 5.3.1");
	cr_assert_eq(jemalloc_layout_by_name("5.2.1"), jemalloc_layout_find(V521));
	cr_assert_eq(jemalloc_layout_by_name("5.3.1"), jemalloc_layout_find(V531));
}
