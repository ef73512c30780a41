// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * debugsearch_find on files built at run time: an object's separate debug file
 * is found where libdwfl looks (beside it, .debug/, under an absolute
 * directory, the build-id tree), checked by build-id or, without one, by the
 * debuglink's CRC; what is not a regular file (a FIFO) is passed over without
 * blocking; a dwz multifile is found by its .gnu_debugaltlink. What is found
 * and refused, and what debuginfod answered (no server, a 404), is kept for
 * the message that says nothing was found.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <elfutils/libdwelf.h>

#include "symbols/debuginfo.h"
#include "symbols/debugsearch.h"
#include "util/files.h"
#include "harness.h"

#pragma GCC diagnostic ignored "-Wformat-truncation"

TestSuite(debugsearch, .fini = hb_tmpdir_cleanup, .timeout = 60);

/* An object and its debug file (named link), built from one source with or without a build-id. */
struct obj {
	char dir[PATH_MAX];
	char file[PATH_MAX];
	unsigned char id[64];
	size_t idlen;
	uint32_t crc;
	struct stat st;
};

static void build(struct obj *o, const char *sub, bool build_id)
{
	char src[PATH_MAX];
	FILE *f;

	snprintf(o->dir, sizeof(o->dir), "%s", hb_tmp(sub));
	cr_assert_eq(mkdir(o->dir, 0755), 0);
	snprintf(src, sizeof(src), "%s/o.c", o->dir);
	f = fopen(src, "we");
	cr_assert_not_null(f);
	fputs("int o_func(int x) { return x * 3; }\nint main(void) { return o_func(1) - 3; }\n", f);
	fclose(f);
	snprintf(o->file, sizeof(o->file), "%s/obj", o->dir);
	hb_sh("cd '%s' && cc -g -O1 %s o.c -o obj && objcopy --only-keep-debug obj obj.debug && "
	      "strip --strip-debug obj && objcopy --add-gnu-debuglink=obj.debug obj",
	      o->dir, build_id ? "-Wl,--build-id=sha1" : "-Wl,--build-id=none");
	cr_assert_eq(stat(o->file, &o->st), 0);
	o->idlen = 0;
	{
		int fd = files_open_regular_ro(o->file);
		Elf *elf;
		const void *id = NULL, *link;
		GElf_Word crc = 0;
		ssize_t n;

		cr_assert_geq(fd, 0);
		elf_version(EV_CURRENT);
		elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
		cr_assert_not_null(elf);
		n = dwelf_elf_gnu_build_id(elf, &id);
		if (n > 0) {
			memcpy(o->id, id, (size_t)n);
			o->idlen = (size_t)n;
		}
		link = dwelf_elf_gnu_debuglink(elf, &crc);
		cr_assert_not_null(link);
		o->crc = crc;
		elf_end(elf);
		close(fd);
	}
	cr_assert_eq(o->idlen > 0, build_id);
}

static struct debug_query query(const struct obj *o, const char *path)
{
	return (struct debug_query){ .path = path,
				     .file_name = o->file,
				     .link = "obj.debug",
				     .id = o->idlen ? o->id : NULL,
				     .idlen = o->idlen,
				     .dev = o->st.st_dev,
				     .ino = o->st.st_ino,
				     .crc = o->crc };
}

/* Searches; asserts found at want (NULL: nothing found). */
static void expect(const struct debug_query *q, const char *want)
{
	char *found = NULL;
	int fd = debugsearch_find(q, &found);

	if (!want) {
		cr_assert_lt(fd, 0, "found %s", found ? found : "?");
		cr_assert_null(found);
		return;
	}
	cr_assert_geq(fd, 0, "%s not found", want);
	cr_assert_str_eq(found, want);
	close(fd);
	free(found);
}

Test(debugsearch, beside_the_object_checked_by_build_id)
{
	struct obj o;
	char want[PATH_MAX + 16];
	struct debug_query q;

	build(&o, "a", true);
	q = query(&o, "+:.debug");
	snprintf(want, sizeof(want), "%s/obj.debug", o.dir);
	expect(&q, want);
	/* another object's debug file by that name: its build-id differs */
	o.id[0] ^= 0xff;
	expect(&q, NULL);
}

Test(debugsearch, without_build_id_the_crc_decides)
{
	struct obj o;
	char want[PATH_MAX + 16];
	struct debug_query q;

	build(&o, "a", false);
	q = query(&o, "+:.debug");
	snprintf(want, sizeof(want), "%s/obj.debug", o.dir);
	expect(&q, want);
	q.crc ^= 1;
	expect(&q, NULL);
}

Test(debugsearch, pipes_are_passed_over_for_the_next_place)
{
	struct obj o;
	char p[PATH_MAX + 32], want[PATH_MAX + 32];
	struct debug_query q;

	build(&o, "a", true);
	/* the real file moves to .debug/; a FIFO with no writer takes its place */
	snprintf(p, sizeof(p), "%s/.debug", o.dir);
	cr_assert_eq(mkdir(p, 0755), 0);
	snprintf(want, sizeof(want), "%s/.debug/obj.debug", o.dir);
	snprintf(p, sizeof(p), "%s/obj.debug", o.dir);
	cr_assert_eq(rename(p, want), 0);
	cr_assert_eq(mkfifo(p, 0644), 0);
	q = query(&o, "+:.debug");
	expect(&q, want);
}

Test(debugsearch, under_an_absolute_directory_and_the_build_id_tree)
{
	struct obj o;
	char dbg[PATH_MAX], want[3 * PATH_MAX], hex[130], from[PATH_MAX + 16], path[PATH_MAX + 8];
	struct debug_query q;

	build(&o, "a", true);
	snprintf(dbg, sizeof(dbg), "%s", hb_tmp("dbg"));
	snprintf(from, sizeof(from), "%s/obj.debug", o.dir);
	/* DIR/<the object's directory>/obj.debug */
	snprintf(want, sizeof(want), "%s%s/obj.debug", dbg, o.dir);
	hb_sh("mkdir -p '%s%s' && mv '%s' '%s'", dbg, o.dir, from, want);
	snprintf(path, sizeof(path), "+:%s", dbg);
	q = query(&o, path);
	expect(&q, want);
	/* the build-id tree comes first */
	for (size_t i = 0; i < o.idlen; i++)
		snprintf(hex + 2 * i, 3, "%02x", o.id[i]);
	snprintf(from, sizeof(from), "%s", want);
	snprintf(want, sizeof(want), "%s/.build-id/%.2s/%s.debug", dbg, hex, hex + 2);
	hb_sh("mkdir -p '%s/.build-id/%.2s' && cp '%s' '%s'", dbg, hex, from, want);
	expect(&q, want);
	/* not the object itself, by any name */
	hb_sh("rm '%s' '%s' && ln '%s' '%s'", want, from, o.file, want);
	expect(&q, NULL);
}

static void hex_of(const unsigned char *id, size_t n, char *hex)
{
	for (size_t i = 0; i < n; i++)
		snprintf(hex + 2 * i, 3, "%02x", id[i]);
}

Test(debugsearch, a_file_with_another_build_id_is_named_with_both_ids)
{
	struct debug_miss miss = { .debuginfod = 0 };
	char want[PATH_MAX + 256], got_id[130], asked_id[130];
	struct debug_query q;
	struct obj o;

	build(&o, "a", true);
	hex_of(o.id, o.idlen, got_id);
	o.id[0] ^= 0xff;
	hex_of(o.id, o.idlen, asked_id);
	q = query(&o, "+:.debug");
	q.miss = &miss;
	unsetenv("DEBUGINFOD_URLS");
	expect(&q, NULL);
	snprintf(want, sizeof(want), "%s/obj.debug has build-id %s, the binary's is %s", o.dir,
		 got_id, asked_id);
	cr_assert_str_eq(miss.rejected, want);
	cr_assert_eq(miss.debuginfod, 0, "debuginfod was asked without DEBUGINFOD_URLS");
}

Test(debugsearch, a_file_with_another_crc_is_named_with_both)
{
	struct debug_miss miss = { .debuginfod = 0 };
	char want[PATH_MAX + 256];
	struct debug_query q;
	struct obj o;

	build(&o, "a", false);
	q = query(&o, "+:.debug");
	q.crc ^= 1;
	q.miss = &miss;
	expect(&q, NULL);
	snprintf(want, sizeof(want),
		 "%s/obj.debug has CRC %08x, the binary's .gnu_debuglink asks for %08x", o.dir,
		 o.crc, q.crc);
	cr_assert_str_eq(miss.rejected, want);
}

/* Searches with DEBUGINFOD_URLS at url (a fresh cache); returns debuginfod's answer. */
static int debuginfod_answer(const char *url)
{
	struct debug_miss miss = { .debuginfod = 0 };
	struct debug_query q;
	struct obj o;

	build(&o, "a", true);
	/* nothing on disk: only debuginfod can have it */
	hb_sh("rm '%s/obj.debug'", o.dir);
	q = query(&o, "+:.debug");
	q.miss = &miss;
	setenv("DEBUGINFOD_URLS", url, 1);
	setenv("DEBUGINFOD_CACHE_PATH", hb_tmp("cache"), 1);
	expect(&q, NULL);
	unsetenv("DEBUGINFOD_URLS");
	cr_assert_str_eq(miss.rejected, "");
	return miss.debuginfod;
}

Test(debugsearch, debuginfod_refused_says_so)
{
	/* port 1 on loopback: nobody listens */
	int rc = debuginfod_answer("http://127.0.0.1:1");

	cr_assert_eq(rc, -ECONNREFUSED, "%d", rc);
	cr_assert(strstr(debugsearch_debuginfod_reason(rc), "connection refused"), "%s",
		  debugsearch_debuginfod_reason(rc));
}

Test(debugsearch, debuginfod_without_the_build_id_says_so)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);
	char url[64];
	int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), rc;
	pid_t srv;

	/* a server that answers every request with 404, as debuginfod does for a build-id it lacks */
	cr_assert_geq(ls, 0);
	cr_assert_eq(bind(ls, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_assert_eq(listen(ls, 8), 0);
	cr_assert_eq(getsockname(ls, (struct sockaddr *)&a, &alen), 0);
	srv = fork();
	cr_assert_geq(srv, 0);
	if (srv == 0) {
		static const char resp[] = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n"
					   "Connection: close\r\n\r\n";
		char buf[4096];

		for (;;) {
			int c = accept(ls, NULL, NULL);

			if (c < 0)
				_exit(1);
			/* the request's head, then the answer */
			if (read(c, buf, sizeof(buf)) > 0 &&
			    write(c, resp, sizeof(resp) - 1) != (ssize_t)sizeof(resp) - 1)
				_exit(1);
			close(c);
		}
	}
	close(ls);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", ntohs(a.sin_port));
	rc = debuginfod_answer(url);
	kill(srv, SIGKILL);
	waitpid(srv, NULL, 0);
	cr_assert_eq(rc, -ENOENT, "%d", rc);
	cr_assert(strstr(debugsearch_debuginfod_reason(rc), "the server has no such build-id"),
		  "%s", debugsearch_debuginfod_reason(rc));
}

/* A dwz multifile: found by the .gnu_debugaltlink an object carries, checked by its build-id. */
Test(debugsearch, dwz_multifile_by_its_altlink)
{
	struct obj o, m;
	char sec[PATH_MAX + 16], want[PATH_MAX + 32], linked[PATH_MAX + 16];
	const unsigned char *id;
	const char *name;
	size_t idlen;
	struct debug_query q;
	FILE *f;
	Elf *elf;
	int fd;

	build(&o, "a", true);
	build(&m, "m", true);
	/* the multifile's name and build-id, as dwz writes them */
	snprintf(sec, sizeof(sec), "%s/altlink", o.dir);
	f = fopen(sec, "we");
	cr_assert_not_null(f);
	fputs("/nonexistent/.dwz/common.debug", f);
	fputc('\0', f);
	fwrite(m.id, 1, m.idlen, f);
	fclose(f);
	snprintf(linked, sizeof(linked), "%s/obj.debug", o.dir);
	hb_sh("objcopy --add-section .gnu_debugaltlink='%s' '%s'", sec, linked);

	fd = files_open_regular_ro(linked);
	cr_assert_geq(fd, 0);
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	cr_assert(debugsearch_altlink(elf, &name, &id, &idlen));
	cr_assert_str_eq(name, "/nonexistent/.dwz/common.debug");
	cr_assert_eq(idlen, m.idlen);
	cr_assert_arr_eq(id, m.id, idlen);

	/* beside the debug file, in .dwz/: the multifile (here, m's object) */
	snprintf(want, sizeof(want), "%s/.dwz/common.debug", o.dir);
	hb_sh("mkdir '%s/.dwz' && cp '%s' '%s'", o.dir, m.file, want);
	q = (struct debug_query){ .path = "+:.debug",
				  .file_name = linked,
				  .link = name,
				  .id = id,
				  .idlen = idlen,
				  .alt = true };
	expect(&q, want);
	/* one with another build-id is not it */
	hb_sh("cp '%s' '%s'", o.file, want);
	expect(&q, NULL);
	elf_end(elf);
	close(fd);
}

/* The frames at vaddr in d, callee first, as "f;g;h". */
static void frames_at(struct dbg_object *d, uint64_t vaddr, char *out, size_t len)
{
	struct sym_result r;
	size_t n = 0;

	out[0] = '\0';
	if (debuginfo_object__lookup(d, vaddr, &r))
		return;
	for (unsigned int i = 0; i < r.nlines && n < len; i++)
		n += (size_t)snprintf(out + n, len - n, "%s%s", i ? ";" : "",
				      r.lines[i].function ? r.lines[i].function : "?");
}

static struct dbg_object *object_of(const char *file, int *fd)
{
	struct dbg_object *d;

	/* objects are cached by build-id, and every copy here has the same one */
	debuginfo_cache_clear();
	*fd = files_open_regular_ro(file);
	cr_assert_geq(*fd, 0);
	cr_assert_eq(debuginfo_object__get(*fd, file, &d), 0);
	return d;
}

static void object_done(struct dbg_object *d, int fd)
{
	debuginfo_object__put(d);
	debuginfo_cache_clear();
	close(fd);
}

/*
 * The example's debug file through dwz (two copies, so that what they share
 * goes to the multifile, as in Debian's debug packages): the names of the
 * inlined frames in parse_request live in the multifile, found by the debug
 * file's .gnu_debugaltlink; with a FIFO in its place they are missing, and
 * nothing blocks.
 */
Test(debugsearch, dwz_multifile_names_inlined_frames)
{
	char dir[PATH_MAX], full[PATH_MAX + 8], a[PATH_MAX + 8], common[PATH_MAX + 16];
	char cmd[2 * PATH_MAX], line[128], line2[PATH_MAX], want[512] = "", got[512];
	unsigned long long start = 0, size = 0;
	uint64_t at = 0;
	struct dbg_object *d;
	int fd;

	snprintf(dir, sizeof(dir), "%s", hb_tmp("dwz"));
	snprintf(full, sizeof(full), "%s/full", dir);
	snprintf(a, sizeof(a), "%s/a", dir);
	snprintf(common, sizeof(common), "%s/common.debug", dir);
	cr_assert_not_null(realpath(hb_path("examples/alloc-service-static"), line2));
	hb_sh("mkdir '%s' && cd '%s' && cp '%s' full && cp full a && cp full b && "
	      "objcopy --only-keep-debug a a.debug && objcopy --only-keep-debug b b.debug && "
	      "dwz -m common.debug -M '%s' a.debug b.debug && "
	      "strip --strip-debug a && objcopy --add-gnu-debuglink=a.debug a",
	      dir, dir, line2, common);
	snprintf(cmd, sizeof(cmd), "nm -S '%s' | awk '$4 == \"parse_request\" {print $1, $2}'",
		 full);
	hb_sh_line(line, sizeof(line), cmd);
	cr_assert_eq(sscanf(line, "%llx %llx", &start, &size), 2, "nm: \"%s\"", line);

	/* an address in alloc_buffer, inlined into decode_header, inlined into parse_request */
	d = object_of(full, &fd);
	for (uint64_t v = start; v < start + size && !at; v++) {
		frames_at(d, v, want, sizeof(want));
		if (strncmp(want, "alloc_buffer;", 13) == 0)
			at = v;
	}
	object_done(d, fd);
	cr_assert(at, "no inlined alloc_buffer in parse_request");
	cr_assert(strstr(want, "decode_header;parse_request"), "%s", want);

	d = object_of(a, &fd);
	frames_at(d, at, got, sizeof(got));
	cr_assert_str_eq(got, want);
	cr_assert(debuginfo_object__debug_file(d));
	object_done(d, fd);

	hb_sh("mv '%s' '%s.away' && mkfifo '%s'", common, common, common);
	d = object_of(a, &fd);
	frames_at(d, at, got, sizeof(got));
	cr_assert(!strstr(got, "alloc_buffer"), "named without the multifile: %s", got);
	object_done(d, fd);
}
