/* SPDX-License-Identifier: GPL-2.0 */
/*
 * TAP output and the TCP side channel of tests/scale/qpscale.c and
 * rnriso.c (included once; the program defines is_server, sock, tap_n,
 * failed, the tag printed in a setup failure, PROG, and TCP_TIMEOUT_MS).
 *   diag(fmt, ...)     a "# " line
 *   die(fmt, ...)      "not ok" with errno's text, "# PROG: setup failed", exit 2
 *   chk(e, fmt, ...)   die unless e (a verbs call's errno-style return) is 0
 *   ok(good, fmt, ...) "ok" / "not ok" (and failed = 1)
 *   now()              CLOCK_MONOTONIC seconds
 *   xfer(wr, p, n)     write or read n bytes of the side channel, or die
 *   tcp_setup(host, port)  connect to host:port (retrying for 600 s), or
 *                      with host NULL listen on port and accept one client
 */
#ifndef RNRISO_SIDE_H
#define RNRISO_SIDE_H

static void diag(const char *fmt, ...)
{
	va_list ap;

	printf("# ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

static void die(const char *fmt, ...)
{
	va_list ap;
	int e = errno;

	printf("not ok %d - %s: ", ++tap_n, is_server ? "server" : "client");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf(" (errno %d %s)\n# " PROG ": setup failed\n", e, strerror(e));
	fflush(stdout);
	exit(2);
}

/* e: a verbs call's return (an errno value); non-zero is fatal */
#define chk(e, ...) do { int e_ = (e); if (e_) { errno = e_; die(__VA_ARGS__); } } while (0)

static void ok(int good, const char *fmt, ...)
{
	va_list ap;

	if (!good)
		failed = 1;
	printf("%sok %d - ", good ? "" : "not ", ++tap_n);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static void xfer(int wr, void *p, size_t n)
{
	uint8_t *b = p;

	while (n) {
		struct pollfd pf = { .fd = sock, .events = wr ? POLLOUT : POLLIN };
		ssize_t r;

		if (poll(&pf, 1, TCP_TIMEOUT_MS) <= 0) {
			errno = ETIMEDOUT;
			die("side channel %s timed out", wr ? "write" : "read");
		}
		r = wr ? write(sock, b, n) : read(sock, b, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			if (r == 0)
				errno = ECONNRESET;
			die("side channel %s: peer gone", wr ? "write" : "read");
		}
		b += r;
		n -= r;
	}
}

static void tcp_setup(const char *host, int port)
{
	int one = 1;

	if (is_server) {
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
		int l = socket(AF_INET, SOCK_STREAM, 0);
		struct pollfd pf = { .fd = l, .events = POLLIN };

		if (l < 0)
			die("TCP socket");
		setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(l, (void *)&a, sizeof(a)) || listen(l, 1))
			die("listen on TCP port %d", port);
		diag("server: waiting for the client on TCP port %d", port);
		if (poll(&pf, 1, 600000) <= 0) {
			errno = ETIMEDOUT;
			die("no client within 600 s");
		}
		sock = accept(l, NULL, NULL);
		close(l);
		if (sock < 0)
			die("accept");
	} else {
		struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *ai;
		char ps[16];
		int e;

		snprintf(ps, sizeof(ps), "%d", port);
		if ((e = getaddrinfo(host, ps, &hints, &ai))) {
			errno = EINVAL;
			die("resolve %s: %s", host, gai_strerror(e));
		}
		for (int i = 0; i < 1200; i++) {	/* the server may not be up yet: 600 s */
			sock = socket(AF_INET, SOCK_STREAM, 0);
			if (sock < 0)
				die("TCP socket");
			if (!connect(sock, ai->ai_addr, ai->ai_addrlen))
				break;
			close(sock);
			sock = -1;
			usleep(500000);
		}
		freeaddrinfo(ai);
		if (sock < 0)
			die("connect to %s:%d for 600 s", host, port);
	}
	setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

#endif
