// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * held_estimate (user/heap/held.c): each stack's in-use bytes plus its share
 * of its size class's free regions, in proportion to its in-use bytes there.
 */
#include <criterion/criterion.h>

#include "heap/held.h"

/* Three small classes of 16 one-page slabs: 64 B and 128 B full, 256 B three quarters free. */
static void classes(struct jestats *je)
{
	static const uint64_t size[] = { 64, 128, 256 };
	static const uint64_t used[] = { 1024, 512, 64 };

	memset(je, 0, sizeof(*je));
	je->nbins = 3;
	je->nsizes = 4;
	for (int i = 0; i < 3; i++) {
		je->bins[i].size = size[i];
		je->bins[i].nregs = (uint32_t)(4096 / size[i]);
		je->bins[i].slab_size = 4096;
		je->bins[i].curslabs = 16;
		je->bins[i].curregs = used[i];
	}
}

Test(held, shares_each_class_free_bytes_by_in_use)
{
	struct jestats je;
	struct hb_sample s[4] = { 0 };
	struct hb_profile p = { .samples = s, .nsamples = 4 };
	double held[4];

	classes(&je);
	/* dense: 64 KiB in 64-byte objects, the class's only stack */
	s[0].v[HB_INUSE_SPACE] = 65536, s[0].v[HB_INUSE_OBJECTS] = 1024;
	/* two stacks share the 256 B class, 3 to 1 */
	s[1].v[HB_INUSE_SPACE] = 12288, s[1].v[HB_INUSE_OBJECTS] = 48;
	s[2].v[HB_INUSE_SPACE] = 4096, s[2].v[HB_INUSE_OBJECTS] = 16;
	/* a large one, and its mean past every bin: held as in use */
	s[3].v[HB_INUSE_SPACE] = 1 << 20, s[3].v[HB_INUSE_OBJECTS] = 1;
	held_estimate(&p, &je, held);
	cr_assert_float_eq(held[0], 65536, 1e-6, "a full class holds what it uses");
	/* 256 B: 16 slabs of 16 regions, 64 used: 192 free regions, 49152 bytes */
	cr_assert_float_eq(held[1], 12288 + 49152 * 0.75, 1e-6);
	cr_assert_float_eq(held[2], 4096 + 49152 * 0.25, 1e-6);
	cr_assert_float_eq(held[3], 1 << 20, 1e-6);
}

Test(held, a_mean_rounded_just_past_a_class_stays_in_it)
{
	struct jestats je;

	classes(&je);
	cr_assert_eq(held_class_of(&je, 128.0003), 1);
	cr_assert_eq(held_class_of(&je, 127.9), 1);
	cr_assert_eq(held_class_of(&je, 130), 2);
	cr_assert_eq(held_class_of(&je, 300), -1);
}
