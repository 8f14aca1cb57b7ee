// SPDX-License-Identifier: GPL-2.0
/*
 * exerciser, section 4: posting and polling through the shared rings
 * without a peer -- RQ full, SQ posting outside RTS, flush completions on
 * ERR, the SRQ ring, MW bind/invalidate. The only packets are loopback ones
 * to the device itself: RC sends to our own GID and a QPN nobody has (never
 * acked, flushed on ERR), and one UD send (completes at once; the UD SQ flush
 * is therefore not checked).
 */
#include "exerciser.h"

static void check_flush(struct ibv_cq *cq, struct ibv_qp *qp, int n, uint64_t base,
			const char *what)
{
	struct ibv_wc *wc = calloc(n + 1, sizeof(*wc));
	char bad[200] = "";
	int got, i, extra;

	got = poll_n(cq, wc, n, 10);
	for (i = 0; i < got && !bad[0]; i++) {
		if (wc[i].status != IBV_WC_WR_FLUSH_ERR)
			snprintf(bad, sizeof(bad), "wc %d status %s", i, ibv_wc_status_str(wc[i].status));
		else if (wc[i].wr_id != base + i)
			snprintf(bad, sizeof(bad), "wc %d wr_id %#llx, want %#llx", i,
				 (unsigned long long)wc[i].wr_id, (unsigned long long)(base + i));
		else if (wc[i].qp_num != qp->qp_num)
			snprintf(bad, sizeof(bad), "wc %d qp_num %u, want %u", i, wc[i].qp_num, qp->qp_num);
	}
	extra = poll_extra(cq, 0.2);
	if (!bad[0] && (got != n || extra))
		snprintf(bad, sizeof(bad), "%d completions, want %d", got + extra, n);
	checkd(!bad[0], bad, "%s: %d WR_FLUSH_ERR completions, wr_ids in order", what, n);
	free(wc);
}

void test_rings(struct ibv_pd *pd)
{
	struct ibv_cq *scq = ibv_create_cq(ctx, 256, NULL, NULL, 0);
	struct ibv_cq *rcq = ibv_create_cq(ctx, 256, NULL, NULL, 0);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, BUF_SIZE, IBV_ACCESS_LOCAL_WRITE |
				       IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				       IBV_ACCESS_MW_BIND);
	struct ibv_qp_init_attr ia;
	struct ibv_recv_wr rwr, *bad_r;
	struct ibv_send_wr swr, *bad_s;
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = 64 };
	struct ibv_qp *qp;
	int e, i, ti;

	if (!scq || !rcq || !mr) {
		checkd(0, ename(errno), "rings: setup CQs and MR");
		return;
	}
	sge.lkey = mr->lkey;

	for (ti = 0; ti < 2; ti++) {
		enum ibv_qp_type t = ti ? IBV_QPT_UD : IBV_QPT_RC;
		int nr;

		qp = make_qp(pd, scq, rcq, t, NULL, &ia);
		if (!qp) {
			checkd(0, ename(errno), "%s: create_qp", qpt_name(t));
			continue;
		}
		nr = ia.cap.max_recv_wr;
		memset(&rwr, 0, sizeof(rwr));
		rwr.sg_list = &sge; rwr.num_sge = 1;
		memset(&swr, 0, sizeof(swr));
		swr.sg_list = &sge; swr.num_sge = 1; swr.opcode = IBV_WR_SEND;
		swr.send_flags = IBV_SEND_SIGNALED;

		/* IBTA C10-97.2.1: posting to the RQ in RESET is an immediate
		 * error; the rdma-core rxe provider checks ibv_qp->state. */
		rwr.wr_id = 0xdead;
		e = rcerr(ibv_post_recv(qp, &rwr, &bad_r));
		expect_err(e, EINVAL, "%s post_recv in RESET", qpt_name(t));
		/* post_send in RESET: the provider queues the WQE, the kernel
		 * doorbell (rxe_post_send) fails with qp_state < RTS. */
		swr.wr_id = 0xbeef;
		if (t == IBV_QPT_UD) {
			struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1,
				.grh = { .dgid = gid, .sgid_index = gid_index, .hop_limit = 64 } };

			swr.wr.ud.ah = ibv_create_ah(pd, &aa);
			if (!swr.wr.ud.ah) {
				checkd(0, ename(errno), "%s: create_ah for the send tests", qpt_name(t));
				ibv_destroy_qp(qp);
				continue;
			}
			swr.wr.ud.remote_qpn = DUMMY_QPN;
			swr.wr.ud.remote_qkey = 0x11111111;
		}
		e = rcerr(ibv_post_send(qp, &swr, &bad_s));
		expect_err(e, WANT_SEND_NOT_RTS, "%s post_send in RESET", qpt_name(t));
		/* Back through RESET so whatever the failed posts left behind is reset. */
		ibv_modify_qp(qp, &(struct ibv_qp_attr){ .qp_state = IBV_QPS_RESET }, IBV_QP_STATE);
		e = step(qp, IBV_QPS_RESET, IBV_QPS_INIT);
		expect_err(e, 0, "%s RESET->INIT", qpt_name(t));

		for (i = 0, e = 0; i < nr && !e; i++) {
			rwr.wr_id = 0x1000 + i;
			e = rcerr(ibv_post_recv(qp, &rwr, &bad_r));
		}
		checkd(!e && i == nr, ename(e), "%s post_recv in INIT: %d (the created max_recv_wr) accepted", qpt_name(t), i);
		rwr.wr_id = 0x1000 + nr;
		e = rcerr(ibv_post_recv(qp, &rwr, &bad_r));
		expect_err(e, WANT_RQ_FULL, "%s post_recv number %d (max_recv_wr + 1)", qpt_name(t), nr + 1);
		check(bad_r == &rwr, "%s post_recv overflow sets bad_wr", qpt_name(t));
		/* provider validate: num_sge > max_recv_sge */
		rwr.num_sge = ia.cap.max_recv_sge + 1;
		e = rcerr(ibv_post_recv(qp, &rwr, &bad_r));
		rwr.num_sge = 1;
		/* The ring is full: the provider checks queue_full() before num_sge. */
		expect_err(e, WANT_RQ_FULL, "%s post_recv with num_sge > max_recv_sge on a full RQ", qpt_name(t));

		swr.wr_id = 0xbeef;
		e = rcerr(ibv_post_send(qp, &swr, &bad_s));
		expect_err(e, WANT_SEND_NOT_RTS, "%s post_send in INIT", qpt_name(t));
		/* provider validate_send_wr(): num_sge / inline length */
		swr.num_sge = ia.cap.max_send_sge + 1;
		e = rcerr(ibv_post_send(qp, &swr, &bad_s));
		swr.num_sge = 1;
		expect_err(e, EINVAL, "%s post_send num_sge > max_send_sge", qpt_name(t));
		{
			struct ibv_sge big = sge;

			big.length = ia.cap.max_inline_data + 1;
			swr.sg_list = &big;
			swr.send_flags |= IBV_SEND_INLINE;
			e = rcerr(ibv_post_send(qp, &swr, &bad_s));
			swr.sg_list = &sge;
			swr.send_flags &= ~IBV_SEND_INLINE;
			expect_err(e, EINVAL, "%s post_send inline %u bytes > max_inline_data", qpt_name(t),
				   big.length);
		}

		/* INIT -> ERR flushes the posted receives. */
		e = step(qp, IBV_QPS_INIT, IBV_QPS_ERR);
		expect_err(e, 0, "%s INIT->ERR with %d receives posted", qpt_name(t), nr);
		check_flush(rcq, qp, nr, 0x1000, t == IBV_QPT_RC ? "RC RQ flushed on ERR" : "UD RQ flushed on ERR");
		/* QUIRK: the send WQE whose post failed in INIT (the doorbell said
		 * EINVAL) stays in the shared SQ ring and is flushed on ERR with
		 * its wr_id: a post that failed produces a completion. */
		{
			struct ibv_wc wc[4];
			int n = poll_n(scq, wc, 4, 0.5);
			n += poll_extra(scq, 0.1);

			check(n == 1 && wc[0].wr_id == 0xbeef && wc[0].status == IBV_WC_WR_FLUSH_ERR,
			      "%s the send that failed in INIT is flushed on ERR anyway: %d completion(s) [rxe quirk]",
			      qpt_name(t), n);
		}
		/* QUIRK: IBTA (10.3.1, Error state) completes a WR posted in ERR
		 * with a flush error. The rxe provider writes user receives into
		 * the shared ring without a syscall, so the kernel never learns
		 * of it: no completion appears until something makes rxe run its
		 * flush again, e.g. another modify to ERR (rxe_qp_error()). */
		rwr.wr_id = 0x2000;
		e = rcerr(ibv_post_recv(qp, &rwr, &bad_r));
		expect_err(e, 0, "%s post_recv in ERR", qpt_name(t));
		e = poll_extra(rcq, 0.3);
		check(e == 0, "%s recv posted in ERR is not completed by itself: %d completions [rxe quirk]",
		      qpt_name(t), e);
		e = step(qp, IBV_QPS_ERR, IBV_QPS_ERR);
		expect_err(e, 0, "%s ERR->ERR", qpt_name(t));
		check_flush(rcq, qp, 1, 0x2000, t == IBV_QPT_RC ? "RC recv posted in ERR, after ERR->ERR" : "UD recv posted in ERR, after ERR->ERR");

		/* The SQ: RTS towards ourselves (our own GID, a QPN nobody has),
		 * post sends that are never acked (RC; timeout 31 = hours), then ERR.
		 * The only packets are loopback ones to our own device. UD sends
		 * complete at once, so UD checks the post in RTS only. */
		ibv_modify_qp(qp, &(struct ibv_qp_attr){ .qp_state = IBV_QPS_RESET }, IBV_QP_STATE);
		e = bring_to(qp, IBV_QPS_RTS);
		expect_err(e, 0, "%s RESET->INIT->RTR->RTS after ERR", qpt_name(t));
		if (t == IBV_QPT_RC) {
			int ns = 8;

			for (i = 0, e = 0; i < ns && !e; i++) {
				swr.wr_id = 0x3000 + i;
				e = rcerr(ibv_post_send(qp, &swr, &bad_s));
			}
			checkd(!e, ename(e), "RC post_send x%d in RTS to a QPN nobody has", ns);
			usleep(100000);
			e = poll_extra(scq, 0.05);
			check(e == 0, "RC sends to nowhere do not complete (%d completions)", e);
			e = step(qp, IBV_QPS_RTS, IBV_QPS_ERR);
			expect_err(e, 0, "RC RTS->ERR with %d sends outstanding", ns);
			check_flush(scq, qp, ns, 0x3000, "RC SQ flushed on ERR");
		} else {
			struct ibv_wc wc[2];
			int n;

			swr.wr_id = 0x3000;
			e = rcerr(ibv_post_send(qp, &swr, &bad_s));
			expect_err(e, 0, "UD post_send in RTS (to our own GID, a QPN nobody has)");
			n = poll_n(scq, wc, 1, 10);
			check(n == 1 && wc[0].status == IBV_WC_SUCCESS && wc[0].wr_id == 0x3000 &&
			      wc[0].opcode == IBV_WC_SEND,
			      "UD send completes successfully without a receiver (%d, %s)", n,
			      n ? ibv_wc_status_str(wc[0].status) : "-");
			ibv_destroy_ah(swr.wr.ud.ah);
		}
		ibv_destroy_qp(qp);
	}

	/* SRQ ring: full at its max_wr; flushed receives stay in the SRQ. */
	{
		struct ibv_srq_init_attr sa = { .attr = { .max_wr = 16, .max_sge = 1 } };
		struct ibv_srq *srq = ibv_create_srq(pd, &sa);
		struct ibv_srq_attr q;
		struct ibv_recv_wr *bad;

		if (srq && !ibv_query_srq(srq, &q)) {
			memset(&rwr, 0, sizeof(rwr));
			rwr.sg_list = &sge; rwr.num_sge = 1;
			for (i = 0, e = 0; i < (int)q.max_wr && !e; i++) {
				rwr.wr_id = 0x4000 + i;
				e = rcerr(ibv_post_srq_recv(srq, &rwr, &bad));
			}
			checkd(!e && i == (int)q.max_wr, ename(e), "post_srq_recv: %d (max_wr) accepted", i);
			e = rcerr(ibv_post_srq_recv(srq, &rwr, &bad));
			expect_err(e, WANT_RQ_FULL, "post_srq_recv number %u (max_wr + 1)", q.max_wr + 1);
			ibv_destroy_srq(srq);
		} else {
			checkd(0, ename(errno), "create_srq for the ring check");
		}
	}

	/* MW bind and invalidate: local operations on an RC QP in RTS. */
	if (mw_types()) {
		struct ibv_wc wc[2];
		int n;

		qp = make_qp(pd, scq, rcq, IBV_QPT_RC, NULL, &ia);
		if (!qp || bring_to(qp, IBV_QPS_RTS)) {
			checkd(0, ename(errno), "MW: RC QP in RTS");
			goto out;
		}
		if (mw_types() & 1) {
			struct ibv_mw *mw = ibv_alloc_mw(pd, IBV_MW_TYPE_1);
			struct ibv_mw_bind bind = {
				.wr_id = 0x5001, .send_flags = IBV_SEND_SIGNALED,
				.bind_info = { .mr = mr, .addr = (uintptr_t)buf, .length = 4096,
					       .mw_access_flags = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE },
			};
			uint32_t old = mw ? mw->rkey : 0;

			e = mw ? rcerr(ibv_bind_mw(qp, mw, &bind)) : errno;
			n = e ? 0 : poll_n(scq, wc, 1, 10);
			checkd(!e && n == 1 && wc[0].status == IBV_WC_SUCCESS && wc[0].opcode == IBV_WC_BIND_MW &&
			       wc[0].wr_id == 0x5001 && mw->rkey != old, ename(e),
			       "MW type 1: ibv_bind_mw completes with IBV_WC_BIND_MW and a new rkey");
			/* IBTA allows deallocating a bound type 1 window (it is invalidated). */
			if (mw)
				expect_err(ibv_dealloc_mw(mw), 0, "MW type 1: dealloc while bound");
		}
		if (mw_types() & 2) {
			struct ibv_mw *mw = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
			struct ibv_send_wr w = { .wr_id = 0x5002, .opcode = IBV_WR_BIND_MW,
						 .send_flags = IBV_SEND_SIGNALED };

			if (mw) {
				w.bind_mw.mw = mw;
				w.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
				w.bind_mw.bind_info = (struct ibv_mw_bind_info){ .mr = mr, .addr = (uintptr_t)buf,
					.length = 4096, .mw_access_flags = IBV_ACCESS_REMOTE_READ };
				e = rcerr(ibv_post_send(qp, &w, &bad_s));
				n = e ? 0 : poll_n(scq, wc, 1, 10);
				checkd(!e && n == 1 && wc[0].status == IBV_WC_SUCCESS &&
				       wc[0].opcode == IBV_WC_BIND_MW && wc[0].wr_id == 0x5002, ename(e),
				       "MW type 2: post_send BIND_MW completes with IBV_WC_BIND_MW (%s)",
				       n ? ibv_wc_status_str(wc[0].status) : "no completion");
				memset(&w, 0, sizeof(w));
				w.wr_id = 0x5003; w.opcode = IBV_WR_LOCAL_INV; w.send_flags = IBV_SEND_SIGNALED;
				w.invalidate_rkey = ibv_inc_rkey(mw->rkey);
				e = rcerr(ibv_post_send(qp, &w, &bad_s));
				n = e ? 0 : poll_n(scq, wc, 1, 10);
				checkd(!e && n == 1 && wc[0].status == IBV_WC_SUCCESS &&
				       wc[0].opcode == IBV_WC_LOCAL_INV && wc[0].wr_id == 0x5003, ename(e),
				       "MW type 2: LOCAL_INV of the bound rkey completes (%s)",
				       n ? ibv_wc_status_str(wc[0].status) : "no completion");
				expect_err(ibv_dealloc_mw(mw), 0, "MW type 2: dealloc after invalidate");
			}
		}
		ibv_destroy_qp(qp);
	}
out:
	ibv_dereg_mr(mr);
	ibv_destroy_cq(scq);
	ibv_destroy_cq(rcq);
}
