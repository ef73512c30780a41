/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Where a jemalloc process's resident memory is (heapbpf rss): jemalloc's
 * accounting read from its memory (jestats.h), every extent and metadata
 * block checked page by page against the kernel's page tables and split by
 * kind, and the resident memory outside jemalloc by mapping (thread stacks,
 * other anonymous memory, files, shmem), so that the parts add up to the
 * RSS. Read from a live process without stopping it and without turning
 * sampling on (docs/rss.md).
 */
#ifndef __HEAPBPF_RSSMAP_H
#define __HEAPBPF_RSSMAP_H

#include <stdint.h>

#include "heap/jestats.h"
#include "heap/residency.h"

/* The largest anonymous mappings outside jemalloc, kept by size. */
#define RSS_OTHERS 5

struct rss_other {
	uint64_t start, bytes;
	char name[96];
};

struct rss_map {
	struct proc_memory mem; /* the kernel's totals */
	struct jestats je;	/* jemalloc's accounting */
	struct jestats_walk walk;
	/* measured from the page tables, by kind: resident bytes and bytes swapped out */
	uint64_t resident[JE_KINDS], swapped[JE_KINDS];
	uint64_t bin_resident[JESTATS_MAX_BINS]; /* of each small class's slabs */
	uint64_t je_resident;			 /* every kind together */
	uint64_t main_stack, thread_stacks;	 /* resident, outside jemalloc */
	unsigned nthread_stacks;
	uint64_t other_anon; /* the rest of the anonymous memory outside jemalloc */
	struct rss_other others[RSS_OTHERS];
	int64_t unexplained; /* rss minus the sum of the parts */
	double walk_ms;	     /* how long the reading took */
};

struct jemalloc_target;
struct pagemap;
/*
 * Measures t's process. 0, or negative errno with one sentence in err
 * (a jemalloc whose layout heapbpf does not know, a debug build, symbols
 * missing, the process gone).
 */
int rssmap_read(const struct jemalloc_target *t, struct rss_map *out, char *err, size_t errlen);

/*
 * rssmap_read() through pm, a pagemap of t's process opened earlier (held
 * by a run that drops its privileges after attaching: residency.h); NULL
 * opens one.
 */
int rssmap_read_with(const struct jemalloc_target *t, struct pagemap *pm, struct rss_map *out,
		     char *err, size_t errlen);

#endif /* __HEAPBPF_RSSMAP_H */
