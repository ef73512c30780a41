/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Sites named past allocator wrappers. A service that allocates through a
 * function of its own (Redis's zmalloc, xmalloc, g_malloc, C++'s operator
 * new, Rust's __rust_alloc and alloc::raw_vec) would otherwise have every
 * site named after that function: the leaf left once jemalloc's frames are
 * trimmed. A sample's site is its first frame, from the leaf toward the
 * root, that is not an allocator wrapper.
 *
 * A frame is the outermost line of a location: the function the code is in,
 * what sites were named by before (an inlined wrapper is already inside its
 * caller's frame). A function is a wrapper when:
 *
 *   1. its name, demangled or raw, is one of the built-in list
 *      (wrappers_builtin()) or matches a --wrapper pattern (an exact name,
 *      or an fnmatch(3) glob); a C name also without the suffix of a GCC
 *      clone or a symbol version (_sdsnewlen.constprop.0 is _sdsnewlen); or
 *   2. in every sample of the profile in which it appears, it appears once,
 *      and directly above the allocator: every frame below it (toward the
 *      leaf) is jemalloc's (already trimmed) or a wrapper; and it is called
 *      there from at least WRAPPERS_MIN_CALLERS distinct functions. The
 *      second condition keeps a function that allocates for one caller a
 *      site of its own: every direct caller of malloc meets the first.
 *      Rule 2 is applied until nothing changes, so a function whose only
 *      callee is a wrapper found so (sdsnewlen above zmalloc_usable) can be
 *      one too. An unsymbolized frame ("obj+0x...") is never one by rule 2.
 *
 * A stack of nothing but wrappers is named by its outermost frame: the one
 * nearest to whoever called them.
 */
#ifndef __HEAPBPF_WRAPPERS_H
#define __HEAPBPF_WRAPPERS_H

#include <stdbool.h>
#include <stddef.h>

#include "util/profile.h"

/* Rule 2: the distinct callers a function needs to be a wrapper by the samples alone. */
#define WRAPPERS_MIN_CALLERS 2

/* At most this many names in wrappers_text()'s list, then "and N more". */
#define WRAPPERS_TEXT_NAMES 8

/* True when name (demangled or raw) is one of the built-in allocator wrappers. */
bool wrappers_builtin(const char *name);

/* True when name is pattern, or matches it as an fnmatch(3) glob. */
bool wrappers_match(const char *pattern, const char *name);

/*
 * Sets every sample's site (hb_sample.site) by the rules above, with the
 * user's patterns (--wrapper) besides the built-in list, and p->wrappers:
 * the wrappers some site was named past. Returns 0 or -ENOMEM (the
 * profile is then as it was).
 */
int wrappers_apply(struct hb_profile *p, const char *const *patterns, size_t npatterns);

/* The line that names sample s's site (its site frame's outermost line), or NULL. */
const struct hb_line *wrappers_site_line(const struct hb_profile *p, const struct hb_sample *s);

/* The function that names sample s's site, "?" when it has no frame. */
const char *wrappers_site_name(const struct hb_profile *p, const struct hb_sample *s);

/*
 * "sites named past allocator wrappers: zmalloc, zmalloc_usable (--wrapper
 * adds more)", each name through hb_clean; -ENOENT when no site was.
 */
int wrappers_text(char *buf, size_t len, const struct hb_profile *p);

#endif /* __HEAPBPF_WRAPPERS_H */
