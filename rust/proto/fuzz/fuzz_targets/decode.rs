//! Packet decoding: any byte string decodes or is rejected with a reason, never a panic,
//! and whatever decodes re-encodes to the same bytes (an ACK bundle, every ACK of it).
#![no_main]
use libfuzzer_sys::fuzz_target;
use metaroce_proto::wire::{decode, decode_acks, Packet, ACK_LEN};

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = decode(data) {
        let mut out = [0u8; 256];
        let n = match p {
            Packet::Data(h, payload) => h.encode(&mut out).map(|n| n + payload.len()),
            Packet::Ack(a) => a.encode(&mut out),
            Packet::Probe(pr) => pr.encode(&mut out),
        };
        let n = n.expect("decoded packets re-encode");
        let hl = n.min(data.len()).min(out.len());
        let hdr = match p {
            Packet::Data(h, _) => h.header_len(),
            _ => hl,
        };
        assert_eq!(&out[..hdr], &data[..hdr]);
        if let Packet::Ack(first) = p {
            let acks = decode_acks(data).expect("an ACK that decodes is a valid bundle");
            assert_eq!(acks.len() * ACK_LEN, data.len());
            for (k, a) in acks.enumerate() {
                if k == 0 {
                    assert_eq!(a, first);
                }
                let n = a.encode(&mut out).expect("a bundled ACK re-encodes");
                assert_eq!(&out[..n], &data[k * ACK_LEN..(k + 1) * ACK_LEN]);
            }
        }
    }
});
