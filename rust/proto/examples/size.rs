//! Prints the per-connection state size of the provided configurations.
use core::mem::size_of;
use metaroce_proto::conn::Connection;
use metaroce_proto::path::{PathRx, PathTx};
use metaroce_proto::stream::{Stream, StreamRx, StreamTx};

fn main() {
    println!(
        "DefaultConnection (8 paths, 64 in flight): {} bytes",
        size_of::<metaroce_proto::DefaultConnection>()
    );
    println!(
        "DenseConnection (8 paths, 32 in flight): {} bytes",
        size_of::<metaroce_proto::DenseConnection>()
    );
    println!(
        "Connection<8 paths, 147 in flight> (one 400 Gb/s x 12 us BDP at a 4 KiB MTU): {} bytes",
        size_of::<Connection<8, 3, 147>>()
    );
    println!(
        "Connection<64 paths, 512 in flight>: {} bytes",
        size_of::<Connection<64, 8, 512>>()
    );
    println!(
        "Kernel: a QP's own Connection<64, 1, 64>: {} bytes; a shared Connection<64, 4, 256>: {} bytes",
        size_of::<Connection<64, 1, 64>>(),
        size_of::<Connection<64, 4, 256>>()
    );
    println!(
        "PathTx {} PathRx {} StreamTx {} StreamRx {} (a Stream, held by the application: {})",
        size_of::<PathTx>(),
        size_of::<PathRx>(),
        size_of::<StreamTx>(),
        size_of::<StreamRx>(),
        size_of::<Stream>()
    );
}
