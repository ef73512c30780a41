// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "util/errmsg.h"
#include "sampling/forks.h"
#include "sampling/oom.h"

/* "\tfield:unsigned long total_vm;\toffset:16;\tsize:8;\tsigned:0;": the name, offset, size. */
static bool parse_field(const char *line, char *name, size_t len, unsigned int *off,
			unsigned int *size)
{
	const char *f = strstr(line, "field:"), *semi, *p;

	if (!f || !(semi = strchr(f, ';')))
		return false;
	/* the name is the last word before ';' (after the type, maybe "__data_loc char[]") */
	for (p = semi; p > f && p[-1] != ' ' && p[-1] != ':'; p--)
		;
	if ((size_t)(semi - p) >= len || semi == p)
		return false;
	memcpy(name, p, semi - p);
	name[semi - p] = '\0';
	return sscanf(semi, ";\toffset:%u;\tsize:%u;", off, size) == 2;
}

int oom_victim_offsets(struct heapbpf_oom_offsets *o, char *err, size_t errlen)
{
	static const struct {
		const char *name;
		size_t field;
		unsigned int size;
	} want[] = {
		{ "pid", offsetof(struct heapbpf_oom_offsets, pid), 4 },
		{ "total_vm", offsetof(struct heapbpf_oom_offsets, total_vm), 8 },
		{ "anon_rss", offsetof(struct heapbpf_oom_offsets, anon_rss), 8 },
		{ "file_rss", offsetof(struct heapbpf_oom_offsets, file_rss), 8 },
		{ "shmem_rss", offsetof(struct heapbpf_oom_offsets, shmem_rss), 8 },
		{ "pgtables", offsetof(struct heapbpf_oom_offsets, pgtables), 8 },
		{ "oom_score_adj", offsetof(struct heapbpf_oom_offsets, oom_score_adj), 2 },
	};
	char line[512], name[64];
	unsigned int off, size, found = 0;
	FILE *f = tracefs_format("oom/mark_victim");

	memset(o, 0, sizeof(*o));
	if (!f)
		return hb_fail(err, errlen, -errno,
			       "cannot read the oom/mark_victim tracepoint's format (tracefs): %s",
			       strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		if (!parse_field(line, name, sizeof(name), &off, &size))
			continue;
		for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
			if (strcmp(name, want[i].name) != 0 || size != want[i].size || !off)
				continue;
			*(__u32 *)((char *)o + want[i].field) = off;
			found |= 1u << i;
		}
	}
	fclose(f);
	if (!(found & 1))
		return hb_fail(err, errlen, -ENOENT,
			       "the oom/mark_victim tracepoint has no 4-byte pid field");
	/* all four kB figures, or none said */
	o->has_figures = (found & 0x1e) == 0x1e;
	return 0;
}
