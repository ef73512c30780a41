// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <unistd.h>

#include "util/files.h"
#include "symbols/proc.h"

#define DELETED_SUFFIX " (deleted)"

int proc_map_parse_line(const char *line, struct proc_map *m)
{
	int path_off = 0;
	size_t n;

	memset(m, 0, sizeof(*m));
	if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %4s %" SCNx64 " %x:%x %" SCNu64 " %n", &m->start,
		   &m->end, m->perms, &m->offset, &m->dev_major, &m->dev_minor, &m->inode,
		   &path_off) < 7)
		return -EINVAL;
	if (m->end <= m->start)
		return -EINVAL;
	line += path_off;
	n = strcspn(line, "\n");
	if (n == 0)
		return 0;
	m->path = strndup(line, n);
	if (!m->path)
		return -ENOMEM;
	n = strlen(m->path);
	if (n > strlen(DELETED_SUFFIX) &&
	    strcmp(m->path + n - strlen(DELETED_SUFFIX), DELETED_SUFFIX) == 0) {
		m->path[n - strlen(DELETED_SUFFIX)] = '\0';
		m->deleted = true;
	}
	return 0;
}

int proc_maps__read(pid_t pid, struct proc_maps **out)
{
	char path[64], *line = NULL;
	size_t cap = 0, linecap = 0;
	struct proc_maps *m;
	int err = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? -ESRCH : -errno;
	m = calloc(1, sizeof(*m));
	if (!m) {
		fclose(f);
		return -ENOMEM;
	}
	m->pid = pid;
	while (getline(&line, &linecap, f) > 0) {
		if (m->n == cap) {
			size_t ncap = cap ? cap * 2 : 64;
			struct proc_map *nv = realloc(m->v, ncap * sizeof(*nv));

			if (!nv) {
				err = -ENOMEM;
				break;
			}
			m->v = nv;
			cap = ncap;
		}
		err = proc_map_parse_line(line, &m->v[m->n]);
		if (err)
			break;
		m->n++;
	}
	if (!err && ferror(f))
		err = -EIO;
	/* a process that exited between open and read gives an empty file */
	if (!err && m->n == 0)
		err = -ESRCH;
	free(line);
	fclose(f);
	if (err) {
		proc_maps__free(m);
		return err;
	}
	*out = m;
	return 0;
}

void proc_maps__free(struct proc_maps *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->n; i++)
		free(m->v[i].path);
	free(m->v);
	free(m);
}

const struct proc_map *proc_maps__find(const struct proc_maps *m, uint64_t addr)
{
	size_t lo = 0, hi = m->n;

	/* /proc/PID/maps is sorted by address */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (addr < m->v[mid].start)
			hi = mid;
		else if (addr >= m->v[mid].end)
			lo = mid + 1;
		else
			return &m->v[mid];
	}
	return NULL;
}

bool proc_maps__writable_in(const struct proc_maps *m, uint64_t addr, const char *path)
{
	const struct proc_map *e = proc_maps__find(m, addr);

	if (!e || e->perms[0] != 'r' || e->perms[1] != 'w')
		return false;
	if (e->path)
		return strcmp(e->path, path) == 0;
	return e > m->v && e[-1].end == e->start && e[-1].path && strcmp(e[-1].path, path) == 0;
}

int proc_map_open_path(pid_t pid, const char *path, char *buf, size_t len)
{
	int n;

	if (!path || path[0] != '/')
		return -EINVAL;
	n = snprintf(buf, len, "/proc/%d/root%s", pid, path);
	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	return 0;
}

bool proc_map_is(const struct proc_map *m, int fd)
{
	struct statfs sf;
	struct stat st;

	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_ino != m->inode)
		return false;
	if (major(st.st_dev) == m->dev_major && minor(st.st_dev) == m->dev_minor)
		return true;
	/* btrfs: stat gives each subvolume a device of its own, maps the file system's */
	return fstatfs(fd, &sf) == 0 && sf.f_type == BTRFS_SUPER_MAGIC;
}

/* fd (or -errno) when it is m's file; closed and -ESTALE when it is another. */
static int checked(const struct proc_map *m, int fd)
{
	if (fd < 0 || proc_map_is(m, fd))
		return fd;
	close(fd);
	return -ESTALE;
}

int proc_map_open(pid_t pid, const struct proc_map *m)
{
	char buf[4096];
	int fd, rc;

	if (!m->path || m->path[0] != '/' || !m->inode)
		return -EINVAL;
	/* the kernel's own link to the file mapped there (needs CAP_SYS_ADMIN) */
	snprintf(buf, sizeof(buf), "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, pid, m->start,
		 m->end);
	fd = checked(m, files_open_regular_ro(buf));
	if (fd >= 0 || fd == -ESTALE)
		return fd;
	/* its name, inside the process's root */
	rc = proc_map_open_path(pid, m->path, buf, sizeof(buf));
	fd = rc ? rc : checked(m, files_open_regular_ro(buf));
	if (fd >= 0 || fd == -ESTALE || fd != -ESRCH)
		return fd;
	/* the process is gone: a file of ours is used only if it is the same inode */
	return checked(m, files_open_regular_ro(m->path));
}

int proc_mem_read(pid_t pid, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = { .iov_base = buf, .iov_len = len };
	struct iovec remote = { .iov_base = (void *)(uintptr_t)addr, .iov_len = len };
	ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);

	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EFAULT;
}

int proc_mem_write(pid_t pid, uint64_t addr, const void *buf, size_t len)
{
	struct iovec local = { .iov_base = (void *)buf, .iov_len = len };
	struct iovec remote = { .iov_base = (void *)(uintptr_t)addr, .iov_len = len };
	ssize_t n = process_vm_writev(pid, &local, 1, &remote, 1, 0);

	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EFAULT;
}

bool proc_alive(pid_t pid)
{
	return kill(pid, 0) == 0 || errno != ESRCH;
}

void proc_comm(pid_t pid, char *buf, size_t len)
{
	char path[64];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/comm", pid);
	f = fopen(path, "re");
	if (!f || !fgets(buf, len, f)) {
		snprintf(buf, len, "?");
	} else {
		buf[strcspn(buf, "\n")] = '\0';
	}
	if (f)
		fclose(f);
}

/* The start time of pid into *out: 0, -ESRCH when it is gone, another -errno when unknown. */
static int read_start_time(pid_t pid, uint64_t *out)
{
	char path[64], buf[1024], *p;
	unsigned long long v = 0;
	ssize_t len;
	int fd, err;

	*out = 0;
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	len = read(fd, buf, sizeof(buf) - 1);
	err = len < 0 ? -errno : 0;
	close(fd);
	if (err)
		return err == -ENOENT ? -ESRCH : err;
	buf[len] = '\0';
	/* the command name may hold spaces and ')': fields resume after the last ')' */
	p = strrchr(buf, ')');
	if (!p)
		return -EINVAL;
	/* after ") " come fields 3..; starttime is field 22 */
	if (sscanf(p + 2,
		   "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d "
		   "%*d %*d %llu",
		   &v) != 1)
		return -EINVAL;
	*out = v;
	return 0;
}

uint64_t proc_start_time(pid_t pid)
{
	uint64_t v;

	return read_start_time(pid, &v) ? 0 : v;
}

bool proc_gone(pid_t pid, uint64_t start)
{
	uint64_t now;
	int err = read_start_time(pid, &now);

	return err == -ESRCH || (!err && now != start);
}

int proc_exec_random(pid_t pid, uint8_t *out)
{
	uint64_t v[128];
	char path[32];
	ssize_t n;
	int fd, e;

	snprintf(path, sizeof(path), "/proc/%d/auxv", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	n = read(fd, v, sizeof(v));
	e = errno;
	close(fd);
	if (n < 0)
		return e == ESRCH ? -ESRCH : -EIO;
	for (size_t i = 0; i + 1 < (size_t)n / sizeof(v[0]) && v[i] != AT_NULL; i += 2) {
		if (v[i] == AT_RANDOM)
			return proc_mem_read(pid, v[i + 1], out, PROC_EXEC_RANDOM);
	}
	/* a zombie's auxv reads empty: it exited; else a kernel without AT_RANDOM (before 2.6.29) */
	return n ? -ENOENT : -ESRCH;
}
