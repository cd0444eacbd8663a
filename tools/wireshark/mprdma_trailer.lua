-- Wireshark / tshark dissector for the per-packet trailer of mprdma-vp's
-- MP-RDMA and IRN connections (vp/net/mp_ext.h is the one definition of the
-- layout; this file only reads it).
--
--   tshark -X lua_script:tools/wireshark/mprdma_trailer.lua -r link.pcap \
--          -o mprdma_trailer.mode:all -V
--   wireshark -X lua_script:tools/wireshark/mprdma_trailer.lua link.pcap
--   (or copy this file into ~/.local/lib/wireshark/plugins/)
--
-- The trailer sits at the end of the RoCEv2 payload area, before the pad
-- and the ICRC, so Wireshark's InfiniBand dissector shows it as the last
-- payload bytes; this post-dissector decodes it in its own tree:
--   data trailer (SEND and RDMA WRITE; on MP-RDMA also READ and atomic
--     requests and their responses, 8 bytes): MSN (24; a response: its
--     request's PSN) | packet index in the message (24) | flags (8: ReTx,
--     synchronise, tail) | reserved (8)
--   ACK trailer (ACKNOWLEDGE, 12 bytes): echoed virtual path (16) | SACK
--     PSN (24) | AACK PSN (24) | flags (8: ECE, ReTx, NACK, READ: an IRN
--     Read (N)ACK from requester to responder) | reserved (24)
-- Whether a packet has a trailer is a property of its connection (its
-- transport), which a capture does not record. Preference "mode":
--   acks (default)  ACKs whose payload area is exactly 12 bytes (a RoCEv2
--                   ACK has none): never a false positive
--   all             also the last 8 payload bytes of every SEND, WRITE,
--                   READ and atomic request and response (a capture of
--                   MP-RDMA connections only)
--   irn             also those of every SEND and of the tail of a WRITE
--                   with immediate: IRN's other WRITE packets carry no
--                   trailer, only a RETH each (a capture of IRN only)
--   off
-- Captures keep 128 bytes per frame by default (fabric.link.pcap_snaplen): the
-- data trailer of a longer packet is then not in the file (an expert note
-- says so); set it to 0 to keep it.

local proto = Proto("mprdma_trailer", "mprdma-vp MP-RDMA/IRN trailer")

local pf = {
    msn = ProtoField.uint24("mprdma_trailer.msn", "Message sequence number", base.DEC),
    ipsn = ProtoField.uint24("mprdma_trailer.ipsn", "Packet index in message", base.DEC),
    data_flags = ProtoField.uint8("mprdma_trailer.flags", "Flags", base.HEX),
    retx = ProtoField.bool("mprdma_trailer.retx", "ReTx", 8, nil, 0x01),
    sync = ProtoField.bool("mprdma_trailer.sync", "Synchronise", 8, nil, 0x02),
    tail = ProtoField.bool("mprdma_trailer.tail", "Tail of message", 8, nil, 0x04),
    echo_vp = ProtoField.uint16("mprdma_trailer.echo_vp",
                                "Echoed virtual path (UDP source port)", base.HEX),
    sack = ProtoField.uint24("mprdma_trailer.sack", "SACK PSN", base.DEC),
    aack = ProtoField.uint24("mprdma_trailer.aack", "AACK PSN", base.DEC),
    ack_flags = ProtoField.uint8("mprdma_trailer.ack_flags", "Flags", base.HEX),
    ece = ProtoField.bool("mprdma_trailer.ece", "ECE", 8, nil, 0x01),
    ack_retx = ProtoField.bool("mprdma_trailer.ack_retx", "ReTx", 8, nil, 0x02),
    nack = ProtoField.bool("mprdma_trailer.nack", "NACK", 8, nil, 0x04),
    read = ProtoField.bool("mprdma_trailer.read", "Read (N)ACK", 8, nil, 0x08),
    reserved = ProtoField.bytes("mprdma_trailer.reserved", "Reserved"),
}
proto.fields = pf

local ex_truncated = ProtoExpert.new("mprdma_trailer.truncated",
    "Trailer beyond the capture's snaplen (fabric.link.pcap_snaplen: 0 keeps it)",
    expert.group.UNDECODED, expert.severity.NOTE)
local ex_reserved = ProtoExpert.new("mprdma_trailer.reserved_set",
    "Reserved trailer bits set: not an MP-RDMA/IRN trailer?",
    expert.group.MALFORMED, expert.severity.WARN)
proto.experts = { ex_truncated, ex_reserved }

local MODE_OFF, MODE_ACKS, MODE_ALL, MODE_IRN = 0, 1, 2, 3
proto.prefs.mode = Pref.enum("Trailers", MODE_ACKS,
    "Which packets are decoded as carrying a trailer: acks (ACKs with a 12-byte payload " ..
    "area), all (also every SEND and RDMA WRITE: MP-RDMA), irn (also every SEND and the " ..
    "tail of a WRITE with immediate), off", {
        { 1, "off", MODE_OFF },
        { 2, "acks", MODE_ACKS },
        { 3, "all", MODE_ALL },
        { 4, "irn", MODE_IRN },
    }, false)

local f_opcode = Field.new("infiniband.bth.opcode")
local f_padcnt = Field.new("infiniband.bth.padcnt")
local f_udp_len = Field.new("udp.length")
local f_udp_sport = Field.new("udp.srcport")

local OP_ACKNOWLEDGE = 17
local BTH, AETH, ICRC = 12, 4, 4
local DATA_BYTES, ACK_BYTES = 8, 12

-- SEND_FIRST .. SEND_ONLY_WITH_IMMEDIATE, RDMA_WRITE_FIRST ..
-- RDMA_WRITE_ONLY_WITH_IMMEDIATE (RC opcodes 0-11), and MP-RDMA's READ
-- request and responses (12-16), ATOMIC ACKNOWLEDGE (18) and the atomics
-- (19, 20), which are data packets of their streams.
local function is_data(op)
    return op <= 16 or (op >= 18 and op <= 20)
end

-- What of those an IRN connection puts a trailer on: SENDs (0-5) and RDMA
-- WRITE LAST/ONLY with immediate (9, 11).
local function is_irn_data(op)
    return op <= 5 or op == 9 or op == 11
end

local function decode_data(tree, tvb, at)
    local t = tree:add(proto, tvb(at, DATA_BYTES), "MP-RDMA/IRN data trailer")
    t:add(pf.msn, tvb(at, 3))
    t:add(pf.ipsn, tvb(at + 3, 3))
    local flags = t:add(pf.data_flags, tvb(at + 6, 1))
    flags:add(pf.retx, tvb(at + 6, 1))
    flags:add(pf.sync, tvb(at + 6, 1))
    flags:add(pf.tail, tvb(at + 6, 1))
    t:add(pf.reserved, tvb(at + 7, 1))
    if bit.band(tvb(at + 6, 1):uint(), 0xf8) ~= 0 or tvb(at + 7, 1):uint() ~= 0 then
        t:add_proto_expert_info(ex_reserved)
    end
end

local function decode_ack(tree, tvb, at)
    local t = tree:add(proto, tvb(at, ACK_BYTES), "MP-RDMA/IRN ACK trailer")
    t:add(pf.echo_vp, tvb(at, 2))
    t:add(pf.sack, tvb(at + 2, 3))
    t:add(pf.aack, tvb(at + 5, 3))
    local flags = t:add(pf.ack_flags, tvb(at + 8, 1))
    flags:add(pf.ece, tvb(at + 8, 1))
    flags:add(pf.ack_retx, tvb(at + 8, 1))
    flags:add(pf.nack, tvb(at + 8, 1))
    flags:add(pf.read, tvb(at + 8, 1))
    t:add(pf.reserved, tvb(at + 9, 3))
    if bit.band(tvb(at + 8, 1):uint(), 0xf0) ~= 0 or tvb(at + 9, 3):uint() ~= 0 then
        t:add_proto_expert_info(ex_reserved)
    end
end

function proto.dissector(tvb, pinfo, tree)
    local mode = proto.prefs.mode
    if mode == MODE_OFF then return end
    local opcode, padcnt, udp_len, sport = f_opcode(), f_padcnt(), f_udp_len(), f_udp_sport()
    if not opcode or not padcnt or not udp_len or not sport then return end
    local op = opcode.value
    -- The payload area ends before the pad and the ICRC, which end the UDP
    -- datagram; the UDP header starts at its source port.
    local udp_end = sport.offset + udp_len.value
    local area_end = udp_end - ICRC - padcnt.value
    local len, decode
    if op == OP_ACKNOWLEDGE then
        -- UDP header, BTH and AETH, then the trailer as the whole area.
        if area_end - (sport.offset + 8 + BTH + AETH) ~= ACK_BYTES then return end
        len, decode = ACK_BYTES, decode_ack
    elseif (mode == MODE_ALL and is_data(op)) or (mode == MODE_IRN and is_irn_data(op)) then
        len, decode = DATA_BYTES, decode_data
    else
        return
    end
    local at = area_end - len
    if at < sport.offset + 8 + BTH then return end
    if area_end > tvb:len() then
        local t = tree:add(proto, "MP-RDMA/IRN trailer (not captured)")
        t:add_proto_expert_info(ex_truncated)
        return
    end
    decode(tree, tvb, at)
end

register_postdissector(proto)
