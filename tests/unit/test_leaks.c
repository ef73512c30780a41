// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The analysis behind --leaks, --at-peak and the lifetime labels: lifetime
 * buckets and quantiles, the least-squares trend, steadiness and confidence,
 * the collector's checkpoints (halving when full), its exact peak against a
 * brute-force recomputation over random events, lifetimes matched by tctx
 * (5.3.0) and by pointer, and the suspects of a synthetic run.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <linux/types.h>

#include "commands.h"
#include "collect/collector.h"
#include "profile/flamegraph.h"
#include "heapbpf.h"
#include "collect/leaks.h"
#include "profile/pprof.h"
#include "collect/procsum.h"
#include "util/profile.h"
#include "profile/report.h"
#include "profile/summary.h"
#include "collect/unbias.h"

#define PERIOD	4096
#define MS	1000000ULL
#define TICK_NS (4 * MS) /* the coarse clock's tick on the test machines (HZ=250) */

/* glibc's random(), seeded: the same events on every run */
static uint64_t rnd(void)
{
	return (uint64_t)random() << 31 ^ (uint64_t)random();
}

static struct collector *new_collector(void)
{
	struct collector *c;

	srandom(42);
	cr_assert_eq(collector__new(PERIOD, &c), 0);
	collector__set_attach_time(c, 1);
	return c;
}

/* Stack k: three frames, the leaf telling them apart; with the probe's coarse clock, if known. */
static void alloc_ev_at(struct collector *c, uint32_t stack, uint64_t tctx, uint64_t ptr,
			uint64_t usize, uint64_t ts, uint64_t coarse_ts)
{
	struct heapbpf_alloc_event *e = calloc(1, sizeof(*e));

	cr_assert_not_null(e);
	e->type = HEAPBPF_EV_ALLOC;
	e->nframes = 3;
	e->ts = ts;
	e->coarse = coarse_ts;
	e->ptr = ptr;
	e->usize = usize;
	e->tctx = tctx;
	e->frames[0] = 0x401000 + 16 * stack;
	e->frames[1] = 0x402000;
	e->frames[2] = 0x403000;
	cr_assert_eq(collector__event(c, e, sizeof(*e)), 0);
	free(e);
}

/* Without the probe's coarse clock (version 1 recordings, a clock heapbpf could not find). */
static void alloc_ev(struct collector *c, uint32_t stack, uint64_t tctx, uint64_t ptr,
		     uint64_t usize, uint64_t ts)
{
	alloc_ev_at(c, stack, tctx, ptr, usize, ts, 0);
}

/* ptr 0: a 5.3.0 free (tctx and jemalloc's alloc time); else a 5.3.1 one. */
static void free_ev(struct collector *c, uint64_t tctx, uint64_t ptr, uint64_t usize,
		    uint64_t alloc_time, uint64_t ts)
{
	struct heapbpf_free_event e = {
		.type = HEAPBPF_EV_FREE,
		.ts = ts,
		.ptr = ptr,
		.usize = usize,
		.tctx = tctx,
		.alloc_time_ns = alloc_time,
	};

	cr_assert_eq(collector__event(c, &e, sizeof(e)), 0);
}

/* jemalloc's CLOCK_MONOTONIC_COARSE reading of a fine time: the last tick before it. */
static uint64_t coarse(uint64_t ts)
{
	return ts - ts % TICK_NS;
}

static const struct hb_stack *stack_of(const struct collector *c, uint32_t k)
{
	for (size_t i = 0; i < collector__nstacks(c); i++) {
		const struct hb_stack *s = collector__stack(c, i);

		if (collector__frame(c, s, 0) == 0x401000 + 16 * k)
			return s;
	}
	return NULL;
}

/* Stack s's peak copy and lifetimes, beside it in the collector. */
static const struct hb_stack_peak *pk_of(const struct collector *c, const struct hb_stack *s)
{
	return collector__stack_peak(c, (size_t)(s - collector__stack(c, 0)));
}

static const struct hb_lifetimes *lt_of(const struct collector *c, const struct hb_stack *s)
{
	return collector__stack_lifetimes(c, (size_t)(s - collector__stack(c, 0)));
}

/* ---- lifetime buckets ------------------------------------------------------ */

Test(leaks, buckets_cover_every_lifetime_once)
{
	uint64_t probes[] = { 0,
			      1,
			      31,
			      32,
			      33,
			      47,
			      48,
			      63,
			      64,
			      1000,
			      999999,
			      1000000,
			      1u << 30,
			      UINT64_MAX / 3,
			      UINT64_MAX - 1,
			      UINT64_MAX };

	for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++) {
		uint64_t ns = probes[i];
		uint32_t b = lifetimes_bucket(ns);

		cr_assert_lt(b, HB_LT_NBUCKETS, "%llu", (unsigned long long)ns);
		cr_assert_leq(lifetimes_bucket_start(b), ns, "%llu", (unsigned long long)ns);
		if (b + 1 < HB_LT_NBUCKETS)
			cr_assert_gt(lifetimes_bucket_start(b + 1), ns, "%llu",
				     (unsigned long long)ns);
	}
	/* exact below 32 ns; above, a bucket is at most 1/16 of its start wide */
	for (uint64_t ns = 0; ns < 32; ns++)
		cr_assert_eq(lifetimes_bucket_start(lifetimes_bucket(ns)), ns);
	for (uint32_t b = 32; b + 1 < HB_LT_NBUCKETS; b++) {
		uint64_t lo = lifetimes_bucket_start(b), hi = lifetimes_bucket_start(b + 1);

		cr_assert_gt(hi, lo, "bucket %u", b);
		cr_assert_leq((hi - lo) * 16, lo, "bucket %u is %llu wide at %llu", b,
			      (unsigned long long)(hi - lo), (unsigned long long)lo);
		cr_assert_eq(lifetimes_bucket(lo), b);
		cr_assert_eq(lifetimes_bucket(hi - 1), b);
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

Test(leaks, quantiles_within_a_bucket_of_the_exact_ones)
{
	enum { N = 5000 };
	uint64_t *v = calloc(N, sizeof(*v));
	struct hb_lifetimes all = { 0 }, a = { 0 }, b = { 0 };
	const double qs[] = { 0.01, 0.1, 0.5, 0.9, 0.99 };
	uint64_t ntemp = 0;

	cr_assert_not_null(v);
	for (int i = 0; i < N; i++) {
		/* log-uniform from 1 us to 10 s, as lifetimes are */
		v[i] = (uint64_t)(1e3 * pow(1e7, (double)(rnd() % 1000000) / 1e6));
		cr_assert_eq(lifetimes_add(&all, v[i], v[i] < MS), 0);
		/* the same split in two, then merged: the same histogram */
		cr_assert_eq(lifetimes_add(i % 3 ? &a : &b, v[i], v[i] < MS), 0);
	}
	cr_assert_eq(lifetimes_merge(&a, &b), 0);
	qsort(v, N, sizeof(*v), cmp_u64);
	cr_assert_eq(all.n, N);
	cr_assert_eq(all.min_ns, v[0]);
	cr_assert_eq(all.max_ns, v[N - 1]);
	cr_assert_eq(a.n, all.n);
	cr_assert_eq(a.temporary, all.temporary);
	cr_assert_eq(a.min_ns, all.min_ns);
	cr_assert_eq(a.max_ns, all.max_ns);
	for (size_t i = 0; i < sizeof(qs) / sizeof(qs[0]); i++) {
		uint64_t exact = v[(size_t)(qs[i] * N)], got = lifetimes_quantile(&all, qs[i]);

		/* one bucket either way: 1/16 of the value */
		cr_assert_leq(fabs((double)got - (double)exact), (double)exact / 16 + 1,
			      "q%.2f: %llu, exactly %llu", qs[i], (unsigned long long)got,
			      (unsigned long long)exact);
		cr_assert_eq(lifetimes_quantile(&a, qs[i]), got, "merged q%.2f", qs[i]);
	}
	for (int i = 0; i < N; i++)
		ntemp += v[i] < MS;
	cr_assert_eq(all.temporary, ntemp);
	cr_assert_eq(lifetimes_quantile(&all, 0), v[0]);
	cr_assert_eq(lifetimes_quantile(&all, 1), v[N - 1]);
	lifetimes_clear(&all);
	lifetimes_clear(&a);
	lifetimes_clear(&b);
	free(v);
}

/* Every bucket's count, in its buckets or outside them (0), against a count per bucket. */
static void lt_matches(const struct hb_lifetimes *l, const uint32_t *want)
{
	const uint32_t *bk = lifetimes_buckets_c(l);

	for (uint32_t b = 0; b < HB_LT_NBUCKETS; b++) {
		bool in = l->nb && b >= l->lo && b < l->lo + l->nb;

		cr_assert_eq(in ? bk[b - l->lo] : 0, want[b], "bucket %u", b);
	}
}

/*
 * One or two buckets live inside the struct, more on the heap: lifetimes
 * and merges that grow them either way (a few nanoseconds, where buckets
 * are 1 ns wide, and far apart) count as a plain count per bucket does.
 */
Test(leaks, buckets_inside_and_on_the_heap_count_the_same)
{
	static uint32_t want[HB_LT_NBUCKETS], want_all[HB_LT_NBUCKETS];
	struct hb_lifetimes all = { 0 };

	srandom(42);
	memset(want_all, 0, sizeof(want_all));
	for (int trial = 0; trial < 300; trial++) {
		struct hb_lifetimes l = { 0 };
		int n = 1 + (int)(rnd() % 4);

		memset(want, 0, sizeof(want));
		for (int i = 0; i < n; i++) {
			uint64_t ns = trial % 3 ? rnd() % 4 : rnd() % (10 * MS);

			cr_assert_eq(lifetimes_add(&l, ns, false), 0);
			want[lifetimes_bucket(ns)]++;
			lt_matches(&l, want);
		}
		cr_assert_eq(lifetimes_merge(&all, &l), 0);
		for (uint32_t b = 0; b < HB_LT_NBUCKETS; b++)
			want_all[b] += want[b];
		lt_matches(&all, want_all);
		lifetimes_clear(&l);
	}
	lifetimes_clear(&all);
}

Test(leaks, one_lifetime_is_its_own_quantiles)
{
	struct hb_lifetimes l = { 0 };

	cr_assert_eq(lifetimes_quantile(&l, 0.5), 0, "empty");
	cr_assert_eq(lifetimes_add(&l, 20956338, false), 0);
	cr_assert_eq(lifetimes_quantile(&l, 0.5), 20956338);
	cr_assert_eq(lifetimes_quantile(&l, 0.9), 20956338);
	lifetimes_clear(&l);
}

/* ---- trend, steadiness, confidence -------------------------------------------- */

static void fit(const float *y, size_t n, double dt, struct hb_trend *t)
{
	double *x = calloc(n, sizeof(*x));

	cr_assert_not_null(x);
	for (size_t i = 0; i < n; i++)
		x[i] = dt * (double)i;
	cr_assert_eq(leaks_trend_fit(x, y, n, t), 0);
	free(x);
}

Test(leaks, a_straight_line_is_steady_growth)
{
	float y[40];
	struct hb_trend t;

	for (int i = 0; i < 40; i++)
		y[i] = 1000.0f + 2048.0f * (float)i; /* 2048 bytes per 0.1 s */
	fit(y, 40, 0.1, &t);
	cr_assert_float_eq(t.slope, 20480.0, 1e-3);
	cr_assert_float_eq(t.r2, 1.0, 1e-9);
	cr_assert_float_eq(t.slope_se, 0.0, 1e-3);
	cr_assert(leaks_trend_is_suspect(&t, 100));
	cr_assert_not(leaks_trend_is_suspect(&t, HB_SUSPECT_MIN_LIVE - 1), "too few live samples");
}

Test(leaks, a_step_is_not_steady)
{
	float y[64];
	struct hb_trend t;

	/* a cache filled at the start, then untouched; and one filled half-way */
	for (int i = 0; i < 64; i++)
		y[i] = i < 2 ? 0 : 16 << 20;
	fit(y, 64, 0.1, &t);
	cr_assert_gt(t.slope, 0);
	cr_assert_lt(t.r2, 0.2);
	cr_assert_not(leaks_trend_is_suspect(&t, 256));
	for (int i = 0; i < 64; i++)
		y[i] = i < 32 ? 0 : 16 << 20;
	fit(y, 64, 0.1, &t);
	/* a step explains at most 3f(1-f) of the variance: 0.75 half-way */
	cr_assert_leq(t.r2, 0.76);
	cr_assert_not(leaks_trend_is_suspect(&t, 256));
}

Test(leaks, flat_falling_and_short_series_are_not_suspects)
{
	float flat[20], fall[20], noisy[20];
	struct hb_trend t;

	for (int i = 0; i < 20; i++) {
		flat[i] = 4096;
		fall[i] = 100000.0f - 1000.0f * (float)i;
		noisy[i] = 4096.0f + (float)(rnd() % 4096);
	}
	fit(flat, 20, 0.1, &t);
	cr_assert_float_eq(t.slope, 0.0, 1e-9);
	cr_assert_float_eq(t.r2, 0.0, 1e-12, "a flat series explains nothing");
	cr_assert_not(leaks_trend_is_suspect(&t, 100));
	fit(fall, 20, 0.1, &t);
	cr_assert_lt(t.slope, 0);
	cr_assert_not(leaks_trend_is_suspect(&t, 100));
	fit(noisy, 20, 0.1, &t);
	cr_assert_not(leaks_trend_is_suspect(&t, 100), "churn around a level: r2 %.2f", t.r2);
	fit(fall, HB_SUSPECT_MIN_POINTS - 1, 0.1, &t);
	t.slope = -t.slope;
	t.r2 = 1;
	cr_assert_not(leaks_trend_is_suspect(&t, 100), "fewer points than the minimum");
	cr_assert_eq(leaks_trend_fit((double[]){ 1, 1 }, (float[]){ 1, 2 }, 2, &t), -EINVAL);
	cr_assert_eq(leaks_trend_fit((double[]){ 1 }, (float[]){ 1 }, 1, &t), -EINVAL);
}

Test(leaks, slope_error_and_confidence)
{
	/* y = 10 t + noise of known size: se(slope) = sigma / sqrt(Sxx) */
	float y[101];
	struct hb_trend t;
	double sxx = 0, rel;

	for (int i = 0; i <= 100; i++) {
		y[i] = 10.0f * (float)i + (i % 2 ? 5.0f : -5.0f);
		sxx += (i - 50.0) * (i - 50.0);
	}
	fit(y, 101, 1.0, &t);
	cr_assert_float_eq(t.slope, 10.0, 0.01);
	/* residuals of +-5 (the alternation barely tilts the line): sigma^2 = 25 * 101 / 99 */
	cr_assert_float_eq(t.slope_se, sqrt(25.0 * 101 / 99 / sxx), 1e-3);
	rel = leaks_rate_rel_err(&t, 400);
	cr_assert_float_eq(rel, sqrt(1.0 / 400 + pow(t.slope_se / t.slope, 2)), 1e-12);
	cr_assert_eq(leaks_confidence_of(rel), HB_CONF_HIGH);
	cr_assert_eq(leaks_confidence_of(leaks_rate_rel_err(&t, 25)), HB_CONF_MEDIUM,
		     "1/sqrt(25) = 20%%");
	cr_assert_eq(leaks_confidence_of(leaks_rate_rel_err(&t, 4)), HB_CONF_LOW,
		     "1/sqrt(4) = 50%%");
	cr_assert(isinf(leaks_rate_rel_err(&t, 0)));
	cr_assert_str_eq(leaks_confidence_name(HB_CONF_HIGH), "high");
	cr_assert_str_eq(leaks_confidence_name(HB_CONF_LOW), "low");
}

/* ---- checkpoints ----------------------------------------------------------------- */

/* A checkpoint keeps only the stacks whose in-use changed since the one before. */
Test(leaks, checkpoints_keep_only_changes)
{
	struct collector *c = new_collector();
	const uint64_t t0 = 1000000000ULL, usize = 4096;
	const float w = (float)unbias_bytes(usize, PERIOD);
	const struct collector_checkpoint *ck;
	size_t n;

	for (uint32_t i = 0; i < 100; i++)
		alloc_ev(c, i, 0x1000 + i, 0x10000 + 64 * i, usize, t0 + i * 1000);
	/* all freed but three, before the checkpoint at 100 ms */
	for (uint32_t i = 0; i < 100; i++) {
		if (i != 7 && i != 42 && i != 99)
			free_ev(c, 0x1000 + i, 0x10000 + 64 * i, usize, 0, t0 + MS + i * 1000);
	}
	/* every stack once more, then an event after the checkpoint at 300 ms */
	for (uint32_t i = 0; i < 100; i++)
		alloc_ev(c, i, 0x1000 + i, 0x20000 + 64 * i, usize, t0 + 200 * MS + i * 1000);
	alloc_ev(c, 0, 0x1000, 0x30000, usize, t0 + 350 * MS);
	ck = collector__checkpoints(c, &n);
	cr_assert_eq(n, 4, "checkpoints at 0, 100, 200 and 300 ms");
	cr_assert_eq(ck[0].nids, 0, "nothing in use before the first event");
	cr_assert_eq(ck[1].nids, 3, "3 of 100 stacks in use");
	cr_assert_eq(ck[2].nids, 0, "nothing changed between 100 and 200 ms");
	cr_assert_eq(ck[3].nids, 100, "every stack changed");
	for (uint32_t i = 0; i < 101; i++) {
		bool kept = i == 7 || i == 42 || i == 99;

		cr_assert_eq(collector_ckpt_inuse(ck, 0, i), 0.0f);
		cr_assert_float_eq(collector_ckpt_inuse(ck, 1, i), kept ? w : 0.0f, 1e-3);
		cr_assert_float_eq(collector_ckpt_inuse(ck, 2, i), kept ? w : 0.0f, 1e-3);
		cr_assert_float_eq(collector_ckpt_inuse(ck, 3, i),
				   i == 100 ? 0.0f
				   : kept   ? 2 * w
					    : w,
				   1e-3, "stack %u", i);
	}
	collector__free(c);
}

Test(leaks, checkpoints_follow_event_time_and_halve_when_full)
{
	struct collector *c = new_collector();
	const uint64_t t0 = 5000000000ULL, step = 10 * MS, usize = 1024;
	const double w = unbias_bytes(usize, PERIOD);
	const struct collector_checkpoint *ck;
	size_t n, prev_n = 0;
	uint64_t every;

	/* 20 s of one allocation every 10 ms on stack 0, every 20 ms on stack 1 */
	for (uint64_t i = 0; i < 2000; i++) {
		alloc_ev(c, 0, 0x100, 0, usize, t0 + i * step);
		if (i % 2 == 0)
			alloc_ev(c, 1, 0x200, 0, usize, t0 + i * step + 1);
		(void)collector__checkpoints(c, &n);
		cr_assert_leq(n, COLLECTOR_MAX_CHECKPOINTS);
		/* once full, never below half */
		cr_assert(prev_n < COLLECTOR_MAX_CHECKPOINTS / 2 ||
			  n >= COLLECTOR_MAX_CHECKPOINTS / 2);
		prev_n = n;
	}
	ck = collector__checkpoints(c, &n);
	cr_assert_geq(n, COLLECTOR_MAX_CHECKPOINTS / 2);
	cr_assert_eq(ck[0].ts, t0, "the first event starts them");
	every = ck[1].ts - ck[0].ts;
	/* 100 ms doubled until 20 s fit in 64: 400 ms (50 of them) */
	cr_assert_eq(every, 400 * MS);
	for (size_t k = 0; k < n; k++) {
		/* what was allocated before the checkpoint: allocations at t0 + i * 10 ms < ts */
		uint64_t before0 = (ck[k].ts - t0 + step - 1) / step;
		uint64_t before1 = (ck[k].ts - t0 + 2 * step - 2) / (2 * step);

		cr_assert_eq(ck[k].ts, t0 + k * every, "checkpoint %zu", k);
		cr_assert_float_eq(ck[k].inuse_space, (double)(before0 + before1) * w, 1e-3,
				   "checkpoint %zu", k);
		cr_assert_float_eq(ck[k].alloc_space, (double)(before0 + before1) * w, 1e-3);
		if (k) {
			cr_assert_eq(ck[k].nstacks, 2);
			cr_assert_float_eq(collector_ckpt_inuse(ck, k, 0),
					   (float)((double)before0 * w), 1e-3 * before0 * w);
			cr_assert_float_eq(collector_ckpt_inuse(ck, k, 1),
					   (float)((double)before1 * w), 1e-3 * before1 * w + 1);
		}
	}
	/* ten minutes of silence: checkpoints of the same state, still at most 64 */
	alloc_ev(c, 0, 0x100, 0, usize, t0 + 2000 * step + 600000 * MS);
	ck = collector__checkpoints(c, &n);
	cr_assert_leq(n, COLLECTOR_MAX_CHECKPOINTS);
	cr_assert_geq(n, COLLECTOR_MAX_CHECKPOINTS / 2);
	cr_assert_float_eq(ck[n - 1].inuse_space, 3000 * w, 1e-3);
	cr_assert_leq(ck[n - 1].ts, t0 + 2000 * step + 600000 * MS);
	collector__free(c);
}

Test(leaks, no_checkpoints_after_stop)
{
	struct collector *c = new_collector();
	size_t n;

	alloc_ev(c, 0, 0x100, 0, 64, 1000 * MS);
	collector__set_stop_time(c, 1050 * MS);
	/* a free after the stop: not applied, and no checkpoint for its time */
	free_ev(c, 0x100, 0, 64, coarse(1000 * MS), 5000 * MS);
	collector__checkpoints(c, &n);
	cr_assert_eq(n, 1);
	cr_assert_eq(collector__totals(c)->ts, 1000 * MS);
	cr_assert_eq(collector__totals(c)->inuse_samples, 1);
	collector__free(c);
}

#define CK_STACKS 48
#define CK_SLOTS  1024 /* 100 ms each: the run's 70 s and more */

/* Every checkpoint of c against the dense snapshots: each read and each series the same. */
static void ckpts_match_dense(const struct collector *c, uint64_t t0, float (*dense)[CK_STACKS],
			      const bool *have)
{
	size_t n, nst = collector__nstacks(c);
	const struct collector_checkpoint *ck = collector__checkpoints(c, &n);
	float y[COLLECTOR_MAX_CHECKPOINTS];

	for (size_t k = 0; k < n; k++) {
		size_t slot = (ck[k].ts - t0) / (100 * MS);

		cr_assert_eq(ck[k].ts, t0 + slot * 100 * MS);
		cr_assert(slot < CK_SLOTS && have[slot], "checkpoint %zu", k);
		for (size_t i = 0; i <= nst; i++) {
			float got = collector_ckpt_inuse(ck, k, i);
			float want = i < CK_STACKS ? dense[slot][i] : 0.0f;

			uint32_t gb, wb;

			memcpy(&gb, &got, sizeof(gb));
			memcpy(&wb, &want, sizeof(wb));
			cr_assert_eq(gb, wb, "checkpoint %zu stack %zu: %g, not %g", k, i, got,
				     want);
		}
	}
	for (size_t i = 0; i <= nst; i++) {
		memset(y, 0, sizeof(y));
		collector_ckpt_add_series(ck, n, i, y);
		for (size_t k = 0; k < n; k++)
			cr_assert_eq(y[k], collector_ckpt_inuse(ck, k, i), "stack %zu at %zu", i,
				     k);
	}
}

/*
 * Random allocations and frees over 70 s (four halvings), stacks appearing
 * late and returning to values they had: every checkpoint kept reads, stack
 * by stack, what a dense copy of every stack's in-use taken then holds.
 */
Test(leaks, checkpoint_changes_read_like_dense_copies)
{
	struct collector *c = new_collector();
	static float dense[CK_SLOTS][CK_STACKS];
	static bool have[CK_SLOTS];
	static struct {
		uint64_t ptr, usize;
	} live[4096];
	size_t nlive = 0, n;
	const uint64_t t0 = 1000 * MS, sizes[] = { 64, 4096, 100000 };
	uint64_t ts = t0, next_ptr = 0x10000, last_ck = 0;

	memset(have, 0, sizeof(have));
	for (int ev = 0; ev < 8000 && ts < t0 + 70000 * MS; ev++) {
		const struct collector_checkpoint *ck;
		float snap[CK_STACKS];
		/* stacks appear over the run: 8 at first, all 48 after 40 s */
		uint32_t nst = 8 + (uint32_t)((ts - t0) / (1000 * MS));

		for (uint32_t i = 0; i < CK_STACKS; i++) {
			const struct hb_stack *st = collector__stack(c, i);

			snap[i] = st ? (float)st->inuse_space : 0.0f;
		}
		if (nlive && (nlive == 4096 || rnd() % 2)) {
			size_t j = rnd() % nlive;

			free_ev(c, 0, live[j].ptr, live[j].usize, 0, ts);
			live[j] = live[--nlive];
		} else {
			uint32_t stack = (uint32_t)(rnd() % (nst < CK_STACKS ? nst : CK_STACKS));

			live[nlive].ptr = next_ptr += 64;
			live[nlive].usize = sizes[rnd() % 3];
			alloc_ev(c, stack, 0x100 + stack, live[nlive].ptr, live[nlive].usize, ts);
			nlive++;
		}
		/* checkpoints taken before this event: the state before it */
		ck = collector__checkpoints(c, &n);
		for (uint64_t t = last_ck ? last_ck + 100 * MS : t0; n && t <= ck[n - 1].ts;
		     t += 100 * MS) {
			memcpy(dense[(t - t0) / (100 * MS)], snap, sizeof(snap));
			have[(t - t0) / (100 * MS)] = true;
		}
		if (n)
			last_ck = ck[n - 1].ts;
		if (ev % 500 == 0)
			ckpts_match_dense(c, t0, dense, have);
		/* mostly milliseconds apart, now and then a second or more */
		ts += rnd() % 50 ? rnd() % (20 * MS) : rnd() % (3000 * MS);
	}
	ckpts_match_dense(c, t0, dense, have);
	collector__checkpoints(c, &n);
	cr_assert_geq(n, COLLECTOR_MAX_CHECKPOINTS / 2);
	cr_assert_geq(collector__checkpoints(c, &n)[1].ts - t0, 800 * MS, "three halvings or more");
	collector__free(c);
}

/* ---- peak -------------------------------------------------------------------------- */

struct obj {
	uint64_t tctx, ptr, usize, ts;
	uint32_t stack;
};

/* Random events against a recomputation of every stack's in-use after each one. */
static void peak_vs_brute_force(bool by_ptr, int nevents)
{
	enum { NSTACKS = 12 };
	struct collector *c = new_collector();
	struct obj *live = calloc(nevents, sizeof(*live));
	int64_t best_samples[NSTACKS] = { 0 }, best_bytes[NSTACKS] = { 0 };
	double best = 0, best_space[NSTACKS] = { 0 };
	uint64_t ts = 1000 * MS, best_ts = 0, next_ptr = 0x10000;
	size_t nlive = 0;

	cr_assert_not_null(live);
	for (int i = 0; i < nevents; i++) {
		double total = 0, sum = 0;

		ts += 1 + rnd() % (2 * MS);
		/* phases of growth and shrinking, so that the peak is not simply the end */
		if (nlive && rnd() % 100 < (i / 500 % 2 ? 70 : 30)) {
			size_t k = rnd() % nlive;

			free_ev(c, live[k].tctx, by_ptr ? live[k].ptr : 0, live[k].usize,
				coarse(live[k].ts), ts);
			live[k] = live[--nlive];
		} else {
			struct obj o = { .stack = rnd() % NSTACKS, .usize = 16 << (rnd() % 12) };

			o.tctx = 0x7000 + o.stack * 0x100 + rnd() % 3 * 0x10;
			o.ptr = next_ptr += 64;
			o.ts = ts;
			alloc_ev(c, o.stack, o.tctx, o.ptr, o.usize, ts);
			live[nlive++] = o;
		}
		/* the estimated in-use the collector compares; the stacks' sum is it */
		total = collector__totals(c)->inuse_space;
		for (uint32_t k = 0; k < NSTACKS; k++) {
			const struct hb_stack *s = stack_of(c, k);

			sum += s ? s->inuse_space : 0;
		}
		cr_assert_float_eq(sum, total, 1e-6 * (total + 1));
		if (total > best) {
			best = total;
			best_ts = ts;
			for (uint32_t k = 0; k < NSTACKS; k++) {
				const struct hb_stack *s = stack_of(c, k);

				best_samples[k] = s ? s->inuse_samples : 0;
				best_bytes[k] = s ? s->inuse_bytes : 0;
				best_space[k] = s ? s->inuse_space : 0;
			}
		}
	}
	cr_assert_eq(collector__peak(c)->inuse_space, best);
	cr_assert_eq(collector__peak(c)->ts, best_ts);
	for (uint32_t k = 0; k < NSTACKS; k++) {
		const struct hb_stack *s = stack_of(c, k);

		cr_assert_not_null(s);
		cr_assert_eq(pk_of(c, s)->samples, best_samples[k], "stack %u", k);
		cr_assert_eq(pk_of(c, s)->bytes, best_bytes[k], "stack %u", k);
		cr_assert_float_eq(pk_of(c, s)->space, best_space[k], 1e-6 * (best_space[k] + 1),
				   "stack %u", k);
	}
	cr_assert_eq(collector__totals(c)->inuse_samples, (int64_t)nlive);
	collector__free(c);
	free(live);
}

/*
 * The peak is the highest estimated in-use, which the timeline and the
 * page show: one large object (sampled at about its size, weight ~1) then
 * many small ones (each standing for about PERIOD / size of its kind) that
 * hold fewer sampled bytes but far more estimated: the peak is theirs.
 */
Test(leaks, the_peak_is_the_highest_estimate_not_the_most_sampled_bytes)
{
	struct collector *c = new_collector();
	uint64_t ts = 1000 * MS, big = 64 * (uint64_t)PERIOD;

	alloc_ev(c, 0, 0x7000, 0x10000, big, ts);
	free_ev(c, 0x7000, 0x10000, big, coarse(ts), ts + MS);
	for (int i = 0; i < 200; i++)
		alloc_ev(c, 1, 0x7100, 0x20000 + 64 * (uint64_t)i, 16, ts + 2 * MS + (uint64_t)i);
	cr_assert_lt(collector__totals(c)->inuse_bytes, (int64_t)big);
	cr_assert_gt(collector__totals(c)->inuse_space, 1.5 * (double)big);
	cr_assert_eq(collector__peak(c)->ts, ts + 2 * MS + 199);
	cr_assert_eq(collector__peak(c)->inuse_space, collector__totals(c)->inuse_space);
	collector__free(c);
}

Test(leaks, peak_equals_a_brute_force_recomputation_by_tctx)
{
	peak_vs_brute_force(false, 6000);
}

Test(leaks, peak_equals_a_brute_force_recomputation_by_pointer)
{
	peak_vs_brute_force(true, 6000);
}

/* ---- lifetimes from the collector ----------------------------------------------- */

/* Frees one object per tick in a random order (5.3.0, coarse alloc time): each lifetime exact. */
Test(leaks, tctx_frees_get_heapbpfs_own_alloc_time)
{
	enum { N = 300 };
	struct collector *c = new_collector();
	struct hb_lifetimes want = { 0 };
	const struct hb_stack *s;
	uint64_t born[N], order[N];

	for (int i = 0; i < N; i++) {
		/*
		 * one per tick, at a random point inside it, not in its first 100 us:
		 * there the previous tick's sample could be taken (the match's slack
		 * for jemalloc's clock read after the probe)
		 */
		born[i] = 1000 * MS + (uint64_t)i * TICK_NS + 100000 + rnd() % (TICK_NS - 100000);
		alloc_ev(c, 0, 0x100, 0x10000 + 64 * i, 64, born[i]);
		order[i] = i;
	}
	for (int i = N - 1; i > 0; i--) {
		uint64_t j = rnd() % (i + 1), t = order[i];

		order[i] = order[j];
		order[j] = t;
	}
	for (int i = 0; i < N; i++) {
		uint64_t k = order[i], ts = born[N - 1] + MS + (uint64_t)i * 10000 + k * 7;

		free_ev(c, 0x100, 0, 64, coarse(born[k]), ts);
		cr_assert_eq(lifetimes_add(&want, ts - born[k], ts - born[k] < MS), 0);
	}
	s = stack_of(c, 0);
	cr_assert_eq(s->inuse_samples, 0);
	cr_assert_eq(lt_of(c, s)->n, N);
	cr_assert_eq(lt_of(c, s)->min_ns, want.min_ns);
	cr_assert_eq(lt_of(c, s)->max_ns, want.max_ns);
	cr_assert_eq(lt_of(c, s)->lo, want.lo);
	cr_assert_eq(lt_of(c, s)->nb, want.nb);
	cr_assert_arr_eq(lifetimes_buckets_c(lt_of(c, s)), lifetimes_buckets_c(&want),
			 want.nb * sizeof(*lifetimes_buckets_c(&want)));
	lifetimes_clear(&want);
	collector__free(c);
}

/*
 * A coarse clock that stalls (no tick for 12 ms, as seen here at a load of
 * 27) and a thread preempted between the probe and jemalloc's clock read,
 * across a tick. coarse_stalling(t): the coarse clock at t.
 */
#define STALL_FROM (1100 * MS)
#define STALL_TO   (1112 * MS)
static uint64_t coarse_stalling(uint64_t t)
{
	return t >= STALL_FROM && t < STALL_TO ? STALL_FROM : coarse(t);
}

/*
 * One thread samples every millisecond for 400 ms, each object held 50 ms
 * and freed in allocation order (5.3.0: by tctx and jemalloc's alloc_time).
 * Every seventh sample's clock read comes 900 us after its probe, across a
 * tick when the probe is in a tick's last millisecond. Returns the longest
 * and the shortest lifetime heapbpf gave.
 */
static void lagging_clock_lifetimes(bool probe_coarse, uint64_t *min_ns, uint64_t *max_ns)
{
	enum { N = 400 };
	const uint64_t hold = 50 * MS;
	struct collector *c = new_collector();
	const struct hb_stack *s;
	uint64_t born[N], alloc_time[N];
	int next_free = 0;

	for (int i = 0; i < N; i++) {
		uint64_t read_delay = i % 7 == 0 ? 900000 : 10000;

		born[i] = 1000 * MS + (uint64_t)i * MS + 300000;
		alloc_time[i] = coarse_stalling(born[i] + read_delay);
		/* the frees due before this allocation, in time order */
		while (born[next_free] + hold < born[i]) {
			free_ev(c, 0x100, 0, 64, alloc_time[next_free], born[next_free] + hold);
			next_free++;
		}
		alloc_ev_at(c, 0, 0x100, 0, 64, born[i],
			    probe_coarse ? coarse_stalling(born[i]) : 0);
	}
	for (; next_free < N; next_free++)
		free_ev(c, 0x100, 0, 64, alloc_time[next_free], born[next_free] + hold);
	s = stack_of(c, 0);
	cr_assert_eq(s->inuse_samples, 0);
	cr_assert_eq(lt_of(c, s)->n, N);
	*min_ns = lt_of(c, s)->min_ns;
	*max_ns = lt_of(c, s)->max_ns;
	collector__free(c);
}

/*
 * With the probe's coarse time a free is matched among the samples of one
 * coarse tick at most: every lifetime within the stall (12 ms) of the true
 * 50 ms. Without it, a sample whose clock read crossed a tick is passed
 * over, stays live behind the stream and ends with a lifetime of hundreds
 * of milliseconds (the loaded make test's 287 ms against 77).
 */
Test(leaks, a_lagging_coarse_clock_swaps_only_inside_a_tick)
{
	uint64_t min_ns, max_ns;

	lagging_clock_lifetimes(true, &min_ns, &max_ns);
	cr_assert_geq(min_ns, 50 * MS - (STALL_TO - STALL_FROM), "shortest %" PRIu64, min_ns);
	cr_assert_leq(max_ns, 50 * MS + (STALL_TO - STALL_FROM), "longest %" PRIu64, max_ns);
	lagging_clock_lifetimes(false, &min_ns, &max_ns);
	cr_assert_gt(max_ns, 100 * MS, "without it the longest is %" PRIu64, max_ns);
}

/* Many samples in one tick, freed within microseconds: sub-tick lifetimes, all temporary. */
Test(leaks, short_lived_samples_inside_one_tick_are_temporary)
{
	struct collector *c = new_collector();
	const struct hb_stack *s;
	uint64_t t = 1000 * MS + 100;

	for (int i = 0; i < 200; i++) {
		/* allocated, freed 3 us later; jemalloc's alloc_time lags by up to a tick */
		alloc_ev(c, 0, 0x100, 0x10000 + 64 * (i % 4), 256, t);
		free_ev(c, 0x100, 0, 256, coarse(t), t + 3000);
		t += 20000;
	}
	/* FIFO inside a tick: two allocated, the first freed first */
	alloc_ev(c, 1, 0x200, 0x20000, 256, t);
	alloc_ev(c, 1, 0x200, 0x20040, 256, t + 1000);
	free_ev(c, 0x200, 0, 256, coarse(t), t + 5000);
	free_ev(c, 0x200, 0, 256, coarse(t + 1000), t + 9000);
	s = stack_of(c, 0);
	cr_assert_eq(lt_of(c, s)->n, 200);
	cr_assert_eq(lt_of(c, s)->temporary, 200);
	cr_assert_eq(lt_of(c, s)->min_ns, 3000);
	cr_assert_eq(lt_of(c, s)->max_ns, 3000);
	s = stack_of(c, 1);
	cr_assert_eq(lt_of(c, s)->min_ns, 5000);
	cr_assert_eq(lt_of(c, s)->max_ns, 8000);
	collector__free(c);
}

Test(leaks, pointer_frees_are_exact_and_the_threshold_is_the_collectors)
{
	struct collector *c = new_collector();
	const struct hb_stack *s;

	collector__set_temporary_threshold(c, 10 * MS);
	cr_assert_eq(collector__temporary_threshold(c), 10 * MS);
	for (int i = 0; i < 50; i++)
		alloc_ev(c, 0, 0x100, 0x10000 + 64 * i, 64, 1000 * MS + i * MS);
	/* LIFO, the newest first: object i lives 1100 + 2 (49 - i) - (1000 + i) = 198 - 3i ms */
	for (int i = 49; i >= 0; i--)
		free_ev(c, 0x100, 0x10000 + 64 * i, 64, 0, 1100 * MS + (49 - i) * 2 * MS);
	s = stack_of(c, 0);
	cr_assert_eq(lt_of(c, s)->n, 50);
	cr_assert_eq(lt_of(c, s)->min_ns, 51 * MS);
	cr_assert_eq(lt_of(c, s)->max_ns, 198 * MS);
	cr_assert_eq(lt_of(c, s)->temporary, 0);
	alloc_ev(c, 0, 0x100, 0x90000, 64, 2000 * MS);
	free_ev(c, 0x100, 0x90000, 64, 0, 2009 * MS);
	cr_assert_eq(lt_of(c, s)->temporary, 1, "9 ms is under the 10 ms threshold");
	collector__free(c);
}

Test(leaks, oldest_live_sample_per_stack)
{
	struct collector *c = new_collector();
	uint64_t oldest[3];

	/* stack 0 by tctx: the first two freed, the third is the oldest live */
	for (int i = 0; i < 5; i++)
		alloc_ev(c, 0, 0x100, 0, 64, 1000 * MS + i * 10 * MS);
	free_ev(c, 0x100, 0, 64, coarse(1000 * MS), 2000 * MS);
	free_ev(c, 0x100, 0, 64, coarse(1010 * MS), 2001 * MS);
	/* stack 1: nothing live; stack 2: one, allocated last */
	alloc_ev(c, 1, 0x200, 0, 64, 1500 * MS);
	free_ev(c, 0x200, 0, 64, coarse(1500 * MS), 2002 * MS);
	alloc_ev(c, 2, 0x300, 0, 64, 1900 * MS);
	cr_assert_eq(collector__nstacks(c), 3);
	collector__oldest_live(c, oldest);
	cr_assert_eq(oldest[0], 1020 * MS);
	cr_assert_eq(oldest[1], 0);
	cr_assert_eq(oldest[2], 1900 * MS);
	collector__free(c);
}

/* ---- suspects of a synthetic run ------------------------------------------------ */

/*
 * 10 s: a leak of 1 KiB every 10 ms (stack 0), a slow leak of 256 B every
 * 40 ms (1), a cache of 4 MiB allocated in the first 100 ms (2), and churn
 * freed 2 us after allocation (3).
 */
static struct collector *synthetic_run(void)
{
	struct collector *c = new_collector();
	const uint64_t t0 = 1000 * MS;

	for (int i = 0; i < 64; i++)
		alloc_ev(c, 2, 0x300, 0, 64 << 10, t0 + (uint64_t)i * MS);
	for (uint64_t t = t0; t < t0 + 10000 * MS; t += MS) {
		uint64_t k = (t - t0) / MS;

		if (k % 10 == 0)
			alloc_ev(c, 0, 0x100, 0, 1024, t + 1);
		if (k % 40 == 0)
			alloc_ev(c, 1, 0x200, 0, 256, t + 2);
		alloc_ev(c, 3, 0x400, 0, 128, t + 3);
		free_ev(c, 0x400, 0, 128, coarse(t + 3), t + 2003);
	}
	collector__set_stop_time(c, t0 + 10000 * MS);
	return c;
}

static int64_t label(const struct hb_sample *s, const char *key)
{
	for (uint32_t i = 0; i < s->nlabels; i++) {
		if (!strcmp(s->labels[i].key, key))
			return s->labels[i].num;
	}
	return -1;
}

Test(leaks, synthetic_run_ranks_leaks_and_labels_lifetimes)
{
	struct collector *c = synthetic_run();
	struct hb_profile *p = calloc(1, sizeof(*p));
	struct hb_analysis *a;
	uint32_t idx[4];
	double fast;

	cr_assert_not_null(p);
	cr_assert_eq(collector__nstacks(c), 4);
	p->nsamples = 4;
	p->samples = calloc(4, sizeof(*p->samples));
	cr_assert_not_null(p->samples);
	cr_assert_eq(leaks_analysis__new(&a), 0);
	/* sample k is stack k (by leaf frame) */
	for (uint32_t k = 0; k < 4; k++) {
		idx[k] = stack_of(c, k) - collector__stack(c, 0);
		cr_assert_eq(leaks_analysis__add(a, k, c, idx[k]), 0);
	}
	cr_assert_eq(leaks_analysis__finish(a, p), 0);
	cr_assert_geq(a->axes[0].n, HB_SUSPECT_MIN_POINTS);
	/* the two leaks, fastest first; not the cache, not the churn */
	cr_assert_eq(a->nsuspects, 2);
	cr_assert_eq(a->suspects[0], 0);
	cr_assert_eq(a->suspects[1], 1);
	/* 100 KiB of usable size a second, unbiased: within 1% */
	fast = 100 * unbias_bytes(1024, PERIOD);
	cr_assert_float_eq(a->s[0].trend.slope, fast, fast / 100);
	cr_assert_eq(label(&p->samples[0], "leak_rank"), 1);
	cr_assert_float_eq((double)label(&p->samples[0], "inuse_growth"), fast, fast / 100);
	cr_assert_eq(label(&p->samples[1], "leak_rank"), 2);
	cr_assert_eq(label(&p->samples[2], "leak_rank"), -1, "the cache is no suspect");
	cr_assert_eq(label(&p->samples[3], "leak_rank"), -1, "the churn is no suspect");
	/* the oldest live leak sample: the first, 10 s before the end */
	cr_assert_float_eq((double)label(&p->samples[0], "oldest_live_age"), 10000.0 * MS, 2 * MS);
	/* the churn: every one freed, every one temporary, 2 us each */
	cr_assert_eq(label(&p->samples[3], "freed"), 10000);
	cr_assert_eq(label(&p->samples[3], "temporary"), 10000);
	cr_assert_eq(label(&p->samples[3], "live_at_end"), 0);
	cr_assert_eq(label(&p->samples[3], "lifetime_p50"), 2000);
	cr_assert_eq(label(&p->samples[0], "freed"), 0);
	cr_assert_eq(label(&p->samples[0], "live_at_end"), 1000);
	cr_assert_eq(label(&p->samples[0], "lifetime_p50"), -1, "nothing freed: no lifetimes");
	leaks_analysis__free(a);
	hb_profile__free(p);
	collector__free(c);
}

/* ---- held suspects ------------------------------------------------------------ */

/* Lifetimes of n objects, each `ns` long. */
static struct hb_lifetimes lifetimes_of(uint64_t n, uint64_t ns)
{
	struct hb_lifetimes l = { 0 };

	for (uint64_t i = 0; i < n; i++)
		cr_assert_eq(lifetimes_add(&l, ns, ns < MS), 0);
	return l;
}

Test(leaks, held_cutoff_rule)
{
	const uint64_t w = 3000 * MS;
	struct hb_lifetimes own8 = lifetimes_of(8, MS), own3 = lifetimes_of(3, 2500 * MS),
			    all = lifetimes_of(100, 20 * MS), slow = lifetimes_of(8, 400 * MS),
			    none = { 0 };
	enum hb_held_base base;

	/* enough frees of its own: against them; half the window is the larger */
	cr_assert_eq(leaks_held_cutoff(w, &own8, &all, &base), w / 2);
	cr_assert_eq(base, HB_HELD_OWN);
	/* too few of its own: the window's 20 ms (10x: 200 ms), but past each of its own */
	cr_assert_eq(leaks_held_cutoff(w, &own3, &all, &base), 2500 * MS);
	cr_assert_eq(base, HB_HELD_WINDOW);
	cr_assert_eq(leaks_held_cutoff(w, &none, &all, &base), w / 2);
	cr_assert_eq(base, HB_HELD_WINDOW);
	/* objects that live 400 ms: held means past 4 s, longer than the window */
	cr_assert_eq(leaks_held_cutoff(w, &slow, &all, &base), 4000 * MS);
	cr_assert_eq(base, HB_HELD_OWN);
	/* nothing freed to compare with: not judged */
	cr_assert_eq(leaks_held_cutoff(w, &own3, &own3, &base), 0);
	cr_assert_eq(base, HB_HELD_NONE);
	cr_assert_eq(leaks_held_cutoff(w, &none, &none, &base), 0);
	cr_assert_eq(base, HB_HELD_NONE);
	cr_assert(!leaks_held_is_suspect(HB_HELD_MIN_LIVE - 1));
	cr_assert(leaks_held_is_suspect(HB_HELD_MIN_LIVE));
	lifetimes_clear(&own8);
	lifetimes_clear(&own3);
	lifetimes_clear(&all);
	lifetimes_clear(&slow);
}

/* Each stack k of c as profile sample k, in use as given; the analysis finished. */
static struct hb_analysis *analyse(struct collector *c, uint32_t n, const int64_t *inuse,
				   struct hb_profile **out)
{
	struct hb_profile *p = calloc(1, sizeof(*p));
	struct hb_analysis *a;

	cr_assert_not_null(p);
	cr_assert_eq(collector__nstacks(c), n);
	p->nsamples = n;
	p->samples = calloc(n, sizeof(*p->samples));
	cr_assert_not_null(p->samples);
	cr_assert_eq(leaks_analysis__new(&a), 0);
	for (uint32_t k = 0; k < n; k++) {
		p->samples[k].v[HB_INUSE_SPACE] = inuse ? inuse[k] : 0;
		cr_assert_eq(leaks_analysis__add(a, k, c, stack_of(c, k) - collector__stack(c, 0)),
			     0);
	}
	cr_assert_eq(leaks_analysis__finish(a, p), 0);
	*out = p;
	return a;
}

/*
 * The program, 3 s: 21 objects of 512 KiB allocated in the first
 * 300 ms and never freed (stack 0), among 56k objects freed 50 us after
 * their allocation (1). Beside them: 10 objects allocated in the last
 * second (2: too young), 5 kept from the start by a site whose own objects
 * live 2.5 s (3: its own lifetimes say that is long, not odd), 3 kept from
 * the start (4: too few to say). by_ptr: frees name pointers (5.2.1,
 * 5.3.1), else tctxs (5.3.0).
 */
struct ev {
	uint64_t ts, born, ptr, tctx;
	uint32_t stack;
	bool is_free;
};

static int cmp_ev(const void *a, const void *b)
{
	const struct ev *x = a, *y = b;

	return x->ts < y->ts ? -1 : x->ts > y->ts;
}

static struct collector *burst_then_hold(bool by_ptr)
{
	enum { NCHURN = 56000, MAXEV = 2 * NCHURN + 100 };
	struct ev *ev = calloc(MAXEV, sizeof(*ev));
	struct collector *c = new_collector();
	const uint64_t t0 = 1000 * MS;
	size_t n = 0;

	cr_assert_not_null(ev);
	for (uint64_t i = 0; i < 21; i++)
		ev[n++] = (struct ev){ .ts = t0 + 100 + i * 14 * MS,
				       .ptr = 0x100000 * (i + 1),
				       .tctx = 0x100,
				       .stack = 0 };
	for (uint64_t k = 0; k < NCHURN; k++) {
		uint64_t t = t0 + 1000 + k * 50000;

		ev[n++] = (struct ev){ .ts = t, .ptr = 0x9000000, .tctx = 0x200, .stack = 1 };
		ev[n++] = (struct ev){ .ts = t + 49999,
				       .born = t,
				       .ptr = 0x9000000,
				       .tctx = 0x200,
				       .stack = 1,
				       .is_free = true };
	}
	for (uint64_t i = 0; i < 10; i++)
		ev[n++] = (struct ev){ .ts = t0 + 2000 * MS + i * 80 * MS + 11,
				       .ptr = 0x20000000 + 0x1000 * i,
				       .tctx = 0x300,
				       .stack = 2 };
	for (uint64_t i = 0; i < 5; i++)
		ev[n++] = (struct ev){ .ts = t0 + 200 + i * MS,
				       .ptr = 0x30000000 + 0x1000 * i,
				       .tctx = 0x400,
				       .stack = 3 };
	for (uint64_t i = 0; i < 10; i++) {
		uint64_t t = t0 + 50 * MS + i * 20 * MS + 13;

		ev[n++] = (struct ev){
			.ts = t, .ptr = 0x31000000 + 0x1000 * i, .tctx = 0x410, .stack = 3
		};
		ev[n++] = (struct ev){ .ts = t + 2500 * MS,
				       .born = t,
				       .ptr = 0x31000000 + 0x1000 * i,
				       .tctx = 0x410,
				       .stack = 3,
				       .is_free = true };
	}
	for (uint64_t i = 0; i < 3; i++)
		ev[n++] = (struct ev){ .ts = t0 + 300 + i * MS,
				       .ptr = 0x40000000 + 0x1000 * i,
				       .tctx = 0x500,
				       .stack = 4 };
	qsort(ev, n, sizeof(*ev), cmp_ev);
	for (size_t i = 0; i < n; i++) {
		uint64_t ptr = by_ptr ? ev[i].ptr : 0;

		if (ev[i].is_free)
			free_ev(c, ev[i].tctx, ptr, 4096, coarse(ev[i].born), ev[i].ts);
		else
			alloc_ev(c, ev[i].stack, ev[i].tctx, ptr, ev[i].stack ? 4096 : 512 << 10,
				 ev[i].ts);
	}
	free(ev);
	return c;
}

static void held_in_burst_then_hold(bool by_ptr)
{
	struct collector *c = burst_then_hold(by_ptr);
	/* in use as the profile would say: the burst the most */
	const int64_t inuse[5] = { 21 << 20, 0, 40 << 10, 20 << 10, 12 << 10 };
	struct hb_profile *p;
	struct hb_analysis *a = analyse(c, 5, inuse, &p);
	const struct hb_axis *ax = &a->axes[0];
	uint64_t window = ax->end_ts - ax->t0_ts;

	cr_assert_eq(a->nsuspects, 0, "a burst is a step, no steady growth");
	cr_assert_eq(a->nheld, 1);
	cr_assert_eq(a->held[0], 0);
	cr_assert_eq(a->s[0].held, 21);
	cr_assert_eq(a->s[0].held_base, HB_HELD_WINDOW, "it freed nothing of its own");
	cr_assert_eq(a->s[0].held_over, (uint64_t)(window * HB_HELD_WINDOW_SHARE));
	cr_assert_eq(label(&p->samples[0], "held_rank"), 1);
	cr_assert_eq(label(&p->samples[0], "held_live"), 21);
	cr_assert_eq(label(&p->samples[0], "held_over"), (int64_t)a->s[0].held_over);
	cr_assert_eq(label(&p->samples[0], "freed"), 0);
	cr_assert_eq(label(&p->samples[0], "live_at_end"), 21);
	cr_assert_float_eq((double)label(&p->samples[0], "oldest_live_age"),
			   (double)(ax->end_ts - (1000 * MS + 100)), 1);
	/* the churn: nothing live */
	cr_assert_eq(a->s[1].held, 0);
	cr_assert_eq(label(&p->samples[1], "held_rank"), -1);
	/* allocated in the last second: younger than half the window */
	cr_assert_eq(a->s[2].held, 0);
	cr_assert_eq(a->s[2].live, 10);
	cr_assert(!a->s[2].held_suspect);
	/* its own objects live 2.5 s: 10x that is past the window */
	cr_assert_eq(a->s[3].held_base, HB_HELD_OWN);
	cr_assert_gt(a->s[3].held_over, window);
	cr_assert_eq(a->s[3].live, 5);
	cr_assert_eq(a->s[3].held, 0);
	cr_assert_eq(label(&p->samples[3], "held_rank"), -1);
	/* held, but three samples say too little */
	cr_assert_eq(a->s[4].held, 3);
	cr_assert(!a->s[4].held_suspect);
	cr_assert_eq(label(&p->samples[4], "held_rank"), -1);
	leaks_analysis__free(a);
	hb_profile__free(p);
	collector__free(c);
}

Test(leaks, burst_then_hold_is_held_by_tctx)
{
	held_in_burst_then_hold(false);
}

Test(leaks, burst_then_hold_is_held_by_pointer)
{
	held_in_burst_then_hold(true);
}

/*
 * The synthetic run: the cache filled in its first 100 ms and never freed
 * is held (a cache filled inside the window looks like that); the two
 * leaks are growth suspects and so not held suspects as well; ranked by
 * in use.
 */
Test(leaks, held_suspects_are_not_growth_suspects)
{
	struct collector *c = synthetic_run();
	struct hb_profile *p;
	struct hb_analysis *a = analyse(c, 4, NULL, &p);

	cr_assert_eq(a->nsuspects, 2);
	cr_assert_eq(a->nheld, 1);
	cr_assert_eq(a->held[0], 2);
	cr_assert_eq(a->s[2].held, 64);
	cr_assert_eq(label(&p->samples[2], "held_rank"), 1);
	cr_assert_eq(label(&p->samples[2], "leak_rank"), -1);
	cr_assert_eq(label(&p->samples[0], "held_rank"), -1, "a growth suspect");
	cr_assert_eq(label(&p->samples[1], "held_rank"), -1, "a growth suspect");
	cr_assert_eq(a->s[0].held, 0, "not judged");
	leaks_analysis__free(a);
	hb_profile__free(p);
	collector__free(c);
}

/* Nothing freed in the window: no lifetime to hold the live objects against. */
Test(leaks, held_needs_frees_to_compare_with)
{
	struct collector *c = new_collector();
	struct hb_profile *p;
	struct hb_analysis *a;

	for (int i = 0; i < 32; i++)
		alloc_ev(c, 0, 0x100, 0x1000 * (i + 1), 4096, 1000 * MS + i * MS);
	for (int i = 0; i < 7; i++) {
		alloc_ev(c, 1, 0x200, 0x900000, 64, 1100 * MS + i * 400 * MS);
		free_ev(c, 0x200, 0x900000, 64, coarse(1100 * MS + i * 400 * MS),
			1100 * MS + i * 400 * MS + 10);
	}
	a = analyse(c, 2, NULL, &p);
	cr_assert_geq(a->axes[0].n, HB_SUSPECT_MIN_POINTS);
	cr_assert_eq(a->axes[0].lt.n, 7);
	cr_assert_eq(a->nheld, 0);
	cr_assert_eq(a->s[0].held_base, HB_HELD_NONE);
	cr_assert_eq(label(&p->samples[0], "held_rank"), -1);
	leaks_analysis__free(a);
	hb_profile__free(p);
	collector__free(c);
}

/* The live samples allocated before a per-stack instant, whichever index frees use. */
static void count_live_before(bool by_ptr)
{
	struct collector *c = new_collector();
	uint64_t before[2];
	uint32_t n[2];

	for (int i = 0; i < 6; i++)
		alloc_ev(c, 0, 0x100, by_ptr ? 0x1000 * (i + 1) : 0, 64, 1000 * MS + i * 10 * MS);
	alloc_ev(c, 1, 0x200, by_ptr ? 0x90000 : 0, 64, 1005 * MS);
	/* before any free: both indexes */
	before[0] = 1030 * MS;
	before[1] = 1005 * MS;
	collector__count_live_before(c, before, n);
	cr_assert_eq(n[0], 3);
	cr_assert_eq(n[1], 0, "allocated at, not before");
	/* the second one freed: not counted */
	free_ev(c, 0x100, by_ptr ? 0x2000 : 0, 64, coarse(1010 * MS), 1100 * MS);
	before[1] = 1006 * MS;
	collector__count_live_before(c, before, n);
	cr_assert_eq(n[0], 2);
	cr_assert_eq(n[1], 1);
	before[0] = 0;
	collector__count_live_before(c, before, n);
	cr_assert_eq(n[0], 0, "0: none counted");
	collector__free(c);
}

Test(leaks, count_live_before_by_tctx)
{
	count_live_before(false);
}

Test(leaks, count_live_before_by_pointer)
{
	count_live_before(true);
}

/* Samples with numeric labels as pprof writes them: key, number and unit. */
Test(leaks, labels_reach_pprof_with_units)
{
	struct hb_profile *p = calloc(1, sizeof(*p));
	Perftools__Profiles__Profile *pp;
	const Perftools__Profiles__Label *l;
	uint8_t *gz;
	size_t len;

	cr_assert_not_null(p);
	p->nsamples = 1;
	p->samples = calloc(1, sizeof(*p->samples));
	cr_assert_not_null(p->samples);
	p->samples[0].pid = 42;
	p->samples[0].nlabels = 2;
	p->samples[0].labels = calloc(2, sizeof(*p->samples[0].labels));
	cr_assert_not_null(p->samples[0].labels);
	p->samples[0].labels[0] = (struct hb_label){ "lifetime_p50", "nanoseconds", 2500 };
	p->samples[0].labels[1] = (struct hb_label){ "freed", NULL, 7 };
	cr_assert_eq(pprof_encode(p, &gz, &len), 0);
	cr_assert_eq(pprof_decode(gz, len, &pp), 0);
	cr_assert_eq(pp->n_sample, 1);
	cr_assert_eq(pp->sample[0]->n_value, HB_NVALUES, "the four sample types stay");
	cr_assert_eq(pp->sample[0]->n_label, 3);
	cr_assert_str_eq(pp->string_table[pp->sample[0]->label[0]->key], "pid");
	l = pp->sample[0]->label[1];
	cr_assert_str_eq(pp->string_table[l->key], "lifetime_p50");
	cr_assert_eq(l->num, 2500);
	cr_assert_str_eq(pp->string_table[l->num_unit], "nanoseconds");
	l = pp->sample[0]->label[2];
	cr_assert_str_eq(pp->string_table[l->key], "freed");
	cr_assert_eq(l->num, 7);
	cr_assert_eq(l->num_unit, 0, "no unit");
	perftools__profiles__profile__free_unpacked(pp, NULL);
	free(gz);
	hb_profile__free(p);
}

/* --interval starts a window with collector__reset_alloc: the evidence stays. */
Test(leaks, a_new_window_keeps_the_evidence)
{
	struct collector *c = synthetic_run();
	const struct hb_stack *churn = stack_of(c, 3), *leak = stack_of(c, 0);
	struct collector_totals peak = *collector__peak(c);
	size_t n, n2;
	uint64_t freed = lt_of(c, churn)->n;

	collector__checkpoints(c, &n);
	collector__reset_alloc(c);
	collector__checkpoints(c, &n2);
	cr_assert_eq(churn->samples, 0, "the window's allocations restart");
	cr_assert_eq(n2, n);
	cr_assert_eq(lt_of(c, churn)->n, freed);
	cr_assert_eq(leak->inuse_samples, 1000);
	cr_assert_eq(pk_of(c, leak)->samples, 1000);
	cr_assert_eq(collector__peak(c)->ts, peak.ts);
	cr_assert_eq(collector__peak(c)->inuse_bytes, peak.inuse_bytes);
	collector__free(c);
}

static int parse(struct cli *c, const char *const *args)
{
	char *argv[16];
	int argc = 0;

	while (args[argc] && argc < 15) {
		argv[argc] = (char *)args[argc];
		argc++;
	}
	argv[argc] = NULL;
	return hb_cli_parse(argc, argv, c);
}

Test(leaks, options)
{
	struct cli c;

	cr_assert_eq(parse(&c, (const char *[]){ "heapbpf", "--pid", "1", NULL }), 0);
	cr_assert_not(c.run.leaks);
	cr_assert_null(c.run.at_peak);
	cr_assert_eq(c.run.temporary_ns, 1000000, "1 ms by default");
	cr_assert_eq(parse(&c, (const char *[]){ "heapbpf", "--pid", "1", "--leaks", "--at-peak",
						 "peak.pb.gz", "--temporary-threshold", "250us",
						 NULL }),
		     0);
	cr_assert(c.run.leaks);
	cr_assert_str_eq(c.run.at_peak, "peak.pb.gz");
	cr_assert_eq(c.run.temporary_ns, 250000);
	cr_assert_eq(parse(&c, (const char *[]){ "heapbpf", "-p", "1", "--temporary-threshold",
						 "2s", NULL }),
		     0);
	cr_assert_eq(c.run.temporary_ns, 2000000000ULL);
	cr_assert_eq(parse(&c, (const char *[]){ "heapbpf", "-p", "1", "--temporary-threshold",
						 "0.005", NULL }),
		     0);
	cr_assert_eq(c.run.temporary_ns, 5000000, "a bare number is seconds");
	cr_assert_eq(parse(&c, (const char *[]){ "heapbpf", "report", "r.hbr", "--leaks",
						 "--at-peak", "p.folded", "-f", "folded", NULL }),
		     0);
	cr_assert(c.run.leaks);
	for (const char *const *bad =
		     (const char *const[]){ "0", "-1ms", "1h", "ms", "", "2d", "100000s", NULL };
	     *bad; bad++)
		cr_assert_eq(parse(&c, (const char *[]){ "heapbpf", "-p", "1",
							 "--temporary-threshold", *bad, NULL }),
			     -EINVAL, "\"%s\" taken", *bad);
	/* one file: not with several targets or windows */
	cr_assert_eq(parse(&c, (const char *[]){ "heapbpf", "--unit", "x", "--at-peak", "p.pb.gz",
						 NULL }),
		     -EINVAL);
	cr_assert_eq(parse(&c, (const char *[]){ "heapbpf", "-p", "1", "--output-dir", "/tmp",
						 "--at-peak", "p.pb.gz", NULL }),
		     -EINVAL);
	cr_assert_eq(parse(&c, (const char *[]){ "heapbpf", "-p", "1", "-o", "p.pb.gz", "--at-peak",
						 "p.pb.gz", NULL }),
		     -EINVAL, "the profile's own file");
	cr_assert_eq(parse(&c, (const char *[]){ "heapbpf", "top", "-p", "1", "--leaks", NULL }),
		     -EINVAL);
}

/* A corrupt recording's clock near 2^64 ns: a few checkpoints, no endless loop. */
Test(leaks, checkpoints_survive_absurd_clocks, .timeout = 10)
{
	struct collector *c = new_collector();
	size_t n;

	alloc_ev(c, 0, 0x100, 0, 64, 1000);
	alloc_ev(c, 0, 0x100, 0, 64, UINT64_MAX - 5);
	alloc_ev(c, 0, 0x100, 0, 64, UINT64_MAX);
	alloc_ev(c, 0, 0x100, 0, 64, UINT64_MAX);
	collector__checkpoints(c, &n);
	cr_assert_leq(n, COLLECTOR_MAX_CHECKPOINTS);
	cr_assert_eq(collector__totals(c)->inuse_samples, 4);
	collector__free(c);
}

/* The flame graph page draws the timeline: in use, allocation rate, the peak. */
Test(leaks, flame_graph_draws_the_timeline)
{
	struct hb_profile *p = calloc(1, sizeof(*p));
	char *page = NULL, *svg, *pts;
	size_t len = 0, commas = 0;
	FILE *f;

	cr_assert_not_null(p);
	p->ntimeline = 5;
	p->timeline = calloc(5, sizeof(*p->timeline));
	cr_assert_not_null(p->timeline);
	for (int i = 0; i < 5; i++)
		p->timeline[i] = (struct hb_timeline_point){ 1000000000LL * (10 + i), 1024.0 * i,
							     i ? 4096.0 : 0 };
	p->peak_time_nanos = 1000000000LL * 13 + 500000000;
	p->peak_inuse_space = 4096;
	f = open_memstream(&page, &len);
	cr_assert_not_null(f);
	cr_assert_eq(flamegraph_write(p, HB_INUSE_SPACE, f), 0);
	fclose(f);
	svg = strstr(page, "<svg id=\"hb-timeline\"");
	cr_assert_not_null(svg, "%s", page);
	cr_assert(strstr(page, "over 4.0 s: in use (area, at most 4.0 KiB), allocated per second "
			       "(line, at most 4.0 KiB), peak (dashed)"),
		  "%s", page);
	/* the area: the 5 points between its two corners on the baseline */
	pts = strstr(svg, "points=\"0,100 ");
	cr_assert_not_null(pts);
	cr_assert(strncmp(pts,
			  "points=\"0,100 0.0,100.0 250.0,76.2 500.0,52.5 750.0,28.8 "
			  "1000.0,5.0 1000,100\"",
			  strlen("points=\"0,100 0.0,100.0 250.0,76.2 500.0,52.5 750.0,28.8 "
				 "1000.0,5.0 1000,100\"")) == 0,
		  "%.120s", pts);
	/* the rate: from the second point on; the peak at 3.5 s of 4 */
	pts = strstr(svg, "<polyline");
	cr_assert_not_null(pts);
	for (char *q = strstr(pts, "points=\""); *q && *q != '/'; q++)
		commas += *q == ',';
	cr_assert_eq(commas, 4);
	cr_assert(strstr(svg, "<line x1=\"875.0\" x2=\"875.0\""), "%.600s", svg);
	free(page);
	/* no timeline, no chart */
	p->ntimeline = 1;
	page = NULL;
	f = open_memstream(&page, &len);
	cr_assert_eq(flamegraph_write(p, HB_INUSE_SPACE, f), 0);
	fclose(f);
	cr_assert_null(strstr(page, "hb-timeline"));
	free(page);
	hb_profile__free(p);
}

/* ---- --follow-forks: the sum over processes, and the timeline's peak ---- */

/* An allocation into c, and its change into the sum, as the session feeds them. */
static void sum_alloc(struct procsum *sum, struct collector *c, uint32_t stack, uint64_t ptr,
		      uint64_t usize, uint64_t ts)
{
	struct collector_totals before = *collector__totals(c);

	alloc_ev(c, stack, 0, ptr, usize, ts);
	procsum__add(sum, &before, collector__totals(c));
}

static void sum_free(struct procsum *sum, struct collector *c, uint64_t ptr, uint64_t usize,
		     uint64_t ts)
{
	struct collector_totals before = *collector__totals(c);

	free_ev(c, 0, ptr, usize, 0, ts);
	procsum__add(sum, &before, collector__totals(c));
}

/* One process alone: the sum's checkpoints and peak are its collector's own. */
Test(leaks, sum_of_one_process_is_its_collector)
{
	struct collector *c = new_collector();
	struct procsum *sum;
	const struct collector_checkpoint *ck;
	const struct collector_totals *sk;
	const uint64_t t0 = 5000000000ULL;
	size_t n, m;

	cr_assert_eq(procsum__new(&sum), 0);
	/* 20 s of growth and shrinking, by pointer: every free matched */
	for (uint64_t i = 0; i < 2000; i++) {
		sum_alloc(sum, c, (uint32_t)(i % 7), 0x10000 + 16 * i, 512 + 64 * (i % 5),
			  t0 + i * 10 * MS);
		if (i % 3 == 2 && (i / 300) % 2)
			sum_free(sum, c, 0x10000 + 16 * (i - 2), 512 + 64 * ((i - 2) % 5),
				 t0 + i * 10 * MS + 1);
	}
	ck = collector__checkpoints(c, &n);
	sk = procsum__checkpoints(sum, &m);
	cr_assert_eq(m, n);
	cr_assert_gt(n, COLLECTOR_MAX_CHECKPOINTS / 2 - 1, "the test did not make them halve");
	for (size_t k = 0; k < n; k++) {
		cr_assert_eq(sk[k].ts, ck[k].ts, "checkpoint %zu", k);
		cr_assert_float_eq(sk[k].inuse_space, ck[k].inuse_space,
				   1e-6 * ck[k].inuse_space + 1);
		cr_assert_float_eq(sk[k].alloc_space, ck[k].alloc_space,
				   1e-6 * ck[k].alloc_space + 1);
	}
	cr_assert_eq(procsum__peak(sum)->ts, collector__peak(c)->ts);
	cr_assert_eq(procsum__peak(sum)->inuse_bytes, collector__peak(c)->inuse_bytes);
	cr_assert_eq(procsum__totals(sum)->inuse_bytes, collector__totals(c)->inuse_bytes);
	cr_assert_eq(procsum__totals(sum)->ts, collector__totals(c)->ts);
	procsum__free(sum);
	collector__free(c);
}

static int64_t wall_same(uint64_t ts, const void *arg)
{
	(void)arg;
	return (int64_t)ts;
}

/*
 * A parent that holds 4 KiB and a child that holds 4 MiB for 30 ms,
 * between two checkpoints: the sum's peak is both together, its
 * checkpoints each the sum then, and the timeline built from them holds the
 * peak at its own time, so the summary's sparkline max is the peak's.
 */
Test(leaks, sum_over_processes_and_its_peak_between_checkpoints)
{
	struct collector *parent = new_collector(), *child = new_collector();
	struct hb_profile *p = calloc(1, sizeof(*p));
	const uint64_t t0 = 1000000000ULL, big = 64 << 10;
	const double w = unbias_bytes(4096, PERIOD), wb = unbias_bytes(big, PERIOD);
	const struct collector_totals *ck, *pk;
	struct procsum *sum;
	char *out = NULL, text[160], want[200], b[32];
	size_t n, len = 0;
	FILE *f;

	cr_assert_not_null(p);
	cr_assert_eq(procsum__new(&sum), 0);
	sum_alloc(sum, parent, 0, 0x1000, 4096, t0);
	for (uint64_t i = 0; i < 64; i++)
		sum_alloc(sum, child, 1, 0x100000 + i * big, big, t0 + 150 * MS + i);
	for (uint64_t i = 0; i < 64; i++)
		sum_free(sum, child, 0x100000 + i * big, big, t0 + 180 * MS + i);
	sum_alloc(sum, parent, 0, 0x2000, 4096, t0 + 250 * MS);

	pk = procsum__peak(sum);
	cr_assert_eq(pk->inuse_bytes, 4096 + 64 * (int64_t)big);
	cr_assert_eq(pk->ts, t0 + 150 * MS + 63);
	cr_assert_float_eq(pk->inuse_space, w + 64 * wb, 1e-6 * pk->inuse_space);
	/* each process's own peak is its own, not the sum's */
	cr_assert_eq(collector__peak(parent)->inuse_bytes, 8192);
	cr_assert_eq(collector__peak(child)->inuse_bytes, 64 * (int64_t)big);
	ck = procsum__checkpoints(sum, &n);
	cr_assert_eq(n, 3);
	cr_assert_eq(ck[0].ts, t0);
	cr_assert_float_eq(ck[0].inuse_space, 0, 1e-9);
	cr_assert_eq(ck[1].ts, t0 + 100 * MS);
	cr_assert_float_eq(ck[1].inuse_space, w, 1e-6 * w);
	cr_assert_eq(ck[2].ts, t0 + 200 * MS);
	cr_assert_float_eq(ck[2].inuse_space, w, 1e-6 * w, "the child's frees are in the sum");
	cr_assert_float_eq(ck[2].alloc_space, w + 64 * wb, 1e-6 * (w + 64 * wb));
	cr_assert_eq(procsum__totals(sum)->ts, t0 + 250 * MS);

	/* the timeline: checkpoints, the peak between the second and the third, now */
	cr_assert_eq(report_timeline(p, ck, n, procsum__totals(sum), pk, wall_same, NULL), 0);
	cr_assert_eq(p->ntimeline, 5);
	cr_assert_eq(p->timeline[2].time_nanos, (int64_t)pk->ts);
	cr_assert_float_eq(p->timeline[2].inuse_space, pk->inuse_space, 1e-9);
	cr_assert_eq(p->timeline[4].time_nanos, (int64_t)(t0 + 250 * MS));
	for (size_t i = 1; i < p->ntimeline; i++)
		cr_assert_gt(p->timeline[i].time_nanos, p->timeline[i - 1].time_nanos);
	/* the peak's point takes its interval's rate: no spike from a few ns after a checkpoint */
	cr_assert_float_eq(p->timeline[2].alloc_rate, p->timeline[3].alloc_rate, 1e-6);
	cr_assert_float_eq(p->timeline[3].alloc_rate, (64 * wb) / 0.1, 1e-6 * 64 * wb / 0.1);
	cr_assert_eq(p->peak_time_nanos, (int64_t)pk->ts);

	f = open_memstream(&out, &len);
	cr_assert_not_null(f);
	summary_timeline(f, p, NULL, "");
	fclose(f);
	cr_assert_eq(summary_peak_text(text, sizeof(text), p), 0);
	/* one peak, said once: the sparkline gives no figure of its own */
	summary_bytes(b, sizeof(b), pk->inuse_space);
	snprintf(want, sizeof(want), "peak in use %s (estimated)", b);
	cr_assert(strstr(out, want), "no \"%s\" in:\n%s", want, out);
	cr_assert_null(strstr(out, "B (estimated)\nheapbpf: allocated"), "%s", out);
	cr_assert(strstr(out, text), "%s", out);
	cr_assert(strstr(out, "heapbpf: in use over 250.0 ms "), "%s", out);
	free(out);
	hb_profile__free(p);
	procsum__free(sum);
	collector__free(parent);
	collector__free(child);
}
