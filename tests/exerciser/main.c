// SPDX-License-Identifier: GPL-2.0
/*
 * exerciser: options, opening the device, and the sections in order.
 * What the program checks and how to run it: exerciser.h.
 */
#include "exerciser.h"

static void usage(FILE *f, const char *prog)
{
	fprintf(f, "usage: %s -d DEVICE [-n ITER] [-g GID_INDEX] [-v] [-H] [-S] [-C] [-h]\n"
		"  -n ITER   create/destroy iterations (default 1000)\n"
		"  -g INDEX  GID index (default: a RoCE v2 GID, IPv4-mapped first)\n"
		"  -v        verbose diagnostics\n"
		"  -H        hold mode: keep objects until SIGUSR1 (tests/guest/device.sh)\n"
		"  -S        strict: IBTA where rxe deviates (the [rxe quirk] checks)\n"
		"  -C        the device shares one connection between its RC QPs to a\n"
		"            peer (metaroce's default): a peer QP in ERR answers CLOSED\n"
		"  -h        this help\n", prog);
}

int main(int argc, char **argv)
{
	const char *dev = NULL;
	struct ibv_device **list;
	int o, i, n, want_gid = -1, hold_mode = 0;
	double t0 = now();

	while ((o = getopt(argc, argv, "d:n:g:vHSCh")) != -1) {
		switch (o) {
		case 'd': dev = optarg; break;
		case 'n': iters = atoi(optarg); break;
		case 'g': want_gid = atoi(optarg); break;
		case 'v': verbose = 1; break;
		case 'H': hold_mode = 1; break;
		case 'S': strict = 1; break;
		case 'C': shared_conns = 1; break;
		case 'h': usage(stdout, argv[0]); return 0;
		default:
			usage(stderr, argv[0]);
			return 2;
		}
	}
	if (!dev || iters < 1) {
		usage(stderr, argv[0]);
		return 2;
	}
	list = ibv_get_device_list(&n);
	for (i = 0; list && i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), dev))
			break;
	if (!list || i == n) {
		printf("not ok 1 - device %s not found\n1..1\n", dev);
		return 2;
	}
	ctx = ibv_open_device(list[i]);
	if (!ctx) {
		printf("not ok 1 - ibv_open_device %s: %s\n1..1\n", dev, ename(errno));
		return 2;
	}
	if (ibv_query_device_ex(ctx, NULL, &dattr) || ibv_query_port(ctx, 1, &pattr)) {
		printf("not ok 1 - query_device_ex/query_port: %s\n1..1\n", ename(errno));
		return 2;
	}
	buf = mmap(NULL, BUF_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	gid_index = find_gid(want_gid);
	if (gid_index < 0) {
		printf("not ok 1 - no RoCE v2 GID on %s port 1\n1..1\n", dev);
		return 2;
	}
	if (hold_mode)
		return hold();
	diag("%s: max_qp_wr %d max_sge %d max_cqe %d max_srq_wr %d max_srq_sge %d max_qp_rd_atom %d, GID[%d] %02x%02x:..:%02x%02x, %d iterations",
	     dev, dattr.orig_attr.max_qp_wr, dattr.orig_attr.max_sge, dattr.orig_attr.max_cqe,
	     dattr.orig_attr.max_srq_wr, dattr.orig_attr.max_srq_sge, dattr.orig_attr.max_qp_rd_atom,
	     gid_index, gid.raw[0], gid.raw[1], gid.raw[14], gid.raw[15], iters);

	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq;

	if (!pd) {
		printf("not ok 1 - alloc_pd: %s\n1..1\n", ename(errno));
		return 2;
	}
	/* Without a CQ the QP sections cannot run: one failure says so and
	 * the sections that need no QP still run. */
	errno = 0;
	cq = ibv_create_cq(ctx, 256, NULL, NULL, 0);
	expect_err(PERR(cq), 0, "create the shared CQ (the QP sections need it)");
	diag("1. create/destroy");
	test_objects(pd);
	if (cq) {
		diag("2. QP state machine");
		test_transitions(pd, cq);
	}
	diag("3. invalid calls");
	test_invalid(pd, cq);
	if (cq) {
		invalid_qp_caps(pd, cq);
		test_limits(pd, cq);
		invalid_qp_modify(pd, cq);
	}
	invalid_busy();
	diag("4. rings");
	test_rings(pd);
	test_remote_access(pd);
	if (mw_types() & 2)
		test_send_inv(pd);
	test_recv_too_small(pd);
	test_atomic_write(pd);
	diag("5. error paths (issue 19)");
	test_error_paths(pd);
	diag("6. UC QPs (issue 18)");
	test_uc(pd);

	if (cq)
		expect_err(ibv_destroy_cq(cq), 0, "destroy the shared CQ");
	expect_err(ibv_dealloc_pd(pd), 0, "dealloc the shared PD (nothing left on it)");
	expect_err(ibv_close_device(ctx), 0, "close_device");
	ibv_free_device_list(list);
	diag("%d checks, %d failed, %.1fs", n_tests, n_failed, now() - t0);
	printf("1..%d\n", n_tests);
	return n_failed ? 1 : 0;
}
