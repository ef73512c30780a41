/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * heapbpf watch: stays attached, a profile when a trigger fires (the triggers are
 * run/watch.c, which the agent shares).
 */
#ifndef __HEAPBPF_CMD_WATCH_H
#define __HEAPBPF_CMD_WATCH_H

#include <stddef.h>

#include "cli/cli.h"

struct run;

extern const char watch_help[];
/* The run of r's options; 0, or negative errno with a sentence in err. */
int watch_command(const struct cli *c, struct run *r, char *err, size_t errlen);
/* What applies to it on the command line: its row of main's table (cli/cli.h) */
int watch_parse(struct cli *c, const struct cli_given *g, int n, char **operands);

#endif /* __HEAPBPF_CMD_WATCH_H */
