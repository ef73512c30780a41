// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The live process as a read-only memory image (memsrc.h): reads through
 * process_vm_readv, never a write; mapped() against a snapshot of
 * /proc/PID/maps, taken again (a bounded number of times) when an address
 * falls outside it, since the process keeps mapping memory while it runs.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "errmsg.h"
#include "liveheap.h"
#include "procmaps.h"

/* Fresh snapshots of the mappings one source may take after the first. */
#define MAX_REREADS 64

struct memsrc_proc {
	pid_t pid;
	struct proc_maps *maps;
	unsigned int rereads;
};

static int proc_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	const struct memsrc_proc *p = ctx;

	return proc_mem_read(p->pid, addr, buf, len);
}

/* [addr, addr + len) inside readable mappings of the snapshot (contiguous ones chain). */
static bool covered(const struct proc_maps *m, uint64_t addr, size_t len)
{
	uint64_t end = addr + len;

	if (end < addr)
		return false;
	while (addr < end) {
		const struct proc_map *pm = proc_maps__find(m, addr);

		if (!pm || pm->perms[0] != 'r')
			return false;
		addr = pm->end;
	}
	return true;
}

static bool proc_mapped(void *ctx, uint64_t addr, size_t len)
{
	struct memsrc_proc *p = ctx;
	struct proc_maps *fresh;

	if (covered(p->maps, addr, len))
		return true;
	if (p->rereads >= MAX_REREADS || proc_maps__read(p->pid, &fresh))
		return false;
	p->rereads++;
	proc_maps__free(p->maps);
	p->maps = fresh;
	return covered(p->maps, addr, len);
}

int memsrc_proc_open(pid_t pid, struct mem_source *out, char *err, size_t errlen)
{
	struct memsrc_proc *p = calloc(1, sizeof(*p));
	int rc;

	if (!p)
		return hb_fail(err, errlen, -ENOMEM, "out of memory");
	p->pid = pid;
	rc = proc_maps__read(pid, &p->maps);
	if (rc) {
		free(p);
		return hb_fail(err, errlen, rc, "cannot read the mappings of pid %d: %s", pid,
			       strerror(-rc));
	}
	*out = (struct mem_source){ .read = proc_read, .mapped = proc_mapped, .ctx = p };
	return 0;
}

void memsrc_proc_close(struct mem_source *m)
{
	struct memsrc_proc *p = m->ctx;

	if (!p)
		return;
	proc_maps__free(p->maps);
	free(p);
	m->ctx = NULL;
}
