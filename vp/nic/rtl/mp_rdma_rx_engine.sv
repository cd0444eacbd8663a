// MP-RDMA receiver engine (NSDI'18 §3.3, §3.4): decides what an arriving
// data packet is (placed, duplicate, dropped), what its ACK carries, and
// moves the tracking bitmap's head over the packets that arrived in order.
// The golden model is vp/nic/transport/mp_rdma/mp_rdma_receiver.cc; every
// decision here must equal its decision for the same inputs.
//
// Pipeline, one operation per cycle, any mix of connections:
//   edge 0: the operation is taken; its context row is read.
//   edge 1: the decision is computed from the row (or, when the operation
//           just before wrote the same row, from that write: forwarding),
//           the new row is written and the result registered (out_valid).
// The head moves over a whole run of in-order packets in the same cycle
// (rotate, find first empty); the messages it completes are given as two
// L-bit masks relative to the old head, which the completion stage expands.
`default_nettype none

module mp_rdma_rx_engine #(
    // Bits of a connection index (context-RAM rows: 2^QP_W).
    parameter int QP_W = mprdma_rtl_pkg::QP_IDX_W
) (
    input wire logic clk,
    input wire logic rst_n,

    // Configuration, static while operations run.
    // 1: NACK only the first overflow drop per rcv_nxt (once_per_head);
    // 0: NACK every one (every_drop).
    input wire logic cfg_overflow_nack_once,

    // One operation (RX_OP_*), taken in the cycle in_valid is high.
    input wire logic in_valid,
    input wire logic [mprdma_rtl_pkg::RX_OP_W-1:0] in_op,
    input wire logic [QP_W-1:0] in_qp,
    input wire logic [mprdma_rtl_pkg::PSN_W-1:0] in_psn,  // DATA: the packet's PSN; INIT: the first PSN expected
    input wire logic [mprdma_rtl_pkg::VP_W-1:0] in_vp,  // virtual path, echoed in the ACK
    input wire logic in_ce,  // IP ECN was Congestion Experienced
    input wire logic in_retx,  // ReTx bit
    input wire logic in_tail,  // last packet of its message
    input wire logic in_cmpl,  // ... of a message that needs a completion
    input wire logic in_sync,  // part of a synchronise message
    input wire logic [mprdma_rtl_pkg::PSN_W-1:0] in_ipsn,  // packet index within its message

    // The result, one cycle after the operation was taken.
    output logic out_valid,
    output logic [mprdma_rtl_pkg::RX_OP_W-1:0] out_op,
    output logic [QP_W-1:0] out_qp,
    output logic [mprdma_rtl_pkg::RX_VERDICT_W-1:0] out_verdict,
    output logic out_sync_drop,  // DROP: a synchronise message overtook (else: overflow)
    output logic [mprdma_rtl_pkg::PSN_W-1:0] out_ood,  // psn - rcv_nxt on arrival (out-of-order degree)
    output logic out_ack,  // an ACK or NACK goes out
    output logic out_nack,
    output logic [mprdma_rtl_pkg::VP_W-1:0] out_ack_vp,
    output logic [mprdma_rtl_pkg::PSN_W-1:0] out_ack_sack,
    output logic [mprdma_rtl_pkg::PSN_W-1:0] out_ack_aack,
    output logic out_ack_ece,
    output logic out_ack_retx,
    // Messages completed: bit i of out_tails is PSN out_head_from + i, the
    // tail of a message (needing a completion when out_cmpls has it too).
    output logic [mprdma_rtl_pkg::PSN_W-1:0] out_head_from,
    output logic [mprdma_rtl_pkg::RX_SLOT_IDX_W:0] out_advance,  // PSNs the head moved
    output logic [mprdma_rtl_pkg::RX_SLOTS-1:0] out_tails,
    output logic [mprdma_rtl_pkg::RX_SLOTS-1:0] out_cmpls,
    // The row as written back (lockstep compares it field by field).
    output logic [mprdma_rtl_pkg::RX_CTX_W-1:0] out_ctx
);
  // The package's names, used bare below (Yosys 0.23 parses no `import`).
  localparam int PSN_W = mprdma_rtl_pkg::PSN_W;
  localparam int VP_W = mprdma_rtl_pkg::VP_W;
  localparam int RX_SLOTS = mprdma_rtl_pkg::RX_SLOTS;
  localparam int RX_SLOT_IDX_W = mprdma_rtl_pkg::RX_SLOT_IDX_W;
  localparam int RX_OP_W = mprdma_rtl_pkg::RX_OP_W;
  localparam int RX_OP_INIT = mprdma_rtl_pkg::RX_OP_INIT;
  localparam int RX_OP_DATA = mprdma_rtl_pkg::RX_OP_DATA;
  localparam int RX_OP_READ = mprdma_rtl_pkg::RX_OP_READ;
  localparam int RX_VERDICT_W = mprdma_rtl_pkg::RX_VERDICT_W;
  localparam int RX_VERDICT_PLACE = mprdma_rtl_pkg::RX_VERDICT_PLACE;
  localparam int RX_VERDICT_DUPLICATE = mprdma_rtl_pkg::RX_VERDICT_DUPLICATE;
  localparam int RX_VERDICT_DROP = mprdma_rtl_pkg::RX_VERDICT_DROP;
  localparam int SLOT_EMPTY = mprdma_rtl_pkg::SLOT_EMPTY;
  localparam int SLOT_RECEIVED = mprdma_rtl_pkg::SLOT_RECEIVED;
  localparam int SLOT_TAIL = mprdma_rtl_pkg::SLOT_TAIL;
  localparam int SLOT_TAIL_CMPL = mprdma_rtl_pkg::SLOT_TAIL_CMPL;
  localparam int RX_CTX_W = mprdma_rtl_pkg::RX_CTX_W;
  localparam int RX_CTX_RCV_NXT_LSB = mprdma_rtl_pkg::RX_CTX_RCV_NXT_LSB;
  localparam int RX_CTX_SYNC_NACKED_LSB = mprdma_rtl_pkg::RX_CTX_SYNC_NACKED_LSB;
  localparam int RX_CTX_SYNC_NACKED_FOR_LSB = mprdma_rtl_pkg::RX_CTX_SYNC_NACKED_FOR_LSB;
  localparam int RX_CTX_OVERFLOW_NACKED_LSB = mprdma_rtl_pkg::RX_CTX_OVERFLOW_NACKED_LSB;
  localparam int RX_CTX_OVERFLOW_NACKED_FOR_LSB = mprdma_rtl_pkg::RX_CTX_OVERFLOW_NACKED_FOR_LSB;
  localparam int RX_CTX_BITMAP_LSB = mprdma_rtl_pkg::RX_CTX_BITMAP_LSB;
  localparam int RX_CTX_BITMAP_W = mprdma_rtl_pkg::RX_CTX_BITMAP_W;

  localparam int L = RX_SLOTS;
  localparam int IDX_W = RX_SLOT_IDX_W;

  // ---- edge 0: take the operation, read its row ----
  logic s1_valid;
  logic [RX_OP_W-1:0] s1_op;
  logic [QP_W-1:0] s1_qp;
  logic [PSN_W-1:0] s1_psn, s1_ipsn;
  logic [VP_W-1:0] s1_vp;
  logic s1_ce, s1_retx, s1_tail, s1_cmpl, s1_sync;

  logic [RX_CTX_W-1:0] ram_rd_data;
  logic ram_wr_en;
  logic [QP_W-1:0] ram_wr_addr;
  logic [RX_CTX_W-1:0] next_row;

  mprdma_ctx_ram #(
      .WIDTH (RX_CTX_W),
      .ADDR_W(QP_W)
  ) ctx_ram (
      .clk,
      .rd_en(in_valid),
      .rd_addr(in_qp),
      .rd_data(ram_rd_data),
      .wr_en(ram_wr_en),
      .wr_addr(ram_wr_addr),
      .wr_data(next_row)
  );

  always_ff @(posedge clk) begin
    if (!rst_n) begin
      s1_valid <= 1'b0;
    end else begin
      s1_valid <= in_valid;
    end
    s1_op <= in_op;
    s1_qp <= in_qp;
    s1_psn <= in_psn;
    s1_ipsn <= in_ipsn;
    s1_vp <= in_vp;
    s1_ce <= in_ce;
    s1_retx <= in_retx;
    s1_tail <= in_tail;
    s1_cmpl <= in_cmpl;
    s1_sync <= in_sync;
  end

  // ---- between edge 0 and edge 1: decide ----
  // The row written at the edge that read this one is not in the RAM's
  // output yet: take it from the write-back register.
  logic wb_valid;
  logic [QP_W-1:0] wb_qp;
  logic [RX_CTX_W-1:0] wb_row;
  logic [RX_CTX_W-1:0] cur_row;
  assign cur_row = (wb_valid && wb_qp == s1_qp) ? wb_row : ram_rd_data;
  // The row's fields.
  logic [2*L-1:0] cur_bitmap;
  logic [PSN_W-1:0] cur_rcv_nxt, cur_sync_nacked_for, cur_overflow_nacked_for;
  logic cur_sync_nacked, cur_overflow_nacked;
  assign cur_bitmap = cur_row[RX_CTX_BITMAP_LSB+:RX_CTX_BITMAP_W];
  assign cur_rcv_nxt = cur_row[RX_CTX_RCV_NXT_LSB+:PSN_W];
  assign cur_sync_nacked = cur_row[RX_CTX_SYNC_NACKED_LSB];
  assign cur_sync_nacked_for = cur_row[RX_CTX_SYNC_NACKED_FOR_LSB+:PSN_W];
  assign cur_overflow_nacked = cur_row[RX_CTX_OVERFLOW_NACKED_LSB];
  assign cur_overflow_nacked_for = cur_row[RX_CTX_OVERFLOW_NACKED_FOR_LSB+:PSN_W];
  // The fields written back.
  logic [2*L-1:0] next_bitmap;
  logic [PSN_W-1:0] next_rcv_nxt, next_sync_nacked_for, next_overflow_nacked_for;
  logic next_sync_nacked, next_overflow_nacked;
  assign next_row = {next_overflow_nacked_for, next_overflow_nacked, next_sync_nacked_for,
                     next_sync_nacked, next_rcv_nxt, next_bitmap};

  // Signed 24-bit distance psn - rcv_nxt, and of the synchronise message's
  // first packet.
  logic [PSN_W-1:0] ood, msg_start, msg_start_ood;
  assign ood = s1_psn - cur_rcv_nxt;
  assign msg_start = s1_psn - s1_ipsn;
  assign msg_start_ood = msg_start - cur_rcv_nxt;
  logic behind, beyond, start_ahead;
  assign behind = ood[PSN_W-1];
  assign beyond = !behind && (ood >= PSN_W'(L));
  assign start_ahead = !msg_start_ood[PSN_W-1] && (msg_start_ood != '0);

  // The bitmap rotated so that slot i is PSN rcv_nxt + i.
  logic [IDX_W-1:0] head_idx;
  assign head_idx = cur_rcv_nxt[IDX_W-1:0];
  logic [4*L-1:0] twice;
  logic [2*L-1:0] rot;
  assign twice = {cur_bitmap, cur_bitmap};
  assign rot = twice[{1'b0, head_idx, 1'b0}+:2*L];

  logic [IDX_W-1:0] ood_idx;
  assign ood_idx = ood[IDX_W-1:0];
  logic occupied;
  assign occupied = rot[{ood_idx, 1'b0}+:2] != 2'(SLOT_EMPTY);

  // Placing the packet (in the rotated frame) and the in-order run after it.
  logic [1:0] new_slot;
  assign new_slot = !s1_tail ? 2'(SLOT_RECEIVED) : s1_cmpl ? 2'(SLOT_TAIL_CMPL) : 2'(SLOT_TAIL);
  logic [2*L-1:0] placed;
  always_comb begin
    placed = rot;
    placed[{ood_idx, 1'b0}+:2] = new_slot;
  end
  logic [L-1:0] filled;  // slot i not empty
  logic [L-1:0] tails_rot, cmpls_rot;
  always_comb begin
    for (int i = 0; i < L; i++) begin
      filled[i] = placed[2*i+:2] != 2'(SLOT_EMPTY);
      tails_rot[i] = placed[2*i+1];
      cmpls_rot[i] = placed[2*i+:2] == 2'(SLOT_TAIL_CMPL);
    end
  end
  // Length of the run of filled slots from the head (L when all are).
  logic [IDX_W:0] run;
  always_comb begin
    run = (IDX_W + 1)'(L);
    for (int i = L - 1; i >= 0; i--) begin
      if (!filled[i]) run = (IDX_W + 1)'(i);
    end
  end
  logic [L-1:0] run_mask;  // bits [0, run)
  always_comb begin
    for (int i = 0; i < L; i++) run_mask[i] = (IDX_W + 1)'(i) < run;
  end
  // The run's slots emptied, back in the absolute frame.
  logic [2*L-1:0] cleared_rot;
  always_comb begin
    for (int i = 0; i < L; i++) cleared_rot[2*i+:2] = run_mask[i] ? 2'(SLOT_EMPTY) : placed[2*i+:2];
  end
  logic [4*L-1:0] twice_back;
  logic [2*L-1:0] cleared_abs;
  assign twice_back = {cleared_rot, cleared_rot};
  // Rotating left by head_idx slots is rotating right by L - head_idx.
  logic [IDX_W:0] back_by;
  assign back_by = (IDX_W + 1)'(L) - {1'b0, head_idx};
  assign cleared_abs = twice_back[{back_by, 1'b0}+:2*L];

  // The decision.
  logic [RX_VERDICT_W-1:0] verdict;
  logic sync_drop, ack, nack;
  logic [PSN_W-1:0] sack, aack;
  logic [RX_SLOT_IDX_W:0] advance;
  logic [L-1:0] tails, cmpls;
  always_comb begin
    next_bitmap = cur_bitmap;
    next_rcv_nxt = cur_rcv_nxt;
    next_sync_nacked = cur_sync_nacked;
    next_sync_nacked_for = cur_sync_nacked_for;
    next_overflow_nacked = cur_overflow_nacked;
    next_overflow_nacked_for = cur_overflow_nacked_for;
    verdict = RX_VERDICT_W'(RX_VERDICT_DROP);
    sync_drop = 1'b0;
    ack = 1'b0;
    nack = 1'b0;
    sack = s1_psn;
    aack = cur_rcv_nxt - 1'b1;
    advance = '0;
    tails = '0;
    cmpls = '0;
    ram_wr_en = 1'b0;
    if (s1_valid && s1_op == RX_OP_W'(RX_OP_READ)) begin
      // The row goes out unchanged; nothing is written.
      ram_wr_en = 1'b0;
    end else if (s1_valid && s1_op == RX_OP_W'(RX_OP_INIT)) begin
      next_bitmap = '0;
      next_rcv_nxt = s1_psn;
      next_sync_nacked = 1'b0;
      next_sync_nacked_for = '0;
      next_overflow_nacked = 1'b0;
      next_overflow_nacked_for = '0;
      ram_wr_en = 1'b1;
    end else if (s1_valid && s1_op == RX_OP_W'(RX_OP_DATA)) begin
      ram_wr_en = 1'b1;
      if (behind || (!beyond && occupied)) begin
        // Already here: ACK again so that the sender's clock keeps going.
        verdict = RX_VERDICT_W'(RX_VERDICT_DUPLICATE);
        ack = 1'b1;
      end else if (beyond) begin
        // Beyond the bitmap: NACK rcv_nxt (every drop, or the first per head).
        sack = cur_rcv_nxt;
        if (!cfg_overflow_nack_once || !cur_overflow_nacked ||
            cur_overflow_nacked_for != cur_rcv_nxt) begin
          ack = 1'b1;
          nack = 1'b1;
          if (cfg_overflow_nack_once) begin
            next_overflow_nacked = 1'b1;
            next_overflow_nacked_for = cur_rcv_nxt;
          end
        end
      end else if (s1_sync && start_ahead) begin
        // A synchronise message overtook an earlier one: ask for it again,
        // once while rcv_nxt stays where it is.
        sync_drop = 1'b1;
        sack = msg_start;
        if (!cur_sync_nacked || cur_sync_nacked_for != cur_rcv_nxt) begin
          ack = 1'b1;
          nack = 1'b1;
          next_sync_nacked = 1'b1;
          next_sync_nacked_for = cur_rcv_nxt;
        end
      end else begin
        verdict = RX_VERDICT_W'(RX_VERDICT_PLACE);
        ack = 1'b1;
        advance = run;
        tails = tails_rot & run_mask;
        cmpls = cmpls_rot & run_mask;
        next_bitmap = cleared_abs;
        next_rcv_nxt = cur_rcv_nxt + PSN_W'(run);
        aack = cur_rcv_nxt + PSN_W'(run) - 1'b1;
      end
    end
  end
  assign ram_wr_addr = s1_qp;

  // ---- edge 1: write back, register the result ----
  always_ff @(posedge clk) begin
    if (!rst_n) begin
      wb_valid <= 1'b0;
      out_valid <= 1'b0;
    end else begin
      wb_valid <= ram_wr_en;
      out_valid <= s1_valid;
    end
    wb_qp <= s1_qp;
    wb_row <= next_row;
    out_op <= s1_op;
    out_qp <= s1_qp;
    out_verdict <= verdict;
    out_sync_drop <= sync_drop;
    out_ood <= ood;
    out_ack <= ack;
    out_nack <= nack;
    out_ack_vp <= s1_vp;
    out_ack_sack <= sack;
    out_ack_aack <= aack;
    out_ack_ece <= s1_ce;
    out_ack_retx <= s1_retx;
    out_head_from <= cur_rcv_nxt;
    out_advance <= advance;
    out_tails <= tails;
    out_cmpls <= cmpls;
    out_ctx <= next_row;
  end
endmodule

`default_nettype wire
