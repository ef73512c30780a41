// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * pprof encoder/decoder. The Profile message but its samples is laid out in a
 * handful of flat arrays owned by struct enc and packed with the generated
 * protobuf-c code; the samples are packed one at a time into the gzip
 * stream, where protobuf-c would have put them (after the sample types),
 * so that no message of 100k samples is ever held whole: the bytes are
 * those protobuf-c packs for the whole message. Strings are borrowed from
 * the hb_profile (or are literals): the string table only points at them
 * until the message has been packed.
 */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "util/hashmap.h"
#include "profile/pprof.h"

#define STRTAB_RECENT 64
/*
 * The 10 MB message of 100k samples: level 4 took 81 ms and made 822 KB,
 * level 6 (zlib's default) 207 ms and 895 KB, level 1 63 ms and 1.16 MB.
 */
#define GZIP_LEVEL 4

/* The string table: strs[] in pprof's order, found again through by_str. */
struct strtab {
	const char **strs;
	size_t n, cap;
	struct hashmap by_str; /* hashmap_hash_str(s) -> index in strs */
	/*
	 * The last string seen at each slot of addresses: the same pointer is
	 * the same string while the profile is packed (the label keys and
	 * units, literals, come with every sample).
	 */
	struct {
		const char *s;
		int64_t id;
	} recent[STRTAB_RECENT];
};

struct enc {
	struct strtab st;
	/* sample types (held_space last when the profile has it), then the period type */
	Perftools__Profiles__ValueType vt[HB_NVALUES + 2];
	Perftools__Profiles__ValueType *vtp[HB_NVALUES + 1];
	size_t nvt;
	Perftools__Profiles__Mapping *maps, **mapp;
	Perftools__Profiles__Location *locs, **locp;
	Perftools__Profiles__Line *lines, **linep;
	/* at most one function per line, so these never grow */
	Perftools__Profiles__Function *funcs, **funcp;
	size_t nfuncs;
	struct hashmap func_by_strs; /* hash of (name, system_name, filename) -> funcs[] */
	int64_t pid_key, base_key, true_str;
	uint8_t *buf; /* the sample being packed */
	size_t buf_cap;
	int64_t *comments;
};

/* A gzip stream into a growing buffer. */
struct gz {
	z_stream zs;
	uint8_t *out;
	size_t cap;
};

/* calloc() that never returns NULL for an empty array, so NULL means -ENOMEM. */
static void *zalloc(size_t n, size_t size)
{
	return calloc(n ? n : 1, size);
}

/* Sets *id to the string table index of @s, adding it when new. */
static int strtab_intern(struct strtab *st, const char *s, int64_t *id)
{
	size_t slot = ((uintptr_t)s >> 3) % STRTAB_RECENT;
	uint64_t h;
	const char **strs;
	size_t it = 0;
	uint32_t k;
	int err;

	if (st->recent[slot].s == s) {
		*id = st->recent[slot].id;
		return 0;
	}
	h = hashmap_hash_str(s);
	while (hashmap__next(&st->by_str, h, &it, &k)) {
		/* k < n: what the map holds is in strs (the analyzer cannot tell) */
		if (k < st->n && strcmp(st->strs[k], s) == 0) {
			*id = k;
			st->recent[slot].s = s;
			st->recent[slot].id = k;
			return 0;
		}
	}
	if (st->n == st->cap) {
		size_t ncap = st->cap ? st->cap * 2 : 1024;

		strs = reallocarray(st->strs, ncap, sizeof(*strs));
		if (!strs)
			return -ENOMEM;
		st->strs = strs;
		st->cap = ncap;
	}
	/* fails past UINT32_MAX - 1 strings, more than any profile holds */
	err = hashmap__add(&st->by_str, h, st->n);
	if (err)
		return err;
	st->strs[st->n] = s;
	*id = st->n++;
	st->recent[slot].s = s;
	st->recent[slot].id = *id;
	return 0;
}

static void strtab_free(struct strtab *st)
{
	free(st->strs);
	hashmap__clear(&st->by_str);
}

/* Sets *id to the id of the function (name, system_name, filename), adding it when new. */
static int func_id(struct enc *e, int64_t name, int64_t system_name, int64_t filename, uint64_t *id)
{
	const int64_t key[3] = { name, system_name, filename };
	uint64_t h = hashmap_hash_bytes(key, sizeof(key));
	Perftools__Profiles__Function *f;
	size_t it = 0;
	uint32_t k;
	int err;

	while (hashmap__next(&e->func_by_strs, h, &it, &k)) {
		f = &e->funcs[k];
		if (f->name == name && f->system_name == system_name && f->filename == filename) {
			*id = f->id;
			return 0;
		}
	}
	err = hashmap__add(&e->func_by_strs, h, e->nfuncs);
	if (err)
		return err;
	/* Cannot overflow: the arrays were sized for one function per line. */
	f = &e->funcs[e->nfuncs];
	perftools__profiles__function__init(f);
	f->id = e->nfuncs + 1;
	f->name = name;
	f->system_name = system_name;
	f->filename = filename;
	e->funcp[e->nfuncs++] = f;
	*id = f->id;
	return 0;
}

static void enc_free(struct enc *e)
{
	strtab_free(&e->st);
	free(e->maps);
	free(e->mapp);
	free(e->locs);
	free(e->locp);
	free(e->lines);
	free(e->linep);
	free(e->funcs);
	free(e->funcp);
	hashmap__clear(&e->func_by_strs);
	free(e->buf);
	free(e->comments);
}

/*
 * Rejects dangling references up front, so a bad profile fails cleanly
 * instead of producing a Profile that pprof refuses, and counts the lines
 * and sample frames the flat arrays need.
 */
static int check_profile(const struct hb_profile *p, size_t *nlines, size_t *nframes)
{
	size_t lines = 0, frames = 0;

	for (size_t i = 0; i < p->nmappings; i++) {
		if (!p->mappings[i].path)
			return -EINVAL;
	}
	for (size_t i = 0; i < p->nlocations; i++) {
		const struct hb_location *l = &p->locations[i];

		if (l->mapping > p->nmappings)
			return -EINVAL;
		for (uint32_t j = 0; j < l->nlines; j++) {
			if (!l->lines[j].function)
				return -EINVAL;
		}
		if (__builtin_add_overflow(lines, l->nlines, &lines))
			return -EOVERFLOW;
	}
	if (hb_profile_check_samples(p))
		return -EINVAL;
	for (size_t i = 0; i < p->nsamples; i++) {
		if (__builtin_add_overflow(frames, p->samples[i].nlocs, &frames))
			return -EOVERFLOW;
		for (uint32_t j = 0; j < p->samples[i].nlabels; j++) {
			if (!p->samples[i].labels[j].key)
				return -EINVAL;
		}
	}
	for (size_t i = 0; i < p->ncomments; i++) {
		if (!p->comments[i])
			return -EINVAL;
	}
	*nlines = lines;
	*nframes = frames;
	return 0;
}

static int enc_alloc(struct enc *e, const struct hb_profile *p, size_t nlines)
{
	size_t maxlabels = 0, maxlocs = 0;

	for (size_t i = 0; i < p->nsamples; i++) {
		maxlabels = p->samples[i].nlabels > maxlabels ? p->samples[i].nlabels : maxlabels;
		maxlocs = p->samples[i].nlocs > maxlocs ? p->samples[i].nlocs : maxlocs;
	}
	/*
	 * A sample at its longest: location ids and values packed (10-byte
	 * varints at most), labels of four varints each, with pid and
	 * pprof::base, each written 11 or 12 bytes in before its head goes in
	 * front (pack_sample); nlocs and nlabels are 32-bit: no overflow
	 */
	e->buf_cap =
		128 + 11 * (size_t)maxlocs + 11 * (HB_NVALUES + 1) + ((size_t)maxlabels + 2) * 64;
	e->buf = malloc(e->buf_cap);
	e->maps = zalloc(p->nmappings, sizeof(*e->maps));
	e->mapp = zalloc(p->nmappings, sizeof(*e->mapp));
	e->locs = zalloc(p->nlocations, sizeof(*e->locs));
	e->locp = zalloc(p->nlocations, sizeof(*e->locp));
	e->lines = zalloc(nlines, sizeof(*e->lines));
	e->linep = zalloc(nlines, sizeof(*e->linep));
	e->funcs = zalloc(nlines, sizeof(*e->funcs));
	e->funcp = zalloc(nlines, sizeof(*e->funcp));
	e->comments = zalloc(p->ncomments + 1, sizeof(*e->comments));
	if (!e->buf || !e->maps || !e->mapp || !e->locs || !e->locp || !e->lines || !e->linep ||
	    !e->funcs || !e->funcp || !e->comments)
		return -ENOMEM;
	return 0;
}

static int enc_mappings(struct enc *e, const struct hb_profile *p)
{
	int err;

	for (size_t i = 0; i < p->nmappings; i++) {
		const struct hb_mapping *m = &p->mappings[i];
		Perftools__Profiles__Mapping *pm = &e->maps[i];

		perftools__profiles__mapping__init(pm);
		pm->id = i + 1;
		pm->memory_start = m->start;
		pm->memory_limit = m->limit;
		pm->file_offset = m->file_offset;
		err = strtab_intern(&e->st, m->path, &pm->filename);
		if (err)
			return err;
		if (m->build_id) {
			err = strtab_intern(&e->st, m->build_id, &pm->build_id);
			if (err)
				return err;
		}
		pm->has_functions = m->has_functions;
		pm->has_filenames = m->has_filenames;
		pm->has_line_numbers = m->has_line_numbers;
		pm->has_inline_frames = m->has_inline_frames;
		e->mapp[i] = pm;
	}
	return 0;
}

static int enc_line(struct enc *e, const struct hb_line *l, Perftools__Profiles__Line *pl)
{
	int64_t name, system_name, filename;
	int err;

	err = strtab_intern(&e->st, l->function, &name);
	if (err)
		return err;
	/* pprof shows system_name for -symbolize=none; never leave it empty */
	err = strtab_intern(&e->st, l->system_name ? l->system_name : l->function, &system_name);
	if (err)
		return err;
	err = strtab_intern(&e->st, l->file ? l->file : "", &filename);
	if (err)
		return err;
	perftools__profiles__line__init(pl);
	pl->line = l->line;
	return func_id(e, name, system_name, filename, &pl->function_id);
}

static int enc_locations(struct enc *e, const struct hb_profile *p)
{
	size_t off = 0;
	int err;

	for (size_t i = 0; i < p->nlocations; i++) {
		const struct hb_location *l = &p->locations[i];
		Perftools__Profiles__Location *pl = &e->locs[i];

		perftools__profiles__location__init(pl);
		pl->id = i + 1;
		pl->mapping_id = l->mapping;
		pl->address = l->address;
		pl->n_line = l->nlines;
		pl->line = l->nlines ? &e->linep[off] : NULL;
		/* same order as given: callee first, as pprof wants */
		for (uint32_t j = 0; j < l->nlines; j++, off++) {
			err = enc_line(e, &l->lines[j], &e->lines[off]);
			if (err)
				return err;
			e->linep[off] = &e->lines[off];
		}
		e->locp[i] = pl;
	}
	return 0;
}

static size_t put_varint(uint8_t *p, uint64_t v)
{
	size_t n = 0;

	while (v >= 0x80) {
		p[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	p[n++] = (uint8_t)v;
	return n;
}

/* A length-delimited field: its tag, then the length of the n bytes at p + room, moved up. */
static size_t put_len_field(uint8_t *p, unsigned int field, size_t room, size_t n)
{
	uint8_t head[11];
	size_t h = put_varint(head, (uint64_t)field << 3 | 2);

	h += put_varint(head + h, n);
	/* the body was written room bytes in; room is the most a head takes */
	memmove(p + h, p + room, n);
	memcpy(p, head, h);
	return h + n;
}

/* A Label message (key 1, str 2, num 3, num_unit 4: varints, zero ones left out) as field 3. */
static size_t put_label(uint8_t *p, int64_t key, int64_t str, int64_t num, int64_t unit)
{
	const int64_t f[4] = { key, str, num, unit };
	size_t n = 0;

	for (unsigned int i = 0; i < 4; i++) {
		if (!f[i])
			continue;
		p[12 + n++] = (uint8_t)((i + 1) << 3);
		n += put_varint(p + 12 + n, (uint64_t)f[i]);
	}
	return put_len_field(p, 3, 12, n);
}

/*
 * The samples' label keys and units into the string table, in sample order
 * (where the packing of each sample finds them again).
 */
static int intern_labels(struct enc *e, const struct hb_profile *p)
{
	int64_t id;
	int err;

	for (size_t i = 0; i < p->nsamples; i++) {
		const struct hb_sample *s = &p->samples[i];

		for (uint32_t j = 0; j < s->nlabels; j++) {
			err = strtab_intern(&e->st, s->labels[j].key, &id);
			if (!err && s->labels[j].unit)
				err = strtab_intern(&e->st, s->labels[j].unit, &id);
			if (err)
				return err;
		}
	}
	return 0;
}

/*
 * Sample @s packed into e->buf as protobuf-c packs a Sample (proto3: the
 * repeated numbers packed, empty ones and zero fields left out, in field
 * order); *len: its length.
 */
static int pack_sample(struct enc *e, const struct hb_sample *s, int64_t held, size_t *len)
{
	uint8_t *p = e->buf;
	size_t n = 0, body = 0;
	int64_t key, unit;
	int err;

	/* location_id (1), leaf first; ids are 1-based indices */
	for (uint32_t j = 0; j < s->nlocs; j++)
		body += put_varint(p + 11 + body, (uint64_t)s->locs[j] + 1);
	if (s->nlocs)
		n += put_len_field(p, 1, 11, body);
	/* value (2) */
	body = 0;
	for (int k = 0; k < HB_NVALUES; k++)
		body += put_varint(p + n + 11 + body, (uint64_t)s->v[k]);
	if (e->nvt > HB_NVALUES)
		body += put_varint(p + n + 11 + body, (uint64_t)held);
	n += put_len_field(p + n, 2, 11, body);
	/* label (3): "pid" (--follow-forks, numeric, as pprof's -tagfocus reads), "pprof::base" */
	if (s->pid)
		n += put_label(p + n, e->pid_key, 0, s->pid, 0);
	if (s->diff_base)
		n += put_label(p + n, e->base_key, e->true_str, 0, 0);
	for (uint32_t j = 0; j < s->nlabels; j++) {
		unit = 0;
		err = strtab_intern(&e->st, s->labels[j].key, &key);
		if (!err && s->labels[j].unit)
			err = strtab_intern(&e->st, s->labels[j].unit, &unit);
		if (err)
			return err;
		n += put_label(p + n, key, 0, s->labels[j].num, unit);
	}
	*len = n;
	return 0;
}

/* gzip (not zlib or raw deflate) because that is what pprof readers sniff for. */
static int gz_init(struct gz *g, size_t guess)
{
	int rc;

	memset(g, 0, sizeof(*g));
	rc = deflateInit2(&g->zs, GZIP_LEVEL, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
	if (rc != Z_OK)
		return rc == Z_MEM_ERROR ? -ENOMEM : -EINVAL;
	g->cap = guess;
	g->out = malloc(g->cap);
	if (!g->out) {
		deflateEnd(&g->zs);
		return -ENOMEM;
	}
	g->zs.next_out = g->out;
	g->zs.avail_out = g->cap > UINT_MAX ? UINT_MAX : (uInt)g->cap;
	return 0;
}

/* Room for more output: the buffer doubled. */
static int gz_grow(struct gz *g)
{
	size_t used = (size_t)(g->zs.next_out - g->out), ncap = g->cap * 2;
	uint8_t *no = ncap > g->cap ? realloc(g->out, ncap) : NULL;

	if (!no)
		return -ENOMEM;
	g->out = no;
	g->cap = ncap;
	g->zs.next_out = no + used;
	g->zs.avail_out = ncap - used > UINT_MAX ? UINT_MAX : (uInt)(ncap - used);
	return 0;
}

/* Deflates len bytes; finish: and ends the stream. */
static int gz_feed(struct gz *g, const void *data, size_t len, bool finish)
{
	const uint8_t *in = data;
	int rc, err;

	/* avail_in/avail_out are 32-bit: feed buffers over 4 GiB in pieces */
	for (;;) {
		if (!g->zs.avail_in && len) {
			g->zs.avail_in = len > UINT_MAX ? UINT_MAX : (uInt)len;
			g->zs.next_in = (Bytef *)in;
			in += g->zs.avail_in;
			len -= g->zs.avail_in;
		}
		if (!finish && !g->zs.avail_in)
			return 0;
		if (!g->zs.avail_out) {
			err = gz_grow(g);
			if (err)
				return err;
		}
		rc = deflate(&g->zs, finish && !len ? Z_FINISH : Z_NO_FLUSH);
		if (rc == Z_STREAM_ERROR)
			return -EINVAL;
		if (rc == Z_STREAM_END)
			return 0;
	}
}

static size_t varint_len(uint64_t v)
{
	size_t n = 1;

	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

/* Field 2 (sample), length-delimited, of len bytes: its tag and length. */
static size_t sample_head(uint8_t head[11], size_t len)
{
	size_t n = 0;
	uint64_t v = len;

	head[n++] = (2 << 3) | 2;
	while (v >= 0x80) {
		head[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	head[n++] = (uint8_t)v;
	return n;
}

/*
 * The gzipped Profile: @rest (the message packed without its samples) up
 * to the end of its sample types (field 1, which protobuf-c packs first),
 * every sample (field 2) packed on its own, then the rest of @rest.
 */
static int gzip_profile(struct enc *e, const struct hb_profile *p,
			const Perftools__Profiles__Profile *prof, const uint8_t *rest,
			size_t rest_len, uint8_t **out, size_t *out_len)
{
	size_t split = 0, len, hlen;
	uint8_t head[11];
	struct gz g;
	int err;

	for (size_t i = 0; i < prof->n_sample_type; i++) {
		len = perftools__profiles__value_type__get_packed_size(prof->sample_type[i]);
		split += 1 + varint_len(len) + len;
	}
	if (split > rest_len)
		return -EINVAL;
	/* a guess: profiles compress about 4:1, and a sample takes some 100 bytes */
	err = gz_init(&g, (rest_len + p->nsamples * 100) / 4 + 4096);
	if (err)
		return err;
	err = gz_feed(&g, rest, split, false);
	for (size_t i = 0; !err && i < p->nsamples; i++) {
		err = pack_sample(e, &p->samples[i], p->held ? p->held[i] : 0, &len);
		hlen = err ? 0 : sample_head(head, len);
		err = err ?: gz_feed(&g, head, hlen, false);
		err = err ?: gz_feed(&g, e->buf, len, false);
	}
	err = err ?: gz_feed(&g, rest + split, rest_len - split, true);
	if (err) {
		deflateEnd(&g.zs);
		free(g.out);
		return err;
	}
	*out_len = g.zs.total_out;
	*out = g.out;
	deflateEnd(&g.zs);
	return 0;
}

/* Everything but the samples, into prof (which then points into e). */
static int enc_rest(struct enc *e, const struct hb_profile *p, Perftools__Profiles__Profile *prof)
{
	int64_t empty;
	int err;

	/* string_table[0] must be "" */
	err = strtab_intern(&e->st, "", &empty);
	for (int i = 0; !err && i < HB_NVALUES; i++) {
		perftools__profiles__value_type__init(&e->vt[i]);
		err = strtab_intern(&e->st, hb_value_names[i], &e->vt[i].type)
			      ?: strtab_intern(&e->st, hb_value_units[i], &e->vt[i].unit);
		e->vtp[i] = &e->vt[i];
	}
	e->nvt = HB_NVALUES;
	/* heapbpf rss: what each stack holds (user/heap/held.h) */
	if (p->held) {
		perftools__profiles__value_type__init(&e->vt[e->nvt]);
		err = err ?: strtab_intern(&e->st, "held_space", &e->vt[e->nvt].type);
		err = err ?: strtab_intern(&e->st, "bytes", &e->vt[e->nvt].unit);
		e->vtp[e->nvt] = &e->vt[e->nvt];
		e->nvt++;
	}
	/* Go heap profiles: period_type space/bytes, period = sampling rate */
	perftools__profiles__value_type__init(&e->vt[e->nvt]);
	err = err ?: strtab_intern(&e->st, "space", &e->vt[e->nvt].type);
	err = err ?: strtab_intern(&e->st, "bytes", &e->vt[e->nvt].unit);
	err = err ?: enc_mappings(e, p);
	err = err ?: enc_locations(e, p);
	for (size_t i = 0; !err && i < p->nsamples; i++) {
		if (p->samples[i].pid && !e->pid_key)
			err = strtab_intern(&e->st, "pid", &e->pid_key);
		if (!err && p->samples[i].diff_base && !e->base_key)
			err = strtab_intern(&e->st, "pprof::base", &e->base_key)
				      ?: strtab_intern(&e->st, "true", &e->true_str);
	}
	err = err ?: intern_labels(e, p);
	for (size_t i = 0; !err && i < p->ncomments; i++)
		err = strtab_intern(&e->st, p->comments[i], &e->comments[i]);
	if (err)
		return err;
	prof->n_comment = p->ncomments;
	if (p->raw) {
		/* readers would otherwise take the values as unbiased estimates */
		err = strtab_intern(&e->st, PPROF_RAW_COMMENT, &e->comments[prof->n_comment++]);
		if (err)
			return err;
	}
	prof->comment = e->comments;
	err = strtab_intern(&e->st, hb_value_names[HB_INUSE_SPACE], &prof->default_sample_type);
	if (err)
		return err;
	prof->n_sample_type = e->nvt;
	prof->sample_type = e->vtp;
	prof->n_mapping = p->nmappings;
	prof->mapping = e->mapp;
	prof->n_location = p->nlocations;
	prof->location = e->locp;
	prof->n_function = e->nfuncs;
	prof->function = e->funcp;
	prof->n_string_table = e->st.n;
	/* protobuf-c wants char **; packing only reads the strings */
	prof->string_table = (char **)e->st.strs;
	prof->time_nanos = p->time_nanos;
	prof->duration_nanos = p->duration_nanos;
	prof->period_type = &e->vt[e->nvt];
	prof->period = p->period;
	return 0;
}

int pprof_encode(const struct hb_profile *p, uint8_t **out, size_t *out_len)
{
	Perftools__Profiles__Profile prof = PERFTOOLS__PROFILES__PROFILE__INIT;
	size_t nlines, nframes, rest_len;
	struct enc e = { 0 };
	uint8_t *rest = NULL;
	int err;

	err = check_profile(p, &nlines, &nframes);
	if (err)
		return err;
	err = enc_alloc(&e, p, nlines) ?: enc_rest(&e, p, &prof);
	if (err)
		goto out;
	rest_len = perftools__profiles__profile__get_packed_size(&prof);
	rest = malloc(rest_len ? rest_len : 1);
	if (!rest) {
		err = -ENOMEM;
		goto out;
	}
	perftools__profiles__profile__pack(&prof, rest);
	err = gzip_profile(&e, p, &prof, rest, rest_len, out, out_len);
out:
	free(rest);
	enc_free(&e);
	return err;
}

/* Inflates a gzip stream (several members allowed, as gunzip does) into a new buffer. */
static int gunzip_buf(const uint8_t *gz, size_t len, size_t max_len, uint8_t **out, size_t *out_len)
{
	size_t in_left = len, cap, used = 0;
	z_stream zs = { 0 };
	uint8_t *buf = NULL;
	int rc, err;

	if (len < 2 || gz[0] != 0x1f || gz[1] != 0x8b)
		return -EBADMSG;
	/* 15 + 16: gzip wrapper only, so a bare zlib stream is not taken for a profile */
	rc = inflateInit2(&zs, 15 + 16);
	if (rc != Z_OK)
		return rc == Z_MEM_ERROR ? -ENOMEM : -EINVAL;

	/* a guess that usually avoids regrowing; profiles compress about 4:1 */
	cap = len < max_len / 4 ? len * 4 : max_len;
	if (cap < 4096)
		cap = 4096;
	zs.next_in = (Bytef *)gz;
	buf = malloc(cap);
	if (!buf) {
		err = -ENOMEM;
		goto fail;
	}
	for (;;) {
		if (!zs.avail_in && in_left) {
			zs.avail_in = in_left > UINT_MAX ? UINT_MAX : in_left;
			in_left -= zs.avail_in;
		}
		if (used == cap) {
			uint8_t *nbuf;

			if (cap > max_len) {
				err = -EFBIG;
				goto fail;
			}
			/* one byte over the limit tells "too large" from "just fits" */
			cap = cap > max_len / 2 ? max_len + 1 : cap * 2;
			nbuf = realloc(buf, cap);
			if (!nbuf) {
				err = -ENOMEM;
				goto fail;
			}
			buf = nbuf;
		}
		zs.next_out = buf + used;
		zs.avail_out = cap - used > UINT_MAX ? UINT_MAX : cap - used;
		rc = inflate(&zs, Z_NO_FLUSH);
		used = zs.next_out - buf;
		if (used > max_len) {
			err = -EFBIG;
			goto fail;
		}
		if (rc == Z_STREAM_END) {
			if (!zs.avail_in && !in_left)
				break;
			/* another gzip member follows */
			if (inflateReset(&zs) != Z_OK) {
				err = -EINVAL;
				goto fail;
			}
			continue;
		}
		if (rc == Z_MEM_ERROR) {
			err = -ENOMEM;
			goto fail;
		}
		if (rc == Z_BUF_ERROR && !zs.avail_in && !in_left) {
			/* truncated: no input left and the stream is not finished */
			err = -EBADMSG;
			goto fail;
		}
		if (rc != Z_OK && rc != Z_BUF_ERROR) {
			err = -EBADMSG;
			goto fail;
		}
	}
	inflateEnd(&zs);
	*out = buf;
	*out_len = used;
	return 0;
fail:
	inflateEnd(&zs);
	free(buf);
	return err;
}

/*
 * protobuf-c's allocations during an unpack, counted against a budget: a
 * 1-byte repeated element or an empty submessage costs some 85 bytes once
 * unpacked, so the decompressed size alone does not bound the memory (an
 * 8 KiB gzip once took 1.36 GB). Each allocation is counted as the chunk
 * glibc gives it (16-byte granules, 8 bytes of header, at least 32); the
 * count only grows, so the scan slabs protobuf-c frees again count too.
 * The memory comes from malloc: free_unpacked(..., NULL) frees it.
 */
struct decode_budget {
	size_t used, max;
	bool over;
};

static void *budget_alloc(void *data, size_t size)
{
	struct decode_budget *b = data;
	size_t chunk = size > SIZE_MAX - 64 ? SIZE_MAX : (size + 8 + 15) & ~(size_t)15;

	if (chunk < 32)
		chunk = 32;
	if (chunk > b->max - b->used) {
		b->over = true;
		return NULL;
	}
	b->used += chunk;
	return malloc(size);
}

static void budget_free(void *data, void *ptr)
{
	(void)data;
	free(ptr);
}

int pprof_decode_mem(const uint8_t *gz, size_t len, size_t max_len, size_t max_mem,
		     Perftools__Profiles__Profile **out)
{
	struct decode_budget b = { .max = max_mem };
	ProtobufCAllocator alloc = { budget_alloc, budget_free, &b };
	Perftools__Profiles__Profile *prof;
	size_t raw_len;
	uint8_t *raw;
	int err;

	if (max_len > SIZE_MAX - 1)
		return -EINVAL;
	err = gunzip_buf(gz, len, max_len, &raw, &raw_len);
	if (err)
		return err;
	/* the decompressed bytes are held while unpacking: they count too */
	b.used = raw_len < max_mem ? raw_len : max_mem;
	prof = perftools__profiles__profile__unpack(&alloc, raw_len, raw);
	free(raw);
	if (!prof)
		return b.over ? -E2BIG : -EBADMSG;
	*out = prof;
	return 0;
}

int pprof_decode_max(const uint8_t *gz, size_t len, size_t max_len,
		     Perftools__Profiles__Profile **out)
{
	return pprof_decode_mem(gz, len, max_len, PPROF_MEM_MAX, out);
}

int pprof_decode(const uint8_t *gz, size_t len, Perftools__Profiles__Profile **out)
{
	return pprof_decode_max(gz, len, PPROF_DECODE_MAX, out);
}
