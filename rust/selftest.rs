// SPDX-License-Identifier: GPL-2.0

//! Entry points of the module's KUnit suite (declared in `rust/ffi/helpers.c`,
//! because 6.12 has no Rust macro for declaring a suite). Each function is a
//! C-ABI wrapper around the Rust code under test; the assertions are KUnit's.

use kernel::ffi::{c_int, c_uint};
use kernel::prelude::*;

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

/// Runs [`crate::check_paths`] and returns 0 or a negative errno.
#[no_mangle]
pub(crate) extern "C" fn metaroce_rust_check_paths(paths: u32) -> c_int {
    match crate::check_paths(paths) {
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
        inc: 0x5a17,
        dst_conn: 0x12_3456,
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

/// Pure helpers of the RDMA skin: the node GUID from a MAC (RFC 4291 EUI-64),
/// the active IB MTU for a netdev MTU, and a QP's segment size
/// (Documentation/transport.rst C7). Returns 0, or the failed check.
#[no_mangle]
pub(crate) extern "C" fn metaroce_rust_rdma_selftest() -> c_int {
    use crate::ffi::rdma::{eui64_from_mac, ib_mtu_for};
    use crate::verbs::device::cut_at;

    let checks = [
        eui64_from_mac([0x52, 0x54, 0x00, 0x6d, 0x72, 0x01])
            == [0x50, 0x54, 0x00, 0xff, 0xfe, 0x6d, 0x72, 0x01],
        ib_mtu_for(1500, 128) == Some((3, 1024)),
        ib_mtu_for(9000, 128) == Some((5, 4096)),
        ib_mtu_for(2176, 128) == Some((4, 2048)),
        ib_mtu_for(384, 128) == Some((1, 256)),
        ib_mtu_for(383, 128).is_none(),
        ib_mtu_for(100, 128).is_none(),
        // (netdev MTU, enum ib_mtu, link_payload) -> cut at
        cut_at(1500, 3, true) == 1368,
        cut_at(1500, 3, false) == 1024,
        cut_at(1500, 2, true) == 512,
        cut_at(1500, 0, true) == 256,
        cut_at(1200, 3, true) == 1072,
        cut_at(2176, 4, true) == 2048,
        cut_at(9000, 5, true) == 4096,
        cut_at(9000, 3, true) == 1024,
        cut_at(0, 3, true) == 1024,
        cut_at(u32::MAX, 5, true) == 4096,
    ];
    match checks.iter().position(|ok| !ok) {
        Some(i) => i as c_int + 1,
        None => 0,
    }
}

/// UDP port of the tunnel self-tests (nothing else uses it in the guests).
const TEST_UDP_PORT: u16 = 47920;
/// UDP source ports the self-test sends from, per family.
const TEST_SRC_PORT4: u16 = 50001;
const TEST_SRC_PORT6: u16 = 50002;
const LO4: crate::ffi::net::IpAddr = crate::ffi::net::IpAddr::V4([127, 0, 0, 1]);
const LO6: crate::ffi::net::IpAddr =
    crate::ffi::net::IpAddr::V6([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);

/// The self-test payload of a family: `len` bytes of a pattern.
fn test_payload_len(v6: bool) -> usize {
    if v6 {
        1200
    } else {
        1000
    }
}

fn test_payload_byte(v6: bool, i: usize) -> u8 {
    (i * 7 + usize::from(v6) * 3) as u8
}

/// What arrived for one address family.
#[derive(Default)]
struct RxSlot {
    count: core::sync::atomic::AtomicU32,
    /// Bit mask of failed checks (see `TestRx::receive`).
    bad: core::sync::atomic::AtomicU32,
}

/// A receiver that checks each datagram against what the test sent.
#[derive(Default)]
struct TestRx {
    v4: RxSlot,
    v6: RxSlot,
}

impl crate::ffi::net::UdpReceiver for TestRx {
    fn receive(&self, payload: &[u8], tail: &[u8], meta: &crate::ffi::net::RxMeta) {
        use crate::ffi::net::{ecn, IpAddr};
        use core::sync::atomic::Ordering::SeqCst;

        let v6 = matches!(meta.src, IpAddr::V6(_));
        let (slot, lo, port) = if v6 {
            (&self.v6, LO6, TEST_SRC_PORT6)
        } else {
            (&self.v4, LO4, TEST_SRC_PORT4)
        };
        let mut bad = 0;
        // A receiver that takes nothing in pieces gets every datagram whole.
        if payload.len() != test_payload_len(v6) || !tail.is_empty() {
            bad |= 1;
        }
        if payload
            .iter()
            .enumerate()
            .any(|(i, &b)| b != test_payload_byte(v6, i))
        {
            bad |= 2;
        }
        if meta.src != lo || meta.dst != lo {
            bad |= 4;
        }
        if meta.src_port != port {
            bad |= 8;
        }
        if meta.ecn != ecn::ECT0 || meta.ce {
            bad |= 16;
        }
        slot.bad.fetch_or(bad, SeqCst);
        slot.count.fetch_add(1, SeqCst);
    }
}

/// The UDP tunnel over loopback: one datagram to 127.0.0.1 and one to ::1
/// (ECT set, 1000 and 1200 bytes of a pattern) arrive once each through the
/// receive hook with their payload, addresses, source port and ECN field; a
/// `fill` that writes nothing sends nothing; mixed families are refused with
/// EINVAL and an unroutable destination with EHOSTUNREACH. Returns 0, or the
/// number of the first failed check.
#[no_mangle]
pub(crate) extern "C" fn metaroce_rust_udp_selftest() -> c_int {
    use crate::ffi::net::{IpAddr, UdpTunnel};
    use crate::ffi::timer::msleep;
    use core::sync::atomic::Ordering::SeqCst;
    use kernel::sync::Arc;

    // GIDs: IPv4-mapped is IPv4 (as `rdma_gid2ip`), and back.
    let mapped = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1];
    if IpAddr::from_gid(&mapped) != LO4
        || LO4.to_gid() != mapped
        || IpAddr::from_gid(&LO6.to_gid()) != LO6
    {
        return 1;
    }
    let Ok(rx) = Arc::new(TestRx::default(), GFP_KERNEL) else {
        return 1;
    };
    let tunnel = match UdpTunnel::new(TEST_UDP_PORT, rx.clone()) {
        Ok(t) => t,
        Err(e) => {
            pr_err!("selftest: UdpTunnel::new({}): {:?}\n", TEST_UDP_PORT, e);
            return 2;
        }
    };
    if tunnel.port() != TEST_UDP_PORT || !tunnel.has_ipv6() {
        return 3;
    }
    let fill = |v6: bool| {
        move |buf: &mut [u8]| {
            let n = test_payload_len(v6);
            for (i, b) in buf.iter_mut().take(n).enumerate() {
                *b = test_payload_byte(v6, i);
            }
            n
        }
    };
    let r4 = tunnel.send(
        &LO4,
        &LO4,
        0,
        TEST_SRC_PORT4,
        TEST_UDP_PORT,
        true,
        1500,
        fill(false),
    );
    let r6 = tunnel.send(
        &LO6,
        &LO6,
        0,
        TEST_SRC_PORT6,
        TEST_UDP_PORT,
        true,
        1500,
        fill(true),
    );
    if r4.is_err() || r6.is_err() {
        pr_err!("selftest: send: v4 {:?}, v6 {:?}\n", r4, r6);
        return 4;
    }
    // Nothing to send: no datagram, no error.
    if tunnel
        .send(
            &LO4,
            &LO4,
            0,
            TEST_SRC_PORT4,
            TEST_UDP_PORT,
            true,
            64,
            |_| 0,
        )
        .is_err()
    {
        return 5;
    }
    if tunnel.send(&LO4, &LO6, 0, 1, TEST_UDP_PORT, false, 64, |_| 1) != Err(EINVAL) {
        return 6;
    }
    // TEST-NET-1 from a loopback source: no route, whatever the guest's routes.
    let unreachable = IpAddr::V4([192, 0, 2, 1]);
    match tunnel.send(&LO4, &unreachable, 0, 1, TEST_UDP_PORT, false, 64, |_| 1) {
        Err(e) if crate::ffi::net::is_unreachable(e) => {}
        other => {
            pr_err!("selftest: send to 192.0.2.1: {:?}\n", other);
            return 7;
        }
    }
    for _ in 0..200 {
        if rx.v4.count.load(SeqCst) >= 1 && rx.v6.count.load(SeqCst) >= 1 {
            break;
        }
        msleep(5);
    }
    // Long enough for a duplicate, or the empty send, to show up.
    msleep(20);
    let (n4, n6) = (rx.v4.count.load(SeqCst), rx.v6.count.load(SeqCst));
    let (bad4, bad6) = (rx.v4.bad.load(SeqCst), rx.v6.bad.load(SeqCst));
    if n4 != 1 || n6 != 1 || bad4 != 0 || bad6 != 0 || tunnel.malformed() != 0 {
        pr_err!(
            "selftest: received v4 {} (bad {:#x}), v6 {} (bad {:#x}), malformed {}\n",
            n4,
            bad4,
            n6,
            bad6,
            tunnel.malformed()
        );
        return 8;
    }
    0
}

/// A UDP port that is taken is refused with EADDRINUSE; dropping the tunnel
/// frees it for a new one. Returns 0, or the number of the failed check.
#[no_mangle]
pub(crate) extern "C" fn metaroce_rust_udp_busy_selftest() -> c_int {
    use crate::ffi::net::UdpTunnel;
    use kernel::sync::Arc;

    let Ok(rx) = Arc::new(TestRx::default(), GFP_KERNEL) else {
        return 1;
    };
    let Ok(first) = UdpTunnel::new(TEST_UDP_PORT, rx.clone()) else {
        return 2;
    };
    match UdpTunnel::new(TEST_UDP_PORT, rx.clone()) {
        Err(e) if e == crate::ffi::errno::eaddrinuse() => {}
        Err(e) => {
            pr_err!("selftest: second UdpTunnel::new: {:?}\n", e);
            return 3;
        }
        Ok(_) => return 4,
    }
    drop(first);
    if UdpTunnel::new(TEST_UDP_PORT, rx).is_err() {
        return 5;
    }
    0
}

/// Owners of the self-test timers dropped so far.
static TIMER_DROPS: core::sync::atomic::AtomicU32 = core::sync::atomic::AtomicU32::new(0);

/// Counts its drop in [`TIMER_DROPS`].
struct DropCount;

impl Drop for DropCount {
    fn drop(&mut self) {
        TIMER_DROPS.fetch_add(1, core::sync::atomic::Ordering::SeqCst);
    }
}

/// The owner of a self-test timer: counts and stamps its callbacks.
#[pin_data]
struct TestTimer {
    #[pin]
    timer: crate::ffi::timer::Timer<TestTimer>,
    fired: core::sync::atomic::AtomicU32,
    fired_at: core::sync::atomic::AtomicU64,
    _drop: DropCount,
}

crate::ffi::timer::impl_has_timer! { impl HasTimer for TestTimer { self.timer } }

impl crate::ffi::timer::TimerCallback for TestTimer {
    fn fired(this: &kernel::sync::Arc<Self>) {
        use core::sync::atomic::Ordering::SeqCst;
        this.fired_at.store(crate::ffi::timer::now_ns(), SeqCst);
        this.fired.fetch_add(1, SeqCst);
    }
}

impl TestTimer {
    fn new() -> Result<kernel::sync::Arc<Self>> {
        use core::sync::atomic::{AtomicU32, AtomicU64};
        kernel::sync::Arc::pin_init(
            pin_init!(TestTimer {
                timer <- crate::ffi::timer::Timer::new(),
                fired: AtomicU32::new(0),
                fired_at: AtomicU64::new(0),
                _drop: DropCount,
            }),
            GFP_KERNEL,
        )
    }

    /// Polls for up to a second until `cond` holds.
    fn wait(cond: impl Fn() -> bool) -> bool {
        for _ in 0..500 {
            if cond() {
                return true;
            }
            crate::ffi::timer::msleep(2);
        }
        cond()
    }
}

/// Timers: one armed 10 ms out fires once, not before its deadline; a
/// cancelled one does not fire; an owner dropped while armed is freed by the
/// expiry (in softirq); a shut-down timer ignores `arm` and releases its
/// owner; re-arming moves the deadline. All armed together, so the case waits
/// once (it runs at every load). Returns 0, or the failed check.
#[no_mangle]
pub(crate) extern "C" fn metaroce_rust_timer_selftest() -> c_int {
    use crate::ffi::timer::{msleep, now_ns, Timer};
    use core::sync::atomic::Ordering::SeqCst;
    const MS: u64 = 1_000_000;

    let drops0 = TIMER_DROPS.load(SeqCst);
    let t0 = now_ns();
    msleep(1);
    if now_ns() <= t0 {
        return 1;
    }
    let (Ok(a), Ok(b), Ok(c), Ok(e), Ok(f)) = (
        TestTimer::new(),
        TestTimer::new(),
        TestTimer::new(),
        TestTimer::new(),
        TestTimer::new(),
    ) else {
        return 2;
    };
    let now = now_ns();
    // a: fires once, at or after its deadline.
    let deadline = now + 10 * MS;
    Timer::arm(&a, deadline);
    // b: cancelled before its deadline. A guest whose vCPU stalled past the
    // deadline (TCG on a busy host) finds it fired instead: checked as such.
    let b_deadline = now + 50 * MS;
    Timer::arm(&b, b_deadline);
    let b_cancelled = b.timer.cancel();
    if b_cancelled && b.timer.cancel() {
        return 3;
    }
    if !b_cancelled {
        pr_info!("timer selftest: stalled past a 50 ms deadline; cancel not checked\n");
    }
    // c: dropped while armed: the expiry drops the last reference.
    Timer::arm(&c, now + 10 * MS);
    drop(c);
    // e: shut down while armed far out: no callback, `arm` ignored.
    Timer::arm(&e, now + 10_000 * MS);
    e.timer.shutdown();
    Timer::arm(&e, now);
    if !e.timer.is_shut_down() {
        return 4;
    }
    // f: re-armed from 10 s to 10 ms: fires soon, once.
    Timer::arm(&f, now + 10_000 * MS);
    Timer::arm(&f, now + 10 * MS);

    if !TestTimer::wait(|| {
        a.fired.load(SeqCst) > 0
            && f.fired.load(SeqCst) > 0
            && TIMER_DROPS.load(SeqCst) == drops0 + 1
    }) {
        return 5;
    }
    // Past b's deadline, long enough for a second (wrong) expiry to show.
    while now_ns() < b_deadline + 10 * MS {
        msleep(5);
    }
    if a.fired.load(SeqCst) != 1 || a.fired_at.load(SeqCst) < deadline {
        return 6;
    }
    pr_debug!(
        "timer selftest: fired {} us after its deadline\n",
        (a.fired_at.load(SeqCst) - deadline) / 1000
    );
    let b_fired = if b_cancelled { 0 } else { 1 };
    if b.fired.load(SeqCst) != b_fired || e.fired.load(SeqCst) != 0 || f.fired.load(SeqCst) != 1 {
        return 7;
    }
    // Fired or cancelled timers hold no reference: dropping frees at once.
    if a.timer.cancel() || b.timer.cancel() || f.timer.cancel() {
        return 8;
    }
    drop((a, b, e, f));
    if TIMER_DROPS.load(SeqCst) != drops0 + 5 {
        return 9;
    }
    0
}

/// Owners of the self-test deferrals dropped so far.
static DEFER_DROPS: core::sync::atomic::AtomicU32 = core::sync::atomic::AtomicU32::new(0);

/// The owner of a self-test deferral: counts its runs and its drop.
#[pin_data(PinnedDrop)]
struct TestDeferred {
    #[pin]
    batch: crate::ffi::defer::Deferred<TestDeferred>,
    runs: core::sync::atomic::AtomicU32,
}

#[pinned_drop]
impl PinnedDrop for TestDeferred {
    fn drop(self: Pin<&mut Self>) {
        DEFER_DROPS.fetch_add(1, core::sync::atomic::Ordering::SeqCst);
    }
}

crate::ffi::defer::impl_has_deferred! { impl HasDeferred for TestDeferred { self.batch } }

impl crate::ffi::defer::DeferredCallback for TestDeferred {
    fn run(this: &kernel::sync::Arc<Self>) {
        this.runs.fetch_add(1, core::sync::atomic::Ordering::SeqCst);
    }
}

impl TestDeferred {
    fn new() -> Result<kernel::sync::Arc<Self>> {
        kernel::sync::Arc::pin_init(
            pin_init!(TestDeferred {
                batch <- crate::ffi::defer::Deferred::new(),
                runs: core::sync::atomic::AtomicU32::new(0),
            }),
            GFP_KERNEL,
        )
    }
}

/// Work at the end of a receive batch ([`crate::ffi::defer`]): with bottom
/// halves off (as in a receive), an owner queued three times and another
/// queued once and then dropped by its holder have not run; once bottom
/// halves are back on, each runs exactly once, and the dropped one is freed
/// by its run; a run owner can be queued again. Returns 0, or the failed
/// check.
#[no_mangle]
pub(crate) extern "C" fn metaroce_rust_defer_selftest() -> c_int {
    use crate::ffi::defer::Deferred;
    use core::sync::atomic::Ordering::SeqCst;

    let drops0 = DEFER_DROPS.load(SeqCst);
    let (Ok(a), Ok(b)) = (TestDeferred::new(), TestDeferred::new()) else {
        return 1;
    };
    {
        let _bh = crate::ffi::sync::BhDisabled::new();
        Deferred::queue(&a);
        Deferred::queue(&a);
        Deferred::queue(&b);
        Deferred::queue(&a);
        let b_runs = b.runs.load(SeqCst);
        drop(b);
        // Nothing runs before this CPU's softirqs may; `b` lives on, queued.
        if a.runs.load(SeqCst) != 0 || b_runs != 0 || DEFER_DROPS.load(SeqCst) != drops0 {
            return 2;
        }
    }
    // The work runs from softirq: at `local_bh_enable` on this CPU, or soon.
    if !TestTimer::wait(|| a.runs.load(SeqCst) >= 1 && DEFER_DROPS.load(SeqCst) == drops0 + 1) {
        return 3;
    }
    if a.runs.load(SeqCst) != 1 {
        return 4;
    }
    {
        let _bh = crate::ffi::sync::BhDisabled::new();
        Deferred::queue(&a);
    }
    if !TestTimer::wait(|| a.runs.load(SeqCst) == 2) {
        return 5;
    }
    // No reference left behind: dropping `a` frees it at once.
    drop(a);
    if DEFER_DROPS.load(SeqCst) != drops0 + 2 {
        return 6;
    }
    0
}

/// Values of the [`metaroce_rust_rcu_map_selftest`] map, counted when dropped.
struct MapValue(u32);

/// How many [`MapValue`]s were dropped.
static MAP_DROPS: core::sync::atomic::AtomicU32 = core::sync::atomic::AtomicU32::new(0);

impl Drop for MapValue {
    fn drop(&mut self) {
        MAP_DROPS.fetch_add(1, core::sync::atomic::Ordering::SeqCst);
    }
}

/// The RCU map ([`crate::ffi::rcu_map`]): 2 000 keys spread over the 24-bit
/// space (as QPNs are) are found with their values; a taken key is refused
/// with `EEXIST` and its value dropped at once; a removed key is gone at
/// once, its value dropped only after the reader's section and a grace
/// period; a key can be stored again; a taken key's value is the taker's,
/// dropped when it drops it; dropping the map drops what it holds.
/// Returns 0, or the failed check.
#[no_mangle]
pub(crate) extern "C" fn metaroce_rust_rcu_map_selftest() -> c_int {
    use crate::ffi::rcu_map::{RcuGuard, RcuMap, Reaper};
    use core::sync::atomic::Ordering::SeqCst;
    use kernel::sync::Arc;
    const N: u32 = 2000;
    let key = |i: u32| i.wrapping_mul(2_654_435_761) & 0x00ff_ffff;

    let drops0 = MAP_DROPS.load(SeqCst);
    let dropped = || MAP_DROPS.load(SeqCst) - drops0;
    let Ok(map) = RcuMap::<MapValue>::new() else {
        return 1;
    };
    for i in 0..N {
        let Ok(v) = Arc::new(MapValue(key(i)), GFP_KERNEL) else {
            return 2;
        };
        if map.insert(key(i), v).is_err() {
            return 3;
        }
    }
    let Ok(dup) = Arc::new(MapValue(0), GFP_KERNEL) else {
        return 2;
    };
    if map.insert(key(7), dup) != Err(EEXIST) || dropped() != 1 {
        return 4;
    }
    {
        let g = RcuGuard::new();
        for i in 0..N {
            if map.get(key(i), &g).map(|v| v.0) != Some(key(i)) {
                return 5;
            }
        }
        // Not a key: 2 654 435 761 is odd, so `key` is a bijection of the
        // low 24 bits and these are the keys of N..2N.
        if (N..2 * N).any(|i| map.get(key(i), &g).is_some()) {
            return 6;
        }
    }
    // Removed while a reader holds it: gone from the map at once, dropped
    // only after the section.
    {
        let g = RcuGuard::new();
        let Some(held) = map.get(key(0), &g) else {
            return 7;
        };
        if !map.remove(key(0)) || map.remove(key(0)) || map.get(key(0), &g).is_some() {
            return 8;
        }
        if held.0 != key(0) || dropped() != 1 {
            return 9;
        }
    }
    for i in 1..N / 2 {
        if !map.remove(key(i)) {
            return 10;
        }
    }
    drop(Reaper::new());
    if dropped() != 1 + N / 2 {
        return 11;
    }
    // Stored again after removal; `with` lends it.
    let Ok(v) = Arc::new(MapValue(5), GFP_KERNEL) else {
        return 2;
    };
    if map.insert(key(0), v).is_err() || map.with(key(0), |v| v.0) != Some(5) {
        return 12;
    }
    if map.with(key(1), |v| v.0).is_some() || map.with(key(N - 1), |v| v.0) != Some(key(N - 1)) {
        return 13;
    }
    // Taken: gone from the map, handed over whole (the only reference) after
    // the grace period, and dropped by the taker; a second take finds none.
    // SAFETY: process context (the KUnit case's thread), no guard held.
    let Some(t) = (unsafe { map.take(key(N - 1)) }) else {
        return 15;
    };
    // SAFETY: as above.
    if t.0 != key(N - 1) || map.contains(key(N - 1)) || unsafe { map.take(key(N - 1)) }.is_some() {
        return 16;
    }
    drop(t);
    if dropped() != 2 + N / 2 {
        return 17;
    }
    drop(map);
    if dropped() != 2 + N {
        return 14;
    }
    0
}
