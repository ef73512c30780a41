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
 */
#ifndef __HEAPBPF_SNAPSHOT_H
#define __HEAPBPF_SNAPSHOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "profile.h"
#include "retain.h"

#define SNAPSHOT_STAMP_LEN 16 /* "20250102T030405Z" */

/* "20250102T030405Z" for t (UTC) into buf (at least SNAPSHOT_STAMP_LEN + 1 bytes). */
void snapshot_stamp(time_t t, char *buf);

/* comm as it may appear in a file name: [A-Za-z0-9._-], others become '_'. */
void snapshot_safe_comm(const char *comm, char *out, size_t len);

/* "heap-STAMP-PID-COMM.EXT"; returns 0 or -ENAMETOOLONG. */
int snapshot_name(char *buf, size_t len, const char *stamp, pid_t pid, const char *comm,
		  const char *ext);

/* True when name is a complete snapshot file (not a temporary); its stamp goes to stamp. */
bool snapshot_parse_name(const char *name, char stamp[SNAPSHOT_STAMP_LEN + 1]);

/* The time (UTC seconds) a stamp says, or -1 when it is not one. */
int64_t snapshot_stamp_time(const char *stamp);

/*
 * Retention of the snapshots in dir (retain_prune): a snapshot is the group
 * of files that share a stamp; at most keep of them (0: no limit), and the
 * oldest deleted while they hold more than max_bytes (0: no limit).
 * Snapshots stamped in the future are left alone and named in r.
 */
int snapshot_prune(const char *dir, size_t keep, uint64_t max_bytes, struct retain_result *r,
		   char *err, size_t errlen);

/* Creates dir (and missing parents) with mode 0750 if it does not exist. */
int snapshot_mkdir(const char *dir);

#endif /* __HEAPBPF_SNAPSHOT_H */
