// SPDX-License-Identifier: GPL-2.0
/*
 * integrity - end-to-end data-integrity test over one RC QP pair
 * (libibverbs only; a TCP side channel carries QPN/GID/rkey/addresses,
 * the operation descriptors, checksums and verdicts; no rdma_cm).
 *
 *   integrity -d DEV -g GIDIDX [-s SEED] [-n OPS] [-M MAXSIZE] [-p PORT] [-v]
 *             server | client SERVER_IP
 *
 * The client drives: it draws a seeded random sequence of operations and
 * sends each one's full description (kind, direction, WRs, SGE layouts,
 * offsets, immediates, atomic operands) to the server; then both sides run it
 * in lockstep.  Either side can be the initiator (the direction is drawn too).
 *   SEND, SEND_WITH_IMM     target posts receives with 0-16 SGEs covering the
 *                           size (sometimes with slack); checks byte_len, imm,
 *                           IBV_WC_WITH_IMM, the bytes against the seeded
 *                           pattern and the sender's checksum; slack, gaps
 *                           between SGEs and guards around them untouched
 *   RDMA WRITE (_WITH_IMM)  1-16 source SGEs to a random offset in the peer's
 *                           buffer; the peer checks the bytes and 64 B guards
 *                           (WITH_IMM: its receive completion, byte_len, imm)
 *   RDMA READ               into 1-16 local SGEs from a pattern the peer laid;
 *                           gaps and guards untouched, the source unchanged
 *   FETCH_AND_ADD, CMP_AND_SWP  chains of 1-16 atomics on 3 adjacent 8-byte
 *                           words: every returned original value and the final
 *                           words must match a sequential model (exactly once:
 *                           a replayed atomic breaks the sums); one CAS of a
 *                           chain may be made to miss on purpose
 *   bursts                  2-16 small WRs of one kind posted as one chain
 * Sizes: 0 (SEND/WRITE), 1, path MTU -1/0/+1, multiples of it +-1, random up
 * to MAXSIZE, inline (IBV_SEND_INLINE) when size <= max_inline_data.  A fixed
 * prologue covers every kind at 0/1/MTU-1/MTU/MTU+1/MAXSIZE before the draws.
 * Every completion: IBV_WC_SUCCESS, the expected opcode and wr_id, in posting
 * order, none missing (timeout: lost) and none extra (duplicated).
 *
 * -Q (both sides): create the QP at the device's own limits (max_send_wr =
 * max_recv_wr = max_qp_wr, max_send_sge = max_recv_sge = max_sge, as
 * ibv_query_device reports them): every depth a device reports must work.
 *
 * -X data|len|imm|replay (self-check of the checker, client side): flip a
 * byte of the first suitable op after its checksum (or of a READ's result),
 * shorten an SGE of a SEND/WRITE_WITH_IMM by one byte, send a wrong immediate,
 * or post the last FETCH_AND_ADD of a chain twice; the run must then fail.
 *
 * Output: "ok N - ..." / "not ok N - ... (details)", "# ..." diagnostics, a
 * summary "# integrity: X operations, Y bytes, C corrupt, L lost, D duplicated"
 * and exit status 0 only if every check passed (the client's status covers
 * the server's checks too; 2: setup error).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <infiniband/verbs.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAXWR 16
#define MAXSGE 16
#define GUARD 64
#define NAWORDS 256		/* target words; result slots follow */
#define ATOM_AREA ((NAWORDS + MAXWR + 8) * 8)
#define CQ_TIMEOUT_MS 120000
#define TCP_TIMEOUT_MS 600000
#define MAGIC 0x1a7e5171u

enum kind { K_SEND, K_SEND_IMM, K_WRITE, K_WRITE_IMM, K_READ, K_FADD, K_CAS, NKIND, K_END = 100 };
static const char *kname[] = { "SEND", "SEND_WITH_IMM", "RDMA_WRITE", "RDMA_WRITE_WITH_IMM",
			       "RDMA_READ", "ATOMIC_FETCH_AND_ADD", "ATOMIC_CMP_AND_SWP" };

/* ---- side-channel messages (both guests run the same binary: same layout) ---- */
struct hello {
	uint32_t magic, qpn, psn, mtu, max_inline, max_sge, max_rd_atomic, atomics;
	uint64_t seed, maxsize, nops, addr;
	uint32_t rkey, pad;
	uint8_t gid[16];
};

struct wrd {
	uint32_t len, nsge, sge[MAXSGE], gap[MAXSGE];	/* initiator SGEs; gap before each */
	uint32_t rnsge, rsge[MAXSGE], rgap[MAXSGE];	/* target receive SGEs (SEND kinds) */
	uint64_t loff, roff;		/* region starts: initiator buffer, target buffer */
	uint32_t imm, inl, aword, pad;
	uint64_t add_cmp, swap;
};

struct desc {
	uint32_t magic, op, kind, dir, nwr, poison, abase, pad;
	uint64_t ainit[3];
	struct wrd w[MAXWR];
};

struct counts { uint32_t fails, corrupt, lost, dup, fatal, pad; };

struct msg {
	uint32_t magic, type;	/* 1 READY, 2 DONE, 3 VERDICT, 4 BYE */
	struct counts c;
	uint64_t csum[MAXWR];
};

/* ---- state ---- */
static int verbose, is_server, sock = -1;
static int deep;		/* -Q: the QP at the device's reported limits */
static int qp_timeout = 16;	/* -T: the local ACK timeout code (16: 268 ms) */
static int qp_retry_cnt = 7;	/* -r: retries before IBV_WC_RETRY_EXC_ERR */
static const char *inject;	/* -X: break one op on purpose (checks the checks) */
static int injected;
static uint64_t seed = 1, maxsize = 1 << 20, nops = 300;
static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_mr *mr;
static struct ibv_cq *cq;
static struct ibv_comp_channel *chan;
static struct ibv_qp *qp;
static uint8_t *buf, *scratch;
static size_t data_size, buf_size, atom_off;
static struct hello me, peer;
static uint32_t mtu_bytes;
static int tap_n;
static struct counts mine;	/* this side's failures */
static struct counts srv;	/* the server's, as last reported to the client */
static uint64_t n_wrs, n_bytes;

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
	printf("not ok %d - setup: ", ++tap_n);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf(" (errno %d %s)\n# integrity: setup failed\n", errno, strerror(errno));
	exit(2);
}

static void ok(const char *fmt, ...)
{
	va_list ap;
	printf("ok %d - ", ++tap_n);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

/* one failed check of the current op: counts it, prints "not ok" */
static const struct desc *cur;
static void bad(uint32_t *cat, const char *fmt, ...)
{
	va_list ap;
	mine.fails++;
	if (cat)
		(*cat)++;
	if (mine.fails > 200) {	/* counted, no longer printed */
		if (mine.fails == 201)
			printf("# more failures: only counted from here on\n");
		return;
	}
	printf("not ok %d - %s op %u %s x%u (%s initiates): ", ++tap_n, is_server ? "server" : "client",
	       cur ? cur->op : 0, cur && cur->kind < NKIND ? kname[cur->kind] : "END", cur ? cur->nwr : 0,
	       cur ? (cur->dir ? "server" : "client") : "-");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf(" (seed %" PRIu64 ")\n", seed);
	fflush(stdout);
}

/* ---- PRNG, pattern, checksum ---- */
static uint64_t mix(uint64_t z)
{
	z += 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t rs;
static uint64_t rnd(void) { return mix(rs++); }
static uint32_t rn(uint32_t n) { return n ? rnd() % n : 0; }	/* [0, n) */
static uint32_t rr(uint32_t a, uint32_t b) { return a + rn(b - a + 1); }	/* [a, b] */

/* the seeded byte stream of WR j of op i; byte 0 never equals the poison */
static void pattern(uint8_t *p, uint32_t op, uint32_t j, uint32_t len, uint8_t poison)
{
	uint64_t h = mix(seed ^ mix(((uint64_t)op << 8) | j)), w;
	uint32_t i;

	for (i = 0; i + 8 <= len; i += 8) {
		w = mix(h + i);
		memcpy(p + i, &w, 8);
	}
	if (i < len) {
		w = mix(h + i);
		memcpy(p + i, &w, len - i);
	}
	if (len && p[0] == poison)
		p[0] ^= 0xff;
}

static uint64_t csum_add(uint64_t h, const uint8_t *p, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

/* ---- TCP side channel ---- */
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

static void send_msg(uint32_t type, const uint64_t *cs)
{
	struct msg m = { .magic = MAGIC, .type = type, .c = mine };

	if (cs)
		memcpy(m.csum, cs, sizeof(m.csum));
	xfer(1, &m, sizeof(m));
}

static void recv_msg(uint32_t type, struct msg *m)
{
	xfer(0, m, sizeof(*m));
	if (m->magic != MAGIC || m->type != type) {
		errno = EPROTO;
		die("side channel: got message %u, want %u", m->type, type);
	}
	if (!is_server)
		srv = m->c;	/* cumulative */
}

static void tcp_setup(const char *host, int port)
{
	int one = 1;

	if (is_server) {
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
		int l = socket(AF_INET, SOCK_STREAM, 0);
		struct pollfd pf = { .fd = l, .events = POLLIN };

		setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (l < 0 || bind(l, (void *)&a, sizeof(a)) || listen(l, 1))
			die("listen on TCP port %d", port);
		diag("server: waiting for the client on TCP port %d", port);
		if (poll(&pf, 1, 300000) <= 0) {
			errno = ETIMEDOUT;
			die("no client within 300 s");
		}
		sock = accept(l, NULL, NULL);
		close(l);
		if (sock < 0)
			die("accept");
	} else {
		struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *ai;
		char ps[16];
		int i;

		snprintf(ps, sizeof(ps), "%d", port);
		if (getaddrinfo(host, ps, &hints, &ai))
			die("resolve %s", host);
		for (i = 0; i < 240; i++) {	/* the server may not be up yet */
			sock = socket(AF_INET, SOCK_STREAM, 0);
			if (!connect(sock, ai->ai_addr, ai->ai_addrlen))
				break;
			close(sock);
			sock = -1;
			usleep(500000);
		}
		freeaddrinfo(ai);
		if (sock < 0)
			die("connect to %s:%d for 120 s", host, port);
	}
	setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* ---- verbs setup ---- */
static uint32_t mtu_to_bytes(enum ibv_mtu m) { return 128u << m; }

static void verbs_setup(const char *devname, int gidx)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_device_attr da;
	struct ibv_port_attr pa;
	struct ibv_qp_init_attr ia;
	union ibv_gid gid;
	static const uint32_t inl_try[] = { 256, 128, 64, 0 };
	unsigned i;

	for (i = 0; l && l[i]; i++)
		if (!strcmp(ibv_get_device_name(l[i]), devname))
			break;
	if (!l || !l[i])
		die("no RDMA device %s", devname);
	ctx = ibv_open_device(l[i]);
	ibv_free_device_list(l);
	if (!ctx)
		die("open %s", devname);
	if (ibv_query_device(ctx, &da) || ibv_query_port(ctx, 1, &pa))
		die("query %s", devname);
	if (ibv_query_gid(ctx, 1, gidx, &gid))
		die("query GID %d", gidx);
	pd = ibv_alloc_pd(ctx);
	chan = ibv_create_comp_channel(ctx);
	cq = pd && chan ? ibv_create_cq(ctx, 4 * MAXWR + 16, NULL, chan, 0) : NULL;
	if (!cq)
		die("PD/channel/CQ");

	data_size = 2 * maxsize + 2 * MAXWR * (MAXSGE * 32 + 4 * GUARD) + 4096;
	atom_off = (data_size + 4095) & ~4095ul;
	buf_size = atom_off + ATOM_AREA;
	buf = aligned_alloc(4096, (buf_size + 4095) & ~4095ul);
	scratch = malloc(maxsize + 16);
	if (!buf || !scratch)
		die("allocate %zu bytes", buf_size);
	memset(buf, 0, buf_size);
	mr = ibv_reg_mr(pd, buf, buf_size, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	if (!mr)
		die("register %zu bytes", buf_size);

	me.max_sge = da.max_sge < MAXSGE ? da.max_sge : MAXSGE;
	me.max_rd_atomic = da.max_qp_rd_atom < 16 ? da.max_qp_rd_atom : 16;
	if ((int)me.max_rd_atomic > da.max_qp_init_rd_atom)
		me.max_rd_atomic = da.max_qp_init_rd_atom;
	me.atomics = da.atomic_cap != IBV_ATOMIC_NONE;
	for (i = 0; i < 4; i++) {
		memset(&ia, 0, sizeof(ia));
		ia.send_cq = ia.recv_cq = cq;
		ia.qp_type = IBV_QPT_RC;
		ia.cap.max_send_wr = ia.cap.max_recv_wr = deep ? (uint32_t)da.max_qp_wr : 2 * MAXWR;
		ia.cap.max_send_sge = ia.cap.max_recv_sge = deep ? (uint32_t)da.max_sge : me.max_sge;
		ia.cap.max_inline_data = inl_try[i];
		ia.sq_sig_all = 0;
		qp = ibv_create_qp(pd, &ia);
		if (qp)
			break;
	}
	if (!qp)
		die("create RC QP with %u SGEs%s", me.max_sge, deep ? " at the device's limits (-Q)" : "");
	if (deep)
		printf("# -Q: QP at the device's limits: max_send_wr %u max_recv_wr %u max_send_sge %u "
		       "max_recv_sge %u (max_qp_wr %d, max_sge %d)\n", ia.cap.max_send_wr,
		       ia.cap.max_recv_wr, ia.cap.max_send_sge, ia.cap.max_recv_sge, da.max_qp_wr, da.max_sge);
	me.magic = MAGIC;
	me.qpn = qp->qp_num;
	me.psn = mix(seed ^ time(NULL) ^ getpid()) & 0xffffff;
	me.mtu = pa.active_mtu;
	me.max_inline = ia.cap.max_inline_data;
	me.seed = seed;
	me.maxsize = maxsize;
	me.nops = nops;
	me.addr = (uintptr_t)buf;
	me.rkey = mr->rkey;
	memcpy(me.gid, gid.raw, 16);
}

static void qp_connect(void)
{
	struct ibv_qp_attr a;
	uint32_t rd = me.max_rd_atomic < peer.max_rd_atomic ? me.max_rd_atomic : peer.max_rd_atomic;
	enum ibv_mtu mtu = me.mtu < peer.mtu ? me.mtu : peer.mtu;

	if (!rd)
		rd = 1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			    IBV_ACCESS_REMOTE_ATOMIC;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		die("QP to INIT");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = mtu;
	a.dest_qp_num = peer.qpn;
	a.rq_psn = peer.psn;
	a.max_dest_rd_atomic = rd;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	memcpy(a.ah_attr.grh.dgid.raw, peer.gid, 16);
	a.ah_attr.grh.sgid_index = me.pad;	/* the GID index, stashed */
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		die("QP to RTR");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = qp_timeout;	/* 4.096 us * 2^timeout (16: 268 ms) */
	a.retry_cnt = qp_retry_cnt;
	a.rnr_retry = 7;
	a.sq_psn = me.psn;
	a.max_rd_atomic = rd;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			  IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		die("QP to RTS");
	mtu_bytes = mtu_to_bytes(mtu);
}

/* ---- completions ---- */
static struct ibv_wc wq[64];
static int wq_head, wq_tail;

static int get_wc(struct ibv_wc *wc, int timeout_ms)
{
	struct timespec t0, t;
	int n;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		struct pollfd pf = { .fd = chan->fd, .events = POLLIN };
		struct ibv_cq *ecq;
		void *ectx;
		long left;

		if (wq_head < wq_tail) {
			*wc = wq[wq_head++];
			return 1;
		}
		n = ibv_poll_cq(cq, 64, wq);
		if (n < 0)
			die("ibv_poll_cq");
		if (n) {
			wq_head = 0;
			wq_tail = n;
			continue;
		}
		if (timeout_ms == 0)
			return 0;
		if (ibv_req_notify_cq(cq, 0))
			die("ibv_req_notify_cq");
		n = ibv_poll_cq(cq, 64, wq);
		if (n < 0)
			die("ibv_poll_cq");
		if (n) {
			wq_head = 0;
			wq_tail = n;
			continue;
		}
		clock_gettime(CLOCK_MONOTONIC, &t);
		left = timeout_ms - ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000);
		if (left <= 0 || poll(&pf, 1, left) <= 0)
			return 0;
		if (ibv_get_cq_event(chan, &ecq, &ectx))
			die("ibv_get_cq_event");
		ibv_ack_cq_events(ecq, 1);
	}
}

#define RECV_BIT (1ull << 63)
static uint64_t wrid(uint32_t op, uint32_t j, int recv) { return ((uint64_t)op << 8 | j) | (recv ? RECV_BIT : 0); }

struct expect {
	uint64_t wr_id;
	enum ibv_wc_opcode opcode;
	int check_len, with_imm;
	uint32_t len, imm;
};

/* collect n completions in order; returns 0 when the QP can go on */
static int expect_wcs(const struct expect *e, int n, uint64_t *imm_seen_mask)
{
	struct ibv_wc wc;
	int i, fatal = 0;

	(void)imm_seen_mask;
	for (i = 0; i < n; i++) {
		if (!get_wc(&wc, CQ_TIMEOUT_MS)) {
			bad(&mine.lost, "%d of %d completions lost: none for wr_id 0x%" PRIx64 " within %d s",
			    n - i, n, e[i].wr_id, CQ_TIMEOUT_MS / 1000);
			return -1;
		}
		if (wc.status != IBV_WC_SUCCESS) {
			bad(NULL, "wr_id 0x%" PRIx64 ": status %s (%d), vendor_err 0x%x, want SUCCESS",
			    wc.wr_id, ibv_wc_status_str(wc.status), wc.status, wc.vendor_err);
			fatal = 1;
			continue;
		}
		if (wc.wr_id != e[i].wr_id) {
			uint32_t op = (wc.wr_id & ~RECV_BIT) >> 8;
			int dup = op < cur->op || (op == cur->op && (wc.wr_id & RECV_BIT) == (e[i].wr_id & RECV_BIT) &&
						   (wc.wr_id & 0xff) < (e[i].wr_id & 0xff));

			bad(dup ? &mine.dup : NULL, "completion %d: wr_id 0x%" PRIx64 ", want 0x%" PRIx64 " (%s)",
			    i, wc.wr_id, e[i].wr_id, dup ? "duplicated or stale" : "out of order or unknown");
			i--;	/* the expected one may still come */
			if (dup)
				continue;
			return -1;
		}
		if (wc.qp_num != qp->qp_num)
			bad(NULL, "wr_id 0x%" PRIx64 ": qp_num %u, want %u", wc.wr_id, wc.qp_num, qp->qp_num);
		if (wc.opcode != e[i].opcode)
			bad(NULL, "wr_id 0x%" PRIx64 ": opcode %d, want %d", wc.wr_id, wc.opcode, e[i].opcode);
		if (e[i].check_len && wc.byte_len != e[i].len)
			bad(NULL, "wr_id 0x%" PRIx64 ": byte_len %u, want %u", wc.wr_id, wc.byte_len, e[i].len);
		if (e[i].check_len) {
			int has = !!(wc.wc_flags & IBV_WC_WITH_IMM);

			if (has != e[i].with_imm)
				bad(NULL, "wr_id 0x%" PRIx64 ": IBV_WC_WITH_IMM %s, want %s", wc.wr_id,
				    has ? "set" : "clear", e[i].with_imm ? "set" : "clear");
			else if (has && ntohl(wc.imm_data) != e[i].imm)
				bad(&mine.corrupt, "wr_id 0x%" PRIx64 ": imm 0x%08x, want 0x%08x", wc.wr_id,
				    ntohl(wc.imm_data), e[i].imm);
		}
	}
	return fatal ? -1 : 0;
}

/* completions nobody asked for (a replayed or extra one) */
static void no_extra(const char *when)
{
	struct ibv_wc wc;

	while (get_wc(&wc, 0))
		bad(&mine.dup, "extra completion %s: wr_id 0x%" PRIx64 " status %s opcode %d byte_len %u", when,
		    wc.wr_id, ibv_wc_status_str(wc.status), wc.opcode, wc.byte_len);
}

/* ---- memory layout of one WR on one side ---- */
static void layout(uint64_t start, uint32_t n, const uint32_t *len, const uint32_t *gap, uint64_t *off, uint64_t *end)
{
	uint64_t o = start;
	uint32_t k;

	for (k = 0; k < n; k++) {
		o += gap[k];
		off[k] = o;
		o += len[k];
	}
	*end = o;
}

static const char *where(void) { return is_server ? "server" : "client"; }

/* check [lo, hi) of buf holds the poison; name the first difference */
static int check_poison(uint64_t lo, uint64_t hi, uint8_t poison, const char *what, uint32_t j)
{
	uint64_t i;

	for (i = lo; i < hi; i++)
		if (buf[i] != poison) {
			bad(&mine.corrupt, "WR %u: %s byte at %s buffer offset %" PRIu64 " is 0x%02x, want poison 0x%02x (untouched)",
			    j, what, where(), i, buf[i], poison);
			return -1;
		}
	return 0;
}

/* the stream (scratch, len) must sit in the n SGE pieces; gaps/slack/guards poisoned */
static int check_pieces(const struct desc *d, uint32_t j, uint64_t start, uint32_t n, const uint32_t *len,
			const uint32_t *gap, uint32_t datalen, const char *what)
{
	uint64_t off[MAXSGE], end, pos = 0, i;
	uint32_t k;
	int rc = 0;

	layout(start, n, len, gap, off, &end);
	rc |= check_poison(start - GUARD, start, d->poison, "guard before", j);
	rc |= check_poison(end, end + GUARD, d->poison, "guard after", j);
	for (k = 0; k < n; k++) {
		uint64_t prev = k ? off[k - 1] + len[k - 1] : start;
		uint32_t take = datalen - pos < len[k] ? datalen - pos : len[k];

		rc |= check_poison(prev, off[k], d->poison, "gap between SGEs", j);
		if (memcmp(buf + off[k], scratch + pos, take)) {
			for (i = 0; i < take && buf[off[k] + i] == scratch[pos + i]; i++)
				;
			bad(&mine.corrupt, "WR %u (%u B, %u SGEs): %s byte %" PRIu64 " (SGE %u, +%" PRIu64 ") is 0x%02x, want 0x%02x",
			    j, datalen, n, what, pos + i, k, i, buf[off[k] + i], scratch[pos + i]);
			rc = -1;
		}
		rc |= check_poison(off[k] + take, off[k] + len[k], d->poison, "receive slack", j);
		pos += take;
	}
	if (pos != datalen) {
		bad(&mine.corrupt, "WR %u: the SGEs hold %" PRIu64 " of %u bytes", j, pos, datalen);
		rc = -1;
	}
	return rc;
}

static void scatter(uint64_t start, uint32_t n, const uint32_t *len, const uint32_t *gap, uint64_t *cs)
{
	uint64_t off[MAXSGE], end, pos = 0, h = 0xcbf29ce484222325ull;
	uint32_t k;

	layout(start, n, len, gap, off, &end);
	for (k = 0; k < n; k++) {
		memcpy(buf + off[k], scratch + pos, len[k]);
		h = csum_add(h, buf + off[k], len[k]);	/* over what is sent, not over the model */
		pos += len[k];
	}
	if (cs)
		*cs = h;
}

static uint64_t span(uint32_t n, const uint32_t *len, const uint32_t *gap)
{
	uint64_t off[MAXSGE], end;

	layout(0, n, len, gap, off, &end);
	return end;
}

static void fill_sges(struct ibv_sge *s, uint64_t start, uint32_t n, const uint32_t *len, const uint32_t *gap)
{
	uint64_t off[MAXSGE], end;
	uint32_t k;

	layout(start, n, len, gap, off, &end);
	for (k = 0; k < n; k++) {
		s[k].addr = (uintptr_t)buf + off[k];
		s[k].length = len[k];
		s[k].lkey = mr->lkey;
	}
}

/* sequential model of an atomic chain: returned originals and final words */
static void atomic_model(const struct desc *d, uint64_t *ret, uint64_t *fin)
{
	uint32_t j;

	memcpy(fin, d->ainit, 3 * 8);
	for (j = 0; j < d->nwr; j++) {
		const struct wrd *w = &d->w[j];

		ret[j] = fin[w->aword];
		if (d->kind == K_FADD)
			fin[w->aword] += w->add_cmp;
		else if (fin[w->aword] == w->add_cmp)
			fin[w->aword] = w->swap;
	}
}

#define POISON64 0x5a5a5a5a5a5a5a5aull

/* ---- one op, this side as initiator ---- */
static void initiator(const struct desc *d)
{
	struct ibv_send_wr wr[MAXWR], *badwr;
	struct ibv_sge sg[MAXWR][MAXSGE];
	struct expect e[MAXWR];
	uint64_t cs[MAXWR] = { 0 }, ret[MAXWR], fin[3];
	struct msg m;
	uint32_t j;
	int atomic = d->kind == K_FADD || d->kind == K_CAS, rc;

	memset(wr, 0, sizeof(wr));
	if (atomic)
		atomic_model(d, ret, fin);
	for (j = 0; j < d->nwr; j++) {
		const struct wrd *w = &d->w[j];
		uint64_t sp = span(w->nsge, w->sge, w->gap);

		wr[j].wr_id = wrid(d->op, j, 0);
		wr[j].next = j + 1 < d->nwr ? &wr[j + 1] : NULL;
		wr[j].send_flags = IBV_SEND_SIGNALED;
		wr[j].sg_list = sg[j];
		wr[j].num_sge = w->nsge;
		e[j] = (struct expect){ .wr_id = wr[j].wr_id };
		if (atomic) {
			uint64_t slot = atom_off + 8 * (NAWORDS + j);

			memcpy(buf + slot, &(uint64_t){ POISON64 ^ (ret[j] == POISON64) }, 8);
			sg[j][0] = (struct ibv_sge){ .addr = (uintptr_t)buf + slot, .length = 8, .lkey = mr->lkey };
			wr[j].num_sge = 1;
			wr[j].opcode = d->kind == K_FADD ? IBV_WR_ATOMIC_FETCH_AND_ADD : IBV_WR_ATOMIC_CMP_AND_SWP;
			wr[j].wr.atomic.remote_addr = peer.addr + atom_off + 8 * (d->abase + w->aword);
			wr[j].wr.atomic.rkey = peer.rkey;
			wr[j].wr.atomic.compare_add = w->add_cmp;
			wr[j].wr.atomic.swap = w->swap;
			e[j].opcode = d->kind == K_FADD ? IBV_WC_FETCH_ADD : IBV_WC_COMP_SWAP;
			continue;
		}
		memset(buf + w->loff - GUARD, d->poison, sp + 2 * GUARD);
		if (d->kind == K_READ) {
			wr[j].opcode = IBV_WR_RDMA_READ;
			e[j].opcode = IBV_WC_RDMA_READ;
		} else {
			pattern(scratch, d->op, j, w->len, d->poison);
			scatter(w->loff, w->nsge, w->sge, w->gap, &cs[j]);
			if (inject && !injected && !strcmp(inject, "data") && w->len && !w->inl) {
				buf[w->loff + w->gap[0]] ^= 0x10;	/* after the checksum */
				injected = 1;
			}
			wr[j].opcode = d->kind == K_SEND ? IBV_WR_SEND : d->kind == K_SEND_IMM ? IBV_WR_SEND_WITH_IMM :
				       d->kind == K_WRITE ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_WRITE_WITH_IMM;
			e[j].opcode = d->kind <= K_SEND_IMM ? IBV_WC_SEND : IBV_WC_RDMA_WRITE;
			if (w->inl)
				wr[j].send_flags |= IBV_SEND_INLINE;
			if (d->kind == K_SEND_IMM || d->kind == K_WRITE_IMM)
				wr[j].imm_data = htonl(w->imm);
		}
		fill_sges(sg[j], w->loff, w->nsge, w->sge, w->gap);
		if (inject && !injected && !strcmp(inject, "len") && w->len >= 2 && d->kind != K_READ &&
		    d->kind != K_WRITE) {
			sg[j][0].length--;
			injected = 1;
		}
		if (inject && !injected && !strcmp(inject, "imm") && (d->kind == K_SEND_IMM || d->kind == K_WRITE_IMM)) {
			wr[j].imm_data = htonl(w->imm ^ 1);
			injected = 1;
		}
		wr[j].wr.rdma.remote_addr = peer.addr + w->roff;
		wr[j].wr.rdma.rkey = peer.rkey;
	}
	if (inject && !injected && !strcmp(inject, "replay") && d->kind == K_FADD && d->nwr < MAXWR) {
		wr[d->nwr - 1].next = &wr[d->nwr];	/* the last atomic once more */
		wr[d->nwr] = wr[d->nwr - 1];
		wr[d->nwr].next = NULL;
		injected = 1;
	}
	recv_msg(1, &m);	/* READY: the target has laid out its side */
	if (m.c.fatal) {
		mine.fatal = 1;
		send_msg(2, cs);
		recv_msg(3, &m);
		return;
	}
	if (ibv_post_send(qp, wr, &badwr)) {
		bad(NULL, "ibv_post_send failed at WR %ld: %s", (long)(badwr - wr), strerror(errno));
		mine.fatal = 1;
	} else {
		rc = expect_wcs(e, d->nwr, NULL);
		if (rc)
			mine.fatal = 1;
		else
			no_extra("after the requester's completions");
	}
	if (!mine.fatal && d->kind == K_READ)
		for (j = 0; j < d->nwr; j++) {
			if (inject && !injected && !strcmp(inject, "data")) {
				buf[d->w[j].loff + d->w[j].len / 2 + d->w[j].gap[0]] ^= 0x01;
				injected = 1;
			}
			pattern(scratch, d->op, j, d->w[j].len, d->poison);
			check_pieces(d, j, d->w[j].loff, d->w[j].nsge, d->w[j].sge, d->w[j].gap, d->w[j].len,
				     "read data");
		}
	if (!mine.fatal && atomic)
		for (j = 0; j < d->nwr; j++) {
			uint64_t got;

			memcpy(&got, buf + atom_off + 8 * (NAWORDS + j), 8);
			if (got != ret[j])
				bad(&mine.corrupt, "WR %u: %s on word %u returned 0x%016" PRIx64 ", want original 0x%016" PRIx64,
				    j, kname[d->kind], d->w[j].aword, got, ret[j]);
		}
	send_msg(2, cs);	/* DONE + checksums of what was sent */
	recv_msg(3, &m);	/* VERDICT */
	if (m.c.fatal)
		mine.fatal = 1;
}

/* ---- one op, this side as target ---- */
static void target(const struct desc *d)
{
	struct ibv_recv_wr rw[MAXWR], *badrw;
	struct ibv_sge sg[MAXWR][MAXSGE];
	struct expect e[MAXWR];
	struct msg m;
	uint64_t ret[MAXWR], fin[3];
	uint32_t j;
	int recvs = d->kind == K_SEND || d->kind == K_SEND_IMM || d->kind == K_WRITE_IMM;
	int atomic = d->kind == K_FADD || d->kind == K_CAS;

	memset(rw, 0, sizeof(rw));
	for (j = 0; j < d->nwr; j++) {
		const struct wrd *w = &d->w[j];

		if (atomic)
			continue;
		if (d->kind <= K_SEND_IMM) {
			uint64_t sp = span(w->rnsge, w->rsge, w->rgap);

			memset(buf + w->roff - GUARD, d->poison, sp + 2 * GUARD);
			fill_sges(sg[j], w->roff, w->rnsge, w->rsge, w->rgap);
			rw[j].num_sge = w->rnsge;
		} else {
			memset(buf + w->roff - GUARD, d->poison, w->len + 2 * GUARD);
			if (d->kind == K_READ) {
				pattern(scratch, d->op, j, w->len, d->poison);
				memcpy(buf + w->roff, scratch, w->len);
			}
			rw[j].num_sge = 0;
		}
		rw[j].wr_id = wrid(d->op, j, 1);
		rw[j].sg_list = sg[j];
		rw[j].next = j + 1 < d->nwr ? &rw[j + 1] : NULL;
		e[j] = (struct expect){ .wr_id = rw[j].wr_id, .check_len = 1, .len = w->len, .imm = w->imm,
					.with_imm = d->kind != K_SEND,
					.opcode = d->kind == K_WRITE_IMM ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV };
	}
	if (atomic) {
		uint64_t *aw = (uint64_t *)(buf + atom_off) + d->abase;

		atomic_model(d, ret, fin);
		aw[-1] = aw[3] = POISON64;
		memcpy(aw, d->ainit, 3 * 8);
	}
	if (recvs && ibv_post_recv(qp, rw, &badrw)) {
		bad(NULL, "ibv_post_recv failed at WR %ld: %s", (long)(badrw - rw), strerror(errno));
		mine.fatal = 1;
	}
	send_msg(1, NULL);	/* READY */
	recv_msg(2, &m);	/* DONE: the initiator has all its completions */
	if (m.c.fatal || mine.fatal) {
		mine.fatal = 1;
		send_msg(3, NULL);
		return;
	}
	if (recvs && expect_wcs(e, d->nwr, NULL))
		mine.fatal = 1;
	else
		no_extra("after the responder's work");
	if (atomic) {
		uint64_t *aw = (uint64_t *)(buf + atom_off) + d->abase;

		for (j = 0; j < 3; j++)
			if (aw[j] != fin[j])
				bad(&mine.corrupt, "final word %u (%s buffer offset %zu) is 0x%016" PRIx64 ", want 0x%016" PRIx64
				    " (init 0x%016" PRIx64 ", %u ops; a replayed or lost atomic?)", j, where(),
				    atom_off + 8 * (d->abase + j), aw[j], fin[j], d->ainit[j], d->nwr);
		if (aw[-1] != POISON64 || aw[3] != POISON64)
			bad(&mine.corrupt, "words next to the atomic ones changed: 0x%016" PRIx64 " 0x%016" PRIx64,
			    aw[-1], aw[3]);
	} else if (!mine.fatal) {
		for (j = 0; j < d->nwr; j++) {
			const struct wrd *w = &d->w[j];
			uint32_t one = w->len;

			pattern(scratch, d->op, j, w->len, d->poison);
			if (d->kind <= K_SEND_IMM) {
				uint64_t off[MAXSGE], end, pos = 0, h = 0xcbf29ce484222325ull;
				uint32_t k;

				check_pieces(d, j, w->roff, w->rnsge, w->rsge, w->rgap, w->len, "received");
				layout(w->roff, w->rnsge, w->rsge, w->rgap, off, &end);
				for (k = 0; k < w->rnsge && pos < w->len; k++) {
					uint32_t take = w->len - pos < w->rsge[k] ? w->len - pos : w->rsge[k];

					h = csum_add(h, buf + off[k], take);
					pos += take;
				}
				if (h != m.csum[j])
					bad(&mine.corrupt, "WR %u (%u B): checksum of the received bytes 0x%016" PRIx64
					    " != sender's 0x%016" PRIx64, j, w->len, h, m.csum[j]);
			} else {
				const char *what = d->kind == K_READ ? "read source (must stay)" : "written";

				check_pieces(d, j, w->roff, 1, &one, (uint32_t[]){ 0 }, w->len, what);
				if (d->kind != K_READ &&
				    csum_add(0xcbf29ce484222325ull, buf + w->roff, w->len) != m.csum[j])
					bad(&mine.corrupt, "WR %u (%u B): checksum of the written bytes != sender's 0x%016" PRIx64,
					    j, w->len, m.csum[j]);
			}
		}
	}
	send_msg(3, NULL);	/* VERDICT */
}

/* ---- the client's op generator ---- */
static uint32_t max_sge;	/* both sides */
static uint32_t inline_max;	/* initiator's, per direction: min of both */

static uint32_t draw_size(int kind, int small)
{
	uint32_t m = mtu_bytes, r = rn(100);

	if (small)
		r = r < 50 ? rn(30) : 30 + rn(40);	/* no large sizes in bursts */
	if (r < 7 && kind != K_READ)
		return 0;
	if (r < 14)
		return 1;
	if (r < 26)
		return m - 1 + rn(3);
	if (r < 34)
		return rr(2, 4) * m - 1 + rn(3);
	if (r < 50)
		return rr(2, 4096);
	if (r < 62 && inline_max)
		return rr(1, inline_max);
	if (r < 70)
		return rr(2, 4096);
	return rr(1, maxsize);
}

/* split len into n pieces of >= 1 byte (n <= len); gaps 0-32 (often 0) */
static void split(uint32_t len, uint32_t n, uint32_t *pieces, uint32_t *gaps, int first_gap)
{
	uint64_t wt[MAXSGE], sum = 0, extra = len - n, used = 0;
	uint32_t k;

	for (k = 0; k < n; k++)
		sum += wt[k] = rn(4) ? rr(1, 1000) : rr(1, 10);
	for (k = 0; k < n; k++) {
		uint64_t e = k == n - 1 ? extra - used : extra * wt[k] / sum;

		pieces[k] = 1 + e;
		used += e;
		gaps[k] = (k == 0 && !first_gap) ? 0 : (rn(3) ? 0 : rr(1, 32));
	}
}

static void gen_wr(struct desc *d, struct wrd *w, uint32_t len)
{
	uint32_t n;

	w->len = len;
	n = len ? rr(1, max_sge < len ? max_sge : len) : 0;
	if (len && rn(4) == 0)
		n = 1;
	w->nsge = n;
	split(len, n, w->sge, w->gap, 0);
	if (d->kind <= K_SEND_IMM) {
		uint32_t cap = len + (rn(2) ? 0 : rr(1, 64));

		n = cap ? rr(1, max_sge < cap ? max_sge : cap) : 0;
		w->rnsge = n;
		split(cap, n, w->rsge, w->rgap, 0);
	}
	w->imm = rnd();
	w->inl = d->kind <= K_WRITE_IMM && d->kind != K_READ && len <= inline_max && rn(2);
}

static void gen_desc(struct desc *d, uint32_t op, int kind, int64_t fixed_len)
{
	uint64_t lsp = 0, rsp = 0, lo, ro;
	uint32_t j;

	memset(d, 0, sizeof(*d));
	d->magic = MAGIC;
	d->op = op;
	d->kind = kind;
	d->dir = rn(2);
	d->poison = rn(256);
	inline_max = d->dir ? peer.max_inline : me.max_inline;
	if (kind == K_FADD || kind == K_CAS) {
		uint32_t miss = rn(3) ? MAXWR : rn(MAXWR);

		d->nwr = rn(3) ? rr(1, 16) : 1;
		d->abase = rr(1, NAWORDS - 4);
		for (j = 0; j < 3; j++)
			d->ainit[j] = rn(4) ? rnd() : rn(4) ? 0 : ~0ull;
		for (j = 0; j < d->nwr; j++)
			d->w[j].aword = rn(3);
		if (kind == K_FADD) {
			for (j = 0; j < d->nwr; j++)
				d->w[j].add_cmp = rn(4) ? rnd() : rr(0, 3);
		} else {
			uint64_t cur3[3];

			memcpy(cur3, d->ainit, sizeof(cur3));
			for (j = 0; j < d->nwr; j++) {
				struct wrd *w = &d->w[j];

				w->swap = rnd();
				/* a chain of successful CASes; at most one misses on purpose */
				w->add_cmp = j == miss ? cur3[w->aword] ^ (1ull << rn(64)) : cur3[w->aword];
				if (j != miss)
					cur3[w->aword] = w->swap;
			}
		}
		return;
	}
	d->nwr = rn(8) || fixed_len >= 0 ? 1 : rr(2, 16);
	for (j = 0; j < d->nwr; j++) {
		struct wrd *w = &d->w[j];

		gen_wr(d, w, fixed_len >= 0 && d->nwr == 1 ? (uint32_t)fixed_len : draw_size(kind, d->nwr > 1));
		lsp += span(w->nsge, w->sge, w->gap) + 2 * GUARD;
		rsp += (kind <= K_SEND_IMM ? span(w->rnsge, w->rsge, w->rgap) : w->len) + 2 * GUARD;
	}
	/* WRs laid out one after another from random starts (unaligned too) */
	lo = rr(0, data_size - lsp - GUARD);
	ro = rr(0, data_size - rsp - GUARD);
	for (j = 0; j < d->nwr; j++) {
		struct wrd *w = &d->w[j];

		w->loff = lo + GUARD;
		w->roff = ro + GUARD;
		lo += span(w->nsge, w->sge, w->gap) + 2 * GUARD;
		ro += (kind <= K_SEND_IMM ? span(w->rnsge, w->rsge, w->rgap) : w->len) + 2 * GUARD;
	}
	/* the initiator's offsets are in its own buffer: swap for server-initiated ops */
}

/* per-kind tallies (client) */
static struct { uint64_t ops, wrs, bytes, inl, zero, maxlen, maxsge, fails, burst; } st[NKIND];

static void account(const struct desc *d, uint32_t fails_before)
{
	uint32_t j;

	st[d->kind].ops++;
	st[d->kind].wrs += d->nwr;
	st[d->kind].burst += d->nwr > 1;
	for (j = 0; j < d->nwr; j++) {
		const struct wrd *w = &d->w[j];
		uint32_t b = d->kind >= K_FADD ? 8 : w->len;

		st[d->kind].bytes += b;
		n_bytes += b;
		st[d->kind].inl += w->inl;
		st[d->kind].zero += d->kind < K_FADD && !w->len;
		if (w->len > st[d->kind].maxlen)
			st[d->kind].maxlen = w->len;
		if (w->nsge > st[d->kind].maxsge)
			st[d->kind].maxsge = w->nsge;
		if (w->rnsge > st[d->kind].maxsge)
			st[d->kind].maxsge = w->rnsge;
	}
	n_wrs += d->nwr;
	st[d->kind].fails += mine.fails + srv.fails - fails_before;
}

static void run_op(struct desc *d)
{
	int init = (d->dir == 1) == is_server;

	cur = d;
	if (verbose)
		diag("op %u %s x%u dir %s len0 %u nsge0 %u", d->op, kname[d->kind], d->nwr,
		     d->dir ? "server->client" : "client->server", d->w[0].len, d->w[0].nsge);
	if (init)
		initiator(d);
	else
		target(d);
}

static __attribute__((noreturn)) void usage_to(FILE *f, int rc)
{
	fprintf(f, "usage: integrity -d DEV -g GIDIDX [-s SEED] [-n OPS] [-M MAXSIZE] [-p PORT] [-v] [-Q] [-r RETRY_CNT] [-T TIMEOUT] [-X data|len|imm|replay] "
		"server | client SERVER_IP\n"
		"  -d DEV      the RDMA device (mr0, rxe0)\n"
		"  -g GIDIDX   its RoCE v2 GID index\n"
		"  -s SEED     the operation sequence's seed (client; the server takes the client's)\n"
		"  -n OPS      operations (client)\n"
		"  -M MAXSIZE  largest message, 4096..2^30 bytes (client)\n"
		"  -p PORT     the TCP port both ends meet on, 1..65535 (default 19875)\n"
		"  -v          every operation; -Q: QPs at the device's limits\n"
		"  -r N        the QPs' retry_cnt, 0..7 (default 7): retries before retry exceeded\n"
		"  -T CODE     the QPs' local ACK timeout, 4.096 us * 2^CODE, 1..31 (default 16)\n"
		"  -X WHAT     inject a fault the check must catch: data, len, imm or replay\n"
		"TAP on stdout; exit 0 when every byte checked out.\n");
	exit(rc);
}

static __attribute__((noreturn)) void usage(void)
{
	usage_to(stderr, 2);
}

/* num: S as a whole decimal or 0x number in MIN..MAX, or the usage and exit 2. */
static unsigned long long num(const char *s, unsigned long long min, unsigned long long max)
{
	char *end;
	unsigned long long v;

	errno = 0;
	if (!*s || *s == '-' || *s == '+' || *s == ' ')
		usage();
	v = strtoull(s, &end, 0);
	if (errno || *end || v < min || v > max)
		usage();
	return v;
}

int main(int argc, char **argv)
{
	const char *dev = NULL, *host = NULL;
	int gidx = -1, port = 19875, c;
	struct desc d;
	struct timespec t0, t1;
	double secs;
	uint32_t i;

	setvbuf(stdout, NULL, _IOLBF, 0);
	while ((c = getopt(argc, argv, "d:g:s:n:M:p:vQX:r:T:h")) != -1) {
		switch (c) {
		case 'd': dev = optarg; break;
		case 'g': gidx = (int)num(optarg, 0, 255); break;
		case 's': seed = num(optarg, 0, ~0ull); break;
		case 'n': nops = num(optarg, 0, ~0u); break;
		case 'M': maxsize = num(optarg, 0, ~0ull); break;
		case 'p': port = (int)num(optarg, 1, 65535); break;
		case 'v': verbose = 1; break;
		case 'Q': deep = 1; break;
		case 'r': qp_retry_cnt = (int)num(optarg, 0, 7); break;
		case 'T': qp_timeout = (int)num(optarg, 1, 31); break;
		case 'X':
			inject = optarg;
			if (strcmp(inject, "data") && strcmp(inject, "len") && strcmp(inject, "imm") &&
			    strcmp(inject, "replay"))
				usage();
			break;
		case 'h': usage_to(stdout, 0);
		default: usage();
		}
	}
	if (!dev || gidx < 0 || optind >= argc)
		usage();
	if (!strcmp(argv[optind], "server"))
		is_server = 1;
	else if (!strcmp(argv[optind], "client") && optind + 1 < argc)
		host = argv[optind + 1];
	else
		usage();
	if (maxsize < 4096 || maxsize > (1u << 30))
		usage();

	/* the client's seed, count and size win: it sends them first */
	tcp_setup(host, port);
	if (is_server) {
		xfer(0, &peer, sizeof(peer));
		if (peer.magic != MAGIC)
			die("bad hello from the client");
		seed = peer.seed;
		nops = peer.nops;
		maxsize = peer.maxsize;
	}
	verbs_setup(dev, gidx);
	me.pad = gidx;
	if (is_server) {
		xfer(1, &me, sizeof(me));
	} else {
		xfer(1, &me, sizeof(me));
		xfer(0, &peer, sizeof(peer));
		if (peer.magic != MAGIC)
			die("bad hello from the server");
	}
	qp_connect();
	max_sge = me.max_sge < peer.max_sge ? me.max_sge : peer.max_sge;
	ok("%s %s: QPN %u <-> %u, path MTU %u, max_inline %u/%u, SGEs %u, rd_atomic %u, atomics %s, seed %" PRIu64
	   ", %" PRIu64 " ops up to %" PRIu64 " B, buffer %zu B",
	   is_server ? "server" : "client", dev, me.qpn, peer.qpn, mtu_bytes, me.max_inline, peer.max_inline,
	   max_sge, me.max_rd_atomic < peer.max_rd_atomic ? me.max_rd_atomic : peer.max_rd_atomic,
	   me.atomics && peer.atomics ? "yes" : "NO", seed, nops, maxsize, buf_size);
	if (max_sge < MAXSGE)
		diag("only %u SGEs per WR (device limit)", max_sge);

	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (is_server) {
		for (;;) {
			xfer(0, &d, sizeof(d));
			if (d.magic != MAGIC) {
				errno = EPROTO;
				die("bad op descriptor");
			}
			if (d.kind == K_END)
				break;
			run_op(&d);
			account(&d, mine.fails);
		}
	} else {
		uint32_t sizes[] = { 0, 1, 0, 0, 0, 0 };
		uint32_t fixed = 0, nfixed, ks, si;

		/* prologue: every data kind at 0/1/MTU-1/MTU/MTU+1/MAXSIZE, each atomic kind */
		sizes[2] = mtu_bytes - 1;
		sizes[3] = mtu_bytes;
		sizes[4] = mtu_bytes + 1;
		sizes[5] = maxsize;
		nfixed = 5 * 6 + 2;
		rs = mix(seed);
		for (i = 0; i < nops && !mine.fatal && !srv.fatal; i++) {
			uint32_t before = mine.fails + srv.fails;
			int kind;
			int64_t flen = -1;

			if (fixed < nfixed) {
				ks = fixed / 6;
				si = fixed % 6;
				kind = ks < 5 ? (int)ks : fixed == 30 ? K_FADD : K_CAS;
				if (ks < 5)
					flen = sizes[si];
				if (kind == K_READ && flen == 0)
					flen = 2;	/* zero-length READ is not part of the brief */
				fixed++;
			} else {
				uint32_t r = rn(100);

				kind = r < 15 ? K_SEND : r < 30 ? K_SEND_IMM : r < 45 ? K_WRITE : r < 60 ? K_WRITE_IMM :
				       r < 80 ? K_READ : r < 90 ? K_FADD : K_CAS;
			}
			if ((kind == K_FADD || kind == K_CAS) && !(me.atomics && peer.atomics))
				continue;
			gen_desc(&d, i, kind, flen);
			xfer(1, &d, sizeof(d));
			run_op(&d);
			account(&d, before);
		}
		memset(&d, 0, sizeof(d));
		d.magic = MAGIC;
		d.kind = K_END;
		d.op = i;
		xfer(1, &d, sizeof(d));
	}
	cur = NULL;
	/* closing handshake: both sides are past their last completion; stray
	 * completions (a replay) would show now */
	usleep(300000);
	no_extra("after the last op");
	if (is_server) {
		struct msg m;

		send_msg(3, NULL);
		recv_msg(4, &m);
	} else {
		struct msg m;

		recv_msg(3, &m);	/* the server's final counts (srv) */
		send_msg(4, NULL);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	secs = t1.tv_sec - t0.tv_sec + (t1.tv_nsec - t0.tv_nsec) / 1e9;

	struct counts total = mine;

	if (!is_server) {
		total.fails += srv.fails;
		total.corrupt += srv.corrupt;
		total.lost += srv.lost;
		total.dup += srv.dup;
		for (c = 0; c < NKIND; c++) {
			char what[200];

			snprintf(what, sizeof(what), "%s: %" PRIu64 " ops, %" PRIu64 " WRs (%" PRIu64 " bursts), %" PRIu64
				 " B, %" PRIu64 " zero-length, %" PRIu64 " inline, max %" PRIu64 " B, up to %" PRIu64 " SGEs",
				 kname[c], st[c].ops, st[c].wrs, st[c].burst, st[c].bytes, st[c].zero, st[c].inl,
				 st[c].maxlen, st[c].maxsge);
			if (!st[c].ops)
				ok("%s # SKIP none drawn", what);
			else if (st[c].fails)
				printf("not ok %d - %s (failed checks above)\n", ++tap_n, what);
			else
				ok("%s", what);
		}
		if (total.fails)
			printf("not ok %d - all checks on both sides (%u failed)\n", ++tap_n, total.fails);
		else
			ok("every completion SUCCESS, expected opcode/wr_id/order, none lost or extra; every byte and word "
			   "as expected on both sides");
	} else if (mine.fails) {
		printf("not ok %d - server-side checks (%u failed)\n", ++tap_n, mine.fails);
	} else {
		ok("server-side checks (%" PRIu64 " ops)", st[0].ops + st[1].ops + st[2].ops + st[3].ops + st[4].ops +
		   st[5].ops + st[6].ops);
	}
	printf("# integrity: %" PRIu64 " operations, %" PRIu64 " bytes, %u corrupt, %u lost, %u duplicated"
	       " (%u failed checks, %.1f s, %.2f MB/s, seed %" PRIu64 ")\n",
	       n_wrs, n_bytes, total.corrupt, total.lost, total.dup, total.fails, secs, n_bytes / secs / 1e6, seed);
	printf("1..%d\n", tap_n);
	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	ibv_destroy_comp_channel(chan);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	return total.fails ? 1 : 0;
}
