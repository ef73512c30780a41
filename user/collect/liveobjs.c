// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The live sampled objects, what frees are matched against: by pointer
 * where jemalloc's free hook passes one, else by tctx and allocation time;
 * and what is still live of each stack (its oldest, how many before a time).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "collect/collector.h"
#include "collect/collector_state.h"
#include "util/hashmap.h"

/* A free's allocation time can be this much later than heapbpf's timestamp of the sample. */
#define MATCH_SLACK_NS 50000ULL

static inline struct ts_ent *tsv(struct tctx_ent *t)
{
	return t->cap ? t->ts.heap : t->ts.inl;
}

static inline const struct ts_ent *tsv_c(const struct tctx_ent *t)
{
	return t->cap ? t->ts.heap : t->ts.inl;
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
	o = collector_room_for_one(c->objs, &c->cap_objs, c->nobjs, sizeof(*o));
	if (!o)
		return -ENOMEM;
	c->objs = o;
	*out = c->nobjs++;
	return 0;
}

void liveobjs_release(struct collector *c, uint32_t o)
{
	c->objs[o].stack = NO_OBJ;
	c->objs[o].next = c->free_objs;
	c->free_objs = o;
}

/* The object at ptr is now (stack, ts); a missed free of an earlier one there is overwritten. */
int liveobjs_track(struct collector *c, uint64_t ptr, uint32_t stack, uint64_t ts)
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
			liveobjs_release(c, o);
			return err;
		}
	}
	c->objs[o] = (struct live_obj){ .ts = ts, .stack = stack };
	return 0;
}

void liveobjs_ts_reset(struct tctx_ent *t)
{
	t->head = 0;
	t->n = 0;
	t->dead = 0;
}

static void ts_compact(struct tctx_ent *t)
{
	struct ts_ent *v = tsv(t);
	uint32_t m = 0;

	for (uint32_t i = t->head; i < t->n; i++) {
		if (!(v[i].ts & TS_DEAD))
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
	struct ts_ent *nts;

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

int liveobjs_ts_push(struct tctx_ent *t, uint64_t ts, uint64_t coarse)
{
	uint32_t pos;
	struct ts_ent *v;
	int err = ts_room(t);

	if (err)
		return err;
	v = tsv(t);
	ts &= ~TS_DEAD;
	/* one thread's events arrive in order; a late one goes to its place */
	pos = t->n;
	while (pos > t->head && (v[pos - 1].ts & ~TS_DEAD) > ts)
		pos--;
	/* a coarse time not read (its vDSO page not yet touched): no later than the one before */
	if (!coarse && pos > t->head)
		coarse = v[pos - 1].coarse;
	memmove(&v[pos + 1], &v[pos], (t->n - pos) * sizeof(*v));
	v[pos] = (struct ts_ent){ .ts = ts, .coarse = coarse };
	t->n++;
	return 0;
}

/* Entry i is freed; the live entries stay between a live head and a live tail. */
static void ts_kill(struct tctx_ent *t, uint32_t i)
{
	struct ts_ent *v = tsv(t);

	v[i].ts |= TS_DEAD;
	t->dead++;
	while (t->head < t->n && (v[t->head].ts & TS_DEAD)) {
		t->head++;
		t->dead--;
	}
	while (t->n > t->head && (v[t->n - 1].ts & TS_DEAD)) {
		t->n--;
		t->dead--;
	}
}

/*
 * Without the probe's coarse time (version 1 recordings; a target in another
 * time namespace whose clock heapbpf could not find): jemalloc's alloc_time
 * (CLOCK_MONOTONIC_COARSE, up to a tick behind, read just after the probe)
 * against heapbpf's own times: the oldest live one allocated at or after it
 * (less a slack for that read), else the newest one.
 */
static uint32_t take_by_ts(const struct tctx_ent *t, uint64_t alloc_time)
{
	uint64_t want = alloc_time > MATCH_SLACK_NS ? alloc_time - MATCH_SLACK_NS : 0;
	const struct ts_ent *v = tsv_c(t);
	uint32_t lo = t->head + 1, hi = t->n - 1, i;

	if (v[t->head].ts >= want)
		return t->head;
	if (v[t->n - 1].ts < want || !(v[t->n - 2].ts & TS_DEAD || v[t->n - 2].ts >= want))
		/* nothing late enough, or only the newest: the newest (head < n - 1 here) */
		return t->n - 1;
	/* the first entry at or after want, in (head, n - 1]; then the first live one */
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if ((v[mid].ts & ~TS_DEAD) < want)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (i = lo; v[i].ts & TS_DEAD; i++)
		;
	return i;
}

/*
 * With it: one thread's samples, in order, each with the coarse clock at
 * its probe (C) and jemalloc's read of the same clock after it (A):
 * C(i) <= A(i) <= C(i + 1). So the sample freed is the oldest live one
 * whose C is the free's A, else the newest live one before it. Only
 * samples whose probe and clock read fell in one coarse tick can be
 * swapped, however far that clock lags the real one; and a swap leaves
 * nothing behind that a later free could not take.
 */
static uint32_t take_by_coarse(const struct tctx_ent *t, uint64_t alloc_time)
{
	const struct ts_ent *v = tsv_c(t);
	uint32_t lo = t->head, hi = t->n, i;

	/* the oldest or the newest: frees in or against allocation order, O(1) */
	if (v[t->head].coarse >= alloc_time)
		return t->head; /* equal, or every one later: the oldest */
	if (v[t->n - 1].coarse < alloc_time)
		return t->n - 1;
	/* the first entry at or after alloc_time in [head, n) */
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (v[mid].coarse < alloc_time)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* the oldest live one at alloc_time */
	for (i = lo; i < t->n && v[i].coarse == alloc_time; i++) {
		if (!(v[i].ts & TS_DEAD))
			return i;
	}
	/* else the newest live one before it (the head is live and before it) */
	for (i = lo - 1; v[i].ts & TS_DEAD; i--)
		;
	return i;
}

/*
 * The heapbpf allocation time of the live sample a free by tctx is of,
 * from jemalloc's alloc_time; marked freed. 0 when none is live.
 */
uint64_t liveobjs_ts_take(struct tctx_ent *t, uint64_t alloc_time)
{
	const struct ts_ent *v = tsv_c(t);
	uint64_t born;
	uint32_t i;

	if (t->n <= t->head)
		return 0;
	/* coarse times known (a 0 only before the first read of one), the newest's says */
	if (v[t->n - 1].coarse && alloc_time)
		i = take_by_coarse(t, alloc_time);
	else
		i = take_by_ts(t, alloc_time);
	born = v[i].ts;
	ts_kill(t, i);
	return born;
}

/* The first free tells how frees name their objects: the other index goes. */
void liveobjs_choose_match(struct collector *c, enum free_match m)
{
	c->match = m;
	if (m == MATCH_PTR) {
		for (size_t i = 0; i < c->ntctxs; i++) {
			if (c->tctxs[i].cap)
				free(c->tctxs[i].ts.heap);
			c->tctxs[i].cap = 0;
			liveobjs_ts_reset(&c->tctxs[i]);
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
			oldest_of(out, t->stack, tsv_c(t)[t->head].ts);
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
		const struct ts_ent *v = tsv_c(t);

		if (t->stack >= c->nstacks)
			continue;
		/* ascending: the live entries before the cutoff are a prefix */
		for (uint32_t k = t->head; k < t->n && (v[k].ts & ~TS_DEAD) < before[t->stack]; k++)
			out[t->stack] += !(v[k].ts & TS_DEAD);
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
