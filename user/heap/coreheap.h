/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
#ifndef __HEAPBPF_COREHEAP_H
#define __HEAPBPF_COREHEAP_H

#include <stddef.h>

#include "collect/collector.h"
#include "heap/heapwalk.h"
#include "heap/memsrc_core.h"
#include "symbols/symbolizer.h"
#include "jemalloc/target.h"

/*
 * jemalloc in a core file: the object holding it (from NT_FILE; opened from
 * --exe for the executable, else found like a recording's binaries: under
 * each --binary-path DIR, at the recorded path, through debuginfod; each
 * checked against the build-id in the core's copy of its ELF header page when
 * the core has that page), identified as user/jemalloc/target.c identifies it in a
 * live process, its globals read from the core.
 */
struct core_heap_opts {
	const char *path;	 /* the core file */
	const char *exe;	 /* --exe: the executable, or NULL */
	const char *layout;	 /* --jemalloc-layout, or NULL */
	const char *const *dirs; /* --binary-path, NULL-terminated, or NULL */
};

struct core_open_ctx;

struct core_heap {
	struct core_file *core;
	struct jemalloc_target *t; /* t->maps: NT_FILE's, the executable's renamed to --exe */
	struct mem_source mem;	   /* over core */
	char **build_ids;	   /* per t->maps entry, from the core; NULL when unknown */
	struct core_open_ctx *open_ctx;
};

/* Opens the core and finds jemalloc in it; on failure one sentence in err. */
int coreheap__open(const struct core_heap_opts *o, struct core_heap **out, char *err,
		   size_t errlen);
void coreheap__free(struct core_heap *h);

/* Walks jemalloc's profiling tables in the core (user/heap/heapwalk.h) into a new collector. */
int coreheap__walk(struct core_heap *h, struct collector **out, struct heapwalk_stats *st,
		   char *err, size_t errlen);

/* The offline symbolizer of the core's mappings (binaries found as for the target). */
int coreheap__symbolizer(const struct core_heap *h, const char *const *dirs,
			 struct symbolizer **out);

#endif /* __HEAPBPF_COREHEAP_H */
