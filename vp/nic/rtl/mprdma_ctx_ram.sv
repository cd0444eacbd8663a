// Per-connection context memory: a simple dual-port RAM with one
// synchronous read port and one write port (one BRAM/URAM column on an
// FPGA, an SRAM macro on silicon). A read in the same cycle as a write to
// the same row returns the old row; the engines forward around it.
`default_nettype none

module mprdma_ctx_ram #(
    // Bits of one row (one connection's context).
    parameter int WIDTH = 8,
    // Bits of a row index; the RAM holds 2^ADDR_W rows.
    parameter int ADDR_W = 4
) (
    input wire logic clk,
    // Read port: rd_data holds row rd_addr one cycle after rd_en.
    input wire logic rd_en,
    input wire logic [ADDR_W-1:0] rd_addr,
    output logic [WIDTH-1:0] rd_data,
    // Write port.
    input wire logic wr_en,
    input wire logic [ADDR_W-1:0] wr_addr,
    input wire logic [WIDTH-1:0] wr_data
);
  // Public to the simulator: fault-injection tests flip bits of it.
  logic [WIDTH-1:0] mem[2**ADDR_W] /*verilator public_flat_rw*/;

  always_ff @(posedge clk) begin
    if (rd_en) rd_data <= mem[rd_addr];
    if (wr_en) mem[wr_addr] <= wr_data;
  end
endmodule

`default_nettype wire
