/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Where a stripped object's symbols can come from, said to the person who
 * has to get them: the Debian package that ships the object (dpkg's file
 * lists of this host) with its -dbgsym package's archive line, and the
 * jemalloc with its symbol table that heapbpf installs beside itself to be
 * preloaded instead (make install: PREFIX/lib/heapbpf/libjemalloc.so.2).
 */
#ifndef __HEAPBPF_DEBUGPKG_H
#define __HEAPBPF_DEBUGPKG_H

#include <stdbool.h>
#include <stddef.h>

/*
 * "libjemalloc2-dbgsym, from deb http://deb.debian.org/debian-debug
 * bookworm-debug main" into buf for the file at path, as this host's dpkg
 * knows it; false when dpkg does not list it (another distribution, a file
 * of a container's own tree).
 */
bool debugpkg_hint(const char *path, char *buf, size_t len);

/*
 * The jemalloc with its symbol table that heapbpf's make install puts
 * beside it (BINDIR/../lib/heapbpf/libjemalloc.so.2), or the build tree's
 * (build/jemalloc/libjemalloc.so.2) for a heapbpf run from there; false
 * when neither is there.
 */
bool debugpkg_preload(char *buf, size_t len);

#endif /* __HEAPBPF_DEBUGPKG_H */
