// SPDX-License-Identifier: GPL-2.0
/*
 * mr-agent's commands: the verbs work behind each one (mr-agent.c has the
 * protocol, whose header comment defines every command and reply).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <endian.h>
#include <err.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"

#define MAX_POLL 4096

static void *grow(void *arr, int n, size_t sz)   /* room for entry n, zeroed */
{
	char *p = realloc(arr, (n + 1) * sz);

	if (!p)
		err(1, "realloc");
	memset(p + n * sz, 0, sz);
	return p;
}

/* ---- verbs helpers ---- */

static int modify(struct ibv_qp *qp, struct ibv_qp_attr *at, int mask, const char *what)
{
	int r = ibv_modify_qp(qp, at, mask);

	return r ? fail_errno(what, r) : 0;
}

static void av(struct ibv_ah_attr *ah, const uint8_t dgid[16])
{
	memset(ah, 0, sizeof(*ah));
	ah->is_global = 1;
	memcpy(ah->grh.dgid.raw, dgid, 16);
	ah->grh.sgid_index = gid_index;
	ah->grh.hop_limit = 64;
	ah->port_num = 1;
}

/* RTR -> RTS, for connect (sq_psn= required but on ud) and modify (sq_psn= 0 if absent). */
static int to_rts(struct ibv_qp *qp, struct args *a, int need_psn)
{
	struct ibv_qp_attr at = { .qp_state = IBV_QPS_RTS };
	int mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
	uint64_t psn, to, rc, rnr, rd;

	if (num(a, "sq_psn", need_psn, 0, 0xffffff, &psn) || num(a, "timeout", 0, 14, 31, &to) ||
	    num(a, "retry_cnt", 0, 7, 7, &rc) || num(a, "rnr_retry", 0, 7, 7, &rnr) ||
	    num(a, "max_rd_atomic", 0, 1, 255, &rd))
		return -1;
	at.sq_psn = psn;
	if (qp->qp_type == IBV_QPT_RC) {
		at.timeout = to;
		at.retry_cnt = rc;
		at.rnr_retry = rnr;
		at.max_rd_atomic = rd;
		mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
	}
	return modify(qp, &at, mask, "RTR->RTS: ibv_modify_qp");
}

static struct ibv_ah *get_ah(struct qp_ent *q, const uint8_t gid[16])
{
	struct ibv_ah_attr at;
	struct ah_ent *e;

	for (e = q->ahs; e; e = e->next)
		if (!memcmp(e->gid, gid, 16))
			return e->ah;
	av(&at, gid);
	if (!(e = calloc(1, sizeof(*e))))
		err(1, "calloc");
	if (!(e->ah = ibv_create_ah(pd, &at))) {
		fail_errno("ibv_create_ah", 0);
		free(e);
		return NULL;
	}
	memcpy(e->gid, gid, 16);
	e->next = q->ahs;
	q->ahs = e;
	return e->ah;
}

static int free_qp(struct qp_ent *q)
{
	int r = ibv_destroy_qp(q->qp);

	if (r)
		return fail_errno("ibv_destroy_qp", r);
	for (struct ah_ent *e = q->ahs, *next; e; e = next) {
		next = e->next;
		ibv_destroy_ah(e->ah);
		free(e);
	}
	r = ibv_destroy_cq(q->cq);
	memset(q, 0, sizeof(*q));
	return r ? fail_errno("ibv_destroy_cq", r) : 0;
}

static int free_mr(struct mr_ent *m)
{
	int r = ibv_dereg_mr(m->mr);

	if (r)
		return fail_errno("ibv_dereg_mr", r);
	free(m->buf);
	memset(m, 0, sizeof(*m));
	return 0;
}

/* ---- commands: 0 with the reply's key=value part in out, or -1 with errmsg ---- */

/*
 * The MTU of the netdev under GID gid_index, from sysfs (the RDMA core's
 * gid_attrs/ndevs and the netdev's mtu); 0 if either cannot be read.
 */
static int netdev_mtu(void)
{
	char path[256], name[64];
	int mtu = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/1/gid_attrs/ndevs/%d",
		 devname, gid_index);
	if (!(f = fopen(path, "r")))
		return 0;
	if (fscanf(f, "%63s", name) != 1)
		name[0] = 0;
	fclose(f);
	if (!name[0] || strchr(name, '/'))
		return 0;
	snprintf(path, sizeof(path), "/sys/class/net/%s/mtu", name);
	if (!(f = fopen(path, "r")))
		return 0;
	if (fscanf(f, "%d", &mtu) != 1)
		mtu = 0;
	fclose(f);
	return mtu;
}

int cmd_info(struct args *a)
{
	struct ibv_port_attr pa;
	char ip[INET6_ADDRSTRLEN];
	union ibv_gid g;
	int r;

	(void)a;
	if ((r = ibv_query_gid(ctx, 1, gid_index, &g)))
		return fail_errno("ibv_query_gid", r);
	if ((r = ibv_query_port(ctx, 1, &pa)))
		return fail_errno("ibv_query_port", r);
	if (!memcmp(g.raw, v4mapped, 12))
		inet_ntop(AF_INET, g.raw + 12, ip, sizeof(ip));
	else
		inet_ntop(AF_INET6, g.raw, ip, sizeof(ip));
	fprintf(out, " dev=%s gid=", devname);
	for (int i = 0; i < 16; i++)
		fprintf(out, "%02x", g.raw[i]);
	fprintf(out, " gid_index=%d active_mtu=%d max_mtu=%d ip=%s", gid_index,
		128 << pa.active_mtu, 128 << pa.max_mtu, ip);   /* IBV_MTU_256 is 1 */
	fprintf(out, " link_mtu=%d", netdev_mtu());
	return 0;
}

int cmd_mr(struct args *a)
{
	uint64_t len;
	void *buf;
	int acc;

	if (num(a, "len", 1, 0, 1ULL << 32, &len) || access_arg(a, "lw,rw,rr,ra", &acc))
		return -1;
	if (posix_memalign(&buf, 4096, len ?: 1))
		return fail("posix_memalign: out of memory");
	memset(buf, 0, len);
	mrs = grow(mrs, nmrs, sizeof(*mrs));
	if (!(mrs[nmrs].mr = ibv_reg_mr(pd, buf, len, acc))) {
		free(buf);
		return fail_errno("ibv_reg_mr", 0);
	}
	mrs[nmrs].buf = buf;
	mrs[nmrs].len = len;
	fprintf(out, " mr=%d addr=%p rkey=0x%x lkey=0x%x len=%llu", nmrs, buf,
		mrs[nmrs].mr->rkey, mrs[nmrs].mr->lkey, (unsigned long long)len);
	nmrs++;
	return 0;
}

int cmd_mrfree(struct args *a)
{
	struct mr_ent *m;

	return mr_arg(a, &m) || free_mr(m);
}

int cmd_put(struct args *a)
{
	const char *hex = arg(a, "hex");
	struct mr_ent *m;
	uint64_t off;
	size_t n;

	if (!hex)
		return fail("missing argument hex=");
	if ((n = strlen(hex)) % 2)
		return fail("hex= has an odd number of digits");
	for (size_t i = 0; i < n; i++)
		if (hexval(hex[i]) < 0)
			return fail("hex= has a non-hex character at %zu", i);
	if (mr_range(a, n / 2, &m, &off))
		return -1;
	for (size_t i = 0; i < n / 2; i++)
		((uint8_t *)m->buf)[off + i] = hexval(hex[2 * i]) << 4 | hexval(hex[2 * i + 1]);
	return 0;
}

int cmd_get(struct args *a)
{
	uint64_t len, off;
	struct mr_ent *m;
	char chunk[8192];
	size_t c = 0;

	if (num(a, "len", 1, 0, UINT32_MAX, &len) || mr_range(a, len, &m, &off))
		return -1;
	fputs(" hex=", out);
	for (uint64_t i = 0; i < len; i++) {
		uint8_t b = ((uint8_t *)m->buf)[off + i];

		chunk[c++] = "0123456789abcdef"[b >> 4];
		chunk[c++] = "0123456789abcdef"[b & 15];
		if (c == sizeof(chunk) || i + 1 == len) {
			fwrite(chunk, 1, c, out);
			c = 0;
		}
	}
	return 0;
}

int cmd_qp(struct args *a)
{
	const char *t = arg(a, "type") ?: "";
	enum ibv_qp_type type = !strcmp(t, "rc") ? IBV_QPT_RC : !strcmp(t, "uc") ? IBV_QPT_UC :
				!strcmp(t, "ud") ? IBV_QPT_UD : 0;
	uint64_t sq, rq, sge, inl, cqe;
	struct ibv_qp *qp = NULL;
	struct ibv_cq *cq;
	int ex = 0;

	if (!type)
		return fail("%s type=%s (rc, uc or ud)", *t ? "invalid" : "missing argument", t);
	if (num(a, "sq", 0, 64, UINT32_MAX, &sq) || num(a, "rq", 0, 64, UINT32_MAX, &rq) ||
	    num(a, "sge", 0, 4, UINT32_MAX, &sge) || num(a, "inline", 0, 0, UINT32_MAX, &inl) ||
	    num(a, "cqe", 0, 256, INT32_MAX, &cqe))
		return -1;
	if (!(cq = ibv_create_cq(ctx, cqe, NULL, NULL, 0)))
		return fail_errno("ibv_create_cq", 0);
	struct ibv_qp_init_attr_ex ia = {
		.qp_type = type, .send_cq = cq, .recv_cq = cq, .sq_sig_all = 0, .pd = pd,
		.cap = { .max_send_wr = sq, .max_recv_wr = rq, .max_send_sge = sge,
			 .max_recv_sge = sge, .max_inline_data = inl },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.send_ops_flags = IBV_QP_EX_WITH_ATOMIC_WRITE,
	};
	/* An extended QP for ATOMIC WRITE where it can be had, else a plain one. */
	if (type == IBV_QPT_RC && have_atomic_write)
		ex = !!(qp = ibv_create_qp_ex(ctx, &ia));
	if (!qp) {
		struct ibv_qp_init_attr ib = {
			.qp_type = type, .send_cq = cq, .recv_cq = cq, .sq_sig_all = 0, .cap = ia.cap,
		};

		if (!(qp = ibv_create_qp(pd, &ib))) {
			fail_errno("ibv_create_qp", 0);
			ibv_destroy_cq(cq);
			return -1;
		}
	}
	qps = grow(qps, nqps, sizeof(*qps));
	qps[nqps] = (struct qp_ent){ .qp = qp, .cq = cq, .qpx = ex ? ibv_qp_to_qp_ex(qp) : NULL };
	fprintf(out, " qp=%d qpn=0x%x", nqps++, qp->qp_num);
	return 0;
}

int cmd_connect(struct args *a)
{
	struct ibv_qp_attr at = { .qp_state = IBV_QPS_INIT, .port_num = 1 };
	uint64_t qkey, dqpn, rq_psn, mtu, rnr, rd, only;
	struct qp_ent *q;
	struct ibv_qp *qp;
	uint8_t dgid[16];
	int acc, mask, rc;

	if (qp_arg(a, &q))
		return -1;
	qp = q->qp;
	if (qp->qp_type == IBV_QPT_UD) {
		if (num(a, "qkey", 1, 0, UINT32_MAX, &qkey))
			return -1;
		at.qkey = qkey;
		if (modify(qp, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY,
			   "RESET->INIT: ibv_modify_qp"))
			return -1;
		at.qp_state = IBV_QPS_RTR;
		if (modify(qp, &at, IBV_QP_STATE, "INIT->RTR: ibv_modify_qp") || to_rts(qp, a, 0))
			return -1;
		fputs(" state=rts", out);
		return 0;
	}
	rc = qp->qp_type == IBV_QPT_RC;
	if (num(a, "dqpn", 1, 0, 0xffffff, &dqpn) || gid_arg(a, "dgid", dgid) ||
	    num(a, "rq_psn", 1, 0, 0xffffff, &rq_psn) || num(a, "mtu", 1, 0, 4096, &mtu) ||
	    num(a, "min_rnr_timer", 0, 12, 31, &rnr) || num(a, "max_dest_rd_atomic", 0, 1, 255, &rd) ||
	    num(a, "rtr_only", 0, 0, 1, &only) || access_arg(a, rc ? "lw,rw,rr,ra" : "lw,rw", &acc))
		return -1;
	if (mtu < 256 || (mtu & (mtu - 1)))
		return fail("invalid mtu=%s (256, 512, 1024, 2048 or 4096)", arg(a, "mtu"));
	if (!rc && (arg(a, "min_rnr_timer") || arg(a, "max_dest_rd_atomic") || arg(a, "timeout") ||
		    arg(a, "retry_cnt") || arg(a, "rnr_retry") || arg(a, "max_rd_atomic")))
		return fail("uc takes no timeout, retry_cnt, rnr_retry, min_rnr_timer or rd_atomic");
	at.qp_access_flags = acc;
	if (modify(qp, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS,
		   "RESET->INIT: ibv_modify_qp"))
		return -1;
	memset(&at, 0, sizeof(at));
	at.qp_state = IBV_QPS_RTR;
	at.path_mtu = __builtin_ctzll(mtu) - 7;   /* 256 -> IBV_MTU_256 (1) */
	at.dest_qp_num = dqpn;
	at.rq_psn = rq_psn;
	av(&at.ah_attr, dgid);
	mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
	if (rc) {
		at.min_rnr_timer = rnr;
		at.max_dest_rd_atomic = rd;
		mask |= IBV_QP_MIN_RNR_TIMER | IBV_QP_MAX_DEST_RD_ATOMIC;
	}
	if (modify(qp, &at, mask, "INIT->RTR: ibv_modify_qp") || (!only && to_rts(qp, a, 1)))
		return -1;
	fprintf(out, " state=%s", only ? "rtr" : "rts");
	return 0;
}

int cmd_modify(struct args *a)
{
	struct ibv_qp_attr at = { 0 };
	const char *s = arg(a, "state") ?: "";
	struct qp_ent *q;

	if (qp_arg(a, &q))
		return -1;
	if (!strcmp(s, "rts"))
		return to_rts(q->qp, a, 0);
	if (strcmp(s, "reset") && strcmp(s, "err"))
		return fail("%s state=%s (reset, err or rts)", *s ? "invalid" : "missing argument", s);
	at.qp_state = strcmp(s, "err") ? IBV_QPS_RESET : IBV_QPS_ERR;
	return modify(q->qp, &at, IBV_QP_STATE, "ibv_modify_qp");
}

int cmd_state(struct args *a)
{
	static const char *names[] = { "reset", "init", "rtr", "rts", "sqd", "sqe", "err" };
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr at;
	struct qp_ent *q;
	int r;

	if (qp_arg(a, &q))
		return -1;
	if ((r = ibv_query_qp(q->qp, &at, IBV_QP_STATE, &ia)))
		return fail_errno("ibv_query_qp", r);
	fprintf(out, " state=%s", at.qp_state < NELEM(names) ? names[at.qp_state] : "unknown");
	return 0;
}

int cmd_recv(struct args *a)
{
	struct ibv_recv_wr wr = { 0 }, *bad;
	uint64_t len, off, id;
	struct ibv_sge sge;
	struct qp_ent *q;
	struct mr_ent *m;
	int r;

	if (qp_arg(a, &q) || num(a, "len", 1, 0, UINT32_MAX, &len) ||
	    num(a, "wr", 1, 0, UINT64_MAX, &id) || mr_range(a, len, &m, &off))
		return -1;
	wr.wr_id = id;
	if (len) {
		sge = (struct ibv_sge){ (uintptr_t)m->buf + off, len, m->mr->lkey };
		wr.sg_list = &sge;
		wr.num_sge = 1;
	}
	return (r = ibv_post_recv(q->qp, &wr, &bad)) ? fail_errno("ibv_post_recv", r) : 0;
}

int cmd_send(struct args *a)
{
	enum { RDMA = 1, ATOMIC = 2, IMM = 4, UD = 8 };   /* what an op takes */
	static const struct { const char *n; enum ibv_wr_opcode op; int f; } ops[] = {
		{ "send", IBV_WR_SEND, UD }, { "send_imm", IBV_WR_SEND_WITH_IMM, IMM | UD },
		{ "send_inv", IBV_WR_SEND_WITH_INV, 0 }, { "write", IBV_WR_RDMA_WRITE, RDMA },
		{ "write_imm", IBV_WR_RDMA_WRITE_WITH_IMM, RDMA | IMM },
		{ "read", IBV_WR_RDMA_READ, RDMA }, { "cas", IBV_WR_ATOMIC_CMP_AND_SWP, ATOMIC },
		{ "faa", IBV_WR_ATOMIC_FETCH_AND_ADD, ATOMIC },
		{ "atomic_write", IBV_WR_ATOMIC_WRITE, ATOMIC },
	};
	uint64_t len, off, id, sig, sol, inl, fence, raddr, rkey, imm, inv, v1, v2, dqpn, qkey;
	struct ibv_send_wr wr = { 0 }, *bad;
	const char *opn = arg(a, "op") ?: "";
	struct ibv_sge sge;
	struct qp_ent *q;
	struct mr_ent *m;
	uint8_t gid[16];
	unsigned int i;
	int r, f;

	for (i = 0; i < NELEM(ops) && strcmp(opn, ops[i].n); i++)
		;
	if (i == NELEM(ops))
		return fail("%s op=%s", *opn ? "invalid" : "missing argument", opn);
	wr.opcode = ops[i].op;
	f = ops[i].f;
	if (qp_arg(a, &q) || num(a, "len", 1, 0, UINT32_MAX, &len) ||
	    num(a, "wr", 1, 0, UINT64_MAX, &id) || mr_range(a, len, &m, &off) ||
	    num(a, "signaled", 0, 1, 1, &sig) || num(a, "solicited", 0, 0, 1, &sol) ||
	    num(a, "inline", 0, 0, 1, &inl) || num(a, "fence", 0, 0, 1, &fence) ||
	    num(a, "imm", 0, 0, UINT32_MAX, &imm) || num(a, "inv", !f, 0, UINT32_MAX, &inv) ||
	    num(a, "raddr", f & (RDMA | ATOMIC), 0, UINT64_MAX, &raddr) ||
	    num(a, "rkey", f & (RDMA | ATOMIC), 0, UINT32_MAX, &rkey) ||
	    num(a, "compare", wr.opcode == IBV_WR_ATOMIC_CMP_AND_SWP, 0, UINT64_MAX, &v1) ||
	    num(a, "swap", wr.opcode == IBV_WR_ATOMIC_CMP_AND_SWP, 0, UINT64_MAX, &v2))
		return -1;
	if (q->qp->qp_type == IBV_QPT_UD && !(f & UD))
		return fail("op=%s on a ud qp (send or send_imm)", opn);
	if ((f & ATOMIC) && len != 8)
		return fail("op=%s needs len=8", opn);
	wr.wr_id = id;
	wr.send_flags = (sig ? IBV_SEND_SIGNALED : 0) | (sol ? IBV_SEND_SOLICITED : 0) |
			(inl ? IBV_SEND_INLINE : 0) | (fence ? IBV_SEND_FENCE : 0);
	if (wr.opcode == IBV_WR_ATOMIC_WRITE) {
		uint8_t val[8];

		if (!q->qpx)
			return fail("atomic_write unsupported");
		memcpy(val, (uint8_t *)m->buf + off, 8);
		if (arg(a, "value")) {
			if (num(a, "value", 1, 0, UINT64_MAX, &v1))
				return -1;
			memcpy(val, &v1, 8);
		}
		ibv_wr_start(q->qpx);
		q->qpx->wr_id = id;
		q->qpx->wr_flags = wr.send_flags;
		ibv_wr_atomic_write(q->qpx, rkey, raddr, val);
		return (r = ibv_wr_complete(q->qpx)) ? fail_errno("ibv_wr_complete", r) : 0;
	}
	if (len) {
		sge = (struct ibv_sge){ (uintptr_t)m->buf + off, len, m->mr->lkey };
		wr.sg_list = &sge;
		wr.num_sge = 1;
	}
	if (f & IMM)
		wr.imm_data = htobe32(imm);
	if (wr.opcode == IBV_WR_SEND_WITH_INV)
		wr.invalidate_rkey = inv;
	if (f & RDMA) {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	} else if (f & ATOMIC) {
		if (wr.opcode == IBV_WR_ATOMIC_FETCH_AND_ADD &&
		    num(a, "add", 1, 0, UINT64_MAX, &v1))
			return -1;
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.compare_add = v1;
		wr.wr.atomic.swap = v2;
		wr.wr.atomic.rkey = rkey;
	} else if (q->qp->qp_type == IBV_QPT_UD) {
		if (gid_arg(a, "dgid", gid) || num(a, "dqpn", 1, 0, 0xffffff, &dqpn) ||
		    num(a, "qkey", 1, 0, UINT32_MAX, &qkey) || !(wr.wr.ud.ah = get_ah(q, gid)))
			return -1;
		wr.wr.ud.remote_qpn = dqpn;
		wr.wr.ud.remote_qkey = qkey;
	}
	return (r = ibv_post_send(q->qp, &wr, &bad)) ? fail_errno("ibv_post_send", r) : 0;
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int cmd_poll(struct args *a)
{
	uint64_t n, ms, got = 0;
	struct ibv_wc wc[16];
	struct qp_ent *q;
	size_t listlen;
	char *list;
	FILE *l;
	double end;

	if (qp_arg(a, &q) || num(a, "n", 0, 1, MAX_POLL, &n) || num(a, "ms", 0, 2000, 3600000, &ms))
		return -1;
	if (!(l = open_memstream(&list, &listlen)))
		err(1, "open_memstream");
	for (end = now_ms() + ms; got < n; usleep(200)) {
		int k = ibv_poll_cq(q->cq, n - got < NELEM(wc) ? n - got : NELEM(wc), wc);

		for (int i = 0; i < k; i++) {
			struct ibv_wc *w = &wc[i];
			uint32_t imm = w->wc_flags & IBV_WC_WITH_INV ? w->invalidated_rkey :
				       w->wc_flags & IBV_WC_WITH_IMM ? be32toh(w->imm_data) : 0;

			fprintf(l, "%s%llu:%d:%d:%u:0x%x:%u:%u", got + i ? "," : "",
				(unsigned long long)w->wr_id, w->status, w->opcode, w->byte_len,
				imm, w->wc_flags, w->src_qp);
		}
		if (k < 0) {
			fclose(l);
			free(list);
			return fail("ibv_poll_cq: returned %d", k);
		}
		got += k;
		if (got >= n || now_ms() >= end)
			break;
	}
	fclose(l);
	fprintf(out, " n=%llu wc=%s", (unsigned long long)got, list);
	free(list);
	return 0;
}

static int regular(const struct dirent *d)
{
	return d->d_type == DT_REG;
}

int cmd_counters(struct args *a)
{
	char dir[300], path[600], val[128];
	struct dirent **names;
	int n;

	(void)a;
	snprintf(dir, sizeof(dir), "/sys/class/infiniband/%s/ports/1/hw_counters", devname);
	n = scandir(dir, &names, regular, alphasort);
	for (int i = 0; i < n; i++) {
		FILE *f;

		snprintf(path, sizeof(path), "%s/%s", dir, names[i]->d_name);
		if ((f = fopen(path, "r")) && fgets(val, sizeof(val), f)) {
			val[strcspn(val, " \t\r\n")] = 0;
			fprintf(out, " %s=%s", names[i]->d_name, val);
		}
		if (f)
			fclose(f);
		free(names[i]);
	}
	if (n >= 0)
		free(names);
	return 0;
}

int cmd_destroy(struct args *a)
{
	struct qp_ent *q;

	return qp_arg(a, &q) || free_qp(q);
}

int cmd_reset(struct args *a)
{
	int bad = 0;

	(void)a;
	for (int i = 0; i < nqps; i++)
		bad += qps[i].qp && free_qp(&qps[i]);
	for (int i = 0; i < nmrs; i++)
		bad += mrs[i].mr && free_mr(&mrs[i]);
	if (bad)   /* the ids stay as they are */
		return fail("reset: %d object(s) left, last: %.400s", bad, errmsg);
	nqps = nmrs = 0;
	return 0;
}
