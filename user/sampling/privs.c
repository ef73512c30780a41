// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/hooks.h"
#include "util/errmsg.h"
#include "sampling/privs.h"

/* $HEAPBPF_SYSFS (tests) or /sys: where the kernel's features are looked up. */
static const char *sysfs(void)
{
	const char *s = hb_hook(HB_HOOK_SYSFS);

	return s ? s : "/sys";
}

static bool sysfs_has(const char *rel)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", sysfs(), rel);
	return access(path, F_OK) == 0;
}

int privs_check_kernel(char *err, size_t errlen)
{
	long page = sysconf(_SC_PAGESIZE);
	int fd, e;

	/*
	 * libbpf attaches uprobes through the uprobe PMU's perf events (a
	 * kernel with CONFIG_UPROBE_EVENTS registers it, since Linux 4.17).
	 */
	if (!sysfs_has("bus/event_source/devices/uprobe"))
		return hb_fail(err, errlen, -ENOTSUP,
			       "this kernel has no uprobes (%s/bus/event_source/devices/uprobe is "
			       "missing); heapbpf needs CONFIG_UPROBE_EVENTS",
			       sysfs());
	/*
	 * The one map type heapbpf needs that an older kernel lacks (Linux 5.8);
	 * creating one also proves the bpf() system call works. BTF is not
	 * needed: the programs carry no CO-RE relocations.
	 */
	fd = bpf_map_create(BPF_MAP_TYPE_RINGBUF, NULL, 0, 0, page > 0 ? page : 4096, NULL);
	if (fd >= 0) {
		close(fd);
		return 0;
	}
	e = errno;
	if (e == ENOSYS)
		return hb_fail(err, errlen, -ENOTSUP,
			       "this kernel has no bpf() system call; heapbpf needs a kernel built "
			       "with CONFIG_BPF_SYSCALL");
	if (e == EINVAL)
		return hb_fail(err, errlen, -ENOTSUP,
			       "this kernel has no BPF ring buffer (it refused a "
			       "BPF_MAP_TYPE_RINGBUF map); heapbpf needs Linux 5.8 or later");
	return hb_fail(err, errlen, -e, "the kernel refused to create a BPF ring buffer (%s)",
		       strerror(e));
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
	if (missing)
		return hb_fail(err, errlen, -EPERM,
			       "heapbpf lacks %s; run it as root (sudo heapbpf ...)", missing);
	return privs_check_kernel(err, errlen);
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
