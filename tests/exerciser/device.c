// SPDX-License-Identifier: GPL-2.0
/*
 * exerciser: the device under test -- its context, attributes and port,
 * the RoCE v2 GID the checks use, the scratch buffer; names of QP types and
 * states; which memory window types the device reports.
 */
#include "exerciser.h"

struct ibv_context *ctx;
struct ibv_device_attr_ex dattr;
struct ibv_port_attr pattr;
union ibv_gid gid;
int gid_index = -1;
int iters = 1000;

void *buf;		/* page-aligned scratch, BUF_SIZE */

const char *qpt_name(enum ibv_qp_type t) { return t == IBV_QPT_RC ? "RC" : t == IBV_QPT_UC ? "UC" : "UD"; }

const char *qps_name(enum ibv_qp_state s)
{
	static const char *n[] = { "RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR" };

	return (unsigned)s < 7 ? n[s] : "?";
}

int find_gid(int want)
{
	struct ibv_gid_entry e;
	int i, any = -1;

	if (want >= 0) {
		if (ibv_query_gid(ctx, 1, want, &gid))
			return -1;
		return want;
	}
	for (i = 0; i < pattr.gid_tbl_len && i < 64; i++) {
		if (ibv_query_gid_ex(ctx, 1, i, &e, 0))
			continue;
		if (e.gid_type != IBV_GID_TYPE_ROCE_V2)
			continue;
		/* Prefer IPv4-mapped (::ffff:a.b.c.d): loopback routing is simplest. */
		if (!memcmp(e.gid.raw, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12)) {
			gid = e.gid;
			return i;
		}
		if (any < 0)
			any = i;
	}
	if (any >= 0 && !ibv_query_gid(ctx, 1, any, &gid))
		return any;
	return -1;
}

int mw_types(void)
{
	int t = 0;

	if (dattr.orig_attr.device_cap_flags & IBV_DEVICE_MEM_WINDOW)
		t |= 1;
	if (dattr.orig_attr.device_cap_flags &
	    (IBV_DEVICE_MEM_WINDOW_TYPE_2A | IBV_DEVICE_MEM_WINDOW_TYPE_2B))
		t |= 2;
	return t;
}
