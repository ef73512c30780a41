// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * bpf/heapbpf_args.bpf.h with bpf/arm64/heapbpf_arch.bpf.h, as the arm64 BPF build compiles it
 * (vmlinux/arm64/vmlinux.h, bpf_tracing.h's arm64 PT_REGS_PARMn, what
 * make ARCH=arm64 passes: -D__TARGET_ARCH_arm64), run as plain C: the
 * probes read jemalloc's arguments from x0 to x5 (AAPCS64), the sixth from
 * regs[5] where x86-64 reads r9.
 */
#include <criterion/criterion.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define BPF_NO_PRESERVE_ACCESS_INDEX
#define __TARGET_ARCH_arm64

#include "../../vmlinux/arm64/vmlinux.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-variable"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#pragma GCC diagnostic pop

#include "heapbpf.h"
#include "arm64/heapbpf_arch.bpf.h"

Test(bpf_args_arm64, read_args_from_x0_to_x5)
{
	struct pt_regs r;
	struct heapbpf_args a;
	int i;

	memset(&r, 0xee, sizeof(r));
	for (i = 0; i < 31; i++)
		r.user_regs.regs[i] = 100 + (__u64)i;
	memset(&a, 0, sizeof(a));
	heapbpf_read_args(&r, &a);
	for (i = 0; i < 6; i++)
		cr_assert_eq(a.a[i], 100 + (__u64)i, "argument %d is %llu", i,
			     (unsigned long long)a.a[i]);
	cr_assert_eq(heapbpf_arg(&a, 5), 105);
	cr_assert_eq(heapbpf_arg(&a, HEAPBPF_ARG_NONE), 0);
}

/* the layout the probes read is the same struct on both architectures */
Test(bpf_args_arm64, user_pt_regs_starts_pt_regs)
{
	cr_assert_eq(offsetof(struct pt_regs, user_regs), 0);
	cr_assert_eq(offsetof(struct user_pt_regs, regs[5]), 40);
	cr_assert_eq(sizeof(struct user_pt_regs), 34 * 8);
}
