// SPDX-License-Identifier: GPL-2.0
/*
 * qpscale - many RC QPs between two hosts: how fast they are created,
 * connected and destroyed, and whether every one of them carries data
 * (libibverbs only; one TCP side channel carries the QPNs, PSNs, the GID and
 * the MR's key and address for all QPs, batched, and the round barriers; no
 * rdma_cm).
 *
 *   qpscale -d DEV -g GIDIDX -n NQPS [-r ROUNDS] [-s SIZE] [-p TCPPORT]
 *           [-w OUTSTANDING] [-H HOOK] [-X] [-E] [PEER_IPV4]
 *
 * Without PEER_IPV4 it serves (listens on TCPPORT, default 18600); with it, it
 * is the client. Both sides must be given the same -n, -s and -r.
 *
 * Each side: one PD, one MR of NQPS slots of SIZE bytes (default 64)
 * registered for remote write, one send CQ and one receive CQ (nothing is
 * ever received: RDMA WRITE without immediate consumes no receive WQE), and
 * NQPS RC QPs with small rings (max_send_wr 4, max_recv_wr 1, 1 SGE).
 * Timed separately, each as a rate (QPs/s): creating all QPs, taking all of
 * them INIT -> RTR -> RTS (after the exchange), destroying all of them.
 *
 * Traffic: ROUNDS rounds (default 3). In each, the client posts one signaled
 * RDMA WRITE of SIZE bytes on every QP, round-robin, with at most OUTSTANDING
 * (default 256) in flight, QP i writing slot i of the server's MR; the bytes
 * of each WRITE encode (QP index, round) (a header of both, then a hash of
 * them and the offset). Every completion must be IBV_WC_SUCCESS, opcode
 * RDMA_WRITE, with the wr_id of a WRITE of this round not completed before;
 * none may be missing (120 s without a completion: the rest are lost). Then a
 * TCP barrier, and the server checks every slot against the pattern and
 * reports the corrupt ones (a stale or misdirected slot names the QP and
 * round that it holds).
 *
 * -H HOOK: at five points both sides run `HOOK PHASE` (system(3)) and wait
 * for it: "before" (PD, MR, CQs and the TCP connection exist, no QP yet),
 * "created" (all QPs of both sides created, in RESET), "rts" (all QPs of
 * both sides at RTS, no traffic yet), "traffic" (after the last round),
 * "destroyed" (both sides destroyed all QPs; the PD, MR, CQs still exist).
 * The guest test takes its memory snapshots there; the hooks are outside
 * the timed phases.
 *
 * -X (self-check of the checker, client side): in the last round QP 0
 * writes QP 1's pattern into slot 0; the server must report it and the run
 * must fail.
 *
 * -E (both sides; ROUNDS >= 2): one QP fails while the others run. In round
 * 1 QP 0's WRITE carries a wrong rkey: its completion must be
 * IBV_WC_REM_ACCESS_ERR (IBTA 9.7.5.2.4, class C: both ends of the pair
 * enter the error state). From then on QP 0 is out (nothing posted, its slot
 * not checked), every other QP's WRITEs must still succeed with their bytes
 * checked, and after the last round QP 0 must be in the error state on both
 * sides and every other QP at RTS.
 *
 * With NQPS >= 8000, a "# N QPs created" / "# N QPs at RTR" line every 2000
 * QPs says how far a run got that the OOM killer ended.
 *
 * Output: TAP ("ok N - ..." / "not ok N - ..."), "# " diagnostics and one
 * summary line
 *   # qpscale: role R n N create_s S create_rate C modify_s S modify_rate M
 *     destroy_s S destroy_rate D rounds R writes W completions C errors E
 *     corrupt K lost L traffic_s T
 * (one line). Exit status 0 only if every check passed (the client's covers
 * the server's slot checks too); 2: a setup error (a verbs call failed, the
 * side channel broke), named with its errno.
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
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAGIC 0x9c5ca1e0u
#define CQ_TIMEOUT_MS 120000
#define TCP_TIMEOUT_MS 1800000	/* the peer may be creating 16000 QPs under TCG */
#define SEND_WR 4
#define RECV_WR 1

/* ---- side-channel messages (both guests run the same binary) ---- */
struct hello {
	uint32_t magic, n, size, rounds, mtu, rkey;
	uint64_t addr;
	uint8_t gid[16];
};

struct qpinfo { uint32_t qpn, psn; };

struct msg {
	uint32_t magic, type;	/* 1 ROUND_DONE, 2 ROUND_CHECKED, 3 BARRIER, 4 VERDICT */
	uint32_t round, corrupt, errors, pad;
};

/* ---- state ---- */
static int is_server, sock = -1, tap_n, failed;
static const char *hook;
static uint32_t nqps, size = 64, rounds = 3, window = 256;
static int inject;		/* -X: QP 0 writes QP 1's pattern in the last round */
static int fail_one;		/* -E: QP 0's WRITE of round FAIL_ROUND has a wrong rkey */
#define FAIL_ROUND 1

#define PROG "qpscale"
/* diag, die, ok, now, xfer, tcp_setup: TAP and the TCP side channel */
#include "side.h"

/* -E: QP i's WRITE of round r is the one that must fail */
static int failing(uint32_t i, uint32_t r) { return fail_one && i == 0 && r == FAIL_ROUND; }
/* -E: QP i is out in round r (it failed before) */
static int gone(uint32_t i, uint32_t r) { return fail_one && i == 0 && r > FAIL_ROUND; }
static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_mr *mr;
static struct ibv_cq *scq, *rcq;
static struct ibv_comp_channel *chan;
static struct ibv_qp **qps;
static struct qpinfo *mine, *theirs;
static uint8_t *buf;
static size_t buf_size;
static struct hello me, peer;
static int gidx;

static double rate(uint32_t n, double s) { return s > 0 ? n / s : 0; }

/* ---- the pattern: slot i of round r ---- */
static uint64_t mix(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint8_t pat(uint32_t i, uint32_t r, uint32_t j)
{
	/* bytes 0-3: the QP index, 4-7: the round (little endian), then a hash */
	if (j < 4)
		return (i >> (8 * j)) & 0xff;
	if (j < 8)
		return (r >> (8 * (j - 4))) & 0xff;
	return mix((uint64_t)i << 40 ^ (uint64_t)r << 20 ^ j) & 0xff;
}

static void fill(uint8_t *p, uint32_t i, uint32_t r)
{
	for (uint32_t j = 0; j < size; j++)
		p[j] = pat(i, r, j);
}

/* 0: slot holds (i, r); else 1, with what it holds in *hi, *hr (size >= 8) */
static int bad_slot(const uint8_t *p, uint32_t i, uint32_t r, uint32_t *hi, uint32_t *hr)
{
	uint32_t j;

	for (j = 0; j < size; j++)
		if (p[j] != pat(i, r, j))
			break;
	if (j == size)
		return 0;
	*hi = *hr = UINT32_MAX;
	if (size >= 8) {
		memcpy(hi, p, 4);
		memcpy(hr, p + 4, 4);
	}
	return 1;
}

/* ---- TCP side channel ---- */
static void send_msg(uint32_t type, uint32_t round, uint32_t corrupt, uint32_t errors)
{
	struct msg m = { .magic = MAGIC, .type = type, .round = round, .corrupt = corrupt,
			 .errors = errors };

	xfer(1, &m, sizeof(m));
}

static void recv_msg(uint32_t type, struct msg *m)
{
	xfer(0, m, sizeof(*m));
	if (m->magic != MAGIC || m->type != type) {
		errno = EPROTO;
		die("side channel: got message %u, want %u", m->type, type);
	}
}

/* both sides reach the same point */
static void barrier(uint32_t tag)
{
	struct msg m;

	send_msg(3, tag, 0, 0);
	recv_msg(3, &m);
	if (m.round != tag) {
		errno = EPROTO;
		die("side channel: barrier %u met barrier %u", tag, m.round);
	}
}

static void run_hook(const char *phase)
{
	char *cmd;
	int rc;

	if (!hook)
		return;
	if (asprintf(&cmd, "%s %s", hook, phase) < 0)
		die("asprintf");
	fflush(stdout);
	rc = system(cmd);
	if (rc == -1 || !WIFEXITED(rc) || WEXITSTATUS(rc))
		diag("hook '%s' failed (status %d)", cmd, rc);
	free(cmd);
}

/* ---- verbs ---- */
static void verbs_setup(const char *devname)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_device_attr da;
	struct ibv_port_attr pa;
	union ibv_gid gid;
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
	if ((errno = ibv_query_device(ctx, &da)))
		die("ibv_query_device %s", devname);
	if ((errno = ibv_query_port(ctx, 1, &pa)))
		die("ibv_query_port %s/1", devname);
	if ((errno = ibv_query_gid(ctx, 1, gidx, &gid)))
		die("ibv_query_gid %s/1 index %d", devname, gidx);
	diag("%s: max_qp %d, max_cq %d, max_qp_wr %d, active_mtu %d, port %s", devname, da.max_qp,
	     da.max_cq, da.max_qp_wr, 128 << pa.active_mtu,
	     pa.state == IBV_PORT_ACTIVE ? "ACTIVE" : "not active");
	if ((int)nqps > da.max_qp)
		diag("%u QPs asked for, over the device's max_qp %d", nqps, da.max_qp);
	if (!(pd = ibv_alloc_pd(ctx)))
		die("ibv_alloc_pd");
	if (!(chan = ibv_create_comp_channel(ctx)))
		die("ibv_create_comp_channel");
	/* the client never has more than `window` WRITEs outstanding */
	if (!(scq = ibv_create_cq(ctx, window + 16, NULL, chan, 0)))
		die("ibv_create_cq (send, %u entries)", window + 16);
	if (!(rcq = ibv_create_cq(ctx, 16, NULL, NULL, 0)))
		die("ibv_create_cq (receive, 16 entries)");
	buf_size = (size_t)nqps * size;
	buf = aligned_alloc(4096, (buf_size + 4095) & ~(size_t)4095);
	if (!buf)
		die("allocate %zu bytes", buf_size);
	memset(buf, 0, buf_size);
	mr = ibv_reg_mr(pd, buf, buf_size, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!mr)
		die("ibv_reg_mr of %zu bytes", buf_size);
	qps = calloc(nqps, sizeof(*qps));
	mine = calloc(nqps, sizeof(*mine));
	theirs = calloc(nqps, sizeof(*theirs));
	if (!qps || !mine || !theirs)
		die("allocate the QP tables");
	me.magic = MAGIC;
	me.n = nqps;
	me.size = size;
	me.rounds = rounds;
	me.mtu = pa.active_mtu;
	me.rkey = mr->rkey;
	me.addr = (uintptr_t)buf;
	memcpy(me.gid, gid.raw, 16);
}

/* a line every PROGRESS QPs of a long phase: where it stood if it dies (OOM) */
#define PROGRESS 2000
static void progress(const char *what, uint32_t done, double t0)
{
	if (nqps >= 4 * PROGRESS && done % PROGRESS == 0 && done < nqps)
		diag("%u QPs %s (%.1f s)", done, what, now() - t0);
}

static double create_all(void)
{
	struct ibv_qp_init_attr ia;
	uint64_t seed = mix(time(NULL) ^ (uint64_t)getpid() << 32);
	double t0 = now();

	for (uint32_t i = 0; i < nqps; i++) {
		memset(&ia, 0, sizeof(ia));
		ia.send_cq = scq;
		ia.recv_cq = rcq;
		ia.qp_type = IBV_QPT_RC;
		ia.cap.max_send_wr = SEND_WR;
		ia.cap.max_recv_wr = RECV_WR;
		ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
		ia.sq_sig_all = 0;
		qps[i] = ibv_create_qp(pd, &ia);
		if (!qps[i]) {
			int e = errno;

			diag("ibv_create_qp failed after %u QPs created (%.1f s)", i, now() - t0);
			errno = e;
			die("create RC QP %u of %u", i + 1, nqps);
		}
		mine[i].qpn = qps[i]->qp_num;
		mine[i].psn = mix(seed + i) & 0xffffff;
		progress("created", i + 1, t0);
	}
	return now() - t0;
}

static void exchange(void)
{
	xfer(1, &me, sizeof(me));
	xfer(0, &peer, sizeof(peer));
	if (peer.magic != MAGIC) {
		errno = EPROTO;
		die("side channel: not a qpscale peer");
	}
	if (peer.n != nqps || peer.size != size || peer.rounds != rounds) {
		errno = EINVAL;
		die("the peer runs -n %u -s %u -r %u, this side -n %u -s %u -r %u", peer.n, peer.size,
		    peer.rounds, nqps, size, rounds);
	}
	/* all QPs' numbers and PSNs in one batch each way */
	xfer(1, mine, (size_t)nqps * sizeof(*mine));
	xfer(0, theirs, (size_t)nqps * sizeof(*theirs));
}

static double modify_all(double *t_init, double *t_rtr, double *t_rts)
{
	enum ibv_mtu mtu = me.mtu < peer.mtu ? me.mtu : peer.mtu;
	struct ibv_qp_attr a;
	double t0 = now(), t;
	uint32_t i;
	int e;

	/* state by state over all QPs: each transition timed on its own */
	for (i = 0; i < nqps; i++) {
		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_INIT;
		a.port_num = 1;
		a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
		if ((e = ibv_modify_qp(qps[i], &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				       IBV_QP_ACCESS_FLAGS))) {
			errno = e;
			die("QP %u (qpn %#x) to INIT", i, mine[i].qpn);
		}
	}
	t = now();
	*t_init = t - t0;
	for (i = 0; i < nqps; i++) {
		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_RTR;
		a.path_mtu = mtu;
		a.dest_qp_num = theirs[i].qpn;
		a.rq_psn = theirs[i].psn;
		a.max_dest_rd_atomic = 1;
		a.min_rnr_timer = 12;
		a.ah_attr.is_global = 1;
		memcpy(a.ah_attr.grh.dgid.raw, peer.gid, 16);
		a.ah_attr.grh.sgid_index = gidx;
		a.ah_attr.grh.hop_limit = 64;
		a.ah_attr.port_num = 1;
		if ((e = ibv_modify_qp(qps[i], &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				       IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				       IBV_QP_MIN_RNR_TIMER))) {
			errno = e;
			die("QP %u (qpn %#x) to RTR (peer qpn %#x)", i, mine[i].qpn, theirs[i].qpn);
		}
		progress("at RTR", i + 1, t);
	}
	*t_rtr = now() - t;
	t = now();
	for (i = 0; i < nqps; i++) {
		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_RTS;
		a.timeout = 16;		/* 268 ms */
		a.retry_cnt = 7;
		a.rnr_retry = 7;
		a.sq_psn = mine[i].psn;
		a.max_rd_atomic = 1;
		if ((e = ibv_modify_qp(qps[i], &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				       IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))) {
			errno = e;
			die("QP %u (qpn %#x) to RTS", i, mine[i].qpn);
		}
	}
	*t_rts = now() - t;
	return now() - t0;
}

/* every QP reports RTS (ibv_query_qp): the count that does */
static uint32_t count_rts(void)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	uint32_t n = 0;
	int e;

	for (uint32_t i = 0; i < nqps; i++) {
		if ((e = ibv_query_qp(qps[i], &a, IBV_QP_STATE, &ia))) {
			errno = e;
			die("ibv_query_qp QP %u", i);
		}
		if (a.qp_state == IBV_QPS_RTS)
			n++;
		else if (nqps - n <= 5 || i < 5)
			diag("QP %u (qpn %#x) is in state %d, not RTS", i, mine[i].qpn, a.qp_state);
	}
	return n;
}

static double destroy_all(void)
{
	double t0 = now();
	int e;

	for (uint32_t i = 0; i < nqps; i++) {
		if ((e = ibv_destroy_qp(qps[i]))) {
			errno = e;
			die("ibv_destroy_qp QP %u (qpn %#x)", i, mine[i].qpn);
		}
		qps[i] = NULL;
	}
	return now() - t0;
}

/* ---- traffic (client) ---- */
struct tally { uint64_t writes, completions, errors, lost, corrupt; };

/* judge n completions of round r: *completed counts the good ones */
static uint32_t take(const struct ibv_wc *wc, int n, uint32_t r, uint8_t *done, struct tally *t,
		     uint32_t *outstanding, uint32_t *completed, uint32_t *shown)
{
	uint32_t errs = 0;

	for (int k = 0; k < n; k++) {
		uint32_t i = wc[k].wr_id & 0xffffffff, wr_r = wc[k].wr_id >> 32;

		(*outstanding)--;
		t->completions++;
		if (wr_r != r || i >= nqps || done[i]) {
			errs++;
			if ((*shown)++ < 10)
				diag("round %u: completion with wr_id %#" PRIx64 " (%s), status %s", r,
				     wc[k].wr_id, i < nqps && wr_r == r ? "completed twice" : "unknown",
				     ibv_wc_status_str(wc[k].status));
			continue;
		}
		done[i] = 1;
		if (failing(i, r)) {
			/* an error completion's opcode is undefined (IBTA 11.4.2.1) */
			if (wc[k].status == IBV_WC_REM_ACCESS_ERR && wc[k].qp_num == mine[i].qpn) {
				diag("-E: round %u QP %u (qpn %#x): %s, as it must", r, i, mine[i].qpn,
				     ibv_wc_status_str(wc[k].status));
				(*completed)++;
			} else {
				errs++;
				diag("-E: round %u QP %u (qpn %#x): completion %s, qp_num %#x; wanted "
				     "remote access error", r, i, mine[i].qpn,
				     ibv_wc_status_str(wc[k].status), wc[k].qp_num);
			}
			continue;
		}
		if (wc[k].status != IBV_WC_SUCCESS || wc[k].opcode != IBV_WC_RDMA_WRITE ||
		    wc[k].qp_num != mine[i].qpn) {
			errs++;
			if ((*shown)++ < 10)
				diag("round %u QP %u (qpn %#x): completion %s, opcode %d, qp_num %#x", r, i,
				     mine[i].qpn, ibv_wc_status_str(wc[k].status), wc[k].opcode,
				     wc[k].qp_num);
			continue;
		}
		(*completed)++;
	}
	return errs;
}

/* one round: a WRITE on every QP; returns the errors of this round */
static uint32_t client_round(uint32_t r, uint8_t *done, struct tally *t)
{
	uint32_t next = 0, outstanding = 0, errs = 0, shown = 0, completed = 0;
	struct ibv_wc wc[64];
	double last = now();

	memset(done, 0, nqps);
	for (uint32_t i = 0; i < nqps; i++)
		fill(buf + (size_t)i * size, i, r);
	if (inject && r == rounds - 1) {
		fill(buf, 1, r);
		diag("-X: round %u: QP 0 writes QP 1's pattern (the server must find slot 0 corrupt)", r);
	}
	while (next < nqps || outstanding) {
		struct ibv_cq *ev_cq;
		void *ev_ctx;
		int n, e;

		while (next < nqps && outstanding < window) {
			if (gone(next, r)) {
				done[next++] = 1;
				continue;
			}
			struct ibv_sge sge = { .addr = (uintptr_t)(buf + (size_t)next * size),
					       .length = size, .lkey = mr->lkey };
			struct ibv_send_wr wr = { .wr_id = (uint64_t)r << 32 | next, .sg_list = &sge,
						  .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
						  .send_flags = IBV_SEND_SIGNALED }, *badwr;

			wr.wr.rdma.remote_addr = peer.addr + (uint64_t)next * size;
			wr.wr.rdma.rkey = failing(next, r) ? peer.rkey + 0x100 : peer.rkey;
			if ((e = ibv_post_send(qps[next], &wr, &badwr))) {
				errno = e;
				die("ibv_post_send round %u QP %u (qpn %#x)", r, next, mine[next].qpn);
			}
			t->writes++;
			outstanding++;
			next++;
		}
		n = ibv_poll_cq(scq, 64, wc);
		if (n < 0) {
			errno = EIO;
			die("ibv_poll_cq returned %d", n);
		}
		if (n) {
			errs += take(wc, n, r, done, t, &outstanding, &completed, &shown);
			last = now();
			continue;
		}
		/* nothing to post and the CQ is empty: arm it, look once more, wait */
		if ((e = ibv_req_notify_cq(scq, 0))) {
			errno = e;
			die("ibv_req_notify_cq");
		}
		n = ibv_poll_cq(scq, 64, wc);
		if (n < 0) {
			errno = EIO;
			die("ibv_poll_cq returned %d", n);
		}
		if (n) {
			errs += take(wc, n, r, done, t, &outstanding, &completed, &shown);
			last = now();
			continue;
		}
		struct pollfd pf = { .fd = chan->fd, .events = POLLIN };
		int p = poll(&pf, 1, 1000);

		if (p < 0 && errno != EINTR)
			die("poll on the completion channel");
		if (p > 0) {
			if (ibv_get_cq_event(chan, &ev_cq, &ev_ctx))
				die("ibv_get_cq_event");
			ibv_ack_cq_events(ev_cq, 1);
		} else if (now() - last > CQ_TIMEOUT_MS / 1000.0) {
			uint32_t missing = 0;

			for (uint32_t i = 0; i < next; i++)
				if (!done[i] && missing++ < 5)
					diag("round %u: no completion for QP %u (qpn %#x)", r, i, mine[i].qpn);
			diag("round %u: %u completions missing after %d s without one", r, outstanding,
			     CQ_TIMEOUT_MS / 1000);
			t->lost += outstanding;
			errs += outstanding;
			return errs;
		}
	}
	(void)completed;
	return errs;
}

static uint32_t server_check(uint32_t r)
{
	uint32_t bad = 0, hi, hr;

	for (uint32_t i = 0; i < nqps; i++) {
		if (failing(i, r) || gone(i, r))
			continue;
		if (!bad_slot(buf + (size_t)i * size, i, r, &hi, &hr))
			continue;
		if (bad++ < 10)
			diag("round %u: slot %u (qpn %#x) corrupt: holds QP %u round %u", r, i,
			     mine[i].qpn, hi, hr);
	}
	return bad;
}

static void usage(void)
{
	fprintf(stderr, "usage: qpscale -d DEV -g GIDIDX -n NQPS [-r ROUNDS] [-s SIZE] [-p TCPPORT]\n"
			"               [-w OUTSTANDING] [-H HOOK] [-X] [-E] [PEER_IPV4]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *devname = NULL, *host = NULL;
	int port = 18600, o, gset = 0;
	double t_create, t_modify, t_init, t_rtr, t_rts, t_destroy, t_traffic = 0;
	struct tally t = { 0 };
	uint32_t rts, errs_total = 0, corrupt_total = 0;
	uint8_t *done;
	struct msg m;

	setvbuf(stdout, NULL, _IOLBF, 0);
	while ((o = getopt(argc, argv, "d:g:n:r:s:p:w:H:XE")) != -1) {
		switch (o) {
		case 'd': devname = optarg; break;
		case 'g': gidx = atoi(optarg); gset = 1; break;
		case 'n': nqps = strtoul(optarg, NULL, 0); break;
		case 'r': rounds = strtoul(optarg, NULL, 0); break;
		case 's': size = strtoul(optarg, NULL, 0); break;
		case 'p': port = atoi(optarg); break;
		case 'w': window = strtoul(optarg, NULL, 0); break;
		case 'H': hook = optarg; break;
		case 'X': inject = 1; break;
		case 'E': fail_one = 1; break;
		default: usage();
		}
	}
	if (optind < argc)
		host = argv[optind++];
	if (optind != argc || !devname || !gset || !nqps || !size || !window || nqps > (1u << 24) ||
	    (fail_one && (rounds <= FAIL_ROUND || nqps < 2)))
		usage();
	is_server = !host;
	if (!(done = calloc(nqps, 1)))
		die("allocate");

	verbs_setup(devname);
	tcp_setup(host, port);
	diag("%s: %u RC QPs, %u rounds of %u-byte WRITEs, at most %u outstanding", devname, nqps,
	     rounds, size, window);
	barrier(1);
	run_hook("before");
	barrier(2);

	t_create = create_all();
	ok(1, "created %u RC QPs in %.2f s: %.0f QPs/s", nqps, t_create, rate(nqps, t_create));
	barrier(10);
	run_hook("created");
	barrier(11);
	exchange();
	t_modify = modify_all(&t_init, &t_rtr, &t_rts);
	rts = count_rts();
	ok(rts == nqps, "%u of %u QPs at RTS; INIT+RTR+RTS in %.2f s: %.0f QPs/s (INIT %.0f/s, RTR %.0f/s, "
	   "RTS %.0f/s)", rts, nqps, t_modify, rate(nqps, t_modify), rate(nqps, t_init),
	   rate(nqps, t_rtr), rate(nqps, t_rts));
	barrier(3);
	run_hook("rts");
	barrier(4);

	for (uint32_t r = 0; r < rounds; r++) {
		double t0 = now(), dt;
		uint32_t errs = 0, corrupt;

		if (!is_server) {
			uint64_t c0 = t.completions;

			errs = client_round(r, done, &t);
			dt = now() - t0;
			t_traffic += dt;
			send_msg(1, r, 0, errs);
			recv_msg(2, &m);
			corrupt = m.corrupt;
			errs_total += errs;
			corrupt_total += corrupt;
			ok(!errs && !corrupt, "round %u: %u WRITEs of %u B, %" PRIu64 " completions, %u errors, "
			   "%u corrupt slots (%.2f s, %.0f WRITEs/s)", r, nqps, size, t.completions - c0,
			   errs, corrupt, dt, rate(nqps, dt));
		} else {
			recv_msg(1, &m);
			if (m.round != r) {
				errno = EPROTO;
				die("side channel: round %u done, expected %u", m.round, r);
			}
			corrupt = server_check(r);
			errs_total += m.errors;
			corrupt_total += corrupt;
			send_msg(2, r, corrupt, 0);
			ok(!corrupt && !m.errors, "round %u: %u slots checked, %u corrupt (client: %u errors)",
			   r, nqps, corrupt, m.errors);
		}
	}
	if (fail_one) {
		struct ibv_qp_attr a;
		struct ibv_qp_init_attr ia;
		uint32_t rts_others = 0;
		int st0 = -1, e;

		for (uint32_t i = 0; i < nqps; i++) {
			if ((e = ibv_query_qp(qps[i], &a, IBV_QP_STATE, &ia))) {
				errno = e;
				die("ibv_query_qp QP %u", i);
			}
			if (i == 0)
				st0 = a.qp_state;
			else if (a.qp_state == IBV_QPS_RTS)
				rts_others++;
		}
		ok(st0 == IBV_QPS_ERR && rts_others == nqps - 1,
		   "-E: QP 0 in the error state (state %d), the other %u QPs at RTS: %u", st0,
		   nqps - 1, rts_others);
	}
	t.errors = errs_total;
	t.corrupt = corrupt_total;
	barrier(5);
	run_hook("traffic");
	barrier(6);

	t_destroy = destroy_all();
	ok(1, "destroyed %u QPs in %.2f s: %.0f QPs/s", nqps, t_destroy, rate(nqps, t_destroy));
	barrier(7);
	run_hook("destroyed");
	/* the verdict both ways: the client's counts cover the server's checks */
	send_msg(4, 0, failed, 0);
	recv_msg(4, &m);
	if (m.corrupt)
		failed = 1;
	printf("# qpscale: role %s n %u create_s %.3f create_rate %.0f modify_s %.3f modify_rate %.0f "
	       "destroy_s %.3f destroy_rate %.0f rounds %u writes %" PRIu64 " completions %" PRIu64
	       " errors %" PRIu64 " corrupt %" PRIu64 " lost %" PRIu64 " traffic_s %.3f\n",
	       is_server ? "server" : "client", nqps, t_create, rate(nqps, t_create), t_modify,
	       rate(nqps, t_modify), t_destroy, rate(nqps, t_destroy), rounds, t.writes, t.completions,
	       t.errors, t.corrupt, t.lost, t_traffic);

	if (ibv_dereg_mr(mr) || ibv_destroy_cq(scq) || ibv_destroy_cq(rcq) ||
	    ibv_destroy_comp_channel(chan) || ibv_dealloc_pd(pd) || ibv_close_device(ctx))
		die("freeing the PD, MR, CQs or device");
	close(sock);
	return failed || t.errors || t.corrupt || t.lost ? 1 : 0;
}
