/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* heapbpf --pid N: the story of one live target, from discovery to its last window. */
#ifndef __HEAPBPF_LIVE_H
#define __HEAPBPF_LIVE_H

#include <stddef.h>

#include "run.h"

/*
 * Profiles tr->pid: checks privileges, finds jemalloc, takes the target's
 * guard (and restores what a killed run left), runs the session with its
 * windows and writes the last one. Returns 0 with tr->outcome set, or a
 * negative errno with a one-sentence message in err. prof_active is back
 * as it was on every path.
 */
int live_run(struct target_run *tr, char *err, size_t errlen);

#endif /* __HEAPBPF_LIVE_H */
