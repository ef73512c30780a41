/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* heapbpf diff BASE NEW: the command (the comparison itself is profile/diff.h). */
#ifndef __HEAPBPF_CMD_DIFF_H
#define __HEAPBPF_CMD_DIFF_H

#include <stddef.h>

#include "cli/cli.h"

struct run;

/*
 * Loads both, prints the largest changes of the chosen sample type on
 * stderr and writes the differential profile through the sink (-o, else
 * heapbpf-diff-TIME.*). 0 or a negative errno with a message in err.
 */
int diff_command(const struct cli *c, struct run *r, char *err, size_t errlen);
/* What applies to it on the command line: its row of main's table (cli/cli.h) */
int diff_parse(struct cli *c, const struct cli_given *g, int n, char **operands);

/* heapbpf diff --help */
extern const char diff_help[];

#endif /* __HEAPBPF_CMD_DIFF_H */
