//! The RC engine under arbitrary and mutated datagrams: two model QPs with every opcode
//! posted; whatever arrives, nothing panics, sends complete in SQ order and no WQE
//! completes twice (see `metaroce_proto::testkit::rc::fuzz_engine`).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = metaroce_proto::testkit::rc::fuzz_engine(data);
});
