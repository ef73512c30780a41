// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * jemalloc's page is its build's LG_PAGE: 4 KiB on x86-64, 64 KiB in
 * Debian's arm64 build (--with-lg-page=16), on a kernel of 4 KiB pages all
 * the same. heapbpf rss reads it from the target's size classes (the first
 * large class is four pages) and counts jemalloc's pages, walks its page
 * map (whose two levels split 48 - LG_PAGE bits) and rounds extents with
 * it. A synthetic image of jemalloc 5.3.0's tables, with LG_PAGE 12 and 16.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "heap/jestats.h"

/* a sparse image: a few regions at made-up addresses */
struct region {
	uint64_t addr;
	size_t len;
	uint8_t *b;
};
struct image {
	struct region r[8];
	int n;
};

static int img_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	struct image *im = ctx;

	for (int i = 0; i < im->n; i++) {
		if (addr >= im->r[i].addr && addr + len <= im->r[i].addr + im->r[i].len) {
			memcpy(buf, im->r[i].b + (addr - im->r[i].addr), len);
			return 0;
		}
	}
	return -EFAULT;
}

static bool img_mapped(void *ctx, uint64_t addr, size_t len)
{
	char one;

	return len && img_read(ctx, addr, &one, 1) == 0;
}

static uint8_t *img_add(struct image *im, uint64_t addr, size_t len)
{
	struct region *r = &im->r[im->n++];

	cr_assert_leq(im->n, 8);
	r->addr = addr;
	r->len = len;
	r->b = calloc(1, len);
	cr_assert_not_null(r->b);
	return r->b;
}

static void img_free(struct image *im)
{
	for (int i = 0; i < im->n; i++)
		free(im->r[i].b);
}

#define NSIZES	 232
#define BIN_INFO 40
#define TABLES	 0x100000ull
#define BINS	 0x200000ull
#define GLOBALS	 0x300000ull

/* jemalloc's size classes (LG_QUANTUM 4, 8 the tiny one, four a doubling): 232 of them */
static void size_classes(uint64_t *s)
{
	int n = 0;

	s[n++] = 8;
	for (uint64_t v = 16; v <= 64; v += 16)
		s[n++] = v;
	for (unsigned lg = 6; n < NSIZES; lg++)
		for (uint64_t k = 1; k <= 4 && n < NSIZES; k++)
			s[n++] = (1ull << lg) + k * (1ull << (lg - 2));
}

/* The globals jestats_read() takes of a jemalloc with pages of 2^lg_page bytes, no arena yet. */
static void tables(struct image *im, unsigned lg_page, struct jestats_syms *sy)
{
	uint64_t sizes[NSIZES], page = 1ull << lg_page, arenas_total = 1, none = 0;
	unsigned nbins = 0;
	uint8_t *t = img_add(im, TABLES, sizeof(sizes)), *g;
	uint8_t *bins;

	size_classes(sizes);
	memcpy(t, sizes, sizeof(sizes));
	while (sizes[nbins] < 4 * page)
		nbins++;
	bins = img_add(im, BINS, (size_t)nbins * BIN_INFO);
	for (unsigned i = 0; i < nbins; i++) {
		uint64_t slab = (sizes[i] + page - 1) / page * page;
		uint32_t nregs = (uint32_t)(slab / sizes[i]);

		memcpy(bins + i * BIN_INFO, &sizes[i], 8);
		memcpy(bins + i * BIN_INFO + 8, &slab, 8);
		memcpy(bins + i * BIN_INFO + 16, &nregs, 4);
	}
	/* narenas_total 1, arenas[0] not made yet */
	g = img_add(im, GLOBALS, 64);
	memcpy(g, &arenas_total, 4);
	memcpy(g + 8, &none, 8);
	*sy = (struct jestats_syms){
		.arenas = GLOBALS + 8,
		.narenas_total = GLOBALS,
		.bin_infos = BINS,
		.nbins_size = (uint64_t)nbins * BIN_INFO,
		.index2size = TABLES,
		.nsizes_size = sizeof(sizes),
	};
}

static void read_pages(unsigned lg_page, unsigned want_nbins)
{
	const struct jestats_layout *l = jestats_layout_for("5.3.0");
	struct image im = { .n = 0 };
	struct mem_source m = { .read = img_read, .mapped = img_mapped, .ctx = &im };
	struct jestats_syms sy;
	struct jestats *st = calloc(1, sizeof(*st));
	char err[256] = "";

	tables(&im, lg_page, &sy);
	cr_assert_eq(jestats_read(&m, l, &sy, st, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(st->lg_page, lg_page);
	cr_assert_eq(st->nbins, want_nbins);
	cr_assert_eq(st->index2size[st->nbins], 4ull << lg_page);
	free(st);
	img_free(&im);
}

Test(jestats_pages, lg_page_12_from_the_size_classes)
{
	/* x86-64's: small classes up to 14 KiB */
	read_pages(12, 36);
}

Test(jestats_pages, lg_page_16_from_the_size_classes)
{
	/* Debian's arm64 build: small classes up to 224 KiB */
	read_pages(16, 52);
}

Test(jestats_pages, a_first_large_class_of_no_page_is_refused)
{
	const struct jestats_layout *l = jestats_layout_for("5.3.0");
	struct image im = { .n = 0 };
	struct mem_source m = { .read = img_read, .mapped = img_mapped, .ctx = &im };
	struct jestats_syms sy;
	struct jestats *st = calloc(1, sizeof(*st));
	char err[256] = "";

	tables(&im, 16, &sy);
	/* one bin fewer: the first "large" class is 224 KiB, four pages of nothing */
	sy.nbins_size -= BIN_INFO;
	cr_assert_eq(jestats_read(&m, l, &sy, st, err, sizeof(err)), -EPROTO);
	cr_assert(strstr(err, "first large size class is 229376 bytes"), "%s", err);
	free(st);
	img_free(&im);
}

struct seen {
	int n;
	struct jestats_extent e;
};

static void on_extent(void *ctx, const struct jestats_extent *e)
{
	struct seen *s = ctx;

	s->n++;
	s->e = *e;
}

/*
 * A large extent's edata at edata: active (state 0), not a slab, of size's
 * class; e_addr and e_size carry low bits (the cache-oblivious offset, the
 * esn) as given. Its size class.
 */
static unsigned large_edata(struct image *im, const struct jestats *st,
			    const struct jestats_layout *l, uint64_t edata, uint64_t addr,
			    uint64_t size, uint64_t low)
{
	uint64_t f[3];
	unsigned szind;

	for (szind = st->nbins; st->index2size[szind] != size; szind++)
		;
	f[0] = (uint64_t)szind << l->szind_shift;
	f[1] = addr + low;
	f[2] = size | low;
	memcpy(img_add(im, edata, sizeof(f)), f, sizeof(f));
	return szind;
}

/* The walk finds that one extent, at addr, of its size and class, npages of jemalloc's pages. */
static void walk_finds_it(const struct mem_source *m, const struct jestats_layout *l,
			  const struct jestats_syms *sy, const struct jestats *st, uint64_t addr,
			  uint64_t size, unsigned szind, uint64_t npages)
{
	struct jestats_walk w;
	struct seen seen = { 0 };
	char err[256] = "";

	cr_assert_eq(jestats_walk(m, l, sy, st, NULL, NULL, on_extent, &seen, &w, err, sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(seen.n, 1);
	cr_assert_eq(w.extents, 1);
	cr_assert_eq(w.skipped, 0);
	cr_assert_eq(seen.e.kind, JE_LARGE);
	cr_assert_eq(seen.e.addr, addr, "%#llx", (unsigned long long)seen.e.addr);
	cr_assert_eq(seen.e.size, size, "%llu", (unsigned long long)seen.e.size);
	cr_assert_eq(seen.e.szind, szind);
	cr_assert_eq(w.pages[JE_LARGE], npages);
}

/*
 * One large extent of 256 KiB (four 64 KiB pages) in jemalloc's page map:
 * the root indexed by address bits 32 to 47, a leaf by bits 16 to 31; its
 * edata's address carries a cache-oblivious offset and its size an esn,
 * both under 64 KiB but above 4 KiB.
 */
Test(jestats_pages, page_map_of_64k_pages)
{
	const struct jestats_layout *l = jestats_layout_for("5.3.0");
	struct image im = { .n = 0 };
	struct mem_source m = { .read = img_read, .mapped = img_mapped, .ctx = &im };
	struct jestats_syms sy;
	struct jestats *st = calloc(1, sizeof(*st));
	struct jestats_walk w;
	struct seen seen = { 0 };
	const uint64_t rtree = 0x400000, leaf = 0x1000000, edata = 0x2000000;
	const uint64_t addr = 0x7f1234560000ull, size = 256 << 10;
	uint64_t leafaddr = leaf;
	uint8_t *root, *lf;
	unsigned szind;
	char err[256] = "";

	tables(&im, 16, &sy);
	cr_assert_eq(jestats_read(&m, l, &sy, st, err, sizeof(err)), 0, "%s", err);
	/* a root of 2^16 leaves, each of 2^16 pages */
	root = img_add(&im, rtree, l->rtree_root + (1u << 16) * 8);
	memcpy(root + l->rtree_root + (addr >> 32) * 8, &leafaddr, 8);
	lf = img_add(&im, leaf, (1u << 16) * 8);
	for (uint64_t p = 0; p < size >> 16; p++)
		memcpy(lf + (((addr >> 16) & 0xffff) + p) * 8, &edata, 8);
	/* low bits under 64 KiB but above 4 KiB */
	szind = large_edata(&im, st, l, edata, addr, size, 0x2340);
	sy.rtree = rtree;
	sy.rtree_size = l->rtree_root + (1u << 16) * 8;
	/* four of jemalloc's pages */
	walk_finds_it(&m, l, &sy, st, addr, size, szind, 4);
	/* 4 KiB pages' map would be 2^18 leaves: a 64 KiB build's is refused as such */
	sy.rtree_size = l->rtree_root + (1u << 18) * 8;
	cr_assert_eq(jestats_walk(&m, l, &sy, st, NULL, NULL, on_extent, &seen, &w, err,
				  sizeof(err)),
		     -ENOTSUP);
	free(st);
	img_free(&im);
}

/*
 * A 57-bit build's page map (4 KiB pages): three levels of 15 bits (the
 * root by address bits 42 to 56, a node by 27 to 41, a leaf by 12 to 26),
 * two words a leaf element, the extent's pointer first and its metadata
 * after (no room above the pointer for the size class). One large extent of
 * 64 KiB, found at its first page with its class from the edata.
 */
Test(jestats_pages, page_map_of_57_bit_addresses)
{
	const struct jestats_layout *l = jestats_layout_for("5.3.0");
	struct image im = { .n = 0 };
	struct mem_source m = { .read = img_read, .mapped = img_mapped, .ctx = &im };
	struct jestats_syms sy;
	struct jestats *st = calloc(1, sizeof(*st));
	struct jestats_walk w;
	struct seen seen = { 0 };
	const uint64_t rtree = 0x400000, node = 0x1000000, leaf = 0x1800000, edata = 0x2000000;
	const uint64_t addr = 0x7f1234560000ull, size = 64 << 10, pn = addr >> 12;
	const uint64_t bits15 = (1u << 15) - 1;
	uint64_t nodeaddr = node, leafaddr = leaf;
	uint8_t *root, *nd, *lf;
	unsigned szind;
	char err[256] = "";

	cr_assert_not_null(st);
	tables(&im, 12, &sy);
	cr_assert_eq(jestats_read(&m, l, &sy, st, err, sizeof(err)), 0, "%s", err);
	root = img_add(&im, rtree, l->rtree_root + (1u << 15) * 8);
	memcpy(root + l->rtree_root + (pn >> 30) * 8, &nodeaddr, 8);
	nd = img_add(&im, node, (1u << 15) * 8);
	memcpy(nd + ((pn >> 15) & bits15) * 8, &leafaddr, 8);
	lf = img_add(&im, leaf, (1u << 15) * 16);
	for (uint64_t p = 0; p < size >> 12; p++) {
		/* the pointer, then metadata that is not an address (slab 0, head, state 0) */
		const uint64_t elem[2] = { edata, 0x2a2 };

		memcpy(lf + ((pn & bits15) + p) * 16, elem, sizeof(elem));
	}
	szind = large_edata(&im, st, l, edata, addr, size, 0);
	sy.rtree = rtree;
	sy.rtree_size = l->rtree_root + (1u << 15) * 8;
	walk_finds_it(&m, l, &sy, st, addr, size, szind, 16);
	/* a root of another size is neither map: refused in one sentence */
	sy.rtree_size = l->rtree_root + (1u << 14) * 8;
	cr_assert_eq(jestats_walk(&m, l, &sy, st, NULL, NULL, on_extent, &seen, &w, err,
				  sizeof(err)),
		     -ENOTSUP);
	cr_assert(strstr(err, "neither the 48-bit nor the 57-bit"), "%s", err);
	free(st);
	img_free(&im);
}
