/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The BPF side's lifecycle: open, configure, load, attach, read counters, destroy. */
#ifndef __HEAPBPF_PROBES_H
#define __HEAPBPF_PROBES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <sys/types.h>

#include "heapbpf.h"
#include "jemalloc/target.h"

struct probes;
struct bpf_link;
struct ring_buffer;

typedef int (*probes_event_fn)(void *ctx, void *data, size_t len);

/*
 * The BPF side wakes the collector only when the ring buffer is a quarter
 * full: the collector must also consume it at least this often.
 */
#define PROBES_POLL_MS 100

/*
 * Opens and loads the BPF object with the target's layout, a ring buffer of
 * ringbuf_bytes and the sched_process_fork record's child_pid offset; oom:
 * the oom/mark_victim record's offsets, for heapbpf watch (NULL: OOM victims
 * are not heard of).
 * by_file (a session of several targets): the sampling uprobes are attached
 * once per object file, for every process mapping it, and BPF keeps only
 * the samples of the targets and of the children they follow (its `sampled`
 * map); else once per pid. The kernel serializes the detach of uprobes at
 * about 0.1 s each (measured on 6.18): 128 per-pid uprobes of 64 targets
 * took 12.9 s to close, the two of one file take 0.2 s.
 */
/*
 * heapbpf's BPF object reads the probed function's arguments from struct
 * pt_regs as the architecture it was compiled for lays it out: an object
 * built for another one loads, attaches, and reads the wrong registers
 * (a cross build once ran x86-64's on arm64: every event faulted).
 * probes__regs_arch() names the architecture of btf's pt_regs ("x86-64",
 * "arm64"; NULL: neither); probes__check_regs_arch() fails with -ENOEXEC
 * and one sentence unless it is the one heapbpf is built for, and
 * probes__check_arch() checks the embedded object so, before anything is
 * attached or switched on.
 */
struct btf;
const char *probes__regs_arch(const struct btf *btf);
int probes__check_regs_arch(const struct btf *btf, char *err, size_t errlen);
int probes__check_arch(char *err, size_t errlen);

int probes__load(const struct heapbpf_layout *layout, size_t ringbuf_bytes,
		 uint32_t fork_child_pid_off, const struct heapbpf_oom_offsets *oom, bool by_file,
		 struct probes **out);
/*
 * Starts following the process trees of the targets (fork and exec
 * tracepoints, attached once for every target of the session), tracks t's
 * pid, then attaches both uprobes to t's jemalloc object for its pid only,
 * and, when activity (a late-activation check will run and detach it), the
 * activity probe where t has one (t->activity_off). Called once per
 * target of a session: one BPF object and ring buffer serve every target
 * whose jemalloc has the same layout. A failure leaves the other targets'
 * probes attached. by_file, *file names t's object file for
 * probes__release (-1 otherwise).
 */
int probes__attach(struct probes *p, const struct jemalloc_target *t, bool activity, int *file);
/*
 * by_file: a target attached with *file leaves; the file's uprobes are
 * detached with its last user (the kernel's detach takes about 0.1 s).
 * Nothing for file -1 or without by_file.
 */
void probes__release(struct probes *p, int file);
/* --follow-forks: the samples of one more process (a forked child): its uprobes, or by_file its pid. */
int probes__attach_pid(struct probes *p, const struct jemalloc_target *t, pid_t pid);
/* Follows pid's forks (the BPF side tracks a tracked process's children itself). */
int probes__track(struct probes *p, pid_t pid);
/* Stops following pid's forks and (by_file) taking its samples: a thread, a process that exec'ed or exited. */
void probes__untrack(struct probes *p, pid_t pid);
/* Detaches the activity probes only (their counters stay readable). */
void probes__detach_activity(struct probes *p);
/*
 * A node session's target's activity probe on its own, in *link (a target
 * comes and goes, and so does its check): its count starts from 0 (a
 * reused pid's is cleared). 0 (nothing attached when t has no activity
 * function) or negative errno.
 */
int probes__attach_activity(struct probes *p, const struct jemalloc_target *t,
			    struct bpf_link **link);
/* Detaches link (NULL: none) and forgets pid's count. */
void probes__drop_activity(struct probes *p, pid_t pid, struct bpf_link *link);
/* The bytes pid's activity probe saw so far (0 before its first hit); 0 or negative errno. */
int probes__activity_bytes(struct probes *p, pid_t pid, uint64_t *bytes);
/* A ring buffer delivering events to fn; owned by p. */
int probes__ring_buffer(struct probes *p, probes_event_fn fn, void *ctx, struct ring_buffer **rb);
/*
 * The ring buffer of another BPF object (of another jemalloc layout) read by
 * rb too, with fn; rb (another object's) frees it with its own.
 */
int probes__ring_buffer_add(struct probes *p, struct ring_buffer *rb, probes_event_fn fn,
			    void *ctx);
/* The layout p was loaded with. */
const struct heapbpf_layout *probes__layout(const struct probes *p);
/*
 * Unmaps the ring buffer once drained: libbpf maps its data pages twice
 * and the kernel counts them all in heapbpf's RSS, which the profiles
 * built after the stop need not carry. The BPF map stays (the probes may
 * still write to it until detached: nobody reads it).
 */
void probes__close_ring_buffer(struct probes *p);
/* Detaches the uprobes (the ring buffer stays readable). */
void probes__detach(struct probes *p);
/* Copies the BPF-side counters. */
void probes__counters(const struct probes *p, struct heapbpf_counters *c);
/* The same, added to *c (a session of several BPF objects sums theirs). */
void probes__counters_add(const struct probes *p, struct heapbpf_counters *c);
/*
 * Prints each program's kernel-measured run count and run time, one line
 * per program that ran ("heapbpf: bpf_stats: NAME run_cnt N run_time_ns T").
 * The kernel counts them only while BPF statistics are enabled
 * (kernel.bpf_stats_enabled, or a BPF_ENABLE_STATS descriptor held by
 * anyone): otherwise nothing is printed.
 */
void probes__print_run_time(const struct probes *p, FILE *f);
void probes__free(struct probes *p);

#endif /* __HEAPBPF_PROBES_H */
