// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
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

#include "symbols/debugsearch.h"
#include "util/errmsg.h"
#include "util/files.h"
#include "util/output.h"

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
	int fd = files_open_regular_ro(path);

	if (fd < 0) {
		if (fd != -ENOENT && fd != -ENOTDIR)
			refused(q, path, NULL, "%s cannot be opened: %s", path,
				files_open_regular_strerror(fd));
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

/*
 * The directory libdebuginfod would keep its cache in, by its own rules
 * (elfutils 0.188, debuginfod_query_server_by_buildid), and how many of its
 * last components it would make itself: none for a cache it found, one
 * under DEBUGINFOD_CACHE_PATH's parent, two for the XDG name (the cache
 * home, then debuginfod_client). 0, or -ENAMETOOLONG.
 */
static int libdebuginfod_cache(char *path, size_t len, int *levels)
{
	const char *env = getenv("DEBUGINFOD_CACHE_PATH"), *xdg = getenv("XDG_CACHE_HOME");
	const char *home = getenv("HOME");
	struct stat st;
	int n;

	if (!home)
		home = "/";
	if (env && env[0]) {
		*levels = 1;
		n = snprintf(path, len, "%s", env);
	} else {
		/* a cache at the old name takes precedence, whatever it is (stat, as it does) */
		*levels = 0;
		n = snprintf(path, len, "%s/.debuginfod_client_cache", home);
		if (n >= 0 && (size_t)n < len && stat(path, &st) != 0) {
			*levels = 2;
			if (xdg && xdg[0])
				n = snprintf(path, len, "%s/debuginfod_client", xdg);
			else
				n = snprintf(path, len, "%s/.cache/debuginfod_client", home);
		}
	}
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/*
 * path opened and checked as output_open_dir(kind) does it; when it is
 * missing, up to levels of its last components made, mode for the last and
 * parent_mode above it, each in a parent that passes the checks of a
 * directory on the way. A descriptor, or a negative errno or -OUTPUT_E*.
 */
static int open_making(const char *path, enum output_dir_kind kind, int levels, mode_t mode,
		       mode_t parent_mode)
{
	char *parent, *slash, *name;
	int fd = output_open_dir(path, kind), pfd, err = 0;

	if (fd != -ENOENT || levels <= 0)
		return fd;
	parent = strdup(path);
	if (!parent)
		return -ENOMEM;
	/* "a/b/" is "a/b" */
	for (size_t n = strlen(parent); n > 1 && parent[n - 1] == '/'; n--)
		parent[n - 1] = '\0';
	slash = strrchr(parent, '/');
	name = strdup(slash ? slash + 1 : parent);
	if (!name) {
		free(parent);
		return -ENOMEM;
	}
	if (!slash) {
		pfd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		pfd = pfd >= 0 ? pfd : -errno;
	} else {
		/* "/a" is in "/" */
		if (slash == parent)
			slash[1] = '\0';
		else
			*slash = '\0';
		pfd = open_making(parent, OUTPUT_DIR_FILES, levels - 1, parent_mode, parent_mode);
	}
	/* in a directory that passed its checks: made ours, or raced by someone it trusts */
	if (pfd < 0)
		err = pfd;
	else if (mkdirat(pfd, name, mode) && errno != EEXIST)
		err = -errno;
	if (pfd >= 0)
		close(pfd);
	free(name);
	free(parent);
	/* opened again the whole way: what is there now passes the same checks, or is refused */
	return err ? err : output_open_dir(path, kind);
}

/* A directory in the cache that others can write: they could plant what libdebuginfod reads. */
static bool shared_subdir(int dfd, const char *name)
{
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	bool shared = fd >= 0 && output_dir_check(fd, OUTPUT_DIR_PRIVATE) != 0;

	if (fd >= 0)
		close(fd);
	return shared;
}

/*
 * What the cache open as dfd holds at its top, each name libdebuginfod opens
 * or walks into: owned by a user heapbpf trusts, and a directory writable by
 * no one else. 0, or -DEBUG_EFOREIGN with the entry in why.
 */
static int contents_check(int dfd, char *why, size_t len)
{
	int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC), err = 0;
	char name[HB_CLEAN_SIZE(64)];
	struct dirent *e;
	struct stat st;
	DIR *d;

	if (fd < 0)
		return -errno;
	d = fdopendir(fd);
	if (!d) {
		err = -errno;
		close(fd);
		return err;
	}
	while (!err && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
		    fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW))
			continue; /* or gone meanwhile */
		hb_clean(name, sizeof(name), e->d_name);
		if (!output_trusted_uid(st.st_uid)) {
			snprintf(why, len,
				 "it holds %s, a %s another user owns, and libdebuginfod follows "
				 "what it holds by name",
				 name, S_ISLNK(st.st_mode) ? "symbolic link" : "file");
			err = -DEBUG_EFOREIGN;
		} else if (S_ISDIR(st.st_mode) && shared_subdir(dfd, e->d_name)) {
			snprintf(why, len,
				 "it holds %s, a directory other users can write, who could plant "
				 "what libdebuginfod reads or writes there",
				 name);
			err = -DEBUG_EFOREIGN;
		}
	}
	closedir(d);
	return err;
}

/* path as a cache: opened (made when missing, levels deep), checked, its contents too. */
static int check_cache(const char *path, int levels, mode_t parent_mode, char *why, size_t len)
{
	int fd = open_making(path, OUTPUT_DIR_PRIVATE, levels, 0700, parent_mode), err;

	if (fd < 0) {
		snprintf(why, len, "%s", output_strerror(fd));
		return fd;
	}
	err = contents_check(fd, why, len);
	close(fd);
	return err;
}

void debugsearch_cache_decide(const char *fallback, struct debug_cache *c)
{
	int levels = 0;

	memset(c, 0, sizeof(*c));
	c->refused = libdebuginfod_cache(c->chosen, sizeof(c->chosen), &levels);
	if (c->refused)
		snprintf(c->why, sizeof(c->why), "%s", strerror(-c->refused));
	else
		c->refused = check_cache(c->chosen, levels, 0700, c->why, sizeof(c->why));
	if (!c->refused) {
		snprintf(c->used, sizeof(c->used), "%s", c->chosen);
		return;
	}
	/* /var/cache/heapbpf as a package's directory in /var/cache is, then debuginfod 0700 */
	c->fallback_refused =
		check_cache(fallback, 2, 0755, c->fallback_why, sizeof(c->fallback_why));
	if (!c->fallback_refused)
		snprintf(c->used, sizeof(c->used), "%s", fallback);
}

int debugsearch_debuginfod_prepare(void)
{
	/* 1: set up, -1: not to be used; decided once a process */
	static int ready;
	const size_t n = HB_CLEAN_SIZE(PATH_MAX);
	struct debug_cache *c;
	char *names;

	if (ready)
		return ready > 0 ? 0 : -DEBUG_ECACHE;
	ready = -1;
	c = malloc(sizeof(*c));
	names = malloc(2 * n);
	if (!c || !names) {
		free(c);
		free(names);
		hb_warn("debuginfod is not used: %s", strerror(ENOMEM));
		return -DEBUG_ECACHE;
	}
	debugsearch_cache_decide(DEBUG_CACHE_FALLBACK, c);
	hb_clean(names, n, c->chosen);
	hb_clean(names + n, n, c->used[0] ? c->used : DEBUG_CACHE_FALLBACK);
	/* libdebuginfod decides again at each query: from now on there is one answer */
	if (c->used[0] && !setenv("DEBUGINFOD_CACHE_PATH", c->used, 1))
		ready = 1;
	if (ready > 0 && c->refused)
		hb_warn("debuginfod's cache is %s, not %s, which heapbpf refuses: %s", names + n,
			names, c->why);
	else if (ready < 0 && c->refused)
		hb_warn("debuginfod is not used: heapbpf refuses its cache %s (%s) and cannot use "
			"%s instead: %s",
			names, c->why, names + n,
			c->fallback_refused ? c->fallback_why : strerror(ENOMEM));
	else if (ready < 0)
		hb_warn("debuginfod is not used: %s", strerror(ENOMEM));
	free(names);
	free(c);
	return ready > 0 ? 0 : -DEBUG_ECACHE;
}

static int by_debuginfod(const struct debug_query *q, char **found)
{
	const char *urls = getenv("DEBUGINFOD_URLS");
	debuginfod_client *c;
	char *path = NULL;
	int fd, rc;

	if (!q->idlen || !urls || !urls[0])
		return -1;
	rc = debugsearch_debuginfod_prepare();
	if (rc) {
		if (q->miss)
			q->miss->debuginfod = rc;
		return -1;
	}
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

int debugsearch_find(const struct debug_query *q, char **found)
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

const char *debugsearch_debuginfod_reason(int rc)
{
	/* libdebuginfod's translation of libcurl's errors (debuginfod-client.c) */
	switch (rc) {
	case -DEBUG_ECACHE:
		return "not asked, as it has no cache heapbpf can use safely (said above)";
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

bool debugsearch_altlink(Elf *elf, const char **name, const unsigned char **id, size_t *idlen)
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
