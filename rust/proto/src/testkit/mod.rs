//! Reusable applications for tests, the simulator, benchmarks, fuzzing and examples
//! (host only: the kernel module does not include this file). `no_std`, no allocation.

use crate::bytes::Bytes;
use crate::conn::{App, ConnError, MsgInfo, Placement, Refuse, Rnr, Unreadable};
use crate::ident::Ident;
use crate::stream::{Stream, StreamTable};
use crate::wire::{Op, Reth};

/// `dg` as a network stack may hand it over (Linux: an skb's head and a page fragment):
/// a DATA datagram cut in two somewhere after its longest possible header (at a point
/// that depends on its bytes, so a run sees many cuts, none of them random), any
/// other datagram whole. The model nodes deliver every datagram this way, so every
/// test of them takes payloads in pieces as the kernel does.
pub fn as_received(dg: &[u8]) -> Bytes<'_> {
    let lo = crate::wire::MAX_DATA_HEADER.min(dg.len());
    if !crate::wire::data_in_pieces(&dg[..lo]) {
        return Bytes::from(dg);
    }
    let h = dg.iter().take(24).fold(0usize, |a, &b| {
        a.wrapping_mul(31).wrapping_add(usize::from(b))
    });
    let (head, tail) = dg.split_at(lo + h % (dg.len() - lo + 1));
    Bytes::new(head, tail)
}

/// A bulk sender and counting receiver: every stream below `streams` (at most
/// [`BULK_STREAMS`]) carries `limit` messages (`u32::MAX`: endless), each described by
/// `msg`. Payload bytes are copied
/// from `src` (as many as it has; none if it is empty); received bytes are only counted.
#[derive(Clone, Copy, Debug)]
pub struct BulkApp<'a> {
    /// What every message is.
    pub msg: MsgInfo,
    /// Streams with messages: `0..streams`.
    pub streams: u16,
    /// Messages per stream.
    pub limit: u32,
    /// Bytes supplied as every packet's payload (a prefix of it).
    pub src: &'a [u8],
    /// Refuse the first packet of this message (on any stream) with RNR code 1.
    pub rnr_msn: Option<u32>,
    /// Payload bytes handed to [`App::place`] (refused ones included).
    pub placed: u64,
    /// Messages completed at the receiver.
    pub completed_msgs: u64,
    /// Messages acknowledged at the sender.
    pub acked_msgs: u64,
    /// [`App::error`] calls.
    pub errors: u32,
    /// The streams' state (keys [`Ident::DEFAULT`]: [`BulkApp::start_streams`] for
    /// others).
    pub table: StreamTable<BULK_STREAMS>,
}

/// The streams a [`BulkApp`] has room for.
pub const BULK_STREAMS: usize = 16;

impl Default for BulkApp<'_> {
    fn default() -> Self {
        BulkApp::write(0, 0)
    }
}

impl BulkApp<'_> {
    /// RDMA WRITEs of `len` bytes (to va 0, rkey 0) on streams `0..streams`, endless.
    pub fn write(len: u32, streams: u16) -> Self {
        BulkApp {
            msg: MsgInfo {
                op: Op::Write,
                len,
                reth: Reth::default(),
                imm: 0,
                tag: 0,
                solicited: false,
                mtu: 0,
            },
            streams,
            limit: u32::MAX,
            src: &[],
            rnr_msn: None,
            placed: 0,
            completed_msgs: 0,
            acked_msgs: 0,
            errors: 0,
            table: StreamTable::new(Ident::DEFAULT, Ident::DEFAULT),
        }
    }

    /// Every stream starts over under the connection's keys (its
    /// [`crate::conn::Config::tx_ident`] and [`crate::conn::Config::rx_ident`]).
    pub fn start_streams(&mut self, tx: Ident, rx: Ident) {
        self.table = StreamTable::new(tx, rx);
    }

    /// The same, with every message's RETH naming `(va, rkey)` and the message length.
    pub fn with_reth(mut self, va: u64, rkey: u32) -> Self {
        self.msg.reth = Reth {
            va,
            rkey,
            len: self.msg.len,
        };
        self
    }
}

impl App for BulkApp<'_> {
    fn stream(&mut self, s: u16) -> Option<&mut Stream> {
        self.table.get(s)
    }
    fn ready_stream(&mut self) -> Option<(u16, MsgInfo)> {
        let (streams, limit, msg) = (self.streams, self.limit, self.msg);
        self.table
            .next_ready(streams, |_, msn| (msn < limit).then_some(msg))
    }
    fn restart_rx(&mut self, id: Ident) {
        self.table.restart_rx(id);
    }
    fn message(&mut self, stream: u16, msn: u32) -> Option<MsgInfo> {
        (stream < self.streams && msn < self.limit).then_some(self.msg)
    }
    fn payload(&mut self, _: u16, _: u32, _: u32, dst: &mut [u8]) -> Result<(), Unreadable> {
        let n = dst.len().min(self.src.len());
        if let (Some(d), Some(s)) = (dst.get_mut(..n), self.src.get(..n)) {
            d.copy_from_slice(s);
        }
        Ok(())
    }
    fn place(&mut self, p: &Placement<'_>) -> Result<(), Refuse> {
        self.placed += p.payload.len() as u64;
        if self.rnr_msn == Some(p.msn) && p.offset == 0 {
            return Err(Rnr(1).into());
        }
        Ok(())
    }
    fn complete(&mut self, _: u16, _: u32) {
        self.completed_msgs += 1;
    }
    fn acked(&mut self, _: u16, _: u32) {
        self.acked_msgs += 1;
    }
    fn error(&mut self, _: ConnError) {
        self.errors += 1;
    }
}

mod pair;
pub mod rc;
pub mod shared;
