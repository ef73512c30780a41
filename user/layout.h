/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What heapbpf reads from jemalloc, per jemalloc version: probe argument
 * positions, struct offsets, the name of the active flag. One table entry
 * per version; a new version is a new entry, not new code.
 */
#ifndef __HEAPBPF_LAYOUT_H
#define __HEAPBPF_LAYOUT_H

#include <linux/types.h>
#include <stdbool.h>

#include "heapbpf.h"

struct jemalloc_layout {
	const char *name;	    /* "5.3.0" */
	const char *version_prefix; /* matched against the embedded version string */
	const char *active_sym;	    /* the prof_active flag, without namespace prefix */
	struct heapbpf_layout bpf;
};

/* The entry whose version_prefix the version string starts with, or NULL. */
const struct jemalloc_layout *jemalloc_layout_find(const char *version);
/* The entry named name ("5.3.0"), or NULL. */
const struct jemalloc_layout *jemalloc_layout_by_name(const char *name);
/* Comma-separated list of supported version names, for messages. */
const char *jemalloc_layout_names(void);

#endif /* __HEAPBPF_LAYOUT_H */
