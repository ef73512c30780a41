// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libFuzzer harness for the jemalloc layout reader and what reads a target's
 * memory with a layout (make fuzz): what heapbpf takes from a process it has
 * no reason to trust. The first input byte picks what the rest is:
 *
 *   0 mod 3: an ELF file with DWARF, as the object or its debug file is on
 *            disk: layout_dwarf_read(), the layout built from what it read
 *            (layout_dwarf_layout(), layout_dwarf_heap()) and
 *            its check against every table entry (layout_dwarf_check()),
 *            the version string found in the object and its match. A layout
 *            the DWARF yields then walks a heap the harness lays out with
 *            that very layout, so that offsets a lying DWARF gave meet the
 *            live-heap walker.
 *   1 mod 3: byte 1 picks a table layout (bits 0-1 the entry, bit 2 its
 *            --enable-debug form, bits 3-5 the walk's flags below); the rest
 *            is the target's memory, mapped at BASE, walked by
 *            heapwalk_read() through a mem_source backed by the input.
 *   2 mod 3: what a DWARF could claim (offsets and parameter positions,
 *            HDR_DWARF bytes, see from_bytes()) made into a layout by
 *            layout_dwarf_layout(), as heapbpf makes one; then memory
 *            as in mode 1.
 *
 * The memory's globals sit at fixed places: bt2gctx (a ckh_t) at BASE,
 * lg_prof_sample at BASE + 0x40, opt_prof_accum at BASE + 0x48, the active
 * flag at BASE + 0x49. Walk flags: bit 0 one retry, bit 1 a frozen image (a
 * core), bit 2 the image's last 64 bytes mapped but unreadable (a process
 * that unmapped them between the check and the read).
 *
 * No crash, no leak, no UB, no read of a byte the mem_source does not map.
 *
 * HEAPBPF_FUZZ_SEEDS=DIR: writes the memory seeds (a consistent heap for
 * every table layout, in modes 1 and 2) into DIR, checks that each walks to
 * its two stacks, and exits.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collect/collector.h"
#include "symbols/elfobj.h"
#include "heap/heapwalk.h"
#include "jemalloc/layout.h"
#include "jemalloc/layout_dwarf.h"

#define BASE	   0x10000ull
#define CKH	   0x00
#define LG	   0x40
#define ACCUM	   0x48
#define ACTIVE	   0x49
#define FIRST_FREE 0x60
#define HOLE	   64

/* mode 2's header: 7 + 26 offsets (2 bytes each), 8 positions, 1 byte of flags */
#define N_OFFS	  7
#define N_HEAP	  (sizeof(struct jemalloc_heap_dwarf) / sizeof(int64_t))
#define HDR_DWARF (2 * (N_OFFS + N_HEAP) + 8 + 1)

static char path[64];

/* The scratch file gone when the run ends (a crash leaves it, with the input). */
static void drop_scratch(void)
{
	unlink(path);
}

/* The target's memory: the input's bytes at BASE. */
struct image {
	const uint8_t *b;
	size_t n;
	size_t hole; /* bytes from here on are mapped but cannot be read */
};

static bool img_in(const struct image *im, uint64_t addr, size_t len)
{
	return addr >= BASE && addr - BASE <= im->n && len <= im->n - (addr - BASE);
}

static int img_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	const struct image *im = ctx;

	if (!img_in(im, addr, len))
		return -EFAULT;
	if (addr - BASE + len > im->hole)
		return -EIO;
	memcpy(buf, im->b + (addr - BASE), len);
	return 0;
}

static bool img_mapped(void *ctx, uint64_t addr, size_t len)
{
	return img_in(ctx, addr, len);
}

static void walk(const uint8_t *b, size_t n, const struct jemalloc_layout *l, unsigned flags,
		 size_t *stacks)
{
	struct image im = { .b = b, .n = n, .hole = n };
	struct mem_source m = { .read = img_read, .mapped = img_mapped, .ctx = &im };
	struct heapwalk_syms sy = {
		.bt2gctx = BASE + CKH,
		.lg_prof_sample = BASE + LG,
		.opt_prof_accum = BASE + ACCUM,
		.active = BASE + ACTIVE,
	};
	struct heapwalk_opts o;
	struct heapwalk_stats st;
	struct collector *c;
	char err[512];

	if (flags & 4)
		im.hole = n > HOLE ? n - HOLE : 0;
	heapwalk_default_opts(&o);
	o.retries = flags & 1;
	o.retry_delay_us = 0;
	o.frozen = flags & 2;
	if (collector__new(1 << 14, &c))
		abort();
	if (heapwalk_read(&m, l, &sy, &o, c, &st, err, sizeof(err)) == 0 && stacks)
		*stacks = collector__nstacks(c);
	collector__free(c);
}

/* ---- a consistent heap for a layout (mode 0's walk, and the seeds) ---------- */

struct builder {
	uint8_t *b;
	size_t cap, pos;
};

static void put(struct builder *bd, uint64_t off, uint64_t v, size_t len)
{
	/* a lying layout may put a field anywhere: what does not fit is left out */
	if (off <= bd->cap && len <= bd->cap - off)
		memcpy(bd->b + off, &v, len);
}

static uint64_t take(struct builder *bd, uint64_t len)
{
	uint64_t at = bd->pos;

	bd->pos += (len + 15) & ~15ull;
	return at;
}

static uint64_t max_u64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

/* A tctx of gctx g, a thread uid and its counters, and its links. */
static void put_tctx(struct builder *bd, const struct jemalloc_layout *l, uint64_t t, uint64_t g,
		     uint64_t tdata, uint64_t uid, uint64_t objs, uint64_t left, uint64_t right)
{
	const struct jemalloc_heap_layout *h = &l->heap;
	uint64_t c = t + h->tctx_cnts;

	put(bd, t + h->tctx_tdata, BASE + tdata, 8);
	put(bd, t + h->tctx_thr_uid, uid, 8);
	put(bd, t + h->tctx_thr_discrim, 0, 8);
	put(bd, t + h->tctx_uid, 0, 8);
	put(bd, t + l->bpf.tctx_gctx_off, BASE + g, 8);
	put(bd, t + h->tctx_state, 1, 4); /* nominal */
	put(bd, t + h->tctx_link + h->rbn_left, left ? BASE + left : 0, 8);
	put(bd, t + h->tctx_link + h->rbn_right_red, right ? (BASE + right) | 1 : 0, 8);
	put(bd, c + h->cnt_curobjs, objs, 8);
	put(bd, c + h->cnt_curbytes, 64 * objs, 8);
	put(bd, c + h->cnt_accumobjs, 2 * objs, 8);
	put(bd, c + h->cnt_accumbytes, 128 * objs, 8);
	if (h->has_unbiased) {
		put(bd, c + h->cnt_curobjs_su, 8 * objs, 8);
		put(bd, c + h->cnt_curbytes_u, 4 * 64 * objs, 8);
		put(bd, c + h->cnt_accumobjs_su, 16 * objs, 8);
		put(bd, c + h->cnt_accumbytes_u, 8 * 64 * objs, 8);
	}
}

/*
 * jemalloc's tables as l lays them out: two stacks, the first of three
 * frames with a tree of three tctxs, the second of two frames with one.
 * Returns the image's size, 0 when it does not fit in cap.
 */
static size_t build_heap(const struct jemalloc_layout *l, uint8_t *b, size_t cap)
{
	const struct jemalloc_heap_layout *h = &l->heap;
	struct builder bd = { .b = b, .cap = cap, .pos = FIRST_FREE };
	uint64_t bt_span = max_u64(max_u64(l->bpf.bt_vec_off + 8, l->bpf.bt_len_off + 4), 16);
	uint64_t gsz = max_u64(l->bpf.gctx_bt_off + bt_span, h->gctx_tctxs + 8);
	uint64_t tsz, tab, g[2], vec[2], tdata, t[4];

	/* every field the walk reads, where the layout puts it */
	tsz = heapwalk_tctx_span(l);
	memset(b, 0, cap);
	tab = take(&bd, 4 * (uint64_t)h->ckhc_size);
	for (int i = 0; i < 2; i++) {
		g[i] = take(&bd, gsz);
		vec[i] = take(&bd, 3 * 8);
	}
	tdata = take(&bd, h->tdata_expired + 1);
	for (int j = 0; j < 4; j++)
		t[j] = take(&bd, tsz);
	if (bd.pos > cap)
		return 0;
	put(&bd, CKH + h->ckh_count, 2, 8);
	put(&bd, CKH + h->ckh_lg_curbuckets, 0, 4); /* 4 cells */
	put(&bd, CKH + h->ckh_tab, BASE + tab, 8);
	put(&bd, LG, 14, 8);
	put(&bd, ACCUM, 1, 1);
	put(&bd, ACTIVE, 1, 1);
	for (int i = 0; i < 2; i++) {
		uint64_t cell = tab + (uint64_t)(2 * i + 1) * h->ckhc_size;
		uint64_t bt = g[i] + l->bpf.gctx_bt_off;

		put(&bd, cell + h->ckhc_key, BASE + bt, 8);
		put(&bd, cell + h->ckhc_data, BASE + g[i], 8);
		put(&bd, bt + l->bpf.bt_vec_off, BASE + vec[i], 8);
		put(&bd, bt + l->bpf.bt_len_off, 3 - i, 4);
		for (int k = 0; k < 3 - i; k++)
			put(&bd, vec[i] + 8 * k, 0x401000 + 0x100 * i + k, 8);
	}
	/* gctx 0: t1 at the root, t0 on its left, t2 on its right (red); gctx 1: t3 */
	put_tctx(&bd, l, t[0], g[0], tdata, 1, 1, 0, 0);
	put_tctx(&bd, l, t[1], g[0], tdata, 2, 2, t[0], t[2]);
	put_tctx(&bd, l, t[2], g[0], tdata, 3, 4, 0, 0);
	put_tctx(&bd, l, t[3], g[1], tdata, 1, 5, 0, 0);
	put(&bd, g[0] + h->gctx_tctxs, BASE + t[1], 8);
	put(&bd, g[1] + h->gctx_tctxs, BASE + t[3], 8);
	return bd.pos;
}

/* ---- mode 2: a layout from what a DWARF could claim ------------------------- */

static int64_t off_of(const uint8_t *p)
{
	unsigned v = p[0] | (unsigned)p[1] << 8;

	/* -1 (not described), or an offset a little past the 4096 heapbpf accepts */
	return v == 0xffff ? -1 : (int64_t)(v % 4104);
}

static int pos_of(uint8_t v)
{
	return v == 0xff ? -1 : v % 8;
}

static void from_bytes(const uint8_t *p, struct jemalloc_dwarf *d)
{
	int64_t *offs[N_OFFS] = { &d->tctx_gctx, &d->gctx_bt,	&d->bt_vec,   &d->bt_len,
				  &d->info_time, &d->info_tctx, &d->info_size };
	int *pos[8] = { &d->alloc_ptr, &d->alloc_size, &d->alloc_usize, &d->alloc_tctx,
			&d->free_ptr,  &d->free_usize, &d->free_info,	&d->free_tctx };
	int64_t *heap = (int64_t *)&d->heap;
	uint8_t f;

	memset(d, 0, sizeof(*d));
	for (size_t i = 0; i < N_OFFS; i++, p += 2)
		*offs[i] = off_of(p);
	for (size_t i = 0; i < N_HEAP; i++, p += 2)
		heap[i] = off_of(p);
	for (size_t i = 0; i < 8; i++)
		*pos[i] = pos_of(*p++);
	f = *p;
	d->have_alloc_fn = f & 1;
	d->have_free_fn = f & 2;
	d->nstime_magic = f & 4;
	d->have_nstime = f & 8;
}

static void put_off(uint8_t **p, int64_t v)
{
	unsigned u = v < 0 ? 0xffff : (unsigned)v;

	*(*p)++ = u & 0xff;
	*(*p)++ = u >> 8;
}

static int pos_arg(__u8 arg)
{
	return arg == HEAPBPF_ARG_NONE ? -1 : arg;
}

/* from_bytes()'s input for a table layout (the seeds) */
static void to_bytes(const struct jemalloc_layout *l, bool debug, uint8_t *p)
{
	const struct heapbpf_layout *b = &l->bpf;
	const struct jemalloc_heap_layout *h = &l->heap;
	bool info = b->free_info_arg != HEAPBPF_ARG_NONE;
	const int64_t offs[N_OFFS] = {
		b->tctx_gctx_off,
		b->gctx_bt_off,
		b->bt_vec_off,
		b->bt_len_off,
		info ? b->info_time_off : -1,
		info ? b->info_tctx_off : -1,
		info ? b->info_size_off : -1,
	};
	const int64_t heap[N_HEAP] = {
		h->ckh_count,
		h->ckh_lg_curbuckets,
		h->ckh_tab,
		h->ckhc_size,
		h->ckhc_key,
		h->ckhc_data,
		h->gctx_tctxs,
		h->tctx_tdata,
		h->tctx_cnts,
		h->tctx_link,
		h->tctx_state,
		h->tctx_thr_uid,
		h->tctx_thr_discrim,
		h->tctx_uid,
		h->rbn_left,
		h->rbn_right_red,
		h->tdata_expired,
		h->cnt_size,
		h->cnt_curobjs,
		h->cnt_curbytes,
		h->cnt_accumobjs,
		h->cnt_accumbytes,
		h->has_unbiased ? h->cnt_curobjs_su : -1,
		h->has_unbiased ? h->cnt_curbytes_u : -1,
		h->has_unbiased ? h->cnt_accumobjs_su : -1,
		h->has_unbiased ? h->cnt_accumbytes_u : -1,
	};
	const __u8 args[8] = { b->alloc_ptr_arg,  b->alloc_size_arg, b->alloc_usize_arg,
			       b->alloc_tctx_arg, b->free_ptr_arg,   b->free_usize_arg,
			       b->free_info_arg,  b->free_tctx_arg };

	for (size_t i = 0; i < N_OFFS; i++)
		put_off(&p, offs[i]);
	for (size_t i = 0; i < N_HEAP; i++)
		put_off(&p, heap[i]);
	for (size_t i = 0; i < 8; i++)
		*p++ = (uint8_t)(pos_arg(args[i]) < 0 ? 0xff : args[i]);
	*p = 1 | 2 | 8 | (debug ? 4 : 0);
}

/* ---- the table's entries ----------------------------------------------------- */

static const struct jemalloc_layout *entries[8];
static size_t nentries;

static void find_entries(void)
{
	const char *names = jemalloc_layout_names();

	/* "5.2.1, 5.3.0, 5.3.1": the table's own names */
	while (*names && nentries < sizeof(entries) / sizeof(entries[0])) {
		size_t n = strcspn(names, ", ");
		char name[16];

		if (n && n < sizeof(name)) {
			memcpy(name, names, n);
			name[n] = '\0';
			entries[nentries] = jemalloc_layout_by_name(name);
			nentries += entries[nentries] != NULL;
		}
		names += n;
		names += strspn(names, ", ");
	}
	if (!nentries)
		abort();
}

/* ---- mode 0: an ELF file ------------------------------------------------------ */

static uint8_t heap_buf[1 << 17];

static void elf_file(const uint8_t *data, size_t size)
{
	struct jemalloc_dwarf d;
	struct jemalloc_heap_layout h;
	struct jemalloc_layout l, dbg;
	struct elf_object *elf;
	enum jemalloc_match how;
	char why[256], version[96], num[32];
	size_t n;
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	if (fd < 0)
		abort();
	while (size) {
		ssize_t w = write(fd, data, size);

		if (w <= 0)
			abort();
		data += w;
		size -= (size_t)w;
	}
	close(fd);
	/* what target.c takes from the object itself: its version string */
	if (elfobj__open(path, &elf) == 0) {
		if (elfobj__jemalloc_version(elf, version, sizeof(version)) == 0) {
			jemalloc_layout_match(version, &how);
			jemalloc_layout_version_number(version, num, sizeof(num));
		}
		elfobj__free(elf);
	}
	if (layout_dwarf_read(path, &d))
		return;
	layout_dwarf_heap(&d, &h);
	for (size_t i = 0; i < nentries; i++) {
		layout_dwarf_check(entries[i], &d, why, sizeof(why));
		jemalloc_layout_debug(entries[i], &dbg);
		layout_dwarf_check(&dbg, &d, why, sizeof(why));
	}
	if (layout_dwarf_layout(&d, "prof_active_state", &l, why, sizeof(why)))
		return;
	layout_dwarf_check(&l, &d, why, sizeof(why));
	n = build_heap(&l, heap_buf, sizeof(heap_buf));
	if (n)
		walk(heap_buf, n, &l, 0, NULL);
}

/* ---- the seeds ------------------------------------------------------------------ */

static void write_seed(const char *dir, const char *name, const uint8_t *hdr, size_t hlen,
		       const uint8_t *img, size_t n)
{
	char file[4096];
	FILE *f;

	snprintf(file, sizeof(file), "%s/%s", dir, name);
	f = fopen(file, "wb");
	if (!f || fwrite(hdr, 1, hlen, f) != hlen || fwrite(img, 1, n, f) != n || fclose(f)) {
		fprintf(stderr, "fuzz_layout: cannot write %s\n", file);
		exit(1);
	}
}

/* A consistent heap for every table layout, walked once to prove it is one. */
static void write_seeds(const char *dir)
{
	for (size_t i = 0; i < nentries; i++) {
		for (int debug = 0; debug < 2; debug++) {
			struct jemalloc_layout l = *entries[i], back;
			uint8_t hdr[2 + HDR_DWARF];
			struct jemalloc_dwarf d;
			char name[64], why[256];
			size_t n, stacks = 0;

			/* 5.2.1's debug build has the same layout */
			if (debug && !entries[i]->debug_info_shift)
				continue;
			if (debug)
				jemalloc_layout_debug(entries[i], &l);
			n = build_heap(&l, heap_buf, sizeof(heap_buf));
			walk(heap_buf, n, &l, 0, &stacks);
			if (!n || stacks != 2) {
				fprintf(stderr, "fuzz_layout: the %s heap walks to %zu stacks\n",
					l.name, stacks);
				exit(1);
			}
			hdr[0] = 1;
			hdr[1] = (uint8_t)(i | (debug ? 4 : 0));
			snprintf(name, sizeof(name), "mem-%s%s", l.name, debug ? "-debug" : "");
			write_seed(dir, name, hdr, 2, heap_buf, n);
			/* the same through mode 2: the layout as its DWARF would say it */
			hdr[0] = 2;
			to_bytes(&l, debug, hdr + 1);
			from_bytes(hdr + 1, &d);
			if (layout_dwarf_layout(&d, "prof_active_state", &back, why, sizeof(why)) ||
			    memcmp(&back.bpf, &l.bpf, sizeof(l.bpf)) ||
			    memcmp(&back.heap, &l.heap, sizeof(l.heap))) {
				fprintf(stderr, "fuzz_layout: the %s layout does not read back\n",
					l.name);
				exit(1);
			}
			snprintf(name, sizeof(name), "dwarfmem-%s%s", l.name,
				 debug ? "-debug" : "");
			write_seed(dir, name, hdr, 1 + HDR_DWARF, heap_buf, n);
		}
	}
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *seeds = getenv("HEAPBPF_FUZZ_SEEDS");

	(void)argc;
	(void)argv;
	/* a hostile object's build-id is never looked up on a server */
	unsetenv("DEBUGINFOD_URLS");
	find_entries();
	snprintf(path, sizeof(path), "/dev/shm/heapbpf-fuzz-%d.elf", getpid());
	atexit(drop_scratch);
	if (seeds) {
		write_seeds(seeds);
		exit(0);
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct jemalloc_layout l, dbg;
	struct jemalloc_dwarf d;
	char why[256];

	if (!size)
		return 0;
	switch (data[0] % 3) {
	case 0:
		elf_file(data + 1, size - 1);
		break;
	case 1:
		if (size < 2)
			return 0;
		l = *entries[(data[1] & 3) % nentries];
		if (data[1] & 4) {
			jemalloc_layout_debug(&l, &dbg);
			l = dbg;
		}
		walk(data + 2, size - 2, &l, data[1] >> 3, NULL);
		break;
	default:
		if (size < 1 + HDR_DWARF)
			return 0;
		from_bytes(data + 1, &d);
		for (size_t i = 0; i < nentries; i++)
			layout_dwarf_check(entries[i], &d, why, sizeof(why));
		if (layout_dwarf_layout(&d, "prof_active_state", &l, why, sizeof(why)))
			return 0;
		walk(data + 1 + HDR_DWARF, size - 1 - HDR_DWARF, &l, data[HDR_DWARF] >> 4, NULL);
		break;
	}
	return 0;
}
