/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The sampled live heap, read from jemalloc's own profiling tables in a
 * memory image (memsrc.h: a live process or a core file) without writing
 * anything: what jemalloc's prof.dump would print, per stack.
 *
 * In: a read-only memory image, the runtime addresses of jemalloc's globals
 * (struct heapwalk_syms) and the version's layout (layout.h: its heap
 * member, and bpf's tctx->gctx, gctx->bt and prof_bt_t offsets). Out: one
 * collector__add_counts() per stack into a collector (so every output of
 * user/export/sink.c works unchanged), and what was seen (struct
 * heapwalk_stats). The walk knows nothing about pids: heapwalk_live() gives
 * it a live process's process_vm_readv source (heapbpf --live-heap and
 * heapbpf rss), heapbpf report on a core a core-file source.
 *
 * The walk (docs/jemalloc.md): the static ckh_t bt2gctx, each of its cells
 * {prof_bt_t *, prof_gctx_t *}, each gctx's red-black tree of tctxs, each
 * tctx's counters. Every pointer is checked with memsrc_mapped() before it is
 * followed, every structure is validated (table size and count, backtrace
 * length plausible: above 128 frames, 5.3.1's prof_bt_max, it is cut to its
 * innermost 128 and counted; tree walk and node counts bounded, tctx->gctx
 * pointing back to the gctx being walked, states valid), and the table's header is read
 * again after the walk: a walk that saw the table change, or failed a check,
 * is retried up to opts->retries times (a running target may be changing
 * it). Nothing is added to the collector unless one whole walk was
 * consistent.
 *
 * The estimates (docs/sampling.md): a stack whose samples are all of one
 * usable size is weighed exactly, as the windowed mode weighs each sample
 * (unbias.h); on 5.3, one whose samples are not keeps jemalloc's own unbiased
 * sums, rounded per size class; on 5.2.1, it is weighed by its mean size.
 *
 * Which counts are reported follows jemalloc's dump (prof_tctx_merge_tdata):
 * tctxs in state nominal of threads whose tdata is not expired (prof.reset
 * expires them); initializing ones are skipped. A stack with nothing current
 * and (prof_accum) nothing accumulated is left out, as the dump leaves it.
 */
#ifndef __HEAPBPF_HEAPWALK_H
#define __HEAPBPF_HEAPWALK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collect/collector.h"
#include "jemalloc/layout.h"
#include "jemalloc/memsrc.h"

/* Runtime addresses (link-time address + load bias) of jemalloc's globals. */
struct heapwalk_syms {
	uint64_t bt2gctx;	 /* static ckh_t bt2gctx (a local symbol, no prefix); required */
	uint64_t lg_prof_sample; /* size_t <ns>lg_prof_sample; required */
	uint64_t opt_prof_accum; /* bool <ns>opt_prof_accum; 0: unknown (taken as false) */
	uint64_t active;	 /* bool <ns>prof_active_state (5.2.1: prof_active); 0: unknown */
};

/* Limits of one walk; heapwalk_default_opts() has the defaults. */
struct heapwalk_opts {
	unsigned retries;	 /* more walks after an inconsistent one (live: 8; a core: 0) */
	unsigned retry_delay_us; /* pause before each retry */
	uint64_t max_gctxs;	 /* more table entries than this: refused as corrupt */
	uint64_t max_tctxs;	 /* tctxs in all trees together */
	unsigned max_lg_buckets; /* lg_curbuckets above this: corrupt */
	bool frozen; /* the image does not change (a core): a count that disagrees is corrupt */
};

void heapwalk_default_opts(struct heapwalk_opts *o);

struct heapwalk_stats {
	uint64_t lg_prof_sample;
	bool prof_active, active_known; /* the flag now */
	bool prof_accum;		/* opt_prof_accum: accumulated counts are kept */
	bool unbiased;			/* 5.3: jemalloc's own unbiased counters were read */
	unsigned attempts;		/* walks made (1: the first was consistent) */
	uint64_t gctxs;			/* table entries */
	uint64_t tctxs;			/* counted (nominal, tdata not expired) */
	uint64_t tctxs_skipped;		/* initializing, or of an expired tdata */
	uint64_t stacks;		/* stacks reported (something current or accumulated) */
	uint64_t empty;			/* of them, with no frame (a prof_backtrace hook that
					 * takes none) */
	uint64_t truncated;		/* of them, backtraces longer than 128 frames, cut to
					 * their innermost 128 (5.3.1's prof_bt_max above 128) */
	/* raw sampled counts, as prof.dump prints them with prof_unbias:false */
	uint64_t curobjs, curbytes, accumobjs, accumbytes;
	/* estimates of the whole heap (see stack_counts() in heapwalk.c) */
	double inuse_objects, inuse_space, alloc_objects, alloc_space;
	/* 5.3: stacks with a value from jemalloc's sums (their samples are not of one size) */
	uint64_t stacks_rounded;
};

/*
 * Walks the tables and adds every stack to c. Returns 0, or a negative errno
 * with one sentence in err and nothing added to c:
 *   -EAGAIN  no consistent walk in 1 + retries attempts (the tables kept
 *            changing, or held something invalid every time);
 *   -EPROTO  a structure failed validation (a corrupt or foreign image);
 *   -EFAULT  a global could not be read;
 *   -ENOMEM.
 * When every attempt failed, the error of the last one is returned, as
 * -EAGAIN if any attempt saw the table change under it.
 */
int heapwalk_read(const struct mem_source *m, const struct jemalloc_layout *l,
		  const struct heapwalk_syms *sy, const struct heapwalk_opts *o,
		  struct collector *c, struct heapwalk_stats *st, char *err, size_t errlen);

/*
 * jemalloc 5.3's prof_do_unbias(): the values its dump prints with
 * prof_unbias:true for a line whose counters sum to curobjs_shifted_unbiased
 * c_shifted and curbytes_unbiased s_unbiased (jeprof's input that unbiases
 * back to them). For tests against such dumps.
 */
void heapwalk_jeprof_input(uint64_t c_shifted, uint64_t s_unbiased, unsigned lg_sample,
			   unsigned lg_tiny_min, uint64_t *c_in, uint64_t *s_in);

/*
 * What jemalloc 5.3 adds to its unbiased counters for n samples of usable
 * size usize (prof_malloc_sample_object): n times the entries of
 * prof_unbiased_sz and prof_shifted_unbiased_cnt for usize's size class, as
 * prof_unbias_map_init() computes them. false when usize has no size class
 * or the sums overflow.
 */
bool heapwalk_jemalloc_sums(uint64_t n, uint64_t usize, unsigned lg_sample, unsigned lg_tiny_min,
			    uint64_t *shifted_objs, uint64_t *bytes);

/*
 * The sentence for st->truncated stacks cut to 128 frames (empty when none):
 * "N stacks were deeper than ...".
 */
void heapwalk_truncated_text(char *buf, size_t len, const struct heapwalk_stats *st);

struct jemalloc_target;

/* The size of a prof_tctx_t as far as the walk reads it: the end of its last field read. */
uint32_t heapwalk_tctx_span(const struct jemalloc_layout *l);

/* The walker's symbol addresses in a found target (bt2gctx, lg_prof_sample, ...). */
int heapwalk_target_syms(const struct jemalloc_target *t, struct heapwalk_syms *sy, char *err,
			 size_t errlen);
/* heapwalk_read() of a found target's live process (memsrc_proc.h), with the default limits. */
int heapwalk_live(const struct jemalloc_target *t, struct collector *c, struct heapwalk_stats *st,
		  char *err, size_t errlen);

#endif /* __HEAPBPF_HEAPWALK_H */
