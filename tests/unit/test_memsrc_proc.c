// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The live process as a memory image (user/heap/memsrc_proc.c), read from the
 * test's own process: reads equal the memory, across the cache's runs and
 * past them; what a read kept is served until fresh(), and after it the
 * memory as it is now; a read past the end of a mapping fails as
 * process_vm_readv does.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "run/liveheap.h"

#define PAGES 40 /* more than two of the cache's runs */

static uint8_t *map_pages(size_t pages)
{
	long pg = sysconf(_SC_PAGESIZE);
	void *p = mmap(NULL, pages * (size_t)pg, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	cr_assert_neq(p, MAP_FAILED);
	for (size_t i = 0; i < pages * (size_t)pg; i++)
		((uint8_t *)p)[i] = (uint8_t)(i * 7 + i / 251);
	return p;
}

static void open_self(struct mem_source *m)
{
	char err[256];

	cr_assert_eq(memsrc_proc_open(getpid(), m, err, sizeof(err)), 0, "%s", err);
}

Test(memsrc_proc, reads_equal_the_memory_across_runs)
{
	size_t len = PAGES * (size_t)sysconf(_SC_PAGESIZE);
	uint8_t *mem = map_pages(PAGES), buf[8192];
	struct mem_source m;

	open_self(&m);
	/* small reads at every offset class, some across a page or run boundary */
	for (size_t off = 0; off + 600 <= len; off += 4093) {
		size_t n = 1 + off % 600;

		cr_assert(memsrc_mapped(&m, (uint64_t)(uintptr_t)(mem + off), n));
		cr_assert_eq(memsrc_read(&m, (uint64_t)(uintptr_t)(mem + off), buf, n), 0);
		cr_assert_eq(memcmp(buf, mem + off, n), 0, "at offset %zu", off);
	}
	/* a large read goes straight to the process */
	cr_assert_eq(memsrc_read(&m, (uint64_t)(uintptr_t)(mem + 100), buf, sizeof(buf)), 0);
	cr_assert_eq(memcmp(buf, mem + 100, sizeof(buf)), 0);
	memsrc_proc_close(&m);
	munmap(mem, len);
}

Test(memsrc_proc, kept_until_fresh)
{
	size_t len = PAGES * (size_t)sysconf(_SC_PAGESIZE);
	uint8_t *mem = map_pages(PAGES);
	uint64_t v = 1, got = 0, addr = (uint64_t)(uintptr_t)(mem + 4096 + 64);
	struct mem_source m;

	open_self(&m);
	memcpy(mem + 4096 + 64, &v, 8);
	cr_assert_eq(memsrc_read(&m, addr, &got, 8), 0);
	cr_assert_eq(got, 1);
	v = 2;
	memcpy(mem + 4096 + 64, &v, 8);
	/* served from the run read before: the value it held then */
	cr_assert_eq(memsrc_read(&m, addr, &got, 8), 0);
	cr_assert_eq(got, 1);
	memsrc_fresh(&m);
	cr_assert_eq(memsrc_read(&m, addr, &got, 8), 0);
	cr_assert_eq(got, 2);
	memsrc_proc_close(&m);
	munmap(mem, len);
}

Test(memsrc_proc, a_read_past_the_mapping_fails)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	uint8_t *mem = map_pages(2), buf[64];
	struct mem_source m;

	/* the second page gone: the run of the first ends at the mapping */
	cr_assert_eq(munmap(mem + pg, pg), 0);
	open_self(&m);
	cr_assert_eq(memsrc_read(&m, (uint64_t)(uintptr_t)(mem + pg - 64), buf, 64), 0);
	cr_assert_eq(memcmp(buf, mem + pg - 64, 64), 0);
	cr_assert_eq(memsrc_read(&m, (uint64_t)(uintptr_t)(mem + pg - 32), buf, 64), -EFAULT);
	cr_assert(!memsrc_mapped(&m, (uint64_t)(uintptr_t)(mem + pg - 32), 64));
	memsrc_proc_close(&m);
	munmap(mem, pg);
}
