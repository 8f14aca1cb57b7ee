// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * metaroce-planes: shows and sets the planes of a metaroce RDMA device (the
 * netdevs of a multi-plane host it spreads its paths over), through
 * libmetaroce-dv. Documentation/extension.rst, "Planes".
 */
#include <errno.h>
#include <inttypes.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metaroce_dv.h"

static const char usage_text[] =
"usage: metaroce-planes DEV                 show DEV's planes\n"
"       metaroce-planes DEV NETDEV...       bind DEV to the NETDEVs as planes\n"
"\n"
"A plane is one network of a multi-plane host, reached through one netdev\n"
"and leading to the same peer addresses as the others. The first NETDEV must\n"
"be the one DEV was added on (rdma link add DEV type metaroce netdev NETDEV);\n"
"at most 8 in all; setting needs CAP_NET_ADMIN. A NETDEV may be given by name\n"
"or as '#IFINDEX'. Output, a line per plane:\n"
"  plane K: NETDEV ifindex I up|down|gone tx_packets N\n"
"Exit status 0; 1: the kernel refused (errno printed); 2: usage or setup;\n"
"3: DEV is not a metaroce device.\n";

static int usage(FILE *f, int code)
{
	fputs(usage_text, f);
	return code;
}

int main(int argc, char **argv)
{
	struct metaroce_plane_info pl[METAROCE_MAX_PLANES];
	unsigned int ifindex[METAROCE_MAX_PLANES];
	struct ibv_device **list, *dev = NULL;
	struct ibv_context *ctx;
	int ndev, n, i;

	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))
		return usage(argc < 2 ? stderr : stdout, argc < 2 ? 2 : 0);
	if (argc - 2 > METAROCE_MAX_PLANES) {
		fprintf(stderr, "metaroce-planes: at most %d planes\n", METAROCE_MAX_PLANES);
		return 2;
	}
	for (i = 2; i < argc; i++) {
		const char *a = argv[i];
		char *end;

		if (a[0] == '#') {
			unsigned long v = strtoul(a + 1, &end, 10);

			if (!a[1] || *end || v > UINT32_MAX) {
				fprintf(stderr, "metaroce-planes: bad ifindex '%s'\n", a);
				return 2;
			}
			ifindex[i - 2] = (unsigned int)v;
		} else if (!(ifindex[i - 2] = if_nametoindex(a))) {
			fprintf(stderr, "metaroce-planes: no netdev '%s'\n", a);
			return 2;
		}
	}
	list = ibv_get_device_list(&ndev);
	if (!list) {
		perror("metaroce-planes: ibv_get_device_list");
		return 2;
	}
	for (i = 0; i < ndev; i++)
		if (!strcmp(ibv_get_device_name(list[i]), argv[1]))
			dev = list[i];
	if (!dev) {
		fprintf(stderr, "metaroce-planes: no RDMA device '%s'\n", argv[1]);
		return 2;
	}
	ctx = ibv_open_device(dev);
	if (!ctx) {
		perror("metaroce-planes: ibv_open_device");
		return 2;
	}
	if (argc > 2 && metaroce_dv_set_planes(ctx, ifindex, argc - 2)) {
		int err = errno;

		fprintf(stderr, "metaroce-planes: set planes of %s: %s\n", argv[1], strerror(err));
		return err == EOPNOTSUPP ? 3 : 1;
	}
	n = metaroce_dv_query_planes(ctx, pl, METAROCE_MAX_PLANES);
	if (n < 0) {
		int err = errno;

		fprintf(stderr, "metaroce-planes: query planes of %s: %s\n", argv[1], strerror(err));
		return err == EOPNOTSUPP ? 3 : 1;
	}
	for (i = 0; i < n && i < METAROCE_MAX_PLANES; i++) {
		char name[IF_NAMESIZE] = "?";

		if_indextoname(pl[i].ifindex, name);
		printf("plane %d: %s ifindex %u %s tx_packets %" PRIu64 "\n", i, name, pl[i].ifindex,
		       pl[i].flags & METAROCE_PLANE_GONE ? "gone" :
		       pl[i].flags & METAROCE_PLANE_UP ? "up" : "down",
		       (uint64_t)pl[i].tx_packets);
	}
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return 0;
}
