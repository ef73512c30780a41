// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * heapbpf: the story of one run.
 *
 *   1. find jemalloc in the target and check it was started with prof:true
 *   2. session: attach uprobes, switch prof_active on, collect, switch it back
 *   3. symbolize and trim the stacks into a profile
 *   4. write it atomically, print a summary
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "cli.h"
#include "debuginfo.h"
#include "fleet.h"
#include "folded.h"
#include "guard.h"
#include "privs.h"
#include "output.h"
#include "pprof.h"
#include "recording.h"
#include "replay.h"
#include "report.h"
#include "session.h"
#include "summary.h"
#include "target.h"

static struct cli opts;

/* libbpf's messages, debug level included, only with -v */
static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list args)
{
	(void)level;
	if (!opts.verbose)
		return 0;
	return vfprintf(stderr, fmt, args);
}

static void default_output(char *buf, size_t len)
{
	char ts[32];
	time_t now = time(NULL);
	struct tm tm;

	localtime_r(&now, &tm);
	strftime(ts, sizeof(ts), "%Y%m%d-%H%M%S", &tm);
	if (opts.mode == MODE_REPORT)
		snprintf(buf, len, "heapbpf-report-%s.%s", ts,
			 opts.format == FMT_PPROF ? "pb.gz" : "folded");
	else
		snprintf(buf, len, "heapbpf-%d-%s.%s", opts.pid, ts,
			 opts.format == FMT_PPROF ? "pb.gz" : "folded");
}

struct folded_arg {
	const struct hb_profile *p;
	enum hb_value which;
};

static int write_folded(FILE *f, void *arg)
{
	struct folded_arg *a = arg;

	return folded_write(a->p, a->which, f);
}

static int write_profile(const struct hb_profile *p, const char *path)
{
	struct folded_arg fa = { .p = p, .which = opts.sample_type };
	uint8_t *buf = NULL;
	size_t len = 0;
	int err;

	if (opts.format == FMT_FOLDED)
		return output_write_atomic(path, write_folded, &fa);
	err = pprof_encode(p, &buf, &len);
	if (!err)
		err = output_write_buffer(path, buf, len);
	free(buf);
	return err;
}

/* What the profile is of, and what was lost, as pprof comments. */
static int describe(struct hb_profile *p, const struct collector *c, const char *source,
		    const struct heapbpf_counters *bc)
{
	const struct collector_stats *st = collector__stats(c);
	int err;

	err = hb_profile_add_comment(p, "heapbpf %s: %s", HEAPBPF_VERSION, source);
	err = err
		      ?: hb_profile_add_comment(
				 p,
				 "heapbpf: %llu samples, %llu frees of them, %llu frees "
				 "of objects sampled before attach",
				 (unsigned long long)st->allocs,
				 (unsigned long long)st->frees_matched,
				 (unsigned long long)st->frees_unmatched);
	if (!err && (bc->alloc_drops || bc->free_drops))
		err = hb_profile_add_comment(p,
					     "heapbpf: WARNING: %llu samples and %llu frees were "
					     "dropped (ring buffer full); totals are too low",
					     (unsigned long long)bc->alloc_drops,
					     (unsigned long long)bc->free_drops);
	return err;
}

/* Profile (if asked for), summary and exit code, shared by live runs and reports. */
static int finish(const struct collector *c, struct symbolizer *sym,
		  const struct jemalloc_target *t, const char *source,
		  const struct heapbpf_counters *counters, int64_t start_wall_ns,
		  int64_t duration_ns, bool write, const char *out, char *err, size_t errlen)
{
	struct report_opts ro = {
		.raw = opts.raw,
		.time_nanos = start_wall_ns,
		.duration_nanos = duration_ns,
	};
	struct hb_profile *prof = NULL;
	int rc, code = EXIT_OK;

	if (write) {
		rc = report__build(c, sym, t, &ro, &prof);
		if (!rc)
			rc = describe(prof, c, source, counters);
		if (rc) {
			snprintf(err, errlen, "cannot build the profile: %s", strerror(-rc));
			hb_profile__free(prof);
			return -1;
		}
		rc = write_profile(prof, out);
		if (rc) {
			snprintf(err, errlen, "cannot write %s: %s", out, strerror(-rc));
			hb_profile__free(prof);
			return -1;
		}
		if (!opts.quiet)
			summary_print(stderr, prof, collector__stats(c), counters,
				      strcmp(out, "-") ? out : NULL);
	}
	/* the BPF side's own count of traps: one per sampled allocation, one per sampled free */
	if (opts.verbose)
		fprintf(stderr,
			"heapbpf: uprobe hits: %llu on the allocation path, %llu on the free path; "
			"%llu samples and %llu frees dropped; %llu read faults\n",
			(unsigned long long)counters->alloc_hits,
			(unsigned long long)counters->free_hits,
			(unsigned long long)counters->alloc_drops,
			(unsigned long long)counters->free_drops,
			(unsigned long long)counters->read_faults);
	if (!collector__stats(c)->allocs) {
		fprintf(stderr, "heapbpf: no allocation was sampled: the process allocated less "
				"than jemalloc's sampling interval, or sampling did not start\n");
		code = EXIT_NO_SAMPLES;
	}
	if (counters->alloc_drops || counters->free_drops)
		code = EXIT_DROPS;
	hb_profile__free(prof);
	return code;
}

/* heapbpf --pid N: profile a live process. */
static int live(const char *out, char *err, size_t errlen)
{
	struct jemalloc_target *t = NULL;
	struct recorder *rec = NULL;
	struct guard *g = NULL;
	char source[512];
	struct session s = {};
	struct session_opts so;
	bool restored;
	int rc, code = -1;

	/* privileges and kernel features first: say exactly what is missing */
	rc = privs_check(err, errlen);
	if (rc)
		goto out;
	rc = jemalloc_target__find(opts.pid, opts.layout, &t, err, errlen);
	if (rc)
		goto out;
	/* one heapbpf per target; and undo what a killed one left behind */
	rc = guard__acquire(t->pid, &g, err, errlen);
	if (rc)
		goto out;
	rc = guard__recover(g, t, &restored, err, errlen);
	if (rc)
		goto out;
	if (restored)
		fprintf(stderr,
			"heapbpf: restored prof_active in pid %d, left on by a heapbpf run that was "
			"killed\n",
			t->pid);
	if (opts.reset) {
		if (!restored && !opts.quiet)
			fprintf(stderr, "heapbpf: pid %d: nothing to reset\n", t->pid);
		code = EXIT_OK;
		goto out;
	}
	if (!opts.quiet)
		fprintf(stderr,
			"heapbpf: pid %d (%s): jemalloc %s in %s, sampling every %llu bytes on "
			"average%s\n",
			t->pid, t->comm, t->version, t->path, 1ULL << t->lg_prof_sample,
			opts.duration > 0 ? "" : "; Ctrl-C to stop");
	if (opts.record) {
		rc = recorder__open(opts.record, &rec);
		if (rc) {
			snprintf(err, errlen, "cannot create the recording %s: %s", opts.record,
				 strerror(-rc));
			goto out;
		}
	}
	so = (struct session_opts){
		.duration = opts.duration,
		.ringbuf_bytes = opts.ringbuf_bytes,
		.status_line = !opts.quiet && isatty(STDERR_FILENO),
		.recorder = rec,
		.guard = g,
	};
	fleet_session_opts(&so, t);
	rc = session_run(t, &so, &s, err, errlen);
	if (rec) {
		uint64_t raw = 0, file = 0;
		int r2, r3;

		r2 = recorder__end(rec);
		recorder__sizes(rec, &raw, &file);
		r3 = recorder__close(rec);
		if (!r2)
			r2 = r3;
		if (!rc && (s.record_err || r2)) {
			rc = s.record_err ? s.record_err : r2;
			snprintf(err, errlen, "cannot write the recording %s: %s", opts.record,
				 strerror(-rc));
		}
		if (!rc && !opts.quiet)
			fprintf(stderr,
				"heapbpf: recorded %llu samples and %llu frees to %s (%llu bytes, "
				"%llu uncompressed)\n",
				(unsigned long long)collector__stats(s.collector)->allocs,
				(unsigned long long)collector__stats(s.collector)->frees,
				opts.record, (unsigned long long)file, (unsigned long long)raw);
	}
	if (rc)
		goto out;
	if (s.reason == STOP_TARGET_EXIT && !opts.quiet)
		fprintf(stderr, "heapbpf: pid %d exited; writing what was collected\n", t->pid);
	/* snapshots, windows, Pyroscope: fleet.c decides where the profile goes */
	if (fleet_owns_output()) {
		code = fleet_last_window(&s, t, out, err, errlen);
		goto out;
	}
	snprintf(source, sizeof(source), "pid %d (%s), jemalloc %s in %s", t->pid, t->comm,
		 t->version, t->path);
	code = finish(s.collector, s.symbolizer, t, source, &s.counters, s.start_wall_ns,
		      s.duration_ns, !opts.record || opts.output_set, out, err, errlen);
out:
	session_cleanup(&s);
	guard__release(g);
	jemalloc_target__free(t);
	return code;
}

/* heapbpf report FILE: the same outputs, offline, from a recording. */
static int report_recording(const char *out, char *err, size_t errlen)
{
	struct replay_opts ro = {
		.from = opts.from,
		.to = opts.to,
		.dirs = opts.binary_dirs,
	};
	char source[512];
	struct replay *r;
	int code;

	if (replay__load(opts.recording, &ro, &r, err, errlen))
		return -1;
	if (r->truncated)
		fprintf(stderr, "heapbpf: warning: %s; reporting the %llu events before that\n",
			r->note, (unsigned long long)r->events);
	if (!opts.quiet)
		fprintf(stderr, "heapbpf: recording of pid %s (%s), jemalloc %s in %s\n", r->pid,
			r->comm, r->version, r->ident.path);
	snprintf(source, sizeof(source), "pid %s (%s), jemalloc %s in %s", r->pid, r->comm,
		 r->version, r->ident.path);
	code = finish(r->collector, r->symbolizer, &r->ident, source, &r->counters,
		      r->start_wall_ns, r->duration_ns, true, out, err, errlen);
	replay__free(r);
	return code;
}

/* One target: fleet_run calls this for each process (in parallel when several). */
static int live_pid(pid_t pid, char *err, size_t errlen)
{
	char outbuf[256];
	const char *out = opts.output;

	opts.pid = pid;
	if (!out) {
		default_output(outbuf, sizeof(outbuf));
		out = outbuf;
	}
	return live(out, err, errlen);
}

int main(int argc, char **argv)
{
	char err[1024] = "", outbuf[256];
	const char *out;
	int rc;

	rc = cli_parse(argc, argv, &opts);
	if (rc)
		return rc > 0 ? EXIT_OK : EXIT_USAGE;
	/* a Ctrl-C during set-up is held and ends the session cleanly */
	if (session_block_signals()) {
		fprintf(stderr, "heapbpf: cannot block signals: %s\n", strerror(errno));
		return EXIT_FAIL;
	}
	libbpf_set_print(libbpf_print);
	out = opts.output;
	if (!out) {
		default_output(outbuf, sizeof(outbuf));
		out = outbuf;
	}
	dbg_set_debug_dirs(opts.debug_dirs);
	rc = opts.mode == MODE_REPORT ? report_recording(out, err, sizeof(err))
				      : fleet_run(&opts, live_pid, err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr, "heapbpf: %s\n", err[0] ? err : "failed");
		rc = EXIT_FAIL;
	}
	dbg_cache_clear();
	free(opts.debug_dirs);
	return rc;
}
