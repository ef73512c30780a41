/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Files read from a path that a target, a recording or a core names (mapped
 * binaries, debug files, cores, executables): whoever planted them, a FIFO
 * cannot block heapbpf and a device or directory is not read.
 */
#ifndef __HEAPBPF_FILES_H
#define __HEAPBPF_FILES_H

#include <errno.h>

/* What open_regular_ro returns for a path that is not a regular file. */
#define HB_ENOTREG EINVAL

/*
 * Opens path read-only and close-on-exec without blocking (O_NONBLOCK, cleared
 * once open), regular files only: what stat says is not one is not even opened
 * (opening a device can act), and the descriptor is checked again with fstat.
 * Returns the descriptor, or -errno: -HB_ENOTREG when path is a FIFO, device,
 * socket or directory.
 */
int open_regular_ro(const char *path);

/* The reason open_regular_ro gave err (negative), as a message says it. */
const char *open_regular_strerror(int err);

#endif /* __HEAPBPF_FILES_H */
