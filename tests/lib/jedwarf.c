// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "jedwarf.h"

struct jemalloc_dwarf hb_dwarf_530(void)
{
	return (struct jemalloc_dwarf){
		.tctx_gctx = 96,
		.gctx_bt = 104,
		.bt_vec = 0,
		.bt_len = 8,
		.info_time = 0,
		.info_tctx = 8,
		.info_size = 16,
		.alloc_ptr = 1,
		.alloc_size = 2,
		.alloc_usize = 3,
		.alloc_tctx = 4,
		.free_ptr = -1,
		.free_usize = 1,
		.free_info = 2,
		.free_tctx = -1,
		.have_alloc_fn = true,
		.have_free_fn = true,
		.have_nstime = true,
	};
}
