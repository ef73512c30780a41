// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The one write heapbpf makes into a target (user/sampling/toggle.c) after
 * the target exec'd without heapbpf hearing it (its exec event lost): no
 * byte goes into the new image at the old image's address, the toggle says
 * -ESTALE, and the new image's own prof_active stays as the new image set it.
 * With ASLR off the new image's flag sits at the very same address: only the
 * image's identity (auxv AT_RANDOM) tells the two apart.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "harness.h"
#include "jemalloc/target.h"
#include "sampling/toggle.h"

#define SERVICE	  "examples/alloc-service-static"
#define IDLE_CONF "prof:true,prof_active:false"

static const char *const svc_args[] = { "--threads", "1", "--rate", "200", NULL };

static void start(struct svc *s, bool no_aslr)
{
	struct svc_opts o = { .malloc_conf = IDLE_CONF, .no_aslr = no_aslr };

	cr_assert_eq(svc_start_opts(s, hb_path(SERVICE), &o, svc_args), 0);
}

static struct jemalloc_target *find(pid_t pid)
{
	struct jemalloc_target *t = NULL;
	char err[1024];

	cr_assert_eq(jemalloc_target__find(pid, NULL, &t, err, sizeof(err)), 0, "%s", err);
	return t;
}

/* The service becomes a new image of itself (same pid), which then switches its own prof_active on. */
static void exec_and_activate(struct svc *s)
{
	char cmd[PATH_MAX + 64], reply[64], want[32];

	snprintf(cmd, sizeof(cmd), "exec %s --threads 1 --rate 200 --control", hb_path(SERVICE));
	cr_assert_eq(svc_cmd(s, cmd, reply, sizeof(reply), 10000), 0);
	cr_assert_str_eq(reply, "execing");
	/* the new image's first words, once its threads run */
	cr_assert_eq(svc_read(s, reply, sizeof(reply), 10000), 0);
	snprintf(want, sizeof(want), "ready %d", s->pid);
	cr_assert_str_eq(reply, want);
	cr_assert_eq(svc_cmd(s, "active 1", reply, sizeof(reply), 10000), 0);
	cr_assert_str_eq(reply, "active 1");
}

/* The new image's prof_active, as its own mallctl says, and as its byte says. */
static void new_flag_is_on(struct svc *s)
{
	char reply[64];
	uint64_t addr;
	uint8_t b = 0xff;

	cr_assert_eq(svc_cmd(s, "active", reply, sizeof(reply), 10000), 0);
	cr_assert_str_eq(reply, "active 1", "the new image's prof_active was written");
	cr_assert_eq(hb_sym_addr(s->pid, hb_path(SERVICE), "je_prof_active_state", &addr), 0);
	cr_assert_eq(hb_peek(s->pid, addr, &b, 1), 0);
	cr_assert_eq(b, 1);
}

/* Switched on in the old image, the exec unheard, then the restore: nothing written. */
static void restore_after_exec(bool no_aslr)
{
	struct jemalloc_target *t;
	struct prof_toggle tg;
	struct svc s;
	uint64_t new_addr;
	uint8_t b = 0xff;

	start(&s, no_aslr);
	t = find(s.pid);
	cr_assert_eq(toggle__on(&tg, t, NULL, NULL), 0);
	cr_assert(tg.changed);
	cr_assert_eq(hb_peek(s.pid, tg.addr, &b, 1), 0);
	cr_assert_eq(b, 1);
	exec_and_activate(&s);
	cr_assert_eq(hb_sym_addr(s.pid, hb_path(SERVICE), "je_prof_active_state", &new_addr), 0);
	/* the hard case: the new image's flag at the old one's address */
	if (no_aslr)
		cr_assert_eq(new_addr, tg.addr, "ASLR was not off");
	cr_assert_eq(toggle__restore(&tg), -ESTALE);
	cr_assert_not(tg.changed, "nothing is owed to an image that is gone");
	cr_assert_eq(toggle__restore(&tg), 0);
	new_flag_is_on(&s);
	jemalloc_target__free(t);
	cr_assert_eq(svc_stop(&s), 0);
}

Test(toggle, no_restore_write_into_the_image_a_target_execd_into)
{
	restore_after_exec(false);
}

Test(toggle, no_restore_write_after_an_exec_with_aslr_off)
{
	restore_after_exec(true);
}

/* Found, then exec'd before its flag was switched on: nothing written at all. */
Test(toggle, no_switch_on_in_an_image_found_before_an_exec)
{
	struct jemalloc_target *t;
	struct prof_toggle tg;
	char reply[64];
	struct svc s;

	start(&s, true);
	t = find(s.pid);
	exec_and_activate(&s);
	/* off again, so that a switch-on would write (a flag found on is left alone) */
	cr_assert_eq(svc_cmd(&s, "active 0", reply, sizeof(reply), 10000), 0);
	cr_assert_str_eq(reply, "active 0");
	cr_assert_eq(toggle__on(&tg, t, NULL, NULL), -ESTALE);
	cr_assert_not(tg.changed);
	cr_assert_eq(toggle__restore(&tg), 0);
	cr_assert_eq(svc_cmd(&s, "active", reply, sizeof(reply), 10000), 0);
	cr_assert_str_eq(reply, "active 0", "prof_active was switched on in the new image");
	jemalloc_target__free(t);
	cr_assert_eq(svc_stop(&s), 0);
}
