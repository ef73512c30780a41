/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A parser for jemalloc's own heap profile dumps (mallctl "prof.dump", the
 * "heap_v2/<sample period>" text format of jemalloc 5.x), so that tests can
 * compare what heapbpf saw with what jemalloc itself recorded.
 *
 * The format, as jemalloc 5.3.0 writes it:
 *
 *   heap_v2/524288
 *     t*: 43: 43107200 [6505: 14868642928]        totals
 *     t0: 1: 40960 [1: 40960]                      per thread[, " name"]
 *   @ 0x55aa5381d890 0x55aa5381df81 ...            one sampled stack, leaf first
 *     t*: 2: 2816 [2: 2816]                        its totals
 *     t2: 2: 2816 [2: 2816]                        its per-thread counts
 *   ...
 *   (empty line)
 *   MAPPED_LIBRARIES:
 *   (a copy of /proc/PID/maps)
 *
 * Counts are "curobjs: curbytes [accumobjs: accumbytes]"; the bracketed pair
 * is "[0: 0]" unless jemalloc runs with prof_accum:true. With prof_unbias:false
 * they are the raw counts of the sampled objects, and the header's "t*:" is
 * the sum of the stacks'. With prof_unbias:true (the 5.3.0 default) every
 * line is an estimate of the unsampled heap, computed from that line's own
 * sums, so stacks neither add up to the header nor compare to sample counts:
 * run jemalloc with prof_unbias:false to compare.
 */
#ifndef __HEAPBPF_JEDUMP_H
#define __HEAPBPF_JEDUMP_H

#include <stddef.h>
#include <stdint.h>

struct jedump_stack {
	uint64_t *frames; /* as printed after '@', leaf first; NULL when nframes is 0 */
	size_t nframes;
	/* from the stack's "t*:" line */
	uint64_t curobjs, curbytes, accumobjs, accumbytes;
};

/* One line of the MAPPED_LIBRARIES section. */
struct jedump_map {
	uint64_t start, end, offset;
	char perms[5]; /* e.g. "r-xp" */
	char *path;    /* verbatim, e.g. "[stack]"; "" for anonymous, never NULL */
};

struct jedump {
	uint64_t sample_period; /* the N of "heap_v2/N": 2^lg_prof_sample */
	struct jedump_stack *stacks;
	size_t nstacks;
	/* from the header's "t*:" line */
	uint64_t total_curobjs, total_curbytes, total_accumobjs, total_accumbytes;
	struct jedump_map *maps; /* empty when the dump has no MAPPED_LIBRARIES */
	size_t nmaps;
};

/*
 * Parses a dump file. Returns 0 and sets *out (free with jedump__free()), or
 * a negative errno with *out set to NULL: -EINVAL for malformed input,
 * -ENOMEM, or the error of opening or reading the file.
 */
int jedump_parse_file(const char *path, struct jedump **out);

/* Same, for a dump already in memory; text need not be NUL-terminated. */
int jedump_parse(const char *text, size_t len, struct jedump **out);

/* NULL is fine. */
void jedump__free(struct jedump *d);

/* The mapping that holds addr, or NULL. */
const struct jedump_map *jedump_find_map(const struct jedump *d, uint64_t addr);

#endif /* __HEAPBPF_JEDUMP_H */
