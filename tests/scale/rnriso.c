// SPDX-License-Identifier: GPL-2.0
/*
 * rnriso - RC QPs isolated from one whose receiver stops posting receives
 * (RNR): NQPS RC QP pairs between two hosts carry checked SENDs; QP 0's
 * receiver stops posting in every other phase, and the other QPs'
 * throughput must not suffer (libibverbs only; a TCP side channel carries
 * the QPNs, PSNs and GID, the phase barriers and the verdicts; no rdma_cm).
 *
 *   rnriso -d DEV -g GIDIDX [-q NQPS] [-s SIZE] [-m MSGS] [-w DEPTH] [-r REPS]
 *          [-t RNR_TIMER] [-R MIN_RATIO] [-p TCPPORT] [-X corrupt|error|slow]
 *          [PEER_IPV4]
 *
 * Without PEER_IPV4 it serves (the receiver; listens on TCPPORT, default
 * 18900); with it, it is the client (the sender). The client's -q, -s, -m,
 * -w, -r, -t and -X are sent to the server, which takes them.
 *
 * NQPS (default 8, 2..64) RC QPs each side, one PD, one send CQ, one receive
 * CQ. Every QP: timeout 16 (268 ms), retry_cnt 7, rnr_retry 7 (infinite: an
 * RNR wait never fails the QP), min_rnr_timer RNR_TIMER (IBTA table 45 code,
 * default 24: 40.96 ms; the responder's value, which its RNR NAKs carry). A
 * long timer keeps the refused SEND waiting most of the time (with 12, 0.64
 * ms, what ibv_rc_pingpong and perftest use, a TCG round trip of several ms
 * is most of each retry cycle), so that a wait that held back more than its
 * own QP would show.
 *
 * REPS (default 7) repetitions of two phases, each started by a barrier:
 *   baseline  the server keeps every QP's receive queue stocked; the client
 *             sends MSGS (default 64) SENDs of SIZE (default 16384) bytes on
 *             every QP, at most DEPTH (default 4) outstanding per QP.
 *   rnr       QP 0's receive queue is empty (the baseline used up exactly the
 *             receives posted for it) and the server posts none; the client
 *             posts DEPTH SENDs on QP 0 first, then MSGS on each other QP as
 *             in the baseline. QP 0's first SEND meets RNR and its sender
 *             waits (rnr_retry 7). Once the other QPs' SENDs have all
 *             completed, QP 0 must have completed none; then the server posts
 *             DEPTH receives on QP 0, and its DEPTH SENDs must complete.
 * The healthy QPs (1..NQPS-1) are timed in both phases, from the barrier to
 * the last of their completions: "healthy MiB/s". Per repetition, ratio =
 * rnr healthy MiB/s / baseline healthy MiB/s (in the baseline QP 0 competes
 * with them; in the rnr phase it waits: a ratio near or above 1 means they
 * were not hurt). The check: the median ratio >= MIN_RATIO (default 0.6;
 * Documentation/testing.rst, "Isolation under RNR", gives the noise floor).
 *
 * Every SEND's bytes encode (QP, phase, sequence) (a header word, then words
 * derived from it); the server checks each receive's status, opcode, length,
 * QP and bytes, and that each QP's messages arrive in order, none missing or
 * twice. Every send completion: IBV_WC_SUCCESS, opcode SEND, its own wr_id,
 * in order per QP; none missing (120 s without a completion: the rest are
 * lost).
 *
 * -X (client; the run must fail): in the last repetition's rnr phase,
 *   corrupt  QP 1's second message has one byte flipped after its pattern is
 *            written (the server must find it corrupt);
 *   error    QP 1's second SEND names a wrong lkey (a local protection error
 *            on a healthy QP);
 *   slow     in every rnr phase, the client holds the healthy QPs back for as
 *            long as the repetition's baseline took before it posts their
 *            SENDs (a stall as long as their work: the ratios fall to about
 *            0.5).
 *
 * Output: TAP, "# " diagnostics, and on the client one summary line
 *   # rnriso: dev D nqps N size S msgs M reps R min_rnr_timer T base_mibs
 *     a,b,.. rnr_mibs a,b,.. ratios a,b,.. median X min_ratio Y bad B
 * (B: error completions, corrupt, out-of-order and lost messages in all).
 * Exit status 0 only if every check passed (the client's covers the
 * server's checks); 2: a setup error, named with its errno.
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

#define MAGIC 0x7a11ed00u
#define MAXQ 64
#define RDEPTH 64		/* receives kept posted on each healthy QP */
#define CQ_TIMEOUT_S 120.0
#define TCP_TIMEOUT_MS 600000

enum { X_NONE, X_CORRUPT, X_ERROR, X_SLOW };
/* side-channel message types */
enum { M_BARRIER = 1, M_DONE, M_DONE2, M_VERDICT };

/* the client's parameters, which the server takes */
struct params { uint32_t magic, nqps, size, msgs, depth, reps, inject, rnr_timer; };

struct hello {
	uint32_t magic, nqps, mtu, pad;
	uint8_t gid[16];
	uint32_t qpn[MAXQ], psn[MAXQ];
};

struct msg {
	uint32_t magic, type, phase, stop;	/* BARRIER: the client stops the run */
	uint32_t count[MAXQ];	/* DONE/DONE2: good send completions per QP */
	uint32_t corrupt, errors, lost, order;	/* VERDICT */
};

static int is_server, sock = -1, tap_n, failed, gidx;
static uint32_t nqps = 8, size = 16384, msgs = 64, depth = 4, reps = 7, rnr_timer = 24;
static uint32_t inject;
static double min_ratio = 0.6;
static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_mr *mr;
static struct ibv_cq *scq, *rcq;
static struct ibv_comp_channel *chan;
static struct ibv_qp *qps[MAXQ];
static uint8_t *buf;
static struct hello me, peer;

#define PROG "rnriso"
#include "side.h"

/* ---- the pattern: message `seq` of QP `q` in phase `ph` ---- */
static uint64_t head(uint32_t q, uint32_t ph, uint32_t seq)
{
	return (uint64_t)q << 48 | (uint64_t)(ph & 0xffff) << 32 | seq;
}

static uint64_t word(uint64_t h, uint32_t k)
{
	return k ? (h * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)k * 0xd6e8feb86659fd93ull) : h;
}

static void fill(uint8_t *p, uint32_t q, uint32_t ph, uint32_t seq)
{
	uint64_t h = head(q, ph, seq);

	for (uint32_t k = 0; k < size / 8; k++) {
		uint64_t w = word(h, k);

		memcpy(p + 8 * k, &w, 8);
	}
}

/* 0: p holds message (q, ph, seq); else 1 */
static int bad_msg(const uint8_t *p, uint32_t q, uint32_t ph, uint32_t seq)
{
	uint64_t h = head(q, ph, seq), w;

	for (uint32_t k = 0; k < size / 8; k++) {
		memcpy(&w, p + 8 * k, 8);
		if (w != word(h, k))
			return 1;
	}
	return 0;
}

/* ---- side-channel messages ---- */
static void send_msg(struct msg *m, uint32_t type, uint32_t phase)
{
	m->magic = MAGIC;
	m->type = type;
	m->phase = phase;
	xfer(1, m, sizeof(*m));
}

static void recv_msg(struct msg *m, uint32_t type, uint32_t phase)
{
	xfer(0, m, sizeof(*m));
	if (m->magic != MAGIC || m->type != type || m->phase != phase) {
		errno = EPROTO;
		die("side channel: got message %u of phase %u, want %u of phase %u", m->type,
		    m->phase, type, phase);
	}
}

/* both sides reach phase `phase`; returns 1 if either asks to stop there */
static int barrier(uint32_t phase, uint32_t stop)
{
	struct msg m = { .stop = stop };

	send_msg(&m, M_BARRIER, phase);
	recv_msg(&m, M_BARRIER, phase);
	return stop || m.stop;
}

/* ---- verbs ---- */
static size_t slots(void) { return is_server ? RDEPTH : depth; }
static uint8_t *slot(uint32_t q, uint32_t s) { return buf + ((size_t)q * slots() + s) * size; }

static void verbs_setup(const char *devname)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_port_attr pa;
	union ibv_gid gid;
	size_t len;
	unsigned i;

	for (i = 0; l && l[i]; i++)
		if (!strcmp(ibv_get_device_name(l[i]), devname))
			break;
	if (!l || !l[i]) {
		errno = ENODEV;
		die("no RDMA device %s", devname);
	}
	ctx = ibv_open_device(l[i]);
	ibv_free_device_list(l);
	if (!ctx)
		die("ibv_open_device %s", devname);
	chk(ibv_query_port(ctx, 1, &pa), "ibv_query_port %s/1", devname);
	chk(ibv_query_gid(ctx, 1, gidx, &gid), "ibv_query_gid %s/1 index %d", devname, gidx);
	if (!(pd = ibv_alloc_pd(ctx)))
		die("ibv_alloc_pd");
	if (!(chan = ibv_create_comp_channel(ctx)))
		die("ibv_create_comp_channel");
	if (!(scq = ibv_create_cq(ctx, nqps * depth + 16, NULL, chan, 0)))
		die("ibv_create_cq (send)");
	if (!(rcq = ibv_create_cq(ctx, nqps * RDEPTH + 16, NULL, chan, 0)))
		die("ibv_create_cq (receive)");
	len = (size_t)nqps * slots() * size;
	if (!(buf = aligned_alloc(4096, (len + 4095) & ~(size_t)4095)))
		die("allocate %zu bytes", len);
	memset(buf, 0, len);
	if (!(mr = ibv_reg_mr(pd, buf, len, IBV_ACCESS_LOCAL_WRITE)))
		die("ibv_reg_mr of %zu bytes", len);
	for (i = 0; i < nqps; i++) {
		struct ibv_qp_init_attr ia = {
			.send_cq = scq, .recv_cq = rcq, .qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = depth, .max_recv_wr = RDEPTH,
				 .max_send_sge = 1, .max_recv_sge = 1 },
		};

		if (!(qps[i] = ibv_create_qp(pd, &ia)))
			die("create RC QP %u", i);
		me.qpn[i] = qps[i]->qp_num;
		me.psn[i] = (uint32_t)(rand() & 0xffffff);
	}
	me.magic = MAGIC;
	me.nqps = nqps;
	me.mtu = pa.active_mtu;
	memcpy(me.gid, gid.raw, 16);
}

static void connect_qps(void)
{
	enum ibv_mtu mtu = me.mtu < peer.mtu ? me.mtu : peer.mtu;
	struct ibv_qp_attr a;

	for (uint32_t i = 0; i < nqps; i++) {
		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_INIT;
		a.port_num = 1;
		chk(ibv_modify_qp(qps[i], &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  IBV_QP_ACCESS_FLAGS), "QP %u (qpn %#x) to INIT", i, me.qpn[i]);
		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_RTR;
		a.path_mtu = mtu;
		a.dest_qp_num = peer.qpn[i];
		a.rq_psn = peer.psn[i];
		a.max_dest_rd_atomic = 1;
		a.min_rnr_timer = rnr_timer;
		a.ah_attr.is_global = 1;
		memcpy(a.ah_attr.grh.dgid.raw, peer.gid, 16);
		a.ah_attr.grh.sgid_index = gidx;
		a.ah_attr.grh.hop_limit = 64;
		a.ah_attr.port_num = 1;
		chk(ibv_modify_qp(qps[i], &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				  IBV_QP_MIN_RNR_TIMER), "QP %u (qpn %#x) to RTR", i, me.qpn[i]);
		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_RTS;
		a.timeout = 16;		/* 268 ms */
		a.retry_cnt = 7;
		a.rnr_retry = 7;	/* infinite */
		a.sq_psn = me.psn[i];
		a.max_rd_atomic = 1;
		chk(ibv_modify_qp(qps[i], &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				  IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC),
		    "QP %u (qpn %#x) to RTS", i, me.qpn[i]);
	}
}

/* wait up to `ms` for a completion on either CQ (or, on the server, for the
 * socket): the CQs are armed, then `again` polls once more (a completion
 * that came before the arming raises no event), and only if it found
 * nothing does this sleep */
static void wait_event(int ms, int (*again)(void *), void *arg)
{
	struct pollfd pf[2] = { { .fd = chan->fd, .events = POLLIN },
				{ .fd = sock, .events = POLLIN } };
	struct ibv_cq *ev_cq;
	void *ev_ctx;

	chk(ibv_req_notify_cq(scq, 0) || ibv_req_notify_cq(rcq, 0), "ibv_req_notify_cq");
	if (again(arg))
		return;
	if (poll(pf, is_server ? 2 : 1, ms) < 0 && errno != EINTR)
		die("poll");
	if (pf[0].revents & POLLIN) {
		if (ibv_get_cq_event(chan, &ev_cq, &ev_ctx))
			die("ibv_get_cq_event");
		ibv_ack_cq_events(ev_cq, 1);
	}
}

/* ---- the server: receive, check, repost ---- */
struct rx {
	uint32_t phase, got[MAXQ], quota0, posted0;
	uint32_t corrupt, errors, order, shown;
	double last;
};

static void post_recv(uint32_t q, uint32_t s)
{
	struct ibv_sge sge = { .addr = (uintptr_t)slot(q, s), .length = size, .lkey = mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = (uint64_t)q << 16 | s, .sg_list = &sge, .num_sge = 1 },
			   *bad;

	chk(ibv_post_recv(qps[q], &wr, &bad), "ibv_post_recv QP %u slot %u", q, s);
}

/* QP 0's receives: up to its quota of this phase, into free slots */
static uint32_t free0;		/* slots of QP 0 not posted: a stack of indices */
static uint32_t free0_stack[RDEPTH];
static void post0(struct rx *x)
{
	while (x->posted0 < x->quota0 && free0) {
		post_recv(0, free0_stack[--free0]);
		x->posted0++;
	}
}

static int server_poll(void *arg)
{
	struct rx *x = arg;
	struct ibv_wc wc[32];
	int n = ibv_poll_cq(rcq, 32, wc);

	if (n < 0) {
		errno = EIO;
		die("ibv_poll_cq returned %d", n);
	}
	for (int k = 0; k < n; k++) {
		uint32_t q = wc[k].wr_id >> 16, s = wc[k].wr_id & 0xffff;

		x->last = now();
		if (q >= nqps || s >= RDEPTH || wc[k].qp_num != me.qpn[q]) {
			x->errors++;
			diag("phase %u: receive completion with wr_id %#" PRIx64 ", qp_num %#x", x->phase,
			     wc[k].wr_id, wc[k].qp_num);
			continue;
		}
		if (wc[k].status != IBV_WC_SUCCESS || wc[k].opcode != IBV_WC_RECV ||
		    wc[k].byte_len != size) {
			x->errors++;
			if (x->shown++ < 10)
				diag("phase %u QP %u: receive %s, opcode %d, %u bytes", x->phase, q,
				     ibv_wc_status_str(wc[k].status), wc[k].opcode, wc[k].byte_len);
		} else if (bad_msg(slot(q, s), q, x->phase, x->got[q])) {
			uint64_t h;

			memcpy(&h, slot(q, s), 8);
			if (h == head(q, x->phase, x->got[q]))
				x->corrupt++;
			else
				x->order++;
			if (x->shown++ < 10)
				diag("phase %u QP %u message %u: %s (header QP %u phase %u seq %u)",
				     x->phase, q, x->got[q],
				     h == head(q, x->phase, x->got[q]) ? "corrupt" : "out of order",
				     (uint32_t)(h >> 48), (uint32_t)(h >> 32) & 0xffff, (uint32_t)h);
		}
		x->got[q]++;
		if (q) {
			post_recv(q, s);
		} else {
			free0_stack[free0++] = s;
			post0(x);
		}
	}
	return n;
}

/* serve until the client's message `type` came and every QP got what it
 * reports sent; a QP that got less after 30 s without a receive: lost */
static uint32_t serve_until(struct rx *x, uint32_t type, struct msg *m)
{
	int have = 0;
	uint32_t lost = 0;

	x->last = now();
	for (;;) {
		server_poll(x);
		if (!have) {
			struct pollfd pf = { .fd = sock, .events = POLLIN };

			if (poll(&pf, 1, 0) > 0) {
				recv_msg(m, type, x->phase);
				have = 1;
				x->last = now();
			}
		}
		if (have) {
			uint32_t q, short_q = 0;

			for (q = 0; q < nqps; q++)
				if (x->got[q] < m->count[q])
					short_q++;
			if (!short_q)
				return 0;
			if (now() - x->last > 30) {
				for (q = 0; q < nqps; q++)
					if (x->got[q] < m->count[q]) {
						diag("phase %u QP %u: %u of %u received", x->phase, q,
						     x->got[q], m->count[q]);
						lost += m->count[q] - x->got[q];
					}
				return lost;
			}
		}
		wait_event(have ? 100 : 1000, server_poll, x);
	}
}

/* one phase; returns 0, or -1 when the client stopped the run */
static int server_phase(uint32_t ph, int rnr)
{
	struct rx x = { .phase = ph, .quota0 = rnr ? 0 : msgs };
	struct msg m = { 0 };
	uint32_t lost, lo = UINT32_MAX, hi = 0;

	post0(&x);		/* baseline: QP 0 stocked before the start */
	if (barrier(ph, 0))
		return -1;
	lost = serve_until(&x, M_DONE, &m);
	if (rnr) {
		ok(x.got[0] == 0, "phase %u (rnr): QP 0 received %u while the other QPs ran (no receive "
		   "posted)", ph, x.got[0]);
		x.quota0 = depth;
		post0(&x);	/* the receiver posts again */
		lost += serve_until(&x, M_DONE2, &m);
	}
	for (uint32_t q = 1; q < nqps; q++) {
		lo = x.got[q] < lo ? x.got[q] : lo;
		hi = x.got[q] > hi ? x.got[q] : hi;
	}
	ok(!x.corrupt && !x.errors && !x.order && !lost, "phase %u (%s): received %u on QP 0, %u..%u "
	   "on the others: %u corrupt, %u out of order, %u error completions, %u lost", ph,
	   rnr ? "rnr" : "baseline", x.got[0], lo, hi, x.corrupt, x.order, x.errors, lost);
	m.corrupt = x.corrupt;
	m.errors = x.errors;
	m.lost = lost;
	m.order = x.order;
	send_msg(&m, M_VERDICT, ph);
	return 0;
}

/* ---- the client: send, time, judge ---- */
struct tx {
	uint32_t phase, target[MAXQ], posted[MAXQ], done[MAXQ], good[MAXQ], dead[MAXQ];
	uint32_t errors, shown;
	double last;
};

static void post_send(struct tx *t, uint32_t q, int last_rep, int rnr)
{
	uint32_t seq = t->posted[q], s = seq % depth;
	struct ibv_sge sge = { .addr = (uintptr_t)slot(q, s), .length = size, .lkey = mr->lkey };
	struct ibv_send_wr wr = { .wr_id = (uint64_t)t->phase << 40 | (uint64_t)q << 24 | seq,
				  .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;

	fill(slot(q, s), q, t->phase, seq);
	if (last_rep && rnr && q == 1 && seq == 1) {
		if (inject == X_CORRUPT) {
			slot(q, s)[size / 2] ^= 0x40;
			diag("-X corrupt: phase %u QP 1 message 1 has a byte flipped", t->phase);
		} else if (inject == X_ERROR) {
			sge.lkey ^= 0x100;
			diag("-X error: phase %u QP 1 message 1 names a wrong lkey", t->phase);
		}
	}
	chk(ibv_post_send(qps[q], &wr, &bad), "ibv_post_send phase %u QP %u message %u", t->phase, q,
	    seq);
	t->posted[q]++;
}

static int client_poll(void *arg)
{
	struct tx *t = arg;
	struct ibv_wc wc[32];
	int n = ibv_poll_cq(scq, 32, wc);

	if (n < 0) {
		errno = EIO;
		die("ibv_poll_cq returned %d", n);
	}
	for (int k = 0; k < n; k++) {
		uint32_t q = (wc[k].wr_id >> 24) & 0xffff, seq = wc[k].wr_id & 0xffffff;

		t->last = now();
		if (wc[k].wr_id >> 40 != t->phase || q >= nqps || seq != t->done[q] ||
		    wc[k].qp_num != me.qpn[q]) {
			t->errors++;
			diag("phase %u: send completion wr_id %#" PRIx64 " (QP %u expects message %u), "
			     "%s", t->phase, wc[k].wr_id, q, q < nqps ? t->done[q] : 0,
			     ibv_wc_status_str(wc[k].status));
			if (q < nqps)
				t->done[q]++;
			continue;
		}
		t->done[q]++;
		if (wc[k].status != IBV_WC_SUCCESS || wc[k].opcode != IBV_WC_SEND) {
			t->errors++;
			t->dead[q] = 1;		/* the QP is in the error state */
			if (t->shown++ < 10)
				diag("phase %u QP %u message %u: %s, opcode %d", t->phase, q, seq,
				     ibv_wc_status_str(wc[k].status), wc[k].opcode);
			continue;
		}
		t->good[q]++;
	}
	return n;
}

/* q's work of this phase is over (all completed, or the QP failed and
 * everything it posted came back) */
static int finished(struct tx *t, uint32_t q)
{
	return t->done[q] == (t->dead[q] ? t->posted[q] : t->target[q]);
}

/* post on QPs [post, nqps) until QPs [wait, nqps) finished; returns the
 * seconds since t0 */
static double client_run(struct tx *t, uint32_t post, uint32_t wait, int last_rep, int rnr,
			 double t0)
{
	for (;;) {
		uint32_t q, left = 0;

		for (q = post; q < nqps; q++)
			while (!t->dead[q] && t->posted[q] < t->target[q] &&
			       t->posted[q] - t->done[q] < depth)
				post_send(t, q, last_rep, rnr);
		for (q = wait; q < nqps; q++)
			left += !finished(t, q);
		if (!left)
			return now() - t0;
		if (client_poll(t))
			continue;
		if (now() - t->last > CQ_TIMEOUT_S) {
			for (q = wait; q < nqps; q++)
				if (!finished(t, q)) {
					diag("phase %u QP %u: %u of %u SENDs completed, no completion for "
					     "%.0f s", t->phase, q, t->done[q], t->posted[q], CQ_TIMEOUT_S);
					t->errors += t->posted[q] - t->done[q];
					t->done[q] = t->posted[q];
					t->dead[q] = 1;
				}
			return now() - t0;
		}
		wait_event(1000, client_poll, t);
	}
}

static double mibs(double s) { return s > 0 ? (double)(nqps - 1) * msgs * size / s / 1048576 : 0; }

/* one phase; returns the healthy QPs' seconds (<0: a QP failed) */
static double client_phase(uint32_t ph, int rnr, int last_rep, double stall, uint32_t *bad)
{
	struct tx t = { .phase = ph };
	struct msg m = { 0 };
	double t0, th, t2;
	uint32_t q, dead = 0, errs;

	for (q = 0; q < nqps; q++)
		t.target[q] = msgs;
	if (rnr)
		t.target[0] = depth;
	barrier(ph, 0);
	t0 = t.last = now();
	if (rnr) {
		/* QP 0 first: its SENDs meet the empty receive queue */
		while (t.posted[0] < depth)
			post_send(&t, 0, 0, 0);
		if (inject == X_SLOW) {
			diag("-X slow: phase %u: the healthy QPs wait %.2f s before they send", ph, stall);
			usleep((useconds_t)(stall * 1e6));
		}
		th = client_run(&t, 1, 1, last_rep, rnr, t0);
		client_poll(&t);
		ok(t.done[0] == 0, "phase %u (rnr): QP 0 completed %u of its %u SENDs while the other "
		   "%u QPs sent %u each (its receiver posts none)", ph, t.done[0], depth, nqps - 1,
		   msgs);
	} else {
		th = client_run(&t, 0, 1, last_rep, rnr, t0);
		client_run(&t, 0, 0, last_rep, rnr, t0);	/* and QP 0's */
	}
	for (q = 0; q < nqps; q++)
		m.count[q] = t.good[q];
	send_msg(&m, M_DONE, ph);
	if (rnr) {
		/* the receiver posts again: QP 0's SENDs must now complete */
		double r0 = now();

		t.last = r0;
		t2 = client_run(&t, 0, 0, 0, 0, r0);
		ok(t.good[0] == depth, "phase %u (rnr): after the receiver posted again, QP 0 "
		   "completed %u of %u SENDs (%.2f s)", ph, t.good[0], depth, t2);
		for (q = 0; q < nqps; q++)
			m.count[q] = t.good[q];
		send_msg(&m, M_DONE2, ph);
	}
	recv_msg(&m, M_VERDICT, ph);
	for (q = 0; q < nqps; q++)
		dead += t.dead[q];
	errs = t.errors + m.errors + m.corrupt + m.order + m.lost;
	ok(!errs, "phase %u (%s): %u QPs x %u SENDs of %u B%s: %u send errors, %u QPs failed; "
	   "server: %u corrupt, %u out of order, %u receive errors, %u lost; healthy QPs in %.2f s: "
	   "%.2f MiB/s", ph, rnr ? "rnr" : "baseline", nqps - 1, msgs, size,
	   rnr ? ", QP 0 waiting on RNR" : " (and QP 0 too)", t.errors, dead, m.corrupt, m.order,
	   m.errors, m.lost, th, mibs(th));
	*bad += errs;
	return dead || errs ? -1 : th;
}

/* v[0..n) as "a,b,c" into out (at most 1024 bytes); "-" for none */
static const char *join(const double *v, uint32_t n, char *out)
{
	size_t l = 0;

	for (uint32_t i = 0; i < n; i++)
		l += snprintf(out + l, 1024 - l, "%s%.2f", i ? "," : "", v[i]);
	return n ? out : "-";
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void usage(void)
{
	fprintf(stderr, "usage: rnriso -d DEV -g GIDIDX [-q NQPS] [-s SIZE] [-m MSGS] [-w DEPTH]\n"
			"              [-r REPS] [-t RNR_TIMER] [-R MIN_RATIO] [-p TCPPORT]\n"
			"              [-X corrupt|error|slow] [PEER_IPV4]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *devname = NULL, *host = NULL;
	int port = 18900, o, gset = 0;
	double base, rnr, bm[64], rm[64], ratio[64], sorted[64], med = 0;
	uint32_t bad = 0, r, nr = 0;
	char l1[1024], l2[1024], l3[1024];

	setvbuf(stdout, NULL, _IOLBF, 0);
	while ((o = getopt(argc, argv, "d:g:q:s:m:w:r:t:R:p:X:")) != -1) {
		switch (o) {
		case 'd': devname = optarg; break;
		case 'g': gidx = atoi(optarg); gset = 1; break;
		case 'q': nqps = strtoul(optarg, NULL, 0); break;
		case 's': size = strtoul(optarg, NULL, 0); break;
		case 'm': msgs = strtoul(optarg, NULL, 0); break;
		case 'w': depth = strtoul(optarg, NULL, 0); break;
		case 'r': reps = strtoul(optarg, NULL, 0); break;
		case 't': rnr_timer = strtoul(optarg, NULL, 0); break;
		case 'R': min_ratio = strtod(optarg, NULL); break;
		case 'p': port = atoi(optarg); break;
		case 'X':
			inject = !strcmp(optarg, "corrupt") ? X_CORRUPT : !strcmp(optarg, "error") ?
				 X_ERROR : !strcmp(optarg, "slow") ? X_SLOW : (usage(), 0);
			break;
		default: usage();
		}
	}
	if (optind < argc)
		host = argv[optind++];
	is_server = !host;
	if (optind != argc || !devname || !gset || rnr_timer > 31)
		usage();
	srand(time(NULL) ^ getpid());
	tcp_setup(host, port);
	/* the client's parameters hold for both sides */
	if (!is_server) {
		struct params p = { MAGIC, nqps, size, msgs, depth, reps, inject, rnr_timer };

		if (nqps < 2 || nqps > MAXQ || !size || size % 8 || !msgs || msgs > 0xffffff ||
		    !depth || depth > RDEPTH || !reps || reps > 64)
			usage();
		xfer(1, &p, sizeof(p));
	} else {
		struct params p;

		xfer(0, &p, sizeof(p));
		if (p.magic != MAGIC || p.nqps < 2 || p.nqps > MAXQ || !p.size || p.size % 8 ||
		    !p.depth || p.depth > RDEPTH || !p.reps || p.reps > 64 || p.rnr_timer > 31) {
			errno = EPROTO;
			die("side channel: not an rnriso client, or bad parameters");
		}
		nqps = p.nqps, size = p.size, msgs = p.msgs, depth = p.depth;
		reps = p.reps, inject = p.inject, rnr_timer = p.rnr_timer;
	}
	verbs_setup(devname);
	xfer(1, &me, sizeof(me));
	xfer(0, &peer, sizeof(peer));
	if (peer.magic != MAGIC || peer.nqps != nqps) {
		errno = EPROTO;
		die("side channel: bad QP exchange");
	}
	connect_qps();
	if (is_server) {
		/* every healthy QP's receive queue stocked (before the client sends) */
		for (uint32_t q = 1; q < nqps; q++)
			for (uint32_t s = 0; s < RDEPTH; s++)
				post_recv(q, s);
		for (uint32_t s = 0; s < RDEPTH; s++)
			free0_stack[free0++] = s;
	}
	diag("%s: %u RC QPs, %u SENDs of %u B per QP and phase, %u outstanding per QP, %u repetitions, "
	     "min_rnr_timer %u, rnr_retry 7", devname, nqps, msgs, size, depth, reps, rnr_timer);
	barrier(0xffff, 0);

	for (r = 0; r < reps; r++) {
		int last = r == reps - 1;

		if (is_server) {
			if (server_phase(2 * r + 1, 0) || server_phase(2 * r + 2, 1))
				break;
			continue;
		}
		base = client_phase(2 * r + 1, 0, last, 0, &bad);
		rnr = base < 0 ? -1 : client_phase(2 * r + 2, 1, last, base, &bad);
		if (base < 0 || rnr < 0) {
			/* a QP failed: the later phases cannot run */
			if (r + 1 < reps || base < 0)
				barrier(base < 0 ? 2 * r + 2 : 2 * r + 3, 1);
			break;
		}
		bm[nr] = mibs(base);
		rm[nr] = mibs(rnr);
		ratio[nr] = sorted[nr] = base / rnr;
		nr++;
	}
	if (!is_server) {
		join(ratio, nr, l3);
		if (nr == reps) {
			qsort(sorted, nr, sizeof(*sorted), cmp);
			med = nr % 2 ? sorted[nr / 2] : (sorted[nr / 2 - 1] + sorted[nr / 2]) / 2;
			ok(med >= min_ratio, "the %u healthy QPs with QP 0 on RNR against the baseline: "
			   "throughput ratios %s, median %.2f (at least %.2f)", nqps - 1, l3, med,
			   min_ratio);
		} else {
			ok(0, "the throughput ratio: only %u of %u repetitions ran", nr, reps);
		}
		printf("# rnriso: dev %s nqps %u size %u msgs %u reps %u min_rnr_timer %u base_mibs %s "
		       "rnr_mibs %s ratios %s median %.2f min_ratio %.2f bad %u\n", devname, nqps,
		       size, msgs, reps, rnr_timer, join(bm, nr, l1), join(rm, nr, l2), join(ratio, nr, l3),
		       med, min_ratio, bad);
	}
	/* the verdict both ways, then a clean teardown */
	{
		struct msg m = { 0 };

		m.errors = failed;
		send_msg(&m, M_VERDICT, 0);
		recv_msg(&m, M_VERDICT, 0);
		if (m.errors)
			failed = 1;
	}
	for (uint32_t q = 0; q < nqps; q++)
		if (ibv_destroy_qp(qps[q]))
			die("ibv_destroy_qp QP %u", q);
	if (ibv_dereg_mr(mr) || ibv_destroy_cq(scq) || ibv_destroy_cq(rcq) ||
	    ibv_destroy_comp_channel(chan) || ibv_dealloc_pd(pd) || ibv_close_device(ctx))
		die("freeing the PD, MR, CQs or device");
	close(sock);
	return failed || bad ? 1 : 0;
}
