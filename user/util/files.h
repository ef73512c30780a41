/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Files read from a path that a target, a recording or a core names (mapped
 * binaries, debug files, cores, executables): whoever planted them, a FIFO
 * cannot block heapbpf and a device or directory is not read.
 *
 * A path through a process's root, /proc/PID/root/REST, is resolved inside
 * that root (openat2's RESOLVE_IN_ROOT): an absolute link the process
 * planted there leads to its own tree, never to heapbpf's (docs/security.md).
 */
#ifndef __HEAPBPF_FILES_H
#define __HEAPBPF_FILES_H

#include <errno.h>
#include <sys/types.h>

/* What files_open_regular_ro returns for a path that is not a regular file. */
#define HB_ENOTREG EINVAL

/*
 * Opens path read-only and close-on-exec without blocking (O_NONBLOCK, cleared
 * once open), regular files only: what stat says is not one is not even opened
 * (opening a device can act), and the descriptor is checked again with fstat.
 * Returns the descriptor, or -errno: -HB_ENOTREG when path is a FIFO, device,
 * socket or directory.
 */
int files_open_regular_ro(const char *path);

/* open(2) of path with flags (O_CLOEXEC added), a process's root kept to; -errno. */
int hb_open_path(const char *path, int flags);

/* readlink(2) of path into buf, NUL-terminated; the length, or -errno. */
ssize_t hb_readlink(const char *path, char *buf, size_t len);

/*
 * realpath(3) of path; under a process's root, the file it leads to inside
 * that root, named again through /proc/PID/root (NULL when that cannot be
 * said). Allocated; NULL with errno on failure.
 */
char *hb_realpath(const char *path);

/* The reason files_open_regular_ro gave err (negative), as a message says it. */
const char *files_open_regular_strerror(int err);

#endif /* __HEAPBPF_FILES_H */
