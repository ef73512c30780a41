// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "errmsg.h"
#include "liveheap.h"
#include "report.h"
#include "sink.h"
#include "summary.h"
#include "symbolize.h"
#include "version.h"

int liveheap_syms(const struct jemalloc_target *t, struct heapwalk_syms *sy, char *err,
		  size_t errlen)
{
	memset(sy, 0, sizeof(*sy));
	/* a file-local static of prof_data.c (5.3) or prof.c (5.2.1): no namespace prefix */
	if (jemalloc_target__global(t, "bt2gctx", false, &sy->bt2gctx))
		return hb_fail(err, errlen, -ENOENT,
			       "jemalloc in pid %d (%s) has no bt2gctx in its symbol table, so its "
			       "profiling tables cannot be found; use the windowed mode "
			       "(heapbpf --pid %d)",
			       t->pid, t->path, t->pid);
	sy->lg_prof_sample = t->lg_prof_sample_addr;
	sy->active = t->active_addr;
	/* without it (never seen) the walk reports current counts only */
	if (jemalloc_target__global(t, "opt_prof_accum", true, &sy->opt_prof_accum))
		sy->opt_prof_accum = 0;
	return 0;
}

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
	char b[32];
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
	rc = rc
		     ?: hb_profile_add_comment(
				p, "heapbpf: %s",
				p->raw ? "values are raw sampled counts (prof.dump with prof_unbias:false)"
				: st->unbiased
					? "values are jemalloc's own unbiased estimates (per size class)"
					: "values are estimated from each stack's mean object size "
					  "(jemalloc 5.2.1 keeps raw counts only)");
	return rc;
}

static void say(const struct jemalloc_target *t, const struct heapwalk_stats *st,
		const struct hb_profile *p, const char *where)
{
	struct hb_site top[5];
	size_t n = summary_top_sites(p, top, 5);
	char b[32], a[32];

	summary_bytes(b, sizeof(b), st->inuse_space);
	fprintf(stderr,
		"heapbpf: live heap of pid %d (%s): %" PRIu64 " sampled objects, %s in use "
		"(estimated), %" PRIu64 " stacks; %s\n",
		t->pid, t->comm, st->curobjs, b, st->stacks, sampling_text(st));
	if (n)
		fprintf(stderr, "heapbpf: top sites by in-use bytes%s:\n",
			p->raw ? " (raw sampled)" : " (estimated)");
	for (size_t i = 0; i < n; i++) {
		summary_bytes(b, sizeof(b), (double)top[i].v[HB_INUSE_SPACE]);
		summary_bytes(a, sizeof(a), (double)top[i].v[HB_ALLOC_SPACE]);
		fprintf(stderr, "  %10s in use  %10s allocated  %s\n", b, a, top[i].function);
	}
	if (where)
		fprintf(stderr, "heapbpf: wrote %s\n", where);
}

/* Symbolizes, describes and writes what the walk collected. */
static int write_profile(struct run *r, const struct jemalloc_target *t, struct collector *c,
			 const struct heapwalk_stats *st, char *err, size_t errlen)
{
	const struct cli *o = r->opts;
	struct timespec now;
	struct report_opts ro = { .raw = o->raw, .pid = t->pid };
	struct sink s = { .kind = SINK_FILE, .format = o->format, .sample_type = o->sample_type };
	struct symbolizer *sym = NULL;
	struct hb_profile *p = NULL;
	char outbuf[256], stem[32];
	int rc;

	clock_gettime(CLOCK_REALTIME, &now);
	ro.time_nanos = (int64_t)now.tv_sec * 1000000000LL + now.tv_nsec;
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
		if (!rc && !o->quiet)
			say(t, st, p, strcmp(s.path, "-") != 0 ? s.path : NULL);
	}
	hb_profile__free(p);
	symbolizer__free(sym);
	return rc;
}

static int walk(const struct jemalloc_target *t, struct collector *c, struct heapwalk_stats *st,
		char *err, size_t errlen)
{
	struct heapwalk_syms sy;
	struct heapwalk_opts wo;
	struct mem_source m = { 0 };
	int rc;

	rc = liveheap_syms(t, &sy, err, errlen);
	rc = rc ?: memsrc_proc_open(t->pid, &m, err, errlen);
	if (rc)
		return rc;
	heapwalk_default_opts(&wo);
	rc = heapwalk_read(&m, t->layout, &sy, &wo, c, st, err, errlen);
	memsrc_proc_close(&m);
	return rc;
}

int liveheap_run(struct run *r, char *err, size_t errlen)
{
	const struct cli *o = r->opts;
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
	rc = walk(t, c, &st, why, sizeof(why));
	if (rc)
		rc = hb_fail(err, errlen, rc, "cannot read the live heap of pid %d (%s): %s",
			     t->pid, t->comm, why);
	else if (!st.stacks && !(st.active_known && st.prof_active))
		rc = hb_fail(err, errlen, -ENODATA,
			     "jemalloc in pid %d (%s) is not sampling now and its tables hold no "
			     "sampled object; sample a window with heapbpf --pid %d",
			     t->pid, t->comm, t->pid);
	else
		rc = write_profile(r, t, c, &st, err, errlen);
	if (!rc && !st.stacks) {
		fprintf(stderr,
			"heapbpf: pid %d: jemalloc is sampling but holds no sampled live "
			"object yet\n",
			t->pid);
		r->outcome |= RUN_NO_SAMPLES;
	}
	collector__free(c);
	jemalloc_target__free(t);
	return rc;
}
