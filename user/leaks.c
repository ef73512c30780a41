// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "collector.h"
#include "leaks.h"
#include "profile.h"

#define SUB (1u << HB_LT_SUB_BITS)

uint32_t hb_lt_bucket(uint64_t ns)
{
	unsigned int k;

	if (ns < 2 * SUB)
		return (uint32_t)ns;
	/* octave k is [2^k, 2^(k+1)): the HB_LT_SUB_BITS bits after the leading one pick */
	k = 63 - __builtin_clzll(ns);
	return (k - HB_LT_SUB_BITS + 1) * SUB +
	       (uint32_t)((ns >> (k - HB_LT_SUB_BITS)) & (SUB - 1));
}

uint64_t hb_lt_bucket_start(uint32_t b)
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
	return b + 1 < HB_LT_NBUCKETS ? hb_lt_bucket_start(b + 1) : UINT64_MAX;
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
		memcpy(nb + (l->lo - nlo), hb_lt_buckets(l), l->nb * sizeof(*nb));
	if (l->nb > HB_LT_INLINE)
		free(l->b.heap);
	l->b.heap = nb;
	l->lo = nlo;
	l->nb = nhi - nlo;
	return 0;
}

int hb_lt_add(struct hb_lifetimes *l, uint64_t ns, bool temporary)
{
	uint32_t b = hb_lt_bucket(ns);
	int err = lt_cover(l, b, b + 1);

	if (err)
		return err;
	hb_lt_buckets(l)[b - l->lo]++;
	if (!l->n || ns < l->min_ns)
		l->min_ns = ns;
	if (!l->n || ns > l->max_ns)
		l->max_ns = ns;
	l->n++;
	l->temporary += temporary;
	return 0;
}

int hb_lt_merge(struct hb_lifetimes *dst, const struct hb_lifetimes *src)
{
	const uint32_t *sb = hb_lt_buckets_c(src);
	uint32_t *db;
	int err;

	if (!src->n)
		return 0;
	err = lt_cover(dst, src->lo, src->lo + src->nb);
	if (err)
		return err;
	db = hb_lt_buckets(dst);
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

uint64_t hb_lt_quantile(const struct hb_lifetimes *l, double q)
{
	const uint32_t *bk = hb_lt_buckets_c(l);
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
	v = (double)hb_lt_bucket_start(l->lo + i) +
	    (rank - below) / bk[i] *
		    (double)(bucket_end(l->lo + i) - hb_lt_bucket_start(l->lo + i));
	if (v < (double)l->min_ns)
		return l->min_ns;
	if (v > (double)l->max_ns)
		return l->max_ns;
	return (uint64_t)v;
}

void hb_lt_clear(struct hb_lifetimes *l)
{
	if (l->nb > HB_LT_INLINE)
		free(l->b.heap);
	memset(l, 0, sizeof(*l));
}

int hb_trend_fit(const double *t, const float *y, size_t n, struct hb_trend *out)
{
	double tm = 0, ym = 0, sxx = 0, sxy = 0, syy = 0, sse;

	if (n < 2)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		tm += t[i];
		ym += y[i];
	}
	tm /= (double)n;
	ym /= (double)n;
	/* centred sums: no cancellation between large squares */
	for (size_t i = 0; i < n; i++) {
		double dt = t[i] - tm, dy = y[i] - ym;

		sxx += dt * dt;
		sxy += dt * dy;
		syy += dy * dy;
	}
	if (sxx <= 0)
		return -EINVAL;
	out->n = n;
	out->slope = sxy / sxx;
	/* a flat series has nothing to explain: not steady growth */
	out->r2 = syy > 0 ? sxy * sxy / (sxx * syy) : 0;
	sse = syy - out->slope * sxy;
	if (sse < 0)
		sse = 0;
	out->slope_se = n > 2 ? sqrt(sse / (double)(n - 2) / sxx) : INFINITY;
	return 0;
}

bool hb_trend_is_suspect(const struct hb_trend *t, uint64_t live_samples)
{
	return t->n >= HB_SUSPECT_MIN_POINTS && t->slope > 0 && t->r2 >= HB_SUSPECT_MIN_R2 &&
	       live_samples >= HB_SUSPECT_MIN_LIVE;
}

double hb_rate_rel_err(const struct hb_trend *t, uint64_t samples)
{
	double fit;

	if (!samples || !(t->slope > 0))
		return INFINITY;
	fit = t->slope_se / t->slope;
	return sqrt(1.0 / (double)samples + fit * fit);
}

enum hb_confidence hb_confidence_of(double rel_err)
{
	if (rel_err <= 0.1)
		return HB_CONF_HIGH;
	if (rel_err <= 0.3)
		return HB_CONF_MEDIUM;
	return HB_CONF_LOW;
}

const char *hb_confidence_name(enum hb_confidence c)
{
	static const char *const names[] = {
		[HB_CONF_LOW] = "low",
		[HB_CONF_MEDIUM] = "medium",
		[HB_CONF_HIGH] = "high",
	};

	return names[c];
}

int hb_analysis__new(struct hb_analysis **out)
{
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : -ENOMEM;
}

/* The points of c: each checkpoint, then the end when it is later than the last one. */
static int axis_fill(struct hb_axis *ax, const struct collector *c)
{
	size_t nck, nstacks = collector__nstacks(c);
	const struct collector_checkpoint *ck = collector__checkpoints(c, &nck);
	uint64_t end = collector__totals(c)->ts;

	ax->c = c;
	ax->n = nck + (nck && end > ck[nck - 1].ts);
	ax->t = calloc(ax->n ? ax->n : 1, sizeof(*ax->t));
	ax->oldest = calloc(nstacks ? nstacks : 1, sizeof(*ax->oldest));
	ax->next = malloc((nstacks ? nstacks : 1) * sizeof(*ax->next));
	if (!ax->t || !ax->oldest || !ax->next)
		return -ENOMEM;
	ax->t0_ts = nck ? ck[0].ts : 0;
	ax->end_ts = end;
	for (size_t k = 0; k < nck; k++)
		ax->t[k] = (double)(ck[k].ts - ax->t0_ts) / 1e9;
	if (ax->n > nck)
		ax->t[nck] = (double)(end - ax->t0_ts) / 1e9;
	collector__oldest_live(c, ax->oldest);
	return 0;
}

/* The axis of c, made on its first stack. */
static int axis_of(struct hb_analysis *a, const struct collector *c, uint32_t *idx)
{
	struct hb_axis *na;
	int err;

	for (size_t i = 0; i < a->naxes; i++) {
		if (a->axes[i].c == c) {
			*idx = i;
			return 0;
		}
	}
	na = reallocarray(a->axes, a->naxes + 1, sizeof(*na));
	if (!na)
		return -ENOMEM;
	a->axes = na;
	memset(&na[a->naxes], 0, sizeof(*na));
	/* counted first, so that hb_analysis__free frees a half-filled one */
	*idx = a->naxes++;
	err = axis_fill(&na[*idx], c);
	if (!err)
		a->temporary_ns = collector__temporary_threshold(c);
	return err;
}

/*
 * a->s with room for sample index i, entries up to it zeroed (only those:
 * the spare capacity stays untouched, so it takes no memory).
 */
static int room_for(struct hb_analysis *a, uint32_t i)
{
	struct hb_site_stats *ns;
	size_t ncap;

	if (i >= a->cap) {
		ncap = a->cap ? a->cap * 2 : 256;
		while (ncap <= i)
			ncap *= 2;
		ns = reallocarray(a->s, ncap, sizeof(*ns));
		if (!ns)
			return -ENOMEM;
		a->s = ns;
		a->cap = ncap;
	}
	if (i >= a->ns) {
		memset(a->s + a->ns, 0, (i + 1 - a->ns) * sizeof(*a->s));
		a->ns = i + 1;
	}
	return 0;
}

int hb_analysis__add(struct hb_analysis *a, uint32_t sample, const struct collector *c,
		     size_t stack)
{
	const struct hb_stack *st = collector__stack(c, stack);
	const struct hb_axis *ax;
	struct hb_site_stats *s;
	uint32_t axis;
	int err;

	if (!st || stack >= UINT32_MAX)
		return -EINVAL;
	err = axis_of(a, c, &axis) ?: room_for(a, sample);
	if (err)
		return err;
	ax = &a->axes[axis];
	s = &a->s[sample];
	if (!s->used) {
		s->used = true;
		s->axis = axis;
		s->first = (uint32_t)stack;
	} else if (s->axis != axis) {
		/* samples never mix processes, so a sample's stacks share one axis */
		return -EINVAL;
	} else {
		ax->next[s->last] = (uint32_t)stack;
	}
	ax->next[stack] = UINT32_MAX;
	s->last = (uint32_t)stack;
	err = hb_lt_merge(&s->lt, collector__stack_lifetimes(c, stack));
	if (err)
		return err;
	s->live += st->inuse_samples > 0 ? (uint64_t)st->inuse_samples : 0;
	if (ax->oldest[stack] && (!s->oldest_ts || ax->oldest[stack] < s->oldest_ts))
		s->oldest_ts = ax->oldest[stack];
	return 0;
}

/* The estimated in-use bytes of s's stacks at each point of its axis, into y (ax->n). */
static void series_of(const struct hb_site_stats *s, const struct hb_axis *ax, float *y)
{
	size_t nck;
	const struct collector_checkpoint *ck = collector__checkpoints(ax->c, &nck);

	memset(y, 0, ax->n * sizeof(*y));
	for (uint32_t st = s->first; st != UINT32_MAX; st = ax->next[st]) {
		collector_ckpt_add_series(ck, nck, st, y);
		if (ax->n > nck)
			y[nck] += (float)collector__stack(ax->c, st)->inuse_space;
	}
}

/* The numbers of one sample as pprof labels; rank: its place among the suspects (1: fastest). */
static int label_sample(struct hb_sample *smp, const struct hb_site_stats *s,
			const struct hb_axis *ax, uint32_t rank)
{
	struct hb_label l[9];
	uint32_t n = 0;

	if (!s->used || (!s->lt.n && !s->live))
		return 0;
	if (s->lt.n) {
		l[n++] = (struct hb_label){ "lifetime_p50", "nanoseconds",
					    (int64_t)hb_lt_quantile(&s->lt, 0.5) };
		l[n++] = (struct hb_label){ "lifetime_p90", "nanoseconds",
					    (int64_t)hb_lt_quantile(&s->lt, 0.9) };
		l[n++] = (struct hb_label){ "lifetime_max", "nanoseconds", (int64_t)s->lt.max_ns };
	}
	l[n++] = (struct hb_label){ "freed", "count", (int64_t)s->lt.n };
	l[n++] = (struct hb_label){ "temporary", "count", (int64_t)s->lt.temporary };
	l[n++] = (struct hb_label){ "live_at_end", "count", (int64_t)s->live };
	if (s->oldest_ts && ax->end_ts >= s->oldest_ts)
		l[n++] = (struct hb_label){ "oldest_live_age", "nanoseconds",
					    (int64_t)(ax->end_ts - s->oldest_ts) };
	if (rank) {
		l[n++] = (struct hb_label){ "leak_rank", "count", rank };
		l[n++] = (struct hb_label){ "inuse_growth", "bytes_per_second",
					    (int64_t)llround(s->trend.slope) };
	}
	smp->labels = malloc(n * sizeof(*smp->labels));
	if (!smp->labels)
		return -ENOMEM;
	memcpy(smp->labels, l, n * sizeof(*l));
	smp->nlabels = n;
	return 0;
}

struct ranked {
	double slope;
	uint32_t idx;
};

static int cmp_ranked(const void *a, const void *b)
{
	const struct ranked *x = a, *y = b;

	if (x->slope != y->slope)
		return x->slope > y->slope ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* Each used sample's trend and verdict; the suspects into r (not sorted). y: the longest axis. */
static void judge(struct hb_analysis *a, struct ranked *r, float *y)
{
	for (size_t i = 0; i < a->ns; i++) {
		struct hb_site_stats *s = &a->s[i];
		const struct hb_axis *ax = &a->axes[s->axis];

		if (!s->used)
			continue;
		series_of(s, ax, y);
		if (hb_trend_fit(ax->t, y, ax->n, &s->trend))
			continue;
		s->suspect = hb_trend_is_suspect(&s->trend, s->live);
		s->rel_err = hb_rate_rel_err(&s->trend, s->live);
		if (s->suspect)
			r[a->nsuspects++] = (struct ranked){ s->trend.slope, (uint32_t)i };
	}
}

int hb_analysis__finish(struct hb_analysis *a, struct hb_profile *p)
{
	struct ranked *r = calloc(a->ns ? a->ns : 1, sizeof(*r));
	uint32_t *rank = calloc(a->ns ? a->ns : 1, sizeof(*rank));
	size_t maxn = 1;
	float *y;
	int err = 0;

	for (size_t i = 0; i < a->naxes; i++)
		maxn = a->axes[i].n > maxn ? a->axes[i].n : maxn;
	y = calloc(maxn, sizeof(*y));
	a->suspects = calloc(a->ns ? a->ns : 1, sizeof(*a->suspects));
	if (!r || !rank || !y || !a->suspects) {
		err = -ENOMEM;
		goto out;
	}
	judge(a, r, y);
	qsort(r, a->nsuspects, sizeof(*r), cmp_ranked);
	for (size_t i = 0; i < a->nsuspects; i++) {
		a->suspects[i] = r[i].idx;
		rank[r[i].idx] = i + 1;
	}
	for (size_t i = 0; !err && i < a->ns && i < p->nsamples; i++)
		err = label_sample(&p->samples[i], &a->s[i], &a->axes[a->s[i].axis], rank[i]);
out:
	free(r);
	free(rank);
	free(y);
	return err;
}

void hb_analysis__free(struct hb_analysis *a)
{
	if (!a)
		return;
	for (size_t i = 0; i < a->ns; i++)
		hb_lt_clear(&a->s[i].lt);
	free(a->s);
	for (size_t i = 0; i < a->naxes; i++) {
		free(a->axes[i].t);
		free(a->axes[i].oldest);
		free(a->axes[i].next);
	}
	free(a->axes);
	free(a->suspects);
	free(a);
}
