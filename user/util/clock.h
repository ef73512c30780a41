/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The one clock helper: a clock's time in nanoseconds. */
#ifndef __HEAPBPF_CLOCK_H
#define __HEAPBPF_CLOCK_H

#include <stdint.h>
#include <time.h>

/* clk's time (CLOCK_MONOTONIC, CLOCK_REALTIME, ...) in ns. */
int64_t hb_clock_ns(clockid_t clk);

#endif /* __HEAPBPF_CLOCK_H */
