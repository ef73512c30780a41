// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "util/clock.h"

int64_t hb_clock_ns(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}
