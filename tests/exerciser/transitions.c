// SPDX-License-Identifier: GPL-2.0
/*
 * exerciser, section 2: the QP state machine -- every legal RC/UD QP
 * transition with the required masks, checked with ibv_query_qp; the matrix
 * of illegal transitions; required mask bits missing, disallowed ones added.
 */
#include "exerciser.h"

static const enum ibv_qp_state states[] = { IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPS_RTR,
					    IBV_QPS_RTS, IBV_QPS_SQD, IBV_QPS_ERR };

/* IBTA 10.3.1 / ib_core qp_state_table: any state -> RESET; any state but
 * RESET -> ERR (RESET->ERR is not a transition: rxe says EINVAL). */
static int legal(enum ibv_qp_state from, enum ibv_qp_state to)
{
	if (to == IBV_QPS_RESET)
		return 1;
	if (to == IBV_QPS_ERR)
		return from != IBV_QPS_RESET;
	switch (from) {
	case IBV_QPS_RESET: return to == IBV_QPS_INIT;
	case IBV_QPS_INIT: return to == IBV_QPS_INIT || to == IBV_QPS_RTR;
	case IBV_QPS_RTR: return to == IBV_QPS_RTS;
	case IBV_QPS_RTS: return to == IBV_QPS_RTS || to == IBV_QPS_SQD;
	case IBV_QPS_SQD: return to == IBV_QPS_RTS || to == IBV_QPS_SQD;
	default: return 0;
	}
}

/* Query every attribute the transitions set and compare with what was set. */
static void check_query(struct ibv_qp *qp, enum ibv_qp_state s, const char *what)
{
	struct ibv_qp_attr a, want;
	struct ibv_qp_init_attr ia;
	enum ibv_qp_type t = qp->qp_type;
	char bad[200] = "";
	int e;

	e = ibv_query_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			 IBV_QP_ACCESS_FLAGS | IBV_QP_QKEY | IBV_QP_AV | IBV_QP_PATH_MTU |
			 IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
			 IBV_QP_MIN_RNR_TIMER | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
			 IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC |
			 IBV_QP_CAP, &ia);
	if (e) {
		checkd(0, ename(e), "%s %s: query_qp", qpt_name(t), what);
		return;
	}
#define QCHK(field, fmt) do { if (a.field != want.field) \
	snprintf(bad + strlen(bad), sizeof(bad) - strlen(bad), #field " " fmt "!=" fmt " ", \
		 a.field, want.field); } while (0)
	if (a.qp_state != s)
		snprintf(bad, sizeof(bad), "state %s ", qps_name(a.qp_state));
	if (s >= IBV_QPS_INIT && s <= IBV_QPS_SQD) {
		req_attrs(t, IBV_QPS_RESET, IBV_QPS_INIT, &want);
		QCHK(pkey_index, "%u");
		QCHK(port_num, "%u");
		if (t == IBV_QPT_RC)
			QCHK(qp_access_flags, "%#x");
		else
			QCHK(qkey, "%#x");
	}
	if (s >= IBV_QPS_RTR && s <= IBV_QPS_SQD && t == IBV_QPT_RC) {
		req_attrs(t, IBV_QPS_INIT, IBV_QPS_RTR, &want);
		QCHK(path_mtu, "%u");
		QCHK(dest_qp_num, "%#x");
		QCHK(rq_psn, "%#x");
		QCHK(max_dest_rd_atomic, "%u");
		QCHK(min_rnr_timer, "%u");
		QCHK(ah_attr.grh.sgid_index, "%u");
		QCHK(ah_attr.grh.hop_limit, "%u");
		QCHK(ah_attr.port_num, "%u");
		QCHK(ah_attr.is_global, "%u");
		if (memcmp(&a.ah_attr.grh.dgid, &want.ah_attr.grh.dgid, 16))
			strcat(bad, "dgid ");
	}
	if (s >= IBV_QPS_RTS && s <= IBV_QPS_SQD) {
		req_attrs(t, IBV_QPS_RTR, IBV_QPS_RTS, &want);
		QCHK(sq_psn, "%#x");
		if (t == IBV_QPT_RC) {
			QCHK(timeout, "%u");
			QCHK(retry_cnt, "%u");
			QCHK(rnr_retry, "%u");
			QCHK(max_rd_atomic, "%u");
		}
	}
	if (ia.qp_type != t || ia.cap.max_send_wr < 16 || ia.cap.max_send_sge < 2)
		strcat(bad, "init_attr ");
	checkd(!bad[0], bad, "%s %s: query_qp reports state %s and the attributes set",
	       qpt_name(t), what, qps_name(s));
}

void test_transitions(struct ibv_pd *pd, struct ibv_cq *cq)
{
	enum ibv_qp_type types[] = { IBV_QPT_RC, IBV_QPT_UD };
	int ti, i, j, e;

	for (ti = 0; ti < 2; ti++) {
		enum ibv_qp_type t = types[ti];
		struct ibv_qp *qp = make_qp(pd, cq, cq, t, NULL, NULL);
		struct ibv_qp_attr a;
		int m;

		if (!qp) {
			checkd(0, ename(errno), "%s: create_qp", qpt_name(t));
			continue;
		}
		/* The full legal walk on one QP, query after each step. */
		static const enum ibv_qp_state walk[] = {
			IBV_QPS_RESET, IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPS_INIT, IBV_QPS_RTR,
			IBV_QPS_RTS, IBV_QPS_RTS, IBV_QPS_SQD, IBV_QPS_SQD, IBV_QPS_RTS,
			IBV_QPS_ERR, IBV_QPS_ERR, IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPS_RESET,
			IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPS_RTR,
			IBV_QPS_ERR, IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPS_ERR, IBV_QPS_RESET,
		};
		for (i = 1; i < (int)(sizeof(walk) / sizeof(walk[0])); i++) {
			char what[64];

			snprintf(what, sizeof(what), "%s->%s", qps_name(walk[i - 1]), qps_name(walk[i]));
			e = step(qp, walk[i - 1], walk[i]);
			expect_err(e, 0, "%s %s with the required mask", qpt_name(t), what);
			check_query(qp, walk[i], what);
			if (qp->state != walk[i])
				checkd(0, qps_name(qp->state), "%s %s: ibv_qp->state", qpt_name(t), what);
		}
		/* Optional attributes change in place: INIT->INIT, RTS->RTS, SQD->SQD. */
		{
			struct ibv_qp_attr q;
			struct ibv_qp_init_attr ia;

			bring_to(qp, IBV_QPS_INIT);
			memset(&a, 0, sizeof(a));
			a.qp_state = IBV_QPS_INIT;
			a.qp_access_flags = IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_REMOTE_READ;
			a.qkey = 0x22222222;
			m = IBV_QP_STATE | (t == IBV_QPT_RC ? IBV_QP_ACCESS_FLAGS : IBV_QP_QKEY);
			e = rcerr(ibv_modify_qp(qp, &a, m));
			ibv_query_qp(qp, &q, IBV_QP_ACCESS_FLAGS | IBV_QP_QKEY, &ia);
			checkd(!e && (t == IBV_QPT_RC ? q.qp_access_flags == a.qp_access_flags : q.qkey == a.qkey),
			       ename(e), "%s INIT->INIT changes %s", qpt_name(t),
			       t == IBV_QPT_RC ? "qp_access_flags" : "qkey");
			step(qp, IBV_QPS_INIT, IBV_QPS_RTR);
			step(qp, IBV_QPS_RTR, IBV_QPS_RTS);
			memset(&a, 0, sizeof(a));
			a.qp_state = IBV_QPS_RTS;
			a.min_rnr_timer = 20;
			a.qkey = 0x33333333;
			m = IBV_QP_STATE | (t == IBV_QPT_RC ? IBV_QP_MIN_RNR_TIMER : IBV_QP_QKEY);
			e = rcerr(ibv_modify_qp(qp, &a, m));
			ibv_query_qp(qp, &q, IBV_QP_MIN_RNR_TIMER | IBV_QP_QKEY, &ia);
			checkd(!e && (t == IBV_QPT_RC ? q.min_rnr_timer == 20 : q.qkey == a.qkey),
			       ename(e), "%s RTS->RTS changes %s", qpt_name(t),
			       t == IBV_QPT_RC ? "min_rnr_timer" : "qkey");
			step(qp, IBV_QPS_RTS, IBV_QPS_SQD);
			memset(&a, 0, sizeof(a));
			a.qp_state = IBV_QPS_SQD;
			a.timeout = 20;
			a.qkey = 0x44444444;
			m = IBV_QP_STATE | (t == IBV_QPT_RC ? IBV_QP_TIMEOUT : IBV_QP_QKEY);
			e = rcerr(ibv_modify_qp(qp, &a, m));
			/* QUIRK (harmless): rxe treats SQD->SQD like RTS->SQD and
			 * starts another drain (rxe_qp_sqd() sets sq_draining), so
			 * SQD->RTS fails with EINVAL until the send task has run:
			 * wait for sq_draining to clear as after RTS->SQD. */
			wait_drained(qp);
			ibv_query_qp(qp, &q, IBV_QP_TIMEOUT | IBV_QP_QKEY | IBV_QP_STATE, &ia);
			checkd(!e && q.qp_state == IBV_QPS_SQD &&
			       (t == IBV_QPT_RC ? q.timeout == 20 : q.qkey == a.qkey),
			       ename(e), "%s SQD->SQD changes %s", qpt_name(t),
			       t == IBV_QPT_RC ? "timeout" : "qkey");
			memset(&a, 0, sizeof(a));
			a.qp_state = IBV_QPS_RTS;
			a.en_sqd_async_notify = 1;
			e = rcerr(ibv_modify_qp(qp, &a, IBV_QP_STATE));
			expect_err(e, 0, "%s SQD->RTS", qpt_name(t));
			a.qp_state = IBV_QPS_SQD;
			e = rcerr(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_EN_SQD_ASYNC_NOTIFY));
			expect_err(e, 0, "%s RTS->SQD with EN_SQD_ASYNC_NOTIFY", qpt_name(t));
			wait_drained(qp);
		}
		ibv_destroy_qp(qp);

		/* Matrix: every (from, to) pair on a fresh QP. */
		{
			int nleg = 0, nill = 0;
			char bad[600] = "";

			for (i = 0; i < 6; i++) {
				for (j = 0; j < 6; j++) {
					enum ibv_qp_state from = states[i], to = states[j];
					int want = legal(from, to) ? 0 : WANT_BAD_TRANSITION;
					int s;

					qp = make_qp(pd, cq, cq, t, NULL, NULL);
					if (!qp || (e = bring_to(qp, from))) {
						snprintf(bad + strlen(bad), sizeof(bad) - strlen(bad),
							 "setup %s: %s; ", qps_name(from), ename(qp ? e : errno));
						if (qp)
							ibv_destroy_qp(qp);
						continue;
					}
					m = req_attrs(t, from, to, &a);
					e = rcerr(ibv_modify_qp(qp, &a, m));
					if (!e && to == IBV_QPS_SQD)
						wait_drained(qp);
					s = qp_state(qp, NULL);
					if (e != want || s != (int)(want ? from : to))
						snprintf(bad + strlen(bad), sizeof(bad) - strlen(bad),
							 "%s->%s: %s state %s; ", qps_name(from), qps_name(to),
							 ename(e), qps_name(s));
					if (want)
						nill++;
					else
						nleg++;
					ibv_destroy_qp(qp);
				}
			}
			checkd(!bad[0], bad, "%s transition matrix: %d legal pairs succeed, %d illegal fail with %s and leave the state",
			       qpt_name(t), nleg, nill, ename(WANT_BAD_TRANSITION));
		}

		/* Wrong masks: drop each required bit; add a bit not allowed. */
		{
			static const enum ibv_qp_state pairs[][2] = {
				{ IBV_QPS_RESET, IBV_QPS_INIT }, { IBV_QPS_INIT, IBV_QPS_RTR },
				{ IBV_QPS_RTR, IBV_QPS_RTS },
			};
			int p, b, cnt = 0;
			char bad[400] = "";

			for (p = 0; p < 3; p++) {
				enum ibv_qp_state from = pairs[p][0], to = pairs[p][1];
				int req = req_attrs(t, from, to, &a) & ~IBV_QP_STATE;

				for (b = 0; b < 31; b++) {
					if (!(req & (1 << b)))
						continue;
					qp = make_qp(pd, cq, cq, t, NULL, NULL);
					if (!qp || bring_to(qp, from)) {
						strcat(bad, "setup; ");
						if (qp)
							ibv_destroy_qp(qp);
						continue;
					}
					m = req_attrs(t, from, to, &a);
					e = rcerr(ibv_modify_qp(qp, &a, m & ~(1 << b)));
					if (e != WANT_BAD_TRANSITION || qp_state(qp, NULL) != (int)from)
						snprintf(bad + strlen(bad), sizeof(bad) - strlen(bad),
							 "%s->%s without mask bit %#x: %s; ", qps_name(from),
							 qps_name(to), 1 << b, ename(e));
					cnt++;
					ibv_destroy_qp(qp);
				}
			}
			checkd(!bad[0], bad, "%s: %d transitions each missing one required mask bit fail with %s",
			       qpt_name(t), cnt, ename(WANT_BAD_TRANSITION));

			/* Extra bits the transition does not allow (not in its optional set). */
			struct { enum ibv_qp_state from, to; int extra; const char *name; } ex[] = {
				{ IBV_QPS_RESET, IBV_QPS_INIT, t == IBV_QPT_RC ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS,
				  t == IBV_QPT_RC ? "QKEY" : "ACCESS_FLAGS" },
				{ IBV_QPS_RESET, IBV_QPS_INIT, IBV_QP_SQ_PSN, "SQ_PSN" },
				{ IBV_QPS_INIT, IBV_QPS_RTR, IBV_QP_SQ_PSN, "SQ_PSN" },
				{ IBV_QPS_INIT, IBV_QPS_RTR, IBV_QP_CUR_STATE, "CUR_STATE (not allowed from INIT)" },
				{ IBV_QPS_RTR, IBV_QPS_RTS, IBV_QP_PATH_MTU, "PATH_MTU" },
				{ IBV_QPS_RTS, IBV_QPS_SQD, IBV_QP_PORT, "PORT" },
				{ IBV_QPS_RTS, IBV_QPS_RTS, IBV_QP_RQ_PSN, "RQ_PSN" },
				{ IBV_QPS_RESET, IBV_QPS_ERR, IBV_QP_PKEY_INDEX, "PKEY_INDEX" },
			};
			for (p = 0; p < (int)(sizeof(ex) / sizeof(ex[0])); p++) {
				qp = make_qp(pd, cq, cq, t, NULL, NULL);
				if (!qp || bring_to(qp, ex[p].from)) {
					checkd(0, "setup", "%s %s->%s + %s", qpt_name(t), qps_name(ex[p].from),
					       qps_name(ex[p].to), ex[p].name);
					if (qp)
						ibv_destroy_qp(qp);
					continue;
				}
				m = req_attrs(t, ex[p].from, ex[p].to, &a);
				a.sq_psn = 1; a.rq_psn = 1; a.path_mtu = IBV_MTU_1024; a.port_num = 1;
				a.cur_qp_state = ex[p].from;
				e = rcerr(ibv_modify_qp(qp, &a, m | ex[p].extra));
				expect_err(e, WANT_BAD_TRANSITION, "%s %s->%s with extra mask bit %s", qpt_name(t),
					   qps_name(ex[p].from), qps_name(ex[p].to), ex[p].name);
				ibv_destroy_qp(qp);
			}
		}
	}
}
