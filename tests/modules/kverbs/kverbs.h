/* SPDX-License-Identifier: GPL-2.0 */
/*
 * kverbs_test's shared declarations: the module's parameters, the state its
 * tests share (the device, PD, QP pairs, buffers: `t`), and the helpers
 * every test uses. The module's files, one concern each:
 *
 *   kverbs_main.c    parameters, setup and teardown, the test order (init)
 *   kverbs_lib.c     TAP reporting, completions, buffers, QP connection
 *   kverbs_data.c    SEND, WRITE, READ, atomics, unsignaled WRs on A/B
 *   kverbs_mr.c      fast registration, remote access errors, huge
 *                    ib_alloc_mr, inline SEND_WITH_INV (E/F)
 *   kverbs_queues.c  CQ events, post errors, SRQ, post/ERR race, full SQ
 *                    and flush, ib_drain_qp, CQ overrun (G/H)
 *   kverbs_ext.c     metaroce's extension API: paths, stream classes, planes
 *
 * The tests run one at a time, at insmod (kverbs_main.c): nothing here is
 * locked.
 */
#ifndef KVERBS_H
#define KVERBS_H

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/module.h>
#include <linux/slab.h>
#include <linux/delay.h>
#include <linux/jiffies.h>
#include <linux/kthread.h>
#include <linux/completion.h>
#include <linux/wait.h>
#include <linux/etherdevice.h>
#include <linux/scatterlist.h>
#include <net/ipv6.h>
#include <rdma/ib_verbs.h>
#include <rdma/ib_cache.h>
#include "metaroce-abi.h"

/* Module parameters (kverbs_main.c). */
extern char *dev;
extern int timeout_ms, corrupt, access_errors, dma_user_va, last_wqe;
extern uint alloc_mr_sg;
extern int passed, failed, finished;

#define BUFSZ (96 * 1024)
#define GAP 64
#define GUARD 0xaa
#define CQE 1024
#define NPSN 0x1000

struct side {
	const char *name;
	struct ib_cq *cq;
	struct ib_qp *qp;
	u8 *tx, *rx;
	u64 tx_dma, rx_dma;
	bool tx_mapped, rx_mapped;
	bool raw_cq; /* cq from ib_create_cq (else ib_alloc_cq) */
	u32 sq_psn;
};

/* What the tests share (kverbs_main.c). */
struct kverbs_state {
	struct ib_device *ibdev;
	const struct ib_gid_attr *gid_attr;
	union ib_gid gid;
	int sgid_index;
	u8 mac[ETH_ALEN];
	struct ib_pd *pd;
	struct ib_mr *atomic_mr;
	struct side a, b, c, d, e, f, g, h;
	struct ib_srq *srq;
	struct ib_cq *ovf_cq;
	atomic_t cq_err_events, ovf_other_events;
	u8 *exp, *img;
	struct ib_qp_cap cap;
	atomic_t events, stray_events, last_wqe_events;
	wait_queue_head_t evq;
	bool desync, stuck;
	u8 seed;
	u64 wrid;
	u32 psn_base;
};

extern struct kverbs_state t;

/* --- kverbs_lib.c --- */

/* TAP: the test number, the payload comparisons made (corrupt=N). */
extern int tn, ncmp;
/* Why the test being run fails (its first reason); returns false. */
__printf(1, 2) bool fail_why(const char *fmt, ...);
/* One TAP line, ok or not ok (with fail_why's reason); returns ok. */
__printf(2, 3) bool report(bool ok, const char *fmt, ...);
bool same(const u8 *want, const u8 *got, size_t n, const char *what);

int poll_one(struct ib_cq *cq, struct ib_wc *wc, int ms);
bool expect_wc(struct side *s, u64 wr_id, enum ib_wc_status st, int opcode,
	       struct ib_wc *out);
bool cq_empty(struct side *s, int ms);
void comp_handler(struct ib_cq *cq, void *ctx);
void cq_event(struct ib_event *ev, void *ctx);

void pattern(u8 *p, u32 len);
u32 layout(struct ib_sge *s, int n, u64 dma, u32 off, u32 len, u32 extra);
void scatter(u8 *base, u64 dma, const struct ib_sge *s, int n, const u8 *src, u32 len);

int to_init(struct ib_qp *qp);
int to_rtr(struct side *s, struct side *peer);
int to_rts_t(struct side *s, u8 timeout, u8 retry_cnt);
int to_rts(struct side *s);
int set_state(struct ib_qp *qp, enum ib_qp_state st);
void new_psns(void);
int connect_rtr_rts(void);
bool reconnect(void);

struct ib_qp *make_qp(struct ib_cq *cq, struct ib_qp_cap *cap, struct ib_srq *srq,
		      u32 inl);
void side_free(struct side *s);
bool pair_connect(struct side *x, struct side *y, u32 inl, u8 y_timeout, u8 y_retry,
		  struct ib_qp_cap *xcap);
enum ib_qp_state query_state(struct ib_qp *qp);

/* --- the tests, in the order kverbs_main.c runs them --- */

/* kverbs_data.c */
void t_send(const char *name, u32 len, int ns, int nr, bool imm, bool inl);
void t_write(const char *name, u32 len, int ns, bool imm, bool inl);
void t_read(const char *name, u32 len, int nr);
void t_atomic(const char *name, enum ib_wr_opcode op, u64 before, u64 cmp_add,
	      u64 swap, u64 want_after);
void t_unsignaled(void);
/* kverbs_ext.c */
void t_ext(void);
void t_planes(void);
/* kverbs_queues.c */
void t_events(void);
void t_errors(void);
/* kverbs_mr.c */
void t_fastreg(void);
/* kverbs_queues.c */
void t_srq(void);
/* kverbs_mr.c */
void t_access_at(const char *name, enum ib_wr_opcode op, u32 rkey, u64 raddr);
void t_access(const char *name, enum ib_wr_opcode op, u32 rkey);
/* kverbs_queues.c */
void t_post_err_race(void);
/* kverbs_mr.c */
void t_alloc_mr_huge(void);
void t_inline_inv(void);
/* kverbs_queues.c */
void t_cq_overrun(bool recv);
void t_full_and_flush(void);
void t_drain(void);

#endif /* KVERBS_H */
