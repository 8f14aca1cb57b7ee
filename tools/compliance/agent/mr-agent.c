// SPDX-License-Identifier: GPL-2.0
/*
 * mr-agent: the implementation-under-test side of the wire compliance suite.
 * A small, generic libibverbs program (any rdma-core provider: rxe, metaroce,
 * a NIC) that a remote test suite drives over TCP.
 *
 *   mr-agent -d DEV [-g GID_INDEX] [-p TCP_PORT (18600)] [-l LISTEN_ADDR (0.0.0.0)]
 *
 * Without -g: the first GID of port 1 whose type is "RoCE v2" and which is
 * IPv4-mapped (::ffff:a.b.c.d). Once listening it prints
 * "mr-agent: listening on ADDR:PORT dev DEV gid_index N" on stdout. One client
 * at a time, served until it closes; verbs objects outlive a client (only
 * `reset` drops them). One PD, made at start, holds everything.
 *
 * Protocol: one command a line ('\n'), whitespace-separated tokens: a verb,
 * then key=value arguments (numbers decimal or 0x-hex; an unknown or repeated
 * key is an error). Every command gets exactly one reply line:
 * "ok key=value ..." or "err MESSAGE" (what failed, and the errno text:
 * "err ibv_post_send: Invalid argument (22)"). Objects are named by ids the
 * agent assigns, counting from 0 (qp=0,1,...; mr=0,1,...; not reused until a
 * reset). LIST: comma-separated of lw,rw,rr,ra,mw (local write, remote write,
 * remote read, remote atomic, MW bind). GIDs are 32 hex digits, no colons.
 * off= is 0 when absent.
 *
 *   info -> ok dev= gid= gid_index= active_mtu=BYTES max_mtu=BYTES ip=
 *   mr len=N [access=LIST (lw,rw,rr,ra)] -> ok mr= addr= rkey= lkey= len=
 *       buffer: posix_memalign(4096), zeroed
 *   mrfree mr=ID -> ok
 *   put mr=ID off=N hex=HEX -> ok        get mr=ID off=N len=N -> ok hex=HEX
 *   qp type=rc|uc|ud [sq=64] [rq=64] [sge=4] [inline=0] [cqe=256] -> ok qp= qpn=
 *       a CQ of its own for SQ and RQ, sq_sig_all=0; an rc QP is an extended
 *       QP with ATOMIC WRITE when the device reports IB_UVERBS_DEVICE_ATOMIC_WRITE
 *       (and the provider makes one), else a plain QP
 *   connect qp=ID  rc/uc: dqpn= dgid= rq_psn= sq_psn= mtu=256..4096
 *       [timeout=14 retry_cnt=7 rnr_retry=7 min_rnr_timer=12 max_rd_atomic=1
 *        max_dest_rd_atomic=1 access=LIST (rc: lw,rw,rr,ra; uc: lw,rw) rtr_only=0]
 *       (uc takes none of the RNR/retry/rd_atomic/timeout ones);
 *       ud: qkey= [sq_psn=0]. RESET->INIT->RTR->RTS (rtr_only=1: stop at RTR);
 *       AV: is_global, dgid, sgid_index = the agent's, hop_limit 64, port 1
 *       -> ok state=rts|rtr (err names the transition that failed)
 *   modify qp=ID state=reset|err|rts -> ok; rts from RTR, taking [sq_psn=0]
 *       [timeout= retry_cnt= rnr_retry= max_rd_atomic= (defaults as connect)]
 *   state qp=ID -> ok state=reset|init|rtr|rts|sqd|sqe|err
 *   recv qp=ID mr=ID off=N len=N wr=N -> ok (len=0: no SGE, mr= optional)
 *   send qp=ID op=OP mr=ID off=N len=N wr=N [signaled=1] [solicited=0]
 *       [inline=0] [fence=0] [raddr= rkey=] [imm=] [inv=] [compare= swap=]
 *       [add=] [value=] [dgid= dqpn= qkey= (ud)] -> ok
 *       OP: send send_imm send_inv write write_imm read cas faa atomic_write
 *       (ud: send, send_imm). imm in host order, posted as htobe32(imm);
 *       inv: the rkey to invalidate. cas/faa/atomic_write: len=8, one SGE at
 *       mr+off (cas/faa: where the original value lands). atomic_write
 *       (ibv_wr_atomic_write): the 8 bytes at mr+off, or value=N as a
 *       host-order uint64 if given; "err atomic_write unsupported" without
 *       an extended QP. ud: an AH per dgid, cached on the QP. len=0: no SGE.
 *   poll qp=ID [n=1] [ms=2000] -> ok n=K wc=W1,W2,... (wc= empty when K=0)
 *       W = wr_id:status:opcode:byte_len:imm:wc_flags:src_qp (numbers; imm
 *       0x-hex: be32toh(imm_data) with IBV_WC_WITH_IMM, the invalidated
 *       rkey with IBV_WC_WITH_INV, else 0). On an error status only wr_id
 *       and status are defined (the rest is printed as the provider left it).
 *   counters -> ok NAME=VALUE ... (ports/1/hw_counters, sorted; none: ok)
 *   destroy qp=ID -> ok (the QP, its CQ and AHs)
 *   reset -> ok (every QP, CQ, AH and MR; ids count from 0 again)
 *   quit -> ok, then the agent closes the connection
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <endian.h>
#include <err.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_ARGS 32
#define MAX_POLL 4096
#define NELEM(a) (sizeof(a) / sizeof((a)[0]))
/* IB_UVERBS_DEVICE_ATOMIC_WRITE (kernel uapi; rdma-core 44 has no IBV_ name). */
#define DEVICE_ATOMIC_WRITE (1ULL << 40)

struct ah_ent { struct ah_ent *next; uint8_t gid[16]; struct ibv_ah *ah; };
struct qp_ent { struct ibv_qp *qp; struct ibv_qp_ex *qpx; struct ibv_cq *cq; struct ah_ent *ahs; };
struct mr_ent { struct ibv_mr *mr; void *buf; size_t len; };
struct args { int n; char *k[MAX_ARGS], *v[MAX_ARGS]; };

static const char *devname;
static struct ibv_context *ctx;
static struct ibv_pd *pd;
static int gid_index = -1, have_atomic_write;
static struct qp_ent *qps;      /* qp=ID indexes these, mr=ID those */
static struct mr_ent *mrs;
static int nqps, nmrs;
static FILE *out;               /* the reply's key=value part, while a command runs */
static char errmsg[512];
static const uint8_t v4mapped[12] = { [10] = 0xff, [11] = 0xff };

static int fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(errmsg, sizeof(errmsg), fmt, ap);
	va_end(ap);
	return -1;
}

/* A verbs call failed: r if positive (an errno value), else errno. */
static int fail_errno(const char *what, int r)
{
	int e = r > 0 ? r : (errno ? errno : EIO);

	return fail("%s: %s (%d)", what, strerror(e), e);
}

static void *grow(void *arr, int n, size_t sz)   /* room for entry n, zeroed */
{
	char *p = realloc(arr, (n + 1) * sz);

	if (!p)
		err(1, "realloc");
	memset(p + n * sz, 0, sz);
	return p;
}

/* ---- arguments ---- */

static const char *arg(struct args *a, const char *k)
{
	for (int i = 0; i < a->n; i++)
		if (!strcmp(a->k[i], k))
			return a->v[i];
	return NULL;
}

/* num: the number k= (decimal or 0x-hex, <= max); absent: def, or an error if req. */
static int num(struct args *a, const char *k, int req, uint64_t def, uint64_t max, uint64_t *v)
{
	const char *s = arg(a, k), *d;
	char *end;

	*v = def;
	if (!s)
		return req ? fail("missing argument %s=", k) : 0;
	d = s + (s[0] == '0' && (s[1] == 'x' || s[1] == 'X') ? 2 : 0);
	errno = 0;
	if (*d && strchr("0123456789abcdefABCDEF", *d))
		*v = strtoull(d, &end, d == s ? 10 : 16);
	if (!*d || !strchr("0123456789abcdefABCDEF", *d) || errno || *end || *v > max)
		return fail("invalid %s=%s (a number up to %llu)", k, s, (unsigned long long)max);
	return 0;
}

/* access=LIST, or def if absent. */
static int access_arg(struct args *a, const char *def, int *acc)
{
	static const char *names[] = { "lw", "rw", "rr", "ra", "mw" };
	static const int flags[] = { IBV_ACCESS_LOCAL_WRITE, IBV_ACCESS_REMOTE_WRITE,
				     IBV_ACCESS_REMOTE_READ, IBV_ACCESS_REMOTE_ATOMIC,
				     IBV_ACCESS_MW_BIND };
	const char *s = arg(a, "access") ?: def, *p = s;

	for (*acc = 0; *p; ) {
		size_t l = strcspn(p, ","), i;

		for (i = 0; i < NELEM(names) && !(l == 2 && !strncmp(p, names[i], 2)); i++)
			;
		if (i == NELEM(names))
			return fail("invalid access=%s (a list of lw,rw,rr,ra,mw)", s);
		*acc |= flags[i];
		p += l + (p[l] == ',');
	}
	return 0;
}

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 :
	       c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static int gid_arg(struct args *a, const char *k, uint8_t gid[16])
{
	const char *s = arg(a, k);

	if (!s)
		return fail("missing argument %s=", k);
	for (int i = 0; i < 16; i++) {
		if (strlen(s) != 32 || hexval(s[2 * i]) < 0 || hexval(s[2 * i + 1]) < 0)
			return fail("invalid %s=%s (32 hex digits)", k, s);
		gid[i] = hexval(s[2 * i]) << 4 | hexval(s[2 * i + 1]);
	}
	return 0;
}

static int qp_arg(struct args *a, struct qp_ent **q)
{
	uint64_t id;

	if (num(a, "qp", 1, 0, UINT32_MAX, &id))
		return -1;
	if (id >= (uint64_t)nqps || !qps[id].qp)
		return fail("no qp=%llu", (unsigned long long)id);
	*q = &qps[id];
	return 0;
}

static int mr_arg(struct args *a, struct mr_ent **m)
{
	uint64_t id;

	if (num(a, "mr", 1, 0, UINT32_MAX, &id))
		return -1;
	if (id >= (uint64_t)nmrs || !mrs[id].mr)
		return fail("no mr=%llu", (unsigned long long)id);
	*m = &mrs[id];
	return 0;
}

/* mr=ID off=N and len bytes there (off absent: 0); mr= may be absent if len is 0. */
static int mr_range(struct args *a, uint64_t len, struct mr_ent **m, uint64_t *off)
{
	*m = NULL;
	if (num(a, "off", 0, 0, UINT64_MAX, off))
		return -1;
	if (!len && !arg(a, "mr"))
		return *off ? fail("off= without mr=") : 0;
	if (mr_arg(a, m))
		return -1;
	if (*off > (*m)->len || len > (*m)->len - *off)
		return fail("off=%llu len=%llu out of mr=%s (len %zu)", (unsigned long long)*off,
			    (unsigned long long)len, arg(a, "mr"), (*m)->len);
	return 0;
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

static int cmd_info(struct args *a)
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
	return 0;
}

static int cmd_mr(struct args *a)
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

static int cmd_mrfree(struct args *a)
{
	struct mr_ent *m;

	return mr_arg(a, &m) || free_mr(m);
}

static int cmd_put(struct args *a)
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

static int cmd_get(struct args *a)
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

static int cmd_qp(struct args *a)
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

static int cmd_connect(struct args *a)
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

static int cmd_modify(struct args *a)
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

static int cmd_state(struct args *a)
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

static int cmd_recv(struct args *a)
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

static int cmd_send(struct args *a)
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

static int cmd_poll(struct args *a)
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

static int cmd_counters(struct args *a)
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

static int cmd_destroy(struct args *a)
{
	struct qp_ent *q;

	return qp_arg(a, &q) || free_qp(q);
}

static int cmd_reset(struct args *a)
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

static const struct cmd {
	const char *name;
	int (*fn)(struct args *);
	const char *keys;       /* the arguments it takes, each between spaces */
} cmds[] = {
	{ "info", cmd_info, " " },
	{ "mr", cmd_mr, " len access " },
	{ "mrfree", cmd_mrfree, " mr " },
	{ "put", cmd_put, " mr off hex " },
	{ "get", cmd_get, " mr off len " },
	{ "qp", cmd_qp, " type sq rq sge inline cqe " },
	{ "connect", cmd_connect, " qp dqpn dgid rq_psn sq_psn mtu timeout retry_cnt rnr_retry "
	  "min_rnr_timer max_rd_atomic max_dest_rd_atomic access rtr_only qkey " },
	{ "modify", cmd_modify, " qp state sq_psn timeout retry_cnt rnr_retry max_rd_atomic " },
	{ "state", cmd_state, " qp " },
	{ "recv", cmd_recv, " qp mr off len wr " },
	{ "send", cmd_send, " qp op mr off len wr signaled solicited inline fence raddr rkey imm "
	  "inv compare swap add value dgid dqpn qkey " },
	{ "poll", cmd_poll, " qp n ms " },
	{ "counters", cmd_counters, " " },
	{ "destroy", cmd_destroy, " qp " },
	{ "reset", cmd_reset, " " },
	{ "quit", NULL, " " },   /* run() answers it */
};

/* Run one command line and write its reply line to w. 1: the client quits. */
static int run(char *line, FILE *w)
{
	const struct cmd *c = NULL;
	struct args a = { 0 };
	char *save, *verb, *t, *body = NULL, key[64];
	size_t bodylen;
	int r = -1;

	if (!(out = open_memstream(&body, &bodylen)))
		err(1, "open_memstream");
	if (!(verb = strtok_r(line, " \t\r\n", &save))) {
		fail("empty command");
		goto reply;
	}
	for (unsigned int i = 0; i < NELEM(cmds); i++)
		if (!strcmp(verb, cmds[i].name))
			c = &cmds[i];
	if (!c) {
		fail("unknown command '%.100s'", verb);
		goto reply;
	}
	while ((t = strtok_r(NULL, " \t\r\n", &save))) {
		char *eq = strchr(t, '=');

		if (!eq || eq == t) {
			fail("%s: '%.100s' is not key=value", verb, t);
			goto reply;
		}
		*eq = 0;
		snprintf(key, sizeof(key), " %s ", t);
		if (!strstr(c->keys, key) || arg(&a, t) || a.n == MAX_ARGS) {
			fail("%s: %s argument %.60s=", verb, arg(&a, t) ? "repeated" : "unknown", t);
			goto reply;
		}
		a.k[a.n] = t;
		a.v[a.n++] = eq + 1;
	}
	r = c->fn ? c->fn(&a) : 0;
reply:
	fclose(out);
	if (r)
		fprintf(w, "err %s\n", errmsg);
	else
		fprintf(w, "ok%s\n", body);
	free(body);
	return !r && !c->fn;
}

/* Serve one client until it closes or quits. */
static void serve(int fd)
{
	FILE *in = fdopen(fd, "r"), *w = fdopen(dup(fd), "w");
	char *line = NULL;
	size_t cap = 0;

	if (!in || !w)
		err(1, "fdopen");
	while (getline(&line, &cap, in) > 0) {
		int quit = run(line, w);

		if (fflush(w) || quit)
			break;
	}
	free(line);
	fclose(in);
	fclose(w);
}

/* The first RoCE v2 GID of port 1 that is IPv4-mapped, or -1. */
static int pick_gid(void)
{
	struct ibv_port_attr pa;
	char path[300], type[32];

	if (ibv_query_port(ctx, 1, &pa))
		return -1;
	for (int i = 0; i < pa.gid_tbl_len; i++) {
		union ibv_gid g;
		FILE *f;
		int v2;

		snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/1/gid_attrs/types/%d",
			 devname, i);
		if (!(f = fopen(path, "r")))
			continue;
		v2 = fgets(type, sizeof(type), f) && !strcmp(type, "RoCE v2\n");
		fclose(f);
		if (v2 && !ibv_query_gid(ctx, 1, i, &g) && !memcmp(g.raw, v4mapped, 12))
			return i;
	}
	return -1;
}

int main(int argc, char **argv)
{
	const char *port = "18600", *addr = "0.0.0.0";
	struct addrinfo hints = { .ai_flags = AI_PASSIVE | AI_NUMERICHOST | AI_NUMERICSERV,
				  .ai_socktype = SOCK_STREAM }, *ai;
	struct ibv_device_attr_ex dx = { 0 };
	struct ibv_device **list;
	int o, ls, one = 1;
	char *end;

	static const char usage[] =
		"usage: mr-agent -d DEV [-g GID_INDEX] [-p TCP_PORT (18600)] [-l LISTEN_ADDR (0.0.0.0)]";

	while ((o = getopt(argc, argv, "d:g:p:l:")) != -1) {
		switch (o) {
		case 'd':
			devname = optarg;
			break;
		case 'g':
			gid_index = strtol(optarg, &end, 10);
			if (gid_index < 0 || *end || !*optarg)
				errx(2, "-g %s: a GID index", optarg);
			break;
		case 'p':
			port = optarg;
			break;
		case 'l':
			addr = optarg;
			break;
		default:
			errx(2, "%s", usage);
		}
	}
	if (!devname || optind != argc)
		errx(2, "%s", usage);
	signal(SIGPIPE, SIG_IGN);
	if (!(list = ibv_get_device_list(NULL)))
		err(1, "ibv_get_device_list (no RDMA subsystem or device on this host?)");
	for (int i = 0; list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), devname) && !(ctx = ibv_open_device(list[i])))
			err(1, "ibv_open_device %s", devname);
	ibv_free_device_list(list);
	if (!ctx)
		errx(1, "%s: no such RDMA device", devname);
	if (!(pd = ibv_alloc_pd(ctx)))
		err(1, "ibv_alloc_pd");
	for (int i = 0; gid_index < 0 && i < 10; i++)   /* a new device's GIDs may come late */
		if ((gid_index = pick_gid()) < 0)
			sleep(1);
	if (gid_index < 0)
		errx(1, "%s: no IPv4-mapped RoCE v2 GID on port 1 (give one with -g)", devname);
	have_atomic_write = !ibv_query_device_ex(ctx, NULL, &dx) &&
			    (dx.device_cap_flags_ex & DEVICE_ATOMIC_WRITE);

	if ((o = getaddrinfo(addr, port, &hints, &ai)))
		errx(2, "listen address %s port %s: %s", addr, port, gai_strerror(o));
	if ((ls = socket(ai->ai_family, SOCK_STREAM, 0)) < 0 ||
	    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(ls, ai->ai_addr, ai->ai_addrlen) || listen(ls, 4))
		err(1, "listen on %s:%s", addr, port);
	freeaddrinfo(ai);
	printf("mr-agent: listening on %s:%s dev %s gid_index %d\n", addr, port, devname, gid_index);
	fflush(stdout);
	for (;;) {
		int fd = accept(ls, NULL, NULL);

		if (fd < 0 && errno != EINTR && errno != ECONNABORTED)
			err(1, "accept");
		if (fd < 0)
			continue;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		serve(fd);   /* closes fd */
	}
}
