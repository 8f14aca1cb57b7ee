// SPDX-License-Identifier: GPL-2.0
/*
 * metaroce C shim: what Rust cannot reach through bindgen — module parameters
 * (module_param() is a macro), static inline helpers, and the KUnit suite
 * declaration (6.12 has no Rust macro for declaring a suite). Keep it small:
 * logic lives in Rust.
 */
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/netdevice.h>
#include <linux/ethtool.h>
#include <linux/rtnetlink.h>
#include <linux/skbuff.h>
#include <net/udp_tunnel.h>
#include <rdma/ib_verbs.h>
#include <rdma/rdma_netlink.h>
#include <linux/notifier.h>
#include <linux/vmalloc.h>
#include <linux/highmem.h>
#include <linux/scatterlist.h>
#include <rdma/ib_umem.h>
#include <rdma/uverbs_ioctl.h>
#define UVERBS_MODULE_NAME metaroce_ib
#include <rdma/uverbs_named_ioctl.h>
#include <rdma/uverbs_std_types.h>
#include <linux/hrtimer.h>
#include <linux/jiffies.h>
#include <net/ip.h>
#include <net/ipv6.h>
#include <net/route.h>
#include <net/ipv6_stubs.h>
#include <net/sock.h>
#include <linux/inetdevice.h>
#include <net/addrconf.h>
#include <linux/rhashtable.h>
#include <linux/llist.h>
#include <linux/workqueue.h>

#include "metaroce.h"
#include "metaroce_net.h"
#include "metaroce_ext.h"

/* The module's trace events are instantiated here, and only here. */
#define CREATE_TRACE_POINTS
#include "metaroce_trace.h"

MODULE_VERSION(METAROCE_VERSION);

static ushort udp_port = METAROCE_DEFAULT_UDP_PORT;
module_param(udp_port, ushort, 0444);
MODULE_PARM_DESC(udp_port,
		 "UDP destination port of the MetaRoCE transport (default "
		 __stringify(METAROCE_DEFAULT_UDP_PORT) "; 4791 is RoCEv2's)");

u16 metaroce_param_udp_port(void)
{
	return udp_port;
}

/*
 * Paths per RC connection. Checked at load (rust/metaroce.rs): outside
 * 1..=64 the module refuses to load with EINVAL, as for udp_port.
 */
static uint paths = METAROCE_DEFAULT_PATHS;
module_param(paths, uint, 0444);
MODULE_PARM_DESC(paths,
		 "Paths (UDP source ports) per RC connection, 1-64 (default "
		 __stringify(METAROCE_DEFAULT_PATHS) ")");

u32 metaroce_param_paths(void)
{
	return paths;
}

/*
 * Whether the RC QPs of a device to one peer share a connection (1) or
 * each own one (0). Writable: read when a device is added (rdma link add),
 * so devices added after a change follow it. Both ends must agree
 * (Documentation/device.rst, "Shared connections").
 */
static bool shared = true;
module_param(shared, bool, 0644);
MODULE_PARM_DESC(shared,
		 "RC QPs to the same peer share one connection (default 1; "
		 "0: one connection per QP; both ends must agree; read when "
		 "a device is added, so it is per device)");

bool metaroce_param_shared(void)
{
	return READ_ONCE(shared);
}

/*
 * Delayed acknowledgement (Documentation/device.rst, "Acknowledgements"):
 * read at each connection's set-up (RTR), so connections set up after a
 * change follow it.
 */
static uint ack_every = METAROCE_DEFAULT_ACK_EVERY;
module_param(ack_every, uint, 0644);
MODULE_PARM_DESC(ack_every,
		 "Acknowledge after this many DATA packets of a path (1-64, "
		 "default " __stringify(METAROCE_DEFAULT_ACK_EVERY) "; 1: every "
		 "packet at once); sooner when the sender asks or on loss, "
		 "reordering, ECN or a message's last packet");

u32 metaroce_param_ack_every(void)
{
	return READ_ONCE(ack_every);
}

static bool link_payload = true;
module_param(link_payload, bool, 0644);
MODULE_PARM_DESC(link_payload,
		 "RC and UC QPs whose path_mtu is the port's active MTU cut "
		 "messages at the link's full payload (netdev MTU less 128 bytes, "
		 "at most 4096; default on), not at path_mtu; read at modify_qp "
		 "to RTR");

bool metaroce_param_link_payload(void)
{
	return READ_ONCE(link_payload);
}

static uint ack_bundle = METAROCE_DEFAULT_ACK_BUNDLE;
module_param(ack_bundle, uint, 0644);
MODULE_PARM_DESC(ack_bundle,
		 "Most path ACKs one datagram carries (1-16, default "
		 __stringify(METAROCE_DEFAULT_ACK_BUNDLE) "; 1: each path's ACK "
		 "alone, as before version 5 of the wire)");

u32 metaroce_param_ack_bundle(void)
{
	return READ_ONCE(ack_bundle);
}

static uint ack_delay_us = METAROCE_DEFAULT_ACK_DELAY_US;
module_param(ack_delay_us, uint, 0644);
MODULE_PARM_DESC(ack_delay_us,
		 "Longest an acknowledgement waits, us (0-500, default "
		 __stringify(METAROCE_DEFAULT_ACK_DELAY_US) ")");

u32 metaroce_param_ack_delay_us(void)
{
	return READ_ONCE(ack_delay_us);
}

/*
 * UDP GRO on the tunnel sockets (Documentation/device.rst, "Receive"): the
 * stack's GRO merges a path's back-to-back datagrams (same addresses and
 * ports, same length but for a shorter last one, same TOS and so ECN field)
 * into one skb, which takes the IP layer, the route and the socket lookup
 * once; the UDP layer splits it again before encap_rcv (udp_unexpected_gso: an encapsulating socket never
 * sees a GSO skb), so metaroce still gets one datagram per packet. Off by
 * default: a packet capture on the receiver (AF_PACKET taps sit after GRO)
 * then shows the merged skbs, not the datagrams on the wire.
 */
static bool rx_gro;
module_param(rx_gro, bool, 0444);
MODULE_PARM_DESC(rx_gro,
		 "UDP GRO on the tunnel sockets: a path's back-to-back datagrams "
		 "cross the IP layer as one skb (default off: captures on the "
		 "receiver would show the merged skbs); read at load");

bool metaroce_param_rx_gro(void)
{
	return READ_ONCE(rx_gro);
}

static bool ack_ride = true;
module_param(ack_ride, bool, 0644);
MODULE_PARM_DESC(ack_ride,
		 "ACKs and a short DATA packet share a datagram (default on; "
		 "off: each alone, as before version 6 of the wire); read when "
		 "a connection is set up");

bool metaroce_param_ack_ride(void)
{
	return READ_ONCE(ack_ride);
}

static uint train = METAROCE_DEFAULT_TRAIN;
module_param(train, uint, 0644);
MODULE_PARM_DESC(train,
		 "Most new DATA packets a path of a connection sends in a row, "
		 "handed to the network stack as one UDP GSO burst where the "
		 "netdev takes one "
		 "(default " __stringify(METAROCE_DEFAULT_TRAIN) "; taken as 1-"
		 __stringify(METAROCE_MAX_TRAIN) ", 0 as 1; 1: packet by packet "
		 "over the paths); read when a connection is set up");

u32 metaroce_param_train(void)
{
	return READ_ONCE(train);
}

static uint rx_mbps;
module_param(rx_mbps, uint, 0444);
MODULE_PARM_DESC(rx_mbps,
		 "Inbound capacity a device shares among its senders, Mb/s "
		 "(0 = the netdev's link speed; 98% of it is handed out)");

u32 metaroce_param_rx_mbps(void)
{
	return rx_mbps;
}

/*
 * The RDMA_NLDEV_ATTR_DRIVER nest a driver's resource attributes go in
 * (iproute2 prints that table with -dd); NULL when the message is full.
 */
struct nlattr *metaroce_nla_nest_start_driver(struct sk_buff *msg)
{
	return nla_nest_start_noflag(msg, RDMA_NLDEV_ATTR_DRIVER);
}

void metaroce_nla_nest_end(struct sk_buff *msg, struct nlattr *start)
{
	nla_nest_end(msg, start);
}

void metaroce_nla_nest_cancel(struct sk_buff *msg, struct nlattr *start)
{
	nla_nest_cancel(msg, start);
}

/* One timer tick (jiffy), in ns. */
u64 metaroce_tick_ns(void)
{
	return TICK_NSEC;
}

/*
 * The netdev's link speed in Mb/s (ethtool link ksettings), 0 if unknown.
 * Process context; takes RTNL, so the caller must not hold it.
 */
u32 metaroce_netdev_speed_mbps(struct net_device *dev)
{
	struct ethtool_link_ksettings ks = {};
	u32 speed = 0;

	rtnl_lock();
	if (!__ethtool_get_link_ksettings(dev, &ks) &&
	    ks.base.speed != (u32)SPEED_UNKNOWN)
		speed = ks.base.speed;
	rtnl_unlock();
	return speed;
}

/*
 * Trace events, for Rust (static inlines and macros: include/metaroce_trace.h).
 * The *_enabled() checks read the tracepoints' static keys, so a disabled
 * tx/rx event costs its caller one call, before any field is gathered.
 */
bool metaroce_trace_tx_enabled(void)
{
	return trace_tx_enabled();
}

void metaroce_trace_tx(const struct metaroce_trace_pkt *p)
{
	trace_tx(p);
}

bool metaroce_trace_rx_enabled(void)
{
	return trace_rx_enabled();
}

void metaroce_trace_rx(const struct metaroce_trace_pkt *p, const char *drop)
{
	trace_rx(p, drop);
}

void metaroce_trace_loss(u32 qpn, u8 path, u32 psn, u8 cause)
{
	trace_loss(qpn, path, psn, cause);
}

void metaroce_trace_retransmit(u32 qpn, u8 path, u32 psn, u8 from_path,
			       u16 stream, u32 ssn)
{
	trace_retransmit(qpn, path, psn, from_path, stream, ssn);
}

void metaroce_trace_path_state(u32 qpn, u8 path, u8 old_state, u8 new_state,
			       u16 old_sport, u16 new_sport)
{
	trace_path_state(qpn, path, old_state, new_state, old_sport, new_sport);
}

void metaroce_trace_rto(u32 qpn, u8 path, u64 rto_ns, u8 backoff, u8 timeouts)
{
	trace_rto(qpn, path, rto_ns, backoff, timeouts);
}

void metaroce_trace_rate_hint(u32 qpn, u8 side, u32 old_hint, u32 new_hint)
{
	trace_rate_hint(qpn, side, old_hint, new_hint);
}

bool metaroce_netif_running(const struct net_device *dev)
{
	return netif_running(dev);
}

bool metaroce_netif_carrier_ok(const struct net_device *dev)
{
	return netif_carrier_ok(dev);
}

void metaroce_dev_hold(struct net_device *dev)
{
	dev_hold(dev);
}

void metaroce_dev_put(struct net_device *dev)
{
	dev_put(dev);
}

struct net_device *metaroce_netdev_notifier_info_to_dev(void *info)
{
	return netdev_notifier_info_to_dev(info);
}

bool metaroce_netdev_is_registered(const struct net_device *dev)
{
	return READ_ONCE(dev->reg_state) == NETREG_REGISTERED;
}

/* --- verbs objects: user memory, shared queues, udata (rust/ffi/verbs.rs) --- */

struct ib_ucontext *metaroce_udata_ucontext(struct ib_udata *udata)
{
	if (!udata)
		return NULL;
	return container_of(udata, struct uverbs_attr_bundle, driver_udata)->context;
}

int metaroce_udata_write(struct ib_udata *udata, const void *src, size_t len)
{
	return ib_copy_to_udata(udata, (void *)src, len);
}

int metaroce_udata_read(void *dst, struct ib_udata *udata, size_t len)
{
	return ib_copy_from_udata(dst, udata, len);
}

u64 metaroce_mmap_offset(struct rdma_user_mmap_entry *entry)
{
	return rdma_user_mmap_get_offset(entry);
}

void *metaroce_vmalloc_user(unsigned long size)
{
	return vmalloc_user(size);
}

void metaroce_vfree(void *addr)
{
	vfree(addr);
}

int metaroce_remap_vmalloc(struct vm_area_struct *vma, void *addr)
{
	return remap_vmalloc_range(vma, addr, 0);
}

/* Fills pages[] with the pinned pages of umem, in order; returns how many. */
unsigned long metaroce_umem_pages(struct ib_umem *umem, struct page **pages,
				  unsigned long max)
{
	struct sg_page_iter it;
	unsigned long n = 0;

	for_each_sgtable_page(&umem->sgt_append.sgt, &it, 0) {
		if (n == max)
			break;
		pages[n++] = sg_page_iter_page(&it);
	}
	return n;
}

void metaroce_page_write(struct page *page, unsigned int off, const void *src,
			 unsigned int len)
{
	void *va = kmap_local_page(page);

	memcpy(va + off, src, len);
	kunmap_local(va);
	flush_dcache_page(page);
}

void metaroce_page_read(struct page *page, unsigned int off, void *dst,
			unsigned int len)
{
	void *va = kmap_local_page(page);

	memcpy(dst, va + off, len);
	kunmap_local(va);
}

void metaroce_cq_event(struct ib_cq *cq)
{
	if (cq->comp_handler)
		cq->comp_handler(cq, cq->cq_context);
}

bool metaroce_ib_device_try_get(struct ib_device *dev)
{
	return ib_device_try_get(dev);
}

unsigned int metaroce_num_possible_cpus(void)
{
	return num_possible_cpus();
}

size_t metaroce_c_sizeof(enum metaroce_layout_probe probe)
{
	switch (probe) {
	case METAROCE_PROBE_IB_DEVICE:		return sizeof(struct ib_device);
	case METAROCE_PROBE_IB_DEVICE_OPS:	return sizeof(struct ib_device_ops);
	case METAROCE_PROBE_IB_QP:		return sizeof(struct ib_qp);
	case METAROCE_PROBE_IB_CQ:		return sizeof(struct ib_cq);
	case METAROCE_PROBE_IB_UD_WR:		return sizeof(struct ib_ud_wr);
	case METAROCE_PROBE_SK_BUFF:		return sizeof(struct sk_buff);
	case METAROCE_PROBE_NET_DEVICE:		return sizeof(struct net_device);
	case METAROCE_PROBE_UDP_TUNNEL_SOCK_CFG:
		return sizeof(struct udp_tunnel_sock_cfg);
	case METAROCE_PROBE_IB_PD:
		return sizeof(struct ib_pd);
	case METAROCE_PROBE_IB_UCONTEXT:
		return sizeof(struct ib_ucontext);
	case METAROCE_PROBE_IB_DEVICE_ATTR:
		return sizeof(struct ib_device_attr);
	case METAROCE_PROBE_IB_PORT_ATTR:
		return sizeof(struct ib_port_attr);
	case METAROCE_PROBE_IB_PORT_IMMUTABLE:
		return sizeof(struct ib_port_immutable);
	case METAROCE_PROBE_IB_EVENT:
		return sizeof(struct ib_event);
	case METAROCE_PROBE_RDMA_LINK_OPS:
		return sizeof(struct rdma_link_ops);
	case METAROCE_PROBE_NOTIFIER_BLOCK:
		return sizeof(struct notifier_block);
	case METAROCE_PROBE_HRTIMER:
		return sizeof(struct hrtimer);
	case METAROCE_PROBE_SPINLOCK:
		return sizeof(spinlock_t);
	case METAROCE_PROBE_DEV_HEAD_EXT:
		return offsetof(struct metaroce_dev_head, ext);
	default:				return 0;
	}
}

/* --- The extension API's uverbs methods: rust/ffi/rdma/ext.rs --- */

/* The extension ops of QP qp's device, if it is a metaroce device. */
static const struct metaroce_ext_ops *metaroce_qp_ext(struct ib_qp *qp)
{
	if (qp->device->ops.owner != THIS_MODULE)
		return NULL;
	return container_of(qp->device, struct metaroce_dev_head, ib)->ext;
}

int metaroce_qp_query_paths(struct ib_qp *qp, struct metaroce_conn_info *info,
			    struct metaroce_path_info *paths, u32 max_paths)
{
	const struct metaroce_ext_ops *ext = metaroce_qp_ext(qp);

	if (!ext || !ext->qp_query_paths)
		return -EOPNOTSUPP;
	memset(info, 0, sizeof(*info));
	return ext->qp_query_paths(qp, info, paths, max_paths);
}
EXPORT_SYMBOL_GPL(metaroce_qp_query_paths);

int metaroce_qp_set_paths(struct ib_qp *qp, u32 paths)
{
	const struct metaroce_ext_ops *ext = metaroce_qp_ext(qp);

	if (!ext || !ext->qp_set_paths)
		return -EOPNOTSUPP;
	return ext->qp_set_paths(qp, paths);
}
EXPORT_SYMBOL_GPL(metaroce_qp_set_paths);

int metaroce_qp_set_stream_class(struct ib_qp *qp, u32 cls)
{
	const struct metaroce_ext_ops *ext = metaroce_qp_ext(qp);

	if (!ext || !ext->qp_set_stream_class)
		return -EOPNOTSUPP;
	return ext->qp_set_stream_class(qp, cls);
}
EXPORT_SYMBOL_GPL(metaroce_qp_set_stream_class);

/* The extension ops of device dev, if it is a metaroce device. */
static const struct metaroce_ext_ops *metaroce_dev_ext(struct ib_device *dev)
{
	if (dev->ops.owner != THIS_MODULE)
		return NULL;
	return container_of(dev, struct metaroce_dev_head, ib)->ext;
}

int metaroce_device_query_planes(struct ib_device *dev,
				 struct metaroce_plane_info *planes, u32 max)
{
	const struct metaroce_ext_ops *ext = metaroce_dev_ext(dev);

	if (!ext || !ext->dev_query_planes)
		return -EOPNOTSUPP;
	memset(planes, 0, max * sizeof(*planes));
	return ext->dev_query_planes(dev, planes, max);
}
EXPORT_SYMBOL_GPL(metaroce_device_query_planes);

int metaroce_device_set_planes(struct ib_device *dev, const u32 *ifindex,
			       u32 n)
{
	const struct metaroce_ext_ops *ext = metaroce_dev_ext(dev);

	if (!ext || !ext->dev_set_planes)
		return -EOPNOTSUPP;
	return ext->dev_set_planes(dev, ifindex, n);
}
EXPORT_SYMBOL_GPL(metaroce_device_set_planes);

/* Whether netdev dev is in the initial network namespace (where planes are
 * looked up: an ifindex names a netdev only within its namespace). */
bool metaroce_netdev_in_init_net(const struct net_device *dev)
{
	return net_eq(dev_net(dev), &init_net);
}

/*
 * The state of netdev ifindex in init_net: -ENODEV if there is none, else
 * bit 0 up (running, with carrier), bit 1 loopback.
 */
int metaroce_netdev_state(int ifindex)
{
	struct net_device *dev;
	int st;

	rcu_read_lock();
	dev = dev_get_by_index_rcu(&init_net, ifindex);
	if (!dev) {
		rcu_read_unlock();
		return -ENODEV;
	}
	st = (netif_running(dev) && netif_carrier_ok(dev)) ? 1 : 0;
	if (dev->flags & IFF_LOOPBACK)
		st |= 2;
	rcu_read_unlock();
	return st;
}

/* The reply: the fixed part and as many path records as user space has
 * room for (at most METAROCE_MAX_PATHS). */
static int UVERBS_HANDLER(METAROCE_IB_METHOD_QP_QUERY_PATHS)(
	struct uverbs_attr_bundle *attrs)
{
	struct ib_qp *qp = uverbs_attr_get_obj(attrs,
		METAROCE_IB_ATTR_QUERY_PATHS_QP_HANDLE);
	int len = uverbs_attr_get_len(attrs, METAROCE_IB_ATTR_QUERY_PATHS_RESP);
	struct metaroce_conn_info *info;
	u32 room;
	int n;

	if (IS_ERR(qp))
		return PTR_ERR(qp);
	if (len < 0)
		return len;
	room = min_t(u32, (len - sizeof(*info)) / sizeof(struct metaroce_path_info),
		     METAROCE_MAX_PATHS);
	info = kzalloc(sizeof(*info) + room * sizeof(struct metaroce_path_info),
		       GFP_KERNEL);
	if (!info)
		return -ENOMEM;
	n = metaroce_qp_query_paths(qp, info,
				    (struct metaroce_path_info *)(info + 1), room);
	if (n >= 0) {
		info->num_path_info = min_t(u32, n, room);
		n = uverbs_copy_to(attrs, METAROCE_IB_ATTR_QUERY_PATHS_RESP, info,
				   sizeof(*info) + info->num_path_info *
				   sizeof(struct metaroce_path_info));
	}
	kfree(info);
	return n;
}

static int UVERBS_HANDLER(METAROCE_IB_METHOD_QP_SET_PATHS)(
	struct uverbs_attr_bundle *attrs)
{
	struct ib_qp *qp = uverbs_attr_get_obj(attrs,
		METAROCE_IB_ATTR_SET_PATHS_QP_HANDLE);
	u32 paths;
	int ret;

	if (IS_ERR(qp))
		return PTR_ERR(qp);
	ret = uverbs_copy_from(&paths, attrs, METAROCE_IB_ATTR_SET_PATHS_COUNT);
	if (ret)
		return ret;
	ret = metaroce_qp_set_paths(qp, paths);
	return ret < 0 ? ret : 0;
}

static int UVERBS_HANDLER(METAROCE_IB_METHOD_QP_SET_STREAM_CLASS)(
	struct uverbs_attr_bundle *attrs)
{
	struct ib_qp *qp = uverbs_attr_get_obj(attrs,
		METAROCE_IB_ATTR_SET_STREAM_CLASS_QP_HANDLE);
	u32 cls;
	int ret;

	if (IS_ERR(qp))
		return PTR_ERR(qp);
	/*
	 * A class regroups the QP's connection, and both ends must agree: a
	 * mismatch breaks the path sequences of every QP on the connections
	 * involved, other users' too. So, from user space, an administrator's
	 * choice (as a traffic class or a route is).
	 */
	if (!capable(CAP_NET_ADMIN))
		return -EPERM;
	ret = uverbs_copy_from(&cls, attrs, METAROCE_IB_ATTR_SET_STREAM_CLASS_CLASS);
	if (ret)
		return ret;
	return metaroce_qp_set_stream_class(qp, cls);
}

static int UVERBS_HANDLER(METAROCE_IB_METHOD_DEVICE_QUERY_PLANES)(
	struct uverbs_attr_bundle *attrs)
{
	struct metaroce_plane_info planes[METAROCE_MAX_PLANES];
	struct ib_ucontext *uctx = ib_uverbs_get_ucontext(attrs);
	int len = uverbs_attr_get_len(attrs, METAROCE_IB_ATTR_QUERY_PLANES_RESP);
	u32 room, num;
	int n;

	if (IS_ERR(uctx))
		return PTR_ERR(uctx);
	if (len < 0)
		return len;
	room = min_t(u32, len / sizeof(planes[0]), METAROCE_MAX_PLANES);
	n = metaroce_device_query_planes(uctx->device, planes, METAROCE_MAX_PLANES);
	if (n < 0)
		return n;
	num = n;
	n = uverbs_copy_to(attrs, METAROCE_IB_ATTR_QUERY_PLANES_NUM, &num,
			   sizeof(num));
	if (n)
		return n;
	return uverbs_copy_to(attrs, METAROCE_IB_ATTR_QUERY_PLANES_RESP, planes,
			      min_t(u32, num, room) * sizeof(planes[0]));
}

static int UVERBS_HANDLER(METAROCE_IB_METHOD_DEVICE_SET_PLANES)(
	struct uverbs_attr_bundle *attrs)
{
	u32 ifindex[METAROCE_MAX_PLANES];
	struct ib_ucontext *uctx = ib_uverbs_get_ucontext(attrs);
	int len = uverbs_attr_get_len(attrs, METAROCE_IB_ATTR_SET_PLANES_IFINDEX);
	int ret;

	if (IS_ERR(uctx))
		return PTR_ERR(uctx);
	/* Which networks the device's traffic takes: an administrator's
	 * choice, as binding it to its netdev (rdma link add) is. */
	if (!capable(CAP_NET_ADMIN))
		return -EPERM;
	if (len < 0)
		return len;
	if (len == 0 || len % sizeof(u32) || len > sizeof(ifindex))
		return -EINVAL;
	/* len bytes of them (uverbs_copy_from() would take one u32). */
	ret = _uverbs_copy_from(ifindex, attrs, METAROCE_IB_ATTR_SET_PLANES_IFINDEX,
				sizeof(ifindex));
	if (ret)
		return ret;
	return metaroce_device_set_planes(uctx->device, ifindex, len / sizeof(u32));
}

DECLARE_UVERBS_NAMED_METHOD(
	METAROCE_IB_METHOD_DEVICE_QUERY_PLANES,
	UVERBS_ATTR_PTR_OUT(METAROCE_IB_ATTR_QUERY_PLANES_RESP,
			    UVERBS_ATTR_MIN_SIZE(0), UA_MANDATORY),
	UVERBS_ATTR_PTR_OUT(METAROCE_IB_ATTR_QUERY_PLANES_NUM,
			    UVERBS_ATTR_TYPE(u32), UA_MANDATORY));

DECLARE_UVERBS_NAMED_METHOD(
	METAROCE_IB_METHOD_DEVICE_SET_PLANES,
	UVERBS_ATTR_PTR_IN(METAROCE_IB_ATTR_SET_PLANES_IFINDEX,
			   UVERBS_ATTR_MIN_SIZE(sizeof(u32)), UA_MANDATORY));

ADD_UVERBS_METHODS(metaroce_device_methods, UVERBS_OBJECT_DEVICE,
		   &UVERBS_METHOD(METAROCE_IB_METHOD_DEVICE_QUERY_PLANES),
		   &UVERBS_METHOD(METAROCE_IB_METHOD_DEVICE_SET_PLANES));

DECLARE_UVERBS_NAMED_METHOD(
	METAROCE_IB_METHOD_QP_QUERY_PATHS,
	UVERBS_ATTR_IDR(METAROCE_IB_ATTR_QUERY_PATHS_QP_HANDLE, UVERBS_OBJECT_QP,
			UVERBS_ACCESS_READ, UA_MANDATORY),
	UVERBS_ATTR_PTR_OUT(METAROCE_IB_ATTR_QUERY_PATHS_RESP,
			    UVERBS_ATTR_MIN_SIZE(sizeof(struct metaroce_conn_info)),
			    UA_MANDATORY));

DECLARE_UVERBS_NAMED_METHOD(
	METAROCE_IB_METHOD_QP_SET_PATHS,
	UVERBS_ATTR_IDR(METAROCE_IB_ATTR_SET_PATHS_QP_HANDLE, UVERBS_OBJECT_QP,
			UVERBS_ACCESS_READ, UA_MANDATORY),
	UVERBS_ATTR_PTR_IN(METAROCE_IB_ATTR_SET_PATHS_COUNT, UVERBS_ATTR_TYPE(u32),
			   UA_MANDATORY));

DECLARE_UVERBS_NAMED_METHOD(
	METAROCE_IB_METHOD_QP_SET_STREAM_CLASS,
	UVERBS_ATTR_IDR(METAROCE_IB_ATTR_SET_STREAM_CLASS_QP_HANDLE, UVERBS_OBJECT_QP,
			UVERBS_ACCESS_READ, UA_MANDATORY),
	UVERBS_ATTR_PTR_IN(METAROCE_IB_ATTR_SET_STREAM_CLASS_CLASS, UVERBS_ATTR_TYPE(u32),
			   UA_MANDATORY));

ADD_UVERBS_METHODS(metaroce_qp_methods, UVERBS_OBJECT_QP,
		   &UVERBS_METHOD(METAROCE_IB_METHOD_QP_QUERY_PATHS),
		   &UVERBS_METHOD(METAROCE_IB_METHOD_QP_SET_PATHS),
		   &UVERBS_METHOD(METAROCE_IB_METHOD_QP_SET_STREAM_CLASS));

const struct uapi_definition metaroce_uapi_defs[] = {
	UAPI_DEF_CHAIN_OBJ_TREE(UVERBS_OBJECT_QP, &metaroce_qp_methods),
	UAPI_DEF_CHAIN_OBJ_TREE(UVERBS_OBJECT_DEVICE, &metaroce_device_methods),
	{},
};

void metaroce_set_uapi(struct ib_device *dev)
{
	dev->driver_def = metaroce_uapi_defs;
}

/* --- A u32-keyed map read under RCU: rust/ffi/rcu_map.rs --- */

/*
 * An rhashtable of entries, each holding one reference (an opaque pointer,
 * released by the map's release function). Lookups run under
 * rcu_read_lock() and take no lock; inserts and removals take the
 * rhashtable's bucket locks. A removed entry's reference is released after
 * an RCU grace period (so a reader that found it may use it until its
 * read-side section ends), in process context: the RCU callback only moves
 * the entry to a module-wide list that one work item drains.
 */
struct metaroce_map {
	struct rhashtable ht;
	void (*release)(const void *ptr);
};

struct metaroce_map_entry {
	struct rhash_head node;
	u32 key;
	const void *ptr;
	void (*release)(const void *ptr);
	union {
		struct rcu_head rcu;
		struct llist_node dead;
	};
};

static const struct rhashtable_params metaroce_map_params = {
	.key_len = sizeof(u32),
	.key_offset = offsetof(struct metaroce_map_entry, key),
	.head_offset = offsetof(struct metaroce_map_entry, node),
	.automatic_shrinking = true,
};

/* Removed entries past their grace period, and how many are not yet released. */
static LLIST_HEAD(metaroce_map_dead);
static atomic_long_t metaroce_map_pending = ATOMIC_LONG_INIT(0);

static void metaroce_map_reap(struct work_struct *w)
{
	struct llist_node *n = llist_del_all(&metaroce_map_dead);
	struct metaroce_map_entry *e, *t;

	llist_for_each_entry_safe(e, t, n, dead) {
		const void *ptr = e->ptr;
		void (*release)(const void *ptr) = e->release;

		kfree(e);
		release(ptr);
		atomic_long_dec(&metaroce_map_pending);
	}
}

static DECLARE_WORK(metaroce_map_reaper, metaroce_map_reap);

static void metaroce_map_rcu(struct rcu_head *rcu)
{
	struct metaroce_map_entry *e =
		container_of(rcu, struct metaroce_map_entry, rcu);

	llist_add(&e->dead, &metaroce_map_dead);
	schedule_work(&metaroce_map_reaper);
}

struct metaroce_map *metaroce_map_new(void (*release)(const void *ptr))
{
	struct metaroce_map *m = kzalloc(sizeof(*m), GFP_KERNEL);

	if (!m)
		return NULL;
	m->release = release;
	if (rhashtable_init(&m->ht, &metaroce_map_params)) {
		kfree(m);
		return NULL;
	}
	return m;
}

static void metaroce_map_free_entry(void *obj, void *arg)
{
	struct metaroce_map_entry *e = obj;
	const void *ptr = e->ptr;

	kfree(e);
	((struct metaroce_map *)arg)->release(ptr);
}

/*
 * Frees the map; the references still in it are released now (process
 * context, no reader left). Removed entries still waiting for their grace
 * period are released by the reaper (metaroce_map_drain() waits for them).
 */
void metaroce_map_free(struct metaroce_map *m)
{
	rhashtable_free_and_destroy(&m->ht, metaroce_map_free_entry, m);
	kfree(m);
}

/* The pointer stored under key, or NULL. Caller holds rcu_read_lock(). */
const void *metaroce_map_lookup(struct metaroce_map *m, u32 key)
{
	struct metaroce_map_entry *e =
		rhashtable_lookup(&m->ht, &key, metaroce_map_params);

	return e ? e->ptr : NULL;
}

/*
 * Stores ptr (a reference the map now owns) under key: 0, or -EEXIST (key
 * taken) or -ENOMEM, and then the caller keeps its reference.
 */
int metaroce_map_insert(struct metaroce_map *m, u32 key, const void *ptr)
{
	struct metaroce_map_entry *e = kzalloc(sizeof(*e), GFP_KERNEL);
	int err;

	if (!e)
		return -ENOMEM;
	e->key = key;
	e->ptr = ptr;
	e->release = m->release;
	err = rhashtable_lookup_insert_fast(&m->ht, &e->node,
					    metaroce_map_params);
	if (err)
		kfree(e);
	return err;
}

/*
 * Removes key's entry: true if this call removed it. Its reference is
 * released after a grace period, in process context.
 */
/* Unlinks key's entry from the table: the entry, or NULL (none, or another caller won). */
static struct metaroce_map_entry *metaroce_map_unlink(struct metaroce_map *m, u32 key)
{
	struct metaroce_map_entry *e;

	rcu_read_lock();
	e = rhashtable_lookup(&m->ht, &key, metaroce_map_params);
	if (e && rhashtable_remove_fast(&m->ht, &e->node, metaroce_map_params))
		e = NULL;
	rcu_read_unlock();
	return e;
}

bool metaroce_map_remove(struct metaroce_map *m, u32 key)
{
	struct metaroce_map_entry *e = metaroce_map_unlink(m, key);

	if (!e)
		return false;
	atomic_long_inc(&metaroce_map_pending);
	call_rcu(&e->rcu, metaroce_map_rcu);
	return true;
}

/*
 * Removes key's entry and waits for a grace period, so that no reader that
 * found it is still using it; returns its reference, now the caller's, or
 * NULL if key is not stored (or another caller removed it first). Process
 * context: sleeps. The grace period is expedited (as synchronize_net() under
 * RTNL): a normal one costs milliseconds per call, and a process that exits
 * with N MRs deregisters them one by one.
 */
const void *metaroce_map_take(struct metaroce_map *m, u32 key)
{
	struct metaroce_map_entry *e;
	const void *ptr;

	might_sleep();
	e = metaroce_map_unlink(m, key);
	if (!e)
		return NULL;
	synchronize_rcu_expedited();
	ptr = e->ptr;
	kfree(e);
	return ptr;
}

/*
 * Waits until every removed entry's reference is released (before the
 * module's code goes away). Process context.
 */
void metaroce_map_drain(void)
{
	do {
		rcu_barrier();
		flush_work(&metaroce_map_reaper);
	} while (atomic_long_read(&metaroce_map_pending));
}

void metaroce_rcu_read_lock(void)
{
	rcu_read_lock();
}

void metaroce_rcu_read_unlock(void)
{
	rcu_read_unlock();
}

/* --- Work at the end of a receive batch: rust/ffi/defer.rs --- */

/*
 * Per CPU: the nodes queued during the receive batch being delivered, and a
 * NAPI context that runs them. A NAPI scheduled while the NIC's own poll
 * delivers the batch joins this CPU's poll list and is polled by the same
 * net_rx_action() once the NIC's poll returns: the batch's end, with no
 * other softirq and no work item in between. The NAPIs hang off a dummy
 * net_device (alloc_netdev_dummy(), as drivers do for NAPI of their own).
 */
struct metaroce_defer_cpu {
	struct llist_head list;
	struct napi_struct napi;
};

static DEFINE_PER_CPU(struct metaroce_defer_cpu, metaroce_defer_cpus);
static struct net_device *metaroce_defer_dev;
/* Nodes queued and not yet run, for metaroce_defer_drain(). */
static atomic_long_t metaroce_defer_pending = ATOMIC_LONG_INIT(0);

static int metaroce_defer_poll(struct napi_struct *napi, int budget)
{
	struct metaroce_defer_cpu *c =
		container_of(napi, struct metaroce_defer_cpu, napi);
	struct llist_node *n = llist_reverse_order(llist_del_all(&c->list));
	struct metaroce_defer *d, *t;
	int done = 0;

	/* `run` may queue `d` again (or free it): `t` is read before. */
	llist_for_each_entry_safe(d, t, n, node) {
		smp_store_release(&d->node.next, &d->node);
		d->run(d, false);
		atomic_long_dec(&metaroce_defer_pending);
		done++;
	}
	/*
	 * A node queued since llist_del_all() found the NAPI scheduled and set
	 * its MISSED bit: napi_complete_done() schedules it again.
	 */
	if (done >= budget)
		return budget;
	napi_complete_done(napi, done);
	return done;
}

int metaroce_defer_init(void)
{
	int cpu;

	metaroce_defer_dev = alloc_netdev_dummy(0);
	if (!metaroce_defer_dev)
		return -ENOMEM;
	for_each_possible_cpu(cpu) {
		struct metaroce_defer_cpu *c = per_cpu_ptr(&metaroce_defer_cpus, cpu);

		init_llist_head(&c->list);
		netif_napi_add(metaroce_defer_dev, &c->napi, metaroce_defer_poll);
		napi_enable(&c->napi);
	}
	return 0;
}

/* Nodes whose owners' last references are dropped in process context. */
static LLIST_HEAD(metaroce_defer_dead);

static void metaroce_defer_reap(struct work_struct *w)
{
	struct llist_node *n = llist_del_all(&metaroce_defer_dead);
	struct metaroce_defer *d, *t;

	llist_for_each_entry_safe(d, t, n, node) {
		smp_store_release(&d->node.next, &d->node);
		d->run(d, true);
		atomic_long_dec(&metaroce_defer_pending);
	}
}

static DECLARE_WORK(metaroce_defer_reaper, metaroce_defer_reap);

void metaroce_defer_put(struct metaroce_defer *d)
{
	atomic_long_inc(&metaroce_defer_pending);
	llist_add(&d->node, &metaroce_defer_dead);
	schedule_work(&metaroce_defer_reaper);
}

void metaroce_defer_node_init(struct metaroce_defer *d,
			      void (*run)(struct metaroce_defer *d, bool put))
{
	init_llist_node(&d->node);
	d->run = run;
}

bool metaroce_defer_claim(struct metaroce_defer *d)
{
	struct llist_node *self = &d->node;

	/* Fully ordered on success: after the poll's release of the node. */
	return try_cmpxchg(&d->node.next, &self, NULL);
}

void metaroce_defer_add(struct metaroce_defer *d)
{
	struct metaroce_defer_cpu *c;

	atomic_long_inc(&metaroce_defer_pending);
	c = get_cpu_ptr(&metaroce_defer_cpus);
	llist_add(&d->node, &c->list);
	napi_schedule(&c->napi);
	put_cpu_ptr(&metaroce_defer_cpus);
}

void metaroce_defer_drain(void)
{
	int cpu;

	might_sleep();
	if (!metaroce_defer_dev)
		return;
	/* napi_disable() waits for a scheduled poll, which runs every node. */
	for_each_possible_cpu(cpu)
		napi_disable(&per_cpu_ptr(&metaroce_defer_cpus, cpu)->napi);
	/* The last references those runs handed to process context. */
	flush_work(&metaroce_defer_reaper);
	if (atomic_long_read(&metaroce_defer_pending))
		pr_err("metaroce: %ld deferred runs lost at unload\n",
		       atomic_long_read(&metaroce_defer_pending));
	for_each_possible_cpu(cpu)
		netif_napi_del(&per_cpu_ptr(&metaroce_defer_cpus, cpu)->napi);
	free_netdev(metaroce_defer_dev);
	metaroce_defer_dev = NULL;
}

/* --- UDP tunnel and timers: rust/ffi/net.rs, rust/ffi/timer.rs --- */

int metaroce_udp_tunnel_open(bool ipv6, __be16 port, metaroce_encap_rcv_t rcv,
			     void *user, struct socket **sockp)
{
	struct udp_port_cfg ucfg = { .local_udp_port = port };
	struct udp_tunnel_sock_cfg tcfg = {
		.sk_user_data = user,
		.encap_type = 1,
		.encap_rcv = rcv,
	};
	int err;

	if (ipv6) {
		ucfg.family = AF_INET6;
		ucfg.ipv6_v6only = 1;
	} else {
		ucfg.family = AF_INET;
	}
	err = udp_sock_create(&init_net, &ucfg, sockp);
	if (err)
		return err;
	setup_udp_tunnel_sock(&init_net, *sockp, &tcfg);
	if (READ_ONCE(rx_gro))
		udp_set_bit(GRO_ENABLED, (*sockp)->sk);	/* not ACCEPT_L4 */
	return 0;
}

void *metaroce_sk_user_data(struct sock *sk)
{
	return rcu_dereference_sk_user_data(sk);
}

struct dst_entry *metaroce_route4(struct socket *sock, __be32 saddr,
				  __be32 daddr, __be16 sport, __be16 dport,
				  u8 tos, int oif, int *err)
{
	struct flowi4 fl4 = {
		.flowi4_oif = oif,
		.flowi4_proto = IPPROTO_UDP,
		.flowi4_tos = tos & INET_DSCP_MASK,
		.saddr = saddr,
		.daddr = daddr,
		.fl4_sport = sport,
		.fl4_dport = dport,
	};
	struct rtable *rt = ip_route_output_key(sock_net(sock->sk), &fl4);

	if (IS_ERR(rt)) {
		*err = PTR_ERR(rt);
		return NULL;
	}
	return &rt->dst;
}

struct dst_entry *metaroce_route6(struct socket *sock, const u8 *saddr,
				  const u8 *daddr, __be16 sport, __be16 dport,
				  u8 tclass, int oif, int *err)
{
	struct flowi6 fl6 = {
		.flowi6_oif = oif,
		.flowi6_proto = IPPROTO_UDP,
		.flowlabel = ip6_make_flowinfo(tclass, 0),
		.fl6_sport = sport,
		.fl6_dport = dport,
	};
	struct dst_entry *dst;

	memcpy(&fl6.saddr, saddr, sizeof(fl6.saddr));
	memcpy(&fl6.daddr, daddr, sizeof(fl6.daddr));
	dst = ipv6_stub->ipv6_dst_lookup_flow(sock_net(sock->sk), sock->sk,
					      &fl6, NULL);
	if (IS_ERR(dst)) {
		*err = PTR_ERR(dst);
		return NULL;
	}
	if (dst->error) {
		*err = dst->error;
		dst_release(dst);
		return NULL;
	}
	return dst;
}

struct dst_entry *metaroce_route4_cached(struct socket *sock,
					 struct dst_entry **slot,
					 __be32 saddr, __be32 daddr,
					 __be16 sport, __be16 dport, u8 tos,
					 int oif, int *err)
{
	struct dst_entry *dst = *slot;

	if (dst) {
		if (dst_check(dst, 0)) {
			dst_hold(dst);
			return dst;
		}
		*slot = NULL;
		dst_release(dst);
	}
	dst = metaroce_route4(sock, saddr, daddr, sport, dport, tos, oif, err);
	if (dst) {
		dst_hold(dst);
		*slot = dst;
	}
	return dst;
}

struct sk_buff *metaroce_tx_skb_new(unsigned int len)
{
	unsigned int headroom = MAX_HEADER + sizeof(struct ipv6hdr) +
				sizeof(struct udphdr);
	struct sk_buff *skb = alloc_skb(headroom + len, GFP_ATOMIC);

	if (skb)
		skb_reserve(skb, headroom);
	return skb;
}

void metaroce_skb_put_zero(struct sk_buff *skb, unsigned int len)
{
	skb_put_zero(skb, len);
}

void metaroce_skb_set_gso(struct sk_buff *skb, unsigned int seg)
{
	struct skb_shared_info *sh = skb_shinfo(skb);

	/* As a UDP_SEGMENT socket's send (udp_send_skb, udp4_hwcsum): the
	 * checksum left partial from the UDP header that the tunnel's xmit
	 * pushes in front of the payload, finished per segment by the device
	 * or by software GSO (__udp_gso_segment).
	 */
	sh->gso_size = seg;
	sh->gso_type = SKB_GSO_UDP_L4;
	sh->gso_segs = DIV_ROUND_UP(skb->len, seg);
	skb->ip_summed = CHECKSUM_PARTIAL;
	skb->csum_start = skb_headroom(skb) - sizeof(struct udphdr);
	skb->csum_offset = offsetof(struct udphdr, check);
}

bool metaroce_dst_gso_udp(const struct dst_entry *dst)
{
	bool gso;

	/* A held dst may have its netdev swapped for blackhole_netdev
	 * (dst_dev_put) and the old one released: read it under RCU (plain
	 * READ_ONCE of dst->dev, which every 6.12.y has; dst_dev_rcu() came
	 * later).
	 */
	rcu_read_lock();
	gso = READ_ONCE(READ_ONCE(dst->dev)->features) & NETIF_F_GSO_UDP_L4;
	rcu_read_unlock();
	return gso;
}

/*
 * Pushes a UDP header, its checksum 0, in front of the payload of `skb`, as
 * udp_tunnel_xmit_skb does.
 */
static struct udphdr *metaroce_udp_hdr_push(struct sk_buff *skb, __be16 sport,
					    __be16 dport)
{
	struct udphdr *uh;

	__skb_push(skb, sizeof(*uh));
	skb_reset_transport_header(skb);
	uh = udp_hdr(skb);
	uh->dest = dport;
	uh->source = sport;
	uh->len = htons(skb->len);
	uh->check = 0;
	return uh;
}

/*
 * Pushes a UDP header in front of the payload of `skb` (linear, not GSO)
 * with its checksum complete (the header's and the payload's, over the
 * IPv4 pseudo-header; a sum of 0 sent as CSUM_MANGLED_0, as udp_set_csum
 * and skb_checksum_help do), and marks the skb CHECKSUM_NONE.
 */
static void metaroce_udp4_push(struct sk_buff *skb, __be32 src, __be32 dst,
			       __be16 sport, __be16 dport)
{
	struct udphdr *uh = metaroce_udp_hdr_push(skb, sport, dport);

	uh->check = csum_tcpudp_magic(src, dst, skb->len, IPPROTO_UDP,
				      skb_checksum(skb, 0, skb->len, 0));
	if (!uh->check)
		uh->check = CSUM_MANGLED_0;
	skb->ip_summed = CHECKSUM_NONE;
}

bool metaroce_udp4_xmit(struct rtable *rt, struct sock *sk,
			struct sk_buff *skb, __be32 src, __be32 dst, u8 tos,
			u8 ttl, __be16 df, __be16 sport, __be16 dport)
{
	netdev_features_t f;

	/* As metaroce_dst_gso_udp: the route's netdev under RCU, read once. */
	rcu_read_lock();
	f = READ_ONCE(READ_ONCE(rt->dst.dev)->features);
	rcu_read_unlock();
	if (skb_is_gso(skb) || (f & (NETIF_F_IP_CSUM | NETIF_F_HW_CSUM))) {
		udp_tunnel_xmit_skb(rt, sk, skb, src, dst, tos, ttl, df, sport,
				    dport, false, false);
		return f & NETIF_F_GSO_UDP_L4;
	}
	/* What udp_tunnel_xmit_skb does, with the checksum complete. */
	metaroce_udp4_push(skb, src, dst, sport, dport);
	memset(&IPCB(skb)->opt, 0, sizeof(IPCB(skb)->opt));
	iptunnel_xmit(sk, rt, skb, src, dst, IPPROTO_UDP, tos, ttl, df, false);
	return f & NETIF_F_GSO_UDP_L4;
}

int metaroce_local_ifindex(bool v6, const u8 *addr)
{
	struct net_device *dev = NULL;
	int ifindex = 0;

	rcu_read_lock();
	if (!v6) {
		__be32 a;

		memcpy(&a, addr, 4);
		dev = __ip_dev_find(&init_net, a, false);
	}
#if IS_ENABLED(CONFIG_IPV6)
	else {
		struct in6_addr a;

		memcpy(&a, addr, 16);
		dev = ipv6_dev_find(&init_net, &a, NULL);
	}
#endif
	if (dev)
		ifindex = dev->ifindex;
	rcu_read_unlock();
	return ifindex;
}

unsigned int metaroce_ifindex_mtu(int ifindex)
{
	struct net_device *dev;
	unsigned int mtu = 0;

	rcu_read_lock();
	dev = dev_get_by_index_rcu(&init_net, ifindex);
	if (dev)
		mtu = READ_ONCE(dev->mtu);
	rcu_read_unlock();
	return mtu;
}

void metaroce_kfree_skb(struct sk_buff *skb)
{
	kfree_skb(skb);
}

void metaroce_consume_skb(struct sk_buff *skb)
{
	consume_skb(skb);
}

int metaroce_skb_iif(const struct sk_buff *skb)
{
	return skb->skb_iif;
}

int metaroce_skb_linearize(struct sk_buff *skb)
{
	return skb_linearize(skb);
}

bool metaroce_skb_pieces(struct sk_buff *skb, unsigned int head,
			 const u8 **head_ptr, unsigned int *head_len,
			 const u8 **tail_ptr, unsigned int *tail_len)
{
	const skb_frag_t *frag;
	void *tail = NULL;

	if (!pskb_may_pull(skb, min(head, skb->len)))
		return false;
	if (skb_is_nonlinear(skb)) {
		if (skb_has_frag_list(skb) || !skb_frags_readable(skb) ||
		    skb_shinfo(skb)->nr_frags != 1)
			return false;
		frag = &skb_shinfo(skb)->frags[0];
		if (skb_frag_size(frag) != skb->data_len)
			return false;
		tail = skb_frag_address_safe(frag);
		if (!tail)
			return false;
	}
	*head_ptr = skb->data;
	*head_len = skb_headlen(skb);
	*tail_ptr = tail;
	*tail_len = skb->data_len;
	return true;
}

u8 *metaroce_skb_data(const struct sk_buff *skb)
{
	return skb->data;
}

unsigned int metaroce_skb_len(const struct sk_buff *skb)
{
	return skb->len;
}

const u8 *metaroce_skb_network_header(const struct sk_buff *skb)
{
	return skb_network_header(skb);
}

bool metaroce_irqs_disabled(void)
{
	return irqs_disabled();
}

void metaroce_local_bh_disable(void)
{
	local_bh_disable();
}

void metaroce_local_bh_enable(void)
{
	local_bh_enable();
}

void metaroce_hrtimer_setup(struct hrtimer *timer,
			    enum hrtimer_restart (*fn)(struct hrtimer *))
{
	hrtimer_init(timer, CLOCK_MONOTONIC, HRTIMER_MODE_ABS_SOFT);
	timer->function = fn;
}

void metaroce_hrtimer_start(struct hrtimer *timer, u64 deadline_ns, u64 slack_ns)
{
	hrtimer_start_range_ns(timer, ns_to_ktime(min_t(u64, deadline_ns, KTIME_MAX)),
			       slack_ns, HRTIMER_MODE_ABS_SOFT);
}

bool metaroce_hrtimer_is_queued(struct hrtimer *timer)
{
	return hrtimer_is_queued(timer);
}

void metaroce_timer_lock_init(spinlock_t *lock)
{
	spin_lock_init(lock);
}

unsigned long metaroce_spin_lock_irqsave(spinlock_t *lock)
{
	unsigned long flags;

	spin_lock_irqsave(lock, flags);
	return flags;
}

void metaroce_spin_unlock_irqrestore(spinlock_t *lock, unsigned long flags)
{
	spin_unlock_irqrestore(lock, flags);
}

#if IS_ENABLED(CONFIG_KUNIT)
#include <kunit/test.h>

/* bindgen's view of every struct we will touch matches the compiler's. */
static void metaroce_test_layout(struct kunit *test)
{
	int p;

	for (p = 0; p < METAROCE_PROBE_COUNT; p++) {
		KUNIT_EXPECT_NE_MSG(test, metaroce_c_sizeof(p), 0, "probe %d", p);
		KUNIT_EXPECT_EQ_MSG(test, metaroce_rust_sizeof(p),
				    metaroce_c_sizeof(p), "probe %d", p);
	}
	KUNIT_EXPECT_EQ(test, metaroce_rust_sizeof(METAROCE_PROBE_COUNT), 0);
}

/* The load-time check of udp_port accepts exactly the ports it should. */
static void metaroce_test_param(struct kunit *test)
{
	KUNIT_EXPECT_EQ(test, metaroce_rust_check_param(METAROCE_DEFAULT_UDP_PORT), 0);
	KUNIT_EXPECT_EQ(test, metaroce_rust_check_param(1), 0);
	KUNIT_EXPECT_EQ(test, metaroce_rust_check_param(65535), 0);
	KUNIT_EXPECT_EQ(test, metaroce_rust_check_param(0), -EINVAL);
	KUNIT_EXPECT_EQ(test, metaroce_rust_check_param(65536), -EINVAL);
	/* RoCEv2's port belongs to rxe and real RoCE NICs. */
	KUNIT_EXPECT_EQ(test, metaroce_rust_check_param(4791), -EADDRINUSE);
	KUNIT_EXPECT_EQ(test, metaroce_rust_check_param(metaroce_param_udp_port()), 0);
	/* paths: 1..=64, else the module refuses to load. */
	KUNIT_EXPECT_EQ(test, metaroce_rust_check_paths(METAROCE_DEFAULT_PATHS), 0);
	KUNIT_EXPECT_EQ(test, metaroce_rust_check_paths(1), 0);
	KUNIT_EXPECT_EQ(test, metaroce_rust_check_paths(64), 0);
	KUNIT_EXPECT_EQ(test, metaroce_rust_check_paths(0), -EINVAL);
	KUNIT_EXPECT_EQ(test, metaroce_rust_check_paths(65), -EINVAL);
	KUNIT_EXPECT_EQ(test, metaroce_rust_check_paths(metaroce_param_paths()), 0);
}

/* The protocol core, compiled into the kernel, passes its in-kernel checks. */
static void metaroce_test_proto(struct kunit *test)
{
	KUNIT_EXPECT_EQ(test, metaroce_rust_proto_selftest(), 0);
}

/* GUID from MAC and active MTU from netdev MTU, as the device reports them. */
static void metaroce_test_rdma_helpers(struct kunit *test)
{
	KUNIT_EXPECT_EQ(test, metaroce_rust_rdma_selftest(), 0);
}

/* UDP tunnel: datagrams to 127.0.0.1 and ::1 arrive intact with their metadata. */
static void metaroce_test_udp_loopback(struct kunit *test)
{
	KUNIT_EXPECT_EQ(test, metaroce_rust_udp_selftest(), 0);
}

/* UDP tunnel: a port already taken is refused with EADDRINUSE, and freed on drop. */
static void metaroce_test_udp_port_busy(struct kunit *test)
{
	KUNIT_EXPECT_EQ(test, metaroce_rust_udp_busy_selftest(), 0);
}

/*
 * One datagram of `len` bytes of `p` through metaroce_udp4_push, against the
 * same through the kernel's own path (udp_set_csum's partial checksum, which
 * skb_checksum_help completes): the same UDP header, and a checksum the
 * receiver's check accepts. Returns the checksum field (0 on failure).
 */
static __sum16 metaroce_test_udp4_one(struct kunit *test, const u8 *p,
				      unsigned int len)
{
	__be32 src = htonl(0xc6120002), dst = htonl(0xc6120001);
	__be16 sport = htons(49153), dport = htons(METAROCE_DEFAULT_UDP_PORT);
	struct sk_buff *a = metaroce_tx_skb_new(len);
	struct sk_buff *b = metaroce_tx_skb_new(len);
	struct udphdr *uh;
	__sum16 check = 0;

	if (!a || !b) {
		KUNIT_FAIL(test, "no skb for %u bytes", len);
		goto out;
	}
	skb_put_data(a, p, len);
	skb_put_data(b, p, len);
	metaroce_udp4_push(a, src, dst, sport, dport);
	/* b: udp_set_csum's partial checksum, completed as on the way out. */
	uh = metaroce_udp_hdr_push(b, sport, dport);
	b->ip_summed = CHECKSUM_PARTIAL;
	b->csum_start = skb_transport_header(b) - b->head;
	b->csum_offset = offsetof(struct udphdr, check);
	uh->check = ~udp_v4_check(b->len, src, dst, 0);
	if (skb_checksum_help(b)) {
		KUNIT_FAIL(test, "skb_checksum_help failed for %u bytes", len);
		goto out;
	}
	KUNIT_EXPECT_EQ_MSG(test, a->len, b->len, "%u bytes", len);
	KUNIT_EXPECT_EQ_MSG(test, (int)a->ip_summed, CHECKSUM_NONE, "%u bytes", len);
	KUNIT_EXPECT_EQ_MSG(test, memcmp(a->data, b->data, a->len), 0,
			    "%u bytes: header or checksum differ (%04x, %04x)",
			    len, udp_hdr(a)->check, udp_hdr(b)->check);
	KUNIT_EXPECT_EQ_MSG(test, csum_tcpudp_magic(src, dst, a->len, IPPROTO_UDP,
						    skb_checksum(a, 0, a->len, 0)),
			    0, "%u bytes: the receiver's check", len);
	check = udp_hdr(a)->check;
out:
	kfree_skb(a);
	kfree_skb(b);
	return check;
}

/*
 * The checksum metaroce_udp4_xmit completes for a netdev without checksum
 * offload: as the kernel's own for even and odd lengths, and a sum of 0
 * sent as CSUM_MANGLED_0.
 */
static void metaroce_test_udp4_csum(struct kunit *test)
{
	static const unsigned int lens[] = { 0, 1, 2, 7, 1368, 1369, 4096 };
	__be32 src = htonl(0xc6120002), dst = htonl(0xc6120001);
	u8 *p = kunit_kzalloc(test, 4096, GFP_KERNEL);
	struct udphdr uh = {
		.source = htons(49153),
		.dest = htons(METAROCE_DEFAULT_UDP_PORT),
		.len = htons(sizeof(uh) + 2),
	};
	unsigned int i, v;
	u8 w[2];

	KUNIT_ASSERT_NOT_NULL(test, p);
	for (i = 0; i < 4096; i++)
		p[i] = i * 7 + 3;
	for (i = 0; i < ARRAY_SIZE(lens); i++)
		metaroce_test_udp4_one(test, p, lens[i]);
	/* Two payload bytes whose datagram sums to 0. */
	for (v = 0; v < 65536; v++) {
		w[0] = v >> 8;
		w[1] = v;
		if (!csum_tcpudp_magic(src, dst, sizeof(uh) + 2, IPPROTO_UDP,
				       csum_partial(w, 2, csum_partial(&uh, sizeof(uh), 0))))
			break;
	}
	KUNIT_ASSERT_LT(test, v, 65536U);
	KUNIT_EXPECT_EQ(test, metaroce_test_udp4_one(test, w, 2), CSUM_MANGLED_0);
}

/* Timers: fire once, not early; cancel, shutdown, drop while armed. */
static void metaroce_test_timer(struct kunit *test)
{
	KUNIT_EXPECT_EQ(test, metaroce_rust_timer_selftest(), 0);
}

static void metaroce_test_defer(struct kunit *test)
{
	KUNIT_EXPECT_EQ(test, metaroce_rust_defer_selftest(), 0);
}

/* RCU map: lookups, EEXIST, removal deferred past readers, drop. */
static void metaroce_test_rcu_map(struct kunit *test)
{
	KUNIT_EXPECT_EQ(test, metaroce_rust_rcu_map_selftest(), 0);
}

static struct kunit_case metaroce_test_cases[] = {
	KUNIT_CASE(metaroce_test_layout),
	KUNIT_CASE(metaroce_test_param),
	KUNIT_CASE(metaroce_test_proto),
	KUNIT_CASE(metaroce_test_rdma_helpers),
	KUNIT_CASE(metaroce_test_udp_loopback),
	KUNIT_CASE(metaroce_test_udp_port_busy),
	KUNIT_CASE(metaroce_test_udp4_csum),
	KUNIT_CASE(metaroce_test_timer),
	KUNIT_CASE(metaroce_test_defer),
	KUNIT_CASE(metaroce_test_rcu_map),
	{}
};

static struct kunit_suite metaroce_test_suite = {
	.name = "metaroce",
	.test_cases = metaroce_test_cases,
};
kunit_test_suite(metaroce_test_suite);
#endif
