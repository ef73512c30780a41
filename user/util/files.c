// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/files.h"

/*
 * "/proc/PID/root/REST": 1 with PID's root directory opened (O_PATH) in
 * *dirfd, *rest at REST ("." for the root itself) and the length of
 * "/proc/PID/root" in *plen; 0 for any other path;
 * negative errno when PID's root cannot be opened (the process is gone).
 */
static int process_root(const char *path, int *dirfd, const char **rest, size_t *plen)
{
	const char *p = path + strlen("/proc/");
	char dir[64];
	size_t n;

	if (strncmp(path, "/proc/", strlen("/proc/")) != 0)
		return 0;
	n = strspn(p, "0123456789");
	if (!n || n > 10 || strncmp(p + n, "/root", 5) != 0 || (p[n + 5] && p[n + 5] != '/'))
		return 0;
	snprintf(dir, sizeof(dir), "/proc/%.*s/root", (int)n, p);
	*plen = strlen("/proc/") + n + strlen("/root");
	*dirfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (*dirfd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	for (*rest = p + n + 5; **rest == '/'; (*rest)++)
		;
	if (!**rest)
		*rest = ".";
	return 1;
}

/* rest opened under dirfd as if dirfd were the root: links and ".." never leave it. */
static int open_in_root(int dirfd, const char *rest, int flags)
{
	struct open_how how = {
		.flags = (uint64_t)flags | O_CLOEXEC,
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
	};
	long fd = syscall(SYS_openat2, dirfd, rest, &how, sizeof(how));

	return fd < 0 ? -errno : (int)fd;
}

int hb_open_path(const char *path, int flags)
{
	const char *rest = NULL;
	size_t plen = 0;
	int dirfd = -1, fd, rc = process_root(path, &dirfd, &rest, &plen);

	if (rc < 0)
		return rc;
	if (!rc) {
		fd = open(path, flags | O_CLOEXEC);
		return fd < 0 ? -errno : fd;
	}
	fd = open_in_root(dirfd, rest, flags);
	close(dirfd);
	return fd;
}

/* The regular file behind an O_PATH descriptor, opened for reading without blocking. */
static int reopen_regular(int pathfd)
{
	char self[64];
	struct stat st;
	int fd;

	if (fstat(pathfd, &st))
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -HB_ENOTREG;
	snprintf(self, sizeof(self), "/proc/self/fd/%d", pathfd);
	fd = open(self, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	return fd < 0 ? -errno : fd;
}

int files_open_regular_ro(const char *path)
{
	struct stat st;
	int fd, err, pathfd;

	/* an O_PATH descriptor opens nothing: what it is is checked before the file is opened */
	pathfd = hb_open_path(path, O_PATH);
	if (pathfd < 0)
		return pathfd;
	fd = reopen_regular(pathfd);
	close(pathfd);
	if (fd < 0)
		return fd;
	/* replaced since: the descriptor's own file is checked */
	if (fstat(fd, &st)) {
		err = -errno;
		close(fd);
		return err;
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return -HB_ENOTREG;
	}
	/* reads of a regular file never block; the flag goes for whoever reads it later */
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)) {
		err = -errno;
		close(fd);
		return err;
	}
	return fd;
}

ssize_t hb_readlink(const char *path, char *buf, size_t len)
{
	const char *slash = strrchr(path, '/');
	char dir[4096];
	ssize_t n;
	int dirfd;

	if (!slash || slash == path || (size_t)(slash - path) >= sizeof(dir) || len < 2)
		return -EINVAL;
	snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	dirfd = hb_open_path(dir, O_PATH | O_DIRECTORY);
	if (dirfd < 0)
		return dirfd;
	n = readlinkat(dirfd, slash + 1, buf, len - 1);
	n = n < 0 ? -errno : n;
	close(dirfd);
	if (n >= 0)
		buf[n] = '\0';
	return n;
}

/* The path of an open descriptor as heapbpf's root sees it, or NULL. */
static char *fd_path(int fd)
{
	char self[64], buf[4096];
	ssize_t n;

	snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
	n = readlink(self, buf, sizeof(buf) - 1);
	if (n <= 0 || (size_t)n >= sizeof(buf) - 1 || buf[0] != '/')
		return NULL;
	buf[n] = '\0';
	return strdup(buf);
}

char *hb_realpath(const char *path)
{
	char link[64], root[4096], *real, *out = NULL;
	const char *rest = NULL, *inside;
	size_t plen = 0, rl;
	int dirfd = -1, fd, rc = process_root(path, &dirfd, &rest, &plen);
	ssize_t n;

	if (rc < 0)
		return NULL;
	if (!rc)
		return realpath(path, NULL);
	fd = open_in_root(dirfd, rest, O_PATH);
	close(dirfd);
	if (fd < 0)
		return NULL;
	real = fd_path(fd);
	close(fd);
	/* the process's root as heapbpf sees it ("/" when it is ours) */
	snprintf(link, sizeof(link), "%.*s", (int)plen, path);
	n = readlink(link, root, sizeof(root) - 1);
	if (!real || n <= 0 || (size_t)n >= sizeof(root) - 1) {
		free(real);
		return NULL;
	}
	root[n] = '\0';
	rl = strcmp(root, "/") == 0 ? 0 : (size_t)n;
	inside = real + rl;
	/* what it leads to, named again through the process's root; nothing if outside it */
	if (strncmp(real, root, rl) == 0 && (inside[0] == '/' || !inside[0]) &&
	    asprintf(&out, "%s%s", link, inside[0] ? inside : "/") < 0)
		out = NULL;
	free(real);
	return out;
}

const char *files_open_regular_strerror(int err)
{
	return err == -HB_ENOTREG ? "not a regular file" : strerror(-err);
}
