// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/errmsg.h"
#include "export/pyro_labels.h"

#define DEFAULT_LABELS 3 /* hostname, pid, comm */

bool pyro_labels_valid_key(const char *k)
{
	if (!k || !(isalpha((unsigned char)k[0]) || k[0] == '_') || strncmp(k, "__", 2) == 0)
		return false;
	for (; *k; k++) {
		if (!isalnum((unsigned char)*k) && *k != '_')
			return false;
	}
	return true;
}

static bool service_char(unsigned char c)
{
	return isalnum(c) || c == '_' || c == '.' || c == '/' || c == '-';
}

/* Not empty, at most max characters, each one ok. */
static bool valid_string(const char *s, size_t max, bool (*ok)(unsigned char c))
{
	if (!s || !*s || strlen(s) > max)
		return false;
	for (; *s; s++) {
		if (!ok((unsigned char)*s))
			return false;
	}
	return true;
}

bool pyro_labels_valid_service(const char *s)
{
	return valid_string(s, 256, service_char);
}

static bool value_char(unsigned char c)
{
	return c > 0x20 && c < 0x7f && c != ',' && c != '{' && c != '}' && c != '=' && c != '"';
}

bool pyro_labels_valid_value(const char *v)
{
	return valid_string(v, 1024, value_char);
}

void pyro_labels_sanitize(const char *in, bool service, char *out, size_t len)
{
	size_t i = 0;

	for (; in && *in && i + 1 < len; in++) {
		unsigned char c = (unsigned char)*in;

		out[i++] = (service ? service_char(c) : value_char(c)) ? (char)c : '_';
	}
	if (!i && len > 1)
		out[i++] = '_';
	out[i] = '\0';
}

static int cmp_label(const void *a, const void *b)
{
	return strcmp(((const struct pyro_label *)a)->key, ((const struct pyro_label *)b)->key);
}

int pyro_labels_build_name(char *buf, size_t len, const char *service,
			   const struct pyro_label *labels, size_t n)
{
	struct pyro_label sorted[PYRO_MAX_LABELS];
	size_t off;

	if (!pyro_labels_valid_service(service) || n > PYRO_MAX_LABELS)
		return -EINVAL;
	if (n) {
		memcpy(sorted, labels, n * sizeof(*labels));
		qsort(sorted, n, sizeof(*sorted), cmp_label);
	}
	off = snprintf(buf, len, "%s{", service);
	for (size_t i = 0; i < n && off < len; i++) {
		if (!pyro_labels_valid_key(sorted[i].key) ||
		    !pyro_labels_valid_value(sorted[i].value) ||
		    (i && strcmp(sorted[i].key, sorted[i - 1].key) == 0))
			return -EINVAL;
		off += snprintf(buf + off, len - off, "%s%s=%s", i ? "," : "", sorted[i].key,
				sorted[i].value);
	}
	if (off < len)
		off += snprintf(buf + off, len - off, "}");
	return off < len ? 0 : -ENAMETOOLONG;
}

bool pyro_labels_valid_name(const char *name)
{
	const char *keys[PYRO_MAX_LABELS];
	char buf[PYRO_NAME_MAX], *brace, *pair;
	size_t len = strlen(name), n = 0;

	if (len >= sizeof(buf))
		return false;
	memcpy(buf, name, len + 1);
	brace = strchr(buf, '{');
	if (brace) {
		if (buf[len - 1] != '}')
			return false;
		buf[len - 1] = '\0';
		*brace = '\0';
	}
	if (!pyro_labels_valid_service(buf))
		return false;
	for (pair = brace ? brace + 1 : NULL; pair && *pair;) {
		char *comma = strchr(pair, ','), *eq;

		if (comma)
			*comma = '\0';
		eq = strchr(pair, '=');
		if (!eq || n >= PYRO_MAX_LABELS)
			return false;
		*eq = '\0';
		if (!pyro_labels_valid_key(pair) || strcmp(pair, "service_name") == 0 ||
		    !pyro_labels_valid_value(eq + 1))
			return false;
		for (size_t i = 0; i < n; i++) {
			if (strcmp(keys[i], pair) == 0)
				return false;
		}
		keys[n++] = pair;
		pair = comma ? comma + 1 : NULL;
	}
	return true;
}

/* ---- the user's naming options ---- */

/*
 * The user's labels split in place of a copy ("k=v" -> "k\0v"): keys[i] and
 * values[i] point into the returned buffer (free it), or NULL without '='.
 */
static char *split_labels(const struct pyro_naming *n, const char **keys, const char **values)
{
	size_t total = 1;
	char *buf, *at;

	for (int i = 0; i < n->nlabels; i++)
		total += strlen(n->labels[i]) + 1;
	buf = malloc(total);
	if (!buf)
		return NULL;
	at = buf;
	for (int i = 0; i < n->nlabels; i++) {
		size_t l = strlen(n->labels[i]) + 1;
		char *eq;

		memcpy(at, n->labels[i], l);
		eq = strchr(at, '=');
		if (eq)
			*eq = '\0';
		keys[i] = at;
		values[i] = eq ? eq + 1 : NULL;
		at += l;
	}
	return buf;
}

/* A user's label replaces the default of the same name, or is added. */
static void set_label(struct pyro_label *l, size_t *n, const char *key, const char *value)
{
	size_t j;

	for (j = 0; j < *n && strcmp(l[j].key, key) != 0; j++)
		;
	if (j < *n)
		l[j].value = value;
	else
		l[(*n)++] = (struct pyro_label){ key, value };
}

/* --service-name, else the unit without ".service", else comm, as a valid service name. */
static const char *service_of(const struct pyro_naming *n, const char *comm, char *svc, size_t len)
{
	size_t ulen = n->unit ? strlen(n->unit) : 0;

	if (n->service_name)
		return n->service_name;
	if (!ulen) {
		pyro_labels_sanitize(comm, true, svc, len);
		return svc;
	}
	/* as typed or as targets_unit_name() completed it: "redis" and "redis.service" alike */
	pyro_labels_sanitize(n->unit, true, svc, len);
	if (ulen > 8 && ulen - 8 < len && strcmp(n->unit + ulen - 8, ".service") == 0)
		svc[ulen - 8] = '\0';
	return svc;
}

int pyro_labels_profile_name(const struct pyro_naming *n, pid_t pid, const char *comm, char *buf,
			     size_t len)
{
	char host[256] = "", hostv[256], pidv[16], commv[64], svc[256], *text;
	const char *keys[PYRO_MAX_LABELS], *values[PYRO_MAX_LABELS];
	struct pyro_label l[PYRO_MAX_LABELS];
	size_t cnt = 0;
	int rc = 0;

	if (n->nlabels < 0 || n->nlabels > PYRO_MAX_LABELS - DEFAULT_LABELS)
		return -EINVAL;
	text = split_labels(n, keys, values);
	if (!text)
		return -ENOMEM;
	gethostname(host, sizeof(host) - 1);
	pyro_labels_sanitize(host, false, hostv, sizeof(hostv));
	snprintf(pidv, sizeof(pidv), "%d", (int)pid);
	pyro_labels_sanitize(comm, false, commv, sizeof(commv));
	l[cnt++] = (struct pyro_label){ "hostname", hostv };
	l[cnt++] = (struct pyro_label){ "pid", pidv };
	l[cnt++] = (struct pyro_label){ "comm", commv };
	for (int i = 0; i < n->nlabels && !rc; i++) {
		if (values[i])
			set_label(l, &cnt, keys[i], values[i]);
		else
			rc = -EINVAL;
	}
	/* an empty value drops the label */
	for (size_t j = 0; j < cnt;) {
		if (!*l[j].value)
			l[j] = l[--cnt];
		else
			j++;
	}
	rc = rc ?: pyro_labels_build_name(buf, len, service_of(n, comm, svc, sizeof(svc)), l, cnt);
	free(text);
	return rc;
}

static int check_label(const char *kv, const char *key, const char *value, char *err, size_t errlen)
{
	if (!value)
		return hb_fail(err, errlen, -EINVAL, "--label needs KEY=VALUE, not \"%s\"", kv);
	if (!pyro_labels_valid_key(key) || strcmp(key, "service_name") == 0)
		return hb_fail(err, errlen, -EINVAL,
			       "--label \"%s\": a label name is letters, digits and _, does not "
			       "start with __, and is not service_name (see --service-name)",
			       kv);
	if (*value && !pyro_labels_valid_value(value))
		return hb_fail(err, errlen, -EINVAL,
			       "--label \"%s\": a value is printable, without spaces, quotes or "
			       ", { } =",
			       kv);
	return 0;
}

int pyro_labels_naming_check(const struct pyro_naming *n, char *err, size_t errlen)
{
	const char *keys[PYRO_MAX_LABELS], *values[PYRO_MAX_LABELS];
	char name[PYRO_NAME_MAX], *text;
	int rc = 0;

	if (n->service_name && !pyro_labels_valid_service(n->service_name))
		return hb_fail(err, errlen, -EINVAL,
			       "--service-name \"%s\" is not a Pyroscope service name (letters, "
			       "digits, _ . / -)",
			       n->service_name);
	if (n->nlabels < 0 || n->nlabels > PYRO_MAX_LABELS - DEFAULT_LABELS)
		return hb_fail(err, errlen, -EINVAL, "at most %d --label options",
			       PYRO_MAX_LABELS - DEFAULT_LABELS);
	text = split_labels(n, keys, values);
	if (!text)
		return hb_fail(err, errlen, -ENOMEM, "out of memory");
	for (int i = 0; i < n->nlabels && !rc; i++)
		rc = check_label(n->labels[i], keys[i], values[i], err, errlen);
	free(text);
	if (!rc && pyro_labels_profile_name(n, 1, "x", name, sizeof(name)))
		rc = hb_fail(err, errlen, -EINVAL, "the Pyroscope labels make too long a name");
	return rc;
}
