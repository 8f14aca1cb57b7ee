// SPDX-License-Identifier: GPL-2.0
/*
 * exerciser, section 6.
 *
 * UC QPs (issue 18; IBTA 9.8.2, 10.3.1; rxe as the oracle): a loopback UC
 * pair connects with UC's attribute masks; SEND, SEND_WITH_IMM, RDMA WRITE and
 * WRITE_WITH_IMM of several MTUs arrive whole and complete on both sides. A
 * message the responder cannot take (no receive posted, a bad rkey, longer
 * than its receive) is silently dropped (responder class D): the requester
 * still completes with success, the QP stays in RTS and the receive is kept for
 * the next message. READ and atomics are not UC operations: the WQE fails
 * (IBV_WC_LOC_QP_OP_ERR under -S).
 */
#include "exerciser.h"

struct uc_ctx {
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	struct ibv_qp *a, *b;
	char *src, *dst, *rbuf;
};

static int uc_connect(struct uc_ctx *u)
{
	struct ibv_qp *q[2] = { u->a, u->b };

	for (int k = 0; k < 2; k++) {
		struct ibv_qp_attr at;
		int m, e;

		m = req_attrs(IBV_QPT_UC, IBV_QPS_RESET, IBV_QPS_INIT, &at);
		if ((e = rcerr(ibv_modify_qp(q[k], &at, m))))
			return e;
		m = req_attrs(IBV_QPT_UC, IBV_QPS_INIT, IBV_QPS_RTR, &at);
		at.dest_qp_num = q[1 - k]->qp_num;
		if ((e = rcerr(ibv_modify_qp(q[k], &at, m))))
			return e;
		m = req_attrs(IBV_QPT_UC, IBV_QPS_RTR, IBV_QPS_RTS, &at);
		at.sq_psn = 0x123456; /* the peer's rq_psn */
		if ((e = rcerr(ibv_modify_qp(q[k], &at, m))))
			return e;
	}
	return 0;
}

static int uc_pair(struct ibv_pd *pd, struct uc_ctx *u)
{
	struct ibv_wc wc[16];

	if (u->a)
		ibv_destroy_qp(u->a);
	if (u->b)
		ibv_destroy_qp(u->b);
	u->a = u->b = NULL;
	while (ibv_poll_cq(u->cq, 16, wc) > 0)
		;
	errno = 0;
	u->a = make_qp(pd, u->cq, u->cq, IBV_QPT_UC, NULL, NULL);
	u->b = u->a ? make_qp(pd, u->cq, u->cq, IBV_QPT_UC, NULL, NULL) : NULL;
	if (!u->a || !u->b)
		return errno ? errno : -1;
	return uc_connect(u);
}

/* UC's WRs: from u->src + off to u->dst + dst_off, into u->rbuf + off. */
static int uc_post(struct uc_ctx *u, uint64_t id, enum ibv_wr_opcode op, uint32_t off, uint32_t len,
		   uint32_t dst_off, uint32_t rkey, uint32_t imm)
{
	return post_wr_imm(u->a, id, op, u->src + off, len, u->mr->lkey, u->dst + dst_off, rkey, 1,
			   htonl(imm));
}

static int uc_recv(struct uc_ctx *u, uint64_t id, uint32_t off, uint32_t len)
{
	return post_recv_lkey(u->b, NULL, id, u->rbuf + off, len, u->mr->lkey);
}

#define UC_SRC 0
#define UC_DST (16 << 10)
#define UC_RBUF (32 << 10)

void test_uc(struct ibv_pd *pd)
{
	struct uc_ctx u = { 0 };
	struct ibv_wc wc[16], *s, *r;
	struct ibv_qp_attr at;
	struct ibv_qp_init_attr ia;
	int e, n, m;

	u.cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	u.mr = ibv_reg_mr(pd, buf, BUF_SIZE, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	u.src = (char *)buf + UC_SRC;
	u.dst = (char *)buf + UC_DST;
	u.rbuf = (char *)buf + UC_RBUF;
	if (!u.cq || !u.mr) {
		checkd(0, ename(errno), "UC: setup (CQ, MR)");
		goto out;
	}
	/* Creation, query, and the UC masks of IBTA 10.3.1. */
	errno = 0;
	u.a = make_qp(pd, u.cq, u.cq, IBV_QPT_UC, NULL, NULL);
	expect_err(PERR(u.a), 0, "UC: create_qp IBV_QPT_UC (rxe supports UC)");
	if (!u.a)
		goto out;
	e = rcerr(ibv_query_qp(u.a, &at, IBV_QP_STATE, &ia));
	checkd(!e && ia.qp_type == IBV_QPT_UC && at.qp_state == IBV_QPS_RESET, ename(e),
	       "UC: query_qp reports type UC in RESET");
	m = req_attrs(IBV_QPT_UC, IBV_QPS_RESET, IBV_QPS_INIT, &at);
	expect_err(rcerr(ibv_modify_qp(u.a, &at, m)), 0, "UC: RESET->INIT with access flags");
	m = req_attrs(IBV_QPT_UC, IBV_QPS_INIT, IBV_QPS_RTR, &at);
	expect_err(rcerr(ibv_modify_qp(u.a, &at, m & ~IBV_QP_DEST_QPN)), EINVAL,
		   "UC: INIT->RTR without the destination QPN");
	at.max_dest_rd_atomic = 1;
	expect_err(rcerr(ibv_modify_qp(u.a, &at, m | IBV_QP_MAX_DEST_RD_ATOMIC)), EINVAL,
		   "UC: INIT->RTR with max_dest_rd_atomic (an RC attribute)");
	expect_err(rcerr(ibv_modify_qp(u.a, &at, m)), 0, "UC: INIT->RTR with UC's mask");
	m = req_attrs(IBV_QPT_UC, IBV_QPS_RTR, IBV_QPS_RTS, &at);
	at.timeout = 14;
	expect_err(rcerr(ibv_modify_qp(u.a, &at, m | IBV_QP_TIMEOUT)), EINVAL,
		   "UC: RTR->RTS with a local ACK timeout (an RC attribute)");
	expect_err(rcerr(ibv_modify_qp(u.a, &at, m)), 0, "UC: RTR->RTS with the send PSN only");

	e = uc_pair(pd, &u);
	checkd(!e, ename(e), "UC: loopback pair connected (QPN %u <-> %u)", u.a ? u.a->qp_num : 0,
	       u.b ? u.b->qp_num : 0);
	if (e)
		goto out;
	for (int i = 0; i < 16384; i++)
		u.src[i] = (char)(i * 13 + 5);
	memset(u.dst, 0, 16384);
	memset(u.rbuf, 0, 32768);
	/* Every UC operation, several MTUs (1024) long. */
	e = uc_recv(&u, 0xb1, 0, 8192);
	e = e ? e : uc_recv(&u, 0xb2, 8192, 8192);
	e = e ? e : uc_recv(&u, 0xb3, 16384, 64);
	e = e ? e : uc_post(&u, 0xa1, IBV_WR_SEND, 0, 3000, 0, 0, 0);
	e = e ? e : uc_post(&u, 0xa2, IBV_WR_SEND_WITH_IMM, 3000, 1500, 0, 0, 0xfeedf00d);
	e = e ? e : uc_post(&u, 0xa3, IBV_WR_RDMA_WRITE, 4500, 5000, 0, u.mr->rkey, 0);
	e = e ? e : uc_post(&u, 0xa4, IBV_WR_RDMA_WRITE_WITH_IMM, 9500, 2100, 5000, u.mr->rkey, 77);
	n = e ? 0 : collect(u.cq, wc, 16, 0xb3, 20, 0.2);
	{
		struct ibv_wc *r1 = find_wc(wc, n, 0xb1), *r2 = find_wc(wc, n, 0xb2), *r3 = find_wc(wc, n, 0xb3);
		int sends = 0;

		for (uint64_t id = 0xa1; id <= 0xa4; id++) {
			s = find_wc(wc, n, id);
			sends += s && s->status == IBV_WC_SUCCESS;
		}
		checkd(!e && sends == 4, ename(e), "UC: SEND, SEND_WITH_IMM, WRITE, WRITE_WITH_IMM complete at the "
		       "requester (%d of 4 successful)", sends);
		check(r1 && r1->status == IBV_WC_SUCCESS && r1->opcode == IBV_WC_RECV && r1->byte_len == 3000 &&
		      !memcmp(u.rbuf, u.src, 3000),
		      "UC: a 3000-byte SEND lands whole in its receive (%s, %u bytes)", wc_str(r1), r1 ? r1->byte_len : 0);
		check(r2 && r2->status == IBV_WC_SUCCESS && r2->byte_len == 1500 && (r2->wc_flags & IBV_WC_WITH_IMM) &&
		      ntohl(r2->imm_data) == 0xfeedf00d && !memcmp(u.rbuf + 8192, u.src + 3000, 1500),
		      "UC: SEND_WITH_IMM: bytes and immediate data (%s, imm %#x)", wc_str(r2),
		      r2 ? ntohl(r2->imm_data) : 0);
		check(!memcmp(u.dst, u.src + 4500, 5000), "UC: a 5000-byte RDMA WRITE is placed whole");
		check(r3 && r3->status == IBV_WC_SUCCESS && r3->opcode == IBV_WC_RECV_RDMA_WITH_IMM &&
		      ntohl(r3->imm_data) == 77 && !memcmp(u.dst + 5000, u.src + 9500, 2100),
		      "UC: RDMA WRITE_WITH_IMM places its bytes and consumes a receive with the immediate "
		      "data (%s, opcode %d)", wc_str(r3), r3 ? (int)r3->opcode : -1);
	}
	/* Class D: no receive posted -- the SEND is dropped, the requester is not told. */
	e = uc_post(&u, 0xa5, IBV_WR_SEND, 0, 100, 0, 0, 0);
	n = e ? 0 : collect(u.cq, wc, 16, 0xa5, 10, 0.5);
	s = find_wc(wc, n, 0xa5);
	check(!e && s && s->status == IBV_WC_SUCCESS && n == 1,
	      "UC: a SEND with no receive posted completes at the requester and nothing arrives (%s, %d "
	      "completions)", wc_str(s), n);
	/* A bad rkey (the MR's index, wrong key byte): dropped, target untouched. */
	memset(u.dst, 0x6b, 512);
	e = uc_post(&u, 0xa6, IBV_WR_RDMA_WRITE, 0, 512, 0, u.mr->rkey + 1, 0);
	n = e ? 0 : collect(u.cq, wc, 16, 0xa6, 10, 0.5);
	s = find_wc(wc, n, 0xa6);
	check(!e && s && s->status == IBV_WC_SUCCESS && all_bytes(u.dst, 0x6b, 512),
	      "UC: a WRITE with a bad rkey is dropped by the responder, its memory untouched (%s)", wc_str(s));
	/* Longer than its receive: dropped; the receive takes the next message. */
	memset(u.rbuf, 0, 8192);
	e = uc_recv(&u, 0xb4, 0, 256);
	e = e ? e : uc_post(&u, 0xa7, IBV_WR_SEND, 0, 2000, 0, 0, 0);
	e = e ? e : uc_post(&u, 0xa8, IBV_WR_SEND, 5000, 200, 0, 0, 0);
	n = e ? 0 : collect(u.cq, wc, 16, 0xb4, 10, 0.2);
	r = find_wc(wc, n, 0xb4);
	/* QUIRK: rxe means class D here (rxe_resp.c: RESPST_ERR_LENGTH for UC
	 * drops the message), but its copy_data() reports a short receive as
	 * -EINVAL, not -ENOSPC, so it takes the malformed-WQE path (class A):
	 * IBV_WC_LOC_QP_OP_ERR and the QP in ERR. Accepted without -S only. */
	{
		int d = !e && r && r->status == IBV_WC_SUCCESS && r->byte_len == 200 &&
			!memcmp(u.rbuf, u.src + 5000, 200);
		int quirk = !strict && r && r->status == IBV_WC_LOC_QP_OP_ERR;

		check(d || quirk, "UC: a SEND longer than its receive is dropped and the receive takes the next SEND "
		      "(%s, %u bytes)%s", wc_str(r), r ? r->byte_len : 0, quirk ? " [rxe quirk: class A]" : "");
		e = rcerr(ibv_query_qp(u.b, &at, IBV_QP_STATE, &ia));
		checkd(!e && (at.qp_state == IBV_QPS_RTS || quirk), ename(e),
		       "UC: the responder stays in RTS through class D drops (%s)%s", qps_name(at.qp_state),
		       quirk ? " [rxe quirk: class A]" : "");
	}
	/* READ and atomics are not UC operations. */
	for (int k = 0; k < 2; k++) {
		enum ibv_wr_opcode op = k ? IBV_WR_ATOMIC_FETCH_AND_ADD : IBV_WR_RDMA_READ;

		if ((e = uc_pair(pd, &u))) {
			checkd(0, ename(e), "UC: pair for %s", k ? "FETCH_ADD" : "READ");
			continue;
		}
		e = uc_post(&u, 0xa9, op, 0, 8, 0, u.mr->rkey, 0);
		n = e ? 0 : collect(u.cq, wc, 16, 0xa9, 10, 0);
		s = find_wc(wc, n, 0xa9);
		check(e == EINVAL || (s && s->status != IBV_WC_SUCCESS && (!strict || s->status == IBV_WC_LOC_QP_OP_ERR)),
		      "UC: %s on a UC QP is refused (post %s) or fails%s (%s)", k ? "FETCH_ADD" : "READ", ename(e),
		      strict ? " with IBV_WC_LOC_QP_OP_ERR" : "", wc_str(s));
	}
out:
	if (u.a)
		ibv_destroy_qp(u.a);
	if (u.b)
		ibv_destroy_qp(u.b);
	if (u.mr)
		ibv_dereg_mr(u.mr);
	if (u.cq)
		ibv_destroy_cq(u.cq);
}
