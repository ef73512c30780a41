// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Pyroscope names: the character rules, name= itself, and the user's naming options. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "export/pyro_labels.h"
#include "export/pyro_push.h"

Test(pyro_labels, name_sorted_and_validated)
{
	struct pyro_label l[] = { { "pid", "42" },
				  { "hostname", "web-1.example" },
				  { "env", "prod" } };
	char buf[256];

	cr_assert_eq(pyro_labels_build_name(buf, sizeof(buf), "redis-server", l, 3), 0);
	cr_assert_str_eq(buf, "redis-server{env=prod,hostname=web-1.example,pid=42}");
	cr_assert_eq(pyro_labels_build_name(buf, sizeof(buf), "svc", NULL, 0), 0);
	cr_assert_str_eq(buf, "svc{}");
	/* what /ingest's parser would split or Pyroscope's validation would refuse */
	l[2].value = "a,b";
	cr_assert_eq(pyro_labels_build_name(buf, sizeof(buf), "svc", l, 3), -EINVAL);
	l[2].value = "prod";
	l[2].key = "__name__";
	cr_assert_eq(pyro_labels_build_name(buf, sizeof(buf), "svc", l, 3), -EINVAL);
	l[2].key = "pid"; /* duplicate */
	cr_assert_eq(pyro_labels_build_name(buf, sizeof(buf), "svc", l, 3), -EINVAL);
	cr_assert_eq(pyro_labels_build_name(buf, sizeof(buf), "bad service", NULL, 0), -EINVAL);
	cr_assert_eq(pyro_labels_build_name(buf, 8, "svc", l, 1), -ENAMETOOLONG);
}

Test(pyro_labels, character_rules)
{
	char out[64];

	cr_assert(pyro_labels_valid_service("a.b/c-d_e9"));
	cr_assert_not(pyro_labels_valid_service(""));
	cr_assert_not(pyro_labels_valid_service("a{b}"));
	cr_assert(pyro_labels_valid_key("_x1"));
	cr_assert_not(pyro_labels_valid_key("1x"));
	cr_assert_not(pyro_labels_valid_key("a.b"));
	cr_assert_not(pyro_labels_valid_key("__x"));
	cr_assert(pyro_labels_valid_value("10.0.0.1:80/x"));
	for (const char *bad = ",{}= \"\t"; *bad; bad++) {
		char v[4] = { 'a', *bad, 'b', 0 };

		cr_assert_not(pyro_labels_valid_value(v), "%s", v);
	}
	pyro_labels_sanitize("my app{1}", true, out, sizeof(out));
	cr_assert_str_eq(out, "my_app_1_");
	pyro_labels_sanitize("a,b=c", false, out, sizeof(out));
	cr_assert_str_eq(out, "a_b_c");
	pyro_labels_sanitize("", false, out, sizeof(out));
	cr_assert_str_eq(out, "_");
}

/* "SVC{comm=COMM,hostname=<this host>,pid=PID}" with the extra labels, as expected. */
static void expect_name(const struct pyro_naming *n, pid_t pid, const char *comm,
			const char *expected_fmt)
{
	char host[256] = "", hostv[256], want[PYRO_NAME_MAX], got[PYRO_NAME_MAX];

	gethostname(host, sizeof(host) - 1);
	pyro_labels_sanitize(host, false, hostv, sizeof(hostv));
	snprintf(want, sizeof(want), expected_fmt, hostv);
	cr_assert_eq(pyro_labels_profile_name(n, pid, comm, got, sizeof(got)), 0);
	cr_assert_str_eq(got, want);
}

Test(pyro_labels, profile_name_service_from_option_unit_or_comm)
{
	struct pyro_naming n = {};

	/* comm, made a valid service name and label value */
	expect_name(&n, 42, "my app", "my_app{comm=my_app,hostname=%s,pid=42}");
	/* the unit without ".service", typed either way; other unit types keep their suffix */
	n.unit = "redis-server";
	expect_name(&n, 7, "redis", "redis-server{comm=redis,hostname=%s,pid=7}");
	n.unit = "redis-server.service";
	expect_name(&n, 7, "redis", "redis-server{comm=redis,hostname=%s,pid=7}");
	n.unit = "session-3.scope";
	expect_name(&n, 7, "sh", "session-3.scope{comm=sh,hostname=%s,pid=7}");
	/* --service-name wins over both */
	n.service_name = "checkout";
	expect_name(&n, 7, "redis", "checkout{comm=redis,hostname=%s,pid=7}");
}

Test(pyro_labels, profile_name_user_labels_add_override_and_drop)
{
	const char *labels[] = { "env=prod", "pid=main", "hostname=", "zone=eu-1" };
	struct pyro_naming n = { .service_name = "svc", .labels = labels, .nlabels = 4 };
	const char *bad[] = { "noequals" };
	char buf[PYRO_NAME_MAX];

	/* pid overridden, hostname dropped by its empty value, the others added */
	cr_assert_eq(pyro_labels_profile_name(&n, 9, "app", buf, sizeof(buf)), 0);
	cr_assert_str_eq(buf, "svc{comm=app,env=prod,pid=main,zone=eu-1}");
	cr_assert_eq(pyro_labels_profile_name(&n, 9, "app", buf, 16), -ENAMETOOLONG);
	n.labels = bad;
	n.nlabels = 1;
	cr_assert_eq(pyro_labels_profile_name(&n, 9, "app", buf, sizeof(buf)), -EINVAL);
}

static void check_fails(const struct pyro_naming *n, const char *needle)
{
	char err[512] = "";

	cr_assert_eq(pyro_labels_naming_check(n, err, sizeof(err)), -EINVAL, "%s", needle);
	cr_assert(strstr(err, needle), "\"%s\" not in \"%s\"", needle, err);
}

/* "KEY=vvv...": a valid label with a value of len characters (at most 1024 are valid). */
static void long_label(char *buf, const char *key, size_t len)
{
	size_t k = strlen(key);

	memcpy(buf, key, k);
	buf[k] = '=';
	memset(buf + k + 1, 'v', len);
	buf[k + 1 + len] = '\0';
}

Test(pyro_labels, naming_check_says_what_is_wrong)
{
	const char *labels[2];
	struct pyro_naming n = { .labels = labels, .nlabels = 1 };
	char err[512], a[1100], b[1100];

	labels[0] = "env=";
	cr_assert_eq(pyro_labels_naming_check(&n, err, sizeof(err)), 0, "%s", err);
	labels[0] = "team=a-b_c.d:1/2";
	n.service_name = "a.b/c-d_e9";
	cr_assert_eq(pyro_labels_naming_check(&n, err, sizeof(err)), 0, "%s", err);
	n.service_name = "my service";
	check_fails(&n, "--service-name \"my service\" is not a Pyroscope service name");
	n.service_name = NULL;
	labels[0] = "1x=y";
	check_fails(&n, "--label \"1x=y\": a label name is letters, digits and _");
	labels[0] = "__x=y";
	check_fails(&n, "--label \"__x=y\": a label name");
	labels[0] = "service_name=y";
	check_fails(&n, "is not service_name (see --service-name)");
	labels[0] = "k=a b";
	check_fails(&n, "--label \"k=a b\": a value is printable, without spaces");
	labels[0] = "noequals";
	check_fails(&n, "--label needs KEY=VALUE, not \"noequals\"");
	/* each value is valid, together they make a name= longer than PYRO_NAME_MAX */
	long_label(a, "a", 1020);
	long_label(b, "b", 1020);
	labels[0] = a;
	cr_assert_eq(pyro_labels_naming_check(&n, err, sizeof(err)), 0, "%s", err);
	labels[1] = b;
	n.nlabels = 2;
	check_fails(&n, "the Pyroscope labels make too long a name");
}

/* Characters of name outside Pyroscope's rules, and how many of each of ,{}= it holds. */
static void shape(const char *name, int *braces, int *commas, int *equals)
{
	*braces = *commas = *equals = 0;
	for (const char *c = name; *c; c++) {
		unsigned char u = (unsigned char)*c;

		cr_assert(u > 0x20 && u < 0x7f && u != '"', "%s holds 0x%02x", name, u);
		*braces += u == '{' || u == '}';
		*commas += u == ',';
		*equals += u == '=';
	}
}

/*
 * Names a target chooses (its comm, the unit its cgroup names) made to
 * inject labels or break name='s syntax: each comes out one value, the name
 * has exactly its three labels, and both APIs' parsers read it so.
 */
Test(pyro_labels, crafted_names_inject_no_label)
{
	static const char *const crafted[] = {
		"a}{evil=1",  "x,evil=1",	    "x=1,evil=2}",	"q\"evil\"=\"1\"",
		"nl\nevil=1", "cr\revil=1\x1b[31m", "sp ace\tevil=1",	"\xff\xfe{}\x7f",
		"",	      "a}{evil=1}.service", "x,evil=1.service",
	};
	char name[PYRO_NAME_MAX], buf[PYRO_NAME_MAX], unit[400];
	struct pyro_label l[PYRO_MAX_LABELS + PYRO_PUSH_EXTRA_LABELS];
	int braces, commas, equals, n;

	for (size_t i = 0; i < sizeof(crafted) / sizeof(crafted[0]); i++) {
		struct pyro_naming nm = {};

		for (int with_unit = 0; with_unit < 2; with_unit++) {
			nm.unit = with_unit ? crafted[i] : NULL;
			cr_assert_eq(pyro_labels_profile_name(&nm, 42, crafted[i], name,
							      sizeof(name)),
				     0, "%s", crafted[i]);
			shape(name, &braces, &commas, &equals);
			cr_assert_eq(braces, 2, "%s", name);
			cr_assert_eq(commas, 2, "%s", name);
			cr_assert_eq(equals, 3, "%s", name);
			cr_assert(strchr(name, '{') < strstr(name, "comm="), "%s", name);
			cr_assert_eq(name[strlen(name) - 1], '}', "%s", name);
			cr_assert(pyro_labels_valid_name(name), "%s", name);
			n = pyro_push_labels(name, l, sizeof(l) / sizeof(l[0]), buf, sizeof(buf));
			cr_assert_eq(n, 3 + PYRO_PUSH_EXTRA_LABELS, "%s", name);
		}
	}
	/* a unit longer than a service name may be: cut, still one valid service */
	memset(unit, 'u', sizeof(unit));
	snprintf(unit + 300, sizeof(unit) - 300, "}{x=1.service");
	{
		struct pyro_naming nm = { .unit = unit };

		cr_assert_eq(pyro_labels_profile_name(&nm, 42, "c", name, sizeof(name)), 0);
		cr_assert(pyro_labels_valid_name(name), "%s", name);
	}
}

/* pyro_labels_valid_name(): what pyro_labels_build_name() writes, and what it never would. */
Test(pyro_labels, valid_name_is_what_build_name_writes)
{
	static const char *const good[] = { "svc{a=b,c=d}", "svc{}", "svc",
					    "a.b/c-d{x=10.0.0.1:80/y}" };
	static const char *const bad[] = {
		"",
		"svc{a=b",
		"svc{a=b}x",
		"svc{a=b{c=d}}",
		"svc{a=b=c}",
		"svc{a=b,a=c}",
		"svc{service_name=x}",
		"svc{a=}",
		"svc{=b}",
		"s c{a=b}",
		"svc{a=\"b\"}",
		"svc{a=b c}",
		"svc{a=b\n,c=d}",
		"svc{,a=b}",
		"svc{__x=1}",
		"{a=b}",
		"svc}",
	};
	char many[PYRO_NAME_MAX];
	int off;

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		cr_assert(pyro_labels_valid_name(good[i]), "%s", good[i]);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_not(pyro_labels_valid_name(bad[i]), "%s", bad[i]);
	/* PYRO_MAX_LABELS labels, then one more */
	off = snprintf(many, sizeof(many), "svc{");
	for (int i = 0; i < PYRO_MAX_LABELS; i++)
		off += snprintf(many + off, sizeof(many) - off, "%sk%d=v", i ? "," : "", i);
	snprintf(many + off, sizeof(many) - off, "}");
	cr_assert(pyro_labels_valid_name(many), "%s", many);
	snprintf(many + off, sizeof(many) - off, ",k99=v}");
	cr_assert_not(pyro_labels_valid_name(many), "%s", many);
}
