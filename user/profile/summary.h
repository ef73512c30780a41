/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* What heapbpf tells the operator on stderr: a live status line and the closing summary. */
#ifndef __HEAPBPF_SUMMARY_H
#define __HEAPBPF_SUMMARY_H

#include <linux/types.h>
#include <stdio.h>

#include "collect/collector.h"
#include "heapbpf.h"
#include "collect/leaks.h"
#include "util/profile.h"

struct hb_site {
	const char *function; /* the site: the caller of malloc, or of its wrappers */
	int64_t v[HB_NVALUES];
};

/* The top n sites by inuse_space, then alloc_space; returns how many were filled. */
size_t summary_top_sites(const struct hb_profile *p, struct hb_site *out, size_t n);

/* One status line (no newline; starts with \r) for a terminal. */
void summary_status_line(FILE *f, double elapsed, const struct collector_stats *st,
			 const struct heapbpf_counters *bc);

/*
 * The closing summary: counts, drops, top sites. who starts each line
 * after "heapbpf: ": "pid 4242 (name): " when the run has several
 * processes, else ""; so in the timeline and the --leaks tables.
 */
void summary_print(FILE *f, const struct hb_profile *p, const struct collector_stats *st,
		   const struct heapbpf_counters *bc, const char *output, const char *who);

/*
 * The rows of the top sites (in use, allocated, name) as notes, and the
 * wrappers' line when p names sites past wrappers: what a summary lists.
 */
void summary_sites(const struct hb_profile *p, const struct hb_site *top, size_t n);
/* "512 B", "1.5 MiB", up to EiB: the one byte formatter (summaries, top, pages) */
void summary_bytes(char *buf, size_t len, double bytes);

/* "2025-01-02T03:04:05.123Z": a wall-clock time in ns, UTC. */
void summary_utc(char *buf, size_t len, int64_t wall_ns);
/* "850 ns", "12.5 us", "3.2 ms", "4.0 s" */
void summary_duration(char *buf, size_t len, double ns);

/*
 * n values as a sparkline of UTF-8 block characters, at most width columns
 * (each the highest of its values), scaled to the highest value.
 */
void summary_sparkline(char *buf, size_t len, const double *v, size_t n, size_t width);

/* The most points a timeline has: the checkpoints, the peak and the end. */
#define HB_TIMELINE_MAX (COLLECTOR_MAX_CHECKPOINTS + 2)

/* "peak in use 70.3 MiB (estimated) at <UTC>, 3.1 s after the first sample"; -ENOENT: none. */
int summary_peak_text(char *buf, size_t len, const struct hb_profile *p);

/* In use and allocation rate over the window as sparklines, and the peak (at_peak: its file). */
void summary_timeline(FILE *f, const struct hb_profile *p, const char *at_peak, const char *who);

/*
 * --leaks: the leak suspects, fastest growth first, the held suspects, most
 * in use first, and the lifetimes of the busiest sites.
 */
void summary_leaks(FILE *f, const struct hb_profile *p, const struct hb_analysis *a,
		   const char *who);

#endif /* __HEAPBPF_SUMMARY_H */
