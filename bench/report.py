#!/usr/bin/env python3
"""heapbpf's benchmark suite, reporting part: reads the results file that
bench/run.py wrote and writes BENCHMARKS.md from it alone, every target
marked met or not met, after checking that the report is well formed (every
section, every table rectangular and with rows, no NaN, a verdict for every
target). It measures nothing and needs no root, so a report can be rewritten
from a saved results file without measuring again:

    python3 bench/report.py build/bench/results.json --out BENCHMARKS.md

(`make bench-report`); `make bench` runs bench/run.py, then this. The same
results file always gives the same report. The targets live here, not in the
measuring part.
"""

import argparse
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hb import med, spread  # noqa: E402

MIB = 1 << 20

TARGETS = {
    "idle": 0.99,            # throughput ratio after an attach-profile-detach cycle
    "per_sample": 1.2,       # added cost per sample / one bare uprobe hit
    "redis": 0.97,           # requests/s with heapbpf attached / idle
    "collector": 1e6,        # events aggregated per second, one core
    "live_rate": 50000,      # samples/s with zero drops
    "rss_mib": 64,           # heapbpf's peak RSS with 100k unique stacks
    "unit_rss_mib": 128,     # heapbpf's RSS in all, 64 example processes under one --unit
    "attach_ms": 250,        # pid -> sampling on
    "stop_ms": 500,          # stop -> files written
    "bpf_alloc_ns": 200,     # kernel-measured run time of the allocation program per hit
    "bpf_free_ns": 120,      # same, free program
    "svc_vs_sampling": 0.99, # real services: heapbpf attached / jemalloc sampling, unattached
    "svc_vs_idle": 0.97,     # real services: heapbpf attached / idle
    "snapshot_ms": 1000,     # live-heap snapshot of 100k distinct stacks, live or from a core
    "agent_cpu": 0.10,       # heapbpf agent's CPU, share of one core, 64 services, 16 at once
    "agent_rss_mib": 256,    # and its RSS, at most (half its default --max-rss)
    "rss_ms": 1000,          # heapbpf rss on a 4 GiB heap, wall
    "watch_rss_share": 0.01,  # heapbpf watch with RSS breakdowns, of the service's CPU
}

SECTIONS = ["## 1. Idle cost", "## 2. Cost while profiling, per sample",
            "## 3. Against the alternatives: redis", "## 4. How cost grows",
            "### Sampling rate", "### Threads", "### Stack depth", "## 5. Collector",
            "## 6. heapbpf's own footprint", "## 7. Recordings",
            "## 8. BPF programs' own time per hit",
            "## 9. Real services: heapbpf's share of the cost", "## Targets"]


class ReportError(Exception):
    pass


def verdict(ok, why=""):
    if ok:
        return "**met**"
    return "**not met**" + (": " + why if why else "")


def cpus(R, who):
    """The CPUs a process was pinned to, as the measuring part recorded them."""
    c = R["cpus"][who]
    return c if c else "any"


def machine_value(R, key):
    return dict(R["machine"]).get(key, "?")


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


# ---- what several sections use --------------------------------------------------------------


def trap_ns(R):
    """The median bare uprobe hit of section 2."""
    return med(R["trap_ns"])


def per_sample_ratio(R):
    """heapbpf's allocation program per hit / one bare hit, median of the repetitions."""
    return med(R["heapbpf_prog_ratio"])


def scaling_rows(R):
    sc = R["scaling"]
    return sc["lg"] + sc["threads"] + sc["depth"]


def attach_all(R):
    """Attach latencies of every attached window of sections 2 and 4."""
    out = list(R["per_sample"]["alloc"]["attach_ms"])
    for o in scaling_rows(R):
        out += o["attach_ms"]
    return out


def stop_all(R):
    """Stop latencies of every attached window of sections 2 and 4."""
    out = list(R["per_sample"]["alloc"]["stop_ms"])
    for o in scaling_rows(R):
        out += o["stop_ms"]
    return out


# ---- the sections ---------------------------------------------------------------------------


def head(R, doc):
    doc.p("# heapbpf benchmarks")
    doc.p()
    doc.p("Produced by `sudo make bench` (`python3 bench/run.py --build build --json "
          "build/bench/results.json`, then `python3 bench/report.py build/bench/results.json "
          "--out BENCHMARKS.md`) on the machine below%s. Numbers are medians with [min – max] "
          "and the number of repetitions; ratios are computed pair by pair within this run. "
          "This is a shared 2-CPU virtual machine: treat differences of a few percent as "
          "noise, and compare numbers only within this file." %
          (" — SMOKE RUN, tiny sizes, numbers meaningless" if R["smoke"] else ""))
    doc.p()
    doc.table(["", "machine"], [[k, v] for k, v in R["machine"]])


def idle(R, doc):
    S, r = R["settings"], R["idle"]
    ok = med(r["ratio_after"]) >= TARGETS["idle"]
    doc.p("## 1. Idle cost")
    doc.p()
    doc.p("The example service (`alloc-service-static --rate 0 --threads 1`, unthrottled, on "
          "CPU %s; heapbpf on CPU %s), allocations per second over %.1f s windows. Each "
          "repetition runs a `prof:false` "
          "process, then a `prof:true,prof_active:false` process measured before and after a "
          "heapbpf attach-profile-detach cycle (`heapbpf -d %s`) in the same process. Ratios "
          "are taken within each repetition." % (cpus(R, "target"), cpus(R, "heapbpf"),
                                                 S["idle_window"], S["idle_cycle"]))
    doc.p()
    doc.table(["condition", "allocations/s", "ratio"], [
        ["`prof:false`", spread(r["off"], "{:,.0f}"), "1 (reference)"],
        ["`prof:true,prof_active:false`, never attached", spread(r["idle"], "{:,.0f}"),
         spread(r["ratio_idle"], "{:.3f}") + " vs `prof:false`"],
        ["same process after attach-profile-detach", spread(r["after"], "{:,.0f}"),
         spread(r["ratio_after"], "{:.3f}") + " vs before; " +
         spread(r["ratio_after_off"], "{:.3f}") + " vs `prof:false`"],
    ])
    doc.p("Target: ratio after detach >= %.2f (vs the same process before): %s" % (
        TARGETS["idle"], verdict(ok, "the median ratio is %.3f; on this VM run-to-run noise "
                                 "between windows is of the same order (see the spread)"
                                 % med(r["ratio_after"]))))
    doc.p()


def per_sample(R, doc):
    S = R["settings"]
    alloc, churn = R["per_sample"]["alloc"], R["per_sample"]["churn"]
    trap = trap_ns(R)
    ratio_insitu = med(alloc["per_sample_ns"]) / trap
    ratio = per_sample_ratio(R)
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
          "`prof_free_sampled_object`." % (S["sample_bytes"] // MIB, cpus(R, "target"),
                                            cpus(R, "heapbpf")))
    doc.p()
    doc.p("The floor, `bench/trapfloor`: an empty BPF program attached as a uprobe to a no-op "
          "function that starts with `push %%r15` like the two probed jemalloc functions, "
          "called %d times with and without the probe (CPU time difference per call). In "
          "the same process, heapbpf's real allocation program (the build's skeleton, "
          "jemalloc 5.3.0's layout, a 16 MiB ring buffer drained by a polling thread "
          "as heapbpf does) on a stand-in for `prof_malloc_sample_object` whose tctx leads to "
          "a 14-frame backtrace: the same trap plus all of heapbpf's BPF work, measured with "
          "the precision of the floor itself. The in-process measurement above includes "
          "jemalloc's own per-sample work (libgcc unwinding, about 20 us per sample here) in "
          "both terms of the difference, so its noise is far larger than the difference."
          % S["trap_calls"])
    doc.p()
    doc.table(["measure", "value"], [
        ["one bare uprobe hit (ns)", spread(R["trap_ns"], "{:.0f}")],
        ["one hit of heapbpf's allocation program, isolated (ns)",
         spread(R["heapbpf_prog_ns"], "{:.0f}")],
        ["isolated: heapbpf's hit / bare hit, per repetition",
         spread(R["heapbpf_prog_ratio"], "{:.2f}")],
        ["isolated: every call counted once by heapbpf's BPF counter, no read fault",
         "yes" if R["heapbpf_prog_hits_ok"] else "**no**"],
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
        "trap-count test), so the rest is the BPF program's own work: filling a per-CPU "
        "record (reads of jemalloc's memory for the gctx, the backtrace and its frames) and "
        "copying its 72 + 8 x frames bytes into the ring buffer (`bpf_ringbuf_output`), "
        "about %.0f ns here. That is small next to jemalloc's own cost per sample "
        "(unwinding, see the `je` / `none` row), but above the 1.2x target" % (
            ratio, med(R["heapbpf_prog_ns"]) - trap)))
    doc.p()


REDIS_NAMES = {"idle": "idle", "heapbpf": "heapbpf attached", "jemalloc":
               "jemalloc sampling always on", "bpftrace": "bpftrace on every malloc and free"}


def redis(R, doc):
    S, r = R["settings"], R["redis"]
    ratios = r["ratios"]
    ok = med(ratios["heapbpf"]) >= TARGETS["redis"]
    doc.p("## 3. Against the alternatives: redis")
    doc.p()
    doc.p("Debian's `redis-server` (%s) on CPU %s, run with `LD_LIBRARY_PATH` pointing at "
          "`build/jemalloc/libjemalloc.so.2` (the shared jemalloc with symbols that `make` "
          "links from Debian's `libjemalloc_pic.a`: Debian's own `libjemalloc.so.2` is "
          "stripped, so heapbpf would need its separate debug info) and "
          "`MALLOC_CONF=%s`. Load: `redis-benchmark -t set,get,lpush,lpop -n %d -r 100000 "
          "-d 256 -c 50 -P 16` on CPU %s, 127.0.0.1 only; the figure per run is the "
          "harmonic mean of the four tests' requests/s. All four conditions run in the same "
          "redis process, one after the other in each repetition, in an order that rotates "
          "from one repetition to the next:" % (
              machine_value(R, "redis"), cpus(R, "target"), r["malloc_conf"], S["redis_n"],
              cpus(R, "heapbpf")))
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
    doc.table(["condition", "requests/s", "ratio to idle (per repetition)"],
              [[REDIS_NAMES[c], spread(r["rps"][c], "{:,.0f}"), spread(ratios[c], "{:.3f}")]
               for c in REDIS_NAMES])
    doc.p("heapbpf took %s samples per run." % spread(r["samples"], "{:.0f}"))
    doc.p()
    doc.p("Target: heapbpf attached >= 97%% of idle requests/s: %s" % verdict(
        ok, "median %.3f" % med(ratios["heapbpf"])))
    doc.p()


def scaling(R, doc):
    S, sc = R["settings"], R["scaling"]
    trap = trap_ns(R)
    rows_lg = [[str(o["lg"]), "%d KiB" % ((1 << o["lg"]) // 1024), "%d MiB" % (o["bytes"] // MIB),
                spread(o["samples"], "{:.0f}"), spread(o["per_sample_ns"], "{:.0f}"),
                "%.2f" % (med(o["per_sample_ns"]) / trap),
                spread(o["ratio_att_je"], "{:.3f}"), spread(o["ratio_att_none"], "{:.3f}")]
               for o in sc["lg"]]
    rows_t = [[str(o["threads"]), spread(o["samples"], "{:.0f}"),
               spread(o["per_sample_ns"], "{:.0f}"),
               "%.2f" % (med(o["per_sample_ns"]) / trap),
               spread(o["ratio_att_je"], "{:.3f}"), spread(o["drops"], "{:.0f}")]
              for o in sc["threads"]]
    rows_d = [[str(o["depth"]), str(o["frames"]),
               spread([r["heapbpf_ns"] for r in o["isolated"]], "{:.0f}"),
               spread([r["heapbpf_ns"] / r["trap_ns"] for r in o["isolated"]], "{:.2f}"),
               spread(o["per_sample_ns"], "{:.0f}"),
               spread(o["ratio_att_je"], "{:.3f}"), spread(o["ratio_je_none"], "{:.3f}")]
              for o in sc["depth"]]
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
          "(%d CPUs): CPU time is summed over threads." % (sc["bytes"] // MIB, R["cpu_count"]))
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


def collector(R, doc):
    S, c = R["settings"], R["collector"]
    rates, info, live, best = c["events_per_s"], c["info"], c["live"], c["best_live"]
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
          "freed at once) for %.1f s while heapbpf profiles it with its default %d MiB ring "
          "buffer, at rising sampling rates; every sampled object is also freed, so each "
          "sample is two events." % (S["rate_seconds"], R["collector"].get("ringbuf_mib", 16)))
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
                    max(x["cpu_util"] for x in live), R["cpu_count"]))
    doc.p("Target: highest sustained live sample rate with zero drops >= 50k samples/s: %s" %
          verdict(best >= TARGETS["live_rate"], why))
    doc.p()


def footprint(R, doc):
    S, f = R["settings"], R["footprint"]
    n = S["unique_stacks"]
    attach_ms, stop_ms = attach_all(R), stop_all(R)
    mem, sinfo, big, sym = f["mem_before_stop"], f["sym"], f["big_object"], f["sym_ms"]
    rss, stacks = f["rss_mib"], f["stacks"]
    doc.p("## 6. heapbpf's own footprint")
    doc.p()
    doc.p("**100k unique stacks.** The microbenchmark allocates and frees 16 KiB once through "
          "each of %s distinct call paths (17 levels of a binary choice of call site) with "
          "`lg_prof_sample:10`, so nearly every allocation is sampled; heapbpf profiles it "
          "with its default ring buffer%s, `-f folded`, peak RSS from `wait4`." % (
              "{:,}".format(n), " (%d MiB)" % f["ringbuf_mib"] if f.get("ringbuf_mib") else ""))
    doc.p()
    doc.p("**Latencies.** Attach: from starting `heapbpf --pid` to the target seeing "
          "`prof_active` on (it polls every 0.2 ms), i.e. BPF load, jemalloc discovery, uprobe "
          "attach and the flag write. Stop: from SIGINT to heapbpf's exit, its profile written "
          "(fsync, rename); no network is involved (the profile goes to a local file, no "
          "Pyroscope export). Measured over all attached windows of sections 2 and 4 "
          "(thousands of samples on one stack) and on the 100k-stack run.")
    doc.p()
    doc.p("**Symbolization.** `bench/userbench symbolize %d`: a cold symbolizer "
          "(`symbolizer__new`, then `symbolizer__lookup` of %d distinct addresses spread "
          "evenly over the executable mappings of the bench program itself: %d objects, "
          "among them libc, libelf, libdw, libbpf, libz)." % (
              S["sym_frames"], sinfo["frames"], sinfo["objects"]))
    doc.p()
    doc.p("Where a stop's time goes (timestamps of heapbpf's own phases, outside this "
          "suite, same machine): 50 ms draining the ring buffer after the flag is restored "
          "(`DRAIN_MS`); the BPF links are then detached on threads of their own, side by "
          "side (the kernel waits for grace periods on each: 80 ms per tracepoint and 120 ms "
          "per uprobe one after another, 250-340 ms for all four side by side), while the "
          "report is built: the target's symbols and DWARF loaded for every distinct frame "
          "address (about 70 ms of CPU here), then dropped, the samples, then the text sorted "
          "and written (about 0.2 s of CPU for 100k stacks) and fsync'ed (about 40 ms for "
          "38 MB). A run of one stack waits for the detach; the 100k-stack run, for its "
          "profile.")
    doc.p()
    doc.table(["measure", "value", "target", "verdict"], [
        ["samples in the 100k-stack run", "{:,}".format(f["samples"]), "", ""],
        ["distinct stacks in heapbpf's folded output", "{:,}".format(stacks), "", ""],
        ["heapbpf RSS just before stop, 100k-stack run (anonymous + file-backed)",
         "%.1f MiB (%.1f + %.1f)" % (mem.get("VmRSS", 0) / 1024, mem.get("RssAnon", 0) / 1024,
                                     mem.get("RssFile", 0) / 1024), "", ""],
        ["heapbpf peak RSS, 100k-stack run", "%.1f MiB" % rss, "<= 64 MiB",
         verdict(rss <= TARGETS["rss_mib"],
                 "while collecting, heapbpf holds the collector's %s stacks (anonymous "
                 "memory: mostly their frames, a 4-byte address id each, an 88-byte record "
                 "each and, for stacks with frees, a 48-byte lifetimes summary holding up to "
                 "two buckets) and its ring buffer, which libbpf's consumer maps twice "
                 "(file-backed, all of it counted) besides its own binary and libraries; "
                 "after the stop the last profile is built as the collector and the "
                 "symbolizer are released (docs/analysis.md, Cost)" % "{:,}".format(n))],
        ["attach latency, pid -> sampling on (ms)", spread(attach_ms, "{:.0f}"), "<= 250 ms",
         verdict(med(attach_ms) <= TARGETS["attach_ms"] and
                 max(attach_ms) <= TARGETS["attach_ms"],
                 "worst case %.0f ms" % max(attach_ms))],
        ["stop -> file written (ms), one-stack runs", spread(stop_ms, "{:.0f}"), "<= 500 ms",
         verdict(max(stop_ms) <= TARGETS["stop_ms"], "worst case %.0f ms" % max(stop_ms))],
        ["stop -> file written, 100k-stack run (ms)", "%.0f" % f["stop_ms"],
         "<= 500 ms", verdict(f["stop_ms"] <= TARGETS["stop_ms"],
                              "building, sorting and writing %s stacks" % "{:,}".format(stacks))],
        ["symbolization of %d unique frames (ms)" % sinfo["frames"], spread(sym, "{:.0f}"),
         "(none)", "%d of %d named" % (sinfo["named"], sinfo["frames"])],
    ] + ([
        ["symbolization of %d unique frames in one %.0f MiB object, cold (ms)" % (
            big["frames"], big["object_bytes"] / MIB), "%.0f" % (big["cold_ns"] / 1e6),
         "(none)", "`%s` (%.0f MiB of code, `.dynsym` names: Debian strips its `.symtab`); "
         "%d of %d named" % (big["path"], big["text_bytes"] / MIB, big["named"],
                             big["frames"])],
        ["same, a second profile of that object in the same process (ms)",
         "%.0f" % (big["warm_ns"] / 1e6), "(none)",
         "its debug-info search and DWARF are cached by build-id"],
    ] if big else []))


def unit(R, doc):
    """Section 6's many-targets part: one --unit of many processes (absent from older results)."""
    u = R.get("unit")
    if not u:
        return
    rss = max(u["tree_peak_kib"], u["peak_rss_kib"]) / 1024
    doc.p("**Many targets: one `--unit`.** %d example processes (`alloc-service-static "
          "--threads 1 --rate %d`, `prof:true,prof_active:false`) in one cgroup laid out as "
          "systemd lays out a unit, profiled by one `heapbpf --unit` for %.0f s with "
          "`--output-dir`: one session, one BPF object and ring buffer, uprobes once per "
          "jemalloc object file, a collector and symbolizer per process (objects parsed once "
          "per build-id). RSS of heapbpf and "
          "every process it started, summed every 0.1 s; `wait4`'s peak RSS of heapbpf "
          "itself; the larger one is judged." % (u["procs"], u["rate"], u["seconds"]))
    doc.p()
    doc.table(["measure", "value", "target", "verdict"], [
        ["heapbpf processes (the most seen at once)", "%d" % u["heapbpf_procs"], "1",
         verdict(u["heapbpf_procs"] == 1)],
        ["heapbpf RSS, all processes, peak of the sums", "%.1f MiB" % (u["tree_peak_kib"] / 1024),
         "", ""],
        ["heapbpf peak RSS (wait4)", "%.1f MiB" % (u["peak_rss_kib"] / 1024), "", ""],
        ["heapbpf RSS for %d processes" % u["procs"], "%.1f MiB" % rss,
         "<= %d MiB" % TARGETS["unit_rss_mib"], verdict(rss <= TARGETS["unit_rss_mib"])],
        ["snapshots written", "%d" % u["snapshots"], "%d" % u["procs"],
         verdict(u["snapshots"] == u["procs"])],
        ["wall time, start to exit", "%.1f s" % u["wall_s"], "", ""],
    ])


def recording(R, doc):
    S, rows = R["settings"], R["recording"]["rows"]
    per_sample = [r["size"] / r["samples"] for r in rows if r["samples"]]
    raw_per_sample = [r["raw"] / r["samples"] for r in rows if r["samples"]]
    per_event = [r["size"] / (r["samples"] + r["frees"]) for r in rows if r["samples"]]
    ratio = [r["raw"] / r["size"] for r in rows if r["size"]]
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


BPF_PROGS = [("heapbpf_alloc", "allocation program (`prof_malloc_sample_object`)"),
             ("heapbpf_free", "free program (`prof_free_sampled_object`)"),
             ("heapbpf_fork", "fork tracepoint (every fork on the machine)"),
             ("heapbpf_exec", "exec tracepoint (every exec on the machine)"),
             ("heapbpf_activity", "activity probe (5.2.1 only)")]


def bpf_ns(R, prog):
    """ns per hit of prog, one figure per repetition that ran it."""
    return [r["progs"][prog][1] / r["progs"][prog][0] for r in R["bpfstats"]["runs"]
            if r["progs"].get(prog, (0, 0))[0]]


# The decomposition's rows: (label, step before, step after), bench/bpfstats.py's PARTS;
# "shipped" is the repetition's own run of the whole program.
PART_ROWS = [
    ("hit counters: `count()`'s atomic add on the shared `.bss` line", "shipped", "counters"),
    ("`bpf_ringbuf_query` for the wake-up decision (`submit_flags()`)", "counters", "query"),
    ("`bpf_ktime_get_ns`", "query", "clock"),
    ("reads of jemalloc's memory (`bpf_probe_read_user`): allocation tctx->gctx and "
     "prof_bt_t with 16 frames (two reads); free prof_info_t (one read, on jemalloc's stack)",
     "clock", "reads"),
    ("the ring-buffer record: allocation `bpf_ringbuf_output` (reserve, copy of the "
     "scratch record, commit), free `bpf_ringbuf_reserve` + `bpf_ringbuf_submit`",
     "reads", "ringbuf"),
    ("the rest: `bpf_get_current_pid_tgid`, arguments, the record's fields (allocation: in "
     "the per-CPU scratch record)", "ringbuf", "all"),
]


def part_ns(run, step, prog):
    if step == "shipped":
        c, t = run["progs"].get(prog, (0, 0))
        return t / c if c else None
    return run["parts"].get(step, {}).get(prog)


def part_diffs(runs, before, after, prog):
    out = []
    for r in runs:
        a, b = part_ns(r, before, prog), part_ns(r, after, prog)
        if a is not None and b is not None:
            out.append(a - b)
    return out


def bpf_parts(R, doc):
    """Where the programs' time goes in the real process (bench/bpfstats.py's decomposition)."""
    runs = [r for r in R["bpfstats"]["runs"] if r.get("parts")]
    if not runs:
        return
    progs = ("heapbpf_alloc", "heapbpf_free")
    doc.p("### Where the time goes, in the example service")
    doc.p()
    doc.p("Each repetition also runs the example service once per step below, each step "
          "leaving out one more part of both sampling programs (a `.rodata` knob, "
          "`bench_skip`, set through `HEAPBPF_BENCH_PARTS` in `build/bench/heapbpf`, a "
          "build of heapbpf whose BPF object has it, which heapbpf's own has not: the "
          "verifier drops what is left out; without the ring buffer the free program writes "
          "its record into the per-CPU scratch record), in the reverse order every other "
          "repetition. A part's cost is the difference between the step that still has it "
          "and the next, per repetition (median [min – max] over repetitions): the parts "
          "add up to the whole program. A part's cost includes the cache misses it causes, "
          "which is most of it, and one part's misses can hide behind another's, so a part "
          "left out alone can save a little more or less than its row. Each figure is a "
          "difference of two runs, each of which moves by about +-150 ns from one run to the "
          "next on this shared VM: with a few repetitions the small rows (counters, query) "
          "are not resolved, and can come out below zero.")
    doc.p()
    rows = []
    for label, before, after in PART_ROWS:
        rows.append([label] + [spread(part_diffs(runs, before, after, p), "{:.0f}")
                               for p in progs])
    rows.append(["the empty program in the real process (returns at once: the kernel's two "
                 "clock reads, the program's own first lines)"] +
                [spread([r["parts"]["all"][p] for r in runs if p in r["parts"].get("all", {})],
                        "{:.0f}") for p in progs])
    rows.append(["**whole program** (this repetition's run)"] +
                [spread([part_ns(r, "shipped", p) for r in runs], "{:.0f}") for p in progs])
    doc.table(["part", "allocation program, ns per hit", "free program, ns per hit"], rows)
    warm = {p: [2 * r["parts"]["twice"][p] - part_ns(r, "shipped", p) for r in runs
                if p in r["parts"].get("twice", {})] for p in progs}
    doc.p("Warm against cold: with each program attached twice, every hit runs it a second "
          "time right after the first, with what the first brought into the caches; the "
          "second run's time (twice the mean of the pair minus the single run of the same "
          "repetition) was %s ns for the allocation program and %s ns for the free program, "
          "against %s and %s ns alone. In the example a program runs once every few hundred "
          "microseconds per CPU, between the target's own work, the collector and everything "
          "else on this 2-CPU VM: its code (the JIT image and the helpers'), the ring "
          "buffer's lines (its lock, consumer and producer positions, each on a page of its "
          "own, and the record's lines), the counters and the scratch record are out of "
          "the caches, and most of each part's cost above is those misses. trapfloor's "
          "stand-ins, called back to back, run warm." % (
              spread(warm["heapbpf_alloc"], "{:.0f}"), spread(warm["heapbpf_free"], "{:.0f}"),
              spread([part_ns(r, "shipped", "heapbpf_alloc") for r in runs], "{:.0f}"),
              spread([part_ns(r, "shipped", "heapbpf_free") for r in runs], "{:.0f}")))
    doc.p()


# What was tried against the figures above and not kept: measured once, by hand, not by run.py.
BPF_TRIED = (
    "Tried against these figures and not kept (2026-12-01, the BPF programs of 60b4369 with "
    "a 16 MiB ring buffer, the example service as above, heapbpf -v's bpf_stats, variant "
    "and baseline interleaved in one run, medians of per-repetition differences; one "
    "repetition's figure moves by about +-150 ns from one run to the next on this shared "
    "VM, so a difference below about 50 ns is not resolved; runs (1), (2), (5) and (6) had "
    "two more example services, left over by mistake, running in the background at their "
    "default 80,000 operations per second, the same for variant and baseline): "
    "(0) each part left out alone, not cumulated (5 repetitions): counters -16 / -76 ns "
    "(allocation / free), `bpf_ringbuf_query` +27 / -91, `bpf_ktime_get_ns` -112 / -125, "
    "the reads -239 / -271, the ring-buffer record -308 / -307, `bpf_get_current_pid_tgid` "
    "+50 / +21 (nothing), everything (the empty program) -730 / -674; the pid filter, "
    "absent from a one-target session (`filter_pids` is 0 and the verifier removes the "
    "hash lookup), forced on as in a session of several targets: +93 / +250 ns; "
    "(1) no hit counters and no `bpf_ringbuf_query` (the most that per-CPU counters, or "
    "hits counted in user space from the records, and a wake-up without the query could "
    "save): allocation -10 ns, free -37 ns (20 repetitions); the counters alone: +24 / "
    "-44 ns; "
    "(2) the allocation record reserved in the ring buffer in one of four size classes "
    "(16, 32, 64, 128 frames) and filled in place, its first 16 frames from a 144-byte "
    "read onto the stack, no scratch record and no copy (`bpf_ringbuf_output`), and for "
    "both programs the wake-up decided without a helper (from the record's address: once "
    "for every `wakeup_bytes` written): allocation +34, -93 and +21 ns, free (whose only "
    "change was the wake-up) +87, -5 and +89 ns, in three runs of 12, 10 and 20 "
    "repetitions: no gain; "
    "(3) all of the target's threads on one CPU (`taskset`: no line moves between the "
    "target's CPUs, the most that one ring buffer per CPU and per-CPU counters could "
    "remove), heapbpf (the consumer) on the other CPU or on the same one: allocation 632 "
    "and 608 ns against 615 unpinned, free 478 and 509 against 583 (5 repetitions): "
    "nothing for the allocation program, perhaps 75-105 ns for the free program, and "
    "nothing from where the consumer runs. The lines are evicted between hits more than "
    "taken by another CPU. "
    "One ring buffer per CPU would also give up the single ring's order of events across "
    "CPUs, which the collector relies on (an object's free after its allocation); "
    "(4) the programs attached twice (the warm figure above, by hand): the "
    "second run took 246 ns (allocation) and about 355 ns (free), the empty program's "
    "second run 40 and 50 ns, against 792, 757, 98 and 154 ns alone (6 repetitions); "
    "(5) `bpf_ktime_get_ns` first in both programs, before the other helpers (in case its "
    "ordered TSC read waited for their misses): allocation -47 ns, free -40 ns (16 "
    "repetitions, at 6844276 with the 4 MiB ring buffer): not resolved; "
    "(6) denser hits (the same service, 6 repetitions interleaved, at 27bf0d5): "
    "`lg_prof_sample:18`, 11,200 hits of each program in 3 s: allocation 687 ns, free 650; "
    "`lg_prof_sample:16`, 17,000: 697 and 540; `lg_prof_sample:14`, 37,900: 580 and 401. The "
    "closer the hits, the more of a program's lines are still cached at the next one: the "
    "cost per hit is mostly misses, and depends on the sampling rate. "
    "Even warm the programs are above the targets: trapfloor's stand-ins, called back to "
    "back, took 250-350 ns (allocation) and 175-260 ns (free) in every run so far, and the "
    "warm second run in the example 236-508 and 134-535 ns. "
    "What is left cannot reach the targets on this VM: the empty program alone costs "
    "about 90-105 ns (allocation) and 120-175 ns (free) in the real process, the free "
    "program's whole target, and the ring-buffer record (about 170-410 ns), the clock "
    "(about 40-130 ns) and the reads (about 80-245 ns) are each needed for a sample and are "
    "mostly misses on lines that no program keeps warm between hits hundreds of "
    "microseconds apart.")


def bpfstats(R, doc):
    b = R["bpfstats"]
    runs = b["runs"]
    empty = [r["empty_ns"] for r in runs]
    doc.p("## 8. BPF programs' own time per hit")
    doc.p()
    doc.p("The kernel's own measure (`bench/bpfstats.py`): with BPF statistics on, the kernel "
          "times every run of every BPF program (`run_time_ns`, `run_cnt` of "
          "`bpf_prog_info`, what `bpftool prog show` prints with `kernel.bpf_stats_enabled=1`): "
          "the program's own time, not the wait of a loaded machine. They are switched on "
          "with a `BPF_ENABLE_STATS` descriptor, which the kernel counts like the sysctl and "
          "forgets when it is closed, in every path (`kernel.bpf_stats_enabled` read %s before "
          "and %s after). %d repetitions, each: `heapbpf -v` (which prints its programs' "
          "counts and times before it unloads them) on the example service "
          "(`alloc-service-static --threads 4`, `lg_prof_sample:%d`) for %.1f s, and "
          "`bench/trapfloor %d 1`, whose empty program on a uprobe is the floor of the "
          "measure (the kernel's two clock reads around a program that does nothing), and "
          "which also runs heapbpf's allocation program on a %d-frame stand-in and its free "
          "program on a stand-in of 5.3.0's free hook, called back to back by one thread "
          "(warm caches), where in the example a program runs once every few hundred "
          "microseconds between the target's own memory traffic." % (
              b["sysctl_before"], b["sysctl_after"], len(runs), b["lg"], b["seconds"],
              b["trap_calls"], runs[0]["frames"]))
    doc.p()
    rows = []
    for prog, what in BPF_PROGS:
        ns = bpf_ns(R, prog)
        if not ns:
            continue
        hits = [r["progs"][prog][0] for r in runs if r["progs"].get(prog, (0, 0))[0]]
        rows.append(["`%s`: %s" % (prog, what), spread(hits, "{:,.0f}"), spread(ns, "{:.0f}"),
                     spread([x / e for x, e in zip(ns, empty)], "{:.1f}")])
    rows.append(["`trapfloor_empty`: empty program on a uprobe (floor)",
                 spread([r["empty_cnt"] for r in runs], "{:,.0f}"), spread(empty, "{:.0f}"),
                 "1"])
    rows.append(["`heapbpf_alloc` on trapfloor's %d-frame stand-in" % runs[0]["frames"],
                 spread([r["standin_cnt"] for r in runs], "{:,.0f}"),
                 spread([r["standin_ns"] for r in runs], "{:.0f}"),
                 spread([r["standin_ns"] / r["empty_ns"] for r in runs], "{:.1f}")])
    rows.append(["`heapbpf_free` on trapfloor's stand-in of 5.3.0's free hook",
                 spread([r["standin_free_cnt"] for r in runs], "{:,.0f}"),
                 spread([r["standin_free_ns"] for r in runs], "{:.0f}"),
                 spread([r["standin_free_ns"] / r["empty_ns"] for r in runs], "{:.1f}")])
    doc.table(["program", "hits per repetition", "ns per hit (kernel-measured)",
               "/ empty program"], rows)
    doc.p("For scale, one bare uprobe hit (trap and return, CPU time per call in the same "
          "trapfloor runs) took %s ns." % spread([r["trap_ns"] for r in runs], "{:.0f}"))
    doc.p()
    a, f = med(bpf_ns(R, "heapbpf_alloc")), med(bpf_ns(R, "heapbpf_free"))
    bpf_parts(R, doc)
    doc.p("Target: allocation program <= %d ns per hit: %s" % (
        TARGETS["bpf_alloc_ns"], verdict(a <= TARGETS["bpf_alloc_ns"], "%.0f ns" % a)))
    doc.p()
    doc.p("Target: free program <= %d ns per hit: %s" % (
        TARGETS["bpf_free_ns"], verdict(f <= TARGETS["bpf_free_ns"], "%.0f ns" % f)))
    doc.p()
    doc.p(BPF_TRIED)
    doc.p()


SVC_CONDITIONS = [
    ("idle", "idle: process A, nobody attached"),
    ("sampling", "sampling: process B, started with sampling on, nobody attached"),
    ("attached", "attached: process A, heapbpf attached"),
    ("sampling_same", "control: process A, `prof_active` set to 1 by the script, no heapbpf"),
    ("watched", "watched: process A, `heapbpf watch` attached (section 11)"),
]


def svc_ratio(r, key):
    return med(r["ratios"][key])


def services(R, doc):
    s = R["services"]
    doc.p("## 9. Real services: heapbpf's share of the cost")
    doc.p()
    doc.p("Two Debian services that link libjemalloc2 (`bench/services.py`), each as two "
          "processes on CPU %s that live through the whole measurement, with `LD_LIBRARY_PATH` "
          "pointing at `build/jemalloc/libjemalloc.so.2` (Debian's jemalloc %s with its "
          "symbols, as in section 3): A started with `MALLOC_CONF=%s`, B with "
          "`MALLOC_CONF=%s` (default `lg_prof_sample`, one sample per 512 KiB). Their load "
          "generators, and heapbpf when attached, run on CPU %s, 127.0.0.1 only. Per "
          "repetition, in an order that rotates from one repetition to the next, one load run "
          "in each condition; ratios are taken within each repetition, and the load average "
          "(1 min) is recorded around every run."
          % (cpus(R, "target"), machine_value(R, "jemalloc").split(" ")[0],
             s["conf"]["idle"], s["conf"]["sampling"], cpus(R, "heapbpf")))
    doc.p()
    rows = []
    for name, r in s["services"].items():
        loads = [x for c in r["loadavg"].values() for pair in c for x in pair]
        doc.p("**%s** (%s %s): %s; heapbpf took %s samples per attached run and its own "
              "process used %s of CPU during it (on the load generator's CPU); load average "
              "%.2f – %.2f during the runs." % (
                  name, r["package"], r["version"], r["load"], spread(r["samples"], "{:.0f}"),
                  spread([x / 1e6 for x in r["heapbpf_cpu_ns"]], "{:.1f} ms"),
                  min(loads), max(loads)))
        doc.p()
        doc.table(["condition", "requests/s", "ratio to idle (per repetition)",
                   "server CPU per run", "idle's CPU / this CPU"],
                  [[what, spread(r["rps"][c], "{:,.0f}"),
                    "1 (reference)" if c == "idle" else
                    spread([x / i for x, i in zip(r["rps"][c], r["rps"]["idle"])], "{:.3f}"),
                    spread([x / 1e9 for x in r["cpu_ns"][c]], "{:.2f} s"),
                    "1 (reference)" if c == "idle" else
                    spread([i / x for x, i in zip(r["cpu_ns"][c], r["cpu_ns"]["idle"])],
                           "{:.3f}")]
                   for c, what in SVC_CONDITIONS if c in r["rps"]])
        a_s, a_i, s_i = (svc_ratio(r, k) for k in ("attached_sampling", "attached_idle",
                                                    "sampling_idle"))
        for key, what in (("ratios", "requests/s"), ("cpu_ratios", "CPU efficiency")):
            rows.append(["%s, %s" % (name, what)] + [
                spread(r[key][k], "{:.3f}") for k in ("attached_sampling", "attached_idle",
                                                       "sampling_idle",
                                                       "attached_sampling_same")])
        doc.p("Target (%s): heapbpf attached >= %.0f%% of sampling-on-unattached requests/s: %s"
              % (name, TARGETS["svc_vs_sampling"] * 100, verdict(
                  a_s >= TARGETS["svc_vs_sampling"], "median %.3f" % a_s)))
        doc.p()
        doc.p("Target (%s): heapbpf attached >= %.0f%% of idle requests/s: %s%s" % (
            name, TARGETS["svc_vs_idle"] * 100,
            verdict(a_i >= TARGETS["svc_vs_idle"], "median %.3f" % a_i),
            " (for redis the summary keeps section 3's row for this target: the same "
            "workload and conditions)" if name == "redis" else ""))
        doc.p()
        if a_i < TARGETS["svc_vs_idle"] and a_s >= TARGETS["svc_vs_sampling"]:
            doc.p("Here the cost is jemalloc's own sampling, not heapbpf's: sampling on with "
                  "nobody attached already runs at %.3f of idle (median), and heapbpf "
                  "attached at %.3f of that." % (s_i, a_s))
            doc.p()
    doc.p("All ratios, per repetition: of requests/s (the targets' measure), and of CPU "
          "efficiency (the server's CPU time, all threads, for the same requests in the "
          "denominator's condition / in the numerator's: other work on the machine "
          "distorts it less than throughput; heapbpf's BPF programs run in the server's "
          "context and count in it). The control is jemalloc's sampling switched on in "
          "process A itself: attached / control compares heapbpf with jemalloc's own "
          "sampling without the difference between two processes.")
    doc.p()
    doc.table(["service, measure", "attached / sampling", "attached / idle", "sampling / idle",
               "attached / control (same process)"], rows)
    doc.p()
    accounting(R, doc)


# heapbpf's programs on uprobes in the target, which run in its threads (bench/services.py)
UPROBE_PROGS = ("heapbpf_alloc", "heapbpf_free", "heapbpf_activity")


def svc_share(r):
    """heapbpf's share of the server's CPU by accounting, per attached run (None: the
    results predate it)."""
    return r.get("share")


def accounting(R, doc):
    """Section 9, continued: heapbpf's share of each service's CPU from kernel-measured
    BPF time, the bare trap's cost and heapbpf's own CPU, which the throughput ratios
    cannot resolve."""
    svcs = [(n, r) for n, r in R["services"]["services"].items() if svc_share(r)]
    if not svcs:
        return
    lo = min(min(r["ratios"]["attached_sampling"]) for _, r in svcs)
    hi = max(max(r["ratios"]["attached_sampling"]) for _, r in svcs)
    doc.p("**heapbpf's share, by accounting.** The ratios above move from one repetition "
          "to the next on this shared VM (attached / sampling from %.3f to %.3f in this "
          "run)%s. What heapbpf adds to a "
          "service it is attached to is known part by part: its BPF programs run in the "
          "service's threads (their own time, measured by the kernel with BPF statistics on "
          "through the attached runs, whose two clock reads per program run the attached "
          "runs above include: `heapbpf -v` prints each program's run count and run time "
          "before it unloads them), each program run is one uprobe trap (one bare trap "
          "costs %.0f ns of CPU here: `bench/trapfloor`, an empty program on a uprobe, "
          "median of %d repetitions), and heapbpf's own process runs on the load "
          "generator's CPU. heapbpf's share of the service's CPU is (BPF run time + runs x "
          "bare trap + heapbpf's process CPU) / the service's CPU time during the run, per "
          "attached run: an estimate. It counts against heapbpf the %.1f s the programs "
          "were attached before the load ran, and the stop; it does not count what "
          "heapbpf's memory reads and ring-buffer writes do to the service's caches after "
          "the program returns, nor a trap's cost on the service's own code (the floor is "
          "an empty function's, warm). 1 - share is what the service keeps: attached / "
          "sampling on, unattached, as far as CPU is the cost."
          % (lo, hi, ": their medians do not resolve a 1% difference" if hi - lo > 0.02
             else "", R["services"]["trap_ns"], R["services"]["settings"].get("trap_reps", 1),
             R["services"]["settle_s"]))
    doc.p()
    rows = []
    for name, r in svcs:
        progs = r["bpf_progs"]

        def per_hit(prog):
            return [p[prog][1] / p[prog][0] for p in progs if p.get(prog, (0, 0))[0]]

        hits = [sum(n for k, (n, _) in p.items() if k in UPROBE_PROGS) for p in progs]
        rows.append([name, spread(hits, "{:,.0f}"), spread(per_hit("heapbpf_alloc"), "{:.0f}"),
                     spread(per_hit("heapbpf_free"), "{:.0f}") if per_hit("heapbpf_free")
                     else "no frees",
                     spread([x * 100 for x in r["share"]], "{:.2f}%"),
                     spread([1 - x for x in r["share"]], "{:.4f}"),
                     spread([h / c * 100 for h, c in zip(r["heapbpf_cpu_ns"],
                                                         r["cpu_ns"]["attached"])],
                            "{:.2f}%")])
    doc.table(["service", "program runs per attached run", "allocation program (ns/run)",
               "free program (ns/run)", "heapbpf's share of the service's CPU",
               "1 - share: attached / sampling, by accounting",
               "heapbpf's own process CPU / the service's (other CPU)"], rows)
    doc.p()
    for name, r in svcs:
        keep, s_i = med([1 - x for x in r["share"]]), svc_ratio(r, "sampling_idle")
        doc.p("Target (%s), estimated by accounting: heapbpf attached >= %.0f%% of sampling on, "
              "unattached: %s. Attached / idle is then jemalloc's own sampling (sampling / "
              "idle: median %.3f of requests/s, %.3f of CPU efficiency, with the spreads "
              "above) times %.4f." % (
                  name, TARGETS["svc_vs_sampling"] * 100,
                  verdict(keep >= TARGETS["svc_vs_sampling"], "median %.4f" % keep),
                  s_i, med(r["cpu_ratios"]["sampling_idle"]), keep))
        doc.p()


def snapshot(R, doc):
    """Section 10: the live heap read from jemalloc's tables (absent from older results)."""
    sn = R.get("snapshot")
    if not sn:
        return
    doc.p("## 10. Live-heap snapshots")
    doc.p()
    doc.p("`bench/stackheap %d` (static, Debian's jemalloc, `prof:true,prof_active:true,"
          "lg_prof_sample:0`: every allocation sampled) holds one 64-byte object from each "
          "of %d call paths. Timed from start to exit, folded output, `--raw`: `heapbpf "
          "--pid N --live-heap` on the process, then `heapbpf report CORE` on a gdb `gcore` "
          "core of it (%.0f MiB, written in %.1f s, not counted), %d time(s) each. The two "
          "outputs were %s." % (sn["target_stacks"], sn["target_stacks"], sn["core_mib"],
                                sn["gcore_s"], len(sn["live_ms"]),
                                "identical" if sn["same"] else "DIFFERENT"))
    doc.p()
    best_live, best_core = min(sn["live_ms"]), min(sn["core_ms"])
    want = "<= %d ms" % TARGETS["snapshot_ms"]
    doc.table(["measure", "value", "target", "verdict"], [
        ["stacks in the snapshot", "{:,}".format(sn["stacks"]), "{:,}".format(
            sn["target_stacks"]), verdict(sn["stacks"] >= sn["target_stacks"] and sn["same"])],
        ["--live-heap, wall (best)", "%.0f ms" % best_live, want,
         verdict(best_live <= TARGETS["snapshot_ms"])],
        ["--live-heap, wall (all)", spread(sn["live_ms"], "{:.0f}"), "", ""],
        ["report CORE, wall (best)", "%.0f ms" % best_core, want,
         verdict(best_core <= TARGETS["snapshot_ms"])],
        ["report CORE, wall (all)", spread(sn["core_ms"], "{:.0f}"), "", ""],
    ])
    doc.p()


def watch(R, doc):
    """Section 11: heapbpf watch for a long time, compressed (absent from older results)."""
    w = R.get("watch")
    if not w:
        return
    doc.p("## 11. heapbpf watch, long")
    doc.p()
    doc.p("`examples/alloc-service-static --threads %d` with `lg_prof_sample:%d` (one sample "
          "per %d bytes: %d times jemalloc's default rate, so %d s stand for about %.1f hours "
          "at the default) under `heapbpf watch --pid N --output-dir DIR` for %d s; heapbpf's "
          "RSS read every second, its CPU time and the target's from `/proc/PID/stat` over the "
          "same span (after the first second), then SIGUSR1 (one profile) and SIGINT (the "
          "stop profile)." % (w["threads"], w["lg"], 1 << w["lg"], 1 << (19 - w["lg"]),
                              w["seconds"], w["seconds"] * (1 << (19 - w["lg"])) / 3600,
                              w["seconds"]))
    doc.p()
    share = w["hb_cpu_s"] / w["target_cpu_s"] if w["target_cpu_s"] else 0
    doc.table(["measure", "value"], [
        ["samples taken", "{:,}".format(w["samples"])],
        ["events dropped", str(w["drops"])],
        ["profiles written (demand, stop)", str(w["profiles"])],
        ["heapbpf RSS, first and last second", "%.1f -> %.1f MiB" % (
            w["rss_first_kib"] / 1024, w["rss_last_kib"] / 1024)],
        ["heapbpf RSS, highest", "%.1f MiB" % (w["rss_max_kib"] / 1024)],
        ["heapbpf RSS slope, second half (least squares)", "%.1f MiB/h" % (
            w["slope_kib_per_hour"] / 1024)],
        ["heapbpf's own CPU / the target's CPU", "%.4f" % share],
    ])
    doc.p()
    doc.p("heapbpf's own CPU here is the collector's (reading the ring buffer, keeping the "
          "in-use set); the BPF programs' time runs in the target's threads and counts in "
          "the target's CPU, as in §8 and §9.")
    doc.p()
    watch_services(R, doc)


def agent(R, doc):
    """Section 12: heapbpf agent over many services (absent from older results)."""
    a = R.get("agent")
    if not a:
        return
    doc.p("## 12. heapbpf agent, one for the node")
    doc.p()
    doc.p("%d copies of `examples/alloc-service-static --threads 1 --rate %d` (jemalloc's "
          "default sampling rate), taken by one `heapbpf agent --select exe=... "
          "--max-targets %d --interval %d --rotate %d --output-dir DIR`; over %d s (from 2 s "
          "after its start) heapbpf's CPU time from `/proc/PID/stat` and its RSS every "
          "second." % (a["procs"], a["rate"], a["budget"], a["interval"], 2 * a["interval"],
                       a["seconds"]))
    doc.p()
    doc.table(["measure", "value"], [
        ["heapbpf's CPU, share of one core", "%.2f%%" % (100 * a["hb_cpu_s"] / a["wall_s"])],
        ["the services' CPU, all together, share of one core",
         "%.1f%%" % (100 * a["services_cpu_s"] / a["wall_s"])],
        ["heapbpf RSS, highest and last", "%.1f / %.1f MiB" % (
            a["rss_max_kib"] / 1024, a["rss_last_kib"] / 1024)],
        ["services with at least one window", "%d of %d" % (a["windowed"], a["procs"])],
        ["rotations", str(a["rotations"])],
        ["profiles written", str(a["profiles"])],
    ])
    doc.p()
    doc.p("heapbpf's CPU here is its own thread's: rotations (each target's flag, guard and "
          "symbolizer), windows (symbolized and written) and the ring buffer; the BPF "
          "programs' time counts in the services' CPU.")
    doc.p()


def rss(R, doc):
    """Section 13: heapbpf rss on a large heap (absent from older results)."""
    r = R.get("rss")
    if not r:
        return
    runs = r["runs"]
    best = min(x["wall_ms"] for x in runs)
    doc.p("## 13. heapbpf rss on a large heap")
    doc.p()
    later(R, "rss", doc)
    doc.p("`examples/alloc-service-static --control --threads 0` (Debian's jemalloc) after "
          "`fill %d` (1 MiB blocks, every byte written) and `fragment %d` (small objects of "
          "eight sizes, three in four freed at random; 32 MiB of large blocks freed; a quarter "
          "as much mapped outside jemalloc): `heapbpf rss --pid N --format json`, %d time(s), "
          "timed from start to exit. heapbpf never stops the process." % (
              r["fill_mib"], r["fragment_mib"], len(runs)))
    doc.p()
    doc.table(["measure", "value", "target", "verdict"], [
        ["jemalloc active", "%.0f MiB" % (runs[0]["active"] / MIB), "4 GiB", ""],
        ["extents walked", "{:,}".format(runs[0]["extents"]), "", ""],
        ["wall (best)", "%.0f ms" % best, "<= %d ms" % TARGETS["rss_ms"],
         verdict(best <= TARGETS["rss_ms"])],
        ["wall (all)", spread([x["wall_ms"] for x in runs], "{:.0f}"), "", ""],
        ["reading and walking, as heapbpf timed it", spread([x["walk_ms"] for x in runs],
                                                            "{:.0f}"), "", ""],
        ["the process stopped", "0 ms (never)", "<= 10 ms", verdict(True)],
        ["unexplained, share of the RSS", spread([100.0 * x["unexplained"] / x["rss"]
                                                  for x in runs], "{:.2f}%"), "", ""],
        ["extents that moved during a walk", str(sum(x["skipped"] for x in runs)), "", ""],
    ])
    doc.p()


def later(R, name, doc):
    """The note of a section measured again after the run (run.py --only)."""
    x = (R.get("later") or {}).get(name)
    if x:
        doc.p("Measured after the rest, at heapbpf %s, by `%s` (load average then: %s)."
              % (x["heapbpf"], x["command"], x["load"]))
        doc.p()


def watch_rss(R, doc):
    """Section 14: heapbpf watch measuring RSS breakdowns (absent from older results)."""
    r = R.get("watch_rss")
    if not r:
        return
    share = r["hb_cpu_s"] / r["target_cpu_s"]
    bshare = r["breakdown_cpu_s"] / r["target_cpu_s"]
    doc.p("## 14. heapbpf watch with RSS breakdowns")
    doc.p()
    later(R, "watch_rss", doc)
    doc.p("`examples/alloc-service-static --control --threads %d --rate 0` (a busy service, "
          "Debian's jemalloc, `prof:true,prof_active:false`, jemalloc's default rate) after "
          "`fill %d` and `fragment %d`, under `heapbpf watch -v --pid N --output-dir DIR` for "
          "%d s. The watch measures the breakdown between triggers: after a pass it waits 100 "
          "times the pass's CPU time, and a target's next waits until the target has used 200 "
          "times what its last cost; the first is taken at once. Breakdowns and their CPU "
          "time are counted from the watch's `-v` lines; the CPU times of both processes "
          "from /proc/PID/stat over the run." % (
              r["threads"], r["fill_mib"], r["fragment_mib"], r["seconds"]))
    doc.p()
    doc.table(["measure", "value", "target", "verdict"], [
        ["breakdowns measured", str(r["breakdowns"]), "", ""],
        ["CPU time of one (mean, max)", "%.0f ms, %.0f ms" % (r["cost_ms_mean"],
                                                           r["cost_ms_max"]), "", ""],
        ["the service's CPU", "%.1f s in %.0f s" % (r["target_cpu_s"], r["wall_s"]), "", ""],
        ["the breakdowns' CPU, share of the service's", "%.2f%%" % (100 * bshare), "<= 1%",
         verdict(bshare <= TARGETS["watch_rss_share"])],
        ["heapbpf watch's CPU in all, share of the service's", "%.2f%%" % (100 * share),
         "<= 1%", verdict(share <= TARGETS["watch_rss_share"],
                          "the rest is sampling an example that does nothing but allocate "
                          "(sections 2 and 11 measure it; 11 on real services)")],
        ["heapbpf watch's CPU in all, share of one core",
         "%.2f%%" % (100 * r["hb_cpu_s"] / r["wall_s"]), "", ""],
    ])
    doc.p()


def watch_rss_redis(R, doc):
    """Section 14, continued: the watch with its breakdowns on Redis (absent from older
    results)."""
    r = R.get("watch_rss_redis")
    if not r:
        return
    share = r["hb_cpu_s"] / r["target_cpu_s"]
    doc.p("**On Redis.** The Redis fixture (built as upstream builds it, its bundled jemalloc "
          "with `--enable-prof`, `JE_MALLOC_CONF=prof:true,prof_active:false`) under "
          "`redis-benchmark -t set,get,lpush,lpop -n %d -r 100000 -d 256 -c 50 -P 16`, "
          "`heapbpf watch -v --pid N --output-dir DIR` attached for the whole load run. "
          "CPU times from /proc/PID/stat (10 ms ticks), over the run." % r["n"])
    doc.p()
    later(R, "watch_rss_redis", doc)
    doc.table(["measure", "value", "target", "verdict"], [
        ["requests/s during the run", "{:,.0f}".format(r["rps"]), "", ""],
        ["breakdowns measured (CPU time of one, mean)",
         "%d (%.1f ms)" % (r["breakdowns"], r["cost_ms_mean"]), "", ""],
        ["Redis's CPU", "%.1f s in %.0f s" % (r["target_cpu_s"], r["wall_s"]), "", ""],
        ["the breakdowns' CPU, share of Redis's",
         "%.2f%%" % (100 * r["breakdown_cpu_s"] / r["target_cpu_s"]), "", ""],
        ["heapbpf watch's CPU in all, share of Redis's", "%.2f%%" % (100 * share), "<= 1%",
         verdict(share <= TARGETS["watch_rss_share"])],
    ])
    doc.p()


def watch_share(r):
    """heapbpf watch's share of a service's CPU by accounting, per watched run (None:
    the results predate it)."""
    return (r.get("watch") or {}).get("share") or None


def watch_services(R, doc):
    """Section 11, continued: heapbpf watch's share of redis's and nghttpd's CPU, by
    section 9's accounting, at jemalloc's default rate."""
    svcs = [(n, r) for n, r in R["services"]["services"].items() if watch_share(r)]
    if not svcs:
        return
    doc.p("**A watcher's cost on real services.** Section 9's services and load, with a "
          "fifth condition in each repetition's rotation: process A under `heapbpf watch "
          "--pid N --output-dir DIR -v` (its defaults: the oom and demand triggers armed; "
          "pressure and growth are opt-in and off; default ring buffer), attached for the "
          "whole load run, jemalloc's default rate. heapbpf's share of the service's CPU by "
          "the same accounting as section 9: (BPF run time + runs x bare trap + heapbpf's "
          "process CPU) / the service's CPU time during the run.")
    doc.p()
    rows = []
    for name, r in svcs:
        w = r["watch"]
        hits = [sum(n for k, (n, _) in p.items() if k in UPROBE_PROGS) for p in w["bpf_progs"]]
        rows.append([name, spread(hits, "{:,.0f}"),
                     spread([x * 100 for x in w["share"]], "{:.2f}%"),
                     spread([1 - x for x in w["share"]], "{:.4f}"),
                     spread([h / c * 100 for h, c in zip(w["heapbpf_cpu_ns"],
                                                         r["cpu_ns"]["watched"])], "{:.2f}%"),
                     spread(r["ratios"]["watched_sampling"], "{:.3f}")])
    doc.table(["service", "program runs per watched run", "heapbpf watch's share of the "
               "service's CPU", "1 - share", "heapbpf's own process CPU / the service's",
               "requests/s, watched / sampling (measured, noisy)"], rows)
    doc.p()
    for name, r in svcs:
        share = med(r["watch"]["share"])
        doc.p("Target (%s): heapbpf watch's share of the service's CPU <= 1%%, by "
              "accounting: %s." % (name, verdict(share <= 0.01, "median %.2f%%" % (share * 100))))
        doc.p()


def targets(R, doc):
    """The summary table: one row per target, with the section that explains it."""
    attach_ms, stop_ms = attach_all(R), stop_all(R)
    idle_after = med(R["idle"]["ratio_after"])
    redis_ratio = med(R["redis"]["ratios"]["heapbpf"])
    events = med(R["collector"]["events_per_s"])
    best_live = R["collector"]["best_live"]
    rss = R["footprint"]["rss_mib"]
    stop_worst = max(stop_ms + [R["footprint"]["stop_ms"]])
    svc_rows = []
    for name, r in R["services"]["services"].items():
        a_s, a_i = svc_ratio(r, "attached_sampling"), svc_ratio(r, "attached_idle")
        svc_rows.append(["9", "%s requests/s, heapbpf attached / sampling on, unattached" % name,
                         ">= 0.99", "%.3f" % a_s, a_s >= TARGETS["svc_vs_sampling"]])
        if svc_share(r):
            keep = med([1 - x for x in r["share"]])
            svc_rows.append(["9", "%s, the same estimated by accounting: 1 - heapbpf's "
                             "share of its CPU (kernel-measured BPF time, traps, heapbpf's "
                             "own CPU)" % name, ">= 0.99",
                             "%.4f" % keep, keep >= TARGETS["svc_vs_sampling"]])
        if name != "redis":  # redis: row 3, the same ratio
            svc_rows.append(["9", "%s requests/s, heapbpf attached / idle" % name, ">= 0.97",
                             "%.3f" % a_i, a_i >= TARGETS["svc_vs_idle"]])
    summary = [
        ["1", "idle: throughput after detach / before", ">= 0.99", "%.3f" % idle_after,
         idle_after >= TARGETS["idle"]],
        ["2", "heapbpf's cost per sample / one uprobe hit", "<= 1.2",
         "%.2f" % per_sample_ratio(R), per_sample_ratio(R) <= TARGETS["per_sample"]],
        ["3", "redis requests/s, heapbpf attached / idle", ">= 0.97", "%.3f" % redis_ratio,
         redis_ratio >= TARGETS["redis"]],
        ["5", "collector events/s, one core", ">= 1M", "%.2fM" % (events / 1e6),
         events >= TARGETS["collector"]],
        ["5", "live samples/s with zero drops", ">= 50k", "%.0fk" % (best_live / 1e3),
         best_live >= TARGETS["live_rate"]],
        ["6", "peak RSS, 100k unique stacks", "<= 64 MiB", "%.1f MiB" % rss,
         rss <= TARGETS["rss_mib"]],
        ["6", "attach latency (worst)", "<= 250 ms", "%.0f ms" % max(attach_ms),
         max(attach_ms) <= TARGETS["attach_ms"]],
        ["6", "stop -> files written (worst, incl. 100k stacks)", "<= 500 ms",
         "%.0f ms" % stop_worst, stop_worst <= TARGETS["stop_ms"]],
        ["8", "allocation program, kernel-measured ns per hit", "<= 200 ns",
         "%.0f ns" % med(bpf_ns(R, "heapbpf_alloc")),
         med(bpf_ns(R, "heapbpf_alloc")) <= TARGETS["bpf_alloc_ns"]],
        ["8", "free program, kernel-measured ns per hit", "<= 120 ns",
         "%.0f ns" % med(bpf_ns(R, "heapbpf_free")),
         med(bpf_ns(R, "heapbpf_free")) <= TARGETS["bpf_free_ns"]],
    ] + svc_rows
    if R.get("unit"):
        u = R["unit"]
        urss = max(u["tree_peak_kib"], u["peak_rss_kib"]) / 1024
        summary.append(["6", "heapbpf RSS, %d processes under one --unit" % u["procs"],
                        "<= 128 MiB", "%.1f MiB" % urss, urss <= TARGETS["unit_rss_mib"]])
    if R.get("snapshot"):
        sn = R["snapshot"]
        for name, key in (("--live-heap", "live_ms"), ("report of a gcore core", "core_ms")):
            best = min(sn[key])
            summary.append(["10", "live-heap snapshot, %s stacks, %s" % (
                "{:,}".format(sn["stacks"]), name), "<= 1000 ms", "%.0f ms" % best,
                best <= TARGETS["snapshot_ms"]])
    if R.get("watch"):
        w = R["watch"]
        slope_mib = w["slope_kib_per_hour"] / 1024
        summary.append(["11", "heapbpf watch, RSS slope over the second half (MiB/h, "
                        "at %d x the default sampling rate)" % (1 << (19 - w["lg"])),
                        "<= 1 MiB/h", "%.1f MiB/h" % slope_mib, slope_mib <= 1.0])
    if R.get("agent"):
        a = R["agent"]
        cpu = a["hb_cpu_s"] / a["wall_s"]
        summary.append(["12", "heapbpf agent over %d services, %d at once: its CPU (share of "
                        "one core)" % (a["procs"], a["budget"]), "<= 10%",
                        "%.2f%%" % (100 * cpu), cpu <= TARGETS["agent_cpu"]])
        summary.append(["12", "the same: its RSS, at most", "<= %d MiB" % TARGETS[
            "agent_rss_mib"], "%.1f MiB" % (a["rss_max_kib"] / 1024),
            a["rss_max_kib"] / 1024 <= TARGETS["agent_rss_mib"]])
    if R.get("rss"):
        best = min(x["wall_ms"] for x in R["rss"]["runs"])
        summary.append(["13", "heapbpf rss on a 4 GiB heap, wall", "<= %d ms" % TARGETS[
            "rss_ms"], "%.0f ms" % best, best <= TARGETS["rss_ms"]])
    if R.get("watch_rss"):
        w = R["watch_rss"]
        share = w["hb_cpu_s"] / w["target_cpu_s"]
        bshare = w["breakdown_cpu_s"] / w["target_cpu_s"]
        summary.append(["14", "heapbpf watch's RSS breakdowns, their share of a busy "
                        "service's CPU", "<= 1%", "%.2f%%" % (100 * bshare),
                        bshare <= TARGETS["watch_rss_share"]])
        summary.append(["14", "the same watch in all (sampling too)", "<= 1%",
                        "%.2f%%" % (100 * share), share <= TARGETS["watch_rss_share"]])
    if R.get("watch_rss_redis"):
        w = R["watch_rss_redis"]
        share = w["hb_cpu_s"] / w["target_cpu_s"]
        summary.append(["14", "heapbpf watch with RSS breakdowns on Redis under load, its "
                        "share of Redis's CPU", "<= 1%", "%.2f%%" % (100 * share),
                        share <= TARGETS["watch_rss_share"]])
    for name, r in R["services"]["services"].items():
        if watch_share(r):
            share = med(r["watch"]["share"])
            summary.append(["11", "%s, heapbpf watch's share of its CPU by accounting "
                            "(default rate)" % name, "<= 1%", "%.2f%%" % (share * 100),
                            share <= 0.01])
    doc.p("## Targets")
    doc.p()
    doc.table(["§", "target", "wanted", "measured", "verdict"],
              [r[:4] + ["**met**" if r[4] else "**not met** (see §%s)" % r[0]]
               for r in summary])
    doc.p("The whole suite took %.0f s; load average at the end: %s (other work on this "
          "shared machine during the run shows up here, and in the spreads)." % (
              R["elapsed_s"], R["load_end"]))
    doc.p()


# make test-kernels (tests/kernels/run.sh), measured by hand: it boots kernels under
# qemu, which bench/run.py does not. (kernel, boots, boot seconds, test seconds, result)
KERNELS_CMD = "time make test-kernels"
KERNELS_WHEN = ("2026-12-06, 5.10 and 6.1; 6.12 and 7.2 by a second `tests/kernels/run.sh` "
                "beside it, four guests at once at the end")
KERNELS_ROWS = [
    ("5.10 (bullseye)", "cgroup2, then v1", 242, 2273, "cgroup2: 5 of 11 (v1 boot not finished)"),
    ("6.1 (bookworm)", "cgroup2, then v1", 158 + 83, 1120 + 422, "cgroup2: 7 of 9; v1: 1 of 2"),
    ("6.12 (trixie)", "cgroup2", 105, 1167, "3 of 9"),
    ("7.2 (sid)", "cgroup2", 122, 1209, "3 of 9"),
]
KERNELS_NOTE = ("The machine's load average was 60 to 77 throughout (two other full `make "
                "test` runs, another tree's two arm64 guests, lint): each guest had a few "
                "percent of a core, and every failure was a test's own wall-clock limit "
                "running out (docs/kernel.md, Kernels tested). The same runner's check "
                "(`tests/kernels/check-runner.sh`, one boot of 6.1 and one test) took 67 s at "
                "a load near 20 and 152 s near 65. Whether the matrix fits 15 minutes on a "
                "quiet 2-core machine was not measured. 5.10's v1 boot was "
                "stopped unfinished; the second runner (6.12, 7.2) took 1332 s of wall time.")


def kernels(doc):
    """Section 15: the kernel matrix's boot and test time (recorded above, not measured here)."""
    doc.p("## 15. The kernel matrix (`make test-kernels`)")
    doc.p()
    doc.p("Each kernel's boots and tests under qemu with software emulation (TCG), from "
          "`%s` (%s). \"boots\" is each boot's time less its tests' (kernel start, the "
          "initramfs, the overlay root, power-off); \"tests\" the sum of its tests' own "
          "seconds; two kernels run at once, so the wall time is less than the sum. %s" % (
              KERNELS_CMD, KERNELS_WHEN, KERNELS_NOTE))
    doc.p()
    doc.table(["kernel", "boots", "boot time", "test time", "passed"],
              [[k, b, "not known" if bs is None else "%d s" % bs, "%d s" % ts, r]
               for k, b, bs, ts, r in KERNELS_ROWS])


# make test beside another make test (`CI=true bash .ci/run` in fresh clones, two at a
# time), measured by hand, as bench/run.py cannot: per machine or session, what ran, its
# runs (run, commit, beside, wall time, result), and what they showed.
PAIRS = [
    ('Each run is `CI=true bash .ci/run` (which is `make test`) in a fresh `git clone` of the'
     ' tree, two clones at once on this 2-core machine (2026-12-07, load average 20 to 50 '
     "while both ran). Clone B ran over and over while A, then C, ran beside it; B's second "
     'run found its build done (warm), the others built from nothing (cold). Times are the '
     "runs' own wall time.",
     [
         ['A (cold)',
          '1cd0c72',
          "B's first",
          '2805 s',
          '1912 passed, 1 failed: `leaks/scenario_with_known_rates` (a longest lifetime of '
          '287 ms where the example timed 77 ms: docs/analysis.md, Lifetimes)'],
         ['B, first (cold)',
          '1cd0c72',
          'A',
          '2801 s',
          '1913 passed, 0 failed'],
         ['B, second (warm)',
          '1cd0c72',
          'C',
          '1644 s',
          '1913 passed, 0 failed'],
         ['C (cold)',
          'e42aa3d',
          "B's second and third",
          '2693 s',
          '1920 passed, 1 failed: `forks_pidreuse/process_under_a_freed_pid_is_left_alone` (5'
          ' freed pids in a row taken; now 20 tries, 6410276)'],
     ],
     'A cold run beside another takes about 47 minutes here, past the 45 the project allows '
     "itself; alone, CI's last passing run took 1453 s (stop 39)."),
    ('Again on a new machine of the same kind (2026-12-07; its Xeon reports "57 bits '
     'virtual"), each run `CI=true bash .ci/run` in a fresh clone:',
     [
         ['G (cold, no fixture cache)',
          'fe8dbf9',
          "nothing but this session's own work",
          '1930 s',
          '1908 passed, 13 failed: every `rss_versions` test, the fixtures built 57-bit on '
          'this CPU (pinned to 48 since, 080aca3; 57-bit builds read since 066cbb6); and '
          '`reach/unknown_521_dev_build_from_dwarf_oracle` (sanitized), heapbpf exit 4, '
          'events dropped'],
         ['A (cold, fixtures rebuilt)',
          '12f4e56',
          'B',
          '2906 s',
          '1935 passed, 0 failed'],
         ['B (cold, fixtures rebuilt)',
          '12f4e56',
          'A',
          '2907 s',
          '1934 passed, 1 failed: '
          '`multi/unit_in_one_process_each_exact_and_one_killed_mid_run` (sanitized), heapbpf'
          ' not started within the 20 s hang guard (three times longer in the sanitized pass '
          'since, 0417931)'],
         ['C (fixtures cached)',
          '0417931',
          'D',
          '2404 s',
          '1935 passed, 0 failed'],
         ['D (fixtures cached)',
          '0417931',
          'C',
          '2402 s',
          '1934 passed, 1 failed: `top/plain_tables_on_a_pipe` (sanitized), three tables '
          'where it asked four in 4.5 s: a late tick (the test counts one to four since, the '
          'next commit)'],
     ],
     'So a cold run beside another took 48 minutes here, past the 45 the project allows '
     'itself.'),
    ('A third session on the same machine (2026-12-07, later): the fixture recipe changed '
     "(99687fb: jemalloc's symbol-listing compile unoptimized), so E and F rebuilt the "
     'jemalloc fixtures (one built them, the other waited for its set); the Redis fixture and'
     ' the fetched Debian sources were still cached. Then each clone ran `make test` a second'
     ' time, warm, the two side by side again, while this session also booted qemu guests '
     '(load average 16 to 26).',
     [
         ['E (jemalloc fixtures rebuilt)',
          '99687fb',
          'F',
          '2146 s',
          '1935 passed, 0 failed'],
         ['F (jemalloc fixtures rebuilt)',
          '99687fb',
          'E',
          '2144 s',
          '1935 passed, 0 failed'],
         ['E, second (warm)',
          '99687fb',
          "F's second, qemu guests",
          '1978 s',
          '1934 passed, 1 failed: `watch/profiles_of_one_second_each_get_a_file`, which read '
          '"wrote PATH, NAME.rss.json" as one path (the RSS breakdown came first on the '
          'loaded machine; the test reads both names since, bd5b013)'],
         ['F, second (warm)',
          '99687fb',
          "E's second, qemu guests",
          '1979 s',
          '1935 passed, 0 failed'],
         ['G (fixtures cached)', 'bd5b013', 'H; this session\'s arm64 and 5.10 guests', '2434 s',
          '1935 passed, 0 failed'],
         ['H (fixtures cached)', 'bd5b013', 'G; the same guests', '2432 s',
          '1935 passed, 0 failed'],
         ['G, second (pulled to 4db6957)', '4db6957', "H's second", '1438 s',
          '1935 passed, 0 failed'],
         ['H, second (pulled to 4db6957)', '4db6957', "G's second", '1440 s',
          '1935 passed, 0 failed'],
     ],
     'A run rebuilding the jemalloc fixtures beside another took 36 minutes this time, under '
     'the 45; the pair of the session before (A, B) took 48, and rebuilt the Redis fixture '
     "too. The unoptimized listing compile saves about a tenth of each jemalloc build's CPU "
     '(85 s to 75 s for 5.3.0), too little to account for the difference: the load beside '
     'them differed. Process accounting (`sa`) over the last 28 minutes of E and F, both '
     'clones: the compiler (cc1) 11.5 CPU-minutes, clang-tidy 9.7, the example service 5.4, '
     'the test runners 3.3, heapbpf 2.8. The fixture build runs at a lower priority, so in a '
     'busy cold run it waits for the tests to finish and the version tests wait for it: the '
     'jemalloc set took 1748 s of wall time, the 5.3.1 set, alone at the end, 121 s.'),
]


def pairs(doc):
    """Section 16: make test beside another make test (recorded above, not measured here)."""
    doc.p("## 16. `make test` beside another `make test`")
    doc.p()
    for intro, rows, after in PAIRS:
        doc.p(intro)
        doc.p()
        doc.table(["run", "commit", "beside", "wall time", "result"], rows)
        doc.p(after)
        doc.p()


def report(R):
    """The whole of BENCHMARKS.md from a results file's content."""
    doc, body = Doc(), Doc()
    head(R, doc)
    idle(R, body)
    per_sample(R, body)
    redis(R, body)
    scaling(R, body)
    collector(R, body)
    footprint(R, body)
    unit(R, body)
    recording(R, body)
    bpfstats(R, body)
    services(R, body)
    snapshot(R, body)
    watch(R, body)
    agent(R, body)
    rss(R, body)
    watch_rss(R, body)
    watch_rss_redis(R, body)
    kernels(body)
    pairs(body)
    targets(R, doc)
    return doc.text() + "\n" + body.text()


def check_wellformed(text):
    """Every section present, every table rectangular with a row, no NaN, every
    target with a verdict."""
    for s in SECTIONS:
        if s not in text:
            raise ReportError("report lacks section %r" % s)
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].startswith("|"):
            cols = lines[i].count("|")
            j = i
            while j < len(lines) and lines[j].startswith("|"):
                if lines[j].count("|") != cols:
                    raise ReportError("ragged table row: %r" % lines[j])
                j += 1
            if j - i < 3:
                raise ReportError("table without rows at %r" % lines[i])
            i = j
        else:
            i += 1
    if re.search(r"\bnan\b|\binf\b", text, re.I):
        raise ReportError("report holds NaN or inf")
    if text.count("Target") < 6 or not re.search(r"\*\*(not )?met\*\*", text):
        raise ReportError("report lacks target verdicts")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", help="the JSON file bench/run.py wrote")
    ap.add_argument("--out", default="BENCHMARKS.md")
    a = ap.parse_args()
    try:
        with open(a.results) as f:
            R = json.load(f)
    except (OSError, ValueError) as e:
        raise ReportError("cannot read %s: %s" % (a.results, e))
    try:
        text = report(R)
    except (KeyError, TypeError, IndexError) as e:
        raise ReportError("%s is not a complete results file of bench/run.py (%s: %s)" %
                          (a.results, type(e).__name__, e))
    check_wellformed(text)
    tmp = a.out + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, a.out)
    print("bench: wrote %s from %s" % (a.out, a.results), file=sys.stderr)


if __name__ == "__main__":
    try:
        main()
    except ReportError as e:
        sys.exit("bench: " + str(e))
