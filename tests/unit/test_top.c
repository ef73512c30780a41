// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* heapbpf top's pure parts: snapshots, deltas, collapsing, sorting, keys, rows, screens, tables. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/top.h"
#include "commands.h"
#include "profile/topview.h"
#include "harness.h"

/* A location's lines, callee first; function NULL ends the list. */
struct exp_line {
	const char *function, *file;
	int64_t line;
};

static const struct exp_line loc_lines[][3] = {
	{ { "churn_small", "/src/app/alloc.c", 10 } },
	{ { "large_buffers", "/src/app/alloc.c", 20 } },
	/* alloc_buffer inlined into parse_request: the site is parse_request's line */
	{ { "alloc_buffer", "/src/app/inline.h", 5 }, { "parse_request", "/src/app/req.c", 30 } },
	{ { "run_one", "/src/app/alloc.c", 40 } },
	{ { "churn_small", "/src/app/alloc.c", 12 } }, /* another call in churn_small */
	{ { "lib.so+0x1234", NULL, 0 } },	       /* no symbols, no file */
};

#define NLOCS (sizeof(loc_lines) / sizeof(loc_lines[0]))

struct exp_sample {
	uint32_t nlocs;
	uint32_t locs[2];
	int64_t v[HB_NVALUES]; /* alloc_objects, alloc_space, inuse_objects, inuse_space */
};

static struct hb_profile *make_profile(const struct exp_sample *samples, size_t n)
{
	struct hb_profile *p = hb_xcalloc(1, sizeof(*p));

	p->nlocations = NLOCS;
	p->locations = hb_xcalloc(NLOCS, sizeof(*p->locations));
	for (size_t i = 0; i < NLOCS; i++) {
		struct hb_location *l = &p->locations[i];

		l->address = 0x1000 * (i + 1);
		while (l->nlines < 3 && loc_lines[i][l->nlines].function)
			l->nlines++;
		l->lines = hb_xcalloc(l->nlines, sizeof(*l->lines));
		for (uint32_t j = 0; j < l->nlines; j++) {
			l->lines[j].function = hb_xstrdup(loc_lines[i][j].function);
			l->lines[j].file = hb_xstrdup(loc_lines[i][j].file);
			l->lines[j].line = loc_lines[i][j].line;
		}
	}
	p->nsamples = n;
	p->samples = hb_xcalloc(n ? n : 1, sizeof(*p->samples));
	for (size_t i = 0; i < n; i++) {
		p->samples[i].nlocs = samples[i].nlocs;
		p->samples[i].locs = hb_xcalloc(2, sizeof(uint32_t));
		memcpy(p->samples[i].locs, samples[i].locs, sizeof(samples[i].locs));
		memcpy(p->samples[i].v, samples[i].v, sizeof(samples[i].v));
	}
	return p;
}

static void snap_of(const struct exp_sample *samples, size_t n, int64_t t, struct top_snap *s)
{
	struct hb_profile *p = make_profile(samples, n);

	cr_assert_eq(topview_snap_build(p, t, s), 0);
	hb_profile__free(p);
}

/* Two intervals: prev at 1 s, cur at 3 s (2 s apart). */
static const struct exp_sample prev_samples[] = {
	{ 2, { 0, 3 }, { 10, 1000, 5, 500 } },	     /* churn_small:10 */
	{ 2, { 1, 3 }, { 1, 1 << 20, 1, 1 << 20 } }, /* large_buffers */
	{ 2, { 2, 3 }, { 4, 400, 4, 400 } },	     /* parse_request (inlined) */
	{ 1, { 5 }, { 1, 64, 1, 64 } },		     /* unsymbolized */
};

static const struct exp_sample cur_samples[] = {
	{ 2, { 0, 3 }, { 30, 3000, 6, 600 } }, /* churn_small:10: +2000 B, +100 in use */
	{ 2, { 1, 3 }, { 3, 3 << 20, 0, 0 } }, /* large_buffers: all freed */
	{ 2, { 2, 3 }, { 4, 400, 4, 400 } },   /* parse_request: nothing new */
	{ 2, { 4, 3 }, { 5, 500, 5, 500 } },   /* churn_small:12: new */
	{ 1, { 0 }, { 1, 100, 0, 0 } },	       /* churn_small:10 by another stack */
	{ 0, { 0 }, { 9, 9, 9, 9 } },	       /* no location: not a site */
	{ 1, { 5 }, { 1, 64, 1, 64 } },	       /* unsymbolized, unchanged */
};

#define N(a) (sizeof(a) / sizeof(a[0]))

struct two {
	struct top_snap prev, cur;
	struct top_frame f;
	struct top_view v;
	struct top_row *rows; /* as v sorts and collapses them */
	size_t n;
};

static struct top_view view_of(const struct top_frame *f, enum top_sort s, enum top_by by);

static void two_build(struct two *w)
{
	snap_of(prev_samples, N(prev_samples), 1000000000, &w->prev);
	snap_of(cur_samples, N(cur_samples), 3000000000, &w->cur);
	cr_assert_eq(topview_frame_build(&w->prev, &w->cur, &w->f), 0);
}

/* The frame, and its rows as a view sorted by s and collapsed by by shows them. */
static void two_view(struct two *w, enum top_sort s, enum top_by by)
{
	two_build(w);
	w->v = view_of(&w->f, s, by);
	cr_assert_eq(topview_rows(&w->f, by, s, &w->rows, &w->n), 0);
}

static void two_free(struct two *w)
{
	free(w->rows);
	topview_frame_free(&w->f);
	topview_snap_free(&w->prev);
	topview_snap_free(&w->cur);
}

TestSuite(top);

Test(top, parse_names)
{
	/* in enum order */
	static const char *const sorts[TOP_NSORTS] = { "growth", "alloc", "inuse" };
	static const char *const bys[TOP_NBYS] = { "site", "function", "file" };
	enum top_sort s;
	enum top_by b;

	for (int i = 0; i < TOP_NSORTS; i++) {
		cr_assert_eq(topview_sort_parse(sorts[i], &s), 0);
		cr_assert_eq(s, i);
	}
	for (int i = 0; i < TOP_NBYS; i++) {
		cr_assert_eq(topview_by_parse(bys[i], &b), 0);
		cr_assert_eq(b, i);
	}
	cr_assert_eq(topview_sort_parse("size", &s), -EINVAL);
	cr_assert_eq(topview_by_parse("line", &b), -EINVAL);
}

Test(top, snapshot_sites_merged_and_sorted)
{
	struct top_snap s;

	snap_of(cur_samples, N(cur_samples), 42, &s);
	cr_assert_eq(s.mono_ns, 42);
	/* churn_small:10 (two stacks), churn_small:12, large_buffers, lib.so, parse_request */
	cr_assert_eq(s.nsites, 5);
	cr_assert_str_eq(s.sites[0].function, "churn_small");
	cr_assert_eq(s.sites[0].line, 10);
	cr_assert_eq(s.sites[0].v[HB_ALLOC_SPACE], 3100);
	cr_assert_eq(s.sites[0].v[HB_ALLOC_OBJECTS], 31);
	cr_assert_eq(s.sites[0].v[HB_INUSE_SPACE], 600);
	cr_assert_str_eq(s.sites[1].function, "churn_small");
	cr_assert_eq(s.sites[1].line, 12);
	cr_assert_str_eq(s.sites[2].function, "large_buffers");
	cr_assert_str_eq(s.sites[3].function, "lib.so+0x1234");
	cr_assert_str_eq(s.sites[3].file, "");
	/* the outermost line of the leaf location: the caller, not the inlined callee */
	cr_assert_str_eq(s.sites[4].function, "parse_request");
	cr_assert_str_eq(s.sites[4].file, "/src/app/req.c");
	cr_assert_eq(s.sites[4].line, 30);
	topview_snap_free(&s);
	cr_assert_eq(s.nsites, 0);
}

Test(top, snapshot_of_empty_profile)
{
	struct top_snap s;
	struct top_frame f;

	snap_of(NULL, 0, 7, &s);
	cr_assert_eq(s.nsites, 0);
	cr_assert_eq(topview_frame_build(&s, &s, &f), 0);
	cr_assert_eq(f.nrows, 0);
	cr_assert_eq(f.seconds, 0);
	topview_frame_free(&f);
	topview_snap_free(&s);
}

static const struct top_row *find(const struct top_frame *f, const char *fn, int64_t line)
{
	for (size_t i = 0; i < f->nrows; i++) {
		if (strcmp(f->rows[i].function, fn) == 0 && f->rows[i].line == line)
			return &f->rows[i];
	}
	return NULL;
}

Test(top, frame_deltas)
{
	struct two w = { 0 };
	const struct top_row *r;

	two_build(&w);
	cr_assert_float_eq(w.f.seconds, 2.0, 1e-9);
	r = find(&w.f, "churn_small", 10);
	cr_assert_not_null(r);
	cr_assert_float_eq(r->alloc, 2100, 1e-9);
	cr_assert_float_eq(r->allocs, 21, 1e-9);
	cr_assert_float_eq(r->growth, 100, 1e-9);
	cr_assert_float_eq(r->inuse, 600, 1e-9);
	/* new since prev: everything is growth */
	r = find(&w.f, "churn_small", 12);
	cr_assert_not_null(r);
	cr_assert_float_eq(r->growth, 500, 1e-9);
	cr_assert_float_eq(r->alloc, 500, 1e-9);
	/* freed: negative growth, nothing in use */
	r = find(&w.f, "large_buffers", 20);
	cr_assert_not_null(r);
	cr_assert_float_eq(r->growth, -(double)(1 << 20), 1e-9);
	cr_assert_float_eq(r->alloc, 2 << 20, 1e-9);
	cr_assert_float_eq(r->inuse, 0, 1e-9);
	/* unchanged but holding memory: shown, with zero deltas */
	r = find(&w.f, "parse_request", 30);
	cr_assert_not_null(r);
	cr_assert_float_eq(r->growth, 0, 1e-9);
	cr_assert_float_eq(r->inuse, 400, 1e-9);
	cr_assert_eq(w.f.nrows, 5);
	two_free(&w);
}

Test(top, frame_site_gone_from_snapshot)
{
	static const struct exp_sample only[] = { { 1, { 1 }, { 2, 200, 1, 100 } } };
	struct top_snap a, b;
	struct top_frame f;

	snap_of(only, 1, 0, &a);
	snap_of(NULL, 0, 500000000, &b);
	cr_assert_eq(topview_frame_build(&a, &b, &f), 0);
	cr_assert_eq(f.nrows, 1);
	cr_assert_str_eq(f.rows[0].function, "large_buffers");
	cr_assert_float_eq(f.rows[0].growth, -100, 1e-9);
	cr_assert_float_eq(f.rows[0].alloc, -200, 1e-9);
	cr_assert_float_eq(f.seconds, 0.5, 1e-9);
	topview_frame_free(&f);
	/* a site with nothing, before or after, is no row */
	cr_assert_eq(topview_frame_build(&b, &b, &f), 0);
	cr_assert_eq(f.nrows, 0);
	topview_frame_free(&f);
	topview_snap_free(&a);
	topview_snap_free(&b);
}

static void names(const struct top_row *rows, size_t n, enum top_by by, const char **out)
{
	for (size_t i = 0; i < n; i++)
		out[i] = by == TOP_BY_FILE ? rows[i].file : rows[i].function;
}

Test(top, rows_sorted_by_each_key)
{
	struct two w = { 0 };
	struct top_row *rows;
	const char *nm[8];
	size_t n;

	two_build(&w);
	cr_assert_eq(topview_rows(&w.f, TOP_BY_SITE, TOP_SORT_GROWTH, &rows, &n), 0);
	cr_assert_eq(n, 5);
	names(rows, n, TOP_BY_SITE, nm);
	/* +500, +100, 0 (400 in use), 0 (64 in use), -1 MiB */
	cr_assert_str_eq(nm[0], "churn_small");
	cr_assert_eq(rows[0].line, 12);
	cr_assert_eq(rows[1].line, 10);
	cr_assert_str_eq(nm[2], "parse_request");
	cr_assert_str_eq(nm[3], "lib.so+0x1234");
	cr_assert_str_eq(nm[4], "large_buffers");
	free(rows);
	cr_assert_eq(topview_rows(&w.f, TOP_BY_SITE, TOP_SORT_ALLOC, &rows, &n), 0);
	names(rows, n, TOP_BY_SITE, nm);
	cr_assert_str_eq(nm[0], "large_buffers");
	cr_assert_eq(rows[1].line, 10);
	cr_assert_eq(rows[2].line, 12);
	free(rows);
	cr_assert_eq(topview_rows(&w.f, TOP_BY_SITE, TOP_SORT_INUSE, &rows, &n), 0);
	names(rows, n, TOP_BY_SITE, nm);
	/* 600, 500, 400, 64, 0 */
	cr_assert_eq(rows[0].line, 10);
	cr_assert_eq(rows[1].line, 12);
	cr_assert_str_eq(nm[2], "parse_request");
	cr_assert_str_eq(nm[3], "lib.so+0x1234");
	cr_assert_str_eq(nm[4], "large_buffers");
	for (size_t i = 1; i < n; i++)
		cr_assert_geq(rows[i - 1].inuse, rows[i].inuse);
	free(rows);
	two_free(&w);
}

Test(top, rows_collapsed_by_function_and_file)
{
	struct two w = { 0 };
	struct top_row *rows;
	size_t n;

	two_build(&w);
	cr_assert_eq(topview_rows(&w.f, TOP_BY_FUNCTION, TOP_SORT_GROWTH, &rows, &n), 0);
	/* churn_small's two lines are one row */
	cr_assert_eq(n, 4);
	cr_assert_str_eq(rows[0].function, "churn_small");
	cr_assert_null(rows[0].file);
	cr_assert_eq(rows[0].line, 0);
	cr_assert_float_eq(rows[0].growth, 600, 1e-9);
	cr_assert_float_eq(rows[0].alloc, 2600, 1e-9);
	cr_assert_float_eq(rows[0].allocs, 26, 1e-9);
	cr_assert_float_eq(rows[0].inuse, 1100, 1e-9);
	free(rows);
	cr_assert_eq(topview_rows(&w.f, TOP_BY_FILE, TOP_SORT_INUSE, &rows, &n), 0);
	/* alloc.c (churn_small twice, large_buffers), req.c, and the unknown file */
	cr_assert_eq(n, 3);
	cr_assert_str_eq(rows[0].file, "/src/app/alloc.c");
	cr_assert_null(rows[0].function);
	cr_assert_float_eq(rows[0].inuse, 1100, 1e-9);
	cr_assert_float_eq(rows[0].growth, 600 - (1 << 20), 1e-9);
	cr_assert_str_eq(rows[1].file, "/src/app/req.c");
	cr_assert_str_eq(rows[2].file, "");
	free(rows);
	two_free(&w);
}

Test(top, rows_of_nothing)
{
	struct top_frame f = { 0 };
	struct top_row *rows = (struct top_row *)&f;
	size_t n = 99;

	cr_assert_eq(topview_rows(&f, TOP_BY_SITE, TOP_SORT_GROWTH, &rows, &n), 0);
	cr_assert_null(rows);
	cr_assert_eq(n, 0);
}

Test(top, total)
{
	struct two w = { 0 };
	struct top_row t;

	two_build(&w);
	t = topview_total(&w.f);
	cr_assert_float_eq(t.inuse, 600 + 500 + 400 + 64, 1e-9);
	cr_assert_float_eq(t.alloc, 2100 + 500 + (2 << 20), 1e-9);
	cr_assert_float_eq(t.growth, 100 + 500 - (1 << 20), 1e-9);
	two_free(&w);
}

/* Keys applied in turn to one ui: what each returns and the ui after it. */
static const struct {
	const char *keys;
	enum top_action act;
	enum top_sort sort;
	enum top_by by;
	bool paused;
} key_steps[] = {
	{ "a", TOP_REDRAW, TOP_SORT_ALLOC, TOP_BY_SITE, false },
	{ "u", TOP_REDRAW, TOP_SORT_INUSE, TOP_BY_SITE, false },
	{ "g", TOP_REDRAW, TOP_SORT_GROWTH, TOP_BY_SITE, false },
	{ "\t\t", TOP_REDRAW, TOP_SORT_INUSE, TOP_BY_SITE, false },
	{ "\t", TOP_REDRAW, TOP_SORT_GROWTH, TOP_BY_SITE, false },
	{ "f", TOP_REDRAW, TOP_SORT_GROWTH, TOP_BY_FUNCTION, false },
	{ "F", TOP_REDRAW, TOP_SORT_GROWTH, TOP_BY_FILE, false },
	{ "c", TOP_REDRAW, TOP_SORT_GROWTH, TOP_BY_SITE, false },
	{ "fs", TOP_REDRAW, TOP_SORT_GROWTH, TOP_BY_SITE, false },
	{ "p", TOP_REDRAW, TOP_SORT_GROWTH, TOP_BY_SITE, true },
	{ " ", TOP_REDRAW, TOP_SORT_GROWTH, TOP_BY_SITE, false },
	{ "\x0c", TOP_REDRAW, TOP_SORT_GROWTH, TOP_BY_SITE, false },
	{ "xyz", TOP_NONE, TOP_SORT_GROWTH, TOP_BY_SITE, false },
	{ "q", TOP_QUIT, TOP_SORT_GROWTH, TOP_BY_SITE, false },
	{ "Q", TOP_QUIT, TOP_SORT_GROWTH, TOP_BY_SITE, false },
	{ "\x03", TOP_QUIT, TOP_SORT_GROWTH, TOP_BY_SITE, false },
	{ "\x04", TOP_QUIT, TOP_SORT_GROWTH, TOP_BY_SITE, false },
	/* keys before a quit still apply; the quit wins */
	{ "aq", TOP_QUIT, TOP_SORT_ALLOC, TOP_BY_SITE, false },
	/* End (ESC [ F), arrows, F1 (ESC O P), F5 (ESC [ 1 5 ~), Alt-u (ESC u), a lone ESC */
	{ "\x1b[F", TOP_NONE, TOP_SORT_ALLOC, TOP_BY_SITE, false },
	{ "\x1b[A\x1b[B", TOP_NONE, TOP_SORT_ALLOC, TOP_BY_SITE, false },
	{ "\x1bOP", TOP_NONE, TOP_SORT_ALLOC, TOP_BY_SITE, false },
	{ "\x1b[15~", TOP_NONE, TOP_SORT_ALLOC, TOP_BY_SITE, false },
	{ "\x1bu", TOP_NONE, TOP_SORT_ALLOC, TOP_BY_SITE, false },
	{ "\x1b", TOP_NONE, TOP_SORT_ALLOC, TOP_BY_SITE, false },
	/* a key after a sequence counts */
	{ "\x1b[Dg", TOP_REDRAW, TOP_SORT_GROWTH, TOP_BY_SITE, false },
};

Test(top, keys)
{
	struct top_ui ui = { TOP_SORT_GROWTH, TOP_BY_SITE, false };

	for (size_t i = 0; i < N(key_steps); i++) {
		const char *k = key_steps[i].keys;

		cr_assert_eq(topview_keys(&ui, k, strlen(k)), key_steps[i].act, "step %zu", i);
		cr_assert_eq(ui.sort, key_steps[i].sort, "step %zu", i);
		cr_assert_eq(ui.by, key_steps[i].by, "step %zu", i);
		cr_assert_eq(ui.paused, key_steps[i].paused, "step %zu", i);
	}
}

static struct top_view view_of(const struct top_frame *f, enum top_sort s, enum top_by by)
{
	return (struct top_view){
		.pid = 4242,
		.comm = "alloc-service",
		.elapsed = 65,
		.samples = 1000,
		.interval_samples = 10,
		.sampled_bytes = 3 << 20,
		.frees = 900,
		.ui = { s, by, false },
		.frame = f,
	};
}

/* Rows of the two-snapshot frame by site, at a sort and a width; row -1: the titles. */
static const struct {
	enum top_sort sort;
	int row, width;
	const char *want;
} row_cases[] = {
	/* 80 columns: three numbers per second over 2 s (growth, allocation, in use), the name */
	{ TOP_SORT_GROWTH, 0, 80, "      +250 B       250 B       500 B  churn_small alloc.c:12" },
	{ TOP_SORT_GROWTH, 4, 80,
	  "  -512.0 KiB     1.0 MiB         0 B  large_buffers alloc.c:20" },
	{ TOP_SORT_GROWTH, -1, 80, "    GROWTH/s     ALLOC/s      IN USE  SITE" },
	/* wider: the objects per second too */
	{ TOP_SORT_GROWTH, 0, 100,
	  "      +250 B       250 B         2.5       500 B  churn_small alloc.c:12" },
	{ TOP_SORT_GROWTH, -1, 100, "    GROWTH/s     ALLOC/s    ALLOCS/s      IN USE  SITE" },
	/* 60 columns: two numbers, in use (sorted) and growth */
	{ TOP_SORT_INUSE, 0, 60, "       +50 B       600 B  churn_small alloc.c:10" },
	{ TOP_SORT_INUSE, -1, 60, "    GROWTH/s      IN USE  SITE" },
	/* 30: only the sorted one, the name cut with "..." to fit the width exactly */
	{ TOP_SORT_INUSE, 2, 30, "       400 B  parse_request..." },
	{ TOP_SORT_ALLOC, 0, 30, "     1.0 MiB  large_buffers..." },
	/* narrower than the number: cut, never longer than the width */
	{ TOP_SORT_INUSE, 0, 8, "       6" },
};

Test(top, rows_formatted)
{
	for (size_t i = 0; i < N(row_cases); i++) {
		struct two w = { 0 };
		char buf[512];

		two_view(&w, row_cases[i].sort, TOP_BY_SITE);
		if (row_cases[i].row < 0)
			topview_format_titles(buf, sizeof(buf), &w.v, row_cases[i].width);
		else
			topview_format_row(buf, sizeof(buf), &w.rows[row_cases[i].row], &w.v,
					   row_cases[i].width);
		cr_assert_str_eq(buf, row_cases[i].want, "case %zu", i);
		two_free(&w);
	}
}

Test(top, file_rows_keep_the_end_of_the_path)
{
	static const struct exp_sample s[] = { { 1, { 0 }, { 1, 100, 1, 100 } } };
	struct top_snap a, b;
	struct top_frame f;
	struct top_row *rows;
	struct top_view v;
	char buf[512];
	size_t n;

	snap_of(NULL, 0, 0, &a);
	snap_of(s, 1, 1000000000, &b);
	cr_assert_eq(topview_frame_build(&a, &b, &f), 0);
	v = view_of(&f, TOP_SORT_GROWTH, TOP_BY_FILE);
	cr_assert_eq(topview_rows(&f, v.ui.by, v.ui.sort, &rows, &n), 0);
	topview_format_row(buf, sizeof(buf), &rows[0], &v, 26);
	cr_assert_str_eq(buf, "      +100 B  ...p/alloc.c");
	topview_format_row(buf, sizeof(buf), &rows[0], &v, 0);
	cr_assert_str_eq(buf, "      +100 B       100 B           1       100 B  /src/app/alloc.c");
	free(rows);
	topview_frame_free(&f);
	topview_snap_free(&a);
	topview_snap_free(&b);
}

Test(top, names_are_printable)
{
	struct top_row r = { .function = "evil\x1b[2Jname\xc3\xa9", .file = "", .alloc = 1 };
	struct top_frame f = { .rows = &r, .nrows = 1, .seconds = 1 };
	struct top_view v = view_of(&f, TOP_SORT_ALLOC, TOP_BY_FUNCTION);
	char buf[256];

	topview_format_row(buf, sizeof(buf), &r, &v, 80);
	cr_assert(strstr(buf, "evil\\x1b[2Jname\\xc3\\xa9"), "%s", buf);
	for (const char *p = buf; *p; p++)
		cr_assert(*p >= 0x20 && *p < 0x7f, "byte 0x%02x in %s", (unsigned char)*p, buf);
}

/* Splits a rendering into lines; returns their number. */
static size_t lines_of(char *text, char **lines, size_t max)
{
	size_t n = 0;

	for (char *s = text; *s && n < max;) {
		char *nl = strchr(s, '\n');

		cr_assert_not_null(nl, "every line ends with a newline");
		*nl = '\0';
		lines[n++] = s;
		s = nl + 1;
	}
	return n;
}

static char *render_screen(const struct top_view *v, int w, int h)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	cr_assert_not_null(f);
	cr_assert_eq(topview_render_screen(f, v, w, h), 0);
	cr_assert_eq(fclose(f), 0);
	return buf;
}

Test(top, screen_80x24)
{
	struct two w = { 0 };
	struct top_view v;
	char *text, *lines[64];
	size_t n;

	two_build(&w);
	v = view_of(&w.f, TOP_SORT_GROWTH, TOP_BY_FUNCTION);
	text = render_screen(&v, 80, 24);
	n = lines_of(text, lines, 64);
	cr_assert_eq(n, 24);
	for (size_t i = 0; i < n; i++)
		cr_assert_leq(strlen(lines[i]), 80, "line %zu: %s", i, lines[i]);
	cr_assert_str_eq(lines[0], "heapbpf top  pid 4242 (alloc-service)  up 1m05s");
	cr_assert_str_eq(lines[1], "samples 1000 (+10)  sampled 3.0 MiB  frees 900  drops 0");
	free(text);
	/* frees of objects sampled before attach: apart, as the summary keeps them */
	v.earlier_frees = 35;
	text = render_screen(&v, 80, 24);
	n = lines_of(text, lines, 64);
	cr_assert_str_eq(lines[1], "samples 1000 (+10)  sampled 3.0 MiB  frees 900 (+35 from "
				   "before attach)  drops 0");
	v.earlier_frees = 0;
	/* what heapbpf saw is only since it attached, and says so */
	cr_assert(strncmp(lines[2], "since attach: in use 1.5 KiB", 28) == 0, "%s", lines[2]);
	cr_assert_str_eq(lines[3], "sorted by in-use growth, by function");
	cr_assert(strstr(lines[4], "GROWTH/s") && strstr(lines[4], "FUNCTION"));
	cr_assert(strstr(lines[5], "churn_small"));
	cr_assert(strstr(lines[6], "parse_request"));
	cr_assert(strstr(lines[7], "lib.so+0x1234"));
	cr_assert(strstr(lines[8], "large_buffers"));
	cr_assert_str_eq(lines[9], "");
	cr_assert(strstr(lines[23], "q quit"), "%s", lines[23]);
	free(text);
	/* where jemalloc's tables can be read, the whole live heap beside it */
	v.live_known = true;
	v.live_bytes = 535.0 * 1024 * 1024;
	text = render_screen(&v, 80, 24);
	lines_of(text, lines, 64);
	cr_assert_str_eq(lines[0],
			 "heapbpf top  pid 4242 (alloc-service)  up 1m05s  live heap 535.0 MiB");
	free(text);
	v.live_known = false;
	/* paused: said first, so that a narrow terminal shows it */
	v.ui.paused = true;
	text = render_screen(&v, 30, 24);
	cr_assert(strncmp(text, "heapbpf top  [paused]", 21) == 0, "%s", text);
	free(text);
	two_free(&w);
}

Test(top, screen_small_and_before_the_first_interval)
{
	struct two w = { 0 };
	struct top_view v;
	char *text, *lines[16];

	two_build(&w);
	v = view_of(&w.f, TOP_SORT_ALLOC, TOP_BY_SITE);
	/* 40x8: header, titles, two rows, the keys; nothing wider than 40 */
	text = render_screen(&v, 40, 8);
	cr_assert_eq(lines_of(text, lines, 16), 8);
	for (size_t i = 0; i < 8; i++)
		cr_assert_leq(strlen(lines[i]), 40, "line %zu: %s", i, lines[i]);
	cr_assert(strstr(lines[5], "large_buffers"), "%s", lines[5]);
	cr_assert(strstr(lines[6], "churn_small"), "%s", lines[6]);
	free(text);
	/* 3 lines: two of the header and the keys */
	text = render_screen(&v, 20, 3);
	cr_assert_eq(lines_of(text, lines, 16), 3);
	cr_assert(strstr(lines[2], "g/a/u"), "%s", lines[2]);
	free(text);
	v.frame = NULL;
	text = render_screen(&v, 80, 24);
	cr_assert(strstr(text, "waiting for the first interval"), "%s", text);
	cr_assert(strstr(text, "samples 1000"), "%s", text);
	free(text);
	two_free(&w);
}

Test(top, plain_table)
{
	struct two w = { 0 };
	struct top_view v;
	char *buf = NULL, *lines[32];
	size_t len = 0, n;
	FILE *f = open_memstream(&buf, &len);

	two_build(&w);
	v = view_of(&w.f, TOP_SORT_ALLOC, TOP_BY_SITE);
	v.drops = 3;
	cr_assert_not_null(f);
	cr_assert_eq(topview_render_table(f, &v, 3), 0);
	cr_assert_eq(topview_render_table(f, &v, TOP_TABLE_ROWS), 0);
	cr_assert_eq(fclose(f), 0);
	n = lines_of(buf, lines, 32);
	/* 4 header lines, titles, 3 rows, a blank line; then the whole table: 5 rows */
	cr_assert_eq(n, 9 + 11);
	cr_assert_str_eq(lines[0], "heapbpf top  pid 4242 (alloc-service)  up 1m05s");
	cr_assert(strstr(lines[1], "drops 3 (raise --ringbuf-size)"), "%s", lines[1]);
	cr_assert_str_eq(lines[4], "    GROWTH/s     ALLOC/s    ALLOCS/s      IN USE  SITE");
	cr_assert_str_eq(
		lines[5],
		"  -512.0 KiB     1.0 MiB           1         0 B  large_buffers alloc.c:20");
	cr_assert(strstr(lines[6], "churn_small alloc.c:10"), "%s", lines[6]);
	cr_assert(strstr(lines[7], "churn_small alloc.c:12"), "%s", lines[7]);
	cr_assert_str_eq(lines[8], "");
	cr_assert(strstr(lines[18], "lib.so+0x1234"), "%s", lines[18]);
	cr_assert_str_eq(lines[19], "");
	free(buf);
	two_free(&w);
}

/* heapbpf top's command line (cli.c): what it takes and what it refuses. */
struct parsed {
	int rc;
	struct cli c;
	char *err;
	char *argv[16];
};

static void parse_top(struct parsed *p, const char *const *args)
{
	FILE *saved = stderr;
	size_t len = 0;
	int argc = 0;

	memset(p, 0, sizeof(*p));
	p->argv[argc++] = hb_xstrdup("heapbpf");
	for (; args[argc - 1]; argc++) {
		cr_assert_lt(argc, 15);
		p->argv[argc] = hb_xstrdup(args[argc - 1]);
	}
	stderr = open_memstream(&p->err, &len);
	cr_assert_not_null(stderr);
	p->rc = hb_cli_parse(argc, p->argv, &p->c);
	fclose(stderr);
	stderr = saved;
}

static void parsed_free(struct parsed *p)
{
	for (size_t i = 0; i < 16; i++)
		free(p->argv[i]);
	free(p->err);
	free(p->c.debug_dirs);
}

#define parse(p, ...) parse_top(p, (const char *const[]){ __VA_ARGS__, NULL })

Test(top, cli_defaults)
{
	struct parsed p;

	parse(&p, "top", "--pid", "42");
	cr_assert_eq(p.rc, 0, "%s", p.err);
	cr_assert_eq(p.c.mode, MODE_TOP);
	cr_assert_eq(p.c.run.pid, 42);
	/* until q, not 10 s; and no profile unless -o */
	cr_assert_eq(p.c.run.duration, 0);
	cr_assert_null(p.c.run.output);
	cr_assert_eq(p.c.run.top_sort, TOP_SORT_GROWTH);
	cr_assert_eq(p.c.run.top_by, TOP_BY_SITE);
	parsed_free(&p);
	parse(&p, "top", "-p", "42", "--sort", "alloc", "--by", "file", "-d", "30", "-o", "x.pb.gz",
	      "--raw");
	cr_assert_eq(p.rc, 0, "%s", p.err);
	cr_assert_eq(p.c.run.top_sort, TOP_SORT_ALLOC);
	cr_assert_eq(p.c.run.top_by, TOP_BY_FILE);
	cr_assert_eq(p.c.run.duration, 30);
	cr_assert_str_eq(p.c.run.output, "x.pb.gz");
	cr_assert(p.c.run.raw);
	parsed_free(&p);
	parse(&p, "top", "--pidfile", "/run/x.pid");
	cr_assert_eq(p.rc, 0, "%s", p.err);
	cr_assert_str_eq(p.c.run.pidfile, "/run/x.pid");
	parsed_free(&p);
}

static void refused(const char *const *args, const char *why)
{
	struct parsed p;

	parse_top(&p, args);
	cr_assert_eq(p.rc, -EINVAL, "accepted: %s", args[1]);
	cr_assert(strstr(p.err, why), "stderr: %s", p.err);
	parsed_free(&p);
}

#define refuse(why, ...) refused((const char *const[]){ __VA_ARGS__, NULL }, why)

Test(top, cli_refusals)
{
	refuse("--pid is required", "top");
	refuse("unknown --sort \"size\"", "top", "-p", "1", "--sort", "size");
	refuse("unknown --by \"line\"", "top", "-p", "1", "--by", "line");
	refuse("--sort and --by apply to heapbpf top", "-p", "1", "--sort", "alloc");
	refuse("--sort and --by apply to heapbpf top", "-p", "1", "--by", "file");
	refuse("heapbpf top shows one process", "top", "--unit", "redis");
	refuse("heapbpf top shows one process", "top", "-p", "1", "--interval", "5", "--output-dir",
	       "/tmp");
	refuse("heapbpf top shows one process", "top", "-p", "1", "--record", "x.hbr");
	refuse("heapbpf top shows one process", "top", "-p", "1", "--follow-forks");
	refuse("heapbpf top shows one process", "top", "-p", "1", "--reset");
	refuse("draws on stdout", "top", "-p", "1", "-o", "-");
	refuse("apply to heapbpf report", "top", "-p", "1", "--from", "3");
}

Test(top, cli_help_has_top)
{
	struct parsed p = { 0 };

	p.argv[0] = hb_xstrdup("heapbpf");
	p.argv[1] = hb_xstrdup("top");
	p.argv[2] = hb_xstrdup("--help");
	p.rc = hb_cli_parse(3, p.argv, &p.c);
	cr_assert_eq(p.rc, 1);
	cr_assert(p.c.help);
	cr_assert_eq(p.c.command, MODE_TOP);
	cr_assert(strstr(top_help, "Usage: heapbpf top --pid PID [options]"));
	cr_assert(strstr(top_help, "sudo heapbpf top --pid 4242"));
	cr_assert(strstr(top_help, "--sort KEY"));
	cr_assert(strstr(top_help, "--by KEY"));
	for (int i = 0; i < 3; i++)
		free(p.argv[i]);
}
