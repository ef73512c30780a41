// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Folded stack writer. Each kept sample is rendered to its stack text first,
 * then the texts are sorted, so merging identical stacks is a single pass
 * over adjacent entries and the output does not depend on sample order.
 */
#include <errno.h>
#include <stdbool.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "folded.h"

struct stack {
	char *text;
	int64_t value;
	bool base; /* a diff's base sample (negated): the first of two columns */
};

/* Copies @name into @dst (when not NULL) made safe for the format; returns its length. */
static size_t put_frame(char *dst, const char *name)
{
	size_t n = strlen(name);

	/* an empty frame would read as two separators */
	if (!n) {
		name = "[unknown]";
		n = strlen(name);
	}
	if (!dst)
		return n;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];

		/* ';' separates frames, and the line ends at a newline */
		if (c == ';')
			c = ':';
		else if (c == '\n' || c == '\t' || c == '\r')
			c = ' ';
		dst[i] = c;
	}
	return n;
}

/*
 * Appends ";name" (just "name" at the start) to the @len bytes of @dst (when
 * not NULL); an inlined frame gets the "_[i]" suffix flame graph tools know.
 */
static size_t append_frame(char *dst, size_t len, const char *name, bool inlined)
{
	static const char mark[] = "_[i]";

	if (len) {
		if (dst)
			dst[len] = ';';
		len++;
	}
	len += put_frame(dst ? dst + len : NULL, name);
	if (inlined) {
		if (dst)
			memcpy(dst + len, mark, sizeof(mark) - 1);
		len += sizeof(mark) - 1;
	}
	return len;
}

/*
 * Renders the stack of @s root first into @dst (when not NULL); returns the
 * length without the terminating NUL. Called once to size, once to fill.
 */
static size_t render(const struct hb_profile *p, const struct hb_sample *s, char *dst)
{
	size_t len = 0;

	/* --follow-forks: the process is the root frame, so each one is a tree of its own */
	if (s->pid) {
		char proc[32];

		snprintf(proc, sizeof(proc), "pid %" PRId64, s->pid);
		len = append_frame(dst, len, proc, false);
	}
	if (!s->nlocs)
		return append_frame(dst, len, "[unknown]", false);
	/* locations are leaf first, lines callee first: walk both backwards */
	for (uint32_t i = s->nlocs; i-- > 0;) {
		const struct hb_location *l = &p->locations[s->locs[i]];
		char addr[2 + 16 + 1];

		if (!l->nlines) {
			/* unsymbolized: the address at least tells frames apart */
			snprintf(addr, sizeof(addr), "0x%" PRIx64, l->address);
			len = append_frame(dst, len, addr, false);
		}
		/* all lines but the outermost are inlined into it */
		for (uint32_t j = l->nlines; j-- > 0;)
			len = append_frame(dst, len, l->lines[j].function, j + 1 < l->nlines);
	}
	return len;
}

static int cmp_stack(const void *a, const void *b)
{
	const struct stack *x = a, *y = b;

	return strcmp(x->text, y->text);
}

/* diff: "stack BASE NEW", the two-column input of differential flame graphs */
static int write_stacks(const struct stack *st, size_t n, bool diff, FILE *f)
{
	for (size_t i = 0; i < n;) {
		int64_t sum[2] = { 0, 0 };
		size_t j;
		int r;

		for (j = i; j < n && strcmp(st[j].text, st[i].text) == 0; j++) {
			int64_t *acc = &sum[st[j].base ? 0 : 1];

			/* saturate rather than wrap: a wrapped sum would go negative */
			if (__builtin_add_overflow(*acc, st[j].base ? -st[j].value : st[j].value,
						   acc))
				*acc = INT64_MAX;
		}
		errno = 0;
		r = diff ? fprintf(f, "%s %" PRId64 " %" PRId64 "\n", st[i].text, sum[0], sum[1])
			 : fprintf(f, "%s %" PRId64 "\n", st[i].text, sum[1]);
		if (r < 0)
			return errno ? -errno : -EIO;
		i = j;
	}
	return 0;
}

int folded_write(const struct hb_profile *p, enum hb_value which, FILE *f)
{
	struct stack *st;
	size_t n = 0;
	bool diff = false;
	int err = 0;

	if ((unsigned int)which >= HB_NVALUES || hb_profile_check_samples(p))
		return -EINVAL;

	for (size_t i = 0; i < p->nsamples && !diff; i++)
		diff = p->samples[i].diff_base;
	st = calloc(p->nsamples ? p->nsamples : 1, sizeof(*st));
	if (!st)
		return -ENOMEM;
	for (size_t i = 0; i < p->nsamples; i++) {
		const struct hb_sample *s = &p->samples[i];
		size_t len;

		/* a diff's base samples are negated: what counts is that they are not zero */
		if (diff ? !s->v[which] : s->v[which] <= 0)
			continue;
		len = render(p, s, NULL);
		st[n].text = malloc(len + 1);
		if (!st[n].text) {
			err = -ENOMEM;
			goto out;
		}
		render(p, s, st[n].text);
		st[n].text[len] = '\0';
		st[n].value = s->v[which];
		st[n].base = s->diff_base;
		n++;
	}
	qsort(st, n, sizeof(*st), cmp_stack);

	err = write_stacks(st, n, diff, f);
	if (err)
		goto out;
	/* buffered write errors only show up on flush: report them here, not later */
	errno = 0;
	if (fflush(f))
		err = errno ? -errno : -EIO;
	else if (ferror(f))
		err = -EIO;
out:
	for (size_t i = 0; i < n; i++)
		free(st[i].text);
	free(st);
	return err;
}
