// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The core-file memory image on cores written here byte by byte (the
 * kernel's layout: notes first, then the segments), then cut and garbled:
 * every prefix of a core and thousands of random corruptions either open
 * with a one-sentence error or read only what lies inside the file.
 */
#include <criterion/criterion.h>
#include <elf.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "heap/coreheap.h"

#define PAGE 4096ULL

struct cbuf {
	uint8_t *b;
	size_t n, cap;
};

static void put(struct cbuf *c, const void *p, size_t n)
{
	if (c->n + n > c->cap) {
		c->cap = (c->n + n) * 2;
		c->b = realloc(c->b, c->cap);
		cr_assert(c->b);
	}
	memcpy(c->b + c->n, p, n);
	c->n += n;
}

static void put_note(struct cbuf *c, const char *name, uint32_t type, const void *desc,
		     uint32_t len)
{
	Elf64_Nhdr nh = { .n_namesz = strlen(name) + 1, .n_descsz = len, .n_type = type };
	static const uint8_t zero[8];

	put(c, &nh, sizeof(nh));
	put(c, name, nh.n_namesz);
	put(c, zero, (4 - nh.n_namesz % 4) % 4);
	put(c, desc, len);
	put(c, zero, (4 - len % 4) % 4);
}

/* The test process image: two mappings of /bin/app, one of a deleted library, and a heap. */
#define APP_BASE  0x400000ULL
#define LIB_BASE  0x7f0000000000ULL
#define HEAP_BASE 0x10000000ULL

struct seg {
	uint64_t vaddr, filesz, memsz;
	uint32_t flags;
	uint8_t fill; /* bytes are fill + offset in the segment */
};

static const struct seg segs[] = {
	{ APP_BASE, PAGE, PAGE, PF_R, 0 }, /* the app's ELF header page (built below) */
	{ APP_BASE + PAGE, 0, 2 * PAGE, PF_R | PF_X, 0 }, /* code: not dumped */
	{ HEAP_BASE, 2 * PAGE, 2 * PAGE, PF_R | PF_W, 7 },
	{ HEAP_BASE + 2 * PAGE, PAGE, 3 * PAGE, PF_R | PF_W, 100 }, /* adjacent, partly dumped */
	{ LIB_BASE, PAGE, PAGE, PF_R | PF_W, 33 },
};
#define NSEGS (sizeof(segs) / sizeof(segs[0]))

static uint8_t seg_byte(size_t i, uint64_t off)
{
	return (uint8_t)(segs[i].fill + off);
}

/* An ELF header page with a build-id note "GNU" 0x01..0x14. */
static void app_header(uint8_t *page)
{
	Elf64_Ehdr *eh = (Elf64_Ehdr *)page;
	Elf64_Phdr *ph = (Elf64_Phdr *)(page + sizeof(*eh));
	Elf64_Nhdr *nh = (Elf64_Nhdr *)(page + 0x200);

	memset(page, 0, PAGE);
	memcpy(eh->e_ident, ELFMAG, SELFMAG);
	eh->e_ident[EI_CLASS] = ELFCLASS64;
	eh->e_ident[EI_DATA] = ELFDATA2LSB;
	eh->e_type = ET_DYN;
	eh->e_machine = EM_X86_64;
	eh->e_phoff = sizeof(*eh);
	eh->e_phentsize = sizeof(*ph);
	eh->e_phnum = 1;
	ph->p_type = PT_NOTE;
	ph->p_offset = 0x200;
	ph->p_vaddr = 0x200;
	ph->p_filesz = sizeof(*nh) + 4 + 20;
	nh->n_namesz = 4;
	nh->n_descsz = 20;
	nh->n_type = NT_GNU_BUILD_ID;
	memcpy(page + 0x200 + sizeof(*nh), "GNU", 4);
	for (int i = 0; i < 20; i++)
		page[0x200 + sizeof(*nh) + 4 + i] = (uint8_t)(i + 1);
}

static void file_note(struct cbuf *n)
{
	static const char names[] = "/bin/app\0/bin/app\0/lib/libx.so (deleted)";
	uint64_t v[2 + 3 * 3] = {
		3,
		PAGE,
		APP_BASE,
		APP_BASE + PAGE,
		0,
		APP_BASE + PAGE,
		APP_BASE + 3 * PAGE,
		1,
		LIB_BASE,
		LIB_BASE + PAGE,
		4,
	};
	uint8_t desc[sizeof(v) + sizeof(names)];

	memcpy(desc, v, sizeof(v));
	memcpy(desc + sizeof(v), names, sizeof(names));
	put_note(n, "CORE", NT_FILE, desc, sizeof(desc));
}

/* Where make_core_with puts the path AT_EXECFN points to: in the library's dumped page. */
#define EXECFN_AT (LIB_BASE + 0x100)

/*
 * The whole core, as the kernel lays it out; with an NT_AUXV whose AT_EXECFN
 * is execfn_addr when not 0, and the string execfn at EXECFN_AT when not NULL.
 */
static struct cbuf make_core_with(uint64_t execfn_addr, const char *execfn)
{
	struct cbuf c = { 0 }, n = { 0 };
	uint8_t psinfo[136] = { 0 }, prstatus[336] = { 0 }, page[PAGE];
	int32_t pid = 4242, tid = 4243;
	Elf64_Ehdr eh = { 0 };
	uint64_t off;

	memcpy(psinfo + 24, &pid, 4);
	memcpy(psinfo + 40, "my-service", 10);
	put_note(&n, "CORE", NT_PRPSINFO, psinfo, sizeof(psinfo));
	memcpy(prstatus + 32, &tid, 4);
	put_note(&n, "CORE", NT_PRSTATUS, prstatus, sizeof(prstatus));
	put_note(&n, "CORE", NT_PRSTATUS, prstatus, sizeof(prstatus));
	if (execfn_addr) {
		uint64_t auxv[] = { AT_PAGESZ, PAGE, AT_EXECFN, execfn_addr, AT_NULL, 0 };

		put_note(&n, "CORE", NT_AUXV, auxv, sizeof(auxv));
	}
	file_note(&n);

	memcpy(eh.e_ident, ELFMAG, SELFMAG);
	eh.e_ident[EI_CLASS] = ELFCLASS64;
	eh.e_ident[EI_DATA] = ELFDATA2LSB;
	eh.e_ident[EI_VERSION] = EV_CURRENT;
	eh.e_type = ET_CORE;
	eh.e_machine = EM_X86_64;
	eh.e_version = EV_CURRENT;
	eh.e_phoff = sizeof(eh);
	eh.e_ehsize = sizeof(eh);
	eh.e_phentsize = sizeof(Elf64_Phdr);
	eh.e_phnum = 1 + NSEGS;
	put(&c, &eh, sizeof(eh));
	off = sizeof(eh) + (1 + NSEGS) * sizeof(Elf64_Phdr);
	Elf64_Phdr note = { .p_type = PT_NOTE, .p_offset = off, .p_filesz = n.n };
	put(&c, &note, sizeof(note));
	off += n.n;
	for (size_t i = 0; i < NSEGS; i++) {
		Elf64_Phdr ph = {
			.p_type = PT_LOAD,
			.p_flags = segs[i].flags,
			.p_offset = off,
			.p_vaddr = segs[i].vaddr,
			.p_filesz = segs[i].filesz,
			.p_memsz = segs[i].memsz,
			.p_align = PAGE,
		};

		put(&c, &ph, sizeof(ph));
		off += segs[i].filesz;
	}
	put(&c, n.b, n.n);
	for (size_t i = 0; i < NSEGS; i++) {
		for (uint64_t o = 0; o < segs[i].filesz; o += PAGE) {
			for (uint64_t k = 0; k < PAGE; k++)
				page[k] = seg_byte(i, o + k);
			if (i == 0)
				app_header(page);
			if (segs[i].vaddr == LIB_BASE && execfn)
				memcpy(page + (EXECFN_AT - LIB_BASE), execfn, strlen(execfn) + 1);
			put(&c, page, PAGE);
		}
	}
	free(n.b);
	return c;
}

static struct cbuf make_core(void)
{
	return make_core_with(0, NULL);
}

static char dir[PATH_MAX];

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/heapbpf-coremem-XXXXXX");
	cr_assert(mkdtemp(dir));
}

static void teardown(void)
{
	char cmd[PATH_MAX + 16];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_expect_eq(system(cmd), 0);
}

static const char *write_file(const char *name, const void *b, size_t n)
{
	static char path[PATH_MAX + 64];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	cr_assert(f);
	cr_assert_eq(fwrite(b, 1, n, f), n);
	cr_assert_eq(fclose(f), 0);
	return path;
}

TestSuite(coremem, .init = setup, .fini = teardown);

Test(coremem, reads_what_the_core_holds)
{
	struct cbuf c = make_core();
	const char *path = write_file("core", c.b, c.n);
	struct core_file *cf;
	uint8_t buf[3 * PAGE];
	char err[256] = "";

	cr_assert_eq(memsrc_core_is_core(path), 1);
	cr_assert_eq(memsrc_core__open(path, &cf, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(cf->pid, 4242, "the process, not the thread: %d", cf->pid);
	cr_assert_str_eq(cf->comm, "my-service");
	cr_assert_eq(cf->threads, 2);
	cr_assert_eq(cf->nsegs, NSEGS);
	/* a read within a segment, and across two adjacent ones */
	cr_assert_eq(memsrc_core__read(cf, HEAP_BASE + 5, buf, 10), 0);
	for (int i = 0; i < 10; i++)
		cr_assert_eq(buf[i], seg_byte(2, 5 + i));
	cr_assert_eq(memsrc_core__read(cf, HEAP_BASE + 2 * PAGE - 4, buf, 8), 0);
	cr_assert_eq(buf[3], seg_byte(2, 2 * PAGE - 1));
	cr_assert_eq(buf[4], seg_byte(3, 0));
	cr_assert(memsrc_core__mapped(cf, HEAP_BASE, 3 * PAGE));
	/* past p_filesz: in memory, not in the file */
	cr_assert_eq(memsrc_core__read(cf, HEAP_BASE + 3 * PAGE, buf, 1), -EFAULT);
	cr_assert_eq(memsrc_core__read(cf, HEAP_BASE + 3 * PAGE - 1, buf, 2), -EFAULT);
	cr_assert_not(memsrc_core__mapped(cf, HEAP_BASE + 3 * PAGE, 1));
	cr_assert_not(memsrc_core__mapped(cf, APP_BASE + PAGE, 8), "code is not dumped");
	cr_assert_eq(memsrc_core__read(cf, 0x1000, buf, 1), -EFAULT, "a gap");
	cr_assert_eq(memsrc_core__read(cf, UINT64_MAX - 2, buf, 8), -EFAULT);
	cr_assert_eq(memsrc_core__read(cf, HEAP_BASE, buf, 0), 0);
	/* the memory source is the same reader */
	struct mem_source m = memsrc_core__mem_source(cf);
	cr_assert_eq(memsrc_read(&m, LIB_BASE + 1, buf, 1), 0);
	cr_assert_eq(buf[0], seg_byte(4, 1));
	cr_assert_not(memsrc_mapped(&m, LIB_BASE + PAGE, 1));
	memsrc_core__free(cf);
	free(c.b);
}

/* arm64's notes are x86-64's up to pr_pid: the same core with EM_AARCH64 reads the same */
Test(coremem, arm64_core_reads_the_same)
{
	struct cbuf c = make_core();
	struct core_file *cf;
	uint8_t buf[10];
	char err[256] = "";
	const char *path;

	((Elf64_Ehdr *)c.b)->e_machine = EM_AARCH64;
	path = write_file("core-arm64", c.b, c.n);
	cr_assert_eq(memsrc_core__open(path, &cf, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(cf->pid, 4242);
	cr_assert_str_eq(cf->comm, "my-service");
	cr_assert_eq(cf->threads, 2);
	cr_assert_eq(cf->nsegs, NSEGS);
	cr_assert_eq(memsrc_core__read(cf, HEAP_BASE + 5, buf, 10), 0);
	for (int i = 0; i < 10; i++)
		cr_assert_eq(buf[i], seg_byte(2, 5 + i));
	memsrc_core__free(cf);
	free(c.b);
}

/* gcore's pr_fname comes from a command line the process may write over; AT_EXECFN's path does not */
Test(coremem, named_by_the_path_it_was_executed_as)
{
	struct cbuf c = make_core_with(EXECFN_AT, "/usr/local/bin/a-service-with-a-long-name");
	const char *path = write_file("core", c.b, c.n);
	struct core_file *cf;
	char err[256] = "";

	cr_assert_eq(memsrc_core__open(path, &cf, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(cf->comm, "a-service-with-", "its base name, 15 bytes as comm is");
	memsrc_core__free(cf);
	free(c.b);
	/* the string not in the image (code is not dumped): pr_fname stays */
	c = make_core_with(APP_BASE + PAGE, NULL);
	path = write_file("core2", c.b, c.n);
	cr_assert_eq(memsrc_core__open(path, &cf, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(cf->comm, "my-service");
	memsrc_core__free(cf);
	free(c.b);
	/* an fexecve's "/dev/fd/N" names no program: pr_fname stays */
	c = make_core_with(EXECFN_AT, "/dev/fd/3");
	path = write_file("core3", c.b, c.n);
	cr_assert_eq(memsrc_core__open(path, &cf, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(cf->comm, "my-service");
	memsrc_core__free(cf);
	free(c.b);
}

Test(coremem, file_note_and_maps)
{
	struct cbuf c = make_core();
	const char *path = write_file("core", c.b, c.n);
	struct core_file *cf;
	struct proc_maps *pm;
	char err[256] = "", hex[128];

	cr_assert_eq(memsrc_core__open(path, &cf, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(cf->nmaps, 3);
	cr_assert_str_eq(cf->maps[0].path, "/bin/app");
	cr_assert_eq(cf->maps[1].start, APP_BASE + PAGE);
	cr_assert_eq(cf->maps[1].offset, PAGE, "page offsets are in pages");
	cr_assert_str_eq(cf->maps[2].path, "/lib/libx.so");
	cr_assert(cf->maps[2].deleted);
	cr_assert_eq(cf->maps[2].offset, 4 * PAGE);
	cr_assert_eq(memsrc_core__proc_maps(cf, &pm), 0);
	cr_assert_eq(pm->n, 3);
	cr_assert_str_eq(pm->v[0].perms, "r--p");
	cr_assert_str_eq(pm->v[1].perms, "r-xp");
	cr_assert_str_eq(pm->v[2].perms, "rw-p");
	cr_assert_eq(pm->pid, 4242);
	proc_maps__free(pm);
	cr_assert_eq(memsrc_core__build_id(cf, "/bin/app", hex, sizeof(hex)), 0);
	cr_assert_str_eq(hex, "0102030405060708090a0b0c0d0e0f1011121314");
	cr_assert_eq(memsrc_core__build_id(cf, "/lib/libx.so", hex, sizeof(hex)), -ENOENT,
		     "only its page at file offset 4 pages is mapped");
	cr_assert_eq(memsrc_core__build_id(cf, "/nowhere", hex, sizeof(hex)), -ENOENT);
	memsrc_core__free(cf);
	free(c.b);
}

/* Opens a (broken) core: 0 with a usable image, or an error of one sentence. */
static int open_checked(const char *path, const char *what)
{
	struct core_file *cf = NULL;
	char err[512] = "";
	uint8_t buf[64];
	int rc = memsrc_core__open(path, &cf, err, sizeof(err));

	if (rc) {
		cr_assert_lt(rc, 0, "%s", what);
		cr_assert_null(cf);
		cr_assert_neq(err[0], '\0', "%s: no message", what);
		cr_assert_null(strchr(err, '\n'), "%s: %s", what, err);
		cr_assert_str_neq(err + strlen(err) - 1, ".", "%s: %s", what, err);
		return rc;
	}
	/* whatever it says it maps can be read without a crash */
	for (size_t i = 0; i < cf->nsegs; i++)
		(void)memsrc_core__read(cf, cf->segs[i].vaddr, buf, sizeof(buf));
	for (size_t i = 0; i < cf->nmaps; i++) {
		char hex[128];

		(void)memsrc_core__read(cf, cf->maps[i].start, buf, sizeof(buf));
		(void)memsrc_core__build_id(cf, cf->maps[i].path, hex, sizeof(hex));
	}
	memsrc_core__free(cf);
	return 0;
}

Test(coremem, every_truncation_is_refused)
{
	struct cbuf c = make_core();
	char what[64];

	for (size_t len = 0; len < c.n; len += len < 2048 ? 1 : 61) {
		const char *path = write_file("cut", c.b, len);

		snprintf(what, sizeof(what), "cut at %zu", len);
		cr_assert_neq(open_checked(path, what), 0, "%s opened", what);
	}
	cr_assert_eq(open_checked(write_file("whole", c.b, c.n), "whole"), 0);
	free(c.b);
}

Test(coremem, garbled_cores)
{
	struct cbuf c = make_core();
	uint8_t *g = malloc(c.n);
	size_t hdr = 2048; /* headers and notes: where corruption matters */
	unsigned int seed = 15, refused = 0;

	cr_assert(g);
	for (int iter = 0; iter < 3000; iter++) {
		char what[64];

		memcpy(g, c.b, c.n);
		for (int k = 0; k < 1 + iter % 8; k++) {
			size_t at = rand_r(&seed) % hdr;

			g[at] = iter % 3 ? (uint8_t)rand_r(&seed) : 0xff;
		}
		snprintf(what, sizeof(what), "garbled #%d", iter);
		refused += open_checked(write_file("garbled", g, c.n), what) != 0;
	}
	/* the test would prove little if every corruption were harmless */
	cr_assert_gt(refused, 300, "only %u of 3000 refused", refused);
	free(g);
	free(c.b);
}

Test(coremem, not_a_core)
{
	struct cbuf c = make_core();
	char err[256];
	struct core_file *cf;
	const char *path;
	Elf64_Ehdr *eh = (Elf64_Ehdr *)c.b;

	path = write_file("text", "hello, world\n", 13);
	cr_assert_eq(memsrc_core_is_core(path), 0);
	cr_assert_lt(memsrc_core__open(path, &cf, err, sizeof(err)), 0);
	cr_assert(strstr(err, "shorter than an ELF header"), "%s", err);
	eh->e_type = ET_EXEC;
	path = write_file("exec", c.b, c.n);
	cr_assert_eq(memsrc_core_is_core(path), 0);
	cr_assert_lt(memsrc_core__open(path, &cf, err, sizeof(err)), 0);
	cr_assert(strstr(err, "not a core dump"), "%s", err);
	eh->e_type = ET_CORE;
	eh->e_machine = EM_RISCV;
	cr_assert_lt(memsrc_core__open(write_file("riscv", c.b, c.n), &cf, err, sizeof(err)), 0);
	cr_assert(strstr(err, "not an x86-64 or arm64 core"), "%s", err);
	cr_assert_eq(memsrc_core_is_core("/nonexistent/core"), -ENOENT);
	cr_assert_lt(memsrc_core__open("/nonexistent/core", &cf, err, sizeof(err)), 0);
	cr_assert(strstr(err, "cannot open /nonexistent/core"), "%s", err);
	free(c.b);
}

Test(coremem, hostile_file_note)
{
	struct cbuf c = make_core();
	struct core_file *cf;
	char err[256];
	uint8_t *p = memmem(c.b, c.n, "/bin/app", 8);
	uint64_t *count;

	cr_assert(p);
	/* the count, 16 + 3 * 24 bytes before the names */
	count = (uint64_t *)(p - 16 - 3 * 24);
	cr_assert_eq(*count, 3);
	*count = UINT64_MAX / 8;
	cr_assert_lt(memsrc_core__open(write_file("count", c.b, c.n), &cf, err, sizeof(err)), 0);
	cr_assert(strstr(err, "notes are garbled"), "%s", err);
	*count = 3;
	/* names without their terminating NUL */
	memset(p, 'x', 8 + 1 + 8 + 1 + 23);
	cr_assert_lt(memsrc_core__open(write_file("names", c.b, c.n), &cf, err, sizeof(err)), 0);
	cr_assert(strstr(err, "notes are garbled"), "%s", err);
	free(c.b);
}

/* More than 65534 segments: e_phnum is PN_XNUM and section 0's sh_info has the count. */
Test(coremem, pn_xnum)
{
	struct cbuf c = make_core();
	Elf64_Shdr sh = { .sh_info = 1 + NSEGS };
	struct core_file *cf;
	Elf64_Ehdr *eh;
	char err[256] = "";
	uint8_t b;
	size_t shoff = c.n;

	put(&c, &sh, sizeof(sh));
	eh = (Elf64_Ehdr *)c.b;
	eh->e_phnum = PN_XNUM;
	eh->e_shoff = shoff;
	eh->e_shnum = 1;
	eh->e_shentsize = sizeof(sh);
	cr_assert_eq(memsrc_core__open(write_file("xnum", c.b, c.n), &cf, err, sizeof(err)), 0,
		     "%s", err);
	cr_assert_eq(cf->nsegs, NSEGS);
	cr_assert_eq(memsrc_core__read(cf, LIB_BASE, &b, 1), 0);
	cr_assert_eq(b, seg_byte(4, 0));
	memsrc_core__free(cf);
	/* a count the file cannot hold */
	sh.sh_info = 0x7fffffff;
	memcpy(c.b + shoff, &sh, sizeof(sh)); /* unaligned in the buffer */
	cr_assert_lt(memsrc_core__open(write_file("xnum2", c.b, c.n), &cf, err, sizeof(err)), 0);
	cr_assert(strstr(err, "program headers are missing or cut off"), "%s", err);
	/* a section header past the end */
	eh = (Elf64_Ehdr *)c.b;
	eh->e_shoff = c.n;
	cr_assert_lt(memsrc_core__open(write_file("xnum3", c.b, c.n), &cf, err, sizeof(err)), 0);
	cr_assert(strstr(err, "program headers are missing or cut off"), "%s", err);
	free(c.b);
}
