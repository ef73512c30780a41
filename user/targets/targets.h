/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Which processes to profile, by name: a systemd unit (every process in its
 * cgroup, found through the cgroup file system, so that it works without
 * asking systemd) or a pid file; and a process's descendants (--children).
 */
#ifndef __HEAPBPF_TARGETS_H
#define __HEAPBPF_TARGETS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* processes of one unit heapbpf profiles at once (one session: a pre-fork server's workers) */
#define TARGETS_MAX 1024

/*
 * "redis-server" -> "redis-server.service"; a name that already ends in
 * ".service" or ".scope" is kept. Returns 0, or -EINVAL for a name that is
 * not a valid unit name (empty, '/', control characters, too long).
 */
int targets_unit_name(const char *name, char *out, size_t len);

/*
 * Finds the unit's cgroup in every mounted cgroup hierarchy that systemd
 * keeps (cgroup2, or v1 "name=systemd") - under system.slice first, then
 * anywhere a few levels deep - and collects the pids in it and its
 * children, sorted, without duplicates, at most TARGETS_MAX. @root, if not
 * NULL, is the only hierarchy searched (tests). Returns the number of pids
 * (> 0), or a negative errno with a one-sentence message in err: -ENOENT
 * when no such cgroup exists, -ESRCH when it holds no process.
 */
int targets_from_unit(const char *unit, const char *root, pid_t *pids, size_t max, char *err,
		      size_t errlen);

/*
 * Reads a pid file (one decimal pid, optionally followed by a newline).
 * Refuses files others than the owner may write (a pid file anyone can
 * write would let anyone choose what root profiles) and pids that do not
 * exist. Returns 0 or a negative errno with a message in err.
 */
int targets_from_pidfile(const char *path, pid_t *pid, char *err, size_t errlen);

/*
 * --children: the processes descended from root now (children,
 * grandchildren, ...), breadth first, from one scan of /proc in which each
 * process's parent and start time come from one read; a process that
 * started before the one its parent pid names had another parent by that
 * pid, and is none of root's. Each one not in pids[0..*n) is appended, with
 * its start time in starts (unless NULL), while *n < max. Returns how many
 * were appended, or a negative errno.
 */
int targets_descendants(pid_t root, pid_t *pids, uint64_t *starts, size_t max, size_t *n);

#endif /* __HEAPBPF_TARGETS_H */
