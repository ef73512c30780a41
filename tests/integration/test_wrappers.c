// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Sites named past allocator wrappers (user/profile/wrappers.h) on a real
 * service: Redis built with its bundled jemalloc (the fixture of
 * test_reach.c) under redis-benchmark allocates everything through zmalloc,
 * zmalloc_usable and sds. The summary, leak suspects, lifetimes, top and the
 * flame graph name Redis's own callers (createStringObject, dictAddRaw,
 * quicklistCreate, ...), the summary says which wrappers it named sites past,
 * and the folded output of the same window keeps their frames.
 */
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

#include "browser.h"
#include "harness.h"

static pid_t leftover;

static void wrappers_fini(void)
{
	if (leftover > 0)
		kill(leftover, SIGKILL);
	hb_tmpdir_cleanup();
}

TestSuite(wrappers, .fini = wrappers_fini, .timeout = 300);

#define FLAG "je_prof_active_state"
#define IDLE "prof:true,prof_active:false"

/* Redis's allocator wrappers: no site may be named after one of them. */
static const char *const redis_wrappers[] = {
	"zmalloc",	   "zmalloc_usable",	"zcalloc",    "zcalloc_usable", "zrealloc",
	"zrealloc_usable", "ztrymalloc_usable", "_sdsnewlen", "sdsnewlen",
};

/* Redis's callers of them: the sites. */
static const char *const redis_callers[] = {
	"createStringObject", "dictAddRaw",	      "quicklistCreate",
	"quicklistPushHead",  "dictInsertAtPosition", "createQuicklistObject",
	"dbAddInternal",      "_dictResize",
};

static bool is_wrapper(const char *site)
{
	for (size_t i = 0; i < sizeof(redis_wrappers) / sizeof(redis_wrappers[0]); i++) {
		size_t n = strlen(redis_wrappers[i]);

		/* with or without a GCC clone's suffix (_sdsnewlen.constprop.0) */
		if (strncmp(site, redis_wrappers[i], n) == 0 && (!site[n] || site[n] == '.'))
			return true;
	}
	return false;
}

static bool is_caller(const char *site)
{
	for (size_t i = 0; i < sizeof(redis_callers) / sizeof(redis_callers[0]); i++) {
		if (strncmp(site, redis_callers[i], strlen(redis_callers[i])) == 0)
			return true;
	}
	return false;
}

/* The fixture's redis-server on a port of its own, profiling on and idle. */
static pid_t redis_start(int *port)
{
	const char *bin = hb_fixture("redis/bin/redis-server");
	char portarg[16], reply[256] = "";
	struct stat st;
	pid_t pid;

	cr_assert_eq(stat(bin, &st), 0,
		     "fixture %s is missing: make fixtures builds it "
		     "(scripts/build-redis-fixture.sh)",
		     bin);
	cr_assert_eq(access("/usr/bin/redis-benchmark", X_OK), 0,
		     "redis-benchmark is missing: run make deps (scripts/install-deps.sh)");
	*port = hb_free_port();
	snprintf(portarg, sizeof(portarg), "%d", *port);
	setenv("JE_MALLOC_CONF", IDLE, 1);
	pid = hb_spawn((const char *[]){ bin, "--port", portarg, "--bind", "127.0.0.1", "--save",
					 "", "--appendonly", "no", "--dir", hb_tmpdir(), NULL },
		       hb_tmp("redis.log"));
	unsetenv("JE_MALLOC_CONF");
	leftover = pid;
	/* a guard against a hang: it answers as soon as it is up */
	for (int i = 0; i < 300 && strcmp(reply, "PONG") != 0; i++) {
		hb_sleep_ms(100);
		hb_redis_cli(*port, "ping", reply, sizeof(reply));
	}
	cr_assert_str_eq(reply, "PONG", "redis-server on port %d did not answer", *port);
	return pid;
}

static void redis_stop(pid_t pid)
{
	kill(pid, SIGTERM);
	cr_assert_geq(hb_wait(pid, 30000), 0);
	leftover = 0;
}

/* Keys holding strings (createStringObject, dictAddRaw) and lists (quicklist): until done. */
static void benchmark(int port, int n)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd),
		 "redis-benchmark -h 127.0.0.1 -p %d -t set,lpush -n %d -r 10000000 -d 256 -q "
		 ">/dev/null",
		 port, n);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
}

/* The site column of the summary's top sites: the text after "allocated  " on each row. */
static int top_sites(const char *text, char sites[][256], int max)
{
	const char *p = strstr(text, "heapbpf: top sites by in-use bytes");
	int n = 0;

	cr_assert_not_null(p, "no top sites in:\n%s", text);
	p = strchr(p, '\n') + 1;
	while (*p == ' ' && n < max) {
		const char *a = strstr(p, "allocated  "), *end = strchr(p, '\n');

		cr_assert(a && end && a < end, "a row without its site: %s", p);
		a += strlen("allocated  ");
		snprintf(sites[n++], 256, "%.*s", (int)(end - a), a);
		p = end + 1;
	}
	return n;
}

/* The site column (the last one) of every row of the --leaks tables. */
static void check_leak_rows(const char *text)
{
	const char *p = strstr(text, "heapbpf: lifetimes of sampled objects");
	int rows = 0;

	cr_assert_not_null(p, "no lifetimes in:\n%s", text);
	/* the table's header line, then its rows */
	p = strchr(p, '\n') + 1;
	p = strchr(p, '\n') + 1;
	for (; *p == ' '; p = strchr(p, '\n') + 1) {
		const char *end = strchr(p, '\n'), *s = end;
		char site[256];

		while (s > p && s[-1] != ' ')
			s--;
		snprintf(site, sizeof(site), "%.*s", (int)(end - s), s);
		cr_expect(!is_wrapper(site), "a lifetimes row named after %s:\n%s", site, text);
		rows++;
	}
	cr_assert_gt(rows, 0, "no lifetimes rows in:\n%s", text);
}

/*
 * A pprof of the recording, as watch and the agent write them: heapbpf
 * report's page of it and heapbpf diff's text name sites past the wrappers
 * as the live run does, and say so; diff prints each change leaf first,
 * from its site. The base: the recording's first second.
 */
static void report_and_diff_of_pprof(const char *rec)
{
	const char *pb = hb_tmp("whole.pb.gz"), *base = hb_tmp("first.pb.gz");
	const char *page = hb_tmp("from-pprof.html");
	char err[16384], *html, *line, *note;
	int rc, changes = 0;

	cr_assert_eq(hb_run((const char *[]){ "report", rec, "-o", pb, NULL }, err, sizeof(err),
			    120000),
		     0, "%s", err);
	cr_assert_eq(hb_run((const char *[]){ "report", rec, "--to", "1", "-o", base, NULL }, err,
			    sizeof(err), 120000),
		     0, "%s", err);
	rc = hb_run((const char *[]){ "report", pb, "-o", page, NULL }, err, sizeof(err), 120000);
	cr_assert_eq(rc, 0, "report exited %d: %s", rc, err);
	cr_expect(strstr(err, "sites named past allocator wrappers: ") && strstr(err, "zmalloc"),
		  "%s", err);
	/* the page as a browser shows it: the note in its DOM, and a picture of it */
	html = hb_page_dom(page);
	note = strstr(html, "<li class=\"wrappers\">Sites named past allocator wrappers, their "
			    "frames left out here (pprof and folded output keep them): ");
	cr_expect(note && strstr(note, "zmalloc"), "no wrapper note in the page's DOM:\n%.4000s",
		  html);
	free(html);
	hb_screenshot(page, "wrappers-report-test.png");
	rc = hb_run((const char *[]){ "diff", base, pb, "-o", hb_tmp("change.pb.gz"), NULL }, err,
		    sizeof(err), 120000);
	cr_assert_eq(rc, 0, "diff exited %d: %s", rc, err);
	cr_expect_not_null(strstr(err, "sites named past allocator wrappers: "), "%s", err);
	/* "  +1.2 MiB  createStringObject <- ...": a caller first, never a wrapper */
	for (line = strtok(err, "\n"); line; line = strtok(NULL, "\n")) {
		char site[256];

		if (sscanf(line, " %*[-+0-9.] %*[KMGi]B %255s", site) != 1 &&
		    sscanf(line, " %*[-+0-9.] B %255s", site) != 1)
			continue;
		changes++;
		cr_expect(!is_wrapper(site), "a change shown from %s: %s", site, line);
		cr_expect(strstr(line, " <- ") || !strchr(line, ';'), "%s", line);
	}
	cr_expect_gt(changes, 0, "no change listed");
}

/*
 * A live run with --leaks writing the flame graph and a recording; the
 * recording's folded output, and a pprof of it reported (report_and_diff_of_pprof). The summary's sites are Redis's callers.
 */
Test(wrappers, redis_sites_named_past_zmalloc)
{
	const char *bin = hb_fixture("redis/bin/redis-server");
	char pid[16], sites[5][256], *text, *html, *folded, err[8192];
	const char *errp = hb_tmp("heapbpf.err"), *html_path = hb_tmp("heap.html");
	const char *rec = hb_tmp("heap.hbr"), *folded_path = hb_tmp("heap.folded");
	int port, rc, n, callers = 0;
	uint64_t flag;
	pid_t redis, hp;

	hb_require_bpf();
	redis = redis_start(&port);
	cr_assert_eq(hb_sym_addr(redis, bin, FLAG, &flag), 0);
	snprintf(pid, sizeof(pid), "%d", redis);
	hp = hb_spawn((const char *[]){ hb_path("heapbpf"), "--pid", pid, "-d", "0", "--leaks",
					"-f", "html", "-o", html_path, "--record", rec, NULL },
		      errp);
	cr_assert(hb_wait_byte(redis, flag, 1, 60000, hp), "heapbpf did not switch sampling on");
	benchmark(port, 200000);
	kill(hp, SIGINT);
	rc = hb_wait(hp, 120000);
	cr_assert_gt(hb_read_file(errp, &text), 0);
	cr_assert_eq(rc, 0, "heapbpf exited %d:\n%s", rc, text);

	/* the summary: Redis's callers, never a wrapper */
	n = top_sites(text, sites, 5);
	cr_assert_gt(n, 0, "%s", text);
	for (int i = 0; i < n; i++) {
		cr_expect(!is_wrapper(sites[i]), "top site %d is %s:\n%s", i, sites[i], text);
		callers += is_caller(sites[i]);
	}
	cr_expect_gt(callers, 0, "no top site is one of Redis's callers of zmalloc:\n%s", text);
	/* one line says which wrappers the sites were named past */
	cr_expect(strstr(text, "\nheapbpf: sites named past allocator wrappers: ") &&
			  strstr(text, "zmalloc") && strstr(text, "(--wrapper adds more)\n"),
		  "%s", text);
	/* --leaks: the suspects' and the lifetimes' sites too */
	check_leak_rows(text);
	cr_expect_null(strstr(text, "  zmalloc\n"), "%s", text);
	cr_expect_null(strstr(text, "  zmalloc_usable\n"), "%s", text);

	/* the flame graph page says which frames it left out */
	cr_assert_gt(hb_read_file(html_path, &html), 0);
	cr_expect_not_null(strstr(html,
				  "Sites named past allocator wrappers, their frames left out "
				  "here (pprof and folded output keep them): "));

	/* the folded output of the same window keeps every frame */
	rc = hb_run((const char *[]){ "report", rec, "-f", "folded", "-o", folded_path, NULL }, err,
		    sizeof(err), 120000);
	cr_assert_eq(rc, 0, "report exited %d: %s", rc, err);
	cr_assert_gt(hb_read_file(folded_path, &folded), 0);
	cr_expect(strstr(folded, ";zmalloc ") || strstr(folded, ";zmalloc_usable "),
		  "the wrappers' frames are gone from the folded output:\n%.4000s", folded);
	cr_expect_not_null(strstr(err, "sites named past allocator wrappers: "), "%s", err);

	/* --wrapper: a Redis caller named past too */
	rc = hb_run((const char *[]){ "report", rec, "-f", "folded", "-o", "/dev/null", "--wrapper",
				      "createStringObject", NULL },
		    err, sizeof(err), 120000);
	cr_assert_eq(rc, 0, "report exited %d: %s", rc, err);
	n = top_sites(err, sites, 5);
	for (int i = 0; i < n; i++)
		cr_expect_str_neq(sites[i], "createStringObject", "%s", err);
	cr_expect(strstr(err, "createStringObject") && strstr(err, "sites named past"), "%s", err);
	free(html);
	free(folded);
	report_and_diff_of_pprof(rec);
	free(text);
	redis_stop(redis);
}

/* heapbpf top's plain table: rows by site are Redis's callers, never a wrapper. */
Test(wrappers, redis_top_rows_named_past_zmalloc)
{
	const char *bin = hb_fixture("redis/bin/redis-server");
	const char *log = hb_tmp("top.log");
	char pid[16], *text;
	const char *p;
	uint64_t flag;
	int port, rc, rows = 0;
	pid_t redis, hp;

	hb_require_bpf();
	redis = redis_start(&port);
	cr_assert_eq(hb_sym_addr(redis, bin, FLAG, &flag), 0);
	snprintf(pid, sizeof(pid), "%d", redis);
	hp = hb_spawn((const char *[]){ hb_path("heapbpf"), "top", "--pid", pid, NULL }, log);
	cr_assert(hb_wait_byte(redis, flag, 1, 60000, hp), "heapbpf did not switch sampling on");
	benchmark(port, 100000);
	/* a table a second: wait for one that shows what the benchmark allocated */
	cr_assert(hb_wait_text(log, "createStringObject", 120000, hp), "no createStringObject row");
	kill(hp, SIGINT);
	rc = hb_wait(hp, 60000);
	cr_assert_gt(hb_read_file(log, &text), 0);
	cr_assert_eq(rc, 0, "heapbpf top exited %d:\n%s", rc, text);
	/* rows: "...  IN USE  SITE file:line": the site after the last two spaces */
	for (p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		size_t len = strcspn(p, "\n");
		const char *s = NULL;
		char site[256];

		for (const char *q = p; q + 1 < p + len; q++) {
			if (q[0] == ' ' && q[1] == ' ')
				s = q + 2;
		}
		if (p[0] != ' ' || !s || !memchr(s, ':', (size_t)(p + len - s)))
			continue;
		while (*s == ' ')
			s++;
		snprintf(site, sizeof(site), "%.*s", (int)strcspn(s, " \n"), s);
		cr_expect(!is_wrapper(site), "a row named after %s:\n%s", site, text);
		rows++;
	}
	cr_expect_gt(rows, 0, "%s", text);
	cr_expect_null(strstr(text, "  zmalloc "), "%s", text);
	cr_expect_null(strstr(text, "  zmalloc_usable "), "%s", text);
	free(text);
	redis_stop(redis);
}

/* --wrapper's refusals: one sentence, exit 2. */
Test(wrappers, bad_wrapper_is_a_usage_error)
{
	char err[1024];
	int rc;

	rc = hb_run((const char *[]){ "--pid", "1", "--wrapper", "*", NULL }, err, sizeof(err),
		    30000);
	cr_expect_eq(rc, 2, "%s", err);
	cr_expect_str_eq(err, "heapbpf: --wrapper \"*\" would make every function a wrapper; give "
			      "a name or a narrower pattern (see heapbpf --help)\n");
	rc = hb_run((const char *[]){ "--pid", "1", "--wrapper=", NULL }, err, sizeof(err), 30000);
	cr_expect_eq(rc, 2, "%s", err);
	cr_expect_str_eq(err, "heapbpf: --wrapper needs a function name or a glob pattern (see "
			      "heapbpf --help)\n");
}
