/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* heapbpf --pid N: the story of one live target, from discovery to its last window. */
#ifndef __HEAPBPF_LIVE_H
#define __HEAPBPF_LIVE_H

#include <stddef.h>

#include "run/run.h"

/*
 * Profiles tr->pid: checks privileges, finds jemalloc, takes the target's
 * guard (and restores what a killed run left), runs the session with its
 * windows and writes the last one. Returns 0 with tr->outcome set, or a
 * negative errno with a one-sentence message in err. prof_active is back
 * as it was on every path.
 */
int live_run(struct target_run *tr, char *err, size_t errlen);

/*
 * The same for n targets in one session (their jemalloc layouts the same):
 * ts[i] is trs[i]'s jemalloc when the caller found it already, or NULL;
 * every ts[i] is freed and set to NULL. With n > 1 a target that cannot be
 * prepared, started or written is said on stderr and marks its own outcome
 * RUN_FAILED while the others go on; an error is returned only when none
 * could be profiled or the session itself failed.
 */
int live_run_targets(struct target_run *trs, struct jemalloc_target **ts, size_t n, char *err,
		     size_t errlen);

#endif /* __HEAPBPF_LIVE_H */
