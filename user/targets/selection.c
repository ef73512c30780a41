// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "util/errmsg.h"
#include "export/pyro_labels.h"
#include "targets/selection.h"
#include "targets/targets.h"

/* Where the value of key goes in r, with its size; NULL for a key rules do not have. */
static char *field_of(struct select_rule *r, const char *key, size_t klen, size_t *size)
{
	static const struct {
		const char *key;
		size_t off, size;
	} keys[] = {
#define KEY(k, f) { k, offsetof(struct select_rule, f), sizeof(((struct select_rule *)0)->f) }
		KEY("unit", unit),
		KEY("cgroup", cgroup),
		KEY("container", container),
		KEY("namespace", k8s_namespace),
		KEY("pod", pod),
		KEY("exe", exe),
		KEY("service_name", service_name),
#undef KEY
	};

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		if (strlen(keys[i].key) == klen && !strncmp(keys[i].key, key, klen)) {
			*size = keys[i].size;
			return (char *)r + keys[i].off;
		}
	}
	return NULL;
}

int selection_rule_parse(const char *text, bool exclude, struct select_rule *r, char *err,
			 size_t errlen)
{
	const char *opt = exclude ? "--exclude" : "--select";
	char unit[256];

	memset(r, 0, sizeof(*r));
	for (const char *p = text;; p += strcspn(p, ",") + 1) {
		size_t n = strcspn(p, ","), klen = strcspn(p, "=,"), size;
		char *f = field_of(r, p, klen, &size);

		if (klen == n || !f || (exclude && f == r->service_name))
			return hb_fail(err, errlen, -EINVAL,
				       "%s \"%s\": each part is KEY=VALUE with KEY one of unit, "
				       "cgroup, container, namespace, pod, exe%s",
				       opt, text, exclude ? "" : " or service_name");
		if (n - klen - 1 == 0 || n - klen - 1 >= size)
			return hb_fail(err, errlen, -EINVAL, "%s \"%s\": the value of %.*s is %s",
				       opt, text, (int)klen, p,
				       n - klen - 1 ? "too long" : "empty");
		snprintf(f, size, "%.*s", (int)(n - klen - 1), p + klen + 1);
		if (!p[n])
			break;
	}
	if (r->unit[0] && targets_unit_name(r->unit, unit, sizeof(unit)))
		return hb_fail(err, errlen, -EINVAL, "%s \"%s\": unit=%s is not a unit name", opt,
			       text, r->unit);
	if (r->unit[0])
		snprintf(r->unit, sizeof(r->unit), "%s", unit);
	if (r->service_name[0] && !pyro_labels_valid_service(r->service_name))
		return hb_fail(err, errlen, -EINVAL,
			       "%s \"%s\": a service name is letters, digits and _ . / -", opt,
			       text);
	return 0;
}

bool selection_rule_match(const struct select_rule *r, const struct workload *w, const char *comm,
			  const char *exe)
{
	if (r->unit[0] && strcmp(r->unit, w->unit) != 0)
		return false;
	if (r->cgroup[0] && strncmp(w->cgroup, r->cgroup, strlen(r->cgroup)) != 0)
		return false;
	if (r->container[0] && (!w->container_id[0] ||
				strncmp(w->container_id, r->container, strlen(r->container)) != 0))
		return false;
	if (r->k8s_namespace[0] && strcmp(r->k8s_namespace, w->k8s_namespace) != 0)
		return false;
	if (r->pod[0] && strcmp(r->pod, w->pod) != 0)
		return false;
	return !r->exe[0] || !strcmp(r->exe, comm) || !strcmp(r->exe, exe);
}
