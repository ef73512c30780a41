// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * userbench: heapbpf's user-space pieces on one core, without BPF.
 *
 *   userbench collector EVENTS STACKS THREADS
 *     Feeds EVENTS synthetic ring-buffer records to the collector, exactly as
 *     libbpf hands them over (collector__event). Record/replay does not exist
 *     yet, so the events imitate a real run: STACKS distinct backtraces of 8 to
 *     40 frames with Zipf-like popularity (a few hot sites, a long tail), one
 *     jemalloc tctx per (stack, thread) over THREADS threads, and three frees of
 *     sampled objects for every four sampled allocations, each free naming the
 *     tctx of a live sample as jemalloc 5.3.0's prof_free_sampled_object does.
 *
 *   userbench symbolize FRAMES [PID]
 *     Symbolizes FRAMES distinct return addresses spread evenly over the
 *     executable mappings of PID (default: itself), from a cold symbolizer.
 *
 *   userbench symbolize-object FRAMES PATH
 *     Loads the shared object PATH (dlopen) and symbolizes FRAMES distinct
 *     return addresses spread over its executable mappings only: once with a
 *     cold symbolizer, then with a second symbolizer in the same process, as a
 *     second profile of the same binary would (its DWARF and debug-info
 *     search are cached by build-id).
 *
 * Prints one line of JSON on stdout.
 */
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <linux/types.h>

#include "collect/collector.h"
#include "heapbpf.h"
#include "symbols/proc.h"
#include "symbols/symbolizer.h"

static int64_t now_ns(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static uint64_t rng = 0x2545f4914f6cdd1dULL;

static uint64_t rnd(void)
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 0x2545f4914f6cdd1dULL;
}

static long peak_rss_kib(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_maxrss;
}

struct live {
	uint64_t tctx, usize, ts;
};

static int bench_collector(long nevents, long nstacks, long nthreads)
{
	long nctx = nstacks * nthreads, nlive = 0, cap_live = 1 << 16, allocs = 0, frees = 0;
	struct heapbpf_alloc_event *ev;
	struct heapbpf_free_event fe = { .type = HEAPBPF_EV_FREE };
	struct collector *c;
	struct live *live;
	double *cdf, sum = 0;
	uint32_t *pick;
	const long npick = 1 << 16;
	int64_t t0, t1, c0, c1;
	uint64_t ts = 1000000000ULL;

	ev = calloc(nctx, sizeof(*ev));
	cdf = calloc(nstacks, sizeof(*cdf));
	pick = calloc(npick, sizeof(*pick));
	live = calloc(cap_live, sizeof(*live));
	if (!ev || !cdf || !pick || !live || collector__new(1 << 19, &c))
		return 1;
	/* Zipf-like (s = 1.1) popularity of stacks */
	for (long i = 0; i < nstacks; i++) {
		sum += 1.0 / pow((double)(i + 1), 1.1);
		cdf[i] = sum;
	}
	for (long i = 0; i < npick; i++) {
		double u = (double)(rnd() % 1000000) / 1e6 * sum;
		long lo = 0, hi = nstacks - 1;

		while (lo < hi) {
			long mid = (lo + hi) / 2;

			if (cdf[mid] < u)
				lo = mid + 1;
			else
				hi = mid;
		}
		pick[i] = (uint32_t)lo;
	}
	/* one record per (stack, thread): same frames, its own tctx and tid */
	for (long s = 0; s < nstacks; s++) {
		uint32_t depth = 8 + rnd() % 33;
		uint64_t frames[HEAPBPF_MAX_FRAMES];

		/* frames 0-3 in "jemalloc", the rest in "the program", shared roots */
		for (uint32_t f = 0; f < depth; f++)
			frames[f] = f < 4	     ? 0x7f0000001000ULL + f * 0x40
				    : f + 4 >= depth ? 0x400000ULL + (depth - f) * 0x10
						     : 0x500000ULL + (rnd() % 4096) * 0x20;
		for (long t = 0; t < nthreads; t++) {
			struct heapbpf_alloc_event *e = &ev[s * nthreads + t];

			e->type = HEAPBPF_EV_ALLOC;
			e->pid = 4242;
			e->tid = 4242 + t;
			e->nframes = depth;
			e->bt_len = depth;
			e->tctx = 0x7e0000000000ULL + (uint64_t)(s * nthreads + t) * 0x100;
			memcpy(e->frames, frames, depth * sizeof(frames[0]));
		}
	}
	collector__set_attach_time(c, 1);

	t0 = now_ns(CLOCK_MONOTONIC);
	c0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
	for (long i = 0; i < nevents; i++) {
		uint64_t r = rnd();
		int err;

		ts += 2000;
		if (nlive && (nlive >= cap_live || r % 7 < 3)) {
			/* free a random live sample: 3 frees per 4 allocations on average */
			long k = (long)((r >> 16) % nlive);

			fe.tid = 4242;
			fe.ts = ts;
			fe.tctx = live[k].tctx;
			fe.usize = live[k].usize;
			fe.alloc_size = live[k].usize;
			fe.alloc_time_ns = live[k].ts;
			live[k] = live[--nlive];
			err = collector__event(c, &fe, sizeof(fe));
			frees++;
		} else {
			long s = pick[(r >> 16) & (npick - 1)];
			struct heapbpf_alloc_event *e =
				&ev[s * nthreads + (long)((r >> 40) % nthreads)];

			e->ts = ts;
			e->usize = 64 + ((r >> 24) & 0xffff);
			e->size = e->usize;
			if (nlive < cap_live)
				live[nlive++] = (struct live){ e->tctx, e->usize, ts };
			/* libbpf hands over the record's true length, frames included */
			err = collector__event(c, e, sizeof(*e));
			allocs++;
		}
		if (err) {
			fprintf(stderr, "userbench: collector__event: %s\n", strerror(-err));
			return 1;
		}
	}
	t1 = now_ns(CLOCK_MONOTONIC);
	c1 = now_ns(CLOCK_THREAD_CPUTIME_ID);
	printf("{\"events\": %ld, \"allocs\": %ld, \"frees\": %ld, \"stacks\": %zu, "
	       "\"frees_matched\": %" PRIu64 ", \"wall_ns\": %" PRId64 ", \"cpu_ns\": %" PRId64
	       ", \"events_per_s\": %.0f, \"peak_rss_kib\": %ld}\n",
	       nevents, allocs, frees, collector__nstacks(c), collector__stats(c)->frees_matched,
	       t1 - t0, c1 - c0, nevents / ((c1 - c0) / 1e9), peak_rss_kib());
	collector__free(c);
	free(ev);
	free(cdf);
	free(pick);
	free(live);
	return 0;
}

/* Symbolizes addrs with a new symbolizer for pid; returns wall ns, counts named frames. */
static int64_t symbolize_once(pid_t pid, const uint64_t *addrs, long k, long *named,
			      size_t *objects)
{
	struct symbolizer *s;
	int64_t t0 = now_ns(CLOCK_MONOTONIC);

	*named = 0;
	if (symbolizer__new(pid, &s))
		return -1;
	for (long i = 0; i < k; i++) {
		struct sym_result r;

		if (!symbolizer__lookup(s, addrs[i], true, &r) && r.nlines && r.lines[0].function)
			(*named)++;
	}
	*objects = symbolizer__nobjects(s);
	symbolizer__free(s);
	return now_ns(CLOCK_MONOTONIC) - t0;
}

static int bench_symbolize_object(long nframes, const char *path)
{
	char real[4096];
	struct proc_maps *m;
	uint64_t total = 0, *addrs;
	long k = 0, named_cold = 0, named_warm = 0;
	size_t objects = 0;
	int64_t cold, warm;
	struct stat st;

	if (!realpath(path, real) || stat(real, &st) || !dlopen(real, RTLD_LAZY | RTLD_LOCAL)) {
		fprintf(stderr, "userbench: cannot load %s\n", path);
		return 1;
	}
	if (proc_maps__read(getpid(), &m))
		return 1;
	for (size_t i = 0; i < m->n; i++) {
		if (m->v[i].path && !strcmp(m->v[i].path, real) && m->v[i].perms[2] == 'x')
			total += m->v[i].end - m->v[i].start;
	}
	addrs = calloc(nframes, sizeof(*addrs));
	if (!addrs || !total)
		return 1;
	for (size_t i = 0; i < m->n && k < nframes; i++) {
		const struct proc_map *p = &m->v[i];
		uint64_t step = total / (uint64_t)nframes;

		if (!p->path || strcmp(p->path, real) || p->perms[2] != 'x')
			continue;
		for (uint64_t a = p->start + 1; a < p->end && k < nframes; a += step ? step : 1)
			addrs[k++] = a;
	}
	cold = symbolize_once(getpid(), addrs, k, &named_cold, &objects);
	warm = symbolize_once(getpid(), addrs, k, &named_warm, &objects);
	if (cold < 0 || warm < 0)
		return 1;
	printf("{\"frames\": %ld, \"named\": %ld, \"object_bytes\": %lld, \"text_bytes\": %" PRIu64
	       ", \"cold_ns\": %" PRId64 ", \"warm_ns\": %" PRId64 ", \"peak_rss_kib\": %ld}\n",
	       k, named_cold, (long long)st.st_size, total, cold, warm, peak_rss_kib());
	proc_maps__free(m);
	free(addrs);
	return 0;
}

static int bench_symbolize(long nframes, pid_t pid)
{
	struct proc_maps *m;
	struct symbolizer *s;
	uint64_t total = 0, *addrs;
	long named = 0, k = 0;
	int64_t t0, t1;
	int err;

	err = proc_maps__read(pid, &m);
	if (err)
		return 1;
	for (size_t i = 0; i < m->n; i++) {
		if (m->v[i].path && m->v[i].path[0] == '/' && m->v[i].perms[2] == 'x')
			total += m->v[i].end - m->v[i].start;
	}
	addrs = calloc(nframes, sizeof(*addrs));
	if (!addrs || !total)
		return 1;
	/* evenly spaced through all executable file mappings: distinct addresses */
	for (size_t i = 0; i < m->n && k < nframes; i++) {
		const struct proc_map *p = &m->v[i];
		uint64_t step = total / (uint64_t)nframes;

		if (!p->path || p->path[0] != '/' || p->perms[2] != 'x')
			continue;
		for (uint64_t a = p->start + 1; a < p->end && k < nframes; a += step ? step : 1)
			addrs[k++] = a;
	}
	t0 = now_ns(CLOCK_MONOTONIC);
	err = symbolizer__new(pid, &s);
	if (err) {
		fprintf(stderr, "userbench: symbolizer__new: %s\n", strerror(-err));
		return 1;
	}
	for (long i = 0; i < k; i++) {
		struct sym_result r;

		if (!symbolizer__lookup(s, addrs[i], true, &r) && r.nlines && r.lines[0].function)
			named++;
	}
	t1 = now_ns(CLOCK_MONOTONIC);
	printf("{\"frames\": %ld, \"named\": %ld, \"objects\": %zu, \"wall_ns\": %" PRId64
	       ", \"peak_rss_kib\": %ld}\n",
	       k, named, symbolizer__nobjects(s), t1 - t0, peak_rss_kib());
	symbolizer__free(s);
	proc_maps__free(m);
	free(addrs);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 5 && !strcmp(argv[1], "collector"))
		return bench_collector(atol(argv[2]), atol(argv[3]) > 0 ? atol(argv[3]) : 1,
				       atol(argv[4]) > 0 ? atol(argv[4]) : 1);
	if (argc >= 3 && !strcmp(argv[1], "symbolize"))
		return bench_symbolize(atol(argv[2]) > 0 ? atol(argv[2]) : 1,
				       argc > 3 ? atoi(argv[3]) : getpid());
	if (argc >= 4 && !strcmp(argv[1], "symbolize-object"))
		return bench_symbolize_object(atol(argv[2]) > 0 ? atol(argv[2]) : 1, argv[3]);
	fprintf(stderr, "usage: userbench collector EVENTS STACKS THREADS\n"
			"       userbench symbolize FRAMES [PID]\n"
			"       userbench symbolize-object FRAMES PATH\n");
	return 2;
}
