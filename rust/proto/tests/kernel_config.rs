//! The kernel module's connection shape (`rust/verbs/qp`): 64 path slots with a runtime
//! path count, and source ports that stay in the dynamic range.

use metaroce_proto::conn::{Config, Connection};

/// The kernel's connection type (`rust/verbs/qp/mod.rs`).
type KernelConn = Connection<64, 1, 64>;

#[test]
fn kernel_connection_size() {
    // Documented in Documentation/device.rst ("Paths"): the per-QP cost of the
    // connection, allocated at RTR whatever the `paths` parameter.
    let k64 = core::mem::size_of::<KernelConn>();
    let k8 = core::mem::size_of::<Connection<8, 1, 64>>();
    let k4 = core::mem::size_of::<Connection<4, 1, 64>>();
    println!("Connection<4,1,64>: {k4} B; <8,..>: {k8} B; <64,..>: {k64} B");
    println!(
        "DefaultConnection: {} B; DenseConnection: {} B",
        core::mem::size_of::<metaroce_proto::DefaultConnection>(),
        core::mem::size_of::<metaroce_proto::DenseConnection>()
    );
    assert!(k64 < 16 * 1024, "{k64}");
    assert!(k8 < k64);
}

#[test]
fn ports_stay_in_the_dynamic_range() {
    for paths in [1u8, 8, 33, 64] {
        let align = u16::from(paths).next_power_of_two();
        for h in [0u16, 1, 0x1234, 0x3fff, 0xffff] {
            // The kernel's per-QP base (rust/verbs/qp/control.rs).
            let base = 49152 + (h & 0x3fff & !(align - 1));
            let c = KernelConn::new(Config {
                paths,
                base_src_port: base,
                ..Config::default()
            });
            for i in 0..usize::from(paths) {
                let p = c.path(i).unwrap().src_port;
                assert_eq!(p, base + i as u16, "paths {paths} base {base} path {i}");
                assert!(p >= 49152);
            }
        }
    }
    // Any base in the dynamic range keeps every path there, even unaligned.
    let c = KernelConn::new(Config {
        paths: 64,
        base_src_port: 65530,
        ..Config::default()
    });
    for i in 0..64 {
        assert!(c.path(i).unwrap().src_port >= 49152);
    }
}

#[test]
fn reset_in_place_is_new() {
    let cfg = Config {
        paths: 8,
        base_src_port: 50000,
        pacing_slack_us: 4_000,
        ..Config::default()
    };
    let fresh = KernelConn::new(cfg);
    let mut c = Box::new(KernelConn::BLANK);
    c.reset(Config::default());
    c.set_rate_hint(7);
    c.reset(cfg);
    assert_eq!(format!("{:?}", *c), format!("{fresh:?}"));
}
