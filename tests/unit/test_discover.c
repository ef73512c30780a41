// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The agent's discovery: how old a process it names is (from its exec when
 * one was heard of, for a process that forked long ago may exec now), and
 * the process connector's datagrams parsed, crafted ones among them.
 */
#include <criterion/criterion.h>
#include <linux/cn_proc.h>
#include <linux/connector.h>
#include <linux/netlink.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "targets/discover.h"

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The entry for pid among those due, or NULL. */
static const struct discover_due *due_of(const struct discover_due *v, size_t n, pid_t pid)
{
	for (size_t i = 0; i < n; i++) {
		if (v[i].pid == pid)
			return &v[i];
	}
	return NULL;
}

Test(discover, a_heard_exec_is_young_though_the_process_is_old)
{
	const size_t cap = 1 << 16;
	struct discover_due *v = calloc(cap, sizeof(*v));
	struct discover *d = NULL;
	const struct discover_due *init;
	char err[256];
	double before, after;
	size_t n;

	cr_assert_not_null(v);
	cr_assert_eq(discover__new(30, &d, err, sizeof(err)), 0, "%s", err);
	/* pid 1 started before this test: only an exec heard of now makes it this young */
	before = mono_s();
	discover__again(d, 1);
	n = discover__due(d, v, cap);
	after = mono_s();
	init = due_of(v, n, 1);
	cr_assert_not_null(init, "pid 1 was not named");
	cr_assert_gt(init->start, 0);
	cr_assert(init->age >= 0 && init->age <= after - before, "age %.3f s, %.3f s elapsed",
		  init->age, after - before);
	discover__free(d);
	free(v);
}

Test(discover, a_process_found_by_the_scan_is_as_old_as_it_runs)
{
	const size_t cap = 1 << 16;
	struct discover_due *v = calloc(cap, sizeof(*v));
	struct discover *d = NULL;
	const struct discover_due *init = NULL;
	char err[256];
	double before;
	size_t n;

	cr_assert_not_null(v);
	cr_assert_eq(discover__new(30, &d, err, sizeof(err)), 0, "%s", err);
	before = mono_s();
	/* the scan's finds are due from the call after it */
	for (int i = 0; i < 2 && !init; i++) {
		n = discover__due(d, v, cap);
		init = due_of(v, n, 1);
	}
	cr_assert_not_null(init, "pid 1 was not named by the scan");
	/* older than this test's run: it started before the scan */
	cr_assert(init->age > mono_s() - before, "age %.3f s", init->age);
	discover__free(d);
	free(v);
}

/* ---- the connector's datagrams ---- */

static char dgram[4096] __attribute__((aligned(NLMSG_ALIGNTO)));

/*
 * One message at off: what (an event), pid, cn_len (the connector's payload
 * length, -1: the event's size) and nl_len (the netlink length, -1: what it
 * holds); the offset of the next.
 */
static size_t put(size_t off, unsigned int what, pid_t pid, int cn_len, int nl_len)
{
	struct proc_event ev = { .what = what };
	struct cn_msg cn = { .id = { .idx = CN_IDX_PROC, .val = CN_VAL_PROC } };
	struct nlmsghdr nh = { .nlmsg_type = NLMSG_DONE };

	ev.event_data.exec.process_pid = pid;
	ev.event_data.exec.process_tgid = pid;
	cn.len = cn_len < 0 ? sizeof(ev) : (unsigned int)cn_len;
	nh.nlmsg_len = nl_len < 0 ? NLMSG_LENGTH(sizeof(cn) + sizeof(ev)) : (unsigned int)nl_len;
	memcpy(dgram + off, &nh, sizeof(nh));
	memcpy(dgram + off + NLMSG_HDRLEN, &cn, sizeof(cn));
	memcpy(dgram + off + NLMSG_LENGTH(sizeof(cn)), &ev, sizeof(ev));
	return off + NLMSG_ALIGN(NLMSG_LENGTH(sizeof(cn) + sizeof(ev)));
}

static size_t parse(size_t len, pid_t *pids)
{
	return discover__parse(dgram, (ssize_t)len, pids, 8);
}

Test(discover_parse, exec_events_are_named_others_skipped)
{
	pid_t pids[8];
	size_t end = put(0, PROC_EVENT_EXEC, 101, -1, -1);

	end = put(end, PROC_EVENT_FORK, 102, -1, -1);
	end = put(end, PROC_EVENT_EXEC, 103, -1, -1);
	cr_assert_eq(parse(end, pids), 2);
	cr_assert_eq(pids[0], 101);
	cr_assert_eq(pids[1], 103);
}

Test(discover_parse, a_message_longer_than_the_datagram_ends_the_parse)
{
	pid_t pids[8];
	size_t end = put(0, PROC_EVENT_EXEC, 101, -1, -1);

	/* the second claims more bytes than were received */
	end = put(end, PROC_EVENT_EXEC, 102, -1, 4000);
	cr_assert_eq(parse(end, pids), 1);
	cr_assert_eq(pids[0], 101);
	/* a datagram cut inside its first message */
	cr_assert_eq(parse(NLMSG_HDRLEN + 4, pids), 0);
	cr_assert_eq(parse(3, pids), 0);
	cr_assert_eq(discover__parse(dgram, -1, pids, 8), 0);
}

Test(discover_parse, a_connector_length_past_its_message_is_skipped)
{
	pid_t pids[8];
	size_t end = put(0, PROC_EVENT_EXEC, 101, 4000, -1);

	end = put(end, PROC_EVENT_EXEC, 102, -1, -1);
	cr_assert_eq(parse(end, pids), 1);
	cr_assert_eq(pids[0], 102);
}

Test(discover_parse, an_event_too_short_for_an_exec_is_skipped)
{
	pid_t pids[8];
	/* the event's header only: no pid in it */
	size_t end = put(0, PROC_EVENT_EXEC, 101, 8, -1);

	cr_assert_eq(parse(end, pids), 0);
	/* a netlink message too short for the connector's header */
	put(0, PROC_EVENT_EXEC, 101, -1, NLMSG_HDRLEN + 4);
	end = put(NLMSG_ALIGN(NLMSG_HDRLEN + 4), PROC_EVENT_EXEC, 103, -1, -1);
	cr_assert_eq(parse(end, pids), 1);
	cr_assert_eq(pids[0], 103);
}

Test(discover_parse, an_unaligned_last_message_ends_within_the_datagram)
{
	pid_t pids[8];
	const unsigned int len =
		NLMSG_LENGTH(sizeof(struct cn_msg) + sizeof(struct proc_event)) - 2;

	/* its padding would pass the datagram's end: the remainder is never negative */
	put(0, PROC_EVENT_EXEC, 101, (int)sizeof(struct proc_event) - 2, (int)len);
	cr_assert_eq(parse(len, pids), 1);
	cr_assert_eq(pids[0], 101);
}

Test(discover_parse, another_connector_and_at_most_max)
{
	pid_t pids[8];
	size_t end = 0;
	struct cn_msg cn;

	for (int i = 0; i < 10; i++)
		end = put(end, PROC_EVENT_EXEC, 200 + i, -1, -1);
	cr_assert_eq(discover__parse(dgram, (ssize_t)end, pids, 3), 3);
	cr_assert_eq(pids[2], 202);
	/* the first message from another connector index */
	memcpy(&cn, dgram + NLMSG_HDRLEN, sizeof(cn));
	cn.id.idx = CN_IDX_PROC + 1;
	memcpy(dgram + NLMSG_HDRLEN, &cn, sizeof(cn));
	cr_assert_eq(parse(end, pids), 8);
	cr_assert_eq(pids[0], 201);
}
