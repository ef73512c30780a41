/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Snapshot mode (--output-dir): profiles written under names that sort by
 * time, and their retention (retain.h) that deletes the oldest first so that
 * a timer left on forever never fills a disk.
 *
 *   heap-20250102T030405Z-4242-redis-server.pb.gz
 *   heap-20250102T030405Z-4242-redis-server.folded[.zst]
 *   heap-20250102T030405Z-4242-redis-server.html
 *
 * The stamp is the start of the profiling window in UTC; the files of one
 * window (one per format and per process) share it and make one snapshot.
 * A profile whose name a file holds already (two triggers of one second)
 * takes the next number after the stamp, from 2 on, and is a snapshot of
 * its own, after the one before it:
 *
 *   heap-20250102T030405Z.2-4242-redis-server-demand.pb.gz
 */
#ifndef __HEAPBPF_SNAPSHOT_H
#define __HEAPBPF_SNAPSHOT_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <time.h>

#include "util/profile.h"
#include "util/retain.h"

#define SNAPSHOT_STAMP_LEN 16 /* "20250102T030405Z" */

/* "20250102T030405Z" for t (UTC) into buf (at least SNAPSHOT_STAMP_LEN + 1 bytes). */
void snapshot_stamp(time_t t, char *buf);

/* comm as it may appear in a file name: [A-Za-z0-9._-], others become '_'. */
void snapshot_safe_comm(const char *comm, char *out, size_t len);

/* The highest number a name takes after its stamp (1: none, the name as it is). */
#define SNAPSHOT_MAX_SEQ 1000

/* "heap-STAMP-PID-COMM.EXT"; returns 0 or -ENAMETOOLONG. */
int snapshot_name(char *buf, size_t len, const char *stamp, pid_t pid, const char *comm,
		  const char *ext);

/*
 * The same with seq after the stamp, "heap-STAMP.SEQ-PID-COMM.EXT", when it
 * is above 1; 0, or -ENAMETOOLONG (-ERANGE: seq 0 or above SNAPSHOT_MAX_SEQ).
 */
int snapshot_name_seq(char *buf, size_t len, const char *stamp, unsigned int seq, pid_t pid,
		      const char *comm, const char *ext);

/*
 * True when name is a complete snapshot file (not a temporary), numbered
 * or not; its stamp goes to stamp.
 */
bool snapshot_parse_name(const char *name, char stamp[SNAPSHOT_STAMP_LEN + 1]);

/* The time (UTC seconds) a stamp says, or -1 when it is not one. */
int64_t snapshot_stamp_time(const char *stamp);

/*
 * Retention of the snapshots in dir (retain_prune): a snapshot is the group
 * of files that share a stamp (and its number); at most keep of them (0: no
 * limit), and the oldest deleted while they hold more than max_bytes (0: no
 * limit). Snapshots stamped in the future are left alone and named in r.
 */
int snapshot_prune(const char *dir, size_t keep, uint64_t max_bytes, struct retain_result *r,
		   char *err, size_t errlen);

/*
 * The same with keep counted for each process (the pid in the names) apart:
 * at most keep snapshots of every pid, then max_bytes over the directory,
 * the oldest of any pid first (heapbpf agent: many processes, each with
 * windows of its own).
 */
int snapshot_prune_per_process(const char *dir, size_t keep, uint64_t max_bytes,
			       struct retain_result *r, char *err, size_t errlen);

/* A snapshot file to write (snapshot_write()), and the one written. */
struct snapshot_file {
	const char *dir, *stamp, *who, *ext; /* "heap-STAMP[.SEQ]-PID-WHO.EXT" in dir */
	pid_t pid;
	unsigned int seq;    /* the lowest number to try (1: none); then the one taken */
	char path[PATH_MAX]; /* the file written */
};

/*
 * A new file in f->dir (checked by output_open_dir()) written through
 * write_fn, named snapshot_name_seq() for the lowest number from f->seq on
 * that no file holds, by output_write_new_in(): a profile never replaces
 * another, whatever else writes there at the same time. 0 with the path
 * and number in f, or a negative errno with a message in err.
 */
int snapshot_write(struct snapshot_file *f, int (*write_fn)(FILE *out, void *arg), void *arg,
		   char *err, size_t errlen);

/* Creates dir (and missing parents) with mode 0750 if it does not exist. */
int snapshot_mkdir(const char *dir);

#endif /* __HEAPBPF_SNAPSHOT_H */
