/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A measured RSS breakdown (rssmap.h) written out: heapbpf rss's JSON
 * object, which watch and the agent also write beside a trigger's profile,
 * and one line of its parts for a profile's comment (docs/rss.md).
 */
#ifndef __HEAPBPF_RSSOUT_H
#define __HEAPBPF_RSSOUT_H
#include <stdio.h>

#include "util/profile.h"
#include "heap/rssmap.h"

/* The stacks beside a breakdown, and what each holds (held.h). */
struct rssout_stacks {
	const struct hb_profile *p; /* NULL: none, and why says why */
	const double *held;	    /* per sample of p */
	const size_t *order;	    /* p's samples, most held first */
	const char *why;
};

/* The function of frame k of sample s (its innermost inlined line), "??" when unknown. */
const char *rssout_frame(const struct hb_profile *p, const struct hb_sample *s, uint32_t k);

/*
 * One JSON object and a newline: every figure in bytes, the stacks most
 * held first. age_ms >= 0: how long before the profile it goes with the
 * breakdown was measured ("age_ms"). 0, or -EIO when f failed.
 */
int rssout_json(FILE *f, const struct jemalloc_target *t, const struct rss_map *m,
		const struct rssout_stacks *st, double age_ms);

/* "RSS 97.0 MiB = slabs 40.1 MiB (12.0 MiB free regions) + large ... + unexplained 12 KiB". */
void rssout_line(const struct rss_map *m, char *buf, size_t len);

#endif /* __HEAPBPF_RSSOUT_H */
