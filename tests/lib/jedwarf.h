/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What the DWARF of jemalloc 5.3.0 describes of the profiling structures
 * (the facts of docs/jemalloc.md), for the tests of layouts built from DWARF.
 */
#ifndef __HEAPBPF_TEST_JEDWARF_H
#define __HEAPBPF_TEST_JEDWARF_H

#include "jemalloc/layout_dwarf.h"

/* 5.3.0's offsets and argument positions; the heap tables left zero. */
struct jemalloc_dwarf hb_dwarf_530(void);

#endif /* __HEAPBPF_TEST_JEDWARF_H */
