/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * heapbpf report FILE: a core file (ET_CORE, or --core: the sampled live
 * heap at the time of the dump, written like any profile; RUN_NO_SAMPLES in
 * r when jemalloc held no sampled object) or a recording (the outputs of a
 * live run, offline, as one window).
 */
#ifndef __HEAPBPF_REPORT_CMD_H
#define __HEAPBPF_REPORT_CMD_H

#include <stddef.h>

#include "run/run.h"

int report_file(struct run *r, char *err, size_t errlen);

/* heapbpf report --help */
extern const char report_help[];

#endif /* __HEAPBPF_REPORT_CMD_H */
