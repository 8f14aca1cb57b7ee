// SPDX-License-Identifier: GPL-2.0
/*
 * exerciser: QP helpers -- create a QP, the attributes and mask IBTA
 * requires for each transition, move a QP along the legal path, poll a CQ.
 */
#include "exerciser.h"

struct ibv_qp *make_qp(struct ibv_pd *pd, struct ibv_cq *scq, struct ibv_cq *rcq,
		       enum ibv_qp_type t, struct ibv_srq *srq, struct ibv_qp_init_attr *out)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = scq, .recv_cq = rcq, .srq = srq, .qp_type = t,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 2,
			 .max_recv_sge = 2, .max_inline_data = 64 },
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);

	if (out)
		*out = ia;
	return qp;
}

/*
 * Fill attr and return the mask IBTA requires for from -> to (IBTA 10.3.1,
 * Table 92 / ib_core's qp_state_table), setting recognisable values.  For an
 * illegal pair return the required mask of the natural legal way into `to`,
 * so the failure is due to the state pair, not to a missing attribute.
 */
int req_attrs(enum ibv_qp_type t, enum ibv_qp_state from, enum ibv_qp_state to,
	      struct ibv_qp_attr *a)
{
	int m = IBV_QP_STATE;

	memset(a, 0, sizeof(*a));
	a->qp_state = to;
	switch (to) {
	case IBV_QPS_INIT:
		if (from == IBV_QPS_INIT) /* INIT->INIT: all optional */
			break;
		a->pkey_index = 0;
		a->port_num = 1;
		m |= IBV_QP_PKEY_INDEX | IBV_QP_PORT;
		if (t == IBV_QPT_RC) {
			a->qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
			m |= IBV_QP_ACCESS_FLAGS;
		} else if (t == IBV_QPT_UC) {
			a->qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
			m |= IBV_QP_ACCESS_FLAGS;
		} else {
			a->qkey = 0x11111111;
			m |= IBV_QP_QKEY;
		}
		break;
	case IBV_QPS_RTR:
		if (t == IBV_QPT_UC) {
			/* IBTA 10.3.1 table: UC takes no RNR timer nor responder depth. */
			a->path_mtu = IBV_MTU_1024;
			a->dest_qp_num = DUMMY_QPN;
			a->rq_psn = 0x123456;
			a->ah_attr.is_global = 1;
			a->ah_attr.grh.dgid = gid;
			a->ah_attr.grh.sgid_index = gid_index;
			a->ah_attr.grh.hop_limit = 64;
			a->ah_attr.port_num = 1;
			m |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
		} else if (t == IBV_QPT_RC) {
			a->path_mtu = IBV_MTU_1024;
			a->dest_qp_num = DUMMY_QPN;
			a->rq_psn = 0x123456;
			a->max_dest_rd_atomic = 4;
			a->min_rnr_timer = 12;
			a->ah_attr.is_global = 1;
			a->ah_attr.grh.dgid = gid;
			a->ah_attr.grh.sgid_index = gid_index;
			a->ah_attr.grh.hop_limit = 64;
			a->ah_attr.port_num = 1;
			m |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			     IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		}
		break;
	case IBV_QPS_RTS:
		if (from == IBV_QPS_RTS || from == IBV_QPS_SQD)
			break; /* RTS->RTS, SQD->RTS: all optional */
		a->sq_psn = 0x654321;
		m |= IBV_QP_SQ_PSN;
		if (t == IBV_QPT_RC) {
			/* 4.096us * 2^31: a lost send never times out during the test */
			a->timeout = 31;
			a->retry_cnt = 7;
			a->rnr_retry = 7;
			a->max_rd_atomic = 4;
			m |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			     IBV_QP_MAX_QP_RD_ATOMIC;
		}
		break;
	default: /* RESET, SQD, ERR: state only */
		break;
	}
	return m;
}

int qp_state(struct ibv_qp *qp, struct ibv_qp_attr *a)
{
	struct ibv_qp_attr tmp;
	struct ibv_qp_init_attr ia;

	if (!a)
		a = &tmp;
	if (ibv_query_qp(qp, a, IBV_QP_STATE | IBV_QP_CUR_STATE, &ia))
		return -1;
	return a->qp_state;
}

/* After RTS->SQD rxe drains the (empty) SQ in its send task; attributes may
 * only be modified once the drain is complete (IBTA 10.3.1: SQ Drained), so
 * wait for sq_draining to clear, as a consumer waiting for the SQ_DRAINED
 * event would. */
int wait_drained(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	double end = now() + 10;

	do {
		if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia))
			return errno;
		if (a.qp_state != IBV_QPS_SQD || !a.sq_draining)
			return 0;
		usleep(1000);
	} while (now() < end);
	return ETIMEDOUT;
}

int step(struct ibv_qp *qp, enum ibv_qp_state from, enum ibv_qp_state to)
{
	struct ibv_qp_attr a;
	int m = req_attrs(qp->qp_type, from, to, &a);
	int rc = rcerr(ibv_modify_qp(qp, &a, m));

	if (!rc && to == IBV_QPS_SQD)
		rc = wait_drained(qp);
	return rc;
}

/* Bring a fresh QP from RESET to state s along the legal path. */
int bring_to(struct ibv_qp *qp, enum ibv_qp_state s)
{
	static const enum ibv_qp_state path[] = { IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPS_RTR,
						  IBV_QPS_RTS, IBV_QPS_SQD };
	int i, rc;

	if (s == IBV_QPS_RESET)
		return 0;
	if (s == IBV_QPS_ERR) {
		rc = bring_to(qp, IBV_QPS_RTS);
		return rc ? rc : step(qp, IBV_QPS_RTS, IBV_QPS_ERR);
	}
	for (i = 1; i < 5; i++) {
		rc = step(qp, path[i - 1], path[i]);
		if (rc || path[i] == s)
			return rc;
	}
	return EINVAL;
}

/* Poll cq until n completions or timeout; returns the number polled. */
int poll_n(struct ibv_cq *cq, struct ibv_wc *wc, int n, double timeout)
{
	double end = now() + timeout;
	int got = 0, r;

	while (got < n) {
		r = ibv_poll_cq(cq, n - got, wc + got);
		if (r < 0)
			return r;
		got += r;
		if (got < n) {
			if (now() > end)
				break;
			usleep(500);
		}
	}
	return got;
}

/* Poll briefly for anything extra. */
int poll_extra(struct ibv_cq *cq, double secs)
{
	struct ibv_wc wc[16];
	double end = now() + secs;
	int extra = 0, r;

	do {
		r = ibv_poll_cq(cq, 16, wc);
		if (r > 0)
			extra += r;
		usleep(1000);
	} while (now() < end);
	return extra;
}
