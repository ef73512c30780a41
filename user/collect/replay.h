/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Reading a recording back into the live pipeline: events into a collector,
 * recorded mappings into an offline symbolizer, jemalloc's identity for
 * trimming, so `heapbpf report` produces what the live run would have.
 */
#ifndef __HEAPBPF_REPLAY_H
#define __HEAPBPF_REPLAY_H

#include <linux/types.h>
#include <stdbool.h>
#include <stdint.h>

#include "collector.h"
#include "heapbpf.h"
#include "symbolize.h"
#include "target.h"

struct replay_opts {
	double from, to;	 /* window in seconds from the start; to < 0: to the end */
	const char *const *dirs; /* where else to look for binaries (NULL-terminated) */
	bool no_symbols;	 /* skip opening binaries (for fuzzing and benchmarks) */
	uint64_t temporary_ns;	 /* --temporary-threshold; 0: the collector's (1 ms) */
};

struct replay {
	struct collector *collector;
	struct symbolizer *symbolizer; /* NULL with no_symbols */
	struct jemalloc_target ident;  /* path, is_main_exe, prefixes: what trimming needs */
	struct heapbpf_counters counters;
	int64_t start_wall_ns, duration_ns;
	uint64_t events, maps;
	bool truncated; /* the file ended early: the readable prefix was used */
	bool stopped;	/* it has its STOP record */
	char note[512]; /* why it was truncated, for the user */
	char pid[16], comm[32], version[96];
};

/* Loads path; on failure a one-sentence reason in err. */
int replay__load(const char *path, const struct replay_opts *o, struct replay **out, char *err,
		 size_t errlen);
void replay__free(struct replay *r);

#endif /* __HEAPBPF_REPLAY_H */
