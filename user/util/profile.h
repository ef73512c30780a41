/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The symbolized heap profile that every output format writes: pprof-shaped
 * (mappings, locations with inlined lines, samples with four values), built
 * by user/profile/report.c from the collector's aggregate, owned by its creator.
 */
#ifndef __HEAPBPF_PROFILE_H
#define __HEAPBPF_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The sample types, in the order pprof writes them (Go heap convention). */
enum hb_value {
	HB_ALLOC_OBJECTS,
	HB_ALLOC_SPACE,
	HB_INUSE_OBJECTS,
	HB_INUSE_SPACE,
	HB_NVALUES,
};

/* "alloc_objects", "alloc_space", "inuse_objects", "inuse_space" */
extern const char *const hb_value_names[HB_NVALUES];
/* "count", "bytes", "count", "bytes" */
extern const char *const hb_value_units[HB_NVALUES];

/* Parses a sample type name; returns 0 and sets *out, or -EINVAL. */
int hb_value_parse(const char *name, enum hb_value *out);

/* One source line of a location; a location has several when inlined. */
struct hb_line {
	char *function;	   /* display name (demangled), never NULL */
	char *system_name; /* raw symbol name; may equal function; may be NULL */
	char *file;	   /* source file or NULL */
	int64_t line;	   /* 0 when unknown */
};

struct hb_mapping {
	uint64_t start, limit, file_offset;
	char *path;	/* object path as seen in /proc/PID/maps, never NULL */
	char *build_id; /* lower-case hex, or NULL */
	bool has_functions, has_filenames, has_line_numbers, has_inline_frames;
};

struct hb_location {
	uint64_t address; /* absolute address in the target (a return address) */
	uint32_t mapping; /* 1-based index into hb_profile.mappings; 0 = none */
	uint32_t nlines;
	struct hb_line *lines; /* callee (innermost inlined) first */
};

/* A numeric label of a sample; key and unit are string literals, never freed. */
struct hb_label {
	const char *key;
	const char *unit; /* pprof's num_unit ("nanoseconds", "count"), or NULL */
	int64_t num;
};

struct hb_sample {
	uint32_t nlocs;
	uint32_t *locs; /* 0-based indices into hb_profile.locations, leaf first */
	/*
	 * The site: locs[site] is the first frame outside allocator wrappers
	 * (user/profile/wrappers.h), the one summaries, top and the flame graph
	 * name; 0 (the leaf) until wrappers_apply() set it. Every format still
	 * writes all nlocs frames.
	 */
	uint32_t site;
	int64_t v[HB_NVALUES];
	int64_t pid;	/* --follow-forks: the process (pprof label "pid"); 0 = no label */
	bool diff_base; /* heapbpf diff: a negated sample of the base (label pprof::base) */
	uint32_t nlabels;
	struct hb_label *labels; /* more numeric labels (lifetimes: user/collect/leaks.h), owned */
};

/* One point of a window's timeline, from the collector's checkpoints. */
struct hb_timeline_point {
	int64_t time_nanos; /* wall clock */
	double inuse_space; /* estimated bytes in use */
	double alloc_rate;  /* estimated bytes allocated per second since the previous point */
};

struct hb_profile {
	struct hb_mapping *mappings;
	size_t nmappings;
	struct hb_location *locations;
	size_t nlocations;
	struct hb_sample *samples;
	size_t nsamples;
	int64_t period;		/* jemalloc's mean sampling interval R, bytes */
	int64_t time_nanos;	/* start of the profile, wall clock */
	int64_t duration_nanos; /* length of the profiling window */
	/*
	 * Since when the in-use values count (wall clock): sampling's start,
	 * when it is earlier than the window's (a watch's or an --interval
	 * run's later profiles, whose allocations are the window's alone); 0:
	 * the window's start, as for one window.
	 */
	int64_t inuse_since_nanos;
	bool raw; /* values are raw sampled counts/bytes, not unbiased */
	char **comments;
	size_t ncomments;
	/* in use and allocation rate over time (for charts); owned, NULL when not known */
	struct hb_timeline_point *timeline;
	size_t ntimeline;
	int64_t peak_time_nanos; /* when the estimated in-use peaked (wall clock); 0: unknown */
	double peak_inuse_space; /* estimated bytes in use then */
	/*
	 * The allocator wrappers some sample's site was named past, most in-use
	 * bytes first (wrappers_apply()); owned, NULL when none.
	 */
	char **wrappers;
	size_t nwrappers;
	/*
	 * heapbpf diff: the files compared, BASE then NEW, as the command line
	 * named them (the flame graph page's header); owned, NULL otherwise.
	 */
	char *diff_files[2];
	/*
	 * heapbpf rss: one held_space value per sample (bytes; user/heap/held.h),
	 * written as a fifth sample type; owned, NULL otherwise.
	 */
	int64_t *held;
};

/* Appends a printf-formatted comment (pprof Profile.comment); -ENOMEM. */
int hb_profile_add_comment(struct hb_profile *p, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* 0 when every sample's location indices (and site) are inside p->locations, else -EINVAL. */
int hb_profile_check_samples(const struct hb_profile *p);

/* Frees everything a profile owns (all strings, arrays) and the struct itself; NULL is fine. */
void hb_profile__free(struct hb_profile *p);

#endif /* __HEAPBPF_PROFILE_H */
