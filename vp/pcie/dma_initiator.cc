#include "vp/pcie/dma_initiator.h"

#include <cstring>
#include <stdexcept>
#include <string>

namespace mprdma::pcie {

DmaInitiator::DmaInitiator(sc_core::sc_module_name name)
    : sc_core::sc_module(name), socket("socket") {
  socket.register_nb_transport_bw(this, &DmaInitiator::nb_transport_bw);
}

DmaInitiator::~DmaInitiator() = default;

DmaInitiator::Txn* DmaInitiator::acquire_txn(tlm::tlm_command cmd, uint64_t addr, size_t len) {
  if (len == 0) throw std::invalid_argument(std::string(name()) + ": DMA of zero bytes");
  if (free_.empty()) {
    pool_.push_back(std::make_unique<Txn>(static_cast<tlm::tlm_mm_interface*>(this)));
    free_.push_back(pool_.back().get());
  }
  Txn* t = free_.back();
  free_.pop_back();
  t->buffer.resize(len);
  t->set_command(cmd);
  t->set_address(addr);
  t->set_data_ptr(t->buffer.data());
  t->set_data_length(static_cast<unsigned int>(len));
  t->set_streaming_width(static_cast<unsigned int>(len));
  t->set_byte_enable_ptr(nullptr);
  t->set_byte_enable_length(0);
  t->set_dmi_allowed(false);
  t->set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);
  t->acquire();
  return t;
}

void DmaInitiator::free(tlm::tlm_generic_payload* trans) {
  Txn* t = static_cast<Txn*>(trans);
  t->done = nullptr;
  free_.push_back(t);
}

void DmaInitiator::read(uint64_t addr, size_t len, ReadDone done) {
  Txn* t = acquire_txn(tlm::TLM_READ_COMMAND, addr, len);
  t->done = std::move(done);
  ++outstanding_reads_;
  tlm::tlm_phase phase = tlm::BEGIN_REQ;
  sc_core::sc_time delay = sc_core::SC_ZERO_TIME;
  const tlm::tlm_sync_enum r = socket->nb_transport_fw(*t, phase, delay);
  // The link accepts at once (TLM_UPDATED/END_REQ) and answers later on the
  // backward path; TLM_COMPLETED means it refused the request outright.
  if (r == tlm::TLM_COMPLETED) complete_read(t);
}

void DmaInitiator::write(uint64_t addr, const void* data, size_t len) {
  Txn* t = acquire_txn(tlm::TLM_WRITE_COMMAND, addr, len);
  std::memcpy(t->buffer.data(), data, len);
  tlm::tlm_phase phase = tlm::BEGIN_REQ;
  sc_core::sc_time delay = sc_core::SC_ZERO_TIME;
  const tlm::tlm_sync_enum r = socket->nb_transport_fw(*t, phase, delay);
  if (r == tlm::TLM_COMPLETED) {
    last_write_arrival_ = sc_core::sc_time_stamp() + delay;
    t->release();
    return;
  }
  // A target that answers writes later keeps its reference; ours is
  // dropped when the response comes back (nb_transport_bw).
}

void DmaInitiator::send_msi(uint64_t addr, uint32_t data) {
  const uint8_t bytes[4] = {static_cast<uint8_t>(data), static_cast<uint8_t>(data >> 8),
                            static_cast<uint8_t>(data >> 16), static_cast<uint8_t>(data >> 24)};
  write(addr, bytes, sizeof bytes);
}

void DmaInitiator::complete_read(Txn* t) {
  --outstanding_reads_;
  ReadDone done = std::move(t->done);
  t->done = nullptr;
  if (done) done(t->is_response_ok(), t->buffer.data(), t->buffer.size());
  t->release();
}

tlm::tlm_sync_enum DmaInitiator::nb_transport_bw(tlm::tlm_generic_payload& trans,
                                                 tlm::tlm_phase& phase, sc_core::sc_time&) {
  if (phase != tlm::BEGIN_RESP) return tlm::TLM_ACCEPTED;  // END_REQ: nothing to do
  Txn* t = static_cast<Txn*>(&trans);
  if (t->is_read()) {
    complete_read(t);
  } else {
    last_write_arrival_ = sc_core::sc_time_stamp();
    t->release();
  }
  return tlm::TLM_COMPLETED;
}

}  // namespace mprdma::pcie
