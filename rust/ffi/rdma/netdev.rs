// SPDX-License-Identifier: GPL-2.0

//! The netdev a device runs on.

use crate::ffi::bindings as b;
use core::ptr;
use kernel::str::CStr;

/// A network device, borrowed for the duration of a callback.
///
/// # Invariants
///
/// The pointer is valid, and the netdev registered, while the borrow lives.
pub(crate) struct NetDev(*mut b::net_device);

impl NetDev {
    /// Wraps a netdev pointer.
    ///
    /// # Safety
    ///
    /// `nd` is a valid, registered netdev for as long as the value lives.
    pub(super) unsafe fn from_raw(nd: *mut b::net_device) -> Self {
        NetDev(nd)
    }

    /// The raw pointer.
    pub(super) fn as_ptr(&self) -> *mut b::net_device {
        self.0
    }

    /// The interface name (`eth1`).
    pub(crate) fn name(&self) -> &CStr {
        // SAFETY: by the type invariant the netdev is valid; `name` is a
        // NUL-terminated array that lives as long as the netdev.
        unsafe { CStr::from_char_ptr((*self.0).name.as_ptr()) }
    }

    /// The interface index.
    pub(crate) fn ifindex(&self) -> i32 {
        // SAFETY: by the type invariant the netdev is valid.
        unsafe { (*self.0).ifindex }
    }

    /// The MTU, in bytes.
    pub(crate) fn mtu(&self) -> u32 {
        // SAFETY: by the type invariant the netdev is valid.
        unsafe { (*self.0).mtu }
    }

    /// The 6-byte Ethernet address, or zeros if the netdev has none.
    pub(crate) fn mac(&self) -> [u8; 6] {
        let mut mac = [0u8; 6];
        // SAFETY: by the type invariant the netdev is valid.
        let (addr, len) = unsafe { ((*self.0).dev_addr, (*self.0).addr_len) };
        if !addr.is_null() && len >= 6 {
            // SAFETY: `dev_addr` points to `addr_len` (at least 6) bytes
            // owned by the valid netdev.
            unsafe { ptr::copy_nonoverlapping(addr, mac.as_mut_ptr(), 6) };
        }
        mac
    }

    /// The link speed in Mb/s from the driver's ethtool link settings, or
    /// `None` if the driver does not know it (`SPEED_UNKNOWN`, or no
    /// `get_link_ksettings`). Process context only; takes RTNL, so the
    /// caller must not hold it (`newlink` does not).
    pub(crate) fn speed_mbps(&self) -> Option<u32> {
        // SAFETY: by the type invariant the netdev is valid; the helper only
        // reads its link settings under RTNL, which the caller does not hold.
        let s = unsafe { b::metaroce_netdev_speed_mbps(self.0) };
        (s != 0).then_some(s)
    }

    /// Administratively up and with carrier: the port is usable.
    pub(crate) fn is_up(&self) -> bool {
        // SAFETY: by the type invariant the netdev is valid.
        let running = unsafe { b::metaroce_netif_running(self.0) };
        // SAFETY: as above.
        running && unsafe { b::metaroce_netif_carrier_ok(self.0) }
    }
}

/// The node GUID of a device on an Ethernet netdev: the EUI-64 made from its
/// MAC address (RFC 4291 appendix A), as rxe derives it, in network order.
pub(crate) fn eui64_from_mac(mac: [u8; 6]) -> [u8; 8] {
    [
        mac[0] ^ 2,
        mac[1],
        mac[2],
        0xff,
        0xfe,
        mac[3],
        mac[4],
        mac[5],
    ]
}

/// The largest IB MTU (IBTA 9.4: 256 … 4096 bytes) whose payload fits a
/// netdev MTU after `overhead` bytes of headers; `None` if not even 256 fits.
pub(crate) fn ib_mtu_for(netdev_mtu: u32, overhead: u32) -> Option<(u32, u32)> {
    let room = netdev_mtu.checked_sub(overhead)?;
    // (enum ib_mtu value, bytes)
    [(5, 4096), (4, 2048), (3, 1024), (2, 512), (1, 256)]
        .into_iter()
        .find(|&(_, bytes)| bytes <= room)
}

/// A netdev reference (from `ib_device_get_netdev`), released on drop.
///
/// # Invariants
///
/// The netdev is valid and we own one reference to it.
pub(crate) struct HeldNetDev(NetDev);

impl HeldNetDev {
    /// Takes ownership of a netdev reference.
    ///
    /// # Safety
    ///
    /// `nd` is a valid netdev with a reference the caller passes on.
    pub(super) unsafe fn from_raw(nd: *mut b::net_device) -> Self {
        HeldNetDev(NetDev(nd))
    }
}

impl core::ops::Deref for HeldNetDev {
    type Target = NetDev;
    fn deref(&self) -> &NetDev {
        &self.0
    }
}

impl Drop for HeldNetDev {
    fn drop(&mut self) {
        // SAFETY: by the type invariant we own one reference.
        unsafe { b::metaroce_dev_put(self.0 .0) };
    }
}
