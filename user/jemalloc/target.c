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
#include "util/files.h"
#include "jemalloc/layout_dwarf.h"
#include "jemalloc/target.h"
#include "jemalloc/target_private.h"

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

/* Where the probed functions and the globals heapbpf reads are in the process. */
static int resolve_addresses(struct jemalloc_target *t, char *err, size_t errlen)
{
	const struct proc_map *m = find_first_mapping(t->maps, t->path);

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
		return find_fail_noprof(err, errlen, t->pid, t->path);
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
