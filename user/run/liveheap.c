// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "util/clock.h"
#include "util/errmsg.h"
#include "run/liveheap.h"
#include "profile/report.h"
#include "export/sink.h"
#include "profile/summary.h"
#include "symbols/symbolizer.h"
#include "util/version.h"
#include "profile/wrappers.h"

static const char *sampling_text(const struct heapwalk_stats *st)
{
	if (!st->active_known)
		return "whether jemalloc is sampling now is unknown";
	return st->prof_active ? "jemalloc is sampling now"
			       : "sampled during earlier windows; jemalloc is not sampling now";
}

/* What the profile is, as pprof comments (the window path's style). */
static int describe(struct hb_profile *p, const struct jemalloc_target *t,
		    const struct heapwalk_stats *st)
{
	char b[256];
	int rc;

	summary_bytes(b, sizeof(b), st->inuse_space);
	/* the first comment in the windows' form: the flame graph's title reads it */
	rc = hb_profile_add_comment(p, "heapbpf %s: pid %d (%s), jemalloc %s in %s",
				    HEAPBPF_VERSION, t->pid, t->comm, t->version, t->path);
	rc = rc
		     ?: hb_profile_add_comment(
				p,
				"heapbpf: live heap, read from jemalloc's own tables (bt2gctx), not "
				"sampled by heapbpf: %" PRIu64
				" sampled objects live (%s estimated) "
				"in %" PRIu64 " stacks; %s",
				st->curobjs, b, st->stacks, sampling_text(st));
	rc = rc
		     ?: hb_profile_add_comment(
				p, "heapbpf: %s",
				st->prof_accum
					? "alloc_* are everything jemalloc sampled since it "
					  "started (prof_accum:true)"
					: "alloc_* are zero: jemalloc keeps no allocated totals "
					  "without prof_accum:true");
	if (p->raw)
		rc = rc
			     ?: hb_profile_add_comment(p, "heapbpf: values are raw sampled counts "
							  "(prof.dump with prof_unbias:false)");
	else if (st->unbiased)
		rc = rc
			     ?: hb_profile_add_comment(
					p,
					"heapbpf: values are estimates, exact for a stack of one "
					"object size; jemalloc's own unbiased sums, rounded per size "
					"class, for the %" PRIu64 " stacks of several sizes",
					st->stacks_rounded);
	else
		rc = rc
			     ?: hb_profile_add_comment(
					p, "heapbpf: values are estimated from each stack's "
					   "mean object size (jemalloc 5.2.1 keeps raw counts "
					   "only), exact for a stack of one size");
	heapwalk_truncated_text(b, sizeof(b), st);
	if (!rc && b[0])
		rc = hb_profile_add_comment(p, "heapbpf: %s", b);
	return rc;
}

static void say(const struct jemalloc_target *t, const struct heapwalk_stats *st,
		const struct hb_profile *p, const char *where)
{
	struct hb_site top[5];
	size_t n = summary_top_sites(p, top, 5);
	char b[32], name[HB_CLEAN_SIZE(1024)];

	summary_bytes(b, sizeof(b), st->inuse_space);
	hb_note("live heap of pid %d (%s): %" PRIu64 " sampled objects, %s in use "
		"(estimated), %" PRIu64 " stacks; %s",
		t->pid, hb_clean(name, sizeof(name), t->comm), st->curobjs, b, st->stacks,
		sampling_text(st));
	heapwalk_truncated_text(name, sizeof(name), st);
	if (name[0])
		hb_warn("%s", name);
	if (n)
		hb_note("top sites by in-use bytes%s:", p->raw ? " (raw sampled)" : " (estimated)");
	summary_sites(p, top, n);
	if (where)
		hb_note("wrote %s", hb_clean(name, sizeof(name), where));
}

/* Symbolizes, describes and writes what the walk collected. */
static int write_profile(struct run *r, const struct jemalloc_target *t, struct collector *c,
			 const struct heapwalk_stats *st, char *err, size_t errlen)
{
	const struct run_opts *o = r->opts;
	struct report_opts ro = {
		.raw = o->raw,
		.time_nanos = hb_clock_ns(CLOCK_REALTIME),
		.pid = t->pid,
		.wrappers = o->wrappers,
		.nwrappers = o->nwrappers,
	};
	struct sink s = { .kind = SINK_FILE, .format = o->format, .sample_type = o->sample_type };
	struct symbolizer *sym = NULL;
	struct hb_profile *p = NULL;
	char outbuf[256], stem[32];
	int rc;

	s.path = o->output;
	if (!s.path) {
		snprintf(stem, sizeof(stem), "heapbpf-%d", t->pid);
		sink_default_name(outbuf, sizeof(outbuf), stem, o->format);
		s.path = outbuf;
	}
	rc = symbolizer__new(t->pid, &sym);
	if (rc)
		return hb_fail(err, errlen, rc, "cannot read the mappings of pid %d: %s", t->pid,
			       strerror(-rc));
	rc = report__build(c, sym, t, &ro, &p);
	rc = rc ?: describe(p, t, st);
	if (rc) {
		rc = hb_fail(err, errlen, rc, "cannot build the profile: %s", strerror(-rc));
	} else {
		rc = sink_write(p, &s, err, errlen);
		if (!rc)
			say(t, st, p, strcmp(s.path, "-") != 0 ? s.path : NULL);
	}
	hb_profile__free(p);
	symbolizer__free(sym);
	return rc;
}

int liveheap_run(struct run *r, char *err, size_t errlen)
{
	const struct run_opts *o = r->opts;
	struct jemalloc_target *t = NULL;
	struct collector *c = NULL;
	struct heapwalk_stats st = { 0 };
	char why[768];
	int rc;

	rc = jemalloc_target__find(o->pid, o->layout, &t, err, errlen);
	if (rc)
		return rc;
	rc = collector__new(1ull << t->lg_prof_sample, &c);
	if (rc) {
		jemalloc_target__free(t);
		return hb_fail(err, errlen, rc, "out of memory");
	}
	rc = heapwalk_live(t, c, &st, why, sizeof(why));
	if (rc)
		rc = hb_fail(err, errlen, rc, "cannot read the live heap of pid %d (%s): %s",
			     t->pid, t->comm, why);
	else if (!st.stacks && !(st.active_known && st.prof_active))
		rc = hb_fail(err, errlen, -ENODATA,
			     "jemalloc in pid %d (%s) is not sampling now and its tables hold no "
			     "sampled object; sample a window with heapbpf --pid %d",
			     t->pid, t->comm, t->pid);
	else if (st.stacks && st.empty == st.stacks)
		/* jemalloc's unwinder always takes the caller's frame */
		rc = hb_fail(err, errlen, -EPROTO,
			     "pid %d (%s): its jemalloc takes no backtraces: its tables hold "
			     "sampled objects under empty stacks only, so the process installed a "
			     "prof_backtrace hook of its own (experimental.hooks.prof_backtrace) "
			     "and its stacks come from that hook; heapbpf wrote no profile",
			     t->pid, t->comm);
	else
		rc = write_profile(r, t, c, &st, err, errlen);
	if (!rc && !st.stacks) {
		hb_say("pid %d: jemalloc is sampling but holds no sampled live object yet", t->pid);
		r->outcome |= RUN_NO_SAMPLES;
	}
	collector__free(c);
	jemalloc_target__free(t);
	return rc;
}
