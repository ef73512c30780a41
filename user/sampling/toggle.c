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

/* The image addr lies in: maps's file mapping there, with the image's AT_RANDOM bytes. */
static int home_of(const struct proc_maps *maps, uint64_t addr, const uint8_t *random,
		   struct prof_toggle_home *h)
{
	const struct proc_map *e = proc_maps__find(maps, addr);

	memset(h, 0, sizeof(*h));
	/* the .bss past the object's last file page: that file page's mapping */
	if (e && !e->path)
		e = e > maps->v && e[-1].end == e->start && e[-1].path ? &e[-1] : NULL;
	if (!e)
		return -ESTALE;
	h->start = e->start;
	h->inode = e->inode;
	h->dev_major = e->dev_major;
	h->dev_minor = e->dev_minor;
	memcpy(h->random, random, sizeof(h->random));
	return 0;
}

/* 0 when tg's flag still lies in the image it was found in; -ESTALE after an exec. */
static int same_image(const struct prof_toggle *tg)
{
	struct prof_toggle_home now;
	struct proc_maps *maps = NULL;
	uint8_t random[PROC_EXEC_RANDOM];
	int rc;

	/* before the maps, as at discovery: an exec in between reads as one */
	rc = proc_exec_random(tg->pid, random);
	rc = rc ?: proc_maps__read(tg->pid, &maps);
	if (rc)
		return rc;
	/* a zombie's maps read empty: it exited */
	rc = maps->n ? 0 : -ESRCH;
	rc = rc ?: home_of(maps, tg->addr, random, &now);
	proc_maps__free(maps);
	if (rc)
		return rc;
	return memcmp(&now, &tg->home, sizeof(now)) ? -ESTALE : 0;
}

int prof_toggle__init(struct prof_toggle *tg, const struct jemalloc_target *t)
{
	memset(tg, 0, sizeof(*tg));
	tg->pid = t->pid;
	tg->addr = t->active_addr;
	return home_of(t->maps, tg->addr, t->exec_random, &tg->home);
}

int prof_toggle__read(const struct prof_toggle *tg, uint8_t *val)
{
	return proc_mem_read(tg->pid, tg->addr, val, 1);
}

int prof_toggle__on(struct prof_toggle *tg, const struct jemalloc_target *t,
		    prof_toggle_hook before_write, void *arg)
{
	uint8_t one = 1, v;
	int err = prof_toggle__init(tg, t), bad = prof_toggle_validate(t, tg->addr);

	/* the address's own fault first: it says more than the image's */
	if (bad || err)
		return bad ? bad : err;
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
	err = same_image(tg);
	err = err ?: proc_mem_write(tg->pid, tg->addr, &one, 1);
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
	err = same_image(tg);
	if (err == -ESTALE)
		tg->changed = false; /* its flag went with the old image: nothing is owed */
	err = err ?: proc_mem_write(tg->pid, tg->addr, &tg->orig, 1);
	if (err)
		return err;
	tg->changed = false;
	return 0;
}
