/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Where the allocation probe reads a target's CLOCK_MONOTONIC_COARSE, the
 * clock jemalloc 5.3.0 stamps its samples with: the kernel's vDSO data page
 * ([vvar]) in the target's own memory, the very words its clock_gettime
 * reads (bpf_ktime_get_coarse_ns is not allowed in uprobe programs).
 */
#ifndef __HEAPBPF_VCLOCK_H
#define __HEAPBPF_VCLOCK_H

#include <stdint.h>
#include <sys/types.h>

#include "symbols/proc.h"

/*
 * The address in pid's memory (maps: its mappings) of the coarse monotonic
 * clock's {u64 seconds, u64 nanoseconds}, the kernel's own (no time
 * namespace's offset added), or 0 where it cannot be known: no [vvar]
 * mapping, a vDSO data page in which heapbpf does not find its own reading
 * of the clock, or, for a target in another time namespace, no child of
 * heapbpf's that could make one and find the clock there.
 */
uint64_t vclock_coarse_addr(pid_t pid, const struct proc_maps *maps);

/*
 * How far pid's CLOCK_MONOTONIC (and _COARSE) is ahead of heapbpf's: its
 * time namespace's offset (/proc/PID/timens_offsets) less heapbpf's own;
 * 0 in the same namespace or where the kernel has none.
 */
int64_t vclock_monotonic_offset(pid_t pid);

#endif /* __HEAPBPF_VCLOCK_H */
