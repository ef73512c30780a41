/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * heapbpf --pid N --live-heap: the sampled live heap read from jemalloc's own
 * profiling tables in the running process (user/heapwalk.c), without
 * uprobes and without writing anything into the process: what jemalloc has
 * sampled while its prof_active was on (now, or in earlier heapbpf windows)
 * and not freed since, written as any profile is (user/sink.c).
 */
#ifndef __HEAPBPF_LIVEHEAP_H
#define __HEAPBPF_LIVEHEAP_H

#include <stddef.h>
#include <sys/types.h>

#include "heapwalk.h"
#include "memsrc.h"
#include "run.h"
#include "target.h"

/*
 * A live process as a memory image (user/memsrc_proc.c): process_vm_readv,
 * never a write; mapped() against /proc/PID/maps, read again when an
 * address is not in the last snapshot. 0, or negative errno with a sentence.
 */
int memsrc_proc_open(pid_t pid, struct mem_source *out, char *err, size_t errlen);
void memsrc_proc_close(struct mem_source *m);

/* The walker's symbol addresses in a found target (bt2gctx, lg_prof_sample, ...). */
int liveheap_syms(const struct jemalloc_target *t, struct heapwalk_syms *sy, char *err,
		  size_t errlen);

/* Runs --live-heap for r->opts->pid; its outcome joins r->outcome. */
int liveheap_run(struct run *r, char *err, size_t errlen);

#endif /* __HEAPBPF_LIVEHEAP_H */
