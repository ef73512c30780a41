// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * heapbpf rss against jemalloc's own figures and the kernel's.
 *
 *   rss/exact_*           the example builds a fragmented heap (fragment:
 *   rss_versions/exact_*  small objects, 3 in 4 freed at random; large
 *                         blocks freed to dirty pages; memory mapped outside
 *                         jemalloc), pauses and prints jemalloc's mallctl
 *                         stats after an epoch (jestats). heapbpf rss
 *                         --format json must give allocated, active,
 *                         metadata, mapped, retained, dirty, muzzy and
 *                         stats.resident within 1% (they are read from the
 *                         same fields: exact so far), every bin's regions in
 *                         use and slabs exactly, the RSS within 1% of
 *                         smaps_rollup, and parts that add up to it within
 *                         2%; the mapping outside jemalloc among the others.
 *                         On Debian's 5.3.0 (rss) and the fixtures' 5.2.1,
 *                         5.3.0, 5.3.1 and _rjem_ builds (rss_versions).
 *   rss_versions/redis_*  Redis built as upstream builds it, filled with small
 *                         keys, most deleted at random: allocated, active and
 *                         jemalloc's resident against its INFO memory.
 *   rss/text_*, rss/refuses_*  the table and the refusals.
 *   rss/a_watch_profile_*  heapbpf watch's profiles carry the last breakdown.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "harness.h"
#include "profile/pprof.h"

static pid_t svc_pid, watch_pid;

static void fini(void)
{
	if (watch_pid > 0) {
		kill(watch_pid, SIGTERM);
		waitpid(watch_pid, NULL, 0);
		watch_pid = 0;
	}
	if (svc_pid > 0) {
		kill(svc_pid, SIGKILL);
		waitpid(svc_pid, NULL, 0);
		svc_pid = 0;
	}
	hb_tmpdir_cleanup();
}

TestSuite(rss, .fini = fini, .timeout = 300);
TestSuite(rss_versions, .fini = fini, .timeout = 300);

#define IDLE "prof:true,prof_active:false"

/* The number after "key": in the JSON text from where (first occurrence); asserted there. */
static double json_num(const char *where, const char *key)
{
	char pat[64];
	const char *p;

	snprintf(pat, sizeof(pat), "\"%s\":", key);
	p = strstr(where, pat);
	cr_assert_not_null(p, "no \"%s\" in %s", key, where);
	return strtod(p + strlen(pat), NULL);
}

/* The value of "name value" in jemalloc's stats file text; asserted there. */
static double je_stat(const char *text, const char *name)
{
	char pat[128];
	const char *p;

	snprintf(pat, sizeof(pat), "\n%s ", name);
	p = strstr(text, pat);
	if (!p && !strncmp(text, name, strlen(name)) && text[strlen(name)] == ' ')
		p = text - 1;
	cr_assert_not_null(p, "jemalloc's stats have no %s", name);
	return strtod(p + strlen(pat), NULL);
}

/* heapbpf rss --pid pid with more args; its stdout (exit 0 asserted). */
static char *rss_of(pid_t pid, const char *format)
{
	char *out = NULL;
	const char *outp = hb_tmp("rss.out");

	hb_sh("'%s' rss --pid %d --format %s > '%s' 2> '%s'", hb_path("heapbpf"), pid, format, outp,
	      hb_tmp("rss.err"));
	cr_assert_geq(hb_read_file(outp, &out), 0);
	cr_assert_gt(strlen(out), 0, "heapbpf rss said nothing: %s",
		     hb_file_text(hb_tmp("rss.err")));
	return out;
}

/* smaps_rollup's Rss of pid, in bytes. */
static double rollup_rss(pid_t pid)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", pid);
	const char *rss = strstr(hb_file_text(path), "\nRss:");

	cr_assert_not_null(rss, "%s has no Rss", path);
	return strtod(rss + 5, NULL) * 1024; /* "Rss:  1234 kB" */
}

static void near(double got, double want, double frac, const char *what, const char *json)
{
	double d = got > want ? got - want : want - got;

	cr_assert_leq(d, frac * (want > 0 ? want : 1), "%s: heapbpf %.0f, jemalloc %.0f: %s", what,
		      got, want, json);
}

/* The fragmented example on bin, checked against jemalloc's stats and smaps_rollup. */
static void exact(const char *bin, const char *env_name)
{
	char env[128], reply[256], cmdline[PATH_MAX + 16];
	const char *stats = hb_tmp("jestats.txt");
	struct svc s;
	char *json, *st;
	const char *bins, *others;
	unsigned nbins = 0, nlext = 0, seen = 0;
	double rss_before, rss_after;

	snprintf(env, sizeof(env), "%s=" IDLE, env_name);
	cr_assert_eq(svc_start_env(&s, bin, NULL, (const char *[]){ env, NULL },
				   (const char *[]){ "--threads", "2", "--rate", "2000", NULL }),
		     0);
	svc_pid = s.pid;
	/* the workers' own heap too (asked until they have made some), then nothing moves */
	for (int i = 0; i < 60000 && svc_allocs(&s) < 1000; i++)
		hb_sleep_ms(10);
	cr_assert_geq(svc_allocs(&s), 1000, "the workers made no allocation");
	cr_assert_eq(svc_cmd(&s, "pause", reply, sizeof(reply), 60000), 0);
	cr_assert_eq(svc_cmd(&s, "fragment 64", reply, sizeof(reply), 120000), 0);
	cr_assert(!strncmp(reply, "fragmented ", 11), "%s", reply);
	snprintf(cmdline, sizeof(cmdline), "jestats %s", stats);
	cr_assert_eq(svc_cmd(&s, cmdline, reply, sizeof(reply), 60000), 0);
	cr_assert_eq(sscanf(reply, "jestats %u %u", &nbins, &nlext), 2, "%s", reply);
	st = hb_xstrdup(hb_file_text(stats));

	rss_before = rollup_rss(s.pid);
	json = rss_of(s.pid, "json");
	rss_after = rollup_rss(s.pid);

	near(json_num(json, "allocated"), je_stat(st, "stats.allocated"), 0.01, "allocated", json);
	near(json_num(json, "active"), je_stat(st, "stats.active"), 0.01, "active", json);
	near(json_num(json, "metadata"), je_stat(st, "stats.metadata"), 0.01, "metadata", json);
	near(json_num(json, "mapped"), je_stat(st, "stats.mapped"), 0.01, "mapped", json);
	near(json_num(json, "retained"), je_stat(st, "stats.retained"), 0.01, "retained", json);
	near(json_num(json, "dirty"), je_stat(st, "stats.arenas.4096.pdirty") * 4096, 0.01, "dirty",
	     json);
	near(json_num(json, "muzzy"), je_stat(st, "stats.arenas.4096.pmuzzy") * 4096, 0.01, "muzzy",
	     json);
	near(json_num(json, "stats_resident"), je_stat(st, "stats.resident"), 0.01,
	     "stats.resident", json);
	/* the freed large blocks are dirty and were written: resident */
	cr_assert_gt(json_num(strstr(strstr(json, "\"parts\""), "\"dirty\""), "resident"), 0, "%s",
		     json);

	/* every bin, exactly */
	bins = strstr(json, "\"bins\":[");
	cr_assert_not_null(bins);
	for (const char *b = bins; (b = strstr(b, "{\"size\":")) && b < strstr(bins, "]"); b++) {
		char name[96];

		snprintf(name, sizeof(name), "arenas.bin.%u.size", seen);
		cr_assert_eq(json_num(b, "size"), je_stat(st, name));
		snprintf(name, sizeof(name), "stats.arenas.4096.bins.%u.curregs", seen);
		cr_assert_eq(json_num(b, "used"), je_stat(st, name), "bin %u: %s", seen, json);
		snprintf(name, sizeof(name), "stats.arenas.4096.bins.%u.curslabs", seen);
		cr_assert_eq(json_num(b, "slabs"), je_stat(st, name), "bin %u: %s", seen, json);
		seen++;
	}
	cr_assert_eq(seen, nbins, "%u bins in the JSON, jemalloc has %u", seen, nbins);

	/* the kernel's view: the RSS, and parts that add up to it */
	cr_assert_geq(json_num(json, "rss"),
		      0.99 * (rss_before < rss_after ? rss_before : rss_after), "%s", json);
	cr_assert_leq(json_num(json, "rss"),
		      1.01 * (rss_before > rss_after ? rss_before : rss_after), "%s", json);
	cr_assert_leq(json_num(json, "unexplained") < 0 ? -json_num(json, "unexplained")
							: json_num(json, "unexplained"),
		      0.02 * json_num(json, "rss"), "%s", json);
	/* fragment's 16 MiB mapped outside jemalloc and written: the largest other */
	others = strstr(json, "\"others\":[");
	cr_assert_not_null(others);
	cr_assert_geq(json_num(others, "bytes"), 16 << 20, "%s", json);
	cr_assert_geq(json_num(json, "other_anon"), 16 << 20, "%s", json);
	/* not sampling: no stacks, and why */
	cr_assert_not_null(strstr(json, "\"stacks\":[],\"stacks_note\":\"jemalloc holds no "
					"sampled object"),
			   "%s", json);
	free(json);
	free(st);
	svc_stop(&s);
	svc_pid = 0;
}

Test(rss, exact_on_debians_jemalloc)
{
	exact(hb_path("examples/alloc-service-static"), "MALLOC_CONF");
}

Test(rss_versions, exact_521)
{
	exact(hb_fixture_built("bin/je521fix-static"), "MALLOC_CONF");
}

Test(rss_versions, exact_530_shared)
{
	exact(hb_fixture_built("bin/je530-shared"), "MALLOC_CONF");
}

Test(rss_versions, exact_531)
{
	exact(hb_fixture_built("bin/je531-static"), "MALLOC_CONF");
}

Test(rss_versions, exact_rjem530)
{
	exact(hb_fixture_built("bin/rjem530-static"), "_RJEM_MALLOC_CONF");
}

Test(rss_versions, exact_rjem531)
{
	exact(hb_fixture_built("bin/rjem531-shared"), "_RJEM_MALLOC_CONF");
}

/*
 * 5.3.0 configured with a 57-bit address width, as configure makes it on a
 * CPU with five-level paging (a Rust service's jemalloc built on such a
 * server): a page map of three levels with two-word leaf elements, read as
 * exactly as the 48-bit one.
 */
Test(rss_versions, exact_530_57_bit_addresses)
{
	exact(hb_fixture_built("bin/vaddr57-static"), "MALLOC_CONF");
}

/* heapbpf rss with args; its exit status, its stderr into err. */
static int rss_run(const char *const *args, char *err, size_t len)
{
	const char *argv[16] = { "rss" };
	int n = 1;

	for (; *args && n < 15; args++)
		argv[n++] = *args;
	argv[n] = NULL;
	return hb_run(argv, err, len, 60000);
}

/* The table: every part said, and what to do about the largest. */
Test(rss, text_adds_up_and_says_what_to_do)
{
	static const char *const want[] = {
		"jemalloc 5.3.0: RSS ",
		"jemalloc: small objects' slabs",
		"jemalloc: large objects",
		"jemalloc: dirty pages",
		"jemalloc: retained",
		"jemalloc: its metadata",
		"thread stacks",
		"other anonymous memory",
		"files (binaries, libraries, mapped files)",
		"unexplained",
		"\n  RSS ",
		"jemalloc's own figures: allocated ",
		"small size classes with the most free bytes in their slabs:",
		"what to do:",
		"free regions in partly used slabs hold",
	};
	char reply[256];
	struct svc s;
	char *text;

	cr_assert_eq(svc_start(&s, hb_path("examples/alloc-service-static"), IDLE,
			       (const char *[]){ "--threads", "0", NULL }),
		     0);
	svc_pid = s.pid;
	cr_assert_eq(svc_cmd(&s, "fragment 64", reply, sizeof(reply), 120000), 0);
	text = rss_of(s.pid, "text");
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		cr_assert_not_null(strstr(text, want[i]), "no \"%s\" in:\n%s", want[i], text);
	free(text);
	/* not sampling: the table, but no profile, said, exit 1, no file */
	{
		char err[4096], pidarg[16];
		const char *out = hb_tmp("held.pb.gz");

		snprintf(pidarg, sizeof(pidarg), "%d", s.pid);
		cr_assert_eq(rss_run((const char *[]){ "--pid", pidarg, "-o", out, NULL }, err,
				     sizeof(err)),
			     1, "%s", err);
		cr_assert_not_null(strstr(err, "no profile written to"), "%s", err);
		cr_assert_neq(access(out, F_OK), 0, "%s was written", out);
	}
	svc_stop(&s);
	svc_pid = 0;
}

Test(rss, refuses_what_it_cannot_read)
{
	char err[4096], pidarg[16];
	pid_t sleeper = hb_spawn((const char *[]){ "/bin/sleep", "600", NULL }, NULL);

	svc_pid = sleeper;
	snprintf(pidarg, sizeof(pidarg), "%d", sleeper);
	cr_assert_eq(rss_run((const char *[]){ "--pid", pidarg, NULL }, err, sizeof(err)), 1, "%s",
		     err);
	cr_assert_not_null(strstr(err, "jemalloc"), "%s", err);
	cr_assert_eq(rss_run((const char *[]){ "--pid", pidarg, "--format", "xml", NULL }, err,
			     sizeof(err)),
		     2, "%s", err);
	cr_assert_not_null(strstr(err, "unknown --format \"xml\" for rss"), "%s", err);
	cr_assert_eq(rss_run((const char *[]){ "--pid", pidarg, "--duration", "5", NULL }, err,
			     sizeof(err)),
		     2, "%s", err);
	cr_assert_not_null(strstr(err, "prints to stdout"), "%s", err);
	cr_assert_eq(rss_run((const char *[]){ NULL }, err, sizeof(err)), 2, "%s", err);
	cr_assert_not_null(strstr(err, "--pid is required"), "%s", err);
	cr_assert_eq(rss_run((const char *[]){ "--pid", pidarg, "-o", "-", NULL }, err,
			     sizeof(err)),
		     2, "%s", err);
	cr_assert_not_null(strstr(err, "give a file name"), "%s", err);
}

/* A --enable-debug jemalloc moves every structure: refused, said. */
Test(rss_versions, refuses_a_debug_build)
{
	char err[4096], pidarg[16];
	struct svc s;

	cr_assert_eq(svc_start(&s, hb_fixture_built("bin/debug530-static"), IDLE,
			       (const char *[]){ "--threads", "0", NULL }),
		     0);
	svc_pid = s.pid;
	snprintf(pidarg, sizeof(pidarg), "%d", s.pid);
	cr_assert_eq(rss_run((const char *[]){ "--pid", pidarg, NULL }, err, sizeof(err)), 1, "%s",
		     err);
	cr_assert_not_null(strstr(err, "not of a --enable-debug build"), "%s", err);
	svc_stop(&s);
	svc_pid = 0;
}

/* ---- Redis built as upstream builds it: its INFO memory against heapbpf rss ---- */

/* The field of redis-cli's INFO memory on port (asserted there). */
static double redis_info(int port, const char *field)
{
	char cmd[128], line[512];
	double v = -1;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "redis-cli -h 127.0.0.1 -p %d INFO memory", port);
	p = popen(cmd, "r");
	cr_assert_not_null(p);
	while (fgets(line, sizeof(line), p)) {
		size_t n = strlen(field);

		if (!strncmp(line, field, n) && line[n] == ':')
			v = strtod(line + n + 1, NULL);
	}
	pclose(p);
	cr_assert_geq(v, 0, "redis's INFO memory has no %s", field);
	return v;
}

/* got within 1% of the span of two readings of redis's own figure, one before, one after. */
static void between(double got, double a, double b, const char *what, const char *json)
{
	double lo = a < b ? a : b, hi = a > b ? a : b;

	cr_assert(got >= 0.99 * lo && got <= 1.01 * hi,
		  "%s: heapbpf %.0f, redis %.0f then %.0f: %s", what, got, a, b, json);
}

Test(rss_versions, redis_fragmented_by_deletes)
{
	static const char *const fields[] = { "allocator_allocated", "allocator_active",
					      "allocator_resident", "used_memory_rss" };
	static const char *const ours[] = { "allocated", "active", "stats_resident", "rss" };
	const char *bin = hb_fixture_built("redis/bin/redis-server");
	char portarg[16], reply[256] = "", cmd[256];
	double before[4], after[4];
	char *json;
	pid_t redis;
	int port = 0;

	port = hb_free_port();
	snprintf(portarg, sizeof(portarg), "%d", port);
	setenv("JE_MALLOC_CONF", IDLE, 1);
	redis = hb_spawn((const char *[]){ bin, "--port", portarg, "--bind", "127.0.0.1", "--save",
					   "", "--appendonly", "no", "--enable-debug-command",
					   "local", "--dir", hb_tmpdir(), NULL },
			 hb_tmp("redis.log"));
	unsetenv("JE_MALLOC_CONF");
	svc_pid = redis;
	for (int i = 0; i < 300 && strcmp(reply, "PONG"); i++) {
		cr_assert_eq(waitpid(redis, NULL, WNOHANG), 0, "redis-server exited: %s",
			     hb_file_text(hb_tmp("redis.log")));
		hb_sleep_ms(100);
		hb_redis_cli(port, "ping", reply, sizeof(reply));
	}
	cr_assert_str_eq(reply, "PONG", "%s", hb_file_text(hb_tmp("redis.log")));
	/* 300k small keys, three in four deleted at random: the classic fragmentation */
	hb_redis_cli(port, "DEBUG POPULATE 300000 key 100", reply, sizeof(reply));
	cr_assert_str_eq(reply, "OK");
	snprintf(cmd, sizeof(cmd),
		 "EVAL \"for i=0,299999 do if math.random(4) ~= 1 then "
		 "redis.call('DEL','key:'..i) end end return 1\" 0");
	hb_redis_cli(port, cmd, reply, sizeof(reply));
	cr_assert_str_eq(reply, "1", "%s", reply);

	for (int i = 0; i < 4; i++)
		before[i] = redis_info(port, fields[i]);
	json = rss_of(redis, "json");
	for (int i = 0; i < 4; i++)
		after[i] = redis_info(port, fields[i]);
	for (int i = 0; i < 4; i++)
		between(json_num(json, ours[i]), before[i], after[i], fields[i], json);
	/* where the difference lies: jemalloc's resident is its upper bound, measured less */
	cr_assert_leq(json_num(json, "resident"), json_num(json, "stats_resident"), "%s", json);
	{
		double free_bytes = 0;

		for (const char *f = json; (f = strstr(f, "\"free\":")); f++)
			free_bytes += strtod(f + 7, NULL);
		cr_assert_gt(free_bytes, 1 << 20, "the deletes left free regions: %s", json);
	}
	free(json);
	kill(redis, SIGTERM);
	cr_assert_geq(hb_wait(redis, 30000), 0);
	svc_pid = 0;
}

/* The held bytes of the stack whose site is site, and its in-use bytes; asserted there. */
static void stack_of(const char *json, const char *site, double *inuse, double *held)
{
	char pat[128];
	const char *p;

	snprintf(pat, sizeof(pat), "\"%s\"", site);
	p = strstr(strstr(json, "\"stacks\":["), pat);
	cr_assert_not_null(p, "no stack through %s: %s", site, json);
	*inuse = json_num(p, "inuse");
	*held = json_num(p, "held");
}

/* The function that called malloc in sample s: the outermost line of its leaf location. */
static const char *leaf_of(const Perftools__Profiles__Profile *p,
			   const Perftools__Profiles__Sample *s)
{
	const Perftools__Profiles__Location *l = p->location[s->location_id[0] - 1];

	return p->string_table[p->function[l->line[l->n_line - 1]->function_id - 1]->name];
}

/* -o: a pprof whose fifth sample type is held_space; sparse_small's several times its in use. */
static void held_profile(pid_t pid, double sparse_inuse)
{
	Perftools__Profiles__Profile *pp;
	const char *path = hb_tmp("held.pb.gz");
	char *buf;
	ssize_t n;
	bool found = false;

	hb_sh("'%s' rss --pid %d -q -o '%s' > /dev/null", hb_path("heapbpf"), pid, path);
	n = hb_read_file(path, &buf);
	cr_assert_gt(n, 0);
	cr_assert_eq(pprof_decode((uint8_t *)buf, (size_t)n, &pp), 0);
	free(buf);
	cr_assert_eq(pp->n_sample_type, 5);
	cr_assert_str_eq(pp->string_table[pp->sample_type[4]->type], "held_space");
	cr_assert_str_eq(pp->string_table[pp->sample_type[4]->unit], "bytes");
	cr_assert_str_eq(pp->string_table[pp->sample_type[3]->type], "inuse_space");
	for (size_t i = 0; i < pp->n_sample; i++) {
		const Perftools__Profiles__Sample *s = pp->sample[i];

		if (!s->n_location_id || strcmp(leaf_of(pp, s), "sparse_small") != 0)
			continue;
		found = true;
		cr_assert_eq(s->n_value, 5);
		cr_assert_geq((double)s->value[4], 4 * (double)s->value[3]);
		/* the same read as the JSON's, give or take what the process did between */
		cr_assert_geq((double)s->value[3], 0.5 * sparse_inuse);
	}
	cr_assert(found, "no sparse_small sample in %s", path);
	perftools__profiles__profile__free_unpacked(pp, NULL);
}

/*
 * held: a stack whose objects sit in a sparse size class (7 in 8 of its
 * regions freed) holds several times its in-use bytes; one in a dense class
 * about its in-use bytes. The process samples (1 in 64 KiB).
 */
Test(rss, held_is_several_times_in_use_in_a_sparse_class)
{
	char reply[256];
	struct svc s;
	double sparse_inuse, sparse_held, dense_inuse, dense_held;
	char *json;

	cr_assert_eq(svc_start(&s, hb_path("examples/alloc-service-static"),
			       "prof:true,prof_active:true,lg_prof_sample:16",
			       (const char *[]){ "--threads", "0", NULL }),
		     0);
	svc_pid = s.pid;
	cr_assert_eq(svc_cmd(&s, "sparse 320 64", reply, sizeof(reply), 120000), 0);
	cr_assert(!strncmp(reply, "sparse ", 7), "%s", reply);
	cr_assert_eq(svc_cmd(&s, "dense 256 32", reply, sizeof(reply), 120000), 0);
	cr_assert(!strncmp(reply, "dense ", 6), "%s", reply);
	json = rss_of(s.pid, "json");
	stack_of(json, "sparse_small", &sparse_inuse, &sparse_held);
	stack_of(json, "dense_small", &dense_inuse, &dense_held);
	/* 64 MiB of 320-byte objects, one in 8 kept: about 8 MiB in use, 64 MiB of slabs */
	cr_assert(sparse_inuse > 4e6 && sparse_inuse < 16e6, "%s", json);
	cr_assert_geq(sparse_held, 4 * sparse_inuse, "%s", json);
	cr_assert(dense_inuse > 24e6 && dense_inuse < 40e6, "%s", json);
	cr_assert(dense_held >= dense_inuse && dense_held <= 1.2 * dense_inuse, "%s", json);
	free(json);
	json = rss_of(s.pid, "text");
	cr_assert_not_null(strstr(json, "stacks holding the most"), "%s", json);
	cr_assert_not_null(strstr(json, "sparse_small <- cmd_classed"), "%s", json);
	free(json);
	held_profile(s.pid, sparse_inuse);
	svc_stop(&s);
	svc_pid = 0;
}

/*
 * The newest JSON breakdown watch wrote into dir beside a profile, once it
 * has seen the sparse class in use: a demand profile at a time, until one
 * does. A breakdown waits for the service to have used 200 times its cost
 * in CPU since the last: it spins 300 ms of CPU before each demand.
 */
static char *breakdown_after_sparse(struct svc *svc, const char *dir, char *pb, size_t len)
{
	static char names[128][256];

	for (int tries = 0; tries < 120; tries++) {
		int n0 = hb_count_files(dir, ".pb.gz", NULL, 0), n;
		char path[PATH_MAX], reply[64], *json = NULL;

		cr_assert_eq(svc_cmd(svc, "spin 300", reply, sizeof(reply), 60000), 0);
		kill(watch_pid, SIGUSR1);
		for (int waited = 0; hb_count_files(dir, ".pb.gz", NULL, 0) <= n0; waited += 50) {
			cr_assert_lt(waited, 60000, "no profile came on SIGUSR1: %s",
				     hb_file_text(hb_tmp("watch.err")));
			hb_sleep_ms(50);
		}
		/* the first, before any breakdown, has none beside it */
		n = hb_count_files(dir, ".rss.json", names, 128);
		cr_assert_lt(n, 128);
		if (n) {
			snprintf(path, sizeof(path), "%s/%s", dir, names[n - 1]);
			cr_assert_geq(hb_read_file(path, &json), 0);
		}
		/* 320-byte regions in use: the sparse class's 26k, not the few before */
		if (json && json_num(strstr(json, "{\"size\":320,"), "used") > 20000) {
			snprintf(pb, len, "%s", path);
			strcpy(strstr(pb, ".rss.json"), ".pb.gz");
			return json;
		}
		free(json);
	}
	cr_assert_fail("no breakdown saw the sparse class: %s", hb_file_text(hb_tmp("watch.err")));
	return NULL;
}

/*
 * heapbpf watch: a demand profile carries the target's last RSS breakdown:
 * its age and parts in a comment, held_space (sparse_small's several times
 * its in use, dense_small's about its in use) and heapbpf rss's JSON beside
 * it, whose stacks are the profile's.
 */
Test(rss, a_watch_profile_carries_the_breakdown)
{
	const char *dir = hb_tmp("watch");
	char reply[256], pid[16], pb[PATH_MAX], *json, *buf;
	double sparse_inuse, sparse_held, dense_inuse, dense_held;
	Perftools__Profiles__Profile *pp;
	bool comment = false;
	uint64_t flag;
	struct svc s;
	ssize_t n;

	hb_require_bpf();
	cr_assert_eq(svc_start(&s, hb_path("examples/alloc-service-static"),
			       IDLE ",lg_prof_sample:16",
			       (const char *[]){ "--threads", "0", NULL }),
		     0);
	svc_pid = s.pid;
	snprintf(pid, sizeof(pid), "%d", s.pid);
	cr_assert_eq(mkdir(dir, 0700), 0);
	watch_pid = hb_spawn((const char *[]){ hb_path("heapbpf"), "watch", "--pid", pid,
					       "--output-dir", dir, NULL },
			     hb_tmp("watch.err"));
	/* prof_active on, not the start line (said before the flag is written): then it samples */
	cr_assert_eq(hb_sym_addr(s.pid, hb_path("examples/alloc-service-static"),
				 "je_prof_active_state", &flag),
		     0);
	cr_assert(hb_wait_byte(s.pid, flag, 1, 60000, watch_pid), "%s",
		  hb_file_text(hb_tmp("watch.err")));
	cr_assert_eq(svc_cmd(&s, "sparse 320 64", reply, sizeof(reply), 120000), 0);
	cr_assert_eq(svc_cmd(&s, "dense 256 32", reply, sizeof(reply), 120000), 0);
	json = breakdown_after_sparse(&s, dir, pb, sizeof(pb));
	/* its end: a breakdown's JSON is longer than a message shows */
	cr_assert_not_null(strstr(json, "\"age_ms\":"), "...%s",
			   json + (strlen(json) > 400 ? strlen(json) - 400 : 0));
	cr_assert_lt(json_num(json, "age_ms"), 600000, "%s", json);
	cr_assert_eq(json_num(json, "unexplained"), json_num(json, "unexplained"));
	stack_of(json, "sparse_small", &sparse_inuse, &sparse_held);
	stack_of(json, "dense_small", &dense_inuse, &dense_held);
	cr_assert(sparse_inuse > 4e6 && sparse_inuse < 16e6, "%s", json);
	cr_assert_geq(sparse_held, 4 * sparse_inuse, "%s", json);
	cr_assert(dense_held >= dense_inuse && dense_held <= 1.2 * dense_inuse, "%s", json);
	free(json);
	/* the profile: held_space as its fifth type, the breakdown's comment */
	n = hb_read_file(pb, &buf);
	cr_assert_gt(n, 0, "%s", pb);
	cr_assert_eq(pprof_decode((uint8_t *)buf, (size_t)n, &pp), 0);
	free(buf);
	cr_assert_eq(pp->n_sample_type, 5);
	cr_assert_str_eq(pp->string_table[pp->sample_type[4]->type], "held_space");
	for (size_t i = 0; i < pp->n_comment; i++)
		comment |= strstr(pp->string_table[pp->comment[i]], "heapbpf: RSS measured ") &&
			   strstr(pp->string_table[pp->comment[i]], " s before this profile: ");
	cr_assert(comment, "no breakdown in %s's comments", pb);
	for (size_t i = 0; i < pp->n_sample; i++) {
		const Perftools__Profiles__Sample *smp = pp->sample[i];

		cr_assert_geq(smp->value[4], smp->value[3] > 0 ? smp->value[3] : 0);
		if (smp->n_location_id && !strcmp(leaf_of(pp, smp), "sparse_small"))
			cr_assert_eq((double)smp->value[4], sparse_held);
	}
	perftools__profiles__profile__free_unpacked(pp, NULL);
	kill(watch_pid, SIGTERM);
	cr_assert_eq(hb_wait(watch_pid, 60000), 0, "%s", hb_file_text(hb_tmp("watch.err")));
	watch_pid = 0;
	svc_stop(&s);
	svc_pid = 0;
}
