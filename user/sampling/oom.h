/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * heapbpf watch's oom trigger: the kernel's oom/mark_victim tracepoint
 * names the process an OOM kill is about to end, with its memory figures
 * (docs/kernel.md). Its record's layout comes from the format file.
 */
#ifndef __HEAPBPF_OOM_H
#define __HEAPBPF_OOM_H

#include <linux/types.h>
#include <stdbool.h>
#include <stddef.h>

#include "heapbpf.h"

/* The offsets of the victim's pid and figures; -ENOENT (a sentence in err) without the pid. */
int oom_victim_offsets(struct heapbpf_oom_offsets *o, char *err, size_t errlen);

#endif /* __HEAPBPF_OOM_H */
