/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * libmetaroce-dv: the MetaRoCE extension API for applications
 * (Documentation/extension.rst), in the manner of mlx5dv and efadv: calls on
 * the libibverbs objects an application already has, which plain verbs
 * applications never need. On a QP of any other device each call fails with
 * EOPNOTSUPP and changes nothing.
 *
 * Link with -lmetaroce-dv -libverbs (or build metaroce_dv.c in).
 */
#ifndef METAROCE_DV_H
#define METAROCE_DV_H

#include <infiniband/verbs.h>
#include <linux/types.h>

#include "metaroce-abi.h" /* struct metaroce_conn_info, metaroce_path_info */

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Reads QP qp's connection into *conn and the state of its first paths into
 * paths[0 .. max_paths-1] (paths may be NULL with max_paths 0). A QP that
 * shares a connection with other QPs to the same peer (module parameter
 * shared=1) reports that connection (conn->flags METAROCE_CONN_SHARED,
 * conn->members).
 *
 * Returns the number of path records written (conn->num_path_info, at most
 * conn->paths and max_paths), or -1 with errno: EOPNOTSUPP (not a metaroce
 * QP), EINVAL (no connection: an RC QP before RTR, or a UC/UD QP), or what
 * the kernel returned.
 */
int metaroce_dv_query_paths(struct ibv_qp *qp, struct metaroce_conn_info *conn,
			    struct metaroce_path_info *paths, unsigned int max_paths);

/*
 * Has QP qp's connection send on `paths` paths (1 .. conn.max_paths, 64)
 * from now on; packets in flight on paths taken away are resent on the
 * others, nothing is lost, and no message fails for it. On a connection
 * shared by several QPs this is the QP's ask: the connection sends on the
 * largest count its QPs ask for (each asks for the `paths` module parameter
 * until it sets one), so metaroce_dv_query_paths() tells what it sends on.
 *
 * Returns 0, or -1 with errno: EINVAL (out of range, or no connection),
 * EOPNOTSUPP (not a metaroce QP).
 */
int metaroce_dv_set_paths(struct ibv_qp *qp, unsigned int paths);

/*
 * Pins QP qp to stream class `cls` (0 .. METAROCE_MAX_STREAM_CLASS, 7),
 * before it connects (in RESET or INIT). On a device that shares
 * connections the RC QPs to one peer ride one connection per class, each
 * with its own paths, congestion control and fair share; both ends of a QP
 * pair must pin the same class. 0 is every QP's class until pinned.
 *
 * Needs CAP_NET_ADMIN: a class mismatch between the two ends breaks every
 * QP on the connections involved, and the wire does not detect it.
 *
 * Returns 0, or -1 with errno: EINVAL (above the limit, or the QP is past
 * INIT), EPERM (without CAP_NET_ADMIN), EOPNOTSUPP (not a metaroce QP).
 */
int metaroce_dv_set_stream_class(struct ibv_qp *qp, unsigned int cls);

/*
 * Reads the planes of ctx's device into planes[0 .. max-1]: each plane's
 * netdev (ifindex), METAROCE_PLANE_UP / _GONE, and the datagrams sent on it.
 * Plane 0 is the netdev the device was added on.
 * Returns the number of planes the device has (which may exceed max), or -1
 * with errno: EOPNOTSUPP (not a metaroce device), EINVAL (planes NULL with
 * max > 0).
 */
int metaroce_dv_query_planes(struct ibv_context *ctx,
			     struct metaroce_plane_info *planes, unsigned int max);

/*
 * Binds ctx's device to the n netdevs ifindex[0 .. n-1] (1 ..
 * METAROCE_MAX_PLANES) as its planes: the networks of a multi-plane host,
 * each reaching the same peer addresses. ifindex[0] must be the device's own
 * netdev. From the next datagram on, every connection of the device spreads
 * its paths over the planes that are up (Documentation/extension.rst,
 * "Planes"); a plane that goes down or fails silently costs its paths a move
 * to another plane and the application nothing. Needs CAP_NET_ADMIN.
 * Returns 0, or -1 with errno: EINVAL (n out of range, ifindex[0] not the
 * device's netdev, a netdev given twice, a loopback netdev), ENODEV (no such
 * netdev), EPERM, EOPNOTSUPP (not a metaroce device). A refused call changes
 * nothing.
 */
int metaroce_dv_set_planes(struct ibv_context *ctx, const unsigned int *ifindex,
			   unsigned int n);

/* "unused", "active", "probing" or "?" for metaroce_path_info.state. */
const char *metaroce_dv_path_state_str(unsigned int state);

#ifdef __cplusplus
}
#endif

#endif /* METAROCE_DV_H */
