// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The kernel keeps CLOCK_MONOTONIC_COARSE for the vDSO in a data page it
 * maps into every process ([vvar]), as {u64 seconds, u64 nanoseconds}, and
 * updates it at each tick. Where in that page is the kernel's own layout,
 * which changes between releases, so heapbpf does not assume it: it reads
 * the clock, copies the first page of its own [vvar], reads the clock again
 * and, if no tick came between, looks for the one place that holds that
 * reading.
 *
 * A process in a time namespace of its own has a page of clock offsets
 * first, and the kernel's data page at another page of its [vvar], which
 * page depending on the architecture and the release. That place is found
 * the same way, once, in a child heapbpf makes in a new time namespace
 * (offsets zero, so its clock reads the kernel's words unchanged). The
 * target's samples then carry the kernel's clock, without its offset,
 * which is taken off its frees' times instead (vclock_monotonic_offset).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sampling/vclock.h"

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

#define VVAR_NAME "[vvar]"
#define TRIES	  8
#define MAX_PAGE  65536

/* in the [vvar] of a process in heapbpf's time namespace, and of one in another; -1: none */
static long coarse_off = -1;
static long timens_off = -1;

static const struct proc_map *vvar_of(const struct proc_maps *maps)
{
	for (size_t i = 0; i < maps->n; i++) {
		if (maps->v[i].path && !strcmp(maps->v[i].path, VVAR_NAME))
			return &maps->v[i];
	}
	return NULL;
}

static uint64_t vvar_start(const struct proc_maps *maps)
{
	const struct proc_map *m = vvar_of(maps);

	return m ? m->start : 0;
}

/* The one 8-aligned offset of {sec, nsec} in page[0, len), or -1 (none, or more than one). */
static long find_pair(const unsigned char *page, size_t len, const struct timespec *ts)
{
	const uint64_t sec = (uint64_t)ts->tv_sec, nsec = (uint64_t)ts->tv_nsec;
	long found = -1;

	for (size_t off = 0; off + 16 <= len; off += 8) {
		uint64_t w[2];

		memcpy(w, page + off, sizeof(w));
		if (w[0] != sec || w[1] != nsec)
			continue;
		if (found >= 0)
			return -1;
		found = (long)off;
	}
	return found;
}

/* heapbpf's own [vvar] (fork keeps it where it is) and the page size; false without one. */
static bool own_vvar(uint64_t *start, uint64_t *len, long *psize)
{
	struct proc_maps *own = NULL;
	const struct proc_map *m;

	*psize = sysconf(_SC_PAGESIZE);
	if (*psize <= 0 || *psize > MAX_PAGE || proc_maps__read(getpid(), &own))
		return false;
	m = vvar_of(own);
	*start = m ? m->start : 0;
	*len = m ? m->end - m->start : 0;
	proc_maps__free(own);
	return *start && *len >= (uint64_t)*psize;
}

/*
 * The one place in the pages [from, to) of the [vvar] at start that holds
 * the caller's own coarse reading, or -1 (none, more than one, or a tick
 * between every try). A page is copied through the pipe pfd, so that one
 * the kernel does not back (a paravirtual clock's page on a machine
 * without one) fails the write with EFAULT instead of raising SIGBUS.
 * Only system calls and the vDSO: it also runs in a child of a process
 * that may have threads.
 */
static long search_vvar(uint64_t start, uint64_t from, uint64_t to, long psize, int pfd[2])
{
	static unsigned char page[MAX_PAGE];
	long found = -1;

	for (uint64_t p = from; p + (uint64_t)psize <= to; p += (uint64_t)psize) {
		int i;

		for (i = 0; i < TRIES; i++) {
			struct timespec a, b;
			ssize_t n;
			long off;

			clock_gettime(CLOCK_MONOTONIC_COARSE, &a);
			n = write(pfd[1], (const void *)(uintptr_t)(start + p), (size_t)psize);
			if (n < 0)
				break; /* not backed: nothing of ours there */
			if (n != psize || read(pfd[0], page, (size_t)n) != n)
				return -1;
			clock_gettime(CLOCK_MONOTONIC_COARSE, &b);
			if (a.tv_sec != b.tv_sec || a.tv_nsec != b.tv_nsec)
				continue; /* a tick between: the copy may hold either */
			off = find_pair(page, (size_t)psize, &a);
			if (off >= 0 && found >= 0)
				return -1; /* two places: neither is known to be it */
			if (off >= 0)
				found = (long)p + off;
			break;
		}
		if (i == TRIES)
			return -1;
	}
	return found;
}

/*
 * In heapbpf's own [vvar]: its first page, where a process not in a time
 * namespace of its own has the clock.
 */
static void find_offset(void)
{
	uint64_t start, len;
	long psize;
	int pfd[2];

	if (!own_vvar(&start, &len, &psize) || pipe2(pfd, O_CLOEXEC))
		return;
	coarse_off = search_vvar(start, 0, (uint64_t)psize, psize, pfd);
	close(pfd[0]);
	close(pfd[1]);
}

/*
 * Makes a child (A) that enters a new time namespace for its children and
 * forks one (B), which searches the other pages of its [vvar] (the first
 * holds its clock offsets) and writes what it found to heapbpf. Needs
 * CAP_SYS_ADMIN and a kernel with time namespaces (5.6); -1 without.
 */
static void find_timens_offset(void)
{
	uint64_t start, len;
	long psize, off = -1;
	int res[2];
	pid_t a;

	if (!own_vvar(&start, &len, &psize) || pipe2(res, O_CLOEXEC))
		return;
	a = fork();
	if (a == 0) {
		int pfd[2];
		pid_t b;

		close(res[0]);
		if (unshare(CLONE_NEWTIME))
			_exit(1);
		b = fork();
		if (b == 0) {
			long found = -1;

			if (!pipe(pfd))
				found = search_vvar(start, (uint64_t)psize, len, psize, pfd);
			_exit(write(res[1], &found, sizeof(found)) == sizeof(found) ? 0 : 1);
		}
		_exit(b > 0 && waitpid(b, NULL, 0) == b ? 0 : 1);
	}
	close(res[1]);
	if (a > 0) {
		if (read(res[0], &off, sizeof(off)) != sizeof(off))
			off = -1;
		/* reaped here, unless a reaper of heapbpf's own took it first */
		while (waitpid(a, NULL, 0) < 0 && errno == EINTR)
			;
	}
	close(res[0]);
	timens_off = off;
}

/* The offset of {sec, nsec} in the [vvar] mapping, found once in heapbpf's own; -1: none. */
static long coarse_offset(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, find_offset);
	return coarse_off;
}

static bool same_stat(const struct stat *x, const struct stat *y)
{
	return x->st_dev == y->st_dev && x->st_ino == y->st_ino;
}

static bool same_file(const char *a, const char *b)
{
	struct stat x, y;

	return !stat(a, &x) && !stat(b, &y) && same_stat(&x, &y);
}

/* Whether pid is in heapbpf's time namespace (so: the same vDSO data page); true without them. */
static bool same_time_ns(pid_t pid)
{
	char path[64];
	struct stat own, other;

	if (stat("/proc/self/ns/time", &own))
		return errno == ENOENT; /* a kernel without time namespaces (before 5.6) */
	snprintf(path, sizeof(path), "/proc/%d/ns/time", (int)pid);
	return !stat(path, &other) && same_stat(&own, &other);
}

/*
 * The monotonic offset of who's ("self" or a pid) time namespace, from
 * timens_offsets, which shows the namespace its children get: only where
 * that is its own. false if it cannot be known.
 */
static bool ns_offset(const char *who, int64_t *off)
{
	char path[64], kids[64], line[128];
	bool found = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%s/ns/time", who);
	snprintf(kids, sizeof(kids), "/proc/%s/ns/time_for_children", who);
	if (!same_file(path, kids))
		return false;
	snprintf(path, sizeof(path), "/proc/%s/timens_offsets", who);
	f = fopen(path, "re");
	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		long long sec, nsec;

		/* "monotonic SECONDS NANOSECONDS", or the clock's number (1) on some kernels */
		if ((sscanf(line, "monotonic %lld %lld", &sec, &nsec) == 2 ||
		     sscanf(line, "1 %lld %lld", &sec, &nsec) == 2) &&
		    sec > -(INT64_MAX / 1000000000LL) && sec < INT64_MAX / 1000000000LL) {
			*off = (int64_t)sec * 1000000000LL + nsec;
			found = true;
		}
	}
	fclose(f);
	return found;
}

int64_t vclock_monotonic_offset(pid_t pid)
{
	char who[16];
	int64_t own = 0, other = 0;

	if (same_time_ns(pid))
		return 0;
	snprintf(who, sizeof(who), "%d", (int)pid);
	if (!ns_offset(who, &other) || !ns_offset("self", &own))
		return 0;
	return other - own;
}

/* The offset in the [vvar] of a process in a time namespace of its own, found once; -1: none. */
static long timens_offset(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, find_timens_offset);
	return timens_off;
}

uint64_t vclock_coarse_addr(pid_t pid, const struct proc_maps *maps)
{
	long off = coarse_offset();
	uint64_t start = maps ? vvar_start(maps) : 0;

	if (off < 0 || !start)
		return 0;
	/*
	 * heapbpf found the clock in its own first page, so its namespace is the
	 * initial one; a target in any other has the other layout
	 */
	if (!same_time_ns(pid))
		off = timens_offset();
	return off < 0 ? 0 : start + (uint64_t)off;
}
