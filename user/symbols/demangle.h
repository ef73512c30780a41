/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* C++ and Rust (legacy and v0) symbol demangling through libiberty. */
#ifndef __HEAPBPF_DEMANGLE_H
#define __HEAPBPF_DEMANGLE_H

/* The demangled name (malloc'd), or NULL when name is not mangled. */
char *demangle_name(const char *name);

#endif /* __HEAPBPF_DEMANGLE_H */
