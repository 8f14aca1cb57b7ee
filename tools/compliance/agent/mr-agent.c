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
 * This file is the protocol; verbs.c does each command's verbs work, agent.h
 * has what the two share.
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
 *   info -> ok dev= gid= gid_index= active_mtu=BYTES max_mtu=BYTES ip= link_mtu=BYTES
 *           (link_mtu: the MTU of the GID's netdev, 0 if unknown)
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
#include <err.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent.h"

/* IB_UVERBS_DEVICE_ATOMIC_WRITE (kernel uapi; rdma-core 44 has no IBV_ name). */
#define DEVICE_ATOMIC_WRITE (1ULL << 40)

const char *devname;
struct ibv_context *ctx;
struct ibv_pd *pd;
int gid_index = -1, have_atomic_write;
struct qp_ent *qps;      /* qp=ID indexes these, mr=ID those */
struct mr_ent *mrs;
int nqps, nmrs;
FILE *out;               /* the reply's key=value part, while a command runs */
char errmsg[512];
const uint8_t v4mapped[12] = { [10] = 0xff, [11] = 0xff };

int fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(errmsg, sizeof(errmsg), fmt, ap);
	va_end(ap);
	return -1;
}

/* A verbs call failed: r if positive (an errno value), else errno. */
int fail_errno(const char *what, int r)
{
	int e = r > 0 ? r : (errno ? errno : EIO);

	return fail("%s: %s (%d)", what, strerror(e), e);
}

/* ---- arguments ---- */

const char *arg(struct args *a, const char *k)
{
	for (int i = 0; i < a->n; i++)
		if (!strcmp(a->k[i], k))
			return a->v[i];
	return NULL;
}

/* num: the number k= (decimal or 0x-hex, <= max); absent: def, or an error if req. */
int num(struct args *a, const char *k, int req, uint64_t def, uint64_t max, uint64_t *v)
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
int access_arg(struct args *a, const char *def, int *acc)
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

int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 :
	       c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

int gid_arg(struct args *a, const char *k, uint8_t gid[16])
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

int qp_arg(struct args *a, struct qp_ent **q)
{
	uint64_t id;

	if (num(a, "qp", 1, 0, UINT32_MAX, &id))
		return -1;
	if (id >= (uint64_t)nqps || !qps[id].qp)
		return fail("no qp=%llu", (unsigned long long)id);
	*q = &qps[id];
	return 0;
}

int mr_arg(struct args *a, struct mr_ent **m)
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
int mr_range(struct args *a, uint64_t len, struct mr_ent **m, uint64_t *off)
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
