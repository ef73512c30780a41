// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/errmsg.h"
#include "util/output.h"
#include "sampling/runs.h"

struct runs_reg {
	int dfd, fd;
	char name[32];
};

/* A file of root's (heapbpf's user) and a regular one: else not ours to read. */
static bool owned_regular(int fd)
{
	struct stat st;

	return !fstat(fd, &st) && S_ISREG(st.st_mode) && st.st_uid == geteuid();
}

struct runs_reg *runs_register(const char *dir, const char *mode, const char *output)
{
	struct runs_reg *r = calloc(1, sizeof(*r));
	char text[2048], since[32];
	time_t now = time(NULL);
	struct tm tm;
	int n;

	if (!r)
		return NULL;
	r->fd = r->dfd = -1;
	if (mkdir(dir, 0700) && errno != EEXIST)
		goto fail;
	/* root's own directory, as the locks' */
	r->dfd = output_open_dir(dir, OUTPUT_DIR_PRIVATE);
	if (r->dfd < 0)
		goto fail;
	snprintf(r->name, sizeof(r->name), "%d.run", getpid());
	/* a file an earlier process of this pid left is its own no more: taken over */
	r->fd = openat(r->dfd, r->name, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
		       0600);
	if (r->fd < 0 || !owned_regular(r->fd) || flock(r->fd, LOCK_EX | LOCK_NB))
		goto fail;
	gmtime_r(&now, &tm);
	strftime(since, sizeof(since), "%Y-%m-%dT%H:%M:%SZ", &tm);
	n = snprintf(text, sizeof(text), "mode=%s\nsince=%s\noutput=%s\n", mode, since,
		     output ? output : "");
	if (ftruncate(r->fd, 0) || pwrite(r->fd, text, (size_t)n, 0) != n)
		goto fail;
	return r;
fail:
	hb_warn("cannot register this run under %s (heapbpf status will not list it): %s", dir,
		strerror(errno ? errno : EIO));
	runs_unregister(r);
	return NULL;
}

void runs_unregister(struct runs_reg *r)
{
	if (!r)
		return;
	if (r->fd >= 0) {
		/* removed while still locked: a status that opened it sees it gone or held */
		unlinkat(r->dfd, r->name, 0);
		close(r->fd);
	}
	if (r->dfd >= 0)
		close(r->dfd);
	free(r);
}

/* One run's file, named name in dfd: its entry when it is alive; else removed. */
static bool read_run(int dfd, const char *name, pid_t pid, struct runs_entry *e)
{
	char text[2048], *line, *save = NULL;
	int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	ssize_t got;

	if (fd < 0)
		return false;
	if (!owned_regular(fd)) {
		close(fd);
		return false;
	}
	/* the lock free: the run is gone; its file goes (under the lock, so no run loses its own) */
	if (!flock(fd, LOCK_EX | LOCK_NB)) {
		unlinkat(dfd, name, 0);
		close(fd);
		return false;
	}
	got = pread(fd, text, sizeof(text) - 1, 0);
	close(fd);
	memset(e, 0, sizeof(*e));
	e->pid = pid;
	text[got > 0 ? got : 0] = '\0';
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (!strncmp(line, "mode=", 5))
			snprintf(e->mode, sizeof(e->mode), "%s", line + 5);
		else if (!strncmp(line, "since=", 6))
			snprintf(e->since, sizeof(e->since), "%s", line + 6);
		else if (!strncmp(line, "output=", 7))
			snprintf(e->output, sizeof(e->output), "%s", line + 7);
	}
	return true;
}

/*
 * A run's socket (serve.h) left behind by a run killed with -9: one is made
 * only once its run's file is locked, so a socket whose run file is gone or
 * unlocked is no live run's. Root's sockets only; removed.
 */
static void sweep_socket(int dfd, const char *name, pid_t pid)
{
	char run[32];
	struct stat st;
	int fd;

	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISSOCK(st.st_mode) ||
	    st.st_uid != geteuid())
		return;
	snprintf(run, sizeof(run), "%d.run", pid);
	fd = openat(dfd, run, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd >= 0 && (!owned_regular(fd) || flock(fd, LOCK_SH | LOCK_NB))) {
		/* locked: a live run's */
		close(fd);
		return;
	}
	unlinkat(dfd, name, 0);
	if (fd >= 0)
		close(fd);
}

/* The lock file name in dfd when a run holds it: that run's pid (-1: not said yet); else 0. */
static pid_t lock_holder(int dfd, const char *name)
{
	char text[32];
	ssize_t got;
	pid_t holder = 0;
	int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);

	if (fd < 0)
		return 0;
	if (owned_regular(fd) && flock(fd, LOCK_SH | LOCK_NB) && errno == EWOULDBLOCK) {
		got = pread(fd, text, sizeof(text) - 1, 0);
		text[got > 0 ? got : 0] = '\0';
		holder = (pid_t)atoi(text);
		/* held, and its holder has not written its pid yet */
		if (holder <= 0)
			holder = -1;
	}
	close(fd);
	return holder;
}

pid_t runs_lock_holder_at(int dfd, pid_t target)
{
	char name[32];

	snprintf(name, sizeof(name), "%d.lock", target);
	return lock_holder(dfd, name);
}

pid_t runs_lock_holder(const char *dir, pid_t target)
{
	pid_t holder;
	int dfd = output_open_dir(dir, OUTPUT_DIR_PRIVATE);

	if (dfd < 0)
		return 0;
	holder = runs_lock_holder_at(dfd, target);
	close(dfd);
	return holder;
}

static int by_since(const void *a, const void *b)
{
	const struct runs_entry *x = a, *y = b;
	int c = strcmp(x->since, y->since);

	return c ? c : (x->pid > y->pid) - (x->pid < y->pid);
}

int runs_list(const char *dir, struct runs_entry **out, size_t *n)
{
	struct runs_entry *v = NULL;
	size_t cap = 0;
	struct dirent *de;
	int dfd, fd;
	DIR *d;

	*out = NULL;
	*n = 0;
	dfd = output_open_dir(dir, OUTPUT_DIR_PRIVATE);
	if (dfd == -ENOENT)
		return 0;
	if (dfd < 0)
		return dfd;
	fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		close(dfd);
		return -errno;
	}
	while ((de = readdir(d))) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);

		if (pid <= 0 || strcmp(end, ".run") != 0)
			continue;
		if (*n == cap) {
			struct runs_entry *nv = realloc(v, (cap = cap ? 2 * cap : 8) * sizeof(*v));

			if (!nv) {
				free(v);
				closedir(d);
				close(dfd);
				return -ENOMEM;
			}
			v = nv;
		}
		if (read_run(dfd, de->d_name, (pid_t)pid, &v[*n]))
			(*n)++;
	}
	/* each run's targets: the locks held that name it; the sockets of runs gone */
	rewinddir(d);
	while ((de = readdir(d))) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);
		pid_t holder;

		if (pid > 0 && strcmp(end, ".sock") == 0)
			sweep_socket(dfd, de->d_name, (pid_t)pid);
		if (pid <= 0 || strcmp(end, ".lock") != 0 ||
		    !(holder = lock_holder(dfd, de->d_name)))
			continue;
		for (size_t i = 0; i < *n; i++) {
			struct runs_entry *e = &v[i];

			if (e->pid == holder &&
			    e->ntargets < sizeof(e->targets) / sizeof(e->targets[0]))
				e->targets[e->ntargets++] = (pid_t)pid;
		}
	}
	closedir(d);
	close(dfd);
	if (*n)
		qsort(v, *n, sizeof(*v), by_since);
	*out = v;
	return 0;
}

int runs_holder_of(const char *dir, pid_t target, struct runs_entry *e)
{
	struct runs_entry *v = NULL;
	size_t n = 0;
	int rc = runs_list(dir, &v, &n);

	for (size_t i = 0; !rc && i < n; i++) {
		for (size_t j = 0; j < v[i].ntargets; j++) {
			if (v[i].targets[j] == target) {
				*e = v[i];
				free(v);
				return 0;
			}
		}
	}
	free(v);
	return rc ? rc : -ENOENT;
}
