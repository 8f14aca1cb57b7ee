// SPDX-License-Identifier: GPL-2.0
/*
 * exerciser, section 1: create/destroy every object type ITER times (PD, MR
 * over every legal access combination and the illegal ones, CQ with resizes,
 * completion channel, RC/UD QPs with and without an SRQ, SRQ, AH, MW).
 */
#include "exerciser.h"

static const int mr_bits[] = { IBV_ACCESS_LOCAL_WRITE, IBV_ACCESS_REMOTE_WRITE,
			       IBV_ACCESS_REMOTE_READ, IBV_ACCESS_REMOTE_ATOMIC,
			       IBV_ACCESS_MW_BIND, IBV_ACCESS_RELAXED_ORDERING };
#define N_MR_BITS 6

static int access_of(int combo)
{
	int i, f = 0;

	for (i = 0; i < N_MR_BITS; i++)
		if (combo & (1 << i))
			f |= mr_bits[i];
	return f;
}

static int access_legal(int f)
{
	return !((f & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
		 !(f & IBV_ACCESS_LOCAL_WRITE));
}

/* Each loop fills why[] with the first failure and returns; on a failure the
 * objects of that iteration may leak: the run has failed anyway. */
#define WHY_LEN 200
#define FAIL(...) do { snprintf(why, WHY_LEN, __VA_ARGS__); return; } while (0)

static void loop_pd(char *why)
{
	for (int i = 0; i < iters; i++) {
		struct ibv_pd *pd = ibv_alloc_pd(ctx);
		int e;

		if (!pd)
			FAIL("alloc_pd #%d: %s", i, ename(errno));
		if ((e = ibv_dealloc_pd(pd)))
			FAIL("dealloc_pd #%d: %s", i, ename(e));
	}
}

static int legal_combos[1 << N_MR_BITS], n_legal_combos;

static void loop_mr(char *why, struct ibv_pd *pd, int n)
{
	for (int i = 0; i < n; i++) {
		int f = access_of(legal_combos[i % n_legal_combos]), e;
		size_t len = 4096 + (i % 4) * 4096;
		struct ibv_mr *mr = ibv_reg_mr(pd, buf, len, f);

		if (!mr)
			FAIL("reg_mr access %#x #%d: %s", f, i, ename(errno));
		if (mr->addr != buf || mr->length != len || mr->pd != pd || mr->context != ctx)
			FAIL("reg_mr %#x: addr/length/pd not as registered", f);
		if ((e = ibv_dereg_mr(mr)))
			FAIL("dereg_mr #%d: %s", i, ename(e));
	}
}

static void mr_illegal(char *why, struct ibv_pd *pd)
{
	for (int c = 0; c < 1 << N_MR_BITS; c++) {
		int f = access_of(c), e;
		struct ibv_mr *mr;

		if (access_legal(f))
			continue;
		errno = 0;
		mr = ibv_reg_mr(pd, buf, 4096, f);
		e = PERR(mr);
		if (mr)
			ibv_dereg_mr(mr);
		if (e != WANT_MR_BAD_ACCESS)
			FAIL("access %#x: got errno %s, want %s", f, ename(e), ename(WANT_MR_BAD_ACCESS));
	}
}

static void loop_cq(char *why)
{
	for (int i = 0; i < iters; i++) {
		int c = 1 + i % 64, e;
		struct ibv_cq *cq = ibv_create_cq(ctx, c, NULL, NULL, 0);

		if (!cq)
			FAIL("create_cq cqe %d #%d: %s", c, i, ename(errno));
		if (cq->cqe < c)
			FAIL("create_cq cqe %d: cq->cqe %d", c, cq->cqe);
		if ((e = rcerr(ibv_resize_cq(cq, 4 * c))) || cq->cqe < 4 * c)
			FAIL("resize_cq %d -> %d: %s, cq->cqe %d", c, 4 * c, ename(e), cq->cqe);
		if ((e = rcerr(ibv_resize_cq(cq, c))) || cq->cqe < c)
			FAIL("resize_cq %d -> %d: %s, cq->cqe %d", 4 * c, c, ename(e), cq->cqe);
		if ((e = ibv_destroy_cq(cq)))
			FAIL("destroy_cq #%d: %s", i, ename(e));
	}
}

static void loop_channel(char *why)
{
	for (int i = 0; i < iters; i++) {
		struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
		struct ibv_cq *cq;
		int e;

		if (!ch)
			FAIL("create_comp_channel #%d: %s", i, ename(errno));
		cq = ibv_create_cq(ctx, 16, NULL, ch, 0);
		if (!cq)
			FAIL("create_cq on a channel #%d: %s", i, ename(errno));
		if (cq->channel != ch)
			FAIL("cq->channel is not the channel");
		if ((e = rcerr(ibv_req_notify_cq(cq, i & 1))))
			FAIL("req_notify_cq #%d: %s", i, ename(e));
		if ((e = ibv_destroy_cq(cq)))
			FAIL("destroy_cq #%d: %s", i, ename(e));
		if ((e = ibv_destroy_comp_channel(ch)))
			FAIL("destroy_comp_channel #%d: %s", i, ename(e));
	}
}

static void loop_qp(char *why, struct ibv_pd *pd, struct ibv_cq *cq, enum ibv_qp_type t,
		    struct ibv_srq *s)
{
	for (int i = 0; i < iters; i++) {
		struct ibv_qp_init_attr ia;
		struct ibv_qp *qp = make_qp(pd, cq, cq, t, s, &ia);
		int e;

		if (!qp)
			FAIL("create_qp #%d: %s", i, ename(errno));
		if (qp->qp_type != t || qp->qp_num == 0 || qp->state != IBV_QPS_RESET ||
		    ia.cap.max_send_wr < 16 || ia.cap.max_send_sge < 2 ||
		    ia.cap.max_inline_data < 64 ||
		    (!s && (ia.cap.max_recv_wr < 16 || ia.cap.max_recv_sge < 2)))
			FAIL("create_qp: type/qpn/state/caps wrong: qpn %u caps %u/%u/%u/%u/%u",
			     qp->qp_num, ia.cap.max_send_wr, ia.cap.max_recv_wr,
			     ia.cap.max_send_sge, ia.cap.max_recv_sge, ia.cap.max_inline_data);
		/* every 16th goes to RTS before it is destroyed */
		if (i % 16 == 0 && (e = bring_to(qp, IBV_QPS_RTS)))
			FAIL("bring to RTS #%d: %s", i, ename(e));
		if ((e = ibv_destroy_qp(qp)))
			FAIL("destroy_qp #%d: %s", i, ename(e));
	}
}

static void loop_srq(char *why, struct ibv_pd *pd)
{
	for (int i = 0; i < iters; i++) {
		struct ibv_srq_init_attr sa = { .attr = { .max_wr = 16 + i % 16, .max_sge = 1 + i % 2 } };
		struct ibv_srq *srq = ibv_create_srq(pd, &sa);
		struct ibv_srq_attr a = { .srq_limit = 4 };
		int e;

		if (!srq)
			FAIL("create_srq #%d: %s", i, ename(errno));
		if ((e = rcerr(ibv_modify_srq(srq, &a, IBV_SRQ_LIMIT))))
			FAIL("modify_srq limit 4 #%d: %s", i, ename(e));
		memset(&a, 0, sizeof(a));
		if ((e = rcerr(ibv_query_srq(srq, &a))) || a.srq_limit != 4 || a.max_wr < 16 + (unsigned)i % 16)
			FAIL("query_srq #%d: %s limit %u max_wr %u", i, ename(e), a.srq_limit, a.max_wr);
		if ((e = ibv_destroy_srq(srq)))
			FAIL("destroy_srq #%d: %s", i, ename(e));
	}
}

static void loop_ah(char *why, struct ibv_pd *pd)
{
	for (int i = 0; i < iters; i++) {
		struct ibv_ah_attr aa = {
			.is_global = 1, .port_num = 1,
			.grh = { .dgid = gid, .sgid_index = gid_index, .hop_limit = 64 },
		};
		struct ibv_ah *ah = ibv_create_ah(pd, &aa);
		int e;

		if (!ah)
			FAIL("create_ah #%d (sgid_index %d): %s", i, gid_index, ename(errno));
		if ((e = ibv_destroy_ah(ah)))
			FAIL("destroy_ah #%d: %s", i, ename(e));
	}
}

static void loop_mw(char *why, struct ibv_pd *pd, enum ibv_mw_type t)
{
	for (int i = 0; i < iters; i++) {
		struct ibv_mw *mw = ibv_alloc_mw(pd, t);
		int e;

		if (!mw)
			FAIL("alloc_mw #%d: %s", i, ename(errno));
		if (mw->type != t || mw->pd != pd)
			FAIL("alloc_mw: type %d pd %p", mw->type, (void *)mw->pd);
		if ((e = ibv_dealloc_mw(mw)))
			FAIL("dealloc_mw #%d: %s", i, ename(e));
	}
}

void test_objects(struct ibv_pd *pd)
{
	char why[WHY_LEN];
	double t0;
	int n, cnt = 0;

#define RUN(call, ...) do { why[0] = 0; t0 = now(); call; \
		checkd(!why[0], why, __VA_ARGS__); } while (0)
	RUN(loop_pd(why), "PD: alloc/dealloc x%d (%.1fs)", iters, now() - t0);

	for (int c = 0; c < 1 << N_MR_BITS; c++)
		if (access_legal(access_of(c)))
			legal_combos[n_legal_combos++] = c;
	n = iters > n_legal_combos ? iters : n_legal_combos;
	RUN(loop_mr(why, pd, n),
	    "MR: reg/dereg x%d over all %d legal combinations of LOCAL_WRITE|REMOTE_WRITE|REMOTE_READ|REMOTE_ATOMIC|MW_BIND|RELAXED_ORDERING (%.1fs)",
	    n, n_legal_combos, now() - t0);
	cnt = (1 << N_MR_BITS) - n_legal_combos;
	RUN(mr_illegal(why, pd),
	    "MR: the %d illegal combinations (REMOTE_WRITE/REMOTE_ATOMIC without LOCAL_WRITE) fail with %s",
	    cnt, ename(WANT_MR_BAD_ACCESS));
	RUN(loop_cq(why), "CQ: create/resize up/resize down/destroy x%d (%.1fs)", iters, now() - t0);
	RUN(loop_channel(why), "comp channel + CQ on it + req_notify: x%d (%.1fs)", iters, now() - t0);
	{
		struct ibv_cq *cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
		struct ibv_srq_init_attr sa = { .attr = { .max_wr = 16, .max_sge = 1 } };
		struct ibv_srq *srq = ibv_create_srq(pd, &sa);

		if (!cq || !srq) {
			checkd(0, ename(errno), "QP loops: create_cq/create_srq");
		} else {
			RUN(loop_qp(why, pd, cq, IBV_QPT_RC, NULL), "RC QP: create/destroy x%d, every 16th through RTS (%.1fs)", iters, now() - t0);
			RUN(loop_qp(why, pd, cq, IBV_QPT_UD, NULL), "UD QP: create/destroy x%d, every 16th through RTS (%.1fs)", iters, now() - t0);
			RUN(loop_qp(why, pd, cq, IBV_QPT_RC, srq), "RC QP on an SRQ: create/destroy x%d (%.1fs)", iters, now() - t0);
			RUN(loop_qp(why, pd, cq, IBV_QPT_UD, srq), "UD QP on an SRQ: create/destroy x%d (%.1fs)", iters, now() - t0);
		}
		if (srq)
			ibv_destroy_srq(srq);
		if (cq)
			ibv_destroy_cq(cq);
	}
	RUN(loop_srq(why, pd), "SRQ: create/modify limit/query/destroy x%d (%.1fs)", iters, now() - t0);
	RUN(loop_ah(why, pd), "AH (RoCE v2 GID index %d): create/destroy x%d (%.1fs)", gid_index, iters, now() - t0);
	for (int k = 1; k <= 2; k++) {
		if (!(mw_types() & k)) {
			printf("ok %d - MW type %d # SKIP device does not report it\n", ++n_tests, k);
			continue;
		}
		RUN(loop_mw(why, pd, k == 1 ? IBV_MW_TYPE_1 : IBV_MW_TYPE_2),
		    "MW type %d: alloc/dealloc x%d (%.1fs)", k, iters, now() - t0);
	}
#undef RUN
}
