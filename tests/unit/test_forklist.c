// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The fork list (user/sampling/forks.c): forks__prune leaves out the
 * children that exited or exec'ed, keeps the living, and forks__restore
 * still counts the ones left out, as gone.
 */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>
#include <criterion/criterion.h>
#include "sampling/forks.h"

/* A child that waits to be killed. */
static pid_t sleeper(void)
{
	pid_t pid = fork();

	cr_assert_geq(pid, 0);
	if (pid == 0) {
		for (;;)
			pause();
	}
	return pid;
}

static void end(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

Test(forklist, prune_keeps_the_living_and_counts_the_rest_gone)
{
	struct forks f = { 0 };
	struct forks_result r;
	pid_t kids[6];

	for (int i = 0; i < 6; i++) {
		kids[i] = sleeper();
		cr_assert_eq(forks__add(&f, kids[i]), 1);
	}
	/* two exit (reaped: their pids are free), one execs */
	end(kids[0]);
	end(kids[3]);
	forks__exec(&f, kids[5]);
	forks__prune(&f);
	cr_assert_eq(f.n, 3, "%zu kept", f.n);
	cr_assert_eq(f.pruned, 3);
	for (size_t i = 0; i < f.n; i++)
		cr_assert(f.v[i].pid == kids[1] || f.v[i].pid == kids[2] || f.v[i].pid == kids[4],
			  "pid %d kept", f.v[i].pid);
	/* nothing changed since: a second prune keeps the same */
	forks__prune(&f);
	cr_assert_eq(f.n, 3);
	cr_assert_eq(f.pruned, 3);

	/*
	 * a restore where no child maps the object: the living are gone too
	 * (-ESRCH), and the pruned are counted among the children seen
	 */
	forks__restore(&f, 0x1000, 0, "/nonexistent/libjemalloc.so.2", &r);
	cr_assert_eq(r.forked, 6);
	cr_assert_eq(r.gone, 6);
	cr_assert_eq(r.restored, 0);
	cr_assert_eq(r.failed, 0);
	for (int i = 0; i < 6; i++) {
		if (i != 0 && i != 3)
			end(kids[i]);
	}
	forks__free(&f);
}

static pid_t thread_tid;
static int thread_go = 1;

static void *spin(void *arg)
{
	(void)arg;
	__atomic_store_n(&thread_tid, gettid(), __ATOMIC_SEQ_CST);
	while (__atomic_load_n(&thread_go, __ATOMIC_SEQ_CST))
		usleep(1000);
	return NULL;
}

/* A new thread of a tracked process is not listed, but counted; a task gone is neither. */
Test(forklist, a_thread_is_counted_not_listed)
{
	struct forks f = { 0 };
	pthread_t th;

	cr_assert_eq(pthread_create(&th, NULL, spin, NULL), 0);
	while (!__atomic_load_n(&thread_tid, __ATOMIC_SEQ_CST))
		usleep(1000);
	cr_assert_eq(forks__add(&f, thread_tid), 0);
	cr_assert_eq(f.threads, 1);
	cr_assert_eq(f.n, 0);
	__atomic_store_n(&thread_go, 0, __ATOMIC_SEQ_CST);
	pthread_join(th, NULL);
	cr_assert_eq(forks__add(&f, 0x3fffffff), 0, "a task that does not exist");
	cr_assert_eq(f.n, 0);
	forks__free(&f);
}
