//! The verbs values the RC engine reads and writes: work request opcodes, completion
//! statuses and opcodes (with their IB numbers, so the kernel glue can assert them against
//! `enum ib_wr_opcode`, `enum ib_wc_status` and `enum ib_wc_opcode`), flags, and the
//! engine's view of WQEs, SGEs and CQEs.

/// `enum ib_wr_opcode`: what a send WQE asks for (IBTA 10.8.2). Only the opcodes the
/// engine knows are listed; a ring may hold any 32-bit value ([`WrOpcode::from_raw`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum WrOpcode {
    /// `IB_WR_RDMA_WRITE`.
    RdmaWrite = 0,
    /// `IB_WR_RDMA_WRITE_WITH_IMM`.
    RdmaWriteWithImm = 1,
    /// `IB_WR_SEND`.
    Send = 2,
    /// `IB_WR_SEND_WITH_IMM`.
    SendWithImm = 3,
    /// `IB_WR_RDMA_READ`.
    RdmaRead = 4,
    /// `IB_WR_ATOMIC_CMP_AND_SWP`.
    AtomicCmpAndSwp = 5,
    /// `IB_WR_ATOMIC_FETCH_AND_ADD`.
    AtomicFetchAndAdd = 6,
    /// `IB_WR_LOCAL_INV`.
    LocalInv = 7,
    /// `IB_WR_BIND_MW`.
    BindMw = 8,
    /// `IB_WR_SEND_WITH_INV`.
    SendWithInv = 9,
    /// `IB_WR_ATOMIC_WRITE`.
    AtomicWrite = 15,
    /// `IB_WR_REG_MR`.
    RegMr = 0x20,
}

impl WrOpcode {
    /// Every opcode the engine knows, for tables and assertions.
    pub const ALL: [WrOpcode; 12] = [
        WrOpcode::RdmaWrite,
        WrOpcode::RdmaWriteWithImm,
        WrOpcode::Send,
        WrOpcode::SendWithImm,
        WrOpcode::RdmaRead,
        WrOpcode::AtomicCmpAndSwp,
        WrOpcode::AtomicFetchAndAdd,
        WrOpcode::LocalInv,
        WrOpcode::BindMw,
        WrOpcode::SendWithInv,
        WrOpcode::AtomicWrite,
        WrOpcode::RegMr,
    ];

    /// The opcode a ring's 32-bit value names, if the engine knows it.
    pub fn from_raw(v: u32) -> Option<WrOpcode> {
        WrOpcode::ALL.into_iter().find(|o| *o as u32 == v)
    }

    /// Local operations (run by the requester without a message: BIND_MW, LOCAL_INV,
    /// REG_MR; IBTA 10.6.7, 11.4.1.2).
    pub fn is_local(self) -> bool {
        matches!(
            self,
            WrOpcode::BindMw | WrOpcode::LocalInv | WrOpcode::RegMr
        )
    }
}

/// `enum ib_wc_status`: how a work request completed (IBTA 11.4.2.1, table 172). Only the
/// statuses the engine produces are listed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(u32)]
pub enum WcStatus {
    /// `IB_WC_SUCCESS`.
    #[default]
    Success = 0,
    /// `IB_WC_LOC_LEN_ERR`: a received message longer than its receive buffer.
    LocLenErr = 1,
    /// `IB_WC_LOC_QP_OP_ERR`: a malformed or unsupported WQE.
    LocQpOpErr = 2,
    /// `IB_WC_LOC_PROT_ERR`: a local key, access right or bound check failed.
    LocProtErr = 4,
    /// `IB_WC_WR_FLUSH_ERR`: discarded by the error state.
    WrFlushErr = 5,
    /// `IB_WC_MW_BIND_ERR`: a memory window operation failed.
    MwBindErr = 6,
    /// `IB_WC_BAD_RESP_ERR`: the responder answered with a response that answers no
    /// READ or atomic outstanding under its number, or not the kind of request it
    /// answers (IBTA 11.6.2: an unexpected transport layer opcode).
    BadRespErr = 7,
    /// `IB_WC_REM_INV_REQ_ERR`: the responder NAKed an invalid request.
    RemInvReqErr = 9,
    /// `IB_WC_REM_ACCESS_ERR`: the responder NAKed a remote access error.
    RemAccessErr = 10,
    /// `IB_WC_RETRY_EXC_ERR`: transport retries exhausted.
    RetryExcErr = 12,
    /// `IB_WC_RNR_RETRY_EXC_ERR`: RNR retries exhausted.
    RnrRetryExcErr = 13,
}

impl WcStatus {
    /// Every status the engine produces.
    pub const ALL: [WcStatus; 11] = [
        WcStatus::Success,
        WcStatus::LocLenErr,
        WcStatus::LocQpOpErr,
        WcStatus::LocProtErr,
        WcStatus::WrFlushErr,
        WcStatus::MwBindErr,
        WcStatus::BadRespErr,
        WcStatus::RemInvReqErr,
        WcStatus::RemAccessErr,
        WcStatus::RetryExcErr,
        WcStatus::RnrRetryExcErr,
    ];
}

/// `enum ib_wc_opcode` (and `ib_uverbs_wc_opcode`, equal where both exist): what a
/// completion reports (IBTA 11.4.2.1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(u32)]
pub enum WcOpcode {
    /// `IB_WC_SEND`.
    #[default]
    Send = 0,
    /// `IB_WC_RDMA_WRITE`.
    RdmaWrite = 1,
    /// `IB_WC_RDMA_READ`.
    RdmaRead = 2,
    /// `IB_WC_COMP_SWAP`.
    CompSwap = 3,
    /// `IB_WC_FETCH_ADD`.
    FetchAdd = 4,
    /// `IB_WC_BIND_MW`.
    BindMw = 5,
    /// `IB_WC_LOCAL_INV`.
    LocalInv = 6,
    /// `IB_WC_ATOMIC_WRITE`.
    AtomicWrite = 9,
    /// `IB_WC_REG_MR`.
    RegMr = 10,
    /// `IB_WC_RECV`.
    Recv = 128,
    /// `IB_WC_RECV_RDMA_WITH_IMM`.
    RecvRdmaWithImm = 129,
}

impl WcOpcode {
    /// Every opcode the engine produces.
    pub const ALL: [WcOpcode; 11] = [
        WcOpcode::Send,
        WcOpcode::RdmaWrite,
        WcOpcode::RdmaRead,
        WcOpcode::CompSwap,
        WcOpcode::FetchAdd,
        WcOpcode::BindMw,
        WcOpcode::LocalInv,
        WcOpcode::AtomicWrite,
        WcOpcode::RegMr,
        WcOpcode::Recv,
        WcOpcode::RecvRdmaWithImm,
    ];
}

/// `enum ib_wc_flags` bits the engine sets.
pub mod wc_flags {
    /// `IB_WC_WITH_IMM`.
    pub const WITH_IMM: u32 = 1 << 1;
    /// `IB_WC_WITH_INVALIDATE`.
    pub const WITH_INVALIDATE: u32 = 1 << 2;
}

/// `IB_SEND_*` flags of a send WQE.
pub mod send_flags {
    /// `IB_SEND_FENCE`: wait for earlier READs and atomics (IBTA 10.8.3.3).
    pub const FENCE: u32 = 1;
    /// `IB_SEND_SIGNALED`: complete even on success.
    pub const SIGNALED: u32 = 2;
    /// `IB_SEND_SOLICITED`: raise a solicited event at the receiver.
    pub const SOLICITED: u32 = 4;
    /// `IB_SEND_INLINE`: the data is in the WQE.
    pub const INLINE: u32 = 8;
}

/// `IB_ACCESS_*` bits of a QP or memory region.
pub mod access {
    /// `IB_ACCESS_LOCAL_WRITE`.
    pub const LOCAL_WRITE: u32 = 1;
    /// `IB_ACCESS_REMOTE_WRITE`.
    pub const REMOTE_WRITE: u32 = 1 << 1;
    /// `IB_ACCESS_REMOTE_READ`.
    pub const REMOTE_READ: u32 = 1 << 2;
    /// `IB_ACCESS_REMOTE_ATOMIC`.
    pub const REMOTE_ATOMIC: u32 = 1 << 3;
    /// `IB_ACCESS_MW_BIND`.
    pub const MW_BIND: u32 = 1 << 4;
}

/// A scatter/gather element as the host hands it over (IBTA 10.7.2.1): the engine reads
/// its length, and hands it back to [`super::Memory`] with an offset into it to reach the
/// bytes. The engine never makes one (but for `Default`, which must name no memory), so a
/// host may keep in it what only the host can vouch for — for example that the address
/// came from a kernel consumer's work request.
pub trait ScatterGather: Copy + Default {
    /// Bytes the element covers.
    fn length(&self) -> u32;
}

/// One scatter/gather element: `length` bytes at `addr` of the region `lkey` names (the
/// host model's [`ScatterGather`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sge {
    /// Virtual address of the first byte.
    pub addr: u64,
    /// Bytes.
    pub length: u32,
    /// Local key.
    pub lkey: u32,
}

impl ScatterGather for Sge {
    fn length(&self) -> u32 {
        self.length
    }
}

/// The fields of a send WQE the engine reads (its SGEs and inline data stay in the ring:
/// [`super::SendQueue`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SendWqe {
    /// The consumer's identifier, echoed in the completion.
    pub wr_id: u64,
    /// `IB_WR_*` opcode as stored (see [`WrOpcode::from_raw`]).
    pub opcode: u32,
    /// [`send_flags`] bits.
    pub send_flags: u32,
    /// Immediate data (network order as stored) or, for SEND_WITH_INV and LOCAL_INV,
    /// the rkey to invalidate (host order).
    pub ex: u32,
    /// Remote address (RDMA, atomics).
    pub remote_addr: u64,
    /// Remote key of an RDMA operation.
    pub rkey: u32,
    /// Total data length in bytes.
    pub length: u32,
    /// SGEs in the WQE.
    pub num_sge: u32,
    /// Atomics: compare (CMP_AND_SWP) or addend (FETCH_AND_ADD).
    pub compare_add: u64,
    /// Atomics: swap value (CMP_AND_SWP).
    pub swap: u64,
    /// Atomics: remote key.
    pub atomic_rkey: u32,
}

/// The fields of a receive WQE the engine reads (its SGEs stay in the ring).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecvWqe {
    /// The consumer's identifier.
    pub wr_id: u64,
    /// SGEs in the WQE.
    pub num_sge: u32,
}

/// A completion the engine writes ([`super::Completions`]); the glue adds the QP number.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cqe {
    /// The WQE's `wr_id`.
    pub wr_id: u64,
    /// How it completed.
    pub status: WcStatus,
    /// What it was.
    pub opcode: WcOpcode,
    /// Bytes (the WQE's length for sends; the message length for receives).
    pub byte_len: u32,
    /// Immediate data (network order) or the invalidated rkey.
    pub ex: u32,
    /// [`wc_flags`] bits.
    pub flags: u32,
    /// A successful receive: the glue names the peer QP as `src_qp`.
    pub from_peer: bool,
}

/// The QP states the engine distinguishes (IBTA 10.3.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QpMode {
    /// RESET, INIT or RTR: nothing is sent.
    Idle,
    /// RTS: the requester turns WQEs into messages.
    Rts,
    /// SQD: messages in flight finish, no new WQE starts.
    Sqd,
    /// ERR: everything flushes.
    Err,
}

/// The QP attributes the engine obeys ([`super::QpControl::attrs`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Attrs {
    /// The QP's [`access`] bits (remote operations it takes).
    pub access: u32,
    /// `min_rnr_timer` code (IBTA 9.7.5.2.8, table 45).
    pub min_rnr_timer: u8,
    /// `max_rd_atomic`: READs and atomics outstanding at once (0 counts as 1).
    pub max_rd_atomic: u8,
    /// `max_dest_rd_atomic`: the responder resources (IBTA 10.2.4), READ and atomic
    /// requests taken at once as a responder (the `resps` table has
    /// [`super::resp_slots`] of it); 0: a READ, atomic or ATOMIC_WRITE request is an
    /// invalid request (rxe's `RESPST_ERR_TOO_MANY_RDMA_ATM_REQ`).
    pub max_dest_rd_atomic: u8,
    /// SGEs a send WQE may have.
    pub max_send_sge: u32,
    /// Inline bytes a send WQE may carry.
    pub max_inline_data: u32,
    /// SGEs a receive WQE may have.
    pub max_recv_sge: u32,
    /// Receives come from an SRQ with this many SGEs per WQE (`None`: the QP's RQ).
    pub srq_sge: Option<u32>,
    /// Every send WQE completes, signaled or not.
    pub sq_sig_all: bool,
}
