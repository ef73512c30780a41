/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The profiles of one target, window by window: a plain run and a report
 * have one window, --interval one per interval. Each window's profile is
 * built from what was collected, described, written through the sink to
 * every destination the run has (the -o file, --output-dir snapshots,
 * Pyroscope's spool) and summarized on stderr.
 */
#ifndef __HEAPBPF_WINDOW_H
#define __HEAPBPF_WINDOW_H

#include <stddef.h>
#include <stdint.h>

#include "run/run.h"

/*
 * Writes the window that ends at end_ns (wall clock) and starts the next
 * one: the collector's allocation totals restart at zero, what is in use
 * carries over. Returns 0, or a negative errno with a message in err
 * (nothing more of this window written). Drops set RUN_DROPS.
 */
int window_emit(struct target_run *tr, const struct heap_data *d, int64_t end_ns, char *err,
		size_t errlen);

/*
 * After the collection ended at end_ns: the last window (an --interval run
 * stopped right after a window writes none), the BPF counters with -v, and
 * the "nothing sampled" verdict over all windows.
 */
int window_last(struct target_run *tr, const struct heap_data *d, int64_t end_ns, char *err,
		size_t errlen);

#endif /* __HEAPBPF_WINDOW_H */
