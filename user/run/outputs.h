/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Where a live run's profiles go, besides the files it names: --output-dir
 * (created and checked first, retention after every window and at the
 * end) and Pyroscope (naming, spool and connection set up first; a
 * delivery that does not wait after every window, the last one at the
 * end). Called directly by whoever writes a window (live.c, watch.c, the
 * agent).
 */
#ifndef __HEAPBPF_OUTPUTS_H
#define __HEAPBPF_OUTPUTS_H

#include <stddef.h>

#include "run/run.h"
#include "util/retain.h"

/*
 * The run's destinations, said wrong before anything is profiled:
 * --output-dir created and checked, --pyroscope's naming, spool and
 * connection. 0 or a negative errno with a sentence in err.
 */
int outputs_setup(struct run *r, char *err, size_t errlen);
/* After each window of the run's targets: retention, a delivery attempt that does not wait. */
void outputs_window_done(struct run *r);
/* At the end: retention, the last delivery (its outcome in r), Pyroscope closed. */
void outputs_finish(struct run *r);
/* What retention in --output-dir did that is worth saying (files dated ahead, -v's count). */
void outputs_say_pruned(const struct run_opts *o, const struct retain_result *rr);

#endif /* __HEAPBPF_OUTPUTS_H */
