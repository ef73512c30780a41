// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#include "symbols/debuginfo.h"
#include "util/errmsg.h"
#include "util/files.h"
#include "jemalloc/layout_dwarf.h"

#define NONE HEAPBPF_ARG_NONE

static void dwarf_init(struct jemalloc_dwarf *d)
{
	memset(d, 0, sizeof(*d));
	d->tctx_gctx = d->gctx_bt = d->bt_vec = d->bt_len = -1;
	d->info_time = d->info_tctx = d->info_size = -1;
	d->alloc_ptr = d->alloc_size = d->alloc_usize = d->alloc_tctx = -1;
	d->free_ptr = d->free_usize = d->free_info = d->free_tctx = -1;
	memset(&d->heap, 0xff, sizeof(d->heap)); /* every offset -1 */
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);

	return a >= b && strcmp(s + a - b, suffix) == 0;
}

static bool is_declaration(Dwarf_Die *die)
{
	Dwarf_Attribute a;
	bool flag = false;

	return dwarf_attr(die, DW_AT_declaration, &a) && dwarf_formflag(&a, &flag) == 0 && flag;
}

/* Offset of member name in struct die, or -1. */
static int64_t member_offset(Dwarf_Die *st, const char *name)
{
	Dwarf_Die m;

	if (dwarf_child(st, &m) != 0)
		return -1;
	do {
		Dwarf_Attribute a;
		Dwarf_Word off;
		const char *n;

		if (dwarf_tag(&m) != DW_TAG_member)
			continue;
		n = dwarf_diename(&m);
		if (!n || strcmp(n, name) != 0)
			continue;
		if (!dwarf_attr(&m, DW_AT_data_member_location, &a) || dwarf_formudata(&a, &off))
			return -1;
		return (int64_t)off;
	} while (dwarf_siblingof(&m, &m) == 0);
	return -1;
}

/* Positions of ptr, size, usize, tctx, prof_info among fn's parameters; false if unnamed. */
static bool param_positions(Dwarf_Die *fn, int pos[5])
{
	static const char *const names[5] = { "ptr", "size", "usize", "tctx", "prof_info" };
	Dwarf_Die p;
	int i = 0;

	for (int k = 0; k < 5; k++)
		pos[k] = -1;
	if (dwarf_child(fn, &p) != 0)
		return false;
	do {
		const char *n;

		if (dwarf_tag(&p) != DW_TAG_formal_parameter)
			continue;
		n = dwarf_diename(&p);
		if (!n)
			return false; /* a declaration: parameters without names */
		for (int k = 0; k < 5; k++) {
			if (strcmp(n, names[k]) == 0)
				pos[k] = i;
		}
		i++;
	} while (dwarf_siblingof(&p, &p) == 0);
	return i > 0;
}

/* The type of member name of struct st (through typedefs), or false. */
static bool member_type(Dwarf_Die *st, const char *name, Dwarf_Die *out)
{
	Dwarf_Attribute a;
	Dwarf_Die m;

	if (dwarf_child(st, &m) != 0)
		return false;
	do {
		const char *n = dwarf_diename(&m);

		if (dwarf_tag(&m) == DW_TAG_member && n && strcmp(n, name) == 0)
			return dwarf_attr(&m, DW_AT_type, &a) && dwarf_formref_die(&a, out);
	} while (dwarf_siblingof(&m, &m) == 0);
	return false;
}

static int64_t byte_size(Dwarf_Die *die)
{
	int s = dwarf_bytesize(die);

	return s > 0 ? s : -1;
}

/* What the live-heap walker reads (user/heap/heapwalk.c): jemalloc's profiling tables. */
static void scan_heap_struct(Dwarf_Die *c, const char *n, struct jemalloc_heap_dwarf *h)
{
	Dwarf_Die link;

	if (strcmp(n, "prof_tctx_s") == 0) {
		h->tctx_tdata = member_offset(c, "tdata");
		h->tctx_thr_uid = member_offset(c, "thr_uid");
		h->tctx_thr_discrim = member_offset(c, "thr_discrim");
		h->tctx_uid = member_offset(c, "tctx_uid");
		h->tctx_cnts = member_offset(c, "cnts");
		h->tctx_link = member_offset(c, "tctx_link");
		h->tctx_state = member_offset(c, "state");
		if (member_type(c, "tctx_link", &link)) {
			h->rbn_left = member_offset(&link, "rbn_left");
			h->rbn_right_red = member_offset(&link, "rbn_right_red");
		}
	} else if (strcmp(n, "prof_gctx_s") == 0) {
		h->gctx_tctxs = member_offset(c, "tctxs");
	} else if (strcmp(n, "prof_tdata_s") == 0) {
		h->tdata_expired = member_offset(c, "expired");
	} else if (strcmp(n, "prof_cnt_s") == 0) {
		h->cnt_size = byte_size(c);
		h->cnt_curobjs = member_offset(c, "curobjs");
		h->cnt_curbytes = member_offset(c, "curbytes");
		h->cnt_accumobjs = member_offset(c, "accumobjs");
		h->cnt_accumbytes = member_offset(c, "accumbytes");
		h->cnt_curobjs_su = member_offset(c, "curobjs_shifted_unbiased");
		h->cnt_curbytes_u = member_offset(c, "curbytes_unbiased");
		h->cnt_accumobjs_su = member_offset(c, "accumobjs_shifted_unbiased");
		h->cnt_accumbytes_u = member_offset(c, "accumbytes_unbiased");
	}
}

/* ckh_t and ckhc_t are typedefs of anonymous structs. */
static void scan_heap_typedef(Dwarf_Die *st, const char *n, struct jemalloc_heap_dwarf *h)
{
	if (strcmp(n, "ckh_t") == 0) {
		h->ckh_count = member_offset(st, "count");
		h->ckh_lg_curbuckets = member_offset(st, "lg_curbuckets");
		h->ckh_tab = member_offset(st, "tab");
	} else if (strcmp(n, "ckhc_t") == 0) {
		h->ckhc_size = byte_size(st);
		h->ckhc_key = member_offset(st, "key");
		h->ckhc_data = member_offset(st, "data");
	}
}

static void scan_cu(Dwarf_Die *cu, struct jemalloc_dwarf *d, int depth)
{
	Dwarf_Die c;

	if (dwarf_child(cu, &c) != 0)
		return;
	do {
		const char *n = dwarf_diename(&c);
		int tag = dwarf_tag(&c), pos[5];
		Dwarf_Die st;
		Dwarf_Attribute a;

		/* dwz (Debian's -dbgsym files) moves shared types into partial units */
		if (tag == DW_TAG_imported_unit && depth < 4) {
			if (dwarf_attr(&c, DW_AT_import, &a) && dwarf_formref_die(&a, &st))
				scan_cu(&st, d, depth + 1);
			continue;
		}
		if (!n)
			continue;
		if (tag == DW_TAG_structure_type && !is_declaration(&c))
			scan_heap_struct(&c, n, &d->heap);
		else if (tag == DW_TAG_typedef && dwarf_attr(&c, DW_AT_type, &a) &&
			 dwarf_formref_die(&a, &st) && dwarf_tag(&st) == DW_TAG_structure_type)
			scan_heap_typedef(&st, n, &d->heap);
		if (tag == DW_TAG_structure_type && !is_declaration(&c)) {
			if (strcmp(n, "prof_tctx_s") == 0) {
				d->tctx_gctx = member_offset(&c, "gctx");
			} else if (strcmp(n, "prof_gctx_s") == 0) {
				d->gctx_bt = member_offset(&c, "bt");
			} else if (strcmp(n, "prof_bt_s") == 0) {
				d->bt_vec = member_offset(&c, "vec");
				d->bt_len = member_offset(&c, "len");
			} else if (strcmp(n, "prof_info_s") == 0) {
				d->info_time = member_offset(&c, "alloc_time");
				d->info_tctx = member_offset(&c, "alloc_tctx");
				d->info_size = member_offset(&c, "alloc_size");
			}
		} else if (tag == DW_TAG_typedef && strcmp(n, "nstime_t") == 0) {
			if (dwarf_attr(&c, DW_AT_type, &a) && dwarf_formref_die(&a, &st)) {
				d->have_nstime = true;
				d->nstime_magic = member_offset(&st, "magic") >= 0;
			}
		} else if (tag == DW_TAG_subprogram) {
			/* named in the private namespace: je_prof_malloc_sample_object */
			if (ends_with(n, "prof_malloc_sample_object") && !d->have_alloc_fn &&
			    param_positions(&c, pos)) {
				d->have_alloc_fn = true;
				d->alloc_ptr = pos[0];
				d->alloc_size = pos[1];
				d->alloc_usize = pos[2];
				d->alloc_tctx = pos[3];
			} else if (ends_with(n, "prof_free_sampled_object") && !d->have_free_fn &&
				   param_positions(&c, pos)) {
				d->have_free_fn = true;
				d->free_ptr = pos[0];
				d->free_usize = pos[2];
				d->free_tctx = pos[3];
				d->free_info = pos[4];
			}
		}
	} while (dwarf_siblingof(&c, &c) == 0);
}

int layout_dwarf_read(const char *path, struct jemalloc_dwarf *d)
{
	Dwarf_Off off = 0, next;
	size_t hsize;
	bool found = false;
	struct dbg_alt alt;
	Dwarf *dw;
	int fd;

	dwarf_init(d);
	fd = files_open_regular_ro(path);
	if (fd < 0)
		return fd;
	dw = dwarf_begin(fd, DWARF_C_READ);
	if (!dw) {
		close(fd);
		return -ENOENT;
	}
	/* a dwz'd debug file: prof.c's types may live in its multifile */
	debuginfo_attach_alt(dw, path, &alt);
	/*
	 * Only jemalloc's src/prof.c: it defines both probed functions and
	 * sees every struct involved. Other compile units are skipped unread.
	 */
	while (!found && dwarf_nextcu(dw, off, &next, &hsize, NULL, NULL, NULL) == 0) {
		Dwarf_Die cu;
		const char *name;

		if (dwarf_offdie(dw, off + hsize, &cu) && (name = dwarf_diename(&cu)) &&
		    ends_with(name, "src/prof.c")) {
			scan_cu(&cu, d, 0);
			found = d->have_alloc_fn || d->tctx_gctx >= 0;
		}
		off = next;
	}
	dwarf_end(dw);
	debuginfo_alt_end(&alt);
	close(fd);
	return found ? 0 : -ENOENT;
}

static int arg_pos(__u8 arg)
{
	return arg == NONE ? -1 : arg;
}

static int mismatch(char *why, size_t len, const char *what, int64_t dwarf, const char *lname,
		    int64_t table)
{
	if (dwarf < 0)
		return hb_fail(why, len, -EPROTO,
			       "its debug info has no %s, the %s layout has it at %lld", what,
			       lname, (long long)table);
	if (table < 0)
		return hb_fail(why, len, -EPROTO,
			       "%s is at %lld in its debug info, the %s layout has none", what,
			       (long long)dwarf, lname);
	return hb_fail(why, len, -EPROTO,
		       "%s is at %lld in its debug info, the %s layout says %lld", what,
		       (long long)dwarf, lname, (long long)table);
}

/* One heap-table field: its name in messages, where DWARF and the table put it. */
struct heap_field {
	const char *what;
	int64_t dwarf;
	__u32 table;
	bool unbiased; /* 5.3's *_unbiased counters: only where the layout has them */
};

#define HF(name, field, u)                                                                         \
	{                                                                                          \
		name, hd->field, h->field, u                                                       \
	}

/* The live-heap walker's offsets against DWARF, where the layout describes the tables. */
static int heap_check(const struct jemalloc_layout *l, const struct jemalloc_heap_dwarf *hd,
		      char *why, size_t len)
{
	const struct jemalloc_heap_layout *h = &l->heap;
	const struct heap_field f[] = {
		HF("ckh_t.count", ckh_count, false),
		HF("ckh_t.lg_curbuckets", ckh_lg_curbuckets, false),
		HF("ckh_t.tab", ckh_tab, false),
		HF("the size of ckhc_t", ckhc_size, false),
		HF("ckhc_t.key", ckhc_key, false),
		HF("ckhc_t.data", ckhc_data, false),
		HF("prof_gctx_t.tctxs", gctx_tctxs, false),
		HF("prof_tctx_t.tdata", tctx_tdata, false),
		HF("prof_tctx_t.cnts", tctx_cnts, false),
		HF("prof_tctx_t.tctx_link", tctx_link, false),
		HF("prof_tctx_t.state", tctx_state, false),
		HF("prof_tctx_t.thr_uid", tctx_thr_uid, false),
		HF("prof_tctx_t.thr_discrim", tctx_thr_discrim, false),
		HF("prof_tctx_t.tctx_uid", tctx_uid, false),
		HF("prof_tctx_t.tctx_link.rbn_left", rbn_left, false),
		HF("prof_tctx_t.tctx_link.rbn_right_red", rbn_right_red, false),
		HF("prof_tdata_t.expired", tdata_expired, false),
		HF("the size of prof_cnt_t", cnt_size, false),
		HF("prof_cnt_t.curobjs", cnt_curobjs, false),
		HF("prof_cnt_t.curbytes", cnt_curbytes, false),
		HF("prof_cnt_t.accumobjs", cnt_accumobjs, false),
		HF("prof_cnt_t.accumbytes", cnt_accumbytes, false),
		HF("prof_cnt_t.curobjs_shifted_unbiased", cnt_curobjs_su, true),
		HF("prof_cnt_t.curbytes_unbiased", cnt_curbytes_u, true),
		HF("prof_cnt_t.accumobjs_shifted_unbiased", cnt_accumobjs_su, true),
		HF("prof_cnt_t.accumbytes_unbiased", cnt_accumbytes_u, true),
	};

	if (!h->ckhc_size) /* a layout without the tables: nothing to check */
		return 0;
	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
		if (f[i].unbiased && !h->has_unbiased) {
			if (f[i].dwarf >= 0)
				return mismatch(why, len, f[i].what, f[i].dwarf, l->name, -1);
			continue;
		}
		if (f[i].dwarf >= 0 && f[i].dwarf != f[i].table)
			return mismatch(why, len, f[i].what, f[i].dwarf, l->name, f[i].table);
	}
	return 0;
}

int layout_dwarf_heap(const struct jemalloc_dwarf *d, struct jemalloc_heap_layout *h)
{
	const struct jemalloc_heap_dwarf *hd = &d->heap;
	const int64_t *all = (const int64_t *)hd;

	/* every field but the unbiased counters (5.3 only) must be described */
	for (size_t i = 0; i < offsetof(struct jemalloc_heap_dwarf, cnt_curobjs_su) / 8; i++) {
		if (all[i] < 0 || all[i] > 4096)
			return -ENOENT;
	}
	if (hd->ckhc_size < 16 || hd->cnt_size < 32)
		return -ENOENT;
	memset(h, 0, sizeof(*h));
#define TAKE(field) h->field = (__u32)hd->field
	TAKE(ckh_count);
	TAKE(ckh_lg_curbuckets);
	TAKE(ckh_tab);
	TAKE(ckhc_size);
	TAKE(ckhc_key);
	TAKE(ckhc_data);
	TAKE(gctx_tctxs);
	TAKE(tctx_tdata);
	TAKE(tctx_cnts);
	TAKE(tctx_link);
	TAKE(tctx_state);
	TAKE(tctx_thr_uid);
	TAKE(tctx_thr_discrim);
	TAKE(tctx_uid);
	TAKE(rbn_left);
	TAKE(rbn_right_red);
	TAKE(tdata_expired);
	TAKE(cnt_size);
	TAKE(cnt_curobjs);
	TAKE(cnt_curbytes);
	TAKE(cnt_accumobjs);
	TAKE(cnt_accumbytes);
	h->has_unbiased = hd->cnt_curobjs_su >= 0 && hd->cnt_curbytes_u >= 0 &&
			  hd->cnt_accumobjs_su >= 0 && hd->cnt_accumbytes_u >= 0;
	if (h->has_unbiased) {
		TAKE(cnt_curobjs_su);
		TAKE(cnt_curbytes_u);
		TAKE(cnt_accumobjs_su);
		TAKE(cnt_accumbytes_u);
	}
#undef TAKE
	/* macros, not in DWARF: x86-64's 64-byte cache line and 8-byte pointer; SC_LG_TINY_MIN */
	h->lg_bucket_cells = 2;
	h->lg_tiny_min = 3;
	return 0;
}

int layout_dwarf_check(const struct jemalloc_layout *l, const struct jemalloc_dwarf *d, char *why,
		       size_t len)
{
	const struct heapbpf_layout *b = &l->bpf;
	/*
	 * A struct member the DWARF does not describe cannot be checked (debug
	 * info without types, -g1); one it describes differently is an error.
	 */
	const struct {
		const char *what;
		int64_t dwarf, table;
		bool applies;
	} checks[] = {
		{ "prof_tctx_t.gctx", d->tctx_gctx, b->tctx_gctx_off, d->tctx_gctx >= 0 },
		{ "prof_gctx_t.bt", d->gctx_bt, b->gctx_bt_off, d->gctx_bt >= 0 },
		{ "prof_bt_t.vec", d->bt_vec, b->bt_vec_off, d->bt_vec >= 0 },
		{ "prof_bt_t.len", d->bt_len, b->bt_len_off, d->bt_len >= 0 },
		/* prof_info_t only where the free hook gets one */
		{ "prof_info_t.alloc_time", d->info_time, b->info_time_off,
		  d->info_time >= 0 && b->free_info_arg != NONE && b->info_has_time },
		{ "prof_info_t.alloc_tctx", d->info_tctx, b->info_tctx_off,
		  d->info_tctx >= 0 && b->free_info_arg != NONE },
		{ "prof_info_t.alloc_size", d->info_size, b->info_size_off,
		  d->info_size >= 0 && b->free_info_arg != NONE },
		/* argument positions, where DWARF names the parameters */
		{ "parameter ptr of prof_malloc_sample_object", d->alloc_ptr,
		  arg_pos(b->alloc_ptr_arg), d->have_alloc_fn },
		{ "parameter size of prof_malloc_sample_object", d->alloc_size,
		  arg_pos(b->alloc_size_arg), d->have_alloc_fn },
		{ "parameter usize of prof_malloc_sample_object", d->alloc_usize,
		  arg_pos(b->alloc_usize_arg), d->have_alloc_fn },
		{ "parameter tctx of prof_malloc_sample_object", d->alloc_tctx,
		  arg_pos(b->alloc_tctx_arg), d->have_alloc_fn },
		{ "parameter ptr of prof_free_sampled_object", d->free_ptr,
		  arg_pos(b->free_ptr_arg), d->have_free_fn },
		{ "parameter usize of prof_free_sampled_object", d->free_usize,
		  arg_pos(b->free_usize_arg), d->have_free_fn },
		{ "parameter prof_info of prof_free_sampled_object", d->free_info,
		  arg_pos(b->free_info_arg), d->have_free_fn },
		{ "parameter tctx of prof_free_sampled_object", d->free_tctx,
		  arg_pos(b->free_tctx_arg), d->have_free_fn },
	};

	for (size_t i = 0; i < sizeof(checks) / sizeof(checks[0]); i++) {
		if (checks[i].applies && checks[i].dwarf != checks[i].table)
			return mismatch(why, len, checks[i].what, checks[i].dwarf, l->name,
					checks[i].table);
	}
	return heap_check(l, &d->heap, why, len);
}

/* A 0-based register argument position (x86-64: six), or NONE for -1. */
static int to_arg(int pos, __u8 *arg)
{
	if (pos < 0) {
		*arg = NONE;
		return 0;
	}
	if (pos >= 6)
		return -1;
	*arg = (__u8)pos;
	return 0;
}

static int to_off(int64_t off, __u32 *out)
{
	if (off < 0 || off > 4096)
		return -1;
	*out = (__u32)off;
	return 0;
}

int layout_dwarf_layout(const struct jemalloc_dwarf *d, const char *active_sym,
			struct jemalloc_layout *out, char *why, size_t len)
{
	struct heapbpf_layout *b = &out->bpf;
	bool info = d->free_info >= 0; /* 5.3.x: the free hook reads a prof_info_t */
	const char *missing = NULL;

	memset(out, 0, sizeof(*out));
	out->name = "DWARF";
	out->active_sym = active_sym;
	if (!d->have_alloc_fn || !d->have_free_fn)
		missing =
			"the parameters of prof_malloc_sample_object and prof_free_sampled_object";
	else if (d->alloc_usize < 0 || d->alloc_tctx < 0 || d->free_usize < 0 ||
		 (!info && d->free_tctx < 0))
		missing = "usize and tctx among the sampling functions' parameters";
	else if (to_arg(d->alloc_ptr, &b->alloc_ptr_arg) ||
		 to_arg(d->alloc_size, &b->alloc_size_arg) ||
		 to_arg(d->alloc_usize, &b->alloc_usize_arg) ||
		 to_arg(d->alloc_tctx, &b->alloc_tctx_arg) ||
		 to_arg(d->free_ptr, &b->free_ptr_arg) ||
		 to_arg(d->free_usize, &b->free_usize_arg) ||
		 to_arg(info ? d->free_info : -1, &b->free_info_arg) ||
		 to_arg(info ? -1 : d->free_tctx, &b->free_tctx_arg))
		missing = "the sampling functions' parameters in registers";
	else if (to_off(d->tctx_gctx, &b->tctx_gctx_off) || to_off(d->gctx_bt, &b->gctx_bt_off) ||
		 to_off(d->bt_vec, &b->bt_vec_off) || to_off(d->bt_len, &b->bt_len_off))
		missing = "prof_tctx_t.gctx, prof_gctx_t.bt and prof_bt_t's vec and len";
	else if (info && (to_off(d->info_tctx, &b->info_tctx_off) ||
			  to_off(d->info_size, &b->info_size_off)))
		missing = "prof_info_t.alloc_tctx and alloc_size";
	if (missing)
		return hb_fail(why, len, -EPROTO, "its debug info does not describe %s", missing);
	b->info_has_time = info && !to_off(d->info_time, &b->info_time_off);
	/* the live-heap walker's tables, where the DWARF describes them all */
	if (layout_dwarf_heap(d, &out->heap))
		memset(&out->heap, 0, sizeof(out->heap));
	/* 5.2.x: the tctx goes to the free hook, and prof.active switched on late is broken */
	out->late_active_bug = !info;
	out->activity_fn = info ? NULL : "malloc_default";
	/* 5.3.1's shape (the free hook gets the pointer and a prof_info_t): prof_bt_max */
	out->bt_max_opt = info && d->free_ptr >= 0;
	/* the live-heap walker's tables where the DWARF describes them all; else it refuses */
	if (layout_dwarf_heap(d, &out->heap))
		memset(&out->heap, 0, sizeof(out->heap));
	return 0;
}
