// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* /proc/PID/maps parsing and process memory access, on lines and on ourselves. */
#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "symbols/proc.h"

static struct proc_map m;

static void free_map(void)
{
	free(m.path);
	m.path = NULL;
}

TestSuite(procmaps, .fini = free_map);

Test(procmaps, parse_file_backed)
{
	cr_assert_eq(proc_map_parse_line("55d0c1a00000-55d0c1a21000 r-xp 00002000 fd:01 1837245"
					 "                    /usr/bin/cat\n",
					 &m),
		     0);
	cr_assert_eq(m.start, 0x55d0c1a00000);
	cr_assert_eq(m.end, 0x55d0c1a21000);
	cr_assert_str_eq(m.perms, "r-xp");
	cr_assert_eq(m.offset, 0x2000);
	cr_assert_eq(m.dev_major, 0xfd);
	cr_assert_eq(m.dev_minor, 0x01);
	cr_assert_eq(m.inode, 1837245);
	cr_assert_str_eq(m.path, "/usr/bin/cat");
	cr_assert_not(m.deleted);
}

Test(procmaps, parse_without_newline_and_large_values)
{
	cr_assert_eq(
		proc_map_parse_line("ffffffffff600000-ffffffffff601000 --xp 7fffffffffff0000 "
				    "103:0a 18446744073709551615 /lib/x86_64-linux-gnu/libc.so.6",
				    &m),
		0);
	cr_assert_eq(m.start, 0xffffffffff600000);
	cr_assert_eq(m.end, 0xffffffffff601000);
	cr_assert_str_eq(m.perms, "--xp");
	cr_assert_eq(m.offset, 0x7fffffffffff0000);
	cr_assert_eq(m.dev_major, 0x103);
	cr_assert_eq(m.dev_minor, 0x0a);
	cr_assert_eq(m.inode, UINT64_MAX);
	cr_assert_str_eq(m.path, "/lib/x86_64-linux-gnu/libc.so.6");
}

Test(procmaps, parse_anonymous)
{
	/* the kernel ends anonymous lines with "0 " and a newline */
	cr_assert_eq(proc_map_parse_line("7f3a8c000000-7f3a8c021000 rw-p 00000000 00:00 0 \n", &m),
		     0);
	cr_assert_eq(m.start, 0x7f3a8c000000);
	cr_assert_eq(m.end, 0x7f3a8c021000);
	cr_assert_str_eq(m.perms, "rw-p");
	cr_assert_eq(m.inode, 0);
	cr_assert_null(m.path);
	cr_assert_not(m.deleted);

	/* and without the trailing space or newline */
	cr_assert_eq(proc_map_parse_line("7f3a8c000000-7f3a8c021000 ---p 00000000 00:00 0", &m), 0);
	cr_assert_str_eq(m.perms, "---p");
	cr_assert_null(m.path);
}

Test(procmaps, parse_pseudo_paths)
{
	cr_assert_eq(proc_map_parse_line("5581a2c4e000-5581a2c6f000 rw-p 00000000 00:00 0"
					 "                          [heap]\n",
					 &m),
		     0);
	cr_assert_str_eq(m.path, "[heap]");
	cr_assert_not(m.deleted);
	free_map();
	cr_assert_eq(proc_map_parse_line("7ffc0b1f2000-7ffc0b213000 rw-p 00000000 00:00 0"
					 "                          [stack]\n",
					 &m),
		     0);
	cr_assert_str_eq(m.path, "[stack]");
	cr_assert_eq(m.end - m.start, 0x21000);
	free_map();
	cr_assert_eq(proc_map_parse_line("7f0000001000-7f0000002000 rw-s 00000000 00:01 1234"
					 "                       /memfd:ring (deleted)\n",
					 &m),
		     0);
	cr_assert_str_eq(m.perms, "rw-s");
	cr_assert_str_eq(m.path, "/memfd:ring");
	cr_assert(m.deleted);
}

Test(procmaps, parse_path_with_spaces)
{
	cr_assert_eq(proc_map_parse_line("7f0000000000-7f0000001000 r--p 00000000 08:01 42"
					 "                         /opt/my app/lib  two.so\n",
					 &m),
		     0);
	cr_assert_str_eq(m.path, "/opt/my app/lib  two.so");
	cr_assert_not(m.deleted);
}

Test(procmaps, parse_deleted)
{
	cr_assert_eq(proc_map_parse_line("7f0000000000-7f0000001000 r-xp 00001000 08:01 42"
					 "                         /tmp/my lib.so (deleted)\n",
					 &m),
		     0);
	cr_assert_str_eq(m.path, "/tmp/my lib.so");
	cr_assert(m.deleted);
	cr_assert_eq(m.offset, 0x1000);
	free_map();
	/* "(deleted)" without the space is part of the name */
	cr_assert_eq(proc_map_parse_line("7f0000000000-7f0000001000 r-xp 00000000 08:01 42"
					 "                         /tmp/x(deleted)\n",
					 &m),
		     0);
	cr_assert_str_eq(m.path, "/tmp/x(deleted)");
	cr_assert_not(m.deleted);
}

Test(procmaps, parse_malformed)
{
	static const char *const bad[] = {
		"",
		"\n",
		"garbage",
		"7f0000000000 r-xp 00000000 08:01 42 /x\n",		 /* no end */
		"7f0000000000-7f0000001000\n",				 /* nothing after */
		"7f0000000000-7f0000001000 r-xp 00000000 08:01\n",	 /* no inode */
		"7f0000000000-7f0000001000 r-xp 00000000 0801 42 /x\n",	 /* dev without ':' */
		"7f0000000000-7f0000001000 r-xp zz 08:01 42 /x\n",	 /* offset not hex */
		"7f0000001000-7f0000001000 r-xp 00000000 08:01 42 /x\n", /* empty range */
		"7f0000002000-7f0000001000 r-xp 00000000 08:01 42 /x\n", /* end before start */
		"xyz-7f0000001000 r-xp 00000000 08:01 42 /x\n",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_assert_eq(proc_map_parse_line(bad[i], &m), -EINVAL, "line %zu: \"%s\"", i,
			     bad[i]);
		cr_assert_null(m.path);
	}
}

/* A function of this test binary, kept out of line. */
__attribute__((noinline)) static int here(int x)
{
	return x * 7 + 1;
}

static char *self_exe(void)
{
	char buf[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);

	cr_assert_gt(n, 0);
	buf[n] = '\0';
	return strdup(buf);
}

Test(procmaps, read_self)
{
	struct proc_maps *pm = NULL;
	const struct proc_map *f;
	uint64_t code = (uintptr_t)&here;
	int local = here(1);
	char *exe = self_exe();
	void *heap = malloc(64);

	cr_assert_eq(proc_maps__read(getpid(), &pm), 0);
	cr_assert_not_null(pm);
	cr_assert_eq(pm->pid, getpid());
	cr_assert_gt(pm->n, 3);
	/* sorted and non-overlapping, as the kernel writes them */
	for (size_t i = 0; i < pm->n; i++) {
		cr_assert_lt(pm->v[i].start, pm->v[i].end);
		if (i)
			cr_assert_leq(pm->v[i - 1].end, pm->v[i].start);
	}

	f = proc_maps__find(pm, code);
	cr_assert_not_null(f);
	cr_assert_leq(f->start, code);
	cr_assert_gt(f->end, code);
	cr_assert_eq(f->perms[2], 'x', "perms %s", f->perms);
	cr_assert_not_null(f->path);
	cr_assert_str_eq(f->path, exe);
	cr_assert_not(f->deleted);
	cr_assert_neq(f->inode, 0);
	/* the same mapping for the first and the last byte, none just past the end */
	cr_assert_eq(proc_maps__find(pm, f->start), f);
	cr_assert_eq(proc_maps__find(pm, f->end - 1), f);
	cr_assert_neq(proc_maps__find(pm, f->end), f);

	f = proc_maps__find(pm, (uintptr_t)&local);
	cr_assert_not_null(f);
	cr_assert_str_eq(f->perms, "rw-p");

	f = proc_maps__find(pm, (uintptr_t)heap);
	cr_assert_not_null(f);
	cr_assert_eq(strncmp(f->perms, "rw", 2), 0);

	cr_assert_null(proc_maps__find(pm, 0));
	cr_assert_null(proc_maps__find(pm, pm->v[0].start - 1));
	cr_assert_null(proc_maps__find(pm, UINT64_MAX));

	free(heap);
	free(exe);
	proc_maps__free(pm);
}

Test(procmaps, find_in_crafted_table)
{
	struct proc_map v[] = {
		{ .start = 0x1000, .end = 0x2000 },
		{ .start = 0x2000, .end = 0x3000 },
		{ .start = 0x5000, .end = 0x8000 },
	};
	struct proc_maps pm = { .pid = 1, .v = v, .n = 3 };

	cr_assert_null(proc_maps__find(&pm, 0xfff));
	cr_assert_eq(proc_maps__find(&pm, 0x1000), &v[0]);
	cr_assert_eq(proc_maps__find(&pm, 0x1fff), &v[0]);
	cr_assert_eq(proc_maps__find(&pm, 0x2000), &v[1]);
	cr_assert_null(proc_maps__find(&pm, 0x3000));
	cr_assert_null(proc_maps__find(&pm, 0x4fff));
	cr_assert_eq(proc_maps__find(&pm, 0x7fff), &v[2]);
	cr_assert_null(proc_maps__find(&pm, 0x8000));
	pm.n = 0;
	cr_assert_null(proc_maps__find(&pm, 0x1000));
}

static pid_t dead_pid(void)
{
	pid_t pid = fork();
	int status;

	cr_assert_geq(pid, 0);
	if (pid == 0)
		_exit(0);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	return pid;
}

Test(procmaps, read_missing_process)
{
	struct proc_maps *pm = NULL;

	cr_assert_eq(proc_maps__read(dead_pid(), &pm), -ESRCH);
	cr_assert_null(pm);
	cr_assert_eq(proc_maps__read(INT_MAX, &pm), -ESRCH);
	cr_assert_null(pm);
	cr_assert_not(proc_alive(dead_pid()));
	cr_assert(proc_alive(getpid()));
}

/*
 * proc_gone: a process that exited (reaped) or whose pid another process
 * has is gone; a zombie is not, nor one whose /proc file cannot be read now
 * (out of file descriptors): a living child taken as gone would be left
 * out of the restore at the end, its flag on.
 */
Test(procmaps, gone_only_when_known_gone)
{
	uint64_t start = proc_start_time(getpid());
	struct rlimit lim = { 32, 32 };
	int fds[64], nfds = 0, fd;
	siginfo_t si;
	pid_t pid;

	cr_assert_neq(start, 0);
	cr_assert_not(proc_gone(getpid(), start));
	cr_assert(proc_gone(getpid(), start + 1), "another process under the pid");
	cr_assert(proc_gone(dead_pid(), start));

	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0)
		_exit(0);
	start = proc_start_time(pid);
	cr_assert_neq(start, 0);
	/* exited, not reaped: a zombie, its pid still its own */
	cr_assert_eq(waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT), 0);
	cr_assert_not(proc_gone(pid, start), "a zombie is not gone");
	cr_assert_eq(waitpid(pid, NULL, 0), pid);
	cr_assert(proc_gone(pid, start));

	/* no file descriptor left: not known, so not gone */
	start = proc_start_time(getpid());
	cr_assert_eq(setrlimit(RLIMIT_NOFILE, &lim), 0);
	while (nfds < 64 && (fd = dup(0)) >= 0)
		fds[nfds++] = fd;
	cr_assert_eq(errno, EMFILE);
	cr_assert_not(proc_gone(getpid(), start + 1));
	cr_assert_eq(proc_start_time(getpid()), 0);
	while (nfds)
		close(fds[--nfds]);
	cr_assert(proc_gone(getpid(), start + 1));
}

static volatile uint64_t target_var = 0x1122334455667788ULL;
static const char ro_bytes[16] = "read-only bytes";

Test(procmaps, mem_read_write_self)
{
	uint64_t v = 0, w = 0xdeadbeefcafef00dULL;
	char buf[16];

	cr_assert_eq(proc_mem_read(getpid(), (uintptr_t)&target_var, &v, sizeof(v)), 0);
	cr_assert_eq(v, 0x1122334455667788ULL);
	cr_assert_eq(proc_mem_write(getpid(), (uintptr_t)&target_var, &w, sizeof(w)), 0);
	cr_assert_eq(target_var, 0xdeadbeefcafef00dULL);
	v = 0;
	cr_assert_eq(proc_mem_read(getpid(), (uintptr_t)&target_var, &v, sizeof(v)), 0);
	cr_assert_eq(v, w);
	/* one byte in the middle */
	w = 0x42;
	cr_assert_eq(proc_mem_write(getpid(), (uintptr_t)&target_var + 2, &w, 1), 0);
	cr_assert_eq(target_var, 0xdeadbeefca42f00dULL);

	cr_assert_eq(proc_mem_read(getpid(), (uintptr_t)ro_bytes, buf, sizeof(buf)), 0);
	cr_assert_arr_eq(buf, ro_bytes, sizeof(buf));
}

Test(procmaps, mem_errors)
{
	uint64_t v = 0;

	/* nothing is mapped at page 0 */
	cr_assert_lt(proc_mem_read(getpid(), 8, &v, sizeof(v)), 0);
	cr_assert_lt(proc_mem_write(getpid(), 8, &v, sizeof(v)), 0);
	/* a read-only page */
	cr_assert_lt(proc_mem_write(getpid(), (uintptr_t)ro_bytes, &v, sizeof(v)), 0);
	cr_assert_str_eq(ro_bytes, "read-only bytes");
	/* a process that is gone */
	cr_assert_eq(proc_mem_read(dead_pid(), (uintptr_t)&target_var, &v, sizeof(v)), -ESRCH);
}

Test(procmaps, open_path)
{
	char buf[64];

	cr_assert_eq(proc_map_open_path(1234, "/usr/lib/libjemalloc.so.2", buf, sizeof(buf)), 0);
	cr_assert_str_eq(buf, "/proc/1234/root/usr/lib/libjemalloc.so.2");
	cr_assert_eq(proc_map_open_path(1234, "[heap]", buf, sizeof(buf)), -EINVAL);
	cr_assert_eq(proc_map_open_path(1234, NULL, buf, sizeof(buf)), -EINVAL);
	cr_assert_eq(proc_map_open_path(1234, "/usr/lib/libjemalloc.so.2", buf, 20), -ENAMETOOLONG);
}

Test(procmaps, comm)
{
	char buf[32], want[32] = "";
	FILE *f = fopen("/proc/self/comm", "r");

	cr_assert_not_null(f);
	cr_assert_not_null(fgets(want, sizeof(want), f));
	fclose(f);
	want[strcspn(want, "\n")] = '\0';
	proc_comm(getpid(), buf, sizeof(buf));
	cr_assert_str_eq(buf, want);
	proc_comm(dead_pid(), buf, sizeof(buf));
	cr_assert_str_eq(buf, "?");
}

/*
 * The file a mapping maps, and only it: our own executable's first mapping
 * opens as that file; the same mapping said to hold another inode (what a
 * file replaced since, or a link planted at its path, leads to) is refused
 * with -ESTALE, never opened as something else.
 */
Test(procmaps, open_is_the_mapped_file)
{
	struct proc_maps *maps = NULL;
	struct proc_map e = { 0 };
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	struct stat st;
	int fd;

	cr_assert_gt(n, 0);
	exe[n] = '\0';
	cr_assert_eq(proc_maps__read(getpid(), &maps), 0);
	/* the executable's first mapping (a sanitized build maps its shadow first) */
	for (size_t i = 0; i < maps->n && !e.path; i++) {
		if (maps->v[i].path && strcmp(maps->v[i].path, exe) == 0)
			e = maps->v[i];
	}
	if (!e.path)
		proc_maps__free(maps);
	cr_assert_not_null(e.path, "%s is not in our own maps", exe);
	fd = proc_map_open(getpid(), &e);
	cr_assert_geq(fd, 0, "%s: %s", e.path, strerror(-fd));
	cr_assert(proc_map_is(&e, fd));
	cr_assert_eq(fstat(fd, &st), 0);
	cr_assert_eq(st.st_ino, e.inode);
	close(fd);
	e.inode++;
	cr_assert_eq(proc_map_open(getpid(), &e), -ESTALE);
	e.inode--;
	e.dev_minor++;
	cr_assert_eq(proc_map_open(getpid(), &e), -ESTALE);
	proc_maps__free(maps);
}
