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
  down_.back = &up_;
  up_.back = &down_;
  // Downstream TLPs go to the endpoint's buffers, upstream ones to the root
  // port's.
  for (auto [d, rx] : {std::pair<Direction*, const PcieReceiverConfig*>{&down_, &cfg_.endpoint},
                       std::pair<Direction*, const PcieReceiverConfig*>{&up_, &cfg_.root_port}}) {
    for (int t = 0; t < kFcTypes; ++t) {
      const FcType type = static_cast<FcType>(t);
      FcPool& fc = d->fc[t];
      fc.limit_h = fc.avail_h = rx->header_credits(type);
      fc.limit_d = fc.avail_d = rx->data_credits(type);
      fc.low_d = type == FcType::non_posted ? 1 : fc_data_credits(cfg_.max_payload.n);
    }
    d->rx_processing = rx->processing.sc();
  }
  for (auto [d, dir] : {std::pair<Direction*, const char*>{&down_, "downstream"},
                        std::pair<Direction*, const char*>{&up_, "upstream"}}) {
    const std::string base = prefix_ + "." + dir;
    d->dllps = &st.counter(base + ".dllp.count", "DLLPs",
                           std::string("Ack and UpdateFC DLLPs sent ") + dir);
    d->dllp_bytes = &st.counter(base + ".dllp.bytes", "B",
                                std::string("DLLP bytes sent ") + dir + " (not in .bytes)");
    d->acks = &st.counter(base + ".dllp.acks", "DLLPs", std::string("Ack DLLPs sent ") + dir);
    d->update_fcs =
        &st.counter(base + ".dllp.update_fcs", "DLLPs", std::string("UpdateFC DLLPs sent ") + dir);
    d->credit_waits =
        &st.counter(base + ".credit_waits", "TLPs",
                    std::string("TLPs sent ") + dir + " that waited for flow-control credits");
    d->credit_wait_ps = &st.counter(
        base + ".credit_wait_ps", "ps",
        std::string("time TLPs sent ") + dir + " waited for flow-control credits, summed");
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
  dma_writes_ =
      &st.counter(prefix_ + ".dma_writes", "transactions", "DMA writes accepted (MSIs excluded)");
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
                                 uint64_t overhead) {
  const int k = static_cast<int>(kind);
  if (dir.kind_tlps[k] == nullptr)
    throw std::logic_error(prefix_ + ": " + tlp_kind_name(kind) + " TLPs do not go this way");
  FcPool& fc = dir.fc[static_cast<int>(fc_type_of(kind, &dir == &down_))];
  Slot s;
  // TLPs sent back to back form a run, serialised as one (rounded once);
  // waiting for credits starts a new run.
  sc_time run_start = std::max(earliest, dir.busy_until);
  uint64_t run_bytes = 0;
  uint64_t wire_total = 0;
  for (size_t i = 0; i < tlps_.size(); ++i) {
    const uint64_t wire = tlps_[i].wire_bytes;
    const uint64_t data = fc_data_credits(wire - overhead);
    const sc_time ready = run_bytes == 0 ? run_start : s.end;
    const sc_time start = take_credits(dir, fc, ready, 1, data);
    if (start != ready) {
      run_start = start;
      run_bytes = 0;
    }
    run_bytes += wire;
    wire_total += wire;
    if (i == 0) s.start = start;
    s.last_start = start;
    s.end = run_start + serialize(run_bytes);
    received(dir, fc, s.end + latency_, 1, data);
  }
  dir.busy_until = s.end;
  const uint64_t n = tlps_.size();
  dir.tlps->add(n);
  dir.bytes->add(wire_total);
  dir.kind_tlps[k]->add(n);
  dir.kind_bytes[k]->add(wire_total);
  return s;
}

sc_time PcieLink::take_credits(Direction& dir, FcPool& fc, sc_time t, uint64_t h, uint64_t d) {
  if (fc.limit_h == 0) h = 0;
  if (fc.limit_d == 0) d = 0;
  if (h == 0 && d == 0) return t;
  const sc_time asked = t;
  auto settle = [&] {
    while (!fc.returns.empty() && fc.returns.front().at <= t) {
      fc.avail_h += fc.returns.front().h;
      fc.avail_d += fc.returns.front().d;
      fc.returns.pop_front();
    }
  };
  settle();
  while (fc.avail_h < h || fc.avail_d < d) {
    if (fc.returns.empty()) {
      // Cannot happen: the receiver returns credits at once when the
      // transmitter has less than one TLP's worth (received()).
      MPR_LOG(log_, error, "flow control: no credits to come, sending anyway");
      fc.avail_h = std::max(fc.avail_h, h);
      fc.avail_d = std::max(fc.avail_d, d);
      break;
    }
    t = fc.returns.front().at;
    settle();
  }
  if (t != asked) {
    dir.credit_waits->add();
    dir.credit_wait_ps->add((t - asked).value());
  }
  fc.avail_h -= h;
  fc.avail_d -= d;
  return t;
}

void PcieLink::received(Direction& dir, FcPool& fc, const sc_time& arrival, uint64_t h,
                        uint64_t d) {
  Direction& back = *dir.back;
  const bool dllps = cfg_.dllp_bytes.n != 0;
  if (dllps && ++dir.unacked >= static_cast<uint64_t>(cfg_.ack_every)) {
    dir.unacked = 0;
    back.acks->add();
    send_dllp(back, arrival);
  }
  // Infinite credits need no UpdateFC.
  if (fc.infinite()) return;
  if (fc.limit_h != 0) fc.pending_h += h;
  if (fc.limit_d != 0) fc.pending_d += d;
  ++fc.pending_tlps;
  // The transmitter's credits as the receiver sees them (all TLPs so far
  // received, the pending ones not returned): the spec wants an UpdateFC at
  // once when they cannot take one more TLP.
  const bool low = (fc.limit_h != 0 && fc.limit_h - fc.pending_h == 0) ||
                   (fc.limit_d != 0 && fc.limit_d - fc.pending_d < fc.low_d);
  if (!low && fc.pending_tlps < static_cast<uint64_t>(cfg_.update_fc_every)) return;
  const sc_time freed = arrival + dir.rx_processing;
  sc_time usable = freed + latency_;
  if (dllps) {
    back.update_fcs->add();
    send_dllp(back, freed);
    usable += serialize(cfg_.dllp_bytes.n);
  }
  fc.returns.push_back(FcPool::Return{usable, fc.pending_h, fc.pending_d});
  fc.pending_tlps = fc.pending_h = fc.pending_d = 0;
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
      MPR_LOG(log_, error,
              "MMIO access of " << len << " B at 0x" << std::hex << addr << " rejected");
      trans.set_response_status(tlm::TLM_GENERIC_ERROR_RESPONSE);
      return;
    }
  }
  if (trans.is_write()) {
    tlps_.clear();
    for_each_write(addr, len, rules_, [this](const Tlp& t) { tlps_.push_back(t); });
    const Slot s = reserve(down_, t0, TlpKind::mmio_write, rules_.request_overhead);
    sc_time dev_delay = s.end + latency_ - now;
    ep_mmio->b_transport(trans, dev_delay);
    // Posted: the CPU is released once its last TLP is on the wire.
    delay = s.last_start - now;
    MPR_LOG(log_, trace,
            "mmio write 0x" << std::hex << addr << std::dec << " " << len << " B arrives "
                            << (s.end + latency_));
  } else if (trans.is_read()) {
    tlps_.clear();
    for_each_read_request(addr, len, rules_, [this](const Tlp& t) { tlps_.push_back(t); });
    const size_t requests = tlps_.size();
    const Slot s = reserve(down_, t0, TlpKind::mmio_read, rules_.request_overhead);
    sc_time dev_delay = s.end + latency_ - now;
    ep_mmio->b_transport(trans, dev_delay);
    const sc_time ready = now + dev_delay;
    tlps_.clear();
    if (trans.is_response_ok()) {
      for_each_completion(addr, len, rules_, [this](const Tlp& t) { tlps_.push_back(t); });
    } else {
      // An error completion carries no data: one header per request.
      tlps_.assign(requests, Tlp{addr, 0, rules_.completion_overhead});
    }
    const Slot r = reserve(up_, ready, TlpKind::mmio_read, rules_.completion_overhead);
    delay = r.end + latency_ - now;
    MPR_LOG(log_, trace,
            "mmio read 0x" << std::hex << addr << std::dec << " " << len << " B completes "
                           << (r.end + latency_));
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
      MPR_LOG(log_, error,
              "DMA access of " << len << " B at 0x" << std::hex << addr << " rejected");
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
  tlps_.clear();
  for_each_write(addr, len, rules_, [this](const Tlp& t) { tlps_.push_back(t); });
  const Slot s = reserve(up_, now + delay, kind, rules_.request_overhead);
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
  MPR_LOG(log_, trace,
          tlp_kind_name(kind) << " 0x" << std::hex << addr << std::dec << " " << len
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
  MPR_LOG(log_, trace,
          "dma read 0x" << std::hex << addr << std::dec << " " << len << " B, "
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
      tlps_.assign(1, Tlp{rq.addr, rq.len, rules_.request_overhead});
      const Slot s = reserve(up_, now, TlpKind::dma_read_request, rules_.request_overhead);
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
    tlps_.clear();
    if (service_gp_.is_response_ok()) {
      for_each_completion(rq.addr, rq.len, rules_, [this](const Tlp& t) { tlps_.push_back(t); });
    } else {
      // An Unsupported Request is answered by one completion without data.
      tlps_.assign(1, Tlp{rq.addr, 0, rules_.completion_overhead});
      job->ok = false;
    }
    // rq.service >= now: later requests of a burst arrived later.
    const Slot s =
        reserve(down_, rq.service, TlpKind::dma_read_completion, rules_.completion_overhead);
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
    MPR_LOG(log_, warn,
            "DMA read 0x" << std::hex << trans->get_address() << std::dec << " "
                          << trans->get_data_length() << " B touches unbacked memory");
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
