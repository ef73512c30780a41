// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * bpf/heapbpf_args.bpf.h compiled as plain C (tests/unit/bpf_stub.h): the
 * probes read jemalloc's arguments from pt_regs in x86-64 SysV order and
 * never index past their arrays.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "bpf_stub.h"
#include "heapbpf_args.bpf.h"

/* Registers set to distinct values: argument i (0-based) holds 100 + i. */
static struct pt_regs sysv_regs(void)
{
	struct pt_regs r;

	memset(&r, 0xee, sizeof(r));
	r.di = 100;
	r.si = 101;
	r.dx = 102;
	r.cx = 103;
	r.r8 = 104;
	r.r9 = 105;
	return r;
}

Test(bpf_args, read_args_in_sysv_order)
{
	struct pt_regs r = sysv_regs();
	struct heapbpf_args a;
	int i;

	memset(&a, 0, sizeof(a));
	heapbpf_read_args(&r, &a);
	for (i = 0; i < 6; i++)
		cr_assert_eq(a.a[i], 100 + (__u64)i, "argument %d is %llu", i,
			     (unsigned long long)a.a[i]);
}

Test(bpf_args, arg_picks_by_index)
{
	struct pt_regs r = sysv_regs();
	struct heapbpf_args a;
	__u8 i;

	heapbpf_read_args(&r, &a);
	for (i = 0; i < 6; i++)
		cr_assert_eq(heapbpf_arg(&a, i), 100 + (__u64)i);
}

/* A version that does not pass an argument has HEAPBPF_ARG_NONE: it reads as 0, not memory. */
Test(bpf_args, arg_none_and_out_of_range_read_zero)
{
	struct pt_regs r = sysv_regs();
	struct heapbpf_args a;

	heapbpf_read_args(&r, &a);
	cr_assert_eq(heapbpf_arg(&a, HEAPBPF_ARG_NONE), 0);
	cr_assert_eq(heapbpf_arg(&a, 6), 0);
	cr_assert_eq(heapbpf_arg(&a, 7), 0);
}

Test(bpf_args, clamp_frames_to_max)
{
	cr_assert_eq(heapbpf_clamp_frames(0), 0);
	cr_assert_eq(heapbpf_clamp_frames(1), 1);
	cr_assert_eq(heapbpf_clamp_frames(HEAPBPF_MAX_FRAMES - 1), HEAPBPF_MAX_FRAMES - 1);
	cr_assert_eq(heapbpf_clamp_frames(HEAPBPF_MAX_FRAMES), HEAPBPF_MAX_FRAMES);
	cr_assert_eq(heapbpf_clamp_frames(HEAPBPF_MAX_FRAMES + 1), HEAPBPF_MAX_FRAMES);
	cr_assert_eq(heapbpf_clamp_frames(UINT32_MAX), HEAPBPF_MAX_FRAMES);
}

/*
 * The free program reads prof_info_t in one piece and picks its fields by the
 * layout's offsets: 5.3.x release {alloc_time @0, alloc_tctx @8, alloc_size @16},
 * a --enable-debug build (nstime_t with a magic) {alloc_tctx @16, alloc_size @24}.
 */
Test(bpf_args, info_fields_by_offset)
{
	struct heapbpf_info info = { .w = { 11, 22, 33, 44 } };

	cr_assert_eq(heapbpf_info_field(&info, 0), 11);
	cr_assert_eq(heapbpf_info_field(&info, 8), 22);
	cr_assert_eq(heapbpf_info_field(&info, 16), 33);
	cr_assert_eq(heapbpf_info_field(&info, 24), 44);
	/* an offset past the piece read stays inside it */
	cr_assert_eq(heapbpf_info_field(&info, 32), 11);
}
