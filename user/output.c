// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "output.h"

/* --file-mode: every profile, snapshot and recording heapbpf writes */
static mode_t file_mode = OUTPUT_DEFAULT_MODE;

void output_set_file_mode(mode_t mode)
{
	file_mode = mode;
}

mode_t output_file_mode(void)
{
	return file_mode;
}

/* The errno of the call that just failed, never 0 (which would read as success). */
static int neg_errno(void)
{
	return errno ? -errno : -EIO;
}

/* write_fn's output into f, flushed, and any error on the way (the stream's included). */
static int write_flushed(FILE *f, int (*write_fn)(FILE *f, void *arg), void *arg)
{
	int err = write_fn(f, arg);

	if (err)
		return err;
	errno = 0;
	if (fflush(f))
		return neg_errno();
	return ferror(f) ? -EIO : 0;
}

static int write_stdout(int (*write_fn)(FILE *f, void *arg), void *arg)
{
	/* no fsync: stdout is often a pipe or a terminal, where it fails */
	return write_flushed(stdout, write_fn, arg);
}

/*
 * Makes the rename itself durable. Best effort: by now the new file is in
 * place, and failing here would report an error for a write that happened.
 */
static void sync_parent_dir(const char *path)
{
	char *copy = strdup(path);
	int fd;

	if (!copy)
		return;
	fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		fsync(fd);
		close(fd);
	}
	free(copy);
}

bool output_is_regular_fd(int fd)
{
	struct stat st;

	return fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
}

/*
 * An output that exists and is not a regular file (/dev/null, a pipe, a
 * terminal): written in place, never renamed over or changed in mode.
 */
static int write_special(const char *path, int (*write_fn)(FILE *f, void *arg), void *arg)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	FILE *f;
	int err;

	if (fd < 0)
		return neg_errno();
	f = fdopen(fd, "w");
	if (!f) {
		err = neg_errno();
		close(fd);
		return err;
	}
	err = write_flushed(f, write_fn, arg);
	if (fclose(f) && !err)
		err = neg_errno();
	return err;
}

int output_write_atomic_mode(const char *path, mode_t mode, int (*write_fn)(FILE *f, void *arg),
			     void *arg)
{
	char *tmp = NULL;
	FILE *f = NULL;
	struct stat st;
	int fd, err;

	if (strcmp(path, "-") == 0)
		return write_stdout(write_fn, arg);
	if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
		return S_ISDIR(st.st_mode) ? -EISDIR : write_special(path, write_fn, arg);

	/* same directory as @path, so that rename() stays within one file system */
	if (asprintf(&tmp, "%s.tmp.XXXXXX", path) < 0)
		return -ENOMEM;
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		err = neg_errno();
		free(tmp);
		return err;
	}
	f = fdopen(fd, "w");
	if (!f) {
		err = neg_errno();
		close(fd);
		goto fail;
	}

	err = write_flushed(f, write_fn, arg);
	if (err)
		goto fail;
	/* the data must be on disk before the rename makes it visible */
	if (fsync(fd)) {
		err = neg_errno();
		goto fail;
	}
	/* exactly @mode, whatever the umask: profiles hold the target's names and addresses */
	if (fchmod(fd, mode)) {
		err = neg_errno();
		goto fail;
	}
	/* close can report a deferred write error (e.g. on NFS) */
	err = fclose(f);
	f = NULL;
	if (err) {
		err = neg_errno();
		goto fail;
	}
	if (rename(tmp, path)) {
		err = neg_errno();
		goto fail;
	}
	sync_parent_dir(path);
	free(tmp);
	return 0;

fail:
	if (f)
		fclose(f);
	unlink(tmp);
	free(tmp);
	return err;
}

int output_write_atomic(const char *path, int (*write_fn)(FILE *f, void *arg), void *arg)
{
	return output_write_atomic_mode(path, file_mode, write_fn, arg);
}

struct buffer {
	const void *buf;
	size_t len;
};

static int write_buffer(FILE *f, void *arg)
{
	const struct buffer *b = arg;

	errno = 0;
	if (b->len && fwrite(b->buf, 1, b->len, f) != b->len)
		return neg_errno();
	return 0;
}

int output_write_buffer(const char *path, const void *buf, size_t len)
{
	struct buffer b = { .buf = buf, .len = len };

	return output_write_atomic(path, write_buffer, &b);
}
