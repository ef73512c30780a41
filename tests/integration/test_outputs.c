// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Real profiles of the example, checked as their consumers read them: pprof
 * through an independent decoder (protoc with pprof's own profile.proto),
 * folded stacks line by line, and the summary on stderr.
 */
#include <ctype.h>
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

Test(outputs, pprof_decodes_with_protoc)
{
	char out[PATH_MAX], txt[PATH_MAX], cmd[3 * PATH_MAX], err[8192], *text;
	const char *args[] = { "--pid", pid, "-d", "2", "-o", out, NULL };

	start();
	snprintf(out, sizeof(out), "%s/heap.pb.gz", hb_tmpdir());
	snprintf(txt, sizeof(txt), "%s/heap.txt", hb_tmpdir());
	cr_assert_eq(hb_run(args, err, sizeof(err), 30000), 0, "stderr: %s", err);
	cr_assert_eq(svc_stop(&svc), 0);
	snprintf(cmd, sizeof(cmd),
		 "gzip -dc '%s' | protoc --decode=perftools.profiles.Profile --proto_path=%s "
		 "profile.proto > '%s'",
		 out, PPROF_PROTO_DIR, txt);
	cr_assert_eq(system(cmd), 0, "protoc could not decode heapbpf's pprof");
	cr_assert_gt(hb_read_file(txt, &text), 0);
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
