// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * privs_check_kernel(): what it asks of the kernel and what it says when a
 * feature is missing. A fake /sys (HEAPBPF_SYSFS) takes the uprobe PMU
 * away; a seccomp filter makes bpf() fail as an old or BPF-less kernel
 * would. Criterion runs each test in its own process, so neither leaks.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include "harness.h"
#include "sampling/privs.h"

/* A fake /sys under the test's temporary directory, with the uprobe PMU or without. */
static void fake_sysfs(bool uprobe_pmu)
{
	char sys[PATH_MAX], cmd[2 * PATH_MAX];

	snprintf(sys, sizeof(sys), "%s/sys", hb_tmpdir());
	snprintf(cmd, sizeof(cmd), "mkdir -p '%s'%s", sys,
		 uprobe_pmu ? "/bus/event_source/devices/uprobe" : "");
	cr_assert_eq(system(cmd), 0);
	cr_assert_eq(setenv("HEAPBPF_SYSFS", sys, 1), 0);
}

/* From here on every bpf() system call of this process fails with errno e. */
static void bpf_fails_with(int e)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_bpf, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (e & SECCOMP_RET_DATA)),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]), .filter = f };

	cr_assert_eq(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0, "%s", strerror(errno));
	cr_assert_eq(prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog), 0, "%s", strerror(errno));
}

static void check_fails(int want_rc, const char *want_msg)
{
	char err[512] = "";
	int rc = privs_check_kernel(err, sizeof(err));

	hb_tmpdir_cleanup();
	cr_assert_eq(rc, want_rc, "rc %d (%s)", rc, err);
	cr_assert(strstr(err, want_msg), "message: %s", err);
	cr_assert_null(strchr(err, '\n'), "one line: %s", err);
}

Test(privs, no_uprobe_pmu)
{
	fake_sysfs(false);
	check_fails(-ENOTSUP, "has no uprobes (");
}

Test(privs, no_bpf_syscall)
{
	fake_sysfs(true);
	bpf_fails_with(ENOSYS);
	check_fails(-ENOTSUP, "has no bpf() system call; heapbpf needs a kernel built with "
			      "CONFIG_BPF_SYSCALL");
}

/* A kernel before 5.8 answers EINVAL to a map type it does not know. */
Test(privs, no_ringbuf_map_type)
{
	fake_sysfs(true);
	bpf_fails_with(EINVAL);
	check_fails(-ENOTSUP, "has no BPF ring buffer");
}

Test(privs, bpf_refused)
{
	fake_sysfs(true);
	bpf_fails_with(EPERM);
	check_fails(-EPERM, "refused to create a BPF ring buffer (Operation not permitted)");
}

/* This kernel has everything, and BTF is not asked for: the fake /sys holds only the PMU. */
Test(privs, kernel_has_everything_without_btf)
{
	char err[512] = "";
	int rc;

	hb_require_bpf();
	fake_sysfs(true);
	rc = privs_check_kernel(err, sizeof(err));
	hb_tmpdir_cleanup();
	cr_assert_eq(rc, 0, "rc %d (%s)", rc, err);
}
