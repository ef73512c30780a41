/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The one header shared by the BPF program and the user-space collector:
 * plain __u32/__u64 types, no includes, so it compiles on both sides.
 */
#ifndef __HEAPBPF_H
#define __HEAPBPF_H

/* jemalloc's PROF_BT_MAX (all 5.x versions). */
#define HEAPBPF_MAX_FRAMES 128

/* An argument index that the jemalloc version does not pass. */
#define HEAPBPF_ARG_NONE 0xff

enum heapbpf_event_type {
	HEAPBPF_EV_ALLOC = 1,
	HEAPBPF_EV_FREE = 2,
	HEAPBPF_EV_FORK = 3, /* a tracked process made a new task (a process or a thread) */
	HEAPBPF_EV_EXEC = 4, /* a tracked process called exec: its jemalloc is a new one */
	HEAPBPF_EV_OOM = 5,  /* the kernel chose a tracked process as an OOM victim */
};

/* Processes heapbpf follows through fork at once: the target and its descendants. */
#define HEAPBPF_MAX_TRACKED 8192

/*
 * Where jemalloc keeps what the probes read, for one jemalloc version.
 * Argument indices are 0-based (x86-64 SysV: rdi, rsi, rdx, rcx, r8, r9).
 * Filled by user/jemalloc/layout.c, handed to BPF through .rodata.
 */
struct heapbpf_layout {
	/* prof_malloc_sample_object(...) */
	__u8 alloc_ptr_arg;
	__u8 alloc_size_arg;
	__u8 alloc_usize_arg;
	__u8 alloc_tctx_arg;
	/* prof_free_sampled_object(...) */
	__u8 free_ptr_arg;
	__u8 free_usize_arg;
	__u8 free_info_arg; /* prof_info_t *, or NONE where the tctx is passed */
	__u8 free_tctx_arg; /* prof_tctx_t *, or NONE where prof_info_t is passed */
	/* offsets inside jemalloc's structs */
	__u32 tctx_gctx_off; /* prof_tctx_t.gctx */
	__u32 gctx_bt_off;   /* prof_gctx_t.bt */
	__u32 bt_vec_off;    /* prof_bt_t.vec */
	__u32 bt_len_off;    /* prof_bt_t.len */
	__u32 info_time_off; /* prof_info_t.alloc_time (nstime_t, ns) */
	__u32 info_tctx_off; /* prof_info_t.alloc_tctx */
	__u32 info_size_off; /* prof_info_t.alloc_size */
	__u32 info_has_time; /* 1 when prof_info_t carries alloc_time */
};

/* One sampled allocation, as prof_malloc_sample_object saw it. */
struct heapbpf_alloc_event {
	__u32 type; /* HEAPBPF_EV_ALLOC */
	__u32 pid;
	__u32 tid;
	__u32 nframes; /* frames[] entries filled, <= HEAPBPF_MAX_FRAMES */
	__u64 ts;      /* bpf_ktime_get_ns() (CLOCK_MONOTONIC) */
	/*
	 * CLOCK_MONOTONIC_COARSE (jemalloc's clock), read from the target's
	 * vDSO data where frees are matched by jemalloc's alloc_time (5.3.0);
	 * 0 where not read
	 */
	__u64 coarse;
	__u64 ptr;
	__u64 size;  /* requested size; 0 where the version does not pass it */
	__u64 usize; /* usable size: what jemalloc counts */
	__u64 tctx;
	__u32 bt_len;			  /* jemalloc's bt.len before clamping */
	__u32 flags;			  /* HEAPBPF_F_* */
	__u64 frames[HEAPBPF_MAX_FRAMES]; /* return addresses, leaf first */
};

/* Bytes of an allocation record with n frames, as sent (n <= HEAPBPF_MAX_FRAMES). */
#define HEAPBPF_ALLOC_EVENT_SIZE(n) (72 + 8 * (n))

/* The free of a sampled object, as prof_free_sampled_object saw it. */
struct heapbpf_free_event {
	__u32 type; /* HEAPBPF_EV_FREE */
	__u32 pid;
	__u32 tid;
	__u32 flags; /* HEAPBPF_F_* */
	__u64 ts;
	__u64 ptr; /* 0 where the version does not pass it (5.3.0) */
	__u64 usize;
	__u64 tctx;
	__u64 alloc_time_ns; /* jemalloc's alloc_time (CLOCK_MONOTONIC_COARSE); 0 if unknown */
	__u64 alloc_size;    /* prof_info_t.alloc_size; 0 if unknown */
};

/*
 * A fork or an exec in the tracked process tree. A fork copies the parent's
 * prof_active byte, and uprobes filtered to the parent do not follow the
 * child: user space restores the flag in every child forked while it was on.
 */
struct heapbpf_proc_event {
	__u32 type;  /* HEAPBPF_EV_FORK or HEAPBPF_EV_EXEC */
	__u32 pid;   /* FORK: the parent process; EXEC: the process that exec'ed */
	__u32 child; /* FORK: the new task's id; EXEC: 0 */
	__u32 pad;
	__u64 ts;
};

/*
 * Where the oom/mark_victim tracepoint's record keeps its fields, read by
 * user space from the tracepoint's format file (no CO-RE here); a field the
 * kernel does not have is at offset 0 with size 0 and reads as 0.
 */
struct heapbpf_oom_offsets {
	__u32 pid;
	__u32 total_vm, anon_rss, file_rss, shmem_rss, pgtables; /* unsigned long, kB */
	__u32 oom_score_adj;					 /* short */
	__u32 has_figures; /* 1: the kB fields above are there (kernels since 6.1 or so) */
};

/*
 * The kernel chose a tracked process as the victim of an OOM kill: it dies
 * within milliseconds. The figures are the tracepoint's, in kB.
 */
struct heapbpf_oom_event {
	__u32 type; /* HEAPBPF_EV_OOM */
	__u32 pid;
	__u64 ts; /* CLOCK_MONOTONIC */
	__u64 total_vm_kb, anon_rss_kb, file_rss_kb, shmem_rss_kb, pgtables_kb;
	__s32 oom_score_adj;
	__u32 has_figures;
};

/* flags */
#define HEAPBPF_F_READ_FAULT 0x1 /* a bpf_probe_read_user of jemalloc memory failed */
#define HEAPBPF_F_TRUNCATED  0x2 /* bt.len was larger than HEAPBPF_MAX_FRAMES */

/*
 * Parts of the sampling programs that bench/bpfstats.py leaves out, one
 * variant at a time, to measure what each costs (bench_skip in .rodata,
 * in build/bench/heapbpf's object only: HEAPBPF_BENCH).
 */
#define HEAPBPF_PART_COUNTERS 0x01 /* the hit counters' atomic adds (count()) */
#define HEAPBPF_PART_CLOCK    0x02 /* bpf_ktime_get_ns */
#define HEAPBPF_PART_READS    0x04 /* bpf_probe_read_user of jemalloc's memory */
#define HEAPBPF_PART_RINGBUF  0x08 /* the ring-buffer record (reserve/submit, output) */
#define HEAPBPF_PART_QUERY    0x10 /* bpf_ringbuf_query for the wake-up decision */
#define HEAPBPF_PART_ALL      0x20 /* everything: the program returns at once */
/* Not a part: user space attaches both programs twice (every hit runs each twice). */
#define HEAPBPF_PART_TWICE 0x100

/* Counters the BPF side keeps in .bss; printed by the collector at exit. */
struct heapbpf_counters {
	__u64 alloc_hits;
	__u64 free_hits;
	__u64 alloc_drops; /* ring buffer full */
	__u64 free_drops;
	__u64 read_faults;
	/*
	 * The layout's activity function (5.2.1: malloc_default), attached only
	 * while heapbpf checks for the late-activation bug: hits and the bytes
	 * asked for (its first argument).
	 */
	__u64 activity_hits;
	__u64 activity_bytes;
	__u64 proc_drops;      /* fork/exec events lost (ring buffer full) */
	__u64 untracked_forks; /* children not tracked: HEAPBPF_MAX_TRACKED reached */
	__u64 oom_drops;       /* OOM-victim events lost (ring buffer full) */
};

_Static_assert(sizeof(struct heapbpf_layout) == 8 + 8 * 4, "layout size");
_Static_assert(sizeof(struct heapbpf_alloc_event) == 72 + 8 * HEAPBPF_MAX_FRAMES,
	       "alloc event size");
_Static_assert(sizeof(struct heapbpf_free_event) == 64, "free event size");
_Static_assert(sizeof(struct heapbpf_proc_event) == 24, "proc event size");
_Static_assert(sizeof(struct heapbpf_oom_event) == 64, "oom event size");

#endif /* __HEAPBPF_H */
