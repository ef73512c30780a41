// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdlib.h>

#include "util/hooks.h"

static const char *const names[HB_HOOK_COUNT] = {
	[HB_HOOK_STATE_DIR] = "HEAPBPF_STATE_DIR",
	[HB_HOOK_SYSFS] = "HEAPBPF_SYSFS",
	[HB_HOOK_FAULT_INJECT] = "HEAPBPF_FAULT_INJECT",
	[HB_HOOK_FLAG_PAUSE] = "HEAPBPF_TEST_FLAG_PAUSE",
	[HB_HOOK_BENCH_PARTS] = "HEAPBPF_BENCH_PARTS",
	[HB_HOOK_AGENT_CPU] = "HEAPBPF_TEST_AGENT_CPU_MS",
};

const char *hb_hook_name(enum hb_hook h)
{
	return names[h];
}

const char *hb_hook(enum hb_hook h)
{
	const char *v = getenv(names[h]);

	return v && v[0] ? v : NULL;
}
