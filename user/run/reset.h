/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* heapbpf --reset with no target (run/reset.c). */
#ifndef __HEAPBPF_RUN_RESET_H
#define __HEAPBPF_RUN_RESET_H

#include <stddef.h>

struct run;

/*
 * Every flag a killed heapbpf's state files name, restored: 0 (each
 * restore said, "nothing to reset" when none was), or a negative errno
 * with a sentence in err.
 */
int reset_all(struct run *r, char *err, size_t errlen);

#endif /* __HEAPBPF_RUN_RESET_H */
