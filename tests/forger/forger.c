// SPDX-License-Identifier: GPL-2.0
/*
 * forger: a blind attacker against MetaRoCE (Documentation/transport.rst,
 * "Identity and threat model"), for the guest bed. It sends UDP datagrams to a
 * MetaRoCE device's port as fast as the host lets it, from many source ports,
 * and never sees the traffic it attacks:
 *
 *   blind      well-formed version-6 DATA / ACK / PROBE (and some DATAGRAM)
 *              with guessed connection modes, tokens, PSNs, floors, SSNs,
 *              cumulative PSNs, SACK bitmaps, rate hints and NAK/RNR flags,
 *              for the connection ids given with -c (the attacker knows the
 *              QPNs) and guessed ones;
 *   malformed  random bytes, every truncation of a well-formed packet, one
 *              header field (or byte) mutated at a time, oversized payloads,
 *              both for the ids of -c and for ids that do not exist;
 *   mix        both, half each.
 *
 *   forger -d ADDR [-p PORT] [-c ID,ID,...] [-m blind|malformed|mix]
 *          [-n COUNT] [-t SECONDS] [-r PER-SECOND] [-s SEED]
 *
 * ADDR is IPv4 or IPv6. It stops after COUNT datagrams (default 100000) or
 * SECONDS or SIGTERM (whichever first), at most PER-SECOND datagrams a second
 * if given (else as fast as it can), and prints "# forger: N datagrams ..." with the
 * count per kind. Exit 0 unless it could not send at all.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define VERSION 6
#define NSOCK 16
#define BATCH 32
#define MAXLEN 1200

static uint64_t rng_state;
static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static uint64_t rnd(void)
{
	uint64_t x = rng_state;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	rng_state = x;
	return x;
}

static uint32_t below(uint32_t n)
{
	return n ? (uint32_t)(rnd() % n) : 0;
}

static void be16(uint8_t *p, uint16_t v)
{
	p[0] = v >> 8;
	p[1] = v;
}

static void be32(uint8_t *p, uint32_t v)
{
	p[0] = v >> 24;
	p[1] = v >> 16;
	p[2] = v >> 8;
	p[3] = v;
}

static uint32_t conns[64];
static int nconns;

/* A connection id: one of -c, or a guess. */
static uint32_t conn_id(void)
{
	if (nconns && below(4) != 0)
		return conns[below(nconns)];
	return 16 + below(0x00ffffff - 16);
}

/* A sequence number: random, or near a small/round value. */
static uint32_t seq(void)
{
	switch (below(4)) {
	case 0:
		return (uint32_t)rnd();
	case 1:
		return below(512);
	case 2:
		return 0xffffffffu - below(512);
	default:
		return 0x80000000u + below(512) - 256;
	}
}

static size_t common(uint8_t *b, uint8_t type, uint32_t conn)
{
	b[0] = VERSION;
	/*
	 * DATA, ACK, PROBE: the connection mode (0x80, SHARED) guessed too, so
	 * that half of them pass the mode check whichever mode the target
	 * runs and meet its token check (a DATAGRAM has no mode).
	 */
	b[1] = type | (type != 4 && below(2) ? 0x80 : 0);
	b[2] = below(10) ? below(8) : below(256);
	/* The incarnation (a guess, nonzero) and the 24-bit destination QPN. */
	be16(b + 3, (uint16_t)(rnd() | 1));
	b[5] = conn >> 16;
	b[6] = conn >> 8;
	b[7] = conn;
	be32(b + 8, seq());
	be32(b + 12, (uint32_t)rnd());
	be32(b + 16, (uint32_t)rnd()); /* the token: a guess */
	return 20;
}

/* A well-formed DATA packet (of the format; never of a real connection). */
static size_t data(uint8_t *b, uint32_t conn)
{
	static const uint8_t ops[] = { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 };
	uint8_t op = ops[below(sizeof(ops))];
	int reth = op == 2 || op == 3 || op == 4 || op == 6 || op == 7 || op == 10;
	int imm = op == 1 || op == 3 || op == 9;
	uint16_t plen = below(3) ? 8 : below(1025);
	size_t n = common(b, 1, conn);
	uint8_t flags = 0x01 | 0x02 | (reth ? 0x04 : 0) | (imm ? 0x08 : 0) |
			(below(2) ? 0x20 : 0);

	if (op == 4 || op == 5 || op == 8 || op == 6 || op == 7)
		plen = op == 6 ? 16 : 8;
	be16(b + 20, below(8) ? below(4) : (uint16_t)rnd());
	b[22] = op;
	b[23] = flags;
	be16(b + 24, plen);
	be16(b + 26, (uint16_t)rnd());
	uint32_t psn = (uint32_t)(b[8] << 24 | b[9] << 16 | b[10] << 8 | b[11]);
	be32(b + 28, below(2) ? psn : psn - below(300)); /* floor */
	be32(b + 32, seq()); /* ssn */
	be32(b + 36, below(64));
	be32(b + 40, 0);
	be32(b + 44, plen);
	n = 48;
	if (reth) {
		for (int i = 0; i < 8; i++)
			b[n + i] = rnd();
		be32(b + n + 8, (uint32_t)rnd());
		be32(b + n + 12, plen);
		n += 16;
	}
	if (imm) {
		be32(b + n, (uint32_t)rnd());
		n += 4;
	}
	for (uint16_t i = 0; i < plen; i++)
		b[n + i] = rnd();
	return n + plen;
}

static size_t ack_one(uint8_t *b, uint32_t conn);

/*
 * An ACK, or half the time a bundle of 2-16 ACKs (Documentation/transport.rst,
 * "ACK bundles") whose later records repeat the first's version, type, inc,
 * dst_conn and token (H17), so that it reaches the token check: at most
 * 16 x 72 = 1152 bytes, within MAXLEN. A lone ACK has a DATA riding after it
 * a third of the time ("ACKs riding on DATA", H18: its SHARED bit the ACK's),
 * at most 72 + 1092 bytes.
 */
static size_t ack(uint8_t *b, uint32_t conn)
{
	size_t n = ack_one(b, conn);

	if (below(3) == 0) {
		n += data(b + n, conn);
		b[72 + 1] = (b[72 + 1] & 0x7f) | (b[1] & 0x80);
		return n;
	}

	if (below(2)) {
		unsigned int k = 2 + below(15);

		for (unsigned int i = 1; i < k; i++) {
			uint8_t *r = b + 72 * i;

			ack_one(r, conn);
			memcpy(r, b, 2);
			memcpy(r + 3, b + 3, 5);
			memcpy(r + 16, b + 16, 4);
		}
		n = 72 * k;
	}
	return n;
}

static size_t ack_one(uint8_t *b, uint32_t conn)
{
	size_t n = common(b, 2, conn);

	uint8_t flags = (uint8_t[]){ 0, 0x01, 0x02, 0x06, 0x0a, 0x0e }[below(6)];

	/* A NAK with MSG (0x08) names a message: nak_msn in the PSN field, nak_stream. */
	be32(b + 8, flags & 0x08 ? below(8) : 0);
	be32(b + 20, seq());			/* cum */
	be32(b + 24, below(2) ? 1 : (uint32_t)rnd()); /* rate hint */
	be16(b + 28, below(100));		/* ce */
	be16(b + 30, below(100));		/* acked */
	b[32] = flags;
	b[33] = below(32);
	be16(b + 34, flags & 0x08 ? below(2) : 0);
	be32(b + 36, seq());			/* rnr_psn */
	for (int i = 0; i < 32; i++)
		b[40 + i] = below(3) == 0 ? 0xff : below(2) ? 0 : rnd();
	(void)n;
	return 72;
}

static size_t probe(uint8_t *b, uint32_t conn)
{
	common(b, 3, conn);
	be32(b + 20, seq());
	return 24;
}

static size_t datagram(uint8_t *b, uint32_t conn)
{
	uint16_t plen = below(256);

	common(b, 4, below(2) ? 1 : conn);
	b[2] = 0;
	be16(b + 3, 0);
	be32(b + 8, 0);
	be32(b + 16, 0);
	be32(b + 20, below(0x01000000));
	be32(b + 24, (uint32_t)rnd());
	b[28] = below(2) ? 0x08 : 0;
	b[29] = 0;
	be16(b + 30, plen);
	be32(b + 32, (uint32_t)rnd());
	for (uint16_t i = 0; i < plen; i++)
		b[36 + i] = rnd();
	return 36 + plen;
}

static size_t wellformed(uint8_t *b, uint32_t conn, int *kind)
{
	*kind = below(16);
	if (*kind < 7)
		return data(b, conn);
	if (*kind < 12)
		return ack(b, conn);
	if (*kind < 15)
		return probe(b, conn);
	return datagram(b, conn);
}

static unsigned long counts[8];
static const char *names[8] = { "data", "ack", "probe", "datagram", "random",
				"truncated", "mutated", "oversized" };

static size_t one(uint8_t *b, int malformed, int *kind)
{
	int k;
	/* Malformed ones aim at real and at non-existent connections alike. */
	uint32_t conn = malformed && below(2) ? 16 + below(0x00ffffff) : conn_id();
	size_t n = wellformed(b, conn, &k);

	if (!malformed) {
		*kind = k < 7 ? 0 : k < 12 ? 1 : k < 15 ? 2 : 3;
		return n;
	}
	switch (below(4)) {
	case 0: /* random bytes, sometimes with a valid version and type */
		n = below(200);
		for (size_t i = 0; i < n; i++)
			b[i] = rnd();
		if (n > 8 && below(2)) {
			b[0] = VERSION;
			b[1] = 1 + below(4);
		}
		*kind = 4;
		return n;
	case 1: /* a truncation */
		*kind = 5;
		return n ? below(n) : 0;
	case 2: /* one field or byte mutated */
		*kind = 6;
		if (below(2)) {
			size_t at = below(n < 48 ? n : 48);
			b[at] ^= 1 + below(255);
		} else {
			b[below(n)] = rnd();
		}
		return n;
	default: /* a payload longer than any MTU, or trailing bytes */
		*kind = 7;
		if (n + 8 < MAXLEN) {
			size_t extra = 1 + below(MAXLEN - n - 1);
			for (size_t i = 0; i < extra; i++)
				b[n + i] = rnd();
			n += extra;
		}
		return n;
	}
}

static int usage(FILE *f, const char *prog, int rc)
{
	fprintf(f, "usage: %s -d ADDR [-p PORT] [-c IDS] [-m blind|malformed|mix] [-n N] [-t S] [-r RATE] [-s SEED]\n"
		"  -d ADDR   the target's IPv4 or IPv6 address\n"
		"  -p PORT   its UDP port, 1..65535 (default 4792)\n"
		"  -c IDS    connection ids to aim at, comma-separated (at most 64)\n"
		"  -m MODE   blind (well-formed, guessed tokens), malformed, or mix (default)\n"
		"  -n N      datagrams to send (default 100000)\n"
		"  -t S      stop after S seconds (> 0)\n"
		"  -r RATE   datagrams a second (> 0; default: as fast as it can)\n"
		"  -s SEED   the generator's seed\n", prog);
	return rc;
}

/* num: S as a whole decimal or 0x number in MIN..MAX into *OUT; 0 on success. */
static int num(const char *s, unsigned long min, unsigned long max, unsigned long *out)
{
	char *end;

	errno = 0;
	if (!*s || *s == '-' || *s == '+' || *s == ' ')
		return -1;
	*out = strtoul(s, &end, 0);
	return errno || *end || *out < min || *out > max ? -1 : 0;
}

/* pos: S as a finite number > 0 into *OUT; 0 on success. */
static int pos(const char *s, double *out)
{
	char *end;

	*out = strtod(s, &end);
	return !*s || *end || !(*out > 0) || *out > 1e12 ? -1 : 0;
}

int main(int argc, char **argv)
{
	const char *addr = NULL, *mode = "mix";
	unsigned long count = 100000, seed = 1;
	double secs = 1e9, rate = 0;
	int port = 4792, opt;

	unsigned long v;
	int bad = 0;
	while ((opt = getopt(argc, argv, "d:p:c:m:n:t:r:s:h")) != -1) {
		switch (opt) {
		case 'd': addr = optarg; break;
		case 'p': bad |= num(optarg, 1, 65535, &v); port = (int)v; break;
		case 'c':
			for (char *t = strtok(optarg, ","); t; t = strtok(NULL, ",")) {
				if (nconns == 64 || num(t, 0, 0xffffffff, &v)) { bad = 1; break; }
				conns[nconns++] = v;
			}
			break;
		case 'm': mode = optarg; break;
		case 'n': bad |= num(optarg, 0, ~0ul, &count); break;
		case 't': bad |= pos(optarg, &secs); break;
		case 'r': bad |= pos(optarg, &rate); break;
		case 's': bad |= num(optarg, 0, ~0ul, &seed); break;
		case 'h': return usage(stdout, argv[0], 0);
		default: return usage(stderr, argv[0], 2);
		}
		if (bad) {
			fprintf(stderr, "forger: -%c %s: not a valid value\n", opt, optarg);
			return usage(stderr, argv[0], 2);
		}
	}
	if (optind < argc) {
		fprintf(stderr, "forger: unexpected argument '%s'\n", argv[optind]);
		return usage(stderr, argv[0], 2);
	}
	if (!addr || (strcmp(mode, "blind") && strcmp(mode, "malformed") && strcmp(mode, "mix"))) {
		fprintf(stderr, "forger: -d ADDR needed; -m blind|malformed|mix\n");
		return 2;
	}
	rng_state = seed * 0x9e3779b97f4a7c15ull | 1;

	struct sockaddr_storage dst = { 0 };
	socklen_t dlen;
	int af;
	struct sockaddr_in *d4 = (struct sockaddr_in *)&dst;
	struct sockaddr_in6 *d6 = (struct sockaddr_in6 *)&dst;

	if (inet_pton(AF_INET, addr, &d4->sin_addr) == 1) {
		af = AF_INET;
		d4->sin_family = AF_INET;
		d4->sin_port = htons(port);
		dlen = sizeof(*d4);
	} else if (inet_pton(AF_INET6, addr, &d6->sin6_addr) == 1) {
		af = AF_INET6;
		d6->sin6_family = AF_INET6;
		d6->sin6_port = htons(port);
		dlen = sizeof(*d6);
	} else {
		fprintf(stderr, "forger: bad address %s\n", addr);
		return 2;
	}
	/* Many source ports: the ECMP entropy a sprayed connection has too. */
	int socks[NSOCK];

	for (int i = 0; i < NSOCK; i++) {
		socks[i] = socket(af, SOCK_DGRAM, 0);
		if (socks[i] < 0) {
			perror("socket");
			return 1;
		}
		if (connect(socks[i], (struct sockaddr *)&dst, dlen) < 0) {
			perror("connect");
			return 1;
		}
	}

	static uint8_t bufs[BATCH][MAXLEN + 64];
	struct iovec iov[BATCH];
	struct mmsghdr msgs[BATCH];
	int kinds[BATCH];
	struct timespec t0, t;
	unsigned long sent = 0, failed = 0;
	double el = 0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	while (!stop && sent < count && el < secs) {
		int n = count - sent < BATCH ? (int)(count - sent) : BATCH;
		int malformed = !strcmp(mode, "malformed") || (!strcmp(mode, "mix") && below(2));

		for (int i = 0; i < n; i++) {
			iov[i].iov_base = bufs[i];
			iov[i].iov_len = one(bufs[i], malformed, &kinds[i]);
			memset(&msgs[i], 0, sizeof(msgs[i]));
			msgs[i].msg_hdr.msg_iov = &iov[i];
			msgs[i].msg_hdr.msg_iovlen = 1;
		}
		int r = sendmmsg(socks[below(NSOCK)], msgs, n, 0);

		if (r > 0) {
			sent += r;
			for (int i = 0; i < r; i++)
				counts[kinds[i]]++;
		} else if (errno != EINTR && errno != ENOBUFS && errno != ECONNREFUSED && errno != EAGAIN) {
			if (++failed > 1000) {
				perror("sendmmsg");
				break;
			}
		}
		clock_gettime(CLOCK_MONOTONIC, &t);
		el = (t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9;
		if (rate > 0 && sent / rate > el) {
			double w = sent / rate - el;
			struct timespec ts = { (time_t)w, (long)((w - (time_t)w) * 1e9) };

			nanosleep(&ts, NULL);
		}
	}
	printf("# forger: %lu datagrams to %s port %d in %.1f s (%.0f/s), mode %s, %d known ids:",
	       sent, addr, port, el, el > 0 ? sent / el : 0.0, mode, nconns);
	for (int i = 0; i < 8; i++)
		if (counts[i])
			printf(" %s %lu", names[i], counts[i]);
	printf("\n");
	return sent ? 0 : 1;
}
