/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What a profile is called in Grafana Pyroscope: name=SERVICE{k=v,...} as
 * /ingest parses it. The service is --service-name, else the systemd unit
 * without ".service", else the process's comm; the labels are hostname,
 * pid and comm, then the user's --label KEY=VALUE (which override them, and
 * drop one with an empty value).
 */
#ifndef __HEAPBPF_PYRO_LABELS_H
#define __HEAPBPF_PYRO_LABELS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define PYRO_MAX_LABELS 32
#define PYRO_NAME_MAX	2048 /* a name= longer than this is refused before profiling */

struct pyro_label {
	const char *key, *value;
};

/* Pyroscope's rules: service [A-Za-z0-9_./-]+; label names [A-Za-z_][A-Za-z0-9_]*, not __*. */
bool pyro_labels_valid_service(const char *s);
bool pyro_labels_valid_key(const char *k);
/* A label value /ingest's name parser keeps intact: printable, no ,{}= and no spaces. */
bool pyro_labels_valid_value(const char *v);
/* Makes any string a valid value (or service name when service): others become '_'. */
void pyro_labels_sanitize(const char *in, bool service, char *out, size_t len);
/*
 * Whether name is what pyro_labels_build_name() writes: a valid service, then
 * optionally {k=v,...} with valid, distinct keys (not service_name) and
 * valid values, at most PYRO_MAX_LABELS of them, shorter than PYRO_NAME_MAX.
 */
bool pyro_labels_valid_name(const char *name);
/* "service{k1=v1,k2=v2}" from labels (keys sorted); -ENAMETOOLONG or -EINVAL. */
int pyro_labels_build_name(char *buf, size_t len, const char *service,
			   const struct pyro_label *labels, size_t n);

/* The user's naming options, as given on the command line. */
struct pyro_naming {
	const char *service_name;  /* --service-name, or NULL */
	const char *unit;	   /* --unit as typed ("redis", "redis.service") or NULL */
	const char *const *labels; /* --label KEY=VALUE as typed */
	int nlabels;
};

/*
 * Everything about the naming options that can be wrong, said before
 * profiling starts: the service name, each label's name and value, and a
 * name= that would be longer than PYRO_NAME_MAX. Returns 0 or -EINVAL
 * with a message in err.
 */
int pyro_labels_naming_check(const struct pyro_naming *n, char *err, size_t errlen);

/*
 * name= for the profile of pid (comm) on this host into buf (PYRO_NAME_MAX
 * is enough for names pyro_labels_naming_check accepted). Returns 0, -EINVAL or
 * -ENAMETOOLONG.
 */
int pyro_labels_profile_name(const struct pyro_naming *n, pid_t pid, const char *comm, char *buf,
			     size_t len);

#endif /* __HEAPBPF_PYRO_LABELS_H */
