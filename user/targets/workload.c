// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "targets/workload.h"

#define CGROUP_FILE_MAX (64 * 1024) /* a v1 machine's dozen lines of up to 4096 bytes */

/* ---- the container id: Alloy's regular expression, without a regex engine ---- */

static bool is_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

/* Go's \s */
static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r';
}

/* ([0-9a-f]{64})(?:\.|\s*$) at s */
static bool id_at(const char *line, size_t len, size_t s)
{
	size_t e = s + WORKLOAD_ID_LEN;

	if (e > len)
		return false;
	for (size_t i = s; i < e; i++) {
		if (!is_hex(line[i]))
			return false;
	}
	if (e < len && line[e] == '.')
		return true;
	for (; e < len; e++) {
		if (!is_space(line[e]))
			return false;
	}
	return true;
}

/*
 * ^.*\/(?:.*-)?ID: a backtracking matcher tries the last '/' first, and
 * after it the last '-' first, then no '-'. Scanning from the end keeps the
 * last '-' after each '/' that is followed by an id, so each position is
 * tried once.
 */
bool workload_container_id(const char *line, size_t len, char *id)
{
	size_t dash = 0, at = 0;
	bool have_dash = false, found = false;

	for (size_t i = len; i-- > 0 && !found;) {
		if (line[i] == '\n') /* Go's '.' does not match a newline */
			have_dash = false;
		if (line[i] == '-' && !have_dash && id_at(line, len, i + 1)) {
			dash = i + 1;
			have_dash = true;
		} else if (line[i] == '/' && (have_dash || id_at(line, len, i + 1))) {
			at = have_dash ? dash : i + 1;
			found = true;
		}
	}
	if (found) {
		memcpy(id, line + at, WORKLOAD_ID_LEN);
		id[WORKLOAD_ID_LEN] = '\0';
	}
	return found;
}

/* ---- what the cgroup path names ---- */

static bool ends_with(const char *s, size_t len, const char *suffix)
{
	size_t l = strlen(suffix);

	return len >= l && memcmp(s + len - l, suffix, l) == 0;
}

static bool starts_with(const char *s, size_t len, const char *prefix)
{
	size_t l = strlen(prefix);

	return len >= l && memcmp(s, prefix, l) == 0;
}

static void copy_n(char *out, size_t size, const char *s, size_t len)
{
	if (len >= size)
		len = size - 1;
	memcpy(out, s, len);
	out[len] = '\0';
}

/* A pod uid as a kubepods cgroup spells it: hex digits and '-' (or '_' in systemd's names). */
static bool set_pod_uid(struct workload *w, const char *s, size_t len)
{
	if (len < 8 || len >= sizeof(w->pod_uid))
		return false;
	for (size_t i = 0; i < len; i++) {
		if (!is_hex(s[i]) && s[i] != '-' && s[i] != '_')
			return false;
	}
	for (size_t i = 0; i < len; i++)
		w->pod_uid[i] = s[i] == '_' ? '-' : s[i];
	w->pod_uid[len] = '\0';
	return true;
}

/*
 * The pod uid of a kubepods cgroup: systemd's driver names it
 * "kubepods-QOS-podUID.slice" (or "kubepods-podUID.slice" for a guaranteed
 * pod), with the uid's dashes as '_'; the cgroupfs driver "podUID" under
 * "kubepods" (or "kubepods/QOS"), or, where a cgroup namespace hides the
 * "kubepods" above, right above the container's id.
 */
static void pod_of_segment(struct workload *w, const char *seg, size_t len, bool under_kubepods)
{
	const char *p;

	if (w->pod_uid[0])
		return;
	if (starts_with(seg, len, "kubepods-") && ends_with(seg, len, ".slice")) {
		p = memmem(seg, len, "-pod", 4);
		if (p)
			set_pod_uid(w, p + 4, len - (p + 4 - seg) - 6);
	} else if (under_kubepods && starts_with(seg, len, "pod")) {
		set_pod_uid(w, seg + 3, len - 3);
	}
}

/* The runtime that named the segment holding the id (parent: the segment above it). */
static void runtime_of(struct workload *w, const char *seg, size_t len, const char *parent,
		       size_t plen)
{
	static const struct {
		const char *prefix, *runtime;
	} names[] = {
		{ "docker-", "docker" },
		{ "cri-containerd-", "containerd" },
		{ "crio-", "cri-o" },
		{ "libpod-", "podman" },
	};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (starts_with(seg, len, names[i].prefix)) {
			snprintf(w->runtime, sizeof(w->runtime), "%s", names[i].runtime);
			return;
		}
	}
	/* the cgroupfs driver of Docker outside Kubernetes: /docker/ID */
	if (plen == 6 && memcmp(parent, "docker", 6) == 0)
		snprintf(w->runtime, sizeof(w->runtime), "docker");
}

/* The unit (deepest ".service" or ".scope"), pod uid and runtime that the path names. */
static void parse_path(struct workload *w, const char *path)
{
	const char *seg = path, *parent = "";
	size_t plen = 0;
	bool kubepods = false;

	while (*seg) {
		const char *next;
		size_t len;

		while (*seg == '/')
			seg++;
		len = strcspn(seg, "/");
		if (!len)
			break;
		if (ends_with(seg, len, ".service") || ends_with(seg, len, ".scope"))
			copy_n(w->unit, sizeof(w->unit), seg, len);
		if (starts_with(seg, len, "kubepods"))
			kubepods = true;
		next = seg + len + (seg[len] == '/');
		pod_of_segment(w, seg, len,
			       kubepods || (w->container_id[0] &&
					    strncmp(next, w->container_id, WORKLOAD_ID_LEN) == 0 &&
					    (next[WORKLOAD_ID_LEN] == '\0' ||
					     next[WORKLOAD_ID_LEN] == '/')));
		if (w->container_id[0] && memmem(seg, len, w->container_id, WORKLOAD_ID_LEN))
			runtime_of(w, seg, len, parent, plen);
		parent = seg;
		plen = len;
		seg += len;
	}
}

/* ---- the kubelet's log directories: namespace, pod and container by name ---- */

/* "A_B_C" (none of them empty, no further '_') into a, b, c. */
static bool split3(const char *s, size_t len, char *a, char *b, char *c, size_t size)
{
	const char *u1 = memchr(s, '_', len), *u2;

	if (!u1 || u1 == s)
		return false;
	u2 = memchr(u1 + 1, '_', len - (u1 + 1 - s));
	if (!u2 || u2 == u1 + 1 || u2 + 1 == s + len || memchr(u2 + 1, '_', len - (u2 + 1 - s)))
		return false;
	copy_n(a, size, s, u1 - s);
	copy_n(b, size, u1 + 1, u2 - u1 - 1);
	copy_n(c, size, u2 + 1, len - (u2 + 1 - s));
	return true;
}

static void sanitize_in_place(char *s, size_t size)
{
	char tmp[256];

	if (!*s)
		return;
	pyro_labels_sanitize(s, false, tmp, size < sizeof(tmp) ? size : sizeof(tmp));
	memcpy(s, tmp, strlen(tmp) + 1);
}

/*
 * The kubelet links ROOT/var/log/containers/POD_NAMESPACE_CONTAINER-ID.log
 * to the container's log under /var/log/pods, so the id names the container.
 */
static void names_by_id(struct workload *w, const char *root)
{
	char path[4096], suffix[WORKLOAD_ID_LEN + 6];
	char pod[254], ns[254], ctr[254];
	struct dirent *de;
	DIR *d;
	bool found = false;

	snprintf(path, sizeof(path), "%s/var/log/containers", root);
	snprintf(suffix, sizeof(suffix), "-%s.log", w->container_id);
	d = opendir(path);
	if (!d)
		return;
	while (!found && (de = readdir(d))) {
		size_t len = strlen(de->d_name);

		if (!ends_with(de->d_name, len, suffix) ||
		    !split3(de->d_name, len - strlen(suffix), pod, ns, ctr, sizeof(pod)))
			continue;
		snprintf(w->pod, sizeof(w->pod), "%s", pod);
		snprintf(w->k8s_namespace, sizeof(w->k8s_namespace), "%s", ns);
		snprintf(w->container, sizeof(w->container), "%s", ctr);
		found = true;
	}
	closedir(d);
}

/* The one directory in dir, into out; false when there are none or several. */
static bool only_subdir(const char *dir, char *out, size_t size)
{
	struct dirent *de;
	int n = 0;
	DIR *d = opendir(dir);

	if (!d)
		return false;
	while ((de = readdir(d)) && n < 2) {
		struct stat st;

		if (de->d_name[0] == '.' || fstatat(dirfd(d), de->d_name, &st, 0) ||
		    !S_ISDIR(st.st_mode))
			continue;
		if (!n++)
			copy_n(out, size, de->d_name, strlen(de->d_name));
	}
	closedir(d);
	if (n != 1)
		out[0] = '\0';
	return n == 1;
}

/*
 * ROOT/var/log/pods/NAMESPACE_POD_UID names the pod of a uid; in it, one
 * directory per container. When the id found no container above (no
 * /var/log/containers, a link name the kubelet cut at 255 bytes, a container
 * without logs: the pod's sandbox), a pod with a single container directory
 * names it; with several, the container stays unknown.
 */
static void names_by_pod(struct workload *w, const char *root)
{
	char path[4096], ns[254], pod[254], uid[254];
	struct dirent *de;
	DIR *d;

	snprintf(path, sizeof(path), "%s/var/log/pods", root);
	d = opendir(path);
	if (!d)
		return;
	while ((de = readdir(d))) {
		size_t len = strlen(de->d_name);

		if (!split3(de->d_name, len, ns, pod, uid, sizeof(ns)) ||
		    strcmp(uid, w->pod_uid) != 0)
			continue;
		if (!w->pod[0]) {
			snprintf(w->pod, sizeof(w->pod), "%s", pod);
			snprintf(w->k8s_namespace, sizeof(w->k8s_namespace), "%s", ns);
		}
		if (!w->container[0]) {
			snprintf(path + strlen(path), sizeof(path) - strlen(path), "/%s",
				 de->d_name);
			only_subdir(path, w->container, sizeof(w->container));
		}
		break;
	}
	closedir(d);
}

static void kubelet_names(struct workload *w, const char *root)
{
	if (w->container_id[0])
		names_by_id(w, root);
	if (w->pod_uid[0])
		names_by_pod(w, root);
	sanitize_in_place(w->k8s_namespace, sizeof(w->k8s_namespace));
	sanitize_in_place(w->pod, sizeof(w->pod));
	sanitize_in_place(w->container, sizeof(w->container));
}

/* ---- Docker's name for a container ---- */

#define DOCKER_CONFIG_MAX (1024 * 1024)

/* Up to size bytes of fd; a process that exits while it is read reads as ESRCH. */
static ssize_t read_all(int fd, char *buf, size_t size)
{
	size_t off = 0;

	while (off < size) {
		ssize_t n = read(fd, buf + off, size - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (!n)
			break;
		off += n;
	}
	return (ssize_t)off;
}

/* The end of the JSON string that opens at s[i] (its closing quote), or n. */
static size_t string_end(const char *s, size_t n, size_t i)
{
	for (i++; i < n && s[i] != '"'; i++) {
		if (s[i] == '\\')
			i++;
	}
	return i < n ? i : n;
}

/*
 * The value of the top-level key "Name" of a JSON object ("/redis" in
 * Docker's config.v2.json): brackets outside strings are counted so that a
 * "Name" deeper in (a mount's, a label's) is not taken for it. A value with
 * an escape is refused: Docker's names have none.
 */
static bool json_top_name(const char *s, size_t n, char *out, size_t size)
{
	int depth = 0;

	for (size_t i = 0; i < n; i++) {
		size_t end, j;

		if (s[i] == '{' || s[i] == '[') {
			depth++;
		} else if (s[i] == '}' || s[i] == ']') {
			depth--;
		} else if (s[i] == '"') {
			end = string_end(s, n, i);
			for (j = end + 1; j < n && is_space(s[j]);)
				j++;
			if (depth == 1 && end - i == 5 && memcmp(s + i + 1, "Name", 4) == 0 &&
			    j < n && s[j] == ':') {
				for (j++; j < n && is_space(s[j]);)
					j++;
				if (j >= n || s[j] != '"')
					return false;
				end = string_end(s, n, j);
				if (end >= n || end == j + 1 ||
				    memchr(s + j + 1, '\\', end - j - 1))
					return false;
				copy_n(out, size, s + j + 1, end - j - 1);
				return true;
			}
			i = end;
		}
	}
	return false;
}

/* ROOT/var/lib/docker/containers/ID/config.v2.json's "Name", when Docker runs the container. */
static void docker_name(struct workload *w, const char *root)
{
	char path[4096], *text;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/var/lib/docker/containers/%s/config.v2.json", root,
		 w->container_id);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	text = malloc(DOCKER_CONFIG_MAX);
	n = text ? read_all(fd, text, DOCKER_CONFIG_MAX) : -ENOMEM;
	close(fd);
	if (n > 0 && json_top_name(text, n, w->docker_name, sizeof(w->docker_name)))
		pyro_labels_sanitize(w->docker_name, true, w->docker_name, sizeof(w->docker_name));
	free(text);
}

/* ---- cgroup namespaces ---- */

static char cgroup_base[4096]; /* workload_set_cgroup_base() */

void workload_set_cgroup_base(const char *base)
{
	snprintf(cgroup_base, sizeof(cgroup_base), "%s",
		 base && strcmp(base, "/") != 0 ? base : "");
}

/* base joined with a path relative to it ("/../../x.service"), normalized; false above "/". */
static bool resolve_relative(const char *base, const char *rel, char *out, size_t size)
{
	char buf[2 * 4096 + 2], *save = NULL;
	size_t n = 0;
	int k = snprintf(buf, sizeof(buf), "%s/%s", base, rel);

	if (k < 0 || (size_t)k >= sizeof(buf) || size < 2)
		return false;
	out[0] = '\0';
	for (char *seg = strtok_r(buf, "/", &save); seg; seg = strtok_r(NULL, "/", &save)) {
		size_t l = strlen(seg);

		if (strcmp(seg, ".") == 0)
			continue;
		if (strcmp(seg, "..") == 0) {
			if (!n)
				return false;
			n = strrchr(out, '/') - out;
			out[n] = '\0';
			continue;
		}
		if (n + 1 + l >= size)
			return false;
		out[n++] = '/';
		memcpy(out + n, seg, l + 1);
		n += l;
	}
	if (!n)
		snprintf(out, size, "/");
	return true;
}

/* The directory under dir (depth levels at most) whose cgroup.procs lists pid, into out. */
static bool find_self(char *dir, size_t size, size_t root_len, int depth, pid_t pid, char *out,
		      size_t len)
{
	size_t dlen = strlen(dir);
	char line[32];
	bool found = false;
	struct dirent *de;
	FILE *f;
	DIR *d;

	if (dlen + 16 >= size)
		return false;
	snprintf(dir + dlen, size - dlen, "/cgroup.procs");
	f = fopen(dir, "re");
	dir[dlen] = '\0';
	while (f && !found && fgets(line, sizeof(line), f))
		found = atoi(line) == pid;
	if (f)
		fclose(f);
	if (found) {
		snprintf(out, len, "%s", dlen > root_len ? dir + root_len : "/");
		return true;
	}
	d = depth > 0 ? opendir(dir) : NULL;
	while (d && !found && (de = readdir(d))) {
		if (de->d_type != DT_DIR || de->d_name[0] == '.' ||
		    dlen + 1 + strlen(de->d_name) >= size)
			continue;
		snprintf(dir + dlen, size - dlen, "/%s", de->d_name);
		found = find_self(dir, size, root_len, depth - 1, pid, out, len);
		dir[dlen] = '\0';
	}
	if (d)
		closedir(d);
	return found;
}

int workload_cgroup_base(const char *mount, char *base, size_t len)
{
	char dir[4096];
	size_t root_len;

	if (!mount || !*mount)
		mount = "/sys/fs/cgroup";
	snprintf(dir, sizeof(dir), "%s", mount);
	root_len = strlen(dir);
	while (root_len > 1 && dir[root_len - 1] == '/')
		dir[--root_len] = '\0';
	return find_self(dir, sizeof(dir), root_len, 12, getpid(), base, len) ? 0 : -ENOENT;
}

/*
 * The mount of the hierarchy whose path workload_of() takes on this
 * machine: cgroup v1's name=systemd where it is mounted (it outranks a
 * hybrid machine's "0::/"), else cgroup2's; *v1 says which.
 */
static bool cgroup_mount(char *out, size_t len, bool *v1)
{
	char line[1024], mnt[512], type[64], opts[512];
	FILE *f = fopen("/proc/self/mounts", "re");

	out[0] = '\0';
	*v1 = false;
	while (f && !*v1 && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%*s %511s %63s %511s", mnt, type, opts) != 3)
			continue;
		*v1 = !strcmp(type, "cgroup") && strstr(opts, "name=systemd");
		if (*v1 || (!out[0] && !strcmp(type, "cgroup2")))
			snprintf(out, len, "%s", mnt);
	}
	if (f)
		fclose(f);
	return out[0] != '\0';
}

/* This process's path in that hierarchy, as its own namespace names it. */
static bool own_path(bool v1, char *out, size_t len)
{
	char line[4096];
	const char *want = v1 ? ":name=systemd:" : "0::";
	FILE *f = fopen("/proc/self/cgroup", "re");
	bool found = false;

	while (f && !found && fgets(line, sizeof(line), f)) {
		const char *at = v1 ? strstr(line, want) : (strncmp(line, want, 3) ? NULL : line);

		if (!at)
			continue;
		line[strcspn(line, "\n")] = '\0';
		snprintf(out, len, "%s", at + strlen(want));
		found = true;
	}
	if (f)
		fclose(f);
	return found;
}

int workload_host_cgroup_base(char *base, size_t len)
{
	char mount[512], self[4096], host[4096];
	size_t hl, sl;
	bool v1;
	int rc;

	if (!cgroup_mount(mount, sizeof(mount), &v1) || !own_path(v1, self, sizeof(self)))
		return -ENOENT;
	rc = workload_cgroup_base(mount, host, sizeof(host));
	if (rc)
		return rc;
	/* the same path both ways: the host's namespace, nothing to resolve */
	if (!strcmp(self, host))
		return 1;
	/* a namespace's own path is the host's with the namespace's root cut off */
	hl = strlen(host);
	sl = strcmp(self, "/") ? strlen(self) : 0;
	if (sl > hl || (sl && strcmp(host + hl - sl, self) != 0))
		return -ENOENT;
	snprintf(base, len, "%.*s", (int)(hl - sl), host);
	if (!base[0])
		snprintf(base, len, "/");
	return 0;
}

/* ---- /proc/PID/cgroup ---- */

/*
 * One line "ID:CONTROLLERS:PATH", ranked as the process's path: cgroup2's
 * "0::PATH" (4), else the v1 hierarchy "name=systemd" (3), which says more
 * than a hybrid machine's cgroup2 "0::/" (2); another v1 line (1) is a last
 * resort; -1 for a malformed line.
 */
static int line_kind(const char *line, size_t len, const char **path, size_t *plen)
{
	const char *c1 = memchr(line, ':', len), *c2;

	if (!c1 || c1 == line)
		return -1;
	c2 = memchr(c1 + 1, ':', len - (c1 + 1 - line));
	if (!c2 || c2 + 1 == line + len || c2[1] != '/')
		return -1;
	*path = c2 + 1;
	*plen = len - (c2 + 1 - line);
	if (c1 - line == 1 && line[0] == '0' && c2 == c1 + 1)
		return *plen > 1 ? 4 : 2;
	for (const char *c = c1 + 1; c < c2;) {
		size_t l = strcspn(c, ",:");

		if (l == 12 && memcmp(c, "name=systemd", 12) == 0)
			return 3;
		c += l + (c[l] == ',');
	}
	return 1;
}

int workload_from_cgroup_text(const char *text, const char *root, struct workload *w)
{
	int best = -1, lines = 0;
	const char *id_line = NULL;
	size_t id_len = 0;

	memset(w, 0, sizeof(*w));
	if (!text)
		return -EINVAL;
	for (const char *l = text; *l;) {
		size_t len = strcspn(l, "\n");
		const char *path = NULL;
		size_t plen = 0;
		int kind = line_kind(l, len, &path, &plen);

		if (kind >= 0)
			lines++;
		if (kind > best) {
			copy_n(w->cgroup, sizeof(w->cgroup), path, plen);
			best = kind;
		}
		/* Alloy: the first line that has an id */
		if (!w->container_id[0] && workload_container_id(l, len, w->container_id)) {
			id_line = path;
			id_len = kind >= 0 ? plen : 0;
		}
		l += len + (l[len] == '\n');
	}
	if (cgroup_base[0] && starts_with(w->cgroup, strlen(w->cgroup), "/..")) {
		char abs[sizeof(w->cgroup)];

		if (resolve_relative(cgroup_base, w->cgroup, abs, sizeof(abs)))
			memcpy(w->cgroup, abs, sizeof(abs));
	}
	parse_path(w, w->cgroup);
	if (w->container_id[0] && id_len && !w->runtime[0]) {
		/* a v1 line other than name=systemd's holds the id: its runtime and pod */
		char other[4096], unit[sizeof(w->unit)];

		copy_n(other, sizeof(other), id_line, id_len);
		memcpy(unit, w->unit, sizeof(unit));
		parse_path(w, other);
		memcpy(w->unit, unit, sizeof(unit));
	}
	if (!root || !strcmp(root, "/"))
		root = "";
	if (w->container_id[0] || w->pod_uid[0])
		kubelet_names(w, root);
	if (w->container_id[0] && !w->container[0] &&
	    (!w->runtime[0] || !strcmp(w->runtime, "docker")))
		docker_name(w, root);
	workload_service_name(w, NULL, w->service_name, sizeof(w->service_name));
	return lines ? 0 : -EINVAL;
}

/* pid's parent (/proc/PID/stat's fourth field), 0 when unknown. */
static pid_t parent_of(pid_t pid)
{
	char path[64], buf[512], *p;
	int ppid = 0, fd;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	/* past the comm, which may hold anything */
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 1, " %*c %d", &ppid) != 1)
		return 0;
	return (pid_t)ppid;
}

/*
 * The comm of the oldest of pid's ancestors that run its very executable
 * (forked, not exec'ed: Redis's BGSAVE child, Varnish's cache-main), into
 * comm, which holds pid's own; unchanged when its parent runs another.
 */
static void tree_comm(pid_t pid, char *comm, size_t len)
{
	char path[64];
	struct stat me, up;

	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	if (stat(path, &me))
		return;
	for (int depth = 0; depth < 16; depth++) {
		pid_t parent = parent_of(pid);
		ssize_t n;
		int fd;

		if (parent <= 1)
			return;
		snprintf(path, sizeof(path), "/proc/%d/exe", (int)parent);
		if (stat(path, &up) || up.st_dev != me.st_dev || up.st_ino != me.st_ino)
			return;
		snprintf(path, sizeof(path), "/proc/%d/comm", (int)parent);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return;
		n = read(fd, comm, len - 1);
		close(fd);
		comm[n > 0 ? n : 0] = '\0';
		comm[strcspn(comm, "\n")] = '\0';
		pid = parent;
	}
}

int workload_of(pid_t pid, const char *root, struct workload *w)
{
	char path[64], comm[64] = "";
	char *text = malloc(CGROUP_FILE_MAX);
	ssize_t n;
	int fd, rc;

	if (!text)
		return -ENOMEM;
	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		rc = errno == ENOENT ? -ESRCH : -errno;
		free(text);
		return rc;
	}
	n = read_all(fd, text, CGROUP_FILE_MAX - 1);
	close(fd);
	if (n < 0) {
		free(text);
		return n == -ENOENT ? -ESRCH : (int)n;
	}
	text[n] = '\0';
	rc = workload_from_cgroup_text(text, root, w);
	free(text);
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = read(fd, comm, sizeof(comm) - 1);
		close(fd);
		comm[n > 0 ? n : 0] = '\0';
		comm[strcspn(comm, "\n")] = '\0';
	}
	/* without a unit or container, a forked child takes its parent's service */
	tree_comm(pid, comm, sizeof(comm));
	workload_service_name(w, comm, w->service_name, sizeof(w->service_name));
	return rc;
}

/* ---- names ---- */

void workload_service_name(const struct workload *w, const char *comm, char *out, size_t len)
{
	char buf[600];
	size_t ulen = strlen(w->unit);

	if (w->k8s_namespace[0] && w->container[0]) {
		snprintf(buf, sizeof(buf), "%s/%s", w->k8s_namespace, w->container);
	} else if (w->docker_name[0]) {
		snprintf(buf, sizeof(buf), "%s", w->docker_name);
	} else if (w->container_id[0]) {
		snprintf(buf, sizeof(buf), "%s/%.12s", w->runtime[0] ? w->runtime : "container",
			 w->container_id);
	} else if (ulen) {
		snprintf(buf, sizeof(buf), "%s", w->unit);
		if (ends_with(buf, ulen, ".service"))
			buf[ulen - 8] = '\0';
	} else {
		snprintf(buf, sizeof(buf), "%s", comm && *comm ? comm : "unspecified");
	}
	pyro_labels_sanitize(buf, true, out, len);
}

size_t workload_labels(const struct workload *w, struct pyro_label *out, size_t max)
{
	const struct pyro_label all[] = {
		{ "namespace", w->k8s_namespace },
		{ "pod", w->pod },
		{ "container", w->container },
		{ "container_id", w->container_id },
	};
	size_t n = 0;

	if (max > PYRO_MAX_LABELS)
		max = PYRO_MAX_LABELS;
	/* sanitized as they were read: a value that is not valid all the same stays out */
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]) && n < max; i++) {
		if (all[i].value[0] && pyro_labels_valid_value(all[i].value))
			out[n++] = all[i];
	}
	return n;
}
