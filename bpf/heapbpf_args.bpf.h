/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Small BPF helpers kept free of BPF helper calls so that they also compile
 * as plain C: tests/unit/test_bpf_args.c runs them through tests/unit/bpf_stub.h.
 */
#ifndef __HEAPBPF_ARGS_BPF_H
#define __HEAPBPF_ARGS_BPF_H

/* The probed function's register arguments, read once with constant offsets. */
struct heapbpf_args {
	__u64 a[6];
};

/*
 * A switch over ctx fields compiles into ctx + variable offset, which the
 * verifier rejects; copy the registers first, then pick.
 */
static __always_inline void heapbpf_read_args(struct pt_regs *ctx, struct heapbpf_args *args)
{
	args->a[0] = PT_REGS_PARM1(ctx);
	args->a[1] = PT_REGS_PARM2(ctx);
	args->a[2] = PT_REGS_PARM3(ctx);
	args->a[3] = PT_REGS_PARM4(ctx);
	args->a[4] = PT_REGS_PARM5(ctx);
#if defined(bpf_target_x86)
	/* libbpf 1.1 has no PT_REGS_PARM6; x86-64 passes it in r9 */
	args->a[5] = ctx->r9;
#else
	args->a[5] = 0;
#endif
}

/* Argument idx (0-based); 0 for HEAPBPF_ARG_NONE or any index out of range. */
static __always_inline __u64 heapbpf_arg(const struct heapbpf_args *args, __u8 idx)
{
	return idx < 6 ? args->a[idx] : 0;
}

/* jemalloc's bt.len, bounded so the verifier (and a corrupt target) cannot overrun frames[]. */
static __always_inline __u32 heapbpf_clamp_frames(__u32 len)
{
	if (len > HEAPBPF_MAX_FRAMES)
		len = HEAPBPF_MAX_FRAMES;
	return len;
}

/* prof_info_t as read in one piece: 24 bytes, 32 in a --enable-debug build (5.3.x). */
struct heapbpf_info {
	__u64 w[4];
};

/* The 8-byte field at byte offset off of prof_info_t (off a multiple of 8). */
static __always_inline __u64 heapbpf_info_field(const struct heapbpf_info *info, __u32 off)
{
	return info->w[(off / 8) & 3];
}

#endif /* __HEAPBPF_ARGS_BPF_H */
