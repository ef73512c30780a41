"""What heapbpf's benchmark scripts share.

The measuring part (bench/run.py) takes its target-process helpers from here
and only from here: start the example service and the microbenchmark under
control, run heapbpf against them and read its counters, find a symbol in a
running process and read or write its memory, pick a free port, pin
processes to CPUs. The reporting part (bench/report.py) takes the figures'
statistics (median, spread) from here, so that the log of a run and its
report print the same numbers. Importing this module starts nothing and
creates nothing; every wait here is bounded, every process started here is
ended here.
"""

import json
import os
import re
import signal
import socket
import statistics
import subprocess
import tempfile
import time

BUILD = "build"
RINGBUF_MIB = "64"
HEAPBPF = None  # another heapbpf binary to measure (default: the build's)
_tmp = None


def path(rel):
    return os.path.join(BUILD, rel)


def heapbpf_bin():
    return HEAPBPF or path("heapbpf")


def bench_heapbpf_bin():
    """The benchmarks' build of heapbpf, whose BPF object takes HEAPBPF_BENCH_PARTS."""
    return path("bench/heapbpf")


def tmp():
    """The run's scratch directory, created on first use; remove_tmp() removes it."""
    global _tmp
    if _tmp is None:
        _tmp = tempfile.mkdtemp(prefix="heapbpf-bench.")
    return _tmp


def remove_tmp():
    global _tmp
    if _tmp is not None:
        subprocess.run(["rm", "-rf", _tmp])
        _tmp = None


class BenchError(Exception):
    pass


# ---- figures --------------------------------------------------------------------------------


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


# ---- processes ------------------------------------------------------------------------------


def kill_wait(p, timeout=10):
    """Ends a process started here (it may have ended already)."""
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def read_json(p, timeout):
    """The next JSON line on p's stdout within timeout seconds. What follows
    that line in the same read is kept for the next call."""
    rest = getattr(p, "_hb_rest", b"")
    deadline = time.monotonic() + timeout
    fd = p.stdout.fileno()
    if os.get_blocking(fd):
        os.set_blocking(fd, False)
    while b"\n" not in rest:
        if time.monotonic() >= deadline:
            raise BenchError("no result within %.0f s" % timeout)
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            chunk = None
        if chunk == b"":
            raise BenchError("process exited before printing a result")
        if chunk:
            rest += chunk
        else:
            time.sleep(0.002)
    line, p._hb_rest = rest.split(b"\n", 1)
    return json.loads(line)


def pin(cpus):
    """A preexec_fn that pins the child to cpus (None: no pinning) and gives it
    the default SIGINT and SIGTERM (a shell starts background jobs with SIGINT
    ignored, and an ignored signal stays ignored across exec)."""
    def setup():
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if cpus:
            os.sched_setaffinity(0, cpus)
    return setup


def trapfloor(calls, reps, frames=None, cpus=None, timeout=300):
    """bench/trapfloor CALLS REPS [FRAMES] (pinned to cpus when given): one record per
    repetition, the bare uprobe hit and heapbpf's programs on their stand-ins."""
    argv = [path("bench/trapfloor"), str(calls), str(reps)] + ([str(frames)] if frames else [])
    out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                         preexec_fn=pin(cpus))
    if out.returncode:
        raise BenchError("trapfloor failed: " + out.stderr)
    return [json.loads(line) for line in out.stdout.splitlines() if line]


def cpus_split():
    """The target on the last CPU, heapbpf on the others, when there are two or more."""
    n = os.cpu_count() or 1
    if n < 2:
        return None, None
    return {n - 1}, set(range(n - 1))


def free_port():
    """A TCP port on 127.0.0.1 that nobody listens on now."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


# ---- a target's memory ----------------------------------------------------------------------


def sym_addr(pid, obj, sym):
    """Runtime address of sym in obj as mapped in pid: nm for the symbol, the
    object's offset-0 mapping in /proc/PID/maps for the base (what
    tests/lib/harness.c's hb_sym_addr does for the C tests)."""
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
    """Writes one byte of pid's memory; returns the old one."""
    with open("/proc/%d/mem" % pid, "r+b", buffering=0) as f:
        f.seek(addr)
        old = f.read(1)
        f.seek(addr)
        f.write(bytes([value]))
    return old[0]


def peek(pid, addr):
    """Reads one byte of pid's memory."""
    with open("/proc/%d/mem" % pid, "rb", buffering=0) as f:
        f.seek(addr)
        return f.read(1)[0]


def proc_mem(pid):
    """VmRSS, RssAnon and RssFile of pid in KiB (what it holds before it stops)."""
    out = {}
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                k = line.split(":")[0]
                if k in ("VmRSS", "RssAnon", "RssFile"):
                    out[k] = int(line.split()[1])
    except OSError:
        pass
    return out


# ---- heapbpf --------------------------------------------------------------------------------


COUNTERS_RE = re.compile(
    r"uprobe hits: (\d+) on the allocation path, (\d+) on the free path; "
    r"(\d+) samples and (\d+) frees dropped; (\d+) read faults")
SAMPLES_RE = re.compile(r"^heapbpf: (\d+) samples, ", re.M)


def parse_heapbpf_stderr(text):
    """heapbpf -v's closing lines: samples and the BPF counters."""
    m = COUNTERS_RE.search(text)
    if not m:
        raise BenchError("heapbpf printed no counters (-v):\n" + text[-2000:])
    out = dict(zip(("alloc_hits", "free_hits", "alloc_drops", "free_drops", "read_faults"),
                   map(int, m.groups())))
    s = SAMPLES_RE.search(text)
    out["samples"] = int(s.group(1)) if s else 0
    return out


def named_for(outfile, extra):
    """outfile with the suffix of the format extra's -f gives (heapbpf refuses a -f that
    disagrees with -o's name)."""
    extra = list(extra)
    if "-f" in extra and extra.index("-f") + 1 < len(extra):
        suffix = {"pprof": ".pb.gz", "folded": ".folded", "html": ".html"}[
            extra[extra.index("-f") + 1]]
        for old in (".pb.gz", ".folded", ".html"):
            if outfile.endswith(old):
                return outfile[:-len(old)] + suffix
    return outfile


def heapbpf_argv(pid, outfile, extra=()):
    return [heapbpf_bin(), "--pid", str(pid), "--duration", "0", "-v",
            "--ringbuf-size", RINGBUF_MIB, "-o", named_for(outfile, extra)] + list(extra)


def heapbpf_cycle(pid, seconds, extra=(), cpus=None):
    """heapbpf attached to pid for seconds; returns (counters, exit code)."""
    errpath = os.path.join(tmp(), "cycle.err")
    argv = [heapbpf_bin(), "--pid", str(pid), "--duration", str(seconds), "-v",
            "--ringbuf-size", RINGBUF_MIB, "-o", named_for(os.path.join(tmp(), "cycle.pb.gz"),
                                                           extra)] + list(extra)
    with open(errpath, "wb") as ef:
        rc = subprocess.run(argv, stdout=ef, stderr=ef, stdin=subprocess.DEVNULL,
                            timeout=seconds + 60, preexec_fn=pin(cpus)).returncode
    with open(errpath, errors="replace") as f:
        text = f.read()
    if rc not in (0, 3, 4):
        raise BenchError("heapbpf exited with %d:\n%s" % (rc, text[-2000:]))
    return parse_heapbpf_stderr(text), rc


# ---- the targets ----------------------------------------------------------------------------


class Service:
    """The example service in control mode, for throughput windows."""

    def __init__(self, conf, threads=1, cpus=None):
        env = dict(os.environ)
        if conf is None:
            env.pop("MALLOC_CONF", None)
        else:
            env["MALLOC_CONF"] = conf
        self.p = subprocess.Popen(
            [path("examples/alloc-service-static"), "--control", "--rate", "0",
             "--threads", str(threads)],
            env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, preexec_fn=pin(cpus))
        line = self.p.stdout.readline().decode()
        if not line.startswith("ready"):
            kill_wait(self.p)
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
        kill_wait(self.p)


class Micro:
    """One microbenchmark process driven window by window (--control), so that
    the conditions compared run in the same process, one after the other."""

    def __init__(self, conf, args=(), cpus=None, timeout=120):
        self.timeout = timeout
        env = dict(os.environ, MALLOC_CONF=conf)
        self.p = subprocess.Popen([path("bench/microbench"), "--control"] + list(args),
                                  env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  preexec_fn=pin(cpus))
        first = read_json(self.p, timeout)
        if "ready" not in first:
            raise BenchError("microbench did not start: %r" % first)
        self.pid = self.p.pid

    def send(self, cmd):
        self.p.stdin.write((cmd + "\n").encode())
        self.p.stdin.flush()

    def window(self, mode):
        """A window with jemalloc's sampling as configured ("none") or switched on
        by the program itself ("je")."""
        self.send(mode)
        return read_json(self.p, self.timeout)

    def attached(self, extra=(), cpus=None):
        """A window while heapbpf profiles: heapbpf switches sampling on, the
        window runs, heapbpf is stopped with SIGINT and writes its profile."""
        self.send("wait")
        first = read_json(self.p, self.timeout)
        if "waiting" not in first:
            raise BenchError("microbench did not wait: %r" % first)
        errpath = os.path.join(tmp(), "heapbpf.err")
        with open(errpath, "wb") as ef:
            t_spawn = time.monotonic_ns()
            hp = subprocess.Popen(heapbpf_argv(self.pid, os.path.join(tmp(), "micro.pb.gz"),
                                               extra),
                                  stdout=ef, stderr=ef, stdin=subprocess.DEVNULL,
                                  preexec_fn=pin(cpus))
        try:
            res = read_json(self.p, self.timeout)
            mem = proc_mem(hp.pid)
            t_stop = time.monotonic_ns()
            hp.send_signal(signal.SIGINT)
            deadline = time.monotonic() + self.timeout
            while True:
                pid, status, ru = os.wait4(hp.pid, os.WNOHANG)
                if pid:
                    break
                if time.monotonic() > deadline:
                    raise BenchError("heapbpf did not stop within %d s" % self.timeout)
                time.sleep(0.001)
            t_done = time.monotonic_ns()
            hp.returncode = os.waitstatus_to_exitcode(status)
        finally:
            kill_wait(hp)
        with open(errpath, errors="replace") as f:
            text = f.read()
        if hp.returncode not in (0, 4):
            raise BenchError("heapbpf exited with %d:\n%s" % (hp.returncode, text[-2000:]))
        hb = parse_heapbpf_stderr(text)
        hb["exit"] = hp.returncode
        hb["peak_rss_kib"] = ru.ru_maxrss
        hb["attach_ns"] = res["active_seen_ns"] - t_spawn
        hb["stop_ns"] = t_done - t_stop
        hb["mem_before_stop"] = mem
        res["hb"] = hb
        return res

    def close(self):
        if self.p.poll() is None:
            try:
                self.send("quit")
                self.p.wait(10)
            except (BrokenPipeError, subprocess.TimeoutExpired):
                pass
        kill_wait(self.p)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
