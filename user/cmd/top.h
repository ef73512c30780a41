/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * heapbpf top --pid PID: the allocation sites live (the view is run/top.c).
 */
#ifndef __HEAPBPF_CMD_TOP_H
#define __HEAPBPF_CMD_TOP_H

#include <stddef.h>

#include "cli/cli.h"

struct run;

extern const char top_help[];
/* The run of r's options; 0, or negative errno with a sentence in err. */
int top_command(const struct cli *c, struct run *r, char *err, size_t errlen);
/* What applies to it on the command line: its row of main's table (cli/cli.h) */
int top_parse(struct cli *c, const struct cli_given *g, int n, char **operands);

#endif /* __HEAPBPF_CMD_TOP_H */
