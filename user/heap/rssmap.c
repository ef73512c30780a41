// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/errmsg.h"
#include "jemalloc/target.h"
#include "heap/memsrc_proc.h"
#include "heap/rssmap.h"

/* the kernel's page (residency.c refuses others), not jemalloc's */
#define PAGE 4096ull

struct extents {
	struct jestats_extent *v;
	size_t n, cap;
	int rc;
};

static void collect(void *ctx, const struct jestats_extent *e)
{
	struct extents *x = ctx;

	if (x->rc)
		return;
	if (x->n == x->cap) {
		size_t n = x->cap ? x->cap * 2 : 4096;
		struct jestats_extent *p = realloc(x->v, n * sizeof(*p));

		if (!p) {
			x->rc = -ENOMEM;
			return;
		}
		x->v = p;
		x->cap = n;
	}
	x->v[x->n++] = *e;
}

static int by_addr(const void *a, const void *b)
{
	const struct jestats_extent *x = a, *y = b;

	return (x->addr > y->addr) - (x->addr < y->addr);
}

/*
 * Each extent's pages counted against the page tables, piece by piece
 * where it spans mappings; in_vma[i]: jemalloc's resident bytes in v[i].
 */
static int count_resident(struct pagemap *pm, const struct extents *x, const struct vmas *v,
			  uint64_t *in_vma, struct rss_map *out)
{
	size_t vi = 0;

	for (size_t i = 0; i < x->n; i++) {
		const struct jestats_extent *e = &x->v[i];
		uint64_t at = e->addr, end = e->addr + e->size;

		while (at < end) {
			uint64_t stop = end, present = 0, swapped = 0;
			int rc;

			while (vi < v->n && v->v[vi].end <= at)
				vi++;
			if (vi < v->n && v->v[vi].start <= at && v->v[vi].end < stop)
				stop = v->v[vi].end;
			else if (vi < v->n && v->v[vi].start > at && v->v[vi].start < stop)
				stop = v->v[vi].start; /* a gap: not mapped, nothing resident */
			rc = residency_pagemap_count(pm, at, stop - at, &present, &swapped);
			if (rc)
				return rc;
			out->resident[e->kind] += present * PAGE;
			out->swapped[e->kind] += swapped * PAGE;
			if (e->kind == JE_SLAB && e->szind < JESTATS_MAX_BINS)
				out->bin_resident[e->szind] += present * PAGE;
			if (vi < v->n && v->v[vi].start <= at)
				in_vma[vi] += present * PAGE;
			at = stop;
		}
	}
	for (int k = 0; k < JE_KINDS; k++)
		out->je_resident += out->resident[k];
	return 0;
}

/* The stack pointer of every thread blocked now (task/TID/syscall), into sp. */
static size_t thread_sps(pid_t pid, uint64_t *sp, size_t max)
{
	char path[64];
	struct dirent *d;
	DIR *dir;
	size_t n = 0;

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	dir = opendir(path);
	if (!dir)
		return 0;
	while (n < max && (d = readdir(dir))) {
		char p[300], line[512], *last, *prev;
		FILE *f;

		if (d->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "/proc/%d/task/%s/syscall", pid, d->d_name);
		f = fopen(p, "re");
		if (!f)
			continue;
		if (fgets(line, sizeof(line), f)) {
			/* "NR args... SP PC" or "-1 SP PC": the field before the last */
			line[strcspn(line, "\n")] = '\0';
			last = strrchr(line, ' ');
			if (last) {
				*last = '\0';
				prev = strrchr(line, ' ');
				if (prev)
					sp[n++] = strtoull(prev + 1, NULL, 16);
			}
		}
		fclose(f);
	}
	closedir(dir);
	return n;
}

static void keep_other(struct rss_map *out, const struct vma *m, uint64_t bytes)
{
	int at = RSS_OTHERS;

	while (at > 0 && out->others[at - 1].bytes < bytes)
		at--;
	if (at == RSS_OTHERS)
		return;
	memmove(&out->others[at + 1], &out->others[at],
		(RSS_OTHERS - at - 1) * sizeof(out->others[0]));
	out->others[at].start = m->start;
	out->others[at].bytes = bytes;
	snprintf(out->others[at].name, sizeof(out->others[at].name), "%s", m->name);
}

/* The anonymous memory outside jemalloc, mapping by mapping. */
static void outside(pid_t pid, const struct vmas *v, const uint64_t *in_vma, struct rss_map *out)
{
	uint64_t sp[1024];
	size_t nsp = thread_sps(pid, sp, sizeof(sp) / sizeof(sp[0]));

	for (size_t i = 0; i < v->n; i++) {
		const struct vma *m = &v->v[i];
		uint64_t bytes = m->anon > in_vma[i] ? m->anon - in_vma[i] : 0;
		bool stack = false;

		if (!bytes)
			continue;
		if (strcmp(m->name, "[stack]") == 0) {
			out->main_stack += bytes;
			continue;
		}
		for (size_t j = 0; j < nsp && !stack; j++)
			stack = sp[j] >= m->start && sp[j] < m->end;
		if (stack) {
			out->thread_stacks += bytes;
			out->nthread_stacks++;
			continue;
		}
		out->other_anon += bytes;
		keep_other(out, m, bytes);
	}
}

static int measure(const struct jemalloc_target *t, const struct jestats_layout *l,
		   const struct mem_source *m, struct pagemap *held_pm, struct rss_map *out,
		   char *err, size_t errlen)
{
	struct jestats_syms sy;
	struct extents x = { 0 };
	struct vmas v = { 0 };
	struct pagemap *pm = held_pm, *opened = NULL;
	uint64_t *in_vma = NULL;
	int rc;

	rc = jestats_syms_of(t, &sy, err, errlen);
	rc = rc ?: jestats_read(m, l, &sy, &out->je, err, errlen);
	if (rc)
		return rc;
	if (pm) {
		residency_pagemap_rewind(pm);
	} else {
		rc = residency_pagemap_open(t->pid, &opened);
		if (rc == -ENOTSUP)
			return hb_fail(
				err, errlen, rc,
				"heapbpf reads the kernel's page map in 4 KiB pages, and this "
				"kernel's are %ld bytes",
				sysconf(_SC_PAGESIZE));
		if (rc)
			return hb_fail(err, errlen, rc, "cannot read the page map of pid %d: %s",
				       t->pid, strerror(-rc));
		pm = opened;
	}
	rc = jestats_walk(m, l, &sy, &out->je, residency_pagemap_present, pm, collect, &x,
			  &out->walk, err, errlen);
	if (!rc && x.rc)
		rc = hb_fail(err, errlen, x.rc, "out of memory");
	if (!rc) {
		rc = residency_vmas(t->pid, &v);
		if (rc)
			rc = hb_fail(err, errlen, rc, "cannot read the mappings of pid %d: %s",
				     t->pid, strerror(-rc));
	}
	if (!rc) {
		in_vma = calloc(v.n + 1, sizeof(*in_vma));
		rc = in_vma ? 0 : hb_fail(err, errlen, -ENOMEM, "out of memory");
	}
	if (!rc && in_vma) {
		qsort(x.v, x.n, sizeof(x.v[0]), by_addr);
		rc = count_resident(pm, &x, &v, in_vma, out);
		if (rc)
			rc = hb_fail(err, errlen, rc, "cannot read the page map of pid %d: %s",
				     t->pid, strerror(-rc));
	}
	if (!rc && in_vma)
		outside(t->pid, &v, in_vma, out);
	if (!rc) {
		rc = residency_memory(t->pid, &v, &out->mem);
		if (rc)
			rc = hb_fail(err, errlen, rc, "cannot read the memory of pid %d: %s",
				     t->pid, strerror(-rc));
	}
	free(in_vma);
	residency_vmas_free(&v);
	residency_pagemap_close(opened);
	free(x.v);
	return rc;
}

int rssmap_read(const struct jemalloc_target *t, struct rss_map *out, char *err, size_t errlen)
{
	return rssmap_read_with(t, NULL, out, err, errlen);
}

int rssmap_read_with(const struct jemalloc_target *t, struct pagemap *pm, struct rss_map *out,
		     char *err, size_t errlen)
{
	const struct jestats_layout *l = jestats_layout_for(t->version);
	struct mem_source m = { 0 };
	int64_t start = hb_clock_ns(CLOCK_MONOTONIC);
	int rc;

	memset(out, 0, sizeof(*out));
	if (!l || t->debug_build)
		return hb_fail(err, errlen, -ENOTSUP,
			       "pid %d (%s): heapbpf reads the accounting of jemalloc 5.2.1, 5.3.0 "
			       "and 5.3.1 release builds, not of %s%s",
			       t->pid, t->comm, t->debug_build ? "a --enable-debug build of " : "",
			       t->version);
	rc = memsrc_proc_open(t->pid, &m, err, errlen);
	if (rc)
		return rc;
	rc = measure(t, l, &m, pm, out, err, errlen);
	memsrc_proc_close(&m);
	if (rc)
		return rc;
	out->unexplained = (int64_t)out->mem.rss -
			   (int64_t)(out->je_resident + out->main_stack + out->thread_stacks +
				     out->other_anon + out->mem.file + out->mem.shmem);
	out->walk_ms = (double)(hb_clock_ns(CLOCK_MONOTONIC) - start) / 1e6;
	return 0;
}
