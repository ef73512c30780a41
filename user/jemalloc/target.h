/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Finding jemalloc inside a running process: which mapped ELF object holds
 * it (the executable when linked statically, or a shared libjemalloc), its
 * version, namespace prefixes, the addresses of the functions heapbpf probes
 * and of the globals it reads and writes.
 */
#ifndef __HEAPBPF_TARGET_H
#define __HEAPBPF_TARGET_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "jemalloc/target_types.h"

/*
 * Finds jemalloc in pid. On failure returns negative errno and writes a
 * one-sentence explanation (what failed and what to do) into err.
 * layout_name forces a layout when the version is not recognized (NULL: no).
 * The layout is checked against the object's DWARF where it has some, and
 * adjusted for a --enable-debug build.
 */
int jemalloc_target__find(pid_t pid, const char *layout_name, struct jemalloc_target **out,
			  char *err, size_t errlen);
void jemalloc_target__free(struct jemalloc_target *t);

/*
 * The same search in an image the caller describes: t (calloc'ed) holds
 * pid, comm, maps (owned by t from now on), open_object and mem. On failure
 * the caller frees t with jemalloc_target__free().
 */
int jemalloc_target__identify(struct jemalloc_target *t, const char *layout_name, char *err,
			      size_t errlen);

/*
 * The largest lg_prof_sample heapbpf scales by: jemalloc accepts up to 63,
 * but a recording must be readable again (its reader takes up to 62).
 */
#define HB_LG_SAMPLE_MAX 62

/*
 * Reads jemalloc's current sampling rate (lg_prof_sample) from the target:
 * -ERANGE (with *lg set) past HB_LG_SAMPLE_MAX.
 */
int jemalloc_target__read_lg_sample(struct jemalloc_target *t, uint64_t *lg);

/*
 * The runtime address of one of jemalloc's globals (a data symbol of its
 * full symbol table): name with the private namespace in front when
 * prefixed, as is otherwise (file-local statics such as bt2gctx).
 */
int jemalloc_target__global(const struct jemalloc_target *t, const char *name, bool prefixed,
			    uint64_t *addr);

/* The same, with the global's size in bytes (its symbol's st_size). */
int jemalloc_target__global_sized(const struct jemalloc_target *t, const char *name, bool prefixed,
				  uint64_t *addr, uint64_t *size);
/* True when the symbol name is one of jemalloc's functions (private or public API). */
bool jemalloc_target__is_jemalloc_func(const struct jemalloc_target *t, const char *name);

#endif /* __HEAPBPF_TARGET_H */
