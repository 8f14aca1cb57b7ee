//! The RC engine under arbitrary and mutated datagrams — forgeries injected into a live
//! connection pair: two model QPs with every opcode posted; whatever arrives, nothing
//! panics, a datagram either end drops leaves its connection exactly as it was (only an
//! RNR/NAK refusal queues a report), sends complete in SQ order and no WQE completes twice
//! (see `metaroce_proto::testkit::rc::fuzz_engine` and `Pair::inject`).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = metaroce_proto::testkit::rc::fuzz_engine(data);
});
