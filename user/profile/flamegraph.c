// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The flame graph's tree of frame paths, built once here; the page around
 * it is flamegraph_page.c's.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "profile/flamegraph.h"
#include "profile/flamegraph_tree.h"
#include "util/hashmap.h"

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
