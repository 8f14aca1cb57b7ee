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
 * on another device's QP both answer -EOPNOTSUPP. Then the device's planes
 * (metaroce_device_query_planes(), _set_planes()): one, its netdev, at
 * first; the sets user space is refused, refused alike (-EINVAL, -ENODEV)
 * and nothing changed; bound to a second netdev of the host, SEND and WRITE
 * still byte-exact with datagrams on both planes; set back to one.
 *
 * Error paths on QP pairs of their own (E/F, G/H): inline SEND_WITH_INV and
 * multi-SGE inline SEND, ib_alloc_mr with a huge max_num_sg (alloc_mr_sg=N
 * adds N to the values tried), CQ overrun of a kernel CQ by send and by
 * receive completions (IB_EVENT_CQ_ERR), SEND_WITH_INV of an unknown rkey.
 *
 * The module's files and their shared state: kverbs.h. The tests run in the
 * order kverbs_test_init() below gives; each reports one or more TAP lines.
 *
 * The device has no dma_device (ib_uses_virt_dma): ib_dma_map_single returns
 * kernel virtual addresses, used in SGEs with pd->local_dma_lkey and as
 * remote addresses with pd->unsafe_global_rkey (READ/WRITE) or the rkey of a
 * DMA MR with remote atomic access (atomics).
 */
#include "kverbs.h"

char *dev = "mr0";
module_param(dev, charp, 0444);
MODULE_PARM_DESC(dev, "RDMA device to test (default mr0)");
int timeout_ms = 10000;
module_param(timeout_ms, int, 0444);
MODULE_PARM_DESC(timeout_ms, "how long to wait for each completion");
int corrupt;
module_param(corrupt, int, 0444);
MODULE_PARM_DESC(corrupt, "self-check: corrupt the N-th payload comparison");
int access_errors = 1;
module_param(access_errors, int, 0444);
MODULE_PARM_DESC(access_errors, "check remote access errors (IB_WC_REM_ACCESS_ERR; default 1)");
int dma_user_va = 1;
module_param(dma_user_va, int, 0444);
MODULE_PARM_DESC(dma_user_va, "READ through the DMA MR's rkey at a user-space address must fail with IB_WC_REM_ACCESS_ERR (default 1; rxe reads whatever the address maps to: 0 for rxe)");
int last_wqe = 1;
module_param(last_wqe, int, 0444);
MODULE_PARM_DESC(last_wqe, "check IB_EVENT_QP_LAST_WQE_REACHED for an SRQ QP moved to ERR (default 1; 0 skips it)");
uint alloc_mr_sg;
module_param(alloc_mr_sg, uint, 0444);
MODULE_PARM_DESC(alloc_mr_sg, "also expect ib_alloc_mr(IB_MR_TYPE_MEM_REG) with this max_num_sg to fail without a WARNING (0: only 1<<31 and UINT_MAX; rxe WARNs for 1<<30)");
int passed, failed, finished;
module_param(passed, int, 0444);
module_param(failed, int, 0444);
module_param(finished, int, 0444);

/* What the tests share (kverbs.h). */
struct kverbs_state t;

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
	STEP(t_planes());
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
