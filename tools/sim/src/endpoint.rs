//! The contract between the engine and a simulated transport endpoint that is not
//! MetaRoCE (MetaRoCE endpoints are the real `metaroce-proto` connection, driven
//! directly by the engine).
//!
//! An endpoint is sans-I/O, like the protocol core: the engine hands it packets and
//! timer expiries with the current time and pulls the packets it wants to send when its
//! host's NIC has room. Times are nanoseconds since the start of the run. Nothing in an
//! endpoint knows the topology: the engine routes by `dst_host` and the ECMP hash of
//! `sport` (and the plane a host puts a packet on, also chosen from `sport`).

/// Which end of a one-directional flow an endpoint is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Sends the flow's data; receives ACKs, NAKs, CNPs.
    Sender,
    /// Receives the data; sends ACKs, NAKs, CNPs.
    Receiver,
}

/// A baseline transport's packet, as the engine carries it (header fields only: payload
/// bytes are not simulated, only their length).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BaseKind {
    /// Data. `psn`: packet sequence number (per QP, from 0); `len`: payload bytes;
    /// `ts`: the sender's clock when sent (echoed for RTT); `msg`: message number;
    /// `last`: the last packet of its message.
    Data {
        psn: u32,
        len: u32,
        ts: u64,
        msg: u32,
        last: bool,
    },
    /// Cumulative ACK: every PSN below `epsn` arrived. `ce`: the acked packet was
    /// CE-marked (DCTCP-style echo; DCQCN ignores it and uses CNPs); `echo`: its `ts`.
    Ack { epsn: u32, ce: bool, echo: u64 },
    /// Negative ACK: `epsn` is expected, `got` arrived instead (out of order). RoCEv2
    /// go-back-N restarts at `epsn`; IRN retransmits the holes it infers.
    Nak { epsn: u32, got: u32, echo: u64 },
    /// DCQCN congestion notification packet (RoCEv2 CNP, BTH opcode 0x81), sent by the
    /// notification point to the reaction point.
    Cnp,
}

/// One packet of a baseline endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BasePkt {
    /// The receiving endpoint (engine slot index).
    pub conn: u32,
    pub kind: BaseKind,
    /// UDP source port: ECMP entropy and plane choice.
    pub sport: u16,
    /// Bytes on the wire, all headers, preamble and IFG included.
    pub wire: u32,
    /// ECN-capable transport (may be CE-marked by a switch).
    pub ect: bool,
    /// Sent in the lossless (PFC-protected) traffic class. CNPs and ACKs may use a
    /// higher-priority class in deployments; the engine models one lossless class.
    pub lossless: bool,
}

/// What the engine needs from a baseline endpoint.
pub trait Endpoint: Send {
    /// A packet for this endpoint arrived at `now`; `ce`: it was CE-marked on the way.
    fn on_packet(&mut self, now: u64, pkt: &BasePkt, ce: bool);
    /// The next packet this endpoint sends, if one may leave at `now` (window, rate
    /// limiter and pending control packets decide). Called repeatedly while the host
    /// NIC has room; `None` until something changes (a packet, a timer).
    fn poll_transmit(&mut self, now: u64) -> Option<BasePkt>;
    /// As [`Endpoint::poll_transmit`], on a host whose NIC ports (one per plane) may be
    /// full: `may_use(sport)` says whether the port a packet with source port `sport`
    /// leaves by has room. An endpoint of several QPs (multi-plane RoCE) skips the QPs
    /// whose port is full, as a NIC schedules each port's QPs on their own. The default,
    /// for one-QP endpoints, ignores it (the engine bounds the host's total).
    fn poll_transmit_where(&mut self, now: u64, may_use: &dyn Fn(u16) -> bool) -> Option<BasePkt> {
        let _ = may_use;
        self.poll_transmit(now)
    }
    /// When the endpoint next needs [`Endpoint::on_timer`], if ever (retransmission
    /// timers, DCQCN timers, the rate limiter's next departure). After `on_timer(now)`
    /// it is never `≤ now`: a departure the rate limiter allowed at or before `now` is
    /// not repeated as a timer, the engine polls the endpoint when the NIC has room.
    fn next_timer(&self) -> Option<u64>;
    /// The time returned by `next_timer` has come.
    fn on_timer(&mut self, now: u64);
    /// Receiver: payload bytes placed, each byte once (duplicates not counted).
    fn delivered(&self) -> u64;
    /// Receiver: messages completed in order so far (verbs completion order).
    fn completed_msgs(&self) -> u64;
    /// Errors a verbs user would see (retry exceeded), this end.
    fn errors(&self) -> u32;
    /// Sender: the current sending rate limit in bytes/s, if rate-based (DCQCN).
    fn rate(&self) -> Option<f64> {
        None
    }
    /// Sender: queue a message of `len` payload bytes (an RDMA WRITE); returns its
    /// number on this endpoint (per QP for multi-QP senders), None if this end does not
    /// send. The engine polls the host afterwards.
    fn post(&mut self, _len: u64) -> Option<u32> {
        None
    }
}
