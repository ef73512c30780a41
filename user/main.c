// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * heapbpf: the story of a run.
 *
 *   1. the command line becomes a struct run, passed down explicitly
 *   2. live: every target (fleet.c), each one found, sampled and written
 *      window by window (live.c, window.c); or report: a recording replayed
 *      into the same windows; or diff: two profiles compared (diff.c)
 *   3. what went short in the run becomes the exit code, here and only here
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <bpf/libbpf.h>

#include "cli.h"
#include "coremem.h"
#include "debuginfo.h"
#include "diff.h"
#include "errmsg.h"
#include "fleet.h"
#include "liveheap.h"
#include "output.h"
#include "replay.h"
#include "run.h"
#include "session.h"
#include "window.h"

/* libbpf's messages, debug level included; installed only with -v */
static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list args)
{
	(void)level;
	return vfprintf(stderr, fmt, args);
}

/* heapbpf report FILE: the same outputs, offline, from a recording: one window. */
static int report_recording(struct run *r, char *err, size_t errlen)
{
	const struct cli *o = r->opts;
	struct replay_opts ro = {
		.from = o->from,
		.to = o->to,
		.dirs = o->binary_dirs,
		.temporary_ns = o->temporary_ns,
	};
	struct target_run tr = { .run = r, .output = o->output };
	char outbuf[256];
	struct heap_data d;
	struct replay *rp;
	int rc;

	rc = replay__load(o->recording, &ro, &rp, err, errlen);
	if (rc)
		return rc;
	if (rp->truncated)
		fprintf(stderr, "heapbpf: warning: %s; reporting the %llu events before that\n",
			rp->note, (unsigned long long)rp->events);
	if (!o->quiet)
		fprintf(stderr, "heapbpf: recording of pid %s (%s), jemalloc %s in %s\n", rp->pid,
			rp->comm, rp->version, rp->ident.path);
	if (!tr.output) {
		sink_default_name(outbuf, sizeof(outbuf), "heapbpf-report", o->format);
		tr.output = outbuf;
	}
	tr.pid = atoi(rp->pid);
	tr.t = &rp->ident;
	tr.start_ns = rp->start_wall_ns;
	snprintf(tr.source, sizeof(tr.source), "pid %s (%s), jemalloc %s in %s", rp->pid, rp->comm,
		 rp->version, rp->ident.path);
	d = (struct heap_data){
		.collector = rp->collector,
		.symbolizer = rp->symbolizer,
		.counters = &rp->counters,
	};
	rc = window_last(&tr, &d, rp->start_wall_ns + rp->duration_ns, err, errlen);
	r->outcome |= tr.outcome;
	replay__free(rp);
	return rc;
}

/* heapbpf report FILE: a core file (ET_CORE, or --core) or a recording. */
static int report_file(struct run *r, char *err, size_t errlen)
{
	const struct cli *o = r->opts;
	int is_core = o->core ? 1 : core_file_is_core(o->recording);

	if (is_core == 1)
		return core_report(r, err, errlen);
	if (o->exe || o->layout)
		return hb_fail(err, errlen, -EINVAL,
			       "%s is not a core file: --exe and --jemalloc-layout apply to core "
			       "files (heapbpf report --core)",
			       o->recording);
	return report_recording(r, err, errlen);
}

static int exit_code(unsigned int outcome)
{
	if (outcome & RUN_FAILED)
		return EXIT_FAIL;
	if (outcome & RUN_NOT_SENT)
		return EXIT_NOT_SENT;
	if (outcome & RUN_DROPS)
		return EXIT_DROPS;
	if (outcome & RUN_NO_SAMPLES)
		return EXIT_NO_SAMPLES;
	return EXIT_OK;
}

int main(int argc, char **argv)
{
	struct cli opts;
	struct run r = { .opts = &opts, .start = time(NULL) };
	char err[1024] = "";
	int rc;

	rc = cli_parse(argc, argv, &opts);
	if (rc)
		return rc > 0 ? EXIT_OK : EXIT_USAGE;
	/* a Ctrl-C during set-up is held and ends the session cleanly */
	if (session_block_signals()) {
		fprintf(stderr, "heapbpf: cannot block signals: %s\n", strerror(errno));
		return EXIT_FAIL;
	}
	output_set_file_mode(opts.file_mode);
	libbpf_set_print(opts.verbose ? libbpf_print : NULL);
	dbg_set_debug_dirs(opts.debug_dirs);
	switch (opts.mode) {
	case MODE_REPORT:
		rc = report_file(&r, err, sizeof(err));
		break;
	case MODE_DIFF:
		rc = diff_command(&opts, err, sizeof(err));
		break;
	default:
		rc = opts.live_heap ? liveheap_run(&r, err, sizeof(err))
				    : fleet_run(&r, err, sizeof(err));
	}
	if (rc) {
		fprintf(stderr, "heapbpf: %s\n", err[0] ? err : strerror(-rc));
		r.outcome |= RUN_FAILED;
	}
	dbg_cache_clear();
	free(opts.debug_dirs);
	return exit_code(r.outcome);
}
