/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * heapbpf watch's pressure trigger: the kernel's own word that a process's
 * memory cgroup is under memory pressure, as an event (docs/watch.md).
 * cgroup v1: the vmpressure notification at level medium or worse
 * (memory.pressure_level through cgroup.event_control), on the nearest
 * cgroup with a limit, whose reclaim the kernel reports there. cgroup v2: a
 * PSI trigger on memory.pressure, and memory.events' high and oom. Reclaim
 * of page cache that is easily freed is neither.
 */
#ifndef __HEAPBPF_PRESSURE_H
#define __HEAPBPF_PRESSURE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct pressure;

/*
 * pid's memory cgroup's notification, its fds added to the epoll epfd
 * (readable when the kernel tells of pressure); -errno with a sentence in
 * err when there is none to be had (no memory cgroup, a refusal). On 0,
 * err holds a sentence when only part of it could be had (v2 without PSI),
 * else "".
 */
int pressure__new(pid_t pid, int epfd, struct pressure **out, char *err, size_t errlen);
/*
 * Whether the kernel told of pressure since the last look, each fd read so
 * it wakes epfd no more; what it said into note. woken: epfd woke the
 * caller (a v2 PSI trigger's wake is consumed by the epoll that reports
 * it, and is told by the stall since the last pressure__tick()).
 */
bool pressure__seen(struct pressure *p, bool woken, char *note, size_t len);
/* Once a second: the stall a v2 trigger's wake is measured against. */
void pressure__tick(struct pressure *p);
/* Closes its fds, which ends the kernel's registration; takes NULL. */
void pressure__free(struct pressure *p);

#endif /* __HEAPBPF_PRESSURE_H */
