/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Atomic output files: a profile is either fully written or not there, so a
 * collector that scrapes the output directory never reads half a profile.
 */
#ifndef __HEAPBPF_OUTPUT_H
#define __HEAPBPF_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

/*
 * The mode of the files heapbpf writes (profiles, snapshots, recordings):
 * they hold the target's function names and addresses, so by default only
 * their owner reads them. Set exactly, whatever the umask.
 */
#define OUTPUT_DEFAULT_MODE 0600
/* --file-mode: the mode of every later output file (output_write_atomic, recordings). */
void output_set_file_mode(mode_t mode);
mode_t output_file_mode(void);

/*
 * Writes @path through @write_fn (which returns 0 or a negative errno):
 * the data goes to "<path>.tmp.XXXXXX" in the same directory, is flushed,
 * fsync'ed, made output_file_mode() (0600 unless --file-mode said otherwise)
 * and renamed over @path. On any failure the temp
 * file is removed, @path is left as it was and a negative errno is
 * returned. @path "-" writes to stdout directly (flushed, not synced); an
 * existing @path that is not a regular file (/dev/null, a pipe) is written
 * in place, its mode untouched; a directory is -EISDIR.
 */
int output_write_atomic(const char *path, int (*write_fn)(FILE *f, void *arg), void *arg);
/* The same with the file made exactly @mode (the Pyroscope spool: always 0600). */
int output_write_atomic_mode(const char *path, mode_t mode, int (*write_fn)(FILE *f, void *arg),
			     void *arg);

/* True when fd is a regular file (whose mode heapbpf sets), not a device or a pipe. */
bool output_is_regular_fd(int fd);

/* output_write_atomic() of @len bytes at @buf. */
int output_write_buffer(const char *path, const void *buf, size_t len);

#endif /* __HEAPBPF_OUTPUT_H */
