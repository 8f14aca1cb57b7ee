// SPDX-License-Identifier: GPL-2.0
/*
 * exerciser, section 5 (error paths): keys and memory -- SGEs the device may
 * not scatter into or gather from, an MR deregistered between a request's
 * check and its execution, memory windows, huge MRs.
 */
#include "exerciser.h"
#include "errpaths.h"

/*
 * Row 1: the READ response or the atomic's original value cannot be
 * scattered into the requester's SGE. IBTA 11.6.2 local protection error:
 * the WQE completes with IBV_WC_LOC_PROT_ERR, not success, and the local
 * buffer is untouched. The responder has executed the atomic (it cannot
 * know): the remote word holds the sum.
 * rxe: do_read()/do_atomic() -> IBV_WC_LOC_PROT_ERR, QP to ERR; the word
 * holds the sum.
 */
void ep_scatter(void)
{
	static const struct { enum ibv_wr_opcode op; int key; const char *what; } c[] = {
		{ IBV_WR_RDMA_READ, 0, "READ into an MR without LOCAL_WRITE" },
		{ IBV_WR_RDMA_READ, 1, "READ into a deregistered MR's lkey" },
		{ IBV_WR_ATOMIC_FETCH_AND_ADD, 2, "FETCH_ADD into an MR of another PD" },
		/* The index of a live MR with the wrong key byte (issue 18). */
		{ IBV_WR_RDMA_READ, 3, "READ into a live MR's lkey + 1" },
		{ IBV_WR_ATOMIC_FETCH_AND_ADD, 3, "FETCH_ADD into a live MR's lkey + 1" },
	};
	uint64_t *word = (uint64_t *)E_DST;
	struct ibv_wc wc[4], *s;
	char rw[48] = "";

	for (int i = 0; i < (int)(sizeof(c) / sizeof(c[0])); i++) {
		uint32_t lkey = c[i].key == 0 ? ep.nolw->lkey : c[i].key == 1 ? ep.dead_lkey :
				c[i].key == 2 ? ep.other->lkey : ep.mr->lkey + 1;
		int atomic = c[i].op == IBV_WR_ATOMIC_FETCH_AND_ADD, e, n, same;

		if (ep_pair(NULL, c[i].what))
			continue;
		memset(E_LOC, 0x3c, 64);
		memset(E_DST, 0xa5, 64);
		*word = 1000;
		e = post_wr(ep.a, 0xe101, c[i].op, E_LOC, atomic ? 8 : 64, lkey, E_DST, ep.mr->rkey, 5);
		n = e ? 0 : collect(ep.cq, wc, 4, 0xe101, 20, 0);
		s = find_wc(wc, n, 0xe101);
		same = all_bytes(E_LOC, 0x3c, 64);
		if (atomic)
			snprintf(rw, sizeof(rw), ", remote word %llu", (unsigned long long)*word);
		checkd(!e && s && s->status == IBV_WC_LOC_PROT_ERR && same && (!atomic || *word == 1005), ename(e),
		       "error paths: %s completes with IBV_WC_LOC_PROT_ERR, local buffer untouched%s "
		       "(IBTA 11.6.2, rxe do_read/do_atomic) (%s; local %s%s)",
		       c[i].what, atomic ? ", the remote word added to" : "", wc_str(s),
		       same ? "untouched" : "WRITTEN", rw);
	}
}

/*
 * Row 2: SEND, WRITE and WRITE_WITH_IMM gathering from an SGE the requester
 * may not read: a deregistered MR's lkey, an MR of another PD, an SGE past
 * its MR's end. The WQE completes in error -- with -S IBTA's
 * IBV_WC_LOC_PROT_ERR (11.6.2) -- and nothing reaches the peer: its buffers
 * keep their pattern and no receive completes successfully.
 * QUIRK: rxe completes the WQE with IBV_WC_WR_FLUSH_ERR. rxe_requester()
 * sets a status (LOC_QP_OP_ERR: copy_data() fails with EINVAL, only EFAULT
 * would give LOC_PROT_ERR), moves the QP to ERR, and the completer that runs
 * next flushes the SQ, the failed WQE with it. It sends nothing; the peer's
 * receive stays posted (flushed when the pair is destroyed).
 */
void ep_gather(void)
{
	static const enum ibv_wr_opcode ops[] = { IBV_WR_SEND, IBV_WR_RDMA_WRITE, IBV_WR_RDMA_WRITE_WITH_IMM };
	static const char *opn[] = { "SEND", "WRITE", "WRITE_WITH_IMM" };
	static const char *keyn[] = { "a deregistered MR's lkey", "an MR of another PD",
				      "an SGE past its MR's end", "a live MR's lkey + 1" };
	struct ibv_wc wc[8], *s, *r;

	for (int o = 0; o < 3; o++) {
		for (int k = 0; k < 4; k++) {
			uint32_t lkey = k == 0 ? ep.dead_lkey : k == 1 ? ep.other->lkey :
					k == 2 ? ep.small->lkey : ep.small->lkey + 1;
			char *from = k == 2 ? E_SRC + 4096 - 32 : E_SRC;
			int e, n, same;

			if (ep_pair(NULL, opn[o]))
				continue;
			memset(E_SRC, 0x11, 8192);
			memset(E_DST, 0x5c, 128);
			memset(E_RECV, 0x5c, 128);
			e = post_recv1(ep.b, NULL, 0xe201, E_RECV, 128);
			e = e ? e : post_wr(ep.a, 0xe202, ops[o], from, 64, lkey, E_DST, ep.mr->rkey, 0);
			n = e ? 0 : collect(ep.cq, wc, 8, 0xe202, 20, 0.2);
			s = find_wc(wc, n, 0xe202);
			r = find_wc(wc, n, 0xe201);
			same = all_bytes(E_DST, 0x5c, 128) && all_bytes(E_RECV, 0x5c, 128);
			checkd(!e && s && s->status != IBV_WC_SUCCESS &&
			       (!strict || s->status == IBV_WC_LOC_PROT_ERR) && same &&
			       (!r || r->status != IBV_WC_SUCCESS), ename(e),
			       "error paths: %s from %s fails%s, nothing reaches the peer "
			       "(IBTA 11.6.2; rxe: WR_FLUSH_ERR) (%s; peer buffers %s; receive %s)",
			       opn[o], keyn[k], strict ? " with IBV_WC_LOC_PROT_ERR" : "", wc_str(s),
			       same ? "untouched" : "WRITTEN", r ? wc_str(r) : "pending");
		}
	}
}

/* Bind type 2 window mw on qp to 4 KiB at addr of mr with access; *rkey gets
 * its new rkey. The completion status, -1 if none came, or -errno. */
static int bind_type2(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mr *mr, void *addr, int access,
		      uint32_t *rkey)
{
	struct ibv_send_wr w = { .wr_id = 0xe801, .opcode = IBV_WR_BIND_MW,
				 .send_flags = IBV_SEND_SIGNALED }, *bad;
	struct ibv_wc wc[4], *s;
	int e, n;

	*rkey = ibv_inc_rkey(mw->rkey);
	w.bind_mw.mw = mw;
	w.bind_mw.rkey = *rkey;
	w.bind_mw.bind_info = (struct ibv_mw_bind_info){ .mr = mr, .addr = (uintptr_t)addr,
		.length = 4096, .mw_access_flags = access };
	if ((e = rcerr(ibv_post_send(qp, &w, &bad))))
		return -e;
	n = collect(ep.cq, wc, 4, 0xe801, 10, 0);
	s = find_wc(wc, n, 0xe801);
	return s ? (int)s->status : -1;
}

/*
 * Row 8: memory windows.
 * (a) A type 2 window belongs to the QP that bound it (IBTA 10.6.7): a
 *     WRITE through it arriving on another QP of the same PD fails with
 *     IBV_WC_REM_ACCESS_ERR and writes nothing; on its own QP it lands.
 *     rxe: rxe_lookup_mw() requires mw->qp == qp -> NAK remote access.
 * (b) Binding a window with REMOTE_WRITE to an MR without LOCAL_WRITE fails
 *     (C10-74): the bind completes in error, with -S IBTA's
 *     IBV_WC_MW_BIND_ERR. rxe: a type 2 BIND_MW and a type 1 ibv_bind_mw
 *     (it returns 0: the provider posts a BIND_MW WQE) both fail, the QP
 *     goes to ERR. QUIRK: the status is IBV_WC_WR_FLUSH_ERR, not
 *     MW_BIND_ERR: rxe_requester() sets MW_BIND_ERR, moves the QP to ERR,
 *     and its completer then flushes the failed WQE (as in row 2).
 * (c) ibv_dereg_mr of an MR with a bound window fails with EINVAL
 *     (IBTA 10.6.7.2.6; rxe_dereg_mr) and the MR stays; once the window is
 *     deallocated it deregisters.
 */
void ep_mw(void)
{
	struct ibv_qp *c = NULL, *d = NULL;
	struct ibv_mw *mw = NULL;
	struct ibv_mr *mr = NULL;
	struct ibv_wc wc[4];
	uint32_t rkey;
	int st, e, n2 = 0, own = 0, same;

	if (!(mw_types() & 2)) {
		checkd(0, "EOPNOTSUPP", "error paths: memory windows: the device reports no type 2 MW");
		return;
	}
	/* (a) */
	if (ep_pair(NULL, "MW bound to another QP"))
		return;
	if ((e = fresh_pair(ep.pd, ep.cq, &c, &d, &ep_default)) || !(mw = ibv_alloc_mw(ep.pd, IBV_MW_TYPE_2))) {
		checkd(0, ename(e ? e : errno), "error paths: MW bound to another QP: second pair, type 2 MW");
		goto out;
	}
	/* Bound on b; a WRITE from a (b's peer) lands, one from c (d's) must not. */
	st = bind_type2(ep.b, mw, ep.mr, E_DST, IBV_ACCESS_REMOTE_WRITE, &rkey);
	memset(E_SRC, 0x11, 64);
	memset(E_DST, 0x5c, 64);
	if (st == IBV_WC_SUCCESS && one_op(ep.a, ep.cq, IBV_WR_RDMA_WRITE, E_SRC, ep.mr->lkey, 64,
					   (uintptr_t)E_DST, rkey, wc) == 1)
		own = wc[0].status == IBV_WC_SUCCESS && all_bytes(E_DST, 0x11, 64);
	memset(E_DST, 0x5c, 64);
	if (own)
		n2 = one_op(c, ep.cq, IBV_WR_RDMA_WRITE, E_SRC, ep.mr->lkey, 64, (uintptr_t)E_DST, rkey, wc);
	same = all_bytes(E_DST, 0x5c, 64);
	check(own && n2 == 1 && wc[0].status == IBV_WC_REM_ACCESS_ERR && same,
	      "error paths: a WRITE through a type 2 MW arriving on another QP of its PD than the one it is bound "
	      "to fails with IBV_WC_REM_ACCESS_ERR, nothing written (rxe_lookup_mw) (bind %s, through its own "
	      "QP %s; other QP %s; target %s)", st_str(st), own ? "lands" : "FAILS",
	      n2 == 1 ? ibv_wc_status_str(wc[0].status) : "no completion", same ? "untouched" : "WRITTEN");
	ibv_dealloc_mw(mw);
	mw = NULL;

	/* (b) type 2, then type 1 */
	if (ep_pair(NULL, "MW bind without LOCAL_WRITE") || !(mw = ibv_alloc_mw(ep.pd, IBV_MW_TYPE_2)))
		goto out;
	st = bind_type2(ep.a, mw, ep.nolw, E_LOC, IBV_ACCESS_REMOTE_WRITE, &rkey);
	check(st > 0 && (!strict || st == IBV_WC_MW_BIND_ERR),
	      "error paths: BIND_MW of a type 2 MW with REMOTE_WRITE on an MR without LOCAL_WRITE completes in "
	      "error%s (C10-74; rxe: WR_FLUSH_ERR) (%s)", strict ? " with IBV_WC_MW_BIND_ERR" : "", st_str(st));
	ibv_dealloc_mw(mw);
	mw = NULL;
	if ((mw_types() & 1) && !ep_pair(NULL, "type 1 MW bind without LOCAL_WRITE") &&
	    (mw = ibv_alloc_mw(ep.pd, IBV_MW_TYPE_1))) {
		struct ibv_mw_bind bind = {
			.wr_id = 0xe802, .send_flags = IBV_SEND_SIGNALED,
			.bind_info = { .mr = ep.nolw, .addr = (uintptr_t)E_LOC, .length = 4096,
				       .mw_access_flags = IBV_ACCESS_REMOTE_WRITE },
		};
		struct ibv_wc *s;
		int n;

		e = rcerr(ibv_bind_mw(ep.a, mw, &bind));
		n = e ? 0 : collect(ep.cq, wc, 4, 0xe802, 10, 0);
		s = find_wc(wc, n, 0xe802);
		checkd(!e && s && s->status != IBV_WC_SUCCESS && (!strict || s->status == IBV_WC_MW_BIND_ERR),
		       ename(e), "error paths: ibv_bind_mw of a type 1 MW with REMOTE_WRITE on an MR without "
		       "LOCAL_WRITE returns 0 and completes in error%s (C10-74; rxe: WR_FLUSH_ERR) (%s)",
		       strict ? " with IBV_WC_MW_BIND_ERR" : "", wc_str(s));
		ibv_dealloc_mw(mw);
		mw = NULL;
	}

	/* (c) */
	if (ep_pair(NULL, "dereg_mr with a bound MW"))
		goto out;
	mr = ibv_reg_mr(ep.pd, E_RECV, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			IBV_ACCESS_MW_BIND);
	mw = mr ? ibv_alloc_mw(ep.pd, IBV_MW_TYPE_2) : NULL;
	st = mw ? bind_type2(ep.a, mw, mr, E_RECV, IBV_ACCESS_REMOTE_WRITE, &rkey) : -1;
	if (st != IBV_WC_SUCCESS) {
		checkd(0, st_str(st), "error paths: dereg_mr with a bound MW: bind a type 2 MW");
	} else {
		e = rcerr(ibv_dereg_mr(mr));
		if (!e)
			mr = NULL;
		expect_err(e, EINVAL, "error paths: dereg_mr of an MR with a bound type 2 MW fails "
			   "(IBTA 10.6.7.2.6; rxe_dereg_mr)");
	}
	if (mw) {
		expect_err(ibv_dealloc_mw(mw), 0, "error paths: dealloc_mw of that window");
		mw = NULL;
	}
	if (mr) {
		expect_err(rcerr(ibv_dereg_mr(mr)), 0, "error paths: then dereg_mr of the MR succeeds");
		mr = NULL;
	}
out:
	if (mw)
		ibv_dealloc_mw(mw);
	if (mr)
		ibv_dereg_mr(mr);
	if (c)
		ibv_destroy_qp(c);
	if (d)
		ibv_destroy_qp(d);
}

/*
 * Allocation: registering 1 TiB and 8 GiB at an unmapped address fails like
 * rxe: ib_umem_get() pins page by page, and the first pin_user_pages_fast()
 * fails with EFAULT -- nothing is allocated per page beforehand. A driver
 * that sizes an allocation by the length would WARN (the guest runner fails
 * a run on any kernel WARNING).
 */
void ep_huge_mr(void)
{
	static const uint64_t len[] = { 1ULL << 40, 8ULL << 30 };

	for (int i = 0; i < 2; i++) {
		void *p = mmap(NULL, len[i], PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		struct ibv_mr *mr;

		if (p == MAP_FAILED) {
			checkd(0, ename(errno), "error paths: reserve %llu GiB of address space",
			       (unsigned long long)(len[i] >> 30));
			continue;
		}
		munmap(p, len[i]);
		errno = 0;
		mr = ibv_reg_mr(ep.pd, p, len[i], IBV_ACCESS_LOCAL_WRITE);
		expect_err(PERR(mr), WANT_MR_UNMAPPED, "error paths: reg_mr of %llu GiB at an unmapped address fails",
			   (unsigned long long)(len[i] >> 30));
		if (mr)
			ibv_dereg_mr(mr);
	}
}

/*
 * Rows 4 and 5: the responder checks a READ's or atomic's rkey when the
 * request arrives but executes it in order, after every earlier message. A
 * SEND with no receive posted holds the responder (RNR, rnr_retry 7) while a
 * READ or FETCH_ADD behind it arrives; the responder then deregisters the
 * target MR and posts the receive. The READ/atomic executes against memory
 * that is gone: it must complete with IBV_WC_REM_ACCESS_ERR, the target word
 * untouched and the local buffer untouched -- never SUCCESS with zeros (the
 * check-then-act race of issue 19).
 * rxe: same result (it drops the out-of-sequence READ/atomic while the SEND
 * is refused and NAKs it at execution, when the rkey no longer resolves).
 */
void ep_dereg_race(void)
{
	static const struct { enum ibv_wr_opcode op; const char *what; } c[] = {
		{ IBV_WR_RDMA_READ, "READ" },
		{ IBV_WR_ATOMIC_FETCH_AND_ADD, "FETCH_ADD" },
	};
	uint64_t *word = (uint64_t *)E_DST;
	struct ibv_wc wc[4], *s, *r;

	for (int i = 0; i < 2; i++) {
		int atomic = c[i].op == IBV_WR_ATOMIC_FETCH_AND_ADD, e, n, same, recv_e;
		struct ibv_mr *tgt;

		if (ep_pair(NULL, c[i].what))
			continue;
		tgt = ibv_reg_mr(ep.pd, E_DST, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
				 IBV_ACCESS_REMOTE_ATOMIC);
		if (!tgt) {
			checkd(0, ename(errno), "error paths: %s behind an RNR'd SEND: target MR", c[i].what);
			continue;
		}
		memset(E_LOC, 0x3c, 64);
		memset(E_DST, 0xa5, 64);
		*word = 1000;
		e = post_wr(ep.a, 0xe401, IBV_WR_SEND, E_SRC, 8, ep.mr->lkey, NULL, 0, 0);
		if (!e)
			e = post_wr(ep.a, 0xe402, c[i].op, E_LOC, atomic ? 8 : 64, ep.mr->lkey, E_DST,
				    tgt->rkey, 5);
		usleep(100000);	/* the request arrives and waits behind the SEND */
		ibv_dereg_mr(tgt);
		recv_e = post_recv1(ep.b, NULL, 0xe403, E_RECV, 64);
		n = e ? 0 : collect(ep.cq, wc, 4, 0xe402, 20, 0);
		s = find_wc(wc, n, 0xe402);
		r = find_wc(wc, n, 0xe401);
		same = all_bytes(E_LOC, 0x3c, 64);
		checkd(!e && !recv_e && r && r->status == IBV_WC_SUCCESS && s &&
		       s->status == IBV_WC_REM_ACCESS_ERR && same && *word == 1000, ename(e ? e : recv_e),
		       "error paths: a %s checked on arrival whose MR is deregistered before it executes "
		       "completes with IBV_WC_REM_ACCESS_ERR, target and local buffer untouched "
		       "(rxe read_reply/atomic_reply) (SEND %s; %s %s; local %s, remote word %llu)",
		       c[i].what, wc_str(r), c[i].what, wc_str(s), same ? "untouched" : "WRITTEN",
		       (unsigned long long)*word);
	}
}
