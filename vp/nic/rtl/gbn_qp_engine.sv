// RoCEv2 go-back-N requester and responder PSN logic, with the retry and
// RNR budgets: the baseline transport of commodity RDMA NICs, one row per
// QP. The golden model is vp/nic/transport/gbn/gbn_engine.cc; every output
// and context field here must equal its own for the same calls.
//
// Pipeline, one operation per cycle, any mix of QPs (as the MP-RDMA
// receiver's):
//   edge 0: the operation is taken; its row read from the context RAM.
//   edge 1: the row (or, right after a write to the same row, the write-
//           back register: forwarding) is updated and written back; the
//           result, the QP's next deadline and the row are registered.
// The deadline (RTO, RNR wait, go-back delay) goes out after every
// operation, so the NIC needs no scan of the QPs.
`default_nettype none

module gbn_qp_engine #(
    // Bits of a QP index (context-RAM rows: 2^QP_W).
    parameter int QP_W = mprdma_rtl_pkg::QP_IDX_W
) (
    input wire logic clk,
    input wire logic rst_n,

    // Configuration: from a go-back event to the first resent packet
    // (nic.gbn.go_back_delay), cycles; 0 turns around at once.
    input wire logic [mprdma_rtl_pkg::TIME_W-1:0] cfg_go_back_delay,

    // One operation (GBN_OP_*), taken in the cycle in_valid is high.
    input wire logic in_valid,
    input wire logic [mprdma_rtl_pkg::GBN_OP_W-1:0] in_op,
    input wire logic [QP_W-1:0] in_qp,
    input wire logic [mprdma_rtl_pkg::TIME_W-1:0] in_now,  // the current NIC cycle
    input wire logic [mprdma_rtl_pkg::PSN_W-1:0] in_psn,  // PSN of the operation (see the ops)
    input wire logic [mprdma_rtl_pkg::PSN_W-1:0] in_npsn,  // ON_SENT, COMMIT: PSNs covered
    input wire logic [mprdma_rtl_pkg::GBN_KIND_W-1:0] in_kind,  // ON_ACK: its kind
    input wire logic [mprdma_rtl_pkg::PSN_W-1:0] in_ack_limit,  // ON_ACK: first PSN whose response is missing
    input wire logic [mprdma_rtl_pkg::TIME_W-1:0] in_rnr_delay,  // ON_ACK (RNR NAK): the wait
    input wire logic in_ack_req,  // COMMIT: the request asked for an ACK
    input wire logic in_implicit,  // COMMIT: a response acknowledges it (READ, atomic)
    // OPEN, SET_REQ: the QP's parameters.
    input wire logic [mprdma_rtl_pkg::GBN_RETRY_W-1:0] in_retry_cnt,
    input wire logic [mprdma_rtl_pkg::GBN_RETRY_W-1:0] in_rnr_retry,  // 7: retry for ever
    input wire logic [mprdma_rtl_pkg::TIME_W-1:0] in_ack_timeout,  // cycles; 0: never
    input wire logic [mprdma_rtl_pkg::VP_W-1:0] in_udp_sport,
    input wire logic [mprdma_rtl_pkg::GBN_COUNT_W-1:0] in_ack_coalesce,

    // The result, one cycle after the operation was taken.
    output logic out_valid,
    output logic [mprdma_rtl_pkg::GBN_OP_W-1:0] out_op,
    output logic [QP_W-1:0] out_qp,
    // NEXT_TX: the grant.
    output logic out_send,
    output logic [mprdma_rtl_pkg::PSN_W-1:0] out_tx_psn,
    output logic [mprdma_rtl_pkg::VP_W-1:0] out_tx_sport,
    output logic out_retransmit,
    // ON_ACK, ON_TIMER: what it did.
    output logic out_progress,
    output logic out_accept,
    output logic out_rewound,
    output logic [mprdma_rtl_pkg::GBN_ERR_W-1:0] out_error,
    // CLASSIFY: the verdict; COMMIT: the ACK to send.
    output logic [mprdma_rtl_pkg::GBN_VERDICT_W-1:0] out_verdict,
    output logic out_ack,
    output logic [mprdma_rtl_pkg::PSN_W-1:0] out_ack_psn,
    // The QP's next deadline (GbnEngine::wake_at).
    output logic out_wake_valid,
    output logic [mprdma_rtl_pkg::TIME_W-1:0] out_wake,
    // The row as written back.
    output logic [mprdma_rtl_pkg::GBN_CTX_W-1:0] out_ctx
);
  // The package's names, used bare below (Yosys 0.23 parses no `import`).
  localparam int PSN_W = mprdma_rtl_pkg::PSN_W;
  localparam int VP_W = mprdma_rtl_pkg::VP_W;
  localparam int TW = mprdma_rtl_pkg::TIME_W;
  localparam int OP_W = mprdma_rtl_pkg::GBN_OP_W;
  localparam int KIND_W = mprdma_rtl_pkg::GBN_KIND_W;
  localparam int RW = mprdma_rtl_pkg::GBN_RETRY_W;
  localparam int CW = mprdma_rtl_pkg::GBN_COUNT_W;
  localparam int CTX_W = mprdma_rtl_pkg::GBN_CTX_W;
  localparam logic [OP_W-1:0] OP_OPEN = OP_W'(mprdma_rtl_pkg::GBN_OP_OPEN);
  localparam logic [OP_W-1:0] OP_SET_REQ = OP_W'(mprdma_rtl_pkg::GBN_OP_SET_REQ);
  localparam logic [OP_W-1:0] OP_SET_MAX = OP_W'(mprdma_rtl_pkg::GBN_OP_SET_MAX);
  localparam logic [OP_W-1:0] OP_NEXT_TX = OP_W'(mprdma_rtl_pkg::GBN_OP_NEXT_TX);
  localparam logic [OP_W-1:0] OP_ON_SENT = OP_W'(mprdma_rtl_pkg::GBN_OP_ON_SENT);
  localparam logic [OP_W-1:0] OP_ON_ACK = OP_W'(mprdma_rtl_pkg::GBN_OP_ON_ACK);
  localparam logic [OP_W-1:0] OP_ON_TIMER = OP_W'(mprdma_rtl_pkg::GBN_OP_ON_TIMER);
  localparam logic [OP_W-1:0] OP_CLASSIFY = OP_W'(mprdma_rtl_pkg::GBN_OP_CLASSIFY);
  localparam logic [OP_W-1:0] OP_COMMIT = OP_W'(mprdma_rtl_pkg::GBN_OP_COMMIT);
  localparam logic [OP_W-1:0] OP_NAK_SENT = OP_W'(mprdma_rtl_pkg::GBN_OP_NAK_SENT);
  localparam logic [OP_W-1:0] OP_READ = OP_W'(mprdma_rtl_pkg::GBN_OP_READ);
  localparam logic [KIND_W-1:0] K_ACK = KIND_W'(mprdma_rtl_pkg::GBN_KIND_ACK);
  localparam logic [KIND_W-1:0] K_NAK_SEQ = KIND_W'(mprdma_rtl_pkg::GBN_KIND_NAK_SEQ);
  localparam logic [KIND_W-1:0] K_NAK_RNR = KIND_W'(mprdma_rtl_pkg::GBN_KIND_NAK_RNR);
  localparam logic [KIND_W-1:0] K_NAK_FATAL = KIND_W'(mprdma_rtl_pkg::GBN_KIND_NAK_FATAL);
  localparam logic [KIND_W-1:0] K_READ_RESP = KIND_W'(mprdma_rtl_pkg::GBN_KIND_READ_RESP);
  localparam logic [KIND_W-1:0] K_ATOMIC_ACK = KIND_W'(mprdma_rtl_pkg::GBN_KIND_ATOMIC_ACK);
  // AckResult::Error and RxVerdict codes, in their C++ order.
  localparam logic [1:0] ERR_NONE = 2'd0;
  localparam logic [1:0] ERR_RETRY = 2'd1;
  localparam logic [1:0] ERR_RNR = 2'd2;
  localparam logic [1:0] ERR_FATAL = 2'd3;
  localparam logic [1:0] V_ACCEPT = 2'd0;
  localparam logic [1:0] V_DUPLICATE = 2'd1;
  localparam logic [1:0] V_NAK_SEQ = 2'd2;
  localparam logic [1:0] V_DROP = 2'd3;

  // psn_diff(a, b) < 0 and > 0 in 24-bit PSN space.
  function automatic logic psn_lt(input logic [PSN_W-1:0] a, input logic [PSN_W-1:0] b);
    logic [PSN_W-1:0] d;
    d = a - b;
    psn_lt = d[PSN_W-1];
  endfunction
  function automatic logic psn_gt(input logic [PSN_W-1:0] a, input logic [PSN_W-1:0] b);
    psn_gt = psn_lt(b, a);
  endfunction

  // ---- edge 0: take the operation, read its row ----
  logic s1_valid;
  logic [OP_W-1:0] s1_op;
  logic [QP_W-1:0] s1_qp;
  logic [TW-1:0] s1_now, s1_rnr_delay, s1_ack_timeout;
  logic [PSN_W-1:0] s1_psn, s1_npsn, s1_ack_limit;
  logic [KIND_W-1:0] s1_kind;
  logic s1_ack_req, s1_implicit;
  logic [RW-1:0] s1_retry_cnt, s1_rnr_retry;
  logic [VP_W-1:0] s1_udp_sport;
  logic [CW-1:0] s1_ack_coalesce;

  logic [CTX_W-1:0] ram_rd_data, next_row;
  logic ram_wr_en;
  mprdma_ctx_ram #(
      .WIDTH (CTX_W),
      .ADDR_W(QP_W)
  ) ctx_ram (
      .clk,
      .rd_en(in_valid),
      .rd_addr(in_qp),
      .rd_data(ram_rd_data),
      .wr_en(ram_wr_en),
      .wr_addr(s1_qp),
      .wr_data(next_row)
  );

  always_ff @(posedge clk) begin
    if (!rst_n) s1_valid <= 1'b0;
    else s1_valid <= in_valid;
    s1_op <= in_op;
    s1_qp <= in_qp;
    s1_now <= in_now;
    s1_psn <= in_psn;
    s1_npsn <= in_npsn;
    s1_kind <= in_kind;
    s1_ack_limit <= in_ack_limit;
    s1_rnr_delay <= in_rnr_delay;
    s1_ack_req <= in_ack_req;
    s1_implicit <= in_implicit;
    s1_retry_cnt <= in_retry_cnt;
    s1_rnr_retry <= in_rnr_retry;
    s1_ack_timeout <= in_ack_timeout;
    s1_udp_sport <= in_udp_sport;
    s1_ack_coalesce <= in_ack_coalesce;
  end

  // ---- between edge 0 and edge 1: the operation on the row ----
  logic wb_valid;
  logic [QP_W-1:0] wb_qp;
  logic [CTX_W-1:0] wb_row, cur_row;
  assign cur_row = (wb_valid && wb_qp == s1_qp) ? wb_row : ram_rd_data;

  // The row's fields, as read (c_) and as written (n_).
  logic c_req, c_dl_valid, c_rewound, c_nak_sent;
  logic [PSN_W-1:0] c_una, c_nxt, c_max, c_high, c_epsn;
  logic [RW-1:0] c_retry_left, c_rnr_left, c_retry_cnt, c_rnr_retry;
  logic [TW-1:0] c_deadline, c_hold, c_ack_timeout;
  logic [CW-1:0] c_since_ack, c_ack_coalesce;
  logic [VP_W-1:0] c_sport;
  assign {c_ack_coalesce, c_sport, c_ack_timeout, c_rnr_retry, c_retry_cnt, c_since_ack,
          c_nak_sent, c_epsn, c_rewound, c_hold, c_deadline, c_dl_valid, c_rnr_left,
          c_retry_left, c_high, c_max, c_nxt, c_una, c_req} = cur_row;
  logic n_req, n_dl_valid, n_rewound, n_nak_sent;
  logic [PSN_W-1:0] n_una, n_nxt, n_max, n_high, n_epsn;
  logic [RW-1:0] n_retry_left, n_rnr_left, n_retry_cnt, n_rnr_retry;
  logic [TW-1:0] n_deadline, n_hold, n_ack_timeout;
  logic [CW-1:0] n_since_ack, n_ack_coalesce;
  logic [VP_W-1:0] n_sport;
  // (A deadline that is not running is stored as 0.)
  assign next_row = {
    n_ack_coalesce,
    n_sport,
    n_ack_timeout,
    n_rnr_retry,
    n_retry_cnt,
    n_since_ack,
    n_nak_sent,
    n_epsn,
    n_rewound,
    n_hold,
    n_dl_valid ? n_deadline : '0,
    n_dl_valid,
    n_rnr_left,
    n_retry_left,
    n_high,
    n_max,
    n_nxt,
    n_una,
    n_req
  };

  logic send, retransmit, progress, accept, rewound, ack;
  logic [1:0] error, verdict;
  logic [PSN_W-1:0] ack_psn, nak_una, new_una, to;
  logic nak, ahead, stop;
  logic [TW-1:0] back_at;
  assign back_at = s1_now + cfg_go_back_delay;

  always_comb begin
    n_req = c_req;
    n_una = c_una;
    n_nxt = c_nxt;
    n_max = c_max;
    n_high = c_high;
    n_retry_left = c_retry_left;
    n_rnr_left = c_rnr_left;
    n_dl_valid = c_dl_valid;
    n_deadline = c_deadline;
    n_hold = c_hold;
    n_rewound = c_rewound;
    n_epsn = c_epsn;
    n_nak_sent = c_nak_sent;
    n_since_ack = c_since_ack;
    n_retry_cnt = c_retry_cnt;
    n_rnr_retry = c_rnr_retry;
    n_ack_timeout = c_ack_timeout;
    n_sport = c_sport;
    n_ack_coalesce = c_ack_coalesce;
    send = 1'b0;
    retransmit = 1'b0;
    progress = 1'b0;
    accept = 1'b0;
    rewound = 1'b0;
    error = ERR_NONE;
    verdict = V_DROP;
    ack = 1'b0;
    ack_psn = '0;
    nak = 1'b0;
    nak_una = s1_psn;
    new_una = s1_psn + 1'b1;
    to = '0;
    ahead = 1'b0;
    stop = 1'b0;
    ram_wr_en = s1_valid && s1_op != OP_READ && s1_op != OP_NEXT_TX;
    case (s1_op)
      OP_OPEN: begin
        // A fresh row: the QP's parameters and the responder's ePSN.
        n_req = 1'b0;
        n_una = '0;
        n_nxt = '0;
        n_max = '0;
        n_high = '0;
        n_retry_left = '0;
        n_rnr_left = '0;
        n_dl_valid = 1'b0;
        n_deadline = '0;
        n_hold = '0;
        n_rewound = 1'b0;
        n_epsn = s1_psn;
        n_nak_sent = 1'b0;
        n_since_ack = '0;
        n_retry_cnt = s1_retry_cnt;
        n_rnr_retry = s1_rnr_retry;
        n_ack_timeout = s1_ack_timeout;
        n_sport = s1_udp_sport;
        n_ack_coalesce = s1_ack_coalesce;
      end
      OP_SET_REQ: begin
        n_retry_cnt = s1_retry_cnt;
        n_rnr_retry = s1_rnr_retry;
        n_ack_timeout = s1_ack_timeout;
        n_sport = s1_udp_sport;
        n_ack_coalesce = s1_ack_coalesce;
        n_req = 1'b1;
        n_una = s1_psn;
        n_nxt = s1_psn;
        n_max = s1_psn;
        n_high = s1_psn;
        n_retry_left = s1_retry_cnt;
        n_rnr_left = s1_rnr_retry;
        n_dl_valid = 1'b0;
        n_hold = '0;
      end
      OP_SET_MAX: n_max = s1_psn;
      OP_NEXT_TX: begin
        if (c_req && !(s1_now < c_hold) && psn_lt(c_nxt, c_max)) begin
          send = 1'b1;
          retransmit = psn_lt(c_nxt, c_high);
        end
      end
      OP_ON_SENT: begin
        n_nxt = s1_psn + s1_npsn;
        if (psn_gt(n_nxt, c_high)) n_high = n_nxt;
        if (!c_dl_valid) begin
          // Arm the retransmission timer.
          n_dl_valid = c_ack_timeout != '0 && c_una != n_nxt;
          n_deadline = s1_now + c_ack_timeout;
        end
      end
      OP_ON_ACK: begin
        nak = s1_kind == K_NAK_SEQ || s1_kind == K_NAK_RNR || s1_kind == K_NAK_FATAL;
        // A response for a PSN never sent is ignored; a NAK may name the
        // next PSN to send.
        if (nak ? !psn_gt(s1_psn, c_high) : psn_lt(s1_psn, c_high)) begin
          nak_una = psn_gt(s1_psn, s1_ack_limit) ? s1_ack_limit : s1_psn;
          // The snd_una this event acknowledges up to (advance).
          case (s1_kind)
            K_ACK: new_una = psn_gt(s1_psn + 1'b1, s1_ack_limit) ? s1_ack_limit : s1_psn + 1'b1;
            K_READ_RESP, K_ATOMIC_ACK: new_una = s1_psn + 1'b1;
            default: new_una = nak_una;
          endcase
          ahead = psn_gt(nak_una, c_una);
          // advance(): only for the kinds that acknowledge, and a response
          // only when it is the next expected.
          if ((s1_kind != K_READ_RESP && s1_kind != K_ATOMIC_ACK) || s1_psn == c_una) begin
            if (psn_gt(new_una, c_una)) begin
              n_una = new_una;
              if (psn_lt(n_nxt, n_una)) n_nxt = n_una;
              progress = 1'b1;
              n_retry_left = c_retry_cnt;
              n_rnr_left = c_rnr_retry;
              n_rewound = 1'b0;
              n_dl_valid = c_ack_timeout != '0 && n_una != n_nxt;
              n_deadline = s1_now + c_ack_timeout;
            end
          end
          case (s1_kind)
            K_ACK:
            if (psn_gt(s1_psn + 1'b1, s1_ack_limit) && !n_rewound) begin
              // Acknowledged beyond a READ/atomic whose response is
              // missing: it was lost; resend from it, once.
              n_rewound = 1'b1;
              to = n_una;
            end else stop = 1'b1;
            K_NAK_SEQ:
            if (!ahead && n_retry_left == '0) begin
              error = ERR_RETRY;
              stop = 1'b1;
            end else begin
              if (!ahead) n_retry_left = n_retry_left - 1'b1;
              to = n_una;
            end
            K_NAK_RNR:
            if (c_rnr_retry != RW'(7) && n_rnr_left == '0) begin
              error = ERR_RNR;
              stop = 1'b1;
            end else begin
              if (c_rnr_retry != RW'(7)) n_rnr_left = n_rnr_left - 1'b1;
              n_hold = s1_now + s1_rnr_delay;
              to = n_una;
            end
            K_NAK_FATAL: begin
              error = ERR_FATAL;
              stop = 1'b1;
            end
            default:  // a READ response or atomic ACK
            if (s1_psn == c_una) begin
              accept = 1'b1;
              stop = 1'b1;
            end else if (psn_gt(s1_psn, c_una) && !c_rewound) begin
              // A response is missing ahead this one: go back to it.
              n_rewound = 1'b1;
              to = n_una;
            end else stop = 1'b1;
          endcase
          if (!stop) begin
            // rewind(): back to `to`, after the go-back delay.
            if (psn_gt(n_nxt, to)) n_nxt = to;
            rewound = 1'b1;
            if (cfg_go_back_delay != '0 && back_at > n_hold) n_hold = back_at;
          end
        end
      end
      OP_ON_TIMER: begin
        if (c_hold != '0 && !(s1_now < c_hold)) n_hold = '0;
        if (c_dl_valid && !(s1_now < c_deadline)) begin
          if (c_una == c_nxt && c_una == c_high) begin
            n_dl_valid = 1'b0;
          end else if (c_retry_left == '0) begin
            error = ERR_RETRY;
            n_dl_valid = 1'b0;
          end else begin
            n_retry_left = c_retry_left - 1'b1;
            n_rewound = 1'b0;
            if (psn_gt(c_nxt, c_una)) n_nxt = c_una;
            rewound = 1'b1;
            if (cfg_go_back_delay != '0 && back_at > n_hold) n_hold = back_at;
            n_deadline = s1_now + c_ack_timeout;
          end
        end
      end
      OP_CLASSIFY: begin
        if (s1_psn == c_epsn) verdict = V_ACCEPT;
        else if (psn_lt(s1_psn, c_epsn)) verdict = V_DUPLICATE;
        else if (c_nak_sent) verdict = V_DROP;
        else begin
          n_nak_sent = 1'b1;
          verdict = V_NAK_SEQ;
        end
      end
      OP_COMMIT: begin
        n_epsn = c_epsn + s1_npsn;
        n_nak_sent = 1'b0;
        if (s1_implicit) begin
          n_since_ack = '0;
        end else begin
          n_since_ack = c_since_ack + 1'b1;
          if (s1_ack_req || n_since_ack >= c_ack_coalesce) begin
            n_since_ack = '0;
            ack = 1'b1;
            ack_psn = n_epsn - 1'b1;
          end
        end
      end
      OP_NAK_SENT: n_nak_sent = 1'b1;
      default: ;
    endcase
  end

  // The QP's next deadline: the RTO, or an earlier end of a wait.
  logic wake_valid;
  logic [TW-1:0] wake;
  always_comb begin
    wake_valid = n_dl_valid;
    wake = n_deadline;
    if (n_hold != '0 && (!n_dl_valid || n_hold < n_deadline)) begin
      wake_valid = 1'b1;
      wake = n_hold;
    end
  end

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
    out_send <= send;
    out_tx_psn <= c_nxt;
    out_tx_sport <= c_sport;
    out_retransmit <= retransmit;
    out_progress <= progress;
    out_accept <= accept;
    out_rewound <= rewound;
    out_error <= error;
    out_verdict <= verdict;
    out_ack <= ack;
    out_ack_psn <= ack_psn;
    out_wake_valid <= wake_valid;
    out_wake <= wake;
    out_ctx <= next_row;
  end
endmodule

`default_nettype wire
