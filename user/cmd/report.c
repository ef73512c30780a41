// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * heapbpf report FILE: a recording, replayed into the windows a live run
 * writes, or a core file, whose jemalloc tables are walked (heap/coreheap.c),
 * or a pprof profile, converted to folded stacks or a flame graph page.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "heap/coreheap.h"
#include "profile/diff.h"
#include "util/errmsg.h"
#include "util/files.h"
#include "collect/replay.h"
#include "profile/report.h"
#include "cmd/report.h"
#include "cli/checks.h"
#include "cli/cli.h"
#include "export/sink.h"
#include "profile/summary.h"
#include "util/version.h"
#include "run/window.h"
#include "profile/wrappers.h"

/* heapbpf report --help */
const char report_help[] =
	"Usage: heapbpf report RECORDING|CORE|PROFILE.pb.gz [options]\n"
	"\n"
	"heapbpf report RECORDING: every report of a live run, offline, from a recording\n"
	"(heapbpf --pid PID --record FILE).\n"
	"  -o, -f, -t, --raw, --leaks, --at-peak, --temporary-threshold, --wrapper,\n"
	"  --file-mode, --allow-shared-dir  as heapbpf --help says\n"
	"      --from S, --to S       only events from S to S seconds after the start\n"
	"      --binary-path DIR      look for the recorded binaries (matched by build-id) under\n"
	"                             DIR, as a sysroot or by file name; repeatable. Also searched:\n"
	"                             their recorded paths and, with DEBUGINFOD_URLS, debuginfod\n"
	"      --debug-dir DIR        as heapbpf --help says\n"
	"  heapbpf report heap.hbr -f folded -t alloc_space --from 10 --to 20 -o window.folded\n"
	"\n"
	"heapbpf report CORE: the sampled live heap of a jemalloc process at the time of its core\n"
	"dump (the kernel's or gdb's gcore; an ELF core is recognized, --core insists), read from\n"
	"jemalloc's own profiling tables: the process must have run with prof:true and\n"
	"prof_active:true. -o, -f, -t, --raw, --binary-path, --debug-dir, --jemalloc-layout,\n"
	"--wrapper as heapbpf --help says\n"
	"      --core                 FILE is a core file\n"
	"      --exe PATH             the executable the core was dumped from (checked by build-id)\n"
	"  heapbpf report core.4242 --exe ./service -f folded -o heap.folded\n"
	"\n"
	"heapbpf report PROFILE.pb.gz: a pprof heap profile (heapbpf's, or any with Go's heap\n"
	"sample types) as folded stacks or a flame graph page. -o, -f folded|html, -t,\n"
	"--file-mode, --allow-shared-dir as heapbpf --help says\n"
	"  heapbpf report heap.pb.gz -o heap.html\n"
	"\n" HB_EXIT_STATUS_HELP;

/* What the profile is of, as pprof comments. */
static int core_describe(struct hb_profile *p, const struct core_heap *h,
			 const struct heapwalk_stats *st)
{
	const struct jemalloc_target *t = h->t;
	const char *active = !st->active_known ? "unknown" : st->prof_active ? "on" : "off";
	const char *values = p->raw ? "raw sampled counts (prof.dump with prof_unbias:false)"
			     : st->unbiased ? "estimates, exact for a stack of one object size, "
					      "jemalloc's own unbiased sums (rounded per size "
					      "class) for the others"
					    : "estimated from each stack's mean object size";
	char trunc[256];
	int rc;

	rc = hb_profile_add_comment(p,
				    "heapbpf %s: live heap from core file %s of pid %d (%s) at the "
				    "time of the dump, jemalloc %s in %s",
				    HEAPBPF_VERSION, h->core->path, h->core->pid, h->core->comm,
				    t->version, t->path);
	rc = rc
		     ?: hb_profile_add_comment(
				p,
				"heapbpf: read from jemalloc's own profiling tables in the "
				"core: %" PRIu64 " sampled objects (%" PRIu64
				" bytes) live in %" PRIu64
				" stacks; prof_active was %s, sampling every %llu bytes",
				st->curobjs, st->curbytes, st->stacks, active,
				1ULL << st->lg_prof_sample);
	rc = rc
		     ?: hb_profile_add_comment(
				p, "heapbpf: %s",
				st->prof_accum ? "alloc_* are everything jemalloc sampled since "
						 "it started (prof_accum:true)"
					       : "alloc_* are zero: jemalloc keeps no allocated "
						 "totals without prof_accum:true");
	rc = rc ?: hb_profile_add_comment(p, "heapbpf: values are %s", values);
	heapwalk_truncated_text(trunc, sizeof(trunc), st);
	if (!rc && trunc[0])
		rc = hb_profile_add_comment(p, "heapbpf: %s", trunc);
	return rc;
}

/* The file's modification time: when the dump was written. */
static int64_t core_time(const char *path)
{
	struct stat sb;

	if (stat(path, &sb))
		return 0;
	return (int64_t)sb.st_mtim.tv_sec * 1000000000LL + sb.st_mtim.tv_nsec;
}

/* The top sites and the file, as a live run's summary says them. */
static void core_say(const struct hb_profile *p, const char *where)
{
	struct hb_site top[5];
	size_t n = summary_top_sites(p, top, 5);
	char name[HB_CLEAN_SIZE(1024)];

	summary_sites(p, top, n);
	if (strcmp(where, "-") != 0)
		hb_note("wrote %s", hb_clean(name, sizeof(name), where));
}

static int core_write(const struct cli *o, const struct core_heap *h, struct collector *c,
		      const struct heapwalk_stats *st, const char *output, char *err, size_t errlen)
{
	struct report_opts ro = {
		.raw = o->run.raw,
		.time_nanos = core_time(h->core->path),
		.wrappers = o->run.wrappers,
		.nwrappers = o->run.nwrappers,
	};
	struct sink s = {
		.kind = SINK_FILE,
		.format = o->run.format,
		.sample_type = o->run.sample_type,
		.zstd = o->run.zstd,
		.path = output,
	};
	struct symbolizer *sym = NULL;
	struct hb_profile *p = NULL;
	int rc = coreheap__symbolizer(h, o->binary_dirs, &sym);

	rc = rc ?: report__build(c, sym, h->t, &ro, &p);
	rc = rc ?: core_describe(p, h, st);
	if (rc)
		rc = hb_fail(err, errlen, rc, "cannot build the profile: %s", strerror(-rc));
	else
		rc = sink_write(p, &s, err, errlen);
	if (!rc)
		core_say(p, output);
	hb_profile__free(p);
	symbolizer__free(sym);
	return rc;
}

/* What the core holds, and whose it was. */
static void say_core(const struct core_heap *h, const struct heapwalk_stats *st)
{
	char b[32], comm[HB_CLEAN_SIZE(sizeof(h->core->comm))], core[HB_CLEAN_SIZE(PATH_MAX)];
	char version[HB_CLEAN_SIZE(sizeof(h->t->version))], path[HB_CLEAN_SIZE(PATH_MAX)];

	summary_bytes(b, sizeof(b), st->inuse_space);
	hb_note("live heap of pid %d (%s) at the time of the dump, from core file %s: "
		"%" PRIu64 " sampled objects, %s in use (estimated), %" PRIu64
		" stacks; jemalloc %s in %s",
		h->core->pid, hb_clean(comm, sizeof(comm), h->core->comm),
		hb_clean(core, sizeof(core), h->core->path), st->curobjs, b, st->stacks,
		hb_clean(version, sizeof(version), h->t->version),
		hb_clean(path, sizeof(path), h->t->path));
	heapwalk_truncated_text(path, sizeof(path), st);
	if (path[0])
		hb_warn("%s", path);
}

static int core_report(const struct cli *o, struct run *r, char *err, size_t errlen)
{
	struct core_heap_opts co = {
		.path = o->recording,
		.exe = o->exe,
		.layout = o->run.layout,
		.dirs = o->binary_dirs,
	};
	struct heapwalk_stats st = { 0 };
	struct collector *c = NULL;
	struct core_heap *h;
	char outbuf[256];
	const char *output = o->run.output;
	int rc;

	if (o->from || o->to >= 0 || o->run.leaks || o->run.at_peak)
		return hb_fail(err, errlen, -EINVAL,
			       "%s is a core file, a single instant: --from, --to, --leaks and "
			       "--at-peak apply to recordings",
			       o->recording);
	rc = coreheap__open(&co, &h, err, errlen);
	if (rc)
		return rc;
	rc = coreheap__walk(h, &c, &st, err, errlen);
	if (!output) {
		sink_default_name(outbuf, sizeof(outbuf), "core", o->run.format);
		output = outbuf;
	}
	if (!rc)
		say_core(h, &st);
	rc = rc ?: core_write(o, h, c, &st, output, err, errlen);
	if (!rc && !st.stacks) {
		char path[HB_CLEAN_SIZE(PATH_MAX)];

		hb_say("core file %s: jemalloc held no sampled live object (prof_active "
		       "%s at the time of the dump)",
		       hb_clean(path, sizeof(path), h->core->path),
		       st.prof_active ? "was on" : "was off or unknown");
		r->outcome |= RUN_NO_SAMPLES;
	}
	collector__free(c);
	coreheap__free(h);
	return rc;
}

/* The report's header: what the recording says it recorded. */
static void say_recording(const struct replay *rp)
{
	char pid[HB_CLEAN_SIZE(sizeof(rp->pid))], comm[HB_CLEAN_SIZE(sizeof(rp->comm))];
	char version[HB_CLEAN_SIZE(sizeof(rp->version))], path[HB_CLEAN_SIZE(PATH_MAX)];

	hb_note("recording of pid %s (%s), jemalloc %s in %s", hb_clean(pid, sizeof(pid), rp->pid),
		hb_clean(comm, sizeof(comm), rp->comm),
		hb_clean(version, sizeof(version), rp->version),
		hb_clean(path, sizeof(path), rp->ident.path));
}

/* heapbpf report FILE: the same outputs, offline, from a recording: one window. */
static int report_recording(const struct cli *o, struct run *r, char *err, size_t errlen)
{
	struct replay_opts ro = {
		.from = o->from,
		.to = o->to,
		.dirs = o->binary_dirs,
		.temporary_ns = o->run.temporary_ns,
	};
	struct target_run tr = { .run = r, .output = o->run.output };
	char outbuf[256];
	struct heap_data d;
	struct replay *rp;
	int rc;

	rc = replay__load(o->recording, &ro, &rp, err, errlen);
	if (rc)
		return rc;
	if (rp->truncated) {
		char note[HB_CLEAN_SIZE(sizeof(rp->note))];

		hb_warn("%s; reporting the %llu events before that",
			hb_clean(note, sizeof(note), rp->note), (unsigned long long)rp->events);
	}
	say_recording(rp);
	if (!tr.output) {
		sink_default_name(outbuf, sizeof(outbuf), "report", o->run.format);
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

/* Whether path starts as gzip does (a pprof profile); false when it cannot be read. */
static bool is_gzip(const char *path)
{
	int fd = files_open_regular_ro(path);
	unsigned char magic[2];
	bool gz;

	if (fd < 0)
		return false;
	gz = read(fd, magic, sizeof(magic)) == sizeof(magic) && magic[0] == 0x1f &&
	     magic[1] == 0x8b;
	close(fd);
	return gz;
}

/*
 * heapbpf report X.pb.gz: a pprof heap profile (heapbpf's, or another tool's
 * with Go's heap sample types), read as diff reads it (bounded by its decoded
 * size), as folded stacks or a flame graph page.
 */
static int report_pprof(const struct cli *o, char *err, size_t errlen)
{
	struct sink s = {
		.kind = SINK_FILE,
		.format = o->run.format,
		.sample_type = o->run.sample_type,
		.path = o->run.output,
	};
	char outbuf[256], path[HB_CLEAN_SIZE(PATH_MAX)];
	struct hb_profile *p = NULL;
	int rc;

	if (o->run.format == FMT_PPROF)
		return hb_fail(err, errlen, -EINVAL,
			       "%s is a pprof profile already: give -f folded or -f html to "
			       "convert it",
			       o->recording);
	if (o->from || o->to >= 0 || o->run.raw || o->run.leaks || o->run.at_peak ||
	    o->nbinary_dirs)
		return hb_fail(err, errlen, -EINVAL,
			       "%s is a pprof profile: --from, --to, --raw, --leaks, --at-peak "
			       "and --binary-path apply to recordings",
			       o->recording);
	rc = diff_load(o->recording, NULL, &p, err, errlen);
	/* sites named as the live run names them, the note on the page and here */
	rc = rc ?: wrappers_apply(p, (const char *const *)o->run.wrappers, o->run.nwrappers);
	if (rc) {
		hb_profile__free(p);
		return err[0] ? rc
			      : hb_fail(err, errlen, rc, "cannot read %s: %s", o->recording,
					strerror(-rc));
	}
	if (!wrappers_text(path, sizeof(path), p))
		hb_note("%s", path);
	if (!s.path) {
		sink_default_name(outbuf, sizeof(outbuf), "report", o->run.format);
		s.path = outbuf;
	}
	rc = sink_write(p, &s, err, errlen);
	if (!rc && strcmp(s.path, "-") != 0)
		hb_note("wrote %s", hb_clean(path, sizeof(path), s.path));
	hb_profile__free(p);
	return rc;
}

/* heapbpf report FILE: a core file (ET_CORE, or --core), a pprof profile or a recording. */
/* heapbpf report FILE: a recording or a core file, offline. */
int report_parse(struct cli *c, const struct cli_given *g, int n, char **operands)
{
	if (n < 1)
		return cli_bad("report needs a recording file");
	c->recording = operands[0];
	/* --jemalloc-layout: for a core file (main tells a recording) */
	if (g->pid || g->duration || c->run.record || c->run.reset || c->run.follow_forks ||
	    c->run.children)
		return cli_bad(
			"report reads a recording or a core file: --pid, --duration, --record, "
			"--follow-forks and --children do not apply");
	if (c->to >= 0 && c->to <= c->from)
		return cli_bad("--to must be after --from");
	return checks_no_operand(n - 1, operands + 1) ?: checks_refuse_live_heap(c) ?: checks_refuse_top_keys(g)
		       ?: checks_at_peak(c) ?: checks_refuse_fleet_options(c)
		       ?: checks_combinations(c, g->type, g->duration);
}

int report_command(const struct cli *o, struct run *r, char *err, size_t errlen)
{
	int is_core = o->core ? 1 : memsrc_core_is_core(o->recording);

	/* a recording's windows end at its own times */
	r->replay = true;

	if (is_core == 1)
		return core_report(o, r, err, errlen);
	if (is_gzip(o->recording))
		return report_pprof(o, err, errlen);
	if (o->exe || o->run.layout)
		return hb_fail(err, errlen, -EINVAL,
			       "%s is not a core file: --exe and --jemalloc-layout apply to core "
			       "files (heapbpf report --core)",
			       o->recording);
	return report_recording(o, r, err, errlen);
}
