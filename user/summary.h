/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* What heapbpf tells the operator on stderr: a live status line and the closing summary. */
#ifndef __HEAPBPF_SUMMARY_H
#define __HEAPBPF_SUMMARY_H

#include <linux/types.h>
#include <stdio.h>

#include "collector.h"
#include "heapbpf.h"
#include "profile.h"

struct hb_site {
	const char *function; /* leaf function (the caller of malloc) */
	int64_t v[HB_NVALUES];
};

/* The top n sites by inuse_space, then alloc_space; returns how many were filled. */
size_t summary_top_sites(const struct hb_profile *p, struct hb_site *out, size_t n);

/* One status line (no newline; starts with \r) for a terminal. */
void summary_status_line(FILE *f, double elapsed, const struct collector_stats *st,
			 const struct heapbpf_counters *bc);

/* The closing summary: counts, drops, top sites. */
void summary_print(FILE *f, const struct hb_profile *p, const struct collector_stats *st,
		   const struct heapbpf_counters *bc, const char *output);

/* "1.5 MiB" */
void summary_bytes(char *buf, size_t len, double bytes);

#endif /* __HEAPBPF_SUMMARY_H */
