// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdlib.h>
#include <string.h>

#include <libiberty/demangle.h>

#include "symbols/demangle.h"

char *demangle_name(const char *name)
{
	/* only Itanium C++ (_Z) and Rust v0 (_R) manglings; legacy Rust is _ZN...17h<hash>E */
	if (!name || name[0] != '_' || (name[1] != 'Z' && name[1] != 'R'))
		return NULL;
	/* auto style: C++ (gnu-v3), Rust legacy (hash suffix dropped) and Rust v0 */
	return cplus_demangle(name, DMGL_PARAMS | DMGL_ANSI);
}
