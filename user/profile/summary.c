// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/errmsg.h"
#include "profile/sites.h"
#include "profile/summary.h"
#include "profile/wrappers.h"

/* Columns of a sparkline, and rows of the lifetimes table. */
#define SPARK_WIDTH	      40
#define SUMMARY_LIFETIME_ROWS 10
/* A site's name as a line shows it (hb_clean), "..." beyond */
#define NAME_TEXT 4096

void summary_bytes(char *buf, size_t len, double bytes)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
	int u = 0;

	while (bytes >= 1024 && u < 6) {
		bytes /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%.0f B", bytes);
	else
		snprintf(buf, len, "%.1f %s", bytes, units[u]);
}

/* By in use, then allocated, then name: the order of the summary's top sites. */
static int cmp_site(const void *a, const void *b)
{
	const struct site *x = a, *y = b;

	if (x->v[HB_INUSE_SPACE] != y->v[HB_INUSE_SPACE])
		return x->v[HB_INUSE_SPACE] > y->v[HB_INUSE_SPACE] ? -1 : 1;
	if (x->v[HB_ALLOC_SPACE] != y->v[HB_ALLOC_SPACE])
		return x->v[HB_ALLOC_SPACE] > y->v[HB_ALLOC_SPACE] ? -1 : 1;
	return strcmp(x->function, y->function);
}

size_t summary_top_sites(const struct hb_profile *p, struct hb_site *out, size_t n)
{
	struct site *all;
	size_t nall;

	/* the function that called malloc, or the wrapper around it (wrappers.h) */
	/* no site: no array either, and qsort takes none (UBSan: nonnull) */
	if (sites_reduce(p, SITES_BY_FUNCTION, &all, &nall) || !nall)
		return 0;
	qsort(all, nall, sizeof(*all), cmp_site);
	if (nall > n)
		nall = n;
	for (size_t i = 0; i < nall; i++) {
		out[i].function = all[i].function;
		memcpy(out[i].v, all[i].v, sizeof(out[i].v));
	}
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
		   const struct heapbpf_counters *bc, const char *output, const char *who)
{
	struct hb_site top[5];
	size_t n = summary_top_sites(p, top, 5);
	char b1[32], b2[32], name[NAME_TEXT];

	double allocated = 0;

	/*
	 * The estimate first, the sampled objects' own bytes as a part of it: the
	 * raw sum beside an estimate of every allocation reads as a contradiction.
	 */
	for (size_t i = 0; i < p->nsamples; i++)
		allocated += (double)p->samples[i].v[HB_ALLOC_SPACE];
	summary_bytes(b1, sizeof(b1), allocated);
	summary_bytes(b2, sizeof(b2), (double)st->alloc_bytes);
	if (p->raw)
		fprintf(f,
			"heapbpf: %s%" PRIu64 " samples, %" PRIu64 " frees of them, %" PRIu64
			" frees of objects sampled before attach; the sampled objects are %s "
			"(--raw: no estimate of all allocations)\n",
			who, st->allocs, st->frees_matched, st->frees_unmatched, b2);
	else
		fprintf(f,
			"heapbpf: %s%" PRIu64 " samples, %" PRIu64 " frees of them, %" PRIu64
			" frees of objects sampled before attach; %s allocated (estimated), of "
			"which the sampled objects are %s\n",
			who, st->allocs, st->frees_matched, st->frees_unmatched, b1, b2);
	/* a later window's: its allocations are the window's, what is in use is since the start */
	if (p->inuse_since_nanos) {
		char since[64];

		summary_utc(since, sizeof(since), p->inuse_since_nanos);
		fprintf(f,
			"heapbpf: %sallocated: in this window (%.1f s); in use: of everything sampled "
			"since sampling started at %s\n",
			who, p->duration_nanos / 1e9, since);
	}
	if (bc->alloc_drops || bc->free_drops)
		fprintf(f,
			"heapbpf: %sWARNING: %llu samples and %llu frees were dropped "
			"(ring buffer full); raise --ringbuf-size\n",
			who, (unsigned long long)bc->alloc_drops,
			(unsigned long long)bc->free_drops);
	if (bc->proc_drops || bc->untracked_forks)
		fprintf(f,
			"heapbpf: %sWARNING: %llu fork or exec events were dropped (ring buffer "
			"full) and %llu forked processes were not tracked (%d alive at once at "
			"most): a process they forked may have kept prof_active on\n",
			who, (unsigned long long)bc->proc_drops,
			(unsigned long long)bc->untracked_forks, HEAPBPF_MAX_TRACKED);
	if (st->read_faults)
		fprintf(f,
			"heapbpf: %sWARNING: %" PRIu64 " events could not read jemalloc's memory\n",
			who, st->read_faults);
	if (st->bad_frames)
		fprintf(f,
			"heapbpf: %sWARNING: %" PRIu64 " samples had a backtrace frame in the "
			"null page, where no code is: not jemalloc's backtrace but other memory, "
			"read by the kernel side; left out of the profile\n",
			who, st->bad_frames);
	if (st->truncated)
		fprintf(f,
			"heapbpf: %sWARNING: %" PRIu64 " of the %" PRIu64
			" samples had backtraces deeper than heapbpf's %d frames (jemalloc's "
			"prof_bt_max is above %d): each keeps its innermost %d frames\n",
			who, st->truncated, st->allocs, HEAPBPF_MAX_FRAMES, HEAPBPF_MAX_FRAMES,
			HEAPBPF_MAX_FRAMES);
	if (n) {
		fprintf(f, "heapbpf: %stop sites by in-use bytes%s:\n", who,
			p->raw ? " (raw sampled)" : " (estimated)");
		for (size_t i = 0; i < n; i++) {
			summary_bytes(b1, sizeof(b1), (double)top[i].v[HB_INUSE_SPACE]);
			summary_bytes(b2, sizeof(b2), (double)top[i].v[HB_ALLOC_SPACE]);
			fprintf(f, "  %10s in use  %10s allocated  %s\n", b1, b2,
				hb_clean(name, sizeof(name), top[i].function));
		}
	}
	if (!wrappers_text(name, sizeof(name), p))
		fprintf(f, "heapbpf: %s%s\n", who, name);
	if (output)
		fprintf(f, "heapbpf: %swrote %s\n", who, hb_clean(name, sizeof(name), output));
}

void summary_sites(const struct hb_profile *p, const struct hb_site *top, size_t n)
{
	char b[32], a[32], name[HB_CLEAN_SIZE(1024)];

	for (size_t i = 0; i < n; i++) {
		summary_bytes(b, sizeof(b), (double)top[i].v[HB_INUSE_SPACE]);
		summary_bytes(a, sizeof(a), (double)top[i].v[HB_ALLOC_SPACE]);
		hb_note_more("  %10s in use  %10s allocated  %s", b, a,
			     hb_clean(name, sizeof(name), top[i].function));
	}
	if (!wrappers_text(name, sizeof(name), p))
		hb_note("%s", name);
}

void summary_duration(char *buf, size_t len, double ns)
{
	if (ns < 1e3)
		snprintf(buf, len, "%.0f ns", ns);
	else if (ns < 1e6)
		snprintf(buf, len, "%.1f us", ns / 1e3);
	else if (ns < 1e9)
		snprintf(buf, len, "%.1f ms", ns / 1e6);
	else
		snprintf(buf, len, "%.1f s", ns / 1e9);
}

void summary_sparkline(char *buf, size_t len, const double *v, size_t n, size_t width)
{
	static const char *const bars[] = { "▁", "▂", "▃", "▄", "▅", "▆", "▇", "█" };
	size_t cols = n < width ? n : width, used = 0;
	double max = 0;

	for (size_t i = 0; i < n; i++)
		max = v[i] > max ? v[i] : max;
	buf[0] = '\0';
	for (size_t j = 0; j < cols; j++) {
		/* a column is the highest of its points: a short spike stays visible */
		size_t from = j * n / cols, to = (j + 1) * n / cols;
		double m = 0;
		int level;

		for (size_t i = from; i < to; i++)
			m = v[i] > m ? v[i] : m;
		level = max > 0 ? (int)lround(m / max * 7) : 0;
		if (used + 4 > len)
			break;
		used += snprintf(buf + used, len - used, "%s", bars[level < 0 ? 0 : level]);
	}
}

void summary_utc(char *buf, size_t len, int64_t wall_ns)
{
	time_t s = (time_t)(wall_ns / 1000000000LL);
	struct tm tm;

	gmtime_r(&s, &tm);
	snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
		 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
		 (int)(wall_ns % 1000000000LL / 1000000));
}

int summary_peak_text(char *buf, size_t len, const struct hb_profile *p)
{
	char b[32], when[64], after[32];

	if (!p->peak_time_nanos)
		return -ENOENT;
	summary_bytes(b, sizeof(b), p->peak_inuse_space);
	summary_utc(when, sizeof(when), p->peak_time_nanos);
	summary_duration(after, sizeof(after),
			 p->ntimeline ? (double)(p->peak_time_nanos - p->timeline[0].time_nanos)
				      : 0);
	snprintf(buf, len, "peak in use %s (estimated) at %s, %s after the first sample", b, when,
		 after);
	return 0;
}

void summary_timeline(FILE *f, const struct hb_profile *p, const char *at_peak, const char *who)
{
	double in[HB_TIMELINE_MAX], rate[HB_TIMELINE_MAX], max_rate = 0;
	size_t n = p->ntimeline < HB_TIMELINE_MAX ? p->ntimeline : HB_TIMELINE_MAX;
	char line[SPARK_WIDTH * 4 + 1], b[32], when[48], text[160], path[NAME_TEXT];

	if (n >= 2) {
		for (size_t i = 0; i < n; i++) {
			in[i] = p->timeline[i].inuse_space;
			/* the first point has no interval before it */
			rate[i] = i ? p->timeline[i].alloc_rate : 0;
			max_rate = rate[i] > max_rate ? rate[i] : max_rate;
		}
		summary_duration(
			when, sizeof(when),
			(double)(p->timeline[n - 1].time_nanos - p->timeline[0].time_nanos));
		summary_sparkline(line, sizeof(line), in, n, SPARK_WIDTH);
		/* its highest point is the peak, said once on the line below */
		fprintf(f, "heapbpf: %sin use over %-8s %s\n", who, when, line);
		summary_sparkline(line, sizeof(line), rate, n, SPARK_WIDTH);
		summary_bytes(b, sizeof(b), max_rate);
		fprintf(f, "heapbpf: %sallocated per second   %s  max %s/s\n", who, line, b);
	}
	if (!summary_peak_text(text, sizeof(text), p))
		fprintf(f, "heapbpf: %s%s%s%s\n", who, text, at_peak ? "; wrote " : "",
			at_peak ? hb_clean(path, sizeof(path), at_peak) : "");
}

/* The function that called malloc, or the wrapper around it (wrappers.h). */
static const char *site_of(const struct hb_profile *p, size_t sample)
{
	return wrappers_site_name(p, &p->samples[sample]);
}

static void print_suspects(FILE *f, const struct hb_profile *p, const struct hb_analysis *a,
			   const char *who)
{
	const struct hb_axis *ax = a->naxes ? &a->axes[0] : NULL;
	char span[32], rate[32], inuse[32], age[32], name[NAME_TEXT];

	if (!ax || ax->n < HB_SUSPECT_MIN_POINTS) {
		fprintf(f,
			"heapbpf: %sleak suspects: too few checkpoints to judge (%zu of %d needed, one "
			"per %.1f s at first): profile longer\n",
			who, ax ? ax->n : 0, HB_SUSPECT_MIN_POINTS, CHECKPOINT_FIRST_NS / 1e9);
		return;
	}
	summary_duration(span, sizeof(span), (double)(ax->end_ts - ax->t0_ts));
	if (!a->nsuspects) {
		fprintf(f,
			"heapbpf: %sleak suspects: none (no stack's in-use grew steadily over %zu "
			"points in %s)\n",
			who, ax->n, span);
		return;
	}
	fprintf(f,
		"heapbpf: %sleak suspects: stacks whose in-use grew steadily over %zu points in %s\n",
		who, ax->n, span);
	fprintf(f, "  %12s %10s %9s %6s  %-28s %s\n", "growth", "in use", "oldest", "steady",
		"confidence", "site");
	for (size_t i = 0; i < a->nsuspects; i++) {
		const struct hb_site_stats *s = &a->s[a->suspects[i]];
		const struct hb_axis *sx = &a->axes[s->axis];
		char conf[48];

		summary_bytes(rate, sizeof(rate) - 2, s->trend.slope);
		memcpy(rate + strlen(rate), "/s", 3);
		summary_bytes(inuse, sizeof(inuse),
			      (double)p->samples[a->suspects[i]].v[HB_INUSE_SPACE]);
		if (s->oldest_ts && sx->end_ts >= s->oldest_ts)
			summary_duration(age, sizeof(age), (double)(sx->end_ts - s->oldest_ts));
		else
			snprintf(age, sizeof(age), "?");
		snprintf(conf, sizeof(conf), "%s (±%.0f%%, %" PRIu64 " samples)",
			 leaks_confidence_name(leaks_confidence_of(s->rel_err)), s->rel_err * 100,
			 s->live);
		fprintf(f, "  %12s %10s %9s %6.2f  %-28s %s\n", rate, inuse, age, s->trend.r2, conf,
			hb_clean(name, sizeof(name), site_of(p, a->suspects[i])));
	}
}

/* "own 3.2 ms", "window 120.5 ms": the 90th percentile lifetime a held site was held against. */
static void held_base_text(char *buf, size_t len, const struct hb_site_stats *s,
			   const struct hb_axis *ax)
{
	char d[32];
	const struct hb_lifetimes *l = s->held_base == HB_HELD_OWN ? &s->lt : &ax->lt;

	summary_duration(d, sizeof(d), (double)lifetimes_quantile(l, 0.9));
	snprintf(buf, len, "%s %s", s->held_base == HB_HELD_OWN ? "own" : "window", d);
}

static void print_held(FILE *f, const struct hb_profile *p, const struct hb_analysis *a,
		       const char *who)
{
	const struct hb_axis *ax = a->naxes ? &a->axes[0] : NULL;
	char span[32], inuse[32], age[32], over[32], base[48], name[NAME_TEXT];

	if (!ax || ax->n < HB_SUSPECT_MIN_POINTS) {
		fprintf(f,
			"heapbpf: %sheld suspects: too few checkpoints to judge (%zu of %d needed)\n",
			who, ax ? ax->n : 0, HB_SUSPECT_MIN_POINTS);
		return;
	}
	summary_duration(span, sizeof(span), (double)(ax->end_ts - ax->t0_ts));
	if (ax->lt.n < HB_HELD_MIN_FREED) {
		fprintf(f,
			"heapbpf: %sheld suspects: not judged (%" PRIu64
			" sampled objects freed in "
			"%s, %d needed to say how long objects live)\n",
			who, ax->lt.n, span, HB_HELD_MIN_FREED);
		return;
	}
	if (!a->nheld) {
		fprintf(f,
			"heapbpf: %sheld suspects: none (no stack kept %d sampled objects live past "
			"half of %s and %dx the 90th percentile lifetime of freed ones)\n",
			who, HB_HELD_MIN_LIVE, span, HB_HELD_LIFETIME_FACTOR);
		return;
	}
	fprintf(f,
		"heapbpf: %sheld suspects: stacks that kept sampled objects live past half of %s, "
		"%dx the 90th percentile lifetime of freed ones and each of their own\n",
		who, span, HB_HELD_LIFETIME_FACTOR);
	fprintf(f, "  %10s %6s %6s %9s %9s %7s  %-16s %s\n", "in use", "held", "live", "oldest",
		"held over", "freed", "p90 lifetime", "site");
	for (size_t i = 0; i < a->nheld; i++) {
		const struct hb_site_stats *s = &a->s[a->held[i]];
		const struct hb_axis *sx = &a->axes[s->axis];

		summary_bytes(inuse, sizeof(inuse),
			      (double)p->samples[a->held[i]].v[HB_INUSE_SPACE]);
		if (s->oldest_ts && sx->end_ts >= s->oldest_ts)
			summary_duration(age, sizeof(age), (double)(sx->end_ts - s->oldest_ts));
		else
			snprintf(age, sizeof(age), "?");
		summary_duration(over, sizeof(over), (double)s->held_over);
		held_base_text(base, sizeof(base), s, sx);
		fprintf(f, "  %10s %6" PRIu64 " %6" PRIu64 " %9s %9s %7" PRIu64 "  %-16s %s\n",
			inuse, s->held, s->live, age, over, s->lt.n, base,
			hb_clean(name, sizeof(name), site_of(p, a->held[i])));
	}
}

/* Most sampled objects (freed and still live) first: qsort_r's order of sample indices. */
static int cmp_activity(const void *x, const void *y, void *arg)
{
	const struct hb_analysis *an = arg;
	uint32_t i = *(const uint32_t *)x, j = *(const uint32_t *)y;
	uint64_t ni = an->s[i].lt.n + an->s[i].live, nj = an->s[j].lt.n + an->s[j].live;

	if (ni != nj)
		return ni > nj ? -1 : 1;
	return i < j ? -1 : 1;
}

static void print_lifetimes(FILE *f, const struct hb_profile *p, const struct hb_analysis *a,
			    const char *who)
{
	uint32_t *order = calloc(a->ns ? a->ns : 1, sizeof(*order));
	char thr[32], p50[32], p90[32], max[32], name[NAME_TEXT];
	size_t n = 0;

	if (!order)
		return;
	for (size_t i = 0; i < a->ns && i < p->nsamples; i++) {
		if (a->s[i].used && (a->s[i].lt.n || a->s[i].live))
			order[n++] = i;
	}
	qsort_r(order, n, sizeof(*order), cmp_activity, (void *)a);
	summary_duration(thr, sizeof(thr), (double)a->temporary_ns);
	fprintf(f,
		"heapbpf: %slifetimes of sampled objects (temporary: freed within %s; top %d "
		"sites by sampled objects):\n",
		who, thr, SUMMARY_LIFETIME_ROWS);
	fprintf(f, "  %9s %9s %9s %9s %9s %11s  %s\n", "freed", "temporary", "p50", "p90", "max",
		"live at end", "site");
	for (size_t k = 0; k < n && k < SUMMARY_LIFETIME_ROWS; k++) {
		const struct hb_site_stats *s = &a->s[order[k]];

		if (s->lt.n) {
			summary_duration(p50, sizeof(p50), (double)lifetimes_quantile(&s->lt, 0.5));
			summary_duration(p90, sizeof(p90), (double)lifetimes_quantile(&s->lt, 0.9));
			summary_duration(max, sizeof(max), (double)s->lt.max_ns);
		} else {
			snprintf(p50, sizeof(p50), "-");
			snprintf(p90, sizeof(p90), "-");
			snprintf(max, sizeof(max), "-");
		}
		fprintf(f, "  %9" PRIu64 " %9" PRIu64 " %9s %9s %9s %11" PRIu64 "  %s\n", s->lt.n,
			s->lt.temporary, p50, p90, max, s->live,
			hb_clean(name, sizeof(name), site_of(p, order[k])));
	}
	free(order);
}

void summary_leaks(FILE *f, const struct hb_profile *p, const struct hb_analysis *a,
		   const char *who)
{
	print_suspects(f, p, a, who);
	print_held(f, p, a, who);
	print_lifetimes(f, p, a, who);
}
