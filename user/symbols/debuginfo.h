/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * One ELF object seen through elfutils' libdwfl: function names from its
 * symbol tables (its own, or those of separate debug info), source lines and
 * inlined frames from DWARF. Separate debug info is found the way gdb and
 * perf find it: /usr/lib/debug/.build-id/xx/yyyy.debug, .gnu_debuglink (CRC
 * checked) next to the file, in .debug/ and under the debug directories, and
 * debuginfod when DEBUGINFOD_URLS is set (libdebuginfod, with its cache,
 * checked first as heapbpf's own directories are: debugsearch.h).
 *
 * Objects are cached process-wide by build-id, so a second profile of the same
 * binary does not read its DWARF again.
 */
#ifndef __HEAPBPF_DEBUGINFO_H
#define __HEAPBPF_DEBUGINFO_H

#include <stdbool.h>
#include <stdint.h>

#include <elfutils/libdw.h>

/*
 * One address named: what the DWARF lookup here and the symbolizer above it
 * (symbolizer.h) fill.
 */
#define SYM_MAX_LINES 16

struct sym_line {
	const char *function; /* NULL when unknown; owned by the symbolizer */
	const char *file;
	int64_t line;
};

struct sym_result {
	int object; /* index into the symbolizer's objects, -1 when unmapped */
	uint64_t offset_in_func;
	unsigned int nlines;
	struct sym_line lines[SYM_MAX_LINES]; /* callee first */
};

struct dbg_object;

/*
 * Extra directories searched like /usr/lib/debug (build-id tree and
 * debuglink), colon-separated; NULL for none. Call before the first lookup.
 */
void debuginfo_set_debug_dirs(const char *dirs);

/*
 * The object in file fd (not consumed), known as name_path (its directory is
 * where .gnu_debuglink files are looked for). Cached: returns a reference.
 */
int debuginfo_object__get(int fd, const char *name_path, struct dbg_object **out);
void debuginfo_object__put(struct dbg_object *o);
/* Drops every cached object (for leak checkers at exit). */
void debuginfo_cache_clear(void);
/* Frees the cached objects nobody holds a reference to any more (debuginfo_object__put). */
void debuginfo_cache_trim(void);

/*
 * For a Dwarf opened on its own (dwarf_begin) from the file at path: the dwz
 * multifile its .gnu_debugaltlink names, found as a module's is (never
 * opened in a way that blocks) and set with dwarf_setalt, or marked missing,
 * so that libdw does not look for it itself with a blocking open(). End alt
 * with debuginfo_alt_end after dwarf_end(dw).
 */
struct dbg_alt {
	Dwarf *dw;
	int fd;
};
void debuginfo_attach_alt(Dwarf *dw, const char *path, struct dbg_alt *alt);
void debuginfo_alt_end(struct dbg_alt *alt);

/* Hex build-id or NULL. */
const char *debuginfo_object__build_id(const struct dbg_object *o);
/*
 * The file whose .symtab holds the object's full symbol table: the object
 * itself when not stripped, else its separate debug file once found; NULL
 * when neither has one. Triggers the debug info search.
 */
const char *debuginfo_object__symtab_file(struct dbg_object *o);
/* The separate debug file found, or NULL. Triggers the debug info search. */
const char *debuginfo_object__debug_file(struct dbg_object *o);
/*
 * Why the separate debug file was not found: the files found and refused
 * (another build-id, another CRC) and debuginfod's answer. Triggers the
 * debug info search.
 */
struct debug_miss;
const struct debug_miss *debuginfo_object__miss(struct dbg_object *o);

/*
 * Function, file, line and inlined frames at link-time address vaddr, into
 * r->lines (callee first) and r->nlines. Names are raw (mangled) and owned by
 * the object. Returns 0, or -ENOENT when nothing is known there.
 */
int debuginfo_object__lookup(struct dbg_object *o, uint64_t vaddr, struct sym_result *r);

/*
 * An executable or shared object by build-id (hex) from debuginfod, when
 * DEBUGINFOD_URLS is set: its open descriptor, path in found; else a negative errno
 * (-ENOENT when debuginfod is not configured or does not have it, -DEBUG_ECACHE
 * when it has no cache heapbpf can use safely: debugsearch_debuginfod_prepare()).
 */
int debuginfo_find_executable(const char *build_id, char *found, size_t len);

#endif /* __HEAPBPF_DEBUGINFO_H */
