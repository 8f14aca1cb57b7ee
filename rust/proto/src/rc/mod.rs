//! The RC engine (IBTA chapter 9.7 and 10.8 semantics of a reliable-connected QP, rxe's
//! `rxe_req.c`, `rxe_resp.c` and `rxe_comp.c`), sans-I/O: work queue entries in, messages
//! for the [`super::conn::Connection`] out, completions in order. The host (the kernel
//! module; a model in tests) supplies its rings, memory, CQs and QP state through the
//! small traits of [`env`]; the engine supplies the connection's [`App`] through
//! [`Bound`].
//!
//! Shape: each send WQE becomes one message on stream [`REQ`] (verbs order). Receive-
//! consuming messages (SEND, SEND_WITH_IMM, SEND_WITH_INV, WRITE_WITH_IMM) carry the low
//! 16 bits of their receive sequence number (RSN) in the message tag, so a packet that
//! overtakes earlier messages is placed straight into its receive. RDMA READ and atomic
//! requests are answered once complete (so exactly once) by a response message on stream
//! [`RESP`]; the requester matches the k-th response to its k-th READ/atomic WQE and
//! completes it (in SQ order) when the request is acknowledged and the response whole.
//!
//! Files: `types` (opcodes, statuses, WQE/CQE shapes), `env` (the host's traits), `req`
//! (requester), `resp` (responder), `comp` (completer, error state, flush), `sge`
//! (gather/scatter), `datagram` (the ring and receive helpers UD QPs share), `uc`
//! (unreliable connected QPs: the same rings and completions, no reliability).
//!
//! Storage: the per-QP tables are the caller's ([`Tables`]; sized by the SQ, the RQ,
//! [`RX_TRACK`] and the QP's responder resources, [`resp_slots`]); the engine never
//! allocates and never panics.

mod comp;
mod datagram;
pub mod env;
mod req;
mod resp;
mod sge;
pub mod types;
mod uc;

pub use env::{
    AtomicOp, Completions, Env, HostSge, LocalOps, MemError, Memory, Observe, QpControl, RecvQueue,
    SendQueue,
};
pub use types::{
    access, send_flags, wc_flags, Attrs, Cqe, QpMode, RecvWqe, ScatterGather, SendWqe, Sge,
    WcOpcode, WcStatus, WrOpcode,
};
pub use uc::{UcLink, UcRx, UcStats};

use super::conn::{App, Config, ConnError, Event, MsgInfo, Placement, Refuse, Unreadable};
use super::ident::Ident;
use super::stream::{Stream, StreamTable};
use super::wire::Op;

/// Stream of requests (the SQ's messages).
pub const REQ: u16 = 0;
/// Stream of READ and atomic responses.
pub const RESP: u16 = 1;
/// The length of the responder's `resps` table for `max_dest_rd_atomic` responder
/// resources (IBTA 9.7.5.1.4, 10.2.4: the READ and atomic requests this QP takes at once
/// as a responder; 0: it takes none, and such a request is an invalid request): twice
/// that, as a power of two. A response holds its slot from its request's placement until
/// the requester acknowledges it, and a requester that keeps `max_rd_atomic` (at most this
/// `max_dest_rd_atomic`, IBTA 10.2.4) READs in flight sends the next one as soon as a
/// response is whole, before its ACK reaches the responder: the second half is room for
/// those ACKs in flight. A request past the table waits (RNR,
/// Documentation/transport.rst). At most 256 (`max_dest_rd_atomic` up to 128).
pub fn resp_slots(max_dest_rd_atomic: u8) -> usize {
    match max_dest_rd_atomic {
        0 => 0,
        d => (2 * usize::from(d)).next_power_of_two(),
    }
}
/// Messages the receiver tracks ahead of the oldest incomplete one (the `rx` table, and
/// with an SRQ the `recvs` and `taken` tables; `taken_sges` holds this many times the
/// SRQ's SGEs; with an RQ, `recvs` needs no more than the RQ's slots): the stream
/// window. The
/// oldest incomplete message has a packet at or above the stream's cumulative SSN, so
/// message `rx_msn + k` starts at least `k` SSNs above it, and a packet within the
/// window ([`super::stream::STREAM_WINDOW`] SSNs) belongs to a message less than that
/// many ahead.
pub const RX_TRACK: usize = super::stream::STREAM_WINDOW as usize;

/// A send WQE turned into a message (one entry per SQ slot; 64 bytes): the fields of
/// its WQE the engine reads again (a copy: the consumer may rewrite its ring), the tag
/// its message carries, and its progress. [`SendMsg::wqe`] and [`SendMsg::info`] give
/// the WQE and the message back.
#[derive(Clone, Copy, Debug, Default)]
pub struct SendMsg {
    wr_id: u64,
    remote_addr: u64,
    compare_add: u64,
    swap: u64,
    ex: u32,
    /// `rkey`, or a CMP_SWAP's or FETCH_ADD's `atomic_rkey`: the key its message
    /// carries.
    rkey: u32,
    length: u32,
    num_sge: u32,
    slot: u32,
    /// The message's tag (its RSN or response number, [`req`]).
    tag: u16,
    /// `opcode`; 255 for any larger value (no opcode is).
    opcode: u8,
    /// The [`send_flags`] bits of `send_flags` (FENCE, SIGNALED, SOLICITED, INLINE).
    send_flags: u8,
    /// The request is acknowledged.
    acked: bool,
    /// A READ or atomic: completes only once its response is whole.
    needs_resp: bool,
    resp_done: bool,
    /// The WQE failed: it completes with this status once every earlier WQE has, and the
    /// QP enters the error state.
    fail: Option<WcStatus>,
}

/// An SRQ WQE a message took (one entry per tracked RSN).
#[derive(Clone, Copy, Debug, Default)]
pub struct Taken {
    valid: bool,
    wr_id: u64,
    num_sge: u32,
}

/// A READ or atomic request the responder took and the response it owes, by response
/// number (one entry per responder resource, [`resp_slots`]; 40 bytes). The request
/// carries its number in its tag, so it is stored here as it is placed, out of order,
/// and answered here when it completes.
#[derive(Clone, Copy, Debug, Default)]
pub struct Resp {
    /// The remote buffer (a READ's source, an atomic's target).
    va: u64,
    /// An atomic's operands as carried (swap or addend, then compare); once executed,
    /// the original value in the first 8 bytes, big-endian as carried.
    data: [u8; 16],
    rkey: u32,
    /// Bytes to read (READ).
    len: u32,
    /// The request's MSN.
    msn: u32,
    /// `None`: free. The request's op until it executes, then the response's
    /// (`ReadResp`, `AtomicResp`).
    op: Option<Op>,
    /// Not served ([`RESP_ACCESS`] in the message tag); 0: served.
    status: u16,
}

/// The tag of a READ/atomic response whose request the responder could not serve when it
/// executed it (the key, range or access right no longer allow it; IBTA 9.7.5.2.4): the
/// requester completes the WQE with `IB_WC_REM_ACCESS_ERR`. 0: served.
pub const RESP_ACCESS: u16 = 1;

/// What the responder knows of a request-stream message once a packet of it was placed
/// (one entry per tracked MSN; 1 byte): its op. What it completes with is kept by what
/// it consumes: a receive's in [`RxRecv`] (by RSN), a READ's or atomic's in [`Resp`]
/// (by response number).
#[derive(Clone, Copy, Debug, Default)]
pub struct RxMsg {
    /// `None`: no packet of the message placed yet.
    op: Option<Op>,
}

/// What a receive-consuming message will complete its receive with (one entry per
/// tracked RSN; 12 bytes): its length, immediate data (or SEND_WITH_INV's rkey), and
/// whether it asked for a solicited event.
#[derive(Clone, Copy, Debug, Default)]
pub struct RxRecv {
    len: u32,
    imm: u32,
    solicited: bool,
}

/// The engine's per-QP tables, in caller-provided storage.
pub trait Tables {
    /// The host's scatter/gather element ([`HostSge::Sge`] of the host it runs with).
    type Sge: ScatterGather;
    /// In-flight send messages by MSN modulo the length (the SQ's slots).
    fn sends(&mut self) -> &mut [SendMsg];
    /// The MSN of each READ/atomic by response number modulo the length (the SQ's slots).
    fn reads(&mut self) -> &mut [u32];
    /// Received messages by MSN modulo the length ([`RX_TRACK`]).
    fn rx(&mut self) -> &mut [RxMsg];
    /// Receive-consuming messages by RSN modulo the length (a power of two: [`RX_TRACK`]
    /// with an SRQ; with an RQ, its slots if fewer).
    fn recvs(&mut self) -> &mut [RxRecv];
    /// SRQ WQEs taken, by RSN modulo the length ([`RX_TRACK`]; may be empty without an
    /// SRQ).
    fn taken(&mut self) -> &mut [Taken];
    /// Their SGEs, `srq_sge` per entry of `taken`.
    fn taken_sges(&mut self) -> &mut [Self::Sge];
    /// READ/atomic requests and responses owed by response number modulo the length
    /// ([`resp_slots`] of the QP's `max_dest_rd_atomic`; empty for 0).
    fn resps(&mut self) -> &mut [Resp];
}

/// [`Tables`] from seven growable or fixed buffers (`Vec`, arrays, slices).
#[derive(Clone, Debug, Default)]
pub struct Storage<S, R, X, V, T, G, P, Q = Sge> {
    /// See [`Tables::sends`].
    pub sends: S,
    /// See [`Tables::reads`].
    pub reads: R,
    /// See [`Tables::rx`].
    pub rx: X,
    /// See [`Tables::recvs`].
    pub recvs: V,
    /// See [`Tables::taken`].
    pub taken: T,
    /// See [`Tables::taken_sges`].
    pub taken_sges: G,
    /// See [`Tables::resps`].
    pub resps: P,
    /// The SGE type `taken_sges` holds.
    pub sge: core::marker::PhantomData<Q>,
}

impl<S, R, X, V, T, G, P, Q: ScatterGather> Tables for Storage<S, R, X, V, T, G, P, Q>
where
    S: AsMut<[SendMsg]>,
    R: AsMut<[u32]>,
    X: AsMut<[RxMsg]>,
    V: AsMut<[RxRecv]>,
    T: AsMut<[Taken]>,
    G: AsMut<[Q]>,
    P: AsMut<[Resp]>,
{
    type Sge = Q;
    fn sends(&mut self) -> &mut [SendMsg] {
        self.sends.as_mut()
    }
    fn reads(&mut self) -> &mut [u32] {
        self.reads.as_mut()
    }
    fn rx(&mut self) -> &mut [RxMsg] {
        self.rx.as_mut()
    }
    fn recvs(&mut self) -> &mut [RxRecv] {
        self.recvs.as_mut()
    }
    fn taken(&mut self) -> &mut [Taken] {
        self.taken.as_mut()
    }
    fn taken_sges(&mut self) -> &mut [Q] {
        self.taken_sges.as_mut()
    }
    fn resps(&mut self) -> &mut [Resp] {
        self.resps.as_mut()
    }
}

/// The entry of `t` for sequence number `n` (modulo its length); `None` if `t` is empty.
fn at<X>(t: &mut [X], n: u32) -> Option<&mut X> {
    let i = (n as usize).checked_rem(t.len())?;
    t.get_mut(i)
}

/// The RC engine of one QP: requester, responder and completer state. Ring indices are
/// the host's slot numbers; message and receive numbers wrap at 2^32.
#[derive(Clone, Debug)]
pub struct Engine<T> {
    t: T,
    /// SQ slot of the oldest WQE not yet completed.
    sq_cons: u32,
    /// SQ slot of the next WQE to turn into a message (from `sq_cons` up to it are
    /// messages in flight, MSN `sq_msn` onwards).
    scan: u32,
    /// MSN of the oldest WQE not yet completed.
    sq_msn: u32,
    /// WQEs turned into messages (MSN of the next one).
    msns: u32,
    /// Receive-consuming messages sent (RSN of the next).
    tx_rsn: u32,
    /// RQ slot of the oldest posted receive not yet completed, and its RSN.
    rq_cons: u32,
    rx_rsn: u32,
    /// Requester: READ/atomic WQEs sent (number of the next), and responses whole (so
    /// `tx_reads - reads_done` are outstanding, at most `max_rd_atomic`).
    tx_reads: u32,
    reads_done: u32,
    /// Responder: responses owed (`resp_next - resp_acked` of them); the requests
    /// numbered from `resp_next` on are placed or still to come.
    resp_next: u32,
    resp_acked: u32,
    /// Responder: MSN of the next request-stream message to complete.
    rx_msn: u32,
    /// A receive completion was lost to a full CQ: the QP enters the error state
    /// (IBTA 11.4.2.1, class G) at the next [`Engine::settle`].
    cq_lost: bool,
    /// Moved to SQD with `IB_QP_EN_SQD_ASYNC_NOTIFY`: raise `IB_EVENT_SQ_DRAINED` once
    /// no send is in progress.
    sqd_notify: bool,
    /// The connection's failure, reported on the oldest WQE.
    error: Option<WcStatus>,
    /// `IB_EVENT_QP_LAST_WQE_REACHED` raised since the QP entered the error state.
    last_wqe_sent: bool,
    /// The receive (by RSN) a message could not be placed into, and its status.
    rx_error: Option<(u32, WcStatus)>,
    /// Responder: the oldest request refused for good, waiting for the earlier ones
    /// to complete before it is NAKed ([`Refuse::Held`]).
    held: Option<Held>,
    /// Requester: a NAK named the refused request (it carries its own status).
    named_nak: bool,
    /// The QP's two streams ([`REQ`], [`RESP`]), held here for the connection
    /// ([`App::stream`]).
    streams: StreamTable<2>,
}

/// Responder: a request refused for good whose NAK waits for every earlier request to
/// complete (IBTA 9.7.5.2.4: a NAK acknowledges every request before the one it refuses).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Held {
    /// The refused request's MSN.
    msn: u32,
    /// What the NAK says ([`Refuse::Access`] or [`Refuse::Invalid`]).
    refuse: Refuse,
    /// The receive the request could not be placed into, and its status.
    rx_error: Option<(u32, WcStatus)>,
}

impl<T: Tables> Engine<T> {
    /// An engine over `tables` (sized as [`Tables`] says), as a QP in RESET.
    pub fn new(tables: T) -> Self {
        let mut e = Engine {
            t: tables,
            sq_cons: 0,
            scan: 0,
            sq_msn: 0,
            msns: 0,
            tx_rsn: 0,
            rq_cons: 0,
            rx_rsn: 0,
            tx_reads: 0,
            reads_done: 0,
            resp_next: 0,
            resp_acked: 0,
            rx_msn: 0,
            cq_lost: false,
            sqd_notify: false,
            error: None,
            last_wqe_sent: false,
            rx_error: None,
            held: None,
            named_nak: false,
            streams: StreamTable::new(Ident::DEFAULT, Ident::DEFAULT),
        };
        e.reset();
        e
    }

    /// Back to RESET: every counter to zero, nothing tracked (the host empties its rings).
    pub fn reset(&mut self) {
        self.streams = StreamTable::new(Ident::DEFAULT, Ident::DEFAULT);
        self.sq_cons = 0;
        self.scan = 0;
        self.sq_msn = 0;
        self.msns = 0;
        self.tx_rsn = 0;
        self.rq_cons = 0;
        self.rx_rsn = 0;
        self.tx_reads = 0;
        self.reads_done = 0;
        self.resp_next = 0;
        self.resp_acked = 0;
        self.rx_msn = 0;
        self.cq_lost = false;
        self.sqd_notify = false;
        self.error = None;
        self.last_wqe_sent = false;
        self.rx_error = None;
        self.held = None;
        self.named_nak = false;
        for r in self.t.rx().iter_mut() {
            r.op = None;
        }
        for t in self.t.taken().iter_mut() {
            t.valid = false;
        }
        for r in self.t.resps().iter_mut() {
            r.op = None;
        }
    }

    /// The engine's tables, for a host that puts one of another size in place (the
    /// responder's, after [`Self::move_resps`]); their entries stay opaque.
    pub fn tables_mut(&mut self) -> &mut T {
        &mut self.t
    }

    /// Responder: moves the READ/atomic requests and responses it holds (placed, or
    /// owed and not yet acknowledged) into `to`, a table for a new
    /// `max_dest_rd_atomic` ([`resp_slots`]; `modify_qp`, IBTA 10.2.4), every other
    /// entry of `to` freed. The host then puts `to` in place of the `resps` table. False,
    /// and nothing changed, if they do not fit `to` at their numbers (more are held than
    /// `to` has entries): the host keeps the table it has until they are acknowledged
    /// (new requests past `max_dest_rd_atomic` are the requester's error, IBTA 10.2.4).
    pub fn move_resps(&mut self, to: &mut [Resp]) -> bool {
        let base = self.resp_acked;
        let from = self.t.resps();
        // Entries are held only at numbers `base ..` (placement checks it): how far.
        let mut held = 0;
        for j in 0..from.len() as u32 {
            if at(from, base.wrapping_add(j)).is_some_and(|r| r.op.is_some()) {
                held = j + 1;
            }
        }
        if held as usize > to.len() {
            return false;
        }
        for r in to.iter_mut() {
            *r = Resp::default();
        }
        for j in 0..held {
            let k = base.wrapping_add(j);
            if let (Some(r), Some(d)) = (at(from, k), at(to, k)) {
                *d = *r;
            }
        }
        true
    }

    /// The QP moved to SQD: with `notify`, raise `IB_EVENT_SQ_DRAINED` once no send WQE
    /// is in progress (now, if none is).
    pub fn enter_sqd<E: Env<Sge = T::Sge>>(&mut self, env: &mut E, notify: bool) {
        self.sqd_notify = notify;
        self.sq_drained_check(env);
    }

    /// The QP is being destroyed: no `IB_EVENT_QP_LAST_WQE_REACHED` from now on.
    pub fn quiet(&mut self) {
        self.last_wqe_sent = true;
    }

    /// Both streams start over at their first SSNs under the connection's sending key
    /// `tx` and receiving key `rx` (when the connection is created or reset).
    pub fn start_streams(&mut self, tx: Ident, rx: Ident) {
        self.streams = StreamTable::new(tx, rx);
    }

    /// The streams' sending halves start over under key `id` (the connection's sending
    /// key changed before anything was sent, [`super::conn::Connection::set_tx_ident`]).
    pub fn restart_tx(&mut self, id: Ident) {
        self.streams.restart_tx(id);
    }

    /// Stream `s` of this QP ([`REQ`] or [`RESP`]): for a host that multiplexes
    /// several engines' streams over one connection.
    pub fn stream(&mut self, s: u16) -> Option<&mut Stream> {
        self.streams.get(s)
    }

    /// Requester: whether a READ or atomic request taken as a message awaits its
    /// response (one not yet whole): the local ACK timer runs on for it
    /// ([`App::awaiting`]).
    pub fn awaiting(&self) -> bool {
        self.tx_reads != self.reads_done
    }

    /// The engine and `env` as the connection's application.
    pub fn bind<'a, E: Env<Sge = T::Sge>>(&'a mut self, env: &'a mut E) -> Bound<'a, T, E> {
        Bound { engine: self, env }
    }
}

/// An engine with its host: the [`App`] a [`super::conn::Connection`] calls.
pub struct Bound<'a, T, E> {
    /// The engine.
    pub engine: &'a mut Engine<T>,
    /// Its host.
    pub env: &'a mut E,
}

/// Whether a message of `op` consumes a posted receive (IBTA 9.7.5.1.5).
pub fn consumes_recv(op: Op) -> bool {
    matches!(op, Op::Send | Op::SendImm | Op::SendInv | Op::WriteImm)
}

/// Whether an RC QP's stream `s` carries messages of `op` (Documentation/transport.rst,
/// C10): [`REQ`] the requests (every op but READ_RESP and ATOMIC_RESP), [`RESP`] the
/// responses (those two); no other stream exists. A peer's DATA of another op is
/// dropped ([`App::carries`]).
pub fn carries(s: u16, op: Op) -> bool {
    let response = matches!(op, Op::ReadResp | Op::AtomicResp);
    match s {
        REQ => !response,
        RESP => response,
        _ => false,
    }
}

/// The message length, in bytes, an atomic op carries: its operands (ATOMIC_WRITE the
/// value, FETCH_ADD the addend, CMP_SWAP swap then compare); 0 for every other op.
/// A request of another length is an invalid request (Documentation/transport.rst).
pub fn atomic_len(op: Op) -> u32 {
    match op {
        Op::AtomicWrite | Op::AtomicFetchAdd => 8,
        Op::AtomicCmpSwap => 16,
        _ => 0,
    }
}

/// The connection's calls, by stream: the request stream (this QP's SQ as requester, its
/// peer's requests as responder) and the response stream. No other stream exists.
impl<T: Tables, E: Env<Sge = T::Sge>> App for Bound<'_, T, E> {
    fn stream(&mut self, s: u16) -> Option<&mut Stream> {
        self.engine.streams.get(s)
    }

    fn ready_stream(&mut self) -> Option<(u16, MsgInfo)> {
        for _ in 0..2 {
            let (s, msn) = self.engine.streams.rotate(2)?;
            if let Some(m) = self.message(s, msn) {
                return Some((s, m));
            }
        }
        None
    }

    fn restart_rx(&mut self, id: Ident) {
        self.engine.streams.restart_rx(id);
    }

    fn message(&mut self, stream: u16, msn: u32) -> Option<MsgInfo> {
        match stream {
            REQ => self.engine.next_request(self.env, msn),
            // IBTA 10.3.1: a QP in the error state sends nothing, a response it owes
            // (or had sent and must resend) included. The connection fails the
            // stream; the requester's READ fails on its own retry count. Unless it
            // lingers to deliver a refusal ([`Engine::lingers`]): the responses of
            // the requests before the refused one still go out, ahead of the NAK.
            RESP if self.env.mode() == QpMode::Err && !self.engine.lingers() => None,
            RESP => self.engine.response_message(msn),
            _ => None,
        }
    }

    fn payload(
        &mut self,
        stream: u16,
        msn: u32,
        offset: u32,
        dst: &mut [u8],
    ) -> Result<(), Unreadable> {
        match stream {
            REQ => self.engine.request_payload(self.env, msn, offset, dst),
            RESP => self.engine.response_payload(self.env, msn, offset, dst),
            _ => Err(Unreadable::Local),
        }
    }

    fn carries(&mut self, s: u16, op: Op) -> bool {
        carries(s, op)
    }

    fn place(&mut self, p: &Placement<'_>) -> Result<(), Refuse> {
        match p.stream {
            REQ => self.engine.place_request(self.env, p),
            RESP => self.engine.place_response(self.env, p),
            _ => Err(Refuse::Invalid),
        }
    }

    fn complete(&mut self, stream: u16, msn: u32) {
        match stream {
            REQ => self.engine.request_complete(self.env, msn),
            RESP => self.engine.response_complete(self.env, msn),
            _ => {}
        }
    }

    fn acked(&mut self, stream: u16, msn: u32) {
        match stream {
            REQ => self.engine.request_acked(self.env, msn),
            RESP => self.engine.response_acked(self.env, msn),
            _ => {}
        }
    }

    fn refusal(&mut self, stream: u16, msn: u32) -> Option<Refuse> {
        if stream != REQ {
            return None;
        }
        self.engine.refusal_due(self.env, msn)
    }

    /// The request stream while a READ or atomic awaits its response.
    fn awaiting(&mut self, from: u16) -> Option<u16> {
        (from == REQ && self.engine.awaiting()).then_some(REQ)
    }

    /// A receive completion lost to a full CQ (only requests consume receives).
    fn completion_lost(&mut self, stream: u16) -> bool {
        stream == REQ && self.engine.cq_lost
    }

    fn refused(&mut self, stream: u16, msn: u32, e: ConnError) {
        if stream == REQ {
            self.engine.request_refused(self.env, msn, e);
        }
    }

    fn error(&mut self, e: ConnError) {
        self.engine.failed(self.env, e)
    }

    fn event(&mut self, e: Event) {
        self.env.conn_event(e)
    }
}

/// The completion status of the oldest WQE when the connection fails with `e` (IBTA
/// 11.6.2); `None`: no WQE takes the connection's failure (a WQE whose bytes could not
/// be read carries its own status; an aborted connection just flushes).
pub fn conn_error_status(e: ConnError) -> Option<WcStatus> {
    match e {
        // A peer QP in the error state answers nothing: a QP of its own connection
        // ends in retry exceeded; on a shared one the peer says so (closed) sooner.
        ConnError::RetryExceeded | ConnError::RemoteClosed => Some(WcStatus::RetryExcErr),
        ConnError::RnrRetryExceeded => Some(WcStatus::RnrRetryExcErr),
        ConnError::MessageVanished => Some(WcStatus::LocQpOpErr),
        ConnError::RemoteAccess => Some(WcStatus::RemAccessErr),
        ConnError::RemoteInvalid => Some(WcStatus::RemInvReqErr),
        ConnError::LocalProtection | ConnError::Aborted => None,
    }
}

/// How many times the verbs value the local ACK timer waits. The attribute is a
/// minimum (IBTA 9.7.6.1.3: 4.096 us * 2^`timeout`; `ibv_modify_qp(3)`: "the minimum
/// timeout"); a premature expiry is fatal to the QP once `retry_cnt` is spent, a late
/// one only reports a dead peer later. Guests and busy hosts stall for hundreds of ms.
pub const ACK_TIMEOUT_SCALE: u64 = 4;

/// The local ACK timeout the connection runs, in ns: [`ACK_TIMEOUT_SCALE`] times the
/// verbs value 4.096 us * 2^`timeout` (IBTA 9.7.6.1.3); `timeout` 0 means never
/// (`u64::MAX`), above 31 counts as 31. A connection without progress fails with
/// `IB_WC_RETRY_EXC_ERR` at the (`retry_cnt` + 1)-th expiry (`retry_cnt` 0 still
/// waits out one timeout).
pub fn ack_timeout_ns(timeout: u8) -> u64 {
    if timeout == 0 {
        return u64::MAX;
    }
    (4096u64 << timeout.min(31)).saturating_mul(ACK_TIMEOUT_SCALE)
}

/// Sets the connection's retry limits from the verbs attributes: `retry_cnt` local
/// ACK timeouts of [`ack_timeout_ns`]`(timeout)`, and `rnr_retry` RNR refusals per
/// packet (7: unlimited, IBTA 9.7.5.2.8).
pub fn retry_config(cfg: &mut Config, timeout: u8, retry_cnt: u8, rnr_retry: u8) {
    cfg.retry_cnt = retry_cnt;
    cfg.rnr_retry = rnr_retry;
    cfg.ack_timeout_ns = ack_timeout_ns(timeout);
}
