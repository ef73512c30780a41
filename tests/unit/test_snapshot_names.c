// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Snapshot names that are never taken twice: a profile whose name a file
 * holds (two triggers in one second) gets the next number after its stamp,
 * created with a rename that cannot replace, and retention counts and
 * orders the numbered ones as profiles of their own; --keep of each
 * process for the agent.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "util/output.h"
#include "export/snapshot.h"

TestSuite(snapshot_names, .fini = hb_tmpdir_cleanup);

#define STAMP "20250102T030405Z"

/* Writes the text arg into the file. */
static int write_text(FILE *f, void *arg)
{
	return fputs(arg, f) < 0 ? -EIO : 0;
}

/* The text of the file name in the test directory (a static buffer). */
static const char *text_of(const char *name)
{
	static char text[256];
	char path[PATH_MAX + 256];
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "%s/%s", hb_tmpdir(), name);
	f = fopen(path, "r");
	cr_assert_not_null(f, "%s", path);
	n = fread(text, 1, sizeof(text) - 1, f);
	text[n] = '\0';
	fclose(f);
	return text;
}

/* snapshot_write() of text as "heap-STAMP[.SEQ]-42-WHO.EXT" from seq on; the name, its number. */
static unsigned int write_one(const char *text, const char *ext, unsigned int seq, const char *who,
			      char *name, size_t len)
{
	struct snapshot_file f = {
		.dir = hb_tmpdir(), .stamp = STAMP, .who = who, .ext = ext, .pid = 42, .seq = seq
	};
	char err[512] = "";

	cr_assert_eq(snapshot_write(&f, write_text, (void *)text, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(strncmp(f.path, hb_tmpdir(), strlen(hb_tmpdir())), 0, "%s", f.path);
	snprintf(name, len, "%s", f.path + strlen(hb_tmpdir()) + 1);
	cr_assert_str_eq(text_of(name), text);
	return f.seq;
}

Test(snapshot_names, names_with_and_without_a_number)
{
	char name[256], stamp[SNAPSHOT_STAMP_LEN + 1];

	cr_assert_eq(snapshot_name_seq(name, sizeof(name), STAMP, 1, 42, "app-demand", "pb.gz"), 0);
	cr_assert_str_eq(name, "heap-" STAMP "-42-app-demand.pb.gz");
	cr_assert_eq(snapshot_name_seq(name, sizeof(name), STAMP, 2, 42, "app-demand", "pb.gz"), 0);
	cr_assert_str_eq(name, "heap-" STAMP ".2-42-app-demand.pb.gz");
	cr_assert_eq(snapshot_name_seq(name, sizeof(name), STAMP, 0, 42, "a", "pb.gz"), -ERANGE);
	cr_assert_eq(snapshot_name_seq(name, sizeof(name), STAMP, SNAPSHOT_MAX_SEQ + 1, 42, "a",
				       "pb.gz"),
		     -ERANGE);
	/* the numbered ones are snapshots, of the same stamp */
	cr_assert(snapshot_parse_name("heap-" STAMP ".2-42-app-demand.pb.gz", stamp));
	cr_assert_str_eq(stamp, STAMP);
	cr_assert(snapshot_parse_name("heap-" STAMP ".1000-42-app.folded.zst", stamp));
	/* only as heapbpf writes them: 2 to SNAPSHOT_MAX_SEQ, no leading zero */
	cr_assert_not(snapshot_parse_name("heap-" STAMP ".1-42-app.pb.gz", stamp));
	cr_assert_not(snapshot_parse_name("heap-" STAMP ".0-42-app.pb.gz", stamp));
	cr_assert_not(snapshot_parse_name("heap-" STAMP ".02-42-app.pb.gz", stamp));
	cr_assert_not(snapshot_parse_name("heap-" STAMP ".1001-42-app.pb.gz", stamp));
	cr_assert_not(snapshot_parse_name("heap-" STAMP ".-42-app.pb.gz", stamp));
	cr_assert_not(snapshot_parse_name("heap-" STAMP ".2x-42-app.pb.gz", stamp));
	cr_assert_not(snapshot_parse_name("heap-" STAMP ".2-42-app.pb.gz.tmp.AbC123", stamp));
}

/*
 * The same name three times (three triggers of one second): three files,
 * the first two untouched; a second format of a profile takes the number
 * its first took.
 */
Test(snapshot_names, a_taken_name_gets_the_next_number)
{
	char name[256];

	cr_assert_eq(write_one("first", "pb.gz", 1, "app-demand", name, sizeof(name)), 1);
	cr_assert_str_eq(name, "heap-" STAMP "-42-app-demand.pb.gz");
	/* the name is taken: the next profile gets .2, the first is not replaced */
	cr_assert_eq(write_one("second", "pb.gz", 1, "app-demand", name, sizeof(name)), 2);
	cr_assert_str_eq(name, "heap-" STAMP ".2-42-app-demand.pb.gz");
	cr_assert_eq(write_one("third", "pb.gz", 1, "app-demand", name, sizeof(name)), 3);
	cr_assert_str_eq(name, "heap-" STAMP ".3-42-app-demand.pb.gz");
	/* the profile's next format starts from the number its first took */
	cr_assert_eq(write_one("third", "folded", 3, "app-demand", name, sizeof(name)), 3);
	cr_assert_str_eq(name, "heap-" STAMP ".3-42-app-demand.folded");
	cr_assert_str_eq(text_of("heap-" STAMP "-42-app-demand.pb.gz"), "first");
	cr_assert_str_eq(text_of("heap-" STAMP ".2-42-app-demand.pb.gz"), "second");
	/* another name of the same second is a name of its own */
	cr_assert_eq(write_one("growth", "pb.gz", 1, "app-growth", name, sizeof(name)), 1);
	cr_assert_str_eq(name, "heap-" STAMP "-42-app-growth.pb.gz");
	cr_assert_eq(hb_count_files(hb_tmpdir(), "", NULL, 0), 5, "a temporary was left");
}

/* Whatever holds a name (a link planted there) keeps it, is not written through: the next is taken. */
Test(snapshot_names, a_link_at_the_name_is_passed_over)
{
	char name[256], target[PATH_MAX], link[PATH_MAX];

	hb_touch("target", 3);
	snprintf(target, sizeof(target), "%s/target", hb_tmpdir());
	snprintf(link, sizeof(link), "%s/heap-" STAMP "-42-app.pb.gz", hb_tmpdir());
	cr_assert_eq(symlink(target, link), 0);
	cr_assert_eq(write_one("profile", "pb.gz", 1, "app", name, sizeof(name)), 2);
	cr_assert_str_eq(name, "heap-" STAMP ".2-42-app.pb.gz");
	cr_assert_str_eq(text_of("target"), "xxx");
}

/* Every name taken: -EEXIST after SNAPSHOT_MAX_SEQ of them, said, and nothing left behind. */
Test(snapshot_names, every_number_taken_is_said)
{
	struct snapshot_file f = {
		.dir = hb_tmpdir(), .stamp = STAMP, .who = "app", .ext = "pb.gz", .pid = 42, .seq = 1
	};
	char err[512] = "", name[256];
	int files;

	for (unsigned int i = 1; i <= SNAPSHOT_MAX_SEQ; i++) {
		cr_assert_eq(snapshot_name_seq(name, sizeof(name), STAMP, i, 42, "app", "pb.gz"),
			     0);
		hb_touch(name, 0);
	}
	cr_assert_eq(snapshot_write(&f, write_text, "profile", err, sizeof(err)), -EEXIST);
	cr_assert(strstr(err, "cannot write ") && strstr(err, "-42-app.pb.gz"), "%s", err);
	files = hb_count_files(hb_tmpdir(), "", NULL, 0);
	cr_assert_eq(files, SNAPSHOT_MAX_SEQ, "a temporary was left: %d files", files);
}

/* Four processes writing one name 25 times each, at once: 100 files, numbers 1 to 100. */
Test(snapshot_names, writers_at_once_never_share_a_name)
{
	const char *dir = hb_tmpdir(); /* made before the fork: one directory for all */
	pid_t kids[4];
	char name[256];

	for (int k = 0; k < 4; k++) {
		kids[k] = fork();
		cr_assert_geq(kids[k], 0);
		if (!kids[k]) {
			int bad = 0;

			for (int i = 0; i < 25; i++) {
				struct snapshot_file f = { .dir = dir,
							   .stamp = STAMP,
							   .who = "app",
							   .ext = "pb.gz",
							   .pid = 42,
							   .seq = 1 };
				char err[512];

				bad |= snapshot_write(&f, write_text, "profile", err,
						      sizeof(err)) != 0;
			}
			_exit(bad);
		}
	}
	for (int k = 0; k < 4; k++) {
		int status;

		cr_assert_eq(waitpid(kids[k], &status, 0), kids[k]);
		cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	cr_assert_eq(hb_count_files(dir, "", NULL, 0), 100);
	for (unsigned int i = 1; i <= 100; i++) {
		cr_assert_eq(snapshot_name_seq(name, sizeof(name), STAMP, i, 42, "app", "pb.gz"),
			     0);
		cr_assert(hb_tmp_exists(name), "%s", name);
	}
}

/*
 * Retention counts a numbered profile as one of its own, after the one
 * before it and before the next second's (.10 after .2, though it sorts
 * before it by name).
 */
Test(snapshot_names, retention_counts_and_orders_numbered_profiles)
{
	struct retain_result r;
	char err[256];

	hb_touch("heap-20250102T030405Z-42-app-demand.pb.gz", 10);
	hb_touch("heap-20250102T030405Z.2-42-app-demand.pb.gz", 10);
	hb_touch("heap-20250102T030405Z.10-42-app-demand.pb.gz", 10);
	hb_touch("heap-20250102T030406Z-42-app-demand.pb.gz", 10);
	cr_assert_eq(snapshot_prune(hb_tmpdir(), 2, 0, &r, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(r.deleted_files, 2);
	cr_assert_eq(r.groups, 2);
	cr_assert_not(hb_tmp_exists("heap-20250102T030405Z-42-app-demand.pb.gz"));
	cr_assert_not(hb_tmp_exists("heap-20250102T030405Z.2-42-app-demand.pb.gz"));
	cr_assert(hb_tmp_exists("heap-20250102T030405Z.10-42-app-demand.pb.gz"));
	cr_assert(hb_tmp_exists("heap-20250102T030406Z-42-app-demand.pb.gz"));
	/* by size the same order: .10 goes before the next second's */
	cr_assert_eq(snapshot_prune(hb_tmpdir(), 0, 15, &r, err, sizeof(err)), 0, "%s", err);
	cr_assert_not(hb_tmp_exists("heap-20250102T030405Z.10-42-app-demand.pb.gz"));
	cr_assert(hb_tmp_exists("heap-20250102T030406Z-42-app-demand.pb.gz"));
}

/*
 * The agent's retention: --keep counts each pid's snapshots apart, so a
 * process that wrote few keeps them beside one that wrote many; then
 * --max-bytes takes the oldest of any pid, never the newest.
 */
Test(snapshot_names, per_process_keep_counts_each_pid)
{
	struct retain_result r;
	char err[256], n[160];

	for (int s = 1; s <= 5; s++) {
		snprintf(n, sizeof(n), "heap-2025010%dT000000Z-7-busy.pb.gz", s + 2);
		hb_touch(n, 100);
	}
	hb_touch("heap-20250101T000000Z-8-quiet.pb.gz", 100);
	hb_touch("heap-20250102T000000Z-8-quiet-exit.pb.gz", 100);
	hb_touch("heap-20250102T000000Z.2-8-quiet-demand.pb.gz", 100);
	/* 2 of each pid: pid 8's stay beside pid 7's (the directory's 2 newest stamps are pid 7's) */
	cr_assert_eq(snapshot_prune_per_process(hb_tmpdir(), 2, 0, &r, err, sizeof(err)), 0, "%s",
		     err);
	cr_assert_eq(r.deleted_files, 4);
	cr_assert_eq(r.groups, 4);
	cr_assert_not(hb_tmp_exists("heap-20250105T000000Z-7-busy.pb.gz"));
	cr_assert(hb_tmp_exists("heap-20250106T000000Z-7-busy.pb.gz"));
	cr_assert(hb_tmp_exists("heap-20250107T000000Z-7-busy.pb.gz"));
	cr_assert_not(hb_tmp_exists("heap-20250101T000000Z-8-quiet.pb.gz"));
	cr_assert(hb_tmp_exists("heap-20250102T000000Z-8-quiet-exit.pb.gz"));
	cr_assert(hb_tmp_exists("heap-20250102T000000Z.2-8-quiet-demand.pb.gz"));
	/* by size over every pid: the oldest first, whoever's */
	cr_assert_eq(snapshot_prune_per_process(hb_tmpdir(), 2, 250, &r, err, sizeof(err)), 0, "%s",
		     err);
	cr_assert_eq(r.deleted_files, 2);
	cr_assert_not(hb_tmp_exists("heap-20250102T000000Z-8-quiet-exit.pb.gz"));
	cr_assert_not(hb_tmp_exists("heap-20250102T000000Z.2-8-quiet-demand.pb.gz"));
	cr_assert(hb_tmp_exists("heap-20250106T000000Z-7-busy.pb.gz"));
	/* never the newest */
	cr_assert_eq(snapshot_prune_per_process(hb_tmpdir(), 0, 1, &r, err, sizeof(err)), 0, "%s",
		     err);
	cr_assert_eq(r.groups, 1);
	cr_assert(r.newest_over);
	cr_assert(hb_tmp_exists("heap-20250107T000000Z-7-busy.pb.gz"));
	/* the directory-wide one is unchanged: 2 stamps of all */
	hb_touch("heap-20250108T000000Z-8-quiet.pb.gz", 100);
	hb_touch("heap-20250109T000000Z-8-quiet.pb.gz", 100);
	cr_assert_eq(snapshot_prune(hb_tmpdir(), 2, 0, &r, err, sizeof(err)), 0, "%s", err);
	cr_assert_not(hb_tmp_exists("heap-20250107T000000Z-7-busy.pb.gz"));
}
