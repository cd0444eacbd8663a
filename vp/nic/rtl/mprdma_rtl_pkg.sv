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
endpackage

`default_nettype wire
