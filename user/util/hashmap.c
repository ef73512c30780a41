// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdlib.h>

#include "util/hashmap.h"

#define HASHMAP_MIN_CAP 64

static uint64_t read64(const unsigned char *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

/* The 128-bit product folded to 64 bits: one multiply mixes 16 input bytes. */
static uint64_t fold_mul(uint64_t a, uint64_t b)
{
	unsigned __int128 r = (unsigned __int128)a * b;

	return (uint64_t)r ^ (uint64_t)(r >> 64);
}

uint64_t hashmap_hash_bytes(const void *p, size_t len)
{
	const uint64_t k0 = 0x9e3779b97f4a7c15ULL, k1 = 0xa0761d6478bd642fULL;
	const unsigned char *s = p;
	uint64_t h = k0 ^ len, a = 0, b = 0;

	/* stacks are 64 to 320 bytes: 16 a step keeps the multiply chain short */
	for (; len > 16; len -= 16, s += 16)
		h = fold_mul(read64(s) ^ k1, read64(s + 8) ^ h);
	if (len > 8) {
		a = read64(s);
		memcpy(&b, s + 8, len - 8);
	} else if (len) {
		memcpy(&a, s, len);
	}
	return fold_mul(k1 ^ h, fold_mul(a ^ k0, b ^ h));
}

/* The first slot from hash's home that is empty or, with match, holds a value under hash. */
static size_t probe(const struct hashmap *m, uint64_t hash, bool match)
{
	size_t mask = m->cap - 1, j = hash & mask;

	while (m->slots[j].val1 && !(match && m->slots[j].hash == hash))
		j = (j + 1) & mask;
	return j;
}

static int grow(struct hashmap *m)
{
	struct hashmap g = { .cap = m->cap ? m->cap * 2 : HASHMAP_MIN_CAP, .n = m->n };

	if (g.cap > SIZE_MAX / 2 / sizeof(*g.slots))
		return -ENOMEM;
	g.slots = calloc(g.cap, sizeof(*g.slots));
	if (!g.slots)
		return -ENOMEM;
	/* stored hashes: growing never rehashes a key */
	for (size_t i = 0; i < m->cap; i++) {
		if (m->slots[i].val1)
			g.slots[probe(&g, m->slots[i].hash, false)] = m->slots[i];
	}
	free(m->slots);
	*m = g;
	return 0;
}

/* Adds val under hash; with replace, over the first value already under hash. */
static int insert(struct hashmap *m, uint64_t hash, uint32_t val, bool replace)
{
	size_t j;
	int err;

	if (val == UINT32_MAX)
		return -ERANGE;
	/* room first, so the probe below ends at an empty slot */
	if ((m->n + 1) * 2 > m->cap) {
		err = grow(m);
		if (err)
			return err;
	}
	j = probe(m, hash, replace);
	if (!m->slots[j].val1)
		m->n++;
	m->slots[j].hash = hash;
	m->slots[j].val1 = val + 1;
	return 0;
}

int hashmap__add(struct hashmap *m, uint64_t hash, uint32_t val)
{
	return insert(m, hash, val, false);
}

int hashmap__put(struct hashmap *m, uint64_t hash, uint32_t val)
{
	return insert(m, hash, val, true);
}

int hashmap__del(struct hashmap *m, uint64_t hash, uint32_t *val)
{
	size_t mask = m->cap - 1, i, j;

	if (!m->cap)
		return -ENOENT;
	i = probe(m, hash, true);
	if (!m->slots[i].val1)
		return -ENOENT;
	if (val)
		*val = m->slots[i].val1 - 1;
	/*
	 * Backward shift instead of tombstones, so a map with as many deletions
	 * as insertions (live objects) keeps short probes: move back every later
	 * entry of the run whose home slot is not between i and itself.
	 */
	for (j = (i + 1) & mask; m->slots[j].val1; j = (j + 1) & mask) {
		size_t home = m->slots[j].hash & mask;

		if (((j - home) & mask) >= ((j - i) & mask)) {
			m->slots[i] = m->slots[j];
			i = j;
		}
	}
	m->slots[i].val1 = 0;
	m->n--;
	return 0;
}

void hashmap__clear(struct hashmap *m)
{
	free(m->slots);
	m->slots = NULL;
	m->cap = 0;
	m->n = 0;
}
