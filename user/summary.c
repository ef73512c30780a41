// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "summary.h"

void summary_bytes(char *buf, size_t len, double bytes)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	int u = 0;

	while (bytes >= 1024 && u < 4) {
		bytes /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%.0f B", bytes);
	else
		snprintf(buf, len, "%.1f %s", bytes, units[u]);
}

static int cmp_site(const void *a, const void *b)
{
	const struct hb_site *x = a, *y = b;

	if (x->v[HB_INUSE_SPACE] != y->v[HB_INUSE_SPACE])
		return x->v[HB_INUSE_SPACE] > y->v[HB_INUSE_SPACE] ? -1 : 1;
	if (x->v[HB_ALLOC_SPACE] != y->v[HB_ALLOC_SPACE])
		return x->v[HB_ALLOC_SPACE] > y->v[HB_ALLOC_SPACE] ? -1 : 1;
	return strcmp(x->function, y->function);
}

size_t summary_top_sites(const struct hb_profile *p, struct hb_site *out, size_t n)
{
	struct hb_site *all = calloc(p->nsamples ? p->nsamples : 1, sizeof(*all));
	size_t nall = 0;

	if (!all)
		return 0;
	for (size_t i = 0; i < p->nsamples; i++) {
		const struct hb_sample *s = &p->samples[i];
		const struct hb_location *l;
		const char *fn;
		size_t j;

		if (!s->nlocs)
			continue;
		l = &p->locations[s->locs[0]];
		/* the outermost line of the leaf location: the function that called malloc */
		fn = l->lines[l->nlines - 1].function;
		for (j = 0; j < nall && strcmp(all[j].function, fn) != 0; j++)
			;
		if (j == nall)
			all[nall++].function = fn;
		for (int k = 0; k < HB_NVALUES; k++)
			all[j].v[k] += s->v[k];
	}
	qsort(all, nall, sizeof(*all), cmp_site);
	if (nall > n)
		nall = n;
	memcpy(out, all, nall * sizeof(*out));
	free(all);
	return nall;
}

void summary_status_line(FILE *f, double elapsed, const struct collector_stats *st,
			 const struct heapbpf_counters *bc)
{
	char b[32];

	summary_bytes(b, sizeof(b), (double)st->alloc_bytes);
	fprintf(f,
		"\rheapbpf: %5.0fs  samples %" PRIu64 "  sampled %s  frees %" PRIu64
		"  drops %llu   ",
		elapsed, st->allocs, b, st->frees,
		(unsigned long long)(bc->alloc_drops + bc->free_drops));
	fflush(f);
}

void summary_print(FILE *f, const struct hb_profile *p, const struct collector_stats *st,
		   const struct heapbpf_counters *bc, const char *output)
{
	struct hb_site top[5];
	size_t n = summary_top_sites(p, top, 5);
	char b1[32], b2[32];

	summary_bytes(b1, sizeof(b1), (double)st->alloc_bytes);
	fprintf(f,
		"heapbpf: %" PRIu64 " samples (%s sampled), %" PRIu64 " frees of them, "
		"%" PRIu64 " frees of objects sampled before attach\n",
		st->allocs, b1, st->frees_matched, st->frees_unmatched);
	if (bc->alloc_drops || bc->free_drops)
		fprintf(f,
			"heapbpf: WARNING: %llu samples and %llu frees were dropped "
			"(ring buffer full); raise --ringbuf-size\n",
			(unsigned long long)bc->alloc_drops, (unsigned long long)bc->free_drops);
	if (st->read_faults)
		fprintf(f,
			"heapbpf: WARNING: %" PRIu64 " events could not read jemalloc's memory\n",
			st->read_faults);
	if (n) {
		fprintf(f, "heapbpf: top sites by in-use bytes%s:\n",
			p->raw ? " (raw sampled)" : " (estimated)");
		for (size_t i = 0; i < n; i++) {
			summary_bytes(b1, sizeof(b1), (double)top[i].v[HB_INUSE_SPACE]);
			summary_bytes(b2, sizeof(b2), (double)top[i].v[HB_ALLOC_SPACE]);
			fprintf(f, "  %10s in use  %10s allocated  %s\n", b1, b2, top[i].function);
		}
	}
	if (output)
		fprintf(f, "heapbpf: wrote %s\n", output);
}
