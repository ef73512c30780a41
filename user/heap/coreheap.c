// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "heap/coreheap.h"
#include "symbols/elfobj.h"
#include "util/errmsg.h"
#include "util/files.h"

/* How a core's objects are found on disk: --exe, --binary-path, their recorded paths. */
struct core_open_ctx {
	const struct core_file *core;
	const struct proc_maps *maps; /* the target's (the executable's renamed to --exe) */
	char **build_ids;	      /* per mapping, from the core's header pages; NULL: unknown */
	const char *const *dirs;
	char missing[4096]; /* the first executable object not found, for the message */
};

static int core_open_object(void *ctx, const char *path, char *buf, size_t len)
{
	struct core_open_ctx *o = ctx;
	const char *bid = NULL;
	int fd;

	for (size_t i = 0; i < o->maps->n && !bid; i++) {
		if (o->maps->v[i].path && strcmp(o->maps->v[i].path, path) == 0)
			bid = o->build_ids[i];
	}
	fd = symbolizer_find_binary(o->dirs, path, bid, buf, len);
	if (fd < 0) {
		if (!o->missing[0])
			snprintf(o->missing, sizeof(o->missing), "%s", path);
		return -ENOENT;
	}
	close(fd);
	return 0;
}

void coreheap__free(struct core_heap *h)
{
	if (!h)
		return;
	if (h->build_ids) {
		for (size_t i = 0; h->t && h->t->maps && i < h->t->maps->n; i++)
			free(h->build_ids[i]);
		free(h->build_ids);
	}
	free(h->open_ctx);
	jemalloc_target__free(h->t);
	memsrc_core__free(h->core);
	free(h);
}

/* --exe: the executable's mappings are read from that file, if it is the one the core ran. */
static int use_exe(struct core_heap *h, const char *exe, char *err, size_t errlen)
{
	struct proc_maps *m = h->t->maps;
	char want[ELF_BUILD_ID_MAX] = "", got[ELF_BUILD_ID_MAX] = "";
	const char *rec = m->n ? m->v[0].path : NULL;
	int fd;

	if (!rec)
		return hb_fail(err, errlen, -ENOENT, "core file %s maps no executable",
			       h->core->path);
	fd = files_open_regular_ro(exe);
	if (fd < 0)
		return hb_fail(err, errlen, fd, "cannot open --exe %s: %s", exe,
			       files_open_regular_strerror(fd));
	if (elfobj_fd_build_id(fd, got, sizeof(got)))
		got[0] = '\0';
	close(fd);
	if (h->build_ids[0])
		snprintf(want, sizeof(want), "%s", h->build_ids[0]);
	if (want[0] && strcmp(want, got) != 0)
		return hb_fail(err, errlen, -ENOEXEC,
			       "%s is not the executable of core file %s: its build-id is %s, the "
			       "core's %s (%s) has %s",
			       exe, h->core->path, got[0] ? got : "(none)", rec, h->core->comm,
			       want);
	for (size_t i = m->n; i-- > 0;) {
		if (!m->v[i].path || strcmp(m->v[i].path, rec) != 0)
			continue;
		free(m->v[i].path);
		m->v[i].path = strdup(exe);
		if (!m->v[i].path)
			return hb_fail(err, errlen, -ENOMEM, "out of memory");
	}
	return 0;
}

/* The NT_FILE mappings, their build-ids and a target to identify jemalloc in. */
static int core_heap_target(struct core_heap *h, const char *const *dirs, char *err, size_t errlen)
{
	struct jemalloc_target *t = calloc(1, sizeof(*t));
	struct core_open_ctx *o = calloc(1, sizeof(*o));
	char hex[ELF_BUILD_ID_MAX];
	int rc;

	h->t = t;
	h->open_ctx = o;
	if (!t || !o) {
		hb_fail(err, errlen, -ENOMEM, "out of memory");
		return -ENOMEM;
	}
	t->pid = h->core->pid;
	t->obj_fd = -1;
	snprintf(t->comm, sizeof(t->comm), "%s", h->core->comm);
	rc = memsrc_core__proc_maps(h->core, &t->maps);
	if (!rc) {
		h->build_ids = calloc(t->maps->n ? t->maps->n : 1, sizeof(*h->build_ids));
		rc = h->build_ids ? 0 : -ENOMEM;
	}
	for (size_t i = 0; !rc && i < t->maps->n; i++) {
		const char *p = t->maps->v[i].path;

		if (p && memsrc_core__build_id(h->core, p, hex, sizeof(hex)) == 0 &&
		    !(h->build_ids[i] = strdup(hex)))
			rc = -ENOMEM;
	}
	if (rc) {
		hb_fail(err, errlen, rc, "out of memory");
		return rc;
	}
	h->mem = memsrc_core__mem_source(h->core);
	o->core = h->core;
	o->maps = t->maps;
	o->build_ids = h->build_ids;
	o->dirs = dirs;
	t->open_object = core_open_object;
	t->open_ctx = o;
	t->mem = &h->mem;
	return 0;
}

int coreheap__open(const struct core_heap_opts *opts, struct core_heap **out, char *err,
		   size_t errlen)
{
	struct core_heap *h = calloc(1, sizeof(*h));
	char why[2048];
	int rc;

	*out = NULL;
	if (!h) {
		hb_fail(err, errlen, -ENOMEM, "out of memory");
		return -ENOMEM;
	}
	rc = memsrc_core__open(opts->path, &h->core, err, errlen);
	rc = rc ?: core_heap_target(h, opts->dirs, err, errlen);
	if (!rc && opts->exe)
		rc = use_exe(h, opts->exe, err, errlen);
	if (!rc) {
		rc = jemalloc_target__identify(h->t, opts->layout, why, sizeof(why));
		if (rc == JEMALLOC_ENOTFOUND && h->open_ctx->missing[0])
			hb_fail(err, errlen, rc,
				"core file %s: no jemalloc found: %s (mapped in pid %d) is not on "
				"this machine with the build-id the core recorded; give --exe or "
				"--binary-path",
				opts->path, h->open_ctx->missing, h->core->pid);
		else if (rc)
			hb_fail(err, errlen, rc, "core file %s: %s", opts->path, why);
	}
	if (rc) {
		coreheap__free(h);
		return rc;
	}
	*out = h;
	return 0;
}

int coreheap__walk(struct core_heap *h, struct collector **out, struct heapwalk_stats *st,
		   char *err, size_t errlen)
{
	const struct jemalloc_target *t = h->t;
	struct heapwalk_syms sy;
	struct heapwalk_opts wo;
	struct collector *c;
	char why[2048];
	int rc;

	*out = NULL;
	rc = heapwalk_target_syms(t, &sy, why, sizeof(why));
	if (rc)
		return hb_fail(err, errlen, rc, "core file %s: %s", h->core->path, why);
	rc = collector__new(1ULL << t->lg_prof_sample, &c);
	if (rc) {
		hb_fail(err, errlen, rc, "out of memory");
		return rc;
	}
	heapwalk_default_opts(&wo);
	wo.retries = 0; /* a core does not change: one walk is the answer */
	wo.frozen = true;
	rc = heapwalk_read(&h->mem, t->layout, &sy, &wo, c, st, why, sizeof(why));
	if (rc) {
		collector__free(c);
		return hb_fail(err, errlen, rc, "core file %s: %s", h->core->path, why);
	}
	*out = c;
	return 0;
}

int coreheap__symbolizer(const struct core_heap *h, const char *const *dirs,
			 struct symbolizer **out)
{
	return symbolizer__new_offline(h->t->maps, (const char *const *)h->build_ids, dirs, out);
}
