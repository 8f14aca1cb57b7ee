-- SPDX-License-Identifier: GPL-2.0
--
-- Wireshark dissector for the MetaRoCE transport: RDMA over UDP/IP, wire
-- version 6. The normative wire format is Documentation/transport.rst; the
-- reference encoder/decoder is rust/proto/src/wire.rs. Documentation of this
-- dissector (fields, expert infos, conversations): Documentation/wireshark.rst.
--
--   tshark -X lua_script:tools/wireshark/metaroce.lua -r capture.pcap
--   cp tools/wireshark/metaroce.lua ~/.local/lib/wireshark/plugins/
--
-- Registered on UDP port 4792 (preference "metaroce.udp_port") and as a
-- heuristic dissector on UDP ("metaroce_udp", for other ports; strict: the
-- version, type and length must be consistent).
--
-- Every datagram the receiver would drop for a reason it can tell from the
-- datagram alone gets an expert info named after the drop reason
-- (metaroce.expert.<reason>, group Malformed, severity Error) and the
-- generated field metaroce.drop names the reason the receiver counts: the
-- first check that fails, in the order of rust/proto/src/wire.rs.
-- Well-formed datagrams carry no expert info.

local VERSION = 6
local DEFAULT_PORT = 4792
local COMMON_LEN = 20
local DATA_LEN = 48
local RETH_LEN = 16
local IMM_LEN = 4
local ACK_LEN = 72
local MAX_ACK_BUNDLE = 16
local PROBE_LEN = 24
local DATAGRAM_LEN = 36
local SACK_OFFSET = 40
local SACK_BITS = 256
-- Paths a receiving connection accepts DATA and PROBE on (the kernel's
-- capacity; Documentation/transport.rst, "Path index").
local MAX_PATHS = 64

-- Lua 5.2 (Wireshark <= 4.2) has bit32; later Wireshark versions keep the
-- "bit" library.
local band = (bit32 and bit32.band) or bit.band
local bor = (bit32 and bit32.bor) or bit.bor
local bnot = (bit32 and bit32.bnot) or bit.bnot
local bxor = (bit32 and bit32.bxor) or bit.bxor

local T_DATA, T_ACK, T_PROBE, T_DATAGRAM = 1, 2, 3, 4
-- The type byte: the type in bits 0-6; bit 7 (SHARED) set iff the sending
-- connection is shared by several QP pairs (DATA, ACK, PROBE; a DATAGRAM
-- never has it).
local TYPE_MASK, TYPE_SHARED = 0x7f, 0x80
local type_names = {
    [T_DATA] = "DATA",
    [T_ACK] = "ACK",
    [T_PROBE] = "PROBE",
    [T_DATAGRAM] = "DATAGRAM",
}

local op_names = {
    [0] = "SEND",
    [1] = "SEND_IMM",
    [2] = "WRITE",
    [3] = "WRITE_IMM",
    [4] = "READ_REQ",
    [5] = "READ_RESP",
    [6] = "ATOMIC_CS",
    [7] = "ATOMIC_FA",
    [8] = "ATOMIC_RESP",
    [9] = "SEND_INV",
    [10] = "ATOMIC_WRITE",
}
-- Ops whose every packet carries a RETH, and ops whose last packet carries IMM.
local op_needs_reth = { [2] = true, [3] = true, [4] = true, [6] = true, [7] = true, [10] = true }
local op_has_imm = { [1] = true, [3] = true, [9] = true }

-- DATA flags (byte 23).
local DF_FIRST, DF_LAST, DF_RETH, DF_IMM = 0x01, 0x02, 0x04, 0x08
local DF_RETX, DF_ACKREQ, DF_SE = 0x10, 0x20, 0x40
local DF_KNOWN = 0x7f
local data_flag_names = {
    { DF_FIRST, "FIRST" }, { DF_LAST, "LAST" }, { DF_RETH, "RETH" }, { DF_IMM, "IMM" },
    { DF_RETX, "RETX" }, { DF_ACKREQ, "ACKREQ" }, { DF_SE, "SE" },
}
-- ACK flags (byte 32).
local AF_RNR, AF_NAK, AF_INV, AF_MSG, AF_CLOSED = 0x01, 0x02, 0x04, 0x08, 0x10
local ack_flag_names = { { AF_RNR, "RNR" }, { AF_NAK, "NAK" }, { AF_INV, "INV" }, { AF_MSG, "MSG" },
    { AF_CLOSED, "CLOSED" } }
-- DATAGRAM flags (byte 28).
local GF_IMM, GF_SE = 0x08, 0x40
local dgram_flag_names = { { GF_IMM, "IMM" }, { GF_SE, "SE" } }

-- IBTA 9.7.5.2.8 table 45: RNR NAK timer codes.
local rnr_timer_names = {
    [0] = "655.36 ms", "0.01 ms", "0.02 ms", "0.03 ms", "0.04 ms", "0.06 ms", "0.08 ms",
    "0.12 ms", "0.16 ms", "0.24 ms", "0.32 ms", "0.48 ms", "0.64 ms", "0.96 ms", "1.28 ms",
    "1.92 ms", "2.56 ms", "3.84 ms", "5.12 ms", "7.68 ms", "10.24 ms", "15.36 ms",
    "20.48 ms", "30.72 ms", "40.96 ms", "61.44 ms", "81.92 ms", "122.88 ms", "163.84 ms",
    "245.76 ms", "327.68 ms", "491.52 ms",
}

local status_names = { [0] = "served", [1] = "not served" }

local metaroce = Proto("metaroce", "MetaRoCE Transport")

-- Fields ------------------------------------------------------------------

local f = {
    -- Common header (every datagram).
    version = ProtoField.uint8("metaroce.version", "Version", base.DEC),
    type = ProtoField.uint8("metaroce.type", "Type", base.DEC, type_names, TYPE_MASK),
    shared = ProtoField.bool("metaroce.shared", "Shared connection", 8, nil, TYPE_SHARED),
    path = ProtoField.uint8("metaroce.path", "Path index", base.DEC),
    inc = ProtoField.uint16("metaroce.inc", "Incarnation", base.HEX),
    dst_conn = ProtoField.uint24("metaroce.dst_conn", "Destination connection (QPN)", base.HEX),
    psn = ProtoField.uint32("metaroce.psn", "PSN", base.DEC),
    stamp = ProtoField.uint32("metaroce.stamp", "Stamp (ns, low 32 bits)", base.DEC),
    echo = ProtoField.uint32("metaroce.echo", "Echo (stamp of the newest DATA/PROBE)", base.DEC),
    token = ProtoField.uint32("metaroce.token", "Token", base.HEX),

    -- DATA.
    stream = ProtoField.uint16("metaroce.stream", "Stream", base.DEC),
    op = ProtoField.uint8("metaroce.op", "Op", base.DEC, op_names),
    flags = ProtoField.uint8("metaroce.flags", "Flags", base.HEX),
    flags_first = ProtoField.bool("metaroce.flags.first", "FIRST", 8, nil, DF_FIRST),
    flags_last = ProtoField.bool("metaroce.flags.last", "LAST", 8, nil, DF_LAST),
    flags_reth = ProtoField.bool("metaroce.flags.reth", "RETH", 8, nil, DF_RETH),
    flags_imm = ProtoField.bool("metaroce.flags.imm", "IMM", 8, nil, DF_IMM),
    flags_retx = ProtoField.bool("metaroce.flags.retx", "RETX (retransmission)", 8, nil, DF_RETX),
    flags_ackreq = ProtoField.bool("metaroce.flags.ackreq", "ACKREQ (acknowledge at once)", 8, nil, DF_ACKREQ),
    flags_se = ProtoField.bool("metaroce.flags.se", "SE (solicited event)", 8, nil, DF_SE),
    flags_rsvd = ProtoField.uint8("metaroce.flags.reserved", "Reserved", base.HEX, nil, 0x80),
    payload_len = ProtoField.uint16("metaroce.payload_len", "Payload length", base.DEC),
    tag = ProtoField.uint16("metaroce.tag", "Tag", base.DEC),
    status = ProtoField.uint16("metaroce.status", "Response status", base.DEC, status_names),
    floor = ProtoField.uint32("metaroce.floor", "Path floor", base.DEC),
    ssn = ProtoField.uint32("metaroce.ssn", "SSN", base.DEC),
    msn = ProtoField.uint32("metaroce.msn", "MSN", base.DEC),
    offset = ProtoField.uint32("metaroce.offset", "Offset", base.DEC),
    msg_len = ProtoField.uint32("metaroce.msg_len", "Message length", base.DEC),
    reth = ProtoField.none("metaroce.reth", "RETH"),
    reth_va = ProtoField.uint64("metaroce.reth.va", "Virtual address", base.HEX),
    reth_rkey = ProtoField.uint32("metaroce.reth.rkey", "R_Key", base.HEX),
    reth_dma_len = ProtoField.uint32("metaroce.reth.dma_len", "DMA length", base.DEC),
    imm = ProtoField.uint32("metaroce.imm", "Immediate data", base.HEX),
    payload = ProtoField.bytes("metaroce.payload", "Payload"),
    atomic_swap = ProtoField.uint64("metaroce.atomic.swap", "Swap", base.HEX),
    atomic_compare = ProtoField.uint64("metaroce.atomic.compare", "Compare", base.HEX),
    atomic_add = ProtoField.uint64("metaroce.atomic.add", "Add", base.HEX),
    atomic_orig = ProtoField.uint64("metaroce.atomic.orig", "Original value", base.HEX),
    atomic_data = ProtoField.uint64("metaroce.atomic.data", "Data", base.HEX),

    -- ACK.
    cum = ProtoField.uint32("metaroce.cum", "Cumulative PSN (next expected)", base.DEC),
    rate_hint = ProtoField.uint32("metaroce.rate_hint", "Rate hint (1000 B/s; 0: none)", base.DEC),
    ce = ProtoField.uint16("metaroce.ce", "CE-marked packets", base.DEC),
    acked = ProtoField.uint16("metaroce.acked", "Packets received", base.DEC),
    ack_flags = ProtoField.uint8("metaroce.ack_flags", "Flags", base.HEX),
    ack_flags_rnr = ProtoField.bool("metaroce.ack_flags.rnr", "RNR (receiver not ready)", 8, nil, AF_RNR),
    ack_flags_nak = ProtoField.bool("metaroce.ack_flags.nak", "NAK (refused for good)", 8, nil, AF_NAK),
    ack_flags_inv = ProtoField.bool("metaroce.ack_flags.inv", "INV (invalid request)", 8, nil, AF_INV),
    ack_flags_msg = ProtoField.bool("metaroce.ack_flags.msg", "MSG (the NAK names the refused message)", 8, nil, AF_MSG),
    ack_flags_closed = ProtoField.bool("metaroce.ack_flags.closed", "CLOSED (the named stream is closed)", 8, nil, AF_CLOSED),
    ack_flags_rsvd = ProtoField.uint8("metaroce.ack_flags.reserved", "Reserved", base.HEX, nil, 0xe0),
    rnr_timer = ProtoField.uint8("metaroce.rnr_timer", "RNR timer", base.DEC, rnr_timer_names, 0x1f),
    nak_stream = ProtoField.uint16("metaroce.nak_stream", "NAK stream (refused message's)", base.DEC),
    nak_msn = ProtoField.uint32("metaroce.nak_msn", "NAK MSN (refused message's; in the PSN field)", base.DEC),
    rnr_psn = ProtoField.uint32("metaroce.rnr_psn", "RNR/NAK PSN", base.DEC),
    sack = ProtoField.bytes("metaroce.sack", "SACK bitmap"),
    sack_psn = ProtoField.uint32("metaroce.sack.psn", "SACKed PSN", base.DEC),
    sack_count = ProtoField.uint16("metaroce.sack.count", "SACKed PSNs", base.DEC),
    sack_ranges = ProtoField.string("metaroce.sack.ranges", "SACKed"),
    -- An ACK bundle's further ACKs (the first is dissected as a lone ACK).
    bundle = ProtoField.uint8("metaroce.bundle", "ACKs in the datagram", base.DEC),
    -- A DATA riding after the ACKs (Documentation/transport.rst, "ACKs riding on DATA").
    ride_at = ProtoField.uint16("metaroce.ride", "DATA riding at byte", base.DEC),
    ride_type = ProtoField.uint8("metaroce.ride.type", "Riding DATA: type", base.DEC, type_names, TYPE_MASK),
    ride_path = ProtoField.uint8("metaroce.ride.path", "Riding DATA: path", base.DEC),
    ride_inc = ProtoField.uint16("metaroce.ride.inc", "Riding DATA: incarnation", base.HEX),
    ride_dst_conn = ProtoField.uint24("metaroce.ride.dst_conn", "Riding DATA: destination", base.HEX),
    ride_psn = ProtoField.uint32("metaroce.ride.psn", "Riding DATA: PSN", base.DEC),
    ride_stamp = ProtoField.uint32("metaroce.ride.stamp", "Riding DATA: stamp", base.DEC),
    ride_token = ProtoField.uint32("metaroce.ride.token", "Riding DATA: token", base.HEX),
    bundle_path = ProtoField.uint8("metaroce.bundle.path", "Bundled ACK: path", base.DEC),
    bundle_echo = ProtoField.uint32("metaroce.bundle.echo", "Bundled ACK: echo", base.DEC),
    bundle_cum = ProtoField.uint32("metaroce.bundle.cum", "Bundled ACK: cumulative PSN", base.DEC),
    bundle_acked = ProtoField.uint16("metaroce.bundle.acked", "Bundled ACK: packets received", base.DEC),
    bundle_ce = ProtoField.uint16("metaroce.bundle.ce", "Bundled ACK: CE-marked", base.DEC),
    bundle_flags = ProtoField.uint8("metaroce.bundle.flags", "Bundled ACK: flags", base.HEX),
    bundle_sack_count = ProtoField.uint16("metaroce.bundle.sack.count", "Bundled ACK: SACKed PSNs", base.DEC),

    -- DATAGRAM.
    src_qpn = ProtoField.uint32("metaroce.src_qpn", "Source QPN", base.HEX),
    qkey = ProtoField.uint32("metaroce.qkey", "Q_Key", base.HEX),
    dgram_flags = ProtoField.uint8("metaroce.dgram_flags", "Flags", base.HEX),
    dgram_flags_imm = ProtoField.bool("metaroce.dgram_flags.imm", "IMM", 8, nil, GF_IMM),
    dgram_flags_se = ProtoField.bool("metaroce.dgram_flags.se", "SE (solicited event)", 8, nil, GF_SE),
    dgram_flags_rsvd = ProtoField.uint8("metaroce.dgram_flags.reserved", "Reserved", base.HEX, nil, 0xb7),
    dgram_reserved = ProtoField.uint8("metaroce.dgram_reserved", "Reserved", base.HEX),

    -- Generated.
    drop = ProtoField.string("metaroce.drop", "Receiver drops it as"),
    hdr_len = ProtoField.uint16("metaroce.hdr_len", "Header length", base.DEC),
    conn = ProtoField.uint32("metaroce.conn", "Connection", base.DEC),
    conn_key = ProtoField.string("metaroce.conn.key", "Connection endpoints"),
    dir = ProtoField.string("metaroce.dir", "Data direction"),
    pathid = ProtoField.uint32("metaroce.pathid", "Path conversation", base.DEC),
    path_key = ProtoField.string("metaroce.path.key", "Path"),
}
local fields = {}
for _, v in pairs(f) do
    fields[#fields + 1] = v
end
metaroce.fields = fields

-- Expert infos: one per drop reason a single datagram can show
-- (rust/proto/src/wire/drop.rs).
local reasons = {
    truncated = "Shorter than its type's headers",
    bad_version = "Unsupported version",
    unknown_type = "Unknown packet type",
    unknown_op = "Unknown op",
    bad_flags = "Reserved bits/fields non-zero or flags inconsistent",
    length_mismatch = "Length disagrees with the datagram",
    bad_offset = "Offset/length inconsistent with the message",
    bad_path = "Path index beyond any connection's capacity",
    wrong_connection = "An ACK of a bundle for another connection",
}
local ei = {}
local experts = {}
for name, text in pairs(reasons) do
    ei[name] = ProtoExpert.new("metaroce.expert." .. name, text .. " (receiver drops it: " .. name .. ")",
        expert.group.MALFORMED, expert.severity.ERROR)
    experts[#experts + 1] = ei[name]
end
-- A datagram captured only in part (tcpdump -s): not malformed, not decoded past
-- the bytes that were captured.
local ei_snaplen = ProtoExpert.new("metaroce.expert.snaplen",
    "Captured only in part (snapshot length): the rest is not decoded",
    expert.group.UNDECODED, expert.severity.NOTE)
experts[#experts + 1] = ei_snaplen
metaroce.experts = experts

metaroce.prefs.udp_port = Pref.uint("UDP port", DEFAULT_PORT,
    "UDP destination port of MetaRoCE (the module parameter udp_port; default 4792)")

-- Conversations -------------------------------------------------------------
--
-- An endpoint is "address/QPN". Every datagram names its receiver's endpoint
-- (destination address, dst_conn); the sender's QPN is not on the wire
-- except in a DATAGRAM. A token names one data direction: DATA and PROBE
-- carry it from the data sender to the data receiver, ACKs carry it back.
-- Seeing both sides of one token links two endpoints into a connection.
-- Connections are kept in a union-find over endpoints. A one-pass tshark run
-- numbers an endpoint seen before its link on its own (a provisional number);
-- the GUI and `tshark -2` number from the complete first pass.

local st -- per-capture state, reset by init()

local function reset_state()
    st = {
        parent = {},      -- endpoint -> endpoint (union-find)
        members = {},     -- root endpoint -> its connection's endpoints, sorted
        tok_rx = {},      -- direction key -> the data receiver's endpoint
        tok_tx = {},      -- direction key -> the data sender's endpoint
        number = {},      -- provisional connection numbers (first pass), by root
        next_number = 0,
        final = {},       -- connection numbers of the complete pass, by root
        next_final = 0,
        paths = {},       -- path key -> path conversation number
        next_path = 0,
    }
end
reset_state()

function metaroce.init()
    reset_state()
end

local function find(e)
    local p = st.parent[e]
    if p == nil then
        st.parent[e] = e
        st.members[e] = { e }
        return e
    end
    if p == e then
        return e
    end
    local r = find(p)
    st.parent[e] = r
    return r
end

local function union(a, b)
    local ra, rb = find(a), find(b)
    if ra == rb then
        return
    end
    -- The root with a number stays the root.
    if st.number[ra] == nil and st.number[rb] ~= nil then
        ra, rb = rb, ra
    end
    st.parent[rb] = ra
    for _, m in ipairs(st.members[rb]) do
        table.insert(st.members[ra], m)
    end
    table.sort(st.members[ra])
    st.members[rb] = nil
end

-- The endpoints of the connection of endpoint e, as "a <-> b" (sorted), when
-- known; else "? <-> e".
local function conn_key_of(e)
    local members = st.members[find(e)]
    if #members == 1 then
        return "? <-> " .. members[1]
    end
    return table.concat(members, " <-> ")
end

local function conn_number(e, visited)
    local r = find(e)
    if visited then
        if st.final[r] == nil then
            st.next_final = st.next_final + 1
            st.final[r] = st.next_final
        end
        return st.final[r]
    end
    if st.number[r] == nil then
        st.next_number = st.next_number + 1
        st.number[r] = st.next_number
    end
    return st.number[r]
end

local function endpoint(addr, qpn)
    return string.format("%s/0x%06x", tostring(addr), qpn)
end

-- Adds the generated conversation fields for a datagram whose headers parsed.
local function track(tree, pinfo, t, path, dst_conn, token, src_qpn)
    local src, dst = tostring(pinfo.net_src), tostring(pinfo.net_dst)
    local me = endpoint(dst, dst_conn) -- the receiver of this datagram
    local dir, data_src, data_dst
    if t == T_DATAGRAM then
        union(me, endpoint(src, src_qpn))
        dir = string.format("%s -> %s UD", src, dst)
    else
        if t == T_ACK then
            data_src, data_dst = dst, src
        else
            data_src, data_dst = src, dst
        end
        dir = string.format("%s -> %s token 0x%08x", data_src, data_dst, token)
        if not pinfo.visited then
            if t == T_ACK then
                st.tok_tx[dir] = me
            else
                st.tok_rx[dir] = me
            end
            local a, b = st.tok_tx[dir], st.tok_rx[dir]
            if a ~= nil and b ~= nil then
                union(a, b)
            else
                find(me)
            end
        end
    end
    tree:add(f.conn, conn_number(me, pinfo.visited)):set_generated()
    tree:add(f.conn_key, conn_key_of(me)):set_generated()
    tree:add(f.dir, dir):set_generated()
    if t ~= T_DATAGRAM then
        local key = string.format("%s path %d", dir, path)
        local n = st.paths[key]
        if n == nil then
            st.next_path = st.next_path + 1
            n = st.next_path
            st.paths[key] = n
        end
        tree:add(f.pathid, n):set_generated()
        tree:add(f.path_key, key):set_generated()
    end
end

-- Helpers -------------------------------------------------------------------

local function flag_list(v, names)
    local out = {}
    for _, p in ipairs(names) do
        if band(v, p[1]) ~= 0 then
            out[#out + 1] = p[2]
        end
    end
    if #out == 0 then
        return "none"
    end
    return table.concat(out, ",")
end

-- "1-3,5" for a sorted list of numbers.
local function ranges(list)
    local out = {}
    local i = 1
    while i <= #list do
        local j = i
        while j < #list and list[j + 1] == (list[j] + 1) % 4294967296 do
            j = j + 1
        end
        if j == i then
            out[#out + 1] = tostring(list[i])
        else
            out[#out + 1] = list[i] .. "-" .. list[j]
        end
        i = j + 1
    end
    return table.concat(out, ",")
end

-- Dissection ----------------------------------------------------------------

-- Each dissect_* adds its type's fields after the common header and returns
-- the Info column text; `problem(reason, range, text)` records a drop reason.

local function dissect_data(tvb, tree, n, problem)
    if n < DATA_LEN then
        problem("truncated", tvb(0), string.format("DATA of %d bytes: its header is %d", n, DATA_LEN))
        return "DATA (truncated)", nil
    end
    local op = tvb(22, 1):uint()
    local flags = tvb(23, 1):uint()
    local payload_len = tvb(24, 2):uint()
    local offset = tvb(40, 4):uint()
    local msg_len = tvb(44, 4):uint()
    tree:add(f.stream, tvb(20, 2))
    tree:add(f.op, tvb(22, 1))
    local fl = tree:add(f.flags, tvb(23, 1))
    fl:append_text(" (" .. flag_list(flags, data_flag_names) .. ")")
    for _, bf in ipairs({ f.flags_first, f.flags_last, f.flags_reth, f.flags_imm, f.flags_retx,
        f.flags_ackreq, f.flags_se, f.flags_rsvd }) do
        fl:add(bf, tvb(23, 1))
    end
    tree:add(f.payload_len, tvb(24, 2))
    if op == 5 or op == 8 then
        tree:add(f.status, tvb(26, 2))
    end
    tree:add(f.tag, tvb(26, 2))
    tree:add(f.floor, tvb(28, 4))
    tree:add(f.ssn, tvb(32, 4))
    tree:add(f.msn, tvb(36, 4))
    tree:add(f.offset, tvb(40, 4))
    tree:add(f.msg_len, tvb(44, 4))

    -- The checks of decode_data, in its order.
    if op_names[op] == nil then
        problem("unknown_op", tvb(22, 1), string.format("op %d is not 0..10", op))
    end
    if band(flags, bnot(DF_KNOWN)) ~= 0 then
        problem("bad_flags", tvb(23, 1), "flag bit 0x80 set")
    end
    local hl = DATA_LEN
    if band(flags, DF_RETH) ~= 0 then hl = hl + RETH_LEN end
    if band(flags, DF_IMM) ~= 0 then hl = hl + IMM_LEN end
    local info = string.format("DATA s%d PSN %d SSN %d MSN %d %s off %d/%d len %d",
        tvb(20, 2):uint(), tvb(8, 4):uint(), tvb(32, 4):uint(), tvb(36, 4):uint(),
        op_names[op] or ("op " .. op), offset, msg_len, payload_len)
    if flags ~= 0 then info = info .. " [" .. flag_list(flags, data_flag_names) .. "]" end
    if n < hl then
        problem("truncated", tvb(0), string.format("%d bytes: the headers its flags name are %d", n, hl))
        return info, DATA_LEN
    end
    if n - hl ~= payload_len then
        problem("length_mismatch", tvb(24, 2),
            string.format("payload_len %d, but %d bytes follow the %d-byte headers", payload_len, n - hl, hl))
    end
    local pos = DATA_LEN
    if band(flags, DF_RETH) ~= 0 then
        local r = tree:add(f.reth, tvb(pos, RETH_LEN))
        r:add(f.reth_va, tvb(pos, 8))
        r:add(f.reth_rkey, tvb(pos + 8, 4))
        r:add(f.reth_dma_len, tvb(pos + 12, 4))
        pos = pos + RETH_LEN
    end
    if band(flags, DF_IMM) ~= 0 then
        tree:add(f.imm, tvb(pos, 4))
        pos = pos + IMM_LEN
    end
    local end_ = offset + payload_len
    local last = end_ == msg_len
    if end_ > 4294967295 then
        problem("bad_offset", tvb(40, 4), "offset + payload_len overflows 32 bits")
    elseif end_ > msg_len then
        problem("bad_offset", tvb(40, 4),
            string.format("offset %d + payload_len %d is past msg_len %d", offset, payload_len, msg_len))
    end
    if (band(flags, DF_FIRST) ~= 0) ~= (offset == 0) then
        problem("bad_flags", tvb(23, 1), "FIRST must be set iff offset is 0")
    end
    if (band(flags, DF_LAST) ~= 0) ~= last then
        problem("bad_flags", tvb(23, 1), "LAST must be set iff offset + payload_len = msg_len")
    end
    if payload_len == 0 and msg_len ~= 0 then
        problem("bad_offset", tvb(24, 2), "empty packet of a non-empty message")
    end
    if op_names[op] ~= nil then
        if (op_needs_reth[op] == true) ~= (band(flags, DF_RETH) ~= 0) then
            problem("bad_flags", tvb(23, 1), op_needs_reth[op] and (op_names[op] .. " without RETH")
                or ("RETH on " .. op_names[op]))
        end
        if (op_has_imm[op] == true and last) ~= (band(flags, DF_IMM) ~= 0) then
            problem("bad_flags", tvb(23, 1), "IMM must be set iff the op has immediate data and the packet is LAST")
        end
    end
    if band(flags, DF_SE) ~= 0 and not last then
        problem("bad_flags", tvb(23, 1), "SE on a packet that is not LAST")
    end

    -- The payload, as far as it was captured; atomics' operands by name.
    local avail = math.min(payload_len, math.max(0, tvb:len() - pos))
    if payload_len > 0 and avail > 0 and n - hl == payload_len then
        local pr = tvb(pos, avail)
        tree:add(f.payload, pr)
        if offset == 0 and payload_len == msg_len and avail == payload_len then
            if op == 6 and payload_len == 16 then
                tree:add(f.atomic_swap, tvb(pos, 8))
                tree:add(f.atomic_compare, tvb(pos + 8, 8))
            elseif op == 7 and payload_len == 8 then
                tree:add(f.atomic_add, tvb(pos, 8))
            elseif op == 8 and payload_len == 8 then
                tree:add(f.atomic_orig, tvb(pos, 8))
            elseif op == 10 and payload_len == 8 then
                tree:add(f.atomic_data, tvb(pos, 8))
            end
        end
    end
    return info, hl
end

-- A lone ACK's header checks (H7) on the record at the start of `tvb`; whether
-- one failed.
local function ack_flag_checks(tvb, problem)
    local flags = tvb(32, 1):uint()
    local bad = false
    if band(flags, bnot(bor(AF_RNR, AF_NAK, AF_INV, AF_MSG, AF_CLOSED))) ~= 0 then
        bad = true
        problem("bad_flags", tvb(32, 1), "reserved ACK flag bits set")
    end
    if band(flags, bor(AF_INV, AF_MSG)) ~= 0 and band(flags, AF_NAK) == 0 then
        bad = true
        problem("bad_flags", tvb(32, 1), "INV or MSG without NAK")
    end
    if band(flags, AF_CLOSED) ~= 0 and band(flags, bor(AF_NAK, AF_MSG, AF_INV)) ~= bor(AF_NAK, AF_MSG) then
        bad = true
        problem("bad_flags", tvb(32, 1), "CLOSED without NAK and MSG, or with INV")
    end
    if band(flags, AF_MSG) == 0 then
        if tvb(34, 2):uint() ~= 0 then
            bad = true
            problem("bad_flags", tvb(34, 2), "NAK stream (bytes 34-35) not 0 without MSG")
        end
        if tvb(8, 4):uint() ~= 0 then
            bad = true
            problem("bad_flags", tvb(8, 4), "an ACK's PSN must be 0 without MSG")
        end
    end
    return bad
end

-- The further ACKs of a bundle (Documentation/transport.rst, "ACK bundles"):
-- each in turn checked as a lone ACK (a tail shorter than an ACK: its common
-- header's checks, then truncated), then for repeating the first's version,
-- type, incarnation, destination and token (H17). The first check that fails
-- decides, as in rust/proto/src/wire/bundle.rs.
local function dissect_bundle(tvb, tree, n, problem)
    local count = math.floor(n / ACK_LEN)
    if n % ACK_LEN == 0 then
        tree:add(f.bundle, count):set_generated()
    end
    local paths = {}
    for k = 1, math.ceil(n / ACK_LEN) - 1 do
        local o = k * ACK_LEN
        local left = n - o
        if left < COMMON_LEN then
            problem("truncated", tvb(o), string.format("ACK %d of the bundle: %d bytes", k + 1, left))
            break
        end
        local r = tvb(o, math.min(left, ACK_LEN)):tvb()
        if r(0, 1):uint() ~= VERSION then
            problem("bad_version", r(0, 1), string.format("ACK %d: version %d", k + 1, r(0, 1):uint()))
            break
        elseif band(r(1, 1):uint(), TYPE_MASK) ~= T_ACK then
            problem("unknown_type", r(1, 1), string.format("ACK %d: type %d", k + 1, band(r(1, 1):uint(), TYPE_MASK)))
            break
        elseif r(3, 2):uint() == 0 then
            problem("bad_flags", r(3, 2), string.format("ACK %d: incarnation 0", k + 1))
            break
        elseif left < ACK_LEN then
            problem("truncated", tvb(o), string.format("ACK %d of the bundle: %d bytes of %d", k + 1, left, ACK_LEN))
            break
        end
        local st = tree:add(metaroce, tvb(o, ACK_LEN), string.format("ACK %d of %d: path %d", k + 1, count,
            r(2, 1):uint()))
        st:add(f.bundle_path, r(2, 1))
        st:add(f.bundle_echo, r(12, 4))
        st:add(f.bundle_cum, r(20, 4))
        st:add(f.bundle_ce, r(28, 2))
        st:add(f.bundle_acked, r(30, 2))
        st:add(f.bundle_flags, r(32, 1))
        local sacked = 0
        for byte = 0, 31 do
            local b = r(SACK_OFFSET + byte, 1):uint()
            while b ~= 0 do
                sacked = sacked + band(b, 1)
                b = math.floor(b / 2)
            end
        end
        st:add(f.bundle_sack_count, sacked):set_generated()
        paths[#paths + 1] = tostring(r(2, 1):uint())
        if ack_flag_checks(r, problem) then
            break
        end
        if r(0, 2):bytes() ~= tvb(0, 2):bytes() or r(3, 5):bytes() ~= tvb(3, 5):bytes()
            or r(16, 4):bytes() ~= tvb(16, 4):bytes() then
            problem("wrong_connection", tvb(o, ACK_LEN),
                string.format("ACK %d of the bundle: another SHARED bit, incarnation, destination or token", k + 1))
            break
        end
    end
    return string.format(" +%d bundled (p%s)", #paths, table.concat(paths, ",p"))
end

-- Where the DATA riding after an ACK datagram's records starts
-- (Documentation/transport.rst, "ACKs riding on DATA", H18): after the leading
-- 72-byte records typed ACK, if what follows is typed DATA; nil if none rides.
local function ride_at(tvb, n)
    local cut = 0
    while cut <= MAX_ACK_BUNDLE * ACK_LEN and n >= cut + ACK_LEN and tvb:len() >= cut + ACK_LEN
        and band(tvb(cut + 1, 1):uint(), TYPE_MASK) == T_ACK do
        cut = cut + ACK_LEN
    end
    if cut == 0 or n < cut + 2 or tvb:len() < cut + 2
        or band(tvb(cut + 1, 1):uint(), TYPE_MASK) ~= T_DATA then
        return nil
    end
    return cut
end

local function dissect_ack(tvb, tree, n, problem)
    if n < ACK_LEN then
        problem("truncated", tvb(0), string.format("ACK of %d bytes: it has %d", n, ACK_LEN))
        return "ACK (truncated)"
    end
    local cum = tvb(20, 4):uint()
    local flags = tvb(32, 1):uint()
    tree:add(f.cum, tvb(20, 4))
    tree:add(f.rate_hint, tvb(24, 4))
    tree:add(f.ce, tvb(28, 2))
    tree:add(f.acked, tvb(30, 2))
    local fl = tree:add(f.ack_flags, tvb(32, 1))
    fl:append_text(" (" .. flag_list(flags, ack_flag_names) .. ")")
    fl:add(f.ack_flags_rnr, tvb(32, 1))
    fl:add(f.ack_flags_nak, tvb(32, 1))
    fl:add(f.ack_flags_inv, tvb(32, 1))
    fl:add(f.ack_flags_msg, tvb(32, 1))
    fl:add(f.ack_flags_closed, tvb(32, 1))
    fl:add(f.ack_flags_rsvd, tvb(32, 1))
    tree:add(f.rnr_timer, tvb(33, 1))
    tree:add(f.nak_stream, tvb(34, 2))
    tree:add(f.nak_msn, tvb(8, 4))
    tree:add(f.rnr_psn, tvb(36, 4))
    ack_flag_checks(tvb, problem)
    -- A bundle: its length (H6), after the first ACK's own checks, then its
    -- further ACKs.
    local extra = ""
    if n > MAX_ACK_BUNDLE * ACK_LEN then
        problem("length_mismatch", tvb(ACK_LEN), string.format("ACK datagram of %d bytes: at most %d ACKs",
            n, MAX_ACK_BUNDLE))
    elseif n > ACK_LEN then
        extra = dissect_bundle(tvb, tree, n, problem)
    end

    -- SACK: bit i (byte i/8, bit i%8, LSB first) stands for PSN cum + 1 + i.
    local sk = tree:add(f.sack, tvb(SACK_OFFSET, 32))
    local psns = {}
    for byte = 0, 31 do
        local b = tvb(SACK_OFFSET + byte, 1):uint()
        if b ~= 0 then
            for bit_ = 0, 7 do
                if band(b, 2 ^ bit_) ~= 0 then
                    local psn = (cum + 1 + byte * 8 + bit_) % 4294967296
                    psns[#psns + 1] = psn
                    sk:add(f.sack_psn, tvb(SACK_OFFSET + byte, 1), psn)
                end
            end
        end
    end
    sk:append_text(string.format(" (%d PSNs)", #psns))
    sk:add(f.sack_count, #psns):set_generated()
    local rs = ranges(psns)
    if #psns > 0 then
        sk:add(f.sack_ranges, rs):set_generated()
    end

    local info = string.format("ACK cum %d acked %d", cum, tvb(30, 2):uint())
    if #psns > 0 then info = info .. " SACK " .. rs end
    if tvb(28, 2):uint() > 0 then info = info .. " CE " .. tvb(28, 2):uint() end
    if flags ~= 0 then
        info = info .. string.format(" [%s PSN %d", flag_list(flags, ack_flag_names), tvb(36, 4):uint())
        if band(flags, AF_MSG) ~= 0 then
            info = info .. string.format(" s%d MSN %d", tvb(34, 2):uint(), tvb(8, 4):uint())
        end
        info = info .. "]"
    end
    return info .. extra
end

local function dissect_probe(tvb, tree, n, problem)
    if n < PROBE_LEN then
        problem("truncated", tvb(0), string.format("PROBE of %d bytes: it has %d", n, PROBE_LEN))
        return "PROBE (truncated)"
    end
    if n ~= PROBE_LEN then
        problem("length_mismatch", tvb(PROBE_LEN), string.format("PROBE of %d bytes: it has %d", n, PROBE_LEN))
    end
    tree:add(f.floor, tvb(20, 4))
    return string.format("PROBE next PSN %d floor %d", tvb(8, 4):uint(), tvb(20, 4):uint())
end

local function dissect_datagram(tvb, tree, n, problem)
    if n < DATAGRAM_LEN then
        problem("truncated", tvb(0), string.format("DATAGRAM of %d bytes: its header is %d", n, DATAGRAM_LEN))
        return "DATAGRAM (truncated)", nil
    end
    local flags = tvb(28, 1):uint()
    local payload_len = tvb(30, 2):uint()
    tree:add(f.src_qpn, tvb(20, 4))
    tree:add(f.qkey, tvb(24, 4))
    local fl = tree:add(f.dgram_flags, tvb(28, 1))
    fl:append_text(" (" .. flag_list(flags, dgram_flag_names) .. ")")
    fl:add(f.dgram_flags_imm, tvb(28, 1))
    fl:add(f.dgram_flags_se, tvb(28, 1))
    fl:add(f.dgram_flags_rsvd, tvb(28, 1))
    tree:add(f.dgram_reserved, tvb(29, 1))
    tree:add(f.payload_len, tvb(30, 2))
    tree:add(f.imm, tvb(32, 4))
    if band(tvb(1, 1):uint(), TYPE_SHARED) ~= 0 then
        problem("bad_flags", tvb(1, 1), "a DATAGRAM's SHARED bit (type 0x80) must be 0")
    end
    if tvb(2, 1):uint() ~= 0 then problem("bad_flags", tvb(2, 1), "a DATAGRAM's path must be 0") end
    if tvb(3, 2):uint() ~= 0 then problem("bad_flags", tvb(3, 2), "a DATAGRAM's incarnation must be 0") end
    if tvb(8, 4):uint() ~= 0 then problem("bad_flags", tvb(8, 4), "a DATAGRAM's PSN must be 0") end
    if tvb(16, 4):uint() ~= 0 then problem("bad_flags", tvb(16, 4), "a DATAGRAM's token must be 0") end
    if band(flags, bnot(bor(GF_IMM, GF_SE))) ~= 0 then
        problem("bad_flags", tvb(28, 1), "reserved DATAGRAM flag bits set")
    end
    if tvb(29, 1):uint() ~= 0 then problem("bad_flags", tvb(29, 1), "reserved byte 29 not 0") end
    if n - DATAGRAM_LEN ~= payload_len then
        problem("length_mismatch", tvb(30, 2),
            string.format("payload_len %d, but %d bytes follow the header", payload_len, n - DATAGRAM_LEN))
    elseif payload_len > 0 and tvb:len() > DATAGRAM_LEN then
        tree:add(f.payload, tvb(DATAGRAM_LEN, math.min(payload_len, tvb:len() - DATAGRAM_LEN)))
    end
    local info = string.format("DATAGRAM src QPN 0x%06x len %d", tvb(20, 4):uint(), payload_len)
    if flags ~= 0 then info = info .. " [" .. flag_list(flags, dgram_flag_names) .. "]" end
    return info, DATAGRAM_LEN
end

local function dissect(tvb, pinfo, tree)
    local n = tvb:reported_len()
    pinfo.cols.protocol = "MetaRoCE"
    local root = tree:add(metaroce, tvb())
    local problems = {}
    local function problem(reason, range, text)
        problems[#problems + 1] = { reason = reason, range = range, text = text }
    end
    local function finish(info)
        for _, p in ipairs(problems) do
            root:add_tvb_expert_info(ei[p.reason], p.range, p.text .. " (" .. p.reason .. ")")
        end
        if #problems > 0 then
            root:add(f.drop, problems[1].reason):set_generated()
            info = info .. " [malformed: " .. problems[1].reason .. "]"
            root:append_text(", malformed: " .. problems[1].reason)
        end
        pinfo.cols.info:set(info)
        return n
    end

    if n < COMMON_LEN then
        problem("truncated", tvb(0), string.format("%d bytes: the common header is %d", n, COMMON_LEN))
        return finish("MetaRoCE (truncated)")
    end
    local function cut_short(info)
        root:add_proto_expert_info(ei_snaplen,
            string.format("%d of %d bytes captured", tvb:len(), n))
        return finish(info .. " [cut short by the snapshot length]")
    end
    if tvb:len() < COMMON_LEN then
        return cut_short("MetaRoCE")
    end
    local version = tvb(0, 1):uint()
    local t = band(tvb(1, 1):uint(), TYPE_MASK)
    local shared = band(tvb(1, 1):uint(), TYPE_SHARED) ~= 0
    local path = tvb(2, 1):uint()
    local dst_conn = tvb(5, 3):uint()
    local token = tvb(16, 4):uint()
    tree = root
    tree:add(f.version, tvb(0, 1))
    tree:add(f.type, tvb(1, 1))
    tree:add(f.shared, tvb(1, 1))
    tree:add(f.path, tvb(2, 1))
    tree:add(f.inc, tvb(3, 2))
    tree:add(f.dst_conn, tvb(5, 3))
    tree:add(f.psn, tvb(8, 4))
    if t == T_ACK then
        tree:add(f.echo, tvb(12, 4))
    else
        tree:add(f.stamp, tvb(12, 4))
    end
    tree:add(f.token, tvb(16, 4))
    if version ~= VERSION then
        problem("bad_version", tvb(0, 1), string.format("version %d, not %d", version, VERSION))
        return finish(string.format("MetaRoCE version %d", version))
    end
    -- DATA, ACK, PROBE: incarnation 0 is no connection's (the first check after
    -- the type, before any length).
    if (t == T_DATA or t == T_ACK or t == T_PROBE) and tvb(3, 2):uint() == 0 then
        problem("bad_flags", tvb(3, 2), "incarnation 0")
    end

    local body
    if t == T_DATA then
        body = function() return dissect_data(tvb, tree, n, problem) end
    elseif t == T_ACK then
        body = function()
            local cut = ride_at(tvb, n)
            if cut == nil then
                return dissect_ack(tvb, tree, n, problem), ACK_LEN
            end
            -- The ACKs, then the DATA riding after them, in a subtree of its own
            -- with its own common header (it names its own path, PSN and token).
            local info = dissect_ack(tvb, tree, cut, problem)
            local r = tvb(cut):tvb()
            local rn = n - cut
            local st = tree:add(metaroce, tvb(cut), string.format("DATA riding after %d ACK(s)", cut / ACK_LEN))
            st:add(f.ride_at, cut):set_generated()
            st:add(f.ride_type, r(1, 1))
            st:add(f.ride_path, r(2, 1))
            st:add(f.ride_inc, r(3, 2))
            st:add(f.ride_dst_conn, r(5, 3))
            st:add(f.ride_psn, r(8, 4))
            st:add(f.ride_stamp, r(12, 4))
            st:add(f.ride_token, r(16, 4))
            if band(bxor(r(1, 1):uint(), tvb(1, 1):uint()), TYPE_SHARED) ~= 0 then
                problem("wrong_connection", r(1, 1), "a DATA riding on ACKs of the other SHARED bit")
            elseif rn >= COMMON_LEN and r(5, 3):uint() ~= tvb(5, 3):uint() then
                problem("wrong_connection", r(5, 3), "a DATA riding on ACKs to another destination")
            elseif rn >= COMMON_LEN and r(0, 1):uint() ~= VERSION then
                problem("bad_version", r(0, 1), string.format("riding DATA: version %d", r(0, 1):uint()))
            elseif rn >= COMMON_LEN and r(3, 2):uint() == 0 then
                problem("bad_flags", r(3, 2), "riding DATA: incarnation 0")
            end
            local dinfo = dissect_data(r, st, rn, problem)
            if rn >= COMMON_LEN and r(2, 1):uint() >= MAX_PATHS then
                problem("bad_path", r(2, 1), string.format("riding DATA: path %d", r(2, 1):uint()))
            end
            return string.format("%s + p%d %s", info, r(2, 1):uint(), dinfo), ACK_LEN
        end
    elseif t == T_PROBE then
        body = function() return dissect_probe(tvb, tree, n, problem), PROBE_LEN end
    elseif t == T_DATAGRAM then
        body = function() return dissect_datagram(tvb, tree, n, problem) end
    else
        problem("unknown_type", tvb(1, 1), string.format("type %d is not 1..4", t))
        return finish(string.format("MetaRoCE type %d", t))
    end
    -- A range past the captured bytes raises an error: with a snapshot length
    -- shorter than the datagram that is the capture's limit, not a malformation.
    local ok, info, hl = pcall(body)
    if not ok then
        if tvb:len() < n then
            return cut_short(string.format("0x%06x p%d type %d", dst_conn, path, t))
        end
        error(info)
    end
    if hl ~= nil then
        tree:add(f.hdr_len, math.min(hl, n)):set_generated()
    end
    -- After header decoding, the receiver's first check that one datagram
    -- decides: DATA and PROBE on a path beyond any connection's capacity.
    if (t == T_DATA or t == T_PROBE) and path >= MAX_PATHS then
        problem("bad_path", tvb(2, 1), string.format("path %d: connections have at most %d", path, MAX_PATHS))
    end
    local src_qpn = (t == T_DATAGRAM and n >= DATAGRAM_LEN and tvb:len() >= DATAGRAM_LEN)
        and tvb(20, 4):uint() or nil
    if t ~= T_DATAGRAM or src_qpn ~= nil then
        track(tree, pinfo, t, path, dst_conn, token, src_qpn)
    end
    if t ~= T_DATAGRAM then
        info = string.format("p%d %s", path, info)
        -- The connection's mode (a DATAGRAM's bit is a bad_flags above).
        if shared then
            info = "shared " .. info
        end
    end
    return finish(string.format("0x%06x %s", dst_conn, info))
end

function metaroce.dissector(tvb, pinfo, tree)
    return dissect(tvb, pinfo, tree)
end

-- Heuristic: only datagrams the receiver would accept as far as their
-- headers go (version, type, incarnation, lengths).
local function heuristic(tvb, pinfo, tree)
    local n = tvb:reported_len()
    if n < COMMON_LEN or tvb:len() < COMMON_LEN then return false end
    if tvb(0, 1):uint() ~= VERSION then return false end
    local t = band(tvb(1, 1):uint(), TYPE_MASK)
    local shared = band(tvb(1, 1):uint(), TYPE_SHARED) ~= 0
    -- A connection's datagrams carry a nonzero incarnation, a DATAGRAM zero
    -- (and never the SHARED bit).
    if (tvb(3, 2):uint() == 0) ~= (t == T_DATAGRAM) then return false end
    if shared and t == T_DATAGRAM then return false end
    if t == T_DATA then
        if n < DATA_LEN or tvb:len() < DATA_LEN then return false end
        local flags = tvb(23, 1):uint()
        if tvb(22, 1):uint() > 10 or band(flags, bnot(DF_KNOWN)) ~= 0 then return false end
        local hl = DATA_LEN
        if band(flags, DF_RETH) ~= 0 then hl = hl + RETH_LEN end
        if band(flags, DF_IMM) ~= 0 then hl = hl + IMM_LEN end
        if n ~= hl + tvb(24, 2):uint() then return false end
    elseif t == T_ACK then
        -- The PSN field is 0 unless a NAK names its message (MSG: it is nak_msn).
        -- A DATA may ride after the ACKs: its own length rule.
        local cut = ride_at(tvb, n) or n
        if cut % ACK_LEN ~= 0 or cut > MAX_ACK_BUNDLE * ACK_LEN
            or (band(tvb(32, 1):uint(), AF_MSG) == 0 and tvb(8, 4):uint() ~= 0) then
            return false
        end
        if cut < n then
            if n < cut + DATA_LEN or tvb:len() < cut + DATA_LEN then return false end
            local flags = tvb(cut + 23, 1):uint()
            local hl = DATA_LEN
            if band(flags, DF_RETH) ~= 0 then hl = hl + RETH_LEN end
            if band(flags, DF_IMM) ~= 0 then hl = hl + IMM_LEN end
            if n ~= cut + hl + tvb(cut + 24, 2):uint() then return false end
        end
    elseif t == T_PROBE then
        if n ~= PROBE_LEN then return false end
    elseif t == T_DATAGRAM then
        if n < DATAGRAM_LEN or tvb:len() < DATAGRAM_LEN then return false end
        if n ~= DATAGRAM_LEN + tvb(30, 2):uint() or tvb(16, 4):uint() ~= 0 then return false end
    else
        return false
    end
    dissect(tvb, pinfo, tree)
    return true
end

-- Registration ----------------------------------------------------------------

local udp_port_table = DissectorTable.get("udp.port")
local registered_port = metaroce.prefs.udp_port
udp_port_table:add(registered_port, metaroce)
metaroce:register_heuristic("udp", heuristic)

function metaroce.prefs_changed()
    if registered_port ~= metaroce.prefs.udp_port then
        if registered_port ~= 0 then
            udp_port_table:remove(registered_port, metaroce)
        end
        registered_port = metaroce.prefs.udp_port
        if registered_port ~= 0 then
            udp_port_table:add(registered_port, metaroce)
        end
    end
end
