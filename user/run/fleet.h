/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The targets of a live run (--pid, --unit, --pidfile), each profiled by
 * live_run(), in parallel child processes when there are several (signals
 * forwarded); its outputs (outputs.h) set up first and finished at the end.
 */
#ifndef __HEAPBPF_FLEET_H
#define __HEAPBPF_FLEET_H

#include <stddef.h>

#include "run/run.h"

/*
 * Runs every target of r. Returns 0 with r->outcome set, or a negative
 * errno with a one-sentence message in err when no target could be run.
 */
int fleet_run(struct run *r, char *err, size_t errlen);

#endif /* __HEAPBPF_FLEET_H */
