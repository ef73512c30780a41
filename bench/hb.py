"""Process helpers for heapbpf's benchmarks: run the microbenchmark with and
without heapbpf, read heapbpf's counters, time things. Every wait is bounded;
every process started here is ended here."""

import json
import os
import re
import signal
import subprocess
import tempfile
import time

BUILD = "build"
TMP = tempfile.mkdtemp(prefix="heapbpf-bench.")
RINGBUF_MIB = "64"
HEAPBPF = None  # another heapbpf binary to measure (default: the build's)


def path(rel):
    return os.path.join(BUILD, rel)


class BenchError(Exception):
    pass


def kill_wait(p, timeout=10):
    """Ends a process started here (it may have ended already)."""
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def read_json_line(p, timeout):
    """The next JSON line on p's stdout within timeout seconds."""
    deadline = time.monotonic() + timeout
    buf = b""
    fd = p.stdout.fileno()
    os.set_blocking(fd, False)
    while time.monotonic() < deadline:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            chunk = None
        if chunk == b"":
            raise BenchError("process exited before printing a result")
        if chunk:
            buf += chunk
            if b"\n" in buf:
                line, rest = buf.split(b"\n", 1)
                p._hb_rest = rest  # noqa: keep the rest for the next call
                return json.loads(line)
        else:
            time.sleep(0.002)
    raise BenchError("no result within %.0f s" % timeout)


def read_json_next(p, timeout):
    rest = getattr(p, "_hb_rest", b"")
    if b"\n" in rest:
        line, p._hb_rest = rest.split(b"\n", 1)
        return json.loads(line)
    deadline = time.monotonic() + timeout
    fd = p.stdout.fileno()
    while time.monotonic() < deadline:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            chunk = None
        if chunk == b"":
            raise BenchError("process exited before printing a result")
        if chunk:
            rest += chunk
            if b"\n" in rest:
                line, p._hb_rest = rest.split(b"\n", 1)
                return json.loads(line)
        else:
            time.sleep(0.002)
    raise BenchError("no result within %.0f s" % timeout)


COUNTERS_RE = re.compile(
    r"uprobe hits: (\d+) on the allocation path, (\d+) on the free path; "
    r"(\d+) samples and (\d+) frees dropped; (\d+) read faults")
SAMPLES_RE = re.compile(r"heapbpf: (\d+) samples \(")


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


def heapbpf_argv(pid, outfile, extra=()):
    return [HEAPBPF or path("heapbpf"), "--pid", str(pid), "--duration", "0", "-v",
            "--ringbuf-size", RINGBUF_MIB, "-o", outfile] + list(extra)


def heapbpf_cycle(pid, seconds, extra=(), cpus=None):
    """heapbpf attached to pid for seconds; returns (counters, exit code)."""
    errpath = os.path.join(TMP, "cycle.err")
    argv = [HEAPBPF or path("heapbpf"), "--pid", str(pid), "--duration", str(seconds), "-v",
            "--ringbuf-size", RINGBUF_MIB, "-o", os.path.join(TMP, "cycle.pb.gz")] + list(extra)
    with open(errpath, "wb") as ef:
        rc = subprocess.run(argv, stdout=ef, stderr=ef, stdin=subprocess.DEVNULL,
                            timeout=seconds + 60, preexec_fn=pin(cpus)).returncode
    with open(errpath, errors="replace") as f:
        text = f.read()
    if rc not in (0, 3, 4):
        raise BenchError("heapbpf exited with %d:\n%s" % (rc, text[-2000:]))
    return parse_heapbpf_stderr(text), rc


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


class Micro:
    """One microbenchmark process driven window by window (--control), so that
    the conditions compared run in the same process, one after the other."""

    def __init__(self, conf, args=(), cpus=None, timeout=120):
        self.timeout = timeout
        env = dict(os.environ, MALLOC_CONF=conf)
        self.p = subprocess.Popen([path("bench/microbench"), "--control"] + list(args),
                                  env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  preexec_fn=pin(cpus))
        first = read_json_line(self.p, timeout)
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
        return read_json_next(self.p, self.timeout)

    def attached(self, extra=(), cpus=None):
        """A window while heapbpf profiles: heapbpf switches sampling on, the
        window runs, heapbpf is stopped with SIGINT and writes its profile."""
        self.send("wait")
        first = read_json_next(self.p, self.timeout)
        if "waiting" not in first:
            raise BenchError("microbench did not wait: %r" % first)
        errpath = os.path.join(TMP, "heapbpf.err")
        with open(errpath, "wb") as ef:
            t_spawn = time.monotonic_ns()
            hp = subprocess.Popen(heapbpf_argv(self.pid, os.path.join(TMP, "micro.pb.gz"),
                                               extra),
                                  stdout=ef, stderr=ef, stdin=subprocess.DEVNULL,
                                  preexec_fn=pin(cpus))
        try:
            res = read_json_next(self.p, self.timeout)
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
