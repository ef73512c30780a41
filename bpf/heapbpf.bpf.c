// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * heapbpf's kernel side: two uprobes on jemalloc's sampling slow path.
 *
 * prof_malloc_sample_object() runs once per sampled allocation, after
 * jemalloc has unwound the stack itself (libgcc DWARF unwinder) and stored
 * it in tctx->gctx->bt. We read that backtrace instead of calling
 * bpf_get_stack(), which needs frame pointers. prof_free_sampled_object()
 * runs once per free of a sampled object. No uretprobes: a uretprobe on a
 * function on the stack while jemalloc unwinds breaks jemalloc's unwinder.
 */
/*
 * Plain field access, no CO-RE: heapbpf reads only user-mode registers from
 * pt_regs, whose layout is the architecture's ABI. Without CO-RE relocations
 * libbpf need not parse the kernel's BTF at load time (a good part of the
 * attach latency).
 */
#define BPF_NO_PRESERVE_ACCESS_INDEX
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "heapbpf.h"
#include "heapbpf_args.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

const volatile struct heapbpf_layout layout = {};
/*
 * Wake the collector only once this much is waiting in the ring buffer (0:
 * on every record); it also polls on a timer. A wake-up per record costs
 * more than the uprobe trap itself on a VM (an IPI per record).
 */
const volatile __u64 wakeup_bytes = 0;
/*
 * Offset of child_pid in the sched_process_fork tracepoint's record, read by
 * user space from the tracepoint's format file: it moved between kernels
 * (6.x made the comm fields __data_loc), and without CO-RE nothing else says.
 */
const volatile __u32 fork_child_pid_off = 0;
/* The same for oom/mark_victim's fields (heapbpf watch). */
const volatile struct heapbpf_oom_offsets oom_off = {};

struct heapbpf_counters counters = {};

/*
 * bench/bpfstats.py's decomposition: parts of the two sampling programs
 * left out (HEAPBPF_PART_*), to measure what each costs in a real process
 * (bpf_stats). Only in build/bench/heapbpf's object (HEAPBPF_BENCH), set
 * through HEAPBPF_BENCH_PARTS; heapbpf's own object has no such knob.
 */
#ifdef HEAPBPF_BENCH
const volatile __u32 bench_skip = 0;
#define SKIPPED(part) (bench_skip & (part))
#else
#define SKIPPED(part) 0
#endif

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 16 << 20); /* resized by user space before load */
} events SEC(".maps");

/* The target and every process forked from it (or from those) while heapbpf runs. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, HEAPBPF_MAX_TRACKED);
	__type(key, __u32);
	__type(value, __u8);
} tracked SEC(".maps");

/*
 * 1 when the sampling uprobes are attached to whole object files (a session
 * of several targets: one uprobe per file instead of one per pid, whose
 * detach the kernel serializes at about 0.1 s each): only the processes in
 * `sampled` count, every other process mapping the file is ignored.
 */
const volatile __u8 filter_pids = 0;

/*
 * The processes whose samples are collected (targets, followed children),
 * with filter_pids; each one's coarse clock address (coarse_at), or 0.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, HEAPBPF_MAX_TRACKED);
	__type(key, __u32);
	__type(value, __u64);
} sampled SEC(".maps");

/*
 * Where jemalloc 5.3.0's clock, CLOCK_MONOTONIC_COARSE, is in the sampled
 * process's memory: the vDSO's {u64 sec, u64 nsec} in its [vvar] page
 * (user/sampling/vclock.c), read at the probe so that user space can match a
 * free, which carries jemalloc's reading of that clock just after the probe,
 * to its sample (bpf_ktime_get_coarse_ns is not allowed in uprobes). 0: not
 * read (another version, or not known). Without filter_pids, the one for the
 * target and its forked children (their vDSO is where their parent's is),
 * set by user space at attach; with it, each process's value in `sampled`.
 */
__u64 coarse_at = 0;

#define NOT_SAMPLED (~0ULL)

/* NOT_SAMPLED for a process whose samples are not collected; else its coarse_at. */
static __always_inline __u64 sampled_clock(__u64 id)
{
	__u32 tgid = id >> 32;
	__u64 *v;

	if (!filter_pids)
		return coarse_at;
	v = bpf_map_lookup_elem(&sampled, &tgid);
	return v ? *v : NOT_SAMPLED;
}

/*
 * Where the two sampling programs keep what they learn: in their own ring
 * buffer record, reserved first, and in registers, never in memory another
 * task can write. A uprobe's program runs with migration off but
 * preemptible (since 6.0, sleepable uprobes), and kernels that preempt
 * kernel code (preempt=full, or lazy, sid's 7.x default) do preempt it:
 * another task on the same CPU then runs the same program halfway through.
 * A per-CPU record (what the allocation program built its record in up to
 * here) is written over then: on 7.2, a few records of a run carried
 * another's backtrace or a prof_tctx_t's bytes as frames. The BPF stack is
 * no refuge either: since 6.13 a program of this type whose stack is 64
 * bytes or more gets a per-CPU private stack (the verifier's
 * PRIV_STACK_ADAPTIVE for kprobes, which assumes kprobes' recursion check;
 * uprobes have none). The programs therefore keep their stack under 48
 * bytes (the build checks it: scripts/bpf-stack.sh) and what does not fit
 * in registers in the record itself.
 *
 * The decomposition's stand-in for the ring buffer (HEAPBPF_PART_RINGBUF,
 * build/bench/heapbpf only: the records written here and never sent) is
 * per-CPU: it measures costs, its records are never read.
 */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct heapbpf_alloc_event);
} scratch SEC(".maps");

/*
 * prof_bt_t {vec, len} and the first frames in one read: every 5.x keeps a
 * gctx's frames right after its prof_bt_t (bt.vec == gctx->vec), so one
 * bpf_probe_read_user brings both for a backtrace of up to BT_CHUNK_FRAMES
 * (a longer one takes a second read, from bt.vec). The piece may reach past
 * the gctx into the memory next to it; nothing past bt.len is used, and a
 * piece that faults is read the old way. Measured on trapfloor's 14-frame
 * stand-in: 310 -> 266 ns per hit; with 32 frames a piece the larger copy
 * ate the gain. The piece is read into the record from its tctx field on
 * (tctx, bt_len and flags hold prof_bt_t for a moment).
 */
#define BT_CHUNK_FRAMES 16
#define BT_CHUNK_BYTES	(16 + 8 * BT_CHUNK_FRAMES)

_Static_assert(__builtin_offsetof(struct heapbpf_alloc_event, frames) -
			       __builtin_offsetof(struct heapbpf_alloc_event, tctx) ==
		       16,
	       "prof_bt_t {vec, len} lands on tctx, bt_len and flags");

static __always_inline void count(__u64 *c)
{
	if (SKIPPED(HEAPBPF_PART_COUNTERS))
		return;
	__sync_fetch_and_add(c, 1);
}

static __always_inline __u64 submit_flags(void)
{
	if (SKIPPED(HEAPBPF_PART_QUERY))
		return BPF_RB_NO_WAKEUP;
	if (!wakeup_bytes)
		return 0;
	return bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= wakeup_bytes ? BPF_RB_FORCE_WAKEUP
									     : BPF_RB_NO_WAKEUP;
}

/* A record of size bytes in the ring buffer (the decomposition: the scratch record). */
static __always_inline void *reserve(__u64 size)
{
	__u32 zero = 0;

	if (SKIPPED(HEAPBPF_PART_RINGBUF))
		return bpf_map_lookup_elem(&scratch, &zero);
	return bpf_ringbuf_reserve(&events, size, 0);
}

static __always_inline void submit(void *e)
{
	if (!SKIPPED(HEAPBPF_PART_RINGBUF))
		bpf_ringbuf_submit(e, submit_flags());
}

/*
 * At most cap of the n frames at vec into e's, its count set; a fault is
 * flagged and counted, and leaves none. The barriers keep the bound the
 * verifier checks the read's size against.
 */
static __always_inline void read_frames(struct heapbpf_alloc_event *e, __u64 vec, __u64 n,
					__u64 cap)
{
	asm volatile("" : "+r"(n));
	if (n > cap)
		n = cap;
	asm volatile("" : "+r"(n));
	if (bpf_probe_read_user(e->frames, n * sizeof(__u64), (void *)vec)) {
		e->flags |= HEAPBPF_F_READ_FAULT;
		count(&counters.read_faults);
		n = 0;
	}
	e->nframes = n;
}

/*
 * The record of an allocation whose backtrace did not fit the first one's 16
 * frames: one with room for cap of them (a constant at each call: the
 * verifier needs the reservation's size), its header copied from the first
 * (which is then discarded) and the frames read from vec. 1 if sent.
 */
static __always_inline int send_longer(struct heapbpf_alloc_event *first, __u64 vec, __u64 n,
				       const __u32 cap)
{
	struct heapbpf_alloc_event *e = reserve(HEAPBPF_ALLOC_EVENT_SIZE(cap));
	__u64 *to, *from = (__u64 *)first;

	if (!e)
		return 0;
	to = (__u64 *)e;
#pragma unroll
	for (int i = 0; i < HEAPBPF_ALLOC_EVENT_SIZE(0) / 8; i++)
		to[i] = from[i];
	read_frames(e, vec, n, cap);
	submit(e);
	return 1;
}

SEC("uprobe")
int BPF_KPROBE(heapbpf_alloc)
{
	struct heapbpf_alloc_event *e;
	struct heapbpf_args *args;
	__u64 id, tctx, bt, vec, clock;
	__u32 len, flags = 0;
	long err;

	if (SKIPPED(HEAPBPF_PART_ALL))
		return 0;
	id = bpf_get_current_pid_tgid();
	clock = sampled_clock(id);
	if (clock == NOT_SAMPLED)
		return 0;
	count(&counters.alloc_hits);
	/* room for 16 frames, the common case; a longer backtrace takes a second record */
	e = reserve(HEAPBPF_ALLOC_EVENT_SIZE(BT_CHUNK_FRAMES));
	if (!e) {
		count(&counters.alloc_drops);
		return 0;
	}
	/*
	 * jemalloc 5.3.0's clock as its clock_gettime would read it now: {sec,
	 * nsec}. Before the fine time, so that it is never the later of the two:
	 * in a virtual machine, a vCPU stalled between the reads while another
	 * ticks made it 2 to 15 ms ahead (bullseye's and bookworm's kernels under
	 * qemu, the host busy).
	 */
	if (clock && !SKIPPED(HEAPBPF_PART_CLOCK) &&
	    !bpf_probe_read_user(&e->coarse, 2 * sizeof(__u64), (void *)clock))
		e->coarse = e->coarse * 1000000000ULL + e->ptr;
	else
		e->coarse = 0;
	e->ts = SKIPPED(HEAPBPF_PART_CLOCK) ? 0 : bpf_ktime_get_ns();
	/* the registers, in the frames' place until the backtrace comes */
	args = (struct heapbpf_args *)e->frames;
	heapbpf_read_args(ctx, args);
	e->type = HEAPBPF_EV_ALLOC;
	e->pid = id >> 32;
	e->tid = (__u32)id;
	e->ptr = heapbpf_arg(args, layout.alloc_ptr_arg);
	e->size = heapbpf_arg(args, layout.alloc_size_arg);
	e->usize = heapbpf_arg(args, layout.alloc_usize_arg);
	tctx = heapbpf_arg(args, layout.alloc_tctx_arg);

	/* tctx->gctx->bt: the backtrace jemalloc already took for this sample */
	if (SKIPPED(HEAPBPF_PART_READS)) {
		/* as if a 14-frame backtrace had come with prof_bt_t */
		e->tctx = tctx;
		e->bt_len = 14;
		e->nframes = 14;
		e->flags = 0;
		submit(e);
		return 0;
	}
	err = bpf_probe_read_user(&e->frames[6], sizeof(__u64),
				  (void *)(tctx + layout.tctx_gctx_off));
	bt = e->frames[6] + layout.gctx_bt_off;
	len = 0;
	vec = 0;
	if (err) {
		/* nothing more to read */
	} else if (layout.bt_vec_off == 0 && layout.bt_len_off == 8 &&
		   !bpf_probe_read_user(&e->tctx, BT_CHUNK_BYTES, (void *)bt)) {
		vec = e->tctx;
		len = e->bt_len;
		if (vec == bt + 16 && len <= BT_CHUNK_FRAMES) {
			/* the frames came with prof_bt_t: the record is whole */
			e->tctx = tctx;
			e->flags = 0;
			e->nframes = len;
			submit(e);
			return 0;
		}
	} else if (layout.bt_len_off == layout.bt_vec_off + 8) {
		/* prof_bt_t {vec, len} in one read: every helper call costs */
		err = bpf_probe_read_user(&e->tctx, 12, (void *)(bt + layout.bt_vec_off));
		vec = e->tctx;
		len = e->bt_len;
	} else {
		err = bpf_probe_read_user(&e->tctx, sizeof(__u64),
					  (void *)(bt + layout.bt_vec_off));
		err |= bpf_probe_read_user(&e->bt_len, sizeof(__u32),
					   (void *)(bt + layout.bt_len_off));
		vec = e->tctx;
		len = e->bt_len;
	}
	e->tctx = tctx;
	e->bt_len = err ? 0 : len;
	e->nframes = 0;
	if (err) {
		flags = HEAPBPF_F_READ_FAULT;
		len = 0;
		count(&counters.read_faults);
	} else if (len > HEAPBPF_MAX_FRAMES) {
		flags = HEAPBPF_F_TRUNCATED;
		len = HEAPBPF_MAX_FRAMES;
	}
	e->flags = flags;
	if (len > BT_CHUNK_FRAMES) {
		/* sized to the backtrace, in classes: a full record is 1096 bytes */
		int sent;

		if (len <= 32)
			sent = send_longer(e, vec, len, 32);
		else if (len <= 64)
			sent = send_longer(e, vec, len, 64);
		else
			sent = send_longer(e, vec, len, HEAPBPF_MAX_FRAMES);
		if (!SKIPPED(HEAPBPF_PART_RINGBUF))
			bpf_ringbuf_discard(e, BPF_RB_NO_WAKEUP);
		if (!sent)
			count(&counters.alloc_drops);
		return 0;
	}
	/* up to 16 frames, not where prof_bt_t keeps them in a gctx */
	if (len) {
		read_frames(e, vec, len, BT_CHUNK_FRAMES);
	}
	submit(e);
	return 0;
}

/* prof_info_t up to its last field read, in one piece of at most 32 bytes. */
static __always_inline long read_info(struct heapbpf_info *info, __u64 addr)
{
	__u32 len = layout.info_tctx_off;

	if (layout.info_size_off > len)
		len = layout.info_size_off;
	if (layout.info_has_time && layout.info_time_off > len)
		len = layout.info_time_off;
	len += sizeof(__u64);
	/* no version has prof_info_t's fields further in: say so rather than read less */
	if (len > sizeof(*info))
		return -1;
	return bpf_probe_read_user(info, len, (void *)addr);
}

_Static_assert(sizeof(struct heapbpf_free_event) -
			       __builtin_offsetof(struct heapbpf_free_event, ts) ==
		       sizeof(struct heapbpf_args),
	       "the registers fit the free record from its ts field on");
_Static_assert(sizeof(struct heapbpf_free_event) -
			       __builtin_offsetof(struct heapbpf_free_event, usize) ==
		       sizeof(struct heapbpf_info),
	       "prof_info_t fits the free record from its usize field on");

SEC("uprobe")
int BPF_KPROBE(heapbpf_free)
{
	struct heapbpf_free_event *e;
	struct heapbpf_args *args;
	__u64 id, ptr, usize, tctx, info_at, ts, alloc_time = 0, alloc_size = 0;
	__u32 flags = 0;

	if (SKIPPED(HEAPBPF_PART_ALL))
		return 0;
	id = bpf_get_current_pid_tgid();
	if (sampled_clock(id) == NOT_SAMPLED)
		return 0;
	count(&counters.free_hits);
	ts = SKIPPED(HEAPBPF_PART_CLOCK) ? 0 : bpf_ktime_get_ns();
	e = reserve(sizeof(*e));
	if (!e) {
		count(&counters.free_drops);
		return 0;
	}
	/* the registers in the record, from ts on, for a moment */
	args = (struct heapbpf_args *)&e->ts;
	heapbpf_read_args(ctx, args);
	ptr = heapbpf_arg(args, layout.free_ptr_arg);
	usize = heapbpf_arg(args, layout.free_usize_arg);
	tctx = heapbpf_arg(args, layout.free_tctx_arg);
	info_at = heapbpf_arg(args, layout.free_info_arg);
	if (layout.free_info_arg != HEAPBPF_ARG_NONE && !SKIPPED(HEAPBPF_PART_READS)) {
		/* prof_info_t in one read (every helper call costs), into the record from usize on */
		struct heapbpf_info *info = (struct heapbpf_info *)&e->usize;

		if (read_info(info, info_at)) {
			flags = HEAPBPF_F_READ_FAULT;
			count(&counters.read_faults);
		} else {
			tctx = heapbpf_info_field(info, layout.info_tctx_off);
			alloc_size = heapbpf_info_field(info, layout.info_size_off);
			if (layout.info_has_time)
				alloc_time = heapbpf_info_field(info, layout.info_time_off);
		}
	}
	e->type = HEAPBPF_EV_FREE;
	e->pid = id >> 32;
	e->tid = (__u32)id;
	e->flags = flags;
	e->ts = ts;
	e->ptr = ptr;
	e->usize = usize;
	e->tctx = tctx;
	e->alloc_time_ns = alloc_time;
	e->alloc_size = alloc_size;
	submit(e);
	return 0;
}

/*
 * Entry of jemalloc's allocation slow path (5.2.1: malloc_default(size)),
 * attached for a few seconds at most: with no sample in that time although
 * this saw plenty of bytes, jemalloc is allocating but not sampling.
 */
/* The bytes of heapbpf_activity, per process: each target's late-activation check is its own. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, HEAPBPF_MAX_TRACKED);
	__type(key, __u32);
	__type(value, __u64);
} activity SEC(".maps");

SEC("uprobe")
int BPF_KPROBE(heapbpf_activity)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	__u64 size = PT_REGS_PARM1(ctx), *bytes;

	count(&counters.activity_hits);
	__sync_fetch_and_add(&counters.activity_bytes, size);
	bytes = bpf_map_lookup_elem(&activity, &tgid);
	if (bytes)
		__sync_fetch_and_add(bytes, size);
	else
		/* two threads' first calls at once: one's bytes lost, of thousands of calls */
		bpf_map_update_elem(&activity, &tgid, &size, BPF_NOEXIST);
	return 0;
}

static __always_inline void proc_event(__u32 type, __u32 pid, __u32 child)
{
	struct heapbpf_proc_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);

	if (!e) {
		count(&counters.proc_drops);
		return;
	}
	e->type = type;
	e->pid = pid;
	e->child = child;
	e->pad = 0;
	e->ts = bpf_ktime_get_ns();
	/* rare, and user space acts on it: wake it now */
	bpf_ringbuf_submit(e, 0);
}

/*
 * Every fork (and thread creation) in the system passes here; only those of
 * tracked processes go further. The new task is tracked at once, before it
 * can fork again; user space forgets it again when it turns out a thread.
 */
SEC("tracepoint/sched/sched_process_fork")
int heapbpf_fork(void *ctx)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32, child = 0;
	__u8 one = 1;

	if (!bpf_map_lookup_elem(&tracked, &tgid))
		return 0;
	if (bpf_probe_read_kernel(&child, sizeof(child), ctx + fork_child_pid_off) || !child)
		return 0;
	if (bpf_map_update_elem(&tracked, &child, &one, BPF_ANY))
		count(&counters.untracked_forks);
	proc_event(HEAPBPF_EV_FORK, tgid, child);
	return 0;
}

/* A tracked process that calls exec gets a fresh jemalloc: no longer ours to restore. */
SEC("tracepoint/sched/sched_process_exec")
int heapbpf_exec(void *ctx)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;

	if (!bpf_map_lookup_elem(&tracked, &tgid))
		return 0;
	bpf_map_delete_elem(&tracked, &tgid);
	proc_event(HEAPBPF_EV_EXEC, tgid, 0);
	return 0;
}

/* An unsigned long field of a tracepoint record at off; 0 when the kernel has none (off 0). */
static __always_inline __u64 tp_ulong(void *ctx, __u32 off)
{
	__u64 v = 0;

	if (off)
		bpf_probe_read_kernel(&v, sizeof(v), ctx + off);
	return v;
}

/*
 * heapbpf watch: the OOM killer chose a victim. It runs in whatever task
 * triggered the kill, so the victim is the record's pid, not the current
 * task. A tracked victim's figures go to user space at once: the process
 * is gone a few milliseconds later, and its in-use profile is what was
 * collected up to this record.
 */
SEC("tracepoint/oom/mark_victim")
int heapbpf_oom(void *ctx)
{
	struct heapbpf_oom_event *e;
	__u32 pid = 0;
	__s16 adj = 0;

	if (bpf_probe_read_kernel(&pid, sizeof(pid), ctx + oom_off.pid) || !pid)
		return 0;
	if (!bpf_map_lookup_elem(&tracked, &pid))
		return 0;
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(&counters.oom_drops);
		return 0;
	}
	e->type = HEAPBPF_EV_OOM;
	e->pid = pid;
	e->ts = bpf_ktime_get_ns();
	e->total_vm_kb = tp_ulong(ctx, oom_off.total_vm);
	e->anon_rss_kb = tp_ulong(ctx, oom_off.anon_rss);
	e->file_rss_kb = tp_ulong(ctx, oom_off.file_rss);
	e->shmem_rss_kb = tp_ulong(ctx, oom_off.shmem_rss);
	e->pgtables_kb = tp_ulong(ctx, oom_off.pgtables);
	if (oom_off.oom_score_adj)
		bpf_probe_read_kernel(&adj, sizeof(adj), ctx + oom_off.oom_score_adj);
	e->oom_score_adj = adj;
	e->has_figures = oom_off.has_figures;
	bpf_ringbuf_submit(e, 0);
	return 0;
}
