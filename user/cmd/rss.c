// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/errmsg.h"
#include "profile/summary.h"
#include "jemalloc/target.h"
#include "collect/collector.h"
#include "heap/heapwalk.h"
#include "heap/held.h"
#include "heap/rssmap.h"
#include "run/rssout.h"
#include "profile/report.h"
#include "export/sink.h"
#include "symbols/symbolizer.h"
#include "util/clock.h"
#include "targets/targets.h"
#include "cli/checks.h"
#include "cli/cli.h"
#include "run/run.h"
#include "cmd/rss.h"
#include "cli/cli.h"

/* heapbpf rss --help */
const char rss_help[] =
	"Usage: heapbpf rss (--pid PID | --unit NAME | --pidfile PATH) [--format text|json]\n"
	"\n"
	"Where a jemalloc process's resident memory (RSS) is: jemalloc's own accounting,\n"
	"read from its memory, and every extent and metadata block jemalloc holds checked\n"
	"page by page against the kernel's page tables; the memory outside jemalloc by\n"
	"mapping (thread stacks, other anonymous memory, files, shmem). The parts add up\n"
	"to the RSS, with what does not as \"unexplained\". Nothing is sampled and the\n"
	"process is not stopped; it needs jemalloc's symbol table (its debug symbols).\n"
	"\n"
	"  -p, --pid PID          the process\n"
	"      --unit NAME        each jemalloc process of a systemd unit\n"
	"      --pidfile PATH     the process whose pid the file holds\n"
	"  -f, --format FORMAT    text (default): the table, the size classes with the\n"
	"                         most free bytes, the stacks holding the most (when the\n"
	"                         process samples) and what to do; json: one object per\n"
	"                         process, every figure in bytes\n"
	"  -o, --output FILE      also a pprof profile of the stacks (gzip), inuse_space\n"
	"                         and held_space: the process must sample (prof_active)\n"
	"  -q, --quiet            only errors on stderr\n"
	"\n"
	"Examples:\n"
	"  sudo heapbpf rss --pid $(pidof redis-server)\n"
	"  sudo heapbpf rss --unit redis-server --format json | jq .jemalloc\n"
	"  sudo heapbpf rss --pid 4242 -o held.pb.gz\n"
	"  go tool pprof -sample_index=held_space held.pb.gz\n"
	"\n" HB_EXIT_STATUS_HELP;

/* The size classes listed in the text, by free bytes in their slabs. */
#define TOP_BINS 8
/* The stacks listed in the text, by held bytes. */
#define TOP_STACKS 10

/* The sampled live heap's stacks, and what each holds (held.h). */
struct rss_stacks {
	struct hb_profile *p; /* NULL: none (why says so) */
	double *held;	      /* per sample of p */
	size_t *order;	      /* p's samples by held, most first */
	char why[512];
};

static void stacks_free(struct rss_stacks *s)
{
	hb_profile__free(s->p);
	free(s->held);
	free(s->order);
}

/* The live heap's stacks, symbolized, as --live-heap reads them; none (said in why) is no error. */
static int collect_stacks(const struct jemalloc_target *t, struct collector *c, char *why,
			  size_t len)
{
	struct heapwalk_stats st = { 0 };
	int rc = heapwalk_live(t, c, &st, why, len);

	if (!rc && !st.stacks)
		rc = hb_fail(why, len, -ENODATA,
			     "jemalloc holds no sampled object: per-stack figures need the "
			     "process to sample (prof_active, or heapbpf watch or agent on it)");
	return rc;
}

static int read_stacks(const struct jemalloc_target *t, const struct cli *o,
		       const struct rss_map *m, struct rss_stacks *out)
{
	struct report_opts ro = {
		.time_nanos = hb_clock_ns(CLOCK_REALTIME),
		.pid = t->pid,
		.wrappers = o->run.wrappers,
		.nwrappers = o->run.nwrappers,
	};
	struct collector *c = NULL;
	struct symbolizer *sym = NULL;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = collector__new(1ull << t->lg_prof_sample, &c);
	if (rc)
		return hb_fail(out->why, sizeof(out->why), rc, "out of memory");
	rc = collect_stacks(t, c, out->why, sizeof(out->why));
	if (!rc) {
		rc = symbolizer__new(t->pid, &sym);
		rc = rc ?: report__build(c, sym, t, &ro, &out->p);
		if (rc)
			hb_fail(out->why, sizeof(out->why), rc, "cannot symbolize the stacks: %s",
				strerror(-rc));
	}
	symbolizer__free(sym);
	collector__free(c);
	if (rc)
		return rc;
	out->held = calloc(out->p->nsamples + 1, sizeof(*out->held));
	out->order = calloc(out->p->nsamples + 1, sizeof(*out->order));
	if (!out->held || !out->order) {
		stacks_free(out);
		memset(out, 0, sizeof(*out));
		return hb_fail(out->why, sizeof(out->why), -ENOMEM, "out of memory");
	}
	held_estimate(out->p, &m->je, out->held);
	held_order(out->held, out->p->nsamples, out->order);
	return 0;
}

static const char *bytes(char *buf, size_t len, uint64_t v)
{
	summary_bytes(buf, len, (double)v);
	return buf;
}

static void line(const char *what, uint64_t resident, const char *of)
{
	char b[32];

	printf("  %-42s %11s%s%s\n", what, bytes(b, sizeof(b), resident), *of ? "  " : "", of);
}

static void jemalloc_lines(const struct rss_map *m)
{
	const struct jestats *je = &m->je;
	char of[256], b1[32], b2[32];

	snprintf(of, sizeof(of), "of %s in %" PRIu64 " slabs, %s of it free regions",
		 bytes(b1, sizeof(b1), je->slab_bytes), je->slabs,
		 bytes(b2, sizeof(b2), je->slab_free));
	line("jemalloc: small objects' slabs", m->resident[JE_SLAB], of);
	snprintf(of, sizeof(of), "of %s in %" PRIu64 " objects (sampled small ones included)",
		 bytes(b1, sizeof(b1), je->large_bytes), je->nlarge);
	line("jemalloc: large objects", m->resident[JE_LARGE] + m->resident[JE_PROMOTED], of);
	snprintf(of, sizeof(of), "of %s", bytes(b1, sizeof(b1), je->dirty));
	line("jemalloc: dirty pages (free, not purged)", m->resident[JE_DIRTY], of);
	snprintf(of, sizeof(of), "of %s", bytes(b1, sizeof(b1), je->muzzy));
	line("jemalloc: muzzy pages (free, lazily)", m->resident[JE_MUZZY], of);
	snprintf(of, sizeof(of), "of %s (address space kept for reuse)",
		 bytes(b1, sizeof(b1), je->retained));
	line("jemalloc: retained", m->resident[JE_RETAINED], of);
	snprintf(of, sizeof(of), "of %s mapped, %s in use", bytes(b1, sizeof(b1), je->base_mapped),
		 bytes(b2, sizeof(b2), je->base_allocated));
	line("jemalloc: its metadata", m->resident[JE_BASE], of);
	if (m->resident[JE_OTHER])
		line("jemalloc: extents moving as read", m->resident[JE_OTHER], "");
}

static void outside_lines(const struct rss_map *m)
{
	char of[512], b[32], name[128];
	size_t at = 0;

	line("main thread's stack", m->main_stack, "");
	snprintf(of, sizeof(of), "%u threads blocked now", m->nthread_stacks);
	line("thread stacks", m->thread_stacks, m->nthread_stacks ? of : "");
	of[0] = '\0';
	for (int i = 0; i < RSS_OTHERS && m->others[i].bytes && at < sizeof(of) - 1; i++) {
		hb_clean(name, sizeof(name),
			 m->others[i].name[0] ? m->others[i].name : "anonymous");
		at += (size_t)snprintf(
			of + at, sizeof(of) - at, "%s%s at 0x%" PRIx64 " (%s)",
			i ? ", " : "largest: ", bytes(b, sizeof(b), m->others[i].bytes),
			m->others[i].start, name);
	}
	line("other anonymous memory", m->other_anon, of);
	line("files (binaries, libraries, mapped files)", m->mem.file, "");
	line("shmem", m->mem.shmem, "");
}

static int by_free(const void *a, const void *b)
{
	uint64_t x = jestats_bin_free(*(const struct jestats_bin *const *)a);
	uint64_t y = jestats_bin_free(*(const struct jestats_bin *const *)b);

	return (x < y) - (x > y);
}

static void bins_text(const struct rss_map *m)
{
	const struct jestats_bin *top[JESTATS_MAX_BINS] = { 0 };
	unsigned n = m->je.nbins;

	for (unsigned i = 0; i < n; i++)
		top[i] = &m->je.bins[i];
	qsort(top, n, sizeof(top[0]), by_free);
	if (!n || !jestats_bin_free(top[0]))
		return;
	printf("\nsmall size classes with the most free bytes in their slabs:\n");
	printf("  %8s %10s %10s %8s %8s %11s\n", "size", "regions", "in use", "slabs", "used",
	       "free");
	for (unsigned i = 0; i < n && i < TOP_BINS && jestats_bin_free(top[i]); i++) {
		uint64_t regs = top[i]->curslabs * top[i]->nregs;
		char b[32];

		printf("  %8" PRIu64 " %10" PRIu64 " %10" PRIu64 " %8" PRIu64 " %7.1f%% %11s\n",
		       top[i]->size, regs, top[i]->curregs, top[i]->curslabs,
		       regs ? 100.0 * (double)top[i]->curregs / (double)regs : 0.0,
		       bytes(b, sizeof(b), jestats_bin_free(top[i])));
	}
}

static void stacks_text(const struct rss_stacks *st)
{
	char b[2][32], name[HB_CLEAN_SIZE(128)];

	if (!st->p) {
		printf("\nper-stack figures: %s.\n", st->why);
		return;
	}
	printf("\nstacks holding the most: in use (the sampled live heap, estimated) and held, with "
	       "their share of the free regions in their size class's slabs (an estimate from "
	       "each stack's mean object size):\n");
	printf("  %11s %11s  %s\n", "held", "in use", "site <- callers");
	for (size_t i = 0; i < st->p->nsamples && i < TOP_STACKS; i++) {
		const struct hb_sample *smp = &st->p->samples[st->order[i]];

		printf("  %11s %11s  ", bytes(b[0], 32, (uint64_t)st->held[st->order[i]]),
		       bytes(b[1], 32,
			     (uint64_t)(smp->v[HB_INUSE_SPACE] > 0 ? smp->v[HB_INUSE_SPACE] : 0)));
		for (uint32_t k = smp->site; k < smp->nlocs && k < smp->site + 3; k++)
			printf("%s%s", k > smp->site ? " <- " : "",
			       hb_clean(name, sizeof(name), rssout_frame(st->p, smp, k)));
		printf("\n");
	}
}

/* One sentence for each part over a tenth of the RSS that a setting addresses. */
static void advice(const struct rss_map *m)
{
	uint64_t tenth = m->mem.rss / 10, free_bytes = m->je.slab_free;
	char b[32];
	bool any = false;

	if (m->resident[JE_DIRTY] > tenth) {
		printf("%s  - dirty pages hold %s: jemalloc returns them only after "
		       "dirty_decay_ms (default 10000) and only when it runs; an idle process "
		       "keeps them. background_thread:true purges them in the background, a "
		       "smaller dirty_decay_ms sooner (MALLOC_CONF).\n",
		       any ? "" : "\nwhat to do:\n", bytes(b, sizeof(b), m->resident[JE_DIRTY]));
		any = true;
	}
	if (free_bytes > tenth) {
		printf("%s  - free regions in partly used slabs hold %s (fragmentation): "
		       "objects of different lifetimes share slabs. Fewer arenas (narenas) "
		       "pack them tighter; a smaller tcache (tcache_max, or tcache:false) keeps "
		       "fewer regions cached per thread.\n",
		       any ? "" : "\nwhat to do:\n", bytes(b, sizeof(b), free_bytes));
		any = true;
	}
	if (m->resident[JE_MUZZY] > tenth) {
		printf("%s  - muzzy pages hold %s: the kernel takes them back only under "
		       "memory pressure (MADV_FREE); muzzy_decay_ms:0 purges them at once.\n",
		       any ? "" : "\nwhat to do:\n", bytes(b, sizeof(b), m->resident[JE_MUZZY]));
		any = true;
	}
	if (m->other_anon > tenth) {
		printf("%s  - %s of anonymous memory is outside jemalloc: another allocator "
		       "(glibc's malloc through a library that does not use jemalloc) or the "
		       "program's own mmap.\n",
		       any ? "" : "\nwhat to do:\n", bytes(b, sizeof(b), m->other_anon));
	}
}

static void print_text(const struct jemalloc_target *t, const struct rss_map *m,
		       const struct rss_stacks *st)
{
	char b[5][32], comm[64], why[160] = "";
	uint64_t swapped = 0;

	for (int k = 0; k < JE_KINDS; k++)
		swapped += m->swapped[k];
	hb_clean(comm, sizeof(comm), t->comm);
	printf("pid %d (%s), jemalloc %.*s: RSS %s (anonymous %s, files %s, shmem %s), swap %s\n",
	       t->pid, comm, (int)strcspn(t->version, "-"), t->version, bytes(b[0], 32, m->mem.rss),
	       bytes(b[1], 32, m->mem.anon), bytes(b[2], 32, m->mem.file),
	       bytes(b[3], 32, m->mem.shmem), bytes(b[4], 32, m->mem.swap));
	if (m->walk.skipped)
		snprintf(why, sizeof(why),
			 "; %" PRIu64 " extents changed as they were read and "
			 "were left out",
			 m->walk.skipped);
	printf("read in %.1f ms while the process ran%s\n\n", m->walk_ms, why);
	printf("  %-42s %11s\n", "where the RSS is", "resident");
	jemalloc_lines(m);
	outside_lines(m);
	if (m->unexplained >= 0) {
		line("unexplained", (uint64_t)m->unexplained, "");
	} else {
		char b2[32], neg[64];

		snprintf(neg, sizeof(neg), "-%s", bytes(b2, sizeof(b2), (uint64_t)-m->unexplained));
		printf("  %-42s %11s  %s\n", "unexplained", neg,
		       "(the parts came to more: the process ran as it was read)");
	}
	line("RSS", m->mem.rss, "");
	printf("\njemalloc's own figures: allocated %s, active %s, metadata %s, mapped %s, "
	       "retained %s.\n",
	       bytes(b[0], 32, m->je.allocated), bytes(b[1], 32, m->je.active),
	       bytes(b[2], 32, m->je.metadata), bytes(b[3], 32, m->je.mapped),
	       bytes(b[4], 32, m->je.retained));
	printf("Its stats.resident, %s, counts every active and dirty page as resident; "
	       "measured, %s of what jemalloc holds is.\n",
	       bytes(b[0], 32, m->je.resident), bytes(b[1], 32, m->je_resident));
	if (swapped)
		printf("%s of jemalloc's pages are swapped out.\n", bytes(b[0], 32, swapped));
	bins_text(m);
	stacks_text(st);
	advice(m);
}

/* -o: the stacks with their held bytes, as pprof (its fifth sample type, held_space). */
static int write_held(const struct rss_stacks *st, const struct cli *o, char *err, size_t errlen)
{
	struct sink s = { .kind = SINK_FILE, .format = FMT_PPROF, .path = o->run.output };
	char name[HB_CLEAN_SIZE(256)];
	int rc;

	if (!st->p)
		return hb_fail(err, errlen, -ENODATA, "no profile written to %s: %s",
			       hb_clean(name, sizeof(name), o->run.output), st->why);
	st->p->held = calloc(st->p->nsamples + 1, sizeof(*st->p->held));
	if (!st->p->held)
		return hb_fail(err, errlen, -ENOMEM, "out of memory");
	for (size_t i = 0; i < st->p->nsamples; i++)
		st->p->held[i] = (int64_t)st->held[i];
	rc = hb_profile_add_comment(st->p,
				    "heapbpf rss: held_space is in use plus the stack's share of "
				    "the free regions in its size class's slabs, by its mean "
				    "object size: an estimate");
	rc = rc ?: sink_write(st->p, &s, err, errlen);
	if (!rc)
		hb_note("wrote %s", hb_clean(name, sizeof(name), o->run.output));
	return rc;
}

static int one(pid_t pid, const struct cli *o, char *err, size_t errlen)
{
	struct jemalloc_target *t = NULL;
	struct rss_map *m = calloc(1, sizeof(*m));
	struct rss_stacks st = { 0 };
	int rc;

	if (!m)
		return hb_fail(err, errlen, -ENOMEM, "out of memory");
	rc = jemalloc_target__find(pid, o->run.layout, &t, err, errlen);
	rc = rc ?: rssmap_read(t, m, err, errlen);
	if (!rc) {
		struct rssout_stacks js;

		/* none, with why, is no failure: the table stands without them */
		read_stacks(t, o, m, &st);
		js = (struct rssout_stacks){ st.p, st.held, st.order, st.why };
		if (o->rss_json && rssout_json(stdout, t, m, &js, -1))
			rc = hb_fail(err, errlen, -EIO, "cannot write to standard output");
		else if (!o->rss_json)
			print_text(t, m, &st);
		fflush(stdout);
		if (!rc && o->run.output)
			rc = write_held(&st, o, err, errlen);
	}
	stacks_free(&st);
	jemalloc_target__free(t);
	free(m);
	return rc;
}

/*
 * heapbpf rss --pid N: one read of where the process's RSS is; nothing
 * sampled, nothing written but to stdout.
 */
int rss_parse(struct cli *c, const struct cli_given *g, int n, char **operands)
{
	if (n)
		return checks_no_operand(n, operands);
	if (g->duration || c->run.output_dir || c->run.record || c->run.pyroscope || c->run.reset ||
	    c->run.interval || c->run.live_heap || c->run.follow_forks || c->run.children ||
	    c->run.leaks || c->run.at_peak || g->type)
		return cli_bad(
			"heapbpf rss reads the process once and prints to stdout: it takes "
			"--pid, --unit or --pidfile, --format text|json, -o FILE.pb.gz and -q");
	if (c->run.npids > 1)
		return cli_bad("heapbpf rss reads one process: give one --pid");
	if (c->run.output && (strcmp(c->run.output, "-") == 0 || c->run.unit))
		return cli_bad(
			"heapbpf rss writes its profile (-o) for one process into a file: give a "
			"file name, and --pid or --pidfile");
	return checks_target(c, g);
}

int rss_command(const struct cli *o, struct run *r, char *err, size_t errlen)
{
	(void)r;
	pid_t pids[TARGETS_MAX];
	int n = 1, rc = 0, done = 0;

	if (o->run.pidfile) {
		rc = targets_from_pidfile(o->run.pidfile, &pids[0], err, errlen);
	} else if (o->run.unit) {
		n = targets_from_unit(o->run.unit, NULL, pids, TARGETS_MAX, err, errlen);
		rc = n < 0 ? n : 0;
	} else {
		pids[0] = o->run.pids[0];
	}
	for (int i = 0; !rc && i < n; i++) {
		char why[1024];
		int one_rc = one(pids[i], o, o->run.unit ? why : err,
				 o->run.unit ? sizeof(why) : errlen);

		/* a unit's helper without jemalloc (a wrapper shell) is passed over, said */
		if (one_rc == JEMALLOC_ENOTFOUND && o->run.unit)
			hb_say("pid %d of unit %s has no jemalloc; passed over", pids[i],
			       o->run.unit);
		else if (one_rc && o->run.unit)
			rc = hb_fail(err, errlen, one_rc, "%s", why);
		else
			rc = one_rc;
		done += !one_rc;
	}
	if (!rc && !done)
		rc = hb_fail(err, errlen, JEMALLOC_ENOTFOUND, "no process of unit %s has jemalloc",
			     o->run.unit);
	return rc;
}
