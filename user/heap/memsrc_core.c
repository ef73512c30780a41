// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "symbols/elfobj.h"
#include "util/errmsg.h"
#include "util/files.h"
#include "heap/memsrc_core.h"

/* More than any process has (the kernel's default vm.max_map_count is 65530). */
#define CORE_MAX_SEGMENTS (1U << 22)
#define CORE_MAX_MAPPINGS (1U << 22)

/*
 * struct elf_prpsinfo and struct elf_prstatus offsets (include/uapi/linux/elfcore.h),
 * the same on x86-64 and arm64 (LP64, 32-bit uid_t and pid_t): only the
 * registers after pr_pid differ, and no register is read here
 */
#define PRPSINFO_PID   24
#define PRPSINFO_FNAME 40
#define PRPSINFO_SIZE  136
#define PRSTATUS_PID   32

/* [off, off + len) lies inside a buffer of size bytes (no overflow). */
static bool in_bounds(uint64_t off, uint64_t len, uint64_t size)
{
	return off <= size && len <= size - off;
}

int memsrc_core_is_core(const char *path)
{
	Elf64_Ehdr eh;
	int fd = files_open_regular_ro(path);
	ssize_t n;

	if (fd < 0)
		return fd;
	n = pread(fd, &eh, sizeof(eh), 0);
	close(fd);
	if (n < (ssize_t)EI_NIDENT + 2 || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0)
		return 0;
	/* e_type is at the same offset in both classes; cores of either class are cores */
	return eh.e_ident[EI_DATA] == ELFDATA2LSB && eh.e_type == ET_CORE;
}

static int cmp_seg(const void *a, const void *b)
{
	const struct core_segment *x = a, *y = b;

	return (x->vaddr > y->vaddr) - (x->vaddr < y->vaddr);
}

/* The program header count, with the PN_XNUM extension (the real count in section 0's sh_info). */
static int phdr_count(const struct core_file *c, const Elf64_Ehdr *eh, uint64_t *n)
{
	Elf64_Shdr sh;

	*n = eh->e_phnum;
	if (eh->e_phnum != PN_XNUM)
		return 0;
	if (!eh->e_shoff || !in_bounds(eh->e_shoff, sizeof(sh), c->size))
		return -EINVAL;
	memcpy(&sh, c->img + eh->e_shoff, sizeof(sh));
	*n = sh.sh_info;
	return 0;
}

static int fail_bad(const struct core_file *c, char *err, size_t errlen, const char *what)
{
	return hb_fail(err, errlen, -EINVAL, "%s is not a usable core file: %s", c->path, what);
}

/* need: where a segment (or the notes) the headers describe ends, past the file's end */
static int fail_truncated(const struct core_file *c, uint64_t need, char *err, size_t errlen)
{
	return hb_fail(err, errlen, -EINVAL,
		       "%s is truncated: it has %zu bytes, its segments need at least %llu",
		       c->path, c->size, (unsigned long long)need);
}

/* The PT_LOAD segments, sorted and checked; the PT_NOTE ranges go to notes. */
static int read_segments(struct core_file *c, const Elf64_Ehdr *eh, uint64_t (*notes)[2],
			 size_t *nnotes, size_t maxnotes, char *err, size_t errlen)
{
	uint64_t n;

	if (phdr_count(c, eh, &n) || !n || n > CORE_MAX_SEGMENTS ||
	    eh->e_phentsize != sizeof(Elf64_Phdr) ||
	    !in_bounds(eh->e_phoff, n * sizeof(Elf64_Phdr), c->size))
		return fail_bad(c, err, errlen, "its program headers are missing or cut off");
	c->segs = calloc(n, sizeof(*c->segs));
	if (!c->segs)
		return hb_fail(err, errlen, -ENOMEM, "out of memory");
	*nnotes = 0;
	for (uint64_t i = 0; i < n; i++) {
		Elf64_Phdr ph;

		memcpy(&ph, c->img + eh->e_phoff + i * sizeof(ph), sizeof(ph));
		if (ph.p_type == PT_NOTE && *nnotes < maxnotes) {
			if (!in_bounds(ph.p_offset, ph.p_filesz, c->size))
				return fail_truncated(c, ph.p_offset + ph.p_filesz, err, errlen);
			notes[*nnotes][0] = ph.p_offset;
			notes[(*nnotes)++][1] = ph.p_filesz;
		}
		if (ph.p_type != PT_LOAD || !ph.p_memsz)
			continue;
		if (ph.p_filesz > ph.p_memsz || ph.p_vaddr + ph.p_memsz < ph.p_vaddr)
			return fail_bad(c, err, errlen, "a segment has impossible sizes");
		/* a core cut short (disk full, a dump killed by a limit) misses memory */
		if (!in_bounds(ph.p_offset, ph.p_filesz, c->size))
			return fail_truncated(c, ph.p_offset + ph.p_filesz, err, errlen);
		c->segs[c->nsegs++] = (struct core_segment){
			.vaddr = ph.p_vaddr,
			.memsz = ph.p_memsz,
			.filesz = ph.p_filesz,
			.offset = ph.p_offset,
			.flags = ph.p_flags,
		};
	}
	qsort(c->segs, c->nsegs, sizeof(*c->segs), cmp_seg);
	for (size_t i = 1; i < c->nsegs; i++) {
		if (c->segs[i].vaddr < c->segs[i - 1].vaddr + c->segs[i - 1].memsz)
			return fail_bad(c, err, errlen, "two of its segments overlap");
	}
	return 0;
}

/* NT_FILE: count, page size, count x (start, end, page offset), then count NUL-terminated names. */
static int parse_file_note(struct core_file *c, const uint8_t *d, uint64_t len)
{
	uint64_t count, page, names;
	const char *p, *end = (const char *)d + len;

	if (c->maps || len < 16)
		return c->maps ? 0 : -EINVAL;
	memcpy(&count, d, 8);
	memcpy(&page, d + 8, 8);
	if (count > CORE_MAX_MAPPINGS || count > (len - 16) / 24 || !page || page > (1ULL << 30))
		return -EINVAL;
	names = 16 + count * 24;
	c->maps = calloc(count ? count : 1, sizeof(*c->maps));
	if (!c->maps)
		return -ENOMEM;
	p = (const char *)d + names;
	for (uint64_t i = 0; i < count; i++) {
		struct core_mapping *m = &c->maps[c->nmaps];
		const char *nul = memchr(p, '\0', end - p);
		uint64_t pgoff;
		size_t plen;

		if (!nul)
			return -EINVAL;
		memcpy(&m->start, d + 16 + i * 24, 8);
		memcpy(&m->end, d + 24 + i * 24, 8);
		memcpy(&pgoff, d + 32 + i * 24, 8);
		if (m->end < m->start || pgoff > UINT64_MAX / page)
			return -EINVAL;
		m->offset = pgoff * page;
		plen = nul - p;
		if (plen > 10 && strcmp(nul - 10, " (deleted)") == 0) {
			m->deleted = true;
			plen -= 10;
		}
		m->path = strndup(p, plen);
		if (!m->path)
			return -ENOMEM;
		c->nmaps++;
		p = nul + 1;
	}
	return 0;
}

/* NT_AUXV: (type, value) pairs; AT_EXECFN points to the path the process was executed as. */
static void parse_auxv(struct core_file *c, const uint8_t *d, uint64_t len)
{
	for (uint64_t pos = 0; len - pos >= 16; pos += 16) {
		uint64_t type, val;

		memcpy(&type, d + pos, 8);
		memcpy(&val, d + pos + 8, 8);
		if (type == AT_NULL)
			break;
		if (type == AT_EXECFN)
			c->execfn = val;
	}
}

/*
 * The process's name: the base name of the path it was executed as, read
 * from its stack in the image, cut to 15 bytes as the kernel's comm is. A
 * process that writes over its command line (Redis's "redis-server *:6379")
 * changes what gdb's gcore puts in pr_fname, not that string. Without it (or
 * for an fexecve, "/dev/fd/N"), pr_fname stays.
 */
static void name_from_execfn(struct core_file *c)
{
	char path[4096];
	const char *base;
	size_t n = 0;

	if (!c->execfn)
		return;
	while (n + 1 < sizeof(path) && !memsrc_core__read(c, c->execfn + n, path + n, 1) && path[n])
		n++;
	if (n + 1 >= sizeof(path) || path[n] || strncmp(path, "/dev/fd/", 8) == 0)
		return;
	base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
	if (*base)
		snprintf(c->comm, sizeof(c->comm), "%.15s", base);
}

static void parse_prpsinfo(struct core_file *c, const uint8_t *d, uint64_t len)
{
	int32_t pid;

	if (len < PRPSINFO_SIZE)
		return;
	memcpy(&pid, d + PRPSINFO_PID, 4);
	if (pid > 0)
		c->pid = pid;
	snprintf(c->comm, sizeof(c->comm), "%.16s", (const char *)d + PRPSINFO_FNAME);
}

/* One PT_NOTE segment's notes: name, type, descriptor, each 4-byte aligned. */
static int parse_notes(struct core_file *c, uint64_t off, uint64_t len, bool *have_psinfo)
{
	uint64_t pos = 0;

	while (len - pos >= sizeof(Elf64_Nhdr)) {
		Elf64_Nhdr nh;
		uint64_t name_len, desc_off, desc_len;
		const uint8_t *desc;
		int32_t pid;
		int rc;

		memcpy(&nh, c->img + off + pos, sizeof(nh));
		name_len = ((uint64_t)nh.n_namesz + 3) & ~3ULL;
		desc_len = ((uint64_t)nh.n_descsz + 3) & ~3ULL;
		desc_off = pos + sizeof(nh) + name_len;
		if (!in_bounds(pos + sizeof(nh), name_len, len) ||
		    !in_bounds(desc_off, nh.n_descsz, len))
			return -EINVAL;
		desc = c->img + off + desc_off;
		if (nh.n_type == NT_FILE) {
			rc = parse_file_note(c, desc, nh.n_descsz);
			if (rc)
				return rc;
		} else if (nh.n_type == NT_AUXV) {
			parse_auxv(c, desc, nh.n_descsz);
		} else if (nh.n_type == NT_PRPSINFO) {
			parse_prpsinfo(c, desc, nh.n_descsz);
			*have_psinfo = c->pid != 0;
		} else if (nh.n_type == NT_PRSTATUS && nh.n_descsz >= PRSTATUS_PID + 4) {
			c->threads++;
			memcpy(&pid, desc + PRSTATUS_PID, 4);
			if (!*have_psinfo && !c->pid && pid > 0)
				c->pid = pid;
		}
		/* the last note's padding may be cut */
		pos = desc_off + desc_len < len ? desc_off + desc_len : len;
	}
	return 0;
}

static int map_file(struct core_file *c, char *err, size_t errlen)
{
	struct stat st;
	void *img;
	int fd = files_open_regular_ro(c->path);

	if (fd < 0)
		return hb_fail(err, errlen, fd, "cannot open %s: %s", c->path,
			       files_open_regular_strerror(fd));
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		return hb_fail(err, errlen, -EINVAL, "%s is not a regular file", c->path);
	}
	if ((uint64_t)st.st_size < sizeof(Elf64_Ehdr)) {
		close(fd);
		return fail_bad(c, err, errlen, "it is shorter than an ELF header");
	}
	img = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (img == MAP_FAILED)
		return hb_fail(err, errlen, -errno, "cannot map %s: %s", c->path, strerror(errno));
	c->img = img;
	c->size = st.st_size;
	return 0;
}

static int check_header(const struct core_file *c, const Elf64_Ehdr *eh, char *err, size_t errlen)
{
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0)
		return fail_bad(c, err, errlen, "it is not an ELF file");
	if (eh->e_type != ET_CORE)
		return fail_bad(c, err, errlen, "it is an ELF file but not a core dump");
	if (eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_ident[EI_DATA] != ELFDATA2LSB ||
	    (eh->e_machine != EM_X86_64 && eh->e_machine != EM_AARCH64))
		return fail_bad(c, err, errlen,
				"it is not an x86-64 or arm64 core (the kinds supported)");
	return 0;
}

int memsrc_core__open(const char *path, struct core_file **out, char *err, size_t errlen)
{
	uint64_t notes[16][2];
	struct core_file *c = calloc(1, sizeof(*c));
	bool psinfo = false;
	size_t nnotes = 0;
	Elf64_Ehdr eh;
	int rc;

	*out = NULL;
	if (!c || !(c->path = strdup(path))) {
		free(c);
		hb_fail(err, errlen, -ENOMEM, "out of memory");
		return -ENOMEM;
	}
	snprintf(c->comm, sizeof(c->comm), "?");
	rc = map_file(c, err, errlen);
	if (rc)
		goto fail;
	memcpy(&eh, c->img, sizeof(eh));
	rc = check_header(c, &eh, err, errlen);
	if (!rc)
		rc = read_segments(c, &eh, notes, &nnotes, 16, err, errlen);
	for (size_t i = 0; !rc && i < nnotes; i++) {
		rc = parse_notes(c, notes[i][0], notes[i][1], &psinfo);
		if (rc == -ENOMEM)
			rc = hb_fail(err, errlen, rc, "out of memory");
		else if (rc)
			rc = fail_bad(c, err, errlen, "its notes are garbled");
	}
	if (!rc)
		name_from_execfn(c);
	if (!rc && !c->maps)
		rc = fail_bad(c, err, errlen,
			      "it has no NT_FILE note (the list of mapped files, which Linux "
			      "since 3.7 and gdb's gcore write)");
	if (!rc && !c->pid)
		rc = fail_bad(c, err, errlen,
			      "it names no process (no NT_PRPSINFO or NT_PRSTATUS)");
	if (rc)
		goto fail;
	*out = c;
	return 0;
fail:
	memsrc_core__free(c);
	return rc;
}

void memsrc_core__free(struct core_file *c)
{
	if (!c)
		return;
	if (c->img)
		munmap((void *)c->img, c->size);
	for (size_t i = 0; c->maps && i < c->nmaps; i++)
		free(c->maps[i].path);
	free(c->maps);
	free(c->segs);
	free(c->path);
	free(c);
}

/* The segment holding addr, or NULL. */
static const struct core_segment *seg_at(const struct core_file *c, uint64_t addr)
{
	size_t lo = 0, hi = c->nsegs;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct core_segment *s = &c->segs[mid];

		if (addr < s->vaddr)
			hi = mid;
		else if (addr - s->vaddr >= s->memsz)
			lo = mid + 1;
		else
			return s;
	}
	return NULL;
}

/* Copies what can be copied (to buf when not NULL); 0 when all len bytes are in the file. */
static int copy_out(const struct core_file *c, uint64_t addr, uint8_t *buf, size_t len)
{
	while (len) {
		const struct core_segment *s = seg_at(c, addr);
		uint64_t in, n;

		/* bytes past p_filesz were not dumped: not in the image */
		if (!s || addr - s->vaddr >= s->filesz)
			return -EFAULT;
		in = addr - s->vaddr;
		n = s->filesz - in < len ? s->filesz - in : len;
		if (buf) {
			memcpy(buf, c->img + s->offset + in, n);
			buf += n;
		}
		addr += n;
		len -= n;
		if (len && !addr)
			return -EFAULT; /* wrapped */
	}
	return 0;
}

int memsrc_core__read(const struct core_file *c, uint64_t addr, void *buf, size_t len)
{
	return copy_out(c, addr, buf, len);
}

bool memsrc_core__mapped(const struct core_file *c, uint64_t addr, size_t len)
{
	return copy_out(c, addr, NULL, len) == 0;
}

static int src_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	return memsrc_core__read(ctx, addr, buf, len);
}

static bool src_mapped(void *ctx, uint64_t addr, size_t len)
{
	return memsrc_core__mapped(ctx, addr, len);
}

struct mem_source memsrc_core__mem_source(struct core_file *c)
{
	return (struct mem_source){ .read = src_read, .mapped = src_mapped, .ctx = c };
}

static void perms_of(const struct core_file *c, const struct core_mapping *m, char perms[5])
{
	const struct core_segment *s = seg_at(c, m->start);

	if (!s) {
		memcpy(perms, "r-xp", 5);
		return;
	}
	perms[0] = s->flags & PF_R ? 'r' : '-';
	perms[1] = s->flags & PF_W ? 'w' : '-';
	perms[2] = s->flags & PF_X ? 'x' : '-';
	perms[3] = 'p';
	perms[4] = '\0';
}

int memsrc_core__proc_maps(const struct core_file *c, struct proc_maps **out)
{
	struct proc_maps *m = calloc(1, sizeof(*m));

	if (!m || !(m->v = calloc(c->nmaps ? c->nmaps : 1, sizeof(*m->v)))) {
		free(m);
		return -ENOMEM;
	}
	m->pid = c->pid;
	for (size_t i = 0; i < c->nmaps; i++) {
		struct proc_map *pm = &m->v[i];

		pm->start = c->maps[i].start;
		pm->end = c->maps[i].end;
		pm->offset = c->maps[i].offset;
		pm->deleted = c->maps[i].deleted;
		perms_of(c, &c->maps[i], pm->perms);
		pm->path = strdup(c->maps[i].path);
		m->n++;
		if (!pm->path) {
			proc_maps__free(m);
			return -ENOMEM;
		}
	}
	*out = m;
	return 0;
}

/* The build-id note among the notes of [addr, addr + len) of the image. */
static int build_id_in_notes(const struct core_file *c, uint64_t addr, uint64_t len, char *hex,
			     size_t hexlen)
{
	uint8_t buf[4096];
	uint64_t pos = 0;

	if (len > sizeof(buf) || memsrc_core__read(c, addr, buf, len))
		return -ENOENT;
	while (len - pos >= sizeof(Elf64_Nhdr)) {
		Elf64_Nhdr nh;
		uint64_t nl, dl;

		memcpy(&nh, buf + pos, sizeof(nh));
		nl = ((uint64_t)nh.n_namesz + 3) & ~3ULL;
		dl = ((uint64_t)nh.n_descsz + 3) & ~3ULL;
		if (!in_bounds(pos + sizeof(nh), nl, len) ||
		    !in_bounds(pos + sizeof(nh) + nl, nh.n_descsz, len))
			return -EINVAL;
		if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
		    memcmp(buf + pos + sizeof(nh), "GNU", 4) == 0 && nh.n_descsz &&
		    nh.n_descsz * 2 < hexlen) {
			for (uint32_t i = 0; i < nh.n_descsz; i++)
				snprintf(hex + 2 * i, 3, "%02x", buf[pos + sizeof(nh) + nl + i]);
			return 0;
		}
		pos += sizeof(nh) + nl + dl;
	}
	return -ENOENT;
}

int memsrc_core__build_id(const struct core_file *c, const char *path, char *hex, size_t len)
{
	const struct core_mapping *m = NULL;
	Elf64_Ehdr eh;

	for (size_t i = 0; i < c->nmaps && !m; i++) {
		if (c->maps[i].offset == 0 && strcmp(c->maps[i].path, path) == 0)
			m = &c->maps[i];
	}
	if (!m || memsrc_core__read(c, m->start, &eh, sizeof(eh)))
		return -ENOENT;
	if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_phentsize != sizeof(Elf64_Phdr) ||
	    eh.e_phnum > 256 || eh.e_phoff > m->end - m->start)
		return -EINVAL;
	for (unsigned int i = 0; i < eh.e_phnum; i++) {
		Elf64_Phdr ph;

		if (memsrc_core__read(c, m->start + eh.e_phoff + i * sizeof(ph), &ph, sizeof(ph)))
			return -ENOENT;
		/* a note in the first mapping sits at its file offset from the mapping's start */
		if (ph.p_type != PT_NOTE || ph.p_offset > m->end - m->start)
			continue;
		if (!build_id_in_notes(c, m->start + ph.p_offset, ph.p_filesz, hex, len))
			return 0;
	}
	return -ENOENT;
}
