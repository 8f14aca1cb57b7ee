/* SPDX-License-Identifier: GPL-2.0 */
/*
 * metaroce trace events (TRACE_SYSTEM metaroce): /sys/kernel/tracing/events/
 * metaroce/, `trace-cmd record -e metaroce`, `perf trace -e 'metaroce:*'`,
 * bpftrace `tracepoint:metaroce:*`. Documentation/observability.rst lists
 * them with their fields.
 *
 * Instantiated once, in the C shim (rust/ffi/helpers.c, CREATE_TRACE_POINTS);
 * Rust reaches them through the shim's metaroce_trace_*() wrappers
 * (include/metaroce.h, rust/ffi/trace.rs). Not seen by bindgen.
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM metaroce

#if !defined(METAROCE_TRACE_H) || defined(TRACE_HEADER_MULTI_READ)
#define METAROCE_TRACE_H

#include <linux/tracepoint.h>
#include "metaroce.h"

/* Packet types (byte 1 of the MetaRoCE common header). */
#define metaroce_show_type(t)						\
	__print_symbolic(t, { 1, "DATA" }, { 2, "ACK" }, { 3, "PROBE" },	\
			 { 4, "DATAGRAM" })

/* Sender path states (rust/proto/src/path.rs, PathState). */
#define metaroce_show_path_state(s)					\
	__print_symbolic(s, { 0, "unused" }, { 1, "active" },		\
			 { 2, "probing" })

/* One datagram: sent (tx) or received (rx). */
DECLARE_EVENT_CLASS(metaroce_pkt_class,
	TP_PROTO(const struct metaroce_trace_pkt *p),
	TP_ARGS(p),
	TP_STRUCT__entry(
		__field(u32, qpn)
		__field(u32, psn)
		__field(u32, ssn)
		__field(u32, len)
		__field(u16, sport)
		__field(u16, stream)
		__field(u8, path)
		__field(u8, type)
		__field(u8, flags)
		__field(u8, retx)
	),
	TP_fast_assign(
		__entry->qpn = p->qpn;
		__entry->psn = p->psn;
		__entry->ssn = p->ssn;
		__entry->len = p->len;
		__entry->sport = p->sport;
		__entry->stream = p->stream;
		__entry->path = p->path;
		__entry->type = p->type;
		__entry->flags = p->flags;
		__entry->retx = p->retx;
	),
	TP_printk("qpn=%u path=%u sport=%u type=%s psn=%u ssn=%u stream=%u flags=0x%02x len=%u retx=%u",
		  __entry->qpn, __entry->path, __entry->sport,
		  metaroce_show_type(__entry->type), __entry->psn,
		  __entry->ssn, __entry->stream, __entry->flags,
		  __entry->len, __entry->retx)
);

/* A datagram a QP sent (DATA, ACK, PROBE, DATAGRAM). */
DEFINE_EVENT(metaroce_pkt_class, tx,
	TP_PROTO(const struct metaroce_trace_pkt *p),
	TP_ARGS(p)
);

/* A datagram for a QP, accepted or dropped (drop: the rx_drop_* reason). */
TRACE_EVENT(rx,
	TP_PROTO(const struct metaroce_trace_pkt *p, const char *drop),
	TP_ARGS(p, drop),
	TP_STRUCT__entry(
		__field(u32, qpn)
		__field(u32, psn)
		__field(u32, ssn)
		__field(u32, len)
		__field(u16, sport)
		__field(u16, stream)
		__field(u8, path)
		__field(u8, type)
		__field(u8, flags)
		__string(drop, drop ? drop : "-")
	),
	TP_fast_assign(
		__entry->qpn = p->qpn;
		__entry->psn = p->psn;
		__entry->ssn = p->ssn;
		__entry->len = p->len;
		__entry->sport = p->sport;
		__entry->stream = p->stream;
		__entry->path = p->path;
		__entry->type = p->type;
		__entry->flags = p->flags;
		__assign_str(drop);
	),
	TP_printk("qpn=%u path=%u sport=%u type=%s psn=%u ssn=%u stream=%u flags=0x%02x len=%u drop=%s",
		  __entry->qpn, __entry->path, __entry->sport,
		  metaroce_show_type(__entry->type), __entry->psn,
		  __entry->ssn, __entry->stream, __entry->flags,
		  __entry->len, __get_str(drop))
);

/* A data packet declared lost: by a SACK gap or by its path's timeout. */
TRACE_EVENT(loss,
	TP_PROTO(u32 qpn, u8 path, u32 psn, u8 cause),
	TP_ARGS(qpn, path, psn, cause),
	TP_STRUCT__entry(
		__field(u32, qpn)
		__field(u32, psn)
		__field(u8, path)
		__field(u8, cause)
	),
	TP_fast_assign(
		__entry->qpn = qpn;
		__entry->psn = psn;
		__entry->path = path;
		__entry->cause = cause;
	),
	TP_printk("qpn=%u path=%u psn=%u cause=%s", __entry->qpn,
		  __entry->path, __entry->psn,
		  __print_symbolic(__entry->cause, { 0, "sack" }, { 1, "rto" },
				   { 2, "tlp" }, { 3, "retired" }))
);

/* A lost data packet sent again: new path and PSN, same stream and SSN. */
TRACE_EVENT(retransmit,
	TP_PROTO(u32 qpn, u8 path, u32 psn, u8 from_path, u16 stream, u32 ssn),
	TP_ARGS(qpn, path, psn, from_path, stream, ssn),
	TP_STRUCT__entry(
		__field(u32, qpn)
		__field(u32, psn)
		__field(u32, ssn)
		__field(u16, stream)
		__field(u8, path)
		__field(u8, from_path)
	),
	TP_fast_assign(
		__entry->qpn = qpn;
		__entry->psn = psn;
		__entry->ssn = ssn;
		__entry->stream = stream;
		__entry->path = path;
		__entry->from_path = from_path;
	),
	TP_printk("qpn=%u path=%u psn=%u from_path=%u stream=%u ssn=%u",
		  __entry->qpn, __entry->path, __entry->psn,
		  __entry->from_path, __entry->stream, __entry->ssn)
);

/* A path changed state, or moved to a new UDP source port. */
TRACE_EVENT(path_state,
	TP_PROTO(u32 qpn, u8 path, u8 old_state, u8 new_state, u16 old_sport,
		 u16 new_sport),
	TP_ARGS(qpn, path, old_state, new_state, old_sport, new_sport),
	TP_STRUCT__entry(
		__field(u32, qpn)
		__field(u16, old_sport)
		__field(u16, new_sport)
		__field(u8, path)
		__field(u8, old_state)
		__field(u8, new_state)
	),
	TP_fast_assign(
		__entry->qpn = qpn;
		__entry->old_sport = old_sport;
		__entry->new_sport = new_sport;
		__entry->path = path;
		__entry->old_state = old_state;
		__entry->new_state = new_state;
	),
	TP_printk("qpn=%u path=%u %s->%s sport=%u->%u", __entry->qpn,
		  __entry->path, metaroce_show_path_state(__entry->old_state),
		  metaroce_show_path_state(__entry->new_state),
		  __entry->old_sport, __entry->new_sport)
);

/* A path's retransmission timer expired. */
TRACE_EVENT(rto,
	TP_PROTO(u32 qpn, u8 path, u64 rto_ns, u8 backoff, u8 timeouts),
	TP_ARGS(qpn, path, rto_ns, backoff, timeouts),
	TP_STRUCT__entry(
		__field(u64, rto_ns)
		__field(u32, qpn)
		__field(u8, path)
		__field(u8, backoff)
		__field(u8, timeouts)
	),
	TP_fast_assign(
		__entry->rto_ns = rto_ns;
		__entry->qpn = qpn;
		__entry->path = path;
		__entry->backoff = backoff;
		__entry->timeouts = timeouts;
	),
	TP_printk("qpn=%u path=%u rto_ns=%llu backoff=%u timeouts=%u",
		  __entry->qpn, __entry->path, __entry->rto_ns,
		  __entry->backoff, __entry->timeouts)
);

/*
 * A rate hint changed (1000 bytes/s units, 0 none): side local is the hint
 * this receiver returns on its ACKs, peer the one the peer returns.
 */
TRACE_EVENT(rate_hint,
	TP_PROTO(u32 qpn, u8 side, u32 old_hint, u32 new_hint),
	TP_ARGS(qpn, side, old_hint, new_hint),
	TP_STRUCT__entry(
		__field(u32, qpn)
		__field(u32, old_hint)
		__field(u32, new_hint)
		__field(u8, side)
	),
	TP_fast_assign(
		__entry->qpn = qpn;
		__entry->old_hint = old_hint;
		__entry->new_hint = new_hint;
		__entry->side = side;
	),
	TP_printk("qpn=%u side=%s hint=%u->%u", __entry->qpn,
		  __print_symbolic(__entry->side, { 0, "local" }, { 1, "peer" }),
		  __entry->old_hint, __entry->new_hint)
);

#endif /* METAROCE_TRACE_H */

/* Out of tree: define_trace.h finds this file through -I$(src)/include. */
#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH .
#undef TRACE_INCLUDE_FILE
#define TRACE_INCLUDE_FILE metaroce_trace
#include <trace/define_trace.h>
