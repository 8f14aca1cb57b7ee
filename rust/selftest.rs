// SPDX-License-Identifier: GPL-2.0

//! Entry points of the module's KUnit suite (declared in `rust/ffi/helpers.c`,
//! because 6.12 has no Rust macro for declaring a suite). Each function is a
//! C-ABI wrapper around the Rust code under test; the assertions are KUnit's.

use kernel::ffi::{c_int, c_uint};

/// `sizeof` of a probed C type as the Rust bindings lay it out; 0 for an
/// unknown probe. Compared against the C compiler's answer by the suite.
#[no_mangle]
pub(crate) extern "C" fn metaroce_rust_sizeof(probe: c_uint) -> usize {
    crate::ffi::layout::rust_sizeof(probe)
}

/// Runs [`crate::check_udp_port`] and returns 0 or a negative errno.
#[no_mangle]
pub(crate) extern "C" fn metaroce_rust_check_param(port: u32) -> c_int {
    match crate::check_udp_port(port) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// The protocol core as compiled into the kernel (overflow checks on): a data
/// header round-trips through encode/decode, a truncated copy is dropped as
/// `Truncated`, and 20 000 pseudo-random datagrams are decoded without a panic
/// (a panic here is a kernel BUG, which fails the guest run). Returns 0 on
/// success, or the number of the first failed check.
#[no_mangle]
pub(crate) extern "C" fn metaroce_rust_proto_selftest() -> c_int {
    use crate::proto::wire::{self, DataHeader, DropReason, Op, DF_FIRST, DF_IMM, DF_LAST};

    let payload = [0xa5u8, 0x5a, 0x01, 0x02];
    let h = DataHeader {
        path: 3,
        dst_conn: 0x1234_5678,
        psn: u32::MAX,
        stamp: 0xdead_beef,
        stream: 2,
        op: Op::SendImm as u8,
        flags: DF_FIRST | DF_LAST | DF_IMM,
        payload_len: payload.len() as u16,
        ssn: 17,
        msn: 9,
        msg_len: payload.len() as u32,
        imm: 0xcafe_f00d,
        ..DataHeader::default()
    };
    let mut buf = [0u8; 128];
    let Some(n) = h.encode(&mut buf) else {
        return 1;
    };
    let Some(tail) = buf.get_mut(n..n + payload.len()) else {
        return 2;
    };
    tail.copy_from_slice(&payload);
    let pkt = &buf[..n + payload.len()];
    match wire::decode_data_packet(pkt) {
        Ok((d, p)) if d == h && p == payload => {}
        _ => return 3,
    }
    if wire::decode_data_packet(&pkt[..n - 1]).err() != Some(DropReason::Truncated) {
        return 4;
    }
    // xorshift32: reproducible junk, half of it starting with a valid header.
    let mut x: u32 = 0x9e37_79b9;
    let mut junk = [0u8; 96];
    for i in 0..20_000u32 {
        for byte in junk.iter_mut() {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            *byte = x as u8;
        }
        if i % 2 == 0 {
            junk[..n].copy_from_slice(&buf[..n]);
        }
        let len = (x as usize) % (junk.len() + 1);
        let _ = wire::decode(&junk[..len]);
    }
    0
}

/// Pure helpers of the RDMA skin: the node GUID from a MAC (RFC 4291 EUI-64)
/// and the active IB MTU for a netdev MTU. Returns 0, or the failed check.
#[no_mangle]
pub(crate) extern "C" fn metaroce_rust_rdma_selftest() -> c_int {
    use crate::ffi::rdma::{eui64_from_mac, ib_mtu_for};

    let checks = [
        eui64_from_mac([0x52, 0x54, 0x00, 0x6d, 0x72, 0x01])
            == [0x50, 0x54, 0x00, 0xff, 0xfe, 0x6d, 0x72, 0x01],
        ib_mtu_for(1500, 128) == Some((3, 1024)),
        ib_mtu_for(9000, 128) == Some((5, 4096)),
        ib_mtu_for(2176, 128) == Some((4, 2048)),
        ib_mtu_for(384, 128) == Some((1, 256)),
        ib_mtu_for(383, 128).is_none(),
        ib_mtu_for(100, 128).is_none(),
    ];
    match checks.iter().position(|ok| !ok) {
        Some(i) => i as c_int + 1,
        None => 0,
    }
}
