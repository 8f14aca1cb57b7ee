// SPDX-License-Identifier: GPL-2.0
/*
 * exerciser, section 4 (continued): operations over a loopback RC pair --
 * remote access errors, SEND with invalidate, a SEND longer than its
 * receive, ATOMIC WRITE.
 */
#include "exerciser.h"

/*
 * Remote access errors over a loopback RC pair (two QPs of this device
 * connected to each other through the port's own GID): a WRITE with a wrong
 * rkey, a WRITE into an MR without REMOTE_WRITE, and a READ past the end of
 * an MR must complete with IBV_WC_REM_ACCESS_ERR (IBTA 9.7.5.2.4 NAK, C9-88);
 * a valid WRITE and READ first must move the bytes.
 */
void test_remote_access(struct ibv_pd *pd)
{
	struct ibv_cq *cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	char *src = (char *)buf, *dst = (char *)buf + 16384, *ro = (char *)buf + 32768;
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, 32768, IBV_ACCESS_LOCAL_WRITE |
				       IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	struct ibv_mr *romr = ibv_reg_mr(pd, ro, 4096, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_qp *a = NULL, *b = NULL;
	struct ibv_wc wc[1];
	int e, n;

	if (!cq || !mr || !romr) {
		checkd(0, ename(errno), "remote access: setup (CQ, MRs)");
		goto out;
	}
	e = fresh_pair(pd, cq, &a, &b, NULL);
	checkd(!e, ename(e), "remote access: loopback RC pair connected (QPN %u <-> %u)",
	       a ? a->qp_num : 0, b ? b->qp_num : 0);
	if (e)
		goto out;
	for (int i = 0; i < 8192; i++)
		src[i] = (char)(i * 7 + 3);
	memset(dst, 0, 8192);
	n = one_op(a, cq, IBV_WR_RDMA_WRITE, src, mr->lkey, 8192, (uintptr_t)dst, mr->rkey, wc);
	check(n == 1 && wc[0].status == IBV_WC_SUCCESS && !memcmp(src, dst, 8192),
	      "remote access: loopback RDMA WRITE 8 KiB moves the bytes (%s)",
	      n == 1 ? ibv_wc_status_str(wc[0].status) : "no completion");
	memset(src, 0, 8192);
	n = one_op(a, cq, IBV_WR_RDMA_READ, src, mr->lkey, 8192, (uintptr_t)dst, mr->rkey, wc);
	check(n == 1 && wc[0].status == IBV_WC_SUCCESS && !memcmp(src, dst, 8192),
	      "remote access: loopback RDMA READ 8 KiB brings them back (%s)",
	      n == 1 ? ibv_wc_status_str(wc[0].status) : "no completion");
	n = one_op(a, cq, IBV_WR_RDMA_WRITE, src, mr->lkey, 64, (uintptr_t)dst, mr->rkey ^ 0x100, wc);
	check(n == 1 && wc[0].status == IBV_WC_REM_ACCESS_ERR,
	      "remote access: WRITE with a wrong rkey completes with IBV_WC_REM_ACCESS_ERR (%s)",
	      n == 1 ? ibv_wc_status_str(wc[0].status) : "no completion");
	/* The requester's QP is now in the error state: a fresh pair per case. */
	if ((e = fresh_pair(pd, cq, &a, &b, NULL))) {
		checkd(0, ename(e), "remote access: second pair");
		goto out;
	}
	n = one_op(a, cq, IBV_WR_RDMA_WRITE, src, mr->lkey, 64, (uintptr_t)ro, romr->rkey, wc);
	check(n == 1 && wc[0].status == IBV_WC_REM_ACCESS_ERR,
	      "remote access: WRITE into an MR without REMOTE_WRITE completes with IBV_WC_REM_ACCESS_ERR (%s)",
	      n == 1 ? ibv_wc_status_str(wc[0].status) : "no completion");
	if ((e = fresh_pair(pd, cq, &a, &b, NULL))) {
		checkd(0, ename(e), "remote access: third pair");
		goto out;
	}
	n = one_op(a, cq, IBV_WR_RDMA_READ, src, mr->lkey, 8192, (uintptr_t)buf + 32768 - 4096, mr->rkey, wc);
	check(n == 1 && wc[0].status == IBV_WC_REM_ACCESS_ERR,
	      "remote access: READ past the end of the MR completes with IBV_WC_REM_ACCESS_ERR (%s)",
	      n == 1 ? ibv_wc_status_str(wc[0].status) : "no completion");
	/* The MR's own index with the wrong key byte (issue 18: full-key checks). */
	for (int r = 0; r < 2; r++) {
		enum ibv_wr_opcode op = r ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE;

		if ((e = fresh_pair(pd, cq, &a, &b, NULL))) {
			checkd(0, ename(e), "remote access: key-byte pair");
			goto out;
		}
		memset(dst, 0x6e, 64);
		memset(src, 0x3a, 64);
		n = one_op(a, cq, op, src, mr->lkey, 64, (uintptr_t)dst, mr->rkey + 1, wc);
		check(n == 1 && wc[0].status == IBV_WC_REM_ACCESS_ERR && all_bytes(dst, 0x6e, 64) &&
		      all_bytes(src, 0x3a, 64),
		      "remote access: %s with the MR's rkey + 1 (same index, wrong key byte) completes with "
		      "IBV_WC_REM_ACCESS_ERR, no byte moved (%s)", r ? "READ" : "WRITE",
		      n == 1 ? ibv_wc_status_str(wc[0].status) : "no completion");
	}
out:
	if (a) ibv_destroy_qp(a);
	if (b) ibv_destroy_qp(b);
	if (romr) ibv_dereg_mr(romr);
	if (mr) ibv_dereg_mr(mr);
	if (cq) ibv_destroy_cq(cq);
}

/*
 * SEND with invalidate over a loopback RC pair (IBTA 10.6.7.2.2): the
 * responder binds a type 2 window, the requester WRITEs through it, then
 * SENDs with its rkey to invalidate; the receive completes with
 * IBV_WC_WITH_INV and that rkey, and a WRITE through the window then fails
 * with IBV_WC_REM_ACCESS_ERR.
 */
/*
 * The rxe provider hands the CQ ring's wc_flags to the application as they
 * are, and the kernel writes its own IB_WC_WITH_INVALIDATE (1 << 2) there —
 * the bit libibverbs calls IBV_WC_IP_CSUM_OK (its IBV_WC_WITH_INV is 1 << 3).
 * rxe does so, and so must a device that binds to that provider.
 */
#define RXE_ABI_WC_WITH_INV (1 << 2)

void test_send_inv(struct ibv_pd *pd)
{
	struct ibv_cq *cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	char *src = (char *)buf, *dst = (char *)buf + 16384;
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, 32768, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				       IBV_ACCESS_REMOTE_READ | IBV_ACCESS_MW_BIND);
	struct ibv_qp *a = cq ? make_qp(pd, cq, cq, IBV_QPT_RC, NULL, NULL) : NULL;
	struct ibv_qp *b = cq ? make_qp(pd, cq, cq, IBV_QPT_RC, NULL, NULL) : NULL;
	struct ibv_mw *mw = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
	struct ibv_send_wr w = { 0 }, *bad_s;
	struct ibv_recv_wr r = { 0 }, *bad_r;
	struct ibv_sge sge;
	struct ibv_wc wc[2], *rw = NULL;
	uint32_t rkey;
	int e, n;

	if (!cq || !mr || !a || !b || !mw || connect_pair(a, b)) {
		checkd(0, ename(errno), "SEND_WITH_INV: setup (CQ, MR, type 2 MW, loopback RC pair)");
		goto out;
	}
	rkey = ibv_inc_rkey(mw->rkey);
	w.wr_id = 0x8801; w.opcode = IBV_WR_BIND_MW; w.send_flags = IBV_SEND_SIGNALED;
	w.bind_mw.mw = mw; w.bind_mw.rkey = rkey;
	w.bind_mw.bind_info = (struct ibv_mw_bind_info){ .mr = mr, .addr = (uintptr_t)dst, .length = 4096,
		.mw_access_flags = IBV_ACCESS_REMOTE_WRITE };
	e = rcerr(ibv_post_send(b, &w, &bad_s));
	n = e ? 0 : poll_n(cq, wc, 1, 10);
	if (e || n != 1 || wc[0].status != IBV_WC_SUCCESS) {
		checkd(0, ename(e), "SEND_WITH_INV: bind a type 2 window on the responder");
		goto out;
	}
	for (int i = 0; i < 64; i++)
		src[i] = (char)(0x5a ^ i);
	memset(dst, 0, 64);
	n = one_op(a, cq, IBV_WR_RDMA_WRITE, src, mr->lkey, 64, (uintptr_t)dst, rkey, wc);
	check(n == 1 && wc[0].status == IBV_WC_SUCCESS && !memcmp(src, dst, 64),
	      "SEND_WITH_INV: WRITE through the bound window moves the bytes (%s)",
	      n == 1 ? ibv_wc_status_str(wc[0].status) : "no completion");
	sge = (struct ibv_sge){ .addr = (uintptr_t)dst + 8192, .length = 64, .lkey = mr->lkey };
	r.wr_id = 0x8802; r.sg_list = &sge; r.num_sge = 1;
	e = rcerr(ibv_post_recv(b, &r, &bad_r));
	sge = (struct ibv_sge){ .addr = (uintptr_t)src, .length = 64, .lkey = mr->lkey };
	memset(&w, 0, sizeof(w));
	w.wr_id = 0x8803; w.opcode = IBV_WR_SEND_WITH_INV; w.send_flags = IBV_SEND_SIGNALED;
	w.sg_list = &sge; w.num_sge = 1; w.invalidate_rkey = rkey;
	e = e ? e : rcerr(ibv_post_send(a, &w, &bad_s));
	n = e ? 0 : poll_n(cq, wc, 2, 20);
	for (int i = 0; i < n; i++)
		if (wc[i].wr_id == 0x8802)
			rw = &wc[i];
	check(!e && n == 2 && rw && rw->status == IBV_WC_SUCCESS && rw->opcode == IBV_WC_RECV &&
	      (rw->wc_flags & RXE_ABI_WC_WITH_INV) && rw->invalidated_rkey == rkey && rw->byte_len == 64 &&
	      !memcmp(src, dst + 8192, 64),
	      "SEND_WITH_INV: the receive completes with IBV_WC_WITH_INV and rkey 0x%x (%s, %d completions; "
	      "opcode %d flags 0x%x rkey 0x%x len %u data %s)",
	      rkey, rw ? ibv_wc_status_str(rw->status) : "none", n, rw ? (int)rw->opcode : -1,
	      rw ? rw->wc_flags : 0, rw ? rw->invalidated_rkey : 0, rw ? rw->byte_len : 0,
	      memcmp(src, dst + 8192, 64) ? "differs" : "same");
	n = one_op(a, cq, IBV_WR_RDMA_WRITE, src, mr->lkey, 64, (uintptr_t)dst, rkey, wc);
	check(n == 1 && wc[0].status == IBV_WC_REM_ACCESS_ERR,
	      "SEND_WITH_INV: a WRITE through the invalidated window fails with IBV_WC_REM_ACCESS_ERR (%s)",
	      n == 1 ? ibv_wc_status_str(wc[0].status) : "no completion");
out:
	if (a) ibv_destroy_qp(a);
	if (b) ibv_destroy_qp(b);
	if (mw) ibv_dealloc_mw(mw);
	if (mr) ibv_dereg_mr(mr);
	if (cq) ibv_destroy_cq(cq);
}

/*
 * A SEND longer than the receive it consumes: both WQEs complete in error,
 * never success, and nothing lands past the receive buffer. With -S, IBTA's
 * statuses: the requester IBV_WC_REM_INV_REQ_ERR (NAK invalid request,
 * 9.7.5.2.4) and the receive IBV_WC_LOC_LEN_ERR. rxe reports a remote
 * operational error (IBV_WC_REM_OP_ERR) and IBV_WC_LOC_QP_OP_ERR instead.
 */
void test_recv_too_small(struct ibv_pd *pd)
{
	struct ibv_cq *cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	char *src = (char *)buf, *dst = (char *)buf + 16384;
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, 32768, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_qp *a = cq ? make_qp(pd, cq, cq, IBV_QPT_RC, NULL, NULL) : NULL;
	struct ibv_qp *b = cq ? make_qp(pd, cq, cq, IBV_QPT_RC, NULL, NULL) : NULL;
	struct ibv_send_wr w = { 0 }, *bad_s;
	struct ibv_recv_wr r = { 0 }, *bad_r;
	struct ibv_sge rs, ss;
	struct ibv_wc wc[2], *sw = NULL, *rw = NULL;
	int e, n;

	if (!cq || !mr || !a || !b || connect_pair(a, b)) {
		checkd(0, ename(errno), "receive too small: setup (CQ, MR, loopback RC pair)");
		goto out;
	}
	memset(dst, 0x77, 256);
	rs = (struct ibv_sge){ .addr = (uintptr_t)dst, .length = 64, .lkey = mr->lkey };
	r.wr_id = 0x9901; r.sg_list = &rs; r.num_sge = 1;
	e = rcerr(ibv_post_recv(b, &r, &bad_r));
	ss = (struct ibv_sge){ .addr = (uintptr_t)src, .length = 128, .lkey = mr->lkey };
	w.wr_id = 0x9902; w.opcode = IBV_WR_SEND; w.send_flags = IBV_SEND_SIGNALED;
	w.sg_list = &ss; w.num_sge = 1;
	e = e ? e : rcerr(ibv_post_send(a, &w, &bad_s));
	n = e ? 0 : poll_n(cq, wc, 2, 20);
	for (int i = 0; i < n; i++) {
		if (wc[i].wr_id == 0x9902)
			sw = &wc[i];
		if (wc[i].wr_id == 0x9901)
			rw = &wc[i];
	}
	check(!e && sw && sw->status != IBV_WC_SUCCESS &&
	      (!strict || sw->status == IBV_WC_REM_INV_REQ_ERR),
	      "receive too small: a 128-byte SEND into a 64-byte receive fails at the requester%s (%s)",
	      strict ? " with IBV_WC_REM_INV_REQ_ERR" : "",
	      sw ? ibv_wc_status_str(sw->status) : "no completion");
	check(rw && rw->status != IBV_WC_SUCCESS && (!strict || rw->status == IBV_WC_LOC_LEN_ERR),
	      "receive too small: the receive completes in error%s (%s)",
	      strict ? " with IBV_WC_LOC_LEN_ERR" : "",
	      rw ? ibv_wc_status_str(rw->status) : "no completion");
	check(dst[64] == 0x77 && dst[200] == 0x77,
	      "receive too small: nothing written past the receive buffer");
out:
	if (a) ibv_destroy_qp(a);
	if (b) ibv_destroy_qp(b);
	if (mr) ibv_dereg_mr(mr);
	if (cq) ibv_destroy_cq(cq);
}

/*
 * ATOMIC WRITE through the extended API (ibv_wr_atomic_write, the rxe
 * provider's IBV_WR_ATOMIC_WRITE): 8 bytes land at the 8-byte aligned remote
 * address in one piece, the WQE completes with IBV_WC_ATOMIC_WRITE; skipped
 * when the device does not report IB_UVERBS_DEVICE_ATOMIC_WRITE (hence SKIP on
 * an rxe built without it).
 */
/* IB_UVERBS_DEVICE_ATOMIC_WRITE (kernel uapi; rdma-core 44 has no IBV_ name). */
#define RXE_ABI_DEVICE_ATOMIC_WRITE (1ULL << 40)

void test_atomic_write(struct ibv_pd *pd)
{
	struct ibv_device_attr_ex ax = { 0 };
	struct ibv_cq *cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	uint64_t *dst = (uint64_t *)((char *)buf + 16384), val = 0x1122334455667788ULL;
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, 32768, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	struct ibv_qp_init_attr_ex ia = {
		.qp_type = IBV_QPT_RC, .send_cq = cq, .recv_cq = cq, .pd = pd,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1 },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.send_ops_flags = IBV_QP_EX_WITH_ATOMIC_WRITE,
	};
	struct ibv_qp *a = NULL, *b = NULL;
	struct ibv_qp_ex *qx;
	struct ibv_wc wc[1];
	int e, n;

	if (ibv_query_device_ex(ctx, NULL, &ax) || !(ax.device_cap_flags_ex & RXE_ABI_DEVICE_ATOMIC_WRITE)) {
		checkd(0, "EOPNOTSUPP", "ATOMIC_WRITE: device does not report IB_UVERBS_DEVICE_ATOMIC_WRITE");
		goto out;
	}
	a = cq && mr ? ibv_create_qp_ex(ctx, &ia) : NULL;
	b = a ? ibv_create_qp_ex(ctx, &ia) : NULL;
	if (!b || connect_pair(a, b)) {
		checkd(0, ename(errno), "ATOMIC_WRITE: setup (CQ, MR, loopback pair of extended QPs)");
		goto out;
	}
	*dst = 0;
	qx = ibv_qp_to_qp_ex(a);
	ibv_wr_start(qx);
	qx->wr_id = 0xaa01;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_atomic_write(qx, mr->rkey, (uintptr_t)dst, &val);
	e = rcerr(ibv_wr_complete(qx));
	n = e ? 0 : poll_n(cq, wc, 1, 20);
	check(!e && n == 1 && wc[0].status == IBV_WC_SUCCESS && wc[0].opcode == IBV_WC_ATOMIC_WRITE &&
	      wc[0].wr_id == 0xaa01 && *dst == val,
	      "ATOMIC_WRITE: 8 bytes stored at the remote address, IBV_WC_ATOMIC_WRITE (%s, opcode %d, 0x%llx)",
	      n == 1 ? ibv_wc_status_str(wc[0].status) : "no completion", n == 1 ? (int)wc[0].opcode : -1,
	      (unsigned long long)*dst);
out:
	if (a) ibv_destroy_qp(a);
	if (b) ibv_destroy_qp(b);
	if (mr) ibv_dereg_mr(mr);
	if (cq) ibv_destroy_cq(cq);
}
