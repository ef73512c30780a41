// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "util/errmsg.h"
#include "sampling/serve.h"

#define REQUEST_MAGIC "heapbpf-serve 1"

struct serve {
	int fd;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
};

static int socket_path(const char *dir, pid_t pid, struct sockaddr_un *sa)
{
	int n;

	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	n = snprintf(sa->sun_path, sizeof(sa->sun_path), "%s/%d.sock", dir, pid);
	return n < 0 || (size_t)n >= sizeof(sa->sun_path) ? -ENAMETOOLONG : 0;
}

int serve__open(const char *dir, struct serve **out)
{
	struct serve *sv = calloc(1, sizeof(*sv));
	struct sockaddr_un sa;
	mode_t old;
	int rc;

	if (!sv)
		return -ENOMEM;
	rc = socket_path(dir, getpid(), &sa);
	sv->fd = rc ? -1 : socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (!rc && sv->fd < 0)
		rc = -errno;
	if (rc) {
		free(sv);
		return rc;
	}
	snprintf(sv->path, sizeof(sv->path), "%s", sa.sun_path);
	/* a socket an earlier process of this pid left; then root's alone, from its creation */
	unlink(sv->path);
	old = umask(0177);
	rc = bind(sv->fd, (struct sockaddr *)&sa, sizeof(sa)) ? -errno : 0;
	umask(old);
	rc = rc ?: listen(sv->fd, 8) ? -errno : 0;
	if (rc) {
		close(sv->fd);
		free(sv);
		return rc;
	}
	*out = sv;
	return 0;
}

void serve__free(struct serve *sv)
{
	if (!sv)
		return;
	unlink(sv->path);
	close(sv->fd);
	free(sv);
}

int serve__fd(const struct serve *sv)
{
	return sv->fd;
}

/* The peer's credentials; true when it is root or this process's own user. */
static bool trusted_peer(int conn, pid_t want)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);

	if (getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cr, &len))
		return false;
	return (cr.uid == 0 || cr.uid == geteuid()) && (!want || cr.pid == want);
}

void serve_reply(int conn, int rc, const char *msg)
{
	char buf[1024];
	int n = snprintf(buf, sizeof(buf), "rc=%d %s", rc, msg ? msg : "");

	if (n > 0)
		send(conn, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1,
		     MSG_NOSIGNAL);
	close(conn);
}

/* The request and the descriptor that comes with it, within a second of the connection. */
static int read_request(int conn, struct serve_req *req)
{
	char buf[256], ctl[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) - 1 };
	struct msghdr mh = {
		.msg_iov = &iov,
		.msg_iovlen = 1,
		.msg_control = ctl,
		.msg_controllen = sizeof(ctl),
	};
	/* an asker sends its request as it connects: a root process that does not is cut off */
	struct timeval tv = { .tv_sec = 1 };
	unsigned long long dur;
	struct cmsghdr *c;
	ssize_t n;
	int pid;

	setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	n = recvmsg(conn, &mh, MSG_CMSG_CLOEXEC);
	if (n <= 0)
		return n < 0 ? -errno : -EPROTO;
	buf[n] = '\0';
	c = CMSG_FIRSTHDR(&mh);
	if (!c || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS ||
	    c->cmsg_len != CMSG_LEN(sizeof(int)))
		return -EPROTO;
	memcpy(&req->out, CMSG_DATA(c), sizeof(int));
	if (sscanf(buf, REQUEST_MAGIC " pid=%d duration_ns=%llu", &pid, &dur) != 2 || pid <= 0) {
		close(req->out);
		return -EPROTO;
	}
	req->pid = pid;
	req->duration_ns = dur;
	return 0;
}

int serve__accept(struct serve *sv, struct serve_req *req)
{
	int conn = accept4(sv->fd, NULL, NULL, SOCK_CLOEXEC), rc;

	memset(req, 0, sizeof(*req));
	req->out = -1;
	if (conn < 0)
		return -errno;
	if (!trusted_peer(conn, 0)) {
		serve_reply(conn, -EPERM, "refused: only root may ask heapbpf for a window");
		return -EPERM;
	}
	rc = read_request(conn, req);
	if (rc) {
		serve_reply(conn, rc, "refused: not a heapbpf request");
		return rc;
	}
	req->conn = conn;
	return 0;
}

/* The holder's answer on conn, once it comes: its rc, and its sentence in err. */
static int answer(int conn, pid_t holder, char *err, size_t errlen)
{
	char buf[1024];
	ssize_t n = recv(conn, buf, sizeof(buf) - 1, 0);
	int rc, at = 0;

	if (n <= 0)
		return hb_fail(err, errlen, -EPIPE,
			       "heapbpf pid %d, which holds the process, ended before it answered",
			       holder);
	buf[n] = '\0';
	if (sscanf(buf, "rc=%d %n", &rc, &at) != 1)
		return hb_fail(err, errlen, -EPROTO, "heapbpf pid %d answered nonsense", holder);
	return rc ? hb_fail(err, errlen, rc, "heapbpf pid %d, which holds the process: %s", holder,
			    buf + at)
		  : 0;
}

int serve_send(const char *dir, pid_t holder, pid_t pid, uint64_t duration_ns, int out, char *err,
	       size_t errlen)
{
	char buf[128], ctl[CMSG_SPACE(sizeof(int))] = { 0 };
	struct iovec iov = { .iov_base = buf };
	struct msghdr mh = {
		.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl)
	};
	struct cmsghdr *c;
	struct sockaddr_un sa;
	int conn, rc = socket_path(dir, holder, &sa);

	if (rc)
		return hb_fail(err, errlen, rc, "%s is too long a directory", dir);
	conn = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (conn < 0 || connect(conn, (struct sockaddr *)&sa, sizeof(sa))) {
		rc = -errno;
		if (conn >= 0)
			close(conn);
		return hb_fail(err, errlen, rc,
			       "cannot reach heapbpf pid %d, which holds pid %d, at %s: %s", holder,
			       pid, sa.sun_path, strerror(-rc));
	}
	/* the holder is who the lock says, and root's */
	if (!trusted_peer(conn, holder)) {
		close(conn);
		return hb_fail(err, errlen, -EPERM,
			       "%s is not heapbpf pid %d's, or not root's: not asked", sa.sun_path,
			       holder);
	}
	iov.iov_len = (size_t)snprintf(buf, sizeof(buf), REQUEST_MAGIC " pid=%d duration_ns=%llu",
				       pid, (unsigned long long)duration_ns);
	c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &out, sizeof(int));
	if (sendmsg(conn, &mh, MSG_NOSIGNAL) < 0) {
		rc = -errno;
		close(conn);
		return hb_fail(err, errlen, rc, "cannot ask heapbpf pid %d: %s", holder,
			       strerror(-rc));
	}
	return conn;
}

int serve_answer(int conn, pid_t holder, char *err, size_t errlen)
{
	int rc = answer(conn, holder, err, errlen);

	close(conn);
	return rc;
}

int serve_ask(const char *dir, pid_t holder, pid_t pid, uint64_t duration_ns, int out, int stop_fd,
	      char *err, size_t errlen)
{
	struct pollfd pf[2];
	int conn = serve_send(dir, holder, pid, duration_ns, out, err, errlen);

	if (conn < 0)
		return conn;
	/* the answer; a stop signal first ends the window early (the holder sees the hang-up) */
	pf[0] = (struct pollfd){ .fd = conn, .events = POLLIN };
	pf[1] = (struct pollfd){ .fd = stop_fd, .events = POLLIN };
	while (poll(pf, stop_fd >= 0 ? 2 : 1, -1) >= 0 || errno == EINTR) {
		if (pf[0].revents)
			break;
		if (stop_fd >= 0 && (pf[1].revents & POLLIN)) {
			shutdown(conn, SHUT_WR);
			pf[1].fd = -1;
		}
	}
	return serve_answer(conn, holder, err, errlen);
}
