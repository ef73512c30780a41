// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/output.h"

static char dir[] = "/tmp/heapbpf-output-XXXXXX";

static void make_dir(void)
{
	cr_assert_not_null(mkdtemp(dir));
}

static int remove_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	return type == FTW_DP ? rmdir(path) : unlink(path), 0;
}

/* Removes what the test left (its links and nested directories too) and the directory. */
static void remove_dir(void)
{
	nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(output, .init = make_dir, .fini = remove_dir);

static char *path_in_dir(const char *name)
{
	char *p;

	cr_assert_geq(asprintf(&p, "%s/%s", dir, name), 0);
	return p;
}

/* The entries of the test directory, sorted, joined by ','. */
static char *dir_listing(void)
{
	struct dirent **names;
	char *out = calloc(1, 1);
	size_t len = 0;
	int n;

	cr_assert_not_null(out);
	n = scandir(dir, &names, NULL, alphasort);
	cr_assert_geq(n, 0);
	for (int i = 0; i < n; i++) {
		const char *s = names[i]->d_name;

		if (strcmp(s, ".") && strcmp(s, "..")) {
			out = realloc(out, len + strlen(s) + 2);
			cr_assert_not_null(out);
			len += sprintf(out + len, "%s%s", len ? "," : "", s);
		}
		free(names[i]);
	}
	free(names);
	return out;
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char buf[4096];
	size_t n;

	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	return strdup(buf);
}

static void assert_listing(const char *want)
{
	char *got = dir_listing();

	cr_assert_str_eq(got, want);
	free(got);
}

static void assert_content(const char *path, const char *want)
{
	char *got = slurp(path);

	cr_assert_str_eq(got, want);
	free(got);
}

Test(output, buffer_written_with_mode_0600)
{
	char *path = path_in_dir("profile.pb.gz");
	struct stat st;
	mode_t old = umask(0);

	/* the owner's alone by default, even under a umask that would allow more */
	cr_assert_eq(output_write_buffer(path, "hello\n", 6), 0);
	umask(old);
	assert_content(path, "hello\n");
	cr_assert_eq(stat(path, &st), 0);
	cr_assert(S_ISREG(st.st_mode));
	cr_assert_eq(st.st_mode & 07777, 0600);
	cr_assert_eq(st.st_size, 6);
	assert_listing("profile.pb.gz");
	free(path);
}

Test(output, empty_buffer)
{
	char *path = path_in_dir("empty");
	struct stat st;

	cr_assert_eq(output_write_buffer(path, NULL, 0), 0);
	cr_assert_eq(stat(path, &st), 0);
	cr_assert_eq(st.st_size, 0);
	assert_listing("empty");
	free(path);
}

static int write_then_fail(FILE *f, void *arg)
{
	fputs((const char *)arg, f);
	fflush(f);
	return -EPIPE;
}

static int write_text(FILE *f, void *arg)
{
	return fputs((const char *)arg, f) < 0 ? -EIO : 0;
}

Test(output, failure_leaves_nothing)
{
	char *path = path_in_dir("out.folded");

	/* the partial data even reached the temp file before the failure */
	cr_assert_eq(output_write_atomic(path, write_then_fail, "partial"), -EPIPE);
	cr_assert_eq(access(path, F_OK), -1);
	assert_listing("");
	free(path);
}

Test(output, existing_file_replaced_only_on_success)
{
	char *path = path_in_dir("out.folded");

	cr_assert_eq(output_write_atomic(path, write_text, "old\n"), 0);
	assert_content(path, "old\n");

	cr_assert_eq(output_write_atomic(path, write_then_fail, "new\n"), -EPIPE);
	assert_content(path, "old\n");
	assert_listing("out.folded");

	cr_assert_eq(output_write_atomic(path, write_text, "new\n"), 0);
	assert_content(path, "new\n");
	assert_listing("out.folded");
	free(path);
}

Test(output, missing_directory)
{
	char *path = path_in_dir("no/such/dir/out.pb.gz");
	char *parent = path_in_dir("no");

	cr_assert_eq(output_write_buffer(path, "x", 1), -ENOENT);
	cr_assert_eq(access(parent, F_OK), -1);
	assert_listing("");
	free(parent);
	free(path);
}

Test(output, target_is_a_directory)
{
	char *path = path_in_dir("adir");

	cr_assert_eq(mkdir(path, 0755), 0);
	cr_assert_eq(output_write_buffer(path, "x", 1), -EISDIR);
	/* the directory is still there and nothing else is */
	assert_listing("adir");
	free(path);
}

/*
 * A pipe planted where the profile goes: refused at once, never written
 * (a reader would get the profile) and never waited on (with no reader,
 * open() blocked heapbpf forever, signals ignored, its lock held).
 */
Test(output, pipe_is_refused_without_blocking)
{
	char *path = path_in_dir("fifo");
	char got[16];
	struct stat st;
	int rfd;

	cr_assert_eq(mkfifo(path, 0644), 0);
	/* no reader: the open that blocked forever */
	cr_assert_eq(output_write_atomic(path, write_text, "through\n"), -OUTPUT_ESPECIAL);
	/* a reader: still nothing reaches it */
	rfd = open(path, O_RDONLY | O_NONBLOCK);
	cr_assert_geq(rfd, 0);
	cr_assert_eq(output_write_atomic(path, write_text, "through\n"), -OUTPUT_ESPECIAL);
	cr_assert_eq(read(rfd, got, sizeof(got)), 0, "the pipe got data");
	close(rfd);
	cr_assert_eq(stat(path, &st), 0);
	cr_assert(S_ISFIFO(st.st_mode), "the pipe was replaced");
	cr_assert_eq(st.st_mode & 07777, 0644, "its mode was changed");
	cr_assert(strstr(output_strerror(-OUTPUT_ESPECIAL), "not a regular file"));
	assert_listing("fifo");
	free(path);
}

/* A link planted where the profile goes: neither followed nor replaced; its target untouched. */
Test(output, symlink_is_refused_and_its_target_untouched)
{
	char *target = path_in_dir("victim"), *link = path_in_dir("heap.pb.gz");
	struct stat st;
	int fd;

	fd = open(target, O_WRONLY | O_CREAT | O_EXCL, 0644);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, "precious\n", 9), 9);
	close(fd);
	cr_assert_eq(symlink(target, link), 0);
	cr_assert_eq(output_write_buffer(link, "profile", 7), -OUTPUT_ESYMLINK);
	assert_content(target, "precious\n");
	cr_assert_eq(stat(target, &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0644);
	cr_assert_eq(lstat(link, &st), 0);
	cr_assert(S_ISLNK(st.st_mode), "the link was replaced");
	/* a dangling link (to a file the link would create) is refused the same */
	cr_assert_eq(unlink(target), 0);
	cr_assert_eq(output_write_buffer(link, "profile", 7), -OUTPUT_ESYMLINK);
	cr_assert_eq(stat(target, &st), -1, "the link's target was created");
	assert_listing("heap.pb.gz");
	free(target);
	free(link);
}

/* A device (a link to one is refused as a link): refused; /dev/null alone is written. */
Test(output, devices_are_refused_but_dev_null)
{
	cr_assert_eq(output_write_buffer("/dev/zero", "x", 1), -OUTPUT_ESPECIAL);
	cr_assert_eq(output_write_buffer("/dev/null", "x", 1), 0);
	cr_assert_eq(output_write_atomic("/dev/null", write_text, "gone\n"), 0);
}

/* -o into a directory others can write: refused unless sticky, or unless insisted on. */
Test(output, shared_directory_is_refused_unless_sticky_or_allowed)
{
	char *path = path_in_dir("heap.pb.gz");

	cr_assert_eq(chmod(dir, 0777), 0);
	cr_assert_eq(output_write_buffer(path, "x", 1), -OUTPUT_ESHARED);
	assert_listing("");
	cr_assert(strstr(output_strerror(-OUTPUT_ESHARED), "--allow-shared-dir"));
	/* group-writable by a group not root's is other users too */
	cr_assert_eq(chown(dir, 0, 65534), 0);
	cr_assert_eq(chmod(dir, 0770), 0);
	cr_assert_eq(output_write_buffer(path, "x", 1), -OUTPUT_ESHARED);
	/* root's group: root's */
	cr_assert_eq(chown(dir, 0, 0), 0);
	cr_assert_eq(output_write_buffer(path, "x", 1), 0);
	/* sticky, as /tmp: others can no longer rename or remove heapbpf's files */
	cr_assert_eq(chmod(dir, 01777), 0);
	cr_assert_eq(output_write_buffer(path, "y", 1), 0);
	assert_content(path, "y");
	/* the operator insists */
	cr_assert_eq(chmod(dir, 0777), 0);
	output_allow_shared_dir(true);
	cr_assert_eq(output_write_buffer(path, "z", 1), 0);
	output_allow_shared_dir(false);
	assert_content(path, "z");
	cr_assert_eq(chmod(dir, 0700), 0);
	free(path);
}

/* heapbpf's own directories (spool, state): another user's is refused, sticky or not. */
Test(output, private_directory_must_be_ours_and_closed)
{
	int fd;

	fd = output_open_dir(dir, OUTPUT_DIR_PRIVATE);
	cr_assert_geq(fd, 0);
	close(fd);
	cr_assert_eq(chmod(dir, 01777), 0);
	cr_assert_eq(output_open_dir(dir, OUTPUT_DIR_PRIVATE), -OUTPUT_ESHARED);
	cr_assert_eq(chmod(dir, 0700), 0);
	cr_assert_eq(chown(dir, 65534, 65534), 0);
	cr_assert_eq(output_open_dir(dir, OUTPUT_DIR_PRIVATE), -OUTPUT_EOWNER);
	/* nor a profile: its owner may write there whatever the mode (chmod), sticky or not */
	cr_assert_eq(output_open_dir(dir, OUTPUT_DIR_FILES), -OUTPUT_EOWNER);
	cr_assert_eq(chmod(dir, 01755), 0);
	cr_assert_eq(output_open_dir(dir, OUTPUT_DIR_FILES), -OUTPUT_EOWNER);
	cr_assert_eq(chmod(dir, 0700), 0);
	cr_assert_eq(chown(dir, 0, 0), 0);
	cr_assert_eq(output_open_dir("/dev/null", OUTPUT_DIR_FILES), -OUTPUT_ENOTDIR);
}

/* mkdir dir/rel, owned by uid, of mode. */
static char *sub(const char *rel, uid_t uid, mode_t mode)
{
	char *p = path_in_dir(rel);

	cr_assert_eq(mkdir(p, 0700), 0, "%s: %s", p, strerror(errno));
	cr_assert_eq(chown(p, uid, uid), 0);
	cr_assert_eq(chmod(p, mode), 0);
	return p;
}

/* A symbolic link dir/rel to target, owned by uid. */
static char *link_as(const char *rel, const char *target, uid_t uid)
{
	char *p = path_in_dir(rel);

	cr_assert_eq(symlink(target, p), 0, "%s: %s", p, strerror(errno));
	cr_assert_eq(lchown(p, uid, uid), 0);
	return p;
}

static void assert_opens(const char *path, int want)
{
	int fd = output_open_dir(path, OUTPUT_DIR_FILES);

	if (want)
		cr_assert_eq(fd, want, "%s: %d, not %d", path, fd, want);
	else
		cr_assert_geq(fd, 0, "%s refused: %s", path, output_strerror(fd));
	if (fd >= 0)
		close(fd);
}

/*
 * The way to a directory, not only the directory: a part of the path in
 * another user's directory could be swapped for a link to anywhere, and a
 * link another user made in a shared (sticky) directory is not followed;
 * links root made are, relative or absolute; --allow-shared-dir insists.
 */
Test(output, the_way_to_a_directory_is_checked)
{
	char *theirs, *deep, *inner, *sticky, *path;
	char abs[512];

	cr_assert_eq(chmod(dir, 0755), 0);
	theirs = sub("theirs", 65534, 0755);
	deep = sub("theirs/deep", 0, 0755);
	/* deep is root's, but its parent is nobody's: they could swap it */
	assert_opens(deep, -OUTPUT_EPATH);
	inner = sub("real", 0, 0755);
	sticky = sub("sticky", 0, 01777);
	snprintf(abs, sizeof(abs), "%s/real", dir);
	/* in a sticky directory: nobody's link not followed, root's followed */
	path = link_as("sticky/theirs-link", abs, 65534);
	assert_opens(path, -OUTPUT_ELINKIN);
	free(path);
	path = link_as("sticky/roots-link", abs, 0);
	assert_opens(path, 0);
	free(path);
	/* root's links in root's directories: absolute, relative, through a chain */
	path = link_as("abs-link", abs, 0);
	assert_opens(path, 0);
	free(path);
	path = link_as("rel-link", "real", 0);
	assert_opens(path, 0);
	free(path);
	path = link_as("chain", "rel-link", 0);
	assert_opens(path, 0);
	free(path);
	/* a file on the way, and a loop of links */
	path = path_in_dir("real/file");
	cr_assert_eq(output_write_buffer(path, "x", 1), 0);
	free(path);
	path = path_in_dir("real/file/x");
	assert_opens(path, -OUTPUT_ENOTDIR);
	free(path);
	free(link_as("loop-a", "loop-b", 0));
	path = link_as("loop-b", "loop-a", 0);
	assert_opens(path, -ELOOP);
	free(path);
	/* the operator insists: the kernel's resolution, the last directory still checked */
	output_allow_shared_dir(true);
	path = link_as("sticky/theirs-link2", abs, 65534);
	assert_opens(path, 0);
	free(path);
	output_allow_shared_dir(false);
	cr_assert_eq(chmod(dir, 0700), 0);
	free(theirs);
	free(deep);
	free(inner);
	free(sticky);
}

/* A recording's file: a new one of ours renamed in at once, never another's truncated. */
Test(output, create_replacing_makes_a_new_file_of_ours)
{
	char *path = path_in_dir("rec.hbr"), *target = path_in_dir("victim");
	struct stat before, after;
	int fd;

	/* another user's file there, which they could read if it were reused */
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0666);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, "old", 3), 3);
	cr_assert_eq(fchown(fd, 65534, 65534), 0);
	close(fd);
	cr_assert_eq(stat(path, &before), 0);
	cr_assert_eq(output_create_replacing(path, 0600, &fd), 0);
	cr_assert_eq(write(fd, "new", 3), 3);
	close(fd);
	cr_assert_eq(stat(path, &after), 0);
	cr_assert_neq(after.st_ino, before.st_ino, "the old file was reused");
	cr_assert_eq(after.st_uid, geteuid());
	cr_assert_eq(after.st_mode & 07777, 0600);
	assert_content(path, "new");
	assert_listing("rec.hbr");
	/* a link: refused, its target not created */
	cr_assert_eq(unlink(path), 0);
	cr_assert_eq(symlink(target, path), 0);
	cr_assert_eq(output_create_replacing(path, 0600, &fd), -OUTPUT_ESYMLINK);
	cr_assert_eq(stat(target, &after), -1);
	free(path);
	free(target);
}

Test(output, write_error_from_the_file)
{
	char *path = path_in_dir("big");
	size_t n = 1 << 20;
	char *buf = calloc(n, 1);
	struct rlimit lim = { .rlim_cur = 4096, .rlim_max = RLIM_INFINITY };

	/*
	 * A file size limit makes the real write fail with EFBIG (the test
	 * runs in its own process, so the limit does not leak).
	 */
	cr_assert_not_null(buf);
	signal(SIGXFSZ, SIG_IGN);
	cr_assert_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
	cr_assert_eq(output_write_buffer(path, buf, n), -EFBIG);
	assert_listing("");

	/* under the limit the same path works */
	cr_assert_eq(output_write_buffer(path, buf, 1000), 0);
	assert_listing("big");
	free(buf);
	free(path);
}

Test(output, dash_is_stdout, .init = cr_redirect_stdout)
{
	cr_assert_eq(output_write_buffer("-", "to stdout\n", 10), 0);
	cr_assert_eq(output_write_atomic("-", write_text, "and more\n"), 0);
	cr_assert_stdout_eq_str("to stdout\nand more\n");
}

Test(output, dash_propagates_write_fn_error, .init = cr_redirect_stdout)
{
	cr_assert_eq(output_write_atomic("-", write_then_fail, "x"), -EPIPE);
}

Test(output, file_mode_is_exact_whatever_the_umask)
{
	char *path = path_in_dir("profile.pb.gz");
	struct stat st;
	mode_t old = umask(077);

	/* --file-mode 0644 under a umask that would take the group's and others' bits */
	output_set_file_mode(0644);
	cr_assert_eq(output_write_buffer(path, "a", 1), 0);
	cr_assert_eq(stat(path, &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0644);
	/* rewriting the file with another mode changes it (a new file is renamed over it) */
	output_set_file_mode(0640);
	cr_assert_eq(output_write_buffer(path, "b", 1), 0);
	cr_assert_eq(stat(path, &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0640);
	/* the spool's writer names its mode itself */
	cr_assert_eq(output_write_atomic_mode(path, 0600, write_text, "c"), 0);
	cr_assert_eq(stat(path, &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0600);
	output_set_file_mode(OUTPUT_DEFAULT_MODE);
	umask(old);
	assert_listing("profile.pb.gz");
	free(path);
}
