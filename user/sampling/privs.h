/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Least privilege. heapbpf needs CAP_BPF and CAP_SYS_ADMIN only to load and
 * attach its programs (CAP_PERFMON is not enough: on 6.18 perf_event_open of
 * a uprobe fails with EACCES without CAP_SYS_ADMIN); once the uprobes are live it drops
 * every capability but those it still uses until it exits:
 *   CAP_SYS_PTRACE      read and write the target's memory (restore the flag),
 *                       open its files through /proc/PID/root
 *   CAP_DAC_OVERRIDE,   write the outputs and read binaries wherever root could
 *   CAP_DAC_READ_SEARCH
 */
#ifndef __HEAPBPF_PRIVS_H
#define __HEAPBPF_PRIVS_H

#include <stdint.h>

#include <stddef.h>

/*
 * Checks, before touching anything, that this process has what a live run
 * needs (CAP_BPF or CAP_SYS_ADMIN, CAP_SYS_ADMIN for the uprobes,
 * CAP_SYS_PTRACE), then privs_check_kernel(). On failure returns -EPERM
 * (or what the kernel answered) with a sentence naming what is missing.
 */
int privs_check(char *err, size_t errlen);

/*
 * The kernel features a live run needs: the uprobe PMU under
 * $HEAPBPF_SYSFS (tests) or /sys, and the bpf() system call with the BPF
 * ring buffer map type (Linux 5.8), probed by creating one. On failure
 * returns -ENOTSUP (or what the kernel answered) with a sentence naming
 * what is missing.
 */
int privs_check_kernel(char *err, size_t errlen);

/* The capabilities kept after attaching, as a bit mask (1 << CAP_*). */
uint64_t privs_kept_mask(void);
/* Drops the effective, permitted and inheritable sets to privs_kept_mask(); sets no_new_privs. */
int privs_drop_after_attach(void);

#endif /* __HEAPBPF_PRIVS_H */
