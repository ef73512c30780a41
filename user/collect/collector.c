// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <linux/types.h>

#include "collect/collector.h"
#include "util/hashmap.h"
#include "heapbpf.h"
#include "collect/unbias.h"

/* A free's allocation time can be this much later than heapbpf's timestamp of the sample. */
#define MATCH_SLACK_NS	     50000ULL
#define TEMPORARY_DEFAULT_NS 1000000ULL
/* A tctx's live allocation times: the top bit marks one freed (2^63 ns is 292 years). */
#define TS_DEAD	  (1ULL << 63)
#define TS_INLINE 3
#define NO_OBJ	  UINT32_MAX
/* Frame ids per slab (1 MiB), many stacks' worth even at HEAPBPF_MAX_FRAMES each. */
#define FRAME_SLAB (1u << 18)

/*
 * How frees name their object, known from the first one: by pointer
 * (5.2.1, 5.3.1) or only by tctx and jemalloc's allocation time (5.3.0).
 * Until then both indexes are kept.
 */
enum free_match {
	MATCH_UNKNOWN,
	MATCH_PTR,
	MATCH_TCTX,
};

/* A tctx is one (thread, backtrace) context of jemalloc; its address is reused once dead. */
struct tctx_ent {
	uint32_t stack;
	uint32_t live; /* samples heapbpf saw allocated and not yet freed */
	/*
	 * Frees by tctx: the live samples' CLOCK_MONOTONIC allocation times,
	 * ascending (one thread's events arrive in order); freed ones marked
	 * TS_DEAD until the array is compacted. Live entries are in [head, n),
	 * the first and the last live, dead counts the marks between. The first
	 * TS_INLINE live inside the entry (cap 0): most tctxs have few, and a
	 * separate array would cost a cache miss on every event.
	 */
	uint32_t head, n, cap, dead;
	union {
		uint64_t *heap;
		uint64_t inl[TS_INLINE];
	} ts;
};

static inline uint64_t *tsv(struct tctx_ent *t)
{
	return t->cap ? t->ts.heap : t->ts.inl;
}

static inline const uint64_t *tsv_c(const struct tctx_ent *t)
{
	return t->cap ? t->ts.heap : t->ts.inl;
}

/* A live sampled object, by pointer: its stack and heapbpf's allocation time. */
struct live_obj {
	uint64_t ts;
	uint32_t stack; /* NO_OBJ: a free slot */
	uint32_t next;	/* free slots' list */
};

struct collector {
	double period;
	uint64_t attach_coarse_ns;
	uint64_t stop_ns; /* 0 = still sampling */
	uint64_t temporary_ns;
	enum free_match match;
	struct hb_stack *stacks;
	size_t nstacks, cap_stacks;
	struct hashmap stack_by_frames; /* hashmap_hash_bytes(frames) -> stack */
	/*
	 * The stacks' frames, each stack's contiguous in one slab of
	 * FRAME_SLAB entries: no allocation (and its header) per stack. A
	 * frame is the 4-byte id of its address in addrs: stacks repeat the
	 * same few thousand return addresses (100k stacks of 41 frames: 16 MB
	 * of ids where the addresses took 33 MB).
	 */
	uint32_t **slabs;
	size_t nslabs, slab_used; /* entries used in the last slab */
	size_t *slab_first;	  /* each slab's first stack (it holds those up to the next's) */
	size_t slabs_freed;	  /* the first ones, by collector__release_frames */
	bool ended;		  /* collector__end: no more events */
	uint64_t *addrs;	  /* each distinct frame address once, by id */
	size_t naddrs, cap_addrs;
	struct hashmap addr_ids; /* hashmap_hash_u64(address) -> id */
	struct tctx_ent *tctxs;
	size_t ntctxs, cap_tctxs;
	struct hashmap tctx_by_addr; /* hashmap_hash_u64(tctx) -> tctxs[] */
	/*
	 * Live sampled objects by pointer, where jemalloc's free hook passes the
	 * pointer (5.2.1, 5.3.1): entries leave on free, so it holds only what is live.
	 */
	struct hashmap obj_by_ptr; /* hashmap_hash_u64(ptr) -> objs[] */
	struct live_obj *objs;
	size_t nobjs, cap_objs;
	uint32_t free_objs; /* first free slot of objs, or NO_OBJ */
	struct collector_totals now, peak;
	/* the stacks' peak copies (only of those in use at some peak) and lifetimes (only of those with frees) */
	struct hb_stack_peak *peaks;
	size_t npeaks, cap_peaks;
	struct hb_lifetimes *lts;
	size_t nlts, cap_lts;
	/* stacks whose in-use changed since the peak was last copied into their peak_* */
	uint32_t *dirty;
	size_t ndirty, cap_dirty;
	struct collector_checkpoint ckpts[COLLECTOR_MAX_CHECKPOINTS];
	size_t nckpts;
	/*
	 * Each stack's value at the last checkpoint taken (nlast of them; the
	 * rest were 0), what the next one records changes against; carry: the
	 * stacks a checkpoint dropped by halving changed (ncarry, ascending),
	 * recorded again by the next one.
	 */
	float *last;
	size_t nlast;
	uint32_t *carry;
	size_t ncarry;
	uint64_t ckpt_every, next_ckpt; /* next_ckpt = ckpts[0].ts + nckpts * ckpt_every */
	struct collector_stats stats;
};

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

static void checkpoint_clear(struct collector_checkpoint *k)
{
	free(k->inuse);
	free(k->ids);
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
		checkpoint_clear(&c->ckpts[i]);
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
	na = room_for_one(c->addrs, &c->cap_addrs, c->naddrs, sizeof(*na));
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
	s = room_for_one(c->stacks, &c->cap_stacks, c->nstacks, sizeof(*s));
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

/* Where stack i is in k's changes, or k->nids. */
static size_t ckpt_find(const struct collector_checkpoint *k, size_t i)
{
	size_t lo = 0, hi = k->nids;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (k->ids[mid] < i)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < k->nids && k->ids[lo] == i ? lo : k->nids;
}

float collector_ckpt_inuse(const struct collector_checkpoint *ck, size_t k, size_t i)
{
	for (size_t j = k + 1; j-- > 0;) {
		size_t at;

		if (i >= ck[j].nstacks)
			return 0.0f;
		at = ckpt_find(&ck[j], i);
		if (at < ck[j].nids)
			return ck[j].inuse[at];
	}
	return 0.0f;
}

void collector_ckpt_add_series(const struct collector_checkpoint *ck, size_t n, size_t i, float *y)
{
	float v = 0.0f;

	for (size_t k = 0; k < n; k++) {
		size_t at = ckpt_find(&ck[k], i);

		if (at < ck[k].nids)
			v = ck[k].inuse[at];
		y[k] += v;
	}
}

/* The same bits (-0.0 is a change from 0.0: reads give back exactly the value). */
static bool same_float(float a, float b)
{
	uint32_t x, y;

	memcpy(&x, &a, sizeof(x));
	memcpy(&y, &b, sizeof(y));
	return x == y;
}

/* c->last with room for every stack, the new ones 0. */
static int last_room(struct collector *c)
{
	float *nl;

	if (c->nlast >= c->nstacks)
		return 0;
	nl = reallocarray(c->last, c->nstacks, sizeof(*nl));
	if (!nl)
		return -ENOMEM;
	memset(nl + c->nlast, 0, (c->nstacks - c->nlast) * sizeof(*nl));
	c->last = nl;
	c->nlast = c->nstacks;
	return 0;
}

/*
 * The stacks whose in-use changed since the last checkpoint (or that the
 * carry names) into k: a run whose stacks hold their in-use costs little
 * per checkpoint, where a float per stack would cost 400 KB at 100k stacks.
 */
static int checkpoint_fill(struct collector *c, struct collector_checkpoint *k)
{
	size_t nz = 0, n = c->nstacks, ci = 0;
	int err = last_room(c);

	k->nids = 0;
	k->ids = NULL;
	k->inuse = NULL;
	if (err)
		return err;
	for (size_t i = 0; i < n; i++) {
		bool carried = ci < c->ncarry && c->carry[ci] == i;

		ci += carried;
		nz += carried || !same_float((float)c->stacks[i].inuse_space, c->last[i]);
	}
	k->inuse = malloc((nz ? nz : 1) * sizeof(*k->inuse));
	k->ids = malloc((nz ? nz : 1) * sizeof(*k->ids));
	if (!k->inuse || !k->ids) {
		checkpoint_clear(k);
		return -ENOMEM;
	}
	ci = 0;
	for (size_t i = 0; i < n; i++) {
		float v = (float)c->stacks[i].inuse_space;
		bool carried = ci < c->ncarry && c->carry[ci] == i;

		ci += carried;
		if (carried || !same_float(v, c->last[i])) {
			k->ids[k->nids] = (uint32_t)i;
			k->inuse[k->nids++] = v;
			c->last[i] = v;
		}
	}
	free(c->carry);
	c->carry = NULL;
	c->ncarry = 0;
	return 0;
}

static int checkpoint_take(struct collector *c, uint64_t ts)
{
	struct collector_checkpoint *k = &c->ckpts[c->nckpts];
	double sum = 0;
	int err = checkpoint_fill(c, k);

	if (err)
		return err;
	for (size_t i = 0; i < c->nstacks; i++)
		sum += c->stacks[i].inuse_space;
	k->ts = ts;
	k->inuse_space = sum;
	k->alloc_space = c->now.alloc_space;
	k->nstacks = c->nstacks;
	c->nckpts++;
	return 0;
}

/* a's changes then b's, into b (b's values win): b then holds the changes since before a. */
static int checkpoint_merge(const struct collector_checkpoint *a, struct collector_checkpoint *b)
{
	size_t n = a->nids + b->nids, i = 0, j = 0, m = 0;
	uint32_t *ids = malloc((n ? n : 1) * sizeof(*ids));
	float *v = malloc((n ? n : 1) * sizeof(*v));

	if (!ids || !v) {
		free(ids);
		free(v);
		return -ENOMEM;
	}
	while (i < a->nids || j < b->nids) {
		if (j == b->nids || (i < a->nids && a->ids[i] < b->ids[j])) {
			ids[m] = a->ids[i];
			v[m++] = a->inuse[i++];
		} else {
			i += i < a->nids && a->ids[i] == b->ids[j];
			ids[m] = b->ids[j];
			v[m++] = b->inuse[j++];
		}
	}
	free(b->ids);
	free(b->inuse);
	b->ids = ids;
	b->inuse = v;
	b->nids = m;
	return 0;
}

/*
 * Every other checkpoint goes, the first one stays: twice the spacing, half
 * the count. A dropped one's changes go into the next one kept; the last
 * one's (nckpts is even here) into the next one taken, as the carry.
 */
static int checkpoints_halve(struct collector *c)
{
	struct collector_checkpoint *last = &c->ckpts[c->nckpts - 1];

	for (size_t i = 1; i + 1 < c->nckpts; i += 2) {
		int err = checkpoint_merge(&c->ckpts[i], &c->ckpts[i + 1]);

		if (err)
			return err;
	}
	if (c->nckpts % 2 == 0) {
		/* what the next checkpoint records against is what the dropped one holds */
		c->carry = last->ids;
		c->ncarry = last->nids;
		last->ids = NULL;
	}
	for (size_t i = 0; i < c->nckpts; i++) {
		if (i % 2)
			checkpoint_clear(&c->ckpts[i]);
		else
			c->ckpts[i / 2] = c->ckpts[i];
	}
	c->nckpts = (c->nckpts + 1) / 2;
	c->ckpt_every *= 2;
	return 0;
}

/*
 * The checkpoints due before an event at ts, each the state before it: the
 * events' own clock drives them, so a replay takes the same ones as the
 * live run. Nothing after sampling was switched off.
 */
static int checkpoints_before(struct collector *c, uint64_t ts)
{
	int err;

	if (ts < c->next_ckpt || c->next_ckpt == UINT64_MAX || (c->stop_ns && ts >= c->stop_ns))
		return 0;
	if (!c->nckpts) {
		c->ckpt_every = CHECKPOINT_FIRST_NS;
		c->next_ckpt = ts;
	}
	while (ts >= c->next_ckpt) {
		/* next_ckpt is ckpts[0].ts + nckpts * ckpt_every, before and after halving */
		err = c->nckpts == COLLECTOR_MAX_CHECKPOINTS ? checkpoints_halve(c) : 0;
		err = err ?: checkpoint_take(c, c->next_ckpt);
		if (err)
			return err;
		/* a clock near 2^64 ns (a corrupt recording): the last checkpoint */
		if (c->next_ckpt > UINT64_MAX - c->ckpt_every || c->ckpt_every > UINT64_MAX / 4) {
			c->next_ckpt = UINT64_MAX;
			return 0;
		}
		c->next_ckpt += c->ckpt_every;
	}
	return 0;
}

/* Before stack id's in-use changes: it is to be copied at the next peak. */
static int peak_mark(struct collector *c, uint32_t id)
{
	uint32_t *d;

	if (c->stacks[id].peak_dirty)
		return 0;
	d = room_for_one(c->dirty, &c->cap_dirty, c->ndirty, sizeof(*d));
	if (!d)
		return -ENOMEM;
	c->dirty = d;
	c->dirty[c->ndirty++] = id;
	c->stacks[id].peak_dirty = 1;
	return 0;
}

/* Stack s's peak copy, made if it has none; NULL: no memory. */
static struct hb_stack_peak *peak_of(struct collector *c, struct hb_stack *s)
{
	struct hb_stack_peak *p;

	if (s->peak_at)
		return &c->peaks[s->peak_at - 1];
	p = room_for_one(c->peaks, &c->cap_peaks, c->npeaks, sizeof(*p));
	if (!p)
		return NULL;
	c->peaks = p;
	s->peak_at = (uint32_t)++c->npeaks;
	return &c->peaks[s->peak_at - 1];
}

/*
 * After an allocation at ts: a new peak copies only the stacks changed
 * since the last copy, so each change is copied at most once (amortized
 * O(1) per event) and the peak_* fields are exact, not checkpoint-grained.
 * The peak is the highest estimated in-use (what the summary, the timeline
 * and the page show), not the most sampled bytes: a few large objects,
 * each sampled at about their size, would otherwise outweigh many small
 * ones that each stand for far more.
 */
static int peak_check(struct collector *c, uint64_t ts)
{
	if (c->now.inuse_space <= c->peak.inuse_space)
		return 0;
	for (size_t i = 0; i < c->ndirty; i++) {
		struct hb_stack *s = &c->stacks[c->dirty[i]];
		struct hb_stack_peak *p;

		/* nothing in use now and no copy: its copy would be zeros */
		if (!s->peak_at && !s->inuse_samples && !s->inuse_bytes && !s->inuse_objects &&
		    !s->inuse_space) {
			s->peak_dirty = 0;
			continue;
		}
		p = peak_of(c, s);
		if (!p) {
			/* the ones copied leave the list; the rest stay on it */
			memmove(c->dirty, c->dirty + i, (c->ndirty - i) * sizeof(*c->dirty));
			c->ndirty -= i;
			return -ENOMEM;
		}
		*p = (struct hb_stack_peak){ s->inuse_samples, s->inuse_bytes, s->inuse_objects,
					     s->inuse_space };
		s->peak_dirty = 0;
	}
	c->ndirty = 0;
	c->peak = c->now;
	c->peak.ts = ts;
	return 0;
}

static void now_at(struct collector *c, uint64_t ts)
{
	if (ts > c->now.ts)
		c->now.ts = ts;
}

static int obj_new(struct collector *c, uint32_t *out)
{
	struct live_obj *o;

	if (c->free_objs != NO_OBJ) {
		*out = c->free_objs;
		c->free_objs = c->objs[*out].next;
		return 0;
	}
	if (c->nobjs >= NO_OBJ)
		return -ENOMEM;
	o = room_for_one(c->objs, &c->cap_objs, c->nobjs, sizeof(*o));
	if (!o)
		return -ENOMEM;
	c->objs = o;
	*out = c->nobjs++;
	return 0;
}

static void obj_release(struct collector *c, uint32_t o)
{
	c->objs[o].stack = NO_OBJ;
	c->objs[o].next = c->free_objs;
	c->free_objs = o;
}

/* The object at ptr is now (stack, ts); a missed free of an earlier one there is overwritten. */
static int obj_track(struct collector *c, uint64_t ptr, uint32_t stack, uint64_t ts)
{
	uint64_t h = hashmap_hash_u64(ptr);
	uint32_t o;
	int err;

	if (hashmap__get(&c->obj_by_ptr, h, &o)) {
		err = obj_new(c, &o);
		if (err)
			return err;
		err = hashmap__add(&c->obj_by_ptr, h, o);
		if (err) {
			obj_release(c, o);
			return err;
		}
	}
	c->objs[o] = (struct live_obj){ .ts = ts, .stack = stack };
	return 0;
}

static void ts_reset(struct tctx_ent *t)
{
	t->head = 0;
	t->n = 0;
	t->dead = 0;
}

static void ts_compact(struct tctx_ent *t)
{
	uint64_t *v = tsv(t);
	uint32_t m = 0;

	for (uint32_t i = t->head; i < t->n; i++) {
		if (!(v[i] & TS_DEAD))
			v[m++] = v[i];
	}
	t->head = 0;
	t->n = m;
	t->dead = 0;
}

/* Room for one more entry: squeezed when mostly freed, else doubled (O(1) moves per entry). */
static int ts_room(struct tctx_ent *t)
{
	uint32_t cap = t->cap ? t->cap : TS_INLINE, ncap = cap * 2;
	uint64_t *nts;

	if (t->n < cap)
		return 0;
	if (t->head + t->dead >= t->n / 2) {
		ts_compact(t);
		return 0;
	}
	if (ncap < cap)
		return -ENOMEM;
	nts = t->cap ? reallocarray(t->ts.heap, ncap, sizeof(*nts)) : calloc(ncap, sizeof(*nts));
	if (!nts)
		return -ENOMEM;
	if (!t->cap)
		memcpy(nts, t->ts.inl, sizeof(t->ts.inl));
	t->ts.heap = nts;
	t->cap = ncap;
	return 0;
}

static int ts_push(struct tctx_ent *t, uint64_t ts)
{
	uint32_t pos;
	uint64_t *v;
	int err = ts_room(t);

	if (err)
		return err;
	v = tsv(t);
	ts &= ~TS_DEAD;
	/* one thread's events arrive in order; a late one goes to its place */
	pos = t->n;
	while (pos > t->head && (v[pos - 1] & ~TS_DEAD) > ts)
		pos--;
	memmove(&v[pos + 1], &v[pos], (t->n - pos) * sizeof(*v));
	v[pos] = ts;
	t->n++;
	return 0;
}

/* Entry i is freed; the live entries stay between a live head and a live tail. */
static void ts_kill(struct tctx_ent *t, uint32_t i)
{
	uint64_t *v = tsv(t);

	v[i] |= TS_DEAD;
	t->dead++;
	while (t->head < t->n && (v[t->head] & TS_DEAD)) {
		t->head++;
		t->dead--;
	}
	while (t->n > t->head && (v[t->n - 1] & TS_DEAD)) {
		t->n--;
		t->dead--;
	}
}

/*
 * The heapbpf allocation time of the live sample a free by tctx is of:
 * jemalloc's alloc_time (CLOCK_MONOTONIC_COARSE, up to a tick behind, read
 * just after the probe) says which: the oldest live one allocated at or
 * after it (less a slack for that read), else the newest one. The oldest
 * and the newest are tried first (frees in or against allocation order:
 * O(1)), then a binary search. Marked freed; 0 when none is live.
 */
static uint64_t ts_take(struct tctx_ent *t, uint64_t alloc_time)
{
	uint64_t want = alloc_time > MATCH_SLACK_NS ? alloc_time - MATCH_SLACK_NS : 0, *v = tsv(t);
	uint32_t lo = t->head + 1, hi = t->n - 1, i;
	uint64_t born;

	if (t->n <= t->head)
		return 0;
	if (v[t->head] >= want) {
		i = t->head;
	} else if (v[t->n - 1] < want || !(v[t->n - 2] & TS_DEAD || v[t->n - 2] >= want)) {
		/* nothing late enough, or only the newest: the newest (head < n - 1 here) */
		i = t->n - 1;
	} else {
		/* the first entry at or after want, in (head, n - 1]; then the first live one */
		while (lo < hi) {
			uint32_t mid = lo + (hi - lo) / 2;

			if ((v[mid] & ~TS_DEAD) < want)
				lo = mid + 1;
			else
				hi = mid;
		}
		for (i = lo; v[i] & TS_DEAD; i++)
			;
	}
	born = v[i];
	ts_kill(t, i);
	return born;
}

/* The first free tells how frees name their objects: the other index goes. */
static void choose_match(struct collector *c, enum free_match m)
{
	c->match = m;
	if (m == MATCH_PTR) {
		for (size_t i = 0; i < c->ntctxs; i++) {
			if (c->tctxs[i].cap)
				free(c->tctxs[i].ts.heap);
			c->tctxs[i].cap = 0;
			ts_reset(&c->tctxs[i]);
		}
		return;
	}
	hashmap__clear(&c->obj_by_ptr);
	free(c->objs);
	c->objs = NULL;
	c->nobjs = 0;
	c->cap_objs = 0;
	c->free_objs = NO_OBJ;
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
	err = checkpoints_before(c, e->ts);
	err = err ?: stack_intern(c, e->frames, n, &id);
	err = err ?: count_alloc(c, id, e);
	if (err)
		return err;
	c->stats.allocs++;
	c->stats.alloc_bytes += e->usize;
	if (e->flags & HEAPBPF_F_READ_FAULT)
		c->stats.read_faults++;
	if (e->flags & HEAPBPF_F_TRUNCATED)
		c->stats.truncated++;
	stamp(c, e->ts);

	if (e->ptr && c->match != MATCH_TCTX) {
		err = obj_track(c, e->ptr, id, e->ts);
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
		ts_reset(t);
	}
	t->stack = id;
	t->live++;
	return c->match != MATCH_PTR ? ts_push(t, e->ts) : 0;
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
		struct hb_lifetimes *l = room_for_one(c->lts, &c->cap_lts, c->nlts, sizeof(*l));

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
		choose_match(c, e->ptr ? MATCH_PTR : MATCH_TCTX);
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
		obj_release(c, o);
		if (t && t->live && t->stack == id)
			t->live--;
	} else {
		if (!t || !t->live || before)
			goto unmatched;
		t->live--;
		id = t->stack;
		/* heapbpf's own time of the sample, else jemalloc's coarser one */
		born = ts_take(t, e->alloc_time_ns) ?: e->alloc_time_ns;
		if (!t->live)
			ts_reset(t);
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

static void oldest_of(uint64_t *out, uint32_t stack, uint64_t ts)
{
	if (ts && (!out[stack] || ts < out[stack]))
		out[stack] = ts;
}

void collector__oldest_live(const struct collector *c, uint64_t *out)
{
	memset(out, 0, c->nstacks * sizeof(*out));
	/* before the first free both indexes hold the same objects: the minimum is the same */
	for (size_t i = 0; i < c->nobjs; i++) {
		if (c->objs[i].stack < c->nstacks)
			oldest_of(out, c->objs[i].stack, c->objs[i].ts);
	}
	for (size_t i = 0; i < c->ntctxs; i++) {
		const struct tctx_ent *t = &c->tctxs[i];

		/* the head entry is always live */
		if (t->n > t->head)
			oldest_of(out, t->stack, tsv_c(t)[t->head]);
	}
}

/* Adds to out[stack] each live entry of one index allocated before before[stack]. */
static void count_objs(const struct collector *c, const uint64_t *before, uint32_t *out)
{
	for (size_t i = 0; i < c->nobjs; i++) {
		uint32_t st = c->objs[i].stack;

		if (st < c->nstacks && c->objs[i].ts < before[st])
			out[st]++;
	}
}

static void count_tctxs(const struct collector *c, const uint64_t *before, uint32_t *out)
{
	for (size_t i = 0; i < c->ntctxs; i++) {
		const struct tctx_ent *t = &c->tctxs[i];
		const uint64_t *v = tsv_c(t);

		if (t->stack >= c->nstacks)
			continue;
		/* ascending: the live entries before the cutoff are a prefix */
		for (uint32_t k = t->head; k < t->n && (v[k] & ~TS_DEAD) < before[t->stack]; k++)
			out[t->stack] += !(v[k] & TS_DEAD);
	}
}

void collector__count_live_before(const struct collector *c, const uint64_t *before, uint32_t *out)
{
	size_t nobjs = 0, nts = 0;

	memset(out, 0, c->nstacks * sizeof(*out));
	if (c->match == MATCH_UNKNOWN) {
		/*
		 * Before the first free both indexes hold the same objects, those
		 * whose events named them: the one that holds more.
		 */
		for (size_t i = 0; i < c->nobjs; i++)
			nobjs += c->objs[i].stack < c->nstacks;
		for (size_t i = 0; i < c->ntctxs; i++)
			nts += c->tctxs[i].n - c->tctxs[i].head;
	}
	if (c->match == MATCH_PTR || (c->match == MATCH_UNKNOWN && nobjs >= nts))
		count_objs(c, before, out);
	else
		count_tctxs(c, before, out);
}
