// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "collect/collector.h"
#include "collect/leaks.h"
#include "util/profile.h"

int leaks_trend_fit(const double *t, const float *y, size_t n, struct hb_trend *out)
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

bool leaks_trend_is_suspect(const struct hb_trend *t, uint64_t live_samples)
{
	return t->n >= HB_SUSPECT_MIN_POINTS && t->slope > 0 && t->r2 >= HB_SUSPECT_MIN_R2 &&
	       live_samples >= HB_SUSPECT_MIN_LIVE;
}

double leaks_rate_rel_err(const struct hb_trend *t, uint64_t samples)
{
	double fit;

	if (!samples || !(t->slope > 0))
		return INFINITY;
	fit = t->slope_se / t->slope;
	return sqrt(1.0 / (double)samples + fit * fit);
}

static uint64_t max_u64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

uint64_t leaks_held_cutoff(uint64_t window_ns, const struct hb_lifetimes *own,
			   const struct hb_lifetimes *all, enum hb_held_base *base)
{
	const struct hb_lifetimes *l;
	uint64_t p90, cut;

	if (own && own->n >= HB_HELD_MIN_FREED) {
		*base = HB_HELD_OWN;
		l = own;
	} else if (all && all->n >= HB_HELD_MIN_FREED) {
		*base = HB_HELD_WINDOW;
		l = all;
	} else {
		*base = HB_HELD_NONE;
		return 0;
	}
	p90 = lifetimes_quantile(l, 0.9);
	cut = (uint64_t)((double)window_ns * HB_HELD_WINDOW_SHARE);
	/* saturated: an absurd lifetime holds nothing */
	cut = max_u64(cut, p90 > UINT64_MAX / HB_HELD_LIFETIME_FACTOR
				   ? UINT64_MAX
				   : p90 * HB_HELD_LIFETIME_FACTOR);
	/* older than every freed object of its own, however few */
	if (own && own->n)
		cut = max_u64(cut, own->max_ns);
	return cut;
}

bool leaks_held_is_suspect(uint64_t held)
{
	return held >= HB_HELD_MIN_LIVE;
}

enum hb_confidence leaks_confidence_of(double rel_err)
{
	if (rel_err <= 0.1)
		return HB_CONF_HIGH;
	if (rel_err <= 0.3)
		return HB_CONF_MEDIUM;
	return HB_CONF_LOW;
}

const char *leaks_confidence_name(enum hb_confidence c)
{
	static const char *const names[] = {
		[HB_CONF_LOW] = "low",
		[HB_CONF_MEDIUM] = "medium",
		[HB_CONF_HIGH] = "high",
	};

	return names[c];
}

int leaks_analysis__new(struct hb_analysis **out)
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
	/* counted first, so that leaks_analysis__free frees a half-filled one */
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

int leaks_analysis__add(struct hb_analysis *a, uint32_t sample, const struct collector *c,
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
	err = lifetimes_merge(&s->lt, collector__stack_lifetimes(c, stack))
		      ?: lifetimes_merge(&a->axes[axis].lt, collector__stack_lifetimes(c, stack));
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

/*
 * The numbers of one sample as pprof labels; rank: its place among the
 * growth suspects (1: fastest), held: among the held ones (1: most in use).
 */
static int label_sample(struct hb_sample *smp, const struct hb_site_stats *s,
			const struct hb_axis *ax, uint32_t rank, uint32_t held)
{
	struct hb_label l[12];
	uint32_t n = 0;

	if (!s->used || (!s->lt.n && !s->live))
		return 0;
	if (s->lt.n) {
		l[n++] = (struct hb_label){ "lifetime_p50", "nanoseconds",
					    (int64_t)lifetimes_quantile(&s->lt, 0.5) };
		l[n++] = (struct hb_label){ "lifetime_p90", "nanoseconds",
					    (int64_t)lifetimes_quantile(&s->lt, 0.9) };
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
	if (held) {
		l[n++] = (struct hb_label){ "held_rank", "count", held };
		l[n++] = (struct hb_label){ "held_live", "count", (int64_t)s->held };
		l[n++] = (struct hb_label){ "held_over", "nanoseconds", (int64_t)s->held_over };
	}
	smp->labels = malloc(n * sizeof(*smp->labels));
	if (!smp->labels)
		return -ENOMEM;
	memcpy(smp->labels, l, n * sizeof(*l));
	smp->nlabels = n;
	return 0;
}

struct ranked {
	double slope; /* or, of a held suspect, its in use */
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
		if (leaks_trend_fit(ax->t, y, ax->n, &s->trend))
			continue;
		s->suspect = leaks_trend_is_suspect(&s->trend, s->live);
		s->rel_err = leaks_rate_rel_err(&s->trend, s->live);
		if (s->suspect)
			r[a->nsuspects++] = (struct ranked){ s->trend.slope, (uint32_t)i };
	}
}

/*
 * The held suspects of one axis into r + *nr: each sample not a growth
 * suspect gets its cutoff age, and its stacks' live samples allocated
 * before the end less that age are counted in one pass over c's live ones.
 */
static int judge_held_axis(struct hb_analysis *a, uint32_t k, const struct hb_profile *p,
			   struct ranked *r, size_t *nr)
{
	const struct hb_axis *ax = &a->axes[k];
	size_t nst = collector__nstacks(ax->c);
	uint64_t *before, window = ax->end_ts - ax->t0_ts;
	uint32_t *cnt;

	if (ax->n < HB_SUSPECT_MIN_POINTS || ax->end_ts <= ax->t0_ts)
		return 0;
	before = calloc(nst ? nst : 1, sizeof(*before));
	cnt = calloc(nst ? nst : 1, sizeof(*cnt));
	if (!before || !cnt) {
		free(before);
		free(cnt);
		return -ENOMEM;
	}
	for (size_t i = 0; i < a->ns; i++) {
		struct hb_site_stats *s = &a->s[i];

		if (!s->used || s->axis != k || s->suspect || !s->live)
			continue;
		s->held_over = leaks_held_cutoff(window, &s->lt, &ax->lt, &s->held_base);
		if (s->held_base == HB_HELD_NONE || s->held_over >= ax->end_ts)
			continue;
		for (uint32_t st = s->first; st != UINT32_MAX; st = ax->next[st])
			before[st] = ax->end_ts - s->held_over;
	}
	collector__count_live_before(ax->c, before, cnt);
	for (size_t i = 0; i < a->ns; i++) {
		struct hb_site_stats *s = &a->s[i];

		if (!s->used || s->axis != k || s->suspect || s->held_base == HB_HELD_NONE)
			continue;
		for (uint32_t st = s->first; st != UINT32_MAX; st = ax->next[st])
			s->held += cnt[st];
		s->held_suspect = leaks_held_is_suspect(s->held);
		if (s->held_suspect)
			r[(*nr)++] = (struct ranked){
				i < p->nsamples ? p->samples[i].v[HB_INUSE_SPACE] : 0, (uint32_t)i
			};
	}
	free(before);
	free(cnt);
	return 0;
}

int leaks_analysis__finish(struct hb_analysis *a, struct hb_profile *p)
{
	struct ranked *r = calloc(a->ns ? a->ns : 1, sizeof(*r));
	uint32_t *rank = calloc(a->ns ? a->ns : 1, sizeof(*rank));
	uint32_t *hrank = calloc(a->ns ? a->ns : 1, sizeof(*hrank));
	size_t maxn = 1;
	float *y;
	int err = 0;

	for (size_t i = 0; i < a->naxes; i++)
		maxn = a->axes[i].n > maxn ? a->axes[i].n : maxn;
	y = calloc(maxn, sizeof(*y));
	a->suspects = calloc(a->ns ? a->ns : 1, sizeof(*a->suspects));
	a->held = calloc(a->ns ? a->ns : 1, sizeof(*a->held));
	if (!r || !rank || !hrank || !y || !a->suspects || !a->held) {
		err = -ENOMEM;
		goto out;
	}
	judge(a, r, y);
	qsort(r, a->nsuspects, sizeof(*r), cmp_ranked);
	for (size_t i = 0; i < a->nsuspects; i++) {
		a->suspects[i] = r[i].idx;
		rank[r[i].idx] = i + 1;
	}
	for (uint32_t k = 0; !err && k < a->naxes; k++)
		err = judge_held_axis(a, k, p, r, &a->nheld);
	if (err)
		goto out;
	qsort(r, a->nheld, sizeof(*r), cmp_ranked);
	for (size_t i = 0; i < a->nheld; i++) {
		a->held[i] = r[i].idx;
		hrank[r[i].idx] = i + 1;
	}
	for (size_t i = 0; !err && i < a->ns && i < p->nsamples; i++)
		err = label_sample(&p->samples[i], &a->s[i], &a->axes[a->s[i].axis], rank[i],
				   hrank[i]);
out:
	free(r);
	free(rank);
	free(hrank);
	free(y);
	return err;
}

void leaks_analysis__free(struct hb_analysis *a)
{
	if (!a)
		return;
	for (size_t i = 0; i < a->ns; i++)
		lifetimes_clear(&a->s[i].lt);
	free(a->s);
	for (size_t i = 0; i < a->naxes; i++) {
		free(a->axes[i].t);
		free(a->axes[i].oldest);
		free(a->axes[i].next);
		lifetimes_clear(&a->axes[i].lt);
	}
	free(a->axes);
	free(a->suspects);
	free(a->held);
	free(a);
}
