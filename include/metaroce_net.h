/* SPDX-License-Identifier: GPL-2.0 */
/*
 * metaroce: the C shim's net and timer helpers (rust/ffi/helpers.c), for the
 * safe wrappers in rust/ffi/net.rs and rust/ffi/timer.rs. Static inlines and
 * macros (struct initialisers, routing lookups, skb accessors, hrtimer_start, spin_lock_irqsave)
 * turned into functions; no logic beyond that.
 */
#ifndef METAROCE_NET_H
#define METAROCE_NET_H

#include <linux/types.h>
#include <linux/hrtimer.h>
#include <linux/spinlock_types.h>
#include <linux/llist.h>

struct sock;
struct socket;
struct sk_buff;
struct dst_entry;

/* encap_rcv hook of a UDP tunnel socket (struct udp_tunnel_sock_cfg). */
typedef int (*metaroce_encap_rcv_t)(struct sock *sk, struct sk_buff *skb);

/*
 * A kernel UDP socket in init_net bound to the wildcard address and `port`
 * (network order), IPv6-only if `ipv6`, set up as a UDP tunnel whose
 * sk_user_data is `user` and whose encap_rcv is `rcv`. 0 or a negative errno.
 */
int metaroce_udp_tunnel_open(bool ipv6, __be16 port, metaroce_encap_rcv_t rcv,
			     void *user, struct socket **sockp);
/* rcu_dereference_sk_user_data(); called under the receive path's RCU lock. */
void *metaroce_sk_user_data(struct sock *sk);

/*
 * Output routes for a UDP datagram from the socket's namespace: a held dst
 * (release with dst_release, or hand it to udp_tunnel{,6}_xmit_skb) or NULL,
 * with the errno in *err. Addresses in network order. A non-zero `oif` binds
 * the lookup to that netdev (as rxe does: a RoCE device sends through its own
 * netdev, and a destination with no route is taken as on-link there).
 */
struct dst_entry *metaroce_route4(struct socket *sock, __be32 saddr,
				  __be32 daddr, __be16 sport, __be16 dport,
				  u8 tos, int oif, int *err);
struct dst_entry *metaroce_route6(struct socket *sock, const u8 *saddr,
				  const u8 *daddr, __be16 sport, __be16 dport,
				  u8 tclass, int oif, int *err);
/*
 * metaroce_route4 through a one-entry cache `*slot` (a held dst or NULL),
 * which the caller keys by the other arguments and serializes: the cached
 * route if dst_check() still finds it valid, else a fresh lookup that
 * replaces it (the slot keeps a reference of its own). Returns a held dst or
 * NULL with the errno in *err, as metaroce_route4.
 */
struct dst_entry *metaroce_route4_cached(struct socket *sock,
					 struct dst_entry **slot,
					 __be32 saddr, __be32 daddr,
					 __be16 sport, __be16 dport, u8 tos,
					 int oif, int *err);
/*
 * An skb (GFP_ATOMIC) for a datagram of up to `len` bytes of UDP payload:
 * headroom for any link-layer, IP (v4 or v6) and UDP headers (MAX_HEADER,
 * an IPv6 header, UDP), and tailroom for `len` bytes of payload, none put
 * yet; NULL if none.
 */
struct sk_buff *metaroce_tx_skb_new(unsigned int len);
/* Appends `len` zeroed bytes (skb_put_zero); the caller checked the tailroom. */
void metaroce_skb_put_zero(struct sk_buff *skb, unsigned int len);
/*
 * Marks a datagram's UDP payload, not yet sent through udp_tunnel_xmit_skb /
 * udp_tunnel6_xmit_skb, as UDP GSO (SKB_GSO_UDP_L4) segments of `seg` bytes (the
 * last may be shorter), its checksum partial from the UDP header the xmit pushes.
 * The payload must be longer than `seg`.
 */
void metaroce_skb_set_gso(struct sk_buff *skb, unsigned int seg);
/*
 * Whether route `dst`'s netdev takes UDP GSO bursts (NETIF_F_GSO_UDP_L4: a
 * NIC with UDP segmentation offload, loopback; also a vlan, bridge, bond,
 * macvlan or veth, which pass the burst on and leave it to the netdev
 * below): otherwise software GSO would copy every segment once more. `dst`
 * is held; any context.
 */
bool metaroce_dst_gso_udp(const struct dst_entry *dst);
/*
 * udp_tunnel_xmit_skb with nocheck false, but for a datagram (not a GSO
 * burst) whose route's netdev cannot checksum IPv4 UDP (neither
 * NETIF_F_IP_CSUM nor NETIF_F_HW_CSUM): its checksum is computed here, over
 * the payload the caller has just written (hot in the cache), and the skb
 * goes as CHECKSUM_NONE, where udp_set_csum would leave it partial for
 * skb_checksum_help to read the payload again on the way out. IPv6 has no
 * such twin: udp_tunnel6_xmit_skb leaves it partial. Consumes `rt`'s
 * reference and the skb; bottom halves disabled. Returns what
 * metaroce_dst_gso_udp would say of the route, from the one read of its
 * netdev's features.
 */
bool metaroce_udp4_xmit(struct rtable *rt, struct sock *sk,
			struct sk_buff *skb, __be32 src, __be32 dst, u8 tos,
			u8 ttl, __be16 df, __be16 sport, __be16 dport);
/*
 * ifindex of the netdev in init_net that owns local address `addr` (4 bytes
 * if !v6, else 16, network order), or 0 if none (__ip_dev_find /
 * ipv6_dev_find under RCU).
 */
int metaroce_local_ifindex(bool v6, const u8 *addr);
/*
 * The MTU of the netdev in init_net with index `ifindex`, read now, or 0 if
 * there is none (dev_get_by_index_rcu under RCU).
 */
unsigned int metaroce_ifindex_mtu(int ifindex);
void metaroce_kfree_skb(struct sk_buff *skb);
void metaroce_consume_skb(struct sk_buff *skb);
int metaroce_skb_linearize(struct sk_buff *skb);
/*
 * A received skb (data at the UDP header) as at most two pieces, without
 * copying its payload: the first min(`head`, len) bytes pulled into the
 * linear part (pskb_may_pull), then the linear part in *head_len bytes at
 * *head_ptr and, if the rest lies in one page fragment the CPU can address
 * (no frag list, no unreadable or highmem page), *tail_len bytes at
 * *tail_ptr (0 and NULL for a linear skb). Returns false, with the pointers
 * unset, if it cannot: the caller linearizes. The pointers stay valid while
 * the caller owns the skb and changes nothing of it.
 */
bool metaroce_skb_pieces(struct sk_buff *skb, unsigned int head,
			 const u8 **head_ptr, unsigned int *head_len,
			 const u8 **tail_ptr, unsigned int *tail_len);
/* The ifindex of the netdev the skb came in on. */
int metaroce_skb_iif(const struct sk_buff *skb);
/* skb->data, skb->len, skb_network_header(). */
u8 *metaroce_skb_data(const struct sk_buff *skb);
unsigned int metaroce_skb_len(const struct sk_buff *skb);
const u8 *metaroce_skb_network_header(const struct sk_buff *skb);
/* irqs_disabled(): hard interrupts are off on this CPU. */
bool metaroce_irqs_disabled(void);
void metaroce_local_bh_disable(void);
void metaroce_local_bh_enable(void);

/*
 * hrtimer_init(timer, CLOCK_MONOTONIC, HRTIMER_MODE_ABS_SOFT) with `fn` as
 * its function: the timer of rust/ffi/timer.rs expires in softirq context.
 */
void metaroce_hrtimer_setup(struct hrtimer *timer,
			    enum hrtimer_restart (*fn)(struct hrtimer *));
/*
 * hrtimer_start_range_ns(timer, deadline_ns, slack_ns, HRTIMER_MODE_ABS_SOFT):
 * (re)queues the timer to expire between the CLOCK_MONOTONIC times
 * `deadline_ns` and `deadline_ns + slack_ns`.
 */
void metaroce_hrtimer_start(struct hrtimer *timer, u64 deadline_ns, u64 slack_ns);
/* hrtimer_is_queued(): the timer waits in a timer queue (not expired, not cancelled). */
bool metaroce_hrtimer_is_queued(struct hrtimer *timer);
/* spin_lock_init(), one lockdep class: the lock of a rust/ffi/timer.rs timer. */
void metaroce_timer_lock_init(spinlock_t *lock);
/* spin_lock_irqsave()/spin_unlock_irqrestore() (any context). */
unsigned long metaroce_spin_lock_irqsave(spinlock_t *lock);
void metaroce_spin_unlock_irqrestore(spinlock_t *lock, unsigned long flags);

/*
 * Work a received datagram leaves for the end of its receive batch
 * (rust/ffi/defer.rs). `run(d, false)` is called once per
 * metaroce_defer_add(), in softirq context, by a per-CPU NAPI context that
 * the CPU's net_rx_action() polls once the NIC's poll that delivered the
 * datagram has returned; `run(d, true)` once per metaroce_defer_put(), in
 * process context (a work item).
 */
struct metaroce_defer {
	/* Points to itself while not queued (init_llist_node()). */
	struct llist_node node;
	void (*run)(struct metaroce_defer *d, bool put);
};
/* Sets up every CPU's list and NAPI; before the first add. 0 or -ENOMEM. */
int metaroce_defer_init(void);
/* A node not queued, whose run is `run`. */
void metaroce_defer_node_init(struct metaroce_defer *d,
			      void (*run)(struct metaroce_defer *d, bool put));
/*
 * Claims a node not queued (atomically; false if it is queued): then only
 * the claimer may metaroce_defer_add() it. Any context.
 */
bool metaroce_defer_claim(struct metaroce_defer *d);
/*
 * Adds a claimed node to this CPU's list and schedules the CPU's NAPI. The
 * poll marks the node not queued again (with release ordering) before it
 * calls `run`. Any context but NMI.
 */
void metaroce_defer_add(struct metaroce_defer *d);
/*
 * Hands a claimed node to a work item that calls `run(d, true)` in process
 * context (where its owner's last reference may be dropped). Any context.
 */
void metaroce_defer_put(struct metaroce_defer *d);
/*
 * Waits until every queued node has run and tears the NAPIs down (module
 * unload, once nothing can add; process context).
 */
void metaroce_defer_drain(void);

/* In-kernel self-tests of the net and timer skin (KUnit); 0 = pass. */
int metaroce_rust_udp_selftest(void);
int metaroce_rust_udp_busy_selftest(void);
int metaroce_rust_timer_selftest(void);
int metaroce_rust_defer_selftest(void);

#endif /* METAROCE_NET_H */
