/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The one-sentence error messages functions hand back to main through (err, errlen). */
#ifndef __HEAPBPF_ERRMSG_H
#define __HEAPBPF_ERRMSG_H

#include <stddef.h>

/* Formats the message into err (when not NULL) and returns code, for "return hb_fail(...)". */
int hb_fail(char *err, size_t errlen, int code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

#endif /* __HEAPBPF_ERRMSG_H */
