#!/usr/bin/env python3
"""heapbpf's benchmark suite: `make bench` runs it in full and rewrites
BENCHMARKS.md; `make test` runs it once at tiny size (--smoke) to check that
every benchmark works and that its report is well formed. Nothing here asserts
a time: targets are reported as met or not met.

Each comparison is made pair by pair within one run: the conditions compared
alternate, in the same process where possible, and ratios are computed per
pair before taking the median. Every process started here is ended here;
every loop is bounded by count and by time; traffic goes to 127.0.0.1 only.
"""

import argparse
import json
import os
import platform
import re
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hb  # noqa: E402
from hb import BenchError  # noqa: E402

ORACLE = "prof:true,prof_active:false"
MIB = 1 << 20

FULL = dict(
    idle_reps=5, idle_window=2.0, idle_cycle=1,
    trap_calls=500000, trap_reps=7,
    sample_reps=15, sample_bytes=128 * MIB, churn_reps=7, churn_bytes=64 * MIB,
    redis_reps=5, redis_n=200000, redis_bpftrace_n=20000,
    scale_reps=3, scale_lg=list(range(14, 22)), scale_threads=[1, 2, 4, 8],
    scale_depth=[4, 16, 64, 120], scale_samples=4096, scale_max_bytes=1024 * MIB,
    collector_events=2000000, collector_reps=5,
    rate_seconds=3.0, rate_lg=[13, 12, 11, 10, 9],
    unique_stacks=100000, sym_frames=10000, sym_reps=3,
    record_seconds=10.0, record_reps=3,
)
SMOKE = dict(
    idle_reps=1, idle_window=0.2, idle_cycle=0.3,
    trap_calls=10000, trap_reps=1,
    sample_reps=1, sample_bytes=4 * MIB, churn_reps=1, churn_bytes=4 * MIB,
    redis_reps=1, redis_n=2000, redis_bpftrace_n=1000,
    scale_reps=1, scale_lg=[14], scale_threads=[2], scale_depth=[16], scale_samples=64,
    scale_max_bytes=4 * MIB,
    collector_events=20000, collector_reps=1,
    rate_seconds=0.3, rate_lg=[12],
    unique_stacks=1000, sym_frames=1000, sym_reps=1,
    record_seconds=0.5, record_reps=1,
)

TARGETS = {
    "idle": 0.99,            # throughput ratio after an attach-profile-detach cycle
    "per_sample": 1.2,       # added cost per sample / one bare uprobe hit
    "redis": 0.97,           # requests/s with heapbpf attached / idle
    "collector": 1e6,        # events aggregated per second, one core
    "live_rate": 50000,      # samples/s with zero drops
    "rss_mib": 64,           # heapbpf's peak RSS with 100k unique stacks
    "attach_ms": 250,        # pid -> sampling on
    "stop_ms": 500,          # stop -> files written
}


def log(msg):
    print("bench: " + msg, file=sys.stderr, flush=True)


# ---- statistics -----------------------------------------------------------------------------


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def spread(xs, fmt="{:.2f}"):
    """median [min-max] (n)"""
    if not xs:
        return "n/a"
    if len(xs) == 1:
        return fmt.format(xs[0]) + " (n=1)"
    return (fmt.format(med(xs)) + " [" + fmt.format(min(xs)) + " – " + fmt.format(max(xs)) +
            "] (n=%d)" % len(xs))


def verdict(ok, why=""):
    if ok:
        return "**met**"
    return "**not met**" + (": " + why if why else "")


# ---- markdown -------------------------------------------------------------------------------


class Doc:
    def __init__(self):
        self.parts = []

    def p(self, text=""):
        self.parts.append(text)

    def table(self, head, rows):
        self.parts.append("| " + " | ".join(head) + " |")
        self.parts.append("|" + "|".join(" --- " for _ in head) + "|")
        for r in rows:
            self.parts.append("| " + " | ".join(str(c) for c in r) + " |")
        self.parts.append("")

    def text(self):
        return "\n".join(self.parts).rstrip() + "\n"


# ---- the machine ----------------------------------------------------------------------------


def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True,
                              timeout=30).stdout.strip()
    except subprocess.TimeoutExpired:
        return ""


def machine():
    cpu = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem = 0
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal"):
                mem = int(line.split()[1]) // 1024
    virt = sh("systemd-detect-virt 2>/dev/null") or (
        "yes (hypervisor flag)" if "hypervisor" in open("/proc/cpuinfo").read() else "no")
    debian = sh("cat /etc/debian_version")
    return [
        ("CPU", "%s, %d logical CPUs" % (cpu, os.cpu_count())),
        ("memory", "%d MiB" % mem),
        ("virtualized", virt),
        ("kernel", platform.release()),
        ("distribution", "Debian " + debian),
        ("jemalloc", sh("dpkg-query -W -f='${Version}' libjemalloc-dev") +
         " (Debian's libjemalloc.a / libjemalloc_pic.a)"),
        ("libbpf", sh("dpkg-query -W -f='${Version}' libbpf1")),
        ("redis", sh("dpkg-query -W -f='${Version}' redis-server")),
        ("bpftrace", sh("dpkg-query -W -f='${Version}' bpftrace")),
        ("load average at start (1, 5, 15 min)",
         " ".join(open("/proc/loadavg").read().split()[:3])),
        ("heapbpf", sh("git -C %s describe --always --dirty 2>/dev/null" %
                       shlex.quote(os.path.dirname(os.path.abspath(__file__))))),
    ]


# ---- 1. idle cost ---------------------------------------------------------------------------


class Service:
    """The example service in control mode, for throughput windows."""

    def __init__(self, conf, threads=1, cpus=None):
        env = dict(os.environ)
        if conf is None:
            env.pop("MALLOC_CONF", None)
        else:
            env["MALLOC_CONF"] = conf
        self.p = subprocess.Popen(
            [hb.path("examples/alloc-service-static"), "--control", "--rate", "0",
             "--threads", str(threads)],
            env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, preexec_fn=hb.pin(cpus))
        line = self.p.stdout.readline().decode()
        if not line.startswith("ready"):
            hb.kill_wait(self.p)
            raise BenchError("alloc-service did not start: %r" % line)
        self.pid = self.p.pid

    def stats(self):
        self.p.stdin.write(b"stats\n")
        self.p.stdin.flush()
        line = self.p.stdout.readline().decode().split()
        if len(line) != 3 or line[0] != "stats":
            raise BenchError("alloc-service: bad stats reply %r" % line)
        return int(line[1]), time.monotonic()

    def throughput(self, seconds):
        a0, t0 = self.stats()
        time.sleep(seconds)
        a1, t1 = self.stats()
        return (a1 - a0) / (t1 - t0)

    def close(self):
        try:
            self.p.stdin.write(b"quit\n")
            self.p.stdin.flush()
            self.p.wait(10)
        except (BrokenPipeError, subprocess.TimeoutExpired):
            pass
        hb.kill_wait(self.p)


def bench_idle(S, doc, res):
    """prof:false vs prof:true,prof_active:false never attached vs the same
    process after heapbpf attached, profiled and detached."""
    rows = {"off": [], "idle": [], "after": []}
    r_idle, r_after, r_after_off = [], [], []
    w = S["idle_window"]
    tc, hc = cpus_split()
    for rep in range(S["idle_reps"]):
        svc = Service("prof:false", cpus=tc)
        try:
            time.sleep(w / 2)
            off = svc.throughput(w)
        finally:
            svc.close()
        svc = Service(ORACLE, cpus=tc)
        try:
            time.sleep(w / 2)
            before = svc.throughput(w)
            counters, _ = hb.heapbpf_cycle(svc.pid, S["idle_cycle"], cpus=hc)
            after = svc.throughput(w)
        finally:
            svc.close()
        rows["off"].append(off)
        rows["idle"].append(before)
        rows["after"].append(after)
        r_idle.append(before / off)
        r_after.append(after / before)
        r_after_off.append(after / off)
        log("idle %d: prof:false %.0f/s, idle %.0f/s, after detach %.0f/s (%d samples while "
            "attached)" % (rep, off, before, after, counters["alloc_hits"]))
    ok = med(r_after) >= TARGETS["idle"]
    res["idle"] = dict(off=rows["off"], idle=rows["idle"], after=rows["after"],
                       ratio_idle=r_idle, ratio_after=r_after, ratio_after_off=r_after_off)
    doc.p("## 1. Idle cost")
    doc.p()
    doc.p("The example service (`alloc-service-static --rate 0 --threads 1`, unthrottled, on "
          "CPU %s; heapbpf on CPU %s), allocations per second over %.1f s windows. Each "
          "repetition runs a `prof:false` "
          "process, then a `prof:true,prof_active:false` process measured before and after a "
          "heapbpf attach-profile-detach cycle (`heapbpf -d %s`) in the same process. Ratios "
          "are taken within each repetition." % (sorted(tc) if tc else "any",
                                                 sorted(hc) if hc else "any", w,
                                                 S["idle_cycle"]))
    doc.p()
    doc.table(["condition", "allocations/s", "ratio"], [
        ["`prof:false`", spread(rows["off"], "{:,.0f}"), "1 (reference)"],
        ["`prof:true,prof_active:false`, never attached", spread(rows["idle"], "{:,.0f}"),
         spread(r_idle, "{:.3f}") + " vs `prof:false`"],
        ["same process after attach-profile-detach", spread(rows["after"], "{:,.0f}"),
         spread(r_after, "{:.3f}") + " vs before; " + spread(r_after_off, "{:.3f}") +
         " vs `prof:false`"],
    ])
    doc.p("Target: ratio after detach >= %.2f (vs the same process before): %s" % (
        TARGETS["idle"], verdict(ok, "the median ratio is %.3f; on this VM run-to-run noise "
                                 "between windows is of the same order (see the spread)"
                                 % med(r_after))))
    doc.p()


# ---- 2. cost per sample ---------------------------------------------------------------------


def bench_trap(S, res):
    out = subprocess.run([hb.path("bench/trapfloor"), str(S["trap_calls"]),
                          str(S["trap_reps"])], capture_output=True, text=True, timeout=300,
                         preexec_fn=hb.pin({1}) if os.cpu_count() > 1 else None)
    if out.returncode:
        raise BenchError("trapfloor failed: " + out.stderr)
    recs = [json.loads(line) for line in out.stdout.splitlines() if line]
    traps = [r["trap_ns"] for r in recs]
    res["trap_ns"] = traps
    res["heapbpf_prog_ns"] = [r["heapbpf_ns"] for r in recs]
    res["heapbpf_prog_ratio"] = [r["heapbpf_ns"] / r["trap_ns"] for r in recs]
    res["heapbpf_prog_hits_ok"] = all(r["heapbpf_hits"] == r["calls"] and
                                      not r["heapbpf_read_faults"] for r in recs)
    log("bare uprobe hit: %s ns, with heapbpf's program %s ns" % (
        spread(traps, "{:.0f}"), spread(res["heapbpf_prog_ns"], "{:.0f}")))
    return med(traps)


def cpus_split():
    """The target on the last CPU, heapbpf on the others, when there are two or more."""
    n = os.cpu_count() or 1
    if n < 2:
        return None, None
    return {n - 1}, set(range(n - 1))


def sample_cost(conf, args, reps, tcpus=None, hcpus=None, tag=""):
    """Alternates je / attached / none windows in one microbenchmark process.
    Returns per-pair lists."""
    out = dict(per_sample_ns=[], ratio_att_je=[], ratio_att_none=[], ratio_je_none=[],
               samples=[], free_hits=[], drops=[], attach_ms=[], stop_ms=[], rss_kib=[],
               wall_per_sample_ns=[], traps_per_sample=[])
    with hb.Micro(conf, args, cpus=tcpus) as m:
        for rep in range(reps):
            je = m.window("je")
            att = m.attached(cpus=hcpus)
            none = m.window("none")
            h = att["hb"]
            n = max(h["alloc_hits"], 1)
            out["per_sample_ns"].append((att["cpu_ns"] - je["cpu_ns"]) / n)
            out["wall_per_sample_ns"].append((att["wall_ns"] - je["wall_ns"]) / n)
            out["ratio_att_je"].append(je["wall_ns"] / att["wall_ns"])
            out["ratio_att_none"].append(none["wall_ns"] / att["wall_ns"])
            out["ratio_je_none"].append(none["wall_ns"] / je["wall_ns"])
            out["samples"].append(h["alloc_hits"])
            out["free_hits"].append(h["free_hits"])
            out["traps_per_sample"].append((h["alloc_hits"] + h["free_hits"]) / n)
            out["drops"].append(h["alloc_drops"] + h["free_drops"])
            out["attach_ms"].append(h["attach_ns"] / 1e6)
            out["stop_ms"].append(h["stop_ns"] / 1e6)
            out["rss_kib"].append(h["peak_rss_kib"])
    log("%s: added %s ns/sample, %s samples" % (tag, spread(out["per_sample_ns"], "{:.0f}"),
                                                 spread(out["samples"], "{:.0f}")))
    return out


def bench_per_sample(S, doc, res):
    trap = bench_trap(S, res)
    tc, hc = cpus_split()
    conf = ORACLE + ",lg_prof_sample:14"
    alloc = sample_cost(conf, ["--bytes", str(S["sample_bytes"])], S["sample_reps"], tc, hc,
                        "allocation path")
    churn = sample_cost(conf, ["--bytes", str(S["churn_bytes"]), "--churn"], S["churn_reps"],
                        tc, hc, "allocation and free paths")
    res["per_sample"] = dict(alloc=alloc, churn=churn)
    ratio_insitu = med(alloc["per_sample_ns"]) / trap
    ratio = med(res["heapbpf_prog_ratio"])
    ratio_churn = med(churn["per_sample_ns"]) / (trap * med(churn["traps_per_sample"]))
    doc.p("## 2. Cost while profiling, per sample")
    doc.p()
    doc.p("`bench/microbench` (static, Debian's jemalloc): one thread allocates %d MiB in "
          "objects of 64-1024 bytes, each through 8 nested calls, with "
          "`lg_prof_sample:14` (one sample per 16 KiB). One process runs, alternately, a "
          "window with jemalloc's own sampling switched on by the program (`je`), a window "
          "while heapbpf profiles (`attached`: heapbpf switches sampling on, the window "
          "starts when the program sees it on, heapbpf is stopped after it), and a window "
          "with sampling off (`none`); the same allocation sequence each time, pages warmed "
          "beforehand. The program runs on CPU %s and heapbpf on CPU %s. Added cost per "
          "sample = (CPU time attached - CPU time `je`) / samples, per pair; samples = "
          "heapbpf's BPF counter of hits on `prof_malloc_sample_object`. The allocation-path "
          "rows keep every object of the window (no free of a sampled object in it); the "
          "churn rows free each object at once, so most samples also cost a hit on "
          "`prof_free_sampled_object`." % (S["sample_bytes"] // MIB,
                                            sorted(tc) if tc else "any",
                                            sorted(hc) if hc else "any"))
    doc.p()
    doc.p("The floor, `bench/trapfloor`: an empty BPF program attached as a uprobe to a no-op "
          "function that starts with `push %%r15` like the two probed jemalloc functions, "
          "called %d times with and without the probe (CPU time difference per call). In "
          "the same process, heapbpf's real allocation program (the build's skeleton, "
          "jemalloc 5.3.0's layout, default 16 MiB ring buffer drained by a polling thread "
          "as heapbpf does) on a stand-in for `prof_malloc_sample_object` whose tctx leads to "
          "a 14-frame backtrace: the same trap plus all of heapbpf's BPF work, measured with "
          "the precision of the floor itself. The in-process measurement above includes "
          "jemalloc's own per-sample work (libgcc unwinding, about 20 us per sample here) in "
          "both terms of the difference, so its noise is far larger than the difference."
          % S["trap_calls"])
    doc.p()
    doc.table(["measure", "value"], [
        ["one bare uprobe hit (ns)", spread(res["trap_ns"], "{:.0f}")],
        ["one hit of heapbpf's allocation program, isolated (ns)",
         spread(res["heapbpf_prog_ns"], "{:.0f}")],
        ["isolated: heapbpf's hit / bare hit, per repetition",
         spread(res["heapbpf_prog_ratio"], "{:.2f}")],
        ["isolated: every call counted once by heapbpf's BPF counter, no read fault",
         "yes" if res["heapbpf_prog_hits_ok"] else "**no**"],
        ["heapbpf's added cost per sample, allocation path (ns CPU)",
         spread(alloc["per_sample_ns"], "{:.0f}")],
        ["same, in wall time (ns)", spread(alloc["wall_per_sample_ns"], "{:.0f}")],
        ["samples per window", spread(alloc["samples"], "{:.0f}")],
        ["uprobe hits per sample (BPF counters, allocation path)",
         spread(alloc["traps_per_sample"], "{:.3f}")],
        ["throughput attached / `je`", spread(alloc["ratio_att_je"], "{:.3f}")],
        ["throughput `je` / `none` (jemalloc's own sampling cost)",
         spread(alloc["ratio_je_none"], "{:.3f}")],
        ["throughput attached / `none`", spread(alloc["ratio_att_none"], "{:.3f}")],
        ["ring-buffer drops", spread(alloc["drops"], "{:.0f}")],
        ["churn: added cost per sample (ns CPU)", spread(churn["per_sample_ns"], "{:.0f}")],
        ["churn: uprobe hits per sample (allocation + free)",
         spread(churn["traps_per_sample"], "{:.3f}")],
        ["churn: throughput attached / `je`", spread(churn["ratio_att_je"], "{:.3f}")],
    ])
    doc.p("heapbpf's cost per sample / one bare uprobe hit = **%.2f** (isolated, median of "
          "per-repetition ratios). In the real process: added cost per sample on the "
          "allocation path / one bare hit = %.2f (median / median), and with frees in the "
          "window, added cost per uprobe hit / one bare hit = %.2f; both within the noise "
          "shown by their spread." % (ratio, ratio_insitu, ratio_churn))
    doc.p()
    doc.p("Target: heapbpf adds at most 1.2x one trap per sample: %s" % verdict(
        ratio <= TARGETS["per_sample"],
        "%.2fx. heapbpf takes exactly one trap per sample (the hits-per-sample row, and the "
        "trap-count test), so the rest is the BPF program's own work: reserving, filling "
        "and submitting a fixed %d-byte ring-buffer record (three reads of jemalloc's "
        "memory for tctx, gctx and the backtrace, plus the frames), about %.0f ns here. "
        "That is small next to jemalloc's own cost per sample (unwinding, see the `je` / "
        "`none` row), but above the 1.2x target. Candidates to close it: records sized to "
        "the backtrace (`bpf_ringbuf_output` of 64 + 8 x frames bytes instead of reserving "
        "128 frames) and fewer helper calls" % (
            ratio, 64 + 8 * 128, med(res["heapbpf_prog_ns"]) - trap)))
    doc.p()
    res["per_sample_ratio"] = ratio
    return alloc


# ---- 3. redis -------------------------------------------------------------------------------


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def sym_addr(pid, obj, sym):
    """Runtime address of sym in obj as mapped in pid (nm + /proc/PID/maps)."""
    real = os.path.realpath(obj)
    out = subprocess.run(["nm", "--defined-only", real], capture_output=True, text=True,
                         timeout=30).stdout
    vaddr = None
    for line in out.splitlines():
        f = line.split()
        if len(f) == 3 and f[2] == sym:
            vaddr = int(f[0], 16)
    if vaddr is None:
        raise BenchError("%s has no symbol %s" % (obj, sym))
    with open("/proc/%d/maps" % pid) as f:
        for line in f:
            f5 = line.split()
            if len(f5) >= 6 and f5[5] == real and int(f5[2], 16) == 0:
                return int(f5[0].split("-")[0], 16) + vaddr
    raise BenchError("%s is not mapped in pid %d" % (obj, pid))


def poke(pid, addr, value):
    with open("/proc/%d/mem" % pid, "r+b", buffering=0) as f:
        f.seek(addr)
        old = f.read(1)
        f.seek(addr)
        f.write(bytes([value]))
    return old[0]


def peek(pid, addr):
    with open("/proc/%d/mem" % pid, "rb", buffering=0) as f:
        f.seek(addr)
        return f.read(1)[0]


def redis_bench(port, n, cpus):
    """requests/s of SET and GET (redis-benchmark's own figures)."""
    argv = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-t", "set,get,lpush,lpop",
            "-n", str(n), "-r", "100000", "-d", "256", "-c", "50", "-P", "16", "-q", "--csv"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=600,
                         preexec_fn=hb.pin(cpus))
    rps = {}
    for line in out.stdout.splitlines():
        f = [x.strip('"') for x in line.split(",")]
        if len(f) > 1 and f[0] != "test":
            rps[f[0]] = float(f[1])
    if out.returncode or not rps:
        raise BenchError("redis-benchmark failed: " + out.stderr[-500:])
    # one figure per run: total requests / total time over the tests
    return len(rps) / sum(1.0 / v for v in rps.values())


def redis_condition(c, p, port, flag, je, S, oc, rps, samples):
    """One redis-benchmark run under condition c, appended to rps[c]."""
    if c == "idle":
        rps[c].append(redis_bench(port, S["redis_n"], oc))
    elif c == "heapbpf":
        # heapbpf attached for the whole benchmark
        errpath = os.path.join(hb.TMP, "redis-heapbpf.err")
        with open(errpath, "wb") as ef:
            hp = subprocess.Popen(hb.heapbpf_argv(p.pid, os.path.join(hb.TMP, "redis.pb.gz")),
                                  stdout=ef, stderr=ef, stdin=subprocess.DEVNULL,
                                  preexec_fn=hb.pin(oc))
        try:
            deadline = time.monotonic() + 30
            while peek(p.pid, flag) != 1:
                if time.monotonic() > deadline or hp.poll() is not None:
                    raise BenchError("heapbpf did not attach to redis: " +
                                     open(errpath).read()[-1000:])
                time.sleep(0.005)
            rps[c].append(redis_bench(port, S["redis_n"], oc))
            hp.send_signal(signal.SIGINT)
            hp.wait(60)
        finally:
            hb.kill_wait(hp)
        if hp.returncode not in (0, 3, 4):
            raise BenchError("heapbpf on redis exited %d" % hp.returncode)
        samples.append(hb.parse_heapbpf_stderr(open(errpath).read())["alloc_hits"])
    elif c == "jemalloc":
        # jemalloc's sampling left on in the process (the always-on approach)
        poke(p.pid, flag, 1)
        try:
            rps[c].append(redis_bench(port, S["redis_n"], oc))
        finally:
            poke(p.pid, flag, 0)
    else:
        # a uprobe on every malloc and free, memleak-style, with bpftrace
        rps[c].append(bpftrace_run(p.pid, je, port, S["redis_bpftrace_n"], oc))


def bench_redis(S, doc, res):
    je = hb.path("jemalloc/libjemalloc.so.2")
    for tool in ("redis-server", "redis-benchmark", "bpftrace"):
        if not shutil_which(tool):
            raise BenchError("%s is missing: run make deps (scripts/install-deps.sh)" % tool)
    tc, oc = cpus_split()
    port = free_port()
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(os.path.abspath(je)),
               MALLOC_CONF=ORACLE)
    p = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                          "--save", "", "--appendonly", "no", "--daemonize", "no",
                          "--loglevel", "warning"],
                         env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         stdin=subprocess.DEVNULL, preexec_fn=hb.pin(tc))
    conds = ["idle", "heapbpf", "jemalloc", "bpftrace"]
    rps = {c: [] for c in conds}
    ratios = {c: [] for c in conds}
    samples = []
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline or p.poll() is not None:
                    raise BenchError("redis-server did not start")
                time.sleep(0.05)
        mapped = open("/proc/%d/maps" % p.pid).read()
        if os.path.realpath(je) not in mapped:
            raise BenchError("redis-server did not load %s" % je)
        flag = sym_addr(p.pid, je, "je_prof_active_state")
        redis_bench(port, S["redis_n"] // 4 or 1, oc)  # warm-up: keys exist, memory grown
        for rep in range(S["redis_reps"]):
            # the order rotates from one repetition to the next: no condition always first
            for c in conds[rep % 4:] + conds[:rep % 4]:
                t = time.monotonic()
                redis_condition(c, p, port, flag, je, S, oc, rps, samples)
                log("redis %d: %s %.0f requests/s (%.1f s)" % (rep, c, rps[c][-1],
                                                               time.monotonic() - t))
            for c in conds:
                ratios[c].append(rps[c][-1] / rps["idle"][-1])
            log("redis %d: %s" % (rep, ", ".join("%s %.0f/s" % (c, rps[c][-1]) for c in conds)))
    finally:
        hb.kill_wait(p)
    res["redis"] = dict(rps=rps, ratios=ratios, samples=samples)
    ok = med(ratios["heapbpf"]) >= TARGETS["redis"]
    doc.p("## 3. Against the alternatives: redis")
    doc.p()
    doc.p("Debian's `redis-server` (%s) on CPU %s, run with `LD_LIBRARY_PATH` pointing at "
          "`build/jemalloc/libjemalloc.so.2` (the shared jemalloc with symbols that `make` "
          "links from Debian's `libjemalloc_pic.a`: Debian's own `libjemalloc.so.2` is "
          "stripped and heapbpf does not read separate debug info yet) and "
          "`MALLOC_CONF=%s`. Load: `redis-benchmark -t set,get,lpush,lpop -n %d -r 100000 "
          "-d 256 -c 50 -P 16` on CPU %s, 127.0.0.1 only; the figure per run is the "
          "harmonic mean of the four tests' requests/s. All four conditions run in the same "
          "redis process, one after the other in each repetition, in an order that rotates "
          "from one repetition to the next:" % (
              sh("dpkg-query -W -f='${Version}' redis-server"), sorted(tc) if tc else "any",
              ORACLE, S["redis_n"], sorted(oc) if oc else "any"))
    doc.p()
    doc.p("- idle: nobody watching;")
    doc.p("- heapbpf: `heapbpf --pid` attached for the whole run (default sampling, one per "
          "512 KiB);")
    doc.p("- jemalloc always-on: jemalloc's `prof_active` byte set to 1 for the run and back "
          "to 0 (what leaving in-process profiling on costs);")
    doc.p("- bpftrace: a uprobe and a uretprobe on `malloc` (size and address of every "
          "allocation, with its stack, as memleak does) and a uprobe on `free`, with "
          "Debian's bpftrace, filtered to the redis pid (%d requests per test: it is slow)."
          % S["redis_bpftrace_n"])
    doc.p()
    names = {"idle": "idle", "heapbpf": "heapbpf attached", "jemalloc":
             "jemalloc sampling always on", "bpftrace": "bpftrace on every malloc and free"}
    doc.table(["condition", "requests/s", "ratio to idle (per repetition)"],
              [[names[c], spread(rps[c], "{:,.0f}"), spread(ratios[c], "{:.3f}")]
               for c in conds])
    doc.p("heapbpf took %s samples per run." % spread(samples, "{:.0f}"))
    doc.p()
    doc.p("Target: heapbpf attached >= 97%% of idle requests/s: %s" % verdict(
        ok, "median %.3f" % med(ratios["heapbpf"])))
    doc.p()


def shutil_which(tool):
    import shutil
    return shutil.which(tool)


BPFTRACE_PROG = """
uprobe:{lib}:malloc /pid == {pid}/ {{ @size[tid] = arg0; }}
uretprobe:{lib}:malloc /pid == {pid} && @size[tid]/ {{
    @live[retval] = @size[tid]; @stacks[ustack(16)] = count(); delete(@size[tid]);
}}
uprobe:{lib}:free /pid == {pid}/ {{ delete(@live[arg0]); }}
END {{ clear(@live); clear(@size); clear(@stacks); }}
"""


def bpftrace_run(pid, lib, port, n, cpus):
    prog = BPFTRACE_PROG.format(lib=os.path.realpath(lib), pid=pid)
    outpath = os.path.join(hb.TMP, "bpftrace.out")
    env = dict(os.environ, BPFTRACE_MAP_KEYS_MAX="1000000")
    t0 = time.monotonic()
    with open(outpath, "wb") as of:
        bp = subprocess.Popen(["bpftrace", "-e", prog], stdout=of, stderr=of,
                              stdin=subprocess.DEVNULL, env=env, preexec_fn=hb.pin(cpus))
    try:
        deadline = time.monotonic() + 60
        while b"Attaching" not in open(outpath, "rb").read():
            if time.monotonic() > deadline or bp.poll() is not None:
                raise BenchError("bpftrace did not attach: " + open(outpath).read()[-1000:])
            time.sleep(0.05)
        time.sleep(0.5)  # "Attaching" comes just before the probes are live
        t = time.monotonic()
        r = redis_bench(port, n, cpus)
        log("bpftrace: attached in %.1f s, benchmark %.1f s" % (t - t0, time.monotonic() - t))
    finally:
        # bpftrace can take a minute to exit after it has traced many allocations; its
        # output is not needed here, and its probes go away with the process
        if bp.poll() is None:
            bp.send_signal(signal.SIGINT)
            try:
                bp.wait(3)
            except subprocess.TimeoutExpired:
                bp.kill()
                bp.wait()
    return r


# ---- 4. how cost grows ----------------------------------------------------------------------


def isolated(S, frames):
    """trapfloor with a backtrace of frames frames: one record per repetition."""
    out = subprocess.run([hb.path("bench/trapfloor"), str(S["trap_calls"] // 5 or 1),
                          str(S["scale_reps"]), str(frames)], capture_output=True, text=True,
                         timeout=300, preexec_fn=hb.pin(cpus_split()[0]))
    if out.returncode:
        raise BenchError("trapfloor failed: " + out.stderr)
    return [json.loads(line) for line in out.stdout.splitlines() if line]


def bench_scaling(S, doc, res, trap):
    tc, hc = cpus_split()
    rows_lg, rows_t, rows_d = [], [], []
    res["scaling"] = {"lg": {}, "threads": {}, "depth": {}}
    for lg in S["scale_lg"]:
        nbytes = max(S["sample_bytes"] if S is FULL else S["scale_max_bytes"],
                     min(S["scale_max_bytes"], S["scale_samples"] << lg))
        o = sample_cost(ORACLE + ",lg_prof_sample:%d" % lg, ["--bytes", str(nbytes)],
                        S["scale_reps"], tc, hc, "lg_prof_sample %d" % lg)
        res["scaling"]["lg"][lg] = o
        rows_lg.append([str(lg), "%d KiB" % ((1 << lg) // 1024), "%d MiB" % (nbytes // MIB),
                        spread(o["samples"], "{:.0f}"), spread(o["per_sample_ns"], "{:.0f}"),
                        "%.2f" % (med(o["per_sample_ns"]) / trap),
                        spread(o["ratio_att_je"], "{:.3f}"), spread(o["ratio_att_none"],
                                                                     "{:.3f}")])
    nbytes = S["sample_bytes"] if S is FULL else S["scale_max_bytes"]
    for t in S["scale_threads"]:
        o = sample_cost(ORACLE + ",lg_prof_sample:14",
                        ["--bytes", str(nbytes // t), "--threads", str(t)], S["scale_reps"],
                        None, None, "%d threads" % t)
        res["scaling"]["threads"][t] = o
        rows_t.append([str(t), spread(o["samples"], "{:.0f}"),
                       spread(o["per_sample_ns"], "{:.0f}"),
                       "%.2f" % (med(o["per_sample_ns"]) / trap),
                       spread(o["ratio_att_je"], "{:.3f}"), spread(o["drops"], "{:.0f}")])
    for d in S["scale_depth"]:
        o = sample_cost(ORACLE + ",lg_prof_sample:14",
                        ["--bytes", str(nbytes), "--depth", str(d)], S["scale_reps"], tc, hc,
                        "depth %d" % d)
        iso = isolated(S, min(d + 6, 128))
        o["isolated"] = iso
        res["scaling"]["depth"][d] = o
        rows_d.append([str(d), str(min(d + 6, 128)),
                       spread([r["heapbpf_ns"] for r in iso], "{:.0f}"),
                       spread([r["heapbpf_ns"] / r["trap_ns"] for r in iso], "{:.2f}"),
                       spread(o["per_sample_ns"], "{:.0f}"),
                       spread(o["ratio_att_je"], "{:.3f}"), spread(o["ratio_je_none"],
                                                                   "{:.3f}")])
    doc.p("## 4. How cost grows")
    doc.p()
    doc.p("The microbenchmark of section 2 (allocation path, objects kept), one process per "
          "row, %d repetitions of `je` / attached / `none` windows. \"x trap\" is the median "
          "added cost per sample over the median bare uprobe hit of section 2 (%.0f ns). "
          "Throughput ratios are wall-time ratios per pair." % (S["scale_reps"], trap))
    doc.p()
    doc.p("### Sampling rate")
    doc.p()
    doc.p("The window's size grows with the sampling interval (up to %d MiB, kept in memory) "
          "so that rows take thousands of samples where memory allows. The in-process "
          "difference per sample is noise once a window holds only a few hundred samples "
          "(its spread says so): read the throughput ratios here, and section 2's isolated "
          "figure for the cost of one sample, which does not depend on the rate." % (
              S["scale_max_bytes"] // MIB))
    doc.p()
    doc.table(["lg_prof_sample", "interval", "window", "samples", "added ns/sample",
               "x trap", "attached / `je`", "attached / `none`"], rows_lg)
    doc.p("### Threads")
    doc.p()
    doc.p("`lg_prof_sample:14`, %d MiB in total split over the threads, no CPU pinning "
          "(%d CPUs): CPU time is summed over threads." % (nbytes // MIB, os.cpu_count()))
    doc.p()
    doc.table(["threads", "samples", "added ns/sample (CPU)", "x trap", "attached / `je`",
               "drops"], rows_t)
    doc.p("### Stack depth")
    doc.p()
    doc.p("Nested calls before `malloc` (jemalloc's backtrace is about 6 frames longer; "
          "jemalloc keeps at most 128). \"Isolated\" is heapbpf's allocation program on the "
          "stand-in of section 2 with a backtrace of that many frames (`bench/trapfloor "
          "CALLS REPS FRAMES`), against the bare hit measured in the same repetition; "
          "\"in process\" is the microbenchmark's difference, noisy as in section 2.")
    doc.p()
    doc.table(["nested calls", "backtrace frames", "isolated ns/hit", "isolated x trap",
               "in process: added ns/sample", "attached / `je`", "`je` / `none`"], rows_d)


# ---- 5. collector ---------------------------------------------------------------------------


def bench_collector(S, doc, res):
    rates = []
    info = None
    for _ in range(S["collector_reps"]):
        out = subprocess.run([hb.path("bench/userbench"), "collector",
                              str(S["collector_events"]), "2000", "8"], capture_output=True,
                             text=True, timeout=300)
        if out.returncode:
            raise BenchError("userbench collector failed: " + out.stderr)
        info = json.loads(out.stdout)
        rates.append(info["events_per_s"])
    log("collector: %s events/s" % spread(rates, "{:,.0f}"))
    # live: the highest sample rate heapbpf keeps up with, default ring buffer
    live = []
    for lg in S["rate_lg"]:
        with hb.Micro(ORACLE + ",lg_prof_sample:%d" % lg,
                      ["--seconds", str(S["rate_seconds"]), "--threads", "2", "--size-min",
                       "16", "--size-max", "512", "--depth", "4"]) as m:
            saved = hb.RINGBUF_MIB
            hb.RINGBUF_MIB = "16"  # heapbpf's default
            try:
                r = m.attached()
            finally:
                hb.RINGBUF_MIB = saved
        h = r["hb"]
        secs = r["wall_ns"] / 1e9
        live.append(dict(lg=lg, samples_per_s=h["alloc_hits"] / secs,
                         events_per_s=(h["alloc_hits"] + h["free_hits"]) / secs,
                         drops=h["alloc_drops"] + h["free_drops"], rss_kib=h["peak_rss_kib"],
                         cpu_util=r["cpu_ns"] / r["wall_ns"]))
        log("live lg %d: %.0f samples/s, %d drops" % (lg, live[-1]["samples_per_s"],
                                                     live[-1]["drops"]))
    best = max([x["samples_per_s"] for x in live if x["drops"] == 0] or [0])
    res["collector"] = dict(events_per_s=rates, info=info, live=live, best_live=best)
    doc.p("## 5. Collector")
    doc.p()
    doc.p("**Aggregation on one core.** Not a replayed recording (`heapbpf --record` landed "
          "while this suite was written; replaying a real recording here is a follow-up): "
          "`bench/userbench collector` (linked with heapbpf's own collector objects) feeds %s "
          "synthetic "
          "ring-buffer records to `collector__event`, as libbpf hands them over: 2000 "
          "distinct backtraces of 8-40 frames with Zipf-like popularity (s = 1.1), one tctx "
          "per (stack, thread) over 8 threads, and 3 frees of sampled objects per 4 "
          "sampled allocations, each naming the tctx of a live sample as jemalloc 5.3.0 "
          "does. CPU time of the aggregation loop only." % "{:,}".format(
              S["collector_events"]))
    doc.p()
    doc.table(["measure", "value"], [
        ["events aggregated per second", spread(rates, "{:,.0f}")],
        ["distinct stacks seen", str(info["stacks"])],
        ["peak RSS of the bench program", "%.1f MiB" % (info["peak_rss_kib"] / 1024)],
    ])
    doc.p("Target: >= 1M events/s: %s" % verdict(med(rates) >= TARGETS["collector"],
                                                "%.2fM/s" % (med(rates) / 1e6)))
    doc.p()
    doc.p("**Live sample rate.** The microbenchmark with 2 threads (16-512 byte objects, "
          "freed at once) for %.1f s while heapbpf profiles it with its default 16 MiB ring "
          "buffer, at rising sampling rates; every sampled object is also freed, so each "
          "sample is two events." % S["rate_seconds"])
    doc.p()
    doc.table(["lg_prof_sample", "samples/s", "events/s", "drops", "target CPU use",
               "heapbpf peak RSS"],
              [[str(x["lg"]), "{:,.0f}".format(x["samples_per_s"]),
                "{:,.0f}".format(x["events_per_s"]), str(x["drops"]),
                "%.2f cores" % x["cpu_util"], "%.1f MiB" % (x["rss_kib"] / 1024)]
               for x in live])
    dropped = [x for x in live if x["drops"]]
    why = "%.0f samples/s was the highest rate reached with zero drops" % best
    if not dropped:
        why += ("; heapbpf dropped nothing at any rate tried, so the limit was the target "
                "itself: it got %.2f of %d cores at best (jemalloc unwinds every sampled "
                "stack, then the trap), with other work on the machine" % (
                    max(x["cpu_util"] for x in live), os.cpu_count()))
    doc.p("Target: highest sustained live sample rate with zero drops >= 50k samples/s: %s" %
          verdict(best >= TARGETS["live_rate"], why))
    doc.p()


# a large binary every machine with clang has (clang -> libclang-cpp -> libllvm)
BIG_OBJECT = "/usr/lib/x86_64-linux-gnu/libLLVM-14.so.1"


# ---- 7. recordings ---------------------------------------------------------------------------

RECORDED_RE = re.compile(r"recorded (\d+) samples and (\d+) frees to .* \((\d+) bytes, "
                         r"(\d+) uncompressed\)")


def bench_recording(S, doc, res):
    rows = []
    for _ in range(S["record_reps"]):
        env = dict(os.environ, MALLOC_CONF=ORACLE)
        svc = subprocess.Popen([hb.path("examples/alloc-service-static"), "--threads", "4"],
                               env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
        try:
            time.sleep(0.5)
            rec = os.path.join(hb.TMP, "bench.hbr")
            out = subprocess.run([hb.HEAPBPF or hb.path("heapbpf"), "--pid", str(svc.pid),
                                  "--duration", str(S["record_seconds"]), "--record", rec],
                                 capture_output=True, text=True,
                                 timeout=S["record_seconds"] + 60)
        finally:
            hb.kill_wait(svc)
        m = RECORDED_RE.search(out.stderr)
        if out.returncode or not m:
            raise BenchError("heapbpf --record failed (%d):\n%s" % (out.returncode,
                                                                   out.stderr[-2000:]))
        samples, frees, size, raw = map(int, m.groups())
        if size != os.path.getsize(rec):
            raise BenchError("recording size %d != %d on disk" % (size, os.path.getsize(rec)))
        rows.append(dict(samples=samples, frees=frees, size=size, raw=raw))
    per_sample = [r["size"] / r["samples"] for r in rows if r["samples"]]
    raw_per_sample = [r["raw"] / r["samples"] for r in rows if r["samples"]]
    per_event = [r["size"] / (r["samples"] + r["frees"]) for r in rows if r["samples"]]
    ratio = [r["raw"] / r["size"] for r in rows if r["size"]]
    res["recording"] = dict(rows=rows)
    log("recording: %s bytes/sample" % spread(per_sample, "{:.1f}"))
    doc.p("## 7. Recordings")
    doc.p()
    doc.p("`heapbpf --pid N --duration %.1f --record FILE` on the example service "
          "(`alloc-service-static --threads 4`, its default 20,000 operations/s per thread, "
          "`prof:true,prof_active:false`, default sampling), %d times. The file holds every "
          "sampled allocation (64 bytes plus 8 per frame) and every free of a sampled "
          "object (64 bytes), each with an 8-byte header and a 4-byte CRC, zstd level 3, "
          "flushed every second; \"uncompressed\" is that record stream before "
          "compression, as heapbpf counts it." % (S["record_seconds"], S["record_reps"]))
    doc.p()
    doc.table(["measure", "value"], [
        ["samples per recording", spread([r["samples"] for r in rows], "{:,.0f}")],
        ["frees of sampled objects per recording", spread([r["frees"] for r in rows],
                                                          "{:,.0f}")],
        ["file size (bytes)", spread([r["size"] for r in rows], "{:,.0f}")],
        ["bytes per sample, file", spread(per_sample, "{:.1f}")],
        ["bytes per event (sample or free), file", spread(per_event, "{:.1f}")],
        ["bytes per sample, uncompressed stream", spread(raw_per_sample, "{:.1f}")],
        ["uncompressed / file", spread(ratio, "{:.1f}")],
    ])
    doc.p()


# ---- 6. footprint ---------------------------------------------------------------------------


def bench_footprint(S, doc, res, attach_ms, stop_ms):
    n = S["unique_stacks"]
    # sampled with certainty: 16 KiB objects, one sample per 1 KiB on average
    with hb.Micro(ORACLE + ",lg_prof_sample:10",
                  ["--unique-stacks", str(n), "--size-min", "16384", "--size-max",
                   "16384"]) as m:
        saved = hb.RINGBUF_MIB
        hb.RINGBUF_MIB = "16"
        try:
            r = m.attached(extra=["-f", "folded", "-t", "alloc_objects"])
        finally:
            hb.RINGBUF_MIB = saved
    h = r["hb"]
    mem = h.get("mem_before_stop", {})
    with open(os.path.join(hb.TMP, "micro.pb.gz")) as f:
        stacks = sum(1 for line in f if line.strip())
    sym = []
    sinfo = None
    for _ in range(S["sym_reps"]):
        out = subprocess.run([hb.path("bench/userbench"), "symbolize", str(S["sym_frames"])],
                             capture_output=True, text=True, timeout=600)
        if out.returncode:
            raise BenchError("userbench symbolize failed: " + out.stderr)
        sinfo = json.loads(out.stdout)
        sym.append(sinfo["wall_ns"] / 1e6)
    big = None
    if os.path.exists(BIG_OBJECT):
        out = subprocess.run([hb.path("bench/userbench"), "symbolize-object",
                              str(S["sym_frames"]), BIG_OBJECT],
                             capture_output=True, text=True, timeout=600)
        if out.returncode:
            raise BenchError("userbench symbolize-object failed: " + out.stderr)
        big = json.loads(out.stdout)
    rss = h["peak_rss_kib"] / 1024
    res["footprint"] = dict(big_object=big, samples=h["alloc_hits"], stacks=stacks, rss_mib=rss,
                            stop_ms=h["stop_ns"] / 1e6, attach_ms=h["attach_ns"] / 1e6,
                            drops=h["alloc_drops"] + h["free_drops"], sym_ms=sym, sym=sinfo,
                            attach_all=attach_ms, stop_all=stop_ms)
    log("footprint: %d stacks, %.1f MiB, stop %.0f ms" % (stacks, rss, h["stop_ns"] / 1e6))
    doc.p("## 6. heapbpf's own footprint")
    doc.p()
    doc.p("**100k unique stacks.** The microbenchmark allocates and frees 16 KiB once through "
          "each of %s distinct call paths (17 levels of a binary choice of call site) with "
          "`lg_prof_sample:10`, so nearly every allocation is sampled; heapbpf profiles it "
          "with its default ring buffer, `-f folded`, peak RSS from `wait4`." % "{:,}".format(n))
    doc.p()
    doc.p("**Latencies.** Attach: from starting `heapbpf --pid` to the target seeing "
          "`prof_active` on (it polls every 0.2 ms), i.e. BPF load, jemalloc discovery, uprobe "
          "attach and the flag write. Stop: from SIGINT to heapbpf's exit, its profile written "
          "(fsync, rename); no network is involved (heapbpf has no exporter yet). Measured over "
          "all attached windows of sections 2 and 4 (thousands of samples on one stack) and on "
          "the 100k-stack run.")
    doc.p()
    doc.p("**Symbolization.** `bench/userbench symbolize %d`: a cold symbolizer "
          "(`symbolizer__new`, then `symbolizer__lookup` of %d distinct addresses spread "
          "evenly over the executable mappings of the bench program itself: %d objects, "
          "among them libc, libelf, libdw, libbpf, libz)." % (
              S["sym_frames"], sinfo["frames"], sinfo["objects"]))
    doc.p()
    doc.p("Where a stop's time goes, from one `strace -tt` of `heapbpf` stopping after a "
          "one-stack run (outside this suite, same machine): 50 ms draining the ring buffer "
          "after the flag is restored (`DRAIN_MS`), then about 120 ms for each of the two "
          "uprobe detaches (the kernel waits for a grace period per uprobe), then about "
          "230 ms building the report, mostly loading symbols and DWARF of the target's "
          "objects; writing and fsync take milliseconds. Batching the two detaches, or "
          "writing the profile before detaching, would take most of it away.")
    doc.p()
    doc.table(["measure", "value", "target", "verdict"], [
        ["samples in the 100k-stack run", "{:,}".format(h["alloc_hits"]), "", ""],
        ["distinct stacks in heapbpf's folded output", "{:,}".format(stacks), "", ""],
        ["heapbpf RSS just before stop, 100k-stack run (anonymous + file-backed)",
         "%.1f MiB (%.1f + %.1f)" % (mem.get("VmRSS", 0) / 1024, mem.get("RssAnon", 0) / 1024,
                                     mem.get("RssFile", 0) / 1024), "", ""],
        ["heapbpf peak RSS, 100k-stack run", "%.1f MiB" % rss, "<= 64 MiB",
         verdict(rss <= TARGETS["rss_mib"],
                 "while collecting, heapbpf holds the collector's %s stacks (anonymous "
                 "memory) and its ring buffer, which libbpf's consumer maps twice "
                 "(file-backed, 2 x 16 MiB once touched) besides its own binary and "
                 "libraries; the peak comes after the stop, when the report is built "
                 "(symbolization, the profile in memory, its encoding)" % "{:,}".format(n))],
        ["attach latency, pid -> sampling on (ms)", spread(attach_ms, "{:.0f}"), "<= 250 ms",
         verdict(med(attach_ms) <= TARGETS["attach_ms"] and max(attach_ms) <= 250,
                 "worst case %.0f ms" % max(attach_ms))],
        ["stop -> file written (ms), one-stack runs", spread(stop_ms, "{:.0f}"), "<= 500 ms",
         verdict(max(stop_ms) <= TARGETS["stop_ms"], "worst case %.0f ms" % max(stop_ms))],
        ["stop -> file written, 100k-stack run (ms)", "%.0f" % (h["stop_ns"] / 1e6),
         "<= 500 ms", verdict(h["stop_ns"] / 1e6 <= TARGETS["stop_ms"],
                              "symbolizing and writing %s stacks" % "{:,}".format(stacks))],
        ["symbolization of %d unique frames (ms)" % sinfo["frames"], spread(sym, "{:.0f}"),
         "(none)", "%d of %d named" % (sinfo["named"], sinfo["frames"])],
    ] + ([
        ["symbolization of %d unique frames in one %.0f MiB object, cold (ms)" % (
            big["frames"], big["object_bytes"] / MIB), "%.0f" % (big["cold_ns"] / 1e6),
         "(none)", "`%s` (%.0f MiB of code, `.dynsym` names: Debian strips its `.symtab`); "
         "%d of %d named" % (BIG_OBJECT, big["text_bytes"] / MIB, big["named"], big["frames"])],
        ["same, a second profile of that object in the same process (ms)",
         "%.0f" % (big["warm_ns"] / 1e6), "(none)",
         "its debug-info search and DWARF are cached by build-id"],
    ] if big else []))


# ---- main -----------------------------------------------------------------------------------


def timed(name, fn, *args):
    t = time.monotonic()
    r = fn(*args)
    log("%s took %.1f s" % (name, time.monotonic() - t))
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--build", default="build")
    ap.add_argument("--out", default="BENCHMARKS.md")
    ap.add_argument("--json", help="also write the raw results here")
    ap.add_argument("--smoke", action="store_true", help="each benchmark once, tiny")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench: needs root (BPF, uprobes); run: sudo make bench")
    hb.BUILD = a.build
    S = SMOKE if a.smoke else FULL
    if not a.smoke:
        # other work skews every number: give it a bounded chance to finish first
        deadline = time.monotonic() + 180
        while float(open("/proc/loadavg").read().split()[0]) > 1.5 and \
                time.monotonic() < deadline:
            time.sleep(5)
    t0 = time.monotonic()
    doc, res = Doc(), {}
    doc.p("# heapbpf benchmarks")
    doc.p()
    doc.p("Produced by `sudo make bench` (`python3 bench/run.py --build build --out "
          "BENCHMARKS.md`) on the machine below%s. Numbers are medians with [min – max] and "
          "the number of repetitions; ratios are computed pair by pair within this run. This "
          "is a shared 2-CPU virtual machine: treat differences of a few percent as noise, "
          "and compare numbers only within this file." %
          (" — SMOKE RUN, tiny sizes, numbers meaningless" if a.smoke else ""))
    doc.p()
    doc.table(["", "machine"], [[k, v] for k, v in machine()])
    body = Doc()
    timed("idle", bench_idle, S, body, res)
    alloc = timed("per sample", bench_per_sample, S, body, res)
    timed("redis", bench_redis, S, body, res)
    trap = med(res["trap_ns"])
    timed("scaling", bench_scaling, S, body, res, trap)
    timed("collector", bench_collector, S, body, res)
    attach_ms, stop_ms = list(alloc["attach_ms"]), list(alloc["stop_ms"])
    for kind in res["scaling"].values():
        for o in kind.values():
            attach_ms += o["attach_ms"]
            stop_ms += o["stop_ms"]
    timed("footprint", bench_footprint, S, body, res, attach_ms, stop_ms)
    timed("recording", bench_recording, S, body, res)
    elapsed = time.monotonic() - t0

    summary = [
        ["1", "idle: throughput after detach / before", ">= 0.99",
         "%.3f" % med(res["idle"]["ratio_after"]), med(res["idle"]["ratio_after"]) >= 0.99],
        ["2", "heapbpf's cost per sample / one uprobe hit", "<= 1.2",
         "%.2f" % res["per_sample_ratio"], res["per_sample_ratio"] <= 1.2],
        ["3", "redis requests/s, heapbpf attached / idle", ">= 0.97",
         "%.3f" % med(res["redis"]["ratios"]["heapbpf"]),
         med(res["redis"]["ratios"]["heapbpf"]) >= 0.97],
        ["5", "collector events/s, one core", ">= 1M",
         "%.2fM" % (med(res["collector"]["events_per_s"]) / 1e6),
         med(res["collector"]["events_per_s"]) >= 1e6],
        ["5", "live samples/s with zero drops", ">= 50k",
         "%.0fk" % (res["collector"]["best_live"] / 1e3), res["collector"]["best_live"] >= 5e4],
        ["6", "peak RSS, 100k unique stacks", "<= 64 MiB",
         "%.1f MiB" % res["footprint"]["rss_mib"], res["footprint"]["rss_mib"] <= 64],
        ["6", "attach latency (worst)", "<= 250 ms", "%.0f ms" % max(attach_ms),
         max(attach_ms) <= 250],
        ["6", "stop -> files written (worst, incl. 100k stacks)", "<= 500 ms",
         "%.0f ms" % max(stop_ms + [res["footprint"]["stop_ms"]]),
         max(stop_ms + [res["footprint"]["stop_ms"]]) <= 500],
    ]
    doc.p("## Targets")
    doc.p()
    doc.table(["§", "target", "wanted", "measured", "verdict"],
              [r[:4] + ["**met**" if r[4] else "**not met** (see §%s)" % r[0]]
               for r in summary])
    doc.p("The whole suite took %.0f s; load average at the end: %s (other work on this "
          "shared machine during the run shows up here, and in the spreads)." % (
              elapsed, " ".join(open("/proc/loadavg").read().split()[:3])))
    doc.p()
    text = doc.text() + "\n" + body.text()
    check_wellformed(text)
    tmp = a.out + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, a.out)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1, default=str)
    log("wrote %s in %.0f s" % (a.out, elapsed))


SECTIONS = ["## 1. Idle cost", "## 2. Cost while profiling, per sample",
            "## 3. Against the alternatives: redis", "## 4. How cost grows",
            "### Sampling rate", "### Threads", "### Stack depth", "## 5. Collector",
            "## 6. heapbpf's own footprint", "## 7. Recordings", "## Targets"]


def check_wellformed(text):
    """Every section present, every table rectangular with a row, no NaN, every
    target with a verdict."""
    for s in SECTIONS:
        if s not in text:
            raise BenchError("report lacks section %r" % s)
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].startswith("|"):
            cols = lines[i].count("|")
            j = i
            while j < len(lines) and lines[j].startswith("|"):
                if lines[j].count("|") != cols:
                    raise BenchError("ragged table row: %r" % lines[j])
                j += 1
            if j - i < 3:
                raise BenchError("table without rows at %r" % lines[i])
            i = j
        else:
            i += 1
    if re.search(r"\bnan\b|\binf\b", text, re.I):
        raise BenchError("report holds NaN or inf")
    if text.count("Target") < 6 or not re.search(r"\*\*(not )?met\*\*", text):
        raise BenchError("report lacks target verdicts")


if __name__ == "__main__":
    try:
        main()
    except BenchError as e:
        sys.exit("bench: " + str(e))
    finally:
        subprocess.run(["rm", "-rf", hb.TMP])
