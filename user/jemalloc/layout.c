// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "jemalloc/layout.h"

#define NONE HEAPBPF_ARG_NONE

/*
 * What every 5.3.x shares: prof_malloc_sample_object(tsd, ptr, size, usize,
 * tctx); prof_cnt_t has 8 counters, so tctx->gctx @96 and gctx->bt @104;
 * prof_info_t {alloc_time @0, alloc_tctx @8, alloc_size @16}. The free
 * hook's arguments differ by version.
 */
#define LAYOUT_5_3                                                                                 \
	.alloc_ptr_arg = 1, .alloc_size_arg = 2, .alloc_usize_arg = 3, .alloc_tctx_arg = 4,        \
	.free_tctx_arg = NONE, .tctx_gctx_off = 96, .gctx_bt_off = 104, .bt_vec_off = 0,           \
	.bt_len_off = 8, .info_time_off = 0, .info_tctx_off = 8, .info_size_off = 16,              \
	.info_has_time = 1

/*
 * The heap tables (layout.h, struct jemalloc_heap_layout), measured with gdb
 * ptype /o on the fixtures' DWARF (5.3.0 static and debug, 5.2.1): ckh_t
 * {prng_state, count @8, lg_minbuckets, lg_curbuckets @20, hash, keycomp,
 * tab @40}, 16-byte cells, 4 cells a bucket; gctx->tctxs @16; tctx->tdata
 * @0, thr_uid @8, thr_discrim @16. Debug builds change none of them.
 * tdata->expired is per version: @33 up to 5.3.0, @118 in 5.3.1, whose
 * prof_tdata_t has its thread name inline and its bools after it (measured
 * on the 5.3.1 fixtures' DWARF).
 */
#define HEAP_COMMON                                                                                \
	.ckh_count = 8, .ckh_lg_curbuckets = 20, .ckh_tab = 40, .ckhc_size = 16, .ckhc_key = 0,    \
	.ckhc_data = 8, .lg_bucket_cells = 2, .gctx_tctxs = 16, .tctx_tdata = 0,                   \
	.tctx_thr_uid = 8, .tctx_thr_discrim = 16, .rbn_left = 0, .rbn_right_red = 8,              \
	.lg_tiny_min = 3

/* 5.3.x: prof_cnt_t of 8 counters @32, tctx_uid @104, tctx_link @112, state @132 */
#define HEAP_5_3                                                                                   \
	HEAP_COMMON, .tctx_cnts = 32, .tctx_uid = 104, .tctx_link = 112, .tctx_state = 132,        \
		     .cnt_size = 64, .cnt_curobjs = 0, .cnt_curbytes = 16, .cnt_accumobjs = 32,    \
		     .cnt_accumbytes = 48, .has_unbiased = true, .cnt_curobjs_su = 8,              \
		     .cnt_curbytes_u = 24, .cnt_accumobjs_su = 40, .cnt_accumbytes_u = 56

/*
 * x86-64, release builds. Every offset below was read from the DWARF of a
 * -g build of that version (gdb ptype /o) and is checked against the
 * target's own DWARF whenever it has some (layout_dwarf.c). docs/jemalloc.md
 * explains each entry.
 */
static const struct jemalloc_layout layouts[] = {
	{
		/*
		 * 5.2.1: prof_malloc_sample_object(tsdn, ptr, usize, tctx),
		 * prof_free_sampled_object(tsd, ptr, usize, tctx): no
		 * prof_info_t. prof_cnt_t has 4 counters: tctx->gctx @56,
		 * gctx->bt @72. The flag is still called prof_active.
		 */
		.name = "5.2.1",
		.version_prefix = "5.2.1-",
		.release = "5.2.1-0-gea6b3e973b477b8061e0076bb257dbd7f3faa756",
		.active_sym = "prof_active",
		.debug_info_shift = 0, /* 5.2.1's nstime_t has no magic */
		.late_active_bug = true,
		.activity_fn = "malloc_default",
		.bpf = {
			.alloc_ptr_arg = 1,
			.alloc_size_arg = NONE,
			.alloc_usize_arg = 2,
			.alloc_tctx_arg = 3,
			.free_ptr_arg = 1,
			.free_usize_arg = 2,
			.free_info_arg = NONE,
			.free_tctx_arg = 3,
			.tctx_gctx_off = 56,
			.gctx_bt_off = 72,
			.bt_vec_off = 0,
			.bt_len_off = 8,
			.info_time_off = 0,
			.info_tctx_off = 0,
			.info_size_off = 0,
			.info_has_time = 0,
		},
		/* prof_cnt_t of 4 counters @24, tctx_uid @64, tctx_link @72, state @92 */
		.heap = { HEAP_COMMON, .tdata_expired = 33, .tctx_cnts = 24, .tctx_uid = 64, .tctx_link = 72,
			  .tctx_state = 92, .cnt_size = 32, .cnt_curobjs = 0, .cnt_curbytes = 8,
			  .cnt_accumobjs = 16, .cnt_accumbytes = 24 },
	},
	{
		/*
		 * 5.3.0: prof_malloc_sample_object(tsd, ptr, size, usize, tctx),
		 * prof_free_sampled_object(tsd, usize, prof_info_t *info).
		 */
		.name = "5.3.0",
		.version_prefix = "5.3.0-",
		.release = "5.3.0-0-g54eaed1d8b56b1aa528be3bdd1877e59c56fa90c",
		.active_sym = "prof_active_state",
		.debug_info_shift = 8,
		.bpf = {
			LAYOUT_5_3,
			.free_ptr_arg = NONE,
			.free_usize_arg = 1,
			.free_info_arg = 2,
		},
		.heap = { HEAP_5_3, .tdata_expired = 33 },
	},
	{
		/*
		 * 5.3.1 (checked on builds of Debian sid's source package):
		 * the structs of 5.3.0 but prof_tdata_t; the free hook gets the
		 * pointer back: prof_free_sampled_object(tsd, ptr, usize,
		 * info); the backtrace depth is opt.prof_bt_max.
		 */
		.name = "5.3.1",
		.version_prefix = "5.3.1-",
		.release = "5.3.1-0-g81034ce1f1373e37dc865038e1bc8eeecf559ce8",
		.active_sym = "prof_active_state",
		.debug_info_shift = 8,
		.bt_max_opt = true,
		.bpf = {
			LAYOUT_5_3,
			.free_ptr_arg = 1,
			.free_usize_arg = 2,
			.free_info_arg = 3,
		},
		.heap = { HEAP_5_3, .tdata_expired = 118 },
	},
};

#define NLAYOUTS (sizeof(layouts) / sizeof(layouts[0]))

const struct jemalloc_layout *jemalloc_layout_find(const char *version)
{
	for (size_t i = 0; i < NLAYOUTS; i++) {
		const char *p = layouts[i].version_prefix;

		if (strncmp(version, p, strlen(p)) == 0)
			return &layouts[i];
	}
	return NULL;
}

static size_t digits(const char *s)
{
	size_t n = 0;

	while (s[n] >= '0' && s[n] <= '9')
		n++;
	return n;
}

int jemalloc_layout_version_number(const char *version, char *num, size_t len)
{
	const char *p = version;
	size_t n, hex = 0;

	/* X.Y.Z */
	for (int group = 0; group < 3; group++) {
		n = digits(p);
		if (!n || (group < 2 && p[n] != '.'))
			return -EINVAL;
		p += n + (group < 2);
	}
	if ((size_t)(p - version) >= len)
		return -EINVAL;
	memcpy(num, version, p - version);
	num[p - version] = '\0';
	/* -N-g<hex>: commits since the tag, abbreviated commit id (Redis: "0") */
	if (*p++ != '-' || !(n = digits(p)) || p[n] != '-' || p[n + 1] != 'g')
		return -EINVAL;
	p += n + 2;
	while ((p[hex] >= '0' && p[hex] <= '9') || (p[hex] >= 'a' && p[hex] <= 'f'))
		hex++;
	return hex >= 1 && hex <= 40 && !p[hex] ? 0 : -EINVAL;
}

const struct jemalloc_layout *jemalloc_layout_match(const char *version, enum jemalloc_match *how)
{
	const struct jemalloc_layout *l;
	char num[32];

	*how = JEMALLOC_MATCH_NONE;
	if (jemalloc_layout_version_number(version, num, sizeof(num)))
		return NULL;
	l = jemalloc_layout_by_name(num);
	if (l)
		*how = l->release && strcmp(version, l->release) == 0 ? JEMALLOC_MATCH_EXACT
								      : JEMALLOC_MATCH_NUMBER;
	return l;
}

const struct jemalloc_layout *jemalloc_layout_by_name(const char *name)
{
	for (size_t i = 0; i < NLAYOUTS; i++) {
		if (strcmp(layouts[i].name, name) == 0)
			return &layouts[i];
	}
	return NULL;
}

const char *jemalloc_layout_names(void)
{
	/* a cache of a constant (the table's names), built on first use */
	static char names[128];

	if (!names[0]) {
		size_t n = 0;

		for (size_t i = 0; i < NLAYOUTS; i++)
			n += snprintf(names + n, sizeof(names) - n, "%s%s", i ? ", " : "",
				      layouts[i].name);
	}
	return names;
}

void jemalloc_layout_debug(const struct jemalloc_layout *l, struct jemalloc_layout *out)
{
	*out = *l;
	/* alloc_time comes first: only what follows it moves */
	if (out->bpf.info_tctx_off > out->bpf.info_time_off)
		out->bpf.info_tctx_off += l->debug_info_shift;
	if (out->bpf.info_size_off > out->bpf.info_time_off)
		out->bpf.info_size_off += l->debug_info_shift;
}
