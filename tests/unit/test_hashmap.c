// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/hashmap.h"

static struct hashmap m;

static void teardown(void)
{
	hashmap__clear(&m);
}

TestSuite(hashmap, .fini = teardown);

static uint64_t xorshift(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

/* Every value stored under hash, in probe order; returns how many. */
static size_t values_under(uint64_t hash, uint32_t *out, size_t max)
{
	size_t it = 0, n = 0;
	uint32_t v;

	while (hashmap__next(&m, hash, &it, &v)) {
		cr_assert_lt(n, max);
		out[n++] = v;
	}
	return n;
}

Test(hashmap, empty_map)
{
	uint32_t v = 7;
	size_t it = 0;

	cr_assert_eq(hashmap__get(&m, 0, &v), -ENOENT);
	cr_assert_eq(hashmap__get(&m, 12345, &v), -ENOENT);
	cr_assert_not(hashmap__next(&m, 12345, &it, &v));
	cr_assert_eq(hashmap__del(&m, 12345, &v), -ENOENT);
	cr_assert_eq(v, 7);
	hashmap__clear(&m);
	cr_assert_eq(m.n, 0);
	cr_assert_eq(m.cap, 0);
}

/* Hash 0 is a key like any other: emptiness is marked in the value. */
Test(hashmap, zero_hash_and_zero_value)
{
	uint32_t v;

	cr_assert_eq(hashmap__add(&m, 0, 0), 0);
	cr_assert_eq(hashmap__get(&m, 0, &v), 0);
	cr_assert_eq(v, 0);
	cr_assert_eq(hashmap__get(&m, 1, &v), -ENOENT);
	cr_assert_eq(m.n, 1);
}

Test(hashmap, largest_value)
{
	uint32_t v;

	cr_assert_eq(hashmap__add(&m, 1, UINT32_MAX - 1), 0);
	cr_assert_eq(hashmap__get(&m, 1, &v), 0);
	cr_assert_eq(v, UINT32_MAX - 1);
	cr_assert_eq(hashmap__add(&m, 2, UINT32_MAX), -ERANGE);
	cr_assert_eq(hashmap__put(&m, 2, UINT32_MAX), -ERANGE);
	cr_assert_eq(hashmap__get(&m, 2, &v), -ENOENT);
	cr_assert_eq(m.n, 1);
}

/* An aligned, clustered key, like tctx and heap addresses, through the bijective mixer. */
static uint64_t heap_key(uint32_t i)
{
	return hashmap_hash_u64(0x7f0000000000ULL + 16ULL * i);
}

/* Integer keys, enough to grow the table many times. */
Test(hashmap, growth_keeps_every_key)
{
	const uint32_t n = 200000;
	size_t last_cap = 0, grows = 0;
	uint32_t v;

	for (uint32_t i = 0; i < n; i++) {
		cr_assert_eq(hashmap__add(&m, heap_key(i), i), 0);
		if (m.cap != last_cap) {
			grows++;
			last_cap = m.cap;
		}
		cr_assert_geq(m.cap, 2 * m.n, "load above one half at %u", i);
		cr_assert_eq(m.cap & (m.cap - 1), 0, "capacity %zu not a power of two", m.cap);
	}
	cr_assert_gt(grows, 10);
	cr_assert_eq(m.n, n);
	for (uint32_t i = 0; i < n; i++) {
		cr_assert_eq(hashmap__get(&m, heap_key(i), &v), 0, "key %u lost", i);
		cr_assert_eq(v, i);
	}
	cr_assert_eq(hashmap__get(&m, heap_key(n), &v), -ENOENT);
}

Test(hashmap, put_replaces_add_keeps_both)
{
	uint32_t v[4];

	cr_assert_eq(hashmap__put(&m, 42, 1), 0);
	cr_assert_eq(hashmap__put(&m, 42, 2), 0);
	cr_assert_eq(m.n, 1);
	cr_assert_eq(values_under(42, v, 4), 1);
	cr_assert_eq(v[0], 2);

	/* add: another key with the same hash */
	cr_assert_eq(hashmap__add(&m, 42, 3), 0);
	cr_assert_eq(m.n, 2);
	cr_assert_eq(values_under(42, v, 4), 2);
	cr_assert_eq(v[0], 2);
	cr_assert_eq(v[1], 3);
	/* put replaces the first only */
	cr_assert_eq(hashmap__put(&m, 42, 4), 0);
	cr_assert_eq(values_under(42, v, 4), 2);
	cr_assert_eq(v[0], 4);
	cr_assert_eq(v[1], 3);
}

/*
 * Hashes that differ only above the mask share a home slot: one long probe
 * run, interleaved with a second run, each value found only under its own hash.
 */
Test(hashmap, colliding_home_slots)
{
	uint32_t v;

	cr_assert_eq(hashmap__add(&m, 5, 0), 0);
	for (uint32_t i = 1; i < 20; i++) {
		cr_assert_eq(hashmap__add(&m, 5 + ((uint64_t)i << 40), i), 0);
		cr_assert_eq(hashmap__add(&m, 6 + ((uint64_t)i << 40), 100 + i), 0);
	}
	for (uint32_t i = 0; i < 20; i++) {
		cr_assert_eq(hashmap__get(&m, 5 + ((uint64_t)i << 40), &v), 0);
		cr_assert_eq(v, i);
	}
	for (uint32_t i = 1; i < 20; i++) {
		cr_assert_eq(hashmap__get(&m, 6 + ((uint64_t)i << 40), &v), 0);
		cr_assert_eq(v, 100 + i);
	}
	cr_assert_eq(hashmap__get(&m, 5 + (20ULL << 40), &v), -ENOENT);
	cr_assert_eq(hashmap__get(&m, 6, &v), -ENOENT);
}

/* Deleting from the middle of a run that wraps past the last slot keeps the rest findable. */
Test(hashmap, delete_in_a_wrapping_run)
{
	uint64_t top;
	uint32_t v;

	cr_assert_eq(hashmap__add(&m, 0, 999), 0);
	top = m.cap - 1;
	/* a run from the last slot on: top, top + cap, top + 2 cap, ... all home at top */
	for (uint32_t i = 0; i < 8; i++)
		cr_assert_eq(hashmap__add(&m, top + i * m.cap * 1024, i), 0);
	cr_assert_eq(m.cap, top + 1, "the table grew: the test assumes it does not");
	/* the run wraps to slot 1 on, over 999 in slot 0, which must stay where it is */
	for (uint32_t i = 0; i < 8; i += 2) {
		cr_assert_eq(hashmap__del(&m, top + i * m.cap * 1024, &v), 0);
		cr_assert_eq(v, i);
	}
	cr_assert_eq(m.n, 5);
	for (uint32_t i = 0; i < 8; i++) {
		int rc = hashmap__get(&m, top + i * m.cap * 1024, &v);

		if (i % 2) {
			cr_assert_eq(rc, 0, "value %u lost after deletions", i);
			cr_assert_eq(v, i);
		} else {
			cr_assert_eq(rc, -ENOENT, "value %u still there", i);
		}
	}
	cr_assert_eq(hashmap__get(&m, 0, &v), 0);
	cr_assert_eq(v, 999);
	cr_assert_eq(hashmap__del(&m, 0, NULL), 0);
	cr_assert_eq(hashmap__del(&m, 0, NULL), -ENOENT);
	cr_assert_eq(m.n, 4);
}

/* Random adds and deletes against a plain array: the map agrees after every step. */
Test(hashmap, random_deletes_match_a_model)
{
	enum { KEYS = 4096, STEPS = 200000 };
	int32_t *model = malloc(KEYS * sizeof(*model)); /* value, or -1 when absent */
	uint64_t x = 0x9e3779b97f4a7c15ULL;
	size_t live = 0;
	uint32_t v;

	cr_assert_not_null(model);
	for (int k = 0; k < KEYS; k++)
		model[k] = -1;
	for (uint32_t s = 0; s < STEPS; s++) {
		uint32_t k = xorshift(&x) % KEYS;
		/* distinct hashes, but 1024 home slots at most: long runs of neighbours */
		uint64_t h = (k & 1023) | (uint64_t)k << 32;

		if (model[k] < 0) {
			cr_assert_eq(hashmap__put(&m, h, s), 0);
			model[k] = (int32_t)s;
			live++;
		} else {
			cr_assert_eq(hashmap__del(&m, h, &v), 0);
			cr_assert_eq(v, (uint32_t)model[k]);
			model[k] = -1;
			live--;
		}
		cr_assert_eq(m.n, live);
	}
	for (uint32_t k = 0; k < KEYS; k++) {
		int rc = hashmap__get(&m, (k & 1023) | (uint64_t)k << 32, &v);

		if (model[k] < 0) {
			cr_assert_eq(rc, -ENOENT, "key %u should be gone", k);
		} else {
			cr_assert_eq(rc, 0, "key %u lost", k);
			cr_assert_eq(v, (uint32_t)model[k]);
		}
	}
	free(model);
}

/* The way the string table uses the map: hash, walk the candidates, compare. */
static uint32_t intern(char **strs, uint32_t *n, const char *s, uint64_t h)
{
	size_t it = 0;
	uint32_t v;

	while (hashmap__next(&m, h, &it, &v)) {
		if (strcmp(strs[v], s) == 0)
			return v;
	}
	strs[*n] = strdup(s);
	cr_assert_not_null(strs[*n]);
	cr_assert_eq(hashmap__add(&m, h, *n), 0);
	return (*n)++;
}

Test(hashmap, string_keys)
{
	enum { N = 20000 };
	char **strs = calloc(N + 2, sizeof(*strs));
	uint32_t n = 0;
	char buf[64];

	cr_assert_not_null(strs);
	for (uint32_t i = 0; i < N; i++) {
		snprintf(buf, sizeof(buf), "function_%u", i);
		cr_assert_eq(intern(strs, &n, buf, hashmap_hash_str(buf)), i);
	}
	/* again: all found, none added */
	for (uint32_t i = 0; i < N; i += 7) {
		snprintf(buf, sizeof(buf), "function_%u", i);
		cr_assert_eq(intern(strs, &n, buf, hashmap_hash_str(buf)), i);
	}
	cr_assert_eq(n, N);
	cr_assert_eq(m.n, N);
	/* two strings forced onto one hash stay apart through the comparison */
	cr_assert_eq(intern(strs, &n, "alpha", 77), N);
	cr_assert_eq(intern(strs, &n, "beta", 77), N + 1);
	cr_assert_eq(intern(strs, &n, "alpha", 77), N);
	cr_assert_eq(intern(strs, &n, "beta", 77), N + 1);
	for (uint32_t i = 0; i < n; i++)
		free(strs[i]);
	free(strs);
}

Test(hashmap, hash_bytes_sees_every_byte_and_the_length)
{
	unsigned char a[80], b[82];
	uint64_t x = 1;

	for (size_t i = 0; i < sizeof(a); i++)
		a[i] = (unsigned char)xorshift(&x);
	/* lengths around the 8- and 16-byte steps and stack sizes */
	for (size_t len = 1; len <= sizeof(a); len++) {
		uint64_t h = hashmap_hash_bytes(a, len);

		/* the same bytes at another alignment hash the same */
		memcpy(b + 1, a, len);
		cr_assert_eq(hashmap_hash_bytes(b + 1, len), h, "len %zu", len);
		for (size_t i = 0; i < len; i++) {
			for (int bit = 0; bit < 8; bit += 7) {
				b[1 + i] ^= 1u << bit;
				cr_assert_neq(hashmap_hash_bytes(b + 1, len), h,
					      "len %zu byte %zu bit %d", len, i, bit);
				b[1 + i] ^= 1u << bit;
			}
		}
		/* a trailing zero byte is a different key */
		b[1 + len] = 0;
		cr_assert_neq(hashmap_hash_bytes(b + 1, len + 1), h, "len %zu", len);
	}
	cr_assert_neq(hashmap_hash_str(""), hashmap_hash_str("a"));
	cr_assert_eq(hashmap_hash_str("malloc"), hashmap_hash_bytes("malloc", 6));
}

/* Stacks that differ only in their order hash apart, as frames of one call path do. */
Test(hashmap, hash_bytes_of_reordered_frames)
{
	const uint64_t f1[] = { 0x401000, 0x402000, 0x403000 };
	const uint64_t f2[] = { 0x402000, 0x401000, 0x403000 };
	const uint64_t f3[] = { 0x401000, 0x403000, 0x402000 };

	cr_assert_neq(hashmap_hash_bytes(f1, sizeof(f1)), hashmap_hash_bytes(f2, sizeof(f2)));
	cr_assert_neq(hashmap_hash_bytes(f1, sizeof(f1)), hashmap_hash_bytes(f3, sizeof(f3)));
	cr_assert_neq(hashmap_hash_bytes(f1, sizeof(f1)), hashmap_hash_bytes(f1, 2 * sizeof(*f1)));
}

/* Aligned keys (page-strided tctx addresses) spread over the low bits that pick the slot. */
Test(hashmap, hash_u64_spreads_aligned_keys)
{
	enum { N = 4096, SLOTS = 8192 };
	unsigned char *used = calloc(SLOTS, 1);
	size_t distinct = 0;

	cr_assert_not_null(used);
	for (uint64_t i = 0; i < N; i++) {
		size_t j = hashmap_hash_u64(0x7e0000000000ULL + i * 4096) & (SLOTS - 1);

		distinct += !used[j];
		used[j] = 1;
	}
	/* random placement fills about SLOTS * (1 - e^-0.5) = 3223 */
	cr_assert_gt(distinct, 3000, "only %zu distinct slots", distinct);
	cr_assert_eq(hashmap_hash_u64(0), 0);
	cr_assert_neq(hashmap_hash_u64(1), hashmap_hash_u64(2));
	free(used);
}
