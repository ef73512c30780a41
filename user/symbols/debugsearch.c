// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <elfutils/debuginfod.h>
#include <elfutils/libdwelf.h>
#include <gelf.h>
#include <zlib.h>

#include "debugsearch.h"
#include "files.h"

static void to_hex(const unsigned char *id, size_t idlen, char *hex, size_t len)
{
	hex[0] = '\0';
	for (size_t i = 0; i < idlen && 2 * i + 2 < len; i++)
		snprintf(hex + 2 * i, 3, "%02x", id[i]);
}

/* The file in fd carries the build-id id; its own, in hex, into got ("" when it has none). */
static bool same_build_id(int fd, const unsigned char *id, size_t idlen, char *got_hex,
			  size_t hexlen)
{
	const void *got = NULL;
	ssize_t n = -1;
	bool same;
	Elf *elf;

	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (elf)
		n = dwelf_elf_gnu_build_id(elf, &got);
	/* got points into elf's data */
	same = n > 0 && (size_t)n == idlen && memcmp(got, id, idlen) == 0;
	to_hex(n > 0 ? got : NULL, n > 0 ? (size_t)n : 0, got_hex, hexlen);
	elf_end(elf);
	return same;
}

/* Adds why the file at path (st, when it was opened) was refused to q's miss, once per file. */
static void refused(const struct debug_query *q, const char *path, const struct stat *st,
		    const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static void refused(const struct debug_query *q, const char *path, const struct stat *st,
		    const char *fmt, ...)
{
	struct debug_miss *m = q->miss;
	char *r = m ? m->rejected : NULL;
	size_t used, size = sizeof(m->rejected);
	const char *at;
	va_list ap;
	int n;

	if (!m)
		return;
	/* a file seen before, by another name (a link, /proc/PID/root) or another rule */
	for (unsigned int i = 0; st && i < m->nseen; i++) {
		if (m->seen[i].dev == st->st_dev && m->seen[i].ino == st->st_ino)
			return;
	}
	if (st && m->nseen < sizeof(m->seen) / sizeof(m->seen[0])) {
		m->seen[m->nseen].dev = st->st_dev;
		m->seen[m->nseen++].ino = st->st_ino;
	}
	for (at = strstr(r, path); at; at = strstr(at + 1, path)) {
		if ((at == r || (at >= r + 2 && at[-2] == ';')) && at[strlen(path)] == ' ')
			return;
	}
	used = strlen(r);
	if (used && used + 2 < size) {
		memcpy(r + used, "; ", 3);
		used += 2;
	}
	va_start(ap, fmt);
	n = vsnprintf(r + used, size - used, fmt, ap);
	va_end(ap);
	if (n < 0)
		r[used] = '\0';
}

/* CRC-32 of the whole file, as .gnu_debuglink records it (zlib's polynomial). */
static bool same_crc(int fd, uint32_t want, uint32_t *got)
{
	unsigned char buf[1 << 16];
	uLong crc = crc32(0L, Z_NULL, 0);
	ssize_t n;
	off_t at = 0;

	while ((n = pread(fd, buf, sizeof(buf), at)) > 0) {
		crc = crc32(crc, buf, (uInt)n);
		at += n;
	}
	*got = (uint32_t)crc;
	return n == 0 && (uint32_t)crc == want;
}

/* path is the debug file q asks for: its descriptor, or -1 (and why, in q's miss). */
static int try_one(const struct debug_query *q, const char *path, char **found)
{
	char got[2 * 64 + 1], want[2 * 64 + 1];
	struct stat st;
	uint32_t crc = 0;
	bool ok;
	int fd = open_regular_ro(path);

	if (fd < 0) {
		if (fd != -ENOENT && fd != -ENOTDIR)
			refused(q, path, NULL, "%s cannot be opened: %s", path,
				open_regular_strerror(fd));
		return -1;
	}
	if (fstat(fd, &st) || (st.st_dev == q->dev && st.st_ino == q->ino)) {
		/* the object by another name */
		close(fd);
		return -1;
	}
	if (q->idlen) {
		ok = same_build_id(fd, q->id, q->idlen, got, sizeof(got));
		to_hex(q->id, q->idlen, want, sizeof(want));
		if (!ok && got[0])
			refused(q, path, &st, "%s has build-id %s, the binary's is %s", path, got,
				want);
		else if (!ok)
			refused(q, path, &st, "%s has no build-id, the binary's is %s", path, want);
	} else {
		ok = q->alt ? false : !q->link || !q->crc || same_crc(fd, q->crc, &crc);
		if (!ok && !q->alt)
			refused(q, path, &st,
				"%s has CRC %08x, the binary's .gnu_debuglink asks for %08x", path,
				crc, q->crc);
	}
	if (ok)
		*found = strdup(path);
	if (!ok || !*found) {
		close(fd);
		return -1;
	}
	return fd;
}

static int try_fmt(const struct debug_query *q, char **found, const char *fmt, const char *a,
		   const char *b, const char *c)
{
	char path[PATH_MAX];
	int n = snprintf(path, sizeof(path), fmt, a, b, c);

	if (n < 0 || (size_t)n >= sizeof(path))
		return -1;
	return try_one(q, path, found);
}

static int by_build_id(const struct debug_query *q, const char *dir, char **found)
{
	char hex[2 * 64 + 1];

	if (!q->idlen || q->idlen > 64 || dir[0] != '/')
		return -1;
	for (size_t i = 0; i < q->idlen; i++)
		snprintf(hex + 2 * i, 3, "%02x", q->id[i]);
	/* xx/yyyy: the first byte names the directory */
	return try_fmt(q, found, "%s/.build-id/%.2s/%s.debug", dir, hex, hex + 2);
}

/* One entry of the path for a file in directory fdir (NULL: a bare name). */
static int by_link(const struct debug_query *q, const char *entry, const char *fdir,
		   const char *link, char **found)
{
	const char *sub, *base = strrchr(link, '/') ? strrchr(link, '/') + 1 : link;
	int fd;

	if (strcmp(entry, ".") == 0)
		entry = "";
	if (q->alt) {
		/* a multifile: LINK beside the file, NAME in an absolute entry, and .dwz/NAME in both */
		if (entry[0] && entry[0] != '/')
			return -1;
		if (!entry[0] && !fdir)
			return -1;
		fd = entry[0] ? try_fmt(q, found, "%s/%s%s", entry, base, "")
			      : try_fmt(q, found, "%s/%s%s", fdir, link, "");
		return fd >= 0 ? fd
			       : try_fmt(q, found, "%s/.dwz/%s%s", entry[0] ? entry : fdir, base,
					 "");
	}
	if (!entry[0])
		return fdir ? try_fmt(q, found, "%s/%s%s", fdir, link, "") : -1;
	if (entry[0] != '/')
		return fdir ? try_fmt(q, found, "%s/%s/%s", fdir, entry, link) : -1;
	/* DIR/usr/lib/x/LINK, DIR/lib/x/LINK, DIR/x/LINK */
	if (!fdir || fdir[0] != '/')
		return -1;
	for (sub = fdir; (sub = strchr(sub, '/')) && *++sub;) {
		fd = try_fmt(q, found, "%s/%s/%s", entry, sub, link);
		if (fd >= 0)
			return fd;
	}
	return -1;
}

/* Every entry of the path, for the object known as file_name. */
static int in_path(const struct debug_query *q, char *entries, const char *file_name, char **found)
{
	char fdir[PATH_MAX], alt_name[NAME_MAX + 8];
	const char *slash = file_name ? strrchr(file_name, '/') : NULL;
	const char *link = q->link;
	char *e, *save = NULL;
	int fd = -1;

	if (slash)
		snprintf(fdir, sizeof(fdir), "%.*s", (int)(slash - file_name), file_name);
	if (!link) {
		/* no debuglink: NAME.debug, as libdwfl invents it (no CRC to check then) */
		if (!file_name || q->alt)
			return -1;
		snprintf(alt_name, sizeof(alt_name), "%s.debug", slash ? slash + 1 : file_name);
		link = alt_name;
	}
	for (e = strtok_r(entries, ":", &save); fd < 0 && e; e = strtok_r(NULL, ":", &save))
		fd = by_link(q, e[0] == '+' || e[0] == '-' ? e + 1 : e, slash ? fdir : NULL, link,
			     found);
	return fd;
}

static char *entries_of(const char *path)
{
	/* a leading + or - of the whole path only says whether CRCs are checked: they always are */
	char *s = strdup(path[0] == '+' || path[0] == '-' ? path + 1 : path);

	/* an empty entry is the file's own directory: strtok_r would skip it, so name it "." */
	if (s) {
		size_t n = strlen(s), k = 0;
		char *t = malloc(2 * n + 2);

		if (!t) {
			free(s);
			return NULL;
		}
		for (size_t i = 0; i <= n; i++) {
			bool empty = (i == 0 || s[i - 1] == ':') && (s[i] == ':' || s[i] == '\0');

			if (empty)
				t[k++] = '.';
			t[k++] = s[i];
		}
		free(s);
		s = t;
	}
	return s;
}

static int with_entries(const struct debug_query *q, const char *file_name, char **found)
{
	char *entries = entries_of(q->path);
	int fd;

	if (!entries)
		return -1;
	fd = in_path(q, entries, file_name, found);
	free(entries);
	return fd;
}

static int by_debuginfod(const struct debug_query *q, char **found)
{
	const char *urls = getenv("DEBUGINFOD_URLS");
	debuginfod_client *c;
	char *path = NULL;
	int fd;

	if (!q->idlen || !urls || !urls[0])
		return -1;
	c = debuginfod_begin();
	if (!c) {
		if (q->miss)
			q->miss->debuginfod = -ENOMEM;
		return -1;
	}
	fd = debuginfod_find_debuginfo(c, q->id, (int)q->idlen, &path);
	debuginfod_end(c);
	if (fd < 0 && q->miss)
		q->miss->debuginfod = fd;
	if (fd >= 0) {
		/* the client's cache file: checked like any other */
		close(fd);
		fd = path ? try_one(q, path, found) : -1;
	}
	free(path);
	return fd;
}

int debug_search(const struct debug_query *q, char **found)
{
	char *entries = entries_of(q->path), *real;
	char *e, *save = NULL;
	int fd = -1;

	if (!entries)
		return -1;
	for (e = strtok_r(entries, ":", &save); fd < 0 && e; e = strtok_r(NULL, ":", &save))
		fd = by_build_id(q, e[0] == '+' || e[0] == '-' ? e + 1 : e, found);
	free(entries);
	if (fd < 0 && q->alt && q->link && q->link[0] == '/')
		fd = try_one(q, q->link, found);
	if (fd < 0)
		fd = with_entries(q, q->file_name, found);
	if (fd < 0 && q->file_name && (real = hb_realpath(q->file_name))) {
		/* a link's target directory may hold the debug file instead */
		if (strcmp(real, q->file_name) != 0)
			fd = with_entries(q, real, found);
		free(real);
	}
	if (fd < 0)
		fd = by_debuginfod(q, found);
	return fd;
}

const char *debug_debuginfod_reason(int rc)
{
	/* libdebuginfod's translation of libcurl's errors (debuginfod-client.c) */
	switch (rc) {
	case -ENOENT:
		return "the server has no such build-id (a miss stays in libdebuginfod's cache, "
		       "10 minutes by default)";
	case -ECONNREFUSED:
		return "cannot connect to it (connection refused, or its TLS certificate was "
		       "not accepted)";
	case -EHOSTUNREACH:
		return "its host name does not resolve";
	case -ETIME:
	case -ETIMEDOUT:
		return "no answer within DEBUGINFOD_TIMEOUT";
	case -ECONNRESET:
		return "the connection broke";
	case -EACCES:
		return "access refused";
	case -EINVAL:
		return "its URL is malformed";
	case -EFBIG:
		return "the file is larger than DEBUGINFOD_MAXSIZE";
	case -EMLINK:
		return "too many redirects";
	default:
		return strerror(-rc);
	}
}

bool debug_altlink(Elf *elf, const char **name, const unsigned char **id, size_t *idlen)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;

	if (!elf || elf_getshdrstrndx(elf, &shstrndx))
		return false;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;
		const char *s, *end;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS)
			continue;
		s = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!s || strcmp(s, ".gnu_debugaltlink") != 0)
			continue;
		d = elf_getdata(scn, NULL);
		if (!d || !d->d_buf || !d->d_size)
			return false;
		s = d->d_buf;
		end = memchr(s, '\0', d->d_size);
		/* NAME\0 then the multifile's build-id */
		if (!end || end + 1 >= s + d->d_size)
			return false;
		*name = s;
		*id = (const unsigned char *)end + 1;
		*idlen = d->d_size - (size_t)(end + 1 - s);
		return true;
	}
	return false;
}
