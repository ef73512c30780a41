// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Directory retention: the generic engine, snapshots (grouped by stamp) and the spool (one by one). */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "util/retain.h"
#include "export/snapshot.h"
#include "export/spool.h"

TestSuite(retain, .fini = hb_tmpdir_cleanup);

/* Makes name look untouched for two hours: what a killed run left. */
static void age(const char *name)
{
	struct timespec old[2] = { { .tv_sec = time(NULL) - 7200 },
				   { .tv_sec = time(NULL) - 7200 } };
	char path[PATH_MAX + 256];

	snprintf(path, sizeof(path), "%s/%s", hb_tmpdir(), name);
	cr_assert_eq(utimensat(AT_FDCWD, path, old, 0), 0);
}

/* "gN-anything.dat" is in group "gN" */
static bool dat_member(const char *name, char *group)
{
	const char *dash = strchr(name, '-'), *dot = strrchr(name, '.');

	if (name[0] != 'g' || !dash || !dot || strcmp(dot, ".dat") != 0 || strstr(name, ".tmp."))
		return false;
	snprintf(group, NAME_MAX + 1, "%.*s", (int)(dash - name), name);
	return true;
}

Test(retain, groups_go_together_oldest_first_by_count_then_size)
{
	struct retain_rules rules = { .member = dat_member, .keep = 2 };
	struct retain_result r;
	char err[256], sub[PATH_MAX];

	hb_touch("g1-a.dat", 10);
	hb_touch("g1-b.dat", 10);
	hb_touch("g2-a.dat", 10);
	hb_touch("g3-a.dat", 10);
	hb_touch("g3-b.dat", 10);
	hb_touch("other.dat", 1000);
	snprintf(sub, sizeof(sub), "%s/g0-dir.dat", hb_tmpdir());
	cr_assert_eq(mkdir(sub, 0700), 0);
	cr_assert_eq(retain_prune(hb_tmpdir(), &rules, &r, err, sizeof(err)), 0, "%s", err);
	/* g1 went whole; what is not a member, or not a regular file, stays */
	cr_assert_eq(r.deleted_files, 2);
	cr_assert_eq(r.deleted_bytes, 20);
	cr_assert_eq(r.groups, 2);
	cr_assert_eq(r.bytes, 30);
	cr_assert_not(hb_tmp_exists("g1-a.dat"));
	cr_assert_not(hb_tmp_exists("g1-b.dat"));
	cr_assert(hb_tmp_exists("g2-a.dat"));
	cr_assert(hb_tmp_exists("other.dat"));
	cr_assert(hb_tmp_exists("g0-dir.dat"));
	/* by size: g2 goes for g3's 20 bytes; then g3 stays alone even over the limit */
	rules = (struct retain_rules){ .member = dat_member, .max_bytes = 25 };
	cr_assert_eq(retain_prune(hb_tmpdir(), &rules, &r, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(r.deleted_files, 1);
	cr_assert_not(r.newest_over);
	rules.max_bytes = 15;
	cr_assert_eq(retain_prune(hb_tmpdir(), &rules, &r, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(r.deleted_files, 0);
	cr_assert_eq(r.groups, 1);
	cr_assert(r.newest_over);
	cr_assert(hb_tmp_exists("g3-a.dat"));
	cr_assert(hb_tmp_exists("g3-b.dat"));
}

Test(retain, limits_zero_keep_everything_and_a_missing_directory_is_said)
{
	struct retain_rules rules = { .member = dat_member };
	struct retain_result r;
	char err[256] = "", missing[PATH_MAX];

	hb_touch("g1-a.dat", 10);
	hb_touch("g2-a.dat", 10);
	cr_assert_eq(retain_prune(hb_tmpdir(), &rules, &r, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(r.deleted_files, 0);
	cr_assert_eq(r.groups, 2);
	snprintf(missing, sizeof(missing), "%s/nope", hb_tmpdir());
	cr_assert_eq(retain_prune(missing, &rules, &r, err, sizeof(err)), -ENOENT);
	cr_assert(strstr(err, "cannot open") && strstr(err, "/nope"), "%s", err);
}

Test(retain, snapshots_keep_the_newest_windows)
{
	struct retain_result r;
	char err[256];

	for (int s = 1; s <= 4; s++) {
		char n[128];

		snprintf(n, sizeof(n), "heap-2025010%dT000000Z-1-a.pb.gz", s);
		hb_touch(n, 100);
		snprintf(n, sizeof(n), "heap-2025010%dT000000Z-2-b.pb.gz", s);
		hb_touch(n, 100);
	}
	hb_touch("README", 10000);
	hb_touch("heap-20250109T000000Z-1-a.pb.gz.tmp.XYZ123", 10000);
	hb_touch("heap-20250108T000000Z-1-a.pb.gz.tmp.OLD123", 10000);
	hb_touch("notes.tmp.OLD123", 10);
	/* temporaries nobody touched for two hours: left by a killed run */
	age("heap-20250108T000000Z-1-a.pb.gz.tmp.OLD123");
	age("notes.tmp.OLD123");
	cr_assert_eq(snapshot_prune(hb_tmpdir(), 2, 0, &r, err, sizeof(err)), 0, "%s", err);
	cr_assert_not(hb_tmp_exists("heap-20250108T000000Z-1-a.pb.gz.tmp.OLD123"));
	cr_assert_eq(r.deleted_files, 4);
	cr_assert_eq(r.groups, 2);
	cr_assert_not(hb_tmp_exists("heap-20250102T000000Z-2-b.pb.gz"));
	cr_assert(hb_tmp_exists("heap-20250103T000000Z-1-a.pb.gz"));
	cr_assert(hb_tmp_exists("heap-20250104T000000Z-2-b.pb.gz"));
	/* never anything that is not a finished snapshot, nor the temporary of one still written */
	cr_assert(hb_tmp_exists("README"));
	cr_assert(hb_tmp_exists("notes.tmp.OLD123"));
	cr_assert(hb_tmp_exists("heap-20250109T000000Z-1-a.pb.gz.tmp.XYZ123"));
	/* by size: the oldest snapshot goes, the newest stays even when alone too large */
	cr_assert_eq(snapshot_prune(hb_tmpdir(), 0, 250, &r, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(r.groups, 1);
	cr_assert(hb_tmp_exists("heap-20250104T000000Z-1-a.pb.gz"));
	cr_assert_not(hb_tmp_exists("heap-20250103T000000Z-1-a.pb.gz"));
	cr_assert_eq(snapshot_prune(hb_tmpdir(), 0, 150, &r, err, sizeof(err)), 0, "%s", err);
	cr_assert(r.newest_over);
	cr_assert(hb_tmp_exists("heap-20250104T000000Z-2-b.pb.gz"));
}

Test(retain, the_spool_counts_files_one_by_one)
{
	struct retain_result r;
	struct spool *sp = NULL;
	char err[256];

	hb_touch("20250101T000000Z-000000001-7.spool", 10);
	hb_touch("20250101T000000Z-000000002-7.spool", 10);
	hb_touch("20250102T000000Z-000000001-7.spool", 10);
	hb_touch("20250101T000000Z-000000000-7.spool.tmp.OLD123", 10);
	age("20250101T000000Z-000000000-7.spool.tmp.OLD123");
	hb_touch(".deliver.lock", 0);
	cr_assert_eq(spool__new(hb_tmpdir(), 2, 0, &sp), 0);
	cr_assert_eq(spool__prune(sp, &r, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(r.deleted_files, 1);
	cr_assert_eq(r.groups, 2);
	cr_assert_not(hb_tmp_exists("20250101T000000Z-000000001-7.spool"));
	cr_assert(hb_tmp_exists("20250101T000000Z-000000002-7.spool"));
	cr_assert(hb_tmp_exists("20250102T000000Z-000000001-7.spool"));
	cr_assert_not(hb_tmp_exists("20250101T000000Z-000000000-7.spool.tmp.OLD123"));
	cr_assert(hb_tmp_exists(".deliver.lock"));
	spool__free(sp);
}

Test(retain, snapshots_dated_in_the_future_are_left_alone_and_named)
{
	char now[SNAPSHOT_STAMP_LEN + 1], soon[SNAPSHOT_STAMP_LEN + 1], n[3][128], err[256];
	struct retain_result r;

	/* planted (or a clock that was wrong): they would sort newest of all */
	hb_touch("heap-29991231T235959Z-1-evil.pb.gz", 100);
	hb_touch("heap-29991231T235958Z-1-evil.html", 100);
	for (int i = 0; i < 3; i++) {
		snapshot_stamp(time(NULL) - 300 + i * 60, now);
		snprintf(n[i], sizeof(n[i]), "heap-%s-7-app.pb.gz", now);
		hb_touch(n[i], 100);
	}
	/* a little ahead of the clock still counts: a step back of the clock */
	snapshot_stamp(time(NULL) + RETAIN_FUTURE_SLACK_S / 2, soon);
	cr_assert_eq(snapshot_stamp_time(soon) / 60, (time(NULL) + RETAIN_FUTURE_SLACK_S / 2) / 60);
	cr_assert_eq(snapshot_stamp_time("29991231T235959Z"), 32503679999LL);
	cr_assert_eq(snapshot_stamp_time("2999123xT235959Z"), -1);
	cr_assert_eq(snapshot_prune(hb_tmpdir(), 2, 0, &r, err, sizeof(err)), 0, "%s", err);
	/* the two newest real ones stay, the oldest goes; the future ones are not touched */
	cr_assert_not(hb_tmp_exists(n[0]));
	cr_assert(hb_tmp_exists(n[1]));
	cr_assert(hb_tmp_exists(n[2]));
	cr_assert(hb_tmp_exists("heap-29991231T235959Z-1-evil.pb.gz"));
	cr_assert(hb_tmp_exists("heap-29991231T235958Z-1-evil.html"));
	cr_assert_eq(r.deleted_files, 1);
	cr_assert_eq(r.groups, 2);
	cr_assert_eq(r.future_files, 2);
	cr_assert(strstr(r.future, "heap-29991231T235959Z-1-evil.pb.gz"), "%s", r.future);
	cr_assert(strstr(r.future, "heap-29991231T235958Z-1-evil.html"), "%s", r.future);
	/* nor counted by size */
	cr_assert_eq(r.bytes, 200);
}

Test(retain, a_long_list_of_future_names_is_cut)
{
	struct retain_result r;
	char err[256];

	for (int i = 0; i < 20; i++) {
		char n[128];

		snprintf(n, sizeof(n), "heap-299912%02dT000000Z-1-some-long-name.pb.gz",
			 1 + i % 12);
		hb_touch(n, 1);
		snprintf(n, sizeof(n), "heap-2999%02d01T000000Z-%d-x.pb.gz", 1 + i % 12, i);
		hb_touch(n, 1);
	}
	cr_assert_eq(snapshot_prune(hb_tmpdir(), 1, 0, &r, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(r.deleted_files, 0);
	cr_assert_geq(r.future_files, 20);
	cr_assert_lt(strlen(r.future), sizeof(r.future));
	cr_assert(strstr(r.future, "..."), "%s", r.future);
}
