// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libFuzzer harness for the recording reader (make fuzz). The first input
 * byte picks what the rest is:
 *   even: a whole recording file, as found on disk;
 *   odd:  the decompressed record stream, which the harness wraps in a valid
 *         header and zstd frame, so mutations reach the record parser instead
 *         of dying in the decompressor.
 * Either way replay__load must return cleanly: no crash, no leak, no UB, no
 * unbounded allocation.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zstd.h>

#include "collect/recording.h"
#include "collect/replay.h"

static char path[64];

/* The scratch file gone when the run ends (a crash leaves it, with the input). */
static void drop_scratch(void)
{
	unlink(path);
}

static void put(const void *data, size_t len, int fd)
{
	const uint8_t *p = data;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n <= 0)
			abort();
		p += n;
		len -= n;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct replay_opts o = { .from = 0, .to = -1, .no_symbols = true };
	struct replay *r;
	char err[512];
	int fd;

	if (!size)
		return 0;
	if (!path[0]) {
		snprintf(path, sizeof(path), "/dev/shm/heapbpf-fuzz-%d.hbr", getpid());
		atexit(drop_scratch);
	}
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		abort();
	if (data[0] & 1) {
		static const uint8_t hdr[16] = "HBPFREC\n\1\0\0\0\0\0\0\0";
		size_t cap = ZSTD_compressBound(size - 1);
		void *z = malloc(cap ? cap : 1);
		size_t n = ZSTD_compress(z, cap, data + 1, size - 1, 1);

		if (ZSTD_isError(n))
			abort();
		put(hdr, sizeof(hdr), fd);
		put(z, n, fd);
		free(z);
	} else {
		put(data + 1, size - 1, fd);
	}
	close(fd);
	if (replay__load(path, &o, &r, err, sizeof(err)) == 0)
		replay__free(r);
	return 0;
}
