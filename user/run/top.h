/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * heapbpf top: a live view of a target's allocation sites while the session
 * samples. Every interval a profile is built from the collector and reduced
 * to its sites (the function that called the allocator, with the file and
 * line of the call); two successive snapshots give each site's in-use growth
 * and allocation rate over the interval. On a terminal the view fills the
 * screen (alternate screen, keys read in raw mode, the size from TIOCGWINSZ
 * and SIGWINCH, plain ANSI escapes); otherwise it prints one plain table per
 * interval. The pure parts (snapshots, deltas, collapsing, sorting, keys,
 * rendering) are profile/topview.c's; this is the terminal and the session.
 */
#ifndef __HEAPBPF_TOP_H
#define __HEAPBPF_TOP_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "profile/topview.h"

struct jemalloc_target;
struct session_opts;
struct top;

struct top_opts {
	pid_t pid;
	const struct jemalloc_target *t;
	bool raw;
	struct top_ui ui;	     /* the first sort and grouping */
	const char *const *wrappers; /* --wrapper (user/profile/wrappers.h) */
	size_t nwrappers;
};

/*
 * Sets up the view: on a terminal (stdout), the alternate screen and, when
 * stdin is a terminal too, raw mode for the keys; SIGWINCH is read through
 * a descriptor. Returns 0 or a negative errno with a message in err.
 */
int top__new(const struct top_opts *o, struct top **out, char *err, size_t errlen);
/* The session's side: a 1 s interval that redraws, and the key and SIGWINCH watches. */
void top__session_opts(struct top *t, struct session_opts *so);
/* Restores the terminal (mode, screen, cursor) and the signal mask; NULL is fine. */
void top__free(struct top *t);

#endif /* __HEAPBPF_TOP_H */
