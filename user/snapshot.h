/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Snapshot mode (--output-dir): profiles written under names that sort by
 * time, and retention that deletes the oldest first so that a timer left on
 * forever never fills a disk.
 *
 *   heap-20250102T030405Z-4242-redis-server.pb.gz
 *   heap-20250102T030405Z-4242-redis-server.folded[.zst]
 *
 * The stamp is the start of the profiling window in UTC; the files of one
 * window (one per format and per process) share it and make one snapshot.
 */
#ifndef __HEAPBPF_SNAPSHOT_H
#define __HEAPBPF_SNAPSHOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "profile.h"

#define SNAPSHOT_STAMP_LEN 16 /* "20250102T030405Z" */

enum snapshot_format {
	SNAP_PPROF = 1 << 0,
	SNAP_FOLDED = 1 << 1,
};

/* "20250102T030405Z" for t (UTC) into buf (at least SNAPSHOT_STAMP_LEN + 1 bytes). */
void snapshot_stamp(time_t t, char *buf);

/* comm as it may appear in a file name: [A-Za-z0-9._-], others become '_'. */
void snapshot_safe_comm(const char *comm, char *out, size_t len);

/* "heap-STAMP-PID-COMM.EXT"; returns 0 or -ENAMETOOLONG. */
int snapshot_name(char *buf, size_t len, const char *stamp, pid_t pid, const char *comm,
		  const char *ext);

/* True when name is a complete snapshot file (not a temporary); its stamp goes to stamp. */
bool snapshot_parse_name(const char *name, char stamp[SNAPSHOT_STAMP_LEN + 1]);

struct snapshot_opts {
	const char *dir;
	unsigned int formats; /* SNAP_* */
	enum hb_value folded; /* the sample type folded files carry */
	bool zstd;	      /* folded as .folded.zst */
	const char *stamp;    /* window start, snapshot_stamp() */
	pid_t pid;
	const char *comm;
};

/*
 * Writes one file per format, each atomically. Returns 0 or a negative
 * errno with the failing path in err; files written before a failure stay.
 */
int snapshot_write(const struct snapshot_opts *o, const struct hb_profile *p, char *err,
		   size_t errlen);

/* zstd-compresses a folded profile into path, atomically. */
int snapshot_write_folded_zst(const char *path, const struct hb_profile *p, enum hb_value which);

/*
 * Retention of a directory's files, oldest first, under an exclusive flock
 * of the directory (concurrent heapbpf processes share it):
 *   - files are grouped (snapshot files by stamp; SPOOL: every file alone),
 *   - while more than keep groups remain, the oldest group is deleted,
 *   - while the remaining groups hold more than max_bytes, the oldest is
 *     deleted, but never the newest group.
 * keep 0 and max_bytes 0 mean no limit. Files that do not match the naming
 * pattern are never touched.
 */
enum retain_kind {
	RETAIN_SNAPSHOTS,
	RETAIN_SPOOL, /* names ending in ".spool" that do not start with '.' */
};

struct retain_result {
	size_t deleted_files;
	uint64_t deleted_bytes;
	size_t groups; /* what remains */
	uint64_t bytes;
	bool newest_over; /* the newest group alone is larger than max_bytes */
};

int snapshot_retain(const char *dir, enum retain_kind kind, size_t keep, uint64_t max_bytes,
		    struct retain_result *r, char *err, size_t errlen);

/* Creates dir (and missing parents) with mode 0750 if it does not exist. */
int snapshot_mkdir(const char *dir);

#endif /* __HEAPBPF_SNAPSHOT_H */
