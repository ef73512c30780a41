/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The one hash map of heapbpf: open addressing with linear probing, from a
 * 64-bit hash the caller computes to a uint32_t value, in practice an index
 * into the caller's own array of keys and data.
 *
 * Integer keys: hash them with hashmap_hash_u64(), a bijection, so equal
 * hashes mean equal keys and the map alone answers exactly.
 * Byte-string keys (stacks, strings): hash them with hashmap_hash_bytes() and
 * walk the values stored under that hash with hashmap__next(), comparing the
 * keys in the caller's array, since different strings may share a hash.
 *
 * A zeroed struct hashmap is an empty map; hashmap__clear() frees it.
 */
#ifndef __HEAPBPF_HASHMAP_H
#define __HEAPBPF_HASHMAP_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct hashmap_slot {
	uint64_t hash;
	uint32_t val1; /* value + 1; 0 = empty, so any hash, 0 included, is a key */
};

struct hashmap {
	struct hashmap_slot *slots;
	size_t cap; /* 0 or a power of two, at least twice n so probes stay short */
	size_t n;
};

/* splitmix64's finalizer: a bijection that spreads consecutive or aligned keys over all bits. */
static inline uint64_t hashmap_hash_u64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return x;
}

/* The hash of len bytes at p (any alignment). */
uint64_t hashmap_hash_bytes(const void *p, size_t len);

static inline uint64_t hashmap_hash_str(const char *s)
{
	return hashmap_hash_bytes(s, strlen(s));
}

/*
 * The next value stored under hash: *it starts at 0 and counts the slots
 * probed. Returns false once every value under hash has been seen. Adding or
 * removing ends the walk: slots move.
 */
static inline bool hashmap__next(const struct hashmap *m, uint64_t hash, size_t *it, uint32_t *val)
{
	size_t mask = m->cap - 1;

	if (!m->cap)
		return false;
	for (;;) {
		const struct hashmap_slot *s = &m->slots[(hash + (*it)++) & mask];

		if (!s->val1)
			return false;
		if (s->hash == hash) {
			*val = s->val1 - 1;
			return true;
		}
	}
}

/* The first value stored under hash, or -ENOENT. */
static inline int hashmap__get(const struct hashmap *m, uint64_t hash, uint32_t *val)
{
	size_t it = 0;

	return hashmap__next(m, hash, &it, val) ? 0 : -ENOENT;
}

/*
 * Adds val under hash, beside any value already there (different keys that
 * share a hash). -ENOMEM, or -ERANGE for val UINT32_MAX.
 */
int hashmap__add(struct hashmap *m, uint64_t hash, uint32_t val);

/* Replaces the first value stored under hash, or adds it: for exact (integer) keys. */
int hashmap__put(struct hashmap *m, uint64_t hash, uint32_t val);

/* Removes the first value stored under hash into *val (when not NULL), or -ENOENT. */
int hashmap__del(struct hashmap *m, uint64_t hash, uint32_t *val);

/* Frees the slots; the map is empty and usable again. */
void hashmap__clear(struct hashmap *m);

#endif /* __HEAPBPF_HASHMAP_H */
