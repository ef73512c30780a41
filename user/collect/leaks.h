/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What heapbpf makes of the events beyond totals (docs/analysis.md): how
 * long sampled objects live (a lifetime histogram per stack), which stacks'
 * in-use grows steadily (a least-squares line through the collector's
 * checkpoints) and how sure that is, which stacks hold sampled objects far
 * older than freed ones live (held suspects), merged per profile sample by
 * report__build and written as sample labels and the --leaks report.
 */
#ifndef __HEAPBPF_LEAKS_H
#define __HEAPBPF_LEAKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collect/lifetimes.h"

struct collector;
struct hb_profile;

/* A least-squares line through (t seconds, y) points. */
struct hb_trend {
	double slope;	 /* y per second */
	double r2;	 /* steadiness: the share of y's variance the line explains, 0..1 */
	double slope_se; /* standard error of the slope; INFINITY with fewer than 3 points */
	size_t n;
};

/* Fits the line; -EINVAL with fewer than 2 points or all t equal. */
int leaks_trend_fit(const double *t, const float *y, size_t n, struct hb_trend *out);

/* A stack needs at least this many points (checkpoints and the end) to be judged. */
#define HB_SUSPECT_MIN_POINTS 8
/* ... and a line that explains this much of its in-use's variance. */
#define HB_SUSPECT_MIN_R2 0.8
/* ... and this many sampled objects still live. */
#define HB_SUSPECT_MIN_LIVE 3

/* True for a steady grower: enough points and live samples, rising, close to a line. */
bool leaks_trend_is_suspect(const struct hb_trend *t, uint64_t live_samples);

/*
 * The relative error of a growth rate backed by `samples` live samples:
 * the sampling error of their unbiased sum (1/sqrt(samples)) and the line's
 * own standard error, combined. INFINITY without samples or growth.
 */
double leaks_rate_rel_err(const struct hb_trend *t, uint64_t samples);

/*
 * Held suspects (allocated, then kept): a site whose live sampled objects
 * are older than half the window, than HB_HELD_LIFETIME_FACTOR times the
 * 90th percentile lifetime of freed objects (its own when it freed
 * HB_HELD_MIN_FREED, else the window's), and than each of its own freed
 * ones; at least HB_HELD_MIN_LIVE of them. Never a growth suspect as well.
 */
#define HB_HELD_MIN_LIVE	4
#define HB_HELD_MIN_FREED	8
#define HB_HELD_WINDOW_SHARE	0.5
#define HB_HELD_LIFETIME_FACTOR 10

/* Whose freed objects' lifetimes a site's live ones were held against. */
enum hb_held_base {
	HB_HELD_NONE,	/* too few freed anywhere: not judged */
	HB_HELD_OWN,	/* the site's own */
	HB_HELD_WINDOW, /* every site's of the window (the site freed too few) */
};

/*
 * The age (ns) beyond which a site's live sampled objects count as held,
 * in a window of window_ns: own are its freed objects' lifetimes, all the
 * window's. 0 with *base HB_HELD_NONE when neither has HB_HELD_MIN_FREED.
 */
uint64_t leaks_held_cutoff(uint64_t window_ns, const struct hb_lifetimes *own,
			   const struct hb_lifetimes *all, enum hb_held_base *base);
/* True for enough held samples. */
bool leaks_held_is_suspect(uint64_t held);

enum hb_confidence {
	HB_CONF_LOW,
	HB_CONF_MEDIUM, /* within 30% */
	HB_CONF_HIGH,	/* within 10% */
};

enum hb_confidence leaks_confidence_of(double rel_err);
/* "low", "medium", "high" */
const char *leaks_confidence_name(enum hb_confidence c);

/* Per profile sample: what its stacks' events say beyond the four values. */
struct hb_site_stats {
	struct hb_lifetimes lt;
	uint64_t live;	    /* sampled objects still live at the end */
	uint64_t oldest_ts; /* CLOCK_MONOTONIC allocation of the oldest of them; 0: none known */
	uint32_t axis;	    /* index into hb_analysis.axes: whose checkpoints */
	/*
	 * Its stacks, a list through the axis' next[]: its in-use at each point
	 * of the axis is summed from them when the trend is fitted, not kept.
	 */
	uint32_t first, last;
	struct hb_trend trend;
	double rel_err;	    /* of the growth rate (leaks_rate_rel_err) */
	uint64_t held;	    /* live sampled objects older than held_over */
	uint64_t held_over; /* leaks_held_cutoff's age, ns */
	enum hb_held_base held_base;
	bool used, suspect, held_suspect;
};

/* One collector's points in time: its checkpoints, then the end. */
struct hb_axis {
	const struct collector *c;
	size_t n;
	double *t;	  /* seconds since the first checkpoint */
	uint64_t t0_ts;	  /* CLOCK_MONOTONIC of the first checkpoint */
	uint64_t end_ts;  /* ... of the last event applied */
	uint64_t *oldest; /* per stack of c: its oldest live sample's allocation time, 0: none */
	uint32_t *next;	  /* per stack of c: the next stack of its sample, UINT32_MAX: none */
	struct hb_lifetimes lt; /* every freed sampled object's of the window */
};

struct hb_analysis {
	struct hb_site_stats *s; /* parallel to the profile's samples */
	size_t ns, cap;
	struct hb_axis *axes;
	size_t naxes;
	uint64_t temporary_ns;
	uint32_t *suspects; /* sample indices, fastest growth first */
	size_t nsuspects;
	uint32_t *held; /* held suspects' sample indices, most in use first */
	size_t nheld;
};

int leaks_analysis__new(struct hb_analysis **out);
/* Counts stack `stack` of c into profile sample `sample` (several stacks can make one sample). */
int leaks_analysis__add(struct hb_analysis *a, uint32_t sample, const struct collector *c,
			size_t stack);
/*
 * Once every stack is in: fits each sample's trend, ranks the suspects,
 * judges the held ones and puts the numbers on p's samples as labels
 * (lifetime_p50, _p90, _max in nanoseconds; freed, temporary, live_at_end
 * counts of sampled objects; leak_rank, inuse_growth; held_rank, held_live,
 * held_over).
 */
int leaks_analysis__finish(struct hb_analysis *a, struct hb_profile *p);
void leaks_analysis__free(struct hb_analysis *a);

#endif /* __HEAPBPF_LEAKS_H */
