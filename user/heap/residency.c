// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

#include "heap/residency.h"

/*
 * The kernel's page, which pagemap counts in (not jemalloc's: 64 KiB in
 * Debian's arm64 build, on a kernel of 4 KiB pages): 4 KiB on x86-64 and
 * on Debian's arm64 kernels; a kernel of other pages is refused (-ENOTSUP)
 */
#define LG_PAGE 12
#define PAGE	(1ull << LG_PAGE)
/* pagemap entries read at once: 32 KiB, 16 MiB of address space */
#define WINDOW	   4096
#define PM_PRESENT (1ull << 63)
#define PM_SWAPPED (1ull << 62)
#define PM_PFN	   ((1ull << 55) - 1)
#define HUGE_PAGES 512

/* "Key:   123 kB" lines of a /proc file: the value of key in bytes, summed. */
static int kb_field(const char *line, const char *key, uint64_t *sum)
{
	size_t n = strlen(key);
	unsigned long long kb;

	if (strncmp(line, key, n) != 0 || line[n] != ':' || sscanf(line + n + 1, "%llu", &kb) != 1)
		return 0;
	*sum += (uint64_t)kb << 10;
	return 1;
}

int residency_memory(pid_t pid, const struct vmas *v, struct proc_memory *out)
{
	char path[64], line[256];
	FILE *f;

	memset(out, 0, sizeof(*out));
	/* smaps walks the page tables: its sums are smaps_rollup's, exact */
	for (size_t i = 0; i < v->n; i++) {
		out->rss += v->v[i].rss;
		out->anon += v->v[i].anon;
		out->swap += v->v[i].swap;
	}
	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	/* status's counters are per-CPU and lag: only its shmem, which smaps does not total */
	while (fgets(line, sizeof(line), f))
		(void)kb_field(line, "RssShmem", &out->shmem);
	fclose(f);
	if (out->shmem > out->rss - out->anon)
		out->shmem = out->rss - out->anon;
	out->file = out->rss - out->anon - out->shmem;
	return out->rss ? 0 : -ENODATA;
}

static int vma_push(struct vmas *v, size_t *cap)
{
	if (v->n == *cap) {
		size_t n = *cap ? *cap * 2 : 256;
		struct vma *p = realloc(v->v, n * sizeof(*p));

		if (!p)
			return -ENOMEM;
		v->v = p;
		*cap = n;
	}
	memset(&v->v[v->n], 0, sizeof(v->v[0]));
	v->n++;
	return 0;
}

int residency_vmas(pid_t pid, struct vmas *out)
{
	char path[64], line[512];
	size_t cap = 0;
	FILE *f;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	snprintf(path, sizeof(path), "/proc/%d/smaps", pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (!rc && fgets(line, sizeof(line), f)) {
		unsigned long long lo, hi;
		char perms[8];
		int name = 0;
		struct vma *m;

		if (sscanf(line, "%llx-%llx %7s %*s %*s %*s %n", &lo, &hi, perms, &name) >= 3 &&
		    name) {
			rc = vma_push(out, &cap);
			if (rc)
				break;
			m = &out->v[out->n - 1];
			m->start = lo;
			m->end = hi;
			m->shared = perms[3] == 's';
			snprintf(m->name, sizeof(m->name), "%s", line + name);
			m->name[strcspn(m->name, "\n")] = '\0';
			continue;
		}
		if (!out->n)
			continue;
		m = &out->v[out->n - 1];
		(void)(kb_field(line, "Rss", &m->rss) || kb_field(line, "Anonymous", &m->anon) ||
		       kb_field(line, "Swap", &m->swap));
	}
	fclose(f);
	if (rc)
		residency_vmas_free(out);
	return rc;
}

void residency_vmas_free(struct vmas *v)
{
	free(v->v);
	memset(v, 0, sizeof(*v));
}

struct pagemap {
	int fd;
	/*
	 * The kernel's zero page and huge zero page: a read of memory never
	 * written maps them (present in the page map, in no RSS). 0: unknown
	 * (page frame numbers are given to CAP_SYS_ADMIN only).
	 */
	uint64_t zero_pfn, huge_zero_pfn;
	uint64_t first; /* page number of win[0] */
	size_t have;	/* entries held */
	uint64_t win[WINDOW];
};

/* The page frame that backs a read of never-written memory at p, here; 0: unknown. */
static uint64_t zero_frame(volatile const char *p)
{
	uint64_t e = 0;
	int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	(void)*p;
	if (pread(fd, &e, sizeof(e), (off_t)((uintptr_t)p >> LG_PAGE) * 8) != sizeof(e))
		e = 0;
	close(fd);
	return e & PM_PRESENT ? e & PM_PFN : 0;
}

/* Learns the zero pages' frames by reading fresh memory of heapbpf's own. */
static void learn_zero(struct pagemap *p)
{
	size_t len = 2 * HUGE_PAGES * PAGE;
	char *m = mmap(NULL, len, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uintptr_t huge;

	if (m == MAP_FAILED)
		return;
	p->zero_pfn = zero_frame(m);
	/* a 2 MiB-aligned read may map the huge zero page (THP) */
	huge = ((uintptr_t)m + HUGE_PAGES * PAGE - 1) & ~(uintptr_t)(HUGE_PAGES * PAGE - 1);
	p->huge_zero_pfn = zero_frame((const char *)huge);
	if (p->huge_zero_pfn == p->zero_pfn)
		p->huge_zero_pfn = 0;
	munmap(m, len);
}

/* Whether entry e maps a page of the process's own (not a zero page). */
static bool resident(const struct pagemap *p, uint64_t e)
{
	uint64_t pfn = e & PM_PFN;

	if (!(e & PM_PRESENT))
		return false;
	if (!pfn)
		return true;
	if (pfn == p->zero_pfn)
		return false;
	return !p->huge_zero_pfn || pfn < p->huge_zero_pfn || pfn >= p->huge_zero_pfn + HUGE_PAGES;
}

int residency_pagemap_open(pid_t pid, struct pagemap **out)
{
	char path[64];
	struct pagemap *p = calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	if (sysconf(_SC_PAGESIZE) != (long)PAGE) {
		free(p);
		return -ENOTSUP;
	}
	snprintf(path, sizeof(path), "/proc/%d/pagemap", pid);
	p->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (p->fd < 0) {
		int rc = -errno;

		free(p);
		return rc;
	}
	learn_zero(p);
	*out = p;
	return 0;
}

void residency_pagemap_close(struct pagemap *p)
{
	if (!p)
		return;
	close(p->fd);
	free(p);
}

void residency_pagemap_rewind(struct pagemap *p)
{
	p->first = 0;
	p->have = 0;
}

/* The entry of page number pg, through the window. */
static int entry(struct pagemap *p, uint64_t pg, uint64_t *e)
{
	if (pg < p->first || pg >= p->first + p->have) {
		ssize_t n = pread(p->fd, p->win, sizeof(p->win), (off_t)(pg * 8));

		if (n < 0)
			return -errno;
		if (n < 8)
			return -EFAULT;
		p->first = pg;
		p->have = (size_t)n / 8;
	}
	*e = p->win[pg - p->first];
	return 0;
}

int residency_pagemap_count(struct pagemap *p, uint64_t addr, uint64_t len, uint64_t *present,
			    uint64_t *swapped)
{
	uint64_t first = addr >> LG_PAGE, end = (addr + len + PAGE - 1) >> LG_PAGE;

	*present = *swapped = 0;
	for (uint64_t pg = first; pg < end; pg++) {
		uint64_t e = 0;
		int rc = entry(p, pg, &e);

		if (rc)
			return rc;
		*present += resident(p, e);
		*swapped += !!(e & PM_SWAPPED);
	}
	return 0;
}

int residency_pagemap_present(void *ctx, uint64_t addr, size_t n, bool *present)
{
	struct pagemap *p = ctx;

	for (size_t i = 0; i < n; i++) {
		uint64_t e = 0;
		int rc = entry(p, (addr >> LG_PAGE) + i, &e);

		if (rc)
			return rc;
		present[i] = resident(p, e);
	}
	return 0;
}
