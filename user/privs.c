// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "privs.h"

/* $HEAPBPF_SYSFS (tests) or /sys: where the kernel's features are looked up. */
static const char *sysfs(void)
{
	const char *s = getenv("HEAPBPF_SYSFS");

	return s && s[0] ? s : "/sys";
}

static bool sysfs_has(const char *rel)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", sysfs(), rel);
	return access(path, F_OK) == 0;
}

int privs_check(char *err, size_t errlen)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[2] = {};
	const char *missing = NULL;
	uint64_t eff;

	if (syscall(SYS_capget, &hdr, data))
		return -errno;
	eff = (uint64_t)data[0].effective | (uint64_t)data[1].effective << 32;
#define HAS(c) (eff & (1ULL << (c)))
	if (!HAS(CAP_BPF) && !HAS(CAP_SYS_ADMIN))
		missing = "CAP_BPF (to load its BPF programs)";
	else if (!HAS(CAP_SYS_ADMIN))
		/* measured on 6.18: with CAP_BPF and CAP_PERFMON, perf_event_open of a uprobe is EACCES */
		missing = "CAP_SYS_ADMIN (the kernel creates uprobe perf events only for it)";
	else if (!HAS(CAP_SYS_PTRACE))
		missing = "CAP_SYS_PTRACE (to read and write the target's memory)";
#undef HAS
	if (missing) {
		snprintf(err, errlen, "heapbpf lacks %s; run it as root (sudo heapbpf ...)",
			 missing);
		return -EPERM;
	}
	if (!sysfs_has("kernel/btf/vmlinux")) {
		snprintf(
			err, errlen,
			"this kernel has no BTF (%s/kernel/btf/vmlinux is missing); heapbpf needs a "
			"kernel built with CONFIG_DEBUG_INFO_BTF",
			sysfs());
		return -ENOTSUP;
	}
	if (!sysfs_has("bus/event_source/devices/uprobe")) {
		snprintf(err, errlen,
			 "this kernel has no uprobes (%s/bus/event_source/devices/uprobe is "
			 "missing); heapbpf needs CONFIG_UPROBE_EVENTS",
			 sysfs());
		return -ENOTSUP;
	}
	return 0;
}

uint64_t privs_kept_mask(void)
{
	return (1ULL << CAP_SYS_PTRACE) | (1ULL << CAP_DAC_OVERRIDE) |
	       (1ULL << CAP_DAC_READ_SEARCH);
}

int privs_drop_after_attach(void)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[2] = {};
	uint64_t keep = privs_kept_mask();

	if (syscall(SYS_capget, &hdr, data))
		return -errno;
	/* never gain what we did not have: intersect with the current permitted set */
	keep &= (uint64_t)data[0].permitted | (uint64_t)data[1].permitted << 32;
	data[0].effective = data[0].permitted = (uint32_t)keep;
	data[1].effective = data[1].permitted = (uint32_t)(keep >> 32);
	data[0].inheritable = data[1].inheritable = 0;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return -errno;
	if (syscall(SYS_capset, &hdr, data))
		return -errno;
	return 0;
}
