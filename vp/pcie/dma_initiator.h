// The device's DMA port: turns "read this range, call me back" and "write
// these bytes" into TLM base-protocol transactions on PcieLink::ep_dma.
//
// Nothing here blocks, so the NIC may call read()/write() from SC_METHODs
// and Calendar actions. Payloads come from a pool owned by this module
// (tlm_mm_interface with reference counting), so the number allocated is
// bounded by the peak number in flight and nothing leaks per transaction.
#pragma once

#include <tlm_utils/simple_initiator_socket.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <systemc>
#include <tlm>
#include <vector>

namespace mprdma::pcie {

class DmaInitiator : public sc_core::sc_module, private tlm::tlm_mm_interface {
 public:
  tlm_utils::simple_initiator_socket<DmaInitiator> socket;  // bind to PcieLink::ep_dma

  // ok is false when some byte was not backed (data is then unspecified).
  // `data` is valid only during the call.
  using ReadDone = std::function<void(bool ok, const uint8_t* data, size_t len)>;

  explicit DmaInitiator(sc_core::sc_module_name name);
  ~DmaInitiator() override;

  // Reads [addr, addr + len); `done` runs when the last byte has arrived
  // (it may start new reads and writes).
  void read(uint64_t addr, size_t len, ReadDone done);
  // Posted write; the data is copied before write() returns.
  void write(uint64_t addr, const void* data, size_t len);
  // An MSI: a 4-byte little-endian write of `data` to `addr` (in the MSI
  // window 0xFEE00000..0xFEEFFFFF).
  void send_msi(uint64_t addr, uint32_t data);
  size_t outstanding_reads() const { return outstanding_reads_; }

  // When the most recent write will have fully arrived at the root complex
  // (posted writes are otherwise invisible to the device).
  sc_core::sc_time last_write_arrival() const { return last_write_arrival_; }
  // Payloads ever created by the pool (peak concurrency, not traffic).
  size_t payloads_allocated() const { return pool_.size(); }

 private:
  // A pooled payload with its own data buffer and callback.
  struct Txn : tlm::tlm_generic_payload {
    explicit Txn(tlm::tlm_mm_interface* mm) : tlm::tlm_generic_payload(mm) {}
    std::vector<uint8_t> buffer;
    ReadDone done;
  };

  Txn* acquire_txn(tlm::tlm_command cmd, uint64_t addr, size_t len);
  void free(tlm::tlm_generic_payload* trans) override;
  tlm::tlm_sync_enum nb_transport_bw(tlm::tlm_generic_payload& trans, tlm::tlm_phase& phase,
                                     sc_core::sc_time& delay);
  void complete_read(Txn* txn);

  std::vector<std::unique_ptr<Txn>> pool_;
  std::vector<Txn*> free_;
  size_t outstanding_reads_ = 0;
  sc_core::sc_time last_write_arrival_ = sc_core::SC_ZERO_TIME;
};

}  // namespace mprdma::pcie
