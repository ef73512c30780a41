// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <linux/types.h>

#include "collect/collector.h"
#include "collect/collector_state.h"
#include "util/hashmap.h"
#include "heapbpf.h"
#include "collect/unbias.h"

#define TEMPORARY_DEFAULT_NS 1000000ULL
/* Frame ids per slab (1 MiB), many stacks' worth even at HEAPBPF_MAX_FRAMES each. */
#define FRAME_SLAB (1u << 18)

int collector__new(uint64_t period, struct collector **out)
{
	struct collector *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->period = (double)period;
	c->temporary_ns = TEMPORARY_DEFAULT_NS;
	c->free_objs = NO_OBJ;
	*out = c;
	return 0;
}

void collector__free(struct collector *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->nlts; i++)
		lifetimes_clear(&c->lts[i]);
	free(c->lts);
	free(c->peaks);
	for (size_t i = 0; i < c->nslabs; i++)
		free(c->slabs[i]);
	free(c->slabs);
	free(c->slab_first);
	free(c->addrs);
	hashmap__clear(&c->addr_ids);
	free(c->stacks);
	for (size_t i = 0; i < c->ntctxs; i++) {
		if (c->tctxs[i].cap)
			free(c->tctxs[i].ts.heap);
	}
	free(c->tctxs);
	hashmap__clear(&c->stack_by_frames);
	hashmap__clear(&c->tctx_by_addr);
	hashmap__clear(&c->obj_by_ptr);
	free(c->objs);
	free(c->dirty);
	for (size_t i = 0; i < c->nckpts; i++)
		checkpoints_clear(&c->ckpts[i]);
	free(c->last);
	free(c->carry);
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

uint64_t collector__stop_time(const struct collector *c)
{
	return c->stop_ns;
}

void collector__set_temporary_threshold(struct collector *c, uint64_t ns)
{
	c->temporary_ns = ns;
}

uint64_t collector__temporary_threshold(const struct collector *c)
{
	return c->temporary_ns;
}

/* Room for n frames (at most HEAPBPF_MAX_FRAMES) in the last slab, a new one if needed. */
static uint32_t *frames_room(struct collector *c, uint32_t n)
{
	uint32_t **ns, *slab;
	size_t *nf;

	if (c->nslabs && c->slab_used + n <= FRAME_SLAB)
		return c->slabs[c->nslabs - 1] + c->slab_used;
	ns = reallocarray(c->slabs, c->nslabs + 1, sizeof(*ns));
	if (!ns)
		return NULL;
	c->slabs = ns;
	nf = reallocarray(c->slab_first, c->nslabs + 1, sizeof(*nf));
	if (!nf)
		return NULL;
	c->slab_first = nf;
	slab = malloc(FRAME_SLAB * sizeof(*slab));
	if (!slab)
		return NULL;
	c->slab_first[c->nslabs] = c->nstacks;
	c->slabs[c->nslabs++] = slab;
	c->slab_used = 0;
	return slab;
}

/* Frame i of an event's __u64 array (any alignment). */
static uint64_t frame_at(const void *frames, uint32_t i)
{
	uint64_t v;

	memcpy(&v, (const char *)frames + i * sizeof(v), sizeof(v));
	return v;
}

/* Whether stack s has exactly these n frames. */
static bool same_frames(const struct collector *c, const struct hb_stack *s, const void *frames,
			uint32_t n)
{
	if (s->nframes != n)
		return false;
	for (uint32_t i = 0; i < n; i++) {
		if (c->addrs[s->frames[i]] != frame_at(frames, i))
			return false;
	}
	return true;
}

/* The id of a frame address, given one if new. */
static int addr_intern(struct collector *c, uint64_t addr, uint32_t *id)
{
	uint64_t h = hashmap_hash_u64(addr);
	uint64_t *na;
	int err;

	if (!hashmap__get(&c->addr_ids, h, id))
		return 0;
	na = collector_room_for_one(c->addrs, &c->cap_addrs, c->naddrs, sizeof(*na));
	if (!na)
		return -ENOMEM;
	c->addrs = na;
	err = hashmap__add(&c->addr_ids, h, (uint32_t)c->naddrs);
	if (err)
		return err;
	c->addrs[c->naddrs] = addr;
	*id = (uint32_t)c->naddrs++;
	return 0;
}

/* The stack with these frames (the event's __u64 array, any alignment), created if new. */
static int stack_intern(struct collector *c, const void *frames, uint32_t n, uint32_t *id)
{
	size_t len = n * sizeof(uint64_t), it = 0;
	uint64_t h = hashmap_hash_bytes(frames, len);
	struct hb_stack *s;
	uint32_t *ids;
	int err;

	while (hashmap__next(&c->stack_by_frames, h, &it, id)) {
		if (same_frames(c, &c->stacks[*id], frames, n))
			return 0;
	}
	s = collector_room_for_one(c->stacks, &c->cap_stacks, c->nstacks, sizeof(*s));
	if (!s)
		return -ENOMEM;
	c->stacks = s;
	ids = frames_room(c, n);
	if (!ids)
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++) {
		err = addr_intern(c, frame_at(frames, i), &ids[i]);
		if (err)
			return err;
	}
	s = &c->stacks[c->nstacks];
	memset(s, 0, sizeof(*s));
	s->frames = ids;
	s->nframes = (uint16_t)n;
	*id = c->nstacks;
	err = hashmap__add(&c->stack_by_frames, h, *id);
	if (err)
		return err;
	/* taken only once the stack is in */
	c->slab_used += n;
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
		t = collector_room_for_one(c->tctxs, &c->cap_tctxs, c->ntctxs, sizeof(*t));
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

static void now_at(struct collector *c, uint64_t ts)
{
	if (ts > c->now.ts)
		c->now.ts = ts;
}

/* An allocation's sample in its stack's totals, in-use and the collector's totals. */
static int count_alloc(struct collector *c, uint32_t id, const struct heapbpf_alloc_event *e)
{
	struct hb_stack *s = &c->stacks[id];
	double w = unbias_objects(e->usize, c->period);
	int err = peak_mark(c, id);

	if (err)
		return err;
	s->flags |= e->flags;
	s->samples++;
	s->bytes += e->usize;
	s->alloc_objects += w;
	s->alloc_space += w * (double)e->usize;
	s->inuse_samples++;
	s->inuse_bytes += e->usize;
	s->inuse_objects += w;
	s->inuse_space += w * (double)e->usize;
	c->now.inuse_samples++;
	c->now.inuse_bytes += e->usize;
	c->now.inuse_space += w * (double)e->usize;
	c->now.alloc_space += w * (double)e->usize;
	now_at(c, e->ts);
	return peak_check(c, e->ts);
}

static int on_alloc(struct collector *c, const struct heapbpf_alloc_event *e)
{
	struct tctx_ent *t;
	uint32_t id, n = e->nframes;
	int err;

	if (n > HEAPBPF_MAX_FRAMES) {
		c->stats.malformed++;
		return 0;
	}
	/*
	 * A return address is code, and no code is in the null page: such a
	 * frame means the record was built from other memory than jemalloc's
	 * backtrace (as 7.x's preemptible uprobes once made of a per-CPU record)
	 */
	for (uint32_t i = 0; i < n; i++) {
		if (e->frames[i] < HB_MIN_FRAME) {
			c->stats.bad_frames++;
			return 0;
		}
	}
	err = checkpoints_before(c, e->ts);
	err = err ?: stack_intern(c, e->frames, n, &id);
	err = err ?: count_alloc(c, id, e);
	if (err)
		return err;
	c->stats.allocs++;
	c->stats.alloc_bytes += e->usize;
	if (e->flags & HEAPBPF_F_READ_FAULT) {
		c->stats.read_faults++;
		c->stats.alloc_faults++;
	}
	if (e->flags & HEAPBPF_F_TRUNCATED)
		c->stats.truncated++;
	stamp(c, e->ts);

	if (e->ptr && c->match != MATCH_TCTX) {
		err = liveobjs_track(c, e->ptr, id, e->ts);
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
	if (t->stack != id) {
		t->live = 0;
		liveobjs_ts_reset(t);
	}
	t->stack = id;
	t->live++;
	return c->match != MATCH_PTR ? liveobjs_ts_push(t, e->ts, e->coarse) : 0;
}

/* A matched free: out of its stack's in-use; its lifetime counted when its birth is known. */
static int count_free(struct collector *c, uint32_t id, const struct heapbpf_free_event *e,
		      uint64_t born)
{
	struct hb_stack *s = &c->stacks[id];
	double w = unbias_objects(e->usize, c->period);
	uint64_t life;
	int err = peak_mark(c, id);

	if (err)
		return err;
	s->inuse_samples--;
	s->inuse_bytes -= e->usize;
	s->inuse_objects -= w;
	s->inuse_space -= w * (double)e->usize;
	c->now.inuse_samples--;
	c->now.inuse_bytes -= e->usize;
	c->now.inuse_space -= w * (double)e->usize;
	now_at(c, e->ts);
	c->stats.frees_matched++;
	if (!born)
		return 0;
	life = e->ts > born ? e->ts - born : 0;
	if (!s->lt_at) {
		struct hb_lifetimes *l =
			collector_room_for_one(c->lts, &c->cap_lts, c->nlts, sizeof(*l));

		if (!l)
			return -ENOMEM;
		c->lts = l;
		c->lts[c->nlts] = (struct hb_lifetimes){ 0 };
		s->lt_at = (uint32_t)++c->nlts;
	}
	return lifetimes_add(&c->lts[s->lt_at - 1], life, life < c->temporary_ns);
}

static int on_free(struct collector *c, const struct heapbpf_free_event *e)
{
	bool before = e->alloc_time_ns && e->alloc_time_ns < c->attach_coarse_ns;
	struct tctx_ent *t = NULL;
	uint64_t born;
	uint32_t id, ti, o;
	int err;

	c->stats.frees++;
	if (e->flags & HEAPBPF_F_READ_FAULT)
		c->stats.read_faults++;
	stamp(c, e->ts);
	if (c->stop_ns && e->ts >= c->stop_ns) {
		c->stats.frees_after_stop++;
		return 0;
	}
	if (c->match == MATCH_UNKNOWN)
		liveobjs_choose_match(c, e->ptr ? MATCH_PTR : MATCH_TCTX);
	err = checkpoints_before(c, e->ts);
	if (err)
		return err;
	if (e->tctx && !hashmap__get(&c->tctx_by_addr, hashmap_hash_u64(e->tctx), &ti))
		t = &c->tctxs[ti];
	if (e->ptr) {
		/*
		 * The version passes the pointer: exact, whatever was sampled
		 * before heapbpf attached (5.2.1 records no allocation time).
		 */
		if (hashmap__del(&c->obj_by_ptr, hashmap_hash_u64(e->ptr), &o))
			goto unmatched;
		id = c->objs[o].stack;
		born = c->objs[o].ts;
		liveobjs_release(c, o);
		if (t && t->live && t->stack == id)
			t->live--;
	} else {
		if (!t || !t->live || before)
			goto unmatched;
		t->live--;
		id = t->stack;
		/* heapbpf's own time of the sample, else jemalloc's coarser one */
		born = liveobjs_ts_take(t, e->alloc_time_ns) ?: e->alloc_time_ns;
		if (!t->live)
			liveobjs_ts_reset(t);
	}
	return count_free(c, id, e, born);
unmatched:
	c->stats.frees_unmatched++;
	c->stats.frees_unmatched_bytes += e->usize;
	return 0;
}

int collector__event(void *ctx, void *data, size_t len)
{
	struct collector *c = ctx;
	__u32 type;

	if (len < sizeof(type) || c->ended) {
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
	struct collector_counts n = { .samples = samples,
				      .bytes = bytes,
				      .inuse_samples = inuse_samples,
				      .inuse_bytes = inuse_bytes };
	double w;

	/* per-object sizes are not known here: weigh by the mean */
	w = samples ? unbias_objects(bytes / samples, c->period) : 0;
	n.alloc_objects = w * (double)samples;
	n.alloc_space = w * (double)bytes;
	w = inuse_samples ? unbias_objects(inuse_bytes / inuse_samples, c->period) : 0;
	n.inuse_objects = w * (double)inuse_samples;
	n.inuse_space = w * (double)inuse_bytes;
	return collector__add_counts(c, frames, nframes, &n);
}

int collector__add_counts(struct collector *c, const uint64_t *frames, uint32_t nframes,
			  const struct collector_counts *n)
{
	struct hb_stack *s;
	uint32_t id;
	int err;

	if (nframes > HEAPBPF_MAX_FRAMES || c->ended)
		return -EINVAL;
	err = stack_intern(c, frames, nframes, &id);
	if (err)
		return err;
	s = &c->stacks[id];
	s->samples += n->samples;
	s->bytes += n->bytes;
	s->inuse_samples += (int64_t)n->inuse_samples;
	s->inuse_bytes += (int64_t)n->inuse_bytes;
	s->alloc_objects += n->alloc_objects;
	s->alloc_space += n->alloc_space;
	s->inuse_objects += n->inuse_objects;
	s->inuse_space += n->inuse_space;
	c->stats.allocs += n->samples;
	c->stats.alloc_bytes += n->bytes;
	return 0;
}

void collector__end(struct collector *c)
{
	c->ended = true;
	hashmap__clear(&c->stack_by_frames);
	hashmap__clear(&c->addr_ids);
	hashmap__clear(&c->tctx_by_addr);
	hashmap__clear(&c->obj_by_ptr);
	free(c->dirty);
	c->dirty = NULL;
	c->ndirty = c->cap_dirty = 0;
	free(c->last);
	c->last = NULL;
	c->nlast = 0;
	free(c->carry);
	c->carry = NULL;
	c->ncarry = 0;
}

void collector__release_frames(struct collector *c, size_t upto)
{
	/* stacks take their frames from the slabs in order: slab j holds those from slab_first[j] on */
	while (c->slabs_freed < c->nslabs &&
	       (upto >= c->nstacks ||
		(c->slabs_freed + 1 < c->nslabs && c->slab_first[c->slabs_freed + 1] <= upto))) {
		free(c->slabs[c->slabs_freed]);
		c->slabs[c->slabs_freed++] = NULL;
	}
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

uint64_t collector__frame(const struct collector *c, const struct hb_stack *s, size_t k)
{
	return c->addrs[s->frames[k]];
}

const uint64_t *collector__frames(const struct collector *c, const struct hb_stack *s,
				  uint64_t *buf)
{
	for (size_t k = 0; k < s->nframes; k++)
		buf[k] = c->addrs[s->frames[k]];
	return buf;
}

const uint64_t *collector__addrs(const struct collector *c, size_t *n)
{
	*n = c->naddrs;
	return c->addrs;
}

const struct hb_stack_peak *collector__stack_peak(const struct collector *c, size_t i)
{
	static const struct hb_stack_peak none;

	return i < c->nstacks && c->stacks[i].peak_at ? &c->peaks[c->stacks[i].peak_at - 1] : &none;
}

const struct hb_lifetimes *collector__stack_lifetimes(const struct collector *c, size_t i)
{
	static const struct hb_lifetimes none;

	return i < c->nstacks && c->stacks[i].lt_at ? &c->lts[c->stacks[i].lt_at - 1] : &none;
}

const struct collector_stats *collector__stats(const struct collector *c)
{
	return &c->stats;
}

const struct collector_totals *collector__totals(const struct collector *c)
{
	return &c->now;
}

const struct collector_totals *collector__peak(const struct collector *c)
{
	return &c->peak;
}

const struct collector_checkpoint *collector__checkpoints(const struct collector *c, size_t *n)
{
	*n = c->nckpts;
	return c->ckpts;
}
