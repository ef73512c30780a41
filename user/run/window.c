// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/clock.h"
#include "util/errmsg.h"
#include "util/version.h"
#include "profile/flamegraph.h"
#include "profile/folded.h"
#include "collect/leaks.h"
#include "symbols/proc.h"
#include "collect/procsum.h"
#include "export/pyro_labels.h"
#include "profile/report.h"
#include "export/sink.h"
#include "export/snapshot.h"
#include "profile/summary.h"
#include "heap/held.h"
#include "heap/rssmap.h"
#include "targets/targets.h"
#include "run/rssout.h"
#include "run/window.h"

/* The last window of --interval is written only when it is at least this long. */
#define MIN_LAST_WINDOW_NS 100000000LL

/* The most children the hint below looks at, and the most it names. */
#define HINT_CHILDREN 64
#define HINT_NAMED    4

/*
 * A process that samples nothing may only manage the ones that allocate
 * (Varnish's manager and its cache-main child, named by --pidfile): its
 * descendants running now whose jemalloc heapbpf can profile are named,
 * with the option that profiles them too.
 */
static void hint_children(const struct target_run *tr)
{
	pid_t kids[HINT_CHILDREN];
	uint64_t starts[HINT_CHILDREN];
	char list[HINT_NAMED * 16 + 8] = "";
	size_t n = 0, named = 0;

	if (targets_descendants(tr->pid, kids, starts, HINT_CHILDREN, &n) <= 0)
		return;
	for (size_t i = 0; i < n; i++) {
		struct jemalloc_target *t = NULL;
		char why[1024];
		size_t len = strlen(list);

		if (jemalloc_target__find(kids[i], tr->run->opts->layout, &t, why, sizeof(why)))
			continue;
		jemalloc_target__free(t);
		/* the same process as the scan's: its pid was not taken by another since */
		if (proc_start_time(kids[i]) != starts[i])
			continue;
		if (named++ < HINT_NAMED)
			snprintf(list + len, sizeof(list) - len, "%s%d", len ? ", " : "", kids[i]);
	}
	if (named)
		hb_say("pid %d has children (%s%s); --children profiles them too", tr->pid, list,
		       named > HINT_NAMED ? ", ..." : "");
}

void run_no_samples(struct target_run *tr)
{
	const struct run_opts *o = tr->run->opts;

	hb_say("pid %d: no allocation was sampled: the process allocated less than "
	       "jemalloc's sampling interval, or sampling did not start",
	       tr->pid);
	tr->outcome |= RUN_NO_SAMPLES;
	if (tr->run->hint_children && !o->children)
		hint_children(tr);
}

static uint64_t drops_of(const struct heapbpf_counters *bc)
{
	return bc->alloc_drops + bc->free_drops;
}

/* The counts of every process of the window (the target, and the children it follows). */
static struct collector_stats total_stats(const struct heap_data *d)
{
	struct collector_stats t = *collector__stats(d->collector);

	for (size_t i = 0; i < d->nprocs; i++) {
		const struct collector_stats *c = collector__stats(d->procs[i].c);

		t.allocs += c->allocs;
		t.frees += c->frees;
		t.alloc_bytes += c->alloc_bytes;
		t.frees_matched += c->frees_matched;
		t.frees_unmatched += c->frees_unmatched;
		t.frees_unmatched_bytes += c->frees_unmatched_bytes;
		t.frees_after_stop += c->frees_after_stop;
		t.read_faults += c->read_faults;
		t.alloc_faults += c->alloc_faults;
		t.truncated += c->truncated;
		t.malformed += c->malformed;
		t.bad_frames += c->bad_frames;
	}
	return t;
}

/*
 * The counts of this window alone: a window's profile holds what was
 * allocated since the last one (the collectors' allocations are reset at
 * each), and its figures say the same, not the run's so far beside it.
 */
static struct collector_stats window_stats(const struct target_run *tr, const struct heap_data *d)
{
	struct collector_stats w = total_stats(d);

	w.allocs -= tr->prev.allocs;
	w.frees -= tr->prev.frees;
	w.alloc_bytes -= tr->prev.alloc_bytes;
	w.frees_matched -= tr->prev.frees_matched;
	w.frees_unmatched -= tr->prev.frees_unmatched;
	w.frees_unmatched_bytes -= tr->prev.frees_unmatched_bytes;
	return w;
}

/* What the profile is of, and what was lost, as pprof comments. */
static int describe(struct hb_profile *p, const struct target_run *tr, const struct heap_data *d)
{
	const struct collector_stats all = window_stats(tr, d), *st = &all;
	const struct heapbpf_counters *bc = d->counters;
	int err;

	err = hb_profile_add_comment(p, "heapbpf %s: %s", HEAPBPF_VERSION, tr->source);
	if (!err && p->inuse_since_nanos) {
		char since[64], from[64];

		summary_utc(since, sizeof(since), p->inuse_since_nanos);
		summary_utc(from, sizeof(from), p->time_nanos);
		err = hb_profile_add_comment(
			p,
			"heapbpf: scope: alloc_* are what was allocated in this window, from %s for "
			"%.1f s; inuse_* what is in use of all sampled since sampling started at %s",
			from, p->duration_nanos / 1e9, since);
	}
	if (!err && tr->trigger)
		err = hb_profile_add_comment(p, "heapbpf: trigger: %s%s%s", tr->trigger,
					     tr->trigger_note[0] ? ": " : "", tr->trigger_note);
	err = err
		      ?: hb_profile_add_comment(p,
						"heapbpf: %" PRIu64 " samples, %" PRIu64
						" frees of them, %" PRIu64
						" frees of objects sampled before attach",
						st->allocs, st->frees_matched, st->frees_unmatched);
	if (!err && tr->forks.forked)
		err = hb_profile_add_comment(
			p,
			"heapbpf: %zu process(es) forked from pid %d while "
			"sampling was on: prof_active restored in %zu, %zu had "
			"exited or exec'ed, %zu could not be restored",
			tr->forks.forked, tr->pid, tr->forks.restored, tr->forks.gone,
			tr->forks.failed);
	if (!err && drops_of(bc))
		err = hb_profile_add_comment(p,
					     "heapbpf: WARNING: %" PRIu64 " samples and %" PRIu64
					     " frees were dropped (ring buffer full); totals are "
					     "too low",
					     (uint64_t)bc->alloc_drops, (uint64_t)bc->free_drops);
	return err;
}

/* How long ago tr's RSS breakdown was measured, in ns: now, as its profile is written. */
static int64_t rss_age_ns(const struct target_run *tr)
{
	int64_t age = hb_clock_ns(CLOCK_MONOTONIC) - tr->rss_mono_ns;

	return age > 0 ? age : 0;
}

/*
 * heapbpf watch and agent: the target's last RSS breakdown, as the comment
 * and held_space (what each stack holds, heap/held.h).
 */
static int add_rss(struct hb_profile *p, const struct target_run *tr)
{
	char parts[1024], rss[32];
	int err;

	if (!tr->rss)
		return 0;
	/* --raw's counts are one per sample: no share of free bytes is added to them */
	err = tr->run->opts->raw ? 0 : held_attach(p, &tr->rss->je);
	rssout_line(tr->rss, parts, sizeof(parts));
	summary_bytes(rss, sizeof(rss), (double)tr->rss->mem.rss);
	return err
		       ?: hb_profile_add_comment(
				  p,
				  "heapbpf: RSS measured %.1f s before this profile: %s = %s; "
				  "held_space is in use plus each stack's share of the free regions "
				  "in its size class's slabs (an estimate, docs/rss.md)",
				  (double)rss_age_ns(tr) / 1e9, rss, parts);
}

/* A trigger's breakdown beside its profile: heapbpf rss's JSON, its stacks the profile's. */
struct rss_body {
	const struct target_run *tr;
	const struct hb_profile *p;
};

static int write_rss_body(FILE *f, void *arg)
{
	const struct rss_body *b = arg;
	const struct hb_profile *p = b->p;
	double *held = calloc(p->nsamples + 1, sizeof(*held));
	size_t *order = calloc(p->nsamples + 1, sizeof(*order));
	struct rssout_stacks st = { .p = p, .held = held, .order = order };
	int rc = -ENOMEM;

	if (held && order) {
		for (size_t i = 0; i < p->nsamples; i++)
			held[i] = (double)p->held[i];
		held_order(held, p->nsamples, order);
		rc = rssout_json(f, b->tr->t, b->tr->rss, &st, (double)rss_age_ns(b->tr) / 1e6);
	}
	free(held);
	free(order);
	return rc;
}

struct snapshot_body {
	const struct hb_profile *p;
	const struct sink *s;
	const uint8_t *buf; /* encoded already, or NULL: text written as it is made */
	size_t len;
};

static int write_body(FILE *f, void *arg)
{
	const struct snapshot_body *b = arg;

	if (b->buf) {
		errno = 0;
		if (b->len && fwrite(b->buf, 1, b->len, f) != b->len)
			return errno ? -errno : -EIO;
		return 0;
	}
	/* a profile of 100k stacks is tens of MiB of text, which a buffer would hold twice */
	if (b->s->format == FMT_HTML)
		return flamegraph_write(b->p, b->s->sample_type, f);
	return folded_write(b->p, b->s->sample_type, f);
}

/*
 * --output-dir: one file per format, named after the window's start, each a
 * new file (snapshot_write()): a name a file holds already (two profiles of
 * one second) takes the next number, the same for every format of the
 * profile where it can.
 */
static int write_snapshot(struct target_run *tr, const struct hb_profile *p, int64_t end_ns,
			  char *where, size_t wlen, char *err, size_t errlen)
{
	const struct run_opts *o = tr->run->opts;
	char stamp[SNAPSHOT_STAMP_LEN + 1], who[64];
	struct snapshot_file sf = {
		.dir = o->output_dir, .stamp = stamp, .who = who, .pid = tr->pid, .seq = 1
	};
	time_t when;
	int rc;

	/*
	 * a watch's profile: when and why it was written; an agent's window: its
	 * own start (each process's windows count from when it joined); a
	 * window: the run's, which every target of the run shares
	 */
	if (tr->trigger)
		when = (time_t)(end_ns / 1000000000LL);
	else if (tr->run->own_windows)
		when = (time_t)(tr->start_ns / 1000000000LL);
	else
		when = tr->run->start + (time_t)(tr->k * o->interval);
	snapshot_stamp(when, stamp);
	/* after this target's last of that second, never in a gap retention left */
	if (tr->named_seq && tr->named_s == when)
		sf.seq = tr->named_seq + 1;
	if (tr->trigger)
		snprintf(who, sizeof(who), "%s-%s", tr->t->comm, tr->trigger);
	else
		snprintf(who, sizeof(who), "%s", tr->t->comm);
	for (enum out_format f = 0; f < FMT_COUNT; f++) {
		const struct sink s = {
			.kind = SINK_FILE,
			.format = f,
			.sample_type = o->sample_type,
			.zstd = o->zstd,
		};
		struct snapshot_body b = { .p = p, .s = &s };
		uint8_t *buf = NULL;
		const char *name;

		if (!(o->formats & (1u << f)))
			continue;
		sf.ext = sink_extension(f, o->zstd);
		/* what sink_write() encodes first: pprof, zstd-compressed folded text */
		if (f == FMT_PPROF || (f == FMT_FOLDED && o->zstd)) {
			rc = sink_encode(p, &s, &buf, &b.len);
			if (rc)
				return hb_fail(err, errlen, rc,
					       "cannot encode the profile for %s: %s",
					       o->output_dir, strerror(-rc));
			b.buf = buf;
		}
		rc = snapshot_write(&sf, write_body, &b, err, errlen);
		free(buf);
		if (rc)
			return rc;
		/* every file, for the summary: the first by its path, the others by name */
		name = strrchr(sf.path, '/') + 1;
		if (!where[0])
			snprintf(where, wlen, "%s", sf.path);
		else if (strlen(where) + strlen(name) + 6 < wlen)
			snprintf(where + strlen(where), wlen - strlen(where), ", %s", name);
		tr->named_s = when;
		tr->named_seq = sf.seq;
	}
	/* a trigger's: where the RSS was, beside it, under the same name and number */
	if (tr->trigger && tr->rss && p->held) {
		struct rss_body rb = { tr, p };

		sf.ext = "rss.json";
		rc = snapshot_write(&sf, write_rss_body, &rb, err, errlen);
		if (!rc && strlen(where) + strlen(sf.path) + 6 < wlen)
			snprintf(where + strlen(where), wlen - strlen(where), ", %s",
				 strrchr(sf.path, '/') + 1);
		if (rc)
			return rc;
	}
	return 0;
}

static int write_spool(const struct target_run *tr, const struct hb_profile *p, int64_t end_ns,
		       char *err, size_t errlen)
{
	char name[2048];
	struct sink s = {
		.kind = SINK_SPOOL,
		.format = FMT_PPROF,
		.pyro = tr->run->pyro,
		.name = name,
		/* whole seconds that cover the window */
		.from_s = tr->start_ns / 1000000000LL,
		.until_s = (end_ns + 999999999LL) / 1000000000LL,
	};

	struct pyro_naming nm = tr->naming ? *tr->naming : tr->run->naming;
	const char *labels[PYRO_MAX_LABELS];
	char kv[64];

	/* heapbpf watch: trigger=oom beside the run's own labels */
	if (tr->trigger && nm.nlabels >= 0 && nm.nlabels < PYRO_MAX_LABELS) {
		for (int i = 0; i < nm.nlabels; i++)
			labels[i] = nm.labels[i];
		snprintf(kv, sizeof(kv), "trigger=%s", tr->trigger);
		labels[nm.nlabels++] = kv;
		nm.labels = labels;
	}
	if (pyro_labels_profile_name(&nm, tr->pid, tr->t->comm, name, sizeof(name)))
		return hb_fail(err, errlen, -ENAMETOOLONG, "cannot name the profile for Pyroscope");
	return sink_write(p, &s, err, errlen);
}

/* Every destination of the run; where: the file the summary names. */
static int write_outputs(struct target_run *tr, const struct hb_profile *p, int64_t end_ns,
			 char *where, size_t wlen, char *err, size_t errlen)
{
	const struct run_opts *o = tr->run->opts;
	int rc = 0;

	if (o->output_dir) {
		rc = write_snapshot(tr, p, end_ns, where, wlen, err, errlen);
	} else if (tr->output) {
		struct sink s = {
			.kind = SINK_FILE,
			.format = o->format,
			.sample_type = o->sample_type,
			.zstd = o->zstd,
			.path = tr->output,
		};

		rc = sink_write(p, &s, err, errlen);
		if (!rc && strcmp(tr->output, "-") != 0)
			snprintf(where, wlen, "%s", tr->output);
	}
	if (!rc && tr->run->pyro)
		rc = write_spool(tr, p, end_ns, err, errlen);
	return rc;
}

static bool has_destination(const struct target_run *tr)
{
	const struct run_opts *o = tr->run->opts;

	return o->output_dir || tr->output || tr->run->pyro;
}

/*
 * Lifetimes and trends go into pprof's sample labels and the --leaks text:
 * folded and html carry neither, and skip the analysis (a table and labels
 * per sample: tens of MiB at 100k stacks).
 */
static bool wants_analysis(const struct target_run *tr)
{
	const struct run_opts *o = tr->run->opts;

	if (o->leaks || tr->run->pyro)
		return true;
	if (o->output_dir)
		return o->formats & (1u << FMT_PPROF);
	return tr->output && o->format == FMT_PPROF;
}

/*
 * The wall-clock time of a CLOCK_MONOTONIC event time: end_ns is when
 * sampling was switched off (live and report alike), else, in a report of a
 * recording cut short, its last event, else (an --interval window) now.
 */
static int64_t wall_of(const struct target_run *tr, const struct collector *c, int64_t end_ns,
		       uint64_t ts)
{
	uint64_t anchor = collector__stop_time(c);

	if (!anchor && tr->run->replay)
		anchor = collector__stats(c)->last_ts;
	else if (!anchor)
		anchor = (uint64_t)hb_clock_ns(CLOCK_MONOTONIC);
	/* a recording's times are range-checked (replay.c): saturated, a stray one stays defined */
	if (end_ns < 0)
		end_ns = 0;
	if (ts > anchor)
		return ts - anchor < (uint64_t)(INT64_MAX - end_ns)
			       ? end_ns + (int64_t)(ts - anchor)
			       : INT64_MAX;
	return anchor - ts < (uint64_t)end_ns ? end_ns - (int64_t)(anchor - ts) : 0;
}

struct wall_arg {
	const struct target_run *tr;
	const struct collector *c;
	int64_t end_ns;
};

static int64_t wall_at(uint64_t ts, const void *arg)
{
	const struct wall_arg *w = arg;

	return wall_of(w->tr, w->c, w->end_ns, ts);
}

/*
 * In use and allocation rate at the checkpoints and now, and the peak, on
 * the profile: of the target's collector, or with --follow-forks of the sum
 * over the target and its children (every process's events on one clock).
 */
static int add_timeline(struct hb_profile *p, const struct target_run *tr,
			const struct heap_data *d, int64_t end_ns)
{
	const struct collector *c = d->collector;
	const struct wall_arg w = { tr, c, end_ns };
	const struct collector_checkpoint *ck;
	struct collector_totals *pts;
	size_t n;
	int rc;

	if (d->sum) {
		const struct collector_totals *sum = procsum__checkpoints(d->sum, &n);

		return report_timeline(p, sum, n, procsum__totals(d->sum), procsum__peak(d->sum),
				       wall_at, &w);
	}
	ck = collector__checkpoints(c, &n);
	pts = calloc(n ? n : 1, sizeof(*pts));
	if (!pts)
		return -ENOMEM;
	for (size_t k = 0; k < n; k++)
		pts[k] = (struct collector_totals){ .ts = ck[k].ts,
						    .inuse_space = ck[k].inuse_space,
						    .alloc_space = ck[k].alloc_space };
	rc = report_timeline(p, pts, n, collector__totals(c), collector__peak(c), wall_at, &w);
	free(pts);
	return rc;
}

/* --at-peak: every stack's in-use at the target's peak, in the run's format. */
static int write_at_peak(const struct target_run *tr, const struct heap_data *d,
			 const struct report_opts *ro, const struct hb_profile *whole, char *err,
			 size_t errlen)
{
	const struct run_opts *o = tr->run->opts;
	struct report_opts po = *ro;
	struct sink s = {
		.kind = SINK_FILE,
		.format = o->format,
		.sample_type = o->sample_type,
		.path = o->at_peak,
	};
	struct hb_profile *p = NULL;
	char text[160];
	int rc;

	po.at_peak = true;
	po.analysis = NULL;
	rc = report__build(d->collector, d->symbolizer, tr->t, &po, &p);
	rc = rc ?: describe(p, tr, d);
	if (!rc && summary_peak_text(text, sizeof(text), whole))
		rc = hb_profile_add_comment(p, "heapbpf: nothing was ever in use: no peak");
	else if (!rc && d->sum)
		/* the summary's peak is the processes' together; the stacks are each at its own */
		rc = hb_profile_add_comment(p,
					    "heapbpf: each process's in use at its own peak; the "
					    "processes together: %s",
					    text);
	else if (!rc)
		rc = hb_profile_add_comment(p, "heapbpf: in use at the %s", text);
	if (rc) {
		hb_profile__free(p);
		return hb_fail(err, errlen, rc, "cannot build the profile at the peak: %s",
			       strerror(-rc));
	}
	p->peak_time_nanos = whole->peak_time_nanos;
	p->peak_inuse_space = whole->peak_inuse_space;
	rc = sink_write(p, &s, err, errlen);
	hb_profile__free(p);
	return rc;
}

static void say_window(const struct target_run *tr, const struct heap_data *d,
		       const struct hb_profile *p, const struct hb_analysis *an, int64_t end_ns,
		       const char *where)
{
	const struct run_opts *o = tr->run->opts;
	const struct collector_stats all = window_stats(tr, d), *st = &all;
	char comm[HB_CLEAN_SIZE(sizeof(tr->t->comm))], path[HB_CLEAN_SIZE(PATH_MAX + 1024)];
	char who[sizeof(comm) + 32] = "";

	/*
	 * The summary's writers take a stream and print whole tables: -q,
	 * which silences them all (--leaks's too), is decided here, not by hb_note.
	 */
	if (o->quiet)
		return;
	hb_clean(comm, sizeof(comm), tr->t->comm);
	if (tr->run->name_targets)
		snprintf(who, sizeof(who), "pid %d (%s): ", tr->pid, comm);
	if (!o->interval) {
		summary_print(stderr, p, st, d->counters, where[0] ? where : NULL, who);
		summary_timeline(stderr, p, o->at_peak, who);
		if (o->leaks && an)
			summary_leaks(stderr, p, an, who);
		return;
	}
	hb_note("pid %d (%s): window %u (%.0f s): %" PRIu64 " samples%s%s%s", tr->pid, comm,
		tr->k + 1, (end_ns - tr->start_ns) / 1e9, st->allocs, where[0] ? ", wrote " : "",
		hb_clean(path, sizeof(path), where),
		tr->run->pyro ? ", spooled for Pyroscope" : "");
	if (o->leaks && an)
		summary_leaks(stderr, p, an, who);
}

/*
 * Most samples could not read jemalloc's memory (their backtraces and what
 * they carry are not the target's: a layout that does not fit its
 * jemalloc): no profile that would look like data is written, and the run
 * fails with -EBADMSG (the agent lets such a target go). Counted over the
 * whole run, every process of it.
 */
static int mostly_unread(const struct target_run *tr, const struct collector_stats *st, char *err,
			 size_t errlen)
{
	char comm[HB_CLEAN_SIZE(sizeof(tr->t->comm))];

	if (!st->alloc_faults || st->alloc_faults * 2 <= st->allocs)
		return 0;
	return hb_fail(err, errlen, -EBADMSG,
		       "pid %d (%s): %" PRIu64 " of its %" PRIu64 " samples could not read "
		       "jemalloc's memory, so heapbpf wrote no profile: the layout it reads "
		       "jemalloc with does not fit this process's",
		       tr->pid, hb_clean(comm, sizeof(comm), tr->t->comm), st->alloc_faults,
		       st->allocs);
}

/* The window's profiles; last: no other window follows (the collectors' frames go as read). */
static int emit(struct target_run *tr, const struct heap_data *d, int64_t end_ns, bool last,
		char *err, size_t errlen)
{
	const struct run_opts *o = tr->run->opts;
	const struct collector_stats all = total_stats(d), *st = &all;
	struct report_opts ro = {
		.raw = o->raw,
		.time_nanos = tr->start_ns,
		.duration_nanos = end_ns - tr->start_ns,
		.pid = tr->pid,
		.procs = d->procs,
		.nprocs = d->nprocs,
		/* --at-peak builds another profile from the same frames */
		.release_frames = last && !o->at_peak,
		.wrappers = o->wrappers,
		.nwrappers = o->nwrappers,
	};
	uint64_t drops = drops_of(d->counters) - drops_of(&tr->prev_bc);
	struct hb_profile *prof = NULL;
	struct hb_analysis *an = NULL;
	char where[PATH_MAX + 1024] = "";
	int rc = 0;

	if (!tr->attach_ns)
		tr->attach_ns = tr->start_ns;
	rc = mostly_unread(tr, st, err, errlen);
	if (rc)
		return rc;
	if (has_destination(tr) || o->leaks || o->at_peak) {
		if (wants_analysis(tr))
			ro.analysis = &an;
		rc = report__build(d->collector, d->symbolizer, tr->t, &ro, &prof);
		/* a later window's: allocated in it, in use since sampling started */
		if (!rc && tr->attach_ns < tr->start_ns)
			prof->inuse_since_nanos = tr->attach_ns;
		rc = rc ?: describe(prof, tr, d);
		rc = rc ?: add_rss(prof, tr);
		rc = rc ?: add_timeline(prof, tr, d, end_ns);
		if (rc) {
			hb_profile__free(prof);
			leaks_analysis__free(an);
			return hb_fail(err, errlen, rc, "cannot build the profile: %s",
				       strerror(-rc));
		}
		rc = write_outputs(tr, prof, end_ns, where, sizeof(where), err, errlen);
		if (!rc && o->at_peak)
			rc = write_at_peak(tr, d, &ro, prof, err, errlen);
		if (!rc)
			say_window(tr, d, prof, an, end_ns, where);
		hb_profile__free(prof);
		leaks_analysis__free(an);
		if (rc)
			return rc;
	}
	if (st->allocs > tr->prev.allocs)
		tr->any_samples = true;
	if (st->bad_frames > tr->prev.bad_frames) {
		/* said even with -q: the profile lacks them, as it lacks drops */
		hb_warn("pid %d: %" PRIu64 " samples had a backtrace frame in the null page "
			"(not jemalloc's backtrace: other memory, read by the kernel side); "
			"left out of the profile",
			tr->pid, st->bad_frames - tr->prev.bad_frames);
		tr->outcome |= RUN_DROPS;
	}
	if (drops) {
		/* a single window's summary says it already */
		if (o->interval)
			hb_say("pid %d: %" PRIu64 " events were dropped in this window "
			       "(ring buffer full); raise --ringbuf-size",
			       tr->pid, drops);
		tr->outcome |= RUN_DROPS;
	}
	tr->k++;
	tr->prev = *st;
	tr->prev_bc = *d->counters;
	tr->start_ns = end_ns;
	/* the next window's allocations start from zero; what is in use carries over */
	collector__reset_alloc(d->collector);
	for (size_t i = 0; i < d->nprocs; i++)
		collector__reset_alloc(d->procs[i].c);
	return 0;
}

int window_emit(struct target_run *tr, const struct heap_data *d, int64_t end_ns, char *err,
		size_t errlen)
{
	return emit(tr, d, end_ns, false, err, errlen);
}

int window_last(struct target_run *tr, const struct heap_data *d, int64_t end_ns, char *err,
		size_t errlen)
{
	const struct heapbpf_counters *bc = d->counters;
	int rc = 0;

	/* no event comes any more: what only events need goes before the last profile is built */
	collector__end(d->collector);
	for (size_t i = 0; i < d->nprocs; i++)
		collector__end(d->procs[i].c);
	/*
	 * an --interval run stopped right after a window: nothing worth a file;
	 * but a trigger's profile (watch, agent: exit, stop) is the in-use state
	 * at that instant, which the docs promise however soon it comes
	 */
	if (!tr->k || tr->trigger || end_ns - tr->start_ns >= MIN_LAST_WINDOW_NS)
		rc = emit(tr, d, end_ns, true, err, errlen);
	if (rc)
		return rc;
	/* the BPF side's own count of traps: one per sampled allocation, one per sampled free */
	if (tr->run->opts->verbose)
		hb_say("uprobe hits: %llu on the allocation path, %llu on the free path; "
		       "%llu samples and %llu frees dropped; %llu read faults",
		       (unsigned long long)bc->alloc_hits, (unsigned long long)bc->free_hits,
		       (unsigned long long)bc->alloc_drops, (unsigned long long)bc->free_drops,
		       (unsigned long long)bc->read_faults);
	if (!tr->any_samples)
		run_no_samples(tr);
	return 0;
}
