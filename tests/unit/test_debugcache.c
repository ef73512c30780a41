// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * debuginfod's cache, decided before libdebuginfod is used
 * (debugsearch_cache_decide): the directory libdebuginfod would choose, by its
 * rules (DEBUGINFOD_CACHE_PATH, $HOME/.debuginfod_client_cache,
 * XDG_CACHE_HOME, $HOME/.cache), is used only if it and the way to it pass
 * the checks of heapbpf's own directories and it holds nothing another user
 * owns; else the fallback, checked the same way; else none. Another user's
 * directory, a HOME of theirs, a link they planted (on the way, or in the
 * cache) and a directory others can write are refused, and nothing is made
 * or changed in them; root's own 0700 cache is used. Run as root: the
 * directories are chown'ed to nobody (65534).
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "symbols/debugsearch.h"
#include "harness.h"
#include "util/output.h"

#pragma GCC diagnostic ignored "-Wformat-truncation"

#define NOBODY 65534

static void clean_env(void)
{
	unsetenv("DEBUGINFOD_CACHE_PATH");
	unsetenv("XDG_CACHE_HOME");
	unsetenv("HOME");
	/* the invoker trusted by output_trusted_uid is root, whoever ran the tests */
	unsetenv("SUDO_UID");
}

static void setup(void)
{
	clean_env();
	/* reachable by nobody, as a real attacker's directory is */
	cr_assert_eq(chmod(hb_tmpdir(), 0755), 0);
}

TestSuite(debugcache, .init = setup, .fini = hb_tmpdir_cleanup, .timeout = 30);

/* mkdir <test dir>/rel, owned by uid, of mode exactly; its path. */
static const char *dir_as(const char *rel, uid_t uid, mode_t mode)
{
	const char *p = hb_tmp(rel);

	cr_assert_eq(mkdir(p, 0700), 0, "%s: %s", p, strerror(errno));
	cr_assert_eq(chown(p, uid, uid), 0);
	cr_assert_eq(chmod(p, mode), 0);
	return p;
}

/* A symbolic link at <test dir>/rel to target, owned by uid. */
static const char *link_as(const char *rel, const char *target, uid_t uid)
{
	const char *p = hb_tmp(rel);

	cr_assert_eq(symlink(target, p), 0, "%s: %s", p, strerror(errno));
	cr_assert_eq(lchown(p, uid, uid), 0);
	return p;
}

/* How many entries dir holds, -1 when it is not there. */
static int entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	closedir(d);
	return n;
}

static bool exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

/*
 * The decision, with the fallback at <test dir>/heapbpf/debuginfod, as
 * /var/cache/heapbpf/debuginfod in /var/cache (both made by the decision).
 */
static void decide(struct debug_cache *c, char *fallback, size_t len)
{
	snprintf(fallback, len, "%s/heapbpf/debuginfod", hb_tmpdir());
	debugsearch_cache_decide(fallback, c);
}

/* chosen refused with code, the fallback made root's 0700 and used. */
static void assert_refused(const struct debug_cache *c, const char *chosen, int code,
			   const char *fallback)
{
	struct stat st;

	cr_assert_str_eq(c->chosen, chosen);
	cr_assert_eq(c->refused, code, "%s: %d, not %d (%s)", chosen, c->refused, code, c->why);
	cr_assert_neq(c->why[0], '\0');
	cr_assert_str_eq(c->used, fallback, "%s (%s)", c->used, c->fallback_why);
	cr_assert_eq(c->fallback_refused, 0);
	cr_assert_eq(stat(fallback, &st), 0);
	cr_assert_eq(st.st_uid, 0);
	cr_assert_eq(st.st_mode & 07777, 0700, "%o", st.st_mode & 07777);
}

Test(debugcache, attacker_owned_cache_path_is_refused)
{
	char fallback[PATH_MAX];
	struct debug_cache c;
	const char *theirs = dir_as("theirs", NOBODY, 0755);

	setenv("DEBUGINFOD_CACHE_PATH", theirs, 1);
	decide(&c, fallback, sizeof(fallback));
	assert_refused(&c, theirs, -OUTPUT_EOWNER, fallback);
	cr_assert_eq(entries(theirs), 0, "something was made in the attacker's cache");
	/* mode 0700 does not help: its owner can chmod it */
	cr_assert_eq(chmod(theirs, 0700), 0);
	decide(&c, fallback, sizeof(fallback));
	assert_refused(&c, theirs, -OUTPUT_EOWNER, fallback);
	/* a cache to be made in the attacker's directory: refused, nothing made */
	setenv("DEBUGINFOD_CACHE_PATH", hb_tmp("theirs/cache"), 1);
	decide(&c, fallback, sizeof(fallback));
	assert_refused(&c, hb_tmp("theirs/cache"), -OUTPUT_EPATH, fallback);
	cr_assert_eq(entries(theirs), 0, "something was made in the attacker's directory");
}

Test(debugcache, home_of_another_user_is_refused)
{
	char fallback[PATH_MAX], want[PATH_MAX];
	struct debug_cache c;
	const char *home = dir_as("home", NOBODY, 0755);

	/* libdebuginfod would make $HOME/.cache and debuginfod_client in it */
	setenv("HOME", home, 1);
	snprintf(want, sizeof(want), "%s/.cache/debuginfod_client", home);
	decide(&c, fallback, sizeof(fallback));
	assert_refused(&c, want, -OUTPUT_EPATH, fallback);
	cr_assert_eq(entries(home), 0, "something was made in the other user's home");
	/* a .cache of theirs already there: the same */
	cr_assert_eq(mkdir(hb_tmp("home/.cache"), 0700), 0);
	cr_assert_eq(chown(hb_tmp("home/.cache"), NOBODY, NOBODY), 0);
	decide(&c, fallback, sizeof(fallback));
	assert_refused(&c, want, -OUTPUT_EPATH, fallback);
	cr_assert_eq(entries(hb_tmp("home/.cache")), 0);
	/* XDG_CACHE_HOME in it */
	setenv("XDG_CACHE_HOME", hb_tmp("home/.cache"), 1);
	decide(&c, fallback, sizeof(fallback));
	assert_refused(&c, want, -OUTPUT_EPATH, fallback);
	/* the old name, when it exists, comes before XDG_CACHE_HOME (as in libdebuginfod) */
	cr_assert_eq(mkdir(hb_tmp("home/.debuginfod_client_cache"), 0700), 0);
	cr_assert_eq(chown(hb_tmp("home/.debuginfod_client_cache"), NOBODY, NOBODY), 0);
	snprintf(want, sizeof(want), "%s/.debuginfod_client_cache", home);
	decide(&c, fallback, sizeof(fallback));
	assert_refused(&c, want, -OUTPUT_EPATH, fallback);
	cr_assert_eq(entries(want), 0);
}

Test(debugcache, planted_symlink_is_refused)
{
	char fallback[PATH_MAX];
	struct debug_cache c;
	const char *mine = dir_as("mine", 0, 0700), *victim = hb_tmp("victim"), *link;
	struct stat st;
	FILE *f;

	f = fopen(victim, "we");
	cr_assert_not_null(f);
	fclose(f);
	/* in root's own 0700 cache, a link another user made: libdebuginfod would write through it */
	link_as("mine/cache_clean_interval_s", victim, NOBODY);
	setenv("DEBUGINFOD_CACHE_PATH", mine, 1);
	decide(&c, fallback, sizeof(fallback));
	assert_refused(&c, mine, -DEBUG_EFOREIGN, fallback);
	cr_assert(strstr(c.why, "cache_clean_interval_s"), "%s", c.why);
	cr_assert(strstr(c.why, "symbolic link another user owns"), "%s", c.why);
	cr_assert_eq(stat(victim, &st), 0);
	cr_assert_eq(st.st_size, 0, "written through the link");
	/* the cache itself a link another user made in a shared (sticky) directory */
	dir_as("sticky", 0, 01777);
	cr_assert_eq(unlink(hb_tmp("mine/cache_clean_interval_s")), 0);
	link = link_as("sticky/cache", mine, NOBODY);
	setenv("DEBUGINFOD_CACHE_PATH", link, 1);
	decide(&c, fallback, sizeof(fallback));
	assert_refused(&c, link, -OUTPUT_ELINKIN, fallback);
	/* the same link made by root is followed */
	cr_assert_eq(lchown(link, 0, 0), 0);
	decide(&c, fallback, sizeof(fallback));
	cr_assert_eq(c.refused, 0, "%s", c.why);
	cr_assert_str_eq(c.used, link);
}

Test(debugcache, roots_own_0700_cache_is_used)
{
	char fallback[PATH_MAX], want[PATH_MAX];
	struct debug_cache c;
	const char *mine = dir_as("mine", 0, 0700), *home = dir_as("roothome", 0, 0755);
	struct stat st;

	/* with what libdebuginfod leaves in it */
	hb_sh("mkdir -m 0700 '%s/0123abcd' && echo 86400 > '%s/cache_clean_interval_s'", mine,
	      mine);
	setenv("DEBUGINFOD_CACHE_PATH", mine, 1);
	decide(&c, fallback, sizeof(fallback));
	cr_assert_eq(c.refused, 0, "%s", c.why);
	cr_assert_str_eq(c.chosen, mine);
	cr_assert_str_eq(c.used, mine);
	cr_assert_not(exists(hb_tmp("heapbpf")), "the fallback was made");
	/* missing, in root's directory: made 0700, as a cache of root's */
	setenv("DEBUGINFOD_CACHE_PATH", hb_tmp("mine/new"), 1);
	decide(&c, fallback, sizeof(fallback));
	cr_assert_eq(c.refused, 0, "%s", c.why);
	cr_assert_str_eq(c.used, hb_tmp("mine/new"));
	cr_assert_eq(stat(hb_tmp("mine/new"), &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0700, "%o", st.st_mode & 07777);
	/* root's HOME: $HOME/.cache/debuginfod_client, both made 0700 */
	unsetenv("DEBUGINFOD_CACHE_PATH");
	setenv("HOME", home, 1);
	snprintf(want, sizeof(want), "%s/.cache/debuginfod_client", home);
	decide(&c, fallback, sizeof(fallback));
	cr_assert_eq(c.refused, 0, "%s", c.why);
	cr_assert_str_eq(c.used, want);
	cr_assert_eq(stat(want, &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0700, "%o", st.st_mode & 07777);
	cr_assert_eq(stat(hb_tmp("roothome/.cache"), &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0700, "%o", st.st_mode & 07777);
	cr_assert_not(exists(hb_tmp("heapbpf")), "the fallback was made");
}

Test(debugcache, group_or_other_writable_cache_is_refused)
{
	char fallback[PATH_MAX];
	struct debug_cache c;
	const char *shared = dir_as("shared", 0, 0777);

	setenv("DEBUGINFOD_CACHE_PATH", shared, 1);
	decide(&c, fallback, sizeof(fallback));
	assert_refused(&c, shared, -OUTPUT_ESHARED, fallback);
	/* a sticky bit protects names, not a cache: anyone could plant one */
	cr_assert_eq(chmod(shared, 01777), 0);
	decide(&c, fallback, sizeof(fallback));
	assert_refused(&c, shared, -OUTPUT_ESHARED, fallback);
	/* another group's write bit */
	cr_assert_eq(chown(shared, 0, NOBODY), 0);
	cr_assert_eq(chmod(shared, 0770), 0);
	decide(&c, fallback, sizeof(fallback));
	assert_refused(&c, shared, -OUTPUT_ESHARED, fallback);
	/* root's group is root's (as for every directory heapbpf writes into) */
	cr_assert_eq(chown(shared, 0, 0), 0);
	decide(&c, fallback, sizeof(fallback));
	cr_assert_eq(c.refused, 0, "%s", c.why);
	cr_assert_str_eq(c.used, shared);
	/* root's cache holding a directory others can write */
	cr_assert_eq(chmod(shared, 0700), 0);
	dir_as("shared/0123abcd", 0, 0777);
	decide(&c, fallback, sizeof(fallback));
	assert_refused(&c, shared, -DEBUG_EFOREIGN, fallback);
	cr_assert(strstr(c.why, "0123abcd, a directory other users can write"), "%s", c.why);
}

/* No safe cache at all: nothing to use, and why. */
Test(debugcache, fallback_that_cannot_be_made_safe_is_not_used)
{
	char fallback[PATH_MAX];
	struct debug_cache c;
	const char *theirs = dir_as("theirs", NOBODY, 0755);

	setenv("DEBUGINFOD_CACHE_PATH", theirs, 1);
	snprintf(fallback, sizeof(fallback), "%s/debuginfod", theirs);
	debugsearch_cache_decide(fallback, &c);
	cr_assert_eq(c.refused, -OUTPUT_EOWNER);
	cr_assert_eq(c.fallback_refused, -OUTPUT_EPATH, "%d", c.fallback_refused);
	cr_assert_neq(c.fallback_why[0], '\0');
	cr_assert_str_eq(c.used, "");
	cr_assert_eq(entries(theirs), 0);
}

/* Accepted: libdebuginfod is told the directory checked, and nothing is said. */
Test(debugcache, prepare_pins_the_checked_cache)
{
	const char *home = dir_as("roothome", 0, 0755);
	char want[PATH_MAX];

	setenv("HOME", home, 1);
	snprintf(want, sizeof(want), "%s/.cache/debuginfod_client", home);
	cr_assert_eq(debugsearch_debuginfod_prepare(), 0);
	cr_assert_str_eq(getenv("DEBUGINFOD_CACHE_PATH"), want);
	/* decided once a process */
	setenv("DEBUGINFOD_CACHE_PATH", hb_tmp("elsewhere"), 1);
	cr_assert_eq(debugsearch_debuginfod_prepare(), 0);
	cr_assert_not(exists(hb_tmp("elsewhere")));
}
