// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "sampling/pressure.h"

/* How a target's memory cgroup tells of pressure. */
enum cg_kind {
	CG_NONE,
	CG_V2, /* a PSI trigger on memory.pressure, and memory.events' high and oom */
	CG_V1, /* vmpressure: memory.pressure_level through cgroup.event_control */
};

/*
 * v2: pressure is tasks of the cgroup stalled on memory for PSI_STALL_US of
 * PSI_WINDOW_US (10%), the kernel's own trigger; v1: vmpressure's medium
 * level or worse (reclaim scans pages it cannot free: 60% or more of them).
 */
#define PSI_STALL_US  100000
#define PSI_WINDOW_US 1000000
struct pressure {
	enum cg_kind kind;
	char dir[4096];	     /* v1: the nearest cgroup with a limit (or the root); v2: its own */
	int fd;		     /* v1: the eventfd vmpressure signals; v2: the PSI trigger */
	int events;	     /* v2: memory.events, which the kernel marks changed */
	uint64_t last[2];    /* v2: memory.events' high and oom at the last look */
	uint64_t stall_last; /* v2: memory.pressure's "some" total (us) at the last tick */
};

/* The first number after key in file dir/name, or -1 (unreadable, none). */
static int64_t cg_read(const char *dir, const char *name, const char *key)
{
	char path[4200], line[512];
	size_t k = strlen(key);
	int64_t v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (v < 0 && fgets(line, sizeof(line), f)) {
		unsigned long long x;

		if (!strncmp(line, key, k) && sscanf(line + k, "%llu", &x) == 1)
			v = (int64_t)x;
	}
	fclose(f);
	return v;
}

/*
 * v1: where vmpressure tells of the reclaim that squeezes dir: the nearest
 * cgroup from dir up with a limit, whose reclaim the kernel reports there
 * and above (the root for a machine's own reclaim).
 */
static void v1_limit_holder(char *dir)
{
	size_t root = strlen("/sys/fs/cgroup/memory");

	for (;;) {
		int64_t limit = cg_read(dir, "memory.limit_in_bytes", "");
		char *slash = strrchr(dir, '/');

		/* no limit reads as about 2^63 */
		if ((limit > 0 && limit < (INT64_C(1) << 62)) || strlen(dir) <= root || !slash)
			return;
		*slash = '\0';
	}
}

/* The memory cgroup of pid, from /proc/PID/cgroup: v1's "N:memory:/path", or v2's "0::/path". */
static enum cg_kind find_cgroup(pid_t pid, char *dir, size_t len)
{
	char path[64], line[4096];
	enum cg_kind kind = CG_NONE;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/cgroup", pid);
	f = fopen(path, "re");
	if (!f)
		return CG_NONE;
	while (fgets(line, sizeof(line), f)) {
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		const char *ctrl, *cg;
		bool v1;
		int k;

		if (!c2)
			continue;
		line[strcspn(line, "\n")] = '\0';
		*c2 = '\0';
		ctrl = c1 + 1;
		cg = c2 + 1;
		if (strcmp(ctrl, "memory") != 0 && (ctrl[0] || line[0] != '0'))
			continue;
		v1 = ctrl[0] != '\0';
		k = snprintf(dir, len, "%s%s", v1 ? "/sys/fs/cgroup/memory" : "/sys/fs/cgroup",
			     strcmp(cg, "/") ? cg : "");
		if (k < 0 || (size_t)k >= len ||
		    cg_read(dir, v1 ? "memory.limit_in_bytes" : "memory.current", "") < 0)
			continue;
		kind = v1 ? CG_V1 : CG_V2;
		/* v1's memory line wins over a v2 line of a hybrid machine */
		if (v1)
			break;
	}
	fclose(f);
	if (kind == CG_V1)
		v1_limit_holder(dir);
	return kind;
}

/* v1: an eventfd vmpressure signals at medium or worse, from dir and the cgroups below it. */
static int arm_v1(struct pressure *p)
{
	char path[4200], line[64];
	int efd, level, ctl = -1, rc = 0, n;

	efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (efd < 0)
		return -errno;
	snprintf(path, sizeof(path), "%s/memory.pressure_level", p->dir);
	level = open(path, O_RDONLY | O_CLOEXEC);
	snprintf(path, sizeof(path), "%s/cgroup.event_control", p->dir);
	if (level >= 0)
		ctl = open(path, O_WRONLY | O_CLOEXEC);
	n = snprintf(line, sizeof(line), "%d %d medium,hierarchy", efd, level);
	if (level < 0 || ctl < 0 || write(ctl, line, (size_t)n) != n)
		rc = -errno;
	if (level >= 0)
		close(level);
	if (ctl >= 0)
		close(ctl);
	if (rc) {
		close(efd);
		return rc;
	}
	/* closing efd ends the registration */
	p->fd = efd;
	return 0;
}

/* v2: memory.events' high and oom counters, read through the fd the kernel marks. */
static bool v2_events(struct pressure *p, uint64_t v[2])
{
	char buf[1024], *line, *save = NULL;
	ssize_t n = pread(p->events, buf, sizeof(buf) - 1, 0);

	v[0] = v[1] = 0;
	if (n <= 0)
		return false;
	buf[n] = '\0';
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		unsigned long long x;

		if (sscanf(line, "high %llu", &x) == 1)
			v[0] = x;
		else if (!strncmp(line, "oom ", 4) && sscanf(line + 4, "%llu", &x) == 1)
			v[1] = x;
	}
	return true;
}

/* v2: memory.pressure's "some" stall total in microseconds, or 0. */
static uint64_t v2_stall(const struct pressure *p)
{
	char path[4200], line[256];
	unsigned long long total = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/memory.pressure", p->dir);
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		const char *t = strstr(line, "total=");

		if (!strncmp(line, "some ", 5) && t && sscanf(t + 6, "%llu", &total) == 1)
			break;
	}
	fclose(f);
	return total;
}

/* v2: a PSI trigger on the cgroup's memory stalls, and memory.events' changes. */
static int arm_v2(struct pressure *p, char *note, size_t len)
{
	char path[4200], trig[64];
	int n;

	snprintf(path, sizeof(path), "%s/memory.pressure", p->dir);
	p->fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
	/* the kernel reads the trigger up to its terminating NUL */
	n = snprintf(trig, sizeof(trig), "some %d %d", PSI_STALL_US, PSI_WINDOW_US) + 1;
	if (p->fd < 0 || write(p->fd, trig, (size_t)n) != n) {
		/* a kernel without PSI (or booted with psi=0): memory.events alone */
		snprintf(note, len, "%s: %s: pressure from memory.events alone", path,
			 strerror(errno));
		if (p->fd >= 0)
			close(p->fd);
		p->fd = -1;
	}
	snprintf(path, sizeof(path), "%s/memory.events", p->dir);
	p->events = open(path, O_RDONLY | O_CLOEXEC);
	if (p->events < 0 || !v2_events(p, p->last))
		return p->events < 0 ? -errno : -EIO;
	p->stall_last = v2_stall(p);
	return 0;
}

int pressure__new(pid_t pid, int epfd, struct pressure **out, char *err, size_t errlen)
{
	struct epoll_event ev = { .events = EPOLLIN };
	struct pressure *p = calloc(1, sizeof(*p));
	int rc;

	*out = NULL;
	if (!p) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	p->fd = p->events = -1;
	err[0] = '\0';
	p->kind = find_cgroup(pid, p->dir, sizeof(p->dir));
	if (p->kind == CG_NONE) {
		snprintf(err, errlen, "it is in no memory cgroup heapbpf can read");
		pressure__free(p);
		return -ENOENT;
	}
	rc = p->kind == CG_V1 ? arm_v1(p) : arm_v2(p, err, errlen);
	if (rc) {
		snprintf(err, errlen, "%s/%s: %s", p->dir,
			 p->kind == CG_V1 ? "cgroup.event_control" : "memory.pressure",
			 strerror(-rc));
		pressure__free(p);
		return rc;
	}
	if (p->kind == CG_V2)
		ev.events = EPOLLPRI;
	rc = p->fd >= 0 ? epoll_ctl(epfd, EPOLL_CTL_ADD, p->fd, &ev) : 0;
	if (!rc && p->kind == CG_V2)
		rc = epoll_ctl(epfd, EPOLL_CTL_ADD, p->events, &ev);
	if (rc) {
		rc = -errno;
		snprintf(err, errlen, "epoll: %s", strerror(-rc));
		pressure__free(p);
		return rc;
	}
	*out = p;
	return 0;
}

/*
 * What the kernel told of the cgroup since the last look, into note; false
 * when nothing. v1: vmpressure signalled (its eventfd, read to clear). v2:
 * memory.events' high or oom grew, or the PSI trigger woke the watch and
 * the cgroup stalled since the last tick (the trigger's own wake does not
 * say whose it was: a poll through an epoll consumes it).
 */
bool pressure__seen(struct pressure *p, bool woken, char *note, size_t len)
{
	uint64_t v[2], n, stall;

	if (p->kind == CG_V1) {
		if (read(p->fd, &n, sizeof(n)) != sizeof(n))
			return false;
		snprintf(note, len,
			 "%s: the kernel's memory pressure notification (medium or critical: "
			 "reclaim frees few of the pages it scans), %" PRIu64 " since the last",
			 p->dir, n);
		return true;
	}
	if (p->kind != CG_V2 || !v2_events(p, v))
		return false;
	stall = v2_stall(p);
	if (v[0] > p->last[0] || v[1] > p->last[1]) {
		snprintf(note, len, "%s/memory.events: high +%" PRIu64 ", oom +%" PRIu64, p->dir,
			 v[0] - p->last[0], v[1] - p->last[1]);
	} else if (woken && stall > p->stall_last) {
		snprintf(note, len,
			 "%s/memory.pressure: its tasks stalled on memory for %d ms of %d ms or "
			 "more (%.1f ms since the last second)",
			 p->dir, PSI_STALL_US / 1000, PSI_WINDOW_US / 1000,
			 (double)(stall - p->stall_last) / 1e3);
	} else {
		memcpy(p->last, v, sizeof(v));
		return false;
	}
	memcpy(p->last, v, sizeof(v));
	p->stall_last = stall;
	return true;
}

void pressure__tick(struct pressure *p)
{
	if (p && p->kind == CG_V2)
		p->stall_last = v2_stall(p);
}

void pressure__free(struct pressure *p)
{
	if (!p)
		return;
	if (p->fd >= 0)
		close(p->fd);
	if (p->events >= 0)
		close(p->events);
	free(p);
}
