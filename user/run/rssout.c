// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "jemalloc/target.h"
#include "profile/summary.h"
#include "run/rssout.h"

const char *rssout_frame(const struct hb_profile *p, const struct hb_sample *s, uint32_t k)
{
	const struct hb_location *l = &p->locations[s->locs[k]];

	return l->nlines && l->lines[0].function ? l->lines[0].function : "??";
}

/* s as a JSON string: quotes, backslashes and control bytes escaped. */
static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p < 0x20 || *p == 0x7f)
			fprintf(f, "\\u%04x", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

static void json_part(FILE *f, const char *name, uint64_t resident, uint64_t bytes_held, bool last)
{
	fprintf(f, "\"%s\":{\"resident\":%" PRIu64 ",\"bytes\":%" PRIu64 "}%s", name, resident,
		bytes_held, last ? "" : ",");
}

static void json_jemalloc(FILE *f, const struct rss_map *m)
{
	const struct jestats *je = &m->je;

	fprintf(f,
		"\"jemalloc\":{\"allocated\":%" PRIu64 ",\"active\":%" PRIu64
		",\"metadata\":%" PRIu64 ",\"mapped\":%" PRIu64 ",\"retained\":%" PRIu64
		",\"dirty\":%" PRIu64 ",\"muzzy\":%" PRIu64 ",\"resident\":%" PRIu64
		",\"stats_resident\":%" PRIu64 ",\"narenas\":%u,\"parts\":{",
		je->allocated, je->active, je->metadata, je->mapped, je->retained, je->dirty,
		je->muzzy, m->je_resident, je->resident, je->narenas);
	json_part(f, "slabs", m->resident[JE_SLAB], je->slab_bytes, false);
	json_part(f, "large", m->resident[JE_LARGE] + m->resident[JE_PROMOTED], je->large_bytes,
		  false);
	json_part(f, "dirty", m->resident[JE_DIRTY], je->dirty, false);
	json_part(f, "muzzy", m->resident[JE_MUZZY], je->muzzy, false);
	json_part(f, "retained", m->resident[JE_RETAINED], je->retained, false);
	json_part(f, "metadata", m->resident[JE_BASE], je->base_mapped, false);
	json_part(f, "moving", m->resident[JE_OTHER], 0, true);
	fprintf(f, "}},");
}

static void json_lists(FILE *f, const struct rss_map *m)
{
	const struct jestats *je = &m->je;
	bool first = true;

	fprintf(f, "\"bins\":[");
	for (unsigned i = 0; i < je->nbins; i++) {
		const struct jestats_bin *b = &je->bins[i];

		fprintf(f,
			"%s{\"size\":%" PRIu64 ",\"regions\":%" PRIu64 ",\"used\":%" PRIu64
			",\"slabs\":%" PRIu64 ",\"nonfull_slabs\":%" PRIu64
			",\"slab_bytes\":%" PRIu64 ",\"free\":%" PRIu64 ",\"resident\":%" PRIu64
			"}",
			i ? "," : "", b->size, b->curslabs * b->nregs, b->curregs, b->curslabs,
			b->nonfull, b->curslabs * b->slab_size, jestats_bin_free(b),
			m->bin_resident[i]);
	}
	fprintf(f, "],\"large\":[");
	for (unsigned i = je->nbins; i < je->nsizes; i++) {
		if (!je->large[i].count)
			continue;
		fprintf(f, "%s{\"size\":%" PRIu64 ",\"count\":%" PRIu64 ",\"bytes\":%" PRIu64 "}",
			first ? "" : ",", je->large[i].size, je->large[i].count,
			je->large[i].bytes);
		first = false;
	}
	fprintf(f, "],\"others\":[");
	for (int i = 0; i < RSS_OTHERS && m->others[i].bytes; i++) {
		fprintf(f, "%s{\"start\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"name\":", i ? "," : "",
			m->others[i].start, m->others[i].bytes);
		json_str(f, m->others[i].name);
		fputc('}', f);
	}
	fprintf(f, "]");
}

static void json_stacks(FILE *f, const struct rssout_stacks *st)
{
	if (!st->p) {
		fprintf(f, ",\"stacks\":[],\"stacks_note\":");
		json_str(f, st->why);
		return;
	}
	fprintf(f, ",\"stacks\":[");
	for (size_t i = 0; i < st->p->nsamples; i++) {
		const struct hb_sample *smp = &st->p->samples[st->order[i]];

		fprintf(f, "%s{\"frames\":[", i ? "," : "");
		for (uint32_t k = 0; k < smp->nlocs; k++) {
			if (k)
				fputc(',', f);
			json_str(f, rssout_frame(st->p, smp, k));
		}
		fprintf(f,
			"],\"site\":%u,\"inuse\":%" PRId64 ",\"inuse_objects\":%" PRId64
			",\"held\":%.0f}",
			smp->site, smp->v[HB_INUSE_SPACE] > 0 ? smp->v[HB_INUSE_SPACE] : 0,
			smp->v[HB_INUSE_OBJECTS] > 0 ? smp->v[HB_INUSE_OBJECTS] : 0,
			st->held[st->order[i]]);
	}
	fprintf(f, "]");
}

int rssout_json(FILE *f, const struct jemalloc_target *t, const struct rss_map *m,
		const struct rssout_stacks *st, double age_ms)
{
	fprintf(f, "{\"pid\":%d,\"comm\":", t->pid);
	json_str(f, t->comm);
	fprintf(f, ",\"jemalloc_version\":");
	json_str(f, t->version);
	fprintf(f,
		",\"rss\":%" PRIu64 ",\"anon\":%" PRIu64 ",\"file\":%" PRIu64 ",\"shmem\":%" PRIu64
		",\"swap\":%" PRIu64 ",",
		m->mem.rss, m->mem.anon, m->mem.file, m->mem.shmem, m->mem.swap);
	json_jemalloc(f, m);
	fprintf(f,
		"\"outside_jemalloc\":%" PRIu64 ",\"main_stack\":%" PRIu64
		",\"thread_stacks\":%" PRIu64 ",\"other_anon\":%" PRIu64 ",\"unexplained\":%" PRId64
		",",
		m->main_stack + m->thread_stacks + m->other_anon, m->main_stack, m->thread_stacks,
		m->other_anon, m->unexplained);
	json_lists(f, m);
	json_stacks(f, st);
	fprintf(f, ",\"walk\":{\"extents\":%" PRIu64 ",\"skipped\":%" PRIu64 ",\"ms\":%.3f}",
		m->walk.extents, m->walk.skipped, m->walk_ms);
	if (age_ms >= 0)
		fprintf(f, ",\"age_ms\":%.0f", age_ms);
	fprintf(f, "}\n");
	return ferror(f) ? -EIO : 0;
}

/* ", name SIZE" at *at in buf, which moves past it; nothing when v is 0 and skip_zero. */
static void part(char *buf, size_t len, size_t *at, const char *name, uint64_t v, bool skip_zero)
{
	char b[32];
	int n;

	if ((skip_zero && !v) || *at >= len)
		return;
	summary_bytes(b, sizeof(b), (double)v);
	n = snprintf(buf + *at, len - *at, "%s%s %s", *at ? ", " : "", name, b);
	*at = n < 0 ? len : *at + (size_t)n;
}

void rssout_line(const struct rss_map *m, char *buf, size_t len)
{
	char b[2][32], u[40];
	size_t at = 0;

	buf[0] = '\0';
	part(buf, len, &at, "slabs", m->resident[JE_SLAB], false);
	if (at < len) {
		summary_bytes(b[0], sizeof(b[0]), (double)m->je.slab_free);
		at += (size_t)snprintf(buf + at, len - at, " (%s of free regions)", b[0]);
	}
	part(buf, len, &at, "large", m->resident[JE_LARGE] + m->resident[JE_PROMOTED], false);
	part(buf, len, &at, "dirty", m->resident[JE_DIRTY], false);
	part(buf, len, &at, "muzzy", m->resident[JE_MUZZY], true);
	part(buf, len, &at, "retained", m->resident[JE_RETAINED], true);
	part(buf, len, &at, "jemalloc's metadata", m->resident[JE_BASE], false);
	part(buf, len, &at, "moving", m->resident[JE_OTHER], true);
	part(buf, len, &at, "stacks", m->main_stack + m->thread_stacks, false);
	part(buf, len, &at, "other anonymous", m->other_anon, false);
	part(buf, len, &at, "files", m->mem.file, false);
	part(buf, len, &at, "shmem", m->mem.shmem, true);
	summary_bytes(b[1], sizeof(b[1]),
		      (double)(m->unexplained < 0 ? -m->unexplained : m->unexplained));
	snprintf(u, sizeof(u), "%s%s", m->unexplained < 0 ? "-" : "", b[1]);
	if (at < len)
		snprintf(buf + at, len - at, ", unexplained %s", u);
}
