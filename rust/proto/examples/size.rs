//! Prints the per-connection state size of common configurations.
fn main() {
    use metaroce_proto::conn::Connection;
    println!(
        "Connection<8 paths, 64 pkts, 4 streams>: {} bytes",
        core::mem::size_of::<Connection<8, 1, 4>>()
    );
    println!(
        "Connection<8 paths, 256 pkts, 8 streams>: {} bytes",
        core::mem::size_of::<Connection<8, 4, 8>>()
    );
    println!(
        "PathTx {} PathRx {} StreamTx {} StreamRx {}",
        core::mem::size_of::<metaroce_proto::path::PathTx>(),
        core::mem::size_of::<metaroce_proto::path::PathRx>(),
        core::mem::size_of::<metaroce_proto::stream::StreamTx>(),
        core::mem::size_of::<metaroce_proto::stream::StreamRx>()
    );
}
