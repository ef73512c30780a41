/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What the collector counts (collector.h): per stack, its totals and its
 * in use at the peak; for the run, its event counts, its totals now and at
 * the peak, and the checkpoints. Apart from the collector's functions so
 * that its own files (collector_state.h) can hold them without reaching
 * up to its entry points.
 */
#ifndef __HEAPBPF_COLLECTOR_TYPES_H
#define __HEAPBPF_COLLECTOR_TYPES_H

#include <stddef.h>
#include <stdint.h>

/*
 * 88 bytes: what every event touches. What only some stacks have is beside
 * it, in the collector (collector__stack_peak, collector__stack_lifetimes).
 */
struct hb_stack {
	uint32_t *frames;     /* leaf first: ids of raw return addresses (collector__frame) */
	uint16_t nframes;     /* at most HEAPBPF_MAX_FRAMES */
	uint8_t peak_dirty;   /* the collector's: changed since the peak was copied */
	uint32_t flags;	      /* HEAPBPF_F_* seen on any sample of this stack */
	uint64_t samples;     /* sampled allocations */
	uint64_t bytes;	      /* their usable bytes */
	double alloc_objects; /* unbiased estimates */
	double alloc_space;
	int64_t inuse_samples; /* sampled, not freed yet */
	int64_t inuse_bytes;
	double inuse_objects;
	double inuse_space;
	/* the collector's: 1 + where its peak copy and its lifetimes are, 0: none */
	uint32_t peak_at, lt_at;
};

/* A stack's in use at the collector's peak (collector__peak). */
struct hb_stack_peak {
	int64_t samples, bytes;
	double objects, space;
};

/* No return address is below this: the null page holds no code. */
#define HB_MIN_FRAME 4096

struct collector_stats {
	uint64_t allocs, frees;
	uint64_t alloc_bytes;	  /* sampled usable bytes */
	uint64_t frees_matched;	  /* frees of samples heapbpf saw allocated */
	uint64_t frees_unmatched; /* frees of objects sampled before heapbpf attached */
	uint64_t frees_unmatched_bytes;
	uint64_t frees_after_stop; /* frees after sampling was switched off: not subtracted */
	uint64_t read_faults, truncated, malformed;
	/*
	 * Allocation records whose backtrace held an address in the first page,
	 * where no code is: memory that was not jemalloc's backtrace, read by the
	 * kernel side. Left out of the profile, and said.
	 */
	uint64_t bad_frames;
	uint64_t alloc_faults;	    /* the samples among read_faults: no stack, a size of what */
	uint64_t first_ts, last_ts; /* CLOCK_MONOTONIC ns of first and last event */
};

/* Totals of every stack at one instant. */
struct collector_totals {
	uint64_t ts; /* CLOCK_MONOTONIC of the last event applied; 0: none */
	int64_t inuse_samples, inuse_bytes;
	double inuse_space; /* estimated bytes in use */
	double alloc_space; /* estimated bytes allocated since the first event (never reset) */
};

/*
 * In use at one instant, every CHECKPOINT_FIRST_NS from the first event on;
 * when COLLECTOR_MAX_CHECKPOINTS are taken every other one is dropped and
 * the spacing doubles, so any run keeps between half and all of them.
 */
#define COLLECTOR_MAX_CHECKPOINTS 64
#define CHECKPOINT_FIRST_NS	  100000000ULL

struct collector_checkpoint {
	uint64_t ts;	    /* CLOCK_MONOTONIC */
	double inuse_space; /* estimated bytes in use, all stacks */
	double alloc_space; /* estimated bytes allocated since the first event */
	size_t nstacks;	    /* stacks known then: later ones had nothing in use */
	/*
	 * Per stack, estimated bytes in use (read with collector_ckpt_inuse):
	 * only the nids stacks whose value changed since the checkpoint before
	 * (since zero for the first), ascending in ids, their new values in
	 * inuse. A stack's value at checkpoint k is its last change at or
	 * before k.
	 */
	float *inuse;
	uint32_t *ids;
	size_t nids;
};

#endif /* __HEAPBPF_COLLECTOR_TYPES_H */
