// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * jemalloc's unbiasing weights: 1/(1 - exp(-Z/R)) objects and Z times that
 * in bytes per sample of usable size Z, checked against values computed by
 * hand (50-digit decimal arithmetic) and against a simulation of jemalloc's
 * byte-countdown sampler.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>

#include "collect/unbias.h"

#define LG19 (1u << 19) /* jemalloc's default R = 2^lg_prof_sample */

static double rel_err(double got, double want)
{
	return fabs(got - want) / fabs(want);
}

Test(unbias, z_equals_r_is_e_over_e_minus_1)
{
	/* 1 / (1 - 1/e) = e / (e - 1) */
	const double want = M_E / (M_E - 1.0);

	cr_assert_lt(rel_err(unbias_objects(LG19, LG19), want), 1e-15);
	cr_assert_lt(rel_err(unbias_objects(4096, 4096), want), 1e-15);
	cr_assert_lt(rel_err(unbias_objects(4096, 4096), 1.5819767068693264244), 1e-15);
	cr_assert_lt(rel_err(unbias_bytes(4096, 4096), 4096 * 1.5819767068693264244), 1e-15);
}

Test(unbias, hand_computed_ratios)
{
	static const struct {
		uint64_t z;
		double want; /* 1/(1-exp(-z/R)), R = 4096, 50-digit arithmetic */
	} v[] = {
		{ 2048, 2.5414940825367982841 },  /* Z/R = 1/2 */
		{ 8192, 1.1565176427496656518 },  /* Z/R = 2 */
		{ 512, 8.5104139550018406712 },	  /* Z/R = 1/8 */
		{ 32768, 1.0003355752008412450 }, /* Z/R = 8 */
	};

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		double o = unbias_objects(v[i].z, 4096);
		double b = unbias_bytes(v[i].z, 4096);

		cr_assert_lt(rel_err(o, v[i].want), 1e-14, "Z=%lu: %.17g, want %.17g",
			     (unsigned long)v[i].z, o, v[i].want);
		cr_assert_lt(rel_err(b, v[i].want * v[i].z), 1e-14, "Z=%lu bytes: %.17g",
			     (unsigned long)v[i].z, b);
	}
}

Test(unbias, small_z_keeps_full_precision)
{
	/*
	 * 1/(1-exp(-x)) = 1/x + 1/2 + x/12 - ...; for Z=1, R=2^19 that is
	 * 524288.50000015894571940. Computing 1 - exp(-x) directly loses
	 * about 19 bits (relative error ~1e-11): require far better.
	 */
	double o = unbias_objects(1, LG19);

	cr_assert_lt(rel_err(o, 524288.50000015894571940), 1e-14, "got %.17g", o);
	cr_assert_lt(rel_err(unbias_bytes(1, LG19), 524288.50000015894571940), 1e-14);

	o = unbias_objects(100, LG19);
	cr_assert_lt(rel_err(o, 5243.3800158945719305), 1e-14, "got %.17g", o);
	cr_assert_lt(rel_err(unbias_bytes(100, LG19), 524338.00158945719305), 1e-14);

	/* Z << R: close to R/Z, always above it (by about 1/2) */
	for (uint64_t z = 1; z <= 64; z *= 2) {
		o = unbias_objects(z, LG19);
		cr_assert_gt(o, (double)LG19 / z);
		cr_assert_lt(fabs(o - ((double)LG19 / z + 0.5)), 1e-3);
	}
}

Test(unbias, large_z_tends_to_one)
{
	double prev = INFINITY;

	/* never below one, decreasing in Z until it rounds to exactly one */
	for (uint64_t z = 1; z <= (1ull << 30); z *= 2) {
		double o = unbias_objects(z, LG19);

		cr_assert_geq(o, 1.0);
		if (prev > 1.0)
			cr_assert_lt(o, prev, "not decreasing at Z=%lu", (unsigned long)z);
		else
			cr_assert_eq(o, 1.0);
		prev = o;
	}
	/* exp(-64) is below double precision relative to 1 */
	cr_assert_float_eq(unbias_objects(64ull * LG19, LG19), 1.0, 1e-15);
	cr_assert_float_eq(unbias_bytes(64ull * LG19, LG19), 64.0 * LG19, 1e-6);
	cr_assert_float_eq(unbias_objects(UINT64_MAX, LG19), 1.0, 1e-15);
	/* Z = 16R: the geometric series 1 + q + q^2 + ..., q = exp(-16) */
	cr_assert_lt(rel_err(unbias_objects(16ull * LG19, LG19),
			     1.0 + exp(-16.0) + exp(-32.0) + exp(-48.0)),
		     1e-15);
}

Test(unbias, zero_size_or_period)
{
	cr_assert_eq(unbias_objects(0, LG19), 0.0);
	cr_assert_eq(unbias_bytes(0, LG19), 0.0);
	cr_assert_eq(unbias_objects(100, 0), 0.0);
	cr_assert_eq(unbias_bytes(100, 0), 0.0);
	cr_assert_eq(unbias_objects(100, -1), 0.0);
}

Test(unbias, bytes_is_z_times_objects)
{
	static const uint64_t zs[] = { 1, 8, 100, 4096, 65536, LG19, 3ull * LG19, 1ull << 40 };

	for (size_t i = 0; i < sizeof(zs) / sizeof(zs[0]); i++) {
		for (double r = 4096; r <= (1u << 24); r *= 8) {
			double o = unbias_objects(zs[i], r);

			cr_assert_lt(rel_err(unbias_bytes(zs[i], r), (double)zs[i] * o), 1e-15);
		}
	}
}

/* splitmix64: a small deterministic PRNG */
static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* uniform in (0, 1] */
static double rng_unit(uint64_t *s)
{
	return ((rng_next(s) >> 11) + 1) * 0x1.0p-53;
}

/*
 * jemalloc's sampler: a countdown of bytes drawn as -ln(U) * R; an allocation
 * that reaches the end of the countdown is sampled and a new wait is drawn.
 * Sum the unbiased estimates of the sampled allocations and compare them to
 * the true totals.
 */
Test(unbias, simulated_sampler_estimates_true_totals)
{
	const double period = 16384; /* R = 2^14 */
	const size_t nallocs = 2000000;
	double true_objects = 0, true_bytes = 0, est_objects = 0, est_bytes = 0;
	double expect_samples = 0, var_objects = 0, var_bytes = 0;
	uint64_t seed = 0x5eed1234abcdULL, nsampled = 0;
	double countdown;

	countdown = -log(rng_unit(&seed)) * period;
	for (size_t i = 0; i < nallocs; i++) {
		/* sizes log-uniform between 8 B and 256 KiB */
		uint64_t z = (uint64_t)exp2(3.0 + 15.0 * rng_unit(&seed));
		double p = -expm1(-(double)z / period);

		true_objects += 1;
		true_bytes += z;
		expect_samples += p;
		/* Horvitz-Thompson variances of the two estimates */
		var_objects += (1 - p) / p;
		var_bytes += (double)z * z * (1 - p) / p;
		if ((double)z >= countdown) {
			nsampled++;
			est_objects += unbias_objects(z, period);
			est_bytes += unbias_bytes(z, period);
			countdown = -log(rng_unit(&seed)) * period;
		} else {
			countdown -= z;
		}
	}
	/* the simulated sampler itself samples at the expected rate */
	cr_assert_lt(fabs(nsampled - expect_samples), 5 * sqrt(expect_samples),
		     "sampled %lu, expected %.0f", (unsigned long)nsampled, expect_samples);
	/* the estimates: within 3 % and within 5 standard deviations */
	cr_assert_lt(rel_err(est_objects, true_objects), 0.03, "objects %.0f vs %.0f", est_objects,
		     true_objects);
	cr_assert_lt(fabs(est_objects - true_objects), 5 * sqrt(var_objects));
	cr_assert_lt(rel_err(est_bytes, true_bytes), 0.03, "bytes %.0f vs %.0f", est_bytes,
		     true_bytes);
	cr_assert_lt(fabs(est_bytes - true_bytes), 5 * sqrt(var_bytes));
}
