// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <dwarf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <elfutils/debuginfod.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>

#include "symbols/debuginfo.h"
#include "symbols/debugsearch.h"
#include "symbols/elfobj.h"
#include "util/files.h"

struct dbg_object {
	char *key; /* build-id, or "dev:ino:size:mtime" */
	char *build_id;
	Dwfl *dwfl;
	Dwfl_Module *mod;
	bool searched; /* separate debug info looked up */
	char *symtab_file;
	char *debug_file;
	int refs;
	struct elf_object *syms; /* the full symbol table, indexed (libdwfl scans linearly) */
	bool syms_tried;
	char **paths; /* absolute source paths built from comp_dir, owned */
	dev_t dev;    /* the object's file, never taken for its own debug file */
	ino_t ino;
	bool alt_missing;	/* a dwz multifile was asked for and not found */
	struct debug_miss miss; /* why the separate debug file was not found */
	size_t npaths;
	struct dbg_object *next;
};

/*
 * The two pieces of file-scope state in user/, both documented caches of the
 * process rather than run state: the objects opened so far (shared by every
 * symbolizer, dropped by debuginfo_cache_clear), and the debug search path, which
 * libdwfl reads through a char ** in its callbacks, set once by main.
 */
static struct dbg_object *cache;
/* "+" enables CRC checks of debuglink files; "" = next to the file */
static char *debuginfo_path;
static const char default_path[] = "+:.debug:/usr/lib/debug";

/* The file at name, if it is the one holding the DWARF whose .gnu_debugaltlink is link. */
static bool altlink_in(Elf *elf, const char *link, struct debug_query *q)
{
	const char *name;

	if (!debugsearch_altlink(elf, &name, &q->id, &q->idlen) || strcmp(name, link) != 0)
		return false;
	q->alt = true;
	return true;
}

static int alt_search(struct dbg_object *o, const struct debug_query *q, char **found)
{
	int fd = debugsearch_find(q, found);

	o->alt_missing = fd < 0;
	return fd;
}

/*
 * libdwfl asks for the object's separate debug file, then, when that (or the
 * object) has a .gnu_debugaltlink, for the dwz multifile it names, with
 * crc 0: both searched by debugsearch_find, which opens nothing that can block.
 */
static int find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
			  const char *file_name, const char *debuglink_file,
			  GElf_Word debuglink_crc, char **debuginfo_file_name)
{
	struct dbg_object *o = *userdata;
	struct debug_query q = { .path = debuginfo_path,
				 .file_name = file_name,
				 .link = debuglink_file,
				 .crc = debuglink_crc,
				 .dev = o->dev,
				 .ino = o->ino };
	GElf_Addr vaddr;
	Dwarf_Addr bias;
	int n, fd;

	(void)modname;
	(void)base;
	*debuginfo_file_name = NULL;
	if (!debuglink_crc && debuglink_file) {
		/* the dwz multifile the object, or the debug file found before, names */
		if (altlink_in(dwfl_module_getelf(mod, &bias), debuglink_file, &q))
			return alt_search(o, &q, debuginfo_file_name);
		if (file_name) {
			int probe = files_open_regular_ro(file_name);
			Elf *elf = probe >= 0 ? elf_begin(probe, ELF_C_READ_MMAP, NULL) : NULL;

			/* q.id points into elf: searched before it ends */
			fd = altlink_in(elf, debuglink_file, &q)
				     ? alt_search(o, &q, debuginfo_file_name)
				     : -1;
			elf_end(elf);
			if (probe >= 0)
				close(probe);
			if (q.alt)
				return fd;
		}
	}
	n = dwfl_module_build_id(mod, &q.id, &vaddr);
	q.idlen = n > 0 ? (size_t)n : 0;
	/* the object's own debug file: why it was not found goes in the message that says so */
	memset(&o->miss, 0, sizeof(o->miss));
	q.miss = &o->miss;
	return debugsearch_find(&q, debuginfo_file_name);
}

static const Dwfl_Callbacks callbacks = {
	.find_elf = dwfl_build_id_find_elf,
	.find_debuginfo = find_debuginfo,
	.section_address = dwfl_offline_section_address,
	.debuginfo_path = &debuginfo_path,
};

void debuginfo_set_debug_dirs(const char *dirs)
{
	size_t n = sizeof(default_path) + (dirs ? strlen(dirs) + 1 : 0);
	char *p = malloc(n);

	if (!p)
		return;
	snprintf(p, n, "%s%s%s", default_path, dirs && dirs[0] ? ":" : "", dirs ? dirs : "");
	free(debuginfo_path);
	debuginfo_path = p;
}

static char *hex(const unsigned char *b, int n)
{
	char *s = malloc(2 * (size_t)n + 1);

	if (!s)
		return NULL;
	for (int i = 0; i < n; i++)
		sprintf(s + 2 * i, "%02x", b[i]);
	return s;
}

static void object_free(struct dbg_object *o)
{
	if (!o)
		return;
	if (o->dwfl)
		dwfl_end(o->dwfl);
	elfobj__free(o->syms);
	for (size_t i = 0; i < o->npaths; i++)
		free(o->paths[i]);
	free(o->paths);
	free(o->key);
	free(o->build_id);
	free(o->symtab_file);
	free(o->debug_file);
	free(o);
}

int debuginfo_object__get(int fd, const char *name_path, struct dbg_object **out)
{
	struct dbg_object *o;
	const unsigned char *id;
	GElf_Addr vaddr;
	struct stat st;
	void **slot;
	char key[96];
	int dfd, n;

	if (!debuginfo_path)
		debuginfo_set_debug_dirs(NULL);
	if (!debuginfo_path)
		return -ENOMEM;
	if (fstat(fd, &st))
		return -errno;
	o = calloc(1, sizeof(*o));
	if (!o)
		return -ENOMEM;
	o->dwfl = dwfl_begin(&callbacks);
	dfd = dup(fd);
	if (!o->dwfl || dfd < 0) {
		if (dfd >= 0)
			close(dfd);
		object_free(o);
		return -ENOMEM;
	}
	/* at link-time addresses: base 0 plus the first PT_LOAD's p_vaddr */
	o->mod = dwfl_report_elf(o->dwfl, name_path, name_path, dfd, 0, true);
	if (!o->mod) {
		close(dfd);
		object_free(o);
		return -ENOEXEC;
	}
	dwfl_report_end(o->dwfl, NULL, NULL);
	o->dev = st.st_dev;
	o->ino = st.st_ino;
	/* the module's userdata: the object, for the debug file search */
	dwfl_module_info(o->mod, &slot, NULL, NULL, NULL, NULL, NULL, NULL);
	*slot = o;
	n = dwfl_module_build_id(o->mod, &id, &vaddr);
	if (n > 0)
		o->build_id = hex(id, n);
	if (o->build_id)
		snprintf(key, sizeof(key), "%s", o->build_id);
	else
		snprintf(key, sizeof(key), "%llx:%llx:%llx:%llx", (unsigned long long)st.st_dev,
			 (unsigned long long)st.st_ino, (unsigned long long)st.st_size,
			 (unsigned long long)st.st_mtime);
	for (struct dbg_object *c = cache; c; c = c->next) {
		if (strcmp(c->key, key) == 0) {
			object_free(o);
			c->refs++;
			*out = c;
			return 0;
		}
	}
	o->key = strdup(key);
	if (!o->key) {
		object_free(o);
		return -ENOMEM;
	}
	/* one reference for the cache, one for the caller */
	o->refs = 2;
	o->next = cache;
	cache = o;
	*out = o;
	return 0;
}

void debuginfo_object__put(struct dbg_object *o)
{
	if (o)
		o->refs--;
}

void debuginfo_cache_trim(void)
{
	struct dbg_object **pp = &cache;

	while (*pp) {
		struct dbg_object *o = *pp;

		/* the cache's own reference only */
		if (o->refs > 1) {
			pp = &o->next;
			continue;
		}
		*pp = o->next;
		object_free(o);
	}
}

void debuginfo_cache_clear(void)
{
	while (cache) {
		struct dbg_object *o = cache;

		cache = o->next;
		object_free(o);
	}
	free(debuginfo_path);
	debuginfo_path = NULL;
}

const char *debuginfo_object__build_id(const struct dbg_object *o)
{
	return o->build_id;
}

static bool has_symtab(const char *path)
{
	int fd = files_open_regular_ro(path);
	bool found = false;
	Elf_Scn *scn = NULL;
	Elf *elf;

	if (fd < 0)
		return false;
	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	while (elf && !found && (scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;

		found = gelf_getshdr(scn, &sh) && sh.sh_type == SHT_SYMTAB && sh.sh_size;
	}
	elf_end(elf);
	close(fd);
	return found;
}

/*
 * A dwz multifile that find_debuginfo did not find is marked as looked for:
 * else libdw looks again itself, at the first reference into it, opening the
 * name the debug file gives with a blocking open() (dwarf_getalt). libdw's
 * mark for that is (Dwarf *)-1 (docs/symbols.md).
 */
static void no_alt(Dwarf *dw)
{
	dwarf_setalt(dw, (Dwarf *)-1);
}

void debuginfo_attach_alt(Dwarf *dw, const char *path, struct dbg_alt *alt)
{
	struct debug_query q = { .file_name = path, .alt = true };
	char *found = NULL;
	int fd;

	alt->dw = NULL;
	alt->fd = -1;
	if (!debuginfo_path)
		debuginfo_set_debug_dirs(NULL);
	q.path = debuginfo_path ? debuginfo_path : default_path;
	if (!debugsearch_altlink(dwarf_getelf(dw), &q.link, &q.id, &q.idlen))
		return;
	fd = debugsearch_find(&q, &found);
	free(found);
	alt->dw = fd >= 0 ? dwarf_begin(fd, DWARF_C_READ) : NULL;
	if (!alt->dw) {
		if (fd >= 0)
			close(fd);
		no_alt(dw);
		return;
	}
	alt->fd = fd;
	dwarf_setalt(dw, alt->dw);
}

void debuginfo_alt_end(struct dbg_alt *alt)
{
	if (alt->dw)
		dwarf_end(alt->dw);
	if (alt->fd >= 0)
		close(alt->fd);
	alt->dw = NULL;
	alt->fd = -1;
}

static void search(struct dbg_object *o)
{
	const char *mainfile = NULL, *debugfile = NULL;
	Dwarf_Addr bias;
	Dwarf *dw;

	if (o->searched)
		return;
	o->searched = true;
	/* both look for separate debug info when the file itself lacks it */
	dw = dwfl_module_getdwarf(o->mod, &bias);
	if (dw && o->alt_missing)
		no_alt(dw);
	dwfl_module_getsymtab(o->mod);
	dwfl_module_info(o->mod, NULL, NULL, NULL, NULL, NULL, &mainfile, &debugfile);
	if (debugfile && (!mainfile || strcmp(debugfile, mainfile) != 0))
		o->debug_file = strdup(debugfile);
	if (mainfile && has_symtab(mainfile))
		o->symtab_file = strdup(mainfile);
	else if (o->debug_file && has_symtab(o->debug_file))
		o->symtab_file = strdup(o->debug_file);
}

const char *debuginfo_object__symtab_file(struct dbg_object *o)
{
	search(o);
	return o->symtab_file;
}

const char *debuginfo_object__debug_file(struct dbg_object *o)
{
	search(o);
	return o->debug_file;
}

const struct debug_miss *debuginfo_object__miss(struct dbg_object *o)
{
	search(o);
	return &o->miss;
}

static const char *die_name(Dwarf_Die *die)
{
	Dwarf_Attribute a;
	const char *n;

	/* the linkage name demangles to the qualified one (C++, Rust) */
	if (dwarf_attr_integrate(die, DW_AT_linkage_name, &a) ||
	    dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &a)) {
		n = dwarf_formstring(&a);
		if (n)
			return n;
	}
	return dwarf_diename(die);
}

/* A relative source file made absolute with the CU's compilation directory, as addr2line shows it. */
static const char *abs_path(struct dbg_object *o, Dwarf_Die *cu, const char *file)
{
	const char *dir =
		cu ? dwarf_formstring(dwarf_attr(cu, DW_AT_comp_dir, &(Dwarf_Attribute){})) : NULL;
	size_t n;
	char *p, **nv;

	if (!file || file[0] == '/' || !dir || !dir[0])
		return file;
	n = strlen(dir) + 1 + strlen(file) + 1;
	p = malloc(n);
	if (!p)
		return file;
	snprintf(p, n, "%s/%s", dir, file);
	for (size_t i = 0; i < o->npaths; i++) {
		if (strcmp(o->paths[i], p) == 0) {
			free(p);
			return o->paths[i];
		}
	}
	nv = realloc(o->paths, (o->npaths + 1) * sizeof(*nv));
	if (!nv) {
		free(p);
		return file;
	}
	o->paths = nv;
	o->paths[o->npaths++] = p;
	return p;
}

/* The caller's position recorded on an inlined_subroutine DIE. */
static void call_site(Dwarf_Die *inl, Dwarf_Files *files, const char **file, int64_t *line)
{
	Dwarf_Attribute a;
	Dwarf_Word v;

	*file = NULL;
	*line = 0;
	if (files && dwarf_formudata(dwarf_attr(inl, DW_AT_call_file, &a), &v) == 0)
		*file = dwarf_filesrc(files, v, NULL, NULL);
	if (dwarf_formudata(dwarf_attr(inl, DW_AT_call_line, &a), &v) == 0)
		*line = (int64_t)v;
}

/*
 * The function at link-time vaddr, by binary search of the object's full
 * symbol table (its own, or its debug file's); libdwfl's dwfl_module_addrinfo
 * scans every symbol per lookup, minutes for 10k frames in a large library.
 */
static const char *func_name(struct dbg_object *o, uint64_t vaddr, GElf_Off *off)
{
	const struct elf_sym *s;
	const char *mainfile = NULL;

	if (!o->syms_tried) {
		o->syms_tried = true;
		if (o->symtab_file)
			elfobj__open(o->symtab_file, &o->syms);
		if (!o->syms) {
			/* no .symtab anywhere: the object's own .dynsym */
			dwfl_module_info(o->mod, NULL, NULL, NULL, NULL, NULL, &mainfile, NULL);
			if (mainfile)
				elfobj__open(mainfile, &o->syms);
		}
	}
	s = o->syms ? elfobj__func_at(o->syms, vaddr) : NULL;
	*off = s ? vaddr - s->addr : 0;
	return s ? s->name : NULL;
}

int debuginfo_object__lookup(struct dbg_object *o, uint64_t vaddr, struct sym_result *r)
{
	Dwarf_Addr addr = vaddr, cubias = 0;
	const char *symname, *file = NULL;
	int64_t line = 0;
	Dwarf_Die *cu, *scopes = NULL;
	Dwarf_Files *files = NULL;
	Dwfl_Line *dl;
	GElf_Off off = 0;
	size_t nfiles;
	int n, lineno;

	search(o);
	r->nlines = 0;
	symname = func_name(o, vaddr, &off);
	r->offset_in_func = off;
	dl = dwfl_module_getsrc(o->mod, addr);
	if (dl) {
		file = dwfl_lineinfo(dl, NULL, &lineno, NULL, NULL, NULL);
		line = lineno;
	}
	cu = dwfl_module_addrdie(o->mod, addr, &cubias);
	n = cu ? dwarf_getscopes(cu, addr - cubias, &scopes) : 0;
	if (cu && dwarf_getsrcfiles(cu, &files, &nfiles))
		files = NULL;
	/*
	 * The innermost function scope at pc; past an inlined instance
	 * dwarf_getscopes continues into the abstract definition, so the concrete
	 * chain of callers comes from dwarf_getscopes_die on that instance.
	 */
	for (int i = 0; i < n; i++) {
		int tag = dwarf_tag(&scopes[i]);

		if (tag == DW_TAG_inlined_subroutine || tag == DW_TAG_subprogram) {
			Dwarf_Die inner = scopes[i];

			free(scopes);
			scopes = NULL;
			n = dwarf_getscopes_die(&inner, &scopes);
			break;
		}
	}
	/* innermost first: inlined instances, then the real function */
	for (int i = 0; i < n && r->nlines < SYM_MAX_LINES; i++) {
		int tag = dwarf_tag(&scopes[i]);
		struct sym_line *sl = &r->lines[r->nlines];

		if (tag != DW_TAG_inlined_subroutine && tag != DW_TAG_subprogram)
			continue;
		sl->function = die_name(&scopes[i]);
		sl->file = abs_path(o, cu, file);
		sl->line = line;
		r->nlines++;
		if (tag == DW_TAG_subprogram) {
			/* the symbol table's name for the real function, as nm shows it */
			if (symname)
				sl->function = symname;
			break;
		}
		call_site(&scopes[i], files, &file, &line);
	}
	free(scopes);
	if (!r->nlines && symname) {
		r->lines[0].function = symname;
		r->lines[0].file = abs_path(o, cu, file);
		r->lines[0].line = line;
		r->nlines = 1;
	}
	return r->nlines ? 0 : -ENOENT;
}

int debuginfo_find_executable(const char *build_id, char *found, size_t len)
{
	const char *urls = getenv("DEBUGINFOD_URLS");
	debuginfod_client *c;
	char *path = NULL;
	int fd;

	if (!build_id || !build_id[0] || !urls || !urls[0])
		return -ENOENT;
	/* its cache checked first, as every directory heapbpf writes into (debugsearch.h) */
	fd = debugsearch_debuginfod_prepare();
	if (fd)
		return fd;
	c = debuginfod_begin();
	if (!c)
		return -ENOMEM;
	/* a build-id length of 0: the id is given as a hex string */
	fd = debuginfod_find_executable(c, (const unsigned char *)build_id, 0, &path);
	debuginfod_end(c);
	if (fd >= 0 && path)
		snprintf(found, len, "%s", path);
	free(path);
	return fd;
}
