// SPDX-License-Identifier: GPL-2.0
/*
 * exerciser, section 3: the errno of invalid calls -- CQ sizes, MR access
 * and ranges, SRQ, AH, QP caps and types, modify_qp with out-of-range
 * values, destroy of objects still in use. Each expected errno is rxe's.
 */
#include "exerciser.h"

/* Try RESET->...->from, then one modify with an out-of-range value. */
static int bad_modify(struct ibv_pd *pd, struct ibv_cq *cq, enum ibv_qp_type t,
		      enum ibv_qp_state from, enum ibv_qp_state to,
		      void (*mut)(struct ibv_qp_attr *), int extra_mask, int *state_after)
{
	struct ibv_qp *qp = make_qp(pd, cq, cq, t, NULL, NULL);
	struct ibv_qp_attr a;
	int m, e;

	if (!qp)
		return -1;
	if (bring_to(qp, from)) {
		ibv_destroy_qp(qp);
		return -1;
	}
	m = req_attrs(t, from, to, &a);
	mut(&a);
	e = rcerr(ibv_modify_qp(qp, &a, m | extra_mask));
	if (state_after)
		*state_after = qp_state(qp, NULL);
	ibv_destroy_qp(qp);
	return e;
}

static void m_port2(struct ibv_qp_attr *a) { a->port_num = 2; }
static void m_port0(struct ibv_qp_attr *a) { a->port_num = 0; }
static void m_pkey1(struct ibv_qp_attr *a) { a->pkey_index = 1; }
static void m_pkey64(struct ibv_qp_attr *a) { a->pkey_index = 64; }
static void m_mtu6(struct ibv_qp_attr *a) { a->path_mtu = 6; }
static void m_mtu0(struct ibv_qp_attr *a) { a->path_mtu = 0; }
static void m_mtu_big(struct ibv_qp_attr *a) { a->path_mtu = IBV_MTU_4096 + 1; }
static void m_mtu_over_active(struct ibv_qp_attr *a) { a->path_mtu = pattr.active_mtu + 1; }
static void m_av_port2(struct ibv_qp_attr *a) { a->ah_attr.port_num = 2; }
static void m_av_sgid(struct ibv_qp_attr *a) { a->ah_attr.grh.sgid_index = 200; }
static void m_av_sgid_big(struct ibv_qp_attr *a) { a->ah_attr.grh.sgid_index = 255; }
static void m_av_nogrh(struct ibv_qp_attr *a) { a->ah_attr.is_global = 0; a->ah_attr.dlid = 1; }
static void m_dqpn(struct ibv_qp_attr *a) { a->dest_qp_num = 0x1000000; }
static void m_rqpsn(struct ibv_qp_attr *a) { a->rq_psn = 0x1000000; }
static void m_sqpsn(struct ibv_qp_attr *a) { a->sq_psn = 0x1000000; }
static void m_timeout(struct ibv_qp_attr *a) { a->timeout = 32; }
static void m_retry(struct ibv_qp_attr *a) { a->retry_cnt = 8; }
static void m_rnr(struct ibv_qp_attr *a) { a->rnr_retry = 8; }
static void m_rnrtimer(struct ibv_qp_attr *a) { a->min_rnr_timer = 32; }
static void m_rdatomic(struct ibv_qp_attr *a) { a->max_rd_atomic = 255; }
static void m_dest_rdatomic(struct ibv_qp_attr *a) { a->max_dest_rd_atomic = 255; }
static void m_access(struct ibv_qp_attr *a) { a->qp_access_flags = 1 << 30; }
static void m_access_ro(struct ibv_qp_attr *a) { a->qp_access_flags = IBV_ACCESS_RELAXED_ORDERING | IBV_ACCESS_LOCAL_WRITE; }
static void m_none(struct ibv_qp_attr *a) { (void)a; }

/* CQ sizes, MR, SRQ, AH. cq may be NULL (a device without CQs yet). */
void test_invalid(struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_device_attr *d = &dattr.orig_attr;
	struct ibv_qp_init_attr ia;
	struct ibv_qp *qp;
	struct ibv_cq *c;
	struct ibv_mr *mr;
	struct ibv_srq *srq;
	int e;

	/* CQ sizes */
	errno = 0; c = ibv_create_cq(ctx, 0, NULL, NULL, 0); e = PERR(c); if (c) ibv_destroy_cq(c);
	expect_err(e, WANT_CQ_BAD_CQE, "create_cq cqe 0");
	errno = 0; c = ibv_create_cq(ctx, -1, NULL, NULL, 0); e = PERR(c); if (c) ibv_destroy_cq(c);
	expect_err(e, WANT_CQ_BAD_CQE, "create_cq cqe -1");
	errno = 0; c = ibv_create_cq(ctx, d->max_cqe + 1, NULL, NULL, 0); e = PERR(c); if (c) ibv_destroy_cq(c);
	expect_err(e, WANT_CQ_BAD_CQE, "create_cq cqe max_cqe+1 (%d)", d->max_cqe + 1);
	errno = 0; c = ibv_create_cq(ctx, d->max_cqe, NULL, NULL, 0); e = PERR(c);
	expect_err(e, 0, "create_cq cqe max_cqe (%d)", d->max_cqe);
	if (c)
		ibv_destroy_cq(c);
	c = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	if (c) {
		expect_err(rcerr(ibv_resize_cq(c, 0)), WANT_CQ_BAD_CQE, "resize_cq to 0");
		expect_err(rcerr(ibv_resize_cq(c, d->max_cqe + 1)), WANT_CQ_BAD_CQE, "resize_cq to max_cqe+1");
		check(c->cqe >= 16, "failed resizes leave cq->cqe (%d)", c->cqe);
		ibv_destroy_cq(c);
	}

	/* MR */
	errno = 0; mr = ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_REMOTE_WRITE); e = PERR(mr); if (mr) ibv_dereg_mr(mr);
	expect_err(e, WANT_MR_BAD_ACCESS, "reg_mr REMOTE_WRITE without LOCAL_WRITE");
	errno = 0; mr = ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_REMOTE_READ); e = PERR(mr); if (mr) ibv_dereg_mr(mr);
	expect_err(e, WANT_MR_BAD_ACCESS, "reg_mr REMOTE_ATOMIC without LOCAL_WRITE");
	errno = 0; mr = ibv_reg_mr(pd, buf, 0, IBV_ACCESS_LOCAL_WRITE); e = PERR(mr); if (mr) ibv_dereg_mr(mr);
	expect_err(e, WANT_MR_ZERO_LEN, "reg_mr length 0");
	errno = 0; mr = ibv_reg_mr(pd, (void *)(uintptr_t)0xfffffffffffff000ull, 0x2000, IBV_ACCESS_LOCAL_WRITE);
	e = PERR(mr); if (mr) ibv_dereg_mr(mr);
	expect_err(e, WANT_MR_WRAP, "reg_mr address+length wraps around");
	{
		void *p = mmap(NULL, 3 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		munmap((char *)p + 4096, 4096); /* a hole in the middle */
		errno = 0; mr = ibv_reg_mr(pd, p, 3 * 4096, IBV_ACCESS_LOCAL_WRITE); e = PERR(mr); if (mr) ibv_dereg_mr(mr);
		expect_err(e, WANT_MR_UNMAPPED, "reg_mr over an unmapped page");
		munmap(p, 3 * 4096);
	}
	errno = 0; mr = ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_ON_DEMAND | IBV_ACCESS_LOCAL_WRITE);
	e = PERR(mr); if (mr) ibv_dereg_mr(mr);
	/* ib_check_mr_access(): ON_DEMAND without IBK_ON_DEMAND_PAGING. */
	expect_err(e, (dattr.odp_caps.general_caps & IBV_ODP_SUPPORT) ? 0 : EOPNOTSUPP,
		   "reg_mr ON_DEMAND (device %s ODP)",
		   (dattr.odp_caps.general_caps & IBV_ODP_SUPPORT) ? "reports" : "does not report");

	/* SRQ */
	{
		struct ibv_srq_init_attr sa = { .attr = { .max_wr = d->max_srq_wr + 1, .max_sge = 1 } };

		errno = 0; srq = ibv_create_srq(pd, &sa); e = PERR(srq); if (srq) ibv_destroy_srq(srq);
		expect_err(e, WANT_SRQ_BAD, "create_srq max_wr = max_srq_wr+1 (%d)", d->max_srq_wr + 1);
		sa.attr.max_wr = 16; sa.attr.max_sge = d->max_srq_sge + 1;
		errno = 0; srq = ibv_create_srq(pd, &sa); e = PERR(srq); if (srq) ibv_destroy_srq(srq);
		expect_err(e, WANT_SRQ_BAD, "create_srq max_sge = max_srq_sge+1 (%d)", d->max_srq_sge + 1);
		sa.attr.max_wr = 0; sa.attr.max_sge = 1;
		errno = 0; srq = ibv_create_srq(pd, &sa); e = PERR(srq); if (srq) ibv_destroy_srq(srq);
		expect_err(e, WANT_SRQ_BAD, "create_srq max_wr 0");
		sa.attr.max_wr = 16;
		srq = ibv_create_srq(pd, &sa);
		if (srq) {
			struct ibv_srq_attr a = { .srq_limit = 0 };
			struct ibv_srq_attr q;

			ibv_query_srq(srq, &q);
			a.srq_limit = q.max_wr + 1;
			expect_err(rcerr(ibv_modify_srq(srq, &a, IBV_SRQ_LIMIT)), WANT_SRQ_BAD,
				   "modify_srq limit above the SRQ's max_wr (%u > %u)", a.srq_limit, q.max_wr);
			a.max_wr = d->max_srq_wr + 1;
			expect_err(rcerr(ibv_modify_srq(srq, &a, IBV_SRQ_MAX_WR)), WANT_SRQ_BAD,
				   "modify_srq max_wr = max_srq_wr+1");
			a.srq_limit = 8;
			expect_err(rcerr(ibv_modify_srq(srq, &a, IBV_SRQ_LIMIT)), 0, "modify_srq limit 8");
			a.max_wr = 4;
			expect_err(rcerr(ibv_modify_srq(srq, &a, IBV_SRQ_MAX_WR)), WANT_SRQ_BAD,
				   "modify_srq max_wr 4 below the armed limit 8");
			ibv_query_srq(srq, &q);
			check(q.srq_limit == 8 && q.max_wr >= 16, "failed modify_srq leaves limit %u max_wr %u",
			      q.srq_limit, q.max_wr);
			/* SRQ resize (IBV_SRQ_MAX_WR) needs IBV_DEVICE_SRQ_RESIZE; rxe sets it. */
			if (d->device_cap_flags & IBV_DEVICE_SRQ_RESIZE) {
				a.max_wr = 64;
				e = rcerr(ibv_modify_srq(srq, &a, IBV_SRQ_MAX_WR));
				ibv_query_srq(srq, &q);
				checkd(!e && q.max_wr >= 64, ename(e), "modify_srq max_wr 16 -> 64 (device has SRQ_RESIZE): max_wr %u", q.max_wr);
			}
			/* SRQ in use by a QP cannot be destroyed. */
			memset(&ia, 0, sizeof(ia));
			ia.send_cq = ia.recv_cq = cq; ia.srq = srq; ia.qp_type = IBV_QPT_RC;
			ia.cap = (struct ibv_qp_cap){ .max_send_wr = 1, .max_send_sge = 1 };
			qp = cq ? ibv_create_qp(pd, &ia) : NULL;
			if (qp) {
				expect_err(ibv_destroy_srq(srq), WANT_BUSY, "destroy_srq while a QP uses it");
				ibv_destroy_qp(qp);
			} else {
				checkd(0, ename(errno), "create RC QP on an SRQ");
			}
			expect_err(ibv_destroy_srq(srq), 0, "destroy_srq once the QP is gone");
		}
	}

	/* AH */
	{
		struct ibv_ah_attr aa = {
			.is_global = 1, .port_num = 1,
			.grh = { .dgid = gid, .sgid_index = 200, .hop_limit = 64 },
		};
		struct ibv_ah *ah;

		/* An unpopulated GID index inside the table (sgid_index is a u8,
		 * gid_tbl_len 1024: no index past the table can be expressed).
		 * ib_core rdma_get_gid_attr() of an empty entry: ENODATA. */
		errno = 0; ah = ibv_create_ah(pd, &aa); e = PERR(ah); if (ah) ibv_destroy_ah(ah);
		expect_err(e, ENODATA, "create_ah with unpopulated sgid_index 200");
		aa.grh.sgid_index = 255;
		errno = 0; ah = ibv_create_ah(pd, &aa); e = PERR(ah); if (ah) ibv_destroy_ah(ah);
		expect_err(e, ENODATA, "create_ah with unpopulated sgid_index 255");
		aa.grh.sgid_index = gid_index; aa.port_num = 2;
		errno = 0; ah = ibv_create_ah(pd, &aa); e = PERR(ah); if (ah) ibv_destroy_ah(ah);
		expect_err(e, EINVAL, "create_ah on port 2");
		aa.port_num = 1; aa.is_global = 0; aa.dlid = 1;
		errno = 0; ah = ibv_create_ah(pd, &aa); e = PERR(ah); if (ah) ibv_destroy_ah(ah);
		/* RoCE needs a GRH: ib_core rdma_check_ah_attr() */
		expect_err(e, EINVAL, "create_ah without GRH on a RoCE port");
	}

}

/* QP caps above the device limits, unsupported QP types. */
void invalid_qp_caps(struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_device_attr *d = &dattr.orig_attr;
	struct ibv_qp_init_attr ia;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	int e;

	(void)d; (void)mr;

	/* QP caps above the device limits */
	struct { const char *name; struct ibv_qp_cap cap; } caps[] = {
		{ "max_send_wr = max_qp_wr+1", { .max_send_wr = d->max_qp_wr + 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 } },
		{ "max_recv_wr = max_qp_wr+1", { .max_send_wr = 1, .max_recv_wr = d->max_qp_wr + 1, .max_send_sge = 1, .max_recv_sge = 1 } },
		{ "max_send_sge = max_sge+1", { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = d->max_sge + 1, .max_recv_sge = 1 } },
		{ "max_recv_sge = max_sge+1", { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = d->max_sge + 1 } },
		{ "max_inline_data = 64 KiB", { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1, .max_inline_data = 65536 } },
	};
	for (int k = 0; k < (int)(sizeof(caps) / sizeof(caps[0])); k++) {
		for (int ti = 0; ti < 2; ti++) {
			memset(&ia, 0, sizeof(ia));
			ia.send_cq = ia.recv_cq = cq;
			ia.qp_type = ti ? IBV_QPT_UD : IBV_QPT_RC;
			ia.cap = caps[k].cap;
			errno = 0;
			qp = ibv_create_qp(pd, &ia);
			e = PERR(qp);
			if (qp)
				ibv_destroy_qp(qp);
			expect_err(e, WANT_QP_BAD_CAP, "create %s QP with %s", ti ? "UD" : "RC", caps[k].name);
		}
	}
	/* The limits themselves are accepted (max_qp_wr is large: RC only). */
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = ia.recv_cq = cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap = (struct ibv_qp_cap){ .max_send_wr = 1, .max_recv_wr = 1,
				      .max_send_sge = d->max_sge, .max_recv_sge = d->max_sge };
	errno = 0; qp = ibv_create_qp(pd, &ia); e = PERR(qp);
	expect_err(e, 0, "create RC QP with max_send_sge = max_recv_sge = max_sge (%d)", d->max_sge);
	if (qp)
		ibv_destroy_qp(qp);
	/* Unsupported QP types: UC is supported by rxe, XRC/RAW_PACKET are not. */
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = ia.recv_cq = cq;
	ia.qp_type = IBV_QPT_RAW_PACKET;
	ia.cap = (struct ibv_qp_cap){ .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 };
	errno = 0; qp = ibv_create_qp(pd, &ia); e = PERR(qp);
	if (qp)
		ibv_destroy_qp(qp);
	/* RAW_PACKET needs CAP_NET_RAW first (we are root), then rxe_qp_chk_init()
	 * rejects the type. */
	expect_err(e, EOPNOTSUPP, "create RAW_PACKET QP");

}

/* modify_qp with out-of-range values. */
void invalid_qp_modify(struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_device_attr *d = &dattr.orig_attr;
	struct ibv_qp_init_attr ia;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	int e;

	(void)d; (void)mr;

	/* modify_qp with out-of-range values */
	struct {
		enum ibv_qp_type t; enum ibv_qp_state from, to;
		void (*mut)(struct ibv_qp_attr *); int extra; int want; const char *name;
	} bm[] = {
		/* uverbs modify_qp(): !rdma_is_port_valid() */
		{ IBV_QPT_RC, IBV_QPS_RESET, IBV_QPS_INIT, m_port2, 0, EINVAL, "port 2" },
		{ IBV_QPT_RC, IBV_QPS_RESET, IBV_QPS_INIT, m_port0, 0, EINVAL, "port 0" },
		{ IBV_QPT_UD, IBV_QPS_RESET, IBV_QPS_INIT, m_port2, 0, EINVAL, "port 2" },
		/* QUIRK: pkey_tbl_len is 1, IBTA makes a P_Key index past the table
		 * invalid; neither rxe nor ib_core (without
		 * CONFIG_SECURITY_INFINIBAND) checks it: rxe accepts. */
		{ IBV_QPT_RC, IBV_QPS_RESET, IBV_QPS_INIT, m_pkey1, 0, 0, "pkey_index 1 (table has 1 entry) [rxe quirk]" },
		{ IBV_QPT_UD, IBV_QPS_RESET, IBV_QPS_INIT, m_pkey64, 0, 0, "pkey_index 64 [rxe quirk]" },
		/* rxe_qp_chk_attr(): access bits outside RXE_ACCESS_SUPPORTED_QP;
		 * the optional range (bits 20-29, e.g. RELAXED_ORDERING) is accepted. */
		{ IBV_QPT_RC, IBV_QPS_RESET, IBV_QPS_INIT, m_access, 0, EINVAL, "qp_access_flags bit 30" },
		{ IBV_QPT_RC, IBV_QPS_RESET, IBV_QPS_INIT, m_access_ro, 0, 0, "qp_access_flags RELAXED_ORDERING (optional bit 20)" },
		/* rxe_qp_chk_attr(): path_mtu > port max_mtu */
		{ IBV_QPT_RC, IBV_QPS_INIT, IBV_QPS_RTR, m_mtu6, 0, EINVAL, "path_mtu 6 (not an MTU)" },
		{ IBV_QPT_RC, IBV_QPS_INIT, IBV_QPS_RTR, m_mtu_big, 0, EINVAL, "path_mtu 4096+1 enum" },
		/* QUIRK: rxe checks path_mtu against max_mtu (4096) only; above
		 * the active MTU its datagrams do not fit the link (IP drops
		 * them, DF set) and the QP ends in retry exceeded. metaroce
		 * refuses it. */
		{ IBV_QPT_RC, IBV_QPS_INIT, IBV_QPS_RTR, m_mtu_over_active, 0, 0, "path_mtu one above the port's active_mtu [rxe quirk]" },
		{ IBV_QPT_UC, IBV_QPS_INIT, IBV_QPS_RTR, m_mtu_over_active, 0, 0, "path_mtu one above the port's active_mtu [rxe quirk]" },
		/* QUIRK: path_mtu 0 is not an IBV_MTU value; rxe only checks
		 * mtu > max_mtu, so 0 passes and qp->mtu becomes
		 * ib_mtu_enum_to_int(0) = -1. */
		{ IBV_QPT_RC, IBV_QPS_INIT, IBV_QPS_RTR, m_mtu0, 0, 0, "path_mtu 0 (not an MTU) [rxe quirk]" },
		/* uverbs modify_qp(): AV port */
		{ IBV_QPT_RC, IBV_QPS_INIT, IBV_QPS_RTR, m_av_port2, 0, EINVAL, "ah_attr.port_num 2" },
		/* ib_core rdma_fill_sgid_attr() -> rdma_get_gid_attr() of an empty entry */
		{ IBV_QPT_RC, IBV_QPS_INIT, IBV_QPS_RTR, m_av_sgid, 0, ENODATA, "ah_attr sgid_index 200 (unpopulated)" },
		{ IBV_QPT_RC, IBV_QPS_INIT, IBV_QPS_RTR, m_av_sgid_big, 0, ENODATA, "ah_attr sgid_index 255 (unpopulated)" },
		/* ib_core modify_qp: RoCE AV needs a GRH */
		{ IBV_QPT_RC, IBV_QPS_INIT, IBV_QPS_RTR, m_av_nogrh, 0, EINVAL, "ah_attr without GRH" },
		/* QUIRK: dest_qp_num is 24 bits (IBTA); rxe stores 0x1000000 unchecked. */
		{ IBV_QPT_RC, IBV_QPS_INIT, IBV_QPS_RTR, m_dqpn, 0, 0, "dest_qp_num 0x1000000 (> 24 bits) [rxe quirk]" },
		/* ib_core _ib_modify_qp(): PSNs wider than 24 bits are masked to
		 * 24 bits with a dev_warn, not refused (checked by query below). */
		{ IBV_QPT_RC, IBV_QPS_INIT, IBV_QPS_RTR, m_rqpsn, 0, 0, "rq_psn 0x1000000 (masked by ib_core)" },
		{ IBV_QPT_RC, IBV_QPS_RTR, IBV_QPS_RTS, m_sqpsn, 0, 0, "sq_psn 0x1000000 (masked by ib_core)" },
		{ IBV_QPT_UD, IBV_QPS_RTR, IBV_QPS_RTS, m_sqpsn, 0, 0, "sq_psn 0x1000000 (masked by ib_core)" },
		/* rxe_qp_chk_attr(): timeout > 31 */
		{ IBV_QPT_RC, IBV_QPS_RTR, IBV_QPS_RTS, m_timeout, 0, EINVAL, "timeout 32" },
		/* QUIRK: retry_cnt and rnr_retry are 3-bit fields, min_rnr_timer 5 bits
		 * (IBTA 9.7.5.2.8, 9.7.5.2.9, 10.2.4); rxe accepts 8 / 32 unchecked. */
		{ IBV_QPT_RC, IBV_QPS_RTR, IBV_QPS_RTS, m_retry, 0, 0, "retry_cnt 8 (> 3 bits) [rxe quirk]" },
		{ IBV_QPT_RC, IBV_QPS_RTR, IBV_QPS_RTS, m_rnr, 0, 0, "rnr_retry 8 (> 3 bits) [rxe quirk]" },
		{ IBV_QPT_RC, IBV_QPS_INIT, IBV_QPS_RTR, m_rnrtimer, 0, 0, "min_rnr_timer 32 (> 5 bits) [rxe quirk]" },
		/* rxe_qp_chk_attr(): max_rd_atomic > max_qp_rd_atom */
		{ IBV_QPT_RC, IBV_QPS_RTR, IBV_QPS_RTS, m_rdatomic, 0, EINVAL, "max_rd_atomic 255 (> max_qp_rd_atom)" },
		/* QUIRK: max_dest_rd_atomic is not checked against
		 * max_qp_init_rd_atom; rxe accepts 255 (and rounds it up to 256). */
		{ IBV_QPT_RC, IBV_QPS_INIT, IBV_QPS_RTR, m_dest_rdatomic, 0, 0, "max_dest_rd_atomic 255 (> max_qp_init_rd_atom) [rxe quirk]" },
		/* a mask bit that is not a standard attribute: rxe_modify_qp() */
		{ IBV_QPT_RC, IBV_QPS_RESET, IBV_QPS_INIT, m_none, 1 << 30, EOPNOTSUPP, "attr_mask bit 30" },
	};
	for (int k = 0; k < (int)(sizeof(bm) / sizeof(bm[0])); k++) {
		int s = -1;

		if (bm[k].mut == m_mtu_over_active && pattr.active_mtu >= IBV_MTU_4096)
			continue;	/* no MTU above the active one */
		if (strict && strstr(bm[k].name, "[rxe quirk]"))
			bm[k].want = EINVAL;

		e = bad_modify(pd, cq, bm[k].t, bm[k].from, bm[k].to, bm[k].mut, bm[k].extra, &s);
		if (e < 0) {
			checkd(0, "setup failed", "%s modify_qp %s->%s with %s", qpt_name(bm[k].t),
			       qps_name(bm[k].from), qps_name(bm[k].to), bm[k].name);
			continue;
		}
		expect_err(e, bm[k].want, "%s modify_qp %s->%s with %s%s", qpt_name(bm[k].t),
			   qps_name(bm[k].from), qps_name(bm[k].to), bm[k].name,
			   bm[k].want ? "" : " is accepted");
		if (bm[k].want && s != (int)bm[k].from)
			checkd(0, qps_name(s), "%s modify_qp %s->%s with %s: state unchanged",
			       qpt_name(bm[k].t), qps_name(bm[k].from), qps_name(bm[k].to), bm[k].name);
	}

	/* The masking of wide PSNs, seen through query_qp. */
	qp = make_qp(pd, cq, cq, IBV_QPT_RC, NULL, NULL);
	if (qp && !bring_to(qp, IBV_QPS_INIT)) {
		struct ibv_qp_attr a, q;
		int m = req_attrs(IBV_QPT_RC, IBV_QPS_INIT, IBV_QPS_RTR, &a);

		a.rq_psn = 0xc123456;
		e = rcerr(ibv_modify_qp(qp, &a, m));
		m = req_attrs(IBV_QPT_RC, IBV_QPS_RTR, IBV_QPS_RTS, &a);
		a.sq_psn = 0x7f654321;
		e = e ? e : rcerr(ibv_modify_qp(qp, &a, m));
		memset(&q, 0, sizeof(q));
		ibv_query_qp(qp, &q, IBV_QP_RQ_PSN | IBV_QP_SQ_PSN, &ia);
		checkd(!e && q.rq_psn == 0x123456 && q.sq_psn == 0x654321, ename(e),
		       "RC rq_psn 0xc123456 / sq_psn 0x7f654321 read back masked to 24 bits: %#x / %#x",
		       q.rq_psn, q.sq_psn);
	} else {
		checkd(0, ename(errno), "PSN masking: setup");
	}
	if (qp)
		ibv_destroy_qp(qp);

}

/* Destroy of objects still in use. */
void invalid_busy(void)
{
	struct ibv_device_attr *d = &dattr.orig_attr;
	struct ibv_qp_init_attr ia;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	int e;

	(void)d; (void)mr; (void)e;

	/* Destroy of objects still in use: EBUSY. */
	{
		struct ibv_pd *p = ibv_alloc_pd(ctx);
		struct ibv_cq *c2 = ibv_create_cq(ctx, 4, NULL, NULL, 0);
		struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
		struct ibv_cq *c3 = ch ? ibv_create_cq(ctx, 4, NULL, ch, 0) : NULL;

		if (!p || !c2 || !ch || !c3) {
			checkd(0, ename(errno), "setup PD/CQ/channel for the EBUSY checks");
		} else {
			mr = ibv_reg_mr(p, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
			if (mr) {
				expect_err(ibv_dealloc_pd(p), WANT_BUSY, "dealloc_pd with an MR registered");
				ibv_dereg_mr(mr);
			}
			memset(&ia, 0, sizeof(ia));
			ia.send_cq = ia.recv_cq = c2; ia.qp_type = IBV_QPT_RC;
			ia.cap = (struct ibv_qp_cap){ .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 };
			qp = ibv_create_qp(p, &ia);
			if (qp) {
				expect_err(ibv_dealloc_pd(p), WANT_BUSY, "dealloc_pd with a QP");
				expect_err(ibv_destroy_cq(c2), WANT_BUSY, "destroy_cq while a QP uses it");
				ibv_destroy_qp(qp);
			} else {
				checkd(0, ename(errno), "create QP for the EBUSY checks");
			}
			if (mw_types() & 1) {
				struct ibv_mw *mw = ibv_alloc_mw(p, IBV_MW_TYPE_1);

				if (mw) {
					expect_err(ibv_dealloc_pd(p), WANT_BUSY, "dealloc_pd with an MW");
					ibv_dealloc_mw(mw);
				}
			}
			expect_err(ibv_destroy_comp_channel(ch), WANT_BUSY, "destroy_comp_channel with a CQ on it");
			expect_err(ibv_destroy_cq(c3), 0, "destroy_cq on the channel");
			expect_err(ibv_destroy_comp_channel(ch), 0, "destroy_comp_channel once empty");
			ch = NULL;
			expect_err(ibv_destroy_cq(c2), 0, "destroy_cq once the QP is gone");
			c2 = NULL;
			expect_err(ibv_dealloc_pd(p), 0, "dealloc_pd once empty");
			p = NULL;
		}
		if (c3 && ch)
			ibv_destroy_cq(c3);
		if (ch)
			ibv_destroy_comp_channel(ch);
		if (c2)
			ibv_destroy_cq(c2);
		if (p)
			ibv_dealloc_pd(p);
	}
}
