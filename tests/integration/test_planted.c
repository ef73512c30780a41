// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * What another user can plant for heapbpf, run as root, to read: a process
 * and a symbol whose names carry terminal escapes, a FIFO where a recording
 * names a mapped binary, snapshots dated in the future. heapbpf prints the
 * names escaped, does not block, and keeps its retention to the real files.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "harness.h"

#pragma GCC diagnostic ignored "-Wformat-truncation"

#define IDLE_CONF "prof:true,prof_active:false"
/* as long as the name it replaces, "large_buffers" (13 bytes): sets the title, clears the screen */
#define EVIL_SYMBOL "\x1b]0;pwnd\x07\x1b[2J"
/* what execve through a symbolic link of this name makes the process's comm */
#define EVIL_COMM "\x1b]0;pwned\x07\x1b[2J"

TestSuite(planted, .fini = hb_tmpdir_cleanup, .timeout = 240);

/* Runs cmd as nobody (sh -c), the way an unprivileged local user would plant it. */
static void as_nobody(const char *cmd)
{
	char line[PATH_MAX * 2 + 128];

	snprintf(line, sizeof(line),
		 "setpriv --reuid=nobody --regid=nogroup --clear-groups -- sh -c '%s'", cmd);
	cr_assert_eq(system(line), 0, "%s", line);
}

/* A directory that nobody owns (and so may write), where a root copy of the service is run. */
static void nobody_dir(char *dir, size_t len)
{
	cr_assert_eq(chmod(hb_tmpdir(), 0755), 0);
	snprintf(dir, len, "%s/planted", hb_tmpdir());
	cr_assert_eq(mkdir(dir, 0755), 0);
	cr_assert_eq(chown(dir, 65534, 65534), 0);
}

/* Copies the static service to path, each "\0large_buffers\0" (symbol and DWARF names) renamed. */
static void copy_service(const char *path, const char *name)
{
	const char *old = "large_buffers";
	size_t n = strlen(old), hits = 0;
	char *img;
	ssize_t len = hb_read_file(hb_path("examples/alloc-service-static"), &img);
	FILE *f;

	cr_assert_gt(len, 0);
	cr_assert_eq(strlen(name), n);
	for (ssize_t i = 1; i + (ssize_t)n + 1 < len; i++) {
		if (img[i - 1] == '\0' && img[i + n] == '\0' && memcmp(img + i, old, n) == 0) {
			memcpy(img + i, name, n);
			hits++;
		}
	}
	cr_assert_geq(hits, 2, "the symbol table and the DWARF name");
	f = fopen(path, "w");
	cr_assert_not_null(f, "%s", path);
	cr_assert_eq(fwrite(img, 1, (size_t)len, f), (size_t)len);
	cr_assert_eq(fclose(f), 0);
	cr_assert_eq(chmod(path, 0755), 0);
	free(img);
}

static void start(struct svc *s, const char *bin, char *pid)
{
	hb_require_bpf();
	cr_assert_eq(svc_start(s, bin, IDLE_CONF, (const char *[]){ "--threads", "2", NULL }), 0);
	sprintf(pid, "%d", s->pid);
}

/* What heapbpf printed holds no escape, and shows the escaped name (so it was printed). */
static void harmless(const char *what, const char *out, const char *shown)
{
	cr_assert_null(strchr(out, '\x1b'), "%s: ESC reaches the terminal:\n%s", what, out);
	cr_assert_null(strchr(out, '\x07'), "%s: BEL reaches the terminal:\n%s", what, out);
	cr_assert(strstr(out, shown), "%s: no %s in:\n%s", what, shown, out);
}

Test(planted, escapes_in_comm_and_symbols_are_printed_escaped)
{
	char dir[PATH_MAX], bin[PATH_MAX], link[PATH_MAX], rec[PATH_MAX], a[PATH_MAX], b[PATH_MAX];
	char pid[16], err[65536], c[PATH_MAX];
	struct svc s;

	snprintf(dir, sizeof(dir), "%s", hb_tmpdir());
	snprintf(c, sizeof(c), "%s/c.pb.gz", dir);
	snprintf(bin, sizeof(bin), "%s/service", dir);
	copy_service(bin, EVIL_SYMBOL);
	snprintf(link, sizeof(link), "%s/%s", dir, EVIL_COMM);
	cr_assert_eq(symlink(bin, link), 0);
	snprintf(rec, sizeof(rec), "%s/run.hbr", dir);
	snprintf(a, sizeof(a), "%s/a.pb.gz", dir);
	snprintf(b, sizeof(b), "%s/b.pb.gz", dir);
	start(&s, link, pid);
	/* the first status line (comm), the top sites and the leak rows */
	cr_assert_eq(hb_run((const char *[]){ "--pid", pid, "-d", "3", "--record", rec, "--leaks",
					      "-o", a, NULL },
			    err, sizeof(err), 60000),
		     0, "%s", err);
	harmless("live run, comm", err, "(\\x1b]0;pwned\\x07\\x1b[2J)");
	harmless("live run, top sites", err, "\\x1b]0;pwnd\\x07\\x1b[2J");
	cr_assert_eq(hb_run((const char *[]){ "--pid", pid, "-d", "2", "-o", b, NULL }, err,
			    sizeof(err), 60000),
		     0, "%s", err);
	cr_assert_eq(svc_stop(&s), 0);
	/* the report's header, summary and lifetimes, from the recording alone */
	cr_assert_eq(hb_run((const char *[]){ "report", rec, "--leaks", "-o", c, NULL }, err,
			    sizeof(err), 60000),
		     0, "%s", err);
	harmless("report, header", err, "recording of pid");
	harmless("report, comm", err, "(\\x1b]0;pwned\\x07\\x1b[2J)");
	harmless("report, sites", err, "\\x1b]0;pwnd\\x07\\x1b[2J");
	/* diff's table of stacks: the second run's profile minus the first's */
	cr_assert_eq(hb_run((const char *[]){ "diff", a, b, "-t", "alloc_space", "-o", c, NULL },
			    err, sizeof(err), 60000),
		     0, "%s", err);
	harmless("diff", err, "\\x1b]0;pwnd\\x07\\x1b[2J");
}

Test(planted, a_fifo_where_a_recording_names_a_binary_does_not_block_report)
{
	char dir[PATH_MAX], bin[PATH_MAX], rec[PATH_MAX], out[PATH_MAX], cmd[PATH_MAX + 64];
	char pid[16], err[65536];
	struct stat st;
	struct svc s;
	int rc;

	nobody_dir(dir, sizeof(dir));
	snprintf(bin, sizeof(bin), "%s/service", dir);
	copy_service(bin, "large_buffers");
	snprintf(rec, sizeof(rec), "%s/run.hbr", hb_tmpdir());
	snprintf(out, sizeof(out), "%s/report.pb.gz", hb_tmpdir());
	start(&s, bin, pid);
	cr_assert_eq(hb_run((const char *[]){ "--pid", pid, "-d", "2", "--record", rec, "-o", out,
					      NULL },
			    err, sizeof(err), 60000),
		     0, "%s", err);
	cr_assert_eq(svc_stop(&s), 0);
	cr_assert_eq(unlink(out), 0);
	/* the binary the recording names becomes a FIFO nobody writes to */
	snprintf(cmd, sizeof(cmd), "rm -f %s && mkfifo %s", bin, bin);
	as_nobody(cmd);
	cr_assert_eq(stat(bin, &st), 0);
	cr_assert(S_ISFIFO(st.st_mode));
	/* a blocked open would be killed at the timeout (-1): it must end by itself */
	rc = hb_run((const char *[]){ "report", rec, "-o", out, NULL }, err, sizeof(err), 90000);
	cr_assert_neq(rc, -1, "heapbpf report blocked on the FIFO:\n%s", err);
	cr_assert_eq(rc, 0, "%s", err);
	/* the frames of the binary are reported unnamed; the FIFO was never opened for writing */
	cr_assert(strstr(err, "recording of pid"), "%s", err);
	cr_assert_eq(stat(out, &st), 0);
	cr_assert(S_ISREG(st.st_mode) && st.st_size > 0);
}

Test(planted, snapshots_dated_in_the_future_do_not_take_the_new_ones)
{
	char dir[PATH_MAX], path[PATH_MAX + 64], pid[16], err[65536];
	const char *const future[] = { "heap-29991231T235959Z-1-x.pb.gz",
				       "heap-29991231T235958Z-1-x.pb.gz" };
	struct svc s;
	FILE *f;
	int real = 0;

	snprintf(dir, sizeof(dir), "%s/snapshots", hb_tmpdir());
	cr_assert_eq(mkdir(dir, 0750), 0);
	for (int i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, future[i]);
		f = fopen(path, "w");
		cr_assert_not_null(f);
		fclose(f);
	}
	start(&s, hb_path("examples/alloc-service-static"), pid);
	cr_assert_eq(hb_run((const char *[]){ "--pid", pid, "-d", "1", "--output-dir", dir,
					      "--keep", "2", NULL },
			    err, sizeof(err), 60000),
		     0, "%s", err);
	cr_assert_eq(svc_stop(&s), 0);
	/* the snapshot just written is kept, the planted ones are left alone and named */
	snprintf(path, sizeof(path), "ls %s | grep -c -- '-%s-'", dir, pid);
	f = popen(path, "r");
	cr_assert_not_null(f);
	cr_assert_eq(fscanf(f, "%d", &real), 1);
	pclose(f);
	cr_assert_eq(real, 1, "the new snapshot was deleted:\n%s", err);
	for (int i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, future[i]);
		cr_assert_eq(access(path, F_OK), 0, "%s", path);
		cr_assert(strstr(err, future[i]), "%s", err);
	}
	cr_assert(strstr(err, "in the future"), "%s", err);
}
