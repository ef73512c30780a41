// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Every jemalloc in the wild (issue 16), on real builds:
 *
 *   redis_*      redis-server built the way upstream builds it, with its
 *                bundled jemalloc ("5.3.0-0-g0", je_ prefix, JE_MALLOC_CONF;
 *                scripts/build-redis-fixture.sh), under Debian's redis-benchmark
 *   shape_*      the 5.3.0 fixture with its version string rewritten to the
 *                shapes heapbpf never saw (-0-g0, -N-g<hash>) and its DWARF
 *                stripped: accepted once the first samples confirm the layout
 *                (the oracle against jemalloc's own dump), refused when the
 *                number names a layout that does not fit
 *   unknown_*    a version no table entry has (5.3.7-12-gdeadbee): profiled
 *                through a layout built from its DWARF (the oracle again);
 *                stripped, refused, and with a wrong layout forced, refused
 *                by the self-check with the flag restored and nothing written
 */
#include <errno.h>
#include <arpa/inet.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "harness.h"
#include "oracle.h"
#include "jemalloc/target.h"

/* processes a test started outside svc_*: killed if the test ends early */
static pid_t leftovers[4];

static void remember(pid_t pid)
{
	for (size_t i = 0; i < sizeof(leftovers) / sizeof(leftovers[0]); i++) {
		if (!leftovers[i]) {
			leftovers[i] = pid;
			return;
		}
	}
}

static void reach_fini(void)
{
	for (size_t i = 0; i < sizeof(leftovers) / sizeof(leftovers[0]); i++) {
		if (leftovers[i] > 0)
			kill(leftovers[i], SIGKILL);
	}
	hb_tmpdir_cleanup();
}

TestSuite(reach, .fini = reach_fini, .timeout = 240);

#define FLAG	 "je_prof_active_state"
#define IDLE	 "prof:true,prof_active:false"
#define REL530	 "5.3.0-0-g54eaed1d8b56b1aa528be3bdd1877e59c56fa90c"
#define REL531	 "5.3.1-0-g81034ce1f1373e37dc865038e1bc8eeecf559ce8"
#define CONFIRMS "its first 16 samples and 4 frees fit the 5.3.0 layout"

static void fixture_exists(const char *path)
{
	struct stat st;

	cr_assert_eq(
		stat(path, &st), 0,
		"fixture %s is missing: make test builds it (scripts/build-jemalloc-fixtures.sh, "
		"scripts/build-redis-fixture.sh)",
		path);
}

/*
 * A copy of fixture src in the test's directory whose embedded version
 * string rel reads version (NUL-padded in place), without its DWARF when strip.
 */
static const char *rewritten_from(const char *src, const char *rel, const char *version, bool strip)
{
	static char path[PATH_MAX];
	char *data, cmd[2 * PATH_MAX + 64];
	size_t vl = strlen(rel), count = 0;
	ssize_t n;
	FILE *f;

	fixture_exists(src);
	n = hb_read_file(src, &data);
	cr_assert_gt(n, 0);
	cr_assert_leq(strlen(version), vl);
	/* every copy: a -g3 build also keeps it in its debug sections */
	for (char *p = data; p + vl < data + n; p++) {
		if (memcmp(p, rel, vl + 1) == 0) {
			memset(p, 0, vl);
			memcpy(p, version, strlen(version));
			count++;
		}
	}
	cr_assert_gt(count, 0, "%s does not hold %s", src, rel);
	snprintf(path, sizeof(path), "%s/svc-%s%s", hb_tmpdir(), version, strip ? "-nodwarf" : "");
	f = fopen(path, "wb");
	cr_assert_not_null(f);
	cr_assert_eq(fwrite(data, 1, (size_t)n, f), (size_t)n);
	cr_assert_eq(fclose(f), 0);
	free(data);
	cr_assert_eq(chmod(path, 0755), 0);
	if (strip) {
		snprintf(cmd, sizeof(cmd), "strip --strip-debug '%s'", path);
		cr_assert_eq(system(cmd), 0);
	}
	return path;
}

/* The 5.3.0 fixture so rewritten. */
static const char *rewritten(const char *version, bool strip)
{
	return rewritten_from(hb_fixture("bin/je530-static"), REL530, version, strip);
}

static uint8_t flag_of(pid_t pid, const char *bin)
{
	uint64_t addr;
	uint8_t b = 0xff;

	cr_assert_eq(hb_sym_addr(pid, bin, FLAG, &addr), 0);
	cr_assert_eq(hb_peek(pid, addr, &b, 1), 0);
	return b;
}

/* heapbpf on the example service bin for 3 s; its exit status, stderr in err. */
static int profile_svc(const char *bin, const char *layout, const char *out, char *err,
		       size_t errlen, struct svc *s)
{
	char pid[16];
	const char *args[] = {
		"--pid", pid, "-d", "3", "-o", out, layout ? "--jemalloc-layout" : NULL,
		layout,	 NULL
	};

	cr_assert_eq(svc_start(s, bin, IDLE, (const char *[]){ "--threads", "2", NULL }), 0);
	snprintf(pid, sizeof(pid), "%d", s->pid);
	return hb_run(args, err, errlen, 60000);
}

/* Refused in one heapbpf line holding each of want, nothing written, the flag off. */
static void refused(const char *bin, const char *layout, const char *const *want)
{
	char out[PATH_MAX], err[4096];
	struct stat st;
	struct svc s;
	int rc;

	hb_require_bpf();
	snprintf(out, sizeof(out), "%s/refused.pb.gz", hb_tmpdir());
	rc = profile_svc(bin, layout, out, err, sizeof(err), &s);
	cr_assert_eq(rc, 1, "exit %d, stderr: %s", rc, err);
	/* the attach line, then the one-sentence refusal */
	{
		const char *last = err + strlen(err) - 1, *line = last;

		while (line > err && line[-1] != '\n')
			line--;
		cr_assert_eq(*last, '\n');
		cr_assert(strncmp(line, "heapbpf: ", 9) == 0, "not a heapbpf line: %s", err);
		for (; *want; want++)
			cr_assert(strstr(line, *want), "expected \"%s\" in: %s", *want, line);
	}
	cr_assert_neq(stat(out, &st), 0, "%s was written", out);
	cr_assert_eq(flag_of(s.pid, bin), 0, "prof_active left on: %s", err);
	cr_assert_eq(svc_stop(&s), 0);
}

static void oracle_of(const char *bin, const char *layout)
{
	hb_oracle_run(&(struct hb_oracle){
		.bin = bin,
		.je_object = bin,
		.flag_sym = FLAG,
		.threads = "4",
		.layout = layout,
	});
}

/* What discovery makes of a running target: its layout's name and how it was reached. */
static void discovered_pid(pid_t pid, const char *layout, bool from_dwarf, bool selfcheck)
{
	char err[1024];
	struct jemalloc_target *t;

	cr_assert_eq(jemalloc_target__find(pid, NULL, &t, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(t->layout->name, layout, "pid %d", pid);
	cr_assert_eq(t->layout_from_dwarf, from_dwarf, "pid %d", pid);
	cr_assert_eq(t->needs_selfcheck, selfcheck, "pid %d", pid);
	jemalloc_target__free(t);
}

/* What discovery makes of bin: the layout's name, how it was reached, a debug build or not. */
static void discovered(const char *bin, const char *layout, bool from_dwarf, bool selfcheck,
		       bool debug)
{
	char err[1024];
	struct jemalloc_target *t;
	struct svc s;

	cr_assert_eq(svc_start(&s, bin, IDLE, (const char *[]){ "--threads", "1", NULL }), 0);
	cr_assert_eq(jemalloc_target__find(s.pid, NULL, &t, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(t->layout->name, layout, "%s", bin);
	cr_assert_eq(t->layout_from_dwarf, from_dwarf, "%s", bin);
	cr_assert_eq(t->needs_selfcheck, selfcheck, "%s", bin);
	cr_assert_eq(t->debug_build, debug, "%s", bin);
	jemalloc_target__free(t);
	cr_assert_eq(svc_stop(&s), 0);
}

/* ---- new version shapes, without DWARF: the number, confirmed live ------------ */

Test(reach, shape_g0_confirmed_and_exact)
{
	const char *bin = rewritten("5.3.0-0-g0", true);
	char out[PATH_MAX], err[4096];
	struct svc s;
	int rc;

	hb_require_bpf();
	discovered(bin, "5.3.0", false, true, false);
	snprintf(out, sizeof(out), "%s/g0.pb.gz", hb_tmpdir());
	rc = profile_svc(bin, NULL, out, err, sizeof(err), &s);
	cr_assert_eq(rc, 0, "exit %d: %s", rc, err);
	cr_assert(strstr(err, "jemalloc 5.3.0-0-g0 in"), "%s", err);
	cr_assert(strstr(err, CONFIRMS), "%s", err);
	cr_assert_eq(flag_of(s.pid, bin), 0);
	cr_assert_eq(svc_stop(&s), 0);
	/* and heapbpf saw exactly what jemalloc sampled */
	oracle_of(bin, NULL);
}

Test(reach, shape_dev_build_confirmed_and_exact)
{
	const char *bin = rewritten("5.3.0-12-gdeadbee", true);

	hb_require_bpf();
	discovered(bin, "5.3.0", false, true, false);
	oracle_of(bin, NULL);
}

/* the release string itself: the table's entry, no self-check */
Test(reach, shape_release_string_needs_no_check)
{
	char out[PATH_MAX], err[4096];
	const char *bin = hb_fixture("bin/je530-static");
	struct svc s;
	int rc;

	hb_require_bpf();
	fixture_exists(bin);
	discovered(bin, "5.3.0", false, false, false);
	snprintf(out, sizeof(out), "%s/rel.pb.gz", hb_tmpdir());
	rc = profile_svc(bin, NULL, out, err, sizeof(err), &s);
	cr_assert_eq(rc, 0, "exit %d: %s", rc, err);
	cr_assert_null(strstr(err, "fit the"), "%s", err);
	cr_assert_eq(svc_stop(&s), 0);
}

/* 5.3.1's number on 5.3.0's code: the free hook's arguments differ; refused live */
Test(reach, shape_g0_refused_when_the_layout_does_not_fit)
{
	hb_require_bpf();
	refused(rewritten("5.3.1-0-g0", true), NULL,
		(const char *[]){ "jemalloc 5.3.1-0-g0 in pid",
				  "does not fit heapbpf's 5.3.1 layout, which its version number "
				  "names",
				  "heapbpf stopped at once", NULL });
}

Test(reach, shape_dev_build_refused_when_the_layout_does_not_fit)
{
	hb_require_bpf();
	refused(rewritten("5.3.1-7-gabc1234", true), NULL,
		(const char *[]){ "jemalloc 5.3.1-7-gabc1234 in pid",
				  "does not fit heapbpf's 5.3.1 layout", NULL });
}

/*
 * 5.3.1's real code under a version string the table does not know whole
 * (Redis's -0-g0 shape), without DWARF: the self-check confirms the 5.3.1
 * layout on the first samples, and heapbpf is exact against jemalloc's dump.
 */
Test(reach, shape_531_g0_confirmed_and_exact)
{
	const char *bin =
		rewritten_from(hb_fixture("bin/je531-static"), REL531, "5.3.1-0-g0", true);
	char out[PATH_MAX], err[4096];
	struct svc s;
	int rc;

	hb_require_bpf();
	discovered(bin, "5.3.1", false, true, false);
	snprintf(out, sizeof(out), "%s/g0.pb.gz", hb_tmpdir());
	rc = profile_svc(bin, NULL, out, err, sizeof(err), &s);
	cr_assert_eq(rc, 0, "exit %d: %s", rc, err);
	cr_assert(strstr(err, "its first 16 samples and 4 frees fit the 5.3.1 layout"), "%s", err);
	cr_assert_eq(flag_of(s.pid, bin), 0);
	cr_assert_eq(svc_stop(&s), 0);
	oracle_of(bin, NULL);
}

/* 5.3.1's release string: the table's entry, no self-check */
Test(reach, shape_531_release_string_needs_no_check)
{
	const char *bin = hb_fixture("bin/je531-static");

	hb_require_bpf();
	fixture_exists(bin);
	discovered(bin, "5.3.1", false, false, false);
}

/* 5.3.0's number on 5.3.1's code: the free hook's arguments differ; refused live */
Test(reach, shape_530_number_on_531_code_refused)
{
	hb_require_bpf();
	refused(rewritten_from(hb_fixture("bin/je531-static"), REL531, "5.3.0-0-g0", true), NULL,
		(const char *[]){ "jemalloc 5.3.0-0-g0 in pid",
				  "does not fit heapbpf's 5.3.0 layout, which its version number "
				  "names",
				  "heapbpf stopped at once", NULL });
}

/* ---- a version nobody knows ---------------------------------------------------- */

Test(reach, unknown_version_with_dwarf_oracle)
{
	const char *bin = rewritten("5.3.7-12-gdeadbee", false);

	hb_require_bpf();
	discovered(bin, "DWARF", true, false, false);
	oracle_of(bin, NULL);
}

Test(reach, unknown_version_without_dwarf_refused)
{
	const char *bin = rewritten("5.3.7-12-gdeadbee", true);

	hb_require_bpf();
	refused(bin, NULL,
		(const char *[]){ "jemalloc 5.3.7-12-gdeadbee in pid",
				  "is not a version heapbpf knows (5.2.1, 5.3.0, 5.3.1) and has no "
				  "debug info",
				  "--jemalloc-layout", NULL });
}

Test(reach, unknown_version_wrong_forced_layout_refused_live)
{
	const char *bin = rewritten("5.3.7-12-gdeadbee", true);

	hb_require_bpf();
	refused(bin, "5.3.1",
		(const char *[]){ "does not fit heapbpf's 5.3.1 layout, which --jemalloc-layout "
				  "forced",
				  "neither a release string nor debug info confirms", NULL });
}

/*
 * 5.2.1 (with upstream's late-activation fix) under a dev build's version:
 * the layout from its DWARF has 5.2's shape (the tctx to the free hook, the
 * flag prof_active) and heapbpf sees exactly what jemalloc sampled.
 */
Test(reach, unknown_521_dev_build_from_dwarf_oracle)
{
	const char *bin = rewritten_from(hb_fixture("bin/je521fix-static"),
					 "5.2.1-0-gea6b3e973b477b8061e0076bb257dbd7f3faa756",
					 "5.2.1-3-gabc1234", false);

	hb_require_bpf();
	discovered(bin, "DWARF", true, false, false);
	hb_oracle_run(&(struct hb_oracle){
		.bin = bin,
		.je_object = bin,
		.flag_sym = "je_prof_active",
		.conf = HB_ORACLE_CONF_521,
		.threads = "4",
	});
}

/*
 * A --enable-debug 5.3.0 under a dev build's version: the DWARF's prof_info_t
 * has the debug build's offsets (alloc_tctx @16); frees match, the oracle holds.
 */
Test(reach, unknown_debug_build_from_dwarf_oracle)
{
	const char *bin = rewritten_from(hb_fixture("bin/debug530-static"), REL530,
					 "5.3.0-1-g0d0d0d0", false);

	hb_require_bpf();
	discovered(bin, "DWARF", true, false, true);
	oracle_of(bin, NULL);
}

/* with --record: the recording of what the wrong layout read is not left behind */
Test(reach, wrong_layout_leaves_no_recording)
{
	const char *bin = rewritten("5.3.1-0-g0", true);
	char pid[16], rec[PATH_MAX], err[4096];
	struct stat st;
	struct svc s;
	int rc;

	hb_require_bpf();
	snprintf(rec, sizeof(rec), "%s/wrong.hbr", hb_tmpdir());
	cr_assert_eq(svc_start(&s, bin, IDLE, (const char *[]){ "--threads", "2", NULL }), 0);
	snprintf(pid, sizeof(pid), "%d", s.pid);
	rc = hb_run((const char *[]){ "--pid", pid, "-d", "3", "--record", rec, NULL }, err,
		    sizeof(err), 60000);
	cr_assert_eq(rc, 1, "exit %d: %s", rc, err);
	cr_assert(strstr(err, "does not fit heapbpf's 5.3.1 layout"), "%s", err);
	cr_assert_neq(stat(rec, &st), 0, "%s was left", rec);
	cr_assert_eq(flag_of(s.pid, bin), 0);
	cr_assert_eq(svc_stop(&s), 0);
}

/* the right layout forced on the same stripped object: confirmed, exact */
Test(reach, unknown_version_right_forced_layout_confirmed)
{
	hb_require_bpf();
	oracle_of(rewritten("5.3.7-12-gdeadbee", true), "5.3.0");
}

/* ---- Redis with its bundled jemalloc ------------------------------------------- */

/* redis-server bin on a port of its own, with conf in JE_MALLOC_CONF (NULL: unset). */
static pid_t redis_start_bin(const char *bin, const char *conf, int *port)
{
	char portarg[16], log[PATH_MAX], reply[256] = "";
	pid_t pid;

	fixture_exists(bin);
	cr_assert_eq(access("/usr/bin/redis-benchmark", X_OK), 0,
		     "redis-benchmark is missing: run make deps (scripts/install-deps.sh)");
	*port = hb_free_port();
	snprintf(portarg, sizeof(portarg), "%d", *port);
	snprintf(log, sizeof(log), "%s/redis.log", hb_tmpdir());
	if (conf)
		setenv("JE_MALLOC_CONF", conf, 1);
	pid = hb_spawn((const char *[]){ bin, "--port", portarg, "--bind", "127.0.0.1", "--save",
					 "", "--appendonly", "no", "--dir", hb_tmpdir(), NULL },
		       log);
	unsetenv("JE_MALLOC_CONF");
	remember(pid);
	for (int i = 0; i < 100 && strcmp(reply, "PONG") != 0; i++) {
		hb_sleep_ms(100);
		hb_redis_cli(*port, "ping", reply, sizeof(reply));
	}
	if (strcmp(reply, "PONG") != 0) {
		char *text = NULL;

		kill(pid, SIGKILL);
		hb_read_file(log, &text);
		cr_assert_fail("redis-server on port %d did not answer: %s", *port,
			       text ? text : "(no log)");
	}
	return pid;
}

/* The fixture's redis-server. */
static pid_t redis_start(const char *conf, int *port)
{
	return redis_start_bin(hb_fixture("redis/bin/redis-server"), conf, port);
}

static void redis_stop(pid_t pid)
{
	kill(pid, SIGTERM);
	cr_assert_geq(hb_wait(pid, 30000), 0);
}

/* Discovery: the je_ public prefix (JE_MALLOC_CONF), the layout from Redis's own DWARF. */
Test(reach, redis_bundled_jemalloc_discovered)
{
	char err[1024];
	struct jemalloc_target *t;
	int port;
	pid_t redis;

	hb_require_bpf();
	redis = redis_start(IDLE, &port);
	cr_assert_eq(jemalloc_target__find(redis, NULL, &t, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(t->version, "5.3.0-0-g0");
	cr_assert_str_eq(t->ns_prefix, "je_");
	cr_assert_str_eq(t->pub_prefix, "je_");
	cr_assert_str_eq(t->conf_env, "JE_MALLOC_CONF");
	cr_assert(t->is_main_exe);
	cr_assert(t->layout_from_dwarf);
	cr_assert_not(t->needs_selfcheck);
	cr_assert_str_eq(t->layout->active_sym, "prof_active_state");
	/* the live-heap tables from the same DWARF: 5.3's prof_cnt_t with its unbiased counters */
	cr_assert_eq(t->layout->heap.cnt_size, 64);
	cr_assert(t->layout->heap.has_unbiased);
	cr_assert(t->opt_prof);
	jemalloc_target__free(t);
	redis_stop(redis);
}

/*
 * Sanitized builds: libdw 0.188's dwarf_getscopes leaks the scopes it found
 * when an inlined instance's abstract origin lies in another compile unit,
 * which Redis's -flto DWARF has (LeakSanitizer, with full unwinding, sees
 * only that: 14 blocks, 800 bytes). Only that leak is suppressed, only for
 * the heapbpf this test starts; a plain build ignores both variables.
 */
static void suppress_libdw_getscopes_leak(void)
{
	static char asan[1024], lsan[PATH_MAX + 1024], supp[PATH_MAX];
	const char *a = getenv("ASAN_OPTIONS"), *l = getenv("LSAN_OPTIONS");
	FILE *f;

	snprintf(supp, sizeof(supp), "%s/libdw.supp", hb_tmpdir());
	f = fopen(supp, "w");
	cr_assert_not_null(f);
	cr_assert_gt(fputs("leak:dwarf_getscopes\n", f), 0);
	cr_assert_eq(fclose(f), 0);
	/* libdw has no frame pointers: the fast unwinder stops inside it */
	snprintf(asan, sizeof(asan), "%s%sfast_unwind_on_malloc=0", a ? a : "", a && *a ? ":" : "");
	snprintf(lsan, sizeof(lsan), "%s%ssuppressions=%s", l ? l : "", l && *l ? ":" : "", supp);
	setenv("ASAN_OPTIONS", asan, 1);
	setenv("LSAN_OPTIONS", lsan, 1);
}

/* No flag: heapbpf's default run under redis-benchmark; Redis's own frames; the flag back off. */
Test(reach, redis_bundled_jemalloc_profiled_without_flags)
{
	const char *bin = hb_fixture("redis/bin/redis-server");
	char pid[16], out[PATH_MAX], errp[PATH_MAX], cmd[256], *text, *folded;
	uint64_t flag;
	int port, rc;
	pid_t redis, hp;

	hb_require_bpf();
	redis = redis_start(IDLE, &port);
	cr_assert_eq(hb_sym_addr(redis, bin, FLAG, &flag), 0);
	snprintf(pid, sizeof(pid), "%d", redis);
	snprintf(out, sizeof(out), "%s/redis.folded", hb_tmpdir());
	snprintf(errp, sizeof(errp), "%s/heapbpf.err", hb_tmpdir());
	suppress_libdw_getscopes_leak();
	hp = hb_spawn((const char *[]){ hb_path("heapbpf"), "--pid", pid, "-d", "0", "-f", "folded",
					"-t", "alloc_space", "-o", out, NULL },
		      errp);
	cr_assert(hb_wait_byte(redis, flag, 1, 20000, hp), "heapbpf did not switch sampling on");
	/* new keys (dictAddRaw) holding new strings (createStringObject), and lists */
	snprintf(cmd, sizeof(cmd),
		 "redis-benchmark -h 127.0.0.1 -p %d -t set,lpush -n 200000 -r 10000000 -d 256 "
		 "-q >/dev/null",
		 port);
	cr_assert_eq(system(cmd), 0);
	kill(hp, SIGINT);
	rc = hb_wait(hp, 60000);
	cr_assert_gt(hb_read_file(errp, &text), 0);
	cr_assert_eq(rc, 0, "heapbpf exited %d:\n%s", rc, text);
	cr_assert(strstr(text, "jemalloc 5.3.0-0-g0 in "), "%s", text);
	cr_assert_gt(hb_read_file(out, &folded), 0);
	cr_assert(strstr(folded, ";createStringObject;"), "no createStringObject in:\n%s", folded);
	cr_assert(strstr(folded, ";dictAddRaw;"), "no dictAddRaw in:\n%s", folded);
	cr_assert(strstr(folded, ";pushGenericCommand;"), "no pushGenericCommand in:\n%s", folded);
	/* jemalloc's own frames are trimmed: Redis's allocator wrappers are the leaves */
	cr_assert_null(strstr(folded, "prof_alloc_prep"), "%s", folded);
	cr_assert_null(strstr(folded, "je_malloc_default"), "%s", folded);
	cr_assert_eq(flag_of(redis, bin), 0, "prof_active left on");
	free(text);
	free(folded);
	redis_stop(redis);
}

/*
 * The same Redis stripped of its DWARF (symbols kept, as a package with a
 * -dbgsym would ship it): 5.3.0-0-g0 names the 5.3.0 entry by number, and the
 * first samples under redis-benchmark confirm it.
 */
Test(reach, redis_stripped_confirmed_by_its_first_samples)
{
	char bin[PATH_MAX], cmd[2 * PATH_MAX + 64], pid[16], out[PATH_MAX], errp[PATH_MAX];
	char *folded, *text;
	bool confirmed;
	int port, rc;
	pid_t redis, bench, hp;

	hb_require_bpf();
	fixture_exists(hb_fixture("redis/bin/redis-server"));
	snprintf(bin, sizeof(bin), "%s/redis-server", hb_tmpdir());
	snprintf(cmd, sizeof(cmd), "strip --strip-debug -o '%s' '%s'", bin,
		 hb_fixture("redis/bin/redis-server"));
	cr_assert_eq(system(cmd), 0);
	redis = redis_start_bin(bin, IDLE, &port);
	discovered_pid(redis, "5.3.0", false, true);
	/* load running through the whole window, whatever its length */
	snprintf(cmd, sizeof(cmd), "%d", port);
	bench = hb_spawn((const char *[]){ "/usr/bin/redis-benchmark", "-h", "127.0.0.1", "-p", cmd,
					   "-t", "set", "-n", "100000000", "-r", "10000000", "-d",
					   "256", "-q", NULL },
			 "/dev/null");
	remember(bench);
	snprintf(pid, sizeof(pid), "%d", redis);
	snprintf(out, sizeof(out), "%s/stripped.folded", hb_tmpdir());
	snprintf(errp, sizeof(errp), "%s/stripped.err", hb_tmpdir());
	/* until the check is through, however slowly the load runs on a busy machine */
	hp = hb_spawn((const char *[]){ hb_path("heapbpf"), "--pid", pid, "-d", "0", "-f", "folded",
					"-o", out, NULL },
		      errp);
	confirmed = hb_wait_text(errp, CONFIRMS, 300000, hp);
	kill(hp, SIGINT);
	rc = hb_wait(hp, 60000);
	kill(bench, SIGTERM);
	hb_wait(bench, 10000);
	cr_assert_gt(hb_read_file(errp, &text), 0);
	cr_assert_eq(rc, 0, "exit %d: %s", rc, text);
	cr_assert(confirmed, "%s", text);
	free(text);
	cr_assert_gt(hb_read_file(out, &folded), 0);
	cr_assert(strstr(folded, ";createStringObject;"), "no createStringObject in:\n%s", folded);
	cr_assert_eq(flag_of(redis, bin), 0, "prof_active left on");
	free(folded);
	redis_stop(redis);
}

/* Started without profiling: the message names the variable Redis's jemalloc reads. */
Test(reach, redis_without_prof_names_je_malloc_conf)
{
	char pid[16], out[PATH_MAX], err[4096];
	struct stat st;
	int port, rc;
	pid_t redis;

	hb_require_bpf();
	redis = redis_start(NULL, &port);
	snprintf(pid, sizeof(pid), "%d", redis);
	snprintf(out, sizeof(out), "%s/none.pb.gz", hb_tmpdir());
	rc = hb_run((const char *[]){ "--pid", pid, "-d", "1", "-o", out, NULL }, err, sizeof(err),
		    30000);
	cr_assert_eq(rc, 1, "exit %d: %s", rc, err);
	cr_assert(strstr(err, "restart it with JE_MALLOC_CONF=prof:true,prof_active:false"), "%s",
		  err);
	cr_assert_neq(stat(out, &st), 0);
	redis_stop(redis);
}
