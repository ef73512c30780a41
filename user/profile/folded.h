/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Folded stacks ("collapsed" format of flamegraph.pl, speedscope, inferno):
 *
 *   main;handle_request;inline_helper;malloc 4096
 *
 * one line per distinct stack, root first, then the value of one sample type.
 */
#ifndef __HEAPBPF_FOLDED_H
#define __HEAPBPF_FOLDED_H

#include <stdio.h>

#include "util/profile.h"

/*
 * Writes every sample whose value for @which is > 0. Inlined lines expand to
 * one frame each (caller before callee); ';' in names becomes ':', and
 * newline, tab and CR become spaces. A location without lines prints as its
 * address (0x...), a sample without locations as "[unknown]". Stacks that
 * print identically are merged (values summed) and lines are sorted by
 * stack text. A diff (any sample marked diff_base) is written with two
 * values per line, "stack BASE NEW" (difffolded's format, for differential
 * flame graphs), every stack with a change on either side. Flushes @f;
 * returns 0, -EINVAL for a bad @which or a dangling location index,
 * -ENOMEM, or the negative errno of a write error.
 */
int folded_write(const struct hb_profile *p, enum hb_value which, FILE *f);

#endif /* __HEAPBPF_FOLDED_H */
