// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The live-heap walker (user/heap/heapwalk.c) on a made-up memory image laid out
 * as jemalloc 5.3.0 (and 5.2.1) lays out its tables: the sums it reports,
 * what it skips as jemalloc's dump does, and every validation that makes it
 * refuse a corrupt image instead of following it.
 */
#include <errno.h>
#include <math.h>
#include <string.h>

#include <criterion/criterion.h>

#include "collect/collector.h"
#include "heap/heapwalk.h"
#include "jemalloc/layout.h"

#define BASE	0x10000ull
#define SIZE	0x10000ull
#define CKH	BASE
#define LG	(BASE + 0x40)
#define ACCUM	(BASE + 0x48)
#define ACTIVE	(BASE + 0x49)
#define TAB	(BASE + 0x100)
#define GCTX(i) (BASE + 0x1000 + (i)*0x400ull)
#define TDATA	(BASE + 0x8000)
#define TDATA_X (BASE + 0x8100) /* an expired one */
#define TCTX(j) (BASE + 0x9000 + (j)*0x100ull)

static uint8_t img[SIZE];
static const struct jemalloc_layout *L;

static int img_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	(void)ctx;
	if (addr < BASE || addr + len > BASE + SIZE)
		return -EFAULT;
	memcpy(buf, img + (addr - BASE), len);
	return 0;
}

static bool img_mapped(void *ctx, uint64_t addr, size_t len)
{
	(void)ctx;
	return addr >= BASE && addr + len <= BASE + SIZE && addr + len >= addr;
}

static const struct mem_source src = { .read = img_read, .mapped = img_mapped };
static const struct heapwalk_syms syms = {
	.bt2gctx = CKH,
	.lg_prof_sample = LG,
	.opt_prof_accum = ACCUM,
	.active = ACTIVE,
};

static void put64(uint64_t addr, uint64_t v)
{
	memcpy(img + (addr - BASE), &v, 8);
}

static void put32(uint64_t addr, uint32_t v)
{
	memcpy(img + (addr - BASE), &v, 4);
}

static void put8(uint64_t addr, uint8_t v)
{
	img[addr - BASE] = v;
}

/* A gctx with frames 0x1000 + k; cell c of the table points to it. */
static void gctx(int i, int cell, uint32_t nframes)
{
	uint64_t g = GCTX(i), bt = g + L->bpf.gctx_bt_off;

	put64(TAB + cell * 16, bt);
	put64(TAB + cell * 16 + 8, g);
	put64(bt + L->bpf.bt_vec_off, g + 0x200);
	put32(bt + L->bpf.bt_len_off, nframes);
	for (uint32_t k = 0; k < nframes && k < 64; k++)
		put64(g + 0x200 + k * 8, 0x1000 + k + i * 0x100);
}

/* A tctx of gctx i: thread uid, counters (cur objs, cur bytes; accum = 2x; unbiased = 8x/4x). */
static void tctx(int j, int i, uint64_t uid, uint64_t objs, uint64_t bytes)
{
	const struct jemalloc_heap_layout *h = &L->heap;
	uint64_t t = TCTX(j), c = t + h->tctx_cnts;

	put64(t + h->tctx_tdata, TDATA);
	put64(t + h->tctx_thr_uid, uid);
	put64(t + h->tctx_thr_discrim, 0);
	put64(t + h->tctx_uid, 0);
	put64(t + L->bpf.tctx_gctx_off, GCTX(i));
	put32(t + h->tctx_state, 1); /* nominal */
	put64(c + h->cnt_curobjs, objs);
	put64(c + h->cnt_curbytes, bytes);
	put64(c + h->cnt_accumobjs, 2 * objs);
	put64(c + h->cnt_accumbytes, 2 * bytes);
	if (h->has_unbiased) {
		put64(c + h->cnt_curobjs_su, 8 * 8 * objs); /* 8 objects a sample, shifted by 3 */
		put64(c + h->cnt_curbytes_u, 4 * bytes);
		put64(c + h->cnt_accumobjs_su, 2 * 8 * 8 * objs);
		put64(c + h->cnt_accumbytes_u, 2 * 4 * bytes);
	}
}

static void link(int j, int left, int right, bool red)
{
	const struct jemalloc_heap_layout *h = &L->heap;
	uint64_t t = TCTX(j);

	put64(t + h->tctx_link + h->rbn_left, left < 0 ? 0 : TCTX(left));
	put64(t + h->tctx_link + h->rbn_right_red, (right < 0 ? 0 : TCTX(right)) | red);
}

/*
 * Two stacks: gctx 0 (3 frames) with a tree of three tctxs (t1 root, t0
 * left, t2 right and red), gctx 1 (2 frames) with one tctx.
 */
static void build(const char *version)
{
	const struct jemalloc_heap_layout *h;

	L = jemalloc_layout_by_name(version);
	cr_assert_not_null(L);
	h = &L->heap;
	memset(img, 0, sizeof(img));
	put64(CKH + h->ckh_count, 2);
	put32(CKH + h->ckh_lg_curbuckets, 2);
	put64(CKH + h->ckh_tab, TAB);
	put64(LG, 14);
	put8(ACCUM, 1);
	put8(ACTIVE, 1);
	put8(TDATA_X + h->tdata_expired, 1);
	gctx(0, 3, 3);
	gctx(1, 9, 2);
	tctx(0, 0, 1, 1, 100);
	tctx(1, 0, 2, 2, 200);
	tctx(2, 0, 3, 4, 400);
	link(1, 0, 2, true);
	link(0, -1, -1, false);
	link(2, -1, -1, false);
	put64(GCTX(0) + h->gctx_tctxs, TCTX(1));
	tctx(3, 1, 1, 5, 5000);
	link(3, -1, -1, false);
	put64(GCTX(1) + h->gctx_tctxs, TCTX(3));
}

static struct collector *col;

static void fini(void)
{
	collector__free(col);
	col = NULL;
}

TestSuite(heapwalk, .fini = fini);

/* One walk without retries; the message is kept in err. */
static int run(struct heapwalk_stats *st, char *err, size_t len)
{
	struct heapwalk_opts o;

	heapwalk_default_opts(&o);
	o.retries = 0;
	collector__free(col);
	cr_assert_eq(collector__new(1 << 14, &col), 0);
	err[0] = '\0';
	return heapwalk_read(&src, L, &syms, &o, col, st, err, len);
}

static const struct hb_stack *stack_of(int i)
{
	for (size_t k = 0; k < collector__nstacks(col); k++) {
		const struct hb_stack *s = collector__stack(col, k);

		if (s->nframes && collector__frame(col, s, 0) == 0x1000 + (uint64_t)i * 0x100)
			return s;
	}
	return NULL;
}

Test(heapwalk, sums_per_stack_raw_and_unbiased)
{
	struct heapwalk_stats st;
	const struct hb_stack *s;
	char err[256];

	build("5.3.0");
	cr_assert_eq(run(&st, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(st.stacks, 2);
	cr_assert_eq(st.tctxs, 4);
	cr_assert(st.prof_active && st.prof_accum && st.unbiased);
	cr_assert_eq(st.lg_prof_sample, 14);
	cr_assert_eq(st.curobjs, 12);
	cr_assert_eq(st.curbytes, 5700);
	s = stack_of(0);
	cr_assert_not_null(s);
	cr_assert_eq(s->nframes, 3);
	cr_assert_eq(s->inuse_samples, 7);
	cr_assert_eq(s->inuse_bytes, 700);
	cr_assert_eq(s->samples, 14);
	cr_assert_eq(s->bytes, 1400);
	/* jemalloc's own weights: shifted objects / 8, unbiased bytes as they are */
	cr_assert_float_eq(s->inuse_objects, 56.0, 1e-9);
	cr_assert_float_eq(s->inuse_space, 2800.0, 1e-9);
	cr_assert_float_eq(s->alloc_objects, 112.0, 1e-9);
	cr_assert_float_eq(s->alloc_space, 5600.0, 1e-9);
	s = stack_of(1);
	cr_assert_not_null(s);
	cr_assert_eq(s->nframes, 2);
	cr_assert_eq(s->inuse_samples, 5);
}

Test(heapwalk, skips_what_the_dump_skips)
{
	struct heapwalk_stats st;
	char err[256];

	build("5.3.0");
	put32(TCTX(0) + L->heap.tctx_state, 0);	      /* initializing */
	put64(TCTX(2) + L->heap.tctx_tdata, TDATA_X); /* of an expired thread */
	cr_assert_eq(run(&st, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(st.tctxs, 2);
	cr_assert_eq(st.tctxs_skipped, 2);
	cr_assert_eq(stack_of(0)->inuse_samples, 2);
}

Test(heapwalk, without_prof_accum_no_allocated_totals)
{
	struct heapwalk_stats st;
	char err[256];

	build("5.3.0");
	put8(ACCUM, 0);
	/* a stack with nothing live is left out, as the dump leaves it out */
	tctx(3, 1, 1, 0, 0);
	cr_assert_eq(run(&st, err, sizeof(err)), 0, "%s", err);
	cr_assert(!st.prof_accum);
	cr_assert_eq(st.stacks, 1);
	cr_assert_eq(stack_of(0)->samples, 0);
	cr_assert_float_eq(stack_of(0)->alloc_space, 0.0, 1e-9);
	cr_assert_null(stack_of(1));
}

Test(heapwalk, jemalloc_521_estimates_by_mean_size)
{
	struct heapwalk_stats st;
	const struct hb_stack *s;
	double w;
	char err[256];

	build("5.2.1");
	cr_assert_eq(run(&st, err, sizeof(err)), 0, "%s", err);
	cr_assert(!st.unbiased);
	s = stack_of(0);
	cr_assert_eq(s->inuse_samples, 7);
	cr_assert_eq(s->inuse_bytes, 700);
	/* mean size 100 B, R = 16 KiB */
	w = 1.0 / -expm1(-100.0 / 16384.0);
	cr_assert_float_eq(s->inuse_objects, 7 * w, 1e-6);
	cr_assert_float_eq(s->inuse_space, 700 * w, 1e-6);
}

/* The walk refuses with code and a message holding what; nothing reaches the collector. */
static void refused(int code, const char *what)
{
	struct heapwalk_stats st;
	char err[256];
	int rc = run(&st, err, sizeof(err));

	cr_assert_eq(rc, code, "got %d (%s)", rc, err);
	cr_assert(strstr(err, what), "expected \"%s\" in: %s", what, err);
	cr_assert_eq(collector__nstacks(col), 0);
}

Test(heapwalk, refuses_a_pointer_outside_memory)
{
	build("5.3.0");
	put64(GCTX(1) + L->heap.gctx_tctxs, 0xdead0000);
	refused(-EPROTO, "outside");
}

Test(heapwalk, refuses_a_tctx_of_another_gctx)
{
	build("5.3.0");
	put64(TCTX(2) + L->bpf.tctx_gctx_off, GCTX(1));
	refused(-EPROTO, "point back");
}

Test(heapwalk, refuses_an_invalid_state)
{
	build("5.3.0");
	put32(TCTX(1) + L->heap.tctx_state, 7);
	refused(-EPROTO, "state");
}

Test(heapwalk, refuses_a_long_backtrace)
{
	build("5.3.0");
	put32(GCTX(0) + L->bpf.gctx_bt_off + L->bpf.bt_len_off, 129);
	refused(-EPROTO, "frames");
}

Test(heapwalk, refuses_a_cell_that_is_not_its_gctx_backtrace)
{
	build("5.3.0");
	put64(TAB + 9 * 16, GCTX(0) + L->bpf.gctx_bt_off);
	refused(-EPROTO, "backtrace");
}

Test(heapwalk, refuses_a_left_cycle)
{
	build("5.3.0");
	link(0, 0, -1, false);
	refused(-EPROTO, "deeper");
}

Test(heapwalk, refuses_a_right_cycle)
{
	build("5.3.0");
	link(2, -1, 1, false);
	refused(-EPROTO, "out of order");
}

Test(heapwalk, refuses_a_huge_table)
{
	build("5.3.0");
	put32(CKH + L->heap.ckh_lg_curbuckets, 40);
	refused(-EPROTO, "buckets");
}

Test(heapwalk, refuses_more_entries_than_cells)
{
	build("5.3.0");
	put64(CKH + L->heap.ckh_count, 17);
	refused(-EPROTO, "entries");
}

Test(heapwalk, a_count_that_disagrees_is_a_table_changing)
{
	build("5.3.0");
	put64(CKH + L->heap.ckh_count, 3);
	refused(-EAGAIN, "changing");
}

Test(heapwalk, refuses_a_bad_sampling_rate)
{
	build("5.3.0");
	put64(LG, 99);
	refused(-EPROTO, "lg_prof_sample");
}

Test(heapwalk, retries_are_bounded)
{
	struct heapwalk_opts o;
	struct heapwalk_stats st;
	char err[256];

	build("5.3.0");
	put64(CKH + L->heap.ckh_count, 3);
	heapwalk_default_opts(&o);
	o.retries = 3;
	o.retry_delay_us = 0;
	cr_assert_eq(collector__new(1 << 14, &col), 0);
	cr_assert_eq(heapwalk_read(&src, L, &syms, &o, col, &st, err, sizeof(err)), -EAGAIN);
	cr_assert_eq(st.attempts, 4);
	cr_assert_eq(collector__nstacks(col), 0);
}

Test(heapwalk, an_empty_table)
{
	struct heapwalk_stats st;
	char err[256];

	build("5.3.0");
	memset(img + (TAB - BASE), 0, 16 * 16);
	put64(CKH + L->heap.ckh_count, 0);
	cr_assert_eq(run(&st, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(st.stacks, 0);
}

/*
 * A source that keeps what it read, as the live one does (a cache of
 * runs): every read sees the image as it was at the last fresh(). After
 * move_after reads the table moves (as a resize would) in the image only.
 */
static uint8_t kept[SIZE];
static unsigned int move_after, freshes;

#define TAB2 (BASE + 0x400)

static void move_table(void)
{
	memcpy(img + (TAB2 - BASE), img + (TAB - BASE), 16 * 16);
	memset(img + (TAB - BASE), 0, 16 * 16);
	put64(CKH + L->heap.ckh_tab, TAB2);
}

static int kept_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	(void)ctx;
	if (addr < BASE || addr + len > BASE + SIZE)
		return -EFAULT;
	memcpy(buf, kept + (addr - BASE), len);
	if (move_after && !--move_after)
		move_table();
	return 0;
}

static void kept_fresh(void *ctx)
{
	(void)ctx;
	freshes++;
	memcpy(kept, img, sizeof(kept));
}

Test(heapwalk, the_header_is_read_again_past_what_the_source_kept)
{
	const struct mem_source cached = { .read = kept_read,
					   .mapped = img_mapped,
					   .fresh = kept_fresh };
	struct heapwalk_opts o;
	struct heapwalk_stats st;
	char err[256];

	build("5.3.0");
	heapwalk_default_opts(&o);
	o.retry_delay_us = 0;
	freshes = 0;
	/* the globals (3 reads), the header, the cells, then a gctx: the table moves */
	move_after = 6;
	memcpy(kept, img, sizeof(kept));
	cr_assert_eq(collector__new(1 << 14, &col), 0);
	cr_assert_eq(heapwalk_read(&cached, L, &syms, &o, col, &st, err, sizeof(err)), 0, "%s",
		     err);
	/* the kept header still says TAB; the one read again after fresh() says TAB2 */
	cr_assert_eq(st.attempts, 2);
	/* before each attempt's header and again before its second read of it */
	cr_assert_eq(freshes, 4);
	cr_assert_eq(st.stacks, 2);
	cr_assert_eq(st.curobjs, 12);
}

/* prof_do_unbias by hand: c = 10, s = 10000, R = 16 KiB: y = s (1 - exp(-1000/R)) */
Test(heapwalk, jeprof_input_as_jemalloc_computes_it)
{
	uint64_t c, s;

	heapwalk_jeprof_input(80, 10000, 14, 3, &c, &s);
	cr_assert_eq(c, 1);
	cr_assert_eq(s, 592);
	heapwalk_jeprof_input(0, 10000, 14, 3, &c, &s);
	cr_assert(c == 0 && s == 0);
}

/* One walk of a core's image (frozen: it cannot change); the message is kept in err. */
static int run_frozen(struct heapwalk_stats *st, char *err, size_t len)
{
	struct heapwalk_opts o;

	heapwalk_default_opts(&o);
	o.retries = 0;
	o.frozen = true;
	collector__free(col);
	cr_assert_eq(collector__new(1 << 14, &col), 0);
	err[0] = '\0';
	return heapwalk_read(&src, L, &syms, &o, col, st, err, len);
}

/* A count of 0 over cells in use was read as an empty heap: a core's counts must agree. */
Test(heapwalk, a_frozen_count_of_zero_over_live_cells_is_refused)
{
	struct heapwalk_stats st;
	char err[256];

	build("5.3.0");
	cr_assert_eq(run_frozen(&st, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(st.stacks, 2);
	put64(CKH + L->heap.ckh_count, 0);
	cr_assert_eq(run_frozen(&st, err, sizeof(err)), -EPROTO);
	cr_assert(strstr(err, "jemalloc's bt2gctx table claims 0 entries but 2 of its cells are in "
			      "use"),
		  "%s", err);
	cr_assert_eq(collector__nstacks(col), 0);
	put64(CKH + L->heap.ckh_count, 1);
	cr_assert_eq(run_frozen(&st, err, sizeof(err)), -EPROTO);
	cr_assert(strstr(err, "claims 1 entries but 2"), "%s", err);
	put64(CKH + L->heap.ckh_count, 3);
	cr_assert_eq(run_frozen(&st, err, sizeof(err)), -EPROTO);
	cr_assert(strstr(err, "claims 3 entries but 2"), "%s", err);
}

/* A live table's count of 0 over cells in use is a table changing (retried), not an empty heap. */
Test(heapwalk, a_live_count_of_zero_over_live_cells_is_a_table_changing)
{
	build("5.3.0");
	put64(CKH + L->heap.ckh_count, 0);
	refused(-EAGAIN, "changing");
}

/* Counters corrupted to 2^62 objects were reported as such. */
Test(heapwalk, refuses_counters_beyond_an_address_space)
{
	const struct jemalloc_heap_layout *h;

	build("5.3.0");
	h = &L->heap;
	put64(TCTX(0) + h->tctx_cnts + h->cnt_curobjs, 1ull << 62);
	refused(-EPROTO,
		"counts 4611686018427387904 in-use objects, beyond what a process can hold");

	build("5.3.0");
	put64(TCTX(3) + h->tctx_cnts + h->cnt_curbytes, (1ull << 56) + 1);
	refused(-EPROTO, "in-use bytes");

	/* two tctxs each within bounds, their sum not */
	build("5.3.0");
	put64(TCTX(1) + h->tctx_cnts + h->cnt_curbytes, 1ull << 55);
	put64(TCTX(2) + h->tctx_cnts + h->cnt_curbytes, (1ull << 55) + 1);
	refused(-EPROTO, "in-use bytes");

	build("5.3.0");
	put64(TCTX(0) + h->tctx_cnts + h->cnt_accumbytes_u, UINT64_MAX / 2);
	refused(-EPROTO, "allocated bytes (unbiased)");

	/* a hair below zero is jemalloc's racing updates: accepted as before */
	build("5.3.0");
	put64(TCTX(0) + h->tctx_cnts + h->cnt_curbytes_u, (uint64_t)-8);
	{
		struct heapwalk_stats st;
		char err[256];

		cr_assert_eq(run(&st, err, sizeof(err)), 0, "%s", err);
	}
}

/* tctx j's counters set as jemalloc 5.3 sets them for cur (and, twice over, accum) samples. */
static void samples_of(int j, const uint64_t *sizes, size_t n)
{
	const struct jemalloc_heap_layout *h = &L->heap;
	uint64_t c = TCTX(j) + h->tctx_cnts, bytes = 0, su = 0, bu = 0;

	for (size_t k = 0; k < n; k++) {
		uint64_t s1, b1;

		cr_assert(heapwalk_jemalloc_sums(1, sizes[k], 14, 3, &s1, &b1));
		bytes += sizes[k];
		su += s1;
		bu += b1;
	}
	put64(c + h->cnt_curobjs, n);
	put64(c + h->cnt_curbytes, bytes);
	put64(c + h->cnt_curobjs_su, su);
	put64(c + h->cnt_curbytes_u, bu);
	put64(c + h->cnt_accumobjs, 2 * n);
	put64(c + h->cnt_accumbytes, 2 * bytes);
	put64(c + h->cnt_accumobjs_su, 2 * su);
	put64(c + h->cnt_accumbytes_u, 2 * bu);
}

/* prof_unbias_map_init by hand: 1/(1 - exp(-1.5)) = 1.28722, kept as round(8 x 1.28722) / 8 */
Test(heapwalk, jemalloc_sums_per_size_class)
{
	uint64_t c, b;

	/* 786432 B at the default 512 KiB, and its scale model 24 KiB at 16 KiB */
	cr_assert(heapwalk_jemalloc_sums(3, 786432, 19, 3, &c, &b));
	cr_assert(c == 30 && b == 3 * 1012309ull, "%llu %llu", (unsigned long long)c,
		  (unsigned long long)b);
	cr_assert(heapwalk_jemalloc_sums(1, 24576, 14, 3, &c, &b));
	cr_assert(c == 10 && b == 31635, "%llu %llu", (unsigned long long)c, (unsigned long long)b);
	/* a usable size between classes (5.3.1's page-rounded large sizes) takes the class above */
	cr_assert(heapwalk_jemalloc_sums(1, 700416, 19, 3, &c, &b));
	cr_assert(c == 10 && b == 1012309);
	cr_assert(heapwalk_jemalloc_sums(1, 20481, 14, 3, &c, &b));
	cr_assert(c == 10 && b == 31635);
	/* a rate so far above the size that 1 - exp(-size/rate) is 0: no entry, no inf cast */
	cr_assert_not(heapwalk_jemalloc_sums(1, 8, 60, 3, &c, &b));
	cr_assert_not(heapwalk_jemalloc_sums(1, 8, 62, 3, &c, &b));
	/* the smallest classes: 8 for 1..8, then steps of 16 up to 128 */
	cr_assert(heapwalk_jemalloc_sums(1, 1, 14, 3, &c, &b) && b == 16388);
	cr_assert(heapwalk_jemalloc_sums(1, 17, 14, 3, &c, &b) && b == 16400);
	cr_assert(!heapwalk_jemalloc_sums(1, 0, 14, 3, &c, &b));
	cr_assert(!heapwalk_jemalloc_sums(UINT64_MAX, 786432, 19, 3, &c, &b));
}

/*
 * A stack whose samples are of one size is weighed exactly, as the windowed
 * mode weighs each: 5 samples of 24 KiB at R = 16 KiB (the ratio of 768 KiB
 * at the default 512 KiB) are 5 x 1.28722 objects, where jemalloc's own sums
 * say 5 x 1.25, 2.9% short.
 */
Test(heapwalk, one_size_is_weighed_exactly)
{
	const uint64_t one[] = { 24576, 24576, 24576, 24576, 24576 };
	const double w = 1.0 / -expm1(-24576.0 / 16384.0);
	struct heapwalk_stats st;
	const struct hb_stack *s;
	char err[256];

	build("5.3.0");
	samples_of(3, one, 5);
	cr_assert_eq(run(&st, err, sizeof(err)), 0, "%s", err);
	s = stack_of(1);
	cr_assert_eq(s->inuse_samples, 5);
	cr_assert_float_eq(s->inuse_objects, 5 * w, 1e-12);
	cr_assert_float_eq(s->inuse_space, 5 * 24576 * w, 1e-6);
	cr_assert_float_eq(s->alloc_objects, 10 * w, 1e-12);
	cr_assert_float_eq(s->alloc_space, 10 * 24576 * w, 1e-6);
	/* stack 0's made-up sums fit no size: jemalloc's, as before */
	cr_assert_float_eq(stack_of(0)->inuse_objects, 56.0, 1e-9);
	cr_assert_eq(st.stacks_rounded, 1);
	cr_assert_float_eq(st.inuse_objects, 56.0 + 5 * w, 1e-9);
}

/*
 * 16 KiB and 32 KiB have the mean of 24 KiB, a size class, but not its sums:
 * jemalloc's own sums are kept (13 + 9 shifted objects, not 2 x 10).
 */
Test(heapwalk, mixed_sizes_keep_jemallocs_sums)
{
	const uint64_t mixed[] = { 16384, 32768 };
	struct heapwalk_stats st;
	const struct hb_stack *s;
	char err[256];

	build("5.3.0");
	samples_of(3, mixed, 2);
	cr_assert_eq(run(&st, err, sizeof(err)), 0, "%s", err);
	s = stack_of(1);
	cr_assert_eq(s->inuse_bytes, 2 * 24576);
	cr_assert_float_eq(s->inuse_objects, 22 / 8.0, 1e-12);
	cr_assert_float_eq(s->inuse_space, 25919 + 37897, 1e-9);
	cr_assert_float_eq(s->alloc_objects, 44 / 8.0, 1e-12);
	cr_assert_float_eq(s->alloc_space, 2 * (25919 + 37897), 1e-9);
	cr_assert_eq(st.stacks_rounded, 2);
}

/*
 * jemalloc 5.3.1 (disable_large_size_classes) hands out 28 KiB, a whole
 * number of pages, and adds the 32 KiB class's sums for it: one size, weighed
 * as 28 KiB.
 */
Test(heapwalk, a_page_rounded_large_size_is_weighed_as_itself)
{
	const uint64_t pages[] = { 28672, 28672, 28672 };
	const double w = 1.0 / -expm1(-28672.0 / 16384.0);
	struct heapwalk_stats st;
	const struct hb_stack *s;
	char err[256];

	build("5.3.1");
	samples_of(3, pages, 3);
	cr_assert_eq(run(&st, err, sizeof(err)), 0, "%s", err);
	s = stack_of(1);
	cr_assert_float_eq(s->inuse_objects, 3 * w, 1e-12);
	cr_assert_float_eq(s->alloc_space, 6 * 28672 * w, 1e-6);
}

/* A sum that a racing update left off by one is no longer one size's: jemalloc's again. */
Test(heapwalk, sums_that_do_not_fit_exactly_keep_jemallocs)
{
	const uint64_t one[] = { 24576, 24576 };
	struct heapwalk_stats st;
	char err[256];

	build("5.3.0");
	samples_of(3, one, 2);
	put64(TCTX(3) + L->heap.tctx_cnts + L->heap.cnt_curbytes_u, 2 * 31635 + 1);
	cr_assert_eq(run(&st, err, sizeof(err)), 0, "%s", err);
	cr_assert_float_eq(stack_of(1)->inuse_objects, 20 / 8.0, 1e-12);
	cr_assert_float_eq(stack_of(1)->alloc_objects, 4 / -expm1(-1.5), 1e-12);
}
