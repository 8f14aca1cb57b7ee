/* SPDX-License-Identifier: GPL-2.0 */
/*
 * exerciser - the project's verbs exerciser (libibverbs only).
 *
 *   exerciser -d DEVICE [-n ITER] [-g GID_INDEX] [-v] [-S]
 *                            run the checks, TAP-like (-S: strict, see tap.c)
 *   exerciser -d DEVICE -H   hold: create PD/MR/CQ/QPs/SRQ, print READY, sleep;
 *                            on SIGUSR1 check the verbs of a device that went
 *                            away (TAP), destroy all, exit
 *
 * metaroce must behave exactly like soft-RoCE (rdma_rxe) towards unmodified
 * rdma-core, so rxe is the oracle: every expected errno below was observed on
 * rxe (Linux 6.12.117 Debian, rdma-core 44) and is recorded next to the check
 * with where rxe/ib_core produces it.  Where rxe's behaviour contradicts IBTA
 * the check still encodes what rxe does (metaroce must match it), is marked
 * "[rxe quirk]" in its description and explained in a QUIRK comment.  -S
 * (strict, for devices other than rxe) holds the device to IBTA there.
 *
 * Build and run (the program is every .c in tests/exerciser but ringfuzz.c,
 * the ring fuzzer):
 *   make -C tests/exerciser                         -> out/exerciser
 *   qemu/vm-run tests/guest/exerciser.sh rxe        in a test guest: rdma_rxe
 *   qemu/vm-run tests/guest/exerciser.sh metaroce   metaroce.ko, with -S
 * tests/guest/exerciser.sh creates the device on a dummy netdev (or the
 * private link of a second guest), runs the checks, then kills a holder (-H)
 * with -9; tests/guest/device.sh removes the device under holders.
 *
 * Sections, in the order main.c runs them, and their files:
 *   1. create/destroy every object type ITER times             objects.c
 *   2. every legal RC/UD QP transition with the required       transitions.c
 *      masks, checked with ibv_query_qp; the matrix of illegal
 *      transitions and wrong masks
 *   3. errno of invalid calls                                  errnos.c
 *      every depth up to the device's limits can be created    limits.c
 *   4. posting and polling through the shared rings without a  rings.c
 *      peer: RQ full, SQ posting outside RTS, flush completions
 *      on ERR, MW bind/invalidate (the only packets are loopback
 *      ones to the device itself);
 *      over a loopback RC pair: remote access errors,          rc_ops.c
 *      SEND_WITH_INV, a receive too small, ATOMIC_WRITE
 *   5. error paths (issue 19): work requests that cannot be    errpaths.c
 *      carried out (bad lkeys, rkeys, windows, access          errpaths_keys.c
 *      flags, alignment, RNR, CQ overrun, oversized UD), QPs   errpaths_rc.c
 *      in the error state, async events, huge MRs              errpaths_ud.c
 *   6. UC QPs (issue 18)                                       uc.c
 *   -H: hold objects, then the verbs of a device gone away     hold.c
 * Shared helpers (declared below): tap.c (TAP output, errno names, the
 * clock), device.c (the device under test, its GID, the scratch buffer),
 * qp_util.c (QP creation, transitions, polling), loopback.c (loopback RC
 * pairs, one-WR posts, completions by wr_id); errpaths.h for section 5.
 *
 * Output: "ok N - ..." / "not ok N - ... (got errno X, want Y)", "# ..." diag
 * lines, a final "1..N" plan; exit status 1 if any check failed, 2 on a setup
 * error that prevents running the checks.
 */
#ifndef EXERCISER_H
#define EXERCISER_H

#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------------- */
/* TAP helpers (tap.c)                                                       */

extern int n_tests, n_failed, verbose;
extern int strict;	/* -S */
extern int shared_conns;	/* -C */

void __attribute__((format(printf, 2, 3))) check(int ok, const char *fmt, ...);
void __attribute__((format(printf, 3, 4))) checkd(int ok, const char *detail, const char *fmt, ...);
void __attribute__((format(printf, 3, 4))) expect_err(int got, int want, const char *fmt, ...);
void __attribute__((format(printf, 1, 2))) diag(const char *fmt, ...);
const char *ename(int e);
int rcerr(int rc);
double now(void);

/* Verbs that return a pointer: NULL and errno. */
#define PERR(p) ((p) ? 0 : (errno ? errno : -1))

/* ------------------------------------------------------------------------- */
/* Expected errnos, as observed on rxe.                                      */

/* ib_core ib_modify_qp_is_ok() via rxe __qp_chk_state(): illegal transition
 * or missing/extra attribute mask bits. */
#define WANT_BAD_TRANSITION	EINVAL
/* rxe_cq_chk_attr(): cqe <= 0 or cqe > max_cqe, also for resize. */
#define WANT_CQ_BAD_CQE		EINVAL
/* rxe_qp_chk_cap()/rxe_qp_chk_init(): caps above the device's limits. */
#define WANT_QP_BAD_CAP		EINVAL
/* ib_check_mr_access(): REMOTE_WRITE/REMOTE_ATOMIC without LOCAL_WRITE. */
#define WANT_MR_BAD_ACCESS	EINVAL
/* ib_umem_get(): length 0 / address + length wraps. */
#define WANT_MR_ZERO_LEN	EINVAL
#define WANT_MR_WRAP		EINVAL
/* ib_umem_get(): pin_user_pages_fast() on an unmapped range. */
#define WANT_MR_UNMAPPED	EFAULT
/* rxe_srq_chk_init()/rxe_srq_chk_attr(). */
#define WANT_SRQ_BAD		EINVAL
/* ib_uverbs destroy of an object still in use: uverbs_destroy_uobject()
 * -> the usecnt checks in ib_dealloc_pd_user/ib_destroy_cq_user/... */
#define WANT_BUSY		EBUSY
/* rxe_qp_chk_attr() / uverbs modify_qp() port checks. */
#define WANT_QP_BAD_ATTR	EINVAL
/* rdma-core rxe provider: rxe_post_one_recv() queue_full(). */
#define WANT_RQ_FULL		ENOMEM
/* kernel rxe_post_send() (the doorbell): qp_state < RTS. */
#define WANT_SEND_NOT_RTS	EINVAL
/* ib_core rdma_addr_find_l2_eth_by_grh(): rdma_resolve_ip() with a 1 s
 * timeout; ARP gets no answer: process_one_req() gives up. */
#define WANT_AH_UNRESOLVED	ETIMEDOUT

/* ------------------------------------------------------------------------- */
/* Device state (device.c)                                                   */

extern struct ibv_context *ctx;
extern struct ibv_device_attr_ex dattr;
extern struct ibv_port_attr pattr;
extern union ibv_gid gid;
extern int gid_index;
extern int iters;

extern void *buf;		/* page-aligned scratch, BUF_SIZE */
#define BUF_SIZE (64 * 1024)

const char *qpt_name(enum ibv_qp_type t);
const char *qps_name(enum ibv_qp_state s);
int find_gid(int want);
int mw_types(void);

/* ------------------------------------------------------------------------- */
/* QP helpers (qp_util.c)                                                    */

#define DUMMY_QPN 0xabcde	/* no QP has it: sends to it are never acked */

struct ibv_qp *make_qp(struct ibv_pd *pd, struct ibv_cq *scq, struct ibv_cq *rcq,
		       enum ibv_qp_type t, struct ibv_srq *srq, struct ibv_qp_init_attr *out);
int req_attrs(enum ibv_qp_type t, enum ibv_qp_state from, enum ibv_qp_state to,
	      struct ibv_qp_attr *a);
int qp_state(struct ibv_qp *qp, struct ibv_qp_attr *a);
int wait_drained(struct ibv_qp *qp);
int step(struct ibv_qp *qp, enum ibv_qp_state from, enum ibv_qp_state to);
int bring_to(struct ibv_qp *qp, enum ibv_qp_state s);
int poll_n(struct ibv_cq *cq, struct ibv_wc *wc, int n, double timeout);
int poll_extra(struct ibv_cq *cq, double secs);

/* ------------------------------------------------------------------------- */
/* Loopback traffic (loopback.c)                                             */

/* How connect_pair_opts() sets up both QPs of a loopback RC pair. */
struct conn_opts {
	int access;		/* qp_access_flags (INIT) */
	uint8_t min_rnr_timer;	/* RTR: the code this QP's RNR NAKs carry */
	uint8_t rnr_retry;	/* RTS */
	uint8_t timeout;	/* RTS: local ACK timeout, 4.096 us * 2^timeout */
	uint8_t retry_cnt;	/* RTS */
	int depth;		/* max_send_wr at creation */
	int ext;		/* ibv_create_qp_ex with the atomic send ops */
	int no_rd_res;		/* RTR: max_dest_rd_atomic 0 (else 1) */
};

int connect_pair_opts(struct ibv_qp *a, struct ibv_qp *b, const struct conn_opts *o);
int connect_pair(struct ibv_qp *a, struct ibv_qp *b);
struct ibv_qp *new_rc_qp(struct ibv_pd *pd, struct ibv_cq *scq, struct ibv_cq *rcq,
			 const struct conn_opts *o);
int fresh_pair(struct ibv_pd *pd, struct ibv_cq *cq, struct ibv_qp **a, struct ibv_qp **b,
	       const struct conn_opts *o);
int all_bytes(const char *p, int c, size_t n);
int one_op(struct ibv_qp *qp, struct ibv_cq *cq, enum ibv_wr_opcode op, void *local,
	   uint32_t lkey, uint32_t len, uint64_t raddr, uint32_t rkey, struct ibv_wc *wc);
int post_wr_imm(struct ibv_qp *qp, uint64_t id, enum ibv_wr_opcode op, void *addr, uint32_t len,
		uint32_t lkey, void *raddr, uint32_t rkey, uint64_t arg, uint32_t imm);
int post_recv_lkey(struct ibv_qp *qp, struct ibv_srq *srq, uint64_t id, void *addr, uint32_t len,
		   uint32_t lkey);
int collect(struct ibv_cq *cq, struct ibv_wc *wc, int max, uint64_t until, double secs,
	    double more);
struct ibv_wc *find_wc(struct ibv_wc *wc, int n, uint64_t id);
const char *wc_str(const struct ibv_wc *w);

/* ------------------------------------------------------------------------- */
/* The sections, called by main.c in this order                              */

void test_objects(struct ibv_pd *pd);				/* 1. objects.c */
void test_transitions(struct ibv_pd *pd, struct ibv_cq *cq);	/* 2. transitions.c */
void test_invalid(struct ibv_pd *pd, struct ibv_cq *cq);	/* 3. errnos.c */
void invalid_qp_caps(struct ibv_pd *pd, struct ibv_cq *cq);
void test_limits(struct ibv_pd *pd, struct ibv_cq *cq);		/*    limits.c */
void invalid_qp_modify(struct ibv_pd *pd, struct ibv_cq *cq);	/*    errnos.c */
void invalid_busy(void);
void test_rings(struct ibv_pd *pd);				/* 4. rings.c */
void test_remote_access(struct ibv_pd *pd);			/*    rc_ops.c */
void test_send_inv(struct ibv_pd *pd);
void test_recv_too_small(struct ibv_pd *pd);
void test_atomic_write(struct ibv_pd *pd);
void test_error_paths(struct ibv_pd *pd);			/* 5. errpaths.c */
void test_uc(struct ibv_pd *pd);				/* 6. uc.c */
int hold(void);							/* -H: hold.c */

#endif
