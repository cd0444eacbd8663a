// The Verilated MP-RDMA receiver engine against its golden model
// (MpReceiver), in lockstep: seeded random operation sequences over several
// connections (back-to-back operations on one row, PSN and bitmap wrap,
// duplicates, overflow and synchronise drops), directed cases, and fault
// injection that lockstep must name.
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <random>
#include <string>

#include "mprdma/rtl_params.h"
#include "vp/nic/rtl/mp_rdma_rx_lockstep.h"

namespace mprdma::nic::rtl {
namespace {

namespace p = mprdma::rtl;

// Operations per random run: MPRDMA_RTL_OPS, else 500,000 (two runs, one
// per overflow-NACK mode, give CI its million).
uint64_t ops_per_run() {
  const char* env = std::getenv("MPRDMA_RTL_OPS");
  return env ? std::strtoull(env, nullptr, 10) : 500000;
}

struct Coverage {
  uint64_t place = 0, duplicate = 0, overflow_drop = 0, sync_drop = 0, silent_drop = 0;
  uint64_t completions = 0, back_to_back = 0, psn_wraps = 0, head_runs_over_8 = 0, reads = 0;
};

class RandomOps {
 public:
  RandomOps(uint64_t seed, uint32_t rows) : gen_(seed), rows_(rows) {}

  // The next operation, from the golden model's state (what a sender
  // around it would plausibly send, and some of what it would not).
  RxOp next(const MpRxLockstep& ls, uint32_t last_row) {
    RxOp op;
    // Half the time the same row as the operation before: back to back.
    op.row = pick(2) == 0 ? last_row : static_cast<uint32_t>(pick(rows_));
    const MpReceiver* g = ls.golden(op.row);
    if (!g || pick(20000) == 0) {
      op.kind = RxOpKind::init;
      // A third start just below the PSN wrap.
      op.data.psn = pick(3) == 0 ? kPsnMask - static_cast<uint32_t>(pick(3 * p::RX_SLOTS))
                                 : static_cast<uint32_t>(pick(kPsnMask + 1));
      return op;
    }
    if (pick(100) == 0) {
      op.kind = RxOpKind::read;
      return op;
    }
    MpData& d = op.data;
    const uint32_t L = p::RX_SLOTS;
    const uint64_t where = pick(100);
    int64_t off;
    if (where < 70)
      off = static_cast<int64_t>(pick(L / 4));  // near the head: in-order runs form
    else if (where < 85)
      off = static_cast<int64_t>(pick(L));  // anywhere in the bitmap
    else if (where < 92)
      off = static_cast<int64_t>(L + pick(8));  // just beyond it
    else if (where < 97)
      off = -1 - static_cast<int64_t>(pick(8));  // behind the head
    else
      off = static_cast<int64_t>(pick(kPsnMask + 1));  // anywhere at all
    d.psn = psn_add(g->rcv_nxt(), off);
    d.vp = static_cast<uint16_t>(pick(1u << 16));
    d.ce = pick(4) == 0;
    d.retx = pick(8) == 0;
    d.tail = pick(3) == 0;
    d.completion = d.tail && pick(2) == 0;
    d.sync = pick(10) == 0;
    d.ipsn = d.sync ? static_cast<uint32_t>(pick(4)) : static_cast<uint32_t>(pick(2));
    return op;
  }

 private:
  uint64_t pick(uint64_t n) { return gen_() % n; }
  std::mt19937_64 gen_;
  uint32_t rows_;
};

void run_random(MpOverflowNack mode, uint64_t seed) {
  MpRxLockstep ls(mode);
  RandomOps gen(seed, 6);
  Coverage cov;
  uint32_t last_row = 0;
  const uint64_t n = ops_per_run();
  for (uint64_t i = 0; i < n; ++i) {
    const RxOp op = gen.next(ls, last_row);
    if (op.row == last_row && i) ++cov.back_to_back;
    last_row = op.row;
    const MpReceiver* g = ls.golden(op.row);
    const uint32_t before = g && op.kind == RxOpKind::data ? g->rcv_nxt() : 0;
    const auto c = g ? g->counters() : MpReceiver::Counters{};
    auto diverged = ls.step(&op);
    ASSERT_FALSE(diverged) << "seed " << seed << "\n" << *diverged;
    if (op.kind == RxOpKind::read) ++cov.reads;
    if (op.kind != RxOpKind::data) continue;
    g = ls.golden(op.row);
    const auto& c2 = g->counters();
    cov.place += c2.placed - c.placed;
    cov.duplicate += c2.duplicates - c.duplicates;
    cov.overflow_drop += c2.overflow_drops - c.overflow_drops;
    cov.sync_drop += c2.sync_drops - c.sync_drops;
    cov.silent_drop += (c2.overflow_drops + c2.sync_drops - c.overflow_drops - c.sync_drops) -
                       (c2.nacks - c.nacks);
    cov.completions += c2.completions - c.completions;
    if (g->rcv_nxt() < before) ++cov.psn_wraps;
    if (psn_diff(g->rcv_nxt(), before) > 8) ++cov.head_runs_over_8;
  }
  auto diverged = ls.drain();
  ASSERT_FALSE(diverged) << *diverged;
  EXPECT_EQ(ls.compared(), n);
  // The run reached what it is meant to test.
  EXPECT_GT(cov.place, n / 4);
  EXPECT_GT(cov.duplicate, n / 100);
  EXPECT_GT(cov.overflow_drop, n / 100);
  EXPECT_GT(cov.sync_drop, n / 1000);
  EXPECT_GT(cov.completions, n / 100);
  EXPECT_GT(cov.back_to_back, n / 3);
  EXPECT_GT(cov.reads, n / 200);
  if (n >= 100000) {
    EXPECT_GT(cov.psn_wraps, 0u);
    EXPECT_GT(cov.head_runs_over_8, 0u);
  }
  if (mode == MpOverflowNack::once_per_head) {
    EXPECT_GT(cov.silent_drop, 0u) << "once_per_head leaves later overflow drops un-NACKed";
  }
  std::printf(
      "%llu operations in %llu RTL cycles: %llu placed, %llu duplicates, %llu overflow "
      "drops, %llu synchronise drops, %llu completions, %llu back to back, %llu PSN "
      "wraps\n",
      static_cast<unsigned long long>(n), static_cast<unsigned long long>(ls.rtl().cycles()),
      static_cast<unsigned long long>(cov.place), static_cast<unsigned long long>(cov.duplicate),
      static_cast<unsigned long long>(cov.overflow_drop),
      static_cast<unsigned long long>(cov.sync_drop),
      static_cast<unsigned long long>(cov.completions),
      static_cast<unsigned long long>(cov.back_to_back),
      static_cast<unsigned long long>(cov.psn_wraps));
}

TEST(MpRxRtl, RandomOperationsAgreeEveryDrop) { run_random(MpOverflowNack::every_drop, 1); }

TEST(MpRxRtl, RandomOperationsAgreeOncePerHead) { run_random(MpOverflowNack::once_per_head, 2); }

RxOp init(uint32_t row, uint32_t epsn) {
  RxOp op;
  op.kind = RxOpKind::init;
  op.row = row;
  op.data.psn = epsn;
  return op;
}

RxOp data(uint32_t row, uint32_t psn, bool tail = false, bool completion = false) {
  RxOp op;
  op.row = row;
  op.data.psn = psn;
  op.data.tail = tail;
  op.data.completion = completion;
  return op;
}

// Back-to-back packets of one connection, one per cycle, each depending on
// the one before: forwarding around the context RAM.
TEST(MpRxRtl, BackToBackOnOneRowForward) {
  MpRxLockstep ls(MpOverflowNack::every_drop);
  const uint32_t epsn = kPsnMask - 2;  // crosses the PSN wrap
  RxOp ops[] = {init(5, epsn), data(5, epsn), data(5, epsn + 1, true),
                data(5, psn_add(epsn, 2), true, true), data(5, psn_add(epsn, 3))};
  for (auto& op : ops) {
    auto d = ls.step(&op);
    ASSERT_FALSE(d) << *d;
  }
  auto d = ls.drain();
  ASSERT_FALSE(d) << *d;
  EXPECT_EQ(ls.golden(5)->rcv_nxt(), psn_add(epsn, 4));
  EXPECT_EQ(ls.golden(5)->counters().completions, 1u);
  EXPECT_EQ(ls.golden(5)->counters().messages, 2u);
  EXPECT_EQ(ls.rtl().cycles(), std::size(ops) + 1);  // one cycle of latency
}

// The head's whole bitmap completes at once: L - 1 packets out of order,
// then the head-of-line one.
TEST(MpRxRtl, FullBitmapRunCompletesEveryMessage) {
  MpRxLockstep ls(MpOverflowNack::every_drop);
  RxOp op = init(1, 1000);
  ASSERT_FALSE(ls.step(&op));
  for (uint32_t i = p::RX_SLOTS - 1; i >= 1; --i) {
    op = data(1, 1000 + i, true, i % 2 == 0);
    auto d = ls.step(&op);
    ASSERT_FALSE(d) << *d;
  }
  op = data(1, 1000, true);
  auto d = ls.step(&op);
  ASSERT_FALSE(d) << *d;
  d = ls.drain();
  ASSERT_FALSE(d) << *d;
  EXPECT_EQ(ls.golden(1)->rcv_nxt(), 1000 + p::RX_SLOTS);
  EXPECT_EQ(ls.golden(1)->counters().messages, p::RX_SLOTS);
}

// Big-endian integer of n bytes.
uint64_t be(const std::string& s, size_t at, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v = v << 8 | static_cast<uint8_t>(s.at(at + i));
  return v;
}

// One LZ4 block (the format's sequences: a token, literals, a match
// offset and length); empty when malformed.
std::string lz4_block(const std::string& in, size_t at, size_t end, size_t plain) {
  std::string out;
  auto more = [&](size_t n) {  // a length of 15 continues in 255s
    if (n != 15) return n;
    for (uint8_t b = 255; b == 255 && at < end; n += b) b = static_cast<uint8_t>(in[at++]);
    return n;
  };
  while (at < end) {
    const uint8_t token = static_cast<uint8_t>(in[at++]);
    const size_t lit = more(token >> 4);
    if (at + lit > end) return "";
    out.append(in, at, lit);
    at += lit;
    if (at >= end) break;  // the last sequence has literals only
    if (at + 2 > end) return "";
    const size_t offset = static_cast<uint8_t>(in[at]) | static_cast<uint8_t>(in[at + 1]) << 8;
    at += 2;
    const size_t len = more(token & 15) + 4;
    if (offset == 0 || offset > out.size()) return "";
    for (size_t i = 0; i < len; ++i) out.push_back(out[out.size() - offset]);
  }
  return out.size() == plain ? out : "";
}

// The FST file's hierarchy (scopes and signal names), uncompressed: its
// block is type 4 (gzip) or 6 (LZ4, what Verilator 5.006 writes), after a
// 1-byte type and an 8-byte length, then the plain length.
std::string fst_hierarchy(const std::string& file) {
  size_t at = 0;
  while (at + 17 <= file.size()) {
    const uint8_t type = static_cast<uint8_t>(file[at]);
    const uint64_t len = be(file, at + 1, 8);  // counts itself, not the type byte
    if (len < 8 || at + 1 + len > file.size()) break;
    const uint64_t plain = be(file, at + 9, 8);
    if (type == 6) return lz4_block(file, at + 17, at + 1 + len, plain);
    if (type == 4) {
      std::string out(plain, '\0');
      z_stream z{};
      if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) return "";
      z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(file.data() + at + 17));
      z.avail_in = static_cast<uInt>(len - 16);
      z.next_out = reinterpret_cast<Bytef*>(out.data());
      z.avail_out = static_cast<uInt>(plain);
      const int rc = inflate(&z, Z_FINISH);
      inflateEnd(&z);
      return rc == Z_STREAM_END ? out : "";
    }
    at += 1 + len;
  }
  return "";
}

// One bit of one field of a row, flipped in the RTL's RAM, must stop
// lockstep at the next operation on that row, naming the field.
struct Flip {
  const char* field;  // as the report names it
  uint32_t bit;
};

// (How ctest lists the cases: by field, not by the bytes of a pointer.)
void PrintTo(const Flip& f, std::ostream* os) { *os << f.field << " bit " << f.bit; }

class FaultInjection : public ::testing::TestWithParam<Flip> {};

TEST_P(FaultInjection, LockstepNamesTheFlippedField) {
  const Flip f = GetParam();
  MpRxLockstep ls(MpOverflowNack::once_per_head);
  std::mt19937_64 gen(7);
  RxOp op = init(2, 500);
  ASSERT_FALSE(ls.step(&op));
  RxOp other = init(3, 9000);
  ASSERT_FALSE(ls.step(&other));
  for (int i = 0; i < 200; ++i) {
    op = data(2 + i % 2, psn_add(ls.golden(2 + i % 2)->rcv_nxt(), gen() % 8), gen() % 3 == 0);
    auto d = ls.step(&op);
    ASSERT_FALSE(d) << *d;
  }
  ASSERT_FALSE(ls.drain());
  ls.rtl().flip_context_bit(2, f.bit);
  // Another row first: the flip touches row 2 only.
  op = data(3, ls.golden(3)->rcv_nxt());
  ASSERT_FALSE(ls.step(&op));
  ASSERT_FALSE(ls.drain());
  op.kind = RxOpKind::read;
  op.row = 2;
  ASSERT_FALSE(ls.step(&op));
  auto d = ls.drain();
  ASSERT_TRUE(d) << "a flipped bit of " << f.field << " went unnoticed";
  EXPECT_NE(d->find(std::string("[context ") + f.field + "]"), std::string::npos) << *d;
  EXPECT_NE(d->find("read row 2"), std::string::npos) << *d;
  EXPECT_NE(d->find("earlier operations on row 2"), std::string::npos) << *d;
  EXPECT_THROW(ls.step(nullptr), std::logic_error);
  // The waveform of the last operations, replayed from the RTL's contexts.
  // (One file per case and process: ctest runs the cases in parallel.)
  const std::string path = ::testing::TempDir() + "/lockstep-replay-" + f.field + "-" +
                           std::to_string(::getpid()) + ".fst";
  std::remove(path.c_str());
  EXPECT_EQ(ls.replay_fst(path), 16u);
  std::ifstream in(path, std::ios::binary);
  ASSERT_TRUE(in) << path;
  const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(fst_hierarchy(file).find("cur_rcv_nxt"), std::string::npos);
}

TEST(MpRxLockstep, ReplayIsForAfterADivergence) {
  MpRxLockstep ls(MpOverflowNack::every_drop);
  EXPECT_THROW(ls.replay_fst(::testing::TempDir() + "/never.fst"), std::logic_error);
}

// A context written into the RAM as a debugger would is what the engine
// then reads: every field survives the encoding.
TEST(MpRxRtl, LoadedContextReadsBack) {
  MpRxRtl rtl(MpOverflowNack::once_per_head);
  std::mt19937_64 gen(11);
  for (int i = 0; i < 50; ++i) {
    MpReceiverContext c;
    for (uint32_t k = 0; k < p::RX_SLOTS; ++k) c.slots.push_back(static_cast<MpSlot>(gen() % 4));
    c.rcv_nxt = gen() & kPsnMask;
    c.sync_nacked = gen() % 2;
    c.sync_nacked_for = gen() & kPsnMask;
    c.overflow_nacked = gen() % 2;
    c.overflow_nacked_for = gen() & kPsnMask;
    const uint32_t row = static_cast<uint32_t>(gen() % MpRxRtl::rows());
    rtl.load_context(row, c);
    RxOp op;
    op.kind = RxOpKind::read;
    op.row = row;
    rtl.clock(&op);
    auto out = rtl.clock(nullptr);
    ASSERT_TRUE(out);
    EXPECT_TRUE(out->context == c) << "row " << row;
  }
  MpReceiverContext shorter;
  shorter.slots.resize(p::RX_SLOTS / 2);
  EXPECT_THROW(rtl.load_context(0, shorter), std::invalid_argument);
}

INSTANTIATE_TEST_SUITE_P(
    Fields, FaultInjection,
    ::testing::Values(Flip{"rcv_nxt", p::RX_CTX_RCV_NXT_LSB + 3},
                      Flip{"bitmap slot 17", p::RX_CTX_BITMAP_LSB + 2 * 17 + 1},
                      Flip{"sync_nacked", p::RX_CTX_SYNC_NACKED_LSB},
                      Flip{"sync_nacked_for", p::RX_CTX_SYNC_NACKED_FOR_LSB + 23},
                      Flip{"overflow_nacked", p::RX_CTX_OVERFLOW_NACKED_LSB},
                      Flip{"overflow_nacked_for", p::RX_CTX_OVERFLOW_NACKED_FOR_LSB}),
    [](const ::testing::TestParamInfo<Flip>& param_info) {
      std::string s = param_info.param.field;
      for (auto& ch : s)
        if (ch == ' ') ch = '_';
      return s;
    });

// The golden model's field table (the SRAM budget's accounting, row M1)
// and the RTL's row describe the same state: the row is the table's bytes
// over RoCEv2, plus RoCEv2's own expected PSN (3 B), plus the two NACK flags
// the table counts inside their PSNs' bytes.
TEST(MpRxRtl, ContextRowMatchesTheGoldenFieldTable) {
  uint32_t bytes = 0;
  for (const StateField& f : MpReceiver::extra_state(p::RX_SLOTS, MpOverflowNack::once_per_head))
    bytes += f.bytes;
  EXPECT_EQ(MpRxRtl::context_bits(), (bytes + 3) * 8 + 2);
}

TEST(MpRxRtl, OperationOnARowNeverStartedIsTheCallersError) {
  MpRxLockstep ls(MpOverflowNack::every_drop);
  RxOp op = data(4, 1);
  EXPECT_THROW(ls.step(&op), std::logic_error);
  // Two engines on one thread, the second destroyed first.
  MpRxRtl rtl(MpOverflowNack::every_drop);
  op.row = MpRxRtl::rows();
  EXPECT_THROW(rtl.clock(&op), std::out_of_range);
}

}  // namespace
}  // namespace mprdma::nic::rtl

namespace mprdma::nic::rtl {
namespace {

// Waveforms: an FST whose hierarchy names the engine's ports and the
// context RAM, as a designer looks for them in GTKWave.
TEST(MpRxRtl, WritesAnFstWithTheEnginesSignals) {
  const std::string path = ::testing::TempDir() + "/mp_rdma_rx_engine.fst";
  std::remove(path.c_str());
  MpRxRtl rtl(MpOverflowNack::every_drop, /*traceable=*/true);
  rtl.trace_fst(path);
  ASSERT_TRUE(rtl.tracing());
  RxOp op = init(0, 100);
  rtl.clock(&op);
  for (uint32_t i = 0; i < 40; ++i) {
    op = data(0, 100 + (i ^ 1), i % 4 == 3);
    rtl.clock(&op);
  }
  rtl.clock(nullptr);
  rtl.close_trace();
  EXPECT_FALSE(rtl.tracing());
  std::ifstream in(path, std::ios::binary);
  ASSERT_TRUE(in) << path;
  const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(file.size(), 100u);
  EXPECT_EQ(file[0], 0) << "an FST starts with its header block";
  const std::string hier = fst_hierarchy(file);
  ASSERT_FALSE(hier.empty()) << "no readable hierarchy block in " << path;
  for (const char* name : {"mp_rdma_rx_engine", "in_psn", "out_ack_sack", "out_advance",
                           "cur_rcv_nxt", "ctx_ram", "wb_row"})
    EXPECT_NE(hier.find(name), std::string::npos) << name;
}

TEST(MpRxRtl, WaveformsNeedATraceableEngine) {
  MpRxRtl rtl(MpOverflowNack::every_drop);
  EXPECT_THROW(rtl.trace_fst(::testing::TempDir() + "/never.fst"), std::logic_error);
  MpRxRtl traceable(MpOverflowNack::every_drop, true);
  EXPECT_THROW(traceable.trace_fst("/nonexistent-dir/x.fst"), std::runtime_error);
}

}  // namespace
}  // namespace mprdma::nic::rtl
