/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The extension API inside the module (Documentation/extension.rst): the
 * uverbs methods of include/uapi/metaroce-abi.h are declared in C
 * (helpers.c, with the RDMA core's method macros) and served by the Rust
 * driver through struct metaroce_ext_ops, which every metaroce device
 * carries right after its ib_device (struct metaroce_dev_head; Rust:
 * DeviceBox in rust/ffi/rdma/device.rs, its offset checked by the KUnit
 * layout test).
 */
#ifndef METAROCE_EXT_H
#define METAROCE_EXT_H

#include <rdma/ib_verbs.h>
#include "uapi/metaroce-abi.h"

struct metaroce_ext_ops {
	/*
	 * QP qp's connection: fills *info and up to max_paths records at
	 * paths; returns how many records it wrote, or -errno (-EINVAL: the
	 * QP has no connection, as before RTR or for UD).
	 */
	int (*qp_query_paths)(struct ib_qp *qp, struct metaroce_conn_info *info,
			      struct metaroce_path_info *paths, u32 max_paths);
	/*
	 * Has QP qp's connection send on `paths` paths; returns the count set
	 * or -errno (-EINVAL: out of 1..max_paths, or no connection).
	 */
	int (*qp_set_paths)(struct ib_qp *qp, u32 paths);
	/*
	 * Pins QP qp to stream class `cls`; 0 or -errno (-EINVAL: above
	 * METAROCE_MAX_STREAM_CLASS, or the QP is past INIT).
	 */
	int (*qp_set_stream_class)(struct ib_qp *qp, u32 cls);
	/*
	 * Device dev's planes: fills up to max records at planes; returns how
	 * many planes the device has (which may exceed max), or -errno.
	 */
	int (*dev_query_planes)(struct ib_device *dev,
				struct metaroce_plane_info *planes, u32 max);
	/*
	 * Binds device dev to the n netdevs ifindex[0..n] as its planes, the
	 * first its own netdev; 0 or -errno (-EINVAL: n outside
	 * 1..METAROCE_MAX_PLANES, ifindex[0] not the device's netdev, a
	 * repeated netdev, a loopback one; -ENODEV: no such netdev).
	 */
	int (*dev_set_planes)(struct ib_device *dev, const u32 *ifindex, u32 n);
};

/* The start of every metaroce device. */
struct metaroce_dev_head {
	struct ib_device ib;
	const struct metaroce_ext_ops *ext;
};

/* The uverbs method tree of the extension API (helpers.c). */
extern const struct uapi_definition metaroce_uapi_defs[];
/* Attaches it to a device being set up (ib_device.driver_def). */
void metaroce_set_uapi(struct ib_device *dev);

/* Kernel ULPs: the same operations on a QP or device of any RDMA device;
 * -EOPNOTSUPP if it is not a metaroce one. */
int metaroce_qp_query_paths(struct ib_qp *qp, struct metaroce_conn_info *info,
			    struct metaroce_path_info *paths, u32 max_paths);
int metaroce_qp_set_paths(struct ib_qp *qp, u32 paths);
int metaroce_qp_set_stream_class(struct ib_qp *qp, u32 cls);
/* ... and the planes of a device. */
int metaroce_device_query_planes(struct ib_device *dev,
				 struct metaroce_plane_info *planes, u32 max);
int metaroce_device_set_planes(struct ib_device *dev, const u32 *ifindex,
			       u32 n);

#endif /* METAROCE_EXT_H */
