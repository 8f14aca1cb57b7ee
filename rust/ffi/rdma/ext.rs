// SPDX-License-Identifier: GPL-2.0

//! The extension API: what a MetaRoCE-aware application or ULP can ask of a
//! QP beyond verbs (`include/uapi/metaroce-abi.h`; Documentation/
//! extension.rst), in the manner of mlx5dv and efadv.
//!
//! The uverbs methods are declared in C (`helpers.c`, with the RDMA core's
//! method macros: `METAROCE_IB_METHOD_QP_QUERY_PATHS` and `_SET_PATHS` on
//! the QP object) and reach the driver through the `metaroce_ext_ops` table
//! each device carries after its `ib_device` ([`super::device`]'s
//! `DeviceBox`); kernel ULPs call the exported `metaroce_qp_query_paths()` and
//! `metaroce_qp_set_paths()`, which take the same way. A driver enables both by
//! implementing [`Driver::qp_query_paths`] and [`Driver::qp_set_paths`].
//!
//! Planes, on the device object: `METAROCE_IB_METHOD_DEVICE_QUERY_PLANES` and
//! `_SET_PLANES` (`metaroce_device_query_planes()` / `_set_planes()` for
//! ULPs), served by [`Driver::dev_query_planes`] and [`Driver::dev_set_planes`].

use super::device::Device;
use super::qp::QpObject;
use super::{Adapter, Driver};
use crate::ffi::bindings as b;
use kernel::ffi::c_int;
use kernel::prelude::*;

/// The most planes a device has (`METAROCE_MAX_PLANES`).
pub(crate) const MAX_PLANES: usize = b::METAROCE_MAX_PLANES as usize;

/// One plane as [`Driver::dev_query_planes`] reports it (the
/// `metaroce_plane_info` of the ABI).
#[derive(Clone, Copy, Default)]
pub(crate) struct PlaneInfo {
    /// Its netdev.
    pub(crate) ifindex: i32,
    /// The netdev is up with carrier.
    pub(crate) up: bool,
    /// The netdev went away.
    pub(crate) gone: bool,
    /// Datagrams sent on it.
    pub(crate) tx_packets: u64,
}

/// The state of netdev `ifindex` (in the initial network namespace): `None` if
/// there is none, else (up with carrier, loopback).
pub(crate) fn netdev_state(ifindex: i32) -> Option<(bool, bool)> {
    // SAFETY: looks the netdev up under RCU and reads two flags; any value
    // is valid.
    let st = unsafe { b::metaroce_netdev_state(ifindex) };
    (st >= 0).then_some((st & 1 != 0, st & 2 != 0))
}

/// A QP's connection as [`Driver::qp_query_paths`] reports it (the
/// `metaroce_conn_info` of the ABI; counters wrap).
#[derive(Clone, Copy, Default)]
pub(crate) struct ConnInfo {
    /// The connection is shared by the QPs to one peer.
    pub(crate) shared: bool,
    /// QPs on the connection (1 unless shared).
    pub(crate) members: u32,
    /// Paths it sends on.
    pub(crate) paths: u8,
    /// The most paths it can send on.
    pub(crate) max_paths: u8,
    /// The QP's stream class.
    pub(crate) stream_class: u8,
    /// Connection window and bytes in flight.
    pub(crate) qwnd: u32,
    /// Bytes in flight.
    pub(crate) inflight: u32,
    /// The fair share this end hands out and the peer's, 1000 bytes/s.
    pub(crate) rate_hint: u32,
    /// The peer's hint, 1000 bytes/s.
    pub(crate) peer_hint: u32,
    /// Smallest RTT sample, ns (0: none).
    pub(crate) min_rtt_ns: u32,
    /// Pacing rate, bytes/s (0: not paced).
    pub(crate) pacing_rate: u64,
    /// DATA packets sent, retransmissions included.
    pub(crate) data_tx: u32,
    /// Retransmissions.
    pub(crate) retx: u32,
    /// Path timeouts.
    pub(crate) timeouts: u32,
    /// Paths moved to a new source port.
    pub(crate) moves: u32,
    /// Local ACK timeouts (verbs retries, IBTA 9.7.6.1.3).
    pub(crate) local_ack_timeouts: u32,
}

/// One path as its sender sees it (the `metaroce_path_info` of the ABI).
#[derive(Clone, Copy, Default)]
pub(crate) struct PathInfo {
    /// UDP source port.
    pub(crate) src_port: u16,
    /// 0 unused, 1 active, 2 probing (`METAROCE_PATH_*`).
    pub(crate) state: u8,
    /// Consecutive timeouts.
    pub(crate) timeouts: u8,
    /// Window, bytes.
    pub(crate) pwnd: u32,
    /// Smoothed RTT, ns (0: no sample).
    pub(crate) srtt_ns: u32,
    /// Bytes in flight.
    pub(crate) inflight: u32,
    /// Packets sent on it.
    pub(crate) sent: u32,
    /// Packets the peer reported CE-marked.
    pub(crate) ce: u32,
    /// Retransmissions sent on it.
    pub(crate) retx: u16,
    /// Moves to a new source port.
    pub(crate) moves: u16,
    /// The plane it sends on.
    pub(crate) plane: u8,
}

/// Where [`Driver::qp_query_paths`] writes: the connection, then its paths
/// while there is room.
pub(crate) struct PathsOut<'a> {
    info: &'a mut b::metaroce_conn_info,
    paths: &'a mut [b::metaroce_path_info],
    n: usize,
}

impl PathsOut<'_> {
    /// Records the connection.
    pub(crate) fn conn(&mut self, c: &ConnInfo) {
        *self.info = b::metaroce_conn_info {
            flags: if c.shared { b::METAROCE_CONN_SHARED } else { 0 },
            members: c.members,
            paths: c.paths,
            max_paths: c.max_paths,
            stream_class: c.stream_class,
            qwnd: c.qwnd,
            inflight: c.inflight,
            rate_hint: c.rate_hint,
            peer_hint: c.peer_hint,
            min_rtt_ns: c.min_rtt_ns,
            pacing_rate: c.pacing_rate,
            data_tx: c.data_tx,
            retx: c.retx,
            timeouts: c.timeouts,
            moves: c.moves,
            local_ack_timeouts: c.local_ack_timeouts,
            ..Default::default()
        };
    }

    /// Appends path `p`; false (and nothing written) when the reply is full.
    pub(crate) fn path(&mut self, p: &PathInfo) -> bool {
        let Some(slot) = self.paths.get_mut(self.n) else {
            return false;
        };
        *slot = b::metaroce_path_info {
            src_port: p.src_port,
            state: p.state,
            timeouts: p.timeouts,
            pwnd: p.pwnd,
            srtt_ns: p.srtt_ns,
            inflight: p.inflight,
            sent: p.sent,
            ce: p.ce,
            retx: p.retx,
            moves: p.moves,
            plane: p.plane,
            ..Default::default()
        };
        self.n += 1;
        true
    }
}

impl<T: Driver> Adapter<T> {
    /// The extension ops every device of `T` carries (null entries if `T`
    /// does not implement them).
    pub(super) const EXT_OPS: b::metaroce_ext_ops = b::metaroce_ext_ops {
        qp_query_paths: if T::HAS_QP_QUERY_PATHS {
            Some(Self::qp_query_paths)
        } else {
            None
        },
        qp_set_paths: if T::HAS_QP_QUERY_PATHS {
            Some(Self::qp_set_paths)
        } else {
            None
        },
        qp_set_stream_class: if T::HAS_QP_QUERY_PATHS {
            Some(Self::qp_set_stream_class)
        } else {
            None
        },
        dev_query_planes: if T::HAS_DEV_SET_PLANES {
            Some(Self::dev_query_planes)
        } else {
            None
        },
        dev_set_planes: if T::HAS_DEV_SET_PLANES {
            Some(Self::dev_set_planes)
        } else {
            None
        },
    };

    /// `metaroce_ext_ops.dev_query_planes`: fills up to `max` records,
    /// returns how many planes the device has.
    ///
    /// # Safety
    ///
    /// Called only through a device's `metaroce_ext_ops` (`helpers.c`: a
    /// uverbs method on a user context of the device, which the core keeps
    /// registered for the call, or a kernel ULP's call on a device it holds),
    /// with `planes` valid for writes of `max` records.
    unsafe extern "C" fn dev_query_planes(
        ib: *mut b::ib_device,
        planes: *mut b::metaroce_plane_info,
        max: u32,
    ) -> c_int {
        // SAFETY: by the caller's guarantee `ib` is a live device of ours.
        let dev = unsafe { Device::<T>::from_raw(ib) };
        let mut info = [PlaneInfo::default(); MAX_PLANES];
        let n = T::dev_query_planes(dev, &mut info).min(MAX_PLANES);
        let room = (max as usize).min(n);
        if room > 0 && !planes.is_null() {
            // SAFETY: the caller's buffer of `max >= room` records.
            let out = unsafe { core::slice::from_raw_parts_mut(planes, room) };
            for (o, p) in out.iter_mut().zip(info.iter()) {
                *o = b::metaroce_plane_info {
                    ifindex: p.ifindex as u32,
                    flags: (if p.up { b::METAROCE_PLANE_UP } else { 0 })
                        | (if p.gone { b::METAROCE_PLANE_GONE } else { 0 }),
                    tx_packets: p.tx_packets,
                };
            }
        }
        n as c_int
    }

    /// `metaroce_ext_ops.dev_set_planes`: 0 or `-errno`.
    ///
    /// # Safety
    ///
    /// As [`Self::dev_query_planes`], with `ifindex` valid for reads of `n`
    /// values.
    unsafe extern "C" fn dev_set_planes(
        ib: *mut b::ib_device,
        ifindex: *const u32,
        n: u32,
    ) -> c_int {
        // SAFETY: by the caller's guarantee `ib` is a live device of ours.
        let dev = unsafe { Device::<T>::from_raw(ib) };
        if n == 0 || n as usize > MAX_PLANES || ifindex.is_null() {
            return EINVAL.to_errno();
        }
        let mut list = [0i32; MAX_PLANES];
        // SAFETY: the caller's `n` values (at most `MAX_PLANES`, checked).
        let src = unsafe { core::slice::from_raw_parts(ifindex, n as usize) };
        for (d, s) in list.iter_mut().zip(src) {
            // An ifindex above i32::MAX names no netdev.
            *d = i32::try_from(*s).unwrap_or(0);
        }
        match T::dev_set_planes(dev, &list[..n as usize]) {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        }
    }

    /// `metaroce_ext_ops.qp_query_paths`: returns the path records written.
    ///
    /// # Safety
    ///
    /// Called only through a device's `metaroce_ext_ops` (`helpers.c`: a
    /// uverbs method, whose QP handle the core resolved to a live QP of
    /// this device and holds for the call, or a kernel ULP's call with a QP
    /// it created on this device and does not destroy meanwhile), with
    /// `info` valid for writes and `paths` for `max_paths` records.
    unsafe extern "C" fn qp_query_paths(
        ibqp: *mut b::ib_qp,
        info: *mut b::metaroce_conn_info,
        paths: *mut b::metaroce_path_info,
        max_paths: u32,
    ) -> c_int {
        // SAFETY: by the caller's guarantee `ibqp` is a live QP of ours
        // (created by `create_qp`, so its data is set) for the call.
        let o = unsafe { QpObject::<T>::from_raw(ibqp) };
        // SAFETY: the caller's buffers, valid and unaliased for the call;
        // an empty slice when there is no room.
        let (info, paths) = unsafe {
            (
                &mut *info,
                if max_paths == 0 || paths.is_null() {
                    &mut [][..]
                } else {
                    core::slice::from_raw_parts_mut(paths, max_paths as usize)
                },
            )
        };
        let mut out = PathsOut { info, paths, n: 0 };
        match T::qp_query_paths(&o.data().qp, &mut out) {
            Ok(()) => out.n as c_int,
            Err(e) => e.to_errno(),
        }
    }

    /// `metaroce_ext_ops.qp_set_paths`: returns the count set.
    ///
    /// # Safety
    ///
    /// As [`Self::qp_query_paths`].
    unsafe extern "C" fn qp_set_paths(ibqp: *mut b::ib_qp, paths: u32) -> c_int {
        // SAFETY: as in `qp_query_paths`.
        let o = unsafe { QpObject::<T>::from_raw(ibqp) };
        match T::qp_set_paths(&o.data().qp, paths) {
            Ok(n) => n.min(i32::MAX as u32) as c_int,
            Err(e) => e.to_errno(),
        }
    }

    /// `metaroce_ext_ops.qp_set_stream_class`: 0 or `-errno`.
    ///
    /// # Safety
    ///
    /// As [`Self::qp_query_paths`].
    unsafe extern "C" fn qp_set_stream_class(ibqp: *mut b::ib_qp, class: u32) -> c_int {
        // SAFETY: as in `qp_query_paths`.
        let o = unsafe { QpObject::<T>::from_raw(ibqp) };
        match T::qp_set_stream_class(&o.data().qp, class) {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        }
    }
}
