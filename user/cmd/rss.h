/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* heapbpf rss --pid N: where the process's resident memory is (user/heap/rssmap.h). */
#ifndef __HEAPBPF_RSS_H
#define __HEAPBPF_RSS_H

#include <stddef.h>

#include "cli/cli.h"

struct run;
/* The breakdown of each target printed on stdout. 0, or negative errno with a sentence in err. */
int rss_command(const struct cli *c, struct run *r, char *err, size_t errlen);
/* What applies to it on the command line: its row of main's table (cli/cli.h) */
int rss_parse(struct cli *c, const struct cli_given *g, int n, char **operands);

/* heapbpf rss --help */
extern const char rss_help[];

#endif /* __HEAPBPF_RSS_H */
