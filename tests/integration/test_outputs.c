// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Real profiles of the example, checked as their consumers read them: pprof
 * through an independent decoder (protoc with pprof's own profile.proto),
 * folded stacks line by line, and the summary on stderr.
 */
#include <ctype.h>
#include <dirent.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "harness.h"

#define PPROF_PROTO_DIR "/usr/share/gocode/src/github.com/google/pprof/proto"

TestSuite(outputs, .fini = hb_tmpdir_cleanup, .timeout = 90);

static struct svc svc;
static char pid[16];

static void start(void)
{
	const char *args[] = { "--threads", "2", NULL };

	hb_require_bpf();
	cr_assert_eq(svc_start(&svc, hb_path("examples/alloc-service-static"),
			       "prof:true,prof_active:false", args),
		     0);
	snprintf(pid, sizeof(pid), "%d", svc.pid);
}

/* The pprof at out, decoded by protoc into the text file txt: its text (free it). */
static char *decoded(const char *out, const char *txt)
{
	char cmd[3 * PATH_MAX], *text = NULL;

	snprintf(cmd, sizeof(cmd),
		 "gzip -dc '%s' | protoc --decode=perftools.profiles.Profile --proto_path=%s "
		 "profile.proto > '%s'",
		 out, PPROF_PROTO_DIR, txt);
	cr_assert_eq(system(cmd), 0, "protoc could not decode heapbpf's pprof");
	cr_assert_gt(hb_read_file(txt, &text), 0);
	return text;
}

Test(outputs, pprof_decodes_with_protoc)
{
	char out[PATH_MAX], txt[PATH_MAX], err[8192], *text;
	const char *args[] = { "--pid", pid, "-d", "2", "-o", out, NULL };

	start();
	snprintf(out, sizeof(out), "%s/heap.pb.gz", hb_tmpdir());
	snprintf(txt, sizeof(txt), "%s/heap.txt", hb_tmpdir());
	cr_assert_eq(hb_run(args, err, sizeof(err), 30000), 0, "stderr: %s", err);
	cr_assert_eq(svc_stop(&svc), 0);
	text = decoded(out, txt);
	/* the four sample types and the period type are in the string table */
	cr_assert(strstr(text, "string_table: \"alloc_objects\""));
	cr_assert(strstr(text, "string_table: \"alloc_space\""));
	cr_assert(strstr(text, "string_table: \"inuse_objects\""));
	cr_assert(strstr(text, "string_table: \"inuse_space\""));
	cr_assert(strstr(text, "string_table: \"space\""));
	cr_assert(strstr(text, "period: 524288"));
	cr_assert(strstr(text, "string_table: \"churn_small\""));
	cr_assert(strstr(text, "has_functions: true"));
	cr_assert(strstr(text, "build_id:"));
	free(text);
	/* the summary names the top sites */
	cr_assert(strstr(err, "top sites"), "stderr: %s", err);
	cr_assert(strstr(err, "large_buffers"), "stderr: %s", err);
}

/* The string of protoc's text output at index i of its string_table ("" for 0), or NULL. */
static char *string_at(const char *text, long i)
{
	const char *at = text;
	char *s, *end;

	for (long k = 0; k <= i; k++) {
		at = strstr(at, "string_table: \"");
		if (!at)
			return NULL;
		at += strlen("string_table: \"");
	}
	s = strdup(at);
	end = s ? strchr(s, '"') : NULL;
	if (end)
		*end = '\0';
	return s;
}

/* The file name of the profile's mapping number n (0: the first), or NULL. */
static char *mapping_file(const char *text, int n)
{
	const char *m = text, *f;

	for (int k = 0; k <= n; k++) {
		m = strstr(m, k ? "\nmapping {" : "mapping {");
		if (!m)
			return NULL;
		m++;
	}
	f = strstr(m, "filename: ");
	return f ? string_at(text, strtol(f + strlen("filename: "), NULL, 10)) : NULL;
}

/*
 * pprof takes the first mapping for the main binary ("File:" in -top, the
 * title, and what it symbolizes): the executable, not the libjemalloc whose
 * frames come first in every stack.
 */
Test(outputs, pprof_main_binary_is_the_first_mapping)
{
	char out[PATH_MAX], txt[PATH_MAX], err[8192], exe[PATH_MAX], *text, *first;
	const char *args[] = { "--pid", pid, "-d", "2", "-q", "-o", out, NULL };
	const char *sargs[] = { "--threads", "1", NULL };
	bool has_jemalloc = false;

	hb_require_bpf();
	cr_assert_not_null(realpath(hb_path("examples/alloc-service-shared"), exe));
	cr_assert_eq(svc_start(&svc, exe, "prof:true,prof_active:false", sargs), 0);
	snprintf(pid, sizeof(pid), "%d", svc.pid);
	snprintf(out, sizeof(out), "%s/shared.pb.gz", hb_tmpdir());
	snprintf(txt, sizeof(txt), "%s/shared.txt", hb_tmpdir());
	cr_assert_eq(hb_run(args, err, sizeof(err), 30000), 0, "stderr: %s", err);
	cr_assert_eq(svc_stop(&svc), 0);
	text = decoded(out, txt);
	first = mapping_file(text, 0);
	cr_assert_not_null(first, "no mapping: %.2000s", text);
	cr_assert_str_eq(first, exe, "the first mapping is %s, not the executable %s", first, exe);
	/* and libjemalloc, whose frames every stack starts with, is a later one */
	for (int i = 1; !has_jemalloc; i++) {
		char *f = mapping_file(text, i);

		if (!f)
			break;
		has_jemalloc = strstr(f, "libjemalloc.so") != NULL;
		free(f);
	}
	cr_assert(has_jemalloc, "no libjemalloc mapping after the executable's");
	free(first);
	free(text);
}

Test(outputs, folded_lines)
{
	char out[PATH_MAX], err[8192], *text, *line, *save;
	const char *args[] = { "--pid", pid,	       "-d", "2", "-f", "folded",
			       "-t",	"alloc_space", "-o", out, NULL };
	int lines = 0, leaf_churn = 0;

	start();
	snprintf(out, sizeof(out), "%s/heap.folded", hb_tmpdir());
	cr_assert_eq(hb_run(args, err, sizeof(err), 30000), 0, "stderr: %s", err);
	cr_assert_eq(svc_stop(&svc), 0);
	cr_assert_gt(hb_read_file(out, &text), 0);
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *sp = strrchr(line, ' '), *leaf;

		cr_assert(sp, "no count: %s", line);
		for (char *c = sp + 1; *c; c++)
			cr_assert(isdigit((unsigned char)*c), "count not an integer: %s", line);
		cr_assert_gt(strtoll(sp + 1, NULL, 10), 0);
		*sp = '\0';
		/* root first: the leaf, the caller of malloc, is last; jemalloc is trimmed */
		leaf = strrchr(line, ';');
		leaf = leaf ? leaf + 1 : line;
		cr_assert(!strstr(line, "je_"), "jemalloc frames left in: %s", line);
		cr_assert(strncmp(line, "worker_main", 11) != 0, "not root first: %s", line);
		leaf_churn += strcmp(leaf, "churn_small") == 0;
		lines++;
	}
	cr_assert_gt(lines, 2);
	cr_assert_eq(leaf_churn, 1, "churn_small should be the leaf of exactly one stack");
	free(text);
}

/* Whether name is "heap-YYYYmmddTHHMMSSZ-" then rest. */
static bool stamped(const char *name, const char *rest)
{
	if (strncmp(name, "heap-", 5) != 0 || strlen(name) < 22 || name[13] != 'T' ||
	    name[20] != 'Z' || name[21] != '-')
		return false;
	for (int i = 5; i < 20; i++) {
		if (i != 13 && !isdigit((unsigned char)name[i]))
			return false;
	}
	return strcmp(name + 22, rest) == 0;
}

/*
 * One default name scheme, the snapshots' (heap-STAMP-WHAT.EXT, UTC): a
 * one-shot run's profile is heap-STAMP-PID-COMM.pb.gz, report's
 * heap-STAMP-report.EXT, diff's heap-STAMP-diff.pb.gz.
 */
Test(outputs, default_names_follow_one_scheme)
{
	const char *dir = hb_tmp("cwd");
	char cmd[5 * PATH_MAX], bin[PATH_MAX], want[64], err[4096];
	struct dirent **names;
	bool one = false, report = false, diff = false;
	int n, rc;

	start();
	cr_assert_not_null(realpath(hb_path("heapbpf"), bin));
	cr_assert_eq(mkdir(dir, 0700), 0);
	snprintf(cmd, sizeof(cmd),
		 "cd '%s' && { '%s' --pid %s -d 1 -q; for f in heap-*.pb.gz; do "
		 "'%s' report \"$f\" -f folded -q && '%s' diff \"$f\" \"$f\" -q; done; }",
		 dir, bin, pid, bin, bin);
	rc = hb_wait(hb_spawn((const char *[]){ "/bin/sh", "-c", cmd, NULL }, hb_tmp("cwd.err")),
		     120000);
	snprintf(err, sizeof(err), "%s", hb_file_text(hb_tmp("cwd.err")));
	cr_assert(rc == 0 || rc == 3, "exit %d: %s", rc, err);
	snprintf(want, sizeof(want), "%s-alloc-service-s.pb.gz", pid);
	n = scandir(dir, &names, NULL, alphasort);
	cr_assert_eq(n, 5, "%s", err);
	for (int i = 0; i < n; i++) {
		one |= stamped(names[i]->d_name, want);
		report |= stamped(names[i]->d_name, "report.folded");
		diff |= stamped(names[i]->d_name, "diff.pb.gz");
		free(names[i]);
	}
	free(names);
	cr_assert(one && report && diff, "one %d, report %d, diff %d: %s", one, report, diff, err);
}
