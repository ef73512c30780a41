// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * make install / make uninstall, run for real into scratch trees with
 * DESTDIR: exactly the listed files with their modes, the units' ExecStart=
 * rewritten to the installed binary, the installed units accepted by
 * systemd-analyze verify inside the tree (--root), the man page rendered by
 * man-db without a groff warning and in step with --help (every long option
 * of one is in the other), and uninstall removing exactly what install put.
 *
 * make installs the binary under test: "-o BUILD/heapbpf" keeps make from
 * rebuilding it from a working tree that may have moved on.
 */
#include <ctype.h>
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "harness.h"

#define MAN_PAGE "man/heapbpf.8"

TestSuite(install, .fini = hb_tmpdir_cleanup, .timeout = 120);

/* Runs "sh -c cmd" with stdout and stderr into out; returns the exit status. */
static int sh(const char *cmd, char *out, size_t len)
{
	const char *argv[] = { "/bin/sh", "-c", cmd, NULL };
	char path[PATH_MAX], *text = NULL;
	pid_t pid;
	int rc;

	snprintf(path, sizeof(path), "%s/sh.out", hb_tmpdir());
	pid = hb_spawn(argv, path);
	cr_assert_gt(pid, 0);
	rc = hb_wait(pid, 90000);
	out[0] = '\0';
	if (hb_read_file(path, &text) >= 0) {
		snprintf(out, len, "%s", text);
		free(text);
	}
	unlink(path);
	return rc;
}

/* make TARGET BUILD=... -o BUILD/heapbpf VARS, outside any make that runs the tests. */
static void make(const char *target, const char *vars)
{
	char cmd[2 * PATH_MAX], out[16384];
	int rc;

	snprintf(cmd, sizeof(cmd),
		 "env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make --no-print-directory BUILD='%s' "
		 "-o '%s' %s %s",
		 hb_build_dir(), hb_path("heapbpf"), target, vars);
	rc = sh(cmd, out, sizeof(out));
	cr_assert_eq(rc, 0, "%s failed (%d): %s", cmd, rc, out);
}

/* A fresh directory under the test's temporary directory. */
static const char *scratch(const char *name)
{
	static char bufs[8][PATH_MAX];
	static int next;

	cr_assert_lt(next, 8);
	snprintf(bufs[next], PATH_MAX, "%s/%s", hb_tmpdir(), name);
	cr_assert_eq(mkdir(bufs[next], 0755), 0, "%s: %s", bufs[next], strerror(errno));
	return bufs[next++];
}

/* ---- the tree under a DESTDIR, as "MODE path" lines, sorted ---- */

static char tree[64][512];
static int ntree;
static size_t tree_root_len;

static int tree_add(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)type;
	(void)ftw;
	if (strlen(path) == tree_root_len)
		return 0;
	cr_assert_lt(ntree, 64, "more than 64 entries under the DESTDIR");
	snprintf(tree[ntree++], sizeof(tree[0]), "%c%04o %s",
		 S_ISDIR(st->st_mode)	? 'd'
		 : S_ISREG(st->st_mode) ? '-'
		 : S_ISLNK(st->st_mode) ? 'l'
					: '?',
		 st->st_mode & 07777, path + tree_root_len + 1);
	return 0;
}

static int cmp_lines(const void *a, const void *b)
{
	return strcmp(a, b);
}

/* Every entry under root, "d0755 usr/local", "-0644 usr/local/.../x", sorted. */
static void list_tree(const char *root)
{
	ntree = 0;
	tree_root_len = strlen(root);
	cr_assert_eq(nftw(root, tree_add, 16, FTW_PHYS), 0);
	qsort(tree, ntree, sizeof(tree[0]), cmp_lines);
}

static void assert_tree(const char *root, const char *const *want)
{
	char *got = NULL, *exp = NULL;
	size_t gotlen, explen;
	FILE *g = open_memstream(&got, &gotlen), *e = open_memstream(&exp, &explen);

	cr_assert(g && e);
	list_tree(root);
	for (int i = 0; i < ntree; i++)
		fprintf(g, "%s\n", tree[i]);
	for (int i = 0; want[i]; i++)
		fprintf(e, "%s\n", want[i]);
	fclose(g);
	fclose(e);
	cr_assert_str_eq(got, exp, "installed tree:\n%s\nexpected:\n%s", got, exp);
	free(got);
	free(exp);
}

/* ---- file contents ---- */

static char *slurp(const char *path)
{
	char *text = NULL;

	cr_assert_geq(hb_read_file(path, &text), 0, "cannot read %s", path);
	return text;
}

static void assert_same_file(const char *a, const char *b)
{
	char cmd[2 * PATH_MAX + 16], out[1024];

	snprintf(cmd, sizeof(cmd), "cmp '%s' '%s'", a, b);
	cr_assert_eq(sh(cmd, out, sizeof(out)), 0, "%s", out);
}

/*
 * The installed unit is the example with its ExecStart= line, and only that
 * line, naming bin/heapbpf.
 */
static void assert_unit_rewritten(const char *installed, const char *example, const char *bin)
{
	char *got = slurp(installed), *want = slurp(example);
	char *gl, *wl, *gs = NULL, *ws = NULL, prefix[PATH_MAX + 16];
	int exec_lines = 0;

	snprintf(prefix, sizeof(prefix), "ExecStart=%s ", bin);
	gl = strtok_r(got, "\n", &gs);
	wl = strtok_r(want, "\n", &ws);
	for (; gl && wl; gl = strtok_r(NULL, "\n", &gs), wl = strtok_r(NULL, "\n", &ws)) {
		if (strncmp(wl, "ExecStart=", 10) == 0) {
			cr_assert_eq(strncmp(gl, prefix, strlen(prefix)), 0, "%s: %s", installed,
				     gl);
			/* the arguments are the example's */
			cr_assert_str_eq(gl + strlen(prefix), strchr(wl, ' ') + 1);
			exec_lines++;
		} else {
			cr_assert_str_eq(gl, wl, "%s", installed);
		}
	}
	cr_assert(!gl && !wl, "%s and %s differ in length", installed, example);
	cr_assert_eq(exec_lines, 1);
	free(got);
	free(want);
}

static const char *const default_tree[] = {
	"-0644 usr/local/lib/heapbpf/libjemalloc.so.2",
	"-0644 usr/local/lib/systemd/system/heapbpf-agent.service",
	"-0644 usr/local/lib/systemd/system/heapbpf-snapshot@.service",
	"-0644 usr/local/lib/systemd/system/heapbpf-snapshot@.timer",
	"-0644 usr/local/lib/systemd/system/heapbpf-watch@.service",
	"-0644 usr/local/share/man/man8/heapbpf-agent.8",
	"-0644 usr/local/share/man/man8/heapbpf-diff.8",
	"-0644 usr/local/share/man/man8/heapbpf-report.8",
	"-0644 usr/local/share/man/man8/heapbpf-rss.8",
	"-0644 usr/local/share/man/man8/heapbpf-status.8",
	"-0644 usr/local/share/man/man8/heapbpf-top.8",
	"-0644 usr/local/share/man/man8/heapbpf-watch.8",
	"-0644 usr/local/share/man/man8/heapbpf.8",
	"-0755 usr/local/bin/heapbpf",
	"d0755 usr",
	"d0755 usr/local",
	"d0755 usr/local/bin",
	"d0755 usr/local/lib",
	"d0755 usr/local/lib/heapbpf",
	"d0755 usr/local/lib/systemd",
	"d0755 usr/local/lib/systemd/system",
	"d0755 usr/local/share",
	"d0755 usr/local/share/man",
	"d0755 usr/local/share/man/man8",
	NULL,
};

Test(install, default_prefix_installs_exactly_the_listed_files)
{
	const char *dest = scratch("dest");
	char vars[PATH_MAX + 32], p[2][PATH_MAX];

	snprintf(vars, sizeof(vars), "DESTDIR='%s'", dest);
	/* under a umask that would hide the files from their readers */
	umask(077);
	make("install", vars);
	assert_tree(dest, default_tree);

	snprintf(p[0], PATH_MAX, "%s/usr/local/bin/heapbpf", dest);
	assert_same_file(p[0], hb_path("heapbpf"));
	/* the jemalloc to preload, beside heapbpf (BINDIR/../lib/heapbpf) where it looks */
	snprintf(p[0], PATH_MAX, "%s/usr/local/lib/heapbpf/libjemalloc.so.2", dest);
	assert_same_file(p[0], hb_path("jemalloc/libjemalloc.so.2"));
	snprintf(p[0], PATH_MAX, "%s/usr/local/share/man/man8/heapbpf.8", dest);
	assert_same_file(p[0], MAN_PAGE);
	snprintf(p[0], PATH_MAX, "%s/usr/local/lib/systemd/system/heapbpf-snapshot@.service", dest);
	assert_unit_rewritten(p[0], "examples/systemd/heapbpf-snapshot@.service",
			      "/usr/local/bin/heapbpf");
	snprintf(p[1], PATH_MAX, "%s/usr/local/lib/systemd/system/heapbpf-snapshot@.timer", dest);
	assert_same_file(p[1], "examples/systemd/heapbpf-snapshot@.timer");
	snprintf(p[0], PATH_MAX, "%s/usr/local/lib/systemd/system/heapbpf-watch@.service", dest);
	assert_unit_rewritten(p[0], "examples/systemd/heapbpf-watch@.service",
			      "/usr/local/bin/heapbpf");
	snprintf(p[0], PATH_MAX, "%s/usr/local/lib/systemd/system/heapbpf-agent.service", dest);
	assert_unit_rewritten(p[0], "examples/systemd/heapbpf-agent.service",
			      "/usr/local/bin/heapbpf");

	/* installing again over it changes nothing */
	make("install", vars);
	assert_tree(dest, default_tree);
}

Test(install, prefix_moves_everything_and_execstart_follows)
{
	static const char *const want[] = {
		"-0644 opt/heapbpf/lib/heapbpf/libjemalloc.so.2",
		"-0644 opt/heapbpf/lib/systemd/system/heapbpf-agent.service",
		"-0644 opt/heapbpf/lib/systemd/system/heapbpf-snapshot@.service",
		"-0644 opt/heapbpf/lib/systemd/system/heapbpf-snapshot@.timer",
		"-0644 opt/heapbpf/lib/systemd/system/heapbpf-watch@.service",
		"-0644 opt/heapbpf/share/man/man8/heapbpf-agent.8",
		"-0644 opt/heapbpf/share/man/man8/heapbpf-diff.8",
		"-0644 opt/heapbpf/share/man/man8/heapbpf-report.8",
		"-0644 opt/heapbpf/share/man/man8/heapbpf-rss.8",
		"-0644 opt/heapbpf/share/man/man8/heapbpf-status.8",
		"-0644 opt/heapbpf/share/man/man8/heapbpf-top.8",
		"-0644 opt/heapbpf/share/man/man8/heapbpf-watch.8",
		"-0644 opt/heapbpf/share/man/man8/heapbpf.8",
		"-0755 opt/heapbpf/bin/heapbpf",
		"d0755 opt",
		"d0755 opt/heapbpf",
		"d0755 opt/heapbpf/bin",
		"d0755 opt/heapbpf/lib",
		"d0755 opt/heapbpf/lib/heapbpf",
		"d0755 opt/heapbpf/lib/systemd",
		"d0755 opt/heapbpf/lib/systemd/system",
		"d0755 opt/heapbpf/share",
		"d0755 opt/heapbpf/share/man",
		"d0755 opt/heapbpf/share/man/man8",
		NULL,
	};
	const char *dest = scratch("dest");
	char vars[PATH_MAX + 64], unit[PATH_MAX];

	snprintf(vars, sizeof(vars), "DESTDIR='%s' PREFIX=/opt/heapbpf", dest);
	make("install", vars);
	assert_tree(dest, want);
	snprintf(unit, sizeof(unit), "%s/opt/heapbpf/lib/systemd/system/heapbpf-snapshot@.service",
		 dest);
	assert_unit_rewritten(unit, "examples/systemd/heapbpf-snapshot@.service",
			      "/opt/heapbpf/bin/heapbpf");
	snprintf(unit, sizeof(unit), "%s/opt/heapbpf/lib/systemd/system/heapbpf-watch@.service",
		 dest);
	assert_unit_rewritten(unit, "examples/systemd/heapbpf-watch@.service",
			      "/opt/heapbpf/bin/heapbpf");
	snprintf(unit, sizeof(unit), "%s/opt/heapbpf/lib/systemd/system/heapbpf-agent.service",
		 dest);
	assert_unit_rewritten(unit, "examples/systemd/heapbpf-agent.service",
			      "/opt/heapbpf/bin/heapbpf");
	make("uninstall", vars);
	list_tree(dest);
	for (int i = 0; i < ntree; i++)
		cr_assert_eq(tree[i][0], 'd', "left behind: %s", tree[i]);
}

Test(install, relative_prefix_refused)
{
	char cmd[2 * PATH_MAX], out[4096];
	const char *dest = scratch("dest");

	snprintf(cmd, sizeof(cmd),
		 "env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make --no-print-directory BUILD='%s' "
		 "-o '%s' install DESTDIR='%s' PREFIX=opt/heapbpf",
		 hb_build_dir(), hb_path("heapbpf"), dest);
	cr_assert_neq(sh(cmd, out, sizeof(out)), 0, "%s", out);
	cr_assert(strstr(out, "must be an absolute path"), "%s", out);
	list_tree(dest);
	cr_assert_eq(ntree, 0, "a refused install wrote %s", ntree ? tree[0] : "");
}

Test(install, uninstall_removes_exactly_what_install_put)
{
	static const char *const others[] = {
		"-0644 usr/local/bin/other-tool",
		"-0644 usr/local/lib/systemd/system/other.service",
		"-0644 usr/local/share/man/man8/other.8",
		NULL,
	};
	const char *dest = scratch("dest");
	char vars[PATH_MAX + 32], path[PATH_MAX];
	int files = 0;

	snprintf(vars, sizeof(vars), "DESTDIR='%s'", dest);
	make("install", vars);
	/* files of others beside ours stay */
	for (int i = 0; others[i]; i++) {
		FILE *f;

		snprintf(path, sizeof(path), "%s/%s", dest, others[i] + 6);
		f = fopen(path, "we");
		cr_assert_not_null(f, "%s", path);
		fclose(f);
		chmod(path, 0644);
	}
	make("uninstall", vars);
	list_tree(dest);
	for (int i = 0; i < ntree; i++) {
		if (tree[i][0] == 'd')
			continue;
		cr_assert_lt(files, 3, "left behind: %s", tree[i]);
		cr_assert_str_eq(tree[i], others[files], "left behind: %s", tree[i]);
		files++;
	}
	cr_assert_eq(files, 3);
	/* and a second uninstall, with nothing left to remove, succeeds */
	make("uninstall", vars);
}

Test(install, installed_units_pass_systemd_analyze_verify_in_the_tree)
{
	const char *root = scratch("root");
	char vars[PATH_MAX + 32], cmd[4 * PATH_MAX], out[8192], bin[PATH_MAX];
	int rc;

	snprintf(vars, sizeof(vars), "DESTDIR='%s'", root);
	make("install", vars);
	/*
	 * verify --root resolves everything inside the tree: the units by name in
	 * systemd's search path there (/usr/local/lib/systemd/system is one), the
	 * ExecStart= binary, and the units ours depend on (sysinit.target, ...),
	 * which a real root has: systemd's own are copied in beside ours.
	 */
	snprintf(
		cmd, sizeof(cmd),
		"mkdir -p '%s/usr/lib/systemd' && cp -r /usr/lib/systemd/system '%s/usr/lib/systemd/' "
		"&& cd / && systemd-analyze verify --man=no --root='%s' "
		"heapbpf-snapshot@redis-server.service heapbpf-snapshot@redis-server.timer "
		"heapbpf-watch@redis-server.service heapbpf-agent.service",
		root, root, root);
	rc = sh(cmd, out, sizeof(out));
	cr_assert_eq(rc, 0, "systemd-analyze verify failed (%d): %s", rc, out);
	cr_assert_str_empty(out, "systemd-analyze verify said: %s", out);

	/* it did check the installed binary: without it the same verify fails */
	snprintf(bin, sizeof(bin), "%s/usr/local/bin/heapbpf", root);
	cr_assert_eq(unlink(bin), 0);
	snprintf(cmd, sizeof(cmd),
		 "cd / && systemd-analyze verify --man=no --root='%s' "
		 "heapbpf-snapshot@redis-server.service heapbpf-snapshot@redis-server.timer "
		 "heapbpf-watch@redis-server.service heapbpf-agent.service",
		 root);
	rc = sh(cmd, out, sizeof(out));
	cr_assert_neq(rc, 0, "verify passed without the binary: %s", out);
	cr_assert(strstr(out, "/usr/local/bin/heapbpf"), "%s", out);
}

/* man-db renders the page (as installed and as in the tree) with every groff warning on. */
/* The --output-dir of the example unit's ExecStart= and its StateDirectory=, into dir and state. */
static void unit_dirs(const char *unit, char *dir, char *state, size_t len)
{
	char *text = slurp(unit);
	const char *o = strstr(text, "--output-dir "), *d = strstr(text, "\nStateDirectory=");

	cr_assert(o && d, "%s: no --output-dir or StateDirectory=", unit);
	o += strlen("--output-dir ");
	d += strlen("\nStateDirectory=");
	snprintf(dir, len, "%.*s", (int)strcspn(o, " \n"), o);
	snprintf(state, len, "%.*s", (int)strcspn(d, "\n"), d);
	free(text);
}

/*
 * A watch and a snapshot timer of one instance write to directories of
 * their own, each its StateDirectory=: the snapshots' --keep prunes every
 * profile name in its directory, and would take the watch's oom profiles.
 */
Test(install, watch_and_snapshot_units_keep_apart)
{
	char wdir[256], wstate[256], sdir[256], sstate[256], want[300];

	unit_dirs("examples/systemd/heapbpf-watch@.service", wdir, wstate, sizeof(wdir));
	unit_dirs("examples/systemd/heapbpf-snapshot@.service", sdir, sstate, sizeof(sdir));
	cr_assert_str_neq(wdir, sdir);
	snprintf(want, sizeof(want), "%%S/%s", wstate);
	cr_assert_str_eq(wdir, want, "the watch writes outside its StateDirectory=");
	snprintf(want, sizeof(want), "%%S/%s", sstate);
	cr_assert_str_eq(sdir, want, "the snapshots go outside their StateDirectory=");
	/* neither directory is inside the other's */
	cr_assert_neq(strncmp(wdir, sdir, strlen(sdir)) == 0 && wdir[strlen(sdir)] == '/', true,
		      "%s is inside %s", wdir, sdir);
	cr_assert_neq(strncmp(sdir, wdir, strlen(wdir)) == 0 && sdir[strlen(wdir)] == '/', true,
		      "%s is inside %s", sdir, wdir);
}

/* The value the unit's Environment= lines give var, into out ("" when none does). */
static void unit_env(const char *text, const char *var, char *out, size_t len)
{
	size_t vl = strlen(var);

	out[0] = '\0';
	for (const char *l = strstr(text, "\nEnvironment="); l;
	     l = strstr(l + 1, "\nEnvironment=")) {
		const char *end = strchr(l + 1, '\n'), *p = l + strlen("\nEnvironment=");

		if (!end)
			end = p + strlen(p);
		/* space-separated assignments; a quoted one ("VAR=a b") is not a retention setting */
		while (p < end) {
			size_t n = strcspn(p, " \n");

			if ((size_t)(end - p) > vl && strncmp(p, var, vl) == 0 && p[vl] == '=')
				snprintf(out, len, "%.*s", (int)(n - vl - 1), p + vl + 1);
			p += n;
			p += strspn(p, " ");
		}
	}
}

/*
 * Every unit that writes profiles bounds what it keeps: its ExecStart=
 * passes --keep and --max-bytes from HEAPBPF_KEEP and HEAPBPF_MAX_BYTES,
 * before $HEAPBPF_OPTS (which may give its own: the last one counts), into
 * the --output-dir that is its StateDirectory=, and its Environment= gives
 * both a value. The agent's unit had neither and kept every profile: with
 * 16 services and a window a minute each, 23,000 files a day.
 */
Test(install, units_bound_the_profiles_they_keep)
{
	static const char *const units[] = {
		"examples/systemd/heapbpf-snapshot@.service",
		"examples/systemd/heapbpf-watch@.service",
		"examples/systemd/heapbpf-agent.service",
	};

	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		char *text = slurp(units[i]), exec[1024], dir[256], state[256], want[300], v[64];
		const char *line = strstr(text, "\nExecStart="), *opts, *keep, *max;

		cr_assert_not_null(line, "%s: no ExecStart=", units[i]);
		snprintf(exec, sizeof(exec), "%.*s", (int)strcspn(line + 1, "\n"), line + 1);
		keep = strstr(exec, " --keep ${HEAPBPF_KEEP} ");
		max = strstr(exec, " --max-bytes ${HEAPBPF_MAX_BYTES} ");
		opts = strstr(exec, " $HEAPBPF_OPTS");
		cr_assert(keep && max, "%s keeps every profile: %s", units[i], exec);
		cr_assert(opts && keep < opts && max < opts, "%s: $HEAPBPF_OPTS comes first: %s",
			  units[i], exec);
		unit_env(text, "HEAPBPF_KEEP", v, sizeof(v));
		cr_assert(v[0] >= '1' && v[0] <= '9' && strspn(v, "0123456789") == strlen(v),
			  "%s: HEAPBPF_KEEP=%s", units[i], v);
		unit_env(text, "HEAPBPF_MAX_BYTES", v, sizeof(v));
		cr_assert(v[0] >= '1' && v[0] <= '9', "%s: HEAPBPF_MAX_BYTES=%s", units[i], v);
		unit_dirs(units[i], dir, state, sizeof(dir));
		snprintf(want, sizeof(want), "%%S/%s", state);
		cr_assert_str_eq(dir, want, "%s writes outside its StateDirectory=", units[i]);
		free(text);
	}
}

/* heapbpf(8) and one page per command: the command ("" for heapbpf --pid), its page, an option of its own. */
static const struct {
	const char *command, *page, *own;
} pages[] = {
	{ "", MAN_PAGE, "--spool-max-bytes" },
	{ "report", "man/heapbpf-report.8", "--binary-path" },
	{ "diff", "man/heapbpf-diff.8", "--binary-path" },
	{ "top", "man/heapbpf-top.8", "--by" },
	{ "watch", "man/heapbpf-watch.8", "--on-growth" },
	{ "agent", "man/heapbpf-agent.8", "--select" },
	{ "status", "man/heapbpf-status.8", NULL },
	{ "rss", "man/heapbpf-rss.8", "--format" },
};
#define NPAGES (sizeof(pages) / sizeof(pages[0]))

/* One page renders with no troff warning, with its sections (want: NULL-ended). */
static void assert_renders(const char *page, const char *const *want)
{
	char cmd[2 * PATH_MAX], out[65536];

	/* -ww: every troff warning (--warnings alone leaves some out) */
	snprintf(cmd, sizeof(cmd),
		 "MANWIDTH=80 LC_ALL=C.UTF-8 man --warnings=w -l '%s' 2>&1 >/dev/null", page);
	cr_assert_eq(sh(cmd, out, sizeof(out)), 0, "%s", out);
	cr_assert_str_empty(out, "man -l %s warned: %s", page, out);
	/* and it does render: the name line and the sections */
	snprintf(cmd, sizeof(cmd), "MANWIDTH=80 LC_ALL=C.UTF-8 man -l '%s' | col -bx", page);
	cr_assert_eq(sh(cmd, out, sizeof(out)), 0, "%s", out);
	for (size_t i = 0; want[i]; i++)
		cr_assert(strstr(out, want[i]), "%s: no %s in %s", page, want[i], out);
}

Test(install, man_page_renders_without_warnings)
{
	static const char *const main_sections[] = { "\nNAME\n", "\nOPTIONS\n", "\nSEE ALSO\n",
						     NULL };
	static const char *const cmd_sections[] = { "\nNAME\n", "\nSYNOPSIS\n", "\nDESCRIPTION\n",
						    "\nSEE ALSO\n", NULL };
	const char *dest = scratch("dest");
	char vars[PATH_MAX + 32], installed[PATH_MAX];

	snprintf(vars, sizeof(vars), "DESTDIR='%s'", dest);
	make("install", vars);
	for (size_t i = 0; i < NPAGES; i++) {
		const char *const *want = i ? cmd_sections : main_sections;

		snprintf(installed, sizeof(installed), "%s/usr/local/share/man/man8/%s", dest,
			 strrchr(pages[i].page, '/') + 1);
		assert_renders(pages[i].page, want);
		assert_renders(installed, want);
		assert_same_file(installed, pages[i].page);
	}
}

/* ---- the man page and --help name the same long options ---- */

#define MAX_OPTS 128

struct optset {
	char name[MAX_OPTS][40];
	int n;
};

static void optset_add(struct optset *s, const char *p, size_t len)
{
	if (len >= sizeof(s->name[0]))
		len = sizeof(s->name[0]) - 1;
	for (int i = 0; i < s->n; i++)
		if (strlen(s->name[i]) == len && strncmp(s->name[i], p, len) == 0)
			return;
	cr_assert_lt(s->n, MAX_OPTS);
	memcpy(s->name[s->n], p, len);
	s->name[s->n][len] = '\0';
	s->n++;
}

/* Every "--word" in text: a double dash right after a non-word character. */
static void long_options(const char *text, struct optset *s)
{
	for (const char *p = text; (p = strstr(p, "--")); p += 2) {
		size_t len = 2;

		if (p > text && (p[-1] == '-' || p[-1] == '_' || isalnum((unsigned char)p[-1])))
			continue;
		while (islower((unsigned char)p[len]) || isdigit((unsigned char)p[len]) ||
		       (p[len] == '-' && islower((unsigned char)p[len + 1])))
			len++;
		if (len > 2)
			optset_add(s, p, len);
	}
}

static bool optset_has(const struct optset *s, const char *name)
{
	for (int i = 0; i < s->n; i++)
		if (strcmp(s->name[i], name) == 0)
			return true;
	return false;
}

/* The page with roff's "\-" as '-' and comment lines (.\") left out. */
static char *man_text(const char *path)
{
	char *src = slurp(path), *out = calloc(1, strlen(src) + 1), *o = out;
	bool line_start = true;

	cr_assert_not_null(out);
	for (const char *p = src; *p;) {
		if (line_start && strncmp(p, ".\\\"", 3) == 0) {
			p = strchrnul(p, '\n');
			continue;
		}
		if (p[0] == '\\' && p[1] == '-') {
			*o++ = '-';
			p += 2;
		} else {
			line_start = *p == '\n';
			*o++ = *p++;
		}
	}
	free(src);
	return out;
}

/* heapbpf CMD --help and heapbpf-CMD(8) name the same long options, for every command. */
Test(install, man_options_match_help)
{
	char cmd[PATH_MAX + 64], *out = malloc(1 << 16), *page;

	cr_assert_not_null(out);
	for (size_t k = 0; k < NPAGES; k++) {
		struct optset help = { 0 }, man = { 0 };

		snprintf(cmd, sizeof(cmd), "'%s' %s --help", hb_path("heapbpf"), pages[k].command);
		cr_assert_eq(sh(cmd, out, 1 << 16), 0, "%s", out);
		long_options(out, &help);
		page = man_text(pages[k].page);
		long_options(page, &man);
		/* the parser finds what it should: each help's own options */
		if (pages[k].own)
			cr_assert(optset_has(&help, pages[k].own), "%s: %d options in --help",
				  pages[k].page, help.n);
		for (int i = 0; i < help.n; i++)
			cr_assert(optset_has(&man, help.name[i]),
				  "heapbpf %s --help prints %s, which %s does not describe",
				  pages[k].command, help.name[i], pages[k].page);
		for (int i = 0; i < man.n; i++)
			cr_assert(optset_has(&help, man.name[i]),
				  "%s describes %s, which heapbpf %s --help does not print",
				  pages[k].page, man.name[i], pages[k].command);
		free(page);
	}
	/* heapbpf --help: the one-shot's options and the general ones */
	snprintf(cmd, sizeof(cmd), "'%s' --help", hb_path("heapbpf"));
	cr_assert_eq(sh(cmd, out, 1 << 16), 0, "%s", out);
	cr_assert(strstr(out, "--pid") && strstr(out, "--file-mode") && strstr(out, "--version"),
		  "%s", out);
	free(out);
}

/* Each command's --help is its own: a screenful, not the whole tool's. */
Test(install, each_command_has_its_own_help)
{
	char cmd[PATH_MAX + 64], out[65536], all[65536];

	snprintf(cmd, sizeof(cmd), "'%s' --help", hb_path("heapbpf"));
	cr_assert_eq(sh(cmd, all, sizeof(all)), 0, "%s", all);
	cr_assert(strstr(all, "heapbpf watch --pid PID"), "the commands are not listed: %s", all);
	for (size_t k = 1; k < NPAGES; k++) {
		size_t lines = 0;
		char usage[64];

		snprintf(cmd, sizeof(cmd), "'%s' %s --help", hb_path("heapbpf"), pages[k].command);
		cr_assert_eq(sh(cmd, out, sizeof(out)), 0, "%s", out);
		for (const char *p = out; *p; p++)
			lines += *p == '\n';
		cr_assert_leq(lines, 40, "heapbpf %s --help: %zu lines", pages[k].command, lines);
		snprintf(usage, sizeof(usage), "Usage: heapbpf %s", pages[k].command);
		cr_assert(!strncmp(out, usage, strlen(usage)), "%s", out);
		cr_assert_str_neq(out, all);
		/* -h anywhere among the options: the same */
		snprintf(cmd, sizeof(cmd), "'%s' %s -q -h", hb_path("heapbpf"), pages[k].command);
		cr_assert_eq(sh(cmd, all, sizeof(all)), 0, "%s", all);
		cr_assert_str_eq(all, out);
		snprintf(cmd, sizeof(cmd), "'%s' --help", hb_path("heapbpf"));
		cr_assert_eq(sh(cmd, all, sizeof(all)), 0, "%s", all);
	}
}
