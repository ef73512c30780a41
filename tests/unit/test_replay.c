// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Replay of a recording's events into the collector: what was sampled
 * between the flag going on and the recorded start instant belongs to the
 * window (a live run counts it), and --from/--to still cut by time.
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
#include "collect/replay.h"

static char dir[64];

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/heapbpf-replay.XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
}

static void teardown(void)
{
	char cmd[PATH_MAX + 16];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
}

TestSuite(replay, .init = setup, .fini = teardown);

#define START_NS 5000000000ULL

/* One allocation of 64 bytes at ts on a stack of its own (i). */
static void put_alloc(struct recorder *r, uint32_t i, uint64_t ts)
{
	struct heapbpf_alloc_event a;

	memset(&a, 0, sizeof(a));
	a.type = HEAPBPF_EV_ALLOC;
	a.pid = 42;
	a.tid = 42;
	a.nframes = 1;
	a.frames[0] = 0x400000 + 0x100 * i;
	a.usize = 64;
	a.tctx = 0x7000 + 64 * i;
	a.ts = ts;
	cr_assert_eq(recording__event(r, &a, sizeof(a)), 0);
}

/* Allocations at start - 1 ms, start + 0.5 s and start + 2.5 s, on stacks of their own. */
static void write_recording(char *path, size_t len)
{
	static const int64_t at_ms[] = { -1, 500, 2500 };
	struct rec_stop st = { .stop_mono_ns = START_NS + 3000000000ULL, .alloc_hits = 3 };
	struct recorder *r;
	char v[32];

	snprintf(path, len, "%s/run.hbr", dir);
	cr_assert_eq(recording__open(path, &r), 0);
	cr_assert_eq(recording__meta(r, "lg_prof_sample", "19"), 0);
	cr_assert_eq(recording__meta(r, "jemalloc_path", "/usr/bin/service"), 0);
	snprintf(v, sizeof(v), "%llu", START_NS);
	cr_assert_eq(recording__meta(r, "start_mono_ns", v), 0);
	for (size_t i = 0; i < sizeof(at_ms) / sizeof(at_ms[0]); i++)
		put_alloc(r, (uint32_t)i, (uint64_t)((int64_t)START_NS + at_ms[i] * 1000000));
	cr_assert_eq(recording__stop(r, &st), 0);
	cr_assert_eq(recording__close(r), 0);
}

static uint64_t allocs_between(const char *path, double from, double to)
{
	struct replay_opts o = { .from = from, .to = to, .no_symbols = true };
	struct replay *r = NULL;
	char err[256] = "";
	uint64_t n;

	cr_assert_eq(replay__load(path, &o, &r, err, sizeof(err)), 0, "%s", err);
	n = collector__stats(r->collector)->allocs;
	replay__free(r);
	return n;
}

Test(replay, sampled_just_before_the_start_instant_counts)
{
	char path[PATH_MAX];

	write_recording(path, sizeof(path));
	/* the whole run: all three, the one 1 ms before the start instant included */
	cr_assert_eq(allocs_between(path, 0, -1), 3);
}

Test(replay, from_and_to_cut_by_time)
{
	char path[PATH_MAX];

	write_recording(path, sizeof(path));
	cr_assert_eq(allocs_between(path, 0, 1), 2);
	cr_assert_eq(allocs_between(path, 1, -1), 1);
	cr_assert_eq(allocs_between(path, 2, 3), 1);
	cr_assert_eq(allocs_between(path, 0.6, 2), 0);
}

/*
 * A recording of one allocation at event_ts, with one header value
 * overridden (key=value, or NULL) and a STOP record of duration_ns; what
 * replay__load returns for it, its message in err.
 */
static int load_crafted(const char *meta, uint64_t event_ts, uint64_t duration_ns, char *err,
			size_t errlen)
{
	struct rec_stop st = { .stop_mono_ns = START_NS + 1000, .duration_ns = duration_ns };
	struct replay_opts o = { .to = -1, .no_symbols = true };
	struct heapbpf_alloc_event a;
	struct replay *r = NULL;
	char path[PATH_MAX], key[32];
	struct recorder *rec;
	const char *eq = meta ? strchr(meta, '=') : NULL;
	int rc;

	snprintf(path, sizeof(path), "%s/crafted.hbr", dir);
	cr_assert_eq(recording__open(path, &rec), 0);
	cr_assert_eq(recording__meta(rec, "lg_prof_sample", "19"), 0);
	cr_assert_eq(recording__meta(rec, "jemalloc_path", "/usr/bin/service"), 0);
	cr_assert_eq(recording__meta(rec, "start_mono_ns", "5000000000"), 0);
	cr_assert_eq(recording__meta(rec, "start_wall_ns", "1700000000000000000"), 0);
	if (eq) {
		snprintf(key, sizeof(key), "%.*s", (int)(eq - meta), meta);
		cr_assert_eq(recording__meta(rec, key, eq + 1), 0);
	}
	memset(&a, 0, sizeof(a));
	a.type = HEAPBPF_EV_ALLOC;
	a.pid = a.tid = 42;
	a.nframes = 1;
	a.frames[0] = 0x400000;
	a.usize = 64;
	a.tctx = 0x7000;
	a.ts = event_ts;
	cr_assert_eq(recording__event(rec, &a, sizeof(a)), 0);
	cr_assert_eq(recording__stop(rec, &st), 0);
	cr_assert_eq(recording__close(rec), 0);
	rc = replay__load(path, &o, &r, err, errlen);
	cr_assert_eq(!r, rc != 0);
	replay__free(r);
	return rc;
}

Test(replay, a_plausible_crafted_recording_loads)
{
	char err[512] = "";

	cr_assert_eq(load_crafted("lg_prof_sample=62", START_NS + 10, 1000000000, err, sizeof(err)),
		     0, "%s", err);
}

/* 2^63 bytes does not fit the signed byte figures: it once printed "-9223372036854775808 B". */
Test(replay, lg_prof_sample_63_is_refused)
{
	char err[512] = "";

	cr_assert_eq(load_crafted("lg_prof_sample=63", START_NS, 1000, err, sizeof(err)), -ERANGE,
		     "%s", err);
	cr_assert(strstr(err, "its lg_prof_sample, 63, is beyond the sampling periods heapbpf can "
			      "scale (2^0 to 2^62 bytes)"),
		  "%s", err);
}

/* Times whose sums and differences overflowed (main.c, window.c): refused, each in a sentence. */
Test(replay, absurd_times_are_refused)
{
	char err[512] = "";

	cr_assert_eq(load_crafted("start_wall_ns=9223372036854775807", START_NS, 1000, err,
				  sizeof(err)),
		     -ERANGE);
	cr_assert(strstr(err, "its wall-clock start time, 9223372036854775807, is out of range"),
		  "%s", err);
	cr_assert_eq(load_crafted("start_wall_ns=18446744073709551615", START_NS, 1000, err,
				  sizeof(err)),
		     -ERANGE);
	cr_assert_eq(load_crafted(NULL, START_NS, INT64_MAX, err, sizeof(err)), -ERANGE);
	cr_assert(strstr(err, "its duration, 9223372036854775807, is out of range"), "%s", err);
	cr_assert_eq(load_crafted(NULL, UINT64_MAX, 1000, err, sizeof(err)), -ERANGE);
	cr_assert(strstr(err, "its event time, 18446744073709551615, is out of range"), "%s", err);
	cr_assert_eq(load_crafted("start_mono_ns=18446744073709551615", START_NS, 1000, err,
				  sizeof(err)),
		     -ERANGE);
	cr_assert_eq(load_crafted("stop_mono_ns=9223372036854775808", START_NS, 1000, err,
				  sizeof(err)),
		     -ERANGE);
}

/* The feed's allocations so far (0 while it has no collector). */
static uint64_t fed_allocs(struct replay_feed *f)
{
	const struct replay *r = replay_feed__replay(f);

	return r->collector ? collector__stats(r->collector)->allocs : 0;
}

/*
 * A recording read as it is written (a served top, serve.h): nothing and no
 * collector before the header's last line; each flush's events once it was
 * flushed, a record cut mid-way waited for rather than refused; the drops
 * said so far; then the end, its STOP record's reason and counters.
 */
Test(replay, a_feed_reads_a_recording_as_it_grows)
{
	struct replay_opts o = { .to = -1, .no_symbols = true };
	struct rec_stop st = { .stop_mono_ns = START_NS + 3000000000ULL,
			       .alloc_drops = 7,
			       .reason = 3 };
	struct replay_feed *f = NULL;
	struct recorder *r;
	char path[PATH_MAX], v[32], err[256] = "";

	snprintf(path, sizeof(path), "%s/growing.hbr", dir);
	cr_assert_eq(recording__open(path, &r), 0);
	cr_assert_eq(recording__meta(r, "lg_prof_sample", "19"), 0);
	cr_assert_eq(recording__meta(r, "jemalloc_path", "/usr/bin/service"), 0);
	cr_assert_eq(recording__flush(r), 0);
	cr_assert_eq(replay_feed__open(path, &o, &f, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(replay_feed__read(f, false, err, sizeof(err)), 0, "%s", err);
	cr_assert_null(replay_feed__replay(f)->collector, "a collector before the header's end");
	snprintf(v, sizeof(v), "%llu", START_NS);
	cr_assert_eq(recording__meta(r, "start_mono_ns", v), 0);
	cr_assert_eq(recording__meta(r, "start_wall_ns", "1700000000000000000"), 0);
	put_alloc(r, 0, START_NS + 1000);
	put_alloc(r, 1, START_NS + 2000);
	cr_assert_eq(recording__flush(r), 0);
	cr_assert_eq(replay_feed__read(f, false, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(fed_allocs(f), 2);
	/* nothing more written: nothing more read, and no error */
	cr_assert_eq(replay_feed__read(f, false, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(fed_allocs(f), 2);
	put_alloc(r, 2, START_NS + 3000);
	cr_assert_eq(recording__meta(r, "alloc_drops", "5"), 0);
	cr_assert_eq(recording__flush(r), 0);
	cr_assert_eq(replay_feed__read(f, false, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(fed_allocs(f), 3);
	cr_assert_eq(replay_feed__replay(f)->counters.alloc_drops, 5);
	cr_assert_gt(replay_feed__file_offset(f), 16);
	cr_assert_eq(recording__stop(r, &st), 0);
	cr_assert_eq(recording__close(r), 0);
	cr_assert_eq(replay_feed__read(f, true, err, sizeof(err)), 0, "%s", err);
	cr_assert(replay_feed__replay(f)->stopped);
	cr_assert_eq(replay_feed__replay(f)->reason, 3);
	cr_assert_eq(replay_feed__replay(f)->counters.alloc_drops, 7);
	cr_assert_not(replay_feed__replay(f)->truncated);
	replay_feed__free(f);
}

/* A followed recording whose writer stopped mid-record: at the last read, cut and said. */
Test(replay, a_feed_cut_short_is_said_at_its_last_read)
{
	struct replay_opts o = { .to = -1, .no_symbols = true };
	struct replay_feed *f = NULL;
	struct recorder *r;
	char path[PATH_MAX], v[32], err[256] = "";
	long size;
	FILE *fp;

	snprintf(path, sizeof(path), "%s/cut.hbr", dir);
	cr_assert_eq(recording__open(path, &r), 0);
	cr_assert_eq(recording__meta(r, "lg_prof_sample", "19"), 0);
	cr_assert_eq(recording__meta(r, "jemalloc_path", "/usr/bin/service"), 0);
	snprintf(v, sizeof(v), "%llu", START_NS);
	cr_assert_eq(recording__meta(r, "start_mono_ns", v), 0);
	cr_assert_eq(recording__flush(r), 0);
	put_alloc(r, 0, START_NS + 1000);
	cr_assert_eq(recording__close(r), 0);
	/* the last bytes (the frame's end and checksum, part of the event's block) gone */
	fp = fopen(path, "r+e");
	cr_assert_not_null(fp);
	cr_assert_eq(fseek(fp, 0, SEEK_END), 0);
	size = ftell(fp);
	cr_assert_eq(ftruncate(fileno(fp), size - 12), 0);
	fclose(fp);
	cr_assert_eq(replay_feed__open(path, &o, &f, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(replay_feed__read(f, false, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(replay_feed__read(f, true, err, sizeof(err)), 0, "%s", err);
	cr_assert(replay_feed__replay(f)->truncated, "not said cut");
	cr_assert_not_null(replay_feed__replay(f)->collector);
	replay_feed__free(f);
}
