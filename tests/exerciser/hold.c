// SPDX-License-Identifier: GPL-2.0
/*
 * exerciser -H: hold objects until SIGUSR1, then check the verbs of a device
 * that went away (tests/guest/device.sh, tests/guest/exerciser.sh).
 */
#include "exerciser.h"

static volatile sig_atomic_t got_usr1;

static void on_usr1(int sig)
{
	(void)sig;
	got_usr1 = 1;
}

/*
 * Hold objects until SIGUSR1, then check what a process sees once its device
 * has been removed under it (the kernel driver's disassociate_ucontext; run
 * with RDMAV_ALLOW_DISASSOC_DESTROY=1 so that libibverbs reports a destroy
 * the kernel already did as success): commands fail with EIO, the rings it
 * still has mapped are readable and writable memory, every destroy and the
 * close succeed. TAP lines; exit status 1 if a check failed.
 */
int hold(void)
{
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_mr *mr = pd ? ibv_reg_mr(pd, buf, BUF_SIZE, IBV_ACCESS_LOCAL_WRITE) : NULL;
	struct ibv_cq *cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 16, .max_sge = 1 } };
	struct ibv_srq *srq = pd ? ibv_create_srq(pd, &sa) : NULL;
	struct ibv_qp *rc = pd && cq ? make_qp(pd, cq, cq, IBV_QPT_RC, NULL, NULL) : NULL;
	struct ibv_qp *ud = pd && cq ? make_qp(pd, cq, cq, IBV_QPT_UD, NULL, NULL) : NULL;
	struct sigaction act = { .sa_handler = on_usr1 };
	sigset_t usr1, old;

	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	sigprocmask(SIG_BLOCK, &usr1, &old);
	sigaction(SIGUSR1, &act, NULL);
	if (rc)
		bring_to(rc, IBV_QPS_RTS);
	printf("READY pd=%d mr=%d cq=%d srq=%d rc=%d ud=%d\n", !!pd, !!mr, !!cq, !!srq, !!rc, !!ud);
	fflush(stdout);
	while (!got_usr1)
		sigsuspend(&old);
	if (!pd || !mr || !cq || !srq || !rc || !ud) {
		printf("not ok 1 - hold: every object was created\n1..1\n");
		return 1;
	}

	struct ibv_device_attr da;
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = 64, .lkey = mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *bad_s;
	struct ibv_recv_wr rwr = { .wr_id = 2, .sg_list = &sge, .num_sge = 1 }, *bad_r;
	struct ibv_wc wc;
	struct ibv_cq *cq2;

	expect_err(rcerr(ibv_query_device(ctx, &da)), EIO, "gone: query_device fails with EIO");
	errno = 0;
	cq2 = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	expect_err(PERR(cq2), EIO, "gone: create_cq fails with EIO");
	expect_err(rcerr(ibv_req_notify_cq(cq, 0)), EIO, "gone: req_notify_cq fails with EIO");
	/* The provider writes the WQE into the mapped SQ ring, then rings the
	 * doorbell (a command): the ring is still memory, the doorbell fails. */
	expect_err(rcerr(ibv_post_send(rc, &wr, &bad_s)), EIO,
		   "gone: post_send writes the mapped SQ ring, its doorbell fails with EIO");
	expect_err(rcerr(ibv_post_recv(rc, &rwr, &bad_r)), 0,
		   "gone: post_recv writes the mapped RQ ring (no command)");
	expect_err(rcerr(ibv_post_srq_recv(srq, &rwr, &bad_r)), 0,
		   "gone: post_srq_recv writes the mapped SRQ ring (no command)");
	check(ibv_poll_cq(cq, 1, &wc) == 0, "gone: poll_cq reads the mapped CQ ring: empty");
	expect_err(rcerr(ibv_destroy_qp(ud)), 0, "gone: destroy UD QP");
	expect_err(rcerr(ibv_destroy_qp(rc)), 0, "gone: destroy RC QP");
	expect_err(rcerr(ibv_destroy_srq(srq)), 0, "gone: destroy SRQ");
	expect_err(rcerr(ibv_destroy_cq(cq)), 0, "gone: destroy CQ");
	expect_err(rcerr(ibv_dereg_mr(mr)), 0, "gone: dereg MR");
	expect_err(rcerr(ibv_dealloc_pd(pd)), 0, "gone: dealloc PD");
	expect_err(rcerr(ibv_close_device(ctx)), 0, "gone: close_device");
	printf("1..%d\n", n_tests);
	return n_failed ? 1 : 0;
}
