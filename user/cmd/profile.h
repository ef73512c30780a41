/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * heapbpf --pid PID, the command when none is named: one window of each process, snapshots
 * (--output-dir, --interval) or the live heap (--live-heap).
 */
#ifndef __HEAPBPF_CMD_PROFILE_H
#define __HEAPBPF_CMD_PROFILE_H

#include <stddef.h>

#include "cli/cli.h"

struct run;

extern const char profile_help[];
/* The run of r's options; 0, or negative errno with a sentence in err. */
int profile_command(const struct cli *c, struct run *r, char *err, size_t errlen);
/* What applies to it on the command line: its row of main's table (cli/cli.h) */
int profile_parse(struct cli *c, const struct cli_given *g, int n, char **operands);

#endif /* __HEAPBPF_CMD_PROFILE_H */
