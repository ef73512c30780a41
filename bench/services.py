"""heapbpf's share of the cost on real services (issue 17).

Two Debian services that link libjemalloc2, each under its own load
generator: `redis-server` under `redis-benchmark` (the workload of section 3)
and `nghttpd` (nghttp2-server, HTTP/2 without TLS, serving a 4 KiB file)
under `h2load` (nghttp2-client). Each service runs as two processes for the
whole measurement, both on the target CPU, with `LD_LIBRARY_PATH` pointing
at `BUILD/jemalloc/libjemalloc.so.2` (Debian's own jemalloc, linked from
its `libjemalloc_pic.a` with the symbols heapbpf needs; Debian's
`libjemalloc.so.2` is stripped):

- A, started with `MALLOC_CONF=prof:true,prof_active:false`;
- B, started with `MALLOC_CONF=prof:true,prof_active:true`.

Per repetition, in an order that rotates from one repetition to the next,
one load-generator run (on the other CPUs) in each condition:

- idle: A, nobody attached;
- sampling: B, jemalloc sampling at its default rate, nobody attached;
- attached: A with `heapbpf --pid` attached for the whole run (heapbpf
  switches `prof_active` on, the run starts half a second later, and
  heapbpf is stopped after it, switching the flag off); heapbpf's own CPU
  time during the run is recorded too;
- sampling_same: A with its `prof_active` byte set to 1 by this script for
  the run, no heapbpf: jemalloc's sampling in the same process as idle and
  attached, a control for the difference between the two processes.

Ratios are taken within each repetition (attached / sampling, attached /
idle, sampling / idle, attached / sampling_same); the report takes their
medians and spreads. Besides requests/s (the issue's measure), the server's
own CPU time during each run is read from /proc/PID/task/*/schedstat (all
threads, nanoseconds; the BPF programs run in the target's context and are
charged to it): the same ratios of CPU per request vary less with the
machine's other work than throughput does. The load average is recorded
around every run.

Neither resolves 1% on a shared VM, so heapbpf's share is also accounted
part by part: BPF statistics are on while heapbpf is attached, so its -v
prints each program's kernel-measured run count and run time; the uprobe
programs' run time plus one bare trap per run (bench/trapfloor, an empty
program on a uprobe, measured at the start) over the server's CPU time in
the run, plus heapbpf's own process CPU in the run (it runs on the load
generator's CPU), is heapbpf's share of it: an estimate (the programs are
attached a little longer than the load runs, which counts against heapbpf;
what its reads and records do to the server's caches afterwards is not
counted). The statistics stay on through the attached runs: the kernel's two
clock reads per program run are part of what those runs measure. Every
process started here is ended here; traffic goes to 127.0.0.1 only.

Called from bench/run.py (`bench_services`); bench/report.py makes the rows.
"""

import os
import re
import shutil
import signal
import socket
import subprocess
import time

import bpfstats
import hb
from hb import BenchError, spread

IDLE_CONF = "prof:true,prof_active:false"
ON_CONF = "prof:true,prof_active:true"
CONDITIONS = ["idle", "sampling", "attached", "sampling_same", "watched"]
FLAG = "je_prof_active_state"
# heapbpf's programs on uprobes in the target: they run in its threads (its fork and
# exec tracepoints run in whichever process forks or execs, anywhere)
UPROBE_PROGS = ("heapbpf_alloc", "heapbpf_free", "heapbpf_activity")
SETTLE_S = 0.5  # after heapbpf switched sampling on, before the load starts

FULL = dict(reps=7, redis_n=200000, h2load_n=200000, h2load_c=10, h2load_m=10, file_kib=4,
            trap_calls=500000, trap_reps=5)
SMOKE = dict(reps=1, redis_n=2000, h2load_n=2000, h2load_c=4, h2load_m=4, file_kib=4,
             trap_calls=10000, trap_reps=1)

H2LOAD_RE = re.compile(r"finished in ([0-9.]+)(m?s), ([0-9.]+) req/s")
H2LOAD_DONE_RE = re.compile(r"requests: (\d+) total, \d+ started, (\d+) done, (\d+) succeeded")


def loadavg():
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def dpkg_version(pkg):
    out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", pkg], capture_output=True,
                         text=True, timeout=30)
    return out.stdout.strip() or "?"


# ---- the services ---------------------------------------------------------------------------


class Redis:
    name = "redis"
    package = "redis-server"
    tools = ("redis-server", "redis-benchmark")

    def __init__(self, S, redis_load):
        self.S = S
        self.load_fn = redis_load

    def argv(self, port):
        return ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning"]

    def load(self, port, cpus, n=None):
        return self.load_fn(port, n or self.S["redis_n"], cpus)

    def describe(self):
        return ("`redis-benchmark -t set,get,lpush,lpop -n %d -r 100000 -d 256 -c 50 -P 16` "
                "(section 3's workload; the figure per run is the harmonic mean of the four "
                "tests' requests/s)" % self.S["redis_n"])


class Nghttpd:
    name = "nghttpd"
    package = "nghttp2-server"
    tools = ("nghttpd", "h2load")

    def __init__(self, S):
        self.S = S
        self.docroot = os.path.join(hb.tmp(), "htdocs")
        os.makedirs(self.docroot, exist_ok=True)
        with open(os.path.join(self.docroot, "f"), "wb") as f:
            f.write(os.urandom(S["file_kib"] * 1024))

    def argv(self, port):
        return ["nghttpd", "--no-tls", "-d", self.docroot, str(port)]

    def load(self, port, cpus, n=None):
        n = n or self.S["h2load_n"]
        argv = ["h2load", "-n", str(n), "-c", str(self.S["h2load_c"]), "-m",
                str(self.S["h2load_m"]), "-t", "1", "http://127.0.0.1:%d/f" % port]
        env = {k: v for k, v in os.environ.items() if k not in ("MALLOC_CONF", "LD_LIBRARY_PATH")}
        out = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env,
                             preexec_fn=hb.pin(cpus))
        m, d = H2LOAD_RE.search(out.stdout), H2LOAD_DONE_RE.search(out.stdout)
        if out.returncode or not m or not d or int(d.group(3)) != n:
            raise BenchError("h2load failed (exit %d): %s" % (
                out.returncode, (out.stdout + out.stderr)[-800:]))
        return float(m.group(3))

    def describe(self):
        return ("`h2load -n %d -c %d -m %d -t 1` of a %d KiB file over HTTP/2 without TLS "
                "(h2load's own requests/s)" % (self.S["h2load_n"], self.S["h2load_c"],
                                              self.S["h2load_m"], self.S["file_kib"]))


# ---- one server process ---------------------------------------------------------------------


def task_cpu_ns(pid):
    """CPU time of all of pid's threads so far (schedstat: nanoseconds)."""
    total = 0
    task = "/proc/%d/task" % pid
    for tid in os.listdir(task):
        try:
            with open("%s/%s/schedstat" % (task, tid)) as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass  # a thread that just ended
    return total


class Server:
    """A service process with our jemalloc and the given MALLOC_CONF, pinned to cpus."""

    def __init__(self, svc, conf, je, cpus):
        self.port = hb.free_port()
        env = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(os.path.abspath(je)),
                   MALLOC_CONF=conf)
        self.p = subprocess.Popen(svc.argv(self.port), env=env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                                  preexec_fn=hb.pin(cpus))
        self.pid = self.p.pid
        try:
            deadline = time.monotonic() + 20
            while True:
                try:
                    socket.create_connection(("127.0.0.1", self.port), 0.5).close()
                    break
                except OSError:
                    if time.monotonic() > deadline or self.p.poll() is not None:
                        raise BenchError("%s did not start" % svc.name)
                    time.sleep(0.05)
            with open("/proc/%d/maps" % self.pid) as f:
                if os.path.realpath(je) not in f.read():
                    raise BenchError("%s did not load %s" % (svc.name, je))
            self.flag = hb.sym_addr(self.pid, je, FLAG)
        except BaseException:
            self.close()
            raise

    def cpu_ns(self):
        return task_cpu_ns(self.pid)

    def run(self, svc, oc):
        """One load run: (requests/s, the server's CPU time in ns during it)."""
        c0 = self.cpu_ns()
        rps = svc.load(self.port, oc)
        return rps, self.cpu_ns() - c0

    def close(self):
        hb.kill_wait(self.p)


def bare_trap_ns(calls, reps):
    """One bare uprobe hit's CPU cost (bench/trapfloor: an empty program on a uprobe,
    the CPU time per call with it attached less without), the median of reps."""
    runs = sorted(r["trap_ns"] for r in hb.trapfloor(calls, reps, timeout=600))
    if len(runs) != reps:
        raise BenchError("trapfloor printed %d repetitions, not %d" % (len(runs), reps))
    return runs[len(runs) // 2]


def watch_argv(pid):
    """heapbpf watch as an operator runs it (its defaults: every trigger but the growth
    ones armed), with -v for its BPF programs' statistics."""
    out = os.path.join(hb.tmp(), "watch-%d" % pid)
    os.makedirs(out, mode=0o700, exist_ok=True)
    return [hb.heapbpf_bin(), "watch", "--pid", str(pid), "--output-dir", out, "-v"]


def attached_run(svc, srv, oc, samples, hb_cpu, progs, argv=None):
    """One load run with heapbpf attached to srv for all of it, started SETTLE_S after
    heapbpf switched sampling on; appends heapbpf's samples, its own CPU time during
    the run and its BPF programs' kernel-measured run counts and times (statistics on
    while heapbpf is attached: its -v prints them before it unloads the programs)."""
    errpath = os.path.join(hb.tmp(), "%s-heapbpf.err" % svc.name)
    with bpfstats.Stats():
        out = attached_load(svc, srv, oc, samples, hb_cpu, errpath, argv)
    got = {m.group(1): (int(m.group(2)), int(m.group(3)))
           for m in bpfstats.STATS_RE.finditer(open(errpath).read())}
    if not got.get("heapbpf_alloc", (0, 0))[0]:
        raise BenchError("heapbpf on %s printed no BPF run time" % svc.name)
    progs.append(got)
    return out


def attached_load(svc, srv, oc, samples, hb_cpu, errpath, argv=None):
    with open(errpath, "wb") as ef:
        hp = subprocess.Popen(argv or hb.heapbpf_argv(srv.pid, os.path.join(hb.tmp(),
                                                                            "svc.pb.gz")),
                              stdout=ef, stderr=ef, stdin=subprocess.DEVNULL,
                              preexec_fn=hb.pin(oc))
    try:
        deadline = time.monotonic() + 30
        while hb.peek(srv.pid, srv.flag) != 1:
            if time.monotonic() > deadline or hp.poll() is not None:
                raise BenchError("heapbpf did not attach to %s: %s" % (
                    svc.name, open(errpath).read()[-1000:]))
            time.sleep(0.005)
        time.sleep(SETTLE_S)
        h0 = task_cpu_ns(hp.pid)
        out = srv.run(svc, oc)
        hb_cpu.append(task_cpu_ns(hp.pid) - h0)
        hp.send_signal(signal.SIGINT)
        hp.wait(60)
    finally:
        hb.kill_wait(hp)
    if hp.returncode not in (0, 3, 4):
        raise BenchError("heapbpf on %s exited %d" % (svc.name, hp.returncode))
    if hb.peek(srv.pid, srv.flag) != 0:
        raise BenchError("heapbpf left prof_active on in %s" % svc.name)
    c = hb.parse_heapbpf_stderr(open(errpath).read())
    samples.append(c["alloc_hits"])
    return out


def measure_service(svc, S, je, tc, oc, log, trap_ns):
    a = Server(svc, IDLE_CONF, je, tc)
    try:
        b = Server(svc, ON_CONF, je, tc)
    except BaseException:
        a.close()
        raise
    rps = {c: [] for c in CONDITIONS}
    cpu = {c: [] for c in CONDITIONS}
    load = {c: [] for c in CONDITIONS}
    samples, hb_cpu, progs = [], [], []
    w_samples, w_hb_cpu, w_progs = [], [], []
    try:
        if hb.peek(a.pid, a.flag) != 0 or hb.peek(b.pid, b.flag) != 1:
            raise BenchError("%s: prof_active is not what MALLOC_CONF said" % svc.name)
        # warm-up: keys exist, buffers and caches grown, in both processes
        n = (S["redis_n"] if svc.name == "redis" else S["h2load_n"]) // 4 or 1
        svc.load(a.port, oc, n)
        svc.load(b.port, oc, n)
        for rep in range(S["reps"]):
            k = rep % len(CONDITIONS)
            for c in CONDITIONS[k:] + CONDITIONS[:k]:
                before = loadavg()[0]
                t = time.monotonic()
                if c == "idle":
                    r = a.run(svc, oc)
                elif c == "sampling":
                    r = b.run(svc, oc)
                elif c == "attached":
                    r = attached_run(svc, a, oc, samples, hb_cpu, progs)
                elif c == "watched":
                    r = attached_run(svc, a, oc, w_samples, w_hb_cpu, w_progs,
                                     watch_argv(a.pid))
                else:
                    hb.poke(a.pid, a.flag, 1)
                    try:
                        r = a.run(svc, oc)
                    finally:
                        hb.poke(a.pid, a.flag, 0)
                rps[c].append(r[0])
                cpu[c].append(r[1])
                load[c].append([before, loadavg()[0]])
                log("%s %d: %s %.0f requests/s, server CPU %.2f s (%.1f s, load %.2f)" % (
                    svc.name, rep, c, r[0], r[1] / 1e9, time.monotonic() - t, load[c][-1][1]))
    finally:
        a.close()
        b.close()

    def ratios(m, x, y):
        return [p / q for p, q in zip(m[x], m[y])]

    pairs = dict(attached_sampling=("attached", "sampling"), attached_idle=("attached", "idle"),
                 sampling_idle=("sampling", "idle"),
                 attached_sampling_same=("attached", "sampling_same"),
                 watched_sampling=("watched", "sampling"), watched_idle=("watched", "idle"),
                 sampling_same_idle=("sampling_same", "idle"))
    # heapbpf's share of the server's CPU by accounting, per attached run: the BPF
    # programs' own time as the kernel measured it, plus one bare uprobe trap per hit
    # (trapfloor's, measured at the start of this section), plus heapbpf's own process
    # CPU during the run (on the load generator's CPU, where it takes from the load),
    # over the server's CPU time during the run. An estimate: the programs ran a little
    # longer than the run (counted), cache effects after a program returns are not
    def shares(ps, cs, hs):
        out = []
        for p, c, h in zip(ps, cs, hs):
            up = [v for k, v in p.items() if k in UPROBE_PROGS]
            out.append((sum(t for _, t in up) + sum(n for n, _ in up) * trap_ns + h) / c)
        return out

    return dict(package=svc.package, version=dpkg_version(svc.package), load=svc.describe(),
                rps=rps, cpu_ns=cpu, loadavg=load, samples=samples, heapbpf_cpu_ns=hb_cpu,
                bpf_progs=progs, trap_ns=trap_ns,
                share=shares(progs, cpu["attached"], hb_cpu),
                # the same for heapbpf watch (section 11: a watcher's cost on real services)
                watch=dict(samples=w_samples, heapbpf_cpu_ns=w_hb_cpu, bpf_progs=w_progs,
                           share=shares(w_progs, cpu["watched"], w_hb_cpu)),
                ratios={k: ratios(rps, x, y) for k, (x, y) in pairs.items()},
                # the same ratios of CPU efficiency: server CPU time of y / of x for the
                # same requests (what other work on the machine distorts least)
                cpu_ratios={k: ratios(cpu, y, x) for k, (x, y) in pairs.items()})


def bench_services(smoke, res, redis_load, log):
    """Fills res["services"]; redis_load is bench/run.py's redis-benchmark runner."""
    S = SMOKE if smoke else FULL
    je = hb.path("jemalloc/libjemalloc.so.2")
    svcs = [Redis(S, redis_load), Nghttpd(S)]
    for svc in svcs:
        for tool in svc.tools:
            if not shutil.which(tool):
                raise BenchError("%s is missing: run make deps (scripts/install-deps.sh)" % tool)
    tc, oc = hb.cpus_split()
    trap_ns = bare_trap_ns(S["trap_calls"], S["trap_reps"])
    out = dict(settings=S, conf=dict(idle=IDLE_CONF, sampling=ON_CONF), services={},
               trap_ns=trap_ns, settle_s=SETTLE_S)
    for svc in svcs:
        r = measure_service(svc, S, je, tc, oc, log, trap_ns)
        out["services"][svc.name] = r
        log("%s: attached/sampling %s, attached/idle %s, sampling/idle %s" % (
            svc.name, spread(r["ratios"]["attached_sampling"], "{:.3f}"),
            spread(r["ratios"]["attached_idle"], "{:.3f}"),
            spread(r["ratios"]["sampling_idle"], "{:.3f}")))
        log("%s: heapbpf's share of the server's CPU by accounting %s" % (
            svc.name, spread([x * 100 for x in r["share"]], "{:.2f}%")))
    res["services"] = out
