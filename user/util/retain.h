/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Directory retention, oldest first, for any directory whose file names sort
 * by time (snapshots, the Pyroscope spool): a timer left on forever must
 * never fill a disk.
 */
#ifndef __HEAPBPF_RETAIN_H
#define __HEAPBPF_RETAIN_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * True when name is one of the files retention manages (a finished file,
 * never a temporary); its group goes to group (NAME_MAX + 1 bytes): the
 * files of one group go together, and groups sort oldest first by name.
 */
typedef bool retain_member_fn(const char *name, char *group);

/* The time (UTC seconds) a group's name says, or -1 when it says none. */
typedef int64_t retain_time_fn(const char *group);

/*
 * The series of a member (NAME_MAX + 1 bytes into series): keep counts the
 * groups of each series apart (the profiles of one process among many).
 */
typedef void retain_series_fn(const char *name, char *series);

/* How far ahead of the clock a group may be dated and still count (a clock step back). */
#define RETAIN_FUTURE_SLACK_S 60

struct retain_rules {
	retain_member_fn *member;
	size_t keep;	    /* at most this many groups (of each series); 0 = no limit */
	uint64_t max_bytes; /* at most this many bytes, but never the newest group; 0 = no limit */
	retain_time_fn *time; /* NULL: names carry no time */
	/*
	 * NULL: one series, keep counts the directory's groups. Else keep
	 * counts each series' groups, and max_bytes deletes the oldest group
	 * of any series first (a group of one series at a time).
	 */
	retain_series_fn *series;
};

struct retain_result {
	size_t deleted_files;
	uint64_t deleted_bytes;
	size_t groups; /* what remains (groups of every series) */
	uint64_t bytes;
	bool newest_over;    /* the newest group alone is larger than max_bytes */
	size_t future_files; /* members dated in the future: neither counted nor deleted */
	char future[256];    /* their names, ", "-separated, cut with "..." */
};

/*
 * Under an exclusive flock of the directory (concurrent heapbpf processes
 * share it): deletes the oldest groups while more than keep remain (of
 * each series, with rules->series), then while they hold more than
 * max_bytes, and removes the output_write_atomic()
 * temporaries of members ("NAME.tmp.XXXXXX") that a killed run left and
 * nobody touched for an hour. Files that are not members are never touched.
 * With rules->time, members dated more than RETAIN_FUTURE_SLACK_S ahead of
 * the clock (planted, or left by a clock that was wrong) are left alone and
 * named in r: counted, they would sort newest and have every new file deleted.
 * Returns 0 or a negative errno with a message in err.
 */
int retain_prune(const char *dir, const struct retain_rules *rules, struct retain_result *r,
		 char *err, size_t errlen);

#endif /* __HEAPBPF_RETAIN_H */
