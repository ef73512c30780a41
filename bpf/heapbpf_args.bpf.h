/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Small BPF helpers kept free of BPF-only calls so that tests/unit can
 * compile them as plain C under tests/unit/bpf_stub.h.
 */
#ifndef __HEAPBPF_ARGS_BPF_H
#define __HEAPBPF_ARGS_BPF_H

/* Argument idx (0-based) of the probed function; 0 for HEAPBPF_ARG_NONE. */
static __always_inline __u64 heapbpf_arg(struct pt_regs *ctx, __u8 idx)
{
	switch (idx) {
	case 0:
		return PT_REGS_PARM1(ctx);
	case 1:
		return PT_REGS_PARM2(ctx);
	case 2:
		return PT_REGS_PARM3(ctx);
	case 3:
		return PT_REGS_PARM4(ctx);
	case 4:
		return PT_REGS_PARM5(ctx);
#if defined(bpf_target_x86) || defined(HEAPBPF_HOST_TEST)
	case 5:
		/* libbpf 1.1 has no PT_REGS_PARM6; x86-64 passes it in r9 */
		return ctx->r9;
#endif
	default:
		return 0;
	}
}

/* jemalloc's bt.len, bounded so the verifier (and a corrupt target) cannot overrun frames[]. */
static __always_inline __u32 heapbpf_clamp_frames(__u32 len)
{
	if (len > HEAPBPF_MAX_FRAMES)
		len = HEAPBPF_MAX_FRAMES;
	return len;
}

#endif /* __HEAPBPF_ARGS_BPF_H */
