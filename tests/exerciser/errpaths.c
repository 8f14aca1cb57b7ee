// SPDX-License-Identifier: GPL-2.0
/*
 * exerciser, section 5: error paths (issue 19).
 *
 * What a device must do when a work request cannot be carried out, over
 * loopback RC pairs (fresh_pair: a new pair per case, as most cases leave
 * a QP in the error state) and loopback UD QPs. Each check names the status
 * IBTA and rxe give; where rxe departs from IBTA the IBTA behaviour is
 * asserted with -S only. "rxe:" comments record what rxe was observed to do.
 *
 * This file: the section's objects (errpaths.h), the helpers its cases
 * share, and test_error_paths(), which sets them up and runs the cases of
 * errpaths_keys.c, errpaths_rc.c and errpaths_ud.c.
 */
#include "exerciser.h"
#include "errpaths.h"

/* The section's objects (errpaths.h). */
struct ep_state ep;

/* conn_default with remote atomics allowed. */
const struct conn_opts ep_default = {
	.access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC,
	.min_rnr_timer = 12, .rnr_retry = 7, .timeout = 14, .retry_cnt = 7, .depth = 16,
};

int ep_pair(const struct conn_opts *o, const char *what)
{
	int e = fresh_pair(ep.pd, ep.cq, &ep.a, &ep.b, o ? o : &ep_default);

	if (e)
		checkd(0, ename(e), "error paths: %s: a fresh loopback RC pair", what);
	return e;
}

int post_wr(struct ibv_qp *qp, uint64_t id, enum ibv_wr_opcode op, void *addr, uint32_t len,
	    uint32_t lkey, void *raddr, uint32_t rkey, uint64_t arg)
{
	return post_wr_imm(qp, id, op, addr, len, lkey, raddr, rkey, arg, 0x19);
}

int post_recv1(struct ibv_qp *qp, struct ibv_srq *srq, uint64_t id, void *addr, uint32_t len)
{
	return post_recv_lkey(qp, srq, id, addr, len, ep.mr->lkey);
}

/*
 * Wait up to secs for the affiliated async event t of obj (the CQ for
 * IBV_EVENT_CQ_ERR, else a QP). Every event read is acknowledged; the names
 * of the others go to others[len].  Returns 1 if it came.
 */
int wait_async(enum ibv_event_type t, void *obj, double secs, char *others, size_t len)
{
	double end = now() + secs;

	others[0] = 0;
	fcntl(ctx->async_fd, F_SETFL, fcntl(ctx->async_fd, F_GETFL) | O_NONBLOCK);
	for (;;) {
		struct pollfd p = { .fd = ctx->async_fd, .events = POLLIN };
		struct ibv_async_event ev;
		double left = end - now();
		void *el;

		if (left <= 0 || poll(&p, 1, (int)(left * 1000) + 1) < 0)
			return 0;
		if (ibv_get_async_event(ctx, &ev))
			continue;
		el = t == IBV_EVENT_CQ_ERR ? (void *)ev.element.cq : (void *)ev.element.qp;
		ibv_ack_async_event(&ev);
		if (ev.event_type == t && el == obj)
			return 1;
		snprintf(others + strlen(others), len - strlen(others), " %s",
			 ibv_event_type_str(ev.event_type));
	}
}

/* A completion status, -1 for none, or a post's errno negated. */
const char *st_str(int st)
{
	return st == -1 ? "no completion" : st < 0 ? ename(-st) : ibv_wc_status_str(st);
}

void test_error_paths(struct ibv_pd *pd)
{
	struct ibv_mr *dead;

	memset(&ep, 0, sizeof(ep));
	ep.pd = pd;
	ep.pd2 = ibv_alloc_pd(ctx);
	ep.cq = ibv_create_cq(ctx, 256, NULL, NULL, 0);
	ep.mr = ibv_reg_mr(pd, buf, BUF_SIZE, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			   IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND);
	ep.nolw = ibv_reg_mr(pd, E_LOC, 4096, IBV_ACCESS_REMOTE_READ | IBV_ACCESS_MW_BIND);
	ep.small = ibv_reg_mr(pd, E_SRC, 4096, IBV_ACCESS_LOCAL_WRITE);
	ep.other = ep.pd2 ? ibv_reg_mr(ep.pd2, buf, BUF_SIZE, IBV_ACCESS_LOCAL_WRITE) : NULL;
	dead = ibv_reg_mr(pd, E_LOC, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!ep.cq || !ep.mr || !ep.nolw || !ep.small || !ep.other || !dead) {
		checkd(0, ename(errno), "error paths: setup (second PD, CQ, MRs)");
		goto out;
	}
	ep.dead_lkey = dead->lkey;
	ep.dead_rkey = dead->rkey;
	ibv_dereg_mr(dead);

	ep_scatter();
	ep_gather();
	ep_dereg_race();
	ep_cq_overrun();
	ep_many_reads();
	ep_mw();
	ep_ud();
	ep_err_state();
	ep_invalid_requests();
	ep_send_inv_nothing();
	ep_rnr();
	ep_retry0();
	ep_ud_route_sqd();
	ep_huge_mr();
out:
	if (ep.a)
		ibv_destroy_qp(ep.a);
	if (ep.b)
		ibv_destroy_qp(ep.b);
	if (ep.other)
		ibv_dereg_mr(ep.other);
	if (ep.small)
		ibv_dereg_mr(ep.small);
	if (ep.nolw)
		ibv_dereg_mr(ep.nolw);
	if (ep.mr)
		ibv_dereg_mr(ep.mr);
	if (ep.cq)
		ibv_destroy_cq(ep.cq);
	if (ep.pd2)
		ibv_dealloc_pd(ep.pd2);
}
