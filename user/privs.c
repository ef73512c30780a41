// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "privs.h"

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
