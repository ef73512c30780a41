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

#include "cli/cli.h"

#include "run/run.h"

int report_command(const struct cli *c, struct run *r, char *err, size_t errlen);
/* What applies to it on the command line: its row of main's table (cli/cli.h) */
int report_parse(struct cli *c, const struct cli_given *g, int n, char **operands);

/* heapbpf report --help */
extern const char report_help[];

#endif /* __HEAPBPF_REPORT_CMD_H */
