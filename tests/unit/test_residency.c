// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The kernel's view (user/heap/residency.c) on this process's own memory:
 * pages written are counted, pages never touched are not, and pages only
 * read (the kernel maps its zero page there) are not either, when page
 * frame numbers are given (root).
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "heap/jestats.h"
#include "heap/residency.h"

#define PAGES 16

Test(residency, written_pages_count_read_and_untouched_ones_do_not)
{
	long page = sysconf(_SC_PAGESIZE);
	volatile char *m = mmap(NULL, PAGES * page, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct pagemap *pm;
	uint64_t present, swapped;
	bool here[PAGES];
	char sink = 0;

	cr_assert_neq((void *)m, MAP_FAILED);
	/* 5 written, 4 read only, 7 untouched */
	for (int i = 0; i < 5; i++)
		m[i * page] = 1;
	for (int i = 5; i < 9; i++)
		sink ^= m[i * page];
	(void)sink;
	cr_assert_eq(residency_pagemap_open(getpid(), &pm), 0);
	cr_assert_eq(residency_pagemap_count(pm, (uint64_t)(uintptr_t)m, PAGES * page, &present,
					     &swapped),
		     0);
	if (geteuid() == 0)
		cr_assert_eq(present, 5, "%lu pages counted", (unsigned long)present);
	else
		cr_assert(present >= 5 && present <= 9, "%lu pages counted",
			  (unsigned long)present);
	cr_assert_eq(swapped, 0);
	cr_assert_eq(residency_pagemap_present(pm, (uint64_t)(uintptr_t)m, PAGES, here), 0);
	for (int i = 0; i < PAGES; i++)
		cr_assert_eq(here[i], i < 5 || (geteuid() && i < 9 && here[i]), "page %d", i);
	residency_pagemap_close(pm);
	munmap((void *)m, PAGES * page);
}

Test(residency, the_process_totals_and_mappings)
{
	struct proc_memory mem;
	struct vmas v;
	uint64_t anon = 0;

	cr_assert_eq(residency_vmas(getpid(), &v), 0);
	cr_assert_eq(residency_memory(getpid(), &v, &mem), 0);
	cr_assert_gt(mem.rss, 0);
	cr_assert_gt(mem.anon, 0);
	cr_assert_leq(mem.anon, mem.rss);
	cr_assert_gt(v.n, 3);
	for (size_t i = 0; i < v.n; i++) {
		cr_assert_lt(v.v[i].start, v.v[i].end);
		if (i)
			cr_assert_geq(v.v[i].start, v.v[i - 1].end, "mappings in address order");
		anon += v.v[i].anon;
	}
	cr_assert_gt(anon, 0);
	residency_vmas_free(&v);
}

/* Which release numbers have a layout: the number, then the end or a '-'. */
Test(residency, jemalloc_layouts_by_release)
{
	cr_assert_str_eq(
		jestats_layout_for("5.3.0-0-g54eaed1d8b56b1aa528be3bdd1877e59c56fa90c")->version,
		"5.3.0");
	cr_assert_str_eq(jestats_layout_for("5.3.0-0-g0")->version, "5.3.0");
	cr_assert(jestats_layout_for("5.2.1-0-gea6b3e973b477b8061e0076bb257dbd7f3faa756")->v521);
	cr_assert_str_eq(jestats_layout_for("5.3.1")->version, "5.3.1");
	cr_assert_null(jestats_layout_for("5.3.10-0-g0"));
	cr_assert_null(jestats_layout_for("5.1.0-0-g0"));
	cr_assert_null(jestats_layout_for(""));
}
