// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/errmsg.h"
#include "collect/recording.h"
#include "collect/replay.h"
#include "jemalloc/target.h"

struct loader {
	struct replay *r;
	const struct replay_opts *o;
	struct proc_maps maps;
	char **build_ids;
	size_t cap_maps;
	uint64_t lg_prof_sample, start_mono_ns, attach_coarse_ns, stop_mono_ns;
	bool have_lg;
	bool feed;     /* a replay_feed's: the symbols are made at the first event */
	char why[160]; /* a record's value out of range, said instead of "malformed" */
};

/*
 * Range checks on what a recording says, so that no sum or difference of
 * its times overflows and no absurd figure is printed: monotonic times
 * (since boot) and durations below 2^60 ns (36 years), wall-clock times
 * below 2^62 ns (the year 2116). The sampling period 2^lg_prof_sample must
 * fit heapbpf's signed 64-bit byte figures: jemalloc takes 0 to 63, 63 is
 * refused.
 */
#define REPLAY_MONO_MAX ((uint64_t)1 << 60)
#define REPLAY_WALL_MAX ((uint64_t)1 << 62)
#define REPLAY_LG_MAX	HB_LG_SAMPLE_MAX

static int out_of_range(struct loader *l, const char *what, uint64_t v)
{
	snprintf(l->why, sizeof(l->why), "its %s, %llu, is out of range", what,
		 (unsigned long long)v);
	return -ERANGE;
}

/* A monotonic time or a duration, v, is checked; -ERANGE with l->why said when it is absurd. */
static int mono(struct loader *l, const char *what, uint64_t v)
{
	return v < REPLAY_MONO_MAX ? 0 : out_of_range(l, what, v);
}

static bool key_is(const char *k, size_t kl, const char *want)
{
	return kl == strlen(want) && memcmp(k, want, kl) == 0;
}

static uint64_t to_u64(const char *v, size_t vl)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%.*s", (int)(vl < 31 ? vl : 31), v);
	return strtoull(buf, NULL, 10);
}

static void copy_val(char *dst, size_t len, const char *v, size_t vl)
{
	snprintf(dst, len, "%.*s", (int)(vl < len ? vl : len - 1), v);
}

static int on_meta(struct loader *l, const struct rec_record *rec)
{
	struct replay *r = l->r;
	const char *k, *v;
	size_t kl, vl;

	if (recording_decode_meta(rec, &k, &kl, &v, &vl))
		return -EBADMSG;
	if (key_is(k, kl, "lg_prof_sample")) {
		l->lg_prof_sample = to_u64(v, vl);
		if (l->lg_prof_sample > REPLAY_LG_MAX) {
			snprintf(l->why, sizeof(l->why),
				 "its lg_prof_sample, %llu, is beyond the sampling periods heapbpf "
				 "can scale (2^0 to 2^%d bytes)",
				 (unsigned long long)l->lg_prof_sample, REPLAY_LG_MAX);
			return -ERANGE;
		}
		l->have_lg = true;
	} else if (key_is(k, kl, "start_mono_ns")) {
		l->start_mono_ns = to_u64(v, vl);
		return mono(l, "start time", l->start_mono_ns);
	} else if (key_is(k, kl, "start_wall_ns")) {
		uint64_t w = to_u64(v, vl);

		if (w >= REPLAY_WALL_MAX)
			return out_of_range(l, "wall-clock start time", w);
		r->start_wall_ns = (int64_t)w;
	} else if (key_is(k, kl, "stop_mono_ns")) {
		/* sampling switched off here: later frees do not reduce in-use (as live) */
		l->stop_mono_ns = to_u64(v, vl);
		if (mono(l, "stop time", l->stop_mono_ns))
			return -ERANGE;
		if (r->collector)
			collector__set_stop_time(r->collector, l->stop_mono_ns);
	} else if (key_is(k, kl, "attach_coarse_ns")) {
		l->attach_coarse_ns = to_u64(v, vl);
		return mono(l, "attach time", l->attach_coarse_ns);
	} else if (key_is(k, kl, "jemalloc_path")) {
		free(r->ident.path);
		r->ident.path = strndup(v, vl);
		if (!r->ident.path)
			return -ENOMEM;
	} else if (key_is(k, kl, "is_main_exe")) {
		r->ident.is_main_exe = vl == 1 && v[0] == '1';
	} else if (key_is(k, kl, "ns_prefix")) {
		copy_val(r->ident.ns_prefix, sizeof(r->ident.ns_prefix), v, vl);
	} else if (key_is(k, kl, "pub_prefix")) {
		copy_val(r->ident.pub_prefix, sizeof(r->ident.pub_prefix), v, vl);
	} else if (key_is(k, kl, "pid")) {
		copy_val(r->pid, sizeof(r->pid), v, vl);
	} else if (key_is(k, kl, "comm")) {
		copy_val(r->comm, sizeof(r->comm), v, vl);
	} else if (key_is(k, kl, "jemalloc_version")) {
		copy_val(r->version, sizeof(r->version), v, vl);
	} else if (key_is(k, kl, "alloc_drops")) {
		/* a served window's drops so far; its STOP record has the last word */
		r->counters.alloc_drops = to_u64(v, vl);
	} else if (key_is(k, kl, "free_drops")) {
		r->counters.free_drops = to_u64(v, vl);
	}
	/* unknown keys: written by a newer heapbpf, not needed here */
	return 0;
}

static int on_map(struct loader *l, const struct rec_record *rec)
{
	struct rec_map m;
	struct proc_map *pm;

	if (recording_decode_map(rec, &m))
		return -EBADMSG;
	/* bounded: a recording of one process has at most a few thousand */
	if (l->maps.n >= 1000000)
		return -E2BIG;
	if (l->maps.n == l->cap_maps) {
		size_t ncap = l->cap_maps ? l->cap_maps * 2 : 64;
		struct proc_map *nv = realloc(l->maps.v, ncap * sizeof(*nv));
		char **nb;

		if (!nv)
			return -ENOMEM;
		l->maps.v = nv;
		nb = realloc(l->build_ids, (ncap + 1) * sizeof(*nb));
		if (!nb)
			return -ENOMEM;
		l->build_ids = nb;
		l->cap_maps = ncap;
	}
	pm = &l->maps.v[l->maps.n];
	memset(pm, 0, sizeof(*pm));
	pm->start = m.start;
	pm->end = m.end;
	pm->offset = m.offset;
	memcpy(pm->perms, m.perms, 5);
	pm->path = m.path[0] ? strdup(m.path) : NULL;
	l->build_ids[l->maps.n] = strdup(m.build_id);
	if ((m.path[0] && !pm->path) || !l->build_ids[l->maps.n]) {
		free(pm->path);
		free(l->build_ids[l->maps.n]);
		return -ENOMEM;
	}
	l->maps.n++;
	l->r->maps++;
	return 0;
}

static int on_event(struct loader *l, const struct rec_record *rec)
{
	struct heapbpf_alloc_event ev; /* large enough for either kind */
	double rel;
	int err;

	if (recording_decode_event(rec, &ev, sizeof(ev)))
		return -EBADMSG;
	if (mono(l, "event time", ev.ts))
		return -ERANGE;
	if (!l->r->collector) {
		/* the sampling rate comes first in every recording heapbpf writes */
		if (!l->have_lg)
			return -EBADMSG;
		err = collector__new(1ULL << l->lg_prof_sample, &l->r->collector);
		if (err)
			return err;
		collector__set_attach_time(l->r->collector, l->attach_coarse_ns);
		if (l->o->temporary_ns)
			collector__set_temporary_threshold(l->r->collector, l->o->temporary_ns);
		if (l->stop_mono_ns)
			collector__set_stop_time(l->r->collector, l->stop_mono_ns);
	}
	/*
	 * The start instant is taken once every target's flag is on: what was
	 * sampled in between (ts a little before it) is the window's first
	 * moment, not outside it, as in the live run.
	 */
	rel = ev.ts > l->start_mono_ns ? ((double)ev.ts - (double)l->start_mono_ns) / 1e9 : 0;
	if (rel < l->o->from || (l->o->to >= 0 && rel >= l->o->to))
		return 0;
	l->r->events++;
	return collector__event(l->r->collector, &ev, sizeof(ev));
}

static int on_stop(struct loader *l, const struct rec_record *rec)
{
	struct rec_stop s;

	if (recording_decode_stop(rec, &s))
		return -EBADMSG;
	if (mono(l, "stop time", s.stop_mono_ns) || mono(l, "attach time", s.attach_coarse_ns) ||
	    mono(l, "duration", s.duration_ns))
		return -ERANGE;
	l->r->counters.alloc_hits = s.alloc_hits;
	l->r->counters.free_hits = s.free_hits;
	l->r->counters.alloc_drops = s.alloc_drops;
	l->r->counters.free_drops = s.free_drops;
	l->r->counters.read_faults = s.read_faults;
	l->r->duration_ns = (int64_t)s.duration_ns;
	l->r->stopped = true;
	l->r->reason = s.reason;
	if (l->r->collector)
		collector__set_stop_time(l->r->collector, s.stop_mono_ns);
	return 0;
}

void replay__free(struct replay *r)
{
	if (!r)
		return;
	collector__free(r->collector);
	symbolizer__free(r->symbolizer);
	free(r->ident.path);
	free(r);
}

/* What the records of path read into l left to make: symbols from its mappings; 0 or -errno. */
static int make_symbolizer(struct loader *l, const char *path, char *err, size_t errlen)
{
	int rc;

	if (l->o->no_symbols || l->r->symbolizer)
		return 0;
	if (!l->build_ids)
		l->build_ids = calloc(1, sizeof(*l->build_ids));
	if (!l->build_ids)
		return hb_fail(err, errlen, -ENOMEM, "out of memory");
	l->build_ids[l->maps.n] = NULL;
	rc = symbolizer__new_offline(&l->maps, (const char *const *)l->build_ids, l->o->dirs,
				     &l->r->symbolizer);
	if (rc)
		return hb_fail(err, errlen, rc, "%s: cannot set up symbolization: %s", path,
			       strerror(-rc));
	return 0;
}

/*
 * rd's records into l, to its end (0), to where its writer is (-EAGAIN, a
 * followed recording), or to an error said in err. A recording that ends
 * mid-record is used up to there, and said in l->r->note.
 */
static int read_records(struct loader *l, struct rec_reader *rd, const char *path, char *err,
			size_t errlen)
{
	struct rec_record rec;
	char rerr[256] = "";
	int rc;

	while ((rc = recording_reader__next(rd, &rec, rerr, sizeof(rerr))) == 1) {
		switch (rec.type) {
		case REC_META:
			rc = on_meta(l, &rec);
			break;
		case REC_MAP:
			rc = on_map(l, &rec);
			break;
		case REC_ALLOC:
		case REC_FREE:
			/* a followed recording's mappings all come before its first event */
			rc = l->feed ? make_symbolizer(l, path, err, errlen) : 0;
			if (rc)
				return rc;
			rc = on_event(l, &rec);
			break;
		case REC_STOP:
			rc = on_stop(l, &rec);
			break;
		}
		if (rc == -ERANGE)
			return hb_fail(err, errlen, rc,
				       "%s: %s (record at byte %llu of its records)", path, l->why,
				       (unsigned long long)rec.offset);
		if (rc)
			return hb_fail(err, errlen, rc == -ENOMEM ? -ENOMEM : -EBADMSG,
				       "%s: malformed %s record at byte %llu of its records", path,
				       rec.type == REC_MAP    ? "mapping"
				       : rec.type == REC_META ? "header"
				       : rec.type == REC_STOP ? "end"
							      : "event",
				       (unsigned long long)rec.offset);
	}
	if (rc == -ENODATA) {
		/* a killed run: what was flushed is valid, use it and say so */
		l->r->truncated = true;
		snprintf(l->r->note, sizeof(l->r->note), "%s", rerr);
		return 0;
	}
	if (rc == -EAGAIN)
		return rc;
	return rc ? hb_fail(err, errlen, rc, "%s: %s", path, rerr) : 0;
}

/* True once l has the header a report needs: the sampling rate and jemalloc's identity. */
static bool have_header(const struct loader *l)
{
	return l->have_lg && l->r->ident.path;
}

/* What the records read leave to make: the collector (even with no event), the duration. */
static int finish(struct loader *l, const char *path, char *err, size_t errlen)
{
	int rc;

	if (!have_header(l))
		return hb_fail(err, errlen, -EBADMSG,
			       "%s has no complete header (sampling rate, jemalloc)", path);
	if (!l->r->collector) {
		rc = collector__new(1ULL << l->lg_prof_sample, &l->r->collector);
		if (rc)
			return hb_fail(err, errlen, rc, "out of memory");
	}
	if (!l->r->stopped) {
		const struct collector_stats *st = collector__stats(l->r->collector);

		if (st->last_ts > l->start_mono_ns)
			l->r->duration_ns = (int64_t)(st->last_ts - l->start_mono_ns);
	}
	return make_symbolizer(l, path, err, errlen);
}

static void loader_free(struct loader *l)
{
	for (size_t i = 0; i < l->maps.n; i++) {
		free(l->maps.v[i].path);
		free(l->build_ids[i]);
	}
	free(l->maps.v);
	free(l->build_ids);
}

int replay__load(const char *path, const struct replay_opts *o, struct replay **out, char *err,
		 size_t errlen)
{
	struct loader l = { .o = o };
	struct rec_reader *rd = NULL;
	int rc;

	l.r = calloc(1, sizeof(*l.r));
	if (!l.r)
		return hb_fail(err, errlen, -ENOMEM, "out of memory");
	rc = recording_reader__open(path, &rd, err, errlen);
	rc = rc ?: read_records(&l, rd, path, err, errlen);
	rc = rc ?: finish(&l, path, err, errlen);
	recording_reader__free(rd);
	loader_free(&l);
	if (rc) {
		replay__free(l.r);
		return rc;
	}
	*out = l.r;
	return 0;
}

/* ---- a recording still being written ---- */

struct replay_feed {
	struct loader l;
	struct rec_reader *rd;
	char path[PATH_MAX];
};

int replay_feed__open(const char *path, const struct replay_opts *o, struct replay_feed **out,
		      char *err, size_t errlen)
{
	struct replay_feed *f = calloc(1, sizeof(*f));
	int rc;

	if (!f)
		return hb_fail(err, errlen, -ENOMEM, "out of memory");
	f->l = (struct loader){ .o = o, .feed = true };
	snprintf(f->path, sizeof(f->path), "%s", path);
	f->l.r = calloc(1, sizeof(*f->l.r));
	rc = f->l.r ? recording_reader__open(path, &f->rd, err, errlen)
		    : hb_fail(err, errlen, -ENOMEM, "out of memory");
	if (rc) {
		replay_feed__free(f);
		return rc;
	}
	recording_reader__follow(f->rd, true);
	*out = f;
	return 0;
}

int replay_feed__read(struct replay_feed *f, bool last, char *err, size_t errlen)
{
	int rc;

	recording_reader__follow(f->rd, !last);
	rc = read_records(&f->l, f->rd, f->path, err, errlen);
	if (rc == -EAGAIN)
		rc = 0;
	if (rc)
		return rc;
	if (last)
		return finish(&f->l, f->path, err, errlen);
	/* the header written: a collector (nothing sampled yet) and the symbols from then on */
	if (!f->l.r->collector && have_header(&f->l) && f->l.r->start_wall_ns)
		return finish(&f->l, f->path, err, errlen);
	return 0;
}

struct replay *replay_feed__replay(struct replay_feed *f)
{
	return f->l.r;
}

uint64_t replay_feed__file_offset(const struct replay_feed *f)
{
	return recording_reader__file_offset(f->rd);
}

void replay_feed__free(struct replay_feed *f)
{
	if (!f)
		return;
	recording_reader__free(f->rd);
	loader_free(&f->l);
	replay__free(f->l.r);
	free(f);
}
