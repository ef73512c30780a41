// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The collector fed with synthetic ring-buffer events. */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <linux/types.h>

#include "collect/collector.h"
#include "heapbpf.h"
#include "collect/unbias.h"

#define PERIOD 4096

static struct collector *c;

static void setup(void)
{
	cr_assert_eq(collector__new(PERIOD, &c), 0);
	cr_assert_not_null(c);
}

static void teardown(void)
{
	collector__free(c);
	c = NULL;
}

TestSuite(collector, .init = setup, .fini = teardown);

static int alloc_ev(uint64_t tctx, uint64_t usize, const uint64_t *frames, uint32_t n, uint64_t ts,
		    uint32_t flags)
{
	struct heapbpf_alloc_event *e = calloc(1, sizeof(*e));
	int err;

	cr_assert_not_null(e);
	e->type = HEAPBPF_EV_ALLOC;
	e->pid = 100;
	e->tid = 101;
	e->nframes = n;
	e->ts = ts;
	e->ptr = 0x10000 + ts;
	e->size = usize;
	e->usize = usize;
	e->tctx = tctx;
	e->bt_len = n;
	e->flags = flags;
	memcpy(e->frames, frames, n * sizeof(*frames));
	err = collector__event(c, e, sizeof(*e));
	free(e);
	return err;
}

static int free_ev(uint64_t tctx, uint64_t usize, uint64_t alloc_time, uint64_t ts)
{
	struct heapbpf_free_event e = {
		.type = HEAPBPF_EV_FREE,
		.pid = 100,
		.tid = 102,
		.ts = ts,
		.usize = usize,
		.tctx = tctx,
		.alloc_time_ns = alloc_time,
		.alloc_size = usize,
	};

	return collector__event(c, &e, sizeof(e));
}

static const uint64_t stack_a[] = { 0x401000, 0x402000, 0x403000 };
static const uint64_t stack_b[] = { 0x401000, 0x402000, 0x403008 }; /* differs in the root */
static const uint64_t stack_c[] = { 0x401000, 0x402000 };	    /* a prefix of A */

/* The stack with exactly these frames, or NULL. */
static const struct hb_stack *find_stack(const uint64_t *frames, uint32_t n)
{
	for (size_t i = 0; i < collector__nstacks(c); i++) {
		const struct hb_stack *s = collector__stack(c, i);

		uint64_t buf[HEAPBPF_MAX_FRAMES];

		if (s->nframes == n &&
		    memcmp(collector__frames(c, s, buf), frames, n * sizeof(*frames)) == 0)
			return s;
	}
	return NULL;
}

static void assert_close(double got, double want)
{
	cr_assert_lt(fabs(got - want), 1e-9 * (fabs(want) + 1), "got %.17g, want %.17g", got, want);
}

Test(collector, new_is_empty)
{
	const struct collector_stats *st = collector__stats(c);

	cr_assert_eq(collector__period(c), PERIOD);
	cr_assert_eq(collector__nstacks(c), 0);
	cr_assert_null(collector__stack(c, 0));
	cr_assert_eq(st->allocs, 0);
	cr_assert_eq(st->frees, 0);
	cr_assert_eq(st->malformed, 0);
}

Test(collector, identical_frames_are_one_stack)
{
	const struct hb_stack *s;
	uint64_t buf[HEAPBPF_MAX_FRAMES];

	cr_assert_eq(alloc_ev(0xa0, 100, stack_a, 3, 10, 0), 0);
	cr_assert_eq(alloc_ev(0xa0, 300, stack_a, 3, 20, 0), 0);
	/* same frames from another tctx (another thread): still the same stack */
	cr_assert_eq(alloc_ev(0xa8, 5000, stack_a, 3, 30, 0), 0);
	cr_assert_eq(collector__nstacks(c), 1);
	s = collector__stack(c, 0);
	cr_assert_eq(s->nframes, 3);
	cr_assert_arr_eq(collector__frames(c, s, buf), stack_a, sizeof(stack_a));
	cr_assert_eq(s->samples, 3);
	cr_assert_eq(s->bytes, 5400);
	cr_assert_eq(s->inuse_samples, 3);
	cr_assert_eq(s->inuse_bytes, 5400);
	cr_assert_eq(collector__stats(c)->allocs, 3);
	cr_assert_eq(collector__stats(c)->alloc_bytes, 5400);
	cr_assert_eq(collector__stats(c)->first_ts, 10);
	cr_assert_eq(collector__stats(c)->last_ts, 30);
}

Test(collector, different_frames_stay_separate)
{
	cr_assert_eq(alloc_ev(0xa0, 100, stack_a, 3, 1, 0), 0);
	cr_assert_eq(alloc_ev(0xb0, 200, stack_b, 3, 2, 0), 0);
	cr_assert_eq(alloc_ev(0xc0, 400, stack_c, 2, 3, 0), 0);
	cr_assert_eq(alloc_ev(0xb0, 800, stack_b, 3, 4, 0), 0);
	cr_assert_eq(collector__nstacks(c), 3);
	cr_assert_eq(find_stack(stack_a, 3)->samples, 1);
	cr_assert_eq(find_stack(stack_a, 3)->bytes, 100);
	cr_assert_eq(find_stack(stack_b, 3)->samples, 2);
	cr_assert_eq(find_stack(stack_b, 3)->bytes, 1000);
	cr_assert_eq(find_stack(stack_c, 2)->samples, 1);
	cr_assert_eq(find_stack(stack_c, 2)->bytes, 400);
	cr_assert_null(collector__stack(c, 3));
}

Test(collector, empty_stack_is_a_stack)
{
	cr_assert_eq(alloc_ev(0xa0, 64, stack_a, 0, 1, 0), 0);
	cr_assert_eq(alloc_ev(0xa8, 64, stack_a, 0, 2, 0), 0);
	cr_assert_eq(collector__nstacks(c), 1);
	cr_assert_eq(collector__stack(c, 0)->nframes, 0);
	cr_assert_eq(collector__stack(c, 0)->samples, 2);
}

Test(collector, raw_and_unbiased_totals)
{
	static const uint64_t sizes[] = { 16, 4096, 100000 };
	const struct hb_stack *s;
	double objs = 0, space = 0;

	for (size_t i = 0; i < 3; i++) {
		cr_assert_eq(alloc_ev(0xa0, sizes[i], stack_a, 3, i + 1, 0), 0);
		objs += 1.0 / (1.0 - exp(-(double)sizes[i] / PERIOD));
		space += sizes[i] / (1.0 - exp(-(double)sizes[i] / PERIOD));
	}
	s = find_stack(stack_a, 3);
	cr_assert_not_null(s);
	cr_assert_eq(s->samples, 3);
	cr_assert_eq(s->bytes, 16 + 4096 + 100000);
	assert_close(s->alloc_objects, objs);
	assert_close(s->alloc_space, space);
	assert_close(s->inuse_objects, objs);
	assert_close(s->inuse_space, space);
	/* spot values: 16 B at R=4096 stands for about 256.5 objects */
	cr_assert_gt(s->alloc_objects, 256.5 + 1 + 1);
	cr_assert_lt(s->alloc_objects, 256.6 + 1.6 + 1.001);
}

Test(collector, frees_matched_by_tctx)
{
	const struct collector_stats *st = collector__stats(c);
	const struct hb_stack *a, *b;

	cr_assert_eq(alloc_ev(0xa0, 100, stack_a, 3, 1, 0), 0);
	cr_assert_eq(alloc_ev(0xa0, 200, stack_a, 3, 2, 0), 0);
	cr_assert_eq(alloc_ev(0xb0, 8192, stack_b, 3, 3, 0), 0);
	cr_assert_eq(free_ev(0xa0, 100, 0, 4), 0);
	cr_assert_eq(free_ev(0xb0, 8192, 0, 5), 0);

	a = find_stack(stack_a, 3);
	b = find_stack(stack_b, 3);
	/* allocation totals never decrease */
	cr_assert_eq(a->samples, 2);
	cr_assert_eq(a->bytes, 300);
	cr_assert_eq(b->samples, 1);
	/* in use: what is left */
	cr_assert_eq(a->inuse_samples, 1);
	cr_assert_eq(a->inuse_bytes, 200);
	assert_close(a->inuse_objects, unbias_objects(200, PERIOD));
	assert_close(a->inuse_space, unbias_bytes(200, PERIOD));
	assert_close(a->alloc_objects, unbias_objects(100, PERIOD) + unbias_objects(200, PERIOD));
	cr_assert_eq(b->inuse_samples, 0);
	cr_assert_eq(b->inuse_bytes, 0);
	assert_close(b->inuse_objects, 0);
	assert_close(b->inuse_space, 0);

	cr_assert_eq(st->allocs, 3);
	cr_assert_eq(st->frees, 2);
	cr_assert_eq(st->frees_matched, 2);
	cr_assert_eq(st->frees_unmatched, 0);
	cr_assert_eq(st->last_ts, 5);
}

Test(collector, free_of_unknown_tctx_is_unmatched)
{
	const struct collector_stats *st = collector__stats(c);
	const struct hb_stack *a;

	cr_assert_eq(alloc_ev(0xa0, 100, stack_a, 3, 1, 0), 0);
	cr_assert_eq(free_ev(0xdead0, 100, 0, 2), 0); /* never seen */
	cr_assert_eq(free_ev(0, 300, 0, 3), 0);	      /* no tctx at all */
	a = find_stack(stack_a, 3);
	cr_assert_eq(a->inuse_samples, 1);
	cr_assert_eq(a->inuse_bytes, 100);
	cr_assert_eq(st->frees, 2);
	cr_assert_eq(st->frees_matched, 0);
	cr_assert_eq(st->frees_unmatched, 2);
	cr_assert_eq(st->frees_unmatched_bytes, 400);
}

Test(collector, more_frees_than_allocs_on_a_tctx)
{
	const struct collector_stats *st = collector__stats(c);
	const struct hb_stack *a;

	/* the tctx had objects sampled before heapbpf attached: extra frees do not go negative */
	cr_assert_eq(alloc_ev(0xa0, 100, stack_a, 3, 1, 0), 0);
	cr_assert_eq(free_ev(0xa0, 100, 0, 2), 0);
	cr_assert_eq(free_ev(0xa0, 100, 0, 3), 0);
	a = find_stack(stack_a, 3);
	cr_assert_eq(a->inuse_samples, 0);
	cr_assert_eq(a->inuse_bytes, 0);
	cr_assert_eq(st->frees_matched, 1);
	cr_assert_eq(st->frees_unmatched, 1);
	cr_assert_eq(st->frees_unmatched_bytes, 100);
}

Test(collector, frees_of_objects_older_than_attach_are_unmatched)
{
	const struct collector_stats *st = collector__stats(c);
	const struct hb_stack *a;

	collector__set_attach_time(c, 1000000);
	cr_assert_eq(alloc_ev(0xa0, 100, stack_a, 3, 1, 0), 0);
	cr_assert_eq(alloc_ev(0xa0, 100, stack_a, 3, 2, 0), 0);
	/* the same tctx, but this object was sampled before attach */
	cr_assert_eq(free_ev(0xa0, 100, 999999, 3), 0);
	a = find_stack(stack_a, 3);
	cr_assert_eq(a->inuse_samples, 2);
	cr_assert_eq(a->inuse_bytes, 200);
	cr_assert_eq(st->frees_unmatched, 1);
	cr_assert_eq(st->frees_unmatched_bytes, 100);
	cr_assert_eq(st->frees_matched, 0);
	/* at or after attach: subtracted */
	cr_assert_eq(free_ev(0xa0, 100, 1000000, 4), 0);
	cr_assert_eq(free_ev(0xa0, 100, 2000000, 5), 0);
	cr_assert_eq(a->inuse_samples, 0);
	cr_assert_eq(a->inuse_bytes, 0);
	cr_assert_eq(st->frees_matched, 2);
	cr_assert_eq(st->frees_unmatched, 1);
	cr_assert_eq(st->frees, 3);
}

Test(collector, tctx_reused_for_another_stack)
{
	const struct collector_stats *st = collector__stats(c);
	const struct hb_stack *a, *b;

	cr_assert_eq(alloc_ev(0xa0, 100, stack_a, 3, 1, 0), 0);
	cr_assert_eq(alloc_ev(0xa0, 100, stack_a, 3, 2, 0), 0);
	cr_assert_eq(free_ev(0xa0, 100, 0, 3), 0);
	cr_assert_eq(free_ev(0xa0, 100, 0, 4), 0);
	/* all of A's samples are gone: jemalloc may hand the address to a new context */
	cr_assert_eq(alloc_ev(0xa0, 700, stack_b, 3, 5, 0), 0);
	cr_assert_eq(free_ev(0xa0, 700, 0, 6), 0);
	cr_assert_eq(alloc_ev(0xa0, 900, stack_b, 3, 7, 0), 0);

	a = find_stack(stack_a, 3);
	b = find_stack(stack_b, 3);
	cr_assert_eq(a->samples, 2);
	cr_assert_eq(a->inuse_samples, 0);
	cr_assert_eq(a->inuse_bytes, 0);
	cr_assert_eq(b->samples, 2);
	cr_assert_eq(b->inuse_samples, 1);
	cr_assert_eq(b->inuse_bytes, 900);
	assert_close(b->inuse_objects, unbias_objects(900, PERIOD));
	cr_assert_eq(st->frees_matched, 3);
	cr_assert_eq(st->frees_unmatched, 0);
}

Test(collector, flags_are_counted_and_kept)
{
	const struct collector_stats *st = collector__stats(c);
	struct heapbpf_free_event f = {
		.type = HEAPBPF_EV_FREE,
		.tctx = 0xa0,
		.usize = 10,
		.flags = HEAPBPF_F_READ_FAULT,
	};

	cr_assert_eq(alloc_ev(0xa0, 10, stack_a, 3, 1, HEAPBPF_F_TRUNCATED), 0);
	cr_assert_eq(alloc_ev(0xa0, 10, stack_a, 3, 2, HEAPBPF_F_READ_FAULT), 0);
	cr_assert_eq(alloc_ev(0xb0, 10, stack_b, 3, 3, 0), 0);
	cr_assert_eq(collector__event(c, &f, sizeof(f)), 0);
	cr_assert_eq(find_stack(stack_a, 3)->flags, HEAPBPF_F_TRUNCATED | HEAPBPF_F_READ_FAULT);
	cr_assert_eq(find_stack(stack_b, 3)->flags, 0);
	cr_assert_eq(st->truncated, 1);
	cr_assert_eq(st->read_faults, 2);
}

Test(collector, malformed_events)
{
	const struct collector_stats *st = collector__stats(c);
	struct heapbpf_alloc_event *a = calloc(1, sizeof(*a));
	struct heapbpf_free_event f = { .type = HEAPBPF_EV_FREE, .tctx = 0xa0, .usize = 8 };
	__u32 bogus[16] = { 7 };
	uint64_t malformed = 0;

	cr_assert_not_null(a);
	a->type = HEAPBPF_EV_ALLOC;
	a->nframes = 2;
	a->usize = 8;
	a->tctx = 0xa0;

	/* shorter than the type field */
	cr_assert_eq(collector__event(c, a, 0), 0);
	cr_assert_eq(st->malformed, ++malformed);
	cr_assert_eq(collector__event(c, a, 3), 0);
	cr_assert_eq(st->malformed, ++malformed);
	/* an alloc event cut short: records are sized to their frames, 72 + 8 x 2 here */
	cr_assert_eq(collector__event(c, a, HEAPBPF_ALLOC_EVENT_SIZE(2) - 1), 0);
	cr_assert_eq(st->malformed, ++malformed);
	cr_assert_eq(collector__event(c, a, sizeof(struct heapbpf_free_event)), 0);
	cr_assert_eq(st->malformed, ++malformed);
	/* a free event cut short */
	cr_assert_eq(collector__event(c, &f, sizeof(f) - 8), 0);
	cr_assert_eq(st->malformed, ++malformed);
	/* unknown types */
	cr_assert_eq(collector__event(c, bogus, sizeof(bogus)), 0);
	cr_assert_eq(st->malformed, ++malformed);
	bogus[0] = 0;
	cr_assert_eq(collector__event(c, bogus, sizeof(bogus)), 0);
	cr_assert_eq(st->malformed, ++malformed);
	/* more frames than PROF_BT_MAX */
	a->nframes = HEAPBPF_MAX_FRAMES + 1;
	cr_assert_eq(collector__event(c, a, sizeof(*a)), 0);
	cr_assert_eq(st->malformed, ++malformed);
	a->nframes = UINT32_MAX;
	cr_assert_eq(collector__event(c, a, sizeof(*a)), 0);
	cr_assert_eq(st->malformed, ++malformed);

	/* none of them counted as an allocation or a free, nor created a stack */
	cr_assert_eq(collector__nstacks(c), 0);
	cr_assert_eq(st->allocs, 0);
	cr_assert_eq(st->frees, 0);

	/* exactly HEAPBPF_MAX_FRAMES is fine, and so is a longer buffer */
	a->nframes = HEAPBPF_MAX_FRAMES;
	for (uint32_t i = 0; i < HEAPBPF_MAX_FRAMES; i++)
		a->frames[i] = 0x400000 + i;
	cr_assert_eq(collector__event(c, a, sizeof(*a)), 0);
	cr_assert_eq(collector__event(c, &f, sizeof(f) + 16), 0);
	cr_assert_eq(st->malformed, malformed);
	cr_assert_eq(st->allocs, 1);
	cr_assert_eq(st->frees_matched, 1);
	cr_assert_eq(collector__nstacks(c), 1);
	cr_assert_eq(collector__stack(c, 0)->nframes, HEAPBPF_MAX_FRAMES);
	cr_assert_eq(collector__frame(c, collector__stack(c, 0), HEAPBPF_MAX_FRAMES - 1),
		     0x400000 + HEAPBPF_MAX_FRAMES - 1);
	free(a);
}

/*
 * A backtrace with a frame in the null page is not a backtrace (7.2 once
 * handed such records over): left out, counted, nothing else touched.
 */
Test(collector, null_page_frames_are_left_out)
{
	const struct collector_stats *st = collector__stats(c);
	const uint64_t garbage[] = { 0x7efeba643500, 0x1, 0, 0, 0x2, 0x10 };
	const uint64_t edge[] = { 0x401000, HB_MIN_FRAME - 1 };

	cr_assert_eq(alloc_ev(0xa0, 10, stack_a, 3, 1, 0), 0);
	cr_assert_eq(alloc_ev(0xb0, 10, garbage, 6, 2, 0), 0);
	cr_assert_eq(alloc_ev(0xc0, 10, edge, 2, 3, 0), 0);
	cr_assert_eq(st->bad_frames, 2);
	cr_assert_eq(st->allocs, 1);
	cr_assert_eq(st->malformed, 0);
	cr_assert_eq(collector__nstacks(c), 1);
	cr_assert_not_null(find_stack(stack_a, 3));
}

/* Enough distinct stacks and tctxs to make both hash tables grow several times. */
Test(collector, many_stacks)
{
	const uint32_t n = 100000;
	const struct collector_stats *st = collector__stats(c);

	for (uint32_t i = 0; i < n; i++) {
		uint64_t fr[4] = { 0x401000, 0x500000 + i, 0x600000 + i % 7,
				   0x7f0000000000ull | i };

		cr_assert_eq(alloc_ev(0x1000 + 16ull * i, 64 + i % 100, fr, 1 + i % 4, i + 1, 0),
			     0);
	}
	/* and every one of them again: no new stacks, all samples doubled */
	for (uint32_t i = 0; i < n; i++) {
		uint64_t fr[4] = { 0x401000, 0x500000 + i, 0x600000 + i % 7,
				   0x7f0000000000ull | i };

		cr_assert_eq(
			alloc_ev(0x1000 + 16ull * i, 64 + i % 100, fr, 1 + i % 4, n + i + 1, 0), 0);
	}
	/*
	 * Frames 1 + i%4: stacks with one frame all share {0x401000}, so
	 * 3/4 of the indices make distinct stacks plus one shared.
	 */
	cr_assert_eq(collector__nstacks(c), n - n / 4 + 1);
	for (uint32_t i = 0; i < n; i += 997) {
		uint64_t fr[4] = { 0x401000, 0x500000 + i, 0x600000 + i % 7,
				   0x7f0000000000ull | i };
		const struct hb_stack *s = find_stack(fr, 1 + i % 4);

		cr_assert_not_null(s, "stack %u lost", i);
		if (i % 4)
			cr_assert_eq(s->samples, 2);
		else
			cr_assert_eq(s->samples, 2 * (n / 4));
	}
	/* frees still find their tctx after the tctx table grew */
	for (uint32_t i = 0; i < n; i++)
		cr_assert_eq(free_ev(0x1000 + 16ull * i, 64 + i % 100, 0, 2 * n + i + 1), 0);
	cr_assert_eq(st->frees_matched, n);
	cr_assert_eq(st->frees_unmatched, 0);
	cr_assert_eq(st->allocs, 2 * n);
	{
		int64_t inuse = 0;

		for (size_t i = 0; i < collector__nstacks(c); i++)
			inuse += collector__stack(c, i)->inuse_samples;
		cr_assert_eq(inuse, n);
	}
}

Test(collector, add_totals)
{
	const struct collector_stats *st = collector__stats(c);
	const struct hb_stack *s;
	uint64_t buf[HEAPBPF_MAX_FRAMES];
	double w;

	/* 10 samples, 40960 bytes (mean 4096 = R), 4 still in use with 1024 bytes (mean 256) */
	cr_assert_eq(collector__add_totals(c, stack_a, 3, 10, 40960, 4, 1024), 0);
	cr_assert_eq(collector__nstacks(c), 1);
	s = collector__stack(c, 0);
	cr_assert_arr_eq(collector__frames(c, s, buf), stack_a, sizeof(stack_a));
	cr_assert_eq(s->samples, 10);
	cr_assert_eq(s->bytes, 40960);
	cr_assert_eq(s->inuse_samples, 4);
	cr_assert_eq(s->inuse_bytes, 1024);
	w = M_E / (M_E - 1);
	assert_close(s->alloc_objects, 10 * w);
	assert_close(s->alloc_space, 40960 * w);
	w = unbias_objects(256, PERIOD);
	assert_close(s->inuse_objects, 4 * w);
	assert_close(s->inuse_space, 1024 * w);
	cr_assert_eq(st->allocs, 10);
	cr_assert_eq(st->alloc_bytes, 40960);

	/* added to the same stack, also one created by an event */
	cr_assert_eq(alloc_ev(0xa0, 4096, stack_a, 3, 1, 0), 0);
	cr_assert_eq(collector__add_totals(c, stack_a, 3, 1, 4096, 0, 0), 0);
	cr_assert_eq(collector__nstacks(c), 1);
	cr_assert_eq(s->samples, 12);
	cr_assert_eq(s->bytes, 40960 + 8192);
	cr_assert_eq(s->inuse_samples, 5);
	assert_close(s->alloc_objects, 12 * M_E / (M_E - 1));

	/* zero samples: no division by zero, unbiased values stay finite */
	cr_assert_eq(collector__add_totals(c, stack_b, 3, 0, 0, 0, 0), 0);
	s = find_stack(stack_b, 3);
	cr_assert_not_null(s);
	cr_assert_eq(s->samples, 0);
	assert_close(s->alloc_objects, 0);
	assert_close(s->inuse_objects, 0);

	/* too many frames */
	cr_assert_eq(collector__add_totals(c, stack_a, HEAPBPF_MAX_FRAMES + 1, 1, 1, 0, 0),
		     -EINVAL);
	cr_assert_eq(collector__nstacks(c), 2);
}

/* Frames are kept as ids of distinct addresses: every stack reads back as it came. */
Test(collector, frames_are_address_ids)
{
	uint64_t buf[HEAPBPF_MAX_FRAMES];
	size_t naddrs;

	cr_assert_eq(alloc_ev(0xa0, 100, stack_a, 3, 10, 0), 0);
	cr_assert_eq(alloc_ev(0xa8, 100, stack_b, 3, 20, 0), 0);
	cr_assert_eq(alloc_ev(0xb0, 100, stack_c, 2, 30, 0), 0);
	cr_assert_eq(collector__nstacks(c), 3);
	/* 0x401000 and 0x402000 once for the three stacks */
	collector__addrs(c, &naddrs);
	cr_assert_eq(naddrs, 4);
	cr_assert_arr_eq(collector__frames(c, collector__stack(c, 1), buf), stack_b,
			 sizeof(stack_b));
	cr_assert_eq(collector__frame(c, collector__stack(c, 2), 1), 0x402000);
}

/* After collector__end no event is applied: counted as malformed. */
Test(collector, no_event_after_the_end)
{
	const struct collector_stats *st = collector__stats(c);

	cr_assert_eq(alloc_ev(0xa0, 100, stack_a, 3, 10, 0), 0);
	collector__end(c);
	cr_assert_eq(alloc_ev(0xa0, 100, stack_a, 3, 20, 0), 0);
	cr_assert_eq(alloc_ev(0xa8, 100, stack_b, 3, 30, 0), 0);
	cr_assert_eq(free_ev(0xa0, 100, 0, 40), 0);
	cr_assert_eq(st->malformed, 3);
	cr_assert_eq(st->allocs, 1);
	cr_assert_eq(collector__nstacks(c), 1);
	cr_assert_eq(collector__stack(c, 0)->inuse_samples, 1);
	cr_assert_eq(collector__add_totals(c, stack_b, 3, 1, 100, 0, 0), -EINVAL);
}

/*
 * The last profile frees the frame slabs behind the stacks it has read:
 * the stacks not read yet keep theirs (several slabs: 3000 stacks of
 * HEAPBPF_MAX_FRAMES frames; the sanitized pass catches a read of a freed one).
 */
Test(collector, frames_released_as_read)
{
	const uint32_t n = 3000;
	uint64_t *fr = calloc(HEAPBPF_MAX_FRAMES, sizeof(*fr));

	cr_assert_not_null(fr);
	for (uint32_t i = 0; i < n; i++) {
		for (uint32_t k = 0; k < HEAPBPF_MAX_FRAMES; k++)
			fr[k] = 0x400000 + 16ull * k + (k == 0 ? 0x100000ull * (i + 1) : 0);
		cr_assert_eq(alloc_ev(0x1000 + 16ull * i, 64, fr, HEAPBPF_MAX_FRAMES, i + 1, 0), 0);
	}
	cr_assert_eq(collector__nstacks(c), n);
	collector__end(c);
	for (uint32_t i = 0; i < n; i++) {
		const struct hb_stack *s = collector__stack(c, i);

		collector__release_frames(c, i);
		cr_assert_eq(collector__frame(c, s, 0), 0x400000 + 0x100000ull * (i + 1));
		cr_assert_eq(collector__frame(c, s, HEAPBPF_MAX_FRAMES - 1),
			     0x400000 + 16ull * (HEAPBPF_MAX_FRAMES - 1));
	}
	collector__release_frames(c, n);
	/* the totals stay */
	cr_assert_eq(collector__stack(c, n - 1)->samples, 1);
	free(fr);
}
