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
#include "folded.h"
#include "output.h"
#include "pprof.h"
#include "report.h"
#include "session.h"
#include "summary.h"
#include "target.h"

static struct cli opts;

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list args)
{
	if (level == LIBBPF_DEBUG && !opts.verbose)
		return 0;
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

int main(int argc, char **argv)
{
	struct jemalloc_target *t = NULL;
	struct hb_profile *prof = NULL;
	struct session s = {};
	struct session_opts so;
	struct report_opts ro;
	char err[1024] = "", outbuf[256];
	const char *out;
	int rc, code = EXIT_FAIL;

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
	rc = jemalloc_target__find(opts.pid, opts.layout, &t, err, sizeof(err));
	if (rc)
		goto fail;
	if (!opts.quiet)
		fprintf(stderr,
			"heapbpf: pid %d (%s): jemalloc %s in %s, sampling every %llu bytes on "
			"average%s\n",
			t->pid, t->comm, t->version, t->path, 1ULL << t->lg_prof_sample,
			opts.duration > 0 ? "" : "; Ctrl-C to stop");

	so = (struct session_opts){
		.duration = opts.duration,
		.ringbuf_bytes = opts.ringbuf_bytes,
		.status_line = !opts.quiet && isatty(STDERR_FILENO),
	};
	rc = session_run(t, &so, &s, err, sizeof(err));
	if (rc)
		goto fail;
	if (s.reason == STOP_TARGET_EXIT && !opts.quiet)
		fprintf(stderr, "heapbpf: pid %d exited; writing what was collected\n", t->pid);

	ro = (struct report_opts){
		.raw = opts.raw,
		.time_nanos = s.start_wall_ns,
		.duration_nanos = s.duration_ns,
	};
	rc = report__build(s.collector, s.symbolizer, t, &ro, &prof);
	if (rc) {
		snprintf(err, sizeof(err), "cannot build the profile: %s", strerror(-rc));
		goto fail;
	}
	rc = write_profile(prof, out);
	if (rc) {
		snprintf(err, sizeof(err), "cannot write %s: %s", out, strerror(-rc));
		goto fail;
	}
	if (!opts.quiet)
		summary_print(stderr, prof, collector__stats(s.collector), &s.counters,
			      strcmp(out, "-") ? out : NULL);
	code = EXIT_OK;
	if (!collector__stats(s.collector)->allocs) {
		fprintf(stderr,
			"heapbpf: no allocation was sampled in pid %d: it allocated less "
			"than jemalloc's sampling interval, or sampling did not start\n",
			t->pid);
		code = EXIT_NO_SAMPLES;
	}
	if (s.counters.alloc_drops || s.counters.free_drops)
		code = EXIT_DROPS;
	goto out;
fail:
	fprintf(stderr, "heapbpf: %s\n", err[0] ? err : strerror(-rc));
out:
	hb_profile__free(prof);
	session_cleanup(&s);
	jemalloc_target__free(t);
	dbg_cache_clear();
	free(opts.debug_dirs);
	return code;
}
