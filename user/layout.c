// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <string.h>

#include "layout.h"

#define NONE HEAPBPF_ARG_NONE

static const struct jemalloc_layout layouts[] = {
	{
		/*
		 * 5.3.0: prof_malloc_sample_object(tsd, ptr, size, usize, tctx),
		 * prof_free_sampled_object(tsd, usize, prof_info_t *info).
		 * tctx->gctx @96, gctx->bt @104 (verified on Debian's 5.3.0,
		 * see DESIGN.md); prof_info_t {alloc_time @0, alloc_tctx @8,
		 * alloc_size @16} in a release build.
		 */
		.name = "5.3.0",
		.version_prefix = "5.3.0-",
		.active_sym = "prof_active_state",
		.bpf = {
			.alloc_ptr_arg = 1,
			.alloc_size_arg = 2,
			.alloc_usize_arg = 3,
			.alloc_tctx_arg = 4,
			.free_ptr_arg = NONE,
			.free_usize_arg = 1,
			.free_info_arg = 2,
			.free_tctx_arg = NONE,
			.tctx_gctx_off = 96,
			.gctx_bt_off = 104,
			.bt_vec_off = 0,
			.bt_len_off = 8,
			.info_time_off = 0,
			.info_tctx_off = 8,
			.info_size_off = 16,
			.info_has_time = 1,
		},
	},
};

const struct jemalloc_layout *jemalloc_layout_find(const char *version)
{
	for (size_t i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++) {
		const char *p = layouts[i].version_prefix;

		if (strncmp(version, p, strlen(p)) == 0)
			return &layouts[i];
	}
	return NULL;
}

const struct jemalloc_layout *jemalloc_layout_by_name(const char *name)
{
	for (size_t i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++) {
		if (strcmp(layouts[i].name, name) == 0)
			return &layouts[i];
	}
	return NULL;
}

const char *jemalloc_layout_names(void)
{
	return "5.3.0";
}
