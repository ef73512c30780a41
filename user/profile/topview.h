/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What heapbpf top shows, from profiles alone: a profile reduced to its
 * allocation sites (the function that called the allocator, with the file
 * and line of the call), two successive snapshots to each site's in-use
 * growth and allocation rate over the interval, rows collapsed by site,
 * function or file and sorted, the keys, and the screen or the plain table
 * as text. No terminal and no session: run/top.c drives it live.
 */
#ifndef __HEAPBPF_TOPVIEW_H
#define __HEAPBPF_TOPVIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "util/profile.h"

enum top_sort {
	TOP_SORT_GROWTH, /* in-use bytes gained over the interval */
	TOP_SORT_ALLOC,	 /* bytes allocated over the interval */
	TOP_SORT_INUSE,	 /* bytes in use at its end */
	TOP_NSORTS,
};

enum top_by {
	TOP_BY_SITE, /* the allocator's caller and the line of the call */
	TOP_BY_FUNCTION,
	TOP_BY_FILE,
	TOP_NBYS,
};

/* "growth", "alloc", "inuse"; "site", "function", "file". 0, or -EINVAL. */
int topview_sort_parse(const char *s, enum top_sort *out);
int topview_by_parse(const char *s, enum top_by *out);

/* One site's values in a profile: alloc_* since attach, inuse_* now. */
struct top_site {
	char *function;
	char *file; /* "" when unknown */
	int64_t line;
	int64_t v[HB_NVALUES];
};

/* A profile reduced to its sites: each once, sorted by function, file, line. */
struct top_snap {
	struct top_site *sites;
	size_t nsites;
	int64_t mono_ns; /* when it was taken */
};

/*
 * The site of a sample is the outermost line of its leaf location: the
 * function that called the allocator (as the summary names it), and the line
 * of the call in it. Returns 0 or -ENOMEM.
 */
int topview_snap_build(const struct hb_profile *p, int64_t mono_ns, struct top_snap *out);
void topview_snap_free(struct top_snap *s);

/* What one site, function or file did over an interval. */
struct top_row {
	char *function; /* NULL in rows by file */
	char *file;	/* "" when unknown; NULL in rows by function */
	int64_t line;	/* 0 unless by site */
	double growth;	/* in-use bytes gained (negative: more freed than allocated) */
	double alloc;	/* bytes allocated */
	double allocs;	/* objects allocated */
	double inuse;	/* bytes in use at the end */
};

/* One interval, site by site (owns its strings): cur - prev. */
struct top_frame {
	struct top_row *rows;
	size_t nrows;
	double seconds; /* between the two snapshots */
};

/* Every site of prev or cur that allocated, freed or holds anything. 0 or -ENOMEM. */
int topview_frame_build(const struct top_snap *prev, const struct top_snap *cur,
			struct top_frame *out);
void topview_frame_free(struct top_frame *f);

/*
 * The frame's rows collapsed by `by` and sorted by `sort`, largest first
 * (ties by the other values, then by name). The strings are the frame's.
 * *out is NULL when there is no row. 0 or -ENOMEM.
 */
int topview_rows(const struct top_frame *f, enum top_by by, enum top_sort sort,
		 struct top_row **out, size_t *n);
/* The sum of every row. */
struct top_row topview_total(const struct top_frame *f);

/* What the keys choose. */
struct top_ui {
	enum top_sort sort;
	enum top_by by;
	bool paused;
};

enum top_action { TOP_NONE, TOP_REDRAW, TOP_QUIT };

/*
 * Applies the keys in buf: g, a, u sort by growth, allocation, in use (Tab
 * cycles); s, f, F show sites, functions, files (c cycles); p or space
 * pauses; q, Q, Ctrl-C, Ctrl-D quit. Escape sequences (arrows, function
 * keys) are skipped. Returns what the caller must do.
 */
enum top_action topview_keys(struct top_ui *ui, const char *buf, size_t n);

/* What the view shows besides the rows. */
struct top_view {
	pid_t pid;
	const char *comm;
	double elapsed; /* seconds since sampling started */
	uint64_t samples, interval_samples, sampled_bytes, drops;
	/* frees of the samples counted, and of objects sampled before attach (apart) */
	uint64_t frees, earlier_frees;
	bool raw; /* values are raw sampled bytes, not estimates */
	/* the whole live heap in jemalloc's own tables, where it can be read (--live-heap) */
	bool live_known;
	double live_bytes;
	struct top_ui ui;
	const struct top_frame *frame; /* NULL before the first interval */
};

/*
 * A number's column, and the room a name gets before a number is dropped: at
 * 80 columns three numbers and 42 of the name; the sorted number always shows.
 */
#define TOP_COL_WIDTH 12
#define TOP_NAME_ROOM 36

/*
 * One row in width columns: the numbers that fit (the sorted one always,
 * then growth, allocation, in use, objects), then the name, cut to fit.
 * Names are printed as hb_clean shows them: each byte outside printable ASCII as \xHH.
 */
void topview_format_row(char *buf, size_t len, const struct top_row *r, const struct top_view *v,
			int width);
/* The column titles the same way. */
void topview_format_titles(char *buf, size_t len, const struct top_view *v, int width);

/* The full-screen view: exactly height lines, each at most width columns, '\n' after each. */
int topview_render_screen(FILE *f, const struct top_view *v, int width, int height);
/* One plain table: the header lines, the titles, at most max_rows rows, a blank line. */
int topview_render_table(FILE *f, const struct top_view *v, size_t max_rows);

/* Rows of a plain table (stdout not a terminal). */
#define TOP_TABLE_ROWS 20

#endif /* __HEAPBPF_TOPVIEW_H */
