// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <string.h>

#include "toggle.h"

int prof_toggle_validate(const struct jemalloc_target *t, uint64_t addr)
{
	if (addr < t->bias || !elf_object__vaddr_writable(t->elf, addr - t->bias, 1))
		return -EFAULT;
	return proc_maps__writable_in(t->maps, addr, t->path) ? 0 : -EFAULT;
}

int prof_toggle__read(const struct prof_toggle *tg, uint8_t *val)
{
	return proc_mem_read(tg->pid, tg->addr, val, 1);
}

int prof_toggle__on(struct prof_toggle *tg, const struct jemalloc_target *t,
		    prof_toggle_hook before_write, void *arg)
{
	uint8_t one = 1, v;
	int err;

	memset(tg, 0, sizeof(*tg));
	tg->pid = t->pid;
	tg->addr = t->active_addr;
	err = prof_toggle_validate(t, tg->addr);
	if (err)
		return err;
	err = prof_toggle__read(tg, &tg->orig);
	if (err)
		return err;
	/* a bool: anything else means the address is not what we think */
	if (tg->orig > 1)
		return -EILSEQ;
	if (tg->orig == 1)
		return 0; /* already active: leave it as the user set it */
	if (before_write) {
		err = before_write(arg, tg->addr, tg->orig);
		if (err)
			return err;
	}
	err = proc_mem_write(tg->pid, tg->addr, &one, 1);
	if (err)
		return err;
	tg->changed = true;
	err = prof_toggle__read(tg, &v);
	if (err)
		return err;
	return v == 1 ? 0 : -EIO;
}

int prof_toggle__restore(struct prof_toggle *tg)
{
	int err;

	if (!tg->changed)
		return 0;
	err = proc_mem_write(tg->pid, tg->addr, &tg->orig, 1);
	if (err)
		return err;
	tg->changed = false;
	return 0;
}
