// MP-RDMA sender engine (NSDI'18 §3.2-3.4): one congestion window shared by
// all virtual paths and updated per ACK, multi-path ACK clocking, out-of-
// order-aware path selection (delta), burst control, probing, NACK
// recovery and its new-data rule, path window reduction, early
// retransmission, the RTO, the RNR wait and the synchronise release, with
// the burst timer, RTO and waits as per-QP deadlines given out after every
// operation (wake), so that nothing scans the connections.
// The golden model is vp/nic/transport/mp_rdma/mp_rdma_sender.cc; every
// packet, path and context field here must equal its own for the same
// inputs.
//
// One operation at a time, the next taken in the last cycle of this one
// (a pipelined read-modify-write: the next row is read while this one is
// written back):
//   edge 0      the operation is taken (in_ready, in_valid), its row read;
//               if the operation before was on the same row and is being
//               written back at this edge, the RAM returns the old row and
//               PRE takes the write-back register instead (forwarding);
//   edge 1      PRE: the ACK, RNR NACK, timer or new data is applied to the
//               row (snd_una, window, recovery, deadlines) and the number
//               of packets it may clock out is fixed; an ACK that grows
//               the window is decided 4 cycles later (GROW), once a
//               sequential divider has 2^32 / cwnd;
//   edges 2..   EMIT: one packet per cycle (out_tx_*), each the golden
//               model's pick(): a recovery retransmission, new data or an
//               early retransmission, on the ACK's path or a random one;
//   AFTER       burst timer and the synchronise release (which may clock
//               out a second run of packets); in the last cycle out_done
//               is high with the row, the events and the connection's next
//               deadline, and its edge writes the row back and may take the
//               next operation; when a synchronise message waits, its
//               release time needs alpha x delta x RTT / cwnd: the row is
//               written back, and 9 more cycles (WAKE) on the second
//               divider end with out_done.
// An operation occupies the engine 2 cycles, plus one per packet (and one
// when a pick finds nothing), plus 4 when the window grows, plus 9 when
// a synchronise message waits at its end; its results come one cycle
// later than the last of these, in the cycle the next operation is taken. No combinational divider: each
// would cost thousands of LUTs; the synchronise check is a multiply-compare
// and the probing draw's modulo a multiply by a reciprocal.
//
// The synchronise messages' first PSNs are the message layer's (a FIFO
// outside the engine): its head comes in on in_sync_*, registered at every
// edge, and out_sync_pop says the head has been sent; the FIFO shows the
// next head before the following edge, so the engine waits out the cycle
// after a pop (one cycle per synchronise message).
//
// The configuration (cfg_*) is sampled while reset is held, as firmware
// programs a block's registers before enabling it: no decision path
// starts at an input pin.
`default_nettype none

module mp_rdma_tx_engine #(
    // Bits of a connection index (context-RAM rows: 2^QP_W).
    parameter int QP_W = mprdma_rtl_pkg::QP_IDX_W
) (
    input wire logic clk,
    input wire logic rst_n,

    // Configuration (nic.mp_rdma.*), sampled while rst_n is low.
    input wire logic [31:0] cfg_iw,  // initial window, packets
    input wire logic [mprdma_rtl_pkg::PSN_W-1:0] cfg_delta,  // out-of-order target delta, PSNs
    input wire logic cfg_ooo_control,  // prune ACKs from slow paths
    input wire logic cfg_strict_recovery,  // no new data while recovering
    input wire logic cfg_window_reduction,  // an ACK that finds no data lowers cwnd
    input wire logic [31:0] cfg_probe_ppm,  // probing probability per RTT, parts per million
    input wire logic [31:0] cfg_max_per_ack,  // burst control: packets one ACK may clock out
    input wire logic [31:0] cfg_rtt,  // base RTT, cycles
    input wire logic [63:0] cfg_idle_cycles,  // restart from IW after this long idle (RTTs x RTT)
    // Synchronise delay numerator: floor(alpha x delta x RTT x 2^16 / 1000),
    // cycles x Q16.16 packets (firmware computes it once; the engine divides
    // it by cwnd).
    input wire logic [63:0] cfg_sync_num,
    input wire logic [31:0] cfg_rto,  // retransmission timeout, cycles
    input wire logic [mprdma_rtl_pkg::VP_W-1:0] cfg_vp_mask,  // virtual path = base | (random & mask)
    input wire logic [31:0] cfg_seed,  // the NIC's path LFSR at reset (0 picks a fixed one)

    // One operation (TX_OP_*), taken in a cycle in which in_ready is high.
    output logic in_ready,
    input wire logic in_valid,
    input wire logic [mprdma_rtl_pkg::TX_OP_W-1:0] in_op,
    input wire logic [QP_W-1:0] in_qp,
    input wire logic [mprdma_rtl_pkg::TIME_W-1:0] in_now,  // the current NIC cycle
    // The QP's virtual-path base (from the NIC's QP context: with one path,
    // the QP's own UDP source port).
    input wire logic [mprdma_rtl_pkg::VP_W-1:0] in_vp_base,
    input wire logic [mprdma_rtl_pkg::PSN_W-1:0] in_psn,  // INIT: first PSN; SET_MAX: end of data
    input wire logic [mprdma_rtl_pkg::VP_W-1:0] in_vp,  // ACK, RNR: the echoed virtual path
    input wire logic [mprdma_rtl_pkg::PSN_W-1:0] in_sack,  // ... the PSN acknowledged (or NACKed)
    input wire logic [mprdma_rtl_pkg::PSN_W-1:0] in_aack,  // ... the receiver's cumulative ACK
    input wire logic in_ece,  // ... the data packet arrived marked CE
    input wire logic in_retx,  // ... the data packet was a retransmission
    input wire logic in_nack,  // ... a NACK: the receiver wants in_sack again
    input wire logic [31:0] in_backlog,  // ACK: packets clocked out but not yet on the wire
    input wire logic [mprdma_rtl_pkg::TIME_W-1:0] in_until,  // RNR: the end of the receiver's wait

    // Head of the message layer's FIFO of synchronise PSNs (registered).
    input wire logic in_sync_valid,
    input wire logic [mprdma_rtl_pkg::PSN_W-1:0] in_sync_psn,
    output logic out_sync_pop,  // the head was sent this cycle

    // Packets, one per cycle while the operation clocks them out.
    output logic out_tx_valid,
    output logic [mprdma_rtl_pkg::PSN_W-1:0] out_tx_psn,
    output logic [mprdma_rtl_pkg::VP_W-1:0] out_tx_vp,
    output logic [mprdma_rtl_pkg::TX_KIND_W-1:0] out_tx_kind,
    output logic out_tx_probe,  // its path is a probe (a new random one)
    output logic out_tx_timer,  // clocked out by a timer on a random path, not by an ACK

    // The operation ends in this cycle, with what it did (valid while
    // out_done is high; the edge that ends the cycle may take the next).
    output logic out_done,
    output logic [mprdma_rtl_pkg::TX_OP_W-1:0] out_op,
    output logic [QP_W-1:0] out_qp,
    output logic out_ev_ignored,  // an ACK or RNR NACK for nothing sent
    output logic out_ev_pruned,  // an ACK from a slow path (out-of-order control)
    output logic out_ev_ece,  // an ACK with ECE cut the window
    output logic out_ev_recovery,  // recovery mode began
    output logic out_ev_rto,  // the RTO fired
    output logic out_ev_restart,  // restart from IW after idle
    output logic out_ev_window_reduction,  // use it or lose it
    output logic [1:0] out_ev_sync_waits,  // a synchronise message held packets back
    output logic out_ev_rnr_fresh,  // RNR: this NACK started a wait
    output logic out_wake_valid,  // the connection's next deadline ...
    output logic [63:0] out_wake,  // ... in cycles
    output logic [31:0] out_rng,  // the path LFSR after the operation
    output logic [mprdma_rtl_pkg::TX_CTX_W-1:0] out_ctx  // the row as written back
);
  // The package's names, used bare below (Yosys 0.23 parses no `import`).
  localparam int PSN_W = mprdma_rtl_pkg::PSN_W;
  localparam int VP_W = mprdma_rtl_pkg::VP_W;
  localparam int TW = mprdma_rtl_pkg::TIME_W;
  localparam int TX_OP_W = mprdma_rtl_pkg::TX_OP_W;
  localparam int TX_KIND_W = mprdma_rtl_pkg::TX_KIND_W;
  localparam int TX_CTX_W = mprdma_rtl_pkg::TX_CTX_W;
  localparam int CWND_W = mprdma_rtl_pkg::TX_CWND_W;
  localparam int INFL_W = mprdma_rtl_pkg::TX_INFLATE_W;
  localparam logic [TX_OP_W-1:0] OP_INIT = TX_OP_W'(mprdma_rtl_pkg::TX_OP_INIT);
  localparam logic [TX_OP_W-1:0] OP_SET_MAX = TX_OP_W'(mprdma_rtl_pkg::TX_OP_SET_MAX);
  localparam logic [TX_OP_W-1:0] OP_ACK = TX_OP_W'(mprdma_rtl_pkg::TX_OP_ACK);
  localparam logic [TX_OP_W-1:0] OP_RNR = TX_OP_W'(mprdma_rtl_pkg::TX_OP_RNR);
  localparam logic [TX_OP_W-1:0] OP_TIMER = TX_OP_W'(mprdma_rtl_pkg::TX_OP_TIMER);
  localparam logic [TX_OP_W-1:0] OP_READ = TX_OP_W'(mprdma_rtl_pkg::TX_OP_READ);
  localparam logic [TX_KIND_W-1:0] KIND_NEW = TX_KIND_W'(mprdma_rtl_pkg::TX_KIND_NEW);
  localparam logic [TX_KIND_W-1:0] KIND_RECOVERY = TX_KIND_W'(mprdma_rtl_pkg::TX_KIND_RECOVERY);
  localparam logic [TX_KIND_W-1:0] KIND_EARLY = TX_KIND_W'(mprdma_rtl_pkg::TX_KIND_EARLY);
  // Q16.16: one packet, and the window's floor and ceiling.
  localparam logic [CWND_W-1:0] ONE = 32'h0001_0000;
  localparam logic [CWND_W-1:0] CWND_MAX = 32'hFFFF_0000;
  // Window arithmetic is done in 36-bit two's complement: cwnd (16 bits of
  // packets) + inflate (32) - (snd_nxt - snd_una) (24) cannot overflow it.
  localparam int AW = 36;

  // ---- helpers ----
  // a precedes b in 24-bit PSN space (psn_diff(a, b) < 0).
  function automatic logic psn_lt(input logic [PSN_W-1:0] a, input logic [PSN_W-1:0] b);
    logic [PSN_W-1:0] d;
    d = a - b;
    psn_lt = d[PSN_W-1];
  endfunction
  // psn_diff(a, b), sign-extended.
  function automatic logic [AW-1:0] psn_diff(input logic [PSN_W-1:0] a,
                                             input logic [PSN_W-1:0] b);
    logic [PSN_W-1:0] d;
    d = a - b;
    psn_diff = {{(AW - PSN_W) {d[PSN_W-1]}}, d};
  endfunction
  function automatic logic [AW-1:0] sext32(input logic [31:0] v);
    sext32 = {{(AW - 32) {v[31]}}, v};
  endfunction
  // One xorshift32 step of the path LFSR.
  function automatic logic [31:0] xorshift(input logic [31:0] s);
    logic [31:0] a, b;
    a = s ^ (s << 13);
    b = a ^ (a >> 17);
    xorshift = b ^ (b << 5);
  endfunction
  // cwnd + d, clamped to [one packet, 0xFFFF packets].
  function automatic logic [CWND_W-1:0] cwnd_add(input logic [CWND_W-1:0] c,
                                                 input logic [AW-1:0] d);
    logic [AW-1:0] s;
    s = {{(AW - CWND_W) {1'b0}}, c} + d;
    if (s[AW-1] || s < {{(AW - CWND_W) {1'b0}}, ONE}) cwnd_add = ONE;
    else if (s > {{(AW - CWND_W) {1'b0}}, CWND_MAX}) cwnd_add = CWND_MAX;
    else cwnd_add = s[CWND_W-1:0];
  endfunction
  // awnd = cwnd + inflate - (snd_nxt - snd_una), in whole packets (cwnd's
  // fraction does not count).
  /* verilator lint_off UNUSEDSIGNAL */
  function automatic logic [AW-1:0] awnd_of(input logic [CWND_W-1:0] c,
                                            input logic [INFL_W-1:0] infl,
                                            input logic [PSN_W-1:0] nxt,
                                            input logic [PSN_W-1:0] una);
    awnd_of = {{(AW - 16) {1'b0}}, c[31:16]} + sext32(infl) - psn_diff(nxt, una);
  endfunction
  /* verilator lint_on UNUSEDSIGNAL */
  // The awnd packets an operation may clock out, at most `limit` (awnd
  // below zero: none).
  function automatic logic [AW-1:0] budget(input logic [AW-1:0] awnd, input logic [AW-1:0] limit);
    if (awnd[AW-1]) budget = '0;
    else if (awnd > limit) budget = limit;
    else budget = awnd;
  endfunction
  function automatic logic [CWND_W-1:0] initial_cwnd(input logic [31:0] iw);
    initial_cwnd = (iw == 0 ? 32'd1 : iw) << 16;
  endfunction

  // ---- the context row's fields ----
  logic [PSN_W-1:0] una, nxt, snd_max, ooh, recovery, retx, nack_head, early;
  logic [CWND_W-1:0] cwnd;
  logic [INFL_W-1:0] inflate;
  logic recovering, burst_valid, rto_valid, ever_sent, sync_armed;
  logic [TW-1:0] last_send, burst_at, next_probe, rto_at, hold_until, prev_msg_sent;

  // ---- configuration registers (cfg_* as reset left them) ----
  logic [31:0] csr_iw, csr_probe_ppm, csr_max_per_ack, csr_rtt, csr_rto;
  logic [PSN_W-1:0] csr_delta;
  logic csr_ooo_control, csr_strict_recovery, csr_window_reduction;
  logic [63:0] csr_idle_cycles, csr_sync_num;
  logic [VP_W-1:0] csr_vp_mask;
  always_ff @(posedge clk)
    if (!rst_n) begin
      csr_iw <= cfg_iw;
      csr_delta <= cfg_delta;
      csr_ooo_control <= cfg_ooo_control;
      csr_strict_recovery <= cfg_strict_recovery;
      csr_window_reduction <= cfg_window_reduction;
      csr_probe_ppm <= cfg_probe_ppm;
      csr_max_per_ack <= cfg_max_per_ack;
      csr_rtt <= cfg_rtt;
      csr_idle_cycles <= cfg_idle_cycles;
      csr_sync_num <= cfg_sync_num;
      csr_rto <= cfg_rto;
      csr_vp_mask <= cfg_vp_mask;
    end

  // ---- the synchronise head, registered ----
  // As the FIFO showed it at the last edge. After a pop (out_sync_pop high)
  // that is the head just sent: EMIT and AFTER wait for the next one.
  logic sync_v;
  logic [PSN_W-1:0] sync_psn;
  always_ff @(posedge clk) begin
    sync_v <= in_sync_valid;
    sync_psn <= in_sync_psn;
  end
  logic head_wait;
  assign head_wait = out_sync_pop;

  // ---- the FSM ----
  // (Plain codes, not enums: Yosys 0.23 reads these.)
  localparam logic [2:0] S_IDLE = 3'd0;
  localparam logic [2:0] S_PRE = 3'd1;
  localparam logic [2:0] S_GROW = 3'd2;  // waiting for 2^32 / cwnd
  localparam logic [2:0] S_EMIT = 3'd3;
  localparam logic [2:0] S_AFTER = 3'd4;
  localparam logic [2:0] S_WAKE = 3'd5;  // waiting for the synchronise delay
  logic [2:0] st;
  // What AFTER does once a run of packets is out.
  localparam logic [1:0] A_NONE = 2'd0;  // write back
  localparam logic [1:0] A_ACK = 2'd1;  // arm the burst timer if the window allows more
  localparam logic [1:0] A_SET_MAX = 2'd2;  // arm the burst timer if it is not running
  localparam logic [1:0] A_SYNC = 2'd3;  // a timer: release a synchronise message now due
  // Who clocks packets out: an ACK on its path, a timer or the start of
  // sending on random paths.
  localparam logic [1:0] WHY_ACK = 2'd0;
  localparam logic [1:0] WHY_TIMER = 2'd1;
  localparam logic [1:0] WHY_START = 2'd2;

  logic [TX_OP_W-1:0] op;
  logic [QP_W-1:0] qp;
  logic [TW-1:0] now;
  logic [PSN_W-1:0] op_psn, op_sack, op_aack;
  logic [VP_W-1:0] op_vp, op_vp_base;
  logic op_ece, op_retx, op_nack;
  logic [31:0] op_backlog;
  logic [TW-1:0] op_until;
  logic [31:0] rng;
  // The run of packets being clocked out.
  logic [AW-1:0] run_left;
  logic [1:0] why, after;
  // Events of the operation so far.
  logic ev_ignored, ev_pruned, ev_ece, ev_recovery, ev_rto, ev_restart, ev_window_reduction;
  logic ev_rnr_fresh;
  logic [1:0] ev_sync_waits;

  // The operation ends in this cycle (see `last` below): the next may be
  // taken at its edge.
  logic last;
  assign in_ready = st == S_IDLE || last;

  logic [TX_CTX_W-1:0] ram_rd_data, row_out;
  logic ram_wr_en;
  // Written at the edge that ends the operation's last AFTER cycle, the edge
  // that may take the next operation and read its row.
  logic a_release, a_burst_valid, a_sync_armed;
  logic [AW-1:0] a_release_run;
  logic [TW-1:0] a_burst_at;
  assign ram_wr_en = st == S_AFTER && !head_wait && !(a_release && a_release_run != '0);
  mprdma_ctx_ram #(
      .WIDTH (TX_CTX_W),
      .ADDR_W(QP_W)
  ) ctx_ram (
      .clk,
      .rd_en(in_valid && in_ready),
      .rd_addr(in_qp),
      .rd_data(ram_rd_data),
      .wr_en(ram_wr_en),
      .wr_addr(qp),
      .wr_data(row_out)
  );
  // Forwarding: the row written back at the edge that took this operation
  // (wb_row) replaces what the RAM read for it when both are the same row
  // (the RAM returns the old row then).
  logic [TX_CTX_W-1:0] wb_row, row_in;
  logic fwd;
  assign row_in = fwd ? wb_row : ram_rd_data;
  // (A deadline that is not running is stored as 0.)
  assign row_out = {
    a_sync_armed,
    prev_msg_sent,
    hold_until,
    ever_sent,
    rto_valid ? rto_at : '0,
    rto_valid,
    next_probe,
    a_burst_valid ? a_burst_at : '0,
    a_burst_valid,
    last_send,
    early,
    nack_head,
    retx,
    recovery,
    recovering,
    ooh,
    inflate,
    cwnd,
    snd_max,
    nxt,
    una
  };

  // A packet `psn` would start a synchronise message too early: t < prev +
  // floor(N / c), N / c being the synchronise delay alpha x delta x RTT /
  // cwnd. As t - prev < floor(N / c) iff (t - prev + 1) x c <= N: a
  // multiply, not a divide.
  function automatic logic sync_blocked(input logic [PSN_W-1:0] psn, input logic [PSN_W-1:0] head,
                                        input logic head_valid, input logic sent_before,
                                        input logic [TW-1:0] t, input logic [TW-1:0] prev,
                                        input logic [CWND_W-1:0] c, input logic [63:0] n);
    logic [TW:0] since;
    logic [TW+CWND_W:0] need;
    since = {1'b0, t - prev} + 1'b1;
    need = (TW + CWND_W + 1)'(since) * (TW + CWND_W + 1)'(c);
    sync_blocked = head_valid && head == psn && sent_before &&
        (t < prev || need <= (TW + CWND_W + 1)'(n));
  endfunction

  // ---- PRE: the operation applied to the row just read ----
  // Fields as read.
  logic [PSN_W-1:0] r_una, r_nxt, r_max, r_ooh, r_recovery, r_retx, r_nack_head, r_early;
  logic [CWND_W-1:0] r_cwnd;
  logic [INFL_W-1:0] r_inflate;
  logic r_recovering, r_burst_valid, r_rto_valid, r_ever_sent, r_sync_armed;
  logic [TW-1:0] r_last_send, r_burst_at, r_next_probe, r_rto_at, r_hold_until, r_prev_msg_sent;
  assign {r_sync_armed, r_prev_msg_sent, r_hold_until, r_ever_sent, r_rto_at, r_rto_valid,
          r_next_probe, r_burst_at, r_burst_valid, r_last_send, r_early, r_nack_head, r_retx,
          r_recovery, r_recovering, r_ooh, r_inflate, r_cwnd, r_max, r_nxt, r_una} = row_in;

  // The fields after PRE, the run it starts and its events.
  logic [PSN_W-1:0] p_una, p_nxt, p_max, p_ooh, p_recovery, p_retx, p_nack_head, p_early;
  logic [CWND_W-1:0] p_cwnd;
  logic [INFL_W-1:0] p_inflate;
  logic p_recovering, p_burst_valid, p_rto_valid, p_ever_sent, p_sync_armed;
  logic [TW-1:0] p_last_send, p_burst_at, p_next_probe, p_rto_at, p_hold_until, p_prev_msg_sent;
  logic [AW-1:0] p_run;
  logic [1:0] p_why, p_after;
  logic p_ignored, p_pruned, p_ece, p_recovery_ev, p_rto_ev, p_restart, p_rnr_fresh;

  // Helpers of PRE.
  logic [PSN_W-1:0] high, new_una, want;
  logic [AW-1:0] moved, infl_left, awnd, growth;
  /* verilator lint_off UNUSEDSIGNAL */
  logic [AW-1:0] inflight;  // 24 bits sign-extended: the top ones repeat bit 23
  /* verilator lint_on UNUSEDSIGNAL */
  logic idle, overflow, stale;
  logic [TW-1:0] idle_for;  // cycles since the last transmission
  assign idle_for = now - r_last_send;
  // The ACK grows the window, by 2^32 / cwnd (from the divider).
  logic p_grows;

  // Two sequential dividers, six quotient bits per cycle: 2^32 / cwnd
  // (window growth; cwnd is at least 2^16, so 17 quotient bits, taken as 18)
  // and N / cwnd (the synchronise delay, for a deadline; 48 quotient bits).
  logic grow_start, grow_done, wake_start, wake_done;
  /* verilator lint_off UNUSEDSIGNAL */
  logic grow_busy, wake_busy;
  /* verilator lint_on UNUSEDSIGNAL */
  logic [17:0] grow_q;
  logic [47:0] sync_q;
  mprdma_divider #(
      .D_W(CWND_W),
      .STEPS(18),
      .RADIX_BITS(6)
  ) grow_div (
      .clk,
      .rst_n,
      .start(grow_start),
      .rem_init(32'h0000_4000),  // 2^32 = 2^14 x 2^18
      .dividend(18'b0),
      .divisor(r_cwnd),
      .busy(grow_busy),
      .done(grow_done),
      .quotient(grow_q)
  );
  mprdma_divider #(
      .D_W(CWND_W),
      .STEPS(48),
      .RADIX_BITS(6)
  ) wake_div (
      .clk,
      .rst_n,
      .start(wake_start),
      .rem_init({16'b0, csr_sync_num[63:48]}),
      .dividend(csr_sync_num[47:0]),
      .divisor(cwnd),
      .busy(wake_busy),
      .done(wake_done),
      .quotient(sync_q)
  );

  always_comb begin
    p_una = r_una;
    p_nxt = r_nxt;
    p_max = r_max;
    p_ooh = r_ooh;
    p_recovery = r_recovery;
    p_retx = r_retx;
    p_nack_head = r_nack_head;
    p_early = r_early;
    p_cwnd = r_cwnd;
    p_inflate = r_inflate;
    p_recovering = r_recovering;
    p_burst_valid = r_burst_valid;
    p_rto_valid = r_rto_valid;
    p_ever_sent = r_ever_sent;
    p_sync_armed = r_sync_armed;
    p_last_send = r_last_send;
    p_burst_at = r_burst_at;
    p_next_probe = r_next_probe;
    p_rto_at = r_rto_at;
    p_hold_until = r_hold_until;
    p_prev_msg_sent = r_prev_msg_sent;
    p_run = '0;
    p_why = WHY_TIMER;
    p_after = A_NONE;
    p_ignored = 1'b0;
    p_pruned = 1'b0;
    p_ece = 1'b0;
    p_recovery_ev = 1'b0;
    p_rto_ev = 1'b0;
    p_restart = 1'b0;
    p_rnr_fresh = 1'b0;
    high = r_nxt - 1'b1;
    new_una = op_aack + 1'b1;
    want = op_sack;
    moved = '0;
    infl_left = '0;
    awnd = '0;
    growth = '0;
    p_grows = 1'b0;
    inflight = '0;
    idle = 1'b0;
    overflow = 1'b0;
    stale = 1'b0;
    case (op)
      OP_INIT: begin
        p_una = op_psn;
        p_nxt = op_psn;
        p_max = op_psn;
        p_cwnd = initial_cwnd(csr_iw);
        p_inflate = '0;
        p_ooh = op_psn - 1'b1;
        p_recovering = 1'b0;
        p_recovery = '0;
        p_retx = op_psn;
        p_nack_head = '0;
        p_early = op_psn;
        p_last_send = '0;
        p_burst_valid = 1'b0;
        p_burst_at = '0;
        p_next_probe = '0;
        p_rto_valid = 1'b0;
        p_rto_at = '0;
        p_ever_sent = 1'b0;
        p_hold_until = '0;
        p_prev_msg_sent = '0;
        p_sync_armed = 1'b0;
      end

      OP_SET_MAX: begin
        p_max = op_psn;
        if (psn_lt(r_nxt, op_psn)) begin
          p_after = A_SET_MAX;
          if (r_una == r_nxt && !r_recovering) begin
            // No ACK will come to clock anything out.
            idle = !r_ever_sent || 64'(idle_for) >= csr_idle_cycles;
            if (idle) begin
              // (Re)start from the initial window on random paths.
              p_restart = r_ever_sent;
              p_cwnd = initial_cwnd(csr_iw);
              p_inflate = '0;
              p_run = budget(awnd_of(p_cwnd, p_inflate, r_nxt, r_una), {AW{1'b1}} >> 1);
              p_why = WHY_START;
              p_after = A_NONE;
            end else begin
              p_run = budget(awnd_of(r_cwnd, r_inflate, r_nxt, r_una), AW'(csr_max_per_ack));
              p_why = WHY_TIMER;
            end
          end
        end
      end

      OP_ACK: begin
        p_burst_valid = 1'b0;
        if (!psn_lt(high, op_aack) && (op_nack || !psn_lt(high, op_sack))) begin
          if (!op_retx) p_inflate = r_inflate + 1'b1;
          // snd_una moves to aack + 1 if that is ahead.
          moved = psn_diff(new_una, r_una);
          if (!moved[AW-1] && moved != '0) begin
            infl_left = sext32(p_inflate) - moved;
            p_inflate = infl_left[AW-1] ? '0 : infl_left[INFL_W-1:0];
            p_una = new_una;
            if (psn_lt(p_retx, p_una)) p_retx = p_una;
            if (psn_lt(p_early, p_una)) p_early = p_una;
            p_rto_valid = p_una != r_nxt;
            p_rto_at = now + TW'(csr_rto);
          end
          if (op_nack) begin
            // Go back to the PSN the receiver names (not below snd_una).
            if (psn_lt(want, p_una)) want = p_una;
            overflow = op_sack == op_aack + 1'b1;
            if (!r_recovering) begin
              p_recovery_ev = 1'b1;
              p_recovering = 1'b1;
              p_recovery = r_nxt;
              p_retx = want;
              p_early = r_nxt;
              p_nack_head = op_sack;
            end else if (overflow ? op_sack != r_nack_head : psn_lt(want, p_retx)) begin
              p_retx = want;
              if (overflow) p_nack_head = op_sack;
            end
          end else begin
            if (psn_lt(r_ooh, op_sack)) p_ooh = op_sack;
            if (csr_ooo_control && !op_retx && psn_lt(op_sack, p_ooh - csr_delta)) begin
              // From far behind the fastest path: a slow path. Shrink the
              // window and send nothing on it.
              p_pruned = 1'b1;
              p_cwnd = cwnd_add(r_cwnd, -AW'(ONE));
              if (p_recovering && !psn_lt(p_una, p_recovery)) p_recovering = 1'b0;
              awnd = awnd_of(p_cwnd, p_inflate, p_nxt, p_una);
              if (!awnd[AW-1] && awnd != '0 && (p_recovering || psn_lt(p_nxt, p_max))) begin
                p_burst_valid = 1'b1;
                p_burst_at = now + TW'(csr_rtt[31:1]);
              end
            end else if (op_ece) begin
              p_ece = 1'b1;
              p_cwnd = cwnd_add(r_cwnd, -(AW'(ONE) >> 1));
            end else if (op_backlog <= csr_max_per_ack) begin
              p_grows = 1'b1;
              growth = AW'(grow_q);
              p_cwnd = cwnd_add(r_cwnd, growth);
            end
          end
          if (!p_pruned) begin
            if (p_recovering && !psn_lt(p_una, p_recovery)) p_recovering = 1'b0;
            p_run = budget(awnd_of(p_cwnd, p_inflate, p_nxt, p_una),
                           op_nack || op_retx ? AW'(1) : AW'(csr_max_per_ack));
            p_why = WHY_ACK;
            p_after = A_ACK;
          end
        end else begin
          p_ignored = 1'b1;
        end
      end

      OP_RNR: begin
        if (!psn_lt(high, op_aack) && !psn_lt(high, op_sack)) begin
          if (!op_retx) p_inflate = r_inflate + 1'b1;
          moved = psn_diff(new_una, r_una);
          if (!moved[AW-1] && moved != '0) begin
            infl_left = sext32(p_inflate) - moved;
            p_inflate = infl_left[AW-1] ? '0 : infl_left[INFL_W-1:0];
            p_una = new_una;
            if (psn_lt(p_retx, p_una)) p_retx = p_una;
            if (psn_lt(p_early, p_una)) p_early = p_una;
            p_rto_valid = p_una != r_nxt;
            p_rto_at = now + TW'(csr_rto);
          end
          stale = psn_lt(op_sack, p_una);
          if (!stale) begin
            p_rnr_fresh = !(now < r_hold_until);
            if (op_until > r_hold_until) p_hold_until = op_until;
            if (!r_recovering) begin
              p_recovery_ev = 1'b1;
              p_recovering = 1'b1;
              p_recovery = r_nxt;
              p_early = r_nxt;
              p_nack_head = op_sack;
            end
            // Resend from snd_una once the wait is over.
            p_retx = p_una;
            p_burst_valid = 1'b0;
            p_rto_valid = 1'b1;
            p_rto_at = p_hold_until + TW'(csr_rto);
          end
        end else begin
          p_ignored = 1'b1;
        end
      end

      OP_TIMER: begin
        awnd = awnd_of(r_cwnd, r_inflate, r_nxt, r_una);
        if (r_hold_until != '0) begin
          if (!(now < r_hold_until)) begin
            // The RNR wait is over: send what the window allows, at least
            // one, on random paths.
            p_hold_until = '0;
            p_burst_valid = 1'b0;
            p_rto_valid = 1'b1;
            p_rto_at = now + TW'(csr_rto);
            p_run = (awnd[AW-1] || awnd == '0) ? AW'(1) : awnd;
          end
        end else if (r_rto_valid && r_rto_at <= now && r_una != r_nxt) begin
          // Retransmit everything unacknowledged from the initial window.
          p_rto_ev = 1'b1;
          p_recovering = 1'b1;
          p_recovery = r_nxt;
          p_retx = r_una;
          p_early = r_nxt;
          p_cwnd = initial_cwnd(csr_iw);
          inflight = psn_diff(r_nxt, r_una);
          p_inflate = inflight[INFL_W-1:0];
          p_burst_valid = 1'b0;
          p_rto_valid = 1'b1;
          p_rto_at = now + TW'(csr_rto);
          p_run = budget(awnd_of(p_cwnd, p_inflate, r_nxt, r_una), {AW{1'b1}} >> 1);
        end else begin
          if (r_rto_valid && r_rto_at <= now) p_rto_valid = 1'b0;  // nothing to resend
          if (r_burst_valid && r_burst_at <= now) begin
            p_burst_valid = 1'b0;
            p_run = budget(awnd, {AW{1'b1}} >> 1);
          end
          p_after = A_SYNC;
        end
        p_why = WHY_TIMER;
      end

      OP_READ: ;  // nothing changes
      default: ;
    endcase
  end

  // ---- EMIT: one packet per cycle ----
  logic holding;
  assign holding = now < hold_until;
  logic e_ok;
  logic [PSN_W-1:0] e_psn, e_early, e_retx, e_nxt;
  logic [TX_KIND_W-1:0] e_kind;
  logic e_sync_armed;
  always_comb begin
    e_ok = 1'b0;
    e_psn = nxt;
    e_kind = KIND_NEW;
    e_early = early;
    e_retx = retx;
    e_nxt = nxt;
    e_sync_armed = sync_armed;
    if (holding) begin
      e_ok = 1'b0;  // an RNR wait: nothing leaves
    end else if (recovering && psn_lt(retx, recovery)) begin
      e_ok = 1'b1;
      e_psn = retx;
      e_kind = KIND_RECOVERY;
      e_retx = retx + 1'b1;
    end else if (recovering && csr_strict_recovery) begin
      e_ok = 1'b0;
    end else if (psn_lt(nxt, snd_max)) begin
      if (sync_blocked(
              nxt, sync_psn, sync_v, ever_sent, now, prev_msg_sent, cwnd, csr_sync_num
          )) begin
        e_sync_armed = 1'b1;  // wake at its release time
      end else begin
        e_ok = 1'b1;
        e_psn = nxt;
        e_kind = KIND_NEW;
        e_nxt = nxt + 1'b1;
      end
    end else begin
      // No new data: resend, once each, what a later packet overtook.
      if (psn_lt(early, una)) e_early = una;
      if (psn_lt(e_early, nxt) && psn_lt(e_early, ooh)) begin
        e_ok = 1'b1;
        e_psn = e_early;
        e_kind = KIND_EARLY;
        e_early = e_early + 1'b1;
      end
    end
  end
  // Its path: the ACK's (probing a random one once per RTT with
  // probability p), or a random one.
  logic [31:0] rng1, rng2, e_rng;
  logic [VP_W-1:0] e_vp;
  logic e_probe, e_probe_due;
  assign rng1 = xorshift(rng);
  assign rng2 = xorshift(rng1);
  assign e_probe_due = why == WHY_ACK && now >= next_probe;
  // rng1 mod 10^6 for the probing draw: floor(x / 10^6) is
  // (x x 1125899907) >> 50 for every 32-bit x (1125899907 = ceil(2^50 /
  // 10^6), its error times 2^32 below 2^50).
  /* verilator lint_off UNUSEDSIGNAL */
  logic [63:0] per_million;
  /* verilator lint_on UNUSEDSIGNAL */
  logic [31:0] draw;
  assign per_million = 64'(rng1) * 64'd1125899907;
  assign draw = rng1 - 32'(per_million[63:50]) * 32'd1000000;
  always_comb begin
    e_probe = 1'b0;
    e_rng = rng;
    e_vp = op_vp;
    if (why != WHY_ACK) begin
      e_vp = op_vp_base | (rng1[VP_W-1:0] & csr_vp_mask);
      e_rng = rng1;
    end else if (e_probe_due) begin
      e_rng = rng1;
      if (draw < csr_probe_ppm) begin
        e_probe = 1'b1;
        e_vp = op_vp_base | (rng2[VP_W-1:0] & csr_vp_mask);
        e_rng = rng2;
      end
    end
  end
  // When nothing is picked: a synchronise wait, or use it or lose it.
  logic e_sync_wait, e_reduce;
  assign e_sync_wait = sync_v && sync_psn == nxt && psn_lt(nxt, snd_max);
  assign e_reduce = !e_sync_wait && why == WHY_ACK && !holding && csr_window_reduction;

  // ---- AFTER ----
  logic [AW-1:0] a_awnd;
  assign a_awnd = awnd_of(cwnd, inflate, nxt, una);
  logic a_window_open;
  assign a_window_open = !a_awnd[AW-1] && a_awnd != '0;
  assign a_release = after == A_SYNC && sync_armed &&
      !sync_blocked(nxt, sync_psn, sync_v, ever_sent, now, prev_msg_sent, cwnd, csr_sync_num);
  assign a_release_run = budget(a_awnd, AW'(csr_max_per_ack));
  // The burst timer as AFTER leaves it.
  always_comb begin
    a_burst_valid = burst_valid;
    a_burst_at = burst_at;
    if ((after == A_ACK && a_window_open && (recovering || psn_lt(nxt, snd_max))) ||
        (after == A_SET_MAX && a_window_open && !burst_valid)) begin
      a_burst_valid = 1'b1;
      a_burst_at = now + TW'(csr_rtt[31:1]);
    end
  end
  // The connection's next deadline (MpSender::wake_at()).
  logic [63:0] a_wake;
  logic a_wake_valid;
  assign a_sync_armed = sync_armed && !a_release;
  // The release time of a waiting synchronise message is a deadline too.
  logic a_wake_sync;
  assign a_wake_sync = a_sync_armed && hold_until == '0;
  logic [63:0] sync_at;
  assign sync_at = 64'(prev_msg_sent) + 64'(sync_q);
  always_comb begin
    a_wake_valid = 1'b0;
    a_wake = '1;
    if (hold_until != '0) begin
      a_wake_valid = 1'b1;
      a_wake = 64'(hold_until);
    end else begin
      if (rto_valid) begin
        a_wake_valid = 1'b1;
        a_wake = 64'(rto_at);
      end
      if (a_burst_valid && 64'(a_burst_at) < a_wake) begin
        a_wake_valid = 1'b1;
        a_wake = 64'(a_burst_at);
      end
      // (A waiting synchronise message's release comes later: WAKE.)
    end
  end

  assign grow_start = st == S_PRE && p_grows;
  assign wake_start = st == S_AFTER && ram_wr_en && a_wake_sync;

  // ---- the end of an operation: results, and the next taken ----
  assign last = (st == S_AFTER && !head_wait && !(a_release && a_release_run != '0) &&
                 !a_wake_sync) ||
      (st == S_WAKE && wake_done);
  // The deadline AFTER computed (WAKE adds the synchronise release to it).
  logic wk_valid;
  logic [63:0] wk;
  assign out_done = last;
  assign out_op = op;
  assign out_qp = qp;
  assign out_ev_ignored = ev_ignored;
  assign out_ev_pruned = ev_pruned;
  assign out_ev_ece = ev_ece;
  assign out_ev_recovery = ev_recovery;
  assign out_ev_rto = ev_rto;
  assign out_ev_restart = ev_restart;
  assign out_ev_window_reduction = ev_window_reduction;
  assign out_ev_sync_waits = ev_sync_waits;
  assign out_ev_rnr_fresh = ev_rnr_fresh;
  assign out_rng = rng;
  // (row_out holds through WAKE: AFTER's edge stored what it computed from
  // the same registers and `now`.)
  assign out_ctx = row_out;
  always_comb begin
    if (st == S_WAKE) begin
      out_wake_valid = 1'b1;
      out_wake = !wk_valid || sync_at < wk ? sync_at : wk;
    end else begin
      out_wake_valid = a_wake_valid;
      out_wake = a_wake;
    end
  end

  // ---- the sequential part ----
  always_ff @(posedge clk) begin
    out_tx_valid <= 1'b0;
    out_sync_pop <= 1'b0;
    if (ram_wr_en) wb_row <= row_out;
    if (!rst_n) begin
      st <= S_IDLE;
      rng <= cfg_seed == '0 ? 32'h9E37_79B9 : cfg_seed;
    end else if (!head_wait) begin
      case (st)
        S_IDLE: ;  // (taken below)

        S_PRE, S_GROW:
        if (st == S_PRE && p_grows) begin
          // The window grows by 2^32 / cwnd: ask the divider, decide when
          // it has the quotient.
          st <= S_GROW;
        end else if (st == S_PRE || grow_done) begin
          {sync_armed, prev_msg_sent, hold_until, ever_sent, rto_at, rto_valid, next_probe,
           burst_at, burst_valid, last_send, early, nack_head, retx, recovery, recovering, ooh,
           inflate, cwnd, snd_max, nxt, una} <= {
            p_sync_armed,
            p_prev_msg_sent,
            p_hold_until,
            p_ever_sent,
            p_rto_at,
            p_rto_valid,
            p_next_probe,
            p_burst_at,
            p_burst_valid,
            p_last_send,
            p_early,
            p_nack_head,
            p_retx,
            p_recovery,
            p_recovering,
            p_ooh,
            p_inflate,
            p_cwnd,
            p_max,
            p_nxt,
            p_una
          };
          run_left <= p_run;
          why <= p_why;
          after <= p_after;
          ev_ignored <= p_ignored;
          ev_pruned <= p_pruned;
          ev_ece <= p_ece;
          ev_recovery <= p_recovery_ev;
          ev_rto <= p_rto_ev;
          ev_restart <= p_restart;
          ev_window_reduction <= 1'b0;
          ev_sync_waits <= '0;
          ev_rnr_fresh <= p_rnr_fresh;
          st <= p_run != '0 ? S_EMIT : S_AFTER;
        end

        S_EMIT: begin
          early <= e_early;
          sync_armed <= e_sync_armed;
          if (e_ok) begin
            retx <= e_retx;
            nxt <= e_nxt;
            rng <= e_rng;
            if (e_probe_due) next_probe <= now + TW'(csr_rtt);
            last_send <= now;
            ever_sent <= 1'b1;
            if (!rto_valid) begin
              rto_valid <= 1'b1;
              rto_at <= now + TW'(csr_rto);
            end
            if (e_kind == KIND_NEW) begin
              prev_msg_sent <= now;
              out_sync_pop <= sync_v && sync_psn == e_psn;
            end
            out_tx_valid <= 1'b1;
            out_tx_psn <= e_psn;
            out_tx_vp <= e_vp;
            out_tx_kind <= e_kind;
            out_tx_probe <= e_probe;
            out_tx_timer <= why == WHY_TIMER;
            run_left <= run_left - 1'b1;
            if (run_left == AW'(1)) st <= S_AFTER;
          end else begin
            if (e_sync_wait) ev_sync_waits <= ev_sync_waits + 1'b1;
            else if (e_reduce) begin
              ev_window_reduction <= 1'b1;
              cwnd <= cwnd_add(cwnd, -AW'(ONE));
            end
            st <= S_AFTER;
          end
        end

        S_AFTER: begin
          burst_valid <= a_burst_valid;
          burst_at <= a_burst_at;
          sync_armed <= a_sync_armed;
          if (a_release && a_release_run != '0) begin
            // The synchronise message is released: a second run.
            run_left <= a_release_run;
            why <= WHY_TIMER;
            after <= A_NONE;
            st <= S_EMIT;
          end else begin
            // The last cycle (out_done), or the row is written back and
            // the divider computes the synchronise release time.
            wk_valid <= a_wake_valid;
            wk <= a_wake;
            st <= a_wake_sync ? S_WAKE : S_IDLE;
          end
        end

        S_WAKE: if (wake_done) st <= S_IDLE;

        default: st <= S_IDLE;
      endcase
      // Taken when idle or in the last cycle of the operation before (this
      // overrides that cycle's next state).
      if (in_valid && in_ready) begin
        op <= in_op;
        qp <= in_qp;
        now <= in_now;
        op_psn <= in_psn;
        op_vp <= in_vp;
        op_vp_base <= in_vp_base;
        op_sack <= in_sack;
        op_aack <= in_aack;
        op_ece <= in_ece;
        op_retx <= in_retx;
        op_nack <= in_nack;
        op_backlog <= in_backlog;
        op_until <= in_until;
        fwd <= ram_wr_en && in_qp == qp;
        st <= S_PRE;
      end
    end
  end
endmodule

`default_nettype wire
