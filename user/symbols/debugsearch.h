/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The search for an object's separate debug file, done here rather than by
 * libdwfl's dwfl_standard_find_debuginfo, which opens every candidate with a
 * blocking open(): a FIFO planted as app.debug next to a binary its owner
 * controls would hold heapbpf, running as root, forever. Every candidate is
 * opened with files_open_regular_ro (no FIFO, device or directory) and kept only if
 * it carries the object's build-id (or, without one, the debuglink's CRC).
 *
 * The places, in libdwfl's order (docs/symbols.md):
 *   DIR/.build-id/xx/yyyy.debug        for each absolute DIR of the path
 *   FILEDIR/LINK                       the path's "" entry
 *   FILEDIR/SUB/LINK                   a relative entry (.debug)
 *   DIR/FILEDIR/LINK                   an absolute entry, then with FILEDIR's
 *                                      leading components dropped one by one
 *   the same again for the file's real path, when it is a link
 *   debuginfod, by build-id, when DEBUGINFOD_URLS is set
 * A dwz multifile (.gnu_debugaltlink) is looked for by its own build-id, at
 * the name the link gives, and as DIR/NAME and DIR/.dwz/NAME.
 */
#ifndef __HEAPBPF_DEBUGSEARCH_H
#define __HEAPBPF_DEBUGSEARCH_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <libelf.h>

/*
 * Why a search found nothing, for the message that says so: what it found
 * and refused, and what debuginfod answered.
 */
struct debug_miss {
	char rejected[1024]; /* "FILE has build-id X, the binary's is Y; ...", or "" */
	int debuginfod;	     /* debuginfod's answer (a negative errno), 0 when not asked */
	struct {
		dev_t dev;
		ino_t ino;
	} seen[8]; /* the files refused, each said once whatever its name */
	unsigned int nseen;
};

struct debug_query {
	const char *path;	 /* libdwfl's syntax: [+-]ENTRY:ENTRY..., "" = FILEDIR */
	const char *file_name;	 /* the object's name: FILEDIR is its directory */
	const char *link;	 /* the .gnu_debuglink or .gnu_debugaltlink name, or NULL */
	const unsigned char *id; /* the build-id the file must carry, or NULL */
	size_t idlen;
	dev_t dev; /* the object itself, never its own debug file */
	ino_t ino;
	uint32_t crc;		 /* the debuglink's CRC, checked when there is no build-id */
	bool alt;		 /* the dwz multifile that link names */
	struct debug_miss *miss; /* filled with why nothing was found, or NULL */
};

/*
 * The debug file q describes: returns its descriptor (close-on-exec, blocking
 * reads) and sets *found to its path (malloc'd), or returns -1 with *found
 * untouched.
 */
int debugsearch_find(const struct debug_query *q, char **found);

/*
 * What debuginfod's negative errno (debuginfod_find_debuginfo's, after
 * libcurl's error) means, as a message says it: -ENOENT "the server has no
 * such build-id", -ECONNREFUSED, -EHOSTUNREACH (the name did not resolve)...
 * and -DEBUG_ECACHE, debuginfod not asked for want of a safe cache.
 */
const char *debugsearch_debuginfod_reason(int rc);

/*
 * libdebuginfod's cache, which it writes as root by name, following links
 * (cache_clean_interval_s, max_unused_age_s, the files it downloads), and
 * reads debug info from: checked as heapbpf's own directories are before
 * libdebuginfod is used (docs/security.md). The directory libdebuginfod
 * would choose, by its own rules (elfutils 0.188's debuginfod-client.c):
 * $DEBUGINFOD_CACHE_PATH; else $HOME/.debuginfod_client_cache when it
 * exists; else $XDG_CACHE_HOME/debuginfod_client; else
 * $HOME/.cache/debuginfod_client ("/" for an unset HOME). It and every
 * directory on the way pass output_open_dir(OUTPUT_DIR_PRIVATE), and what
 * it holds belongs to root or the invoking user, directories writable by
 * no one else; else heapbpf's own, DEBUG_CACHE_FALLBACK, checked the same
 * way. Missing directories that libdebuginfod would make are made, 0700,
 * in a parent that passes the same checks (the fallback's parent, 0755).
 * --allow-shared-dir loosens the directories' checks as output_open_dir()
 * does, not the one of what the cache holds.
 */
#define DEBUG_CACHE_FALLBACK "/var/cache/heapbpf/debuginfod"
/* Beyond the kernel's errnos and output.h's OUTPUT_E* codes: */
#define DEBUG_ECACHE   5101 /* debuginfod not asked: no cache it could use safely */
#define DEBUG_EFOREIGN 5102 /* the cache holds what another user owns or can write */

struct debug_cache {
	char chosen[PATH_MAX]; /* the directory libdebuginfod would use */
	int refused;	       /* 0, or why not: a negative errno, -OUTPUT_E*, -DEBUG_EFOREIGN */
	char why[1024];	       /* the same in words, names cleaned (hb_clean) */
	char used[PATH_MAX];   /* chosen when accepted, else the fallback; "" for none */
	int fallback_refused;  /* why the fallback cannot be used either, or 0 */
	char fallback_why[1024];
};

/* The decision for the environment as it is, with fallback in place of DEBUG_CACHE_FALLBACK. */
void debugsearch_cache_decide(const char *fallback, struct debug_cache *c);

/*
 * Before libdebuginfod is first used: the decision made (once a process),
 * DEBUGINFOD_CACHE_PATH set to the directory to use, a refusal said once
 * (hb_warn). 0 when libdebuginfod may be used, else -DEBUG_ECACHE.
 */
int debugsearch_debuginfod_prepare(void);

/* The .gnu_debugaltlink of elf: its name and the multifile's build-id; false when it has none. */
bool debugsearch_altlink(Elf *elf, const char **name, const unsigned char **id, size_t *idlen);

#endif /* __HEAPBPF_DEBUGSEARCH_H */
