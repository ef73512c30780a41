/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * heapbpf agent's selection rules: which processes of the node it profiles,
 * by what they are (user/sampling/workload.h) and by name.
 */
#ifndef __HEAPBPF_SELECTION_H
#define __HEAPBPF_SELECTION_H

#include <stdbool.h>
#include <stddef.h>

#include "targets/workload.h"

/* One --select or --exclude rule: every key given must hold ("" keys are not given). */
struct select_rule {
	char unit[256];		 /* unit=: "redis" or "redis.service", as the unit's name */
	char cgroup[1024];	 /* cgroup=: a prefix of the process's cgroup path */
	char container[65];	 /* container=: a prefix of its container id */
	char k8s_namespace[254]; /* namespace= */
	char pod[254];		 /* pod= */
	char exe[256];		 /* exe=: its comm, or its executable's file name */
	char service_name[256];	 /* service_name=: what its profiles are named (--select only) */
};

/* "unit=redis,exe=redis-server"; 0 or -EINVAL with a sentence in err. */
int selection_rule_parse(const char *text, bool exclude, struct select_rule *r, char *err,
			 size_t errlen);
/* Whether a process (w, comm, exe: its executable's file name) satisfies r. */
bool selection_rule_match(const struct select_rule *r, const struct workload *w, const char *comm,
			  const char *exe);

#endif /* __HEAPBPF_SELECTION_H */
