// SPDX-License-Identifier: GPL-2.0
/*
 * exerciser: loopback traffic helpers, shared by sections 4 to 6 -- RC
 * pairs of this device's QPs connected to each other through the port's own
 * GID, one-WR posts and receives, completions collected by wr_id.
 */
#include "exerciser.h"

static const struct conn_opts conn_default = {
	.access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
	.min_rnr_timer = 12, .rnr_retry = 7, .timeout = 14, .retry_cnt = 7, .depth = 16,
};

int connect_pair_opts(struct ibv_qp *a, struct ibv_qp *b, const struct conn_opts *o)
{
	struct ibv_qp *q[2] = { a, b };

	for (int k = 0; k < 2; k++) {
		struct ibv_qp_attr at;
		int m, e;

		m = req_attrs(IBV_QPT_RC, IBV_QPS_RESET, IBV_QPS_INIT, &at);
		at.qp_access_flags = o->access;
		if ((e = rcerr(ibv_modify_qp(q[k], &at, m))))
			return e;
		m = req_attrs(IBV_QPT_RC, IBV_QPS_INIT, IBV_QPS_RTR, &at);
		at.dest_qp_num = q[1 - k]->qp_num;
		at.max_dest_rd_atomic = o->no_rd_res ? 0 : 1;
		at.min_rnr_timer = o->min_rnr_timer;
		if ((e = rcerr(ibv_modify_qp(q[k], &at, m))))
			return e;
		m = req_attrs(IBV_QPT_RC, IBV_QPS_RTR, IBV_QPS_RTS, &at);
		/* rxe checks PSNs: the peer's rq_psn from req_attrs(RTR). */
		at.sq_psn = 0x123456;
		at.timeout = o->timeout;
		at.retry_cnt = o->retry_cnt;
		at.rnr_retry = o->rnr_retry;
		at.max_rd_atomic = 1;
		m |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
		if ((e = rcerr(ibv_modify_qp(q[k], &at, m))))
			return e;
	}
	return 0;
}

int connect_pair(struct ibv_qp *a, struct ibv_qp *b)
{
	return connect_pair_opts(a, b, &conn_default);
}

struct ibv_qp *new_rc_qp(struct ibv_pd *pd, struct ibv_cq *scq, struct ibv_cq *rcq,
			 const struct conn_opts *o)
{
	struct ibv_qp_init_attr_ex ia = {
		.qp_type = IBV_QPT_RC, .send_cq = scq, .recv_cq = rcq, .pd = pd,
		.cap = { .max_send_wr = o->depth, .max_recv_wr = 16, .max_send_sge = 2,
			 .max_recv_sge = 2, .max_inline_data = 64 },
		.comp_mask = IBV_QP_INIT_ATTR_PD,
	};

	if (o->ext) {
		ia.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
		ia.send_ops_flags = IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP;
	}
	return ibv_create_qp_ex(ctx, &ia);
}

/*
 * A fresh loopback RC pair on cq (*a requests, *b responds), options o
 * (NULL: conn_default): destroys the pair before it (a case that put a QP
 * in the error state leaves it behind), empties cq, creates and connects.
 * Returns 0 or an errno.
 */
int fresh_pair(struct ibv_pd *pd, struct ibv_cq *cq, struct ibv_qp **a, struct ibv_qp **b,
	       const struct conn_opts *o)
{
	struct ibv_wc wc[16];

	if (*a)
		ibv_destroy_qp(*a);
	if (*b)
		ibv_destroy_qp(*b);
	while (ibv_poll_cq(cq, 16, wc) > 0)
		;
	o = o ? o : &conn_default;
	errno = 0;
	*a = new_rc_qp(pd, cq, cq, o);
	*b = *a ? new_rc_qp(pd, cq, cq, o) : NULL;
	if (!*a || !*b)
		return errno ? errno : ENOMEM;
	return connect_pair_opts(*a, *b, o);
}

int all_bytes(const char *p, int c, size_t n)
{
	while (n--)
		if (*p++ != (char)c)
			return 0;
	return 1;
}

int one_op(struct ibv_qp *qp, struct ibv_cq *cq, enum ibv_wr_opcode op, void *local,
	   uint32_t lkey, uint32_t len, uint64_t raddr, uint32_t rkey, struct ibv_wc *wc)
{
	struct ibv_sge sge = { .addr = (uintptr_t)local, .length = len, .lkey = lkey };
	struct ibv_send_wr w = { .wr_id = 0x7700 + op, .sg_list = &sge, .num_sge = 1,
				 .opcode = op, .send_flags = IBV_SEND_SIGNALED }, *bad;
	int e;

	w.wr.rdma.remote_addr = raddr;
	w.wr.rdma.rkey = rkey;
	if ((e = rcerr(ibv_post_send(qp, &w, &bad))))
		return -e;
	return poll_n(cq, wc, 1, 20);
}

/* Post one signaled work request gathering from one SGE (none if len is 0);
 * the atomics add (or compare with) arg; SEND_WITH_INV invalidates rkey. */
/* One signaled WR of `op` with one SGE (none when len is 0): RDMA or atomic
 * target raddr/rkey, atomic operand arg, immediate imm (network order). */
int post_wr_imm(struct ibv_qp *qp, uint64_t id, enum ibv_wr_opcode op, void *addr, uint32_t len,
		uint32_t lkey, void *raddr, uint32_t rkey, uint64_t arg, uint32_t imm)
{
	struct ibv_sge sge = { .addr = (uintptr_t)addr, .length = len, .lkey = lkey };
	struct ibv_send_wr w = { .wr_id = id, .sg_list = &sge, .num_sge = len ? 1 : 0, .opcode = op,
				 .send_flags = IBV_SEND_SIGNALED }, *bad;

	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD || op == IBV_WR_ATOMIC_CMP_AND_SWP) {
		w.wr.atomic.remote_addr = (uintptr_t)raddr;
		w.wr.atomic.rkey = rkey;
		w.wr.atomic.compare_add = arg;
	} else {
		w.wr.rdma.remote_addr = (uintptr_t)raddr;
		w.wr.rdma.rkey = rkey;
	}
	if (op == IBV_WR_SEND_WITH_INV)
		w.invalidate_rkey = rkey;
	else if (op == IBV_WR_RDMA_WRITE_WITH_IMM || op == IBV_WR_SEND_WITH_IMM)
		w.imm_data = imm;
	return rcerr(ibv_post_send(qp, &w, &bad));
}

/* One receive of one SGE (addr, len, lkey) on qp, or on srq if given. */
int post_recv_lkey(struct ibv_qp *qp, struct ibv_srq *srq, uint64_t id, void *addr, uint32_t len,
		   uint32_t lkey)
{
	struct ibv_sge sge = { .addr = (uintptr_t)addr, .length = len, .lkey = lkey };
	struct ibv_recv_wr r = { .wr_id = id, .sg_list = &sge, .num_sge = 1 }, *bad;

	return rcerr(srq ? ibv_post_srq_recv(srq, &r, &bad) : ibv_post_recv(qp, &r, &bad));
}

/* Poll cq into wc[max] until wr_id `until` has completed and `more` seconds
 * after that (for completions that must not come), or `secs` have passed. */
int collect(struct ibv_cq *cq, struct ibv_wc *wc, int max, uint64_t until, double secs,
	    double more)
{
	double end = now() + secs;
	int n = 0, r, seen = 0;

	while (n < max && now() < end) {
		r = ibv_poll_cq(cq, max - n, wc + n);
		if (r < 0)
			break;
		for (int i = n; i < n + r; i++)
			if (wc[i].wr_id == until && !seen) {
				seen = 1;
				end = now() + more;
			}
		n += r;
		if (!r)
			usleep(500);
	}
	return n;
}

struct ibv_wc *find_wc(struct ibv_wc *wc, int n, uint64_t id)
{
	for (int i = 0; i < n; i++)
		if (wc[i].wr_id == id)
			return &wc[i];
	return NULL;
}

const char *wc_str(const struct ibv_wc *w)
{
	return w ? ibv_wc_status_str(w->status) : "no completion";
}
