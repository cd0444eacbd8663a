// A user context on a modeled host: what libibverbs plus our provider give a
// process. Resources are created through the driver's admin commands; the
// data path (post, poll, arm) is sw_stack's C library, the same code the
// rdma-core provider runs in a guest, with mpr_dp_ops that turn doorbell
// stores into MMIO on the simulated PCIe link.
//
// All calls must run in an SC_THREAD. Posting and polling charge the host's
// CPU costs (HostConfig::post_overhead, poll_overhead).
#pragma once

#include <mprdma/dp.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <systemc>
#include <vector>

#include "vp/host/address_space.h"
#include "vp/host/driver.h"
#include "vp/host/host_config.h"

namespace mprdma::host {

// A failed verb: the command status and syndrome, with a message naming it.
class VerbsError : public std::runtime_error {
 public:
  VerbsError(const std::string& what, uint8_t status, uint32_t syndrome)
      : std::runtime_error(what), status(status), syndrome(syndrome) {}
  uint8_t status;
  uint32_t syndrome;
};

struct MemoryRegion {
  uint32_t key = 0;  // lkey == rkey
  uint64_t va = 0;
  uint64_t length = 0;
};

struct CompletionQueue {
  uint32_t cqn = 0;
  uint64_t ring_pa = 0;
  uint64_t dbrec_pa = 0;
  mpr_dp_cq dp{};
  sc_core::sc_event written;  // the NIC wrote into the ring
  sc_core::sc_event event;    // a completion event arrived (armed CQ)
};

// A shared receive queue (struct mpr_dp_srq keeps its list).
struct SharedReceiveQueue {
  uint32_t srqn = 0;
  mpr_dp_srq dp{};
  std::vector<uint64_t> wrid;
};

struct QueuePair {
  uint32_t qpn = 0;
  mpr_dp_qp dp{};
  std::vector<uint64_t> sq_wrid, rq_wrid;
  CompletionQueue* send_cq = nullptr;
  CompletionQueue* recv_cq = nullptr;
};

struct QpCaps {
  uint32_t max_send_wr = 128;
  uint32_t max_recv_wr = 128;
  uint32_t max_send_sge = 1;
  uint32_t max_recv_sge = 1;
  uint32_t max_inline = 0;
  bool sq_sig_all = false;
  uint8_t qp_type = MPR_QPT_RC;               // or MPR_QPT_UC, MPR_QPT_UD
  uint8_t transport = MPR_TRANSPORT_DEFAULT;  // enum mpr_transport
  // RECVs come from this SRQ (max_recv_wr and max_recv_sge are unused).
  SharedReceiveQueue* srq = nullptr;
};

// enum mpr_transport of a name: default, gbn, dcqcn, mprdma, irn.
uint8_t transport_kind(const std::string& name);

class VerbsContext {
 public:
  VerbsContext(Driver& driver, AddressSpace& as, const HostConfig& host);
  ~VerbsContext();

  uint32_t alloc_pd();
  MemoryRegion reg_mr(uint32_t pd, uint64_t va, uint64_t length, uint32_t access);
  void dereg_mr(const MemoryRegion& mr);
  // log_cqe_size: CQE slots of 2^log_cqe_size bytes (0 = 32); inline_recv:
  // receives that fit the slot before the CQE are placed in it
  // (MPR_CQ_F_INLINE_RECV; needs 64-byte slots or larger); consumer_record:
  // give the NIC a consumer-index record to refresh from before it declares
  // the CQ full (false: none, as a CQ whose consumer the NIC cannot see).
  CompletionQueue* create_cq(uint32_t entries, uint8_t log_cqe_size = 0, bool inline_recv = false,
                             bool consumer_record = true);
  QueuePair* create_qp(uint32_t pd, CompletionQueue* send_cq, CompletionQueue* recv_cq,
                       const QpCaps& caps);
  // Returns the command result; on success updates the QP's software state.
  CommandResult modify_qp(QueuePair* qp, const mpr_qp_attr& attr);
  CommandResult query_qp(QueuePair* qp, mpr_qp_attr& out);
  void destroy_qp(QueuePair* qp);
  void destroy_cq(CompletionQueue* cq);
  // Shared receive queues: `max_wr` WQEs of `max_sge` entries (the ring has
  // one slot more), limit 0 = none armed. modify_srq arms the limit;
  // query_srq returns QUERY_SRQ's completion (out0 the limit, out1 the WQEs
  // left); destroy_srq returns the command result (BUSY while QPs use it).
  SharedReceiveQueue* create_srq(uint32_t pd, uint32_t max_wr, uint32_t max_sge,
                                 uint32_t limit = 0);
  CommandResult modify_srq(SharedReceiveQueue* srq, uint32_t attr_mask, uint32_t limit);
  CommandResult query_srq(SharedReceiveQueue* srq);
  CommandResult destroy_srq(SharedReceiveQueue* srq);
  int post_srq_recv(SharedReceiveQueue* srq, const mpr_recv_wr& wr);

  // Data path (sw_stack/dp), with the CPU cost of the call.
  int post_send(QueuePair* qp, const mpr_send_wr& wr);
  // Posts without ringing the doorbell (batching: ring_sq() later), or by
  // MMIO (the WQE itself written to the UAR page; 1 if it went so).
  int post_send_no_doorbell(QueuePair* qp, const mpr_send_wr& wr);
  void ring_sq(QueuePair* qp);
  // RECVs in a batch: posted without the doorbell, then one ring_rq().
  int post_recv_no_doorbell(QueuePair* qp, const mpr_recv_wr& wr);
  void ring_rq(QueuePair* qp);
  int post_send_mmio(QueuePair* qp, const mpr_send_wr& wr);
  int post_recv(QueuePair* qp, const mpr_recv_wr& wr);
  int poll_cq(CompletionQueue* cq, int n, mpr_wc* wc);
  void arm_cq(CompletionQueue* cq, bool solicited_only);
  // Blocks until at least one completion is available (busy polling: wakes
  // exactly when the NIC's CQE write lands) and returns it/them.
  int wait_poll(CompletionQueue* cq, int n, mpr_wc* wc);

  // The standard way to connect an RC QP to a peer: INIT, RTR, RTS.
  struct PeerInfo {
    uint32_t qpn;
    uint32_t psn;
    uint32_t ip;
    std::array<uint8_t, 6> mac;
  };
  PeerInfo local_info(const QueuePair* qp, uint32_t psn) const;
  // A UD QP: INIT (with its Q_Key), RTR, RTS (with its SQ PSN).
  void activate_ud(QueuePair* qp, uint32_t qkey, uint32_t sq_psn);
  // The address segment of a UD SEND to `remote` (an address handle).
  static mpr_wqe_ud ud_dest(const PeerInfo& remote, uint32_t qkey);
  // RESET -> INIT -> RTR -> RTS (`to_rts` false: stays in RTR, a QP that
  // only answers).
  void connect(QueuePair* qp, const PeerInfo& local, const PeerInfo& remote, uint8_t path_mtu,
               uint32_t access, uint8_t timeout = 14, uint8_t retry_cnt = 7, uint8_t rnr_retry = 7,
               uint8_t max_rd_atomic = 16, uint16_t udp_sport = 0, bool to_rts = true);

  // A UC QP: RESET -> INIT -> RTR -> RTS with the attributes UC has (no
  // ACK timeout, retries or READ/atomic limits; the firmware refuses them).
  // `to_rts` false: stays in RTR, a QP that only receives.
  void connect_uc(QueuePair* qp, const PeerInfo& local, const PeerInfo& remote, uint8_t path_mtu,
                  uint32_t access, uint16_t udp_sport = 0, bool to_rts = true);

  AddressSpace& address_space() { return as_; }
  Driver& driver() { return driver_; }
  uint32_t uar() const { return uar_; }

 private:
  static void dp_uar_write64(void* ctx, uint32_t off, uint64_t value);
  static void dp_uar_write_wc(void* ctx, uint32_t off, const void* data, uint32_t len);
  static int dp_copy_from_user(void* ctx, void* dst, uint64_t addr, uint32_t len);
  static int dp_copy_to_user(void* ctx, uint64_t addr, const void* src, uint32_t len);
  static mpr_dp_qp* dp_lookup_qp(void* ctx, uint32_t qpn);
  [[noreturn]] void fail(const std::string& what, const CommandResult& r);

  Driver& driver_;
  AddressSpace& as_;
  const HostConfig& host_;
  uint32_t uar_ = 0;
  mpr_dp_ops ops_{};
  std::map<uint32_t, std::unique_ptr<QueuePair>> qps_;
  std::vector<std::unique_ptr<CompletionQueue>> cqs_;
  std::map<uint32_t, std::unique_ptr<SharedReceiveQueue>> srqs_;
};

}  // namespace mprdma::host
