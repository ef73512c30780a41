/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * heapbpf agent: the processes of the node as they appear. One scan of
 * /proc at the start, then the kernel's process connector (netlink,
 * PROC_EVENT_EXEC) names each process that execs, with no polling; a
 * slow rescan of /proc for pids never seen (a worker forked without exec,
 * a connector that overran) backs it up. A fresh process is checked a few
 * times with backoff, for its jemalloc may not be initialised at exec.
 */
#ifndef __HEAPBPF_DISCOVER_H
#define __HEAPBPF_DISCOVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct discover;

/* What the caller made of a process discover__due() named. */
enum discover_verdict {
	DISCOVER_TAKEN, /* watched (or queued to be): not named again */
	DISCOVER_LATER, /* not ready (no jemalloc yet, prof off so far): again, with backoff */
	DISCOVER_NEVER, /* never (no jemalloc for good, excluded): not named again */
};

/*
 * rescan_s: seconds between the backup scans of /proc (the connector's
 * absence makes it 2). Never fails for want of the connector (it needs
 * CAP_NET_ADMIN and the host's network namespace): it then rescans.
 */
int discover__new(double rescan_s, struct discover **out, char *err, size_t errlen);
/* The connector's descriptor for an event loop, or -1 without it. */
int discover__fd(const struct discover *d);
bool discover__has_connector(const struct discover *d);
/*
 * The pids that exec'ed, from one datagram of the process connector (len
 * bytes at buf), at most max; how many. A message whose lengths do not fit
 * the datagram ends the parse; one not the connector's exec event is skipped.
 */
size_t discover__parse(const void *buf, ssize_t len, pid_t *pids, size_t max);
/* The connector is readable: the processes that exec'ed queued for a check soon. */
void discover__read(struct discover *d);
/* A process whose check is due. */
struct discover_due {
	pid_t pid;
	uint64_t start; /* its start time, clock ticks after boot */
	/*
	 * Seconds since its exec when one was heard of (a process that forked
	 * long ago may have exec'ed just now), else since it started.
	 */
	double age;
};

/*
 * The processes whose check is due now (a scan of /proc first when one is
 * due), at most max; how many.
 */
size_t discover__due(struct discover *d, struct discover_due *out, size_t max);
/*
 * pid is to be checked again as a new process (the caller found it exec'ed
 * unheard): named by the next discover__due().
 */
void discover__again(struct discover *d, pid_t pid);
/* The caller's verdict on a process discover__due() named. */
void discover__verdict(struct discover *d, pid_t pid, uint64_t start, enum discover_verdict v);
void discover__free(struct discover *d);

#endif /* __HEAPBPF_DISCOVER_H */
