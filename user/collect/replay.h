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

#include "collect/collector.h"
#include "heapbpf.h"
#include "symbols/symbolizer.h"
#include "jemalloc/target.h"

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
	bool truncated;	 /* the file ended early: the readable prefix was used */
	bool stopped;	 /* it has its STOP record */
	uint32_t reason; /* then, why it ended (enum stop_reason) */
	char note[512];	 /* why it was truncated, for the user */
	char pid[16], comm[32], version[96];
};

/* Loads path; on failure a one-sentence reason in err. */
int replay__load(const char *path, const struct replay_opts *o, struct replay **out, char *err,
		 size_t errlen);
void replay__free(struct replay *r);

/*
 * A recording another process is still writing (a served window, serve.h),
 * read as it grows. Its header must be there when it is opened.
 */
struct replay_feed;

int replay_feed__open(const char *path, const struct replay_opts *o, struct replay_feed **out,
		      char *err, size_t errlen);
/*
 * Reads what was written since the last call; last: the writer is done, and
 * its end is the end (a cut record said in the replay's note, as
 * replay__load does). 0, or negative errno with a sentence in err.
 */
int replay_feed__read(struct replay_feed *f, bool last, char *err, size_t errlen);
/*
 * What was read: its collector and symbolizer are NULL until the header was
 * (then made once: the mappings written later are not read); counters
 * hold the drops said so far, and everything once the end was read.
 */
struct replay *replay_feed__replay(struct replay_feed *f);
/* Bytes of the file read so far: nothing before them is read again. */
uint64_t replay_feed__file_offset(const struct replay_feed *f);
void replay_feed__free(struct replay_feed *f);

#endif /* __HEAPBPF_REPLAY_H */
