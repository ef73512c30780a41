/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * heapbpf agent: one heapbpf for the node. Every process whose jemalloc
 * runs with prof:true and that the --select/--exclude rules take is found
 * (targets/discover.c), named as Grafana Alloy names it
 * (targets/workload.c), and watched as heapbpf watch watches one
 * (run/watch.c) in one node session (sampling/node.c), with a window every
 * --interval; at most --max-targets at once, rotated when more match.
 */
#ifndef __HEAPBPF_RUN_AGENT_H
#define __HEAPBPF_RUN_AGENT_H

#include <stddef.h>

#include "run/run.h"

/*
 * Runs until SIGINT, SIGTERM (or -d). 0 with r->outcome set, or a negative
 * errno with a sentence in err when it could not start. prof_active is
 * back off in every process it switched on, on every path but kill -9,
 * after which heapbpf --reset restores them (run/reset.c).
 */
int agent_run(struct run *r, char *err, size_t errlen);

#endif /* __HEAPBPF_RUN_AGENT_H */
