/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What heapbpf reads from jemalloc, per jemalloc version: probe argument
 * positions, struct offsets, the name of the active flag. One table entry
 * per version; a new version is a new entry, not new code. docs/jemalloc.md
 * has the facts behind each entry.
 *
 * Where the jemalloc object carries DWARF, the same facts are read from it
 * and must agree with the entry (layout_dwarf.h): a mismatch is an error,
 * not a guess.
 */
#ifndef __HEAPBPF_LAYOUT_H
#define __HEAPBPF_LAYOUT_H

#include <linux/types.h>
#include <stdbool.h>

#include "heapbpf.h"

struct jemalloc_layout {
	const char *name;	    /* "5.3.0" */
	const char *version_prefix; /* matched against the embedded version string */
	const char *active_sym;	    /* the prof_active flag, without namespace prefix */
	/*
	 * --enable-debug adds a magic to nstime_t (5.3.x), moving the
	 * prof_info_t fields after alloc_time by this many bytes (0: no shift).
	 */
	__u32 debug_info_shift;
	/*
	 * 5.2.1: prof.active switched on after start never samples again in a
	 * thread that allocated while it was off (fixed by jemalloc commit
	 * 9e031c1d, in 5.3.0).
	 */
	bool late_active_bug;
	/*
	 * A function every allocation that could be sampled passes through
	 * while that bug is in effect (malloc_default(size): the slow path):
	 * heapbpf counts its bytes to tell "not sampling" from "not allocating".
	 */
	const char *activity_fn;
	struct heapbpf_layout bpf;
};

/* The entry whose version_prefix the version string starts with, or NULL. */
const struct jemalloc_layout *jemalloc_layout_find(const char *version);
/* The entry named name ("5.3.0"), or NULL. */
const struct jemalloc_layout *jemalloc_layout_by_name(const char *name);
/* Comma-separated list of supported version names, for messages. */
const char *jemalloc_layout_names(void);
/* The layout of a --enable-debug build of l's version. */
void jemalloc_layout_debug(const struct jemalloc_layout *l, struct jemalloc_layout *out);

#endif /* __HEAPBPF_LAYOUT_H */
