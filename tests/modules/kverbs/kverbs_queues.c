// SPDX-License-Identifier: GPL-2.0
/*
 * kverbs_test's queues: CQ events, post errors, the SRQ, ib_post_send
 * racing a move to ERR, a full SQ and its flush, ib_drain_qp, and CQ
 * overrun on a pair of its own (G/H).
 */
#include "kverbs.h"

/* B sends 32 bytes to a receive on A (whose CQ has our comp_handler). */
static bool b_to_a(u64 id, bool poll_a)
{
	struct ib_sge s = { t.b.tx_dma, 32, t.pd->local_dma_lkey };
	struct ib_sge rs = { t.a.rx_dma, 64, t.pd->local_dma_lkey };
	struct ib_send_wr wr = { .wr_id = id, .sg_list = &s, .num_sge = 1,
				 .opcode = IB_WR_SEND, .send_flags = IB_SEND_SIGNALED };
	struct ib_recv_wr rwr = { .wr_id = id, .sg_list = &rs, .num_sge = 1 };
	const struct ib_recv_wr *rbad = NULL;
	const struct ib_send_wr *sbad = NULL;
	int r;

	pattern(t.b.tx, 32);
	memset(t.a.rx, GUARD, 64);
	r = ib_post_recv(t.a.qp, &rwr, &rbad);
	if (r)
		return fail_why("A: ib_post_recv: %d", r);
	r = ib_post_send(t.b.qp, &wr, &sbad);
	if (r)
		return fail_why("B: ib_post_send: %d", r);
	if (!expect_wc(&t.b, id, IB_WC_SUCCESS, IB_WC_SEND, NULL))
		return false;
	if (!poll_a)
		return true;
	return expect_wc(&t.a, id, IB_WC_SUCCESS, IB_WC_RECV, NULL) &&
	       same(t.b.tx, t.a.rx, 32, "A's receive buffer");
}

void t_events(void)
{
	int before, r;
	bool ok;

	/* Armed: the next completion calls comp_handler. */
	before = atomic_read(&t.events);
	r = ib_req_notify_cq(t.a.cq, IB_CQ_NEXT_COMP);
	ok = r == 0 || fail_why("ib_req_notify_cq: %d", r);
	ok = ok && b_to_a(++t.wrid, true);
	if (ok && !wait_event_timeout(t.evq, atomic_read(&t.events) != before,
				      msecs_to_jiffies(timeout_ms)))
		ok = fail_why("no comp_handler call within %d ms", timeout_ms);
	report(ok, "ib_req_notify_cq(IB_CQ_NEXT_COMP), then a receive: comp_handler called once for A's CQ (%d)",
	       atomic_read(&t.events) - before);

	/* Not re-armed: no event. */
	msleep(100);
	before = atomic_read(&t.events);
	ok = b_to_a(++t.wrid, true);
	msleep(300);
	if (ok && atomic_read(&t.events) != before)
		ok = fail_why("comp_handler called %d times without ib_req_notify_cq",
			      atomic_read(&t.events) - before);
	report(ok, "no comp_handler call without re-arming the CQ");

	/* A completion already queued: IB_CQ_REPORT_MISSED_EVENTS returns > 0. */
	ok = b_to_a(++t.wrid, false);
	msleep(200);
	r = ib_req_notify_cq(t.a.cq, IB_CQ_NEXT_COMP | IB_CQ_REPORT_MISSED_EVENTS);
	if (ok && r <= 0)
		ok = fail_why("ib_req_notify_cq(NEXT_COMP | REPORT_MISSED_EVENTS) = %d with a completion queued",
			      r);
	ok = ok && expect_wc(&t.a, t.wrid, IB_WC_SUCCESS, IB_WC_RECV, NULL) &&
	     same(t.b.tx, t.a.rx, 32, "A's receive buffer");
	report(ok, "ib_req_notify_cq(IB_CQ_REPORT_MISSED_EVENTS) > 0 when a completion is queued");
	if (atomic_read(&t.stray_events))
		report(false, "comp_handler called %d times for a CQ never armed",
		       atomic_read(&t.stray_events));
}

/* Invalid requests: too many SGEs (send and receive). */
void t_errors(void)
{
	u32 n = t.cap.max_send_sge + 1, m = t.cap.max_recv_sge + 1;
	struct ib_sge *sg = kcalloc(max(n, m), sizeof(*sg), GFP_KERNEL);
	struct ib_sge s1 = { t.a.tx_dma, 16, t.pd->local_dma_lkey };
	struct ib_sge rs = { t.b.rx_dma, 64, t.pd->local_dma_lkey };
	struct ib_send_wr good = {}, bad = {};
	struct ib_recv_wr rwr = {}, rbadwr = {};
	const struct ib_recv_wr *rbad = NULL;
	const struct ib_send_wr *sbad = NULL;
	struct ib_wc wc;
	u64 id = ++t.wrid;
	bool ok;
	u32 i;
	int r;

	if (!sg) {
		report(false, "error checks: kcalloc");
		return;
	}
	for (i = 0; i < max(n, m); i++)
		sg[i] = (struct ib_sge){ t.a.tx_dma + i * 16, 1, t.pd->local_dma_lkey };

	/* Alone: -EINVAL, bad_wr = it. */
	bad.wr_id = id + 1000;
	bad.sg_list = sg;
	bad.num_sge = n;
	bad.opcode = IB_WR_SEND;
	bad.send_flags = IB_SEND_SIGNALED;
	r = ib_post_send(t.a.qp, &bad, &sbad);
	ok = (r == -EINVAL && sbad == &bad) ||
	     fail_why("returned %d, bad_wr %s", r, sbad == &bad ? "= the WR" : "WRONG");
	ok = ok && cq_empty(&t.a, 300);
	report(ok, "ib_post_send with num_sge %u > max_send_sge %u: -EINVAL, *bad_wr = the WR, nothing posted",
	       n, t.cap.max_send_sge);

	/* Second in a chain: the first is posted and completes. */
	pattern(t.a.tx, 16);
	memset(t.b.rx, GUARD, 64);
	rwr.wr_id = id;
	rwr.sg_list = &rs;
	rwr.num_sge = 1;
	r = ib_post_recv(t.b.qp, &rwr, &rbad);
	good.wr_id = id;
	good.sg_list = &s1;
	good.num_sge = 1;
	good.opcode = IB_WR_SEND;
	good.send_flags = IB_SEND_SIGNALED;
	good.next = &bad;
	sbad = NULL;
	r = r ?: ib_post_send(t.a.qp, &good, &sbad);
	ok = (r == -EINVAL && sbad == &bad) ||
	     fail_why("returned %d, bad_wr %s", r,
		      sbad == &bad ? "= the 2nd WR" : sbad == &good ? "= the 1st WR" : "WRONG");
	ok = ok && expect_wc(&t.a, id, IB_WC_SUCCESS, IB_WC_SEND, NULL) &&
	     expect_wc(&t.b, id, IB_WC_SUCCESS, IB_WC_RECV, &wc) &&
	     (wc.byte_len == 16 || fail_why("B: byte_len %u", wc.byte_len)) &&
	     same(t.a.tx, t.b.rx, 16, "B's receive buffer") && cq_empty(&t.a, 300);
	report(ok, "ib_post_send chain [valid, num_sge > max]: -EINVAL, *bad_wr = the 2nd WR, the 1st completes");

	/* Receive with too many SGEs: -EINVAL, bad_wr = it. */
	rbadwr.wr_id = id + 2000;
	rbadwr.sg_list = sg;
	rbadwr.num_sge = m;
	rbad = NULL;
	r = ib_post_recv(t.b.qp, &rbadwr, &rbad);
	ok = (r == -EINVAL && rbad == &rbadwr) ||
	     fail_why("returned %d, bad_wr %s", r, rbad == &rbadwr ? "= the WR" : "WRONG");
	report(ok, "ib_post_recv with num_sge %u > max_recv_sge %u: -EINVAL, *bad_wr = the WR",
	       m, t.cap.max_recv_sge);
	kfree(sg);
	/* A receive wrongly posted would take the next SEND: t_send sees it. */
	t_send("SEND 100 B after the rejected requests", 100, 1, 1, false, false);
}

/*
 * B has no receive posted: A's SENDs meet RNR NAKs, retried forever
 * (rnr_retry 7), so they stay on A's SQ until it is full (-ENOMEM). Then A
 * goes to ERR: they and A's posted receives complete with WR_FLUSH_ERR.
 */
void t_full_and_flush(void)
{
	u32 n = 2 * t.cap.max_send_wr + 2, posted, got_s = 0, got_r = 0, i;
	struct ib_send_wr *wr = kcalloc(n, sizeof(*wr), GFP_KERNEL);
	struct ib_sge rs[3];
	struct ib_recv_wr rwr[3] = {};
	const struct ib_recv_wr *rbad = NULL;
	const struct ib_send_wr *sbad = NULL;
	struct ib_send_wr one = {};
	struct ib_recv_wr rone = {};
	u64 sid = t.wrid + 1, rid = t.wrid + n + 1;
	struct ib_wc wc;
	bool ok, rok;
	int r;

	if (!wr) {
		report(false, "full SQ: kcalloc");
		return;
	}
	t.wrid += n + 10;
	for (i = 0; i < n; i++) {
		wr[i].wr_id = sid + i;
		wr[i].opcode = IB_WR_SEND;
		wr[i].send_flags = IB_SEND_SIGNALED;
		wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
	}
	r = ib_post_send(t.a.qp, wr, &sbad);
	posted = sbad >= wr && sbad < wr + n ? sbad - wr : n;
	ok = (r == -ENOMEM && posted >= t.cap.max_send_wr) ||
	     fail_why("returned %d after %u of %u WRs (max_send_wr %u)", r, posted, n,
		      t.cap.max_send_wr);
	report(ok, "full SQ (peer RNR-NAKs, infinite rnr_retry): ib_post_send -ENOMEM after %u WRs (max_send_wr %u), *bad_wr = the first not posted",
	       posted, t.cap.max_send_wr);
	if (r != -ENOMEM)
		posted = r ? 0 : n;

	for (i = 0; i < 3; i++) {
		rs[i] = (struct ib_sge){ t.a.rx_dma + i * 256, 256, t.pd->local_dma_lkey };
		rwr[i].wr_id = rid + i;
		rwr[i].sg_list = &rs[i];
		rwr[i].num_sge = 1;
		rwr[i].next = i < 2 ? &rwr[i + 1] : NULL;
	}
	r = ib_post_recv(t.a.qp, rwr, &rbad);
	if (r)
		report(false, "A: ib_post_recv of 3 receives: %d", r);
	msleep(100);
	r = set_state(t.a.qp, IB_QPS_ERR);
	if (r) {
		report(false, "A: modify to ERR: %d", r);
		kfree(wr);
		return;
	}
	ok = rok = true;
	while (got_s < posted || got_r < 3) {
		int k = poll_one(t.a.cq, &wc, timeout_ms);

		if (k <= 0) {
			fail_why("%u of %u SQ and %u of 3 RQ flush completions, then %s", got_s,
				 posted, got_r, k ? "a poll error" : "none within the timeout");
			ok = false;
			break;
		}
		if (wc.wr_id == sid + got_s && got_s < posted) {
			if (wc.status != IB_WC_WR_FLUSH_ERR)
				ok = fail_why("send wr_id %llu: status %d (%s)", wc.wr_id,
					      wc.status, ib_wc_status_msg(wc.status));
			got_s++;
		} else if (wc.wr_id == rid + got_r && got_r < 3) {
			if (wc.status != IB_WC_WR_FLUSH_ERR)
				rok = fail_why("recv wr_id %llu: status %d (%s)", wc.wr_id,
					       wc.status, ib_wc_status_msg(wc.status));
			got_r++;
		} else {
			ok = fail_why("unexpected completion wr_id %llu status %d (%s) (next send %llu, next recv %llu)",
				      wc.wr_id, wc.status, ib_wc_status_msg(wc.status),
				      sid + got_s, rid + got_r);
			break;
		}
	}
	report(ok && got_s == posted, "QP to ERR: its %u outstanding SENDs complete with IB_WC_WR_FLUSH_ERR, in order",
	       posted);
	report(ok && rok && got_r == 3, "QP to ERR: its 3 posted receives complete with IB_WC_WR_FLUSH_ERR, in order");
	kfree(wr);

	/* Posted in ERR: accepted, flushed. */
	one.wr_id = ++t.wrid;
	one.opcode = IB_WR_SEND;
	one.send_flags = IB_SEND_SIGNALED;
	r = ib_post_send(t.a.qp, &one, &sbad);
	ok = (r == 0 || fail_why("ib_post_send: %d", r)) &&
	     expect_wc(&t.a, t.wrid, IB_WC_WR_FLUSH_ERR, -1, NULL);
	report(ok, "ib_post_send in ERR: 0, completes with IB_WC_WR_FLUSH_ERR");
	rone.wr_id = ++t.wrid;
	rone.sg_list = rs;
	rone.num_sge = 1;
	r = ib_post_recv(t.a.qp, &rone, &rbad);
	ok = (r == 0 || fail_why("ib_post_recv: %d", r)) &&
	     expect_wc(&t.a, t.wrid, IB_WC_WR_FLUSH_ERR, -1, NULL) && cq_empty(&t.a, 300);
	report(ok, "ib_post_recv in ERR: 0, completes with IB_WC_WR_FLUSH_ERR");
}

/*
 * SRQ: QP C (on B's CQ) takes its receives from an SRQ; QP D (on A's CQ)
 * sends to it. Three messages land in three SRQ receives of 2 SGEs each.
 */
void t_srq(void)
{
	static const u32 len[3] = { 1, 5000, 20000 };
	struct ib_srq_init_attr sa = {
		.attr = { .max_wr = 16, .max_sge = 2 },
		.srq_type = IB_SRQT_BASIC,
	};
	struct ib_sge rs[6], ss[3], *sg;
	struct ib_recv_wr rwr[3] = {}, bad = {};
	struct ib_send_wr wr[3] = {};
	const struct ib_recv_wr *rbad = NULL;
	const struct ib_send_wr *sbad = NULL;
	struct ib_qp_cap cap;
	struct ib_wc wc;
	u64 id0 = t.wrid + 1;
	bool ok = true;
	int i, r;

	t.wrid += 4;
	t.c.name = "C";
	t.c.cq = t.b.cq;
	t.d.name = "D";
	t.d.cq = t.a.cq;
	t.srq = ib_create_srq(t.pd, &sa);
	if (IS_ERR(t.srq)) {
		r = PTR_ERR(t.srq);
		t.srq = NULL;
		report(false, "ib_create_srq: %d", r);
		return;
	}
	t.c.qp = make_qp(t.c.cq, &cap, t.srq, 64);
	if (IS_ERR(t.c.qp)) {
		r = PTR_ERR(t.c.qp);
		t.c.qp = NULL;
		report(false, "ib_create_qp(RC, SRQ): %d", r);
		return;
	}
	t.d.qp = make_qp(t.d.cq, &cap, NULL, 64);
	if (IS_ERR(t.d.qp)) {
		r = PTR_ERR(t.d.qp);
		t.d.qp = NULL;
		report(false, "ib_create_qp(RC): %d", r);
		return;
	}
	t.c.sq_psn = 0x777;
	t.d.sq_psn = 0xfffffe;
	r = to_init(t.c.qp) ?: to_init(t.d.qp) ?: to_rtr(&t.c, &t.d) ?: to_rtr(&t.d, &t.c) ?:
	    to_rts(&t.c) ?: to_rts(&t.d);
	if (!report(!r, "SRQ (max_wr %u, max_sge %u) and QP C on it (QPN %u) <-> QP D (QPN %u): connected (%d)",
		    sa.attr.max_wr, sa.attr.max_sge, t.c.qp->qp_num, t.d.qp->qp_num, r))
		return;

	memset(t.b.rx, GUARD, BUFSZ);
	memset(t.a.tx, 0x5a, BUFSZ);
	for (i = 0; i < 3; i++) {
		layout(&rs[2 * i], 2, t.b.rx_dma, i * 25000, 20000, 0);
		rwr[i].wr_id = id0 + i;
		rwr[i].sg_list = &rs[2 * i];
		rwr[i].num_sge = 2;
		rwr[i].next = i < 2 ? &rwr[i + 1] : NULL;
		pattern(t.a.tx + i * 25000, len[i]);
		ss[i] = (struct ib_sge){ t.a.tx_dma + i * 25000, len[i], t.pd->local_dma_lkey };
		wr[i].wr_id = id0 + i;
		wr[i].sg_list = &ss[i];
		wr[i].num_sge = 1;
		wr[i].opcode = IB_WR_SEND;
		wr[i].send_flags = IB_SEND_SIGNALED;
		wr[i].next = i < 2 ? &wr[i + 1] : NULL;
	}
	r = ib_post_srq_recv(t.srq, rwr, &rbad);
	if (r) {
		report(false, "ib_post_srq_recv of 3 receives: %d", r);
		return;
	}
	r = ib_post_send(t.d.qp, wr, &sbad);
	if (r) {
		report(false, "D: ib_post_send: %d", r);
		return;
	}
	for (i = 0; i < 3 && ok; i++)
		ok = expect_wc(&t.d, id0 + i, IB_WC_SUCCESS, IB_WC_SEND, NULL);
	for (i = 0; i < 3 && ok; i++) {
		ok = expect_wc(&t.c, id0 + i, IB_WC_SUCCESS, IB_WC_RECV, &wc);
		if (ok && wc.byte_len != len[i])
			ok = fail_why("C: receive %d: byte_len %u, expected %u", i, wc.byte_len,
				      len[i]);
	}
	if (ok) {
		memset(t.img, GUARD, BUFSZ);
		for (i = 0; i < 3; i++)
			scatter(t.img, t.b.rx_dma, &rs[2 * i], 2, t.a.tx + i * 25000, len[i]);
		ok = same(t.img, t.b.rx, BUFSZ, "the SRQ receives' buffers");
	}
	report(ok, "ib_post_srq_recv x3 (2 SGEs each): SENDs of 1, 5000, 20000 B land in order, data checked");

	sg = kcalloc(sa.attr.max_sge + 1, sizeof(*sg), GFP_KERNEL);
	if (!sg)
		return;
	for (i = 0; i <= sa.attr.max_sge; i++)
		sg[i] = (struct ib_sge){ t.b.rx_dma + i * 64, 64, t.pd->local_dma_lkey };
	bad.wr_id = id0 + 3;
	bad.sg_list = sg;
	bad.num_sge = sa.attr.max_sge + 1;
	rbad = NULL;
	r = ib_post_srq_recv(t.srq, &bad, &rbad);
	report(r == -EINVAL && rbad == &bad, "ib_post_srq_recv with num_sge %u > max_sge %u: -EINVAL (got %d), *bad_wr = the WR (%s)",
	       sa.attr.max_sge + 1, sa.attr.max_sge, r, rbad == &bad ? "yes" : "no");
	kfree(sg);
	/* C and D are done: ERR, and their flushes (none expected) out of the CQs. */
	set_state(t.c.qp, IB_QPS_ERR);
	set_state(t.d.qp, IB_QPS_ERR);
	ok = cq_empty(&t.c, 300) && cq_empty(&t.d, 300);
	report(ok, "QPs C and D to ERR with nothing outstanding: no completion");
	/*
	 * IBTA 11.6.3.1 / 10.8.4.4: a QP on an SRQ entering ERR raises Last WQE
	 * Reached; ib_drain_qp of such a QP waits up to 60 s for it.
	 */
	if (last_wqe) {
		ok = wait_event_timeout(t.evq, atomic_read(&t.last_wqe_events) > 0,
					msecs_to_jiffies(timeout_ms)) ||
		     fail_why("no IB_EVENT_QP_LAST_WQE_REACHED within %d ms", timeout_ms);
		report(ok, "QP C (on the SRQ) to ERR: IB_EVENT_QP_LAST_WQE_REACHED raised");
	}
}

/*
 * Issue 19 row 10(b): ib_post_send racing a move to ERR. Every call either
 * returns 0 -- all its work requests were taken, and each completes exactly
 * once (IB_WC_SUCCESS or IB_WC_WR_FLUSH_ERR) -- or fails with *bad_wr naming
 * its first request not taken (never NULL), and only the requests before it
 * complete. rxe: posting in ERR succeeds and flushes (rxe_post_send).
 */
#define RACE_POSTS 300
static struct {
	u32 taken;		/* work requests taken, wr_ids RACE_BASE .. + taken */
	int errors, bad_null, bad_wrong;
	atomic_t go;
} race;
#define RACE_BASE 0x7ace0000ULL

static int race_poster(void *arg)
{
	struct ib_rdma_wr w[2] = {};
	struct ib_sge sg[2];
	const struct ib_send_wr *bad;
	int i, k, r;

	while (!atomic_read(&race.go))
		cpu_relax();
	for (i = 0; i < RACE_POSTS; i++) {
		for (k = 0; k < 2; k++) {
			sg[k] = (struct ib_sge){ t.a.tx_dma + 8 * k, 8, t.pd->local_dma_lkey };
			w[k].wr.wr_id = RACE_BASE + race.taken + k;
			w[k].wr.sg_list = &sg[k];
			w[k].wr.num_sge = 1;
			w[k].wr.opcode = IB_WR_RDMA_WRITE;
			w[k].wr.send_flags = IB_SEND_SIGNALED;
			w[k].wr.next = k ? NULL : &w[1].wr;
			w[k].remote_addr = t.b.rx_dma + 8 * k;
			w[k].rkey = t.pd->unsafe_global_rkey;
		}
		bad = NULL;
		r = ib_post_send(t.a.qp, &w[0].wr, &bad);
		if (!r) {
			race.taken += 2;
			continue;
		}
		race.errors++;
		if (!bad)
			race.bad_null++;
		else if (bad == &w[1].wr)
			race.taken += 1;
		else if (bad != &w[0].wr)
			race.bad_wrong++;
		usleep_range(50, 100); /* full SQ: let it drain */
	}
	return 0;
}

void t_post_err_race(void)
{
	static u8 seen[2 * RACE_POSTS];
	struct task_struct *th;
	struct ib_wc wc;
	u32 got = 0, dup = 0, stray = 0, bad_status = 0;
	unsigned long end;
	bool ok;

	memset(&race, 0, sizeof(race));
	memset(seen, 0, sizeof(seen));
	th = kthread_run(race_poster, NULL, "kverbs_race");
	if (IS_ERR(th)) {
		report(false, "post/ERR race: kthread_run: %ld", PTR_ERR(th));
		return;
	}
	get_task_struct(th);
	atomic_set(&race.go, 1);
	usleep_range(2000, 4000);
	set_state(t.a.qp, IB_QPS_ERR);
	kthread_stop(th);
	put_task_struct(th);
	end = jiffies + msecs_to_jiffies(timeout_ms);
	while (got < race.taken && time_before(jiffies, end)) {
		if (ib_poll_cq(t.a.cq, 1, &wc) <= 0) {
			usleep_range(200, 1000);
			continue;
		}
		if (wc.wr_id < RACE_BASE || wc.wr_id >= RACE_BASE + ARRAY_SIZE(seen)) {
			stray++;
			continue;
		}
		if (seen[wc.wr_id - RACE_BASE]++)
			dup++;
		if (wc.status != IB_WC_SUCCESS && wc.status != IB_WC_WR_FLUSH_ERR)
			bad_status++;
		got++;
	}
	ok = (!race.bad_null && !race.bad_wrong) ||
	     fail_why("%d failed posts had *bad_wr NULL, %d a wrong one", race.bad_null,
		      race.bad_wrong);
	ok = ok && ((got == race.taken && !dup && !stray && !bad_status && cq_empty(&t.a, 200)) ||
		    fail_why("%u work requests taken, %u completed (%u twice, %u stray, %u bad status)",
			     race.taken, got, dup, stray, bad_status));
	report(ok, "ib_post_send racing a move to ERR: %u WRs taken in %d posts (%d refused), each completes once, every refusal names its bad_wr",
	       race.taken, RACE_POSTS, race.errors);
	t.desync = true;
}

/* ib_drain_qp on B, in a thread so that a device that never flushes fails the test instead of hanging it. */
static struct ib_cqe dcqe[2];
static atomic_t ddone;
static int dstatus[2];
static DECLARE_COMPLETION(drained);

static void drain_recv_done(struct ib_cq *cq, struct ib_wc *wc)
{
	int i = wc->wr_cqe == &dcqe[1];

	dstatus[i] = wc->status;
	atomic_inc(&ddone);
}

static int drain_thread(void *arg)
{
	ib_drain_qp(t.b.qp);
	kthread_complete_and_exit(&drained, 0);
}

void t_drain(void)
{
	struct ib_sge rs[2];
	struct ib_recv_wr rwr[2] = {};
	const struct ib_recv_wr *rbad = NULL;
	struct task_struct *th;
	bool ok;
	int i, r;

	/* B's CQ (IB_POLL_DIRECT) must hold no wr_id completions now: drain calls wr_cqe->done. */
	ok = cq_empty(&t.b, 300);
	if (!report(ok, "B's CQ empty before ib_drain_qp"))
		return;
	for (i = 0; i < 2; i++) {
		dcqe[i].done = drain_recv_done;
		dstatus[i] = -1;
		rs[i] = (struct ib_sge){ t.b.rx_dma + i * 256, 256, t.pd->local_dma_lkey };
		rwr[i].wr_cqe = &dcqe[i];
		rwr[i].sg_list = &rs[i];
		rwr[i].num_sge = 1;
		rwr[i].next = i == 0 ? &rwr[1] : NULL;
	}
	r = ib_post_recv(t.b.qp, rwr, &rbad);
	if (r) {
		report(false, "B: ib_post_recv before the drain: %d", r);
		return;
	}
	th = kthread_run(drain_thread, NULL, "kverbs_drain");
	if (IS_ERR(th)) {
		report(false, "kthread_run: %ld", PTR_ERR(th));
		return;
	}
	if (!wait_for_completion_timeout(&drained, msecs_to_jiffies(3 * timeout_ms))) {
		t.stuck = true;
		report(false, "ib_drain_qp(B) did not return within %d ms (the module stays pinned)",
		       3 * timeout_ms);
		return;
	}
	ok = (atomic_read(&ddone) == 2 && dstatus[0] == IB_WC_WR_FLUSH_ERR &&
	      dstatus[1] == IB_WC_WR_FLUSH_ERR) ||
	     fail_why("%d receive completions, statuses %d, %d", atomic_read(&ddone), dstatus[0],
		      dstatus[1]);
	report(ok, "ib_drain_qp(B) returns; its 2 posted receives completed with IB_WC_WR_FLUSH_ERR through wr_cqe->done");
}

static void ovf_comp(struct ib_cq *cq, void *ctx)
{
}

static void ovf_cq_event(struct ib_event *ev, void *ctx)
{
	if (ev->event == IB_EVENT_CQ_ERR && ev->element.cq == READ_ONCE(t.ovf_cq))
		atomic_inc(&t.cq_err_events);
	else
		atomic_inc(&t.ovf_other_events);
	wake_up(&t.evq);
}

/*
 * Row 3: a kernel CQ of 4 CQEs (ib_create_cq with an event_handler), never
 * polled, gets more completions than it holds. IBTA 11.4.2.1 / 11.6.3: a CQ
 * overrun is an affiliated asynchronous error, IB_EVENT_CQ_ERR (rxe_cq_post:
 * the completion is dropped and the event handler called, per dropped one).
 * recv = false: G's send completions overrun it; G's requester goes on (rxe),
 * H receives every message. recv = true: G's receive completions overrun it:
 * IBTA 9.9.3 responder class G (rxe RESPST_ERR_CQ_OVERFLOW): G goes to ERR
 * without acknowledging the message, so H's SEND of it ends in
 * IB_WC_RETRY_EXC_ERR (H: timeout 14, retry_cnt 2). Either way the CQ keeps
 * the completions it had room for, in order. Nothing is left outstanding on
 * G (nothing to flush into the full CQ); no ib_drain_qp (its completion
 * could not be queued); QPs are destroyed before their CQs.
 */
static struct {
	struct ib_send_wr wr[12];
	struct ib_recv_wr rwr[12];
	struct ib_sge ss[12], rs[12];
} ovf_wrs;	/* t_cq_overrun's work requests (off the stack; the tests run one at a time) */

void t_cq_overrun(bool recv)
{
	struct ib_cq_init_attr ca = { .cqe = 4 };
	struct side *g = &t.g, *h = &t.h, *snd, *rcv;
	struct ib_send_wr *wr = ovf_wrs.wr;
	struct ib_recv_wr *rwr = ovf_wrs.rwr;
	struct ib_sge *ss = ovf_wrs.ss, *rs = ovf_wrs.rs;
	const struct ib_recv_wr *rbad = NULL;
	const struct ib_send_wr *sbad = NULL;
	const char *what = recv ? "receive" : "send";
	struct ib_qp_cap cap;
	struct ib_wc wc;
	u64 id0 = t.wrid + 1;
	int i, n, cqe, r;
	bool ok;

	memset(&ovf_wrs, 0, sizeof(ovf_wrs));
	g->name = "G";
	h->name = "H";
	atomic_set(&t.cq_err_events, 0);
	atomic_set(&t.ovf_other_events, 0);
	g->cq = ib_create_cq(t.ibdev, ovf_comp, ovf_cq_event, NULL, &ca);
	if (IS_ERR(g->cq)) {
		report(false, "ib_create_cq(cqe 4, event_handler): %ld", PTR_ERR(g->cq));
		g->cq = NULL;
		return;
	}
	g->raw_cq = true;
	WRITE_ONCE(t.ovf_cq, g->cq);
	h->cq = ib_alloc_cq(t.ibdev, NULL, CQE, 0, IB_POLL_DIRECT);
	if (IS_ERR(h->cq)) {
		report(false, "H: ib_alloc_cq: %ld", PTR_ERR(h->cq));
		h->cq = NULL;
		goto out;
	}
	cqe = g->cq->cqe;
	n = recv ? cqe + 1 : cqe + 2;
	g->sq_psn = 0x300 + recv;
	h->sq_psn = 0xabc00 + recv;
	ok = pair_connect(g, h, 64, recv ? 14 : 18, recv ? 2 : 7, &cap) &&
	     ((cqe >= 4 && n <= ARRAY_SIZE(ovf_wrs.wr)) || fail_why("cqe %d", cqe));
	if (!report(ok, "QP G on a CQ from ib_create_cq(cqe 4, event_handler) (%d CQEs granted) <-> QP H: connected",
		    cqe))
		goto out;

	t.wrid += n;
	snd = recv ? h : g;
	rcv = recv ? g : h;
	memset(t.b.rx, GUARD, n * 64);
	for (i = 0; i < n; i++) {
		pattern(t.a.tx + i * 64, 8);
		ss[i] = (struct ib_sge){ t.a.tx_dma + i * 64, 8, t.pd->local_dma_lkey };
		rs[i] = (struct ib_sge){ t.b.rx_dma + i * 64, 64, t.pd->local_dma_lkey };
		rwr[i].wr_id = id0 + i;
		rwr[i].sg_list = &rs[i];
		rwr[i].num_sge = 1;
		rwr[i].next = i + 1 < n ? &rwr[i + 1] : NULL;
		wr[i].wr_id = id0 + i;
		wr[i].sg_list = &ss[i];
		wr[i].num_sge = 1;
		wr[i].opcode = IB_WR_SEND;
		wr[i].send_flags = IB_SEND_SIGNALED;
		wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
	}
	r = ib_post_recv(rcv->qp, rwr, &rbad);
	if (r) {
		report(false, "%s: ib_post_recv of %d: %d", rcv->name, n, r);
		goto out;
	}
	r = ib_post_send(snd->qp, wr, &sbad);
	if (r) {
		report(false, "%s: ib_post_send of %d: %d", snd->name, n, r);
		goto out;
	}

	/* The peer's side (H's CQ is large). */
	ok = true;
	for (i = 0; i < n && ok; i++) {
		if (!recv) {
			ok = expect_wc(h, id0 + i, IB_WC_SUCCESS, IB_WC_RECV, &wc) &&
			     (wc.byte_len == 8 || fail_why("H: byte_len %u", wc.byte_len)) &&
			     same(t.a.tx + i * 64, t.b.rx + i * 64, 8, "H's receive buffer");
		} else if (i < cqe) {
			ok = expect_wc(h, id0 + i, IB_WC_SUCCESS, IB_WC_SEND, NULL);
		} else {
			ok = expect_wc(h, id0 + i, IB_WC_RETRY_EXC_ERR, -1, NULL);
		}
	}
	if (recv)
		report(ok, "receive CQ overrun: H's first %d SENDs complete IB_WC_SUCCESS, the one G could not complete IB_WC_RETRY_EXC_ERR (G did not ACK it: IBTA 9.9.3 class G, rxe)",
		       cqe);
	else
		report(ok, "send CQ overrun: H receives all %d SENDs of G, data checked", n);

	ok = wait_event_timeout(t.evq, atomic_read(&t.cq_err_events) > 0,
				msecs_to_jiffies(timeout_ms)) ||
	     fail_why("no IB_EVENT_CQ_ERR within %d ms (%d other events)", timeout_ms,
		      atomic_read(&t.ovf_other_events));
	msleep(100);
	report(ok && !atomic_read(&t.ovf_other_events),
	       "%s CQ overrun (%d completions for %d CQEs, not polled): IB_EVENT_CQ_ERR to the CQ's event_handler (got %d, %d other events; IBTA 11.4.2.1, rxe_cq_post)",
	       what, n, cqe, atomic_read(&t.cq_err_events), atomic_read(&t.ovf_other_events));

	ok = true;
	for (i = 0; i < cqe && ok; i++)
		ok = expect_wc(g, id0 + i, IB_WC_SUCCESS, recv ? IB_WC_RECV : IB_WC_SEND, NULL);
	if (ok) {
		while (poll_one(g->cq, &wc, 300) > 0)
			i++;
		if (i != cqe)
			ok = fail_why("%d completions in a CQ whose ib_cq.cqe is %d: it holds more than it reports (rxe reports its ring's capacity, 2^k - 1)",
				      i, cqe);
	}
	report(ok, "... the CQ holds the first %d (its ib_cq.cqe) %s completions, in order, IB_WC_SUCCESS, and nothing more (rxe drops the rest)",
	       cqe, what);
	if (recv) {
		enum ib_qp_state st = query_state(g->qp);

		report(st == IB_QPS_ERR, "... G, whose receive completion did not fit, is in ERR (ib_query_qp: %d; IBTA 9.9.3 responder class G, rxe RESPST_ERR_CQ_OVERFLOW)",
		       st);
	}
out:
	side_free(g);
	side_free(h);
	WRITE_ONCE(t.ovf_cq, NULL);
}
