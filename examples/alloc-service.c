// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * alloc-service: a multi-threaded program with a few distinct allocation
 * sites, for demonstrating and testing heapbpf against jemalloc.
 *
 * Every worker thread runs every workload, chosen at random per operation
 * (weights in pick_workload()), so each site shows up under every thread.
 * Each site is its own non-inlined, non-cloned function, and no allocation
 * is a tail call, so the sites differ by function name in any stack trace:
 *
 *   churn_small        small objects (16..4096 B) freed and replaced at random
 *   leak_slowly        never freed, until LEAK_CAP bytes have leaked in total
 *   large_buffers      256 KiB..4 MiB buffers, a few kept live per thread
 *   make_session       a session record, and through it
 *   session_add_item   the items of a session (a two-level call path)
 *
 * With --control, the program is driven line by line on stdin (see usage()).
 * "pause" parks every worker at a point where it neither allocates nor frees
 * and where it still holds all its live objects, so a profiler's view of the
 * live heap and jemalloc's own prof.dump can be compared exactly.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* O_TMPFILE */
#endif
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sched.h> /* struct clone_args */
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jemalloc/jemalloc.h>

/*
 * noclone too: GCC would otherwise be free to emit "churn_small.constprop.0"
 * and the like, and stacks are matched by function name.
 */
#if defined(__clang__)
#define SITE __attribute__((noinline))
#else
#define SITE __attribute__((noinline, noclone))
#endif

#define CHURN_SLOTS   1024
#define SESSION_SLOTS 64
#define SESSION_ITEMS 16
#define LARGE_SLOTS   4
#define LEAK_CAP      (64UL << 20)
#define REQUEST_SLOTS 64

#define SMALL_MIN 16
#define SMALL_MAX 4096
#define LARGE_MIN (256UL << 10)
#define LARGE_MAX (4UL << 20)
#define ITEM_MIN  32
#define ITEM_MAX  512
#define LEAK_MIN  64
#define LEAK_MAX  2048

/* Bytes written into each new object: enough to make it used, cheap for 4 MiB. */
#define TOUCH_BYTES 64

struct session {
	uint64_t id;
	unsigned int nitems;
	void *items[SESSION_ITEMS];
};

struct worker {
	pthread_t thread;
	uint64_t rng;
	/* Read by the "stats" command while the worker runs, hence atomics. */
	uint64_t nallocs;
	uint64_t nfrees;
	void *churn[CHURN_SLOTS];
	void *large[LARGE_SLOTS];
	void *requests[REQUEST_SLOTS];
	struct session *sessions[SESSION_SLOTS];
	uint64_t next_session_id;
};

/* Shared state of the workers and whoever controls them. */
static struct {
	pthread_mutex_t lock;
	pthread_cond_t wake;   /* to workers: pause, resume or stop changed */
	pthread_cond_t parked; /* to the controller: nparked changed */
	/* Polled lock-free on every operation; changed only under lock. */
	int gate; /* paused || stopping */
	bool paused;
	bool stopping;
	unsigned int nparked;
} ctl = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.parked = PTHREAD_COND_INITIALIZER,
};

static struct worker *workers;
static unsigned int nthreads = 4;
static uint64_t rate = 20000;
static pthread_barrier_t start_barrier;

/*
 * Leaked objects are chained through their first word so that they stay
 * reachable from a global: the compiler cannot drop them, and a leak
 * checker, if anyone runs one, sees them as deliberately kept.
 */
static void *leak_head;
static uint64_t leaked_bytes;

/* Exit paths (quit, EOF, signal, --duration) may race; the first one wins. */
static pthread_mutex_t exit_lock = PTHREAD_MUTEX_INITIALIZER;

/* xorshift64*: tiny, good enough, and deterministic for a given seed. */
static uint64_t rnd(struct worker *w)
{
	uint64_t x = w->rng;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	w->rng = x;
	return x * 0x2545f4914f6cdd1dULL;
}

static uint64_t rnd_range(struct worker *w, uint64_t lo, uint64_t hi)
{
	return lo + rnd(w) % (hi - lo + 1);
}

/* splitmix64, to turn (seed, thread index) into well-spread xorshift states. */
static uint64_t seed_mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return x ? x : 1; /* xorshift must not start from 0 */
}

/* Makes the object used, so that no allocation can be optimized away. */
static void touch(void *p, size_t size)
{
	memset(p, 0xa5, size < TOUCH_BYTES ? size : TOUCH_BYTES);
	__asm__ volatile("" : : "r"(p) : "memory");
}

static void count_alloc(struct worker *w)
{
	__atomic_store_n(&w->nallocs, w->nallocs + 1, __ATOMIC_RELAXED);
}

static void count_free(struct worker *w)
{
	__atomic_store_n(&w->nfrees, w->nfrees + 1, __ATOMIC_RELAXED);
}

static void die_oom(size_t size)
{
	fprintf(stderr, "alloc-service: out of memory allocating %zu bytes\n", size);
	exit(1);
}

SITE static void churn_small(struct worker *w)
{
	unsigned int slot = rnd(w) % CHURN_SLOTS;
	size_t size = rnd_range(w, SMALL_MIN, SMALL_MAX);
	void *p;

	if (w->churn[slot]) {
		free(w->churn[slot]);
		count_free(w);
	}
	p = malloc(size);
	if (!p)
		die_oom(size);
	count_alloc(w);
	touch(p, size);
	w->churn[slot] = p;
}

SITE static void leak_slowly(struct worker *w)
{
	size_t size = rnd_range(w, LEAK_MIN, LEAK_MAX);
	void **p;

	/* Reserve first, so that concurrent leakers never overshoot the cap. */
	if (__atomic_add_fetch(&leaked_bytes, size, __ATOMIC_RELAXED) > LEAK_CAP) {
		__atomic_sub_fetch(&leaked_bytes, size, __ATOMIC_RELAXED);
		return;
	}
	p = malloc(size);
	if (!p)
		die_oom(size);
	count_alloc(w);
	touch(p, size);
	*p = __atomic_exchange_n(&leak_head, p, __ATOMIC_RELAXED);
}

SITE static void large_buffers(struct worker *w)
{
	unsigned int slot = rnd(w) % LARGE_SLOTS;
	size_t size = rnd_range(w, LARGE_MIN, LARGE_MAX);
	void *p;

	if (w->large[slot]) {
		free(w->large[slot]);
		count_free(w);
	}
	p = malloc(size);
	if (!p)
		die_oom(size);
	count_alloc(w);
	touch(p, size);
	w->large[slot] = p;
}

SITE static void session_add_item(struct worker *w, struct session *s)
{
	size_t size = rnd_range(w, ITEM_MIN, ITEM_MAX);
	void *p;

	p = malloc(size);
	if (!p)
		die_oom(size);
	count_alloc(w);
	touch(p, size);
	s->items[s->nitems++] = p;
}

static void session_destroy(struct worker *w, struct session *s)
{
	unsigned int i;

	for (i = 0; i < s->nitems; i++) {
		free(s->items[i]);
		count_free(w);
	}
	free(s);
	count_free(w);
}

SITE static void make_session(struct worker *w)
{
	unsigned int slot = rnd(w) % SESSION_SLOTS;
	unsigned int i, nitems = rnd_range(w, 1, SESSION_ITEMS);
	struct session *s;

	if (w->sessions[slot]) {
		session_destroy(w, w->sessions[slot]);
		w->sessions[slot] = NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		die_oom(sizeof(*s));
	count_alloc(w);
	s->id = w->next_session_id++;
	for (i = 0; i < nitems; i++)
		session_add_item(w, s);
	w->sessions[slot] = s;
}

/*
 * Per mille. Leaks and large buffers are rare so the heap stays modest.
 * A frame of its own, so that every site's stack reads "<site> <- run_one <-
 * worker_main" whether or not a symbolizer expands inlined functions.
 */
/*
 * The one deliberately inlined path: parse_request -> decode_header ->
 * alloc_buffer are a single function after -O2, and only DWARF tells the
 * three apart (tests check heapbpf's inlined frames against addr2line -i).
 */
static inline __attribute__((always_inline)) void *alloc_buffer(struct worker *w, size_t size)
{
	void *p = malloc(size);

	if (!p)
		die_oom(size);
	count_alloc(w);
	touch(p, size);
	return p;
}

static inline __attribute__((always_inline)) void decode_header(struct worker *w, void **slot)
{
	size_t size = rnd_range(w, 64, 1024);

	if (*slot) {
		free(*slot);
		count_free(w);
	}
	*slot = alloc_buffer(w, size);
}

SITE static void parse_request(struct worker *w)
{
	decode_header(w, &w->requests[rnd(w) % REQUEST_SLOTS]);
	/* keep the call above from being a tail call into nothing */
	__asm__ volatile("" : : : "memory");
}

SITE static void run_one(struct worker *w)
{
	unsigned int r = rnd(w) % 1000;

	if (r < 800)
		churn_small(w);
	else if (r < 850)
		parse_request(w);
	else if (r < 950)
		make_session(w);
	else if (r < 990)
		large_buffers(w);
	else
		leak_slowly(w);
	/* Not a tail call: a jump would drop this frame from the stacks. */
	__asm__ volatile("" : : : "memory");
}

static void timespec_add_ns(struct timespec *ts, uint64_t ns)
{
	ns += ts->tv_nsec;
	ts->tv_sec += ns / 1000000000;
	ts->tv_nsec = ns % 1000000000;
}

static bool timespec_before(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

/*
 * The one safe point of a worker: it holds its objects and is between two
 * operations. Parks while paused; returns false once the service stops.
 * With a deadline, also sleeps until then (rate limiting), waking early for
 * pause and stop.
 */
static bool safe_point(const struct timespec *deadline)
{
	bool go_on;

	pthread_mutex_lock(&ctl.lock);
	if (ctl.paused && !ctl.stopping) {
		ctl.nparked++;
		pthread_cond_broadcast(&ctl.parked);
		while (ctl.paused && !ctl.stopping)
			pthread_cond_wait(&ctl.wake, &ctl.lock);
		ctl.nparked--;
	}
	while (deadline && !ctl.paused && !ctl.stopping) {
		struct timespec now;

		clock_gettime(CLOCK_MONOTONIC, &now);
		if (!timespec_before(&now, deadline))
			break;
		pthread_cond_timedwait(&ctl.wake, &ctl.lock, deadline);
	}
	go_on = !ctl.stopping;
	pthread_mutex_unlock(&ctl.lock);
	return go_on;
}

SITE static void *worker_main(void *arg)
{
	struct worker *w = arg;
	/* Sleep at most every ~1 ms of work: a futex wait per operation costs more than it. */
	uint64_t batch = rate ? (rate + 999) / 1000 : 0;
	uint64_t period_ns = rate ? 1000000000 / rate : 0;
	struct timespec next;
	uint64_t n = 0;

	pthread_barrier_wait(&start_barrier);
	clock_gettime(CLOCK_MONOTONIC, &next);
	for (;;) {
		if (__atomic_load_n(&ctl.gate, __ATOMIC_ACQUIRE)) {
			if (!safe_point(NULL))
				break;
			/* Do not catch up on the time spent paused. */
			clock_gettime(CLOCK_MONOTONIC, &next);
		}
		run_one(w);
		if (rate && ++n % batch == 0) {
			timespec_add_ns(&next, batch * period_ns);
			if (!safe_point(&next))
				break;
		}
	}
	return NULL;
}

/*
 * --thread-churn: threads that live for a moment, allocate, free and exit,
 * so a profiler sees jemalloc's per-thread contexts come and go.
 */
SITE static void *short_lived(void *arg)
{
	struct worker w = { .rng = (uint64_t)(uintptr_t)arg };
	void *p[64];

	for (int i = 0; i < 64; i++) {
		size_t size = rnd_range(&w, 512, 16384);

		p[i] = malloc(size);
		if (!p[i])
			die_oom(size);
		touch(p[i], size);
	}
	for (int i = 0; i < 64; i++)
		free(p[i]);
	return NULL;
}

static uint64_t churn_ms;

static void *spawner_main(void *arg)
{
	uint64_t n = 0;

	(void)arg;
	while (!__atomic_load_n(&ctl.stopping, __ATOMIC_RELAXED)) {
		struct timespec ts = { .tv_sec = churn_ms / 1000,
				       .tv_nsec = (long)(churn_ms % 1000) * 1000000 };
		pthread_t t;

		/* paused means no allocation at all: wait it out */
		if (!__atomic_load_n(&ctl.gate, __ATOMIC_ACQUIRE) &&
		    pthread_create(&t, NULL, short_lived, (void *)(uintptr_t)(++n * 2654435761u)) ==
			    0)
			pthread_join(t, NULL);
		nanosleep(&ts, NULL);
	}
	return NULL;
}

static void set_gate_locked(void)
{
	__atomic_store_n(&ctl.gate, ctl.paused || ctl.stopping, __ATOMIC_RELEASE);
	pthread_cond_broadcast(&ctl.wake);
}

/* Returns once every worker is parked. */
static void pause_workers(void)
{
	pthread_mutex_lock(&ctl.lock);
	ctl.paused = true;
	set_gate_locked();
	while (ctl.nparked < nthreads)
		pthread_cond_wait(&ctl.parked, &ctl.lock);
	pthread_mutex_unlock(&ctl.lock);
}

static void resume_workers(void)
{
	pthread_mutex_lock(&ctl.lock);
	ctl.paused = false;
	set_gate_locked();
	pthread_mutex_unlock(&ctl.lock);
}

/*
 * Stops and joins the workers and exits, optionally after a last reply.
 * What the workers hold is not freed: the leak is meant to stay leaked, and
 * the process is about to go anyway.
 */
static __attribute__((noreturn)) void shut_down(const char *last_reply)
{
	unsigned int i;

	pthread_mutex_lock(&exit_lock); /* never released: the loser waits for exit() */
	pthread_mutex_lock(&ctl.lock);
	ctl.stopping = true;
	set_gate_locked();
	pthread_mutex_unlock(&ctl.lock);
	for (i = 0; i < nthreads; i++)
		pthread_join(workers[i].thread, NULL);
	if (last_reply) {
		printf("%s\n", last_reply);
		fflush(stdout);
	}
	exit(0);
}

static void reply(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void reply(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	/* The controller is a pipe: without a flush it would wait forever. */
	if (fflush(stdout) == EOF)
		shut_down(NULL);
}

static void cmd_dump(const char *path)
{
	int err;

	if (!*path) {
		reply("error dump needs a path");
		return;
	}
	err = mallctl("prof.dump", NULL, NULL, &path, sizeof(path));
	if (err)
		reply("error prof.dump: %s", strerror(err));
	else
		reply("dumped");
}

static void cmd_active(const char *arg)
{
	bool active, *newp = NULL;
	size_t len = sizeof(active);
	int err;

	if (*arg) {
		if (strcmp(arg, "0") && strcmp(arg, "1")) {
			reply("error active takes 0 or 1");
			return;
		}
		active = *arg == '1';
		newp = &active;
	}
	/* Writes first when asked to, then reads back what jemalloc now has. */
	if (newp) {
		err = mallctl("prof.active", NULL, NULL, newp, sizeof(*newp));
		if (err) {
			reply("error prof.active: %s", strerror(err));
			return;
		}
	}
	err = mallctl("prof.active", &active, &len, NULL, 0);
	if (err)
		reply("error prof.active: %s", strerror(err));
	else
		reply("active %d", active ? 1 : 0);
}

static void cmd_stats(void)
{
	uint64_t nallocs = 0, nfrees = 0;
	unsigned int i;

	for (i = 0; i < nthreads; i++) {
		nallocs += __atomic_load_n(&workers[i].nallocs, __ATOMIC_RELAXED);
		nfrees += __atomic_load_n(&workers[i].nfrees, __ATOMIC_RELAXED);
	}
	reply("stats %" PRIu64 " %" PRIu64, nallocs, nfrees);
}

/*
 * A forked child: only the forking thread lives on in it. It keeps
 * allocating (so that it samples if its copy of prof_active is on) until its
 * time is up, detached from the controller's pipes.
 */
static volatile sig_atomic_t child_dump;
/*
 * A forked child's rounds of allocations so far (64 each): a test reads it
 * from the child's memory (its symbol) to wait for work done, not for time.
 */
volatile uint64_t forked_child_rounds;

static void on_usr2(int sig)
{
	(void)sig;
	child_dump = 1;
}

/* forkw: the child stops allocating and dumps its profile to DIR/child-PID.heap. */
static void child_dump_to(const char *dir)
{
	char path[PATH_MAX], done[PATH_MAX + 8];
	const char *p = path;
	FILE *f;

	snprintf(path, sizeof(path), "%s/child-%d.heap", dir, (int)getpid());
	if (mallctl("prof.dump", NULL, NULL, &p, sizeof(p)))
		_exit(1);
	/* the marker says the dump is complete */
	snprintf(done, sizeof(done), "%s.done", path);
	f = fopen(done, "w");
	if (!f || fclose(f))
		_exit(1);
}

SITE static __attribute__((noreturn)) void forked_child(uint64_t seconds, const char *dump_dir)
{
	struct timespec nap = { 0, (dump_dir ? 1 : 10) * 1000 * 1000 };
	void *keep[64] = { 0 };

	/* no pipe of the controller's stays open in a child that outlives a test */
	if (!freopen("/dev/null", "r", stdin) || !freopen("/dev/null", "w", stdout) ||
	    !freopen("/dev/null", "w", stderr))
		_exit(1);
	if (dump_dir) {
		/* forkw: allocate from SIGUSR1 on, until SIGUSR2 */
		sigset_t go;
		int sig;

		signal(SIGUSR2, on_usr2);
		sigemptyset(&go);
		sigaddset(&go, SIGUSR1);
		if (sigwait(&go, &sig))
			_exit(1);
	}
	for (uint64_t i = 0; i < seconds * (dump_dir ? 1000 : 100); i++) {
		if (child_dump == 1) {
			/* from here on it only waits out its time: the counts stay as dumped */
			child_dump_to(dump_dir);
			child_dump = 2;
		}
		if (child_dump) {
			nanosleep(&nap, NULL);
			continue;
		}
		for (unsigned int j = 0; j < 64; j++) {
			free(keep[j]);
			keep[j] = malloc(64 + (j + i) % 4096);
			if (!keep[j])
				_exit(1);
			touch(keep[j], 64);
		}
		forked_child_rounds++;
		nanosleep(&nap, NULL);
	}
	_exit(0);
}

/* An empty file, DIR/child-PID.WHAT, that says a forked child got that far. */
static void child_mark(const char *dir, const char *what)
{
	char path[PATH_MAX];
	FILE *f;

	snprintf(path, sizeof(path), "%s/child-%d.%s", dir, (int)getpid(), what);
	f = fopen(path, "w");
	if (!f || fclose(f))
		_exit(1);
}

/*
 * forkhold: from SIGUSR1 on, MIB MiB in use in 1 MiB blocks (DIR/child-PID.held
 * says so), all freed at SIGUSR2 (DIR/child-PID.freed), then it exits: a peak
 * in the child alone, while the parent may allocate nothing.
 */
SITE static __attribute__((noreturn)) void child_held_buffers(uint64_t mib, const char *dir)
{
	void **blocks = calloc(mib ? mib : 1, sizeof(*blocks));
	sigset_t go;
	int sig;

	if (!blocks || !freopen("/dev/null", "r", stdin) || !freopen("/dev/null", "w", stdout) ||
	    !freopen("/dev/null", "w", stderr))
		_exit(1);
	sigemptyset(&go);
	sigaddset(&go, SIGUSR2);
	pthread_sigmask(SIG_BLOCK, &go, NULL);
	sigaddset(&go, SIGUSR1);
	sigdelset(&go, SIGUSR2);
	if (sigwait(&go, &sig))
		_exit(1);
	for (uint64_t i = 0; i < mib; i++) {
		blocks[i] = malloc(1 << 20);
		if (!blocks[i])
			_exit(1);
		touch(blocks[i], 1 << 20);
	}
	child_mark(dir, "held");
	sigemptyset(&go);
	sigaddset(&go, SIGUSR2);
	if (sigwait(&go, &sig))
		_exit(1);
	for (uint64_t i = 0; i < mib; i++)
		free(blocks[i]);
	child_mark(dir, "freed");
	_exit(0);
}

static int parse_u64(const char *s, uint64_t max, uint64_t *out);

/* spin MS: MS milliseconds of this thread's CPU time, allocating nothing. */
static void cmd_spin(const char *arg)
{
	uint64_t ms;
	struct timespec t;
	volatile uint64_t n = 0;
	int64_t until;

	if (parse_u64(arg, 600000, &ms)) {
		reply("error spin takes milliseconds");
		return;
	}
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	until = t.tv_sec * 1000000000LL + t.tv_nsec + (int64_t)ms * 1000000;
	do {
		for (int i = 0; i < 100000; i++)
			n++;
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	} while (t.tv_sec * 1000000000LL + t.tv_nsec < until);
	reply("spun %" PRIu64, ms);
}

/*
 * v (of n pointers) with room for more: grown by the caller of a site, not in
 * it, so that the site's only allocations are its objects (one stack).
 */
static void **grow_array(void **v, size_t n, size_t more)
{
	void **p = realloc(v, (n + more) * sizeof(*p));

	if (!p)
		die_oom((n + more) * sizeof(*p));
	return p;
}

/* hold N: N MiB more in use, in 1 MiB blocks, from a site of its own: a known change. */
static void **held;
static size_t nheld;

SITE static void held_buffers(uint64_t mib)
{
	for (uint64_t i = 0; i < mib; i++) {
		held[nheld] = malloc(1 << 20);
		if (!held[nheld])
			die_oom(1 << 20);
		touch(held[nheld++], 1 << 20);
	}
}

/*
 * hoard N: N MiB in 64 KiB blocks at once, from a site of its own, never
 * freed: a burst that is then held while the other sites churn (a held
 * suspect of heapbpf --leaks, not a growing one).
 */
#define HOARD_BLOCK (64 << 10)
static void **hoarded;
static size_t nhoarded;

SITE static void hoard_buffers(size_t n)
{
	for (size_t i = 0; i < n; i++) {
		hoarded[nhoarded] = malloc(HOARD_BLOCK);
		if (!hoarded[nhoarded])
			die_oom(HOARD_BLOCK);
		touch(hoarded[nhoarded++], HOARD_BLOCK);
	}
}

static void cmd_hoard(const char *arg)
{
	uint64_t mib;

	if (parse_u64(arg, 65536, &mib)) {
		reply("error hoard takes MiB");
		return;
	}
	/* the array grows here: in hoard_buffers it would be a second stack of that site */
	hoarded = grow_array(hoarded, nhoarded, mib * ((1 << 20) / HOARD_BLOCK));
	hoard_buffers(mib * ((1 << 20) / HOARD_BLOCK));
	reply("hoarded %zu", nhoarded);
}

/*
 * nobt: what a process that takes its stacks itself does (a bridge emitting
 * its own probes from jemalloc's sampling): a prof_backtrace hook of its own
 * that takes no backtrace (jemalloc 5.3.0 and later:
 * experimental.hooks.prof_backtrace, whose type jemalloc's public header does
 * not declare), and prof.active switched on by the process itself.
 */
static void no_backtrace(void **vec, unsigned *len, unsigned max_len)
{
	(void)vec;
	(void)max_len;
	*len = 0;
}

static void cmd_nobt(const char *arg)
{
	void (*hook)(void **, unsigned *, unsigned) = no_backtrace;
	bool on = true;
	int err;

	err = mallctl("experimental.hooks.prof_backtrace", NULL, NULL, &hook, sizeof(hook));
	if (err) {
		reply("error experimental.hooks.prof_backtrace: %s", strerror(err));
		return;
	}
	/* "nobt 0": the hook alone, prof.active left to whoever switches it on */
	if (arg && !strcmp(arg, "0")) {
		reply("nobt active 0");
		return;
	}
	err = mallctl("prof.active", NULL, NULL, &on, sizeof(on));
	if (err)
		reply("error prof.active: %s", strerror(err));
	else
		reply("nobt active 1");
}

/*
 * deep N MIB: MIB MiB in 64 KiB blocks (deep_buffers), kept until exit,
 * allocated at the bottom of a recursion N calls of deep_frame deep: a
 * backtrace longer than jemalloc's default 128 frames (5.3.1's prof_bt_max
 * raises its limit).
 */
static void **deepheld;
static size_t ndeepheld;

SITE static void deep_buffers(uint64_t mib)
{
	size_t n = mib * ((1 << 20) / HOARD_BLOCK);
	void **v = realloc(deepheld, (ndeepheld + n) * sizeof(*v));

	if (!v)
		die_oom((ndeepheld + n) * sizeof(*v));
	deepheld = v;
	for (size_t i = 0; i < n; i++) {
		deepheld[ndeepheld] = malloc(HOARD_BLOCK);
		if (!deepheld[ndeepheld])
			die_oom(HOARD_BLOCK);
		touch(deepheld[ndeepheld++], HOARD_BLOCK);
	}
}

/* not a tail call: each level keeps its frame, so the stack is depth frames deep */
SITE static unsigned deep_frame(unsigned depth, uint64_t mib)
{
	volatile unsigned here = depth;

	if (depth <= 1)
		deep_buffers(mib);
	else
		here += deep_frame(depth - 1, mib);
	return here;
}

static void cmd_deep(char *arg)
{
	uint64_t depth, mib;
	char *m = arg + strcspn(arg, " \t");

	if (*m)
		*m++ = '\0';
	if (parse_u64(arg, 100000, &depth) || !depth || parse_u64(m, 65536, &mib)) {
		reply("error deep takes DEPTH MIB");
		return;
	}
	deep_frame((unsigned)depth, mib);
	reply("deep %zu", ndeepheld);
}

/*
 * fill N: N MiB more in use in 1 MiB blocks (fill_buffers), every byte
 * written, kept until exit: resident memory, as a leak that ends in an OOM
 * kill makes it (hold touches only the first bytes of each block).
 */
static void **filled;
static size_t nfilled;

SITE static void fill_buffers(uint64_t mib)
{
	for (uint64_t i = 0; i < mib; i++) {
		void **v = realloc(filled, (nfilled + 1) * sizeof(*v));

		if (!v)
			die_oom((nfilled + 1) * sizeof(*v));
		filled = v;
		filled[nfilled] = malloc(1 << 20);
		if (!filled[nfilled])
			die_oom(1 << 20);
		memset(filled[nfilled++], 0x5a, 1 << 20);
	}
}

static void cmd_fill(const char *arg)
{
	uint64_t mib;

	if (parse_u64(arg, 65536, &mib)) {
		reply("error fill takes MiB");
		return;
	}
	fill_buffers(mib);
	reply("filled %zu", nfilled);
}

/*
 * fragment N: a fragmented heap for heapbpf rss. N MiB of small objects of
 * eight sizes (fragment_small), each written, three in four then freed at
 * random; 8 blocks of 4 MiB written and freed (jemalloc keeps their pages as
 * dirty); and N / 4 MiB (at least 1) mapped outside jemalloc and written.
 */
static void **fragments;
static size_t nfragments;
static void *outside_map;
static size_t outside_len;

SITE static void *fragment_small(size_t size)
{
	void *p = malloc(size);

	if (!p)
		die_oom(size);
	memset(p, 0x5a, size);
	return p;
}

SITE static void fragment_large(void)
{
	void *big[8];

	for (int i = 0; i < 8; i++) {
		big[i] = malloc(4 << 20);
		if (!big[i])
			die_oom(4 << 20);
		memset(big[i], 0x5a, 4 << 20);
	}
	for (int i = 0; i < 8; i++)
		free(big[i]);
}

static void cmd_fragment(const char *arg)
{
	static const size_t sizes[] = { 24, 48, 96, 160, 320, 640, 1280, 2560 };
	uint64_t mib, kept = 0, seed = 0x9e3779b97f4a7c15ull;
	size_t n = 0, bytes = 0;

	if (parse_u64(arg, 4096, &mib) || !mib) {
		reply("error fragment takes MiB");
		return;
	}
	for (size_t i = 0; bytes < (mib << 20); i++)
		bytes += sizes[i % 8], n++;
	fragments = realloc(fragments, (nfragments + n) * sizeof(*fragments));
	if (!fragments)
		die_oom((nfragments + n) * sizeof(*fragments));
	for (size_t i = 0; i < n; i++)
		fragments[nfragments + i] = fragment_small(sizes[i % 8]);
	for (size_t i = 0; i < n; i++) {
		seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
		if (seed % 4) {
			free(fragments[nfragments + i]);
			fragments[nfragments + i] = NULL;
		} else {
			kept++;
		}
	}
	nfragments += n;
	fragment_large();
	if (!outside_map) {
		outside_len = (size_t)(mib < 4 ? 1 : mib / 4) << 20;
		outside_map = mmap(NULL, outside_len, PROT_READ | PROT_WRITE,
				   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (outside_map == MAP_FAILED) {
			outside_map = NULL;
			reply("error fragment: mmap: %s", strerror(errno));
			return;
		}
		memset(outside_map, 0x5a, outside_len);
	}
	reply("fragmented %" PRIu64 " %zu", kept, outside_len);
}

/*
 * sparse SIZE N / dense SIZE N: N MiB of SIZE-byte objects, written and
 * kept; sparse then frees seven in eight at random, so that its size class's
 * slabs are mostly free regions. Each its own site (sparse_small,
 * dense_small): a stack of one object size.
 */
SITE static void *sparse_small(size_t size)
{
	void *p = malloc(size);

	if (!p)
		die_oom(size);
	memset(p, 0x7c, size);
	return p;
}

SITE static void *dense_small(size_t size)
{
	void *p = malloc(size);

	if (!p)
		die_oom(size);
	/* another byte than sparse_small's: identical bodies would be folded into one */
	memset(p, 0x6b, size);
	return p;
}

static void cmd_classed(const char *cmd, const char *arg)
{
	bool sparse = !strcmp(cmd, "sparse");
	uint64_t size, mib, seed = 0x2545f4914f6cdd1dull;
	size_t n, kept = 0;
	char *end = NULL;
	void **v;

	size = strtoull(arg, &end, 10);
	if (!end || end == arg || size == 0 || size > 14336 ||
	    parse_u64(end + strspn(end, " "), 4096, &mib) || !mib) {
		reply("error %s takes SIZE (1..14336) and MiB", cmd);
		return;
	}
	n = (size_t)((mib << 20) / size);
	v = malloc(n * sizeof(*v));
	if (!v)
		die_oom(n * sizeof(*v));
	for (size_t i = 0; i < n; i++)
		v[i] = sparse ? sparse_small(size) : dense_small(size);
	for (size_t i = 0; i < n; i++) {
		seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
		if (sparse && seed % 8)
			free(v[i]);
		else
			kept++;
	}
	/* the kept ones stay allocated for good; the array of them goes */
	free(v);
	reply("%s %zu", cmd, kept);
}

/* One "name value" line into buf at *at, jemalloc's size_t or unsigned stat; -1: unknown. */
static void stat_line(char *buf, size_t len, size_t *at, const char *name, bool u32)
{
	size_t v = 0, sz = u32 ? sizeof(unsigned) : sizeof(size_t);
	unsigned u = 0;
	long long out = -1;

	if (!mallctl(name, u32 ? (void *)&u : (void *)&v, &sz, NULL, 0))
		out = u32 ? (long long)u : (long long)v;
	if (*at < len)
		*at += (size_t)snprintf(buf + *at, len - *at, "%s %lld\n", name, out);
}

/*
 * jestats PATH: jemalloc's own stats after an epoch, one "mallctl-name value"
 * line each, into PATH (written with write(2): nothing allocated after the
 * epoch, so the heap stays as the stats describe it).
 */
static void cmd_jestats(const char *path)
{
	static const char *const totals[] = { "stats.allocated", "stats.active", "stats.metadata",
					      "stats.resident",	 "stats.mapped", "stats.retained" };
	static char buf[1 << 16];
	char name[96];
	size_t at = 0;
	uint64_t epoch = 1;
	unsigned nbins = 0, nlextents = 0;
	size_t sz = sizeof(epoch);
	int fd;

	if (!*path) {
		reply("error jestats needs a path");
		return;
	}
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		reply("error jestats: %s", strerror(errno));
		return;
	}
	/* twice: the first may set up ctl's own tables */
	mallctl("epoch", &epoch, &sz, &epoch, sz);
	mallctl("epoch", &epoch, &sz, &epoch, sz);
	for (size_t i = 0; i < sizeof(totals) / sizeof(totals[0]); i++)
		stat_line(buf, sizeof(buf), &at, totals[i], false);
	stat_line(buf, sizeof(buf), &at, "stats.arenas.4096.pdirty", false);
	stat_line(buf, sizeof(buf), &at, "stats.arenas.4096.pmuzzy", false);
	sz = sizeof(nbins);
	mallctl("arenas.nbins", &nbins, &sz, NULL, 0);
	mallctl("arenas.nlextents", &nlextents, &sz, NULL, 0);
	for (unsigned i = 0; i < nbins; i++) {
		snprintf(name, sizeof(name), "arenas.bin.%u.size", i);
		stat_line(buf, sizeof(buf), &at, name, false);
		snprintf(name, sizeof(name), "stats.arenas.4096.bins.%u.curregs", i);
		stat_line(buf, sizeof(buf), &at, name, false);
		snprintf(name, sizeof(name), "stats.arenas.4096.bins.%u.curslabs", i);
		stat_line(buf, sizeof(buf), &at, name, false);
	}
	for (unsigned i = 0; i < nlextents; i++) {
		snprintf(name, sizeof(name), "stats.arenas.4096.lextents.%u.curlextents", i);
		stat_line(buf, sizeof(buf), &at, name, false);
	}
	if (write(fd, buf, at) != (ssize_t)at || close(fd)) {
		reply("error jestats: cannot write %s", path);
		return;
	}
	reply("jestats %u %u", nbins, nlextents);
}

/*
 * thrash N [PASSES]: N MiB written to an unlinked file under /tmp, then
 * mapped and read through PASSES times (default 4), a page at a time. A
 * working set of mapped file pages larger than the memory cgroup's room:
 * reclaim finds them referenced again and again and frees few, which the
 * kernel reports as memory pressure. No OOM kill, no heap involved.
 */
static void cmd_thrash(const char *arg)
{
	static char block[1 << 20];
	uint64_t mib, passes = 4;
	volatile const char *map;
	unsigned long sum = 0;
	char *rest = NULL;
	int fd;

	mib = strtoull(arg, &rest, 10);
	if (rest == arg || !mib || mib > 65536 ||
	    (*rest && (parse_u64(rest + strspn(rest, " "), 1000, &passes) || !passes))) {
		reply("error thrash takes MiB [PASSES]");
		return;
	}
	fd = open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0) {
		reply("error thrash: %s", strerror(errno));
		return;
	}
	memset(block, 0x5a, sizeof(block));
	for (uint64_t i = 0; i < mib; i++) {
		if (pwrite(fd, block, sizeof(block), (off_t)(i << 20)) != (ssize_t)sizeof(block)) {
			reply("error thrash: %s", strerror(errno));
			close(fd);
			return;
		}
	}
	fdatasync(fd);
	map = mmap(NULL, mib << 20, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (map == MAP_FAILED) {
		reply("error thrash: %s", strerror(errno));
		return;
	}
	for (uint64_t p = 0; p < passes; p++) {
		for (uint64_t off = 0; off < mib << 20; off += 4096)
			sum += (unsigned char)map[off];
	}
	munmap((void *)map, mib << 20);
	reply("thrashed %" PRIu64 " %lu", mib, sum);
}

static void cmd_hold(const char *arg)
{
	uint64_t mib;

	if (parse_u64(arg, 65536, &mib)) {
		reply("error hold takes MiB");
		return;
	}
	held = grow_array(held, nheld, mib);
	held_buffers(mib);
	reply("held %zu", nheld);
}

/*
 * forkat PID: a child as fork makes, given the pid PID (clone3's set_tid;
 * root), a copy of this very image. PID is free once its last holder is
 * reaped, which the kernel does right after a child this process ignores
 * exits: taken while that is under way, it is tried again, a bounded number
 * of times.
 */
static void cmd_forkat(const char *arg)
{
	uint64_t want;
	pid_t tid, child = -1;
	struct clone_args ca = { .exit_signal = SIGCHLD, .set_tid_size = 1 };

	if (parse_u64(arg, INT_MAX, &want) || !want) {
		reply("error forkat takes a pid");
		return;
	}
	tid = (pid_t)want;
	ca.set_tid = (uint64_t)(uintptr_t)&tid;
	signal(SIGCHLD, SIG_IGN);
	for (int i = 0; i < 100000 && child < 0; i++) {
		child = (pid_t)syscall(SYS_clone3, &ca, sizeof(ca));
		if (child < 0 && errno != EEXIST)
			break;
		if (child < 0)
			sched_yield();
	}
	if (child == 0)
		forked_child(120, NULL);
	if (child < 0)
		reply("error forkat: %s", strerror(errno));
	else
		reply("forked %d", (int)child);
}

/* fork, fork2 [SECONDS]; forkw SECONDS DIR; forkhold MIB DIR; forkexec PROG [ARG...] */
static void cmd_fork(const char *cmd, char *arg)
{
	uint64_t seconds = 120;
	const char *dump_dir = NULL;
	int fds[2];
	pid_t child, grandchild = 0;
	sigset_t usr1, old;

	/* the children are not waited for: let the kernel reap them */
	signal(SIGCHLD, SIG_IGN);
	if (!strcmp(cmd, "forkw") || !strcmp(cmd, "forkhold")) {
		char *dir = arg + strcspn(arg, " \t");

		if (!*dir) {
			reply("error %s needs %s DIR", cmd,
			      strcmp(cmd, "forkw") ? "MIB" : "SECONDS");
			return;
		}
		*dir++ = '\0';
		dump_dir = dir + strspn(dir, " \t");
	}
	if (strcmp(cmd, "forkexec") && *arg && parse_u64(arg, 86400, &seconds)) {
		reply("error %s takes %s", cmd, strcmp(cmd, "forkhold") ? "seconds" : "MiB");
		return;
	}
	if (!strcmp(cmd, "forkexec") && !*arg) {
		reply("error forkexec needs a program");
		return;
	}
	if (pipe(fds)) {
		reply("error pipe: %s", strerror(errno));
		return;
	}
	/* forkw's SIGUSR1 must wait for its sigwait: blocked from before the fork */
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &usr1, &old);
	child = fork();
	if (child != 0)
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (child == 0) {
		if (!dump_dir)
			pthread_sigmask(SIG_SETMASK, &old, NULL);
		close(fds[0]);
		if (!strcmp(cmd, "forkexec")) {
			char *argv[16] = { 0 };
			int n = 0;

			for (char *t = strtok(arg, " \t"); t && n < 15; t = strtok(NULL, " \t"))
				argv[n++] = t;
			close(fds[1]);
			execv(argv[0], argv);
			_exit(127);
		}
		if (!strcmp(cmd, "forkhold")) {
			close(fds[1]);
			child_held_buffers(seconds, dump_dir);
		}
		if (!strcmp(cmd, "fork2")) {
			grandchild = fork();
			if (grandchild == 0)
				forked_child(seconds, NULL);
		}
		if (write(fds[1], &grandchild, sizeof(grandchild)) != sizeof(grandchild))
			_exit(1);
		close(fds[1]);
		forked_child(seconds, dump_dir);
	}
	close(fds[1]);
	if (child < 0) {
		close(fds[0]);
		reply("error fork: %s", strerror(errno));
		return;
	}
	/* forkexec: EOF at exec; the others: the grandchild's pid (0 when none) */
	if (read(fds[0], &grandchild, sizeof(grandchild)) != sizeof(grandchild))
		grandchild = 0;
	close(fds[0]);
	if (grandchild > 0)
		reply("forked %d %d", (int)child, (int)grandchild);
	else
		reply("forked %d", (int)child);
}

/*
 * forkmany N [MS [BATCH]]: N short-lived children, BATCH (default 300, at
 * most FORKMANY_MAX) alive at once, each exiting MS ms (default 300) after
 * its fork without touching the heap; waits for each batch before the next.
 * A service forking helpers all day, in seconds.
 */
#define FORKMANY_MAX 4096
static void cmd_forkmany(const char *arg)
{
	unsigned long long n = 0, ms = 300, size = 300, done = 0;
	static pid_t kids[FORKMANY_MAX];
	int fork_err = 0, got;
	char extra;

	got = sscanf(arg, "%llu %llu %llu %c", &n, &ms, &size, &extra);
	if (got < 1 || got > 3 || !n || n > 1000000 || ms > 60000 || !size || size > FORKMANY_MAX) {
		reply("error forkmany takes a count, milliseconds and a batch size");
		return;
	}
	/* waited for here, one by one (the other fork commands let the kernel reap theirs) */
	signal(SIGCHLD, SIG_DFL);
	while (done < n && !fork_err) {
		size_t batch = 0;

		for (; batch < size && done + batch < n; batch++) {
			kids[batch] = fork();
			if (kids[batch] == 0) {
				struct timespec ts = { (time_t)(ms / 1000),
						       (long)(ms % 1000) * 1000000 };

				nanosleep(&ts, NULL);
				_exit(0);
			}
			if (kids[batch] < 0) {
				fork_err = errno;
				break;
			}
		}
		for (size_t i = 0; i < batch; i++)
			waitpid(kids[i], NULL, 0);
		done += batch;
	}
	signal(SIGCHLD, SIG_IGN);
	if (fork_err)
		reply("error fork: %s after %llu", strerror(fork_err), done);
	else
		reply("forked %llu", done);
}

/* exec PROG [ARG...]: this process becomes PROG, under the same pid (a restart in place). */
static void cmd_exec(char *arg)
{
	char *argv[16] = { 0 };
	int n = 0;

	for (char *t = strtok(arg, " \t"); t && n < 15; t = strtok(NULL, " \t"))
		argv[n++] = t;
	if (!n) {
		reply("error exec needs a program");
		return;
	}
	reply("execing");
	execv(argv[0], argv);
	reply("error exec: %s", strerror(errno));
}

/*
 * leaks start: a scenario with known rates for heapbpf's leak suspects,
 * lifetimes and peak (tests/integration/test_leaks.c), one thread per site,
 * each paced by absolute deadlines:
 *   leak_fast      4 KiB every 1/256 s, never freed: 1 MiB/s
 *   leak_slow      512 B every 1/128 s, never freed: 64 KiB/s
 *   cache_fill     16 MiB in 64 KiB blocks, once at the start, then untouched
 *   churn_temp     256 B allocated and freed at once, 20000 a second
 *   hold_medium    1 KiB every ms, each freed 20 ms later
 *   burst_buffers  (burst MIB MS) MIB MiB in 64 KiB blocks, held MS ms, freed
 * churn_temp and hold_medium time their own sampled objects: a small object
 * jemalloc sampled sits alone in a run of pages (jemalloc 5.x promotes it),
 * so experimental.utilization.query says 1 region for it and more for any
 * other. "lifetimes" stops those two and reports; the leaks go on.
 */
#define SCN_FAST_SIZE	 4096
#define SCN_FAST_HZ	 256
#define SCN_SLOW_SIZE	 512
#define SCN_SLOW_HZ	 128
#define SCN_BLOCK	 (64 << 10)
#define SCN_CACHE_BLOCKS 256
#define SCN_CHURN_SIZE	 256
#define SCN_CHURN_HZ	 20000
#define SCN_HOLD_SIZE	 1024
#define SCN_HOLD_HZ	 1000
#define SCN_HOLD_NS	 20000000ULL
#define SCN_HOLD_SLOTS	 256
#define SCN_MAX_TIMED	 (1 << 20)

/*
 * The lifetimes of one site's sampled objects, in mmap'ed memory: not on the
 * heap observed. Each twice: from malloc's return to the call of free (in:
 * inside heapbpf's probe-to-probe interval) and from the call of malloc to
 * free's return (out: around it). heapbpf's lifetime of an object lies
 * between the two; they differ by more than malloc's and free's own time
 * only when the thread was preempted inside either.
 */
struct timed_site {
	uint64_t *in, *out;
	size_t n;
};

struct pacer {
	void (*op)(void);
	uint64_t hz;
	int *stop; /* NULL: until the process exits */
	uint64_t t0;
};

static struct {
	bool started, stopped;
	int stop_short;
	size_t util_mib[8], util_miblen;
	void *fast_head, *slow_head, *cache_head; /* leaked and cached blocks stay reachable */
	uint64_t fast_bytes, slow_bytes;
	struct pacer fast, slow, churn, hold;
	pthread_t fast_t, slow_t, churn_t, hold_t;
	struct timed_site churn_lt, hold_lt;
	struct {
		void *p;
		uint64_t called, t; /* malloc called, returned */
		bool sampled;
	} held[SCN_HOLD_SLOTS];
	unsigned int held_head, held_n;
} scn;

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void sleep_until(uint64_t ns)
{
	struct timespec ts = { .tv_sec = ns / 1000000000ULL, .tv_nsec = ns % 1000000000ULL };

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

/* True when jemalloc sampled the small object at p (alone in its pages, not in a slab). */
static bool is_sampled(void *p)
{
	size_t out[6],
		len = sizeof(out); /* slabcur_addr, nfree, nregs, size, bin_nfree, bin_nregs */

	if (mallctlbymib(scn.util_mib, scn.util_miblen, out, &len, &p, sizeof(p)))
		return false;
	return out[2] == 1;
}

static void timed(struct timed_site *s, uint64_t in, uint64_t out)
{
	if (s->n < SCN_MAX_TIMED) {
		s->in[s->n] = in;
		s->out[s->n++] = out;
	}
}

/* Leaked blocks are chained through their first word, so that they stay reachable. */
static void chain(void **head, size_t size)
{
	void **p = malloc(size);

	if (!p)
		die_oom(size);
	touch(p, size);
	*p = *head;
	*head = p;
}

SITE static void leak_fast(void)
{
	chain(&scn.fast_head, SCN_FAST_SIZE);
	__atomic_add_fetch(&scn.fast_bytes, SCN_FAST_SIZE, __ATOMIC_RELAXED);
	__asm__ volatile("" : : : "memory");
}

SITE static void leak_slow(void)
{
	chain(&scn.slow_head, SCN_SLOW_SIZE);
	__atomic_add_fetch(&scn.slow_bytes, SCN_SLOW_SIZE, __ATOMIC_RELAXED);
	__asm__ volatile("" : : : "memory");
}

SITE static void cache_fill(void)
{
	for (int i = 0; i < SCN_CACHE_BLOCKS; i++)
		chain(&scn.cache_head, SCN_BLOCK);
	__asm__ volatile("" : : : "memory");
}

SITE static void churn_temp(void)
{
	uint64_t called = mono_ns(), born, dying;
	void *p = malloc(SCN_CHURN_SIZE);
	bool sampled;

	born = mono_ns();
	if (!p)
		die_oom(SCN_CHURN_SIZE);
	sampled = is_sampled(p);
	touch(p, SCN_CHURN_SIZE);
	dying = mono_ns();
	free(p);
	if (sampled)
		timed(&scn.churn_lt, dying - born, mono_ns() - called);
}

/* Frees the oldest held object, timing it if sampled. */
static void hold_release(void)
{
	unsigned int i = scn.held_head;
	uint64_t now = mono_ns();

	free(scn.held[i].p);
	if (scn.held[i].sampled)
		timed(&scn.hold_lt, now - scn.held[i].t, mono_ns() - scn.held[i].called);
	scn.held_head = (i + 1) % SCN_HOLD_SLOTS;
	scn.held_n--;
}

SITE static void hold_medium(void)
{
	uint64_t now = mono_ns();
	unsigned int i;

	while (scn.held_n &&
	       (now - scn.held[scn.held_head].t >= SCN_HOLD_NS || scn.held_n == SCN_HOLD_SLOTS))
		hold_release();
	i = (scn.held_head + scn.held_n++) % SCN_HOLD_SLOTS;
	scn.held[i].called = mono_ns();
	scn.held[i].p = malloc(SCN_HOLD_SIZE);
	scn.held[i].t = mono_ns();
	if (!scn.held[i].p)
		die_oom(SCN_HOLD_SIZE);
	scn.held[i].sampled = is_sampled(scn.held[i].p);
	touch(scn.held[i].p, SCN_HOLD_SIZE);
}

SITE static void burst_buffers(void **v, size_t n, uint64_t hold_ms)
{
	struct timespec nap = { .tv_sec = hold_ms / 1000, .tv_nsec = (hold_ms % 1000) * 1000000 };

	for (size_t i = 0; i < n; i++) {
		v[i] = malloc(SCN_BLOCK);
		if (!v[i])
			die_oom(SCN_BLOCK);
		touch(v[i], SCN_BLOCK);
	}
	nanosleep(&nap, NULL);
	for (size_t i = 0; i < n; i++)
		free(v[i]);
}

static void *paced_main(void *arg)
{
	struct pacer *pc = arg;

	for (uint64_t i = 1; !(pc->stop && __atomic_load_n(pc->stop, __ATOMIC_RELAXED)); i++) {
		pc->op();
		sleep_until(pc->t0 + i * 1000000000ULL / pc->hz);
	}
	return NULL;
}

static int pace(pthread_t *t, struct pacer *pc, void (*op)(void), uint64_t hz, int *stop)
{
	*pc = (struct pacer){ .op = op, .hz = hz, .stop = stop, .t0 = mono_ns() };
	return pthread_create(t, NULL, paced_main, pc);
}

static uint64_t *timed_array(void)
{
	void *m = mmap(NULL, SCN_MAX_TIMED * sizeof(uint64_t), PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return m == MAP_FAILED ? NULL : m;
}

static void cmd_leaks(const char *arg)
{
	if (strcmp(arg, "start")) {
		reply("error leaks takes start");
		return;
	}
	if (scn.started) {
		reply("error leaks started already");
		return;
	}
	scn.util_miblen = sizeof(scn.util_mib) / sizeof(scn.util_mib[0]);
	scn.churn_lt.in = timed_array();
	scn.churn_lt.out = timed_array();
	scn.hold_lt.in = timed_array();
	scn.hold_lt.out = timed_array();
	if (mallctlnametomib("experimental.utilization.query", scn.util_mib, &scn.util_miblen) ||
	    !scn.churn_lt.in || !scn.churn_lt.out || !scn.hold_lt.in || !scn.hold_lt.out) {
		reply("error this jemalloc cannot tell sampled objects apart");
		return;
	}
	scn.started = true;
	cache_fill();
	if (pace(&scn.fast_t, &scn.fast, leak_fast, SCN_FAST_HZ, NULL) ||
	    pace(&scn.slow_t, &scn.slow, leak_slow, SCN_SLOW_HZ, NULL) ||
	    pace(&scn.churn_t, &scn.churn, churn_temp, SCN_CHURN_HZ, &scn.stop_short) ||
	    pace(&scn.hold_t, &scn.hold, hold_medium, SCN_HOLD_HZ, &scn.stop_short)) {
		reply("error pthread_create failed");
		exit(1);
	}
	reply("leaks started");
}

static void cmd_burst(const char *arg)
{
	uint64_t mib, ms;
	char *end;
	void **v;

	mib = strtoull(arg, &end, 10);
	ms = strtoull(end, &end, 10);
	if (!mib || mib > 4096 || *end || ms > 60000) {
		reply("error burst takes MIB MS");
		return;
	}
	v = calloc(mib * (1 << 20) / SCN_BLOCK, sizeof(*v));
	if (!v)
		die_oom(mib);
	burst_buffers(v, mib * (1 << 20) / SCN_BLOCK, ms);
	free(v);
	reply("burst %" PRIu64, mib);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* P50 MAX UNDER1MS of n lifetimes (ns), sorted here. */
static int lifetime_stats(uint64_t *ns, size_t n, char *buf, size_t len)
{
	size_t under = 0;

	qsort(ns, n, sizeof(*ns), cmp_u64);
	while (under < n && ns[under] < 1000000)
		under++;
	return snprintf(buf, len, " %" PRIu64 " %" PRIu64 " %zu", n ? ns[n / 2] : 0,
			n ? ns[n - 1] : 0, under);
}

/*
 * N, then P50 MAX UNDER1MS of one site's sampled lifetimes (ns) timed inside
 * heapbpf's interval, then the same timed around it: p50 the value at rank
 * n / 2, UNDER1MS how many were shorter than 1 ms (heapbpf's default
 * temporary threshold).
 */
static void timed_stats(struct timed_site *s, char *buf, size_t len)
{
	int k = snprintf(buf, len, "%zu", s->n);

	k += lifetime_stats(s->in, s->n, buf + k, len - k);
	lifetime_stats(s->out, s->n, buf + k, len - k);
}

static void cmd_lifetimes(void)
{
	char churn[192], hold[192];

	if (!scn.started) {
		reply("error leaks not started");
		return;
	}
	if (!scn.stopped) {
		__atomic_store_n(&scn.stop_short, 1, __ATOMIC_RELAXED);
		pthread_join(scn.churn_t, NULL);
		pthread_join(scn.hold_t, NULL);
		while (scn.held_n)
			hold_release();
		scn.stopped = true;
	}
	timed_stats(&scn.churn_lt, churn, sizeof(churn));
	timed_stats(&scn.hold_lt, hold, sizeof(hold));
	reply("lifetimes churn_temp %s hold_medium %s", churn, hold);
}

static void cmd_leaked(void)
{
	uint64_t now = mono_ns();

	if (!scn.started) {
		reply("error leaks not started");
		return;
	}
	reply("leaked leak_fast %" PRIu64 " %" PRIu64 " leak_slow %" PRIu64 " %" PRIu64
	      " cache_fill %d",
	      __atomic_load_n(&scn.fast_bytes, __ATOMIC_RELAXED), now - scn.fast.t0,
	      __atomic_load_n(&scn.slow_bytes, __ATOMIC_RELAXED), now - scn.slow.t0,
	      SCN_CACHE_BLOCKS * SCN_BLOCK);
}

/*
 * rotate THREADS SIZE SLOTS ROUNDS: each of THREADS threads fills its SLOTS
 * slots with SIZE-byte buffers (rotate_buffers) ROUNDS times over, freeing a
 * slot's old buffer before it fills it again; then frees every other slot
 * and parks, holding the rest until exit. One site, one size, many samples:
 * what jemalloc's per-size-class rounding of its unbiased counts shows on.
 */
#define ROTATE_MAX_THREADS 64
#define ROTATE_MAX_BYTES   (1ULL << 30)

struct rotator {
	pthread_t t;
	uint64_t size, slots, rounds, live;
	void **slot;
};

static pthread_mutex_t rotate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t rotate_cond = PTHREAD_COND_INITIALIZER;
static unsigned int rotate_parked;

SITE static void rotate_buffers(struct rotator *r)
{
	for (uint64_t k = 0; k < r->rounds; k++) {
		for (uint64_t i = 0; i < r->slots; i++) {
			free(r->slot[i]);
			r->slot[i] = malloc(r->size);
			if (!r->slot[i])
				die_oom(r->size);
			touch(r->slot[i], r->size);
		}
	}
	for (uint64_t i = 1; i < r->slots; i += 2) {
		free(r->slot[i]);
		r->slot[i] = NULL;
	}
	r->live = (r->slots + 1) / 2;
}

static void *rotate_main(void *arg)
{
	rotate_buffers(arg);
	pthread_mutex_lock(&rotate_lock);
	rotate_parked++;
	pthread_cond_broadcast(&rotate_cond);
	/* parked for good: exit() ends it, with its buffers still live */
	for (;;)
		pthread_cond_wait(&rotate_cond, &rotate_lock);
	return NULL;
}

static void cmd_rotate(const char *arg)
{
	uint64_t threads, size, slots, rounds, live = 0;
	struct rotator *r;
	unsigned int want;
	char *end;

	threads = strtoull(arg, &end, 10);
	size = strtoull(end, &end, 10);
	slots = strtoull(end, &end, 10);
	rounds = strtoull(end, &end, 10);
	if (*end || !threads || threads > ROTATE_MAX_THREADS || !size || !slots ||
	    size > ROTATE_MAX_BYTES || slots > ROTATE_MAX_BYTES / size ||
	    threads * slots * size > ROTATE_MAX_BYTES || rounds > 1000000) {
		reply("error rotate takes THREADS SIZE SLOTS ROUNDS (at most %d threads, 1 GiB "
		      "in all)",
		      ROTATE_MAX_THREADS);
		return;
	}
	r = calloc(threads, sizeof(*r));
	if (!r)
		die_oom(threads * sizeof(*r));
	pthread_mutex_lock(&rotate_lock);
	want = rotate_parked + (unsigned int)threads;
	pthread_mutex_unlock(&rotate_lock);
	for (uint64_t i = 0; i < threads; i++) {
		r[i].size = size;
		r[i].slots = slots;
		r[i].rounds = rounds;
		r[i].slot = calloc(slots, sizeof(void *));
		if (!r[i].slot)
			die_oom(slots * sizeof(void *));
		if (pthread_create(&r[i].t, NULL, rotate_main, &r[i])) {
			reply("error pthread_create failed");
			exit(1);
		}
	}
	pthread_mutex_lock(&rotate_lock);
	while (rotate_parked < want)
		pthread_cond_wait(&rotate_cond, &rotate_lock);
	pthread_mutex_unlock(&rotate_lock);
	/* the rotators and their slots stay until exit */
	for (uint64_t i = 0; i < threads; i++)
		live += r[i].live;
	reply("rotated %" PRIu64, live);
}

/* The command line's and the environment's strings, one after another in memory, for "retitle". */
static char *args_start, *args_end;

/*
 * What Redis's setproctitle does: the environment copied away, then the
 * title written over the command line's and the environment's own strings,
 * the rest of them zeroed, so that /proc/PID/cmdline (and gdb's gcore, which
 * takes the process's name from it) shows the title, not the program, and
 * /proc/PID/environ holds nothing any more.
 */
static void cmd_retitle(const char *title)
{
	extern char **environ;
	size_t room = args_end - args_start;

	if (!*title || strlen(title) >= room) {
		reply("error retitle needs a title of 1 to %zu bytes", room ? room - 1 : 0);
		return;
	}
	for (size_t i = 0; environ[i]; i++) {
		if (environ[i] >= args_start && environ[i] < args_end) {
			environ[i] = strdup(environ[i]);
			if (!environ[i])
				die_oom(args_end - args_start);
		}
	}
	memset(args_start, 0, room);
	memcpy(args_start, title, strlen(title));
	reply("retitled");
}

static void run_command(char *line)
{
	size_t len;
	char *arg;

	/* Blanks around a command are a typing accident, never meaningful. */
	line += strspn(line, " \t\r");
	len = strlen(line);
	while (len && strchr(" \t\r", line[len - 1]))
		line[--len] = '\0';
	arg = line + strcspn(line, " \t");
	if (*arg)
		*arg++ = '\0';
	arg += strspn(arg, " \t");

	if (!strcmp(line, "pause")) {
		pause_workers();
		reply("paused");
	} else if (!strcmp(line, "resume")) {
		resume_workers();
		reply("resumed");
	} else if (!strcmp(line, "dump")) {
		cmd_dump(arg);
	} else if (!strcmp(line, "active")) {
		cmd_active(arg);
	} else if (!strcmp(line, "stats")) {
		cmd_stats();
	} else if (!strcmp(line, "spin")) {
		cmd_spin(arg);
	} else if (!strcmp(line, "nobt")) {
		cmd_nobt(arg);
	} else if (!strcmp(line, "deep")) {
		cmd_deep(arg);
	} else if (!strcmp(line, "fork") || !strcmp(line, "fork2") || !strcmp(line, "forkw") ||
		   !strcmp(line, "forkhold") || !strcmp(line, "forkexec")) {
		cmd_fork(line, arg);
	} else if (!strcmp(line, "forkat")) {
		cmd_forkat(arg);
	} else if (!strcmp(line, "forkmany")) {
		cmd_forkmany(arg);
	} else if (!strcmp(line, "exec")) {
		cmd_exec(arg);
	} else if (!strcmp(line, "hold")) {
		cmd_hold(arg);
	} else if (!strcmp(line, "hoard")) {
		cmd_hoard(arg);
	} else if (!strcmp(line, "fill")) {
		cmd_fill(arg);
	} else if (!strcmp(line, "thrash")) {
		cmd_thrash(arg);
	} else if (!strcmp(line, "fragment")) {
		cmd_fragment(arg);
	} else if (!strcmp(line, "jestats")) {
		cmd_jestats(arg);
	} else if (!strcmp(line, "sparse") || !strcmp(line, "dense")) {
		cmd_classed(line, arg);
	} else if (!strcmp(line, "leaks")) {
		cmd_leaks(arg);
	} else if (!strcmp(line, "burst")) {
		cmd_burst(arg);
	} else if (!strcmp(line, "lifetimes")) {
		cmd_lifetimes();
	} else if (!strcmp(line, "leaked")) {
		cmd_leaked();
	} else if (!strcmp(line, "rotate")) {
		cmd_rotate(arg);
	} else if (!strcmp(line, "retitle")) {
		cmd_retitle(arg);
	} else if (!strcmp(line, "quit")) {
		shut_down("bye");
	} else if (!*line) {
		reply("error empty command");
	} else {
		reply("error unknown command '%s'", line);
	}
}

/*
 * Reads stdin with read(2), not stdio: another thread may call exit() at
 * any time, and exit() must not have to wait for a lock held by a reader
 * blocked in fgets().
 */
static __attribute__((noreturn)) void control_loop(void)
{
	char buf[PATH_MAX + 64];
	size_t len = 0;
	bool overlong = false;

	for (;;) {
		char *nl;
		ssize_t n;

		while ((nl = memchr(buf, '\n', len))) {
			size_t linelen = nl - buf;

			*nl = '\0';
			if (overlong)
				reply("error line too long");
			else
				run_command(buf);
			overlong = false;
			len -= linelen + 1;
			memmove(buf, nl + 1, len);
		}
		if (len == sizeof(buf)) {
			/* Swallow the rest of an overlong line, answer it once. */
			overlong = true;
			len = 0;
		}
		n = read(STDIN_FILENO, buf + len, sizeof(buf) - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			/* EOF: the controller is gone, maybe after a last unterminated command. */
			if (n == 0 && len && !overlong) {
				buf[len] = '\0';
				run_command(buf);
			}
			shut_down(NULL);
		}
		len += n;
	}
}

/* Waits for SIGINT/SIGTERM or the end of --duration (0: forever), then stops. */
static __attribute__((noreturn)) void wait_for_end(const sigset_t *sigs, uint64_t duration)
{
	struct timespec end, now, left;

	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += duration;
	for (;;) {
		if (!duration) {
			int sig;

			if (!sigwait(sigs, &sig))
				shut_down(NULL);
			continue;
		}
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (!timespec_before(&now, &end))
			shut_down(NULL);
		left.tv_sec = end.tv_sec - now.tv_sec;
		left.tv_nsec = end.tv_nsec - now.tv_nsec;
		if (left.tv_nsec < 0) {
			left.tv_sec--;
			left.tv_nsec += 1000000000;
		}
		if (sigtimedwait(sigs, NULL, &left) > 0)
			shut_down(NULL);
	}
}

struct end_args {
	sigset_t sigs;
	uint64_t duration;
};

static void *end_thread(void *arg)
{
	struct end_args *a = arg;

	wait_for_end(&a->sigs, a->duration);
}

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: alloc-service [OPTIONS]\n"
		"\n"
		"A multi-threaded service that allocates through a few distinct call paths,\n"
		"for profiling with heapbpf. Every thread runs every workload, picked at\n"
		"random per operation:\n"
		"  churn_small        80%%  replace one of 1024 live small objects (16..4096 B)\n"
		"  parse_request       5%%  replace one of 64 buffers (64..1024 B) through the\n"
		"                           inlined decode_header -> alloc_buffer\n"
		"  make_session       10%%  replace one of 64 sessions: a record (calloc) plus\n"
		"                           1..16 items from session_add_item (32..512 B)\n"
		"  large_buffers       4%%  replace one of 4 live buffers (256 KiB..4 MiB)\n"
		"  leak_slowly         1%%  leak 64..2048 B, until 64 MiB leaked in total\n"
		"\n"
		"Options:\n"
		"  -t, --threads N     worker threads (default 4; 0: none, for the scenarios\n"
		"                      of the control commands alone)\n"
		"  -d, --duration S    stop after S seconds (default 0: run until stopped)\n"
		"  -s, --seed N        PRNG seed; thread i uses a state derived from (N, i)\n"
		"                      (default 1)\n"
		"  -r, --rate N        operations per second per thread, 0 = unlimited\n"
		"                      (default 20000)\n"
		"  -c, --control       take commands on stdin (below)\n"
		"  -T, --thread-churn MS  every MS ms, start a thread that allocates 64\n"
		"                      objects (short_lived), frees them and exits\n"
		"  -h, --help          show this help\n"
		"\n"
		"Without --control it runs until SIGINT/SIGTERM or the end of --duration.\n"
		"\n"
		"Control mode: once all threads run it prints \"ready <pid>\"; then each line\n"
		"on stdin is one command, answered by one line on stdout:\n"
		"  pause          park all workers between operations, holding all their\n"
		"                 objects; no allocation or free happens until resume -> paused\n"
		"  resume         let them run again                              -> resumed\n"
		"  dump PATH      mallctl(\"prof.dump\") to PATH           -> dumped | error MSG\n"
		"  active [0|1]   read (or set, then read) mallctl(\"prof.active\") -> active 0|1\n"
		"  stats          allocations and frees done so far  -> stats ALLOCS FREES\n"
		"  spin MS        MS ms of CPU time, allocating nothing     -> spun MS\n"
		"  nobt [0]       install a prof_backtrace hook that takes no backtrace\n"
		"                 (experimental.hooks.prof_backtrace, jemalloc >= 5.3.0), then\n"
		"                 set prof.active to 1 (0: leave it) -> nobt active 1|0\n"
		"  deep N M       M MiB in 64 KiB blocks (deep_buffers), kept until exit,\n"
		"                 allocated N calls of deep_frame deep     -> deep BLOCKS\n"
		"  fork [N]       fork a child that allocates (forked_child) for N s (default\n"
		"                 120), then exits                         -> forked CHILD\n"
		"  fork2 [N]      the same, and that child forks a grandchild\n"
		"                                               -> forked CHILD GRANDCHILD\n"
		"  forkw N DIR    a child that waits for SIGUSR1, then allocates (forked_child)\n"
		"                 until SIGUSR2, dumps its profile to DIR/child-PID.heap (and\n"
		"                 DIR/child-PID.heap.done), and waits out its N s -> forked CHILD\n"
		"  forkhold M DIR a child that waits for SIGUSR1, then holds M MiB in 1 MiB\n"
		"                 blocks (child_held_buffers; DIR/child-PID.held), frees them\n"
		"                 at SIGUSR2 (DIR/child-PID.freed) and exits -> forked CHILD\n"
		"  forkexec PROG [ARG...]  fork a child that execs PROG -> forked CHILD\n"
		"  forkat PID     a child as fork's, as the pid PID (root)  -> forked CHILD\n"
		"  forkmany N [MS [BATCH]]  N children that exit MS ms (default 300) after\n"
		"                 their fork, BATCH (300) alive at once, each batch waited for\n"
		"                                                          -> forked N\n"
		"  exec PROG [ARG...]  this process execs PROG (same pid)  -> execing\n"
		"  fill N         N MiB more in use in 1 MiB blocks (fill_buffers), every byte\n"
		"                 written (resident), kept until exit      -> filled BLOCKS\n"
		"  thrash N [PASSES]  N MiB written to an unlinked file under /tmp, mapped and\n"
		"                 read through PASSES times (4): a working set the cgroup cannot\n"
		"                 hold, memory pressure without an OOM kill -> thrashed N SUM\n"
		"  fragment N     N MiB of small objects (fragment_small), 3 in 4 freed at\n"
		"                 random; 32 MiB of large blocks written and freed (dirty);\n"
		"                 N/4 MiB mmap'ed outside jemalloc  -> fragmented KEPT BYTES\n"
		"  sparse SIZE N  N MiB of SIZE-byte objects (sparse_small), 7 in 8 freed at\n"
		"                 random, the rest kept                 -> sparse KEPT\n"
		"  dense SIZE N   N MiB of SIZE-byte objects (dense_small), all kept -> dense N\n"
		"  jestats PATH   jemalloc's mallctl stats after an epoch, one \"name value\"\n"
		"                 line each, into PATH                -> jestats NBINS NLEXTENTS\n"
		"  hold N         N MiB more in use, in 1 MiB blocks (held_buffers), kept until\n"
		"                 exit                                     -> held BLOCKS\n"
		"  hoard N        N MiB more in use at once, in 64 KiB blocks (hoard_buffers),\n"
		"                 never freed                              -> hoarded BLOCKS\n"
		"  leaks start    a scenario with known rates, a thread per site: leak_fast\n"
		"                 leaks 1 MiB/s (4 KiB blocks), leak_slow 64 KiB/s (512 B),\n"
		"                 cache_fill holds 16 MiB allocated once, churn_temp frees each\n"
		"                 256 B object at once (20000/s), hold_medium each 1 KiB object\n"
		"                 20 ms after (1000/s)                     -> leaks started\n"
		"  burst MIB MS   MIB MiB in 64 KiB blocks (burst_buffers), held MS ms, freed\n"
		"                                                          -> burst MIB\n"
		"  lifetimes      stop churn_temp and hold_medium (their objects freed); for\n"
		"                 each, the objects jemalloc sampled: count, median and\n"
		"                 longest lifetime in ns, and how many lived under 1 ms, timed\n"
		"                 by the site itself from malloc's return to the call of free\n"
		"                 (IN), and from the call of malloc to free's return (OUT)\n"
		"                 -> lifetimes churn_temp N IN_P50 IN_MAX IN_UNDER OUT_P50\n"
		"                    OUT_MAX OUT_UNDER hold_medium (the same)\n"
		"  leaked         bytes leaked so far and over how many ns, and the cache's size\n"
		"                 -> leaked leak_fast BYTES NS leak_slow BYTES NS cache_fill BYTES\n"
		"  rotate T S N R T threads each fill N slots with S-byte buffers\n"
		"                 (rotate_buffers), R rounds, freeing a slot's buffer before\n"
		"                 filling it; then free every other slot and park, holding\n"
		"                 the rest until exit                      -> rotated LIVE\n"
		"  retitle TITLE  TITLE written over the command line's and the environment's\n"
		"                 own strings, as Redis does (/proc/PID/cmdline shows it,\n"
		"                 /proc/PID/environ is empty)                    -> retitled\n"
		"  quit           stop the workers and exit 0                     -> bye\n"
		"Anything else is answered \"error MSG\". EOF on stdin, SIGINT, SIGTERM or the\n"
		"end of --duration stop it (exit 0) without a reply.\n"
		"\n"
		"jemalloc profiling is configured through the environment, e.g. built in but\n"
		"sampling off, for heapbpf to watch:\n"
		"  MALLOC_CONF=prof:true,prof_active:false alloc-service --control\n"
		"or with jemalloc's own sampling on, to compare against its dumps (raw\n"
		"sample counts, not jemalloc 5.3's default unbiased estimates):\n"
		"  MALLOC_CONF=prof:true,prof_active:true,prof_accum:true,prof_unbias:false \\\n"
		"    alloc-service --control\n");
}

static int parse_u64(const char *s, uint64_t max, uint64_t *out)
{
	unsigned long long v;
	char *end;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || *end || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "threads", required_argument, NULL, 't' },
		{ "duration", required_argument, NULL, 'd' },
		{ "seed", required_argument, NULL, 's' },
		{ "rate", required_argument, NULL, 'r' },
		{ "control", no_argument, NULL, 'c' },
		{ "thread-churn", required_argument, NULL, 'T' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	uint64_t v, duration = 0, seed = 1;
	bool control = false;
	static struct end_args end_args;
	pthread_t ender;
	unsigned int i;
	int c, err;

	while ((c = getopt_long(argc, argv, "t:d:s:r:chT:", opts, NULL)) != -1) {
		switch (c) {
		case 't':
			if (parse_u64(optarg, 1024, &v))
				goto bad_arg;
			nthreads = v;
			break;
		case 'd':
			if (parse_u64(optarg, INT_MAX, &duration))
				goto bad_arg;
			break;
		case 's':
			if (parse_u64(optarg, UINT64_MAX, &seed))
				goto bad_arg;
			break;
		case 'r':
			if (parse_u64(optarg, 1000000000, &rate))
				goto bad_arg;
			break;
		case 'c':
			control = true;
			break;
		case 'T':
			if (parse_u64(optarg, 60000, &churn_ms) || !churn_ms)
				goto bad_arg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			fprintf(stderr, "Try 'alloc-service --help'.\n");
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "alloc-service: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	/*
	 * The kernel lays the strings out one after another, the environment's
	 * after the command line's (getopt may have reordered argv).
	 */
	{
		extern char **environ;

		args_start = args_end = argv[0];
		for (i = 0; i < (unsigned int)argc; i++) {
			if (argv[i] < args_start)
				args_start = argv[i];
			if (argv[i] + strlen(argv[i]) + 1 > args_end)
				args_end = argv[i] + strlen(argv[i]) + 1;
		}
		for (i = 0; environ[i]; i++) {
			if (environ[i] == args_end)
				args_end = environ[i] + strlen(environ[i]) + 1;
		}
	}

	/* Monotonic, so that the rate limiter does not jump with the wall clock. */
	{
		pthread_condattr_t attr;

		pthread_condattr_init(&attr);
		pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
		pthread_cond_init(&ctl.wake, &attr);
		pthread_condattr_destroy(&attr);
	}

	/* Blocked before any thread starts, so that every thread inherits it. */
	sigemptyset(&end_args.sigs);
	sigaddset(&end_args.sigs, SIGINT);
	sigaddset(&end_args.sigs, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &end_args.sigs, NULL);
	end_args.duration = duration;
	/* A vanished controller shows up as a failed write, handled in reply(). */
	signal(SIGPIPE, SIG_IGN);

	workers = calloc(nthreads ? nthreads : 1, sizeof(*workers));
	if (!workers)
		die_oom(nthreads * sizeof(*workers));
	pthread_barrier_init(&start_barrier, NULL, nthreads + 1);
	for (i = 0; i < nthreads; i++) {
		workers[i].rng = seed_mix(seed ^ seed_mix(i));
		err = pthread_create(&workers[i].thread, NULL, worker_main, &workers[i]);
		if (err) {
			fprintf(stderr, "alloc-service: pthread_create: %s\n", strerror(err));
			return 1;
		}
	}
	pthread_barrier_wait(&start_barrier);
	if (churn_ms) {
		pthread_t spawner;

		err = pthread_create(&spawner, NULL, spawner_main, NULL);
		if (err) {
			fprintf(stderr, "alloc-service: pthread_create: %s\n", strerror(err));
			return 1;
		}
		pthread_detach(spawner);
	}

	if (!control) {
		fprintf(stderr, "alloc-service: pid %d, %u threads\n", (int)getpid(), nthreads);
		wait_for_end(&end_args.sigs, duration);
	}

	err = pthread_create(&ender, NULL, end_thread, &end_args);
	if (err) {
		fprintf(stderr, "alloc-service: pthread_create: %s\n", strerror(err));
		return 1;
	}
	reply("ready %d", (int)getpid());
	control_loop();

bad_arg:
	fprintf(stderr, "alloc-service: invalid value '%s' for -%c\n", optarg, c);
	return 2;
}
