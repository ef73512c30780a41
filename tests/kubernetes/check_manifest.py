#!/usr/bin/env python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Checks examples/kubernetes/heapbpf-agent.yaml (or the file given).

1. It parses as YAML (python3-yaml) into the objects heapbpf's agent needs.
2. The DaemonSet keeps to least privilege as docs/fleet.md states it: hostPID,
   not privileged, root with a read-only root file system, exactly the
   capabilities heapbpf uses, exactly the host paths it reads (read-only) and
   its own state directories, no API token.
3. Every object is valid for the Kubernetes API's schema (validate.mjs, with
   the npm packages scripts/install-deps.sh installs), unless --no-schema.

Prints each problem on a line and exits 1, or one line and exits 0.
"""
import json
import os
import subprocess
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
CAPS = {"BPF", "PERFMON", "SYS_ADMIN", "SYS_PTRACE", "DAC_READ_SEARCH"}
# host path -> read-only in the container
HOST_PATHS = {
    "/sys/kernel/tracing": True,
    "/sys/fs/cgroup": True,
    "/var/log/pods": True,
    "/var/log/containers": True,
    "/run/heapbpf": False,
    "/var/lib/heapbpf/agent": False,
}

problems = []


def need(cond, msg):
    if not cond:
        problems.append(msg)
    return cond


def by_kind(objs, kind):
    found = [o for o in objs if isinstance(o, dict) and o.get("kind") == kind]
    need(len(found) == 1, f"expected one {kind}, found {len(found)}")
    return found[0] if len(found) == 1 else {}


def check_security(c):
    sc = c.get("securityContext") or {}
    need(sc.get("privileged") in (None, False), "the container must not be privileged")
    need(sc.get("runAsUser") == 0, "runAsUser must be 0 (heapbpf runs as root)")
    need(sc.get("readOnlyRootFilesystem") is True, "readOnlyRootFilesystem must be true")
    need(sc.get("allowPrivilegeEscalation") is False, "allowPrivilegeEscalation must be false")
    caps = sc.get("capabilities") or {}
    need("ALL" in (caps.get("drop") or []), "capabilities must drop ALL")
    added = set(caps.get("add") or [])
    need(added == CAPS, f"capabilities added must be exactly {sorted(CAPS)}, not {sorted(added)}")
    need((sc.get("seccompProfile") or {}).get("type") == "RuntimeDefault",
         "seccompProfile must be RuntimeDefault")


def check_volumes(pod, c):
    vols = {v.get("name"): v for v in pod.get("volumes") or []}
    mounts = {m.get("name"): m for m in c.get("volumeMounts") or []}
    host = {}
    for name, v in vols.items():
        if "hostPath" not in v:
            continue
        path = v["hostPath"].get("path")
        need(path in HOST_PATHS, f"host path {path} is not one heapbpf needs")
        m = mounts.get(name)
        if not need(m is not None, f"host path {path} is not mounted"):
            continue
        # heapbpf reads them by the host's names
        need(m.get("mountPath") == path, f"host path {path} is mounted at {m.get('mountPath')}")
        need(bool(m.get("readOnly")) == HOST_PATHS.get(path, True),
             f"host path {path} must be mounted {'read-only' if HOST_PATHS.get(path, True) else 'writable'}")
        host[path] = m
    for path in HOST_PATHS:
        need(path in host, f"host path {path} is missing")
    for name in mounts:
        need(name in vols, f"volume mount {name} has no volume")


def check_env(pod, c, cm, state):
    env = {e.get("name"): e for e in c.get("env") or []}
    opts = (env.get("HEAPBPF_OPTS") or {}).get("valueFrom", {}).get("configMapKeyRef", {})
    need(opts.get("name") == (cm.get("metadata") or {}).get("name") and
         opts.get("key") in (cm.get("data") or {}),
         "HEAPBPF_OPTS must come from the ConfigMap's key")
    need("--pyroscope" in (cm.get("data") or {}).get("HEAPBPF_OPTS", ""),
         "the ConfigMap's HEAPBPF_OPTS must name --pyroscope")
    need((env.get("STATE_DIRECTORY") or {}).get("value") == state,
         f"STATE_DIRECTORY must be {state} (the spool)")
    node = (env.get("NODE_NAME") or {}).get("valueFrom", {}).get("fieldRef", {})
    need(node.get("fieldPath") == "spec.nodeName", "NODE_NAME must be the pod's spec.nodeName")
    cmd = " ".join((c.get("command") or []) + (c.get("args") or []))
    need("heapbpf agent" in cmd and "$HEAPBPF_OPTS" in cmd, "the container must run heapbpf agent $HEAPBPF_OPTS")


def check(objs, text):
    ns = by_kind(objs, "Namespace")
    sa = by_kind(objs, "ServiceAccount")
    cm = by_kind(objs, "ConfigMap")
    ds = by_kind(objs, "DaemonSet")
    if not ds:
        return
    need(ds.get("apiVersion") == "apps/v1", "the DaemonSet must be apps/v1")
    name = (ns.get("metadata") or {}).get("name")
    for o in (sa, cm, ds):
        need((o.get("metadata") or {}).get("namespace") == name,
             f"{o.get('kind')} must be in namespace {name}")
    need(sa.get("automountServiceAccountToken") is False, "the ServiceAccount must mount no token")
    pod = ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}
    need(pod.get("hostPID") is True, "hostPID must be true")
    need(pod.get("hostNetwork") in (None, False), "hostNetwork must stay off by default")
    need(pod.get("automountServiceAccountToken") is False, "the pod must mount no API token")
    need(pod.get("serviceAccountName") == (sa.get("metadata") or {}).get("name"),
         "the pod must use the ServiceAccount")
    cs = pod.get("containers") or []
    if not need(len(cs) == 1, f"expected one container, found {len(cs)}"):
        return
    check_security(cs[0])
    check_volumes(pod, cs[0])
    check_env(pod, cs[0], cm, "/var/lib/heapbpf/agent")
    # the reason for CAP_SYS_ADMIN is told where it is granted
    need("CVE-2025-38466" in text, "the manifest must say why SYS_ADMIN is needed (CVE-2025-38466)")


def schema(objs):
    validator = os.path.join(HERE, "validate.mjs")
    if not os.path.isdir(os.path.join(HERE, "node_modules", "kubernetes-models")):
        problems.append("the schema validator is not installed: run scripts/install-deps.sh")
        return
    r = subprocess.run(["node", validator], input=json.dumps(objs), capture_output=True,
                       text=True, cwd=HERE, timeout=120)
    out = (r.stdout + r.stderr).strip()
    if r.returncode:
        problems.extend(f"schema: {line}" for line in out.splitlines())
    return out


def main(argv):
    args = [a for a in argv[1:] if a != "--no-schema"]
    path = args[0] if args else os.path.normpath(
        os.path.join(HERE, "../../examples/kubernetes/heapbpf-agent.yaml"))
    with open(path, encoding="utf-8") as f:
        text = f.read()
    try:
        objs = [o for o in yaml.safe_load_all(text) if o is not None]
    except yaml.YAMLError as e:
        print(f"{path}: not YAML: {e}")
        return 1
    check(objs, text)
    result = None if "--no-schema" in argv or problems else schema(objs)
    for p in problems:
        print(f"{path}: {p}")
    if problems:
        return 1
    print(f"{path}: {len(objs)} objects, least privilege kept" + (f", {result}" if result else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
