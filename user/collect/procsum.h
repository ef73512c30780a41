/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * --follow-forks: the in-use of a target and its followed children summed
 * over the processes, at every event any of their collectors applies, with
 * checkpoints taken as a collector takes its own (docs/analysis.md) and the
 * exact instant the sum of their estimated in-use peaked. The summary's
 * timeline and peak of a process tree come from here, not from the target's
 * collector alone.
 */
#ifndef __HEAPBPF_PROCSUM_H
#define __HEAPBPF_PROCSUM_H

#include <stddef.h>
#include <stdint.h>

#include "collect/collector.h"

struct procsum;

int procsum__new(struct procsum **out);
void procsum__free(struct procsum *s);
/*
 * One of the processes' collectors applied an event: its totals went from
 * before to after (collector__totals); the sum moves by the difference, at
 * after->ts.
 */
void procsum__add(struct procsum *s, const struct collector_totals *before,
		  const struct collector_totals *after);
/*
 * A process of the sum exited or exec'd at ts with its collector's totals
 * gone: what it had in use leaves the sum (what it allocated stays).
 */
void procsum__leave(struct procsum *s, const struct collector_totals *gone, uint64_t ts);
/* Now: the sum after the last event added (ts: the latest event's). */
const struct collector_totals *procsum__totals(const struct procsum *s);
/* The instant the summed sampled in-use bytes were highest (ts 0: nothing was in use). */
const struct collector_totals *procsum__peak(const struct procsum *s);
/* The checkpoints so far, oldest first: the sum just before each (inuse_space, alloc_space). */
const struct collector_totals *procsum__checkpoints(const struct procsum *s, size_t *n);

#endif /* __HEAPBPF_PROCSUM_H */
