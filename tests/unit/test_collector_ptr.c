// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Free matching by pointer, for the jemalloc versions whose free hook passes
 * it (5.2.1, 5.3.1): exact even for objects sampled before heapbpf attached
 * on the same thread and stack, which 5.2.1 cannot tell by allocation time.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <linux/types.h>

#include "collect/collector.h"
#include "heapbpf.h"

#define PERIOD 4096

static struct collector *c;

static void setup(void)
{
	cr_assert_eq(collector__new(PERIOD, &c), 0);
}

static void teardown(void)
{
	collector__free(c);
	c = NULL;
}

TestSuite(collector_ptr, .init = setup, .fini = teardown);

static const uint64_t frames_a[] = { 0x401000, 0x402000 };
static const uint64_t frames_b[] = { 0x401000, 0x402008 };

static void alloc_at(uint64_t ptr, uint64_t tctx, const uint64_t *frames, uint64_t usize)
{
	struct heapbpf_alloc_event *e = calloc(1, sizeof(*e));

	cr_assert_not_null(e);
	e->type = HEAPBPF_EV_ALLOC;
	e->nframes = 2;
	e->ts = 1000;
	e->ptr = ptr;
	e->usize = usize;
	e->tctx = tctx;
	e->bt_len = 2;
	memcpy(e->frames, frames, 2 * sizeof(*frames));
	cr_assert_eq(collector__event(c, e, sizeof(*e)), 0);
	free(e);
}

/* A 5.2.1 free: pointer and tctx, no allocation time. */
static void free_at(uint64_t ptr, uint64_t tctx, uint64_t usize)
{
	struct heapbpf_free_event e = {
		.type = HEAPBPF_EV_FREE,
		.ts = 2000,
		.ptr = ptr,
		.usize = usize,
		.tctx = tctx,
	};

	cr_assert_eq(collector__event(c, &e, sizeof(e)), 0);
}

static const struct hb_stack *stack_of(const uint64_t *frames)
{
	for (size_t i = 0; i < collector__nstacks(c); i++) {
		const struct hb_stack *s = collector__stack(c, i);

		if (s->nframes == 2 && collector__frame(c, s, 0) == frames[0] &&
		    collector__frame(c, s, 1) == frames[1])
			return s;
	}
	return NULL;
}

Test(collector_ptr, older_object_on_the_same_tctx_is_not_subtracted)
{
	const struct hb_stack *s;

	/* 0x5000 was sampled on tctx 0x77 before heapbpf attached; 0x6000 after */
	alloc_at(0x6000, 0x77, frames_a, 64);
	free_at(0x5000, 0x77, 64);
	s = stack_of(frames_a);
	cr_assert_not_null(s);
	cr_assert_eq(s->inuse_samples, 1, "a free heapbpf never saw allocated was subtracted");
	cr_assert_eq(collector__stats(c)->frees_unmatched, 1);
	free_at(0x6000, 0x77, 64);
	cr_assert_eq(s->inuse_samples, 0);
	cr_assert_eq(s->inuse_bytes, 0);
	cr_assert_eq(collector__stats(c)->frees_matched, 1);
	/* freed twice (cannot happen in jemalloc): the second one matches nothing */
	free_at(0x6000, 0x77, 64);
	cr_assert_eq(s->inuse_samples, 0);
	cr_assert_eq(collector__stats(c)->frees_unmatched, 2);
}

Test(collector_ptr, the_pointer_decides_the_stack)
{
	/* one tctx address, reused by a second stack after its first life (tctx-only logic
	 * would attribute by the latest stack) */
	alloc_at(0x1000, 0x88, frames_a, 32);
	alloc_at(0x2000, 0x88, frames_b, 48);
	free_at(0x1000, 0x88, 32);
	cr_assert_eq(stack_of(frames_a)->inuse_samples, 0);
	cr_assert_eq(stack_of(frames_b)->inuse_samples, 1);
	cr_assert_eq(stack_of(frames_b)->inuse_bytes, 48);
}

/* Many live pointers, freed in another order: the table's deletion keeps every one findable. */
Test(collector_ptr, many_objects)
{
	enum { N = 20000 };
	uint64_t *ptrs = calloc(N, sizeof(*ptrs));
	uint64_t x = 88172645463325252ULL;
	const struct hb_stack *s;

	cr_assert_not_null(ptrs);
	for (int i = 0; i < N; i++) {
		/* clustered addresses, like a heap's */
		ptrs[i] = 0x7f0000000000ULL + (uint64_t)i * 16 + ((i % 7) << 20);
		alloc_at(ptrs[i], 0x99, (i & 1) ? frames_a : frames_b, 16);
	}
	/* free in a shuffled order, half of them */
	for (int i = N - 1; i > 0; i--) {
		int j;
		uint64_t t;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		j = (int)(x % (uint64_t)(i + 1));
		t = ptrs[i];
		ptrs[i] = ptrs[j];
		ptrs[j] = t;
	}
	for (int i = 0; i < N / 2; i++)
		free_at(ptrs[i], 0x99, 16);
	cr_assert_eq(collector__stats(c)->frees_matched, N / 2);
	cr_assert_eq(collector__stats(c)->frees_unmatched, 0);
	s = stack_of(frames_a);
	cr_assert_eq(s->inuse_samples + stack_of(frames_b)->inuse_samples, N / 2);
	for (int i = N / 2; i < N; i++)
		free_at(ptrs[i], 0x99, 16);
	cr_assert_eq(collector__stats(c)->frees_matched, N);
	cr_assert_eq(collector__stats(c)->frees_unmatched, 0);
	cr_assert_eq(stack_of(frames_a)->inuse_samples, 0);
	cr_assert_eq(stack_of(frames_b)->inuse_samples, 0);
	free(ptrs);
}
