// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "symbols/debuginfo.h"
#include "symbols/elfobj.h"
#include "util/files.h"
#include "symbols/symbolizer.h"

/* One file, opened while the target lived, parsed on first use. */
struct sym_file {
	char *path;
	char *name_path; /* where its .gnu_debuglink neighbours are: path, or via /proc/PID/root */
	int fd;		 /* -1 when it could not be opened */
	bool parsed;
	struct elf_object *elf;
	bool pooled; /* elf is the pool's (symbolizer__share), not freed here */
	struct dbg_object *dbg;
	char build_id[ELF_BUILD_ID_MAX]; /* of the file opened, "" if none */
};

/*
 * Parsed objects shared by build-id among the symbolizers of one session,
 * each held while a symbolizer uses it: an agent that samples one service
 * after another for days holds only the objects of those it samples now.
 */
struct sym_pool {
	struct pooled_elf {
		char build_id[ELF_BUILD_ID_MAX];
		struct elf_object *elf;
		size_t users; /* symbolizers whose file holds it */
	} * v;
	size_t n;
	bool keep_idle; /* one no symbolizer holds stays until symbolizer_pool__free */
};

struct sym_entry {
	struct sym_object obj;
	size_t file; /* index into files */
};

struct symbolizer {
	pid_t pid;		 /* 0 when offline (from a recording) */
	const char *const *dirs; /* offline: where else to look for the binaries */
	struct sym_file *files;
	size_t nfiles;
	struct sym_entry *objs; /* sorted by start, non-overlapping */
	size_t nobjs;
	struct sym_pool *pool; /* or NULL */
	char *main_path;       /* the first mapped file's: the executable, or NULL */
};

int symbolizer_pool__new(struct sym_pool **out)
{
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : -ENOMEM;
}

void symbolizer_pool__free(struct sym_pool *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->n; i++)
		elfobj__free(p->v[i].elf);
	free(p->v);
	free(p);
}

size_t symbolizer_pool__size(const struct sym_pool *p)
{
	return p ? p->n : 0;
}

void symbolizer_pool__keep_idle(struct sym_pool *p)
{
	p->keep_idle = true;
}

void symbolizer__share(struct symbolizer *s, struct sym_pool *p)
{
	s->pool = p;
}

/* A symbolizer's file no longer holds elf: freed with its last user. */
static void pool_put(struct sym_pool *p, struct elf_object *elf)
{
	for (size_t i = 0; i < p->n; i++) {
		if (p->v[i].elf != elf)
			continue;
		if (--p->v[i].users || p->keep_idle)
			return;
		elfobj__free(elf);
		p->v[i] = p->v[--p->n];
		return;
	}
}

/* Lets go of f's parsed object: the pool's, or its own. */
static void put_elf(struct symbolizer *s, struct sym_file *f)
{
	if (f->pooled)
		pool_put(s->pool, f->elf);
	else
		elfobj__free(f->elf);
	f->elf = NULL;
	f->pooled = false;
}

/* The pool's object of f's build-id, parsed and added on first use; NULL: not pooled. */
static struct elf_object *pooled_elf(struct sym_pool *p, const struct sym_file *f, const char *path)
{
	struct pooled_elf *v;

	if (!p || !f->build_id[0])
		return NULL;
	for (size_t i = 0; i < p->n; i++) {
		if (!strcmp(p->v[i].build_id, f->build_id)) {
			p->v[i].users++;
			return p->v[i].elf;
		}
	}
	v = realloc(p->v, (p->n + 1) * sizeof(*v));
	if (!v)
		return NULL;
	p->v = v;
	if (elfobj__open(path, &v[p->n].elf))
		return NULL;
	snprintf(v[p->n].build_id, sizeof(v[p->n].build_id), "%s", f->build_id);
	v[p->n].users = 1;
	return v[p->n++].elf;
}

/* Opens the mapped file (proc_map_open); root_path: its name inside the process's root. */
static int open_mapped(pid_t pid, const struct proc_map *pm, char *root_path, size_t len)
{
	root_path[0] = '\0';
	proc_map_open_path(pid, pm->path, root_path, len);
	return proc_map_open(pid, pm);
}

/* The file's own path when it is the same file from here, else the path through /proc/PID/root. */
static char *name_path_for(int fd, const char *path, const char *root_path)
{
	struct stat a, b;

	if (fd >= 0 && fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev &&
	    a.st_ino == b.st_ino)
		return strdup(path);
	return strdup(root_path[0] ? root_path : path);
}

static bool same_build_id(int fd, const char *want)
{
	char got[ELF_BUILD_ID_MAX];

	if (!want || !want[0])
		return true;
	return elfobj_fd_build_id(fd, got, sizeof(got)) == 0 && strcmp(got, want) == 0;
}

static int try_open(const char *path, const char *build_id, char *found, size_t len)
{
	int fd = files_open_regular_ro(path);

	if (fd < 0)
		return fd;
	if (!same_build_id(fd, build_id)) {
		close(fd);
		return -ENOENT;
	}
	snprintf(found, len, "%s", path);
	return fd;
}

/*
 * Offline: the binary a recording names, found by build-id under each search
 * directory (as a sysroot, then by file name), at its own path, then through
 * debuginfod. -1 when nowhere.
 */
static int open_offline(const char *const *dirs, const char *path, const char *build_id,
			char *found, size_t len)
{
	const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
	char buf[8192];
	int fd;

	for (; dirs && *dirs; dirs++) {
		snprintf(buf, sizeof(buf), "%s%s", *dirs, path);
		fd = try_open(buf, build_id, found, len);
		if (fd >= 0)
			return fd;
		snprintf(buf, sizeof(buf), "%s/%s", *dirs, base);
		fd = try_open(buf, build_id, found, len);
		if (fd >= 0)
			return fd;
	}
	fd = try_open(path, build_id, found, len);
	if (fd >= 0)
		return fd;
	return debuginfo_find_executable(build_id, found, len);
}

int symbolizer_find_binary(const char *const *dirs, const char *path, const char *build_id,
			   char *found, size_t len)
{
	return open_offline(dirs, path, build_id, found, len);
}

static int file_index(struct symbolizer *s, const struct proc_map *pm, const char *build_id,
		      size_t *idx)
{
	const char *path = pm->path;
	char buf[4096];
	struct sym_file *nv;

	for (size_t i = 0; i < s->nfiles; i++) {
		if (strcmp(s->files[i].path, path) == 0) {
			*idx = i;
			return 0;
		}
	}
	nv = realloc(s->files, (s->nfiles + 1) * sizeof(*nv));
	if (!nv)
		return -ENOMEM;
	s->files = nv;
	nv = &s->files[s->nfiles];
	memset(nv, 0, sizeof(*nv));
	nv->path = strdup(path);
	if (!nv->path)
		return -ENOMEM;
	if (s->pid) {
		/* hold the file open: the process (and /proc/PID/root) may be gone at report time */
		nv->fd = open_mapped(s->pid, pm, buf, sizeof(buf));
		nv->name_path = name_path_for(nv->fd, path, buf);
	} else {
		nv->fd = open_offline(s->dirs, path, build_id, buf, sizeof(buf));
		nv->name_path = strdup(nv->fd >= 0 ? buf : path);
	}
	if (nv->fd >= 0 && elfobj_fd_build_id(nv->fd, nv->build_id, sizeof(nv->build_id)))
		nv->build_id[0] = '\0';
	*idx = s->nfiles++;
	return nv->name_path ? 0 : -ENOMEM;
}

static int cmp_entry(const void *a, const void *b)
{
	const struct sym_entry *x = a, *y = b;

	return (x->obj.start > y->obj.start) - (x->obj.start < y->obj.start);
}

static const struct sym_entry *find_entry_in(const struct symbolizer *s, size_t n, uint64_t addr)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (addr < s->objs[mid].obj.start)
			hi = mid;
		else if (addr >= s->objs[mid].obj.limit)
			lo = mid + 1;
		else
			return &s->objs[mid];
	}
	return NULL;
}

static const struct sym_entry *find_entry(const struct symbolizer *s, uint64_t addr)
{
	return find_entry_in(s, s->nobjs, addr);
}

/* Adds m's executable file mappings; build_ids[i] (may be NULL) is what mapping i must match. */
static int add_maps(struct symbolizer *s, const struct proc_maps *m, const char *const *build_ids)
{
	size_t known = s->nobjs;
	int err = 0;

	/* the kernel maps the executable first (lowest), as target.c's is_main_exe takes it */
	for (size_t i = 0; !s->main_path && i < m->n; i++) {
		if (m->v[i].path && m->v[i].path[0] == '/') {
			s->main_path = strdup(m->v[i].path);
			if (!s->main_path)
				return -ENOMEM;
		}
	}
	for (size_t i = 0; i < m->n; i++) {
		const struct proc_map *pm = &m->v[i];
		struct sym_entry *nv, *e;

		if (!pm->path || pm->path[0] != '/' || !strchr(pm->perms, 'x'))
			continue;
		if (find_entry_in(s, known, pm->start))
			continue; /* known from an earlier snapshot */
		nv = realloc(s->objs, (s->nobjs + 1) * sizeof(*nv));
		if (!nv) {
			err = -ENOMEM;
			break;
		}
		s->objs = nv;
		e = &s->objs[s->nobjs];
		memset(e, 0, sizeof(*e));
		err = file_index(s, pm, build_ids ? build_ids[i] : NULL, &e->file);
		e->obj.path = strdup(pm->path);
		if (err || !e->obj.path) {
			free(e->obj.path);
			err = err ? err : -ENOMEM;
			break;
		}
		/* the file's own build-id; offline, the recorded one when the file is missing */
		if (s->files[e->file].build_id[0])
			e->obj.build_id = strdup(s->files[e->file].build_id);
		else if (build_ids && build_ids[i] && build_ids[i][0])
			e->obj.build_id = strdup(build_ids[i]);
		e->obj.start = pm->start;
		e->obj.limit = pm->end;
		e->obj.file_offset = pm->offset;
		s->nobjs++;
	}
	/* sorted for find_entry; this renumbers objects, so refresh before lookups */
	qsort(s->objs, s->nobjs, sizeof(*s->objs), cmp_entry);
	return err;
}

int symbolizer__new(pid_t pid, struct symbolizer **out)
{
	struct symbolizer *s = calloc(1, sizeof(*s));
	struct proc_maps *m;
	int err;

	if (!s)
		return -ENOMEM;
	s->pid = pid;
	err = proc_maps__read(pid, &m);
	if (err) {
		free(s);
		return err;
	}
	err = add_maps(s, m, NULL);
	proc_maps__free(m);
	if (err) {
		symbolizer__free(s);
		return err;
	}
	*out = s;
	return 0;
}

int symbolizer__new_offline(const struct proc_maps *maps, const char *const *build_ids,
			    const char *const *dirs, struct symbolizer **out)
{
	struct symbolizer *s = calloc(1, sizeof(*s));
	int err;

	if (!s)
		return -ENOMEM;
	s->dirs = dirs;
	err = add_maps(s, maps, build_ids);
	if (err) {
		symbolizer__free(s);
		return err;
	}
	*out = s;
	return 0;
}

int symbolizer__refresh(struct symbolizer *s)
{
	struct proc_maps *m;
	int err;

	if (!s->pid || !proc_alive(s->pid))
		return 0;
	err = proc_maps__read(s->pid, &m);
	if (err)
		return err == -ESRCH ? 0 : err;
	err = add_maps(s, m, NULL);
	proc_maps__free(m);
	return err;
}

void symbolizer__free(struct symbolizer *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->nfiles; i++) {
		put_elf(s, &s->files[i]);
		debuginfo_object__put(s->files[i].dbg);
		free(s->files[i].name_path);
		if (s->files[i].fd >= 0)
			close(s->files[i].fd);
		free(s->files[i].path);
	}
	for (size_t i = 0; i < s->nobjs; i++) {
		free(s->objs[i].obj.path);
		free(s->objs[i].obj.build_id);
	}
	free(s->files);
	free(s->objs);
	free(s->main_path);
	free(s);
}

void symbolizer__release(struct symbolizer *s)
{
	for (size_t i = 0; i < s->nfiles; i++) {
		struct sym_file *f = &s->files[i];

		put_elf(s, f);
		debuginfo_object__put(f->dbg);
		f->dbg = NULL;
		f->parsed = false;
	}
	debuginfo_cache_trim();
}

static struct elf_object *file_elf(struct symbolizer *s, size_t idx)
{
	struct sym_file *f = &s->files[idx];
	char buf[64];

	if (!f->parsed) {
		f->parsed = true;
		if (f->fd >= 0) {
			snprintf(buf, sizeof(buf), "/proc/self/fd/%d", f->fd);
			f->elf = pooled_elf(s->pool, f, buf);
			f->pooled = f->elf != NULL;
			if (!f->elf && elfobj__open(buf, &f->elf))
				f->elf = NULL;
			if (f->elf && debuginfo_object__get(f->fd, f->name_path, &f->dbg))
				f->dbg = NULL;
		}
	}
	return f->elf;
}

int symbolizer__lookup(struct symbolizer *s, uint64_t addr, bool is_return, struct sym_result *r)
{
	uint64_t pc = is_return && addr ? addr - 1 : addr, vaddr;
	const struct sym_entry *e;
	const struct elf_sym *sym;
	struct elf_object *elf;
	struct sym_object *so;

	memset(r, 0, sizeof(*r));
	r->object = -1;
	e = find_entry(s, pc);
	if (!e)
		return -ENOENT;
	r->object = e - s->objs;
	so = &s->objs[r->object].obj;
	elf = file_elf(s, e->file);
	if (!elf)
		return 0;
	if (elfobj__offset_to_vaddr(elf, pc - e->obj.start + e->obj.file_offset, &vaddr))
		return 0;
	/* DWARF and separate debug info first, the object's own symbols as a fallback */
	if (s->files[e->file].dbg &&
	    debuginfo_object__lookup(s->files[e->file].dbg, vaddr, r) == 0) {
		so->has_functions = true;
		so->has_filenames |= r->lines[0].file != NULL;
		so->has_line_numbers |= r->lines[0].line != 0;
		so->has_inline_frames |= r->nlines > 1;
		return 0;
	}
	sym = elfobj__func_at(elf, vaddr);
	if (!sym)
		return 0;
	so->has_functions = true;
	r->nlines = 1;
	r->lines[0].function = sym->name;
	r->offset_in_func = vaddr - sym->addr;
	return 0;
}

size_t symbolizer__nobjects(const struct symbolizer *s)
{
	return s->nobjs;
}

const struct sym_object *symbolizer__object(const struct symbolizer *s, int i)
{
	return i >= 0 && (size_t)i < s->nobjs ? &s->objs[i].obj : NULL;
}

int symbolizer__main_object(const struct symbolizer *s)
{
	for (size_t i = 0; s->main_path && i < s->nobjs; i++) {
		if (strcmp(s->objs[i].obj.path, s->main_path) == 0)
			return (int)i;
	}
	return -1;
}
