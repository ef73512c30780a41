/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Diagnostics: the one-sentence error messages functions hand back to main
 * through (err, errlen), and the one path by which anything heapbpf says
 * reaches stderr, its "heapbpf: " prefix and -q.
 */
#ifndef __HEAPBPF_ERRMSG_H
#define __HEAPBPF_ERRMSG_H

#include <stdbool.h>
#include <stddef.h>

/* Formats the message into err (when not NULL) and returns code, for "return hb_fail(...)". */
int hb_fail(char *err, size_t errlen, int code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/*
 * What heapbpf says on stderr, one line each: the prefix and the newline are
 * added, so fmt has neither; each line is one write, whole even when other
 * processes of the run write beside it. A name a target, a recording or a
 * file chose goes through hb_clean first.
 *
 *   hb_error      "heapbpf: MSG"           a failure; always said
 *   hb_warn       "heapbpf: warning: MSG"  always said
 *   hb_say        "heapbpf: MSG"           always said, neither a failure nor a
 *                                          warning: a shortfall the exit code
 *                                          reports, a flag restored, what -v
 *                                          asked for
 *   hb_note       "heapbpf: MSG"           status and summary lines; not with -q
 *   hb_note_more  "MSG"                    a further line of the note before it
 *                                          (a table's row); not with -q
 */
void hb_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void hb_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void hb_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void hb_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void hb_note_more(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* -q: hb_note and hb_note_more say nothing (set once, by main, before anything is said). */
void hb_set_quiet(bool quiet);
/*
 * Each line stamped with the UTC time ("2026-12-06T15:44:36.123Z heapbpf:
 * ..."), for a long run whose stderr is a file (set once, by the command).
 */
void hb_set_timestamps(bool on);

/* Room for hb_clean's text of n bytes (each may become "\xHH") and its NUL. */
#define HB_CLEAN_SIZE(n) (4 * (n) + 1)

/*
 * The one way a name that a target, a recording or a file chose (symbols,
 * comm, paths, labels, messages quoting them) reaches a terminal: each byte
 * outside printable ASCII written as \xHH, so that escape sequences (ESC, CSI
 * 0x9b, every other C0 and C1 control, DEL) are shown and never obeyed. Only
 * for text meant for a terminal: file formats have their own escaping.
 * dst (len bytes) gets it, cut with "..." (never inside an \xHH) when too
 * small; src NULL is "". Returns dst.
 */
const char *hb_clean(char *dst, size_t len, const char *src);
/*
 * A failure's sentence (an err a function filled, up to 2 KiB) said as
 * hb_error does, cleaned: "heapbpf: WHAT: ERR", or "heapbpf: ERR" with
 * what NULL; an empty err says fallback. The one "clean up and print".
 */
void hb_error_clean(const char *what, const char *err, const char *fallback);

#endif /* __HEAPBPF_ERRMSG_H */
