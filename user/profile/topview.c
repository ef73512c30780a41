// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdbool.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/errmsg.h"
#include "profile/sites.h"
#include "profile/summary.h"
#include "profile/topview.h"
#include "profile/wrappers.h"

static const char *const sort_keys[TOP_NSORTS] = { "growth", "alloc", "inuse" };
static const char *const sort_names[TOP_NSORTS] = { "in-use growth", "allocation rate", "in use" };
static const char *const by_keys[TOP_NBYS] = { "site", "function", "file" };

/* The index of s in names, or -EINVAL. */
static int name_index(const char *const *names, int n, const char *s)
{
	for (int i = 0; i < n; i++) {
		if (strcmp(s, names[i]) == 0)
			return i;
	}
	return -EINVAL;
}

int topview_sort_parse(const char *s, enum top_sort *out)
{
	int i = name_index(sort_keys, TOP_NSORTS, s);

	if (i >= 0)
		*out = i;
	return i < 0 ? i : 0;
}

int topview_by_parse(const char *s, enum top_by *out)
{
	int i = name_index(by_keys, TOP_NBYS, s);

	if (i >= 0)
		*out = i;
	return i < 0 ? i : 0;
}

/* ---- snapshots and deltas ------------------------------------------------ */

static int strcmp_null(const char *a, const char *b)
{
	return strcmp(a ? a : "", b ? b : "");
}

static int cmp_site_key(const char *fa, const char *la, int64_t na, const char *fb, const char *lb,
			int64_t nb)
{
	int c = strcmp_null(fa, fb);

	if (!c)
		c = strcmp_null(la, lb);
	if (!c && na != nb)
		c = na < nb ? -1 : 1;
	return c;
}

static int cmp_site(const void *a, const void *b)
{
	const struct top_site *x = a, *y = b;

	return cmp_site_key(x->function, x->file, x->line, y->function, y->file, y->line);
}

void topview_snap_free(struct top_snap *s)
{
	for (size_t i = 0; i < s->nsites; i++) {
		free(s->sites[i].function);
		free(s->sites[i].file);
	}
	free(s->sites);
	s->sites = NULL;
	s->nsites = 0;
}

int topview_snap_build(const struct hb_profile *p, int64_t mono_ns, struct top_snap *out)
{
	struct top_site *sites;
	struct site *v;
	size_t n, made = 0;
	bool ok;
	int rc;

	memset(out, 0, sizeof(*out));
	out->mono_ns = mono_ns;
	rc = sites_reduce(p, SITES_BY_LINE, &v, &n);
	if (rc || !n)
		return rc;
	sites = calloc(n, sizeof(*sites));
	ok = sites != NULL;
	for (size_t i = 0; ok && i < n; i++) {
		sites[i].function = strdup(v[i].function);
		sites[i].file = strdup(v[i].file);
		sites[i].line = v[i].line;
		memcpy(sites[i].v, v[i].v, sizeof(sites[i].v));
		made = i + 1;
		ok = sites[i].function && sites[i].file;
	}
	free(v);
	out->sites = sites;
	out->nsites = made;
	if (!ok) {
		topview_snap_free(out);
		return -ENOMEM;
	}
	return 0;
}

void topview_frame_free(struct top_frame *f)
{
	for (size_t i = 0; i < f->nrows; i++) {
		free(f->rows[i].function);
		free(f->rows[i].file);
	}
	free(f->rows);
	f->rows = NULL;
	f->nrows = 0;
}

/* The row of one site: b - a, either may be NULL (absent). */
static int site_row(const struct top_site *a, const struct top_site *b, struct top_row *r)
{
	const struct top_site *any = b ? b : a;
	int64_t va[HB_NVALUES] = { 0 }, vb[HB_NVALUES] = { 0 };

	if (!any)
		return 0;
	if (a)
		memcpy(va, a->v, sizeof(va));
	if (b)
		memcpy(vb, b->v, sizeof(vb));
	*r = (struct top_row){
		.line = any->line,
		.growth = (double)(vb[HB_INUSE_SPACE] - va[HB_INUSE_SPACE]),
		.alloc = (double)(vb[HB_ALLOC_SPACE] - va[HB_ALLOC_SPACE]),
		.allocs = (double)(vb[HB_ALLOC_OBJECTS] - va[HB_ALLOC_OBJECTS]),
		.inuse = (double)vb[HB_INUSE_SPACE],
	};
	if (!r->growth && !r->alloc && !r->allocs && !r->inuse)
		return 0;
	r->function = strdup(any->function);
	r->file = strdup(any->file);
	return r->function && r->file ? 1 : -ENOMEM;
}

int topview_frame_build(const struct top_snap *prev, const struct top_snap *cur,
			struct top_frame *out)
{
	size_t i = 0, j = 0;

	memset(out, 0, sizeof(*out));
	out->seconds = (cur->mono_ns - prev->mono_ns) / 1e9;
	out->rows = calloc(prev->nsites + cur->nsites + 1, sizeof(*out->rows));
	if (!out->rows)
		return -ENOMEM;
	/* both sorted by the same key: one merge */
	while (i < prev->nsites || j < cur->nsites) {
		const struct top_site *a = i < prev->nsites ? &prev->sites[i] : NULL;
		const struct top_site *b = j < cur->nsites ? &cur->sites[j] : NULL;
		int c = !a ? 1 : !b ? -1 : cmp_site(a, b);
		int rc = site_row(c <= 0 ? a : NULL, c >= 0 ? b : NULL, &out->rows[out->nrows]);

		i += c <= 0;
		j += c >= 0;
		if (rc > 0 || rc == -ENOMEM)
			out->nrows++;
		if (rc < 0) {
			topview_frame_free(out);
			return rc;
		}
	}
	return 0;
}

static double sort_value(const struct top_row *r, enum top_sort s)
{
	return s == TOP_SORT_GROWTH ? r->growth : s == TOP_SORT_ALLOC ? r->alloc : r->inuse;
}

static int cmp_double_desc(double a, double b)
{
	return a > b ? -1 : a < b ? 1 : 0;
}

static int cmp_row_key(const void *a, const void *b)
{
	const struct top_row *x = a, *y = b;

	return cmp_site_key(x->function, x->file, x->line, y->function, y->file, y->line);
}

static int cmp_row_value(const void *a, const void *b, void *arg)
{
	const struct top_row *x = a, *y = b;
	const enum top_sort *sort = arg;
	int c = cmp_double_desc(sort_value(x, *sort), sort_value(y, *sort));

	for (int s = 0; !c && s < TOP_NSORTS; s++)
		c = cmp_double_desc(sort_value(x, s), sort_value(y, s));
	return c ? c : cmp_row_key(a, b);
}

int topview_rows(const struct top_frame *f, enum top_by by, enum top_sort sort,
		 struct top_row **out, size_t *n)
{
	struct top_row *v;
	size_t k = 0;

	*out = NULL;
	*n = 0;
	if (!f->nrows)
		return 0;
	v = malloc(f->nrows * sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < f->nrows; i++) {
		v[i] = f->rows[i];
		if (by != TOP_BY_SITE)
			v[i].line = 0;
		if (by == TOP_BY_FUNCTION)
			v[i].file = NULL;
		if (by == TOP_BY_FILE)
			v[i].function = NULL;
	}
	qsort(v, f->nrows, sizeof(*v), cmp_row_key);
	for (size_t i = 0; i < f->nrows; i++) {
		if (k && cmp_row_key(&v[k - 1], &v[i]) == 0) {
			v[k - 1].growth += v[i].growth;
			v[k - 1].alloc += v[i].alloc;
			v[k - 1].allocs += v[i].allocs;
			v[k - 1].inuse += v[i].inuse;
			continue;
		}
		v[k++] = v[i];
	}
	qsort_r(v, k, sizeof(*v), cmp_row_value, &sort);
	*out = v;
	*n = k;
	return 0;
}

struct top_row topview_total(const struct top_frame *f)
{
	struct top_row t = { 0 };

	for (size_t i = 0; i < f->nrows; i++) {
		t.growth += f->rows[i].growth;
		t.alloc += f->rows[i].alloc;
		t.allocs += f->rows[i].allocs;
		t.inuse += f->rows[i].inuse;
	}
	return t;
}

/* ---- keys ---------------------------------------------------------------- */

/* Bytes of the escape sequence at buf[0] (ESC): CSI (ESC [ ... final), SS3 (ESC O x), or ESC x. */
static size_t escape_len(const char *buf, size_t n)
{
	size_t i = 2;

	if (n < 2)
		return n;
	if (buf[1] == 'O')
		return n < 3 ? n : 3;
	if (buf[1] != '[')
		return 2;
	/* parameters and intermediates, then one final byte in 0x40-0x7e */
	while (i < n && (buf[i] < 0x40 || buf[i] > 0x7e))
		i++;
	return i < n ? i + 1 : n;
}

/* One key; the letters in the order of enum top_sort and enum top_by. */
static enum top_action key(struct top_ui *ui, char c)
{
	/* Ctrl-C and Ctrl-D: raw mode delivers them as keys */
	static const char quits[] = "qQ\x03\x04", sorts[] = "gau", bys[] = "sfF";
	const char *k;

	if (!c)
		return TOP_NONE;
	if (strchr(quits, c))
		return TOP_QUIT;
	if ((k = strchr(sorts, c)))
		ui->sort = k - sorts;
	else if ((k = strchr(bys, c)))
		ui->by = k - bys;
	else if (c == '\t')
		ui->sort = (ui->sort + 1) % TOP_NSORTS;
	else if (c == 'c')
		ui->by = (ui->by + 1) % TOP_NBYS;
	else if (c == 'p' || c == ' ')
		ui->paused = !ui->paused;
	else if (c != 0x0c) /* Ctrl-L: redraw */
		return TOP_NONE;
	return TOP_REDRAW;
}

enum top_action topview_keys(struct top_ui *ui, const char *buf, size_t n)
{
	enum top_action act = TOP_NONE;

	for (size_t i = 0; i < n;) {
		enum top_action a;

		if (buf[i] == 0x1b) {
			i += escape_len(buf + i, n - i);
			continue;
		}
		a = key(ui, buf[i++]);
		if (a == TOP_QUIT)
			return a;
		if (a > act)
			act = a;
	}
	return act;
}

/* ---- formatting ---------------------------------------------------------- */

enum col { COL_GROWTH, COL_ALLOC, COL_ALLOCS, COL_INUSE, NCOLS };

static const char *const col_titles[NCOLS] = { "GROWTH/s", "ALLOC/s", "ALLOCS/s", "IN USE" };
static const char *const by_titles[TOP_NBYS] = { "SITE", "FUNCTION", "FILE" };

/* The columns shown in width: the sorted one always, then by this order, in screen order. */
static void visible_cols(const struct top_view *v, int width, bool show[NCOLS])
{
	static const enum col order[] = { COL_GROWTH, COL_ALLOC, COL_INUSE, COL_ALLOCS };
	enum col first = v->ui.sort == TOP_SORT_GROWTH	? COL_GROWTH
			 : v->ui.sort == TOP_SORT_ALLOC ? COL_ALLOC
							: COL_INUSE;
	/* a name needs room: TOP_NAME_ROOM columns of it before a number is dropped; 0: every one */
	int fit = width > 0 ? (width - TOP_NAME_ROOM) / TOP_COL_WIDTH : NCOLS;

	memset(show, 0, NCOLS * sizeof(bool));
	show[first] = true;
	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]) && fit > 1; i++) {
		if (!show[order[i]]) {
			show[order[i]] = true;
			fit--;
		}
	}
}

static void fmt_bytes(char *buf, size_t len, double b, bool sign)
{
	const char *s = b < 0 ? "-" : sign && b > 0 ? "+" : "";
	size_t n = strlen(s);

	if (len <= n + 1) {
		buf[0] = '\0';
		return;
	}
	memcpy(buf, s, n);
	summary_bytes(buf + n, len - n, b < 0 ? -b : b);
}

static void fmt_count(char *buf, size_t len, double c)
{
	if (c < 10 && c != (double)(int64_t)c)
		snprintf(buf, len, "%.1f", c);
	else if (c < 10000)
		snprintf(buf, len, "%.0f", c);
	else if (c < 1e7)
		snprintf(buf, len, "%.1fk", c / 1e3);
	else
		snprintf(buf, len, "%.1fM", c / 1e6);
}

static void fmt_col(char *buf, size_t len, const struct top_row *r, enum col c, double seconds)
{
	double per = seconds > 0 ? 1 / seconds : 1;

	switch (c) {
	case COL_GROWTH:
		fmt_bytes(buf, len, r->growth * per, true);
		break;
	case COL_ALLOC:
		fmt_bytes(buf, len, r->alloc * per, false);
		break;
	case COL_ALLOCS:
		fmt_count(buf, len, r->allocs * per);
		break;
	default:
		fmt_bytes(buf, len, r->inuse, false);
		break;
	}
}

/* Appends src to dst (at *pos, buffer len) as hb_clean shows it. */
static void put_clean(char *dst, size_t len, size_t *pos, const char *src)
{
	if (*pos + 1 >= len)
		return;
	hb_clean(dst + *pos, len - *pos, src);
	*pos += strlen(dst + *pos);
}

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');

	return s ? s + 1 : path;
}

/* The row's name, whole: "function file:line", "function" or "path". */
static void row_name(char *buf, size_t len, const struct top_row *r, enum top_by by)
{
	size_t pos = 0;
	char num[24];

	buf[0] = '\0';
	if (by == TOP_BY_FILE) {
		put_clean(buf, len, &pos, r->file && r->file[0] ? r->file : "(unknown file)");
		return;
	}
	put_clean(buf, len, &pos, r->function ? r->function : "?");
	if (by != TOP_BY_SITE || !r->file || !r->file[0])
		return;
	put_clean(buf, len, &pos, " ");
	put_clean(buf, len, &pos, base_name(r->file));
	if (r->line) {
		snprintf(num, sizeof(num), ":%" PRId64, r->line);
		put_clean(buf, len, &pos, num);
	}
}

/* s cut to room columns: a path keeps its end ("...dir/file.c"), a name its start. */
static void cut(char *s, int room, bool keep_end)
{
	size_t n = strlen(s);

	if (room < 0)
		room = 0;
	if (n <= (size_t)room)
		return;
	if (room < 4) {
		s[room] = '\0';
	} else if (keep_end) {
		memmove(s + 3, s + n - (room - 3), room - 3 + 1);
		memcpy(s, "...", 3);
	} else {
		memcpy(s + room - 3, "...", 4);
	}
}

/* The numbers of the visible columns, or their titles when r is NULL; returns the width used. */
static int put_cols(char *buf, size_t len, const struct top_row *r, const struct top_view *v,
		    int width)
{
	bool show[NCOLS];
	size_t pos = 0;
	char cell[32];

	visible_cols(v, width, show);
	buf[0] = '\0';
	for (int c = 0; c < NCOLS; c++) {
		if (!show[c])
			continue;
		if (r)
			fmt_col(cell, sizeof(cell), r, c, v->frame ? v->frame->seconds : 1);
		pos += snprintf(buf + pos, len > pos ? len - pos : 0, "%*s", TOP_COL_WIDTH,
				r ? cell : col_titles[c]);
	}
	/* two spaces before the name */
	pos += snprintf(buf + pos, len > pos ? len - pos : 0, "  ");
	return (int)pos;
}

void topview_format_row(char *buf, size_t len, const struct top_row *r, const struct top_view *v,
			int width)
{
	char name[1024];
	int used = put_cols(buf, len, r, v, width);

	row_name(name, sizeof(name), r, v->ui.by);
	/* width 0: a plain table, names whole */
	if (width > 0)
		cut(name, width - used, v->ui.by == TOP_BY_FILE);
	snprintf(buf + used, len > (size_t)used ? len - used : 0, "%s", name);
	if (width > 0 && strlen(buf) > (size_t)width)
		buf[width] = '\0';
}

void topview_format_titles(char *buf, size_t len, const struct top_view *v, int width)
{
	int used = put_cols(buf, len, NULL, v, width);

	snprintf(buf + used, len > (size_t)used ? len - used : 0, "%s", by_titles[v->ui.by]);
	if (width > 0 && strlen(buf) > (size_t)width)
		buf[width] = '\0';
}

static void fmt_elapsed(char *buf, size_t len, double s)
{
	long t = (long)s;

	if (t < 60)
		snprintf(buf, len, "%lds", t);
	else if (t < 3600)
		snprintf(buf, len, "%ldm%02lds", t / 60, t % 60);
	else
		snprintf(buf, len, "%ldh%02ldm", t / 3600, t / 60 % 60);
}

/* The header lines (n of them) before the titles. */
#define HEADER_LINES 4

static void header_line(char *buf, size_t len, const struct top_view *v, int i)
{
	struct top_row t = v->frame ? topview_total(v->frame) : (struct top_row){ 0 };
	double per = v->frame && v->frame->seconds > 0 ? 1 / v->frame->seconds : 1;
	char a[32], b[32], c[64], name[64];
	size_t pos = 0;

	switch (i) {
	case 0:
		put_clean(name, sizeof(name), &pos, v->comm ? v->comm : "?");
		fmt_elapsed(a, sizeof(a), v->elapsed);
		b[0] = '\0';
		if (v->live_known)
			summary_bytes(b, sizeof(b), v->live_bytes);
		snprintf(buf, len, "heapbpf top%s  pid %d (%s)  up %s%s%s",
			 v->ui.paused ? "  [paused]" : "", (int)v->pid, name, a,
			 v->live_known ? "  live heap " : "", b);
		break;
	case 1:
		summary_bytes(a, sizeof(a), (double)v->sampled_bytes);
		/* as the summary: frees of objects sampled before attach are not these samples' */
		c[0] = '\0';
		if (v->earlier_frees)
			snprintf(c, sizeof(c), " (+%" PRIu64 " from before attach)",
				 v->earlier_frees);
		snprintf(buf, len,
			 "samples %" PRIu64 " (+%" PRIu64 ")  sampled %s  frees %" PRIu64
			 "%s  drops %" PRIu64 "%s",
			 v->samples, v->interval_samples, a, v->frees, c, v->drops,
			 v->drops ? " (raise --ringbuf-size)" : "");
		break;
	case 2:
		fmt_bytes(a, sizeof(a), t.inuse, false);
		fmt_bytes(b, sizeof(b), t.growth * per, true);
		fmt_bytes(c, sizeof(c), t.alloc * per, false);
		snprintf(buf, len, "since attach: in use %s (%s/s)  allocating %s/s%s", a, b, c,
			 v->raw ? "  (raw sampled bytes)" : "  (estimated)");
		break;
	default:
		snprintf(buf, len, "sorted by %s, by %s", sort_names[v->ui.sort],
			 by_keys[v->ui.by]);
		break;
	}
}

static void put_line(FILE *f, char *line, int width)
{
	if (width > 0 && strlen(line) > (size_t)width)
		line[width] = '\0';
	fprintf(f, "%s\n", line);
}

static const char keys_help[] =
	"g/a/u sort: growth/alloc/in use  s/f/F: site/function/file  p pause  q quit";

int topview_render_screen(FILE *f, const struct top_view *v, int width, int height)
{
	struct top_row *rows = NULL;
	size_t nrows = 0;
	char line[2048];
	int y = 0, rc = 0;

	if (width < 1)
		width = 1;
	if (v->frame)
		rc = topview_rows(v->frame, v->ui.by, v->ui.sort, &rows, &nrows);
	if (rc)
		return rc;
	for (; y < HEADER_LINES && y < height - 1; y++) {
		header_line(line, sizeof(line), v, y);
		put_line(f, line, width);
	}
	if (y < height - 1) {
		topview_format_titles(line, sizeof(line), v, width);
		put_line(f, line, width);
		y++;
	}
	if (!v->frame && y < height - 1) {
		snprintf(line, sizeof(line), "waiting for the first interval...");
		put_line(f, line, width);
		y++;
	}
	for (size_t i = 0; i < nrows && y < height - 1; i++, y++) {
		topview_format_row(line, sizeof(line), &rows[i], v, width);
		put_line(f, line, width);
	}
	for (; y < height - 1; y++)
		fputc('\n', f);
	if (y < height) {
		snprintf(line, sizeof(line), "%s", keys_help);
		put_line(f, line, width);
	}
	free(rows);
	return ferror(f) ? -EIO : 0;
}

int topview_render_table(FILE *f, const struct top_view *v, size_t max_rows)
{
	struct top_row *rows = NULL;
	size_t nrows = 0;
	char line[2048];
	int rc = 0;

	if (v->frame)
		rc = topview_rows(v->frame, v->ui.by, v->ui.sort, &rows, &nrows);
	if (rc)
		return rc;
	for (int i = 0; i < HEADER_LINES; i++) {
		header_line(line, sizeof(line), v, i);
		put_line(f, line, 0);
	}
	/* a table is for reading later: every column, whole names */
	topview_format_titles(line, sizeof(line), v, 0);
	put_line(f, line, 0);
	for (size_t i = 0; i < nrows && i < max_rows; i++) {
		topview_format_row(line, sizeof(line), &rows[i], v, 0);
		put_line(f, line, 0);
	}
	fputc('\n', f);
	free(rows);
	return ferror(f) ? -EIO : 0;
}
