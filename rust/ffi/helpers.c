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
#include <linux/skbuff.h>
#include <net/udp_tunnel.h>
#include <rdma/ib_verbs.h>
#include <rdma/rdma_netlink.h>
#include <linux/notifier.h>

#include "metaroce.h"

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
	default:				return 0;
	}
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

static struct kunit_case metaroce_test_cases[] = {
	KUNIT_CASE(metaroce_test_layout),
	KUNIT_CASE(metaroce_test_param),
	KUNIT_CASE(metaroce_test_proto),
	KUNIT_CASE(metaroce_test_rdma_helpers),
	{}
};

static struct kunit_suite metaroce_test_suite = {
	.name = "metaroce",
	.test_cases = metaroce_test_cases,
};
kunit_test_suite(metaroce_test_suite);
#endif
