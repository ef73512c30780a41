/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * jemalloc's own accounting, read from a memory image (memsrc.h) without
 * calling anything in the process and without an epoch: the live fields its
 * mallctl stats are merged from (allocated, active, metadata, mapped,
 * retained, dirty and muzzy pages, per small and large size class), and
 * every extent jemalloc has and every metadata block, with where each lies.
 *
 * In: the image, the runtime addresses of jemalloc's globals (a found target,
 * jestats_syms_of()) and its version's layout (jestats_layout_for(): jemalloc
 * 5.2.1, 5.3.0 and 5.3.1 release builds, x86-64 and arm64, 48-bit rtree,
 * jemalloc pages of 4 to 64 KiB). Out: struct jestats, and one
 * jestats_extent per extent through a callback. Nothing here knows about pids or the kernel's page tables (heap/residency.h).
 *
 * The facts (which fields are live, the formulas, the rtree's leaf
 * encoding) are in docs/rss.md.
 */
#ifndef __HEAPBPF_JESTATS_H
#define __HEAPBPF_JESTATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "jemalloc/memsrc.h"

/* Size classes the tables hold at most (232 with 16-byte quanta, 235 with 8). */
#define JESTATS_MAX_SIZES 256
#define JESTATS_MAX_BINS  64

/* Where jemalloc's structures keep what is read: one entry per version. */
struct jestats_layout {
	const char *version; /* "5.3.0" */
	bool v521;	     /* 5.2.1: extents_t, bins through bin_shards, base->ind */
	uint32_t arena_internal, arena_mapped, arena_lstats, lstats_size, lstats_nmalloc,
		lstats_ndalloc, lstats_active_bytes; /* 0: none (before 5.3.1) */
	uint32_t arena_nactive, arena_ind, arena_base, arena_bins;
	uint32_t arena_npages[3], arena_npages_guarded[3]; /* dirty, muzzy, retained; 0: none */
	uint32_t base_ind, base_blocks, base_allocated, base_resident, base_mapped;
	uint32_t base_per_size; /* base_t's members after its per-class heaps move by this */
	uint32_t bin_size, bin_curregs, bin_curslabs, bin_nonfull;
	uint32_t rtree_root;
	/* e_bits: the extent's state and size class */
	uint8_t state_shift, szind_shift, nfree_shift, slab_bit;
	uint64_t leaf_ptr_mask; /* an rtree leaf element's extent pointer */
};

/* The layout of jemalloc version "X.Y.Z..." (its release number), or NULL. */
const struct jestats_layout *jestats_layout_for(const char *version);

/* Runtime addresses and sizes of the globals read (symbols, no DWARF needed). */
struct jestats_syms {
	uint64_t arenas;		  /* <ns>arenas, atomic_p_t[] */
	uint64_t narenas_total;		  /* static unsigned */
	uint64_t bin_infos, nbins_size;	  /* <ns>bin_infos and its byte size */
	uint64_t index2size, nsizes_size; /* <ns>sz_index2size_tab and its byte size */
	uint64_t bin_offsets;		  /* 5.3: <ns>arena_bin_offsets */
	uint64_t rtree, rtree_size;	  /* <ns>arena_emap_global / <ns>extents_rtree */
};

struct jestats_bin {
	uint64_t size;	    /* region size */
	uint64_t slab_size; /* bytes of one slab */
	uint32_t nregs;	    /* regions in one slab */
	uint64_t curregs, curslabs, nonfull;
};

struct jestats_large {
	uint64_t size;	/* the class's size */
	uint64_t count; /* live: nmalloc - ndalloc */
	uint64_t bytes; /* their usable bytes (5.3.1: active_bytes) */
};

/* jemalloc's own figures, summed over its arenas; bytes unless said. */
struct jestats {
	unsigned narenas; /* arenas that exist */
	unsigned nbins, nsizes;
	unsigned lg_page; /* jemalloc's page, its build's LG_PAGE (12; 16 on Debian's arm64) */
	uint64_t allocated, active, metadata, mapped, retained, dirty, muzzy;
	uint64_t resident; /* jemalloc's stats.resident, its own upper bound */
	uint64_t base_allocated, base_resident, base_mapped, internal;
	/* the small classes' slabs: their bytes, how many, their free regions' bytes */
	uint64_t slab_bytes, slabs, slab_free;
	uint64_t large_bytes, nlarge; /* the large classes' live objects */
	struct jestats_bin bins[JESTATS_MAX_BINS];
	struct jestats_large large[JESTATS_MAX_SIZES];
	uint64_t index2size[JESTATS_MAX_SIZES];
};

/*
 * Reads the aggregates. 0, or negative errno with one sentence in err:
 * -EPROTO when what is read does not fit the layout (an arena's index or
 * base pointer not where it says), -EFAULT when a global cannot be read.
 */
int jestats_read(const struct mem_source *m, const struct jestats_layout *l,
		 const struct jestats_syms *sy, struct jestats *st, char *err, size_t errlen);

enum jestats_kind {
	JE_SLAB,     /* a small size class's slab */
	JE_LARGE,    /* one large object */
	JE_PROMOTED, /* one sampled small object in a page-sized extent of its own */
	JE_DIRTY,
	JE_MUZZY,
	JE_RETAINED,
	JE_BASE,  /* a block of jemalloc's metadata */
	JE_OTHER, /* an extent in transit (being split, merged or recycled) */
	JE_KINDS
};

/* Free bytes in the slabs of class b: its regions not in use. */
uint64_t jestats_bin_free(const struct jestats_bin *b);

/* Printable name of a kind ("slab", "large", ...). */
const char *jestats_kind_name(enum jestats_kind k);

struct jestats_extent {
	uint64_t addr, size; /* page-aligned */
	enum jestats_kind kind;
	unsigned szind; /* its size class (slabs: the bin; large: the class) */
	unsigned nfree; /* slabs: free regions */
};

/* What a walk of the extents saw. */
struct jestats_walk {
	uint64_t extents, skipped; /* skipped: failed a check (moving) */
	uint64_t leaf_pages;	   /* the page map's 4 KiB chunks read */
	uint64_t pages[JE_KINDS];  /* extents' pages by kind, jemalloc's (st->lg_page) */
	uint64_t slab_regions[JESTATS_MAX_BINS]; /* regions in use, per bin, from the slabs */
	uint64_t slabs[JESTATS_MAX_BINS];
};

/*
 * Whether a page of the image holds anything (the rtree's leaves are 2 MiB
 * of mostly untouched memory; reading them whole would fault them in):
 * fills present[0..n) for the n pages from addr. NULL: every page is read.
 */
typedef int (*jestats_present_fn)(void *ctx, uint64_t addr, size_t n, bool *present);

/*
 * Every extent (through jemalloc's page map, the rtree) and every base
 * block of every arena, each passed to fn once; w says what was seen.
 * Extents are found in address order; base blocks after them.
 */
int jestats_walk(const struct mem_source *m, const struct jestats_layout *l,
		 const struct jestats_syms *sy, const struct jestats *st,
		 jestats_present_fn present, void *present_ctx,
		 void (*fn)(void *ctx, const struct jestats_extent *e), void *ctx,
		 struct jestats_walk *w, char *err, size_t errlen);

struct jemalloc_target;
/* The globals' addresses in a found target; -ENOENT with a sentence when one is missing. */
int jestats_syms_of(const struct jemalloc_target *t, struct jestats_syms *sy, char *err,
		    size_t errlen);

#endif /* __HEAPBPF_JESTATS_H */
