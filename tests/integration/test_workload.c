// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * workload_of() on live processes: a child moved into cgroups named the way
 * systemd, Docker and the kubelet name theirs (under a parent of this test's
 * own, in the cgroup2 hierarchy), and a kubelet /var/log tree in a scratch
 * root.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "harness.h"
#include "targets/workload.h"

#define ID   "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define UID  "7c3e2a10-5b4d-4e6f-9a8b-0c1d2e3f4a5b"
#define UID_ "7c3e2a10_5b4d_4e6f_9a8b_0c1d2e3f4a5b"

static char cg_top[PATH_MAX], cg_leaf[PATH_MAX + 512], cg_mount[PATH_MAX];
static pid_t child;

/* Removes the leaf and every directory above it up to cg_top. */
static void cg_remove(void)
{
	char dir[sizeof(cg_leaf)];

	snprintf(dir, sizeof(dir), "%s", cg_leaf);
	hb_cgroup_drain(cg_leaf);
	while (cg_top[0] && strlen(dir) > strlen(cg_top)) {
		char *slash = strrchr(dir, '/');

		*slash = '\0';
		rmdir(dir);
	}
}

static void workload_fini(void)
{
	if (child > 0) {
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
		child = 0;
	}
	cg_remove();
	if (cg_mount[0])
		umount2(cg_mount, MNT_DETACH);
	cg_top[0] = '\0';
	hb_tmpdir_cleanup();
}

TestSuite(workload_live, .fini = workload_fini, .timeout = 60);

/* The cgroup2 mount (hybrid or unified), or a fresh one when none is mounted. */
static const char *cgroup2_root(void)
{
	static char root[PATH_MAX];
	char line[4096];
	FILE *f = fopen("/proc/self/mountinfo", "re");

	cr_assert_not_null(f);
	root[0] = '\0';
	while (!root[0] && fgets(line, sizeof(line), f)) {
		char mnt[PATH_MAX], fstype[64];
		char *sep = strstr(line, " - ");

		if (sep && sscanf(line, "%*s %*s %*s %*s %4095s", mnt) == 1 &&
		    sscanf(sep + 3, "%63s", fstype) == 1 && strcmp(fstype, "cgroup2") == 0)
			snprintf(root, sizeof(root), "%s", mnt);
	}
	fclose(f);
	if (!root[0]) {
		snprintf(cg_mount, sizeof(cg_mount), "%s", hb_tmp("cgroup2"));
		cr_assert_eq(mkdir(cg_mount, 0755), 0);
		cr_assert_eq(mount("none", cg_mount, "cgroup2", 0, NULL), 0,
			     "no cgroup2 mounted and cannot mount one: %s", strerror(errno));
		snprintf(root, sizeof(root), "%s", cg_mount);
	}
	return root;
}

/* A child that waits to be killed, moved into TOP/rel (made, with its parents). */
static void child_in_cgroup(const char *rel)
{
	char procs[sizeof(cg_leaf) + 16];
	FILE *f;

	snprintf(cg_top, sizeof(cg_top), "%s/heapbpf-test-workload-%d", cgroup2_root(), getpid());
	snprintf(cg_leaf, sizeof(cg_leaf), "%s/%s", cg_top, rel);
	hb_sh("mkdir -p '%s'", cg_leaf);
	child = fork();
	cr_assert_geq(child, 0);
	if (!child) {
		pause();
		_exit(0);
	}
	snprintf(procs, sizeof(procs), "%s/cgroup.procs", cg_leaf);
	f = fopen(procs, "we");
	cr_assert_not_null(f, "%s: %s", procs, strerror(errno));
	fprintf(f, "%d\n", child);
	cr_assert_eq(fclose(f), 0, "cannot move pid %d into %s", child, cg_leaf);
}

Test(workload_live, systemd_unit)
{
	struct workload w;

	child_in_cgroup("system.slice/redis-server.service");
	cr_assert_eq(workload_of(child, hb_tmpdir(), &w), 0);
	cr_assert(strstr(w.cgroup, "/system.slice/redis-server.service"), "%s", w.cgroup);
	cr_assert_str_eq(w.unit, "redis-server.service");
	cr_assert_str_eq(w.container_id, "");
	cr_assert_str_eq(w.service_name, "redis-server");
}

Test(workload_live, containerd_pod_container)
{
	const char *root = hb_tmpdir();
	struct pyro_label l[PYRO_MAX_LABELS];
	struct workload w;

	hb_sh("mkdir -p %s/var/log/pods/payments_ledger-5f7c9_" UID "/ledger %s/var/log/containers",
	      root, root);
	hb_sh("ln -s /var/log/pods/payments_ledger-5f7c9_" UID "/ledger/0.log "
	      "%s/var/log/containers/ledger-5f7c9_payments_ledger-" ID ".log",
	      root);
	child_in_cgroup("kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID_
			".slice/cri-containerd-" ID ".scope");
	cr_assert_eq(workload_of(child, root, &w), 0);
	cr_assert_str_eq(w.container_id, ID);
	cr_assert_str_eq(w.runtime, "containerd");
	cr_assert_str_eq(w.pod_uid, UID);
	cr_assert_str_eq(w.k8s_namespace, "payments");
	cr_assert_str_eq(w.pod, "ledger-5f7c9");
	cr_assert_str_eq(w.container, "ledger");
	cr_assert_str_eq(w.service_name, "payments/ledger");
	cr_assert_eq(workload_labels(&w, l, PYRO_MAX_LABELS), 4);
}

/* This process's own cgroup found in the live hierarchy is the one /proc/self/cgroup names. */
Test(workload_live, own_cgroup_found_in_the_hierarchy)
{
	char *text = NULL, *v2, base[4096];

	cr_assert_eq(workload_cgroup_base(cgroup2_root(), base, sizeof(base)), 0);
	cr_assert_gt(hb_read_file("/proc/self/cgroup", &text), 0);
	/* the cgroup2 line, "0::PATH", on a hybrid machine too */
	v2 = strstr(text, "0::/");
	cr_assert_not_null(v2, "%s", text);
	v2[strcspn(v2, "\n")] = '\0';
	cr_assert_str_eq(v2 + 3, base);
	free(text);
}
