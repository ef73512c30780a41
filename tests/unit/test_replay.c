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
#include "recording.h"
#include "replay.h"

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

/* Allocations at start - 1 ms, start + 0.5 s and start + 2.5 s, on stacks of their own. */
static void write_recording(char *path, size_t len)
{
	static const int64_t at_ms[] = { -1, 500, 2500 };
	struct rec_stop st = { .stop_mono_ns = START_NS + 3000000000ULL, .alloc_hits = 3 };
	struct recorder *r;
	char v[32];

	snprintf(path, len, "%s/run.hbr", dir);
	cr_assert_eq(recorder__open(path, &r), 0);
	cr_assert_eq(recorder__meta(r, "lg_prof_sample", "19"), 0);
	cr_assert_eq(recorder__meta(r, "jemalloc_path", "/usr/bin/service"), 0);
	snprintf(v, sizeof(v), "%llu", START_NS);
	cr_assert_eq(recorder__meta(r, "start_mono_ns", v), 0);
	for (size_t i = 0; i < sizeof(at_ms) / sizeof(at_ms[0]); i++) {
		struct heapbpf_alloc_event a;

		memset(&a, 0, sizeof(a));
		a.type = HEAPBPF_EV_ALLOC;
		a.pid = 42;
		a.tid = 42;
		a.nframes = 1;
		a.frames[0] = 0x400000 + 0x100 * i;
		a.usize = 64;
		a.tctx = 0x7000 + 64 * i;
		a.ts = (uint64_t)((int64_t)START_NS + at_ms[i] * 1000000);
		cr_assert_eq(recorder__event(r, &a, sizeof(a)), 0);
	}
	cr_assert_eq(recorder__stop(r, &st), 0);
	cr_assert_eq(recorder__close(r), 0);
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
	cr_assert_eq(recorder__open(path, &rec), 0);
	cr_assert_eq(recorder__meta(rec, "lg_prof_sample", "19"), 0);
	cr_assert_eq(recorder__meta(rec, "jemalloc_path", "/usr/bin/service"), 0);
	cr_assert_eq(recorder__meta(rec, "start_mono_ns", "5000000000"), 0);
	cr_assert_eq(recorder__meta(rec, "start_wall_ns", "1700000000000000000"), 0);
	if (eq) {
		snprintf(key, sizeof(key), "%.*s", (int)(eq - meta), meta);
		cr_assert_eq(recorder__meta(rec, key, eq + 1), 0);
	}
	memset(&a, 0, sizeof(a));
	a.type = HEAPBPF_EV_ALLOC;
	a.pid = a.tid = 42;
	a.nframes = 1;
	a.frames[0] = 0x400000;
	a.usize = 64;
	a.tctx = 0x7000;
	a.ts = event_ts;
	cr_assert_eq(recorder__event(rec, &a, sizeof(a)), 0);
	cr_assert_eq(recorder__stop(rec, &st), 0);
	cr_assert_eq(recorder__close(rec), 0);
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
