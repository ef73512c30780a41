// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "errmsg.h"
#include "pyro_labels.h"
#include "report.h"
#include "sink.h"
#include "snapshot.h"
#include "summary.h"
#include "window.h"

/* The last window of --interval is written only when it is at least this long. */
#define MIN_LAST_WINDOW_NS 100000000LL

void run_no_samples(struct target_run *tr)
{
	fprintf(stderr,
		"heapbpf: pid %d: no allocation was sampled: the process allocated less than "
		"jemalloc's sampling interval, or sampling did not start\n",
		tr->pid);
	tr->outcome |= RUN_NO_SAMPLES;
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
		t.truncated += c->truncated;
		t.malformed += c->malformed;
	}
	return t;
}

/* What the profile is of, and what was lost, as pprof comments. */
static int describe(struct hb_profile *p, const struct target_run *tr, const struct heap_data *d)
{
	const struct collector_stats all = total_stats(d), *st = &all;
	const struct heapbpf_counters *bc = d->counters;
	int err;

	err = hb_profile_add_comment(p, "heapbpf %s: %s", HEAPBPF_VERSION, tr->source);
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

/* --output-dir: one file per format, named after the window's start. */
static int write_snapshot(const struct target_run *tr, const struct hb_profile *p, char *where,
			  size_t wlen, char *err, size_t errlen)
{
	const struct cli *o = tr->run->opts;
	char stamp[SNAPSHOT_STAMP_LEN + 1], name[NAME_MAX + 1], path[PATH_MAX];
	int rc;

	snapshot_stamp(tr->run->start + (time_t)(tr->k * o->interval), stamp);
	for (enum out_format f = 0; f < FMT_COUNT; f++) {
		struct sink s = {
			.kind = SINK_FILE,
			.format = f,
			.sample_type = o->sample_type,
			.zstd = o->zstd,
			.path = path,
		};

		if (!(o->formats & (1u << f)))
			continue;
		rc = snapshot_name(name, sizeof(name), stamp, tr->pid, tr->t->comm,
				   sink_extension(f, o->zstd));
		if (rc ||
		    snprintf(path, sizeof(path), "%s/%s", o->output_dir, name) >= (int)sizeof(path))
			return hb_fail(err, errlen, -ENAMETOOLONG,
				       "cannot name a snapshot in %s: the name is too long",
				       o->output_dir);
		rc = sink_write(p, &s, err, errlen);
		if (rc)
			return rc;
		/* the first format written is the one the summary names */
		if (!where[0])
			snprintf(where, wlen, "%s", path);
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

	if (pyro_profile_name(&tr->run->naming, tr->pid, tr->t->comm, name, sizeof(name)))
		return hb_fail(err, errlen, -ENAMETOOLONG, "cannot name the profile for Pyroscope");
	return sink_write(p, &s, err, errlen);
}

/* Every destination of the run; where: the file the summary names. */
static int write_outputs(const struct target_run *tr, const struct hb_profile *p, int64_t end_ns,
			 char *where, size_t wlen, char *err, size_t errlen)
{
	const struct cli *o = tr->run->opts;
	int rc = 0;

	if (o->output_dir) {
		rc = write_snapshot(tr, p, where, wlen, err, errlen);
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
	const struct cli *o = tr->run->opts;

	return o->output_dir || tr->output || tr->run->pyro;
}

static void say_window(const struct target_run *tr, const struct heap_data *d,
		       const struct hb_profile *p, int64_t end_ns, const char *where)
{
	const struct cli *o = tr->run->opts;
	const struct collector_stats all = total_stats(d), *st = &all;

	if (o->quiet)
		return;
	if (!o->interval) {
		summary_print(stderr, p, st, d->counters, where[0] ? where : NULL);
		return;
	}
	fprintf(stderr, "heapbpf: pid %d (%s): window %u (%.0f s): %" PRIu64 " samples%s%s%s\n",
		tr->pid, tr->t->comm, tr->k + 1, (end_ns - tr->start_ns) / 1e9,
		st->allocs - tr->prev.allocs, where[0] ? ", wrote " : "", where,
		tr->run->pyro ? ", spooled for Pyroscope" : "");
}

int window_emit(struct target_run *tr, const struct heap_data *d, int64_t end_ns, char *err,
		size_t errlen)
{
	const struct cli *o = tr->run->opts;
	const struct collector_stats all = total_stats(d), *st = &all;
	struct report_opts ro = {
		.raw = o->raw,
		.time_nanos = tr->start_ns,
		.duration_nanos = end_ns - tr->start_ns,
		.pid = tr->pid,
		.procs = d->procs,
		.nprocs = d->nprocs,
	};
	uint64_t drops = drops_of(d->counters) - drops_of(&tr->prev_bc);
	struct hb_profile *prof = NULL;
	char where[PATH_MAX + 64] = "";
	int rc = 0;

	if (has_destination(tr)) {
		rc = report__build(d->collector, d->symbolizer, tr->t, &ro, &prof);
		rc = rc ?: describe(prof, tr, d);
		if (rc) {
			hb_profile__free(prof);
			return hb_fail(err, errlen, rc, "cannot build the profile: %s",
				       strerror(-rc));
		}
		rc = write_outputs(tr, prof, end_ns, where, sizeof(where), err, errlen);
		if (!rc)
			say_window(tr, d, prof, end_ns, where);
		hb_profile__free(prof);
		if (rc)
			return rc;
	}
	if (st->allocs > tr->prev.allocs)
		tr->any_samples = true;
	if (drops) {
		/* a single window's summary says it already */
		if (o->interval)
			fprintf(stderr,
				"heapbpf: pid %d: %" PRIu64 " events were dropped in this window "
				"(ring buffer full); raise --ringbuf-size\n",
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

int window_last(struct target_run *tr, const struct heap_data *d, int64_t end_ns, char *err,
		size_t errlen)
{
	const struct heapbpf_counters *bc = d->counters;
	int rc = 0;

	/* an --interval run stopped right after a window: nothing worth a file */
	if (!tr->k || end_ns - tr->start_ns >= MIN_LAST_WINDOW_NS)
		rc = window_emit(tr, d, end_ns, err, errlen);
	if (rc)
		return rc;
	/* the BPF side's own count of traps: one per sampled allocation, one per sampled free */
	if (tr->run->opts->verbose)
		fprintf(stderr,
			"heapbpf: uprobe hits: %llu on the allocation path, %llu on the free path; "
			"%llu samples and %llu frees dropped; %llu read faults\n",
			(unsigned long long)bc->alloc_hits, (unsigned long long)bc->free_hits,
			(unsigned long long)bc->alloc_drops, (unsigned long long)bc->free_drops,
			(unsigned long long)bc->read_faults);
	if (!tr->any_samples)
		run_no_samples(tr);
	return 0;
}
