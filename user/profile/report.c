// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <linux/types.h>

#include "symbols/demangle.h"
#include "util/hashmap.h"
#include "heapbpf.h"
#include "profile/report.h"
#include "profile/wrappers.h"

#define LOC_CACHE 1024

struct builder {
	const struct jemalloc_target *t;
	struct symbolizer *s;
	struct hb_profile *p;
	size_t cap_locs, cap_samples;
	bool *loc_is_je;
	struct hashmap loc_by_addr;
	/* the last location of each slot of addresses: stacks repeat their frames */
	struct {
		uint64_t addr;
		uint32_t idx1; /* location index + 1; 0: empty */
	} recent[LOC_CACHE];
	int32_t *map_by_obj; /* symbolizer object -> hb mapping index + 1 */
	struct hashmap sample_by_locs;
	double (*acc)[HB_NVALUES]; /* unrounded sums per sample */
	uint32_t **loc_of;	   /* per collector (target, procs): address id -> location */
	struct hb_analysis *an;	   /* or NULL */
};

size_t report_trim_count(const bool *is_jemalloc, size_t n)
{
	size_t i = 0;

	while (i < n && is_jemalloc[i])
		i++;
	return i;
}

static char *xstrdup(const char *s)
{
	return s ? strdup(s) : NULL;
}

static const char *base_name(const char *path)
{
	const char *b = strrchr(path, '/');

	return b ? b + 1 : path;
}

static int mapping_for(struct builder *b, int obj, uint32_t *out)
{
	const struct sym_object *so = symbolizer__object(b->s, obj);
	struct hb_mapping *m, *nv;

	*out = 0;
	if (!so)
		return 0;
	if (b->map_by_obj[obj]) {
		*out = b->map_by_obj[obj];
		return 0;
	}
	nv = realloc(b->p->mappings, (b->p->nmappings + 1) * sizeof(*nv));
	if (!nv)
		return -ENOMEM;
	b->p->mappings = nv;
	m = &nv[b->p->nmappings];
	memset(m, 0, sizeof(*m));
	m->start = so->start;
	m->limit = so->limit;
	m->file_offset = so->file_offset;
	m->path = xstrdup(so->path);
	m->build_id = xstrdup(so->build_id);
	if (!m->path || (so->build_id && !m->build_id)) {
		free(m->path);
		free(m->build_id);
		return -ENOMEM;
	}
	b->p->nmappings++;
	b->map_by_obj[obj] = b->p->nmappings;
	*out = b->p->nmappings;
	return 0;
}

static bool frame_is_jemalloc(struct builder *b, const struct sym_result *r)
{
	const struct sym_object *so = symbolizer__object(b->s, r->object);

	/* a shared libjemalloc: all of it is jemalloc */
	if (so && !b->t->is_main_exe && strcmp(so->path, b->t->path) == 0)
		return true;
	/*
	 * By the innermost inlined function, or by the function the code is in
	 * (a -O3 build, such as Redis's jemalloc, inlines prof_alloc_prep, named
	 * without namespace, into je_malloc_default)
	 */
	return r->nlines &&
	       ((r->lines[0].function &&
		 jemalloc_target__is_jemalloc_func(b->t, r->lines[0].function)) ||
		(r->lines[r->nlines - 1].function &&
		 jemalloc_target__is_jemalloc_func(b->t, r->lines[r->nlines - 1].function)));
}

/* A new location for a raw frame address: symbolized, in the map. */
static int location_new(struct builder *b, uint64_t addr, uint32_t *idx)
{
	uint64_t key = hashmap_hash_u64(addr);
	struct sym_result r;
	struct hb_location *l;
	char name[512];
	int err;

	if (b->p->nlocations == b->cap_locs) {
		size_t ncap = b->cap_locs ? b->cap_locs * 2 : 256;
		struct hb_location *nl = realloc(b->p->locations, ncap * sizeof(*nl));
		bool *nj;

		if (!nl)
			return -ENOMEM;
		b->p->locations = nl;
		nj = realloc(b->loc_is_je, ncap * sizeof(*nj));
		if (!nj)
			return -ENOMEM;
		b->loc_is_je = nj;
		b->cap_locs = ncap;
	}
	l = &b->p->locations[b->p->nlocations];
	memset(l, 0, sizeof(*l));
	l->address = addr;
	if (addr)
		symbolizer__lookup(b->s, addr, true, &r);
	else
		memset(&r, 0, sizeof(r)), r.object = -1;
	err = mapping_for(b, r.object, &l->mapping);
	if (err)
		return err;
	l->nlines = r.nlines ? r.nlines : 1;
	l->lines = calloc(l->nlines, sizeof(*l->lines));
	if (!l->lines)
		return -ENOMEM;
	if (!r.nlines) {
		const struct sym_object *so = symbolizer__object(b->s, r.object);

		/* unnamed: object+offset, so frames still group and can be resolved offline */
		if (!addr)
			snprintf(name, sizeof(name), "[no stack]");
		else if (so)
			snprintf(name, sizeof(name), "%s+0x%" PRIx64, base_name(so->path),
				 addr - so->start + so->file_offset);
		else
			snprintf(name, sizeof(name), "0x%" PRIx64, addr);
		l->lines[0].function = strdup(name);
		l->lines[0].system_name = l->lines[0].function;
		if (!l->lines[0].function)
			return -ENOMEM;
	}
	for (unsigned int i = 0; i < r.nlines; i++) {
		struct hb_line *hl = &l->lines[i];

		const char *raw = r.lines[i].function ? r.lines[i].function : "??";

		/* readable name for people, the raw one kept as pprof's system_name */
		hl->function = demangle_name(raw);
		hl->system_name = hl->function ? strdup(raw) : NULL;
		if (!hl->function)
			hl->function = strdup(raw);
		if (!hl->system_name)
			hl->system_name = hl->function;
		hl->file = xstrdup(r.lines[i].file);
		hl->line = r.lines[i].line;
		if (!hl->function || !hl->system_name || (r.lines[i].file && !hl->file))
			return -ENOMEM;
	}
	// NOLINTNEXTLINE(clang-analyzer-core.NullDereference): grown just above, with locations
	b->loc_is_je[b->p->nlocations] = addr && frame_is_jemalloc(b, &r);
	*idx = b->p->nlocations++;
	return hashmap__add(&b->loc_by_addr, key, *idx);
}

/* The location for a raw frame address, created on first sight. */
static int location_for(struct builder *b, uint64_t addr, uint32_t *idx)
{
	uint64_t key = hashmap_hash_u64(addr);
	size_t slot = key & (LOC_CACHE - 1);
	int err;

	if (b->recent[slot].idx1 && b->recent[slot].addr == addr) {
		*idx = b->recent[slot].idx1 - 1;
		return 0;
	}
	err = hashmap__get(&b->loc_by_addr, key, idx) ? location_new(b, addr, idx) : 0;
	if (!err) {
		b->recent[slot].addr = addr;
		b->recent[slot].idx1 = *idx + 1;
	}
	return err;
}

/* Adds one trimmed stack's values, merging with an identical stack; *idx: the sample. */
static int add_sample(struct builder *b, uint32_t *locs, uint32_t n, const double v[HB_NVALUES],
		      int64_t pid, uint32_t *idx_out)
{
	uint64_t h = hashmap_hash_bytes(locs, n * sizeof(*locs)) ^ hashmap_hash_u64(pid);
	struct hb_sample *smp;
	size_t it = 0;
	uint32_t idx;

	while (hashmap__next(&b->sample_by_locs, h, &it, &idx)) {
		smp = &b->p->samples[idx];
		if (smp->nlocs == n && smp->pid == pid &&
		    memcmp(smp->locs, locs, n * sizeof(*locs)) == 0) {
			for (int k = 0; k < HB_NVALUES; k++)
				b->acc[idx][k] += v[k];
			free(locs);
			*idx_out = idx;
			return 0;
		}
	}
	if (b->p->nsamples == b->cap_samples) {
		size_t ncap = b->cap_samples ? b->cap_samples * 2 : 256;
		struct hb_sample *ns = realloc(b->p->samples, ncap * sizeof(*ns));
		double(*na)[HB_NVALUES];

		if (!ns)
			goto nomem;
		b->p->samples = ns;
		na = realloc(b->acc, ncap * sizeof(*na));
		if (!na)
			goto nomem;
		b->acc = na;
		b->cap_samples = ncap;
	}
	idx = b->p->nsamples;
	smp = &b->p->samples[idx];
	memset(smp, 0, sizeof(*smp));
	smp->locs = locs;
	smp->nlocs = n;
	smp->pid = pid;
	memcpy(b->acc[idx], v, sizeof(b->acc[idx]));
	b->p->nsamples++;
	*idx_out = idx;
	return hashmap__add(&b->sample_by_locs, h, idx);
nomem:
	free(locs);
	return -ENOMEM;
}

/* The four values of a stack: now or at the peak, raw or unbiased. */
static void stack_values(const struct collector *c, size_t i, const struct report_opts *o,
			 double v[HB_NVALUES])
{
	const struct hb_stack *st = collector__stack(c, i);

	if (o->at_peak) {
		const struct hb_stack_peak *pk = collector__stack_peak(c, i);

		v[HB_ALLOC_OBJECTS] = 0;
		v[HB_ALLOC_SPACE] = 0;
		v[HB_INUSE_OBJECTS] = o->raw ? pk->samples : pk->objects;
		v[HB_INUSE_SPACE] = o->raw ? pk->bytes : pk->space;
	} else if (o->raw) {
		v[HB_ALLOC_OBJECTS] = st->samples;
		v[HB_ALLOC_SPACE] = st->bytes;
		v[HB_INUSE_OBJECTS] = st->inuse_samples;
		v[HB_INUSE_SPACE] = st->inuse_bytes;
	} else {
		v[HB_ALLOC_OBJECTS] = st->alloc_objects;
		v[HB_ALLOC_SPACE] = st->alloc_space;
		v[HB_INUSE_OBJECTS] = st->inuse_objects;
		v[HB_INUSE_SPACE] = st->inuse_space;
	}
}

/* Whether stack i of c is in this window's profile. */
static bool stack_in(const struct collector *c, size_t i, const struct report_opts *o)
{
	const struct hb_stack *st = collector__stack(c, i);

	/* nothing allocated in this window and nothing in use (after collector__reset_alloc) */
	return o->at_peak ? collector__stack_peak(c, i)->samples != 0
			  : st->samples || st->inuse_samples;
}

/*
 * The location of every frame address the window's stacks of c use, by
 * the collector's address id (*out, UINT32_MAX: unused): each address is
 * symbolized once, in the order the stacks first use it, before any
 * sample is built.
 */
static int locate_collector(struct builder *b, const struct collector *c,
			    const struct report_opts *o, uint32_t **out)
{
	size_t naddrs;
	const uint64_t *addrs = collector__addrs(c, &naddrs);
	uint32_t *loc = malloc((naddrs ? naddrs : 1) * sizeof(*loc));
	int err = 0;

	*out = loc;
	if (!loc)
		return -ENOMEM;
	memset(loc, 0xff, naddrs * sizeof(*loc));
	for (size_t i = 0; i < collector__nstacks(c); i++) {
		const struct hb_stack *st = collector__stack(c, i);

		if (!stack_in(c, i, o))
			continue;
		for (uint32_t k = 0; k < st->nframes; k++)
			loc[st->frames[k]] = 0;
	}
	/* ids are given in the order stacks first use their addresses */
	for (size_t id = 0; !err && id < naddrs; id++) {
		if (!loc[id])
			err = location_for(b, addrs[id], &loc[id]);
	}
	return err;
}

static int add_stack(struct builder *b, const struct collector *c, size_t i,
		     const struct report_opts *o, int64_t pid, const uint32_t *loc_of)
{
	const struct hb_stack *st = collector__stack(c, i);
	uint32_t n = st->nframes ? st->nframes : 1, *locs, skip, idx;
	bool is_je[HEAPBPF_MAX_FRAMES];
	double v[HB_NVALUES];
	int err;

	if (n > HEAPBPF_MAX_FRAMES)
		return -EINVAL;
	locs = calloc(n, sizeof(*locs));
	if (!locs)
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++) {
		/* every address was located before any sample (locate_collector) */
		if (st->nframes) {
			locs[i] = loc_of[st->frames[i]];
		} else {
			/* an empty stack: one location, for address 0 */
			err = location_for(b, 0, &locs[i]);
			if (err) {
				free(locs);
				return err;
			}
		}
		/* grown with the locations: the analyzer cannot see hashmap__get() finds none first */
		// NOLINTNEXTLINE(clang-analyzer-core.NullDereference)
		is_je[i] = b->loc_is_je[locs[i]];
	}
	skip = report_trim_count(is_je, n);
	if (skip == n) /* nothing but jemalloc: keep the outermost frame */
		skip = n - 1;
	memmove(locs, locs + skip, (n - skip) * sizeof(*locs));
	n -= skip;
	stack_values(c, i, o, v);
	err = add_sample(b, locs, n, v, pid, &idx);
	return err ?: b->an ? leaks_analysis__add(b->an, idx, c, i) : 0;
}

/* Every stack of one collector with something allocated or in use in this window. */
static int add_collector(struct builder *b, struct collector *c, const struct report_opts *o,
			 int64_t pid, const uint32_t *loc_of)
{
	for (size_t i = 0; i < collector__nstacks(c); i++) {
		int err;

		if (o->release_frames)
			collector__release_frames(c, i);
		if (!stack_in(c, i, o))
			continue;
		err = add_stack(b, c, i, o, pid, loc_of);
		if (err)
			return err;
	}
	if (o->release_frames)
		collector__release_frames(c, collector__nstacks(c));
	return 0;
}

int report__build(struct collector *c, struct symbolizer *s, const struct jemalloc_target *t,
		  const struct report_opts *opts, struct hb_profile **out)
{
	struct builder b = { .t = t, .s = s };
	int err;

	err = symbolizer__refresh(s);
	if (err)
		return err;
	b.p = calloc(1, sizeof(*b.p));
	b.map_by_obj = calloc(symbolizer__nobjects(s) + 1, sizeof(*b.map_by_obj));
	if (!b.p || !b.map_by_obj || (opts->analysis && leaks_analysis__new(&b.an))) {
		err = -ENOMEM;
		goto out;
	}
	/* the executable is pprof's first mapping, its "main binary" (title, File:) */
	if (symbolizer__main_object(s) >= 0) {
		uint32_t first;

		err = mapping_for(&b, symbolizer__main_object(s), &first);
		if (err)
			goto out;
	}
	b.p->period = collector__period(c);
	b.p->raw = opts->raw;
	b.p->time_nanos = opts->time_nanos;
	b.p->duration_nanos = opts->duration_nanos;
	/* every location first: with the last profile, the symbolizer's tables go before the samples */
	b.loc_of = calloc(opts->nprocs + 1, sizeof(*b.loc_of));
	if (!b.loc_of) {
		err = -ENOMEM;
		goto out;
	}
	err = locate_collector(&b, c, opts, &b.loc_of[0]);
	for (size_t i = 0; !err && i < opts->nprocs; i++)
		err = locate_collector(&b, opts->procs[i].c, opts, &b.loc_of[i + 1]);
	if (!err && opts->release_frames)
		symbolizer__release(s);
	err = err ?: add_collector(&b, c, opts, opts->nprocs ? opts->pid : 0, b.loc_of[0]);
	for (size_t i = 0; !err && i < opts->nprocs; i++)
		err = add_collector(&b, opts->procs[i].c, opts, opts->procs[i].pid,
				    b.loc_of[i + 1]);
	if (err)
		goto out;
	/* an object's flags are known only once all its frames were looked up */
	for (size_t i = 0; i < symbolizer__nobjects(s); i++) {
		const struct sym_object *so = symbolizer__object(s, i);
		struct hb_mapping *m;

		if (!b.map_by_obj[i])
			continue;
		m = &b.p->mappings[b.map_by_obj[i] - 1];
		m->has_functions = so->has_functions;
		m->has_filenames = so->has_filenames;
		m->has_line_numbers = so->has_line_numbers;
		m->has_inline_frames = so->has_inline_frames;
	}
	for (size_t i = 0; i < b.p->nsamples; i++) {
		for (int k = 0; k < HB_NVALUES; k++) {
			double v = b.acc[i][k];

			/* in-use can dip a hair below zero through float rounding */
			b.p->samples[i].v[k] = v > 0 ? llround(v) : 0;
		}
	}
	err = wrappers_apply(b.p, opts->wrappers, opts->nwrappers);
	if (!err && b.an)
		err = leaks_analysis__finish(b.an, b.p);
out:
	for (size_t i = 0; b.loc_of && i <= opts->nprocs; i++)
		free(b.loc_of[i]);
	free(b.loc_of);
	free(b.loc_is_je);
	free(b.map_by_obj);
	free(b.acc);
	hashmap__clear(&b.loc_by_addr);
	hashmap__clear(&b.sample_by_locs);
	if (err) {
		leaks_analysis__free(b.an);
		hb_profile__free(b.p);
		return err;
	}
	if (opts->analysis)
		*opts->analysis = b.an;
	*out = b.p;
	return 0;
}

/*
 * Allocated per second from the point before (the first point: 0); the
 * peak's point is not one end of an interval (a few microseconds after a
 * checkpoint would make any allocation a huge rate): it takes the rate of
 * the interval it lies in.
 */
static void timeline_rates(struct hb_profile *p, const struct collector_totals *const *pts,
			   size_t peak_at)
{
	const struct collector_totals *prev = NULL;

	for (size_t i = 0; i < p->ntimeline; i++) {
		const struct collector_totals *pt = pts[i];

		if (i == peak_at)
			continue;
		p->timeline[i].alloc_rate = prev && pt->ts > prev->ts
						    ? (pt->alloc_space - prev->alloc_space) /
							      ((double)(pt->ts - prev->ts) / 1e9)
						    : 0;
		prev = pt;
	}
	if (peak_at + 1 < p->ntimeline)
		p->timeline[peak_at].alloc_rate = p->timeline[peak_at + 1].alloc_rate;
	else if (peak_at < p->ntimeline && peak_at)
		p->timeline[peak_at].alloc_rate = p->timeline[peak_at - 1].alloc_rate;
}

int report_timeline(struct hb_profile *p, const struct collector_totals *ck, size_t n,
		    const struct collector_totals *now, const struct collector_totals *peak,
		    int64_t (*wall)(uint64_t ts, const void *arg), const void *arg)
{
	size_t total = n + (n && now->ts > ck[n - 1].ts) + (n && peak->ts), at = 0, k = 0;
	const struct collector_totals **pts;

	free(p->timeline);
	p->timeline = NULL;
	p->ntimeline = 0;
	if (!total)
		return 0;
	p->timeline = calloc(total, sizeof(*p->timeline));
	pts = calloc(total, sizeof(*pts));
	if (!p->timeline || !pts) {
		free(pts);
		return -ENOMEM;
	}
	/* the peak goes after the checkpoints at or before it: the state after its event */
	while (at < n && ck[at].ts <= peak->ts)
		at++;
	if (!peak->ts)
		at = total;
	for (size_t i = 0; i < total; i++) {
		pts[i] = i == at ? peak : k < n ? &ck[k++] : now;
		p->timeline[i].time_nanos = wall(pts[i]->ts, arg);
		p->timeline[i].inuse_space = pts[i]->inuse_space;
	}
	p->ntimeline = total;
	timeline_rates(p, pts, at);
	free(pts);
	if (peak->ts) {
		p->peak_time_nanos = wall(peak->ts, arg);
		p->peak_inuse_space = peak->inuse_space;
	}
	return 0;
}
