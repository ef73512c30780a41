// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The flame graph page: the HTML around the tree flamegraph.c builds. The
 * viewer's script and style are user/profile/flamegraph.js and
 * user/profile/flamegraph.css, assembled into this object below, so heapbpf
 * carries them and a page never needs anything but itself.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "profile/summary.h"
#include "profile/flamegraph.h"
#include "profile/flamegraph_tree.h"
#include "util/version.h"

/*
 * .incbin takes the path from the assembler's working directory: make
 * compiles from the top of the repository (the Makefile makes this object
 * depend on both files).
 */
__asm__(".pushsection .rodata.heapbpf_flamegraph,\"a\",@progbits\n"
	"fg_script:\n"
	".incbin \"user/profile/flamegraph.js\"\n"
	".byte 0\n"
	"fg_style:\n"
	".incbin \"user/profile/flamegraph.css\"\n"
	".byte 0\n"
	".popsection\n");
extern const char fg_script[] __attribute__((visibility("hidden")));
extern const char fg_style[] __attribute__((visibility("hidden")));

/* JSON flags of a frame; the script knows them by the same values. */
#define FLAG_INLINED 1
#define FLAG_PROCESS 2
#define FLAG_ROOT    4

/*
 * The length of the well-formed UTF-8 sequence at @s (RFC 3629: no
 * overlong forms, surrogates or code points past U+10FFFF), or 0. A NUL
 * fails the continuation test, so it never reads past the string's end.
 */
static size_t utf8_seq(const unsigned char *s)
{
	unsigned char c = s[0], lo = 0x80, hi = 0xbf;
	size_t n;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4;
	else
		return 0;
	if (c == 0xe0)
		lo = 0xa0;
	else if (c == 0xed)
		hi = 0x9f;
	else if (c == 0xf0)
		lo = 0x90;
	else if (c == 0xf4)
		hi = 0x8f;
	if (s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	}
	return n;
}

enum esc { ESC_HTML, ESC_JSON };

/* An ASCII byte as text of an HTML element or attribute, or inside a JSON string. */
static void put_ascii(FILE *f, unsigned char c, enum esc how)
{
	static const char *const html[128] = {
		['&'] = "&amp;", ['<'] = "&lt;", ['>'] = "&gt;", ['"'] = "&quot;", ['\''] = "&#39;",
	};

	if (how == ESC_HTML) {
		if (html[c])
			fputs(html[c], f);
		else
			fputc(c < 0x20 ? ' ' : c, f);
		return;
	}
	/* besides JSON's own, the characters that could end the script element or open markup */
	if (c == '"' || c == '\\')
		fprintf(f, "\\%c", c);
	else if (c < 0x20 || c == '<' || c == '>' || c == '&' || c == '\'')
		fprintf(f, "\\u%04x", c);
	else
		fputc(c, f);
}

/* @s escaped for @how; bytes that are not UTF-8 become U+FFFD, as a browser would show them. */
static void put_escaped(FILE *f, const char *s, enum esc how)
{
	const unsigned char *u = (const unsigned char *)s;

	while (*u) {
		size_t n = utf8_seq(u);

		if (n == 1) {
			put_ascii(f, *u, how);
		} else if (!n) {
			fputs(how == ESC_JSON ? "\\ufffd" : "\xef\xbf\xbd", f);
			n = 1;
		} else if (how == ESC_JSON && n == 3 && u[0] == 0xe2 && u[1] == 0x80 &&
			   (u[2] == 0xa8 || u[2] == 0xa9)) {
			/* line and paragraph separators: JSON allows them, older scripts did not */
			fprintf(f, "\\u202%c", u[2] == 0xa8 ? '8' : '9');
		} else {
			fwrite(u, 1, n, f);
		}
		u += n;
	}
}

static void put_html(FILE *f, const char *s)
{
	put_escaped(f, s, ESC_HTML);
}

/* A JSON string, or null. */
static void put_json(FILE *f, const char *s)
{
	if (!s) {
		fputs("null", f);
		return;
	}
	fputc('"', f);
	put_escaped(f, s, ESC_JSON);
	fputc('"', f);
}

/* 1234567 as "1,234,567". */
static void grouped(int64_t v, char *buf, size_t len)
{
	char digits[24];
	int n = snprintf(digits, sizeof(digits), "%" PRId64, v), lead = v < 0, k = 0;

	for (int i = 0; i < n && k + 2 < (int)len; i++) {
		if (i > lead && (n - i) % 3 == 0)
			buf[k++] = ',';
		buf[k++] = digits[i];
	}
	buf[k] = '\0';
}

/* A piece of a comment. */
struct span {
	const char *s;
	int n;
};

/* What window.c's first comment says: "heapbpf VERSION: pid N (COMM), jemalloc V in PATH". */
struct source {
	struct span version, pid, comm, jemalloc, path;
};

static bool cut(const char **p, const char *sep, struct span *out)
{
	const char *q = strstr(*p, sep);

	if (!q)
		return false;
	*out = (struct span){ *p, (int)(q - *p) };
	*p = q + strlen(sep);
	return true;
}

static bool parse_source(const char *c, struct source *o)
{
	const char *p = c + 8;

	if (strncmp(c, "heapbpf ", 8) != 0 || !cut(&p, ": pid ", &o->version) ||
	    !cut(&p, " (", &o->pid) || !cut(&p, "), jemalloc ", &o->comm) ||
	    !cut(&p, " in ", &o->jemalloc))
		return false;
	o->path = (struct span){ p, (int)strlen(p) };
	for (int i = 0; i < o->pid.n; i++) {
		if (!isdigit((unsigned char)o->pid.s[i]))
			return false;
	}
	return o->pid.n > 0;
}

/* The comment describing the process, or -1. */
static int source_comment(const struct hb_profile *p, struct source *src)
{
	for (size_t i = 0; i < p->ncomments; i++) {
		if (parse_source(p->comments[i], src))
			return (int)i;
	}
	return -1;
}

static void put_span(FILE *f, struct span s)
{
	char *t = strndup(s.s, s.n);

	/* out of memory: the title misses a word, the page is still right */
	if (t)
		put_html(f, t);
	free(t);
}

/* Two pieces of the process comment, escaped, with markup before, between and after. */
static void put_pair(FILE *f, const char *pre, struct span a, const char *mid, struct span b,
		     const char *post)
{
	fputs(pre, f);
	put_span(f, a);
	fputs(mid, f);
	put_span(f, b);
	fputs(post, f);
}

/* The page being written, with what the profile's comments say about the process. */
struct page {
	const struct flamegraph *fg;
	FILE *f;
	struct source src;
	int sc; /* the comment describing the process, or -1 */
};

/* "in use 45.2 MiB in 1,234 objects" */
static void put_totals(const struct page *pg)
{
	const struct flamegraph *fg = pg->fg;
	char b[32], o[32];

	summary_bytes(b, sizeof(b), (double)(fg->nodes[0].v[0]));
	grouped(fg->nodes[0].v[1], o, sizeof(o));
	fprintf(pg->f, "%s %s in %s objects", fg->space == HB_INUSE_SPACE ? "in use" : "allocated",
		b, o);
}

/* a diff's value of the sample type: "45.2 MiB", "1,234 objects"; @sign: "+" when positive */
static void diff_value(const struct flamegraph *fg, int64_t v, bool sign, char *buf, size_t len)
{
	int64_t m = v >= 0 ? v : v == INT64_MIN ? INT64_MAX : -v;
	const char *pre = v < 0 ? "-" : sign && v > 0 ? "+" : "";
	char num[32];

	if (fg->which == fg->objects) {
		grouped(m, num, sizeof(num));
		snprintf(buf, len, "%s%s objects", pre, num);
	} else {
		summary_bytes(num, sizeof(num), (double)(m));
		snprintf(buf, len, "%s%s", pre, num);
	}
}

/* "+64.1 MiB, +6410.0%", "-3 objects", "no change": NEW against BASE */
static void put_change(FILE *f, const struct flamegraph *fg, int64_t base, int64_t new)
{
	char d[48];
	int64_t delta;

	if (__builtin_sub_overflow(new, base, &delta))
		delta = new > base ? INT64_MAX : INT64_MIN;
	if (!delta) {
		fputs("no change", f);
		return;
	}
	diff_value(fg, delta, true, d, sizeof(d));
	fputs(d, f);
	/* from nothing, a share of nothing says nothing */
	if (base > 0)
		fprintf(f, ", %+.1f%%", 100.0 * (double)delta / (double)base);
}

/* "base FILE: in use 1.0 MiB (1,048,576 bytes)": one side of a diff, its file and total */
static void put_side(FILE *f, const struct flamegraph *fg, int side)
{
	const char *file = fg->p->diff_files[side];
	int64_t v = fg->nodes[0].d[side];
	char b[48], exact[32];

	fputs(side ? "new" : "base", f);
	if (file) {
		fputc(' ', f);
		put_html(f, file);
	}
	diff_value(fg, v, false, b, sizeof(b));
	fprintf(f, ": %s %s", fg->space == HB_INUSE_SPACE ? "in use" : "allocated", b);
	if (fg->which != fg->objects) {
		grouped(v, exact, sizeof(exact));
		fprintf(f, " (%s bytes)", exact);
	}
}

/* "in use 1.0 MiB &rarr; 65.1 MiB": a diff's totals, base then new */
static void put_diff_totals(const struct page *pg)
{
	const struct flamegraph *fg = pg->fg;
	char b[48], n[48];

	diff_value(fg, fg->nodes[0].d[0], false, b, sizeof(b));
	diff_value(fg, fg->nodes[0].d[1], false, n, sizeof(n));
	fprintf(pg->f, "%s %s &rarr; %s", fg->space == HB_INUSE_SPACE ? "in use" : "allocated", b,
		n);
}

/* A diff's title: the totals and the change; the line under it: the files, how it is drawn. */
static void write_diff_title(const struct page *pg)
{
	const struct flamegraph *fg = pg->fg;
	FILE *f = pg->f;

	fputs("<h1 id=\"hb-title\">", f);
	put_diff_totals(pg);
	fputs(" (", f);
	put_change(f, fg, fg->nodes[0].d[0], fg->nodes[0].d[1]);
	fputs(")</h1>\n<p id=\"hb-sub\">", f);
	put_side(f, fg, 0);
	fputs(" &middot; ", f);
	put_side(f, fg, 1);
	fprintf(f,
		" &middot; frames as wide as the larger of base and new %s: red grew, blue "
		"shrank, grey unchanged &middot; heapbpf %s</p>\n",
		hb_value_names[fg->which], HEAPBPF_VERSION);
}

/* The title: what process, how much; the line under it: jemalloc, window, how it was measured. */
static void write_title(const struct page *pg)
{
	const struct hb_profile *p = pg->fg->p;
	char when[64] = "", period[32];
	time_t t = p->time_nanos / 1000000000;
	FILE *f = pg->f;
	struct tm tm;

	fputs("<h1 id=\"hb-title\">", f);
	if (pg->sc >= 0)
		put_pair(f, "", pg->src.comm, " &middot; pid ", pg->src.pid, " &middot; ");
	put_totals(pg);
	fputs("</h1>\n<p id=\"hb-sub\">", f);
	if (pg->sc >= 0)
		put_pair(f, "jemalloc ", pg->src.jemalloc, " in ", pg->src.path, " &middot; ");
	if (p->time_nanos && gmtime_r(&t, &tm))
		strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", &tm);
	/* a read of one instant (--live-heap) has no window */
	if (!p->duration_nanos && when[0])
		fprintf(f, "at %s &middot; ", when);
	else
		fprintf(f, "window %s%s%.1f s &middot; ", when, when[0] ? ", " : "",
			p->duration_nanos / 1e9);
	/* a later window's allocations are its own; its in use counts from sampling's start */
	if (p->inuse_since_nanos) {
		char since[64];

		summary_utc(since, sizeof(since), p->inuse_since_nanos);
		fprintf(f, "alloc_* in the window, inuse_* since sampling started at %s &middot; ",
			since);
	}
	summary_bytes(period, sizeof(period), (double)(p->period));
	fprintf(f, "%s, sampling every %s on average &middot; frames sized by %s &middot; heapbpf ",
		p->raw ? "raw sampled counts" : "unbiased estimates", period,
		hb_value_names[pg->fg->which]);
	if (pg->sc >= 0)
		put_span(f, pg->src.version);
	else
		fputs(HEAPBPF_VERSION, f);
	fputs("</p>\n", f);
}

/* The profile's other comments (what was lost, forked children), one note each. */
static void write_notes(const struct page *pg)
{
	const struct hb_profile *p = pg->fg->p;

	fputs("<ul id=\"hb-notes\">", pg->f);
	for (size_t i = 0; i < p->ncomments; i++) {
		if ((int)i == pg->sc)
			continue;
		/* dropped events: the totals are too low, and the page should say so loudly */
		fputs(strstr(p->comments[i], "WARNING") ? "<li class=\"warn\">" : "<li>", pg->f);
		put_html(pg->f, p->comments[i]);
		fputs("</li>", pg->f);
	}
	if (p->nwrappers) {
		fputs("<li class=\"wrappers\">Sites named past allocator wrappers, their frames left "
		      "out here (pprof and folded output keep them): ",
		      pg->f);
		for (size_t i = 0; i < p->nwrappers; i++) {
			fputs(i ? ", " : "", pg->f);
			put_html(pg->f, p->wrappers[i]);
		}
		fputs("</li>", pg->f);
	}
	fputs("</ul>\n", pg->f);
}

/* x in a 1000-wide box for a time of the profile's timeline */
static double timeline_x(const struct hb_profile *p, int64_t t)
{
	const struct hb_timeline_point *tl = p->timeline;
	double span = (double)(tl[p->ntimeline - 1].time_nanos - tl[0].time_nanos);

	return 1000.0 * (double)(t - tl[0].time_nanos) / span;
}

/*
 * The window over time (user/collect/leaks.h): in use as an area, the allocation
 * rate as a line, the peak as a dashed mark, each scaled to its own maximum.
 */
static void write_timeline(const struct page *pg)
{
	const struct hb_profile *p = pg->fg->p;
	const struct hb_timeline_point *tl = p->timeline;
	double max_in = 1, max_rate = 1;
	char b[32], r[32];
	FILE *f = pg->f;

	if (p->ntimeline < 2 || tl[p->ntimeline - 1].time_nanos <= tl[0].time_nanos)
		return;
	for (size_t i = 0; i < p->ntimeline; i++) {
		max_in = tl[i].inuse_space > max_in ? tl[i].inuse_space : max_in;
		max_rate = i && tl[i].alloc_rate > max_rate ? tl[i].alloc_rate : max_rate;
	}
	summary_bytes(b, sizeof(b), (double)(int64_t)max_in);
	summary_bytes(r, sizeof(r), (double)(int64_t)max_rate);
	fprintf(f,
		"<p id=\"hb-timeline-cap\">over %.1f s: in use (area, at most %s), allocated per "
		"second (line, at most %s)%s</p>\n<svg id=\"hb-timeline\" viewBox=\"0 0 1000 100\" "
		"preserveAspectRatio=\"none\" width=\"100%%\" height=\"48\" role=\"img\" "
		"aria-labelledby=\"hb-timeline-cap\"><polygon fill=\"#e8a33c\" "
		"fill-opacity=\"0.5\" points=\"0,100",
		(tl[p->ntimeline - 1].time_nanos - tl[0].time_nanos) / 1e9, b, r,
		p->peak_time_nanos ? ", peak (dashed)" : "");
	for (size_t i = 0; i < p->ntimeline; i++)
		fprintf(f, " %.1f,%.1f", timeline_x(p, tl[i].time_nanos),
			100 - 95 * tl[i].inuse_space / max_in);
	fputs(" 1000,100\"/><polyline fill=\"none\" stroke=\"#3c6ee8\" stroke-width=\"1.5\" "
	      "vector-effect=\"non-scaling-stroke\" points=\"",
	      f);
	/* the first point has no interval before it */
	for (size_t i = 1; i < p->ntimeline; i++)
		fprintf(f, "%s%.1f,%.1f", i > 1 ? " " : "", timeline_x(p, tl[i].time_nanos),
			100 - 95 * tl[i].alloc_rate / max_rate);
	fputs("\"/>", f);
	if (p->peak_time_nanos)
		fprintf(f,
			"<line x1=\"%.1f\" x2=\"%.1f\" y1=\"0\" y2=\"100\" stroke=\"#c0392b\" "
			"stroke-dasharray=\"4 3\" vector-effect=\"non-scaling-stroke\"/>",
			timeline_x(p, p->peak_time_nanos), timeline_x(p, p->peak_time_nanos));
	fputs("</svg>\n", f);
}

static void write_head(const struct page *pg)
{
	fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
	      /* the page may use nothing but itself: no request leaves it */
	      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
	      "style-src 'unsafe-inline'; script-src 'unsafe-inline'\">\n"
	      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
	      "<title>heapbpf: ",
	      pg->f);
	if (pg->fg->diff) {
		fputs("diff, ", pg->f);
		put_diff_totals(pg);
	} else {
		if (pg->sc >= 0)
			put_pair(pg->f, "", pg->src.comm, " (pid ", pg->src.pid, "), ");
		put_totals(pg);
	}
	fprintf(pg->f, "</title>\n<style>\n%s</style>\n</head>\n", fg_style);
}

static void write_controls(FILE *f, bool diff)
{
	fputs("<div id=\"hb-bar\">"
	      "<button id=\"hb-reset\" type=\"button\" disabled>Reset zoom</button>"
	      "<button id=\"hb-invert\" type=\"button\" aria-pressed=\"false\">"
	      "Callers (inverted)</button>"
	      "<input id=\"hb-search\" type=\"search\" placeholder=\"Search functions\" "
	      "aria-label=\"Search functions\" autocomplete=\"off\">"
	      "<span id=\"hb-match\"></span>"
	      "<span id=\"hb-legend\">",
	      f);
	if (diff)
		fputs("<span class=\"hb-sw hb-sw-up\"></span>grew"
		      "<span class=\"hb-sw hb-sw-down\"></span>shrank"
		      "<span class=\"hb-sw hb-sw-same\"></span>unchanged",
		      f);
	fputs("<span class=\"hb-sw hb-sw-i\"></span>inlined"
	      "<span class=\"hb-sw hb-sw-m\"></span>search match</span>"
	      "</div>\n"
	      "<div id=\"hb-details\" aria-live=\"polite\"></div>\n",
	      f);
}

/* The tree: frames (numbered by first use in pre-order), then nodes in pre-order. */
static int write_data(const struct flamegraph *fg, FILE *f)
{
	uint32_t *fnum = malloc(fg->nframes * sizeof(*fnum)), next = 0;

	if (!fnum)
		return -ENOMEM;
	memset(fnum, 0xff, fg->nframes * sizeof(*fnum));
	fprintf(f,
		"<script type=\"application/json\" id=\"hb-data\">\n"
		"{\"type\":\"%s\",\"kind\":\"%s\",\"size\":%d,\"raw\":%s,\"diff\":%s,"
		"\"frames\":[",
		hb_value_names[fg->which], fg->space == HB_INUSE_SPACE ? "in use" : "allocated",
		fg->which == fg->objects, fg->p->raw ? "true" : "false",
		fg->diff ? "true" : "false");
	for (size_t i = 0; i < fg->nnodes; i++) {
		uint32_t fr = fg->nodes[fg->order[i]].frame;
		const struct fg_frame *fm = &fg->frames[fr];

		if (fnum[fr] != UINT32_MAX)
			continue;
		fnum[fr] = next++;
		fputs(fnum[fr] ? ",\n[" : "\n[", f);
		put_json(f, fm->name);
		fputc(',', f);
		put_json(f, fm->file);
		fprintf(f, ",%d]",
			(fm->inlined ? FLAG_INLINED : 0) |
				(fm->kind == FG_PROCESS ? FLAG_PROCESS : 0) |
				(fm->kind == FG_ROOT ? FLAG_ROOT : 0));
	}
	fputs("],\n\"nodes\":[", f);
	for (size_t i = 0; i < fg->nnodes; i++) {
		const struct fg_node *n = &fg->nodes[fg->order[i]];
		/* a diff's nodes: the sample type's value in BASE and NEW for bytes and objects */
		const int64_t *v = fg->diff ? n->d : n->v;

		fprintf(f, "%s%" PRIu32 ",%" PRIu32 ",%" PRId64 ",%" PRId64 ",%" PRId64,
			i ? (i % 8 ? "," : ",\n") : "\n", fnum[n->frame], fg->pos[n->parent], v[0],
			v[1], n->line);
	}
	fputs("]}\n</script>\n", f);
	free(fnum);
	return 0;
}

int flamegraph__write_html(const struct flamegraph *fg, FILE *f)
{
	struct page pg = { .fg = fg, .f = f };
	int err;

	pg.sc = source_comment(fg->p, &pg.src);
	write_head(&pg);
	fputs("<body>\n<div id=\"hb-top\">\n", f);
	if (fg->diff)
		write_diff_title(&pg);
	else
		write_title(&pg);
	write_notes(&pg);
	write_timeline(&pg);
	write_controls(f, fg->diff);
	fputs("</div>\n<noscript>This flame graph needs JavaScript.</noscript>\n"
	      "<div id=\"hb-graph\"></div>\n",
	      f);
	err = write_data(fg, f);
	if (err)
		return err;
	fprintf(f, "<script>\n%s</script>\n</body>\n</html>\n", fg_script);
	return ferror(f) ? -EIO : 0;
}

int flamegraph_write(const struct hb_profile *p, enum hb_value which, FILE *f)
{
	struct flamegraph *fg;
	int err;

	err = flamegraph__new(p, which, &fg);
	if (err)
		return err;
	err = flamegraph__write_html(fg, f);
	flamegraph__free(fg);
	if (err)
		return err;
	/* buffered write errors only show up on flush: report them here, not later */
	errno = 0;
	if (fflush(f))
		return errno ? -errno : -EIO;
	return ferror(f) ? -EIO : 0;
}
