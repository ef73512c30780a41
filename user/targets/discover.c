// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <linux/cn_proc.h>
#include <linux/connector.h>
#include <linux/netlink.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "targets/discover.h"
#include "util/clock.h"
#include "util/errmsg.h"
#include "symbols/proc.h"

/*
 * After an exec, the process is checked at these delays (seconds): a
 * dynamically linked jemalloc is mapped by the loader, and opt_prof is
 * read from MALLOC_CONF at jemalloc's first allocation, both a little
 * after the exec. A process still not ready after the last is given up.
 */
static const double backoff_s[] = { 0.2, 0.6, 1.5, 3, 6, 12 };
#define NBACKOFF (sizeof(backoff_s) / sizeof(backoff_s[0]))

/* A process heard of: pending a check, or settled (taken, or never). */
struct known {
	pid_t pid;
	uint64_t start;
	double due;	       /* CLOCK_MONOTONIC seconds of its next check; 0: settled */
	double exec_at;	       /* CLOCK_MONOTONIC seconds its exec was heard of; 0: not heard */
	unsigned int attempts; /* checks so far */
	bool seen;	       /* in the last scan of /proc */
};

struct discover {
	int fd; /* the process connector, or -1 */
	double rescan_s, next_scan;
	struct known *v;
	size_t n, cap;
};

static double mono_s(void)
{
	return (double)hb_clock_ns(CLOCK_MONOTONIC) / 1e9;
}

/* The kernel's process events, exec among them; -errno without them. */
static int open_connector(void)
{
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK, .nl_groups = CN_IDX_PROC };
	/* nlmsghdr, cn_msg (whose data is a flexible array) and the op, packed */
	enum proc_cn_mcast_op op = PROC_CN_MCAST_LISTEN;
	struct nlmsghdr nl = { .nlmsg_len =
				       sizeof(struct nlmsghdr) + sizeof(struct cn_msg) + sizeof(op),
			       .nlmsg_type = NLMSG_DONE };
	struct cn_msg cn = { .id = { .idx = CN_IDX_PROC, .val = CN_VAL_PROC }, .len = sizeof(op) };
	unsigned char msg[sizeof(nl) + sizeof(cn) + sizeof(op)];
	int fd = socket(PF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_CONNECTOR);

	if (fd < 0)
		return -errno;
	memcpy(msg, &nl, sizeof(nl));
	memcpy(msg + sizeof(nl), &cn, sizeof(cn));
	memcpy(msg + sizeof(nl) + sizeof(cn), &op, sizeof(op));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    send(fd, msg, sizeof(msg), 0) != (ssize_t)sizeof(msg)) {
		int rc = -errno;

		close(fd);
		return rc;
	}
	return fd;
}

int discover__new(double rescan_s, struct discover **out, char *err, size_t errlen)
{
	struct discover *d = calloc(1, sizeof(*d));

	if (!d)
		return hb_fail(err, errlen, -ENOMEM, "out of memory");
	d->fd = open_connector();
	d->rescan_s = d->fd >= 0 ? rescan_s : 2;
	if (d->fd < 0)
		d->fd = -1;
	*out = d;
	return 0;
}

int discover__fd(const struct discover *d)
{
	return d->fd;
}

bool discover__has_connector(const struct discover *d)
{
	return d->fd >= 0;
}

static struct known *find(struct discover *d, pid_t pid)
{
	for (size_t i = 0; i < d->n; i++) {
		if (d->v[i].pid == pid)
			return &d->v[i];
	}
	return NULL;
}

/*
 * pid (started at start, 0: unknown yet; exec'ed at exec_at, 0: not heard)
 * is to be checked at due, from its first attempt.
 */
static void queue(struct discover *d, pid_t pid, uint64_t start, double due, double exec_at)
{
	struct known *k = find(d, pid);

	if (!k && d->n == d->cap) {
		size_t cap = d->cap ? 2 * d->cap : 256;
		struct known *v = realloc(d->v, cap * sizeof(*v));

		if (!v)
			return;
		d->v = v;
		d->cap = cap;
	}
	if (!k)
		k = &d->v[d->n++];
	*k = (struct known){
		.pid = pid, .start = start, .due = due, .exec_at = exec_at, .seen = true
	};
}

size_t discover__parse(const void *buf, ssize_t len, pid_t *pids, size_t max)
{
	const size_t head = NLMSG_LENGTH(sizeof(struct cn_msg));
	/* the exec event's fields, at least, past the connector's header */
	const size_t need = offsetof(struct proc_event, event_data) +
			    sizeof(((struct proc_event *)0)->event_data.exec);
	const char *p = buf;
	size_t total = len > 0 ? (size_t)len : 0, off = 0, n = 0;

	while (n < max && off <= total && total - off >= sizeof(struct nlmsghdr)) {
		struct nlmsghdr nh;
		struct cn_msg cn;
		struct proc_event ev = {};

		/* copied, not cast: nothing past the datagram is read, whatever it claims */
		memcpy(&nh, p + off, sizeof(nh));
		if (nh.nlmsg_len < sizeof(nh) || nh.nlmsg_len > total - off)
			break;
		if (nh.nlmsg_type == NLMSG_DONE && nh.nlmsg_len >= head) {
			memcpy(&cn, p + off + NLMSG_HDRLEN, sizeof(cn));
			if (cn.id.idx == CN_IDX_PROC && cn.id.val == CN_VAL_PROC &&
			    cn.len <= nh.nlmsg_len - head && cn.len >= need) {
				memcpy(&ev, p + off + head,
				       cn.len < sizeof(ev) ? cn.len : sizeof(ev));
				if (ev.what == PROC_EVENT_EXEC)
					pids[n++] = ev.event_data.exec.process_tgid;
			}
		}
		off += NLMSG_ALIGN(nh.nlmsg_len);
	}
	return n;
}

void discover__read(struct discover *d)
{
	char buf[8192] __attribute__((aligned(NLMSG_ALIGNTO)));
	pid_t pids[256];

	for (;;) {
		struct sockaddr_nl from = {};
		socklen_t flen = sizeof(from);
		ssize_t len = recvfrom(d->fd, buf, sizeof(buf), 0, (struct sockaddr *)&from, &flen);
		size_t n;

		/* events were lost: a scan finds what they named */
		if (len < 0 && errno == ENOBUFS) {
			d->next_scan = 0;
			continue;
		}
		if (len <= 0)
			return;
		/* the kernel's only: another process may send to the group */
		if (flen < sizeof(from) || from.nl_family != AF_NETLINK || from.nl_pid)
			continue;
		n = discover__parse(buf, len, pids, sizeof(pids) / sizeof(pids[0]));
		/* an exec makes a new jemalloc: the process is checked (again) */
		for (size_t i = 0; i < n; i++)
			queue(d, pids[i], 0, mono_s() + backoff_s[0], mono_s());
	}
}

/* Every process in /proc not known yet is due now; those known and gone are forgotten. */
static void scan(struct discover *d)
{
	DIR *dir = opendir("/proc");
	struct dirent *de;

	if (!dir)
		return;
	for (size_t i = 0; i < d->n; i++)
		d->v[i].seen = false;
	while ((de = readdir(dir))) {
		pid_t pid;
		uint64_t start;
		struct known *k;

		if (!isdigit((unsigned char)de->d_name[0]))
			continue;
		pid = (pid_t)atoi(de->d_name);
		start = proc_start_time(pid);
		k = find(d, pid);
		if (k && (k->start == start || !k->start)) {
			k->start = start;
			k->seen = true;
			continue;
		}
		if (start && pid != getpid())
			queue(d, pid, start, mono_s(), 0);
	}
	closedir(dir);
	for (size_t i = 0; i < d->n;) {
		if (!d->v[i].seen)
			d->v[i] = d->v[--d->n];
		else
			i++;
	}
}

void discover__again(struct discover *d, pid_t pid)
{
	queue(d, pid, 0, mono_s(), mono_s());
}

/* Seconds since pid's exec, as heard; else since it started (start: clock ticks after boot). */
static double age_of(const struct known *k, double now)
{
	struct timespec ts;

	if (k->exec_at)
		return now - k->exec_at;
	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9 - (double)k->start / sysconf(_SC_CLK_TCK);
}

size_t discover__due(struct discover *d, struct discover_due *out, size_t max)
{
	double now = mono_s();
	size_t n = 0;

	if (now >= d->next_scan) {
		scan(d);
		d->next_scan = now + d->rescan_s;
	}
	for (size_t i = 0; i < d->n && n < max; i++) {
		struct known *k = &d->v[i];

		if (!k->due || k->due > now)
			continue;
		if (!k->start)
			k->start = proc_start_time(k->pid);
		out[n++] = (struct discover_due){ .pid = k->pid,
						  .start = k->start,
						  .age = age_of(k, now) };
		/* until the verdict: not named twice */
		k->due = now + 1e9;
	}
	return n;
}

void discover__verdict(struct discover *d, pid_t pid, uint64_t start, enum discover_verdict v)
{
	struct known *k = find(d, pid);

	if (!k || (k->start && start && k->start != start))
		return;
	k->attempts++;
	if (v == DISCOVER_LATER && k->attempts < NBACKOFF)
		k->due = mono_s() + backoff_s[k->attempts] - backoff_s[k->attempts - 1];
	else
		k->due = 0;
}

void discover__free(struct discover *d)
{
	if (!d)
		return;
	if (d->fd >= 0)
		close(d->fd);
	free(d->v);
	free(d);
}
