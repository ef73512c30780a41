/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What heapbpf makes of the events beyond totals (docs/analysis.md): how
 * long sampled objects live (a lifetime histogram per stack), which stacks'
 * in-use grows steadily (a least-squares line through the collector's
 * checkpoints) and how sure that is, merged per profile sample by
 * report__build and written as sample labels and the --leaks report.
 */
#ifndef __HEAPBPF_LEAKS_H
#define __HEAPBPF_LEAKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct collector;
struct hb_profile;

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
	uint32_t lo, nb; /* hb_lt_buckets(l)[i] counts the lifetimes in bucket lo + i */
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

static inline uint32_t *hb_lt_buckets(struct hb_lifetimes *l)
{
	return l->nb > HB_LT_INLINE ? l->b.heap : l->b.inl;
}

static inline const uint32_t *hb_lt_buckets_c(const struct hb_lifetimes *l)
{
	return l->nb > HB_LT_INLINE ? l->b.heap : l->b.inl;
}

/* The bucket of a lifetime, and the first lifetime of bucket b (b < HB_LT_NBUCKETS). */
uint32_t hb_lt_bucket(uint64_t ns);
uint64_t hb_lt_bucket_start(uint32_t b);

/* Counts one lifetime (temporary: shorter than the threshold). 0 or -ENOMEM. */
int hb_lt_add(struct hb_lifetimes *l, uint64_t ns, bool temporary);
/* Adds src's counts to dst. 0 or -ENOMEM. */
int hb_lt_merge(struct hb_lifetimes *dst, const struct hb_lifetimes *src);
/*
 * The q-quantile (0..1) of the lifetimes, interpolated inside its bucket and
 * kept between the shortest and the longest; 0 when empty.
 */
uint64_t hb_lt_quantile(const struct hb_lifetimes *l, double q);
void hb_lt_clear(struct hb_lifetimes *l);

/* A least-squares line through (t seconds, y) points. */
struct hb_trend {
	double slope;	 /* y per second */
	double r2;	 /* steadiness: the share of y's variance the line explains, 0..1 */
	double slope_se; /* standard error of the slope; INFINITY with fewer than 3 points */
	size_t n;
};

/* Fits the line; -EINVAL with fewer than 2 points or all t equal. */
int hb_trend_fit(const double *t, const float *y, size_t n, struct hb_trend *out);

/* A stack needs at least this many points (checkpoints and the end) to be judged. */
#define HB_SUSPECT_MIN_POINTS 8
/* ... and a line that explains this much of its in-use's variance. */
#define HB_SUSPECT_MIN_R2 0.8
/* ... and this many sampled objects still live. */
#define HB_SUSPECT_MIN_LIVE 3

/* True for a steady grower: enough points and live samples, rising, close to a line. */
bool hb_trend_is_suspect(const struct hb_trend *t, uint64_t live_samples);

/*
 * The relative error of a growth rate backed by `samples` live samples:
 * the sampling error of their unbiased sum (1/sqrt(samples)) and the line's
 * own standard error, combined. INFINITY without samples or growth.
 */
double hb_rate_rel_err(const struct hb_trend *t, uint64_t samples);

enum hb_confidence {
	HB_CONF_LOW,
	HB_CONF_MEDIUM, /* within 30% */
	HB_CONF_HIGH,	/* within 10% */
};

enum hb_confidence hb_confidence_of(double rel_err);
/* "low", "medium", "high" */
const char *hb_confidence_name(enum hb_confidence c);

/* Per profile sample: what its stacks' events say beyond the four values. */
struct hb_site_stats {
	struct hb_lifetimes lt;
	uint64_t live;	    /* sampled objects still live at the end */
	uint64_t oldest_ts; /* CLOCK_MONOTONIC allocation of the oldest of them; 0: none known */
	uint32_t axis;	    /* index into hb_analysis.axes: whose checkpoints */
	/*
	 * Its stacks, a list through the axis' next[]: its in-use at each point
	 * of the axis is summed from them when the trend is fitted, not kept.
	 */
	uint32_t first, last;
	struct hb_trend trend;
	double rel_err; /* of the growth rate (hb_rate_rel_err) */
	bool used, suspect;
};

/* One collector's points in time: its checkpoints, then the end. */
struct hb_axis {
	const struct collector *c;
	size_t n;
	double *t;	  /* seconds since the first checkpoint */
	uint64_t t0_ts;	  /* CLOCK_MONOTONIC of the first checkpoint */
	uint64_t end_ts;  /* ... of the last event applied */
	uint64_t *oldest; /* per stack of c: its oldest live sample's allocation time, 0: none */
	uint32_t *next;	  /* per stack of c: the next stack of its sample, UINT32_MAX: none */
};

struct hb_analysis {
	struct hb_site_stats *s; /* parallel to the profile's samples */
	size_t ns, cap;
	struct hb_axis *axes;
	size_t naxes;
	uint64_t temporary_ns;
	uint32_t *suspects; /* sample indices, fastest growth first */
	size_t nsuspects;
};

int hb_analysis__new(struct hb_analysis **out);
/* Counts stack `stack` of c into profile sample `sample` (several stacks can make one sample). */
int hb_analysis__add(struct hb_analysis *a, uint32_t sample, const struct collector *c,
		     size_t stack);
/*
 * Once every stack is in: fits each sample's trend, ranks the suspects and
 * puts the numbers on p's samples as labels (lifetime_p50, _p90, _max in
 * nanoseconds; freed, temporary, live_at_end counts of sampled objects).
 */
int hb_analysis__finish(struct hb_analysis *a, struct hb_profile *p);
void hb_analysis__free(struct hb_analysis *a);

#endif /* __HEAPBPF_LEAKS_H */
