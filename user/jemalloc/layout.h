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

/*
 * Where jemalloc keeps its sampled heap (the tables prof.dump walks), for
 * heapbpf --live-heap and reports on a core (user/heap/heapwalk.c): the static
 * ckh_t bt2gctx (cells {prof_bt_t *key, prof_gctx_t *data}, 2^lg_curbuckets
 * buckets of 2^lg_bucket_cells cells), each gctx's red-black tree of tctxs
 * (rb.h: left pointer, right pointer with the red bit in bit 0) and each
 * tctx's prof_cnt_t. Offsets in bytes; docs/jemalloc.md has the facts.
 */
struct jemalloc_heap_layout {
	__u32 ckh_count, ckh_lg_curbuckets, ckh_tab; /* ckh_t fields */
	__u32 ckhc_size, ckhc_key, ckhc_data;	     /* ckhc_t: one cell */
	__u32 lg_bucket_cells;			     /* LG_CKH_BUCKET_CELLS */
	__u32 gctx_tctxs;			     /* prof_gctx_t.tctxs (the tree's root) */
	__u32 tctx_tdata, tctx_cnts, tctx_link, tctx_state;
	/* the tree's order (prof_tctx_comp): thr_uid, then thr_discrim, then tctx_uid */
	__u32 tctx_thr_uid, tctx_thr_discrim, tctx_uid;
	__u32 rbn_left, rbn_right_red; /* within the link */
	__u32 tdata_expired;	       /* prof_tdata_t.expired (a bool) */
	/* prof_cnt_t: size and counters; has_unbiased: 5.3's *_unbiased companions */
	__u32 cnt_size, cnt_curobjs, cnt_curbytes, cnt_accumobjs, cnt_accumbytes;
	bool has_unbiased;
	__u32 cnt_curobjs_su, cnt_curbytes_u, cnt_accumobjs_su, cnt_accumbytes_u;
	__u32 lg_tiny_min; /* SC_LG_TINY_MIN: the shift of the *_shifted_unbiased counts */
};

struct jemalloc_layout {
	const char *name;	    /* "5.3.0" */
	const char *version_prefix; /* matched against the embedded version string */
	/*
	 * The version string of the release tag (X.Y.Z-0-g<40 hex>): a string
	 * equal to it is that release and needs no confirmation; NULL when the
	 * entry knows no release string (its layout is confirmed per target).
	 */
	const char *release;
	const char *active_sym; /* the prof_active flag, without namespace prefix */
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
	/*
	 * 5.3.1: the backtrace depth is the run-time opt.prof_bt_max (default
	 * 128, no upper bound with libgcc's unwinder), not PROF_BT_MAX (128):
	 * a backtrace may be longer than the 128 frames heapbpf keeps.
	 */
	bool bt_max_opt;
	struct heapbpf_layout bpf;
	struct jemalloc_heap_layout heap;
};

/* The entry whose version_prefix the version string starts with, or NULL. */
const struct jemalloc_layout *jemalloc_layout_find(const char *version);

/* How a version string matched the table (jemalloc_layout_match). */
enum jemalloc_match {
	JEMALLOC_MATCH_NONE,   /* not X.Y.Z-N-g<hex>, or a number without an entry */
	JEMALLOC_MATCH_EXACT,  /* the entry's release string itself */
	JEMALLOC_MATCH_NUMBER, /* the entry's X.Y.Z with another suffix: -0-g0, -N-g<hash> */
};

/*
 * Splits a jemalloc version string of the shape X.Y.Z-N-g<1 to 40 hex>
 * (git describe's, or Redis's --with-version=5.3.0-0-g0) into its number
 * "X.Y.Z" (into num); -EINVAL when it has another shape.
 */
int jemalloc_layout_version_number(const char *version, char *num, size_t len);
/*
 * The entry for a version string and how it matched: EXACT for a release
 * string the table knows, NUMBER when only X.Y.Z names an entry (the layout
 * then has to be confirmed: by DWARF or by the first samples), else NONE
 * and NULL.
 */
const struct jemalloc_layout *jemalloc_layout_match(const char *version, enum jemalloc_match *how);
/* The entry named name ("5.3.0"), or NULL. */
const struct jemalloc_layout *jemalloc_layout_by_name(const char *name);
/* Comma-separated list of supported version names, for messages. */
const char *jemalloc_layout_names(void);
/* The layout of a --enable-debug build of l's version. */
void jemalloc_layout_debug(const struct jemalloc_layout *l, struct jemalloc_layout *out);

#endif /* __HEAPBPF_LAYOUT_H */
