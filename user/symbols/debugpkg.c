// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "symbols/debugpkg.h"
#include "util/files.h"

#define DPKG_INFO  "/var/lib/dpkg/info"
#define OS_RELEASE "/etc/os-release"

/* Whether the dpkg list at path names file on a line of its own. */
static bool lists(const char *path, const char *file)
{
	char line[PATH_MAX + 2];
	FILE *f = fopen(path, "re");
	bool found = false;

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		found = strcmp(line, file) == 0;
	}
	fclose(f);
	return found;
}

/* The package ("libjemalloc2") whose list names file, into pkg; false when none does. */
static bool owner(const char *file, char *pkg, size_t len)
{
	DIR *d = opendir(DPKG_INFO);
	struct dirent *e;
	bool found = false;

	if (!d)
		return false;
	while (!found && (e = readdir(d))) {
		size_t n = strlen(e->d_name);
		char path[PATH_MAX];

		if (n < 6 || strcmp(e->d_name + n - 5, ".list") != 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", DPKG_INFO, e->d_name);
		if (!lists(path, file))
			continue;
		/* "libjemalloc2:amd64.list": the name before the architecture */
		snprintf(pkg, len, "%.*s", (int)strcspn(e->d_name, ":."), e->d_name);
		found = pkg[0] != '\0';
	}
	closedir(d);
	return found;
}

/* VERSION_CODENAME of /etc/os-release ("bookworm"); false when it has none. */
static bool codename(char *buf, size_t len)
{
	char line[256];
	FILE *f = fopen(OS_RELEASE, "re");
	bool found = false;

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		if (strncmp(line, "VERSION_CODENAME=", 17) != 0)
			continue;
		line[strcspn(line, "\n\"")] = '\0';
		snprintf(buf, len, "%.*s", (int)(len - 1), line + 17);
		found = buf[0] != '\0';
	}
	fclose(f);
	return found;
}

bool debugpkg_hint(const char *path, char *buf, size_t len)
{
	char pkg[128], suite[64];

	if (!owner(path, pkg, sizeof(pkg)))
		return false;
	if (codename(suite, sizeof(suite)))
		snprintf(buf, len,
			 "%s-dbgsym, from deb http://deb.debian.org/debian-debug %s-debug main",
			 pkg, suite);
	else
		snprintf(buf, len, "%s-dbgsym, from Debian's debian-debug archive", pkg);
	return true;
}

bool debugpkg_preload(char *buf, size_t len)
{
	char exe[PATH_MAX], *slash;
	ssize_t n = hb_readlink("/proc/self/exe", exe, sizeof(exe));

	if (n <= 0 || !(slash = strrchr(exe, '/')))
		return false;
	*slash = '\0';
	/* installed: BINDIR/heapbpf and PREFIX/lib/heapbpf; the build tree: build/jemalloc */
	snprintf(buf, len, "%.*s/lib/heapbpf/libjemalloc.so.2",
		 (int)(strrchr(exe, '/') ? strrchr(exe, '/') - exe : 0), exe);
	if (strrchr(exe, '/') && access(buf, R_OK) == 0)
		return true;
	snprintf(buf, len, "%s/jemalloc/libjemalloc.so.2", exe);
	return access(buf, R_OK) == 0;
}
