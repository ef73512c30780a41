/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * jemalloc's sampling math. The wait between samples is geometric in bytes
 * with mean R = 2^lg_prof_sample, so an allocation of usable size Z is
 * sampled with probability 1 - exp(-Z/R); each sample stands for
 * 1/(1 - exp(-Z/R)) objects and Z/(1 - exp(-Z/R)) bytes.
 */
#ifndef __HEAPBPF_UNBIAS_H
#define __HEAPBPF_UNBIAS_H

#include <math.h>
#include <stdint.h>

/* Objects one sample of usable size usize stands for; 0 for usize 0 or period 0. */
static inline double unbias_objects(uint64_t usize, double period)
{
	if (!usize || period <= 0)
		return 0;
	/* -expm1(-x) = 1 - exp(-x) without cancellation when Z << R */
	return 1.0 / -expm1(-(double)usize / period);
}

/* Bytes one sample of usable size usize stands for. */
static inline double unbias_bytes(uint64_t usize, double period)
{
	return (double)usize * unbias_objects(usize, period);
}

#endif /* __HEAPBPF_UNBIAS_H */
