// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profile/folded.h"
#include "harness.h"

/* Location i gets the given names as its lines, callee first (NULL ends the list). */
static const char *const loc_names[][3] = {
	{ "je_malloc", NULL }, { "inner", "outer", NULL }, /* inner was inlined into outer */
	{ "main", NULL },      { "weird;name\twith\nstu\rff", NULL },
	{ "handler", NULL },   { "handler", NULL }, /* another address in the same function */
};

#define NLOCS (sizeof(loc_names) / sizeof(loc_names[0]))

struct exp_sample {
	uint32_t nlocs;
	uint32_t locs[3];
	int64_t v[HB_NVALUES];
};

static const struct exp_sample samples[] = {
	{ 3, { 0, 1, 2 }, { 1, 100, 1, 50 } }, { 3, { 0, 4, 2 }, { 2, 200, 0, 0 } },
	{ 3, { 0, 1, 2 }, { 3, 300, 2, 70 } }, { 2, { 3, 2 }, { 0, 0, 4, 40 } },
	{ 3, { 0, 5, 2 }, { 1, 10, 1, 10 } },  { 3, { 0, 4, 2 }, { 0, 0, 0, 0 } },
};

#define NSAMPLES (sizeof(samples) / sizeof(samples[0]))

static struct hb_profile *make_profile(void)
{
	struct hb_profile *p = hb_xcalloc(1, sizeof(*p));

	p->nmappings = 1;
	p->mappings = hb_xcalloc(1, sizeof(*p->mappings));
	p->mappings[0].path = hb_xstrdup("/bin/app");
	p->nlocations = NLOCS;
	p->locations = hb_xcalloc(NLOCS, sizeof(*p->locations));
	for (size_t i = 0; i < NLOCS; i++) {
		struct hb_location *l = &p->locations[i];

		l->address = 0x1000 * (i + 1);
		l->mapping = 1;
		while (loc_names[i][l->nlines])
			l->nlines++;
		l->lines = hb_xcalloc(l->nlines, sizeof(*l->lines));
		for (uint32_t j = 0; j < l->nlines; j++) {
			l->lines[j].function = hb_xstrdup(loc_names[i][j]);
			/* folded output uses the display name, not this */
			l->lines[j].system_name = hb_xstrdup("_Zmangled");
		}
	}
	p->nsamples = NSAMPLES;
	p->samples = hb_xcalloc(NSAMPLES, sizeof(*p->samples));
	for (size_t i = 0; i < NSAMPLES; i++) {
		p->samples[i].nlocs = samples[i].nlocs;
		p->samples[i].locs = hb_xcalloc(samples[i].nlocs, sizeof(uint32_t));
		memcpy(p->samples[i].locs, samples[i].locs, samples[i].nlocs * sizeof(uint32_t));
		memcpy(p->samples[i].v, samples[i].v, sizeof(samples[i].v));
	}
	return p;
}

/* folded_write() into a string; asserts it succeeds. */
static char *folded(const struct hb_profile *p, enum hb_value which)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	cr_assert_not_null(f);
	cr_assert_eq(folded_write(p, which, f), 0);
	cr_assert_eq(fclose(f), 0);
	return buf;
}

Test(folded, alloc_space)
{
	struct hb_profile *p = make_profile();
	char *out = folded(p, HB_ALLOC_SPACE);

	/*
	 * The two "handler" locations print the same and merge (200 + 10); the
	 * inlined pair expands caller first; weird;name has no alloc_space.
	 */
	cr_assert_str_eq(out, "main;handler;je_malloc 210\n"
			      "main;outer;inner_[i];je_malloc 400\n");
	free(out);
	hb_profile__free(p);
}

Test(folded, inuse_space)
{
	struct hb_profile *p = make_profile();
	char *out = folded(p, HB_INUSE_SPACE);

	cr_assert_str_eq(out, "main;handler;je_malloc 10\n"
			      "main;outer;inner_[i];je_malloc 120\n"
			      "main;weird:name with stu ff 40\n");
	free(out);
	hb_profile__free(p);
}

Test(folded, object_counts)
{
	struct hb_profile *p = make_profile();
	char *out = folded(p, HB_ALLOC_OBJECTS);

	cr_assert_str_eq(out, "main;handler;je_malloc 3\n"
			      "main;outer;inner_[i];je_malloc 4\n");
	free(out);
	out = folded(p, HB_INUSE_OBJECTS);
	cr_assert_str_eq(out, "main;handler;je_malloc 1\n"
			      "main;outer;inner_[i];je_malloc 3\n"
			      "main;weird:name with stu ff 4\n");
	free(out);
	hb_profile__free(p);
}

Test(folded, order_does_not_depend_on_samples)
{
	struct hb_profile *p = make_profile();
	struct hb_sample tmp;
	char *a = folded(p, HB_INUSE_SPACE), *b;

	/* reverse the samples */
	for (size_t i = 0; i < NSAMPLES / 2; i++) {
		tmp = p->samples[i];
		p->samples[i] = p->samples[NSAMPLES - 1 - i];
		p->samples[NSAMPLES - 1 - i] = tmp;
	}
	b = folded(p, HB_INUSE_SPACE);
	cr_assert_str_eq(a, b);
	free(a);
	free(b);
	hb_profile__free(p);
}

Test(folded, zero_and_negative_skipped)
{
	struct hb_profile *p = make_profile();
	char *out;

	for (size_t i = 0; i < NSAMPLES; i++)
		p->samples[i].v[HB_INUSE_SPACE] = i == 3 ? 5 : -(int64_t)i;
	out = folded(p, HB_INUSE_SPACE);
	cr_assert_str_eq(out, "main;weird:name with stu ff 5\n");
	free(out);
	for (size_t i = 0; i < NSAMPLES; i++)
		p->samples[i].v[HB_INUSE_SPACE] = 0;
	out = folded(p, HB_INUSE_SPACE);
	cr_assert_str_eq(out, "");
	free(out);
	hb_profile__free(p);
}

Test(folded, unsymbolized_and_empty)
{
	struct hb_profile *p = make_profile();
	char *out;

	/* location 2 ("main") loses its lines; sample 3 loses its stack */
	for (uint32_t j = 0; j < p->locations[2].nlines; j++) {
		free(p->locations[2].lines[j].function);
		free(p->locations[2].lines[j].system_name);
	}
	p->locations[2].nlines = 0;
	p->samples[3].nlocs = 0;
	out = folded(p, HB_INUSE_SPACE);
	cr_assert_str_eq(out, "0x3000;handler;je_malloc 10\n"
			      "0x3000;outer;inner_[i];je_malloc 120\n"
			      "[unknown] 40\n");
	free(out);
	hb_profile__free(p);
}

Test(folded, bad_arguments)
{
	struct hb_profile *p = make_profile();
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	cr_assert_not_null(f);
	cr_assert_eq(folded_write(p, HB_NVALUES, f), -EINVAL);
	cr_assert_eq(folded_write(p, (enum hb_value) - 1, f), -EINVAL);
	p->samples[0].locs[1] = NLOCS;
	cr_assert_eq(folded_write(p, HB_ALLOC_SPACE, f), -EINVAL);
	cr_assert_eq(fclose(f), 0);
	cr_assert_eq(len, 0);
	free(buf);
	p->samples[0].locs[1] = 1;
	hb_profile__free(p);
}

Test(folded, write_error_reported)
{
	struct hb_profile *p = make_profile();
	FILE *f = fopen("/dev/full", "w");

	cr_assert_not_null(f);
	cr_assert_eq(folded_write(p, HB_ALLOC_SPACE, f), -ENOSPC);
	fclose(f);
	hb_profile__free(p);
}

/*
 * Lines are in strcmp() order of the whole stack text, also where one
 * location's text is a prefix of another's (f, and g inlined into f) and
 * where a pid root is a prefix of another ("pid 1" and "pid 12").
 */
Test(folded, order_of_whole_text)
{
	static const char *const names[][3] = {
		{ "m", NULL }, { "f", NULL }, { "z", NULL }, { "g", "f", NULL }
	};
	static const uint32_t locs[][3] = { { 2, 1, 0 }, { 3, 0 }, { 0 }, { 1, 0 } };
	static const uint32_t nlocs[] = { 3, 2, 1, 2 };
	static const int64_t pids[] = { 0, 0, 12, 1 };
	struct hb_profile *p = hb_xcalloc(1, sizeof(*p));
	char *out;

	p->nlocations = 4;
	p->locations = hb_xcalloc(4, sizeof(*p->locations));
	for (size_t i = 0; i < 4; i++) {
		struct hb_location *l = &p->locations[i];

		l->address = 0x1000 * (i + 1);
		while (names[i][l->nlines])
			l->nlines++;
		l->lines = hb_xcalloc(l->nlines, sizeof(*l->lines));
		for (uint32_t j = 0; j < l->nlines; j++)
			l->lines[j].function = hb_xstrdup(names[i][j]);
	}
	p->nsamples = 4;
	p->samples = hb_xcalloc(4, sizeof(*p->samples));
	for (size_t i = 0; i < 4; i++) {
		p->samples[i].nlocs = nlocs[i];
		p->samples[i].locs = hb_xcalloc(3, sizeof(uint32_t));
		memcpy(p->samples[i].locs, locs[i], sizeof(locs[i]));
		p->samples[i].pid = pids[i];
		p->samples[i].v[HB_INUSE_SPACE] = (int64_t)i + 1;
	}
	out = folded(p, HB_INUSE_SPACE);
	cr_assert_str_eq(out, "m;f;g_[i] 2\n"
			      "m;f;z 1\n"
			      "pid 12;m 3\n"
			      "pid 1;m;f 4\n");
	free(out);
	hb_profile__free(p);
}

/*
 * Random stacks over the given names (up to maxlines lines a location, 0:
 * printed as its address) and pid roots: every line's stack is strictly
 * after the previous one's in strcmp() order (sorted, merged), and the
 * values add up to the samples'.
 */
static void random_stacks(const char *const *names, size_t nnames, uint32_t maxlines,
			  const int64_t *pids, size_t npids)
{
	struct hb_profile *p = hb_xcalloc(1, sizeof(*p));
	int64_t total = 0, sum = 0;
	char *out, *line, *save, *prev = NULL;

	srandom(7);
	p->nlocations = 40;
	p->locations = hb_xcalloc(p->nlocations, sizeof(*p->locations));
	for (size_t i = 0; i < p->nlocations; i++) {
		struct hb_location *l = &p->locations[i];

		l->address = 0x1000 + i;
		l->nlines = (uint32_t)(random() % (maxlines + 1));
		l->lines = hb_xcalloc(l->nlines ? l->nlines : 1, sizeof(*l->lines));
		for (uint32_t j = 0; j < l->nlines; j++)
			l->lines[j].function = hb_xstrdup(names[random() % nnames]);
	}
	p->nsamples = 500;
	p->samples = hb_xcalloc(p->nsamples, sizeof(*p->samples));
	for (size_t i = 0; i < p->nsamples; i++) {
		struct hb_sample *s = &p->samples[i];

		s->nlocs = (uint32_t)(random() % 5);
		s->locs = hb_xcalloc(5, sizeof(uint32_t));
		for (uint32_t j = 0; j < s->nlocs; j++)
			s->locs[j] = (uint32_t)(random() % p->nlocations);
		s->pid = random() % 4 ? 0 : pids[random() % npids];
		s->v[HB_INUSE_SPACE] = random() % 100;
		total += s->v[HB_INUSE_SPACE];
	}
	out = folded(p, HB_INUSE_SPACE);
	for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *sp = strrchr(line, ' ');

		cr_assert_not_null(sp);
		*sp = '\0';
		sum += strtoll(sp + 1, NULL, 10);
		if (prev)
			cr_assert_lt(strcmp(prev, line), 0, "'%s' then '%s'", prev, line);
		prev = line;
	}
	cr_assert_eq(sum, total);
	free(out);
	hb_profile__free(p);
}

/* Names that are prefixes of one another, inlined frames, pid roots "pid 1" and "pid 11". */
Test(folded, random_stacks_sorted_and_merged)
{
	static const char *const names[] = { "a", "ab", "a:b", "b", "", "abc", "a b" };
	static const int64_t pids[] = { 1, 11, 21 };

	random_stacks(names, 7, 2, pids, 3);
}

/* No text a prefix of another (one line a location, pids of one width): sorted by pieces. */
Test(folded, random_prefix_free_stacks_sorted_and_merged)
{
	static const char *const names[] = { "b", "ca", "cb", "d e", "x_[y", "m:n", "~z" };
	static const int64_t pids[] = { 10, 21, 32 };

	random_stacks(names, 7, 1, pids, 3);
}
