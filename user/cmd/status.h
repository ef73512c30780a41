/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* heapbpf status: every heapbpf running on the host (user/sampling/runs.h). */
#ifndef __HEAPBPF_STATUS_H
#define __HEAPBPF_STATUS_H

#include <stddef.h>

#include "cli/cli.h"

/*
 * The registration of this run, when it samples (mode and destination from
 * o), for status and for other runs' messages; NULL for what does not.
 */
struct runs_reg *status_register(const struct cli *o);
struct run;
/* heapbpf status: every run listed on stdout. 0, or negative errno with a sentence in err. */
int status_command(const struct cli *c, struct run *r, char *err, size_t errlen);
/* What applies to it on the command line: its row of main's table (cli/cli.h) */
int status_parse(struct cli *c, const struct cli_given *g, int n, char **operands);

/* heapbpf status --help */
extern const char status_help[];

#endif /* __HEAPBPF_STATUS_H */
