// SPDX-License-Identifier: GPL-2.0
/*
 * kverbs_test's data path on the A/B loopback pair: SEND (+IMM, inline,
 * multi-SGE), RDMA WRITE (+IMM, inline), RDMA READ, the atomics and a chain
 * of unsignaled SENDs; every byte of the target compared, guards included.
 */
#include "kverbs.h"

/* SEND (or SEND_WITH_IMM) of len bytes from ns SGEs of A to nr SGEs of B. */
void t_send(const char *name, u32 len, int ns, int nr, bool imm, bool inl)
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
void t_write(const char *name, u32 len, int ns, bool imm, bool inl)
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
void t_read(const char *name, u32 len, int nr)
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
void t_atomic(const char *name, enum ib_wr_opcode op, u64 before, u64 cmp_add,
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
void t_unsignaled(void)
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
