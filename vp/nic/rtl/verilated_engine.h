// What the C++ wrappers of the Verilated engines (MpRxRtl, MpTxRtl,
// GbnQpRtl) share: reset, waveforms, tear-down and fault injection into the
// context RAM. Only their .cc files include it: it needs the Verilated
// headers. Every engine has ports clk, rst_n (active low) and in_valid.
#pragma once

#include <cstdint>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>

// Verilator's headers are not ours to fix.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wnon-virtual-dtor"
#include "verilated.h"
#include "verilated_fst_c.h"
#pragma GCC diagnostic pop

namespace mprdma::nic::rtl {

// Holds reset for two clock edges with no operation offered; the
// configuration inputs must be set before.
template <class Top>
void reset_engine(Top& t) {
  t.in_valid = 0;
  t.rst_n = 0;
  for (int i = 0; i < 2; ++i) {
    t.clk = 1;
    t.eval();
    t.clk = 0;
    t.eval();
  }
  t.rst_n = 1;
}

// Closes the waveform file, if one is open.
inline void close_fst(std::unique_ptr<VerilatedFstC>& trace) {
  if (!trace) return;
  trace->close();
  trace.reset();
}

// Every signal of `top` into a new FST file at `path` (replacing `trace`'s
// file). `who` names the engine in errors: std::logic_error when the
// engine was not made traceable, std::runtime_error when the file cannot
// be written (VerilatedFstC would only say so on stderr).
template <class Top>
void open_fst(const char* who, bool traceable, Top& top, std::unique_ptr<VerilatedFstC>& trace,
              const std::string& path) {
  if (!traceable)
    throw std::logic_error(std::string(who) + ": waveforms need an engine made traceable");
  close_fst(trace);
  {
    std::ofstream probe(path, std::ios::binary | std::ios::trunc);
    if (!probe)
      throw std::runtime_error(std::string(who) + ": cannot write the waveform file '" + path +
                               "'");
  }
  trace = std::make_unique<VerilatedFstC>();
  top.trace(trace.get(), 99);
  trace->open(path.c_str());
}

// Ends the model, its waveform first. A Verilated model's scopes
// unregister from the thread's current context, which is the last one made
// on this thread, not necessarily theirs (Verilator 5.006): with several
// engines per thread (one per NIC) it is pointed at the model's own, or a
// model outliving another context would reach into freed memory.
template <class Top>
void destroy_engine(VerilatedContext* ctx, std::unique_ptr<VerilatedFstC>& trace,
                    std::unique_ptr<Top>& top) {
  Verilated::threadContextp(ctx);
  close_fst(trace);
  top->final();
  top.reset();
}

// Inverts bit `bit` of row `row` of a context RAM of `rows` rows of
// `width` bits (`mem`: the Verilated array of 32-bit words per row).
template <class Mem>
void flip_row_bit(const char* who, Mem& mem, uint32_t rows, uint32_t width, uint32_t row,
                  uint32_t bit) {
  if (row >= rows || bit >= width)
    throw std::out_of_range(std::string(who) + ": no bit " + std::to_string(bit) + " of row " +
                            std::to_string(row));
  mem[row][bit / 32] ^= 1u << (bit % 32);
}

}  // namespace mprdma::nic::rtl
