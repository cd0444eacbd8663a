#include "vp/pcie/pcie_link.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

namespace mprdma::pcie {

using sc_core::sc_time;
using sc_core::sc_time_stamp;

namespace {

const PcieConfig& validated(const PcieConfig& cfg) {
  cfg.validate();
  cfg.tlp_rules().validate();
  return cfg;
}

std::string stats_name_of(const sc_core::sc_module_name& name, std::string stats_name) {
  if (!stats_name.empty()) return stats_name;
  return static_cast<const char*>(name);
}

}  // namespace

PcieLink::PcieLink(sc_core::sc_module_name name, const PcieConfig& cfg, core::SimEnv& env,
                   std::string stats_name)
    : sc_core::sc_module(name),
      rc_mmio("rc_mmio"),
      ep_mmio("ep_mmio"),
      ep_dma("ep_dma"),
      rc_dma("rc_dma"),
      cfg_(validated(cfg)),
      rules_(cfg_.tlp_rules()),
      prefix_("pcie." + stats_name_of(name, std::move(stats_name))),
      log_(core::Log::channel(prefix_)),
      cal_("calendar"),
      latency_(cfg_.latency.sc()),
      memory_latency_(cfg_.memory_latency.sc()),
      max_tags_(static_cast<size_t>(cfg_.max_outstanding_reads)) {
  rc_mmio.register_b_transport(this, &PcieLink::mmio_b_transport);
  ep_dma.register_nb_transport_fw(this, &PcieLink::dma_nb_transport_fw);

  core::StatsRegistry& st = env.stats;
  auto dir_totals = [&](Direction& d, const char* dir) {
    d.tlps = &st.counter(prefix_ + "." + dir + ".tlps", "TLPs",
                         std::string("TLPs sent ") + dir + ", all kinds");
    d.bytes = &st.counter(prefix_ + "." + dir + ".bytes", "B",
                          std::string("bytes sent ") + dir + " including TLP overheads");
  };
  dir_totals(down_, "downstream");
  dir_totals(up_, "upstream");
  for (auto [d, dir] : {std::pair<Direction*, const char*>{&down_, "downstream"},
                        std::pair<Direction*, const char*>{&up_, "upstream"}}) {
    d->dllps = &st.counter(prefix_ + "." + dir + ".dllp.count", "DLLPs",
                           std::string("Ack and UpdateFC DLLPs sent ") + dir);
    d->dllp_bytes = &st.counter(prefix_ + "." + dir + ".dllp.bytes", "B",
                                std::string("DLLP bytes sent ") + dir + " (not in .bytes)");
  }
  register_kind(st, down_, "downstream", TlpKind::mmio_write);
  register_kind(st, down_, "downstream", TlpKind::mmio_read);
  register_kind(st, down_, "downstream", TlpKind::dma_read_completion);
  register_kind(st, up_, "upstream", TlpKind::mmio_read);
  register_kind(st, up_, "upstream", TlpKind::dma_read_request);
  register_kind(st, up_, "upstream", TlpKind::dma_write);
  register_kind(st, up_, "upstream", TlpKind::msi);

  dma_read_bytes_ = &st.counter(prefix_ + ".dma_read_bytes", "B",
                                "payload bytes the device read from host memory (cf. PCIeRdCur)");
  dma_write_bytes_ = &st.counter(prefix_ + ".dma_write_bytes", "B",
                                 "payload bytes the device wrote to host memory (cf. PCIeItoM)");
  dma_reads_ = &st.counter(prefix_ + ".dma_reads", "transactions", "DMA reads accepted");
  dma_writes_ = &st.counter(prefix_ + ".dma_writes", "transactions",
                            "DMA writes accepted (MSIs excluded)");
  dma_read_errors_ = &st.counter(prefix_ + ".dma_read_errors", "transactions",
                                 "DMA reads answered with an error (unbacked address)");
  tag_waits_ = &st.counter(prefix_ + ".read_tag_waits", "TLPs",
                           "read requests that had to wait for a free tag");
  dma_read_latency_ = &st.histogram(prefix_ + ".dma_read_latency", "ns",
                                    "DMA read latency, acceptance to last completion byte");
  service_gp_.set_byte_enable_ptr(nullptr);
  service_gp_.set_byte_enable_length(0);
}

PcieLink::~PcieLink() = default;

void PcieLink::register_kind(core::StatsRegistry& stats, Direction& dir, const char* dir_name,
                             TlpKind kind) {
  const int k = static_cast<int>(kind);
  const std::string base = prefix_ + "." + dir_name + "." + tlp_kind_name(kind);
  const std::string what = std::string(tlp_kind_name(kind)) + " TLPs sent " + dir_name;
  dir.kind_tlps[k] = &stats.counter(base + ".tlps", "TLPs", what);
  dir.kind_bytes[k] = &stats.counter(base + ".bytes", "B", what + ", bytes including overheads");
}

PcieLink::Slot PcieLink::reserve(Direction& dir, const sc_time& earliest, TlpKind kind,
                                 uint64_t tlps, uint64_t wire_bytes) {
  const int k = static_cast<int>(kind);
  if (dir.kind_tlps[k] == nullptr)
    throw std::logic_error(prefix_ + ": " + tlp_kind_name(kind) + " TLPs do not go this way");
  Slot s;
  s.start = std::max(earliest, dir.busy_until);
  s.end = s.start + serialize(wire_bytes);
  dir.busy_until = s.end;
  dir.tlps->add(tlps);
  dir.bytes->add(wire_bytes);
  dir.kind_tlps[k]->add(tlps);
  dir.kind_bytes[k]->add(wire_bytes);
  // The receiver acknowledges the TLPs and returns their credits, in the
  // other direction, once the last has arrived.
  if (cfg_.dllp_bytes.n) {
    Direction& back = &dir == &down_ ? up_ : down_;
    const sc_time arrived = s.end + latency_;
    back.unacked += tlps;
    back.uncredited += tlps;
    const uint64_t ack_every = static_cast<uint64_t>(cfg_.ack_every);
    const uint64_t fc_every = static_cast<uint64_t>(cfg_.update_fc_every);
    for (; back.unacked >= ack_every; back.unacked -= ack_every) send_dllp(back, arrived);
    for (; back.uncredited >= fc_every; back.uncredited -= fc_every) send_dllp(back, arrived);
  }
  return s;
}

void PcieLink::send_dllp(Direction& dir, const sc_time& at) {
  ++*dir.dllps;
  dir.dllp_bytes->add(cfg_.dllp_bytes.n);
  if (dir.busy_until > at) dir.busy_until += serialize(cfg_.dllp_bytes.n);
}

// ---------------------------------------------------------------- MMIO

void PcieLink::mmio_b_transport(tlm::tlm_generic_payload& trans, sc_time& delay) {
  const sc_time now = sc_time_stamp();
  const sc_time t0 = now + delay;
  const uint64_t addr = trans.get_address();
  const uint64_t len = trans.get_data_length();
  if (trans.is_read() || trans.is_write()) {
    if (len == 0 || addr + len < addr) {
      MPR_LOG(log_, error, "MMIO access of " << len << " B at 0x" << std::hex << addr
                                             << " rejected");
      trans.set_response_status(tlm::TLM_GENERIC_ERROR_RESPONSE);
      return;
    }
  }
  if (trans.is_write()) {
    const TlpTotals t = write_totals(addr, len, rules_);
    const Slot s = reserve(down_, t0, TlpKind::mmio_write, t.tlps, t.wire_bytes);
    sc_time dev_delay = s.end + latency_ - now;
    ep_mmio->b_transport(trans, dev_delay);
    // Posted: the CPU is released once its last TLP is on the wire.
    delay = s.end - serialize(t.last_wire_bytes) - now;
    MPR_LOG(log_, trace, "mmio write 0x" << std::hex << addr << std::dec << " " << len
                                         << " B arrives " << (s.end + latency_));
  } else if (trans.is_read()) {
    const TlpTotals rq = read_request_totals(addr, len, rules_);
    const Slot s = reserve(down_, t0, TlpKind::mmio_read, rq.tlps, rq.wire_bytes);
    sc_time dev_delay = s.end + latency_ - now;
    ep_mmio->b_transport(trans, dev_delay);
    const sc_time ready = now + dev_delay;
    // An error completion carries no data: one header per request.
    TlpTotals c{rq.tlps, rq.tlps * rules_.completion_overhead, rules_.completion_overhead};
    if (trans.is_response_ok()) c = completion_totals(addr, len, rules_);
    const Slot r = reserve(up_, ready, TlpKind::mmio_read, c.tlps, c.wire_bytes);
    delay = r.end + latency_ - now;
    MPR_LOG(log_, trace, "mmio read 0x" << std::hex << addr << std::dec << " " << len
                                        << " B completes " << (r.end + latency_));
  } else {
    trans.set_response_status(tlm::TLM_OK_RESPONSE);
  }
}

// ---------------------------------------------------------------- DMA

tlm::tlm_sync_enum PcieLink::dma_nb_transport_fw(tlm::tlm_generic_payload& trans,
                                                 tlm::tlm_phase& phase, sc_time& delay) {
  if (phase == tlm::END_RESP) return tlm::TLM_COMPLETED;
  if (phase != tlm::BEGIN_REQ) {
    MPR_LOG(log_, error, "DMA: unexpected phase " << phase);
    trans.set_response_status(tlm::TLM_GENERIC_ERROR_RESPONSE);
    return tlm::TLM_COMPLETED;
  }
  const uint64_t addr = trans.get_address();
  const uint64_t len = trans.get_data_length();
  if (trans.is_read() || trans.is_write()) {
    if (len == 0 || addr + len < addr) {
      MPR_LOG(log_, error, "DMA access of " << len << " B at 0x" << std::hex << addr
                                            << " rejected");
      trans.set_response_status(tlm::TLM_GENERIC_ERROR_RESPONSE);
      return tlm::TLM_COMPLETED;
    }
    if (trans.get_byte_enable_ptr() != nullptr) {
      // DMA engines move whole ranges; byte enables are not modelled.
      trans.set_response_status(tlm::TLM_BYTE_ENABLE_ERROR_RESPONSE);
      return tlm::TLM_COMPLETED;
    }
  }
  if (trans.is_write()) {
    dma_write(trans, delay);
    return tlm::TLM_COMPLETED;
  }
  if (trans.is_read()) {
    dma_read_accept(trans, delay);
    phase = tlm::END_REQ;
    return tlm::TLM_UPDATED;
  }
  trans.set_response_status(tlm::TLM_OK_RESPONSE);
  return tlm::TLM_COMPLETED;
}

void PcieLink::dma_write(tlm::tlm_generic_payload& trans, sc_time& delay) {
  const sc_time now = sc_time_stamp();
  const uint64_t addr = trans.get_address();
  const uint64_t len = trans.get_data_length();
  const TlpKind kind = is_msi_address(addr) ? TlpKind::msi : TlpKind::dma_write;
  const TlpTotals t = write_totals(addr, len, rules_);
  const Slot s = reserve(up_, now + delay, kind, t.tlps, t.wire_bytes);
  const sc_time arrival = s.end + latency_;
  sc_time rc_delay = arrival - now;
  // The root complex copies the data now and commits it at the arrival time.
  rc_dma->b_transport(trans, rc_delay);
  if (kind == TlpKind::dma_write) {
    dma_write_bytes_->add(len);
    dma_writes_->add();
  }
  // Posted: the device learns nothing of the outcome, as on real PCIe.
  trans.set_response_status(tlm::TLM_OK_RESPONSE);
  delay = arrival - now;
  MPR_LOG(log_, trace, tlp_kind_name(kind) << " 0x" << std::hex << addr << std::dec << " " << len
                                           << " B arrives " << arrival);
}

void PcieLink::dma_read_accept(tlm::tlm_generic_payload& trans, const sc_time& delay) {
  const uint64_t addr = trans.get_address();
  const uint64_t len = trans.get_data_length();
  ReadJob* job = alloc_job();
  job->trans = &trans;
  if (trans.has_mm()) trans.acquire();
  job->addr = addr;
  for (const Tlp& t : split_read_requests(addr, len, rules_))
    job->requests.push_back(ReadRequest{t.addr, t.len, sc_core::SC_ZERO_TIME});
  job->accepted = sc_time_stamp() + delay;
  ++active_jobs_;
  dma_reads_->add();
  MPR_LOG(log_, trace, "dma read 0x" << std::hex << addr << std::dec << " " << len << " B, "
                                     << job->requests.size() << " requests");
  if (delay == sc_core::SC_ZERO_TIME) {
    enqueue(job);
  } else {
    cal_.at(job->accepted, [this, job] { enqueue(job); });
  }
}

void PcieLink::enqueue(ReadJob* job) {
  waiting_.push_back(job);
  issue_requests();
  const size_t unsent = job->requests.size() - job->next_issue;
  if (unsent > 0) tag_waits_->add(unsent);
}

void PcieLink::release_due_tags() {
  const sc_time now = sc_time_stamp();
  while (!tag_release_.empty() && tag_release_.front() <= now) {
    tag_release_.pop_front();
    --tags_held_;
  }
}

void PcieLink::issue_requests() {
  release_due_tags();
  const sc_time now = sc_time_stamp();
  while (!waiting_.empty() && tags_held_ < max_tags_) {
    ReadJob* job = waiting_.front();
    const size_t first = job->next_issue;
    while (job->next_issue < job->requests.size() && tags_held_ < max_tags_) {
      ReadRequest& rq = job->requests[job->next_issue++];
      const Slot s = reserve(up_, now, TlpKind::dma_read_request, 1, rules_.request_overhead);
      rq.service = s.end + latency_ + memory_latency_;
      ++tags_held_;
    }
    // One service action per burst of requests sent together: the root
    // complex reads memory for all of them at the first one's service time.
    const size_t count = job->next_issue - first;
    cal_.at(job->requests[first].service,
            [this, job, first, count] { service(job, first, count); });
    if (job->next_issue < job->requests.size()) break;  // out of tags
    waiting_.pop_front();
  }
  maybe_schedule_wake();
}

void PcieLink::maybe_schedule_wake() {
  if (wake_pending_ || waiting_.empty() || tag_release_.empty()) return;
  wake_pending_ = true;
  const sc_time when = std::max(tag_release_.front(), sc_time_stamp());
  cal_.at(when, [this] {
    wake_pending_ = false;
    issue_requests();
  });
}

void PcieLink::service(ReadJob* job, size_t first, size_t count) {
  uint8_t* const base = job->trans->get_data_ptr();
  for (size_t i = first; i < first + count; ++i) {
    ReadRequest& rq = job->requests[i];
    service_gp_.set_command(tlm::TLM_READ_COMMAND);
    service_gp_.set_address(rq.addr);
    service_gp_.set_data_ptr(base + (rq.addr - job->addr));
    service_gp_.set_data_length(static_cast<unsigned int>(rq.len));
    service_gp_.set_streaming_width(static_cast<unsigned int>(rq.len));
    service_gp_.set_dmi_allowed(false);
    service_gp_.set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);
    sc_time zero = sc_core::SC_ZERO_TIME;
    rc_dma->b_transport(service_gp_, zero);
    // An Unsupported Request is answered by one completion without data.
    TlpTotals c{1, rules_.completion_overhead, rules_.completion_overhead};
    if (service_gp_.is_response_ok()) {
      c = completion_totals(rq.addr, rq.len, rules_);
    } else {
      job->ok = false;
    }
    // rq.service >= now: later requests of a burst arrived later.
    const Slot s = reserve(down_, rq.service, TlpKind::dma_read_completion, c.tlps, c.wire_bytes);
    const sc_time arrival = s.end + latency_;
    tag_release_.push_back(arrival);
    job->last_arrival = arrival;
    ++job->serviced;
  }
  if (job->serviced == job->requests.size())
    cal_.at(job->last_arrival, [this, job] { deliver(job); });
  maybe_schedule_wake();
}

void PcieLink::deliver(ReadJob* job) {
  tlm::tlm_generic_payload* trans = job->trans;
  const bool ok = job->ok;
  trans->set_response_status(ok ? tlm::TLM_OK_RESPONSE : tlm::TLM_ADDRESS_ERROR_RESPONSE);
  if (ok) {
    dma_read_bytes_->add(trans->get_data_length());
  } else {
    dma_read_errors_->add();
    MPR_LOG(log_, warn, "DMA read 0x" << std::hex << trans->get_address() << std::dec << " "
                                      << trans->get_data_length()
                                      << " B touches unbacked memory");
  }
  dma_read_latency_->record((sc_time_stamp() - job->accepted).to_seconds() * 1e9);
  --active_jobs_;
  free_job(job);  // the callback below may start new reads
  tlm::tlm_phase phase = tlm::BEGIN_RESP;
  sc_time delay = sc_core::SC_ZERO_TIME;
  const tlm::tlm_sync_enum r = ep_dma->nb_transport_bw(*trans, phase, delay);
  if (r == tlm::TLM_ACCEPTED)
    MPR_LOG(log_, error, "device did not complete a DMA read response; END_RESP is not awaited");
  if (trans->has_mm()) trans->release();
}

size_t PcieLink::read_tags_in_use() const {
  const sc_time now = sc_time_stamp();
  size_t freed = 0;
  for (const sc_time& t : tag_release_) {
    if (t > now) break;
    ++freed;
  }
  return tags_held_ - freed;
}

size_t PcieLink::waiting_read_requests() const {
  size_t n = 0;
  for (const ReadJob* job : waiting_) n += job->requests.size() - job->next_issue;
  return n;
}

PcieLink::ReadJob* PcieLink::alloc_job() {
  if (free_jobs_.empty()) {
    job_store_.push_back(std::make_unique<ReadJob>());
    free_jobs_.push_back(job_store_.back().get());
  }
  ReadJob* job = free_jobs_.back();
  free_jobs_.pop_back();
  job->trans = nullptr;
  job->requests.clear();
  job->next_issue = 0;
  job->serviced = 0;
  job->ok = true;
  return job;
}

void PcieLink::free_job(ReadJob* job) {
  job->trans = nullptr;
  free_jobs_.push_back(job);
}

}  // namespace mprdma::pcie
