// Parameters and types of the transport engine RTL: the one source of the
// constants the C++ side uses too (tools/rtl/gen_params.py turns every
// `localparam int` below into generated/mprdma/rtl_params.h).
`default_nettype none

package mprdma_rtl_pkg;
  // Width of a packet sequence number: RoCEv2's 24-bit PSN (IBTA 9.7.1).
  localparam int PSN_W = 24;
  // Slots of the MP-RDMA receiver's tracking bitmap, L (NSDI'18 §3.3; the
  // default of the scenario key nic.mp_rdma.bitmap_slots). A power of two,
  // so that slot = PSN mod L stays continuous across the PSN wrap.
  localparam int RX_SLOTS = 64;
  // Bits of a slot index.
  localparam int RX_SLOT_IDX_W = $clog2(RX_SLOTS);
  // Bits of a context-RAM row index: the RTL holds 2^QP_IDX_W connections.
  localparam int QP_IDX_W = 8;
  // Width of a virtual path: a RoCEv2 UDP source port.
  localparam int VP_W = 16;

  // Operations of the receiver engine.
  localparam int RX_OP_W = 2;
  localparam int RX_OP_INIT = 0;  // a connection starts: rcv_nxt = in_psn, bitmap empty
  localparam int RX_OP_DATA = 1;  // a data packet arrives
  localparam int RX_OP_READ = 2;  // read the context back unchanged (lockstep, debug)

  // What the receiver did with a data packet.
  localparam int RX_VERDICT_W = 2;
  localparam int RX_VERDICT_PLACE = 0;
  localparam int RX_VERDICT_DUPLICATE = 1;
  localparam int RX_VERDICT_DROP = 2;

  // A bitmap slot (two bits).
  localparam int SLOT_EMPTY = 0;
  localparam int SLOT_RECEIVED = 1;
  localparam int SLOT_TAIL = 2;  // last packet of a message
  localparam int SLOT_TAIL_CMPL = 3;  // last packet of a message that needs a completion

  // One connection's receiver state, a row of the context RAM: its fields
  // and their bit offsets (the C++ side decodes rows with them). No packed
  // struct: Yosys 0.23 does not resolve a struct typedef from a package.
  // The tracking bitmap: slot i at bits [2i+1:2i], absolute (PSN mod L).
  localparam int RX_CTX_BITMAP_LSB = 0;
  localparam int RX_CTX_BITMAP_W = 2 * RX_SLOTS;
  // rcv_nxt, the bitmap's head: the next PSN expected in order.
  localparam int RX_CTX_RCV_NXT_LSB = RX_CTX_BITMAP_LSB + RX_CTX_BITMAP_W;
  // A synchronise NACK went out ...
  localparam int RX_CTX_SYNC_NACKED_LSB = RX_CTX_RCV_NXT_LSB + PSN_W;
  // ... while rcv_nxt was this.
  localparam int RX_CTX_SYNC_NACKED_FOR_LSB = RX_CTX_SYNC_NACKED_LSB + 1;
  // once_per_head mode: an overflow NACK went out ...
  localparam int RX_CTX_OVERFLOW_NACKED_LSB = RX_CTX_SYNC_NACKED_FOR_LSB + PSN_W;
  // ... while rcv_nxt was this.
  localparam int RX_CTX_OVERFLOW_NACKED_FOR_LSB = RX_CTX_OVERFLOW_NACKED_LSB + 1;
  // Bits of one row.
  localparam int RX_CTX_W = RX_CTX_OVERFLOW_NACKED_FOR_LSB + PSN_W;
  // ---- MP-RDMA sender (mp_rdma_tx_engine.sv) ----
  // Width of a cycle timestamp in the sender's context: 48 bits, 13 days at
  // 250 MHz, so a guest that boots for seconds before it sends is far from
  // the end (the golden model keeps 64; the C++ side refuses a cycle it
  // could not hold).
  localparam int TIME_W = 48;
  // Operations of the sender engine.
  localparam int TX_OP_W = 3;
  localparam int TX_OP_INIT = 0;  // a connection starts: every PSN field = in_psn, cwnd = IW
  localparam int TX_OP_SET_MAX = 1;  // PSNs before in_psn exist now (may send: IW, restart)
  localparam int TX_OP_ACK = 2;  // an ACK or NACK arrives (may clock out packets)
  localparam int TX_OP_RNR = 3;  // an RNR NACK arrives: wait until in_until
  localparam int TX_OP_TIMER = 4;  // a deadline passed (RNR wait end, RTO, burst timer, sync release)
  localparam int TX_OP_READ = 5;  // read the context back unchanged (lockstep, debug)
  // What a transmitted packet is.
  localparam int TX_KIND_W = 2;
  localparam int TX_KIND_NEW = 0;  // new data: snd_nxt
  localparam int TX_KIND_RECOVERY = 1;  // a retransmission of recovery mode: snd_retx
  localparam int TX_KIND_EARLY = 2;  // an early retransmission (no new data): early_retx
  // One connection's sender state, a row of the sender's context RAM, LSB
  // first: the RoCEv2 baseline (snd_una, snd_nxt, end of data, RNR wait
  // end), then what MP-RDMA adds (MpSender::extra_state()).
  localparam int TX_CTX_UNA_LSB = 0;
  localparam int TX_CTX_NXT_LSB = TX_CTX_UNA_LSB + PSN_W;
  localparam int TX_CTX_MAX_LSB = TX_CTX_NXT_LSB + PSN_W;
  // Congestion window, Q16.16 packets.
  localparam int TX_CTX_CWND_LSB = TX_CTX_MAX_LSB + PSN_W;
  localparam int TX_CWND_W = 32;
  // Packets that left the network out of order (signed, two's complement).
  localparam int TX_CTX_INFLATE_LSB = TX_CTX_CWND_LSB + TX_CWND_W;
  localparam int TX_INFLATE_W = 32;
  localparam int TX_CTX_OOH_LSB = TX_CTX_INFLATE_LSB + TX_INFLATE_W;
  localparam int TX_CTX_RECOVERING_LSB = TX_CTX_OOH_LSB + PSN_W;
  localparam int TX_CTX_RECOVERY_LSB = TX_CTX_RECOVERING_LSB + 1;
  localparam int TX_CTX_RETX_LSB = TX_CTX_RECOVERY_LSB + PSN_W;
  localparam int TX_CTX_NACK_HEAD_LSB = TX_CTX_RETX_LSB + PSN_W;
  localparam int TX_CTX_EARLY_LSB = TX_CTX_NACK_HEAD_LSB + PSN_W;
  localparam int TX_CTX_LAST_SEND_LSB = TX_CTX_EARLY_LSB + PSN_W;
  localparam int TX_CTX_BURST_VALID_LSB = TX_CTX_LAST_SEND_LSB + TIME_W;
  localparam int TX_CTX_BURST_AT_LSB = TX_CTX_BURST_VALID_LSB + 1;
  localparam int TX_CTX_NEXT_PROBE_LSB = TX_CTX_BURST_AT_LSB + TIME_W;
  localparam int TX_CTX_RTO_VALID_LSB = TX_CTX_NEXT_PROBE_LSB + TIME_W;
  localparam int TX_CTX_RTO_AT_LSB = TX_CTX_RTO_VALID_LSB + 1;
  localparam int TX_CTX_EVER_SENT_LSB = TX_CTX_RTO_AT_LSB + TIME_W;
  // End of an RNR wait; 0: none.
  localparam int TX_CTX_HOLD_UNTIL_LSB = TX_CTX_EVER_SENT_LSB + 1;
  localparam int TX_CTX_PREV_MSG_SENT_LSB = TX_CTX_HOLD_UNTIL_LSB + TIME_W;
  localparam int TX_CTX_SYNC_ARMED_LSB = TX_CTX_PREV_MSG_SENT_LSB + TIME_W;
  // Bits of one row.
  localparam int TX_CTX_W = TX_CTX_SYNC_ARMED_LSB + 1;
  // ---- go-back-N requester and responder (gbn_qp_engine.sv) ----
  // Operations: one per call of the golden model (GbnEngine).
  localparam int GBN_OP_W = 4;
  localparam int GBN_OP_OPEN = 0;  // the QP reaches RTR: its parameters, ePSN = in_psn
  localparam int GBN_OP_SET_REQ = 1;  // RTS: requester PSNs = in_psn, retry budgets full
  localparam int GBN_OP_SET_MAX = 2;  // PSNs before in_psn exist
  localparam int GBN_OP_NEXT_TX = 3;  // may the QP send, and which PSN
  localparam int GBN_OP_ON_SENT = 4;  // in_npsn PSNs from in_psn went out
  localparam int GBN_OP_ON_ACK = 5;  // an ACK, NAK or response (in_kind) arrived
  localparam int GBN_OP_ON_TIMER = 6;  // a deadline passed
  localparam int GBN_OP_CLASSIFY = 7;  // responder: what is request PSN in_psn
  localparam int GBN_OP_COMMIT = 8;  // responder: in_npsn PSNs executed (ACK coalescing)
  localparam int GBN_OP_NAK_SENT = 9;  // responder: a sequence NAK went out
  localparam int GBN_OP_READ = 10;  // read the context back unchanged
  // ACK kinds (AckEvent::Kind, in its order).
  localparam int GBN_KIND_W = 3;
  localparam int GBN_KIND_ACK = 0;
  localparam int GBN_KIND_NAK_SEQ = 1;
  localparam int GBN_KIND_NAK_RNR = 2;
  localparam int GBN_KIND_NAK_FATAL = 3;
  localparam int GBN_KIND_READ_RESP = 4;
  localparam int GBN_KIND_ATOMIC_ACK = 5;
  // Errors (AckResult::Error) and responder verdicts (RxVerdict), in order.
  localparam int GBN_ERR_W = 2;
  localparam int GBN_VERDICT_W = 2;
  // One QP's row, LSB first: the requester's PSNs, retry budgets, timers
  // and flags, the responder's, and the QP's parameters the logic uses.
  localparam int GBN_CTX_REQUESTER_LSB = 0;
  localparam int GBN_CTX_UNA_LSB = GBN_CTX_REQUESTER_LSB + 1;
  localparam int GBN_CTX_NXT_LSB = GBN_CTX_UNA_LSB + PSN_W;
  localparam int GBN_CTX_MAX_LSB = GBN_CTX_NXT_LSB + PSN_W;
  // One past the highest PSN sent.
  localparam int GBN_CTX_HIGH_LSB = GBN_CTX_MAX_LSB + PSN_W;
  localparam int GBN_CTX_RETRY_LEFT_LSB = GBN_CTX_HIGH_LSB + PSN_W;
  localparam int GBN_RETRY_W = 8;
  localparam int GBN_CTX_RNR_LEFT_LSB = GBN_CTX_RETRY_LEFT_LSB + GBN_RETRY_W;
  localparam int GBN_CTX_DEADLINE_VALID_LSB = GBN_CTX_RNR_LEFT_LSB + GBN_RETRY_W;
  localparam int GBN_CTX_DEADLINE_LSB = GBN_CTX_DEADLINE_VALID_LSB + 1;
  // No sending before this cycle (RNR wait, go-back delay); 0: none.
  localparam int GBN_CTX_HOLD_UNTIL_LSB = GBN_CTX_DEADLINE_LSB + TIME_W;
  // One go-back per lost READ/atomic response.
  localparam int GBN_CTX_REWOUND_LSB = GBN_CTX_HOLD_UNTIL_LSB + TIME_W;
  localparam int GBN_CTX_EPSN_LSB = GBN_CTX_REWOUND_LSB + 1;
  localparam int GBN_CTX_NAK_SENT_LSB = GBN_CTX_EPSN_LSB + PSN_W;
  localparam int GBN_CTX_SINCE_ACK_LSB = GBN_CTX_NAK_SENT_LSB + 1;
  localparam int GBN_COUNT_W = 32;
  // The QP's parameters (ConnParams): retry_cnt, rnr_retry, ACK timeout,
  // UDP source port, ACK coalescing.
  localparam int GBN_CTX_RETRY_CNT_LSB = GBN_CTX_SINCE_ACK_LSB + GBN_COUNT_W;
  localparam int GBN_CTX_RNR_RETRY_LSB = GBN_CTX_RETRY_CNT_LSB + GBN_RETRY_W;
  localparam int GBN_CTX_ACK_TIMEOUT_LSB = GBN_CTX_RNR_RETRY_LSB + GBN_RETRY_W;
  localparam int GBN_CTX_SPORT_LSB = GBN_CTX_ACK_TIMEOUT_LSB + TIME_W;
  localparam int GBN_CTX_ACK_COALESCE_LSB = GBN_CTX_SPORT_LSB + VP_W;
  localparam int GBN_CTX_W = GBN_CTX_ACK_COALESCE_LSB + GBN_COUNT_W;
endpackage

`default_nettype wire
