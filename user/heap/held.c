// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdlib.h>

#include "heap/held.h"

int held_class_of(const struct jestats *je, double mean)
{
	/*
	 * The estimates are rounded: a stack of 256-byte objects can come out
	 * at 256.0001. Classes are 12.5% apart or more, so 0.5% picks the right one.
	 */
	for (unsigned i = 0; i < je->nbins; i++) {
		if ((double)je->bins[i].size >= mean * 0.995)
			return (int)i;
	}
	return -1;
}

/* The sample's class, or -1 (large, nothing in use). */
static int class_of(const struct hb_sample *s, const struct jestats *je)
{
	if (s->v[HB_INUSE_OBJECTS] <= 0 || s->v[HB_INUSE_SPACE] <= 0)
		return -1;
	return held_class_of(je, (double)s->v[HB_INUSE_SPACE] / (double)s->v[HB_INUSE_OBJECTS]);
}

void held_estimate(const struct hb_profile *p, const struct jestats *je, double *held)
{
	double inuse[JESTATS_MAX_BINS] = { 0 };

	/* each class's in use, as the stacks in it see it: what its free bytes are shared by */
	for (size_t i = 0; i < p->nsamples; i++) {
		int c = class_of(&p->samples[i], je);

		if (c >= 0)
			inuse[c] += (double)p->samples[i].v[HB_INUSE_SPACE];
	}
	for (size_t i = 0; i < p->nsamples; i++) {
		const struct hb_sample *s = &p->samples[i];
		int c = class_of(s, je);
		double v = s->v[HB_INUSE_SPACE] > 0 ? (double)s->v[HB_INUSE_SPACE] : 0;

		held[i] = v;
		if (c >= 0 && inuse[c] > 0)
			held[i] += (double)jestats_bin_free(&je->bins[c]) * v / inuse[c];
	}
}

static int by_held(const void *a, const void *b, void *arg)
{
	const double *held = arg;
	double x = held[*(const size_t *)a], y = held[*(const size_t *)b];

	return (x < y) - (x > y);
}

void held_order(const double *held, size_t n, size_t *order)
{
	for (size_t i = 0; i < n; i++)
		order[i] = i;
	qsort_r(order, n, sizeof(*order), by_held, (void *)held);
}

int held_attach(struct hb_profile *p, const struct jestats *je)
{
	double *held = calloc(p->nsamples + 1, sizeof(*held));
	int64_t *v = calloc(p->nsamples + 1, sizeof(*v));

	if (!held || !v) {
		free(held);
		free(v);
		return -ENOMEM;
	}
	held_estimate(p, je, held);
	for (size_t i = 0; i < p->nsamples; i++)
		v[i] = (int64_t)held[i];
	free(held);
	free(p->held);
	p->held = v;
	return 0;
}
