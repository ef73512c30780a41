// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * stackheap: a process whose sampled live heap has N distinct stacks, for
 * timing heapbpf --live-heap and heapbpf report CORE on a large table.
 * Linked statically with Debian's jemalloc; run it with
 * MALLOC_CONF=prof:true,prof_active:true,lg_prof_sample:0 (every
 * allocation sampled).
 *
 * It allocates one object of --size bytes (default 64) through each of N
 * call paths (a binary choice of call site on 17 levels, 131072 paths at
 * most), keeps all of them, prints {"ready": N} and waits for end of input
 * on stdin, then exits without freeing. The array of pointers is mmap'ed,
 * so jemalloc's table holds exactly the N stacks (and jemalloc's own).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <jemalloc/jemalloc.h>

#if defined(__clang__)
#define NOINL __attribute__((noinline))
#else
#define NOINL __attribute__((noinline, noclone))
#endif

#define LEVELS 17

NOINL static void *leaf(size_t size)
{
	void *p = malloc(size);

	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}

NOINL static void *step(unsigned int level, uint32_t path, size_t size);

NOINL static void *via_zero(unsigned int level, uint32_t path, size_t size)
{
	void *p = step(level, path, size);

	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}

NOINL static void *via_one(unsigned int level, uint32_t path, size_t size)
{
	void *p = step(level, path, size);

	__asm__ volatile("nop" : : "r"(p) : "memory");
	return p;
}

/* A different return address per bit of path, level by level: one stack per path. */
NOINL static void *step(unsigned int level, uint32_t path, size_t size)
{
	void *p;

	if (!level)
		return leaf(size);
	if (path & 1)
		p = via_one(level - 1, path >> 1, size);
	else
		p = via_zero(level - 1, path >> 1, size);
	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}

int main(int argc, char **argv)
{
	unsigned long n = argc > 1 ? strtoul(argv[1], NULL, 0) : 100000;
	size_t size = argc > 2 ? strtoul(argv[2], NULL, 0) : 64;
	void **keep;
	char buf[64];

	if (!n || n > (1UL << LEVELS) || !size) {
		fprintf(stderr, "usage: stackheap [N (1..%lu)] [SIZE]\n", 1UL << LEVELS);
		return 2;
	}
	keep = mmap(NULL, n * sizeof(*keep), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		    -1, 0);
	if (keep == MAP_FAILED) {
		perror("stackheap: mmap");
		return 1;
	}
	for (unsigned long i = 0; i < n; i++) {
		keep[i] = step(LEVELS, (uint32_t)i, size);
		if (!keep[i]) {
			fprintf(stderr, "stackheap: out of memory\n");
			return 1;
		}
	}
	printf("{\"ready\": %lu}\n", n);
	fflush(stdout);
	while (read(STDIN_FILENO, buf, sizeof(buf)) > 0)
		;
	return 0;
}
