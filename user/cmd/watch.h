/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * heapbpf watch: stays attached, a profile when a trigger fires (the triggers are
 * run/watch.c, which the agent shares).
 */
#ifndef __HEAPBPF_CMD_WATCH_H
#define __HEAPBPF_CMD_WATCH_H

#include <stddef.h>

struct run;

extern const char watch_help[];
/* The run of r's options; 0, or negative errno with a sentence in err. */
int watch_command(struct run *r, char *err, size_t errlen);

#endif /* __HEAPBPF_CMD_WATCH_H */
