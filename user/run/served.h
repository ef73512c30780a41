/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A one-shot run on a process another heapbpf holds (a watch, the agent, a
 * snapshot, an operator's run): its window comes from the holder
 * (user/sampling/serve.h) as a recording, made into the run's own outputs
 * as `heapbpf report` makes them. Same output, same exit code as alone.
 */
#ifndef __HEAPBPF_SERVED_H
#define __HEAPBPF_SERVED_H

#include <stdbool.h>
#include <stddef.h>

#include "run/run.h"
#include "jemalloc/target.h"

/* Whether a run of o can have its window from a holder: a one-shot run or top, of one process. */
bool served_can(const struct run *r, size_t ntargets);
/*
 * tr's window of t (found, held by another run) from its holder, and its
 * outputs written. 0, or negative errno with a sentence in err.
 */
int served_window(struct target_run *tr, const struct jemalloc_target *t, char *err, size_t errlen);

struct top_opts;
/*
 * heapbpf top of t (held by another run) from its holder: the view drawn
 * each second from the window as the holder writes it, until q, a stop
 * signal, the terminal gone, or the holder done with it (the process
 * exited, the holder stopped); then tr's outputs (-o) from the whole
 * window. 0, or negative errno with a sentence in err.
 */
int served_top(struct target_run *tr, const struct jemalloc_target *t, const struct top_opts *to,
	       char *err, size_t errlen);

#endif /* __HEAPBPF_SERVED_H */
