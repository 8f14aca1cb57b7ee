/* SPDX-License-Identifier: GPL-2.0 */
/*
 * exerciser, section 5 (error paths, issue 19): what errpaths.c,
 * errpaths_keys.c, errpaths_rc.c and errpaths_ud.c share -- the regions of
 * buf the section uses, its objects (set up by test_error_paths()), its
 * helpers and its cases.
 */
#ifndef EXERCISER_ERRPATHS_H
#define EXERCISER_ERRPATHS_H

/* Regions of buf used by this section. */
#define E_SRC	((char *)buf)			/* local data sent, 8 KiB */
#define E_DST	((char *)buf + 8192)		/* remote target of WRITE/READ/atomics */
#define E_LOC	((char *)buf + 16384)		/* local READ/atomic landing, 4 KiB */
#define E_RECV	((char *)buf + 24576)		/* receive buffers, 8 KiB */
#define E_MANY	((char *)buf + 32768)		/* 64 blocks READ, then where they land */
#define UD_QKEY	0x11111111			/* req_attrs() */

/* The section's objects: test_error_paths() sets them up, ep_pair() the pair. */
struct ep_state {
	struct ibv_pd *pd, *pd2;
	struct ibv_cq *cq;
	struct ibv_mr *mr;	/* all of buf, every access right and MW_BIND */
	struct ibv_mr *nolw;	/* E_LOC: REMOTE_READ | MW_BIND, no LOCAL_WRITE */
	struct ibv_mr *small;	/* the first 4 KiB of E_SRC */
	struct ibv_mr *other;	/* all of buf, registered in pd2 */
	uint32_t dead_lkey;	/* keys of an MR already deregistered */
	uint32_t dead_rkey;
	struct ibv_qp *a, *b;	/* the current pair: a requests, b responds */
};
extern struct ep_state ep;
extern const struct conn_opts ep_default;

/* errpaths.c */
int ep_pair(const struct conn_opts *o, const char *what);
int post_wr(struct ibv_qp *qp, uint64_t id, enum ibv_wr_opcode op, void *addr, uint32_t len,
	    uint32_t lkey, void *raddr, uint32_t rkey, uint64_t arg);
int post_recv1(struct ibv_qp *qp, struct ibv_srq *srq, uint64_t id, void *addr, uint32_t len);
int wait_async(enum ibv_event_type t, void *obj, double secs, char *others, size_t len);
const char *st_str(int st);

/* The cases, in the order test_error_paths() runs them. */
void ep_scatter(void);		/* errpaths_keys.c */
void ep_gather(void);
void ep_dereg_race(void);
void ep_cq_overrun(void);	/* errpaths_rc.c */
void ep_many_reads(void);
void ep_mw(void);		/* errpaths_keys.c */
void ep_ud(void);		/* errpaths_ud.c */
void ep_err_state(void);	/* errpaths_rc.c */
void ep_invalid_requests(void);
void ep_send_inv_nothing(void);
void ep_rnr(void);
void ep_retry0(void);
void ep_ud_route_sqd(void);	/* errpaths_ud.c */
void ep_huge_mr(void);		/* errpaths_keys.c */

#endif
