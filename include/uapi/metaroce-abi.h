/* SPDX-License-Identifier: ((GPL-2.0 WITH Linux-syscall-note) OR BSD-2-Clause) */
/*
 * metaroce's driver-specific uverbs methods: the extension API
 * (Documentation/extension.rst). User space reaches them with
 * RDMA_VERBS_IOCTL on a device context's command fd (libmetaroce-dv in
 * tools/metaroce-dv wraps them); the methods hang on the QP and device
 * objects, in the driver's namespace (UVERBS_ID_NS_SHIFT), as efa's and
 * mlx5's do.
 *
 * Layouts are fixed: fields are only ever added at the end, and a reply is
 * cut to the length user space offers (at least the fixed part).
 */
#ifndef METAROCE_ABI_USER_H
#define METAROCE_ABI_USER_H

#include <linux/types.h>
#include <rdma/ib_user_ioctl_cmds.h>

/* Methods of UVERBS_OBJECT_QP. */
enum metaroce_ib_qp_methods {
	/* A QP's connection and its paths: metaroce_conn_info, then
	 * num_path_info metaroce_path_info. */
	METAROCE_IB_METHOD_QP_QUERY_PATHS = (1U << UVERBS_ID_NS_SHIFT),
	/* Sets the number of paths the QP's connection sends on. */
	METAROCE_IB_METHOD_QP_SET_PATHS,
	/* Pins the QP to a stream class (before RTR). */
	METAROCE_IB_METHOD_QP_SET_STREAM_CLASS,
};

enum metaroce_ib_query_paths_attrs {
	METAROCE_IB_ATTR_QUERY_PATHS_QP_HANDLE = (1U << UVERBS_ID_NS_SHIFT),
	/* PTR_OUT, at least sizeof(struct metaroce_conn_info). */
	METAROCE_IB_ATTR_QUERY_PATHS_RESP,
};

enum metaroce_ib_set_paths_attrs {
	METAROCE_IB_ATTR_SET_PATHS_QP_HANDLE = (1U << UVERBS_ID_NS_SHIFT),
	/* PTR_IN __u32: 1 .. max_paths. */
	METAROCE_IB_ATTR_SET_PATHS_COUNT,
};

enum metaroce_ib_set_stream_class_attrs {
	METAROCE_IB_ATTR_SET_STREAM_CLASS_QP_HANDLE = (1U << UVERBS_ID_NS_SHIFT),
	/* PTR_IN __u32: 0 .. METAROCE_MAX_STREAM_CLASS. */
	METAROCE_IB_ATTR_SET_STREAM_CLASS_CLASS,
};

/* Methods of UVERBS_OBJECT_DEVICE. */
enum metaroce_ib_device_methods {
	/* The device's planes: num_planes metaroce_plane_info. */
	METAROCE_IB_METHOD_DEVICE_QUERY_PLANES = (1U << UVERBS_ID_NS_SHIFT),
	/* Binds the device to planes (CAP_NET_ADMIN). */
	METAROCE_IB_METHOD_DEVICE_SET_PLANES,
};

enum metaroce_ib_query_planes_attrs {
	/* PTR_OUT, up to METAROCE_MAX_PLANES metaroce_plane_info. */
	METAROCE_IB_ATTR_QUERY_PLANES_RESP = (1U << UVERBS_ID_NS_SHIFT),
	/* PTR_OUT __u32: how many planes the device has. */
	METAROCE_IB_ATTR_QUERY_PLANES_NUM,
};

enum metaroce_ib_set_planes_attrs {
	/* PTR_IN, 1 .. METAROCE_MAX_PLANES __u32 ifindexes, the first the
	 * device's own netdev. */
	METAROCE_IB_ATTR_SET_PLANES_IFINDEX = (1U << UVERBS_ID_NS_SHIFT),
};

/*
 * Planes: the networks of a multi-plane host, each reached through one
 * netdev, all leading to the same peers' addresses. A device sends each
 * path of a connection on one plane (Documentation/extension.rst,
 * "Planes"); plane 0 is the netdev the device was added on.
 */
#define METAROCE_MAX_PLANES 8

/* metaroce_plane_info.flags */
enum {
	/* The netdev is up with carrier: paths are sent on it. */
	METAROCE_PLANE_UP = 1 << 0,
	/* The netdev went away: the plane carries nothing until set again. */
	METAROCE_PLANE_GONE = 1 << 1,
};

/* One plane (16 bytes). */
struct metaroce_plane_info {
	__u32 ifindex;		/* its netdev */
	__u32 flags;		/* METAROCE_PLANE_* */
	__aligned_u64 tx_packets; /* datagrams the device sent on it */
};

/*
 * Stream classes: on a device that shares connections, the RC QPs to one
 * peer ride one connection per class (its own paths, congestion control and
 * fair share); both ends of a QP pair must pin the same class. 0: the
 * default.
 */
#define METAROCE_MAX_STREAM_CLASS 7

/* metaroce_conn_info.flags */
enum {
	/* The connection is shared by the QPs to one peer (members). */
	METAROCE_CONN_SHARED = 1 << 0,
};

/* metaroce_path_info.state */
enum {
	METAROCE_PATH_UNUSED = 0,
	METAROCE_PATH_ACTIVE = 1,
	METAROCE_PATH_PROBING = 2,
};

/* The most path records a reply holds. */
#define METAROCE_MAX_PATHS 64

/* A QP's connection (64 bytes). Counters wrap. */
struct metaroce_conn_info {
	__u32 flags;		/* METAROCE_CONN_* */
	__u32 members;		/* QPs on the connection (1 unless shared) */
	__u8 paths;		/* paths it sends on */
	__u8 max_paths;		/* the most it can send on */
	__u8 num_path_info;	/* metaroce_path_info records that follow */
	__u8 stream_class;	/* the QP's stream class */
	__u32 qwnd;		/* connection window, bytes */
	__u32 inflight;		/* bytes in flight */
	__u32 rate_hint;	/* fair share this end hands out, 1000 B/s (0: none) */
	__u32 peer_hint;	/* the peer's, 1000 B/s (0: none) */
	__u32 min_rtt_ns;	/* smallest RTT sample (0: none) */
	__aligned_u64 pacing_rate; /* bytes/s (0: not paced) */
	__u32 data_tx;		/* DATA packets sent, retransmissions included */
	__u32 retx;		/* retransmissions */
	__u32 timeouts;		/* path timeouts */
	__u32 moves;		/* paths moved to a new source port */
	__u32 local_ack_timeouts; /* verbs retries (IBTA 9.7.6.1.3) */
	__u32 reserved1;
};

/* One path, as its sender sees it (32 bytes). */
struct metaroce_path_info {
	__u16 src_port;		/* UDP source port (ECMP entropy) */
	__u8 state;		/* METAROCE_PATH_* */
	__u8 timeouts;		/* consecutive timeouts */
	__u32 pwnd;		/* window, bytes */
	__u32 srtt_ns;		/* smoothed RTT (0: no sample) */
	__u32 inflight;		/* bytes in flight */
	__u32 sent;		/* packets sent on it */
	__u32 ce;		/* packets the peer reported CE-marked */
	__u16 retx;		/* retransmissions sent on it */
	__u16 moves;		/* times moved to a new source port */
	__u8 plane;		/* the plane it sends on (0: the first) */
	__u8 reserved0;
	__u16 reserved;
};

#endif /* METAROCE_ABI_USER_H */
