// SPDX-License-Identifier: GPL-2.0
/*
 * kverbs_test's helpers: TAP reporting (with the corrupt=N self-check),
 * waiting for completions, test patterns and SGE layouts, moving QPs
 * through their states and connecting pairs of them.
 */
#include "kverbs.h"

/* --- reporting --- */

int tn, ncmp;
static char why[320];

__printf(1, 2) bool fail_why(const char *fmt, ...)
{
	va_list ap;

	if (!why[0]) {
		va_start(ap, fmt);
		vsnprintf(why, sizeof(why), fmt, ap);
		va_end(ap);
	}
	return false;
}

__printf(2, 3) bool report(bool ok, const char *fmt, ...)
{
	struct va_format vaf;
	va_list ap;

	va_start(ap, fmt);
	vaf.fmt = fmt;
	vaf.va = &ap;
	tn++;
	if (ok) {
		passed++;
		pr_info("ok %d - %pV\n", tn, &vaf);
	} else {
		failed++;
		pr_info("not ok %d - %pV\n", tn, &vaf);
		if (why[0])
			pr_info("#   %s\n", why);
		t.desync = true; /* the QP pair may hold stray WRs: reconnect */
	}
	va_end(ap);
	why[0] = 0;
	return ok;
}

/* Compares n bytes; corrupt=N flips one expected byte of comparison N. */
bool same(const u8 *want, const u8 *got, size_t n, const char *what)
{
	size_t i;

	ncmp++;
	for (i = 0; i < n; i++) {
		u8 w = want[i];

		if (corrupt == ncmp && i == n / 2)
			w ^= 0xff;
		if (got[i] != w)
			return fail_why("%s: byte %zu of %zu is %#x, expected %#x (comparison %d)",
					what, i, n, got[i], w, ncmp);
	}
	return true;
}

/* --- completions --- */

int poll_one(struct ib_cq *cq, struct ib_wc *wc, int ms)
{
	unsigned long end = jiffies + msecs_to_jiffies(ms);
	int n;

	for (;;) {
		n = ib_poll_cq(cq, 1, wc);
		if (n != 0)
			return n;
		if (time_after(jiffies, end))
			return 0;
		usleep_range(200, 1000);
	}
}

/* Waits for the next completion on s's CQ and checks it (opcode < 0: any). */
bool expect_wc(struct side *s, u64 wr_id, enum ib_wc_status st, int opcode,
	       struct ib_wc *out)
{
	struct ib_wc wc;
	int n = poll_one(s->cq, &wc, timeout_ms);

	if (n < 0)
		return fail_why("%s: ib_poll_cq: %d", s->name, n);
	if (n == 0)
		return fail_why("%s: no completion (wr_id %llu) within %d ms", s->name, wr_id,
				timeout_ms);
	if (out)
		*out = wc;
	if (wc.wr_id != wr_id || wc.status != st || (opcode >= 0 && wc.opcode != opcode) ||
	    wc.qp != s->qp)
		return fail_why("%s: completion wr_id %llu status %d (%s) opcode %d qp %s; expected wr_id %llu status %d (%s) opcode %d",
				s->name, wc.wr_id, wc.status, ib_wc_status_msg(wc.status),
				wc.opcode, wc.qp == s->qp ? "ok" : "WRONG", wr_id, st,
				ib_wc_status_msg(st), opcode);
	return true;
}

/* True if s's CQ stays empty for ms; what it finds is consumed. */
bool cq_empty(struct side *s, int ms)
{
	struct ib_wc wc;
	int n = poll_one(s->cq, &wc, ms);

	if (n > 0)
		return fail_why("%s: unexpected completion wr_id %llu status %d (%s) opcode %d",
				s->name, wc.wr_id, wc.status, ib_wc_status_msg(wc.status),
				wc.opcode);
	return n == 0;
}

void comp_handler(struct ib_cq *cq, void *ctx)
{
	if (cq == t.a.cq)
		atomic_inc(&t.events);
	else
		atomic_inc(&t.stray_events);
	wake_up(&t.evq);
}

void cq_event(struct ib_event *ev, void *ctx)
{
	pr_info("# CQ async event %d (%s)\n", ev->event, ib_event_msg(ev->event));
}

static void qp_event(struct ib_event *ev, void *ctx)
{
	if (ev->event == IB_EVENT_QP_LAST_WQE_REACHED && ev->element.qp == t.c.qp) {
		atomic_inc(&t.last_wqe_events);
		wake_up(&t.evq);
	}
	pr_info("# QP %u async event %d (%s)\n", ev->element.qp->qp_num, ev->event,
		ib_event_msg(ev->event));
}

/* --- buffers --- */

void pattern(u8 *p, u32 len)
{
	u8 s = ++t.seed;
	u32 i;

	for (i = 0; i < len; i++)
		p[i] = (u8)(i * 7 + (i >> 8) * 13 + s * 29 + 1);
}

/*
 * Lays n SGEs over len bytes at dma + off, GAP bytes apart, the last one
 * extra bytes longer. Returns the end offset.
 */
u32 layout(struct ib_sge *s, int n, u64 dma, u32 off, u32 len, u32 extra)
{
	u32 at = off, done = 0;
	int k;

	for (k = 0; k < n; k++) {
		u32 l = (k == n - 1) ? len - done : len / n;

		s[k].addr = dma + at;
		s[k].length = l + (k == n - 1 ? extra : 0);
		s[k].lkey = t.pd->local_dma_lkey;
		done += l;
		at += s[k].length + GAP;
	}
	WARN_ON(at > BUFSZ);
	return at;
}

/* Copies len bytes of src into the SGEs' places in base (mapped at dma). */
void scatter(u8 *base, u64 dma, const struct ib_sge *s, int n, const u8 *src, u32 len)
{
	u32 done = 0;
	int k;

	for (k = 0; k < n && done < len; k++) {
		u32 l = min(s[k].length, len - done);

		memcpy(base + (s[k].addr - dma), src + done, l);
		done += l;
	}
}

/* --- connection --- */

int to_init(struct ib_qp *qp)
{
	struct ib_qp_attr a = {
		.qp_state = IB_QPS_INIT,
		.pkey_index = 0,
		.port_num = 1,
		.qp_access_flags = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_READ |
				   IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_ATOMIC,
	};

	return ib_modify_qp(qp, &a, IB_QP_STATE | IB_QP_PKEY_INDEX | IB_QP_PORT |
				    IB_QP_ACCESS_FLAGS);
}

int to_rtr(struct side *s, struct side *peer)
{
	struct ib_qp_attr a = {};

	a.qp_state = IB_QPS_RTR;
	a.path_mtu = IB_MTU_1024;
	a.dest_qp_num = peer->qp->qp_num;
	a.rq_psn = peer->sq_psn;
	a.max_dest_rd_atomic = 4;
	a.min_rnr_timer = 12;
	a.ah_attr.type = RDMA_AH_ATTR_TYPE_ROCE;
	rdma_ah_set_port_num(&a.ah_attr, 1);
	rdma_ah_set_grh(&a.ah_attr, &t.gid, 0, t.sgid_index, 64, 0);
	memcpy(a.ah_attr.roce.dmac, t.mac, ETH_ALEN);
	return ib_modify_qp(s->qp, &a, IB_QP_STATE | IB_QP_AV | IB_QP_PATH_MTU |
				       IB_QP_DEST_QPN | IB_QP_RQ_PSN |
				       IB_QP_MAX_DEST_RD_ATOMIC | IB_QP_MIN_RNR_TIMER);
}

int to_rts_t(struct side *s, u8 timeout, u8 retry_cnt)
{
	struct ib_qp_attr a = {
		.qp_state = IB_QPS_RTS,
		.timeout = timeout,
		.retry_cnt = retry_cnt,
		.rnr_retry = 7,
		.sq_psn = s->sq_psn,
		.max_rd_atomic = 4,
	};

	return ib_modify_qp(s->qp, &a, IB_QP_STATE | IB_QP_TIMEOUT | IB_QP_RETRY_CNT |
				       IB_QP_RNR_RETRY | IB_QP_SQ_PSN | IB_QP_MAX_QP_RD_ATOMIC);
}

int to_rts(struct side *s)
{
	return to_rts_t(s, 18, 7);
}

int set_state(struct ib_qp *qp, enum ib_qp_state st)
{
	struct ib_qp_attr a = { .qp_state = st };

	return ib_modify_qp(qp, &a, IB_QP_STATE);
}

void new_psns(void)
{
	/* A's PSNs wrap (24 bits) after 64 packets: the wrap is exercised. */
	t.a.sq_psn = (0xffffc0 + t.psn_base) & 0xffffff;
	t.b.sq_psn = 0x123 + t.psn_base;
	t.psn_base += NPSN;
}

int connect_rtr_rts(void)
{
	int r;

	r = to_rtr(&t.a, &t.b);
	if (r)
		return fail_why("A: modify INIT->RTR: %d", r), r;
	r = to_rtr(&t.b, &t.a);
	if (r)
		return fail_why("B: modify INIT->RTR: %d", r), r;
	r = to_rts(&t.a);
	if (r)
		return fail_why("A: modify RTR->RTS: %d", r), r;
	r = to_rts(&t.b);
	if (r)
		return fail_why("B: modify RTR->RTS: %d", r), r;
	return 0;
}

static void drain_cq(struct side *s)
{
	struct ib_wc wc;

	while (poll_one(s->cq, &wc, 300) > 0)
		pr_info("#   %s: discarded completion wr_id %llu status %d (%s)\n", s->name,
			wc.wr_id, wc.status, ib_wc_status_msg(wc.status));
}

/* After a failure (or a test that left A in ERR): ERR, flush, RESET, connect again with new PSNs. */
bool reconnect(void)
{
	int r = 0;

	pr_info("# reconnecting the QP pair\n");
	set_state(t.a.qp, IB_QPS_ERR);
	set_state(t.b.qp, IB_QPS_ERR);
	msleep(200);
	drain_cq(&t.a);
	drain_cq(&t.b);
	r = set_state(t.a.qp, IB_QPS_RESET) ?: set_state(t.b.qp, IB_QPS_RESET) ?:
	    to_init(t.a.qp) ?: to_init(t.b.qp);
	if (!r) {
		new_psns();
		r = connect_rtr_rts();
	}
	t.desync = false;
	if (r)
		return report(false, "reconnect the QP pair after a failure (%d)", r);
	return true;
}

/* Destroys s's QP, then its CQ (only s's QP uses it). */
void side_free(struct side *s)
{
	if (s->qp)
		ib_destroy_qp(s->qp);
	s->qp = NULL;
	if (s->cq && s->raw_cq)
		ib_destroy_cq(s->cq);
	else if (s->cq)
		ib_free_cq(s->cq);
	s->cq = NULL;
}

/*
 * Creates RC QPs for x and y on their own CQs (inline room inl) and connects
 * them; y's requester uses local ACK timeout y_timeout and retry_cnt y_retry.
 */
bool pair_connect(struct side *x, struct side *y, u32 inl, u8 y_timeout, u8 y_retry,
		  struct ib_qp_cap *xcap)
{
	struct ib_qp_cap ycap;
	int r;

	x->qp = make_qp(x->cq, xcap, NULL, inl);
	if (IS_ERR(x->qp)) {
		r = PTR_ERR(x->qp);
		x->qp = NULL;
		return fail_why("%s: ib_create_qp(RC, max_inline_data %u): %d", x->name, inl, r);
	}
	y->qp = make_qp(y->cq, &ycap, NULL, inl);
	if (IS_ERR(y->qp)) {
		r = PTR_ERR(y->qp);
		y->qp = NULL;
		return fail_why("%s: ib_create_qp(RC, max_inline_data %u): %d", y->name, inl, r);
	}
	r = to_init(x->qp) ?: to_init(y->qp) ?: to_rtr(x, y) ?: to_rtr(y, x) ?:
	    to_rts_t(x, 18, 7) ?: to_rts_t(y, y_timeout, y_retry);
	if (r)
		return fail_why("%s/%s: modify RESET->INIT->RTR->RTS: %d", x->name, y->name, r);
	return true;
}

enum ib_qp_state query_state(struct ib_qp *qp)
{
	struct ib_qp_init_attr ia;
	struct ib_qp_attr a = {};
	int r = ib_query_qp(qp, &a, IB_QP_STATE, &ia);

	return r ? (enum ib_qp_state)-1 : a.qp_state;
}

struct ib_qp *make_qp(struct ib_cq *cq, struct ib_qp_cap *cap, struct ib_srq *srq,
		      u32 inl)
{
	struct ib_qp_init_attr ia = {
		.event_handler = qp_event,
		.send_cq = cq,
		.recv_cq = cq,
		.cap = { .max_send_wr = 64, .max_recv_wr = 64, .max_send_sge = 4,
			 .max_recv_sge = 4, .max_inline_data = inl },
		.sq_sig_type = IB_SIGNAL_REQ_WR,
		.qp_type = IB_QPT_RC,
		.srq = srq,
	};
	struct ib_qp *qp;

	if (srq)
		ia.cap.max_recv_wr = ia.cap.max_recv_sge = 0;
	qp = ib_create_qp(t.pd, &ia);

	if (!IS_ERR(qp))
		*cap = ia.cap;
	return qp;
}
