// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libFuzzer harness for the pprof reader and heapbpf diff (make fuzz). The
 * first input byte picks what the rest is:
 *   even: a whole file, as diff_load finds it on disk (gzip-compressed);
 *   odd:  the serialized Profile, which the harness gzips, so mutations
 *         reach protobuf-c and the conversion instead of dying in zlib.
 * The profile is loaded and diffed against itself: no crash, no leak, no UB,
 * no allocation past the readers' budgets.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zlib.h>

#include "profile/diff.h"

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

static void put_gzip(const uint8_t *data, size_t len, int fd)
{
	z_stream zs = { 0 };
	uint8_t out[16384];
	int rc;

	if (deflateInit2(&zs, 1, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		abort();
	zs.next_in = (uint8_t *)data;
	zs.avail_in = len;
	do {
		zs.next_out = out;
		zs.avail_out = sizeof(out);
		rc = deflate(&zs, Z_FINISH);
		if (rc == Z_STREAM_ERROR)
			abort();
		put(out, sizeof(out) - zs.avail_out, fd);
	} while (rc != Z_STREAM_END);
	deflateEnd(&zs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct hb_profile *p = NULL;
	struct diff *d = NULL;
	char err[512];
	int fd;

	if (!size)
		return 0;
	if (!path[0]) {
		snprintf(path, sizeof(path), "/dev/shm/heapbpf-fuzz-%d.pb.gz", getpid());
		atexit(drop_scratch);
	}
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		abort();
	if (data[0] & 1)
		put_gzip(data + 1, size - 1, fd);
	else
		put(data + 1, size - 1, fd);
	close(fd);
	if (diff_load(path, NULL, &p, err, sizeof(err)) == 0) {
		size_t idx[10];

		if (diff__new(p, p, &d) == 0) {
			for (int k = 0; k < HB_NVALUES; k++)
				diff_top(d, k, idx, 10);
			diff__free(d);
		}
		hb_profile__free(p);
	}
	return 0;
}
