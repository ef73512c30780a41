/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What the bpf/ helper headers need to compile as plain host C, so that unit
 * tests can call them: the same kernel types and libbpf macros the BPF
 * build uses (vmlinux/vmlinux.h, bpf_tracing.h's PT_REGS_PARMn for x86-64),
 * and heapbpf.h. Only helpers that call no BPF helper can run this way.
 */
#ifndef __HEAPBPF_BPF_STUB_H
#define __HEAPBPF_BPF_STUB_H

/* as in bpf/heapbpf.bpf.c: plain field access, no CO-RE */
#define BPF_NO_PRESERVE_ACCESS_INDEX
/* what the Makefile passes the BPF build (-D__TARGET_ARCH_$(ARCH)); heapbpf is x86-64 only */
#define __TARGET_ARCH_x86

#include "../../vmlinux/vmlinux.h"

/*
 * bpf_helper_defs.h declares every BPF helper as a static function pointer
 * (helper ids, never called here): unused on the host.
 */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-variable"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#pragma GCC diagnostic pop

#include "heapbpf.h"

#endif /* __HEAPBPF_BPF_STUB_H */
