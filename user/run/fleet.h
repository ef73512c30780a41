/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The targets of a live run (--pid, --unit, --pidfile), each profiled by
 * live_run(), in parallel child processes when there are several (signals
 * forwarded); the run's directories and Pyroscope connection set up first,
 * retention and delivery of the spool after every window and at the end.
 */
#ifndef __HEAPBPF_FLEET_H
#define __HEAPBPF_FLEET_H

#include <stddef.h>

#include "util/retain.h"
#include "run/run.h"

/*
 * Runs every target of r. Returns 0 with r->outcome set, or a negative
 * errno with a one-sentence message in err when no target could be run.
 */
int fleet_run(struct run *r, char *err, size_t errlen);

/*
 * The run's destinations, said wrong before anything is profiled:
 * --output-dir created and checked, --pyroscope's naming, spool and
 * connection. 0 or a negative errno with a sentence in err.
 */
int fleet_outputs_setup(struct run *r, char *err, size_t errlen);
/* After each window of the run's targets: retention, a delivery attempt that does not wait. */
void fleet_window_done(struct run *r);
/* At the end: retention, the last delivery (its outcome in r), Pyroscope closed. */
void fleet_outputs_finish(struct run *r);
/* What retention in --output-dir did that is worth saying (files dated ahead, -v's count). */
void fleet_say_pruned(const struct cli *o, const struct retain_result *rr);

#endif /* __HEAPBPF_FLEET_H */
