// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "collect/lifetimes.h"

#define SUB (1u << HB_LT_SUB_BITS)

uint32_t lifetimes_bucket(uint64_t ns)
{
	unsigned int k;

	if (ns < 2 * SUB)
		return (uint32_t)ns;
	/* octave k is [2^k, 2^(k+1)): the HB_LT_SUB_BITS bits after the leading one pick */
	k = 63 - __builtin_clzll(ns);
	return (k - HB_LT_SUB_BITS + 1) * SUB +
	       (uint32_t)((ns >> (k - HB_LT_SUB_BITS)) & (SUB - 1));
}

uint64_t lifetimes_bucket_start(uint32_t b)
{
	unsigned int k;

	if (b < 2 * SUB)
		return b;
	if (b >= HB_LT_NBUCKETS)
		return UINT64_MAX;
	k = b / SUB + HB_LT_SUB_BITS - 1;
	return (uint64_t)(SUB + b % SUB) << (k - HB_LT_SUB_BITS);
}

/* The first lifetime past bucket b (saturating at the last one). */
static uint64_t bucket_end(uint32_t b)
{
	return b + 1 < HB_LT_NBUCKETS ? lifetimes_bucket_start(b + 1) : UINT64_MAX;
}

/* Buckets lo..hi-1 allocated, a few more than asked on the side that grew: amortized O(1). */
static int lt_cover(struct hb_lifetimes *l, uint32_t lo, uint32_t hi)
{
	uint32_t nlo, nhi, *nb;

	if (l->nb && lo >= l->lo && hi <= l->lo + l->nb)
		return 0;
	if (l->nb) {
		nlo = lo < l->lo ? (lo > SUB ? lo - SUB : 0) : l->lo;
		nhi = hi > l->lo + l->nb ? hi + SUB : l->lo + l->nb;
	} else {
		nlo = lo;
		nhi = hi;
	}
	if (nhi > HB_LT_NBUCKETS)
		nhi = HB_LT_NBUCKETS;
	if (nhi - nlo <= HB_LT_INLINE) {
		/* inside before too: never fewer buckets than before */
		uint32_t inl[HB_LT_INLINE] = { 0 };

		if (l->nb)
			memcpy(inl + (l->lo - nlo), l->b.inl, l->nb * sizeof(*inl));
		memcpy(l->b.inl, inl, sizeof(inl));
		l->lo = nlo;
		l->nb = nhi - nlo;
		return 0;
	}
	nb = calloc(nhi - nlo, sizeof(*nb));
	if (!nb)
		return -ENOMEM;
	if (l->nb)
		memcpy(nb + (l->lo - nlo), lifetimes_buckets(l), l->nb * sizeof(*nb));
	if (l->nb > HB_LT_INLINE)
		free(l->b.heap);
	l->b.heap = nb;
	l->lo = nlo;
	l->nb = nhi - nlo;
	return 0;
}

int lifetimes_add(struct hb_lifetimes *l, uint64_t ns, bool temporary)
{
	uint32_t b = lifetimes_bucket(ns);
	int err = lt_cover(l, b, b + 1);

	if (err)
		return err;
	lifetimes_buckets(l)[b - l->lo]++;
	if (!l->n || ns < l->min_ns)
		l->min_ns = ns;
	if (!l->n || ns > l->max_ns)
		l->max_ns = ns;
	l->n++;
	l->temporary += temporary;
	return 0;
}

int lifetimes_merge(struct hb_lifetimes *dst, const struct hb_lifetimes *src)
{
	const uint32_t *sb = lifetimes_buckets_c(src);
	uint32_t *db;
	int err;

	if (!src->n)
		return 0;
	err = lt_cover(dst, src->lo, src->lo + src->nb);
	if (err)
		return err;
	db = lifetimes_buckets(dst);
	for (uint32_t i = 0; i < src->nb; i++)
		db[src->lo + i - dst->lo] += sb[i];
	if (!dst->n || src->min_ns < dst->min_ns)
		dst->min_ns = src->min_ns;
	if (!dst->n || src->max_ns > dst->max_ns)
		dst->max_ns = src->max_ns;
	dst->n += src->n;
	dst->temporary += src->temporary;
	return 0;
}

uint64_t lifetimes_quantile(const struct hb_lifetimes *l, double q)
{
	const uint32_t *bk = lifetimes_buckets_c(l);
	double rank, below = 0, v;
	uint32_t i;

	if (!l->n)
		return 0;
	if (q <= 0)
		return l->min_ns;
	if (q >= 1)
		return l->max_ns;
	rank = q * (double)l->n;
	for (i = 0; i < l->nb; i++) {
		if (bk[i] && below + bk[i] >= rank)
			break;
		below += bk[i];
	}
	if (i == l->nb)
		return l->max_ns;
	/* spread evenly over the bucket: rank - below of its count lie below the value */
	v = (double)lifetimes_bucket_start(l->lo + i) +
	    (rank - below) / bk[i] *
		    (double)(bucket_end(l->lo + i) - lifetimes_bucket_start(l->lo + i));
	if (v < (double)l->min_ns)
		return l->min_ns;
	if (v > (double)l->max_ns)
		return l->max_ns;
	return (uint64_t)v;
}

void lifetimes_clear(struct hb_lifetimes *l)
{
	if (l->nb > HB_LT_INLINE)
		free(l->b.heap);
	memset(l, 0, sizeof(*l));
}
