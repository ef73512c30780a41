/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* heapbpf agent: its --help and entry point; the node's run is run/agent.c's. */
#ifndef __HEAPBPF_AGENT_H
#define __HEAPBPF_AGENT_H

#include <stddef.h>

#include "run/run.h"

/* heapbpf agent --help */
extern const char agent_help[];
/* heapbpf agent (and --reset with no target): run/agent.c's agent_run(). */
int agent_command(struct run *r, char *err, size_t errlen);

#endif /* __HEAPBPF_AGENT_H */
