// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <linux/types.h>

#include "collector.h"
#include "hashmap.h"
#include "heapbpf.h"
#include "unbias.h"

/* A tctx is one (thread, backtrace) context of jemalloc; its address is reused once dead. */
struct tctx_ent {
	uint32_t stack;
	uint32_t live; /* samples heapbpf saw allocated and not yet freed */
};

struct collector {
	double period;
	uint64_t attach_coarse_ns;
	uint64_t stop_ns; /* 0 = still sampling */
	struct hb_stack *stacks;
	size_t nstacks, cap_stacks;
	struct hashmap stack_by_frames; /* hashmap_hash_bytes(frames) -> stack */
	struct tctx_ent *tctxs;
	size_t ntctxs, cap_tctxs;
	struct hashmap tctx_by_addr; /* hashmap_hash_u64(tctx) -> tctxs[] */
	/*
	 * Live sampled objects by pointer, where jemalloc's free hook passes the
	 * pointer (5.2.1, 5.3.1): entries leave on free, so it holds only what is live.
	 */
	struct hashmap stack_by_ptr; /* hashmap_hash_u64(ptr) -> stack */
	struct collector_stats stats;
};

int collector__new(uint64_t period, struct collector **out)
{
	struct collector *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->period = (double)period;
	*out = c;
	return 0;
}

void collector__free(struct collector *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->nstacks; i++)
		free(c->stacks[i].frames);
	free(c->stacks);
	free(c->tctxs);
	hashmap__clear(&c->stack_by_frames);
	hashmap__clear(&c->tctx_by_addr);
	hashmap__clear(&c->stack_by_ptr);
	free(c);
}

void collector__set_attach_time(struct collector *c, uint64_t coarse_ns)
{
	c->attach_coarse_ns = coarse_ns;
}

void collector__set_stop_time(struct collector *c, uint64_t mono_ns)
{
	c->stop_ns = mono_ns;
}

/* arr (n used of *cap) with room for one more, doubling from 256; NULL leaves it as it was. */
static void *room_for_one(void *arr, size_t *cap, size_t n, size_t size)
{
	size_t ncap = *cap ? *cap * 2 : 256;

	if (n < *cap)
		return arr;
	arr = reallocarray(arr, ncap, size);
	if (arr)
		*cap = ncap;
	return arr;
}

/* The stack with these frames (the event's __u64 array, any alignment), created if new. */
static int stack_intern(struct collector *c, const void *frames, uint32_t n, uint32_t *id)
{
	size_t len = n * sizeof(uint64_t), it = 0;
	uint64_t h = hashmap_hash_bytes(frames, len);
	struct hb_stack *s;
	int err;

	while (hashmap__next(&c->stack_by_frames, h, &it, id)) {
		s = &c->stacks[*id];
		if (s->nframes == n && memcmp(s->frames, frames, len) == 0)
			return 0;
	}
	s = room_for_one(c->stacks, &c->cap_stacks, c->nstacks, sizeof(*s));
	if (!s)
		return -ENOMEM;
	c->stacks = s;
	s = &c->stacks[c->nstacks];
	memset(s, 0, sizeof(*s));
	s->frames = malloc(len ? len : 1);
	if (!s->frames)
		return -ENOMEM;
	memcpy(s->frames, frames, len);
	s->nframes = n;
	*id = c->nstacks;
	err = hashmap__add(&c->stack_by_frames, h, *id);
	if (err) {
		free(s->frames);
		return err;
	}
	c->nstacks++;
	return 0;
}

/* The entry of tctx, created (with no live samples) if new. */
static int tctx_intern(struct collector *c, uint64_t tctx, struct tctx_ent **out)
{
	uint64_t h = hashmap_hash_u64(tctx);
	struct tctx_ent *t;
	uint32_t idx;
	int err;

	if (hashmap__get(&c->tctx_by_addr, h, &idx)) {
		t = room_for_one(c->tctxs, &c->cap_tctxs, c->ntctxs, sizeof(*t));
		if (!t)
			return -ENOMEM;
		c->tctxs = t;
		idx = c->ntctxs;
		err = hashmap__add(&c->tctx_by_addr, h, idx);
		if (err)
			return err;
		c->tctxs[c->ntctxs++] = (struct tctx_ent){ 0 };
	}
	*out = &c->tctxs[idx];
	return 0;
}

static void stamp(struct collector *c, uint64_t ts)
{
	if (!c->stats.first_ts || ts < c->stats.first_ts)
		c->stats.first_ts = ts;
	if (ts > c->stats.last_ts)
		c->stats.last_ts = ts;
}

static int on_alloc(struct collector *c, const struct heapbpf_alloc_event *e)
{
	struct tctx_ent *t;
	struct hb_stack *s;
	uint32_t id, n = e->nframes;
	double w;
	int err;

	if (n > HEAPBPF_MAX_FRAMES) {
		c->stats.malformed++;
		return 0;
	}
	err = stack_intern(c, e->frames, n, &id);
	if (err)
		return err;
	w = hb_unbias_objects(e->usize, c->period);
	s = &c->stacks[id];
	s->flags |= e->flags;
	s->samples++;
	s->bytes += e->usize;
	s->alloc_objects += w;
	s->alloc_space += w * (double)e->usize;
	s->inuse_samples++;
	s->inuse_bytes += e->usize;
	s->inuse_objects += w;
	s->inuse_space += w * (double)e->usize;

	c->stats.allocs++;
	c->stats.alloc_bytes += e->usize;
	if (e->flags & HEAPBPF_F_READ_FAULT)
		c->stats.read_faults++;
	if (e->flags & HEAPBPF_F_TRUNCATED)
		c->stats.truncated++;
	stamp(c, e->ts);

	if (e->ptr) {
		err = hashmap__put(&c->stack_by_ptr, hashmap_hash_u64(e->ptr), id);
		if (err)
			return err;
	}
	if (!e->tctx)
		return 0;
	err = tctx_intern(c, e->tctx, &t);
	if (err)
		return err;
	/*
	 * A tctx address is reused only after all its samples were freed; a new
	 * stack on a tctx with live samples means frees were lost: start over.
	 */
	if (t->stack != id)
		t->live = 0;
	t->stack = id;
	t->live++;
	return 0;
}

static int on_free(struct collector *c, const struct heapbpf_free_event *e)
{
	bool before = e->alloc_time_ns && e->alloc_time_ns < c->attach_coarse_ns;
	struct tctx_ent *t = NULL;
	struct hb_stack *s;
	uint32_t id, ti;
	double w;

	c->stats.frees++;
	if (e->flags & HEAPBPF_F_READ_FAULT)
		c->stats.read_faults++;
	stamp(c, e->ts);
	if (c->stop_ns && e->ts >= c->stop_ns) {
		c->stats.frees_after_stop++;
		return 0;
	}
	if (e->tctx && !hashmap__get(&c->tctx_by_addr, hashmap_hash_u64(e->tctx), &ti))
		t = &c->tctxs[ti];
	if (e->ptr) {
		/*
		 * The version passes the pointer: exact, whatever was sampled
		 * before heapbpf attached (5.2.1 records no allocation time).
		 */
		if (hashmap__del(&c->stack_by_ptr, hashmap_hash_u64(e->ptr), &id))
			goto unmatched;
		if (t && t->live && t->stack == id)
			t->live--;
	} else {
		if (!t || !t->live || before)
			goto unmatched;
		t->live--;
		id = t->stack;
	}
	s = &c->stacks[id];
	w = hb_unbias_objects(e->usize, c->period);
	s->inuse_samples--;
	s->inuse_bytes -= e->usize;
	s->inuse_objects -= w;
	s->inuse_space -= w * (double)e->usize;
	c->stats.frees_matched++;
	return 0;
unmatched:
	c->stats.frees_unmatched++;
	c->stats.frees_unmatched_bytes += e->usize;
	return 0;
}

int collector__event(void *ctx, void *data, size_t len)
{
	struct collector *c = ctx;
	__u32 type;

	if (len < sizeof(type)) {
		c->stats.malformed++;
		return 0;
	}
	memcpy(&type, data, sizeof(type));
	/* allocation records come sized to their backtrace */
	if (type == HEAPBPF_EV_ALLOC && len >= HEAPBPF_ALLOC_EVENT_SIZE(0)) {
		const struct heapbpf_alloc_event *a = data;

		if (a->nframes > HEAPBPF_MAX_FRAMES || len < HEAPBPF_ALLOC_EVENT_SIZE(a->nframes)) {
			c->stats.malformed++;
			return 0;
		}
		return on_alloc(c, a);
	}
	if (type == HEAPBPF_EV_FREE && len >= sizeof(struct heapbpf_free_event))
		return on_free(c, data);
	c->stats.malformed++;
	return 0;
}

int collector__add_totals(struct collector *c, const uint64_t *frames, uint32_t nframes,
			  uint64_t samples, uint64_t bytes, uint64_t inuse_samples,
			  uint64_t inuse_bytes)
{
	struct hb_stack *s;
	uint32_t id;
	double w;
	int err;

	if (nframes > HEAPBPF_MAX_FRAMES)
		return -EINVAL;
	err = stack_intern(c, frames, nframes, &id);
	if (err)
		return err;
	s = &c->stacks[id];
	s->samples += samples;
	s->bytes += bytes;
	s->inuse_samples += inuse_samples;
	s->inuse_bytes += inuse_bytes;
	/* per-object sizes are not known here: weigh by the mean */
	w = samples ? hb_unbias_objects(bytes / samples, c->period) : 0;
	s->alloc_objects += w * samples;
	s->alloc_space += w * bytes;
	w = inuse_samples ? hb_unbias_objects(inuse_bytes / inuse_samples, c->period) : 0;
	s->inuse_objects += w * inuse_samples;
	s->inuse_space += w * inuse_bytes;
	c->stats.allocs += samples;
	c->stats.alloc_bytes += bytes;
	return 0;
}

void collector__reset_alloc(struct collector *c)
{
	for (size_t i = 0; i < c->nstacks; i++) {
		struct hb_stack *s = &c->stacks[i];

		s->samples = 0;
		s->bytes = 0;
		s->alloc_objects = 0;
		s->alloc_space = 0;
	}
}

uint64_t collector__period(const struct collector *c)
{
	return (uint64_t)c->period;
}

size_t collector__nstacks(const struct collector *c)
{
	return c->nstacks;
}

const struct hb_stack *collector__stack(const struct collector *c, size_t i)
{
	return i < c->nstacks ? &c->stacks[i] : NULL;
}

const struct collector_stats *collector__stats(const struct collector *c)
{
	return &c->stats;
}
