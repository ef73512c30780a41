/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Address -> (object, function) for one target process, from the mappings
 * captured while it was alive. Objects are opened while the process lives
 * (through /proc/PID/root, so containers work) and parsed lazily, once.
 *
 * Names, source lines and inlined frames come from libdwfl (user/symbols/debuginfo.c,
 * which also finds separate debug info); the object's own ELF symbols
 * (user/symbols/elfobj.c) are the fallback.
 */
#ifndef __HEAPBPF_SYMBOLIZE_H
#define __HEAPBPF_SYMBOLIZE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "symbols/debuginfo.h"
#include "symbols/proc.h"

struct sym_object {
	char *path;	/* path inside the target's namespace */
	char *build_id; /* hex or NULL */
	/* the executable mapping the frames fall in */
	uint64_t start, limit, file_offset;
	bool has_functions, has_filenames, has_line_numbers, has_inline_frames;
};

struct symbolizer;

/* Captures pid's mappings and opens its executable objects now. */
int symbolizer__new(pid_t pid, struct symbolizer **out);
/*
 * Offline, for a recording: the mappings as recorded, each binary found by
 * build_ids[i] (hex, may be NULL or "") under dirs (NULL-terminated, may be
 * NULL), at its recorded path, or through debuginfod. Binaries not found
 * leave their frames unnamed (object+offset); that is not an error.
 */
int symbolizer__new_offline(const struct proc_maps *maps, const char *const *build_ids,
			    const char *const *dirs, struct symbolizer **out);
/*
 * Offline: the binary at path (build_id: hex it must have, NULL or "" for
 * any) the way new_offline finds it; an open fd and its path in found, or -1.
 */
int symbolizer_find_binary(const char *const *dirs, const char *path, const char *build_id,
			   char *found, size_t len);
/* Re-reads the mappings if the process is still alive (dlopen after attach). Renumbers objects: call it before lookups, not between. */
int symbolizer__refresh(struct symbolizer *s);
void symbolizer__free(struct symbolizer *s);
/*
 * Drops what lookups parsed (symbol tables, DWARF: tens of MiB for a large
 * object) once no more lookups are due; the objects stay listed, and a
 * later lookup parses again. Objects shared with other symbolizers (a
 * pool, DWARF cached for another one) stay.
 */
void symbolizer__release(struct symbolizer *s);

/*
 * Symbolizes addr. is_return: addr is a return address, so pc-1 is looked up
 * (every frame of a jemalloc backtrace is one).
 */
int symbolizer__lookup(struct symbolizer *s, uint64_t addr, bool is_return, struct sym_result *r);

/*
 * Symbolizers of several processes of one binary (a --unit session) parse
 * each object once: objects of the same build-id are opened and parsed
 * once, into p, and shared (their DWARF is shared by build-id already,
 * user/symbols/debuginfo.c). An object stays in p while a symbolizer holds
 * it (parsed and neither released nor freed): the last to let go frees it
 * (an agent's pool), unless p keeps idle objects (symbolizer_pool__keep_idle).
 * p is freed after every symbolizer that shares it.
 */
struct sym_pool;
int symbolizer_pool__new(struct sym_pool **out);
void symbolizer_pool__free(struct sym_pool *p);
/*
 * p keeps an object no symbolizer holds until symbolizer_pool__free: a session of
 * several targets builds their last profiles one after the other, each
 * releasing its symbolizer's objects (report__build), so without this the
 * next target would parse again what the last one let go.
 */
void symbolizer_pool__keep_idle(struct sym_pool *p);
/* How many parsed objects p holds now. */
size_t symbolizer_pool__size(const struct sym_pool *p);
void symbolizer__share(struct symbolizer *s, struct sym_pool *p);

size_t symbolizer__nobjects(const struct symbolizer *s);
const struct sym_object *symbolizer__object(const struct symbolizer *s, int i);
/*
 * The executable's object (the first mapped file's, its lowest executable
 * mapping), or -1 when none of its mappings is executable. Renumbered by
 * symbolizer__refresh() like the others.
 */
int symbolizer__main_object(const struct symbolizer *s);

#endif /* __HEAPBPF_SYMBOLIZE_H */
