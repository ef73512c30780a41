/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The one way a built profile leaves heapbpf: encoded in a format (pprof;
 * folded, optionally zstd-compressed, or an HTML flame graph, both of one
 * sample type) and written to a destination (a file, atomically; stdout;
 * or Pyroscope's spool). Live runs, reports, snapshot windows and Pyroscope
 * all write through sink_write().
 */
#ifndef __HEAPBPF_SINK_H
#define __HEAPBPF_SINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/profile.h"

enum out_format {
	FMT_PPROF,  /* gzip-compressed perftools.profiles.Profile, all four values */
	FMT_FOLDED, /* "root;...;leaf value" lines of one sample type */
	FMT_HTML,   /* an interactive flame graph of one sample type, one self-contained page */
	FMT_COUNT,
};

enum sink_kind {
	SINK_FILE,  /* path, atomically; "-" is stdout */
	SINK_SPOOL, /* Pyroscope's spool: pprof only, delivered later */
};

struct pyro;

struct sink {
	enum sink_kind kind;
	enum out_format format;
	enum hb_value sample_type; /* the value single-value formats carry */
	bool zstd;		   /* compress folded text with zstd */
	const char *path;	   /* SINK_FILE */
	/* SINK_SPOOL: the spool, the profile's Pyroscope name, its window in whole seconds */
	struct pyro *pyro;
	const char *name;
	int64_t from_s, until_s;
};

/* "pb.gz", "folded", "folded.zst" or "html" (never compressed): a format's file name extension. */
const char *sink_extension(enum out_format format, bool zstd);

/*
 * The format a file name's suffix names, case aside: .pb.gz, .pb, .pprof
 * (pprof); .folded, .collapsed (folded); .html, .htm (html). -1 for any
 * other name, "-" (stdout) included.
 */
int sink_format_of_name(const char *path);

/* "pprof", "folded" or "html": a format's name as -f takes it. */
const char *sink_format_name(enum out_format format);

/*
 * "heap-YYYYmmddTHHMMSSZ-WHAT.EXT" (UTC, now): the file a run writes when -o
 * is not given, named as --output-dir's snapshots are (snapshot.h): WHAT is
 * "PID-COMM" for a process, "report", "core" or "diff" otherwise.
 */
void sink_default_name(char *buf, size_t len, const char *what, enum out_format format);

/* Encodes p as the sink's format into a malloc'ed buffer; 0 or negative errno. */
int sink_encode(const struct hb_profile *p, const struct sink *s, uint8_t **buf, size_t *len);

/*
 * Writes p to the sink. Returns 0, or a negative errno with a one-sentence
 * message naming the destination in err; a file is either complete or not
 * there.
 */
int sink_write(const struct hb_profile *p, const struct sink *s, char *err, size_t errlen);

#endif /* __HEAPBPF_SINK_H */
