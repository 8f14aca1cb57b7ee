//! Fat-tree topologies and their routing.
//!
//! * 2 tiers (leaf–spine): `tors` leaves of `hosts_per_tor` hosts, each leaf with one
//!   link to each of `tor_uplinks` spines.
//! * 3 tiers (ToR–aggregation–core, as in Al-Fares et al., "A Scalable, Commodity Data
//!   Center Network Architecture", SIGCOMM 2008, generalised to any oversubscription):
//!   `pods` pods of `tors_per_pod` ToRs and `tor_uplinks` aggregation switches, each
//!   ToR linked once to each aggregation switch of its pod; aggregation switch `a` of
//!   every pod has `agg_uplinks` links to core group `a` (cores `a·agg_uplinks ..`), so
//!   a core switch has one link to each pod.
//!
//! Oversubscription is host-facing capacity over uplink capacity: at the ToR
//! `hosts_per_tor × host_gbps : tor_uplinks × fabric_gbps`, at the aggregation switch
//! `tors_per_pod : agg_uplinks` (both sides at `fabric_gbps`).
//!
//! A fabric of P planes is P copies of the tree; host `h` has one NIC port per plane,
//! attached to ToR `h / hosts_per_tor` of each plane.
//!
//! Routing is shortest-path ECMP (what BGP/OSPF compute on a Clos): for every switch and
//! destination ToR, the group of output links on a shortest path over the links routing
//! believes up. A switch picks a member by hashing the 5-tuple with its own salt.

use crate::net::mix;
use std::collections::VecDeque;

/// Fat-tree parameters. Rates in Gb/s; delays (propagation, per hop) in ns.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FatTree {
    /// 2 (leaf–spine) or 3 (ToR–aggregation–core).
    pub tiers: u8,
    /// Independent copies of the tree; 1–8.
    pub planes: u8,
    /// Pods (3 tiers); 1 for 2 tiers.
    pub pods: u16,
    /// ToRs per pod (2 tiers: all leaves).
    pub tors_per_pod: u16,
    pub hosts_per_tor: u16,
    /// Uplinks per ToR: spines (2 tiers) or aggregation switches per pod (3 tiers).
    pub tor_uplinks: u16,
    /// Core links per aggregation switch (3 tiers); unused for 2 tiers.
    pub agg_uplinks: u16,
    /// Host–ToR link rate.
    pub host_gbps: u64,
    /// Switch–switch link rate.
    pub fabric_gbps: u64,
    /// Host–ToR propagation delay.
    pub host_delay_ns: u64,
    /// Switch–switch propagation delay.
    pub fabric_delay_ns: u64,
}

impl FatTree {
    /// A leaf–spine fabric given switch counts directly (the original scenarios).
    pub fn leaf_spine(planes: u8, leaves: u16, hosts_per_leaf: u16, spines: u16) -> FatTree {
        FatTree {
            tiers: 2,
            planes,
            pods: 1,
            tors_per_pod: leaves,
            hosts_per_tor: hosts_per_leaf,
            tor_uplinks: spines,
            agg_uplinks: 0,
            host_gbps: 100,
            fabric_gbps: 100,
            host_delay_ns: 1000,
            fabric_delay_ns: 1000,
        }
    }

    /// 2 tiers, `oversub`:1 at the leaf (uplinks = hosts per leaf / oversub).
    pub fn two_tier(leaves: u16, hosts_per_leaf: u16, oversub: u16) -> FatTree {
        FatTree::leaf_spine(1, leaves, hosts_per_leaf, hosts_per_leaf / oversub.max(1))
    }

    /// 3 tiers with `tor_oversub`:1 at the ToR and `agg_oversub`:1 at the aggregation
    /// switch. `three_tier(16, 8, 8, 1, 1)` is the k = 16 fat tree: 1,024 hosts.
    pub fn three_tier(
        pods: u16,
        tors_per_pod: u16,
        hosts_per_tor: u16,
        tor_oversub: u16,
        agg_oversub: u16,
    ) -> FatTree {
        FatTree {
            tiers: 3,
            pods,
            tors_per_pod,
            tor_uplinks: hosts_per_tor / tor_oversub.max(1),
            agg_uplinks: tors_per_pod / agg_oversub.max(1),
            ..FatTree::leaf_spine(1, 0, hosts_per_tor, 0)
        }
    }

    pub fn hosts(&self) -> u32 {
        self.tors() * u32::from(self.hosts_per_tor)
    }
    pub fn tors(&self) -> u32 {
        u32::from(self.pods) * u32::from(self.tors_per_pod)
    }
    /// Tier-1 switches per plane: spines, or aggregation switches of all pods.
    pub fn tier1(&self) -> u32 {
        if self.tiers == 2 {
            u32::from(self.tor_uplinks)
        } else {
            u32::from(self.pods) * u32::from(self.tor_uplinks)
        }
    }
    pub fn cores(&self) -> u32 {
        if self.tiers == 2 {
            0
        } else {
            u32::from(self.tor_uplinks) * u32::from(self.agg_uplinks)
        }
    }
    pub fn switches_per_plane(&self) -> u32 {
        self.tors() + self.tier1() + self.cores()
    }
    /// Host-facing capacity of a ToR, Gb/s.
    pub fn tor_down_gbps(&self) -> u64 {
        u64::from(self.hosts_per_tor) * self.host_gbps
    }
    /// Uplink capacity of a ToR, Gb/s.
    pub fn tor_up_gbps(&self) -> u64 {
        u64::from(self.tor_uplinks) * self.fabric_gbps
    }
    /// Downlink and uplink capacity of an aggregation switch, Gb/s (3 tiers).
    pub fn agg_gbps(&self) -> (u64, u64) {
        (
            u64::from(self.tors_per_pod) * self.fabric_gbps,
            u64::from(self.agg_uplinks) * self.fabric_gbps,
        )
    }
    /// Bidirectional cables, all planes.
    #[allow(dead_code)] // tests and workloads
    pub fn cables(&self) -> u64 {
        let per = u64::from(self.hosts())
            + u64::from(self.tors()) * u64::from(self.tor_uplinks)
            + u64::from(self.tier1()) * u64::from(self.agg_uplinks) * u64::from(self.tiers - 2);
        per * u64::from(self.planes)
    }
    pub fn tor_of(&self, h: u32) -> u32 {
        h / u32::from(self.hosts_per_tor)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Node {
    Host(u32),
    /// Global switch index: `plane × switches_per_plane + local`, local numbering ToRs,
    /// then tier 1, then cores.
    Switch(u32),
}

/// One direction of a cable: a transmitter with its output queue at `from`.
#[derive(Clone, Debug)]
pub struct LinkSpec {
    pub from: Node,
    pub to: Node,
    pub plane: u8,
    /// Serialisation time, picoseconds per byte (8000 / Gb/s).
    pub ps_per_byte: u64,
    /// Propagation delay, ns. PFC frames for this link travel the cable's other
    /// direction and take the same delay.
    pub delay: u64,
}

#[derive(Clone, Debug)]
pub struct SwitchSpec {
    pub plane: u8,
    /// 0 ToR/leaf, 1 spine/aggregation, 2 core.
    pub tier: u8,
    /// Index within its tier and plane.
    pub index: u32,
    /// Output links: ToR: hosts then uplinks; spine: leaves; aggregation: ToRs of its
    /// pod then cores; core: pods.
    pub ports: Vec<u32>,
    /// ECMP hash salt.
    pub salt: u64,
    /// Sum of port rates, Gb/s (sizes the shared buffer).
    pub gbps: u64,
}

/// The built graph.
pub struct Topology {
    pub ft: FatTree,
    pub links: Vec<LinkSpec>,
    pub switches: Vec<SwitchSpec>,
    /// `[plane × hosts + h]`: the host's NIC port (host → ToR).
    host_up: Vec<u32>,
    /// `[plane × hosts + h]`: ToR → host.
    host_down: Vec<u32>,
}

impl Topology {
    pub fn build(ft: FatTree, seed: u64) -> Topology {
        assert!(ft.tiers == 2 || ft.tiers == 3, "2 or 3 tiers");
        assert!((1..=8).contains(&ft.planes), "1 to 8 planes");
        let mut t = Topology {
            ft,
            links: Vec::new(),
            switches: Vec::new(),
            host_up: vec![0; ft.hosts() as usize * usize::from(ft.planes)],
            host_down: vec![0; ft.hosts() as usize * usize::from(ft.planes)],
        };
        let spp = ft.switches_per_plane();
        let (tors, t1) = (ft.tors(), ft.tier1());
        for p in 0..ft.planes {
            for local in 0..spp {
                let (tier, index) = if local < tors {
                    (0, local)
                } else if local < tors + t1 {
                    (1, local - tors)
                } else {
                    (2, local - tors - t1)
                };
                // The leaf salt is the original simulator's, so its ECMP choices hold.
                let id = if tier == 0 {
                    u64::from(p) << 20 | u64::from(index)
                } else {
                    u64::from(p) << 20 | u64::from(tier) << 40 | u64::from(index)
                };
                t.switches.push(SwitchSpec {
                    plane: p,
                    tier,
                    index,
                    ports: Vec::new(),
                    salt: mix(seed ^ id),
                    gbps: 0,
                });
            }
            let base = u32::from(p) * spp;
            let hosts = ft.hosts();
            for h in 0..hosts {
                let tor = base + ft.tor_of(h);
                let (up, down) = t.cable(
                    p,
                    Node::Host(h),
                    Node::Switch(tor),
                    ft.host_gbps,
                    ft.host_delay_ns,
                );
                let i = usize::from(p) * hosts as usize + h as usize;
                t.host_up[i] = up;
                t.host_down[i] = down;
            }
            for tor in 0..tors {
                let pod = tor / u32::from(ft.tors_per_pod);
                for j in 0..u32::from(ft.tor_uplinks) {
                    let up = if ft.tiers == 2 {
                        j
                    } else {
                        pod * u32::from(ft.tor_uplinks) + j
                    };
                    t.cable(
                        p,
                        Node::Switch(base + tor),
                        Node::Switch(base + tors + up),
                        ft.fabric_gbps,
                        ft.fabric_delay_ns,
                    );
                }
            }
            if ft.tiers == 3 {
                for agg in 0..t1 {
                    let a = agg % u32::from(ft.tor_uplinks);
                    for c in 0..u32::from(ft.agg_uplinks) {
                        let core = a * u32::from(ft.agg_uplinks) + c;
                        t.cable(
                            p,
                            Node::Switch(base + tors + agg),
                            Node::Switch(base + tors + t1 + core),
                            ft.fabric_gbps,
                            ft.fabric_delay_ns,
                        );
                    }
                }
            }
        }
        t
    }

    /// Adds both directions of a cable; returns (a→b, b→a).
    fn cable(&mut self, plane: u8, a: Node, b: Node, gbps: u64, delay: u64) -> (u32, u32) {
        let ab = self.links.len() as u32;
        let ps = 8000 / gbps.max(1);
        for (from, to) in [(a, b), (b, a)] {
            if let Node::Switch(s) = from {
                let sw = &mut self.switches[s as usize];
                sw.ports.push(self.links.len() as u32);
                sw.gbps += gbps;
            }
            self.links.push(LinkSpec {
                from,
                to,
                plane,
                ps_per_byte: ps,
                delay,
            });
        }
        (ab, ab + 1)
    }

    pub fn host_up(&self, plane: u8, h: u32) -> usize {
        self.host_up[usize::from(plane) * self.ft.hosts() as usize + h as usize] as usize
    }
    pub fn host_down(&self, plane: u8, h: u32) -> usize {
        self.host_down[usize::from(plane) * self.ft.hosts() as usize + h as usize] as usize
    }
    /// Global index of local switch `local` of `plane`.
    pub fn switch(&self, plane: u8, local: u32) -> u32 {
        u32::from(plane) * self.ft.switches_per_plane() + local
    }
    /// ToR `tor`'s `j`-th uplink in `plane` (2 tiers: to spine `j`).
    pub fn up(&self, plane: u8, tor: u16, j: u16) -> usize {
        let sw = &self.switches[self.switch(plane, u32::from(tor)) as usize];
        sw.ports[usize::from(self.ft.hosts_per_tor) + usize::from(j)] as usize
    }
    /// 2 tiers: spine `s` → leaf `tor` in `plane`.
    pub fn down(&self, plane: u8, s: u16, tor: u16) -> usize {
        let sw = &self.switches[self.switch(plane, self.ft.tors() + u32::from(s)) as usize];
        sw.ports[usize::from(tor)] as usize
    }
    /// Every link of `plane`.
    #[cfg_attr(not(test), allow(dead_code))]
    pub fn plane_links(&self, plane: u8) -> Vec<usize> {
        (0..self.links.len())
            .filter(|&l| self.links[l].plane == plane)
            .collect()
    }
}

/// ECMP routing tables: for every switch and destination ToR, the output links on a
/// shortest path.
pub struct Routes {
    tors: usize,
    /// `[switch × tors + dst_tor]` → (start, len) in `hops`.
    groups: Vec<(u32, u32)>,
    hops: Vec<u32>,
}

impl Routes {
    /// Computes the tables of every plane from `alive` (the links routing believes up).
    pub fn new(t: &Topology, alive: &dyn Fn(usize) -> bool) -> Routes {
        let mut r = Routes {
            tors: t.ft.tors() as usize,
            groups: vec![(0, 0); t.switches.len() * t.ft.tors() as usize],
            hops: Vec::new(),
        };
        for p in 0..t.ft.planes {
            r.compute(t, p, alive);
        }
        r
    }

    /// Recomputes `plane` (reconvergence). The old groups' members stay in `hops` as
    /// garbage, so a few reconvergences cost a little memory, not a rebuild.
    pub fn compute(&mut self, t: &Topology, plane: u8, alive: &dyn Fn(usize) -> bool) {
        let spp = t.ft.switches_per_plane() as usize;
        let base = usize::from(plane) * spp;
        // Links into each switch of the plane, from switches.
        let mut inbound: Vec<Vec<u32>> = vec![Vec::new(); spp];
        for (i, l) in t.links.iter().enumerate() {
            if let (Node::Switch(a), Node::Switch(b)) = (l.from, l.to) {
                if l.plane == plane && alive(i) {
                    let _ = a;
                    inbound[b as usize - base].push(i as u32);
                }
            }
        }
        let mut dist = vec![u32::MAX; spp];
        let mut q = VecDeque::new();
        for d in 0..self.tors {
            dist.fill(u32::MAX);
            dist[d] = 0;
            q.push_back(d);
            while let Some(v) = q.pop_front() {
                for &l in &inbound[v] {
                    if let Node::Switch(u) = t.links[l as usize].from {
                        let u = u as usize - base;
                        if dist[u] == u32::MAX {
                            dist[u] = dist[v] + 1;
                            q.push_back(u);
                        }
                    }
                }
            }
            for u in 0..spp {
                let start = self.hops.len() as u32;
                if u != d && dist[u] != u32::MAX {
                    for &l in &t.switches[base + u].ports {
                        if let Node::Switch(v) = t.links[l as usize].to {
                            if alive(l as usize) && dist[v as usize - base] + 1 == dist[u] {
                                self.hops.push(l);
                            }
                        }
                    }
                }
                let len = self.hops.len() as u32 - start;
                self.groups[(base + u) * self.tors + d] = (start, len);
            }
        }
    }

    /// The ECMP group of `switch` towards `dst_tor`.
    pub fn group(&self, switch: u32, dst_tor: u32) -> &[u32] {
        let (s, n) = self.groups[switch as usize * self.tors + dst_tor as usize];
        &self.hops[s as usize..(s + n) as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_tier_counts_and_capacity() {
        for (os, spines) in [(1u16, 32u32), (2, 16), (4, 8)] {
            let ft = FatTree::two_tier(32, 32, os);
            let t = Topology::build(ft, 1);
            assert_eq!(ft.hosts(), 1024);
            assert_eq!(ft.tier1(), spines);
            assert_eq!(t.switches.len() as u32, 32 + spines);
            assert_eq!(t.links.len() as u64, 2 * ft.cables());
            assert_eq!(t.links.len() as u32, 2 * (1024 + 32 * spines));
            assert_eq!(ft.tor_down_gbps(), u64::from(os) * ft.tor_up_gbps());
            // Every spine has one port per leaf, every leaf 32 + spines ports.
            assert!(t.switches[32..].iter().all(|s| s.ports.len() == 32));
            assert!(t.switches[..32]
                .iter()
                .all(|s| s.ports.len() as u32 == 32 + spines));
        }
    }

    #[test]
    fn three_tier_counts_and_capacity() {
        for (tos, aos) in [(1u16, 1u16), (2, 1), (1, 2), (4, 4)] {
            let ft = FatTree::three_tier(16, 8, 8, tos, aos);
            let t = Topology::build(FatTree { planes: 2, ..ft }, 1);
            assert_eq!(ft.hosts(), 1024);
            let aggs = 8 / u32::from(tos);
            let up = 8 / u32::from(aos);
            assert_eq!(ft.tier1(), 16 * aggs);
            assert_eq!(ft.cores(), aggs * up);
            assert_eq!(ft.tor_down_gbps(), u64::from(tos) * ft.tor_up_gbps());
            let (d, u) = ft.agg_gbps();
            assert_eq!(d, u64::from(aos) * u);
            let cables = 1024 + 128 * aggs + 16 * aggs * up;
            assert_eq!(t.links.len() as u32, 2 * 2 * cables);
            // Every core has one link to each pod.
            let core0 = t.switch(1, ft.tors() + ft.tier1());
            assert_eq!(t.switches[core0 as usize].ports.len(), 16);
        }
    }

    #[test]
    fn routes_are_shortest_and_shrink_on_failure() {
        let ft = FatTree::three_tier(4, 2, 2, 1, 1);
        let t = Topology::build(ft, 1);
        let r = Routes::new(&t, &|_| true);
        // ToR 0 to ToR 1 (same pod): both aggs; ToR 0 to ToR 2 (other pod): both aggs.
        assert_eq!(r.group(0, 1).len(), 2);
        assert_eq!(r.group(0, 2).len(), 2);
        // An aggregation switch to another pod: both its cores; to its own pod: 1 ToR.
        let agg0 = t.switch(0, ft.tors());
        assert_eq!(r.group(agg0, 2).len(), 2);
        assert_eq!(r.group(agg0, 1).len(), 1);
        // Fail ToR 0's first uplink: it leaves ToR 0's groups.
        let dead = t.up(0, 0, 0);
        let r2 = Routes::new(&t, &|l| l != dead);
        assert_eq!(r2.group(0, 2), &[t.up(0, 0, 1) as u32]);
    }
}
