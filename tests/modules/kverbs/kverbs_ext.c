// SPDX-License-Identifier: GPL-2.0
/*
 * kverbs_test's metaroce extension API (Documentation/extension.rst), the
 * kernel ULP side: a QP's paths and stream class, a device's planes. The
 * exports are taken with symbol_get, so the module also runs where metaroce
 * is not loaded.
 */
#include "kverbs.h"
#include <linux/if_arp.h>
#include <linux/netdevice.h>

/* The extension API's exports (metaroce's include/metaroce_ext.h). */
int metaroce_qp_query_paths(struct ib_qp *qp, struct metaroce_conn_info *info,
			    struct metaroce_path_info *paths, u32 max_paths);
int metaroce_qp_set_paths(struct ib_qp *qp, u32 paths);
int metaroce_qp_set_stream_class(struct ib_qp *qp, u32 cls);
int metaroce_device_query_planes(struct ib_device *dev,
				 struct metaroce_plane_info *planes, u32 max);
int metaroce_device_set_planes(struct ib_device *dev, const u32 *ifindex,
			       u32 n);

/*
 * Stream classes on a shared device: X and Y (a loopback pair, like A and B)
 * pinned to class 3 before RTR ride a connection of their own (2 members,
 * class 3, its own source ports), apart from A and B's (class 0); past INIT
 * and above 7 a class is -EINVAL.
 */
static void t_ext_class(typeof(&metaroce_qp_query_paths) query,
			typeof(&metaroce_qp_set_stream_class) set_class)
{
	static struct metaroce_path_info pa[1], px[1];
	struct metaroce_conn_info ca, cx;
	struct side x = { .name = "X", .cq = t.a.cq, .sq_psn = 0x1234 },
		    y = { .name = "Y", .cq = t.b.cq, .sq_psn = 0x4321 };
	struct ib_qp_cap cap;
	int r;

	x.qp = make_qp(x.cq, &cap, NULL, 0);
	y.qp = IS_ERR(x.qp) ? x.qp : make_qp(y.cq, &cap, NULL, 0);
	if (IS_ERR(x.qp) || IS_ERR(y.qp)) {
		report(false, "stream classes: ib_create_qp: %ld",
		       PTR_ERR(IS_ERR(x.qp) ? x.qp : y.qp));
		if (!IS_ERR(x.qp))
			ib_destroy_qp(x.qp);
		return;
	}
	r = set_class(x.qp, 8);
	report(r == -EINVAL, "metaroce_qp_set_stream_class(X, 8): -EINVAL (got %d)", r);
	r = set_class(x.qp, 3) ?: set_class(y.qp, 3);
	r = r ?: to_init(x.qp) ?: to_init(y.qp) ?: to_rtr(&x, &y) ?: to_rtr(&y, &x) ?:
	    to_rts_t(&x, 18, 7) ?: to_rts_t(&y, 18, 7);
	if (!report(!r, "X, Y pinned to stream class 3 and connected: %d", r))
		goto out;
	r = set_class(x.qp, 1);
	report(r == -EINVAL, "metaroce_qp_set_stream_class(X at RTS): -EINVAL (got %d)", r);
	r = query(x.qp, &cx, px, 1);
	report(r == 1 && query(t.a.qp, &ca, pa, 1) == 1 && cx.stream_class == 3 &&
	       ca.stream_class == 0 && cx.members == 2 && px[0].src_port != pa[0].src_port,
	       "X's connection: class %u, %u members, path 0 from port %u; A's: class %u, %u members, port %u",
	       cx.stream_class, cx.members, px[0].src_port, ca.stream_class, ca.members,
	       pa[0].src_port);
out:
	ib_destroy_qp(y.qp);
	ib_destroy_qp(x.qp);
}

void t_ext(void)
{
	typeof(&metaroce_qp_query_paths) query = symbol_get(metaroce_qp_query_paths);
	typeof(&metaroce_qp_set_paths) set = symbol_get(metaroce_qp_set_paths);
	typeof(&metaroce_qp_set_stream_class) set_class =
		symbol_get(metaroce_qp_set_stream_class);
	static struct metaroce_path_info pi[METAROCE_MAX_PATHS];
	struct metaroce_conn_info ci;
	bool ours = !strncmp(t.ibdev->node_desc, "metaroce", 8);
	int r, was;

	if (!query || !set || !set_class) {
		pr_info("# extension API: metaroce not loaded, not tried\n");
		goto out;
	}
	r = query(t.a.qp, &ci, pi, METAROCE_MAX_PATHS);
	if (!ours) {
		report(r == -EOPNOTSUPP && set(t.a.qp, 2) == -EOPNOTSUPP,
		       "extension API on a QP of %s (not metaroce): -EOPNOTSUPP (query %d)",
		       dev_name(&t.ibdev->dev), r);
		goto out;
	}
	report(r >= 1 && r == ci.paths && ci.paths <= ci.max_paths && ci.max_paths == 64 &&
	       ci.members >= 1,
	       "metaroce_qp_query_paths(A): %d records, paths %u of %u, %u member(s), flags %#x",
	       r, ci.paths, ci.max_paths, ci.members, ci.flags);
	if (r < 1)
		goto out;
	was = ci.paths;
	r = set(t.a.qp, 2);
	if (ci.flags & METAROCE_CONN_SHARED) {
		/*
		 * A and B (loopback: one local and remote address) are members
		 * of one connection, which sends on the largest count its
		 * members ask for: A's 2 lowers nothing while B asks for the
		 * default; B's 2 too, and it is 2 if they are the only members.
		 */
		report(r == was, "shared, %u members: A asks for 2, the connection stays on %d (got %d)",
		       ci.members, was, r);
		r = set(t.b.qp, 2);
		if (ci.members != 2) {
			report(r == was, "... B asks for 2 too: %d, others still ask for %d", r, was);
			goto restore;
		}
	}
	report(r == 2 && query(t.a.qp, &ci, pi, METAROCE_MAX_PATHS) == 2 && ci.paths == 2,
	       "metaroce_qp_set_paths(A%s, 2): %d, read back: paths %u",
	       ci.flags & METAROCE_CONN_SHARED ? " and B" : "", r, ci.paths);
	t_send("SEND 66000 B on 2 paths", 66000, 1, 1, false, false);
	r = query(t.a.qp, &ci, pi, METAROCE_MAX_PATHS);
	report(r == 2 && pi[0].sent > 0 && pi[1].sent > 0,
	       "... both paths sent packets (%u, %u)", r == 2 ? pi[0].sent : 0,
	       r == 2 ? pi[1].sent : 0);
	r = set(t.a.qp, 0);
	report(r == -EINVAL, "metaroce_qp_set_paths(A, 0): -EINVAL (got %d)", r);
	r = set(t.a.qp, 65);
	report(r == -EINVAL, "metaroce_qp_set_paths(A, 65): -EINVAL (got %d)", r);
	report(query(t.a.qp, &ci, pi, METAROCE_MAX_PATHS) == 2 && ci.paths == 2,
	       "... refused sets changed nothing (paths %u)", ci.paths);
restore:
	if (ci.flags & METAROCE_CONN_SHARED)
		set(t.b.qp, was);
	r = set(t.a.qp, was);
	report(r == was, "metaroce_qp_set_paths(A, %d) back: %d", was, r);
	if (ci.flags & METAROCE_CONN_SHARED)
		t_ext_class(query, set_class);
out:
	if (query)
		symbol_put(metaroce_qp_query_paths);
	if (set)
		symbol_put(metaroce_qp_set_paths);
	if (set_class)
		symbol_put(metaroce_qp_set_stream_class);
}

/* --- planes --- */

/* Netdev ifindex's name into name ("?" if there is none). */
static const char *ifname(int ifindex, char *name)
{
	struct net_device *nd;

	rcu_read_lock();
	nd = dev_get_by_index_rcu(&init_net, ifindex);
	strscpy(name, nd ? nd->name : "?", IFNAMSIZ);
	rcu_read_unlock();
	return name;
}

/*
 * A netdev for a second plane: the first of the initial namespace that is
 * Ethernet, up with carrier, not loopback and not the device's own (ifindex
 * own). One guest: the veth peer of the device's link (mrl1); two guests
 * with MR_PLANES=2: the second link. 0 if there is none.
 */
static int other_netdev(int own)
{
	struct net_device *nd;
	int found = 0;

	rcu_read_lock();
	for_each_netdev_rcu(&init_net, nd) {
		if (nd->ifindex == own || (nd->flags & IFF_LOOPBACK) || nd->type != ARPHRD_ETHER ||
		    !netif_running(nd) || !netif_carrier_ok(nd))
			continue;
		found = nd->ifindex;
		break;
	}
	rcu_read_unlock();
	return found;
}

/* An ifindex no netdev of the initial namespace has. */
static u32 absent_ifindex(void)
{
	u32 i = 0x7ffffff0;

	rcu_read_lock();
	while (dev_get_by_index_rcu(&init_net, i))
		i--;
	rcu_read_unlock();
	return i;
}

/* The planes exports, as t_planes takes them. */
struct planes_api {
	typeof(&metaroce_device_query_planes) query;
	typeof(&metaroce_device_set_planes) set;
	typeof(&metaroce_qp_query_paths) paths;
};

/*
 * The device's planes read back as exactly the n netdevs want[0..n), each
 * up (METAROCE_PLANE_UP, not _GONE); *pl gets the records.
 */
static bool planes_are(const struct planes_api *api, const u32 *want, int n,
		       struct metaroce_plane_info *pl)
{
	int r = api->query(t.ibdev, pl, METAROCE_MAX_PLANES), k;

	if (r != n)
		return fail_why("metaroce_device_query_planes: %d, expected %d plane(s)", r, n);
	for (k = 0; k < n; k++)
		if (pl[k].ifindex != want[k] || pl[k].flags != METAROCE_PLANE_UP)
			return fail_why("plane %d: ifindex %u flags %#x, expected ifindex %u flags %#x (UP)",
					k, pl[k].ifindex, pl[k].flags, want[k], METAROCE_PLANE_UP);
	return true;
}

/*
 * A's connection: how many of its paths send on plane 1 (by
 * metaroce_path_info.plane), -1 if the query fails; *ci its totals.
 */
static int paths_on_plane1(const struct planes_api *api, struct metaroce_conn_info *ci)
{
	static struct metaroce_path_info pi[METAROCE_MAX_PATHS];
	int r = api->paths(t.a.qp, ci, pi, METAROCE_MAX_PATHS), k, on1 = 0;

	if (r < 0)
		return -1;
	for (k = 0; k < r; k++)
		on1 += pi[k].plane == 1;
	return on1;
}

/*
 * The planes of a device (Documentation/extension.rst, "Planes"), as a
 * kernel ULP sets them: a fresh device has one, its own netdev, up; the
 * sets user space's metaroce_dv_set_planes() gets EINVAL/ENODEV for are
 * refused alike (0 or 9 netdevs, a first one not the device's, one twice,
 * loopback: -EINVAL; no such netdev: -ENODEV) and change nothing; bound to
 * its netdev and a second one (other_netdev()), the device reads back both,
 * a query with room for one still tells 2, and the loopback pair's SEND and
 * WRITE complete, byte-exact, with datagrams sent on both planes. (Sent on
 * the second netdev to the device's own address, a datagram does not come
 * back, in one guest or two: the transport resends it on the other paths,
 * which costs the application nothing.) Set back to its netdev alone (also
 * after a failure), A's paths return to plane 0, so the tests after these
 * run as before.
 */
static void t_planes_on(const struct planes_api *api)
{
	static struct metaroce_plane_info pl[METAROCE_MAX_PLANES];
	struct metaroce_conn_info ci = {};
	char n0[IFNAMSIZ], n1[IFNAMSIZ];
	struct net_device *nd;
	u32 own = 0, other, lo = init_net.loopback_dev->ifindex, absent = absent_ifindex();
	u32 list[METAROCE_MAX_PLANES + 1], one[1];
	u64 tx0;
	bool ok;
	int r, k, on1;

	/* The device's netdev: its GID's (the loopback pair's, find_gid). */
	rcu_read_lock();
	nd = rdma_read_gid_attr_ndev_rcu(t.gid_attr);
	if (!IS_ERR(nd))
		own = nd->ifindex;
	rcu_read_unlock();
	if (!own) {
		report(false, "planes: the netdev of GID %d: %ld", t.sgid_index, PTR_ERR(nd));
		return;
	}
	one[0] = own;
	other = other_netdev(own);
	ifname(own, n0);
	ifname(other, n1);

	ok = planes_are(api, one, 1, pl) &&
	     (pl[0].tx_packets > 0 || fail_why("plane 0: tx_packets 0 after the tests so far"));
	report(ok, "metaroce_device_query_planes(%s): 1 plane, the device's netdev %s (ifindex %u), UP, %llu datagrams sent on it",
	       dev_name(&t.ibdev->dev), n0, own, pl[0].tx_packets);
	if (!ok)
		goto restore;

	/* The refusals, each of one fault. */
	for (k = 0; k <= METAROCE_MAX_PLANES; k++)
		list[k] = own;
	r = api->set(t.ibdev, list, 0);
	report(r == -EINVAL, "metaroce_device_set_planes(0 netdevs): -EINVAL (got %d)", r);
	r = api->set(t.ibdev, list, METAROCE_MAX_PLANES + 1);
	report(r == -EINVAL, "metaroce_device_set_planes(%d netdevs > METAROCE_MAX_PLANES): -EINVAL (got %d)",
	       METAROCE_MAX_PLANES + 1, r);
	list[0] = other ?: lo;
	list[1] = own;
	r = api->set(t.ibdev, list, 2);
	report(r == -EINVAL, "metaroce_device_set_planes([%s, %s]: the first not the device's): -EINVAL (got %d)",
	       other ? n1 : "lo", n0, r);
	list[0] = own;
	r = api->set(t.ibdev, list, 2);
	report(r == -EINVAL, "metaroce_device_set_planes([%s, %s]: a netdev twice): -EINVAL (got %d)",
	       n0, n0, r);
	list[1] = lo;
	r = api->set(t.ibdev, list, 2);
	report(r == -EINVAL, "metaroce_device_set_planes([%s, lo]: loopback): -EINVAL (got %d)",
	       n0, r);
	list[1] = absent;
	r = api->set(t.ibdev, list, 2);
	report(r == -ENODEV, "metaroce_device_set_planes([%s, ifindex %u]: no such netdev): -ENODEV (got %d)",
	       n0, absent, r);
	list[1] = 0x80000000u;
	r = api->set(t.ibdev, list, 2);
	report(r == -ENODEV, "metaroce_device_set_planes([%s, ifindex %#x]: above INT_MAX, no netdev): -ENODEV (got %d)",
	       n0, list[1], r);
	ok = planes_are(api, one, 1, pl);
	report(ok, "... the refused sets changed nothing: 1 plane, %s", n0);

	if (!other) {
		report(true, "planes: two planes # SKIP no second netdev (Ethernet, up, not %s) here", n0);
		goto restore;
	}
	list[0] = own;
	list[1] = other;
	r = api->set(t.ibdev, list, 2);
	ok = (r == 0 || fail_why("metaroce_device_set_planes: %d", r)) && planes_are(api, list, 2, pl);
	report(ok, "metaroce_device_set_planes([%s, %s]): 0, read back: 2 planes, %s (ifindex %u) and %s (ifindex %u), both UP",
	       n0, n1, n0, own, n1, other);
	if (!ok)
		goto restore;
	memset(pl, 0xee, sizeof(pl));
	r = api->query(t.ibdev, pl, 1);
	report(r == 2 && pl[0].ifindex == own && pl[1].ifindex == 0xeeeeeeee,
	       "metaroce_device_query_planes with room for 1: 2 (the planes there are), 1 record written (%u, then %#x untouched)",
	       pl[0].ifindex, pl[1].ifindex);
	list[2] = other;
	r = api->set(t.ibdev, list, 3);
	report(r == -EINVAL && planes_are(api, list, 2, pl),
	       "metaroce_device_set_planes([%s, %s, %s]) with 2 planes set: -EINVAL (got %d), still the 2 planes",
	       n0, n1, n1, r);

	t_send("SEND 66000 B with 2 planes set", 66000, 1, 1, false, false);
	t_write("RDMA WRITE 66000 B with 2 planes set", 66000, 1, false, false);
	on1 = paths_on_plane1(api, &ci);
	r = api->query(t.ibdev, pl, METAROCE_MAX_PLANES);
	ok = (r == 2 || fail_why("metaroce_device_query_planes: %d", r)) &&
	     (pl[1].tx_packets > 0 || fail_why("no datagram on plane 1 (%s)", n1)) &&
	     (pl[0].tx_packets > 0 || fail_why("no datagram on plane 0 (%s)", n0));
	report(ok, "... datagrams sent on both planes: %llu on %s, %llu on %s (A's connection: %d of %u paths on plane 1 now, %u moves, %u retransmissions)",
	       r == 2 ? pl[0].tx_packets : 0, n0, r == 2 ? pl[1].tx_packets : 0, n1, on1,
	       ci.paths, ci.moves, ci.retx);

restore:
	r = api->set(t.ibdev, one, 1);
	ok = (r == 0 || fail_why("metaroce_device_set_planes: %d", r)) && planes_are(api, one, 1, pl);
	report(ok, "metaroce_device_set_planes([%s]) back: 0, read back: 1 plane, %s, UP", n0, n0);
	tx0 = pl[0].tx_packets;
	t_send("SEND 4 KiB back on 1 plane", 4096, 1, 1, false, false);
	on1 = paths_on_plane1(api, &ci);
	ok = planes_are(api, one, 1, pl) &&
	     (on1 == 0 || fail_why("%d of A's %u paths on plane 1 (query: %s)", on1, ci.paths,
				   on1 < 0 ? "failed" : "ok")) &&
	     (pl[0].tx_packets > tx0 || fail_why("plane 0: tx_packets %llu, %llu before the SEND",
						 pl[0].tx_packets, tx0));
	report(ok, "... A's %u paths all on plane 0 again, the SEND's %llu datagrams on %s",
	       ci.paths, pl[0].tx_packets - tx0, n0);
}

void t_planes(void)
{
	struct planes_api api = {
		.query = symbol_get(metaroce_device_query_planes),
		.set = symbol_get(metaroce_device_set_planes),
		.paths = symbol_get(metaroce_qp_query_paths),
	};
	struct metaroce_plane_info pl[1];
	u32 one[1] = { 1 };
	int r;

	if (!api.query || !api.set || !api.paths) {
		pr_info("# planes: metaroce not loaded, not tried\n");
		goto out;
	}
	if (strncmp(t.ibdev->node_desc, "metaroce", 8)) {
		r = api.query(t.ibdev, pl, 1);
		report(r == -EOPNOTSUPP && api.set(t.ibdev, one, 1) == -EOPNOTSUPP,
		       "planes of %s (not metaroce): -EOPNOTSUPP (query %d)",
		       dev_name(&t.ibdev->dev), r);
		goto out;
	}
	t_planes_on(&api);
out:
	if (api.query)
		symbol_put(metaroce_device_query_planes);
	if (api.set)
		symbol_put(metaroce_device_set_planes);
	if (api.paths)
		symbol_put(metaroce_qp_query_paths);
}
