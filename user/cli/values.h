/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The values options take, each read whole: 0, or -EINVAL when the text is
 * not one (the caller says which option, in one sentence).
 */
#ifndef __HEAPBPF_CLI_VALUES_H
#define __HEAPBPF_CLI_VALUES_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

int values_long(const char *s, long min, long max, long *out);

/* "512", "64K", "256M", "2G" (powers of 1024) */
int values_bytes(const char *s, uint64_t *out);

/* "16" (MiB), "512k", "64m": between 16 KiB and 1 GiB. */
int values_size(const char *s, size_t *out);

int values_seconds(const char *s, double *out);

/* "1ms", "250us", "2s", "0.5" (seconds): at most a day, in nanoseconds. */
int values_duration_ns(const char *s, uint64_t *out);

/*
 * --file-mode: "600", "0640", "0644": octal, read and write bits only (no
 * execute, setuid, setgid or sticky bit), the owner's read and write included.
 */
int values_file_mode(const char *s, mode_t *out);

#endif /* __HEAPBPF_CLI_VALUES_H */
