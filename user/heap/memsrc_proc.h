/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
#ifndef __HEAPBPF_MEMSRC_PROC_H
#define __HEAPBPF_MEMSRC_PROC_H

#include <stddef.h>
#include <sys/types.h>

#include "jemalloc/memsrc.h"

/*
 * A live process as a memory image (user/heap/memsrc_proc.c): process_vm_readv,
 * never a write; mapped() against /proc/PID/maps, read again when an
 * address is not in the last snapshot. 0, or negative errno with a sentence.
 */
int memsrc_proc_open(pid_t pid, struct mem_source *out, char *err, size_t errlen);
void memsrc_proc_close(struct mem_source *m);

#endif /* __HEAPBPF_MEMSRC_PROC_H */
