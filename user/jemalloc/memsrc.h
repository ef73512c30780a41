/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A memory image of a process, read-only: a live process (process_vm_readv,
 * never a write) or a core file. The live-heap reader (heapbpf --live-heap,
 * and heapbpf report on a core) walks jemalloc's profiling tables through
 * this and nothing else, so both sources give the same answer.
 */
#ifndef __HEAPBPF_MEMSRC_H
#define __HEAPBPF_MEMSRC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct mem_source {
	/* Reads exactly len bytes at addr into buf: 0, or negative errno (-EFAULT: not in the image). */
	int (*read)(void *ctx, uint64_t addr, void *buf, size_t len);
	/* True when [addr, addr + len) lies inside readable memory of the image. */
	bool (*mapped)(void *ctx, uint64_t addr, size_t len);
	/*
	 * Optional (NULL: nothing cached): forgets every byte the source kept
	 * from earlier reads, so that the next reads see the image as it is now.
	 */
	void (*fresh)(void *ctx);
	void *ctx;
};

static inline int memsrc_read(const struct mem_source *m, uint64_t addr, void *buf, size_t len)
{
	return m->read(m->ctx, addr, buf, len);
}

static inline bool memsrc_mapped(const struct mem_source *m, uint64_t addr, size_t len)
{
	return m->mapped(m->ctx, addr, len);
}

static inline void memsrc_fresh(const struct mem_source *m)
{
	if (m->fresh)
		m->fresh(m->ctx);
}

#endif /* __HEAPBPF_MEMSRC_H */
