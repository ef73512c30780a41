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
 *   liveheap/rotate_*        one site of one size (700000 B, rotated by three
 *                            threads) at the default rate: its estimates are
 *                            the dump's raw counts weighed exactly, not
 *                            jemalloc's sums rounded per size class
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
#include <zlib.h>

#include "collect/collector.h"
#include "harness.h"
#include "heap/heapwalk.h"
#include "jedump.h"
#include "jemalloc/layout.h"
#include "jemalloc/layout_dwarf.h"
#include "run/liveheap.h"
#include "jemalloc/target.h"

/* The service of the running test: killed at its end, so that a failed test leaves none stopped. */
static pid_t svc_pid;

static void fini(void)
{
	if (svc_pid > 0) {
		kill(svc_pid, SIGKILL);
		waitpid(svc_pid, NULL, 0);
		svc_pid = 0;
	}
	hb_tmpdir_cleanup();
}

TestSuite(liveheap, .fini = fini, .timeout = 180);
TestSuite(liveheap_load, .fini = fini, .timeout = 300);

/* Sampling every 16 KiB: hundreds of live samples in a second of work. */
#define CONF_RAW    "prof:true,prof_active:true,prof_accum:true,prof_unbias:false,lg_prof_sample:14"
#define CONF_UNBIAS "prof:true,prof_active:true,prof_accum:true,prof_unbias:true,lg_prof_sample:14"
#define CONF_521    "prof:true,prof_active:true,prof_accum:true,lg_prof_sample:14"

/* HEAPBPF_FIXTURES (set by make), else <build>/fixtures */
static const char *fx(const char *rel)
{
	return hb_fixture_built(rel);
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
	svc_pid = s->pid;
	hb_sleep_ms(ms);
}

/* "quit": the service exits 0 (fini has nothing left to kill). */
static void quit(struct svc *s)
{
	svc_pid = 0;
	cr_assert_eq(svc_stop(s), 0);
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

	/* no assertion here: the caller may have the target stopped */
	*c = NULL;
	rc = jemalloc_target__find(pid, NULL, &t, err, errlen);
	if (rc)
		return rc;
	rc = heapwalk_target_syms(t, &sy, err, errlen);
	rc = rc ?: collector__new(1ull << t->lg_prof_sample, c);
	rc = rc ?: memsrc_proc_open(pid, &m, err, errlen);
	if (!rc) {
		rc = heapwalk_read(&m, t->layout, &sy, NULL, *c, st, err, errlen);
		memsrc_proc_close(&m);
	}
	jemalloc_target__free(t);
	return rc;
}

static const struct hb_stack *find_stack(const struct collector *c, const struct jedump_stack *d)
{
	for (size_t i = 0; i < collector__nstacks(c); i++) {
		const struct hb_stack *s = collector__stack(c, i);
		uint64_t buf[HEAPBPF_MAX_FRAMES];

		if (s->nframes == d->nframes &&
		    (!d->nframes ||
		     memcmp(collector__frames(c, s, buf), d->frames, d->nframes * 8) == 0))
			return s;
	}
	return NULL;
}

/* What a sample of usable size z stands for, computed here as the formula says. */
static double weight(uint64_t z, double period)
{
	return 1.0 / (1.0 - exp(-(double)z / period));
}

/*
 * Whether the dump's c: s fit what heapbpf holds for a stack (raw, or
 * unbiased); *c, *s are what the dump should say.
 */
static bool fits(const struct hb_stack *h, bool unbias, bool cur, uint64_t dc, uint64_t ds,
		 uint64_t *c, uint64_t *s)
{
	uint64_t n = cur ? (uint64_t)h->inuse_samples : h->samples;
	uint64_t b = cur ? (uint64_t)h->inuse_bytes : h->bytes, su, bu;
	double objs = cur ? h->inuse_objects : h->alloc_objects;
	double space = cur ? h->inuse_space : h->alloc_space;

	if (!unbias) {
		*c = n;
		*s = b;
		return *c == dc && *s == ds;
	}
	/*
	 * A stack of one size is weighed exactly: jemalloc's own sums were then
	 * n times its size class's entries, which is what its dump unbiases.
	 * (Far above the rate the two ways agree: either may fit.)
	 */
	if (n && b % n == 0 && fabs(objs - (double)n * weight(b / n, 16384)) <= 1e-9 * objs &&
	    fabs(space - (double)b * weight(b / n, 16384)) <= 1e-9 * space &&
	    heapwalk_jemalloc_sums(n, b / n, 14, 3, &su, &bu)) {
		heapwalk_jeprof_input(su, bu, 14, 3, c, s);
		if (*c == dc && *s == ds)
			return true;
	}
	/* otherwise heapbpf keeps jemalloc's sums: objects = shifted / 8, bytes as they are */
	heapwalk_jeprof_input((uint64_t)llround(objs * 8), (uint64_t)llround(space), 14, 3, c, s);
	return *c == dc && *s == ds;
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
	start(&s, bin, env_name, conf, "0", 500);
	/*
	 * Enough work, however slow the machine: a loaded one once gave a debug
	 * build's 1.5 s too few sites. Each look is a full paused, stopped read.
	 */
	for (int look = 0;; look++) {
		cmd(&s, "pause", "paused");
		stop_and_wait(s.pid);
		rc = walk(s.pid, &col, &st, err, sizeof(err));
		cont(s.pid);
		cr_assert_eq(rc, 0, "%s", err);
		cr_assert_eq(st.attempts, 1, "a stopped process read in %u attempts", st.attempts);
		if ((st.curobjs > 100 && st.stacks > 4) || look == 240)
			break;
		collector__free(col);
		cmd(&s, "resume", "resumed");
		hb_sleep_ms(250);
	}
	snprintf(c, sizeof(c), "dump %s", dump);
	cmd(&s, c, "dumped");
	quit(&s);
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
		cr_assert(fits(h, unbias, true, j->curobjs, j->curbytes, &eo, &eb),
			  "stack %zu: current %" PRIu64 ": %" PRIu64 ", jemalloc %" PRIu64
			  ": %" PRIu64,
			  i, eo, eb, j->curobjs, j->curbytes);
		cr_assert(fits(h, unbias, false, j->accumobjs, j->accumbytes, &ao, &ab),
			  "stack %zu: accumulated %" PRIu64 ": %" PRIu64 ", jemalloc %" PRIu64
			  ": %" PRIu64,
			  i, ao, ab, j->accumobjs, j->accumbytes);
		cur += j->curobjs;
	}
	/* make_session's records are of one size: weighed exactly, the mixed ones not */
	if (st.unbiased)
		cr_assert(st.stacks_rounded > 0 && st.stacks_rounded < st.stacks,
			  "%" PRIu64 " of %" PRIu64 " stacks keep jemalloc's sums",
			  st.stacks_rounded, st.stacks);
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

/*
 * The reported case: three threads rotating 700000-byte buffers (usable
 * size 786432, a size class) through eight slots at the default 512 KiB,
 * half of them left live, the threads parked. The stack's estimates are the
 * dump's raw counts weighed exactly, as the windowed mode weighs each
 * sample; jemalloc's own sums keep 1.25 objects a sample for 1.28722 (2.9%
 * short).
 */
static void rotate_usize(const char *bin, const char *conf, uint64_t usize)
{
	const double period = 524288, w = weight((double)usize, period);
	char dump[PATH_MAX], c[PATH_MAX + 8], err[1024];
	const char *env[] = { c, NULL };
	const char *args[] = { "--threads", "0", NULL };
	const struct jedump_stack *j = NULL;
	const struct hb_stack *h;
	struct heapwalk_stats st;
	struct collector *col;
	struct jedump *d;
	struct svc s;
	int rc;

	hb_require_bpf();
	snprintf(c, sizeof(c), "MALLOC_CONF=%s", conf);
	cr_assert_eq(svc_start_env(&s, bin, NULL, env, args), 0, "cannot start %s", bin);
	svc_pid = s.pid;
	cmd(&s, "rotate 3 700000 8 200", "rotated 12");
	stop_and_wait(s.pid);
	rc = walk(s.pid, &col, &st, err, sizeof(err));
	cont(s.pid);
	cr_assert_eq(rc, 0, "%s", err);
	snprintf(dump, sizeof(dump), "%s/jemalloc.heap", hb_tmpdir());
	snprintf(c, sizeof(c), "dump %s", dump);
	cmd(&s, c, "dumped");
	quit(&s);
	cr_assert_eq(jedump_parse_file(dump, &d), 0);
	cr_assert_eq(d->sample_period, 524288);
	for (size_t i = 0; i < d->nstacks; i++) {
		if (d->stacks[i].accumobjs &&
		    d->stacks[i].accumbytes == d->stacks[i].accumobjs * usize) {
			cr_assert_null(j, "two stacks of %" PRIu64 "-byte samples", usize);
			j = &d->stacks[i];
		}
	}
	cr_assert_not_null(j, "no stack of %" PRIu64 "-byte samples in the dump", usize);
	/* 4800 buffers, each sampled with probability 1 - exp(-1.5) = 0.78 */
	cr_assert_gt(j->accumobjs, 3000);
	cr_assert_gt(j->curobjs, 0);
	cr_assert_eq(j->curbytes, j->curobjs * usize);
	h = find_stack(col, j);
	cr_assert_not_null(h, "the rotation's stack was not read");
	cr_assert(h->samples == j->accumobjs && h->bytes == j->accumbytes &&
		  (uint64_t)h->inuse_samples == j->curobjs &&
		  (uint64_t)h->inuse_bytes == j->curbytes);
	cr_assert_float_eq(h->alloc_objects, (double)j->accumobjs * w, 1e-9 * h->alloc_objects,
			   "alloc_objects %.3f, the dump's %" PRIu64 " samples weighed %.3f",
			   h->alloc_objects, j->accumobjs, (double)j->accumobjs * w);
	cr_assert_float_eq(h->alloc_space, (double)j->accumbytes * w, 1e-9 * h->alloc_space,
			   "alloc_space %.0f, expected %.0f", h->alloc_space,
			   (double)j->accumbytes * w);
	cr_assert_float_eq(h->inuse_objects, (double)j->curobjs * w, 1e-9 * h->inuse_objects,
			   "inuse_objects %.3f, expected %.3f", h->inuse_objects,
			   (double)j->curobjs * w);
	cr_assert_float_eq(h->inuse_space, (double)j->curbytes * w, 1e-9 * h->inuse_space,
			   "inuse_space %.0f, expected %.0f", h->inuse_space,
			   (double)j->curbytes * w);
	jedump__free(d);
	collector__free(col);
}

/* 700000 bytes are 786432 usable in 5.2.1 and 5.3.0's size classes */
static void rotate(const char *bin, const char *conf)
{
	rotate_usize(bin, conf, 786432);
}

#define CONF_DEFAULT_RATE "prof:true,prof_active:true,prof_accum:true,prof_unbias:false"

Test(liveheap, rotate_530_static)
{
	rotate(fx("bin/je530-static"), CONF_DEFAULT_RATE);
}

Test(liveheap, rotate_530_shared)
{
	rotate(fx("bin/je530-shared"), CONF_DEFAULT_RATE);
}

/*
 * 5.3.1, from Debian unstable's source package: its tables, the same
 * weighing. Its large objects are rounded to whole pages, not to 5.3.0's
 * size classes: 700000 bytes are 700416 usable, as its own dump says.
 */
Test(liveheap, rotate_531_static)
{
	rotate_usize(fx("bin/je531-static"), CONF_DEFAULT_RATE, 700416);
}

Test(liveheap, rotate_531_shared)
{
	rotate_usize(fx("bin/je531-shared"), CONF_DEFAULT_RATE, 700416);
}

/* 5.2.1 keeps raw counts only: weighed by the mean size, exact for one size */
Test(liveheap, rotate_521_static)
{
	rotate(fx("bin/je521fix-static"), "prof:true,prof_active:true,prof_accum:true");
}

/* 5.3.1, from Debian unstable's source package */
Test(liveheap, oracle_531_static)
{
	oracle(fx("bin/je531-static"), NULL, CONF_RAW, false);
}

Test(liveheap, oracle_531_shared_unbiased)
{
	oracle(fx("bin/je531-shared"), NULL, CONF_UNBIAS, true);
}

Test(liveheap, oracle_rjem531_static)
{
	oracle(fx("bin/rjem531-static"), "_RJEM_MALLOC_CONF", CONF_RAW, false);
}

Test(liveheap, oracle_rjem531_shared_unbiased)
{
	oracle(fx("bin/rjem531-shared"), "_RJEM_MALLOC_CONF", CONF_UNBIAS, true);
}

Test(liveheap, oracle_531_debug)
{
	oracle(fx("bin/debug531-static"), NULL, CONF_RAW, false);
}

/* no DWARF: the table's 5.3.1 heap offsets alone */
Test(liveheap, oracle_rust531_release_binary)
{
	oracle(fx("bin/rjem531-rust"), "_RJEM_MALLOC_CONF", CONF_RAW, false);
}

/* ---- the table's heap offsets against the fixtures' DWARF --------------------- */

static void heap_dwarf(const char *bin, const char *version, bool debug)
{
	const struct jemalloc_layout *l = jemalloc_layout_by_name(version);
	struct jemalloc_layout dl, bad;
	struct jemalloc_heap_layout built;
	struct jemalloc_dwarf d;
	char why[256] = "";

	cr_assert_not_null(l);
	if (debug) {
		jemalloc_layout_debug(l, &dl);
		l = &dl;
	}
	cr_assert_eq(layout_dwarf_read(bin, &d), 0, "no DWARF in %s", bin);
	/* every field the walker reads is described, and equals the table's */
	cr_assert_eq(layout_dwarf_heap(&d, &built), 0, "%s lacks a heap field", bin);
	cr_assert_eq(layout_dwarf_check(l, &d, why, sizeof(why)), 0, "%s", why);
	cr_assert_eq(built.tctx_cnts, l->heap.tctx_cnts);
	cr_assert_eq(built.tctx_state, l->heap.tctx_state);
	cr_assert_eq(built.tctx_link, l->heap.tctx_link);
	cr_assert_eq(built.cnt_size, l->heap.cnt_size);
	cr_assert_eq(built.has_unbiased, l->heap.has_unbiased);
	cr_assert_eq(built.ckh_tab, l->heap.ckh_tab);
	/* a table that disagrees is refused, naming the field */
	bad = *l;
	bad.heap.tctx_state += 4;
	cr_assert_eq(layout_dwarf_check(&bad, &d, why, sizeof(why)), -EPROTO);
	cr_assert(strstr(why, "prof_tctx_t.state"), "%s", why);
}

Test(liveheap, dwarf_heap_offsets_530)
{
	heap_dwarf(fx("bin/je530-static"), "5.3.0", false);
}

Test(liveheap, dwarf_heap_offsets_530_debug)
{
	heap_dwarf(fx("bin/debug530-static"), "5.3.0", true);
}

/* 5.3.1's prof_tdata_t changed (thread_name inline, vec a pointer, bools moved) */
Test(liveheap, dwarf_heap_offsets_531)
{
	heap_dwarf(fx("bin/je531-static"), "5.3.1", false);
}

Test(liveheap, dwarf_heap_offsets_531_debug)
{
	heap_dwarf(fx("bin/debug531-static"), "5.3.1", true);
}

Test(liveheap, dwarf_heap_offsets_521)
{
	heap_dwarf(fx("bin/je521fix-static"), "5.2.1", false);
}

/* ---- the command ------------------------------------------------------------- */

/* Sum of the values of a folded file, and its line count. */
static uint64_t folded_sum(const char *path, size_t *lines)
{
	char *text = NULL, *p, *nl;
	uint64_t sum = 0;

	cr_assert_geq(hb_read_file(path, &text), 0, "cannot read %s", path);
	*lines = 0;
	for (p = text; *p; p = nl + 1) {
		char *sp;

		nl = strchr(p, '\n');
		cr_assert_not_null(nl, "%s: unterminated line", path);
		*nl = '\0';
		sp = strrchr(p, ' ');
		cr_assert_not_null(sp, "%s: %s", path, p);
		sum += strtoull(sp + 1, NULL, 10);
		(*lines)++;
	}
	free(text);
	return sum;
}

/* True when the gzip file at path holds the text (a pprof comment in its string table). */
static bool gz_holds(const char *path, const char *text)
{
	static char buf[1 << 22];
	gzFile z = gzopen(path, "rb");
	int n;

	cr_assert_not_null(z, "cannot open %s", path);
	n = gzread(z, buf, sizeof(buf));
	gzclose(z);
	cr_assert_gt(n, 0, "%s is empty", path);
	return memmem(buf, (size_t)n, text, strlen(text)) != NULL;
}

static bool exists(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0;
}

/* heapbpf --live-heap -p pid with more args; stderr into errbuf. */
static int live(pid_t pid, const char *const *more, char *errbuf, size_t len)
{
	const char *args[24] = { "--live-heap", "--pid" };
	char p[16];
	int n = 2;

	snprintf(p, sizeof(p), "%d", pid);
	args[n++] = p;
	for (; more && *more && n < 22; more++)
		args[n++] = *more;
	args[n] = NULL;
	return hb_run(args, errbuf, len, 60000);
}

/* One line of stderr that says what, and nothing more. */
static void one_sentence(const char *err, const char *what)
{
	const char *nl = strchr(err, '\n');

	cr_assert(nl && !nl[1], "not one line: %s", err);
	cr_assert(strstr(err, what), "expected \"%s\" in: %s", what, err);
}

/*
 * The outputs of a paused, stopped target: folded sums (raw) equal
 * jemalloc's dump totals; pprof and html written; the summary says
 * what it is.
 */
Test(liveheap, cli_outputs_equal_the_dump)
{
	char folded[PATH_MAX], objs[PATH_MAX], pb[PATH_MAX], html[PATH_MAX], dump[PATH_MAX];
	char c[PATH_MAX + 8], err[4096];
	size_t lines, n2;
	struct jedump *d;
	struct svc s;
	uint64_t bytes, count;

	snprintf(folded, sizeof(folded), "%s/live.folded", hb_tmpdir());
	snprintf(objs, sizeof(objs), "%s/objs.folded", hb_tmpdir());
	snprintf(pb, sizeof(pb), "%s/live.pb.gz", hb_tmpdir());
	snprintf(html, sizeof(html), "%s/live.html", hb_tmpdir());
	snprintf(dump, sizeof(dump), "%s/jemalloc.heap", hb_tmpdir());
	start(&s, fx("bin/je530-static"), NULL, CONF_RAW, "0", 1500);
	cmd(&s, "pause", "paused");
	stop_and_wait(s.pid);
	cr_assert_eq(live(s.pid, (const char *[]){ "--raw", "-f", "folded", "-o", folded, NULL },
			  err, sizeof(err)),
		     0, "%s", err);
	cr_assert(strstr(err, "live heap of pid") && strstr(err, "jemalloc is sampling now"), "%s",
		  err);
	cr_assert_eq(live(s.pid,
			  (const char *[]){ "--raw", "-f", "folded", "-t", "inuse_objects", "-o",
					    objs, "-q", NULL },
			  err, sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(live(s.pid, (const char *[]){ "-o", pb, "-q", NULL }, err, sizeof(err)), 0,
		     "%s", err);
	cr_assert_eq(live(s.pid, (const char *[]){ "-f", "html", "-o", html, "-q", NULL }, err,
			  sizeof(err)),
		     0, "%s", err);
	cont(s.pid);
	snprintf(c, sizeof(c), "dump %s", dump);
	cmd(&s, c, "dumped");
	quit(&s);
	cr_assert_eq(jedump_parse_file(dump, &d), 0);
	bytes = folded_sum(folded, &lines);
	count = folded_sum(objs, &n2);
	cr_assert_eq(bytes, d->total_curbytes, "folded in-use bytes %" PRIu64 ", jemalloc %" PRIu64,
		     bytes, d->total_curbytes);
	cr_assert_eq(count, d->total_curobjs);
	cr_assert_gt(count, 100);
	cr_assert_gt(lines, 4);
	cr_assert(exists(pb) && exists(html));
	/* the profile says what it is */
	cr_assert(gz_holds(pb, "heapbpf: live heap, read from jemalloc's own tables"));
	cr_assert(gz_holds(pb, "jemalloc is sampling now"));
	jedump__free(d);
}

/*
 * Started idle, sampled by a heapbpf window, read afterwards: the objects
 * sampled in the window and still live, and it says sampling is off now.
 */
Test(liveheap, cli_reads_what_earlier_windows_sampled)
{
	char folded[PATH_MAX], win[PATH_MAX], dump[PATH_MAX], c[PATH_MAX + 8], err[4096], p[16];
	struct jedump *d;
	struct svc s;
	uint64_t flag, bytes;
	size_t lines;
	uint8_t b;

	snprintf(folded, sizeof(folded), "%s/live.folded", hb_tmpdir());
	snprintf(win, sizeof(win), "%s/window.pb.gz", hb_tmpdir());
	snprintf(dump, sizeof(dump), "%s/jemalloc.heap", hb_tmpdir());
	start(&s, fx("bin/je530-static"), NULL,
	      "prof:true,prof_active:false,prof_accum:true,prof_unbias:false,lg_prof_sample:14",
	      "2000", 200);
	snprintf(p, sizeof(p), "%d", s.pid);
	cr_assert_eq(hb_run((const char *[]){ "-p", p, "-d", "2", "-q", "-o", win, NULL }, err,
			    sizeof(err), 60000),
		     0, "the window: %s", err);
	cr_assert_eq(hb_sym_addr(s.pid, fx("bin/je530-static"), "je_prof_active_state", &flag), 0);
	cr_assert_eq(hb_peek(s.pid, flag, &b, 1), 0);
	cr_assert_eq(b, 0, "prof_active was left on");
	cmd(&s, "pause", "paused");
	cr_assert_eq(live(s.pid, (const char *[]){ "--raw", "-f", "folded", "-o", folded, NULL },
			  err, sizeof(err)),
		     0, "%s", err);
	cr_assert(strstr(err, "sampled during earlier windows; jemalloc is not sampling now"), "%s",
		  err);
	snprintf(c, sizeof(c), "dump %s", dump);
	cmd(&s, c, "dumped");
	quit(&s);
	cr_assert_eq(jedump_parse_file(dump, &d), 0);
	bytes = folded_sum(folded, &lines);
	cr_assert_eq(bytes, d->total_curbytes);
	cr_assert_gt(d->total_curobjs, 10, "the window sampled too little to show anything");
	jedump__free(d);
}

/* Never sampled: a one-sentence refusal that points to the windowed mode, no file. */
Test(liveheap, cli_never_sampled_is_refused)
{
	char out[PATH_MAX], err[4096];
	struct svc s;

	snprintf(out, sizeof(out), "%s/live.pb.gz", hb_tmpdir());
	start(&s, fx("bin/je530-static"), NULL, "prof:true,prof_active:false", "2000", 200);
	cr_assert_eq(live(s.pid, (const char *[]){ "-o", out, NULL }, err, sizeof(err)), 1);
	one_sentence(err, "is not sampling now");
	cr_assert(strstr(err, "heapbpf --pid"), "%s", err);
	cr_assert(!exists(out), "%s was written", out);
	quit(&s);
}

/* ---- a corrupt table ---------------------------------------------------------- */

static void poke(pid_t pid, uint64_t addr, const void *buf, size_t len)
{
	struct iovec local = { .iov_base = (void *)buf, .iov_len = len };
	struct iovec remote = { .iov_base = (void *)(uintptr_t)addr, .iov_len = len };

	cr_assert_eq(process_vm_writev(pid, &local, 1, &remote, 1, 0), (ssize_t)len,
		     "process_vm_writev: %s", strerror(errno));
}

/* The first gctx of bt2gctx, found from the symbol (nm) and the 5.3.0 layout's offsets. */
static uint64_t first_gctx(pid_t pid, const char *bin, const struct jemalloc_layout *l)
{
	uint64_t ckh, tab, cell[2];
	uint32_t lg;

	cr_assert_eq(hb_sym_addr(pid, bin, "bt2gctx", &ckh), 0);
	cr_assert_eq(hb_peek(pid, ckh + l->heap.ckh_lg_curbuckets, &lg, 4), 0);
	cr_assert_eq(hb_peek(pid, ckh + l->heap.ckh_tab, &tab, 8), 0);
	for (uint64_t i = 0; i < (1ull << (lg + l->heap.lg_bucket_cells)); i++) {
		cr_assert_eq(hb_peek(pid, tab + i * 16, cell, 16), 0);
		if (cell[0])
			return cell[1];
	}
	cr_assert_fail("bt2gctx is empty");
	return 0;
}

/*
 * Writes len bytes of garbage at addr, expects heapbpf to refuse with what
 * in its one sentence and no file, then puts the bytes back and expects a
 * profile.
 */
static void corrupt(pid_t pid, uint64_t addr, const void *garbage, size_t len, const char *what)
{
	char out[PATH_MAX], err[4096];
	uint8_t saved[64];

	snprintf(out, sizeof(out), "%s/corrupt.pb.gz", hb_tmpdir());
	cr_assert_leq(len, sizeof(saved));
	cr_assert_eq(hb_peek(pid, addr, saved, len), 0);
	poke(pid, addr, garbage, len);
	cr_assert_eq(live(pid, (const char *[]){ "-o", out, NULL }, err, sizeof(err)), 1, "%s",
		     err);
	one_sentence(err, what);
	cr_assert(!exists(out), "%s was written", out);
	poke(pid, addr, saved, len);
	cr_assert_eq(live(pid, (const char *[]){ "-o", out, "-q", NULL }, err, sizeof(err)), 0,
		     "after the bytes were put back: %s", err);
	cr_assert(exists(out));
	unlink(out);
}

Test(liveheap, corrupt_tables_are_refused)
{
	const struct jemalloc_layout *l = jemalloc_layout_by_name("5.3.0");
	const char *bin = fx("bin/je530-static");
	uint64_t g, t, bad = 0x10, wrong, big = 5000;
	uint32_t state = 9, lg = 50;
	uint64_t ckh;
	struct svc s;

	start(&s, bin, NULL, CONF_RAW, "0", 1000);
	cmd(&s, "pause", "paused");
	/* stopped while its memory holds garbage: jemalloc never sees it */
	stop_and_wait(s.pid);
	g = first_gctx(s.pid, bin, l);
	cr_assert_eq(hb_peek(s.pid, g + l->heap.gctx_tctxs, &t, 8), 0);
	cr_assert_neq(t, 0);
	wrong = g + 8;
	corrupt(s.pid, g + l->heap.gctx_tctxs, &bad, 8, "outside the process's memory");
	corrupt(s.pid, t + l->bpf.tctx_gctx_off, &wrong, 8, "does not point back");
	corrupt(s.pid, t + l->heap.tctx_state, &state, 4, "invalid state");
	corrupt(s.pid, t + l->heap.tctx_link + l->heap.rbn_left, &t, 8, "tctx tree");
	corrupt(s.pid, g + l->bpf.gctx_bt_off + l->bpf.bt_len_off, &big, 4, "frames");
	cr_assert_eq(hb_sym_addr(s.pid, bin, "bt2gctx", &ckh), 0);
	corrupt(s.pid, ckh + l->heap.ckh_lg_curbuckets, &lg, 4, "buckets");
	cont(s.pid);
	/* the target never noticed */
	cmd(&s, "resume", "resumed");
	quit(&s);
}

/* ---- under load ------------------------------------------------------------- */

/*
 * Four threads allocating without pause (sampling every 512 KiB). Twenty
 * reads in a row: each one completes or is refused with -EAGAIN (the table
 * kept changing) and nothing collected. Each completed read is bracketed by
 * a dump taken right before it and one right after; however long either gap
 * is on a busy machine:
 *   - accumulated objects and bytes only grow: the read's lie between the
 *     two dumps';
 *   - what is live can have grown only by what was sampled in between: the
 *     read's current objects and bytes are at most the first dump's plus what
 *     was sampled between them, and the second dump's at most the read's plus
 *     what was sampled after it.
 */
static void between_dumps(int k, const struct heapwalk_stats *st, const struct jedump *b,
			  const struct jedump *a)
{
	cr_assert_leq(b->total_accumobjs, st->accumobjs, "read %d: objects", k);
	cr_assert_leq(b->total_accumbytes, st->accumbytes, "read %d: bytes", k);
	cr_assert_leq(st->accumobjs, a->total_accumobjs, "read %d: objects", k);
	cr_assert_leq(st->accumbytes, a->total_accumbytes, "read %d: bytes", k);
	cr_assert_leq(st->curobjs, b->total_curobjs + (st->accumobjs - b->total_accumobjs),
		      "read %d", k);
	cr_assert_leq(st->curbytes, b->total_curbytes + (st->accumbytes - b->total_accumbytes),
		      "read %d", k);
	cr_assert_leq(a->total_curobjs, st->curobjs + (a->total_accumobjs - st->accumobjs),
		      "read %d", k);
	cr_assert_leq(a->total_curbytes, st->curbytes + (a->total_accumbytes - st->accumbytes),
		      "read %d", k);
	cr_assert_gt(st->curobjs, 0);
}

Test(liveheap_load, twenty_reads_while_allocating)
{
	char dump[PATH_MAX], c[PATH_MAX + 8], before[PATH_MAX], cb[PATH_MAX + 8], err[1024];
	const char *bin = hb_path("examples/alloc-service-static");
	int done = 0, refused = 0;
	struct svc s;

	snprintf(dump, sizeof(dump), "%s/jemalloc.heap", hb_tmpdir());
	snprintf(c, sizeof(c), "dump %s", dump);
	snprintf(before, sizeof(before), "%s/before.heap", hb_tmpdir());
	snprintf(cb, sizeof(cb), "dump %s", before);
	start(&s, bin, NULL, "prof:true,prof_active:true,prof_accum:true,prof_unbias:false", "0",
	      1000);
	for (int k = 0; k < 20; k++) {
		struct heapwalk_stats st;
		struct collector *col;
		struct jedump *b, *a;
		int rc;

		cmd(&s, cb, "dumped");
		rc = walk(s.pid, &col, &st, err, sizeof(err));
		if (rc) {
			cr_assert_eq(rc, -EAGAIN, "read %d: %d (%s)", k, rc, err);
			cr_assert_eq(collector__nstacks(col), 0);
			collector__free(col);
			refused++;
			continue;
		}
		cmd(&s, c, "dumped");
		cr_assert_eq(jedump_parse_file(before, &b), 0);
		cr_assert_eq(jedump_parse_file(dump, &a), 0);
		between_dumps(k, &st, b, a);
		jedump__free(b);
		jedump__free(a);
		collector__free(col);
		done++;
	}
	/* the command, five times: a profile, or one sentence and no file */
	for (int k = 0; k < 5; k++) {
		char out[PATH_MAX], msg[4096];
		int rc;

		snprintf(out, sizeof(out), "%s/load-%d.folded", hb_tmpdir(), k);
		rc = live(s.pid, (const char *[]){ "-f", "folded", "-o", out, "-q", NULL }, msg,
			  sizeof(msg));
		cr_assert(rc == 0 || rc == 1, "run %d exited with %d: %s", k, rc, msg);
		if (rc == 1) {
			one_sentence(msg, "kept changing");
			cr_assert(!exists(out));
		} else {
			cr_assert(exists(out));
		}
	}
	cr_log_info("under load: %d of 20 reads completed, %d refused as changing", done, refused);
	cr_assert_gt(done, 0, "no read completed in 20 (%d refused)", refused);
	quit(&s);
}
