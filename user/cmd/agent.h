/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* heapbpf agent: its --help and entry point; the node's run is run/agent.c's. */
#ifndef __HEAPBPF_AGENT_H
#define __HEAPBPF_AGENT_H

#include <stddef.h>

#include "cli/cli.h"

#include "run/run.h"

/* heapbpf agent --help */
extern const char agent_help[];
/* heapbpf agent (and --reset with no target): run/agent.c's agent_run(). */
int agent_command(const struct cli *c, struct run *r, char *err, size_t errlen);
/* What applies to it on the command line: its row of main's table (cli/cli.h) */
int agent_parse(struct cli *c, const struct cli_given *g, int n, char **operands);

#endif /* __HEAPBPF_AGENT_H */
