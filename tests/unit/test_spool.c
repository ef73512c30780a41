// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The Pyroscope spool: its file format and names, listing, reading back, the delivery lock. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "export/snapshot.h"
#include "export/spool.h"

TestSuite(spool, .fini = hb_tmpdir_cleanup);

static struct spool *open_spool(void)
{
	struct spool *sp = NULL;

	cr_assert_eq(spool__new(hb_tmpdir(), 0, 0, &sp), 0);
	cr_assert_str_eq(spool__dir(sp), hb_tmpdir());
	return sp;
}

static void put(struct spool *sp, const char *name, int64_t from, const char *body)
{
	const struct spool_profile p = {
		.name = name, .from = from, .until = from + 10, .body = body, .len = strlen(body)
	};
	char err[PATH_MAX + 64];

	cr_assert_eq(spool__put(sp, &p, err, sizeof(err)), 0, "%s", err);
}

static void write_text(const char *name, const char *text)
{
	char path[PATH_MAX + 256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", hb_tmpdir(), name);
	f = fopen(path, "w");
	cr_assert_not_null(f, "%s", path);
	fputs(text, f);
	fclose(f);
	/* as heapbpf writes its spool files: any other mode is not heapbpf's */
	cr_assert_eq(chmod(path, 0600), 0);
}

Test(spool, put_then_read_back_in_order)
{
	struct spool *sp = open_spool();
	struct dirent **files = NULL;
	struct spool_profile p;
	char *data = NULL;
	int n;

	put(sp, "svc{pid=1}", 1000, "first");
	put(sp, "svc{pid=2}", 2000, "second");
	/* what is not a finished spool file is never listed */
	write_text(".deliver.lock", "");
	write_text(".hidden.spool", "x");
	write_text("20250101T000000Z-000000001-7.spool.tmp.AbC123", "x");
	write_text("notes.txt", "x");
	n = spool__list(sp, &files);
	cr_assert_eq(n, 2);
	/* STAMP-NANOSECONDS-PID.spool: sorts by time */
	for (int i = 0; i < n; i++) {
		char stamp[SNAPSHOT_STAMP_LEN + 1], tail[64];
		long ns;
		int pid;

		cr_assert_eq(sscanf(files[i]->d_name, "%16[0-9TZ]-%9ld-%d%63s", stamp, &ns, &pid,
				    tail),
			     4, "%s", files[i]->d_name);
		cr_assert_eq(pid, getpid());
		cr_assert_str_eq(tail, ".spool");
	}
	cr_assert_lt(strcmp(files[0]->d_name, files[1]->d_name), 0);
	cr_assert_eq(spool__read(sp, files[0]->d_name, &p, &data), 0);
	cr_assert_str_eq(p.name, "svc{pid=1}");
	cr_assert_eq(p.from, 1000);
	cr_assert_eq(p.until, 1010);
	cr_assert_eq(p.len, 5);
	cr_assert_eq(memcmp(p.body, "first", 5), 0);
	free(data);
	cr_assert_eq(spool__read(sp, files[1]->d_name, &p, &data), 0);
	cr_assert_str_eq(p.name, "svc{pid=2}");
	cr_assert_eq(p.len, 6);
	free(data);
	spool_list_free(files, n);
	spool__free(sp);
}

Test(spool, the_file_format_is_stable)
{
	struct spool *sp = open_spool();
	struct dirent **files = NULL;
	const char *want = "HBSPOOL1\nname=a{b=c}\nfrom=-5\nuntil=5\n\nBODY";
	char path[PATH_MAX + 256], *text = NULL;
	int n;

	put(sp, "a{b=c}", -5, "BODY");
	n = spool__list(sp, &files);
	cr_assert_eq(n, 1);
	snprintf(path, sizeof(path), "%s/%s", hb_tmpdir(), files[0]->d_name);
	/* what earlier heapbpf versions left in a spool must still be delivered */
	cr_assert_eq(hb_read_file(path, &text), (ssize_t)strlen(want));
	cr_assert_str_eq(text, want);
	free(text);
	spool_list_free(files, n);
	spool__free(sp);
}

Test(spool, bad_files_and_names_are_refused)
{
	const struct spool_profile forged = { .name = "a{}\nfrom=1", .body = "x", .len = 1 };
	struct spool *sp = open_spool();
	struct spool_profile p;
	char err[512], *data = NULL;

	cr_assert_eq(spool__put(sp, &forged, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "line break"), "%s", err);
	cr_assert_eq(spool__read(sp, "gone.spool", &p, &data), -ENOENT);
	free(data);
	write_text("a.spool", "HBSPOOL0\nname=a{}\nfrom=1\nuntil=2\n\nBODY");
	cr_assert_eq(spool__read(sp, "a.spool", &p, &data), -EBADMSG);
	free(data);
	write_text("b.spool", "HBSPOOL1\nname=a{}\nfrom=1\nuntil=2\n\n");
	cr_assert_eq(spool__read(sp, "b.spool", &p, &data), -EBADMSG, "no body");
	free(data);
	write_text("c.spool", "HBSPOOL1\nname=a{}\nfrom=x\nuntil=2\n\nBODY");
	cr_assert_eq(spool__read(sp, "c.spool", &p, &data), -EBADMSG);
	free(data);
	/* files heapbpf did not write: another mode, another owner, a link: -EPERM, left there */
	write_text("d.spool", "HBSPOOL1\nname=a{}\nfrom=1\nuntil=2\n\nBODY");
	cr_assert_eq(spool__read(sp, "d.spool", &p, &data), 0);
	free(data);
	{
		char path[PATH_MAX + 16], link[PATH_MAX + 16];

		snprintf(path, sizeof(path), "%s/d.spool", hb_tmpdir());
		snprintf(link, sizeof(link), "%s/e.spool", hb_tmpdir());
		cr_assert_eq(chmod(path, 0644), 0);
		cr_assert_eq(spool__read(sp, "d.spool", &p, &data), -EPERM);
		free(data);
		cr_assert_eq(chmod(path, 0600), 0);
		cr_assert_eq(chown(path, 65534, 65534), 0);
		cr_assert_eq(spool__read(sp, "d.spool", &p, &data), -EPERM);
		free(data);
		cr_assert_eq(symlink(path, link), 0);
		cr_assert_eq(spool__read(sp, "e.spool", &p, &data), -EPERM);
		free(data);
		cr_assert_eq(access(path, F_OK), 0, "the file was removed");
	}
	spool__free(sp);
	/* a spool whose files could not be written says which */
	cr_assert_eq(spool__new("/proc/self/nonexistent", 0, 0, &sp), 0);
	cr_assert_lt(spool__put(sp, &(struct spool_profile){ .name = "a{}", .body = "x", .len = 1 },
				err, sizeof(err)),
		     0);
	cr_assert(strstr(err, "cannot use the spool directory /proc/self/nonexistent"), "%s", err);
	spool__free(sp);
}

Test(spool, one_delivery_at_a_time_and_removals)
{
	struct spool *a = open_spool(), *b = open_spool();
	struct dirent **files = NULL;
	char err[PATH_MAX + 64];
	int n;

	put(a, "a{}", 1, "x");
	cr_assert_eq(spool__lock(a, false, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(spool__lock(b, false, err, sizeof(err)), -EWOULDBLOCK);
	n = spool__list(a, &files);
	cr_assert_eq(n, 1);
	spool__remove(a, files[0]->d_name);
	spool_list_free(files, n);
	cr_assert_eq(spool__list(a, &files), 0);
	spool_list_free(files, 0);
	spool__unlock(a);
	cr_assert_eq(spool__lock(b, false, err, sizeof(err)), 0, "%s", err);
	/* freeing releases the lock too */
	spool__free(b);
	cr_assert_eq(spool__lock(a, true, err, sizeof(err)), 0, "%s", err);
	spool__free(a);
}
