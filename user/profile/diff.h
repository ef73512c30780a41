/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * heapbpf diff BASE NEW: what changed between two heap profiles. Stacks are
 * matched by the function and source file of every frame (addresses and
 * build-ids may differ: a rebuilt binary still matches). The result is a
 * differential profile in pprof's -diff_base convention: NEW's samples as
 * they are, BASE's negated and labelled pprof::base=true, so that pprof and
 * the folded writer net them per stack.
 */
#ifndef __HEAPBPF_DIFF_H
#define __HEAPBPF_DIFF_H

#include <stddef.h>
#include <stdint.h>

#include "util/profile.h"

/* One stack's totals on each side; the diff profile's samples come from these. */
struct diff_stack {
	uint32_t *locs; /* into the diff profile's locations, leaf first */
	uint32_t nlocs;
	uint32_t site; /* locs[site] names it, past allocator wrappers (diff_wrappers()) */
	int64_t pid;
	int64_t base[HB_NVALUES], new[HB_NVALUES];
};

struct diff {
	struct hb_profile *p; /* the differential profile */
	struct diff_stack *stacks;
	size_t nstacks;
	int64_t base_total[HB_NVALUES], new_total[HB_NVALUES];
};

/* What one profile may take converted for a diff (its stacks and names). */
#define DIFF_MEM_MAX ((size_t)128 << 20)
/* Largest total magnitude of one sample type: BASE and NEW then differ by at most 2^62. */
#define DIFF_VALUE_MAX ((uint64_t)1 << 61)

/*
 * Loads a profile for diffing: a gzip-compressed pprof with Go's heap sample
 * types (heapbpf's, or another tool's; missing types read as 0), or a
 * heapbpf recording (replayed and symbolized with binary_dirs). Returns 0 or
 * a negative errno with a one-sentence message in err. A profile too large
 * to hold within PPROF_MEM_MAX and DIFF_MEM_MAX, or whose values add up past
 * DIFF_VALUE_MAX, is refused.
 */
int diff_load(const char *path, const char *const *binary_dirs, struct hb_profile **out, char *err,
	      size_t errlen);

/* The differential profile of new against base; 0 or -ENOMEM. */
int diff__new(const struct hb_profile *base, const struct hb_profile *new, struct diff **out);
void diff__free(struct diff *d);

/* Indices of the n stacks that changed most in which (by absolute value); returns how many. */
size_t diff_top(const struct diff *d, enum hb_value which, size_t *idx, size_t n);

/*
 * The sites of d's profile and stacks named past allocator wrappers, as a
 * live run names them (wrappers.h: the built-in list and patterns, e.g.
 * --wrapper's). 0 or -ENOMEM.
 */
int diff_wrappers(struct diff *d, const char *const *patterns, size_t npatterns);

#endif /* __HEAPBPF_DIFF_H */
