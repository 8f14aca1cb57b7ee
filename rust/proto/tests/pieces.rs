//! Datagrams handed over in two pieces (`bytes::Bytes`, the kernel's skb head and page
//! fragment, received without linearising): a DATA datagram cut anywhere after its
//! header decodes to the same header and the same payload bytes, and gets the same
//! verdict (well formed or not), as the datagram whole; anything else in pieces is
//! refused as `Truncated`. (The RC model tests take every DATA datagram in pieces,
//! `testkit::as_received`.)

mod common;

use common::{config, Conn, TestApp};
use metaroce_proto::bytes::Bytes;
use metaroce_proto::time::Instant;
use metaroce_proto::wire::{
    data_in_pieces, decode_data_packet, decode_data_pieces, AckHeader, DataHeader, DropReason, Op,
    Reth, DF_FIRST, DF_IMM, DF_LAST, DF_RETH, MAX_DATA_HEADER,
};
use proptest::prelude::*;

/// A DATA datagram of `op` carrying `plen` bytes at `offset` of a `msg_len`-byte message.
fn datagram(op: Op, offset: u32, plen: u16, msg_len: u32) -> Vec<u8> {
    let last = offset + u32::from(plen) == msg_len;
    let mut flags = 0;
    if offset == 0 {
        flags |= DF_FIRST;
    }
    if last {
        flags |= DF_LAST;
    }
    if op.needs_reth() {
        flags |= DF_RETH;
    }
    if op.has_imm() && last {
        flags |= DF_IMM;
    }
    let h = DataHeader {
        path: 3,
        inc: 7,
        dst_conn: 0x12345,
        psn: 99,
        stamp: 5,
        token: 0xabcd,
        stream: 0,
        op: op as u8,
        flags,
        payload_len: plen,
        tag: 1,
        floor: 90,
        ssn: 4,
        msn: 2,
        offset,
        msg_len,
        reth: if flags & DF_RETH != 0 {
            Reth {
                va: 0x1000,
                rkey: 77,
                len: msg_len,
            }
        } else {
            Reth::default()
        },
        imm: if flags & DF_IMM != 0 { 0x5151 } else { 0 },
    };
    let mut buf = vec![0u8; MAX_DATA_HEADER + usize::from(plen)];
    let hl = h.encode(&mut buf).unwrap();
    for (i, b) in buf[hl..].iter_mut().enumerate() {
        *b = (i * 7 + 3) as u8;
    }
    buf.truncate(hl + usize::from(plen));
    buf
}

/// Every cut of `dg` whose head holds the longest header (or all of a shorter datagram),
/// as the kernel hands them over: the verdict and bytes of the datagram whole.
fn same_for_every_cut(dg: &[u8]) -> Result<(), TestCaseError> {
    let whole = decode_data_packet(dg);
    for cut in MAX_DATA_HEADER.min(dg.len())..=dg.len() {
        let (head, tail) = dg.split_at(cut);
        let pieces = decode_data_pieces(Bytes::new(head, tail));
        match (&whole, &pieces) {
            (Ok((h, p)), Ok((hp, pp))) => {
                prop_assert_eq!(h, hp);
                prop_assert!(pp.eq_bytes(p), "cut {}: payload differs", cut);
            }
            (Err(a), Err(b)) => prop_assert_eq!(a, b, "cut {}", cut),
            _ => prop_assert!(false, "cut {}: whole {:?}, pieces {:?}", cut, whole, pieces),
        }
    }
    Ok(())
}

proptest! {
    #[test]
    fn data_in_pieces_decodes_as_whole(
        op in 0u8..=10, msg_len in 1u32..6000, off_pick: u32, plen_pick: u16, damage in 0u8..5,
    ) {
        let op = Op::from_u8(op).unwrap();
        let offset = off_pick % msg_len;
        let rem = msg_len - offset;
        let plen = (1 + u32::from(plen_pick) % rem.min(4096)) as u16;
        let mut dg = datagram(op, offset, plen, msg_len);
        // Well formed, one byte short, one byte long, a payload length the datagram
        // does not carry, an unknown flag.
        match damage {
            1 => { dg.pop(); }
            2 => dg.push(0),
            3 => dg[24..26].copy_from_slice(&(plen ^ 1).to_be_bytes()),
            4 => dg[23] |= 0x80,
            _ => {}
        }
        same_for_every_cut(&dg)?;
    }
}

#[test]
fn a_header_not_whole_in_the_head_is_not_taken_in_pieces() {
    let dg = datagram(Op::WriteImm, 0, 100, 100);
    let hl = decode_data_packet(&dg).unwrap().0.header_len();
    assert!(data_in_pieces(&dg[..hl]));
    assert!(!data_in_pieces(&dg[..hl - 1]));
    // Cut inside the header: the header cannot be read from the head.
    let (head, tail) = dg.split_at(hl - 1);
    assert_eq!(
        decode_data_pieces(Bytes::new(head, tail)).err(),
        Some(DropReason::Truncated)
    );
}

#[test]
fn only_data_comes_in_pieces() {
    let cfg = config(2, 1, 2);
    let mut c = Conn::new(cfg);
    let mut app = TestApp::keyed(&cfg);
    let mut buf = [0u8; 128];
    let n = AckHeader {
        path: 0,
        inc: 1,
        dst_conn: cfg.local_conn,
        ..Default::default()
    }
    .encode(&mut buf)
    .unwrap();
    let (head, tail) = buf[..n].split_at(40);
    let r = c.handle_pieces(Instant(1_000), Bytes::new(head, tail), false, &mut app);
    assert_eq!(r.err(), Some(DropReason::Truncated));
    // The same ACK whole gets its own verdict, whatever it is (the test wants only
    // that it is judged, not refused for its shape).
    let r = c.handle_pieces(Instant(1_000), Bytes::from(&buf[..n]), false, &mut app);
    assert_ne!(r.err(), Some(DropReason::Truncated));
}
