// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * libmetaroce-dv: the extension API's uverbs methods (metaroce-abi.h),
 * issued with RDMA_VERBS_IOCTL on the QP's context command fd. See
 * metaroce_dv.h.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>

#include <rdma/ib_user_ioctl_verbs.h>
#include <rdma/rdma_user_ioctl.h>

#include "metaroce_dv.h"

/*
 * Whether the device at sysfs path ibdev_path is metaroce: its node
 * description (sysfs node_desc, which metaroce sets and does not let be
 * changed) starts with "metaroce". metaroce devices report rxe's driver id,
 * so that rdma-core's rxe provider binds to them: the id cannot tell them
 * apart.
 */
static int node_desc_is_metaroce(const char *ibdev_path)
{
	char path[IBV_SYSFS_PATH_MAX + 16], desc[64] = "";
	FILE *f;

	snprintf(path, sizeof(path), "%s/node_desc", ibdev_path);
	f = fopen(path, "re");
	if (!f)
		return 0;
	if (!fgets(desc, sizeof(desc), f))
		desc[0] = 0;
	fclose(f);
	return strncmp(desc, "metaroce", 8) == 0;
}

/*
 * The devices found to be metaroce, by sysfs path (ibdev_path), so that a
 * call reads node_desc once per device rather than every time.
 *
 * Not keyed by context pointer: a context closed and another opened may get
 * the same address (and command fd) on another device, and nothing tells
 * this library of the close. A device's path outlives its contexts, but a
 * device deleted and another added under the same name share it too
 * (`rdma link delete mr0; rdma link add mr0 type rxe ...`). Hence:
 *  - only "metaroce" is cached, never "not metaroce": a stale "no" would
 *    refuse a metaroce device with nothing to correct it, and a call on
 *    another device is the error path anyway (it reads node_desc each time);
 *  - a stale "metaroce" is harmless and does not last: the method is then
 *    issued to a device that does not have it, and the kernel refuses it
 *    before anything is done (another driver id: EINVAL; rxe's: the method
 *    is unknown, EPROTONOSUPPORT). call() re-reads node_desc after any
 *    failed ioctl and, if the device is not metaroce (any more), drops the
 *    entry and fails with EOPNOTSUPP, as an uncached call would.
 * A fixed table: when full, a new device replaces the entries in turn (an
 * evicted device costs one node_desc read on its next call). The lock
 * makes the library safe to call from several threads.
 */
#define MR_DEV_CACHE 8
static struct {
	pthread_mutex_t lock;
	char path[MR_DEV_CACHE][IBV_SYSFS_PATH_MAX];
	unsigned int next;
} known = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* The slot of ibdev_path in known.path, or -1; with known.lock held. */
static int known_slot(const char *ibdev_path)
{
	int i;

	for (i = 0; i < MR_DEV_CACHE; i++)
		if (known.path[i][0] && !strcmp(known.path[i], ibdev_path))
			return i;
	return -1;
}

/* Whether context ctx's device is metaroce (cached, see above). */
static int is_metaroce(struct ibv_context *ctx)
{
	const char *p = ctx->device->ibdev_path;
	int hit;

	pthread_mutex_lock(&known.lock);
	hit = known_slot(p) >= 0;
	pthread_mutex_unlock(&known.lock);
	if (hit)
		return 1;
	if (!node_desc_is_metaroce(p))
		return 0;
	pthread_mutex_lock(&known.lock);
	if (known_slot(p) < 0 && strlen(p) < IBV_SYSFS_PATH_MAX) {
		strcpy(known.path[known.next], p);
		known.next = (known.next + 1) % MR_DEV_CACHE;
	}
	pthread_mutex_unlock(&known.lock);
	return 1;
}

/* Forgets ctx's device if it is no longer metaroce (after a failed call):
 * whether it is. */
static int recheck_metaroce(struct ibv_context *ctx)
{
	const char *p = ctx->device->ibdev_path;
	int i;

	if (node_desc_is_metaroce(p))
		return 1;
	pthread_mutex_lock(&known.lock);
	i = known_slot(p);
	if (i >= 0)
		known.path[i][0] = 0;
	pthread_mutex_unlock(&known.lock);
	return 0;
}

/* Runs method `method` of QP qp with `attr` as its second attribute (the
 * first of both methods is the QP handle). */
static int call(struct ibv_qp *qp, uint16_t method, struct ib_uverbs_attr attr)
{
	struct {
		struct ib_uverbs_ioctl_hdr hdr;
		struct ib_uverbs_attr attrs[2];
	} c;

	if (!qp || !qp->context) {
		errno = EINVAL;
		return -1;
	}
	if (!is_metaroce(qp->context)) {
		errno = EOPNOTSUPP;
		return -1;
	}
	memset(&c, 0, sizeof(c));
	c.hdr.length = sizeof(c);
	c.hdr.object_id = UVERBS_OBJECT_QP;
	c.hdr.method_id = method;
	c.hdr.num_attrs = 2;
	c.hdr.driver_id = RDMA_DRIVER_RXE;
	c.attrs[0].attr_id = METAROCE_IB_ATTR_QUERY_PATHS_QP_HANDLE;
	c.attrs[0].data = qp->handle;
	c.attrs[1] = attr;
	if (ioctl(qp->context->cmd_fd, RDMA_VERBS_IOCTL, &c)) {
		/* A cached "metaroce" may be stale (see known): check again. */
		int err = errno;

		errno = recheck_metaroce(qp->context) ? err : EOPNOTSUPP;
		return -1;
	}
	return 0;
}

int metaroce_dv_query_paths(struct ibv_qp *qp, struct metaroce_conn_info *conn,
			    struct metaroce_path_info *paths, unsigned int max_paths)
{
	struct {
		struct metaroce_conn_info conn;
		struct metaroce_path_info paths[METAROCE_MAX_PATHS];
	} reply;
	struct ib_uverbs_attr out = {
		.attr_id = METAROCE_IB_ATTR_QUERY_PATHS_RESP,
		.len = sizeof(reply),
		.data = (uintptr_t)&reply,
	};
	unsigned int n;

	if (!conn || (max_paths && !paths)) {
		errno = EINVAL;
		return -1;
	}
	memset(&reply, 0, sizeof(reply));
	if (call(qp, METAROCE_IB_METHOD_QP_QUERY_PATHS, out))
		return -1;
	n = reply.conn.num_path_info;
	if (n > max_paths)
		n = max_paths;
	if (n > METAROCE_MAX_PATHS)
		n = METAROCE_MAX_PATHS;
	reply.conn.num_path_info = n;
	*conn = reply.conn;
	if (n)
		memcpy(paths, reply.paths, n * sizeof(*paths));
	return (int)n;
}

int metaroce_dv_set_paths(struct ibv_qp *qp, unsigned int paths)
{
	/* A __u32 is carried inline in the attribute. */
	struct ib_uverbs_attr in = {
		.attr_id = METAROCE_IB_ATTR_SET_PATHS_COUNT,
		.len = sizeof(__u32),
		.data = paths,
	};

	return call(qp, METAROCE_IB_METHOD_QP_SET_PATHS, in);
}

int metaroce_dv_set_stream_class(struct ibv_qp *qp, unsigned int cls)
{
	struct ib_uverbs_attr in = {
		.attr_id = METAROCE_IB_ATTR_SET_STREAM_CLASS_CLASS,
		.len = sizeof(__u32),
		.data = cls,
	};

	return call(qp, METAROCE_IB_METHOD_QP_SET_STREAM_CLASS, in);
}

/* Runs method `method` of ctx's device with attrs[0 .. n-1]. */
static int dev_call(struct ibv_context *ctx, uint16_t method,
		    const struct ib_uverbs_attr *attrs, unsigned int n)
{
	struct {
		struct ib_uverbs_ioctl_hdr hdr;
		struct ib_uverbs_attr attrs[2];
	} c;

	if (!ctx || n > 2) {
		errno = EINVAL;
		return -1;
	}
	if (!is_metaroce(ctx)) {
		errno = EOPNOTSUPP;
		return -1;
	}
	memset(&c, 0, sizeof(c));
	c.hdr.length = sizeof(c.hdr) + n * sizeof(c.attrs[0]);
	c.hdr.object_id = UVERBS_OBJECT_DEVICE;
	c.hdr.method_id = method;
	c.hdr.num_attrs = n;
	c.hdr.driver_id = RDMA_DRIVER_RXE;
	memcpy(c.attrs, attrs, n * sizeof(c.attrs[0]));
	if (ioctl(ctx->cmd_fd, RDMA_VERBS_IOCTL, &c)) {
		int err = errno;

		errno = recheck_metaroce(ctx) ? err : EOPNOTSUPP;
		return -1;
	}
	return 0;
}

int metaroce_dv_query_planes(struct ibv_context *ctx,
			     struct metaroce_plane_info *planes, unsigned int max)
{
	struct metaroce_plane_info reply[METAROCE_MAX_PLANES];
	__u32 num = 0;
	struct ib_uverbs_attr a[2] = {
		{ .attr_id = METAROCE_IB_ATTR_QUERY_PLANES_RESP,
		  .len = sizeof(reply), .data = (uintptr_t)reply },
		{ .attr_id = METAROCE_IB_ATTR_QUERY_PLANES_NUM,
		  .len = sizeof(num), .data = (uintptr_t)&num },
	};
	unsigned int n;

	if (max && !planes) {
		errno = EINVAL;
		return -1;
	}
	memset(reply, 0, sizeof(reply));
	if (dev_call(ctx, METAROCE_IB_METHOD_DEVICE_QUERY_PLANES, a, 2))
		return -1;
	n = num < max ? num : max;
	if (n > METAROCE_MAX_PLANES)
		n = METAROCE_MAX_PLANES;
	if (n)
		memcpy(planes, reply, n * sizeof(*planes));
	return (int)num;
}

int metaroce_dv_set_planes(struct ibv_context *ctx, const unsigned int *ifindex,
			   unsigned int n)
{
	__u32 list[METAROCE_MAX_PLANES];
	struct ib_uverbs_attr a = {
		.attr_id = METAROCE_IB_ATTR_SET_PLANES_IFINDEX,
		.len = n * sizeof(__u32),
		.data = (uintptr_t)list,
	};
	unsigned int i;

	if (!ifindex || n == 0 || n > METAROCE_MAX_PLANES) {
		errno = EINVAL;
		return -1;
	}
	for (i = 0; i < n; i++)
		list[i] = ifindex[i];
	/* Up to 8 bytes travel inline in the attribute, as a __u32 does. */
	if (a.len <= sizeof(a.data))
		memcpy(&a.data, list, a.len);
	return dev_call(ctx, METAROCE_IB_METHOD_DEVICE_SET_PLANES, &a, 1);
}

const char *metaroce_dv_path_state_str(unsigned int state)
{
	switch (state) {
	case METAROCE_PATH_UNUSED:
		return "unused";
	case METAROCE_PATH_ACTIVE:
		return "active";
	case METAROCE_PATH_PROBING:
		return "probing";
	default:
		return "?";
	}
}
