/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * heapbpf --pid N --live-heap: the sampled live heap read from jemalloc's own
 * profiling tables in the running process (user/heap/heapwalk.c), without
 * uprobes and without writing anything into the process: what jemalloc has
 * sampled while its prof_active was on (now, or in earlier heapbpf windows)
 * and not freed since, written as any profile is (user/export/sink.c).
 */
#ifndef __HEAPBPF_LIVEHEAP_H
#define __HEAPBPF_LIVEHEAP_H

#include <stddef.h>
#include <sys/types.h>

#include "heap/heapwalk.h"
#include "jemalloc/memsrc.h"
#include "heap/memsrc_proc.h"
#include "run/run.h"
#include "jemalloc/target.h"

/* Runs --live-heap for r->opts->pid; its outcome joins r->outcome. */
int liveheap_run(struct run *r, char *err, size_t errlen);

#endif /* __HEAPBPF_LIVEHEAP_H */
