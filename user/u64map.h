/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* A small open-addressing map from non-zero uint64_t keys to uint32_t values. */
#ifndef __HEAPBPF_U64MAP_H
#define __HEAPBPF_U64MAP_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

struct u64map {
	uint64_t *keys; /* 0 = empty */
	uint32_t *vals;
	size_t cap, n; /* cap: power of two */
};

static inline uint64_t u64map_hash(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	return h;
}

static inline void u64map_free(struct u64map *m)
{
	free(m->keys);
	free(m->vals);
	m->keys = NULL;
	m->vals = NULL;
	m->cap = m->n = 0;
}

/* Slot of key: its own or the empty one where it would go; m->cap must be > 0. */
static inline size_t u64map_slot(const struct u64map *m, uint64_t key)
{
	size_t j = u64map_hash(key) & (m->cap - 1);

	while (m->keys[j] && m->keys[j] != key)
		j = (j + 1) & (m->cap - 1);
	return j;
}

static inline int u64map_get(const struct u64map *m, uint64_t key, uint32_t *val)
{
	size_t j;

	if (!m->cap)
		return -ENOENT;
	j = u64map_slot(m, key);
	if (!m->keys[j])
		return -ENOENT;
	*val = m->vals[j];
	return 0;
}

static inline int u64map_put(struct u64map *m, uint64_t key, uint32_t val)
{
	size_t j;

	if ((m->n + 1) * 2 > m->cap) {
		struct u64map g = { .cap = m->cap ? m->cap * 2 : 64 };

		g.keys = calloc(g.cap, sizeof(*g.keys));
		g.vals = calloc(g.cap, sizeof(*g.vals));
		if (!g.keys || !g.vals) {
			u64map_free(&g);
			return -ENOMEM;
		}
		for (size_t i = 0; i < m->cap; i++) {
			if (m->keys[i]) {
				size_t k = u64map_slot(&g, m->keys[i]);

				g.keys[k] = m->keys[i];
				g.vals[k] = m->vals[i];
			}
		}
		g.n = m->n;
		u64map_free(m);
		*m = g;
	}
	j = u64map_slot(m, key);
	if (!m->keys[j])
		m->n++;
	m->keys[j] = key;
	m->vals[j] = val;
	return 0;
}

#endif /* __HEAPBPF_U64MAP_H */
