/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Finding jemalloc inside a running process: which mapped ELF object holds
 * it (the executable when linked statically, or a shared libjemalloc), its
 * version, namespace prefixes, the addresses of the functions heapbpf probes
 * and of the globals it reads and writes.
 */
#ifndef __HEAPBPF_TARGET_H
#define __HEAPBPF_TARGET_H

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

/*
 * Finds jemalloc in pid. On failure returns negative errno and writes a
 * one-sentence explanation (what failed and what to do) into err.
 * layout_name forces a layout when the version is not recognized (NULL: no).
 * The layout is checked against the object's DWARF where it has some, and
 * adjusted for a --enable-debug build.
 */
int jemalloc_target__find(pid_t pid, const char *layout_name, struct jemalloc_target **out,
			  char *err, size_t errlen);
void jemalloc_target__free(struct jemalloc_target *t);

/*
 * The same search in an image the caller describes: t (calloc'ed) holds
 * pid, comm, maps (owned by t from now on), open_object and mem. On failure
 * the caller frees t with jemalloc_target__free().
 */
int jemalloc_target__identify(struct jemalloc_target *t, const char *layout_name, char *err,
			      size_t errlen);

/*
 * The largest lg_prof_sample heapbpf scales by: jemalloc accepts up to 63,
 * but a recording must be readable again (its reader takes up to 62).
 */
#define HB_LG_SAMPLE_MAX 62

/*
 * Reads jemalloc's current sampling rate (lg_prof_sample) from the target:
 * -ERANGE (with *lg set) past HB_LG_SAMPLE_MAX.
 */
int jemalloc_target__read_lg_sample(struct jemalloc_target *t, uint64_t *lg);

/*
 * The runtime address of one of jemalloc's globals (a data symbol of its
 * full symbol table): name with the private namespace in front when
 * prefixed, as is otherwise (file-local statics such as bt2gctx).
 */
int jemalloc_target__global(const struct jemalloc_target *t, const char *name, bool prefixed,
			    uint64_t *addr);

/* The same, with the global's size in bytes (its symbol's st_size). */
int jemalloc_target__global_sized(const struct jemalloc_target *t, const char *name, bool prefixed,
				  uint64_t *addr, uint64_t *size);
/* True when the symbol name is one of jemalloc's functions (private or public API). */
bool jemalloc_target__is_jemalloc_func(const struct jemalloc_target *t, const char *name);

#endif /* __HEAPBPF_TARGET_H */
