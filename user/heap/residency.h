/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The kernel's view of a live process's memory: its RSS and how it splits
 * (smaps_rollup, status), each mapping's resident and anonymous bytes
 * (smaps), and whether each page of a range is in memory (pagemap: present,
 * swapped). Read-only, from /proc; nothing here knows about jemalloc.
 */
#ifndef __HEAPBPF_RESIDENCY_H
#define __HEAPBPF_RESIDENCY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Bytes: rss, anon and swap summed over smaps, shmem from status, file the rest. */
struct proc_memory {
	uint64_t rss, anon, file, shmem, swap;
};

struct vma {
	uint64_t start, end;
	uint64_t rss, anon, swap; /* bytes */
	bool shared;		  /* a shared mapping */
	char name[96];		  /* the path or [stack], [heap], ... ; "" anonymous */
};

struct vmas {
	struct vma *v;
	size_t n;
};

/* Every mapping of the process (smaps), in address order. 0, or negative errno. */
int residency_vmas(pid_t pid, struct vmas *out);
/* The process's totals, from its mappings v. 0, or negative errno. */
int residency_memory(pid_t pid, const struct vmas *v, struct proc_memory *out);
void residency_vmas_free(struct vmas *v);

/*
 * A process's pagemap, read in address order through a window. The kernel
 * shows page frames (which tell the zero page from the process's own) to
 * an opener with CAP_SYS_ADMIN: a pagemap opened before privileges are
 * dropped keeps showing them.
 */
struct pagemap;
/* -ENOTSUP on a kernel whose pages are not 4 KiB */
int residency_pagemap_open(pid_t pid, struct pagemap **out);
void residency_pagemap_close(struct pagemap *p);
/* Forgets what the window holds: the next reading sees the page tables as they are then. */
void residency_pagemap_rewind(struct pagemap *p);
/* Pages of [addr, addr + len) in memory, and swapped out; 0 or negative errno. */
int residency_pagemap_count(struct pagemap *p, uint64_t addr, uint64_t len, uint64_t *present,
			    uint64_t *swapped);
/* present[i] for each of the n pages from addr (jestats_present_fn's shape). */
int residency_pagemap_present(void *p, uint64_t addr, size_t n, bool *present);

#endif /* __HEAPBPF_RESIDENCY_H */
