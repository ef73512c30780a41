/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What a jemalloc found in a process is (target.h finds it): its object,
 * version, layout, prefixes and addresses. Apart from target.h so that the
 * finder (find.c), which target.c calls, names the target without calling
 * back up.
 */
#ifndef __HEAPBPF_TARGET_TYPES_H
#define __HEAPBPF_TARGET_TYPES_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "symbols/elfobj.h"
#include "jemalloc/layout.h"
#include "jemalloc/memsrc.h"
#include "symbols/proc.h"

struct jemalloc_target {
	pid_t pid;
	int obj_fd; /* open_path's descriptor, a live pid's object; -1: none */
	char comm[32];
	struct proc_maps *maps; /* snapshot taken at discovery */
	uint64_t started; /* the process's start time (proc_start_time), read first; 0: unknown */
	/* the image's auxv AT_RANDOM bytes, read right before maps (toggle.h); zeros: unknown */
	uint8_t exec_random[PROC_EXEC_RANDOM];
	char *path; /* the object's path inside the target's mount namespace */
	/*
	 * The same object as we open it: a live pid's mapped file, held open as
	 * obj_fd (proc_map_open) and named /proc/self/fd/N; a core's, its path.
	 */
	char *open_path;
	struct elf_object *elf;	   /* the mapped object: segments, version string */
	struct elf_object *symelf; /* where its full symbol table is: elf, or its debug file */
	char *debug_file;	   /* separate debug info used for symbols, or NULL */
	bool is_main_exe;	   /* jemalloc linked into the executable */
	char version[96];
	const struct jemalloc_layout *layout; /* &layout_buf */
	struct jemalloc_layout layout_buf;    /* the table's entry, adjusted for a debug build */
	bool layout_forced;		      /* --jemalloc-layout chose it */
	bool debug_build;		      /* --enable-debug jemalloc */
	bool dwarf_checked;		      /* the object's DWARF agreed with the layout */
	char ns_prefix[32];		      /* private namespace: "je_", "_rjem_je_", "" */
	char pub_prefix[32];		      /* public API prefix: "", "_rjem_" */
	char conf_env[48];		      /* "MALLOC_CONF", "_RJEM_MALLOC_CONF" */
	uint64_t bias;			      /* runtime address = link-time vaddr + bias */
	/* file offsets (for uprobes) and runtime addresses of the probed functions */
	uint64_t alloc_off, free_off;
	uint64_t alloc_addr, free_addr;
	/* layout->activity_fn, where the layout has one and the object defines it; else 0 */
	uint64_t activity_off, activity_addr;
	/* runtime addresses of globals */
	uint64_t active_addr, opt_prof_addr, lg_prof_sample_addr;
	/* values read at discovery */
	bool opt_prof;
	uint64_t lg_prof_sample;
	/* no release string, but DWARF: the layout is built from the DWARF alone */
	bool layout_from_dwarf;
	/*
	 * Neither a release string nor DWARF confirms the layout (a version
	 * matched by its number, or forced): the session checks the first
	 * samples (selfcheck.h) and refuses on any inconsistency.
	 */
	bool needs_selfcheck;
	/*
	 * An image that is not a live pid (a core file, user/heap/memsrc_core.c): how
	 * each mapped object is found on disk (the path to open into buf; 0 or
	 * negative errno) and where memory is read. NULL: the live pid's.
	 */
	int (*open_object)(void *ctx, const char *path, char *buf, size_t len);
	void *open_ctx;
	const struct mem_source *mem;
};

/* jemalloc_target__find's code for a process without any jemalloc (distinct from errors). */
#define JEMALLOC_ENOTFOUND (-ENOPKG)

#endif /* __HEAPBPF_TARGET_TYPES_H */
