// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Symbols a person can read, on real processes:
 *  - file:line and inlined frames, checked against binutils' addr2line -i;
 *  - a stripped shared jemalloc whose debug info is found through a build-id
 *    directory, a .gnu_debuglink file next to it, or a real debuginfod server
 *    on loopback; with none of them a clear error naming the build-id;
 *  - Debian's redis-server (stripped) under redis-benchmark, with a stripped
 *    libjemalloc whose debug info only the local debuginfod server has;
 *  - a debuginfod cache in another user's directory, links planted in it:
 *    refused, heapbpf's own cache used, nothing written through the links.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

/* temporary-directory paths are short; a truncated one would fail the test visibly */
#pragma GCC diagnostic ignored "-Wformat-truncation"

#include "symbols/elfobj.h"
#include "harness.h"
#include "profile/pprof.h"

#define IDLE_CONF "prof:true,prof_active:false"

TestSuite(symbols, .fini = hb_tmpdir_cleanup, .timeout = 180);

/* ---- inlined frames against addr2line ----------------------------------- */

struct a2l_frame {
	char func[256];
	char file[PATH_MAX];
	long line;
};

/* addr2line -i -f: pairs of lines "function" / "file:line", innermost first. */
static int addr2line(const char *exe, uint64_t vaddr, struct a2l_frame *v, int max)
{
	char cmd[PATH_MAX + 64], fl[PATH_MAX + 32];
	int n = 0;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "addr2line -i -f -e '%s' 0x%" PRIx64, exe, vaddr);
	p = popen(cmd, "r");
	cr_assert_not_null(p);
	while (n < max && fgets(v[n].func, sizeof(v[n].func), p) && fgets(fl, sizeof(fl), p)) {
		char *colon = strrchr(fl, ':');

		v[n].func[strcspn(v[n].func, "\n")] = '\0';
		cr_assert_not_null(colon, "addr2line output: %s", fl);
		*colon = '\0';
		snprintf(v[n].file, sizeof(v[n].file), "%s", fl);
		v[n].line = strtol(colon + 1, NULL, 10);
		n++;
	}
	pclose(p);
	return n;
}

static const char *str(const Perftools__Profiles__Profile *p, int64_t i)
{
	return p->string_table[i];
}

/* The mapping of path says it has inlined frames. */
static bool m_has_inline(const Perftools__Profiles__Profile *p, const char *path)
{
	for (size_t i = 0; i < p->n_mapping; i++) {
		if (strcmp(str(p, p->mapping[i]->filename), path) == 0)
			return p->mapping[i]->has_inline_frames;
	}
	return false;
}

Test(symbols, lines_and_inlined_frames_match_addr2line)
{
	const char *exe = hb_path("examples/alloc-service-static");
	const char *args[] = { "--threads", "2", "--rate", "0", NULL };
	char out[PATH_MAX], fold[PATH_MAX], err[8192], pid[16], real[PATH_MAX], *text;
	Perftools__Profiles__Profile *p;
	struct elf_object *elf;
	struct svc s;
	ssize_t len;
	int checked = 0, inlined = 0, lines = 0;

	hb_require_bpf();
	cr_assert_not_null(realpath(exe, real));
	cr_assert_eq(svc_start(&s, exe, IDLE_CONF, args), 0);
	snprintf(pid, sizeof(pid), "%d", s.pid);
	snprintf(out, sizeof(out), "%s/heap.pb.gz", hb_tmpdir());
	snprintf(fold, sizeof(fold), "%s/heap.folded", hb_tmpdir());
	cr_assert_eq(hb_run((const char *[]){ "--pid", pid, "-d", "3", "-q", "-o", out, NULL }, err,
			    sizeof(err), 60000),
		     0, "%s", err);
	cr_assert_eq(hb_run((const char *[]){ "--pid", pid, "-d", "3", "-q", "-f", "folded", "-t",
					      "alloc_space", "-o", fold, NULL },
			    err, sizeof(err), 60000),
		     0, "%s", err);
	cr_assert_eq(svc_stop(&s), 0);

	/* folded: the inlined chain, caller first, inlined frames marked */
	cr_assert_gt(hb_read_file(fold, &text), 0);
	cr_assert(strstr(text, ";parse_request;decode_header_[i];alloc_buffer_[i] "),
		  "no inlined chain in the folded output:\n%s", text);
	free(text);

	len = hb_read_file(out, &text);
	cr_assert_gt(len, 0);
	cr_assert_eq(pprof_decode((uint8_t *)text, len, &p), 0);
	cr_assert_eq(elfobj__open(real, &elf), 0);
	/* every location in the example's own mapping, line by line, against addr2line */
	for (size_t i = 0; i < p->n_location; i++) {
		Perftools__Profiles__Location *l = p->location[i];
		Perftools__Profiles__Mapping *m;
		struct a2l_frame a2l[16];
		uint64_t vaddr;
		int n;

		if (!l->mapping_id)
			continue;
		m = p->mapping[l->mapping_id - 1];
		if (strcmp(str(p, m->filename), real) != 0)
			continue;
		cr_assert(m->has_functions && m->has_filenames && m->has_line_numbers);
		/* a return address: the call is the byte before it */
		cr_assert_eq(elfobj__offset_to_vaddr(
				     elf, l->address - 1 - m->memory_start + m->file_offset,
				     &vaddr),
			     0);
		n = addr2line(real, vaddr, a2l, 16);
		cr_assert_eq((size_t)n, l->n_line,
			     "%#" PRIx64 ": addr2line has %d frames, heapbpf %zu", vaddr, n,
			     l->n_line);
		for (int k = 0; k < n; k++) {
			Perftools__Profiles__Line *ln = l->line[k];
			Perftools__Profiles__Function *f = p->function[ln->function_id - 1];

			cr_assert_str_eq(str(p, f->name), a2l[k].func, "%#" PRIx64 " frame %d",
					 vaddr, k);
			/* no DWARF there (Debian's libjemalloc.a): addr2line says "file.o:?" */
			if (!a2l[k].line) {
				cr_assert_eq(ln->line, 0, "%#" PRIx64 " frame %d (%s)", vaddr, k,
					     a2l[k].func);
				continue;
			}
			cr_assert_str_eq(str(p, f->filename), a2l[k].file, "%#" PRIx64 " frame %d",
					 vaddr, k);
			cr_assert_eq(ln->line, a2l[k].line, "%#" PRIx64 " frame %d (%s)", vaddr, k,
				     a2l[k].func);
			lines++;
		}
		inlined += n > 1;
		checked++;
	}
	cr_assert_gt(checked, 8, "only %d locations checked", checked);
	cr_assert_gt(inlined, 0, "no location with inlined frames");
	cr_assert_gt(lines, 8, "only %d frames had file:line to compare", lines);
	cr_assert(m_has_inline(p, real));
	elfobj__free(elf);
	perftools__profiles__profile__free_unpacked(p, NULL);
	free(text);
}

/* ---- stripped jemalloc, debug info found three ways ------------------------ */

struct stripped {
	char dir[PATH_MAX];   /* tmpdir/sj */
	char lib[PATH_MAX];   /* dir/lib: the stripped libjemalloc.so.2 */
	char debug[PATH_MAX]; /* dir/libjemalloc.so.2.debug */
	char build_id[64];
};

/* A stripped copy of the example's shared jemalloc and its separate debug file. */
static void make_stripped(struct stripped *st)
{
	char cmd[PATH_MAX + 64];

	snprintf(st->dir, sizeof(st->dir), "%s/sj", hb_tmpdir());
	snprintf(st->lib, sizeof(st->lib), "%s/lib", st->dir);
	snprintf(st->debug, sizeof(st->debug), "%s/libjemalloc.so.2.debug", st->dir);
	hb_sh("mkdir -p '%s' && cp '%s' '%s/full.so'", st->lib,
	      hb_path("jemalloc/libjemalloc.so.2"), st->dir);
	hb_sh("cd '%s' && objcopy --only-keep-debug full.so libjemalloc.so.2.debug && "
	      "strip --strip-all -o lib/libjemalloc.so.2 full.so && "
	      "objcopy --add-gnu-debuglink=libjemalloc.so.2.debug lib/libjemalloc.so.2 && rm full.so",
	      st->dir);
	snprintf(cmd, sizeof(cmd), "readelf -n '%s/libjemalloc.so.2' | awk '/Build ID/{print $3}'",
		 st->lib);
	hb_sh_line(st->build_id, sizeof(st->build_id), cmd);
	cr_assert_eq(strlen(st->build_id), 40, "build-id: \"%s\"", st->build_id);
	/* stripped indeed: no .symtab, so heapbpf needs the debug file */
	snprintf(cmd, sizeof(cmd), "readelf -S '%s/libjemalloc.so.2' | grep -c '\\.symtab' || true",
		 st->lib);
	char count[16];
	hb_sh_line(count, sizeof(count), cmd);
	cr_assert_str_eq(count, "0");
}

/*
 * Profiles alloc-service-shared running on the stripped library with
 * MALLOC_CONF=conf (NULL: unset), retitled title first (NULL: not), and
 * extra heapbpf arguments; returns heapbpf's exit code, stderr in err,
 * folded in *folded.
 */
static int profile_stripped_titled(const struct stripped *st, const char *conf, const char *title,
				   const char *const *extra, char *err, size_t errlen,
				   char **folded)
{
	char env[PATH_MAX + 32], out[PATH_MAX], pid[16], maps[64], *m;
	const char *envv[] = { env, NULL };
	const char *args[32] = { "--pid", pid, "-d", "2", "-q", "-f", "folded", "-o", out };
	int n = 9, rc;
	struct svc s;

	snprintf(env, sizeof(env), "LD_LIBRARY_PATH=%s", st->lib);
	for (; extra && *extra; extra++)
		args[n++] = *extra;
	args[n] = NULL;
	cr_assert_eq(svc_start_env(&s, hb_path("examples/alloc-service-shared"), conf, envv,
				   (const char *[]){ "--threads", "2", NULL }),
		     0);
	snprintf(maps, sizeof(maps), "/proc/%d/maps", s.pid);
	cr_assert_gt(hb_read_file(maps, &m), 0);
	cr_assert(strstr(m, st->lib), "the example did not load the stripped jemalloc");
	free(m);
	if (title) {
		char cmd[128], reply[64];

		snprintf(cmd, sizeof(cmd), "retitle %s", title);
		cr_assert_eq(svc_cmd(&s, cmd, reply, sizeof(reply), 10000), 0);
		cr_assert_str_eq(reply, "retitled");
	}
	snprintf(pid, sizeof(pid), "%d", s.pid);
	snprintf(out, sizeof(out), "%s/stripped.folded", hb_tmpdir());
	unlink(out);
	rc = hb_run(args, err, errlen, 60000);
	cr_assert_eq(svc_stop(&s), 0);
	*folded = NULL;
	if (rc == 0)
		cr_assert_gt(hb_read_file(out, folded), 0);
	return rc;
}

static int profile_stripped_as(const struct stripped *st, const char *conf,
			       const char *const *extra, char *err, size_t errlen, char **folded)
{
	return profile_stripped_titled(st, conf, NULL, extra, err, errlen, folded);
}

static int profile_stripped(const struct stripped *st, const char *const *extra, char *err,
			    size_t errlen, char **folded)
{
	return profile_stripped_as(st, IDLE_CONF, extra, err, errlen, folded);
}

static void assert_named(const char *folded)
{
	/* the two sites that allocate most: present in any 2-second window */
	cr_assert(strstr(folded, ";worker_main;run_one;churn_small "), "%s", folded);
	cr_assert(strstr(folded, ";worker_main;run_one;large_buffers "), "%s", folded);
	/* jemalloc's own frames were recognized and trimmed */
	cr_assert_null(strstr(folded, "libjemalloc"), "%s", folded);
	cr_assert_null(strstr(folded, "je_"), "%s", folded);
}

Test(symbols, stripped_jemalloc_debuglink_next_to_it)
{
	struct stripped st;
	char err[8192], *folded;

	hb_require_bpf();
	make_stripped(&st);
	hb_sh("cp '%s' '%s/'", st.debug, st.lib);
	cr_assert_eq(profile_stripped(&st, NULL, err, sizeof(err), &folded), 0, "%s", err);
	assert_named(folded);
	free(folded);
}

Test(symbols, stripped_jemalloc_build_id_directory)
{
	struct stripped st;
	char err[8192], dbg[PATH_MAX], *folded;

	hb_require_bpf();
	make_stripped(&st);
	snprintf(dbg, sizeof(dbg), "%s/debug", st.dir);
	hb_sh("mkdir -p '%s/.build-id/%.2s' && cp '%s' '%s/.build-id/%.2s/%s.debug'", dbg,
	      st.build_id, st.debug, dbg, st.build_id, st.build_id + 2);
	cr_assert_eq(profile_stripped(&st, (const char *[]){ "--debug-dir", dbg, NULL }, err,
				      sizeof(err), &folded),
		     0, "%s", err);
	assert_named(folded);
	free(folded);
}

/* A real debuginfod on loopback serving the files under dir; returns its pid. */
static pid_t start_debuginfod(const char *dir, const char *build_id, int *port)
{
	char portarg[16], db[PATH_MAX], log[PATH_MAX], cmd[PATH_MAX + 128], code[16];
	pid_t pid;

	snprintf(db, sizeof(db), "%s/debuginfod.sqlite", hb_tmpdir());
	snprintf(log, sizeof(log), "%s/debuginfod.log", hb_tmpdir());
	srand((unsigned int)(time(NULL) ^ getpid()));
	*port = 20000 + rand() % 20000;
	snprintf(portarg, sizeof(portarg), "%d", *port);
	pid = hb_spawn((const char *[]){ "/usr/bin/debuginfod", "-F", dir, "-p", portarg, "-d", db,
					 "-t", "0", "-g", "0", NULL },
		       log);
	cr_assert_gt(pid, 0);
	/* ready once its first scan has indexed the debug file */
	snprintf(cmd, sizeof(cmd),
		 "curl -s -o /dev/null -w '%%{http_code}' http://127.0.0.1:%d/buildid/%s/debuginfo",
		 *port, build_id);
	for (int i = 0; i < 300; i++) {
		hb_sh_line(code, sizeof(code), cmd);
		if (strcmp(code, "200") == 0)
			return pid;
		hb_sleep_ms(100);
	}
	kill(pid, SIGTERM);
	hb_wait(pid, 10000);
	cr_assert_fail("debuginfod did not serve %s within 30 s (see %s)", build_id, log);
	return -1;
}

static void set_debuginfod_env(int port)
{
	char urls[64], cache[PATH_MAX];

	snprintf(urls, sizeof(urls), "http://127.0.0.1:%d", port);
	snprintf(cache, sizeof(cache), "%s/debuginfod-cache", hb_tmpdir());
	setenv("DEBUGINFOD_URLS", urls, 1);
	setenv("DEBUGINFOD_CACHE_PATH", cache, 1);
}

Test(symbols, stripped_jemalloc_debuginfod)
{
	struct stripped st;
	char err[8192], srv[PATH_MAX], *folded;
	int port, rc;
	pid_t d;

	hb_require_bpf();
	make_stripped(&st);
	snprintf(srv, sizeof(srv), "%s/srv", st.dir);
	hb_sh("mkdir -p '%s' && cp '%s' '%s/'", srv, st.debug, srv);
	d = start_debuginfod(srv, st.build_id, &port);
	set_debuginfod_env(port);
	rc = profile_stripped(&st, NULL, err, sizeof(err), &folded);
	unsetenv("DEBUGINFOD_URLS");
	kill(d, SIGTERM);
	hb_wait(d, 10000);
	cr_assert_eq(rc, 0, "%s", err);
	assert_named(folded);
	free(folded);
}

Test(symbols, stripped_jemalloc_without_debug_info)
{
	struct stripped st;
	char err[8192], *folded;

	hb_require_bpf();
	make_stripped(&st);
	unsetenv("DEBUGINFOD_URLS");
	cr_assert_eq(profile_stripped(&st, NULL, err, sizeof(err), &folded), 1, "%s", err);
	cr_assert(strstr(err, st.build_id), "the build-id is not named: %s", err);
	cr_assert(strstr(err, "is stripped"), "%s", err);
	cr_assert(strstr(err, "DEBUGINFOD_URLS"), "%s", err);
	/* started with prof:true: nothing more to say of it */
	cr_assert_null(strstr(err, "prof:true"), "%s", err);
	cr_assert_eq(strchr(err, '\n'), err + strlen(err) - 1, "not one line: %s", err);
}

/* Stripped and started without prof:true: both said at once, one restart for both. */
Test(symbols, stripped_jemalloc_without_prof_says_both)
{
	struct stripped st;
	char err[8192], *folded;

	hb_require_bpf();
	make_stripped(&st);
	unsetenv("DEBUGINFOD_URLS");
	cr_assert_eq(profile_stripped_as(&st, NULL, NULL, err, sizeof(err), &folded), 1, "%s", err);
	cr_assert(strstr(err, "is stripped"), "%s", err);
	cr_assert(strstr(err, st.build_id), "%s", err);
	cr_assert(strstr(err, "; it was also started without prof:true"), "%s", err);
	cr_assert(strstr(err, "restart it with MALLOC_CONF=prof:true,prof_active:false"), "%s",
		  err);
	cr_assert_eq(strchr(err, '\n'), err + strlen(err) - 1, "not one line: %s", err);
	/* prof:true turned off again later in the same variable: off */
	cr_assert_eq(profile_stripped_as(&st, "prof:true,prof:false", NULL, err, sizeof(err),
					 &folded),
		     1, "%s", err);
	cr_assert(strstr(err, "; it was also started without prof:true"), "%s", err);
}

/*
 * Started with prof:true, then its title written over its environment (as
 * Redis does): /proc/PID/environ no longer tells, and the message does not
 * claim prof:true is missing.
 */
Test(symbols, stripped_jemalloc_environment_overwritten_cannot_tell_prof)
{
	struct stripped st;
	char err[8192], *folded;

	hb_require_bpf();
	make_stripped(&st);
	unsetenv("DEBUGINFOD_URLS");
	cr_assert_eq(profile_stripped_titled(&st, IDLE_CONF, "titled-service *:7", NULL, err,
					     sizeof(err), &folded),
		     1, "%s", err);
	cr_assert(strstr(err, "is stripped"), "%s", err);
	cr_assert_null(strstr(err, "started without prof:true"), "a false claim: %s", err);
	cr_assert(strstr(err, "; whether it runs with prof:true can be told only once its symbols "
			      "are found"),
		  "%s", err);
}

/*
 * A stripped static executable exports neither mallctl nor malloc_conf:
 * which variable its jemalloc reads is unknown, so is prof:true, and it says so.
 */
Test(symbols, stripped_static_executable_cannot_tell_prof_yet)
{
	char bin[PATH_MAX], err[8192], out[PATH_MAX], pid[16];
	struct svc s;
	int rc;

	hb_require_bpf();
	snprintf(bin, sizeof(bin), "%s/alloc-service-stripped", hb_tmpdir());
	snprintf(out, sizeof(out), "%s/static.folded", hb_tmpdir());
	hb_sh("strip --strip-all -o '%s' '%s'", bin, hb_path("examples/alloc-service-static"));
	cr_assert_eq(svc_start(&s, bin, NULL, (const char *[]){ "--threads", "1", NULL }), 0);
	snprintf(pid, sizeof(pid), "%d", s.pid);
	unsetenv("DEBUGINFOD_URLS");
	rc = hb_run((const char *[]){ "--pid", pid, "-d", "1", "-q", "-o", out, NULL }, err,
		    sizeof(err), 60000);
	cr_assert_eq(svc_stop(&s), 0);
	cr_assert_eq(rc, 1, "%s", err);
	cr_assert(strstr(err, "is stripped"), "%s", err);
	cr_assert(strstr(err, "; whether it runs with prof:true can be told only once its symbols "
			      "are found"),
		  "%s", err);
	cr_assert_null(strstr(err, "started without prof:true"), "%s", err);
	cr_assert_eq(strchr(err, '\n'), err + strlen(err) - 1, "not one line: %s", err);
}

Test(symbols, stripped_jemalloc_debuginfod_unreachable_says_why)
{
	struct stripped st;
	char err[8192], cache[PATH_MAX], *folded;
	int rc;

	hb_require_bpf();
	make_stripped(&st);
	/* port 1 on loopback: nobody listens, the connection is refused */
	snprintf(cache, sizeof(cache), "%s/debuginfod-cache", hb_tmpdir());
	setenv("DEBUGINFOD_URLS", "http://127.0.0.1:1", 1);
	setenv("DEBUGINFOD_CACHE_PATH", cache, 1);
	rc = profile_stripped(&st, NULL, err, sizeof(err), &folded);
	unsetenv("DEBUGINFOD_URLS");
	cr_assert_eq(rc, 1, "%s", err);
	cr_assert(strstr(err, st.build_id), "the build-id is not named: %s", err);
	cr_assert(strstr(err, "debuginfod at http://127.0.0.1:1"), "%s", err);
	cr_assert(strstr(err, "debuginfod: cannot connect to it (connection refused"),
		  "debuginfod's failure has no reason: %s", err);
	cr_assert_eq(strchr(err, '\n'), err + strlen(err) - 1, "not one line: %s", err);
}

/* ---- debuginfod's cache in another user's directory ----------------------- */

/* heapbpf's own cache, used when the one libdebuginfod would choose is refused */
#define FALLBACK_PARENT "/var/cache/heapbpf"
#define FALLBACK	FALLBACK_PARENT "/debuginfod"
#define LOCK		"/tmp/heapbpf-test-debuginfod-cache.lock"

/* What the test found at FALLBACK before heapbpf ran, for removing what it made there. */
static struct {
	bool recorded, parent_existed, existed;
	char before[256][256];
	int nbefore, lock;
} fallback = { .lock = -1 };

static bool in_before(const char *name)
{
	for (int i = 0; i < fallback.nbefore; i++)
		if (strcmp(fallback.before[i], name) == 0)
			return true;
	return false;
}

/*
 * Serialized with the same test of the other build (make test runs both
 * builds' tests at once): one run's clean-up would remove what the other's
 * heapbpf is downloading into the same directory.
 */
static void fallback_record(void)
{
	struct dirent *e;
	struct stat st;
	DIR *d;

	fallback.lock = open(LOCK, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	cr_assert_geq(fallback.lock, 0);
	cr_assert_eq(flock(fallback.lock, LOCK_EX), 0);
	fallback.parent_existed = stat(FALLBACK_PARENT, &st) == 0;
	fallback.existed = stat(FALLBACK, &st) == 0;
	d = opendir(FALLBACK);
	while (d && (e = readdir(d))) {
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			cr_assert_lt(fallback.nbefore, 256, "too much in " FALLBACK);
			snprintf(fallback.before[fallback.nbefore++], 256, "%s", e->d_name);
		}
	}
	if (d)
		closedir(d);
	fallback.recorded = true;
}

/* Removes what the test made at FALLBACK, pass or fail; the directories if it made them. */
static void fallback_fini(void)
{
	char cmd[PATH_MAX + 64];
	struct dirent *e;
	DIR *d;

	if (fallback.recorded && !fallback.existed) {
		if (system("rm -rf '" FALLBACK "'") != 0)
			fprintf(stderr, "warning: could not remove " FALLBACK "\n");
		if (!fallback.parent_existed)
			rmdir(FALLBACK_PARENT);
	} else if (fallback.recorded && (d = opendir(FALLBACK))) {
		while ((e = readdir(d))) {
			if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
			    in_before(e->d_name))
				continue;
			snprintf(cmd, sizeof(cmd), "rm -rf '" FALLBACK "/%s'", e->d_name);
			if (system(cmd) != 0)
				fprintf(stderr, "warning: could not remove " FALLBACK "/%s\n",
					e->d_name);
		}
		closedir(d);
	}
	fallback.recorded = false;
	if (fallback.lock >= 0)
		close(fallback.lock);
	fallback.lock = -1;
	hb_tmpdir_cleanup();
}

/* Everything under dir but access times: names, types, owners, modes, sizes, mtimes, targets. */
static char *tree_of(const char *dir, const char *name)
{
	const char *list = hb_tmp(name);
	char *text;

	hb_sh("cd '%s' && find . -printf '%%p %%y %%U:%%G %%m %%s %%T@ %%l\\n' | sort > '%s'", dir,
	      list);
	cr_assert_geq(hb_read_file(list, &text), 0);
	return text;
}

/*
 * DEBUGINFOD_CACHE_PATH naming nobody's directory, with links planted in it
 * to root's files (cache_clean_interval_s to an empty file of root's that
 * libdebuginfod would write its interval into, max_unused_age_s to a name
 * it would create, the build-id's directory to a directory of root's it
 * would download into): heapbpf refuses it, says so once, and uses its own
 * cache; nothing there or behind the links changes, and the symbols are
 * still found, through the server, in heapbpf's cache.
 */
Test(symbols, debuginfod_cache_of_another_user_is_refused, .fini = fallback_fini)
{
	struct stripped st;
	char err[8192], srv[PATH_MAX], want[3 * PATH_MAX], fetched[PATH_MAX], *folded = NULL;
	char *before, *after, *said;
	const char *cache, *victim, *created, *rootdir;
	struct stat vst;
	bool got;
	int port, rc, times = 0;
	pid_t d;

	hb_require_bpf();
	make_stripped(&st);
	snprintf(srv, sizeof(srv), "%s/srv", st.dir);
	hb_sh("mkdir -p '%s' && cp '%s' '%s/'", srv, st.debug, srv);
	d = start_debuginfod(srv, st.build_id, &port);

	/* root's, outside nobody's reach; the victim last changed long ago (past the interval) */
	victim = hb_tmp("victim");
	created = hb_tmp("created-through-a-link");
	rootdir = hb_tmp("rootdir");
	hb_sh("install -m 0600 /dev/null '%s' && touch -d 2001-01-01 '%s' && mkdir -m 0700 '%s'",
	      victim, victim, rootdir);
	/* nobody's cache, with nobody's links */
	cache = hb_tmp("nobody-cache");
	cr_assert_eq(chmod(hb_tmpdir(), 0711), 0);
	cr_assert_eq(mkdir(cache, 0755), 0);
	cr_assert_eq(chown(cache, 65534, 65534), 0);
	hb_sh("cd '%s' && ln -s '%s' cache_clean_interval_s && ln -s '%s' max_unused_age_s && "
	      "ln -s '%s' '%s' && chown -h 65534:65534 cache_clean_interval_s max_unused_age_s "
	      "'%s'",
	      cache, victim, created, rootdir, st.build_id, st.build_id);
	before = tree_of(cache, "before.list");

	fallback_record();
	set_debuginfod_env(port);
	setenv("DEBUGINFOD_CACHE_PATH", cache, 1);
	rc = profile_stripped(&st, NULL, err, sizeof(err), &folded);
	unsetenv("DEBUGINFOD_URLS");
	unsetenv("DEBUGINFOD_CACHE_PATH");
	kill(d, SIGTERM);
	hb_wait(d, 10000);
	snprintf(fetched, sizeof(fetched), FALLBACK "/%s/debuginfo", st.build_id);
	got = stat(fetched, &vst) == 0 && vst.st_size > 0;

	/* the attacker's directory and what its links lead to, as they were */
	after = tree_of(cache, "after.list");
	cr_assert_str_eq(after, before, "nobody's cache changed:\n%s\nwas:\n%s", after, before);
	cr_assert_eq(stat(victim, &vst), 0);
	cr_assert_eq(vst.st_size, 0, "written through cache_clean_interval_s");
	cr_assert_lt(vst.st_mtime, 1000000000 + 100000000, "touched through the link");
	cr_assert_not(stat(created, &vst) == 0, "%s created through max_unused_age_s", created);
	hb_sh("test -z \"$(ls -A '%s')\"", rootdir);

	/* said once, naming both directories and why */
	snprintf(want, sizeof(want),
		 "heapbpf: warning: debuginfod's cache is " FALLBACK ", not %s, which heapbpf "
		 "refuses: the directory belongs to another user",
		 cache);
	cr_assert(strstr(err, want), "no \"%s\" in: %s", want, err);
	for (said = err; (said = strstr(said, "debuginfod's cache is")); said++)
		times++;
	cr_assert_eq(times, 1, "said %d times: %s", times, err);

	/* the profile, named through heapbpf's own cache */
	cr_assert_eq(rc, 0, "%s", err);
	assert_named(folded);
	cr_assert(got, "nothing fetched into " FALLBACK);
	free(folded);
	free(before);
	free(after);
}

Test(symbols, stripped_jemalloc_debug_dir_copy_with_another_build_id)
{
	struct stripped st;
	char err[8192], dbg[PATH_MAX], cmd[PATH_MAX + 64], other_id[64], want[3 * PATH_MAX];
	char *folded;

	hb_require_bpf();
	make_stripped(&st);
	/* the debug file of another build (the example's own) where this build-id's belongs */
	snprintf(dbg, sizeof(dbg), "%s/debug", st.dir);
	hb_sh("mkdir -p '%s/.build-id/%.2s' && objcopy --only-keep-debug '%s' "
	      "'%s/.build-id/%.2s/%s.debug'",
	      dbg, st.build_id, hb_path("examples/alloc-service-shared"), dbg, st.build_id,
	      st.build_id + 2);
	snprintf(cmd, sizeof(cmd), "readelf -n '%s' | awk '/Build ID/{print $3}'",
		 hb_path("examples/alloc-service-shared"));
	hb_sh_line(other_id, sizeof(other_id), cmd);
	cr_assert_eq(strlen(other_id), 40, "build-id: \"%s\"", other_id);
	unsetenv("DEBUGINFOD_URLS");
	cr_assert_eq(profile_stripped(&st, (const char *[]){ "--debug-dir", dbg, NULL }, err,
				      sizeof(err), &folded),
		     1, "%s", err);
	snprintf(want, sizeof(want),
		 "%s/.build-id/%.2s/%s.debug has build-id %s, the binary's is %s", dbg, st.build_id,
		 st.build_id + 2, other_id, st.build_id);
	cr_assert(strstr(err, want), "no \"%s\" in: %s", want, err);
	cr_assert_eq(strchr(err, '\n'), err + strlen(err) - 1, "not one line: %s", err);
}

/* ---- Debian's redis-server ------------------------------------------------- */

Test(symbols, redis_server_with_jemalloc_debug_info_from_debuginfod)
{
	struct stripped st;
	char srv[PATH_MAX], err[8192], out[PATH_MAX], pid[16], portarg[16], cmd[256], pong[32];
	char env_ld[PATH_MAX + 32], log[PATH_MAX], *text;
	int dport, rport, rc;
	pid_t d, redis, bench;

	hb_require_bpf();
	make_stripped(&st);
	snprintf(srv, sizeof(srv), "%s/srv", st.dir);
	hb_sh("mkdir -p '%s' && cp '%s' '%s/'", srv, st.debug, srv);
	d = start_debuginfod(srv, st.build_id, &dport);

	rport = dport + 1;
	snprintf(portarg, sizeof(portarg), "%d", rport);
	snprintf(env_ld, sizeof(env_ld), "%s", st.lib);
	snprintf(log, sizeof(log), "%s/redis.log", hb_tmpdir());
	setenv("LD_LIBRARY_PATH", env_ld, 1);
	setenv("MALLOC_CONF", IDLE_CONF, 1);
	redis = hb_spawn((const char *[]){ "/usr/bin/redis-server", "--port", portarg, "--bind",
					   "127.0.0.1", "--save", "", "--appendonly", "no", NULL },
			 log);
	unsetenv("LD_LIBRARY_PATH");
	unsetenv("MALLOC_CONF");
	snprintf(cmd, sizeof(cmd), "redis-cli -h 127.0.0.1 -p %d ping 2>/dev/null", rport);
	for (int i = 0; i < 100; i++) {
		hb_sh_line(pong, sizeof(pong), cmd);
		if (strcmp(pong, "PONG") == 0)
			break;
		hb_sleep_ms(100);
	}
	cr_assert_str_eq(pong, "PONG", "redis-server did not start (see %s)", log);

	/* bounded load: a fixed number of requests, loopback only */
	bench = hb_spawn((const char *[]){ "/usr/bin/redis-benchmark", "-h", "127.0.0.1", "-p",
					   portarg, "-n", "400000", "-c", "16", "-d", "512", "-r",
					   "100000", "-t", "set,lpush,get", "-q", NULL },
			 NULL);
	hb_sleep_ms(500);
	snprintf(pid, sizeof(pid), "%d", redis);
	snprintf(out, sizeof(out), "%s/redis.folded", hb_tmpdir());
	set_debuginfod_env(dport);
	rc = hb_run((const char *[]){ "--pid", pid, "-d", "3", "-f", "folded", "-t", "alloc_space",
				      "-o", out, NULL },
		    err, sizeof(err), 60000);
	unsetenv("DEBUGINFOD_URLS");
	hb_wait(bench, 120000);
	kill(redis, SIGTERM);
	hb_wait(redis, 20000);
	kill(d, SIGTERM);
	hb_wait(d, 10000);
	cr_assert_eq(rc, 0, "%s", err);
	cr_assert(strstr(err, st.lib), "heapbpf did not profile the stripped jemalloc: %s", err);
	cr_assert_gt(hb_read_file(out, &text), 0);
	/* redis's own allocation wrappers and object constructors */
	cr_assert(strstr(text, "zmalloc"), "no zmalloc in:\n%.4000s", text);
	cr_assert(strstr(text, "createStringObject"), "no createStringObject in:\n%.4000s", text);
	free(text);
}

/* ---- another mount namespace ------------------------------------------------ */

/*
 * The example runs from a tmpfs mounted in its own private mount namespace,
 * at a path that does not exist in heapbpf's: heapbpf must find, probe and
 * symbolize it through /proc/PID/root and /proc/PID/map_files.
 */
Test(symbols, process_in_another_mount_namespace)
{
	char wrapper[PATH_MAX], out[PATH_MAX], err[8192], pid[16], exe[PATH_MAX], *text;
	struct svc s;
	struct stat st;
	FILE *f;

	hb_require_bpf();
	cr_assert_not_null(realpath(hb_path("examples/alloc-service-static"), exe));
	snprintf(wrapper, sizeof(wrapper), "%s/in-namespace.sh", hb_tmpdir());
	f = fopen(wrapper, "w");
	cr_assert_not_null(f);
	fprintf(f,
		"#!/bin/sh\n"
		"exec unshare --mount --propagation private sh -c '"
		"mount -t tmpfs heapbpf-ns /mnt && cp \"$0\" /mnt/ns-service && "
		"exec /mnt/ns-service \"$@\"' '%s' \"$@\"\n",
		exe);
	fclose(f);
	cr_assert_eq(chmod(wrapper, 0755), 0);
	cr_assert_eq(svc_start(&s, wrapper, IDLE_CONF, (const char *[]){ "--threads", "2", NULL }),
		     0);
	/* not visible from here */
	cr_assert_neq(stat("/mnt/ns-service", &st), 0);
	snprintf(pid, sizeof(pid), "%d", s.pid);
	snprintf(out, sizeof(out), "%s/ns.folded", hb_tmpdir());
	cr_assert_eq(
		hb_run((const char *[]){ "--pid", pid, "-d", "2", "-f", "folded", "-o", out, NULL },
		       err, sizeof(err), 60000),
		0, "%s", err);
	cr_assert(strstr(err, "/mnt/ns-service"), "%s", err);
	cr_assert_eq(svc_stop(&s), 0);
	cr_assert_gt(hb_read_file(out, &text), 0);
	cr_assert(strstr(text, ";run_one;churn_small "), "%s", text);
	free(text);
}

/* Debian's stripped libjemalloc, as redis, varnish and named map it. */
#define DEBIAN_JEMALLOC "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"

/*
 * Debian's own stripped libjemalloc.so.2 (preloaded into the shared example,
 * whose soname it shares) without its -dbgsym: the error names the package
 * and its archive line, and the route that works here, the jemalloc with
 * its symbol table that heapbpf ships, to preload instead. Taken, it
 * profiles.
 */
Test(symbols, debians_stripped_jemalloc_names_its_package_and_the_preload)
{
	char err[8192], want[PATH_MAX + 64], lib[PATH_MAX], pid[16], pre[PATH_MAX + 16];
	const char *errpath = hb_tmp("preloaded.err");
	struct svc s;
	uint64_t flag;
	pid_t hp;

	hb_require_bpf();
	cr_assert_eq(access(DEBIAN_JEMALLOC, R_OK), 0, "libjemalloc2 is not installed");
	cr_assert_neq(
		access("/usr/lib/debug/.build-id/1d/5163c246dc9cd2b4d339f2ac42efd95c6e0ae1.debug",
		       F_OK),
		0, "this test needs libjemalloc2-dbgsym absent");
	cr_assert_not_null(realpath(hb_path("jemalloc/libjemalloc.so.2"), lib));
	cr_assert_eq(svc_start_env(&s, hb_path("examples/alloc-service-shared"), IDLE_CONF,
				   (const char *[]){ "LD_PRELOAD=" DEBIAN_JEMALLOC, NULL },
				   (const char *[]){ "--threads", "1", NULL }),
		     0);
	snprintf(pid, sizeof(pid), "%d", s.pid);
	cr_assert_eq(hb_run((const char *[]){ "--pid", pid, "-d", "1", "-o", hb_tmp("never.pb.gz"),
					      NULL },
			    err, sizeof(err), 60000),
		     1, "%s", err);
	cr_assert(strstr(err, "is stripped"), "%s", err);
	cr_assert(strstr(err, "(libjemalloc2-dbgsym, from deb http://deb.debian.org/debian-debug "),
		  "%s", err);
	snprintf(want, sizeof(want), "restart it with LD_PRELOAD=%s, the same jemalloc", lib);
	cr_assert(strstr(err, want), "%s", err);
	cr_assert_eq(strchr(err, '\n'), err + strlen(err) - 1, "not one line: %s", err);
	cr_assert_eq(svc_stop(&s), 0);

	/* the route taken: preloaded, the service profiles */
	snprintf(pre, sizeof(pre), "LD_PRELOAD=%s", lib);
	cr_assert_eq(svc_start_env(&s, hb_path("examples/alloc-service-shared"), IDLE_CONF,
				   (const char *[]){ pre, NULL },
				   (const char *[]){ "--threads", "1", NULL }),
		     0);
	snprintf(pid, sizeof(pid), "%d", s.pid);
	hp = hb_spawn((const char *[]){ hb_path("heapbpf"), "--pid", pid, "-o",
					hb_tmp("preloaded.pb.gz"), NULL },
		      errpath);
	cr_assert(hb_wait_text(errpath, "sampling every", 60000, hp), "%s", hb_file_text(errpath));
	/* its flag on (the line may come first), then 340 sampling periods */
	cr_assert_eq(hb_sym_addr(s.pid, lib, "je_prof_active_state", &flag), 0);
	cr_assert(hb_wait_byte(s.pid, flag, 1, 60000, hp), "%s", hb_file_text(errpath));
	svc_allocs_more(&s, 2000);
	kill(hp, SIGTERM);
	cr_assert_eq(hb_wait(hp, 60000), 0, "%s", hb_file_text(errpath));
	cr_assert_eq(svc_stop(&s), 0);
}
