// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The flame graph page: the tree of frame paths, built once here, and the
 * HTML around it. The viewer's script and style are user/profile/flamegraph.js and
 * user/profile/flamegraph.css, assembled into this object below, so heapbpf carries
 * them and a page never needs anything but itself.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "profile/summary.h"
#include "profile/flamegraph.h"
#include "util/hashmap.h"
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

struct fg_frame {
	const char *name; /* into the profile, or owned */
	const char *file; /* into the profile, or NULL */
	char *owned;	  /* a name made here: "0x...", "pid N" */
	enum fg_kind kind;
	bool inlined;
};

struct fg_node {
	uint32_t frame, parent;
	uint32_t child, next; /* first child, next sibling; 0 = none (the root is nobody's child) */
	uint32_t depth;
	int64_t v[2];	    /* bytes, objects */
	int64_t d[2];	    /* a diff's: the sample type's value in BASE and in NEW */
	int64_t line, lsum; /* the line carrying the most value so far, and that value */
};

/* The value each (node, line) pair carried: a frame merges call sites of several lines. */
struct fg_line {
	uint32_t node;
	int64_t line, sum;
};

struct flamegraph {
	const struct hb_profile *p;
	enum hb_value which;
	enum hb_value space, objects; /* the pair of the sample type's kind */
	bool diff;		      /* heapbpf diff's profile: base and new per node */
	struct fg_frame *frames;
	size_t nframes, frames_cap;
	struct fg_node *nodes;
	size_t nnodes, nodes_cap;
	struct fg_line *lines;
	size_t nlines, lines_cap;
	struct hashmap frame_map, node_map, line_map;
	uint32_t *order; /* pre-order position -> node */
	uint32_t *pos;	 /* node -> pre-order position */
};

static int grow(void **arr, size_t *cap, size_t n, size_t size)
{
	size_t ncap = *cap ? *cap * 2 : 64;
	void *a;

	if (n < *cap)
		return 0;
	/* node and frame numbers are uint32_t, and the map's values stop below UINT32_MAX */
	if (n >= UINT32_MAX - 1)
		return -ENOMEM;
	a = reallocarray(*arr, ncap, size);
	if (!a)
		return -ENOMEM;
	*arr = a;
	*cap = ncap;
	return 0;
}

static int64_t sat_add(int64_t a, int64_t b)
{
	int64_t r;

	/* saturate rather than wrap: a wrapped sum would change sign */
	if (__builtin_add_overflow(a, b, &r))
		return b < 0 ? INT64_MIN : INT64_MAX;
	return r;
}

/* The sample's value of the sample type; a diff's base sample is negated: its own value. */
static int64_t value_of(const struct flamegraph *fg, const struct hb_sample *s)
{
	int64_t v = s->v[fg->which];

	if (!s->diff_base)
		return v;
	return v == INT64_MIN ? INT64_MAX : -v;
}

/* The sample's values added to node @i: bytes and objects, or a diff's side. */
static void add_values(struct flamegraph *fg, uint32_t i, const struct hb_sample *s)
{
	struct fg_node *n = &fg->nodes[i];

	if (fg->diff) {
		n->d[!s->diff_base] = sat_add(n->d[!s->diff_base], value_of(fg, s));
		return;
	}
	n->v[0] = sat_add(n->v[0], s->v[fg->space]);
	n->v[1] = sat_add(n->v[1], s->v[fg->objects]);
}

static bool same_frame(const struct fg_frame *f, const char *name, const char *file,
		       enum fg_kind kind, bool inlined)
{
	return f->kind == kind && f->inlined == inlined && strcmp(f->name, name) == 0 &&
	       (f->file == file || (f->file && file && strcmp(f->file, file) == 0));
}

/* The frame (name, file, kind, inlined), added when new; copy: name is not the profile's. */
static int frame_id(struct flamegraph *fg, const char *name, const char *file, enum fg_kind kind,
		    bool inlined, bool copy, uint32_t *out)
{
	uint64_t h = hashmap_hash_str(name) ^
		     hashmap_hash_u64((file ? hashmap_hash_str(file) : 0) + kind * 2 + inlined);
	struct fg_frame *f;
	size_t it = 0;
	uint32_t v;
	int err;

	while (hashmap__next(&fg->frame_map, h, &it, &v)) {
		if (same_frame(&fg->frames[v], name, file, kind, inlined)) {
			*out = v;
			return 0;
		}
	}
	err = grow((void **)&fg->frames, &fg->frames_cap, fg->nframes, sizeof(*fg->frames));
	if (err)
		return err;
	f = &fg->frames[fg->nframes];
	*f = (struct fg_frame){ .name = name, .file = file, .kind = kind, .inlined = inlined };
	if (copy) {
		f->owned = strdup(name);
		if (!f->owned)
			return -ENOMEM;
		f->name = f->owned;
	}
	err = hashmap__add(&fg->frame_map, h, fg->nframes);
	if (err) {
		free(f->owned);
		return err;
	}
	*out = fg->nframes++;
	return 0;
}

/* The child of @parent with @frame, added when new. */
static int child_of(struct flamegraph *fg, uint32_t parent, uint32_t frame, uint32_t *out)
{
	uint64_t h = hashmap_hash_u64((uint64_t)parent << 32 | frame);
	struct fg_node *n;
	int err;

	if (hashmap__get(&fg->node_map, h, out) == 0)
		return 0;
	err = grow((void **)&fg->nodes, &fg->nodes_cap, fg->nnodes, sizeof(*fg->nodes));
	err = err ?: hashmap__add(&fg->node_map, h, fg->nnodes);
	if (err)
		return err;
	n = &fg->nodes[fg->nnodes];
	*n = (struct fg_node){
		.frame = frame,
		.parent = parent,
		.next = fg->nodes[parent].child,
		.depth = fg->nodes[parent].depth + 1,
	};
	fg->nodes[parent].child = fg->nnodes;
	*out = fg->nnodes++;
	return 0;
}

static int note_line(struct flamegraph *fg, uint32_t node, int64_t line, int64_t value)
{
	struct {
		uint32_t node;
		int64_t line;
	} key;
	uint64_t h;
	size_t it = 0;
	uint32_t v;
	int err;

	if (line <= 0)
		return 0;
	memset(&key, 0, sizeof(key)); /* padding too: the key is hashed as bytes */
	key.node = node;
	key.line = line;
	h = hashmap_hash_bytes(&key, sizeof(key));
	while (hashmap__next(&fg->line_map, h, &it, &v)) {
		if (fg->lines[v].node == node && fg->lines[v].line == line) {
			fg->lines[v].sum = sat_add(fg->lines[v].sum, value);
			return 0;
		}
	}
	err = grow((void **)&fg->lines, &fg->lines_cap, fg->nlines, sizeof(*fg->lines));
	err = err ?: hashmap__add(&fg->line_map, h, fg->nlines);
	if (err)
		return err;
	fg->lines[fg->nlines++] = (struct fg_line){ .node = node, .line = line, .sum = value };
	return 0;
}

/* One step up the sample's path: into the child with this frame, adding the sample's values. */
static int step(struct flamegraph *fg, const struct hb_sample *s, uint32_t *cur, const char *name,
		const char *file, enum fg_kind kind, bool inlined, bool copy)
{
	uint32_t frame;
	int err;

	err = frame_id(fg, name, file, kind, inlined, copy, &frame);
	err = err ?: child_of(fg, *cur, frame, cur);
	if (err)
		return err;
	add_values(fg, *cur, s);
	return 0;
}

static int add_location(struct flamegraph *fg, const struct hb_sample *s, uint32_t *cur,
			const struct hb_location *l)
{
	char addr[2 + 16 + 1];
	int err = 0;

	if (!l->nlines) {
		/* unsymbolized: the address at least tells frames apart (as folded output does) */
		snprintf(addr, sizeof(addr), "0x%" PRIx64, l->address);
		return step(fg, s, cur, addr, NULL, FG_FUNCTION, false, true);
	}
	/* lines are callee first, and all but the outermost are inlined into it */
	for (uint32_t j = l->nlines; j-- > 0 && !err;) {
		const struct hb_line *ln = &l->lines[j];

		err = step(fg, s, cur, ln->function, ln->file, FG_FUNCTION, j + 1 < l->nlines,
			   false);
		err = err ?: note_line(fg, *cur, ln->line, value_of(fg, s));
	}
	return err;
}

static int add_sample(struct flamegraph *fg, const struct hb_sample *s)
{
	uint32_t cur = 0;
	int err = 0;

	add_values(fg, 0, s);
	/* --follow-forks: each process is a tree of its own, as in folded output */
	if (s->pid) {
		char proc[32];

		snprintf(proc, sizeof(proc), "pid %" PRId64, s->pid);
		err = step(fg, s, &cur, proc, NULL, FG_PROCESS, false, true);
	}
	if (!err && !s->nlocs)
		return step(fg, s, &cur, "[unknown]", NULL, FG_FUNCTION, false, false);
	/*
	 * locations are leaf first: the root of the path is the last one; the
	 * path ends at the site, the allocator wrappers below it left out
	 * (wrappers.h), so that the tips and the callers view name sites
	 */
	for (uint32_t i = s->nlocs; i-- > s->site && !err;)
		err = add_location(fg, s, &cur, &fg->p->locations[s->locs[i]]);
	return err;
}

/* Each node's line: the one that carried the most value, the lower one on a tie. */
static void pick_lines(struct flamegraph *fg)
{
	for (size_t i = 0; i < fg->nlines; i++) {
		const struct fg_line *l = &fg->lines[i];
		struct fg_node *n = &fg->nodes[l->node];

		if (l->sum > n->lsum || (l->sum == n->lsum && (!n->line || l->line < n->line))) {
			n->line = l->line;
			n->lsum = l->sum;
		}
	}
}

static int cmp_str(const char *a, const char *b)
{
	if (!a || !b)
		return !!a - !!b;
	return strcmp(a, b);
}

static int cmp_nodes(const void *a, const void *b, void *arg)
{
	const struct flamegraph *fg = arg;
	const struct fg_frame *x = &fg->frames[fg->nodes[*(const uint32_t *)a].frame];
	const struct fg_frame *y = &fg->frames[fg->nodes[*(const uint32_t *)b].frame];
	int c = cmp_str(x->name, y->name);

	c = c ?: cmp_str(x->file, y->file);
	c = c ?: (int)x->inlined - (int)y->inlined;
	return c ?: (int)x->kind - (int)y->kind;
}

/* Numbers the nodes in pre-order, siblings sorted (a depth-first walk with an explicit stack). */
static int order_nodes(struct flamegraph *fg)
{
	uint32_t *stack = malloc(fg->nnodes * sizeof(*stack));
	size_t top = 0, k = 0;

	fg->order = malloc(fg->nnodes * sizeof(*fg->order));
	fg->pos = malloc(fg->nnodes * sizeof(*fg->pos));
	if (!stack || !fg->order || !fg->pos) {
		free(stack);
		return -ENOMEM;
	}
	stack[top++] = 0;
	while (top) {
		uint32_t n = stack[--top], *kids = stack + top;
		size_t nk = 0;

		fg->pos[n] = k;
		fg->order[k++] = n;
		/* the children go on the stack sorted, then reversed so the first comes off first */
		for (uint32_t c = fg->nodes[n].child; c; c = fg->nodes[c].next)
			kids[nk++] = c;
		qsort_r(kids, nk, sizeof(*kids), cmp_nodes, fg);
		for (size_t i = 0; i < nk / 2; i++) {
			uint32_t t = kids[i];

			kids[i] = kids[nk - 1 - i];
			kids[nk - 1 - i] = t;
		}
		top += nk;
	}
	free(stack);
	return 0;
}

static int build(struct flamegraph *fg)
{
	uint32_t root;
	int err;

	err = grow((void **)&fg->nodes, &fg->nodes_cap, 0, sizeof(*fg->nodes));
	err = err ?: frame_id(fg, "all", NULL, FG_ROOT, false, false, &root);
	if (err)
		return err;
	fg->nodes[0] = (struct fg_node){ .frame = root };
	fg->nnodes = 1;
	for (size_t i = 0; i < fg->p->nsamples && !err; i++) {
		const struct hb_sample *s = &fg->p->samples[i];

		/* a diff's base samples are negated: what counts is that they are not zero */
		if (fg->diff ? s->v[fg->which] != 0 : s->v[fg->which] > 0)
			err = add_sample(fg, s);
	}
	if (err)
		return err;
	pick_lines(fg);
	return order_nodes(fg);
}

int flamegraph__new(const struct hb_profile *p, enum hb_value which, struct flamegraph **out)
{
	struct flamegraph *fg;
	int err;

	*out = NULL;
	if ((unsigned int)which >= HB_NVALUES || hb_profile_check_samples(p))
		return -EINVAL;
	fg = calloc(1, sizeof(*fg));
	if (!fg)
		return -ENOMEM;
	fg->p = p;
	fg->which = which;
	fg->diff = p->diff_files[0] || p->diff_files[1];
	for (size_t i = 0; i < p->nsamples && !fg->diff; i++)
		fg->diff = p->samples[i].diff_base;
	/* hover shows bytes and objects of the same kind as the sample type */
	if (which == HB_ALLOC_OBJECTS || which == HB_ALLOC_SPACE) {
		fg->space = HB_ALLOC_SPACE;
		fg->objects = HB_ALLOC_OBJECTS;
	} else {
		fg->space = HB_INUSE_SPACE;
		fg->objects = HB_INUSE_OBJECTS;
	}
	err = build(fg);
	if (err) {
		flamegraph__free(fg);
		return err;
	}
	*out = fg;
	return 0;
}

size_t flamegraph__nnodes(const struct flamegraph *fg)
{
	return fg->nnodes;
}

void flamegraph__node(const struct flamegraph *fg, size_t i, struct fg_node_info *out)
{
	const struct fg_node *n = &fg->nodes[fg->order[i]];
	const struct fg_frame *f = &fg->frames[n->frame];

	*out = (struct fg_node_info){
		.name = f->name,
		.file = f->file,
		.line = n->line,
		.inlined = f->inlined,
		.kind = f->kind,
		.parent = fg->pos[n->parent],
		.depth = n->depth,
		.bytes = n->v[0],
		.objects = n->v[1],
		.base = n->d[0],
		.new = n->d[1],
	};
}

bool flamegraph__is_diff(const struct flamegraph *fg)
{
	return fg->diff;
}

void flamegraph__free(struct flamegraph *fg)
{
	if (!fg)
		return;
	for (size_t i = 0; i < fg->nframes; i++)
		free(fg->frames[i].owned);
	free(fg->frames);
	free(fg->nodes);
	free(fg->lines);
	hashmap__clear(&fg->frame_map);
	hashmap__clear(&fg->node_map);
	hashmap__clear(&fg->line_map);
	free(fg->order);
	free(fg->pos);
	free(fg);
}

/* ---- the page ------------------------------------------------------------- */

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
