// Unsigned restoring divider, RADIX_BITS quotient bits per cycle: divides
// {rem_init, dividend} by `divisor` in STEPS / RADIX_BITS cycles. The
// caller guarantees rem_init < divisor, so the quotient fits STEPS bits: a
// dividend whose top bits are known to give zero quotient bits starts with
// them as rem_init and saves those cycles. RADIX_BITS chained subtractors
// instead of a combinational array divider (which costs thousands of LUTs
// per instance).
`default_nettype none

module mprdma_divider #(
    // Bits of the divisor (and of the remainder).
    parameter int D_W = 32,
    // Quotient bits computed: the dividend's low part. A multiple of
    // RADIX_BITS.
    parameter int STEPS = 16,
    // Quotient bits per cycle (subtractors in a chain).
    parameter int RADIX_BITS = 1
) (
    input wire logic clk,
    input wire logic rst_n,
    // Start a division (ignored while busy).
    input wire logic start,
    input wire logic [D_W-1:0] rem_init,  // the dividend's high part, < divisor
    input wire logic [STEPS-1:0] dividend,  // the dividend's low part
    input wire logic [D_W-1:0] divisor,  // not zero
    output logic busy,
    // High for one cycle when quotient holds the result (STEPS / RADIX_BITS
    // cycles after start).
    output logic done,
    output logic [STEPS-1:0] quotient
);
  localparam int CYCLES = STEPS / RADIX_BITS;
  localparam int CNT_W = $clog2(CYCLES + 1);
  logic [D_W-1:0] rem, div;
  logic [STEPS-1:0] bits;  // dividend bits still to bring down, then quotient bits
  logic [CNT_W-1:0] left;
  // RADIX_BITS steps: bring down the next dividend bit, subtract if it
  // fits (the shifted remainder can reach 2 x divisor - 1: one bit wider).
  logic [D_W-1:0] rem_next;
  logic [STEPS-1:0] bits_next;
  always_comb begin
    logic [D_W:0] shifted, diff;
    rem_next = rem;
    bits_next = bits;
    for (int i = 0; i < RADIX_BITS; i++) begin
      shifted = {rem_next, bits_next[STEPS-1]};
      diff = shifted - {1'b0, div};
      rem_next = !diff[D_W] ? diff[D_W-1:0] : shifted[D_W-1:0];
      bits_next = {bits_next[STEPS-2:0], !diff[D_W]};
    end
  end

  always_ff @(posedge clk) begin
    done <= 1'b0;
    if (!rst_n) begin
      busy <= 1'b0;
    end else if (!busy) begin
      if (start) begin
        busy <= 1'b1;
        rem <= rem_init;
        div <= divisor;
        bits <= dividend;
        left <= CNT_W'(CYCLES);
      end
    end else begin
      rem <= rem_next;
      bits <= bits_next;
      left <= left - 1'b1;
      if (left == CNT_W'(1)) begin
        busy <= 1'b0;
        done <= 1'b1;
      end
    end
  end
  assign quotient = bits;
endmodule

`default_nettype wire
