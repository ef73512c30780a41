// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * heapbpf refuses a BPF object built for another architecture's struct
 * pt_regs (a cross build once ran x86-64's on arm64: it loaded, attached,
 * read the wrong registers, and every event faulted). The embedded object
 * is this build's architecture's; hand-made BTF stands for the other one.
 */
#include <errno.h>
#include <string.h>

#include <criterion/criterion.h>
#include <bpf/btf.h>

#include "sampling/probes.h"

#if defined(__x86_64__)
#define HOST  "x86-64"
#define OTHER "arm64"
#else
#define HOST  "arm64"
#define OTHER "x86-64"
#endif

/* struct pt_regs as vmlinux.h lays it out for arch: x86-64 names r9, arm64 opens with user_pt_regs */
static struct btf *regs_btf(const char *arch)
{
	struct btf *b = btf__new_empty();
	int u64;

	cr_assert_not_null(b);
	u64 = btf__add_int(b, "long long unsigned int", 8, 0);
	cr_assert_gt(u64, 0);
	if (!strcmp(arch, "x86-64")) {
		cr_assert_gt(btf__add_struct(b, "pt_regs", 16), 0);
		cr_assert_eq(btf__add_field(b, "r8", u64, 0, 0), 0);
		cr_assert_eq(btf__add_field(b, "r9", u64, 64, 0), 0);
	} else if (!strcmp(arch, "arm64")) {
		int arr = btf__add_array(b, u64, u64, 31), user;

		cr_assert_gt(arr, 0);
		user = btf__add_struct(b, "user_pt_regs", 31 * 8);
		cr_assert_gt(user, 0);
		cr_assert_eq(btf__add_field(b, "regs", arr, 0, 0), 0);
		cr_assert_gt(btf__add_struct(b, "pt_regs", 31 * 8 + 8), 0);
		cr_assert_eq(btf__add_field(b, "user_regs", user, 0, 0), 0);
		cr_assert_eq(btf__add_field(b, "orig_x0", u64, 31 * 64, 0), 0);
	} else {
		/* riscv's: neither r9 nor user_pt_regs */
		cr_assert_gt(btf__add_struct(b, "pt_regs", 16), 0);
		cr_assert_eq(btf__add_field(b, "epc", u64, 0, 0), 0);
		cr_assert_eq(btf__add_field(b, "ra", u64, 64, 0), 0);
	}
	return b;
}

Test(bpf_arch, the_embedded_object_is_this_builds)
{
	char err[512] = "";

	cr_assert_eq(probes__check_arch(err, sizeof(err)), 0, "%s", err);
}

Test(bpf_arch, names_each_architecture)
{
	struct btf *x = regs_btf("x86-64"), *a = regs_btf("arm64"), *r = regs_btf("riscv");

	cr_assert_str_eq(probes__regs_arch(x), "x86-64");
	cr_assert_str_eq(probes__regs_arch(a), "arm64");
	cr_assert_null(probes__regs_arch(r));
	cr_assert_null(probes__regs_arch(NULL));
	btf__free(x);
	btf__free(a);
	btf__free(r);
}

Test(bpf_arch, another_architectures_object_is_refused)
{
	struct btf *own = regs_btf(HOST), *other = regs_btf(OTHER), *r = regs_btf("riscv");
	char err[512] = "";

	cr_assert_eq(probes__check_regs_arch(own, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(probes__check_regs_arch(other, err, sizeof(err)), -ENOEXEC);
	cr_assert(strstr(err, "reads " OTHER "'s registers") &&
			  strstr(err, "this heapbpf is built for " HOST),
		  "%s", err);
	/* one sentence */
	cr_assert_null(strchr(err, '\n'), "%s", err);
	cr_assert_eq(probes__check_regs_arch(r, err, sizeof(err)), -ENOEXEC);
	cr_assert(strstr(err, "an unknown architecture"), "%s", err);
	btf__free(own);
	btf__free(other);
	btf__free(r);
}
