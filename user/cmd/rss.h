/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* heapbpf rss --pid N: where the process's resident memory is (user/heap/rssmap.h). */
#ifndef __HEAPBPF_RSS_H
#define __HEAPBPF_RSS_H

#include <stddef.h>

struct run;
/* The breakdown of each target printed on stdout. 0, or negative errno with a sentence in err. */
int rss_command(struct run *r, char *err, size_t errlen);

/* heapbpf rss --help */
extern const char rss_help[];

#endif /* __HEAPBPF_RSS_H */
