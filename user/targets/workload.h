/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What a process is, as a fleet labels it: its systemd unit, its container,
 * its pod, found without asking systemd, a container runtime or the
 * Kubernetes API server: from /proc/PID/cgroup and, for a pod, the kubelet's
 * log directories (/var/log/pods, /var/log/containers). docs/fleet.md ("One
 * agent per node") gives the rules and where they come from (Grafana Alloy's
 * discovery.process and pyroscope.ebpf).
 */
#ifndef __HEAPBPF_WORKLOAD_H
#define __HEAPBPF_WORKLOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "export/pyro_labels.h"

#define WORKLOAD_ID_LEN 64 /* a container id: 64 lower-case hex digits */
/* What a process is, as a fleet labels it: its systemd unit, its container, its pod. */
struct workload {
	char unit[256]; /* "redis-server.service" (or .scope) the cgroup names; "" */
	char container_id[WORKLOAD_ID_LEN + 1]; /* Alloy's rule on /proc/PID/cgroup; "" */
	char runtime[16]; /* "docker", "containerd", "cri-o", "podman" or "" */
	char pod_uid[40]; /* from a kubepods cgroup, with dashes; "" */
	char k8s_namespace[254], pod[254], container[254]; /* from ROOT/var/log; "" */
	char docker_name[256]; /* "/redis", as Docker's API and Alloy's discovery.docker give it; "" */
	char cgroup[4096]; /* the path (cgroup2 "0::", else v1 name=systemd, resolved as below) */
	char service_name[256]; /* inferred as Alloy would; see workload_service_name */
};

/*
 * Reads /proc/PID/cgroup (real /proc always) and, for a pod, ROOT/var/log/pods
 * and ROOT/var/log/containers, for a Docker container
 * ROOT/var/lib/docker/containers/ID/config.v2.json (root "" or NULL is "/";
 * tests pass a scratch root). Returns 0, -ESRCH (gone),
 * or another negative errno. Fields not found are "". service_name is set
 * from comm as workload_service_name() does.
 */
int workload_of(pid_t pid, const char *root, struct workload *w);
/*
 * The same from the text of a /proc/PID/cgroup file (unit tests, no process
 * needed). -EINVAL when no line of it is "ID:CONTROLLERS:/PATH" (w is filled
 * as far as it goes all the same; workload_of() returns it too).
 */
int workload_from_cgroup_text(const char *text, const char *root, struct workload *w);

/*
 * Alloy's discovery.process rule for one line of /proc/PID/cgroup: the
 * 64-hex-digit id that ^.*\/(?:.*-)?([0-9a-f]{64})(?:\.|\s*$) captures, with
 * the same choice among several as Go's leftmost-first matching makes.
 * Returns true and fills id (WORKLOAD_ID_LEN + 1 bytes) when the line has one.
 */
bool workload_container_id(const char *line, size_t len, char *id);

/*
 * In a container with a cgroup namespace of its own (a pod on cgroup v2: the
 * default), /proc/PID/cgroup names other processes' cgroups relative to the
 * container's own: "/../../../../system.slice/redis.service". The unit, the
 * container id and the pod uid are found all the same; the path itself is
 * made the host's again once this process's own cgroup, as the host names
 * it, is known: workload_cgroup_base() finds it in the host's cgroup2
 * hierarchy mounted at mount (NULL: /sys/fs/cgroup, where the DaemonSet of
 * examples/kubernetes mounts the host's) as the directory whose
 * cgroup.procs lists this process; -ENOENT when none does (a private
 * mount). workload_set_cgroup_base() makes later calls in this process
 * resolve against base ("" or "/": not at all).
 */
int workload_cgroup_base(const char *mount, char *base, size_t len);
void workload_set_cgroup_base(const char *base);
/*
 * The root of this process's cgroup namespace as the host names it, when it
 * runs in one of its own (0, base filled): found in the hierarchy
 * workload_of() reads (name=systemd's, else cgroup2's) as its own cgroup,
 * the path /proc/self/cgroup gives cut off its end. 1 when both paths are
 * the same (the host's namespace: nothing to resolve); -ENOENT when its
 * cgroup is not found there (a private mount).
 */
int workload_host_cgroup_base(char *base, size_t len);

/*
 * service_name: the pod's annotation is unavailable without an API server,
 * so for a pod "NAMESPACE/CONTAINER" (pyroscope.scrape's inference); else
 * for a container its Docker name where Docker keeps it ("/redis", as
 * Alloy's __meta_docker_container_name), else "RUNTIME/ID12" (the first 12
 * digits of its id, as "docker ps" shows it; "container/ID12" when the
 * runtime is unknown); else the unit without ".service"; else comm, and
 * "unspecified" (Alloy's word) without one. Sanitized with pyro_labels_sanitize.
 */
void workload_service_name(const struct workload *w, const char *comm, char *out, size_t len);

/*
 * The labels Alloy would give the process, beside service_name: namespace, pod,
 * container, container_id (only those known, each a valid value: the names
 * are sanitized with pyro_labels_sanitize when read); at most PYRO_MAX_LABELS in all.
 * Returns how many were written to out (pointers into w).
 */
size_t workload_labels(const struct workload *w, struct pyro_label *out, size_t max);

#endif /* __HEAPBPF_WORKLOAD_H */
