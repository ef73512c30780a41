/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The live self-check of a layout that neither a release string nor DWARF
 * confirms (a version matched by its X.Y.Z only, such as Redis's
 * "5.3.0-0-g0", or a layout forced with --jemalloc-layout): the first
 * sampled allocations and frees, as decoded from the ring buffer, must look
 * like what jemalloc would hand a correct layout. Allocations: no read
 * fault, a backtrace of 1 to 128 frames each inside an executable mapping,
 * the object and its tctx inside writable mappings, size <= usize. Frees:
 * no read fault, a plausible usize, the pointer (where passed) in a writable
 * mapping, the tctx one the allocations showed (or of an object sampled
 * before heapbpf attached), the same usize and tctx as the allocation of
 * the same pointer, alloc_size <= usize and an allocation time not in the
 * future. docs/jemalloc.md explains why each holds.
 *
 * The session stops at the first inconsistency (the flag is switched back
 * off at once, nothing is written); after SELFCHECK_ALLOCS allocations and
 * SELFCHECK_FREES frees passed, the layout counts as confirmed and events
 * are no longer looked at.
 */
#ifndef __HEAPBPF_SELFCHECK_H
#define __HEAPBPF_SELFCHECK_H

#include <linux/types.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "heapbpf.h"
#include "jemalloc/target.h"

#define SELFCHECK_ALLOCS 16
#define SELFCHECK_FREES	 4

struct selfcheck;

/*
 * For target t (its pid, mappings snapshot, layout and names; t must outlive
 * the check). attach_coarse_ns: CLOCK_MONOTONIC_COARSE when heapbpf
 * attached (objects jemalloc timed before it were sampled before heapbpf
 * saw anything). With t->pid <= 0 the mappings are never read again (tests).
 */
int selfcheck__new(const struct jemalloc_target *t, uint64_t attach_coarse_ns,
		   struct selfcheck **out);
void selfcheck__free(struct selfcheck *sc);

/*
 * One ring-buffer record (events of other processes and other types are
 * ignored). 0: consistent so far; 1: this event completed the confirmation;
 * -EPROTO: the layout does not fit, selfcheck__why() says how.
 */
int selfcheck__event(struct selfcheck *sc, const void *data, size_t len);
int selfcheck__alloc(struct selfcheck *sc, const struct heapbpf_alloc_event *e);
int selfcheck__free_event(struct selfcheck *sc, const struct heapbpf_free_event *e);

bool selfcheck__confirmed(const struct selfcheck *sc);
/* The one-sentence refusal once an event did not fit, else NULL. */
const char *selfcheck__why(const struct selfcheck *sc);
/* Events that passed so far. */
void selfcheck__counts(const struct selfcheck *sc, unsigned int *allocs, unsigned int *frees);

#endif /* __HEAPBPF_SELFCHECK_H */
