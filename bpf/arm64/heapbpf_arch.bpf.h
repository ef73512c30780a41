/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What the arm64 BPF object reads differently from x86-64's, and nothing
 * else: make ARCH=arm64 compiles bpf/heapbpf.bpf.c with -include of this
 * file, so the files an x86-64 build reads hold no arm64 code and its
 * object's bytes do not depend on it (make check-bpf-arch).
 *
 * Argument registers: x86-64 passes rdi, rsi, rdx, rcx, r8, r9; arm64
 * (AAPCS64) x0 to x5. libbpf 1.1 has no PT_REGS_PARM6: heapbpf_args.bpf.h
 * reads x86-64's sixth from r9 and gives 0 on any other architecture, so on
 * arm64 the probes call heapbpf_read_args_arm64(), which reads it from regs[5].
 */
#ifndef __HEAPBPF_ARCH_ARM64_BPF_H
#define __HEAPBPF_ARCH_ARM64_BPF_H

/* forced in before heapbpf.bpf.c: its plain field access (no CO-RE) holds here too */
#ifndef BPF_NO_PRESERVE_ACCESS_INDEX
#define BPF_NO_PRESERVE_ACCESS_INDEX
#endif
#ifndef __VMLINUX_H__
#include "vmlinux.h"
#endif
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "heapbpf.h"
#include "heapbpf_args.bpf.h"

#if !defined(bpf_target_arm64)
#error "bpf/arm64/heapbpf_arch.bpf.h is for the arm64 BPF object (-D__TARGET_ARCH_arm64)"
#endif

static __always_inline void heapbpf_read_args_arm64(struct pt_regs *ctx, struct heapbpf_args *args)
{
	heapbpf_read_args(ctx, args);
	args->a[5] = ((const struct user_pt_regs *)ctx)->regs[5];
}
#define heapbpf_read_args heapbpf_read_args_arm64

#endif /* __HEAPBPF_ARCH_ARM64_BPF_H */
