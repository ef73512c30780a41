"""What each of heapbpf's BPF programs costs per hit, as the kernel measures it.

With BPF statistics enabled the kernel times every run of every BPF program
(two clock reads around the program, `bpf_prog_info.run_time_ns` and
`run_cnt`): the program's own time, whatever else the machine does, which
loop-time differences on a loaded VM cannot resolve. Statistics are enabled
here with a BPF_ENABLE_STATS descriptor, the kernel's reference-counted
switch: they are on while the descriptor is open and go back to what
`kernel.bpf_stats_enabled` says when it closes, in every path (an exception,
a kill -9 of this script), and another user of the sysctl is not overridden.

Per repetition, with statistics on:

- `bench/trapfloor CALLS 1`: the empty program on a uprobe (the floor of the
  measure itself: the kernel's two clock reads and the call), heapbpf's
  allocation program on the 14-frame stand-in and its free program on a
  stand-in of 5.3.0's free hook, all read back by trapfloor from their
  descriptors: one thread on warm caches, each program's own work;
- `heapbpf -v` on the example service (`alloc-service-static --threads 4`,
  `lg_prof_sample` small enough for thousands of samples): heapbpf prints each
  of its programs' run count and run time before it unloads them;
- the decomposition, on the same service, right after (in the reverse order
  every other repetition): the same run once per step of PARTS, each leaving
  out one more part of the two sampling programs (HEAPBPF_BENCH_PARTS, the
  .rodata knob bench_skip: the verifier drops what is left out), down to a
  program that returns at once; and once with each program attached twice,
  so that every hit runs it a second time right after the first, on warm
  caches: (twice-run mean) * 2 - (single run) is the warm second run.

Called from bench/run.py (`bench_bpfstats`); bench/report.py makes the rows.
"""

import ctypes
import json
import os
import re
import subprocess
import time

import hb
from hb import BenchError, spread

BPF_ENABLE_STATS = 32  # enum bpf_cmd (Linux 5.8)
BPF_STATS_RUN_TIME = 0
SYS_BPF = {"x86_64": 321, "aarch64": 280}
STATS_RE = re.compile(r"heapbpf: bpf_stats: (\w+) run_cnt (\d+) run_time_ns (\d+)")
SYSCTL = "/proc/sys/kernel/bpf_stats_enabled"


def sysctl_value():
    try:
        with open(SYSCTL) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


class Stats:
    """BPF run-time statistics on while this is open (a BPF_ENABLE_STATS descriptor)."""

    def __enter__(self):
        nr = SYS_BPF.get(os.uname().machine)
        if nr is None:
            raise BenchError("bpfstats: no bpf() syscall number for " + os.uname().machine)
        libc = ctypes.CDLL(None, use_errno=True)
        attr = ctypes.create_string_buffer(128)  # union bpf_attr, enable_stats.type = 0
        ctypes.c_uint32.from_buffer(attr, 0).value = BPF_STATS_RUN_TIME
        self.fd = libc.syscall(ctypes.c_long(nr), ctypes.c_int(BPF_ENABLE_STATS), attr,
                               ctypes.c_uint(ctypes.sizeof(attr)))
        if self.fd < 0:
            e = ctypes.get_errno()
            raise BenchError("bpfstats: BPF_ENABLE_STATS failed: %s (root and Linux 5.8 or "
                             "later needed)" % os.strerror(e))
        return self

    def __exit__(self, *exc):
        os.close(self.fd)


def trapfloor(calls):
    rec = hb.trapfloor(calls, 1)[-1]
    if not rec["empty_run_cnt"] or not rec["alloc_run_cnt"] or not rec["free_run_cnt"]:
        raise BenchError("trapfloor: the kernel counted no run with statistics on")
    return rec


# The decomposition's steps: (name, HEAPBPF_PART_* bits left out, cumulative), bpf/heapbpf.h.
PARTS = [
    ("counters", 0x01),  # the shared hit counters' atomic adds
    ("query", 0x11),  # and bpf_ringbuf_query's wake-up decision
    ("clock", 0x13),  # and bpf_ktime_get_ns
    ("reads", 0x17),  # and the reads of jemalloc's memory (tctx, prof_bt_t + frames, prof_info_t)
    ("ringbuf", 0x1f),  # and the ring-buffer record: reserve/submit, bpf_ringbuf_output
    ("all", 0x20),  # the program returns at once
]
PART_TWICE = 0x100


def example_run(lg, seconds, parts=0):
    """heapbpf -v on the example service; returns {program: (run_cnt, run_time_ns)} and
    heapbpf's counters. parts: HEAPBPF_BENCH_PARTS (the decomposition), else 0."""
    env = dict(os.environ, MALLOC_CONF="prof:true,prof_active:false,lg_prof_sample:%d" % lg)
    svc = subprocess.Popen([hb.path("examples/alloc-service-static"), "--threads", "4"],
                           env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        henv = dict(os.environ)
        henv.pop("HEAPBPF_BENCH_PARTS", None)
        if parts:
            henv["HEAPBPF_BENCH_PARTS"] = hex(parts)
        # every variant from the one build, whose object has the knob (at 0 the
        # verifier drops what it guards: the programs are heapbpf's own)
        out = subprocess.run([hb.bench_heapbpf_bin(), "--pid", str(svc.pid), "--duration",
                              str(seconds), "-v", "-o", os.path.join(hb.tmp(), "bpfstats.pb.gz")],
                             capture_output=True, text=True, timeout=seconds + 60, env=henv)
    finally:
        hb.kill_wait(svc)
    # 3: a decomposition step without the ring buffer delivers no sample
    if out.returncode not in ((0, 3, 4) if parts else (0, 4)):
        raise BenchError("heapbpf exited with %d:\n%s" % (out.returncode, out.stderr[-2000:]))
    progs = {m.group(1): (int(m.group(2)), int(m.group(3)))
             for m in STATS_RE.finditer(out.stderr)}
    return progs, hb.parse_heapbpf_stderr(out.stderr)


def parts_run(lg, seconds, rep):
    """The decomposition's runs: {step: {program: ns per hit}}, the steps in PARTS' order on even
    repetitions and in reverse on odd ones, "twice" at the end (the start on odd ones)."""
    steps = [(name, bits) for name, bits in PARTS] + [("twice", PART_TWICE)]
    if rep % 2:
        steps.reverse()
    out = {}
    for name, bits in steps:
        progs, _ = example_run(lg, seconds, bits)
        out[name] = {p: progs[p][1] / progs[p][0] for p in ("heapbpf_alloc", "heapbpf_free")
                     if progs.get(p, (0, 0))[0]}
    return out


def bench_bpfstats(S, res, log):
    before = sysctl_value()
    runs = []
    with Stats():
        for rep in range(S["bpfstats_reps"]):
            tf = trapfloor(S["bpfstats_trap_calls"])
            progs, counters = example_run(S["bpfstats_lg"], S["bpfstats_seconds"])
            for name in ("heapbpf_alloc", "heapbpf_free"):
                if not progs.get(name, (0, 0))[0]:
                    raise BenchError("bpfstats: heapbpf printed no run time of %s" % name)
            run = dict(empty_ns=tf["empty_run_ns"] / tf["empty_run_cnt"],
                       empty_cnt=tf["empty_run_cnt"],
                       standin_ns=tf["alloc_run_ns"] / tf["alloc_run_cnt"],
                       standin_cnt=tf["alloc_run_cnt"], trap_ns=tf["trap_ns"],
                       standin_free_ns=tf["free_run_ns"] / tf["free_run_cnt"],
                       standin_free_cnt=tf["free_run_cnt"],
                       frames=tf["frames"], progs=progs, counters=counters,
                       parts=parts_run(S["bpfstats_lg"], S["bpfstats_seconds"], rep))
            runs.append(run)
            log("bpf_stats %d: alloc %.0f ns/hit (%d hits), free %.0f ns/hit (%d), empty "
                "program %.0f ns/hit" % (
                    rep, progs["heapbpf_alloc"][1] / progs["heapbpf_alloc"][0],
                    progs["heapbpf_alloc"][0], progs["heapbpf_free"][1] /
                    progs["heapbpf_free"][0], progs["heapbpf_free"][0], run["empty_ns"]))
    after = sysctl_value()
    res["bpfstats"] = dict(runs=runs, sysctl_before=before, sysctl_after=after,
                           lg=S["bpfstats_lg"], seconds=S["bpfstats_seconds"],
                           trap_calls=S["bpfstats_trap_calls"])
    log("bpf_stats: alloc %s ns/hit, sysctl %s before, %s after" % (
        spread([r["progs"]["heapbpf_alloc"][1] / r["progs"]["heapbpf_alloc"][0]
                for r in runs], "{:.0f}"), before, after))


def main():
    """Standalone: python3 bench/bpfstats.py [--build BUILD] prints the figures (JSON)."""
    import argparse
    import sys
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--lg", type=int, default=18)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--calls", type=int, default=200000)
    a = ap.parse_args()
    hb.BUILD = a.build
    res = {}
    try:
        bench_bpfstats(dict(bpfstats_reps=a.reps, bpfstats_lg=a.lg, bpfstats_seconds=a.seconds,
                            bpfstats_trap_calls=a.calls), res,
                       lambda m: print("bpfstats: " + m, file=sys.stderr, flush=True))
    except BenchError as e:
        sys.exit("bench: " + str(e))
    finally:
        hb.remove_tmp()
    json.dump(res, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
