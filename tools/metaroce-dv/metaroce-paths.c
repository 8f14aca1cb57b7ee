// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * metaroce-paths: carries checked messages over one RC QP between two hosts
 * and, through libmetaroce-dv, shows its connection's paths as they carry
 * them and changes how many paths it uses on the way. The worked example of
 * Documentation/extension.rst, and the test of the extension API.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "metaroce_dv.h"

static const char usage_text[] =
"usage: metaroce-paths -d DEV [options] [PEER]\n"
"\n"
"Without PEER it serves (receives and checks); with PEER (an IPv4 address\n"
"or name) it is the client (sends). One RC QP each, connected over a TCP\n"
"side channel (QPN, PSN, GID); the client sends MSGS SENDs of SIZE bytes\n"
"whose bytes encode their number, the server checks every byte and the\n"
"order. Both sides must be given the same -n and -s.\n"
"\n"
"  -d DEV        RDMA device (e.g. mr0)\n"
"  -g GIDIDX     GID index (default 1)\n"
"  -p PORT       TCP port of the side channel (default 18700)\n"
"  -n MSGS       messages (default 4096)\n"
"  -s SIZE       bytes per message (default 16384)\n"
"  -P STEPS      client: change the path count on the way, e.g.\n"
"                '0.25:2,0.5:16,0.75:4' = 2 paths once a quarter of the\n"
"                messages were posted, 16 at half, 4 at three quarters\n"
"  -i N          print the connection and its paths every N completions\n"
"                (default MSGS/4; 0: at the start and the end only)\n"
"  -c CLASS      pin the QP to stream class CLASS (0-7) before it connects\n"
"                (both sides must give the same; sharing devices keep one\n"
"                connection per class)\n"
"  -e            client: check the extension API's error answers too\n"
"                (query before RTR, 0 and 65 paths, class 8: EINVAL)\n"
"  -h            this help\n"
"\n"
"Output: '# conn ...' and '# path ...' lines (every field of\n"
"metaroce_conn_info and metaroce_path_info), TAP lines for the checks\n"
"('ok N - ...', 'not ok N - ...') and a summary\n"
"  # metaroce-paths: role R msgs N bytes B errors E corrupt C sets S secs T\n"
"Exit status 0 only if every check passed; 2: setup failed; 3: DEV is not\n"
"a metaroce device (EOPNOTSUPP from the extension API).\n";

static int tap_n, tap_failed;

static void check(int ok, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	printf("%sok %d - ", ok ? "" : "not ", ++tap_n);
	vprintf(fmt, ap);
	printf("\n");
	va_end(ap);
	fflush(stdout);
	tap_failed += !ok;
}

static void die(int code, const char *what)
{
	fprintf(stderr, "metaroce-paths: %s: %s\n", what, strerror(errno));
	exit(code);
}

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

/* Byte j of message i. */
static uint8_t pattern(uint64_t i, uint64_t j)
{
	return (uint8_t)(i * 131 + j * 7 + (j >> 8) + 1);
}

static void fill(uint8_t *b, size_t size, uint64_t i)
{
	memcpy(b, &i, size < 8 ? size : 8);
	for (size_t j = 8; j < size; j++)
		b[j] = pattern(i, j);
}

/* Whether b holds message i. */
static int holds(const uint8_t *b, size_t size, uint64_t i)
{
	uint64_t got = 0;

	memcpy(&got, b, size < 8 ? size : 8);
	if (size >= 8 && got != i)
		return 0;
	for (size_t j = 8; j < size; j++)
		if (b[j] != pattern(i, j))
			return 0;
	return 1;
}

/* Prints the QP's connection and paths; returns the query's result. */
static int show(struct ibv_qp *qp, const char *when, struct metaroce_conn_info *c,
		struct metaroce_path_info *p)
{
	int n = metaroce_dv_query_paths(qp, c, p, METAROCE_MAX_PATHS);

	if (n < 0)
		return n;
	printf("# conn %s: flags 0x%x members %u stream_class %u paths %u max_paths %u qwnd %u inflight %u "
	       "rate_hint %u peer_hint %u min_rtt_ns %u pacing_rate %llu data_tx %u retx %u "
	       "timeouts %u moves %u local_ack_timeouts %u\n",
	       when, c->flags, c->members, c->stream_class, c->paths, c->max_paths, c->qwnd, c->inflight,
	       c->rate_hint, c->peer_hint, c->min_rtt_ns, (unsigned long long)c->pacing_rate,
	       c->data_tx, c->retx, c->timeouts, c->moves, c->local_ack_timeouts);
	for (int i = 0; i < n; i++)
		printf("# path %s: %d sport %u state %s pwnd %u srtt_ns %u inflight %u sent %u "
		       "ce %u retx %u moves %u timeouts %u plane %u\n",
		       when, i, p[i].src_port, metaroce_dv_path_state_str(p[i].state), p[i].pwnd,
		       p[i].srtt_ns, p[i].inflight, p[i].sent, p[i].ce, p[i].retx, p[i].moves,
		       p[i].timeouts, p[i].plane);
	fflush(stdout);
	return n;
}

/* What the two sides exchange over TCP. */
struct peer_info {
	uint32_t qpn, psn;
	union ibv_gid gid;
};

static int side_channel(const char *host, const char *port)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM,
				  .ai_flags = host ? 0 : AI_PASSIVE };
	struct addrinfo *ai;
	int s, one = 1;

	if (getaddrinfo(host, port, &hints, &ai))
		die(2, "getaddrinfo");
	s = socket(ai->ai_family, ai->ai_socktype, 0);
	if (s < 0)
		die(2, "socket");
	if (host) {
		for (int t = 0; connect(s, ai->ai_addr, ai->ai_addrlen); t++) {
			if (t > 300)
				die(2, "connect");
			usleep(100000);
		}
	} else {
		int l;

		setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(s, ai->ai_addr, ai->ai_addrlen) || listen(s, 1))
			die(2, "bind/listen");
		l = accept(s, NULL, NULL);
		if (l < 0)
			die(2, "accept");
		close(s);
		s = l;
	}
	freeaddrinfo(ai);
	return s;
}

static void xfer(int s, void *out, void *in, size_t len)
{
	if (write(s, out, len) != (ssize_t)len)
		die(2, "side channel write");
	for (size_t got = 0; got < len;) {
		ssize_t r = read(s, (char *)in + got, len - got);

		if (r <= 0)
			die(2, "side channel read");
		got += r;
	}
}

struct step {
	double at;
	unsigned int paths;
};

int main(int argc, char **argv)
{
	const char *devname = NULL, *port = "18700", *steps_arg = NULL;
	unsigned long msgs = 4096, size = 16384, every = (unsigned long)-1;
	int gidx = 1, errors_check = 0, opt, cls = -1;
	struct step steps[16];
	int nsteps = 0;

	while ((opt = getopt(argc, argv, "d:g:p:n:s:P:i:c:eh")) != -1) {
		switch (opt) {
		case 'd': devname = optarg; break;
		case 'g': gidx = atoi(optarg); break;
		case 'p': port = optarg; break;
		case 'n': msgs = strtoul(optarg, NULL, 0); break;
		case 's': size = strtoul(optarg, NULL, 0); break;
		case 'P': steps_arg = optarg; break;
		case 'i': every = strtoul(optarg, NULL, 0); break;
		case 'e': errors_check = 1; break;
		case 'c': cls = atoi(optarg); break;
		case 'h': fputs(usage_text, stdout); return 0;
		default: fputs(usage_text, stderr); return 2;
		}
	}
	const char *peer = optind < argc ? argv[optind] : NULL;
	if (!devname || !msgs || size < 8 || size > (1 << 24) || optind + 1 < argc) {
		fputs(usage_text, stderr);
		return 2;
	}
	if (every == (unsigned long)-1)
		every = msgs / 4 ? msgs / 4 : 1;
	for (char *s = steps_arg ? strdup(steps_arg) : NULL, *tok, *save = NULL;
	     s && (tok = strtok_r(s, ",", &save)); s = NULL) {
		do {
			double at;
			unsigned int n;

			if (nsteps == 16 || sscanf(tok, "%lf:%u", &at, &n) != 2 || at < 0 || at > 1) {
				fprintf(stderr, "metaroce-paths: bad step '%s' (FRACTION:PATHS)\n", tok);
				return 2;
			}
			steps[nsteps++] = (struct step){ at, n };
		} while ((tok = strtok_r(NULL, ",", &save)));
	}

	/* Device, PD, MR, CQ, QP. */
	int ndev;
	struct ibv_device **list = ibv_get_device_list(&ndev), *dev = NULL;
	for (int i = 0; list && i < ndev; i++)
		if (!strcmp(ibv_get_device_name(list[i]), devname))
			dev = list[i];
	if (!dev) {
		fprintf(stderr, "metaroce-paths: no RDMA device %s\n", devname);
		return 2;
	}
	struct ibv_context *ctx = ibv_open_device(dev);
	if (!ctx)
		die(2, "ibv_open_device");
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	const unsigned int depth = 64;
	uint8_t *buf = calloc(depth, size);
	struct ibv_mr *mr = pd && buf ? ibv_reg_mr(pd, buf, depth * size, IBV_ACCESS_LOCAL_WRITE) : NULL;
	struct ibv_cq *cq = ibv_create_cq(ctx, 2 * depth, NULL, NULL, 0);
	if (!mr || !cq)
		die(2, "PD/MR/CQ");
	struct ibv_qp_init_attr ia = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = depth, .max_recv_wr = depth, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);
	if (!qp)
		die(2, "ibv_create_qp");
	struct metaroce_conn_info ci;
	struct metaroce_path_info pi[METAROCE_MAX_PATHS];

	/* Is it ours? A QP in RESET has no connection: EINVAL, or EOPNOTSUPP
	 * if the device is not metaroce. */
	int r = metaroce_dv_query_paths(qp, &ci, pi, METAROCE_MAX_PATHS);
	if (r < 0 && errno == EOPNOTSUPP) {
		printf("# %s is not a metaroce device: the extension API answers EOPNOTSUPP\n", devname);
		return 3;
	}
	if (errors_check) {
		check(r < 0 && errno == EINVAL, "query before RTR: EINVAL (got %d, %s)", r,
		      r < 0 ? strerror(errno) : "success");
		r = metaroce_dv_set_paths(qp, 4);
		check(r < 0 && errno == EINVAL, "set paths before RTR: EINVAL (got %d, %s)", r,
		      r < 0 ? strerror(errno) : "success");
		r = metaroce_dv_set_stream_class(qp, METAROCE_MAX_STREAM_CLASS + 1);
		check(r < 0 && errno == EINVAL, "stream class %d: EINVAL", METAROCE_MAX_STREAM_CLASS + 1);
	}
	if (cls >= 0) {
		r = metaroce_dv_set_stream_class(qp, cls);
		check(r == 0, "stream class %d pinned (%s)", cls, r ? strerror(errno) : "ok");
	}

	struct ibv_port_attr pa;
	struct peer_info me = { .qpn = qp->qp_num, .psn = (uint32_t)getpid() & 0xffffff }, them;
	if (ibv_query_port(ctx, 1, &pa) || ibv_query_gid(ctx, 1, gidx, &me.gid))
		die(2, "ibv_query_port/gid");
	int sock = side_channel(peer, port);
	xfer(sock, &me, &them, sizeof(me));

	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = IBV_ACCESS_LOCAL_WRITE };
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_ACCESS_FLAGS))
		die(2, "modify INIT");
	/* The server posts its receives before RTR. */
	uint64_t posted = 0, done = 0, corrupt = 0, errs = 0;
	for (; !peer && posted < depth && posted < msgs; posted++) {
		struct ibv_sge sge = { (uintptr_t)(buf + (posted % depth) * size), size, mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = posted, .sg_list = &sge, .num_sge = 1 }, *bad;

		if (ibv_post_recv(qp, &wr, &bad))
			die(2, "ibv_post_recv");
	}
	a = (struct ibv_qp_attr){
		.qp_state = IBV_QPS_RTR, .path_mtu = pa.active_mtu, .dest_qp_num = them.qpn,
		.rq_psn = them.psn, .max_dest_rd_atomic = 1, .min_rnr_timer = 12,
		.ah_attr = { .is_global = 1, .port_num = 1,
			     .grh = { .dgid = them.gid, .sgid_index = gidx, .hop_limit = 64 } },
	};
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		die(2, "modify RTR");
	a = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTS, .sq_psn = me.psn, .timeout = 14,
				  .retry_cnt = 7, .rnr_retry = 7, .max_rd_atomic = 1 };
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
			  IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC))
		die(2, "modify RTS");
	char go = 1, back;
	xfer(sock, &go, &back, 1);

	r = show(qp, "start", &ci, pi);
	check(r >= 0, "%s: query at RTS (%s)", devname, r < 0 ? strerror(errno) : "ok");
	if (r >= 0 && cls >= 0)
		check(ci.stream_class == (unsigned)cls, "the connection is of stream class %u", ci.stream_class);
	if (errors_check) {
		r = metaroce_dv_set_stream_class(qp, 1);
		check(r < 0 && errno == EINVAL, "stream class after RTS: EINVAL");
	}
	if (r >= 0)
		check(ci.paths >= 1 && ci.paths <= ci.max_paths && (unsigned)r == ci.paths &&
		      ci.members >= 1,
		      "conn: paths %u of at most %u, %d records, %u member(s)%s", ci.paths,
		      ci.max_paths, r, ci.members, ci.flags & METAROCE_CONN_SHARED ? ", shared" : "");
	if (errors_check && peer) {
		unsigned int before = ci.paths;

		r = metaroce_dv_set_paths(qp, 0);
		check(r < 0 && errno == EINVAL, "set 0 paths: EINVAL");
		r = metaroce_dv_set_paths(qp, ci.max_paths + 1);
		check(r < 0 && errno == EINVAL, "set %u paths: EINVAL", ci.max_paths + 1);
		r = metaroce_dv_query_paths(qp, &ci, pi, METAROCE_MAX_PATHS);
		check(r >= 0 && ci.paths == before, "refused sets change nothing (paths %u)", ci.paths);
	}

	/* Traffic. */
	double t0 = now_s(), last = t0;
	int next_step = 0, sets = 0;
	unsigned long shown = 0;
	while (done < msgs) {
		/* Client: path steps due at this much posted, then more sends. */
		while (peer && next_step < nsteps && posted >= steps[next_step].at * msgs) {
			unsigned int n = steps[next_step++].paths;

			r = metaroce_dv_set_paths(qp, n);
			check(r == 0, "set %u paths at message %" PRIu64 " (%s)", n, posted,
			      r ? strerror(errno) : "ok");
			r = metaroce_dv_query_paths(qp, &ci, pi, METAROCE_MAX_PATHS);
			if (r >= 0 && (ci.flags & METAROCE_CONN_SHARED) && ci.members > 1)
				/* Other QPs' asks count too: the largest wins. */
				check(ci.paths >= n && (unsigned)r == ci.paths,
				      "query after the set: paths %u >= %u (shared by %u QPs), %d records",
				      ci.paths, n, ci.members, r);
			else
				check(r >= 0 && ci.paths == n && (unsigned)r == n,
				      "query after the set: paths %u, %d records", ci.paths, r);
			sets++;
		}
		while (peer && posted < msgs && posted - done < depth) {
			uint8_t *b = buf + (posted % depth) * size;
			struct ibv_sge sge = { (uintptr_t)b, size, mr->lkey };
			struct ibv_send_wr wr = { .wr_id = posted, .sg_list = &sge, .num_sge = 1,
						  .opcode = IBV_WR_SEND,
						  .send_flags = IBV_SEND_SIGNALED }, *bad;

			fill(b, size, posted);
			if (ibv_post_send(qp, &wr, &bad))
				die(2, "ibv_post_send");
			posted++;
			if (next_step < nsteps && posted >= steps[next_step].at * msgs)
				break;
		}
		struct ibv_wc wc[16];
		int n = ibv_poll_cq(cq, 16, wc);
		if (n < 0)
			die(2, "ibv_poll_cq");
		for (int k = 0; k < n; k++) {
			if (wc[k].status != IBV_WC_SUCCESS) {
				if (errs++ < 5)
					printf("# completion of %" PRIu64 ": %s\n", wc[k].wr_id,
					       ibv_wc_status_str(wc[k].status));
				done++;
				continue;
			}
			if (!peer) {
				uint64_t i = wc[k].wr_id;
				uint8_t *b = buf + (i % depth) * size;

				if (wc[k].wr_id != done || wc[k].byte_len != size || !holds(b, size, i)) {
					if (corrupt++ < 5)
						printf("# message %" PRIu64 " (completion %" PRIu64
						       ", %u bytes) corrupt or out of order\n",
						       i, done, wc[k].byte_len);
				}
				if (posted < msgs) {
					struct ibv_sge sge = { (uintptr_t)b, size, mr->lkey };
					struct ibv_recv_wr wr = { .wr_id = posted, .sg_list = &sge,
								  .num_sge = 1 }, *bad;

					if (ibv_post_recv(qp, &wr, &bad))
						die(2, "ibv_post_recv");
					posted++;
				}
			}
			done++;
		}
		if (every && done / every > shown && done < msgs) {
			char when[32];

			shown = done / every;
			snprintf(when, sizeof(when), "at %" PRIu64, done);
			show(qp, when, &ci, pi);
		}
		if (n == 0 && now_s() - last > 60) {
			printf("# no completion for 60 s: %" PRIu64 " of %lu\n", done, msgs);
			break;
		}
		if (n > 0)
			last = now_s();
	}
	double secs = now_s() - t0;
	r = show(qp, "end", &ci, pi);
	check(r >= 0, "query at the end");
	check(done == msgs && errs == 0, "%s: %" PRIu64 " of %lu messages completed, %" PRIu64
	      " errors", peer ? "client" : "server", done, msgs, errs);
	if (!peer)
		check(corrupt == 0, "server: every byte in order (%" PRIu64 " corrupt)", corrupt);
	/* Neither side leaves before the other finished. */
	char c1 = tap_failed ? 1 : 0, c2 = 0;
	xfer(sock, &c1, &c2, 1);
	check(c2 == 0, "the peer's checks passed");
	printf("# metaroce-paths: role %s msgs %lu bytes %llu errors %" PRIu64 " corrupt %" PRIu64
	       " sets %d secs %.3f\n", peer ? "client" : "server", msgs,
	       (unsigned long long)msgs * size, errs, corrupt, sets, secs);
	printf("1..%d\n", tap_n);
	ibv_destroy_qp(qp);
	ibv_destroy_cq(cq);
	ibv_dereg_mr(mr);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return tap_failed ? 1 : 0;
}
