/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A flame graph's node as tests and the page see it (flamegraph.h): its
 * kind of frame and what it carries. Apart from the flame graph's
 * functions so that its own files (flamegraph_tree.h) can hold them
 * without reaching up to its entry points.
 */
#ifndef __HEAPBPF_FLAMEGRAPH_TYPES_H
#define __HEAPBPF_FLAMEGRAPH_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What a node's frame is; its JSON flags in the page. */
enum fg_kind {
	FG_FUNCTION, /* a function, or an address where there was no symbol */
	FG_PROCESS,  /* "pid N": the root of one process's stacks (--follow-forks) */
	FG_ROOT,     /* "all": every stack */
};

/* One node of the tree as tests and the page see it. */
struct fg_node_info {
	const char *name; /* function, "0x<address>", "[unknown]", "pid N" or "all" */
	const char *file; /* source file, or NULL */
	int64_t line;	  /* the line of this frame that carries the most value; 0 unknown */
	bool inlined;	  /* inlined into the frame below it (its caller) */
	enum fg_kind kind;
	size_t parent;		/* index of the parent node; the root (0) is its own parent */
	size_t depth;		/* 0 for the root */
	int64_t bytes, objects; /* of the sample type's kind (in use or allocated), inclusive */
	int64_t base, new;	/* a diff's: the sample type's value in BASE and NEW, inclusive */
};

#endif /* __HEAPBPF_FLAMEGRAPH_TYPES_H */
