// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Finding jemalloc in a process: which of its mapped objects holds it
 * (its sampling function, from the symbol table or separate debug info),
 * each opened as the very file mapped; and when none qualifies, why: not
 * jemalloc, stripped with no debug info found (and whether it runs with
 * prof:true, from what jemalloc reads at start), built without profiling,
 * or a path that leads to another file.
 */
#include <ctype.h>
#include <errno.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/errmsg.h"
#include "symbols/debuginfo.h"
#include "symbols/debugsearch.h"
#include "util/files.h"
#include "jemalloc/target_types.h"
#include "jemalloc/target_private.h"
#include "symbols/debugpkg.h"

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

int find_fail_noprof(char *err, size_t errlen, pid_t pid, const char *path)
{
	return hb_fail(
		err, errlen, -ENOTSUP,
		"jemalloc in pid %d (%s) was built without profiling support; rebuild it with "
		"--enable-prof (tikv-jemallocator: feature \"profiling\")",
		pid, path);
}

const struct proc_map *find_first_mapping(const struct proc_maps *m, const char *path)
{
	for (size_t i = 0; i < m->n; i++) {
		if (m->v[i].path && strcmp(m->v[i].path, path) == 0)
			return &m->v[i];
	}
	return NULL;
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
		m = find_first_mapping(t->maps, path);
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
	/*
	 * conf is what exported_string wrote (it returned 1); the analyzer,
	 * starting at find_jemalloc, takes proc_mem_read for returning a count
	 */
	// NOLINTNEXTLINE(clang-analyzer-core.uninitialized.Branch)
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
	const struct proc_map *m = find_first_mapping(t->maps, path);
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
		return find_fail_noprof(err, errlen, t->pid, miss->noprof);
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
int find_jemalloc(struct jemalloc_target *t, const struct elf_sym **sym, char *err, size_t errlen)
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
