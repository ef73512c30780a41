// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* heapbpf agent's --select and --exclude rules, on workloads made from cgroup text. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "targets/selection.h"

#define ID  "4f797c539e6c745de61a93ca3ff892358ecbcaccd8414d5db545c38428142970"
#define UID "2f1a6e1c_9b7e_4c47_8d0a_1f1e8c2f7b3a"

static struct select_rule rule(const char *text, bool exclude)
{
	struct select_rule r;
	char err[512];

	cr_assert_eq(selection_rule_parse(text, exclude, &r, err, sizeof(err)), 0, "%s", err);
	return r;
}

static struct workload of(const char *cgroup_text)
{
	struct workload w;

	cr_assert_eq(workload_from_cgroup_text(cgroup_text, "/nonexistent", &w), 0);
	return w;
}

Test(selection, every_key_must_hold)
{
	struct workload unit = of("0::/system.slice/redis-server.service\n");
	struct workload pod = of("0::/kubepods.slice/kubepods-besteffort.slice/"
				 "kubepods-besteffort-pod" UID ".slice/cri-containerd-" ID
				 ".scope\n");
	struct select_rule r = rule("unit=redis-server", false);

	cr_assert(selection_rule_match(&r, &unit, "redis-server", "redis-server"));
	cr_assert_not(selection_rule_match(&r, &pod, "redis-server", "redis-server"));
	r = rule("unit=redis-server.service,exe=redis-server", false);
	cr_assert(selection_rule_match(&r, &unit, "redis-serv", "redis-server"),
		  "exe by file name");
	cr_assert_not(selection_rule_match(&r, &unit, "other", "other"));
	r = rule("cgroup=/kubepods.slice/", false);
	cr_assert(selection_rule_match(&r, &pod, "x", "x"));
	cr_assert_not(selection_rule_match(&r, &unit, "x", "x"));
	r = rule("container=4f797c53", false);
	cr_assert(selection_rule_match(&r, &pod, "x", "x"));
	cr_assert_not(selection_rule_match(&r, &unit, "x", "x"), "no container: no match");
	r = rule("service_name=cache,unit=redis-server", false);
	cr_assert_str_eq(r.service_name, "cache");
}

Test(selection, refusals)
{
	static const char *const bad[] = {
		"unit", "color=red", "unit=", "unit=a/b", "service_name=has space", "exe=x,,unit=y"
	};
	struct select_rule r;
	char err[512];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_assert_eq(selection_rule_parse(bad[i], false, &r, err, sizeof(err)), -EINVAL,
			     "%s accepted", bad[i]);
		cr_assert(strstr(err, bad[i]) || strstr(err, "value"), "%s: %s", bad[i], err);
	}
	cr_assert_eq(selection_rule_parse("service_name=x", true, &r, err, sizeof(err)), -EINVAL,
		     "an exclude names nothing");
}

/* namespace= and pod= hold on the names the kubelet's log directories gave the workload */
Test(selection, namespace_and_pod)
{
	struct workload pod = of("0::/kubepods.slice/kubepods-besteffort.slice/"
				 "kubepods-besteffort-pod" UID ".slice/cri-containerd-" ID
				 ".scope\n");
	struct workload unit = of("0::/system.slice/redis-server.service\n");
	struct select_rule r;

	snprintf(pod.k8s_namespace, sizeof(pod.k8s_namespace), "payments");
	snprintf(pod.pod, sizeof(pod.pod), "ledger-5f7c9");
	r = rule("namespace=payments", false);
	cr_assert(selection_rule_match(&r, &pod, "x", "x"));
	cr_assert_not(selection_rule_match(&r, &unit, "x", "x"), "no namespace: no match");
	r = rule("namespace=pay", false);
	cr_assert_not(selection_rule_match(&r, &pod, "x", "x"), "a namespace is named whole");
	r = rule("namespace=payments,pod=ledger-5f7c9", false);
	cr_assert(selection_rule_match(&r, &pod, "x", "x"));
	r = rule("namespace=payments,pod=ledger-00000", false);
	cr_assert_not(selection_rule_match(&r, &pod, "x", "x"));
	r = rule("pod=ledger-5f7c9,exe=ledger", false);
	cr_assert(selection_rule_match(&r, &pod, "ledger", "ledger"));
	cr_assert_not(selection_rule_match(&r, &pod, "other", "other"));
	r = rule("namespace=payments", true);
	cr_assert(selection_rule_match(&r, &pod, "x", "x"), "an exclude matches the same way");
}
