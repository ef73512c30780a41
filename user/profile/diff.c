// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

#include "profile/diff.h"
#include "profile/wrappers.h"
#include "util/errmsg.h"
#include "util/files.h"
#include "util/hashmap.h"
#include "profile/pprof.h"
#include "collect/replay.h"
#include "profile/report.h"
#include "profile/summary.h"
#include "util/version.h"

/* ---- loading ---- */

/* At most max + 1 bytes of path: *len > max tells a larger file. */
static int read_file(const char *path, size_t max, uint8_t **buf, size_t *len)
{
	int fd = files_open_regular_ro(path);
	FILE *f = fd < 0 ? NULL : fdopen(fd, "r");
	size_t cap = 1 << 16, n = 0;
	uint8_t *b = NULL;

	if (!f) {
		int e = fd < 0 ? fd : -errno;

		if (fd >= 0)
			close(fd);
		return e;
	}
	for (;;) {
		uint8_t *nb = n == 0 || n == cap ? realloc(b, cap *= 2) : b;
		size_t r;

		if (!nb) {
			free(b);
			fclose(f);
			return -ENOMEM;
		}
		b = nb;
		r = fread(b + n, 1, (cap > max + 1 ? max + 1 : cap) - n, f);
		n += r;
		if (r == 0 || n > max)
			break;
	}
	if (ferror(f)) {
		free(b);
		fclose(f);
		return -EIO;
	}
	fclose(f);
	*buf = b;
	*len = n;
	return 0;
}

static char *dup_str(const Perftools__Profiles__Profile *pp, int64_t i)
{
	return strdup(i > 0 && (size_t)i < pp->n_string_table ? pp->string_table[i] : "");
}

/* pprof's location and function ids are arbitrary: index them by id. */
static int index_ids(const Perftools__Profiles__Profile *pp, struct hashmap *locs,
		     struct hashmap *funcs)
{
	int err = 0;

	for (size_t i = 0; !err && i < pp->n_location; i++)
		err = hashmap__put(locs, hashmap_hash_u64(pp->location[i]->id), i);
	for (size_t i = 0; !err && i < pp->n_function; i++)
		err = hashmap__put(funcs, hashmap_hash_u64(pp->function[i]->id), i);
	return err;
}

static const Perftools__Profiles__Function *function_of(const Perftools__Profiles__Profile *pp,
							const struct hashmap *funcs, uint64_t id)
{
	uint32_t i;

	return hashmap__get(funcs, hashmap_hash_u64(id), &i) ? NULL : pp->function[i];
}

static int convert_location(const Perftools__Profiles__Profile *pp, const struct hashmap *funcs,
			    const Perftools__Profiles__Location *pl, struct hb_location *l)
{
	l->address = pl->address;
	l->nlines = pl->n_line ? pl->n_line : 1;
	l->lines = calloc(l->nlines, sizeof(*l->lines));
	if (!l->lines)
		return -ENOMEM;
	for (uint32_t j = 0; j < l->nlines; j++) {
		const Perftools__Profiles__Function *f =
			j < pl->n_line ? function_of(pp, funcs, pl->line[j]->function_id) : NULL;
		char addr[32];

		snprintf(addr, sizeof(addr), "0x%llx", (unsigned long long)pl->address);
		l->lines[j].function = f ? dup_str(pp, f->name) : strdup(addr);
		l->lines[j].file = f && f->filename ? dup_str(pp, f->filename) : NULL;
		l->lines[j].line = j < pl->n_line ? pl->line[j]->line : 0;
		if (!l->lines[j].function || (f && f->filename && !l->lines[j].file))
			return -ENOMEM;
	}
	return 0;
}

/* Which of pp's values holds each of heapbpf's four; -1 where pp has none. */
static int value_columns(const Perftools__Profiles__Profile *pp, int col[HB_NVALUES])
{
	int found = 0;

	for (int k = 0; k < HB_NVALUES; k++) {
		col[k] = -1;
		for (size_t i = 0; i < pp->n_sample_type; i++) {
			int64_t t = pp->sample_type[i]->type;

			if (t > 0 && (size_t)t < pp->n_string_table &&
			    strcmp(pp->string_table[t], hb_value_names[k]) == 0) {
				col[k] = (int)i;
				found++;
			}
		}
	}
	return found ? 0 : -ENOMSG;
}

static int64_t pid_label(const Perftools__Profiles__Profile *pp,
			 const Perftools__Profiles__Sample *s)
{
	for (size_t i = 0; i < s->n_label; i++) {
		int64_t k = s->label[i]->key;

		if (k > 0 && (size_t)k < pp->n_string_table && !strcmp(pp->string_table[k], "pid"))
			return s->label[i]->num;
	}
	return 0;
}

static int convert_sample(const Perftools__Profiles__Profile *pp,
			  const Perftools__Profiles__Sample *ps, const struct hashmap *by_id,
			  const int col[HB_NVALUES], struct hb_sample *s)
{
	s->locs = calloc(ps->n_location_id ? ps->n_location_id : 1, sizeof(*s->locs));
	if (!s->locs)
		return -ENOMEM;
	for (size_t j = 0; j < ps->n_location_id; j++) {
		if (hashmap__get(by_id, hashmap_hash_u64(ps->location_id[j]), &s->locs[j]))
			return -EBADMSG;
	}
	s->nlocs = ps->n_location_id;
	for (int k = 0; k < HB_NVALUES; k++)
		s->v[k] = col[k] >= 0 && (size_t)col[k] < ps->n_value ? ps->value[col[k]] : 0;
	s->pid = pid_label(pp, ps);
	return 0;
}

static size_t str_cost(const Perftools__Profiles__Profile *pp, int64_t i)
{
	return 32 + (i > 0 && (size_t)i < pp->n_string_table ? strlen(pp->string_table[i]) : 0);
}

/*
 * What pp costs converted and then diffed, counted before anything is
 * allocated, and refused (-E2BIG) past DIFF_MEM_MAX: a few bytes of pprof
 * can name a long function on every line of a location, or a location of
 * many lines in every frame of every sample, and each is copied.
 */
static int check_cost(const Perftools__Profiles__Profile *pp, const struct hashmap *by_id,
		      const struct hashmap *funcs)
{
	size_t total =
		pp->n_location * sizeof(struct hb_location) +
		pp->n_sample * (2 * sizeof(struct hb_sample) + sizeof(struct diff_stack) + 64);

	for (size_t i = 0; i < pp->n_location && total <= DIFF_MEM_MAX; i++) {
		const Perftools__Profiles__Location *pl = pp->location[i];

		total += (pl->n_line ? pl->n_line : 1) * (sizeof(struct hb_line) + 32);
		for (size_t j = 0; j < pl->n_line && total <= DIFF_MEM_MAX; j++) {
			const Perftools__Profiles__Function *f =
				function_of(pp, funcs, pl->line[j]->function_id);

			if (f)
				total += str_cost(pp, f->name) + str_cost(pp, f->filename);
		}
	}
	for (size_t i = 0; i < pp->n_sample && total <= DIFF_MEM_MAX; i++) {
		const Perftools__Profiles__Sample *ps = pp->sample[i];

		for (size_t j = 0; j < ps->n_location_id && total <= DIFF_MEM_MAX; j++) {
			const Perftools__Profiles__Location *pl;
			uint32_t k;

			if (hashmap__get(by_id, hashmap_hash_u64(ps->location_id[j]), &k))
				return -EBADMSG;
			pl = pp->location[k];
			/* the location's index, then each line as a frame of the diff, twice */
			total += sizeof(uint32_t) +
				 3 * sizeof(uint32_t) * (pl->n_line ? pl->n_line : 1);
		}
	}
	return total > DIFF_MEM_MAX ? -E2BIG : 0;
}

/* The magnitude of v, INT64_MIN included. */
static uint64_t magnitude(int64_t v)
{
	return v < 0 ? -(uint64_t)v : (uint64_t)v;
}

/*
 * Each value's total magnitude must stay within DIFF_VALUE_MAX, so that
 * nothing diff adds up, subtracts or negates can overflow.
 */
static int check_values(const struct hb_profile *p)
{
	for (int k = 0; k < HB_NVALUES; k++) {
		uint64_t sum = 0;

		for (size_t i = 0; i < p->nsamples; i++) {
			sum += magnitude(p->samples[i].v[k]);
			if (magnitude(p->samples[i].v[k]) > DIFF_VALUE_MAX || sum > DIFF_VALUE_MAX)
				return -ERANGE;
		}
	}
	return 0;
}

static int from_pprof(const Perftools__Profiles__Profile *pp, struct hb_profile **out)
{
	struct hb_profile *p = calloc(1, sizeof(*p));
	struct hashmap by_id = {}, funcs = {};
	int col[HB_NVALUES], err;

	if (!p)
		return -ENOMEM;
	err = value_columns(pp, col);
	err = err ?: index_ids(pp, &by_id, &funcs);
	err = err ?: check_cost(pp, &by_id, &funcs);
	if (!err) {
		p->locations = calloc(pp->n_location ? pp->n_location : 1, sizeof(*p->locations));
		p->samples = calloc(pp->n_sample ? pp->n_sample : 1, sizeof(*p->samples));
		err = p->locations && p->samples ? 0 : -ENOMEM;
	}
	for (size_t i = 0; !err && i < pp->n_location; i++, p->nlocations++)
		err = convert_location(pp, &funcs, pp->location[i], &p->locations[i]);
	for (size_t i = 0; !err && i < pp->n_sample; i++, p->nsamples++)
		err = convert_sample(pp, pp->sample[i], &by_id, col, &p->samples[i]);
	/* what the profile says it is of: heapbpf's name the flame graph page's title */
	for (size_t i = 0; !err && i < pp->n_comment; i++) {
		if (pp->comment[i] > 0 && (size_t)pp->comment[i] < pp->n_string_table)
			err = hb_profile_add_comment(p, "%s", pp->string_table[pp->comment[i]]);
	}
	p->period = pp->period;
	/* a time before 1970 or a negative duration: unknown */
	p->time_nanos = pp->time_nanos > 0 ? pp->time_nanos : 0;
	p->duration_nanos = pp->duration_nanos > 0 ? pp->duration_nanos : 0;
	hashmap__clear(&by_id);
	hashmap__clear(&funcs);
	if (err) {
		hb_profile__free(p);
		return err;
	}
	*out = p;
	return 0;
}

static int load_recording(const char *path, const char *const *dirs, struct hb_profile **out,
			  char *err, size_t errlen)
{
	struct replay_opts ro = { .to = -1, .dirs = dirs };
	struct report_opts rep = {};
	struct replay *r;
	int rc;

	rc = replay__load(path, &ro, &r, err, errlen);
	if (rc)
		return rc;
	rep.time_nanos = r->start_wall_ns;
	rep.duration_nanos = r->duration_ns;
	rc = report__build(r->collector, r->symbolizer, &r->ident, &rep, out);
	replay__free(r);
	return rc ? hb_fail(err, errlen, rc, "cannot build the profile of %s: %s", path,
			    strerror(-rc))
		  : 0;
}

static int load_file(const char *path, const char *const *binary_dirs, struct hb_profile **out,
		     char *err, size_t errlen)
{
	Perftools__Profiles__Profile *pp = NULL;
	uint8_t *buf = NULL;
	size_t len = 0;
	int rc;

	rc = read_file(path, PPROF_DECODE_MAX, &buf, &len);
	if (rc)
		return hb_fail(err, errlen, rc, "cannot read %s: %s", path,
			       files_open_regular_strerror(rc));
	if (len >= 8 && memcmp(buf, "HBPFREC\n", 8) == 0) {
		free(buf);
		return load_recording(path, binary_dirs, out, err, errlen);
	}
	rc = len > PPROF_DECODE_MAX ? -EFBIG : pprof_decode(buf, len, &pp);
	free(buf);
	if (rc == -EFBIG || rc == -E2BIG)
		return hb_fail(err, errlen, rc,
			       "%s is too large to read: decompressed and decoded, it would take "
			       "more than %zu MiB",
			       path, PPROF_MEM_MAX >> 20);
	if (rc == -ENOMEM)
		return hb_fail(err, errlen, rc, "out of memory reading %s", path);
	if (rc)
		return hb_fail(err, errlen, rc,
			       "%s is neither a gzip-compressed pprof profile nor a heapbpf "
			       "recording",
			       path);
	rc = from_pprof(pp, out);
	perftools__profiles__profile__free_unpacked(pp, NULL);
	if (rc == -ENOMSG)
		return hb_fail(err, errlen, rc,
			       "%s is not a heap profile: it has none of the sample types "
			       "alloc_objects, alloc_space, inuse_objects, inuse_space",
			       path);
	if (rc == -E2BIG)
		return hb_fail(
			err, errlen, rc,
			"%s is too large to compare: its stacks would take more than %zu MiB", path,
			(size_t)DIFF_MEM_MAX >> 20);
	return rc ? hb_fail(err, errlen, rc, "cannot read the profile %s: %s", path, strerror(-rc))
		  : 0;
}

int diff_load(const char *path, const char *const *binary_dirs, struct hb_profile **out, char *err,
	      size_t errlen)
{
	int rc = load_file(path, binary_dirs, out, err, errlen);

	if (rc)
		return rc;
	if (*out && check_values(*out)) {
		hb_profile__free(*out);
		*out = NULL;
		return hb_fail(err, errlen, -ERANGE,
			       "%s holds absurd values: a sample type adds up to more than 2^61",
			       path);
	}
	return 0;
}

/* ---- diffing ---- */

struct builder {
	struct diff *d;
	struct hashmap frame_by_name; /* hash of function and file -> locations[] */
	struct hashmap stack_by_frames;
	size_t cap_locs, cap_stacks;
};

/* The diff profile's location for (function, file): addresses do not match across builds. */
static int intern_frame(struct builder *b, const struct hb_line *ln, uint32_t *idx)
{
	struct hb_profile *p = b->d->p;
	const char *file = ln->file ? ln->file : "";
	uint64_t h = hashmap_hash_str(ln->function) ^ hashmap_hash_u64(hashmap_hash_str(file));
	struct hb_location *l;
	size_t it = 0;

	while (hashmap__next(&b->frame_by_name, h, &it, idx)) {
		const struct hb_line *o = &p->locations[*idx].lines[0];

		if (!strcmp(o->function, ln->function) && !strcmp(o->file ? o->file : "", file))
			return 0;
	}
	if (p->nlocations == b->cap_locs) {
		size_t cap = b->cap_locs ? b->cap_locs * 2 : 256;

		l = realloc(p->locations, cap * sizeof(*l));
		if (!l)
			return -ENOMEM;
		p->locations = l;
		b->cap_locs = cap;
	}
	l = &p->locations[p->nlocations];
	memset(l, 0, sizeof(*l));
	l->lines = calloc(1, sizeof(*l->lines));
	if (!l->lines)
		return -ENOMEM;
	l->nlines = 1;
	p->nlocations++;
	l->lines[0].function = strdup(ln->function);
	l->lines[0].file = ln->file ? strdup(ln->file) : NULL;
	if (!l->lines[0].function || (ln->file && !l->lines[0].file))
		return -ENOMEM;
	*idx = p->nlocations - 1;
	return hashmap__add(&b->frame_by_name, h, *idx);
}

/* A sample's frames as diff locations: every line of every location, inlined ones too. */
static int frames_of(struct builder *b, const struct hb_profile *src, const struct hb_sample *s,
		     uint32_t **locs, uint32_t *n)
{
	size_t total = 0;
	int err = 0;

	for (uint32_t i = 0; i < s->nlocs; i++)
		total += src->locations[s->locs[i]].nlines;
	*locs = calloc(total ? total : 1, sizeof(**locs));
	if (!*locs)
		return -ENOMEM;
	*n = 0;
	for (uint32_t i = 0; !err && i < s->nlocs; i++) {
		const struct hb_location *l = &src->locations[s->locs[i]];

		for (uint32_t j = 0; !err && j < l->nlines; j++)
			err = intern_frame(b, &l->lines[j], &(*locs)[(*n)++]);
	}
	return err;
}

static int stack_for(struct builder *b, uint32_t *locs, uint32_t n, int64_t pid,
		     struct diff_stack **out)
{
	struct diff *d = b->d;
	uint64_t h = hashmap_hash_bytes(locs, n * sizeof(*locs)) ^ hashmap_hash_u64(pid);
	struct diff_stack *st;
	size_t it = 0;
	uint32_t idx;

	while (hashmap__next(&b->stack_by_frames, h, &it, &idx)) {
		st = &d->stacks[idx];
		if (st->nlocs == n && st->pid == pid &&
		    !memcmp(st->locs, locs, n * sizeof(*locs))) {
			free(locs);
			*out = st;
			return 0;
		}
	}
	if (d->nstacks == b->cap_stacks) {
		size_t cap = b->cap_stacks ? b->cap_stacks * 2 : 256;

		st = realloc(d->stacks, cap * sizeof(*st));
		if (!st) {
			free(locs);
			return -ENOMEM;
		}
		d->stacks = st;
		b->cap_stacks = cap;
	}
	st = &d->stacks[d->nstacks];
	memset(st, 0, sizeof(*st));
	st->locs = locs;
	st->nlocs = n;
	st->pid = pid;
	*out = st;
	return hashmap__add(&b->stack_by_frames, h, d->nstacks++);
}

static int add_side(struct builder *b, const struct hb_profile *src, bool is_new)
{
	for (size_t i = 0; i < src->nsamples; i++) {
		const struct hb_sample *s = &src->samples[i];
		struct diff_stack *st;
		uint32_t *locs = NULL, n = 0;
		int err = frames_of(b, src, s, &locs, &n);

		if (err) {
			free(locs);
			return err;
		}
		err = stack_for(b, locs, n, s->pid, &st);
		if (err)
			return err;
		for (int k = 0; k < HB_NVALUES; k++) {
			(is_new ? st->new : st->base)[k] += s->v[k];
			(is_new ? b->d->new_total : b->d->base_total)[k] += s->v[k];
		}
	}
	return 0;
}

static bool any(const int64_t v[HB_NVALUES])
{
	for (int k = 0; k < HB_NVALUES; k++) {
		if (v[k])
			return true;
	}
	return false;
}

/* NEW's samples as they are, BASE's negated and marked as the base (pprof's -diff_base). */
static int emit_samples(struct diff *d)
{
	struct hb_profile *p = d->p;

	p->samples = calloc(2 * d->nstacks + 1, sizeof(*p->samples));
	if (!p->samples)
		return -ENOMEM;
	for (size_t i = 0; i < d->nstacks; i++) {
		const struct diff_stack *st = &d->stacks[i];

		for (int side = 0; side < 2; side++) {
			const int64_t *v = side ? st->base : st->new;
			struct hb_sample *s = &p->samples[p->nsamples];

			if (!any(v))
				continue;
			s->locs = malloc((st->nlocs ? st->nlocs : 1) * sizeof(*s->locs));
			if (!s->locs)
				return -ENOMEM;
			memcpy(s->locs, st->locs, st->nlocs * sizeof(*s->locs));
			s->nlocs = st->nlocs;
			s->pid = st->pid;
			s->diff_base = side;
			for (int k = 0; k < HB_NVALUES; k++)
				s->v[k] = side ? -v[k] : v[k];
			p->nsamples++;
		}
	}
	return 0;
}

int diff_wrappers(struct diff *d, const char *const *patterns, size_t npatterns)
{
	size_t k = 0;
	int err = wrappers_apply(d->p, patterns, npatterns);

	if (err)
		return err;
	/* the samples are the stacks' in order, one or two each (emit_samples) */
	for (size_t i = 0; i < d->nstacks && k < d->p->nsamples; i++) {
		struct diff_stack *st = &d->stacks[i];

		if (!any(st->new) && !any(st->base))
			continue;
		st->site = d->p->samples[k].site;
		k += any(st->new) && any(st->base) ? 2 : 1;
	}
	return 0;
}

int diff__new(const struct hb_profile *base, const struct hb_profile *new, struct diff **out)
{
	struct builder b = {};
	int err;

	if (!base || !new)
		return -EINVAL;
	b.d = calloc(1, sizeof(*b.d));
	if (!b.d)
		return -ENOMEM;
	b.d->p = calloc(1, sizeof(*b.d->p));
	err = b.d->p ? 0 : -ENOMEM;
	err = err ?: add_side(&b, base, false);
	err = err ?: add_side(&b, new, true);
	err = err ?: emit_samples(b.d);
	hashmap__clear(&b.frame_by_name);
	hashmap__clear(&b.stack_by_frames);
	if (err) {
		diff__free(b.d);
		return err;
	}
	b.d->p->period = new->period;
	b.d->p->time_nanos = new->time_nanos;
	b.d->p->duration_nanos = new->duration_nanos;
	b.d->p->raw = new->raw;
	*out = b.d;
	return 0;
}

void diff__free(struct diff *d)
{
	if (!d)
		return;
	for (size_t i = 0; i < d->nstacks; i++)
		free(d->stacks[i].locs);
	free(d->stacks);
	hb_profile__free(d->p);
	free(d);
}

size_t diff_top(const struct diff *d, enum hb_value which, size_t *idx, size_t n)
{
	size_t k = 0;

	/* selection of the n largest |change|: n is small (a summary) */
	for (size_t i = 0; i < d->nstacks; i++) {
		int64_t c = llabs(d->stacks[i].new[which] - d->stacks[i].base[which]);
		size_t j;

		if (!c)
			continue;
		for (j = k; j > 0; j--) {
			const struct diff_stack *o = &d->stacks[idx[j - 1]];

			if (llabs(o->new[which] - o->base[which]) >= c)
				break;
			if (j < n)
				idx[j] = idx[j - 1];
		}
		if (j < n) {
			idx[j] = i;
			if (k < n)
				k++;
		}
	}
	return k;
}
