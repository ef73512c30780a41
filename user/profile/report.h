/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * From the collector's raw stacks to a symbolized profile: symbolize every
 * distinct frame once, trim jemalloc's own frames so the leaf is the caller
 * of malloc, merge stacks that became identical, turn the per-stack
 * totals into the four sample values, and name each sample's site past
 * allocator wrappers (user/profile/wrappers.h).
 */
#ifndef __HEAPBPF_REPORT_H
#define __HEAPBPF_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "collect/collector.h"
#include "collect/leaks.h"
#include "util/profile.h"
#include "symbols/symbolizer.h"
#include "jemalloc/target.h"

/* --follow-forks: one more process's collection, its samples labelled with its pid. */
struct report_opts {
	bool raw; /* raw sampled counts/bytes instead of unbiased estimates */
	int64_t time_nanos, duration_nanos;
	/*
	 * With procs: the target's collector is labelled with pid too, and the
	 * stacks of every process are kept apart (same symbolizer: a forked
	 * child maps what its parent maps).
	 */
	pid_t pid;
	const struct collector_proc *procs;
	size_t nprocs;
	/* --at-peak: each stack's in-use at its collector's peak; alloc_* are zero */
	bool at_peak;
	/*
	 * Not NULL: lifetimes and in-use trends per sample (user/collect/leaks.h), put
	 * on the samples as labels and returned here for the text report.
	 */
	struct hb_analysis **analysis;
	/*
	 * The last profile of these collectors (collector__end was called, no
	 * other profile follows): each stack's frames are released once read
	 * (collector__release_frames), so the collector's frames and the
	 * profile's locations are not both held whole.
	 */
	bool release_frames;
	/* --wrapper: more allocator wrappers to name sites past (user/profile/wrappers.h) */
	const char *const *wrappers;
	size_t nwrappers;
};

/* Number of leading (leaf-side) frames that belong to jemalloc. */
size_t report_trim_count(const bool *is_jemalloc, size_t n);

int report__build(struct collector *c, struct symbolizer *s, const struct jemalloc_target *t,
		  const struct report_opts *opts, struct hb_profile **out);

/*
 * The profile's timeline and peak: the n checkpoints (oldest first), then
 * now when it is later, and the peak at its own time among them, so that no
 * chart of the timeline misses the peak between two checkpoints; wall maps
 * an event's CLOCK_MONOTONIC time to the wall clock. No checkpoint: no
 * timeline. 0 or -ENOMEM.
 */
int report_timeline(struct hb_profile *p, const struct collector_totals *ck, size_t n,
		    const struct collector_totals *now, const struct collector_totals *peak,
		    int64_t (*wall)(uint64_t ts, const void *arg), const void *arg);

#endif /* __HEAPBPF_REPORT_H */
