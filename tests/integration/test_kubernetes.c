// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * examples/kubernetes/heapbpf-agent.yaml: it parses, keeps to least
 * privilege (tests/kubernetes/check_manifest.py) and is valid for the
 * Kubernetes API's schema (tests/kubernetes/validate.mjs); and the checks
 * are real: copies of it with one thing wrong each are refused, each with
 * its own reason.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "harness.h"

#define MANIFEST "examples/kubernetes/heapbpf-agent.yaml"
#define CHECKER	 "tests/kubernetes/check_manifest.py"

TestSuite(kubernetes, .fini = hb_tmpdir_cleanup, .timeout = 180);

static char out[16384];

/* check_manifest.py on path (with extra, an option or NULL); its output in out, its exit code. */
static int check(const char *path, const char *extra)
{
	const char *argv[] = { "/usr/bin/python3", CHECKER, path, extra, NULL };
	char outpath[PATH_MAX], *text = NULL;
	pid_t pid;
	int rc;

	snprintf(outpath, sizeof(outpath), "%s/check.out", hb_tmpdir());
	pid = hb_spawn(argv, outpath);
	cr_assert_gt(pid, 0);
	rc = hb_wait(pid, 120000);
	out[0] = '\0';
	if (hb_read_file(outpath, &text) >= 0) {
		snprintf(out, sizeof(out), "%s", text);
		free(text);
	}
	return rc;
}

/* A copy of the manifest with sed's script applied; asserts it changed something. */
static const char *broken(const char *name, const char *script)
{
	static char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s.yaml", hb_tmpdir(), name);
	hb_sh("sed -e '%s' " MANIFEST " > '%s' && ! cmp -s " MANIFEST " '%s'", script, path, path);
	return path;
}

static void refused(const char *name, const char *script, const char *reason)
{
	int rc = check(broken(name, script), NULL);

	cr_assert_eq(rc, 1, "%s: exit %d: %s", name, rc, out);
	cr_assert(strstr(out, reason), "%s: no \"%s\" in: %s", name, reason, out);
}

Test(kubernetes, example_is_valid_and_least_privilege)
{
	int rc = check(MANIFEST, NULL);

	cr_assert_eq(rc, 0, "exit %d: %s", rc, out);
	cr_assert(strstr(out, "4 objects, least privilege kept"), "%s", out);
	/* the schema validation ran */
	cr_assert(strstr(out, "4 objects valid"), "%s", out);
}

Test(kubernetes, privilege_beyond_the_need_is_refused)
{
	refused("privileged", "s/privileged: false/privileged: true/",
		"the container must not be privileged");
	refused("netraw", "s/\"DAC_READ_SEARCH\"\\]/\"DAC_READ_SEARCH\", \"NET_RAW\"]/",
		"capabilities added must be exactly");
	refused("no-sys-admin", "s/\"SYS_ADMIN\", //", "capabilities added must be exactly");
	refused("hostnetwork", "s/hostNetwork: false/hostNetwork: true/",
		"hostNetwork must stay off by default");
	refused("writable-rootfs", "s/readOnlyRootFilesystem: true/readOnlyRootFilesystem: false/",
		"readOnlyRootFilesystem must be true");
	refused("root-fs", "s|path: /var/log/pods|path: /|",
		"host path / is not one heapbpf needs");
	refused("writable-cgroup",
		"/mountPath: \\/sys\\/fs\\/cgroup/{n;s/readOnly: true/readOnly: false/}",
		"host path /sys/fs/cgroup must be mounted read-only");
	refused("token",
		"0,/automountServiceAccountToken: false/s//automountServiceAccountToken: true/",
		"the ServiceAccount must mount no token");
	refused("no-hostpid", "s/hostPID: true/hostPID: false/", "hostPID must be true");
}

Test(kubernetes, what_heapbpf_needs_is_there)
{
	refused("no-tracefs", "s|path: /sys/kernel/tracing|path: /sys/kernel/debug|",
		"host path /sys/kernel/tracing is missing");
	refused("moved-pods", "s|mountPath: /var/log/pods|mountPath: /host/var/log/pods|",
		"host path /var/log/pods is mounted at /host/var/log/pods");
	refused("no-spool", "s|value: /var/lib/heapbpf/agent|value: /tmp|",
		"STATE_DIRECTORY must be /var/lib/heapbpf/agent");
	refused("no-reason", "s/CVE-2025-38466/a kernel change/g", "CVE-2025-38466");
}

Test(kubernetes, schema_errors_are_refused)
{
	/* an unknown field, as kubectl --validate=strict refuses it */
	refused("typo", "s/      hostPID: true/      hostPID: true\\n      hostPId: true/",
		"hostPId: unknown field of V1PodSpec");
	/* a wrong type, an enum value the API does not have */
	refused("type", "s/terminationGracePeriodSeconds: 60/terminationGracePeriodSeconds: soon/",
		"terminationGracePeriodSeconds");
	refused("enum", "s/type: RollingUpdate/type: Sometimes/", "must be equal to one of");
	/* not YAML at all */
	refused("yaml", "s/^kind: DaemonSet/kind: [DaemonSet/", "not YAML");
	/* --no-schema leaves the schema out: the typo passes the policy alone */
	cr_assert_eq(
		check(broken("typo2",
			     "s/      hostPID: true/      hostPID: true\\n      hostPId: true/"),
		      "--no-schema"),
		0, "%s", out);
}
