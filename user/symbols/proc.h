/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* /proc/PID/maps snapshots and reads/writes of another process's memory. */
#ifndef __HEAPBPF_PROCMAPS_H
#define __HEAPBPF_PROCMAPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct proc_map {
	uint64_t start, end, offset, inode;
	unsigned int dev_major, dev_minor;
	char perms[5]; /* "r-xp" */
	char *path;    /* NULL for anonymous mappings; "[heap]" etc. kept as is */
	bool deleted;  /* the path ended in " (deleted)" (stripped from path) */
};

struct proc_maps {
	pid_t pid;
	struct proc_map *v;
	size_t n;
};

/* Parses one line of /proc/PID/maps into *m (m->path allocated); -EINVAL if malformed. */
int proc_map_parse_line(const char *line, struct proc_map *m);

/* Reads /proc/PID/maps; -ESRCH when the process does not exist. */
int proc_maps__read(pid_t pid, struct proc_maps **out);
void proc_maps__free(struct proc_maps *m);

/* The mapping containing addr, or NULL. */
const struct proc_map *proc_maps__find(const struct proc_maps *m, uint64_t addr);

/*
 * True when addr lies in a writable mapping of the object at path, or in the
 * anonymous mapping right after one (.bss past the object's last file page).
 */
bool proc_maps__writable_in(const struct proc_maps *m, uint64_t addr, const char *path);

/* Path to open the object of a mapping from our mount namespace: /proc/PID/root/<path>. */
int proc_map_open_path(pid_t pid, const char *path, char *buf, size_t len);

/* True when fd is the file m maps: its inode and device (any device on btrfs). */
bool proc_map_is(const struct proc_map *m, int fd);

/*
 * The file mapping m of pid maps, opened read-only (files_open_regular_ro): through
 * /proc/PID/map_files, else by its path inside pid's root, else, pid gone,
 * by its path here; each checked with proc_map_is. The descriptor, or
 * -errno: -ESTALE when the way there leads to another file (a link planted
 * in the process's tree, a file replaced since it was mapped).
 */
int proc_map_open(pid_t pid, const struct proc_map *m);

/* process_vm_readv/process_vm_writev of exactly len bytes; negative errno otherwise. */
int proc_mem_read(pid_t pid, uint64_t addr, void *buf, size_t len);
int proc_mem_write(pid_t pid, uint64_t addr, const void *buf, size_t len);

/*
 * The 16 random bytes the kernel put on pid's stack at its last exec (auxv
 * AT_RANDOM): new at every exec, ASLR or not, so they tell program images of
 * one pid apart. -ESRCH when pid is gone (or a zombie).
 */
#define PROC_EXEC_RANDOM 16
int proc_exec_random(pid_t pid, uint8_t *out);

/* True when pid exists (kill(pid, 0) semantics, ESRCH = gone). */
bool proc_alive(pid_t pid);

/* The command name of pid (from /proc/PID/comm) into buf; "?" when unknown. */
void proc_comm(pid_t pid, char *buf, size_t len);

/* The start time of pid (clock ticks after boot, /proc/PID/stat field 22); 0 if unknown. */
uint64_t proc_start_time(pid_t pid);
/*
 * True when the process started at start (proc_start_time) is gone: pid
 * exited (a zombie is not gone) or is another process's now. False when
 * it is still there, or when that cannot be told (out of file descriptors).
 */
bool proc_gone(pid_t pid, uint64_t start);

#endif /* __HEAPBPF_PROCMAPS_H */
