/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What target.c and find.c share: the sampling function's name, and what
 * target.c calls of find.c (never the other way). Private to jemalloc/'s
 * target: nothing outside those files includes this.
 */
#ifndef __HEAPBPF_TARGET_PRIVATE_H
#define __HEAPBPF_TARGET_PRIVATE_H

#include <stddef.h>
#include <sys/types.h>

#define SAMPLE_FN "prof_malloc_sample_object"
#define FREE_FN	  "prof_free_sampled_object"

struct elf_sym;
struct jemalloc_target;
struct proc_map;
struct proc_maps;

/* The first mapping of path in m, or NULL. */
const struct proc_map *find_first_mapping(const struct proc_maps *m, const char *path);
/* The object holding jemalloc among the process's mappings, and its sampling function. */
int find_jemalloc(struct jemalloc_target *t, const struct elf_sym **sym, char *err, size_t errlen);
/* jemalloc at path in pid was built without profiling: -ENOTSUP, said in err. */
int find_fail_noprof(char *err, size_t errlen, pid_t pid, const char *path);

#endif /* __HEAPBPF_TARGET_PRIVATE_H */
