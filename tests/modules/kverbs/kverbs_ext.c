// SPDX-License-Identifier: GPL-2.0
/*
 * kverbs_test's metaroce extension API (Documentation/extension.rst), the
 * kernel ULP side: a QP's paths and stream class. The exports are taken
 * with symbol_get, so the module also runs where metaroce is not loaded.
 */
#include "kverbs.h"

/* The extension API's exports (metaroce's include/metaroce_ext.h). */
int metaroce_qp_query_paths(struct ib_qp *qp, struct metaroce_conn_info *info,
			    struct metaroce_path_info *paths, u32 max_paths);
int metaroce_qp_set_paths(struct ib_qp *qp, u32 paths);
int metaroce_qp_set_stream_class(struct ib_qp *qp, u32 cls);

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
