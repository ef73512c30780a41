/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The jemalloc layout as an object's own DWARF describes it (libdw), and its
 * comparison with a table entry (layout.h): where the target carries debug
 * info, heapbpf refuses to run on offsets or parameter positions that
 * disagree with the layout it would use.
 */
#ifndef __HEAPBPF_LAYOUT_DWARF_H
#define __HEAPBPF_LAYOUT_DWARF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "jemalloc/layout.h"

/* The heap tables (layout.h, struct jemalloc_heap_layout) as DWARF describes them; -1: not. */
struct jemalloc_heap_dwarf {
	int64_t ckh_count, ckh_lg_curbuckets, ckh_tab, ckhc_size, ckhc_key, ckhc_data;
	int64_t gctx_tctxs, tctx_tdata, tctx_cnts, tctx_link, tctx_state;
	int64_t tctx_thr_uid, tctx_thr_discrim, tctx_uid, rbn_left, rbn_right_red, tdata_expired;
	int64_t cnt_size, cnt_curobjs, cnt_curbytes, cnt_accumobjs, cnt_accumbytes;
	int64_t cnt_curobjs_su, cnt_curbytes_u, cnt_accumobjs_su, cnt_accumbytes_u;
};

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
	struct jemalloc_heap_dwarf heap;
};

/*
 * Reads what jemalloc's own compile unit (src/prof.c) describes in the DWARF
 * of the ELF file at path. -ENOENT when the file has no DWARF for jemalloc,
 * other negative errno when it cannot be read.
 */
int layout_dwarf_read(const char *path, struct jemalloc_dwarf *d);

/*
 * The heap tables' layout from what DWARF describes (for a layout built from
 * DWARF): 0, or -ENOENT when it lacks a field the walker reads.
 */
int layout_dwarf_heap(const struct jemalloc_dwarf *d, struct jemalloc_heap_layout *h);

/*
 * Compares layout l with what DWARF describes. 0 when everything heapbpf
 * reads agrees; -EPROTO with the first disagreement in why ("prof_tctx_t.gctx
 * is at 88 in its debug info, the 5.3.0 layout says 96") otherwise.
 */
int layout_dwarf_check(const struct jemalloc_layout *l, const struct jemalloc_dwarf *d, char *why,
		       size_t len);

/*
 * A whole layout from what DWARF describes, for a version the table has no
 * release string for: every offset and parameter position from d, the
 * signature's shape (5.2.x: the free hook gets the tctx, and the
 * late-activation bug; 5.3.x: it gets a prof_info_t) from the parameter
 * names, the active flag's name (active_sym, without namespace) from the
 * object's symbols. -EPROTO with what is missing in why when d lacks
 * something heapbpf reads.
 */
int layout_dwarf_layout(const struct jemalloc_dwarf *d, const char *active_sym,
			struct jemalloc_layout *out, char *why, size_t len);

#endif /* __HEAPBPF_LAYOUT_DWARF_H */
