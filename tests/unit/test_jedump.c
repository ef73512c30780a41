// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Unit tests of the jemalloc heap dump parser, on dumps written by Debian's
 * jemalloc 5.3.0 for build/examples/alloc-service-static (shortened: fewer
 * stacks, threads and mappings, so totals do not add up; the parser does
 * not check that they do).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "jedump.h"

/* MALLOC_CONF=prof:true,prof_active:true,prof_accum:true,prof_unbias:false */
static const char accum_dump[] =
	"heap_v2/524288\n"
	"  t*: 43: 43107200 [6505: 14868642928]\n"
	"  t0: 1: 40960 [1: 40960]\n"
	"  t1: 9: 12204928 [1503: 3374303280]\n"
	"  t2: 15: 8418816 [1661: 3774881968]\n"
	"@ 0x55aa5381d890 0x55aa5381df81 0x55aa53811154 0x55aa537a2739 0x55aa53796ae2 "
	"0x55aa53796e5e 0x55aa53797065 0x7f08f15c31f5 0x7f08f16438ec\n"
	"  t*: 1: 256 [67: 23984]\n"
	"  t1: 0: 0 [12: 4112]\n"
	"  t2: 0: 0 [21: 8368]\n"
	"@ 0x55aa5381d890 0x55aa5381df81 0x55aa53811154 0x55aa537a2739 0x55aa53796bf3 "
	"0x55aa53796fbd 0x7f08f15c31f5 0x7f08f16438ec\n"
	"  t*: 16: 42991616 [5833: 14866841600]\n"
	"  t1: 4: 12189696 [1360: 3373924352]\n"
	"  t2: 4: 8388608 [1463: 3774349312]\n"
	"@ 0x55aa5381d890 0x55aa5381df81 0x55aa53811154 0x55aa537a5b75 0x55aa53796e1f "
	"0x55aa53797065 0x7f08f15c31f5 0x7f08f16438ec\n"
	"  t*: 0: 0 [6: 960]\n"
	"  t1: 0: 0 [1: 160]\n"
	"  t2: 0: 0 [2: 320]\n"
	"\n"
	"MAPPED_LIBRARIES:\n"
	"55aa53780000-55aa53788000 r--p 00000000 fe:00 5308518                    "
	"/work/main/build/examples/alloc-service-static\n"
	"55aa53788000-55aa5382e000 r-xp 00008000 fe:00 5308518                    "
	"/work/main/build/examples/alloc-service-static\n"
	"55aa5384d000-55aa53a6c000 rw-p 00000000 00:00 0 \n"
	"7f08f1560000-7f08f16b6000 r-xp 00026000 fe:00 332835                     "
	"/usr/lib/x86_64-linux-gnu/libc.so.6\n"
	"7f08f182f000-7f08f1831000 r-xp 00000000 00:00 0                          [vdso]\n"
	"7ffc9e9dc000-7ffc9e9fd000 rw-p 00000000 00:00 0                          [stack]\n"
	"ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]\n";

/*
 * MALLOC_CONF=prof:true,prof_active:false, then "active 1": no accumulation,
 * and unbiased (estimated) counts, hence stacks that do not add up to t*.
 */
static const char noaccum_dump[] =
	"heap_v2/524288\n"
	"  t*: 95: 616315 [0: 0]\n"
	"  t0: 0: 0 [0: 0]\n"
	"  t3: 30: 202952 [0: 0]\n"
	"@ 0x56439934b890 0x56439934bf81 0x56439933f154 0x5643992d0739 0x5643992c4ce5 "
	"0x5643992c5045 0x7f9504c661f5 0x7f9504ce68ec\n"
	"  t*: 17: 43216 [0: 0]\n"
	"  t3: 7: 20573 [0: 0]\n"
	"\n"
	"MAPPED_LIBRARIES:\n"
	"5643992b6000-56439935c000 r-xp 00008000 fe:00 5308518                    "
	"/work/main/build/examples/alloc-service-static\n";

static struct jedump *parse_str(const char *text, int *err)
{
	struct jedump *d = (struct jedump *)1;

	*err = jedump_parse(text, strlen(text), &d);
	return d;
}

/* Writes text to a fresh temporary file; the caller unlinks and frees the path. */
static char *write_temp(const char *text, size_t len)
{
	char *path = strdup("/tmp/heapbpf-jedump-XXXXXX");
	int fd;

	cr_assert_not_null(path);
	fd = mkstemp(path);
	cr_assert_geq(fd, 0, "mkstemp: %s", strerror(errno));
	cr_assert_eq(write(fd, text, len), (ssize_t)len);
	close(fd);
	return path;
}

Test(jedump, accum_dump_from_file)
{
	char *path = write_temp(accum_dump, strlen(accum_dump));
	struct jedump *d;
	int err;

	err = jedump_parse_file(path, &d);
	unlink(path);
	free(path);
	cr_assert_eq(err, 0, "err %d", err);
	cr_assert_not_null(d);

	cr_expect_eq(d->sample_period, 524288);
	cr_expect_eq(d->total_curobjs, 43);
	cr_expect_eq(d->total_curbytes, 43107200);
	cr_expect_eq(d->total_accumobjs, 6505);
	cr_expect_eq(d->total_accumbytes, 14868642928ULL);

	cr_assert_eq(d->nstacks, 3);
	cr_expect_eq(d->stacks[0].nframes, 9);
	cr_expect_eq(d->stacks[0].frames[0], 0x55aa5381d890ULL, "leaf first");
	cr_expect_eq(d->stacks[0].frames[4], 0x55aa53796ae2ULL);
	cr_expect_eq(d->stacks[0].frames[8], 0x7f08f16438ecULL);
	cr_expect_eq(d->stacks[0].curobjs, 1);
	cr_expect_eq(d->stacks[0].curbytes, 256);
	cr_expect_eq(d->stacks[0].accumobjs, 67);
	cr_expect_eq(d->stacks[0].accumbytes, 23984);
	cr_expect_eq(d->stacks[1].nframes, 8);
	cr_expect_eq(d->stacks[1].curobjs, 16);
	cr_expect_eq(d->stacks[1].curbytes, 42991616);
	cr_expect_eq(d->stacks[1].accumbytes, 14866841600ULL);
	cr_expect_eq(d->stacks[2].curobjs, 0, "freed since, kept by prof_accum");
	cr_expect_eq(d->stacks[2].accumobjs, 6);

	cr_assert_eq(d->nmaps, 7);
	cr_expect_eq(d->maps[0].start, 0x55aa53780000ULL);
	cr_expect_eq(d->maps[0].end, 0x55aa53788000ULL);
	cr_expect_eq(d->maps[0].offset, 0);
	cr_expect_str_eq(d->maps[0].perms, "r--p");
	cr_expect_str_eq(d->maps[0].path, "/work/main/build/examples/alloc-service-static");
	cr_expect_eq(d->maps[1].offset, 0x8000);
	cr_expect_str_eq(d->maps[1].perms, "r-xp");
	cr_expect_str_eq(d->maps[2].path, "", "anonymous");
	cr_expect_str_eq(d->maps[3].path, "/usr/lib/x86_64-linux-gnu/libc.so.6");
	cr_expect_eq(d->maps[3].offset, 0x26000);
	cr_expect_str_eq(d->maps[5].path, "[stack]");
	cr_expect_eq(d->maps[6].start, 0xffffffffff600000ULL);
	cr_expect_str_eq(d->maps[6].perms, "--xp");
	cr_expect_str_eq(d->maps[6].path, "[vsyscall]");

	jedump__free(d);
}

Test(jedump, noaccum_dump)
{
	struct jedump *d;
	int err;

	d = parse_str(noaccum_dump, &err);
	cr_assert_eq(err, 0, "err %d", err);
	cr_expect_eq(d->total_curobjs, 95);
	cr_expect_eq(d->total_curbytes, 616315);
	cr_expect_eq(d->total_accumobjs, 0);
	cr_expect_eq(d->total_accumbytes, 0);
	cr_assert_eq(d->nstacks, 1);
	cr_expect_eq(d->stacks[0].nframes, 8);
	cr_expect_eq(d->stacks[0].frames[4], 0x5643992c4ce5ULL);
	cr_expect_eq(d->stacks[0].curobjs, 17);
	cr_expect_eq(d->stacks[0].curbytes, 43216);
	cr_expect_eq(d->stacks[0].accumobjs, 0);
	cr_expect_eq(d->stacks[0].accumbytes, 0);
	cr_assert_eq(d->nmaps, 1);
	jedump__free(d);
}

Test(jedump, find_map)
{
	struct jedump *d;
	int err;

	d = parse_str(accum_dump, &err);
	cr_assert_eq(err, 0);
	cr_expect_eq(jedump_find_map(d, d->stacks[0].frames[4]), &d->maps[1]);
	cr_expect_eq(jedump_find_map(d, 0x55aa53788000ULL), &d->maps[1], "start is inside");
	cr_expect_eq(jedump_find_map(d, 0x55aa53780000ULL - 1), NULL);
	cr_expect_eq(jedump_find_map(d, 0x55aa5382e000ULL), NULL, "end is outside");
	jedump__free(d);
}

/* What jemalloc can also write: no maps, a thread name, a stack it could not unwind. */
Test(jedump, edge_cases)
{
	static const char text[] = "heap_v2/1\n"
				   "  t*: 1: 16 [0: 0]\n"
				   "  t7: 1: 16 [0: 0] worker thread\n"
				   "@\n"
				   "  t*: 1: 16 [0: 0]\n"
				   "  t7: 1: 16 [0: 0]";
	struct jedump *d;
	int err;

	d = parse_str(text, &err);
	cr_assert_eq(err, 0, "err %d", err);
	cr_expect_eq(d->sample_period, 1);
	cr_assert_eq(d->nstacks, 1);
	cr_expect_eq(d->stacks[0].nframes, 0);
	cr_expect_null(d->stacks[0].frames);
	cr_expect_eq(d->stacks[0].curbytes, 16);
	cr_expect_eq(d->nmaps, 0);
	cr_expect_null(jedump_find_map(d, 0));
	jedump__free(d);
}

Test(jedump, malformed)
{
	static const char *const bad[] = {
		"",
		"\n",
		"heap_v1/524288\n  t*: 0: 0 [0: 0]\n",
		"heap_v2/0\n  t*: 0: 0 [0: 0]\n",
		"heap_v2/\n  t*: 0: 0 [0: 0]\n",
		"heap_v2/524288\n",
		"heap_v2/524288\n  t0: 0: 0 [0: 0]\n",
		"heap_v2/524288\n  t*: 0: 0\n",
		"heap_v2/524288\n  t*: 0: 0 [0: 0\n",
		"heap_v2/524288\n  t*: -1: 0 [0: 0]\n",
		"heap_v2/524288\n  t*: 18446744073709551616: 0 [0: 0]\n",
		"heap_v2/524288\n  t*: 0: 0 [0: 0] junk\n",
		"heap_v2/524288\n  t*: 0: 0 [0: 0]\n@ 0x1 0x2\n",
		"heap_v2/524288\n  t*: 0: 0 [0: 0]\n@ 0x1 0xzz\n  t*: 0: 0 [0: 0]\n",
		"heap_v2/524288\n  t*: 0: 0 [0: 0]\n@ 0x1 0x12g\n  t*: 0: 0 [0: 0]\n",
		"heap_v2/524288\n  t*: 0: 0 [0: 0]\n@ 0x10000000000000000\n  t*: 0: 0 [0: 0]\n",
		"heap_v2/524288\n  t*: 0: 0 [0: 0]\n@0x1\n  t*: 0: 0 [0: 0]\n",
		"heap_v2/524288\n  t*: 0: 0 [0: 0]\n@ 0x1\n  t1: 0: 0 [0: 0]\n",
		"heap_v2/524288\n  t*: 0: 0 [0: 0]\n@ 0x1\n  t*: 0: 0 [0: 0]\n  t*: 0: 0 [0: 0]\n",
		"heap_v2/524288\n  t*: 0: 0 [0: 0]\nsomething else\n",
		"heap_v2/524288\n  t*: 0: 0 [0: 0]\n\nMAPPED_LIBRARIES: x\n",
		"heap_v2/524288\n  t*: 0: 0 [0: 0]\n\nMAPPED_LIBRARIES:\n\n",
		"heap_v2/524288\n  t*: 0: 0 [0: 0]\n\nMAPPED_LIBRARIES:\nnot a mapping\n",
		"heap_v2/524288\n  t*: 0: 0 [0: 0]\n\nMAPPED_LIBRARIES:\n2000-1000 r-xp 0 fe:00 1 /x\n",
		"heap_v2/524288\n  t*: 0: 0 [0: 0]\n\nMAPPED_LIBRARIES:\n1000-2000 r-x 0 fe:00 1 /x\n",
		"heap_v2/524288\n  t*: 0: 0 [0: 0]\n\nMAPPED_LIBRARIES:\n1000-2000 r-xp 0 fe00 1 /x\n",
	};
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct jedump *d;
		int err;

		d = parse_str(bad[i], &err);
		cr_expect_eq(err, -EINVAL, "bad[%zu]: err %d", i, err);
		cr_expect_null(d, "bad[%zu]", i);
		jedump__free(d);
	}
}

Test(jedump, embedded_nul)
{
	static const char text[] = "heap_v2/524288\n  t*: 0: 0 [0: 0]\n\0";
	struct jedump *d = NULL;

	cr_expect_eq(jedump_parse(text, sizeof(text) - 1, &d), -EINVAL);
	cr_expect_null(d);
}

/*
 * A dump cut anywhere, as when the writer died, must come back as a clean
 * result or -EINVAL. Cuts inside a number or a path can still parse (as a
 * smaller number, a shorter path): the format has no end marker.
 */
Test(jedump, every_truncation)
{
	size_t len, full = strlen(accum_dump), nok = 0;

	for (len = 0; len < full; len++) {
		struct jedump *d;
		int err = jedump_parse(accum_dump, len, &d);

		cr_assert(err == 0 || err == -EINVAL, "len %zu: err %d", len, err);
		cr_assert((err == 0) == (d != NULL), "len %zu", len);
		nok += !err;
		jedump__free(d);
	}
	cr_expect_gt(nok, 0);
}

Test(jedump, missing_file)
{
	struct jedump *d = (struct jedump *)1;

	cr_expect_eq(jedump_parse_file("/nonexistent/heapbpf.heap", &d), -ENOENT);
	cr_expect_null(d);
}
