// SPDX-License-Identifier: GPL-2.0
/*
 * exerciser, section 5 (error paths): UD -- a UD QP on an SRQ, a SEND longer
 * than the MTU (4096, and the port's active MTU), an AH to an address no
 * route leads to; and the SQ_DRAINED
 * event of RTS->SQD.
 */
#include "exerciser.h"
#include "errpaths.h"

static int post_ud(struct ibv_qp *qp, uint64_t id, struct ibv_ah *ah, uint32_t qpn, void *addr, uint32_t len)
{
	struct ibv_sge sge = { .addr = (uintptr_t)addr, .length = len, .lkey = ep.mr->lkey };
	struct ibv_send_wr w = { .wr_id = id, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED }, *bad;

	w.wr.ud.ah = ah;
	w.wr.ud.remote_qpn = qpn;
	w.wr.ud.remote_qkey = UD_QKEY;
	return rcerr(ibv_post_send(qp, &w, &bad));
}

/* A UD QP in RTS on the section's CQ (qkey UD_QKEY), on srq if given. */
static struct ibv_qp *ud_qp(struct ibv_srq *srq)
{
	struct ibv_qp *qp = make_qp(ep.pd, ep.cq, ep.cq, IBV_QPT_UD, srq, NULL);

	if (qp && bring_to(qp, IBV_QPS_RTS)) {
		ibv_destroy_qp(qp);
		return NULL;
	}
	return qp;
}

static struct ibv_ah *ah_to(const union ibv_gid *dgid)
{
	struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1,
		.grh = { .dgid = *dgid, .sgid_index = gid_index, .hop_limit = 64 } };

	return ibv_create_ah(ep.pd, &aa);
}

/*
 * Row 9: a UD QP on an SRQ. A UD SEND to it (our own GID) is delivered into
 * an SRQ receive: IBV_WC_SUCCESS, byte_len the payload plus the 40-byte GRH
 * area, the payload after that area, src_qp the sender's QPN.
 * Row 14(b): a UD SEND longer than the port's MTU. C10-93.1.1: no packet is
 * emitted and no error generated -- the WQE completes successfully, the QP
 * stays in RTS, nothing arrives, and the next SEND is delivered.
 * rxe: exactly that (its requester "fakes a successful UD send").
 * Row 14(e): the MTU of C10-93.1.1 is the port's active MTU (what
 * ibv_query_port reports, from the netdev's MTU), not 4096: a UD SEND one
 * byte longer than it completes successfully and emits nothing, one of
 * exactly the active MTU is delivered. (Sent to our own address the datagram
 * would travel over lo, whatever the netdev's MTU, so only the emitting side
 * can keep it off the wire.) Not run when the active MTU is 4096.
 * rxe: the same (rxe_requester compares a UD payload with port.mtu_cap, the
 * active MTU rxe_set_mtu() derives from the netdev's MTU).
 */
void ep_ud(void)
{
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 16, .max_sge = 1 } };
	struct ibv_srq *srq = ibv_create_srq(ep.pd, &sa);
	struct ibv_qp *r = srq ? ud_qp(srq) : NULL, *s = r ? ud_qp(NULL) : NULL, *r2 = s ? ud_qp(NULL) : NULL;
	struct ibv_ah *ah = r2 ? ah_to(&gid) : NULL;
	struct ibv_wc wc[8], *w, *big;
	int e, n, st;

	if (!ah) {
		checkd(0, ename(errno), "error paths: UD: setup (SRQ, three UD QPs in RTS, AH to our own GID)");
		goto out;
	}
	for (int i = 0; i < 256; i++)
		E_SRC[i] = (char)(i ^ 0x6b);
	memset(E_RECV, 0, 512);
	e = post_recv1(NULL, srq, 0xe901, E_RECV, 40 + 256);
	e = e ? e : post_ud(s, 0xe902, ah, r->qp_num, E_SRC, 256);
	n = e ? 0 : collect(ep.cq, wc, 8, 0xe901, 10, 0.05);
	w = find_wc(wc, n, 0xe901);
	checkd(!e && w && w->status == IBV_WC_SUCCESS && w->byte_len == 40 + 256 && w->qp_num == r->qp_num &&
	       w->src_qp == s->qp_num && !memcmp(E_RECV + 40, E_SRC, 256), ename(e),
	       "error paths: a UD SEND to a UD QP on an SRQ lands in an SRQ receive: IBV_WC_SUCCESS, 40 + 256 bytes, "
	       "src_qp the sender (%s, byte_len %u, qp_num %u, src_qp %u, data %s)", wc_str(w),
	       w ? w->byte_len : 0, w ? w->qp_num : 0, w ? w->src_qp : 0,
	       memcmp(E_RECV + 40, E_SRC, 256) ? "differs" : "same");

	/* 14(b): 5000 bytes exceed any RoCE MTU. */
	e = post_recv1(r2, NULL, 0xe903, E_RECV, 8192);
	e = e ? e : post_ud(s, 0xe904, ah, r2->qp_num, E_SRC, 5000);
	n = e ? 0 : collect(ep.cq, wc, 8, 0xe904, 10, 0.3);
	big = find_wc(wc, n, 0xe904);
	w = find_wc(wc, n, 0xe903);
	st = qp_state(s, NULL);
	checkd(!e && big && big->status == IBV_WC_SUCCESS && !w && st == IBV_QPS_RTS, ename(e),
	       "error paths: a 5000-byte UD SEND (port active_mtu enum %d) completes with IBV_WC_SUCCESS, emits "
	       "nothing, the QP stays in RTS (C10-93.1.1; rxe) (%s; receive %s; QP %s)", pattr.active_mtu,
	       wc_str(big), w ? wc_str(w) : "none", qps_name(st));
	e = post_ud(s, 0xe905, ah, r2->qp_num, E_SRC, 64);
	n = e ? 0 : collect(ep.cq, wc, 8, 0xe903, 10, 0.05);
	w = find_wc(wc, n, 0xe903);
	checkd(!e && w && w->status == IBV_WC_SUCCESS && w->byte_len == 40 + 64, ename(e),
	       "error paths: after it, a 64-byte UD SEND from the same QP is delivered (%s, byte_len %u)",
	       wc_str(w), w ? w->byte_len : 0);

	/* 14(e): the active MTU is the limit. */
	if (pattr.active_mtu < IBV_MTU_4096) {
		uint32_t mtu = 128u << pattr.active_mtu;

		e = post_recv1(r2, NULL, 0xe906, E_RECV, 8192);
		e = e ? e : post_ud(s, 0xe907, ah, r2->qp_num, E_SRC, mtu + 1);
		n = e ? 0 : collect(ep.cq, wc, 8, 0xe907, 10, 0.3);
		big = find_wc(wc, n, 0xe907);
		w = find_wc(wc, n, 0xe906);
		st = qp_state(s, NULL);
		checkd(!e && big && big->status == IBV_WC_SUCCESS && !w && st == IBV_QPS_RTS, ename(e),
		       "error paths: a UD SEND of the port's active MTU + 1 (%u bytes) completes with "
		       "IBV_WC_SUCCESS, emits nothing, the QP stays in RTS (C10-93.1.1; rxe) (%s; receive %s; QP %s)",
		       mtu + 1, wc_str(big), w ? wc_str(w) : "none", qps_name(st));
		e = post_ud(s, 0xe908, ah, r2->qp_num, E_SRC, mtu);
		n = e ? 0 : collect(ep.cq, wc, 8, 0xe906, 10, 0.05);
		w = find_wc(wc, n, 0xe906);
		checkd(!e && w && w->status == IBV_WC_SUCCESS && w->byte_len == 40 + mtu &&
		       !memcmp(E_RECV + 40, E_SRC, 256), ename(e),
		       "error paths: a UD SEND of exactly the active MTU (%u bytes) is delivered (%s, byte_len %u)",
		       mtu, wc_str(w), w ? w->byte_len : 0);
	}
out:
	if (ah)
		ibv_destroy_ah(ah);
	if (r2)
		ibv_destroy_qp(r2);
	if (s)
		ibv_destroy_qp(s);
	if (r)
		ibv_destroy_qp(r);
	if (srq)
		ibv_destroy_srq(srq);
}

/*
 * Row 14(a): a UD SEND towards an address no route leads to
 * (::ffff:203.0.113.9). ib_core resolves the destination MAC when the AH is
 * created (rdma_addr_find_l2_eth_by_grh, before the driver sees it), with
 * the route lookup bound to the GID's netdev, so the address counts as
 * on-link: on a link that does ARP, ibv_create_ah waits for an answer and
 * fails with ETIMEDOUT after 1 s; on a NOARP link (the one-guest dummy
 * netdev) the AH is created and the SEND completes with IBV_WC_SUCCESS, the
 * QP staying in RTS: UD is unreliable, a datagram lost on the way is no
 * error.
 * rxe: ETIMEDOUT on the two-guest link; on the dummy netdev the AH is
 * created, the SEND completes with IBV_WC_SUCCESS, the QP stays in RTS.
 * Row 14(d): RTS->SQD with IBV_QP_EN_SQD_ASYNC_NOTIFY raises
 * IBV_EVENT_SQ_DRAINED once the SQ is drained (IBTA 10.3.1, 11.6.3).
 * rxe: raised for an idle QP at once (req_check_sq_drain_done).
 */
void ep_ud_route_sqd(void)
{
	union ibv_gid far = { .raw = { [10] = 0xff, [11] = 0xff, [12] = 203, [13] = 0, [14] = 113, [15] = 9 } };
	struct ibv_qp_attr at = { .qp_state = IBV_QPS_SQD, .en_sqd_async_notify = 1 };
	struct ibv_ah *ah;
	char others[160];
	int e, ev;

	errno = 0;
	ah = ah_to(&far);
	e = PERR(ah);
	if (!ah) {
		expect_err(e, WANT_AH_UNRESOLVED, "error paths: create_ah to ::ffff:203.0.113.9 (no route, "
			   "no ARP answer) fails");
	} else {
		struct ibv_qp *s = ud_qp(NULL);
		struct ibv_wc wc[4], *w;
		int n, st;

		e = s ? post_ud(s, 0xef01, ah, DUMMY_QPN, E_SRC, 64) : errno;
		n = e ? 0 : collect(ep.cq, wc, 4, 0xef01, 10, 0);
		w = find_wc(wc, n, 0xef01);
		st = s ? qp_state(s, NULL) : -1;
		checkd(!e && w && w->status == IBV_WC_SUCCESS && st == IBV_QPS_RTS, ename(e),
		       "error paths: a UD SEND through an AH to ::ffff:203.0.113.9 (no route; on a NOARP link "
		       "ib_core takes it as on-link) completes with IBV_WC_SUCCESS, the QP stays in RTS (rxe) "
		       "(%s; QP %s)", wc_str(w), qps_name(st));
		if (s)
			ibv_destroy_qp(s);
		ibv_destroy_ah(ah);
	}

	if (ep_pair(NULL, "SQD event"))
		return;
	e = rcerr(ibv_modify_qp(ep.a, &at, IBV_QP_STATE | IBV_QP_EN_SQD_ASYNC_NOTIFY));
	ev = !e && wait_async(IBV_EVENT_SQ_DRAINED, ep.a, 5, others, sizeof(others));
	checkd(!e && ev, ename(e),
	       "error paths: RTS->SQD with IBV_QP_EN_SQD_ASYNC_NOTIFY raises IBV_EVENT_SQ_DRAINED (IBTA 11.6.3; rxe) "
	       "(%s%s%s)", ev ? "came" : "missing", others[0] ? ", other events:" : "", others);
}
