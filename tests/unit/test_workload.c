// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * What a process is, from /proc/PID/cgroup text as systemd, Docker,
 * containerd, CRI-O and the kubelet write it, and from a scratch copy of the
 * kubelet's /var/log tree.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "targets/workload.h"

#define ID   "4f797c539e6c745de61a93ca3ff892358ecbcaccd8414d5db545c38428142970"
#define ID2  "9ec39b91f3d70e1beff50a308f77067065ea6be0d91a3378375056cd4422cf3d"
#define UID  "2f1a6e1c-9b7e-4c47-8d0a-1f1e8c2f7b3a"
#define UID_ "2f1a6e1c_9b7e_4c47_8d0a_1f1e8c2f7b3a"

TestSuite(workload, .fini = hb_tmpdir_cleanup);

static struct workload w;

/* root NULL: an empty scratch root, so that nothing of this machine's /var is read */
static void from(const char *text, const char *root)
{
	cr_assert_eq(workload_from_cgroup_text(text, root ? root : hb_tmpdir(), &w), 0,
		     "cgroup text: %s", text);
}

/* ---- Alloy's rule for the id, line by line ---- */

static const char *id_of(const char *line)
{
	static char id[WORKLOAD_ID_LEN + 1];

	return workload_container_id(line, strlen(line), id) ? id : "";
}

Test(workload, id_rule_matches_runtime_names)
{
	cr_assert_str_eq(id_of("0::/system.slice/docker-" ID ".scope"), ID);
	cr_assert_str_eq(id_of("12:memory:/docker/" ID), ID);
	cr_assert_str_eq(
		id_of("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID_
		      ".slice/cri-containerd-" ID ".scope"),
		ID);
	cr_assert_str_eq(id_of("0::/kubepods.slice/kubepods-pod" UID_ ".slice/crio-" ID ".scope"),
			 ID);
	cr_assert_str_eq(id_of("0::/kubepods/burstable/pod" UID "/" ID), ID);
	cr_assert_str_eq(id_of("0::/machine.slice/libpod-" ID ".scope/container"), ID);
	/* trailing white space, as \s*$ allows */
	cr_assert_str_eq(id_of("0::/docker/" ID " \t\r"), ID);
}

Test(workload, id_rule_refuses_near_misses)
{
	cr_assert_str_eq(id_of("0::/system.slice/redis-server.service"), "");
	cr_assert_str_eq(id_of("0::/"), "");
	cr_assert_str_eq(id_of(""), "");
	/* upper case, 63 digits, 65 digits, no '/' before it, a suffix other than '.' */
	cr_assert_str_eq(
		id_of("0::/docker/4F797C539E6C745DE61A93CA3FF892358ECBCACCD8414D5DB545C38428142970"),
		"");
	cr_assert_str_eq(id_of("0::/docker/" ID "0"), "");
	cr_assert_str_eq(id_of("0::/docker/" ID "_x"), "");
	cr_assert_str_eq(id_of(ID), "");
	cr_assert_str_eq(id_of("0::docker-" ID ".scope"), "");
	char short_id[] = "0::/docker/" ID;

	short_id[strlen(short_id) - 1] = '\0';
	cr_assert_str_eq(id_of(short_id), "");
}

Test(workload, id_rule_prefers_what_a_backtracking_match_would)
{
	/* the last '/' with an id after it wins, then the last '-' after that '/' */
	cr_assert_str_eq(id_of("0::/docker/" ID "/sub/" ID2), ID2);
	cr_assert_str_eq(id_of("0::/docker/" ID "/not-an-id"), ""); /* no "." or end after it */
	cr_assert_str_eq(id_of("0::/x/a-" ID "-" ID2 ".scope"), ID2);
	/* "-ID2x" cannot end the match, so the '-' before ID does */
	cr_assert_str_eq(id_of("0::/x/a-" ID ".b-" ID2 "x"), ID);
	/* after a '/' no '-' fits: the id right after the '/' */
	cr_assert_str_eq(id_of("0::/" ID ".scope-x"), ID);
	/* the id of an earlier segment is reached by the '.*-' across a '/' */
	cr_assert_str_eq(id_of("0::/a-" ID ".scope/b"), ID);
}

/*
 * The expression as a backtracking matcher runs it, written out plainly: each
 * '/' from the last, after it each '-' from the last and then none, the first
 * start where 64 hex digits end the line or stand before a '.'.
 */
static bool naive_id(const char *l, size_t n, char *id)
{
	for (size_t slash = n; slash-- > 0;) {
		if (l[slash] != '/')
			continue;
		for (size_t start = n + 1; start-- > slash + 1;) {
			size_t e = start + WORKLOAD_ID_LEN, i;

			if (start != slash + 1 && l[start - 1] != '-')
				continue;
			if (e > n)
				continue;
			for (i = start; i < e && strchr("0123456789abcdef", l[i]) && l[i]; i++)
				;
			if (i < e)
				continue;
			for (i = e; i < n && strchr(" \t\r\f\n", l[i]) && l[i]; i++)
				;
			if ((e < n && l[e] == '.') || i == n) {
				memcpy(id, l + start, WORKLOAD_ID_LEN);
				id[WORKLOAD_ID_LEN] = '\0';
				return true;
			}
		}
	}
	return false;
}

Test(workload, id_rule_agrees_with_a_plain_backtracking_match)
{
	static const char *const parts[] = {
		"/",
		"-",
		".",
		"a",
		"0",
		" ",
		"\t",
		"x",
		ID,
		ID2,
		"4f797c539e6c745de61a93ca3ff892358ecbcaccd8414d5db545c3842814297"
	};
	char line[1024], a[WORKLOAD_ID_LEN + 1], b[WORKLOAD_ID_LEN + 1];
	unsigned int seed = 7, hits = 0;

	for (int round = 0; round < 20000; round++) {
		size_t n = 0;
		int k = rand_r(&seed) % 10;

		line[0] = '\0';
		for (int i = 0; i < k; i++) {
			const char *p = parts[rand_r(&seed) % (sizeof(parts) / sizeof(parts[0]))];

			memcpy(line + n, p, strlen(p) + 1);
			n += strlen(p);
		}
		bool x = workload_container_id(line, n, a), y = naive_id(line, n, b);

		cr_assert_eq(x, y, "line \"%s\": %d against %d", line, x, y);
		if (x)
			cr_assert_str_eq(a, b, "line \"%s\"", line);
		hits += x;
	}
	/* the lines had ids to find, and ones to miss */
	cr_assert_gt(hits, 200);
	cr_assert_lt(hits, 19000);
}

/* ---- whole files ---- */

Test(workload, systemd_service)
{
	from("0::/system.slice/redis-server.service\n", NULL);
	cr_assert_str_eq(w.cgroup, "/system.slice/redis-server.service");
	cr_assert_str_eq(w.unit, "redis-server.service");
	cr_assert_str_eq(w.container_id, "");
	cr_assert_str_eq(w.runtime, "");
	cr_assert_str_eq(w.pod_uid, "");
	cr_assert_str_eq(w.service_name, "redis-server");
}

Test(workload, delegated_subgroup_and_user_units)
{
	from("0::/system.slice/postgresql@15-main.service/worker\n", NULL);
	cr_assert_str_eq(w.unit, "postgresql@15-main.service");
	cr_assert_str_eq(w.service_name, "postgresql_15-main");
	from("0::/user.slice/user-1000.slice/user@1000.service/app.slice/cache.service\n", NULL);
	cr_assert_str_eq(w.unit, "cache.service");
	from("0::/user.slice/user-1000.slice/session-3.scope\n", NULL);
	cr_assert_str_eq(w.unit, "session-3.scope");
	cr_assert_str_eq(w.service_name, "session-3.scope");
}

Test(workload, docker_systemd_driver)
{
	from("0::/system.slice/docker-" ID ".scope\n", NULL);
	cr_assert_str_eq(w.container_id, ID);
	cr_assert_str_eq(w.runtime, "docker");
	cr_assert_str_eq(w.unit, "docker-" ID ".scope");
	cr_assert_str_eq(w.pod_uid, "");
	cr_assert_str_eq(w.service_name, "docker/4f797c539e6c");
}

Test(workload, docker_cgroupfs_driver_v1)
{
	from("12:pids:/docker/" ID "\n"
	     "11:memory:/docker/" ID "\n"
	     "10:cpu,cpuacct:/docker/" ID "\n"
	     "1:name=systemd:/docker/" ID "\n"
	     "0::/system.slice/containerd.service\n",
	     NULL);
	cr_assert_str_eq(w.container_id, ID);
	cr_assert_str_eq(w.runtime, "docker");
	/* cgroup2's line is the path even on a hybrid machine, when it is not "/" */
	cr_assert_str_eq(w.cgroup, "/system.slice/containerd.service");
	cr_assert_str_eq(w.service_name, "docker/4f797c539e6c");
}

Test(workload, v1_picks_name_systemd_over_other_lines)
{
	from("11:memory:/some/other\n"
	     "1:name=systemd:/system.slice/nginx.service\n"
	     "0::/\n",
	     NULL);
	cr_assert_str_eq(w.cgroup, "/system.slice/nginx.service");
	cr_assert_str_eq(w.unit, "nginx.service");
	cr_assert_str_eq(w.service_name, "nginx");
	/* several controllers around name=systemd */
	from("3:cpu,name=systemd,memory:/system.slice/a.service\n", NULL);
	cr_assert_str_eq(w.cgroup, "/system.slice/a.service");
	/* in either order */
	from("0::/\n1:name=systemd:/system.slice/c.service\n", NULL);
	cr_assert_str_eq(w.unit, "c.service");
	from("0::/system.slice/d.service\n1:name=systemd:/system.slice/c.service\n", NULL);
	cr_assert_str_eq(w.unit, "d.service");
	/* a v1 line that is not name=systemd is a last resort */
	from("4:memory:/system.slice/b.service\n", NULL);
	cr_assert_str_eq(w.cgroup, "/system.slice/b.service");
}

Test(workload, containerd_kubepods_systemd_driver)
{
	from("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID_
	     ".slice/cri-containerd-" ID ".scope\n",
	     NULL);
	cr_assert_str_eq(w.container_id, ID);
	cr_assert_str_eq(w.runtime, "containerd");
	cr_assert_str_eq(w.pod_uid, UID);
	/* no /var/log tree under the root given: namespace and container unknown */
	cr_assert_str_eq(w.k8s_namespace, "");
	cr_assert_str_eq(w.service_name, "containerd/4f797c539e6c");
}

Test(workload, guaranteed_pod_and_crio)
{
	from("0::/kubepods.slice/kubepods-pod" UID_ ".slice/crio-" ID ".scope\n", NULL);
	cr_assert_str_eq(w.pod_uid, UID);
	cr_assert_str_eq(w.runtime, "cri-o");
	cr_assert_str_eq(w.container_id, ID);
	/* CRI-O's conmon beside the container: Alloy's rule gives it the container's id */
	from("0::/kubepods.slice/kubepods-pod" UID_ ".slice/crio-conmon-" ID ".scope\n", NULL);
	cr_assert_str_eq(w.container_id, ID);
	cr_assert_str_eq(w.runtime, "cri-o");
	cr_assert_str_eq(w.unit, "crio-conmon-" ID ".scope");
}

Test(workload, kubepods_cgroupfs_driver)
{
	from("0::/kubepods/besteffort/pod" UID "/" ID "\n", NULL);
	cr_assert_str_eq(w.pod_uid, UID);
	cr_assert_str_eq(w.container_id, ID);
	cr_assert_str_eq(w.runtime, ""); /* the path does not say which */
	cr_assert_str_eq(w.service_name, "container/4f797c539e6c");
	/* a static pod's uid is a hash without dashes */
	from("0::/kubepods/pod6f0e9c6c3b8bd6e0d0f6b3a2c1d4e5f6/" ID "\n", NULL);
	cr_assert_str_eq(w.pod_uid, "6f0e9c6c3b8bd6e0d0f6b3a2c1d4e5f6");
}

Test(workload, pod_id_from_a_v1_line_other_than_systemd)
{
	from("5:memory:/kubepods/burstable/pod" UID "/" ID "\n"
	     "1:name=systemd:/\n",
	     NULL);
	cr_assert_str_eq(w.container_id, ID);
	cr_assert_str_eq(w.pod_uid, UID);
	cr_assert_str_eq(w.unit, "");
}

Test(workload, malformed_input)
{
	cr_assert_eq(workload_from_cgroup_text("", NULL, &w), -EINVAL);
	cr_assert_eq(workload_from_cgroup_text("garbage\nno colons here\n", NULL, &w), -EINVAL);
	cr_assert_str_eq(w.cgroup, "");
	cr_assert_str_eq(w.service_name, "unspecified");
	cr_assert_eq(workload_from_cgroup_text(NULL, NULL, &w), -EINVAL);
	/* one good line among bad ones is enough */
	from("junk\n0::/system.slice/x.service\n::\n:::/\n", NULL);
	cr_assert_str_eq(w.unit, "x.service");
	/* a pod segment that is no uid, a kubepods slice cut short */
	from("0::/kubepods/burstable/podXYZ/abc\n", NULL);
	cr_assert_str_eq(w.pod_uid, "");
	from("0::/kubepods.slice/kubepods-pod.slice\n", NULL);
	cr_assert_str_eq(w.pod_uid, "");
	/* no newline at the end, a very long line */
	from("0::/system.slice/y.service", NULL);
	cr_assert_str_eq(w.unit, "y.service");
	char big[9000] = "0::/";

	memset(big + 4, 'a', sizeof(big) - 5);
	big[sizeof(big) - 1] = '\0';
	from(big, NULL);
	cr_assert_eq(strlen(w.cgroup), sizeof(w.cgroup) - 1);
	cr_assert_str_eq(w.container_id, "");
}

/* ---- inside a cgroup namespace ---- */

Test(workload, relative_paths_of_a_cgroup_namespace)
{
	/* the agent in a pod: others' cgroups seen from its own */
	from("0::/../../../../system.slice/redis-server.service\n", NULL);
	cr_assert_str_eq(w.unit, "redis-server.service");
	cr_assert_str_eq(w.service_name, "redis-server");
	cr_assert_str_eq(w.cgroup, "/../../../../system.slice/redis-server.service");
	from("0::/../../kubepods-besteffort.slice/kubepods-besteffort-pod" UID_
	     ".slice/cri-containerd-" ID ".scope\n",
	     NULL);
	cr_assert_str_eq(w.pod_uid, UID);
	cr_assert_str_eq(w.container_id, ID);
	cr_assert_str_eq(w.runtime, "containerd");
	/* the cgroupfs driver with "kubepods" hidden above: the pod right above the id */
	from("0::/../../besteffort/pod" UID "/" ID "\n", NULL);
	cr_assert_str_eq(w.pod_uid, UID);
	/* a "pod..." segment elsewhere is no pod */
	from("0::/../x/pod" UID "/other\n", NULL);
	cr_assert_str_eq(w.pod_uid, "");
}

Test(workload, relative_paths_resolved_against_the_base)
{
	workload_set_cgroup_base("/kubepods.slice/kubepods-burstable.slice/"
				 "kubepods-burstable-pod" UID_ ".slice/cri-containerd-" ID2
				 ".scope");
	from("0::/../../../../system.slice/redis-server.service\n", NULL);
	cr_assert_str_eq(w.cgroup, "/system.slice/redis-server.service");
	cr_assert_str_eq(w.unit, "redis-server.service");
	from("0::/../../../kubepods-besteffort.slice/kubepods-besteffort-pod" UID_
	     ".slice/cri-containerd-" ID ".scope\n",
	     NULL);
	cr_assert_str_eq(w.cgroup,
			 "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" UID_
			 ".slice/cri-containerd-" ID ".scope");
	cr_assert_str_eq(w.pod_uid, UID);
	/* "." and doubled slashes are normalized away; an absolute path is left alone */
	from("0::/.././/../../..//system.slice/./a.service\n", NULL);
	cr_assert_str_eq(w.cgroup, "/system.slice/a.service");
	from("0::/system.slice/b.service\n", NULL);
	cr_assert_str_eq(w.cgroup, "/system.slice/b.service");
	/* all the way up, and beyond it (kept as read) */
	from("0::/../../../..\n", NULL);
	cr_assert_str_eq(w.cgroup, "/");
	from("0::/../../../../../x.service\n", NULL);
	cr_assert_str_eq(w.cgroup, "/../../../../../x.service");
	cr_assert_str_eq(w.unit, "x.service");
	/* no base: as read */
	workload_set_cgroup_base("/");
	from("0::/../../../../system.slice/redis-server.service\n", NULL);
	cr_assert_str_eq(w.cgroup, "/../../../../system.slice/redis-server.service");
}

Test(workload, base_found_by_cgroup_procs)
{
	const char *root = hb_tmpdir();
	char base[4096] = "unset";

	hb_sh("mkdir -p %s/cg/kubepods.slice/pod.slice/ctr.scope %s/cg/system.slice/x.service "
	      "%s/cg/kubepods.slice/pod.slice/other.scope",
	      root, root, root);
	hb_sh("echo 1 > %s/cg/cgroup.procs; printf '7\\n8\\n' > %s/cg/system.slice/x.service/cgroup.procs",
	      root, root);
	hb_sh("printf '12\\n%d\\n' > %s/cg/kubepods.slice/pod.slice/ctr.scope/cgroup.procs",
	      getpid(), root);
	hb_sh("echo %d0 > %s/cg/kubepods.slice/pod.slice/other.scope/cgroup.procs", getpid(), root);
	cr_assert_eq(workload_cgroup_base(hb_tmp("cg"), base, sizeof(base)), 0);
	cr_assert_str_eq(base, "/kubepods.slice/pod.slice/ctr.scope");
	/* a trailing '/' on the mount changes nothing */
	cr_assert_eq(workload_cgroup_base(hb_tmp("cg/"), base, sizeof(base)), 0);
	cr_assert_str_eq(base, "/kubepods.slice/pod.slice/ctr.scope");
	/* at the root */
	hb_sh("echo %d >> %s/cg/cgroup.procs", getpid(), root);
	cr_assert_eq(workload_cgroup_base(hb_tmp("cg"), base, sizeof(base)), 0);
	cr_assert_str_eq(base, "/");
	/* nowhere */
	cr_assert_eq(workload_cgroup_base(hb_tmp("cg/system.slice"), base, sizeof(base)), -ENOENT);
	cr_assert_eq(workload_cgroup_base(hb_tmp("missing"), base, sizeof(base)), -ENOENT);
}

/* ---- the kubelet's /var/log ---- */

static const char *kubelet_root(void)
{
	const char *root = hb_tmpdir();

	hb_sh("mkdir -p %s/var/log/pods/shop_cart-7d9f_" UID
	      "/cart %s/var/log/pods/shop_cart-7d9f_" UID "/istio-proxy %s/var/log/containers",
	      root, root, root);
	hb_sh("touch %s/var/log/pods/shop_cart-7d9f_" UID "/cart/0.log", root);
	hb_sh("ln -s /var/log/pods/shop_cart-7d9f_" UID "/cart/0.log "
	      "%s/var/log/containers/cart-7d9f_shop_cart-" ID ".log",
	      root);
	hb_sh("ln -s /var/log/pods/shop_cart-7d9f_" UID "/istio-proxy/0.log "
	      "%s/var/log/containers/cart-7d9f_shop_istio-proxy-" ID2 ".log",
	      root);
	return root;
}

Test(workload, pod_names_from_var_log)
{
	const char *root = kubelet_root();
	struct pyro_label l[PYRO_MAX_LABELS];
	size_t n;

	from("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID_
	     ".slice/cri-containerd-" ID ".scope\n",
	     root);
	cr_assert_str_eq(w.k8s_namespace, "shop");
	cr_assert_str_eq(w.pod, "cart-7d9f");
	cr_assert_str_eq(w.container, "cart");
	cr_assert_str_eq(w.service_name, "shop/cart");
	n = workload_labels(&w, l, PYRO_MAX_LABELS);
	cr_assert_eq(n, 4);
	cr_assert_str_eq(l[0].key, "namespace");
	cr_assert_str_eq(l[0].value, "shop");
	cr_assert_str_eq(l[1].key, "pod");
	cr_assert_str_eq(l[1].value, "cart-7d9f");
	cr_assert_str_eq(l[2].key, "container");
	cr_assert_str_eq(l[2].value, "cart");
	cr_assert_str_eq(l[3].key, "container_id");
	cr_assert_str_eq(l[3].value, ID);
	/* the sidecar of the same pod, by its own id */
	from("0::/kubepods/burstable/pod" UID "/" ID2 "\n", root);
	cr_assert_str_eq(w.container, "istio-proxy");
	cr_assert_str_eq(w.service_name, "shop/istio-proxy");
	/* max is kept to */
	cr_assert_eq(workload_labels(&w, l, 2), 2);
	cr_assert_eq(workload_labels(&w, l, 0), 0);
}

Test(workload, pod_without_container_log_link)
{
	const char *root = kubelet_root();
	char other[] = "0::/kubepods/burstable/pod" UID "/"
		       "1111111111111111111111111111111111111111111111111111111111111111\n";

	/* an id without a log link (the pod sandbox) in a pod of two containers: pod known, container not */
	from(other, root);
	cr_assert_str_eq(w.k8s_namespace, "shop");
	cr_assert_str_eq(w.pod, "cart-7d9f");
	cr_assert_str_eq(w.container, "");
	cr_assert_str_eq(w.service_name, "container/111111111111");
}

Test(workload, single_container_dir_without_var_log_containers)
{
	const char *root = hb_tmpdir();

	hb_sh("mkdir -p %s/var/log/pods/web_api-0_" UID "/api", root);
	hb_sh("touch %s/var/log/pods/web_api-0_" UID "/api/0.log", root);
	from("0::/kubepods/pod" UID "/" ID "\n", root);
	cr_assert_str_eq(w.k8s_namespace, "web");
	cr_assert_str_eq(w.pod, "api-0");
	cr_assert_str_eq(w.container, "api");
	cr_assert_str_eq(w.service_name, "web/api");
	/* a /var/log/containers without this id's link (the kubelet cut a long name) */
	hb_sh("mkdir -p %s/var/log/containers && touch %s/var/log/containers/api-0_web_api-0123.log",
	      root, root);
	from("0::/kubepods/pod" UID "/" ID "\n", root);
	cr_assert_str_eq(w.container, "api");
	/* with a second container directory the tree cannot tell which */
	hb_sh("mkdir -p %s/var/log/pods/web_api-0_" UID "/sidecar", root);
	from("0::/kubepods/pod" UID "/" ID "\n", root);
	cr_assert_str_eq(w.pod, "api-0");
	cr_assert_str_eq(w.container, "");
}

Test(workload, other_pods_and_odd_names_are_ignored)
{
	const char *root = hb_tmpdir();

	hb_sh("mkdir -p %s/var/log/pods/a_b_00000000-0000-0000-0000-000000000000/c "
	      "%s/var/log/pods/too_many_parts_" UID " %s/var/log/containers",
	      root, root, root);
	hb_sh("touch %s/var/log/containers/bad-" ID ".log %s/var/log/containers/x_y_z-" ID2 ".txt",
	      root, root);
	from("0::/kubepods/pod" UID "/" ID "\n", root);
	cr_assert_str_eq(w.k8s_namespace, "");
	cr_assert_str_eq(w.pod, "");
	cr_assert_str_eq(w.container, "");
	cr_assert_eq(
		workload_labels(&w, (struct pyro_label[PYRO_MAX_LABELS]){ 0 }, PYRO_MAX_LABELS), 1);
}

/* ---- Docker's name ---- */

static void docker_config(const char *root, const char *id, const char *json)
{
	char path[4096];
	FILE *f;

	hb_sh("mkdir -p %s/var/lib/docker/containers/%s", root, id);
	snprintf(path, sizeof(path), "%s/var/lib/docker/containers/%s/config.v2.json", root, id);
	f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs(json, f);
	cr_assert_eq(fclose(f), 0);
}

Test(workload, docker_name_from_config)
{
	const char *root = hb_tmpdir();

	/* as Docker writes it: "Name" keys deeper in (a label, a volume) come first and after */
	docker_config(root, ID,
		      "{\"StreamConfig\":{},\"State\":{\"Running\":true,\"Pid\":4242},"
		      "\"ID\":\"" ID
		      "\",\"Path\":\"sh\",\"Args\":[\"-c\",\"echo \\\"{\\\"Name\\\":\\\"/x\\\"\"],"
		      "\"Config\":{\"Hostname\":\"4f797c539e6c\",\"Labels\":{\"Name\":\"decoy\"}},"
		      "\"Image\":\"sha256:abc\",\"LogPath\":\"/var/lib/docker/x.log\","
		      "\"Name\" : \"/redis-cache\",\"Driver\":\"overlay2\","
		      "\"MountPoints\":{\"/data\":{\"Name\":\"vol1\",\"RW\":true}}}");
	from("0::/system.slice/docker-" ID ".scope\n", root);
	cr_assert_str_eq(w.docker_name, "/redis-cache");
	cr_assert_str_eq(w.service_name, "/redis-cache");
	/* not a label of its own: Alloy's Docker example sets service_name from it, nothing else */
	cr_assert_eq(
		workload_labels(&w, (struct pyro_label[PYRO_MAX_LABELS]){ 0 }, PYRO_MAX_LABELS), 1);
	/* the cgroupfs driver's path names the same container */
	from("11:memory:/docker/" ID "\n1:name=systemd:/docker/" ID "\n", root);
	cr_assert_str_eq(w.service_name, "/redis-cache");
}

Test(workload, docker_config_without_a_usable_name)
{
	const char *root = hb_tmpdir();
	static const char *const bad[] = {
		"",
		"{\"Name\":",
		"{\"Config\":{\"Name\":\"/nested\"}}",
		"{\"Name\":\"\"}",
		"{\"Name\":42}",
		"{\"Name\":\"/esc\\\"aped\"}",
		"{\"Name\":\"/unterminated",
		"[{\"Name\":\"/in-array\"}]",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		docker_config(root, ID, bad[i]);
		from("0::/system.slice/docker-" ID ".scope\n", root);
		cr_assert_str_eq(w.docker_name, "", "config %s", bad[i]);
		cr_assert_str_eq(w.service_name, "docker/4f797c539e6c", "config %s", bad[i]);
	}
	/* a containerd container is not looked up in Docker's directory */
	docker_config(root, ID, "{\"Name\":\"/wrong\"}");
	from("0::/system.slice/cri-containerd-" ID ".scope\n", root);
	cr_assert_str_eq(w.docker_name, "");
	cr_assert_str_eq(w.service_name, "containerd/4f797c539e6c");
}

/* ---- names ---- */

Test(workload, service_name_order)
{
	struct workload x = { 0 };
	char out[256];

	workload_service_name(&x, "redis-server", out, sizeof(out));
	cr_assert_str_eq(out, "redis-server");
	workload_service_name(&x, NULL, out, sizeof(out));
	cr_assert_str_eq(out, "unspecified");
	workload_service_name(&x, "a b{c}", out, sizeof(out));
	cr_assert_str_eq(out, "a_b_c_");
	snprintf(x.unit, sizeof(x.unit), "memcached.service");
	workload_service_name(&x, "memcached", out, sizeof(out));
	cr_assert_str_eq(out, "memcached");
	snprintf(x.container_id, sizeof(x.container_id), ID);
	snprintf(x.runtime, sizeof(x.runtime), "docker");
	workload_service_name(&x, "memcached", out, sizeof(out));
	cr_assert_str_eq(out, "docker/4f797c539e6c");
	snprintf(x.k8s_namespace, sizeof(x.k8s_namespace), "cache");
	workload_service_name(&x, "memcached", out, sizeof(out));
	cr_assert_str_eq(out, "docker/4f797c539e6c"); /* a namespace alone is not enough */
	snprintf(x.container, sizeof(x.container), "memcached");
	workload_service_name(&x, "memcached", out, sizeof(out));
	cr_assert_str_eq(out, "cache/memcached");
	/* valid by Pyroscope's rule, whatever went in */
	cr_assert(pyro_labels_valid_service(out));
	workload_service_name(&x, NULL, out, 6);
	cr_assert_str_eq(out, "cache");
}

Test(workload, labels_are_valid_for_pyroscope)
{
	const char *root = kubelet_root();
	struct pyro_label l[PYRO_MAX_LABELS];
	char name[PYRO_NAME_MAX];
	size_t n;

	from("0::/kubepods/burstable/pod" UID "/" ID "\n", root);
	n = workload_labels(&w, l, PYRO_MAX_LABELS);
	cr_assert_eq(n, 4);
	for (size_t i = 0; i < n; i++) {
		cr_assert(pyro_labels_valid_key(l[i].key), "%s", l[i].key);
		cr_assert(pyro_labels_valid_value(l[i].value), "%s", l[i].value);
	}
	cr_assert_eq(pyro_labels_build_name(name, sizeof(name), w.service_name, l, n), 0);
	cr_assert_str_eq(name, "shop/cart{container=cart,container_id=" ID
			       ",namespace=shop,pod=cart-7d9f}");
}

/* ---- a live process ---- */

Test(workload, of_this_process)
{
	char *text = NULL;
	struct workload fromfile;

	cr_assert_eq(workload_of(getpid(), NULL, &w), 0);
	cr_assert_eq(w.cgroup[0], '/');
	cr_assert_gt(hb_read_file("/proc/self/cgroup", &text), 0);
	cr_assert_eq(workload_from_cgroup_text(text, NULL, &fromfile), 0);
	free(text);
	cr_assert_str_eq(w.cgroup, fromfile.cgroup);
	cr_assert_str_eq(w.container_id, fromfile.container_id);
	cr_assert(pyro_labels_valid_service(w.service_name));
	/* a pid that is not there */
	cr_assert_eq(workload_of(-5, NULL, &w), -ESRCH);
}

/* ---- names a target or its runtime chose ---- */

/* A file named name under root/dir, made without a shell (names hold quotes and spaces). */
static void touch_in(const char *root, const char *dir, const char *name)
{
	char path[4096];
	FILE *f;

	/* each directory on the way, up to the '/' after dir */
	snprintf(path, sizeof(path), "%s/%s/", root, dir);
	for (char *c = path + strlen(root) + 1; *c; c++) {
		if (*c != '/')
			continue;
		*c = '\0';
		cr_assert(mkdir(path, 0755) == 0 || errno == EEXIST, "%s", path);
		*c = '/';
	}
	snprintf(path, sizeof(path), "%s/%s/%s", root, dir, name);
	f = fopen(path, "w");
	cr_assert_not_null(f, "%s", path);
	fclose(f);
}

/*
 * w's name= as heapbpf agent makes it (agent.c: service_name, then each
 * label as KEY=VALUE): valid for both APIs, with exactly nlabels labels
 * besides hostname, pid and comm.
 */
static void assert_name(const char *comm, size_t nlabels)
{
	struct pyro_label l[PYRO_MAX_LABELS];
	char kv[PYRO_MAX_LABELS][512], name[PYRO_NAME_MAX];
	const char *labels[PYRO_MAX_LABELS];
	struct pyro_naming nm = { .service_name = w.service_name, .labels = labels };
	size_t n = workload_labels(&w, l, PYRO_MAX_LABELS - 4);
	int commas = 0;

	cr_assert_eq(n, nlabels);
	for (size_t i = 0; i < n; i++) {
		cr_assert(pyro_labels_valid_value(l[i].value), "%s=%s", l[i].key, l[i].value);
		snprintf(kv[i], sizeof(kv[i]), "%s=%s", l[i].key, l[i].value);
		labels[i] = kv[i];
	}
	nm.nlabels = (int)n;
	cr_assert(pyro_labels_valid_service(w.service_name), "%s", w.service_name);
	cr_assert_eq(pyro_labels_profile_name(&nm, 42, comm, name, sizeof(name)), 0, "%s",
		     w.service_name);
	cr_assert(pyro_labels_valid_name(name), "%s", name);
	for (const char *c = name; *c; c++)
		commas += *c == ',';
	cr_assert_eq(commas, (int)n + 2, "%s", name);
}

/*
 * A unit, a pod, a namespace, a container and a Docker name made to inject
 * labels or break name='s syntax ({ } , = " space, control characters, bytes
 * beyond ASCII): each stays one value of its own label, or of service_name.
 */
Test(workload, crafted_names_inject_no_label)
{
	const char *root = hb_tmpdir();

	/* a unit in a delegated subtree: any name but '/' and a line break */
	from("0::/user.slice/x{y=1,z=\"2\"} \x1b[0m\xc3\xa9}{a=b.service\n", NULL);
	cr_assert_str_eq(w.unit, "x{y=1,z=\"2\"} \x1b[0m\xc3\xa9}{a=b.service");
	cr_assert_str_eq(w.service_name, "x_y_1_z__2_____0m____a_b");
	assert_name("sh,evil=1", 0);

	/* the kubelet's link name POD_NAMESPACE_CONTAINER-ID.log, each part crafted */
	touch_in(root, "var/log/containers", "p{o}d,x=1_n\"s=\x01}_c=t r{,\xff-" ID ".log");
	from("0::/kubepods/burstable/pod" UID "/" ID "\n", root);
	cr_assert_str_eq(w.pod, "p_o_d_x_1");
	cr_assert_str_eq(w.k8s_namespace, "n_s___");
	cr_assert_str_eq(w.container, "c_t_r___");
	assert_name("c", 4);

	/* a pod's directory, when no link names the container */
	hb_sh("rm -rf %s/var/log", root);
	touch_in(root, "var/log/pods/n{s}_p,o=d_" UID "/c\"t{r}=1 x", "0.log");
	from("0::/kubepods/pod" UID "/" ID "\n", root);
	cr_assert_str_eq(w.k8s_namespace, "n_s_");
	cr_assert_str_eq(w.pod, "p_o_d");
	cr_assert_str_eq(w.container, "c_t_r__1_x");
	assert_name("c", 4);

	/* Docker's "Name", raw characters in it */
	hb_sh("rm -rf %s/var/log", root);
	docker_config(root, ID, "{\"Name\":\"/re{dis,a=b}= x\t\xc3\xa9\"}");
	from("0::/system.slice/docker-" ID ".scope\n", root);
	cr_assert_str_eq(w.service_name, "/re_dis_a_b___x___");
	assert_name("redis", 1);
}

/*
 * service_name of a process tree: a forked child that renamed itself (as
 * Redis's BGSAVE child and Varnish's cache-main do) takes its parent's;
 * one that exec'ed another program keeps its own.
 */
Test(workload, a_forked_child_takes_its_parents_service)
{
	struct workload parent = { 0 }, child = { 0 }, other = { 0 };
	int ready[2], stop[2], execd[2];
	char c;
	pid_t kid, sleeper;

	cr_assert_eq(pipe(ready), 0);
	cr_assert_eq(pipe(stop), 0);
	kid = fork();
	cr_assert_geq(kid, 0);
	if (!kid) {
		prctl(PR_SET_NAME, "hb-bgsave-kid");
		if (write(ready[1], "r", 1) != 1 || read(stop[0], &c, 1) < 0)
			_exit(1);
		_exit(0);
	}
	cr_assert_eq(read(ready[0], &c, 1), 1);
	/* made after the first child: only the sleeper holds its write end */
	cr_assert_eq(pipe2(execd, O_CLOEXEC), 0);
	sleeper = fork();
	cr_assert_geq(sleeper, 0);
	if (!sleeper) {
		execl("/bin/sleep", "sleep", "600", (char *)NULL);
		_exit(127);
	}
	/* the exec closed the pipe's write end (close-on-exec): the kernel's word that it ran */
	close(execd[1]);
	cr_assert_eq(read(execd[0], &c, 1), 0);
	cr_assert_eq(workload_of(getpid(), "/", &parent), 0);
	cr_assert_eq(workload_of(kid, "/", &child), 0);
	cr_assert_eq(workload_of(sleeper, "/", &other), 0);
	cr_assert_str_eq(child.service_name, parent.service_name);
	if (!parent.unit[0] && !parent.container_id[0])
		cr_assert_str_eq(other.service_name, "sleep");
	cr_assert_eq(write(stop[1], "s", 1), 1);
	kill(sleeper, SIGKILL);
	waitpid(kid, NULL, 0);
	waitpid(sleeper, NULL, 0);
}
