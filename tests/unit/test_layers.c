// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * scripts/layers.py, the check make lint runs on user/'s stage folders: the
 * real tree passes; a made-up tree with an upward include, an include cycle
 * inside one folder, a bare include of a folder's header, a command
 * including another command, or a folder in no layer fails, naming the
 * culprit.
 */
#include <criterion/criterion.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "harness.h"

TestSuite(layers, .fini = hb_tmpdir_cleanup);

/* Writes root/rel with text, making its folders. */
static void put(const char *rel, const char *text)
{
	char path[PATH_MAX], cmd[PATH_MAX + 32];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", hb_tmpdir(), rel);
	snprintf(cmd, sizeof(cmd), "mkdir -p \"$(dirname '%s')\"", path);
	cr_assert_eq(system(cmd), 0);
	f = fopen(path, "w");
	cr_assert_not_null(f, "%s", path);
	fputs(text, f);
	fclose(f);
}

/* Runs the check on root (NULL: the repository) with the layers; its exit code, its output in out. */
static int run_check(const char *root, const char *layers, char *out, size_t len)
{
	char cmd[PATH_MAX * 2], path[PATH_MAX];
	FILE *p;
	size_t n;
	int st;

	snprintf(path, sizeof(path), "%s/layers.out", hb_tmpdir());
	snprintf(cmd, sizeof(cmd), "python3 scripts/layers.py --root '%s' %s > '%s' 2>&1",
		 root ? root : ".", layers, path);
	st = system(cmd);
	p = fopen(path, "r");
	cr_assert_not_null(p);
	n = fread(out, 1, len - 1, p);
	out[n] = '\0';
	fclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* util/ at the bottom, a/ above it, the command on top. */
static void small_tree(void)
{
	put("user/util/base.h", "#include <stdio.h>\n#include \"heapbpf.h\"\n");
	put("user/util/base.c", "#include \"util/base.h\"\n");
	put("user/a/mid.h", "#include \"util/base.h\"\n");
	put("user/a/mid.c", "#include \"a/mid.h\"\n#include \"util/base.h\"\n");
	put("user/main.c", "#include \"a/mid.h\"\n");
}

Test(layers, the_repository_passes)
{
	char out[8192];

	cr_assert_eq(
		run_check(NULL,
			  "--isolated cmd --apart sampling=profile,export util symbols jemalloc "
			  "collect profile heap export targets sampling run cli cmd",
			  out, sizeof(out)),
		0, "%s", out);
	cr_assert(strstr(out, "no upward include, no cycle"), "%s", out);
}

Test(layers, a_sound_tree_passes)
{
	char out[4096];

	small_tree();
	cr_assert_eq(run_check(hb_tmpdir(), "util a", out, sizeof(out)), 0, "%s", out);
}

Test(layers, an_upward_include_fails)
{
	char out[4096];

	small_tree();
	/* the bottom reaching up into a/ */
	put("user/util/base.c", "#include \"util/base.h\"\n#include \"a/mid.h\"\n");
	cr_assert_eq(run_check(hb_tmpdir(), "util a", out, sizeof(out)), 1, "%s", out);
	cr_assert(strstr(out, "user/util/base.c includes a/mid.h, which is in user/a/, above "
			      "user/util/"),
		  "%s", out);
	/* and into the commands */
	put("user/util/base.c", "#include \"util/base.h\"\n");
	put("user/main.h", "\n");
	put("user/a/mid.c", "#include \"a/mid.h\"\n#include \"main.h\"\n");
	cr_assert_eq(run_check(hb_tmpdir(), "util a", out, sizeof(out)), 1, "%s", out);
	cr_assert(strstr(out, "user/a/mid.c includes main.h, which is in user/ (the commands)"),
		  "%s", out);
}

Test(layers, a_cycle_inside_a_folder_fails)
{
	char out[4096];

	small_tree();
	put("user/a/other.h", "#include \"a/mid.h\"\n");
	put("user/a/mid.c", "#include \"a/mid.h\"\n#include \"a/other.h\"\n");
	cr_assert_eq(run_check(hb_tmpdir(), "util a", out, sizeof(out)), 1, "%s", out);
	cr_assert(strstr(out, "include cycle: user/a/mid -> user/a/other -> user/a/mid"), "%s",
		  out);
}

Test(layers, a_folder_in_no_layer_fails)
{
	char out[4096];

	small_tree();
	put("user/stray/x.c", "\n");
	cr_assert_neq(run_check(hb_tmpdir(), "util a", out, sizeof(out)), 0, "%s", out);
	cr_assert(strstr(out, "user/stray is in no layer"), "%s", out);
}

/* An include must name its folder: bare, of another folder's header or of its own, it fails. */
Test(layers, a_bare_include_fails)
{
	char out[4096];

	small_tree();
	put("user/a/mid.c", "#include \"a/mid.h\"\n#include \"base.h\"\n");
	cr_assert_eq(run_check(hb_tmpdir(), "util a", out, sizeof(out)), 1, "%s", out);
	cr_assert(strstr(out, "user/a/mid.c includes base.h by its bare name: name its folder, "
			      "util/base.h"),
		  "%s", out);
	put("user/a/mid.c", "#include \"mid.h\"\n#include \"util/base.h\"\n");
	cr_assert_eq(run_check(hb_tmpdir(), "util a", out, sizeof(out)), 1, "%s", out);
	cr_assert(strstr(out, "user/a/mid.c includes mid.h by its bare name"), "%s", out);
	/* an upward one, bare, is both */
	put("user/a/mid.c", "#include \"a/mid.h\"\n");
	put("user/util/base.c", "#include \"mid.h\"\n");
	cr_assert_eq(run_check(hb_tmpdir(), "util a", out, sizeof(out)), 1, "%s", out);
	cr_assert(strstr(out, "user/util/base.c includes mid.h, which is in user/a/"), "%s", out);
}

/* The commands (an --isolated folder) include none of each other's headers; their own, yes. */
Test(layers, a_command_including_a_command_fails)
{
	char out[4096];

	small_tree();
	put("user/cmd/one.h", "\n");
	put("user/cmd/one.c", "#include \"cmd/one.h\"\n#include \"a/mid.h\"\n");
	put("user/cmd/two.h", "\n");
	put("user/cmd/two.c", "#include \"cmd/two.h\"\n");
	cr_assert_eq(run_check(hb_tmpdir(), "--isolated cmd util a cmd", out, sizeof(out)), 0, "%s",
		     out);
	put("user/cmd/two.c", "#include \"cmd/two.h\"\n#include \"cmd/one.h\"\n");
	cr_assert_eq(run_check(hb_tmpdir(), "--isolated cmd util a cmd", out, sizeof(out)), 1, "%s",
		     out);
	cr_assert(strstr(out, "user/cmd/two.c includes cmd/one.h: one module of user/cmd/ "
			      "includes another's"),
		  "%s", out);
	/* the same tree without the rule: no violation */
	cr_assert_eq(run_check(hb_tmpdir(), "util a cmd", out, sizeof(out)), 0, "%s", out);
}

/*
 * A module's prefix is its file name: a header declares functions named
 * after a module of its folder (x_, x__, or FOLDER_x_), util's also hb_;
 * anything else fails, naming the header and the function.
 */
Test(layers, a_prefix_that_is_no_modules_name_fails)
{
	char out[4096];

	small_tree();
	put("user/a/mid.h", "#include \"util/base.h\"\n"
			    "int mid_count(void);\n"
			    "struct mid *mid__new(void);\n"
			    "/* other_thing(void) in a comment is no declaration */\n"
			    "typedef int (*mid_fn)(void *);\n"
			    "void a_mid_reset(int x);\n");
	put("user/util/base.h", "int hb_fail(void);\nint base_open(void);\n");
	cr_assert_eq(run_check(hb_tmpdir(), "util a", out, sizeof(out)), 0, "%s", out);
	cr_assert(strstr(out, "every prefix a module's name"), "%s", out);
	put("user/a/mid.h", "#include \"util/base.h\"\nconst char *hb_mid_name(int k);\n");
	cr_assert_eq(run_check(hb_tmpdir(), "util a", out, sizeof(out)), 1, "%s", out);
	cr_assert(strstr(out, "user/a/mid.h declares hb_mid_name(): a module's prefix is its file "
			      "name (mid_...)"),
		  "%s", out);
}

Test(layers, a_mode_below_the_commands_fails)
{
	char out[4096];

	small_tree();
	/* the option parser names the modes; a comment may too */
	put("user/util/cli.h", "enum cli_mode { MODE_LIVE, MODE_TOP };\n");
	put("user/util/base.c", "#include \"util/base.h\"\n/* as MODE_TOP does */\n");
	cr_assert_eq(run_check(hb_tmpdir(), "util a", out, sizeof(out)), 0, "%s", out);
	/* the run layer telling a command apart */
	put("user/util/base.c",
	    "#include \"util/base.h\"\nint f(int m) { return m == MODE_TOP; }\n");
	cr_assert_eq(run_check(hb_tmpdir(), "util a", out, sizeof(out)), 1, "%s", out);
	cr_assert(strstr(out, "user/util/base.c tests a command's mode (MODE_TOP)"), "%s", out);
}

Test(layers, a_folder_kept_apart_fails)
{
	char out[4096];

	small_tree();
	put("user/b/low.h", "\n");
	put("user/a/mid.c", "#include \"a/mid.h\"\n#include \"b/low.h\"\n");
	cr_assert_eq(run_check(hb_tmpdir(), "util b a", out, sizeof(out)), 0, "%s", out);
	cr_assert_eq(run_check(hb_tmpdir(), "--apart a=b util b a", out, sizeof(out)), 1, "%s",
		     out);
	cr_assert(strstr(out, "user/a/mid.c includes b/low.h: user/a/ stays apart from user/b/"),
		  "%s", out);
}
