// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The one path of what heapbpf says on stderr (util/errmsg.c): the prefix
 * each kind gets, the newline, and -q, which silences the notes only.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/errmsg.h"

TestSuite(diag);

static FILE *saved;
static char *text;
static size_t textlen;

/* stderr into memory from here to said() */
static void capture(void)
{
	saved = stderr;
	stderr = open_memstream(&text, &textlen);
	cr_assert(stderr);
}

/* What was said since capture(); the caller frees it. */
static char *said(void)
{
	fclose(stderr);
	stderr = saved;
	return text;
}

Test(diag, each_kind_has_its_prefix_and_one_newline)
{
	char *s;

	capture();
	hb_error("cannot open %s: %s", "x.pb.gz", "No such file or directory");
	hb_warn("retention leaves alone %d snapshot file(s)", 2);
	hb_say("pid %d: nothing was sampled", 42);
	hb_note("wrote %s", "heapbpf-42.pb.gz");
	hb_note_more("  %10s in use  %s", "1.0 MiB", "main");
	s = said();
	cr_assert_str_eq(s, "heapbpf: cannot open x.pb.gz: No such file or directory\n"
			    "heapbpf: warning: retention leaves alone 2 snapshot file(s)\n"
			    "heapbpf: pid 42: nothing was sampled\n"
			    "heapbpf: wrote heapbpf-42.pb.gz\n"
			    "     1.0 MiB in use  main\n");
	free(s);
}

Test(diag, quiet_silences_the_notes_only)
{
	char *s;

	hb_set_quiet(true);
	capture();
	hb_note("pid %d (%s): jemalloc 5.3.0", 42, "svc");
	hb_note_more("  a row");
	hb_error("refused: %s", "no jemalloc");
	hb_warn("the newest snapshot alone is larger than --max-bytes; it is kept");
	hb_say("restored prof_active in pid %d", 42);
	s = said();
	cr_assert_str_eq(s, "heapbpf: refused: no jemalloc\n"
			    "heapbpf: warning: the newest snapshot alone is larger than "
			    "--max-bytes; it is kept\n"
			    "heapbpf: restored prof_active in pid 42\n");
	free(s);

	hb_set_quiet(false);
	capture();
	hb_note("wrote %s", "f");
	s = said();
	cr_assert_str_eq(s, "heapbpf: wrote f\n");
	free(s);
}

/* Longer than the line buffer (paths of PATH_MAX, four bytes each through hb_clean): whole. */
Test(diag, a_long_line_is_said_whole)
{
	size_t n = 20000;
	char *name = malloc(n + 1), *want = malloc(n + 64), *s;

	cr_assert(name && want);
	memset(name, 'a', n);
	name[n] = '\0';
	snprintf(want, n + 64, "heapbpf: warning: cannot read %s: done\n", name);
	capture();
	hb_warn("cannot read %s: %s", name, "done");
	s = said();
	cr_assert_str_eq(s, want);
	free(s);
	free(name);
	free(want);
}

/* The one "clean up and print": a target's text made safe, with what failed before it. */
Test(errmsg, error_clean_says_what_and_cleans)
{
	char *out = NULL;
	size_t len = 0;
	FILE *saved = stderr;

	stderr = open_memstream(&out, &len);
	cr_assert_not_null(stderr);
	hb_error_clean("retention", "cannot open /x\x1b[2J: gone", NULL);
	hb_error_clean(NULL, "", "failed");
	hb_error_clean(NULL, "plain", "failed");
	fclose(stderr);
	stderr = saved;
	cr_assert_str_eq(out, "heapbpf: retention: cannot open /x\\x1b[2J: gone\n"
			      "heapbpf: failed\n"
			      "heapbpf: plain\n");
	free(out);
}
