// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/errmsg.h"
#include "jemalloc/target.h"
#include "heap/jestats.h"

/*
 * jemalloc's page is its build's LG_PAGE, not the kernel's: 4 KiB on
 * x86-64, 64 KiB in Debian's arm64 build (--with-lg-page=16), which runs on
 * 4 KiB kernels too. It is read from the target's own tables (read_classes):
 * 12 to 16 are taken.
 */
#define LG_PAGE_MIN 12
#define LG_PAGE_MAX 16
#define PAGE_OF(st) (1ull << (st)->lg_page)
/*
 * jemalloc's page map (rtree.h) over the LG_VADDR - LG_PAGE significant bits
 * of a page number (NSB), which its configure takes from the build host's
 * CPU:
 *   - 48-bit (LG_VADDR 48, Debian's builds): two levels, the root taking
 *     half the bits (18 with 4 KiB pages, 16 with 64 KiB), a leaf the rest;
 *     a leaf element is one word, the extent's pointer with its size class
 *     in bits 48 and up (RTREE_LEAF_COMPACT);
 *   - 57-bit (LG_VADDR 57, a build on a CPU with five-level paging): three
 *     levels of NSB/3 bits (rtree_levels: the first and second take what
 *     NSB % 3 leaves over), 15 each with 4 KiB pages; seven bits above the
 *     address are too few for a size class, so a leaf element is two words,
 *     the extent's pointer and then its metadata.
 * Which one a build has, its root's size says (the symbol's size).
 */
struct rtree_shape {
	unsigned bits[3]; /* per level, from the root */
	unsigned levels;
	unsigned elem_size; /* of a leaf element */
};
/* A leaf is read a 4 KiB chunk at a time, each asked of present() first (a kernel page) */
#define CHUNK	       4096ull
#define MAX_LEAF_CHUNK ((1ull << ((48u - LG_PAGE_MIN + 1) / 2)) * 8 / CHUNK)
#define MAX_ARENAS     4095
#define MAX_BLOCKS     (1u << 20)
#define MAX_SHARDS     64

/*
 * Offsets measured on each release's x86-64 build from Debian's source
 * package (gdb on the DWARF of the test fixtures; docs/rss.md): the same for
 * the _rjem_ builds, and for Redis's bundled 5.3.0 but for base_t's
 * per-class heaps (base_per_size).
 */
static const struct jestats_layout layouts[] = {
	{
		.version = "5.2.1",
		.v521 = true,
		.arena_internal = 104,
		.arena_mapped = 24,
		.arena_lstats = 768,
		.lstats_size = 48,
		.lstats_nmalloc = 0,
		.lstats_ndalloc = 8,
		.arena_nactive = 10344,
		.arena_base = 29480,
		.arena_bins = 29192,
		.arena_npages = { 15424, 20392, 25360 },
		.base_ind = 0,
		.base_blocks = 144,
		.base_allocated = 2008,
		.base_resident = 2016,
		.base_mapped = 2024,
		.base_per_size = 8,
		.bin_size = 280,
		.bin_curregs = 160,
		.bin_curslabs = 200,
		.bin_nonfull = 208,
		.rtree_root = 112,
		.state_shift = 16,
		.szind_shift = 18,
		.nfree_shift = 26,
		.slab_bit = 12,
		.leaf_ptr_mask = 0x0000fffffffffffeull,
	},
	{
		.version = "5.3.0",
		.arena_internal = 56,
		.arena_mapped = 176,
		.arena_lstats = 976,
		.lstats_size = 48,
		.lstats_nmalloc = 0,
		.lstats_ndalloc = 8,
		.arena_nactive = 10656,
		.arena_ind = 78928,
		.arena_base = 78936,
		.arena_npages = { 20480, 39920, 59360 },
		.arena_npages_guarded = { 30136, 49576, 69016 },
		.base_blocks = 160,
		.base_allocated = 3880,
		.base_resident = 3888,
		.base_mapped = 3896,
		.base_per_size = 16,
		.bin_size = 224,
		.bin_curregs = 136,
		.bin_curslabs = 176,
		.bin_nonfull = 184,
		.rtree_root = 120,
		.state_shift = 17,
		.szind_shift = 20,
		.nfree_shift = 28,
		.slab_bit = 12,
		.leaf_ptr_mask = 0x0000ffffffffff80ull,
	},
	{
		.version = "5.3.1",
		.arena_internal = 72,
		.arena_mapped = 192,
		.arena_lstats = 992,
		.lstats_size = 56,
		.lstats_nmalloc = 0,
		.lstats_ndalloc = 8,
		.lstats_active_bytes = 16,
		.arena_nactive = 12296,
		.arena_ind = 80640,
		.arena_base = 80648,
		.arena_npages = { 22104, 41544, 60984 },
		.arena_npages_guarded = { 31760, 51200, 70640 },
		.base_blocks = 160,
		.base_allocated = 3896,
		.base_resident = 3920,
		.base_mapped = 3928,
		.base_per_size = 16,
		.bin_size = 224,
		.bin_curregs = 136,
		.bin_curslabs = 176,
		.bin_nonfull = 184,
		.rtree_root = 120,
		.state_shift = 17,
		.szind_shift = 20,
		.nfree_shift = 28,
		.slab_bit = 12,
		.leaf_ptr_mask = 0x0000ffffffffff80ull,
	},
};

/* The size classes the offsets above were measured with. */
#define NSIZES_MEASURED 232

/* bin_info_t: the same in every version */
#define BIN_INFO_SIZE	40
#define BIN_INFO_REG	0
#define BIN_INFO_SLAB	8
#define BIN_INFO_NREGS	16
#define BIN_INFO_SHARDS 20

const struct jestats_layout *jestats_layout_for(const char *version)
{
	for (size_t i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++) {
		size_t n = strlen(layouts[i].version);

		if (strncmp(version, layouts[i].version, n) == 0 &&
		    (version[n] == '\0' || version[n] == '-'))
			return &layouts[i];
	}
	return NULL;
}

uint64_t jestats_bin_free(const struct jestats_bin *b)
{
	uint64_t regs = b->curslabs * b->nregs;

	return regs > b->curregs ? (regs - b->curregs) * b->size : 0;
}

const char *jestats_kind_name(enum jestats_kind k)
{
	static const char *const names[JE_KINDS] = {
		[JE_SLAB] = "slab",   [JE_LARGE] = "large",	 [JE_PROMOTED] = "sampled small",
		[JE_DIRTY] = "dirty", [JE_MUZZY] = "muzzy",	 [JE_RETAINED] = "retained",
		[JE_BASE] = "base",   [JE_OTHER] = "in transit",
	};

	return k < JE_KINDS ? names[k] : "?";
}

static int read_u64(const struct mem_source *m, uint64_t addr, uint64_t *v)
{
	return memsrc_read(m, addr, v, sizeof(*v));
}

static int read_u32(const struct mem_source *m, uint64_t addr, uint32_t *v)
{
	return memsrc_read(m, addr, v, sizeof(*v));
}

/* Where base_t's member at off (measured with 232 classes) is with nsizes. */
static uint64_t base_off(const struct jestats_layout *l, uint32_t off, unsigned nsizes)
{
	return off + (uint64_t)l->base_per_size * (nsizes - NSIZES_MEASURED);
}

/* The size classes' geometry, filled at jemalloc's boot (zero in the ELF image). */
static int read_classes(const struct mem_source *m, const struct jestats_syms *sy,
			struct jestats *st, char *err, size_t errlen)
{
	st->nbins = (unsigned)(sy->nbins_size / BIN_INFO_SIZE);
	st->nsizes = (unsigned)(sy->nsizes_size / 8);
	if (!st->nbins || st->nbins > JESTATS_MAX_BINS || st->nsizes <= st->nbins ||
	    st->nsizes > JESTATS_MAX_SIZES || st->nsizes < NSIZES_MEASURED)
		return hb_fail(err, errlen, -EPROTO,
			       "jemalloc's size-class tables have an unexpected size (%u bins, %u "
			       "classes)",
			       st->nbins, st->nsizes);
	if (memsrc_read(m, sy->index2size, st->index2size, st->nsizes * 8))
		return hb_fail(err, errlen, -EFAULT, "cannot read jemalloc's size classes");
	/* the first large class is four of jemalloc's pages (SC_LG_LARGE_MINCLASS) */
	st->lg_page = 0;
	for (unsigned lg = LG_PAGE_MIN; lg <= LG_PAGE_MAX; lg++) {
		if (st->index2size[st->nbins] == 4ull << lg)
			st->lg_page = lg;
	}
	if (!st->lg_page)
		return hb_fail(err, errlen, -EPROTO,
			       "jemalloc's first large size class is %llu bytes, not four pages of "
			       "4 to 64 KiB",
			       (unsigned long long)st->index2size[st->nbins]);
	for (unsigned i = 0; i < st->nbins; i++) {
		uint8_t b[BIN_INFO_SIZE];
		struct jestats_bin *bin = &st->bins[i];
		uint32_t nregs;

		if (memsrc_read(m, sy->bin_infos + (uint64_t)i * BIN_INFO_SIZE, b, sizeof(b)))
			return hb_fail(err, errlen, -EFAULT, "cannot read jemalloc's bin_infos");
		memcpy(&bin->size, b + BIN_INFO_REG, 8);
		memcpy(&bin->slab_size, b + BIN_INFO_SLAB, 8);
		memcpy(&nregs, b + BIN_INFO_NREGS, 4);
		bin->nregs = nregs;
		if (!bin->size || bin->size != st->index2size[i] || !nregs ||
		    (uint64_t)nregs * bin->size > bin->slab_size || bin->slab_size % PAGE_OF(st))
			return hb_fail(err, errlen, -EPROTO,
				       "jemalloc's bin %u does not fit its layout (size %llu, "
				       "%u regions in %llu bytes)",
				       i, (unsigned long long)bin->size, nregs,
				       (unsigned long long)bin->slab_size);
	}
	return 0;
}

/* The shards of bin i in the arena at a: their addresses into out; how many. */
static int bin_shards(const struct mem_source *m, const struct jestats_layout *l,
		      const struct jestats_syms *sy, uint64_t a, unsigned i, uint64_t *out)
{
	uint32_t n = 0;
	uint64_t first;

	if (read_u32(m, sy->bin_infos + (uint64_t)i * BIN_INFO_SIZE + BIN_INFO_SHARDS, &n) || !n ||
	    n > MAX_SHARDS)
		return -EPROTO;
	if (l->v521) {
		if (read_u64(m, a + l->arena_bins + (uint64_t)i * 8, &first) || !first)
			return -EFAULT;
	} else {
		uint32_t off;

		if (read_u32(m, sy->bin_offsets + (uint64_t)i * 4, &off))
			return -EFAULT;
		first = a + off;
	}
	for (uint32_t j = 0; j < n; j++)
		out[j] = first + (uint64_t)j * l->bin_size;
	return (int)n;
}

static int read_bins(const struct mem_source *m, const struct jestats_layout *l,
		     const struct jestats_syms *sy, uint64_t a, struct jestats *st)
{
	for (unsigned i = 0; i < st->nbins; i++) {
		uint64_t shards[MAX_SHARDS];
		int n = bin_shards(m, l, sy, a, i, shards);

		if (n < 0)
			return n;
		for (int j = 0; j < n; j++) {
			uint64_t regs, slabs, nonfull;

			if (read_u64(m, shards[j] + l->bin_curregs, &regs) ||
			    read_u64(m, shards[j] + l->bin_curslabs, &slabs) ||
			    read_u64(m, shards[j] + l->bin_nonfull, &nonfull))
				return -EFAULT;
			st->bins[i].curregs += regs;
			st->bins[i].curslabs += slabs;
			st->bins[i].nonfull += nonfull;
		}
	}
	return 0;
}

static int read_large(const struct mem_source *m, const struct jestats_layout *l, uint64_t a,
		      struct jestats *st)
{
	for (unsigned i = st->nbins; i < st->nsizes; i++) {
		uint64_t at = a + l->arena_lstats + (uint64_t)(i - st->nbins) * l->lstats_size;
		uint64_t nmalloc, ndalloc, bytes;

		if (read_u64(m, at + l->lstats_nmalloc, &nmalloc) ||
		    read_u64(m, at + l->lstats_ndalloc, &ndalloc))
			return -EFAULT;
		st->large[i].size = st->index2size[i];
		st->large[i].count += nmalloc - ndalloc;
		if (l->lstats_active_bytes) {
			if (read_u64(m, at + l->lstats_active_bytes, &bytes))
				return -EFAULT;
		} else {
			bytes = (nmalloc - ndalloc) * st->index2size[i];
		}
		st->large[i].bytes += bytes;
	}
	return 0;
}

/* One arena's figures added to st; its base into *base. */
static int read_arena(const struct mem_source *m, const struct jestats_layout *l,
		      const struct jestats_syms *sy, uint64_t a, unsigned ind, struct jestats *st,
		      uint64_t *base)
{
	uint64_t nactive, internal, mapped, np[3] = { 0 }, v;
	int rc;

	if (read_u64(m, a + l->arena_base, base) || !*base)
		return -EPROTO;
	if (l->v521) {
		uint32_t bind;

		if (read_u32(m, *base + l->base_ind, &bind) || bind != ind)
			return -EPROTO;
	} else {
		uint32_t aind;

		if (read_u32(m, a + l->arena_ind, &aind) || aind != ind)
			return -EPROTO;
	}
	if (read_u64(m, a + l->arena_nactive, &nactive) ||
	    read_u64(m, a + l->arena_internal, &internal) ||
	    read_u64(m, a + l->arena_mapped, &mapped))
		return -EFAULT;
	for (int k = 0; k < 3; k++) {
		if (read_u64(m, a + l->arena_npages[k], &np[k]))
			return -EFAULT;
		if (l->arena_npages_guarded[k]) {
			if (read_u64(m, a + l->arena_npages_guarded[k], &v))
				return -EFAULT;
			np[k] += v;
		}
	}
	st->active += nactive * PAGE_OF(st);
	st->internal += internal;
	st->mapped += mapped;
	st->dirty += np[0] * PAGE_OF(st);
	st->muzzy += np[1] * PAGE_OF(st);
	st->retained += np[2] * PAGE_OF(st);
	/* jemalloc's resident: 5.2.1 counts muzzy pages too */
	st->resident += (nactive + np[0] + (l->v521 ? np[1] : 0)) * PAGE_OF(st);
	rc = read_bins(m, l, sy, a, st);
	return rc ?: read_large(m, l, a, st);
}

static int read_base(const struct mem_source *m, const struct jestats_layout *l, uint64_t base,
		     struct jestats *st)
{
	uint64_t alloc, res, mapped;

	if (read_u64(m, base + base_off(l, l->base_allocated, st->nsizes), &alloc) ||
	    read_u64(m, base + base_off(l, l->base_resident, st->nsizes), &res) ||
	    read_u64(m, base + base_off(l, l->base_mapped, st->nsizes), &mapped))
		return -EFAULT;
	st->base_allocated += alloc;
	st->base_resident += res;
	st->base_mapped += mapped;
	return 0;
}

/* The arena pointers that exist (NULL ones skipped), into out; how many. */
static int arenas_of(const struct mem_source *m, const struct jestats_syms *sy, uint64_t *out,
		     char *err, size_t errlen)
{
	uint32_t total;
	int n = 0;

	if (read_u32(m, sy->narenas_total, &total))
		return hb_fail(err, errlen, -EFAULT, "cannot read jemalloc's narenas_total");
	if (!total || total > MAX_ARENAS)
		return hb_fail(err, errlen, -EPROTO, "jemalloc's narenas_total reads %u", total);
	for (uint32_t i = 0; i < total; i++) {
		uint64_t a;

		if (read_u64(m, sy->arenas + (uint64_t)i * 8, &a))
			return hb_fail(err, errlen, -EFAULT, "cannot read jemalloc's arenas[%u]",
				       i);
		out[i] = a;
		n = (int)i + 1;
	}
	return n;
}

int jestats_read(const struct mem_source *m, const struct jestats_layout *l,
		 const struct jestats_syms *sy, struct jestats *st, char *err, size_t errlen)
{
	uint64_t arenas[MAX_ARENAS] = { 0 };
	int n, rc;

	memset(st, 0, sizeof(*st));
	rc = read_classes(m, sy, st, err, errlen);
	if (rc)
		return rc;
	n = arenas_of(m, sy, arenas, err, errlen);
	if (n < 0)
		return n;
	for (int i = 0; i < n; i++) {
		uint64_t base;

		if (!arenas[i])
			continue;
		rc = read_arena(m, l, sy, arenas[i], (unsigned)i, st, &base);
		rc = rc ?: read_base(m, l, base, st);
		if (rc)
			return hb_fail(err, errlen, rc,
				       "jemalloc's arena %d does not fit the %s layout heapbpf "
				       "knows (%s)",
				       i, l->version,
				       rc == -EPROTO ? "its index or base is not where it says"
						     : "a field cannot be read");
		st->narenas++;
	}
	for (unsigned i = 0; i < st->nbins; i++) {
		st->allocated += st->bins[i].curregs * st->bins[i].size;
		st->slab_bytes += st->bins[i].curslabs * st->bins[i].slab_size;
		st->slabs += st->bins[i].curslabs;
		st->slab_free += jestats_bin_free(&st->bins[i]);
	}
	for (unsigned i = st->nbins; i < st->nsizes; i++) {
		st->large_bytes += st->large[i].bytes;
		st->nlarge += st->large[i].count;
	}
	st->allocated += st->large_bytes;
	st->metadata = st->base_allocated + st->internal;
	st->mapped += st->base_mapped;
	st->resident += st->base_resident;
	return 0;
}

/* ---- the extents ---------------------------------------------------------- */

struct walker {
	const struct mem_source *m;
	const struct jestats_layout *l;
	const struct jestats *st;
	void (*fn)(void *ctx, const struct jestats_extent *e);
	void *ctx;
	struct jestats_walk *w;
	uint64_t last;	   /* the element last decoded: a slab's pages repeat it */
	uint64_t ptr_mask; /* of a leaf element's first word: the extent's pointer */
};

/* The extent state of e_bits as a kind; active ones by their size class. */
static enum jestats_kind kind_of(const struct walker *k, uint64_t bits, unsigned szind)
{
	unsigned state = (unsigned)(bits >> k->l->state_shift) & (k->l->v521 ? 3u : 7u);

	switch (state) {
	case 0:
		if (bits >> k->l->slab_bit & 1)
			return szind < k->st->nbins ? JE_SLAB : JE_OTHER;
		if (szind < k->st->nbins)
			return JE_PROMOTED;
		return szind < k->st->nsizes ? JE_LARGE : JE_OTHER;
	case 1:
		return JE_DIRTY;
	case 2:
		return JE_MUZZY;
	case 3:
		return JE_RETAINED;
	default:
		return JE_OTHER;
	}
}

/* One leaf element at the page page: its extent passed on at the extent's first page. */
static void element(struct walker *k, uint64_t elem, uint64_t page)
{
	uint64_t ed = elem & k->ptr_mask, f[3];
	struct jestats_extent e = { 0 };

	if (!ed || elem == k->last)
		return;
	k->last = elem;
	if (memsrc_read(k->m, ed, f, sizeof(f))) {
		k->w->skipped++;
		return;
	}
	/* e_addr and e_size_esn keep more below jemalloc's page (a random offset, the esn) */
	e.addr = f[1] & ~(PAGE_OF(k->st) - 1);
	e.size = f[2] & ~(PAGE_OF(k->st) - 1);
	/* an extent moving under the walk, or not one: counted, left out */
	if (!e.size || page < e.addr || page >= e.addr + e.size) {
		k->w->skipped++;
		return;
	}
	if (page != e.addr)
		return; /* a large extent's last page, or a slab's next */
	e.szind = (unsigned)(f[0] >> k->l->szind_shift) & 0xff;
	e.kind = kind_of(k, f[0], e.szind);
	if (e.kind == JE_SLAB) {
		const struct jestats_bin *b = &k->st->bins[e.szind];

		e.nfree = (unsigned)(f[0] >> k->l->nfree_shift) & 0x3ff;
		if (e.nfree > b->nregs || e.size != b->slab_size) {
			k->w->skipped++;
			return;
		}
		k->w->slab_regions[e.szind] += b->nregs - e.nfree;
		k->w->slabs[e.szind]++;
	}
	k->w->extents++;
	k->w->pages[e.kind] += e.size / PAGE_OF(k->st);
	k->fn(k->ctx, &e);
}

/* The leaf at leaf, of the pages whose number above its own bits is top. */
static int walk_leaf(struct walker *k, const struct rtree_shape *sh, uint64_t leaf, uint64_t top,
		     jestats_present_fn present, void *pctx)
{
	unsigned lg_page = k->st->lg_page, leaf_bits = sh->bits[sh->levels - 1];
	uint64_t per_chunk = CHUNK / sh->elem_size, words = sh->elem_size / 8;
	uint64_t nchunks = ((1ull << leaf_bits) * sh->elem_size + CHUNK - 1) / CHUNK;
	bool here[MAX_LEAF_CHUNK];
	uint64_t elems[CHUNK / 8];

	if (nchunks > MAX_LEAF_CHUNK)
		return -EFAULT;
	if (!present)
		memset(here, 1, sizeof(here));
	else if (present(pctx, leaf, nchunks, here))
		return -EFAULT;
	for (uint64_t p = 0; p < nchunks; p++) {
		if (!here[p])
			continue;
		if (memsrc_read(k->m, leaf + p * CHUNK, elems, sizeof(elems)))
			return -EFAULT;
		k->w->leaf_pages++;
		for (uint64_t j = 0; j < per_chunk; j++) {
			uint64_t key = (top << (leaf_bits + lg_page)) |
				       ((p * per_chunk + j) << lg_page);

			element(k, elems[j * words], key);
		}
	}
	return 0;
}

/* The shape of the page map whose root (past root_off) is size bytes; false: neither known one. */
static bool rtree_shape_of(const struct jestats *st, const struct jestats_layout *l, uint64_t size,
			   struct rtree_shape *sh)
{
	unsigned nsb48 = 48u - st->lg_page, nsb57 = 57u - st->lg_page;

	*sh = (struct rtree_shape){ .levels = 2, .elem_size = 8 };
	sh->bits[0] = nsb48 / 2;
	sh->bits[1] = nsb48 - sh->bits[0];
	if (size == l->rtree_root + (8ull << sh->bits[0]))
		return true;
	*sh = (struct rtree_shape){ .levels = 3, .elem_size = 16 };
	sh->bits[0] = nsb57 / 3 + nsb57 % 3 / 2;
	sh->bits[1] = nsb57 / 3 + nsb57 % 3 % 2;
	sh->bits[2] = nsb57 / 3;
	return size == l->rtree_root + (8ull << sh->bits[0]);
}

/* The nodes below one entry of the root, level by level, down to the leaves. */
static int walk_node(struct walker *k, const struct rtree_shape *sh, uint64_t node, unsigned level,
		     uint64_t top, jestats_present_fn present, void *pctx)
{
	uint64_t n = 1ull << sh->bits[level], *v;
	int rc = 0;

	if (level == sh->levels - 1)
		return walk_leaf(k, sh, node, top, present, pctx);
	v = malloc(n * 8);
	if (!v)
		return -ENOMEM;
	if (memsrc_read(k->m, node, v, n * 8))
		rc = -EFAULT;
	for (uint64_t i = 0; !rc && i < n; i++) {
		if (v[i])
			rc = walk_node(k, sh, v[i], level + 1, (top << sh->bits[level]) | i,
				       present, pctx);
	}
	free(v);
	return rc;
}

static int walk_bases(struct walker *k, const struct jestats_syms *sy, char *err, size_t errlen)
{
	uint64_t arenas[MAX_ARENAS] = { 0 };
	int n = arenas_of(k->m, sy, arenas, err, errlen);

	for (int i = 0; i < n; i++) {
		uint64_t base, blk;
		unsigned count = 0;

		if (!arenas[i])
			continue;
		if (read_u64(k->m, arenas[i] + k->l->arena_base, &base) ||
		    read_u64(k->m, base + k->l->base_blocks, &blk))
			return hb_fail(err, errlen, -EFAULT, "cannot read arena %d's base", i);
		for (; blk && count < MAX_BLOCKS; count++) {
			struct jestats_extent e = { .addr = blk, .kind = JE_BASE };

			if (read_u64(k->m, blk, &e.size) || read_u64(k->m, blk + 8, &blk))
				return hb_fail(err, errlen, -EFAULT,
					       "cannot read a block of arena %d's base", i);
			if (!e.size || e.size % PAGE_OF(k->st) || e.addr % PAGE_OF(k->st)) {
				k->w->skipped++;
				continue;
			}
			k->w->pages[JE_BASE] += e.size / PAGE_OF(k->st);
			k->fn(k->ctx, &e);
		}
	}
	return n < 0 ? n : 0;
}

int jestats_walk(const struct mem_source *m, const struct jestats_layout *l,
		 const struct jestats_syms *sy, const struct jestats *st,
		 jestats_present_fn present, void *present_ctx,
		 void (*fn)(void *ctx, const struct jestats_extent *e), void *ctx,
		 struct jestats_walk *w, char *err, size_t errlen)
{
	struct walker k = { .m = m, .l = l, .st = st, .fn = fn, .ctx = ctx, .w = w };
	struct rtree_shape sh;
	uint64_t *root, nroot;
	int rc = 0;

	memset(w, 0, sizeof(*w));
	if (st->lg_page < LG_PAGE_MIN || st->lg_page > LG_PAGE_MAX)
		return hb_fail(err, errlen, -EINVAL, "jemalloc's page size is not known");
	if (!rtree_shape_of(st, l, sy->rtree_size, &sh))
		return hb_fail(err, errlen, -ENOTSUP,
			       "jemalloc's page map is neither the 48-bit nor the 57-bit one "
			       "heapbpf reads (its rtree is %llu bytes)",
			       (unsigned long long)sy->rtree_size);
	/* a compact element carries flags and the size class around the pointer */
	k.ptr_mask = sh.elem_size == 8 ? l->leaf_ptr_mask : ~0ull;
	nroot = 1ull << sh.bits[0];
	root = malloc(nroot * 8);
	if (!root)
		return hb_fail(err, errlen, -ENOMEM, "out of memory");
	if (memsrc_read(m, sy->rtree + l->rtree_root, root, nroot * 8))
		rc = hb_fail(err, errlen, -EFAULT, "cannot read jemalloc's page map");
	for (uint64_t i = 0; !rc && i < nroot; i++) {
		int e = root[i] ? walk_node(&k, &sh, root[i], 1, i, present, present_ctx) : 0;

		if (e)
			rc = hb_fail(err, errlen, e,
				     e == -ENOMEM ? "out of memory"
						  : "cannot read a node of jemalloc's page map");
	}
	free(root);
	return rc ?: walk_bases(&k, sy, err, errlen);
}

int jestats_syms_of(const struct jemalloc_target *t, struct jestats_syms *sy, char *err,
		    size_t errlen)
{
	const struct jestats_layout *l = jestats_layout_for(t->version);
	uint64_t ignored;
	const char *missing = NULL;

	memset(sy, 0, sizeof(*sy));
	if (jemalloc_target__global_sized(t, "arenas", true, &sy->arenas, &ignored))
		missing = "arenas";
	else if (jemalloc_target__global_sized(t, "narenas_total", false, &sy->narenas_total,
					       &ignored))
		missing = "narenas_total";
	else if (jemalloc_target__global_sized(t, "bin_infos", true, &sy->bin_infos,
					       &sy->nbins_size))
		missing = "bin_infos";
	else if (jemalloc_target__global_sized(t, "sz_index2size_tab", true, &sy->index2size,
					       &sy->nsizes_size))
		missing = "sz_index2size_tab";
	else if (l && !l->v521 &&
		 jemalloc_target__global_sized(t, "arena_bin_offsets", true, &sy->bin_offsets,
					       &ignored))
		missing = "arena_bin_offsets";
	else if (jemalloc_target__global_sized(t,
					       l && l->v521 ? "extents_rtree" : "arena_emap_global",
					       true, &sy->rtree, &sy->rtree_size))
		missing = l && l->v521 ? "extents_rtree" : "arena_emap_global";
	if (missing)
		return hb_fail(err, errlen, -ENOENT,
			       "jemalloc's symbol table has no %s%s; install the debug symbols of "
			       "the object that holds jemalloc (%s)",
			       t->ns_prefix, missing, t->path);
	return 0;
}
