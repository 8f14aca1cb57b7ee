/* SPDX-License-Identifier: GPL-2.0 */
/*
 * mr-agent's shared declarations: mr-agent.c (the protocol: listening, line
 * reading, arguments, replies, the command table) and verbs.c (the commands).
 */
#ifndef MR_AGENT_H
#define MR_AGENT_H

#include <infiniband/verbs.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define MAX_ARGS 32
#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

struct ah_ent { struct ah_ent *next; uint8_t gid[16]; struct ibv_ah *ah; };
struct qp_ent { struct ibv_qp *qp; struct ibv_qp_ex *qpx; struct ibv_cq *cq; struct ah_ent *ahs; };
struct mr_ent { struct ibv_mr *mr; void *buf; size_t len; };
struct args { int n; char *k[MAX_ARGS], *v[MAX_ARGS]; };

/* mr-agent.c: the agent's state */
extern const char *devname;
extern struct ibv_context *ctx;
extern struct ibv_pd *pd;
extern int gid_index, have_atomic_write;
extern struct qp_ent *qps;      /* qp=ID indexes these, mr=ID those */
extern struct mr_ent *mrs;
extern int nqps, nmrs;
extern FILE *out;               /* the reply's key=value part, while a command runs */
extern char errmsg[512];
extern const uint8_t v4mapped[12];

/* mr-agent.c: errors (-1, with errmsg set) and arguments */
int fail(const char *fmt, ...);
int fail_errno(const char *what, int r);
const char *arg(struct args *a, const char *k);
int num(struct args *a, const char *k, int req, uint64_t def, uint64_t max, uint64_t *v);
int access_arg(struct args *a, const char *def, int *acc);
int hexval(char c);
int gid_arg(struct args *a, const char *k, uint8_t gid[16]);
int qp_arg(struct args *a, struct qp_ent **q);
int mr_arg(struct args *a, struct mr_ent **m);
int mr_range(struct args *a, uint64_t len, struct mr_ent **m, uint64_t *off);

/* verbs.c: the commands: 0 with the reply's key=value part in out, or -1 with errmsg */
int cmd_info(struct args *a);
int cmd_mr(struct args *a);
int cmd_mrfree(struct args *a);
int cmd_put(struct args *a);
int cmd_get(struct args *a);
int cmd_qp(struct args *a);
int cmd_connect(struct args *a);
int cmd_modify(struct args *a);
int cmd_state(struct args *a);
int cmd_recv(struct args *a);
int cmd_send(struct args *a);
int cmd_poll(struct args *a);
int cmd_counters(struct args *a);
int cmd_destroy(struct args *a);
int cmd_reset(struct args *a);

#endif
