// SPDX-License-Identifier: GPL-2.0
/*
 * exerciser, section 5 (error paths): the RC transport -- CQ overrun, READs
 * past max_rd_atomic, QPs in the error state, invalid requests (a READ
 * without responder resources among them), SEND with
 * invalidate of an unknown rkey, the RNR timer, retry_cnt 0.
 */
#include "exerciser.h"
#include "errpaths.h"

/* Query qp until it is in state `want` or secs pass; the last state seen. */
static int state_within(struct ibv_qp *qp, enum ibv_qp_state want, double secs)
{
	double end = now() + secs;
	int s;

	while ((s = qp_state(qp, NULL)) != (int)want && now() < end)
		usleep(1000);
	return s;
}

/*
 * Row 3: a CQ overrun -- more completions than the CQ holds, none polled
 * (2 * cqe + 16 signaled WRITEs, past any ring rounding). IBTA 11.6.3: an
 * affiliated asynchronous CQ error. The ring keeps what fits, at least cqe
 * completions, and is not written over: fewer than were generated can be
 * polled.
 * rxe: a CQ asked for 4 entries reports cqe 7 (its ring, 2^n - 1 slots);
 * rxe_cq_post() raises IBV_EVENT_CQ_ERR for each completion that does not
 * fit and drops it; 7 can be polled; the QP stays in RTS.
 */
void ep_cq_overrun(void)
{
	struct ibv_cq *small = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	struct conn_opts o = ep_default;
	struct ibv_qp *a = NULL, *b = NULL;
	struct ibv_wc *wc = NULL;
	char others[160] = "";
	int e = 0, i, k = 0, n = 0, ev = 0;

	if (small && small->cqe < 1000) {
		k = 2 * small->cqe + 16;
		o.depth = k;
		wc = calloc(k, sizeof(*wc));
		a = new_rc_qp(ep.pd, small, ep.cq, &o);
		b = a ? new_rc_qp(ep.pd, ep.cq, ep.cq, &o) : NULL;
	}
	if (!b || !wc || (e = connect_pair_opts(a, b, &o))) {
		checkd(0, ename(e ? e : errno), "error paths: CQ overrun: setup (CQ of 4 (cqe %d), loopback pair)",
		       small ? small->cqe : -1);
		goto out;
	}
	for (i = 0; i < k && !e; i++)
		e = post_wr(a, 0xe300 + i, IBV_WR_RDMA_WRITE, E_SRC, 8, ep.mr->lkey, E_DST, ep.mr->rkey, 0);
	ev = !e && wait_async(IBV_EVENT_CQ_ERR, small, 10, others, sizeof(others));
	usleep(200000);
	n = e ? 0 : ibv_poll_cq(small, k, wc);
	checkd(!e && ev && n >= small->cqe && n < k, ename(e),
	       "error paths: %d signaled WRITEs into a CQ of cqe %d raise IBV_EVENT_CQ_ERR, what fit can be polled, "
	       "at least cqe and fewer than %d (IBTA 11.6.3; rxe rxe_cq_post) (event %s, %d polled, QP %s%s%s)",
	       k, small->cqe, k, ev ? "came" : "missing", n, qps_name(qp_state(a, NULL)),
	       others[0] ? ", other events:" : "", others);
out:
	if (a)
		ibv_destroy_qp(a);
	if (b)
		ibv_destroy_qp(b);
	if (small)
		ibv_destroy_cq(small);
	free(wc);
}

/*
 * Row 6: more READs outstanding than max_rd_atomic (1 on both sides): 64
 * READs of distinct 64-byte blocks into distinct local blocks, posted in
 * one list. The requester holds back what the responder may not take
 * (its initiator depth, max_rd_atomic; rxe check_init_depth()), so all
 * complete successfully, in order, each block in its place. A regression
 * guard.
 */
void ep_many_reads(void)
{
	struct conn_opts o = ep_default;
	struct ibv_send_wr w[64], *bad;
	struct ibv_sge sg[64];
	struct ibv_wc wc[64];
	char *rem = E_MANY, *loc = E_MANY + 4096, why[96] = "";
	int e, n, i;

	o.depth = 64;
	if (ep_pair(&o, "64 READs"))
		return;
	for (i = 0; i < 4096; i++)
		rem[i] = (char)(i / 64 * 3 + i % 64 + 1);
	memset(loc, 0, 4096);
	for (i = 0; i < 64; i++) {
		sg[i] = (struct ibv_sge){ .addr = (uintptr_t)loc + 64 * (63 - i), .length = 64,
					  .lkey = ep.mr->lkey };
		w[i] = (struct ibv_send_wr){ .wr_id = 0xe600 + i, .next = i < 63 ? &w[i + 1] : NULL,
					     .sg_list = &sg[i], .num_sge = 1, .opcode = IBV_WR_RDMA_READ,
					     .send_flags = IBV_SEND_SIGNALED };
		w[i].wr.rdma.remote_addr = (uintptr_t)rem + 64 * i;
		w[i].wr.rdma.rkey = ep.mr->rkey;
	}
	e = rcerr(ibv_post_send(ep.a, w, &bad));
	n = e ? 0 : poll_n(ep.cq, wc, 64, 30);
	for (i = 0; i < n && !why[0]; i++)
		if (wc[i].status != IBV_WC_SUCCESS || wc[i].wr_id != 0xe600 + (uint64_t)i)
			snprintf(why, sizeof(why), "wc %d: wr_id %#llx %s", i,
				 (unsigned long long)wc[i].wr_id, ibv_wc_status_str(wc[i].status));
	for (i = 0; i < 64 && !why[0]; i++)
		if (memcmp(loc + 64 * (63 - i), rem + 64 * i, 64))
			snprintf(why, sizeof(why), "READ %d landed wrong", i);
	checkd(!e && n == 64 && !why[0], e ? ename(e) : why,
	       "error paths: 64 READs posted at once with max_rd_atomic 1 all complete successfully, in order, "
	       "each block in its own buffer (%d completions)", n);
}

/*
 * Row 11(a): a WRITE with a bad rkey is NAKed: the requester completes with
 * IBV_WC_REM_ACCESS_ERR, and the responder, which detected a class C error
 * (IBTA 9.9.3), is in the error state too.
 * rxe: do_class_ac_error() then rxe_qp_error(): responder in ERR.
 * Row 10(a): posting to QPs in the error state. IBTA 10.3.1 (Error state):
 * ibv_post_send returns 0 and the WQE completes with IBV_WC_WR_FLUSH_ERR
 * (rxe: the doorbell accepts ERR, the requester flushes); ibv_post_recv
 * returns 0 and the receive is flushed -- QUIRK (rxe, see test_rings) only
 * once the QP is moved to ERR again.
 */
void ep_err_state(void)
{
	struct ibv_wc wc[4], *w;
	int e, n, sa, sb;

	if (ep_pair(NULL, "QPs in ERR"))
		return;
	n = one_op(ep.a, ep.cq, IBV_WR_RDMA_WRITE, E_SRC, ep.mr->lkey, 64, (uintptr_t)E_DST, ep.mr->rkey ^ 0x100, wc);
	sb = state_within(ep.b, IBV_QPS_ERR, 2);
	sa = qp_state(ep.a, NULL);
	check(n == 1 && wc[0].status == IBV_WC_REM_ACCESS_ERR && sa == IBV_QPS_ERR && sb == IBV_QPS_ERR,
	      "error paths: after a WRITE with a bad rkey (IBV_WC_REM_ACCESS_ERR) both the requester and the "
	      "responder are in ERR (IBTA 9.9.3 class C; rxe) (%s; requester %s, responder %s)",
	      n == 1 ? ibv_wc_status_str(wc[0].status) : "no completion", qps_name(sa), qps_name(sb));

	e = post_wr(ep.a, 0xea01, IBV_WR_SEND, E_SRC, 64, ep.mr->lkey, NULL, 0, 0);
	n = e ? 0 : collect(ep.cq, wc, 4, 0xea01, 5, 0);
	w = find_wc(wc, n, 0xea01);
	checkd(!e && w && w->status == IBV_WC_WR_FLUSH_ERR, ename(e),
	       "error paths: post_send on an RC QP in ERR returns 0, the WQE completes with IBV_WC_WR_FLUSH_ERR "
	       "(IBTA 10.3.1; rxe) (%s)", wc_str(w));
	e = post_recv1(ep.b, NULL, 0xea02, E_RECV, 64);
	n = e ? 0 : collect(ep.cq, wc, 4, 0xea02, 0.3, 0);
	if (!e && !find_wc(wc, n, 0xea02)) {
		e = rcerr(ibv_modify_qp(ep.b, &(struct ibv_qp_attr){ .qp_state = IBV_QPS_ERR }, IBV_QP_STATE));
		n = e ? 0 : collect(ep.cq, wc, 4, 0xea02, 5, 0);
	}
	w = find_wc(wc, n, 0xea02);
	checkd(!e && w && w->status == IBV_WC_WR_FLUSH_ERR, ename(e),
	       "error paths: post_recv on an RC QP in ERR returns 0, the receive completes with IBV_WC_WR_FLUSH_ERR "
	       "(at the latest after ERR->ERR: rxe quirk) (%s)", wc_str(w));
}

/* ibv_wr_atomic_fetch_add (the extended API: the provider's ibv_post_send
 * refuses a misaligned atomic with EINVAL before the device sees it). */
static int ext_fetch_add(struct ibv_qp *qp, uint64_t id, void *raddr, uint64_t add)
{
	struct ibv_qp_ex *qx = ibv_qp_to_qp_ex(qp);
	struct ibv_wc wc[4], *s;
	int e, n;

	ibv_wr_start(qx);
	qx->wr_id = id;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_atomic_fetch_add(qx, ep.mr->rkey, (uintptr_t)raddr, add);
	ibv_wr_set_sge(qx, ep.mr->lkey, (uintptr_t)E_LOC, 8);
	if ((e = rcerr(ibv_wr_complete(qx))))
		return -e;
	n = collect(ep.cq, wc, 4, id, 20, 0);
	s = find_wc(wc, n, id);
	return s ? (int)s->status : -1;
}

/*
 * Row 11(d): a READ to a responder without responder resources
 * (max_dest_rd_atomic 0, IBTA 10.2.4): an invalid request NAK, the
 * requester completes with IBV_WC_REM_INV_REQ_ERR and the responder enters
 * the error state; nothing lands.
 * rxe: check_resource() -> RESPST_ERR_TOO_MANY_RDMA_ATM_REQ -> class C.
 */
static void ep_no_rd_resources(void)
{
	struct conn_opts o = ep_default;
	struct ibv_wc wc;
	int n, st, sb = -1;

	o.no_rd_res = 1;
	if (ep_pair(&o, "READ without responder resources"))
		return;
	memset(E_LOC, 0x5a, 64);
	memset(E_DST, 0x11, 64);
	n = one_op(ep.a, ep.cq, IBV_WR_RDMA_READ, E_LOC, ep.mr->lkey, 64, (uintptr_t)E_DST,
		   ep.mr->rkey, &wc);
	st = n == 1 ? (int)wc.status : -1;
	if (st == IBV_WC_REM_INV_REQ_ERR)
		sb = state_within(ep.b, IBV_QPS_ERR, 5);
	check(st == IBV_WC_REM_INV_REQ_ERR && sb == IBV_QPS_ERR && all_bytes(E_LOC, 0x5a, 64),
	      "error paths: a READ to a responder with max_dest_rd_atomic 0 completes with "
	      "IBV_WC_REM_INV_REQ_ERR, the responder in ERR, nothing landed (IBTA 10.2.4; rxe "
	      "RESPST_ERR_TOO_MANY_RDMA_ATM_REQ) (%s; responder %s)",
	      st >= 0 ? st_str(st) : "not completed", sb >= 0 ? qps_name(sb) : "not checked");
}

/*
 * Row 11(b): an atomic whose remote address is not 8-byte aligned is an
 * invalid request (IBTA 9.4.5): the requester completes with
 * IBV_WC_REM_INV_REQ_ERR and memory is untouched; an aligned one on a fresh
 * pair first shows the pair does atomics.
 * rxe: RESPST_ERR_MISALIGNED_ATOMIC -> NAK invalid request.
 * Row 11(c): a zero-length WRITE_WITH_IMM to a QP whose access flags lack
 * REMOTE_WRITE: an invalid request NAK, IBV_WC_REM_INV_REQ_ERR at the
 * requester, and no receive consumed successfully.
 * rxe: check_qp_attr_access() -> class C invalid request; the responder
 * goes to ERR and flushes the receive.
 */
void ep_invalid_requests(void)
{
	struct conn_opts o = ep_default;
	uint64_t *word = (uint64_t *)E_DST;
	struct ibv_wc wc[8], *s, *r;
	int st1, st2 = -1, e, n;

	o.ext = 1;
	if (!ep_pair(&o, "misaligned atomic")) {
		word[0] = 1000;
		word[1] = 2000;
		st1 = ext_fetch_add(ep.a, 0xeb01, word, 5);
		if (st1 == IBV_WC_SUCCESS && word[0] == 1005)
			st2 = ext_fetch_add(ep.a, 0xeb02, (char *)word + 4, 5);
		check(st1 == IBV_WC_SUCCESS && st2 == IBV_WC_REM_INV_REQ_ERR && word[0] == 1005 && word[1] == 2000,
		      "error paths: FETCH_ADD at remote_addr %% 8 == 4 completes with IBV_WC_REM_INV_REQ_ERR, "
		      "memory untouched (IBTA 9.4.5; rxe RESPST_ERR_MISALIGNED_ATOMIC) (aligned first: %s; "
		      "misaligned: %s; words %llu %llu)", st_str(st1), st_str(st2),
		      (unsigned long long)word[0], (unsigned long long)word[1]);
	}

	o = ep_default;
	o.access = IBV_ACCESS_REMOTE_READ;
	if (ep_pair(&o, "WRITE_WITH_IMM without REMOTE_WRITE"))
		return;
	e = post_recv1(ep.b, NULL, 0xec01, E_RECV, 64);
	e = e ? e : post_wr(ep.a, 0xec02, IBV_WR_RDMA_WRITE_WITH_IMM, NULL, 0, 0, NULL, 0, 0);
	n = e ? 0 : collect(ep.cq, wc, 8, 0xec02, 20, 0.3);
	s = find_wc(wc, n, 0xec02);
	r = find_wc(wc, n, 0xec01);
	checkd(!e && s && s->status == IBV_WC_REM_INV_REQ_ERR && (!r || r->status != IBV_WC_SUCCESS), ename(e),
	       "error paths: a zero-length WRITE_WITH_IMM to a QP without REMOTE_WRITE completes with "
	       "IBV_WC_REM_INV_REQ_ERR, no receive succeeds (rxe check_qp_attr_access) (%s; receive %s)",
	       wc_str(s), r ? wc_str(r) : "pending");
	ep_no_rd_resources();
}

/*
 * Row 12: SEND_WITH_INV carrying an rkey that matches nothing the responder
 * can invalidate (a deregistered MR's): the receive completes in error with
 * IBV_WC_REM_INV_REQ_ERR and the responder goes to ERR.
 * rxe: RESPST_ERR_INVALIDATE_RKEY ("class J"): receive REM_INV_REQ_ERR,
 * responder QP to ERR; the requester's status is reported below.
 */
void ep_send_inv_nothing(void)
{
	struct ibv_wc wc[8], *s, *r;
	int e, n, sb;

	if (ep_pair(NULL, "SEND_WITH_INV of an unknown rkey"))
		return;
	e = post_recv1(ep.b, NULL, 0xed01, E_RECV, 64);
	e = e ? e : post_wr(ep.a, 0xed02, IBV_WR_SEND_WITH_INV, E_SRC, 64, ep.mr->lkey, NULL, ep.dead_rkey, 0);
	n = e ? 0 : collect(ep.cq, wc, 8, 0xed02, 20, 0.3);
	s = find_wc(wc, n, 0xed02);
	r = find_wc(wc, n, 0xed01);
	sb = state_within(ep.b, IBV_QPS_ERR, 2);
	checkd(!e && r && r->status == IBV_WC_REM_INV_REQ_ERR && sb == IBV_QPS_ERR, ename(e),
	       "error paths: SEND_WITH_INV of an rkey that matches nothing: the receive completes with "
	       "IBV_WC_REM_INV_REQ_ERR, the responder goes to ERR (rxe class J) (receive %s, responder %s; "
	       "requester %s)", r ? wc_str(r) : "no completion", qps_name(sb), wc_str(s));
}

/*
 * Row 13: the RNR timer. A SEND with no receive posted is RNR NAKed with
 * the responder's min_rnr_timer; the requester waits that long (IBTA table
 * 45: code 0 = 655.36 ms, 12 = 0.64 ms) before each of its rnr_retry
 * retries, then completes with IBV_WC_RNR_RETRY_EXC_ERR. Lower bounds only.
 * rxe: rnr_nak_timer armed with the NAK's code.
 */
void ep_rnr(void)
{
	static const struct { uint8_t timer, retry; double min; } c[] = {
		{ 0, 1, 0.6 },
		{ 12, 3, 0.0015 },
	};
	struct ibv_wc wc[4], *s;

	for (int i = 0; i < 2; i++) {
		struct conn_opts o = ep_default;
		double t0, t;
		int e, n;

		o.min_rnr_timer = c[i].timer;
		o.rnr_retry = c[i].retry;
		if (ep_pair(&o, "RNR timer"))
			continue;
		t0 = now();
		e = post_wr(ep.a, 0xee01, IBV_WR_SEND, E_SRC, 8, ep.mr->lkey, NULL, 0, 0);
		n = e ? 0 : collect(ep.cq, wc, 4, 0xee01, 30, 0);
		t = now() - t0;
		s = find_wc(wc, n, 0xee01);
		checkd(!e && s && s->status == IBV_WC_RNR_RETRY_EXC_ERR && t >= c[i].min, ename(e),
		       "error paths: SEND with no receive, min_rnr_timer %d, rnr_retry %d: IBV_WC_RNR_RETRY_EXC_ERR "
		       "after >= %g s (IBTA table 45) (%s after %.4f s)", c[i].timer, c[i].retry, c[i].min,
		       wc_str(s), t);
	}
}

/*
 * retry_cnt 0 (IBTA 9.7.6.1.3): no retry, but the first local ACK timeout
 * (4.096 us * 2^timeout) is still waited out. With timeout 18 (1.07 s) and a
 * responder that went to ERR (it drops every packet), the WRITE completes
 * with IBV_WC_RETRY_EXC_ERR after about a second, not at the transport's
 * first few-ms timeout. rxe: 1.08 s.
 * -C (metaroce sharing connections, its default): the responder's QP is a
 * member of a connection that lives on, which answers its packets CLOSED
 * (Documentation/device.rst, "Shared connections"), so the requester learns
 * at once what IBTA makes it wait for: the same status, under a second.
 */
void ep_retry0(void)
{
	struct conn_opts o = ep_default;
	struct ibv_qp_attr at = { .qp_state = IBV_QPS_ERR };
	struct ibv_wc wc[4], *s;
	double t0, t;
	int e, n;

	o.retry_cnt = 0;
	o.timeout = 18;
	if (ep_pair(&o, "retry_cnt 0"))
		return;
	e = rcerr(ibv_modify_qp(ep.b, &at, IBV_QP_STATE));
	t0 = now();
	if (!e)
		e = post_wr(ep.a, 0xef01, IBV_WR_RDMA_WRITE, E_SRC, 64, ep.mr->lkey, E_DST, ep.mr->rkey, 0);
	n = e ? 0 : collect(ep.cq, wc, 4, 0xef01, 30, 0);
	t = now() - t0;
	s = find_wc(wc, n, 0xef01);
	if (shared_conns) {
		checkd(!e && s && s->status == IBV_WC_RETRY_EXC_ERR && t < 1.0, ename(e),
		       "error paths: retry_cnt 0, timeout 18, responder in ERR on a shared connection: "
		       "IBV_WC_RETRY_EXC_ERR before the local ACK timeout (its answer CLOSED) (%s after %.3f s)",
		       wc_str(s), t);
		return;
	}
	checkd(!e && s && s->status == IBV_WC_RETRY_EXC_ERR && t >= 1.0, ename(e),
	       "error paths: retry_cnt 0, timeout 18, silent responder: IBV_WC_RETRY_EXC_ERR after >= 1.0 s "
	       "(one local ACK timeout, IBTA 9.7.6.1.3) (%s after %.3f s)", wc_str(s), t);
}
