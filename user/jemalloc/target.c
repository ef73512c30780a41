// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/errmsg.h"
#include "symbols/debuginfo.h"
#include "symbols/debugsearch.h"
#include "util/files.h"
#include "jemalloc/layout_dwarf.h"
#include "jemalloc/target.h"
#include "symbols/debugpkg.h"

#define SAMPLE_FN "prof_malloc_sample_object"
#define FREE_FN	  "prof_free_sampled_object"

/* Exports jemalloc's API or embeds its version string. */
static bool looks_like_jemalloc(const struct elf_object *elf)
{
	char v[96];

	return elfobj__sym_by_suffix(elf, "mallctl", STT_FUNC) ||
	       elfobj__jemalloc_version(elf, v, sizeof(v)) == 0;
}

/* Executable, file-backed objects of the process, most likely jemalloc holders first. */
static int candidate_paths(const struct proc_maps *m, const char ***out, size_t *n)
{
	const char **v = calloc(m->n ? m->n : 1, sizeof(*v));
	size_t cnt = 0;

	if (!v)
		return -ENOMEM;
	for (int pass = 0; pass < 3; pass++) {
		for (size_t i = 0; i < m->n; i++) {
			const struct proc_map *pm = &m->v[i];
			bool dup = false;

			if (!pm->path || pm->path[0] != '/' || !strchr(pm->perms, 'x'))
				continue;
			/* pass 0: named like jemalloc; 1: the executable (mapped first); 2: rest */
			if (pass == 0 && !strstr(pm->path, "jemalloc"))
				continue;
			if (pass == 1 && strcmp(pm->path, m->v[0].path ? m->v[0].path : "") != 0)
				continue;
			for (size_t j = 0; j < cnt && !dup; j++)
				dup = strcmp(v[j], pm->path) == 0;
			if (!dup)
				v[cnt++] = pm->path;
		}
	}
	*out = v;
	*n = cnt;
	return 0;
}

static const struct proc_map *first_mapping(const struct proc_maps *m, const char *path)
{
	for (size_t i = 0; i < m->n; i++) {
		if (m->v[i].path && strcmp(m->v[i].path, path) == 0)
			return &m->v[i];
	}
	return NULL;
}

/* The public prefix, from the object's mallctl: "mallctl" -> "", "_rjem_mallctl" -> "_rjem_". */
static void detect_public_prefix(struct jemalloc_target *t)
{
	const struct elf_sym *best = NULL;
	const char *names[] = { "mallctl", "malloc_stats_print", "mallocx" };

	for (size_t k = 0; k < sizeof(names) / sizeof(names[0]) && !best; k++) {
		size_t sl = strlen(names[k]);
		const struct elf_sym *s;

		s = elfobj__sym_by_name(t->symelf, names[k]);
		if (s) {
			best = s;
			break;
		}
		/*
		 * A prefixed build: a function ending in the name. The public API is
		 * exported (global), the private namespace is hidden (local once
		 * linked), so a global one counts even when the public prefix equals
		 * the private namespace (--with-jemalloc-prefix=je_).
		 */
		s = elfobj__sym_by_suffix(t->symelf, names[k], STT_FUNC);
		if (s && strlen(s->name) > sl &&
		    (s->bind == STB_GLOBAL || s->bind == STB_WEAK ||
		     strncmp(s->name, t->ns_prefix, strlen(t->ns_prefix)) != 0))
			best = s;
	}
	t->pub_prefix[0] = '\0';
	if (best) {
		const char *end = strstr(best->name, "mall");
		size_t n = end ? (size_t)(end - best->name) : 0;

		if (n < sizeof(t->pub_prefix)) {
			memcpy(t->pub_prefix, best->name, n);
			t->pub_prefix[n] = '\0';
		}
	}
	/* jemalloc reads JEMALLOC_CPREFIX "MALLOC_CONF": the public prefix upper-cased */
	size_t i;
	for (i = 0; t->pub_prefix[i] && i + 12 < sizeof(t->conf_env); i++)
		t->conf_env[i] = toupper((unsigned char)t->pub_prefix[i]);
	snprintf(t->conf_env + i, sizeof(t->conf_env) - i, "MALLOC_CONF");
}

static int resolve_global(struct jemalloc_target *t, const char *name, uint64_t *addr)
{
	char full[128];
	const struct elf_sym *s;

	snprintf(full, sizeof(full), "%s%s", t->ns_prefix, name);
	s = elfobj__sym_by_name(t->symelf, full);
	if (!s || s->type != STT_OBJECT)
		return -ENOENT;
	*addr = s->addr + t->bias;
	return 0;
}

static int resolve_func(struct jemalloc_target *t, const char *name, uint64_t *off, uint64_t *addr)
{
	char full[128];
	const struct elf_sym *s;
	const struct proc_map *m;

	snprintf(full, sizeof(full), "%s%s", t->ns_prefix, name);
	s = elfobj__sym_by_name(t->symelf, full);
	if (!s || s->type != STT_FUNC)
		return -ENOENT;
	if (elfobj__vaddr_to_offset(t->elf, s->addr, off))
		return -ENOENT;
	*addr = s->addr + t->bias;
	m = proc_maps__find(t->maps, *addr);
	if (!m || !strchr(m->perms, 'x') || !m->path || strcmp(m->path, t->path) != 0)
		return -EFAULT;
	return 0;
}

static int fail_noprof(char *err, size_t errlen, pid_t pid, const char *path)
{
	return hb_fail(
		err, errlen, -ENOTSUP,
		"jemalloc in pid %d (%s) was built without profiling support; rebuild it with "
		"--enable-prof (tikv-jemallocator: feature \"profiling\")",
		pid, path);
}

/*
 * --disable-prof still compiles the sampling functions (seen in 5.3.0), so
 * their presence proves nothing. opt_prof_prefix tells: PATH_MAX + 1 bytes
 * with profiling, 1 byte without ("minimize memory bloat for non-prof
 * builds", 5.2.1 to 5.3.1).
 */
static bool built_without_prof(const struct jemalloc_target *t)
{
	char full[128];
	const struct elf_sym *s;

	snprintf(full, sizeof(full), "%sopt_prof_prefix", t->ns_prefix);
	s = elfobj__sym_by_name(t->symelf, full);
	return s && s->type == STT_OBJECT && s->size == 1;
}

/*
 * The value a one-byte global has in the object file, i.e. its compile-time
 * default (0 when it lives in .bss), not what the process holds now.
 */
static int file_default_u8(const struct jemalloc_target *t, const char *name, uint8_t *v)
{
	char full[128];
	const struct elf_sym *s;
	uint64_t off;
	ssize_t n;
	int fd;

	snprintf(full, sizeof(full), "%s%s", t->ns_prefix, name);
	s = elfobj__sym_by_name(t->symelf, full);
	if (!s || s->type != STT_OBJECT)
		return -ENOENT;
	if (elfobj__vaddr_to_offset(t->elf, s->addr, &off)) {
		if (!elfobj__vaddr_writable(t->elf, s->addr, 1))
			return -ENOENT;
		*v = 0;
		return 0;
	}
	fd = files_open_regular_ro(t->open_path);
	if (fd < 0)
		return fd;
	n = pread(fd, v, 1, (off_t)off);
	close(fd);
	return n == 1 ? 0 : -EIO;
}

/*
 * A --enable-debug jemalloc without DWARF to tell: opt_abort and
 * opt_abort_conf default to true only in debug builds (src/jemalloc.c,
 * 5.2.1 to 5.3.1).
 */
static bool debug_build_by_defaults(const struct jemalloc_target *t)
{
	uint8_t abort_opt = 0, abort_conf = 0;

	return !file_default_u8(t, "opt_abort", &abort_opt) &&
	       !file_default_u8(t, "opt_abort_conf", &abort_conf) && abort_opt == 1 &&
	       abort_conf == 1;
}

/* The active flag's name as the object's symbols have it: 5.3's, else 5.2's. */
static const char *active_sym_present(const struct jemalloc_target *t)
{
	char full[128];
	const struct elf_sym *s;

	snprintf(full, sizeof(full), "%sprof_active_state", t->ns_prefix);
	s = elfobj__sym_by_name(t->symelf, full);
	return s && s->type == STT_OBJECT ? "prof_active_state" : "prof_active";
}

/* A version without a release string whose object carries DWARF: the layout is the DWARF's. */
static int layout_of_dwarf(struct jemalloc_target *t, const struct jemalloc_dwarf *d, char *err,
			   size_t errlen)
{
	char why[256];

	if (layout_dwarf_layout(d, active_sym_present(t), &t->layout_buf, why, sizeof(why)))
		return hb_fail(err, errlen, -EPROTO,
			       "jemalloc %s in pid %d (%s) is not a version heapbpf knows (%s) and "
			       "%s; heapbpf will not guess its layout",
			       t->version, t->pid, t->path, jemalloc_layout_names(), why);
	t->layout = &t->layout_buf;
	t->layout_from_dwarf = t->dwarf_checked = true;
	/* its prof_info_t offsets are the debug build's already */
	t->debug_build = d->have_nstime && d->nstime_magic;
	return 0;
}

/*
 * Picks the layout and says how far it is confirmed. A release string the
 * table knows: its entry. Any other version whose object carries DWARF: the
 * layout built from the DWARF. Otherwise the entry of its X.Y.Z (or the
 * forced one), which the session confirms on the first samples. A table or
 * forced entry is adjusted for a debug build and checked against whatever
 * DWARF there is.
 */
static int choose_layout(struct jemalloc_target *t, const char *layout_name, char *err,
			 size_t errlen)
{
	enum jemalloc_match how;
	const struct jemalloc_layout *base = jemalloc_layout_match(t->version, &how);
	struct jemalloc_dwarf d;
	char why[256];
	int drc;

	if (layout_name) {
		base = jemalloc_layout_by_name(layout_name);
		if (!base)
			return hb_fail(err, errlen, -EINVAL,
				       "unknown jemalloc layout \"%s\"; known layouts: %s",
				       layout_name, jemalloc_layout_names());
		t->layout_forced = true;
	}
	/* DWARF, where there is some, is the authority on both questions */
	drc = layout_dwarf_read(t->debug_file ? t->debug_file : t->open_path, &d);
	if (!layout_name && how != JEMALLOC_MATCH_EXACT && !drc &&
	    (!base || !layout_dwarf_layout(&d, "", &t->layout_buf, why, sizeof(why))))
		return layout_of_dwarf(t, &d, err, errlen);
	if (!base)
		return hb_fail(err, errlen, -ENOTSUP,
			       "jemalloc %s in pid %d (%s) is not a version heapbpf knows (%s) and "
			       "has no debug info to read its layout from; force a layout with "
			       "--jemalloc-layout only if you know it matches",
			       t->version, t->pid, t->path, jemalloc_layout_names());
	if (!drc && d.have_nstime)
		t->debug_build = d.nstime_magic;
	else
		t->debug_build = debug_build_by_defaults(t);
	if (t->debug_build)
		jemalloc_layout_debug(base, &t->layout_buf);
	else
		t->layout_buf = *base;
	t->layout = &t->layout_buf;
	/* a number or a forced name; DWARF, when there is some, checks only what it describes */
	t->needs_selfcheck = how != JEMALLOC_MATCH_EXACT;
	if (drc)
		return 0;
	if (layout_dwarf_check(t->layout, &d, why, sizeof(why)))
		return hb_fail(
			err, errlen, -EPROTO,
			"jemalloc %s in pid %d (%s) does not match heapbpf's %s layout%s: %s; "
			"heapbpf will not read its memory with a wrong layout",
			t->version, t->pid, t->path, t->layout->name,
			t->debug_build ? " for a debug build" : "", why);
	t->dwarf_checked = true;
	return 0;
}

void jemalloc_target__free(struct jemalloc_target *t)
{
	if (!t)
		return;
	proc_maps__free(t->maps);
	if (t->symelf != t->elf)
		elfobj__free(t->symelf);
	elfobj__free(t->elf);
	free(t->debug_file);
	free(t->path);
	free(t->open_path);
	if (t->obj_fd >= 0)
		close(t->obj_fd);
	free(t);
}

/*
 * A stripped object's full symbol table from its separate debug info
 * (build-id directory, .gnu_debuglink, debuginfod). Fills build_id for messages.
 */
static struct elf_object *debug_symbols(const char *open_path, const char *name, char **debug_file,
					char *build_id, size_t idlen, struct debug_miss *why)
{
	struct elf_object *symelf = NULL;
	struct dbg_object *d;
	const char *file;
	int fd = files_open_regular_ro(open_path);

	if (fd < 0)
		return NULL;
	/* named by its path in the target's namespace: debuglink files sit next to it */
	if (debuginfo_object__get(fd, name, &d) == 0) {
		snprintf(build_id, idlen, "%s",
			 debuginfo_object__build_id(d) ? debuginfo_object__build_id(d) : "(none)");
		file = debuginfo_object__symtab_file(d);
		if (file && elfobj__open(file, &symelf) == 0)
			*debug_file = strdup(file);
		*why = *debuginfo_object__miss(d);
		debuginfo_object__put(d);
	}
	close(fd);
	return symelf;
}

/*
 * The candidate mapped from path: its ELF object, the path heapbpf opens it
 * by and, for a live pid, the descriptor that path names. A live pid's
 * object is the very file it maps (proc_map_open), held open, and named
 * /proc/self/fd/N from then on: everything later (its DWARF, the uprobes'
 * attach, the stat that tells files apart) reaches that file, never a path
 * resolved again.
 */
static int open_candidate(const struct jemalloc_target *t, const char *path,
			  struct elf_object **elf, char **open_path, int *fd)
{
	const struct proc_map *m;
	char buf[4096];
	int err;

	*fd = -1;
	/* a core file's objects are found on disk by its own rules (user/heap/memsrc_core.c) */
	if (t->open_object) {
		err = t->open_object(t->open_ctx, path, buf, sizeof(buf));
	} else {
		m = first_mapping(t->maps, path);
		*fd = m ? proc_map_open(t->pid, m) : -ENOENT;
		if (*fd < 0)
			return *fd;
		snprintf(buf, sizeof(buf), "/proc/self/fd/%d", *fd);
		err = 0;
	}
	err = err ?: elfobj__open(buf, elf);
	*open_path = err ? NULL : strdup(buf);
	if (!err && !*open_path) {
		elfobj__free(*elf);
		err = -ENOMEM;
	}
	if (err && *fd >= 0) {
		close(*fd);
		*fd = -1;
	}
	return err;
}

/* /proc/PID/maps, or why the pid has none. */
static int read_maps(struct jemalloc_target *t, char *err, size_t errlen)
{
	char statpath[64];
	struct stat st;
	int rc = proc_maps__read(t->pid, &t->maps);

	if (!rc)
		return 0;
	snprintf(statpath, sizeof(statpath), "/proc/%d/stat", t->pid);
	if (rc == -ESRCH && stat(statpath, &st) == 0)
		return hb_fail(
			err, errlen, -ESRCH,
			"pid %d (%s) has no memory mappings: it is a kernel thread or is exiting",
			t->pid, t->comm);
	if (rc == -ESRCH)
		return hb_fail(err, errlen, -ESRCH, "no process with pid %d", t->pid);
	return hb_fail(err, errlen, rc, "cannot read /proc/%d/maps: %s", t->pid, strerror(-rc));
}

/* Why no candidate object qualified: the first jemalloc-looking one, for the message. */
struct find_miss {
	char stripped[4096];   /* no symbol table, and no debug info found */
	char noprof[4096];     /* symbols, but no sampling function */
	char build_id[128];    /* what the debug info lookup looked for */
	char stale[4096];      /* its path leads to another file than the one mapped */
	struct debug_miss why; /* files refused, debuginfod's answer */
	int prof;	    /* the stripped one's start settings: PROF_ON, PROF_OFF, PROF_UNKNOWN */
	char conf_env[48];  /* the variable they are read from, when known */
	char conf_link[64]; /* and the link, "/etc/malloc.conf" */
};

/* What the settings jemalloc reads at start say of "prof". */
enum { PROF_UNKNOWN, PROF_ON, PROF_OFF };

/* The public prefix from the object's exported mallctl; false when it exports none. */
static bool exported_prefix(const struct elf_object *elf, char *pfx, size_t len)
{
	const struct elf_sym *s = elfobj__sym_by_name(elf, "mallctl");

	if (!s)
		s = elfobj__sym_by_suffix(elf, "mallctl", STT_FUNC);
	if (!s || !s->addr || (s->bind != STB_GLOBAL && s->bind != STB_WEAK) ||
	    strlen(s->name) - strlen("mallctl") >= len)
		return false;
	snprintf(pfx, len, "%.*s", (int)(strlen(s->name) - strlen("mallctl")), s->name);
	return true;
}

/* "prof:true" or "prof:false" in a conf string (the last one wins) into *prof. */
static void conf_prof(const char *conf, int *prof)
{
	for (const char *p = conf; p && *p;) {
		size_t n = strcspn(p, ",");

		if (n == strlen("prof:true") && strncmp(p, "prof:true", n) == 0)
			*prof = PROF_ON;
		else if (n == strlen("prof:false") && strncmp(p, "prof:false", n) == 0)
			*prof = PROF_OFF;
		p += n + (p[n] == ',');
	}
}

/*
 * The string the exported global name (jemalloc's malloc_conf) of the
 * object at path points to in the live process: 1 and the string in buf
 * ("" for NULL), 0 when the object does not define it, negative on error.
 */
static int exported_string(const struct jemalloc_target *t, const char *path,
			   const struct elf_object *elf, const char *name, char *buf, size_t len)
{
	const struct elf_sym *s = elfobj__sym_by_name(elf, name);
	const struct proc_map *m = first_mapping(t->maps, path);
	uint64_t bias, ptr;
	size_t n = 0;
	int rc;

	if (!s || !s->addr || s->type != STT_OBJECT || s->size != sizeof(ptr))
		return 0;
	if (!m || elfobj__load_bias(elf, m->start, m->offset, &bias))
		return -ENOEXEC;
	rc = proc_mem_read(t->pid, s->addr + bias, &ptr, sizeof(ptr));
	if (rc)
		return rc;
	/* byte by byte: the string may end just before an unmapped page */
	while (ptr && n + 1 < len && !(rc = proc_mem_read(t->pid, ptr + n, buf + n, 1)) && buf[n])
		n++;
	if (ptr && (rc || n + 1 >= len))
		return rc ? rc : -E2BIG;
	buf[n] = '\0';
	return 1;
}

/*
 * Whether a jemalloc heapbpf cannot read the symbols of (elf, mapped from
 * path) runs with prof:true, from what jemalloc reads at start, in its
 * order: the malloc_conf global (the executable's, which takes the
 * library's place, else the library's own; exported, so found without
 * symbols), the name /etc/<prefix>malloc.conf links to, and the
 * environment variable, from /proc/PID/environ. Not seen: a build's own
 * --with-malloc-conf. PROF_UNKNOWN for a core, an object that exports
 * neither mallctl (its prefix, so the variable's name) nor malloc_conf,
 * an environment a title was written over, and anything unreadable.
 */
static int start_prof(const struct jemalloc_target *t, const char *path,
		      const struct elf_object *elf, char *conf_env, size_t envlen, char *link,
		      size_t linklen)
{
	char pfx[32], name[64], file[4096], conf[4096], *env = NULL, *e;
	const char *exe = t->maps->v[0].path;
	struct elf_object *exe_elf = NULL;
	int prof = PROF_OFF, rc = 0, fd;
	size_t i, n = 0, cap = 0;
	ssize_t got;

	if (t->mem || !exported_prefix(elf, pfx, sizeof(pfx)))
		return PROF_UNKNOWN;
	snprintf(name, sizeof(name), "%smalloc_conf", pfx);
	fd = exe && strcmp(exe, path) != 0 ? proc_map_open(t->pid, &t->maps->v[0]) : -ENOENT;
	snprintf(file, sizeof(file), "/proc/self/fd/%d", fd);
	if (fd >= 0 && elfobj__open(file, &exe_elf) == 0)
		rc = exported_string(t, exe, exe_elf, name, conf, sizeof(conf));
	elfobj__free(exe_elf);
	if (fd >= 0)
		close(fd);
	if (rc == 0)
		rc = exported_string(t, path, elf, name, conf, sizeof(conf));
	if (rc <= 0)
		return PROF_UNKNOWN;
	conf_prof(conf, &prof);
	snprintf(link, linklen, "/etc/%smalloc.conf", pfx);
	snprintf(file, sizeof(file), "/proc/%d/root%s", t->pid, link);
	/* the link as the process reads it: inside its own root */
	got = hb_readlink(file, conf, sizeof(conf));
	/* none there, or not a link: jemalloc reads nothing from it either */
	if (got < 0 && got != -ENOENT && got != -EINVAL && got != -ENOTDIR)
		return PROF_UNKNOWN;
	conf[got > 0 ? got : 0] = '\0';
	conf_prof(conf, &prof);
	/* the variable: the prefix upper-cased, as jemalloc's JEMALLOC_CPREFIX */
	for (i = 0; pfx[i] && i + 12 < envlen; i++)
		conf_env[i] = (char)toupper((unsigned char)pfx[i]);
	snprintf(conf_env + i, envlen - i, "MALLOC_CONF");
	snprintf(file, sizeof(file), "/proc/%d/environ", t->pid);
	fd = files_open_regular_ro(file);
	if (fd < 0)
		return PROF_UNKNOWN;
	do {
		if (n + 4096 + 1 > cap) {
			char *bigger = realloc(env, cap = 2 * cap + 4096 + 1);

			if (!bigger) {
				got = -1;
				break;
			}
			env = bigger;
		}
		got = read(fd, env + n, cap - n - 1);
		n += got > 0 ? (size_t)got : 0;
	} while (got > 0);
	close(fd);
	if (got < 0) {
		free(env);
		return PROF_UNKNOWN;
	}
	/*
	 * NAME=value\0 entries; the first of a name is the one getenv finds.
	 * A process that wrote its title over them (Redis's setproctitle) keeps
	 * its environment elsewhere: what is left there says nothing.
	 */
	if (env)
		env[n] = '\0';
	for (e = env; e && e < env + n; e += strlen(e) + 1) {
		size_t nl = strlen(conf_env);

		if (!strchr(e, '=') || e[0] == '=') {
			prof = PROF_UNKNOWN;
			break;
		}
		if (strncmp(e, conf_env, nl) == 0 && e[nl] == '=') {
			conf_prof(e + nl + 1, &prof);
			break;
		}
	}
	free(env);
	return prof;
}

/*
 * jemalloc's sampling function in the candidate at path, from its symbol
 * table or its separate debug info. On success t owns the object (elf,
 * symelf, paths); otherwise miss notes why it did not qualify.
 */
static const struct elf_sym *try_candidate(struct jemalloc_target *t, const char *path,
					   struct find_miss *miss)
{
	struct debug_miss why = { .debuginfod = 0 };
	struct elf_object *elf, *symelf;
	const struct elf_sym *s;
	char *open_path, name[4096];
	int fd, rc = open_candidate(t, path, &elf, &open_path, &fd);

	if (rc == -ESTALE && !miss->stale[0])
		snprintf(miss->stale, sizeof(miss->stale), "%s", path);
	if (rc)
		return NULL;
	/* its debuglink neighbours are found by its name, inside the process's root */
	if (t->open_object || proc_map_open_path(t->pid, path, name, sizeof(name)))
		snprintf(name, sizeof(name), "%s", open_path);
	symelf = elf;
	s = elfobj__sym_by_suffix(elf, SAMPLE_FN, STT_FUNC);
	if (!s && !elfobj__has_symtab(elf) && looks_like_jemalloc(elf)) {
		symelf = debug_symbols(open_path, name, &t->debug_file, miss->build_id,
				       sizeof(miss->build_id), &why);
		s = symelf ? elfobj__sym_by_suffix(symelf, SAMPLE_FN, STT_FUNC) : NULL;
		if (!s) {
			elfobj__free(symelf);
			symelf = elf;
			free(t->debug_file);
			t->debug_file = NULL;
		}
	}
	if (s) {
		t->elf = elf;
		t->symelf = symelf;
		t->open_path = open_path;
		t->obj_fd = fd;
		t->path = strdup(path);
		t->is_main_exe = t->maps->v[0].path && strcmp(path, t->maps->v[0].path) == 0;
		return s;
	}
	if (!miss->stripped[0] && !miss->noprof[0]) {
		bool is_je = looks_like_jemalloc(elf);

		if (is_je && !elfobj__has_symtab(elf)) {
			snprintf(miss->stripped, sizeof(miss->stripped), "%s", path);
			miss->why = why;
			miss->prof = start_prof(t, path, elf, miss->conf_env,
						sizeof(miss->conf_env), miss->conf_link,
						sizeof(miss->conf_link));
		} else if (is_je)
			snprintf(miss->noprof, sizeof(miss->noprof), "%s", path);
	}
	elfobj__free(elf);
	free(open_path);
	if (fd >= 0)
		close(fd);
	return NULL;
}

static int fail_not_found(const struct jemalloc_target *t, const struct find_miss *miss, char *err,
			  size_t errlen)
{
	const char *urls = getenv("DEBUGINFOD_URLS");
	bool dbgd = urls && urls[0];
	char why[sizeof(miss->why.rejected) + 256];
	char prof[256 + 3 * sizeof(miss->conf_env) + 2 * sizeof(miss->conf_link)] = "";
	/* the global's prefix is the link's: "/etc/PFXmalloc.conf" */
	size_t cl = strlen(miss->conf_link);
	int pfx = cl > 16 ? (int)(cl - 16) : 0;

	/* what was found and refused, and what debuginfod said */
	snprintf(why, sizeof(why), "%s%s%s%s", miss->why.debuginfod ? ": debuginfod: " : "",
		 miss->why.debuginfod ? debugsearch_debuginfod_reason(miss->why.debuginfod) : "",
		 miss->why.rejected[0] ? (miss->why.debuginfod ? "; " : ": ") : "",
		 miss->why.rejected);
	/* the next problem, when it is known already: one restart for both */
	if (miss->prof == PROF_OFF)
		snprintf(prof, sizeof(prof),
			 "; it was also started without prof:true (its %s, %s and "
			 "%.*smalloc_conf leave it off; only a built-in --with-malloc-conf could "
			 "set it): restart it with %s=prof:true,prof_active:false",
			 miss->conf_env, miss->conf_link, pfx, miss->conf_link + 5, miss->conf_env);
	else if (miss->prof == PROF_UNKNOWN)
		snprintf(prof, sizeof(prof),
			 "; whether it runs with prof:true can be told only once its symbols "
			 "are found");
	if (miss->stripped[0]) {
		char pkg[256], preload[PATH_MAX + 128];

		/* the package by name, where this host's dpkg knows the file */
		if (!debugpkg_hint(miss->stripped, pkg, sizeof(pkg)))
			snprintf(pkg, sizeof(pkg), "Debian: the -dbgsym package");
		if (debugpkg_preload(preload, sizeof(preload)))
			snprintf(preload + strlen(preload), sizeof(preload) - strlen(preload),
				 ", the same jemalloc with its symbol table, which heapbpf ships");
		else
			snprintf(
				preload, sizeof(preload),
				"PREFIX/lib/heapbpf/libjemalloc.so.2, which heapbpf's make install "
				"puts there");
		return hb_fail(err, errlen, -ENOENT,
			       "jemalloc in pid %d (%s) is stripped and no debug info for its "
			       "build-id %s was found (looked in /usr/lib/debug/.build-id, "
			       "--debug-dir, the .gnu_debuglink file next to it, and %s%s)%s; "
			       "install its debug symbols (%s) or point --debug-dir or "
			       "DEBUGINFOD_URLS at them, or restart it with LD_PRELOAD=%s%s",
			       t->pid, miss->stripped, miss->build_id,
			       dbgd ? "debuginfod at " : "no debuginfod (DEBUGINFOD_URLS unset)",
			       dbgd ? urls : "", why, pkg, preload, prof);
	}
	if (miss->noprof[0])
		return fail_noprof(err, errlen, t->pid, miss->noprof);
	if (miss->stale[0])
		return hb_fail(err, errlen, -ESTALE,
			       "pid %d (%s) maps %s, but that path leads to another file than the "
			       "one mapped (a link in its tree, or a file replaced since); heapbpf "
			       "reads only the file a process maps",
			       t->pid, t->comm, miss->stale);
	return hb_fail(err, errlen, JEMALLOC_ENOTFOUND,
		       "pid %d (%s) does not use jemalloc: no jemalloc found in its mappings",
		       t->pid, t->comm);
}

/* The object holding jemalloc among the process's mappings, and its sampling function. */
static int find_jemalloc(struct jemalloc_target *t, const struct elf_sym **sym, char *err,
			 size_t errlen)
{
	struct find_miss miss = { .build_id = "(none)" };
	const struct elf_sym *s = NULL;
	const char **cands = NULL;
	size_t ncands = 0;
	int rc = candidate_paths(t->maps, &cands, &ncands);

	if (rc)
		return hb_fail(err, errlen, rc, "out of memory");
	for (size_t i = 0; i < ncands && !s; i++)
		s = try_candidate(t, cands[i], &miss);
	free(cands);
	/* t->elf is set together with s; both checked so the analyzer sees it too */
	if (!t->elf || !s)
		return fail_not_found(t, &miss, err, errlen);
	if (!t->path)
		return hb_fail(err, errlen, -ENOMEM, "out of memory");
	*sym = s;
	return 0;
}

/* Where the probed functions and the globals heapbpf reads are in the process. */
static int resolve_addresses(struct jemalloc_target *t, char *err, size_t errlen)
{
	const struct proc_map *m = first_mapping(t->maps, t->path);

	if (!m || elfobj__load_bias(t->elf, m->start, m->offset, &t->bias))
		return hb_fail(err, errlen, -ENOEXEC, "cannot compute where %s is loaded in pid %d",
			       t->path, t->pid);
	if (resolve_func(t, SAMPLE_FN, &t->alloc_off, &t->alloc_addr) ||
	    resolve_func(t, FREE_FN, &t->free_off, &t->free_addr))
		return hb_fail(err, errlen, -ENOENT,
			       "jemalloc in pid %d (%s) lacks %s%s or %s%s as a mapped function",
			       t->pid, t->path, t->ns_prefix, SAMPLE_FN, t->ns_prefix, FREE_FN);
	/* optional: without it the late-activation check is not made */
	if (t->layout->activity_fn &&
	    resolve_func(t, t->layout->activity_fn, &t->activity_off, &t->activity_addr))
		t->activity_off = t->activity_addr = 0;
	if (resolve_global(t, "opt_prof", &t->opt_prof_addr) ||
	    resolve_global(t, "lg_prof_sample", &t->lg_prof_sample_addr) ||
	    resolve_global(t, t->layout->active_sym, &t->active_addr))
		return hb_fail(err, errlen, -ENOENT,
			       "jemalloc in pid %d (%s) lacks the globals %sopt_prof, "
			       "%slg_prof_sample or %s%s",
			       t->pid, t->path, t->ns_prefix, t->ns_prefix, t->ns_prefix,
			       t->layout->active_sym);
	return 0;
}

/* The target's memory: the live pid's, or the image it was given (a core file). */
static int target_read(const struct jemalloc_target *t, uint64_t addr, void *buf, size_t len)
{
	return t->mem ? memsrc_read(t->mem, addr, buf, len) : proc_mem_read(t->pid, addr, buf, len);
}

/* opt_prof and lg_prof_sample as the process holds them now. */
static int read_prof_state(struct jemalloc_target *t, char *err, size_t errlen)
{
	uint8_t b;
	int rc = target_read(t, t->opt_prof_addr, &b, 1);

	if (!rc)
		rc = jemalloc_target__read_lg_sample(t, &t->lg_prof_sample);
	if (rc == -ERANGE)
		return hb_fail(
			err, errlen, -ERANGE,
			"jemalloc in pid %d (%s) samples every 2^%llu bytes (lg_prof_sample), "
			"beyond the periods heapbpf scales by (2^0 to 2^%d bytes)",
			t->pid, t->comm, (unsigned long long)t->lg_prof_sample, HB_LG_SAMPLE_MAX);
	if (rc)
		return hb_fail(err, errlen, rc, "cannot read the memory of pid %d: %s%s", t->pid,
			       strerror(-rc),
			       rc == -EPERM ? " (heapbpf needs root or CAP_SYS_PTRACE)" : "");
	t->opt_prof = b != 0;
	if (!t->opt_prof)
		return hb_fail(err, errlen, -ENOTSUP,
			       "jemalloc in pid %d (%s) was started without prof:true; restart it "
			       "with %s=prof:true,prof_active:false",
			       t->pid, t->comm, t->conf_env);
	return 0;
}

int jemalloc_target__identify(struct jemalloc_target *t, const char *layout_name, char *err,
			      size_t errlen)
{
	char raw[sizeof(t->version)];
	const struct elf_sym *s = NULL;
	int rc = find_jemalloc(t, &s, err, errlen);

	if (rc || !s)
		return rc ? rc : -ENOENT;
	snprintf(t->ns_prefix, sizeof(t->ns_prefix), "%.*s",
		 (int)(strlen(s->name) - strlen(SAMPLE_FN)), s->name);
	detect_public_prefix(t);
	if (built_without_prof(t))
		return fail_noprof(err, errlen, t->pid, t->path);
	/* the object's own bytes: said only as hb_clean shows them */
	if (elfobj__jemalloc_version(t->elf, raw, sizeof(raw)))
		snprintf(t->version, sizeof(t->version), "unknown");
	else
		hb_clean(t->version, sizeof(t->version), raw);
	rc = choose_layout(t, layout_name, err, errlen);
	if (!rc)
		rc = resolve_addresses(t, err, errlen);
	if (!rc)
		rc = read_prof_state(t, err, errlen);
	return rc;
}

int jemalloc_target__find(pid_t pid, const char *layout_name, struct jemalloc_target **out,
			  char *err, size_t errlen)
{
	struct jemalloc_target *t;
	char raw[32];
	int rc;

	if (pid <= 0)
		return hb_fail(err, errlen, -EINVAL, "invalid pid %d", pid);
	t = calloc(1, sizeof(*t));
	if (!t)
		return hb_fail(err, errlen, -ENOMEM, "out of memory");
	t->pid = pid;
	t->obj_fd = -1;
	/* the process chose its name: said only as hb_clean shows it */
	proc_comm(pid, raw, sizeof(raw));
	hb_clean(t->comm, sizeof(t->comm), raw);
	/* before the maps: an exec in between makes the two disagree (toggle__on refuses) */
	t->started = proc_start_time(pid);
	proc_exec_random(pid, t->exec_random);
	rc = read_maps(t, err, errlen);
	if (!rc)
		rc = jemalloc_target__identify(t, layout_name, err, errlen);
	if (rc) {
		jemalloc_target__free(t);
		return rc;
	}
	*out = t;
	return 0;
}

int jemalloc_target__read_lg_sample(struct jemalloc_target *t, uint64_t *lg)
{
	uint64_t v;
	int err = target_read(t, t->lg_prof_sample_addr, &v, sizeof(v));

	if (err)
		return err;
	*lg = v;
	return v > HB_LG_SAMPLE_MAX ? -ERANGE : 0;
}

int jemalloc_target__global_sized(const struct jemalloc_target *t, const char *name, bool prefixed,
				  uint64_t *addr, uint64_t *size)
{
	char full[128];
	const struct elf_sym *s;

	snprintf(full, sizeof(full), "%s%s", prefixed ? t->ns_prefix : "", name);
	s = elfobj__sym_by_name(t->symelf, full);
	if (!s || s->type != STT_OBJECT)
		return -ENOENT;
	*addr = s->addr + t->bias;
	*size = s->size;
	return 0;
}

int jemalloc_target__global(const struct jemalloc_target *t, const char *name, bool prefixed,
			    uint64_t *addr)
{
	uint64_t size;

	return jemalloc_target__global_sized(t, name, prefixed, addr, &size);
}

bool jemalloc_target__is_jemalloc_func(const struct jemalloc_target *t, const char *name)
{
	static const char *const api[] = {
		"malloc",
		"calloc",
		"realloc",
		"free",
		"posix_memalign",
		"aligned_alloc",
		"memalign",
		"valloc",
		"pvalloc",
		"mallocx",
		"rallocx",
		"xallocx",
		"sallocx",
		"dallocx",
		"sdallocx",
		"nallocx",
		"malloc_usable_size",
		"free_sized",
		"free_aligned_sized",
	};
	/* static (file-local) jemalloc functions carry no namespace prefix */
	static const char *const statics[] = {
		"prof_backtrace_impl", "prof_unwind_callback",
		"imalloc_body",	       "imalloc",
		"malloc_default",      "ialloc",
		"arena_malloc",	       "do_rallocx",
	};
	size_t pl = strlen(t->pub_prefix);

	if (t->ns_prefix[0] && strncmp(name, t->ns_prefix, strlen(t->ns_prefix)) == 0)
		return true;
	for (size_t i = 0; i < sizeof(statics) / sizeof(statics[0]); i++) {
		if (strcmp(name, statics[i]) == 0)
			return true;
	}
	if (strncmp(name, t->pub_prefix, pl) != 0)
		return false;
	for (size_t i = 0; i < sizeof(api) / sizeof(api[0]); i++) {
		if (strcmp(name + pl, api[i]) == 0)
			return true;
	}
	return false;
}
