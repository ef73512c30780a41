/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * One holder serves the others. A process is sampled by one heapbpf at a
 * time (its lock, guard.h); another run that wants a window of it asks the
 * holder instead, on the holder's socket DIR/PID.sock (DIR: guard_dir(),
 * root's, 0700; the socket 0600; the peer's credentials checked both
 * ways). It passes a file of its own; the holder writes the process's
 * events from then on into it as a recording (recording.h), the window the
 * asker would have had alone, and says when it ends: at the duration asked
 * for, when the asker hangs up, or when the process or the holder's run
 * ends. The asker makes its outputs from that recording as `heapbpf report`
 * does. A request changes nothing of the holder's own windows or triggers.
 */
#ifndef __HEAPBPF_SERVE_H
#define __HEAPBPF_SERVE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct serve;

/* Listens on dir/PID.sock (this process's pid). 0, or negative errno. */
int serve__open(const char *dir, struct serve **out);
/* Stops listening and removes the socket; takes NULL. */
void serve__free(struct serve *sv);
/* The listening descriptor, readable when an asker connects. */
int serve__fd(const struct serve *sv);

/* One request. */
struct serve_req {
	int conn;  /* the asker's connection: serve_reply; readable or hung up: it ended */
	int out;   /* the asker's file the recording goes into (ours to close) */
	pid_t pid; /* the process asked for */
	uint64_t duration_ns; /* 0: until the asker hangs up */
};

/*
 * Accepts one asker and reads its request: 0 with req filled, or negative
 * errno when there is none to serve (refused: a peer that is not root, a
 * malformed request; what could be said to the asker was said).
 */
int serve__accept(struct serve *sv, struct serve_req *req);
/* Tells the asker how its request ended (rc 0, or negative errno and msg) and closes conn. */
void serve_reply(int conn, int rc, const char *msg);

/*
 * The asker's side: pid's window from the run holder (its pid), of
 * duration_ns (0: until stop_fd is readable, a signalfd of the stop
 * signals), written as a recording into out. Waits for the holder's answer;
 * stop_fd readable ends the window early. 0, or negative errno with a
 * sentence in err.
 */
int serve_ask(const char *dir, pid_t holder, pid_t pid, uint64_t duration_ns, int out, int stop_fd,
	      char *err, size_t errlen);
/*
 * serve_ask in two steps, for an asker with a loop of its own: the request
 * sent, its connection returned (negative errno with a sentence in err);
 * shutdown(conn, SHUT_WR) ends the window early, and conn is readable once
 * the holder has ended it. Then serve_answer: the holder's answer (blocks
 * until it comes), 0 or negative errno with its sentence; closes conn.
 * With duration_ns 0 the holder flushes the recording every second, with
 * the drops so far: a window that can be read as it grows.
 */
int serve_send(const char *dir, pid_t holder, pid_t pid, uint64_t duration_ns, int out, char *err,
	       size_t errlen);
int serve_answer(int conn, pid_t holder, char *err, size_t errlen);

#endif /* __HEAPBPF_SERVE_H */
