// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <linux/types.h>

#include "collector.h"
#include "heapbpf.h"
#include "u64map.h"
#include "unbias.h"

/* A tctx is one (thread, backtrace) context of jemalloc; its address is reused once dead. */
struct tctx_ent {
	uint64_t tctx; /* 0 = empty slot */
	uint32_t stack;
	uint32_t live; /* samples heapbpf saw allocated and not yet freed */
};

struct collector {
	double period;
	uint64_t attach_coarse_ns;
	uint64_t stop_ns; /* 0 = still sampling */
	struct hb_stack *stacks;
	size_t nstacks, cap_stacks;
	uint32_t *index; /* open addressing: stack index + 1, 0 = empty */
	uint64_t *hashes;
	size_t index_cap; /* power of two */
	struct tctx_ent *tctxs;
	size_t ntctx, tctx_cap; /* power of two */
	/*
	 * Live sampled objects by pointer, where jemalloc's free hook passes the
	 * pointer (5.2.1, 5.3.1): open addressing, key 0 = empty, deletion by
	 * backward shift, so it holds only what is live.
	 */
	uint64_t *ptrs;
	uint32_t *ptr_stack;
	size_t nptrs, ptr_cap; /* power of two */
	struct collector_stats stats;
};

/* frames come as the event's __u64 array: read them through memcpy, not a cast */
static uint64_t hash_frames(const void *frames, uint32_t n)
{
	uint64_t h = 0x9e3779b97f4a7c15ULL ^ n, f;

	for (uint32_t i = 0; i < n; i++) {
		memcpy(&f, (const char *)frames + i * sizeof(f), sizeof(f));
		h = (h ^ f) * 0x100000001b3ULL + (h >> 29);
	}
	return u64map_hash(h);
}

int collector__new(uint64_t period, struct collector **out)
{
	struct collector *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->period = (double)period;
	c->index_cap = 1024;
	c->index = calloc(c->index_cap, sizeof(*c->index));
	c->hashes = calloc(c->index_cap, sizeof(*c->hashes));
	c->tctx_cap = 1024;
	c->tctxs = calloc(c->tctx_cap, sizeof(*c->tctxs));
	if (!c->index || !c->hashes || !c->tctxs) {
		collector__free(c);
		return -ENOMEM;
	}
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
	free(c->index);
	free(c->hashes);
	free(c->tctxs);
	free(c->ptrs);
	free(c->ptr_stack);
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

static int grow_index(struct collector *c)
{
	size_t ncap = c->index_cap * 2;
	uint32_t *ni = calloc(ncap, sizeof(*ni));
	uint64_t *nh = calloc(ncap, sizeof(*nh));

	if (!ni || !nh) {
		free(ni);
		free(nh);
		return -ENOMEM;
	}
	for (size_t i = 0; i < c->index_cap; i++) {
		size_t j;

		if (!c->index[i])
			continue;
		for (j = c->hashes[i] & (ncap - 1); ni[j]; j = (j + 1) & (ncap - 1))
			;
		ni[j] = c->index[i];
		nh[j] = c->hashes[i];
	}
	free(c->index);
	free(c->hashes);
	c->index = ni;
	c->hashes = nh;
	c->index_cap = ncap;
	return 0;
}

/* The stack with these frames, created if new; -ENOMEM. */
static int stack_intern(struct collector *c, const void *frames, uint32_t n, uint32_t *id)
{
	uint64_t h = hash_frames(frames, n);
	struct hb_stack *s;
	size_t j;

	for (j = h & (c->index_cap - 1); c->index[j]; j = (j + 1) & (c->index_cap - 1)) {
		s = &c->stacks[c->index[j] - 1];
		if (c->hashes[j] == h && s->nframes == n &&
		    memcmp(s->frames, frames, n * sizeof(uint64_t)) == 0) {
			*id = c->index[j] - 1;
			return 0;
		}
	}
	if (c->nstacks == c->cap_stacks) {
		size_t ncap = c->cap_stacks ? c->cap_stacks * 2 : 256;
		struct hb_stack *nv = realloc(c->stacks, ncap * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		c->stacks = nv;
		c->cap_stacks = ncap;
	}
	s = &c->stacks[c->nstacks];
	memset(s, 0, sizeof(*s));
	s->frames = malloc((n ? n : 1) * sizeof(uint64_t));
	if (!s->frames)
		return -ENOMEM;
	memcpy(s->frames, frames, n * sizeof(uint64_t));
	s->nframes = n;
	c->index[j] = c->nstacks + 1;
	c->hashes[j] = h;
	*id = c->nstacks++;
	if (c->nstacks * 2 > c->index_cap)
		return grow_index(c);
	return 0;
}

static struct tctx_ent *tctx_slot(struct tctx_ent *tab, size_t cap, uint64_t tctx)
{
	size_t j;

	for (j = u64map_hash(tctx) & (cap - 1); tab[j].tctx && tab[j].tctx != tctx;
	     j = (j + 1) & (cap - 1))
		;
	return &tab[j];
}

static int grow_tctx(struct collector *c)
{
	size_t ncap = c->tctx_cap * 2;
	struct tctx_ent *nt = calloc(ncap, sizeof(*nt));

	if (!nt)
		return -ENOMEM;
	for (size_t i = 0; i < c->tctx_cap; i++) {
		if (c->tctxs[i].tctx)
			*tctx_slot(nt, ncap, c->tctxs[i].tctx) = c->tctxs[i];
	}
	free(c->tctxs);
	c->tctxs = nt;
	c->tctx_cap = ncap;
	return 0;
}

static void stamp(struct collector *c, uint64_t ts)
{
	if (!c->stats.first_ts || ts < c->stats.first_ts)
		c->stats.first_ts = ts;
	if (ts > c->stats.last_ts)
		c->stats.last_ts = ts;
}

static size_t ptr_slot(const uint64_t *keys, size_t cap, uint64_t ptr)
{
	size_t j;

	for (j = u64map_hash(ptr) & (cap - 1); keys[j] && keys[j] != ptr; j = (j + 1) & (cap - 1))
		;
	return j;
}

static int ptr_put(struct collector *c, uint64_t ptr, uint32_t stack)
{
	size_t j;

	if ((c->nptrs + 1) * 2 > c->ptr_cap) {
		size_t ncap = c->ptr_cap ? c->ptr_cap * 2 : 1024;
		uint64_t *nk = calloc(ncap, sizeof(*nk));
		uint32_t *nv = calloc(ncap, sizeof(*nv));

		if (!nk || !nv) {
			free(nk);
			free(nv);
			return -ENOMEM;
		}
		for (size_t i = 0; i < c->ptr_cap; i++) {
			if (c->ptrs[i]) {
				j = ptr_slot(nk, ncap, c->ptrs[i]);
				nk[j] = c->ptrs[i];
				nv[j] = c->ptr_stack[i];
			}
		}
		free(c->ptrs);
		free(c->ptr_stack);
		c->ptrs = nk;
		c->ptr_stack = nv;
		c->ptr_cap = ncap;
	}
	j = ptr_slot(c->ptrs, c->ptr_cap, ptr);
	if (!c->ptrs[j])
		c->nptrs++;
	c->ptrs[j] = ptr;
	c->ptr_stack[j] = stack;
	return 0;
}

/* Removes ptr; its stack in *stack. -ENOENT when heapbpf did not see it sampled. */
static int ptr_take(struct collector *c, uint64_t ptr, uint32_t *stack)
{
	size_t mask = c->ptr_cap - 1, i, j;

	if (!c->ptr_cap)
		return -ENOENT;
	i = ptr_slot(c->ptrs, c->ptr_cap, ptr);
	if (!c->ptrs[i])
		return -ENOENT;
	*stack = c->ptr_stack[i];
	/* backward shift: move up every later entry whose home is not between i and it */
	for (j = (i + 1) & mask; c->ptrs[j]; j = (j + 1) & mask) {
		size_t home = u64map_hash(c->ptrs[j]) & mask;

		if (((j - home) & mask) >= ((j - i) & mask)) {
			c->ptrs[i] = c->ptrs[j];
			c->ptr_stack[i] = c->ptr_stack[j];
			i = j;
		}
	}
	c->ptrs[i] = 0;
	c->nptrs--;
	return 0;
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
		err = ptr_put(c, e->ptr, id);
		if (err)
			return err;
	}
	if (!e->tctx)
		return 0;
	t = tctx_slot(c->tctxs, c->tctx_cap, e->tctx);
	if (!t->tctx) {
		t->tctx = e->tctx;
		t->live = 0;
		c->ntctx++;
	}
	/*
	 * A tctx address is reused only after all its samples were freed; a new
	 * stack on a tctx with live samples means frees were lost: start over.
	 */
	if (t->stack != id)
		t->live = 0;
	t->stack = id;
	t->live++;
	if (c->ntctx * 2 > c->tctx_cap)
		return grow_tctx(c);
	return 0;
}

static int on_free(struct collector *c, const struct heapbpf_free_event *e)
{
	struct tctx_ent *t = e->tctx ? tctx_slot(c->tctxs, c->tctx_cap, e->tctx) : NULL;
	bool before = e->alloc_time_ns && e->alloc_time_ns < c->attach_coarse_ns;
	struct hb_stack *s;
	uint32_t id;
	double w;

	c->stats.frees++;
	if (e->flags & HEAPBPF_F_READ_FAULT)
		c->stats.read_faults++;
	stamp(c, e->ts);
	if (c->stop_ns && e->ts >= c->stop_ns) {
		c->stats.frees_after_stop++;
		return 0;
	}
	if (e->ptr) {
		/*
		 * The version passes the pointer: exact, whatever was sampled
		 * before heapbpf attached (5.2.1 records no allocation time).
		 */
		if (ptr_take(c, e->ptr, &id))
			goto unmatched;
		if (t && t->tctx && t->live && t->stack == id)
			t->live--;
	} else {
		if (!t || !t->tctx || !t->live || before)
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
