// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Pyroscope's push API without a server: the URL, the labels made of a
 * spooled name=, the PushRequest decoded again with the same .proto
 * (protobuf-c), Connect error bodies and what each answer means.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "push/v1/push.pb-c.h"
#include "export/pyro_push.h"

TestSuite(pyro_push);

Test(pyro_push, url_from_the_ingest_url)
{
	char out[128];

	cr_assert_eq(pyro_push_url("https://p.example:4040/ingest", out, sizeof(out)), 0);
	cr_assert_str_eq(out, "https://p.example:4040/push.v1.PusherService/Push");
	cr_assert_eq(pyro_push_url("http://127.0.0.1/prefix/ingest", out, sizeof(out)), 0);
	cr_assert_str_eq(out, "http://127.0.0.1/prefix/push.v1.PusherService/Push");
	cr_assert_eq(pyro_push_url("http://h/other", out, sizeof(out)), -EINVAL);
	cr_assert_eq(pyro_push_url("http://h/ingest", out, 20), -ENAMETOOLONG);
}

Test(pyro_push, labels_from_a_spooled_name_sorted_with_memory_and_delta)
{
	const char *name = "checkout{comm=alloc,env=prod,hostname=h1,pid=42}";
	const char *want[][2] = { { "__delta__", "false" },	 { "__name__", "memory" },
				  { "comm", "alloc" },		 { "env", "prod" },
				  { "hostname", "h1" },		 { "pid", "42" },
				  { "service_name", "checkout" } };
	struct pyro_label l[40];
	char buf[256];
	int n = pyro_push_labels(name, l, 40, buf, sizeof(buf));

	cr_assert_eq(n, 7);
	for (int i = 0; i < n; i++) {
		cr_assert_str_eq(l[i].key, want[i][0]);
		cr_assert_str_eq(l[i].value, want[i][1]);
	}
	/* a name without labels, and capital letters sorting before "_" as bytes do */
	cr_assert_eq(pyro_push_labels("svc", l, 40, buf, sizeof(buf)), 3);
	cr_assert_str_eq(l[2].value, "svc");
	cr_assert_eq(pyro_push_labels("svc{Zone=a}", l, 40, buf, sizeof(buf)), 4);
	cr_assert_str_eq(l[0].key, "Zone");
}

Test(pyro_push, labels_refuse_what_pyroscope_would)
{
	const char *bad[] = {
		"",		       /* no service */
		"svc{a=1",	       /* unterminated */
		"s vc{a=1}",	       /* service charset */
		"svc{a=1,a=2}",	       /* duplicate */
		"svc{__name__=cpu}",   /* reserved, and would clash */
		"svc{service_name=x}", /* clashes with the service */
		"svc{1a=x}",	       /* label name charset */
		"svc{a-b=x}",	       /* label name charset */
		"svc{a=}",	       /* empty value */
		"svc{a}",	       /* no value */
		"svc{a=1}}",	       /* value with a brace */
	};
	struct pyro_label l[40];
	char buf[256], many[2048];
	int off;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_eq(pyro_push_labels(bad[i], l, 40, buf, sizeof(buf)), -EINVAL, "%s",
			     bad[i]);
	/* 27 labels and the three of push: Pyroscope's limit of 30; one more is refused */
	off = snprintf(many, sizeof(many), "svc{");
	for (int i = 0; i < 27; i++)
		off += snprintf(many + off, sizeof(many) - off, "%sl%02d=v", i ? "," : "", i);
	snprintf(many + off, sizeof(many) - off, "}");
	cr_assert_eq(pyro_push_labels(many, l, 40, many + 1024, 1024), 30);
	snprintf(many + off, sizeof(many) - off, ",l99=v}");
	cr_assert_eq(pyro_push_labels(many, l, 40, many + 1024, 1024), -EINVAL);
	/* a buffer too small for the name */
	cr_assert_eq(pyro_push_labels("svc{a=1}", l, 40, buf, 4), -EINVAL);
}

/*
 * The wire bytes, written out by hand from upstream's field numbers
 * (push.v1.PushRequest.series = 1; RawProfileSeries.labels = 1, samples = 2;
 * types.v1.LabelPair.name = 1, value = 2; RawSample.raw_profile = 1, ID = 2):
 * a .proto of ours with a wrong number would still decode with itself.
 */
Test(pyro_push, request_bytes_as_upstream_numbers_them)
{
	const struct pyro_label l[] = { { .key = "a", .value = "b" } };
	const uint8_t profile[] = { 0x01, 0x02 };
	const uint8_t want[] = {
		0x0a, 0x11,			   /* series (1), 17 bytes */
		0x0a, 0x06,			   /*   labels (1), 6 bytes */
		0x0a, 0x01, 'a',  0x12, 0x01, 'b', /*     name (1), value (2) */
		0x12, 0x07,			   /*   samples (2), 7 bytes */
		0x0a, 0x02, 0x01, 0x02,		   /*     raw_profile (1) */
		0x12, 0x01, 'x',		   /*     ID (2) */
	};
	uint8_t *req = NULL;
	size_t len = 0;

	cr_assert_eq(pyro_push_encode(l, 1, profile, sizeof(profile), "x", &req, &len), 0);
	cr_assert_eq(len, sizeof(want));
	cr_assert_eq(memcmp(req, want, len), 0);
	free(req);
}

Test(pyro_push, request_decodes_with_the_same_proto)
{
	const unsigned char profile[] = { 0x1f, 0x8b, 8, 0, 1, 2, 3, 0, 0xff };
	char id[37];
	uint8_t *req = NULL;
	size_t len = 0;
	Push__V1__PushRequest *r;
	Push__V1__RawProfileSeries *s;

	pyro_push_uuid(id);
	cr_assert_eq(strlen(id), 36);
	cr_assert_eq(id[14], '4', "%s", id);
	cr_assert(strchr("89ab", id[19]), "%s", id);
	cr_assert_eq(pyro_push_request("svc{pid=7}", profile, sizeof(profile), id, &req, &len), 0);
	r = push__v1__push_request__unpack(NULL, len, req);
	cr_assert_not_null(r);
	cr_assert_eq(r->n_series, 1);
	s = r->series[0];
	cr_assert_eq(s->n_labels, 4);
	cr_assert_str_eq(s->labels[0]->name, "__delta__");
	cr_assert_str_eq(s->labels[0]->value, "false");
	cr_assert_str_eq(s->labels[1]->name, "__name__");
	cr_assert_str_eq(s->labels[1]->value, "memory");
	cr_assert_str_eq(s->labels[2]->name, "pid");
	cr_assert_str_eq(s->labels[3]->name, "service_name");
	cr_assert_str_eq(s->labels[3]->value, "svc");
	cr_assert_eq(s->n_samples, 1);
	cr_assert_str_eq(s->samples[0]->id, id);
	cr_assert_eq(s->samples[0]->raw_profile.len, sizeof(profile));
	cr_assert_arr_eq(s->samples[0]->raw_profile.data, profile, sizeof(profile));
	push__v1__push_request__free_unpacked(r, NULL);
	free(req);
	/* a name that makes no labels makes no request */
	cr_assert_eq(pyro_push_request("svc{a=1,a=2}", profile, sizeof(profile), id, &req, &len),
		     -EINVAL);
	cr_assert_null(req);
}

Test(pyro_push, connect_error_bodies)
{
	char code[32], msg[64];

	cr_assert_eq(pyro_push_connect_error("{\"code\":\"unavailable\",\"message\":\"try later\"}",
					     code, sizeof(code), msg, sizeof(msg)),
		     0);
	cr_assert_str_eq(code, "unavailable");
	cr_assert_str_eq(msg, "try later");
	/* order, whitespace, escapes, details of any shape */
	cr_assert_eq(
		pyro_push_connect_error(" { \"details\": [{\"type\":\"x\",\"value\":\"{\\\"\"}], "
					"\"message\" : \"bad \\\"label\\\" \\u00e9\", \"code\": "
					"\"invalid_argument\" }",
					code, sizeof(code), msg, sizeof(msg)),
		0);
	cr_assert_str_eq(code, "invalid_argument");
	cr_assert_str_eq(msg, "bad \"label\" ?");
	/* cut short after the code (the answer's first bytes only): the code still counts */
	cr_assert_eq(
		pyro_push_connect_error("{\"code\":\"resource_exhausted\",\"message\":\"rate lim",
					code, sizeof(code), msg, sizeof(msg)),
		0);
	cr_assert_str_eq(code, "resource_exhausted");
	/* not Connect */
	cr_assert_eq(pyro_push_connect_error("<html>503</html>", code, sizeof(code), msg,
					     sizeof(msg)),
		     -EINVAL);
	cr_assert_str_eq(code, "");
	cr_assert_eq(pyro_push_connect_error("{\"error\":\"x\"}", code, sizeof(code), msg,
					     sizeof(msg)),
		     -EINVAL);
	cr_assert_eq(pyro_push_connect_error("", code, sizeof(code), msg, sizeof(msg)), -EINVAL);
	cr_assert_eq(pyro_push_connect_error("{\"code\":\"unterm", code, sizeof(code), msg,
					     sizeof(msg)),
		     -EINVAL);
}

/* Connect's codes are words to show; anything else a body calls a code is not. */
Test(pyro_push, connect_codes_are_known_words)
{
	cr_assert(pyro_push_connect_code("unauthenticated"));
	cr_assert(pyro_push_connect_code("invalid_argument"));
	cr_assert(pyro_push_connect_code("data_loss"));
	cr_assert_not(pyro_push_connect_code(""));
	cr_assert_not(pyro_push_connect_code(NULL));
	cr_assert_not(pyro_push_connect_code("Unauthenticated"));
	cr_assert_not(pyro_push_connect_code("tok-s3cret"));
}

Test(pyro_push, what_each_answer_means)
{
	cr_assert_eq(pyro_push_classify(200, ""), PUSH_SENT);
	cr_assert_eq(pyro_push_classify(503, "unavailable"), PUSH_RETRY);
	cr_assert_eq(pyro_push_classify(429, "resource_exhausted"), PUSH_RETRY);
	cr_assert_eq(pyro_push_classify(504, "deadline_exceeded"), PUSH_RETRY);
	cr_assert_eq(pyro_push_classify(500, "internal"), PUSH_RETRY);
	cr_assert_eq(pyro_push_classify(400, "invalid_argument"), PUSH_REJECTED);
	cr_assert_eq(pyro_push_classify(400, "failed_precondition"), PUSH_REJECTED);
	cr_assert_eq(pyro_push_classify(409, "already_exists"), PUSH_REJECTED);
	cr_assert_eq(pyro_push_classify(401, "unauthenticated"), PUSH_AUTH);
	cr_assert_eq(pyro_push_classify(403, "permission_denied"), PUSH_AUTH);
	/* the route is missing: /ingest instead */
	cr_assert_eq(pyro_push_classify(404, ""), PUSH_NOT_SERVED);
	cr_assert_eq(pyro_push_classify(404, "not_found"), PUSH_NOT_SERVED);
	/* Connect's unimplemented: HTTP 501 today (404 in the protocol's first version) */
	cr_assert_eq(pyro_push_classify(501, "unimplemented"), PUSH_NOT_SERVED);
	/* no Connect body: the HTTP status alone, as for /ingest */
	cr_assert_eq(pyro_push_classify(502, ""), PUSH_RETRY);
	cr_assert_eq(pyro_push_classify(429, ""), PUSH_RETRY);
	cr_assert_eq(pyro_push_classify(408, ""), PUSH_RETRY);
	cr_assert_eq(pyro_push_classify(0, ""), PUSH_RETRY);
	cr_assert_eq(pyro_push_classify(401, ""), PUSH_AUTH);
	cr_assert_eq(pyro_push_classify(413, ""), PUSH_REJECTED);
	cr_assert_eq(pyro_push_classify(415, ""), PUSH_REJECTED);
}
