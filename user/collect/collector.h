/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The collector: consumes ring-buffer events, deduplicates raw stacks
 * (jemalloc's backtraces, untrimmed) and keeps per stack the sampled and
 * unbiased allocation totals and what is still in use. Frees are matched to
 * stacks by pointer where jemalloc passes one, else through jemalloc's tctx,
 * as jemalloc itself counts them. Beyond totals (docs/analysis.md): each
 * sampled object's lifetime, the in-use of every stack at checkpoints driven
 * by the events' own timestamps, and every stack's in-use at the instant the
 * estimated in-use peaked.
 */
#ifndef __HEAPBPF_COLLECTOR_H
#define __HEAPBPF_COLLECTOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "collect/collector_types.h"
#include "collect/lifetimes.h"

/* Stack i's estimated bytes in use at checkpoint k of ck (collector__checkpoints). */
float collector_ckpt_inuse(const struct collector_checkpoint *ck, size_t k, size_t i);
/* Adds stack i's estimated bytes in use at each of the n checkpoints of ck to y[0..n). */
void collector_ckpt_add_series(const struct collector_checkpoint *ck, size_t n, size_t i, float *y);

struct collector;

/* A forked child's collector (--follow-forks), labelled by its pid in the profile. */
struct collector_proc {
	pid_t pid;
	struct collector *c; /* the session's, fed by its events; reports only read it */
};

/* period: jemalloc's R in bytes. */
int collector__new(uint64_t period, struct collector **out);
void collector__free(struct collector *c);
/*
 * Objects whose jemalloc alloc_time (CLOCK_MONOTONIC_COARSE) is older than
 * this were sampled before heapbpf attached; their frees are not subtracted.
 */
void collector__set_attach_time(struct collector *c, uint64_t coarse_ns);
/*
 * The CLOCK_MONOTONIC instant sampling was switched off. In-use is the state
 * at that instant: frees after it are not subtracted, while allocations
 * sampled just before it and delivered after it still count.
 */
void collector__set_stop_time(struct collector *c, uint64_t mono_ns);
uint64_t collector__stop_time(const struct collector *c);
/* Lifetimes shorter than this count as temporary (default 1 ms); set before any event. */
void collector__set_temporary_threshold(struct collector *c, uint64_t ns);
uint64_t collector__temporary_threshold(const struct collector *c);
/* Ring-buffer callback: ctx is the collector, data one event. Returns 0 or -ENOMEM. */
int collector__event(void *ctx, void *data, size_t len);

/*
 * Adds aggregate totals for one raw stack, as jemalloc's own dump reports
 * them (raw sampled counts): used to read a jemalloc heap dump into the same
 * pipeline. Unbiased values are estimated from the mean object size.
 */
int collector__add_totals(struct collector *c, const uint64_t *frames, uint32_t nframes,
			  uint64_t samples, uint64_t bytes, uint64_t inuse_samples,
			  uint64_t inuse_bytes);

/* One stack's totals from jemalloc's own tables (heapbpf --live-heap): raw and estimated. */
struct collector_counts {
	uint64_t samples, bytes;	     /* sampled allocations (accumulated) */
	uint64_t inuse_samples, inuse_bytes; /* sampled, still live */
	double alloc_objects, alloc_space;   /* estimates of all allocations */
	double inuse_objects, inuse_space;   /* estimates of all live objects */
};

/*
 * Adds one raw stack's totals as given, raw and estimated alike (so --raw
 * and unbiased outputs both carry what the source computed).
 */
int collector__add_counts(struct collector *c, const uint64_t *frames, uint32_t nframes,
			  const struct collector_counts *n);

/*
 * Starts a new allocation window without detaching (heapbpf --interval):
 * zeroes every stack's allocation totals (samples, bytes, alloc_objects,
 * alloc_space) and keeps what is in use, so the next profile carries the
 * window's allocations as deltas and in-use as the state at its end.
 */
void collector__reset_alloc(struct collector *c);

/*
 * No event comes any more (the session or the replay is over): releases
 * what only events use (the indexes of stacks, frame addresses, tctxs and
 * live pointers: 8 MiB at 100k stacks), before the last profile is built.
 * Later events are counted as malformed and not applied.
 */
void collector__end(struct collector *c);
/*
 * The last profile built from c reads its stacks in order: the frames of
 * stacks below upto are not read again, and the slabs holding only those
 * are freed. Reading them afterwards is a bug.
 */
void collector__release_frames(struct collector *c, size_t upto);

uint64_t collector__period(const struct collector *c);
size_t collector__nstacks(const struct collector *c);
const struct hb_stack *collector__stack(const struct collector *c, size_t i);
/*
 * The raw return address of frame k of s (k < s->nframes): frames are kept
 * as 4-byte ids of the collector's distinct addresses, each address once.
 */
uint64_t collector__frame(const struct collector *c, const struct hb_stack *s, size_t k);
/* All of s's frames as addresses, into buf (HEAPBPF_MAX_FRAMES entries); returns buf. */
const uint64_t *collector__frames(const struct collector *c, const struct hb_stack *s,
				  uint64_t *buf);
/* The distinct frame addresses, by id: what collector__frame reads. */
const uint64_t *collector__addrs(const struct collector *c, size_t *n);
/* Stack i's in use at the peak: all zero when it had nothing in use then. */
const struct hb_stack_peak *collector__stack_peak(const struct collector *c, size_t i);
/* The lifetimes of stack i's sampled objects freed so far: empty when none. */
const struct hb_lifetimes *collector__stack_lifetimes(const struct collector *c, size_t i);
const struct collector_stats *collector__stats(const struct collector *c);

/* Now: the totals after the last event applied. */
const struct collector_totals *collector__totals(const struct collector *c);
/*
 * The instant the sampled in-use bytes were highest (the first event that
 * reached it; ts 0: nothing was ever in use), its totals; each stack's
 * collector__stack_peak holds what it had in use then.
 */
const struct collector_totals *collector__peak(const struct collector *c);
/* The checkpoints so far, oldest first. */
const struct collector_checkpoint *collector__checkpoints(const struct collector *c, size_t *n);
/*
 * For each stack (out has collector__nstacks() entries): the
 * CLOCK_MONOTONIC allocation time of its oldest sampled object still live,
 * 0 when none is known.
 */
void collector__oldest_live(const struct collector *c, uint64_t *out);
/*
 * For each stack (out has collector__nstacks() entries): how many of its
 * sampled objects still live were allocated (CLOCK_MONOTONIC) before
 * before[stack]; a stack whose before[] is 0 counts none.
 */
void collector__count_live_before(const struct collector *c, const uint64_t *before, uint32_t *out);

#endif /* __HEAPBPF_COLLECTOR_H */
