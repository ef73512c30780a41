// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The live process as a read-only memory image (memsrc.h): reads through
 * process_vm_readv, never a write; mapped() against a snapshot of
 * /proc/PID/maps, taken again (a bounded number of times) when an address
 * falls outside it, since the process keeps mapping memory while it runs.
 *
 * A walk of jemalloc's tables makes hundreds of thousands of small reads
 * (a gctx, a tctx, a backtrace), mostly close to each other: one
 * process_vm_readv each would spend most of the walk in the kernel. So
 * small reads are served from a cache of aligned runs of LINE bytes, each
 * read whole with one process_vm_readv (clipped to its mapping) the first
 * time a byte of it is asked for, and kept until fresh() forgets them all:
 * a byte served is what the process held when its run was read, not when
 * it was asked for (heapwalk.c calls fresh() at the start of every walk
 * and before it reads the table's header again; docs/jemalloc.md).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "util/errmsg.h"
#include "heap/memsrc_proc.h"
#include "symbols/proc.h"

/* Fresh snapshots of the mappings one source may take after the first. */
#define MAX_REREADS 64
/*
 * The cache's runs: 4 KiB, aligned. jemalloc keeps a sampled small object
 * in a page of its own (promoted), so the profiling structures are spread
 * between them: for 100k stacks (bench/stackheap), 16 KiB runs read three
 * times the bytes (222 MiB in 13.9k calls, against 72 MiB in 18.0k).
 */
#define LG_LINE 12
#define LINE	(1ull << LG_LINE)
/* Reads larger than this go straight to the process (the table's cells). */
#define MAX_CACHED_READ (LINE / 4)
/* The most bytes kept at once: past it, the cache is dropped and refilled. */
#define MAX_LINES (256u << (20 - LG_LINE))

struct line {
	uint64_t key;	 /* (address >> LG_LINE) + 1; 0: a free slot */
	uint64_t lo, hi; /* the bytes held, [lo, hi), inside the run */
	uint8_t *data;	 /* the run's LINE bytes; data[0] is at (key - 1) << LG_LINE */
};

struct memsrc_proc {
	pid_t pid;
	struct proc_maps *maps;
	unsigned int rereads;
	const struct proc_map *hit; /* readable, in maps: the mapping of the last mapped() */
	struct line *slots;	    /* open addressing, linear probing; nslots a power of 2 */
	size_t nslots, used;
	const struct line *last;
};

static size_t slot_of(const struct memsrc_proc *p, uint64_t key)
{
	/* Fibonacci hashing: runs next to each other spread over the table */
	return (size_t)((key * 0x9e3779b97f4a7c15ull) >> 20) & (p->nslots - 1);
}

static void proc_fresh(void *ctx)
{
	struct memsrc_proc *p = ctx;

	for (size_t i = 0; i < p->nslots; i++)
		free(p->slots[i].data);
	if (p->slots)
		memset(p->slots, 0, p->nslots * sizeof(p->slots[0]));
	p->used = 0;
	p->last = NULL;
}

/* Twice the slots (or the first 1024), every line moved over; -ENOMEM. */
static int grow(struct memsrc_proc *p)
{
	size_t n = p->nslots ? p->nslots * 2 : 1024, old = p->nslots;
	struct line *v = calloc(n, sizeof(*v)), *was = p->slots;

	if (!v)
		return -ENOMEM;
	p->slots = v;
	p->nslots = n;
	for (size_t i = 0; i < old; i++) {
		size_t j;

		if (!was[i].key)
			continue;
		for (j = slot_of(p, was[i].key); v[j].key; j = (j + 1) & (n - 1))
			;
		v[j] = was[i];
	}
	free(was);
	p->last = NULL;
	return 0;
}

/* Reads the run of key whole (clipped to the mapping of addr) into a new line, or NULL. */
static const struct line *fill(struct memsrc_proc *p, uint64_t key, uint64_t addr)
{
	const struct proc_map *pm = proc_maps__find(p->maps, addr);
	uint64_t base = (key - 1) << LG_LINE;
	struct line l = { .key = key, .lo = base, .hi = base + LINE };
	struct iovec local, remote;
	ssize_t n;
	size_t j;

	if (!pm || pm->perms[0] != 'r')
		return NULL;
	if (p->used >= MAX_LINES)
		proc_fresh(p);
	if ((p->used + 1) * 2 > p->nslots && grow(p))
		return NULL;
	l.lo = pm->start > l.lo ? pm->start : l.lo;
	l.hi = pm->end < l.hi ? pm->end : l.hi;
	l.data = malloc(LINE);
	if (!l.data)
		return NULL;
	local = (struct iovec){ .iov_base = l.data + (l.lo - base), .iov_len = l.hi - l.lo };
	remote = (struct iovec){ .iov_base = (void *)(uintptr_t)l.lo, .iov_len = l.hi - l.lo };
	n = process_vm_readv(p->pid, &local, 1, &remote, 1, 0);
	if (n <= 0) {
		free(l.data);
		return NULL;
	}
	/* a partial read holds what precedes the first byte it could not read */
	l.hi = l.lo + (uint64_t)n;
	for (j = slot_of(p, key); p->slots[j].key; j = (j + 1) & (p->nslots - 1))
		;
	p->slots[j] = l;
	p->used++;
	return &p->slots[j];
}

/* The line holding addr, read now if it is not kept yet; NULL when it cannot be. */
static const struct line *line_at(struct memsrc_proc *p, uint64_t addr)
{
	uint64_t key = (addr >> LG_LINE) + 1;

	if (p->last && p->last->key == key)
		return p->last;
	for (size_t j = p->nslots ? slot_of(p, key) : 0; p->nslots && p->slots[j].key;
	     j = (j + 1) & (p->nslots - 1)) {
		if (p->slots[j].key == key)
			return p->last = &p->slots[j];
	}
	return p->last = fill(p, key, addr);
}

static int proc_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	struct memsrc_proc *p = ctx;
	uint64_t a = addr;
	uint8_t *out = buf;
	size_t left = len;

	while (len <= MAX_CACHED_READ && left) {
		const struct line *l = line_at(p, a);
		uint64_t base = a & ~(LINE - 1), k;

		/* not kept (unreadable, or another mapping's part of the run): read it as asked */
		if (!l || a < l->lo || a >= l->hi)
			break;
		k = l->hi - a < left ? l->hi - a : left;
		memcpy(out, l->data + (a - base), k);
		out += k;
		a += k;
		left -= k;
	}
	if (len <= MAX_CACHED_READ && !left)
		return 0;
	return proc_mem_read(p->pid, addr, buf, len);
}

/* [addr, addr + len) inside readable mappings of the snapshot (contiguous ones chain). */
static bool covered(const struct proc_maps *m, uint64_t addr, size_t len)
{
	uint64_t end = addr + len;

	if (end < addr)
		return false;
	while (addr < end) {
		const struct proc_map *pm = proc_maps__find(m, addr);

		if (!pm || pm->perms[0] != 'r')
			return false;
		addr = pm->end;
	}
	return true;
}

static bool proc_mapped(void *ctx, uint64_t addr, size_t len)
{
	struct memsrc_proc *p = ctx;
	struct proc_maps *fresh;
	const struct proc_map *h = p->hit;

	/* the walk's reads mostly fall in the mapping of the one before */
	if (h && addr >= h->start && len <= h->end - addr)
		return true;
	if (covered(p->maps, addr, len)) {
		h = proc_maps__find(p->maps, addr);
		p->hit = len <= h->end - addr ? h : NULL;
		return true;
	}
	p->hit = NULL;
	if (p->rereads >= MAX_REREADS || proc_maps__read(p->pid, &fresh))
		return false;
	p->rereads++;
	proc_maps__free(p->maps);
	p->maps = fresh;
	return covered(p->maps, addr, len);
}

int memsrc_proc_open(pid_t pid, struct mem_source *out, char *err, size_t errlen)
{
	struct memsrc_proc *p = calloc(1, sizeof(*p));
	int rc;

	if (!p)
		return hb_fail(err, errlen, -ENOMEM, "out of memory");
	p->pid = pid;
	rc = proc_maps__read(pid, &p->maps);
	if (rc) {
		free(p);
		return hb_fail(err, errlen, rc, "cannot read the mappings of pid %d: %s", pid,
			       strerror(-rc));
	}
	*out = (struct mem_source){
		.read = proc_read, .mapped = proc_mapped, .fresh = proc_fresh, .ctx = p
	};
	return 0;
}

void memsrc_proc_close(struct mem_source *m)
{
	struct memsrc_proc *p = m->ctx;

	if (!p)
		return;
	proc_fresh(p);
	free(p->slots);
	proc_maps__free(p->maps);
	free(p);
	m->ctx = NULL;
}
