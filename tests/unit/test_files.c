// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * What reaches a terminal and what is read from a path others name: the one
 * sanitiser of names (hb_clean) and files_open_regular_ro, which neither blocks on
 * a FIFO nor reads a device or a directory.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/errmsg.h"
#include "util/files.h"
#include "harness.h"

TestSuite(clean);
TestSuite(files, .fini = hb_tmpdir_cleanup, .timeout = 30);

static void no_controls(const char *s)
{
	for (const char *p = s; *p; p++)
		cr_assert(*p >= 0x20 && *p < 0x7f, "byte 0x%02x in %s", (unsigned char)*p, s);
}

Test(clean, escapes_are_shown_never_obeyed)
{
	char buf[256];

	cr_assert_str_eq(hb_clean(buf, sizeof(buf), "\x1b]0;pwned\x07\x1b[2J"),
			 "\\x1b]0;pwned\\x07\\x1b[2J");
	/* CSI as one C1 byte, other C0 and C1 controls, DEL, newlines */
	cr_assert_str_eq(hb_clean(buf, sizeof(buf),
				  "a\x9b"
				  "2Jb\x01\x7f\x85\n\r\tc"),
			 "a\\x9b2Jb\\x01\\x7f\\x85\\x0a\\x0d\\x09c");
	/* bytes of UTF-8 too: top never kept them, and widths stay one column a byte */
	cr_assert_str_eq(hb_clean(buf, sizeof(buf), "caf\xc3\xa9"), "caf\\xc3\\xa9");
	no_controls(buf);
	/* what is printable passes as it is */
	cr_assert_str_eq(hb_clean(buf, sizeof(buf), "ns::f<int>(char const*) [clone .cold] a\\b"),
			 "ns::f<int>(char const*) [clone .cold] a\\b");
	cr_assert_str_eq(hb_clean(buf, sizeof(buf), NULL), "");
	cr_assert_str_eq(hb_clean(buf, sizeof(buf), ""), "");
}

Test(clean, a_cut_ends_in_dots_never_inside_an_escape)
{
	char buf[12];

	/* fits exactly: no dots */
	cr_assert_str_eq(hb_clean(buf, sizeof(buf), "abcdefghijk"), "abcdefghijk");
	cr_assert_str_eq(hb_clean(buf, sizeof(buf), "abcdefghijkl"), "abcdefgh...");
	/* "ab" then \x1b would reach past the 8 bytes before the dots: it goes whole */
	cr_assert_str_eq(hb_clean(buf, sizeof(buf), "abcde\x1b\x1b\x1b"), "abcde...");
	no_controls(buf);
	cr_assert_str_eq(hb_clean(buf, 3, "abcdef"), "ab");
	cr_assert_str_eq(hb_clean(buf, 1, "abcdef"), "");
	cr_assert_str_eq(hb_clean(buf, HB_CLEAN_SIZE(2), "\x1b\x1b"), "\\x1b\\x1b");
}

static void refused(const char *path)
{
	int fd = files_open_regular_ro(path);

	cr_assert_eq(fd, -HB_ENOTREG, "%s: %d", path, fd);
	cr_assert_str_eq(files_open_regular_strerror(fd), "not a regular file");
}

Test(files, a_fifo_a_directory_and_a_device_are_refused_without_blocking)
{
	char fifo[PATH_MAX], link[PATH_MAX];

	snprintf(fifo, sizeof(fifo), "%s/fifo", hb_tmpdir());
	cr_assert_eq(mkfifo(fifo, 0666), 0);
	/* nobody writes to it: a blocking open would wait forever (the suite's timeout) */
	refused(fifo);
	/* and through a symbolic link to it */
	snprintf(link, sizeof(link), "%s/link", hb_tmpdir());
	cr_assert_eq(symlink(fifo, link), 0);
	refused(link);
	refused(hb_tmpdir());
	refused("/dev/null");
	refused("/dev/zero");
	cr_assert_eq(files_open_regular_ro("/nonexistent/file"), -ENOENT);
}

Test(files, a_regular_file_opens_blocking_and_close_on_exec)
{
	char path[PATH_MAX], buf[8] = "";
	FILE *f;
	int fd;

	snprintf(path, sizeof(path), "%s/regular", hb_tmpdir());
	f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs("content", f);
	fclose(f);
	fd = files_open_regular_ro(path);
	cr_assert_geq(fd, 0, "%d", fd);
	cr_assert_eq(fcntl(fd, F_GETFL) & (O_NONBLOCK | O_ACCMODE), O_RDONLY);
	cr_assert(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	cr_assert_eq(read(fd, buf, sizeof(buf) - 1), 7);
	cr_assert_str_eq(buf, "content");
	close(fd);
}

/* ---- paths through a process's root ---- */

static pid_t jailed;

static void jail_fini(void)
{
	if (jailed > 0) {
		kill(jailed, SIGKILL);
		waitpid(jailed, NULL, 0);
		jailed = 0;
	}
	hb_tmpdir_cleanup();
}

TestSuite(in_root, .fini = jail_fini, .timeout = 30);

/* A child chrooted into root, waiting to be killed; its pid once it is in. */
static pid_t chrooted(const char *root)
{
	int fds[2];
	char c;

	cr_assert_eq(pipe(fds), 0);
	jailed = fork();
	cr_assert_geq(jailed, 0);
	if (jailed == 0) {
		if (chroot(root) || chdir("/") || write(fds[1], "x", 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	close(fds[1]);
	cr_assert_eq(read(fds[0], &c, 1), 1, "the child could not chroot (root needed)");
	close(fds[0]);
	return jailed;
}

/*
 * A jail holding an absolute link to a file of the host (/etc/passwd): the
 * link named through the jailed process's root leads to the jail's own
 * /etc/passwd, never to the host's, for opening, reading a link and
 * realpath alike.
 */
Test(in_root, an_absolute_link_stays_inside_the_root)
{
	const char *root = hb_tmp("jail");
	char path[PATH_MAX], want[PATH_MAX], buf[64] = "";
	char *real;
	pid_t pid;
	int fd;

	hb_sh("mkdir -p '%s/etc' '%s/usr/lib' && echo inside > '%s/etc/passwd' && "
	      "ln -s /etc/passwd '%s/usr/lib/link' && ln -s /etc '%s/etcdir' && "
	      "ln -s ../../../../../../../../etc/passwd '%s/up'",
	      root, root, root, root, root, root);
	pid = chrooted(root);
	for (int i = 0; i < 3; i++) {
		static const char *const names[] = { "usr/lib/link", "etcdir/passwd", "up" };

		snprintf(path, sizeof(path), "/proc/%d/root/%s", pid, names[i]);
		fd = files_open_regular_ro(path);
		cr_assert_geq(fd, 0, "%s: %s", path, strerror(-fd));
		memset(buf, 0, sizeof(buf));
		cr_assert_eq(read(fd, buf, sizeof(buf) - 1), 7);
		close(fd);
		cr_assert_str_eq(buf, "inside\n", "%s led outside the jail", path);
		real = hb_realpath(path);
		snprintf(want, sizeof(want), "/proc/%d/root/etc/passwd", pid);
		cr_assert_not_null(real, "%s", path);
		cr_assert_str_eq(real, want);
		free(real);
	}
	snprintf(path, sizeof(path), "/proc/%d/root/usr/lib/link", pid);
	cr_assert_eq(hb_readlink(path, buf, sizeof(buf)), (ssize_t)strlen("/etc/passwd"));
	cr_assert_str_eq(buf, "/etc/passwd");
	/* the link's own directory reached through a link inside: still the jail's */
	snprintf(path, sizeof(path), "/proc/%d/root/etcdir/passwd", pid);
	cr_assert_eq(hb_readlink(path, buf, sizeof(buf)), -EINVAL, "not a link");
	/* any other path is the plain one */
	real = hb_realpath("/proc/self/../self/exe");
	cr_assert_not_null(real);
	free(real);
}
