// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "util/output.h"

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

/* --allow-shared-dir: the operator insists on a directory other users can write */
static bool allow_shared_dir;

void output_allow_shared_dir(bool allow)
{
	allow_shared_dir = allow;
}

uid_t output_invoking_uid(void)
{
	const char *sudo = getenv("SUDO_UID");
	char *end;
	unsigned long v;

	/* root by sudo: the user who ran sudo is the one the operator speaks for */
	if (geteuid() == 0 && getuid() == 0 && sudo && sudo[0]) {
		errno = 0;
		v = strtoul(sudo, &end, 10);
		if (!errno && !*end && v < (uid_t)-1)
			return (uid_t)v;
	}
	return getuid();
}

const char *output_strerror(int rc)
{
	switch (-rc) {
	case OUTPUT_ESYMLINK:
		return "it is a symbolic link, and heapbpf writes through no link (name the file "
		       "itself)";
	case OUTPUT_ESPECIAL:
		return "it exists and is not a regular file (a device, pipe or socket); heapbpf "
		       "writes regular files only ('-' writes to stdout)";
	case OUTPUT_ESHARED:
		return "other users can write into the directory (and it has no sticky bit), so "
		       "they could swap or plant what heapbpf writes there; use a directory of "
		       "your own, or --allow-shared-dir to write there anyway";
	case OUTPUT_EOWNER:
		return "the directory belongs to another user, who could plant files in it; use "
		       "one owned by root or by you, or --allow-shared-dir to use it anyway";
	case OUTPUT_ENOTDIR:
		return "the directory part is not a directory";
	case OUTPUT_EPATH:
		return "a directory on its path belongs to another user or others can write it "
		       "(no sticky bit), so they could swap a part of the path for a link; use a "
		       "path of your own, or --allow-shared-dir to use it anyway";
	case OUTPUT_ELINKIN:
		return "a part of its path is a symbolic link another user made in a directory "
		       "others can write, and heapbpf follows no such link; name the directory "
		       "itself, or --allow-shared-dir to follow it anyway";
	default:
		return strerror(-rc);
	}
}

/* The directory part of @path ("." for a bare name) and its last component. */
static int split_path(const char *path, char **dir, const char **base)
{
	const char *slash = strrchr(path, '/');

	if (!path[0])
		return -ENOENT;
	if (!slash) {
		*dir = strdup(".");
		*base = path;
	} else {
		*dir = slash == path ? strdup("/") : strndup(path, slash - path);
		*base = slash + 1;
	}
	if (!*dir)
		return -ENOMEM;
	/* "dir/", ".", "..": a directory, never a file to write */
	if (!**base || strcmp(*base, ".") == 0 || strcmp(*base, "..") == 0) {
		free(*dir);
		*dir = NULL;
		return -EISDIR;
	}
	return 0;
}

/* root, heapbpf's own user or the invoking user: whose files and links heapbpf trusts */
static bool trusted_uid(uid_t uid)
{
	return uid == 0 || uid == geteuid() || uid == output_invoking_uid();
}

bool output_trusted_uid(uid_t uid)
{
	return trusted_uid(uid);
}

/* A group of root's is root's; any other group, or everyone: other users. */
static bool others_can_write(const struct stat *st)
{
	return (st->st_mode & S_IWOTH) || ((st->st_mode & S_IWGRP) && st->st_gid != 0);
}

int output_dir_check(int dfd, enum output_dir_kind kind)
{
	struct stat st;
	bool others_write;

	if (fstat(dfd, &st))
		return neg_errno();
	if (!S_ISDIR(st.st_mode))
		return -OUTPUT_ENOTDIR;
	if (allow_shared_dir)
		return 0;
	/*
	 * Another user's directory is theirs to write, whatever its mode says
	 * (they may chmod it), and a sticky bit does not bind its owner: refused
	 * for the spool (whose files are pushed with the operator's credentials)
	 * and for output alike.
	 */
	if (!trusted_uid(st.st_uid))
		return -OUTPUT_EOWNER;
	others_write = others_can_write(&st);
	if (kind == OUTPUT_DIR_PRIVATE)
		return others_write ? -OUTPUT_ESHARED : 0;
	/* a sticky directory (/tmp) lets no one else rename or remove heapbpf's files */
	if (others_write && !(st.st_mode & S_ISVTX))
		return -OUTPUT_ESHARED;
	return 0;
}

/* Symbolic links followed on the way to one directory at most (the kernel's own limit). */
#define MAX_HOPS 40

/*
 * The next directory of a walk: name opened in the directory at, which must
 * pass output_dir_check() (no other user could swap name), not through a
 * link; a link is followed (its target walked in turn, from "/" or from at)
 * only when no other user could have made it: at is writable by no one
 * else, or the link is root's, heapbpf's user's or the invoker's (the
 * kernel's protected_symlinks rule). 0 and *next, or a negative code.
 */
static int walk_step(int at, const char *name, int *hops, int *next);

/* path walked from the directory fd at, each directory on the way checked; *out the last. */
static int walk(int at, const char *path, int *hops, int *out)
{
	char *copy = strdup(path), *save = NULL;
	int cur = dup(at), err = 0;

	if (!copy || cur < 0) {
		free(copy);
		if (cur >= 0)
			close(cur);
		return -ENOMEM;
	}
	for (char *c = strtok_r(copy, "/", &save); c && !err; c = strtok_r(NULL, "/", &save)) {
		int next = -1;

		if (!strcmp(c, "."))
			continue;
		err = walk_step(cur, c, hops, &next);
		close(cur);
		cur = next;
	}
	free(copy);
	if (err)
		return err;
	*out = cur;
	return 0;
}

static int walk_step(int at, const char *name, int *hops, int *next)
{
	char target[PATH_MAX];
	struct stat st, dir;
	ssize_t n;
	int fd, err;

	/* a directory on the way that another user may write: they could swap what follows */
	err = output_dir_check(at, OUTPUT_DIR_FILES);
	if (err)
		return err == -OUTPUT_ENOTDIR ? err : -OUTPUT_EPATH;
	fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0) {
		*next = fd;
		return 0;
	}
	if ((errno != ELOOP && errno != ENOTDIR) || fstatat(at, name, &st, AT_SYMLINK_NOFOLLOW))
		return errno == ENOTDIR ? -OUTPUT_ENOTDIR : neg_errno();
	if (!S_ISLNK(st.st_mode))
		return -OUTPUT_ENOTDIR;
	if (fstat(at, &dir))
		return neg_errno();
	if (others_can_write(&dir) && !trusted_uid(st.st_uid))
		return -OUTPUT_ELINKIN;
	n = readlinkat(at, name, target, sizeof(target) - 1);
	if (n <= 0)
		return n ? neg_errno() : -ENOENT;
	target[n] = '\0';
	if (++*hops > MAX_HOPS)
		return -ELOOP;
	if (target[0] != '/')
		return walk(at, target, hops, next);
	fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return neg_errno();
	err = walk(fd, target, hops, next);
	close(fd);
	return err;
}

int output_open_dir(const char *dir, enum output_dir_kind kind)
{
	int dfd, start, hops = 0, err;

	/* insisted on: the path as the kernel resolves it */
	if (allow_shared_dir) {
		dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dfd < 0)
			return errno == ENOTDIR ? -OUTPUT_ENOTDIR : neg_errno();
		err = output_dir_check(dfd, kind);
		if (err)
			close(dfd);
		return err ? err : dfd;
	}
	/*
	 * Every directory on the way is checked as it is opened, links followed
	 * only where no other user could have made them: a final directory that
	 * passes its check says nothing of a path through another user's
	 * directory, where a part could be a link to anywhere.
	 */
	start = open(dir[0] == '/' ? "/" : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (start < 0)
		return neg_errno();
	err = walk(start, dir, &hops, &dfd);
	close(start);
	if (err)
		return err;
	err = output_dir_check(dfd, kind);
	if (err) {
		close(dfd);
		return err;
	}
	return dfd;
}

/* /dev/null: the one non-regular file heapbpf writes, as writing to it can harm nothing. */
static bool is_dev_null(const struct stat *st)
{
	return S_ISCHR(st->st_mode) && major(st->st_rdev) == 1 && minor(st->st_rdev) == 3;
}

/*
 * What is at @base in @dfd, not followed: 0 (nothing there, or a regular
 * file to be replaced), 1 (/dev/null, written in place) or the refusal.
 */
static int existing(int dfd, const char *base)
{
	struct stat st;

	if (fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW))
		return errno == ENOENT ? 0 : neg_errno();
	if (S_ISLNK(st.st_mode))
		return -OUTPUT_ESYMLINK;
	if (S_ISDIR(st.st_mode))
		return -EISDIR;
	if (S_ISREG(st.st_mode))
		return 0;
	return is_dev_null(&st) ? 1 : -OUTPUT_ESPECIAL;
}

/* /dev/null, opened without following or blocking, and checked again once open. */
static int open_dev_null(int dfd, const char *base)
{
	int fd = openat(dfd, base, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;

	if (fd < 0)
		return errno == ELOOP ? -OUTPUT_ESYMLINK : neg_errno();
	if (fstat(fd, &st) || !is_dev_null(&st)) {
		close(fd);
		return -OUTPUT_ESPECIAL;
	}
	return fd;
}

static int write_dev_null(int dfd, const char *base, int (*write_fn)(FILE *f, void *arg), void *arg)
{
	int fd = open_dev_null(dfd, base);
	FILE *f;
	int err;

	if (fd < 0)
		return fd;
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

/*
 * A new, empty file of ours in @dfd, "BASE.tmp.XXXXXX" (XXXXXX random), made
 * exclusively and without following: nothing planted there is opened.
 */
static int create_temp(int dfd, const char *base, char **tmp)
{
	static const char chars[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
	unsigned char r[6];

	for (int tries = 0; tries < 100; tries++) {
		int fd;

		if (getrandom(r, sizeof(r), 0) != sizeof(r))
			return neg_errno();
		if (asprintf(tmp, "%s.tmp.%c%c%c%c%c%c", base, chars[r[0] % 62], chars[r[1] % 62],
			     chars[r[2] % 62], chars[r[3] % 62], chars[r[4] % 62],
			     chars[r[5] % 62]) < 0)
			return -ENOMEM;
		fd = openat(dfd, *tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd >= 0)
			return fd;
		free(*tmp);
		*tmp = NULL;
		if (errno != EEXIST)
			return neg_errno();
	}
	return -EEXIST;
}

int output_create_replacing(const char *path, mode_t mode, int *fd_out)
{
	const char *base;
	char *dir = NULL, *tmp = NULL;
	int dfd, fd, err;

	err = split_path(path, &dir, &base);
	if (err)
		return err;
	dfd = output_open_dir(dir, OUTPUT_DIR_FILES);
	free(dir);
	if (dfd < 0)
		return dfd;
	err = existing(dfd, base);
	if (err == 1) {
		fd = open_dev_null(dfd, base);
		close(dfd);
		if (fd < 0)
			return fd;
		*fd_out = fd;
		return 0;
	}
	if (err) {
		close(dfd);
		return err;
	}
	fd = create_temp(dfd, base, &tmp);
	if (fd < 0) {
		close(dfd);
		return fd;
	}
	/* exactly @mode, whatever the umask: on our own new file, never on another's */
	if (fchmod(fd, mode) || renameat(dfd, tmp, dfd, base)) {
		err = neg_errno();
		unlinkat(dfd, tmp, 0);
		close(fd);
		close(dfd);
		free(tmp);
		return err;
	}
	fsync(dfd);
	close(dfd);
	free(tmp);
	*fd_out = fd;
	return 0;
}

/*
 * A complete temporary file of ours beside @base: created by create_temp(),
 * written through @write_fn, flushed, synced when @sync and made exactly
 * @mode. Its name in *tmp (freed by the caller), or the temporary removed
 * and a negative errno.
 */
static int write_temp(int dfd, const char *base, mode_t mode, int (*write_fn)(FILE *f, void *arg),
		      void *arg, bool sync, char **tmp)
{
	FILE *f = NULL;
	int fd, err;

	*tmp = NULL;
	fd = create_temp(dfd, base, tmp);
	if (fd < 0)
		return fd;
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
	if (sync && fsync(fd)) {
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
	return 0;

fail:
	if (f)
		fclose(f);
	if (*tmp)
		unlinkat(dfd, *tmp, 0);
	free(*tmp);
	*tmp = NULL;
	return err;
}

static int replace_in(int dfd, const char *base, mode_t mode, int (*write_fn)(FILE *f, void *arg),
		      void *arg, bool sync)
{
	char *tmp = NULL;
	int err;

	err = existing(dfd, base);
	if (err == 1)
		return write_dev_null(dfd, base, write_fn, arg);
	if (err)
		return err;
	err = write_temp(dfd, base, mode, write_fn, arg, sync, &tmp);
	if (err || !tmp)
		return err ?: -EIO;
	/* replaces what is at @base, a planted file included, and follows nothing */
	if (renameat(dfd, tmp, dfd, base)) {
		err = neg_errno();
		unlinkat(dfd, tmp, 0);
		free(tmp);
		return err;
	}
	/* makes the rename itself durable; best effort: the new file is in place */
	if (sync)
		fsync(dfd);
	free(tmp);
	return 0;
}

int output_write_atomic_in(int dfd, const char *base, mode_t mode,
			   int (*write_fn)(FILE *f, void *arg), void *arg)
{
	return replace_in(dfd, base, mode, write_fn, arg, true);
}

int output_write_state_in(int dfd, const char *base, mode_t mode,
			  int (*write_fn)(FILE *f, void *arg), void *arg)
{
	return replace_in(dfd, base, mode, write_fn, arg, false);
}

/*
 * @tmp renamed to @name only if nothing is there: 0, -EEXIST or another
 * negative errno. A file system without RENAME_NOREPLACE (EINVAL) gets a
 * hard link, which never replaces either, and the temporary's name unlinked.
 */
static int rename_new(int dfd, const char *tmp, const char *name)
{
	if (!renameat2(dfd, tmp, dfd, name, RENAME_NOREPLACE))
		return 0;
	if (errno != EINVAL && errno != ENOSYS)
		return neg_errno();
	if (linkat(dfd, tmp, dfd, name, 0))
		return neg_errno();
	unlinkat(dfd, tmp, 0);
	return 0;
}

int output_write_new_in(int dfd, mode_t mode, output_name_fn *name_fn, void *name_arg,
			unsigned int *seq, char *name, size_t len,
			int (*write_fn)(FILE *f, void *arg), void *arg)
{
	unsigned int last = *seq + OUTPUT_NEW_TRIES - 1;
	char *tmp = NULL;
	int err;

	err = name_fn(*seq, name, len, name_arg);
	if (err)
		return err;
	err = write_temp(dfd, name, mode, write_fn, arg, true, &tmp);
	if (err || !tmp)
		return err ?: -EIO;
	/* what holds a name, whatever it is (a link, a pipe), keeps it; the next is tried */
	for (;;) {
		err = rename_new(dfd, tmp, name);
		if (err != -EEXIST || *seq == last)
			break;
		++*seq;
		err = name_fn(*seq, name, len, name_arg);
		if (err)
			break;
	}
	if (err) {
		unlinkat(dfd, tmp, 0);
		free(tmp);
		return err;
	}
	fsync(dfd);
	free(tmp);
	return 0;
}

int output_check_path(const char *path)
{
	const char *base;
	char *dir = NULL;
	int dfd, err;

	if (strcmp(path, "-") == 0)
		return 0;
	err = split_path(path, &dir, &base);
	if (err)
		return err;
	dfd = output_open_dir(dir, OUTPUT_DIR_FILES);
	free(dir);
	if (dfd < 0)
		return dfd;
	err = existing(dfd, base);
	close(dfd);
	return err < 0 ? err : 0;
}

int output_write_atomic_mode(const char *path, mode_t mode, int (*write_fn)(FILE *f, void *arg),
			     void *arg)
{
	const char *base;
	char *dir = NULL;
	int dfd, err;

	if (strcmp(path, "-") == 0)
		return write_stdout(write_fn, arg);
	err = split_path(path, &dir, &base);
	if (err)
		return err;
	dfd = output_open_dir(dir, OUTPUT_DIR_FILES);
	free(dir);
	if (dfd < 0)
		return dfd;
	err = output_write_atomic_in(dfd, base, mode, write_fn, arg);
	close(dfd);
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
