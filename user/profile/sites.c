// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "profile/sites.h"
#include "profile/wrappers.h"

static int strcmp_null(const char *a, const char *b)
{
	return strcmp(a ? a : "", b ? b : "");
}

static int cmp_site(const void *a, const void *b)
{
	const struct site *x = a, *y = b;
	int c = strcmp_null(x->function, y->function);

	if (!c)
		c = strcmp_null(x->file, y->file);
	if (!c && x->line != y->line)
		c = x->line < y->line ? -1 : 1;
	return c;
}

/* Sorted sites with equal keys summed into the first. */
static size_t merge(struct site *v, size_t n)
{
	size_t k = 0;

	qsort(v, n, sizeof(*v), cmp_site);
	for (size_t i = 0; i < n; i++) {
		if (k && cmp_site(&v[k - 1], &v[i]) == 0) {
			for (int j = 0; j < HB_NVALUES; j++)
				v[k - 1].v[j] += v[i].v[j];
			continue;
		}
		v[k++] = v[i];
	}
	return k;
}

int sites_reduce(const struct hb_profile *p, enum sites_key key, struct site **out, size_t *n)
{
	struct site *v = calloc(p->nsamples ? p->nsamples : 1, sizeof(*v));
	size_t k = 0;

	*out = NULL;
	*n = 0;
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < p->nsamples; i++) {
		const struct hb_sample *s = &p->samples[i];
		/* the site's outermost line: the real function the call is in, past wrappers */
		const struct hb_line *ln = wrappers_site_line(p, s);

		if (!ln)
			continue;
		v[k].function = ln->function;
		if (key == SITES_BY_LINE) {
			v[k].file = ln->file ? ln->file : "";
			v[k].line = ln->line;
		}
		memcpy(v[k].v, s->v, sizeof(v[k].v));
		k++;
	}
	*n = merge(v, k);
	if (!*n) {
		free(v);
		return 0;
	}
	*out = v;
	return 0;
}
