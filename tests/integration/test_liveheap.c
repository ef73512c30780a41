// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * heapbpf --live-heap against real processes and jemalloc's own prof.dump.
 *
 *   liveheap/oracle_*        target paused and stopped (SIGSTOP), read, then
 *                            its own dump: every stack's current and
 *                            accumulated counts equal, raw (prof_unbias:false)
 *                            and, on 5.3, the unbiased values against a
 *                            prof_unbias:true dump; on the fixtures (5.3.0
 *                            static, shared, _rjem_, debug; 5.2.1)
 *   liveheap/cli_*           the command: outputs, messages, exit codes
 *   liveheap/corrupt_*       garbage written into the target's tables: a
 *                            one-sentence refusal, no file, the target fine
 *   liveheap_load/stress     four threads allocating at full speed: twenty
 *                            reads in a row, each complete or refused
 *                            cleanly, totals near a dump taken right after
 *
 * The suites need the fixtures (versions group) or load the machine (serial).
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "collector.h"
#include "harness.h"
#include "heapwalk.h"
#include "jedump.h"
#include "layout.h"
#include "liveheap.h"
#include "target.h"

TestSuite(liveheap, .fini = hb_tmpdir_cleanup, .timeout = 180);
TestSuite(liveheap_load, .fini = hb_tmpdir_cleanup, .timeout = 300);

/* Sampling every 16 KiB: hundreds of live samples in a second of work. */
#define CONF_RAW    "prof:true,prof_active:true,prof_accum:true,prof_unbias:false,lg_prof_sample:14"
#define CONF_UNBIAS "prof:true,prof_active:true,prof_accum:true,prof_unbias:true,lg_prof_sample:14"
#define CONF_521    "prof:true,prof_active:true,prof_accum:true,lg_prof_sample:14"

/* HEAPBPF_FIXTURES (set by make), else <build>/fixtures */
static const char *fx(const char *rel)
{
	static char bufs[4][PATH_MAX];
	static unsigned int next;
	const char *dir = getenv("HEAPBPF_FIXTURES");
	char *b = bufs[next++ % 4];
	struct stat st;

	snprintf(b, PATH_MAX, "%s/%s", dir && dir[0] ? dir : hb_path("fixtures"), rel);
	cr_assert_eq(
		stat(b, &st), 0,
		"fixture %s is missing: make test builds it (scripts/build-jemalloc-fixtures.sh)",
		b);
	return b;
}

/* Starts bin with ENV_NAME=conf, four threads at full speed, and lets it work ms. */
static void start(struct svc *s, const char *bin, const char *env_name, const char *conf,
		  const char *rate, int ms)
{
	static char envbuf[512];
	const char *env[] = { envbuf, NULL };
	const char *args[] = { "--threads", "4", "--rate", rate, NULL };

	hb_require_bpf();
	snprintf(envbuf, sizeof(envbuf), "%s=%s", env_name ? env_name : "MALLOC_CONF", conf);
	cr_assert_eq(svc_start_env(s, bin, NULL, env, args), 0, "cannot start %s", bin);
	hb_sleep_ms(ms);
}

static void cmd(struct svc *s, const char *c, const char *want)
{
	char reply[PATH_MAX];

	cr_assert_eq(svc_cmd(s, c, reply, sizeof(reply), 20000), 0, "%s: no reply", c);
	cr_assert_str_eq(reply, want, "%s", c);
}

static void stop_and_wait(pid_t pid)
{
	int status;

	cr_assert_eq(kill(pid, SIGSTOP), 0);
	cr_assert_eq(waitpid(pid, &status, WUNTRACED), pid);
	cr_assert(WIFSTOPPED(status));
}

static void cont(pid_t pid)
{
	cr_assert_eq(kill(pid, SIGCONT), 0);
}

/* One read through the API, into a new collector (freed by the caller). */
static int walk(pid_t pid, struct collector **c, struct heapwalk_stats *st, char *err,
		size_t errlen)
{
	struct jemalloc_target *t;
	struct heapwalk_syms sy;
	struct mem_source m;
	int rc;

	rc = jemalloc_target__find(pid, NULL, &t, err, errlen);
	cr_assert_eq(rc, 0, "%s", err);
	cr_assert_eq(liveheap_syms(t, &sy, err, errlen), 0, "%s", err);
	cr_assert_eq(memsrc_proc_open(pid, &m, err, errlen), 0, "%s", err);
	cr_assert_eq(collector__new(1ull << t->lg_prof_sample, c), 0);
	rc = heapwalk_read(&m, t->layout, &sy, NULL, *c, st, err, errlen);
	memsrc_proc_close(&m);
	jemalloc_target__free(t);
	return rc;
}

static const struct hb_stack *find_stack(const struct collector *c, const struct jedump_stack *d)
{
	for (size_t i = 0; i < collector__nstacks(c); i++) {
		const struct hb_stack *s = collector__stack(c, i);

		if (s->nframes == d->nframes &&
		    (!d->nframes || memcmp(s->frames, d->frames, d->nframes * 8) == 0))
			return s;
	}
	return NULL;
}

/* The dump's c, s for a stack whose sums heapbpf holds (raw, or jemalloc's unbiasing). */
static void expect(const struct hb_stack *h, bool unbias, bool cur, uint64_t *c, uint64_t *s)
{
	if (!unbias) {
		*c = cur ? (uint64_t)h->inuse_samples : h->samples;
		*s = cur ? (uint64_t)h->inuse_bytes : h->bytes;
		return;
	}
	/* heapbpf keeps jemalloc's sums: objects = shifted / 8, bytes as they are */
	heapwalk_jeprof_input((uint64_t)llround((cur ? h->inuse_objects : h->alloc_objects) * 8),
			      (uint64_t)llround(cur ? h->inuse_space : h->alloc_space), 14, 3, c,
			      s);
}

/*
 * The oracle: paused and stopped, read; resumed, jemalloc's dump; every
 * stack equal, both ways.
 */
static void oracle(const char *bin, const char *env_name, const char *conf, bool unbias)
{
	char dump[PATH_MAX], c[PATH_MAX + 8], err[1024];
	struct heapwalk_stats st;
	struct collector *col;
	struct jedump *d;
	struct svc s;
	uint64_t cur = 0;
	int rc;

	snprintf(dump, sizeof(dump), "%s/jemalloc.heap", hb_tmpdir());
	start(&s, bin, env_name, conf, "0", 1500);
	cmd(&s, "pause", "paused");
	stop_and_wait(s.pid);
	rc = walk(s.pid, &col, &st, err, sizeof(err));
	cont(s.pid);
	cr_assert_eq(rc, 0, "%s", err);
	cr_assert_eq(st.attempts, 1, "a stopped process read in %u attempts", st.attempts);
	snprintf(c, sizeof(c), "dump %s", dump);
	cmd(&s, c, "dumped");
	cr_assert_eq(svc_stop(&s), 0);
	cr_assert_eq(jedump_parse_file(dump, &d), 0);
	cr_assert(st.prof_active && st.prof_accum);
	cr_assert_eq(d->nstacks, st.stacks, "jemalloc dumped %zu stacks, heapbpf read %" PRIu64,
		     d->nstacks, st.stacks);
	for (size_t i = 0; i < d->nstacks; i++) {
		const struct jedump_stack *j = &d->stacks[i];
		const struct hb_stack *h = find_stack(col, j);
		uint64_t eo, eb, ao, ab;

		cr_assert_not_null(h, "stack %zu of the dump (%zu frames) was not read", i,
				   j->nframes);
		expect(h, unbias, true, &eo, &eb);
		expect(h, unbias, false, &ao, &ab);
		cr_assert(eo == j->curobjs && eb == j->curbytes,
			  "stack %zu: current %" PRIu64 ": %" PRIu64 ", jemalloc %" PRIu64
			  ": %" PRIu64,
			  i, eo, eb, j->curobjs, j->curbytes);
		cr_assert(ao == j->accumobjs && ab == j->accumbytes,
			  "stack %zu: accumulated %" PRIu64 ": %" PRIu64 ", jemalloc %" PRIu64
			  ": %" PRIu64,
			  i, ao, ab, j->accumobjs, j->accumbytes);
		cur += j->curobjs;
	}
	if (!unbias) {
		cr_assert_eq(st.curobjs, d->total_curobjs);
		cr_assert_eq(st.curbytes, d->total_curbytes);
		cr_assert_eq(st.accumbytes, d->total_accumbytes);
	}
	/* a comparison of nothing proves nothing */
	cr_assert_gt(cur, 100, "only %" PRIu64 " live samples: the workload did not run", cur);
	cr_assert_gt(d->nstacks, 4);
	jedump__free(d);
	collector__free(col);
}

Test(liveheap, oracle_530_static)
{
	oracle(fx("bin/je530-static"), NULL, CONF_RAW, false);
}

Test(liveheap, oracle_530_static_unbiased)
{
	oracle(fx("bin/je530-static"), NULL, CONF_UNBIAS, true);
}

Test(liveheap, oracle_530_shared)
{
	oracle(fx("bin/je530-shared"), NULL, CONF_RAW, false);
}

Test(liveheap, oracle_530_shared_unbiased)
{
	oracle(fx("bin/je530-shared"), NULL, CONF_UNBIAS, true);
}

Test(liveheap, oracle_rjem530_static)
{
	oracle(fx("bin/rjem530-static"), "_RJEM_MALLOC_CONF", CONF_RAW, false);
}

Test(liveheap, oracle_rjem530_shared_unbiased)
{
	oracle(fx("bin/rjem530-shared"), "_RJEM_MALLOC_CONF", CONF_UNBIAS, true);
}

Test(liveheap, oracle_530_debug)
{
	oracle(fx("bin/debug530-static"), NULL, CONF_RAW, false);
}

/* 5.2.1 (no unbiased counters, prints raw counts) */
Test(liveheap, oracle_521_static)
{
	oracle(fx("bin/je521-static"), NULL, CONF_521, false);
}

Test(liveheap, oracle_521_shared)
{
	oracle(fx("bin/je521fix-shared"), NULL, CONF_521, false);
}
