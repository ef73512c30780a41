// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/profile.h"

const char *const hb_value_names[HB_NVALUES] = {
	[HB_ALLOC_OBJECTS] = "alloc_objects",
	[HB_ALLOC_SPACE] = "alloc_space",
	[HB_INUSE_OBJECTS] = "inuse_objects",
	[HB_INUSE_SPACE] = "inuse_space",
};

const char *const hb_value_units[HB_NVALUES] = {
	[HB_ALLOC_OBJECTS] = "count",
	[HB_ALLOC_SPACE] = "bytes",
	[HB_INUSE_OBJECTS] = "count",
	[HB_INUSE_SPACE] = "bytes",
};

int hb_value_parse(const char *name, enum hb_value *out)
{
	for (int i = 0; i < HB_NVALUES; i++) {
		if (strcmp(name, hb_value_names[i]) == 0) {
			*out = i;
			return 0;
		}
	}
	return -EINVAL;
}

int hb_profile_add_comment(struct hb_profile *p, const char *fmt, ...)
{
	char **nv, *c;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&c, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -ENOMEM;
	nv = realloc(p->comments, (p->ncomments + 1) * sizeof(*nv));
	if (!nv) {
		free(c);
		return -ENOMEM;
	}
	p->comments = nv;
	p->comments[p->ncomments++] = c;
	return 0;
}

void hb_profile__free(struct hb_profile *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->nmappings; i++) {
		free(p->mappings[i].path);
		free(p->mappings[i].build_id);
	}
	free(p->mappings);
	for (size_t i = 0; i < p->nlocations; i++) {
		struct hb_location *l = &p->locations[i];

		for (uint32_t j = 0; j < l->nlines; j++) {
			if (l->lines[j].system_name != l->lines[j].function)
				free(l->lines[j].system_name);
			free(l->lines[j].function);
			free(l->lines[j].file);
		}
		free(l->lines);
	}
	free(p->locations);
	for (size_t i = 0; i < p->nsamples; i++) {
		free(p->samples[i].locs);
		free(p->samples[i].labels);
	}
	free(p->samples);
	free(p->timeline);
	free(p->held);
	for (size_t i = 0; i < p->ncomments; i++)
		free(p->comments[i]);
	free(p->comments);
	for (size_t i = 0; i < p->nwrappers; i++)
		free(p->wrappers[i]);
	free(p->wrappers);
	free(p->diff_files[0]);
	free(p->diff_files[1]);
	free(p);
}

int hb_profile_check_samples(const struct hb_profile *p)
{
	for (size_t i = 0; i < p->nsamples; i++) {
		const struct hb_sample *s = &p->samples[i];

		if (s->site && s->site >= s->nlocs)
			return -EINVAL;
		for (uint32_t j = 0; j < s->nlocs; j++) {
			if (s->locs[j] >= p->nlocations)
				return -EINVAL;
		}
	}
	return 0;
}
