#include "vp/host/verbs.h"

#include <cerrno>
#include <cstring>

#include "vp/nic/firmware/firmware.h"

namespace mprdma::host {
namespace {

uint32_t log2_ceil(uint64_t v) {
  uint32_t l = 0;
  while ((uint64_t{1} << l) < v) ++l;
  return l;
}

std::array<uint8_t, 16> ipv4_gid(uint32_t ip) {
  std::array<uint8_t, 16> g{};
  g[10] = g[11] = 0xff;
  g[12] = static_cast<uint8_t>(ip >> 24);
  g[13] = static_cast<uint8_t>(ip >> 16);
  g[14] = static_cast<uint8_t>(ip >> 8);
  g[15] = static_cast<uint8_t>(ip);
  return g;
}

}  // namespace

VerbsContext::VerbsContext(Driver& driver, AddressSpace& as, const HostConfig& host)
    : driver_(driver), as_(as), host_(host) {
  uar_ = driver_.alloc_uar();
  ops_.uar_write64 = &VerbsContext::dp_uar_write64;
  ops_.uar_write_wc = &VerbsContext::dp_uar_write_wc;
  ops_.copy_from_user = &VerbsContext::dp_copy_from_user;
  ops_.copy_to_user = &VerbsContext::dp_copy_to_user;
  ops_.lookup_qp = &VerbsContext::dp_lookup_qp;
  ops_.ctx = this;
}

VerbsContext::~VerbsContext() {
  for (auto& cq : cqs_) {
    driver_.root_complex().remove_write_watch(&cq->written);
    driver_.forget_completion_event(cq->cqn);
  }
}

void VerbsContext::dp_uar_write64(void* ctx, uint32_t off, uint64_t value) {
  auto* self = static_cast<VerbsContext*>(ctx);
  self->driver_.uar_write64(self->uar_, off, value);
}

void VerbsContext::dp_uar_write_wc(void* ctx, uint32_t off, const void* data, uint32_t len) {
  auto* self = static_cast<VerbsContext*>(ctx);
  self->driver_.uar_write_wc(self->uar_, off, data, len);
}

int VerbsContext::dp_copy_from_user(void* ctx, void* dst, uint64_t addr, uint32_t len) {
  auto* self = static_cast<VerbsContext*>(ctx);
  if (!self->as_.mapped(addr, len)) return -EFAULT;
  self->as_.read(addr, dst, len);
  return 0;
}

int VerbsContext::dp_copy_to_user(void* ctx, uint64_t addr, const void* src, uint32_t len) {
  auto* self = static_cast<VerbsContext*>(ctx);
  if (!self->as_.mapped(addr, len)) return -EFAULT;
  self->as_.write(addr, src, len);
  return 0;
}

mpr_dp_qp* VerbsContext::dp_lookup_qp(void* ctx, uint32_t qpn) {
  auto* self = static_cast<VerbsContext*>(ctx);
  auto it = self->qps_.find(qpn);
  return it == self->qps_.end() ? nullptr : &it->second->dp;
}

void VerbsContext::fail(const std::string& what, const CommandResult& r) {
  throw VerbsError(driver_.name() + ": " + what + " failed: status " + std::to_string(r.status) +
                       " (" + nic::Firmware::status_name(r.status) + ") syndrome " +
                       std::to_string(r.syndrome),
                   r.status, r.syndrome);
}

uint32_t VerbsContext::alloc_pd() {
  mpr_cmd cmd{};
  cmd.hdr.opcode = MPR_CMD_ALLOC_PD;
  const CommandResult r = driver_.execute(cmd);
  if (!r.ok()) fail("ALLOC_PD", r);
  return r.out0;
}

MemoryRegion VerbsContext::reg_mr(uint32_t pd, uint64_t va, uint64_t length, uint32_t access) {
  const std::vector<uint64_t> pages = as_.frames(va, length);
  mpr_cmd cmd{};
  cmd.hdr.opcode = MPR_CMD_REG_MR;
  cmd.u.reg_mr.iova = va;
  cmd.u.reg_mr.length = length;
  cmd.u.reg_mr.pdn = pd;
  cmd.u.reg_mr.access = access;
  cmd.u.reg_mr.page_shift = 12;
  cmd.u.reg_mr.num_pages = static_cast<uint32_t>(pages.size());
  const CommandResult r = driver_.execute(cmd, pages.data(), pages.size() * 8);
  if (!r.ok()) fail("REG_MR", r);
  return MemoryRegion{r.out0, va, length};
}

void VerbsContext::dereg_mr(const MemoryRegion& mr) {
  mpr_cmd cmd{};
  cmd.hdr.opcode = MPR_CMD_DEREG_MR;
  cmd.u.dereg_mr.key = mr.key;
  const CommandResult r = driver_.execute(cmd);
  if (!r.ok()) fail("DEREG_MR", r);
}

CompletionQueue* VerbsContext::create_cq(uint32_t entries, uint8_t log_cqe_size, bool inline_recv,
                                         bool consumer_record) {
  auto cq = std::make_unique<CompletionQueue>();
  const uint32_t log_size = std::max<uint32_t>(1, log2_ceil(entries));
  const uint32_t log_slot = log_cqe_size ? log_cqe_size : MPR_CQ_LOG_CQE_SIZE_MIN;
  const uint64_t bytes = uint64_t{1} << (log_size + log_slot);
  SparseMemory& mem = driver_.memory();
  cq->ring_pa = mem.alloc_contiguous(bytes);
  cq->dbrec_pa = consumer_record ? mem.alloc_contiguous(64) : 0;
  mpr_cmd cmd{};
  cmd.hdr.opcode = MPR_CMD_CREATE_CQ;
  cmd.u.create_cq.base = cq->ring_pa;
  cmd.u.create_cq.dbrec = cq->dbrec_pa;
  cmd.u.create_cq.log_size = log_size;
  cmd.u.create_cq.eqn = driver_.async_eqn();
  cmd.u.create_cq.uar_index = uar_;
  cmd.u.create_cq.log_cqe_size = log_cqe_size;
  cmd.u.create_cq.flags = inline_recv ? MPR_CQ_F_INLINE_RECV : 0;
  const CommandResult r = driver_.execute(cmd);
  if (!r.ok()) fail("CREATE_CQ", r);
  cq->cqn = r.out0;
  cq->dp.buf = mem.ptr(cq->ring_pa, bytes);
  cq->dp.dbrec =
      consumer_record ? reinterpret_cast<volatile uint32_t*>(mem.ptr(cq->dbrec_pa, 4)) : nullptr;
  cq->dp.cqn = cq->cqn;
  cq->dp.log_size = log_size;
  cq->dp.log_cqe_size = log_slot;
  cq->dp.ci = 0;
  cq->dp.ops = &ops_;
  driver_.root_complex().add_write_watch(cq->ring_pa, bytes, &cq->written);
  CompletionQueue* raw = cq.get();
  driver_.on_completion_event(cq->cqn, [raw] { raw->event.notify(sc_core::SC_ZERO_TIME); });
  cqs_.push_back(std::move(cq));
  return raw;
}

void VerbsContext::destroy_cq(CompletionQueue* cq) {
  mpr_cmd cmd{};
  cmd.hdr.opcode = MPR_CMD_DESTROY_CQ;
  cmd.u.handle.handle = cq->cqn;
  const CommandResult r = driver_.execute(cmd);
  if (!r.ok()) fail("DESTROY_CQ", r);
  driver_.root_complex().remove_write_watch(&cq->written);
  driver_.forget_completion_event(cq->cqn);
  for (auto it = cqs_.begin(); it != cqs_.end(); ++it)
    if (it->get() == cq) {
      cqs_.erase(it);
      break;
    }
}

uint8_t transport_kind(const std::string& name) {
  // The same table as the guest provider's (sw_stack/dp); the scenario's
  // choice() has already refused other names.
  const int kind = mpr_transport_of_name(name.c_str());
  return kind < 0 ? uint8_t{MPR_TRANSPORT_DEFAULT} : static_cast<uint8_t>(kind);
}

QueuePair* VerbsContext::create_qp(uint32_t pd, CompletionQueue* send_cq, CompletionQueue* recv_cq,
                                   const QpCaps& caps) {
  auto qp = std::make_unique<QueuePair>();
  const uint32_t sq_log = std::max<uint32_t>(1, log2_ceil(caps.max_send_wr));
  const uint32_t rq_log = std::max<uint32_t>(1, log2_ceil(caps.max_recv_wr));
  // A send slot holds control, remote and atomic segments plus the larger of
  // the SGE list and the inline block.
  const uint64_t body = std::max<uint64_t>(caps.max_send_sge * sizeof(mpr_wqe_data),
                                           sizeof(mpr_wqe_inline) + caps.max_inline);
  // UD: control, address segment and the body.
  const bool ud = caps.qp_type == MPR_QPT_UD;
  const uint32_t sq_stride = std::max<uint32_t>(
      MPR_SQ_LOG_STRIDE_MIN,
      log2_ceil(sizeof(mpr_wqe_ctrl) +
                (ud ? sizeof(mpr_wqe_ud) : sizeof(mpr_wqe_raddr) + sizeof(mpr_wqe_atomic)) + body));
  const uint32_t rq_stride = std::max<uint32_t>(
      MPR_RQ_LOG_STRIDE_MIN, log2_ceil(caps.max_recv_sge * sizeof(mpr_wqe_data)));
  SparseMemory& mem = driver_.memory();
  const uint64_t sq_bytes = uint64_t{1} << (sq_log + sq_stride);
  const uint64_t rq_bytes = caps.srq ? 0 : uint64_t{1} << (rq_log + rq_stride);
  const uint64_t sq_pa = mem.alloc_contiguous(sq_bytes);
  const uint64_t rq_pa = caps.srq ? 0 : mem.alloc_contiguous(rq_bytes);

  mpr_cmd cmd{};
  cmd.hdr.opcode = MPR_CMD_CREATE_QP;
  auto& c = cmd.u.create_qp;
  c.sq_base = sq_pa;
  c.rq_base = rq_pa;
  c.pdn = pd;
  c.send_cqn = send_cq->cqn;
  c.recv_cqn = recv_cq->cqn;
  c.uar_index = uar_;
  c.qp_type = caps.qp_type;
  c.sq_log_size = static_cast<uint8_t>(sq_log);
  c.sq_log_stride = static_cast<uint8_t>(sq_stride);
  c.rq_log_size = caps.srq ? 0 : static_cast<uint8_t>(rq_log);
  c.rq_log_stride = caps.srq ? 0 : static_cast<uint8_t>(rq_stride);
  if (caps.srq) {
    c.flags = MPR_CREATE_QP_F_SRQ;
    c.srqn = caps.srq->srqn;
  }
  c.transport = caps.transport;
  c.sq_sig_all = caps.sq_sig_all;
  c.max_inline = caps.max_inline;
  const CommandResult r = driver_.execute(cmd);
  if (!r.ok()) fail("CREATE_QP", r);

  qp->qpn = r.out0;
  qp->send_cq = send_cq;
  qp->recv_cq = recv_cq;
  qp->sq_wrid.assign(size_t{1} << sq_log, 0);
  qp->rq_wrid.assign(size_t{1} << rq_log, 0);
  mpr_dp_qp& d = qp->dp;
  d.qpn = qp->qpn;
  d.state = MPR_DP_QPS_RESET;
  d.qp_type = caps.qp_type;
  d.max_inline = caps.max_inline;
  d.sq_sig_all = caps.sq_sig_all;
  d.sq = mpr_dp_wq{mem.ptr(sq_pa, sq_bytes), qp->sq_wrid.data(), sq_log, sq_stride, 0, 0,
                   caps.max_send_sge};
  if (!caps.srq)
    d.rq = mpr_dp_wq{mem.ptr(rq_pa, rq_bytes), qp->rq_wrid.data(), rq_log, rq_stride, 0, 0,
                     caps.max_recv_sge};
  d.srq = caps.srq ? &caps.srq->dp : nullptr;
  d.ops = &ops_;
  QueuePair* raw = qp.get();
  qps_[raw->qpn] = std::move(qp);
  return raw;
}

CommandResult VerbsContext::modify_qp(QueuePair* qp, const mpr_qp_attr& attr) {
  mpr_cmd cmd{};
  cmd.hdr.opcode = MPR_CMD_MODIFY_QP;
  cmd.u.modify_qp.qpn = qp->qpn;
  cmd.u.modify_qp.attr = attr;
  const CommandResult r = driver_.execute(cmd);
  if (r.ok() && (attr.attr_mask & MPR_QP_ATTR_STATE)) {
    qp->dp.state = attr.qp_state;
    if (attr.qp_state == MPR_QPS_RESET) {
      // The hardware queues restart at index 0 after RESET.
      qp->dp.sq.pi = qp->dp.sq.ci = qp->dp.rq.pi = qp->dp.rq.ci = 0;
    }
  }
  return r;
}

CommandResult VerbsContext::query_qp(QueuePair* qp, mpr_qp_attr& out) {
  mpr_cmd cmd{};
  cmd.hdr.opcode = MPR_CMD_QUERY_QP;
  cmd.u.qpn.qpn = qp->qpn;
  return driver_.execute(cmd, nullptr, 0, &out, sizeof out);
}

void VerbsContext::destroy_qp(QueuePair* qp) {
  mpr_cmd cmd{};
  cmd.hdr.opcode = MPR_CMD_DESTROY_QP;
  cmd.u.qpn.qpn = qp->qpn;
  const CommandResult r = driver_.execute(cmd);
  if (!r.ok()) fail("DESTROY_QP", r);
  qps_.erase(qp->qpn);
}

SharedReceiveQueue* VerbsContext::create_srq(uint32_t pd, uint32_t max_wr, uint32_t max_sge,
                                             uint32_t limit) {
  auto srq = std::make_unique<SharedReceiveQueue>();
  // One slot more than max_wr: the list's tail stays free.
  const uint32_t log_size = std::max<uint32_t>(1, log2_ceil(max_wr + 1));
  const uint32_t log_stride = std::max<uint32_t>(
      MPR_SRQ_LOG_STRIDE_MIN, log2_ceil(sizeof(mpr_wqe_srq_next) + max_sge * sizeof(mpr_wqe_data)));
  const uint64_t bytes = uint64_t{1} << (log_size + log_stride);
  SparseMemory& mem = driver_.memory();
  const uint64_t pa = mem.alloc_contiguous(bytes);
  mpr_cmd cmd{};
  cmd.hdr.opcode = MPR_CMD_CREATE_SRQ;
  cmd.u.create_srq.base = pa;
  cmd.u.create_srq.pdn = pd;
  cmd.u.create_srq.uar_index = uar_;
  cmd.u.create_srq.log_size = static_cast<uint8_t>(log_size);
  cmd.u.create_srq.log_stride = static_cast<uint8_t>(log_stride);
  cmd.u.create_srq.limit = limit;
  const CommandResult r = driver_.execute(cmd);
  if (!r.ok()) fail("CREATE_SRQ", r);
  srq->srqn = r.out0;
  srq->wrid.assign(size_t{1} << log_size, 0);
  mpr_dp_srq& d = srq->dp;
  d.buf = mem.ptr(pa, bytes);
  d.wr_id = srq->wrid.data();
  d.srqn = srq->srqn;
  d.log_size = log_size;
  d.log_stride = log_stride;
  d.max_sge = max_sge;
  d.ops = &ops_;
  mpr_dp_srq_init(&d);
  SharedReceiveQueue* raw = srq.get();
  srqs_[raw->srqn] = std::move(srq);
  return raw;
}

CommandResult VerbsContext::modify_srq(SharedReceiveQueue* srq, uint32_t attr_mask,
                                       uint32_t limit) {
  mpr_cmd cmd{};
  cmd.hdr.opcode = MPR_CMD_MODIFY_SRQ;
  cmd.u.modify_srq.srqn = srq->srqn;
  cmd.u.modify_srq.attr_mask = attr_mask;
  cmd.u.modify_srq.limit = limit;
  return driver_.execute(cmd);
}

CommandResult VerbsContext::query_srq(SharedReceiveQueue* srq) {
  mpr_cmd cmd{};
  cmd.hdr.opcode = MPR_CMD_QUERY_SRQ;
  cmd.u.handle.handle = srq->srqn;
  return driver_.execute(cmd);
}

CommandResult VerbsContext::destroy_srq(SharedReceiveQueue* srq) {
  mpr_cmd cmd{};
  cmd.hdr.opcode = MPR_CMD_DESTROY_SRQ;
  cmd.u.handle.handle = srq->srqn;
  const uint32_t srqn = srq->srqn;
  const CommandResult r = driver_.execute(cmd);
  if (r.ok()) srqs_.erase(srqn);
  return r;
}

int VerbsContext::post_srq_recv(SharedReceiveQueue* srq, const mpr_recv_wr& wr) {
  if (host_.post_overhead.ps) sc_core::wait(host_.post_overhead.sc());
  return mpr_dp_post_srq_recv(&srq->dp, &wr, 1);
}

int VerbsContext::post_send(QueuePair* qp, const mpr_send_wr& wr) {
  if (host_.post_overhead.ps) sc_core::wait(host_.post_overhead.sc());
  return mpr_dp_post_send(&qp->dp, &wr, 1);
}

int VerbsContext::post_send_no_doorbell(QueuePair* qp, const mpr_send_wr& wr) {
  if (host_.post_overhead.ps) sc_core::wait(host_.post_overhead.sc());
  return mpr_dp_post_send(&qp->dp, &wr, 0);
}

void VerbsContext::ring_sq(QueuePair* qp) { mpr_dp_ring_sq(&qp->dp); }

int VerbsContext::post_recv_no_doorbell(QueuePair* qp, const mpr_recv_wr& wr) {
  if (host_.post_overhead.ps) sc_core::wait(host_.post_overhead.sc());
  return mpr_dp_post_recv_db(&qp->dp, &wr, 0);
}

void VerbsContext::ring_rq(QueuePair* qp) { mpr_dp_ring_rq(&qp->dp); }

int VerbsContext::post_send_mmio(QueuePair* qp, const mpr_send_wr& wr) {
  if (host_.post_overhead.ps) sc_core::wait(host_.post_overhead.sc());
  return mpr_dp_post_send_mmio(&qp->dp, &wr);
}

int VerbsContext::post_recv(QueuePair* qp, const mpr_recv_wr& wr) {
  if (host_.post_overhead.ps) sc_core::wait(host_.post_overhead.sc());
  return mpr_dp_post_recv(&qp->dp, &wr);
}

int VerbsContext::poll_cq(CompletionQueue* cq, int n, mpr_wc* wc) {
  const int got = mpr_dp_poll_cq(&cq->dp, n, wc);
  if (got > 0 && host_.poll_overhead.ps) sc_core::wait(host_.poll_overhead.sc());
  return got;
}

int VerbsContext::wait_poll(CompletionQueue* cq, int n, mpr_wc* wc) {
  for (;;) {
    const int got = poll_cq(cq, n, wc);
    if (got) return got;
    sc_core::wait(cq->written);
  }
}

void VerbsContext::arm_cq(CompletionQueue* cq, bool solicited_only) {
  mpr_dp_arm_cq(&cq->dp, solicited_only ? 1 : 0);
}

VerbsContext::PeerInfo VerbsContext::local_info(const QueuePair* qp, uint32_t psn) const {
  return PeerInfo{qp->qpn, psn & 0xffffff, driver_.nic().ip, driver_.nic().mac};
}

void VerbsContext::activate_ud(QueuePair* qp, uint32_t qkey, uint32_t sq_psn) {
  mpr_qp_attr a{};
  a.attr_mask = MPR_QP_ATTR_STATE | MPR_QP_ATTR_PKEY_INDEX | MPR_QP_ATTR_PORT | MPR_QP_ATTR_QKEY;
  a.qp_state = MPR_QPS_INIT;
  a.port_num = 1;
  a.qkey = qkey;
  CommandResult r = modify_qp(qp, a);
  if (!r.ok()) fail("MODIFY_QP (UD) to INIT", r);
  a = mpr_qp_attr{};
  a.attr_mask = MPR_QP_ATTR_STATE;
  a.qp_state = MPR_QPS_RTR;
  r = modify_qp(qp, a);
  if (!r.ok()) fail("MODIFY_QP (UD) to RTR", r);
  a = mpr_qp_attr{};
  a.attr_mask = MPR_QP_ATTR_STATE | MPR_QP_ATTR_SQ_PSN;
  a.qp_state = MPR_QPS_RTS;
  a.sq_psn = sq_psn & 0xffffff;
  r = modify_qp(qp, a);
  if (!r.ok()) fail("MODIFY_QP (UD) to RTS", r);
}

mpr_wqe_ud VerbsContext::ud_dest(const PeerInfo& remote, uint32_t qkey) {
  mpr_wqe_ud d{};
  d.remote_qpn = remote.qpn;
  d.qkey = qkey;
  const auto gid = ipv4_gid(remote.ip);
  std::memcpy(d.dgid, gid.data(), 16);
  std::memcpy(d.dmac, remote.mac.data(), 6);
  d.hop_limit = 64;
  return d;
}

void VerbsContext::connect(QueuePair* qp, const PeerInfo& local, const PeerInfo& remote,
                           uint8_t path_mtu, uint32_t access, uint8_t timeout, uint8_t retry_cnt,
                           uint8_t rnr_retry, uint8_t max_rd_atomic, uint16_t udp_sport,
                           bool to_rts) {
  mpr_qp_attr a{};
  a.attr_mask =
      MPR_QP_ATTR_STATE | MPR_QP_ATTR_PKEY_INDEX | MPR_QP_ATTR_PORT | MPR_QP_ATTR_ACCESS_FLAGS;
  a.qp_state = MPR_QPS_INIT;
  a.port_num = 1;
  a.access_flags = access;
  CommandResult r = modify_qp(qp, a);
  if (!r.ok()) fail("MODIFY_QP to INIT", r);

  a = mpr_qp_attr{};
  a.attr_mask = MPR_QP_ATTR_STATE | MPR_QP_ATTR_AV | MPR_QP_ATTR_PATH_MTU | MPR_QP_ATTR_DEST_QPN |
                MPR_QP_ATTR_RQ_PSN | MPR_QP_ATTR_MAX_DEST_RD_ATOMIC | MPR_QP_ATTR_MIN_RNR_TIMER;
  a.qp_state = MPR_QPS_RTR;
  a.path_mtu = path_mtu;
  a.dest_qpn = remote.qpn;
  a.rq_psn = remote.psn;
  a.max_dest_rd_atomic = max_rd_atomic;
  a.min_rnr_timer = 12;  // 0.64 ms, perftest's value
  a.sgid_index = 0;
  a.hop_limit = 64;
  a.udp_sport = udp_sport;  // 0: the NIC derives it from the QPNs
  const auto gid = ipv4_gid(remote.ip);
  std::memcpy(a.dgid, gid.data(), 16);
  std::memcpy(a.dmac, remote.mac.data(), 6);
  r = modify_qp(qp, a);
  if (!r.ok()) fail("MODIFY_QP to RTR", r);
  if (!to_rts) return;

  a = mpr_qp_attr{};
  a.attr_mask = MPR_QP_ATTR_STATE | MPR_QP_ATTR_SQ_PSN | MPR_QP_ATTR_TIMEOUT |
                MPR_QP_ATTR_RETRY_CNT | MPR_QP_ATTR_RNR_RETRY | MPR_QP_ATTR_MAX_QP_RD_ATOMIC;
  a.qp_state = MPR_QPS_RTS;
  a.sq_psn = local.psn;
  a.timeout = timeout;
  a.retry_cnt = retry_cnt;
  a.rnr_retry = rnr_retry;
  a.max_rd_atomic = max_rd_atomic;
  r = modify_qp(qp, a);
  if (!r.ok()) fail("MODIFY_QP to RTS", r);
}

void VerbsContext::connect_uc(QueuePair* qp, const PeerInfo& local, const PeerInfo& remote,
                              uint8_t path_mtu, uint32_t access, uint16_t udp_sport, bool to_rts) {
  mpr_qp_attr a{};
  a.attr_mask =
      MPR_QP_ATTR_STATE | MPR_QP_ATTR_PKEY_INDEX | MPR_QP_ATTR_PORT | MPR_QP_ATTR_ACCESS_FLAGS;
  a.qp_state = MPR_QPS_INIT;
  a.port_num = 1;
  a.access_flags = access;
  CommandResult r = modify_qp(qp, a);
  if (!r.ok()) fail("MODIFY_QP (UC) to INIT", r);

  a = mpr_qp_attr{};
  a.attr_mask = MPR_QP_ATTR_STATE | MPR_QP_ATTR_AV | MPR_QP_ATTR_PATH_MTU | MPR_QP_ATTR_DEST_QPN |
                MPR_QP_ATTR_RQ_PSN;
  a.qp_state = MPR_QPS_RTR;
  a.path_mtu = path_mtu;
  a.dest_qpn = remote.qpn;
  a.rq_psn = remote.psn;
  a.sgid_index = 0;
  a.hop_limit = 64;
  a.udp_sport = udp_sport;  // 0: the NIC derives it from the QPNs
  const auto gid = ipv4_gid(remote.ip);
  std::memcpy(a.dgid, gid.data(), 16);
  std::memcpy(a.dmac, remote.mac.data(), 6);
  r = modify_qp(qp, a);
  if (!r.ok()) fail("MODIFY_QP (UC) to RTR", r);
  if (!to_rts) return;

  a = mpr_qp_attr{};
  a.attr_mask = MPR_QP_ATTR_STATE | MPR_QP_ATTR_SQ_PSN;
  a.qp_state = MPR_QPS_RTS;
  a.sq_psn = local.psn;
  r = modify_qp(qp, a);
  if (!r.ok()) fail("MODIFY_QP (UC) to RTS", r);
}

}  // namespace mprdma::host
