// SPDX-License-Identifier: GPL-2.0
/*
 * exerciser, section 3 (continued): every depth up to the limits the device
 * reports can be created (issue 18).
 */
#include "exerciser.h"

/*
 * Every depth up to the limits the device reports can be created (issue 18):
 * QPs (RC and UD) with each of max_send_wr/max_recv_wr = max_qp_wr and
 * max_send_sge/max_recv_sge = max_sge, then all of them at once; an SRQ at
 * max_srq_wr x max_srq_sge; a CQ of max_cqe. The granted caps are at least
 * what was asked. Under -S every limit must be creatable; without it (rxe,
 * which reports max_qp_wr = 2^20: rings of 0.5-2 GiB) a limit whose ring
 * exceeds the test's budget is a SKIP that says so, never a pass. Before
 * issue 18 metaroce reported 2^20 too and failed these with ENOMEM and a
 * kernel WARNING (a high-order kmalloc sized by max_send_wr).
 */
#define LIMIT_BUDGET (64u << 20)

/* A lower bound of the bytes of a ring of `wr` WQEs of `sge` SGEs (the
 * rxe ABI: power-of-two slots, WQE header >= 128 bytes, 16 bytes per SGE). */
static unsigned long long ring_bytes(unsigned wr, unsigned sge)
{
	unsigned long long slots = 1, elem = 1;

	while (slots < (unsigned long long)wr + 1)
		slots <<= 1;
	while (elem < 128 + 16ull * sge)
		elem <<= 1;
	return slots * elem;
}

static void limit_qp(struct ibv_pd *pd, struct ibv_cq *cq, enum ibv_qp_type t, const char *what,
		     struct ibv_qp_cap cap)
{
	struct ibv_qp_init_attr ia = { .send_cq = cq, .recv_cq = cq, .qp_type = t, .cap = cap };
	unsigned long long need = ring_bytes(cap.max_send_wr, cap.max_send_sge) +
				  ring_bytes(cap.max_recv_wr, cap.max_recv_sge);
	const char *tn = t == IBV_QPT_UD ? "UD" : "RC";
	struct ibv_qp *qp;
	int e;

	if (!strict && need > LIMIT_BUDGET) {
		printf("ok %d - create %s QP with %s # SKIP its rings need >= %llu MiB, over the test's %u MiB\n",
		       ++n_tests, tn, what, need >> 20, LIMIT_BUDGET >> 20);
		return;
	}
	errno = 0;
	qp = ibv_create_qp(pd, &ia);
	e = PERR(qp);
	checkd(qp && ia.cap.max_send_wr >= cap.max_send_wr && ia.cap.max_recv_wr >= cap.max_recv_wr &&
	       ia.cap.max_send_sge >= cap.max_send_sge && ia.cap.max_recv_sge >= cap.max_recv_sge,
	       ename(e), "create %s QP with %s (granted wr %u/%u sge %u/%u)", tn, what,
	       ia.cap.max_send_wr, ia.cap.max_recv_wr, ia.cap.max_send_sge, ia.cap.max_recv_sge);
	if (qp)
		expect_err(ibv_destroy_qp(qp), 0, "destroy that %s QP", tn);
}

void test_limits(struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_device_attr *d = &dattr.orig_attr;
	unsigned w = d->max_qp_wr, g = d->max_sge;
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = d->max_srq_wr, .max_sge = d->max_srq_sge } };
	struct ibv_srq *srq;
	struct ibv_cq *big;
	char what[96];
	int e;

	for (int ti = 0; ti < 2; ti++) {
		enum ibv_qp_type t = ti ? IBV_QPT_UD : IBV_QPT_RC;

		snprintf(what, sizeof(what), "max_send_wr = max_qp_wr (%u)", w);
		limit_qp(pd, cq, t, what, (struct ibv_qp_cap){ w, 1, 1, 1, 0 });
		snprintf(what, sizeof(what), "max_recv_wr = max_qp_wr (%u)", w);
		limit_qp(pd, cq, t, what, (struct ibv_qp_cap){ 1, w, 1, 1, 0 });
		snprintf(what, sizeof(what), "max_send_sge = max_recv_sge = max_sge (%u), depth 64", g);
		limit_qp(pd, cq, t, what, (struct ibv_qp_cap){ 64, 64, g, g, 0 });
		snprintf(what, sizeof(what), "every cap at its limit (wr %u, sge %u)", w, g);
		limit_qp(pd, cq, t, what, (struct ibv_qp_cap){ w, w, g, g, 0 });
	}
	if (!strict && ring_bytes(d->max_srq_wr, d->max_srq_sge) > LIMIT_BUDGET) {
		printf("ok %d - create SRQ with max_wr = max_srq_wr (%d), max_sge = max_srq_sge (%d) "
		       "# SKIP its ring needs >= %llu MiB, over the test's %u MiB\n", ++n_tests,
		       d->max_srq_wr, d->max_srq_sge,
		       ring_bytes(d->max_srq_wr, d->max_srq_sge) >> 20, LIMIT_BUDGET >> 20);
	} else {
		errno = 0;
		srq = ibv_create_srq(pd, &sa);
		e = PERR(srq);
		checkd(srq && sa.attr.max_wr >= (unsigned)d->max_srq_wr, ename(e),
		       "create SRQ with max_wr = max_srq_wr (%d), max_sge = max_srq_sge (%d)",
		       d->max_srq_wr, d->max_srq_sge);
		if (srq)
			expect_err(ibv_destroy_srq(srq), 0, "destroy that SRQ");
	}
	errno = 0;
	big = ibv_create_cq(ctx, d->max_cqe, NULL, NULL, 0);
	e = PERR(big);
	checkd(big && big->cqe >= d->max_cqe, ename(e), "create CQ with max_cqe (%d) entries (got %d)",
	       d->max_cqe, big ? big->cqe : 0);
	if (big)
		expect_err(ibv_destroy_cq(big), 0, "destroy that CQ");
}
