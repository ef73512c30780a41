#!/usr/bin/env python3
"""heapbpf's benchmark suite, measuring part: runs every benchmark and writes
its raw results, with the machine and the settings they were taken with, to
one JSON file (--json, default BUILD/bench/results.json). bench/report.py
turns that file into BENCHMARKS.md, with every target marked met or not met;
`make bench` runs both, `make bench-report` only the second, so a report can
be rewritten from a saved results file without measuring again. `make test`
runs both once at tiny size (--smoke) to check that every benchmark works and
that its report is well formed. Nothing here asserts a time or knows a target.

Each comparison is made pair by pair within one run: the conditions compared
alternate, in the same process where possible, and ratios are computed per
pair (the reporting part takes medians of them). Every process started here
is ended here; every loop is bounded by count and by time; traffic goes to
127.0.0.1 only. The target-process helpers are bench/hb.py's.
"""

import argparse
import json
import os
import platform
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hb  # noqa: E402
from bpfstats import bench_bpfstats  # noqa: E402
from hb import BenchError, spread  # noqa: E402
from services import bench_services  # noqa: E402

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
    bpfstats_reps=3, bpfstats_trap_calls=200000, bpfstats_lg=18, bpfstats_seconds=3.0,
    unit_procs=64, unit_seconds=5.0, unit_rate=2000,
    watch_seconds=240, watch_lg=12, watch_threads=4,
    agent_procs=64, agent_budget=16, agent_seconds=120, agent_rate=200, agent_interval=10,
    rss_fill_mib=2048, rss_fragment_mib=2048, rss_reps=3,
    watch_rss_fill_mib=1024, watch_rss_fragment_mib=1024, watch_rss_seconds=120,
    watch_rss_threads=1, watch_rss_redis_n=3000000,
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
    bpfstats_reps=1, bpfstats_trap_calls=10000, bpfstats_lg=16, bpfstats_seconds=0.5,
    unit_procs=4, unit_seconds=1.0, unit_rate=2000,
    watch_seconds=4, watch_lg=12, watch_threads=2,
    agent_procs=4, agent_budget=2, agent_seconds=4, agent_rate=200, agent_interval=1,
    rss_fill_mib=16, rss_fragment_mib=16, rss_reps=1,
    watch_rss_fill_mib=16, watch_rss_fragment_mib=16, watch_rss_seconds=4,
    watch_rss_threads=1, watch_rss_redis_n=20000,
)

# a large binary every machine with clang has (clang -> libclang-cpp -> libllvm)
BIG_OBJECT = "/usr/lib/x86_64-linux-gnu/libLLVM-14.so.1"


def log(msg):
    print("bench: " + msg, file=sys.stderr, flush=True)


def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True,
                              timeout=30).stdout.strip()
    except subprocess.TimeoutExpired:
        return ""


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


# ---- the machine ----------------------------------------------------------------------------


def machine():
    cpu = "?"
    with open("/proc/cpuinfo") as f:
        cpuinfo = f.read()
    for line in cpuinfo.splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    mem = 0
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal"):
                mem = int(line.split()[1]) // 1024
    virt = sh("systemd-detect-virt 2>/dev/null") or (
        "yes (hypervisor flag)" if "hypervisor" in cpuinfo else "no")
    debian = sh("cat /etc/debian_version")
    return [
        ["CPU", "%s, %d logical CPUs" % (cpu, os.cpu_count())],
        ["memory", "%d MiB" % mem],
        ["virtualized", virt],
        ["kernel", platform.release()],
        ["distribution", "Debian " + debian],
        ["jemalloc", sh("dpkg-query -W -f='${Version}' libjemalloc-dev") +
         " (Debian's libjemalloc.a / libjemalloc_pic.a)"],
        ["libbpf", sh("dpkg-query -W -f='${Version}' libbpf1")],
        ["redis", sh("dpkg-query -W -f='${Version}' redis-server")],
        ["bpftrace", sh("dpkg-query -W -f='${Version}' bpftrace")],
        ["load average at start (1, 5, 15 min)", loadavg()],
        ["heapbpf", sh("git -C %s describe --always --dirty 2>/dev/null" %
                       shlex.quote(os.path.dirname(os.path.abspath(__file__))))],
    ]


# ---- 1. idle cost ---------------------------------------------------------------------------


def bench_idle(S, res):
    """prof:false vs prof:true,prof_active:false never attached vs the same
    process after heapbpf attached, profiled and detached."""
    rows = {"off": [], "idle": [], "after": []}
    r_idle, r_after, r_after_off = [], [], []
    w = S["idle_window"]
    tc, hc = hb.cpus_split()
    for rep in range(S["idle_reps"]):
        svc = hb.Service("prof:false", cpus=tc)
        try:
            time.sleep(w / 2)
            off = svc.throughput(w)
        finally:
            svc.close()
        svc = hb.Service(ORACLE, cpus=tc)
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
    res["idle"] = dict(off=rows["off"], idle=rows["idle"], after=rows["after"],
                       ratio_idle=r_idle, ratio_after=r_after, ratio_after_off=r_after_off)


# ---- 2. cost per sample ---------------------------------------------------------------------


def bench_trap(S, res):
    recs = hb.trapfloor(S["trap_calls"], S["trap_reps"],
                        cpus={1} if os.cpu_count() > 1 else None)
    traps = [r["trap_ns"] for r in recs]
    res["trap_ns"] = traps
    res["heapbpf_prog_ns"] = [r["heapbpf_ns"] for r in recs]
    res["heapbpf_prog_ratio"] = [r["heapbpf_ns"] / r["trap_ns"] for r in recs]
    res["heapbpf_prog_hits_ok"] = all(r["heapbpf_hits"] == r["calls"] and
                                      not r["heapbpf_read_faults"] for r in recs)
    log("bare uprobe hit: %s ns, with heapbpf's program %s ns" % (
        spread(traps, "{:.0f}"), spread(res["heapbpf_prog_ns"], "{:.0f}")))


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


def bench_per_sample(S, res):
    bench_trap(S, res)
    tc, hc = hb.cpus_split()
    conf = ORACLE + ",lg_prof_sample:14"
    alloc = sample_cost(conf, ["--bytes", str(S["sample_bytes"])], S["sample_reps"], tc, hc,
                        "allocation path")
    churn = sample_cost(conf, ["--bytes", str(S["churn_bytes"]), "--churn"], S["churn_reps"],
                        tc, hc, "allocation and free paths")
    res["per_sample"] = dict(alloc=alloc, churn=churn)


# ---- 3. redis -------------------------------------------------------------------------------


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
        errpath = os.path.join(hb.tmp(), "redis-heapbpf.err")
        with open(errpath, "wb") as ef:
            hp = subprocess.Popen(hb.heapbpf_argv(p.pid, os.path.join(hb.tmp(), "redis.pb.gz")),
                                  stdout=ef, stderr=ef, stdin=subprocess.DEVNULL,
                                  preexec_fn=hb.pin(oc))
        try:
            deadline = time.monotonic() + 30
            while hb.peek(p.pid, flag) != 1:
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
        hb.poke(p.pid, flag, 1)
        try:
            rps[c].append(redis_bench(port, S["redis_n"], oc))
        finally:
            hb.poke(p.pid, flag, 0)
    else:
        # a uprobe on every malloc and free, memleak-style, with bpftrace
        rps[c].append(bpftrace_run(p.pid, je, port, S["redis_bpftrace_n"], oc))


REDIS_CONDITIONS = ["idle", "heapbpf", "jemalloc", "bpftrace"]


def bench_redis(S, res):
    je = hb.path("jemalloc/libjemalloc.so.2")
    for tool in ("redis-server", "redis-benchmark", "bpftrace"):
        if not shutil.which(tool):
            raise BenchError("%s is missing: run make deps (scripts/install-deps.sh)" % tool)
    tc, oc = hb.cpus_split()
    port = hb.free_port()
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(os.path.abspath(je)),
               MALLOC_CONF=ORACLE)
    p = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                          "--save", "", "--appendonly", "no", "--daemonize", "no",
                          "--loglevel", "warning"],
                         env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         stdin=subprocess.DEVNULL, preexec_fn=hb.pin(tc))
    conds = REDIS_CONDITIONS
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
        flag = hb.sym_addr(p.pid, je, "je_prof_active_state")
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
    res["redis"] = dict(rps=rps, ratios=ratios, samples=samples, malloc_conf=ORACLE)


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
    outpath = os.path.join(hb.tmp(), "bpftrace.out")
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
    return hb.trapfloor(S["trap_calls"] // 5 or 1, S["scale_reps"], frames,
                        hb.cpus_split()[0])


def bench_scaling(S, res, smoke):
    """One sample_cost per row; each row records what it varied (lg, threads or
    depth) and its window size in bytes."""
    tc, hc = hb.cpus_split()
    sc = res["scaling"] = {"lg": [], "threads": [], "depth": []}
    for lg in S["scale_lg"]:
        nbytes = max(S["scale_max_bytes"] if smoke else S["sample_bytes"],
                     min(S["scale_max_bytes"], S["scale_samples"] << lg))
        o = sample_cost(ORACLE + ",lg_prof_sample:%d" % lg, ["--bytes", str(nbytes)],
                        S["scale_reps"], tc, hc, "lg_prof_sample %d" % lg)
        sc["lg"].append(dict(o, lg=lg, bytes=nbytes))
    nbytes = S["scale_max_bytes"] if smoke else S["sample_bytes"]
    sc["bytes"] = nbytes
    for t in S["scale_threads"]:
        o = sample_cost(ORACLE + ",lg_prof_sample:14",
                        ["--bytes", str(nbytes // t), "--threads", str(t)], S["scale_reps"],
                        None, None, "%d threads" % t)
        sc["threads"].append(dict(o, threads=t, bytes=nbytes))
    for d in S["scale_depth"]:
        o = sample_cost(ORACLE + ",lg_prof_sample:14",
                        ["--bytes", str(nbytes), "--depth", str(d)], S["scale_reps"], tc, hc,
                        "depth %d" % d)
        frames = min(d + 6, 128)
        o["isolated"] = isolated(S, frames)
        sc["depth"].append(dict(o, depth=d, frames=frames, bytes=nbytes))


# ---- 5. collector ---------------------------------------------------------------------------


def bench_collector(S, res):
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
            saved, rb = hb.RINGBUF_MIB, default_ringbuf_mib()
            hb.RINGBUF_MIB = rb  # heapbpf's default, as its --help says
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
    res["collector"] = dict(events_per_s=rates, info=info, live=live, best_live=best,
                            ringbuf_mib=int(default_ringbuf_mib()))


# ---- 6. footprint ---------------------------------------------------------------------------


def default_ringbuf_mib():
    """heapbpf's default --ringbuf-size in MiB, as its --help says."""
    out = subprocess.run([hb.heapbpf_bin(), "--help"], capture_output=True, text=True,
                         timeout=60)
    m = re.search(r"--ringbuf-size SIZE .*\(default (\d+)", out.stdout + out.stderr)
    if not m:
        raise BenchError("heapbpf --help names no default --ringbuf-size")
    return m.group(1)


def bench_footprint(S, res):
    n = S["unique_stacks"]
    # sampled with certainty: 16 KiB objects, one sample per 1 KiB on average
    with hb.Micro(ORACLE + ",lg_prof_sample:10",
                  ["--unique-stacks", str(n), "--size-min", "16384", "--size-max",
                   "16384"]) as m:
        saved, rb = hb.RINGBUF_MIB, default_ringbuf_mib()
        hb.RINGBUF_MIB = rb
        try:
            r = m.attached(extra=["-f", "folded", "-t", "alloc_objects"])
        finally:
            hb.RINGBUF_MIB = saved
    h = r["hb"]
    with open(os.path.join(hb.tmp(), "micro.folded")) as f:
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
        big["path"] = BIG_OBJECT
    rss = h["peak_rss_kib"] / 1024
    res["footprint"] = dict(big_object=big, samples=h["alloc_hits"], stacks=stacks, rss_mib=rss,
                            ringbuf_mib=int(rb),
                            stop_ms=h["stop_ns"] / 1e6, attach_ms=h["attach_ns"] / 1e6,
                            drops=h["alloc_drops"] + h["free_drops"], sym_ms=sym, sym=sinfo,
                            mem_before_stop=h.get("mem_before_stop", {}))
    log("footprint: %d stacks, %.1f MiB, stop %.0f ms" % (stacks, rss, h["stop_ns"] / 1e6))


# ---- 7. recordings --------------------------------------------------------------------------

RECORDED_RE = re.compile(r"recorded (\d+) samples and (\d+) frees to .* \((\d+) bytes, "
                         r"(\d+) uncompressed\)")


def bench_recording(S, res):
    rows = []
    for _ in range(S["record_reps"]):
        env = dict(os.environ, MALLOC_CONF=ORACLE)
        svc = subprocess.Popen([hb.path("examples/alloc-service-static"), "--threads", "4"],
                               env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
        try:
            time.sleep(0.5)
            rec = os.path.join(hb.tmp(), "bench.hbr")
            out = subprocess.run([hb.heapbpf_bin(), "--pid", str(svc.pid),
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
    res["recording"] = dict(rows=rows)
    log("recording: %s bytes/sample" % spread(per_sample, "{:.1f}"))


# ---- 6b. many targets: one --unit ----------------------------------------------------------


def cgroup2_root():
    """Where the cgroup2 hierarchy is mounted (hybrid or unified)."""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            pre, _, post = line.partition(" - ")
            if post.split()[:1] == ["cgroup2"]:
                return pre.split()[4]
    raise BenchError("no cgroup2 hierarchy mounted")


def tree_rss_kib(root):
    """VmRSS of root and every descendant, summed, and how many processes that is."""
    kids = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(d))
    total, n, todo = 0, 0, [root]
    while todo:
        pid = todo.pop()
        try:
            with open("/proc/%d/status" % pid) as f:
                total += next(int(x.split()[1]) for x in f if x.startswith("VmRSS:"))
            n += 1
        except (OSError, StopIteration):
            pass
        todo += kids.get(pid, [])
    return total, n


def bench_unit(S, res):
    """unit_procs example processes in one cgroup laid out as systemd lays out a unit
    (system.slice/NAME.service, as tests/integration/test_fleet.c does), profiled by one
    `heapbpf --unit` for unit_seconds: the RSS of heapbpf and every process it starts,
    summed every 0.1 s (its peak), wait4's peak RSS of heapbpf itself, and the snapshots
    written."""
    n, secs = S["unit_procs"], S["unit_seconds"]
    name = "heapbpf-bench-%d" % os.getpid()
    cg = os.path.join(cgroup2_root(), "system.slice", name + ".service")
    out = os.path.join(hb.tmp(), "unit")
    env = dict(os.environ, MALLOC_CONF=ORACLE)
    svcs = []
    made_slice = not os.path.isdir(os.path.dirname(cg))
    os.makedirs(cg, exist_ok=True)
    try:
        for _ in range(n):
            p = subprocess.Popen([hb.path("examples/alloc-service-static"), "--threads", "1",
                                  "--rate", str(S["unit_rate"])], env=env,
                                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
            svcs.append(p)
            with open(os.path.join(cg, "cgroup.procs"), "w") as f:
                f.write("%d\n" % p.pid)
        time.sleep(0.5)
        t0 = time.monotonic()
        hp = subprocess.Popen([hb.heapbpf_bin(), "--unit", name, "-d", str(secs), "-q",
                               "--output-dir", out], stderr=subprocess.PIPE, text=True)
        peak, procs, done = 0, 0, None
        while done is None and time.monotonic() - t0 < secs + 120:
            kib, k = tree_rss_kib(hp.pid)
            peak, procs = max(peak, kib), max(procs, k)
            time.sleep(0.1)
            w = os.wait4(hp.pid, os.WNOHANG)
            done = w if w[0] else None
        if done is None:
            hp.kill()
            done = os.wait4(hp.pid, 0)
        _, status, ru = done
        hp.returncode = os.waitstatus_to_exitcode(status)
        wall = time.monotonic() - t0
        err = hp.stderr.read()
    finally:
        for p in svcs:
            hb.kill_wait(p)
        for d in [cg] + ([os.path.dirname(cg)] if made_slice else []):
            for _ in range(100):
                try:
                    os.rmdir(d)
                    break
                except OSError:
                    time.sleep(0.05)
    files = len(os.listdir(out)) if os.path.isdir(out) else 0
    if os.waitstatus_to_exitcode(status) != 0 or files != n:
        raise BenchError("heapbpf --unit of %d processes failed (%d, %d snapshots):\n%s" % (
            n, os.waitstatus_to_exitcode(status), files, err[-2000:]))
    res["unit"] = dict(procs=n, seconds=secs, rate=S["unit_rate"], snapshots=files,
                       heapbpf_procs=procs, tree_peak_kib=peak, peak_rss_kib=ru.ru_maxrss,
                       wall_s=wall)
    log("unit: %d processes, %d heapbpf process(es), %.1f MiB peak (sum), %.1f MiB wait4"
        % (n, procs, peak / 1024, ru.ru_maxrss / 1024))


# ---- 10. live-heap snapshots ----------------------------------------------------------------

SNAPSHOT_CONF = "prof:true,prof_active:true,lg_prof_sample:0"  # every allocation sampled


def snapshot_ms(argv):
    """Wall time of one heapbpf run that must succeed, in ms."""
    t = time.monotonic_ns()
    out = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    ms = (time.monotonic_ns() - t) / 1e6
    if out.returncode:
        raise BenchError("%s exited with %d: %s" % (" ".join(argv[1:3]), out.returncode,
                                                    out.stderr[-2000:]))
    return ms


def sorted_lines(path):
    with open(path) as f:
        return sorted(line for line in f if line.strip())


def bench_snapshot(S, res):
    """heapbpf --live-heap of bench/stackheap (N distinct live sampled stacks), then
    heapbpf report of a gcore core of the same process; the two must agree."""
    n, reps = S["unique_stacks"], 1 if S is SMOKE else 3
    live_out = os.path.join(hb.tmp(), "snapshot-live.folded")
    core_out = os.path.join(hb.tmp(), "snapshot-core.folded")
    prefix = os.path.join(hb.tmp(), "snapshot-core")
    p = subprocess.Popen([hb.path("bench/stackheap"), str(n)],
                         env=dict(os.environ, MALLOC_CONF=SNAPSHOT_CONF),
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    core = "%s.%d" % (prefix, p.pid)
    try:
        first = hb.read_json(p, 300)
        if first.get("ready") != n:
            raise BenchError("stackheap did not start: %r" % first)
        live = [snapshot_ms([hb.heapbpf_bin(), "--pid", str(p.pid), "--live-heap", "--raw",
                             "-f", "folded", "-q", "-o", live_out]) for _ in range(reps)]
        t = time.monotonic()
        out = subprocess.run(["gcore", "-o", prefix, str(p.pid)], capture_output=True,
                             text=True, timeout=1200)
        gcore_s = time.monotonic() - t
        if out.returncode or not os.path.exists(core):
            raise BenchError("gcore failed: " + out.stderr[-2000:])
        core_mib = os.path.getsize(core) / MIB
        fromcore = [snapshot_ms([hb.heapbpf_bin(), "report", core, "--raw", "-f", "folded",
                                 "-q", "-o", core_out]) for _ in range(reps)]
    finally:
        hb.kill_wait(p)
        if os.path.exists(core):
            os.unlink(core)
    a, b = sorted_lines(live_out), sorted_lines(core_out)
    res["snapshot"] = dict(target_stacks=n, stacks=len(a), live_ms=live, core_ms=fromcore,
                           gcore_s=gcore_s, core_mib=core_mib, same=a == b)
    log("snapshot: %d stacks, live %.0f ms, core %.0f ms (gcore %.1f s, %.0f MiB), same: %s"
        % (len(a), min(live), min(fromcore), gcore_s, core_mib, a == b))


# ---- 13. heapbpf rss on a large heap -------------------------------------------------------


def svc_cmd(p, line, want, timeout=1200):
    """One control command to the example; its reply, which must start with want."""
    p.stdin.write(line + "\n")
    p.stdin.flush()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        reply = p.stdout.readline()
        if not reply:
            raise BenchError("the example exited during %r" % line)
        if reply.startswith(want):
            return reply.strip()
        if reply.startswith("error"):
            raise BenchError("%r: %s" % (line, reply.strip()))
    raise BenchError("no reply to %r" % line)


def bench_rss(S, res):
    """heapbpf rss --format json on the example holding fill (large objects, written) plus a
    fragmented heap of small objects: wall time, the walk's extents.
    The process is never stopped."""
    p = subprocess.Popen([hb.path("examples/alloc-service-static"), "--control", "--threads",
                          "0"], env=dict(os.environ, MALLOC_CONF=ORACLE), text=True,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        if not p.stdout.readline().startswith("ready"):
            raise BenchError("the example did not start")
        svc_cmd(p, "fill %d" % S["rss_fill_mib"], "filled")
        svc_cmd(p, "fragment %d" % S["rss_fragment_mib"], "fragmented")
        runs = []
        for _ in range(S["rss_reps"]):
            t = time.monotonic()
            child = subprocess.Popen([hb.heapbpf_bin(), "rss", "--pid", str(p.pid), "--format",
                                      "json"], stdout=subprocess.PIPE, text=True)
            out = child.stdout.read()
            _, status = os.waitpid(child.pid, 0)
            status = os.waitstatus_to_exitcode(status)
            child.returncode = status
            wall_ms = (time.monotonic() - t) * 1000
            if status:
                raise BenchError("heapbpf rss exited with status %d" % status)
            j = json.loads(out)
            # (ru_maxrss would include the Python that forked it: not kept)
            runs.append(dict(wall_ms=wall_ms, walk_ms=j["walk"]["ms"],
                             extents=j["walk"]["extents"], skipped=j["walk"]["skipped"],
                             active=j["jemalloc"]["active"], rss=j["rss"],
                             unexplained=j["unexplained"],
                             resident=j["jemalloc"]["resident"]))
    finally:
        hb.kill_wait(p)
    res["rss"] = dict(fill_mib=S["rss_fill_mib"], fragment_mib=S["rss_fragment_mib"],
                      runs=runs)
    log("rss: %d extents, %.0f MiB active, wall %.0f ms (best), walk %.0f ms"
        % (runs[0]["extents"], runs[0]["active"] / MIB, min(r["wall_ms"] for r in runs),
           min(r["walk_ms"] for r in runs)))


def watch_cpu(name, pid, during):
    """heapbpf watch -v --pid pid attached while during() runs (after a second to
    start sampling): its exit code, the RSS breakdowns' CPU costs (ms, from its -v
    lines), what during returned, and (watch CPU s, target CPU s, monotonic s)
    before and after."""
    errpath = os.path.join(hb.tmp(), name + ".err")
    out = os.path.join(hb.tmp(), name)
    os.makedirs(out, mode=0o700, exist_ok=True)
    with open(errpath, "w") as err:
        w = subprocess.Popen([hb.heapbpf_bin(), "watch", "-v", "--pid", str(pid),
                              "--output-dir", out], stdout=err, stderr=err)
    try:
        time.sleep(1.0)  # attached and sampling
        c0 = (proc_cpu_s(w.pid), proc_cpu_s(pid), time.monotonic())
        got = during()
        c1 = (proc_cpu_s(w.pid), proc_cpu_s(pid), time.monotonic())
    finally:
        w.send_signal(signal.SIGINT)
        rc = w.wait(timeout=300)
    with open(errpath) as f:
        text = f.read()
    if rc not in (0, 3, 4):
        raise BenchError("heapbpf watch failed (%d):\n%s" % (rc, text[-2000:]))
    costs = [float(m) for m in re.findall(r"RSS breakdown measured in ([0-9.]+) ms of CPU", text)]
    if not costs:
        raise BenchError("heapbpf watch measured no RSS breakdown:\n%s" % text[-2000:])
    return rc, costs, got, c0, c1


def bench_watch_rss(S, res):
    """heapbpf watch -v on a busy example holding a large fragmented heap: the RSS
    breakdowns it measures between triggers (their count and CPU, from its -v lines),
    its whole CPU share of a core and of the service's CPU."""
    conf = "prof:true,prof_active:false"
    # --rate 0: as fast as it can, a busy service
    p = subprocess.Popen([hb.path("examples/alloc-service-static"), "--control", "--threads",
                          str(S["watch_rss_threads"]), "--rate", "0"],
                         env=dict(os.environ, MALLOC_CONF=conf),
                         text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        if not p.stdout.readline().startswith("ready"):
            raise BenchError("the example did not start")
        svc_cmd(p, "fill %d" % S["watch_rss_fill_mib"], "filled")
        svc_cmd(p, "fragment %d" % S["watch_rss_fragment_mib"], "fragmented")
        rc, costs, _, c0, c1 = watch_cpu("watch_rss", p.pid,
                                         lambda: time.sleep(S["watch_rss_seconds"]))
    finally:
        hb.kill_wait(p)
    wall = c1[2] - c0[2]
    res["watch_rss"] = dict(
        fill_mib=S["watch_rss_fill_mib"], fragment_mib=S["watch_rss_fragment_mib"],
        threads=S["watch_rss_threads"], seconds=S["watch_rss_seconds"], exit=rc,
        breakdowns=len(costs), cost_ms_mean=sum(costs) / len(costs), cost_ms_max=max(costs),
        breakdown_cpu_s=sum(costs) / 1000, hb_cpu_s=c1[0] - c0[0],
        target_cpu_s=c1[1] - c0[1], wall_s=wall)
    r = res["watch_rss"]
    log("watch_rss: %d breakdowns of %.0f ms CPU each (%.2f%% of the service's CPU); watch "
        "%.2f%% of a core, %.2f%% of the service's CPU"
        % (len(costs), r["cost_ms_mean"], 100 * r["breakdown_cpu_s"] / max(r["target_cpu_s"], 1e-9),
           100 * r["hb_cpu_s"] / wall, 100 * r["hb_cpu_s"] / max(r["target_cpu_s"], 1e-9)))


# ---- main -----------------------------------------------------------------------------------


# ---- 11. heapbpf watch for a long time, compressed ----------------------------------------


def proc_cpu_s(pid):
    """utime + stime of pid in seconds, from /proc/PID/stat."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def slope(xs, ys):
    """Least-squares slope of ys against xs."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0


def bench_watch(S, res):
    """heapbpf watch on the example at a high sampling rate: its RSS over time and CPU share."""
    conf = "prof:true,prof_active:false,lg_prof_sample:%d" % S["watch_lg"]
    out = os.path.join(hb.tmp(), "watch")
    os.makedirs(out, mode=0o700, exist_ok=True)
    env = dict(os.environ, MALLOC_CONF=conf)
    svc = subprocess.Popen([hb.path("examples/alloc-service-static"), "--threads",
                            str(S["watch_threads"])], env=env, stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    errpath = os.path.join(hb.tmp(), "watch.err")
    try:
        time.sleep(0.5)
        with open(errpath, "w") as err:
            w = subprocess.Popen([hb.heapbpf_bin(), "watch", "--pid", str(svc.pid),
                                  "--output-dir", out], stdout=err, stderr=err)
        try:
            t0 = time.monotonic()
            time.sleep(1.0)  # attached and sampling
            c0 = (proc_cpu_s(w.pid), proc_cpu_s(svc.pid), time.monotonic())
            ts, rss = [], []
            while time.monotonic() - t0 < S["watch_seconds"]:
                ts.append(time.monotonic() - t0)
                rss.append(proc_rss_kib(w.pid))
                time.sleep(1.0)
            c1 = (proc_cpu_s(w.pid), proc_cpu_s(svc.pid), time.monotonic())
            w.send_signal(signal.SIGUSR1)
            time.sleep(1.0)
        finally:
            w.send_signal(signal.SIGINT)
            rc = w.wait(timeout=120)
    finally:
        hb.kill_wait(svc)
    with open(errpath) as f:
        text = f.read()
    if rc not in (0, 3, 4):
        raise BenchError("heapbpf watch failed (%d):\n%s" % (rc, text[-2000:]))
    # each profile's summary counts its own window's samples: their sum is the run's
    samples = sum(int(m) for m in re.findall(r"^heapbpf: (\d+) samples, ", text, re.M))
    drops = re.findall(r"(\d+) events were dropped", text)
    half = len(ts) // 2
    res["watch"] = dict(
        seconds=S["watch_seconds"], lg=S["watch_lg"], threads=S["watch_threads"], exit=rc,
        rss_first_kib=rss[0], rss_last_kib=rss[-1], rss_max_kib=max(rss),
        # the second half: past the start's growth of the collector's tables
        slope_kib_per_hour=slope(ts[half:], rss[half:]) * 3600 if len(ts) - half > 2 else 0,
        hb_cpu_s=c1[0] - c0[0], target_cpu_s=c1[1] - c0[1], wall_s=c1[2] - c0[2],
        samples=samples, drops=sum(int(d) for d in drops) + (rc == 4),
        profiles=len([n for n in os.listdir(out) if n.endswith(".pb.gz")]))
    log("watch: RSS %d -> %d KiB, slope %.0f KiB/h, CPU %.2f s of the target's %.2f s"
        % (rss[0], rss[-1], res["watch"]["slope_kib_per_hour"], res["watch"]["hb_cpu_s"],
           res["watch"]["target_cpu_s"]))


def agent_services(S, out):
    """S["agent_procs"] example services under a file name of their own, which the
    agent's --select exe= rule takes and nothing else on the machine has."""
    exe = os.path.join(out, "hbbench-agent")
    shutil.copy(hb.path("examples/alloc-service-static"), exe)
    env = dict(os.environ, MALLOC_CONF="prof:true,prof_active:false")
    return exe, [subprocess.Popen([exe, "--threads", "1", "--rate", str(S["agent_rate"])],
                                  env=env, stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                 for _ in range(S["agent_procs"])]


def bench_agent(S, res):
    """heapbpf agent over many light services with a budget: its CPU share and RSS."""
    out = os.path.join(hb.tmp(), "agent")
    os.makedirs(out, mode=0o700, exist_ok=True)
    exe, svcs = agent_services(S, out)
    errpath = os.path.join(hb.tmp(), "agent.err")
    env = dict(os.environ, HEAPBPF_STATE_DIR=os.path.join(out, "state"))
    try:
        time.sleep(0.5)
        with open(errpath, "w") as err:
            a = subprocess.Popen([hb.heapbpf_bin(), "agent", "--output-dir",
                                  os.path.join(out, "profiles"), "--interval",
                                  str(S["agent_interval"]), "--max-targets",
                                  str(S["agent_budget"]), "--rotate",
                                  str(2 * S["agent_interval"]), "--select",
                                  "exe=" + os.path.basename(exe)],
                                 stdout=err, stderr=err, env=env)
        try:
            time.sleep(2.0)  # the services found, the first ones sampled
            c0 = (proc_cpu_s(a.pid), sum(proc_cpu_s(p.pid) for p in svcs), time.monotonic())
            rss = []
            while time.monotonic() - c0[2] < S["agent_seconds"]:
                rss.append(proc_rss_kib(a.pid))
                time.sleep(1.0)
            c1 = (proc_cpu_s(a.pid), sum(proc_cpu_s(p.pid) for p in svcs), time.monotonic())
        finally:
            a.send_signal(signal.SIGINT)
            rc = a.wait(timeout=300)
    finally:
        for p in svcs:
            hb.kill_wait(p)
    with open(errpath) as f:
        text = f.read()
    if rc not in (0, 4):
        raise BenchError("heapbpf agent failed (%d):\n%s" % (rc, text[-2000:]))
    names = os.listdir(os.path.join(out, "profiles"))
    pids = {p.pid for p in svcs}
    windowed = {int(m) for n in names for m in re.findall(r"-(\d+)-hbbench-agent", n)}
    res["agent"] = dict(
        procs=S["agent_procs"], budget=S["agent_budget"], seconds=S["agent_seconds"],
        rate=S["agent_rate"], interval=S["agent_interval"], exit=rc,
        hb_cpu_s=c1[0] - c0[0], services_cpu_s=c1[1] - c0[1], wall_s=c1[2] - c0[2],
        rss_max_kib=max(rss), rss_last_kib=rss[-1],
        profiles=len([n for n in names if n.endswith(".pb.gz")]),
        windowed=len(windowed & pids), rotations=text.count("agent: rotation:"))
    log("agent: %d services, %d at once: CPU %.1f%% of a core, RSS up to %d KiB, %d of them "
        "with windows, %d rotations" % (S["agent_procs"], S["agent_budget"],
                                        100 * res["agent"]["hb_cpu_s"] / res["agent"]["wall_s"],
                                        res["agent"]["rss_max_kib"], res["agent"]["windowed"],
                                        res["agent"]["rotations"]))


def timed(name, fn, *args):
    t = time.monotonic()
    r = fn(*args)
    log("%s took %.1f s" % (name, time.monotonic() - t))
    return r


def bench_watch_rss_redis(S, res):
    """heapbpf watch -v on Redis built with its bundled jemalloc (the fixture, whose
    symbols the breakdown reads) under redis-benchmark: the watch's CPU with its
    breakdowns, as a share of Redis's CPU over the same run."""
    bin_ = hb.path("fixtures/redis/bin/redis-server")
    if not os.path.exists(bin_):
        raise BenchError("no Redis fixture at %s: run make fixtures" % bin_)
    port = hb.free_port()
    env = dict(os.environ, JE_MALLOC_CONF="prof:true,prof_active:false")
    p = subprocess.Popen([bin_, "--port", str(port), "--save", "", "--appendonly", "no"],
                         env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise BenchError("the Redis fixture did not listen")
                time.sleep(0.05)
        rc, costs, rps, c0, c1 = watch_cpu("watch_rss_redis", p.pid, lambda: redis_bench(
            port, S["watch_rss_redis_n"], None))
    finally:
        hb.kill_wait(p)
    res["watch_rss_redis"] = dict(
        n=S["watch_rss_redis_n"], rps=rps, exit=rc, breakdowns=len(costs),
        cost_ms_mean=sum(costs) / len(costs), breakdown_cpu_s=sum(costs) / 1000,
        hb_cpu_s=c1[0] - c0[0], target_cpu_s=c1[1] - c0[1], wall_s=c1[2] - c0[2])
    r = res["watch_rss_redis"]
    log("watch_rss_redis: %d breakdowns of %.1f ms; watch %.2f%% of Redis's CPU"
        % (len(costs), r["cost_ms_mean"], 100 * r["hb_cpu_s"] / max(r["target_cpu_s"], 1e-9)))


# the benchmarks --only can measure again into an existing results file
LATER = {"rss": bench_rss, "watch_rss": bench_watch_rss, "watch_rss_redis": bench_watch_rss_redis}


def measure_later(S, names, out):
    """--only: the named benchmarks again, into the results file out (whose other
    sections stay as measured); each records when and at which heapbpf it was."""
    with open(out) as f:
        res = json.load(f)
    for name in names:
        if name not in LATER:
            raise BenchError("--only takes %s, not %r" % (", ".join(sorted(LATER)), name))
        timed(name, LATER[name], S, res)
        res.setdefault("later", {})[name] = dict(
            heapbpf=sh("git -C %s describe --always --dirty 2>/dev/null" %
                       shlex.quote(os.path.dirname(os.path.abspath(__file__)))),
            load=loadavg(), command="sudo python3 bench/run.py --only %s" % name)
    return res


def measure(S, smoke):
    """Every benchmark in turn; returns the results file's content."""
    tc, hc = hb.cpus_split()
    t0 = time.monotonic()
    res = dict(smoke=smoke, settings=S, cpu_count=os.cpu_count(),
               cpus=dict(target=sorted(tc) if tc else None, heapbpf=sorted(hc) if hc else None),
               machine=machine())
    timed("idle", bench_idle, S, res)
    timed("per sample", bench_per_sample, S, res)
    timed("redis", bench_redis, S, res)
    timed("scaling", bench_scaling, S, res, smoke)
    timed("collector", bench_collector, S, res)
    timed("footprint", bench_footprint, S, res)
    timed("recording", bench_recording, S, res)
    timed("unit", bench_unit, S, res)
    timed("bpf_stats", bench_bpfstats, S, res, log)
    timed("services", bench_services, smoke, res, redis_bench, log)
    timed("snapshot", bench_snapshot, S, res)
    timed("watch", bench_watch, S, res)
    timed("agent", bench_agent, S, res)
    timed("rss", bench_rss, S, res)
    timed("watch_rss", bench_watch_rss, S, res)
    # the Redis fixture (make fixtures) is built beside the tests: not for --smoke
    if not smoke:
        timed("watch_rss_redis", bench_watch_rss_redis, S, res)
    res["elapsed_s"] = time.monotonic() - t0
    res["load_end"] = loadavg()
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--json", help="write the results here (default: BUILD/bench/results.json)")
    ap.add_argument("--smoke", action="store_true", help="each benchmark once, tiny")
    ap.add_argument("--only", help="NAME[,NAME]: measure these again into the existing "
                    "results file (%s)" % ", ".join(sorted(LATER)))
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench: needs root (BPF, uprobes); run: sudo make bench")
    hb.BUILD = a.build
    out = a.json or os.path.join(a.build, "bench", "results.json")
    S = SMOKE if a.smoke else FULL
    if not a.smoke:
        # other work skews every number: give it a bounded chance to finish first
        deadline = time.monotonic() + 180
        while float(loadavg().split()[0]) > 1.5 and time.monotonic() < deadline:
            time.sleep(5)
    res = measure_later(S, a.only.split(","), out) if a.only else measure(S, a.smoke)
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    tmp = out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(res, f, indent=1)
        f.write("\n")
    os.replace(tmp, out)
    log("wrote %s; python3 bench/report.py %s --out BENCHMARKS.md writes the report"
        % (out, out))


if __name__ == "__main__":
    try:
        main()
    except BenchError as e:
        sys.exit("bench: " + str(e))
    finally:
        hb.remove_tmp()
