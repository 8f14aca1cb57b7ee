//! The fabric's data plane: links (serialisation, propagation, gray loss, reordering),
//! switch ports over shared buffers ([`crate::switch`]), ECMP forwarding over
//! [`crate::topo::Routes`], PFC frames, link failures and routing reconvergence.
//!
//! A link's transmitter is event-driven only while it has a queue: a packet reaching an
//! idle port starts at once, and a transmit-done event is scheduled only when another
//! packet waits. Times in ns.

use crate::net::{mix, touch, Body, Pkt, Pool, Rng};
use crate::parallel::{Msg, Part};
use crate::queue::{Ev, Queue};
use crate::switch::{lossless, Buffer, Drop, Port, Queued, SwitchConfig};
use crate::topo::{FatTree, Node, Routes, Topology};

pub struct Fabric {
    pub topo: Topology,
    pub routes: Routes,
    pub cfg: SwitchConfig,
    /// Per link.
    pub ports: Vec<Port>,
    /// Per switch.
    pub bufs: Vec<Buffer>,
    /// Per switch: ingress links that sent XOFF (rechecked as the buffer frees).
    xoffs: Vec<Vec<u32>>,
    /// Per host: bytes waiting in its NIC ports (all planes).
    pub host_q: Vec<u64>,
    /// `[plane × hosts + h]`: bytes waiting in host `h`'s NIC port on `plane` (a NIC
    /// has one port, with its own queue, per plane).
    pub host_plane_q: Vec<u64>,
    pub pool: Pool,
    rng: Rng,
    /// Routing reconvergence delay after a link fails, ns; `None`: routing never
    /// reacts (failed links black-hole).
    pub reconverge_ns: Option<u64>,
    /// This fabric's share of a partitioned run ([`crate::parallel`]): events for nodes
    /// of another partition go to its mailbox instead of the queue. `None`: all of it.
    pub part: Option<Part>,
}

impl Fabric {
    pub fn new(ft: FatTree, cfg: SwitchConfig, seed: u64) -> Fabric {
        let topo = Topology::build(ft, seed);
        let routes = Routes::new(&topo, &|_| true);
        let mut ports: Vec<Port> = (0..topo.links.len()).map(|_| Port::new()).collect();
        let mut bufs = vec![Buffer::default(); topo.switches.len()];
        for (s, b) in bufs.iter_mut().enumerate() {
            b.size = if cfg.buffer_per_tbps == 0 {
                u64::MAX
            } else {
                cfg.buffer_per_tbps * topo.switches[s].gbps / 1000
            };
        }
        for (l, spec) in topo.links.iter().enumerate() {
            if let Node::Switch(s) = spec.to {
                let h = cfg.headroom(spec.delay, spec.ps_per_byte);
                ports[l].headroom = h;
                let b = &mut bufs[s as usize];
                if b.size != u64::MAX {
                    b.size = b.size.saturating_sub(h);
                }
            }
        }
        Fabric {
            xoffs: vec![Vec::new(); topo.switches.len()],
            host_q: vec![0; ft.hosts() as usize],
            host_plane_q: vec![0; ft.hosts() as usize * usize::from(ft.planes)],
            topo,
            routes,
            cfg,
            ports,
            bufs,
            pool: Pool::default(),
            rng: Rng::new(seed ^ 0x05ee_dfab),
            reconverge_ns: None,
            part: None,
        }
    }

    /// Draws this fabric's random numbers (ECN marks, gray loss, reordering) from a
    /// stream of their own for partition `me` of a partitioned run, so partitions do not
    /// repeat each other's draws.
    pub fn reseed(&mut self, me: u8) {
        self.rng = Rng::new(self.rng.next_u64() ^ mix(u64::from(me) + 1));
    }

    /// Sets link `l`'s rate to `gbps` (a slower NIC, say); before traffic starts.
    pub fn set_link_gbps(&mut self, l: usize, gbps: u64) {
        self.topo.links[l].ps_per_byte = 8000 / gbps.max(1);
    }

    pub fn ft(&self) -> &FatTree {
        &self.topo.ft
    }
    #[allow(dead_code)] // API for issue 13's baselines and workloads (roce.rs, irn.rs, workload.rs)
    pub fn host_up(&self, p: u8, h: u32) -> usize {
        self.topo.host_up(p, h)
    }
    pub fn host_down(&self, p: u8, h: u32) -> usize {
        self.topo.host_down(p, h)
    }
    pub fn up(&self, p: u8, tor: u16, j: u16) -> usize {
        self.topo.up(p, tor, j)
    }
    pub fn down(&self, p: u8, s: u16, tor: u16) -> usize {
        self.topo.down(p, s, tor)
    }
    /// The plane a host puts a packet on: chosen by its UDP source port.
    pub fn plane_of(&self, sport: u16) -> u8 {
        (u32::from(sport) % u32::from(self.topo.ft.planes)) as u8
    }

    /// Index of host `h`'s NIC port for link `l` (its uplink on some plane) in
    /// [`Fabric::host_plane_q`].
    fn host_port(&self, l: usize, h: u32) -> usize {
        usize::from(self.topo.links[l].plane) * self.topo.ft.hosts() as usize + h as usize
    }

    /// Bytes waiting in host `h`'s NIC port on `plane`.
    pub fn host_port_bytes(&self, h: u32, plane: u8) -> u64 {
        self.host_plane_q[usize::from(plane) * self.topo.ft.hosts() as usize + h as usize]
    }

    fn host_dequeued(&mut self, l: usize, h: u32, wire: u64) {
        self.host_q[h as usize] -= wire;
        let i = self.host_port(l, h);
        self.host_plane_q[i] -= wire;
    }

    /// The links, host uplink first, that a packet from host `a` to host `b` with UDP
    /// source port `sport` crosses as the switches hash it now (the path a single-path
    /// QP is pinned to). Panics if a switch has no route to `b`.
    pub fn hashed_path(&self, a: u32, b: u32, sport: u16) -> Vec<usize> {
        let key = crate::net::flow_key(a, b, sport);
        let mut l = self.host_up(self.plane_of(sport), a);
        let mut path = vec![l];
        while let Node::Switch(sw) = self.topo.links[l].to {
            l = self.route(sw, b, key).expect("routed");
            path.push(l);
        }
        path
    }

    /// The output link switch `s` forwards a packet to `dst` with 5-tuple `key` on,
    /// if it has a route.
    pub fn route(&self, s: u32, dst: u32, key: u64) -> Option<usize> {
        let sw = &self.topo.switches[s as usize];
        let tor = self.topo.ft.tor_of(dst);
        if sw.tier == 0 && sw.index == tor {
            return Some(self.topo.host_down(sw.plane, dst));
        }
        let g = self.routes.group(s, tor);
        if g.is_empty() {
            return None;
        }
        let (h, n) = (mix(key ^ sw.salt), g.len() as u64);
        // `h % n`; a mask when `n` is a power of two (a fat tree's groups nearly always
        // are), the same member, without a 64-bit division per hop.
        let i = if n.is_power_of_two() {
            h & (n - 1)
        } else {
            h % n
        };
        Some(g[i as usize] as usize)
    }

    /// Prefetches ([`touch`]) what event `ev` will read, in two steps: `far` (several
    /// events ahead) the packet or the port (its first two cache lines); near (a few
    /// events ahead) what depends on those (the output port a switch will route the
    /// packet to, the head of a port's queue). No effect on any result.
    #[inline(always)]
    pub fn prefetch(&self, ev: Ev, far: bool) {
        match ev {
            Ev::Arrive(pid) => {
                if far {
                    self.pool.prefetch(pid, false);
                    return;
                }
                let p = self.pool.get(pid);
                match self.topo.links[p.in_link as usize].to {
                    Node::Host(_) => self.pool.prefetch(pid, true),
                    Node::Switch(s) => {
                        if let Some(out) = self.route(s, p.dst, p.key) {
                            let port = &self.ports[out];
                            touch(port.qbytes[0] ^ port.q[0].len() as u64);
                        }
                    }
                }
            }
            Ev::LinkDone(l) => {
                let port = &self.ports[l as usize];
                if far {
                    touch(port.busy_until ^ port.q[0].len() as u64);
                } else if let Some(e) = port.q[0].front() {
                    touch(u64::from(e.pid));
                }
            }
            _ => {}
        }
    }

    fn drop(&mut self, l: usize, pid: u32, why: Drop) {
        self.ports[l].stats.count(why);
        self.pool.free(pid);
    }

    /// A host NIC or a switch puts packet `pid` on link `l`'s output queue: admission
    /// (buffer, PFC), ECN marking, then the transmitter.
    pub fn send(&mut self, now: u64, q: &mut Queue, l: usize, pid: u32) {
        if !self.ports[l].up {
            return self.drop(l, pid, Drop::Failure);
        }
        let p = self.pool.get(pid);
        let (class, wire, inl, ect) = (p.class, u64::from(p.wire), p.in_link as usize, p.ect);
        let qi = Port::queue_of(class, self.cfg.strict_ctrl);
        match self.topo.links[l].from {
            Node::Switch(s) => {
                let s = s as usize;
                if lossless(&self.cfg, class) {
                    let alpha = self.cfg.pfc.map(|p| p.alpha).unwrap_or(1.0);
                    let ing = &mut self.ports[inl];
                    if !ing.xoff && self.bufs[s].admits(ing.ing_shared, wire, alpha) {
                        ing.ing_shared += wire;
                        self.bufs[s].take(wire);
                    } else if ing.ing_hdrm + wire <= ing.headroom {
                        ing.ing_hdrm += wire;
                        if !ing.xoff {
                            ing.xoff = true;
                            ing.stats.xoff_frames += 1;
                            self.xoffs[s].push(inl as u32);
                            self.pause_at(q, now + self.topo.links[inl].delay, inl, true);
                        }
                    } else {
                        return self.drop(inl, pid, Drop::Headroom);
                    }
                } else {
                    let port = &self.ports[l];
                    if port.qbytes[qi] + wire > self.cfg.qlimit
                        || !self.bufs[s].admits(port.qbytes[qi], wire, self.cfg.alpha)
                    {
                        return self.drop(l, pid, Drop::Buffer);
                    }
                    self.bufs[s].take(wire);
                }
                if ect && self.cfg.ecn.mark(self.ports[l].qbytes[qi], &mut self.rng) {
                    self.pool.get_mut(pid).ce = true;
                    self.ports[l].stats.ecn_marks += 1;
                }
            }
            Node::Host(h) => {
                self.host_q[h as usize] += wire;
                let i = self.host_port(l, h);
                self.host_plane_q[i] += wire;
            }
        }
        // From here the packet is on link `l` (its arrival event names only the packet).
        self.pool.get_mut(pid).in_link = l as u32;
        let port = &mut self.ports[l];
        port.q[qi].push_back(Queued {
            pid,
            in_link: inl as u32,
            wire: wire as u32,
            class,
        });
        port.qbytes[qi] += wire;
        port.stats.peak_q = port.stats.peak_q.max(port.waiting());
        self.kick(now, q, l);
    }

    /// Starts the transmitter if it is idle and may send, or schedules it.
    fn kick(&mut self, now: u64, q: &mut Queue, l: usize) {
        let port = &mut self.ports[l];
        if port.done_pending || port.eligible().is_none() {
            return;
        }
        if port.busy_until <= now {
            self.tx_next(now, q, l);
        } else {
            port.done_pending = true;
            q.push(port.busy_until, Ev::LinkDone(l as u32));
        }
    }

    /// Transmits the next eligible packet of link `l` (the transmitter is free).
    fn tx_next(&mut self, now: u64, q: &mut Queue, l: usize) {
        let Some(qi) = self.ports[l].eligible() else {
            return;
        };
        let port = &mut self.ports[l];
        let e = port.q[qi].pop_front().expect("eligible");
        let (pid, class, wire, inl) = (e.pid, e.class, u64::from(e.wire), e.in_link as usize);
        port.qbytes[qi] -= wire;
        match self.topo.links[l].from {
            Node::Switch(s) => self.release(now, q, s as usize, class, wire, inl),
            Node::Host(h) => self.host_dequeued(l, h, wire),
        }
        let spec = &self.topo.links[l];
        let port = &mut self.ports[l];
        port.stats.tx_bytes += wire;
        port.stats.tx_pkts += 1;
        port.busy_until = now + (wire * spec.ps_per_byte).div_ceil(1000);
        let mut at = port.busy_until + spec.delay;
        let (loss, rp, rns) = (port.loss, port.reorder_p, port.reorder_ns);
        if loss > 0.0 && self.rng.unit() < loss {
            self.drop(l, pid, Drop::Gray);
        } else {
            if rp > 0.0 && self.rng.unit() < rp {
                at += rns;
            }
            self.arrive_at(q, at, l, pid);
        }
        let port = &mut self.ports[l];
        if port.eligible().is_some() {
            port.done_pending = true;
            q.push(port.busy_until, Ev::LinkDone(l as u32));
        }
    }

    /// Packet `pid`, on link `l`, reaches the link's far end at `at`: an event here, or
    /// a message to the partition that owns that end (the packet leaves this arena).
    fn arrive_at(&mut self, q: &mut Queue, at: u64, l: usize, pid: u32) {
        match &mut self.part {
            Some(part) if !part.owns(self.topo.links[l].to) => {
                let (pkt, body) = (self.pool.get(pid), self.pool.body(pid));
                part.ship_packet(self.topo.links[l].to, at, pkt, body);
                self.pool.free(pid);
            }
            _ => q.push(at, Ev::Arrive(pid)),
        }
    }

    /// A PFC frame for link `l`'s transmitter reaches it at `at` (here, or in the
    /// partition that owns the transmitter).
    fn pause_at(&mut self, q: &mut Queue, at: u64, l: usize, on: bool) {
        match &mut self.part {
            Some(part) if !part.owns(self.topo.links[l].from) => {
                let link = l as u32;
                part.ship(self.topo.links[l].from, Msg::Pause { at, link, on });
            }
            _ => q.push(at, Ev::Pause(l as u32, on)),
        }
    }

    /// A message from another partition: its packet enters this arena.
    pub fn receive(&mut self, q: &mut Queue, m: &Msg) {
        match m {
            Msg::Arrive { at, pkt, body } => {
                let pid = self.pool.alloc_copy(pkt, body);
                q.push(*at, Ev::Arrive(pid));
            }
            Msg::Pause { at, link, on } => q.push(*at, Ev::Pause(*link, *on)),
        }
    }

    /// A packet leaves switch `s`'s buffer: free its bytes, and resume ingress ports
    /// whose PFC pause may end.
    fn release(&mut self, now: u64, q: &mut Queue, s: usize, class: u8, wire: u64, inl: usize) {
        if !lossless(&self.cfg, class) {
            self.bufs[s].give(wire);
        } else {
            let ing = &mut self.ports[inl];
            let h = ing.ing_hdrm.min(wire);
            ing.ing_hdrm -= h;
            ing.ing_shared -= wire - h;
            self.bufs[s].give(wire - h);
        }
        if self.xoffs[s].is_empty() {
            return;
        }
        let pfc = self.cfg.pfc.expect("XOFF without PFC");
        let free = self.bufs[s].free() as f64;
        let mut i = 0;
        while i < self.xoffs[s].len() {
            let il = self.xoffs[s][i] as usize;
            let ing = &mut self.ports[il];
            if ing.ing_hdrm == 0 && ((ing.ing_shared + pfc.hysteresis) as f64) < pfc.alpha * free {
                ing.xoff = false;
                ing.stats.xon_frames += 1;
                self.xoffs[s].swap_remove(i);
                let at = now + self.topo.links[il].delay;
                self.pause_at(q, at, il, false);
            } else {
                i += 1;
            }
        }
    }

    /// Link `l`'s transmitter finished a frame. Returns the host whose NIC port it is.
    pub fn on_link_done(&mut self, now: u64, q: &mut Queue, l: usize) -> Option<u32> {
        self.ports[l].done_pending = false;
        self.tx_next(now, q, l);
        self.nic_host(l)
    }

    fn nic_host(&self, l: usize) -> Option<u32> {
        match self.topo.links[l].from {
            Node::Host(h) => Some(h),
            Node::Switch(_) => None,
        }
    }

    /// Packet `pid` reached the far end of the link it is on: a switch forwards it
    /// (that link becomes its ingress); at a host it is returned (the caller delivers
    /// and frees it).
    pub fn on_arrive(&mut self, now: u64, q: &mut Queue, pid: u32) -> Option<u32> {
        let p = self.pool.get(pid);
        let l = p.in_link as usize;
        match self.topo.links[l].to {
            Node::Host(h) => Some(h),
            Node::Switch(s) => {
                let (dst, key) = (p.dst, p.key);
                match self.route(s, dst, key) {
                    Some(out) => self.send(now, q, out, pid),
                    // No route: counted on the link it came in on.
                    None => self.drop(l, pid, Drop::Failure),
                }
                None
            }
        }
    }

    /// A PFC frame reached link `l`'s transmitter. Returns the host whose NIC port it
    /// is (its endpoints may send again).
    pub fn on_pause(&mut self, now: u64, q: &mut Queue, l: usize, on: bool) -> Option<u32> {
        let port = &mut self.ports[l];
        if on && !port.paused {
            port.paused = true;
            port.paused_at = now;
        } else if !on && port.paused {
            port.paused = false;
            port.stats.paused_ns += now - port.paused_at;
            self.kick(now, q, l);
        }
        self.nic_host(l)
    }

    /// Links go down: what they hold is lost; routing learns after `reconverge_ns`.
    pub fn fail(&mut self, now: u64, q: &mut Queue, links: &[usize]) {
        let mut planes = 0u16;
        for &l in links {
            self.ports[l].up = false;
            self.ports[l].failed_at = now;
            planes |= 1 << self.topo.links[l].plane;
            for qi in 0..2 {
                while let Some(e) = self.ports[l].q[qi].pop_front() {
                    let (pid, class, wire, inl) =
                        (e.pid, e.class, u64::from(e.wire), e.in_link as usize);
                    self.ports[l].qbytes[qi] -= wire;
                    match self.topo.links[l].from {
                        Node::Switch(s) => self.release(now, q, s as usize, class, wire, inl),
                        Node::Host(h) => self.host_dequeued(l, h, wire),
                    }
                    self.drop(l, pid, Drop::Failure);
                }
            }
        }
        if let Some(d) = self.reconverge_ns {
            for p in 0..self.topo.ft.planes {
                if planes & 1 << p != 0 {
                    q.push(now + d, Ev::Reconverge(p));
                }
            }
        }
    }

    /// Links come back; routing uses them after `reconverge_ns`.
    pub fn restore(&mut self, now: u64, q: &mut Queue, links: &[usize]) {
        for &l in links {
            self.ports[l].up = true;
            q.push(
                now + self.reconverge_ns.unwrap_or(0),
                Ev::Reconverge(self.topo.links[l].plane),
            );
        }
    }

    /// Routing of `plane` reconverges: links down for at least the reconvergence delay
    /// leave every ECMP group (other failures are still unknown to routing).
    pub fn reconverge(&mut self, now: u64, plane: u8) {
        let d = self.reconverge_ns.unwrap_or(0);
        let ports = &self.ports;
        let alive = |l: usize| ports[l].up || ports[l].failed_at + d > now;
        self.routes.compute(&self.topo, plane, &alive);
    }

    /// Allocates a packet from host `src`'s endpoint and sends it on the NIC port of
    /// the plane its source port selects.
    #[cfg_attr(not(test), allow(dead_code))] // the fabric tests; the engine allocates
    pub fn inject(&mut self, now: u64, q: &mut Queue, p: Pkt, body: Body) {
        let pid = self.pool.alloc(p, body);
        self.inject_pid(now, q, pid);
    }

    /// [`Fabric::inject`] of a packet already in the arena.
    pub fn inject_pid(&mut self, now: u64, q: &mut Queue, pid: u32) {
        let p = self.pool.get(pid);
        let l = self.topo.host_up(self.plane_of(p.sport), p.src);
        self.pool.get_mut(pid).in_link = l as u32;
        self.send(now, q, l, pid);
    }
}
