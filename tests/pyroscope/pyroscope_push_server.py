#!/usr/bin/env python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""A local stand-in for Grafana Pyroscope's push API, for heapbpf's tests.

This is NOT Pyroscope. It serves /push.v1.PusherService/Push as a Connect
unary procedure and enforces the rules heapbpf must follow there (see
docs/pyroscope.md), and it serves /ingest exactly as pyroscope_rules_server.py
does (the same code), as Pyroscope serves both:

  Connect (connectrpc.com/docs/protocol, unary):
  - POST only (405 otherwise); Content-Type application/proto or
    application/json (with an optional charset), anything else 415 with
    Accept-Post; Connect-Protocol-Version, when sent, is 1;
    Content-Encoding identity or gzip (others: unimplemented);
  - the body decodes as push.v1.PushRequest with heapbpf's own
    proto/push/v1/push.proto (protoc's descriptors, read by python3-protobuf);
  - errors are JSON {"code", "message"} with the HTTP status of the code
    (invalid_argument 400, unauthenticated 401, resource_exhausted 429,
    unavailable 503, ...); success is 200 with an empty PushResponse in the
    request's content type.
  Pyroscope (its distributor's label and profile validation):
  - every series has labels: __name__ a valid metric name, service_name not
    empty, label names [A-Za-z_][A-Za-z0-9_]* (Prometheus' legacy charset), at
    most 30 names, names up to 1024 and values up to 2048 bytes, no name
    twice (checked after sorting, as Pyroscope sorts them);
  - stricter than Pyroscope, which would accept it silently and difference the
    allocations again: a profile with __name__=memory must carry
    __delta__=false;
  - every sample's raw_profile is a pprof (gzip-compressed or not) that passes
    the same checks as /ingest's (pyroscope_rules_server.validate_profile).

Accepted profiles go to --log as JSON lines ("api": "push" or "ingest"),
refusals to --log.rejects. --fail-first N / --fail-all answer the Connect
error --fail-code (default unavailable) to push, with Retry-After
--retry-after when given (and 503 to /ingest, as the ingest stand-in does).
--echo-auth PAD answers every request with PAD characters and its Authorization
header (unauthenticated to push, 400 to /ingest), as a server that echoes what
it was sent, in the encoding --echo-as names (pyroscope_rules_server.py); a
JSON-escaped echo goes into the Connect body's message as it is.
It listens on 127.0.0.1 only, writes its port to --port-file and exits after
--lifetime seconds whatever happens.
"""
import argparse
import gzip
import hashlib
import json
import os
import re
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from http.server import HTTPServer

from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory
from google.protobuf.message import DecodeError

from pyroscope_rules_server import (ECHO_ENCODINGS, Handler, Reject, parse_profile,
                                    validate_profile)

PUSH_PATH = "/push.v1.PusherService/Push"
PROTO_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "proto")
# Connect's error codes and their HTTP statuses
HTTP_OF = {
    "canceled": 499, "unknown": 500, "invalid_argument": 400, "deadline_exceeded": 504,
    "not_found": 404, "already_exists": 409, "permission_denied": 403,
    "resource_exhausted": 429, "failed_precondition": 400, "aborted": 409,
    "out_of_range": 400, "unimplemented": 501, "internal": 500, "unavailable": 503,
    "data_loss": 500, "unauthenticated": 401,
}
METRIC_RE = re.compile(r"^[A-Za-z_:][A-Za-z0-9_:]*$")
PROM_LABEL_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MAX_LABEL_NAMES, MAX_NAME_LEN, MAX_VALUE_LEN = 30, 1024, 2048


class ConnectError(Exception):
    def __init__(self, code, msg, raw=None):
        super().__init__(msg)
        self.code = code
        self.raw = raw  # msg already JSON-escaped, or None


def push_request_class():
    """push.v1.PushRequest from proto/push/v1/push.proto, compiled by protoc here and now."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "push.desc")
        subprocess.run(["protoc", "--proto_path=" + PROTO_DIR, "--include_imports",
                        "--descriptor_set_out=" + out, "push/v1/push.proto"], check=True)
        with open(out, "rb") as f:
            fds = descriptor_pb2.FileDescriptorSet.FromString(f.read())
    pool = descriptor_pool.DescriptorPool()
    for fd in fds.file:
        pool.Add(fd)
    return message_factory.MessageFactory(pool).GetPrototype(
        pool.FindMessageTypeByName("push.v1.PushRequest"))


def check_labels(pairs):
    """Pyroscope's label validation of one series; the labels as a dict."""
    if not pairs:
        raise ConnectError("invalid_argument", "at least one label pair is required per profile")
    pairs = sorted(pairs)
    if len(pairs) > MAX_LABEL_NAMES:
        raise ConnectError("invalid_argument", "profile series has %d label names; limit %d"
                           % (len(pairs), MAX_LABEL_NAMES))
    labels = dict(pairs)
    if not METRIC_RE.match(labels.get("__name__", "")):
        raise ConnectError("invalid_argument", "invalid labels: invalid metric name")
    if not labels.get("service_name"):
        raise ConnectError("invalid_argument", "invalid labels: service name is not provided")
    last = None
    for name, value in pairs:
        if len(name) > MAX_NAME_LEN or len(value) > MAX_VALUE_LEN:
            raise ConnectError("invalid_argument", "label name or value too long: %r" % name)
        if not PROM_LABEL_RE.match(name):
            raise ConnectError("invalid_argument", "invalid label name '%s'" % name)
        if name == last:
            raise ConnectError("invalid_argument", "duplicate label name: '%s'" % name)
        last = name
    if labels["__name__"] == "memory" and labels.get("__delta__") != "false":
        raise ConnectError("invalid_argument",
                           "stand-in rule: a memory profile without __delta__=false would have "
                           "its allocations differenced again")
    return labels


class PushHandler(Handler):
    server_version = "pyroscope-push-stand-in"

    def do_GET(self):
        if urllib.parse.urlsplit(self.path).path == PUSH_PATH:
            self.send_response(405)
            self.send_header("Allow", "POST")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        super().do_GET()

    def do_POST(self):
        if urllib.parse.urlsplit(self.path).path != PUSH_PATH:
            super().do_POST()
            return
        srv = self.server
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        with srv.lock:
            srv.requests += 1
            n = srv.requests
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if ctype not in ("application/proto", "application/json"):
            self.log_reject(415, "unsupported content type %r" % ctype)
            self.send_response(415)
            self.send_header("Accept-Post", "application/json, application/proto")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        try:
            try:
                self.check_auth()
            except Reject as e:
                raise ConnectError("unauthenticated", str(e),
                                   str(e) if getattr(e, "json_escaped", False) else None)
            if srv.fail_all or n <= srv.fail_first:
                raise ConnectError(srv.fail_code, "test server told to fail")
            recs = self.push(ctype, body)
        except ConnectError as e:
            self.log_reject(HTTP_OF[e.code], str(e), e.code)
            self.connect_error(e)
            return
        with srv.lock:
            with open(srv.log, "a") as f:
                for rec in recs:
                    f.write(json.dumps(rec) + "\n")
        out = b"{}" if ctype == "application/json" else b""
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_reject(self, status, msg, code=None):
        srv = self.server
        with srv.lock:
            with open(srv.rejects, "a") as f:
                f.write(json.dumps({"status": status, "code": code, "error": msg,
                                    "path": self.path}) + "\n")

    def connect_error(self, e):
        if e.raw is not None:
            out = ('{"code": "%s", "message": "%s"}' % (e.code, e.raw)).encode()
        else:
            out = json.dumps({"code": e.code, "message": str(e)}).encode()
        self.send_response(HTTP_OF[e.code])
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        if self.server.retry_after and e.code in ("unavailable", "resource_exhausted"):
            self.send_header("Retry-After", str(self.server.retry_after))
        self.end_headers()
        self.wfile.write(out)

    def decode(self, ctype, body):
        version = self.headers.get("Connect-Protocol-Version")
        if version is not None and version != "1":
            raise ConnectError("invalid_argument", "connect-protocol-version must be 1")
        enc = (self.headers.get("Content-Encoding") or "identity").lower()
        if enc == "gzip":
            try:
                body = gzip.decompress(body)
            except Exception as e:
                raise ConnectError("invalid_argument", "bad gzip body: %s" % e)
        elif enc != "identity":
            raise ConnectError("unimplemented", "unsupported content-encoding %s" % enc)
        req = self.server.push_request()
        try:
            if ctype == "application/json":
                json_format.Parse(body.decode("utf-8"), req)
            else:
                req.ParseFromString(body)
        except (DecodeError, json_format.ParseError, UnicodeDecodeError) as e:
            raise ConnectError("invalid_argument", "cannot decode PushRequest: %s" % e)
        return req

    def push(self, ctype, body):
        req = self.decode(ctype, body)
        recs = []
        for series in req.series:
            pairs = [(l.name, l.value) for l in series.labels]
            names = [p[0] for p in pairs]
            labels = check_labels(pairs)
            for sample in series.samples:
                recs.append(self.sample(ctype, labels, names, sample))
        if not recs:
            raise ConnectError("invalid_argument", "no profile in the request")
        return recs

    def sample(self, ctype, labels, names, sample):
        raw = sample.raw_profile
        gz = raw[:2] == b"\x1f\x8b"
        try:
            raw = gzip.decompress(raw) if gz else raw
            p = parse_profile(raw)
            types, sums, funcs = validate_profile(p, time.time(), self.server.reject_older)
        except Reject as e:
            raise ConnectError("invalid_argument", str(e))
        except (UnicodeDecodeError, OSError, EOFError) as e:
            raise ConnectError("invalid_argument", "bad profile: %s" % e)
        return {
            "api": "push",
            "content_type": ctype,
            "connect_protocol_version": self.headers.get("Connect-Protocol-Version"),
            "connect_timeout_ms": self.headers.get("Connect-Timeout-Ms"),
            "tenant": self.headers.get("X-Scope-OrgID"),
            "service_name": labels["service_name"],
            "labels": labels,
            "label_order": names,
            "sorted": names == sorted(names),
            "id": sample.ID,
            "gzip": gz,
            "sample_types": ["%s/%s" % t for t in types],
            "sums": dict(("%s" % t[0], v) for t, v in zip(types, sums)),
            "time_nanos": p["time_nanos"],
            "duration_nanos": p["duration_nanos"],
            "period": p["period"],
            "functions": funcs,
            "sha256": hashlib.sha256(raw).hexdigest(),
        }

    def ingest(self, q, body):
        rec = super().ingest(q, body)
        rec["api"] = "ingest"
        return rec


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--fail-first", type=int, default=0)
    ap.add_argument("--fail-all", action="store_true")
    ap.add_argument("--fail-code", default="unavailable", choices=sorted(HTTP_OF))
    ap.add_argument("--retry-after", type=int, default=0)
    ap.add_argument("--reject-older-than", type=int, default=3600)
    ap.add_argument("--echo-auth", type=int, metavar="PAD")
    ap.add_argument("--echo-as", choices=ECHO_ENCODINGS, default="raw")
    ap.add_argument("--lifetime", type=float, default=120)
    ap.add_argument("--tls-cert", help="serve https with this certificate (PEM)")
    ap.add_argument("--tls-key")
    a = ap.parse_args()

    srv = HTTPServer(("127.0.0.1", a.port), PushHandler)
    srv.push_request = push_request_class()
    srv.echo_auth, srv.echo_as = a.echo_auth, a.echo_as
    srv.lock = threading.Lock()
    srv.requests = 0
    srv.fail_first, srv.fail_all, srv.fail_code = a.fail_first, a.fail_all, a.fail_code
    srv.retry_after = a.retry_after
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
