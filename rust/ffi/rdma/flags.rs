// SPDX-License-Identifier: GPL-2.0

//! The RDMA core's enums and flag sets, generated from bindgen's constants
//! (`bindings_generated.rs` is their single source): access flags, work
//! request and completion opcodes, completion status and flags, device and
//! port capabilities.
//!
//! The QP code still spells some of these as literals (`rust/verbs/qp/`);
//! it moves to these types as it is rewritten, hence `dead_code` for now.
#![allow(dead_code)]

use crate::ffi::bindings as b;

/// A C enum as a Rust enum over the same values.
macro_rules! c_enum {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $v:ident = $c:expr,)* }) => {
        $(#[$m])*
        #[derive(Clone, Copy, PartialEq, Eq, Debug)]
        #[repr(u32)]
        pub(crate) enum $name {
            $($(#[$vm])* $v = $c,)*
        }

        impl $name {
            /// From the C value; `None` outside the enum.
            pub(crate) fn from_raw(v: u32) -> Option<Self> {
                $(if v == $c {
                    return Some(Self::$v);
                })*
                None
            }

            /// The C value.
            pub(crate) fn raw(self) -> u32 {
                self as u32
            }
        }
    };
}

c_enum! {
    /// Work completion status (`enum ib_wc_status`, IBTA 11.4.2.1).
    WcStatus {
        Success = b::ib_wc_status_IB_WC_SUCCESS,
        LocLenErr = b::ib_wc_status_IB_WC_LOC_LEN_ERR,
        LocQpOpErr = b::ib_wc_status_IB_WC_LOC_QP_OP_ERR,
        LocEecOpErr = b::ib_wc_status_IB_WC_LOC_EEC_OP_ERR,
        LocProtErr = b::ib_wc_status_IB_WC_LOC_PROT_ERR,
        WrFlushErr = b::ib_wc_status_IB_WC_WR_FLUSH_ERR,
        MwBindErr = b::ib_wc_status_IB_WC_MW_BIND_ERR,
        BadRespErr = b::ib_wc_status_IB_WC_BAD_RESP_ERR,
        LocAccessErr = b::ib_wc_status_IB_WC_LOC_ACCESS_ERR,
        RemInvReqErr = b::ib_wc_status_IB_WC_REM_INV_REQ_ERR,
        RemAccessErr = b::ib_wc_status_IB_WC_REM_ACCESS_ERR,
        RemOpErr = b::ib_wc_status_IB_WC_REM_OP_ERR,
        RetryExcErr = b::ib_wc_status_IB_WC_RETRY_EXC_ERR,
        RnrRetryExcErr = b::ib_wc_status_IB_WC_RNR_RETRY_EXC_ERR,
        LocRddViolErr = b::ib_wc_status_IB_WC_LOC_RDD_VIOL_ERR,
        RemInvRdReqErr = b::ib_wc_status_IB_WC_REM_INV_RD_REQ_ERR,
        RemAbortErr = b::ib_wc_status_IB_WC_REM_ABORT_ERR,
        InvEecnErr = b::ib_wc_status_IB_WC_INV_EECN_ERR,
        InvEecStateErr = b::ib_wc_status_IB_WC_INV_EEC_STATE_ERR,
        FatalErr = b::ib_wc_status_IB_WC_FATAL_ERR,
        RespTimeoutErr = b::ib_wc_status_IB_WC_RESP_TIMEOUT_ERR,
        GeneralErr = b::ib_wc_status_IB_WC_GENERAL_ERR,
    }
}

c_enum! {
    /// Work request opcodes as rings carry them (`enum ib_uverbs_wr_opcode`;
    /// `RegMr` only from kernel consumers, `enum ib_wr_opcode`).
    WrOpcode {
        RdmaWrite = b::ib_uverbs_wr_opcode_IB_UVERBS_WR_RDMA_WRITE,
        RdmaWriteWithImm = b::ib_uverbs_wr_opcode_IB_UVERBS_WR_RDMA_WRITE_WITH_IMM,
        Send = b::ib_uverbs_wr_opcode_IB_UVERBS_WR_SEND,
        SendWithImm = b::ib_uverbs_wr_opcode_IB_UVERBS_WR_SEND_WITH_IMM,
        RdmaRead = b::ib_uverbs_wr_opcode_IB_UVERBS_WR_RDMA_READ,
        AtomicCmpAndSwp = b::ib_uverbs_wr_opcode_IB_UVERBS_WR_ATOMIC_CMP_AND_SWP,
        AtomicFetchAndAdd = b::ib_uverbs_wr_opcode_IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD,
        LocalInv = b::ib_uverbs_wr_opcode_IB_UVERBS_WR_LOCAL_INV,
        BindMw = b::ib_uverbs_wr_opcode_IB_UVERBS_WR_BIND_MW,
        SendWithInv = b::ib_uverbs_wr_opcode_IB_UVERBS_WR_SEND_WITH_INV,
        AtomicWrite = b::ib_uverbs_wr_opcode_IB_UVERBS_WR_ATOMIC_WRITE,
        RegMr = b::ib_wr_opcode_IB_WR_REG_MR,
    }
}

c_enum! {
    /// Work completion opcodes (`enum ib_uverbs_wc_opcode`, and the receive
    /// ones of `enum ib_wc_opcode`).
    WcOpcode {
        Send = b::ib_uverbs_wc_opcode_IB_UVERBS_WC_SEND,
        RdmaWrite = b::ib_uverbs_wc_opcode_IB_UVERBS_WC_RDMA_WRITE,
        RdmaRead = b::ib_uverbs_wc_opcode_IB_UVERBS_WC_RDMA_READ,
        CompSwap = b::ib_uverbs_wc_opcode_IB_UVERBS_WC_COMP_SWAP,
        FetchAdd = b::ib_uverbs_wc_opcode_IB_UVERBS_WC_FETCH_ADD,
        BindMw = b::ib_uverbs_wc_opcode_IB_UVERBS_WC_BIND_MW,
        LocalInv = b::ib_uverbs_wc_opcode_IB_UVERBS_WC_LOCAL_INV,
        AtomicWrite = b::ib_uverbs_wc_opcode_IB_UVERBS_WC_ATOMIC_WRITE,
        RegMr = b::ib_wc_opcode_IB_WC_REG_MR,
        Recv = b::ib_wc_opcode_IB_WC_RECV,
        RecvRdmaWithImm = b::ib_wc_opcode_IB_WC_RECV_RDMA_WITH_IMM,
    }
}

/// Memory access flags (`enum ib_access_flags`, IBTA 10.6.3.3), as the
/// `u32` bits verbs carry.
pub(crate) mod access {
    use super::b;
    pub(crate) const LOCAL_WRITE: u32 = b::ib_access_flags_IB_ACCESS_LOCAL_WRITE;
    pub(crate) const REMOTE_WRITE: u32 = b::ib_access_flags_IB_ACCESS_REMOTE_WRITE;
    pub(crate) const REMOTE_READ: u32 = b::ib_access_flags_IB_ACCESS_REMOTE_READ;
    pub(crate) const REMOTE_ATOMIC: u32 = b::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC;
    pub(crate) const MW_BIND: u32 = b::ib_access_flags_IB_ACCESS_MW_BIND;
    /// Any remote access.
    pub(crate) const REMOTE: u32 = REMOTE_WRITE | REMOTE_READ | REMOTE_ATOMIC;
}

/// Work completion flags (`enum ib_wc_flags`).
pub(crate) mod wc_flags {
    use super::b;
    pub(crate) const WITH_IMM: u32 = b::ib_wc_flags_IB_WC_WITH_IMM;
    pub(crate) const WITH_INVALIDATE: u32 = b::ib_wc_flags_IB_WC_WITH_INVALIDATE;
    pub(crate) const WITH_NETWORK_HDR_TYPE: u32 = b::ib_wc_flags_IB_WC_WITH_NETWORK_HDR_TYPE;
}

/// Device capability flags (`enum ib_device_cap_flags`, with the uverbs
/// ones), for [`super::DeviceAttrs::device_cap_flags`].
pub(crate) mod device_cap {
    use super::b;
    pub(crate) const PORT_ACTIVE_EVENT: u64 =
        b::ib_device_cap_flags_IB_DEVICE_PORT_ACTIVE_EVENT as u64;
    pub(crate) const SYS_IMAGE_GUID: u64 = b::ib_device_cap_flags_IB_DEVICE_SYS_IMAGE_GUID as u64;
    pub(crate) const MEM_WINDOW: u64 = b::ib_device_cap_flags_IB_DEVICE_MEM_WINDOW as u64;
    pub(crate) const MEM_WINDOW_TYPE_2B: u64 =
        b::ib_device_cap_flags_IB_DEVICE_MEM_WINDOW_TYPE_2B as u64;
    pub(crate) const MEM_MGT_EXTENSIONS: u64 =
        b::ib_device_cap_flags_IB_DEVICE_MEM_MGT_EXTENSIONS as u64;
    pub(crate) const ATOMIC_WRITE: u64 =
        b::ib_uverbs_device_cap_flags_IB_UVERBS_DEVICE_ATOMIC_WRITE as u64;
}

/// Port capability bits (`enum ib_port_capability_mask_bits`), for
/// [`super::PortAttrs::port_cap_flags`].
pub(crate) mod port_cap {
    use super::b;
    pub(crate) const CM_SUP: u32 = b::ib_port_capability_mask_bits_IB_PORT_CM_SUP;
}
