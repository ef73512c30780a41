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

/* The processes whose samples are collected (targets, followed children), with filter_pids. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, HEAPBPF_MAX_TRACKED);
	__type(key, __u32);
	__type(value, __u8);
} sampled SEC(".maps");

static __always_inline int not_sampled(__u64 id)
{
	__u32 tgid = id >> 32;

	return filter_pids && !bpf_map_lookup_elem(&sampled, &tgid);
}

/* Where an allocation record is built, to be sent sized to its backtrace. */
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
 * the gctx into the memory next to it; nothing past bt.len is sent, and a
 * piece that faults is read the old way. Measured on trapfloor's 14-frame
 * stand-in: 310 -> 266 ns per hit; with 32 frames a piece the larger copy
 * ate the gain.
 */
#define BT_CHUNK_FRAMES 16
#define BT_CHUNK_BYTES	(16 + 8 * BT_CHUNK_FRAMES)

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

SEC("uprobe")
int BPF_KPROBE(heapbpf_alloc)
{
	struct heapbpf_alloc_event *e;
	struct heapbpf_args args;
	__u64 gctx = 0, vec = 0, tctx;
	__u32 len = 0, zero = 0, nframes = 0;
	__u64 size;
	__u64 id;
	int in_chunk = 0;
	long err = 0;

	if (SKIPPED(HEAPBPF_PART_ALL))
		return 0;
	id = bpf_get_current_pid_tgid();
	if (not_sampled(id))
		return 0;
	count(&counters.alloc_hits);
	e = bpf_map_lookup_elem(&scratch, &zero);
	if (!e)
		return 0;
	heapbpf_read_args(ctx, &args);
	tctx = heapbpf_arg(&args, layout.alloc_tctx_arg);

	/* tctx->gctx->bt: the backtrace jemalloc already took for this sample */
	if (SKIPPED(HEAPBPF_PART_READS)) {
		/* as if a 14-frame backtrace had come with prof_bt_t */
		len = 14;
		in_chunk = 1;
	} else {
		err = bpf_probe_read_user(&gctx, sizeof(gctx),
					  (void *)(tctx + layout.tctx_gctx_off));
	}
	if (!err && !SKIPPED(HEAPBPF_PART_READS)) {
		__u64 bt = gctx + layout.gctx_bt_off;

		if (layout.bt_vec_off == 0 && layout.bt_len_off == 8 &&
		    !bpf_probe_read_user(&e->tctx, BT_CHUNK_BYTES, (void *)bt)) {
			/* into the record: tctx, bt_len and flags hold prof_bt_t for a moment */
			vec = e->tctx;
			len = e->bt_len;
			in_chunk = vec == bt + 16;
		} else if (layout.bt_len_off == layout.bt_vec_off + 8) {
			/* prof_bt_t {vec, len} in one read: every helper call costs */
			struct {
				__u64 vec;
				__u32 len;
			} b = {};

			err = bpf_probe_read_user(&b, 12, (void *)(bt + layout.bt_vec_off));
			vec = b.vec;
			len = b.len;
		} else {
			err |= bpf_probe_read_user(&vec, sizeof(vec),
						   (void *)(bt + layout.bt_vec_off));
			err |= bpf_probe_read_user(&len, sizeof(len),
						   (void *)(bt + layout.bt_len_off));
		}
	}
	e->type = HEAPBPF_EV_ALLOC;
	e->pid = id >> 32;
	e->tid = (__u32)id;
	e->ts = SKIPPED(HEAPBPF_PART_CLOCK) ? 0 : bpf_ktime_get_ns();
	e->ptr = heapbpf_arg(&args, layout.alloc_ptr_arg);
	e->size = heapbpf_arg(&args, layout.alloc_size_arg);
	e->usize = heapbpf_arg(&args, layout.alloc_usize_arg);
	e->tctx = tctx;
	e->flags = 0;
	e->nframes = 0;
	e->bt_len = 0;
	if (!err) {
		e->bt_len = len;
		len = heapbpf_clamp_frames(len);
		if (len < e->bt_len)
			e->flags |= HEAPBPF_F_TRUNCATED;
		/* the frames, unless they came with prof_bt_t */
		if (len && !(in_chunk && len <= BT_CHUNK_FRAMES) &&
		    bpf_probe_read_user(e->frames, len * sizeof(__u64), (void *)vec))
			err = -1;
		else
			nframes = len;
		e->nframes = nframes;
	}
	if (err) {
		e->flags |= HEAPBPF_F_READ_FAULT;
		count(&counters.read_faults);
	}
	/*
	 * Sized to the backtrace: a typical record is a few hundred bytes, not
	 * the 1088 of a full one, so the ring buffer holds several times more.
	 */
	size = HEAPBPF_ALLOC_EVENT_SIZE(nframes);
	/* the verifier must see the bound on the very register passed below */
	asm volatile("" : "+r"(size));
	if (size > sizeof(*e))
		size = sizeof(*e);
	if (SKIPPED(HEAPBPF_PART_RINGBUF))
		return 0;
	if (bpf_ringbuf_output(&events, e, size, submit_flags()))
		count(&counters.alloc_drops);
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

SEC("uprobe")
int BPF_KPROBE(heapbpf_free)
{
	struct heapbpf_free_event *e;
	struct heapbpf_args args;
	__u32 zero = 0;
	__u64 id;

	if (SKIPPED(HEAPBPF_PART_ALL))
		return 0;
	id = bpf_get_current_pid_tgid();
	if (not_sampled(id))
		return 0;
	count(&counters.free_hits);
	/* the decomposition without the ring buffer: the record in the per-CPU scratch */
	if (SKIPPED(HEAPBPF_PART_RINGBUF))
		e = bpf_map_lookup_elem(&scratch, &zero);
	else
		e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(&counters.free_drops);
		return 0;
	}
	heapbpf_read_args(ctx, &args);
	e->type = HEAPBPF_EV_FREE;
	e->pid = id >> 32;
	e->tid = (__u32)id;
	e->flags = 0;
	e->ts = SKIPPED(HEAPBPF_PART_CLOCK) ? 0 : bpf_ktime_get_ns();
	e->ptr = heapbpf_arg(&args, layout.free_ptr_arg);
	e->usize = heapbpf_arg(&args, layout.free_usize_arg);
	e->tctx = heapbpf_arg(&args, layout.free_tctx_arg);
	e->alloc_time_ns = 0;
	e->alloc_size = 0;
	if (layout.free_info_arg != HEAPBPF_ARG_NONE && !SKIPPED(HEAPBPF_PART_READS)) {
		struct heapbpf_info info = {};

		/* prof_info_t in one read: every helper call costs */
		if (read_info(&info, heapbpf_arg(&args, layout.free_info_arg))) {
			e->flags |= HEAPBPF_F_READ_FAULT;
			count(&counters.read_faults);
		} else {
			e->tctx = heapbpf_info_field(&info, layout.info_tctx_off);
			e->alloc_size = heapbpf_info_field(&info, layout.info_size_off);
			if (layout.info_has_time)
				e->alloc_time_ns = heapbpf_info_field(&info, layout.info_time_off);
		}
	}
	if (!SKIPPED(HEAPBPF_PART_RINGBUF))
		bpf_ringbuf_submit(e, submit_flags());
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
