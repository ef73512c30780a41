// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/hooks.h"
#include "sampling/toggle.h"

int toggle_validate(const struct jemalloc_target *t, uint64_t addr)
{
	if (addr < t->bias || !elfobj__vaddr_writable(t->elf, addr - t->bias, 1))
		return -EFAULT;
	return proc_maps__writable_in(t->maps, addr, t->path) ? 0 : -EFAULT;
}

/* The image addr lies in: maps's file mapping there, with the image's AT_RANDOM bytes. */
static int home_of(const struct proc_maps *maps, uint64_t addr, const uint8_t *random,
		   uint64_t started, struct prof_toggle_home *h)
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
	h->started = started;
	memcpy(h->random, random, sizeof(h->random));
	return 0;
}

/*
 * pid's memory, for writing: the descriptor stays bound to the process that
 * had the pid when it was opened, whatever takes the pid later.
 */
static int open_mem(pid_t pid)
{
	char path[64];
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/mem", pid);
	fd = open(path, O_RDWR | O_CLOEXEC);
	return fd >= 0 ? fd : errno == ENOENT ? -ESRCH : -errno;
}

/*
 * The memory of tg's process (a descriptor), when its flag still lies in the
 * image it was found in: -ESTALE after an exec, or when the pid is another
 * process's now. The identity is read after the descriptor is opened: if it
 * matches, the process the descriptor is bound to is the one found.
 */
static int same_image(const struct prof_toggle *tg)
{
	struct prof_toggle_home now;
	struct proc_maps *maps = NULL;
	uint8_t random[PROC_EXEC_RANDOM];
	uint64_t started;
	int rc, fd = open_mem(tg->pid);

	if (fd < 0)
		return fd;
	/* before the maps, as at discovery: an exec in between reads as one */
	started = proc_start_time(tg->pid);
	rc = proc_exec_random(tg->pid, random);
	rc = rc ?: proc_maps__read(tg->pid, &maps);
	/* a zombie's maps read empty: it exited */
	rc = rc ?: maps->n ? 0 : -ESRCH;
	rc = rc ?: home_of(maps, tg->addr, random, started, &now);
	proc_maps__free(maps);
	rc = rc ?: memcmp(&now, &tg->home, sizeof(now)) ? -ESTALE : 0;
	if (rc) {
		close(fd);
		return rc;
	}
	return fd;
}

/* One byte written through the memory descriptor same_image gave (closed). */
static int write_byte(int fd, uint64_t addr, uint8_t v)
{
	ssize_t n = pwrite(fd, &v, 1, (off_t)addr);
	int err = n < 0 ? -errno : 0;

	close(fd);
	/* nothing written: the process has no memory any more, it exited since it was opened */
	if (n == 0)
		return -ESRCH;
	/* the address is not mapped (what process_vm_writev says as EFAULT) */
	return err == -EIO ? -EFAULT : err;
}

/*
 * HEAPBPF_TEST_FLAG_PAUSE=DIR, for the tests alone: right before a flag is
 * written, the pid is written into the FIFO DIR/reached (waiting for the
 * test to read it) and DIR/go is read to its end (until the test closes
 * it), so that a test acts at the moment heapbpf writes, a process found
 * long before.
 */
static void test_pause(pid_t pid)
{
	const char *dir = hb_hook(HB_HOOK_FLAG_PAUSE);
	char path[4096], buf[64];
	int fd;

	if (!dir || !dir[0])
		return;
	snprintf(path, sizeof(path), "%s/reached", dir);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd >= 0) {
		dprintf(fd, "%d\n", pid);
		close(fd);
	}
	snprintf(path, sizeof(path), "%s/go", dir);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	while (fd >= 0 && read(fd, buf, sizeof(buf)) > 0)
		;
	if (fd >= 0)
		close(fd);
}

int toggle__init(struct prof_toggle *tg, const struct jemalloc_target *t)
{
	memset(tg, 0, sizeof(*tg));
	tg->pid = t->pid;
	tg->addr = t->active_addr;
	return home_of(t->maps, tg->addr, t->exec_random, t->started, &tg->home);
}

int toggle__read(const struct prof_toggle *tg, uint8_t *val)
{
	return proc_mem_read(tg->pid, tg->addr, val, 1);
}

int toggle__on(struct prof_toggle *tg, const struct jemalloc_target *t,
	       prof_toggle_hook before_write, void *arg)
{
	uint8_t one = 1, v;
	int err = toggle__init(tg, t), bad = toggle_validate(t, tg->addr);

	/* the address's own fault first: it says more than the image's */
	if (bad || err)
		return bad ? bad : err;
	err = toggle__read(tg, &tg->orig);
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
	test_pause(tg->pid);
	err = same_image(tg);
	err = err < 0 ? err : write_byte(err, tg->addr, one);
	if (err)
		return err;
	tg->changed = true;
	err = toggle__read(tg, &v);
	if (err)
		return err;
	return v == 1 ? 0 : -EIO;
}

int toggle__restore(struct prof_toggle *tg)
{
	int err;

	if (!tg->changed)
		return 0;
	err = same_image(tg);
	if (err == -ESTALE)
		tg->changed = false; /* its flag went with the old image: nothing is owed */
	err = err < 0 ? err : write_byte(err, tg->addr, tg->orig);
	if (err)
		return err;
	tg->changed = false;
	return 0;
}
