/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A profile reduced to its allocation sites: each sample's site (the
 * caller of malloc, past its wrappers: profile/wrappers.h) and the values
 * of the samples with the same key summed. The one reduction the summary's
 * top sites and top's rows are both made from.
 */
#ifndef __HEAPBPF_PROFILE_SITES_H
#define __HEAPBPF_PROFILE_SITES_H

#include <stddef.h>
#include <stdint.h>

#include "util/profile.h"

/* What samples are summed by. */
enum sites_key {
	SITES_BY_FUNCTION, /* the site's function */
	SITES_BY_LINE,	   /* its function, file and line */
};

struct site {
	const char *function; /* the profile's strings, borrowed */
	const char *file;     /* "" when unknown; NULL with SITES_BY_FUNCTION */
	int64_t line;	      /* 0 with SITES_BY_FUNCTION */
	int64_t v[HB_NVALUES];
};

/*
 * p's sites, each once, sorted by function, file and line, into *out
 * (free() it; NULL when there are none) and their number into *n. 0, or
 * -ENOMEM.
 */
int sites_reduce(const struct hb_profile *p, enum sites_key key, struct site **out, size_t *n);

#endif /* __HEAPBPF_PROFILE_SITES_H */
