// SPDX-License-Identifier: GPL-2.0
/*
 * kverbs_test's memory registration and remote access: fast registration
 * (REG_MR, SEND_WITH_INV, LOCAL_INV), remote access errors, ib_alloc_mr
 * with a huge max_num_sg, and inline SEND_WITH_INV on a pair of its own
 * (E/F).
 */
#include "kverbs.h"

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
void t_fastreg(void)
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
 * Remote access errors (access_errors=1): the requester's WQE must complete
 * with IB_WC_REM_ACCESS_ERR (the responder NAKs), and its QP goes to ERR.
 */
void t_access_at(const char *name, enum ib_wr_opcode op, u32 rkey, u64 raddr)
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

void t_access(const char *name, enum ib_wr_opcode op, u32 rkey)
{
	t_access_at(name, op, rkey, t.b.rx_dma + 4096);
}

/*
 * --- Error paths of issue 19, each on QPs of their own (here E/F; G/H in
 * kverbs_queues.c) so that A and B are not disturbed: inline SEND_WITH_INV
 * (row 7), ib_alloc_mr with a huge max_num_sg, SEND_WITH_INV of an unknown
 * rkey (row 12); CQ overrun (row 3) is kverbs_queues.c's.
 */

/*
 * ib_alloc_mr(IB_MR_TYPE_MEM_REG) with a max_num_sg far above the device's
 * max_fast_reg_page_list_len must fail (an ERR_PTR) without a kernel WARNING
 * (a page list sized by max_num_sg before the check asks kmalloc for more
 * than MAX_PAGE_ORDER: WARN in __alloc_pages). rxe 6.12 does not check the
 * limit: it kcallocs max_num_sg (as an int) page entries, which for these
 * values overflows: -ENOMEM, no WARNING; for 1 << 30 it WARNs (16 GiB).
 * The run's log check catches a WARNING too; here TAINT_WARN tells.
 */
void t_alloc_mr_huge(void)
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
void t_inline_inv(void)
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
