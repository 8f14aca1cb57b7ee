/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The C API metaroce's Rust sees: bindgen turns this header into
 * rust/ffi/bindings_generated.rs at build time (see Kbuild), with the same
 * compiler flags the kernel uses for its own Rust bindings.
 */
#include <linux/netdevice.h>
#include <linux/skbuff.h>
#include <linux/udp.h>
#include <net/udp_tunnel.h>
#include <net/ip6_route.h>
#include <rdma/ib_verbs.h>
#include <rdma/ib_mad.h>
#include <linux/notifier.h>
#include <linux/delay.h>
#include <rdma/ib_umem.h>
#include <rdma/ib_cache.h>
#include <rdma/rdma_netlink.h>
#include <rdma/uverbs_ioctl.h>
#include <uapi/rdma/rdma_user_rxe.h>

#include <linux/hrtimer.h>
#include <linux/ktime.h>
#include <linux/random.h>
#include <net/ip.h>

#include "metaroce.h"
#include "metaroce_net.h"
#include "metaroce_ext.h"
