/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * heapbpf top --pid PID: the allocation sites live (the view is run/top.c).
 */
#ifndef __HEAPBPF_CMD_TOP_H
#define __HEAPBPF_CMD_TOP_H

#include <stddef.h>

struct run;

extern const char top_help[];
/* The run of r's options; 0, or negative errno with a sentence in err. */
int top_command(struct run *r, char *err, size_t errlen);

#endif /* __HEAPBPF_CMD_TOP_H */
