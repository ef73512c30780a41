/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * How long sampled objects lived: one histogram per stack, kept by the
 * collector as frees match allocations, read by the analysis (leaks.h).
 */
#ifndef __HEAPBPF_LIFETIMES_H
#define __HEAPBPF_LIFETIMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Lifetimes in nanoseconds, log-linear: below 32 ns one bucket per
 * nanosecond, above 16 buckets per power of two, so a quantile read back is
 * within 1/16 of the bucket's value. Only the buckets between the shortest
 * and the longest lifetime seen are allocated. A zeroed struct is empty.
 */
#define HB_LT_SUB_BITS 4
#define HB_LT_NBUCKETS ((64 - HB_LT_SUB_BITS + 1) << HB_LT_SUB_BITS)

struct hb_lifetimes {
	uint64_t n;	    /* sampled objects freed, lifetime known */
	uint64_t temporary; /* of them, freed within the temporary threshold */
	uint64_t min_ns, max_ns;
	uint32_t lo, nb; /* lifetimes_buckets(l)[i] counts the lifetimes in bucket lo + i */
	/*
	 * Up to HB_LT_INLINE buckets inside (most stacks' objects all live
	 * about as long: no allocation, and its header, for each), else on the heap.
	 */
	union {
		uint32_t *heap;
		uint32_t inl[2];
	} b;
};

#define HB_LT_INLINE 2

static inline uint32_t *lifetimes_buckets(struct hb_lifetimes *l)
{
	return l->nb > HB_LT_INLINE ? l->b.heap : l->b.inl;
}

static inline const uint32_t *lifetimes_buckets_c(const struct hb_lifetimes *l)
{
	return l->nb > HB_LT_INLINE ? l->b.heap : l->b.inl;
}

/* The bucket of a lifetime, and the first lifetime of bucket b (b < HB_LT_NBUCKETS). */
uint32_t lifetimes_bucket(uint64_t ns);
uint64_t lifetimes_bucket_start(uint32_t b);

/* Counts one lifetime (temporary: shorter than the threshold). 0 or -ENOMEM. */
int lifetimes_add(struct hb_lifetimes *l, uint64_t ns, bool temporary);
/* Adds src's counts to dst. 0 or -ENOMEM. */
int lifetimes_merge(struct hb_lifetimes *dst, const struct hb_lifetimes *src);
/*
 * The q-quantile (0..1) of the lifetimes, interpolated inside its bucket and
 * kept between the shortest and the longest; 0 when empty.
 */
uint64_t lifetimes_quantile(const struct hb_lifetimes *l, double q);
void lifetimes_clear(struct hb_lifetimes *l);

#endif /* __HEAPBPF_LIFETIMES_H */
