// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Record and replay on real runs: a live profile and `heapbpf report` of its
 * recording are identical; a recording cut short by kill -9 still reports;
 * binaries moved away are found again with --binary-path (by build-id), and
 * without it the frames are reported unnamed instead of failing.
 */
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "collect/recording.h"
#include "harness.h"
#include "heapbpf.h"

#pragma GCC diagnostic ignored "-Wformat-truncation"

#define IDLE_CONF "prof:true,prof_active:false"

TestSuite(record, .fini = hb_tmpdir_cleanup, .timeout = 120);

static void start(struct svc *s, const char *bin, char *pid)
{
	hb_require_bpf();
	cr_assert_eq(svc_start(s, bin, IDLE_CONF, (const char *[]){ "--threads", "2", NULL }), 0);
	sprintf(pid, "%d", s->pid);
}

static char *gunzip(const char *path)
{
	char cmd[PATH_MAX + 32], out[PATH_MAX + 8], *text;

	snprintf(out, sizeof(out), "%s.raw", path);
	snprintf(cmd, sizeof(cmd), "gzip -dc '%s' > '%s'", path, out);
	cr_assert_eq(system(cmd), 0);
	cr_assert_gt(hb_read_file(out, &text), 0);
	return text;
}

static void same_files(const char *a, const char *b, bool gz)
{
	char *x, *y;

	if (gz) {
		x = gunzip(a);
		y = gunzip(b);
	} else {
		cr_assert_gt(hb_read_file(a, &x), 0);
		cr_assert_gt(hb_read_file(b, &y), 0);
	}
	cr_assert_eq(strlen(x), strlen(y), "%s and %s differ in size", a, b);
	cr_assert_eq(memcmp(x, y, strlen(x)), 0, "%s and %s differ", a, b);
	free(x);
	free(y);
}

static void round_trip(const char *fmt)
{
	char pid[16], rec[PATH_MAX], live[PATH_MAX], rep[PATH_MAX], err[8192];
	struct svc s;

	start(&s, hb_path("examples/alloc-service-static"), pid);
	snprintf(rec, sizeof(rec), "%s/run.hbr", hb_tmpdir());
	snprintf(live, sizeof(live), "%s/live.%s", hb_tmpdir(), fmt);
	snprintf(rep, sizeof(rep), "%s/report.%s", hb_tmpdir(), fmt);
	cr_assert_eq(hb_run((const char *[]){ "--pid", pid, "-d", "3", "--record", rec, "-f", fmt,
					      "-o", live, NULL },
			    err, sizeof(err), 60000),
		     0, "%s", err);
	cr_assert(strstr(err, "recorded "), "%s", err);
	cr_assert_eq(svc_stop(&s), 0);
	/* the process is gone: the report works from the recording alone */
	cr_assert_eq(hb_run((const char *[]){ "report", rec, "-f", fmt, "-o", rep, NULL }, err,
			    sizeof(err), 60000),
		     0, "%s", err);
	same_files(live, rep, strcmp(fmt, "pprof") == 0);
}

Test(record, round_trip_pprof)
{
	round_trip("pprof");
}

Test(record, round_trip_folded)
{
	round_trip("folded");
}

/* Sorted by sort(1): the same lines in any order compare equal. */
static void same_lines(const char *a, const char *b)
{
	hb_sh("sort '%s' > '%s.sorted' && sort '%s' > '%s.sorted' && cmp '%s.sorted' '%s.sorted'",
	      a, a, b, b, a, b);
}

/*
 * heapbpf report of a pprof profile (it was refused: "not a heapbpf
 * recording"): folded stacks equal to the recording's report of the same
 * window, and a flame graph page titled as the live run's.
 */
Test(record, pprof_reported_as_folded_and_html)
{
	char pid[16], rec[PATH_MAX], pb[PATH_MAX], a[PATH_MAX], b[PATH_MAX], html[PATH_MAX];
	char err[8192], *page;
	struct svc s;

	start(&s, hb_path("examples/alloc-service-static"), pid);
	snprintf(rec, sizeof(rec), "%s/run.hbr", hb_tmpdir());
	snprintf(pb, sizeof(pb), "%s/live.pb.gz", hb_tmpdir());
	snprintf(a, sizeof(a), "%s/rec.folded", hb_tmpdir());
	snprintf(b, sizeof(b), "%s/pprof.folded", hb_tmpdir());
	snprintf(html, sizeof(html), "%s/pprof.html", hb_tmpdir());
	cr_assert_eq(hb_run((const char *[]){ "--pid", pid, "-d", "2", "-q", "--record", rec, "-o",
					      pb, NULL },
			    err, sizeof(err), 60000),
		     0, "%s", err);
	cr_assert_eq(svc_stop(&s), 0);
	cr_assert_eq(hb_run((const char *[]){ "report", rec, "-t", "alloc_space", "-o", a, NULL },
			    err, sizeof(err), 60000),
		     0, "%s", err);
	cr_assert_eq(hb_run((const char *[]){ "report", pb, "-t", "alloc_space", "-o", b, NULL },
			    err, sizeof(err), 60000),
		     0, "%s", err);
	cr_assert(strstr(err, "wrote "), "%s", err);
	same_lines(a, b);
	cr_assert_eq(hb_run((const char *[]){ "report", pb, "-o", html, "-q", NULL }, err,
			    sizeof(err), 60000),
		     0, "%s", err);
	cr_assert_gt(hb_read_file(html, &page), 0);
	cr_assert(strstr(page, "<h1 id=\"hb-title\">alloc-service-s &middot; pid "), "%.600s",
		  page);
	cr_assert(strstr(page, "large_buffers"));
	free(page);
	/* pprof to pprof is no conversion; a recording's options do not apply */
	cr_assert_eq(hb_run((const char *[]){ "report", pb, "-o", hb_tmp("again.pb.gz"), NULL },
			    err, sizeof(err), 60000),
		     1, "%s", err);
	cr_assert(strstr(err, "is a pprof profile already: give -f folded or -f html"), "%s", err);
	cr_assert_eq(hb_run((const char *[]){ "report", pb, "--from", "1", "-o", html, NULL }, err,
			    sizeof(err), 60000),
		     1, "%s", err);
	cr_assert(strstr(err, "apply to recordings"), "%s", err);
}

Test(record, killed_run_reports_its_prefix)
{
	char pid[16], rec[PATH_MAX], rep[PATH_MAX], errpath[PATH_MAX], err[8192], *text;
	uint64_t flag;
	uint8_t zero = 0;
	struct svc s;
	char mem[64];
	pid_t hp;
	FILE *m;

	start(&s, hb_path("examples/alloc-service-static"), pid);
	snprintf(rec, sizeof(rec), "%s/killed.hbr", hb_tmpdir());
	snprintf(rep, sizeof(rep), "%s/killed.folded", hb_tmpdir());
	snprintf(errpath, sizeof(errpath), "%s/killed.err", hb_tmpdir());
	cr_assert_eq(hb_sym_addr(s.pid, hb_path("examples/alloc-service-static"),
				 "je_prof_active_state", &flag),
		     0);
	hp = hb_spawn((const char *[]){ hb_path("heapbpf"), "--pid", pid, "-d", "0", "--record",
					rec, NULL },
		      errpath);
	cr_assert(hb_wait_byte(s.pid, flag, 1, 20000, hp));
	/* past the recorder's first flush */
	hb_sleep_ms(2500);
	kill(hp, SIGKILL);
	cr_assert_eq(hb_wait(hp, 10000), 128 + SIGKILL);
	/* kill -9 cannot restore the flag: do it here, the test's own way */
	snprintf(mem, sizeof(mem), "/proc/%d/mem", s.pid);
	m = fopen(mem, "r+");
	cr_assert_not_null(m);
	fseek(m, (long)flag, SEEK_SET);
	cr_assert_eq(fwrite(&zero, 1, 1, m), 1);
	fclose(m);
	cr_assert_eq(svc_stop(&s), 0);
	cr_assert_eq(hb_run((const char *[]){ "report", rec, "-f", "folded", "-t", "alloc_objects",
					      "-o", rep, NULL },
			    err, sizeof(err), 60000),
		     0, "%s", err);
	cr_assert(strstr(err, "truncated"), "no word of the truncation: %s", err);
	cr_assert_gt(hb_read_file(rep, &text), 0);
	cr_assert(strstr(text, ";run_one;churn_small "), "%s", text);
	free(text);
}

Test(record, moved_binaries_found_by_build_id)
{
	char pid[16], rec[PATH_MAX], rep[PATH_MAX], dir[PATH_MAX], bin[PATH_MAX], moved[PATH_MAX];
	char err[8192], cmd[3 * PATH_MAX], *text;
	struct svc s;

	snprintf(dir, sizeof(dir), "%s/run", hb_tmpdir());
	snprintf(moved, sizeof(moved), "%s/elsewhere", hb_tmpdir());
	snprintf(bin, sizeof(bin), "%s/my-service", dir);
	snprintf(cmd, sizeof(cmd), "mkdir -p '%s' '%s' && cp '%s' '%s'", dir, moved,
		 hb_path("examples/alloc-service-static"), bin);
	cr_assert_eq(system(cmd), 0);
	start(&s, bin, pid);
	snprintf(rec, sizeof(rec), "%s/moved.hbr", hb_tmpdir());
	snprintf(rep, sizeof(rep), "%s/moved.folded", hb_tmpdir());
	cr_assert_eq(hb_run((const char *[]){ "--pid", pid, "-d", "2", "--record", rec, NULL }, err,
			    sizeof(err), 60000),
		     0, "%s", err);
	cr_assert_eq(svc_stop(&s), 0);
	snprintf(cmd, sizeof(cmd), "mv '%s' '%s/'", bin, moved);
	cr_assert_eq(system(cmd), 0);

	/* not found: reported unnamed (object+offset), not a failure */
	cr_assert_eq(hb_run((const char *[]){ "report", rec, "-f", "folded", "-o", rep, NULL }, err,
			    sizeof(err), 60000),
		     0, "%s", err);
	cr_assert_gt(hb_read_file(rep, &text), 0);
	cr_assert(strstr(text, "my-service+0x"), "%s", text);
	cr_assert_null(strstr(text, "churn_small"), "%s", text);
	free(text);

	/* found again under --binary-path, matched by build-id */
	cr_assert_eq(hb_run((const char *[]){ "report", rec, "-f", "folded", "--binary-path", moved,
					      "-o", rep, NULL },
			    err, sizeof(err), 60000),
		     0, "%s", err);
	cr_assert_gt(hb_read_file(rep, &text), 0);
	cr_assert(strstr(text, ";run_one;churn_small "), "%s", text);
	free(text);
}

Test(record, bad_recordings_are_refused)
{
	char path[PATH_MAX], err[8192];
	FILE *f;

	snprintf(path, sizeof(path), "%s/garbage.hbr", hb_tmpdir());
	f = fopen(path, "w");
	fputs("this is not a recording\n", f);
	fclose(f);
	cr_assert_eq(hb_run((const char *[]){ "report", path, NULL }, err, sizeof(err), 10000), 1);
	cr_assert(strstr(err, "is not a heapbpf recording"), "%s", err);
	cr_assert_eq(hb_run((const char *[]){ "report", "/nonexistent.hbr", NULL }, err,
			    sizeof(err), 10000),
		     1);
	cr_assert(strstr(err, "cannot open"), "%s", err);
}

/* heapbpf --record of s's service for 2 s, then s stopped; the recording opened. */
static struct rec_reader *recorded(struct svc *s)
{
	char pid[16], rec[PATH_MAX], err[8192];
	struct rec_reader *rd;

	snprintf(pid, sizeof(pid), "%d", s->served);
	snprintf(rec, sizeof(rec), "%s/run.hbr", hb_tmpdir());
	cr_assert_eq(hb_run((const char *[]){ "--pid", pid, "-d", "2", "--record", rec, "-o",
					      "/dev/null", NULL },
			    err, sizeof(err), 60000),
		     0, "%s", err);
	cr_assert_eq(svc_stop(s), 0);
	cr_assert_eq(recording_reader__open(rec, &rd, err, sizeof(err)), 0, "%s", err);
	return rd;
}

/*
 * jemalloc 5.3.0's frees carry no pointer, only its CLOCK_MONOTONIC_COARSE
 * reading just after the probe: each sample carries the same clock as the
 * probe read it from the target's vDSO page (docs/analysis.md, Lifetimes).
 * In the recording: every sample's coarse time is there, at most a few
 * ticks behind its own fine time, in order per thread; and every free of a
 * sample of this run names an allocation time at or after the coarse time
 * of a sample of its tctx.
 */
Test(record, samples_of_530_carry_the_coarse_clock)
{
	char pid[16], err[8192];
	struct rec_reader *rd;
	struct rec_record r;
	struct svc s;
	struct {
		uint32_t tid;
		uint64_t coarse;
	} last[64] = { 0 };
	struct {
		uint64_t tctx, coarse;
	} *first = calloc(1 << 16, sizeof(*first));
	size_t nfirst = 0, allocs = 0, frees = 0, matched = 0;
	uint64_t first_coarse = 0;
	int rc;

	cr_assert_not_null(first);
	start(&s, hb_path("examples/alloc-service-static"), pid);
	rd = recorded(&s);
	while ((rc = recording_reader__next(rd, &r, err, sizeof(err))) == 1) {
		struct heapbpf_alloc_event a;
		struct heapbpf_free_event *f = (struct heapbpf_free_event *)&a;

		if (r.type != REC_ALLOC && r.type != REC_FREE)
			continue;
		cr_assert_eq(recording_decode_event(&r, &a, sizeof(a)), 0);
		if (r.type == REC_ALLOC) {
			size_t k;

			allocs++;
			cr_assert_neq(a.coarse, 0, "sample %zu has no coarse time", allocs);
			/* the tick and then some: the coarse clock is updated at a tick */
			cr_assert_leq(a.coarse, a.ts + 1000000);
			cr_assert_lt(a.ts - a.coarse, 1000000000ULL, "%llu ns behind",
				     (unsigned long long)(a.ts - a.coarse));
			if (!first_coarse)
				first_coarse = a.coarse;
			for (k = 0; k < 64 && last[k].tid && last[k].tid != a.tid; k++)
				;
			if (k < 64) {
				cr_assert_geq(a.coarse, last[k].coarse,
					      "thread %u's clock went back", a.tid);
				last[k].tid = a.tid;
				last[k].coarse = a.coarse;
			}
			for (k = 0; k < nfirst && first[k].tctx != a.tctx; k++)
				;
			if (k == nfirst && nfirst < (1 << 16))
				first[nfirst++] = (typeof(*first)){ a.tctx, a.coarse };
			continue;
		}
		frees++;
		/* a free of an object sampled before heapbpf attached: not of this run */
		if (!f->alloc_time_ns || f->alloc_time_ns < first_coarse)
			continue;
		for (size_t k = 0; k < nfirst; k++) {
			if (first[k].tctx == f->tctx) {
				cr_assert_geq(f->alloc_time_ns, first[k].coarse,
					      "a free allocated before its tctx's first sample");
				matched++;
				break;
			}
		}
	}
	cr_assert_eq(rc, 0, "%s", err);
	recording_reader__free(rd);
	free(first);
	cr_assert_gt(allocs, 100, "%zu samples", allocs);
	cr_assert_gt(matched, frees / 2, "%zu of %zu frees matched a sampled tctx", matched, frees);
}

/*
 * A target in a time namespace of its own (as a restored container is), its
 * monotonic clocks 100000 s ahead of heapbpf's: its vDSO page at the usual
 * place holds its clock offsets, and the clock is at another page, found in a
 * child of heapbpf's in a new time namespace. Each sample carries the kernel's
 * coarse time there, heapbpf's clock and not the target's (its lifetimes:
 * leaks/lifetimes_of_a_target_in_another_time_namespace).
 */
Test(record, samples_in_another_time_namespace_carry_the_kernels_coarse_clock)
{
	char err[8192];
	struct rec_reader *rd;
	struct rec_record r;
	struct svc s;
	size_t allocs = 0;
	int rc;

	hb_require_bpf();
	cr_assert_eq(svc_start_opts(&s, hb_path("examples/alloc-service-static"),
				    &(struct svc_opts){ .malloc_conf = IDLE_CONF,
							.time_ahead_s = 100000 },
				    (const char *[]){ "--threads", "2", NULL }),
		     0);
	cr_assert_neq(s.served, s.pid, "the service is its starter's child");
	rd = recorded(&s);
	while ((rc = recording_reader__next(rd, &r, err, sizeof(err))) == 1) {
		struct heapbpf_alloc_event a;

		if (r.type != REC_ALLOC)
			continue;
		cr_assert_eq(recording_decode_event(&r, &a, sizeof(a)), 0);
		allocs++;
		cr_assert_neq(a.coarse, 0, "sample %zu has no coarse time", allocs);
		/* a tick and then some behind the probe's own time, never 100000 s off */
		cr_assert_leq(a.coarse, a.ts + 1000000, "%llu ns ahead",
			      (unsigned long long)(a.coarse - a.ts));
		cr_assert_lt(a.ts - a.coarse, 1000000000ULL, "%llu ns behind",
			     (unsigned long long)(a.ts - a.coarse));
	}
	cr_assert_eq(rc, 0, "%s", err);
	recording_reader__free(rd);
	cr_assert_gt(allocs, 100, "%zu samples", allocs);
}
