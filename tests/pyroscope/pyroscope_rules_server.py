#!/usr/bin/env python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""A local stand-in for Grafana Pyroscope's /ingest endpoint, for heapbpf's tests.

This is NOT Pyroscope. It enforces the ingest rules heapbpf must follow, as
Pyroscope documents and implements them (see docs/pyroscope.md, and
Pyroscope's ingest handler, labelset parser and profile validation), and
records what it accepted so that a test can check it:

  - POST /ingest only; name= is required and parsed like Pyroscope's labelset
    parser: service name [A-Za-z0-9_./-]+, label names [A-Za-z0-9_.]+ and
    valid Prometheus names, no __name__/service_name duplicates;
  - from/until are integers (seconds), from <= until;
  - format=pprof: the whole body is the (gzip) pprof; no format: the body
    must be multipart/form-data with a "profile" part (a "prev_profile" part
    is refused, as Pyroscope does); any other format is refused here;
  - the pprof must decode; string_table[0] == ""; every string index is in
    range; sample type names must not contain '-'; location and function ids
    are not 0; samples point at existing locations, lines at existing
    functions; each sample has one value per sample type; the profile is not
    older than --reject-older-than seconds (Pyroscope's default: 1 h) nor more
    than 10 min in the future (time_nanos, or from when time_nanos is 0);
  - X-Scope-OrgID must equal $PYRO_EXPECT_TENANT when that is set;
  - Authorization must be Basic $PYRO_EXPECT_USER:$PYRO_EXPECT_PASSWORD or
    Bearer $PYRO_EXPECT_TOKEN when those are set.

Accepted profiles are appended as JSON lines to --log. --fail-first N answers
503 to the first N requests, --fail-all to every one (a server that is up but
unhealthy). --echo-auth PAD refuses every request (400) with PAD characters and
then the request's Authorization header in the answer, as a server that echoes
what it was sent; --echo-as ENCODING writes it (and, for basic auth, the
user:password it decodes to) URL-encoded (url, url-lower: upper- or lower-case
hex, form: '+' for a space) or JSON-escaped (json: a quote, a backslash and a
slash escaped, and what is beyond ASCII as a \\u escape; json-u: every
character a \\u escape). --tls-cert/--tls-key serve https. It listens on 127.0.0.1 only, writes its port to --port-file and
exits after --lifetime seconds whatever happens.
"""
import argparse
import base64
import email.parser
import email.policy
import gzip
import hashlib
import json
import os
import re
import ssl
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, HTTPServer

SERVICE_RE = re.compile(r"^[A-Za-z0-9_./-]+$")
LABEL_RUNES_RE = re.compile(r"^[A-Za-z0-9_.]+$")
PROM_LABEL_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class Reject(Exception):
    def __init__(self, status, msg):
        super().__init__(msg)
        self.status = status


# ---- protobuf, just enough for perftools.profiles.Profile ----

def varint(b, i):
    v = shift = 0
    while True:
        if i >= len(b):
            raise Reject(400, "truncated varint")
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        shift += 7
        if not c & 0x80:
            return v, i
        if shift > 63:
            raise Reject(400, "bad varint")


def fields(b):
    i = 0
    while i < len(b):
        key, i = varint(b, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(b, i)
        elif wt == 2:
            n, i = varint(b, i)
            if i + n > len(b):
                raise Reject(400, "truncated field")
            v, i = b[i:i + n], i + n
        elif wt == 1:
            v, i = b[i:i + 8], i + 8
        elif wt == 5:
            v, i = b[i:i + 4], i + 4
        else:
            raise Reject(400, "bad wire type %d" % wt)
        yield num, wt, v


def ints(wt, v):
    """A repeated integer field, packed or not."""
    if wt == 0:
        return [v]
    out, i = [], 0
    while i < len(v):
        x, i = varint(v, i)
        out.append(x)
    return out


def signed(x):
    return x - (1 << 64) if x >= 1 << 63 else x


def parse_profile(raw):
    p = {"sample_type": [], "sample": [], "location": {}, "function": {}, "mapping": set(),
         "string_table": [], "time_nanos": 0, "duration_nanos": 0, "period": 0}
    for num, wt, v in fields(raw):
        if num == 1:
            vt = dict((n, x) for n, _, x in fields(v))
            p["sample_type"].append((vt.get(1, 0), vt.get(2, 0)))
        elif num == 2:
            s = {"loc": [], "val": []}
            for n, w, x in fields(v):
                if n == 1:
                    s["loc"] += ints(w, x)
                elif n == 2:
                    s["val"] += [signed(y) for y in ints(w, x)]
            p["sample"].append(s)
        elif num == 3:
            p["mapping"].add(dict((n, x) for n, _, x in fields(v) if n == 1).get(1, 0))
        elif num == 4:
            loc = {"id": 0, "lines": []}
            for n, _, x in fields(v):
                if n == 1:
                    loc["id"] = x
                elif n == 4:
                    loc["lines"].append(dict((m, y) for m, _, y in fields(x)).get(1, 0))
            if loc["id"] in p["location"]:
                raise Reject(400, "duplicate location id")
            p["location"][loc["id"]] = loc
        elif num == 5:
            fn = dict((n, x) for n, _, x in fields(v))
            p["function"][fn.get(1, 0)] = fn
        elif num == 6:
            p["string_table"].append(v.decode("utf-8"))
        elif num == 9:
            p["time_nanos"] = signed(v)
        elif num == 10:
            p["duration_nanos"] = signed(v)
        elif num == 12:
            p["period"] = signed(v)
    return p


def validate_profile(p, qfrom, reject_older):
    st = p["string_table"]
    if not st or st[0] != "":
        raise Reject(400, "string_table[0] must be empty")

    def s(i):
        if not 0 <= i < len(st):
            raise Reject(400, "string index %d out of range" % i)
        return st[i]

    types = []
    for t, u in p["sample_type"]:
        name = s(t)
        if "-" in name:
            raise Reject(400, "sample type contains -")
        types.append((name, s(u)))
    if not types:
        raise Reject(400, "no sample types")
    for lid in p["location"]:
        if lid == 0:
            raise Reject(400, "location id is 0")
    for fid, fn in p["function"].items():
        if fid == 0:
            raise Reject(400, "function id is 0")
        for k in (2, 3, 4):
            s(fn.get(k, 0))
    for loc in p["location"].values():
        for fid in loc["lines"]:
            if fid not in p["function"]:
                raise Reject(400, "line refers to missing function %d" % fid)
    sums = [0] * len(types)
    for smp in p["sample"]:
        if len(smp["val"]) != len(types):
            raise Reject(400, "sample has %d values for %d types" % (len(smp["val"]), len(types)))
        for lid in smp["loc"]:
            if lid not in p["location"]:
                raise Reject(400, "sample refers to missing location %d" % lid)
        for k, v in enumerate(smp["val"]):
            sums[k] += v
    created = p["time_nanos"] / 1e9 if p["time_nanos"] else qfrom
    now = time.time()
    if reject_older and created < now - reject_older:
        raise Reject(400, "profile is too old (older than %d s)" % reject_older)
    if created > now + 600:
        raise Reject(400, "profile is too far in the future")
    funcs = sorted(set(s(fn.get(2, 0)) for fn in p["function"].values()))
    return types, sums, funcs


ECHO_ENCODINGS = ("raw", "url", "url-lower", "form", "json", "json-u")


def echo_encode(value, how):
    """value as a server that echoes it may write it (--echo-as)."""
    if how == "url":
        return urllib.parse.quote(value, safe="")
    if how == "url-lower":
        return re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(),
                      urllib.parse.quote(value, safe=""))
    if how == "form":
        return urllib.parse.quote_plus(value, safe="")
    if how == "json":
        return json.dumps(value)[1:-1].replace("/", "\\/")
    if how == "json-u":
        units = value.encode("utf-16-be")
        return "".join("\\u%04x" % int.from_bytes(units[i:i + 2], "big")
                       for i in range(0, len(units), 2))
    return value


def parse_name(name):
    """Pyroscope's labelset.Parse plus the label validation it applies later."""
    if "{" in name:
        service, rest = name.split("{", 1)
        if not rest.endswith("}"):
            raise Reject(400, "name: unterminated label set")
        rest = rest[:-1]
    else:
        service, rest = name, ""
    service = service.strip()
    if not service or not SERVICE_RE.match(service):
        raise Reject(400, "name: invalid service name %r" % service)
    labels = {}
    for pair in filter(None, rest.split(",")):
        if "=" not in pair:
            raise Reject(400, "name: label without value")
        k, v = (x.strip() for x in pair.split("=", 1))
        if not k or not LABEL_RUNES_RE.match(k) or k == "__name__":
            raise Reject(400, "name: invalid label name %r" % k)
        if not PROM_LABEL_RE.match(k) or k.startswith("__"):
            raise Reject(400, "invalid label name %r" % k)
        if k in labels or k == "service_name":
            raise Reject(400, "duplicate label name %r" % k)
        if not v:
            raise Reject(400, "empty label value for %r" % k)
        labels[k] = v
    return service, labels


class Handler(BaseHTTPRequestHandler):
    server_version = "pyroscope-rules-stand-in"

    def log_message(self, fmt, *args):
        pass

    def reply(self, status, msg):
        body = (msg + "\n").encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self.reply(404, "not found")

    def do_POST(self):
        srv = self.server
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        with srv.lock:
            srv.requests += 1
            n = srv.requests
        try:
            self.check_auth()
            if srv.fail_all or n <= srv.fail_first:
                raise Reject(503, "unavailable (test server told to fail)")
            url = urllib.parse.urlsplit(self.path)
            if url.path != "/ingest":
                raise Reject(404, "not found")
            rec = self.ingest(urllib.parse.parse_qs(url.query, keep_blank_values=True), body)
        except Reject as e:
            with srv.lock:
                with open(srv.rejects, "a") as f:
                    f.write(json.dumps({"status": e.status, "error": str(e), "path": self.path}) + "\n")
            self.reply(e.status, str(e))
            return
        with srv.lock:
            with open(srv.log, "a") as f:
                f.write(json.dumps(rec) + "\n")
        self.reply(200, "")

    def check_auth(self):
        pad = getattr(self.server, "echo_auth", None)
        if pad is not None:
            how = getattr(self.server, "echo_as", "raw")
            # the header's bytes (http.server reads them as latin-1), as UTF-8
            auth = (self.headers.get("Authorization") or "").encode("latin-1").decode(
                "utf-8", "replace")
            msg = "x" * pad + "Authorization: " + echo_encode(auth, how)
            if how != "raw" and auth.startswith("Basic "):
                pair = base64.b64decode(auth[6:]).decode("utf-8", "replace")
                msg += " credentials: " + echo_encode(pair, how)
            e = Reject(400, msg)
            # already JSON-escaped: push's Connect body takes it as it is
            e.json_escaped = how.startswith("json")
            raise e
        tenant = os.environ.get("PYRO_EXPECT_TENANT")
        if tenant and self.headers.get("X-Scope-OrgID") != tenant:
            raise Reject(401, "no org id" if not self.headers.get("X-Scope-OrgID") else "unknown org id")
        auth = self.headers.get("Authorization") or ""
        user, password = os.environ.get("PYRO_EXPECT_USER"), os.environ.get("PYRO_EXPECT_PASSWORD")
        token = os.environ.get("PYRO_EXPECT_TOKEN")
        if user is not None:
            want = "Basic " + base64.b64encode(("%s:%s" % (user, password)).encode()).decode()
            if auth != want:
                raise Reject(401, "unauthorized")
        if token is not None and auth != "Bearer " + token:
            raise Reject(401, "unauthorized")

    def ingest(self, q, body):
        for k, v in q.items():
            if len(v) != 1:
                raise Reject(400, "parameter %s given %d times" % (k, len(v)))
        q = {k: v[0] for k, v in q.items()}
        if "name" not in q:
            raise Reject(400, "name: service name is required")
        service, labels = parse_name(q["name"])
        try:
            qfrom, quntil = int(q.get("from", "")), int(q.get("until", ""))
        except ValueError:
            raise Reject(400, "from and until must be integer seconds")
        if qfrom > quntil:
            raise Reject(400, "from is after until")
        fmt = q.get("format")
        ctype = self.headers.get("Content-Type") or ""
        if fmt == "pprof":
            if "multipart/form-data" in ctype:
                raise Reject(400, "format=pprof reads the whole body as pprof: no multipart")
            raw = body
        elif fmt is None:
            if "multipart/form-data" not in ctype:
                raise Reject(400, "without format the body must be multipart/form-data")
            msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
                b"Content-Type: " + ctype.encode() + b"\r\n\r\n" + body)
            parts = {}
            for part in msg.iter_parts():
                parts[part.get_param("name", header="content-disposition")] = part.get_payload(decode=True)
            if "prev_profile" in parts:
                raise Reject(400, "unsupported client version (prev_profile)")
            if "profile" not in parts:
                raise Reject(400, "multipart form has no profile part")
            raw = parts["profile"]
        else:
            raise Reject(400, "this stand-in accepts pprof only, not format=%s" % fmt)
        if raw[:2] == b"\x1f\x8b":
            try:
                raw = gzip.decompress(raw)
            except Exception as e:
                raise Reject(400, "bad gzip: %s" % e)
        try:
            p = parse_profile(raw)
        except UnicodeDecodeError:
            raise Reject(400, "string table is not UTF-8")
        types, sums, funcs = validate_profile(p, qfrom, self.server.reject_older)
        return {
            "service_name": service,
            "labels": labels,
            "from": qfrom,
            "until": quntil,
            "format": fmt or "multipart",
            "tenant": self.headers.get("X-Scope-OrgID"),
            "spy": q.get("spyName"),
            "sample_types": ["%s/%s" % t for t in types],
            "sums": dict(("%s" % t[0], v) for t, v in zip(types, sums)),
            "time_nanos": p["time_nanos"],
            "duration_nanos": p["duration_nanos"],
            "period": p["period"],
            "functions": funcs,
            "sha256": hashlib.sha256(raw).hexdigest(),
        }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--fail-first", type=int, default=0)
    ap.add_argument("--fail-all", action="store_true")
    ap.add_argument("--reject-older-than", type=int, default=3600)
    ap.add_argument("--echo-auth", type=int, metavar="PAD")
    ap.add_argument("--echo-as", choices=ECHO_ENCODINGS, default="raw")
    ap.add_argument("--lifetime", type=float, default=120)
    ap.add_argument("--tls-cert", help="serve https with this certificate (PEM)")
    ap.add_argument("--tls-key")
    a = ap.parse_args()

    srv = HTTPServer(("127.0.0.1", a.port), Handler)
    srv.echo_auth, srv.echo_as = a.echo_auth, a.echo_as
    srv.lock = threading.Lock()
    srv.requests = 0
    srv.fail_first, srv.fail_all = a.fail_first, a.fail_all
    srv.reject_older = a.reject_older_than
    srv.log, srv.rejects = a.log, a.log + ".rejects"
    if a.tls_cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(a.tls_cert, a.tls_key)
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    # bounded in time, whatever the test does
    threading.Timer(a.lifetime, lambda: os._exit(0)).start()
    tmp = a.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % srv.server_address[1])
    os.rename(tmp, a.port_file)
    srv.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
