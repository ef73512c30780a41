// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * trapfloor: what one bare uprobe hit costs on this machine. Calls a no-op
 * function N times without a probe, then with an empty BPF program attached
 * to it as a uprobe, and prints the difference per call. The no-op starts
 * with "push %r15", the first instruction of jemalloc 5.3.0's
 * prof_malloc_sample_object and prof_free_sampled_object in Debian's build,
 * so the kernel handles (emulates) the probed instruction the same way.
 *
 * The same is then done with heapbpf's own allocation program (the real one,
 * from the build's skeleton, with a consumer polling its ring buffer as
 * heapbpf does) on a stand-in for prof_malloc_sample_object: the difference
 * between the two is what heapbpf's BPF work adds to the trap.
 *
 * Prints one line of JSON per repetition on stdout.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "heapbpf.h"
#include "heapbpf.skel.h"
#include "sampling/probes.h"
#include "trapfloor.skel.h"

void hb_noop(void);
__asm__(".text\n"
	".globl hb_noop\n"
	".type hb_noop, @function\n"
	"hb_noop:\n"
	"	push %r15\n"
	"	pop %r15\n"
	"	ret\n"
	".size hb_noop, .-hb_noop\n");

/*
 * The same call with heapbpf's own allocation program attached: a stand-in
 * for prof_malloc_sample_object(tsd, ptr, size, usize, tctx) whose tctx
 * leads, through jemalloc 5.3.0's offsets, to a backtrace of FRAMES frames
 * (third argument, default FAKE_FRAMES), so the program does all its work:
 * reads of jemalloc's structures and the frames, one ring-buffer record.
 */
void hb_fake_sample(void *tsd, void *ptr, size_t size, size_t usize, void *tctx);
__asm__(".text\n"
	".globl hb_fake_sample\n"
	".type hb_fake_sample, @function\n"
	"hb_fake_sample:\n"
	"	push %r15\n"
	"	pop %r15\n"
	"	ret\n"
	".size hb_fake_sample, .-hb_fake_sample\n");

/*
 * And heapbpf's free program on a stand-in for 5.3.0's
 * prof_free_sampled_object(tsd, usize, prof_info_t *info), the prof_info_t
 * naming the same fake tctx.
 */
void hb_fake_free(void *tsd, size_t usize, void *info);
__asm__(".text\n"
	".globl hb_fake_free\n"
	".type hb_fake_free, @function\n"
	"hb_fake_free:\n"
	"	push %r15\n"
	"	pop %r15\n"
	"	ret\n"
	".size hb_fake_free, .-hb_fake_free\n");

#define FAKE_FRAMES 14 /* default: 8 nested calls + jemalloc's own frames, as in microbench */

/* a gctx as jemalloc 5.3.0 lays it out: bt {vec, len} @104, the frames right after it @120 */
static _Alignas(8) char fake_gctx[120 + 8 * HEAPBPF_MAX_FRAMES];
static uint64_t *const fake_frames = (uint64_t *)(fake_gctx + 120);
static struct {
	void *vec;
	uint32_t len;
} fake_bt = { fake_gctx + 120, FAKE_FRAMES };
static char fake_tctx[256];
static uint64_t fake_info[3]; /* prof_info_t {alloc_time, alloc_tctx, alloc_size} */

enum call_kind { CALL_NOOP, CALL_SAMPLE, CALL_FREE };

static int64_t now_ns(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void calls(long n, enum call_kind kind, int64_t *wall, int64_t *cpu)
{
	int64_t t0 = now_ns(CLOCK_MONOTONIC), c0 = now_ns(CLOCK_THREAD_CPUTIME_ID);

	for (long i = 0; i < n; i++) {
		if (kind == CALL_SAMPLE)
			hb_fake_sample(NULL, fake_tctx, 64, 64, fake_tctx);
		else if (kind == CALL_FREE)
			hb_fake_free(NULL, 64, fake_info);
		else
			hb_noop();
		__asm__ volatile("" ::: "memory");
	}
	*wall = now_ns(CLOCK_MONOTONIC) - t0;
	*cpu = now_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
}

static int silent(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	(void)level;
	(void)fmt;
	(void)ap;
	return 0;
}

static volatile int consuming = 1;
static long consumed;

static int on_event(void *ctx, void *data, size_t len)
{
	(void)ctx;
	(void)data;
	(void)len;
	consumed++;
	return 0;
}

/* heapbpf's collector side, reduced to its polling: another thread, as heapbpf is another process */
static void *consumer(void *arg)
{
	struct ring_buffer *rb = arg;

	while (consuming)
		ring_buffer__poll(rb, PROBES_POLL_MS);
	ring_buffer__consume(rb);
	return NULL;
}

/*
 * The kernel's own count and time of a program's runs (bpf_stats): zero
 * unless BPF statistics are enabled while it runs (bench/bpfstats.py).
 */
static void run_stats(const struct bpf_program *prog, uint64_t *cnt, uint64_t *ns)
{
	struct bpf_prog_info info;
	__u32 len = sizeof(info);

	memset(&info, 0, sizeof(info));
	*cnt = *ns = 0;
	if (!bpf_obj_get_info_by_fd(bpf_program__fd(prog), &info, &len)) {
		*cnt = info.run_cnt;
		*ns = info.run_time_ns;
	}
}

static int setup_heapbpf(struct heapbpf_bpf **out, struct ring_buffer **rbp)
{
	struct heapbpf_bpf *hs = heapbpf_bpf__open();
	const size_t ring = 16u << 20; /* heapbpf's default */

	if (!hs)
		return -errno;
	/* jemalloc 5.3.0's positions and offsets (user/jemalloc/layout.c), with our fake structures */
	hs->rodata->layout.alloc_ptr_arg = 1;
	hs->rodata->layout.alloc_size_arg = 2;
	hs->rodata->layout.alloc_usize_arg = 3;
	hs->rodata->layout.alloc_tctx_arg = 4;
	hs->rodata->layout.free_ptr_arg = HEAPBPF_ARG_NONE;
	hs->rodata->layout.free_usize_arg = 1;
	hs->rodata->layout.free_info_arg = 2;
	hs->rodata->layout.free_tctx_arg = HEAPBPF_ARG_NONE;
	hs->rodata->layout.info_time_off = 0;
	hs->rodata->layout.info_tctx_off = 8;
	hs->rodata->layout.info_size_off = 16;
	hs->rodata->layout.info_has_time = 1;
	hs->rodata->layout.tctx_gctx_off = 96;
	hs->rodata->layout.gctx_bt_off = 104;
	hs->rodata->layout.bt_vec_off = 0;
	hs->rodata->layout.bt_len_off = 8;
	hs->rodata->wakeup_bytes = ring / 4;
	if (bpf_map__set_max_entries(hs->maps.events, ring) || heapbpf_bpf__load(hs)) {
		heapbpf_bpf__destroy(hs);
		return -EINVAL;
	}
	*rbp = ring_buffer__new(bpf_map__fd(hs->maps.events), on_event, NULL, NULL);
	if (!*rbp) {
		heapbpf_bpf__destroy(hs);
		return -errno;
	}
	*out = hs;
	return 0;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? strtol(argv[1], NULL, 0) : 200000;
	int reps = argc > 2 ? atoi(argv[2]) : 5;
	long frames = argc > 3 ? strtol(argv[3], NULL, 0) : FAKE_FRAMES;
	struct trapfloor_bpf *skel;
	struct heapbpf_bpf *hs = NULL;
	struct ring_buffer *rb = NULL;
	pthread_t cons;
	LIBBPF_OPTS(bpf_uprobe_opts, uo, .func_name = "hb_noop");
	LIBBPF_OPTS(bpf_uprobe_opts, fo, .func_name = "hb_fake_sample");
	LIBBPF_OPTS(bpf_uprobe_opts, xo, .func_name = "hb_fake_free");
	int err = 0;

	if (n <= 0 || reps <= 0 || frames < 1 || frames > HEAPBPF_MAX_FRAMES) {
		fprintf(stderr, "usage: trapfloor [CALLS [REPS [FRAMES]]]\n");
		return 2;
	}
	fake_bt.len = frames;
	for (int i = 0; i < HEAPBPF_MAX_FRAMES; i++)
		fake_frames[i] = 0x401000 + 0x40 * i;
	*(void **)(fake_tctx + 96) = fake_gctx;
	memcpy(fake_gctx + 104, &fake_bt, sizeof(fake_bt));
	fake_info[0] = 1;
	fake_info[1] = (uint64_t)(uintptr_t)fake_tctx;
	fake_info[2] = 64;
	libbpf_set_print(silent);
	skel = trapfloor_bpf__open_and_load();
	if (!skel || setup_heapbpf(&hs, &rb)) {
		fprintf(stderr, "trapfloor: cannot load the BPF programs: %s (run as root)\n",
			strerror(errno));
		return 1;
	}
	pthread_create(&cons, NULL, consumer, rb);
	for (int r = 0; r < reps && !err; r++) {
		int64_t w0, c0, w1, c1, fw0, fc0, fw1, fc1;
		struct bpf_link *l, *fl;
		uint64_t hits0 = hs->bss->counters.alloc_hits;
		uint64_t ecnt, ens, acnt, ans, xcnt, xns;
		int64_t xw, xc;

		(void)fw0;
		(void)fw1;

		calls(n, CALL_NOOP, &w0, &c0);
		l = bpf_program__attach_uprobe_opts(skel->progs.trapfloor_empty, 0,
						    "/proc/self/exe", 0, &uo);
		if (!l) {
			err = -errno;
			fprintf(stderr, "trapfloor: cannot attach the uprobe: %s\n",
				strerror(-err));
			break;
		}
		calls(n, CALL_NOOP, &w1, &c1);
		bpf_link__destroy(l);

		calls(n, CALL_SAMPLE, &fw0, &fc0);
		fl = bpf_program__attach_uprobe_opts(hs->progs.heapbpf_alloc, 0, "/proc/self/exe",
						     0, &fo);
		if (!fl) {
			err = -errno;
			fprintf(stderr, "trapfloor: cannot attach heapbpf's program: %s\n",
				strerror(-err));
			break;
		}
		calls(n, CALL_SAMPLE, &fw1, &fc1);
		bpf_link__destroy(fl);
		/* the free program: its kernel-measured time only */
		fl = bpf_program__attach_uprobe_opts(hs->progs.heapbpf_free, 0, "/proc/self/exe", 0,
						     &xo);
		if (!fl) {
			err = -errno;
			fprintf(stderr, "trapfloor: cannot attach heapbpf's free program: %s\n",
				strerror(-err));
			break;
		}
		calls(n, CALL_FREE, &xw, &xc);
		bpf_link__destroy(fl);
		run_stats(skel->progs.trapfloor_empty, &ecnt, &ens);
		run_stats(hs->progs.heapbpf_alloc, &acnt, &ans);
		run_stats(hs->progs.heapbpf_free, &xcnt, &xns);
		printf("{\"calls\": %ld, \"base_wall_ns\": %" PRId64 ", \"probe_wall_ns\": %" PRId64
		       ", \"base_cpu_ns\": %" PRId64 ", \"probe_cpu_ns\": %" PRId64
		       ", \"trap_ns\": %.1f, \"heapbpf_ns\": %.1f, \"heapbpf_hits\": %" PRIu64
		       ", \"heapbpf_read_faults\": %" PRIu64 ", \"frames\": %ld"
		       ", \"empty_run_cnt\": %" PRIu64 ", \"empty_run_ns\": %" PRIu64
		       ", \"alloc_run_cnt\": %" PRIu64 ", \"alloc_run_ns\": %" PRIu64
		       ", \"free_run_cnt\": %" PRIu64 ", \"free_run_ns\": %" PRIu64 "}\n",
		       n, w0, w1, c0, c1, (double)(c1 - c0) / n, (double)(fc1 - fc0) / n,
		       (uint64_t)(hs->bss->counters.alloc_hits - hits0),
		       (uint64_t)hs->bss->counters.read_faults, frames, ecnt, ens, acnt, ans, xcnt,
		       xns);
		fflush(stdout);
	}
	consuming = 0;
	pthread_join(cons, NULL);
	ring_buffer__free(rb);
	heapbpf_bpf__destroy(hs);
	trapfloor_bpf__destroy(skel);
	return err ? 1 : 0;
}
