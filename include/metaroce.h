/* SPDX-License-Identifier: GPL-2.0 */
/*
 * metaroce: shared between the C shim (rust/ffi/helpers.c) and the Rust
 * crate, which sees these through bindgen (include/metaroce_bindings.h).
 */
#ifndef METAROCE_H
#define METAROCE_H

#include <linux/types.h>

/* The module's version: MODULE_VERSION() in C, logged by Rust at load. */
#define METAROCE_VERSION "0.1.0"

/*
 * Default UDP destination port of the MetaRoCE transport. Not 4791 (RoCEv2),
 * so the kernel's rxe can run on the same netdev. Documentation/transport.rst.
 */
#define METAROCE_DEFAULT_UDP_PORT 4792
/* Paths per RC connection unless the `paths` module parameter says otherwise. */
#define METAROCE_DEFAULT_PATHS 8
/*
 * Delayed acknowledgement unless the `ack_every` and `ack_delay_us` module
 * parameters say otherwise (Documentation/device.rst, "Acknowledgements").
 */
#define METAROCE_DEFAULT_ACK_EVERY 2
#define METAROCE_DEFAULT_ACK_DELAY_US 100
/*
 * The most path ACKs one datagram carries unless the `ack_bundle` module
 * parameter says otherwise (Documentation/transport.rst, "ACK bundles").
 */
#define METAROCE_DEFAULT_ACK_BUNDLE 16
/*
 * New DATA packets a path sends in a row (as one UDP GSO burst where the
 * netdev takes one), unless the `train` module parameter says otherwise
 * (Documentation/device.rst, "Trains"), and the most it takes.
 */
#define METAROCE_DEFAULT_TRAIN 4
#define METAROCE_MAX_TRAIN 16

/*
 * The uverbs ABI version devices report: rxe's (RXE_UVERBS_ABI_VERSION), so that
 * rdma-core's rxe provider binds to metaroce devices unmodified.
 */
#define METAROCE_UVERBS_ABI_VERSION 2

struct net_device;
struct ib_device;
struct ib_udata;
struct ib_ucontext;
struct ib_umem;
struct ib_cq;
struct page;
struct vm_area_struct;
struct rdma_user_mmap_entry;

/* Static inlines and macros the Rust skin needs, as functions (helpers.c). */
bool metaroce_netif_running(const struct net_device *dev);
bool metaroce_netif_carrier_ok(const struct net_device *dev);
void metaroce_dev_hold(struct net_device *dev);
void metaroce_dev_put(struct net_device *dev);
struct net_device *metaroce_netdev_notifier_info_to_dev(void *info);
bool metaroce_ib_device_try_get(struct ib_device *dev);
bool metaroce_netdev_is_registered(const struct net_device *dev);
struct ib_ucontext *metaroce_udata_ucontext(struct ib_udata *udata);
int metaroce_udata_write(struct ib_udata *udata, const void *src, size_t len);
int metaroce_udata_read(void *dst, struct ib_udata *udata, size_t len);
u64 metaroce_mmap_offset(struct rdma_user_mmap_entry *entry);
void *metaroce_vmalloc_user(unsigned long size);
void metaroce_vfree(void *addr);
int metaroce_remap_vmalloc(struct vm_area_struct *vma, void *addr);
unsigned long metaroce_umem_pages(struct ib_umem *umem, struct page **pages,
				  unsigned long max);
void metaroce_page_write(struct page *page, unsigned int off, const void *src,
			 unsigned int len);
void metaroce_page_read(struct page *page, unsigned int off, void *dst,
			unsigned int len);
void metaroce_cq_event(struct ib_cq *cq);

unsigned int metaroce_num_possible_cpus(void);
int metaroce_netdev_state(int ifindex);
bool metaroce_netdev_in_init_net(const struct net_device *dev);

/* A u32-keyed map read under RCU (rust/ffi/rcu_map.rs, helpers.c). */
struct metaroce_map;
struct metaroce_map *metaroce_map_new(void (*release)(const void *ptr));
void metaroce_map_free(struct metaroce_map *m);
const void *metaroce_map_lookup(struct metaroce_map *m, u32 key);
int metaroce_map_insert(struct metaroce_map *m, u32 key, const void *ptr);
bool metaroce_map_remove(struct metaroce_map *m, u32 key);
const void *metaroce_map_take(struct metaroce_map *m, u32 key);
void metaroce_map_drain(void);
void metaroce_rcu_read_lock(void);
void metaroce_rcu_read_unlock(void);

/* Module parameters, owned by the C shim (module_param is a C macro). */
u16 metaroce_param_udp_port(void);
u32 metaroce_param_paths(void);
bool metaroce_param_shared(void);
u32 metaroce_param_rx_mbps(void);
u32 metaroce_param_ack_every(void);
u32 metaroce_param_ack_bundle(void);
u32 metaroce_param_ack_delay_us(void);
bool metaroce_param_ack_ride(void);
u32 metaroce_param_train(void);
bool metaroce_param_link_payload(void);
bool metaroce_param_rx_gro(void);
u64 metaroce_tick_ns(void);
struct sk_buff;
struct nlattr;
struct nlattr *metaroce_nla_nest_start_driver(struct sk_buff *msg);
void metaroce_nla_nest_end(struct sk_buff *msg, struct nlattr *start);
void metaroce_nla_nest_cancel(struct sk_buff *msg, struct nlattr *start);
u32 metaroce_netdev_speed_mbps(struct net_device *dev);

/*
 * Trace events (include/metaroce_trace.h, TRACE_SYSTEM metaroce), called from
 * Rust through these wrappers (rust/ffi/trace.rs). Without CONFIG_TRACEPOINTS
 * the *_enabled() checks return false and the others do nothing.
 */
/* One datagram's trace fields: metaroce:tx and metaroce:rx. */
struct metaroce_trace_pkt {
	u32 qpn;	/* the local QP */
	u32 psn;	/* DATA/PROBE: PSN; ACK: cumulative PSN */
	u32 ssn;	/* DATA: stream sequence number */
	u32 len;	/* UDP payload bytes */
	u16 sport;	/* UDP source port (tx: ours; rx: the peer's) */
	u16 stream;	/* DATA: stream */
	u8 path;	/* path index */
	u8 type;	/* 1 DATA, 2 ACK, 3 PROBE, 4 DATAGRAM */
	u8 flags;	/* DATA: DF_*, ACK: AF_*, DATAGRAM: GF_* */
	u8 retx;	/* tx: a retransmission */
};
bool metaroce_trace_tx_enabled(void);
void metaroce_trace_tx(const struct metaroce_trace_pkt *p);
bool metaroce_trace_rx_enabled(void);
void metaroce_trace_rx(const struct metaroce_trace_pkt *p, const char *drop);
void metaroce_trace_loss(u32 qpn, u8 path, u32 psn, u8 cause);
void metaroce_trace_retransmit(u32 qpn, u8 path, u32 psn, u8 from_path,
			       u16 stream, u32 ssn);
void metaroce_trace_path_state(u32 qpn, u8 path, u8 old_state, u8 new_state,
			       u16 old_sport, u16 new_sport);
void metaroce_trace_rto(u32 qpn, u8 path, u64 rto_ns, u8 backoff, u8 timeouts);
void metaroce_trace_rate_hint(u32 qpn, u8 side, u32 old_hint, u32 new_hint);

/* Which C type metaroce_rust_sizeof()/metaroce_c_sizeof() measure. */
enum metaroce_layout_probe {
	METAROCE_PROBE_IB_DEVICE,
	METAROCE_PROBE_IB_DEVICE_OPS,
	METAROCE_PROBE_IB_QP,
	METAROCE_PROBE_IB_CQ,
	METAROCE_PROBE_IB_UD_WR,
	METAROCE_PROBE_SK_BUFF,
	METAROCE_PROBE_NET_DEVICE,
	METAROCE_PROBE_UDP_TUNNEL_SOCK_CFG,
	METAROCE_PROBE_IB_PD,
	METAROCE_PROBE_IB_UCONTEXT,
	METAROCE_PROBE_IB_DEVICE_ATTR,
	METAROCE_PROBE_IB_PORT_ATTR,
	METAROCE_PROBE_IB_PORT_IMMUTABLE,
	METAROCE_PROBE_IB_EVENT,
	METAROCE_PROBE_RDMA_LINK_OPS,
	METAROCE_PROBE_NOTIFIER_BLOCK,
	METAROCE_PROBE_HRTIMER,
	METAROCE_PROBE_SPINLOCK,
	/* Not a size: the offset of metaroce_dev_head.ext (Rust: DeviceBox.ext). */
	METAROCE_PROBE_DEV_HEAD_EXT,
	METAROCE_PROBE_COUNT,
};

/* sizeof() as the C compiler sees it (C shim) and as bindgen's Rust sees it. */
size_t metaroce_c_sizeof(enum metaroce_layout_probe probe);
size_t metaroce_rust_sizeof(enum metaroce_layout_probe probe);

/* In-kernel self-test of Rust code, run by the KUnit suite; 0 = pass. */
int metaroce_rust_check_param(u32 port);
int metaroce_rust_check_paths(u32 paths);
int metaroce_rust_proto_selftest(void);
int metaroce_rust_rdma_selftest(void);
int metaroce_rust_rcu_map_selftest(void);

#endif /* METAROCE_H */
