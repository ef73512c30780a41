// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * microbench: an allocation-heavy program for measuring what sampling costs,
 * linked statically with Debian's jemalloc (run it with
 * MALLOC_CONF=prof:true,prof_active:false,lg_prof_sample:N).
 *
 * Each thread allocates --bytes bytes in objects of random size between
 * --size-min and --size-max, each through --depth nested calls. Before the
 * measured window every thread allocates and frees the same sequence once
 * (sampling off) so that the window reuses pages instead of faulting them in.
 *
 *   --mode none   measure at once (jemalloc's sampling as MALLOC_CONF says)
 *   --mode je     switch prof.active on with mallctl, then measure: jemalloc
 *                 samples by itself, nobody watches
 *   --mode wait   wait until someone else (heapbpf) switches prof_active on,
 *                 then measure
 *
 * --retain (default) keeps every object of the window until exit, so the
 * window has no free of a sampled object: it measures the allocation path
 * alone. --churn frees each object at once (a free path with its own cost).
 * --seconds runs the window for a time instead of a byte count (churn only).
 * --unique-stacks N allocates once through each of N different call paths
 * (binary choice of call site on 17 levels), for a profile with N stacks.
 *
 * --control runs one window per line on stdin ("none", "je" or "wait"),
 * freeing the previous window's objects first, so that conditions can be
 * compared in one process; "quit" or EOF ends it.
 *
 * Prints one line of JSON per window on stdout, then exits without freeing.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jemalloc/jemalloc.h>

#if defined(__clang__)
#define NOINL __attribute__((noinline))
#else
#define NOINL __attribute__((noinline, noclone))
#endif

#define CHURN_SLOTS 4096
#define PATH_LEVELS 17

enum mode { MODE_NONE, MODE_JE, MODE_WAIT };

static struct {
	unsigned int threads;
	uint64_t bytes; /* per thread */
	size_t size_min, size_max;
	unsigned int depth;
	enum mode mode;
	bool churn;
	double seconds;
	uint64_t unique;
	uint64_t seed;
	bool control;
} o = {
	.threads = 1,
	.bytes = 64ULL << 20,
	.size_min = 64,
	.size_max = 1024,
	.depth = 8,
	.mode = MODE_NONE,
	.seed = 1,
};

struct worker {
	pthread_t thread;
	unsigned int idx;
	uint64_t rng;
	void **keep; /* --retain: the window's objects */
	size_t nkeep, capkeep;
	void *slots[CHURN_SLOTS];
	uint64_t allocs, bytes;
	char pad[64];
};

static struct worker *workers;
static pthread_barrier_t warm_done, go, done;
static volatile int stop_flag, quitting;

static int64_t now_ns(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static uint64_t rnd(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545f4914f6cdd1dULL;
}

static void die(const char *what)
{
	fprintf(stderr, "microbench: %s\n", what);
	exit(1);
}

/* The leaf: the function that calls the allocator. */
NOINL static void *leaf_alloc(size_t size)
{
	void *p = malloc(size);

	if (!p)
		die("out of memory");
	*(volatile char *)p = 1;
	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}

/* depth nested frames, then malloc; not a tail call so each frame stays. */
NOINL static void *nest(unsigned int depth, size_t size)
{
	void *p;

	if (!depth)
		return leaf_alloc(size);
	p = nest(depth - 1, size);
	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}

/* One of 2^PATH_LEVELS call paths: a different return address per bit value. */
NOINL static void *path_step(unsigned int level, uint32_t path, size_t size);

NOINL static void *path_zero(unsigned int level, uint32_t path, size_t size)
{
	void *p = path_step(level, path, size);

	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}

NOINL static void *path_one(unsigned int level, uint32_t path, size_t size)
{
	void *p = path_step(level, path, size);

	__asm__ volatile("nop" : : "r"(p) : "memory");
	return p;
}

NOINL static void *path_step(unsigned int level, uint32_t path, size_t size)
{
	void *p;

	if (!level)
		return leaf_alloc(size);
	if (path & 1)
		p = path_one(level - 1, path >> 1, size);
	else
		p = path_zero(level - 1, path >> 1, size);
	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}

static size_t pick_size(struct worker *w)
{
	return o.size_min + rnd(&w->rng) % (o.size_max - o.size_min + 1);
}

static void keep(struct worker *w, void *p)
{
	if (w->nkeep == w->capkeep) {
		size_t cap = w->capkeep ? w->capkeep * 2 : 4096;
		void **k = realloc(w->keep, cap * sizeof(*k));

		if (!k)
			die("out of memory");
		w->keep = k;
		w->capkeep = cap;
	}
	w->keep[w->nkeep++] = p;
}

static void release(struct worker *w);

/* One pass of allocations; the warm-up frees what it kept, the window does not. */
static void pass(struct worker *w, bool warm)
{
	uint64_t done = 0, n = 0, seed = w->rng;

	w->nkeep = 0;
	if (o.unique) {
		/* paths idx, idx+threads, ...: every path once over all threads */
		for (uint64_t i = w->idx; i < o.unique; i += o.threads) {
			size_t size = o.size_min;
			void *p = path_step(PATH_LEVELS, (uint32_t)i, size);

			free(p);
			n++;
			done += size;
		}
	} else {
		for (;;) {
			size_t size = pick_size(w);
			void *p = nest(o.depth, size);

			n++;
			done += size;
			if (o.churn) {
				unsigned int slot = n % CHURN_SLOTS;

				free(w->slots[slot]);
				w->slots[slot] = p;
			} else {
				keep(w, p);
			}
			if (o.seconds > 0) {
				if ((n & 255) == 0 && stop_flag)
					break;
			} else if (done >= o.bytes) {
				break;
			}
		}
	}
	if (warm) {
		release(w);
		w->rng = seed; /* the window allocates the same sequence again */
	} else {
		w->allocs = n;
		w->bytes = done;
	}
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	uint64_t seed = w->rng;

	if (!o.unique && o.seconds <= 0)
		pass(w, true);
	pthread_barrier_wait(&warm_done);
	for (;;) {
		pthread_barrier_wait(&go);
		if (quitting)
			break;
		w->rng = seed; /* every window allocates the same sequence */
		pass(w, false);
		pthread_barrier_wait(&done);
	}
	return NULL;
}

/* Frees what the last window kept (outside the window, sampling off or not watched). */
static void release(struct worker *w)
{
	for (size_t i = 0; i < w->nkeep; i++)
		free(w->keep[i]);
	w->nkeep = 0;
	for (unsigned int i = 0; i < CHURN_SLOTS; i++) {
		free(w->slots[i]);
		w->slots[i] = NULL;
	}
}

static bool prof_active(void)
{
	bool v = false;
	size_t len = sizeof(v);

	if (mallctl("prof.active", &v, &len, NULL, 0))
		die("mallctl prof.active failed: start with MALLOC_CONF=prof:true,...");
	return v;
}

static int parse_args(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "threads", required_argument, NULL, 't' },
		{ "bytes", required_argument, NULL, 'b' },
		{ "size-min", required_argument, NULL, 'm' },
		{ "size-max", required_argument, NULL, 'M' },
		{ "depth", required_argument, NULL, 'D' },
		{ "mode", required_argument, NULL, 'o' },
		{ "retain", no_argument, NULL, 'r' },
		{ "churn", no_argument, NULL, 'c' },
		{ "seconds", required_argument, NULL, 's' },
		{ "unique-stacks", required_argument, NULL, 'u' },
		{ "seed", required_argument, NULL, 'S' },
		{ "control", no_argument, NULL, 'C' },
		{},
	};
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 't':
			o.threads = strtoul(optarg, NULL, 0);
			break;
		case 'b':
			o.bytes = strtoull(optarg, NULL, 0);
			break;
		case 'm':
			o.size_min = strtoull(optarg, NULL, 0);
			break;
		case 'M':
			o.size_max = strtoull(optarg, NULL, 0);
			break;
		case 'D':
			o.depth = strtoul(optarg, NULL, 0);
			break;
		case 'o':
			if (!strcmp(optarg, "none"))
				o.mode = MODE_NONE;
			else if (!strcmp(optarg, "je"))
				o.mode = MODE_JE;
			else if (!strcmp(optarg, "wait"))
				o.mode = MODE_WAIT;
			else
				return -1;
			break;
		case 'r':
			o.churn = false;
			break;
		case 'c':
			o.churn = true;
			break;
		case 's':
			o.seconds = strtod(optarg, NULL);
			o.churn = true;
			break;
		case 'u':
			o.unique = strtoull(optarg, NULL, 0);
			if (o.unique > (1ULL << PATH_LEVELS))
				return -1;
			break;
		case 'S':
			o.seed = strtoull(optarg, NULL, 0);
			break;
		case 'C':
			o.control = true;
			break;
		default:
			return -1;
		}
	}
	if (!o.threads || o.threads > 64 || o.size_min < 1 || o.size_max < o.size_min ||
	    o.depth > 200 || optind < argc)
		return -1;
	return 0;
}

static void set_active(bool on)
{
	if (mallctl("prof.active", NULL, NULL, &on, sizeof(on)))
		die("mallctl prof.active failed: start with MALLOC_CONF=prof:true,...");
}

/* One measured window in mode m; prints its result as one JSON line. */
static void window(enum mode m)
{
	int64_t t0, t1, c0, c1, active_ns = 0;
	uint64_t allocs = 0, bytes = 0;

	if (m == MODE_JE) {
		set_active(true);
	} else if (m == MODE_WAIT) {
		int64_t deadline = now_ns(CLOCK_MONOTONIC) + 60LL * 1000000000LL;

		printf("{\"waiting\": %d}\n", (int)getpid());
		fflush(stdout);
		while (!prof_active()) {
			struct timespec ts = { 0, 200000 };

			if (now_ns(CLOCK_MONOTONIC) > deadline)
				die("nobody switched prof_active on within 60 s");
			nanosleep(&ts, NULL);
		}
		active_ns = now_ns(CLOCK_MONOTONIC);
	}

	stop_flag = 0;
	t0 = now_ns(CLOCK_MONOTONIC);
	c0 = now_ns(CLOCK_PROCESS_CPUTIME_ID);
	pthread_barrier_wait(&go);
	if (o.seconds > 0) {
		struct timespec ts = { (time_t)o.seconds,
				       (long)((o.seconds - (double)(time_t)o.seconds) * 1e9) };

		nanosleep(&ts, NULL);
		stop_flag = 1;
	}
	pthread_barrier_wait(&done);
	t1 = now_ns(CLOCK_MONOTONIC);
	c1 = now_ns(CLOCK_PROCESS_CPUTIME_ID);
	for (unsigned int i = 0; i < o.threads; i++) {
		allocs += workers[i].allocs;
		bytes += workers[i].bytes;
	}
	printf("{\"wall_ns\": %" PRId64 ", \"cpu_ns\": %" PRId64 ", \"allocs\": %" PRIu64
	       ", \"bytes\": %" PRIu64 ", \"threads\": %u, \"active_seen_ns\": %" PRId64
	       ", \"prof_active\": %d}\n",
	       t1 - t0, c1 - c0, allocs, bytes, o.threads, active_ns, prof_active() ? 1 : 0);
	fflush(stdout);
	if (m == MODE_JE)
		set_active(false);
}

int main(int argc, char **argv)
{
	if (parse_args(argc, argv)) {
		fprintf(stderr,
			"usage: microbench [--threads N] [--bytes B] [--size-min B] [--size-max B] "
			"[--depth D] [--mode none|je|wait] [--retain|--churn] [--seconds S] "
			"[--unique-stacks N] [--seed S] [--control]\n");
		return 2;
	}
	workers = calloc(o.threads, sizeof(*workers));
	if (!workers)
		die("out of memory");
	pthread_barrier_init(&warm_done, NULL, o.threads + 1);
	pthread_barrier_init(&go, NULL, o.threads + 1);
	pthread_barrier_init(&done, NULL, o.threads + 1);
	for (unsigned int i = 0; i < o.threads; i++) {
		workers[i].idx = i;
		workers[i].rng = (o.seed * 0x9e3779b97f4a7c15ULL) ^ (i + 1) * 0xbf58476d1ce4e5b9ULL;
		if (!workers[i].rng)
			workers[i].rng = 1;
		if (pthread_create(&workers[i].thread, NULL, worker_main, &workers[i]))
			die("pthread_create failed");
	}
	pthread_barrier_wait(&warm_done);

	if (!o.control) {
		window(o.mode);
		_exit(0);
	}
	/* --control: one window per line on stdin ("none", "je" or "wait"), until EOF or "quit" */
	printf("{\"ready\": %d}\n", (int)getpid());
	fflush(stdout);
	for (;;) {
		char line[64];

		if (!fgets(line, sizeof(line), stdin) || !strncmp(line, "quit", 4))
			break;
		for (unsigned int i = 0; i < o.threads; i++)
			release(&workers[i]);
		if (!strncmp(line, "none", 4))
			window(MODE_NONE);
		else if (!strncmp(line, "je", 2))
			window(MODE_JE);
		else if (!strncmp(line, "wait", 4))
			window(MODE_WAIT);
		else
			printf("{\"error\": \"unknown command\"}\n");
		fflush(stdout);
	}
	_exit(0);
}
