/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What each stack holds: its in-use bytes plus its share of the free
 * regions in the slabs of the small size class its objects come from, in
 * proportion to its in-use bytes there (heapbpf rss; docs/rss.md).
 *
 * An estimate, said as such: a stack's class is taken from its mean object
 * size (the live heap keeps counts and bytes per stack, not sizes), and
 * jemalloc moves each sampled small object into a page-sized extent of its
 * own, so no sample shows which slab its object would have pinned.
 */
#ifndef __HEAPBPF_HELD_H
#define __HEAPBPF_HELD_H

#include "util/profile.h"
#include "heap/jestats.h"

/*
 * held[i] for each of p's samples (p->nsamples entries): its inuse_space,
 * plus its share of its class's free bytes when the class is small. A
 * sample with nothing in use holds nothing.
 */
void held_estimate(const struct hb_profile *p, const struct jestats *je, double *held);

/* order[0..n): the indices of held, most held first. */
void held_order(const double *held, size_t n, size_t *order);

/*
 * p->held (its held_space type in pprof) from the estimate against je; a
 * held array p had is replaced. 0 or -ENOMEM.
 */
int held_attach(struct hb_profile *p, const struct jestats *je);

/* The small size class (bin) of objects of mean size mean; -1 when large or none. */
int held_class_of(const struct jestats *je, double mean);

#endif /* __HEAPBPF_HELD_H */
