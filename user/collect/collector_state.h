/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The collector as its own files share it: collector.c (the stacks, their
 * frames, the events), checkpoints.c (the in-use at checkpoints), peak.c
 * (the in-use at the peak) and liveobjs.c (the live sampled objects frees
 * are matched against). Its state, and the functions one of them calls of
 * another. Private to the collector: nothing outside those files includes
 * this.
 */
#ifndef __HEAPBPF_COLLECTOR_STATE_H
#define __HEAPBPF_COLLECTOR_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "collect/collector_types.h"
#include "collect/lifetimes.h"
#include "util/hashmap.h"

/* A tctx's live allocation times: the top bit of ts marks one freed (2^63 ns is 292 years). */
#define TS_DEAD	  (1ULL << 63)
#define TS_INLINE 3
#define NO_OBJ	  UINT32_MAX

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

/*
 * A live sample of a tctx: heapbpf's allocation time, and the coarse clock
 * (jemalloc's) at the probe, 0 where not read (version 1 recordings; a
 * target in another time namespace whose clock heapbpf could not find).
 */
struct ts_ent {
	uint64_t ts;
	uint64_t coarse;
};

/* A tctx is one (thread, backtrace) context of jemalloc; its address is reused once dead. */
struct tctx_ent {
	uint32_t stack;
	uint32_t live; /* samples heapbpf saw allocated and not yet freed */
	/*
	 * Frees by tctx: the live samples' CLOCK_MONOTONIC allocation times (with
	 * their coarse times at the probe), ascending (one thread's events arrive in
	 * order); freed ones marked TS_DEAD until the array is compacted. Live
	 * entries are in [head, n), the first and the last live, dead counts the
	 * marks between. The first TS_INLINE live inside the entry (cap 0): most
	 * tctxs have few, and a separate array would cost a cache miss on every
	 * event.
	 */
	uint32_t head, n, cap, dead;
	union {
		struct ts_ent *heap;
		struct ts_ent inl[TS_INLINE];
	} ts;
};

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

/*
 * arr (n used of *cap) with room for one more, doubling from 256; NULL leaves
 * it as it was. Here, not in collector.c, for liveobjs.c and peak.c too.
 */
static inline void *collector_room_for_one(void *arr, size_t *cap, size_t n, size_t size)
{
	size_t ncap = *cap ? *cap * 2 : 256;

	if (n < *cap)
		return arr;
	arr = reallocarray(arr, ncap, size);
	if (arr)
		*cap = ncap;
	return arr;
}

/* checkpoints.c */
void checkpoints_clear(struct collector_checkpoint *k);
/* The checkpoints due before an event at ts, each the state before it. */
int checkpoints_before(struct collector *c, uint64_t ts);

/* peak.c */
/* Before stack id's in-use changes: it is to be copied at the next peak. */
int peak_mark(struct collector *c, uint32_t id);
/* After an allocation at ts: a new peak copies the stacks changed since the last copy. */
int peak_check(struct collector *c, uint64_t ts);

/* liveobjs.c */
/* The object at ptr is now (stack, ts); a missed free of an earlier one there is overwritten. */
int liveobjs_track(struct collector *c, uint64_t ptr, uint32_t stack, uint64_t ts);
/* Slot o of the objects by pointer is free again. */
void liveobjs_release(struct collector *c, uint32_t o);
/* t has no live allocation times any more. */
void liveobjs_ts_reset(struct tctx_ent *t);
/* One more live sample of t (its time and its coarse time at the probe), in its place. */
int liveobjs_ts_push(struct tctx_ent *t, uint64_t ts, uint64_t coarse);
/*
 * The heapbpf allocation time of the live sample a free by tctx with
 * jemalloc's alloc_time is of, marked freed; 0 when none is live.
 */
uint64_t liveobjs_ts_take(struct tctx_ent *t, uint64_t alloc_time);
/* The first free tells how frees name their objects: the other index goes. */
void liveobjs_choose_match(struct collector *c, enum free_match m);

#endif /* __HEAPBPF_COLLECTOR_STATE_H */
