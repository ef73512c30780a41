// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Recordings: round trip of every record type, truncation at many points
 * (the readable prefix comes back, then a clean "truncated"), bit flips
 * (detected, never a crash), and hostile headers.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <linux/types.h>

#include "heapbpf.h"
#include "collect/recording.h"

static char dir[64];

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/heapbpf-rec.XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
}

static void teardown(void)
{
	char cmd[PATH_MAX + 16];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
}

TestSuite(recording, .init = setup, .fini = teardown);

#define NEVENTS 3000

static void make_alloc(struct heapbpf_alloc_event *a, uint32_t i)
{
	memset(a, 0, sizeof(*a));
	a->type = HEAPBPF_EV_ALLOC;
	a->pid = 42;
	a->tid = 43 + i % 4;
	a->nframes = 1 + i % 20;
	a->ts = 1000000 + i;
	a->coarse = 996000 + i;
	a->usize = 16 << (i % 10);
	a->tctx = 0x7000 + (i % 50) * 64;
	for (uint32_t k = 0; k < a->nframes; k++)
		a->frames[k] = 0x400000 + (i % 50) * 0x100 + k;
}

/* Writes a recording of NEVENTS allocs and frees; returns its path in buf. */
static void write_sample(char *path, size_t len)
{
	struct recorder *r;
	struct rec_map m = { .start = 0x400000, .end = 0x500000, .offset = 0x1000 };
	struct rec_stop st = { .stop_mono_ns = 99, .alloc_hits = NEVENTS, .reason = 1 };

	snprintf(path, len, "%s/rec.hbr", dir);
	cr_assert_eq(recording__open(path, &r), 0);
	cr_assert_eq(recording__meta(r, "pid", "42"), 0);
	memcpy(m.perms, "r-xp", 4);
	snprintf(m.build_id, sizeof(m.build_id), "%s", "0123456789abcdef0123456789abcdef01234567");
	snprintf(m.path, sizeof(m.path), "%s", "/usr/bin/service with space");
	cr_assert_eq(recording__map(r, &m), 0);
	for (uint32_t i = 0; i < NEVENTS; i++) {
		struct heapbpf_alloc_event a;
		struct heapbpf_free_event f = { .type = HEAPBPF_EV_FREE,
						.tctx = 0x7000,
						.usize = i };

		make_alloc(&a, i);
		cr_assert_eq(recording__event(r, &a, sizeof(a)), 0);
		if (i % 3 == 0)
			cr_assert_eq(recording__event(r, &f, sizeof(f)), 0);
		/* periodic flushes, as a live run does */
		if (i % 500 == 499)
			cr_assert_eq(recording__flush(r), 0);
	}
	cr_assert_eq(recording__stop(r, &st), 0);
	cr_assert_eq(recording__close(r), 0);
}

/* Reads everything; returns the last status and counts records per type. */
static int read_all(const char *path, int counts[6], char *err, size_t errlen)
{
	struct rec_reader *rd;
	struct rec_record rec;
	int rc;

	memset(counts, 0, 6 * sizeof(int));
	rc = recording_reader__open(path, &rd, err, errlen);
	if (rc)
		return rc;
	while ((rc = recording_reader__next(rd, &rec, err, errlen)) == 1) {
		counts[rec.type]++;
		if (rec.type == REC_ALLOC || rec.type == REC_FREE) {
			struct heapbpf_alloc_event ev;

			cr_assert_eq(recording_decode_event(&rec, &ev, sizeof(ev)), 0);
		}
	}
	recording_reader__free(rd);
	return rc;
}

Test(recording, round_trip)
{
	char path[PATH_MAX], err[256];
	struct rec_reader *rd;
	struct rec_record rec;
	uint32_t nalloc = 0;
	int rc, counts[6];

	write_sample(path, sizeof(path));
	cr_assert_eq(read_all(path, counts, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(counts[REC_META], 1);
	cr_assert_eq(counts[REC_MAP], 1);
	cr_assert_eq(counts[REC_ALLOC], NEVENTS);
	cr_assert_eq(counts[REC_FREE], NEVENTS / 3);
	cr_assert_eq(counts[REC_STOP], 1);

	cr_assert_eq(recording_reader__open(path, &rd, err, sizeof(err)), 0);
	while ((rc = recording_reader__next(rd, &rec, err, sizeof(err))) == 1) {
		if (rec.type == REC_META) {
			const char *k, *v;
			size_t kl, vl;

			cr_assert_eq(recording_decode_meta(&rec, &k, &kl, &v, &vl), 0);
			cr_assert(kl == 3 && !memcmp(k, "pid", 3) && vl == 2 &&
				  !memcmp(v, "42", 2));
		} else if (rec.type == REC_MAP) {
			struct rec_map m;

			cr_assert_eq(recording_decode_map(&rec, &m), 0);
			cr_assert_eq(m.start, 0x400000);
			cr_assert_eq(m.end, 0x500000);
			cr_assert_eq(m.offset, 0x1000);
			cr_assert_str_eq(m.perms, "r-xp");
			cr_assert_str_eq(m.path, "/usr/bin/service with space");
			cr_assert_str_eq(m.build_id, "0123456789abcdef0123456789abcdef01234567");
		} else if (rec.type == REC_ALLOC) {
			struct heapbpf_alloc_event got, want;

			cr_assert_eq(recording_decode_event(&rec, &got, sizeof(got)), 0);
			make_alloc(&want, nalloc++);
			cr_assert_eq(got.nframes, want.nframes);
			cr_assert_eq(got.usize, want.usize);
			cr_assert_eq(got.tctx, want.tctx);
			cr_assert_eq(got.ts, want.ts);
			cr_assert_eq(got.coarse, want.coarse);
			cr_assert_eq(memcmp(got.frames, want.frames, want.nframes * 8), 0);
			/* frames are cut to nframes on disk: 72 header bytes + 8 a frame */
			cr_assert_eq(rec.len, HEAPBPF_ALLOC_EVENT_SIZE(want.nframes));
		} else if (rec.type == REC_STOP) {
			struct rec_stop s;

			cr_assert_eq(recording_decode_stop(&rec, &s), 0);
			cr_assert_eq(s.stop_mono_ns, 99);
			cr_assert_eq(s.alloc_hits, NEVENTS);
			cr_assert_eq(s.reason, 1);
		}
	}
	cr_assert_eq(rc, 0, "%s", err);
	recording_reader__free(rd);
}

static long file_size(const char *path)
{
	FILE *f = fopen(path, "rb");
	long n;

	cr_assert_not_null(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fclose(f);
	return n;
}

Test(recording, truncated_keeps_its_prefix)
{
	char path[PATH_MAX], cut[PATH_MAX + 8], cmd[3 * PATH_MAX], err[256];
	long size;
	int counts[6], prev = -1;

	write_sample(path, sizeof(path));
	size = file_size(path);
	snprintf(cut, sizeof(cut), "%s.cut", path);
	/* cut at 60 points from the header to one byte short of the end */
	for (int k = 0; k <= 60; k++) {
		long at = 16 + (size - 17) * k / 60;
		int rc, total;

		snprintf(cmd, sizeof(cmd), "head -c %ld %s > %s", at, path, cut);
		cr_assert_eq(system(cmd), 0);
		rc = read_all(cut, counts, err, sizeof(err));
		cr_assert(rc == -ENODATA, "cut at %ld: %d (%s)", at, rc, err);
		cr_assert(strstr(err, "truncated"), "%s", err);
		total = counts[REC_META] + counts[REC_MAP] + counts[REC_ALLOC] + counts[REC_FREE];
		/* a longer prefix never yields fewer records */
		cr_assert_geq(total, prev, "cut at %ld", at);
		/* cut into the zstd frame's closing checksum, every record may still be there */
		cr_assert(counts[REC_STOP] == 0 || at > size - 16, "cut at %ld", at);
		prev = total;
	}
	/* the flushed blocks before the last cut are readable */
	cr_assert_gt(prev, NEVENTS);
}

Test(recording, bit_flips_are_detected)
{
	char path[PATH_MAX], err[256];
	uint8_t *data;
	long size;
	FILE *f;
	int detected = 0, tried = 0, counts[6];

	write_sample(path, sizeof(path));
	size = file_size(path);
	data = malloc(size);
	f = fopen(path, "rb");
	cr_assert_eq(fread(data, 1, size, f), (size_t)size);
	fclose(f);
	srand(12345);
	for (int k = 0; k < 200; k++) {
		long at = 16 + rand() % (size - 16);
		int bit = rand() % 8, rc;

		data[at] ^= 1 << bit;
		f = fopen(path, "wb");
		cr_assert_eq(fwrite(data, 1, size, f), (size_t)size);
		fclose(f);
		rc = read_all(path, counts, err, sizeof(err));
		data[at] ^= 1 << bit;
		tried++;
		/* every flip is reported: corrupt data, checksum, or the frame's own checksum */
		cr_assert_neq(rc, 0, "flip of bit %d at byte %ld went unnoticed", bit, at);
		cr_assert(rc == -EBADMSG || rc == -ENODATA, "%d: %s", rc, err);
		detected++;
	}
	cr_assert_eq(detected, tried);
	free(data);
}

static void write_raw(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "wb");

	cr_assert_not_null(f);
	cr_assert_eq(fwrite(data, 1, len, f), len);
	fclose(f);
}

Test(recording, hostile_headers)
{
	char path[PATH_MAX], err[256];
	struct rec_reader *rd;
	uint8_t h[16] = "HBPFREC\n";

	snprintf(path, sizeof(path), "%s/bad", dir);
	write_raw(path, "not a recording at all", 22);
	cr_assert_eq(recording_reader__open(path, &rd, err, sizeof(err)), -EBADMSG);
	cr_assert(strstr(err, "not a heapbpf recording"), "%s", err);
	h[8] = 7; /* version 7 */
	write_raw(path, h, sizeof(h));
	cr_assert_eq(recording_reader__open(path, &rd, err, sizeof(err)), -EPROTONOSUPPORT);
	cr_assert(strstr(err, "version 7"), "%s", err);
	write_raw(path, h, 5);
	cr_assert_eq(recording_reader__open(path, &rd, err, sizeof(err)), -EBADMSG);
	cr_assert_eq(recording_reader__open("/nonexistent/x", &rd, err, sizeof(err)), -ENOENT);
}

/* A valid zstd stream of a record that claims 1 GiB: refused without allocating it. */
Test(recording, huge_record_length_refused)
{
	char path[PATH_MAX], err[256];
	struct recorder *r;
	struct rec_reader *rd;
	struct rec_record rec;
	uint8_t payload[8] = { 0 };

	snprintf(path, sizeof(path), "%s/huge", dir);
	cr_assert_eq(recording__open(path, &r), 0);
	cr_assert_eq(recording__write(r, REC_META, "a=b", 3), 0);
	cr_assert_eq(recording__write(r, REC_MAP, payload, RECORDING_MAX_RECORD + 1), -E2BIG);
	cr_assert_eq(recording__close(r), 0);
	cr_assert_eq(recording_reader__open(path, &rd, err, sizeof(err)), 0);
	cr_assert_eq(recording_reader__next(rd, &rec, err, sizeof(err)), 1);
	cr_assert_eq(recording_reader__next(rd, &rec, err, sizeof(err)), 0);
	recording_reader__free(rd);
}

/*
 * A version 1 recording (heapbpf's own, from a run before the coarse field,
 * kept as the fuzzer's seed with its one mode byte in front): every record
 * read, each allocation's fields where they were, its coarse time unknown.
 */
Test(recording, version_1_is_read_without_coarse_times)
{
	char path[PATH_MAX], cmd[2 * PATH_MAX], err[256];
	struct rec_reader *rd;
	struct rec_record rec;
	int rc, counts[6], nallocs = 0;

	snprintf(path, sizeof(path), "%s/v1.hbr", dir);
	/* the unit tests run in the repository (make test, make unit) */
	snprintf(cmd, sizeof(cmd), "tail -c +2 tests/fuzz/corpus/real-recording > %s", path);
	cr_assert_eq(system(cmd), 0);
	cr_assert_eq(read_all(path, counts, err, sizeof(err)), 0, "%s", err);
	cr_assert_gt(counts[REC_ALLOC], 50);
	cr_assert_eq(recording_reader__open(path, &rd, err, sizeof(err)), 0, "%s", err);
	while ((rc = recording_reader__next(rd, &rec, err, sizeof(err))) == 1) {
		struct heapbpf_alloc_event a;

		cr_assert_eq(rec.version, 1);
		if (rec.type != REC_ALLOC)
			continue;
		cr_assert_eq(recording_decode_event(&rec, &a, sizeof(a)), 0);
		cr_assert_eq(a.coarse, 0);
		/* a real sample: a time, a size jemalloc counts, a tctx and code addresses */
		cr_assert_gt(a.ts, 0);
		cr_assert_gt(a.usize, 0);
		cr_assert_geq(a.tctx, 0x1000);
		cr_assert_gt(a.nframes, 0);
		cr_assert_geq(a.frames[0], 0x1000);
		nallocs++;
	}
	cr_assert_eq(rc, 0, "%s", err);
	cr_assert_eq(nallocs, counts[REC_ALLOC]);
	recording_reader__free(rd);
}

Test(recording, malformed_payloads)
{
	struct rec_record rec = { .type = REC_MAP,
				  .len = 10,
				  .payload = (const uint8_t *)"0123456789" };
	struct rec_map m;
	struct rec_stop s;
	struct heapbpf_alloc_event a;
	const char *k, *v;
	size_t kl, vl;
	uint8_t ev[HEAPBPF_ALLOC_EVENT_SIZE(1)] = { 0 };

	cr_assert_eq(recording_decode_map(&rec, &m), -EBADMSG);
	rec.type = REC_STOP;
	cr_assert_eq(recording_decode_stop(&rec, &s), -EBADMSG);
	rec.type = REC_META;
	rec.payload = (const uint8_t *)"=novalue";
	rec.len = 8;
	cr_assert_eq(recording_decode_meta(&rec, &k, &kl, &v, &vl), -EBADMSG);
	/* an alloc claiming 5 frames in a record with room for 1 */
	ev[0] = HEAPBPF_EV_ALLOC;
	ev[12] = 5;
	rec.type = REC_ALLOC;
	rec.payload = ev;
	rec.len = sizeof(ev);
	cr_assert_eq(recording_decode_event(&rec, &a, sizeof(a)), -EBADMSG);
	ev[12] = 200;
	cr_assert_eq(recording_decode_event(&rec, &a, sizeof(a)), -EBADMSG);
	ev[12] = 1;
	cr_assert_eq(recording_decode_event(&rec, &a, sizeof(a)), 0);
}
