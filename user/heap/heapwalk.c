// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "heap/heapwalk.h"

#include "util/errmsg.h"
#include "heapbpf.h"
#include "jemalloc/target.h"
#include "heap/memsrc_proc.h"
#include "collect/unbias.h"

/* Cells of the table read at once: 64 KiB. */
#define CELL_CHUNK 4096
/* A red-black tree of n nodes is at most 2 log2(n + 1) deep: 128 covers any that fits in memory. */
#define MAX_TREE_DEPTH 128
/* The largest struct read at once (a tctx, a gctx header, the ckh_t). */
#define MAX_STRUCT 512

/* jemalloc's prof_tctx_state_t (5.2.1 to 5.3.x) */
enum {
	TCTX_INITIALIZING,
	TCTX_NOMINAL,
	TCTX_DUMPING,
	TCTX_PURGATORY,
};

/* The counters of one stack, summed over its tctxs, in prof_cnt_t's order of meaning. */
enum {
	C_CUROBJS,
	C_CURBYTES,
	C_ACCUMOBJS,
	C_ACCUMBYTES,
	C_CUROBJS_SU, /* 5.3: *_shifted_unbiased, *_unbiased */
	C_CURBYTES_U,
	C_ACCUMOBJS_SU,
	C_ACCUMBYTES_U,
	C_N,
};

struct hw_stack {
	size_t frames; /* index of its first frame in the walk's frames */
	uint32_t nframes;
	bool truncated; /* jemalloc's backtrace was longer: its innermost frames */
	uint64_t cnt[C_N];
};

struct ckh_head {
	uint64_t count, tab;
	uint32_t lg_curbuckets;
};

struct walk {
	const struct mem_source *m;
	const struct jemalloc_layout *l;
	const struct jemalloc_heap_layout *h;
	const struct heapwalk_opts *o;
	bool accum;
	struct hw_stack *stacks;
	size_t n, cap;
	uint64_t *frames; /* every stack's frames, one after the other */
	size_t nframes, capframes;
	uint64_t tctxs, skipped, gctxs;
	uint64_t total[C_N]; /* every stack's counters together */
	char *err;
	size_t errlen;
};

/*
 * What a counter may plausibly hold, summed over a stack's tctxs and over
 * the whole heap: in-use objects and bytes no more than an address space
 * (2^56 bytes, the user half of five-level paging), allocated and unbiased
 * ones below 2^62 (4 EiB: years of allocation); a little below zero is
 * jemalloc's racing updates (nonneg()). Past that the core is corrupt: its
 * figures, and their sums, would be absurd.
 */
#define HW_INUSE_MAX ((int64_t)1 << 56)
#define HW_TOTAL_MAX ((int64_t)1 << 62)
#define HW_HAIR	     ((int64_t)1 << 32)

static const char *const cnt_names[C_N] = {
	"in-use objects",
	"in-use bytes",
	"allocated objects",
	"allocated bytes",
	"in-use objects (unbiased)",
	"in-use bytes (unbiased)",
	"allocated objects (unbiased)",
	"allocated bytes (unbiased)",
};

static int add_cnt(struct walk *w, struct hw_stack *s, int k, uint64_t v, uint64_t addr)
{
	int64_t max = k == C_CUROBJS || k == C_CURBYTES ? HW_INUSE_MAX : HW_TOTAL_MAX;

	/* modular sums of values within (-2^32, 2^62]: out of range, they read as such */
	s->cnt[k] += v;
	w->total[k] += v;
	if ((int64_t)v < -HW_HAIR || (int64_t)v > max || (int64_t)s->cnt[k] < -HW_TOTAL_MAX ||
	    (int64_t)s->cnt[k] > max || (int64_t)w->total[k] < -HW_TOTAL_MAX ||
	    (int64_t)w->total[k] > max)
		return hb_fail(w->err, w->errlen, -EPROTO,
			       "jemalloc's tctx 0x%llx counts %lld %s, beyond what a process can "
			       "hold",
			       (unsigned long long)addr, (long long)v, cnt_names[k]);
	return 0;
}

void heapwalk_default_opts(struct heapwalk_opts *o)
{
	o->retries = 8;
	o->retry_delay_us = 2000;
	o->max_gctxs = 1u << 22;
	o->max_tctxs = 1u << 24;
	o->max_lg_buckets = 24;
	o->frozen = false;
}

static uint64_t get_u64(const uint8_t *b, uint32_t off)
{
	uint64_t v;

	memcpy(&v, b + off, sizeof(v));
	return v;
}

static uint32_t get_u32(const uint8_t *b, uint32_t off)
{
	uint32_t v;

	memcpy(&v, b + off, sizeof(v));
	return v;
}

/* Reads len bytes at addr after checking they are mapped: a pointer never followed blind. */
static int rd(struct walk *w, uint64_t addr, void *buf, size_t len, const char *what)
{
	int rc;

	if (!addr || addr + len < addr || !memsrc_mapped(w->m, addr, len))
		return hb_fail(w->err, w->errlen, -EPROTO,
			       "jemalloc's %s pointer 0x%llx points outside the process's memory",
			       what, (unsigned long long)addr);
	rc = memsrc_read(w->m, addr, buf, len);
	if (rc)
		return hb_fail(w->err, w->errlen, rc == -EFAULT ? -EPROTO : rc,
			       "cannot read jemalloc's %s at 0x%llx: %s", what,
			       (unsigned long long)addr, strerror(-rc));
	return 0;
}

static int read_head(struct walk *w, uint64_t addr, struct ckh_head *hd)
{
	const struct jemalloc_heap_layout *h = w->h;
	uint8_t b[64];
	uint32_t need = h->ckh_tab + 8;
	int rc;

	if (need < h->ckh_count + 8)
		need = h->ckh_count + 8;
	if (need < h->ckh_lg_curbuckets + 4)
		need = h->ckh_lg_curbuckets + 4;
	if (need > sizeof(b))
		return hb_fail(w->err, w->errlen, -EINVAL, "the layout's ckh_t is too large");
	rc = rd(w, addr, b, need, "bt2gctx table");
	if (rc)
		return rc;
	hd->count = get_u64(b, h->ckh_count);
	hd->lg_curbuckets = get_u32(b, h->ckh_lg_curbuckets);
	hd->tab = get_u64(b, h->ckh_tab);
	if (hd->lg_curbuckets > w->o->max_lg_buckets)
		return hb_fail(w->err, w->errlen, -EPROTO,
			       "jemalloc's bt2gctx table claims 2^%u buckets, more than 2^%u",
			       hd->lg_curbuckets, w->o->max_lg_buckets);
	if (hd->count > (1ull << (hd->lg_curbuckets + h->lg_bucket_cells)) ||
	    hd->count > w->o->max_gctxs)
		return hb_fail(w->err, w->errlen, -EPROTO,
			       "jemalloc's bt2gctx table claims %llu entries in %llu cells",
			       (unsigned long long)hd->count,
			       1ull << (hd->lg_curbuckets + h->lg_bucket_cells));
	return 0;
}

uint32_t heapwalk_tctx_span(const struct jemalloc_layout *l)
{
	const struct jemalloc_heap_layout *h = &l->heap;
	/* where each field the walk reads ends: a layout from DWARF may put any of them anywhere */
	const uint32_t end[] = {
		h->tctx_cnts + h->cnt_size,
		h->tctx_state + 4,
		h->tctx_link + h->rbn_left + 8,
		h->tctx_link + h->rbn_right_red + 8,
		l->bpf.tctx_gctx_off + 8,
		h->tctx_tdata + 8,
		h->tctx_thr_uid + 8,
		h->tctx_thr_discrim + 8,
		h->tctx_uid + 8,
		h->tctx_cnts + h->cnt_curobjs + 8,
		h->tctx_cnts + h->cnt_curbytes + 8,
		h->tctx_cnts + h->cnt_accumobjs + 8,
		h->tctx_cnts + h->cnt_accumbytes + 8,
		h->tctx_cnts + h->cnt_curobjs_su + 8,
		h->tctx_cnts + h->cnt_curbytes_u + 8,
		h->tctx_cnts + h->cnt_accumobjs_su + 8,
		h->tctx_cnts + h->cnt_accumbytes_u + 8,
	};
	uint32_t s = 0;

	for (size_t i = 0; i < sizeof(end) / sizeof(end[0]); i++) {
		if (s < end[i])
			s = end[i];
	}
	return s;
}

/* Adds one tctx's counters to the stack, as the dump would count them. */
static int count_tctx(struct walk *w, const uint8_t *t, uint64_t addr, uint64_t gctx,
		      struct hw_stack *s)
{
	const struct jemalloc_heap_layout *h = w->h;
	uint32_t state = get_u32(t, h->tctx_state);
	uint64_t tdata = get_u64(t, h->tctx_tdata);
	const uint8_t *c = t + h->tctx_cnts;
	uint8_t expired = 0;
	int rc;

	if (get_u64(t, w->l->bpf.tctx_gctx_off) != gctx)
		return hb_fail(w->err, w->errlen, -EPROTO,
			       "jemalloc's tctx 0x%llx does not point back to its gctx 0x%llx",
			       (unsigned long long)addr, (unsigned long long)gctx);
	if (state > TCTX_PURGATORY)
		return hb_fail(w->err, w->errlen, -EPROTO,
			       "jemalloc's tctx 0x%llx has the invalid state %u",
			       (unsigned long long)addr, state);
	if (state == TCTX_INITIALIZING) {
		w->skipped++;
		return 0;
	}
	rc = rd(w, tdata + h->tdata_expired, &expired, 1, "tctx->tdata");
	if (rc)
		return rc;
	if (expired > 1)
		return hb_fail(w->err, w->errlen, -EPROTO,
			       "jemalloc's tdata 0x%llx has an invalid expired flag %u",
			       (unsigned long long)tdata, expired);
	if (expired) {
		w->skipped++;
		return 0;
	}
	rc = add_cnt(w, s, C_CUROBJS, get_u64(c, h->cnt_curobjs), addr)
		     ?: add_cnt(w, s, C_CURBYTES, get_u64(c, h->cnt_curbytes), addr);
	if (!rc && h->has_unbiased)
		rc = add_cnt(w, s, C_CUROBJS_SU, get_u64(c, h->cnt_curobjs_su), addr)
			     ?: add_cnt(w, s, C_CURBYTES_U, get_u64(c, h->cnt_curbytes_u), addr);
	if (!rc && w->accum)
		rc = add_cnt(w, s, C_ACCUMOBJS, get_u64(c, h->cnt_accumobjs), addr)
			     ?: add_cnt(w, s, C_ACCUMBYTES, get_u64(c, h->cnt_accumbytes), addr);
	if (!rc && w->accum && h->has_unbiased)
		rc = add_cnt(w, s, C_ACCUMOBJS_SU, get_u64(c, h->cnt_accumobjs_su), addr)
			     ?: add_cnt(w, s, C_ACCUMBYTES_U, get_u64(c, h->cnt_accumbytes_u),
					addr);
	w->tctxs++;
	return rc;
}

/* prof_tctx_comp's key: a tree walked in order must show it strictly increasing. */
struct tctx_key {
	uint64_t k[3];
};

static int key_cmp(const struct tctx_key *a, const struct tctx_key *b)
{
	for (int i = 0; i < 3; i++) {
		if (a->k[i] != b->k[i])
			return a->k[i] < b->k[i] ? -1 : 1;
	}
	return 0;
}

/*
 * Every node of a gctx's tctx tree, in order (rb.h: NULL is nil), each read
 * once: depth bounded, and the keys strictly increasing, so that no cycle
 * or foreign pointer can make the walk repeat a node.
 */
static int walk_tree(struct walk *w, uint64_t root, uint64_t gctx, struct hw_stack *s)
{
	const struct jemalloc_heap_layout *h = w->h;
	struct {
		uint64_t right;
		struct tctx_key key;
	} up[MAX_TREE_DEPTH];
	struct tctx_key prev;
	uint32_t span = heapwalk_tctx_span(w->l);
	uint8_t t[MAX_STRUCT];
	uint64_t node = root;
	unsigned n = 0;
	bool any = false;
	int rc;

	if (span > sizeof(t))
		return hb_fail(w->err, w->errlen, -EINVAL, "the layout's prof_tctx_t is too large");
	for (;;) {
		while (node) {
			if (n == MAX_TREE_DEPTH || w->tctxs + w->skipped >= w->o->max_tctxs)
				return hb_fail(
					w->err, w->errlen, -EPROTO,
					"jemalloc's tctx tree of gctx 0x%llx is deeper than %d "
					"or larger than %llu nodes",
					(unsigned long long)gctx, MAX_TREE_DEPTH,
					(unsigned long long)w->o->max_tctxs);
			rc = rd(w, node, t, span, "tctx");
			rc = rc ?: count_tctx(w, t, node, gctx, s);
			if (rc)
				return rc;
			up[n].key.k[0] = get_u64(t, h->tctx_thr_uid);
			up[n].key.k[1] = get_u64(t, h->tctx_thr_discrim);
			up[n].key.k[2] = get_u64(t, h->tctx_uid);
			/* the red bit is bit 0 of the right pointer */
			up[n++].right = get_u64(t, h->tctx_link + h->rbn_right_red) & ~1ull;
			node = get_u64(t, h->tctx_link + h->rbn_left);
		}
		if (!n)
			return 0;
		n--;
		if (any && key_cmp(&prev, &up[n].key) >= 0)
			return hb_fail(w->err, w->errlen, -EPROTO,
				       "jemalloc's tctx tree of gctx 0x%llx is out of order",
				       (unsigned long long)gctx);
		prev = up[n].key;
		any = true;
		node = up[n].right;
	}
}

/*
 * A backtrace longer than any jemalloc takes is a corrupt image: 5.3.1's
 * prof_bt_max has no upper bound with libgcc's unwinder, 256 with
 * --enable-prof-gcc; no real stack is a million frames deep.
 */
#define BT_LEN_MAX (1 << 20)

/* A new stack with room for len frames at its frames index. */
static struct hw_stack *new_stack(struct walk *w, uint32_t len)
{
	/* also for stacks without frames: deliver() takes an address in the array of each */
	if (!w->frames || w->nframes + len > w->capframes) {
		size_t cap = w->capframes ? w->capframes * 2 : 4096;
		uint64_t *v;

		while (cap < w->nframes + len)
			cap *= 2;
		v = realloc(w->frames, cap * sizeof(*v));
		if (!v)
			return NULL;
		w->frames = v;
		w->capframes = cap;
	}
	if (w->n == w->cap) {
		size_t cap = w->cap ? w->cap * 2 : 64;
		struct hw_stack *v = realloc(w->stacks, cap * sizeof(*v));

		if (!v)
			return NULL;
		w->stacks = v;
		w->cap = cap;
	}
	memset(&w->stacks[w->n], 0, sizeof(w->stacks[0]));
	w->stacks[w->n].frames = w->nframes;
	w->stacks[w->n].nframes = len;
	w->nframes += len;
	return &w->stacks[w->n++];
}

/* One table entry: its backtrace and the counters of its tctxs. */
static int walk_gctx(struct walk *w, uint64_t key, uint64_t gctx)
{
	const struct jemalloc_layout *l = w->l;
	uint8_t b[16];
	uint64_t vec = 0, root = 0;
	uint32_t len;
	struct hw_stack *s;
	bool trunc;
	int rc;

	/* a layout from a target's DWARF may put vec and len anywhere */
	if (l->bpf.bt_vec_off > sizeof(b) - 8 || l->bpf.bt_len_off > sizeof(b) - 4)
		return hb_fail(w->err, w->errlen, -EINVAL, "the layout's prof_bt_t is too large");
	/* the key is the gctx's own prof_bt_t (prof_lookup_global) */
	if (key != gctx + l->bpf.gctx_bt_off)
		return hb_fail(w->err, w->errlen, -EPROTO,
			       "jemalloc's bt2gctx cell holds backtrace 0x%llx for gctx 0x%llx",
			       (unsigned long long)key, (unsigned long long)gctx);
	rc = rd(w, gctx + w->h->gctx_tctxs, &root, 8, "gctx");
	if (rc)
		return rc;
	rc = rd(w, key, b, sizeof(b), "gctx->bt");
	if (rc)
		return rc;
	vec = get_u64(b, l->bpf.bt_vec_off);
	len = get_u32(b, l->bpf.bt_len_off);
	if (len > (l->bt_max_opt ? BT_LEN_MAX : HEAPBPF_MAX_FRAMES))
		return hb_fail(w->err, w->errlen, -EPROTO,
			       "jemalloc's backtrace at 0x%llx claims %u frames, more than %d",
			       (unsigned long long)key, len,
			       l->bt_max_opt ? BT_LEN_MAX : HEAPBPF_MAX_FRAMES);
	/*
	 * 5.3.1's prof_bt_max takes more than 128 frames: heapbpf keeps the
	 * innermost 128 (vec is leaf first), as its sampling does, and says so
	 */
	trunc = len > HEAPBPF_MAX_FRAMES;
	if (trunc)
		len = HEAPBPF_MAX_FRAMES;
	s = new_stack(w, len);
	if (!s)
		return hb_fail(w->err, w->errlen, -ENOMEM, "out of memory");
	s->truncated = trunc;
	if (len) {
		rc = rd(w, vec, w->frames + s->frames, (size_t)len * 8, "backtrace");
		if (rc)
			return rc;
	}
	rc = walk_tree(w, root, gctx, s);
	if (rc)
		return rc;
	/* the dump leaves out what has nothing to show (prof_dump_gctx) */
	if (w->accum ? !s->cnt[C_ACCUMOBJS] : !s->cnt[C_CUROBJS]) {
		w->nframes -= len;
		w->n--;
	}
	return 0;
}

/* One walk of the whole table; -EAGAIN when the table changed meanwhile. */
static int walk_once(struct walk *w, uint64_t bt2gctx)
{
	const struct jemalloc_heap_layout *h = w->h;
	struct ckh_head a = { 0 }, z = { 0 };
	uint64_t ncells, used = 0;
	uint8_t *cells;
	int rc;

	/* nothing a cache of the source kept from an earlier read (docs/jemalloc.md) */
	memsrc_fresh(w->m);
	rc = read_head(w, bt2gctx, &a);
	if (rc)
		return rc;
	/* a layout from a target's DWARF may put a cell's key and data past its end */
	if (h->ckhc_key + 8 > h->ckhc_size || h->ckhc_data + 8 > h->ckhc_size)
		return hb_fail(w->err, w->errlen, -EINVAL,
			       "the layout's ckhc_t does not hold its key and data");
	ncells = 1ull << (a.lg_curbuckets + h->lg_bucket_cells);
	memset(w->total, 0, sizeof(w->total));
	/* an empty count is read over its cells too: they must agree */
	cells = malloc((size_t)CELL_CHUNK * h->ckhc_size);
	if (!cells)
		return hb_fail(w->err, w->errlen, -ENOMEM, "out of memory");
	for (uint64_t i = 0; i < ncells && !rc; i += CELL_CHUNK) {
		uint64_t k = ncells - i < CELL_CHUNK ? ncells - i : CELL_CHUNK;

		rc = rd(w, a.tab + i * h->ckhc_size, cells, k * h->ckhc_size, "bt2gctx cells");
		for (uint64_t j = 0; j < k && !rc; j++) {
			const uint8_t *cell = cells + j * h->ckhc_size;
			uint64_t key = get_u64(cell, h->ckhc_key);

			if (!key)
				continue;
			/* past the count: only counted, for the message */
			if (++used > a.count)
				continue;
			rc = walk_gctx(w, key, get_u64(cell, h->ckhc_data));
		}
	}
	free(cells);
	w->gctxs = used;
	if (rc)
		return rc;
	if (used != a.count && w->o->frozen)
		return hb_fail(w->err, w->errlen, -EPROTO,
			       "jemalloc's bt2gctx table claims %llu entries but %llu of its cells "
			       "are in use",
			       (unsigned long long)a.count, (unsigned long long)used);
	/* the header as it is now, not as a cache of the source kept it */
	memsrc_fresh(w->m);
	rc = read_head(w, bt2gctx, &z);
	if (rc)
		return rc;
	if (used != a.count || a.count != z.count || a.tab != z.tab ||
	    a.lg_curbuckets != z.lg_curbuckets)
		return hb_fail(w->err, w->errlen, -EAGAIN,
			       "jemalloc's bt2gctx table changed while it was read");
	return 0;
}

void heapwalk_jeprof_input(uint64_t c_shifted, uint64_t s_unbiased, unsigned lg_sample,
			   unsigned lg_tiny_min, uint64_t *c_in, uint64_t *s_in)
{
	double c, s, r, x, y;

	if (!c_shifted || !s_unbiased) {
		*c_in = *s_in = 0;
		return;
	}
	/* prof_do_unbias (5.3.0 src/prof_data.c): x = mean size, y = s (1 - exp(-x/R)) */
	c = (double)c_shifted / (double)(1ull << lg_tiny_min);
	s = (double)s_unbiased;
	r = (double)(1ull << lg_sample);
	x = s / c;
	y = s * (1.0 - exp(-x / r));
	c = round(y / x);
	s = round(y);
	*c_in = c < 18446744073709551616.0 ? (uint64_t)c : UINT64_MAX;
	*s_in = s < 18446744073709551616.0 ? (uint64_t)s : UINT64_MAX;
}

/* A counter jemalloc may leave a hair below zero by racing updates (its own comment says so). */
static double nonneg(uint64_t v)
{
	return (int64_t)v < 0 ? 0 : (double)v;
}

/*
 * jemalloc's size class of a usable size, the one whose entry of its tables
 * sz_size2index() picks: sz_s2u_compute() with LG_QUANTUM 4 (x86-64 and
 * aarch64), four classes a doubling and 2^lg_tiny_min the smallest; 0 past
 * 2^62. A 5.3.0 usable size is its own class; 5.3.1, with
 * disable_large_size_classes (its default), rounds a large one up to a page
 * only, and its tables take the class above.
 */
#define JE_LG_QUANTUM 4
#define JE_LG_NGROUP  2

static uint64_t size_class(uint64_t u, unsigned lg_tiny_min)
{
	unsigned x, lg_delta;
	uint64_t mask;

	if (!u || u > (1ull << 62))
		return 0;
	if (u <= 1ull << (JE_LG_QUANTUM - 1)) {
		uint64_t c = 1ull << lg_tiny_min;

		while (c < u)
			c <<= 1;
		return c;
	}
	x = 63 - (unsigned)__builtin_clzll((u << 1) - 1);
	lg_delta = x < JE_LG_NGROUP + JE_LG_QUANTUM + 1 ? JE_LG_QUANTUM : x - JE_LG_NGROUP - 1;
	mask = (1ull << lg_delta) - 1;
	return (u + mask) & ~mask;
}

bool heapwalk_jemalloc_sums(uint64_t n, uint64_t usize, unsigned lg_sample, unsigned lg_tiny_min,
			    uint64_t *shifted_objs, uint64_t *bytes)
{
	uint64_t cls = size_class(usize, lg_tiny_min);
	double sz = (double)cls, rate, div, cnt, unb;

	if (!cls || lg_sample > 62 || lg_tiny_min > 16)
		return false;
	/* prof_unbias_map_init (5.3.0 src/prof_data.c), operation for operation */
	rate = (double)(1ull << lg_sample);
	div = 1.0 - exp(-sz / rate);
	/* a rate far above the size rounds div to 0: no entry a uint64_t holds */
	if (!(div > 0))
		return false;
	cnt = round((double)(1ull << lg_tiny_min) / div);
	unb = round(sz / div);
	if (!(cnt < 0x1p64) || !(unb < 0x1p64))
		return false;
	return !__builtin_mul_overflow(n, (uint64_t)cnt, shifted_objs) &&
	       !__builtin_mul_overflow(n, (uint64_t)unb, bytes);
}

/* n samples of bytes weighed by their mean size: exact when they are all of that size. */
static void weigh(uint64_t n, uint64_t bytes, double period, double *objs, double *space)
{
	double w = n ? unbias_objects(bytes / n, period) : 0;

	*objs = w * (double)n;
	*space = w * (double)bytes;
}

/*
 * jemalloc 5.3's sums of a stack's n samples of bytes are exactly what n
 * samples of one usable size add: then they are of that size (samples of
 * several sizes with the same mean would add other sums, the weights being
 * convex in the size), weighed as the windowed mode weighs each sample,
 * without jemalloc's rounding per size class.
 */
static bool one_size(uint64_t n, uint64_t bytes, uint64_t shifted, uint64_t ubytes, uint64_t lg,
		     unsigned lg_tiny_min)
{
	uint64_t c, b;

	return n && bytes % n == 0 &&
	       heapwalk_jemalloc_sums(n, bytes / n, (unsigned)lg, lg_tiny_min, &c, &b) &&
	       c == shifted && b == ubytes;
}

/*
 * One stack's raw and estimated values. Returns true when a value is
 * jemalloc's own unbiased sum (5.3, samples not of one size).
 */
static bool stack_counts(const struct walk *w, const struct hw_stack *s, uint64_t lg,
			 struct collector_counts *n)
{
	const struct jemalloc_heap_layout *h = w->h;
	double period = (double)(1ull << lg), shift = (double)(1ull << h->lg_tiny_min);
	bool rounded = false;

	memset(n, 0, sizeof(*n));
	n->inuse_samples = s->cnt[C_CUROBJS];
	n->inuse_bytes = s->cnt[C_CURBYTES];
	n->samples = s->cnt[C_ACCUMOBJS];
	n->bytes = s->cnt[C_ACCUMBYTES];
	/* exact for one size; 5.2.1 keeps raw counts only: the mean size, as jeprof weighs */
	weigh(n->inuse_samples, n->inuse_bytes, period, &n->inuse_objects, &n->inuse_space);
	weigh(n->samples, n->bytes, period, &n->alloc_objects, &n->alloc_space);
	if (!h->has_unbiased)
		return false;
	/* several sizes: jemalloc's sums, what jeprof gets back from its dump */
	if (!one_size(n->inuse_samples, n->inuse_bytes, s->cnt[C_CUROBJS_SU], s->cnt[C_CURBYTES_U],
		      lg, h->lg_tiny_min)) {
		n->inuse_objects = nonneg(s->cnt[C_CUROBJS_SU]) / shift;
		n->inuse_space = nonneg(s->cnt[C_CURBYTES_U]);
		rounded |= n->inuse_samples != 0;
	}
	if (!one_size(n->samples, n->bytes, s->cnt[C_ACCUMOBJS_SU], s->cnt[C_ACCUMBYTES_U], lg,
		      h->lg_tiny_min)) {
		n->alloc_objects = nonneg(s->cnt[C_ACCUMOBJS_SU]) / shift;
		n->alloc_space = nonneg(s->cnt[C_ACCUMBYTES_U]);
		rounded |= n->samples != 0;
	}
	return rounded;
}

static int read_globals(const struct mem_source *m, const struct heapwalk_syms *sy,
			struct heapwalk_stats *st, char *err, size_t errlen)
{
	uint64_t lg;
	uint8_t b;

	if (!sy->bt2gctx || !sy->lg_prof_sample)
		return hb_fail(err, errlen, -EINVAL,
			       "jemalloc's bt2gctx table or lg_prof_sample was not found");
	if (!memsrc_mapped(m, sy->lg_prof_sample, 8) || memsrc_read(m, sy->lg_prof_sample, &lg, 8))
		return hb_fail(err, errlen, -EFAULT, "cannot read jemalloc's lg_prof_sample");
	if (lg > 62)
		return hb_fail(err, errlen, -EPROTO,
			       "jemalloc's lg_prof_sample reads %llu, not a sampling rate",
			       (unsigned long long)lg);
	st->lg_prof_sample = lg;
	if (sy->opt_prof_accum) {
		if (!memsrc_mapped(m, sy->opt_prof_accum, 1) ||
		    memsrc_read(m, sy->opt_prof_accum, &b, 1))
			return hb_fail(err, errlen, -EFAULT,
				       "cannot read jemalloc's opt_prof_accum");
		st->prof_accum = b != 0;
	}
	if (sy->active && memsrc_mapped(m, sy->active, 1) &&
	    memsrc_read(m, sy->active, &b, 1) == 0) {
		st->prof_active = b != 0;
		st->active_known = true;
	}
	return 0;
}

static void pause_us(unsigned us)
{
	struct timespec ts = { .tv_sec = us / 1000000, .tv_nsec = (long)(us % 1000000) * 1000 };

	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

/* Hands a consistent walk's stacks to the collector. */
static int deliver(struct walk *w, struct collector *c, struct heapwalk_stats *st)
{
	for (size_t i = 0; i < w->n; i++) {
		const struct hw_stack *s = &w->stacks[i];
		struct collector_counts n;
		int rc;

		st->stacks_rounded += stack_counts(w, s, st->lg_prof_sample, &n);
		rc = collector__add_counts(c, w->frames + s->frames, s->nframes, &n);
		if (rc)
			return hb_fail(w->err, w->errlen, rc, "cannot keep the stacks read: %s",
				       strerror(-rc));
		st->truncated += s->truncated;
		st->empty += !s->nframes;
		st->curobjs += n.inuse_samples;
		st->curbytes += n.inuse_bytes;
		st->accumobjs += n.samples;
		st->accumbytes += n.bytes;
		st->inuse_objects += n.inuse_objects;
		st->inuse_space += n.inuse_space;
		st->alloc_objects += n.alloc_objects;
		st->alloc_space += n.alloc_space;
	}
	st->stacks = w->n;
	st->gctxs = w->gctxs;
	st->tctxs = w->tctxs;
	st->tctxs_skipped = w->skipped;
	return 0;
}

void heapwalk_truncated_text(char *buf, size_t len, const struct heapwalk_stats *st)
{
	if (!st->truncated) {
		snprintf(buf, len, "%s", "");
		return;
	}
	snprintf(buf, len,
		 "%" PRIu64 " of the %" PRIu64 " stacks were deeper than heapbpf's %d frames "
		 "(jemalloc's prof_bt_max is above %d): each keeps its innermost %d frames",
		 st->truncated, st->stacks, HEAPBPF_MAX_FRAMES, HEAPBPF_MAX_FRAMES,
		 HEAPBPF_MAX_FRAMES);
}

int heapwalk_read(const struct mem_source *m, const struct jemalloc_layout *l,
		  const struct heapwalk_syms *sy, const struct heapwalk_opts *o,
		  struct collector *c, struct heapwalk_stats *st, char *err, size_t errlen)
{
	struct heapwalk_opts dflt;
	struct walk w = { .m = m, .l = l, .h = &l->heap, .err = err, .errlen = errlen };
	bool changed = false;
	int rc;

	if (!o) {
		heapwalk_default_opts(&dflt);
		o = &dflt;
	}
	w.o = o;
	memset(st, 0, sizeof(*st));
	if (!l->heap.ckhc_size || !l->heap.cnt_size)
		return hb_fail(err, errlen, -ENOTSUP,
			       "the %s layout does not describe jemalloc's heap tables", l->name);
	rc = read_globals(m, sy, st, err, errlen);
	if (rc)
		return rc;
	w.accum = st->prof_accum;
	st->unbiased = l->heap.has_unbiased;
	for (unsigned k = 0; k <= o->retries; k++) {
		if (k)
			pause_us(o->retry_delay_us);
		w.n = w.nframes = 0;
		w.tctxs = w.skipped = w.gctxs = 0;
		st->attempts = k + 1;
		rc = walk_once(&w, sy->bt2gctx);
		if (rc == -EAGAIN)
			changed = true;
		/* what another read cannot change: done, out of memory, bad layout, no process */
		if (rc == 0 || rc == -ENOMEM || rc == -EINVAL || rc == -ESRCH || rc == -EPERM)
			break;
	}
	if (!rc)
		rc = deliver(&w, c, st);
	else if (changed && rc != -ENOMEM)
		rc = hb_fail(
			err, errlen, -EAGAIN,
			"jemalloc's profiling tables kept changing while they were read "
			"(%u attempts); try again, or stop the process (SIGSTOP) while reading",
			st->attempts);
	free(w.stacks);
	free(w.frames);
	return rc;
}

int heapwalk_target_syms(const struct jemalloc_target *t, struct heapwalk_syms *sy, char *err,
			 size_t errlen)
{
	memset(sy, 0, sizeof(*sy));
	/* a file-local static of prof_data.c (5.3) or prof.c (5.2.1): no namespace prefix */
	if (jemalloc_target__global(t, "bt2gctx", false, &sy->bt2gctx))
		return hb_fail(err, errlen, -ENOENT,
			       "jemalloc in pid %d (%s) has no bt2gctx in its symbol table, so its "
			       "profiling tables cannot be found; use the windowed mode "
			       "(heapbpf --pid %d)",
			       t->pid, t->path, t->pid);
	sy->lg_prof_sample = t->lg_prof_sample_addr;
	sy->active = t->active_addr;
	/* without it (never seen) the walk reports current counts only */
	if (jemalloc_target__global(t, "opt_prof_accum", true, &sy->opt_prof_accum))
		sy->opt_prof_accum = 0;
	return 0;
}

int heapwalk_live(const struct jemalloc_target *t, struct collector *c, struct heapwalk_stats *st,
		  char *err, size_t errlen)
{
	struct heapwalk_syms sy;
	struct heapwalk_opts wo;
	struct mem_source m = { 0 };
	int rc;

	rc = heapwalk_target_syms(t, &sy, err, errlen);
	rc = rc ?: memsrc_proc_open(t->pid, &m, err, errlen);
	if (rc)
		return rc;
	heapwalk_default_opts(&wo);
	rc = heapwalk_read(&m, t->layout, &sy, &wo, c, st, err, errlen);
	memsrc_proc_close(&m);
	return rc;
}
