// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The physical floor: an empty BPF program on a uprobe. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

SEC("uprobe")
int trapfloor_empty(void *ctx)
{
	return 0;
}
