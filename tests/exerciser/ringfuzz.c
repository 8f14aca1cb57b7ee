// SPDX-License-Identifier: GPL-2.0
/*
 * ringfuzz: user space scribbling on the rxe rings it shares with the kernel
 * (struct rxe_queue_buf: SQ, RQ, SRQ, CQ) must never WARN, oops, hang or leak.
 *   ringfuzz [-d DEV] [-g GID_INDEX] [-s SEED] [-n ROUNDS] [-r ROUND] [-v] [-h]
 * Each case and fuzz round runs in a forked child with its own objects (RC
 * pair A<->B, RC pair D->C with C on an SRQ, UD QP U sending to itself, one
 * CQ); it finds the rings in its mappings of /dev/infiniband/uverbs* by the
 * wr_ids it posted (no rdma-core private structs), writes into them and rings
 * doorbells. The parent then checks `rdma res show` has nothing of the child
 * and a clean child still gets SENDs and an RDMA WRITE through. TAP on stdout;
 * -r ROUND reruns one round of seed -s.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/rdma_user_rxe.h>

#define HDR 384			/* struct rxe_queue_buf: data[] */
#define PROD(r) ((uint32_t *)((r)->base + 128))
#define CONS(r) ((uint32_t *)((r)->base + 256))
#define BUF_SIZE (64 << 10)
#define QKEY 0x11111111
#define MAGIC 0x52494e4746555a00ull	/* "RINGFUZ" + tag */

struct ring { uint8_t *base; size_t len; uint32_t log2, mask; const char *name; };

static struct env {		/* one child's objects */
	struct ibv_context *ctx; struct ibv_pd *pd, *pd2; struct ibv_mr *mr; struct ibv_cq *cq;
	struct ibv_srq *srq; struct ibv_qp *a, *b, *c, *d, *u; struct ibv_ah *ah, *ah2;
	char *buf;
	struct ring sq_a, sq_b, sq_d, sq_u, rq_a, rq_b, rq_u, srq_r, cqr;
	uint8_t tmpl_rc[4096], tmpl_ud[4096], tmpl_rv[4096];	/* warm-up WQEs */
} E;

static const char *dev_name = "mr0";
static int gid_idx = -1, verbose, n_tests, n_failed;
static union ibv_gid gid;

static void diag(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	printf("# "); vprintf(fmt, ap); printf("\n");
	va_end(ap);
	fflush(stdout);
}
static double now(void)
{
	struct timespec t;
	return clock_gettime(CLOCK_MONOTONIC, &t), t.tv_sec + t.tv_nsec / 1e9;
}

/* ---- random numbers (xorshift64*) --------------------------------------- */
static uint64_t rs;
static uint64_t rnd(void)
{
	rs ^= rs >> 12; rs ^= rs << 25; rs ^= rs >> 27;
	return rs * 0x2545f4914f6cdd1dull;
}
static uint32_t rn(uint32_t n) { return n ? rnd() % n : 0; }
static uint32_t i32(void)	/* an interesting length, key or index */
{
	static const uint32_t v[] = { 0, 1, 2, 7, 8, 15, 16, 40, 63, 64, 0x7f, 0x80, 0xff, 0x100, 0x3ff,
		0x400, 0xfff, 0x1000, 0xffff, 0x10000, 0x7fffffff, 0x80000000, 0xfffffff0, 0xfffffffe, 0xffffffff };
	uint32_t k = rn(6);
	return k == 0 ? E.mr->lkey : k == 1 ? E.mr->lkey ^ (1u << rn(32)) : k == 2 ? (uint32_t)rnd()
		: k == 3 ? rn(BUF_SIZE + 64) : v[rn(sizeof(v) / sizeof(v[0]))];
}
static uint64_t i64(void)	/* an interesting address: ours, its edges, the kernel's, wrapping */
{
	uint64_t b = (uintptr_t)E.buf, v[] = { 0, ~0ull - rn(64), 0xffff888000000000ull + (rnd() & 0xfffffff000ull),
		0xffffffff81000000ull, rnd(), b + BUF_SIZE - rn(64), b - rn(4096), b + rn(BUF_SIZE) };
	return v[rn(10) % 8];
}
static void fill(void *p, size_t n) { for (size_t i = 0; i < n; i++) ((uint8_t *)p)[i] = rnd(); }

/* ---- rings -------------------------------------------------------------- */
static uint8_t *slot(const struct ring *r, uint32_t i) { return r->base + HDR + ((size_t)(i & r->mask) << r->log2); }
static uint32_t ld(uint32_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
static void st(uint32_t *p, uint32_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
static size_t esz(const struct ring *r) { return (size_t)1 << r->log2; }

/* The mapping of /dev/infiniband/uverbs*, other than x1, that is a struct
 * rxe_queue_buf with a slot starting with `magic` (a WQE's or CQE's wr_id). */
static int find_ring(struct ring *out, const char *name, uint64_t magic, const struct ring *x1)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	int found = 0;
	unsigned long s, e;
	while (f && !found && fgets(line, sizeof(line), f)) {
		struct ring r = { (uint8_t *)0, 0, 0, 0, name };
		if (!strstr(line, "/dev/infiniband/uverbs") || sscanf(line, "%lx-%lx", &s, &e) != 2 ||
		    e - s < HDR + 64 || (x1 && x1->base == (uint8_t *)s))
			continue;
		r.base = (uint8_t *)s, r.len = e - s;
		r.log2 = *(uint32_t *)r.base, r.mask = *(uint32_t *)(r.base + 4);	/* the kernel's geometry */
		if (r.log2 < 4 || r.log2 > 12 || (r.mask & (r.mask + 1)) || r.mask > (1u << 20) ||
		    HDR + ((size_t)(r.mask + 1) << r.log2) > r.len)
			continue;
		for (uint32_t i = 0; i <= r.mask && !found; i++)
			if (!memcmp(slot(&r, i), &magic, 8))
				*out = r, found = 1;
	}
	if (f)
		fclose(f);
	return found ? 0 : (diag("%s: no uverbs mapping holds wr_id %#llx", name, (unsigned long long)magic), -1);
}

/* A WQE into the slot at the producer index, then the producer advanced. */
static void put(struct ring *r, const void *w)
{
	uint32_t p = ld(PROD(r)) & r->mask;
	memcpy(slot(r, p), w, esz(r));
	st(PROD(r), (p + 1) & r->mask);
}

/* ---- doorbells: the write() commands the rxe provider issues ------------ */
static int doorbell(uint32_t cmd, uint32_t handle, uint32_t wr_count, const void *wrs, size_t wrs_len)
{
	struct { struct ib_uverbs_cmd_hdr h; struct ib_uverbs_post_send c; uint8_t w[512]; } m = { 0 };
	struct ib_uverbs_post_send_resp resp;
	size_t n = sizeof(m.h) + sizeof(m.c) + (wrs_len = wrs_len > sizeof(m.w) ? sizeof(m.w) : wrs_len);
	m.h = (struct ib_uverbs_cmd_hdr){ cmd, n / 4, sizeof(resp) / 4 };
	/* post_recv and post_srq_recv have the same layout (qp_handle: srq_handle) */
	m.c = (struct ib_uverbs_post_send){ (uintptr_t)&resp, handle, wr_count, 0,
		cmd == IB_USER_VERBS_CMD_POST_SEND ? sizeof(struct ib_uverbs_send_wr) : sizeof(struct ib_uverbs_recv_wr) };
	if (wrs_len)
		memcpy(m.w, wrs, wrs_len);
	return write(E.ctx->cmd_fd, &m, n & ~3ul) < 0 ? errno : 0;
}
static int db_send(struct ibv_qp *qp) { return doorbell(IB_USER_VERBS_CMD_POST_SEND, qp->handle, 0, NULL, 0); }

/* ---- completions: polled into a stash, looked up by wr_id --------------- */
static struct ibv_wc stash[512];
static int nstash;
static int poll_some(void)
{
	int n = nstash < 480 ? ibv_poll_cq(E.cq, 16, stash + nstash) : 0;
	return nstash += n > 0 ? n : 0, n > 0;
}
static struct ibv_wc *wait_wc(uint64_t id, double secs)
{
	for (double end = now() + secs; now() < end; (void)(poll_some() || usleep(1000)))
		for (int i = 0; i < nstash; i++)
			if (stash[i].wr_id == id)
				return &stash[i];
	return NULL;
}
static const char *wcs(struct ibv_wc *w) { return w ? ibv_wc_status_str(w->status) : "no completion"; }
static int qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	return ibv_query_qp(qp, &a, IBV_QP_STATE, &ia) ? -1 : (int)a.qp_state;
}

/* ---- setup ---------------------------------------------------------------- */
static int post_recv(struct ibv_qp *qp, struct ibv_srq *srq, uint64_t id, size_t off, uint32_t len)
{
	struct ibv_sge s = { (uintptr_t)E.buf + off, len, E.mr->lkey };
	struct ibv_recv_wr w = { .wr_id = id, .sg_list = &s, .num_sge = 1 }, *bad;
	return srq ? ibv_post_srq_recv(srq, &w, &bad) : ibv_post_recv(qp, &w, &bad);
}
static int post_send(struct ibv_qp *qp, uint64_t id, enum ibv_wr_opcode op, size_t off, uint32_t len,
		     uint64_t raddr, struct ibv_ah *ah)
{
	struct ibv_sge s = { (uintptr_t)E.buf + off, len, E.mr->lkey };
	struct ibv_send_wr w = { .wr_id = id, .sg_list = &s, .num_sge = 1, .opcode = op,
				 .send_flags = IBV_SEND_SIGNALED }, *bad;
	if (ah)
		w.wr.ud.ah = ah, w.wr.ud.remote_qpn = E.u->qp_num, w.wr.ud.remote_qkey = QKEY;
	else
		w.wr.rdma.remote_addr = raddr, w.wr.rdma.rkey = E.mr->rkey;
	return ibv_post_send(qp, &w, &bad);
}

static struct ibv_qp *mkqp(enum ibv_qp_type t, struct ibv_srq *srq)
{
	struct ibv_qp_init_attr ia = { .send_cq = E.cq, .recv_cq = E.cq, .srq = srq, .qp_type = t,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 2, .max_recv_sge = 2,
			 .max_inline_data = 64 } };
	return ibv_create_qp(E.pd, &ia);
}

static int rc_connect(struct ibv_qp *q, uint32_t dqpn)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
		.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				   IBV_ACCESS_REMOTE_ATOMIC };
	if (ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR; a.path_mtu = IBV_MTU_1024; a.dest_qp_num = dqpn;
	a.max_dest_rd_atomic = 1; a.min_rnr_timer = 1;
	a.ah_attr = (struct ibv_ah_attr){ .is_global = 1, .port_num = 1,
		.grh = { .dgid = gid, .sgid_index = gid_idx, .hop_limit = 64 } };
	if (ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return -1;
	a.qp_state = IBV_QPS_RTS; a.timeout = 12; a.retry_cnt = 3; a.rnr_retry = 3; a.max_rd_atomic = 1;
	return ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			     IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}
static int ud_up(struct ibv_qp *q)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = QKEY };
	return ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY) ||
	       ibv_modify_qp(q, &(struct ibv_qp_attr){ .qp_state = IBV_QPS_RTR }, IBV_QP_STATE) ||
	       ibv_modify_qp(q, &(struct ibv_qp_attr){ .qp_state = IBV_QPS_RTS }, IBV_QP_STATE | IBV_QP_SQ_PSN);
}

static int find_gid(void)	/* -g, or the first IPv4-mapped RoCE v2 GID */
{
	struct ibv_gid_entry g;
	for (int i = 0; gid_idx < 0 && i < 64; i++)
		if (!ibv_query_gid_ex(E.ctx, 1, i, &g, 0) && g.gid_type == IBV_GID_TYPE_ROCE_V2 &&
		    !memcmp(g.gid.raw, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12))
			gid_idx = i;
	return gid_idx < 0 || ibv_query_gid(E.ctx, 1, gid_idx, &gid) ? -1 : 0;
}

/* One send and its receive, on the ring pair they name: the warm-up that
 * leaves magic wr_ids in the rings. */
static int round_trip(struct ibv_qp *s, struct ibv_qp *r, struct ibv_srq *srq, struct ibv_ah *ah,
		      uint64_t sid, uint64_t rid, struct ring *rq, uint8_t *tmpl_rv)
{
	struct ibv_wc *w1, *w2;
	if (post_recv(r, srq, rid, 8192 + (rid & 0x1f) * 256, 256) || (rq && find_ring(rq, "rq", rid, NULL)))
		return diag("post_recv %#llx failed or not found", (unsigned long long)rid), -1;
	if (tmpl_rv)
		memcpy(tmpl_rv, slot(rq, ld(PROD(rq)) - 1), esz(rq));
	if (post_send(s, sid, IBV_WR_SEND, 0, 64, 0, ah))
		return diag("post_send %#llx failed", (unsigned long long)sid), -1;
	w1 = wait_wc(sid, 5), w2 = wait_wc(rid, 5);
	if (!w1 || !w2 || w1->status || w2->status)
		return diag("warm-up %#llx: send %s, recv %s", (unsigned long long)sid, wcs(w1), wcs(w2)), -1;
	return 0;
}

/* The objects of one child, connected, warmed up, their rings found. */
static int setup(int cqe)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1 };
	for (int i = 0; l && l[i] && !E.ctx; i++)
		if (!strcmp(ibv_get_device_name(l[i]), dev_name))
			E.ctx = ibv_open_device(l[i]);
	if (!E.ctx || find_gid())
		return diag("open %s / find its RoCE v2 GID failed", dev_name), -1;
	E.buf = aligned_alloc(4096, BUF_SIZE);
	E.pd = ibv_alloc_pd(E.ctx), E.pd2 = ibv_alloc_pd(E.ctx);
	E.mr = E.pd && E.buf ? ibv_reg_mr(E.pd, E.buf, BUF_SIZE, IBV_ACCESS_LOCAL_WRITE |
				  IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC) : NULL;
	E.cq = ibv_create_cq(E.ctx, cqe, NULL, NULL, 0);
	E.srq = E.pd ? ibv_create_srq(E.pd, &(struct ibv_srq_init_attr){ .attr = { 16, 2, 0 } }) : NULL;
	if (!E.mr || !E.cq || !E.srq || !E.pd2)
		return diag("PD/MR/CQ/SRQ: %s", strerror(errno)), -1;
	memset(E.buf, 0x5a, BUF_SIZE);
	aa.grh.dgid = gid; aa.grh.sgid_index = gid_idx; aa.grh.hop_limit = 64;
	E.ah = ibv_create_ah(E.pd, &aa), E.ah2 = ibv_create_ah(E.pd2, &aa);	/* ah2: another PD's */
	E.a = mkqp(IBV_QPT_RC, NULL), E.b = mkqp(IBV_QPT_RC, NULL), E.c = mkqp(IBV_QPT_RC, E.srq);
	E.d = mkqp(IBV_QPT_RC, NULL), E.u = mkqp(IBV_QPT_UD, NULL);
	if (!E.ah || !E.ah2 || !E.a || !E.b || !E.c || !E.d || !E.u)
		return diag("AH/QPs: %s", strerror(errno)), -1;
	if (rc_connect(E.a, E.b->qp_num) || rc_connect(E.b, E.a->qp_num) || rc_connect(E.c, E.d->qp_num) ||
	    rc_connect(E.d, E.c->qp_num) || ud_up(E.u))
		return diag("connect: %s", strerror(errno)), -1;
	if (round_trip(E.a, E.b, NULL, NULL, MAGIC | 1, MAGIC | 0x11, &E.rq_b, E.tmpl_rv) ||
	    round_trip(E.b, E.a, NULL, NULL, MAGIC | 2, MAGIC | 0x12, &E.rq_a, NULL) ||
	    round_trip(E.d, E.c, E.srq, NULL, MAGIC | 3, MAGIC | 0x13, &E.srq_r, NULL) ||
	    round_trip(E.u, E.u, NULL, E.ah, MAGIC | 4, MAGIC | 0x14, &E.rq_u, NULL))
		return -1;
	if (find_ring(&E.cqr, "CQ", MAGIC | 0x11, &E.rq_b) ||
	    find_ring(&E.sq_a, "SQ A", MAGIC | 1, &E.cqr) || find_ring(&E.sq_b, "SQ B", MAGIC | 2, &E.cqr) ||
	    find_ring(&E.sq_d, "SQ D", MAGIC | 3, &E.cqr) || find_ring(&E.sq_u, "SQ U", MAGIC | 4, &E.cqr))
		return -1;
	memcpy(E.tmpl_rc, slot(&E.sq_a, ld(PROD(&E.sq_a)) - 1), esz(&E.sq_a));
	memcpy(E.tmpl_ud, slot(&E.sq_u, ld(PROD(&E.sq_u)) - 1), esz(&E.sq_u));
	E.rq_a.name = "RQ A"; E.rq_b.name = "RQ B"; E.rq_u.name = "RQ U"; E.srq_r.name = "SRQ";
	return nstash = 0;
}

/* A send WQE from the RC (or UD) template with wr_id `id`. */
static struct rxe_send_wqe *tmpl(void *w, int ud, uint64_t id)
{
	struct rxe_send_wqe *q = w;
	memcpy(w, ud ? E.tmpl_ud : E.tmpl_rc, esz(ud ? &E.sq_u : &E.sq_a));
	q->wr.wr_id = id;
	q->wr.send_flags = IBV_SEND_SIGNALED;
	return q;
}

/* ---- deterministic cases (child side): 0 pass, 1 fail ------------------- */
static uint8_t W[4096];

/* One malformed send WQE on A (RC) or U (UD): it completes with `want`, the
 * QP goes to ERR (UD: SQE or ERR), the consumer index stays in the ring. */
static int bad_send(struct ring *sq, struct ibv_qp *qp, struct rxe_send_wqe *w, int want)
{
	int e = (put(sq, w), db_send(qp));
	struct ibv_wc *wc = wait_wc(w->wr.wr_id, 3);
	int s = qp_state(qp);
	diag("%s: doorbell %s, completion %s, QP state %d, SQ consumer %u/%u", sq->name, strerror(e), wcs(wc), s,
	     ld(CONS(sq)), sq->mask + 1);
	return !wc || (int)wc->status != want || ld(CONS(sq)) > sq->mask ||
	       !(s == IBV_QPS_ERR || (qp->qp_type == IBV_QPT_UD && s == IBV_QPS_SQE));
}

static int case_prod_wrap(void)
{
	/* rxe masks every index it reads (queue.h): producer cons+slots+1 is cons+1,
	 * one WQE; the kernel writes back a masked consumer index. */
	struct ring *r = &E.sq_a;
	uint32_t c = ld(CONS(r)) & r->mask;
	struct ibv_wc *ws, *wr;
	post_recv(E.b, NULL, MAGIC | 0x31, 8192, 256);
	tmpl(W, 0, MAGIC | 0x30);
	memcpy(slot(r, c), W, esz(r));
	st(PROD(r), c + r->mask + 2);
	int e = db_send(E.a);
	ws = wait_wc(MAGIC | 0x30, 3); wr = wait_wc(MAGIC | 0x31, 3);
	usleep(200000); poll_some();
	diag("doorbell %s; send %s, recv %s, %d completions, SQ consumer %u (was %u, %u slots), QP state %d",
	     strerror(e), wcs(ws), wcs(wr), nstash, ld(CONS(r)), c, r->mask + 1, qp_state(E.a));
	return !(ws && !ws->status && wr && !wr->status && nstash == 2 && ld(CONS(r)) == ((c + 1) & r->mask) &&
		 qp_state(E.a) == IBV_QPS_RTS);
}

static int case_num_sge(void)
{
	tmpl(W, 0, MAGIC | 0x40)->dma.num_sge = 0xffffffff;
	return bad_send(&E.sq_a, E.a, (void *)W, IBV_WC_LOC_QP_OP_ERR);
}

static int case_sge_u32(void)
{
	/* SGE lengths 0xffffffff + 0x41 = 64 (mod 2^32) = dma.length: the 64
	 * bytes come from SGE 0, which starts 16 bytes before the MR's end. */
	struct rxe_send_wqe *w = tmpl(W, 0, MAGIC | 0x50);
	w->dma.num_sge = 2; w->dma.length = 64;
	w->dma.sge[0] = (struct rxe_sge){ (uintptr_t)E.buf + BUF_SIZE - 16, 0xffffffff, E.mr->lkey };
	w->dma.sge[1] = (struct rxe_sge){ (uintptr_t)E.buf, 0x41, E.mr->lkey };
	post_recv(E.b, NULL, MAGIC | 0x51, 8192, 256);
	return bad_send(&E.sq_a, E.a, w, IBV_WC_LOC_PROT_ERR);
}

static int case_sge_u64(void)	/* addr + length wraps 2^64: outside every MR */
{
	struct rxe_send_wqe *w = tmpl(W, 0, MAGIC | 0x60);
	w->dma.num_sge = 1; w->dma.length = 0x40;
	w->dma.sge[0] = (struct rxe_sge){ ~0ull - 0x1f, 0x40, E.mr->lkey };
	post_recv(E.b, NULL, MAGIC | 0x61, 8192, 256);
	return bad_send(&E.sq_a, E.a, w, IBV_WC_LOC_PROT_ERR);
}

static int case_inline(void)	/* inline data from dma.inline_data to dma.length: past the slot */
{
	struct rxe_send_wqe *w = tmpl(W, 0, MAGIC | 0x70);
	w->wr.send_flags |= IBV_SEND_INLINE;
	w->dma.num_sge = 0; w->dma.length = esz(&E.sq_a);
	post_recv(E.b, NULL, MAGIC | 0x71, 8192, 8192);
	return bad_send(&E.sq_a, E.a, w, IBV_WC_LOC_QP_OP_ERR);
}

static int case_opcode(void)
{
	tmpl(W, 0, MAGIC | 0x80)->wr.opcode = 0xff;
	return bad_send(&E.sq_a, E.a, (void *)W, IBV_WC_LOC_QP_OP_ERR);
}

static int case_ud_ah(void)
{
	/* rxe_get_av(): no AH with that number -> LOC_QP_OP_ERR; an AH of another
	 * PD (the provider posts it without a check) -> LOC_QP_OP_ERR too. */
	struct rxe_send_wqe *w = tmpl(W, 1, MAGIC | 0x90);
	struct ibv_wc *wc;
	int bad;
	w->wr.wr.ud.ah_num = 0x7fffffff;
	bad = bad_send(&E.sq_u, E.u, w, IBV_WC_LOC_QP_OP_ERR);
	ibv_modify_qp(E.u, &(struct ibv_qp_attr){ .qp_state = IBV_QPS_RESET }, IBV_QP_STATE);
	if (ud_up(E.u))
		return diag("UD QP back to RTS: %s", strerror(errno)), 1;
	post_send(E.u, MAGIC | 0x91, IBV_WR_SEND, 0, 64, 0, E.ah2);
	wc = wait_wc(MAGIC | 0x91, 3);
	diag("UD send through an AH of another PD: %s, QP state %d", wcs(wc), qp_state(E.u));
	return bad || !wc || wc->status != IBV_WC_LOC_QP_OP_ERR;
}

static int async_event(enum ibv_event_type t, double secs)
{
	struct ibv_async_event ev;
	fcntl(E.ctx->async_fd, F_SETFL, fcntl(E.ctx->async_fd, F_GETFL) | O_NONBLOCK);
	for (double end = now() + secs; now() < end;) {
		struct pollfd p = { E.ctx->async_fd, POLLIN, 0 };
		if (poll(&p, 1, 100) <= 0 || ibv_get_async_event(E.ctx, &ev))
			continue;
		ibv_ack_async_event(&ev);
		if (ev.event_type == t)
			return 1;
		diag("async event %s", ibv_event_type_str(ev.event_type));
	}
	return 0;
}

static int case_cq_cons(void)
{
	/* The consumer index two ahead of the producer: one free slot. The kernel
	 * writes one completion, loses the rest (IB_EVENT_CQ_ERR, as rxe_cq_post),
	 * never writes past the consumer. Then a consumer index far past the ring. */
	struct ring *r = &E.cqr;
	uint32_t p = ld(PROD(r)), np, i;
	int ev;
	st(CONS(r), p + 2);
	for (i = 0; i < 6; i++) {
		post_recv(E.b, NULL, MAGIC | (0xa0 + i), 8192, 256);
		post_send(E.a, MAGIC | (0xb0 + i), IBV_WR_SEND, 0, 64, 0, NULL);
	}
	usleep(500000);
	np = ld(PROD(r));
	ev = async_event(IBV_EVENT_CQ_ERR, 3);
	diag("CQ of %u slots, producer %u, consumer set to %u: producer now %u, CQ_ERR event %s", r->mask + 1, p,
	     p + 2, np, ev ? "seen" : "not seen");
	int bad = np != ((p + 1) & r->mask) || !ev;
	st(CONS(r), 0xfffffff0);
	for (i = 0; i < 6; i++)
		post_send(E.a, MAGIC | (0xc0 + i), IBV_WR_SEND, 0, 64, 0, NULL);
	usleep(500000);
	diag("consumer 0xfffffff0: producer now %u, QP A state %d", ld(PROD(r)), qp_state(E.a));
	return bad || ld(PROD(r)) > r->mask;
}

static int rq_bad(struct ring *rq, struct ibv_qp *s, struct ibv_qp *rqp, uint64_t base)
{
	/* IBTA 9.9.3.1.1 class A responder error: the receive completes with
	 * LOC_QP_OP_ERR, the requester's send with a remote error (NAK). */
	struct rxe_recv_wqe *w = (void *)W;
	struct ibv_wc *ws, *wr;
	memcpy(W, E.tmpl_rv, esz(rq));
	w->wr_id = base | 1;
	w->dma.num_sge = 0x10000;
	put(rq, W);
	post_send(s, base | 2, IBV_WR_SEND, 0, 64, 0, NULL);
	wr = wait_wc(base | 1, 3); ws = wait_wc(base | 2, 3);
	diag("%s: recv %s, send %s, receiver state %d", rq->name, wcs(wr), wcs(ws), qp_state(rqp));
	return !wr || wr->status != IBV_WC_LOC_QP_OP_ERR || !ws || !ws->status || qp_state(rqp) != IBV_QPS_ERR;
}
static int case_rq_sge(void) { return rq_bad(&E.rq_b, E.a, E.b, MAGIC | 0xd0); }
static int case_srq_sge(void) { return rq_bad(&E.srq_r, E.d, E.c, MAGIC | 0xe0); }
static int case_recv_db(void)
{
	/* The receive doorbells of the write() ABI with no WR: the rxe provider
	 * never issues them; they fail or do nothing, the QPs stay RTS. */
	int e1 = doorbell(IB_USER_VERBS_CMD_POST_RECV, E.b->handle, 0, NULL, 0);
	int e2 = doorbell(IB_USER_VERBS_CMD_POST_SRQ_RECV, E.srq->handle, 0, NULL, 0);
	diag("POST_RECV: %s, POST_SRQ_RECV: %s", strerror(e1), strerror(e2));
	return qp_state(E.b) != IBV_QPS_RTS || round_trip(E.a, E.b, NULL, NULL, MAGIC | 0xf0, MAGIC | 0xf1, NULL, NULL);
}

/* ---- the fuzz round (child side) ---------------------------------------- */
static struct ibv_qp *sq_qp(struct ring *r)
{
	return r == &E.sq_a ? E.a : r == &E.sq_b ? E.b : r == &E.sq_d ? E.d : E.u;
}
static void sges(struct rxe_sge *sg, size_t room)	/* up to 4 SGEs that fit the slot */
{
	for (size_t k = 0; k < 4 && (k + 1) * sizeof(*sg) <= room; k++)
		if (rn(2))
			sg[k] = (struct rxe_sge){ i64(), rn(2) ? i32() : rn(512), rn(3) ? E.mr->lkey : i32() };
}
static void fuzz_send_wqe(struct ring *r)
{
	struct rxe_send_wqe *w = tmpl(W, r == &E.sq_u, MAGIC | 0x100 | rn(256));
	if (rn(4) == 0)
		fill(W, esz(r));
	w->wr.opcode = rn(4) ? rn(14) : rn(3) ? 0xff : (uint32_t)rnd();
	w->wr.send_flags = rn(4) ? rn(16) : i32();
	w->wr.ex.imm_data = i32();
	if (r == &E.sq_u) {
		if (rn(2)) w->wr.wr.ud.ah_num = rn(2) ? i32() : 0;
		if (rn(2)) w->wr.wr.ud.remote_qpn = i32();
		if (rn(3) == 0) fill(&w->wr.wr.ud.av, sizeof(w->wr.wr.ud.av));
	} else if (rn(2)) {
		w->wr.wr.atomic.remote_addr = i64(); w->wr.wr.atomic.rkey = i32();
		w->wr.wr.atomic.compare_add = i64(); w->wr.wr.atomic.swap = i64();
	}
	w->dma.num_sge = rn(3) ? rn(4) : i32();
	w->dma.length = rn(2) ? i32() : rn(256);
	if (rn(4) == 0) { w->dma.resid = i32(); w->dma.cur_sge = i32(); w->dma.sge_offset = i32(); }
	sges(w->dma.sge, esz(r) - sizeof(*w));
	put(r, W);
}
static void fuzz_recv_wqe(struct ring *r)
{
	struct rxe_recv_wqe *w = (void *)W;
	memcpy(W, E.tmpl_rv, esz(r));
	if (rn(4) == 0)
		fill(W, esz(r));
	w->wr_id = MAGIC | 0x200 | rn(256);
	w->dma.num_sge = rn(3) ? rn(4) : i32();
	w->dma.length = i32();
	sges(w->dma.sge, esz(r) - sizeof(*w));
	put(r, W);
}
/* Traffic that makes the kernel consume receive ring r. */
static void traffic(struct ring *r)
{
	uint32_t len = rn(3) ? rn(300) : rn(2000);
	if (r == &E.rq_b) post_send(E.a, MAGIC | 0x300, rn(2) ? IBV_WR_SEND : IBV_WR_SEND_WITH_IMM, 0, len, 0, NULL);
	else if (r == &E.rq_a) post_send(E.b, MAGIC | 0x301, IBV_WR_SEND, 0, len, 0, NULL);
	else if (r == &E.srq_r) post_send(E.d, MAGIC | 0x302, IBV_WR_SEND, 0, len, 0, NULL);
	else post_send(E.u, MAGIC | 0x303, IBV_WR_SEND, 0, len, 0, E.ah);
}

/* A second thread: random bytes into random slots while the kernel reads them. */
static struct ring *live[9];
static void *scribbler(void *x)
{
	uint64_t r = (uintptr_t)x;
	for (;;) {
		r ^= r >> 12; r ^= r << 25; r ^= r >> 27;
		struct ring *g = __atomic_load_n(&live[r % 9], __ATOMIC_SEQ_CST);
		size_t off = g ? (r >> 40) & (esz(g) - 1) : 0, n = 1 + ((r >> 50) & 7);
		if (g)
			memset(slot(g, r >> 8) + off, (int)(r >> 32), off + n > esz(g) ? esz(g) - off : n);
		usleep(50 + (r >> 56) * 4);
	}
	return NULL;
}

static void fuzz_round(int steps)
{
	struct ring *sqs[] = { &E.sq_a, &E.sq_b, &E.sq_d, &E.sq_u }, *rqs[] = { &E.rq_a, &E.rq_b, &E.rq_u, &E.srq_r };
	struct ibv_qp *qps[] = { E.a, E.b, E.c, E.d, E.u };
	struct ring *all[] = { &E.sq_a, &E.sq_b, &E.sq_d, &E.sq_u, &E.rq_a, &E.rq_b, &E.rq_u, &E.srq_r, &E.cqr };
	struct ibv_wc wc[16];
	pthread_t t;
	uint32_t c;
	if (rn(2)) {
		memcpy(live, all, sizeof(all));
		pthread_create(&t, NULL, scribbler, (void *)(uintptr_t)(rnd() | 1));
	}
	for (int i = 0; i < steps; i++) {
		struct ring *r = all[rn(9)], *sq = sqs[rn(4)], *rq = rqs[rn(4)];
		uint32_t k = rn(20);
		int e = 0;
		if (!E.cqr.base && r == &E.cqr)
			continue;
		if (k < 4) {				/* a semi-valid send WQE, doorbell */
			fuzz_send_wqe(sq);
			e = rn(4) ? db_send(sq_qp(sq)) : 0;
		} else if (k < 7) {			/* a receive WQE, then traffic to it */
			fuzz_recv_wqe(rq);
			traffic(rq);
		} else if (k < 9) {			/* random bytes in a slot */
			fill(slot(r, rn(r->mask + 1)), rn(2) ? esz(r) : rn(esz(r)));
			if (rn(32) == 0)		/* the geometry: only the provider reads it */
				fill(r->base, 8);
		} else if (k < 11) {			/* producer index */
			c = ld(CONS(r));
			uint32_t v[] = { c, c + 1, c + r->mask, c + r->mask + 1, c + r->mask + 2, (uint32_t)rnd(), c - 1 };
			if (r != &E.cqr || rn(4) == 0)
				st(PROD(r), v[rn(7)]);
			if (r <= &E.sq_u) e = db_send(sq_qp(r)); else traffic(r == &E.cqr ? rq : r);
		} else if (k < 13) {			/* consumer index */
			c = ld(PROD(r));
			uint32_t v[] = { c, c + 1, c + 2, c - 1, c + r->mask, (uint32_t)rnd() };
			st(CONS(r), v[rn(6)]);
			traffic(r <= &E.sq_u || r == &E.cqr ? rq : r);
		} else if (k == 13) {			/* doorbells with garbage WRs */
			uint8_t g[256];
			fill(g, sizeof(g));
			e = doorbell(rn(3) ? IB_USER_VERBS_CMD_POST_SEND : rn(2) ? IB_USER_VERBS_CMD_POST_RECV
				     : IB_USER_VERBS_CMD_POST_SRQ_RECV, rn(8) ? sq_qp(sq)->handle : E.srq->handle,
				     rn(3), g, rn(2) ? 0 : rn(sizeof(g)));
		} else if (k == 14) {			/* legit posts through the provider */
			traffic(rq);
			post_recv(E.b, rn(2) ? E.srq : NULL, MAGIC | 0x400, rn(BUF_SIZE), rn(4096));
		} else if (k == 15) {			/* state changes: flushes over garbage */
			struct ibv_qp *q = qps[rn(5)];
			enum ibv_qp_state s = rn(3) ? IBV_QPS_ERR : rn(3) ? IBV_QPS_RESET : IBV_QPS_SQD;
			ibv_modify_qp(q, &(struct ibv_qp_attr){ .qp_state = s }, IBV_QP_STATE);
			if (s == IBV_QPS_RESET && rn(2))
				q == E.u ? ud_up(q) : rc_connect(q, q == E.a ? E.b->qp_num : q == E.b ? E.a->qp_num
								 : q == E.c ? E.d->qp_num : E.c->qp_num);
		} else if (k == 16) {
			ibv_poll_cq(E.cq, 16, wc);
		} else if (k == 17 && rn(8) == 0) {	/* resize copies the ring */
			ibv_resize_cq(E.cq, 1 + rn(64));
			__atomic_store_n(&live[8], NULL, __ATOMIC_SEQ_CST);
			usleep(1000);			/* the scribbler is out of the old ring */
			E.cqr.base = NULL;		/* remapped: stop scribbling on it */
			all[8] = &E.rq_a;
		} else if (k == 18) {
			ibv_modify_srq(E.srq, &(struct ibv_srq_attr){ .srq_limit = rn(20) }, IBV_SRQ_LIMIT);
		} else {
			usleep(rn(3000));
		}
		if (verbose)
			diag("step %d: action %u on %s / %s / %s: %s", i, k, r->name, sq->name, rq->name, strerror(e));
	}
	usleep(rn(200000));
	if ((c = rn(4)) == 0) {			/* destroy it all, in order */
		for (int i = 0; i < 5; i++)
			ibv_destroy_qp(qps[i]);
		ibv_destroy_srq(E.srq); ibv_destroy_ah(E.ah); ibv_destroy_ah(E.ah2);
		ibv_destroy_cq(E.cq); ibv_dereg_mr(E.mr); ibv_dealloc_pd(E.pd); ibv_dealloc_pd(E.pd2);
		ibv_close_device(E.ctx);
	}
	_exit(c == 1 ? (raise(SIGKILL), 0) : 0);	/* or exit with everything open */
}

/* A healthy device: setup's SENDs (RC both ways, to the SRQ, UD), an RDMA WRITE. */
static int health(void)
{
	for (int i = 0; i < 256; i++)
		E.buf[i] = i;
	post_send(E.a, MAGIC | 0x500, IBV_WR_RDMA_WRITE, 0, 256, (uintptr_t)E.buf + 32768, NULL);
	struct ibv_wc *wc = wait_wc(MAGIC | 0x500, 5);
	if (!wc || wc->status || memcmp(E.buf, E.buf + 32768, 256))
		return diag("RDMA WRITE: %s", wcs(wc)), 1;
	return 0;
}

/* ---- parent ------------------------------------------------------------- */
/* Lines of `rdma res show pd|mr|cq|qp|srq|ctx` naming our device and pid. */
static int owned(pid_t pid, char *out, size_t len)
{
	char line[512], pat[32];
	int n = 0;
	FILE *f = popen("for k in pd mr cq qp srq ctx; do rdma res show $k; done 2>/dev/null", "r");
	snprintf(pat, sizeof(pat), "pid %d ", pid);
	while (f && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = ' ';
		if (strstr(line, dev_name) && strstr(line, pat) && ++n && len > 1) {
			snprintf(out, len, "%s", line);
			len -= strlen(out), out += strlen(out);
		}
	}
	if (f)
		pclose(f);
	return n;
}

/* fn in a child (alarm: secs): its exit status, 128 + its signal, or -2 if it
 * would not die (stuck in the kernel); what the kernel kept of it in `left`. */
static int in_child(int (*fn)(void *), void *arg, int secs, char *left, size_t len)
{
	int st = 0, rc = 0;
	double end = now() + secs + 10;
	pid_t pid = (fflush(stdout), fork());
	if (!pid)
		_exit((alarm(secs), fn(arg)));
	for (int k = 0; k < 2 && !rc; k++, end = now() + 30) {	/* then SIGKILL, 30 s more */
		if (k)
			kill(pid, SIGKILL);
		while (!(rc = waitpid(pid, &st, WNOHANG)) && now() < end)
			usleep(20000);
	}
	if (!rc) {
		char w[64] = "", p[64];
		FILE *f = (snprintf(p, sizeof(p), "/proc/%d/wchan", pid), fopen(p, "r"));
		if (f) { if (!fgets(w, sizeof(w), f)) *w = 0; fclose(f); }
		return snprintf(left, len, "child %d does not die after SIGKILL (wchan %s)", pid, w), -2;
	}
	*left = 0;
	for (end = now() + 10; owned(pid, left, len) && now() < end;)
		usleep(200000);
	return WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -1;
}

/* Children: exit 0 pass, 1 a check failed, 2 setup failed. */
static int ch_health(void *x) { (void)x; return setup(16) ? 2 : health(); }
struct job { int (*fn)(void); int cqe; };
static int ch_case(void *x) { return setup(((struct job *)x)->cqe) ? 2 : ((struct job *)x)->fn(); }
static uint64_t round_seed(uint64_t s, int r) { return (s ^ 0x9e3779b97f4a7c15ull * (r + 1)) | 1; }
static int ch_fuzz(void *x)
{
	rs = *(uint64_t *)x;
	for (int i = 0; i < 4; i++) rnd();
	return setup(4 + rn(60)) ? 2 : (fuzz_round(20 + rn(60)), 0);
}

static void tap(int ok, const char *desc, const char *detail)
{
	n_tests++; n_failed += !ok;
	printf("%sok %d - %s\n", ok ? "" : "not ", n_tests, desc);
	if (!ok && detail && *detail) diag("%s", detail);
	fflush(stdout);
}

/* After a child: nothing of it is left, and a clean child works. */
static int after(int rc, const char *left, char *why, size_t len)
{
	char l2[1024];
	int h;
	if (rc == -2) return snprintf(why, len, "%s", left), 0;
	if (*left) return snprintf(why, len, "objects left after the child exited: %s", left), 0;
	h = in_child(ch_health, NULL, 30, l2, sizeof(l2));
	if (h || *l2) return snprintf(why, len, "device unhealthy afterwards: health child %d %s", h, l2), 0;
	return 1;
}

/* number: S as a whole decimal or 0x number <= MAX, into *OUT; 0 on success. */
static int number(const char *s, unsigned long long max, unsigned long long *out)
{
	char *end;
	errno = 0;
	if (!*s || *s == '-' || *s == '+' || *s == ' ')
		return -1;
	*out = strtoull(s, &end, 0);
	return errno || *end || *out > max ? -1 : 0;
}

static int usage(FILE *f, const char *prog, int rc)
{
	fprintf(f, "usage: %s [-d DEV] [-g GID_INDEX] [-s SEED] [-n ROUNDS] [-r ROUND] [-v] [-h]\n"
		"  -d DEV        the RDMA device (default %s)\n"
		"  -g GID_INDEX  its RoCE v2 GID index (default: the first RoCE v2 GID)\n"
		"  -s SEED       the fuzz seed (default: from the time and pid, printed)\n"
		"  -n ROUNDS     seeded fuzz rounds after the deterministic cases (default 50)\n"
		"  -r ROUND      rerun only round ROUND of seed -s (no deterministic cases)\n"
		"  -v            print every write into a ring\n"
		"  -h            this help\n"
		"TAP on stdout; exit 0 when every test passed.\n", prog, dev_name);
	return rc;
}

int main(int argc, char **argv)
{
	static const struct { const char *desc; int (*fn)(void); int cqe; } cases[] = {
		{ "SQ producer = consumer + ring size + 1: masked, one WQE runs, consumer written back masked", case_prod_wrap, 64 },
		{ "send WQE num_sge = 0xffffffff: LOC_QP_OP_ERR, QP to ERR", case_num_sge, 64 },
		{ "SGE lengths summing past 2^32, bytes past the MR: LOC_PROT_ERR, QP to ERR", case_sge_u32, 64 },
		{ "SGE addr + length wrapping 2^64: LOC_PROT_ERR, QP to ERR", case_sge_u64, 64 },
		{ "inline WQE with dma.length past its slot: LOC_QP_OP_ERR, QP to ERR", case_inline, 64 },
		{ "send WQE opcode 0xff: LOC_QP_OP_ERR, QP to ERR", case_opcode, 64 },
		{ "UD WQE with no such AH / an AH of another PD: LOC_QP_OP_ERR", case_ud_ah, 64 },
		{ "CQ consumer ahead of producer, burst: one CQE written, CQ_ERR event, no overrun", case_cq_cons, 4 },
		{ "RQ WQE num_sge past max: recv LOC_QP_OP_ERR, send NAKed, responder to ERR", case_rq_sge, 64 },
		{ "SRQ WQE num_sge past max: recv LOC_QP_OP_ERR, send NAKed, responder to ERR", case_srq_sge, 64 },
		{ "POST_RECV / POST_SRQ_RECV doorbells with no WR: refused, QPs unharmed", case_recv_db, 64 },
	};
	uint64_t seed = 0;
	int rounds = 50, only = -1, o, fails = 0, sigs[65] = { 0 }, gid_arg = -1;
	char left[1024], why[1200], d[300];
	double t0 = now();
	unsigned long long v;
	const char *bad = NULL;
	while ((o = getopt(argc, argv, "d:g:s:n:r:vh")) != -1)
		if (o == 'd') dev_name = optarg;
		else if (o == 'g') { if (number(optarg, 255, &v)) bad = "-g takes a GID index 0..255"; else gid_arg = (int)v; }
		else if (o == 's') { if (number(optarg, ~0ull, &v) || !v) bad = "-s takes a nonzero seed"; else seed = v; }
		else if (o == 'n') { if (number(optarg, 1000000, &v)) bad = "-n takes 0..1000000 rounds"; else rounds = (int)v; }
		else if (o == 'r') { if (number(optarg, 1000000, &v)) bad = "-r takes a round number"; else only = (int)v; }
		else if (o == 'v') verbose = 1;
		else if (o == 'h') return usage(stdout, argv[0], 0);
		else return usage(stderr, argv[0], 2);
	if (!bad && optind < argc)
		bad = "unexpected argument";
	if (!bad && only >= 0 && !seed)
		bad = "-r ROUND reruns a round of the seed given with -s";
	if (bad) {
		fprintf(stderr, "%s: %s\n", argv[0], bad);
		return usage(stderr, argv[0], 2);
	}
	gid_idx = gid_arg;
	if (!seed)
		seed = (uint64_t)time(NULL) * 2654435761u ^ getpid();
	diag("ringfuzz -d %s -s %#llx -n %d (reproduce a round: -s %#llx -r ROUND)", dev_name,
	     (unsigned long long)seed, rounds, (unsigned long long)seed);
	signal(SIGPIPE, SIG_IGN);
	if (only < 0) {
		int h = in_child(ch_health, NULL, 30, left, sizeof(left)), p[2], n = 0;
		tap(h == 0 && !*left, "a clean child: RC/SRQ/UD SEND and RDMA WRITE, rings found, nothing left", left);
		if (h) { printf("1..%d\n", n_tests); return 1; }
		/* The leak check can see: a live child's objects are listed by its pid. */
		pid_t pid = (fflush(stdout), pipe(p), fork());
		if (!pid)
			_exit(setup(16) ? 2 : (write(p[1], "", 1), pause(), 0));
		close(p[1]);
		if (read(p[0], &o, 1) == 1)
			n = owned(pid, left, sizeof(left));
		kill(pid, SIGKILL), waitpid(pid, NULL, 0), close(p[0]);
		snprintf(d, sizeof(d), "rdma res show lists a live child's objects by pid (%d: ctx, PDs, MR, CQ, SRQ, QPs)", n);
		tap(n >= 10, d, left);
		for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
			struct job j = { cases[i].fn, cases[i].cqe };
			int rc = in_child(ch_case, &j, 30, left, sizeof(left));
			int ok = after(rc, left, why, sizeof(why));
			if (ok && rc)
				snprintf(why, sizeof(why), "child exit %d (%s)", rc,
					 rc == 1 ? "a check failed" : rc == 2 ? "setup failed" : "killed");
			tap(ok && rc == 0, cases[i].desc, why);
		}
	}
	for (int r = only < 0 ? 0 : only; r < (only < 0 ? rounds : only + 1); r++) {
		uint64_t s = round_seed(seed, r);
		int rc = in_child(ch_fuzz, &s, 30, left, sizeof(left));
		if (rc > 128 && rc < 128 + 65)
			sigs[rc - 128]++;
		if (rc == 2 || !after(rc, left, why, sizeof(why))) {
			fails++;
			snprintf(d, sizeof(d), "fuzz round %d (-s %#llx -r %d)", r, (unsigned long long)seed, r);
			tap(0, d, NULL);
			diag("%s", rc == 2 ? "setup failed" : why);
			if (rc == -2) break;	/* a child stuck in the kernel: stop */
		}
		if (only < 0 && (r + 1) % 25 == 0)
			diag("%d/%d rounds, %d failed, %.0f s", r + 1, rounds, fails, now() - t0);
	}
	for (int k = 1; k < 65; k++)	/* SIGKILL: 1 round in 4 ends so; others: their time limit, the rings */
		if (sigs[k])
			diag("%d fuzz children died of %s", sigs[k], strsignal(k));
	snprintf(d, sizeof(d), "fuzz: %d rounds of seed %#llx, %d failed, %.0f s", only < 0 ? rounds : 1,
		 (unsigned long long)seed, fails, now() - t0);
	tap(fails == 0, d, NULL);
	printf("1..%d\n", n_tests);
	return n_failed != 0;
}
