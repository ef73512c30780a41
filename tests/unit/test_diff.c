// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* heapbpf diff: stacks matched by function and file, NEW minus BASE in pprof's convention. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "diff.h"
#include "folded.h"
#include "pprof.h"
#include "sink.h"

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
