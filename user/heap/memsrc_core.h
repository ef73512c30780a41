/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * An ELF core file (the kernel's, or gdb's gcore) as a read-only memory
 * image: its PT_LOAD segments (bytes past p_filesz are not in the file and
 * read as -EFAULT), the NT_FILE note (which file is mapped where), the
 * process's pid (NT_PRPSINFO, NT_PRSTATUS) and name (the path NT_AUXV's
 * AT_EXECFN points to, else NT_PRPSINFO's pr_fname). Every offset
 * and count in the file is bounds-checked: a truncated or hostile core gives
 * a one-sentence error, never a crash. x86-64 or arm64 (ELFCLASS64, little-endian).
 * docs/cores.md has the format facts this relies on.
 */
#ifndef __HEAPBPF_MEMSRC_CORE_H
#define __HEAPBPF_MEMSRC_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <linux/types.h>

#include "jemalloc/memsrc.h"
#include "symbols/proc.h"

/* One PT_LOAD of the core: [vaddr, vaddr + memsz) in memory, filesz bytes of it in the file. */
struct core_segment {
	uint64_t vaddr, memsz, filesz, offset;
	uint32_t flags; /* PF_R, PF_W, PF_X */
};

/* One NT_FILE entry: the file at path mapped at [start, end) from byte offset. */
struct core_mapping {
	uint64_t start, end, offset;
	char *path;
	bool deleted; /* the kernel's " (deleted)" suffix, stripped from path */
};

struct core_file {
	char *path;
	const uint8_t *img; /* the whole file, mapped read-only */
	size_t size;
	struct core_segment *segs; /* sorted by vaddr, non-overlapping */
	size_t nsegs;
	struct core_mapping *maps; /* in the note's order (by address) */
	size_t nmaps;
	pid_t pid;	 /* the process (NT_PRPSINFO, else the first NT_PRSTATUS); 0: unknown */
	char comm[17];	 /* AT_EXECFN's base name (15 bytes, as comm), else pr_fname; "?" */
	uint64_t execfn; /* AT_EXECFN: where the path it was executed as is; 0: unknown */
	unsigned int threads; /* NT_PRSTATUS notes */
};

/* 1 when path is an ELF file of type ET_CORE, 0 when it is something else, or negative errno. */
int memsrc_core_is_core(const char *path);

/* Opens and indexes a core file; on failure a one-sentence reason in err. */
int memsrc_core__open(const char *path, struct core_file **out, char *err, size_t errlen);
void memsrc_core__free(struct core_file *c);

/* Exactly len bytes at addr: 0, or -EFAULT when any of them is not in the file. */
int memsrc_core__read(const struct core_file *c, uint64_t addr, void *buf, size_t len);
/* True when all of [addr, addr + len) is in the file. */
bool memsrc_core__mapped(const struct core_file *c, uint64_t addr, size_t len);
/* The core as the live-heap reader's memory source (valid while c lives). */
struct mem_source memsrc_core__mem_source(struct core_file *c);

/*
 * The NT_FILE mappings as a /proc/PID/maps snapshot (for finding jemalloc
 * and for the offline symbolizer). Permissions come from the PT_LOAD that
 * covers the mapping; a mapping no PT_LOAD covers (gdb writes no segment
 * for what it does not dump, and it does not dump code) is taken as "r-xp".
 */
int memsrc_core__proc_maps(const struct core_file *c, struct proc_maps **out);

/*
 * The build-id (hex) of the object mapped from path, read from its ELF
 * header page in the core (the first mapping of path, at file offset 0):
 * 0, -ENOENT when the core does not hold that page or it has no build-id
 * note, -EINVAL when the page is not a sane ELF header.
 */
int memsrc_core__build_id(const struct core_file *c, const char *path, char *hex, size_t len);

#endif /* __HEAPBPF_MEMSRC_CORE_H */
