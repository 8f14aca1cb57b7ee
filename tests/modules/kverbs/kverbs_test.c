// SPDX-License-Identifier: GPL-2.0
/*
 * kverbs_test: a kernel ULP that exercises an RDMA device's kernel verbs data
 * path in loopback. Two RC QPs (A and B) of the device named by `dev` are
 * connected to each other through the device's own RoCE v2 GID and MAC, so
 * every byte travels through the device's transport. All of it runs at load:
 * TAP-like lines "kverbs_test: ok N - ..." / "not ok N - ..." go to the
 * kernel log, the counts to /sys/module/kverbs_test/parameters/{passed,failed}
 * (finished = 1 once the run is over); then everything is torn down, so the
 * module holds nothing while loaded and rmmod only unloads it.
 *
 *   insmod kverbs_test.ko dev=mr0 [timeout_ms=10000] [corrupt=N]
 *
 * corrupt=N flips one expected byte of the N-th payload comparison: the run
 * must then report that test as not ok (the test's own self-check).
 *
 * The extension API's kernel side (Documentation/extension.rst): with
 * metaroce loaded, metaroce_qp_query_paths() and metaroce_qp_set_paths()
 * (taken with symbol_get, so the module also runs where metaroce is not
 * loaded) on A: the connection read, its path count changed with traffic
 * carried on 2 paths, 0 and 65 paths refused (-EINVAL) and nothing changed;
 * on another device's QP both answer -EOPNOTSUPP.
 *
 * Error paths on QP pairs of their own (E/F, G/H): inline SEND_WITH_INV and
 * multi-SGE inline SEND, ib_alloc_mr with a huge max_num_sg (alloc_mr_sg=N
 * adds N to the values tried), CQ overrun of a kernel CQ by send and by
 * receive completions (IB_EVENT_CQ_ERR), SEND_WITH_INV of an unknown rkey.
 *
 * The device has no dma_device (ib_uses_virt_dma): ib_dma_map_single returns
 * kernel virtual addresses, used in SGEs with pd->local_dma_lkey and as
 * remote addresses with pd->unsafe_global_rkey (READ/WRITE) or the rkey of a
 * DMA MR with remote atomic access (atomics).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/module.h>
#include <linux/slab.h>
#include <linux/delay.h>
#include <linux/jiffies.h>
#include <linux/kthread.h>
#include <linux/completion.h>
#include <linux/wait.h>
#include <linux/etherdevice.h>
#include <linux/scatterlist.h>
#include <net/ipv6.h>
#include <rdma/ib_verbs.h>
#include <rdma/ib_cache.h>
#include "metaroce-abi.h"

static char *dev = "mr0";
module_param(dev, charp, 0444);
MODULE_PARM_DESC(dev, "RDMA device to test (default mr0)");
static int timeout_ms = 10000;
module_param(timeout_ms, int, 0444);
MODULE_PARM_DESC(timeout_ms, "how long to wait for each completion");
static int corrupt;
module_param(corrupt, int, 0444);
MODULE_PARM_DESC(corrupt, "self-check: corrupt the N-th payload comparison");
static int access_errors = 1;
module_param(access_errors, int, 0444);
MODULE_PARM_DESC(access_errors, "check remote access errors (IB_WC_REM_ACCESS_ERR; default 1)");
static int dma_user_va = 1;
module_param(dma_user_va, int, 0444);
MODULE_PARM_DESC(dma_user_va, "READ through the DMA MR's rkey at a user-space address must fail with IB_WC_REM_ACCESS_ERR (default 1; rxe reads whatever the address maps to: 0 for rxe)");
static int last_wqe = 1;
module_param(last_wqe, int, 0444);
MODULE_PARM_DESC(last_wqe, "check IB_EVENT_QP_LAST_WQE_REACHED for an SRQ QP moved to ERR (default 1; 0 skips it)");
static uint alloc_mr_sg;
module_param(alloc_mr_sg, uint, 0444);
MODULE_PARM_DESC(alloc_mr_sg, "also expect ib_alloc_mr(IB_MR_TYPE_MEM_REG) with this max_num_sg to fail without a WARNING (0: only 1<<31 and UINT_MAX; rxe WARNs for 1<<30)");
static int passed, failed, finished;
module_param(passed, int, 0444);
module_param(failed, int, 0444);
module_param(finished, int, 0444);

#define BUFSZ (96 * 1024)
#define GAP 64
#define GUARD 0xaa
#define CQE 1024
#define NPSN 0x1000

struct side {
	const char *name;
	struct ib_cq *cq;
	struct ib_qp *qp;
	u8 *tx, *rx;
	u64 tx_dma, rx_dma;
	bool tx_mapped, rx_mapped;
	bool raw_cq; /* cq from ib_create_cq (else ib_alloc_cq) */
	u32 sq_psn;
};

static struct {
	struct ib_device *ibdev;
	const struct ib_gid_attr *gid_attr;
	union ib_gid gid;
	int sgid_index;
	u8 mac[ETH_ALEN];
	struct ib_pd *pd;
	struct ib_mr *atomic_mr;
	struct side a, b, c, d, e, f, g, h;
	struct ib_srq *srq;
	struct ib_cq *ovf_cq;
	atomic_t cq_err_events, ovf_other_events;
	u8 *exp, *img;
	struct ib_qp_cap cap;
	atomic_t events, stray_events, last_wqe_events;
	wait_queue_head_t evq;
	bool desync, stuck;
	u8 seed;
	u64 wrid;
	u32 psn_base;
} t;

/* --- reporting --- */

static int tn, ncmp;
static char why[320];

static __printf(1, 2) bool fail_why(const char *fmt, ...)
{
	va_list ap;

	if (!why[0]) {
		va_start(ap, fmt);
		vsnprintf(why, sizeof(why), fmt, ap);
		va_end(ap);
	}
	return false;
}

static __printf(2, 3) bool report(bool ok, const char *fmt, ...)
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
static bool same(const u8 *want, const u8 *got, size_t n, const char *what)
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

static int poll_one(struct ib_cq *cq, struct ib_wc *wc, int ms)
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
static bool expect_wc(struct side *s, u64 wr_id, enum ib_wc_status st, int opcode,
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
static bool cq_empty(struct side *s, int ms)
{
	struct ib_wc wc;
	int n = poll_one(s->cq, &wc, ms);

	if (n > 0)
		return fail_why("%s: unexpected completion wr_id %llu status %d (%s) opcode %d",
				s->name, wc.wr_id, wc.status, ib_wc_status_msg(wc.status),
				wc.opcode);
	return n == 0;
}

static void comp_handler(struct ib_cq *cq, void *ctx)
{
	if (cq == t.a.cq)
		atomic_inc(&t.events);
	else
		atomic_inc(&t.stray_events);
	wake_up(&t.evq);
}

static void cq_event(struct ib_event *ev, void *ctx)
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

static void pattern(u8 *p, u32 len)
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
static u32 layout(struct ib_sge *s, int n, u64 dma, u32 off, u32 len, u32 extra)
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
static void scatter(u8 *base, u64 dma, const struct ib_sge *s, int n, const u8 *src, u32 len)
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

static int to_init(struct ib_qp *qp)
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

static int to_rtr(struct side *s, struct side *peer)
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

static int to_rts_t(struct side *s, u8 timeout, u8 retry_cnt)
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

static int to_rts(struct side *s)
{
	return to_rts_t(s, 18, 7);
}

static int set_state(struct ib_qp *qp, enum ib_qp_state st)
{
	struct ib_qp_attr a = { .qp_state = st };

	return ib_modify_qp(qp, &a, IB_QP_STATE);
}

static void new_psns(void)
{
	/* A's PSNs wrap (24 bits) after 64 packets: the wrap is exercised. */
	t.a.sq_psn = (0xffffc0 + t.psn_base) & 0xffffff;
	t.b.sq_psn = 0x123 + t.psn_base;
	t.psn_base += NPSN;
}

static int connect_rtr_rts(void)
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
static bool reconnect(void)
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

/* --- tests --- */

static struct ib_qp *make_qp(struct ib_cq *cq, struct ib_qp_cap *cap, struct ib_srq *srq,
			     u32 inl);

/* SEND (or SEND_WITH_IMM) of len bytes from ns SGEs of A to nr SGEs of B. */
static void t_send(const char *name, u32 len, int ns, int nr, bool imm, bool inl)
{
	struct ib_sge ss[8], rs[8];
	struct ib_recv_wr rwr = {};
	struct ib_send_wr wr = {};
	const struct ib_recv_wr *rbad = NULL;
	const struct ib_send_wr *sbad = NULL;
	struct ib_wc wc;
	u64 id = ++t.wrid;
	__be32 immv = cpu_to_be32(0x5a000000 | (u32)id);
	bool ok;
	int r;

	pattern(t.exp, len);
	memset(t.a.tx, 0x5a, BUFSZ);
	layout(ss, ns, t.a.tx_dma, 0, len, 0);
	scatter(t.a.tx, t.a.tx_dma, ss, ns, t.exp, len);
	memset(t.b.rx, GUARD, BUFSZ);
	layout(rs, nr, t.b.rx_dma, GAP, len, GAP);

	rwr.wr_id = id;
	rwr.sg_list = rs;
	rwr.num_sge = nr;
	r = ib_post_recv(t.b.qp, &rwr, &rbad);
	if (r) {
		report(false, "%s: B: ib_post_recv: %d", name, r);
		return;
	}
	wr.wr_id = id;
	wr.sg_list = ss;
	wr.num_sge = ns;
	wr.opcode = imm ? IB_WR_SEND_WITH_IMM : IB_WR_SEND;
	wr.send_flags = IB_SEND_SIGNALED | (inl ? IB_SEND_INLINE : 0);
	wr.ex.imm_data = immv;
	r = ib_post_send(t.a.qp, &wr, &sbad);
	if (r) {
		report(false, "%s: A: ib_post_send: %d", name, r);
		return;
	}
	if (inl) /* inline data is the device's copy: the buffer is free again */
		memset(t.a.tx, 0x33, BUFSZ);
	ok = expect_wc(&t.a, id, IB_WC_SUCCESS, IB_WC_SEND, NULL);
	ok &= expect_wc(&t.b, id, IB_WC_SUCCESS, IB_WC_RECV, &wc);
	if (ok && wc.byte_len != len)
		ok = fail_why("B: byte_len %u, expected %u", wc.byte_len, len);
	if (ok && !!(wc.wc_flags & IB_WC_WITH_IMM) != imm)
		ok = fail_why("B: wc_flags %#x: IB_WC_WITH_IMM %s expected", wc.wc_flags,
			      imm ? "" : "not");
	if (ok && imm && wc.ex.imm_data != immv)
		ok = fail_why("B: imm_data %#x, expected %#x", be32_to_cpu(wc.ex.imm_data),
			      be32_to_cpu(immv));
	if (ok) {
		memset(t.img, GUARD, BUFSZ);
		scatter(t.img, t.b.rx_dma, rs, nr, t.exp, len);
		ok = same(t.img, t.b.rx, BUFSZ, "B's receive buffer (payload and guards)");
	}
	report(ok, "%s", name);
}

/* RDMA WRITE (+IMM) of len bytes from ns SGEs of A into B's memory. */
static void t_write(const char *name, u32 len, int ns, bool imm, bool inl)
{
	struct ib_sge ss[8];
	struct ib_rdma_wr wr = {};
	struct ib_recv_wr rwr = {};
	const struct ib_recv_wr *rbad = NULL;
	const struct ib_send_wr *sbad = NULL;
	struct ib_wc wc;
	u64 id = ++t.wrid;
	u32 off = 257; /* an odd remote address */
	__be32 immv = cpu_to_be32(0xa5000000 | (u32)id);
	bool ok;
	int r;

	pattern(t.exp, len);
	memset(t.a.tx, 0x5a, BUFSZ);
	layout(ss, ns, t.a.tx_dma, 0, len, 0);
	scatter(t.a.tx, t.a.tx_dma, ss, ns, t.exp, len);
	memset(t.b.rx, GUARD, BUFSZ);
	if (imm) {
		rwr.wr_id = id; /* no SGE: WRITE_WITH_IMM consumes a receive, no bytes */
		r = ib_post_recv(t.b.qp, &rwr, &rbad);
		if (r) {
			report(false, "%s: B: ib_post_recv: %d", name, r);
			return;
		}
	}
	wr.wr.wr_id = id;
	wr.wr.sg_list = ss;
	wr.wr.num_sge = ns;
	wr.wr.opcode = imm ? IB_WR_RDMA_WRITE_WITH_IMM : IB_WR_RDMA_WRITE;
	wr.wr.send_flags = IB_SEND_SIGNALED | (inl ? IB_SEND_INLINE : 0);
	wr.wr.ex.imm_data = immv;
	wr.remote_addr = t.b.rx_dma + off;
	wr.rkey = t.pd->unsafe_global_rkey;
	r = ib_post_send(t.a.qp, &wr.wr, &sbad);
	if (r) {
		report(false, "%s: A: ib_post_send: %d", name, r);
		return;
	}
	if (inl)
		memset(t.a.tx, 0x33, BUFSZ);
	ok = expect_wc(&t.a, id, IB_WC_SUCCESS, IB_WC_RDMA_WRITE, NULL);
	if (imm) {
		ok &= expect_wc(&t.b, id, IB_WC_SUCCESS, IB_WC_RECV_RDMA_WITH_IMM, &wc);
		if (ok && wc.byte_len != len)
			ok = fail_why("B: byte_len %u, expected %u", wc.byte_len, len);
		if (ok && (!(wc.wc_flags & IB_WC_WITH_IMM) || wc.ex.imm_data != immv))
			ok = fail_why("B: wc_flags %#x imm_data %#x, expected IB_WC_WITH_IMM %#x",
				      wc.wc_flags, be32_to_cpu(wc.ex.imm_data),
				      be32_to_cpu(immv));
	}
	if (ok) {
		memset(t.img, GUARD, BUFSZ);
		memcpy(t.img + off, t.exp, len);
		ok = same(t.img, t.b.rx, BUFSZ, "B's memory after the WRITE");
	}
	report(ok, "%s", name);
}

/* RDMA READ of len bytes of B's memory into nr SGEs of A. */
static void t_read(const char *name, u32 len, int nr)
{
	struct ib_sge rs[8];
	struct ib_rdma_wr wr = {};
	const struct ib_send_wr *sbad = NULL;
	u64 id = ++t.wrid;
	u32 off = 4099;
	bool ok;
	int r;

	pattern(t.exp, len);
	memset(t.b.rx, 0x77, BUFSZ);
	memcpy(t.b.rx + off, t.exp, len);
	memset(t.a.rx, GUARD, BUFSZ);
	layout(rs, nr, t.a.rx_dma, GAP, len, 0);
	wr.wr.wr_id = id;
	wr.wr.sg_list = rs;
	wr.wr.num_sge = nr;
	wr.wr.opcode = IB_WR_RDMA_READ;
	wr.wr.send_flags = IB_SEND_SIGNALED;
	wr.remote_addr = t.b.rx_dma + off;
	wr.rkey = t.pd->unsafe_global_rkey;
	r = ib_post_send(t.a.qp, &wr.wr, &sbad);
	if (r) {
		report(false, "%s: A: ib_post_send: %d", name, r);
		return;
	}
	ok = expect_wc(&t.a, id, IB_WC_SUCCESS, IB_WC_RDMA_READ, NULL);
	if (ok) {
		memset(t.img, GUARD, BUFSZ);
		scatter(t.img, t.a.rx_dma, rs, nr, t.exp, len);
		ok = same(t.img, t.a.rx, BUFSZ, "A's buffer after the READ");
	}
	report(ok, "%s", name);
}

/* One atomic on the u64 at offset 4096 of B's memory; result into A. */
static void t_atomic(const char *name, enum ib_wr_opcode op, u64 before, u64 cmp_add,
		     u64 swap, u64 want_after)
{
	u64 *target = (u64 *)(t.b.rx + 4096);
	u64 *res = (u64 *)(t.a.rx + 64);
	struct ib_sge s = {
		.addr = t.a.rx_dma + 64, .length = 8, .lkey = t.pd->local_dma_lkey,
	};
	struct ib_atomic_wr wr = {};
	const struct ib_send_wr *sbad = NULL;
	u64 id = ++t.wrid;
	bool ok;
	int r;

	if (!t.atomic_mr) {
		report(false, "%s: no DMA MR with remote atomic access", name);
		return;
	}
	WRITE_ONCE(*target, before);
	WRITE_ONCE(*res, 0x0123456789abcdefULL);
	wr.wr.wr_id = id;
	wr.wr.sg_list = &s;
	wr.wr.num_sge = 1;
	wr.wr.opcode = op;
	wr.wr.send_flags = IB_SEND_SIGNALED;
	wr.remote_addr = t.b.rx_dma + 4096;
	wr.compare_add = cmp_add;
	wr.swap = swap;
	wr.rkey = t.atomic_mr->rkey;
	r = ib_post_send(t.a.qp, &wr.wr, &sbad);
	if (r) {
		report(false, "%s: A: ib_post_send: %d", name, r);
		return;
	}
	ok = expect_wc(&t.a, id, IB_WC_SUCCESS,
		       op == IB_WR_ATOMIC_CMP_AND_SWP ? IB_WC_COMP_SWAP : IB_WC_FETCH_ADD, NULL);
	if (ok && READ_ONCE(*res) != before)
		ok = fail_why("returned %#llx, expected the original %#llx", READ_ONCE(*res),
			      before);
	if (ok && corrupt == ++ncmp)
		want_after ^= 1;
	if (ok && READ_ONCE(*target) != want_after)
		ok = fail_why("memory is %#llx, expected %#llx (comparison %d)",
			      READ_ONCE(*target), want_after, ncmp);
	report(ok, "%s", name);
}

/* A chain of 5 SENDs, the first 4 unsignaled: one completion, the last. */
static void t_unsignaled(void)
{
	struct ib_sge ss[5], rs[5];
	struct ib_send_wr wr[5] = {};
	struct ib_recv_wr rwr[5] = {};
	const struct ib_recv_wr *rbad = NULL;
	const struct ib_send_wr *sbad = NULL;
	struct ib_wc wc;
	u64 id0 = t.wrid + 1;
	bool ok = true;
	int i, r;

	t.wrid += 5;
	memset(t.b.rx, GUARD, BUFSZ);
	for (i = 0; i < 5; i++) {
		pattern(t.a.tx + i * 1024, 100 * (i + 1));
		ss[i] = (struct ib_sge){ t.a.tx_dma + i * 1024, 100 * (i + 1), t.pd->local_dma_lkey };
		rs[i] = (struct ib_sge){ t.b.rx_dma + i * 1024, 1000, t.pd->local_dma_lkey };
		rwr[i].wr_id = id0 + i;
		rwr[i].sg_list = &rs[i];
		rwr[i].num_sge = 1;
		rwr[i].next = i < 4 ? &rwr[i + 1] : NULL;
		wr[i].wr_id = id0 + i;
		wr[i].sg_list = &ss[i];
		wr[i].num_sge = 1;
		wr[i].opcode = IB_WR_SEND;
		wr[i].send_flags = i == 4 ? IB_SEND_SIGNALED : 0;
		wr[i].next = i < 4 ? &wr[i + 1] : NULL;
	}
	r = ib_post_recv(t.b.qp, rwr, &rbad);
	if (r) {
		report(false, "unsignaled SENDs: B: ib_post_recv chain: %d", r);
		return;
	}
	r = ib_post_send(t.a.qp, wr, &sbad);
	if (r) {
		report(false, "unsignaled SENDs: A: ib_post_send chain: %d", r);
		return;
	}
	ok = expect_wc(&t.a, id0 + 4, IB_WC_SUCCESS, IB_WC_SEND, NULL) && cq_empty(&t.a, 300);
	for (i = 0; i < 5 && ok; i++) {
		ok = expect_wc(&t.b, id0 + i, IB_WC_SUCCESS, IB_WC_RECV, &wc);
		if (ok && wc.byte_len != 100 * (i + 1))
			ok = fail_why("B: receive %d: byte_len %u, expected %u", i, wc.byte_len,
				      100 * (i + 1));
		if (ok) {
			memset(t.img, GUARD, 1000);
			memcpy(t.img, t.a.tx + i * 1024, 100 * (i + 1));
			ok = same(t.img, t.b.rx + i * 1024, 1000, "B's receive buffer");
		}
	}
	report(ok, "4 unsignaled + 1 signaled SEND in one chain: one send completion (the last), 5 receives in order, data checked");
}

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

static void t_events(void)
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
static void t_errors(void)
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
static void t_full_and_flush(void)
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

/* Posts one WR on s's QP and waits for its completion. */
static bool post_wait(struct side *s, struct ib_send_wr *wr, enum ib_wc_status st, int opcode)
{
	const struct ib_send_wr *sbad = NULL;
	int r;

	wr->wr_id = ++t.wrid;
	wr->send_flags |= IB_SEND_SIGNALED;
	r = ib_post_send(s->qp, wr, &sbad);
	if (r)
		return fail_why("%s: ib_post_send (opcode %d): %d", s->name, wr->opcode, r);
	return expect_wc(s, t.wrid, st, opcode, NULL);
}

/* A writes len bytes at iova with rkey; st: the expected status. */
static bool write_via(u64 iova, u32 rkey, u32 len, enum ib_wc_status st)
{
	struct ib_sge s = { t.a.tx_dma, len, t.pd->local_dma_lkey };
	struct ib_rdma_wr wr = { .wr = { .sg_list = &s, .num_sge = 1, .opcode = IB_WR_RDMA_WRITE },
				 .remote_addr = iova, .rkey = rkey };

	return post_wait(&t.a, &wr.wr, st, st == IB_WC_SUCCESS ? IB_WC_RDMA_WRITE : -1);
}

/*
 * Fast registration: B registers two separate pages of its memory in an
 * IB_MR_TYPE_MEM_REG MR (ib_map_mr_sg + IB_WR_REG_MR); A writes and reads
 * through its rkey across the page break; SEND_WITH_INV invalidates it at B
 * (IB_WC_WITH_INVALIDATE), after which a WRITE is refused; registered again
 * with a new key, LOCAL_INV invalidates it.
 */
static void t_fastreg(void)
{
	struct scatterlist sgl[2];
	struct ib_mr *mr;
	struct ib_reg_wr rw = {};
	struct ib_send_wr inv = {};
	struct ib_recv_wr rwr = {};
	const struct ib_recv_wr *rbad = NULL;
	struct ib_sge rs = { t.b.rx_dma + 3 * 4096, 64, t.pd->local_dma_lkey };
	struct ib_sge ss = { t.a.tx_dma, 16, t.pd->local_dma_lkey };
	struct ib_wc wc;
	u32 len = 6000, off = 100, key;
	int n, r;
	bool ok;

	mr = ib_alloc_mr(t.pd, IB_MR_TYPE_MEM_REG, 4);
	if (IS_ERR(mr)) {
		report(false, "ib_alloc_mr(IB_MR_TYPE_MEM_REG, 4): %ld", PTR_ERR(mr));
		return;
	}
	/* Pages 0 and 2 of B's (page-aligned, kmalloc'ed) receive buffer. */
	sg_init_table(sgl, 2);
	sg_set_buf(&sgl[0], t.b.rx, PAGE_SIZE);
	sg_set_buf(&sgl[1], t.b.rx + 2 * PAGE_SIZE, PAGE_SIZE);
	n = ib_dma_map_sg(t.ibdev, sgl, 2, DMA_BIDIRECTIONAL);
	r = n == 2 ? ib_map_mr_sg(mr, sgl, 2, NULL, PAGE_SIZE) : -EIO;
	if (!report(r == 2 && offset_in_page(t.b.rx) == 0,
		    "ib_alloc_mr(MEM_REG) + ib_map_mr_sg of 2 discontiguous pages: %d (iova %#llx, length %llu)",
		    r, mr->iova, mr->length))
		goto out;

	ib_update_fast_reg_key(mr, 0x42);
	rw.wr.opcode = IB_WR_REG_MR;
	rw.mr = mr;
	rw.key = mr->rkey;
	rw.access = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_READ | IB_ACCESS_REMOTE_WRITE;
	ok = post_wait(&t.b, &rw.wr, IB_WC_SUCCESS, IB_WC_REG_MR);
	if (!report(ok, "IB_WR_REG_MR (rkey %#x): IB_WC_REG_MR", mr->rkey))
		goto out;

	pattern(t.exp, len);
	memcpy(t.a.tx, t.exp, len);
	memset(t.b.rx, GUARD, BUFSZ);
	ok = write_via(mr->iova + off, mr->rkey, len, IB_WC_SUCCESS);
	if (ok) {
		memset(t.img, GUARD, BUFSZ);
		memcpy(t.img + off, t.exp, PAGE_SIZE - off);
		memcpy(t.img + 2 * PAGE_SIZE, t.exp + PAGE_SIZE - off, len - (PAGE_SIZE - off));
		ok = same(t.img, t.b.rx, BUFSZ, "B's pages after a WRITE through the fast-reg MR");
	}
	report(ok, "RDMA WRITE %u B through the fast-reg rkey at iova + %u: lands on both pages, the page between untouched",
	       len, off);

	{
		struct ib_sge s = { t.a.rx_dma, 2 * PAGE_SIZE, t.pd->local_dma_lkey };
		struct ib_rdma_wr wr = { .wr = { .sg_list = &s, .num_sge = 1,
						 .opcode = IB_WR_RDMA_READ },
					 .remote_addr = mr->iova, .rkey = mr->rkey };

		memset(t.a.rx, 0, BUFSZ);
		ok = post_wait(&t.a, &wr.wr, IB_WC_SUCCESS, IB_WC_RDMA_READ) &&
		     same(t.b.rx, t.a.rx, PAGE_SIZE, "1st page read back") &&
		     same(t.b.rx + 2 * PAGE_SIZE, t.a.rx + PAGE_SIZE, PAGE_SIZE,
			  "2nd page read back");
		report(ok, "RDMA READ of the whole fast-reg MR (2 pages) through its rkey");
	}

	/* SEND_WITH_INV: B's receive reports the invalidated rkey. */
	rwr.wr_id = ++t.wrid;
	rwr.sg_list = &rs;
	rwr.num_sge = 1;
	r = ib_post_recv(t.b.qp, &rwr, &rbad);
	inv.sg_list = &ss;
	inv.num_sge = 1;
	inv.opcode = IB_WR_SEND_WITH_INV;
	inv.ex.invalidate_rkey = mr->rkey;
	ok = (r == 0 || fail_why("B: ib_post_recv: %d", r)) &&
	     post_wait(&t.a, &inv, IB_WC_SUCCESS, IB_WC_SEND) &&
	     expect_wc(&t.b, rwr.wr_id, IB_WC_SUCCESS, IB_WC_RECV, &wc);
	if (ok && (!(wc.wc_flags & IB_WC_WITH_INVALIDATE) || wc.ex.invalidate_rkey != mr->rkey))
		ok = fail_why("B: wc_flags %#x invalidate_rkey %#x, expected IB_WC_WITH_INVALIDATE %#x",
			      wc.wc_flags, wc.ex.invalidate_rkey, mr->rkey);
	report(ok, "SEND_WITH_INV: B's receive has IB_WC_WITH_INVALIDATE and the rkey");
	if (!ok)
		goto out;
	if (access_errors) {
		memset(t.b.rx, GUARD, BUFSZ);
		ok = write_via(mr->iova, mr->rkey, 64, IB_WC_REM_ACCESS_ERR) &&
		     (!memchr_inv(t.b.rx, GUARD, 64) || fail_why("B's memory was written"));
		report(ok, "RDMA WRITE through the invalidated rkey: IB_WC_REM_ACCESS_ERR, memory untouched");
		if (!reconnect())
			goto out;
	}

	/* Registered again under a new key, then LOCAL_INV at B. */
	key = mr->rkey;
	ib_update_fast_reg_key(mr, 0x43);
	memset(&rw, 0, sizeof(rw));
	rw.wr.opcode = IB_WR_REG_MR;
	rw.mr = mr;
	rw.key = mr->rkey;
	rw.access = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE;
	ok = post_wait(&t.b, &rw.wr, IB_WC_SUCCESS, IB_WC_REG_MR) &&
	     write_via(mr->iova, mr->rkey, 64, IB_WC_SUCCESS);
	report(ok, "REG_MR again with a new key (%#x -> %#x): a WRITE through it succeeds", key,
	       mr->rkey);
	memset(&inv, 0, sizeof(inv));
	inv.opcode = IB_WR_LOCAL_INV;
	inv.ex.invalidate_rkey = mr->rkey;
	ok = post_wait(&t.b, &inv, IB_WC_SUCCESS, IB_WC_LOCAL_INV);
	if (ok && access_errors) {
		ok = write_via(mr->iova, mr->rkey, 64, IB_WC_REM_ACCESS_ERR);
		t.desync = true; /* A is in ERR now */
	}
	report(ok, "LOCAL_INV at B: IB_WC_LOCAL_INV%s", access_errors ?
	       ", then a WRITE through the rkey: IB_WC_REM_ACCESS_ERR" : "");
out:
	if (n == 2)
		ib_dma_unmap_sg(t.ibdev, sgl, 2, DMA_BIDIRECTIONAL);
	ib_dereg_mr(mr);
}

/*
 * SRQ: QP C (on B's CQ) takes its receives from an SRQ; QP D (on A's CQ)
 * sends to it. Three messages land in three SRQ receives of 2 SGEs each.
 */
static void t_srq(void)
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

static void t_post_err_race(void)
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

/*
 * Remote access errors (access_errors=1): the requester's WQE must complete
 * with IB_WC_REM_ACCESS_ERR (the responder NAKs), and its QP goes to ERR.
 */
static void t_access_at(const char *name, enum ib_wr_opcode op, u32 rkey, u64 raddr)
{
	struct ib_sge s = { t.a.rx_dma, 8, t.pd->local_dma_lkey };
	struct ib_atomic_wr aw = {};
	struct ib_rdma_wr rw = {};
	struct ib_send_wr *w;
	const struct ib_send_wr *sbad = NULL;
	u64 *target = (u64 *)(t.b.rx + 4096);
	u64 id = ++t.wrid;
	bool ok;
	int r;

	WRITE_ONCE(*target, 42);
	if (op == IB_WR_ATOMIC_FETCH_AND_ADD) {
		aw.remote_addr = raddr;
		aw.compare_add = 1;
		aw.rkey = rkey;
		w = &aw.wr;
	} else {
		rw.remote_addr = raddr;
		rw.rkey = rkey;
		w = &rw.wr;
	}
	w->wr_id = id;
	w->sg_list = &s;
	w->num_sge = 1;
	w->opcode = op;
	w->send_flags = IB_SEND_SIGNALED;
	r = ib_post_send(t.a.qp, w, &sbad);
	if (r) {
		report(false, "%s: ib_post_send: %d", name, r);
		return;
	}
	ok = expect_wc(&t.a, id, IB_WC_REM_ACCESS_ERR, -1, NULL);
	if (ok && READ_ONCE(*target) != 42)
		ok = fail_why("target memory changed to %llu", READ_ONCE(*target));
	report(ok, "%s", name);
	t.desync = true; /* the QP is in ERR now: reconnect */
}

static void t_access(const char *name, enum ib_wr_opcode op, u32 rkey)
{
	t_access_at(name, op, rkey, t.b.rx_dma + 4096);
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

static void t_drain(void)
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

/*
 * --- Error paths of issue 19, each on its own QPs (E/F, G/H) so that A and B
 * are not disturbed: inline SEND_WITH_INV (row 7), ib_alloc_mr with a huge
 * max_num_sg, CQ overrun (row 3), SEND_WITH_INV of an unknown rkey (row 12).
 */

/* Destroys s's QP, then its CQ (only s's QP uses it). */
static void side_free(struct side *s)
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
static bool pair_connect(struct side *x, struct side *y, u32 inl, u8 y_timeout, u8 y_retry,
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

static enum ib_qp_state query_state(struct ib_qp *qp)
{
	struct ib_qp_init_attr ia;
	struct ib_qp_attr a = {};
	int r = ib_query_qp(qp, &a, IB_QP_STATE, &ia);

	return r ? (enum ib_qp_state)-1 : a.qp_state;
}

/*
 * ib_alloc_mr(IB_MR_TYPE_MEM_REG) with a max_num_sg far above the device's
 * max_fast_reg_page_list_len must fail (an ERR_PTR) without a kernel WARNING
 * (a page list sized by max_num_sg before the check asks kmalloc for more
 * than MAX_PAGE_ORDER: WARN in __alloc_pages). rxe 6.12 does not check the
 * limit: it kcallocs max_num_sg (as an int) page entries, which for these
 * values overflows: -ENOMEM, no WARNING; for 1 << 30 it WARNs (16 GiB).
 * The run's log check catches a WARNING too; here TAINT_WARN tells.
 */
static void t_alloc_mr_huge(void)
{
	u32 huge[3] = { 1U << 31, UINT_MAX, alloc_mr_sg };
	int i, n = alloc_mr_sg ? 3 : 2;

	for (i = 0; i < n; i++) {
		bool tainted = test_taint(TAINT_WARN), ok;
		struct ib_mr *mr = ib_alloc_mr(t.pd, IB_MR_TYPE_MEM_REG, huge[i]);
		bool warned = !tainted && test_taint(TAINT_WARN);
		long r = IS_ERR(mr) ? PTR_ERR(mr) : 0;

		if (!IS_ERR(mr))
			ib_dereg_mr(mr);
		ok = (r || fail_why("an MR was returned")) &&
		     (!warned || fail_why("the call raised a kernel WARNING (TAINT_WARN set)"));
		report(ok, "ib_alloc_mr(IB_MR_TYPE_MEM_REG, max_num_sg %u > max_fast_reg_page_list_len %u): an ERR_PTR (got %ld; rxe: -ENOMEM), no kernel WARNING%s",
		       huge[i], t.ibdev->attrs.max_fast_reg_page_list_len, r,
		       tainted ? " (TAINT_WARN was already set: only the log check tells)" : "");
	}
}

/* E/F: F's receive buffer (t.b.rx + 64, 256 B, guards around); E's inline source. */
#define FRX 64
#define FLEN 256

/*
 * F posts one receive of FLEN B; E posts wr (inline: its source is
 * overwritten right after the post). Both complete successfully; *fwc: F's.
 */
static bool ef_send(struct ib_send_wr *wr, u8 *src, struct ib_wc *fwc)
{
	struct ib_sge rs = { t.b.rx_dma + FRX, FLEN, t.pd->local_dma_lkey };
	struct ib_recv_wr rwr = { .sg_list = &rs, .num_sge = 1 };
	const struct ib_recv_wr *rbad = NULL;
	const struct ib_send_wr *sbad = NULL;
	int r;

	memset(t.b.rx, GUARD, 2 * FRX + FLEN);
	rwr.wr_id = wr->wr_id = ++t.wrid;
	r = ib_post_recv(t.f.qp, &rwr, &rbad);
	if (r)
		return fail_why("F: ib_post_recv: %d", r);
	r = ib_post_send(t.e.qp, wr, &sbad);
	if (r)
		return fail_why("E: ib_post_send (opcode %d, flags %#x): %d", wr->opcode,
				wr->send_flags, r);
	if (wr->send_flags & IB_SEND_INLINE) /* the device's copy: free again */
		memset(src, 0x33, FLEN);
	return expect_wc(&t.e, t.wrid, IB_WC_SUCCESS, IB_WC_SEND, NULL) &&
	       expect_wc(&t.f, t.wrid, IB_WC_SUCCESS, IB_WC_RECV, fwc);
}

/* F's receive buffer holds exactly want[0..len) at FRX, guards elsewhere. */
static bool f_got(const u8 *want, u32 len, const struct ib_wc *wc)
{
	if (wc->byte_len != len)
		return fail_why("F: byte_len %u, expected %u", wc->byte_len, len);
	memset(t.img, GUARD, 2 * FRX + FLEN);
	memcpy(t.img + FRX, want, len);
	return same(t.img, t.b.rx, 2 * FRX + FLEN, "F's receive buffer (payload and guards)");
}

/*
 * Row 7: IB_WR_SEND_WITH_INV with IB_SEND_INLINE carries the inline bytes
 * (rxe: WR_INLINE_MASK for SEND_WITH_INV, rxe_opcode.c) and invalidates the
 * named fast-reg MR of F; plain inline SEND from 3 SGEs as a guard.
 * Row 12: SEND_WITH_INV whose rkey names no MR/MW of F's PD (IBTA 9.9.3
 * responder class J, rxe_resp.c RESPST_ERR_INVALIDATE_RKEY): F's receive
 * completes with IB_WC_REM_INV_REQ_ERR and F goes to ERR (its other receive
 * flushed); the responder still ACKs, so E's SEND succeeds.
 */
static void t_inline_inv(void)
{
	struct scatterlist sgl;
	struct ib_qp_cap cap;
	struct ib_mr *mr = NULL;
	struct ib_reg_wr rw = {};
	struct ib_send_wr wr = {};
	struct ib_sge ss[3];
	struct ib_wc wc;
	u8 *src = NULL;
	u64 src_dma = 0;
	bool ok, mapped = false, sg_mapped = false;
	int r;

	t.e.name = "E";
	t.f.name = "F";
	t.e.cq = ib_alloc_cq(t.ibdev, NULL, CQE, 0, IB_POLL_DIRECT);
	t.f.cq = ib_alloc_cq(t.ibdev, NULL, CQE, 0, IB_POLL_DIRECT);
	if (IS_ERR(t.e.cq) || IS_ERR(t.f.cq)) {
		report(false, "E/F: ib_alloc_cq: %d / %d", PTR_ERR_OR_ZERO(t.e.cq),
		       PTR_ERR_OR_ZERO(t.f.cq));
		if (IS_ERR(t.e.cq))
			t.e.cq = NULL;
		if (IS_ERR(t.f.cq))
			t.f.cq = NULL;
		goto out;
	}
	t.e.sq_psn = 0x2000;
	t.f.sq_psn = 0xfff800;
	ok = pair_connect(&t.e, &t.f, 128, 18, 7, &cap) &&
	     (cap.max_inline_data >= 100 ||
	      fail_why("max_inline_data %u < 100", cap.max_inline_data));
	if (!report(ok, "QP E (max_inline_data 128 asked, %u granted) <-> QP F, on their own CQs: connected",
		    cap.max_inline_data))
		goto out;

	src = kmalloc(FLEN, GFP_KERNEL);
	if (!src) {
		report(false, "kmalloc");
		goto out;
	}
	src_dma = ib_dma_map_single(t.ibdev, src, FLEN, DMA_TO_DEVICE);
	if (ib_dma_mapping_error(t.ibdev, src_dma)) {
		report(false, "ib_dma_map_single of the inline source");
		goto out;
	}
	mapped = true;

	/* F's fast-reg MR over page 0 of B's (page-aligned) send buffer. */
	mr = ib_alloc_mr(t.pd, IB_MR_TYPE_MEM_REG, 1);
	if (IS_ERR(mr)) {
		report(false, "ib_alloc_mr(IB_MR_TYPE_MEM_REG, 1): %ld", PTR_ERR(mr));
		mr = NULL;
		goto out;
	}
	sg_init_one(&sgl, t.b.tx, PAGE_SIZE);
	sg_mapped = ib_dma_map_sg(t.ibdev, &sgl, 1, DMA_BIDIRECTIONAL) == 1;
	r = sg_mapped ? ib_map_mr_sg(mr, &sgl, 1, NULL, PAGE_SIZE) : -EIO;
	ib_update_fast_reg_key(mr, 0x71);
	rw.wr.opcode = IB_WR_REG_MR;
	rw.mr = mr;
	rw.key = mr->rkey;
	rw.access = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_READ | IB_ACCESS_REMOTE_WRITE;
	ok = (r == 1 || fail_why("ib_map_mr_sg: %d", r)) &&
	     post_wait(&t.f, &rw.wr, IB_WC_SUCCESS, IB_WC_REG_MR);
	if (!report(ok, "F: fast-reg MR of one page registered (IB_WR_REG_MR, rkey %#x)", mr->rkey))
		goto out;

	/* Row 7: 100 B inline, 1 SGE, invalidating F's valid MR. */
	pattern(src, 100);
	memcpy(t.exp, src, 100);
	ss[0] = (struct ib_sge){ src_dma, 100, t.pd->local_dma_lkey };
	wr.sg_list = ss;
	wr.num_sge = 1;
	wr.opcode = IB_WR_SEND_WITH_INV;
	wr.send_flags = IB_SEND_SIGNALED | IB_SEND_INLINE;
	wr.ex.invalidate_rkey = mr->rkey;
	ok = ef_send(&wr, src, &wc);
	if (ok && (!(wc.wc_flags & IB_WC_WITH_INVALIDATE) || wc.ex.invalidate_rkey != mr->rkey))
		ok = fail_why("F: wc_flags %#x invalidate_rkey %#x, expected IB_WC_WITH_INVALIDATE %#x",
			      wc.wc_flags, wc.ex.invalidate_rkey, mr->rkey);
	ok = ok && f_got(t.exp, 100, &wc);
	report(ok, "SEND_WITH_INV + IB_SEND_INLINE, 100 B from a kmalloc'd buffer overwritten after the post: F gets exactly the 100 inline bytes (byte_len 100), IB_WC_WITH_INVALIDATE and the rkey (rxe: inline allowed for SEND_WITH_INV)");

	/* Guard: plain inline SEND from 3 SGEs (30 + 45 + 25 B, gaps between). */
	pattern(src, FLEN);
	memcpy(t.exp, src, 30);
	memcpy(t.exp + 30, src + 40, 45);
	memcpy(t.exp + 75, src + 100, 25);
	ss[0] = (struct ib_sge){ src_dma, 30, t.pd->local_dma_lkey };
	ss[1] = (struct ib_sge){ src_dma + 40, 45, t.pd->local_dma_lkey };
	ss[2] = (struct ib_sge){ src_dma + 100, 25, t.pd->local_dma_lkey };
	memset(&wr, 0, sizeof(wr));
	wr.sg_list = ss;
	wr.num_sge = 3;
	wr.opcode = IB_WR_SEND;
	wr.send_flags = IB_SEND_SIGNALED | IB_SEND_INLINE;
	ok = ef_send(&wr, src, &wc) && f_got(t.exp, 100, &wc);
	if (ok && (wc.wc_flags & (IB_WC_WITH_INVALIDATE | IB_WC_WITH_IMM)))
		ok = fail_why("F: wc_flags %#x", wc.wc_flags);
	report(ok, "SEND + IB_SEND_INLINE from 3 SGEs (30 + 45 + 25 B): F gets the 100 B concatenated, byte_len 100");

	/* Row 12: an rkey no MR/MW of F's PD has (F's MR's index, another key byte). */
	{
		u32 bogus = mr->rkey ^ 0x5a;
		struct ib_sge s1 = { t.a.tx_dma, 16, t.pd->local_dma_lkey };
		struct ib_sge rs[2] = {
			{ t.b.rx_dma, 64, t.pd->local_dma_lkey },
			{ t.b.rx_dma + 64, 64, t.pd->local_dma_lkey },
		};
		struct ib_recv_wr rwr[2] = {
			{ .next = &rwr[1], .sg_list = &rs[0], .num_sge = 1 },
			{ .sg_list = &rs[1], .num_sge = 1 },
		};
		const struct ib_recv_wr *rbad = NULL;
		struct ib_wc ewc = {}, fwc = {};
		u64 id = t.wrid + 1;
		enum ib_qp_state st;

		t.wrid += 3;
		rwr[0].wr_id = id;
		rwr[1].wr_id = id + 1;
		pattern(t.a.tx, 16);
		r = ib_post_recv(t.f.qp, rwr, &rbad);
		memset(&wr, 0, sizeof(wr));
		wr.sg_list = &s1;
		wr.num_sge = 1;
		wr.opcode = IB_WR_SEND_WITH_INV;
		wr.ex.invalidate_rkey = bogus;
		ok = (r == 0 || fail_why("F: ib_post_recv: %d", r)) &&
		     post_wait(&t.e, &wr, IB_WC_SUCCESS, IB_WC_SEND);
		if (poll_one(t.e.cq, &ewc, 0) > 0)
			pr_info("#   E: also completion wr_id %llu status %d (%s)\n", ewc.wr_id,
				ewc.status, ib_wc_status_msg(ewc.status));
		report(ok, "SEND_WITH_INV of rkey %#x (no MR/MW of F's PD has it): E's SEND completes IB_WC_SUCCESS (rxe: the responder ACKs it, IBTA 9.9.3 class J)",
		       bogus);
		ok = expect_wc(&t.f, id, IB_WC_REM_INV_REQ_ERR, -1, &fwc) &&
		     expect_wc(&t.f, id + 1, IB_WC_WR_FLUSH_ERR, -1, NULL);
		st = query_state(t.f.qp);
		if (ok && st != IB_QPS_ERR)
			ok = fail_why("F: ib_query_qp state %d, expected IB_QPS_ERR (%d)", st,
				      IB_QPS_ERR);
		report(ok, "... F's receive completes with IB_WC_REM_INV_REQ_ERR, F goes to ERR (query: %d), its other receive IB_WC_WR_FLUSH_ERR (IBTA 9.9.3 responder class J, rxe RESPST_ERR_INVALIDATE_RKEY)",
		       st);
	}
out:
	side_free(&t.e);
	side_free(&t.f);
	if (sg_mapped)
		ib_dma_unmap_sg(t.ibdev, &sgl, 1, DMA_BIDIRECTIONAL);
	if (mr)
		ib_dereg_mr(mr);
	if (mapped)
		ib_dma_unmap_single(t.ibdev, src_dma, FLEN, DMA_TO_DEVICE);
	kfree(src);
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

static void t_cq_overrun(bool recv)
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

/* --- setup and teardown --- */

static bool map(struct side *s)
{
	s->tx = kmalloc(BUFSZ, GFP_KERNEL);
	s->rx = kmalloc(BUFSZ, GFP_KERNEL);
	if (!s->tx || !s->rx)
		return fail_why("kmalloc");
	s->tx_dma = ib_dma_map_single(t.ibdev, s->tx, BUFSZ, DMA_BIDIRECTIONAL);
	if (ib_dma_mapping_error(t.ibdev, s->tx_dma))
		return fail_why("ib_dma_map_single");
	s->tx_mapped = true;
	s->rx_dma = ib_dma_map_single(t.ibdev, s->rx, BUFSZ, DMA_BIDIRECTIONAL);
	if (ib_dma_mapping_error(t.ibdev, s->rx_dma))
		return fail_why("ib_dma_map_single");
	s->rx_mapped = true;
	return true;
}

static bool find_gid(void)
{
	struct ib_port_attr pa;
	int i, r;

	r = ib_query_port(t.ibdev, 1, &pa);
	if (r)
		return fail_why("ib_query_port: %d", r);
	for (i = 0; i < pa.gid_tbl_len; i++) {
		const struct ib_gid_attr *g = rdma_get_gid_attr(t.ibdev, 1, i);

		if (IS_ERR(g))
			continue;
		if (g->gid_type == IB_GID_TYPE_ROCE_UDP_ENCAP &&
		    ipv6_addr_v4mapped((const struct in6_addr *)g->gid.raw)) {
			t.gid_attr = g;
			t.gid = g->gid;
			t.sgid_index = i;
			break;
		}
		rdma_put_gid_attr(g);
	}
	if (!t.gid_attr)
		return fail_why("no RoCE v2 IPv4-mapped GID among %d (port state %d)",
				pa.gid_tbl_len, pa.state);
	r = rdma_read_gid_l2_fields(t.gid_attr, NULL, t.mac);
	if (r)
		return fail_why("rdma_read_gid_l2_fields: %d", r);
	return true;
}

static struct ib_qp *make_qp(struct ib_cq *cq, struct ib_qp_cap *cap, struct ib_srq *srq,
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

static bool setup(void)
{
	struct ib_cq_init_attr ca = { .cqe = CQE };
	struct ib_qp_cap bcap;
	struct ib_mr *mr;
	bool ok;
	int r;

	t.a.name = "A";
	t.b.name = "B";
	t.ibdev = ib_device_get_by_name(dev, RDMA_DRIVER_UNKNOWN);
	if (!t.ibdev)
		return report(false, "ib_device_get_by_name(%s)", dev);
	report(true, "device %s found (%s)", dev, dev_name(&t.ibdev->dev));

	ok = find_gid();
	if (!report(ok, "port 1: RoCE v2 IPv4-mapped GID at index %d: %pI6, MAC %pM",
		    t.sgid_index, t.gid.raw, t.mac))
		return false;

	t.pd = ib_alloc_pd(t.ibdev, IB_PD_UNSAFE_GLOBAL_RKEY);
	if (IS_ERR(t.pd)) {
		r = PTR_ERR(t.pd);
		t.pd = NULL;
		return report(false, "ib_alloc_pd(IB_PD_UNSAFE_GLOBAL_RKEY): %d", r);
	}
	report(true, "ib_alloc_pd(IB_PD_UNSAFE_GLOBAL_RKEY): local_dma_lkey %#x, unsafe_global_rkey %#x",
	       t.pd->local_dma_lkey, t.pd->unsafe_global_rkey);

	/* The core grants no remote atomic access to the PD's DMA MR: a second one. */
	mr = t.ibdev->ops.get_dma_mr(t.pd, IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_READ |
					   IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_ATOMIC);
	if (IS_ERR(mr)) {
		report(false, "get_dma_mr with IB_ACCESS_REMOTE_ATOMIC: %ld", PTR_ERR(mr));
	} else {
		mr->device = t.ibdev;
		mr->pd = t.pd;
		mr->type = IB_MR_TYPE_DMA;
		mr->uobject = NULL;
		mr->need_inval = false;
		t.atomic_mr = mr;
		report(true, "get_dma_mr(LOCAL_WRITE | REMOTE_READ | REMOTE_WRITE | REMOTE_ATOMIC): rkey %#x",
		       mr->rkey);
	}

	t.a.cq = ib_create_cq(t.ibdev, comp_handler, cq_event, NULL, &ca);
	if (IS_ERR(t.a.cq)) {
		r = PTR_ERR(t.a.cq);
		t.a.cq = NULL;
		return report(false, "ib_create_cq: %d", r);
	}
	t.b.cq = ib_alloc_cq(t.ibdev, NULL, CQE, 0, IB_POLL_DIRECT);
	if (IS_ERR(t.b.cq)) {
		r = PTR_ERR(t.b.cq);
		t.b.cq = NULL;
		return report(false, "ib_alloc_cq(IB_POLL_DIRECT): %d", r);
	}
	report(true, "CQs: ib_create_cq (own comp_handler) %d CQEs, ib_alloc_cq(IB_POLL_DIRECT) %d CQEs",
	       t.a.cq->cqe, t.b.cq->cqe);

	t.a.qp = make_qp(t.a.cq, &t.cap, NULL, 64);
	if (IS_ERR(t.a.qp)) {
		r = PTR_ERR(t.a.qp);
		t.a.qp = NULL;
		return report(false, "ib_create_qp(RC) A: %d", r);
	}
	t.b.qp = make_qp(t.b.cq, &bcap, NULL, 64);
	if (IS_ERR(t.b.qp)) {
		r = PTR_ERR(t.b.qp);
		t.b.qp = NULL;
		return report(false, "ib_create_qp(RC) B: %d", r);
	}
	report(true, "ib_create_qp(RC) x2: QPN %u and %u; caps send_wr %u recv_wr %u send_sge %u recv_sge %u inline %u",
	       t.a.qp->qp_num, t.b.qp->qp_num, t.cap.max_send_wr, t.cap.max_recv_wr,
	       t.cap.max_send_sge, t.cap.max_recv_sge, t.cap.max_inline_data);

	t.exp = kmalloc(BUFSZ, GFP_KERNEL);
	t.img = kmalloc(BUFSZ, GFP_KERNEL);
	if (!report(t.exp && t.img && map(&t.a) && map(&t.b),
		    "4 buffers of %d KiB: kmalloc + ib_dma_map_single (virt DMA: %d)", BUFSZ / 1024,
		    ib_uses_virt_dma(t.ibdev)))
		return false;

	r = to_init(t.a.qp) ?: to_init(t.b.qp);
	if (!report(!r, "modify RESET->INIT (both): %d", r))
		return false;
	{
		struct ib_send_wr wr = { .wr_id = 1, .opcode = IB_WR_SEND,
					 .send_flags = IB_SEND_SIGNALED };
		const struct ib_send_wr *bad = NULL;

		r = ib_post_send(t.a.qp, &wr, &bad);
		report(r == -EINVAL && bad == &wr, "ib_post_send in INIT: -EINVAL (got %d), *bad_wr = the WR (%s)",
		       r, bad == &wr ? "yes" : "no");
	}
	new_psns();
	r = connect_rtr_rts();
	t.desync = false;
	return report(!r, "modify INIT->RTR->RTS: A (QPN %u, sq_psn %#x) <-> B (QPN %u, sq_psn %#x) over GID %d",
		      t.a.qp->qp_num, t.a.sq_psn, t.b.qp->qp_num, t.b.sq_psn, t.sgid_index);
}

static void unmap(struct side *s)
{
	if (s->tx_mapped)
		ib_dma_unmap_single(t.ibdev, s->tx_dma, BUFSZ, DMA_BIDIRECTIONAL);
	if (s->rx_mapped)
		ib_dma_unmap_single(t.ibdev, s->rx_dma, BUFSZ, DMA_BIDIRECTIONAL);
	kfree(s->tx);
	kfree(s->rx);
}

static void teardown(void)
{
	if (t.stuck) {
		/* ib_drain_qp still runs on B: leave everything, never unload. */
		__module_get(THIS_MODULE);
		return;
	}
	side_free(&t.e);
	side_free(&t.f);
	side_free(&t.g);
	side_free(&t.h);
	if (t.a.qp)
		ib_destroy_qp(t.a.qp);
	if (t.b.qp)
		ib_destroy_qp(t.b.qp);
	if (t.c.qp)
		ib_destroy_qp(t.c.qp);
	if (t.d.qp)
		ib_destroy_qp(t.d.qp);
	if (t.srq)
		ib_destroy_srq(t.srq);
	if (t.a.cq)
		ib_destroy_cq(t.a.cq);
	if (t.b.cq)
		ib_free_cq(t.b.cq);
	if (t.atomic_mr)
		t.ibdev->ops.dereg_mr(t.atomic_mr, NULL);
	if (t.pd)
		ib_dealloc_pd(t.pd);
	if (t.ibdev) {
		unmap(&t.a);
		unmap(&t.b);
	}
	kfree(t.exp);
	kfree(t.img);
	if (t.gid_attr)
		rdma_put_gid_attr(t.gid_attr);
	if (t.ibdev)
		ib_device_put(t.ibdev);
}

#define STEP(call)                                       \
	do {                                             \
		if (t.desync && !reconnect())            \
			goto out;                        \
		call;                                    \
	} while (0)

/* The extension API's exports (metaroce's include/metaroce_ext.h). */
int metaroce_qp_query_paths(struct ib_qp *qp, struct metaroce_conn_info *info,
			    struct metaroce_path_info *paths, u32 max_paths);
int metaroce_qp_set_paths(struct ib_qp *qp, u32 paths);
int metaroce_qp_set_stream_class(struct ib_qp *qp, u32 cls);

/*
 * Stream classes on a shared device: X and Y (a loopback pair, like A and B)
 * pinned to class 3 before RTR ride a connection of their own (2 members,
 * class 3, its own source ports), apart from A and B's (class 0); past INIT
 * and above 7 a class is -EINVAL.
 */
static void t_ext_class(typeof(&metaroce_qp_query_paths) query,
			typeof(&metaroce_qp_set_stream_class) set_class)
{
	static struct metaroce_path_info pa[1], px[1];
	struct metaroce_conn_info ca, cx;
	struct side x = { .name = "X", .cq = t.a.cq, .sq_psn = 0x1234 },
		    y = { .name = "Y", .cq = t.b.cq, .sq_psn = 0x4321 };
	struct ib_qp_cap cap;
	int r;

	x.qp = make_qp(x.cq, &cap, NULL, 0);
	y.qp = IS_ERR(x.qp) ? x.qp : make_qp(y.cq, &cap, NULL, 0);
	if (IS_ERR(x.qp) || IS_ERR(y.qp)) {
		report(false, "stream classes: ib_create_qp: %ld",
		       PTR_ERR(IS_ERR(x.qp) ? x.qp : y.qp));
		if (!IS_ERR(x.qp))
			ib_destroy_qp(x.qp);
		return;
	}
	r = set_class(x.qp, 8);
	report(r == -EINVAL, "metaroce_qp_set_stream_class(X, 8): -EINVAL (got %d)", r);
	r = set_class(x.qp, 3) ?: set_class(y.qp, 3);
	r = r ?: to_init(x.qp) ?: to_init(y.qp) ?: to_rtr(&x, &y) ?: to_rtr(&y, &x) ?:
	    to_rts_t(&x, 18, 7) ?: to_rts_t(&y, 18, 7);
	if (!report(!r, "X, Y pinned to stream class 3 and connected: %d", r))
		goto out;
	r = set_class(x.qp, 1);
	report(r == -EINVAL, "metaroce_qp_set_stream_class(X at RTS): -EINVAL (got %d)", r);
	r = query(x.qp, &cx, px, 1);
	report(r == 1 && query(t.a.qp, &ca, pa, 1) == 1 && cx.stream_class == 3 &&
	       ca.stream_class == 0 && cx.members == 2 && px[0].src_port != pa[0].src_port,
	       "X's connection: class %u, %u members, path 0 from port %u; A's: class %u, %u members, port %u",
	       cx.stream_class, cx.members, px[0].src_port, ca.stream_class, ca.members,
	       pa[0].src_port);
out:
	ib_destroy_qp(y.qp);
	ib_destroy_qp(x.qp);
}

static void t_ext(void)
{
	typeof(&metaroce_qp_query_paths) query = symbol_get(metaroce_qp_query_paths);
	typeof(&metaroce_qp_set_paths) set = symbol_get(metaroce_qp_set_paths);
	typeof(&metaroce_qp_set_stream_class) set_class =
		symbol_get(metaroce_qp_set_stream_class);
	static struct metaroce_path_info pi[METAROCE_MAX_PATHS];
	struct metaroce_conn_info ci;
	bool ours = !strncmp(t.ibdev->node_desc, "metaroce", 8);
	int r, was;

	if (!query || !set || !set_class) {
		pr_info("# extension API: metaroce not loaded, not tried\n");
		goto out;
	}
	r = query(t.a.qp, &ci, pi, METAROCE_MAX_PATHS);
	if (!ours) {
		report(r == -EOPNOTSUPP && set(t.a.qp, 2) == -EOPNOTSUPP,
		       "extension API on a QP of %s (not metaroce): -EOPNOTSUPP (query %d)",
		       dev_name(&t.ibdev->dev), r);
		goto out;
	}
	report(r >= 1 && r == ci.paths && ci.paths <= ci.max_paths && ci.max_paths == 64 &&
	       ci.members >= 1,
	       "metaroce_qp_query_paths(A): %d records, paths %u of %u, %u member(s), flags %#x",
	       r, ci.paths, ci.max_paths, ci.members, ci.flags);
	if (r < 1)
		goto out;
	was = ci.paths;
	r = set(t.a.qp, 2);
	if (ci.flags & METAROCE_CONN_SHARED) {
		/*
		 * A and B (loopback: one local and remote address) are members
		 * of one connection, which sends on the largest count its
		 * members ask for: A's 2 lowers nothing while B asks for the
		 * default; B's 2 too, and it is 2 if they are the only members.
		 */
		report(r == was, "shared, %u members: A asks for 2, the connection stays on %d (got %d)",
		       ci.members, was, r);
		r = set(t.b.qp, 2);
		if (ci.members != 2) {
			report(r == was, "... B asks for 2 too: %d, others still ask for %d", r, was);
			goto restore;
		}
	}
	report(r == 2 && query(t.a.qp, &ci, pi, METAROCE_MAX_PATHS) == 2 && ci.paths == 2,
	       "metaroce_qp_set_paths(A%s, 2): %d, read back: paths %u",
	       ci.flags & METAROCE_CONN_SHARED ? " and B" : "", r, ci.paths);
	t_send("SEND 66000 B on 2 paths", 66000, 1, 1, false, false);
	r = query(t.a.qp, &ci, pi, METAROCE_MAX_PATHS);
	report(r == 2 && pi[0].sent > 0 && pi[1].sent > 0,
	       "... both paths sent packets (%u, %u)", r == 2 ? pi[0].sent : 0,
	       r == 2 ? pi[1].sent : 0);
	r = set(t.a.qp, 0);
	report(r == -EINVAL, "metaroce_qp_set_paths(A, 0): -EINVAL (got %d)", r);
	r = set(t.a.qp, 65);
	report(r == -EINVAL, "metaroce_qp_set_paths(A, 65): -EINVAL (got %d)", r);
	report(query(t.a.qp, &ci, pi, METAROCE_MAX_PATHS) == 2 && ci.paths == 2,
	       "... refused sets changed nothing (paths %u)", ci.paths);
restore:
	if (ci.flags & METAROCE_CONN_SHARED)
		set(t.b.qp, was);
	r = set(t.a.qp, was);
	report(r == was, "metaroce_qp_set_paths(A, %d) back: %d", was, r);
	if (ci.flags & METAROCE_CONN_SHARED)
		t_ext_class(query, set_class);
out:
	if (query)
		symbol_put(metaroce_qp_query_paths);
	if (set)
		symbol_put(metaroce_qp_set_paths);
	if (set_class)
		symbol_put(metaroce_qp_set_stream_class);
}

static int __init kverbs_test_init(void)
{
	u32 inl;

	init_waitqueue_head(&t.evq);
	pr_info("# kernel verbs loopback test on %s (timeout %d ms per completion)\n", dev,
		timeout_ms);
	if (!setup())
		goto out;

	STEP(t_send("SEND 0 B (no SGE) into a 64 B receive", 0, 0, 1, false, false));
	STEP(t_send("SEND 1 B", 1, 1, 1, false, false));
	STEP(t_send("SEND 4 KiB (4 packets)", 4096, 1, 1, false, false));
	STEP(t_send("SEND 66000 B (65 packets, PSN wrap on A)", 66000, 1, 1, false, false));
	STEP(t_send("SEND 10000 B from 3 SGEs into 2 SGEs", 10000, 3, 2, false, false));
	STEP(t_send("SEND 66000 B from 2 SGEs into 4 SGEs", 66000, 2, 4, false, false));
	STEP(t_send("SEND_WITH_IMM 2000 B: IB_WC_WITH_IMM and imm_data", 2000, 1, 1, true, false));
	STEP(t_send("SEND_WITH_IMM 0 B", 0, 0, 1, true, false));
	inl = min(t.cap.max_inline_data, 60u);
	if (inl >= 2) {
		STEP(t_send("SEND inline (IB_SEND_INLINE, 2 SGEs), source overwritten right after the post",
			    inl, 2, 1, false, true));
		STEP(t_write("RDMA WRITE inline, source overwritten right after the post", inl, 1,
			     false, true));
	} else {
		report(false, "IB_SEND_INLINE: max_inline_data is %u", t.cap.max_inline_data);
	}
	STEP(t_write("RDMA WRITE 1 B (unsafe_global_rkey, odd remote address)", 1, 1, false, false));
	STEP(t_write("RDMA WRITE 20000 B from 3 SGEs", 20000, 3, false, false));
	STEP(t_write("RDMA WRITE 66000 B", 66000, 1, false, false));
	STEP(t_write("RDMA WRITE_WITH_IMM 3000 B: receive IB_WC_RECV_RDMA_WITH_IMM, byte_len, imm",
		     3000, 1, true, false));
	STEP(t_write("RDMA WRITE_WITH_IMM 0 B", 0, 0, true, false));
	STEP(t_read("RDMA READ 1 B", 1, 1));
	STEP(t_read("RDMA READ 20000 B into 3 SGEs", 20000, 3));
	STEP(t_read("RDMA READ 66000 B", 66000, 1));
	STEP(t_atomic("ATOMIC_CMP_AND_SWP, compare matches: original returned, memory swapped",
		      IB_WR_ATOMIC_CMP_AND_SWP, 0x1122334455667788ULL, 0x1122334455667788ULL,
		      0xdeadbeefcafef00dULL, 0xdeadbeefcafef00dULL));
	STEP(t_atomic("ATOMIC_CMP_AND_SWP, compare differs: original returned, memory unchanged",
		      IB_WR_ATOMIC_CMP_AND_SWP, 0x1122334455667788ULL, 1, 0xdeadbeefcafef00dULL,
		      0x1122334455667788ULL));
	STEP(t_atomic("ATOMIC_FETCH_AND_ADD: original returned, memory incremented (carry)",
		      IB_WR_ATOMIC_FETCH_AND_ADD, 0x00000001ffffffffULL, 0x100000001ULL, 0,
		      0x0000000300000000ULL));
	STEP(t_unsignaled());
	STEP(t_ext());
	STEP(t_events());
	STEP(t_errors());
	STEP(t_fastreg());
	STEP(t_srq());
	if (access_errors) {
		STEP(t_access("RDMA WRITE with an invalid rkey: IB_WC_REM_ACCESS_ERR",
			      IB_WR_RDMA_WRITE, t.pd->unsafe_global_rkey ^ 0x5500));
		STEP(t_access("RDMA READ with an invalid rkey: IB_WC_REM_ACCESS_ERR",
			      IB_WR_RDMA_READ, t.pd->unsafe_global_rkey ^ 0x5500));
		STEP(t_access("FETCH_AND_ADD with an rkey without IB_ACCESS_REMOTE_ATOMIC: IB_WC_REM_ACCESS_ERR",
			      IB_WR_ATOMIC_FETCH_AND_ADD, t.pd->unsafe_global_rkey));
		/*
		 * Issue 19 row 5: the DMA MR addresses kernel virtual memory
		 * only; a READ through its rkey at a user-space address is a
		 * remote access error, never a success with zeros.
		 */
		if (dma_user_va)
			STEP(t_access_at("RDMA READ through the DMA MR's rkey at a user-space address (0x10000): IB_WC_REM_ACCESS_ERR",
					 IB_WR_RDMA_READ, t.pd->unsafe_global_rkey, 0x10000));
	}
	STEP(t_post_err_race());
	STEP(t_alloc_mr_huge());
	STEP(t_inline_inv());
	STEP(t_cq_overrun(false));
	STEP(t_cq_overrun(true));
	STEP(t_full_and_flush());
	t_drain();
out:
	teardown();
	pr_info("1..%d\n", tn);
	pr_info("# %s: %d passed, %d failed\n", dev, passed, failed);
	finished = 1;
	return 0;
}

static void __exit kverbs_test_exit(void)
{
}

module_init(kverbs_test_init);
module_exit(kverbs_test_exit);
MODULE_DESCRIPTION("metaroce test: kernel verbs data path in loopback (a kernel ULP)");
MODULE_LICENSE("GPL");
