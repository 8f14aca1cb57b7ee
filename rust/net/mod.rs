// SPDX-License-Identifier: GPL-2.0

//! The transport glue: the module's UDP tunnel and the table that maps a
//! received packet's destination connection (its QPN) to the endpoint that
//! runs the protocol core for it.
//!
//! Generic over the endpoint type, so this layer knows packets and
//! addresses but nothing of verbs objects.

use crate::ffi::net::{Dest, IpAddr, RouteCache, RxMeta, TxDatagram, UdpReceiver, UdpTunnel};
use crate::ffi::rcu_map::RcuMap;
use crate::proto::bytes::Bytes;
use crate::proto::wire::{data_in_pieces, peek_dst_conn, MAX_DATA_HEADER};
use core::sync::atomic::{AtomicU64, Ordering};
use kernel::prelude::*;
use kernel::sync::Arc;

/// Something that takes the packets of one connection.
pub(crate) trait Endpoint: Send + Sync + 'static {
    /// A datagram for this endpoint (softirq): its UDP payload, in two
    /// pieces only if it is DATA whose first piece holds its header
    /// ([`data_in_pieces`]).
    fn receive(this: &Arc<Self>, dg: Bytes<'_>, meta: &RxMeta);
}

/// Lowest QPN handed out (0 and 1 are the special QPs of IBTA 10.2.4).
const FIRST_QPN: u32 = 16;
/// The general services QP (IBTA 10.2.4).
pub(crate) const GSI_QPN: u32 = 1;
/// QPNs are 24 bits.
const QPN_MASK: u32 = 0x00ff_ffff;

/// The QPN → endpoint table, and the tunnel's receive hook. Lookups take
/// no lock (RCU), so receiving CPUs do not contend on the table; inserts and
/// removals take its bucket locks.
pub(crate) struct Dispatch<P: Endpoint> {
    table: RcuMap<P>,
    /// The GSI QP (QPN 1) of each device, by the ifindex of its netdev: a
    /// datagram for QPN 1 goes to the device that owns its destination
    /// address.
    gsi: RcuMap<P>,
    /// Datagrams too short to name a connection, or for no known one.
    pub(crate) unknown: AtomicU64,
}

impl<P: Endpoint> UdpReceiver for Dispatch<P> {
    const HEAD: usize = MAX_DATA_HEADER;

    /// DATA goes to the core in pieces (its payload is copied once, from the
    /// device's page into the target memory); anything else whole.
    fn takes_pieces(&self, head: &[u8]) -> bool {
        data_in_pieces(head)
    }

    fn receive(&self, head: &[u8], tail: &[u8], meta: &RxMeta) {
        let Ok(qpn) = peek_dst_conn(head) else {
            self.unknown.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let dg = Bytes::new(head, tail);
        let receive = |ep: &Arc<P>| P::receive(ep, dg, meta);
        let found = if qpn == GSI_QPN {
            meta.dst
                .local_ifindex()
                .and_then(|i| self.gsi.with(i as u32, receive))
        } else {
            self.table.with(qpn, receive)
        };
        if found.is_none() {
            self.unknown.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The module-wide transport: one UDP port, every QP of every device.
pub(crate) struct Transport<P: Endpoint> {
    dispatch: Arc<Dispatch<P>>,
    tunnel: Pin<KBox<UdpTunnel<Dispatch<P>>>>,
    port: u16,
}

impl<P: Endpoint> Transport<P> {
    /// Opens the tunnel sockets on `port`.
    pub(crate) fn new(port: u16) -> Result<Self> {
        let dispatch = Arc::new(
            Dispatch {
                table: RcuMap::new()?,
                gsi: RcuMap::new()?,
                unknown: AtomicU64::new(0),
            },
            GFP_KERNEL,
        )?;
        let tunnel = UdpTunnel::new(port, dispatch.clone())?;
        Ok(Transport {
            dispatch,
            tunnel,
            port,
        })
    }

    /// Enters an endpoint under a fresh QPN, which `make` builds it with. QPNs
    /// are drawn at random from the 24-bit space (not handed out in order as
    /// rxe does): a blind attacker must guess the QPN as well as the token
    /// (Documentation/transport.rst, "Identity and threat model"). A taken
    /// number moves on to the next one; `EBUSY` if every number is taken.
    pub(crate) fn insert(&self, make: impl FnOnce(u32) -> Result<Arc<P>>) -> Result<(u32, Arc<P>)> {
        let mut q = crate::ffi::random::random_u32() & QPN_MASK;
        let mut tries = 0u32;
        let qpn = loop {
            if q >= FIRST_QPN && !self.dispatch.table.contains(q) {
                break q;
            }
            tries += 1;
            if tries > QPN_MASK {
                return Err(EBUSY);
            }
            q = q.wrapping_add(1) & QPN_MASK;
        };
        let ep = make(qpn)?;
        // Taken since the check above (by a racing create): as if every
        // number were taken, rather than a second draw.
        self.dispatch
            .table
            .insert(qpn, ep.clone())
            .map_err(|e| if e == EEXIST { EBUSY } else { e })?;
        Ok((qpn, ep))
    }

    /// Enters the GSI QP (QPN 1) of the device on netdev `ifindex`, which
    /// `make` builds. `EBUSY` if that device has one.
    pub(crate) fn insert_gsi(
        &self,
        ifindex: i32,
        make: impl FnOnce(u32) -> Result<Arc<P>>,
    ) -> Result<(u32, Arc<P>)> {
        let key = ifindex as u32;
        if self.dispatch.gsi.contains(key) {
            return Err(EBUSY);
        }
        let ep = make(GSI_QPN)?;
        self.dispatch
            .gsi
            .insert(key, ep.clone())
            .map_err(|e| if e == EEXIST { EBUSY } else { e })?;
        Ok((GSI_QPN, ep))
    }

    /// Removes the GSI QP of the device on `ifindex` (see [`Self::remove`]).
    pub(crate) fn remove_gsi(&self, ifindex: i32) -> bool {
        self.dispatch.gsi.remove(ifindex as u32)
    }

    /// Removes an endpoint: no datagram reaches it once this returns
    /// (receives already running may still finish). True if it was listed.
    /// The table's reference is dropped an RCU grace period later, in
    /// process context.
    pub(crate) fn remove(&self, qpn: u32) -> bool {
        self.dispatch.table.remove(qpn)
    }

    /// Datagrams dropped before reaching a QP: too short, or for no QP
    /// (module-wide).
    pub(crate) fn unknown(&self) -> u64 {
        self.dispatch.unknown.load(Ordering::Relaxed) + self.tunnel.malformed()
    }

    /// The UDP port the transport sends to and receives on.
    pub(crate) fn port(&self) -> u16 {
        self.port
    }

    /// Sends the first `len` bytes of datagram `d`; `Ok(true)`: the route's
    /// netdev takes UDP GSO bursts (see
    /// [`UdpTunnel::send_datagram`]).
    pub(crate) fn send_datagram(
        &self,
        d: TxDatagram,
        len: usize,
        to: &Dest,
        routes: Option<(&mut RouteCache, usize)>,
    ) -> Result<bool> {
        self.tunnel.send_datagram(d, len, to, routes)
    }

    /// Sends one datagram to the peer's port through netdev `oif` (see
    /// [`UdpTunnel::send`]).
    pub(crate) fn send(
        &self,
        src: &IpAddr,
        dst: &IpAddr,
        oif: i32,
        src_port: u16,
        ect: bool,
        data: &[u8],
    ) -> Result {
        self.tunnel
            .send(src, dst, oif, src_port, self.port, ect, data.len(), |buf| {
                let n = data.len().min(buf.len());
                buf[..n].copy_from_slice(&data[..n]);
                n
            })
    }
}
