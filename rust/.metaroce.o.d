/work/main/rust/.metaroce.o.d: /var/cache/metaroce/src/linux-source-6.12.117-1_deb12u1/.clippy.toml /work/main/rust/metaroce.rs /work/main/rust/ffi/mod.rs /work/main/rust/ffi/errno.rs /work/main/rust/ffi/layout.rs /work/main/rust/ffi/net.rs /work/main/rust/ffi/params.rs /work/main/rust/ffi/rdma.rs /work/main/rust/ffi/timer.rs /work/main/rust/ffi/verbs.rs /work/main/rust/net/mod.rs /work/main/rust/proto/src/proto.rs /work/main/rust/proto/src/cc.rs /work/main/rust/proto/src/conn.rs /work/main/rust/proto/src/fair.rs /work/main/rust/proto/src/path.rs /work/main/rust/proto/src/sack.rs /work/main/rust/proto/src/stream.rs /work/main/rust/proto/src/time.rs /work/main/rust/proto/src/wire.rs /work/main/rust/selftest.rs /work/main/rust/verbs/mod.rs /work/main/rust/verbs/cq.rs /work/main/rust/verbs/device.rs /work/main/rust/verbs/mr.rs /work/main/rust/verbs/qp.rs /work/main/rust/ffi/bindings_generated.rs ./rust/libcore.rmeta ./rust/libkernel.rmeta ./rust/libffi.rmeta ./rust/libcompiler_builtins.rmeta ./rust/libmacros.so ./rust/libbindings.rmeta ./rust/libuapi.rmeta ./rust/libbuild_error.rmeta

/work/main/rust/metaroce.o: /var/cache/metaroce/src/linux-source-6.12.117-1_deb12u1/.clippy.toml /work/main/rust/metaroce.rs /work/main/rust/ffi/mod.rs /work/main/rust/ffi/errno.rs /work/main/rust/ffi/layout.rs /work/main/rust/ffi/net.rs /work/main/rust/ffi/params.rs /work/main/rust/ffi/rdma.rs /work/main/rust/ffi/timer.rs /work/main/rust/ffi/verbs.rs /work/main/rust/net/mod.rs /work/main/rust/proto/src/proto.rs /work/main/rust/proto/src/cc.rs /work/main/rust/proto/src/conn.rs /work/main/rust/proto/src/fair.rs /work/main/rust/proto/src/path.rs /work/main/rust/proto/src/sack.rs /work/main/rust/proto/src/stream.rs /work/main/rust/proto/src/time.rs /work/main/rust/proto/src/wire.rs /work/main/rust/selftest.rs /work/main/rust/verbs/mod.rs /work/main/rust/verbs/cq.rs /work/main/rust/verbs/device.rs /work/main/rust/verbs/mr.rs /work/main/rust/verbs/qp.rs /work/main/rust/ffi/bindings_generated.rs ./rust/libcore.rmeta ./rust/libkernel.rmeta ./rust/libffi.rmeta ./rust/libcompiler_builtins.rmeta ./rust/libmacros.so ./rust/libbindings.rmeta ./rust/libuapi.rmeta ./rust/libbuild_error.rmeta

/var/cache/metaroce/src/linux-source-6.12.117-1_deb12u1/.clippy.toml:
/work/main/rust/metaroce.rs:
/work/main/rust/ffi/mod.rs:
/work/main/rust/ffi/errno.rs:
/work/main/rust/ffi/layout.rs:
/work/main/rust/ffi/net.rs:
/work/main/rust/ffi/params.rs:
/work/main/rust/ffi/rdma.rs:
/work/main/rust/ffi/timer.rs:
/work/main/rust/ffi/verbs.rs:
/work/main/rust/net/mod.rs:
/work/main/rust/proto/src/proto.rs:
/work/main/rust/proto/src/cc.rs:
/work/main/rust/proto/src/conn.rs:
/work/main/rust/proto/src/fair.rs:
/work/main/rust/proto/src/path.rs:
/work/main/rust/proto/src/sack.rs:
/work/main/rust/proto/src/stream.rs:
/work/main/rust/proto/src/time.rs:
/work/main/rust/proto/src/wire.rs:
/work/main/rust/selftest.rs:
/work/main/rust/verbs/mod.rs:
/work/main/rust/verbs/cq.rs:
/work/main/rust/verbs/device.rs:
/work/main/rust/verbs/mr.rs:
/work/main/rust/verbs/qp.rs:
/work/main/rust/ffi/bindings_generated.rs:
./rust/libcore.rmeta:
./rust/libkernel.rmeta:
./rust/libffi.rmeta:
./rust/libcompiler_builtins.rmeta:
./rust/libmacros.so:
./rust/libbindings.rmeta:
./rust/libuapi.rmeta:
./rust/libbuild_error.rmeta:

# env-dep:CLIPPY_ARGS
# env-dep:CLIPPY_CONF_DIR=/var/cache/metaroce/src/linux-source-6.12.117-1_deb12u1
