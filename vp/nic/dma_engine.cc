#include "vp/nic/dma_engine.h"

#include <cstring>
#include <memory>

namespace mprdma::nic {
namespace {
const char* purpose_name(int p) {
  static const char* kNames[] = {"wqe", "payload", "recv_wqe", "atomic", "completion", "icm"};
  return kNames[p];
}
}  // namespace

DmaEngine::DmaEngine(pcie::DmaInitiator& port, core::SimEnv& env, const std::string& prefix)
    : port_(port) {
  for (int p = 0; p < static_cast<int>(DmaPurpose::count_); ++p) {
    const std::string n = purpose_name(p);
    counters_[p].read_bytes = &env.stats.counter(prefix + "dma." + n + "_read_bytes", "bytes",
                                                 "Bytes the NIC read from host memory for " + n);
    counters_[p].write_bytes = &env.stats.counter(prefix + "dma." + n + "_write_bytes", "bytes",
                                                  "Bytes the NIC wrote to host memory for " + n);
  }
}

void DmaEngine::read(uint64_t pa, uint32_t len, DmaPurpose purpose, Done done) {
  counters_[static_cast<int>(purpose)].read_bytes->add(len);
  port_.read(pa, len, [done = std::move(done)](bool ok, const uint8_t* data, size_t n) {
    std::vector<uint8_t> buf;
    if (ok) buf.assign(data, data + n);
    done(ok, std::move(buf));
  });
}

void DmaEngine::gather(const std::vector<Segment>& segs, DmaPurpose purpose, Done done) {
  struct State {
    std::vector<uint8_t> buf;
    size_t pending = 0;
    bool ok = true;
    Done done;
  };
  auto st = std::make_shared<State>();
  size_t total = 0;
  for (const Segment& s : segs) total += s.len;
  st->buf.resize(total);
  st->pending = segs.size();
  st->done = std::move(done);
  if (segs.empty()) {
    st->done(true, std::move(st->buf));
    return;
  }
  counters_[static_cast<int>(purpose)].read_bytes->add(total);
  size_t offset = 0;
  for (const Segment& s : segs) {
    port_.read(s.pa, s.len, [st, offset](bool ok, const uint8_t* data, size_t n) {
      if (ok)
        std::memcpy(st->buf.data() + offset, data, n);
      else
        st->ok = false;
      if (--st->pending == 0) st->done(st->ok, std::move(st->buf));
    });
    offset += s.len;
  }
}

void DmaEngine::scatter(const std::vector<Segment>& segs, const uint8_t* data, DmaPurpose purpose) {
  size_t offset = 0;
  for (const Segment& s : segs) {
    port_.write(s.pa, data + offset, s.len);
    offset += s.len;
  }
  counters_[static_cast<int>(purpose)].write_bytes->add(offset);
}

void DmaEngine::write(uint64_t pa, const void* data, uint32_t len, DmaPurpose purpose) {
  counters_[static_cast<int>(purpose)].write_bytes->add(len);
  port_.write(pa, data, len);
}

}  // namespace mprdma::nic
