// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/errmsg.h"
#include "targets/targets.h"

#define MAX_ROOTS    8
#define SEARCH_DEPTH 6 /* system.slice/foo.slice/bar.service and user@.service trees */

int targets_unit_name(const char *name, char *out, size_t len)
{
	size_t n = strlen(name);
	const char *dot = strrchr(name, '.');
	bool typed = dot && (strcmp(dot, ".service") == 0 || strcmp(dot, ".scope") == 0);

	/* systemd's own limit on unit names is 255 bytes */
	if (!n || n > 240 || name[0] == '.')
		return -EINVAL;
	for (const char *c = name; *c; c++) {
		if (*c == '/' || (unsigned char)*c < 0x21 || *c == 0x7f)
			return -EINVAL;
	}
	if (snprintf(out, len, "%s%s", name, typed ? "" : ".service") >= (int)len)
		return -EINVAL;
	return 0;
}

/* mountinfo escapes space, tab, newline and backslash as \ooo */
static void unescape(char *s)
{
	char *d = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*d++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 3;
		} else {
			*d++ = *s;
		}
	}
	*d = '\0';
}

/* Mount points of cgroup2 and of the v1 hierarchy named "systemd". */
static int cgroup_roots(char roots[][PATH_MAX], int max)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[4096];
	int n = 0;

	if (!f)
		return -errno;
	while (n < max && fgets(line, sizeof(line), f)) {
		char mnt[PATH_MAX], fstype[64], super[1024];
		char *sep = strstr(line, " - ");

		if (!sep || sscanf(line, "%*s %*s %*s %*s %4095s", mnt) != 1 ||
		    sscanf(sep + 3, "%63s %*s %1023s", fstype, super) != 2)
			continue;
		if (strcmp(fstype, "cgroup2") != 0 &&
		    !(strcmp(fstype, "cgroup") == 0 && strstr(super, "name=systemd")))
			continue;
		unescape(mnt);
		snprintf(roots[n++], PATH_MAX, "%s", mnt);
	}
	fclose(f);
	return n;
}

/* Depth-first search for a directory called @name below @dir. */
static bool find_dir(const char *dir, const char *name, int depth, char *out)
{
	struct dirent *de;
	bool found = false;
	DIR *d;

	if (depth > SEARCH_DEPTH)
		return false;
	d = opendir(dir);
	if (!d)
		return false;
	while (!found && (de = readdir(d))) {
		char sub[PATH_MAX];

		if (de->d_type != DT_DIR || de->d_name[0] == '.')
			continue;
		if (snprintf(sub, sizeof(sub), "%s/%s", dir, de->d_name) >= (int)sizeof(sub))
			continue;
		if (strcmp(de->d_name, name) == 0) {
			snprintf(out, PATH_MAX, "%s", sub);
			found = true;
		} else {
			found = find_dir(sub, name, depth + 1, out);
		}
	}
	closedir(d);
	return found;
}

static void add_pid(pid_t *pids, size_t max, size_t *n, pid_t pid)
{
	for (size_t i = 0; i < *n; i++) {
		if (pids[i] == pid)
			return;
	}
	if (*n < max)
		pids[(*n)++] = pid;
}

/* Every pid in the cgroup at @dir and in its children. */
static void collect_pids(const char *dir, int depth, pid_t *pids, size_t max, size_t *n)
{
	char path[PATH_MAX + 16], line[32];
	struct dirent *de;
	FILE *f;
	DIR *d;

	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	f = fopen(path, "re");
	if (f) {
		while (fgets(line, sizeof(line), f)) {
			long v = strtol(line, NULL, 10);

			/* 0: a process in another pid namespace */
			if (v > 0 && v <= INT_MAX && v != getpid())
				add_pid(pids, max, n, (pid_t)v);
		}
		fclose(f);
	}
	if (depth > SEARCH_DEPTH)
		return;
	d = opendir(dir);
	if (!d)
		return;
	while ((de = readdir(d))) {
		char sub[PATH_MAX];

		if (de->d_type != DT_DIR || de->d_name[0] == '.')
			continue;
		if (snprintf(sub, sizeof(sub), "%s/%s", dir, de->d_name) < (int)sizeof(sub))
			collect_pids(sub, depth + 1, pids, max, n);
	}
	closedir(d);
}

static int cmp_pid(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;

	return (x > y) - (x < y);
}

int targets_from_unit(const char *unit, const char *root, pid_t *pids, size_t max, char *err,
		      size_t errlen)
{
	char roots[MAX_ROOTS][PATH_MAX], name[256], dir[PATH_MAX];
	bool found = false;
	size_t n = 0;
	int nroots;

	if (targets_unit_name(unit, name, sizeof(name))) {
		return hb_fail(err, errlen, -EINVAL, "\"%s\" is not a systemd unit name", unit);
	}
	if (root) {
		snprintf(roots[0], PATH_MAX, "%s", root);
		nroots = 1;
	} else {
		nroots = cgroup_roots(roots, MAX_ROOTS);
	}
	if (nroots <= 0) {
		return hb_fail(
			err, errlen, -ENOENT,
			"no cgroup2 or systemd cgroup hierarchy is mounted, so %s cannot be found; "
			"use --pid or --pidfile",
			name);
	}
	for (int i = 0; i < nroots; i++) {
		struct stat st;

		/* system services first: a user manager may run a unit of the same name */
		if (snprintf(dir, sizeof(dir), "%s/system.slice/%s", roots[i], name) >=
			    (int)sizeof(dir) ||
		    stat(dir, &st) || !S_ISDIR(st.st_mode)) {
			if (!find_dir(roots[i], name, 0, dir))
				continue;
		}
		found = true;
		collect_pids(dir, 0, pids, max, &n);
	}
	if (!found) {
		return hb_fail(
			err, errlen, -ENOENT,
			"unit %s has no cgroup under %s%s: it is not running (or not a systemd "
			"unit)",
			name, roots[0], nroots > 1 ? " or the other cgroup hierarchies" : "");
	}
	if (!n) {
		return hb_fail(err, errlen, -ESRCH,
			       "unit %s is not running: its cgroup holds no process", name);
	}
	qsort(pids, n, sizeof(*pids), cmp_pid);
	return (int)n;
}

int targets_from_pidfile(const char *path, pid_t *pid, char *err, size_t errlen)
{
	char buf[32], *end;
	struct stat st;
	ssize_t len;
	long v;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0) {
		return hb_fail(err, errlen, -errno, "cannot open the pid file %s: %s", path,
			       strerror(errno));
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		return hb_fail(err, errlen, -EINVAL, "the pid file %s is not a regular file", path);
	}
	if (st.st_mode & (S_IWGRP | S_IWOTH)) {
		close(fd);
		return hb_fail(
			err, errlen, -EPERM,
			"the pid file %s may be written by others than its owner, so it cannot "
			"be trusted to name the process to profile; make it 0644",
			path);
	}
	len = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (len < 0) {
		return hb_fail(err, errlen, -EIO, "cannot read the pid file %s: %s", path,
			       strerror(errno));
	}
	buf[len] = '\0';
	errno = 0;
	v = strtol(buf, &end, 10);
	if (end == buf || errno || v <= 0 || v > INT_MAX || (*end && strcmp(end, "\n") != 0)) {
		return hb_fail(err, errlen, -EINVAL, "the pid file %s does not hold a process id",
			       path);
	}
	if (kill((pid_t)v, 0) && errno == ESRCH) {
		return hb_fail(err, errlen, -ESRCH,
			       "the pid file %s names pid %ld, which is not running", path, v);
	}
	*pid = (pid_t)v;
	return 0;
}

/* A process of the scan: its parent and its start time, from one read of /proc/PID/stat. */
struct proc_node {
	pid_t pid, ppid;
	uint64_t start;
	bool taken;
};

static bool read_node(const char *name, struct proc_node *nd)
{
	char path[300], buf[1024], *p;
	unsigned long long start;
	long pid = strtol(name, &p, 10);
	int ppid;
	FILE *f;

	if (*p || pid <= 0 || pid > INT_MAX)
		return false;
	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	p = fgets(buf, sizeof(buf), f);
	fclose(f);
	/* the command name may hold spaces and ')': fields resume after the last ')' */
	p = p ? strrchr(buf, ')') : NULL;
	/* after ") " come fields 3..: the parent is field 4, the start time field 22 */
	if (!p || sscanf(p + 2,
			 "%*c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d "
			 "%*d %*d %llu",
			 &ppid, &start) != 2)
		return false;
	*nd = (struct proc_node){ .pid = (pid_t)pid, .ppid = ppid, .start = start };
	return true;
}

/* Every process now, with its parent and start time; the count, or a negative errno. */
static ssize_t scan_procs(struct proc_node **out)
{
	struct proc_node *v = NULL, *nv;
	size_t n = 0, cap = 0;
	struct dirent *de;
	DIR *d = opendir("/proc");

	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		struct proc_node nd;

		if (!read_node(de->d_name, &nd))
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 256;
			nv = realloc(v, cap * sizeof(*v));
			if (!nv) {
				free(v);
				closedir(d);
				return -ENOMEM;
			}
			v = nv;
		}
		v[n++] = nd;
	}
	closedir(d);
	*out = v;
	return (ssize_t)n;
}

static bool listed(const pid_t *pids, size_t n, pid_t pid)
{
	for (size_t i = 0; i < n; i++) {
		if (pids[i] == pid)
			return true;
	}
	return false;
}

/* By parent, then by pid: a process's children stand together, in pid order. */
static int by_ppid(const void *a, const void *b)
{
	const struct proc_node *x = a, *y = b;

	if (x->ppid != y->ppid)
		return x->ppid < y->ppid ? -1 : 1;
	return (x->pid > y->pid) - (x->pid < y->pid);
}

/* The first of v (sorted by_ppid) whose parent is ppid, or nv. */
static size_t first_child(const struct proc_node *v, size_t nv, pid_t ppid)
{
	size_t lo = 0, hi = nv;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (v[mid].ppid < ppid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

int targets_descendants(pid_t root, pid_t *pids, uint64_t *starts, size_t max, size_t *n)
{
	struct proc_node *v = NULL;
	ssize_t nv = scan_procs(&v);
	size_t added = 0;
	pid_t *queue;
	uint64_t *qstart;
	size_t qn = 0;

	if (nv <= 0 || !v)
		return nv < 0 ? (int)nv : 0;
	queue = calloc((size_t)nv + 1, sizeof(*queue));
	qstart = calloc((size_t)nv + 1, sizeof(*qstart));
	if (!queue || !qstart) {
		free(queue);
		free(qstart);
		free(v);
		return -ENOMEM;
	}
	for (ssize_t i = 0; i < nv; i++) {
		if (v[i].pid == root) {
			v[i].taken = true;
			queue[qn] = root;
			qstart[qn++] = v[i].start;
		}
	}
	/* breadth first: children, then grandchildren; each a binary search away */
	qsort(v, (size_t)nv, sizeof(*v), by_ppid);
	for (size_t q = 0; q < qn; q++) {
		for (size_t i = first_child(v, (size_t)nv, queue[q]);
		     i < (size_t)nv && v[i].ppid == queue[q]; i++) {
			/* a process older than its "parent" had another parent of that pid */
			if (v[i].taken || v[i].start < qstart[q] || v[i].pid == getpid())
				continue;
			v[i].taken = true;
			queue[qn] = v[i].pid;
			qstart[qn++] = v[i].start;
			if (*n < max && !listed(pids, *n, v[i].pid)) {
				pids[*n] = v[i].pid;
				if (starts)
					starts[*n] = v[i].start;
				(*n)++;
				added++;
			}
		}
	}
	free(queue);
	free(qstart);
	free(v);
	return (int)added;
}
