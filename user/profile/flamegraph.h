/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The flame graph format: one self-contained HTML page (inline CSS, script
 * and data; a Content-Security-Policy that forbids any network access) in
 * which the profile's stacks, merged into one tree of frame paths, are drawn
 * as a flame graph sized by one sample type, with hover details, click to
 * zoom, search and an inverted (callers) view.
 *
 * HTML rather than a standalone SVG: an SVG's script does not run where an
 * SVG is shown as an image (an <img>, most viewers), it has no text field for
 * the search, and HTML lays out and clips the frame labels itself.
 *
 * The tree is built here, once: a node per distinct path of frames from the
 * root, a frame being a function (with its file, and whether it was inlined
 * into its caller), an unsymbolized address, or with --follow-forks the
 * process ("pid N") above each process's stacks. The page's script only lays
 * the tree out, drawing frames wider than half a pixel, and builds the
 * inverted tree from it when asked.
 *
 * A differential profile (heapbpf diff's: BASE's samples negated and marked
 * diff_base, or diff_files set) makes a differential page: each node carries
 * the sample type's value in BASE and in NEW, a frame is as wide as the
 * larger of the two (and at least as wide as its children together),
 * coloured by the change: red grew, blue shrank, by how much relative to
 * the larger value, grey unchanged. The header shows both files and totals.
 */
#ifndef __HEAPBPF_FLAMEGRAPH_H
#define __HEAPBPF_FLAMEGRAPH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "profile/flamegraph_types.h"
#include "util/profile.h"

struct flamegraph;

/*
 * Builds the tree of the samples whose @which value is positive (of a diff:
 * not zero): every frame
 * path merged once, nodes numbered in pre-order with siblings sorted by name
 * (then file, then inlined last), so the result does not depend on the order
 * of samples. Returns 0 or -EINVAL (bad @which, dangling location index),
 * -ENOMEM.
 */
int flamegraph__new(const struct hb_profile *p, enum hb_value which, struct flamegraph **out);

size_t flamegraph__nnodes(const struct flamegraph *fg);

/* Whether the tree is a diff's: nodes carry base and new, not bytes and objects. */
bool flamegraph__is_diff(const struct flamegraph *fg);

/* Node @i (0 <= i < nnodes, 0 is the root); strings live as long as fg and p. */
void flamegraph__node(const struct flamegraph *fg, size_t i, struct fg_node_info *out);

/*
 * Writes the page: a title with the process, pid, jemalloc version, window
 * and totals (from the profile's comments, time and duration), the profile's
 * other comments as notes, the tree as JSON (every string escaped for a
 * script element) and the viewer. Returns 0 or the negative errno of a
 * write error.
 */
int flamegraph__write_html(const struct flamegraph *fg, FILE *f);

void flamegraph__free(struct flamegraph *fg);

/* flamegraph__new(), __write_html(), __free() in one; flushes @f. */
int flamegraph_write(const struct hb_profile *p, enum hb_value which, FILE *f);

#endif /* __HEAPBPF_FLAMEGRAPH_H */
