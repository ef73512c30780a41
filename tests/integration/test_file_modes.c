// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The mode of every kind of file heapbpf writes, from real runs against the
 * example service: live pprof, folded and html (snapshot mode writes all
 * three), --record, --at-peak, heapbpf report of each format, heapbpf diff.
 * They hold the target's function names and addresses: 0600 by default,
 * exactly, under a umask of 000 and over files that were there with 0666;
 * --file-mode 0640 gives 0640 to every one of them.
 */
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "harness.h"

TestSuite(file_modes, .fini = hb_tmpdir_cleanup, .timeout = 150);

static struct svc svc;
static char pid[16];

static void start(void)
{
	hb_require_bpf();
	hb_start_idle_service(&svc, "2", pid, sizeof(pid));
}

/* A file that is there before heapbpf writes it, readable and writable by all. */
static void preexisting(const char *path)
{
	FILE *f = fopen(path, "we");

	cr_assert_not_null(f, "%s", path);
	fputs("old\n", f);
	fclose(f);
	cr_assert_eq(chmod(path, 0666), 0);
}

static void assert_mode(const char *path, mode_t want)
{
	struct stat st;

	cr_assert_eq(stat(path, &st), 0, "heapbpf did not write %s", path);
	cr_assert(S_ISREG(st.st_mode), "%s", path);
	cr_assert_gt(st.st_size, 4, "%s is empty", path);
	cr_assert_eq(st.st_mode & 07777, want, "%s is %04o, not %04o", path, st.st_mode & 07777,
		     want);
}

static void run_ok(const char *const *args)
{
	char err[16384];
	int rc = hb_run(args, err, sizeof(err), 60000);

	cr_assert(rc == 0, "heapbpf %s ... exited %d: %s", args[0], rc, err);
}

/*
 * One live run with -o, --record and --at-peak; then reports of the
 * recording in every format and a diff; every file checked for mode want.
 * mode_arg: NULL (the default) or a --file-mode value.
 */
static void live_report_diff(const char *mode_arg, mode_t want)
{
	const char *heap = hb_tmp("heap.pb.gz"), *rec = hb_tmp("heap.hbr"),
		   *peak = hb_tmp("peak.pb.gz");
	const char *fmts[] = { "pprof", "folded", "html" };
	const char *outs[] = { hb_tmp("report.pb.gz"), hb_tmp("report.folded"),
			       hb_tmp("report.html") };
	const char *diff = hb_tmp("change.pb.gz");
	const char *m = mode_arg ? "--file-mode" : NULL;

	/* a umask that would let everyone read, over files everyone could read */
	umask(0);
	preexisting(heap);
	preexisting(rec);
	start();
	run_ok((const char *[]){ "--pid", pid, "-d", "2", "-o", heap, "--record", rec, "--at-peak",
				 peak, "-q", m, mode_arg, NULL });
	cr_assert_eq(svc_stop(&svc), 0);
	assert_mode(heap, want);
	assert_mode(rec, want);
	assert_mode(peak, want);
	for (int i = 0; i < 3; i++) {
		preexisting(outs[i]);
		run_ok((const char *[]){ "report", rec, "-f", fmts[i], "-o", outs[i], "-q", m,
					 mode_arg, NULL });
		assert_mode(outs[i], want);
	}
	run_ok((const char *[]){ "diff", peak, heap, "-o", diff, "-q", m, mode_arg, NULL });
	assert_mode(diff, want);
}

/* Snapshot mode, every format: each file of the directory has mode want. */
static void snapshots(const char *mode_arg, mode_t want)
{
	const char *dir = hb_tmp("snap");
	const char *m = mode_arg ? "--file-mode" : NULL;
	struct dirent *de;
	struct stat st;
	int pb = 0, folded = 0, html = 0;
	DIR *d;

	umask(0);
	start();
	run_ok((const char *[]){ "--pid", pid, "-d", "2", "--output-dir", dir, "-f", "pprof", "-f",
				 "folded", "-f", "html", "--compress", "zstd", "-q", m, mode_arg,
				 NULL });
	cr_assert_eq(svc_stop(&svc), 0);
	/* the directory heapbpf created: 0750 whatever the umask */
	cr_assert_eq(stat(dir, &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0750, "%s is %04o", dir, st.st_mode & 07777);
	d = opendir(dir);
	cr_assert_not_null(d);
	while ((de = readdir(d))) {
		char path[PATH_MAX + 256];

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		assert_mode(path, want);
		pb += strstr(de->d_name, ".pb.gz") != NULL;
		folded += strstr(de->d_name, ".folded.zst") != NULL;
		html += strstr(de->d_name, ".html") != NULL;
	}
	closedir(d);
	cr_assert(pb == 1 && folded == 1 && html == 1, "snapshots: %d pprof, %d folded, %d html",
		  pb, folded, html);
}

Test(file_modes, live_record_peak_report_diff_are_0600)
{
	live_report_diff(NULL, 0600);
}

Test(file_modes, snapshots_are_0600)
{
	snapshots(NULL, 0600);
}

Test(file_modes, file_mode_0640_applies_to_every_file)
{
	live_report_diff("0640", 0640);
	snapshots("0640", 0640);
}
