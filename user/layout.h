/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What heapbpf reads from jemalloc, per jemalloc version: probe argument
 * positions, struct offsets, the name of the active flag. One table entry
 * per version; a new version is a new entry, not new code.
 *
 * Where the jemalloc object carries DWARF, the same facts are read from it
 * (libdw) and must agree with the entry: a mismatch is an error, not a guess.
 */
#ifndef __HEAPBPF_LAYOUT_H
#define __HEAPBPF_LAYOUT_H

#include <linux/types.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

/* Offsets and parameter positions as an object's DWARF describes them; -1: not described. */
struct jemalloc_dwarf {
	int64_t tctx_gctx, gctx_bt, bt_vec, bt_len;
	int64_t info_time, info_tctx, info_size; /* prof_info_t (5.3) */
	/* 0-based positions of the named parameters, -1 when the function has none by that name */
	int alloc_ptr, alloc_size, alloc_usize, alloc_tctx;
	int free_ptr, free_usize, free_info, free_tctx;
	bool have_alloc_fn, have_free_fn;
	bool nstime_magic; /* nstime_t has a magic member: a --enable-debug build */
	bool have_nstime;
};

/*
 * Reads what jemalloc's own compile unit (src/prof.c) describes in the DWARF
 * of the ELF file at path. -ENOENT when the file has no DWARF for jemalloc,
 * other negative errno when it cannot be read.
 */
int jemalloc_dwarf_read(const char *path, struct jemalloc_dwarf *d);

/*
 * Compares layout l with what DWARF describes. 0 when everything heapbpf
 * reads agrees; -EPROTO with the first disagreement in why ("prof_tctx_t.gctx
 * is at offset 88, the 5.3.0 layout says 96") otherwise.
 */
int jemalloc_layout_check(const struct jemalloc_layout *l, const struct jemalloc_dwarf *d,
			  char *why, size_t len);

#endif /* __HEAPBPF_LAYOUT_H */
