/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The flame graph's tree as its own files share it: flamegraph.c builds
 * it, flamegraph_page.c writes the page around it. Private to the flame
 * graph: nothing outside those files includes this.
 */
#ifndef __HEAPBPF_FLAMEGRAPH_TREE_H
#define __HEAPBPF_FLAMEGRAPH_TREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "profile/flamegraph_types.h"
#include "util/hashmap.h"
#include "util/profile.h"

struct fg_frame {
	const char *name; /* into the profile, or owned */
	const char *file; /* into the profile, or NULL */
	char *owned;	  /* a name made here: "0x...", "pid N" */
	enum fg_kind kind;
	bool inlined;
};

struct fg_node {
	uint32_t frame, parent;
	uint32_t child, next; /* first child, next sibling; 0 = none (the root is nobody's child) */
	uint32_t depth;
	int64_t v[2];	    /* bytes, objects */
	int64_t d[2];	    /* a diff's: the sample type's value in BASE and in NEW */
	int64_t line, lsum; /* the line carrying the most value so far, and that value */
};

/* The value each (node, line) pair carried: a frame merges call sites of several lines. */
struct fg_line {
	uint32_t node;
	int64_t line, sum;
};

struct flamegraph {
	const struct hb_profile *p;
	enum hb_value which;
	enum hb_value space, objects; /* the pair of the sample type's kind */
	bool diff;		      /* heapbpf diff's profile: base and new per node */
	struct fg_frame *frames;
	size_t nframes, frames_cap;
	struct fg_node *nodes;
	size_t nnodes, nodes_cap;
	struct fg_line *lines;
	size_t nlines, lines_cap;
	struct hashmap frame_map, node_map, line_map;
	uint32_t *order; /* pre-order position -> node */
	uint32_t *pos;	 /* node -> pre-order position */
};

#endif /* __HEAPBPF_FLAMEGRAPH_TREE_H */
