// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* heapbpf diff: stacks matched by function and file, NEW minus BASE in pprof's convention. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "profile/diff.h"
#include "profile/flamegraph.h"
#include "profile/folded.h"
#include "profile/pprof.h"
#include "export/sink.h"

/* Stacks of function names (leaf first, NULL-terminated), at addresses that differ by build. */
static struct hb_profile *profile(uint64_t addr_base, const char *const stacks[][4],
				  const int64_t values[][HB_NVALUES], size_t n)
{
	struct hb_profile *p = calloc(1, sizeof(*p));

	cr_assert_not_null(p);
	p->period = 524288;
	p->locations = calloc(4 * n, sizeof(*p->locations));
	p->samples = calloc(n, sizeof(*p->samples));
	for (size_t i = 0; i < n; i++) {
		struct hb_sample *s = &p->samples[i];

		s->locs = calloc(4, sizeof(uint32_t));
		for (size_t j = 0; stacks[i][j]; j++) {
			struct hb_location *l = &p->locations[p->nlocations];

			/* every sample its own locations: matching must not rely on sharing them */
			l->address = addr_base + 0x10 * p->nlocations;
			l->nlines = 1;
			l->lines = calloc(1, sizeof(*l->lines));
			l->lines[0].function = strdup(stacks[i][j]);
			l->lines[0].file = strdup("app.c");
			s->locs[s->nlocs++] = p->nlocations++;
		}
		memcpy(s->v, values[i], sizeof(s->v));
	}
	p->nsamples = n;
	return p;
}

static const char *const base_stacks[][4] = {
	{ "cache_fill", "main", NULL },
	{ "churn", "main", NULL },
	{ "gone_site", "main", NULL },
};
static const int64_t base_values[][HB_NVALUES] = {
	{ 10, 1000, 10, 1000 },
	{ 50, 5000, 2, 200 },
	{ 3, 300, 3, 300 },
};
static const char *const new_stacks[][4] = {
	{ "churn", "main", NULL },
	{ "cache_fill", "main", NULL },
	{ "leak_site", "main", NULL },
};
static const int64_t new_values[][HB_NVALUES] = {
	{ 60, 6000, 2, 200 },
	{ 10, 1000, 10, 1000 },
	{ 40, 40960, 40, 40960 },
};

static struct diff *make_diff(void)
{
	struct hb_profile *b = profile(0x1000, base_stacks, base_values, 3);
	struct hb_profile *n = profile(0x9000, new_stacks, new_values, 3);
	struct diff *d = NULL;

	cr_assert_eq(diff__new(b, n, &d), 0);
	hb_profile__free(b);
	hb_profile__free(n);
	return d;
}

static const struct diff_stack *find(const struct diff *d, const char *leaf)
{
	for (size_t i = 0; i < d->nstacks; i++) {
		const struct hb_location *l = &d->p->locations[d->stacks[i].locs[0]];

		if (!strcmp(l->lines[0].function, leaf))
			return &d->stacks[i];
	}
	return NULL;
}

Test(diff, stacks_match_by_function_not_address)
{
	struct diff *d = make_diff();
	const struct diff_stack *s;

	/* cache_fill, churn, gone_site, leak_site: two stacks are on both sides */
	cr_assert_eq(d->nstacks, 4);
	s = find(d, "cache_fill");
	cr_assert_not_null(s);
	cr_assert_eq(s->base[HB_INUSE_SPACE], 1000);
	cr_assert_eq(s->new[HB_INUSE_SPACE], 1000);
	s = find(d, "gone_site");
	cr_assert_eq(s->base[HB_INUSE_SPACE], 300);
	cr_assert_eq(s->new[HB_INUSE_SPACE], 0);
	/* one location per function and file: main is shared by all four stacks */
	cr_assert_eq(d->p->nlocations, 5);
	cr_assert_eq(d->base_total[HB_ALLOC_SPACE], 6300);
	cr_assert_eq(d->new_total[HB_ALLOC_SPACE], 47960);
	diff__free(d);
}

Test(diff, top_changes_by_size_with_sign)
{
	struct diff *d = make_diff();
	size_t idx[3], n = diff_top(d, HB_INUSE_SPACE, idx, 3);
	const struct diff_stack *a, *b;

	/* leak_site +40960, then gone_site -300; cache_fill and churn did not change */
	cr_assert_eq(n, 2);
	a = &d->stacks[idx[0]];
	b = &d->stacks[idx[1]];
	cr_assert_str_eq(d->p->locations[a->locs[0]].lines[0].function, "leak_site");
	cr_assert_eq(a->new[HB_INUSE_SPACE] - a->base[HB_INUSE_SPACE], 40960);
	cr_assert_str_eq(d->p->locations[b->locs[0]].lines[0].function, "gone_site");
	cr_assert_eq(b->new[HB_INUSE_SPACE] - b->base[HB_INUSE_SPACE], -300);
	/* by allocations, churn's +1000 also shows */
	cr_assert_eq(diff_top(d, HB_ALLOC_SPACE, idx, 3), 3);
	diff__free(d);
}

Test(diff, folded_has_base_and_new_columns)
{
	struct diff *d = make_diff();
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	cr_assert_eq(folded_write(d->p, HB_ALLOC_SPACE, f), 0);
	fclose(f);
	cr_assert_str_eq(text, "main;cache_fill 1000 1000\n"
			       "main;churn 5000 6000\n"
			       "main;gone_site 300 0\n"
			       "main;leak_site 0 40960\n");
	free(text);
	diff__free(d);
}

/* The flame graph node at the end of a ';'-separated path of names from the root. */
static struct fg_node_info node_at(const struct flamegraph *fg, const char *path)
{
	char copy[256], *save, *name;
	struct fg_node_info n;
	size_t at = 0;

	snprintf(copy, sizeof(copy), "%s", path);
	for (name = strtok_r(copy, ";", &save); name; name = strtok_r(NULL, ";", &save)) {
		size_t i;

		for (i = 1; i < flamegraph__nnodes(fg); i++) {
			flamegraph__node(fg, i, &n);
			if (n.parent == at && strcmp(n.name, name) == 0)
				break;
		}
		cr_assert_lt(i, flamegraph__nnodes(fg), "no frame %s on the path %s", name, path);
		at = i;
	}
	flamegraph__node(fg, at, &n);
	return n;
}

static void assert_sides(const struct flamegraph *fg, const char *path, int64_t base, int64_t new)
{
	struct fg_node_info n = node_at(fg, path);

	cr_assert_eq(n.base, base, "%s: base %lld, not %lld", path, (long long)n.base,
		     (long long)base);
	cr_assert_eq(n.new, new, "%s: new %lld, not %lld", path, (long long)n.new, (long long)new);
}

Test(diff, flame_graph_nodes_carry_base_and_new)
{
	struct diff *d = make_diff();
	struct flamegraph *fg;

	cr_assert_eq(flamegraph__new(d->p, HB_INUSE_SPACE, &fg), 0);
	cr_assert(flamegraph__is_diff(fg));
	/* all, main, cache_fill, churn, gone_site, leak_site: one tree of both sides */
	cr_assert_eq(flamegraph__nnodes(fg), 6);
	/* the root: the totals */
	assert_sides(fg, "", 1500, 42160);
	assert_sides(fg, "main", 1500, 42160);
	assert_sides(fg, "main;cache_fill", 1000, 1000);
	assert_sides(fg, "main;churn", 200, 200);
	/* a stack only in BASE, and one only in NEW */
	assert_sides(fg, "main;gone_site", 300, 0);
	assert_sides(fg, "main;leak_site", 0, 40960);
	flamegraph__free(fg);
	/* the sample type chooses the values */
	cr_assert_eq(flamegraph__new(d->p, HB_ALLOC_SPACE, &fg), 0);
	assert_sides(fg, "", 6300, 47960);
	assert_sides(fg, "main;churn", 5000, 6000);
	flamegraph__free(fg);
	cr_assert_eq(flamegraph__new(d->p, HB_ALLOC_OBJECTS, &fg), 0);
	assert_sides(fg, "", 63, 110);
	assert_sides(fg, "main;gone_site", 3, 0);
	flamegraph__free(fg);
	diff__free(d);
}

/* The page of d as sink_encode writes it (a NUL-terminated string). */
static char *diff_page(const struct diff *d, enum hb_value which)
{
	struct sink s = { .kind = SINK_FILE, .format = FMT_HTML, .sample_type = which };
	uint8_t *buf;
	size_t len;
	char *text;

	cr_assert_eq(sink_encode(d->p, &s, &buf, &len), 0);
	text = malloc(len + 1);
	cr_assert_not_null(text);
	memcpy(text, buf, len);
	text[len] = '\0';
	free(buf);
	return text;
}

Test(diff, flame_graph_page_shows_both_files_and_totals)
{
	struct diff *d = make_diff();
	char *page;

	d->p->diff_files[0] = strdup("runs/before.pb.gz");
	d->p->diff_files[1] = strdup("runs/<after>.pb.gz");
	page = diff_page(d, HB_INUSE_SPACE);
	cr_assert(strstr(page, "<title>heapbpf: diff, in use 1.5 KiB &rarr; 41.2 KiB</title>"),
		  "%s", page);
	cr_assert(strstr(page, "<h1 id=\"hb-title\">in use 1.5 KiB &rarr; 41.2 KiB (+39.7 KiB, "
			       "+2710.7%)</h1>"),
		  "%s", page);
	cr_assert(strstr(page,
			 "<p id=\"hb-sub\">base runs/before.pb.gz: in use 1.5 KiB (1,500 "
			 "bytes) &middot; new runs/&lt;after&gt;.pb.gz: in use 41.2 KiB "
			 "(42,160 bytes) &middot; frames as wide as the larger of base and new "
			 "inuse_space: red grew, blue shrank"),
		  "%s", page);
	cr_assert(strstr(page, "hb-sw-up"), "the legend has the diff's colours");
	/* the data: a diff's, each node with base then new; the root first */
	cr_assert(strstr(page, "\"type\":\"inuse_space\",\"kind\":\"in use\",\"size\":0,"
			       "\"raw\":false,\"diff\":true,"),
		  "%s", page);
	cr_assert(strstr(page, "\"nodes\":[\n0,0,1500,42160,0,"), "%s", page);
	free(page);
	/* objects: counted, not in bytes */
	page = diff_page(d, HB_ALLOC_OBJECTS);
	cr_assert(strstr(page, "<h1 id=\"hb-title\">allocated 63 objects &rarr; 110 objects (+47 "
			       "objects, +74.6%)</h1>"),
		  "%s", page);
	cr_assert(strstr(page, "base runs/before.pb.gz: allocated 63 objects &middot; new"), "%s",
		  page);
	free(page);
	diff__free(d);
}

Test(diff, flame_graph_of_a_side_with_no_samples)
{
	struct hb_profile *none = calloc(1, sizeof(*none));
	struct hb_profile *n = profile(0x9000, new_stacks, new_values, 3);
	struct flamegraph *fg;
	struct diff *d = NULL;
	char *page;

	/* an empty BASE: no sample is marked as the base, the names still make it a diff */
	cr_assert_not_null(none);
	cr_assert_eq(diff__new(none, n, &d), 0);
	d->p->diff_files[0] = strdup("empty.pb.gz");
	d->p->diff_files[1] = strdup("new.pb.gz");
	cr_assert_eq(flamegraph__new(d->p, HB_INUSE_SPACE, &fg), 0);
	cr_assert(flamegraph__is_diff(fg));
	assert_sides(fg, "", 0, 42160);
	assert_sides(fg, "main;leak_site", 0, 40960);
	flamegraph__free(fg);
	page = diff_page(d, HB_INUSE_SPACE);
	/* from nothing: no percentage */
	cr_assert(strstr(page, "in use 0 B &rarr; 41.2 KiB (+41.2 KiB)</h1>"), "%s", page);
	free(page);
	diff__free(d);
	/* an empty NEW: every node is the base's, new 0 */
	cr_assert_eq(diff__new(n, none, &d), 0);
	cr_assert_eq(flamegraph__new(d->p, HB_INUSE_SPACE, &fg), 0);
	cr_assert(flamegraph__is_diff(fg));
	assert_sides(fg, "", 42160, 0);
	assert_sides(fg, "main;churn", 200, 0);
	flamegraph__free(fg);
	page = diff_page(d, HB_INUSE_SPACE);
	cr_assert(strstr(page, "in use 41.2 KiB &rarr; 0 B (-41.2 KiB, -100.0%)</h1>"), "%s", page);
	free(page);
	diff__free(d);
	hb_profile__free(n);
	hb_profile__free(none);
}

Test(diff, a_profile_that_is_no_diff_makes_the_plain_page)
{
	struct hb_profile *n = profile(0x9000, new_stacks, new_values, 3);
	struct flamegraph *fg;

	cr_assert_eq(flamegraph__new(n, HB_INUSE_SPACE, &fg), 0);
	cr_assert_not(flamegraph__is_diff(fg));
	flamegraph__free(fg);
	hb_profile__free(n);
}

Test(diff, pprof_marks_the_negated_base_like_pprof_diff_base)
{
	struct diff *d = make_diff();
	Perftools__Profiles__Profile *pp;
	uint8_t *buf;
	size_t len;
	int64_t net = 0, base = 0;

	cr_assert_eq(pprof_encode(d->p, &buf, &len), 0);
	cr_assert_eq(pprof_decode(buf, len, &pp), 0);
	for (size_t i = 0; i < pp->n_sample; i++) {
		Perftools__Profiles__Sample *s = pp->sample[i];

		net += s->value[HB_INUSE_SPACE];
		if (s->n_label) {
			cr_assert_str_eq(pp->string_table[s->label[0]->key], "pprof::base");
			cr_assert_str_eq(pp->string_table[s->label[0]->str], "true");
			cr_assert_leq(s->value[HB_INUSE_SPACE], 0);
			base -= s->value[HB_INUSE_SPACE];
		}
	}
	cr_assert_eq(base, 1500);
	cr_assert_eq(net, 42160 - 1500);
	perftools__profiles__profile__free_unpacked(pp, NULL);
	free(buf);
	diff__free(d);
}

Test(diff, loads_a_pprof_file_back)
{
	struct hb_profile *n = profile(0x9000, new_stacks, new_values, 3), *back = NULL;
	char path[] = "/tmp/heapbpf-diff-XXXXXX", err[256] = "";
	struct sink s = { .kind = SINK_FILE, .format = FMT_PPROF, .path = path };
	int fd = mkstemp(path);

	cr_assert_geq(fd, 0);
	close(fd);
	n->samples[2].pid = 4242;
	cr_assert_eq(sink_write(n, &s, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(diff_load(path, NULL, &back, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(back->nsamples, 3);
	cr_assert_eq(back->samples[2].v[HB_INUSE_SPACE], 40960);
	cr_assert_eq(back->samples[2].pid, 4242);
	cr_assert_str_eq(back->locations[back->samples[2].locs[0]].lines[0].function, "leak_site");
	cr_assert_str_eq(back->locations[back->samples[2].locs[0]].lines[0].file, "app.c");
	hb_profile__free(back);
	hb_profile__free(n);
	unlink(path);
}

Test(diff, refuses_what_is_not_a_heap_profile)
{
	char path[] = "/tmp/heapbpf-diff-XXXXXX", err[256] = "";
	struct hb_profile *p = NULL;
	int fd = mkstemp(path);

	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, "hello\n", 6), 6);
	close(fd);
	cr_assert_lt(diff_load(path, NULL, &p, err, sizeof(err)), 0);
	cr_assert(strstr(err, "neither a gzip-compressed pprof profile nor a heapbpf recording"),
		  "%s", err);
	cr_assert_null(p);
	unlink(path);
	cr_assert_eq(diff_load("/nonexistent/x.pb.gz", NULL, &p, err, sizeof(err)), -ENOENT);
	cr_assert(strstr(err, "cannot read /nonexistent/x.pb.gz"), "%s", err);
}

/* pp packed and gzipped into a new temporary file, whose name is left in path. */
static void write_pprof(const Perftools__Profiles__Profile *pp, char *path)
{
	size_t len = perftools__profiles__profile__get_packed_size(pp);
	uint8_t *raw = malloc(len ? len : 1);
	int fd = mkstemp(path);
	gzFile gz;

	cr_assert_not_null(raw);
	cr_assert_geq(fd, 0);
	perftools__profiles__profile__pack(pp, raw);
	gz = gzdopen(fd, "wb");
	cr_assert_not_null(gz);
	cr_assert_eq(gzwrite(gz, raw, len), (int)len);
	cr_assert_eq(gzclose(gz), Z_OK);
	free(raw);
}

/*
 * A profile of one function, one location of nlines lines of it and one
 * sample of nframes frames of that location, of value v (inuse_space).
 */
struct crafted {
	Perftools__Profiles__Profile pp;
	Perftools__Profiles__ValueType vt, *vtp;
	Perftools__Profiles__Function f, *fp;
	Perftools__Profiles__Location l, *lp;
	Perftools__Profiles__Line *lines, **linep;
	Perftools__Profiles__Sample s[2], *sp[2];
	uint64_t *ids;
	int64_t v[2];
	char *strs[3];
};

static void craft(struct crafted *c, const char *name, size_t nlines, size_t nframes, int64_t v)
{
	*c = (struct crafted){ .pp = PERFTOOLS__PROFILES__PROFILE__INIT,
			       .vt = PERFTOOLS__PROFILES__VALUE_TYPE__INIT,
			       .f = PERFTOOLS__PROFILES__FUNCTION__INIT,
			       .l = PERFTOOLS__PROFILES__LOCATION__INIT };
	c->strs[0] = "";
	c->strs[1] = "inuse_space";
	c->strs[2] = (char *)name;
	c->pp.n_string_table = 3;
	c->pp.string_table = c->strs;
	c->vt.type = 1;
	c->pp.n_sample_type = 1;
	c->vtp = &c->vt;
	c->pp.sample_type = &c->vtp;
	c->f.id = 1;
	c->f.name = 2;
	c->fp = &c->f;
	c->pp.n_function = 1;
	c->pp.function = &c->fp;
	c->lines = calloc(nlines, sizeof(*c->lines));
	c->linep = calloc(nlines, sizeof(*c->linep));
	for (size_t i = 0; i < nlines; i++) {
		perftools__profiles__line__init(&c->lines[i]);
		c->lines[i].function_id = 1;
		c->linep[i] = &c->lines[i];
	}
	c->l.id = 1;
	c->l.n_line = nlines;
	c->l.line = c->linep;
	c->lp = &c->l;
	c->pp.n_location = 1;
	c->pp.location = &c->lp;
	c->ids = calloc(nframes, sizeof(*c->ids));
	for (size_t i = 0; i < nframes; i++)
		c->ids[i] = 1;
	for (int i = 0; i < 2; i++) {
		perftools__profiles__sample__init(&c->s[i]);
		c->v[i] = v;
		c->s[i].n_value = 1;
		c->s[i].value = &c->v[i];
		c->s[i].n_location_id = nframes;
		c->s[i].location_id = c->ids;
		c->sp[i] = &c->s[i];
	}
	c->pp.n_sample = 2;
	c->pp.sample = c->sp;
}

static void crafted_free(struct crafted *c)
{
	free(c->lines);
	free(c->linep);
	free(c->ids);
}

/* diff_load of c's profile: its return, with the message in err. */
static int load_crafted(struct crafted *c, char *err, size_t errlen)
{
	char path[] = "/tmp/heapbpf-diff-XXXXXX";
	struct hb_profile *p = NULL;
	int rc;

	write_pprof(&c->pp, path);
	rc = diff_load(path, NULL, &p, err, errlen);
	unlink(path);
	cr_assert_eq(!p, rc != 0);
	hb_profile__free(p);
	crafted_free(c);
	return rc;
}

Test(diff, a_crafted_profile_loads_when_small)
{
	struct crafted c;
	char err[256] = "";

	craft(&c, "leak_site", 3, 4, 4096);
	cr_assert_eq(load_crafted(&c, err, sizeof(err)), 0, "%s", err);
}

/* 2 x 2^62 bytes: added up per stack, then subtracted and negated, they would overflow. */
Test(diff, refuses_values_that_would_overflow)
{
	struct crafted c;
	char err[256] = "";

	craft(&c, "leak_site", 1, 1, INT64_C(1) << 62);
	cr_assert_eq(load_crafted(&c, err, sizeof(err)), -ERANGE, "%s", err);
	cr_assert(strstr(err, "holds absurd values"), "%s", err);
	craft(&c, "leak_site", 1, 1, INT64_MIN);
	cr_assert_eq(load_crafted(&c, err, sizeof(err)), -ERANGE, "%s", err);
}

/* A 1 MiB name on each of 200 lines: 1 MiB of pprof would be 200 MiB of copies. */
Test(diff, refuses_names_copied_past_the_budget)
{
	char *name = malloc(1 << 20);
	struct crafted c;
	char err[256] = "";

	cr_assert_not_null(name);
	memset(name, 'x', (1 << 20) - 1);
	name[(1 << 20) - 1] = '\0';
	craft(&c, name, 200, 1, 4096);
	cr_assert_eq(load_crafted(&c, err, sizeof(err)), -E2BIG, "%s", err);
	cr_assert(strstr(err, "is too large to compare: its stacks would take more than 128 MiB"),
		  "%s", err);
	free(name);
}

/* 10k frames of a 10k-line location: 40 KiB of pprof, 10^8 frames of the diff. */
Test(diff, refuses_frames_expanded_past_the_budget)
{
	struct crafted c;
	char err[256] = "";

	craft(&c, "f", 10000, 10000, 4096);
	cr_assert_eq(load_crafted(&c, err, sizeof(err)), -E2BIG, "%s", err);
	cr_assert(strstr(err, "is too large to compare"), "%s", err);
}
