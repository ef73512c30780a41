// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdio.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "symbols/elfobj.h"
#include "util/files.h"

struct segment {
	uint64_t vaddr, memsz, offset, filesz, align;
	uint32_t flags;
};

struct elf_object {
	int fd;
	Elf *elf;
	int type;
	bool has_symtab;
	char *build_id;
	struct elf_sym *syms;
	size_t nsyms;
	size_t *by_name; /* indices into syms sorted by name */
	size_t *funcs;	 /* indices into syms of functions sorted by address */
	size_t nfuncs;
	struct segment *segs;
	size_t nsegs;
};

static int init_libelf(void)
{
	/* a process-wide cache, not run state: libelf's version is set once per process */
	static int state; /* 0 = not yet, 1 = ok, -1 = failed */

	if (!state)
		state = elf_version(EV_CURRENT) == EV_NONE ? -1 : 1;
	return state > 0 ? 0 : -ENOTSUP;
}

static int read_segments(struct elf_object *o)
{
	size_t n;

	if (elf_getphdrnum(o->elf, &n))
		return -ENOEXEC;
	o->segs = calloc(n ? n : 1, sizeof(*o->segs));
	if (!o->segs)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(o->elf, i, &ph) || ph.p_type != PT_LOAD)
			continue;
		o->segs[o->nsegs++] = (struct segment){
			.vaddr = ph.p_vaddr,
			.memsz = ph.p_memsz,
			.offset = ph.p_offset,
			.filesz = ph.p_filesz,
			.align = ph.p_align ? ph.p_align : 1,
			.flags = ph.p_flags,
		};
	}
	return 0;
}

/* Hex of the NT_GNU_BUILD_ID note into hex; -ENOENT when there is none. */
static int build_id_of(Elf *elf, char *hex, size_t len)
{
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;
		size_t off = 0, name_off, desc_off;
		GElf_Nhdr nh;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE)
			continue;
		d = elf_getdata(scn, NULL);
		if (!d)
			continue;
		while ((off = gelf_getnote(d, off, &nh, &name_off, &desc_off)) > 0) {
			if (nh.n_type != NT_GNU_BUILD_ID || nh.n_namesz != 4 ||
			    memcmp((char *)d->d_buf + name_off, "GNU", 4) != 0)
				continue;
			if (nh.n_descsz * 2 + 1 > len)
				return -ENAMETOOLONG;
			for (size_t i = 0; i < nh.n_descsz; i++)
				sprintf(hex + 2 * i, "%02x",
					((unsigned char *)d->d_buf)[desc_off + i]);
			hex[2 * nh.n_descsz] = '\0';
			return 0;
		}
	}
	return -ENOENT;
}

static void read_build_id(struct elf_object *o)
{
	char hex[ELF_BUILD_ID_MAX];

	if (build_id_of(o->elf, hex, sizeof(hex)) == 0)
		o->build_id = strdup(hex);
}

int elfobj_fd_build_id(int fd, char *hex, size_t len)
{
	Elf *elf;
	int err = init_libelf();

	if (err)
		return err;
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF) {
		elf_end(elf);
		return -ENOEXEC;
	}
	err = build_id_of(elf, hex, len);
	elf_end(elf);
	return err;
}

static int add_symbols(struct elf_object *o, Elf_Scn *scn, const GElf_Shdr *sh, size_t *cap)
{
	Elf_Data *d = elf_getdata(scn, NULL);
	size_t n;

	if (!d || !sh->sh_entsize)
		return 0;
	n = sh->sh_size / sh->sh_entsize;
	for (size_t i = 1; i < n; i++) {
		GElf_Sym s;
		const char *name;
		int type;

		if (!gelf_getsym(d, i, &s))
			continue;
		type = GELF_ST_TYPE(s.st_info);
		if (s.st_shndx == SHN_UNDEF || type == STT_SECTION || type == STT_FILE)
			continue;
		name = elf_strptr(o->elf, sh->sh_link, s.st_name);
		if (!name || !name[0])
			continue;
		if (o->nsyms == *cap) {
			size_t ncap = *cap ? *cap * 2 : 1024;
			struct elf_sym *nv = realloc(o->syms, ncap * sizeof(*nv));

			if (!nv)
				return -ENOMEM;
			o->syms = nv;
			*cap = ncap;
		}
		o->syms[o->nsyms++] = (struct elf_sym){
			.name = name,
			.addr = s.st_value,
			.size = s.st_size,
			.type = type,
			.bind = GELF_ST_BIND(s.st_info),
		};
	}
	return 0;
}

static const struct elf_object *sort_obj;

static int cmp_name(const void *a, const void *b)
{
	const struct elf_sym *x = &sort_obj->syms[*(const size_t *)a];
	const struct elf_sym *y = &sort_obj->syms[*(const size_t *)b];
	int c = strcmp(x->name, y->name);

	/* stable on index so .symtab (read first) wins among equal names */
	if (c)
		return c;
	return (*(const size_t *)a > *(const size_t *)b) -
	       (*(const size_t *)a < *(const size_t *)b);
}

static int cmp_addr(const void *a, const void *b)
{
	const struct elf_sym *x = &sort_obj->syms[*(const size_t *)a];
	const struct elf_sym *y = &sort_obj->syms[*(const size_t *)b];

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	/* among aliases prefer a global name, then a sized one */
	if ((x->bind == STB_GLOBAL) != (y->bind == STB_GLOBAL))
		return x->bind == STB_GLOBAL ? -1 : 1;
	if ((x->size != 0) != (y->size != 0))
		return x->size ? -1 : 1;
	return (*(const size_t *)a > *(const size_t *)b) -
	       (*(const size_t *)a < *(const size_t *)b);
}

static int read_symbols(struct elf_object *o)
{
	size_t cap = 0, shstrndx;
	Elf_Scn *scn = NULL;
	int err;

	if (elf_getshdrstrndx(o->elf, &shstrndx))
		return -ENOEXEC;
	/* .symtab first so that its names win over .dynsym duplicates */
	for (int pass = 0; pass < 2; pass++) {
		scn = NULL;
		while ((scn = elf_nextscn(o->elf, scn))) {
			GElf_Shdr sh;

			if (!gelf_getshdr(scn, &sh))
				continue;
			if (sh.sh_type != (pass == 0 ? SHT_SYMTAB : SHT_DYNSYM))
				continue;
			if (pass == 0)
				o->has_symtab = true;
			err = add_symbols(o, scn, &sh, &cap);
			if (err)
				return err;
		}
	}
	o->by_name = malloc((o->nsyms ? o->nsyms : 1) * sizeof(size_t));
	o->funcs = malloc((o->nsyms ? o->nsyms : 1) * sizeof(size_t));
	if (!o->by_name || !o->funcs)
		return -ENOMEM;
	for (size_t i = 0; i < o->nsyms; i++) {
		o->by_name[i] = i;
		if ((o->syms[i].type == STT_FUNC || o->syms[i].type == STT_GNU_IFUNC) &&
		    o->syms[i].addr)
			o->funcs[o->nfuncs++] = i;
	}
	sort_obj = o;
	qsort(o->by_name, o->nsyms, sizeof(size_t), cmp_name);
	qsort(o->funcs, o->nfuncs, sizeof(size_t), cmp_addr);
	sort_obj = NULL;
	/* keep one symbol per address (the preferred alias sorts first) */
	if (o->nfuncs) {
		size_t w = 1;

		for (size_t r = 1; r < o->nfuncs; r++) {
			if (o->syms[o->funcs[r]].addr != o->syms[o->funcs[w - 1]].addr)
				o->funcs[w++] = o->funcs[r];
		}
		o->nfuncs = w;
	}
	return 0;
}

int elfobj__open(const char *path, struct elf_object **out)
{
	struct elf_object *o;
	GElf_Ehdr eh;
	int err;

	err = init_libelf();
	if (err)
		return err;
	o = calloc(1, sizeof(*o));
	if (!o)
		return -ENOMEM;
	o->fd = files_open_regular_ro(path);
	if (o->fd < 0) {
		err = o->fd;
		free(o);
		return err;
	}
	o->elf = elf_begin(o->fd, ELF_C_READ_MMAP, NULL);
	if (!o->elf || elf_kind(o->elf) != ELF_K_ELF || !gelf_getehdr(o->elf, &eh)) {
		err = -ENOEXEC;
		goto fail;
	}
	o->type = eh.e_type;
	err = read_segments(o);
	if (err)
		goto fail;
	read_build_id(o);
	err = read_symbols(o);
	if (err)
		goto fail;
	*out = o;
	return 0;
fail:
	elfobj__free(o);
	return err;
}

void elfobj__free(struct elf_object *o)
{
	if (!o)
		return;
	free(o->syms);
	free(o->by_name);
	free(o->funcs);
	free(o->segs);
	free(o->build_id);
	if (o->elf)
		elf_end(o->elf);
	if (o->fd >= 0)
		close(o->fd);
	free(o);
}

bool elfobj__has_symtab(const struct elf_object *o)
{
	return o->has_symtab;
}

int elfobj__type(const struct elf_object *o)
{
	return o->type;
}

const char *elfobj__build_id(const struct elf_object *o)
{
	return o->build_id;
}

const struct elf_sym *elfobj__sym_by_name(const struct elf_object *o, const char *name)
{
	size_t lo = 0, hi = o->nsyms;

	/* lower bound, so the first (.symtab) of equal names is returned */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (strcmp(o->syms[o->by_name[mid]].name, name) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < o->nsyms && strcmp(o->syms[o->by_name[lo]].name, name) == 0)
		return &o->syms[o->by_name[lo]];
	return NULL;
}

const struct elf_sym *elfobj__sym_by_suffix(const struct elf_object *o, const char *suffix,
					    int type)
{
	size_t sl = strlen(suffix);

	for (size_t i = 0; i < o->nsyms; i++) {
		const struct elf_sym *s = &o->syms[i];
		size_t nl = strlen(s->name);

		if (s->type == type && nl >= sl && strcmp(s->name + nl - sl, suffix) == 0)
			return s;
	}
	return NULL;
}

const struct elf_sym *elfobj__func_at(const struct elf_object *o, uint64_t vaddr)
{
	size_t lo = 0, hi = o->nfuncs;
	const struct elf_sym *s;

	/* the last function starting at or below vaddr */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (o->syms[o->funcs[mid]].addr <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return NULL;
	s = &o->syms[o->funcs[lo - 1]];
	if (s->size)
		return vaddr < s->addr + s->size ? s : NULL;
	/* unsized (assembly) symbols extend to the next function */
	if (lo < o->nfuncs && vaddr >= o->syms[o->funcs[lo]].addr)
		return NULL;
	return s;
}

int elfobj__vaddr_to_offset(const struct elf_object *o, uint64_t vaddr, uint64_t *off)
{
	for (size_t i = 0; i < o->nsegs; i++) {
		const struct segment *s = &o->segs[i];

		if (vaddr >= s->vaddr && vaddr < s->vaddr + s->filesz) {
			*off = vaddr - s->vaddr + s->offset;
			return 0;
		}
	}
	return -ENOENT;
}

int elfobj__offset_to_vaddr(const struct elf_object *o, uint64_t off, uint64_t *vaddr)
{
	for (size_t i = 0; i < o->nsegs; i++) {
		const struct segment *s = &o->segs[i];

		if (off >= s->offset && off < s->offset + s->filesz) {
			*vaddr = off - s->offset + s->vaddr;
			return 0;
		}
	}
	return -ENOENT;
}

bool elfobj__vaddr_writable(const struct elf_object *o, uint64_t vaddr, uint64_t len)
{
	for (size_t i = 0; i < o->nsegs; i++) {
		const struct segment *s = &o->segs[i];

		if ((s->flags & PF_W) && vaddr >= s->vaddr && vaddr + len <= s->vaddr + s->memsz)
			return true;
	}
	return false;
}

int elfobj__load_bias(const struct elf_object *o, uint64_t map_start, uint64_t map_offset,
		      uint64_t *bias)
{
	const struct segment *first = NULL;
	uint64_t page;

	/*
	 * Only the mapping of the first PT_LOAD identifies the bias: later
	 * segments can share a file page (read-only data and RELRO), so two
	 * mappings with the same file offset sit at different addresses.
	 */
	for (size_t i = 0; i < o->nsegs; i++) {
		if (!first || o->segs[i].vaddr < first->vaddr)
			first = &o->segs[i];
	}
	if (!first)
		return -ENOENT;
	page = first->align > 4096 ? 4096 : first->align;
	if (map_offset != (first->offset & ~(page - 1)))
		return -EINVAL;
	*bias = map_start - (first->vaddr & ~(page - 1));
	return 0;
}

static bool is_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

/* Checks "D+.D+.D+-D+" ending right before end (exclusive); returns its start or NULL. */
static const char *version_prefix(const char *base, const char *end)
{
	const char *p = end;
	int groups = 0;

	/* "-N" commit count */
	if (p == base || !isdigit((unsigned char)p[-1]))
		return NULL;
	while (p > base && isdigit((unsigned char)p[-1]))
		p--;
	if (p == base || p[-1] != '-')
		return NULL;
	p--;
	/* "X.Y.Z" */
	for (;;) {
		if (p == base || !isdigit((unsigned char)p[-1]))
			return NULL;
		while (p > base && isdigit((unsigned char)p[-1]))
			p--;
		if (++groups == 3)
			break;
		if (p == base || p[-1] != '.')
			return NULL;
		p--;
	}
	if (p > base && (isalnum((unsigned char)p[-1]) || p[-1] == '.'))
		return NULL;
	return p;
}

const char *elfobj_jemalloc_version_scan(const char *data, size_t len, size_t *match_len)
{
	const char *p = data, *end = data + len;

	while ((p = memmem(p, end - p, "-g", 2))) {
		const char *h = p + 2, *start;
		int n = 0;

		/*
		 * git describe's id: 40 hex, or abbreviated (Redis's --with-version
		 * ends in "-g0"), then its NUL; only a whole id may end the block
		 */
		while (h + n < end && n <= 40 && is_hex(h[n]))
			n++;
		if (n >= 1 && n <= 40 && (h + n == end ? n == 40 : h[n] == '\0')) {
			start = version_prefix(data, p);
			if (start) {
				*match_len = h + n - start;
				return start;
			}
		}
		p += 2;
	}
	return NULL;
}

int elfobj__jemalloc_version(const struct elf_object *o, char *buf, size_t len)
{
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(o->elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;
		const char *m;
		size_t n;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS ||
		    !(sh.sh_flags & SHF_ALLOC) || (sh.sh_flags & (SHF_EXECINSTR | SHF_WRITE)))
			continue;
		d = elf_getdata(scn, NULL);
		if (!d || !d->d_buf)
			continue;
		m = elfobj_jemalloc_version_scan(d->d_buf, d->d_size, &n);
		if (m) {
			if (n >= len)
				return -ENAMETOOLONG;
			memcpy(buf, m, n);
			buf[n] = '\0';
			return 0;
		}
	}
	return -ENOENT;
}
