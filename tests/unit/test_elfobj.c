// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * elf_object on fixtures built at run time with gcc (a PIE executable, a
 * shared object, stripped copies, one without build-id or version string),
 * checked against what nm and readelf print for the same files.
 */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "symbols/elfobj.h"
#include "harness.h"
#include "symbols/proc.h"

#define JE_VERSION "5.3.0-0-g54eaed1d8b56b1aa528be3bdd1877e59c56fa90c"

static const char fixture_src[] =
	"/* heapbpf elfobj test fixture */\n"
	"int fx_data = 42;\n"
	"int fx_bss;\n"
	"__attribute__((used)) static long fx_static_data = 7;\n"
	"__attribute__((used)) static long fx_static_bss;\n"
	"#ifndef FX_NOVER\n"
	"const char fx_version[] = \"" JE_VERSION "\";\n"
	"#define FX_V(i) fx_version[(i) % 8]\n"
	"#else\n"
	"#define FX_V(i) (i)\n"
	"#endif\n"
	"\n"
	"__attribute__((noinline, used)) static int fx_static_func(int x)\n"
	"{\n"
	"	int i, s = 0;\n"
	"\n"
	"	for (i = 0; i < x; i++)\n"
	"		s += i * fx_static_data + FX_V(i);\n"
	"	fx_static_bss += s;\n"
	"	return s;\n"
	"}\n"
	"\n"
	"__attribute__((noinline)) int fx_global_func(int x)\n"
	"{\n"
	"	return fx_static_func(x) + fx_bss + fx_data;\n"
	"}\n"
	"\n"
	"int fx_exported(int x)\n"
	"{\n"
	"	return fx_global_func(x) * 2;\n"
	"}\n"
	"\n"
	"#ifndef FX_LIB\n"
	"int main(int argc, char **argv)\n"
	"{\n"
	"	(void)argv;\n"
	"	return fx_exported(argc) & 1;\n"
	"}\n"
	"#endif\n";

static char dir[64];
static char src[128], pie[128], so[128], pie_stripped[128], so_stripped[128], plain[128];
static char notelf[128], empty[128];

static void write_file(const char *path, const char *data, size_t len)
{
	FILE *f = fopen(path, "w");

	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	cr_assert_eq(fwrite(data, 1, len, f), len);
	cr_assert_eq(fclose(f), 0);
}

static void build_fixtures(void)
{
	strcpy(dir, "/tmp/heapbpf-elfobj-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	snprintf(src, sizeof(src), "%s/fx.c", dir);
	snprintf(pie, sizeof(pie), "%s/fx-pie", dir);
	snprintf(so, sizeof(so), "%s/libfx.so", dir);
	snprintf(pie_stripped, sizeof(pie_stripped), "%s/fx-pie-stripped", dir);
	snprintf(so_stripped, sizeof(so_stripped), "%s/libfx-stripped.so", dir);
	snprintf(plain, sizeof(plain), "%s/fx-plain", dir);
	snprintf(notelf, sizeof(notelf), "%s/notelf", dir);
	snprintf(empty, sizeof(empty), "%s/empty", dir);
	write_file(src, fixture_src, strlen(fixture_src));
	hb_sh("gcc -O1 -g -fPIE -pie -Wl,--build-id=sha1 -o %s %s", pie, src);
	hb_sh("gcc -O1 -g -fPIC -shared -DFX_LIB -Wl,--build-id=sha1 -o %s %s", so, src);
	hb_sh("gcc -O1 -fPIE -pie -DFX_NOVER -Wl,--build-id=none -o %s %s", plain, src);
	hb_sh("strip -o %s %s", pie_stripped, pie);
	hb_sh("strip -o %s %s", so_stripped, so);
	write_file(notelf, "#!/bin/sh\necho this is not an ELF file\n", 39);
	write_file(empty, "", 0);
}

static void remove_fixtures(void)
{
	const char *files[] = { src, pie, so, pie_stripped, so_stripped, plain, notelf, empty };

	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		if (files[i][0])
			unlink(files[i]);
	}
	if (dir[0])
		rmdir(dir);
}

TestSuite(elfobj, .init = build_fixtures, .fini = remove_fixtures, .timeout = 60);

static struct elf_object *open_ok(const char *path)
{
	struct elf_object *o = NULL;
	int err = elfobj__open(path, &o);

	cr_assert_eq(err, 0, "%s: %d", path, err);
	cr_assert_not_null(o);
	return o;
}

/* ---- the oracles: nm and readelf ---------------------------------------- */

struct nm_sym {
	uint64_t addr, size;
	bool sized;
	char type; /* nm's letter */
};

/* What "nm [-D] -S --defined-only path" says about name. */
static struct nm_sym nm_lookup(const char *path, const char *name, bool dynamic)
{
	char cmd[512], line[512];
	struct nm_sym r = { 0 };
	bool found = false;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "nm %s -S --defined-only %s", dynamic ? "-D" : "", path);
	p = popen(cmd, "r");
	cr_assert_not_null(p);
	while (fgets(line, sizeof(line), p)) {
		char f[4][256];
		int n = sscanf(line, "%255s %255s %255s %255s", f[0], f[1], f[2], f[3]);

		if (n == 4 && strcmp(f[3], name) == 0) {
			r.addr = strtoull(f[0], NULL, 16);
			r.size = strtoull(f[1], NULL, 16);
			r.sized = true;
			r.type = f[2][0];
			found = true;
		} else if (n == 3 && strcmp(f[2], name) == 0) {
			r.addr = strtoull(f[0], NULL, 16);
			r.type = f[1][0];
			found = true;
		}
	}
	pclose(p);
	cr_assert(found, "nm does not list %s in %s", name, path);
	return r;
}

/* The build-id as "readelf -n" prints it, or "" when there is none. */
static void readelf_build_id(const char *path, char *buf, size_t len)
{
	char cmd[512], line[512];
	FILE *p;

	buf[0] = '\0';
	snprintf(cmd, sizeof(cmd), "readelf -n %s", path);
	p = popen(cmd, "r");
	cr_assert_not_null(p);
	while (fgets(line, sizeof(line), p)) {
		char *b = strstr(line, "Build ID: ");

		if (b) {
			snprintf(buf, len, "%s", b + strlen("Build ID: "));
			buf[strcspn(buf, " \n")] = '\0';
		}
	}
	pclose(p);
}

struct load_seg {
	uint64_t offset, vaddr, filesz, memsz;
	char flags[4];
};

/* The PT_LOAD headers as "readelf -lW" prints them. */
static size_t readelf_loads(const char *path, struct load_seg *v, size_t max)
{
	char cmd[512], line[512];
	size_t n = 0;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "readelf -lW %s", path);
	p = popen(cmd, "r");
	cr_assert_not_null(p);
	while (fgets(line, sizeof(line), p)) {
		char fl[3][4] = { "", "", "" };
		uint64_t paddr;
		int k;

		if (n == max)
			break;
		k = sscanf(line,
			   " LOAD 0x%" SCNx64 " 0x%" SCNx64 " 0x%" SCNx64 " 0x%" SCNx64
			   " 0x%" SCNx64 " %3s %3s %3s",
			   &v[n].offset, &v[n].vaddr, &paddr, &v[n].filesz, &v[n].memsz, fl[0],
			   fl[1], fl[2]);
		if (k < 6)
			continue;
		/* flags are "R", "R E", "RW", ...; the last field is the alignment */
		snprintf(v[n].flags, sizeof(v[n].flags), "%s%s", fl[0],
			 k == 8 && fl[1][0] != '0' ? fl[1] : "");
		n++;
	}
	pclose(p);
	cr_assert_gt(n, 0, "no LOAD segments in %s", path);
	return n;
}

static void *read_at(const char *path, uint64_t off, size_t len)
{
	void *buf = malloc(len);
	int fd = open(path, O_RDONLY);

	cr_assert_not_null(buf);
	cr_assert_geq(fd, 0);
	cr_assert_eq(pread(fd, buf, len, off), (ssize_t)len);
	close(fd);
	return buf;
}

/* ---- symbols ------------------------------------------------------------ */

struct sym_case {
	const char *name;
	unsigned char type, bind;
};

static const struct sym_case fixture_syms[] = {
	{ "fx_global_func", STT_FUNC, STB_GLOBAL }, { "fx_static_func", STT_FUNC, STB_LOCAL },
	{ "fx_exported", STT_FUNC, STB_GLOBAL },    { "fx_data", STT_OBJECT, STB_GLOBAL },
	{ "fx_bss", STT_OBJECT, STB_GLOBAL },	    { "fx_static_data", STT_OBJECT, STB_LOCAL },
	{ "fx_static_bss", STT_OBJECT, STB_LOCAL }, { "fx_version", STT_OBJECT, STB_GLOBAL },
};

static void check_symbols(const char *path, int etype)
{
	struct elf_object *o = open_ok(path);

	cr_assert_eq(elfobj__type(o), etype);
	cr_assert(elfobj__has_symtab(o));
	for (size_t i = 0; i < sizeof(fixture_syms) / sizeof(fixture_syms[0]); i++) {
		const struct sym_case *c = &fixture_syms[i];
		const struct elf_sym *s = elfobj__sym_by_name(o, c->name);
		struct nm_sym n = nm_lookup(path, c->name, false);

		cr_assert_not_null(s, "%s: %s not found", path, c->name);
		cr_assert_str_eq(s->name, c->name);
		cr_assert_eq(s->addr, n.addr, "%s: %s at %#" PRIx64 ", nm says %#" PRIx64, path,
			     c->name, s->addr, n.addr);
		cr_assert(n.sized);
		cr_assert_eq(s->size, n.size, "%s: size of %s", path, c->name);
		cr_assert_eq(s->type, c->type, "%s: type of %s", path, c->name);
		cr_assert_eq(s->bind, c->bind, "%s: binding of %s", path, c->name);
	}
	cr_assert_null(elfobj__sym_by_name(o, "fx_no_such_symbol"));
	cr_assert_null(elfobj__sym_by_name(o, "fx_global"));	   /* a prefix only */
	cr_assert_null(elfobj__sym_by_name(o, "fx_global_func2")); /* longer */
	cr_assert_null(elfobj__sym_by_name(o, ""));
	elfobj__free(o);
}

Test(elfobj, symbols_of_pie)
{
	check_symbols(pie, ET_DYN);
}

Test(elfobj, symbols_of_shared_object)
{
	check_symbols(so, ET_DYN);
}

Test(elfobj, sym_by_suffix)
{
	struct elf_object *o = open_ok(pie);
	const struct elf_sym *s;

	s = elfobj__sym_by_suffix(o, "_global_func", STT_FUNC);
	cr_assert_not_null(s);
	cr_assert_str_eq(s->name, "fx_global_func");
	s = elfobj__sym_by_suffix(o, "static_bss", STT_OBJECT);
	cr_assert_not_null(s);
	cr_assert_str_eq(s->name, "fx_static_bss");
	s = elfobj__sym_by_suffix(o, "fx_version", STT_OBJECT);
	cr_assert_not_null(s);
	cr_assert_eq(s, elfobj__sym_by_name(o, "fx_version"));
	/* the type must match too */
	cr_assert_null(elfobj__sym_by_suffix(o, "_global_func", STT_OBJECT));
	cr_assert_null(elfobj__sym_by_suffix(o, "fx_data", STT_FUNC));
	cr_assert_null(elfobj__sym_by_suffix(o, "_no_such_suffix", STT_FUNC));
	elfobj__free(o);
}

static void check_func_at(const char *path, const char *name)
{
	struct elf_object *o = open_ok(path);
	struct nm_sym n = nm_lookup(path, name, false);
	const struct elf_sym *s;

	cr_assert_gt(n.size, 2);
	s = elfobj__func_at(o, n.addr);
	cr_assert_not_null(s, "%s: nothing at the start of %s", path, name);
	cr_assert_str_eq(s->name, name);
	s = elfobj__func_at(o, n.addr + n.size / 2);
	cr_assert_not_null(s);
	cr_assert_str_eq(s->name, name);
	s = elfobj__func_at(o, n.addr + n.size - 1);
	cr_assert_not_null(s);
	cr_assert_str_eq(s->name, name);
	/* just past the end: nothing, or the function that starts right there */
	s = elfobj__func_at(o, n.addr + n.size);
	if (s) {
		cr_assert_str_neq(s->name, name);
		cr_assert_eq(s->addr, n.addr + n.size, "%s at %#" PRIx64, s->name, s->addr);
	}
	/* and nothing at the ELF header */
	cr_assert_null(elfobj__func_at(o, 0));
	elfobj__free(o);
}

Test(elfobj, func_at)
{
	check_func_at(pie, "fx_global_func");
	check_func_at(pie, "fx_static_func");
	check_func_at(pie, "fx_exported");
	check_func_at(pie, "main");
	check_func_at(so, "fx_global_func");
	check_func_at(so, "fx_static_func");
}

Test(elfobj, stripped_pie)
{
	struct elf_object *o = open_ok(pie_stripped);

	cr_assert_not(elfobj__has_symtab(o));
	/* local symbols went with .symtab; a PIE does not export its functions */
	cr_assert_null(elfobj__sym_by_name(o, "fx_static_func"));
	cr_assert_null(elfobj__sym_by_name(o, "fx_static_data"));
	cr_assert_null(elfobj__sym_by_name(o, "fx_global_func"));
	/* undefined imports in .dynsym are not symbols of this object */
	cr_assert_null(elfobj__sym_by_name(o, "__libc_start_main"));
	elfobj__free(o);

	/* the unstripped one had them all */
	o = open_ok(pie);
	cr_assert(elfobj__has_symtab(o));
	cr_assert_not_null(elfobj__sym_by_name(o, "fx_static_func"));
	elfobj__free(o);
}

Test(elfobj, stripped_shared_object_keeps_dynsym)
{
	static const char *const exported[] = { "fx_global_func", "fx_exported", "fx_data",
						"fx_bss", "fx_version" };
	struct elf_object *o = open_ok(so_stripped);

	cr_assert_not(elfobj__has_symtab(o));
	for (size_t i = 0; i < sizeof(exported) / sizeof(exported[0]); i++) {
		const struct elf_sym *s = elfobj__sym_by_name(o, exported[i]);
		struct nm_sym n = nm_lookup(so_stripped, exported[i], true);

		cr_assert_not_null(s, "%s not in .dynsym", exported[i]);
		cr_assert_eq(s->addr, n.addr, "%s", exported[i]);
		cr_assert_eq(s->size, n.size, "%s", exported[i]);
		cr_assert_eq(s->bind, STB_GLOBAL);
		/* and the same address as in the unstripped object */
		cr_assert_eq(s->addr, nm_lookup(so, exported[i], false).addr);
	}
	cr_assert_null(elfobj__sym_by_name(o, "fx_static_func"));
	cr_assert_null(elfobj__sym_by_name(o, "fx_static_bss"));
	{
		struct nm_sym n = nm_lookup(so_stripped, "fx_global_func", true);
		const struct elf_sym *s = elfobj__func_at(o, n.addr + 1);

		cr_assert_not_null(s);
		cr_assert_str_eq(s->name, "fx_global_func");
	}
	elfobj__free(o);
}

/* ---- build-id ----------------------------------------------------------- */

Test(elfobj, build_id)
{
	const char *const paths[] = { pie, so, pie_stripped, so_stripped };
	char want[256], first[256] = "";

	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		struct elf_object *o = open_ok(paths[i]);
		const char *id = elfobj__build_id(o);

		readelf_build_id(paths[i], want, sizeof(want));
		cr_assert_eq(strlen(want), 40, "readelf: \"%s\"", want);
		cr_assert_not_null(id, "%s", paths[i]);
		cr_assert_str_eq(id, want, "%s", paths[i]);
		if (i == 0)
			snprintf(first, sizeof(first), "%s", id);
		elfobj__free(o);
	}
	/* strip keeps the note: the stripped PIE has the PIE's id */
	{
		struct elf_object *o = open_ok(pie_stripped);

		cr_assert_str_eq(elfobj__build_id(o), first);
		elfobj__free(o);
	}
}

Test(elfobj, no_build_id)
{
	struct elf_object *o = open_ok(plain);
	char want[256];

	readelf_build_id(plain, want, sizeof(want));
	cr_assert_str_empty(want);
	cr_assert_null(elfobj__build_id(o));
	elfobj__free(o);
}

/* ---- addresses and file offsets ----------------------------------------- */

static void check_offsets(const char *path)
{
	struct elf_object *o = open_ok(path);
	const struct elf_sym *s;
	uint64_t off, va;
	char *bytes;

	/* the version string: its file bytes are the string */
	s = elfobj__sym_by_name(o, "fx_version");
	cr_assert_not_null(s, "%s", path);
	cr_assert_eq(elfobj__vaddr_to_offset(o, s->addr, &off), 0);
	bytes = read_at(path, off, sizeof(JE_VERSION));
	cr_assert_str_eq(bytes, JE_VERSION);
	free(bytes);
	cr_assert_eq(elfobj__offset_to_vaddr(o, off, &va), 0);
	cr_assert_eq(va, s->addr);

	/* an initialized int: 42 in the file */
	s = elfobj__sym_by_name(o, "fx_data");
	cr_assert_not_null(s);
	cr_assert_eq(elfobj__vaddr_to_offset(o, s->addr, &off), 0);
	bytes = read_at(path, off, sizeof(int));
	cr_assert_eq(*(int *)bytes, 42);
	free(bytes);
	cr_assert_eq(elfobj__offset_to_vaddr(o, off, &va), 0);
	cr_assert_eq(va, s->addr);

	/* code */
	s = elfobj__sym_by_name(o, "fx_global_func");
	cr_assert_not_null(s);
	cr_assert_eq(elfobj__vaddr_to_offset(o, s->addr + 3, &off), 0);
	cr_assert_eq(elfobj__offset_to_vaddr(o, off, &va), 0);
	cr_assert_eq(va, s->addr + 3);

	/* .bss has no bytes in the file */
	s = elfobj__sym_by_name(o, "fx_bss");
	cr_assert_not_null(s);
	cr_assert_eq(elfobj__vaddr_to_offset(o, s->addr, &off), -ENOENT);

	/* far outside */
	cr_assert_eq(elfobj__vaddr_to_offset(o, 0x7fff00000000ull, &off), -ENOENT);
	cr_assert_eq(elfobj__offset_to_vaddr(o, 1ull << 40, &va), -ENOENT);
	elfobj__free(o);
}

Test(elfobj, vaddr_offset_round_trip)
{
	check_offsets(pie);
	check_offsets(so);
	check_offsets(so_stripped);
}

Test(elfobj, offsets_match_program_headers)
{
	struct elf_object *o = open_ok(pie);
	struct load_seg v[16];
	size_t n = readelf_loads(pie, v, 16);

	for (size_t i = 0; i < n; i++) {
		uint64_t off, va;

		if (!v[i].filesz)
			continue;
		cr_assert_eq(elfobj__vaddr_to_offset(o, v[i].vaddr, &off), 0);
		cr_assert_eq(off, v[i].offset);
		cr_assert_eq(elfobj__vaddr_to_offset(o, v[i].vaddr + v[i].filesz - 1, &off), 0);
		cr_assert_eq(off, v[i].offset + v[i].filesz - 1);
		cr_assert_eq(elfobj__offset_to_vaddr(o, v[i].offset + v[i].filesz - 1, &va), 0);
		cr_assert_eq(va, v[i].vaddr + v[i].filesz - 1);
	}
	elfobj__free(o);
}

static void check_writable(const char *path)
{
	static const char *const rw[] = { "fx_data", "fx_bss", "fx_static_data", "fx_static_bss" };
	static const char *const ro[] = { "fx_global_func", "fx_static_func", "fx_version" };
	struct elf_object *o = open_ok(path);

	for (size_t i = 0; i < sizeof(rw) / sizeof(rw[0]); i++) {
		const struct elf_sym *s = elfobj__sym_by_name(o, rw[i]);

		cr_assert_not_null(s);
		cr_assert(elfobj__vaddr_writable(o, s->addr, s->size), "%s: %s", path, rw[i]);
		cr_assert(elfobj__vaddr_writable(o, s->addr, 1), "%s: %s", path, rw[i]);
	}
	for (size_t i = 0; i < sizeof(ro) / sizeof(ro[0]); i++) {
		const struct elf_sym *s = elfobj__sym_by_name(o, ro[i]);

		cr_assert_not_null(s);
		cr_assert_not(elfobj__vaddr_writable(o, s->addr, 1), "%s: %s", path, ro[i]);
	}
	/* a range that starts in .bss but runs far past the segment */
	cr_assert_not(elfobj__vaddr_writable(o, elfobj__sym_by_name(o, "fx_bss")->addr, 1 << 20));
	cr_assert_not(elfobj__vaddr_writable(o, 0x7fff00000000ull, 1));
	elfobj__free(o);
}

Test(elfobj, vaddr_writable)
{
	check_writable(pie);
	check_writable(so);
}

/* ---- load bias ---------------------------------------------------------- */

Test(elfobj, load_bias_made_up_mapping)
{
	struct elf_object *o = open_ok(pie);
	struct load_seg v[16];
	size_t n = readelf_loads(pie, v, 16);
	const uint64_t base = 0x7f0000000000ull;
	uint64_t bias = 0;

	/* the first PT_LOAD of a PIE maps the file from offset 0 at vaddr 0 */
	cr_assert_eq(v[0].vaddr, 0);
	cr_assert_eq(v[0].offset, 0);
	cr_assert_eq(elfobj__load_bias(o, base, 0, &bias), 0);
	cr_assert_eq(bias, base);

	/* any later segment's mapping is refused: it cannot identify the bias alone */
	for (size_t i = 1; i < n; i++) {
		uint64_t page_off = v[i].offset & ~0xfffull;

		if (page_off == 0)
			continue;
		cr_assert_eq(elfobj__load_bias(o, base + v[i].vaddr - (v[i].offset - page_off),
					       page_off, &bias),
			     -EINVAL, "segment %zu", i);
	}
	/* a file offset beyond every segment */
	cr_assert_eq(elfobj__load_bias(o, base, 1ull << 40, &bias), -EINVAL);
	elfobj__free(o);
}

/*
 * The lowest mapping of a loaded object, as the kernel and ld.so made it, must
 * give the one true bias (runtime address - st_value of a symbol); every other
 * mapping is refused, since read-only data and RELRO can share a file page.
 */
static void check_bias_of_loaded(const char *path, const char *sym, uint64_t runtime_addr)
{
	struct proc_maps *pm = NULL;
	struct load_seg v[16];
	const struct elf_sym *s;
	struct elf_object *o;
	uint64_t want, span = 0;
	size_t nseg, checked = 0;

	o = open_ok(path);
	s = elfobj__sym_by_name(o, sym);
	cr_assert_not_null(s);
	want = runtime_addr - s->addr;
	nseg = readelf_loads(path, v, 16);
	for (size_t i = 0; i < nseg; i++) {
		if (v[i].vaddr + v[i].memsz > span)
			span = v[i].vaddr + v[i].memsz;
	}
	cr_assert_eq(proc_maps__read(getpid(), &pm), 0);
	for (size_t i = 0; i < pm->n; i++) {
		const struct proc_map *m = &pm->v[i];
		uint64_t bias = 0;

		/* the loaded image only (Criterion also maps its own file to read it) */
		if (!m->path || strcmp(m->path, path) != 0 || m->start < want ||
		    m->end > want + span + 0xfff)
			continue;
		/* only the lowest mapping (the first PT_LOAD) identifies the bias */
		if (m->offset != v[0].offset) {
			cr_expect_eq(elfobj__load_bias(o, m->start, m->offset, &bias), -EINVAL,
				     "mapping at offset %#" PRIx64 " must be refused", m->offset);
			continue;
		}
		cr_assert_eq(elfobj__load_bias(o, m->start, m->offset, &bias), 0);
		cr_expect_eq(bias, want,
			     "%s: mapping %#" PRIx64 "-%#" PRIx64 " %s offset %#" PRIx64
			     ": bias %#" PRIx64 ", true bias %#" PRIx64,
			     path, m->start, m->end, m->perms, m->offset, bias, want);
		checked++;
	}
	cr_assert_eq(checked, 1);
	proc_maps__free(pm);
	elfobj__free(o);
}

__attribute__((noinline)) int heapbpf_elfobj_test_here(int x);
__attribute__((noinline)) int heapbpf_elfobj_test_here(int x)
{
	return x + 1;
}

Test(elfobj, load_bias_of_self)
{
	char exe[PATH_MAX];
	ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	cr_assert_gt(len, 0);
	exe[len] = '\0';
	check_bias_of_loaded(exe, "heapbpf_elfobj_test_here", (uintptr_t)&heapbpf_elfobj_test_here);
}

/*
 * The small fixture library: its read-only data and its RELRO/data segment
 * share a file page, so two mappings start at the same file offset.
 */
Test(elfobj, load_bias_of_dlopened_library)
{
	void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
	void *f;

	cr_assert_not_null(h, "%s", dlerror());
	f = dlsym(h, "fx_global_func");
	cr_assert_not_null(f);
	check_bias_of_loaded(so, "fx_global_func", (uintptr_t)f);
	dlclose(h);
}

/* ---- jemalloc version --------------------------------------------------- */

Test(elfobj, jemalloc_version_in_objects)
{
	const char *const paths[] = { pie, so, pie_stripped, so_stripped };
	char buf[128];

	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		struct elf_object *o = open_ok(paths[i]);

		memset(buf, 'x', sizeof(buf));
		cr_assert_eq(elfobj__jemalloc_version(o, buf, sizeof(buf)), 0, "%s", paths[i]);
		cr_assert_str_eq(buf, JE_VERSION);
		/* exactly long enough for the string and its NUL */
		cr_assert_eq(elfobj__jemalloc_version(o, buf, sizeof(JE_VERSION)), 0);
		cr_assert_str_eq(buf, JE_VERSION);
		cr_assert_lt(elfobj__jemalloc_version(o, buf, sizeof(JE_VERSION) - 1), 0);
		elfobj__free(o);
	}
}

Test(elfobj, no_jemalloc_version)
{
	struct elf_object *o = open_ok(plain);
	char buf[128];

	cr_assert_eq(elfobj__jemalloc_version(o, buf, sizeof(buf)), -ENOENT);
	elfobj__free(o);
}

static const char *scan(const char *buf, size_t len, size_t *mlen)
{
	*mlen = 0;
	return elfobj_jemalloc_version_scan(buf, len, mlen);
}

#define HASH40 "54eaed1d8b56b1aa528be3bdd1877e59c56fa90c"

Test(elfobj, version_scan_crafted)
{
#define MID_HEAD "GCC: (Debian 12.2.0-14) 12.2.0\0<jemalloc>: "
	const char mid[] = MID_HEAD "\0" JE_VERSION "\0tail";
	const char end[] = "\0\0abc\0" JE_VERSION; /* scanned without its NUL */
	const char *m;
	size_t n;

	m = scan(mid, sizeof(mid) - 1, &n);
	cr_assert_eq(m, mid + sizeof(MID_HEAD), "offset %td", m ? m - mid : -1);
	cr_assert_eq(n, strlen(JE_VERSION));
	cr_assert_eq(memcmp(m, JE_VERSION, n), 0);

	m = scan(end, sizeof(end) - 1, &n);
	cr_assert_eq(m, end + 6);
	cr_assert_eq(n, strlen(JE_VERSION));

	/* the string alone, then the whole buffer empty */
	m = scan(JE_VERSION, strlen(JE_VERSION), &n);
	cr_assert_eq(m, (const char *)JE_VERSION);
	cr_assert_null(scan("", 0, &n));

	/* other version numbers */
	{
		const char v[] = "x\0"
				 "10.21.300-1234-g" HASH40;

		m = scan(v, sizeof(v), &n);
		cr_assert_eq(m, v + 2);
		cr_assert_eq(n, sizeof(v) - 3);
	}
}

Test(elfobj, version_scan_rejects)
{
	static const char *const bad[] = {
		"5.3.0-0-g54eaed1d8b56b1aa528be3bdd1877e59c56fa90c1", /* 41 hex */
		"5.3.0-0-g54eaed1d8b56b1aa528be3bdd1877e59c56fa9zc",  /* not hex */
		"5.3-0-g" HASH40,				      /* two dotted groups */
		"5-0-g" HASH40,					      /* one */
		"5.3.0-g" HASH40,				      /* no commit count */
		"5.3.0--g" HASH40,
		".3.0-0-g" HASH40,
		"-g" HASH40,
		"g" HASH40,
		HASH40,
	};
	size_t n;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_assert_null(scan(bad[i], strlen(bad[i]) + 1, &n), "case %zu: %s", i, bad[i]);
		cr_assert_null(scan(bad[i], strlen(bad[i]), &n), "case %zu without NUL", i);
	}
	/* cut inside the hash */
	cr_assert_null(scan(JE_VERSION, strlen(JE_VERSION) - 1, &n));
}

Test(elfobj, version_scan_skips_bad_candidates)
{
	/* a near miss first, the real one after it */
	const char buf[] = "5.3-0-g" HASH40 "\0"
			   "1.2.3-0-g" HASH40 "1\0" JE_VERSION "\0";
	const char *want = buf + sizeof("5.3-0-g" HASH40) + sizeof("1.2.3-0-g" HASH40 "1");
	const char *m;
	size_t n;

	m = scan(buf, sizeof(buf) - 1, &n);
	cr_assert_eq(m, want, "offset %td, want %td", m ? m - buf : -1, want - buf);
	cr_assert_eq(n, strlen(JE_VERSION));
}

Test(elfobj, version_scan_glued_prefix)
{
	/* a letter glued to the front: no match, or a match that leaves the letter out */
	const char buf[] = "x" JE_VERSION;
	const char *m;
	size_t n;

	m = scan(buf, sizeof(buf), &n);
	if (m) {
		cr_assert_eq(m, buf + 1);
		cr_assert_eq(n, strlen(JE_VERSION));
	}
	/* a separator in front is fine */
	{
		const char sep[] = "jemalloc " JE_VERSION;

		m = scan(sep, sizeof(sep), &n);
		cr_assert_eq(m, sep + 9);
		cr_assert_eq(n, strlen(JE_VERSION));
	}
}

/* ---- open errors -------------------------------------------------------- */

Test(elfobj, open_errors)
{
	struct elf_object *o = NULL;
	char missing[160];

	snprintf(missing, sizeof(missing), "%s/no-such-file", dir);
	cr_assert_eq(elfobj__open(missing, &o), -ENOENT);
	cr_assert_null(o);
	cr_assert_eq(elfobj__open(notelf, &o), -ENOEXEC);
	cr_assert_null(o);
	cr_assert_eq(elfobj__open(empty, &o), -ENOEXEC);
	cr_assert_null(o);
	cr_assert_eq(elfobj__open(src, &o), -ENOEXEC);
	cr_assert_null(o);
	elfobj__free(NULL);
}
